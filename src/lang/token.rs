//! Tokens of the D language.
//!
//! The expression-state token set is recognised by a `logos` lexer ([`RawTok`]); the lexer in
//! `lexer.rs` wraps it with the states logos cannot express (probe descriptions at clause scope,
//! control lines, the end-of-predicate slash).

use std::rc::Rc;

use logos::Logos;

/// Keywords of D. Several are reserved but unused (`auto`, `goto`, ...) exactly as in DTrace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Keyword {
    Auto,
    Break,
    Case,
    Char,
    Const,
    Continue,
    Counter,
    Default,
    Do,
    Double,
    Else,
    Enum,
    Extern,
    Float,
    For,
    Goto,
    If,
    Import,
    Inline,
    Int,
    Long,
    Offsetof,
    Probe,
    Provider,
    Register,
    Restrict,
    Return,
    SelfKw,
    Short,
    Signed,
    Sizeof,
    Static,
    String,
    Stringof,
    Struct,
    Switch,
    This,
    Translator,
    Typedef,
    Union,
    Unsigned,
    Userland,
    Void,
    Volatile,
    While,
    Xlate,
}

impl Keyword {
    pub fn lookup(s: &str) -> Option<Keyword> {
        use Keyword::*;
        Some(match s {
            "auto" => Auto,
            "break" => Break,
            "case" => Case,
            "char" => Char,
            "const" => Const,
            "continue" => Continue,
            "counter" => Counter,
            "default" => Default,
            "do" => Do,
            "double" => Double,
            "else" => Else,
            "enum" => Enum,
            "extern" => Extern,
            "float" => Float,
            "for" => For,
            "goto" => Goto,
            "if" => If,
            "import" => Import,
            "inline" => Inline,
            "int" => Int,
            "long" => Long,
            "offsetof" => Offsetof,
            "probe" => Probe,
            "provider" => Provider,
            "register" => Register,
            "restrict" => Restrict,
            "return" => Return,
            "self" => SelfKw,
            "short" => Short,
            "signed" => Signed,
            "sizeof" => Sizeof,
            "static" => Static,
            "string" => String,
            "stringof" => Stringof,
            "struct" => Struct,
            "switch" => Switch,
            "this" => This,
            "translator" => Translator,
            "typedef" => Typedef,
            "union" => Union,
            "unsigned" => Unsigned,
            "userland" => Userland,
            "void" => Void,
            "volatile" => Volatile,
            "while" => While,
            "xlate" => Xlate,
            _ => return None,
        })
    }

    /// Keywords that may start a declaration at clause scope (DTrace's S2 keyword set).
    pub fn starts_declaration(self) -> bool {
        use Keyword::*;
        matches!(
            self,
            Auto | Char
                | Const
                | Counter
                | Double
                | Enum
                | Extern
                | Float
                | Import
                | Inline
                | Int
                | Long
                | Provider
                | Register
                | Restrict
                | SelfKw
                | Short
                | Signed
                | Static
                | String
                | Struct
                | This
                | Translator
                | Typedef
                | Union
                | Unsigned
                | Void
                | Volatile
        )
    }
}

/// The suffix of an integer constant, which with its value decides its type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct IntSuffix {
    pub unsigned: bool,
    /// 0 none, 1 `l`, 2 `ll`.
    pub longs: u8,
}

/// A token as the parser sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    Int {
        value: u64,
        suffix: IntSuffix,
        decimal: bool,
    },
    Str(Rc<str>),
    Ident(Rc<str>),
    /// `@name`, or `@_` for a bare `@`.
    Agg(Rc<str>),
    /// A probe description at clause scope (`syscall::read:entry`, `BEGIN`, `tick-1s`).
    Pspec(Rc<str>),
    Kw(Keyword),
    /// The closing `/` of a predicate.
    EndPred,
    /// A control line (`#pragma ...`, `# 12 "file"`, `#line`, `#error`...): its words, with
    /// string words kept in their quotes.
    Control(Vec<String>),
    Punct(Punct),
    Eof,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Punct {
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Semi,
    Comma,
    Dot,
    Arrow,
    Ellipsis,
    Question,
    Colon,
    Assign,
    AddAssign,
    SubAssign,
    MulAssign,
    DivAssign,
    ModAssign,
    AndAssign,
    XorAssign,
    OrAssign,
    ShlAssign,
    ShrAssign,
    Inc,
    Dec,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Amp,
    Pipe,
    Caret,
    Tilde,
    Bang,
    AndAnd,
    OrOr,
    XorXor,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Shl,
    Shr,
}

impl Punct {
    pub fn text(self) -> &'static str {
        use Punct::*;
        match self {
            LParen => "(",
            RParen => ")",
            LBracket => "[",
            RBracket => "]",
            LBrace => "{",
            RBrace => "}",
            Semi => ";",
            Comma => ",",
            Dot => ".",
            Arrow => "->",
            Ellipsis => "...",
            Question => "?",
            Colon => ":",
            Assign => "=",
            AddAssign => "+=",
            SubAssign => "-=",
            MulAssign => "*=",
            DivAssign => "/=",
            ModAssign => "%=",
            AndAssign => "&=",
            XorAssign => "^=",
            OrAssign => "|=",
            ShlAssign => "<<=",
            ShrAssign => ">>=",
            Inc => "++",
            Dec => "--",
            Plus => "+",
            Minus => "-",
            Star => "*",
            Slash => "/",
            Percent => "%",
            Amp => "&",
            Pipe => "|",
            Caret => "^",
            Tilde => "~",
            Bang => "!",
            AndAnd => "&&",
            OrOr => "||",
            XorXor => "^^",
            Eq => "==",
            Ne => "!=",
            Lt => "<",
            Le => "<=",
            Gt => ">",
            Ge => ">=",
            Shl => "<<",
            Shr => ">>",
        }
    }
}

