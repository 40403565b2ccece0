//! Lowering: from the checked syntax tree to the runtime's [`ir::Program`]. Every expression is
//! re-typed through the checker (which is idempotent once the program has been checked) and turned
//! into a [`Node`] whose operations are fully resolved.

use std::collections::HashMap;

use super::Checker;
use crate::ir::printf;
use crate::ir::{
    self, Action, ActionKind, AggFunc, BinOp as IBin, CmpKind, CmpOp, LValue, Node, Scope,
    Stmt as IStmt, ValKind,
};
use crate::lang::ast::*;
use crate::lang::builtins::BuiltinKind;
use crate::lang::diag::{derr, DResult};
use crate::lang::types::TypeId;

/// State of one lowering run.
#[derive(Default)]
pub struct Lowering {
    /// Names bound to lowered values (translator inputs, inline parameters).
    bindings: HashMap<String, Node>,
    /// The next action id.
    next_action: u32,
}

impl Lowering {
    fn action_id(&mut self) -> u32 {
        self.next_action += 1;
        self.next_action - 1
    }
}

impl Checker<'_> {
    pub(crate) fn val_kind(&self, ty: TypeId) -> ValKind {
        let t = &self.types;
        if t.is_string(ty) {
            ValKind::String
        } else if t.is_sou(ty) || t.is_array(ty) {
            ValKind::ByRef {
                size: t.size_of(ty).min(u32::MAX as u64) as u32,
            }
        } else if t.is_pointer(ty) || t.is_function(ty) {
            ValKind::Int {
                size: t.model.pointer_size() as u8,
                signed: false,
            }
        } else if t.is_integer(ty) {
            ValKind::Int {
                size: t.size_of(ty).clamp(1, 8) as u8,
                signed: t.is_signed(ty),
            }
        } else {
            ValKind::I64
        }
    }

    /// Lowers the whole program (after [`Checker::program`] or the clause pass succeeded).
    pub fn lower_program(&mut self, p: &Program) -> DResult<ir::Program> {
        let mut lw = Lowering::default();
        let mut clauses = Vec::new();
        for item in &p.items {
            let Item::Clause(c) = item else { continue };
            clauses.push(self.lower_clause(&mut lw, c)?);
        }
        let mut variables: Vec<ir::Variable> = Vec::new();
        let mut put = |id: u32, v: ir::Variable| {
            let i = id as usize;
            if variables.len() <= i {
                variables.resize(
                    i + 1,
                    ir::Variable {
                        name: String::new(),
                        scope: Scope::Global,
                        kind: ValKind::I64,
                        keys: None,
                    },
                );
            }
            variables[i] = v;
        };
        for (tables, scope) in [
            (&self.globals, Scope::Global),
            (&self.thread_vars, Scope::Thread),
            (&self.clause_vars, Scope::Clause),
        ] {
            for (name, v) in tables.iter() {
                put(
                    v.id,
                    ir::Variable {
                        name: name.clone(),
                        scope,
                        kind: self.val_kind(v.ty),
                        keys: v
                            .keys
                            .as_ref()
                            .map(|ks| ks.iter().map(|k| self.val_kind(*k)).collect()),
                    },
                );
            }
        }
        let mut aggs: Vec<(u32, ir::Aggregation)> = self
            .aggs
            .iter()
            .map(|(name, a)| {
                let func = match (AggFunc::parameterless(&a.func), a.func.as_str()) {
                    (Some(f), _) => f,
                    (None, "lquantize") => AggFunc::Lquantize {
                        base: a.params[0] as i32,
                        levels: a.params[1] as u16,
                        step: a.params[2] as u16,
                    },
                    _ => AggFunc::Llquantize {
                        factor: a.params[0] as u16,
                        low: a.params[1] as u16,
                        high: a.params[2] as u16,
                        nsteps: a.params[3] as u16,
                    },
                };
                (
                    a.id,
                    ir::Aggregation {
                        name: name.clone(),
                        func,
                        keys: a
                            .keys
                            .as_ref()
                            .map(|ks| ks.iter().map(|k| self.val_kind(*k)).collect())
                            .unwrap_or_default(),
                    },
                )
            })
            .collect();
        aggs.sort_by_key(|(id, _)| *id);
        // aggregation ids in the IR are dense indexes
        let index: HashMap<u32, u32> = aggs
            .iter()
            .enumerate()
            .map(|(i, (id, _))| (*id, i as u32))
            .collect();
        for c in &mut clauses {
            renumber_aggs(&mut c.body, &index);
        }
        Ok(ir::Program {
            clauses,
            variables,
            aggregations: aggs.into_iter().map(|(_, a)| a).collect(),
        })
    }

    fn lower_clause(&mut self, lw: &mut Lowering, c: &Clause) -> DResult<ir::Clause> {
        let mut probes = Vec::new();
        for p in &c.probes {
            probes.push(self.probe_desc(p)?.0);
        }
        self.clause_probe_args(c)?;
        let lowered = self.lower_clause_body(lw, c);
        self.probe_args = None;
        self.probe_xlate.clear();
        let (predicate, body) = lowered?;
        Ok(ir::Clause {
            probes,
            predicate,
            body,
            line: c.line,
        })
    }

    fn lower_clause_body(
        &mut self,
        lw: &mut Lowering,
        c: &Clause,
    ) -> DResult<(Option<Node>, Vec<IStmt>)> {
        let predicate = match &c.predicate {
            Some(p) => Some(self.lower(lw, p)?),
            None => None,
        };
        let body = match &c.body {
            Some(b) => self.lower_stmts(lw, b)?,
            None => Vec::new(),
        };
        Ok((predicate, body))
    }

    /// `args[N]` where the clause's probes translate argument N: the same as
    /// `xlate<T>((native)argN)` (DTrace applies the probe's translator to its native argument).
    fn args_xlate(&mut self, e: &Expr) -> DResult<Option<Expr>> {
        if self.probe_xlate.is_empty() {
            return Ok(None);
        }
        let ExprKind::Index { base, keys } = &e.kind else {
            return Ok(None);
        };
        match &base.kind {
            ExprKind::Ident(n) if n == "args" && keys.len() == 1 => {}
            _ => return Ok(None),
        }
        if self.globals.contains_key("args") {
            return Ok(None);
        }
        let Some(i) = self.expr(&keys[0])?.konst else {
            return Ok(None);
        };
        let Some((native, xlate)) = usize::try_from(i)
            .ok()
            .and_then(|i| self.probe_xlate.get(&i))
        else {
            return Ok(None);
        };
        let line = e.line;
        let arg = Expr::new(ExprKind::Ident(format!("arg{i}")), line);
        let cast = Expr::new(
            ExprKind::Cast(Box::new(native.clone()), Box::new(arg)),
            line,
        );
        Ok(Some(Expr::new(
            ExprKind::Xlate(Box::new(xlate.clone()), Box::new(cast)),
            line,
        )))
    }

    fn lower_stmts(&mut self, lw: &mut Lowering, body: &[Stmt]) -> DResult<Vec<IStmt>> {
        let mut out = Vec::new();
        for s in body {
            match s {
                Stmt::Empty => {}
                Stmt::If {
                    cond,
                    then,
                    otherwise,
                    ..
                } => out.push(IStmt::If {
                    cond: self.lower(lw, cond)?,
                    then: self.lower_stmts(lw, then)?,
                    otherwise: match otherwise {
                        Some(o) => self.lower_stmts(lw, o)?,
                        None => Vec::new(),
                    },
                }),
                Stmt::Expr(e) => out.push(self.lower_stmt(lw, e)?),
            }
        }
        Ok(out)
    }

    fn lower_stmt(&mut self, lw: &mut Lowering, e: &Expr) -> DResult<IStmt> {
        if let ExprKind::Call { func, args } = &e.kind {
            if let ExprKind::Ident(n) = &func.kind {
                if let Some(b) = self.builtin(n) {
                    if b.kind == BuiltinKind::Action {
                        return Ok(IStmt::Action(self.lower_action(lw, b.name, args, e.line)?));
                    }
                }
            }
        }
        if let ExprKind::Assign(None, lhs, rhs) = &e.kind {
            let (agg, keys) = match &lhs.kind {
                ExprKind::Agg(a) => (Some(a), &[][..]),
                ExprKind::Index { base, keys } => match &base.kind {
                    ExprKind::Agg(a) => (Some(a), keys.as_slice()),
                    _ => (None, &[][..]),
                },
                _ => (None, &[][..]),
            };
            if let Some(agg) = agg {
                let id = self.aggs.get(agg).map(|a| a.id).unwrap_or(0);
                let ExprKind::Call { args, .. } = &rhs.kind else {
                    return Err(derr("D_AGG_FUNC", e.line, "aggregating function expected"));
                };
                let mut knodes = Vec::new();
                let mut kkinds = Vec::new();
                for k in keys {
                    kkinds.push(match self.expr(k) {
                        Ok(t) => self.val_kind(t.ty),
                        Err(_) => ValKind::I64, // stack(), sym(): recorded by their own rules
                    });
                    knodes.push(self.lower_key(lw, k)?);
                }
                let mut anodes = Vec::new();
                let mut kinds = Vec::new();
                for a in args {
                    let t = self.expr(a)?;
                    kinds.push(self.val_kind(t.ty));
                    anodes.push(self.lower(lw, a)?);
                }
                return Ok(IStmt::Action(Action {
                    id: lw.action_id(),
                    kind: ActionKind::Aggregate { agg: id },
                    keys: knodes,
                    args: anodes,
                    arg_kinds: kinds,
                    key_kinds: kkinds,
                    line: e.line,
                }));
            }
        }
        Ok(IStmt::Eval(self.lower(lw, e)?))
    }

    /// An aggregation key: `stack()`, `ustack()`, `sym()`... record their own kind of value.
    fn lower_key(&mut self, lw: &mut Lowering, k: &Expr) -> DResult<Node> {
        if let ExprKind::Call { func, args } = &k.kind {
            if let ExprKind::Ident(n) = &func.kind {
                if let Some(b) = self.builtin(n) {
                    if b.kind == BuiltinKind::Action {
                        let mut a = Vec::new();
                        for x in args {
                            a.push(self.lower(lw, x)?);
                        }
                        return Ok(Node::Call {
                            subr: crate::ir::Subr::from_name(b.name),
                            name: b.name,
                            args: a,
                        });
                    }
                }
            }
        }
        self.lower(lw, k)
    }

    fn agg_id(&self, e: &Expr) -> u32 {
        match &e.kind {
            ExprKind::Agg(a) => self.aggs.get(a).map(|x| x.id).unwrap_or(0),
            _ => 0,
        }
    }

    fn const_arg(&mut self, e: Option<&Expr>, default: u64) -> DResult<u32> {
        Ok(match e {
            Some(x) => self.expr(x)?.konst.unwrap_or(default as i64) as u32,
            None => default as u32,
        })
    }

    fn lower_action(
        &mut self,
        lw: &mut Lowering,
        name: &'static str,
        args: &[Expr],
        line: u32,
    ) -> DResult<Action> {
        let fmt = |s: &Checker<'_>, e: Option<&Expr>| -> DResult<Format0> {
            let _ = s;
            match e.map(|x| &x.kind) {
                Some(ExprKind::Str(f)) => printf::parse(f)
                    .map(Some)
                    .map_err(|er| derr(er.tag, line, er.message)),
                _ => Ok(None),
            }
        };
        let mut rest_from = 0;
        // the arguments evaluated at each firing when they are not `args[rest_from..]`
        let mut picked: Option<Vec<usize>> = None;
        let kind = match name {
            "etw_trace" => {
                let call = self.etw_trace_call(args, line)?;
                picked = Some(call.runtime_args);
                ActionKind::EtwTrace(Box::new(call.def))
            }
            "printf" => {
                rest_from = 1;
                ActionKind::Printf(fmt(self, args.first())?.unwrap_or_else(empty_format))
            }
            "system" => {
                rest_from = 1;
                ActionKind::System(fmt(self, args.first())?.unwrap_or_else(empty_format))
            }
            "freopen" => {
                rest_from = 1;
                ActionKind::Freopen(fmt(self, args.first())?.unwrap_or_else(empty_format))
            }
            "printa" => {
                let format = fmt(self, args.first())?;
                let aggs = args[format.is_some() as usize..]
                    .iter()
                    .map(|a| self.agg_id(a))
                    .collect();
                rest_from = args.len();
                ActionKind::Printa { format, aggs }
            }
            "trace" => ActionKind::Trace,
            "print" => {
                let t = match args.first() {
                    Some(a) => self.expr(a)?.ty,
                    None => self.types.int,
                };
                ActionKind::Print(Box::new(self.ptype(t, 0)))
            }
            "tracemem" => ActionKind::Tracemem,
            "stack" => {
                rest_from = args.len();
                ActionKind::Stack {
                    frames: self.const_arg(args.first(), self.opts.stackframes())?,
                }
            }
            "ustack" => {
                rest_from = args.len();
                ActionKind::Ustack {
                    frames: self.const_arg(args.first(), self.opts.ustackframes())?,
                    strsize: self.const_arg(args.get(1), 0)?,
                }
            }
            "jstack" => {
                rest_from = args.len();
                ActionKind::Jstack {
                    frames: self.const_arg(args.first(), self.opts.jstackframes())?,
                    strsize: self.const_arg(args.get(1), self.opts.jstackstrsize())?,
                }
            }
            "sym" | "func" => ActionKind::Sym,
            "mod" => ActionKind::Mod,
            "usym" | "ufunc" => ActionKind::Usym,
            "umod" => ActionKind::Umod,
            "uaddr" => ActionKind::Uaddr,
            "exit" => ActionKind::Exit,
            "speculate" => ActionKind::Speculate,
            "commit" => ActionKind::Commit,
            "discard" => ActionKind::Discard,
            "clear" | "trunc" | "normalize" | "denormalize" => {
                let id = args.first().map(|a| self.agg_id(a)).unwrap_or(0);
                rest_from = 1;
                match name {
                    "clear" => ActionKind::Clear(id),
                    "trunc" => ActionKind::Trunc(id),
                    "normalize" => ActionKind::Normalize(id),
                    _ => ActionKind::Denormalize(id),
                }
            }
            "setopt" => ActionKind::Setopt,
            "ftruncate" => ActionKind::Ftruncate,
            "raise" => ActionKind::Raise,
            "stop" => ActionKind::Stop,
            "chill" => ActionKind::Chill,
            "breakpoint" => ActionKind::Breakpoint,
            "panic" => ActionKind::Panic,
            "lkd" => ActionKind::Lkd,
            other => {
                return Err(derr(
                    "D_UNKNOWN",
                    line,
                    format!("tracing function {other}( ) is not yet supported"),
                ))
            }
        };
        let mut nodes = Vec::new();
        let mut kinds = Vec::new();
        let evaluated: Vec<&Expr> = match &picked {
            Some(idx) => idx.iter().filter_map(|&i| args.get(i)).collect(),
            None => args[rest_from.min(args.len())..].iter().collect(),
        };
        let wide = match &kind {
            ActionKind::Printf(f) | ActionKind::System(f) | ActionKind::Freopen(f) => {
                f.wide_string_args()
            }
            _ => Vec::new(),
        };
        for (i, a) in evaluated.into_iter().enumerate() {
            let t = self.expr(a)?;
            if wide.contains(&i) && self.is_wchar_pointer(t.ty) {
                // `%ws` of a `wchar_t *`: the wide string it points to, read up to its NUL
                // (bounded by strsize, faulting on a bad address) as `wstringof()` does
                let read = Expr {
                    kind: ExprKind::Call {
                        func: Box::new(Expr {
                            kind: ExprKind::Ident("wstringof".into()),
                            line: a.line,
                        }),
                        args: vec![a.clone()],
                    },
                    line: a.line,
                };
                let t = self.expr(&read)?;
                kinds.push(self.val_kind(t.ty));
                nodes.push(self.lower(lw, &read)?);
                continue;
            }
            kinds.push(self.val_kind(t.ty));
            nodes.push(self.lower(lw, a)?);
        }
        Ok(Action {
            id: lw.action_id(),
            kind,
            keys: Vec::new(),
            args: nodes,
            arg_kinds: kinds,
            key_kinds: Vec::new(),
            line,
        })
    }

    /// The description of a type that `print()` needs.
    pub(crate) fn ptype(&self, ty: TypeId, depth: u32) -> crate::ir::ptype::PType {
        use crate::ir::ptype::{Member as PM, PType};
        use crate::lang::types::TypeKind as K;
        let t = &self.types;
        let name = t.name(ty);
        let r = t.resolve(ty);
        if depth > 32 {
            return PType::Forward { name };
        }
        match t.kind(r) {
            K::Integer {
                size,
                signed,
                is_char,
                ..
            } if *is_char && *size == 1 && *signed => PType::Char { name },
            K::Integer { size, signed, .. } => PType::Int {
                name,
                size: *size as u8,
                signed: *signed,
            },
            K::Float { size, .. } => PType::Float {
                name,
                size: *size as u8,
            },
            K::Pointer(p) => PType::Ptr {
                name,
                size: t.model.pointer_size() as u8,
                to_function: t.is_function(*p),
            },
            K::Array { elem, len } => PType::Array {
                name,
                elem: Box::new(self.ptype(*elem, depth + 1)),
                len: *len,
            },
            K::Struct {
                members,
                size,
                complete,
                ..
            }
            | K::Union {
                members,
                size,
                complete,
                ..
            } => {
                if !complete {
                    return PType::Forward { name };
                }
                let ms = members
                    .iter()
                    .map(|m| match m.bits {
                        Some(b) => PM::bitfield(
                            &m.name,
                            m.offset_bits,
                            b as u8,
                            self.ptype(m.ty, depth + 1),
                        ),
                        None => PM::new(&m.name, m.offset_bits, self.ptype(m.ty, depth + 1)),
                    })
                    .collect();
                if matches!(t.kind(r), K::Struct { .. }) {
                    PType::Struct {
                        name,
                        size: *size,
                        members: ms,
                    }
                } else {
                    PType::Union {
                        name,
                        size: *size,
                        members: ms,
                    }
                }
            }
            K::Enum { values, .. } => PType::Enum {
                name,
                size: 4,
                values: values.clone(),
            },
            K::String => PType::string(self.opts.strsize()),
            _ => PType::Forward { name },
        }
    }

    /// Lowers an expression to a value node.
    pub(crate) fn lower(&mut self, lw: &mut Lowering, e: &Expr) -> DResult<Node> {
        let t = self.expr(e)?;
        if let Some(k) = t.konst {
            if self.types.is_integer(t.ty) || self.types.is_pointer(t.ty) {
                return Ok(Node::Const(k));
            }
        }
        let line = e.line;
        Ok(match &e.kind {
            ExprKind::Int { value, .. } => Node::Const(*value as i64),
            ExprKind::Str(s) => Node::Str(s.clone()),
            ExprKind::Ident(name) => self.lower_ident(lw, name, t.ty, line)?,
            ExprKind::Agg(a) => {
                return Err(derr(
                    "D_AGG_SCALAR",
                    line,
                    format!("aggregation {a} may not be used as a value"),
                ))
            }
            ExprKind::SelfRef | ExprKind::ThisRef => Node::Const(0),
            ExprKind::Member { .. } | ExprKind::Index { .. } => match self.lower_lvalue(lw, e)? {
                LValue::Var { id, scope, kind } => Node::Var { id, scope, kind },
                LValue::Array {
                    id,
                    scope,
                    keys,
                    kind,
                } => Node::Array {
                    id,
                    scope,
                    keys,
                    kind,
                },
                LValue::Mem { addr, kind } => Node::Load {
                    addr: Box::new(addr),
                    kind,
                },
                LValue::Bitfield {
                    addr,
                    size,
                    shift,
                    bits,
                } => Node::Bitfield {
                    addr: Box::new(addr),
                    size,
                    shift,
                    bits,
                    signed: self.types.is_signed(t.ty),
                },
                LValue::Uregs(i) => Node::Uregs(Box::new(i)),
                LValue::Value(v) => v,
            },
            ExprKind::Call { func, args } => {
                let ExprKind::Ident(n) = &func.kind else {
                    return Err(derr(
                        "D_FUNC_IDENT",
                        line,
                        "function designator is not of function type",
                    ));
                };
                let Some(b) = self.builtin(n) else {
                    let why = crate::lang::builtins::microsoft_only(n)
                        .map_or_else(|| format!("undefined function name: {n}"), str::to_string);
                    return Err(derr("D_FUNC_UNDEF", line, why));
                };
                let mut a = Vec::new();
                for x in args {
                    a.push(self.lower(lw, x)?);
                }
                Node::Call {
                    subr: crate::ir::Subr::from_name(b.name),
                    name: b.name,
                    args: a,
                }
            }
            ExprKind::Unary(op, x) => self.lower_unary(lw, *op, x)?,
            ExprKind::Binary(op, a, b) => self.lower_binary(lw, *op, a, b, t.ty)?,
            ExprKind::Assign(op, a, b) => {
                let target = self.lower_lvalue(lw, a)?;
                let combined =
                    op.map(|o| Expr::new(ExprKind::Binary(o, a.clone(), b.clone()), line));
                let source = combined.as_ref().unwrap_or(b);
                let value = self.lower(lw, source)?;
                let value = self.narrow_for_variable(&target, value, source)?;
                Node::Assign {
                    target: Box::new(target),
                    value: Box::new(value),
                }
            }
            ExprKind::Ternary(c, a, b) => Node::Ternary(
                Box::new(self.lower(lw, c)?),
                Box::new(self.lower(lw, a)?),
                Box::new(self.lower(lw, b)?),
            ),
            ExprKind::Cast(_, x) => {
                let v = self.lower(lw, x)?;
                match self.val_kind(t.ty) {
                    ValKind::Int { size, signed } if self.types.is_integer(t.ty) => Node::Cast {
                        value: Box::new(v),
                        size,
                        signed,
                    },
                    _ => v,
                }
            }
            ExprKind::SizeofType(_) | ExprKind::SizeofExpr(_) | ExprKind::Offsetof(..) => {
                Node::Const(t.konst.unwrap_or(0))
            }
            ExprKind::Stringof(x) => Node::Stringof(Box::new(self.lower(lw, x)?)),
            ExprKind::Xlate(tn, input) => self.lower_xlate(lw, tn, input, line)?,
        })
    }

    fn lower_ident(
        &mut self,
        lw: &mut Lowering,
        name: &str,
        ty: TypeId,
        line: u32,
    ) -> DResult<Node> {
        if let Some(n) = lw.bindings.get(name) {
            return Ok(n.clone());
        }
        if let Some(v) = self.globals.get(name) {
            return Ok(Node::Var {
                id: v.id,
                scope: Scope::Global,
                kind: self.val_kind(v.ty),
            });
        }
        if let Some(inl) = self.inlines.get(name).cloned() {
            let v = self.lower(lw, &inl.value)?;
            return Ok(match self.val_kind(inl.ty) {
                ValKind::Int { size, signed } if self.types.is_integer(inl.ty) => Node::Cast {
                    value: Box::new(v),
                    size,
                    signed,
                },
                _ => v,
            });
        }
        let variable = crate::lang::builtins::variable(name);
        if let Some(b) = variable.or_else(|| self.builtin(name)) {
            if b.kind == BuiltinKind::Scalar {
                let _ = ty;
                let arg0 = crate::lang::builtins::var::ARG0;
                if (arg0..arg0 + 10).contains(&b.id) {
                    return Ok(Node::Arg((b.id - arg0) as u8));
                }
                return Ok(Node::Builtin {
                    id: b.id,
                    name: b.name,
                });
            }
        }
        Err(self.undefined(name, line))
    }

    fn member_addr(
        &mut self,
        lw: &mut Lowering,
        base: &Expr,
        arrow: bool,
    ) -> DResult<(Node, TypeId)> {
        let bt = self.expr(base)?;
        if arrow {
            let sou = self.types.referent(bt.ty).unwrap_or(bt.ty);
            Ok((self.lower(lw, base)?, sou))
        } else {
            Ok((self.addr_of(lw, base)?, bt.ty))
        }
    }

    /// The address of an lvalue expression (for `.`, `&`, and by-reference values).
    fn addr_of(&mut self, lw: &mut Lowering, e: &Expr) -> DResult<Node> {
        Ok(match self.lower_lvalue(lw, e)? {
            LValue::Mem { addr, .. } => addr,
            LValue::Var { id, scope, kind } => Node::Var { id, scope, kind },
            LValue::Array {
                id,
                scope,
                keys,
                kind,
            } => Node::Array {
                id,
                scope,
                keys,
                kind,
            },
            LValue::Bitfield { addr, .. } => addr,
            LValue::Uregs(i) => Node::Uregs(Box::new(i)),
            LValue::Value(v) => v,
        })
    }

    /// D variables keep the whole 64-bit value they are given, except that a value of a wider
    /// integer type is narrowed to the variable's type first (dtrace's typecast on assignment);
    /// memory lvalues narrow as they are stored.
    fn narrow_for_variable(
        &mut self,
        target: &LValue,
        value: Node,
        source: &Expr,
    ) -> DResult<Node> {
        let (size, signed) = match target {
            LValue::Var { kind, .. } | LValue::Array { kind, .. } => match *kind {
                ValKind::Int { size, signed } => (size, signed),
                _ => return Ok(value),
            },
            _ => return Ok(value),
        };
        // the source's type is only needed for integer variables
        let src = self.expr(source)?.ty;
        Ok(
            if self.types.is_integer(src) && u64::from(size) < self.types.size_of(src) {
                Node::Cast {
                    value: Box::new(value),
                    size,
                    signed,
                }
            } else {
                value
            },
        )
    }

    fn lower_lvalue(&mut self, lw: &mut Lowering, e: &Expr) -> DResult<LValue> {
        let t = self.expr(e)?;
        let kind = self.val_kind(t.ty);
        let line = e.line;
        match &e.kind {
            ExprKind::Ident(n) => match self.globals.get(n) {
                Some(v) => Ok(LValue::Var {
                    id: v.id,
                    scope: Scope::Global,
                    kind: self.val_kind(v.ty),
                }),
                None => {
                    let v = self.lower(lw, e)?;
                    Ok(LValue::Mem { addr: v, kind })
                }
            },
            ExprKind::Member { base, name, arrow } => {
                match (&base.kind, arrow) {
                    (ExprKind::SelfRef, true) | (ExprKind::ThisRef, true) => {
                        let (table, scope) = if matches!(base.kind, ExprKind::SelfRef) {
                            (&self.thread_vars, Scope::Thread)
                        } else {
                            (&self.clause_vars, Scope::Clause)
                        };
                        let v = table.get(name).ok_or_else(|| self.undefined(name, line))?;
                        return Ok(LValue::Var {
                            id: v.id,
                            scope,
                            kind: self.val_kind(v.ty),
                        });
                    }
                    _ => {}
                }
                // a translated member: lower the translator's expression for it
                if let Some(n) = self.lower_xlate_member(lw, base, name, *arrow)? {
                    return Ok(LValue::Value(n));
                }
                let (addr, sou) = self.member_addr(lw, base, *arrow)?;
                let m = self.types.member(sou, name).cloned().ok_or_else(|| {
                    derr(
                        "D_TYPE_MEMBER",
                        line,
                        format!("{name} is not a member of {}", self.types.name(sou)),
                    )
                })?;
                let byte = (m.offset_bits / 8) as i64;
                let at = add_const(addr, byte);
                match m.bits {
                    Some(bits) => {
                        // the field is read and written as an integer of just enough bytes
                        // for it, a power of two (libdtrace's `dt_cg_field_get()`), not as its
                        // declared type: a D struct's last bit-field may end the struct
                        let shift = m.offset_bits % 8;
                        let size = (shift + u64::from(bits))
                            .div_ceil(8)
                            .clamp(1, 8)
                            .next_power_of_two() as u8;
                        Ok(LValue::Bitfield {
                            addr: at,
                            size,
                            shift: (m.offset_bits % 8) as u8,
                            bits: bits as u8,
                        })
                    }
                    None => Ok(LValue::Mem { addr: at, kind }),
                }
            }
            ExprKind::Index { base, keys } => {
                let var = match &base.kind {
                    ExprKind::Ident(n) => self
                        .globals
                        .get(n)
                        .filter(|v| v.keys.is_some())
                        .map(|v| (v.id, Scope::Global, v.ty)),
                    ExprKind::Member {
                        base: b,
                        name,
                        arrow: true,
                    } => match b.kind {
                        ExprKind::SelfRef => self
                            .thread_vars
                            .get(name)
                            .filter(|v| v.keys.is_some())
                            .map(|v| (v.id, Scope::Thread, v.ty)),
                        ExprKind::ThisRef => self
                            .clause_vars
                            .get(name)
                            .filter(|v| v.keys.is_some())
                            .map(|v| (v.id, Scope::Clause, v.ty)),
                        _ => None,
                    },
                    _ => None,
                };
                if let Some((id, scope, vty)) = var {
                    let mut ks = Vec::new();
                    for k in keys {
                        ks.push(self.lower(lw, k)?);
                    }
                    return Ok(LValue::Array {
                        id,
                        scope,
                        keys: ks,
                        kind: self.val_kind(vty),
                    });
                }
                if let ExprKind::Ident(n) = &base.kind {
                    if !self.globals.contains_key(n) {
                        if let Some(inl) = self.inlines.get(n).cloned() {
                            if let Some(params) = &inl.params {
                                let mut bound = Vec::new();
                                for ((pname, pty), k) in params.iter().zip(keys) {
                                    bound.push((pname.clone(), *pty, self.lower(lw, k)?));
                                }
                                let v =
                                    self.with_bindings(lw, bound, |c, lw| c.lower(lw, &inl.value))?;
                                return Ok(LValue::Value(v));
                            }
                        }
                        if n == "args" {
                            if let Some(x) = self.args_xlate(e)? {
                                return Ok(LValue::Value(self.lower(lw, &x)?));
                            }
                            let i = self.lower(lw, &keys[0])?;
                            return Ok(LValue::Value(Node::Args {
                                index: Box::new(i),
                                kind,
                            }));
                        }
                        if n == "uregs" {
                            return Ok(LValue::Uregs(self.lower(lw, &keys[0])?));
                        }
                    }
                }
                let bt = self.expr(base)?;
                let b = if self.types.is_array(bt.ty) {
                    self.addr_of(lw, base)?
                } else {
                    self.lower(lw, base)?
                };
                let elem = if self.types.is_string(bt.ty) {
                    1
                } else {
                    self.types
                        .size_of(self.types.referent(bt.ty).unwrap_or(self.types.char))
                        .max(1)
                };
                let i = self.lower(lw, &keys[0])?;
                let off = scale(i, elem as i64);
                Ok(LValue::Mem {
                    addr: Node::Binary {
                        op: IBin::Add,
                        signed: false,
                        a: Box::new(b),
                        b: Box::new(off),
                    },
                    kind,
                })
            }
            ExprKind::Unary(UnOp::Deref, x) => Ok(LValue::Mem {
                addr: self.lower(lw, x)?,
                kind,
            }),
            _ => {
                let v = self.lower(lw, e)?;
                Ok(LValue::Mem { addr: v, kind })
            }
        }
    }

    /// A whole translated structure: every member the translator defines, in a scratch buffer.
    fn lower_xlate(
        &mut self,
        lw: &mut Lowering,
        tn: &TypeName,
        input: &Expr,
        line: u32,
    ) -> DResult<Node> {
        let to = self.type_name(tn)?;
        let out = if self.types.is_pointer(to) {
            self.types.referent(to).unwrap_or(to)
        } else {
            to
        };
        let it = self.expr(input)?;
        let Some(ti) = self.find_translator(out, it.ty) else {
            return Err(derr(
                "D_XLATE_NONE",
                line,
                format!(
                    "cannot translate from \"{}\" to \"{}\"",
                    self.types.name(it.ty),
                    self.types.name(to)
                ),
            ));
        };
        let tr = self.translators[ti].clone();
        let size = self.types.size_of(out) as u32;
        let mut fields = Vec::new();
        for (mname, _) in tr.members.iter() {
            let Some(m) = self.types.member(out, mname).cloned() else {
                continue;
            };
            let Some(v) = self.lower_xlate_member(
                lw,
                &Expr::new(
                    ExprKind::Xlate(Box::new(tn.clone()), Box::new(input.clone())),
                    line,
                ),
                mname,
                self.types.is_pointer(to),
            )?
            else {
                continue;
            };
            fields.push(ir::Field {
                offset_bits: m.offset_bits,
                bits: m.bits.map(|b| b as u8),
                kind: self.val_kind(m.ty),
                value: v,
            });
        }
        Ok(Node::Build { size, fields })
    }

    /// `xlate<T>(x).m`, `xlate<T *>(x)->m`: the translator's expression for member `m`.
    fn lower_xlate_member(
        &mut self,
        lw: &mut Lowering,
        base: &Expr,
        name: &str,
        arrow: bool,
    ) -> DResult<Option<Node>> {
        if let Some(x) = self.args_xlate(base)? {
            return self.lower_xlate_member(lw, &x, name, arrow);
        }
        let ExprKind::Xlate(tn, input) = &base.kind else {
            return Ok(None);
        };
        let to = self.type_name(tn)?;
        let out = if arrow {
            self.types.referent(to).unwrap_or(to)
        } else {
            to
        };
        let it = self.expr(input)?;
        let Some(ti) = self.find_translator(out, it.ty) else {
            return Ok(None);
        };
        let tr = self.translators[ti].clone();
        let Some((_, mexpr)) = tr.members.iter().find(|(m, _)| m == name) else {
            return Err(derr(
                "D_XLATE_NOCONV",
                base.line,
                format!("translator does not define conversion for member: {name}"),
            ));
        };
        let inode = self.lower(lw, input)?;
        let bound = vec![(tr.input_name.clone(), tr.input, inode)];
        let mexpr = mexpr.clone();
        let v = self.with_bindings(lw, bound, |c, lw| c.lower(lw, &mexpr))?;
        // an integer member has its member's type (`int r_status = R->r_status` of a 64-bit
        // native value reads as an int)
        let mty = self.types.member(out, name).map(|m| m.ty);
        Ok(Some(match mty.map(|t| (t, self.val_kind(t))) {
            Some((t, ValKind::Int { size, signed })) if self.types.is_integer(t) => Node::Cast {
                value: Box::new(v),
                size,
                signed,
            },
            _ => v,
        }))
    }

    /// Runs `f` with names bound to lowered values of the given types (translator inputs,
    /// inline parameters), visible both to typing (as opaque inlines) and to lowering.
    fn with_bindings<T>(
        &mut self,
        lw: &mut Lowering,
        bound: Vec<(String, TypeId, Node)>,
        f: impl FnOnce(&mut Self, &mut Lowering) -> DResult<T>,
    ) -> DResult<T> {
        let mut saved = Vec::new();
        for (name, ty, node) in bound {
            let old_inline = self.inlines.insert(
                name.clone(),
                super::InlineInfo {
                    ty,
                    value: std::sync::Arc::new(Expr::new(ExprKind::Ident(name.clone()), 0)),
                    params: None,
                    opaque: true,
                },
            );
            let old_binding = lw.bindings.insert(name.clone(), node);
            saved.push((name, old_inline, old_binding));
        }
        let r = f(self, lw);
        for (name, old_inline, old_binding) in saved.into_iter().rev() {
            match old_inline {
                Some(o) => self.inlines.insert(name.clone(), o),
                None => self.inlines.remove(&name),
            };
            match old_binding {
                Some(o) => lw.bindings.insert(name, o),
                None => lw.bindings.remove(&name),
            };
        }
        r
    }

    fn lower_unary(&mut self, lw: &mut Lowering, op: UnOp, x: &Expr) -> DResult<Node> {
        Ok(match op {
            UnOp::Neg => Node::Neg(Box::new(self.lower(lw, x)?)),
            UnOp::Plus => self.lower(lw, x)?,
            UnOp::Not => Node::Not(Box::new(self.lower(lw, x)?)),
            UnOp::BitNot => Node::BitNot(Box::new(self.lower(lw, x)?)),
            UnOp::Deref => match self.lower_lvalue(
                lw,
                &Expr::new(ExprKind::Unary(UnOp::Deref, Box::new(x.clone())), x.line),
            )? {
                LValue::Mem { addr, kind } => Node::Load {
                    addr: Box::new(addr),
                    kind,
                },
                _ => self.lower(lw, x)?,
            },
            UnOp::AddrOf => Node::AddrOf(Box::new(self.lower_lvalue(lw, x)?)),
            UnOp::PreInc | UnOp::PreDec | UnOp::PostInc | UnOp::PostDec => {
                let xt = self.expr(x)?;
                let step = match self.types.referent(xt.ty) {
                    Some(r) if self.types.is_pointer(xt.ty) => self.types.size_of(r).max(1) as i64,
                    _ => 1,
                };
                let delta = if matches!(op, UnOp::PreInc | UnOp::PostInc) {
                    step
                } else {
                    -step
                };
                Node::IncDec {
                    target: Box::new(self.lower_lvalue(lw, x)?),
                    delta,
                    post: matches!(op, UnOp::PostInc | UnOp::PostDec),
                }
            }
        })
    }

    fn lower_binary(
        &mut self,
        lw: &mut Lowering,
        op: BinOp,
        a: &Expr,
        b: &Expr,
        ty: TypeId,
    ) -> DResult<Node> {
        let ta = self.expr(a)?;
        let tb = self.expr(b)?;
        let na = self.lower(lw, a)?;
        let nb = self.lower(lw, b)?;
        let t = &self.types;
        let signed = t.is_signed(ty);
        let bin = |op: IBin, x: Node, y: Node| Node::Binary {
            op,
            signed,
            a: Box::new(x),
            b: Box::new(y),
        };
        Ok(match op {
            BinOp::Comma => Node::Seq(Box::new(na), Box::new(nb)),
            BinOp::And => Node::LogAnd(Box::new(na), Box::new(nb)),
            BinOp::Or => Node::LogOr(Box::new(na), Box::new(nb)),
            BinOp::Xor => Node::LogXor(Box::new(na), Box::new(nb)),
            BinOp::Lt | BinOp::Gt | BinOp::Le | BinOp::Ge | BinOp::Eq | BinOp::Ne => {
                // a string compared with NULL (the integer 0) compares addresses
                let kind = if (t.is_string(ta.ty) || t.is_string(tb.ty))
                    && self.is_strcompat(ta.ty)
                    && self.is_strcompat(tb.ty)
                {
                    CmpKind::String
                } else if t.is_arith(ta.ty)
                    && t.is_arith(tb.ty)
                    && t.is_signed(t.arith_result(ta.ty, tb.ty))
                {
                    CmpKind::Signed
                } else {
                    CmpKind::Unsigned
                };
                let cop = match op {
                    BinOp::Lt => CmpOp::Lt,
                    BinOp::Gt => CmpOp::Gt,
                    BinOp::Le => CmpOp::Le,
                    BinOp::Ge => CmpOp::Ge,
                    BinOp::Eq => CmpOp::Eq,
                    _ => CmpOp::Ne,
                };
                Node::Compare {
                    op: cop,
                    kind,
                    a: Box::new(na),
                    b: Box::new(nb),
                }
            }
            BinOp::Add | BinOp::Sub => {
                let pa = t.is_pointer(ta.ty) || t.is_array(ta.ty);
                let pb = t.is_pointer(tb.ty) || t.is_array(tb.ty);
                let elem = |x: TypeId| {
                    t.referent(x)
                        .map(|r| t.size_of(r).max(1) as i64)
                        .unwrap_or(1)
                };
                let iop = if op == BinOp::Add {
                    IBin::Add
                } else {
                    IBin::Sub
                };
                if pa && pb {
                    let e = elem(ta.ty);
                    let diff = bin(IBin::Sub, na, nb);
                    if e == 1 {
                        diff
                    } else {
                        Node::Binary {
                            op: IBin::Div,
                            signed: true,
                            a: Box::new(diff),
                            b: Box::new(Node::Const(e)),
                        }
                    }
                } else if pa {
                    let e = elem(ta.ty);
                    bin(iop, na, scale(nb, e))
                } else if pb {
                    let e = elem(tb.ty);
                    bin(iop, scale(na, e), nb)
                } else {
                    bin(iop, na, nb)
                }
            }
            BinOp::Mul => bin(IBin::Mul, na, nb),
            BinOp::Div => bin(IBin::Div, na, nb),
            BinOp::Mod => bin(IBin::Mod, na, nb),
            BinOp::BitAnd => bin(IBin::And, na, nb),
            BinOp::BitOr => bin(IBin::Or, na, nb),
            BinOp::BitXor => bin(IBin::Xor, na, nb),
            BinOp::Shl => bin(IBin::Shl, na, nb),
            BinOp::Shr => bin(IBin::Shr, na, nb),
        })
    }
}

