//! The D lexer: logos for the expression-state tokens, plus DTrace's lexer states around it.
//!
//! DTrace's lexer has an expression state and a clause-scope state where text such as
//! `syscall::open*:entry` is one probe-description token. The parser says which state it wants
//! for each token ([`Mode`]). Comments, control lines (`#pragma`, `# N "file"`), `#!` lines, the
//! end-of-predicate slash and the `$1`/`$target` macro variables are handled here too.

use super::diag::{derr, DResult};
use super::token::{IntSuffix, Keyword, Punct, RawTok, Tok};
use logos::Logos;

/// Which of DTrace's lexer states to scan the next token in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Inside expressions, declarations and clause bodies (DTrace's S0).
    Expr,
    /// At clause scope, where probe descriptions are read (DTrace's S2).
    Clause,
}

/// Values of macro arguments (`$0..$n`) and macro variables (`$pid`, `$target`, ...).
#[derive(Clone, Debug, Default)]
pub struct MacroEnv {
    /// `$0` is the script name, `$1..` the operands.
    pub args: Vec<String>,
    /// `-x defaultargs`: undefined `$n` are 0 / "".
    pub defaultargs: bool,
    pub vars: Vec<(String, u64)>,
}

impl MacroEnv {
    pub fn var(&self, name: &str) -> Option<u64> {
        self.vars.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }
}

#[derive(Clone, Debug)]
pub struct Token {
    pub tok: Tok,
    pub line: u32,
    pub start: usize,
    pub end: usize,
}

pub struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    pub line: u32,
    /// True while only whitespace has been seen since the last newline.
    at_line_start: bool,
    pub macros: MacroEnv,
    /// Which `$n` were referenced (for `D_MACRO_UNUSED`).
    pub args_used: Vec<bool>,
    parens: i32,
    brackets: i32,
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn is_pspec_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b"-$:_.?*\\[]!".contains(&b)
}

