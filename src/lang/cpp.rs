//! C preprocessor used by `dtx -C`.
//!
//! This is a self-contained, traditional-style C preprocessor modelled on the
//! way DTrace runs the system `cpp` over D scripts.  It supports object-like
//! and function-like macros (`#`, `##`, variadic `...`/`__VA_ARGS__`, GNU
//! named variadics and `, ## __VA_ARGS__`), `#include`, the whole family of
//! conditionals with full constant expressions, `#error`, `#warning`,
//! `#line`, null directives and `#pragma` pass-through.
//!
//! The output carries GNU-style line markers (`# <line> "<file>"`) at the
//! start of every file and whenever the current file changes (include enter
//! and leave, `#line`).  Within a file, removed lines (directives, skipped
//! conditional blocks, comment lines) are kept as empty lines so that line
//! numbers are preserved.
//!
//! Like the Solaris `cpp` that DTrace uses, a directive is only recognised
//! when `#` is the first character of the line; an indented `#define` is
//! ordinary text and reaches the D compiler unchanged (which then rejects it).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Options for [`preprocess`].
#[derive(Debug, Clone, Default)]
pub struct CppOptions {
    /// `-I` directories, searched in order.
    pub include_dirs: Vec<PathBuf>,
    /// `-D name[=value]` in command-line order (`None` means `1`).
    pub defines: Vec<(String, Option<String>)>,
    /// `-U name`, applied after predefined macros and `-D`.
    pub undefs: Vec<String>,
    /// Macros predefined by the caller (e.g. `__SUNW_D`), applied first.
    pub predefined: Vec<(String, String)>,
}

/// A preprocessing error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CppError {
    pub file: String,
    pub line: u32,
    pub message: String,
}

impl fmt::Display for CppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

impl std::error::Error for CppError {}

/// Preprocess `source` (named `file_name` in markers and errors).
pub fn preprocess(source: &str, file_name: &str, opts: &CppOptions) -> Result<String, CppError> {
    let mut pp = Pp::new(opts);
    pp.init_macros()?;
    let dir = parent_dir(Path::new(file_name));
    let path = PathBuf::from(file_name);
    pp.cur_path = if path.is_file() { Some(path) } else { None };
    pp.process_file(source, file_name, dir, 0)?;
    Ok(pp.out)
}

const MAX_INCLUDE_DEPTH: usize = 200;
const MAX_MACRO_NEST: u32 = 200;
const MAX_EXPR_DEPTH: u32 = 256;
const MAX_EXPANSION_TOKENS: u64 = 1 << 21;
/// Extra expansion budget per byte of source text read.
const EXPANSION_TOKENS_PER_BYTE: u64 = 16;
const CMDLINE: &str = "<command-line>";