type Format0 = Option<printf::Format>;

fn empty_format() -> printf::Format {
    printf::parse("").unwrap_or_else(|_| unreachable!("the empty format parses"))
}

fn add_const(n: Node, k: i64) -> Node {
    if k == 0 {
        return n;
    }
    Node::Binary {
        op: IBin::Add,
        signed: false,
        a: Box::new(n),
        b: Box::new(Node::Const(k)),
    }
}

fn scale(n: Node, by: i64) -> Node {
    if by == 1 {
        return n;
    }
    if let Node::Const(k) = n {
        return Node::Const(k.wrapping_mul(by));
    }
    Node::Binary {
        op: IBin::Mul,
        signed: true,
        a: Box::new(n),
        b: Box::new(Node::Const(by)),
    }
}

fn renumber_aggs(body: &mut [IStmt], index: &HashMap<u32, u32>) {
    for s in body {
        match s {
            IStmt::If {
                then, otherwise, ..
            } => {
                renumber_aggs(then, index);
                renumber_aggs(otherwise, index);
            }
            IStmt::Action(a) => match &mut a.kind {
                ActionKind::Aggregate { agg }
                | ActionKind::Clear(agg)
                | ActionKind::Trunc(agg)
                | ActionKind::Normalize(agg)
                | ActionKind::Denormalize(agg) => *agg = index.get(agg).copied().unwrap_or(*agg),
                ActionKind::Printa { aggs, .. } => {
                    for a in aggs {
                        *a = index.get(a).copied().unwrap_or(*a);
                    }
                }
                _ => {}
            },
            IStmt::Eval(_) => {}
        }
    }
}
