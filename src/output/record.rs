//! Per-record consumer output: `trace()` of each kind of datum, the column
//! heading, the line that starts each probe firing, and the newline that ends
//! it — all as the `dtrace` command prints them.
//!
//! Output of one firing when not quiet (and not `-F`):
//!
//! ```text
//! CPU     ID                    FUNCTION:NAME       <- once, before the first firing
//!   0      1                           :BEGIN   42  <- firing_prefix() + trace(42)
//! ```
//!
//! followed by [`end_of_firing`]'s newline.  In quiet mode neither the heading,
//! the prefix nor the trailing newline is printed.  With `-F` see
//! [`super::flow`].  When `dtrace` finishes it always prints one more newline
//! (see [`final_newline`]), even in quiet mode.

use super::memory::{self, TRACE_WIDTH};
use crate::ir::value::Frames;

/// One traced value, as the consumer sees the record: a recorded D value, borrowed
/// ([`crate::ir::value`]). A by-value record of `size` bytes (1, 2, 4 or 8) prints by its size
/// alone, as dtrace's does: 8-byte values print signed, 4-byte values as C `int` (0xffffffff
/// prints -1 whatever the D type), 2- and 1-byte values unsigned (`(char)-1` prints 255). A
/// string record prints as stored (see [`trace_string`] for the `strsize` padded form), a stack
/// by raw addresses (use [`super::stack`] with a symbol resolver for real output).
pub use crate::ir::value::{Datum, DatumRef};

/// The heading printed once, before the first firing, when neither quiet nor
/// `-F`.
pub fn probe_header() -> &'static str {
    "CPU     ID                    FUNCTION:NAME\n"
}

/// The heading printed once with `-F` (printed even in quiet mode).
pub fn flow_header() -> &'static str {
    "CPU FUNCTION                                 \n"
}

/// The heading dtrace prints before the first firing for the given modes
/// (empty when nothing is printed).
pub fn heading(flowindent: bool, quiet: bool) -> &'static str {
    if flowindent {
        flow_header()
    } else if quiet {
        ""
    } else {
        probe_header()
    }
}

/// Longest "func:name" dtrace shows in a firing prefix (its buffer holds
/// DTRACE_FUNCNAMELEN + DTRACE_NAMELEN + 2 bytes including the NUL).
const FUNC_NAME_MAX: usize = 192 + 64 + 1;

/// The start of each firing's output when not quiet and not `-F`:
/// `"%3d %6d %32s "` of CPU, probe ID and `func:name`.
pub fn firing_prefix(cpu: u32, id: u64, func: &str, name: &str, out: &mut Vec<u8>) {
    let mut fname = Vec::with_capacity(func.len() + name.len() + 1);
    fname.extend_from_slice(func.as_bytes());
    fname.push(b':');
    fname.extend_from_slice(name.as_bytes());
    fname.truncate(FUNC_NAME_MAX);
    // CPU and ID are C ints in dtrace's format.
    let line = format!("{:>3} {:>6} ", cpu as i32, id as u32 as i32);
    out.extend_from_slice(line.as_bytes());
    memory::pad_str(&fname, 32, out);
    out.push(b' ');
}

/// What ends a firing's output: a newline unless quiet.  (With `-F` but not
/// quiet the newline is printed too.)
pub fn end_of_firing(quiet: bool, out: &mut Vec<u8>) {
    if !quiet {
        out.push(b'\n');
    }
}

/// The newline dtrace prints after tracing stops and before it prints the
/// remaining aggregations (always, even in quiet mode).
pub fn final_newline(out: &mut Vec<u8>) {
    out.push(b'\n');
}

/// Output options that affect `trace()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceOpts {
    pub quiet: bool,
    /// `-x rawbytes`: by-reference data is always hex-dumped.
    pub rawbytes: bool,
}

/// `trace(x)`: appends exactly what dtrace prints for one traced datum.
pub fn trace_datum(d: &DatumRef, quiet: bool, out: &mut Vec<u8>) {
    trace_datum_opts(
        d,
        TraceOpts {
            quiet,
            rawbytes: false,
        },
        out,
    );
}

