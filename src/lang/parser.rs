//! The D parser: recursive descent over the lexer, one function per grammar production of
//! DTrace's `dt_grammar.y`.
//!
//! Why not lalrpop: D's grammar needs the lexer hack (an identifier is a type name or not
//! depending on the typedefs seen so far, with DTrace's look-ahead heuristics) and a lexer whose
//! state (probe description vs expression) is chosen by the parser token by token. A hand-written
//! parser drives the modal lexer directly and reports DTrace's own messages for each situation.

use std::collections::HashSet;

/// The names that parse as types (typedefs and tags), looked up for every identifier.
pub type TypeNames = HashSet<String, crate::fasthash::FastBuild>;

use super::ast::*;
use super::diag::{derr, DResult, Diagnostic};
use super::lexer::{Lexer, MacroEnv, Mode, Token};
use super::token::{Keyword, Punct, Tok};

/// Where the program text comes from; decides a few of DTrace's messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// A script file (`-s`): line numbers are reported.
    File,
    /// A probe description or program from `-n`/`-P`/...: no line numbers.
    String,
}

/// Called for each control line as it is read (pragmas take effect at once, as in DTrace).
pub type PragmaHook<'h> = dyn FnMut(&[String], u32) -> DResult<()> + 'h;

pub struct Parser<'a, 'h> {
    lx: Lexer<'a>,
    /// Up to two tokens of look-ahead, with the mode they were lexed in.
    ahead: std::collections::VecDeque<Token>,
    pub type_names: TypeNames,
    /// The type library's tags (`struct _GUID`), which a program may define again once.
    pub library_tags: TypeNames,
    kind: SourceKind,
    pragma_hook: Option<Box<PragmaHook<'h>>>,
    pragmas: Vec<Pragma>,
    /// The line of the last token handed out (error location).
    last_line: u32,
    /// Current nesting of expressions (parentheses, unary operators, calls, subscripts).
    depth: u32,
}

/// Deepest expression nesting accepted (DTrace's parser stack is bounded too).
const MAX_NESTING: u32 = 1000;

fn is_type_start_kw(k: Keyword) -> bool {
    use Keyword::*;
    matches!(
        k,
        Char | Const
            | Double
            | Enum
            | Float
            | Int
            | Long
            | Restrict
            | Short
            | Signed
            | String
            | Struct
            | Union
            | Unsigned
            | Userland
            | Void
            | Volatile
    )
}

impl<'a, 'h> Parser<'a, 'h> {
    pub fn new(src: &'a str, kind: SourceKind, macros: MacroEnv) -> Self {
        Parser {
            lx: Lexer::new(src, macros),
            ahead: std::collections::VecDeque::new(),
            type_names: TypeNames::default(),
            library_tags: TypeNames::default(),
            kind,
            pragma_hook: None,
            pragmas: Vec::new(),
            last_line: 1,
            depth: 0,
        }
    }

    pub fn with_pragma_hook(mut self, hook: Box<PragmaHook<'h>>) -> Self {
        self.pragma_hook = Some(hook);
        self
    }

