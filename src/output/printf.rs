//! DTrace `printf()` format engine (its compile-time half, types, parsing and checks, is
//! `crate::ir::printf`, re-exported here).
//!
//! Three stages, mirroring what libdtrace does:
//!
//! 1. [`parse`] splits a (lexer-decoded) format string into literal text and
//!    `%` conversions, rejecting malformed directives with `D_SYNTAX` errors.
//! 2. [`check`] / [`check_args`] validate the D argument types against each
//!    conversion at compile time (`D_PRINTF_*` errors).
//! 3. [`format`] / [`format_with`] render run-time values exactly the way
//!    dtrace does (which in turn hands a rebuilt directive to C `printf`).
//!
//! Notable dtrace behaviours reproduced here:
//! * a precision of 0 (static or dynamic) is dropped, so `%.0s` prints the
//!   whole string and `%.0d` of 0 prints `0`;
//! * a negative dynamic width left-justifies;
//! * in a directive, `-` cancels an earlier `0` and `0` cancels an earlier `-`;
//! * `%d` prints signed or unsigned depending on the argument type, `%i` always
//!   sign-extends, `%u %o %x %X %p` always zero-extend from the type size;
//! * `%p` prints bare hexadecimal (no `0x`);
//! * `%?` sets the width to 16 (LP64 pointer width);
//! * `%Y` prints `YYYY Mon dd hh:mm:ss`, `%T` prints the RFC 822 form with
//!   the ISO week-based year (`%G`), both in the context's time zone.

use std::fmt::Write as _;

pub use crate::ir::printf::*;

/// Largest width or precision actually honoured when padding output, so that
/// absurd directives such as `%2000000000d` cannot exhaust memory.
const MAX_PAD: usize = 1 << 20;

/// An f64 has at most 1074 fractional decimal digits (and fewer significant
/// ones), so formatting with more digits than this only appends zeros.
const EXACT_DIGITS: usize = 1100;

// ---------------------------------------------------------------------------
// Run-time values and context
// ---------------------------------------------------------------------------

/// One run-time argument: a recorded D value, borrowed ([`crate::ir::value`]). A string
/// conversion takes text a caller rendered (a stack, a symbol) as [`Datum::Bytes`].
pub use crate::ir::value::{AsView, Datum, DatumRef};

/// Symbol resolver: address → `module`name[+0xoff]` text.
pub type Resolver<'r> = &'r dyn Fn(u64) -> Option<String>;
/// Time zone: UTC seconds → (offset east of UTC in seconds, abbreviation).
pub type TimeZone<'r> = &'r dyn Fn(i64) -> (i64, String);

/// Run-time context.
#[derive(Clone, Copy, Default)]
pub struct Context<'a> {
    /// Kernel symbol lookup for `%a`; `0x…` is printed when absent/None.
    pub sym: Option<Resolver<'a>>,
    /// User symbol lookup for `%A`; `0x…` is printed when absent/None.
    pub usym: Option<Resolver<'a>>,
    /// Time zone for `%Y` / `%T`; the machine's local zone when None, as dtrace's
    /// (`super::localtime`).
    pub tz: Option<TimeZone<'a>>,
    /// Aggregation results consumed by successive `%@` conversions (the
    /// last one is reused when there are more `%@` than values).
    pub agg: &'a [DatumRef<'a>],
    /// Thousands separator for `%'d` (None: C locale, no grouping).
    pub thousands_sep: Option<u8>,
}

impl<'a> Context<'a> {
    /// Context with only a kernel symbol resolver.
    pub fn with_resolver(r: Resolver<'a>) -> Context<'a> {
        Context {
            sym: Some(r),
            ..Context::default()
        }
    }
}

// ---------------------------------------------------------------------------
// Run-time formatting
// ---------------------------------------------------------------------------

/// Format `args` (records in order: dynamic width, dynamic precision, value
/// for each conversion) without symbol resolution, in UTC.
pub fn format<V: AsView>(fmt: &Format, args: &[V], out: &mut Vec<u8>) -> Result<(), FormatError> {
    format_with(fmt, args, &Context::default(), out).map(|_| ())
}

/// Format with a context; returns the number of records consumed.  On error,
/// output produced before the failing conversion is kept in `out`.
pub fn format_with<V: AsView>(
    fmt: &Format,
    args: &[V],
    ctx: &Context,
    out: &mut Vec<u8>,
) -> Result<usize, FormatError> {
    let mut ai = 0usize;
    let mut aggi = 0usize;
    for piece in &fmt.pieces {
        let c = match piece {
            Piece::Text(t) => {
                out.extend_from_slice(t.as_bytes());
                continue;
            }
            Piece::Conv(c) => c,
        };
        let spec = c.spec();
        if spec.print == PrintKind::Pct {
            out.push(b'%');
            continue;
        }
        let mut width: i32 = match c.width {
            Count::Fixed(n) => n,
            _ => 0,
        };
        let mut prec: i32 = match c.precision {
            Count::Fixed(n) => n,
            _ => 0,
        };
        if c.width == Count::Star {
            width = get_int(args.get(ai).map(AsView::view))?;
            ai += 1;
        }
        if c.precision == Count::Star {
            prec = get_int(args.get(ai).map(AsView::view))?;
            ai += 1;
        }
        let value = if c.flags.agg {
            if ctx.agg.is_empty() {
                return Err(FormatError::mismatch());
            }
            let v = ctx.agg[aggi.min(ctx.agg.len() - 1)];
            aggi += 1;
            v
        } else {
            let v = args.get(ai).ok_or_else(FormatError::mismatch)?.view();
            ai += 1;
            v
        };

        let left = width < 0 || c.flags.left;
        let mut w = width.unsigned_abs() as usize;
        if spec.print == PrintKind::Stack && c.flags.left {
            w = 0;
        }
        let sp = field_spec(c, left, w, prec, ctx.thousands_sep);
        print_value(spec, &sp, &value, ctx, out)?;
    }
    Ok(ai)
}

/// The C field of a conversion: its flags, the width `w` (left-justified when `left`) and
/// the precision (dropped when 0, as dtrace drops it), both clamped to [`MAX_PAD`].
fn field_spec(c: &Conversion, left: bool, w: usize, prec: i32, sep: Option<u8>) -> Spec {
    Spec {
        alt: c.flags.alt,
        zero: c.flags.zero,
        left,
        plus: c.flags.plus,
        space: c.flags.space,
        group: c.flags.group,
        width: w.min(MAX_PAD),
        prec: if prec > 0 {
            Some((prec as usize).min(MAX_PAD))
        } else {
            None
        },
        sep,
    }
}

/// Dynamic width/precision: the record is read as a C `int`.
fn get_int(v: Option<DatumRef>) -> Result<i32, FormatError> {
    match v {
        Some(Datum::Int { value, size, .. }) => Ok(sign_extend(value, usize::from(size)) as i32),
        _ => Err(FormatError::mismatch()),
    }
}

fn sign_extend(raw: i64, size: usize) -> i64 {
    match size {
        1 => raw as i8 as i64,
        2 => raw as i16 as i64,
        4 => raw as i32 as i64,
        _ => raw,
    }
}

fn zero_extend(raw: i64, size: usize) -> u64 {
    match size {
        1 => raw as u8 as u64,
        2 => raw as u16 as u64,
        4 => raw as u32 as u64,
        _ => raw as u64,
    }
}

/// The string bytes a C `%s` would see (up to the first NUL).
fn c_str(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// The bytes a string conversion reads of a value: a string's, raw bytes, or text the caller
/// rendered; a stack reads as no text (the consumer prints stacks by their own actions).
fn text<'a>(v: &DatumRef<'a>) -> Option<&'a [u8]> {
    match *v {
        Datum::Str(b) | Datum::Bytes(b) => Some(b),
        Datum::Stack { .. } => Some(b""),
        _ => None,
    }
}

