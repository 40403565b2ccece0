//! String subroutines: `strlen`, `strjoin`, `substr`, `index`, `rindex`, `strstr`, `strchr`,
//! `strrchr`, `strtok`, `tolower` and `toupper`.

use super::{at, bounded, cstr, Fault};

/// `strlen(s)`: the length of `s`, at most `strsize`.
pub fn strlen(s: &[u8], strsize: usize) -> usize {
    bounded(s, strsize).len()
}

/// `strjoin(a, b)`: `a` followed by `b`.
///
/// As in the kernel, the joined string must leave room for its terminator: when
/// `len(a) + len(b) >= strsize` the call faults with [`Fault::NoScratch`] (it is not
/// truncated) and `out` is left empty.
pub fn strjoin(a: &[u8], b: &[u8], strsize: usize, out: &mut Vec<u8>) -> Result<(), Fault> {
    out.clear();
    let (a, b) = (bounded(a, strsize), bounded(b, strsize));
    if a.len() + b.len() >= strsize {
        return Err(Fault::NoScratch);
    }
    out.extend_from_slice(a);
    out.extend_from_slice(b);
    Ok(())
}

/// `substr(s, index[, len])`, with Perl-like rules: a negative `index` counts from the end of
/// the string (a start before the beginning eats into `len`), a negative `len` leaves that
/// many bytes off the end, an index at or past the end yields "", and without `len` the rest
/// of the string is taken. The arithmetic wraps as the kernel's 64-bit arithmetic does.
pub fn substr(s: &[u8], index: i64, len: Option<i64>, strsize: usize, out: &mut Vec<u8>) {
    out.clear();
    let s = bounded(s, strsize);
    let slen = s.len() as u64;
    let size = strsize as u64;
    let mut index = index;
    let mut remaining = len.unwrap_or(size as i64);

    if index < 0 {
        index = index.wrapping_add(slen as i64);
        if index < 0 && index.wrapping_add(remaining) > 0 {
            remaining = remaining.wrapping_add(index);
            index = 0;
        }
    }

    // The kernel compares these signed values against unsigned lengths, so a negative index
    // counts as "past the end" and an overflowing sum as "too long".
    if index as u64 >= slen {
        remaining = 0;
    } else if remaining < 0 {
        remaining = remaining.wrapping_add((slen as i64).wrapping_sub(index));
    } else if index.wrapping_add(remaining) as u64 > size {
        remaining = (size as i64).wrapping_sub(index);
    }

    if remaining <= 0 {
        return;
    }
    // Here 0 <= index < slen.
    let start = index as usize;
    let take = (remaining as u64).min((slen - index as u64).min(size)) as usize;
    out.extend_from_slice(&s[start..start + take]);
}

/// Whether `sub` occurs in `s` at byte offset `pos` (the kernel's `strncmp(s + pos, sub,
/// len(sub)) == 0`; an empty `sub` occurs everywhere).
fn occurs_at(s: &[u8], pos: usize, sub: &[u8]) -> bool {
    s.get(pos..).is_some_and(|rest| rest.starts_with(sub))
}

/// `index(s, sub[, start])`: the offset of the first occurrence of `sub` in `s` at or after
/// `start`, or -1. As in Perl, a negative `start` counts as 0; a `start` at or past the end
/// finds nothing, except that an empty `sub` is then found at the end of the string; and
/// when both strings are empty the result is 0 whatever `start` is.
pub fn index(s: &[u8], sub: &[u8], start: Option<i64>) -> i64 {
    let (s, sub) = (cstr(s), cstr(sub));
    let len = s.len();
    if sub.is_empty() && len == 0 {
        return 0;
    }
    let mut from = 0usize;
    if let Some(pos) = start {
        let pos = pos.max(0) as u64;
        if pos >= len as u64 {
            return if sub.is_empty() { len as i64 } else { -1 };
        }
        from = pos as usize;
    }
    (from..len)
        .find(|&p| occurs_at(s, p, sub))
        .map_or(-1, |p| p as i64)
}

