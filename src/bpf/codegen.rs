//! The code generator: one clause of the IR, on the system call tracepoints, as a BPF
//! program that evaluates the predicate and updates its aggregations in per-CPU hash maps.
//! It reads the same `ir::Node` trees the VM runs and refuses, with the reason, anything whose
//! value it cannot give exactly as the VM gives it (a load from memory, a string, a division
//! that could fault): such a clause stays in user space.
//!
//! Thread-locals (`self->x` holding an integer) live in one hash map per D program, keyed by
//! `[thread, variable id]` as the VM keys them (the tid; an idle CPU's thread by its CPU), an
//! assignment of 0 deleting the entry as DTrace frees it; a clause in the kernel shares them
//! with the program's other kernel clauses only (`plan` keeps every clause that names a
//! variable on the same side). `timestamp` is `bpf_ktime_get_ns()`, `CLOCK_MONOTONIC`: the
//! clock the perf source's records carry, moved by the same offset to the engine's clock.
//! Quantizations compute the bucket index in the program, as `agg::quantize` does, and count
//! into one entry per bucket (`maps`). Clause-locals (`this->x`) are stack slots zeroed at
//! the start; integer globals are only added to (`x++`, `x += v`: an atomic add to an array
//! map indexed by variable id, the same sum in any order of the CPUs), never read here; the
//! loader adds the sums to the engine's globals before END. `execname == "lit"` compares
//! `comm`'s 16 bytes with the literal's.
//!
//! The program's context is the raw record of `raw_syscalls:sys_enter` (`id`, `args[6]`) or
//! `raw_syscalls:sys_exit` (`id`, `ret`), at the offsets of the tracepoint's format. Values
//! are computed in `r0`, with temporaries on the stack (helpers clobber `r1`-`r5`); `r6` keeps
//! the context. Oracle's DTrace for Linux (`libdtrace/dt_cg.c`) compiles D to BPF the same way
//! in outline: per-clause programs, a predicate that returns early, aggregation data in
//! per-CPU maps that user space folds together.

use super::asm::{helper, insn, op, reg, Asm, Insn};
use super::maps::{is_quantization, kernel_func, parts_bytes, value_words, KeyPart};
use crate::ir::{AggFunc, BinOp, CmpKind, CmpOp, LValue, Node, Scope, ValKind};
use crate::lang::builtins::var;

mod buckets;

/// Where the tracepoint's record keeps what the program reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// `long id` (the system call number).
    pub id_off: i16,
    /// `unsigned long args[6]` of `sys_enter`, or `long ret` of `sys_exit`.
    pub data_off: i16,
}

/// `raw_syscalls` records as every x86-64 kernel lays them out (the loader reads the
/// format and passes its own).
pub const RAW_SYSCALLS: Layout = Layout {
    id_off: 8,
    data_off: 16,
};

/// One aggregating statement of a kernel clause: `@agg[keys] = func(value)`, `incr` the
/// quantizations' increment (none: 1).
#[derive(Clone, Debug)]
pub struct KernelAgg {
    pub agg: u32,
    pub func: AggFunc,
    pub keys: Vec<KeyPart>,
    pub value: Option<Node>,
    pub incr: Option<Node>,
}

/// A statement of a kernel clause, in the clause's order.
#[derive(Clone, Debug)]
pub enum KernelStmt {
    /// The aggregation `aggs[i]`.
    Agg(usize),
    /// An assignment to a thread-local (`self->x = v`, `self->x++`).
    Eval(Node),
}

/// A clause (on the entries, or on the returns, of some system calls) as the kernel runs it.
#[derive(Clone, Debug)]
pub struct KernelClause {
    pub program: usize,
    pub clause: usize,
    pub line: u32,
    pub ret: bool,
    /// The system calls, as inclusive ranges of numbers.
    pub ranges: Vec<(u16, u16)>,
    pub predicate: Option<Node>,
    pub aggs: Vec<KernelAgg>,
    pub body: Vec<KernelStmt>,
    /// The clause-locals (`this->x`, integers) the clause names, by variable id: each has a
    /// stack slot, 0 when the program starts as the VM zeroes them at each firing.
    pub locals: Vec<u32>,
    /// The integer globals the clause adds to (`x++`, `x += v`), by variable id.
    pub globals: Vec<u32>,
}

/// Temporaries: 16 slots of 8 bytes below the frame pointer.
const TEMPS: usize = 16;
/// The aggregated value, below the temporaries.
const VALUE_AT: i16 = -(TEMPS as i16) * 8 - 8;
/// Most bytes of a key.
pub const MAX_KEY_BYTES: usize = 64;
const KEY_AT: i16 = VALUE_AT - MAX_KEY_BYTES as i16;
/// A fresh entry's words, below the key (at most 1 + 4 words, for stddev()).
const INIT_AT: i16 = KEY_AT - 8 * 8;
/// A thread-local's key `[thread, id]`, below the fresh entry.
const TLS_AT: i16 = INIT_AT - 16;
/// A quantization's increment.
const INCR_AT: i16 = TLS_AT - 8;
/// stddev()'s square of the value, as a 128-bit number's low and high words.
const SQUARE_AT: i16 = INCR_AT - 16;
/// The thread's `comm` for a comparison of `execname` with a literal.
const COMM_AT: i16 = SQUARE_AT - COMM_LEN as i16;
/// The bytes of the kernel's `comm` (`TASK_COMM_LEN`, NUL included).
pub const COMM_LEN: usize = 16;
/// Most clause-locals (`this->x`) of a kernel clause, one 8-byte slot each below `comm`.
pub const MAX_LOCALS: usize = 16;
const LOCALS_AT: i16 = COMM_AT - 8;
/// The drop counters' indexes: aggregations, dynamic variables.
pub const AGG_DROPS: i32 = 0;
pub const DYN_DROPS: i32 = 1;
/// The thread key of an idle CPU's thread (`vm::IDLE_THREAD_KEY`, the VM's).
const IDLE_THREAD_KEY: i64 = 1 << 48;