fn print_value(
    spec: &ConvSpec,
    sp: &Spec,
    v: &DatumRef,
    ctx: &Context,
    out: &mut Vec<u8>,
) -> Result<(), FormatError> {
    let conv = spec.ofmt.as_bytes()[spec.ofmt.len() - 1];
    let wide = spec.ofmt.len() > 1;
    match spec.print {
        PrintKind::Pct => out.push(b'%'),
        PrintKind::Sint | PrintKind::Uint | PrintKind::Dint => {
            let (raw, size, signed) = match *v {
                Datum::Int {
                    value,
                    size,
                    signed,
                } => (value, usize::from(size), signed),
                _ => return Err(FormatError::mismatch()),
            };
            let signed = match spec.print {
                PrintKind::Sint => true,
                PrintKind::Uint => false,
                _ => signed,
            };
            let conv = if spec.print == PrintKind::Dint && !signed {
                b'u'
            } else {
                conv
            };
            if conv == b'c' {
                let n = sign_extend(raw, size);
                if wide {
                    let mut buf = [0u8; 4];
                    let s: &[u8] = match char::from_u32(n as u32) {
                        Some(ch) => ch.encode_utf8(&mut buf).as_bytes(),
                        None => b"",
                    };
                    c_string(out, sp, s);
                } else {
                    c_string(out, sp, &[n as u8]);
                }
            } else if signed {
                let n = sign_extend(raw, size);
                c_int(out, sp, conv, n < 0, n.unsigned_abs());
            } else {
                c_int(out, sp, conv, false, zero_extend(raw, size));
            }
        }
        PrintKind::Fp => {
            let f = match *v {
                Datum::Int {
                    value,
                    size,
                    signed: true,
                } => sign_extend(value, usize::from(size)) as f64,
                Datum::Int { value, size, .. } => zero_extend(value, usize::from(size)) as f64,
                _ => return Err(FormatError::mismatch()),
            };
            c_float(out, sp, conv, f);
        }
        PrintKind::Addr | PrintKind::UAddr => {
            let s = match *v {
                Datum::Int { value, size, .. } => {
                    let addr = zero_extend(value, usize::from(size));
                    let r = if spec.print == PrintKind::Addr {
                        ctx.sym
                    } else {
                        ctx.usym
                    };
                    r.and_then(|r| r(addr))
                        .unwrap_or_else(|| format!("0x{addr:x}"))
                        .into_bytes()
                }
                _ => match text(v) {
                    Some(b) => c_str(b).to_vec(),
                    None => return Err(FormatError::mismatch()),
                },
            };
            c_string(out, sp, &s);
        }
        PrintKind::Stack => match text(v) {
            Some(b) => out.extend_from_slice(b),
            None => return Err(FormatError::mismatch()),
        },
        PrintKind::Time | PrintKind::Time822 => {
            let t = match *v {
                Datum::Int { value, .. } => value,
                _ => return Err(FormatError::mismatch()),
            };
            let s = if spec.print == PrintKind::Time {
                time_y(t, ctx)
            } else {
                time_822(t, ctx)
            };
            c_string(out, sp, s.as_bytes());
        }
        PrintKind::Port => {
            let n = match *v {
                Datum::Int { value, .. } => value as u16,
                _ => return Err(FormatError::mismatch()),
            };
            c_string(out, sp, n.to_string().as_bytes());
        }
        PrintKind::Cstr | PrintKind::InetAddr => match text(v) {
            Some(b) => c_string(out, sp, &super::shown::string_value(c_str(b))),
            None => return Err(FormatError::mismatch()),
        },
        PrintKind::Estr => match text(v) {
            Some(b) => c_string(out, sp, &escape(b)),
            None => return Err(FormatError::mismatch()),
        },
        PrintKind::Echr => match *v {
            Datum::Int { value, .. } => c_string(out, sp, &escape(&[value as u8])),
            _ => return Err(FormatError::mismatch()),
        },
        PrintKind::Wstr => match (v, text(v)) {
            // a `wchar_t *` argument, read and converted to UTF-8 by the VM (`wstringof`)
            (Datum::Str(b), _) => {
                let s = String::from_utf8_lossy(c_str(b));
                c_wstring(out, sp, &super::shown::string_value_text(&s))
            }
            (_, Some(b)) => {
                // dtx's wchar_t is Windows' (2 bytes, UTF-16), up to the first NUL
                let units = b
                    .chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]))
                    .take_while(|&u| u != 0);
                let s: String = char::decode_utf16(units)
                    .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
                    .collect();
                c_wstring(out, sp, &super::shown::string_value_text(&s));
            }
            _ => return Err(FormatError::mismatch()),
        },
    }
    Ok(())
}

/// dtrace's string escaping for `%S` / `%C`: stops after an escaped NUL.
fn escape(b: &[u8]) -> Vec<u8> {
    let mut o = Vec::with_capacity(b.len());
    for &c in b {
        let esc = match c {
            0 => Some(b'0'),
            7 => Some(b'a'),
            8 => Some(b'b'),
            12 => Some(b'f'),
            b'\n' => Some(b'n'),
            b'\r' => Some(b'r'),
            b'\t' => Some(b't'),
            11 => Some(b'v'),
            b'"' => Some(b'"'),
            b'\\' => Some(b'\\'),
            _ => None,
        };
        if let Some(e) = esc {
            o.push(b'\\');
            o.push(e);
        } else if c == b' ' || (b'!'..=b'~').contains(&c) {
            o.push(c);
        } else {
            o.push(b'\\');
            o.push(b'0' + (c >> 6));
            o.push(b'0' + ((c >> 3) & 7));
            o.push(b'0' + (c & 7));
        }
        if c == 0 {
            break;
        }
    }
    o
}

// ---------------------------------------------------------------------------
// C printf emulation
// ---------------------------------------------------------------------------

/// A rebuilt C directive: flags, width and precision.
#[derive(Clone, Copy, Debug, Default)]
struct Spec {
    alt: bool,
    zero: bool,
    left: bool,
    plus: bool,
    space: bool,
    group: bool,
    width: usize,
    prec: Option<usize>,
    sep: Option<u8>,
}

fn pad(out: &mut Vec<u8>, c: u8, n: usize) {
    out.extend(std::iter::repeat_n(c, n));
}

/// Emit `prefix` + `body` in a field of `sp.width`; `zeros` pads with '0'
/// between prefix and body instead of spaces before the prefix.
fn field(out: &mut Vec<u8>, sp: &Spec, prefix: &[u8], body: &[u8], zeros: bool) {
    let len = prefix.len() + body.len();
    let fill = sp.width.saturating_sub(len);
    if sp.left {
        out.extend_from_slice(prefix);
        out.extend_from_slice(body);
        pad(out, b' ', fill);
    } else if zeros {
        out.extend_from_slice(prefix);
        pad(out, b'0', fill);
        out.extend_from_slice(body);
    } else {
        pad(out, b' ', fill);
        out.extend_from_slice(prefix);
        out.extend_from_slice(body);
    }
}

