//! Byte-range output: how dtrace shows a traced by-reference datum (a string
//! or any record whose size is not 1, 2, 4 or 8 bytes) and `tracemem()`.
//!
//! A byte range is shown as a string when it looks like one (printable
//! characters, optionally followed by nothing but NUL bytes); otherwise, and
//! always for `tracemem()` or with `-x rawbytes`, it is shown as a hex dump:
//!
//! ```text
//! (blank line)
//!              0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f  0123456789abcdef
//!          0: 53 75 6e 4f 53                                   SunOS
//! ```

/// Column width dtrace uses when tracing a by-reference record (`-33`, i.e.
/// left-justified in 33 columns).
pub const TRACE_WIDTH: i32 = -33;

/// Spaces before each row of a hex dump.
const MARGIN: usize = 5;

/// C `isprint()` in the C locale for a (signed) `char`.
fn is_print(c: u8) -> bool {
    (0x20..=0x7e).contains(&c)
}

/// C `isspace()` in the C locale for a (signed) `char`.
fn is_space(c: u8) -> bool {
    c == b' ' || (0x09..=0x0d).contains(&c)
}

/// What dtrace counts as a printable character for string detection:
/// printable, white space, backspace or bell.
fn is_stringish(c: u8) -> bool {
    is_print(c) || is_space(c) || c == 0x08 || c == 0x07
}

/// Appends `s` padded to `width` columns like C `%*s`: a negative width
/// left-justifies.
pub(crate) fn pad_str(s: &[u8], width: i32, out: &mut Vec<u8>) {
    let w = width.unsigned_abs() as usize;
    let fill = w.saturating_sub(s.len());
    if width < 0 {
        out.extend_from_slice(s);
        out.resize(out.len() + fill, b' ');
    } else {
        out.resize(out.len() + fill, b' ');
        out.extend_from_slice(s);
    }
}

/// Appends `n` spaces.
pub(crate) fn spaces(n: usize, out: &mut Vec<u8>) {
    out.resize(out.len() + n, b' ');
}

/// How a byte range will be shown by [`print_bytes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BytesShape {
    /// Nothing at all (zero bytes).
    Empty,
    /// A NUL-terminated string whose text is the first `len` bytes.
    Terminated { len: usize },
    /// Every byte is printable and there is no NUL.
    Unterminated,
    /// A hex dump.
    Raw,
}

/// Classifies a byte range the way dtrace does before printing it.
pub fn bytes_shape(bytes: &[u8], force_raw: bool) -> BytesShape {
    if bytes.is_empty() {
        return BytesShape::Empty;
    }
    if force_raw {
        return BytesShape::Raw;
    }
    for (i, &c) in bytes.iter().enumerate() {
        if is_stringish(c) {
            continue;
        }
        if c == 0 && i > 0 && bytes[i + 1..].iter().all(|&b| b == 0) {
            return BytesShape::Terminated { len: i };
        }
        return BytesShape::Raw;
    }
    BytesShape::Unterminated
}

/// dtrace's `dt_print_bytes()`: prints a byte range as a string if it looks
/// like one, otherwise (or if `force_raw`, as `tracemem()` and the
/// `rawbytes` option do) as a hex dump.
///
/// `width` is the column width for the string form (negative
/// left-justifies); `trace()` uses [`TRACE_WIDTH`].
pub fn print_bytes(bytes: &[u8], width: i32, quiet: bool, force_raw: bool, out: &mut Vec<u8>) {
    match bytes_shape(bytes, force_raw) {
        BytesShape::Empty => {}
        BytesShape::Terminated { len } => {
            let s = &bytes[..len];
            if quiet {
                out.extend_from_slice(s);
            } else {
                out.push(b' ');
                if width < 0 {
                    out.push(b' ');
                }
                pad_str(s, width, out);
            }
        }
        BytesShape::Unterminated => {
            // dtrace's "%-*s": the '-' flag left-justifies whatever the
            // sign of the width; this form ignores quiet mode.
            out.extend_from_slice(b"  ");
            pad_str(bytes, -(width.unsigned_abs() as i32), out);
        }
        BytesShape::Raw => hex_dump(bytes, out),
    }
}