/// What the generated code of a clause needs of the loader: the descriptor of each
/// aggregation's map (in the order of [`KernelClause::aggs`]), of the drop counters (a
/// two-entry per-CPU array of u64: [`AGG_DROPS`], [`DYN_DROPS`]) and of the program's
/// thread-locals (a hash of `[thread, id]` to a u64), the engine's clock minus
/// `CLOCK_MONOTONIC`, and what the program returns.
pub struct MapFds<'a> {
    pub aggs: &'a [i32],
    pub drops: i32,
    pub tls: i32,
    /// The program's integer globals that kernel clauses add to: an array of u64 indexed
    /// by variable id.
    pub globals: i32,
    pub clock_offset: i64,
}

struct Gen<'a> {
    a: Asm,
    ret: bool,
    layout: Layout,
    maps: &'a MapFds<'a>,
    /// Exits without effect (a false predicate, another system call).
    skip: super::asm::Label,
    locals: &'a [u32],
}

/// The program of `c`, or why it cannot be one.
pub fn compile(c: &KernelClause, layout: Layout, maps: &MapFds<'_>) -> Result<Vec<Insn>, String> {
    if maps.aggs.len() != c.aggs.len() {
        return Err("one map per aggregation".into());
    }
    let mut a = Asm::default();
    let skip = a.label();
    let mut g = Gen {
        a,
        ret: c.ret,
        layout,
        maps,
        skip,
        locals: &c.locals,
    };
    if c.locals.len() > MAX_LOCALS {
        return Err(format!("more than {MAX_LOCALS} clause-locals"));
    }
    g.a.push(insn(op::MOV64_REG, reg::R6, reg::R1, 0, 0));
    for i in 0..c.locals.len() {
        g.a.push(insn(op::ST_DW, reg::FP, 0, LOCALS_AT - 8 * i as i16, 0));
    }
    g.syscall_filter(&c.ranges);
    if let Some(p) = &c.predicate {
        g.expr(p, 0)?;
        g.a.jump_imm(op::JEQ, reg::R0, 0, skip);
    }
    for s in &c.body {
        match s {
            KernelStmt::Agg(i) => {
                let agg = c.aggs.get(*i).ok_or("no such aggregation")?;
                g.aggregate(agg, maps.aggs[*i])?;
            }
            KernelStmt::Eval(n) => g.statement(n)?,
        }
    }
    g.a.bind(skip);
    // 1: the tracepoint's perf samples are kept. The programs of a tracepoint decide for
    // every perf event on it (all must return non-zero), another tool's too
    // (sources/perf/kernel.rs)
    g.a.exit_with(1);
    g.a.finish()
}