/// C `%s` of a byte string (precision limits bytes; `0` flag ignored).
fn c_string(out: &mut Vec<u8>, sp: &Spec, s: &[u8]) {
    let s = match sp.prec {
        Some(p) if p < s.len() => &s[..p],
        _ => s,
    };
    field(out, sp, b"", s, false);
}

/// C `%ls`: precision limits output bytes without splitting characters.
fn c_wstring(out: &mut Vec<u8>, sp: &Spec, s: &str) {
    let mut end = s.len();
    if let Some(p) = sp.prec {
        end = 0;
        for (i, ch) in s.char_indices() {
            if i + ch.len_utf8() > p {
                break;
            }
            end = i + ch.len_utf8();
        }
    }
    field(out, sp, b"", &s.as_bytes()[..end], false);
}

fn group_digits(d: &str, sep: u8) -> String {
    let n = d.len();
    let mut s = String::with_capacity(n + n / 3);
    for (i, ch) in d.chars().enumerate() {
        if i > 0 && (n - i).is_multiple_of(3) {
            s.push(sep as char);
        }
        s.push(ch);
    }
    s
}

/// C integer conversion (`d i u o x X`) of a sign and magnitude.
fn c_int(out: &mut Vec<u8>, sp: &Spec, conv: u8, neg: bool, mag: u64) {
    let signed = matches!(conv, b'd' | b'i');
    let mut digits = match conv {
        b'o' => format!("{mag:o}"),
        b'x' => format!("{mag:x}"),
        b'X' => format!("{mag:X}"),
        _ => mag.to_string(),
    };
    if sp.group && matches!(conv, b'd' | b'i' | b'u') {
        if let Some(sep) = sp.sep {
            digits = group_digits(&digits, sep);
        }
    }
    if let Some(p) = sp.prec {
        if p == 0 && mag == 0 {
            digits.clear();
        }
        if digits.len() < p {
            digits = "0".repeat(p - digits.len()) + &digits;
        }
    }
    if sp.alt && conv == b'o' && !digits.starts_with('0') {
        digits.insert(0, '0');
    }
    let mut prefix = String::new();
    if signed {
        if neg {
            prefix.push('-');
        } else if sp.plus {
            prefix.push('+');
        } else if sp.space {
            prefix.push(' ');
        }
    }
    if sp.alt && mag != 0 {
        match conv {
            b'x' => prefix.push_str("0x"),
            b'X' => prefix.push_str("0X"),
            _ => {}
        }
    }
    let zeros = sp.zero && sp.prec.is_none();
    field(out, sp, prefix.as_bytes(), digits.as_bytes(), zeros);
}

/// `d.ddde±XX` with `p` fraction digits (C `%e` body, lowercase).
fn fmt_e(v: f64, p: usize, alt: bool) -> String {
    // Digits past EXACT_DIGITS are always zero for an f64 (and Rust caps
    // precision at u16::MAX), so format fewer and append the zeros.
    let q = p.min(EXACT_DIGITS);
    let s = format!("{v:.q$e}");
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut r = String::from(mant);
    pad_str(&mut r, '0', p - q);
    if alt && p == 0 {
        r.push('.');
    }
    let _ = write!(
        r,
        "e{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.unsigned_abs()
    );
    r
}

fn fmt_f(v: f64, p: usize, alt: bool) -> String {
    let q = p.min(EXACT_DIGITS);
    let mut r = format!("{v:.q$}");
    pad_str(&mut r, '0', p - q);
    if alt && p == 0 {
        r.push('.');
    }
    r
}

fn pad_str(s: &mut String, c: char, n: usize) {
    s.extend(std::iter::repeat_n(c, n));
}

/// Decimal exponent of `v` after rounding to `p` significant digits.
fn exp10_after_round(v: f64, p: usize) -> i32 {
    let s = format!("{:.*e}", p.saturating_sub(1).min(EXACT_DIGITS), v);
    s.split_once('e')
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or(0)
}

fn strip_zeros(s: &str) -> String {
    if !s.contains('.') {
        return s.to_string();
    }
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// C floating conversion (`e E f F g G`).
fn c_float(out: &mut Vec<u8>, sp: &Spec, conv: u8, v: f64) {
    let upper = conv.is_ascii_uppercase();
    let mut prefix = String::new();
    if v.is_sign_negative() {
        prefix.push('-');
    } else if sp.plus {
        prefix.push('+');
    } else if sp.space {
        prefix.push(' ');
    }
    let a = v.abs();
    if !a.is_finite() {
        let body = match (a.is_nan(), upper) {
            (true, false) => "nan",
            (true, true) => "NAN",
            (false, false) => "inf",
            (false, true) => "INF",
        };
        field(out, sp, prefix.as_bytes(), body.as_bytes(), false);
        return;
    }
    let p = sp.prec.unwrap_or(6);
    let mut body = match conv.to_ascii_lowercase() {
        b'e' => fmt_e(a, p, sp.alt),
        b'g' => {
            let p = p.max(1);
            let x = exp10_after_round(a, p);
            if (p as i64) > i64::from(x) && x >= -4 {
                let fp = (p as i64 - 1 - i64::from(x)).max(0) as usize;
                let s = fmt_f(a, fp, sp.alt);
                if sp.alt {
                    s
                } else {
                    strip_zeros(&s)
                }
            } else {
                let s = fmt_e(a, p - 1, sp.alt);
                if sp.alt {
                    s
                } else {
                    let (m, e) = s.split_once('e').unwrap_or((&s, ""));
                    format!("{}e{}", strip_zeros(m), e)
                }
            }
        }
        _ => fmt_f(a, p, sp.alt),
    };
    if upper {
        body = body.to_ascii_uppercase();
    }
    field(out, sp, prefix.as_bytes(), body.as_bytes(), sp.zero);
}

// ---------------------------------------------------------------------------
// Time
// ---------------------------------------------------------------------------

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];

struct Tm {
    year: i64,
    mon: usize,
    mday: i64,
    hour: i64,
    min: i64,
    sec: i64,
    wday: i64,
    yday: i64,
    zone: String,
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// Civil date from days since 1970-01-01.
fn civil(days: i64) -> (i64, usize, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, (m - 1) as usize, d)
}