/// Appends a hex dump exactly as dtrace prints it (leading newline, column
/// header, 16 bytes per row with an ASCII column).
pub fn hex_dump(bytes: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'\n');
    spaces(MARGIN + 6, out);
    for &h in HEX {
        out.extend_from_slice(b"  ");
        out.push(h);
    }
    out.extend_from_slice(b"  0123456789abcdef\n");

    for (row, chunk) in bytes.chunks(16).enumerate() {
        spaces(MARGIN, out);
        let label = format!("{:x}", row * 16);
        pad_str(label.as_bytes(), 5, out);
        out.push(b':');
        for &b in chunk {
            out.push(b' ');
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        }
        for _ in chunk.len()..16 {
            out.extend_from_slice(b"   ");
        }
        out.extend_from_slice(b"  ");
        for &b in chunk {
            out.push(if (b' '..=b'~').contains(&b) { b } else { b'.' });
        }
        out.push(b'\n');
    }
}

/// `tracemem(addr, size[, dynsize])`: `bytes` is the whole record
/// (`size` bytes); `dynsize` is the run-time size if one was given.  As in
/// dtrace, a dynamic size of 0 or larger than the record shows the whole
/// record.
pub fn tracemem_dyn(bytes: &[u8], dynsize: Option<u64>, out: &mut Vec<u8>) {
    let n = match dynsize {
        Some(d) if d != 0 && d <= bytes.len() as u64 => d as usize,
        _ => bytes.len(),
    };
    hex_dump_or_nothing(&bytes[..n], out);
}

/// `tracemem(addr, size)`: always a hex dump (nothing for zero bytes).
pub fn tracemem(bytes: &[u8], out: &mut Vec<u8>) {
    hex_dump_or_nothing(bytes, out);
}

fn hex_dump_or_nothing(bytes: &[u8], out: &mut Vec<u8>) {
    if !bytes.is_empty() {
        hex_dump(bytes, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HDR: &str =
        "\n             0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f  0123456789abcdef\n";

    #[test]
    fn tracemem_smallsize() {
        // tracemem/tst.smallsize.d.out
        let mut out = Vec::new();
        tracemem(b"SunOS", &mut out);
        let want =
            format!("{HDR}         0: 53 75 6e 4f 53                                   SunOS\n");
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }

    #[test]
    fn tracemem_dynsize_rows() {
        // tracemem/tst.dynsize.d.out, i == 17 and i == 0 (whole record)
        let zeros = [0u8; 128];
        let mut out = Vec::new();
        tracemem_dyn(&zeros, Some(17), &mut out);
        let want = format!(
            "{HDR}         0: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00  ................\n        10: 00                                               .\n"
        );
        assert_eq!(String::from_utf8(out).unwrap(), want);

        let mut out = Vec::new();
        tracemem_dyn(&zeros, Some(0), &mut out);
        let s = String::from_utf8(out).unwrap();
        assert_eq!(s.lines().count(), 2 + 8);
        assert!(s.ends_with(
            "        70: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00  ................\n"
        ));
        let mut out = Vec::new();
        tracemem_dyn(&zeros, Some(1000), &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), s);
    }

    #[test]
    fn string_forms() {
        let mut out = Vec::new();
        print_bytes(b"hello\0\0\0", TRACE_WIDTH, false, false, &mut out);
        assert_eq!(out, b"  hello                            ");
        let mut out = Vec::new();
        print_bytes(b"hello\0\0\0", TRACE_WIDTH, true, false, &mut out);
        assert_eq!(out, b"hello");
        // no terminating NUL: padded even when quiet
        let mut out = Vec::new();
        print_bytes(b"abc", TRACE_WIDTH, true, false, &mut out);
        assert_eq!(out, b"  abc                              ");
        // leading NUL or junk after the NUL: raw dump
        assert_eq!(bytes_shape(b"\0abc", false), BytesShape::Raw);
        assert_eq!(bytes_shape(b"ab\0c", false), BytesShape::Raw);
        assert_eq!(bytes_shape(b"a\x01b\0", false), BytesShape::Raw);
        assert_eq!(
            bytes_shape(b"a\tb\x07\0", false),
            BytesShape::Terminated { len: 4 }
        );
        assert_eq!(bytes_shape(b"", false), BytesShape::Empty);
    }

    #[test]
    fn high_bytes_are_dots() {
        let mut out = Vec::new();
        hex_dump(&[0x7f, 0x80, 0xff, b'~', b' '], &mut out);
        let s = String::from_utf8(out).unwrap();
        assert!(s.ends_with("         0: 7f 80 ff 7e 20                                   ...~ \n"));
    }
}
