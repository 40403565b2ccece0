//! A small tree of structured values and its two renderings: JSON (compact or indented) and
//! XML in libxo's shape (an object's members become child elements, a list becomes one element
//! per item named after the list). dtx writes its structured output (`-x oformat=json|xml`)
//! and its saved aggregations through it.

use std::fmt::Write as _;

/// One structured value.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Array(Vec<Json>),
    /// Members in the order they are written.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// An object from `(name, value)` pairs.
    pub fn object<K: Into<String>>(members: impl IntoIterator<Item = (K, Json)>) -> Json {
        Json::Object(members.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// A string value.
    pub fn str(s: impl Into<String>) -> Json {
        Json::Str(s.into())
    }

    /// The member `name` of an object.
    pub fn get(&self, name: &str) -> Option<&Json> {
        match self {
            Json::Object(m) => m.iter().find(|(k, _)| k == name).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Appends a member to an object (does nothing to other values).
    pub fn push_member(&mut self, name: &str, value: Json) {
        if let Json::Object(m) = self {
            m.push((name.to_string(), value));
        }
    }

    /// The value as compact JSON text.
    pub fn to_json(&self) -> String {
        let mut s = String::new();
        write_json(self, None, 0, &mut s);
        s
    }

    /// The value as JSON text indented by two spaces per level.
    pub fn to_json_pretty(&self) -> String {
        let mut s = String::new();
        write_json(self, Some(2), 0, &mut s);
        s
    }

    /// The value as the content of an XML element named `name` (lists repeat the element).
    pub fn to_xml(&self, name: &str, pretty: bool) -> String {
        let mut s = String::new();
        write_xml(name, self, if pretty { Some(0) } else { None }, &mut s);
        s
    }
}

/// Writes `s` as a JSON string literal.
pub fn quote_json(s: &str, out: &mut String) {
    out.push('"');
    escape_json(s, out);
    out.push('"');
}

/// Writes `s` escaped for the inside of a JSON string literal.
pub fn escape_json(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
}

fn newline(indent: Option<usize>, level: usize, out: &mut String) {
    if let Some(n) = indent {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', n * level));
    }
}

fn write_json(v: &Json, indent: Option<usize>, level: usize, out: &mut String) {
    match v {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Json::UInt(u) => {
            let _ = write!(out, "{u}");
        }
        // JSON has no NaN or infinity
        Json::Float(f) if !f.is_finite() => out.push_str("null"),
        Json::Float(f) => {
            let _ = write!(out, "{f:?}");
        }
        Json::Str(s) => quote_json(s, out),
        Json::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(indent, level + 1, out);
                write_json(item, indent, level + 1, out);
            }
            newline(indent, level, out);
            out.push(']');
        }
        Json::Object(members) => {
            if members.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push('{');
            for (i, (k, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(indent, level + 1, out);
                quote_json(k, out);
                out.push(':');
                if indent.is_some() {
                    out.push(' ');
                }
                write_json(item, indent, level + 1, out);
            }
            newline(indent, level, out);
            out.push('}');
        }
    }
}

/// Writes `s` as XML character data.
pub fn escape_xml(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            // characters XML 1.0 cannot carry at all are written as U+FFFD
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
}

/// An element name from a member name: XML names cannot start with a digit or hold spaces.
fn xml_name(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || !s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        s.insert(0, '_');
    }
    s
}

fn write_xml(name: &str, v: &Json, level: Option<usize>, out: &mut String) {
    let tag = xml_name(name);
    let pad = |out: &mut String| {
        if let Some(l) = level {
            out.extend(std::iter::repeat_n(' ', 2 * l));
        }
    };
    let end = |out: &mut String| {
        if level.is_some() {
            out.push('\n');
        }
    };
    match v {
        // a list is its items, each an element of the list's name (libxo's leaf-lists)
        Json::Array(items) => {
            for item in items {
                write_xml(name, item, level, out);
            }
        }
        Json::Object(members) => {
            pad(out);
            if members.is_empty() {
                let _ = write!(out, "<{tag}/>");
                end(out);
                return;
            }
            let _ = write!(out, "<{tag}>");
            end(out);
            for (k, item) in members {
                write_xml(k, item, level.map(|l| l + 1), out);
            }
            pad(out);
            let _ = write!(out, "</{tag}>");
            end(out);
        }
        scalar => {
            pad(out);
            let text = match scalar {
                Json::Null => String::new(),
                Json::Str(s) => s.clone(),
                other => other.to_json(),
            };
            if text.is_empty() {
                let _ = write!(out, "<{tag}/>");
            } else {
                let _ = write!(out, "<{tag}>");
                escape_xml(&text, out);
                let _ = write!(out, "</{tag}>");
            }
            end(out);
        }
    }
}

/// Reads JSON text into a [`Json`] tree (what `dtx --merge` reads back from saved results).
/// Integers stay exact: `Int` when they fit 64 signed bits, `UInt` above; numbers with a
/// fraction or an exponent are `Float`. Errors name the byte offset.
pub fn parse(text: &str) -> Result<Json, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        at: 0,
        depth: 0,
    };
    let v = p.value()?;
    p.space();
    if p.at != p.s.len() {
        return Err(p.error("text after the JSON value"));
    }
    Ok(v)
}

