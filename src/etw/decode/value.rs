//! Field types and decoded values, and the one routine that reads a value of a type from a payload.
//!
//! The same [`FieldType`] describes kernel layouts (static tables), TRACE_EVENT_INFO and manifest
//! schemas, and TraceLogging metadata, so every source decodes through [`read_value`].

use std::borrow::Cow;

use crate::etw::record::Guid;

/// How a field is stored in the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldType {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    /// 32-bit or 64-bit per the record's pointer size.
    Ptr,
    /// Like `Ptr`, but a size rather than an address (`SIZE_T`).
    SizeT,
    /// u16 stored big-endian (ports in TcpIp/UdpIp).
    U16Be,
    HexI32,
    HexI64,
    F32,
    F64,
    /// 4-byte BOOL.
    Bool32,
    /// 1-byte BOOLEAN.
    Bool8,
    Guid,
    /// FILETIME (u64, 100 ns since 1601).
    FileTime,
    /// SYSTEMTIME (8 × u16).
    SystemTime,
    /// A raw SID (length from its SubAuthorityCount).
    Sid,
    /// The kernel's WMI SID form: u32 0 for "none", else TOKEN_USER (2 ptr) + SID.
    WmiSid,
    /// NUL-terminated 8-bit string.
    AnsiZ,
    /// NUL-terminated UTF-16 string.
    Utf16Z,
    /// UTF-16 string of a fixed/parameter length (chars), or to the end of the payload.
    Utf16N,
    /// 8-bit string of a fixed/parameter length (bytes), or to the end of the payload.
    AnsiN,
    /// u16 byte count, then UTF-16.
    CountedUtf16,
    /// u16 byte count, then 8-bit chars.
    CountedAnsi,
    /// Big-endian u16 byte count, then UTF-16.
    RevCountedUtf16,
    /// Big-endian u16 byte count, then 8-bit chars.
    RevCountedAnsi,
    Utf16Char,
    AnsiChar,
    /// Bytes of a fixed/parameter length, or to the end of the payload.
    Binary,
    /// u16 byte count, then bytes (TraceLogging binary).
    CountedBinary,
    /// u32 byte count, then bytes (TDH HEXDUMP).
    HexDump,
    /// IPv4 address (4 bytes, network order).
    IpV4,
    /// IPv6 address (16 bytes).
    IpV6,
    /// A SOCKADDR (TDH out-type SocketAddress over binary): bytes of a fixed/parameter
    /// length, shown as `address:port`.
    SockAddr,
    /// The rest of the payload as pointer-sized addresses (stack frames).
    Frames,
    /// A structure; its members follow in the schema.
    Struct,
    /// A UTF-16 string in a fixed number of chars (kernel config records).
    Chars(u16),
    /// A fixed number of bytes.
    Bytes(u16),
}

impl FieldType {
    /// The D type a field of this type has in `args[]`.
    pub fn d_type(self) -> &'static str {
        use FieldType::*;
        match self {
            I8 => "int8_t",
            U8 | AnsiChar => "uint8_t",
            I16 => "int16_t",
            U16 | U16Be | Utf16Char => "uint16_t",
            I32 | Bool32 => "int32_t",
            U32 | HexI32 => "uint32_t",
            I64 => "int64_t",
            U64 | HexI64 | FileTime => "uint64_t",
            Ptr | SizeT => "uintptr_t",
            Bool8 => "uint8_t",
            F32 => "float",
            F64 => "double",
            AnsiZ | Utf16Z | Utf16N | AnsiN | CountedUtf16 | CountedAnsi | RevCountedUtf16
            | RevCountedAnsi | Guid | Sid | WmiSid | IpV4 | IpV6 | SystemTime => "string",
            Binary | CountedBinary | HexDump => "void *",
            SockAddr => "string",
            Frames => "uintptr_t *",
            Struct => "struct",
            Chars(_) => "string",
            Bytes(_) => "void *",
        }
    }

    /// The fixed size of this type, if it has one.
    pub fn fixed_size(self, ptr: u8) -> Option<usize> {
        use FieldType::*;
        Some(match self {
            I8 | U8 | Bool8 | AnsiChar => 1,
            I16 | U16 | U16Be | Utf16Char => 2,
            I32 | U32 | HexI32 | F32 | Bool32 | IpV4 => 4,
            I64 | U64 | HexI64 | F64 | FileTime => 8,
            Ptr | SizeT => ptr as usize,
            Guid | SystemTime | IpV6 => 16,
            Chars(n) => 2 * n as usize,
            Bytes(n) => n as usize,
            _ => return None,
        })
    }
}

