//! Number subroutines: `lltostr`, `strtoll`, the byte-order conversions and `rand`.

use super::{cstr, Fault};

/// The base argument of `lltostr`/`strtoll`: 10 when absent; the kernel narrows it to an
/// int and accepts 2..=36.
fn check_base(base: Option<i64>) -> Result<u32, Fault> {
    let b = base.map_or(10, |b| b as i32);
    if (2..=36).contains(&b) {
        Ok(b as u32)
    } else {
        Err(Fault::IllegalOp)
    }
}

/// `lltostr(v[, base])`: `v` written in `base` (default 10, lower-case digits). Base 10
/// writes negative values with a `-`; any other base writes the 64-bit two's complement
/// bits. As in the kernel, base 16 adds a `0x` prefix (0 is `0x0`) and base 8 a leading `0`.
/// A base outside 2..=36 is `Err(Fault::IllegalOp)`.
pub fn lltostr(v: i64, base: Option<i64>, out: &mut Vec<u8>) -> Result<(), Fault> {
    out.clear();
    let base = check_base(base)?;
    let b = u64::from(base);
    let mut val = if base == 10 && v < 0 {
        (v as u64).wrapping_neg()
    } else {
        v as u64
    };

    // 64 binary digits, a sign or prefix, and room to spare.
    let mut buf = [0u8; 72];
    let mut pos = buf.len();
    let mut push = |c: u8| {
        pos -= 1;
        buf[pos] = c;
    };
    while val != 0 {
        let d = (val % b) as u8;
        push(if d < 10 { b'0' + d } else { b'a' + d - 10 });
        val /= b;
    }
    if v == 0 && base == 16 {
        push(b'0');
    }
    if base == 16 {
        push(b'x');
    }
    if v == 0 || base == 8 || base == 16 {
        push(b'0');
    }
    if v < 0 && base == 10 {
        push(b'-');
    }
    out.extend_from_slice(&buf[pos..]);
    Ok(())
}

/// The value of an ASCII letter or digit as a digit (`0`-`9`, then `a`/`A` = 10 ...), or
/// `None` for any other byte.
fn digit(c: u8) -> Option<u32> {
    match c {
        b'0'..=b'9' => Some(u32::from(c - b'0')),
        b'a'..=b'z' => Some(u32::from(c - b'a') + 10),
        b'A'..=b'Z' => Some(u32::from(c - b'A') + 10),
        _ => None,
    }
}

/// The kernel's `strtoll` over a byte sequence (NUL or its end terminates it): spaces and
/// tabs, an optional sign, for base 16 an optional `0x`/`0X` when a hex digit follows, then
/// digits up to the first byte that is not a digit of `base` or until `limit` bytes have
/// been read. Overflow wraps.
pub(super) fn strtoll_bytes<I>(bytes: I, base: u32, limit: usize) -> i64
where
    I: Iterator<Item = u8> + Clone,
{
    let mut it = bytes.chain(std::iter::repeat(0));
    let mut pos = 0usize;
    let mut c = it.next().unwrap_or(0);
    while c == b' ' || c == b'\t' {
        c = it.next().unwrap_or(0);
        pos += 1;
    }
    let neg = c == b'-';
    if c == b'-' || c == b'+' {
        c = it.next().unwrap_or(0);
        pos += 1;
    }
    if base == 16 && c == b'0' {
        let mut ahead = it.clone();
        let x = ahead.next().unwrap_or(0);
        let h = ahead.next().unwrap_or(0);
        if (x == b'x' || x == b'X') && h.is_ascii_hexdigit() {
            it = ahead;
            c = h;
            pos += 2;
        }
    }
    let mut val: i64 = 0;
    while pos < limit && c != 0 {
        match digit(c) {
            Some(d) if d < base => {
                val = val.wrapping_mul(i64::from(base)).wrapping_add(i64::from(d));
            }
            _ => break,
        }
        c = it.next().unwrap_or(0);
        pos += 1;
    }
    if neg {
        val.wrapping_neg()
    } else {
        val
    }
}