fn parent_dir(p: &Path) -> Option<PathBuf> {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => Some(d.to_path_buf()),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// Tokens and lexing
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum K {
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
struct Tok {
    kind: K,
    text: Rc<str>,
    /// "Painted blue": never expand this identifier again.
    noexpand: bool,
    /// Produced by a macro expansion.
    expanded: bool,
}

impl Tok {
    fn new(kind: K, text: &str) -> Tok {
        Tok {
            kind,
            text: Rc::from(text),
            noexpand: false,
            expanded: false,
        }
    }

    fn is(&self, p: &str) -> bool {
        self.kind == K::Punct && &*self.text == p
    }

    fn is_space(&self) -> bool {
        matches!(self.kind, K::Space | K::Newline)
    }
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b'$' || b >= 0x80
}

fn is_ident_cont(b: u8) -> bool {
    is_ident_start(b) || b.is_ascii_digit()
}

fn is_hspace(b: u8) -> bool {
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
fn lex_one(s: &[u8], i: usize) -> (K, usize) {
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

fn tokenize(s: &str) -> Vec<Tok> {
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
fn would_paste(a: &Tok, b: &Tok) -> bool {
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

fn skip_sp(toks: &[Tok], mut i: usize) -> usize {
    while i < toks.len() && toks[i].is_space() {
        i += 1;
    }
    i
}

fn trim_toks(mut v: Vec<Tok>) -> Vec<Tok> {
    while v.last().is_some_and(|t| t.is_space()) {
        v.pop();
    }
    let lead = v.iter().take_while(|t| t.is_space()).count();
    if lead > 0 {
        v.drain(..lead);
    }
    v
}

fn escape_str(s: &str) -> String {
    let mut r = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '"' || c == '\\' {
            r.push('\\');
        }
        r.push(c);
    }
    r
}

fn stringify(toks: &[Tok]) -> String {
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

// ---------------------------------------------------------------------------
// Logical lines: comments removed, continuations spliced
// ---------------------------------------------------------------------------

struct LLine {
    /// Text with comments replaced by a space; newlines inside block comments
    /// are kept as `\n` characters.
    text: String,
    /// Physical line number of the first line.
    line: u32,
    /// Number of physical lines covered.
    phys: u32,
    /// Number of backslash-newline continuations removed.
    cont: u32,
}

#[derive(Clone, Copy)]
enum St {
    Code,
    Str(u8),
    Block(u32),
    LineComment,
}

fn split_lines(src: &str, first_line: u32) -> Result<Vec<LLine>, (u32, String)> {
    let b = src.as_bytes();
    let n = b.len();
    let mut lines = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    let mut line = first_line;
    let mut start = first_line;
    let mut cont = 0u32;
    let mut st = St::Code;
    let mut i = 0;
    let finish = |cur: &mut Vec<u8>, start: u32, line: u32, cont: u32, lines: &mut Vec<LLine>| {
        let bytes = std::mem::take(cur);
        let text = match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        };
        lines.push(LLine {
            text,
            line: start,
            phys: line.saturating_sub(start).saturating_add(1),
            cont,
        });
    };
    while i < n {
        let c = b[i];
        if c == b'\\' {
            if b.get(i + 1) == Some(&b'\n') {
                i += 2;
                line = line.saturating_add(1);
                cont += 1;
                continue;
            }
            if b.get(i + 1) == Some(&b'\r') && b.get(i + 2) == Some(&b'\n') {
                i += 3;
                line = line.saturating_add(1);
                cont += 1;
                continue;
            }
        }
        let next = b.get(i + 1).copied();
        match st {
            St::Code => match c {
                b'\n' => {
                    finish(&mut cur, start, line, cont, &mut lines);
                    i += 1;
                    line = line.saturating_add(1);
                    start = line;
                    cont = 0;
                }
                b'/' if next == Some(b'*') => {
                    cur.push(b' ');
                    st = St::Block(line);
                    i += 2;
                }
                b'/' if next == Some(b'/') => {
                    cur.push(b' ');
                    st = St::LineComment;
                    i += 2;
                }
                b'"' | b'\'' => {
                    cur.push(c);
                    st = St::Str(c);
                    i += 1;
                }
                _ => {
                    cur.push(c);
                    i += 1;
                }
            },
            St::Str(q) => {
                if c == b'\n' {
                    // Unterminated literal: ends at the end of the line.
                    st = St::Code;
                } else if c == b'\\' {
                    cur.push(c);
                    i += 1;
                    if let Some(&d) = b.get(i) {
                        if d != b'\n' {
                            cur.push(d);
                            i += 1;
                        }
                    }
                } else {
                    cur.push(c);
                    i += 1;
                    if c == q {
                        st = St::Code;
                    }
                }
            }
            St::Block(_) => {
                if c == b'*' && next == Some(b'/') {
                    st = St::Code;
                    i += 2;
                } else {
                    if c == b'\n' {
                        cur.push(b'\n');
                        line = line.saturating_add(1);
                    }
                    i += 1;
                }
            }
            St::LineComment => {
                if c == b'\n' {
                    st = St::Code;
                } else {
                    i += 1;
                }
            }
        }
    }
    if let St::Block(l) = st {
        return Err((l, "unterminated comment".to_string()));
    }
    if !cur.is_empty() || cont > 0 || line != start {
        finish(&mut cur, start, line, cont, &mut lines);
    }
    Ok(lines)
}

// ---------------------------------------------------------------------------
// Macros
// ---------------------------------------------------------------------------

#[derive(Debug)]
struct Macro {
    name: Rc<str>,
    params: Vec<String>,
    variadic: bool,
    func: bool,
    body: Vec<Tok>,
}

fn parse_define(text: &str) -> Result<Macro, String> {
    let toks = tokenize(text);
    let mut i = skip_sp(&toks, 0);
    let Some(t) = toks.get(i) else {
        return Err("no macro name given in #define directive".into());
    };
    if t.kind != K::Ident {
        return Err("macro names must be identifiers".into());
    }
    if &*t.text == "defined" {
        return Err("\"defined\" cannot be used as a macro name".into());
    }
    let name = t.text.clone();
    i += 1;
    let mut params: Vec<String> = Vec::new();
    let mut variadic = false;
    let mut func = false;
    const MISSING: &str = "missing ')' in macro parameter list";
    if toks.get(i).is_some_and(|t| t.is("(")) {
        func = true;
        i += 1;
        loop {
            i = skip_sp(&toks, i);
            let Some(t) = toks.get(i) else {
                return Err(MISSING.into());
            };
            if t.is(")") && params.is_empty() {
                i += 1;
                break;
            }
            if t.is("...") {
                variadic = true;
                params.push("__VA_ARGS__".into());
                i = skip_sp(&toks, i + 1);
                if toks.get(i).is_some_and(|t| t.is(")")) {
                    i += 1;
                    break;
                }
                return Err(MISSING.into());
            }
            if t.kind != K::Ident {
                return Err(format!("expected parameter name, found \"{}\"", t.text));
            }
            if &*t.text == "__VA_ARGS__" {
                return Err("__VA_ARGS__ can not be used as a parameter name".into());
            }
            if params.iter().any(|p| *p == *t.text) {
                return Err(format!("duplicate macro parameter \"{}\"", t.text));
            }
            params.push(t.text.to_string());
            i = skip_sp(&toks, i + 1);
            if toks.get(i).is_some_and(|t| t.is("...")) {
                variadic = true;
                i = skip_sp(&toks, i + 1);
                if toks.get(i).is_some_and(|t| t.is(")")) {
                    i += 1;
                    break;
                }
                return Err(MISSING.into());
            }
            match toks.get(i) {
                None => return Err(MISSING.into()),
                Some(t) if t.is(")") => {
                    i += 1;
                    break;
                }
                Some(t) if t.is(",") => i += 1,
                Some(t) => return Err(format!("expected ',' or ')', found \"{}\"", t.text)),
            }
        }
    }
    let mut body: Vec<Tok> = Vec::new();
    for t in toks.get(i..).unwrap_or(&[]) {
        if t.is_space() {
            if body.last().is_some_and(|l| l.kind != K::Space) {
                body.push(Tok::new(K::Space, " "));
            }
        } else if t.kind == K::Ident && func {
            match params.iter().position(|p| *p == *t.text) {
                Some(idx) => {
                    let mut p = t.clone();
                    p.kind = K::Param(idx);
                    body.push(p);
                }
                None => body.push(t.clone()),
            }
        } else {
            body.push(t.clone());
        }
    }
    while body.last().is_some_and(|t| t.kind == K::Space) {
        body.pop();
    }
    let nonspace: Vec<&Tok> = body.iter().filter(|t| t.kind != K::Space).collect();
    if nonspace.first().is_some_and(|t| t.is("##")) || nonspace.last().is_some_and(|t| t.is("##")) {
        return Err("'##' cannot appear at either end of a macro expansion".into());
    }
    if func {
        for (k, t) in nonspace.iter().enumerate() {
            if t.is("#")
                && !nonspace
                    .get(k + 1)
                    .is_some_and(|n| matches!(n.kind, K::Param(_)))
            {
                return Err("'#' is not followed by a macro parameter".into());
            }
        }
    }
    Ok(Macro {
        name,
        params,
        variadic,
        func,
        body,
    })
}

// ---------------------------------------------------------------------------
// The preprocessor
// ---------------------------------------------------------------------------

struct Cond {
    kind: &'static str,
    line: u32,
    parent_active: bool,
    taken: bool,
    active: bool,
    seen_else: bool,
}

struct Pp<'o> {
    opts: &'o CppOptions,
    macros: HashMap<String, Rc<Macro>>,
    disabled: HashSet<Rc<str>>,
    out: String,
    /// Newlines swallowed by macro invocations, to re-emit after them.
    pending_nl: u32,
    /// Current physical line (for errors and `__LINE__`).
    line: u32,
    /// Presumed line = physical line + delta (changed by `#line`).
    delta: i64,
    /// Presumed file name.
    file: String,
    cur_path: Option<PathBuf>,
    nest: u32,
    budget: u64,
    budget_limit: u64,
    once: HashSet<PathBuf>,
}

type R<T> = Result<T, CppError>;

impl<'o> Pp<'o> {
    fn new(opts: &'o CppOptions) -> Self {
        Pp {
            opts,
            macros: HashMap::new(),
            disabled: HashSet::new(),
            out: String::new(),
            pending_nl: 0,
            line: 0,
            delta: 0,
            file: String::new(),
            cur_path: None,
            nest: 0,
            budget: 0,
            budget_limit: MAX_EXPANSION_TOKENS,
            once: HashSet::new(),
        }
    }

    fn presumed(&self, line: u32) -> u32 {
        (i64::from(line) + self.delta).clamp(0, i64::from(u32::MAX)) as u32
    }

    fn err_at(&self, line: u32, msg: impl Into<String>) -> CppError {
        CppError {
            file: self.file.clone(),
            line: self.presumed(line),
            message: msg.into(),
        }
    }

    fn err(&self, msg: impl Into<String>) -> CppError {
        self.err_at(self.line, msg)
    }

    fn init_macros(&mut self) -> R<()> {
        let cmd_err = |m: String| CppError {
            file: CMDLINE.into(),
            line: 0,
            message: m,
        };
        let opts = self.opts;
        for (n, v) in &opts.predefined {
            let m = parse_define(&format!("{n} {v}")).map_err(cmd_err)?;
            self.macros.insert(m.name.to_string(), Rc::new(m));
        }
        for (n, v) in &opts.defines {
            let (name, value) = match (v, n.split_once('=')) {
                (Some(v), _) => (n.as_str(), v.as_str()),
                (None, Some((a, b))) => (a, b),
                (None, None) => (n.as_str(), "1"),
            };
            let m = parse_define(&format!("{name} {value}")).map_err(cmd_err)?;
            self.macros.insert(m.name.to_string(), Rc::new(m));
        }
        for u in &opts.undefs {
            self.macros.remove(u.trim());
        }
        Ok(())
    }

    fn marker(&mut self, line: i64, file: &str) {
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.out.push('\n');
        }
        let line = line.clamp(0, i64::from(u32::MAX));
        self.out
            .push_str(&format!("# {} \"{}\"\n", line, escape_str(file)));
    }

    fn newlines(&mut self, n: u32) {
        for _ in 0..n {
            self.out.push('\n');
        }
    }

    fn process_file(&mut self, src: &str, name: &str, dir: Option<PathBuf>, depth: usize) -> R<()> {
        self.file = name.to_string();
        self.delta = 0;
        let extra = u64::try_from(src.len())
            .unwrap_or(u64::MAX)
            .saturating_mul(EXPANSION_TOKENS_PER_BYTE);
        self.budget_limit = self.budget_limit.saturating_add(extra);
        let mut rest = src;
        let mut first_line = 1;
        if src.starts_with("#!") {
            let end = src.find('\n').map_or(src.len(), |e| e + 1);
            let first = src.get(..end).unwrap_or("");
            if depth == 0 {
                self.out.push_str(first);
                if !first.ends_with('\n') {
                    self.out.push('\n');
                }
                self.marker(2, name);
            } else {
                self.marker(1, name);
                self.out.push('\n');
            }
            rest = src.get(end..).unwrap_or("");
            first_line = 2;
        } else {
            self.marker(1, name);
        }
        let lines = split_lines(rest, first_line).map_err(|(l, m)| self.err_at(l, m))?;
        let mut conds: Vec<Cond> = Vec::new();
        let mut chunk = String::new();
        let mut chunk_line = first_line;
        for ll in &lines {
            let active = conds.last().is_none_or(|c| c.active);
            if ll.text.starts_with('#') {
                if !chunk.is_empty() {
                    self.expand_chunk(&chunk, chunk_line)?;
                    chunk.clear();
                }
                self.directive(ll, &mut conds, active, &dir, depth)?;
            } else if active {
                if chunk.is_empty() {
                    chunk_line = ll.line;
                }
                chunk.push_str(&ll.text);
                for _ in 0..=ll.cont {
                    chunk.push('\n');
                }
            } else {
                self.newlines(ll.phys);
            }
        }
        if !chunk.is_empty() {
            self.expand_chunk(&chunk, chunk_line)?;
        }
        if let Some(c) = conds.last() {
            return Err(self.err_at(c.line, format!("unterminated {}", c.kind)));
        }
        Ok(())
    }

    // -----------------------------------------------------------------------
    // Directives
    // -----------------------------------------------------------------------

    fn directive(
        &mut self,
        ll: &LLine,
        conds: &mut Vec<Cond>,
        active: bool,
        dir: &Option<PathBuf>,
        depth: usize,
    ) -> R<()> {
        self.line = ll.line;
        let text = ll.text.replace('\n', " ");
        let body = text.get(1..).unwrap_or("");
        let body = body.trim_start_matches(|c: char| c.is_ascii() && is_hspace(c as u8));
        let name_len = if body.bytes().next().is_some_and(is_ident_start) {
            body.bytes().take_while(|&b| is_ident_cont(b)).count()
        } else {
            0
        };
        let name = body.get(..name_len).unwrap_or("");
        let rest = body.get(name_len..).unwrap_or("");

        match name {
            "if" | "ifdef" | "ifndef" => {
                let kind = match name {
                    "if" => "#if",
                    "ifdef" => "#ifdef",
                    _ => "#ifndef",
                };
                let v = if active {
                    match name {
                        "if" => self.eval_if(rest)?,
                        "ifdef" => self.ifdef_name(rest, name)?,
                        _ => !self.ifdef_name(rest, name)?,
                    }
                } else {
                    false
                };
                conds.push(Cond {
                    kind,
                    line: ll.line,
                    parent_active: active,
                    taken: v || !active,
                    active: active && v,
                    seen_else: false,
                });
            }
            "elif" | "elifdef" | "elifndef" => {
                let Some(c) = conds.last() else {
                    return Err(self.err(format!("#{name} without #if")));
                };
                if c.seen_else {
                    return Err(self.err(format!("#{name} after #else")));
                }
                let (taken, parent_active) = (c.taken, c.parent_active);
                let v = if !taken && parent_active {
                    match name {
                        "elif" => self.eval_if(rest)?,
                        "elifdef" => self.ifdef_name(rest, name)?,
                        _ => !self.ifdef_name(rest, name)?,
                    }
                } else {
                    false
                };
                if let Some(c) = conds.last_mut() {
                    c.active = v;
                    c.taken |= v;
                }
            }
            "else" => {
                let Some(c) = conds.last_mut() else {
                    return Err(self.err("#else without #if"));
                };
                if c.seen_else {
                    return Err(self.err("#else after #else"));
                }
                c.seen_else = true;
                c.active = c.parent_active && !c.taken;
                c.taken = true;
                c.kind = "#else";
            }
            "endif" => {
                if conds.pop().is_none() {
                    return Err(self.err("#endif without #if"));
                }
            }
            _ if !active => {}
            "" => {
                let r = rest.trim();
                if r.starts_with(|c: char| c.is_ascii_digit()) {
                    return self.line_directive(ll, r, false);
                }
                if !r.is_empty() {
                    let shown: String = r.chars().take(20).collect();
                    return Err(self.err(format!("invalid preprocessing directive #{shown}")));
                }
            }
            "define" => {
                let m = parse_define(rest).map_err(|e| self.err(e))?;
                self.macros.insert(m.name.to_string(), Rc::new(m));
            }
            "undef" => {
                let toks = tokenize(rest);
                let i = skip_sp(&toks, 0);
                match toks.get(i) {
                    None => return Err(self.err("no macro name given in #undef directive")),
                    Some(t) if t.kind != K::Ident => {
                        return Err(self.err("macro names must be identifiers"));
                    }
                    Some(t) => {
                        self.macros.remove(&*t.text);
                    }
                }
            }
            "include" | "include_next" => return self.include(ll, rest, dir, depth),
            "pragma" => {
                if rest.trim() == "once" {
                    if let Some(p) = &self.cur_path {
                        let key = p.canonicalize().unwrap_or_else(|_| p.clone());
                        self.once.insert(key);
                    }
                } else {
                    self.out.push_str(&text);
                    self.out.push('\n');
                    self.newlines(ll.phys.saturating_sub(1));
                    return Ok(());
                }
            }
            "line" => return self.line_directive(ll, rest, true),
            "error" => {
                return Err(self.err(format!("#error {}", rest.trim())));
            }
            "warning" | "ident" | "sccs" | "assert" | "unassert" => {}
            _ => {
                return Err(self.err(format!("invalid preprocessing directive #{name}")));
            }
        }
        self.newlines(ll.phys);
        Ok(())
    }

    fn ifdef_name(&self, rest: &str, dname: &str) -> R<bool> {
        let toks = tokenize(rest);
        let i = skip_sp(&toks, 0);
        match toks.get(i) {
            None => Err(self.err(format!("no macro name given in #{dname} directive"))),
            Some(t) if t.kind != K::Ident => Err(self.err("macro names must be identifiers")),
            Some(t) => Ok(self.is_defined(&t.text)),
        }
    }

    fn is_defined(&self, name: &str) -> bool {
        self.macros.contains_key(name) || name == "__LINE__" || name == "__FILE__"
    }

    fn line_directive(&mut self, ll: &LLine, rest: &str, expand: bool) -> R<()> {
        let mut toks = tokenize(rest);
        if expand {
            toks = self.expand_isolated(&toks)?;
        }
        let toks: Vec<Tok> = toks.into_iter().filter(|t| !t.is_space()).collect();
        let Some(n) = toks.first() else {
            return Err(self.err("unexpected end of line after #line"));
        };
        if n.kind != K::Number || !n.text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.err(format!(
                "\"{}\" after #line is not a positive integer",
                n.text
            )));
        }
        let num: i64 = n.text.parse().unwrap_or(i64::from(u32::MAX));
        if let Some(f) = toks.get(1) {
            if f.kind != K::Str || f.text.len() < 2 || !f.text.ends_with('"') {
                return Err(self.err(format!("invalid filename \"{}\"", f.text)));
            }
            let inner = f.text.get(1..f.text.len() - 1).unwrap_or("");
            let mut s = String::new();
            let mut esc = false;
            for c in inner.chars() {
                if esc || c != '\\' {
                    s.push(c);
                    esc = false;
                } else {
                    esc = true;
                }
            }
            self.file = s;
        }
        let next_phys = i64::from(ll.line) + i64::from(ll.phys);
        self.delta = num - next_phys;
        let file = self.file.clone();
        self.marker(num, &file);
        Ok(())
    }

    fn include(&mut self, ll: &LLine, rest: &str, dir: &Option<PathBuf>, depth: usize) -> R<()> {
        let spec = rest.trim();
        let (fname, angle) = match parse_include_spec(spec) {
            Some(x) => x,
            None => {
                let toks = tokenize(spec);
                let toks = self.expand_isolated(&toks)?;
                let mut s = String::new();
                for t in &toks {
                    if !matches!(t.kind, K::End | K::Guard | K::Placemarker) {
                        s.push_str(&t.text);
                    }
                }
                match parse_include_spec(s.trim()) {
                    Some(x) => x,
                    None => {
                        return Err(self.err("#include expects \"FILENAME\" or <FILENAME>"));
                    }
                }
            }
        };
        if fname.is_empty() {
            return Err(self.err("empty filename in #include"));
        }
        let p = Path::new(&fname);
        let mut cands: Vec<PathBuf> = Vec::new();
        if p.is_absolute() {
            cands.push(p.to_path_buf());
        } else {
            if !angle {
                cands.push(match dir {
                    Some(d) => d.join(p),
                    None => p.to_path_buf(),
                });
            }
            for d in &self.opts.include_dirs {
                cands.push(d.join(p));
            }
        }
        let Some(found) = cands.into_iter().find(|c| c.is_file()) else {
            return Err(self.err(format!("{fname}: No such file or directory")));
        };
        if depth + 1 >= MAX_INCLUDE_DEPTH {
            return Err(self.err(format!(
                "#include nested depth {} exceeds maximum of {}",
                depth + 1,
                MAX_INCLUDE_DEPTH
            )));
        }
        let key = found.canonicalize().unwrap_or_else(|_| found.clone());
        if self.once.contains(&key) {
            self.newlines(ll.phys);
            return Ok(());
        }
        let bytes =
            std::fs::read(&found).map_err(|e| self.err(format!("{}: {}", found.display(), e)))?;
        let content = String::from_utf8_lossy(&bytes).into_owned();
        let shown = found.display().to_string();
        let saved_file = std::mem::take(&mut self.file);
        let saved_delta = self.delta;
        let saved_path = self.cur_path.replace(found.clone());
        self.process_file(&content, &shown, parent_dir(&found), depth + 1)?;
        self.file = saved_file;
        self.delta = saved_delta;
        self.cur_path = saved_path;
        let back = i64::from(ll.line) + i64::from(ll.phys) + self.delta;
        let file = self.file.clone();
        self.marker(back, &file);
        Ok(())
    }

    // -----------------------------------------------------------------------
    // Macro expansion
    // -----------------------------------------------------------------------

    fn first_macro_use(&self, chunk: &str) -> Option<usize> {
        let b = chunk.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let (k, j) = lex_one(b, i);
            let j = j.clamp(i + 1, b.len());
            if k == K::Ident {
                let name = chunk.get(i..j).unwrap_or("");
                if self.macros.contains_key(name) || name == "__LINE__" || name == "__FILE__" {
                    return Some(i);
                }
            }
            i = j;
        }
        None
    }

    fn expand_chunk(&mut self, chunk: &str, first_line: u32) -> R<()> {
        let Some(pos) = self.first_macro_use(chunk) else {
            self.out.push_str(chunk);
            return Ok(());
        };
        let start = chunk
            .get(..pos)
            .and_then(|p| p.rfind('\n'))
            .map_or(0, |x| x + 1);
        let prefix = chunk.get(..start).unwrap_or("");
        self.out.push_str(prefix);
        let nls = prefix.bytes().filter(|&b| b == b'\n').count();
        self.line = first_line.saturating_add(u32::try_from(nls).unwrap_or(u32::MAX));
        let mut stack = tokenize(chunk.get(start..).unwrap_or(""));
        stack.reverse();
        let mut out = Vec::new();
        self.pending_nl = 0;
        self.expand(&mut stack, &mut out, true)?;
        self.flush_pending(&mut out);
        self.write_tokens(&out);
        Ok(())
    }

    fn flush_pending(&mut self, out: &mut Vec<Tok>) {
        if self.pending_nl > 0 {
            let nl = Tok::new(K::Newline, "\n");
            for _ in 0..self.pending_nl {
                out.push(nl.clone());
            }
            self.pending_nl = 0;
        }
    }

    fn write_tokens(&mut self, toks: &[Tok]) {
        let mut prev: Option<&Tok> = None;
        let mut guard = false;
        for t in toks {
            match t.kind {
                K::Guard => guard = true,
                K::End | K::Placemarker => {}
                K::Space | K::Newline => {
                    self.out.push_str(&t.text);
                    prev = None;
                    guard = false;
                }
                _ => {
                    if let Some(p) = prev {
                        if (guard || p.expanded || t.expanded) && would_paste(p, t) {
                            self.out.push(' ');
                        }
                    }
                    self.out.push_str(&t.text);
                    prev = Some(t);
                    guard = false;
                }
            }
        }
    }

    /// Fully macro-expand `toks` on their own (arguments, `#if`, `#include`).
    fn expand_isolated(&mut self, toks: &[Tok]) -> R<Vec<Tok>> {
        if self.nest >= MAX_MACRO_NEST {
            return Err(self.err("macro invocations nested too deeply"));
        }
        self.nest += 1;
        let mut stack: Vec<Tok> = toks.iter().rev().cloned().collect();
        let mut out = Vec::with_capacity(toks.len());
        let r = self.expand(&mut stack, &mut out, false);
        self.nest -= 1;
        r?;
        Ok(out)
    }

    fn expand(&mut self, stack: &mut Vec<Tok>, out: &mut Vec<Tok>, top: bool) -> R<()> {
        let mut depth: u32 = 0;
        while let Some(mut t) = stack.pop() {
            match t.kind {
                K::End => {
                    self.disabled.remove(&t.text);
                    depth = depth.saturating_sub(1);
                    if top {
                        out.push(Tok::new(K::Guard, ""));
                        if depth == 0 {
                            self.flush_pending(out);
                        }
                    }
                }
                K::Newline => {
                    if top {
                        self.line = self.line.saturating_add(1);
                    }
                    out.push(t);
                }
                K::Ident if !t.noexpand => {
                    let Some(m) = self.macros.get(&*t.text).cloned() else {
                        if let Some(b) = self.builtin(&t.text) {
                            if top {
                                out.push(Tok::new(K::Guard, ""));
                            }
                            out.push(b);
                            if top {
                                out.push(Tok::new(K::Guard, ""));
                            }
                        } else {
                            out.push(t);
                        }
                        continue;
                    };
                    if self.disabled.contains(&t.text) {
                        t.noexpand = true;
                        out.push(t);
                        continue;
                    }
                    let body = if m.func {
                        if !next_is_lparen(stack) {
                            out.push(t);
                            continue;
                        }
                        let args = self.collect_args(stack, &m, &mut depth, top)?;
                        self.substitute(&m, Some(args))?
                    } else {
                        self.substitute(&m, None)?
                    };
                    self.budget = self
                        .budget
                        .saturating_add(u64::try_from(body.len()).unwrap_or(u64::MAX))
                        .saturating_add(1);
                    if self.budget > self.budget_limit {
                        return Err(self.err("macro expansion too large"));
                    }
                    if top {
                        out.push(Tok::new(K::Guard, ""));
                    }
                    self.disabled.insert(m.name.clone());
                    depth += 1;
                    stack.push(Tok {
                        kind: K::End,
                        text: m.name.clone(),
                        noexpand: false,
                        expanded: false,
                    });
                    stack.extend(body.into_iter().rev());
                }
                K::Guard if !top => {}
                _ => out.push(t),
            }
        }
        Ok(())
    }

    fn builtin(&self, name: &str) -> Option<Tok> {
        let mut t = match name {
            "__LINE__" => Tok::new(K::Number, &self.presumed(self.line).to_string()),
            "__FILE__" => Tok::new(K::Str, &format!("\"{}\"", escape_str(&self.file))),
            _ => return None,
        };
        t.expanded = true;
        Some(t)
    }

    fn collect_args(
        &mut self,
        stack: &mut Vec<Tok>,
        m: &Macro,
        depth: &mut u32,
        top: bool,
    ) -> R<Vec<Vec<Tok>>> {
        let start_line = self.line;
        // Consume everything up to and including the '('.
        while let Some(t) = stack.pop() {
            match t.kind {
                K::End => {
                    self.disabled.remove(&t.text);
                    *depth = depth.saturating_sub(1);
                }
                K::Newline if top => {
                    self.pending_nl += 1;
                    self.line = self.line.saturating_add(1);
                }
                _ if t.is("(") => break,
                _ => {}
            }
        }
        let np = m.params.len();
        let mut args: Vec<Vec<Tok>> = vec![Vec::new()];
        let mut paren = 0usize;
        loop {
            let Some(t) = stack.pop() else {
                return Err(self.err_at(
                    start_line,
                    format!("unterminated argument list invoking macro \"{}\"", m.name),
                ));
            };
            match t.kind {
                K::End => {
                    self.disabled.remove(&t.text);
                    *depth = depth.saturating_sub(1);
                    continue;
                }
                K::Guard => continue,
                K::Newline => {
                    if top {
                        self.pending_nl += 1;
                        self.line = self.line.saturating_add(1);
                    }
                    if let Some(a) = args.last_mut() {
                        a.push(Tok::new(K::Space, " "));
                    }
                    continue;
                }
                _ => {}
            }
            if t.is("(") {
                paren += 1;
            } else if t.is(")") {
                if paren == 0 {
                    break;
                }
                paren -= 1;
            } else if t.is(",") && paren == 0 && !(m.variadic && args.len() >= np) {
                args.push(Vec::new());
                continue;
            }
            if let Some(a) = args.last_mut() {
                a.push(t);
            }
        }
        let mut args: Vec<Vec<Tok>> = args.into_iter().map(trim_toks).collect();
        let given = args.len();
        if np == 0 {
            if given == 1 && args[0].is_empty() {
                args.clear();
            } else {
                return Err(self.err_at(
                    start_line,
                    format!(
                        "macro \"{}\" passed {} arguments, but takes just 0",
                        m.name, given
                    ),
                ));
            }
        } else if m.variadic {
            if given + 1 < np {
                return Err(self.err_at(
                    start_line,
                    format!(
                        "macro \"{}\" requires at least {} arguments, but only {} given",
                        m.name,
                        np - 1,
                        given
                    ),
                ));
            }
            if given < np {
                args.push(Vec::new());
            }
        } else if given < np {
            return Err(self.err_at(
                start_line,
                format!(
                    "macro \"{}\" requires {} arguments, but only {} given",
                    m.name, np, given
                ),
            ));
        } else if given > np {
            return Err(self.err_at(
                start_line,
                format!(
                    "macro \"{}\" passed {} arguments, but takes just {}",
                    m.name, given, np
                ),
            ));
        }
        Ok(args)
    }

    fn substitute(&mut self, m: &Macro, args: Option<Vec<Vec<Tok>>>) -> R<Vec<Tok>> {
        let raw = args.unwrap_or_default();
        let mut expanded: Vec<Option<Vec<Tok>>> = vec![None; raw.len()];
        let body = &m.body;
        let mut result: Vec<Tok> = Vec::with_capacity(body.len());
        let mut paste_next = false;
        let next_ns = |i: usize| -> Option<usize> {
            let mut j = i;
            while j < body.len() && body[j].kind == K::Space {
                j += 1;
            }
            (j < body.len()).then_some(j)
        };
        let mut i = 0;
        while i < body.len() {
            let t = &body[i];
            if t.kind == K::Space {
                if !paste_next {
                    result.push(t.clone());
                }
                i += 1;
                continue;
            }
            if m.func && t.is("#") {
                if let Some(j) = next_ns(i + 1) {
                    if let K::Param(p) = body[j].kind {
                        let s = stringify(raw.get(p).map_or(&[][..], |v| &v[..]));
                        emit(&mut result, &mut paste_next, vec![Tok::new(K::Str, &s)]);
                        i = j + 1;
                        continue;
                    }
                }
            }
            if t.is("##") {
                let j = next_ns(i + 1);
                let va = m.params.len().checked_sub(1);
                if let (Some(j), Some(va)) = (j, va) {
                    let last_is_comma = result
                        .iter()
                        .rev()
                        .find(|t| t.kind != K::Space)
                        .is_some_and(|t| t.is(","));
                    if m.variadic && body[j].kind == K::Param(va) && last_is_comma {
                        let arg = raw.get(va).cloned().unwrap_or_default();
                        let trim = |r: &mut Vec<Tok>| {
                            while r.last().is_some_and(|t| t.kind == K::Space) {
                                r.pop();
                            }
                        };
                        trim(&mut result);
                        if arg.is_empty() {
                            result.pop();
                            trim(&mut result);
                        } else {
                            result.extend(arg);
                        }
                        i = j + 1;
                        continue;
                    }
                }
                while result.last().is_some_and(|t| t.kind == K::Space) {
                    result.pop();
                }
                paste_next = true;
                i += 1;
                continue;
            }
            if let K::Param(p) = t.kind {
                let next_paste = next_ns(i + 1).is_some_and(|j| body[j].is("##"));
                let toks = if paste_next || next_paste {
                    let a = raw.get(p).cloned().unwrap_or_default();
                    if a.is_empty() {
                        vec![Tok::new(K::Placemarker, "")]
                    } else {
                        a
                    }
                } else {
                    if expanded.get(p).is_some_and(|e| e.is_none()) {
                        let a = raw.get(p).cloned().unwrap_or_default();
                        let e = self.expand_isolated(&a)?;
                        if let Some(slot) = expanded.get_mut(p) {
                            *slot = Some(e);
                        }
                    }
                    expanded.get(p).and_then(|e| e.clone()).unwrap_or_default()
                };
                emit(&mut result, &mut paste_next, toks);
            } else {
                emit(&mut result, &mut paste_next, vec![t.clone()]);
            }
            i += 1;
        }
        result.retain(|t| t.kind != K::Placemarker);
        for t in &mut result {
            t.expanded = true;
        }
        Ok(result)
    }

    // -----------------------------------------------------------------------
    // #if expressions
    // -----------------------------------------------------------------------

    fn eval_if(&mut self, rest: &str) -> R<bool> {
        let toks = tokenize(rest);
        let mut pre: Vec<Tok> = Vec::with_capacity(toks.len());
        let mut i = 0;
        while i < toks.len() {
            let t = &toks[i];
            if t.kind == K::Ident && &*t.text == "defined" {
                let (v, next) = self.parse_defined(&toks, i + 1)?;
                let mut n = Tok::new(K::Number, if v { "1" } else { "0" });
                n.noexpand = true;
                pre.push(n);
                i = next;
            } else {
                pre.push(t.clone());
                i += 1;
            }
        }
        let expanded = self.expand_isolated(&pre)?;
        let toks: Vec<Tok> = expanded
            .into_iter()
            .filter(|t| !t.is_space() && !matches!(t.kind, K::End | K::Guard | K::Placemarker))
            .collect();
        if toks.is_empty() {
            return Err(self.err("#if with no expression"));
        }
        let mut p = ExprParser {
            toks: &toks,
            pos: 0,
            depth: 0,
            pp: self,
        };
        let v = p.parse_comma(true).map_err(|e| self.err(e))?;
        if let Some(t) = toks.get(p.pos) {
            return Err(self.err(format!(
                "missing binary operator before token \"{}\"",
                t.text
            )));
        }
        Ok(v.v != 0)
    }

    /// Parse the operand of `defined` starting at `i`; returns the value and
    /// the index after the operand.
    fn parse_defined(&self, toks: &[Tok], i: usize) -> R<(bool, usize)> {
        let j = skip_sp(toks, i);
        match toks.get(j) {
            Some(t) if t.kind == K::Ident => Ok((self.is_defined(&t.text), j + 1)),
            Some(t) if t.is("(") => {
                let k = skip_sp(toks, j + 1);
                match toks.get(k) {
                    Some(n) if n.kind == K::Ident => {
                        let l = skip_sp(toks, k + 1);
                        if toks.get(l).is_some_and(|t| t.is(")")) {
                            Ok((self.is_defined(&n.text), l + 1))
                        } else {
                            Err(self.err("missing ')' after \"defined\""))
                        }
                    }
                    _ => Err(self.err("operator \"defined\" requires an identifier")),
                }
            }
            _ => Err(self.err("operator \"defined\" requires an identifier")),
        }
    }
}