/// [`trace_datum`] with all options.
pub fn trace_datum_opts(d: &DatumRef, opts: TraceOpts, out: &mut Vec<u8>) {
    match *d {
        Datum::Int { value, size, .. } => trace_int(value, size, opts.quiet, out),
        Datum::Str(b) | Datum::Bytes(b) => trace_record(b, opts, out),
        Datum::Stack {
            frames, user, pid, ..
        } => {
            let words: Vec<u64>;
            let frames = match frames {
                Frames::Words(w) => w,
                f => {
                    words = f.iter().collect();
                    &words
                }
            };
            if user {
                super::stack::ustack(
                    pid,
                    frames,
                    None,
                    super::stack::DEFAULT_INDENT,
                    &|_| super::stack::Lookup::None,
                    out,
                );
            } else {
                super::stack::stack(
                    frames,
                    super::stack::DEFAULT_INDENT,
                    &|_| super::stack::Lookup::None,
                    out,
                );
            }
        }
        // address keys are named by the consumer; unnamed, they print as the address
        Datum::Sym(a) | Datum::Mod(a) => trace_symbolic(&format!("0x{a:x}"), out),
        Datum::Usym { addr, .. } | Datum::Umod { addr, .. } | Datum::Uaddr { addr, .. } => {
            trace_symbolic(&format!("0x{addr:x}"), out)
        }
    }
}

/// A by-value record of `size` bytes.
pub fn trace_int(value: i64, size: u8, quiet: bool, out: &mut Vec<u8>) {
    let (v, w): (i64, usize) = match size {
        1 => (i64::from(value as u8), 3),
        2 => (i64::from(value as u16), 5),
        4 => (i64::from(value as u32 as i32), 8),
        _ => (value, 16),
    };
    let s = if quiet {
        format!("{v}")
    } else {
        format!(" {v:>w$}")
    };
    out.extend_from_slice(s.as_bytes());
}

/// A raw record of any size, dispatched on its size as dtrace does: records
/// of 1, 2, 4 or 8 bytes print as (native-endian) integers even if they are
/// strings or arrays; anything else goes through the string-or-hex-dump
/// logic.
pub fn trace_record(bytes: &[u8], opts: TraceOpts, out: &mut Vec<u8>) {
    match bytes.len() {
        1 => trace_int(i64::from(bytes[0]), 1, opts.quiet, out),
        2 => trace_int(
            i64::from(u16::from_ne_bytes([bytes[0], bytes[1]])),
            2,
            opts.quiet,
            out,
        ),
        4 => {
            let mut b = [0u8; 4];
            b.copy_from_slice(bytes);
            trace_int(i64::from(u32::from_ne_bytes(b)), 4, opts.quiet, out)
        }
        8 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(bytes);
            trace_int(i64::from_ne_bytes(b), 8, opts.quiet, out)
        }
        _ => memory::print_bytes(bytes, TRACE_WIDTH, opts.quiet, opts.rawbytes, out),
    }
}

/// `trace()` of a string whose text is `text` (up to its first NUL) stored
/// in a record of `strsize` bytes (NUL padded), without materialising the
/// padded record.  Identical to tracing the padded record.
pub fn trace_string(text: &[u8], strsize: usize, opts: TraceOpts, out: &mut Vec<u8>) {
    let text = match text.iter().position(|&b| b == 0) {
        Some(n) => &text[..n],
        None => text,
    };
    let text = &text[..text.len().min(strsize)];
    let fast = !opts.rawbytes
        && !matches!(strsize, 1 | 2 | 4 | 8)
        && !text.is_empty()
        && text.len() < strsize
        && text
            .iter()
            .all(|&c| (0x20..=0x7e).contains(&c) || (0x07..=0x0d).contains(&c));
    if fast {
        // Printable text followed by NUL padding: the string form.
        if opts.quiet {
            out.extend_from_slice(text);
        } else {
            out.extend_from_slice(b"  ");
            memory::pad_str(text, TRACE_WIDTH, out);
        }
        return;
    }
    let mut rec = Vec::with_capacity(strsize);
    rec.extend_from_slice(text);
    rec.resize(strsize, 0);
    trace_record(&rec, opts, out);
}