fn is_pspec_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-$:_.`?*\\[]!".contains(&b)
}

/// The length of a `{xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx}` at the start of `b`, if there is one.
fn braced_guid(b: &[u8]) -> Option<usize> {
    let g = b.get(..38)?;
    let ok = g[0] == b'{'
        && g[37] == b'}'
        && g[1..37].iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        });
    ok.then_some(38)
}

/// The inside of a `{word}:` at the start of `b` that [`braced_guid`] refused: a braced
/// probe-description field (letters, digits, `-`, at most 64) that is no GUID.
fn bad_braced_guid(b: &[u8]) -> Option<&str> {
    if b.first() != Some(&b'{') {
        return None;
    }
    let n = b[1..].iter().take(65).position(|c| *c == b'}')?;
    let inner = &b[1..1 + n];
    let ok = n > 0
        && inner
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        && b.get(n + 2) == Some(&b':');
    ok.then(|| std::str::from_utf8(inner).ok()).flatten()
}

impl<'a> Lexer<'a> {
    pub fn new(src: &'a str, macros: MacroEnv) -> Self {
        let n = macros.args.len();
        Lexer {
            src,
            pos: 0,
            line: 1,
            at_line_start: true,
            macros,
            args_used: vec![false; n],
            parens: 0,
            brackets: 0,
        }
    }

    /// Moves back to a byte offset (the start of a token already handed out) so it can be
    /// scanned again in another state.
    pub fn reset_to(&mut self, pos: usize, line: u32) {
        self.pos = pos.min(self.src.len());
        self.line = line;
        self.at_line_start = false;
    }

    pub fn source(&self) -> &'a str {
        self.src
    }

    pub fn text(&self, t: &Token) -> &'a str {
        &self.src[t.start..t.end]
    }

    /// Skips whitespace and comments; handles `#!` lines. Stops before a control line.
    fn skip_trivia(&mut self) -> DResult<()> {
        let b = self.src.as_bytes();
        loop {
            let Some(&c) = b.get(self.pos) else {
                return Ok(());
            };
            if c == b'\n' {
                self.line += 1;
                self.pos += 1;
                self.at_line_start = true;
            } else if is_ws(c) {
                self.pos += 1;
            } else if c == b'\\' && b.get(self.pos + 1) == Some(&b'\n') {
                self.pos += 2;
                self.line += 1;
            } else if c == b'/' && b.get(self.pos + 1) == Some(&b'*') {
                let start_line = self.line;
                self.pos += 2;
                loop {
                    match b.get(self.pos) {
                        None => {
                            return Err(derr(
                                "D_SYNTAX",
                                start_line,
                                "end-of-file encountered before matching */",
                            ))
                        }
                        Some(b'*') if b.get(self.pos + 1) == Some(&b'/') => {
                            self.pos += 2;
                            break;
                        }
                        Some(b'/') if b.get(self.pos + 1) == Some(&b'*') => {
                            return Err(derr(
                                "D_SYNTAX",
                                self.line,
                                "/* encountered inside a comment",
                            ))
                        }
                        Some(b'\n') => {
                            self.line += 1;
                            self.pos += 1;
                        }
                        Some(_) => self.pos += 1,
                    }
                }
            } else if c == b'/' && b.get(self.pos + 1) == Some(&b'/') {
                // C++ comments are accepted by the cpp pass; D itself treats them alike.
                while let Some(&c) = b.get(self.pos) {
                    if c == b'\n' {
                        break;
                    }
                    self.pos += 1;
                }
            } else if c == b'#' && self.at_line_start && b.get(self.pos + 1) == Some(&b'!') {
                while let Some(&c) = b.get(self.pos) {
                    if c == b'\n' {
                        break;
                    }
                    self.pos += 1;
                }
            } else {
                return Ok(());
            }
        }
    }

    fn make(&self, tok: Tok, line: u32, start: usize) -> Token {
        Token {
            tok,
            line,
            start,
            end: self.pos,
        }
    }

    /// Reads the rest of a control line into words (strings stay quoted).
    fn control_line(&mut self) -> DResult<Vec<String>> {
        let b = self.src.as_bytes();
        self.pos += 1; // '#'
        let mut words = Vec::new();
        loop {
            while let Some(&c) = b.get(self.pos) {
                if c == b'\n' || !is_ws(c) {
                    break;
                }
                self.pos += 1;
            }
            match b.get(self.pos) {
                // dt_lex.l, input(): end of input in a control line (state S3) is an error
                None => {
                    return Err(derr(
                        "D_SYNTAX",
                        self.line,
                        "end-of-file encountered before end of control line",
                    ))
                }
                Some(b'\n') => {
                    self.pos += 1;
                    self.line += 1;
                    self.at_line_start = true;
                    break;
                }
                Some(b'"') => {
                    let start = self.pos;
                    self.pos += 1;
                    loop {
                        match b.get(self.pos) {
                            None | Some(b'\n') => {
                                return Err(derr(
                                    "D_STR_NL",
                                    self.line,
                                    "newline encountered in string literal",
                                ))
                            }
                            Some(b'\\') => self.pos += 2,
                            Some(b'"') => {
                                self.pos += 1;
                                break;
                            }
                            Some(_) => self.pos += 1,
                        }
                    }
                    let end = self.pos.min(self.src.len());
                    words.push(self.src[start..end].to_string());
                }
                Some(_) => {
                    let start = self.pos;
                    while let Some(&c) = b.get(self.pos) {
                        if is_ws(c) || c == b'"' {
                            break;
                        }
                        self.pos += 1;
                    }
                    words.push(self.src[start..self.pos].to_string());
                }
            }
        }
        Ok(words)
    }

    /// The next token in the given state.
    pub fn next(&mut self, mode: Mode) -> DResult<Token> {
        self.skip_trivia()?;
        let start = self.pos;
        let line = self.line;
        let b = self.src.as_bytes();
        let Some(&c) = b.get(self.pos) else {
            return Ok(self.make(Tok::Eof, line, start));
        };
        if c == b'#' && self.at_line_start {
            let words = self.control_line()?;
            return Ok(Token {
                tok: Tok::Control(words),
                line,
                start,
                end: self.pos,
            });
        }
        self.at_line_start = false;
        if mode == Mode::Clause {
            if c.is_ascii_digit() {
                // probe ids are integers at clause scope
            } else if is_pspec_start(c) {
                let mut end = self.pos + 1;
                while end < b.len() {
                    if is_pspec_char(b[end]) {
                        end += 1;
                    } else if let Some(n) = braced_guid(&b[end..]).filter(|_| b[end - 1] == b':') {
                        // a provider GUID in braces as a field (`etw:{guid}:...`)
                        end += n;
                    } else if let Some(bad) =
                        bad_braced_guid(&b[end..]).filter(|_| b[end - 1] == b':')
                    {
                        // `etw:{bogus}:...`: a braced field that is no GUID; said here, since
                        // the `{` would otherwise open the clause's body
                        return Err(derr(
                            "D_SYNTAX",
                            line,
                            format!(
                                "probe description field {{{bad}}} is not a provider GUID: give it as {{xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx}}"
                            ),
                        ));
                    } else {
                        break;
                    }
                }
                let text = &self.src[self.pos..end];
                self.pos = end;
                if let Some(k) = Keyword::lookup(text) {
                    if k.starts_declaration() {
                        return Ok(self.make(Tok::Kw(k), line, start));
                    }
                }
                let text = if text.contains('$') {
                    self.expand_pspec(text, line)?
                } else {
                    text.to_string()
                };
                return Ok(self.make(Tok::Pspec(text.into()), line, start));
            } else if c == b'/' {
                self.pos += 1;
                return Ok(self.make(Tok::Punct(Punct::Slash), line, start));
            } else if c == b',' {
                self.pos += 1;
                return Ok(self.make(Tok::Punct(Punct::Comma), line, start));
            } else if c == b'{' {
                self.pos += 1;
                return Ok(self.make(Tok::Punct(Punct::LBrace), line, start));
            } else {
                return Err(derr(
                    "D_SYNTAX",
                    line,
                    format!("syntax error near \"{}\"", char_at(self.src, self.pos)),
                ));
            }
        }
        let (raw, len) = match scan_ident(&b[self.pos..]) {
            Some(n) => (Some(Ok(RawTok::Ident)), n),
            None => {
                let mut lx = RawTok::lexer(&self.src[self.pos..]);
                let raw = lx.next();
                (raw, lx.span().end)
            }
        };
        let text = &self.src[self.pos..self.pos + len.max(1).min(self.src.len() - self.pos)];
        let raw = match raw {
            Some(Ok(r)) => r,
            _ => {
                return Err(derr(
                    "D_SYNTAX",
                    line,
                    format!("syntax error near \"{}\"", char_at(self.src, self.pos)),
                ))
            }
        };
        self.pos += len;
        let tok = match raw {
            RawTok::Ident => match Keyword::lookup(text) {
                Some(k) => Tok::Kw(k),
                None => Tok::Ident(text.into()),
            },
            RawTok::Agg => Tok::Agg(text.into()),
            RawTok::AggAnon => Tok::Agg("@_".into()),
            RawTok::Int => lex_int(text, line)?,
            RawTok::Float => {
                return Err(derr(
                    "D_SYNTAX",
                    line,
                    "floating-point constants are not permitted",
                ))
            }
            RawTok::Str => Tok::Str(unescape(&text[1..text.len() - 1]).into()),
            RawTok::StrUnterminated => {
                return Err(derr(
                    "D_STR_NL",
                    line,
                    "newline encountered in string literal",
                ))
            }
            RawTok::Char => lex_char(&text[1..text.len() - 1], line)?,
            RawTok::CharUnterminated => {
                return Err(derr(
                    "D_CHR_NL",
                    line,
                    "newline encountered in character constant",
                ))
            }
            RawTok::DollarDollarNum => {
                let v = self.macro_arg(text, 2, line)?;
                Tok::Str(unescape(&v.unwrap_or_default()).into())
            }
            RawTok::DollarNum => {
                let v = self.macro_arg(text, 1, line)?;
                macro_arg_token(v.as_deref().unwrap_or("0"), text, line)?
            }
            RawTok::DollarDollarIdent => match self.macros.var(&text[2..]) {
                Some(v) => Tok::Str(v.to_string().into()),
                None => {
                    return Err(derr(
                        "D_MACRO_UNDEF",
                        line,
                        format!("macro variable {text} is not defined"),
                    ))
                }
            },
            RawTok::DollarIdent => match self.macros.var(&text[1..]) {
                Some(v) => Tok::Int {
                    value: v as u32 as i32 as i64 as u64,
                    suffix: IntSuffix::default(),
                    decimal: true,
                },
                None => {
                    return Err(derr(
                        "D_MACRO_UNDEF",
                        line,
                        format!("macro variable {text} is not defined"),
                    ))
                }
            },
            RawTok::Slash => {
                // The end-of-predicate slash: followed (after blanks) by `;`, `{`, `/` or EOF.
                let mut i = self.pos;
                while i < b.len() && is_ws(b[i]) {
                    i += 1;
                }
                if i >= b.len() || matches!(b[i], b';' | b'{' | b'/') {
                    if self.parens != 0 {
                        return Err(derr(
                            "D_SYNTAX",
                            line,
                            "closing ) expected in predicate before /",
                        ));
                    }
                    if self.brackets != 0 {
                        return Err(derr(
                            "D_SYNTAX",
                            line,
                            "closing ] expected in predicate before /",
                        ));
                    }
                    Tok::EndPred
                } else {
                    Tok::Punct(Punct::Slash)
                }
            }
            other => {
                let p = other.punct().unwrap_or(Punct::Semi);
                match p {
                    Punct::LParen => self.parens += 1,
                    Punct::RParen => {
                        self.parens -= 1;
                        if self.parens < 0 {
                            return Err(derr("D_SYNTAX", line, "extra ) in input stream"));
                        }
                    }
                    Punct::LBracket => self.brackets += 1,
                    Punct::RBracket => {
                        self.brackets -= 1;
                        if self.brackets < 0 {
                            return Err(derr("D_SYNTAX", line, "extra ] in input stream"));
                        }
                    }
                    _ => {}
                }
                Tok::Punct(p)
            }
        };
        Ok(self.make(tok, line, start))
    }

    /// Replaces the macro arguments and variables of a probe specifier (`pid$target`,
    /// `syscall::$1:entry`, `$$1`) by their text, as dtrace does.
    fn expand_pspec(&mut self, text: &str, line: u32) -> DResult<String> {
        let b = text.as_bytes();
        let mut out = String::with_capacity(text.len() + 8);
        let mut i = 0;
        while i < b.len() {
            if b[i] != b'$' {
                let n = text[i..].find('$').map_or(text.len(), |k| i + k);
                out.push_str(&text[i..n]);
                i = n;
                continue;
            }
            let mut j = i + 1;
            if b.get(j) == Some(&b'$') {
                j += 1;
            }
            let name_start = j;
            if b.get(j).is_some_and(|c| c.is_ascii_digit()) {
                while b.get(j).is_some_and(|c| c.is_ascii_digit()) {
                    j += 1;
                }
                let v = self.macro_arg(&text[i..j], name_start - i, line)?;
                out.push_str(v.as_deref().unwrap_or(""));
            } else if b
                .get(j)
                .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
            {
                while b
                    .get(j)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
                {
                    j += 1;
                }
                match self.macros.var(&text[name_start..j]) {
                    Some(v) => out.push_str(&v.to_string()),
                    None => {
                        return Err(derr(
                            "D_MACRO_UNDEF",
                            line,
                            format!("macro variable {} is not defined", &text[i..j]),
                        ))
                    }
                }
            } else {
                out.push('$');
                j = i + 1;
            }
            i = j;
        }
        Ok(out)
    }

    fn macro_arg(&mut self, text: &str, skip: usize, line: u32) -> DResult<Option<String>> {
        let n: usize = text[skip..].parse().unwrap_or(usize::MAX);
        if n < self.macros.args.len() {
            self.args_used[n] = true;
            Ok(Some(self.macros.args[n].clone()))
        } else if self.macros.defaultargs {
            Ok(None)
        } else {
            Err(derr(
                "D_MACRO_UNDEF",
                line,
                format!("macro argument {text} is not defined"),
            ))
        }
    }

    /// Peeks at the next significant byte without consuming anything (used by the type-name
    /// heuristic of DTrace's lexer).
    pub fn peek_byte(&self) -> Option<u8> {
        let b = self.src.as_bytes();
        let mut i = self.pos;
        while i < b.len() && is_ws(b[i]) {
            i += 1;
        }
        b.get(i).copied()
    }

    pub fn peek_bytes2(&self) -> (Option<u8>, Option<u8>) {
        let b = self.src.as_bytes();
        let mut i = self.pos;
        while i < b.len() && is_ws(b[i]) {
            i += 1;
        }
        (b.get(i).copied(), b.get(i + 1).copied())
    }
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'`'
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'`'
}