/// A decoded field value. Strings borrow the payload: 8-bit text when it is valid UTF-8, and
/// UTF-16 text always (as its raw bytes, converted only when asked: [`Value::text`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Value<'a> {
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    /// An address or pointer-sized value.
    Ptr(u64),
    Str(Cow<'a, str>),
    /// UTF-16LE text as it lies in the payload (no terminator); the text stops at the first
    /// NUL code unit, if any.
    Utf16(&'a [u8]),
    Guid(Guid),
    Bytes(&'a [u8]),
    /// A SID in its binary form.
    Sid(&'a [u8]),
    /// Stack frames or any array of addresses.
    Ptrs(Vec<u64>),
    IpV4([u8; 4]),
    IpV6([u8; 16]),
    /// A SOCKADDR's bytes (AF_INET or AF_INET6 display as `address:port`).
    SockAddr(&'a [u8]),
    /// SYSTEMTIME fields: year, month, day-of-week, day, hour, minute, second, ms.
    SystemTime([u16; 8]),
    Array(Vec<Value<'a>>),
    Struct(Vec<(&'a str, Value<'a>)>),
    /// An integer with a value map (EVENT_MAP_INFO, a manifest's `<valueMap>`/`<bitMap>`): the
    /// number and its name (`A|B` for a bitmap).
    Mapped {
        value: u64,
        name: Cow<'a, str>,
    },
}

impl<'a> Value<'a> {
    /// The value as an unsigned integer, when it is numeric.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U64(v) | Value::Ptr(v) | Value::Mapped { value: v, .. } => Some(v),
            Value::I64(v) => Some(v as u64),
            Value::Bool(b) => Some(b as u64),
            _ => None,
        }
    }

    /// The value as text, when it is a string (UTF-16 converted) or a mapped name.
    pub fn text(&self) -> Option<Cow<'_, str>> {
        match self {
            Value::Str(s) | Value::Mapped { name: s, .. } => Some(Cow::Borrowed(s)),
            Value::Utf16(b) => Some(Cow::Owned(utf16_string(b))),
            _ => None,
        }
    }

    /// [`Value::text`], keeping the borrow of the payload where there is one.
    pub fn into_text(self) -> Option<Cow<'a, str>> {
        match self {
            Value::Str(s) | Value::Mapped { name: s, .. } => Some(s),
            Value::Utf16(b) => Some(Cow::Owned(utf16_string(b))),
            _ => None,
        }
    }

    /// Appends the value as UTF-8 text to `out`, as [`Value::text`] or, for the other kinds,
    /// as it displays; UTF-16 is converted straight into `out`.
    pub fn write_text(&self, out: &mut Vec<u8>) {
        match self {
            Value::Str(s) | Value::Mapped { name: s, .. } => out.extend_from_slice(s.as_bytes()),
            Value::Utf16(b) => utf16_into(b, out),
            v => {
                use std::io::Write;
                let _ = write!(out, "{v}");
            }
        }
    }

    /// Renders a SID as `S-1-5-…`.
    pub fn sid_string(sid: &[u8]) -> Option<String> {
        if sid.len() < 8 {
            return None;
        }
        let n = sid[1] as usize;
        if sid.len() < 8 + 4 * n {
            return None;
        }
        let auth = sid[2..8].iter().fold(0u64, |a, b| (a << 8) | *b as u64);
        let mut s = format!("S-{}-{}", sid[0], auth);
        for i in 0..n {
            let o = 8 + 4 * i;
            s.push_str(&format!(
                "-{}",
                u32::from_le_bytes([sid[o], sid[o + 1], sid[o + 2], sid[o + 3]])
            ));
        }
        Some(s)
    }
}

impl std::fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::U64(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Ptr(v) => write!(f, "{v:#x}"),
            Value::Str(s) => write!(f, "{s}"),
            Value::Utf16(b) => write!(f, "{}", utf16_string(b)),
            Value::Guid(g) => write!(f, "{g}"),
            Value::Bytes(b) => hex(f, b),
            Value::SockAddr(b) => sockaddr(f, b),
            Value::Sid(b) => write!(f, "{}", Value::sid_string(b).unwrap_or_default()),
            Value::Ptrs(v) => {
                let s: Vec<String> = v.iter().map(|x| format!("{x:#x}")).collect();
                write!(f, "[{}]", s.join(", "))
            }
            Value::IpV4(a) => write!(f, "{}", std::net::Ipv4Addr::from(*a)),
            Value::IpV6(a) => write!(f, "{}", std::net::Ipv6Addr::from(*a)),
            Value::SystemTime(t) => write!(
                f,
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}",
                t[0], t[1], t[3], t[4], t[5], t[6], t[7]
            ),
            Value::Array(v) => {
                write!(f, "[")?;
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{x}")?;
                }
                write!(f, "]")
            }
            Value::Mapped { name, .. } => write!(f, "{name}"),
            Value::Struct(v) => {
                write!(f, "{{")?;
                for (i, (n, x)) in v.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{n}: {x}")?;
                }
                write!(f, "}}")
            }
        }
    }
}

