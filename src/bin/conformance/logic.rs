//! Pure logic of the conformance runner: test-name classification, tag
//! extraction, output normalisation and comparison, list-file parsing,
//! a small line diff and JSON string escaping.  Nothing here touches the
//! file system or spawns processes, so all of it is unit-tested below.

/// What kind of test a file name denotes (following dtest.pl's naming rules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// `tst.*.d`: must exit 0 (and match `<file>.out` if present).
    Tst,
    /// `err.*.d`: must exit 1; with a tag, stderr's first line must carry it.
    Err(Option<String>),
    /// `drp.TAG.*.d`: must exit 0 and some stderr line must carry `[TAG] `.
    Drp(String),
    /// `{tst,err,drp}.*.ksh`: shell-script tests, which this runner skips.
    Ksh,
    /// Anything else (dtest.pl reports "not a valid test file name").
    Invalid,
}

/// True when `name` matches dtest.pl's discovery pattern
/// `^(tst|err|drp)\..+\.(d|ksh)$`.
pub fn is_test_name(name: &str) -> bool {
    let rest = match ["tst.", "err.", "drp."]
        .iter()
        .find_map(|p| name.strip_prefix(p))
    {
        Some(r) => r,
        None => return false,
    };
    [".d", ".ksh"]
        .iter()
        .any(|ext| rest.len() > ext.len() && rest.ends_with(ext))
}

fn is_tag_char(c: u8) -> bool {
    c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_'
}

/// Leading run of `[A-Z0-9_]` in `s`, if non-empty and followed by a dot.
fn tag_run(s: &str) -> Option<&str> {
    let n = s.bytes().take_while(|&c| is_tag_char(c)).count();
    if n > 0 && s.as_bytes().get(n) == Some(&b'.') {
        Some(&s[..n])
    } else {
        None
    }
}

/// The error tag carried by an `err.D_TAG.name.d` file name (dtest.pl:
/// `^err\.(D_[A-Z0-9_]+)\.`), e.g. `D_SYNTAX`.  `err.BadAlign.d` has none.
pub fn err_tag(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("err.")?;
    let tag = tag_run(rest)?;
    if tag.len() > 2 && tag.starts_with("D_") {
        Some(tag)
    } else {
        None
    }
}

/// The drop tag carried by a `drp.TAG.name.d` file name (dtest.pl:
/// `^drp\.([A-Z0-9_]+)\.`), e.g. `DTRACEDROP_STKSTROVERFLOW`.
pub fn drp_tag(name: &str) -> Option<&str> {
    tag_run(name.strip_prefix("drp.")?)
}

/// Classify a test file by its base name.
pub fn classify(name: &str) -> Kind {
    if !is_test_name(name) {
        return Kind::Invalid;
    }
    if name.ends_with(".ksh") {
        return Kind::Ksh;
    }
    if name.starts_with("tst.") {
        Kind::Tst
    } else if name.starts_with("err.") {
        Kind::Err(err_tag(name).map(str::to_string))
    } else {
        match drp_tag(name) {
            Some(t) => Kind::Drp(t.to_string()),
            None => Kind::Invalid,
        }
    }
}

/// Replace every CRLF pair by a single LF.  Lone CRs are kept.
pub fn normalise_crlf(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i < data.len() {
        if data[i] == b'\r' && data.get(i + 1) == Some(&b'\n') {
            i += 1;
            continue;
        }
        out.push(data[i]);
        i += 1;
    }
    out
}