/// `strtoll(s[, base])`: `s` read as an integer in `base` (default 10): leading spaces and
/// tabs, an optional sign, for base 16 an optional `0x` prefix, then digits up to the first
/// byte that is not one; "" and non-numbers give 0, and overflow wraps (no clamping, no
/// octal or hex detection from the prefix). A base outside 2..=36 is
/// `Err(Fault::IllegalOp)`.
pub fn strtoll(s: &[u8], base: Option<i64>) -> Result<i64, Fault> {
    let base = check_base(base)?;
    let s = cstr(s);
    Ok(strtoll_bytes(s.iter().copied(), base, s.len()))
}

/// `htons(v)`: the low 16 bits of `v` in network (big-endian) order.
pub fn htons(v: u64) -> u64 {
    u64::from((v as u16).to_be())
}

/// `ntohs(v)`: the low 16 bits of `v` from network order.
pub fn ntohs(v: u64) -> u64 {
    u64::from(u16::from_be(v as u16))
}

/// `htonl(v)`: the low 32 bits of `v` in network (big-endian) order.
pub fn htonl(v: u64) -> u64 {
    u64::from((v as u32).to_be())
}

/// `ntohl(v)`: the low 32 bits of `v` from network order.
pub fn ntohl(v: u64) -> u64 {
    u64::from(u32::from_be(v as u32))
}

/// `htonll(v)`: `v` in network (big-endian) order.
pub fn htonll(v: u64) -> u64 {
    v.to_be()
}

/// `ntohll(v)`: `v` from network order.
pub fn ntohll(v: u64) -> u64 {
    u64::from_be(v)
}

const RAND_MUL: i64 = 2416;
const RAND_ADD: i64 = 374441;
const RAND_MOD: i64 = 1771875;

/// The kernel's `rand()` for the high-resolution time `hrtime`:
/// `(hrtime * 2416 + 374441) % 1771875`, with C's wrapping signed arithmetic (so a huge or
/// negative `hrtime` can give a negative result).
pub fn rand_at(hrtime: i64) -> i64 {
    hrtime
        .wrapping_mul(RAND_MUL)
        .wrapping_add(RAND_ADD)
        .wrapping_rem(RAND_MOD)
}