fn emit(result: &mut Vec<Tok>, paste_next: &mut bool, toks: Vec<Tok>) {
    if !*paste_next {
        result.extend(toks);
        return;
    }
    *paste_next = false;
    let mut it = toks.into_iter();
    let Some(r) = it.next() else {
        return;
    };
    match result.pop() {
        None => result.push(r),
        Some(l) => {
            if l.kind == K::Placemarker {
                result.push(r);
            } else if r.kind == K::Placemarker {
                result.push(l);
            } else {
                let s = format!("{}{}", l.text, r.text);
                result.extend(tokenize(&s));
            }
        }
    }
    result.extend(it);
}

fn next_is_lparen(stack: &[Tok]) -> bool {
    for t in stack.iter().rev() {
        match t.kind {
            K::Space | K::Newline | K::End | K::Guard => continue,
            _ => return t.is("("),
        }
    }
    false
}

/// Parse `"file"` or `<file>`; returns the name and whether it was `<...>`.
fn parse_include_spec(s: &str) -> Option<(String, bool)> {
    let (close, angle) = match s.as_bytes().first()? {
        b'"' => ('"', false),
        b'<' => ('>', true),
        _ => return None,
    };
    let inner = s.get(1..)?;
    let end = inner.find(close)?;
    Some((inner.get(..end)?.to_string(), angle))
}