fn hex(f: &mut std::fmt::Formatter<'_>, b: &[u8]) -> std::fmt::Result {
    for x in b.iter() {
        write!(f, "{x:02x}")?;
    }
    Ok(())
}

/// A SOCKADDR as TDH shows it: `10.0.0.1:53`, `[2001:db8::1]:53` (with `%scope` when the
/// scope id is set); another family, or too few bytes for its own, as hex.
fn sockaddr(f: &mut std::fmt::Formatter<'_>, b: &[u8]) -> std::fmt::Result {
    /// AF_INET, and AF_INET6 as Windows numbers it (23).
    const AF_INET: u16 = 2;
    const AF_INET6: u16 = 23;
    let port = |b: &[u8]| u16::from_be_bytes([b[2], b[3]]);
    match le_u16(b, 0) {
        Some(AF_INET) if b.len() >= 8 => {
            let a: [u8; 4] = b[4..8].try_into().unwrap_or_default();
            write!(f, "{}:{}", std::net::Ipv4Addr::from(a), port(b))
        }
        Some(AF_INET6) if b.len() >= 24 => {
            let a: [u8; 16] = b[8..24].try_into().unwrap_or_default();
            write!(f, "[{}", std::net::Ipv6Addr::from(a))?;
            match le_u32(b, 24) {
                Some(scope) if scope != 0 => write!(f, "%{scope}")?,
                _ => {}
            }
            write!(f, "]:{}", port(b))
        }
        _ => hex(f, b),
    }
}

/// Little-endian readers that never panic.
pub(crate) fn le_u16(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(o..o.checked_add(2)?)?.try_into().ok()?,
    ))
}
pub(crate) fn le_u32(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(o..o.checked_add(4)?)?.try_into().ok()?,
    ))
}
pub(crate) fn le_u64(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(o..o.checked_add(8)?)?.try_into().ok()?,
    ))
}
pub(crate) fn le_ptr(b: &[u8], o: usize, ptr: u8) -> Option<u64> {
    if ptr == 4 {
        le_u32(b, o).map(u64::from)
    } else {
        le_u64(b, o)
    }
}

/// Decodes UTF-16LE bytes (lossy), stopping at the first NUL.
pub fn utf16_string(b: &[u8]) -> String {
    utf16z_string(b).0
}