/// The raw expression-state tokens, recognised by logos. Whitespace, comments and control
/// lines are consumed by the wrapping lexer before logos sees the input.
#[derive(Logos, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawTok {
    /// Identifiers are scanned by hand in `lexer.rs` (the module-scoped form ``mod.so`name``
    /// needs back-tracking); this variant is what that scan produces.
    Ident,
    #[regex(r"@[a-zA-Z_][0-9a-zA-Z_]*")]
    Agg,
    #[token("@")]
    AggAnon,
    #[regex(r"([0-9]+|0[xX][0-9A-Fa-f]+)[uU]?[lL]?[lL]?")]
    Int,
    #[regex(r"[0-9]+\.[0-9]*([eE][+-]?[0-9]+)?[fFlL]?")]
    #[regex(r"\.[0-9]+([eE][+-]?[0-9]+)?[fFlL]?")]
    #[regex(r"[0-9]+[eE][+-]?[0-9]+[fFlL]?")]
    Float,
    #[regex(r#""([^"\\\n]|\\[^\n])*""#)]
    Str,
    #[regex(r#""([^"\\\n]|\\[^\n])*"#)]
    StrUnterminated,
    #[regex(r"'([^'\\\n]|\\[^\n])*'")]
    Char,
    #[regex(r"'([^'\\\n]|\\[^\n])*")]
    CharUnterminated,
    #[regex(r"\$\$[0-9]+")]
    DollarDollarNum,
    #[regex(r"\$[0-9]+")]
    DollarNum,
    #[regex(r"\$\$[a-zA-Z_`][0-9a-zA-Z_`]*")]
    DollarDollarIdent,
    #[regex(r"\$[a-zA-Z_`][0-9a-zA-Z_`]*")]
    DollarIdent,
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token(";")]
    Semi,
    #[token(",")]
    Comma,
    #[token(".")]
    Dot,
    #[token("->")]
    Arrow,
    #[token("...")]
    Ellipsis,
    #[token("?")]
    Question,
    #[token(":")]
    Colon,
    #[token("=")]
    Assign,
    #[token("+=")]
    AddAssign,
    #[token("-=")]
    SubAssign,
    #[token("*=")]
    MulAssign,
    #[token("/=")]
    DivAssign,
    #[token("%=")]
    ModAssign,
    #[token("&=")]
    AndAssign,
    #[token("^=")]
    XorAssign,
    #[token("|=")]
    OrAssign,
    #[token("<<=")]
    ShlAssign,
    #[token(">>=")]
    ShrAssign,
    #[token("++")]
    Inc,
    #[token("--")]
    Dec,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
    #[token("/")]
    Slash,
    #[token("%")]
    Percent,
    #[token("&")]
    Amp,
    #[token("|")]
    Pipe,
    #[token("^")]
    Caret,
    #[token("~")]
    Tilde,
    #[token("!")]
    Bang,
    #[token("&&")]
    AndAnd,
    #[token("||")]
    OrOr,
    #[token("^^")]
    XorXor,
    #[token("==")]
    Eq,
    #[token("!=")]
    Ne,
    #[token("<")]
    Lt,
    #[token("<=")]
    Le,
    #[token(">")]
    Gt,
    #[token(">=")]
    Ge,
    #[token("<<")]
    Shl,
    #[token(">>")]
    Shr,
}

impl RawTok {
    pub fn punct(self) -> Option<Punct> {
        use RawTok as R;
        Some(match self {
            R::LParen => Punct::LParen,
            R::RParen => Punct::RParen,
            R::LBracket => Punct::LBracket,
            R::RBracket => Punct::RBracket,
            R::LBrace => Punct::LBrace,
            R::RBrace => Punct::RBrace,
            R::Semi => Punct::Semi,
            R::Comma => Punct::Comma,
            R::Dot => Punct::Dot,
            R::Arrow => Punct::Arrow,
            R::Ellipsis => Punct::Ellipsis,
            R::Question => Punct::Question,
            R::Colon => Punct::Colon,
            R::Assign => Punct::Assign,
            R::AddAssign => Punct::AddAssign,
            R::SubAssign => Punct::SubAssign,
            R::MulAssign => Punct::MulAssign,
            R::DivAssign => Punct::DivAssign,
            R::ModAssign => Punct::ModAssign,
            R::AndAssign => Punct::AndAssign,
            R::XorAssign => Punct::XorAssign,
            R::OrAssign => Punct::OrAssign,
            R::ShlAssign => Punct::ShlAssign,
            R::ShrAssign => Punct::ShrAssign,
            R::Inc => Punct::Inc,
            R::Dec => Punct::Dec,
            R::Plus => Punct::Plus,
            R::Minus => Punct::Minus,
            R::Star => Punct::Star,
            R::Slash => Punct::Slash,
            R::Percent => Punct::Percent,
            R::Amp => Punct::Amp,
            R::Pipe => Punct::Pipe,
            R::Caret => Punct::Caret,
            R::Tilde => Punct::Tilde,
            R::Bang => Punct::Bang,
            R::AndAnd => Punct::AndAnd,
            R::OrOr => Punct::OrOr,
            R::XorXor => Punct::XorXor,
            R::Eq => Punct::Eq,
            R::Ne => Punct::Ne,
            R::Lt => Punct::Lt,
            R::Le => Punct::Le,
            R::Gt => Punct::Gt,
            R::Ge => Punct::Ge,
            R::Shl => Punct::Shl,
            R::Shr => Punct::Shr,
            _ => return None,
        })
    }
}
