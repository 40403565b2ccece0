//! The Windows port's wide-string subroutines: `wstrlen` and `wstringof`. A wide string is
//! UTF-16LE code units, ended by a 0 unit (or by the end of the bytes given; an odd final
//! byte is ignored).

/// The UTF-16 code units of `s` before its first 0 unit.
fn units(s: &[u8]) -> impl Iterator<Item = u16> + '_ {
    s.chunks_exact(2)
        .map(|p| u16::from_le_bytes([p[0], p[1]]))
        .take_while(|&u| u != 0)
}

/// `wstrlen(s)`: the number of UTF-16 code units in `s`, at most `strsize` (the port's
/// `wcsnlen_s(s, strsize)`; a surrogate pair counts as two).
pub fn wstrlen(s: &[u8], strsize: usize) -> usize {
    units(s).take(strsize).count()
}

/// `wstringof(s)`: the wide string `s` converted to UTF-8, at most `strsize - 1` bytes; the
/// result is cut before a character that would not fit entirely. An unpaired surrogate
/// becomes U+FFFD, as Windows' `WideCharToMultiByte` makes it. (A NULL pointer gives "":
/// the VM's business, as it reads the memory.)
pub fn wstringof(s: &[u8], strsize: usize, out: &mut Vec<u8>) {
    out.clear();
    let max = strsize.saturating_sub(1);
    let mut buf = [0u8; 4];
    for ch in char::decode_utf16(units(s)) {
        let ch = ch.unwrap_or(char::REPLACEMENT_CHARACTER);
        let enc = ch.encode_utf8(&mut buf).as_bytes();
        if out.len() + enc.len() > max {
            break;
        }
        out.extend_from_slice(enc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wide(s: &str) -> Vec<u8> {
        s.encode_utf16().flat_map(u16::to_le_bytes).collect()
    }

    fn conv(s: &[u8], strsize: usize) -> String {
        let mut out = b"junk".to_vec();
        wstringof(s, strsize, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn wstrlen_counts_units() {
        assert_eq!(wstrlen(&wide("notepad.exe"), 256), 11);
        assert_eq!(wstrlen(&wide("ab\0cd"), 256), 2);
        assert_eq!(wstrlen(&wide("héllo"), 256), 5);
        assert_eq!(wstrlen(&wide("a😀"), 256), 3);
        assert_eq!(wstrlen(&wide("abcdef"), 4), 4);
        assert_eq!(wstrlen(b"a\0b", 256), 1);
        assert_eq!(wstrlen(b"", 256), 0);
        assert_eq!(wstrlen(b"\0\0a\0", 256), 0);
    }

    #[test]
    fn wstringof_converts() {
        assert_eq!(
            conv(&wide(r"C:\Windows\notepad.exe"), 256),
            r"C:\Windows\notepad.exe"
        );
        assert_eq!(conv(&wide("héllo wörld"), 256), "héllo wörld");
        assert_eq!(conv(&wide("a😀b"), 256), "a😀b");
        assert_eq!(conv(&wide("ab\0cd"), 256), "ab");
        assert_eq!(conv(b"", 256), "");
        // Odd trailing byte ignored.
        assert_eq!(conv(b"a\0b", 256), "a");
    }

    #[test]
    fn wstringof_bounds() {
        assert_eq!(conv(&wide("abcdef"), 4), "abc");
        // "é" is two UTF-8 bytes and does not fit after "ab" in 3 bytes.
        assert_eq!(conv(&wide("abé"), 4), "ab");
        assert_eq!(conv(&wide("abé"), 5), "abé");
        assert_eq!(conv(&wide("abc"), 1), "");
        assert_eq!(conv(&wide("abc"), 0), "");
    }

    #[test]
    fn unpaired_surrogates() {
        let lone_high: Vec<u8> = [0xd83du16, 0x41]
            .iter()
            .flat_map(|u| u.to_le_bytes())
            .collect();
        assert_eq!(conv(&lone_high, 256), "\u{fffd}A");
        let lone_low: Vec<u8> = [0x41u16, 0xde00]
            .iter()
            .flat_map(|u| u.to_le_bytes())
            .collect();
        assert_eq!(conv(&lone_low, 256), "A\u{fffd}");
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut seed = 0xdead_beef_cafe_f00du64;
        let mut out = Vec::new();
        for n in 0..2000usize {
            let bytes: Vec<u8> = (0..n % 33)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed >> 24) as u8
                })
                .collect();
            let strsize = n % 19;
            wstringof(&bytes, strsize, &mut out);
            assert!(out.len() < strsize.max(1));
            assert!(std::str::from_utf8(&out).is_ok());
            assert!(wstrlen(&bytes, strsize) <= strsize);
        }
    }
}