/// Decodes a NUL-terminated UTF-16LE string (lossy) at the start of `b` in one pass: the text
/// and the offset after its terminator (`b.len()` when it is unterminated).
pub fn utf16z_string(b: &[u8]) -> (String, usize) {
    // most ETW text (paths, names) is ASCII: copy its low bytes straight across
    let mut ascii = Vec::with_capacity(b.len() / 2);
    let mut i = 0;
    // four code units at a time while they are all ASCII and none is the terminator
    while let Some(w) = b.get(i..i + 8) {
        let w = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        if w & 0xff80_ff80_ff80_ff80 != 0
            || w.wrapping_sub(0x0001_0001_0001_0001) & 0x8000_8000_8000_8000 != 0
        {
            break;
        }
        ascii.extend_from_slice(&[w as u8, (w >> 16) as u8, (w >> 32) as u8, (w >> 48) as u8]);
        i += 8;
    }
    while i + 1 < b.len() {
        let (lo, hi) = (b[i], b[i + 1]);
        if hi != 0 || lo >= 0x80 {
            break;
        }
        if lo == 0 {
            return (String::from_utf8(ascii).unwrap_or_default(), i + 2);
        }
        ascii.push(lo);
        i += 2;
    }
    let mut s = String::from_utf8(ascii).unwrap_or_default();
    let mut next = b.len();
    let mut units = b[i.min(b.len())..].chunks_exact(2).enumerate();
    let units = std::iter::from_fn(|| {
        let (k, c) = units.next()?;
        let u = u16::from_le_bytes([c[0], c[1]]);
        if u == 0 {
            next = i + 2 * k + 2;
            return None;
        }
        Some(u)
    });
    s.extend(char::decode_utf16(units).map(|r| r.unwrap_or('\u{fffd}')));
    (s, next)
}

/// Appends UTF-16LE text (lossy, stopping at the first NUL) to `out` as UTF-8.
pub fn utf16_into(b: &[u8], out: &mut Vec<u8>) {
    out.reserve(b.len() / 2);
    let mut i = 0;
    // ASCII, eight code units at a time while none is the terminator
    #[cfg(target_arch = "x86_64")]
    while i + 16 <= b.len() {
        use std::arch::x86_64::{
            __m128i, _mm_and_si128, _mm_cmpeq_epi16, _mm_loadu_si128, _mm_movemask_epi8,
            _mm_packus_epi16, _mm_set1_epi16, _mm_setzero_si128, _mm_storel_epi64,
        };
        let mut ascii = [0u8; 16];
        // SAFETY: the 16 bytes at `i` are inside `b` (checked above), the store writes 8 bytes
        // of `ascii`; SSE2 is part of x86_64.
        let all_ascii = unsafe {
            let v = _mm_loadu_si128(b.as_ptr().add(i) as *const __m128i);
            let zero = _mm_setzero_si128();
            let nul = _mm_movemask_epi8(_mm_cmpeq_epi16(v, zero));
            let high = _mm_and_si128(v, _mm_set1_epi16(0xff80u16 as i16));
            let low7 = _mm_movemask_epi8(_mm_cmpeq_epi16(high, zero));
            _mm_storel_epi64(ascii.as_mut_ptr() as *mut __m128i, _mm_packus_epi16(v, v));
            nul == 0 && low7 == 0xffff
        };
        if !all_ascii {
            break;
        }
        out.extend_from_slice(&ascii[..8]);
        i += 16;
    }
    // ASCII copies straight across, four code units at a time while none is the terminator
    while let Some(w) = b.get(i..i + 8) {
        let w = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        if w & 0xff80_ff80_ff80_ff80 != 0
            || w.wrapping_sub(0x0001_0001_0001_0001) & 0x8000_8000_8000_8000 != 0
        {
            break;
        }
        out.extend_from_slice(&[w as u8, (w >> 16) as u8, (w >> 32) as u8, (w >> 48) as u8]);
        i += 8;
    }
    while i + 1 < b.len() {
        let (lo, hi) = (b[i], b[i + 1]);
        if hi != 0 || lo >= 0x80 {
            break;
        }
        if lo == 0 {
            return;
        }
        out.push(lo);
        i += 2;
    }
    let units = b[i..]
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .take_while(|u| *u != 0);
    let mut buf = [0u8; 4];
    for c in char::decode_utf16(units) {
        out.extend_from_slice(c.unwrap_or('\u{fffd}').encode_utf8(&mut buf).as_bytes());
    }
}