// ---------------------------------------------------------------------------
// Expression evaluation
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
struct Val {
    v: u64,
    uns: bool,
}

impl Val {
    fn signed(v: i64) -> Val {
        Val {
            v: v as u64,
            uns: false,
        }
    }
    fn truth(b: bool) -> Val {
        Val::signed(i64::from(b))
    }
}

struct ExprParser<'a, 'b, 'o> {
    toks: &'a [Tok],
    pos: usize,
    depth: u32,
    pp: &'b Pp<'o>,
}

fn binop_prec(t: &Tok) -> Option<u8> {
    if t.kind != K::Punct {
        return None;
    }
    Some(match &*t.text {
        "||" => 1,
        "&&" => 2,
        "|" => 3,
        "^" => 4,
        "&" => 5,
        "==" | "!=" => 6,
        "<" | ">" | "<=" | ">=" => 7,
        "<<" | ">>" => 8,
        "+" | "-" => 9,
        "*" | "/" | "%" => 10,
        _ => return None,
    })
}

impl ExprParser<'_, '_, '_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn peek_is(&self, p: &str) -> bool {
        self.peek().is_some_and(|t| t.is(p))
    }

    fn parse_comma(&mut self, eval: bool) -> Result<Val, String> {
        let mut v = self.parse_cond(eval)?;
        while self.peek_is(",") {
            self.pos += 1;
            v = self.parse_cond(eval)?;
        }
        Ok(v)
    }

    fn parse_cond(&mut self, eval: bool) -> Result<Val, String> {
        let c = self.parse_bin(1, eval)?;
        if !self.peek_is("?") {
            return Ok(c);
        }
        self.pos += 1;
        self.enter()?;
        let t = self.parse_comma(eval && c.v != 0)?;
        if !self.peek_is(":") {
            return Err("'?' without following ':'".into());
        }
        self.pos += 1;
        let f = self.parse_cond(eval && c.v == 0)?;
        self.depth -= 1;
        let uns = t.uns || f.uns;
        let v = if c.v != 0 { t.v } else { f.v };
        Ok(Val { v, uns })
    }

    fn enter(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_EXPR_DEPTH {
            return Err("#if expression nested too deeply".into());
        }
        Ok(())
    }

    fn parse_bin(&mut self, min_prec: u8, eval: bool) -> Result<Val, String> {
        let mut lhs = self.parse_unary(eval)?;
        while let Some(op) = self.peek() {
            let Some(prec) = binop_prec(op) else { break };
            if prec < min_prec {
                break;
            }
            let op = op.text.clone();
            self.pos += 1;
            lhs = match &*op {
                "&&" => {
                    let r = self.parse_bin(prec + 1, eval && lhs.v != 0)?;
                    Val::truth(lhs.v != 0 && r.v != 0)
                }
                "||" => {
                    let r = self.parse_bin(prec + 1, eval && lhs.v == 0)?;
                    Val::truth(lhs.v != 0 || r.v != 0)
                }
                _ => {
                    let r = self.parse_bin(prec + 1, eval)?;
                    apply_binop(&op, lhs, r, eval)?
                }
            };
        }
        Ok(lhs)
    }

    fn parse_unary(&mut self, eval: bool) -> Result<Val, String> {
        self.enter()?;
        let r = self.parse_unary_inner(eval);
        self.depth -= 1;
        r
    }

    fn parse_unary_inner(&mut self, eval: bool) -> Result<Val, String> {
        let Some(t) = self.peek() else {
            return Err(
                match self.pos.checked_sub(1).and_then(|p| self.toks.get(p)) {
                    Some(prev) => format!("operator '{}' has no right operand", prev.text),
                    None => "#if with no expression".into(),
                },
            );
        };
        if t.kind == K::Punct {
            match &*t.text {
                "+" | "-" | "~" | "!" => {
                    let op = t.text.clone();
                    self.pos += 1;
                    let v = self.parse_unary(eval)?;
                    return Ok(match &*op {
                        "+" => v,
                        "-" => Val {
                            v: v.v.wrapping_neg(),
                            uns: v.uns,
                        },
                        "~" => Val {
                            v: !v.v,
                            uns: v.uns,
                        },
                        _ => Val::truth(v.v == 0),
                    });
                }
                "(" => {
                    self.pos += 1;
                    if self.peek_is(")") {
                        return Err("missing expression between '(' and ')'".into());
                    }
                    let v = self.parse_comma(eval)?;
                    if !self.peek_is(")") {
                        return Err("missing ')' in expression".into());
                    }
                    self.pos += 1;
                    return Ok(v);
                }
                _ => {}
            }
        }
        match t.kind {
            K::Number => {
                let v = parse_number(&t.text)?;
                self.pos += 1;
                Ok(v)
            }
            K::Char => {
                let v = parse_char(&t.text)?;
                self.pos += 1;
                Ok(v)
            }
            K::Ident => {
                if &*t.text == "defined" {
                    let (v, next) = self
                        .pp
                        .parse_defined(self.toks, self.pos + 1)
                        .map_err(|e| e.message)?;
                    self.pos = next;
                    return Ok(Val::truth(v));
                }
                self.pos += 1;
                Ok(Val::signed(0))
            }
            _ => Err(format!(
                "token \"{}\" is not valid in preprocessor expressions",
                t.text
            )),
        }
    }
}