/// `rindex(s, sub[, start])`: the offset of the last occurrence of `sub` in `s` that begins
/// at or before `start` (default: the end of the string), or -1. As in Perl, a `start` past
/// the end counts as the end; a negative `start` finds nothing, except that an empty `sub`
/// is then found at 0; and when both strings are empty the result is 0.
pub fn rindex(s: &[u8], sub: &[u8], start: Option<i64>) -> i64 {
    let (s, sub) = (cstr(s), cstr(sub));
    let len = s.len();
    if sub.is_empty() && len == 0 {
        return 0;
    }
    let mut from = len;
    if let Some(pos) = start {
        if pos < 0 {
            return if sub.is_empty() { 0 } else { -1 };
        }
        from = (pos as u64).min(len as u64) as usize;
    }
    (0..=from)
        .rev()
        .find(|&p| occurs_at(s, p, sub))
        .map_or(-1, |p| p as i64)
}

/// `strstr(s, sub)`: the offset in `s` of the first occurrence of `sub` (the result string is
/// `s[offset..]`), or `None` for a NULL result. An empty `sub` is found at offset 0.
pub fn strstr(s: &[u8], sub: &[u8]) -> Option<usize> {
    let (s, sub) = (cstr(s), cstr(sub));
    if sub.is_empty() {
        return Some(0);
    }
    (0..s.len()).find(|&p| occurs_at(s, p, sub))
}

/// The shared scan of `strchr` and `strrchr`: looks at no more than `strsize` bytes, and the
/// terminating NUL counts as part of the string (so searching for character 0 finds it).
fn find_char(s: &[u8], c: i64, strsize: usize, last: bool) -> Option<usize> {
    let s = cstr(s);
    let target = c as u8;
    let mut found = None;
    for i in 0..strsize.min(s.len() + 1) {
        let b = at(s, i);
        if b == target {
            found = Some(i);
            if !last {
                break;
            }
        }
        if b == 0 {
            break;
        }
    }
    found
}

/// `strchr(s, c)`: the offset of the first `c` in `s` (the result string is `s[offset..]`),
/// or `None`. Only the low 8 bits of `c` count, as the kernel truncates it to a `char`;
/// searching for 0 finds the terminator at offset `len(s)` when `len(s) < strsize`.
pub fn strchr(s: &[u8], c: i64, strsize: usize) -> Option<usize> {
    find_char(s, c, strsize, false)
}

/// `strrchr(s, c)`: the offset of the last `c` in `s`, or `None`; see [`strchr`].
pub fn strrchr(s: &[u8], c: i64, strsize: usize) -> Option<usize> {
    find_char(s, c, strsize, true)
}

/// What `strtok` remembers between calls: the string being tokenised and where the next
/// search starts. The kernel keeps this as a saved address in the probe's machine state, so
/// it is shared by the clauses of one firing; the VM decides how long one state lives.
#[derive(Clone, Debug, Default)]
pub struct StrtokState {
    buf: Vec<u8>,
    pos: usize,
    active: bool,
}

impl StrtokState {
    /// Forgets the saved string: a following `strtok(NULL, ...)` faults.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.pos = 0;
        self.active = false;
    }
}

/// A 256-bit membership map of the delimiter bytes.
fn delim_map(delim: &[u8]) -> [u8; 32] {
    let mut map = [0u8; 32];
    for &c in delim {
        map[(c >> 3) as usize] |= 1 << (c & 7);
    }
    map
}

fn in_map(map: &[u8; 32], c: u8) -> bool {
    map[(c >> 3) as usize] & (1 << (c & 7)) != 0
}