/// The length in bytes of the NUL-terminated UTF-16LE text at the start of `b` (without the
/// terminator) and the offset after the terminator (`b.len()` when it is unterminated; an odd
/// trailing byte is left out of the text).
#[inline]
pub fn utf16z_extent(b: &[u8]) -> (usize, usize) {
    let mut i = 0;
    // eight code units at a time
    #[cfg(target_arch = "x86_64")]
    while i + 16 <= b.len() {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi16, _mm_loadu_si128, _mm_movemask_epi8, _mm_setzero_si128,
        };
        // SAFETY: the 16 bytes at `i` are inside `b` (checked above); SSE2 is part of x86_64.
        let zeros = unsafe {
            let v = _mm_loadu_si128(b.as_ptr().add(i) as *const __m128i);
            _mm_movemask_epi8(_mm_cmpeq_epi16(v, _mm_setzero_si128())) as u32
        };
        if zeros != 0 {
            // the mask has two bits per zero unit: the first one's byte offset is even
            let at = i + zeros.trailing_zeros() as usize;
            return (at, at + 2);
        }
        i += 16;
    }
    // four code units at a time while none of them is zero
    while let Some(w) = b.get(i..i + 8) {
        let w = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        if w.wrapping_sub(0x0001_0001_0001_0001) & !w & 0x8000_8000_8000_8000 != 0 {
            break;
        }
        i += 8;
    }
    while i + 1 < b.len() {
        if b[i] == 0 && b[i + 1] == 0 {
            return (i, i + 2);
        }
        i += 2;
    }
    (i, b.len())
}

/// 8-bit text: borrowed when it is valid UTF-8, else Latin-1.
pub fn ansi_string(b: &[u8]) -> Cow<'_, str> {
    let b = match b.iter().position(|c| *c == 0) {
        Some(n) => &b[..n],
        None => b,
    };
    match std::str::from_utf8(b) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => Cow::Owned(b.iter().map(|c| *c as char).collect()),
    }
}

/// Steps over one value of `ty` at `pos` as [`read_value`] reads it, building nothing that
/// allocates: its integer value when it is numeric, and the position after it.
#[inline]
pub fn value_end(
    ty: FieldType,
    b: &[u8],
    pos: usize,
    ptr: u8,
    len: Option<usize>,
) -> Option<(Option<u64>, usize)> {
    if pos > b.len() {
        return None;
    }
    if let Some(n) = ty.fixed_size(ptr) {
        if !matches!(ty, FieldType::Chars(_) | FieldType::Bytes(_)) && b.len() - pos >= n {
            // integers: their value (array counts and lengths refer to them); the others
            // are stepped over by size
            let v = match n {
                1 => Some(b[pos] as u64),
                2 if ty == FieldType::U16Be => {
                    Some(u16::from_be_bytes([b[pos], b[pos + 1]]) as u64)
                }
                2 => le_u16(b, pos).map(u64::from),
                4 if !matches!(ty, FieldType::F32 | FieldType::IpV4) => {
                    le_u32(b, pos).map(u64::from)
                }
                8 if ty != FieldType::F64 => le_u64(b, pos),
                _ => None,
            };
            let v = match ty {
                FieldType::I8 => v.map(|x| x as i8 as i64 as u64),
                FieldType::I16 => v.map(|x| x as i16 as i64 as u64),
                FieldType::I32 => v.map(|x| x as i32 as i64 as u64),
                FieldType::Bool8 | FieldType::Bool32 => v.map(|x| (x != 0) as u64),
                FieldType::AnsiChar | FieldType::Utf16Char => None,
                _ => v,
            };
            return Some((v, pos + n));
        }
    }
    if ty == FieldType::Frames {
        let step = ptr as usize;
        return Some((None, pos + (b.len() - pos) / step * step));
    }
    if ty == FieldType::AnsiZ {
        let rest = &b[pos..];
        return Some((
            None,
            rest.iter()
                .position(|c| *c == 0)
                .map_or(b.len(), |n| pos + n + 1),
        ));
    }
    let (v, next) = read_value(ty, b, pos, ptr, len)?;
    Some((v.as_u64(), next))
}