fn apply_binop(op: &str, a: Val, b: Val, eval: bool) -> Result<Val, String> {
    let uns = a.uns || b.uns;
    let (x, y) = (a.v, b.v);
    let (sx, sy) = (x as i64, y as i64);
    let v = match op {
        "*" => x.wrapping_mul(y),
        "/" | "%" => {
            if y == 0 {
                if eval {
                    return Err("division by zero in #if".into());
                }
                0
            } else if uns {
                if op == "/" {
                    x / y
                } else {
                    x % y
                }
            } else if op == "/" {
                sx.wrapping_div(sy) as u64
            } else {
                sx.wrapping_rem(sy) as u64
            }
        }
        "+" => x.wrapping_add(y),
        "-" => x.wrapping_sub(y),
        "<<" | ">>" => {
            return Ok(Val {
                v: shift(a, b, op == "<<"),
                uns: a.uns,
            })
        }
        "<" | ">" | "<=" | ">=" => {
            let ord = if uns { x.cmp(&y) } else { sx.cmp(&sy) };
            let r = match op {
                "<" => ord.is_lt(),
                ">" => ord.is_gt(),
                "<=" => ord.is_le(),
                _ => ord.is_ge(),
            };
            return Ok(Val::truth(r));
        }
        "==" => return Ok(Val::truth(x == y)),
        "!=" => return Ok(Val::truth(x != y)),
        "&" => x & y,
        "|" => x | y,
        "^" => x ^ y,
        _ => return Err(format!("invalid operator \"{op}\" in #if")),
    };
    Ok(Val { v, uns })
}

fn shift(a: Val, b: Val, left: bool) -> u64 {
    let amount: i64 = if b.uns {
        if b.v > 64 {
            64
        } else {
            b.v as i64
        }
    } else {
        b.v as i64
    };
    let (left, amount) = if amount < 0 {
        (!left, amount.checked_neg().unwrap_or(i64::MAX))
    } else {
        (left, amount)
    };
    let negative = !a.uns && (a.v as i64) < 0;
    if amount >= 64 {
        return if !left && negative { u64::MAX } else { 0 };
    }
    let amount = amount as u32;
    if left {
        a.v << amount
    } else if a.uns {
        a.v >> amount
    } else {
        ((a.v as i64) >> amount) as u64
    }
}

