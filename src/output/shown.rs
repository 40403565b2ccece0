//! Text from a stranger (a trace's image and PDB names, its event strings, a symbol server's
//! answers) made safe for a terminal: control characters are written out as `\xNN` or
//! `\u{NNNN}`, so that no such text can move the cursor, set the window's title, clear the
//! screen or hide what follows (ECMA-48's C0 and C1 controls, and DEL).
//!
//! Two rules, one per kind of output:
//! - names (module and function names in frames, `--symbols` rows, messages): always escaped;
//!   no real name has a control character, so dtrace's output is unchanged for every real input;
//! - a `printf` `%s` of a string value: escaped only when the text goes to a terminal
//!   ([`set_terminal_strings`]); into a pipe or a file it is dtrace's, byte for byte. The
//!   program's own format text (a script's `"\033[2J"`) is never touched: only the values.
//!   `trace()` and `printa()` keys need nothing: as dtrace, they print a string with a
//!   non-printing byte as a hex dump.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};

static TERMINAL_STRINGS: AtomicBool = AtomicBool::new(false);

/// Says whether `printf`'s string values go to a terminal (set once by the command line when
/// its text output is a terminal).
pub fn set_terminal_strings(on: bool) {
    TERMINAL_STRINGS.store(on, Ordering::Relaxed);
}

/// Whether string values are escaped for a terminal ([`set_terminal_strings`]).
pub fn terminal_strings() -> bool {
    TERMINAL_STRINGS.load(Ordering::Relaxed)
}

/// A `printf` string value's bytes as they are to be written: [`terminal_bytes`] when the text
/// goes to a terminal ([`set_terminal_strings`]), else as they are.
pub fn string_value(b: &[u8]) -> Cow<'_, [u8]> {
    if terminal_strings() {
        terminal_bytes(b)
    } else {
        Cow::Borrowed(b)
    }
}

/// [`string_value`] of a wide string, converted to UTF-8 already. The escapes are ASCII and
/// replace whole characters, so the text stays UTF-8.
pub fn string_value_text(s: &str) -> Cow<'_, str> {
    match string_value(s.as_bytes()) {
        Cow::Borrowed(_) => Cow::Borrowed(s),
        Cow::Owned(b) => Cow::Owned(
            String::from_utf8(b)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        ),
    }
}

/// `text` with every control character (C0, DEL, C1) written as `\xNN` or `\u{NNNN}`.
pub fn shown(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if (c as u32) < 0x100 && c.is_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A string value's bytes for a terminal: the C0 controls but tab and newline, DEL, and the C1
/// controls in their UTF-8 form (`C2 80`..`C2 9F`, which a UTF-8 terminal obeys) as `\xNN`;
/// every other byte, valid UTF-8 or not, as it is.
pub fn terminal_bytes(b: &[u8]) -> Cow<'_, [u8]> {
    let bad = |i: usize| -> usize {
        match b[i] {
            b'\t' | b'\n' => 0,
            0..=0x1f | 0x7f => 1,
            0xc2 if matches!(b.get(i + 1), Some(0x80..=0x9f)) => 2,
            _ => 0,
        }
    };
    if !(0..b.len()).any(|i| bad(i) > 0) {
        return Cow::Borrowed(b);
    }
    let mut out = Vec::with_capacity(b.len() + 8);
    let mut i = 0;
    while i < b.len() {
        match bad(i) {
            0 => {
                out.push(b[i]);
                i += 1;
            }
            n => {
                let c = if n == 2 { b[i + 1] } else { b[i] };
                out.extend_from_slice(format!("\\x{c:02x}").as_bytes());
                i += n;
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::{shown, terminal_bytes};

    #[test]
    fn names_lose_their_controls() {
        assert_eq!(shown("ntoskrnl.exe"), "ntoskrnl.exe");
        assert_eq!(shown("a\u{1b}]0;pwned\u{7}b"), "a\\x1b]0;pwned\\x07b");
        assert_eq!(shown("x\u{9b}2J"), "x\\x9b2J");
        assert_eq!(shown("line\nbreak"), "line\\x0abreak");
    }

    #[test]
    fn string_values_keep_text_and_lose_sequences() {
        assert_eq!(&*terminal_bytes(b"plain \t text\n"), b"plain \t text\n");
        assert_eq!(&*terminal_bytes(b"\x1b[2Jgone\r"), b"\\x1b[2Jgone\\x0d");
        // CSI in its UTF-8 form, and DEL; other UTF-8 and bytes that are not UTF-8 stay
        assert_eq!(&*terminal_bytes("a\u{9b}1m".as_bytes()), b"a\\x9b1m");
        assert_eq!(&*terminal_bytes("é\x7f".as_bytes()), "é\\x7f".as_bytes());
        assert_eq!(&*terminal_bytes(b"\xff\xc2"), b"\xff\xc2");
    }
}