/// Reads one value of `ty` at `pos`. `len` is a fixed or parameter length for string/binary
/// types (chars for UTF-16, bytes otherwise). Returns the value and the position after it, or
/// `None` when the payload is too short.
#[inline]
pub fn read_value<'a>(
    ty: FieldType,
    b: &'a [u8],
    pos: usize,
    ptr: u8,
    len: Option<usize>,
) -> Option<(Value<'a>, usize)> {
    use FieldType::*;
    let p = pos;
    let fixed = |n: usize| -> Option<&'a [u8]> { b.get(p..p.checked_add(n)?) };
    Some(match ty {
        I8 => (Value::I64(*b.get(p)? as i8 as i64), p + 1),
        U8 => (Value::U64(*b.get(p)? as u64), p + 1),
        AnsiChar => (Value::Str(ansi_string(fixed(1)?)), p + 1),
        Bool8 => (Value::Bool(*b.get(p)? != 0), p + 1),
        I16 => (Value::I64(le_u16(b, p)? as i16 as i64), p + 2),
        U16 => (Value::U64(le_u16(b, p)? as u64), p + 2),
        Utf16Char => (Value::Utf16(fixed(2)?), p + 2),
        U16Be => (
            Value::U64(u16::from_be_bytes(fixed(2)?.try_into().ok()?) as u64),
            p + 2,
        ),
        I32 => (Value::I64(le_u32(b, p)? as i32 as i64), p + 4),
        U32 | HexI32 => (Value::U64(le_u32(b, p)? as u64), p + 4),
        Bool32 => (Value::Bool(le_u32(b, p)? != 0), p + 4),
        F32 => (Value::F64(f32::from_bits(le_u32(b, p)?) as f64), p + 4),
        I64 => (Value::I64(le_u64(b, p)? as i64), p + 8),
        U64 | HexI64 | FileTime => (Value::U64(le_u64(b, p)?), p + 8),
        F64 => (Value::F64(f64::from_bits(le_u64(b, p)?)), p + 8),
        Ptr => (Value::Ptr(le_ptr(b, p, ptr)?), p + ptr as usize),
        SizeT => (Value::U64(le_ptr(b, p, ptr)?), p + ptr as usize),
        Guid => (
            Value::Guid(crate::etw::record::Guid::from_le_bytes(fixed(16)?)?),
            p + 16,
        ),
        IpV4 => (Value::IpV4(fixed(4)?.try_into().ok()?), p + 4),
        IpV6 => (Value::IpV6(fixed(16)?.try_into().ok()?), p + 16),
        SystemTime => {
            let s = fixed(16)?;
            let mut t = [0u16; 8];
            for (i, v) in t.iter_mut().enumerate() {
                *v = u16::from_le_bytes([s[2 * i], s[2 * i + 1]]);
            }
            (Value::SystemTime(t), p + 16)
        }
        Sid => {
            let n = *b.get(p + 1)? as usize;
            let s = fixed(8 + 4 * n)?;
            (Value::Sid(s), p + 8 + 4 * n)
        }
        WmiSid => {
            if le_u32(b, p)? == 0 {
                (Value::Sid(&[]), p + 4)
            } else {
                let q = p + 2 * ptr as usize;
                let n = *b.get(q + 1)? as usize;
                let s = b.get(q..q + 8 + 4 * n)?;
                (Value::Sid(s), q + 8 + 4 * n)
            }
        }
        AnsiZ => {
            let rest = b.get(p..)?;
            match rest.iter().position(|c| *c == 0) {
                Some(n) => (Value::Str(ansi_string(&rest[..n])), p + n + 1),
                None => (Value::Str(ansi_string(rest)), b.len()),
            }
        }
        Utf16Z => {
            let rest = b.get(p..)?;
            let (text, used) = utf16z_extent(rest);
            (Value::Utf16(&rest[..text]), p + used)
        }
        Utf16N => {
            let n = match len {
                Some(n) => n.checked_mul(2)?,
                None => b.len().checked_sub(p)?,
            };
            (Value::Utf16(fixed(n)?), p + n)
        }
        AnsiN => {
            let n = len.unwrap_or(b.len().checked_sub(p)?);
            (Value::Str(ansi_string(fixed(n)?)), p + n)
        }
        CountedUtf16 | RevCountedUtf16 | CountedAnsi | RevCountedAnsi | CountedBinary => {
            let raw = fixed(2)?;
            let n = if matches!(ty, RevCountedUtf16 | RevCountedAnsi) {
                u16::from_be_bytes([raw[0], raw[1]])
            } else {
                u16::from_le_bytes([raw[0], raw[1]])
            } as usize;
            let body = b.get(p + 2..p + 2 + n)?;
            let v = match ty {
                CountedUtf16 | RevCountedUtf16 => Value::Utf16(body),
                CountedBinary => Value::Bytes(body),
                _ => Value::Str(ansi_string(body)),
            };
            (v, p + 2 + n)
        }
        HexDump => {
            let n = le_u32(b, p)? as usize;
            (
                Value::Bytes(b.get(p + 4..(p + 4).checked_add(n)?)?),
                p + 4 + n,
            )
        }
        Binary => {
            let n = len.unwrap_or(b.len().checked_sub(p)?);
            (Value::Bytes(fixed(n)?), p + n)
        }
        SockAddr => {
            let n = len.unwrap_or(b.len().checked_sub(p)?);
            (Value::SockAddr(fixed(n)?), p + n)
        }
        Frames => {
            let rest = b.get(p..)?;
            let step = ptr as usize;
            let v = rest
                .chunks_exact(step)
                .map(|c| le_ptr(c, 0, ptr).unwrap_or(0))
                .collect();
            (Value::Ptrs(v), p + rest.len() / step * step)
        }
        Chars(n) => return read_value(Utf16N, b, pos, ptr, Some(n as usize)),
        Bytes(n) => return read_value(Binary, b, pos, ptr, Some(n as usize)),
        Struct => return None,
    })
}