fn parse_number(text: &str) -> Result<Val, String> {
    let b = text.as_bytes();
    let mut end = b.len();
    while end > 0 && matches!(b[end - 1], b'u' | b'U' | b'l' | b'L') {
        end -= 1;
    }
    let suffix = text.get(end..).unwrap_or("");
    let digits = text.get(..end).unwrap_or("");
    let ucount = suffix.bytes().filter(|c| matches!(c, b'u' | b'U')).count();
    let lcount = suffix.len() - ucount;
    if ucount > 1 || lcount > 2 {
        return Err(format!("invalid suffix \"{suffix}\" on integer constant"));
    }
    let lower = digits.to_ascii_lowercase();
    let (radix, ds, kind) = if let Some(h) = lower.strip_prefix("0x") {
        (16u32, h, "hexadecimal")
    } else if let Some(bn) = lower.strip_prefix("0b") {
        (2, bn, "binary")
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..], "octal")
    } else {
        (10, lower.as_str(), "decimal")
    };
    if radix != 16 && (ds.contains('.') || ds.contains('e')) {
        return Err("floating constant in preprocessor expression".into());
    }
    if radix == 16 && (ds.contains('.') || ds.contains('p')) {
        return Err("floating constant in preprocessor expression".into());
    }
    if ds.is_empty() && radix != 8 {
        return Err(format!(
            "invalid suffix \"{}\" on integer constant",
            &text[1..]
        ));
    }
    let mut v: u64 = 0;
    for (k, c) in ds.chars().enumerate() {
        let Some(d) = c.to_digit(radix) else {
            if (radix == 8 || radix == 2) && c.is_ascii_digit() {
                return Err(format!("invalid digit \"{c}\" in {kind} constant"));
            }
            let bad: String = ds.chars().skip(k).collect();
            return Err(format!(
                "invalid suffix \"{bad}{suffix}\" on integer constant"
            ));
        };
        v = v.wrapping_mul(u64::from(radix)).wrapping_add(u64::from(d));
    }
    Ok(Val {
        v,
        uns: ucount > 0 || v > i64::MAX as u64,
    })
}

