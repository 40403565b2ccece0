//! The abstract syntax tree of a D program, as the parser produces it (unchecked).

use super::token::IntSuffix;

#[derive(Clone, Debug, Default)]
pub struct Program {
    pub items: Vec<Item>,
}

#[derive(Clone, Debug)]
pub enum Item {
    Clause(Clause),
    Decl(Declaration),
    Inline(InlineDef),
    Translator(TranslatorDef),
    Provider(ProviderDef),
    /// A `#pragma` (or other control line) in the order it appeared; pragmas that affect
    /// compilation are applied by the parser as they are read and also kept here.
    Pragma(Pragma),
}

#[derive(Clone, Debug)]
pub struct Pragma {
    pub words: Vec<String>,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub enum ProbeSpec {
    Name { text: String, line: u32 },
    Id { id: u64, line: u32 },
}

#[derive(Clone, Debug)]
pub struct Clause {
    pub probes: Vec<ProbeSpec>,
    pub predicate: Option<Expr>,
    /// `None` for a clause with no body (allowed for `-n` probe descriptions).
    pub body: Option<Vec<Stmt>>,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub enum Stmt {
    Expr(Expr),
    If {
        cond: Expr,
        then: Vec<Stmt>,
        otherwise: Option<Vec<Stmt>>,
        line: u32,
    },
    Empty,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Plus,
    Not,
    BitNot,
    Deref,
    AddrOf,
    PreInc,
    PreDec,
    PostInc,
    PostDec,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Mul,
    Div,
    Mod,
    Add,
    Sub,
    Shl,
    Shr,
    Lt,
    Gt,
    Le,
    Ge,
    Eq,
    Ne,
    BitAnd,
    BitXor,
    BitOr,
    And,
    Xor,
    Or,
    Comma,
}

impl BinOp {
    pub fn text(self) -> &'static str {
        use BinOp::*;
        match self {
            Mul => "*",
            Div => "/",
            Mod => "%",
            Add => "+",
            Sub => "-",
            Shl => "<<",
            Shr => ">>",
            Lt => "<",
            Gt => ">",
            Le => "<=",
            Ge => ">=",
            Eq => "==",
            Ne => "!=",
            BitAnd => "&",
            BitXor => "^",
            BitOr => "|",
            And => "&&",
            Xor => "^^",
            Or => "||",
            Comma => ",",
        }
    }
}

/// `=` is `None`; `+=` is `Some(Add)`, and so on.
pub type AssignOp = Option<BinOp>;

#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    Int {
        value: u64,
        suffix: IntSuffix,
        decimal: bool,
    },
    Str(String),
    Ident(String),
    /// `@name` (`@_` for a bare `@`).
    Agg(String),
    /// `self` / `this` as the left side of `->`.
    SelfRef,
    ThisRef,
    Member {
        base: Box<Expr>,
        name: String,
        arrow: bool,
    },
    Index {
        base: Box<Expr>,
        keys: Vec<Expr>,
    },
    Call {
        func: Box<Expr>,
        args: Vec<Expr>,
    },
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Assign(AssignOp, Box<Expr>, Box<Expr>),
    Ternary(Box<Expr>, Box<Expr>, Box<Expr>),
    Cast(Box<TypeName>, Box<Expr>),
    SizeofType(Box<TypeName>),
    SizeofExpr(Box<Expr>),
    Stringof(Box<Expr>),
    Offsetof(Box<TypeName>, String),
    Xlate(Box<TypeName>, Box<Expr>),
}

impl Expr {
    pub fn new(kind: ExprKind, line: u32) -> Self {
        Expr { kind, line }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageClass {
    Auto,
    Register,
    Static,
    Extern,
    Typedef,
    SelfClass,
    This,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SouKind {
    Struct,
    Union,
}

#[derive(Clone, Debug)]
pub enum BaseSpec {
    Void,
    Char,
    Int,
    Float,
    Double,
    String,
    /// A typedef name (possibly scoped, e.g. ``nt`_EPROCESS``).
    Named(String),
    Sou {
        kind: SouKind,
        name: Option<String>,
        members: Option<Vec<MemberDecl>>,
    },
    Enum {
        name: Option<String>,
        enumerators: Option<Vec<Enumerator>>,
    },
}

#[derive(Clone, Debug)]
pub struct Enumerator {
    pub name: String,
    pub value: Option<Expr>,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub struct MemberDecl {
    pub specs: DeclSpecs,
    pub declarators: Vec<Declarator>,
    pub line: u32,
}

#[derive(Clone, Debug, Default)]
pub struct DeclSpecs {
    pub class: Option<StorageClass>,
    /// Set when more than one storage class was given (`D_DECL_CLASS`).
    pub class_conflict: bool,
    pub base: Option<BaseSpec>,
    pub shorts: u8,
    pub longs: u8,
    pub signed: bool,
    pub unsigned: bool,
    pub userland: bool,
    pub is_const: bool,
    pub is_volatile: bool,
    pub is_restrict: bool,
    /// Set when the specifier combination is invalid (`D_DECL_COMBO`); the text says why.
    pub combo_error: Option<String>,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub enum ArraySize {
    None,
    Expr(Expr),
    /// An associative array declaration: `int a[string, int]`.
    Keys(Vec<TypeName>),
}

#[derive(Clone, Debug)]
pub struct ParamDecl {
    pub specs: DeclSpecs,
    pub declarator: Declarator,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub enum Declarator {
    Name {
        name: Option<String>,
        line: u32,
    },
    Pointer {
        inner: Box<Declarator>,
        is_const: bool,
        is_volatile: bool,
    },
    Array {
        inner: Box<Declarator>,
        size: ArraySize,
    },
    Function {
        inner: Box<Declarator>,
        params: Vec<ParamDecl>,
        varargs: bool,
    },
    /// A bitfield member: `int x : 3`.
    Bitfield {
        inner: Box<Declarator>,
        width: Expr,
    },
}

impl Declarator {
    pub fn name(&self) -> Option<&str> {
        match self {
            Declarator::Name { name, .. } => name.as_deref(),
            Declarator::Pointer { inner, .. }
            | Declarator::Array { inner, .. }
            | Declarator::Function { inner, .. }
            | Declarator::Bitfield { inner, .. } => inner.name(),
        }
    }

    pub fn line(&self) -> u32 {
        match self {
            Declarator::Name { line, .. } => *line,
            Declarator::Pointer { inner, .. }
            | Declarator::Array { inner, .. }
            | Declarator::Function { inner, .. }
            | Declarator::Bitfield { inner, .. } => inner.line(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct InitDeclarator {
    pub declarator: Declarator,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub struct Declaration {
    pub specs: DeclSpecs,
    pub declarators: Vec<InitDeclarator>,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub struct TypeName {
    pub specs: DeclSpecs,
    pub declarator: Declarator,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub struct InlineDef {
    pub specs: DeclSpecs,
    pub declarator: Declarator,
    pub value: Expr,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub struct TranslatorDef {
    pub output: TypeName,
    pub input: TypeName,
    pub input_name: String,
    pub members: Vec<(String, Expr, u32)>,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub struct ProviderDef {
    pub name: String,
    pub probes: Vec<ProviderProbe>,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub struct ProviderProbe {
    pub name: String,
    pub args: Vec<ParamDecl>,
    pub xargs: Option<Vec<ParamDecl>>,
    pub line: u32,
}