/// `sym()`/`mod()`/`usym()`/`umod()`/`uaddr()` all print their text as
/// `"  %-50s"`.
pub fn trace_symbolic(text: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(b"  ");
    memory::pad_str(text.as_bytes(), -50, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut v = Vec::new();
        f(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn header_and_prefix() {
        assert_eq!(
            probe_header(),
            "CPU     ID                    FUNCTION:NAME\n"
        );
        assert_eq!(
            s(|o| firing_prefix(0, 1, "", "BEGIN", o)),
            "  0      1                           :BEGIN "
        );
        assert_eq!(
            s(|o| firing_prefix(3, 49321, "FooBarBaz", "entry", o)),
            "  3  49321                  FooBarBaz:entry "
        );
        assert_eq!(heading(false, true), "");
        assert_eq!(heading(true, true), flow_header());
        assert_eq!(flow_header().len(), 3 + 1 + 41 + 1);
    }

    #[test]
    fn ints() {
        let t = |value, size, quiet| {
            s(|o| {
                trace_datum(
                    &Datum::Int {
                        value,
                        size,
                        signed: true,
                    },
                    quiet,
                    o,
                )
            })
        };
        assert_eq!(t(42, 8, false), "               42");
        assert_eq!(t(-1, 8, false), "               -1");
        assert_eq!(t(-1, 4, false), "       -1");
        assert_eq!(t(0xffff_ffff, 4, true), "-1");
        assert_eq!(t(-1, 2, false), " 65535");
        assert_eq!(t(-1, 1, false), " 255");
        assert_eq!(t(97, 1, true), "97");
        assert_eq!(t(i64::MIN, 8, true), "-9223372036854775808");
    }

    #[test]
    fn qstring() {
        // trace/tst.qstring.d.out (quiet), plus dtrace's final newline.
        let o = TraceOpts {
            quiet: true,
            rawbytes: false,
        };
        let mut out = Vec::new();
        trace_string(b"this", 256, o, &mut out);
        trace_string(b" %should work.\n", 256, o, &mut out);
        trace_string(
            b"%don't w%orry -- this won't cause a %segfault.\n",
            256,
            o,
            &mut out,
        );
        final_newline(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "this %should work.\n%don't w%orry -- this won't cause a %segfault.\n\n"
        );
    }

    #[test]
    fn string_not_quiet_and_padded_record_agree() {
        let o = TraceOpts::default();
        let a = s(|out| trace_string(b"hello", 256, o, out));
        let mut rec = b"hello".to_vec();
        rec.resize(256, 0);
        let b = s(|out| trace_datum(&Datum::Str(&rec), false, out));
        assert_eq!(a, b);
        assert_eq!(a, "  hello                            ");
        // a full line as dtrace shows it
        let line = s(|out| {
            firing_prefix(0, 1, "", "BEGIN", out);
            trace_string(b"hello", 256, o, out);
            end_of_firing(false, out);
        });
        assert_eq!(
            line,
            "  0      1                           :BEGIN   hello                            \n"
        );
        // non-printable text: hex dump of the whole padded record
        let c = s(|out| trace_string(b"a\x01", 32, o, out));
        assert!(c.starts_with("\n             0  1"));
        assert_eq!(c.lines().count(), 4);
        // strsize 8: printed as a 64-bit integer, as dtrace does
        let d = s(|out| trace_string(b"ab", 8, o, out));
        assert_eq!(d, format!(" {:>16}", 0x6261));
        assert_eq!(
            s(|out| trace_string(b"", 256, o, out)).len(),
            1 + 78 + 16 * 78
        );
    }

    #[test]
    fn char_array_record() {
        // char d[3] = {4, 0, 0}: not a string (leading non-printable)
        let c = s(|out| trace_datum(&Datum::Bytes(&[4, 0, 0]), true, out));
        assert!(c.contains("         0: 04 00 00"));
        // char b[3] = "ab"
        let c = s(|out| trace_datum(&Datum::Bytes(b"ab\0"), true, out));
        assert_eq!(c, "ab");
    }

    #[test]
    fn symbolic() {
        let x = s(|o| trace_symbolic("genunix`cv_wait", o));
        assert_eq!(x.len(), 52);
        assert!(x.starts_with("  genunix`cv_wait "));
    }

    #[test]
    fn no_panics_on_arbitrary_records() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2000 {
            let len = (next() % 70) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| match next() % 4 {
                    0 => 0,
                    1 => b'a',
                    _ => next() as u8,
                })
                .collect();
            for quiet in [false, true] {
                for rawbytes in [false, true] {
                    let o = TraceOpts { quiet, rawbytes };
                    let mut out = Vec::new();
                    trace_record(&bytes, o, &mut out);
                    trace_string(&bytes, (next() % 40) as usize, o, &mut out);
                    trace_int(next() as i64, (next() % 10) as u8, quiet, &mut out);
                    firing_prefix(next() as u32, next(), "f", "n", &mut out);
                }
            }
        }
    }
}