/// First line of `data` without its line terminator (LF or CRLF).
pub fn first_line(data: &[u8]) -> &[u8] {
    let line = match data.iter().position(|&c| c == b'\n') {
        Some(p) => &data[..p],
        None => data,
    };
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn find_from(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() {
        return Some(from.min(hay.len()));
    }
    if from >= hay.len() || hay.len() - from < needle.len() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// True when `needle` occurs anywhere in `hay`.
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    find_from(hay, needle, 0).is_some()
}

/// True when `line` matches dtest.pl's `/: \[TAG\] line \d+:/`.
pub fn errtag_matches(line: &[u8], tag: &str) -> bool {
    let needle = format!(": [{tag}] line ");
    let needle = needle.as_bytes();
    let mut from = 0;
    while let Some(p) = find_from(line, needle, from) {
        let after = &line[p + needle.len()..];
        let digits = after.iter().take_while(|c| c.is_ascii_digit()).count();
        if digits > 0 && after.get(digits) == Some(&b':') {
            return true;
        }
        from = p + 1;
    }
    false
}

/// True when some line of `stderr` contains `[TAG] ` (dtest.pl's drop check).
pub fn droptag_found(stderr: &[u8], tag: &str) -> bool {
    // The pattern holds no newline, so searching the whole buffer is the same
    // as searching line by line.
    contains(stderr, format!("[{tag}] ").as_bytes())
}

/// Parse a `--list` file: one path (relative to the suite directory) per
/// line; blank lines and lines whose first non-blank character is `#` are
/// ignored.  Backslashes become slashes and a leading `./` is dropped.
/// Duplicates are removed, first occurrence kept.
pub fn parse_list(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut p = line.replace('\\', "/");
        while let Some(rest) = p.strip_prefix("./") {
            p = rest.to_string();
        }
        if !p.is_empty() && !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// Category of a test: the directory under `common/` (e.g. `aggs`);
/// for other top-level folders `<top>/<dir>` (e.g. `i386/pid`).
pub fn category(rel: &str) -> String {
    let parts: Vec<&str> = rel.split('/').collect();
    match parts.len() {
        0 | 1 => ".".to_string(),
        2 => parts[0].to_string(),
        _ if parts[0] == "common" => parts[1].to_string(),
        _ => format!("{}/{}", parts[0], parts[1]),
    }
}

/// Render bytes for a one-line message: quoted, at most `max_chars`
/// characters, with control characters escaped and bytes that are not
/// UTF-8 shown as `\xNN`.
pub fn show(data: &[u8], max_chars: usize) -> String {
    let mut out = String::from("\"");
    let mut count = 0;
    for chunk in data.utf8_chunks() {
        for c in chunk.valid().chars() {
            if count >= max_chars {
                out.push_str("…\"");
                return out;
            }
            out.extend(c.escape_debug());
            count += 1;
        }
        for b in chunk.invalid() {
            if count >= max_chars {
                out.push_str("…\"");
                return out;
            }
            out.push_str(&format!("\\x{b:02x}"));
            count += 1;
        }
    }
    out.push('"');
    out
}

/// Split into lines, each keeping its terminating `\n` (the last may lack one).
fn split_lines(data: &[u8]) -> Vec<&[u8]> {
    data.split_inclusive(|&c| c == b'\n').collect()
}

/// Describe the first difference between expected and actual output as
/// `line N: expected "..", got ".."`, or `None` when they are equal.
pub fn first_difference(expected: &[u8], actual: &[u8]) -> Option<String> {
    if expected == actual {
        return None;
    }
    let a = split_lines(expected);
    let b = split_lines(actual);
    let mut i = 0;
    while i < a.len() && i < b.len() && a[i] == b[i] {
        i += 1;
    }
    let strip = |l: &[u8]| -> Vec<u8> { l.strip_suffix(b"\n").unwrap_or(l).to_vec() };
    let n = i + 1;
    Some(match (a.get(i), b.get(i)) {
        (Some(x), Some(y)) if strip(x) == strip(y) => {
            if x.ends_with(b"\n") {
                format!("line {n}: missing newline at end of output")
            } else {
                format!("line {n}: unexpected newline at end of output")
            }
        }
        (Some(x), Some(y)) => format!(
            "line {n}: expected {}, got {}",
            show(&strip(x), 120),
            show(&strip(y), 120)
        ),
        (Some(x), None) => format!(
            "line {n}: expected {}, got end of output",
            show(&strip(x), 120)
        ),
        (None, Some(y)) => format!(
            "line {n}: expected end of output, got {}",
            show(&strip(y), 120)
        ),
        (None, None) => format!("line {n}: outputs differ"),
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Same,
    Del,
    Add,
}

/// A line diff (`-` expected only, `+` actual only) in hunks with three
/// lines of context.  Falls back to a plain replace of the differing middle
/// when the LCS table would exceed `max_cells` entries.
pub fn line_diff(expected: &[u8], actual: &[u8], max_cells: usize) -> String {
    let a = split_lines(expected);
    let b = split_lines(actual);
    let mut pre = 0;
    while pre < a.len() && pre < b.len() && a[pre] == b[pre] {
        pre += 1;
    }
    let mut suf = 0;
    while suf < a.len() - pre && suf < b.len() - pre && a[a.len() - 1 - suf] == b[b.len() - 1 - suf]
    {
        suf += 1;
    }
    let am = &a[pre..a.len() - suf];
    let bm = &b[pre..b.len() - suf];
    // (op, index into a, index into b)
    let mut ops: Vec<(Op, usize, usize)> = (0..pre).map(|i| (Op::Same, i, i)).collect();
    let (n, m) = (am.len(), bm.len());
    let cells = (n + 1).saturating_mul(m + 1);
    if cells <= max_cells {
        let w = m + 1;
        let mut t = vec![0u32; cells];
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                t[i * w + j] = if am[i] == bm[j] {
                    t[(i + 1) * w + j + 1] + 1
                } else {
                    t[(i + 1) * w + j].max(t[i * w + j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < n || j < m {
            if i < n && j < m && am[i] == bm[j] {
                ops.push((Op::Same, pre + i, pre + j));
                i += 1;
                j += 1;
            } else if i < n && (j == m || t[(i + 1) * w + j] >= t[i * w + j + 1]) {
                ops.push((Op::Del, pre + i, pre + j));
                i += 1;
            } else {
                ops.push((Op::Add, pre + i, pre + j));
                j += 1;
            }
        }
    } else {
        ops.extend((0..n).map(|i| (Op::Del, pre + i, pre)));
        ops.extend((0..m).map(|j| (Op::Add, pre + n, pre + j)));
    }
    ops.extend((0..suf).map(|k| (Op::Same, a.len() - suf + k, b.len() - suf + k)));

    let render = |l: &[u8]| -> String {
        let body = l.strip_suffix(b"\n");
        let mut s = String::from_utf8_lossy(body.unwrap_or(l)).into_owned();
        if body.is_none() {
            s.push_str("  [no newline at end]");
        }
        s
    };
    const CTX: usize = 3;
    let changed: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.0 != Op::Same)
        .map(|(k, _)| k)
        .collect();
    let mut out = String::new();
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(CTX);
        let mut end = changed[k];
        while k < changed.len() && changed[k] <= end + 2 * CTX + 1 {
            end = changed[k];
            k += 1;
        }
        let end = (end + CTX + 1).min(ops.len());
        let (_, ai, bi) = ops[start];
        out.push_str(&format!(
            "@@ expected line {}, actual line {} @@\n",
            ai + 1,
            bi + 1
        ));
        for &(op, ai, bi) in &ops[start..end] {
            let (mark, line) = match op {
                Op::Same => (' ', a[ai]),
                Op::Del => ('-', a[ai]),
                Op::Add => ('+', b[bi]),
            };
            out.push(mark);
            out.push_str(&render(line));
            out.push('\n');
        }
    }
    out
}

/// Escape a string for inclusion between double quotes in JSON.
pub fn json_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    dtx::output::json::escape_json(s, &mut out);
    out
}

/// Quote a command-line word for display in a POSIX shell.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_test_names() {
        assert!(is_test_name("tst.foo.d"));
        assert!(is_test_name("err.D_SYNTAX.x.d"));
        assert!(is_test_name("drp.DTRACEDROP_SPEC.d"));
        assert!(is_test_name("tst.foo.ksh"));
        assert!(!is_test_name("tst.d"));
        assert!(!is_test_name("tst..d"));
        assert!(is_test_name("tst...d"));
        assert!(!is_test_name("tst.foo.d.out"));
        assert!(!is_test_name("foo.d"));
        assert!(!is_test_name("tst.foo.c"));
        assert!(!is_test_name("test.d"));
    }

    #[test]
    fn extracts_err_tags() {
        assert_eq!(err_tag("err.D_AGG_FUNC.bad.d"), Some("D_AGG_FUNC"));
        assert_eq!(
            err_tag("err.D_LQUANT_MATCHBASE.d"),
            Some("D_LQUANT_MATCHBASE")
        );
        assert_eq!(err_tag("err.D_PDESC_ZERO.badlib.d"), Some("D_PDESC_ZERO"));
        assert_eq!(err_tag("err.BadAlign.d"), None);
        assert_eq!(err_tag("err.D_.x.d"), None);
        assert_eq!(err_tag("err.D_Foo.d"), None);
        assert_eq!(err_tag("err.D_X2"), None);
        assert_eq!(err_tag("tst.D_SYNTAX.x.d"), None);
    }

    #[test]
    fn extracts_drop_tags() {
        assert_eq!(
            drp_tag("drp.DTRACEDROP_STKSTROVERFLOW.d"),
            Some("DTRACEDROP_STKSTROVERFLOW")
        );
        assert_eq!(
            drp_tag("drp.DTRACEDROP_PRINCIPAL.end.d"),
            Some("DTRACEDROP_PRINCIPAL")
        );
        assert_eq!(drp_tag("drp.lower.d"), None);
        assert_eq!(drp_tag("err.DTRACEDROP_SPEC.d"), None);
    }

    #[test]
    fn classifies() {
        assert_eq!(classify("tst.basics.d"), Kind::Tst);
        assert_eq!(classify("tst.basics.ksh"), Kind::Ksh);
        assert_eq!(classify("err.D_SYNTAX.x.ksh"), Kind::Ksh);
        assert_eq!(
            classify("err.D_SYNTAX.x.d"),
            Kind::Err(Some("D_SYNTAX".into()))
        );
        assert_eq!(classify("err.BadAlign.d"), Kind::Err(None));
        assert_eq!(
            classify("drp.DTRACEDROP_SPEC.d"),
            Kind::Drp("DTRACEDROP_SPEC".into())
        );
        assert_eq!(classify("drp.nothing.d"), Kind::Invalid);
        assert_eq!(classify("tst.foo.d.out"), Kind::Invalid);
        assert_eq!(classify("foo.c"), Kind::Invalid);
    }

    #[test]
    fn normalises_crlf() {
        assert_eq!(normalise_crlf(b"a\r\nb\r\n"), b"a\nb\n");
        assert_eq!(normalise_crlf(b"a\rb\n\r"), b"a\rb\n\r");
        assert_eq!(normalise_crlf(b"\r\r\n"), b"\r\n");
        assert_eq!(normalise_crlf(b""), b"");
        assert_eq!(normalise_crlf(b"\xff\r\n\xfe"), b"\xff\n\xfe");
    }

    #[test]
    fn takes_first_line() {
        assert_eq!(first_line(b"one\ntwo\n"), b"one");
        assert_eq!(first_line(b"one\r\ntwo"), b"one");
        assert_eq!(first_line(b"only"), b"only");
        assert_eq!(first_line(b""), b"");
        assert_eq!(first_line(b"\nsecond"), b"");
    }

    #[test]
    fn matches_err_tags() {
        let l = b"dtx: failed to compile script x.d: [D_SYNTAX] line 3: syntax error";
        assert!(errtag_matches(l, "D_SYNTAX"));
        assert!(!errtag_matches(l, "D_SYNTAX_X"));
        assert!(!errtag_matches(l, "D_SYN"));
        assert!(!errtag_matches(b"x: [D_SYNTAX] line :", "D_SYNTAX"));
        assert!(!errtag_matches(b"x [D_SYNTAX] line 3:", "D_SYNTAX"));
        assert!(!errtag_matches(b"x: [D_SYNTAX] line 3 oops", "D_SYNTAX"));
        assert!(errtag_matches(
            b"a: [D_X] line q: b: [D_X] line 12: msg",
            "D_X"
        ));
        assert!(errtag_matches(b"\xff: [D_X] line 1:\xfe", "D_X"));
    }

    #[test]
    fn finds_drop_tags() {
        let e = b"dtx: 3 drops\ndtx: [DTRACEDROP_SPEC] 2 speculative drops\n";
        assert!(droptag_found(e, "DTRACEDROP_SPEC"));
        assert!(!droptag_found(e, "DTRACEDROP_SPECUNAVAIL"));
        assert!(!droptag_found(b"[DTRACEDROP_SPEC]x", "DTRACEDROP_SPEC"));
        assert!(!droptag_found(b"", "DTRACEDROP_SPEC"));
    }

    #[test]
    fn parses_lists() {
        let text = "# comment\n\ncommon/aggs/tst.a.d\r\n  ./common/b/err.x.d  \n   # indented comment\ncommon\\c\\tst.y.d\ncommon/aggs/tst.a.d\n";
        assert_eq!(
            parse_list(text),
            vec![
                "common/aggs/tst.a.d".to_string(),
                "common/b/err.x.d".to_string(),
                "common/c/tst.y.d".to_string()
            ]
        );
        assert!(parse_list("").is_empty());
        assert!(parse_list("#\n \n\t\n").is_empty());
    }

    #[test]
    fn categories() {
        assert_eq!(category("common/aggs/tst.a.d"), "aggs");
        assert_eq!(category("i386/pid/tst.ret.d"), "i386/pid");
        assert_eq!(category("misc/tst.a.d"), "misc");
        assert_eq!(category("tst.a.d"), ".");
    }

    #[test]
    fn describes_first_difference() {
        assert_eq!(first_difference(b"a\nb\n", b"a\nb\n"), None);
        assert_eq!(
            first_difference(b"a\nb\nc\n", b"a\nX\nc\n").unwrap(),
            "line 2: expected \"b\", got \"X\""
        );
        assert_eq!(
            first_difference(b"a\nb\n", b"a\n").unwrap(),
            "line 2: expected \"b\", got end of output"
        );
        assert_eq!(
            first_difference(b"a\n", b"a\nmore\n").unwrap(),
            "line 2: expected end of output, got \"more\""
        );
        assert_eq!(
            first_difference(b"a\n", b"a").unwrap(),
            "line 1: missing newline at end of output"
        );
        assert_eq!(
            first_difference(b"\xff\n", b"\xfe\n").unwrap(),
            "line 1: expected \"\\xff\", got \"\\xfe\""
        );
    }

    #[test]
    fn diffs_lines() {
        let d = line_diff(
            b"1\n2\n3\n4\n5\n6\n7\n8\n9\n",
            b"1\n2\n3\n4\nX\n6\n7\n8\n9\n",
            1 << 20,
        );
        assert_eq!(
            d,
            "@@ expected line 2, actual line 2 @@\n 2\n 3\n 4\n-5\n+X\n 6\n 7\n 8\n"
        );
        let d = line_diff(b"a\n", b"a\nb", 1 << 20);
        assert_eq!(
            d,
            "@@ expected line 1, actual line 1 @@\n a\n+b  [no newline at end]\n"
        );
        // Fallback without the LCS table still shows both sides.
        let d = line_diff(b"a\nb\n", b"c\nd\n", 1);
        assert_eq!(d, "@@ expected line 1, actual line 1 @@\n-a\n-b\n+c\n+d\n");
        assert_eq!(line_diff(b"same\n", b"same\n", 100), "");
    }

    #[test]
    fn shows_bytes() {
        assert_eq!(show(b"a\tb", 10), "\"a\\tb\"");
        assert_eq!(show(b"abcdef", 3), "\"abc…\"");
        assert_eq!(show(b"\xffok\xc3", 10), "\"\\xffok\\xc3\"");
        assert_eq!(show("é\"".as_bytes(), 10), "\"é\\\"\"");
    }

    #[test]
    fn escapes_json() {
        assert_eq!(json_escape("a\"b\\c\nd\u{1}é"), "a\\\"b\\\\c\\nd\\u0001é");
    }

    #[test]
    fn quotes_shell_words() {
        assert_eq!(shell_quote("-xerrtags"), "-xerrtags");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