/// `strtok(s, delim)`: `Some(s)` starts tokenising `s`; `None` (a NULL first argument)
/// continues the string saved in `state`. Skips delimiter bytes, then writes the token (at
/// most `strsize - 1` bytes) to `out` and returns `Ok(true)`; returns `Ok(false)` (a NULL
/// result, after which the state is cleared) when only delimiters remain. Continuing with
/// no saved string is a read of address 0: `Err(Fault::BadAddr(0))`.
pub fn strtok(
    s: Option<&[u8]>,
    delim: &[u8],
    state: &mut StrtokState,
    strsize: usize,
    out: &mut Vec<u8>,
) -> Result<bool, Fault> {
    out.clear();
    match s {
        Some(s) => {
            state.buf.clear();
            state.buf.extend_from_slice(bounded(s, strsize));
            state.pos = 0;
            state.active = true;
        }
        None if !state.active => return Err(Fault::BadAddr(0)),
        None => {}
    }
    let map = delim_map(bounded(delim, strsize));
    let buf = &state.buf;
    let mut pos = state.pos;
    let limit = pos.saturating_add(strsize);

    // Skip leading delimiters.
    let mut c = 0u8;
    while pos < limit {
        c = at(buf, pos);
        if c == 0 || !in_map(&map, c) {
            break;
        }
        pos += 1;
    }
    if c == 0 {
        state.reset();
        return Ok(false);
    }

    // Copy the token.
    let max = strsize.saturating_sub(1);
    while pos < limit && out.len() < max {
        let c = at(buf, pos);
        if c == 0 || in_map(&map, c) {
            break;
        }
        out.push(c);
        pos += 1;
    }
    state.pos = pos;
    Ok(true)
}

fn convert_case(s: &[u8], strsize: usize, out: &mut Vec<u8>, upper: bool) {
    out.clear();
    let s = cstr(s);
    let s = &s[..s.len().min(strsize.saturating_sub(1))];
    out.extend(s.iter().map(|c| {
        if upper {
            c.to_ascii_uppercase()
        } else {
            c.to_ascii_lowercase()
        }
    }));
}

/// `tolower(s)`: `s` with ASCII `A`-`Z` lowered (other bytes unchanged), at most
/// `strsize - 1` bytes.
pub fn tolower(s: &[u8], strsize: usize, out: &mut Vec<u8>) {
    convert_case(s, strsize, out, false);
}