impl Gen<'_> {
    /// Skips unless the call number is in one of `ranges` (unsigned: a negative id is none).
    fn syscall_filter(&mut self, ranges: &[(u16, u16)]) {
        let body = self.a.label();
        self.a.load(reg::R1, reg::R6, self.layout.id_off);
        for &(lo, hi) in ranges {
            let next = self.a.label();
            self.a.jump_imm(op::JLT, reg::R1, lo as i32, next);
            self.a.jump_imm(op::JLE, reg::R1, hi as i32, body);
            self.a.bind(next);
        }
        self.a.goto(self.skip);
        self.a.bind(body);
    }

    fn temp(depth: usize) -> Result<i16, String> {
        if depth >= TEMPS {
            return Err("an expression too deep for the kernel's stack".into());
        }
        Ok(-8 * (depth as i16 + 1))
    }

    /// Evaluates `n` into `r0`; `depth` temporaries are in use.
    fn expr(&mut self, n: &Node, depth: usize) -> Result<(), String> {
        use reg::{FP, R0, R1};
        match n {
            Node::Const(v) => self.a.mov_imm(R0, *v),
            Node::Arg(i) => self.arg(*i as u32),
            Node::Builtin { id, name } => self.builtin(*id, name)?,
            Node::Binary {
                op: bop,
                signed,
                a,
                b,
            } => {
                if let (BinOp::Div | BinOp::Mod, Node::Const(c)) = (bop, &**b) {
                    // only a constant divisor that cannot fault (DTrace's ERROR is raised
                    // in user space)
                    let ok = *c != 0
                        && i32::try_from(*c).is_ok()
                        && if *signed { *c != -1 } else { *c > 0 };
                    if !ok {
                        return Err(format!("a division by {c}"));
                    }
                    self.expr(a, depth)?;
                    let aop = if *bop == BinOp::Div { op::DIV } else { op::MOD };
                    // BPF's signed division and modulo: `off` 1 (cpu v4)
                    let off = i16::from(*signed);
                    self.a
                        .push(insn(op::ALU64 | aop | op::K, R0, 0, off, *c as i32));
                    return Ok(());
                }
                if matches!(bop, BinOp::Div | BinOp::Mod) {
                    return Err("a division by a value that may be zero".into());
                }
                let slot = Self::temp(depth)?;
                self.expr(a, depth)?;
                self.a.store(FP, slot, R0);
                self.expr(b, depth + 1)?;
                self.a.push(insn(op::MOV64_REG, R1, R0, 0, 0));
                self.a.load(R0, FP, slot);
                let aop = match bop {
                    BinOp::Add => op::ADD,
                    BinOp::Sub => op::SUB,
                    BinOp::Mul => op::MUL,
                    BinOp::And => op::AND,
                    BinOp::Or => op::OR,
                    BinOp::Xor => op::XOR,
                    BinOp::Shl => op::LSH,
                    BinOp::Shr if *signed => op::ARSH,
                    BinOp::Shr => op::RSH,
                    BinOp::Div | BinOp::Mod => return Err("a division".into()),
                };
                // the VM shifts by the count modulo 64, as BPF does
                self.a.alu_reg(aop, R0, R1);
            }
            Node::Compare {
                op: cop,
                kind,
                a,
                b,
            } => {
                if *kind == CmpKind::String {
                    return self.execname_compare(*cop, a, b);
                }
                let slot = Self::temp(depth)?;
                self.expr(a, depth)?;
                self.a.store(FP, slot, R0);
                self.expr(b, depth + 1)?;
                self.a.push(insn(op::MOV64_REG, R1, R0, 0, 0));
                self.a.load(reg::R2, FP, slot);
                let signed = *kind == CmpKind::Signed;
                let jop = match (cop, signed) {
                    (CmpOp::Eq, _) => op::JEQ,
                    (CmpOp::Ne, _) => op::JNE,
                    (CmpOp::Lt, true) => op::JSLT,
                    (CmpOp::Lt, false) => op::JLT,
                    (CmpOp::Le, true) => op::JSLE,
                    (CmpOp::Le, false) => op::JLE,
                    (CmpOp::Gt, true) => op::JSGT,
                    (CmpOp::Gt, false) => op::JGT,
                    (CmpOp::Ge, true) => op::JSGE,
                    (CmpOp::Ge, false) => op::JGE,
                };
                let yes = self.a.label();
                self.a.mov_imm(R0, 1);
                self.a.jump_reg(jop, reg::R2, R1, yes);
                self.a.mov_imm(R0, 0);
                self.a.bind(yes);
            }
            Node::Neg(x) => {
                self.expr(x, depth)?;
                self.a.push(insn(op::ALU64 | op::NEG, R0, 0, 0, 0));
            }
            Node::BitNot(x) => {
                self.expr(x, depth)?;
                self.a.alu_imm(op::XOR, R0, -1);
            }
            Node::Not(x) => {
                self.expr(x, depth)?;
                self.truth(true);
            }
            Node::LogAnd(x, y) | Node::LogOr(x, y) => {
                let and = matches!(n, Node::LogAnd(..));
                let (short, done) = (self.a.label(), self.a.label());
                self.expr(x, depth)?;
                self.a
                    .jump_imm(if and { op::JEQ } else { op::JNE }, R0, 0, short);
                self.expr(y, depth)?;
                self.truth(false);
                self.a.goto(done);
                self.a.bind(short);
                self.a.mov_imm(R0, i64::from(!and));
                self.a.bind(done);
            }
            Node::LogXor(x, y) => {
                let slot = Self::temp(depth)?;
                self.expr(x, depth)?;
                self.truth(false);
                self.a.store(FP, slot, R0);
                self.expr(y, depth + 1)?;
                self.truth(false);
                self.a.load(R1, FP, slot);
                self.a.alu_reg(op::XOR, R0, R1);
            }
            Node::Ternary(c, t, e) => {
                let (other, done) = (self.a.label(), self.a.label());
                self.expr(c, depth)?;
                self.a.jump_imm(op::JEQ, R0, 0, other);
                self.expr(t, depth)?;
                self.a.goto(done);
                self.a.bind(other);
                self.expr(e, depth)?;
                self.a.bind(done);
            }
            Node::Cast {
                value,
                size,
                signed,
            } => {
                self.expr(value, depth)?;
                if *size < 8 {
                    let bits = 64 - 8 * i32::from(*size);
                    self.a.alu_imm(op::LSH, R0, bits);
                    self.a
                        .alu_imm(if *signed { op::ARSH } else { op::RSH }, R0, bits);
                }
            }
            Node::Seq(x, y) => {
                self.expr(x, depth)?;
                self.expr(y, depth)?;
            }
            Node::Var {
                id,
                scope: Scope::Thread,
                kind: ValKind::Int { .. },
            } => self.read_tls(*id),
            Node::Var {
                id,
                scope: Scope::Clause,
                kind: ValKind::Int { .. },
            } => {
                let at = self.local(*id)?;
                self.a.load(R0, FP, at);
            }
            other => return Err(describe(other)),
        }
        Ok(())
    }

    /// The stack slot of clause-local `id`.
    fn local(&self, id: u32) -> Result<i16, String> {
        let i = self
            .locals
            .iter()
            .position(|&l| l == id)
            .ok_or("a clause-local the plan did not give a slot")?;
        Ok(LOCALS_AT - 8 * i as i16)
    }

    /// `r0` = `execname == "lit"` (or `!=`): the thread's `comm` (`bpf_get_current_comm`,
    /// NUL-padded to [`COMM_LEN`] bytes) against the literal padded the same way, as two
    /// 8-byte words. The VM compares the whole strings; `comm` holds at most 15 bytes, so a
    /// literal of 16 or more can never equal it, and the comparison is a constant here too.
    /// A literal ends at its first NUL, as the VM reads it.
    fn execname_compare(&mut self, cop: CmpOp, a: &Node, b: &Node) -> Result<(), String> {
        use reg::{FP, R0, R1, R2};
        let lit = match (a, b) {
            (
                Node::Builtin {
                    id: var::EXECNAME, ..
                },
                Node::Str(s),
            )
            | (
                Node::Str(s),
                Node::Builtin {
                    id: var::EXECNAME, ..
                },
            ) => s.as_bytes(),
            _ => return Err("a string comparison other than `execname` with a literal".into()),
        };
        let eq = match cop {
            CmpOp::Eq => true,
            CmpOp::Ne => false,
            _ => return Err("a string comparison other than `==` and `!=`".into()),
        };
        let lit = &lit[..lit.iter().position(|&c| c == 0).unwrap_or(lit.len())];
        if lit.len() >= COMM_LEN {
            self.a.mov_imm(R0, i64::from(!eq));
            return Ok(());
        }
        let mut padded = [0u8; COMM_LEN];
        padded[..lit.len()].copy_from_slice(lit);
        self.a.push(insn(op::MOV64_REG, R1, FP, 0, 0));
        self.a.alu_imm(op::ADD, R1, i32::from(COMM_AT));
        self.a.mov_imm(R2, COMM_LEN as i64);
        self.a.call(helper::GET_CURRENT_COMM);
        let done = self.a.label();
        self.a.mov_imm(R0, i64::from(!eq));
        for (w, bytes) in padded.chunks_exact(8).enumerate() {
            let mut word = [0u8; 8];
            word.copy_from_slice(bytes);
            // BPF loads in the host's byte order
            self.a.load(R1, FP, COMM_AT + 8 * w as i16);
            self.a.mov_imm(R2, i64::from_ne_bytes(word));
            self.a.jump_reg(op::JNE, R1, R2, done);
        }
        self.a.mov_imm(R0, i64::from(eq));
        self.a.bind(done);
        Ok(())
    }

    /// `r0 = (r0 != 0)`, or with `not` `r0 = (r0 == 0)`.
    fn truth(&mut self, not: bool) {
        let set = self.a.label();
        self.a.push(insn(op::MOV64_REG, reg::R1, reg::R0, 0, 0));
        self.a.mov_imm(reg::R0, i64::from(!not));
        self.a.jump_imm(op::JNE, reg::R1, 0, set);
        self.a.mov_imm(reg::R0, i64::from(not));
        self.a.bind(set);
    }

    /// `argN`: the call's arguments on entry; on return `arg0` and `arg1` are the return
    /// value (as the perf source gives them) and the others 0.
    fn arg(&mut self, i: u32) {
        match (self.ret, i) {
            (false, 0..=5) => {
                let off = self.layout.data_off + 8 * i as i16;
                self.a.load(reg::R0, reg::R6, off);
            }
            (true, 0 | 1) => self.a.load(reg::R0, reg::R6, self.layout.data_off),
            _ => self.a.mov_imm(reg::R0, 0),
        }
    }

    fn builtin(&mut self, id: u32, name: &str) -> Result<(), String> {
        use reg::R0;
        match id {
            x if (var::ARG0..var::ARG0 + 10).contains(&x) => self.arg(x - var::ARG0),
            var::PID | var::TID => {
                self.a.call(helper::GET_CURRENT_PID_TGID);
                if id == var::PID {
                    self.a.alu_imm(op::RSH, R0, 32);
                } else {
                    self.a.alu_imm(op::LSH, R0, 32);
                    self.a.alu_imm(op::RSH, R0, 32);
                }
            }
            var::CPU => {
                self.a.call(helper::GET_SMP_PROCESSOR_ID);
                self.a.alu_imm(op::LSH, R0, 32);
                self.a.alu_imm(op::RSH, R0, 32);
            }
            // on return, -ret for a return value in -4095..-1, else 0; 0 on entry
            var::ERRNO if !self.ret => self.a.mov_imm(R0, 0),
            var::ERRNO => {
                let zero = self.a.label();
                let done = self.a.label();
                self.a.load(R0, reg::R6, self.layout.data_off);
                self.a.jump_imm(op::JSGE, R0, 0, zero);
                self.a.jump_imm(op::JSLT, R0, -4095, zero);
                self.a.push(insn(op::ALU64 | op::NEG, R0, 0, 0, 0));
                self.a.goto(done);
                self.a.bind(zero);
                self.a.mov_imm(R0, 0);
                self.a.bind(done);
            }
            var::TIMESTAMP => {
                self.a.call(helper::KTIME_GET_NS);
                if self.maps.clock_offset != 0 {
                    self.a.mov_imm(reg::R1, self.maps.clock_offset);
                    self.a.alu_reg(op::ADD, R0, reg::R1);
                }
            }
            // the real ids of the thread's credentials, `gid << 32 | uid`
            // (bpf_get_current_uid_gid), as the perf source reads them from /proc
            var::UID | var::GID => {
                self.a.call(helper::GET_CURRENT_UID_GID);
                if id == var::GID {
                    self.a.alu_imm(op::RSH, R0, 32);
                } else {
                    self.a.alu_imm(op::LSH, R0, 32);
                    self.a.alu_imm(op::RSH, R0, 32);
                }
            }
            var::PPID => {
                return Err(
                    "`ppid` (the parent's tgid is a read of the task's `real_parent`, \
                            which the back end does not make yet)"
                        .into(),
                )
            }
            _ => return Err(format!("`{name}` in an expression")),
        }
        Ok(())
    }

    /// `@agg[keys] = func(value)` on map `fd`: the entry's words are `[updates, data...]`
    /// ([`value_words`]); a new entry is written whole with its first value, an existing one
    /// has its data folded in first and its update count raised last, so that user space
    /// never reads a value that no event made.
    fn aggregate(&mut self, g: &KernelAgg, fd: i32) -> Result<(), String> {
        use reg::{FP, R0, R1, R2, R3, R4, R5};
        let words = value_words(g.func).ok_or_else(|| format!("{:?} in the kernel", g.func))?;
        let quantized = is_quantization(g.func);
        match &g.value {
            Some(v) => self.expr(v, 0)?,
            None => self.a.mov_imm(R0, 0),
        }
        self.a.store(FP, VALUE_AT, R0);
        if quantized {
            match &g.incr {
                Some(v) => self.expr(v, 0)?,
                None => self.a.mov_imm(R0, 1),
            }
            self.a.store(FP, INCR_AT, R0);
        }
        let key_bytes = super::maps::key_bytes(&g.keys, g.func);
        if key_bytes > MAX_KEY_BYTES {
            return Err(format!("a key of {key_bytes} bytes"));
        }
        for w in 0..key_bytes / 8 {
            self.a
                .push(insn(op::ST_DW, FP, 0, KEY_AT + 8 * w as i16, 0));
        }
        let mut at = KEY_AT;
        for k in &g.keys {
            match k {
                KeyPart::Int { node, .. } => {
                    self.expr(node, 0)?;
                    self.a.store(FP, at, R0);
                }
                KeyPart::Probe(_) => {
                    self.a.load(R0, reg::R6, self.layout.id_off);
                    self.a.store(FP, at, R0);
                }
                KeyPart::Execname => {
                    self.a.push(insn(op::MOV64_REG, R1, FP, 0, 0));
                    self.a.alu_imm(op::ADD, R1, i32::from(at));
                    self.a.mov_imm(R2, 16);
                    self.a.call(helper::GET_CURRENT_COMM);
                }
            }
            at += k.bytes() as i16;
        }
        if quantized {
            // the bucket's index ends the key; the entry sums the increments
            self.a.load(R0, FP, VALUE_AT);
            self.bucket(g.func)?;
            self.a.store(FP, KEY_AT + parts_bytes(&g.keys) as i16, R0);
            self.a.load(R0, FP, INCR_AT);
            self.a.store(FP, VALUE_AT, R0);
        }
        let func = kernel_func(g.func);
        if func == AggFunc::Stddev {
            self.square();
        }
        let (have, done, dropped) = (self.a.label(), self.a.label(), self.a.label());
        self.lookup(fd);
        self.a.jump_imm(op::JNE, R0, 0, have);
        // a new entry: [1, the function applied to its initial words]
        self.a.load(R1, FP, VALUE_AT);
        self.a.push(insn(op::ST_DW, FP, 0, INIT_AT, 1));
        match func {
            AggFunc::Count => self.a.push(insn(op::ST_DW, FP, 0, INIT_AT + 8, 1)),
            AggFunc::Sum | AggFunc::Min | AggFunc::Max => self.a.store(FP, INIT_AT + 8, R1),
            AggFunc::Avg => {
                self.a.push(insn(op::ST_DW, FP, 0, INIT_AT + 8, 1));
                self.a.store(FP, INIT_AT + 16, R1);
            }
            AggFunc::Stddev => {
                self.a.push(insn(op::ST_DW, FP, 0, INIT_AT + 8, 1));
                self.a.store(FP, INIT_AT + 16, R1);
                self.a.load(R1, FP, SQUARE_AT);
                self.a.store(FP, INIT_AT + 24, R1);
                self.a.load(R1, FP, SQUARE_AT + 8);
                self.a.store(FP, INIT_AT + 32, R1);
            }
            f => return Err(format!("{f:?} in the kernel")),
        }
        self.a.extend(super::asm::load_map(R1, fd));
        self.key_ptr(R2);
        self.a.push(insn(op::MOV64_REG, R3, FP, 0, 0));
        self.a.alu_imm(op::ADD, R3, i32::from(INIT_AT));
        self.a.mov_imm(R4, 1); // BPF_NOEXIST
        self.a.call(helper::MAP_UPDATE_ELEM);
        self.a.jump_imm(op::JEQ, R0, 0, done);
        // taken by a nested firing since the lookup: fold into it; else the map is full
        self.lookup(fd);
        self.a.jump_imm(op::JEQ, R0, 0, dropped);
        self.a.bind(have);
        self.a.load(R1, FP, VALUE_AT);
        self.a.load(R2, R0, 8);
        match func {
            AggFunc::Count => self.a.alu_imm(op::ADD, R2, 1),
            AggFunc::Sum => self.a.alu_reg(op::ADD, R2, R1),
            AggFunc::Min | AggFunc::Max => {
                let keep = self.a.label();
                let jop = if func == AggFunc::Min {
                    op::JSLE
                } else {
                    op::JSGE
                };
                self.a.jump_reg(jop, R2, R1, keep);
                self.a.push(insn(op::MOV64_REG, R2, R1, 0, 0));
                self.a.bind(keep);
            }
            AggFunc::Avg => {
                self.a.alu_imm(op::ADD, R2, 1);
                self.a.load(R3, R0, 16);
                self.a.alu_reg(op::ADD, R3, R1);
                self.a.store(R0, 16, R3);
            }
            AggFunc::Stddev => {
                // [count, sum, squares low, squares high], as agg::funcs applies a value
                self.a.alu_imm(op::ADD, R2, 1);
                self.a.load(R3, R0, 16);
                self.a.alu_reg(op::ADD, R3, R1);
                self.a.store(R0, 16, R3);
                let no_carry = self.a.label();
                self.a.load(R3, R0, 24);
                self.a.load(R4, FP, SQUARE_AT);
                self.a.alu_reg(op::ADD, R3, R4);
                self.a.load(R5, R0, 32);
                self.a.load(R1, FP, SQUARE_AT + 8);
                self.a.alu_reg(op::ADD, R5, R1);
                self.a.jump_reg(op::JGE, R3, R4, no_carry);
                self.a.alu_imm(op::ADD, R5, 1);
                self.a.bind(no_carry);
                self.a.store(R0, 24, R3);
                self.a.store(R0, 32, R5);
            }
            f => return Err(format!("{f:?} in the kernel")),
        }
        self.a.store(R0, 8, R2);
        self.a.load(R1, R0, 0);
        self.a.alu_imm(op::ADD, R1, 1);
        self.a.store(R0, 0, R1);
        self.a.goto(done);
        self.a.bind(dropped);
        self.count_drop(AGG_DROPS);
        self.a.bind(done);
        debug_assert!(words <= 5);
        Ok(())
    }

    /// The square of the value at [`VALUE_AT`]'s magnitude (`unsigned_abs`, so that
    /// `i64::MIN` is 2^63), as 128 bits at [`SQUARE_AT`]: BPF multiplies 64 bits by 64, so
    /// the magnitude is cut into 32-bit halves `h`, `l` and the square is
    /// `h*h << 64 + 2*h*l << 32 + l*l`, carrying out of the low word by hand.
    fn square(&mut self) {
        use reg::{FP, R1, R2, R3, R4};
        let positive = self.a.label();
        let no_carry = self.a.label();
        self.a.load(R1, FP, VALUE_AT);
        self.a.jump_imm(op::JSGE, R1, 0, positive);
        self.a.push(insn(op::ALU64 | op::NEG, R1, 0, 0, 0));
        self.a.bind(positive);
        // r2 = l, r1 = h
        self.a.push(insn(op::MOV64_REG, R2, R1, 0, 0));
        self.a.alu_imm(op::LSH, R2, 32);
        self.a.alu_imm(op::RSH, R2, 32);
        self.a.alu_imm(op::RSH, R1, 32);
        // r3 = l*l, r4 = h*l, r1 = h*h
        self.a.push(insn(op::MOV64_REG, R3, R2, 0, 0));
        self.a.alu_reg(op::MUL, R3, R2);
        self.a.push(insn(op::MOV64_REG, R4, R1, 0, 0));
        self.a.alu_reg(op::MUL, R4, R2);
        self.a.alu_reg(op::MUL, R1, R1);
        // 2*h*l << 32: its low word r2 = h*l << 33, its high word h*l >> 31
        self.a.push(insn(op::MOV64_REG, R2, R4, 0, 0));
        self.a.alu_imm(op::LSH, R2, 33);
        self.a.alu_imm(op::RSH, R4, 31);
        self.a.alu_reg(op::ADD, R2, R3);
        self.a.alu_reg(op::ADD, R1, R4);
        self.a.jump_reg(op::JGE, R2, R3, no_carry);
        self.a.alu_imm(op::ADD, R1, 1);
        self.a.bind(no_carry);
        self.a.store(FP, SQUARE_AT, R2);
        self.a.store(FP, SQUARE_AT + 8, R1);
    }

    fn key_ptr(&mut self, dst: u8) {
        self.a.push(insn(op::MOV64_REG, dst, reg::FP, 0, 0));
        self.a.alu_imm(op::ADD, dst, i32::from(KEY_AT));
    }

    /// `r0 = lookup(map fd, key)`.
    fn lookup(&mut self, fd: i32) {
        self.a.extend(super::asm::load_map(reg::R1, fd));
        self.key_ptr(reg::R2);
        self.a.call(helper::MAP_LOOKUP_ELEM);
    }

    /// `drops[index] += 1` (this CPU's counter).
    fn count_drop(&mut self, index: i32) {
        use reg::{FP, R0, R1, R2};
        let none = self.a.label();
        self.a.push(insn(op::ST_W, FP, 0, INIT_AT, index));
        self.a.extend(super::asm::load_map(R1, self.maps.drops));
        self.a.push(insn(op::MOV64_REG, R2, FP, 0, 0));
        self.a.alu_imm(op::ADD, R2, i32::from(INIT_AT));
        self.a.call(helper::MAP_LOOKUP_ELEM);
        self.a.jump_imm(op::JEQ, R0, 0, none);
        self.a.load(R1, R0, 0);
        self.a.alu_imm(op::ADD, R1, 1);
        self.a.store(R0, 0, R1);
        self.a.bind(none);
    }
}