#[cfg(test)]
mod utf16_tests {
    use super::utf16_string;

    fn enc(s: &str) -> Vec<u8> {
        s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect()
    }

    #[test]
    fn ascii_and_non_ascii_text_round_trips() {
        for s in [
            "",
            "a",
            "abc",
            "abcd",
            "C:\\Windows\\System32\\ntdll.dll",
            "héllo wörld, 0123456789",
            "0123456\u{263a}89abcdef",
            "\u{1f600} emoji first",
        ] {
            assert_eq!(utf16_string(&enc(s)), s);
        }
    }

    #[test]
    fn finds_the_terminator_wherever_it_falls() {
        for text in ["abcdefghijkl", "h\u{e9}llo w\u{f6}rld \u{263a}"] {
            for cut in 0..text.chars().count() {
                let head: String = text.chars().take(cut).collect();
                let mut b = enc(&head);
                let end = b.len();
                b.extend_from_slice(&[0, 0]);
                b.extend(enc("tail"));
                assert_eq!(super::utf16z_string(&b), (head, end + 2));
            }
        }
        // U+0100 has a zero low byte but is not a terminator; unterminated runs to the end
        let b = enc("\u{100}\u{100}\u{100}\u{100}x");
        assert_eq!(
            super::utf16z_string(&b),
            ("\u{100}".repeat(4) + "x", b.len())
        );
        assert_eq!(super::utf16z_string(&[b'a', 0, b'b']), ("a".to_string(), 3));
    }

    #[test]
    fn long_text_agrees_with_a_plain_decoding_wherever_the_terminator_or_a_wide_char_falls() {
        // the 8- and 4-unit fast paths against char::decode_utf16, unit by unit
        let plain = |b: &[u8]| -> (String, usize) {
            let units: Vec<u16> = b
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            let n = units.iter().position(|u| *u == 0);
            let text = char::decode_utf16(units[..n.unwrap_or(units.len())].iter().copied())
                .map(|c| c.unwrap_or('\u{fffd}'))
                .collect();
            (text, n.map_or(b.len(), |n| 2 * n + 2))
        };
        let base: Vec<char> = "0123456789abcdefghijklmnopqrstuvwxyzABCD".chars().collect();
        for at in 0..base.len() {
            for put in ['\0', '\u{e9}', '\u{100}', '\u{7f}', '\u{80}'] {
                let mut t = base.clone();
                t[at] = put;
                let s: String = t.iter().collect();
                for extra in [0usize, 1] {
                    let mut b = enc(&s);
                    b.resize(b.len() + extra, b'z');
                    assert_eq!(super::utf16z_string(&b), plain(&b), "{s:?} +{extra}");
                    let (len, next) = super::utf16z_extent(&b);
                    assert_eq!(next, plain(&b).1, "{s:?}");
                    assert_eq!(utf16_string(&b[..len]), plain(&b).0, "{s:?}");
                }
            }
        }
    }