/// Scans an identifier: `[a-zA-Z_`][0-9a-zA-Z_`]*`, or the module-scoped form whose module part
/// may contain dots (``libc.so.1`strlen``). Returns its length.
fn scan_ident(b: &[u8]) -> Option<usize> {
    if !b.first().is_some_and(|&c| is_ident_start(c)) {
        return None;
    }
    let simple = 1 + b[1..].iter().take_while(|&&c| is_ident_char(c)).count();
    if b.get(simple) != Some(&b'.') {
        return Some(simple);
    }
    // module part with dots, then a backquote and an identifier
    let ext = 1 + b[1..]
        .iter()
        .take_while(|&&c| is_ident_char(c) || c == b'.')
        .count();
    let Some(last_tick) = b[..ext].iter().rposition(|&c| c == b'`') else {
        return Some(simple);
    };
    if last_tick < simple {
        return Some(simple);
    }
    // the text after the last backquote must be a plain identifier
    let tail = &b[last_tick + 1..ext];
    match tail.iter().position(|&c| c == b'.') {
        Some(dot) if dot > 0 => Some(last_tick + 1 + dot),
        Some(_) => Some(simple),
        None if tail.is_empty() => Some(simple),
        None => Some(ext),
    }
    .or(Some(simple))
}

fn char_at(src: &str, pos: usize) -> String {
    src[pos..]
        .chars()
        .next()
        .map(String::from)
        .unwrap_or_default()
}