/// Broken-down local time of a nanosecond timestamp (hrtime_t semantics:
/// the raw value is signed and divided with truncation).
fn local_tm(ns: i64, ctx: &Context) -> Tm {
    let secs = ns / 1_000_000_000;
    let (off, zone) = match ctx.tz {
        Some(tz) => tz(secs),
        None => super::localtime::system_zone(secs),
    };
    let t = secs.saturating_add(off);
    let days = t.div_euclid(86_400);
    let rem = t.rem_euclid(86_400);
    let (year, mon, mday) = civil(days);
    const CUM: [i64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let yday = CUM[mon] + mday - 1 + i64::from(mon >= 2 && is_leap(year));
    Tm {
        year,
        mon,
        mday,
        hour: rem / 3600,
        min: rem % 3600 / 60,
        sec: rem % 60,
        wday: (days + 4).rem_euclid(7),
        yday,
        zone,
    }
}

/// `%Y`: ctime rearranged as `YYYY Mon dd hh:mm:ss`.
fn time_y(ns: i64, ctx: &Context) -> String {
    let tm = local_tm(ns, ctx);
    // ctime's year field is "%d\n"; dtrace copies its first four bytes.
    let year: String = format!("{}\n", tm.year).chars().take(4).collect();
    format!(
        "{year} {} {:2} {:02}:{:02}:{:02}",
        MONTHS[tm.mon], tm.mday, tm.hour, tm.min, tm.sec
    )
}

/// Days since the start of the ISO week-based year (glibc's algorithm).
fn iso_week_days(yday: i64, wday: i64) -> i64 {
    let big = (366 / 7 + 2) * 7;
    yday - (yday - wday + 4 + big).rem_euclid(7) + 3
}

fn iso_year(tm: &Tm) -> i64 {
    let mut year = tm.year;
    let days = iso_week_days(tm.yday, tm.wday);
    if days < 0 {
        year -= 1;
    } else {
        let len = if is_leap(year) { 366 } else { 365 };
        if iso_week_days(tm.yday - len, tm.wday) >= 0 {
            year += 1;
        }
    }
    year
}

/// `%T`: strftime `%a, %d %b %G %T %Z` (dtrace really uses the ISO year).
fn time_822(ns: i64, ctx: &Context) -> String {
    let tm = local_tm(ns, ctx);
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} {}",
        DAYS[tm.wday as usize],
        tm.mday,
        MONTHS[tm.mon],
        iso_year(&tm),
        tm.hour,
        tm.min,
        tm.sec,
        tm.zone
    )
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    fn i32v(n: i64) -> DatumRef<'static> {
        Datum::int(n, 4, true)
    }

    fn fmt_ctx(f: &str, args: &[DatumRef], ctx: &Context) -> String {
        let p = parse(f).expect("parse");
        let mut out = Vec::new();
        format_with(&p, args, ctx, &mut out).expect("format");
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Formats in UTC, whatever the machine's zone.
    fn fmt(f: &str, args: &[DatumRef]) -> String {
        let utc = |_: i64| (0, "UTC".to_string());
        let ctx = Context {
            tz: Some(&utc),
            ..Context::default()
        };
        fmt_ctx(f, args, &ctx)
    }

    fn perr(f: &str) -> FormatError {
        parse(f).expect_err("expected parse error")
    }

    fn cerr(f: &str, func: &str, args: &[ArgType]) -> FormatError {
        check(&parse(f).expect("parse"), func, args).expect_err("expected check error")
    }

    fn int(size: u8, signed: bool) -> ArgType {
        ArgType::int(size, signed)
    }

    #[test]
    fn parse_pieces() {
        let f = parse("x = %-08.3lld%%y\n").unwrap();
        assert_eq!(f.pieces.len(), 4);
        assert_eq!(f.pieces[0], Piece::Text("x = ".into()));
        let Piece::Conv(c) = &f.pieces[1] else {
            panic!()
        };
        assert_eq!(c.index, 1);
        assert_eq!(c.name, "lld");
        assert_eq!(c.length(), "ll");
        assert_eq!(c.conv_char(), 'd');
        assert_eq!(c.text, "%-08.3lld");
        // '0' after '-' cancels the left flag.
        assert!(c.flags.zero && !c.flags.left);
        assert_eq!(c.width, Count::Fixed(8));
        assert_eq!(c.precision, Count::Fixed(3));
        let Piece::Conv(c2) = &f.pieces[2] else {
            panic!()
        };
        assert_eq!(c2.name, "%");
        assert_eq!(c2.index, 2);
        assert_eq!(f.pieces[3], Piece::Text("y\n".into()));
        let f = parse("%*.*s").unwrap();
        assert_eq!(f.arg_count(), 3);
        let f = parse("%?p").unwrap();
        let Piece::Conv(c) = &f.pieces[0] else {
            panic!()
        };
        assert_eq!(c.width, Count::Fixed(16));
        assert_eq!(parse("").unwrap().pieces, vec![]);
    }

    #[test]
    fn parse_errors() {
        let e = perr("%3$d");
        assert_eq!(e.tag, "D_SYNTAX");
        assert_eq!(
            e.message,
            "format conversion #1 uses unsupported positional format (%n$)"
        );
        assert_eq!(
            perr("%3").message,
            "format conversion #1 name expected before end of format string"
        );
        assert_eq!(
            perr("a %d %Z").message,
            "format conversion #2 is undefined: %Z"
        );
        assert_eq!(
            perr("%**d").message,
            "format conversion #1 has more than one '*' specified for the output precision"
        );
        assert_eq!(
            perr("%.1.2d").message,
            "format conversion #1 has more than one '.' specified"
        );
        assert_eq!(
            perr("%5%").message,
            "format conversion #1 cannot be combined with other format flags: %%"
        );
        assert_eq!(
            perr("%hhd").message,
            "format conversion #1 is undefined: %hhd"
        );
        assert_eq!(perr("%zd").message, "format conversion #1 is undefined: %z");
        assert_eq!(perr("%jd").message, "format conversion #1 is undefined: %j");
        assert_eq!(
            perr("%lllllllllld").message,
            "format conversion #1 is undefined: %lllllld"
        );
        assert_eq!(
            perr("%%%").message,
            "format conversion #2 name expected before end of format string"
        );
    }

    #[test]
    fn check_errors() {
        let e = cerr("hello %@d", "printf", &[int(4, true)]);
        assert_eq!(e.tag, "D_PRINTF_AGG_CONV");
        assert_eq!(
            e.message,
            "%@ conversion requires an aggregation and is not for use with printf( )"
        );
        let e = cerr("x = %d y = %d\n", "printf", &vec![int(4, true); 3]);
        assert_eq!(e.tag, "D_PRINTF_ARG_EXTRA");
        assert_eq!(
            e.message,
            "printf( ) prototype mismatch: only 2 arguments required by this format string"
        );
        let e = cerr("%?d\n", "printf", &vec![int(4, true); 2]);
        assert_eq!(e.tag, "D_PRINTF_ARG_EXTRA");
        let e = cerr("%s", "printf", &[]);
        assert_eq!(e.tag, "D_PRINTF_ARG_PROTO");
        assert_eq!(
            e.message,
            "printf( ) prototype mismatch: conversion #1 (%s) is missing a corresponding value argument"
        );
        let e = cerr(
            "hello %d %d",
            "printf",
            &[int(4, true), ArgType::Aggregation],
        );
        assert_eq!(e.tag, "D_PRINTF_ARG_TYPE");
        assert_eq!(
            e.message,
            "printf( ) argument #3 is incompatible with conversion #2 prototype:\n\
             \tconversion: %d\n\t prototype: char, short, int, long, or long long\n\
             \t  argument: aggregation"
        );
        let e = cerr("%s\n", "printf", &[ArgType::Void]);
        assert_eq!(e.tag, "D_PRINTF_ARG_TYPE");
        assert_eq!(
            e.message,
            "printf( ) argument #2 is incompatible with conversion #1 prototype:\n\
             \tconversion: %s\n\t prototype: char [] or string (or use stringof)\n\
             \t  argument: void"
        );
        let e = cerr("%s %.*d\n", "printf", &[ArgType::String]);
        assert_eq!(e.tag, "D_PRINTF_DYN_PROTO");
        assert_eq!(
            e.message,
            "printf( ) prototype mismatch: conversion #2 (%d) is missing a corresponding \".*\" argument"
        );
        let e = cerr("%s %*d\n", "printf", &[ArgType::String]);
        assert_eq!(
            e.message,
            "printf( ) prototype mismatch: conversion #2 (%d) is missing a corresponding \"*\" argument"
        );
        let e = cerr("%.*d\n", "printf", &[ArgType::String, int(4, true)]);
        assert_eq!(e.tag, "D_PRINTF_DYN_TYPE");
        assert_eq!(
            e.message,
            "printf( ) argument #2 is incompatible with conversion #1 prototype:\n\
             \tconversion: % .* d\n\t prototype: int\n\t  argument: string"
        );
        let e = cerr("%*d\n", "printf", &[ArgType::String, int(4, true)]);
        assert_eq!(e.tag, "D_PRINTF_DYN_TYPE");
        assert!(e.message.contains("conversion: % * d"));
        let e = cerr("", "printf", &[]);
        assert_eq!(e.tag, "D_PRINTF_FMT_EMPTY");
        assert_eq!(e.message, "printf( ) format string is empty");
        {
            let e = cerr("%p\n", "printa", &[ArgType::Stack]);
            assert_eq!(e.tag, "D_PRINTF_ARG_TYPE");
            assert_eq!(
                e.message,
                "printa( ) argument #2 is incompatible with conversion #1 prototype:\n\
                 \tconversion: %p\n\t prototype: pointer or integer\n\t  argument: stack"
            );
        }
        // %@ in printa is checked against the aggregation result type.
        let e = cerr("%@s", "printa", &[]);
        assert_eq!(
            e.message,
            "printa( ) aggregating action is incompatible with conversion #1 prototype:\n\
             \tconversion: %s\n\t prototype: char [] or string (or use stringof)\n\
             \t  argument: int64_t"
        );
    }

    #[test]
    fn check_ok() {
        let ok = |f: &str, func: &str, a: &[ArgType]| {
            check(&parse(f).unwrap(), func, a).unwrap_or_else(|e| panic!("{f}: {e}"))
        };
        ok(
            "%d %i %u %x %X %o %c",
            "printf",
            &[
                int(8, true),
                int(4, false),
                int(2, true),
                int(1, false),
                int(8, false),
                int(4, true),
                int(1, true),
            ],
        );
        ok(
            "%s %s",
            "printf",
            &[ArgType::String, ArgType::Array { elem_is_char: true }],
        );
        ok(
            "%p %p %a",
            "printf",
            &[
                ArgType::Pointer {
                    pointee_is_char: false,
                    is_void: true,
                },
                int(8, false),
                ArgType::Symbol,
            ],
        );
        ok("%A", "printf", &[ArgType::USymbol]);
        ok(
            "%k %Y %T %f %e %g",
            "printf",
            &[
                ArgType::Stack,
                int(8, false),
                int(8, true),
                ArgType::Float { size: 8 },
                ArgType::Float { size: 4 },
                ArgType::Float { size: 16 },
            ],
        );
        ok(
            "%*.*s %%",
            "printf",
            &[int(4, true), int(4, true), ArgType::String],
        );
        ok(
            "%@d %s %@u",
            "printa",
            &[ArgType::String, int(4, true), int(4, true)],
        );
        ok(
            "%ld %llx %lx",
            "printf",
            &[int(8, true), int(8, false), int(8, false)],
        );
        ok("%ls", "printf", &[ArgType::WcharArray]);
        ok("%ws", "printf", &[ArgType::WcharPointer]);
        assert_eq!(parse("%d %*ws %%%ls").unwrap().wide_string_args(), [2, 3]);
        ok("%p", "printf", &[ArgType::WcharPointer]);
        ok(
            "%lc %wc %hd %hx",
            "printf",
            &[int(4, true), int(4, true), int(2, true), int(2, false)],
        );
        // Named types: exact matches required.
        let f = parse("%lld").unwrap();
        let o = CheckOptions::for_func("printf");
        let ll = ArgDesc::named(int(8, true), "long long", "long long");
        check_args(&f, "printf", &[ll], &o).unwrap();
        let e = check_args(&f, "printf", &[ArgDesc::new(int(8, false))], &o).unwrap_err();
        assert_eq!(e.tag, "D_PRINTF_ARG_TYPE");
        assert!(e
            .message
            .ends_with("prototype: long long\n\t  argument: uint64_t"));
        let f = parse("%ho").unwrap();
        let us = ArgDesc::named(int(2, false), "ushort_t", "unsigned short");
        check_args(&f, "printf", &[us], &o).unwrap();
        let e = check_args(&f, "printf", &[ArgDesc::new(int(2, true))], &o).unwrap_err();
        assert_eq!(e.tag, "D_PRINTF_ARG_TYPE");
        // %A needs a target for plain integers.
        let e = cerr("%A", "printf", &[int(8, false)]);
        assert!(e.message.contains(PROTO_UADDR));
        let mut o2 = o;
        o2.has_target = true;
        check_args(
            &parse("%A").unwrap(),
            "printf",
            &[int(8, false).into()],
            &o2,
        )
        .unwrap();
        // %c only for <= int; %Y only for 64-bit ints.
        assert_eq!(
            cerr("%c", "printf", &[int(8, true)]).tag,
            "D_PRINTF_ARG_TYPE"
        );
        assert_eq!(
            cerr("%Y", "printf", &[int(4, true)]).tag,
            "D_PRINTF_ARG_TYPE"
        );
        assert_eq!(
            cerr("%d", "printf", &[ArgType::Symbol]).tag,
            "D_PRINTF_ARG_TYPE"
        );
        assert_eq!(
            cerr("%s", "printf", &[ArgType::Stack]).tag,
            "D_PRINTF_ARG_TYPE"
        );
        assert_eq!(
            cerr("%f", "printf", &[int(4, true)]).tag,
            "D_PRINTF_ARG_TYPE"
        );
        assert_eq!(
            cerr("%p", "printf", &[ArgType::String]).tag,
            "D_PRINTF_ARG_TYPE"
        );
        // printa may have more keys than conversions.
        ok("%d\n", "printa", &[int(4, true), int(4, true)]);
    }

    const BIG: i64 = 0x1234567890abcdef;

    #[test]
    fn ints_like_tst_ints() {
        let cases: &[(&str, u8, bool, &str)] = &[
            ("%d", 1, true, "-17"),
            ("%d", 2, true, "-12817"),
            ("%d", 4, true, "-1867788817"),
            ("%d", 8, true, "1311768467294899695"),
            ("%d", 1, false, "239"),
            ("%d", 2, false, "52719"),
            ("%d", 4, false, "2427178479"),
            ("%d", 8, false, "1311768467294899695"),
            ("%u", 1, true, "239"),
            ("%u", 2, true, "52719"),
            ("%u", 4, true, "2427178479"),
            ("%x", 1, true, "ef"),
            ("%x", 2, false, "cdef"),
            ("%x", 4, true, "90abcdef"),
            ("%x", 8, true, "1234567890abcdef"),
            ("%o", 1, true, "357"),
            ("%o", 2, true, "146757"),
            ("%o", 4, false, "22052746757"),
            ("%o", 8, true, "110642547422052746757"),
        ];
        for (f, size, signed, want) in cases {
            assert_eq!(
                fmt(f, &[Datum::int(BIG, *size, *signed)]),
                *want,
                "{f} size {size} signed {signed}"
            );
        }
        assert_eq!(fmt("%p", &[Datum::int(0x12345678, 8, false)]), "12345678");
        assert_eq!(fmt("%p", &[Datum::int(0x90abcdef, 8, false)]), "90abcdef");
    }

    #[test]
    fn signs() {
        let x = Datum::int(0xffff, 2, false);
        let y = Datum::int(-1, 2, true);
        assert_eq!(fmt("%d %i %u", &[x, x, x]), "65535 -1 65535");
        assert_eq!(fmt("%d %i %u", &[y, y, y]), "-1 -1 65535");
        assert_eq!(fmt("%x", &[Datum::int(-1, 1, true)]), "ff");
        assert_eq!(fmt("%X", &[Datum::int(-2, 4, true)]), "FFFFFFFE");
        assert_eq!(fmt("%i", &[Datum::int(-1, 8, false)]), "-1");
        assert_eq!(
            fmt("%u", &[Datum::int(-1, 8, true)]),
            "18446744073709551615"
        );
    }

    #[test]
    fn basics() {
        let c = Datum::int(97, 4, true);
        let sym = |a: u64| (a == 0x1000).then(|| "genunix`kmem_alloc".to_string());
        let ctx = Context::with_resolver(&sym);
        assert_eq!(
            fmt_ctx("%%a = %a\n", &[Datum::int(0x1000, 8, false)], &ctx),
            "%a = genunix`kmem_alloc\n"
        );
        assert_eq!(fmt("%a", &[Datum::int(0xdead, 8, false)]), "0xdead");
        assert_eq!(fmt("%A", &[Datum::int(0xbeef, 8, false)]), "0xbeef");
        assert_eq!(
            fmt("%-12a|", &[Datum::int(0xdead, 8, false)]),
            "0xdead      |"
        );
        assert_eq!(fmt("%a", &[Datum::Bytes(b"mod`f+0x1")]), "mod`f+0x1");
        assert_eq!(fmt("%c", std::slice::from_ref(&c)), "a");
        assert_eq!(fmt("%lc %wc", &[c, c]), "a a");
        assert_eq!(fmt("%3c|%-3c|", &[c, c]), "  a|a  |");
        assert_eq!(
            fmt(
                "%hd %ho %hx %hX",
                &[
                    Datum::int(97, 2, true),
                    Datum::int(97, 2, false),
                    Datum::int(97, 2, false),
                    Datum::int(97, 2, false),
                ]
            ),
            "97 141 61 61"
        );
        assert_eq!(
            fmt("%s = %s", &[Datum::Str(b"%s"), Datum::Str(b"hello\0junk")]),
            "%s = hello"
        );
        assert_eq!(fmt("100%%", &[]), "100%");
        assert_eq!(fmt("hello world from BEGIN", &[]), "hello world from BEGIN");
    }

    #[test]
    fn flags_like_tst_flags() {
        let v = |n| Datum::int(n, 4, true);
        assert_eq!(fmt("# %#8x", &[v(0x123)]), "#    0x123");
        assert_eq!(fmt("0 %08x", &[v(0x123)]), "0 00000123");
        assert_eq!(fmt("- %-8x", &[v(0x123)]), "- 123     ");
        assert_eq!(fmt("+ %+8d", &[v(123)]), "+     +123");
        assert_eq!(fmt("  % 8d", &[v(123)]), "       123");
    }

    #[test]
    fn c_printf_integer_edges() {
        // Expected strings verified against glibc printf.
        let v = |n| Datum::int(n, 4, true);
        assert_eq!(fmt("[%#o]", &[v(0)]), "[0]");
        assert_eq!(fmt("[%#.3o]", &[v(8)]), "[010]");
        assert_eq!(fmt("[%#5o]", &[v(8)]), "[  010]");
        assert_eq!(fmt("[%#x]", &[v(0)]), "[0]");
        assert_eq!(fmt("[%#08x]", &[v(255)]), "[0x0000ff]");
        assert_eq!(fmt("[%#-8x]", &[v(255)]), "[0xff    ]");
        assert_eq!(fmt("[%+05d]", &[v(5)]), "[+0005]");
        assert_eq!(fmt("[% 5d]", &[v(5)]), "[    5]");
        assert_eq!(fmt("[%- 5d]", &[v(5)]), "[ 5   ]");
        assert_eq!(fmt("[%05.3d]", &[v(5)]), "[  005]");
        assert_eq!(fmt("[%.10d]", &[v(-5)]), "[-0000000005]");
        assert_eq!(fmt("[%+.10d]", &[v(5)]), "[+0000000005]");
        assert_eq!(fmt("[%#.10x]", &[v(0x1f)]), "[0x000000001f]");
        assert_eq!(fmt("[% 010d]", &[v(5)]), "[ 000000005]");
        assert_eq!(fmt("[%+010d]", &[v(-5)]), "[-000000005]");
        assert_eq!(fmt("[%#010o]", &[v(8)]), "[0000000010]");
        assert_eq!(fmt("[%#o]", &[v(-1)]), "[037777777777]");
        assert_eq!(fmt("[%+u]", &[v(5)]), "[5]");
        assert_eq!(fmt("[%#X]", &[v(0xabc)]), "[0XABC]");
        // dtrace-specific: '-' then '0' means zero padding, not left.
        assert_eq!(fmt("[%-05d]", &[v(5)]), "[00005]");
        assert_eq!(fmt("[%0-5d]", &[v(5)]), "[5    ]");
        // dtrace drops a zero precision.
        assert_eq!(fmt("[%.0d]", &[v(0)]), "[0]");
        // C locale: ' has no visible effect; with a separator it groups.
        assert_eq!(fmt("[%'d]", &[v(1234567)]), "[1234567]");
        let ctx = Context {
            thousands_sep: Some(b','),
            ..Context::default()
        };
        assert_eq!(fmt_ctx("[%'d]", &[v(-1234567)], &ctx), "[-1,234,567]");
        assert_eq!(fmt_ctx("[%'x]", &[v(1234567)], &ctx), "[12d687]");
    }

    #[test]
    fn widths_and_precisions() {
        let one = i32v(1);
        for (n, want) in [(0, "1"), (1, "1"), (2, " 1"), (5, "    1")] {
            assert_eq!(fmt("%*d", &[i32v(n), one]), want);
        }
        assert_eq!(fmt("%0d|%1d|%3d", &[one, one, one]), "1|1|  1");
        assert_eq!(fmt("%*d|", &[i32v(-4), one]), "1   |");
        assert_eq!(fmt("%?d|", std::slice::from_ref(&one)), "               1|");
        let h: DatumRef = Datum::Str(b"hello");
        let pre = ["hello", "h", "he", "hel", "hell", "hello"];
        for (i, want) in pre.iter().enumerate() {
            assert_eq!(fmt(&format!("%.{i}s"), std::slice::from_ref(&h)), *want);
            assert_eq!(fmt("%.*s", &[i32v(i as i64), h]), *want);
        }
        let wp = [
            "hello",
            "h",
            "he",
            "hel",
            "hell",
            "hello",
            " hello",
            "  hello",
            "   hello",
            "    hello",
        ];
        for (i, want) in wp.iter().enumerate() {
            assert_eq!(fmt(&format!("%{i}.{i}s"), std::slice::from_ref(&h)), *want);
            assert_eq!(fmt("%*.*s", &[i32v(i as i64), i32v(i as i64), h]), *want);
        }
        assert_eq!(fmt("%.*s", &[i32v(-3), h]), "hello");
        assert_eq!(fmt("%05s|", &[Datum::Str(b"hi")]), "   hi|");
        assert_eq!(fmt("%-6s|", &[Datum::Bytes(b"ab\0cd")]), "ab    |");
        // Dynamic width read as an int from a 64-bit record.
        assert_eq!(fmt("%*d|", &[Datum::int(3, 8, false), one]), "  1|");
    }

    #[test]
    fn floats() {
        // D records hold no floating-point values: an integer reaches `%f` as a double, and
        // the C emulation itself is given fractional doubles through `ffmt`.
        let f = |x: f64| Datum::int(x as i64, 8, true);
        assert_eq!(
            fmt("%f %e %E %g %G", &[f(0.0), f(0.0), f(0.0), f(0.0), f(0.0)]),
            "0.000000 0.000000e+00 0.000000E+00 0 0"
        );
        let cases: &[(&str, f64, &str)] = &[
            ("%g", 100000.0, "100000"),
            ("%g", 1000000.0, "1e+06"),
            ("%g", 0.0001, "0.0001"),
            ("%g", 0.00001, "1e-05"),
            ("%#g", 1.0, "1.00000"),
            ("%g", 1.5e300, "1.5e+300"),
            ("%g", -0.0, "-0"),
            ("%.0g", 0.5, "0.5"),
            ("%g", 123456789.0, "1.23457e+08"),
            ("%G", 1e-10, "1E-10"),
            ("%E", 1e300, "1.000000E+300"),
            ("%.0e", 2.5, "2.500000e+00"), // dtrace drops .0
            ("%#.0e", 2.5, "2.500000e+00"),
            ("%#.0f", 2.5, "2.500000"),
            ("%f", 1e20, "100000000000000000000.000000"),
            ("%010f", f64::INFINITY, "       inf"),
            ("%f", f64::NEG_INFINITY, "-inf"),
            ("%G", f64::NAN, "NAN"),
            ("%-10f|", 2.0, "2.000000  |"),
            ("%+f", 2.0, "+2.000000"),
            ("% f", 2.0, " 2.000000"),
            ("%010f", -2.5, "-02.500000"),
            ("%.3f", 0.0005, "0.001"),
            ("%.2f", 0.125, "0.12"),
            ("%.1f", 0.25, "0.2"),
            ("%.2e", 12345.0, "1.23e+04"),
            ("%g", 0.0001234567, "0.000123457"),
            ("%.17g", 0.1, "0.10000000000000001"),
            ("%020.5f", 2.34567, "00000000000002.34567"),
            ("%+.3e", -12345.678, "-1.235e+04"),
            ("%g", 9.9999999, "10"),
            ("%g", 999999.5, "1e+06"),
        ];
        for (fs, x, want) in cases {
            assert_eq!(ffmt(fs, *x), *want, "{fs} of {x}");
        }
        assert_eq!(fmt("%.2f|%g", &[f(2.0), f(-3.0)]), "2.00|-3");
    }

    /// A format of fixed fields over one C double, through the field and conversion
    /// `format_with` would use.
    fn ffmt(fs: &str, x: f64) -> String {
        let p = parse(fs).expect("parse");
        let mut out = Vec::new();
        for piece in &p.pieces {
            match piece {
                Piece::Text(t) => out.extend_from_slice(t.as_bytes()),
                Piece::Conv(c) => {
                    let w = match c.width {
                        Count::Fixed(n) => n,
                        _ => 0,
                    };
                    let prec = match c.precision {
                        Count::Fixed(n) => n,
                        _ => 0,
                    };
                    let left = w < 0 || c.flags.left;
                    let sp = field_spec(c, left, w.unsigned_abs() as usize, prec, None);
                    let spec = c.spec();
                    let conv = spec.ofmt.as_bytes()[spec.ofmt.len() - 1];
                    c_float(&mut out, &sp, conv, x);
                }
            }
        }
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn c_engine_zero_precision() {
        // The C emulation itself handles .0 like glibc (dtrace never asks).
        let sp = |alt, prec| Spec {
            alt,
            prec: Some(prec),
            ..Spec::default()
        };
        let run = |s: Spec, c: u8, v: f64| {
            let mut o = Vec::new();
            c_float(&mut o, &s, c, v);
            String::from_utf8(o).unwrap()
        };
        assert_eq!(run(sp(false, 0), b'e', 2.5), "2e+00");
        assert_eq!(run(sp(true, 0), b'e', 2.5), "2.e+00");
        assert_eq!(run(sp(true, 0), b'f', 2.5), "2.");
        assert_eq!(run(sp(false, 0), b'f', 2.5), "2");
        assert_eq!(run(sp(false, 0), b'g', 0.5), "0.5");
        assert_eq!(run(sp(true, 0), b'g', 0.5), "0.5");
        assert_eq!(run(sp(false, 2000), b'f', 0.5).len(), 2002);
        let irun = |s: Spec, c: u8, m: u64| {
            let mut o = Vec::new();
            c_int(&mut o, &s, c, false, m);
            String::from_utf8(o).unwrap()
        };
        assert_eq!(irun(sp(false, 0), b'd', 0), "");
        assert_eq!(irun(sp(true, 0), b'o', 0), "0");
        assert_eq!(irun(sp(true, 0), b'x', 0), "");
    }

    #[test]
    fn times() {
        const NS: i64 = 1_000_000_000;
        let t = |s: i64| Datum::int(s * NS, 8, false);
        assert_eq!(fmt("%Y", &[t(0)]), "1970 Jan  1 00:00:00");
        assert_eq!(fmt("%Y", &[t(1062609821)]), "2003 Sep  3 17:23:41");
        assert_eq!(fmt("%Y", &[t(1704450030)]), "2024 Jan  5 10:20:30");
        // US/Pacific, as in tst.printY.ksh / tst.printT.ksh.
        let la = |s: i64| {
            // DST in 2003: Apr 6 10:00 UTC .. Oct 26 09:00 UTC.
            if (1049623200..1067158800).contains(&s) {
                (-7 * 3600, "PDT".to_string())
            } else {
                (-8 * 3600, "PST".to_string())
            }
        };
        let ctx = Context {
            tz: Some(&la),
            ..Context::default()
        };
        assert_eq!(
            fmt_ctx("%Y\n%Y\n%Y", &[t(0), t(1062609821), t(0x7fffffff)], &ctx),
            "1969 Dec 31 16:00:00\n2003 Sep  3 10:23:41\n2038 Jan 18 19:14:07"
        );
        assert_eq!(
            fmt_ctx("%T\n%T\n%T", &[t(0), t(1062609821), t(0x7fffffff)], &ctx),
            "Wed, 31 Dec 1970 16:00:00 PST\nWed, 03 Sep 2003 10:23:41 PDT\n\
             Mon, 18 Jan 2038 19:14:07 PST"
        );
        assert_eq!(fmt("%T", &[t(0)]), "Thu, 01 Jan 1970 00:00:00 UTC");
        assert_eq!(fmt("%25Y|", &[t(0)]), "     1970 Jan  1 00:00:00|");
        assert_eq!(fmt("%.4Y|", &[t(0)]), "1970|");
        // 2021-01-01 is a Friday in ISO week 53 of 2020.
        assert_eq!(fmt("%T", &[t(1609459200)]), "Fri, 01 Jan 2020 00:00:00 UTC");
        // 2024-12-30 is a Monday in ISO week 1 of 2025.
        assert_eq!(fmt("%T", &[t(1735560000)]), "Mon, 30 Dec 2025 12:00:00 UTC");
    }

    #[test]
    fn escapes_and_strings() {
        assert_eq!(
            fmt("%S", &[Datum::Str(b"a\tb\"c\\\x01\xff \x7f")]),
            "a\\tb\\\"c\\\\\\001\\377 \\177"
        );
        // Like dtrace, the terminating NUL of a string record is shown.
        assert_eq!(fmt("%S", &[Datum::Str(b"hi\0\0\0")]), "hi\\0");
        assert_eq!(fmt("%S", &[Datum::Str(b"hi")]), "hi");
        assert_eq!(fmt("%C|%C", &[i32v(10), i32v(65)]), "\\n|A");
        assert_eq!(fmt("%5C|", &[i32v(0)]), "   \\0|");
        // wchar_t is Windows' UTF-16 unit; a surrogate pair is one character
        let w: Vec<u8> = "hi\u{e9}\0x"
            .encode_utf16()
            .flat_map(|u| u.to_le_bytes())
            .collect();
        assert_eq!(
            fmt(
                "%ls|%ws|%.2ls|%6ls|",
                &[
                    Datum::Bytes(&w),
                    Datum::Bytes(&w),
                    Datum::Bytes(&w),
                    Datum::Bytes(&w),
                ]
            ),
            "hi\u{e9}|hi\u{e9}|hi|  hi\u{e9}|"
        );
        assert_eq!(fmt("%P", &[Datum::int(80, 2, false)]), "80");
        assert_eq!(fmt("%I", &[Datum::Str(b"10.0.0.1\0")]), "10.0.0.1");
        assert_eq!(fmt("%-k|", &[Datum::Bytes(b"\n  a`b\n")]), "\n  a`b\n|");
    }

    #[test]
    fn printa_agg_values() {
        let agg = [Datum::int(7, 8, false), Datum::int(-3, 8, true)];
        let ctx = Context {
            agg: &agg,
            ..Context::default()
        };
        assert_eq!(
            fmt_ctx("%s %@d %@d %@d", &[Datum::Str(b"key")], &ctx),
            "key 7 -3 -3"
        );
        assert_eq!(fmt_ctx("%@8u|", &[], &ctx), "       7|");
    }

    #[test]
    fn runtime_mismatch() {
        let p = parse("%d %s").unwrap();
        let mut out = Vec::new();
        let e = format(&p, &[i32v(1)], &mut out).unwrap_err();
        assert_eq!(e.tag, "EDT_DMISMATCH");
        assert_eq!(e.message, "Data record list does not match statement");
        assert_eq!(out, b"1 ");
        let (x, y): (DatumRef, DatumRef) = (Datum::Str(b"x"), Datum::Str(b"y"));
        assert!(format(&p, &[x, y], &mut out).is_err());
        let none: &[DatumRef] = &[];
        assert!(format(&parse("%@d").unwrap(), none, &mut out).is_err());
        // the owned values of a record format as their views do
        let owned = [Datum::int(7, 4, true), Datum::Str(b"z".to_vec())];
        format(&p, &owned, &mut out).unwrap();
        assert_eq!(out, b"1 7 z");
        assert!(format(&parse("%*d").unwrap(), &[x, i32v(1)], &mut out).is_err());
    }

    #[test]
    fn consumed_count() {
        let p = parse("%*.*s %d%%").unwrap();
        let mut out = Vec::new();
        let n = format_with(
            &p,
            &[i32v(3), i32v(1), Datum::Str(b"abc"), i32v(9), i32v(0)],
            &Context::default(),
            &mut out,
        )
        .unwrap();
        assert_eq!(n, 4);
        assert_eq!(out, b"  a 9%");
    }

    /// Tiny deterministic PRNG for the no-panic fuzz test.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn fuzz_no_panic() {
        let alphabet: Vec<char> = "%%%%-+ #0'@*.?$123456789hlLwdiuoxXcsSCaAeEfgGkpPTYIz\0é\n"
            .chars()
            .collect();
        let mut r = Rng(0x9e3779b97f4a7c15);
        let wide: Vec<u8> = (0..64).map(|i| (i * 37) as u8).collect();
        for _ in 0..20000 {
            let len = (r.next() % 12) as usize;
            let s: String = (0..len)
                .map(|_| alphabet[(r.next() % alphabet.len() as u64) as usize])
                .collect();
            let Ok(f) = parse(&s) else { continue };
            let tys = [
                int(4, true),
                int(8, false),
                ArgType::String,
                ArgType::Float { size: 8 },
                ArgType::Stack,
            ];
            let a: Vec<ArgType> = (0..(r.next() % 4))
                .map(|_| tys[(r.next() % 5) as usize].clone())
                .collect();
            let _ = check(&f, "printf", &a);
            let _ = check(&f, "printa", &a);
            let vals: [DatumRef; 8] = [
                Datum::int(r.next() as i64, 8, true),
                Datum::int(r.next() as i64 % 50, 4, true),
                Datum::Str(b"str\0x"),
                Datum::Bytes(&wide),
                Datum::int(r.next() as i64, 2, false),
                Datum::Bytes(b"r"),
                Datum::int(i64::MIN, 8, true),
                Datum::int(-(r.next() as i64 % 30), 4, true),
            ];
            let v: Vec<DatumRef> = (0..(r.next() % 6))
                .map(|_| vals[(r.next() % vals.len() as u64) as usize])
                .collect();
            let agg = [Datum::int(-1, 8, true)];
            let ctx = Context {
                agg: &agg,
                ..Context::default()
            };
            let mut out = Vec::new();
            let _ = format_with(&f, &v, &ctx, &mut out);
        }
        // Truncated prefixes of a rich format.
        let rich = "a%-#08.3lld %*.*s %@x %'u %Y %T %% %k %S %C %ls %ws %lc %5.2e";
        for i in 0..=rich.len() {
            if rich.is_char_boundary(i) {
                let _ = parse(&rich[..i]);
            }
        }
        // Huge widths are clamped instead of exhausting memory.
        let f = parse("%2147483647d%99999999999.99999999999f").unwrap();
        let mut out = Vec::new();
        format(&f, &[i32v(1), i32v(1)], &mut out).unwrap();
        assert!(out.len() <= 2 * MAX_PAD + 16);
    }
}