/// `rand()` as a linear congruential generator over `state`, with the kernel's constants:
/// each call replaces `state` by the next value and returns it. After the first call the
/// values lie in `0..1771875`, like the kernel's (which feeds the time in instead of the
/// previous value; see [`rand_at`]).
pub fn rand(state: &mut u64) -> i64 {
    let r = rand_at(*state as i64);
    // Keep the state in range even if the first multiplication wrapped negative.
    let r = if r < 0 { r + RAND_MOD } else { r };
    *state = r as u64;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ll(v: i64, base: Option<i64>) -> Result<String, Fault> {
        let mut out = Vec::new();
        lltostr(v, base, &mut out).map(|()| String::from_utf8(out).unwrap())
    }

    #[test]
    fn lltostr_suite() {
        // tst.lltostr.d
        assert_eq!(ll(0, None).unwrap(), "0");
        assert_eq!(ll(1, None).unwrap(), "1");
        assert_eq!(ll(-1, None).unwrap(), "-1");
        assert_eq!(ll(123456789, None).unwrap(), "123456789");
        assert_eq!(ll(-123456789, None).unwrap(), "-123456789");
        assert_eq!(ll(1 << 62, None).unwrap(), "4611686018427387904");
        assert_eq!(ll(-(1 << 62), None).unwrap(), "-4611686018427387904");
        assert_eq!(ll(i64::MIN, None).unwrap(), "-9223372036854775808");
        assert_eq!(ll(i64::MAX, None).unwrap(), "9223372036854775807");
    }

    /// Rows of tst.lltostrbase.d.out: base, then the results for -10, -1, 0, 10, 100, 1000
    /// and 1 << 62.
    #[test]
    fn lltostrbase_suite() {
        let vals = [-10i64, -1, 0, 10, 100, 1000, 1 << 62];
        let table: &[(i64, [&str; 7])] = &[
            (
                2,
                [
                    "1111111111111111111111111111111111111111111111111111111111110110",
                    "1111111111111111111111111111111111111111111111111111111111111111",
                    "0",
                    "1010",
                    "1100100",
                    "1111101000",
                    "100000000000000000000000000000000000000000000000000000000000000",
                ],
            ),
            (
                3,
                [
                    "11112220022122120101211020120210210211120",
                    "11112220022122120101211020120210210211220",
                    "0",
                    "101",
                    "10201",
                    "1101001",
                    "1010201120122220002201001122110012110111",
                ],
            ),
            (
                7,
                [
                    "45012021522523134134556",
                    "45012021522523134134601",
                    "0",
                    "13",
                    "202",
                    "2626",
                    "11154003640456024361134",
                ],
            ),
            (
                8,
                [
                    "01777777777777777777766",
                    "01777777777777777777777",
                    "0",
                    "012",
                    "0144",
                    "01750",
                    "0400000000000000000000",
                ],
            ),
            (
                10,
                ["-10", "-1", "0", "10", "100", "1000", "4611686018427387904"],
            ),
            (
                11,
                [
                    "335500516a429071276",
                    "335500516a429071284",
                    "0",
                    "a",
                    "91",
                    "82a",
                    "9140013181078458a4",
                ],
            ),
            (
                16,
                [
                    "0xfffffffffffffff6",
                    "0xffffffffffffffff",
                    "0x0",
                    "0xa",
                    "0x64",
                    "0x3e8",
                    "0x4000000000000000",
                ],
            ),
            (
                19,
                [
                    "141c8786h1ccaag7",
                    "141c8786h1ccaagg",
                    "0",
                    "a",
                    "55",
                    "2ec",
                    "5ecbb6fi9h7ggi9",
                ],
            ),
            (
                32,
                [
                    "fvvvvvvvvvvvm",
                    "fvvvvvvvvvvvv",
                    "0",
                    "a",
                    "34",
                    "v8",
                    "4000000000000",
                ],
            ),
            (
                36,
                [
                    "3w5e11264sgs6",
                    "3w5e11264sgsf",
                    "0",
                    "a",
                    "2s",
                    "rs",
                    "z1ci99jj7474",
                ],
            ),
        ];
        for (base, row) in table {
            for (v, want) in vals.iter().zip(row) {
                assert_eq!(ll(*v, Some(*base)).unwrap(), *want, "lltostr({v}, {base})");
            }
        }
        for base in [-2, -1, 0, 1, 37, 38, 39, 40, i64::MIN, i64::MAX] {
            for v in vals {
                assert_eq!(ll(v, Some(base)), Err(Fault::IllegalOp));
            }
        }
        // Every valid base and extreme value fits.
        for base in 2..=36 {
            for v in [i64::MIN, i64::MAX, -1, 0, 1] {
                let s = ll(v, Some(base)).unwrap();
                assert!(s.len() <= 66);
            }
        }
        // The base is narrowed to an int.
        assert_eq!(ll(255, Some((1 << 32) | 16)).unwrap(), "0xff");
    }

    /// tst.strtoll.d with its .out file.
    #[test]
    fn strtoll_suite() {
        let cases: &[(&str, Option<i64>, i64)] = &[
            ("0", Some(2), 0),
            ("1", Some(36), 1),
            ("0x20", Some(16), 32),
            ("-32", Some(10), -32),
            ("010", Some(8), 8),
            ("101010", Some(2), 42),
            ("9223372036854775807", None, 9223372036854775807),
            ("-9223372036854775808", None, i64::MIN),
            ("0777777777777777777777", Some(8), 9223372036854775807),
            ("-01000000000000000000000", Some(8), i64::MIN),
            ("1000000000000000000000", Some(8), i64::MIN),
            ("-1000000000000000000001", Some(8), 9223372036854775807),
            ("baddcafe", Some(16), 3135097598),
            ("12j", Some(10), 12),
            ("102", Some(2), 2),
            ("-0DTrace4EverZ", Some(36), -1819882045752187535),
            ("1985", None, 1985),
            ("-2012", None, -2012),
            ("", None, 0),
        ];
        for &(s, base, want) in cases {
            assert_eq!(
                strtoll(s.as_bytes(), base),
                Ok(want),
                "strtoll({s:?}, {base:?})"
            );
        }
        // err.BaseTooLarge.d / err.BaseTooSmall.d
        assert_eq!(strtoll(b"0", Some(37)), Err(Fault::IllegalOp));
        assert_eq!(strtoll(b"0", Some(1)), Err(Fault::IllegalOp));
    }

    #[test]
    fn strtoll_details() {
        assert_eq!(strtoll(b" \t 42x", None), Ok(42));
        assert_eq!(strtoll(b"\n42", None), Ok(0));
        assert_eq!(strtoll(b"+7", None), Ok(7));
        assert_eq!(strtoll(b"-", None), Ok(0));
        assert_eq!(strtoll(b"0x", Some(16)), Ok(0));
        assert_eq!(strtoll(b"0xg", Some(16)), Ok(0));
        assert_eq!(strtoll(b"0X1F", Some(16)), Ok(31));
        assert_eq!(strtoll(b"0x10", None), Ok(0));
        assert_eq!(strtoll(b"12\x0034", None), Ok(12));
        assert_eq!(strtoll(b"1\xff2", None), Ok(1));
        // 10^26 - 1 wraps modulo 2^64.
        let mut v: i64 = 0;
        for _ in 0..26 {
            v = v.wrapping_mul(10).wrapping_add(9);
        }
        assert_eq!(strtoll(b"99999999999999999999999999", None), Ok(v));
    }

    #[test]
    fn byte_order() {
        // tst.hton.d (little-endian host).
        if cfg!(target_endian = "little") {
            assert_eq!(htons(0x1122), 0x2211);
            assert_eq!(ntohs(0x1122), 0x2211);
            assert_eq!(htonl(0x11223344), 0x44332211);
            assert_eq!(ntohl(0x11223344), 0x44332211);
            assert_eq!(htonll(0x1122334455667788), 0x8877665544332211);
            assert_eq!(ntohll(0x1122334455667788), 0x8877665544332211);
            assert_eq!(htons(0xffff_0000_1122), 0x2211);
            assert_eq!(htonl(0xffff_1122_3344), 0x44332211);
        }
        for v in [0u64, 1, 0x1234, u64::MAX] {
            assert_eq!(ntohs(htons(v)), v & 0xffff);
            assert_eq!(ntohl(htonl(v)), v & 0xffff_ffff);
            assert_eq!(ntohll(htonll(v)), v);
        }
    }

    #[test]
    fn rand_values() {
        assert_eq!(rand_at(0), 374441);
        assert_eq!(rand_at(1), 374441 + 2416);
        assert_eq!(rand_at(1_000_000), (2_416_000_000 + 374441) % 1771875);
        let _ = rand_at(i64::MIN);
        let _ = rand_at(i64::MAX);
        let mut st = 0x2545_f491_4f6c_dd1du64;
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            let r = rand(&mut st);
            assert!((0..RAND_MOD).contains(&r));
            seen.insert(r);
        }
        assert!(seen.len() > 900);
        let mut st = u64::MAX;
        assert!((0..RAND_MOD).contains(&rand(&mut st)));
    }
}