/// A `$n` operand becomes a string, an integer or an identifier by its text, as in DTrace.
fn macro_arg_token(v: &str, text: &str, line: u32) -> DResult<Tok> {
    let first = v.as_bytes().first().copied();
    let is_num = matches!(first, Some(b'0'..=b'9' | b'-' | b'+'));
    if is_num {
        let (neg, digits) = match first {
            Some(b'-') => (true, &v[1..]),
            Some(b'+') => (false, &v[1..]),
            _ => (false, v),
        };
        if let Ok(Tok::Int {
            value,
            suffix,
            decimal,
        }) = lex_int(digits, line)
        {
            let value = if neg { value.wrapping_neg() } else { value };
            return Ok(Tok::Int {
                value,
                suffix,
                decimal: decimal || neg,
            });
        }
        if let Err(e) = lex_int(digits, line) {
            if e.tag == "D_INT_OFLOW" {
                return Err(derr(
                    "D_MACRO_OFLOW",
                    line,
                    format!("macro argument {text} constant {v} results in integer overflow"),
                ));
            }
        }
    }
    let is_ident = !v.is_empty()
        && v.bytes().enumerate().all(|(i, c)| {
            c == b'_' || c == b'`' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())
        });
    if is_ident {
        return Ok(match Keyword::lookup(v) {
            Some(k) => Tok::Kw(k),
            None => Tok::Ident(v.into()),
        });
    }
    let s = if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        &v[1..v.len() - 1]
    } else {
        v
    };
    Ok(Tok::Str(unescape(s).into()))
}

