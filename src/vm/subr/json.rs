//! `json(text, selector)`: one value picked out of a JSON document by a small state machine
//! that reads each byte once, as the kernel's does (same states, same errors, same
//! leniencies).

use super::num::strtoll_bytes;
use super::{at, cstr};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Before the top-level object or array.
    Rest,
    /// Expecting a key (or the end of an object: an error, as the key was not found).
    Object,
    String,
    StringEscape,
    StringEscapeUnicode,
    Colon,
    Comma,
    Value,
    Identifier,
    Number,
    NumberFrac,
    NumberExp,
    /// Copying a whole nested object or array (to return it, or to skip it).
    CollectObject,
}

/// The selector split into its keys: `foo[0].bar` is `foo`, `0`, `bar`. A `.` or `[`
/// separates keys, a `]` is dropped, and a leading `[` is ignored. Keys are walked in place,
/// so nothing is allocated.
struct Selector<'a> {
    sel: &'a [u8],
}

impl<'a> Selector<'a> {
    /// How many keys the selector holds (one more than its separators).
    fn count(&self) -> usize {
        1 + self
            .sel
            .iter()
            .enumerate()
            .filter(|&(k, &c)| c == b'.' || (c == b'[' && k != 0))
            .count()
    }

    /// The bytes of the key starting at offset `start` of the selector.
    fn key(&self, start: usize) -> impl Iterator<Item = u8> + Clone + 'a {
        let skip_bracket = start == 0 && self.sel.first() == Some(&b'[');
        let from = start.min(self.sel.len()) + usize::from(skip_bracket);
        self.sel[from.min(self.sel.len())..]
            .iter()
            .copied()
            .take_while(|&c| c != b'.' && c != b'[')
            .filter(|&c| c != b']')
    }

    /// The offset where the key after the one at `start` begins.
    fn next(&self, start: usize) -> usize {
        let skip_bracket = start == 0 && self.sel.first() == Some(&b'[');
        let from = start + usize::from(skip_bracket);
        match self
            .sel
            .get(from..)
            .and_then(|rest| rest.iter().position(|&c| c == b'.' || c == b'['))
        {
            Some(p) => from + p + 1,
            None => self.sel.len(),
        }
    }
}

