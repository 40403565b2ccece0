//! Tokens and lexing: a line of text as preprocessing tokens, and the token helpers
//! (spacing, pasting, `#` stringizing) the expander uses.

use std::rc::Rc;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum K {
    Ident,
    Number,
    Str,
    Char,
    Punct,
    Space,
    Newline,
    /// End of a macro expansion context (text = macro name).
    End,
    /// Top-level hint for the writer to avoid accidental token pasting.
    Guard,
    /// Empty operand of `##`.
    Placemarker,
    /// Reference to a macro parameter inside a macro body.
    Param(usize),
}

#[derive(Clone, Debug)]
pub(super) struct Tok {
    pub(super) kind: K,
    pub(super) text: Rc<str>,
    /// "Painted blue": never expand this identifier again.
    pub(super) noexpand: bool,
    /// Produced by a macro expansion.
    pub(super) expanded: bool,
}

impl Tok {
    pub(super) fn new(kind: K, text: &str) -> Tok {
        Tok {
            kind,
            text: Rc::from(text),
            noexpand: false,
            expanded: false,
        }
    }

    pub(super) fn is(&self, p: &str) -> bool {
        self.kind == K::Punct && &*self.text == p
    }

    pub(super) fn is_space(&self) -> bool {
        matches!(self.kind, K::Space | K::Newline)
    }
}

pub(super) fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b'$' || b >= 0x80
}

pub(super) fn is_ident_cont(b: u8) -> bool {
    is_ident_start(b) || b.is_ascii_digit()
}

pub(super) fn is_hspace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c')
}

const PUNCT3: [&[u8]; 3] = [b"<<=", b">>=", b"..."];
const PUNCT2: [&[u8]; 19] = [
    b"->", b"++", b"--", b"<<", b">>", b"<=", b">=", b"==", b"!=", b"&&", b"||", b"^^", b"*=",
    b"/=", b"%=", b"+=", b"-=", b"&=", b"^=",
];
const PUNCT2B: [&[u8]; 2] = [b"|=", b"##"];

/// Lex one token starting at `i` (which must be `< s.len()`); returns its
/// kind and end offset.  Token boundaries always fall on ASCII bytes or the
/// end of input, so slicing a `str` at them is safe.
pub(super) fn lex_one(s: &[u8], i: usize) -> (K, usize) {
    let n = s.len();
    let c = match s.get(i) {
        Some(&c) => c,
        None => return (K::Space, n),
    };
    if is_hspace(c) {
        let mut j = i + 1;
        while j < n && is_hspace(s[j]) {
            j += 1;
        }
        return (K::Space, j);
    }
    if c == b'\n' {
        return (K::Newline, i + 1);
    }
    if c.is_ascii_digit() || (c == b'.' && i + 1 < n && s[i + 1].is_ascii_digit()) {
        let mut j = i + 1;
        while j < n {
            let d = s[j];
            let sign = matches!(d, b'+' | b'-') && matches!(s[j - 1], b'e' | b'E' | b'p' | b'P');
            if sign || is_ident_cont(d) || d == b'.' {
                j += 1;
            } else {
                break;
            }
        }
        return (K::Number, j);
    }
    if is_ident_start(c) {
        let mut j = i + 1;
        while j < n && is_ident_cont(s[j]) {
            j += 1;
        }
        return (K::Ident, j);
    }
    if c == b'"' || c == b'\'' {
        let mut j = i + 1;
        while j < n {
            let d = s[j];
            if d == b'\n' {
                break;
            }
            if d == b'\\' {
                j += if j + 1 < n && s[j + 1] != b'\n' { 2 } else { 1 };
                continue;
            }
            j += 1;
            if d == c {
                break;
            }
        }
        let kind = if c == b'"' { K::Str } else { K::Char };
        return (kind, j.min(n));
    }
    let rest = &s[i..];
    if PUNCT3.iter().any(|p| rest.starts_with(p)) {
        return (K::Punct, i + 3);
    }
    if PUNCT2
        .iter()
        .chain(PUNCT2B.iter())
        .any(|p| rest.starts_with(p))
    {
        return (K::Punct, i + 2);
    }
    (K::Punct, i + 1)
}

pub(super) fn tokenize(s: &str) -> Vec<Tok> {
    let b = s.as_bytes();
    let mut v = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let (k, j) = lex_one(b, i);
        let j = j.clamp(i + 1, b.len());
        v.push(Tok::new(k, s.get(i..j).unwrap_or("")));
        i = j;
    }
    v
}

/// Would writing `b` directly after `a` make them lex differently?
pub(super) fn would_paste(a: &Tok, b: &Tok) -> bool {
    if !matches!(a.kind, K::Ident | K::Number | K::Punct)
        || !matches!(b.kind, K::Ident | K::Number | K::Punct | K::Str | K::Char)
    {
        return false;
    }
    if a.text.ends_with('/') && (b.text.starts_with('*') || b.text.starts_with('/')) {
        return true;
    }
    let mut s = String::with_capacity(a.text.len() + b.text.len());
    s.push_str(&a.text);
    s.push_str(&b.text);
    let (_, end) = lex_one(s.as_bytes(), 0);
    end != a.text.len()
}

pub(super) fn skip_sp(toks: &[Tok], mut i: usize) -> usize {
    while i < toks.len() && toks[i].is_space() {
        i += 1;
    }
    i
}

pub(super) fn trim_toks(mut v: Vec<Tok>) -> Vec<Tok> {
    while v.last().is_some_and(|t| t.is_space()) {
        v.pop();
    }
    let lead = v.iter().take_while(|t| t.is_space()).count();
    if lead > 0 {
        v.drain(..lead);
    }
    v
}

pub(super) fn escape_str(s: &str) -> String {
    let mut r = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '"' || c == '\\' {
            r.push('\\');
        }
        r.push(c);
    }
    r
}

pub(super) fn stringify(toks: &[Tok]) -> String {
    let mut s = String::from("\"");
    let mut pending_space = false;
    for t in toks {
        match t.kind {
            K::Space | K::Newline => pending_space = true,
            K::End | K::Guard | K::Placemarker => {}
            _ => {
                if pending_space && s.len() > 1 {
                    s.push(' ');
                }
                pending_space = false;
                if matches!(t.kind, K::Str | K::Char) {
                    s.push_str(&escape_str(&t.text));
                } else {
                    s.push_str(&t.text);
                }
            }
        }
    }
    s.push('"');
    s
}