impl Gen<'_> {
    /// A statement: an assignment to (or `++`/`--` of) an integer thread-local or
    /// clause-local.
    fn statement(&mut self, n: &Node) -> Result<(), String> {
        let var = |t: &LValue| match t {
            LValue::Var {
                id,
                scope: scope @ (Scope::Thread | Scope::Clause),
                kind: ValKind::Int { .. },
            } => Some((*id, *scope == Scope::Thread)),
            _ => None,
        };
        if let Some((id, add)) = global_add(n)? {
            return self.add_to_global(id, add);
        }
        let (target, delta) = match n {
            Node::Assign { target, value } => {
                let v = var(target)
                    .ok_or("a statement assigning to other than an integer `self->` or `this->`")?;
                self.expr(value, 0)?;
                (v, None)
            }
            Node::IncDec { target, delta, .. } => {
                let v = var(target)
                    .ok_or("a statement `++`/`--` of other than an integer `self->` or `this->`")?;
                (v, Some(*delta))
            }
            _ => {
                return Err(
                    "a statement other than an aggregation or a `self->`/`this->` assignment"
                        .into(),
                )
            }
        };
        let (id, thread) = target;
        if let Some(delta) = delta {
            if thread {
                self.read_tls(id);
            } else {
                let at = self.local(id)?;
                self.a.load(reg::R0, reg::FP, at);
            }
            self.a.mov_imm(reg::R1, delta);
            self.a.alu_reg(op::ADD, reg::R0, reg::R1);
        }
        if thread {
            self.write_tls(id)
        } else {
            let at = self.local(id)?;
            self.a.store(reg::FP, at, reg::R0);
            Ok(())
        }
    }

    /// `x += v` on global `id`, `v` a node or a constant: an atomic add to its slot of the
    /// globals' array (BPF_ATOMIC | BPF_ADD, Documentation/bpf/standardization/
    /// instruction-set.rst, "Atomic operations"), so that CPUs adding at once lose nothing.
    fn add_to_global(&mut self, id: u32, add: GlobalAdd<'_>) -> Result<(), String> {
        use reg::{FP, R0, R1, R2};
        match add {
            GlobalAdd::Const(c) => self.a.mov_imm(R0, c),
            GlobalAdd::Node(v, neg) => {
                self.expr(v, 0)?;
                if neg {
                    self.a.push(insn(op::ALU64 | op::NEG, R0, 0, 0, 0));
                }
            }
        }
        self.a.store(FP, VALUE_AT, R0);
        let none = self.a.label();
        self.a.push(insn(op::ST_W, FP, 0, TLS_AT, id as i32));
        self.a.extend(super::asm::load_map(R1, self.maps.globals));
        self.a.push(insn(op::MOV64_REG, R2, FP, 0, 0));
        self.a.alu_imm(op::ADD, R2, i32::from(TLS_AT));
        self.a.call(helper::MAP_LOOKUP_ELEM);
        self.a.jump_imm(op::JEQ, R0, 0, none);
        self.a.load(R1, FP, VALUE_AT);
        self.a.push(insn(op::ATOMIC_DW, R0, R1, 0, op::ATOMIC_ADD));
        self.a.bind(none);
        Ok(())
    }

    /// The key `[thread, id]` of thread-local `id` at [`TLS_AT`]: the thread is the VM's
    /// thread key (the tid, or for an idle CPU's thread that CPU's key).
    fn tls_key(&mut self, id: u32) {
        use reg::{FP, R0, R1};
        let have = self.a.label();
        self.a.call(helper::GET_CURRENT_PID_TGID);
        self.a.alu_imm(op::LSH, R0, 32);
        self.a.alu_imm(op::RSH, R0, 32);
        self.a.jump_imm(op::JNE, R0, 0, have);
        self.a.call(helper::GET_SMP_PROCESSOR_ID);
        self.a.alu_imm(op::LSH, R0, 32);
        self.a.alu_imm(op::RSH, R0, 32);
        self.a.mov_imm(R1, IDLE_THREAD_KEY);
        self.a.alu_reg(op::OR, R0, R1);
        self.a.bind(have);
        self.a.store(FP, TLS_AT, R0);
        self.a.mov_imm(R1, i64::from(id));
        self.a.store(FP, TLS_AT + 8, R1);
    }

    /// `r0 = self->x` (0 when it has no value).
    fn read_tls(&mut self, id: u32) {
        use reg::{FP, R0, R1, R2};
        let (none, done) = (self.a.label(), self.a.label());
        self.tls_key(id);
        self.a.extend(super::asm::load_map(R1, self.maps.tls));
        self.a.push(insn(op::MOV64_REG, R2, FP, 0, 0));
        self.a.alu_imm(op::ADD, R2, i32::from(TLS_AT));
        self.a.call(helper::MAP_LOOKUP_ELEM);
        self.a.jump_imm(op::JEQ, R0, 0, none);
        self.a.load(R0, R0, 0);
        self.a.goto(done);
        self.a.bind(none);
        self.a.mov_imm(R0, 0);
        self.a.bind(done);
    }

    /// `self->x = r0`: 0 deletes the variable (DTrace frees a dynamic variable assigned 0);
    /// a full map counts a dynamic variable drop. Leaves the value in `r0`.
    fn write_tls(&mut self, id: u32) -> Result<(), String> {
        use reg::{FP, R0, R1, R2, R3, R4};
        let (free, done) = (self.a.label(), self.a.label());
        self.a.store(FP, VALUE_AT, R0);
        self.tls_key(id);
        self.a.extend(super::asm::load_map(R1, self.maps.tls));
        self.a.push(insn(op::MOV64_REG, R2, FP, 0, 0));
        self.a.alu_imm(op::ADD, R2, i32::from(TLS_AT));
        self.a.load(R3, FP, VALUE_AT);
        self.a.jump_imm(op::JEQ, R3, 0, free);
        self.a.push(insn(op::MOV64_REG, R3, FP, 0, 0));
        self.a.alu_imm(op::ADD, R3, i32::from(VALUE_AT));
        self.a.mov_imm(R4, 0); // BPF_ANY
        self.a.call(helper::MAP_UPDATE_ELEM);
        self.a.jump_imm(op::JEQ, R0, 0, done);
        self.count_drop(DYN_DROPS);
        self.a.goto(done);
        self.a.bind(free);
        self.a.call(helper::MAP_DELETE_ELEM);
        self.a.bind(done);
        self.a.load(R0, FP, VALUE_AT);
        Ok(())
    }
}

