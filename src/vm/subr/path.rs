//! Path subroutines: `basename`, `dirname` and `cleanpath`.

use super::{at, bounded};

/// Whether `c` separates path components for `basename`/`dirname`: `/`, and — as the
/// Windows port means to, so that Windows paths such as `C:\Windows\notepad.exe` split —
/// also `\`.
fn is_sep(c: u8) -> bool {
    c == b'/' || c == b'\\'
}

/// Where the last component of `s` (which is not empty) lies: `(first_base, last_base,
/// last_dir)`, with the kernel's conventions: -1 for "none".
fn split(s: &[u8]) -> (isize, isize, isize) {
    let mut i = s.len() as isize - 1;
    // Trailing separators.
    while i >= 0 && is_sep(s[i as usize]) {
        i -= 1;
    }
    let last_base = i;
    // The component itself.
    while i >= 0 && !is_sep(s[i as usize]) {
        i -= 1;
    }
    let first_base = if i >= 0 { i + 1 } else { -1 };
    // The separators before it.
    while i >= 0 && is_sep(s[i as usize]) {
        i -= 1;
    }
    (first_base, last_base, i)
}

fn copy_range(src: &[u8], start: usize, end: usize, strsize: usize, out: &mut Vec<u8>) {
    let max = strsize.saturating_sub(1);
    let end = end.min(src.len().saturating_sub(1));
    if start <= end {
        let n = (end - start + 1).min(max);
        out.extend_from_slice(&src[start..start + n]);
    }
}

/// `basename(s)`: the last component of the path `s`, ignoring trailing separators. As in
/// the kernel, "" gives ".", a path made only of separators gives its first character (`/`),
/// and the result holds at most `strsize - 1` bytes.
pub fn basename(s: &[u8], strsize: usize, out: &mut Vec<u8>) {
    out.clear();
    let mut src = bounded(s, strsize);
    if src.is_empty() {
        src = b".";
    }
    let (first_base, last_base, _) = split(src);
    let (start, end) = if last_base < 0 {
        (0, 0)
    } else if first_base < 0 {
        (0, last_base as usize)
    } else {
        (first_base as usize, last_base as usize)
    };
    copy_range(src, start, end, strsize, out);
}

/// `dirname(s)`: the path `s` without its last component and the separators before it. As
/// in the kernel, "" and a lone component give ".", a path made only of separators (or one
/// component under the root) gives its first character (`/`), and the result holds at most
/// `strsize - 1` bytes.
pub fn dirname(s: &[u8], strsize: usize, out: &mut Vec<u8>) {
    out.clear();
    let mut src = bounded(s, strsize);
    if src.is_empty() {
        src = b".";
    }
    let (first_base, last_base, last_dir) = split(src);
    let end = if last_base < 0 {
        0
    } else if first_base < 0 {
        src = b".";
        0
    } else {
        last_dir.max(0) as usize
    };
    copy_range(src, 0, end, strsize, out);
}

/// Stores `c` at `j` in the kernel's destination buffer (`out`), growing it as needed.
fn put(out: &mut Vec<u8>, j: usize, c: u8) {
    if j < out.len() {
        out[j] = c;
    } else {
        out.resize(j, 0);
        out.push(c);
    }
}