    #[test]
    fn stepping_over_a_value_agrees_with_reading_it() {
        use super::FieldType::*;
        let types = [
            I8,
            U8,
            I16,
            U16,
            I32,
            U32,
            I64,
            U64,
            Ptr,
            SizeT,
            U16Be,
            HexI32,
            HexI64,
            F32,
            F64,
            Bool32,
            Bool8,
            Guid,
            FileTime,
            SystemTime,
            Sid,
            WmiSid,
            AnsiZ,
            Utf16Z,
            Utf16N,
            AnsiN,
            CountedUtf16,
            CountedAnsi,
            CountedBinary,
            HexDump,
            IpV4,
            IpV6,
            Frames,
            Utf16Char,
            AnsiChar,
            Binary,
            SockAddr,
            Chars(3),
            Bytes(5),
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..4000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let n = (seed % 40) as usize;
            let b: Vec<u8> = (0..n).map(|i| (seed >> (i % 8 * 8)) as u8 & 0x8f).collect();
            let ty = types[round % types.len()];
            let ptr = if round % 2 == 0 { 4 } else { 8 };
            let pos = (seed >> 40) as usize % (n + 2);
            let read = super::read_value(ty, &b, pos, ptr, None)
                .filter(|_| pos <= b.len())
                .map(|(v, next)| (v.as_u64(), next));
            assert_eq!(
                super::value_end(ty, &b, pos, ptr, None),
                read,
                "{ty:?} {b:?} @{pos}"
            );
        }
    }

    #[test]
    fn views_convert_like_the_eager_reader() {
        let texts = [
            "",
            "abc",
            "abcdefgh",
            "C:\\Windows\\System32\\ntdll.dll",
            "h\u{e9}llo w\u{f6}rld \u{263a} \u{1f600}",
        ];
        for text in texts {
            for tail in [&b""[..], &[0, 0][..], &[0, 0, b'x', 0][..], &b"y"[..]] {
                let mut b = enc(text);
                b.extend_from_slice(tail);
                let (len, next) = super::utf16z_extent(&b);
                let (s, eager_next) = super::utf16z_string(&b);
                assert_eq!(next, eager_next, "{text:?} {tail:?}");
                assert_eq!(len, enc(text).len(), "{text:?} {tail:?}");
                let mut out = Vec::new();
                super::utf16_into(&b, &mut out);
                assert_eq!(String::from_utf8(out).unwrap(), s);
                let (v, end) = super::read_value(super::FieldType::Utf16Z, &b, 0, 8, None).unwrap();
                assert_eq!(end, next);
                assert_eq!(v.text().as_deref(), Some(text));
                assert_eq!(v.to_string(), text);
            }
        }
    }

    #[test]
    fn stops_at_the_terminator_wherever_it_falls() {
        for cut in 0..12 {
            let text = "abcdefghijkl";
            let mut b = enc(&text[..cut]);
            b.extend_from_slice(&[0, 0]);
            b.extend(enc("tail"));
            assert_eq!(utf16_string(&b), &text[..cut]);
        }
        // an odd trailing byte is ignored; a lone surrogate becomes U+FFFD
        assert_eq!(utf16_string(&[b'a', 0, b'b']), "a");
        assert_eq!(utf16_string(&[0x00, 0xd8, b'x', 0]), "\u{fffd}x");
    }
}

#[cfg(test)]
mod sockaddr_tests {
    use super::{read_value, FieldType};
    use crate::etw::decode::tdh::tdh_type;

    fn shown(b: &[u8]) -> String {
        let (v, end) = read_value(FieldType::SockAddr, b, 0, 8, Some(b.len())).unwrap();
        assert_eq!(end, b.len());
        v.to_string()
    }

    #[test]
    fn socket_addresses_show_as_address_and_port() {
        // binary with out-type SocketAddress, as the DNS client's server events declare it
        assert_eq!(tdh_type(14, 25, true), FieldType::SockAddr);
        let mut v4 = vec![2, 0, 0, 53, 10, 50, 10, 50];
        v4.extend([0; 8]);
        assert_eq!(shown(&v4), "10.50.10.50:53");
        let mut v6 = vec![23, 0, 0x01, 0xbb, 0, 0, 0, 0];
        v6.extend([
            0x20, 0x01, 0x48, 0x98, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0x50, 0x10, 0x50,
        ]);
        v6.extend([0, 0, 0, 0]);
        assert_eq!(shown(&v6), "[2001:4898::1050:1050]:443");
        v6[24] = 5;
        assert_eq!(shown(&v6), "[2001:4898::1050:1050%5]:443");
        // too short for its family, or another family: the bytes in hex
        assert_eq!(shown(&v6[..20]), "170001bb00000000200148980000000000000000");
        assert_eq!(shown(&[1, 0, 9]), "010009");
    }
}