/// Parses an integer constant as `strtoull(s, &end, 0)` does, plus D's suffix rules.
pub fn lex_int(text: &str, line: u32) -> DResult<Tok> {
    let (radix, body) = if text.len() > 1 && (text.starts_with("0x") || text.starts_with("0X")) {
        (16, &text[2..])
    } else if text.len() > 1 && text.starts_with('0') {
        (8, &text[1..])
    } else {
        (10, text)
    };
    let digits_end = body
        .bytes()
        .position(|c| !c.is_ascii_hexdigit())
        .unwrap_or(body.len());
    let (digits, rest) = body.split_at(digits_end);
    let mut value: u64 = 0;
    for (i, ch) in digits.char_indices() {
        let d = ch.to_digit(16).unwrap_or(99);
        if d >= radix {
            // strtoull stops here: the rest must be a suffix
            let bad = &digits[i..];
            let c = bad.chars().next().unwrap_or('?');
            if !"uUlL".contains(c) {
                return Err(derr(
                    "D_INT_DIGIT",
                    line,
                    format!("constant {text} contains invalid digit {c}"),
                ));
            }
        }
        value = match value
            .checked_mul(radix as u64)
            .and_then(|v| v.checked_add(d as u64))
        {
            Some(v) => v,
            None => {
                return Err(derr(
                    "D_INT_OFLOW",
                    line,
                    format!("constant {text} results in integer overflow"),
                ))
            }
        };
    }
    let mut suffix = IntSuffix::default();
    for c in rest.chars() {
        match c {
            'u' | 'U' => suffix.unsigned = true,
            'l' | 'L' => suffix.longs += 1,
            _ => {
                return Err(derr(
                    "D_INT_DIGIT",
                    line,
                    format!("constant {text} contains invalid digit {c}"),
                ))
            }
        }
    }
    Ok(Tok::Int {
        value,
        suffix,
        decimal: radix == 10 && !text.starts_with('0') || text == "0",
    })
}