/// `toupper(s)`: `s` with ASCII `a`-`z` raised (other bytes unchanged), at most
/// `strsize - 1` bytes.
pub fn toupper(s: &[u8], strsize: usize, out: &mut Vec<u8>) {
    convert_case(s, strsize, out, true);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(s: &str, i: i64, l: Option<i64>, strsize: usize) -> String {
        let mut out = vec![1, 2, 3];
        substr(s.as_bytes(), i, l, strsize, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strlen_bounds() {
        assert_eq!(strlen(b"hello", 256), 5);
        assert_eq!(strlen(b"hel\0lo", 256), 3);
        assert_eq!(strlen(b"hello", 3), 3);
        assert_eq!(strlen(b"", 256), 0);
    }

    #[test]
    fn strjoin_suite() {
        // tst.strjoin.d
        let mut out = Vec::new();
        for (a, b, want) in [
            ("foo", "baz", "foobaz"),
            ("foo", "", "foo"),
            ("", "baz", "baz"),
            ("", "", ""),
        ] {
            strjoin(a.as_bytes(), b.as_bytes(), 256, &mut out).unwrap();
            assert_eq!(out, want.as_bytes());
        }
    }

    #[test]
    fn strjoin_too_long_faults() {
        let mut out = Vec::new();
        assert_eq!(strjoin(b"abc", b"de", 6, &mut out), Ok(()));
        assert_eq!(out, b"abcde");
        assert_eq!(strjoin(b"abc", b"def", 6, &mut out), Err(Fault::NoScratch));
        assert!(out.is_empty());
        assert_eq!(strjoin(b"", b"", 0, &mut out), Err(Fault::NoScratch));
    }

    /// Every case of tst.substr.d (strsize=32), with the result its .out file records.
    #[test]
    fn substr_suite() {
        let s = "foobarbazbop";
        let n = s.len() as i64;
        let cases: &[(i64, Option<i64>, &str)] = &[
            (3, None, "barbazbop"),
            (300, None, ""),
            (-10, None, "obarbazbop"),
            (0, None, "foobarbazbop"),
            (1, None, "oobarbazbop"),
            (n - 1, None, "p"),
            (n, None, ""),
            (n + 1, None, ""),
            (8, Some(20), "zbop"),
            (4, Some(4), "arba"),
            (5, Some(n - 5 + 1), "rbazbop"),
            (5, Some(n - 5 + 2), "rbazbop"),
            (400, Some(20), ""),
            (400, Some(0), ""),
            (400, Some(-1), ""),
            (3, Some(0), ""),
            (3, Some(-1), "barbazbo"),
            (3, Some(-4), "barba"),
            (3, Some(-20), ""),
            (-10, Some(-5), "obarb"),
            (0, Some(400), "foobarbazbop"),
            (-1, Some(400), "p"),
            (-1, Some(0), ""),
            (-1, Some(-1), ""),
            (-2 * n, Some(2 * n), "foobarbazbop"),
            (-2 * n, Some(n), ""),
            (-2 * n, Some(n + 1), "f"),
            (-n, Some(n), "foobarbazbop"),
            (-n, Some(n - 1), "foobarbazbo"),
        ];
        for &(i, l, want) in cases {
            assert_eq!(sub(s, i, l, 32), want, "substr({s:?}, {i}, {l:?})");
        }
        // The "alt" cases: the literal is longer than strsize, so D holds its first 31 bytes.
        let alt = "CRAIG: Positioned them, I don't know... I'm fairly wide guy.";
        let held = &alt[..31];
        assert_eq!(sub(held, 100, Some(10), 32), "");
        assert_eq!(sub(held, 100, None, 32), "");
        assert_eq!(sub(alt, 100, None, 32), "");
    }

    #[test]
    fn substr_terminate() {
        // tst.substrminate.d
        assert_eq!(sub("Bryan is smart", 0, Some(8), 256), "Bryan is");
        assert_eq!(
            sub("he's not a dummy", 0, Some(18), 256),
            "he's not a dummy"
        );
    }

    #[test]
    fn substr_extremes() {
        let s = "foobarbazbop";
        for i in [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX] {
            for l in [
                None,
                Some(i64::MIN),
                Some(i64::MIN + 5),
                Some(-1),
                Some(0),
                Some(3),
                Some(i64::MAX),
            ] {
                for strsize in [0, 1, 5, 12, 13, 256] {
                    let r = sub(s, i, l, strsize);
                    assert!(r.len() <= strsize.min(s.len()));
                    assert!(s.contains(&r));
                }
            }
        }
        assert_eq!(sub(s, 0, Some(i64::MAX), 256), s);
        assert_eq!(sub(s, 2, Some(i64::MAX), 256), "obarbazbop");
        assert_eq!(sub(s, -3, Some(i64::MAX), 256), "bop");
        // (MIN + 12) + MAX = 11: the window covers the first 11 bytes.
        assert_eq!(sub(s, i64::MIN, Some(i64::MAX), 256), "foobarbazbo");
        // index + len is capped at strsize.
        assert_eq!(sub(s, 2, Some(5), 4), "ob");
        assert_eq!(sub(s, 0, None, 5), "fooba");
    }

    /// Every index()/rindex() call of tst.index.d with the value its .out file records.
    #[test]
    fn index_suite() {
        let pairs = [
            ("foobarbaz", "barbaz"),
            ("foofoofoo", "foo"),
            ("boofoofoo", "foo"),
            ("foobarbaz", "barbazzy"),
            ("foobar", "foobar"),
            ("foobar", "foobarbaz"),
            ("", "foobar"),
            ("foobar", ""),
            ("", ""),
            ("foo", ""),
        ];
        let plain: [(i64, i64); 10] = [
            (3, 3),
            (0, 6),
            (3, 6),
            (-1, -1),
            (0, 0),
            (-1, -1),
            (-1, -1),
            (0, 6),
            (0, 0),
            (0, 3),
        ];
        for (&(s, t), &(i, r)) in pairs.iter().zip(plain.iter()) {
            assert_eq!(
                index(s.as_bytes(), t.as_bytes(), None),
                i,
                "index({s:?},{t:?})"
            );
            assert_eq!(
                rindex(s.as_bytes(), t.as_bytes(), None),
                r,
                "rindex({s:?},{t:?})"
            );
        }

        // (str, sub, pos, index, rindex), transcribed from the .out file.
        let with_pos: &[(&str, &str, i64, i64, i64)] = &[
            ("foobarbaz", "barbaz", -400, 3, -1),
            ("foobarbaz", "barbaz", -1, 3, -1),
            ("foobarbaz", "barbaz", 0, 3, -1),
            ("foobarbaz", "barbaz", 4, -1, 3),
            ("foobarbaz", "barbaz", 9, -1, 3),
            ("foobarbaz", "barbaz", 10, -1, 3),
            ("foobarbaz", "barbaz", 11, -1, 3),
            ("foobarbaz", "barbaz", 400, -1, 3),
            ("foofoofoo", "foo", -400, 0, -1),
            ("foofoofoo", "foo", -1, 0, -1),
            ("foofoofoo", "foo", 0, 0, 0),
            ("foofoofoo", "foo", 4, 6, 3),
            ("foofoofoo", "foo", 9, -1, 6),
            ("foofoofoo", "foo", 10, -1, 6),
            ("foofoofoo", "foo", 11, -1, 6),
            ("foofoofoo", "foo", 400, -1, 6),
            ("boofoofoo", "foo", -400, 3, -1),
            ("boofoofoo", "foo", -1, 3, -1),
            ("boofoofoo", "foo", 0, 3, -1),
            ("boofoofoo", "foo", 4, 6, 3),
            ("boofoofoo", "foo", 9, -1, 6),
            ("boofoofoo", "foo", 10, -1, 6),
            ("boofoofoo", "foo", 11, -1, 6),
            ("boofoofoo", "foo", 400, -1, 6),
            ("foobarbaz", "barbazzy", -400, -1, -1),
            ("foobarbaz", "barbazzy", -1, -1, -1),
            ("foobarbaz", "barbazzy", 0, -1, -1),
            ("foobarbaz", "barbazzy", 4, -1, -1),
            ("foobarbaz", "barbazzy", 9, -1, -1),
            ("foobarbaz", "barbazzy", 10, -1, -1),
            ("foobarbaz", "barbazzy", 11, -1, -1),
            ("foobarbaz", "barbazzy", 400, -1, -1),
            ("foobar", "foobar", -400, 0, -1),
            ("foobar", "foobar", -1, 0, -1),
            ("foobar", "foobar", 0, 0, 0),
            ("foobar", "foobar", 3, -1, 0),
            ("foobar", "foobar", 6, -1, 0),
            ("foobar", "foobar", 7, -1, 0),
            ("foobar", "foobar", 8, -1, 0),
            ("foobar", "foobar", 400, -1, 0),
            ("foobar", "foobarbaz", -400, -1, -1),
            ("foobar", "foobarbaz", -1, -1, -1),
            ("foobar", "foobarbaz", 0, -1, -1),
            ("foobar", "foobarbaz", 3, -1, -1),
            ("foobar", "foobarbaz", 6, -1, -1),
            ("foobar", "foobarbaz", 7, -1, -1),
            ("foobar", "foobarbaz", 8, -1, -1),
            ("foobar", "foobarbaz", 400, -1, -1),
            ("", "foobar", -400, -1, -1),
            ("", "foobar", -1, -1, -1),
            ("", "foobar", 0, -1, -1),
            ("", "foobar", 1, -1, -1),
            ("", "foobar", 2, -1, -1),
            ("", "foobar", 400, -1, -1),
            ("foobar", "", -400, 0, 0),
            ("foobar", "", -1, 0, 0),
            ("foobar", "", 0, 0, 0),
            ("foobar", "", 3, 3, 3),
            ("foobar", "", 6, 6, 6),
            ("foobar", "", 7, 6, 6),
            ("foobar", "", 8, 6, 6),
            ("foobar", "", 400, 6, 6),
            ("", "", -400, 0, 0),
            ("", "", -1, 0, 0),
            ("", "", 0, 0, 0),
            ("", "", 1, 0, 0),
        ];
        for &(s, t, p, i, r) in with_pos {
            let (sb, tb) = (s.as_bytes(), t.as_bytes());
            assert_eq!(index(sb, tb, Some(p)), i, "index({s:?},{t:?},{p})");
            assert_eq!(rindex(sb, tb, Some(p)), r, "rindex({s:?},{t:?},{p})");
        }
    }

    #[test]
    fn index_extremes() {
        for p in [i64::MIN, i64::MAX, -1, 0, 1] {
            assert!(index(b"abc", b"c", Some(p)) <= 2);
            assert!(rindex(b"abc", b"a", Some(p)) <= 0);
        }
        assert_eq!(index(b"abc", b"c", Some(i64::MIN)), 2);
        assert_eq!(rindex(b"abc", b"a", Some(i64::MAX)), 0);
        assert_eq!(rindex(b"abcabc", b"bc", None), 4);
        assert_eq!(index(b"ab\0ab", b"ab", Some(1)), -1);
    }

    #[test]
    fn strstr_suite() {
        // tst.strstr.d
        let s = b"foobarbarbazbarbop";
        assert_eq!(strstr(s, s), Some(0));
        assert_eq!(strstr(s, b"baz"), Some(9));
        assert_eq!(&s[strstr(s, b"baz").unwrap()..], b"bazbarbop");
        assert_eq!(&s[strstr(s, b"bar").unwrap()..], b"barbarbazbarbop");
        assert_eq!(&s[strstr(s, b"bazbarbop").unwrap()..], b"bazbarbop");
        assert_eq!(&s[strstr(s, b"barba").unwrap()..], b"barbarbazbarbop");
        let a = &s[strstr(s, b"baz").unwrap()..];
        let b = &s[strstr(s, b"zba").unwrap()..];
        assert_eq!(b, b"zbarbop");
        assert_eq!(&a[strstr(a, b).unwrap()..], b"zbarbop");
        assert_eq!(strstr(s, b""), Some(0));
        assert_eq!(strstr(b"", b""), Some(0));
        assert_eq!(strstr(b"f", b"f"), Some(0));
        assert_eq!(strstr(b"f", b"barbarf"), None);
        assert_eq!(strstr(s, b"foobarbarbazbarbopp"), None);
        assert_eq!(strstr(b"", b"x"), None);
    }

    #[test]
    fn strchr_suite() {
        // tst.strchr.d
        let s = b"fooeyfooeyfoo";
        assert_eq!(strchr(s, b'f' as i64, 256), Some(0));
        assert_eq!(&s[strrchr(s, b'f' as i64, 256).unwrap()..], b"foo");
        assert_eq!(&s[strchr(s, b'y' as i64, 256).unwrap()..], b"yfooeyfoo");
        assert_eq!(&s[strrchr(s, b'y' as i64, 256).unwrap()..], b"yfoo");
        let t = &s[strchr(s, b'y' as i64, 256).unwrap()..];
        assert_eq!(&t[strrchr(t, b'y' as i64, 256).unwrap()..], b"yfoo");
        assert_eq!(strchr(s, b'a' as i64, 256), None);
        assert_eq!(strrchr(s, b'a' as i64, 256), None);
    }

    #[test]
    fn strchr_details() {
        // Only the low byte of the character counts.
        assert_eq!(strchr(b"abc", 0x162, 256), Some(1));
        // Character 0 finds the terminator, if it lies within strsize.
        assert_eq!(strchr(b"abc", 0, 256), Some(3));
        assert_eq!(strrchr(b"abc", 0, 256), Some(3));
        assert_eq!(strchr(b"abc", 0, 3), None);
        // Only strsize bytes are searched.
        assert_eq!(strchr(b"abcdef", b'e' as i64, 4), None);
        assert_eq!(strrchr(b"abcbef", b'b' as i64, 3), Some(1));
        assert_eq!(strchr(b"", b'a' as i64, 0), None);
    }

    fn tok(s: Option<&str>, d: &str, st: &mut StrtokState) -> Result<Option<String>, Fault> {
        let mut out = Vec::new();
        strtok(s.map(str::as_bytes), d.as_bytes(), st, 256, &mut out)
            .map(|ok| ok.then(|| String::from_utf8(out).unwrap()))
    }

    #[test]
    fn strtok_suite() {
        // tst.strtok.d
        let mut st = StrtokState::default();
        let s = ",,,Carrots,,Barley,Oatmeal,,,Beans,";
        assert_eq!(tok(Some(s), ",", &mut st).unwrap().unwrap(), "Carrots");
        assert_eq!(tok(None, ",", &mut st).unwrap().unwrap(), "Barley");
        assert_eq!(tok(None, ",", &mut st).unwrap().unwrap(), "Oatmeal");
        assert_eq!(tok(None, ",", &mut st).unwrap().unwrap(), "Beans");
        assert_eq!(tok(None, ",", &mut st).unwrap(), None);

        // The table: a NULL result compares equal to "" in D.
        let mut st = StrtokState::default();
        assert_eq!(tok(Some(""), "", &mut st).unwrap(), None);
        assert_eq!(tok(Some("foo"), "", &mut st).unwrap().unwrap(), "foo");
        assert_eq!(tok(Some("foobar"), "o", &mut st).unwrap().unwrap(), "f");
        assert_eq!(tok(Some("oobar"), "o", &mut st).unwrap().unwrap(), "bar");
        assert_eq!(tok(Some("foo"), "bar", &mut st).unwrap().unwrap(), "foo");
        assert_eq!(tok(Some(""), "foo", &mut st).unwrap(), None);
    }

    #[test]
    fn strtok_null_faults() {
        // tst.strtok_null.d: strtok(NULL, ...) with nothing saved is an ERROR.
        let mut st = StrtokState::default();
        assert_eq!(tok(None, "!", &mut st), Err(Fault::BadAddr(0)));
        // ...as it is once a string has been used up.
        assert_eq!(tok(Some("a"), "!", &mut st).unwrap().unwrap(), "a");
        assert_eq!(tok(None, "!", &mut st).unwrap(), None);
        assert_eq!(tok(None, "!", &mut st), Err(Fault::BadAddr(0)));
    }

    #[test]
    fn strtok_details() {
        let mut st = StrtokState::default();
        assert_eq!(tok(Some("a b\tc"), " \t", &mut st).unwrap().unwrap(), "a");
        // The delimiter set may change between calls.
        assert_eq!(tok(None, "\t", &mut st).unwrap().unwrap(), " b");
        assert_eq!(tok(None, "", &mut st).unwrap().unwrap(), "\tc");
        st.reset();
        assert_eq!(tok(None, "", &mut st), Err(Fault::BadAddr(0)));

        // A token longer than strsize - 1 is split.
        let mut out = Vec::new();
        let mut st = StrtokState::default();
        assert!(strtok(Some(b"abcdefg"), b",", &mut st, 4, &mut out).unwrap());
        assert_eq!(out, b"abc");
        assert!(strtok(None, b",", &mut st, 4, &mut out).unwrap());
        assert_eq!(out, b"d");
        assert!(!strtok(None, b",", &mut st, 4, &mut out).unwrap());

        // High bytes work as delimiters too.
        let mut st = StrtokState::default();
        assert!(strtok(Some(b"\xffab\xfe"), b"\xff\xfe", &mut st, 256, &mut out).unwrap());
        assert_eq!(out, b"ab");

        // strsize 0 never panics.
        let mut st = StrtokState::default();
        assert!(!strtok(Some(b"abc"), b",", &mut st, 0, &mut out).unwrap());
    }

    #[test]
    fn case_conversion() {
        // tst.tolower.d / tst.toupper.d
        let mut out = Vec::new();
        for (i, want) in [
            ("ahi", "ahi"),
            ("MaHi!", "mahi!"),
            ("   Nase-5", "   nase-5"),
            ("!@#$%", "!@#$%"),
        ] {
            tolower(i.as_bytes(), 256, &mut out);
            assert_eq!(out, want.as_bytes());
        }
        for (i, want) in [
            ("foo", "FOO"),
            ("fOo", "FOO"),
            ("   Nase-5", "   NASE-5"),
            ("!@#$%", "!@#$%"),
        ] {
            toupper(i.as_bytes(), 256, &mut out);
            assert_eq!(out, want.as_bytes());
        }
        toupper(b"a\xe9b", 256, &mut out);
        assert_eq!(out, b"A\xe9B");
        toupper(b"abcdef", 4, &mut out);
        assert_eq!(out, b"ABC");
        tolower(b"ABC", 0, &mut out);
        assert_eq!(out, b"");
    }
}