/// `cleanpath(s)`: `s` with `//` collapsed, `/./` components removed and each `/../`
/// removing the component before it, exactly as the kernel's single pass does (it works on
/// the text only, so it does not check that the components exist). The kernel stops
/// writing once the result comes within 5 bytes of `strsize`.
pub fn cleanpath(s: &[u8], strsize: usize, out: &mut Vec<u8>) {
    out.clear();
    let src = bounded(s, strsize);
    let mut i = 0usize;
    let mut j = 0usize;
    let next = |i: &mut usize| {
        let c = at(src, *i);
        *i += 1;
        c
    };
    'outer: loop {
        let mut c = next(&mut i);
        // Each pass of this loop handles the character in `c`; `continue` is the kernel's
        // "goto next" (handle the character just read), `break` ends this character.
        loop {
            if j + 5 >= strsize {
                break 'outer;
            }
            if c != b'/' {
                put(out, j, c);
                j += 1;
                break;
            }
            c = next(&mut i);
            if c == b'/' {
                // "//": drop the first slash.
                continue;
            }
            if c != b'.' {
                put(out, j, b'/');
                put(out, j + 1, c);
                j += 2;
                break;
            }
            c = next(&mut i);
            if c == b'/' {
                // "/./": drop it.
                continue;
            }
            if c != b'.' {
                put(out, j, b'/');
                put(out, j + 1, b'.');
                put(out, j + 2, c);
                j += 3;
                break;
            }
            c = next(&mut i);
            if c != b'/' && c != 0 {
                // "/..x": an ordinary component.
                for (k, &b) in [b'/', b'.', b'.', c].iter().enumerate() {
                    put(out, j + k, b);
                }
                j += 4;
                break;
            }
            // "/../" or a final "/..": back up over the last component and let the slash
            // (or the end) be read again.
            i -= 1;
            while j != 0 {
                j -= 1;
                if out.get(j) == Some(&b'/') {
                    break;
                }
            }
            if c == 0 {
                j += 1;
                put(out, j, b'/');
            }
            break;
        }
        if c == 0 {
            break;
        }
    }
    out.truncate(j);
    if let Some(n) = out.iter().position(|&b| b == 0) {
        out.truncate(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(f: fn(&[u8], usize, &mut Vec<u8>), s: &str, strsize: usize) -> String {
        let mut out = b"junk".to_vec();
        f(s.as_bytes(), strsize, &mut out);
        String::from_utf8(out).unwrap()
    }

    /// tst.basename.d: (path, basename, dirname) as its .out file records them.
    #[test]
    fn basename_dirname_suite() {
        let cases = [
            ("/foo/bar/baz", "baz", "/foo/bar"),
            ("/foo/bar///baz/", "baz", "/foo/bar"),
            ("/foo/bar/baz/", "baz", "/foo/bar"),
            ("/foo/bar/baz//", "baz", "/foo/bar"),
            ("/foo/bar/baz/.", ".", "/foo/bar/baz"),
            ("/foo/bar/baz/./", ".", "/foo/bar/baz"),
            ("/foo/bar/baz/.//", ".", "/foo/bar/baz"),
            ("foo/bar/baz/", "baz", "foo/bar"),
            ("/", "/", "/"),
            ("./", ".", "."),
            ("//", "/", "/"),
            ("/.", ".", "/"),
            ("/./", ".", "/"),
            ("/./.", ".", "/."),
            ("/.//", ".", "/"),
            (".", ".", "."),
            ("f", "f", "."),
            ("f/", "f", "."),
            ("/////", "/", "/"),
            ("", ".", "."),
        ];
        for (p, b, d) in cases {
            assert_eq!(run(basename, p, 256), b, "basename({p:?})");
            assert_eq!(run(dirname, p, 256), d, "dirname({p:?})");
        }
    }

    #[test]
    fn backslash_paths() {
        let p = r"C:\Windows\System32\notepad.exe";
        assert_eq!(run(basename, p, 256), "notepad.exe");
        assert_eq!(run(dirname, p, 256), r"C:\Windows\System32");
        assert_eq!(run(basename, r"\Device\HarddiskVolume3\x\", 256), "x");
        assert_eq!(
            run(dirname, r"\Device\HarddiskVolume3\x\", 256),
            r"\Device\HarddiskVolume3"
        );
        assert_eq!(run(dirname, r"\x", 256), r"\");
        assert_eq!(run(basename, r"\\", 256), r"\");
    }

    #[test]
    fn basename_bounds() {
        assert_eq!(run(basename, "/a/bcdef", 5), "bc");
        assert_eq!(run(dirname, "/abcdef/g", 5), "/");
        assert_eq!(run(dirname, "/ab/cdef", 5), "/ab");
        assert_eq!(run(dirname, "/abcdef/g", 256), "/abcdef");
        assert_eq!(run(dirname, "/abcdef/g", 8), "/");
        assert_eq!(run(dirname, "/abcdef/g", 7), "/");
        assert_eq!(run(basename, "/abc", 1), "");
        assert_eq!(run(basename, "/abc", 0), "");
        assert_eq!(run(dirname, "/abc", 0), "");
        assert_eq!(run(basename, "ab\0/cd", 256), "ab");
    }

    /// tst.cleanpath.d, with the results its .out file records.
    #[test]
    fn cleanpath_suite() {
        let cases = [
            ("/foo/bar/baz", "/foo/bar/baz"),
            ("/foo/bar///baz/", "/foo/bar/baz/"),
            ("/foo/bar/baz/", "/foo/bar/baz/"),
            ("/foo/bar/baz//", "/foo/bar/baz/"),
            ("/foo/bar/baz/.", "/foo/bar/baz/."),
            ("/foo/bar/baz/./", "/foo/bar/baz/"),
            ("/foo/bar/../../baz/.//", "/baz/"),
            ("foo/bar/./././././baz/", "foo/bar/baz/"),
            ("/foo/bar/baz/../../../../../../", "/"),
            ("/../../../../../../", "/"),
            ("/./", "/"),
            (
                "/foo/bar/baz/../../bop/bang/../../bar/baz/",
                "/foo/bar/baz/",
            ),
            ("./", "./"),
            ("//", "/"),
            ("/.", "/."),
            ("/./", "/"),
            ("/./.", "/."),
            ("/.//", "/"),
            (".", "."),
            ("/////", "/"),
            ("", ""),
        ];
        for (p, want) in cases {
            assert_eq!(run(cleanpath, p, 256), want, "cleanpath({p:?})");
        }
    }

    #[test]
    fn cleanpath_details() {
        assert_eq!(run(cleanpath, "/foo/..", 256), "/");
        assert_eq!(run(cleanpath, "/foo/bar/..", 256), "/foo/");
        assert_eq!(run(cleanpath, "/foo/..bar", 256), "/foo/..bar");
        assert_eq!(run(cleanpath, "/foo/.bar", 256), "/foo/.bar");
        // The kernel stops when within 5 bytes of strsize.
        assert_eq!(run(cleanpath, "/abcdefghij", 8), "/ab");
        assert_eq!(run(cleanpath, "/abc", 5), "");
        assert_eq!(run(cleanpath, "/abc", 0), "");
    }

    #[test]
    fn paths_never_panic() {
        let mut out = Vec::new();
        let mut seed = 0x1234_5678_9abc_def0u64;
        let alphabet = b"/.\\a\0";
        for _ in 0..20000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let n = (seed % 12) as usize;
            let s: Vec<u8> = (0..n)
                .map(|k| alphabet[((seed >> (k * 5)) % 5) as usize])
                .collect();
            let strsize = (seed >> 60) as usize;
            for f in [basename, dirname, cleanpath] {
                f(&s, strsize, &mut out);
                assert!(out.len() < strsize.max(1));
                f(&s, 256, &mut out);
                assert!(!out.contains(&0));
            }
        }
    }
}