/// The kernel's `strncmp(a, b, limit) == 0` for a buffer and a key.
fn same(a: &[u8], b: impl Iterator<Item = u8>, limit: usize) -> bool {
    let mut a = a.iter().copied().chain(std::iter::repeat(0));
    let mut b = b.chain(std::iter::repeat(0));
    for _ in 0..limit {
        let (x, y) = (a.next().unwrap_or(0), b.next().unwrap_or(0));
        if x != y {
            return false;
        }
        if x == 0 {
            break;
        }
    }
    true
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// `json(text, selector)`: the value that `selector` (`key`, `key.sub`, `array[3].key`, `[0]`,
/// `3`...) names in the JSON document `text`. Writes it to `out` and returns `true`; returns
/// `false` (a NULL result) when the key is missing, the document is malformed where it is
/// read, or a key would have to descend into a non-object. Strings are returned without
/// their quotes but with their escapes as written; numbers and `true`/`false`/`null` as
/// written; objects and arrays as their full text. Only the first `strsize` bytes of `text`
/// are read.
pub fn json(text: &[u8], selector: &[u8], strsize: usize, out: &mut Vec<u8>) -> bool {
    out.clear();
    let found = parse(cstr(text), cstr(selector), strsize, out);
    if !found {
        out.clear();
    }
    found
}

fn parse(text: &[u8], selector: &[u8], size: usize, out: &mut Vec<u8>) -> bool {
    let sel = Selector {
        sel: &selector[..selector.len().min(size)],
    };
    let mut nelems = sel.count();
    let mut elem = 0usize;

    let mut state = State::Rest;
    let mut array_elem: i64 = i64::MIN;
    let mut array_pos: i64 = 0;
    let mut escape_count = 0u8;
    let mut string_is_key = false;
    let mut collect_object = false;
    let mut found_key = false;
    let mut in_array = false;
    let mut braces: u32 = 0;
    let mut brackets: u32 = 0;

    let mut cur = 0usize;
    while cur < size {
        let cc = at(text, cur);
        if cc == 0 {
            return false;
        }
        // Most states consume the byte; a value that ends at this byte lets the comma state
        // look at it again.
        let mut reread = false;
        match state {
            State::Rest => {
                if is_space(cc) {
                } else if cc == b'{' {
                    state = State::Object;
                } else if cc == b'[' {
                    in_array = true;
                    array_pos = 0;
                    array_elem = strtoll_bytes(sel.key(elem), 10, size);
                    found_key = array_elem == 0;
                    state = State::Value;
                } else {
                    return false;
                }
            }
            State::Object => {
                if is_space(cc) {
                } else if cc == b'"' {
                    state = State::String;
                    string_is_key = true;
                } else {
                    return false;
                }
            }
            State::String => {
                if cc == b'\\' {
                    out.push(b'\\');
                    state = State::StringEscape;
                } else if cc == b'"' {
                    if collect_object {
                        // Part of an object being collected: keep going.
                        out.push(cc);
                        collect_object = false;
                        state = State::CollectObject;
                    } else {
                        if string_is_key {
                            if same(out, sel.key(elem), size) {
                                found_key = true;
                            }
                        } else if found_key {
                            // A string where an object was needed is an error.
                            return nelems == 1;
                        }
                        out.clear();
                        state = if string_is_key {
                            State::Colon
                        } else {
                            State::Comma
                        };
                        string_is_key = false;
                    }
                } else {
                    out.push(cc);
                }
            }
            State::StringEscape => {
                out.push(cc);
                if cc == b'u' {
                    escape_count = 0;
                    state = State::StringEscapeUnicode;
                } else {
                    state = State::String;
                }
            }
            State::StringEscapeUnicode => {
                if !cc.is_ascii_hexdigit() {
                    return false;
                }
                out.push(cc);
                escape_count += 1;
                if escape_count == 4 {
                    state = State::String;
                }
            }
            State::Colon => {
                if is_space(cc) {
                } else if cc == b':' {
                    state = State::Value;
                } else {
                    return false;
                }
            }
            State::Comma => {
                if is_space(cc) {
                } else if cc == b',' {
                    if in_array {
                        state = State::Value;
                        array_pos += 1;
                        if array_pos == array_elem {
                            found_key = true;
                        }
                    } else {
                        state = State::Object;
                    }
                } else {
                    return false;
                }
            }
            State::Identifier => {
                if cc.is_ascii_lowercase() {
                    out.push(cc);
                } else {
                    let known = matches!(out.as_slice(), b"true" | b"false" | b"null");
                    if !known {
                        return false;
                    }
                    if found_key {
                        return nelems == 1;
                    }
                    out.clear();
                    reread = true;
                    state = State::Comma;
                }
            }
            State::Number | State::NumberFrac | State::NumberExp => {
                let mut handled = false;
                if state == State::Number {
                    if cc == b'.' {
                        out.push(cc);
                        state = State::NumberFrac;
                        handled = true;
                    } else if cc == b'x' || cc == b'X' {
                        // No hexadecimal (or octal) in JSON.
                        return false;
                    }
                }
                if !handled && state != State::NumberExp {
                    if cc == b'e' || cc == b'E' {
                        out.push(cc);
                        state = State::NumberExp;
                        handled = true;
                    } else if cc == b'+' || cc == b'-' {
                        // A sign belongs only in an exponent.
                        return false;
                    }
                }
                if !handled {
                    if cc.is_ascii_digit() || cc == b'+' || cc == b'-' {
                        out.push(cc);
                    } else {
                        if found_key {
                            return nelems == 1;
                        }
                        out.clear();
                        reread = true;
                        state = State::Comma;
                    }
                }
            }
            State::Value => {
                if is_space(cc) {
                } else if cc == b'{' || cc == b'[' {
                    if nelems > 1 && found_key {
                        // Descend: the next key applies inside this object or array.
                        in_array = cc == b'[';
                        elem = sel.next(elem);
                        nelems -= 1;
                        out.clear();
                        if in_array {
                            state = State::Value;
                            array_pos = 0;
                            array_elem = strtoll_bytes(sel.key(elem), 10, size);
                            found_key = array_elem == 0;
                        } else {
                            found_key = false;
                            state = State::Object;
                        }
                    } else {
                        // Return the whole thing, or skip it.
                        if cc == b'[' {
                            brackets = 1;
                        } else {
                            braces = 1;
                        }
                        out.push(cc);
                        state = State::CollectObject;
                    }
                } else if cc == b'"' {
                    state = State::String;
                } else if cc.is_ascii_lowercase() {
                    out.push(cc);
                    state = State::Identifier;
                } else if cc == b'-' || cc.is_ascii_digit() {
                    out.push(cc);
                    state = State::Number;
                } else {
                    return false;
                }
            }
            State::CollectObject => {
                out.push(cc);
                if cc == b'"' {
                    collect_object = true;
                    state = State::String;
                } else {
                    match cc {
                        b']' => {
                            if brackets == 0 {
                                return false;
                            }
                            brackets -= 1;
                        }
                        b'}' => {
                            if braces == 0 {
                                return false;
                            }
                            braces -= 1;
                        }
                        b'{' => braces += 1,
                        b'[' => brackets += 1,
                        _ => {}
                    }
                    if brackets == 0 && braces == 0 {
                        if found_key {
                            return true;
                        }
                        out.clear();
                        state = State::Comma;
                    }
                }
            }
        }
        if !reread {
            cur += 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(text: &str, s: &str, strsize: usize) -> Option<String> {
        let mut out = b"junk".to_vec();
        json(text.as_bytes(), s.as_bytes(), strsize, &mut out)
            .then(|| String::from_utf8(out).unwrap())
    }

    fn check(text: &str, cases: &[(&str, Option<&str>)]) {
        for &(s, want) in cases {
            assert_eq!(sel(text, s, 1024).as_deref(), want, "json({text:?}, {s:?})");
        }
    }

    #[test]
    fn selector_split() {
        let s = Selector {
            sel: b"foo[0].bar.baz[32]",
        };
        assert_eq!(s.count(), 5);
        let mut keys = Vec::new();
        let mut at = 0;
        for _ in 0..s.count() {
            keys.push(s.key(at).collect::<Vec<u8>>());
            at = s.next(at);
        }
        assert_eq!(keys, [&b"foo"[..], b"0", b"bar", b"baz", b"32"]);
        let s = Selector { sel: b"[5]" };
        assert_eq!(s.count(), 1);
        assert_eq!(s.key(0).collect::<Vec<u8>>(), b"5");
        let s = Selector { sel: b"" };
        assert_eq!(s.count(), 1);
        assert_eq!(s.key(0).count(), 0);
        assert_eq!(s.key(s.next(0)).count(), 0);
    }

    /// json/tst.general.d with its .out file.
    #[test]
    fn general_suite() {
        check("[]", &[("0", None)]);
        check(
            "[1]",
            &[("0", Some("1")), ("1", None), ("100", None), ("-1", None)],
        );
        check("[0x1000]", &[("0", None)]);
        check("[1.5001]", &[("0", Some("1.5001"))]);
        check("[16.3e10]", &[("0", Some("16.3e10"))]);
        check("[ \t   5\t]", &[("0", Some("5"))]);
        check("[ \t    \t 16E10  \t ]", &[("0", Some("16E10"))]);
        check("[\"alpha\"]", &[("0", Some("alpha"))]);
        check(
            "[1,5,10,15,20]",
            &[
                ("[0]", Some("1")),
                ("[3]", Some("15")),
                ("[4]", Some("20")),
                ("[5]", None),
            ],
        );
        check(
            "[ { \"first\": true, \"second\": false }]",
            &[
                ("0.first", Some("true")),
                ("0.second", Some("false")),
                ("0.third", None),
            ],
        );
        check(
            "[0,1,1,2,3,5,8,13,21,34,55,89,144,233,377]",
            &[("10", Some("55")), ("14", Some("377")), ("19", None)],
        );

        let multi: &[(&str, Option<&str>)] = &[
            ("0", Some("string")),
            ("0.notobject", None),
            ("1", Some("32")),
            ("2", Some("true")),
            ("3", Some("{\"a\":9,\"b\":false}")),
            ("3.a", Some("9")),
            ("3.b", Some("false")),
            ("3.c", None),
            ("4", Some("100.3e10")),
            ("5", Some("false")),
            ("6", Some("200.5")),
            ("7", Some("{\"key\":\"val\"}")),
            ("7.key", Some("val")),
            ("7.key.notobject", None),
            ("7.nonexist", None),
            ("8", Some("null")),
            ("9", None),
        ];
        check(
            "[\"string\",32,true,{\"a\":9,\"b\":false},100.3e10,false,200.5,\
             {\"key\":\"val\"},null]",
            multi,
        );

        let spaced = "\n[\t\"string\" ,\t32 , true\t,\t {\"a\":  9,\t\"b\": false},\t\t\
                      100.3e10, false, 200.5,{\"key\" \t:\n \"val\"},\t\t null ]\t\t";
        let mut multi_ws = multi.to_vec();
        multi_ws[4].1 = Some("{\"a\":  9,\t\"b\": false}");
        multi_ws[11].1 = Some("{\"key\" \t:\n \"val\"}");
        check(spaced, &multi_ws);

        check(
            "[\"abcd \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u0000 \\uf00F \", \"final\"]",
            &[
                (
                    "0",
                    Some("abcd \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u0000 \\uf00F "),
                ),
                ("1", Some("final")),
            ],
        );
        check(
            "[\"fine here\", \"dodgey \\u00AZ\", \"wont get here\"]",
            &[("0", Some("fine here")), ("1", None), ("2", None)],
        );

        let nested = "{ \"top\": { \"mid\"  : { \"legs\": \"feet\" }, \"number\": 9, \
                      \"array\":[0,1,{\"a\":true,\"bb\":[1,2,false,{\"x\":\"yz\"}]}]}}";
        check(
            nested,
            &[
                (
                    "top",
                    Some(
                        "{ \"mid\"  : { \"legs\": \"feet\" }, \"number\": 9, \
                         \"array\":[0,1,{\"a\":true,\"bb\":[1,2,false,{\"x\":\"yz\"}]}]}",
                    ),
                ),
                ("fargo", None),
                ("top.mid", Some("{ \"legs\": \"feet\" }")),
                ("top.centre", None),
                ("top.mid.legs", Some("feet")),
                ("top.mid.number", None),
                ("top.mid.array", None),
                ("top.number", Some("9")),
                (
                    "top.array",
                    Some("[0,1,{\"a\":true,\"bb\":[1,2,false,{\"x\":\"yz\"}]}]"),
                ),
                ("top.array[0]", Some("0")),
                ("top.array[1]", Some("1")),
                (
                    "top.array[2]",
                    Some("{\"a\":true,\"bb\":[1,2,false,{\"x\":\"yz\"}]}"),
                ),
                ("top.array[2].a", Some("true")),
                ("top.array[2].b", None),
                ("top.array[2].bb", Some("[1,2,false,{\"x\":\"yz\"}]")),
                ("top.array[2].bb[0]", Some("1")),
                ("top.array[2].bb[1]", Some("2")),
                ("top.array[2].bb[2]", Some("false")),
                ("top.array[2].bb[3]", Some("{\"x\":\"yz\"}")),
                ("top.array[2].bb[3].x", Some("yz")),
                ("top.array[2].bb[3].x.nofurther", None),
                ("top.array[2].bb[4]", None),
                ("top.array[3]", None),
            ],
        );
    }

    /// json/tst.strsize.d (strsize=18): D holds at most 18 bytes of each string, and json()
    /// reads no further.
    #[test]
    fn strsize_suite() {
        // Held as `{"a":         1024` (no closing brace): NULL.
        assert_eq!(sel("{\"a\":         1024}", "a", 18), None);
        assert_eq!(sel("{\"a\":         1024", "a", 18), None);
        assert_eq!(sel("{\"a\": 1024}", "a", 18).as_deref(), Some("1024"));
        assert_eq!(sel("{\"a\":false,\"b\":true}", "b", 18), None);
        assert_eq!(sel("{\"a\":false,\"b\":tru", "b", 18), None);
        assert_eq!(
            sel("{\"a\":false,\"b\":20}", "b", 18).as_deref(),
            Some("20")
        );
    }

    #[test]
    fn more_cases() {
        assert_eq!(sel("{\"a\":1}", "a", 256).as_deref(), Some("1"));
        assert_eq!(sel("{\"a\":-1.5e+3}", "a", 256).as_deref(), Some("-1.5e+3"));
        assert_eq!(sel("{\"a\":1+2}", "a", 256), None);
        assert_eq!(sel("{\"a\":nope}", "a", 256), None);
        assert_eq!(sel("{}", "a", 256), None);
        assert_eq!(sel("5", "", 256), None);
        assert_eq!(sel("", "", 256), None);
        assert_eq!(sel("{\"a\":1}", "", 256), None);
        assert_eq!(sel("[7]", "", 256).as_deref(), Some("7"));
        assert_eq!(
            sel("{\"a\":[1,{\"b\":\"}\"}]}", "a", 256).as_deref(),
            Some("[1,{\"b\":\"}\"}]")
        );
        assert_eq!(sel("{\"a\":]}", "a", 256), None);
        assert_eq!(sel("{\"k\\\"q\":3}", "k\\\"q", 256).as_deref(), Some("3"));
    }

    #[test]
    fn never_panics() {
        let alphabet = b"{}[]\",:.\\u0a1e-+ tfx";
        let sels: [&[u8]; 6] = [b"", b"0", b"a", b"[1].a", b"a.b[0]", b".[]."];
        let mut seed = 0x0123_4567_89ab_cdefu64;
        let mut out = Vec::new();
        for n in 0..20000usize {
            let text: Vec<u8> = (0..n % 24)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    alphabet[(seed % alphabet.len() as u64) as usize]
                })
                .collect();
            let strsize = n % 30;
            for s in sels {
                if json(&text, s, strsize, &mut out) {
                    assert!(out.len() <= text.len());
                } else {
                    assert!(out.is_empty());
                }
            }
        }
    }
}