/// What a statement adds to an integer global.
pub enum GlobalAdd<'a> {
    Const(i64),
    /// The node's value, negated when `true`.
    Node(&'a Node, bool),
}

/// The global statement `n` adds to, and what: `x++`, `x--`, `x += v`, `x -= v` (`x = x + v`
/// as the compiler gives them) with `v` naming no global; none when `n` is not a statement
/// on a global; an error for any other statement on a global.
pub fn global_add(n: &Node) -> Result<Option<(u32, GlobalAdd<'_>)>, String> {
    let global = |t: &LValue| match t {
        LValue::Var {
            id,
            scope: Scope::Global,
            kind: ValKind::Int { .. },
        } => Some(*id),
        _ => None,
    };
    let other = "a global assigned other than by `++`, `--`, `+=` or `-=` (only additions give \
                 the same sum in any order of the CPUs)";
    match n {
        Node::IncDec { target, delta, .. } => {
            Ok(global(target).map(|id| (id, GlobalAdd::Const(*delta))))
        }
        Node::Assign { target, value } => {
            let Some(id) = global(target) else {
                return Ok(None);
            };
            match &**value {
                Node::Binary {
                    op: bop @ (BinOp::Add | BinOp::Sub),
                    a,
                    b,
                    ..
                } if matches!(&**a, Node::Var { id: x, scope: Scope::Global, .. } if *x == id) => {
                    Ok(Some((id, GlobalAdd::Node(b, *bop == BinOp::Sub))))
                }
                _ => Err(other.into()),
            }
        }
        _ => Ok(None),
    }
}

/// Why a node stays in user space.
fn describe(n: &Node) -> String {
    match n {
        Node::Str(_) => "a string".into(),
        Node::Var {
            scope: Scope::Thread,
            ..
        } => "a `self->` variable that is not an integer".into(),
        Node::Var {
            scope: Scope::Global,
            ..
        } => "a global read in the kernel (its value would depend on the order of the CPUs)".into(),
        Node::Var { .. } => "a clause-local (`this->`) that is not an integer".into(),
        Node::Array { .. } => "an associative array".into(),
        Node::Load { .. } | Node::Bitfield { .. } => "a load from memory".into(),
        Node::Args { .. } => "typed `args[]`".into(),
        Node::Call { name, .. } => format!("`{name}()`"),
        Node::Assign { .. } | Node::IncDec { .. } => "an assignment inside an expression".into(),
        _ => "an expression the kernel back end does not compile".into(),
    }
}