    pub fn lexer(&self) -> &Lexer<'a> {
        &self.lx
    }

    fn line_for(&self, line: u32) -> u32 {
        match self.kind {
            SourceKind::File => line,
            SourceKind::String => 0,
        }
    }

    fn err(&self, tag: &'static str, line: u32, msg: impl Into<String>) -> Diagnostic {
        derr(tag, self.line_for(line), msg)
    }

    /// Lexer errors carry a raw line; drop it for string sources.
    fn fix(&self, mut d: Diagnostic) -> Diagnostic {
        d.line = self.line_for(d.line);
        d
    }

    fn lex(&mut self, mode: Mode) -> DResult<Token> {
        loop {
            let t = self.lx.next(mode).map_err(|d| self.fix(d))?;
            if let Tok::Control(words) = &t.tok {
                let words = words.clone();
                self.control(words, t.line)?;
                continue;
            }
            return Ok(t);
        }
    }

    fn control(&mut self, words: Vec<String>, line: u32) -> DResult<()> {
        // `# 12 "file"` and `#line 12 "file"` reset the line counter of the lexer.
        let (is_line, rest) = match words.first().map(String::as_str) {
            Some(w) if w.bytes().all(|c| c.is_ascii_digit()) && !w.is_empty() => (true, &words[..]),
            Some("line") => (true, &words[1..]),
            _ => (false, &words[..]),
        };
        if is_line {
            let n = rest.first().and_then(|w| w.parse::<u32>().ok());
            let file_ok = rest.get(1).is_none_or(|f| f.starts_with('"'));
            let state_ok = rest.get(2).is_none_or(|s| s.parse::<u32>().is_ok());
            match n {
                Some(n) if file_ok && state_ok => {
                    self.lx.line = n;
                    return Ok(());
                }
                _ => {
                    return Err(self.err(
                        "D_PRAGMA_MALFORM",
                        line,
                        "malformed #line <line> [ [\"file\"] state ]",
                    ));
                }
            }
        }
        if let Some(hook) = self.pragma_hook.as_mut() {
            hook(&words, line).map_err(|mut d| {
                d.line = match self.kind {
                    SourceKind::File => d.line,
                    SourceKind::String => 0,
                };
                d
            })?;
        }
        // `#pragma D option defaultargs` holds for the `$n` that follow it, as `-x defaultargs`
        if words.len() == 4 && words[1..] == ["D", "option", "defaultargs"] {
            self.lx.macros.defaultargs = true;
        }
        self.pragmas.push(Pragma { words, line });
        Ok(())
    }

    fn peek(&mut self, mode: Mode) -> DResult<&Token> {
        if self.ahead.is_empty() {
            let t = self.lex(mode)?;
            self.ahead.push_back(t);
        }
        Ok(&self.ahead[0])
    }

    fn peek2(&mut self, mode: Mode) -> DResult<&Token> {
        self.peek(mode)?;
        if self.ahead.len() < 2 {
            let t = self.lex(mode)?;
            self.ahead.push_back(t);
        }
        Ok(&self.ahead[1])
    }

    fn bump(&mut self, mode: Mode) -> DResult<Token> {
        let t = if self.ahead.is_empty() {
            self.lex(mode)?
        } else {
            self.ahead
                .pop_front()
                .unwrap_or_else(|| unreachable!("checked non-empty"))
        };
        self.last_line = t.line;
        Ok(t)
    }

    fn at_punct(&mut self, p: Punct) -> DResult<bool> {
        Ok(matches!(self.peek(Mode::Expr)?.tok, Tok::Punct(q) if q == p))
    }

    fn eat_punct(&mut self, p: Punct) -> DResult<bool> {
        if self.at_punct(p)? {
            self.bump(Mode::Expr)?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn at_kw(&mut self, k: Keyword) -> DResult<bool> {
        Ok(matches!(self.peek(Mode::Expr)?.tok, Tok::Kw(q) if q == k))
    }

    /// `syntax error near "<token>"`, DTrace's generic parse error.
    fn syntax_error(&mut self) -> Diagnostic {
        let (line, near) = match self.ahead.front() {
            Some(t) => (t.line, self.near_text(t)),
            None => (self.last_line, " near end of input".to_string()),
        };
        self.err("D_SYNTAX", line, format!("syntax error{near}"))
    }

    fn near_text(&self, t: &Token) -> String {
        match &t.tok {
            Tok::Eof => " near end of input".to_string(),
            _ => {
                let text = self.lx.text(t);
                let text = text.split('\n').next().unwrap_or("");
                format!(" near \"{text}\"")
            }
        }
    }

    fn expect_punct(&mut self, p: Punct) -> DResult<Token> {
        if self.at_punct(p)? {
            self.bump(Mode::Expr)
        } else {
            Err(self.syntax_error())
        }
    }

    fn expect_ident(&mut self) -> DResult<(String, u32)> {
        let t = self.peek(Mode::Expr)?.clone();
        match t.tok {
            Tok::Ident(s) => {
                self.bump(Mode::Expr)?;
                Ok((s.to_string(), t.line))
            }
            _ => Err(self.syntax_error()),
        }
    }

    /// Whether `name` names a type here (DTrace's `id_or_type`, with its look-ahead rules).
    fn is_type_name(&self, name: &str) -> bool {
        if self.type_names.contains(name) {
            return true;
        }
        // a scoped name (``D`int``, ``genunix`kthread_t``) names the type after the scope
        match name.rfind('`') {
            Some(i) if i + 1 < name.len() => {
                let base = &name[i + 1..];
                // ``pid`_POINT``: a type of the target's PDBs; one they lack (or with no
                // target) is a type the checker then refuses with why, not a syntax error
                if crate::lang::target_types::pid_scoped(name).is_some() {
                    return true;
                }
                // ``nt`_GUID``: a bare tag after a scope names the struct or union, as
                // Microsoft's scripts spell kernel types
                self.type_names.contains(base)
                    // ``nt`_RTL_USER_PROCESS_PARAMETERS``: spelled as Windows' kernel types are
                    // (`_` and capitals), a type the checker then refuses with its reason,
                    // not a syntax error
                    || (crate::lang::kernel::kernel_scope(name).is_some()
                        && base.len() > 1
                        && base.starts_with('_')
                        && base
                            .bytes()
                            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_'))
                    || Keyword::lookup(base).is_some_and(is_type_start_kw)
                    || self.type_names.contains(&format!("struct {base}"))
                    || self.type_names.contains(&format!("union {base}"))
            }
            _ => false,
        }
    }

    fn ident_is_tname(&mut self, name: &str) -> bool {
        if !self.is_type_name(name) {
            return false;
        }
        // DTrace: a type name followed by `++`, `--`, `=` (not `==`) or `[` is an identifier.
        let (c0, c1) = self.lx.peek_bytes2();
        !matches!(
            (c0, c1),
            (Some(b'+'), Some(b'+')) | (Some(b'-'), Some(b'-')) | (Some(b'['), _)
        ) && (c0 != Some(b'=') || c1 == Some(b'='))
    }

    /// True when the next token (in expression mode) begins a type name.
    fn at_type_start(&mut self) -> DResult<bool> {
        let t = self.peek(Mode::Expr)?.clone();
        Ok(match &t.tok {
            Tok::Kw(k) => is_type_start_kw(*k),
            Tok::Ident(s) => {
                // only the first look-ahead token may use the byte heuristic
                if self.ahead.len() == 1 {
                    self.ident_is_tname(s)
                } else {
                    self.is_type_name(s)
                }
            }
            _ => false,
        })
    }

    // ---------------------------------------------------------------- program

    /// The next top-level item, or `None` at the end of the input.
    pub fn next_item(&mut self) -> DResult<Option<Item>> {
        let t = self.peek(Mode::Clause)?.clone();
        match &t.tok {
            Tok::Eof => Ok(None),
            Tok::Kw(_) => {
                self.ahead.clear();
                self.lx_reset(&t);
                self.external_declaration().map(Some)
            }
            Tok::Pspec(text) => {
                if !text.contains(':') {
                    let prefix = match text.find('*') {
                        Some(i) if i > 0 => &text[..i],
                        _ => &text[..],
                    };
                    if self.is_type_name(prefix) {
                        self.ahead.clear();
                        self.lx_reset(&t);
                        return self.external_declaration().map(Some);
                    }
                }
                self.probe_definition().map(|c| Some(Item::Clause(c)))
            }
            Tok::Punct(Punct::LBrace) | Tok::Punct(Punct::Slash) => {
                // a clause with no probe description
                self.ahead.clear();
                Err(self.err(
                    "D_SYNTAX",
                    t.line,
                    format!("syntax error near \"{}\"", self.lx.text(&t)),
                ))
            }
            _ => self.probe_definition().map(|c| Some(Item::Clause(c))),
        }
    }

    /// Line of the end of input (where whole-program errors are reported).
    pub fn end_line(&self) -> u32 {
        self.line_for(self.lx.line)
    }

    /// Which `$n` operands the program referenced.
    pub fn args_used(&self) -> Vec<bool> {
        self.lx.args_used.clone()
    }

    /// The control lines read so far.
    pub fn take_pragmas(&mut self) -> Vec<Pragma> {
        std::mem::take(&mut self.pragmas)
    }

    pub fn parse_program(mut self) -> DResult<(Program, Vec<Pragma>, Vec<bool>)> {
        let mut items = Vec::new();
        while let Some(item) = self.next_item()? {
            items.push(item);
        }
        let used = self.args_used();
        let pragmas = self.take_pragmas();
        Ok((Program { items }, pragmas, used))
    }

    fn lx_reset(&mut self, t: &Token) {
        self.lx.reset_to(t.start, t.line);
    }

    fn probe_definition(&mut self) -> DResult<Clause> {
        let mut probes = Vec::new();
        loop {
            let t = self.bump(Mode::Clause)?;
            match t.tok {
                Tok::Pspec(text) => probes.push(ProbeSpec::Name {
                    text: text.to_string(),
                    line: self.line_for(t.line),
                }),
                Tok::Int { value, .. } => probes.push(ProbeSpec::Id {
                    id: value,
                    line: self.line_for(t.line),
                }),
                _ => {
                    self.ahead.push_front(t);
                    return Err(self.syntax_error());
                }
            }
            let n = self.peek(Mode::Clause)?.clone();
            if n.tok == Tok::Punct(Punct::Comma) {
                self.bump(Mode::Clause)?;
                continue;
            }
            break;
        }
        let first_line = match probes.first() {
            Some(ProbeSpec::Name { line, .. }) | Some(ProbeSpec::Id { line, .. }) => *line,
            None => 0,
        };
        // the look-ahead token was lexed at clause scope; relex it as an expression token
        if let Some(t) = self.ahead.front().cloned() {
            self.ahead.clear();
            self.lx_reset(&t);
        }
        let t = self.peek(Mode::Expr)?.clone();
        match t.tok {
            Tok::Punct(Punct::LBrace) => {
                self.bump(Mode::Expr)?;
                let body = self.statement_list()?;
                self.expect_punct(Punct::RBrace)?;
                Ok(Clause {
                    probes,
                    predicate: None,
                    body: Some(body),
                    line: first_line,
                })
            }
            Tok::Punct(Punct::Slash) => {
                self.bump(Mode::Expr)?;
                let pred = self.expression()?;
                let e = self.peek(Mode::Expr)?.clone();
                if e.tok != Tok::EndPred {
                    return Err(self.syntax_error());
                }
                self.bump(Mode::Expr)?;
                if !self.at_punct(Punct::LBrace)? {
                    return Err(self.err(
                        "D_SYNTAX",
                        pred.line,
                        "expected actions { } following probe description and predicate",
                    ));
                }
                self.bump(Mode::Expr)?;
                let body = self.statement_list()?;
                self.expect_punct(Punct::RBrace)?;
                Ok(Clause {
                    probes,
                    predicate: Some(pred),
                    body: Some(body),
                    line: first_line,
                })
            }
            Tok::Eof if self.kind == SourceKind::String => Ok(Clause {
                probes,
                predicate: None,
                body: None,
                line: first_line,
            }),
            Tok::Eof => Err(self.err(
                "D_SYNTAX",
                t.line,
                "expected predicate and/or actions following probe description",
            )),
            _ => Err(self.syntax_error()),
        }
    }

    fn statement_list(&mut self) -> DResult<Vec<Stmt>> {
        let mut v = Vec::new();
        loop {
            if self.at_punct(Punct::RBrace)? || self.peek(Mode::Expr)?.tok == Tok::Eof {
                return Ok(v);
            }
            if self.eat_punct(Punct::Semi)? {
                v.push(Stmt::Empty);
                continue;
            }
            if self.at_kw(Keyword::If)? {
                v.push(self.if_statement()?);
                continue;
            }
            let e = self.expression()?;
            if self.eat_punct(Punct::Semi)? {
                v.push(Stmt::Expr(e));
                continue;
            }
            if self.at_punct(Punct::RBrace)? {
                v.push(Stmt::Expr(e));
                return Ok(v);
            }
            return Err(self.syntax_error());
        }
    }

    fn statement_or_block(&mut self) -> DResult<Vec<Stmt>> {
        if self.eat_punct(Punct::LBrace)? {
            let body = self.statement_list()?;
            self.expect_punct(Punct::RBrace)?;
            return Ok(body);
        }
        if self.eat_punct(Punct::Semi)? {
            return Ok(vec![Stmt::Empty]);
        }
        if self.at_kw(Keyword::If)? {
            return Ok(vec![self.if_statement()?]);
        }
        let e = self.expression()?;
        self.expect_punct(Punct::Semi)?;
        Ok(vec![Stmt::Expr(e)])
    }

    fn if_statement(&mut self) -> DResult<Stmt> {
        let t = self.bump(Mode::Expr)?; // if
        self.expect_punct(Punct::LParen)?;
        let cond = self.expression()?;
        self.expect_punct(Punct::RParen)?;
        let then = self.statement_or_block()?;
        let otherwise = if self.at_kw(Keyword::Else)? {
            self.bump(Mode::Expr)?;
            Some(self.statement_or_block()?)
        } else {
            None
        };
        Ok(Stmt::If {
            cond,
            then,
            otherwise,
            line: self.line_for(t.line),
        })
    }

    // ---------------------------------------------------------------- expressions

    pub fn expression(&mut self) -> DResult<Expr> {
        let mut e = self.assignment()?;
        while self.at_punct(Punct::Comma)? {
            let t = self.bump(Mode::Expr)?;
            let r = self.assignment()?;
            e = Expr::new(
                ExprKind::Binary(BinOp::Comma, Box::new(e), Box::new(r)),
                self.line_for(t.line),
            );
        }
        Ok(e)
    }

    fn assign_op(p: Punct) -> Option<AssignOp> {
        Some(match p {
            Punct::Assign => None,
            Punct::MulAssign => Some(BinOp::Mul),
            Punct::DivAssign => Some(BinOp::Div),
            Punct::ModAssign => Some(BinOp::Mod),
            Punct::AddAssign => Some(BinOp::Add),
            Punct::SubAssign => Some(BinOp::Sub),
            Punct::ShlAssign => Some(BinOp::Shl),
            Punct::ShrAssign => Some(BinOp::Shr),
            Punct::AndAssign => Some(BinOp::BitAnd),
            Punct::XorAssign => Some(BinOp::BitXor),
            Punct::OrAssign => Some(BinOp::BitOr),
            _ => return None,
        })
    }

    pub fn assignment(&mut self) -> DResult<Expr> {
        self.depth += 1;
        let r = self.assignment_inner();
        self.depth -= 1;
        r
    }

    fn too_deep(&mut self) -> Diagnostic {
        let line = self.ahead.front().map(|t| t.line).unwrap_or(self.last_line);
        self.err(
            "D_SYNTAX",
            line,
            format!("syntax error: expression nested more than {MAX_NESTING} levels deep"),
        )
    }

    fn assignment_inner(&mut self) -> DResult<Expr> {
        if self.depth > MAX_NESTING {
            return Err(self.too_deep());
        }
        let lhs = self.conditional()?;
        let t = self.peek(Mode::Expr)?.clone();
        if let Tok::Punct(p) = t.tok {
            if let Some(op) = Self::assign_op(p) {
                if !is_unary_form(&lhs) {
                    return Err(self.syntax_error());
                }
                self.bump(Mode::Expr)?;
                let rhs = self.assignment()?;
                return Ok(Expr::new(
                    ExprKind::Assign(op, Box::new(lhs), Box::new(rhs)),
                    self.line_for(t.line),
                ));
            }
        }
        Ok(lhs)
    }

    fn conditional(&mut self) -> DResult<Expr> {
        let c = self.binary(0)?;
        if self.at_punct(Punct::Question)? {
            let t = self.bump(Mode::Expr)?;
            let a = self.expression()?;
            self.expect_punct(Punct::Colon)?;
            let b = self.conditional()?;
            return Ok(Expr::new(
                ExprKind::Ternary(Box::new(c), Box::new(a), Box::new(b)),
                self.line_for(t.line),
            ));
        }
        Ok(c)
    }

    fn binop_of(tok: &Tok) -> Option<(BinOp, u8)> {
        let Tok::Punct(p) = tok else { return None };
        Some(match p {
            Punct::OrOr => (BinOp::Or, 1),
            Punct::XorXor => (BinOp::Xor, 2),
            Punct::AndAnd => (BinOp::And, 3),
            Punct::Pipe => (BinOp::BitOr, 4),
            Punct::Caret => (BinOp::BitXor, 5),
            Punct::Amp => (BinOp::BitAnd, 6),
            Punct::Eq => (BinOp::Eq, 7),
            Punct::Ne => (BinOp::Ne, 7),
            Punct::Lt => (BinOp::Lt, 8),
            Punct::Gt => (BinOp::Gt, 8),
            Punct::Le => (BinOp::Le, 8),
            Punct::Ge => (BinOp::Ge, 8),
            Punct::Shl => (BinOp::Shl, 9),
            Punct::Shr => (BinOp::Shr, 9),
            Punct::Plus => (BinOp::Add, 10),
            Punct::Minus => (BinOp::Sub, 10),
            Punct::Star => (BinOp::Mul, 11),
            Punct::Slash => (BinOp::Div, 11),
            Punct::Percent => (BinOp::Mod, 11),
            _ => return None,
        })
    }

    /// Precedence climbing over C's binary operators (all left-associative).
    fn binary(&mut self, min_prec: u8) -> DResult<Expr> {
        let mut lhs = self.cast()?;
        loop {
            let t = self.peek(Mode::Expr)?.clone();
            let Some((op, prec)) = Self::binop_of(&t.tok) else {
                break;
            };
            if prec <= min_prec {
                break;
            }
            self.bump(Mode::Expr)?;
            let rhs = self.binary(prec)?;
            lhs = Expr::new(
                ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                self.line_for(t.line),
            );
        }
        Ok(lhs)
    }

    fn cast(&mut self) -> DResult<Expr> {
        self.depth += 1;
        let r = if self.depth > MAX_NESTING {
            Err(self.too_deep())
        } else {
            self.cast_inner()
        };
        self.depth -= 1;
        r
    }

    fn cast_inner(&mut self) -> DResult<Expr> {
        if self.at_punct(Punct::LParen)? {
            let t2 = self.peek2(Mode::Expr)?.clone();
            let is_type = match &t2.tok {
                Tok::Kw(k) => is_type_start_kw(*k),
                Tok::Ident(s) => self.is_type_name(s),
                _ => false,
            };
            if is_type {
                let t = self.bump(Mode::Expr)?;
                let tn = self.type_name()?;
                self.expect_punct(Punct::RParen)?;
                let e = self.cast()?;
                return Ok(Expr::new(
                    ExprKind::Cast(Box::new(tn), Box::new(e)),
                    self.line_for(t.line),
                ));
            }
        }
        self.unary()
    }

    fn unary(&mut self) -> DResult<Expr> {
        self.depth += 1;
        let r = if self.depth > MAX_NESTING {
            Err(self.too_deep())
        } else {
            self.unary_inner()
        };
        self.depth -= 1;
        r
    }

    fn unary_inner(&mut self) -> DResult<Expr> {
        let t = self.peek(Mode::Expr)?.clone();
        let line = self.line_for(t.line);
        let op = match &t.tok {
            Tok::Punct(Punct::Inc) => {
                self.bump(Mode::Expr)?;
                let e = self.unary()?;
                return Ok(Expr::new(ExprKind::Unary(UnOp::PreInc, Box::new(e)), line));
            }
            Tok::Punct(Punct::Dec) => {
                self.bump(Mode::Expr)?;
                let e = self.unary()?;
                return Ok(Expr::new(ExprKind::Unary(UnOp::PreDec, Box::new(e)), line));
            }
            Tok::Punct(Punct::Amp) => UnOp::AddrOf,
            Tok::Punct(Punct::Star) => UnOp::Deref,
            Tok::Punct(Punct::Plus) => UnOp::Plus,
            Tok::Punct(Punct::Minus) => UnOp::Neg,
            Tok::Punct(Punct::Tilde) => UnOp::BitNot,
            Tok::Punct(Punct::Bang) => UnOp::Not,
            Tok::Kw(Keyword::Sizeof) => {
                self.bump(Mode::Expr)?;
                if self.at_punct(Punct::LParen)? {
                    let t2 = self.peek2(Mode::Expr)?.clone();
                    let is_type = match &t2.tok {
                        Tok::Kw(k) => is_type_start_kw(*k),
                        Tok::Ident(s) => self.is_type_name(s),
                        _ => false,
                    };
                    if is_type {
                        self.bump(Mode::Expr)?;
                        let tn = self.type_name()?;
                        self.expect_punct(Punct::RParen)?;
                        return Ok(Expr::new(ExprKind::SizeofType(Box::new(tn)), line));
                    }
                }
                let e = self.unary()?;
                return Ok(Expr::new(ExprKind::SizeofExpr(Box::new(e)), line));
            }
            Tok::Kw(Keyword::Stringof) => {
                self.bump(Mode::Expr)?;
                let e = self.unary()?;
                return Ok(Expr::new(ExprKind::Stringof(Box::new(e)), line));
            }
            _ => return self.postfix(),
        };
        self.bump(Mode::Expr)?;
        let e = self.cast()?;
        Ok(Expr::new(ExprKind::Unary(op, Box::new(e)), line))
    }

    fn member_name(&mut self) -> DResult<String> {
        let t = self.peek(Mode::Expr)?.clone();
        match t.tok {
            Tok::Ident(s) => {
                self.bump(Mode::Expr)?;
                Ok(s.to_string())
            }
            Tok::Kw(
                k @ (Keyword::Probe
                | Keyword::Provider
                | Keyword::SelfKw
                | Keyword::String
                | Keyword::Stringof
                | Keyword::Userland
                | Keyword::Xlate
                | Keyword::Translator),
            ) => {
                self.bump(Mode::Expr)?;
                Ok(keyword_text(k).to_string())
            }
            _ => Err(self.syntax_error()),
        }
    }

    fn postfix(&mut self) -> DResult<Expr> {
        let mut e = self.primary()?;
        loop {
            let t = self.peek(Mode::Expr)?.clone();
            let line = self.line_for(t.line);
            match t.tok {
                Tok::Punct(Punct::LBracket) => {
                    self.bump(Mode::Expr)?;
                    let keys = self.argument_list(Punct::RBracket)?;
                    if keys.is_empty() {
                        return Err(self.syntax_error());
                    }
                    self.expect_punct(Punct::RBracket)?;
                    e = Expr::new(
                        ExprKind::Index {
                            base: Box::new(e),
                            keys,
                        },
                        line,
                    );
                }
                Tok::Punct(Punct::LParen) => {
                    if !matches!(e.kind, ExprKind::Ident(_)) {
                        return Err(self.err(
                            "D_FUNC_IDENT",
                            t.line,
                            "function designator is not of function type",
                        ));
                    }
                    self.bump(Mode::Expr)?;
                    let args = self.argument_list(Punct::RParen)?;
                    self.expect_punct(Punct::RParen)?;
                    e = Expr::new(
                        ExprKind::Call {
                            func: Box::new(e),
                            args,
                        },
                        line,
                    );
                }
                Tok::Punct(p @ (Punct::Dot | Punct::Arrow)) => {
                    self.bump(Mode::Expr)?;
                    let name = self.member_name()?;
                    e = Expr::new(
                        ExprKind::Member {
                            base: Box::new(e),
                            name,
                            arrow: p == Punct::Arrow,
                        },
                        line,
                    );
                }
                Tok::Punct(Punct::Inc) => {
                    self.bump(Mode::Expr)?;
                    e = Expr::new(ExprKind::Unary(UnOp::PostInc, Box::new(e)), line);
                }
                Tok::Punct(Punct::Dec) => {
                    self.bump(Mode::Expr)?;
                    e = Expr::new(ExprKind::Unary(UnOp::PostDec, Box::new(e)), line);
                }
                _ => return Ok(e),
            }
        }
    }

    fn argument_list(&mut self, close: Punct) -> DResult<Vec<Expr>> {
        let mut v = Vec::new();
        if self.at_punct(close)? {
            return Ok(v);
        }
        loop {
            v.push(self.assignment()?);
            if !self.eat_punct(Punct::Comma)? {
                return Ok(v);
            }
        }
    }

    fn primary(&mut self) -> DResult<Expr> {
        let t = self.peek(Mode::Expr)?.clone();
        let line = self.line_for(t.line);
        let kind = match t.tok {
            Tok::Ident(s) => {
                if self.ident_is_tname(&s) {
                    // a type name where an expression is expected
                    return Err(self.syntax_error());
                }
                ExprKind::Ident(s.to_string())
            }
            Tok::Agg(s) => ExprKind::Agg(s.to_string()),
            Tok::Int {
                value,
                suffix,
                decimal,
            } => ExprKind::Int {
                value,
                suffix,
                decimal,
            },
            Tok::Str(s) => ExprKind::Str(s.to_string()),
            Tok::Kw(Keyword::SelfKw) => ExprKind::SelfRef,
            Tok::Kw(Keyword::This) => ExprKind::ThisRef,
            Tok::Punct(Punct::LParen) => {
                self.bump(Mode::Expr)?;
                let e = self.expression()?;
                self.expect_punct(Punct::RParen)?;
                return Ok(e);
            }
            Tok::Kw(Keyword::Offsetof) => {
                self.bump(Mode::Expr)?;
                self.expect_punct(Punct::LParen)?;
                let tn = self.type_name()?;
                self.expect_punct(Punct::Comma)?;
                let name = self.member_name()?;
                self.expect_punct(Punct::RParen)?;
                return Ok(Expr::new(ExprKind::Offsetof(Box::new(tn), name), line));
            }
            Tok::Kw(Keyword::Xlate) => {
                self.bump(Mode::Expr)?;
                self.expect_punct(Punct::Lt)?;
                let tn = self.type_name()?;
                self.expect_punct(Punct::Gt)?;
                self.expect_punct(Punct::LParen)?;
                let e = self.expression()?;
                self.expect_punct(Punct::RParen)?;
                return Ok(Expr::new(ExprKind::Xlate(Box::new(tn), Box::new(e)), line));
            }
            _ => return Err(self.syntax_error()),
        };
        self.bump(Mode::Expr)?;
        Ok(Expr::new(kind, line))
    }

    // ---------------------------------------------------------------- declarations

    fn external_declaration(&mut self) -> DResult<Item> {
        let t = self.peek(Mode::Expr)?.clone();
        match t.tok {
            Tok::Kw(Keyword::Inline) => self.inline_definition().map(Item::Inline),
            Tok::Kw(Keyword::Translator) => self.translator_definition().map(Item::Translator),
            Tok::Kw(Keyword::Provider) => self.provider_definition().map(Item::Provider),
            Tok::Kw(Keyword::Counter | Keyword::Import) => Err(self.syntax_error()),
            _ => self.declaration().map(Item::Decl),
        }
    }

    fn declaration(&mut self) -> DResult<Declaration> {
        let line = self.peek(Mode::Expr)?.line;
        let specs = self.decl_specifiers(true)?;
        let mut declarators = Vec::new();
        if !self.at_punct(Punct::Semi)? {
            loop {
                let d = self.declarator(false)?;
                let dline = self.line_for(d.line());
                if specs.class == Some(StorageClass::Typedef) {
                    if let Some(n) = d.name() {
                        self.type_names.insert(n.to_string());
                    }
                }
                declarators.push(InitDeclarator {
                    declarator: d,
                    line: dline,
                });
                if !self.eat_punct(Punct::Comma)? {
                    break;
                }
            }
        }
        self.expect_punct(Punct::Semi)?;
        Ok(Declaration {
            specs,
            declarators,
            line: self.line_for(line),
        })
    }

    fn set_base(&mut self, specs: &mut DeclSpecs, base: BaseSpec, line: u32) -> DResult<()> {
        if specs.base.is_some() {
            return Err(self.err("D_DECL_COMBO", line, "invalid type combination"));
        }
        specs.base = Some(base);
        Ok(())
    }

    fn set_class(&mut self, specs: &mut DeclSpecs, c: StorageClass, line: u32) -> DResult<()> {
        if specs.class.is_some() {
            return Err(self.err(
                "D_DECL_CLASS",
                line,
                "only one storage class allowed in a declaration",
            ));
        }
        specs.class = Some(c);
        Ok(())
    }

    /// Declaration specifiers: storage class, type specifiers and qualifiers, in any order.
    fn decl_specifiers(&mut self, d_classes: bool) -> DResult<DeclSpecs> {
        let first_line = self.peek(Mode::Expr)?.line;
        let mut specs = DeclSpecs {
            line: self.line_for(first_line),
            ..DeclSpecs::default()
        };
        let mut any = false;
        loop {
            let t = self.peek(Mode::Expr)?.clone();
            let line = t.line;
            match &t.tok {
                Tok::Kw(k) => {
                    use Keyword::*;
                    match k {
                        Auto => self.set_class(&mut specs, StorageClass::Auto, line)?,
                        Register => self.set_class(&mut specs, StorageClass::Register, line)?,
                        Static => self.set_class(&mut specs, StorageClass::Static, line)?,
                        Extern => self.set_class(&mut specs, StorageClass::Extern, line)?,
                        Typedef => self.set_class(&mut specs, StorageClass::Typedef, line)?,
                        SelfKw if d_classes => {
                            self.set_class(&mut specs, StorageClass::SelfClass, line)?
                        }
                        This if d_classes => {
                            self.set_class(&mut specs, StorageClass::This, line)?
                        }
                        Void => self.set_base(&mut specs, BaseSpec::Void, line)?,
                        Char => self.set_base(&mut specs, BaseSpec::Char, line)?,
                        Int => {
                            if matches!(specs.base, Some(BaseSpec::Int)) {
                                return Err(self.err(
                                    "D_DECL_COMBO",
                                    line,
                                    "invalid type combination",
                                ));
                            }
                            self.set_base(&mut specs, BaseSpec::Int, line)?
                        }
                        Float => self.set_base(&mut specs, BaseSpec::Float, line)?,
                        Double => self.set_base(&mut specs, BaseSpec::Double, line)?,
                        String => self.set_base(&mut specs, BaseSpec::String, line)?,
                        // conflicting widths name no type: reported when the type is looked up
                        Short | Long
                            if (*k == Short && specs.shorts > 0)
                                || specs.longs >= 2 && *k == Long =>
                        {
                            return Err(self.err("D_DECL_COMBO", line, "invalid type combination"));
                        }
                        Short => specs.shorts += 1,
                        Long => specs.longs += 1,
                        Signed => {
                            if specs.signed || specs.unsigned {
                                return Err(self.err(
                                    "D_DECL_COMBO",
                                    line,
                                    "invalid type combination",
                                ));
                            }
                            specs.signed = true
                        }
                        Unsigned => {
                            if specs.signed || specs.unsigned {
                                return Err(self.err(
                                    "D_DECL_COMBO",
                                    line,
                                    "invalid type combination",
                                ));
                            }
                            specs.unsigned = true
                        }
                        Userland => specs.userland = true,
                        Const => specs.is_const = true,
                        Volatile => specs.is_volatile = true,
                        Restrict => specs.is_restrict = true,
                        Struct | Union => {
                            self.bump(Mode::Expr)?;
                            let kind = if *k == Struct {
                                SouKind::Struct
                            } else {
                                SouKind::Union
                            };
                            let b = self.sou_specifier(kind)?;
                            self.set_base(&mut specs, b, line)?;
                            any = true;
                            continue;
                        }
                        Enum => {
                            self.bump(Mode::Expr)?;
                            let b = self.enum_specifier()?;
                            self.set_base(&mut specs, b, line)?;
                            any = true;
                            continue;
                        }
                        _ => break,
                    }
                    self.bump(Mode::Expr)?;
                    any = true;
                }
                Tok::Ident(name) => {
                    // a typedef name is a type specifier only while no base type is set
                    if specs.base.is_some()
                        || specs.shorts > 0
                        || specs.longs > 0
                        || specs.signed
                        || specs.unsigned
                    {
                        break;
                    }
                    if !self.is_type_name(name) || (any && !self.ident_is_tname(name)) {
                        break;
                    }
                    let name = name.clone();
                    self.bump(Mode::Expr)?;
                    specs.base = Some(BaseSpec::Named(name.to_string()));
                    any = true;
                }
                _ => break,
            }
        }
        if !any {
            return Err(self.syntax_error());
        }
        Ok(specs)
    }

    fn sou_specifier(&mut self, kind: SouKind) -> DResult<BaseSpec> {
        let t = self.peek(Mode::Expr)?.clone();
        let name = match &t.tok {
            Tok::Ident(s) => {
                let s = s.to_string();
                self.bump(Mode::Expr)?;
                Some(s)
            }
            _ => None,
        };
        if !self.at_punct(Punct::LBrace)? {
            if name.is_none() {
                return Err(self.syntax_error());
            }
            return Ok(BaseSpec::Sou {
                kind,
                name,
                members: None,
            });
        }
        if name.as_deref().is_some_and(|n| n.contains('`')) {
            return Err(self.syntax_error());
        }
        let brace = self.bump(Mode::Expr)?;
        if let Some(n) = &name {
            let kw = match kind {
                SouKind::Struct => "struct",
                SouKind::Union => "union",
            };
            let tag = format!("{kw} {n}");
            // the library's tags are a lower scope: the first definition here shadows one
            if !self.library_tags.remove(&tag) && self.type_names.contains(&tag) {
                return Err(self.err(
                    "D_DECL_TYPERED",
                    brace.line,
                    format!("type redeclared: {tag}"),
                ));
            }
        }
        let mut members = Vec::new();
        while !self.at_punct(Punct::RBrace)? {
            let line = self.peek(Mode::Expr)?.line;
            let specs = self.decl_specifiers(false)?;
            let mut declarators = Vec::new();
            loop {
                let d = if self.at_punct(Punct::Colon)? {
                    Declarator::Name {
                        name: None,
                        line: self.line_for(line),
                    }
                } else {
                    self.declarator(false)?
                };
                let d = if self.eat_punct(Punct::Colon)? {
                    let width = self.conditional()?;
                    Declarator::Bitfield {
                        inner: Box::new(d),
                        width,
                    }
                } else {
                    d
                };
                declarators.push(d);
                if !self.eat_punct(Punct::Comma)? {
                    break;
                }
            }
            self.expect_punct(Punct::Semi)?;
            members.push(MemberDecl {
                specs,
                declarators,
                line: self.line_for(line),
            });
        }
        self.bump(Mode::Expr)?;
        if let Some(n) = &name {
            let kw = match kind {
                SouKind::Struct => "struct",
                SouKind::Union => "union",
            };
            self.type_names.insert(format!("{kw} {n}"));
        }
        Ok(BaseSpec::Sou {
            kind,
            name,
            members: Some(members),
        })
    }

    fn enum_specifier(&mut self) -> DResult<BaseSpec> {
        let t = self.peek(Mode::Expr)?.clone();
        let name = match &t.tok {
            Tok::Ident(s) => {
                let s = s.to_string();
                self.bump(Mode::Expr)?;
                Some(s)
            }
            _ => None,
        };
        if !self.at_punct(Punct::LBrace)? {
            if name.is_none() {
                return Err(self.syntax_error());
            }
            return Ok(BaseSpec::Enum {
                name,
                enumerators: None,
            });
        }
        self.bump(Mode::Expr)?;
        let mut list = Vec::new();
        loop {
            if self.at_punct(Punct::RBrace)? && !list.is_empty() {
                break;
            }
            let (n, line) = self.expect_ident()?;
            let value = if self.eat_punct(Punct::Assign)? {
                Some(self.conditional()?)
            } else {
                None
            };
            list.push(Enumerator {
                name: n,
                value,
                line: self.line_for(line),
            });
            if !self.eat_punct(Punct::Comma)? {
                break;
            }
        }
        self.expect_punct(Punct::RBrace)?;
        Ok(BaseSpec::Enum {
            name,
            enumerators: Some(list),
        })
    }

    /// A declarator; `abstract_ok` allows the name to be missing (type names, parameters).
    fn declarator(&mut self, abstract_ok: bool) -> DResult<Declarator> {
        if self.at_punct(Punct::Star)? {
            self.bump(Mode::Expr)?;
            let mut is_const = false;
            let mut is_volatile = false;
            loop {
                if self.at_kw(Keyword::Const)? {
                    is_const = true;
                } else if self.at_kw(Keyword::Volatile)? || self.at_kw(Keyword::Restrict)? {
                    is_volatile = true;
                } else {
                    break;
                }
                self.bump(Mode::Expr)?;
            }
            let inner = self.declarator(abstract_ok)?;
            return Ok(Declarator::Pointer {
                inner: Box::new(inner),
                is_const,
                is_volatile,
            });
        }
        let t = self.peek(Mode::Expr)?.clone();
        let mut d = match &t.tok {
            Tok::Ident(s) => {
                let s = s.to_string();
                self.bump(Mode::Expr)?;
                Declarator::Name {
                    name: Some(s.to_string()),
                    line: self.line_for(t.line),
                }
            }
            Tok::Punct(Punct::LParen) => {
                let t2 = self.peek2(Mode::Expr)?.clone();
                let nested = match &t2.tok {
                    Tok::Punct(Punct::Star | Punct::LParen | Punct::LBracket) => true,
                    Tok::Ident(s) => !self.is_type_name(s),
                    _ => false,
                };
                if nested {
                    self.bump(Mode::Expr)?;
                    let d = self.declarator(abstract_ok)?;
                    self.expect_punct(Punct::RParen)?;
                    d
                } else if abstract_ok {
                    Declarator::Name {
                        name: None,
                        line: self.line_for(t.line),
                    }
                } else {
                    return Err(self.syntax_error());
                }
            }
            _ if abstract_ok => Declarator::Name {
                name: None,
                line: self.line_for(t.line),
            },
            _ => return Err(self.syntax_error()),
        };
        loop {
            if self.at_punct(Punct::LBracket)? {
                self.bump(Mode::Expr)?;
                if self.at_punct(Punct::Ellipsis)? {
                    let l = self.peek(Mode::Expr)?.line;
                    return Err(self.err(
                        "D_DECL_PROTO_VARARGS",
                        l,
                        "associative array prototype may not use a variable-length argument list",
                    ));
                }
                let size = if self.at_punct(Punct::RBracket)? {
                    ArraySize::None
                } else if self.at_type_start()? {
                    // key types, optionally named (inline array parameters)
                    let mut keys = Vec::new();
                    loop {
                        let kline = self.peek(Mode::Expr)?.line;
                        let specs = self.decl_specifiers(false)?;
                        let declarator = self.declarator(true)?;
                        keys.push(TypeName {
                            specs,
                            declarator,
                            line: self.line_for(kline),
                        });
                        if !self.eat_punct(Punct::Comma)? {
                            break;
                        }
                    }
                    ArraySize::Keys(keys)
                } else {
                    ArraySize::Expr(self.conditional()?)
                };
                self.expect_punct(Punct::RBracket)?;
                d = Declarator::Array {
                    inner: Box::new(d),
                    size,
                };
            } else if self.at_punct(Punct::LParen)? {
                self.bump(Mode::Expr)?;
                let (params, varargs) = self.parameter_list()?;
                self.expect_punct(Punct::RParen)?;
                d = Declarator::Function {
                    inner: Box::new(d),
                    params,
                    varargs,
                };
            } else {
                return Ok(d);
            }
        }
    }

    fn parameter_list(&mut self) -> DResult<(Vec<ParamDecl>, bool)> {
        let mut params = Vec::new();
        let mut varargs = false;
        if self.at_punct(Punct::RParen)? {
            return Ok((params, varargs));
        }
        loop {
            if self.eat_punct(Punct::Ellipsis)? {
                varargs = true;
                break;
            }
            let line = self.peek(Mode::Expr)?.line;
            let specs = self.decl_specifiers(false)?;
            let declarator = self.declarator(true)?;
            params.push(ParamDecl {
                specs,
                declarator,
                line: self.line_for(line),
            });
            if !self.eat_punct(Punct::Comma)? {
                break;
            }
        }
        Ok((params, varargs))
    }

    pub fn type_name(&mut self) -> DResult<TypeName> {
        let line = self.peek(Mode::Expr)?.line;
        let specs = self.decl_specifiers(false)?;
        let declarator = self.declarator(true)?;
        if declarator.name().is_some() {
            return Err(self.syntax_error());
        }
        Ok(TypeName {
            specs,
            declarator,
            line: self.line_for(line),
        })
    }

    fn inline_definition(&mut self) -> DResult<InlineDef> {
        let t = self.bump(Mode::Expr)?; // inline
        let specs = self.decl_specifiers(false)?;
        let declarator = self.declarator(false)?;
        self.expect_punct(Punct::Assign)?;
        let value = self.assignment()?;
        self.expect_punct(Punct::Semi)?;
        Ok(InlineDef {
            specs,
            declarator,
            value,
            line: self.line_for(t.line),
        })
    }

    fn translator_definition(&mut self) -> DResult<TranslatorDef> {
        let t = self.bump(Mode::Expr)?; // translator
        let output = self.type_name()?;
        self.expect_punct(Punct::Lt)?;
        let in_line = self.peek(Mode::Expr)?.line;
        let specs = self.decl_specifiers(false)?;
        let mut declarator = Declarator::Name {
            name: None,
            line: self.line_for(in_line),
        };
        while self.eat_punct(Punct::Star)? {
            declarator = Declarator::Pointer {
                inner: Box::new(declarator),
                is_const: false,
                is_volatile: false,
            };
        }
        let input = TypeName {
            specs,
            declarator,
            line: self.line_for(in_line),
        };
        let (input_name, _) = self.expect_ident()?;
        self.expect_punct(Punct::Gt)?;
        self.expect_punct(Punct::LBrace)?;
        let mut members = Vec::new();
        while !self.at_punct(Punct::RBrace)? {
            let (name, line) = self.expect_ident()?;
            self.expect_punct(Punct::Assign)?;
            let e = self.assignment()?;
            self.expect_punct(Punct::Semi)?;
            members.push((name, e, self.line_for(line)));
        }
        self.bump(Mode::Expr)?;
        self.expect_punct(Punct::Semi)?;
        Ok(TranslatorDef {
            output,
            input,
            input_name,
            members,
            line: self.line_for(t.line),
        })
    }

    fn provider_definition(&mut self) -> DResult<ProviderDef> {
        let t = self.bump(Mode::Expr)?; // provider
        let (name, _) = self.expect_ident()?;
        self.expect_punct(Punct::LBrace)?;
        let mut probes = Vec::new();
        while !self.at_punct(Punct::RBrace)? {
            if !self.at_kw(Keyword::Probe)? {
                return Err(self.syntax_error());
            }
            self.bump(Mode::Expr)?;
            let (pname, line) = self.expect_ident()?;
            self.expect_punct(Punct::LParen)?;
            let (args, _) = self.parameter_list()?;
            self.expect_punct(Punct::RParen)?;
            let xargs = if self.eat_punct(Punct::Colon)? {
                self.expect_punct(Punct::LParen)?;
                let (x, _) = self.parameter_list()?;
                self.expect_punct(Punct::RParen)?;
                Some(x)
            } else {
                None
            };
            self.expect_punct(Punct::Semi)?;
            probes.push(ProviderProbe {
                name: pname,
                args,
                xargs,
                line: self.line_for(line),
            });
        }
        self.bump(Mode::Expr)?;
        self.expect_punct(Punct::Semi)?;
        Ok(ProviderDef {
            name,
            probes,
            line: self.line_for(t.line),
        })
    }
}

/// Only unary expressions may be assigned to (`a + b = 1` is a syntax error in D).
fn is_unary_form(e: &Expr) -> bool {
    !matches!(
        e.kind,
        ExprKind::Binary(..) | ExprKind::Assign(..) | ExprKind::Ternary(..) | ExprKind::Cast(..)
    )
}

pub fn keyword_text(k: Keyword) -> &'static str {
    use Keyword::*;
    match k {
        Probe => "probe",
        Provider => "provider",
        SelfKw => "self",
        String => "string",
        Stringof => "stringof",
        Userland => "userland",
        Xlate => "xlate",
        Translator => "translator",
        _ => "",
    }
}

/// Parses a whole D program.
pub fn parse_program(
    src: &str,
    kind: SourceKind,
    macros: MacroEnv,
    type_names: TypeNames,
    hook: Option<Box<PragmaHook<'_>>>,
) -> DResult<(Program, Vec<Pragma>, Vec<bool>)> {
    let mut p = Parser::new(src, kind, macros);
    p.type_names = type_names;
    if let Some(h) = hook {
        p = p.with_pragma_hook(h);
    }
    p.parse_program()
}

/// Parses a type name alone (used for prototypes and `-x` type options).
pub fn parse_type_name(src: &str, type_names: TypeNames) -> DResult<TypeName> {
    let mut p = Parser::new(src, SourceKind::String, MacroEnv::default());
    p.type_names = type_names;
    let tn = p.type_name()?;
    if p.peek(Mode::Expr)?.tok != Tok::Eof {
        return Err(p.syntax_error());
    }
    Ok(tn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> DResult<Program> {
        let mut names = TypeNames::default();
        names.insert("uint64_t".to_string());
        parse_program(src, SourceKind::File, MacroEnv::default(), names, None).map(|r| r.0)
    }

    #[test]
    fn clauses_with_predicates_and_bodies() {
        let p =
            parse("syscall::read:entry, BEGIN /pid == 3 && x/ { @[execname] = count(); }\nEND{}")
                .unwrap();
        assert_eq!(p.items.len(), 2);
        let Item::Clause(c) = &p.items[0] else {
            panic!()
        };
        assert_eq!(c.probes.len(), 2);
        assert!(c.predicate.is_some());
        assert_eq!(c.body.as_ref().unwrap().len(), 1);
    }

    #[test]
    fn precedence_follows_c() {
        let p = parse("BEGIN { x = 1 + 2 * 3 << 1; }").unwrap();
        let Item::Clause(c) = &p.items[0] else {
            panic!()
        };
        let Stmt::Expr(e) = &c.body.as_ref().unwrap()[0] else {
            panic!()
        };
        let ExprKind::Assign(None, _, rhs) = &e.kind else {
            panic!()
        };
        assert!(matches!(rhs.kind, ExprKind::Binary(BinOp::Shl, _, _)));
    }

    #[test]
    fn declarations_casts_and_typedefs() {
        let p = parse(
            "typedef struct foo { int a : 3; char *b[4]; } foo_t;\nfoo_t x;\nint (*fp)(int, ...);\n\
             BEGIN { y = (foo_t *)0; z = sizeof (uint64_t); w = offsetof(foo_t, a); }",
        )
        .unwrap();
        assert_eq!(p.items.len(), 4);
    }

    #[test]
    fn syntax_errors_name_the_token() {
        let e = parse("BEGIN { x = ; }").unwrap_err();
        assert_eq!(e.tag, "D_SYNTAX");
        assert_eq!(e.message, "syntax error near \";\"");
        let e = parse("BEGIN { x = 1").unwrap_err();
        assert_eq!(e.message, "syntax error near end of input");
        let e = parse("BEGIN /x/").unwrap_err();
        assert!(e.message.contains("expected actions"));
    }

    #[test]
    fn line_markers_reset_line_numbers() {
        let e = parse("# 40 \"x.d\"\nBEGIN {\n x = ; }").unwrap_err();
        assert_eq!(e.line, 41);
    }
}
