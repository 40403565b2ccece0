//! The compiled program: what the compiler hands to the runtime.
//!
//! Clauses keep their probe descriptions, a predicate and a list of statements. Expressions are
//! lowered to [`Node`] trees whose every operation is resolved: variables by scope and id, memory
//! loads by size and signedness, comparisons by kind (signed, unsigned, string), member accesses
//! by byte offset, casts by width. Actions are records with their arguments. The runtime evaluates
//! the trees; `dtx -S` prints them ([`disasm`]).

pub mod disasm;
pub mod printf;
pub mod ptype;
pub mod sharing;
pub mod subr;
pub mod value;
pub mod visit;

use crate::probes::ProbeDesc;
use printf::Format;
pub use subr::Subr;

/// How a value is carried: integers (and pointers) in a 64-bit register; strings and other
/// by-reference values (structs, arrays) as a reference to `size` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValKind {
    Int { size: u8, signed: bool },
    String,
    ByRef { size: u32 },
}

impl ValKind {
    pub const I64: ValKind = ValKind::Int {
        size: 8,
        signed: true,
    };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Global,
    Thread,
    Clause,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A D variable of the program.
#[derive(Clone, Debug)]
pub struct Variable {
    pub name: String,
    pub scope: Scope,
    pub kind: ValKind,
    /// Key kinds of an associative array.
    pub keys: Option<Vec<ValKind>>,
}

/// A lowered expression.
#[derive(Clone, Debug)]
pub enum Node {
    Const(i64),
    Str(String),
    /// A built-in variable by its DIF variable id (`timestamp`, `pid`, `execname`...).
    Builtin {
        id: u32,
        name: &'static str,
    },
    /// `arg0`..`arg9`.
    Arg(u8),
    /// `args[i]` (typed probe arguments) / `uregs[i]`.
    Args {
        index: Box<Node>,
        kind: ValKind,
    },
    Uregs(Box<Node>),
    Var {
        id: u32,
        scope: Scope,
        kind: ValKind,
    },
    Array {
        id: u32,
        scope: Scope,
        keys: Vec<Node>,
        kind: ValKind,
    },
    /// A load of `kind` from the address the node computes.
    Load {
        addr: Box<Node>,
        kind: ValKind,
    },
    /// A bitfield: load `size` bytes at `addr`, shift right, mask `bits`.
    Bitfield {
        addr: Box<Node>,
        size: u8,
        shift: u8,
        bits: u8,
        signed: bool,
    },
    Binary {
        op: BinOp,
        signed: bool,
        a: Box<Node>,
        b: Box<Node>,
    },
    Compare {
        op: CmpOp,
        kind: CmpKind,
        a: Box<Node>,
        b: Box<Node>,
    },
    Neg(Box<Node>),
    BitNot(Box<Node>),
    Not(Box<Node>),
    LogAnd(Box<Node>, Box<Node>),
    LogOr(Box<Node>, Box<Node>),
    LogXor(Box<Node>, Box<Node>),
    Ternary(Box<Node>, Box<Node>, Box<Node>),
    /// Truncation or extension to an integer width.
    Cast {
        value: Box<Node>,
        size: u8,
        signed: bool,
    },
    Assign {
        target: Box<LValue>,
        value: Box<Node>,
    },
    /// `++`/`--`: adds `delta` (scaled for pointers); `post` yields the old value.
    IncDec {
        target: Box<LValue>,
        delta: i64,
        post: bool,
    },
    /// A D subroutine (`strlen`, `copyin`, ...), resolved once by the compiler; `name` is
    /// kept for listings and messages.
    Call {
        subr: Subr,
        name: &'static str,
        args: Vec<Node>,
    },
    /// The address of an lvalue.
    AddrOf(Box<LValue>),
    Stringof(Box<Node>),
    /// Evaluates the first for its effects, yields the second (`,`).
    Seq(Box<Node>, Box<Node>),
    /// A structure built in scratch space, member by member (a whole translated structure):
    /// yields a reference to it.
    Build {
        size: u32,
        fields: Vec<Field>,
    },
}

/// One member of a [`Node::Build`].
#[derive(Clone, Debug)]
pub struct Field {
    pub offset_bits: u64,
    pub bits: Option<u8>,
    pub kind: ValKind,
    pub value: Node,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpKind {
    Signed,
    Unsigned,
    String,
}

/// Something a value can be stored to.
#[derive(Clone, Debug)]
pub enum LValue {
    Var {
        id: u32,
        scope: Scope,
        kind: ValKind,
    },
    Array {
        id: u32,
        scope: Scope,
        keys: Vec<Node>,
        kind: ValKind,
    },
    Mem {
        addr: Node,
        kind: ValKind,
    },
    Bitfield {
        addr: Node,
        size: u8,
        shift: u8,
        bits: u8,
    },
    Uregs(Node),
    /// Not assignable: a computed value that stands where an lvalue was parsed (a translated
    /// member, an inline array element, `args[i]`). The checker has refused writes to it.
    Value(Node),
}

/// An aggregation of the program.
#[derive(Clone, Debug)]
pub struct Aggregation {
    pub name: String,
    pub func: AggFunc,
    pub keys: Vec<ValKind>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggFunc {
    Count,
    Sum,
    Avg,
    Min,
    Max,
    Stddev,
    Quantize,
    Lquantize {
        base: i32,
        step: u16,
        levels: u16,
    },
    Llquantize {
        factor: u16,
        low: u16,
        high: u16,
        nsteps: u16,
    },
}

impl AggFunc {
    /// The aggregating function of this name that takes no parameters (`count`, `sum`, `avg`,
    /// `min`, `max`, `stddev`, `quantize`); `None` for `lquantize`, `llquantize` and unknown
    /// names.
    pub fn parameterless(name: &str) -> Option<AggFunc> {
        Some(match name {
            "count" => AggFunc::Count,
            "sum" => AggFunc::Sum,
            "avg" => AggFunc::Avg,
            "min" => AggFunc::Min,
            "max" => AggFunc::Max,
            "stddev" => AggFunc::Stddev,
            "quantize" => AggFunc::Quantize,
            _ => return None,
        })
    }
}

/// What an action records or does.
#[derive(Clone, Debug)]
pub enum ActionKind {
    Printf(Format),
    Printa {
        format: Option<Format>,
        aggs: Vec<u32>,
    },
    Trace,
    /// `print(x)`: the value's type, for printing it as dtrace does.
    Print(Box<ptype::PType>),
    Tracemem,
    Stack {
        frames: u32,
    },
    Ustack {
        frames: u32,
        strsize: u32,
    },
    Jstack {
        frames: u32,
        strsize: u32,
    },
    Sym,
    Mod,
    Usym,
    Umod,
    Uaddr,
    Exit,
    Speculate,
    Commit,
    Discard,
    Clear(u32),
    Trunc(u32),
    Normalize(u32),
    Denormalize(u32),
    Setopt,
    Ftruncate,
    Freopen(Format),
    System(Format),
    Raise,
    Stop,
    Chill,
    Breakpoint,
    Panic,
    /// `lkd()`: a live kernel memory dump (Windows live; elsewhere a notice).
    Lkd,
    Copyout,
    Copyoutstr,
    /// `etw_trace()`: the event it writes; `args` are the level, the keyword and the values of
    /// the fields that are not structures.
    EtwTrace(Box<crate::etw::tlg_event::EtwEventDef>),
    /// `@agg[keys] = func(args)`: `args[0]` is the value, then the function's parameters.
    Aggregate {
        agg: u32,
    },
}

#[derive(Clone, Debug)]
pub struct Action {
    /// Index of the action in [`Program::actions`] order (unique in the program).
    pub id: u32,
    pub kind: ActionKind,
    /// Aggregation keys (for `Aggregate`).
    pub keys: Vec<Node>,
    pub args: Vec<Node>,
    /// Kinds of `args`, for the consumer to format them.
    pub arg_kinds: Vec<ValKind>,
    /// Kinds of `keys` as typed at this statement (an aggregation's entries keep the width of
    /// the key expression that made them).
    pub key_kinds: Vec<ValKind>,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub enum Stmt {
    /// An expression evaluated for its effect (an assignment, a subroutine call).
    Eval(Node),
    If {
        cond: Node,
        then: Vec<Stmt>,
        otherwise: Vec<Stmt>,
    },
    Action(Action),
}

#[derive(Clone, Debug)]
pub struct Clause {
    pub probes: Vec<ProbeDesc>,
    pub predicate: Option<Node>,
    pub body: Vec<Stmt>,
    pub line: u32,
}

/// A whole compiled program.
#[derive(Clone, Debug, Default)]
pub struct Program {
    pub clauses: Vec<Clause>,
    pub variables: Vec<Variable>,
    pub aggregations: Vec<Aggregation>,
}

impl Program {
    pub fn variable(&self, id: u32) -> Option<&Variable> {
        self.variables.get(id as usize)
    }

    /// Every action of the program, indexed by [`Action::id`].
    pub fn actions(&self) -> Vec<&Action> {
        fn collect<'a>(body: &'a [Stmt], out: &mut Vec<&'a Action>) {
            for s in body {
                match s {
                    Stmt::Action(a) => out.push(a),
                    Stmt::If {
                        then, otherwise, ..
                    } => {
                        collect(then, out);
                        collect(otherwise, out);
                    }
                    Stmt::Eval(_) => {}
                }
            }
        }
        let mut v = Vec::new();
        for c in &self.clauses {
            collect(&c.body, &mut v);
        }
        v.sort_by_key(|a| a.id);
        v
    }
}