fn lex_char(body: &str, line: u32) -> DResult<Tok> {
    if body.is_empty() {
        return Err(derr("D_CHR_NULL", line, "empty character constant"));
    }
    let bytes = unescape_bytes(body);
    if bytes.len() > 8 {
        return Err(derr("D_CHR_OFLOW", line, "character constant is too long"));
    }
    let mut v: u64 = 0;
    for &c in &bytes {
        v = (v << 8) | c as u64;
    }
    // A single character is a (signed) char value promoted to int, as in C.
    if bytes.len() == 1 {
        v = bytes[0] as i8 as i64 as u64;
    }
    Ok(Tok::Int {
        value: v,
        suffix: IntSuffix::default(),
        decimal: true,
    })
}

/// Decodes C escape sequences as libdtrace's `stresc2chr` does (dt_string.c): `\x` without
/// digits is 0, and an escape it does not know keeps its backslash.
pub fn unescape(s: &str) -> String {
    let bytes = unescape_bytes(s);
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

pub fn unescape_bytes(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        i += 1;
        if c != b'\\' || i >= b.len() {
            out.push(c);
            continue;
        }
        let e = b[i];
        i += 1;
        let v = match e {
            b'a' => 7,
            b'b' => 8,
            b'f' => 12,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'v' => 11,
            b'0'..=b'7' => {
                let mut v: u32 = (e - b'0') as u32;
                let mut n = 1;
                while n < 3 && i < b.len() && (b'0'..=b'7').contains(&b[i]) {
                    v = v * 8 + (b[i] - b'0') as u32;
                    i += 1;
                    n += 1;
                }
                v as u8
            }
            b'x' => {
                let mut v: u32 = 0;
                while i < b.len() && b[i].is_ascii_hexdigit() {
                    v = v
                        .wrapping_mul(16)
                        .wrapping_add((b[i] as char).to_digit(16).unwrap_or(0));
                    i += 1;
                }
                v as u8
            }
            b'"' | b'\\' => e,
            // stresc2chr keeps the backslash of any other escape: `\?`, `\'`, `\q`
            other => {
                out.push(b'\\');
                other
            }
        };
        out.push(v);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str, mode: Mode) -> Vec<Tok> {
        let mut lx = Lexer::new(src, MacroEnv::default());
        let mut v = Vec::new();
        loop {
            let t = lx.next(mode).unwrap();
            if t.tok == Tok::Eof {
                break;
            }
            v.push(t.tok);
        }
        v
    }

    #[test]
    fn integers_with_suffixes_and_radix() {
        assert_eq!(
            toks("0x1fUL 017 42ll", Mode::Expr),
            vec![
                Tok::Int {
                    value: 31,
                    suffix: IntSuffix {
                        unsigned: true,
                        longs: 1
                    },
                    decimal: false
                },
                Tok::Int {
                    value: 15,
                    suffix: IntSuffix::default(),
                    decimal: false
                },
                Tok::Int {
                    value: 42,
                    suffix: IntSuffix {
                        unsigned: false,
                        longs: 2
                    },
                    decimal: true
                },
            ]
        );
        let e = Lexer::new("08", MacroEnv::default())
            .next(Mode::Expr)
            .unwrap_err();
        assert_eq!(e.tag, "D_INT_DIGIT");
        let e = Lexer::new("99999999999999999999999", MacroEnv::default())
            .next(Mode::Expr)
            .unwrap_err();
        assert_eq!(e.tag, "D_INT_OFLOW");
    }

    #[test]
    fn end_of_predicate_slash() {
        let t = toks("/x / 2/ {", Mode::Expr);
        assert_eq!(t[0], Tok::Punct(Punct::Slash));
        assert_eq!(t[2], Tok::Punct(Punct::Slash));
        assert_eq!(t[4], Tok::EndPred);
    }

    #[test]
    fn macros_in_probe_descriptions() {
        let env = MacroEnv {
            args: vec!["x.d".into(), "open".into()],
            defaultargs: false,
            vars: vec![("target".into(), 42)],
        };
        let mut lx = Lexer::new("pid$target:a.out:$1:entry syscall::$$1:", env);
        let a = lx.next(Mode::Clause).unwrap().tok;
        let b = lx.next(Mode::Clause).unwrap().tok;
        assert_eq!(a, Tok::Pspec("pid42:a.out:open:entry".into()));
        assert_eq!(b, Tok::Pspec("syscall::open:".into()));
    }

    #[test]
    fn probe_descriptions_at_clause_scope() {
        assert_eq!(
            toks("syscall::open*:entry, BEGIN", Mode::Clause),
            vec![
                Tok::Pspec("syscall::open*:entry".into()),
                Tok::Punct(Punct::Comma),
                Tok::Pspec("BEGIN".into())
            ]
        );
        assert_eq!(
            toks("typedef", Mode::Clause),
            vec![Tok::Kw(Keyword::Typedef)]
        );
    }

    #[test]
    fn braced_guids_in_probe_descriptions() {
        let t = toks(
            "etw:{1c95126e-7eea-49a9-a3fe-a378b03ddb4d}:0x05_0xff:generic_event {",
            Mode::Clause,
        );
        assert_eq!(
            t[0],
            Tok::Pspec("etw:{1c95126e-7eea-49a9-a3fe-a378b03ddb4d}:0x05_0xff:generic_event".into())
        );
        // a brace that is not a GUID still opens the clause
        let t = toks("a:::b{", Mode::Clause);
        assert_eq!(t[1], Tok::Punct(Punct::LBrace));
        let t = toks("etw:{12", Mode::Clause);
        assert_eq!(t[1], Tok::Punct(Punct::LBrace));
        // an empty clause right after the description: `{}` is no braced field
        let mut lx = Lexer::new("syscall:::{}", MacroEnv::default());
        assert!(matches!(
            lx.next(Mode::Clause).map(|t| t.tok),
            Ok(Tok::Pspec(_))
        ));
        assert!(matches!(
            lx.next(Mode::Clause).map(|t| t.tok),
            Ok(Tok::Punct(Punct::LBrace))
        ));
        // a braced field that is no GUID is named, not read as the clause's body
        let mut lx = Lexer::new("etw:{bogus}:0xff:1 {}", MacroEnv::default());
        let e = lx.next(Mode::Clause).unwrap_err();
        assert!(
            e.to_string().contains("{bogus} is not a provider GUID"),
            "{e}"
        );
    }

    #[test]
    fn strings_chars_and_escapes() {
        assert_eq!(
            toks(r#""a\tb\101" 'a' 'ab'"#, Mode::Expr),
            vec![
                Tok::Str("a\tbA".into()),
                Tok::Int {
                    value: 97,
                    suffix: IntSuffix::default(),
                    decimal: true
                },
                Tok::Int {
                    value: 0x6162,
                    suffix: IntSuffix::default(),
                    decimal: true
                },
            ]
        );
        let e = Lexer::new("\"abc\nx\"", MacroEnv::default())
            .next(Mode::Expr)
            .unwrap_err();
        assert_eq!(e.tag, "D_STR_NL");
        let e = Lexer::new("''", MacroEnv::default())
            .next(Mode::Expr)
            .unwrap_err();
        assert_eq!(e.tag, "D_CHR_NULL");
    }

    #[test]
    fn comments_lines_and_control_lines() {
        let mut lx = Lexer::new(
            "#!/usr/sbin/dtrace -s\n/* a\nb */ x\n#pragma D option quiet\ny",
            MacroEnv::default(),
        );
        let t = lx.next(Mode::Expr).unwrap();
        assert_eq!((t.tok, t.line), (Tok::Ident("x".into()), 3));
        let t = lx.next(Mode::Expr).unwrap();
        assert_eq!(
            t.tok,
            Tok::Control(vec![
                "pragma".into(),
                "D".into(),
                "option".into(),
                "quiet".into()
            ])
        );
        let t = lx.next(Mode::Expr).unwrap();
        assert_eq!((t.tok, t.line), (Tok::Ident("y".into()), 5));
        let e = Lexer::new("/* /* */", MacroEnv::default())
            .next(Mode::Expr)
            .unwrap_err();
        assert_eq!(e.tag, "D_SYNTAX");
    }

    #[test]
    fn macro_arguments_and_variables() {
        let env = MacroEnv {
            args: vec!["s.d".into(), "42".into(), "hello".into(), "a b".into()],
            defaultargs: false,
            vars: vec![("pid".into(), 77)],
        };
        let mut lx = Lexer::new("$1 $2 $3 $$1 $pid $4", env);
        let mut next = || lx.next(Mode::Expr).map(|t| t.tok);
        assert!(matches!(next().unwrap(), Tok::Int { value: 42, .. }));
        assert_eq!(next().unwrap(), Tok::Ident("hello".into()));
        assert_eq!(next().unwrap(), Tok::Str("a b".into()));
        assert_eq!(next().unwrap(), Tok::Str("42".into()));
        assert!(matches!(next().unwrap(), Tok::Int { value: 77, .. }));
        assert_eq!(next().unwrap_err().tag, "D_MACRO_UNDEF");
    }

    #[test]
    fn scoped_identifiers_and_member_access() {
        assert_eq!(
            toks(
                "rec.position nt`_EPROCESS libc.so.1`strlen `kvar",
                Mode::Expr
            ),
            vec![
                Tok::Ident("rec".into()),
                Tok::Punct(Punct::Dot),
                Tok::Ident("position".into()),
                Tok::Ident("nt`_EPROCESS".into()),
                Tok::Ident("libc.so.1`strlen".into()),
                Tok::Ident("`kvar".into()),
            ]
        );
    }

    #[test]
    fn floats_are_refused() {
        let e = Lexer::new("1.5", MacroEnv::default())
            .next(Mode::Expr)
            .unwrap_err();
        assert!(e.message.contains("floating-point"));
    }
}