fn parse_char(text: &str) -> Result<Val, String> {
    let b = text.as_bytes();
    if b.len() < 2 || b[b.len() - 1] != b'\'' || b.first() != Some(&b'\'') {
        return Err("missing terminating ' character".into());
    }
    let inner = &b[1..b.len() - 1];
    let mut bytes: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < inner.len() {
        let c = inner[i];
        i += 1;
        if c != b'\\' {
            bytes.push(c);
            continue;
        }
        let Some(&e) = inner.get(i) else {
            bytes.push(b'\\');
            break;
        };
        i += 1;
        let v = match e {
            b'n' => b'\n',
            b't' => b'\t',
            b'r' => b'\r',
            b'a' => 7,
            b'b' => 8,
            b'f' => 12,
            b'v' => 11,
            b'e' | b'E' => 27,
            b'0'..=b'7' => {
                let mut v = u32::from(e - b'0');
                let mut n = 1;
                while n < 3 && i < inner.len() && (b'0'..=b'7').contains(&inner[i]) {
                    v = v * 8 + u32::from(inner[i] - b'0');
                    i += 1;
                    n += 1;
                }
                (v & 0xff) as u8
            }
            b'x' => {
                let mut v: u32 = 0;
                while i < inner.len() && inner[i].is_ascii_hexdigit() {
                    v = (v << 4) | char::from(inner[i]).to_digit(16).unwrap_or(0);
                    v &= 0xfff;
                    i += 1;
                }
                (v & 0xff) as u8
            }
            other => other,
        };
        bytes.push(v);
    }
    match bytes.len() {
        0 => Err("empty character constant".into()),
        1 => Ok(Val::signed(i64::from(bytes[0] as i8))),
        _ => {
            let mut v: u32 = 0;
            for &c in &bytes {
                v = (v << 8) | u32::from(c);
            }
            Ok(Val::signed(i64::from(v as i32)))
        }
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    fn pp(src: &str) -> Result<String, CppError> {
        preprocess(src, "t.d", &CppOptions::default())
    }

    fn ok(src: &str) -> String {
        match pp(src) {
            Ok(s) => s,
            Err(e) => panic!("unexpected error: {e}\n--- source:\n{src}"),
        }
    }

    fn err(src: &str) -> CppError {
        match pp(src) {
            Ok(s) => panic!("expected an error, got:\n{s}"),
            Err(e) => e,
        }
    }

    /// Output lines (without markers) as they'd be numbered by a consumer
    /// honouring `# N "file"` markers: returns (file, line, text) tuples.
    fn numbered(out: &str) -> Vec<(String, u32, String)> {
        let mut v = Vec::new();
        let mut file = String::new();
        let mut line = 1u32;
        for l in out.lines() {
            if let Some(rest) = l.strip_prefix("# ") {
                let mut it = rest.splitn(2, ' ');
                if let Some(Ok(n)) = it.next().map(|n| n.parse::<u32>()) {
                    line = n;
                    // the name is a C string literal: `\\` and `\"` stand for `\` and `"`
                    let quoted = it.next().unwrap_or("").trim_matches('"');
                    file = quoted
                        .replace("\\\\", "\u{0}")
                        .replace("\\\"", "\"")
                        .replace('\u{0}', "\\");
                    continue;
                }
            }
            v.push((file.clone(), line, l.to_string()));
            line += 1;
        }
        v
    }

    fn line_of(out: &str, needle: &str) -> (String, u32) {
        numbered(out)
            .into_iter()
            .find(|(_, _, t)| t.contains(needle))
            .map(|(f, l, _)| (f, l))
            .unwrap_or_else(|| panic!("{needle:?} not found in:\n{out}"))
    }

    #[test]
    fn marker_at_start() {
        let out = ok("BEGIN {}\n");
        assert!(out.starts_with("# 1 \"t.d\"\n"), "{out}");
        assert_eq!(line_of(&out, "BEGIN"), ("t.d".into(), 1));
    }

    #[test]
    fn lines_preserved_across_comment_and_skipped_block() {
        let src = "/*\n * multi\n * line\n */\nfirst;\n#if 0\nskipped1;\nskipped2;\n#else\nkept;\n#endif\n#define X 1\nlast X;\n";
        let out = ok(src);
        assert_eq!(line_of(&out, "first"), ("t.d".into(), 5));
        assert_eq!(line_of(&out, "kept"), ("t.d".into(), 10));
        assert_eq!(line_of(&out, "last 1"), ("t.d".into(), 13));
        assert!(!out.contains("skipped"));
        assert!(!out.contains("multi"));
    }

    #[test]
    fn inline_comment_keeps_following_lines() {
        let out = ok("a /* x\ny */ b\nc\n");
        assert_eq!(line_of(&out, "a"), ("t.d".into(), 1));
        assert_eq!(line_of(&out, "b"), ("t.d".into(), 2));
        assert_eq!(line_of(&out, "c"), ("t.d".into(), 3));
        let out = ok("x = 1; // comment\ny\n");
        assert!(out.contains("x = 1;"));
        assert!(!out.contains("comment"));
        assert_eq!(line_of(&out, "y"), ("t.d".into(), 2));
    }

    #[test]
    fn continuation_lines() {
        let out = ok("#define A 1 + \\\n 2\nA;\nz\n");
        assert!(out.contains("1 + 2;"), "{out}");
        assert_eq!(line_of(&out, "1 + 2"), ("t.d".into(), 3));
        assert_eq!(line_of(&out, "z"), ("t.d".into(), 4));
    }

    #[test]
    fn object_macros() {
        let out = ok("#define MAXVAL 10 * 15\n/MAXVAL > 5/\n");
        assert!(out.contains("/10 * 15 > 5/"), "{out}");
    }

    #[test]
    fn function_macros_nested() {
        let src = "#define SQ(x) ((x) * (x))\n#define ADD(a, b) (a + b)\n#define TWO 2\nv = ADD(SQ(TWO), SQ(ADD(1, 3)));\n";
        let out = ok(src);
        assert!(
            out.contains("v = (((2) * (2)) + (((1 + 3)) * ((1 + 3))));"),
            "{out}"
        );
    }

    #[test]
    fn function_macro_without_parens_is_not_expanded() {
        let out = ok("#define f(x) x+1\nf; f (2);\n");
        assert!(out.contains("f; 2+1;"), "{out}");
    }

    #[test]
    fn self_reference_not_reexpanded() {
        let out = ok("#define foo foo + 1\n#define a b\n#define b a\nfoo; a; b;\n");
        assert!(out.contains("foo + 1; a; b;"), "{out}");
        let out = ok("#define f(x) x f\nf(1)(2);\n");
        assert!(out.contains("1 f(2);"), "{out}");
    }

    #[test]
    fn stringify_and_paste() {
        let src = "#define S(x) #x\n#define CAT(a, b) a ## b\n#define XCAT(a, b) CAT(a, b)\n#define N 7\nS(a  \"q\\n\"  b); CAT(foo, bar); XCAT(v, N); CAT(x, ); S();\n";
        let out = ok(src);
        assert!(out.contains("\"a \\\"q\\\\n\\\" b\";"), "{out}");
        assert!(out.contains("foobar;"), "{out}");
        assert!(out.contains("v7;"), "{out}");
        assert!(out.contains("x;"), "{out}");
        assert!(out.contains("\"\";"), "{out}");
    }

    #[test]
    fn variadic_macros() {
        let src = "#define P(fmt, ...) printf(fmt, __VA_ARGS__)\n#define Q(fmt, args...) printf(fmt , ## args)\n#define R(...) f(__VA_ARGS__)\nP(\"%d %d\", 1, 2); Q(\"x\"); Q(\"%d\", 3); R(); R(a, (b, c));\n";
        let out = ok(src);
        assert!(out.contains("printf(\"%d %d\", 1, 2);"), "{out}");
        assert!(out.contains("printf(\"x\");"), "{out}");
        assert!(out.contains("printf(\"%d\" ,3);"), "{out}");
        assert!(out.contains("f();"), "{out}");
        assert!(out.contains("f(a, (b, c));"), "{out}");
    }

    #[test]
    fn multiline_invocation_keeps_numbering() {
        let src = "#define F(a, b) a + b\nx = F(1,\n 2);\ny;\n";
        let out = ok(src);
        assert_eq!(line_of(&out, "x = 1 + 2"), ("t.d".into(), 2));
        assert_eq!(line_of(&out, "y;"), ("t.d".into(), 4));
    }

    #[test]
    fn no_expansion_in_strings_chars_or_d_specials() {
        let src = "#define VALUE 5\n#define target oops\nprintf(\"VALUE %d\\n\", VALUE); c = 'VALUE'; pid$target; $1; `VALUE; @a[VALUE];\n";
        let out = ok(src);
        assert!(out.contains("printf(\"VALUE %d\\n\", 5);"), "{out}");
        assert!(out.contains("'VALUE'"), "{out}");
        assert!(out.contains("pid$target;"), "{out}");
        assert!(out.contains("$1;"), "{out}");
        assert!(out.contains("`5;"), "{out}");
        assert!(out.contains("@a[5];"), "{out}");
    }

    #[test]
    fn probe_descriptions_survive_expansion() {
        let out = ok("#define P syscall::open:entry\n#define T tick-10ms\nP, T, fbt::*:return\n");
        assert!(
            out.contains("syscall::open:entry, tick-10ms, fbt::*:return"),
            "{out}"
        );
    }

    #[test]
    fn no_accidental_token_paste() {
        let out = ok("#define NEG -1\n#define E\nx = -NEG; y = -E-; z = a/E*b;\n");
        assert!(out.contains("x = - -1;"), "{out}");
        assert!(out.contains("y = - -;"), "{out}");
        assert!(!out.contains("/*"), "{out}");
    }

    #[test]
    fn pragma_passthrough() {
        let src = "#pragma D option quiet\n#pragma\tident\t\"%Z%%M%\t%I%\t%E% SMI\"\n#define quiet loud\nBEGIN\n";
        let out = ok(src);
        assert!(out.contains("\n#pragma D option quiet\n"), "{out}");
        assert!(
            out.contains("\n#pragma\tident\t\"%Z%%M%\t%I%\t%E% SMI\"\n"),
            "{out}"
        );
        assert_eq!(line_of(&out, "BEGIN"), ("t.d".into(), 4));
        let out = ok("#if 0\n#pragma D option quiet\n#endif\n");
        assert!(!out.contains("pragma"), "{out}");
    }

    #[test]
    fn shebang_passthrough() {
        let out = ok("#!/usr/sbin/dtrace -Cs\nBEGIN\n");
        assert!(
            out.starts_with("#!/usr/sbin/dtrace -Cs\n# 2 \"t.d\"\n"),
            "{out}"
        );
        assert_eq!(line_of(&out, "BEGIN"), ("t.d".into(), 2));
    }

    #[test]
    fn indented_directive_is_text() {
        let out = ok("\t#define VALUE 5\nVALUE\n");
        assert!(out.contains("\t#define VALUE 5\n"), "{out}");
        assert!(out.contains("\nVALUE\n"), "{out}");
    }

    #[test]
    fn conditionals() {
        let src = "#define FLAG 1\n#if defined (FLAG) && !defined(NOPE)\nA\n#elif 1\nB\n#else\nC\n#endif\n#ifdef NOPE\nD\n#elif FLAG == 1\nE\n#endif\n#ifndef NOPE\nF\n#endif\n#if 0\n#if 1\nG\n#else\nH\n#endif\n#elif 0\nI\n#else\nJ\n#endif\n";
        let out = ok(src);
        for k in ["A", "E", "F", "J"] {
            assert!(out.lines().any(|l| l == k), "{k} missing:\n{out}");
        }
        for k in ["B", "C", "D", "G", "H", "I"] {
            assert!(!out.lines().any(|l| l == k), "{k} present:\n{out}");
        }
    }

    fn if_true(expr: &str) -> bool {
        let out = ok(&format!("#if {expr}\nYES\n#else\nNO\n#endif\n"));
        out.lines().any(|l| l == "YES")
    }

    #[test]
    fn if_expressions() {
        assert!(if_true("1 + 2 * 3 == 7"));
        assert!(if_true("(1 + 2) * 3 == 9"));
        assert!(if_true("0x10 == 16 && 010 == 8 && 0b11 == 3"));
        assert!(if_true("10UL == 10 && 5u + 1L == 6"));
        assert!(if_true("1 << 4 == 16 && 256 >> 4 == 16"));
        assert!(if_true("(7 & 3) == 3 && (4 | 1) == 5 && (6 ^ 3) == 5"));
        assert!(if_true("~0 == -1 && !0 && -(-3) == 3 && +2 == 2"));
        assert!(if_true("1 ? 2 : 0"));
        assert!(!if_true("0 ? 2 : 0"));
        assert!(if_true("(0 ? 1 : 2) == 2"));
        assert!(if_true(
            "'a' == 97 && '\\n' == 10 && '\\x41' == 65 && '\\101' == 65"
        ));
        assert!(if_true("UNDEFINED_THING == 0"));
        assert!(if_true("-1 < 0"));
        assert!(!if_true("-1 < 0u"));
        assert!(if_true("7 / 2 == 3 && 7 % 2 == 1 && -7 / 2 == -3"));
        assert!(if_true("!(0 && (1 / 0))"));
        assert!(if_true("1 || (1 / 0)"));
        assert!(if_true("3 >= 3 && 3 <= 3 && 4 > 3 && 2 != 3"));
        assert!(!if_true("defined FOO"));
        assert!(if_true("defined __LINE__"));
        let out = ok("#define A B\n#define B 3\n#if A == 3\nYES\n#endif\n");
        assert!(out.lines().any(|l| l == "YES"));
        let out = ok("#define F(x) (x * 2)\n#if F(4) == 8\nYES\n#endif\n");
        assert!(out.lines().any(|l| l == "YES"));
    }

    #[test]
    fn if_expression_errors() {
        for e in [
            "1 / 0",
            "",
            "1 +",
            "(1",
            "()",
            "1 2",
            "\"s\"",
            "1.5",
            "1 ? 2",
            "!defined",
            "defined(",
            "defined(X",
            "09",
            "1abc",
        ] {
            let src = format!("#if {e}\n#endif\n");
            assert!(pp(&src).is_err(), "expected error for #if {e}");
        }
    }

    #[test]
    fn cond_errors() {
        let e = err("#if 1\nA\n");
        assert_eq!(e.line, 1);
        assert!(e.message.contains("unterminated #if"), "{e}");
        let e = err("x\n#ifdef X\n");
        assert!(e.message.contains("unterminated #ifdef"), "{e}");
        assert_eq!(e.line, 2);
        assert!(err("#ifndef X\n").message.contains("unterminated #ifndef"));
        assert!(err("#if 1\n#else\n").message.contains("unterminated #else"));
        let e = err("#if 1\n#else\n#else\n#endif\n");
        assert!(e.message.contains("#else after #else"), "{e}");
        assert_eq!(e.line, 3);
        assert!(err("#if 1\n#else\n#elif 1\n#endif\n")
            .message
            .contains("#elif after #else"));
        assert!(err("#endif\n").message.contains("#endif without #if"));
        assert!(err("#else\n").message.contains("#else without #if"));
        assert!(err("#elif 1\n").message.contains("#elif without #if"));
        assert!(err("#ifdef\n#endif\n").message.contains("no macro name"));
        assert!(err("#ifdef 3\n#endif\n").message.contains("identifiers"));
    }

    #[test]
    fn other_errors() {
        let e = err("a\n/* open\n\n");
        assert!(e.message.contains("unterminated comment"), "{e}");
        assert_eq!(e.line, 2);
        let e = err("#define F(a) a\nx = F(1,\n2\n");
        assert!(e.message.contains("unterminated argument list"), "{e}");
        assert_eq!(e.line, 2);
        assert!(err("#define F(a, b) a\nF(1);\n")
            .message
            .contains("requires 2"));
        assert!(err("#define F(a) a\nF(1, 2);\n")
            .message
            .contains("passed 2"));
        assert!(err("#define F() 1\nF(1);\n")
            .message
            .contains("takes just 0"));
        assert!(err("#define\n").message.contains("no macro name"));
        assert!(err("#define 1abc 2\n").message.contains("identifiers"));
        assert!(err("#define defined 2\n").message.contains("defined"));
        assert!(err("#define F(a 1\n")
            .message
            .contains("expected ',' or ')'"));
        assert!(err("#define F(a, a) 1\n").message.contains("duplicate"));
        assert!(err("#define F(a) # b\n").message.contains("'#'"));
        assert!(err("#define F(a) ## a\n").message.contains("'##'"));
        assert!(err("#undef\n").message.contains("no macro name"));
        let e = err("\n#error stop right here\n");
        assert_eq!(e.line, 2);
        assert!(e.message.contains("#error stop right here"), "{e}");
        assert_eq!(e.to_string(), "t.d:2: #error stop right here");
        let e = err("#foo bar\n");
        assert!(
            e.message.contains("invalid preprocessing directive #foo"),
            "{e}"
        );
        assert!(err("#include \"does/not/exist.h\"\n")
            .message
            .contains("No such file"));
        assert!(err("#include <does_not_exist.h>\n")
            .message
            .contains("No such file"));
        assert!(err("#include nothing\n").message.contains("expects"));
        // Errors are not reported inside skipped blocks.
        ok("#if 0\n#foo\n#error no\n#define\n#endif\n");
    }

    #[test]
    fn misc_directives() {
        let out = ok("#\n#warning careful\n#ident \"x\"\nA\n");
        assert_eq!(line_of(&out, "A"), ("t.d".into(), 4));
        let out = ok("#line 100 \"other.d\"\nA\nB __LINE__ __FILE__\n");
        assert_eq!(line_of(&out, "A"), ("other.d".into(), 100));
        assert!(out.contains("B 101 \"other.d\""), "{out}");
        let e = err("#line 50\n#error x\n");
        assert_eq!(e.line, 50);
        assert!(err("#line abc\n").message.contains("positive integer"));
        let out = ok("# 33 \"gen.d\"\nA\n");
        assert_eq!(line_of(&out, "A"), ("gen.d".into(), 33));
        assert!(err("#33abc\n").message.contains("positive integer"));
        let e = err("#define F(a, b) a\n\nF(1,\n\n 2, 3)\n");
        assert_eq!(e.line, 3, "{e}");
        assert!(e.message.contains("passed 3"), "{e}");
    }

    #[test]
    fn undef_and_redefine() {
        let out = ok("#define A 1\nA\n#undef A\nA\n#define A 2\nA\n");
        let lines: Vec<_> = numbered(&out).into_iter().map(|(_, _, t)| t).collect();
        assert_eq!(lines, vec!["", "1", "", "A", "", "2"]);
    }

    #[test]
    fn options_define_undef() {
        let opts = CppOptions {
            predefined: vec![
                ("__SUNW_D".into(), "1".into()),
                ("_LP64".into(), "1".into()),
            ],
            defines: vec![
                ("FOO".into(), None),
                ("BAR".into(), Some("x + 1".into())),
                ("BAZ=7".into(), None),
                ("SQ(x)".into(), Some("((x)*(x))".into())),
            ],
            undefs: vec!["_LP64".into()],
            include_dirs: vec![],
        };
        let out = preprocess(
            "__SUNW_D FOO BAR BAZ SQ(2)\n#ifdef _LP64\nLP\n#endif\n",
            "t.d",
            &opts,
        )
        .unwrap();
        assert!(out.contains("1 1 x + 1 7 ((2)*(2))"), "{out}");
        assert!(!out.contains("LP"), "{out}");
        let bad = CppOptions {
            defines: vec![("1x".into(), None)],
            ..Default::default()
        };
        assert!(preprocess("", "t.d", &bad).is_err());
    }

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dtx-cpp-{}-{}", tag, std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn include_files_and_markers() {
        let d = tmpdir("inc");
        std::fs::create_dir_all(d.join("sys")).unwrap();
        std::fs::write(d.join("defs.h"), "/* hdr */\n#define VALUE 42\ninc_line2\n").unwrap();
        std::fs::write(d.join("sys/angle.h"), "#define ANG 9\n").unwrap();
        let main = d.join("main.d");
        let src = "first\n#include \"defs.h\"\nafter VALUE\n#include <sys/angle.h>\nlast ANG\n";
        std::fs::write(&main, src).unwrap();
        let name = main.display().to_string();
        let opts = CppOptions {
            include_dirs: vec![d.clone()],
            ..Default::default()
        };
        let out = preprocess(src, &name, &opts).unwrap();
        let defs = d.join("defs.h").display().to_string();
        assert_eq!(line_of(&out, "first"), (name.clone(), 1));
        assert_eq!(line_of(&out, "inc_line2"), (defs.clone(), 3));
        assert_eq!(line_of(&out, "after 42"), (name.clone(), 3));
        assert_eq!(line_of(&out, "last 9"), (name.clone(), 5));
        // the marker writes the name as a C string (Windows' backslashes doubled)
        let quoted = |s: &str| s.replace('\\', "\\\\");
        assert!(
            out.contains(&format!("# 1 \"{}\"\n", quoted(&defs))),
            "{out}"
        );
        assert!(
            out.contains(&format!("# 3 \"{}\"\n", quoted(&name))),
            "{out}"
        );
        // <...> does not search the including file's directory.
        assert!(preprocess("#include <defs.h>\n", &name, &CppOptions::default()).is_err());
        // Macro-named include.
        let out = preprocess("#define H \"defs.h\"\n#include H\nVALUE\n", &name, &opts).unwrap();
        assert!(out.contains("\n42\n"), "{out}");
        // Unterminated conditional inside an include reports the include.
        std::fs::write(d.join("bad.h"), "#if 1\n").unwrap();
        let e = preprocess("#include \"bad.h\"\n", &name, &opts).unwrap_err();
        assert!(
            e.file.ends_with("bad.h") && e.message.contains("unterminated"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn include_recursion_limit_and_guards() {
        let d = tmpdir("rec");
        std::fs::write(d.join("self.h"), "#include \"self.h\"\n").unwrap();
        let name = d.join("m.d").display().to_string();
        let e = preprocess("#include \"self.h\"\n", &name, &CppOptions::default()).unwrap_err();
        assert!(e.message.contains("nested"), "{e}");
        std::fs::write(
            d.join("g.h"),
            "#ifndef G_H\n#define G_H\n#include \"g.h\"\nguarded\n#endif\n",
        )
        .unwrap();
        let out = preprocess(
            "#include \"g.h\"\n#include \"g.h\"\n",
            &name,
            &CppOptions::default(),
        )
        .unwrap();
        assert_eq!(out.matches("guarded").count(), 1, "{out}");
        std::fs::write(d.join("o.h"), "#pragma once\nonce_body\n").unwrap();
        let out = preprocess(
            "#include \"o.h\"\n#include \"o.h\"\n",
            &name,
            &CppOptions::default(),
        )
        .unwrap();
        assert_eq!(out.matches("once_body").count(), 1, "{out}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn suite_preprocessor_tests() {
        let dir = Path::new("/work/suite/tests/dtrace/tst/common/preprocessor");
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let mut n = 0;
        for e in rd.flatten() {
            let p = e.path();
            let fname = p
                .file_name()
                .and_then(|f| f.to_str())
                .unwrap_or("")
                .to_string();
            if !fname.ends_with(".d") {
                continue;
            }
            let src = std::fs::read_to_string(&p).unwrap();
            let r = preprocess(&src, &p.display().to_string(), &CppOptions::default());
            // err.D_* tests fail later, in the D compiler, not in cpp.
            if fname.starts_with("err.") && !fname.starts_with("err.D_") {
                assert!(r.is_err(), "{fname} should fail");
            } else {
                let out = r.unwrap_or_else(|e| panic!("{fname}: {e}"));
                assert!(out.contains("#pragma D option quiet"), "{fname}");
                if fname.starts_with("tst.") {
                    assert!(
                        !out.contains("VALUE") || fname == "tst.precondi.d",
                        "{fname}"
                    );
                }
            }
            n += 1;
        }
        assert!(n >= 20);
        let tab = dir.join("err.D_PRAGCTL_INVAL.tabdefine.d");
        if let Ok(src) = std::fs::read_to_string(&tab) {
            let out = preprocess(&src, "x.d", &CppOptions::default()).unwrap();
            assert!(out.contains("\t#define VALUE 5\n"));
        }
    }

    #[test]
    fn suite_expected_values() {
        let dir = Path::new("/work/suite/tests/dtrace/tst/common/preprocessor");
        let cases = [
            ("tst.ifdef.d", "10"),
            ("tst.ifndef.d", "5"),
            ("tst.ifnotdef.d", "5"),
            ("tst.logicaland.d", "0"),
            ("tst.mulor.d", "0"),
            ("tst.preexpifelse.d", "5"),
        ];
        for (f, v) in cases {
            let Ok(src) = std::fs::read_to_string(dir.join(f)) else {
                continue;
            };
            let out = preprocess(&src, f, &CppOptions::default()).unwrap();
            assert!(out.contains(&format!("\\n\", {v});")), "{f}:\n{out}");
        }
    }

    #[test]
    fn never_panics_on_garbage() {
        // Simple xorshift PRNG: deterministic "random" inputs.
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let alphabet: &[&str] = &[
            "#",
            "define",
            "if",
            "ifdef",
            "elif",
            "else",
            "endif",
            "include",
            "undef",
            " ",
            "\n",
            "\\\n",
            "(",
            ")",
            ",",
            "\"",
            "'",
            "/*",
            "*/",
            "//",
            "##",
            "...",
            "F",
            "G",
            "x",
            "1",
            "0x",
            "defined",
            "__VA_ARGS__",
            "?",
            ":",
            "-",
            "<<",
            "/",
            "é",
            "\t",
            "line",
            "pragma",
            "error",
            "$1",
            "`",
            "@",
        ];
        let base = "#define F(a, ...) a ## __VA_ARGS__ #a\n#define G F(G, x)\n";
        for _ in 0..3000 {
            let len = (next() % 40) as usize;
            let mut s = String::from(base);
            for _ in 0..len {
                s.push_str(alphabet[(next() % alphabet.len() as u64) as usize]);
            }
            let _ = pp(&s);
        }
        for _ in 0..500 {
            let len = (next() % 64) as usize;
            let s: String = (0..len)
                .map(|_| char::from_u32((next() % 0x250) as u32).unwrap_or('?'))
                .collect();
            let _ = pp(&s);
        }
        let src = "#!/x\n/* c */\n#define F(a, b) a ## b #a\n#if defined(F) && (1 ? 2 : 3)\nF(\"x\", 'y') \"str\n#elif 1\n#endif\n";
        for (i, _) in src.char_indices() {
            let _ = pp(&src[..i]);
        }
        // Deep nesting is reported, not a stack overflow.
        let deep = format!(
            "#if {}1{}\n#endif\n",
            "(".repeat(100_000),
            ")".repeat(100_000)
        );
        assert!(pp(&deep).is_err());
        let deep = format!("#if {}1\n#endif\n", "!".repeat(100_000));
        assert!(pp(&deep).is_err());
        let deep = format!(
            "#define f(x) x\n{}1{}\n",
            "f(".repeat(1_000),
            ")".repeat(1_000)
        );
        assert!(pp(&deep).is_err());
        // Exponential expansion is cut off.
        let mut bomb = String::from("#define a0 x x\n");
        for i in 1..40 {
            bomb.push_str(&format!("#define a{i} a{} a{}\n", i - 1, i - 1));
        }
        bomb.push_str("a39\n");
        assert!(pp(&bomb).is_err());
    }

    #[test]
    fn a_megabyte_of_input_expands_every_line() {
        // (its speed is measured by benches/parse.rs, `cpp`)
        let mut src = String::from("#define VAL 5\n#define F(a) ((a) + VAL)\n");
        let mut clauses = 0;
        while src.len() < 1_000_000 {
            src.push_str("syscall::read:entry /pid == $target/ { @[probefunc] = count(); x = F(VAL); } /* c */\n");
            src.push_str("tick-1s { printf(\"%d\\n\", 1); }\n");
            clauses += 1;
        }
        let out = pp(&src).unwrap();
        assert_eq!(out.matches("x = ((5) + 5);").count(), clauses);
        assert!(!out.contains("F(") && !out.contains("/* c */"));
        // every line is kept (plus the line marker), so diagnostics keep their line numbers
        assert_eq!(out.lines().count(), src.lines().count() + 1);
    }
}
