//! D's pure subroutines: the string, path, number, network-address, JSON and wide-string
//! functions whose result depends only on their arguments (and, for `strtok` and `rand`, on a
//! state the caller keeps).
//!
//! Conventions shared by every function here:
//!
//! * A D string argument is a byte slice. It ends at its first NUL byte if it has one (the
//!   functions look no further), otherwise at the end of the slice; the VM normally passes
//!   the bytes before the NUL, bounded by `strsize`.
//! * A string result is written into a caller-provided `out` buffer, which the callee clears
//!   first, so that a VM can reuse one buffer per call site and allocate nothing in steady
//!   state. Results hold no NUL and are bounded the way the kernel bounds them (usually to
//!   `strsize - 1` bytes).
//! * A subroutine the kernel makes return a NULL string reports it through its return value
//!   (`false` or `None`); one the kernel makes fault returns `Err(`[`Fault`]`)`.
//! * Nothing here panics, whatever the input (random bytes, huge or negative indexes,
//!   `i64::MIN`, a zero `strsize`).

mod json;
mod net;
mod num;
mod path;
mod strings;
mod wide;

pub use json::json;
pub use net::{inet_ntoa, inet_ntoa6, inet_ntop, AF_INET, AF_INET6, AF_INET6_ALIASES};
pub use num::{htonl, htonll, htons, lltostr, ntohl, ntohll, ntohs, rand, rand_at, strtoll};
pub use path::{basename, cleanpath, dirname};
pub use strings::{
    index, rindex, strchr, strjoin, strlen, strrchr, strstr, strtok, substr, tolower, toupper,
    StrtokState,
};
pub use wide::{wstringof, wstrlen};

/// Why a subroutine could not produce a result: the VM turns it into the matching
/// `DTRACEFLT_*` fault and reports it through the ERROR probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A read from an invalid address (`DTRACEFLT_BADADDR`), with the address when it is
    /// known here (0 otherwise, e.g. `strtok(NULL, ...)` with no saved string, or an address
    /// argument shorter than the object it must point to).
    BadAddr(u64),
    /// An illegal argument (`DTRACEFLT_ILLOP`): a base outside 2..=36, an unknown address
    /// family.
    IllegalOp,
    /// The result does not fit (`DTRACEFLT_NOSCRATCH`): `strjoin` of strings whose lengths
    /// add up to `strsize` or more.
    NoScratch,
}

/// The part of `s` before its first NUL byte (all of `s` if it has none).
fn cstr(s: &[u8]) -> &[u8] {
    match s.iter().position(|&c| c == 0) {
        Some(n) => &s[..n],
        None => s,
    }
}

/// `cstr(s)`, further bounded to `strsize` bytes (what `dtrace_strlen(s, strsize)` measures).
fn bounded(s: &[u8], strsize: usize) -> &[u8] {
    let s = cstr(s);
    &s[..s.len().min(strsize)]
}

/// The byte at `i`, or NUL past the end: reading a string the way the kernel's byte loads
/// do, with the terminator implied.
fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cstr_helpers() {
        assert_eq!(cstr(b"ab\0cd"), b"ab");
        assert_eq!(cstr(b"abc"), b"abc");
        assert_eq!(bounded(b"abcdef", 3), b"abc");
        assert_eq!(bounded(b"a\0bcdef", 3), b"a");
        assert_eq!(at(b"ab", 1), b'b');
        assert_eq!(at(b"ab", 2), 0);
        assert_eq!(at(b"ab", usize::MAX), 0);
    }

    /// Random bytes, lengths, indexes and sizes through every function: no panics, and
    /// results within their bounds.
    #[test]
    fn nothing_panics() {
        let mut seed = 0x5851_f42d_4c95_7f2du64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let ints = [
            i64::MIN,
            i64::MIN + 1,
            -300,
            -2,
            -1,
            0,
            1,
            2,
            37,
            300,
            i64::MAX,
        ];
        let mut out = Vec::new();
        let mut st = StrtokState::default();
        let mut rs = 0u64;
        for _ in 0..20000 {
            let n = (rnd() % 20) as usize;
            let a: Vec<u8> = (0..n).map(|_| (rnd() % 6) as u8 * 51).collect();
            let m = (rnd() % 4) as usize;
            let b: Vec<u8> = (0..m).map(|_| (rnd() % 6) as u8 * 51).collect();
            let i = ints[(rnd() % ints.len() as u64) as usize];
            let j = ints[(rnd() % ints.len() as u64) as usize];
            let strsize = (rnd() % 24) as usize;

            assert!(strlen(&a, strsize) <= strsize);
            if strjoin(&a, &b, strsize, &mut out).is_ok() {
                assert!(out.len() < strsize);
            }
            substr(&a, i, Some(j), strsize, &mut out);
            assert!(out.len() <= strsize);
            substr(&a, i, None, strsize, &mut out);
            assert!(out.len() <= strsize);
            let x = index(&a, &b, Some(i));
            assert!((-1..=n as i64).contains(&x));
            let x = rindex(&a, &b, Some(j));
            assert!((-1..=n as i64).contains(&x));
            assert!(strstr(&a, &b).is_none_or(|p| p <= n));
            assert!(strchr(&a, i, strsize).is_none_or(|p| p <= n));
            assert!(strrchr(&a, j, strsize).is_none_or(|p| p <= n));
            let first = if rnd() % 3 == 0 { None } else { Some(&a[..]) };
            if let Ok(true) = strtok(first, &b, &mut st, strsize, &mut out) {
                assert!(out.len() < strsize);
            }
            tolower(&a, strsize, &mut out);
            toupper(&a, strsize, &mut out);
            let _ = strtoll(&a, Some(i));
            let _ = strtoll(&a, Some(2 + (rnd() % 35) as i64));
            if lltostr(i, Some(j), &mut out).is_ok() {
                assert!(out.len() <= 66);
            }
            let _ = inet_ntop(i, &a, &mut out);
            let _ = inet_ntoa(&a, &mut out);
            let _ = inet_ntoa6(&a, &mut out);
            let _ = json(&a, &b, strsize, &mut out);
            wstringof(&a, strsize, &mut out);
            assert!(wstrlen(&a, strsize) <= strsize);
            basename(&a, strsize, &mut out);
            dirname(&a, strsize, &mut out);
            cleanpath(&a, strsize, &mut out);
            let _ = rand(&mut rs);
            let _ = rand_at(i);
        }
    }
}