/// A recursive-descent reader over the bytes of one JSON text (RFC 8259).
struct Parser<'a> {
    s: &'a [u8],
    at: usize,
    depth: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> String {
        format!("invalid JSON at byte {}: {what}", self.at)
    }

    fn space(&mut self) {
        while self.s.get(self.at).is_some_and(|c| c.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.space();
        if self.s.get(self.at) == Some(&c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn word(&mut self, w: &str, v: Json) -> Result<Json, String> {
        if self.s[self.at..].starts_with(w.as_bytes()) {
            self.at += w.len();
            Ok(v)
        } else {
            Err(self.error("unknown word"))
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        self.space();
        if self.depth > 256 {
            return Err(self.error("nested too deeply"));
        }
        match self.s.get(self.at) {
            None => Err(self.error("unexpected end")),
            Some(b'{') => {
                self.at += 1;
                self.depth += 1;
                let mut members = Vec::new();
                if !self.eat(b'}') {
                    loop {
                        self.space();
                        let k = self.string()?;
                        if !self.eat(b':') {
                            return Err(self.error("':' expected"));
                        }
                        members.push((k, self.value()?));
                        if self.eat(b'}') {
                            break;
                        }
                        if !self.eat(b',') {
                            return Err(self.error("',' or '}' expected"));
                        }
                    }
                }
                self.depth -= 1;
                Ok(Json::Object(members))
            }
            Some(b'[') => {
                self.at += 1;
                self.depth += 1;
                let mut items = Vec::new();
                if !self.eat(b']') {
                    loop {
                        items.push(self.value()?);
                        if self.eat(b']') {
                            break;
                        }
                        if !self.eat(b',') {
                            return Err(self.error("',' or ']' expected"));
                        }
                    }
                }
                self.depth -= 1;
                Ok(Json::Array(items))
            }
            Some(b'"') => Ok(Json::Str(self.string()?)),
            Some(b't') => self.word("true", Json::Bool(true)),
            Some(b'f') => self.word("false", Json::Bool(false)),
            Some(b'n') => self.word("null", Json::Null),
            Some(_) => self.number(),
        }
    }

    fn number(&mut self) -> Result<Json, String> {
        let start = self.at;
        while self
            .s
            .get(self.at)
            .is_some_and(|c| c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E'))
        {
            self.at += 1;
        }
        let t = std::str::from_utf8(&self.s[start..self.at]).unwrap_or("");
        if t.is_empty() {
            return Err(self.error("a value expected"));
        }
        if let Ok(i) = t.parse::<i64>() {
            return Ok(Json::Int(i));
        }
        if let Ok(u) = t.parse::<u64>() {
            return Ok(Json::UInt(u));
        }
        t.parse::<f64>()
            .map(Json::Float)
            .map_err(|_| self.error("not a number"))
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let h = self
            .s
            .get(self.at..self.at + 4)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| self.error("four hex digits expected after \\u"))?;
        self.at += 4;
        Ok(h)
    }

    fn string(&mut self) -> Result<String, String> {
        if self.s.get(self.at) != Some(&b'"') {
            return Err(self.error("a string expected"));
        }
        self.at += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.at) else {
                return Err(self.error("unterminated string"));
            };
            self.at += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let Some(&e) = self.s.get(self.at) else {
                        return Err(self.error("unterminated string"));
                    };
                    self.at += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hi = self.hex4()?;
                            let code = if (0xd800..0xdc00).contains(&hi)
                                && self.s[self.at..].starts_with(b"\\u")
                            {
                                self.at += 2;
                                let lo = self.hex4()?;
                                0x10000 + ((hi - 0xd800) << 10) + (lo.wrapping_sub(0xdc00) & 0x3ff)
                            } else {
                                hi
                            };
                            char::from_u32(code).unwrap_or('\u{fffd}')
                        }
                        _ => return Err(self.error("unknown escape")),
                    };
                    let mut b = [0; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
                }
                _ => out.push(c),
            }
        }
        String::from_utf8(out).map_err(|_| self.error("a string that is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_and_nests() {
        let v = Json::object([
            ("name", Json::str("a\"b\\c\n\u{1}")),
            ("n", Json::Int(-3)),
            ("u", Json::UInt(u64::MAX)),
            ("list", Json::Array(vec![Json::Bool(true), Json::Null])),
            ("empty", Json::Object(vec![])),
        ]);
        assert_eq!(
            v.to_json(),
            r#"{"name":"a\"b\\c\n\u0001","n":-3,"u":18446744073709551615,"list":[true,null],"empty":{}}"#
        );
        let pretty = v.to_json_pretty();
        assert!(pretty.contains("\n  \"n\": -3,\n"), "{pretty}");
    }

    #[test]
    fn xml_repeats_list_items_and_escapes() {
        let v = Json::object([
            ("msg", Json::str("<a & b>")),
            (
                "probes",
                Json::Array(vec![
                    Json::object([("id", Json::Int(1))]),
                    Json::object([("id", Json::Int(2))]),
                ]),
            ),
            ("module", Json::str("")),
        ]);
        assert_eq!(
            v.to_xml("dtrace", false),
            "<dtrace><msg>&lt;a &amp; b&gt;</msg><probes><id>1</id></probes>\
             <probes><id>2</id></probes><module/></dtrace>"
        );
    }

    #[test]
    fn parse_reads_back_what_to_json_writes() {
        let v = Json::object([
            ("a", Json::Int(-3)),
            ("b", Json::UInt(u64::MAX)),
            (
                "c",
                Json::Array(vec![Json::Bool(true), Json::Null, Json::Float(1.5)]),
            ),
            ("d", Json::str("q\"\\\n\u{1}é")),
            ("e", Json::object::<&str>([])),
        ]);
        assert_eq!(parse(&v.to_json()).unwrap(), v);
        assert_eq!(parse(&v.to_json_pretty()).unwrap(), v);
        assert_eq!(parse("\"\\ud83d\\ude00\"").unwrap(), Json::str("😀"));
        for bad in [
            "",
            "{",
            "[1,]",
            "{\"a\" 1}",
            "tru",
            "\"x",
            "1 2",
            "[\"\\q\"]",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
