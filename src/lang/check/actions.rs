//! Actions and aggregations as statements of a clause: each action's argument rules
//! (`printf`, `printa`, `trace`, `tracemem`, `stack`, `ustack`, `clear`, `trunc`, `normalize`,
//! ...), the aggregating functions (`lquantize`/`llquantize` parameters and their consistency
//! across uses), and the ordering rules of speculation (`speculate`, `commit`, `discard`).

use super::expr::Typed;
use super::{AggInfo, Checker};
use crate::ir::printf::{self as pf, ArgType};
use crate::ir::Subr;
use crate::lang::ast::*;
use crate::lang::builtins::{self, Builtin, BuiltinKind};
use crate::lang::diag::{derr, DResult};

/// The kinds of record a clause's statements have produced so far, for the speculation rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActKind {
    Commit,
    Speculate,
    Discard,
    Aggregation,
    Exit,
    Destructive,
    /// An action that records data (trace, printf, stack, ...).
    DataRecording,
    /// A statement that records nothing (assignments, void expressions).
    Silent,
}

/// Per-clause state: the actions seen so far, in order.
#[derive(Default)]
pub struct ClauseCx {
    pub acts: Vec<ActKind>,
}

impl ClauseCx {
    /// Applies DTrace's rules for a new statement against all earlier ones.
    pub fn append(&mut self, kind: ActKind, line: u32) -> DResult<()> {
        let mut all = self.acts.clone();
        all.push(kind);
        let (mut commit, mut speculate, mut datarec) = (false, false, false);
        for (i, k) in all.iter().enumerate() {
            match k {
                ActKind::Commit => {
                    if commit {
                        return Err(derr(
                            "D_COMM_COMM",
                            line,
                            "commit( ) may not follow commit( )",
                        ));
                    }
                    if datarec {
                        return Err(derr(
                            "D_COMM_DREC",
                            line,
                            "commit( ) may not follow data-recording action(s)",
                        ));
                    }
                    if all[i..].contains(&ActKind::Aggregation) {
                        return Err(derr(
                            "D_AGG_COMM",
                            line,
                            "aggregating actions may not follow commit( )",
                        ));
                    }
                    commit = true;
                    continue;
                }
                ActKind::Speculate => {
                    if speculate {
                        return Err(derr(
                            "D_SPEC_SPEC",
                            line,
                            "speculate( ) may not follow speculate( )",
                        ));
                    }
                    if commit {
                        return Err(derr(
                            "D_SPEC_COMM",
                            line,
                            "speculate( ) may not follow commit( )",
                        ));
                    }
                    if datarec {
                        return Err(derr(
                            "D_SPEC_DREC",
                            line,
                            "speculate( ) may not follow data-recording action(s)",
                        ));
                    }
                    speculate = true;
                    continue;
                }
                ActKind::Aggregation => {
                    if speculate {
                        return Err(derr(
                            "D_AGG_SPEC",
                            line,
                            "aggregating actions may not follow speculate( )",
                        ));
                    }
                    datarec = true;
                    continue;
                }
                _ => {}
            }
            if speculate {
                if *k == ActKind::Destructive {
                    return Err(derr(
                        "D_ACT_SPEC",
                        line,
                        "destructive actions may not follow speculate( )",
                    ));
                }
                if *k == ActKind::Exit {
                    return Err(derr(
                        "D_EXIT_SPEC",
                        line,
                        "exit( ) may not follow speculate( )",
                    ));
                }
            }
            if matches!(k, ActKind::Destructive | ActKind::Discard | ActKind::Silent) {
                continue;
            }
            if commit {
                return Err(derr(
                    "D_DREC_COMM",
                    line,
                    "data-recording actions may not follow commit( )",
                ));
            }
            if !speculate {
                datarec = true;
            }
        }
        self.acts.push(kind);
        Ok(())
    }
}

fn is_posconst(t: &Typed) -> bool {
    matches!(t.konst, Some(v) if v > 0)
}

/// `lquantize()`'s optional step (argument #3): a positive 16-bit constant; 1 when absent.
fn lquantize_step(s: Option<&Typed>, line: u32) -> DResult<i64> {
    let Some(s) = s else {
        return Ok(1);
    };
    if !is_posconst(s) {
        return Err(derr(
            "D_LQUANT_STEPTYPE",
            line,
            "lquantize( ) argument #3 must be a non-zero positive integer constant",
        ));
    }
    let step = s.konst.unwrap_or(1);
    if step > u16::MAX as i64 {
        return Err(derr(
            "D_LQUANT_STEPVAL",
            line,
            "lquantize( ) argument #3 must be a 16-bit quantity",
        ));
    }
    Ok(step)
}

/// A later `lquantize()` of one aggregation has the earlier one's base, limit and step
/// (`old` is `[base, levels, step]`).
fn lquantize_matches(old: &[i64], base: i64, nlevels: i64, step: i64, line: u32) -> DResult<()> {
    let (ob, on, os) = (old[0], old[1], old[2]);
    if ob != base {
        return Err(derr(
            "D_LQUANT_MATCHBASE",
            line,
            format!("lquantize( ) base (argument #1) doesn't match previous declaration: expected {ob}, found {base}"),
        ));
    }
    if on * os != nlevels * step {
        return Err(derr(
            "D_LQUANT_MATCHLIM",
            line,
            format!(
                "lquantize( ) limit (argument #2) doesn't match previous declaration: expected {}, found {}",
                ob + on * os,
                base + nlevels * step
            ),
        ));
    }
    if os != step {
        return Err(derr(
            "D_LQUANT_MATCHSTEP",
            line,
            format!("lquantize( ) step (argument #3) doesn't match previous declaration: expected {os}, found {step}"),
        ));
    }
    Ok(())
}

/// `llquantize()`'s four parameters, by name, and their tags (not a constant, out of range,
/// unlike an earlier use).
const LLQUANT_NAMES: [&str; 4] = [
    "factor",
    "low magnitude",
    "high magnitude",
    "linear steps per magnitude",
];
const LLQUANT_TAGS: [(&str, &str, &str); 4] = [
    (
        "D_LLQUANT_FACTORTYPE",
        "D_LLQUANT_FACTORVAL",
        "D_LLQUANT_FACTORMATCH",
    ),
    (
        "D_LLQUANT_LOWTYPE",
        "D_LLQUANT_LOWVAL",
        "D_LLQUANT_LOWMATCH",
    ),
    (
        "D_LLQUANT_HIGHTYPE",
        "D_LLQUANT_HIGHVAL",
        "D_LLQUANT_HIGHMATCH",
    ),
    (
        "D_LLQUANT_NSTEPTYPE",
        "D_LLQUANT_NSTEPVAL",
        "D_LLQUANT_NSTEPMATCH",
    ),
];

/// `llquantize()`'s parameter `i` (argument #`i + 1`): an unsigned 16-bit constant.
fn llquantize_arg(typed: &[Typed], i: usize, line: u32) -> DResult<i64> {
    let v = typed[i + 1].konst.ok_or_else(|| {
        derr(
            LLQUANT_TAGS[i].0,
            line,
            format!(
                "llquantize( ) argument #{} ({}) must be an integer constant",
                i + 1,
                LLQUANT_NAMES[i]
            ),
        )
    })?;
    if (v as u64) > u16::MAX as u64 {
        return Err(derr(
            LLQUANT_TAGS[i].1,
            line,
            format!(
                "llquantize( ) argument #{} ({}) must be an unsigned 16-bit quantity",
                i + 1,
                LLQUANT_NAMES[i]
            ),
        ));
    }
    Ok(v)
}

impl Checker<'_> {
    /// The printf view of a D type.
    pub(crate) fn printf_arg(&self, t: &Typed) -> pf::ArgDesc {
        let ty = &self.types;
        let id = t.ty;
        let at = if t.agg.is_some() {
            ArgType::Aggregation
        } else if ty.is_string(id) {
            ArgType::String
        } else if ty.resolve(id) == ty.resolve(ty.stack) {
            ArgType::Stack
        } else if ty.resolve(id) == ty.resolve(ty.symaddr) {
            ArgType::Symbol
        } else if ty.resolve(id) == ty.resolve(ty.usymaddr) {
            ArgType::USymbol
        } else if ty.is_float(id) {
            ArgType::Float {
                size: ty.size_of(id) as u8,
            }
        } else if ty.is_integer(id) {
            ArgType::Int {
                size: ty.size_of(id) as u8,
                signed: ty.is_signed(id),
                is_char: ty.is_char_like(id),
                is_enum: matches!(ty.rkind(id), crate::lang::types::TypeKind::Enum { .. }),
            }
        } else if ty.is_pointer(id) && self.is_wchar_pointer(id) {
            ArgType::WcharPointer
        } else if ty.is_pointer(id) {
            let r = ty.referent(id).unwrap_or(ty.void);
            ArgType::Pointer {
                pointee_is_char: ty.is_char_like(r),
                is_void: ty.is_void(r),
            }
        } else if ty.is_array(id) && self.is_wchar_wide_array(id) {
            // an array of integers as wide as wchar_t: what `%ws` / `%ls` print
            // (libdtrace's pfcheck_wstr: an array whose element is any integer of
            // NBBY * sizeof (wchar_t) bits, so `uint16_t[]` and `short[]` too)
            ArgType::WcharArray
        } else if ty.is_array(id) {
            ArgType::Array {
                elem_is_char: ty.is_char_ptr_or_array(id),
            }
        } else if matches!(ty.rkind(id), crate::lang::types::TypeKind::Struct { .. }) {
            ArgType::Struct
        } else if matches!(ty.rkind(id), crate::lang::types::TypeKind::Union { .. }) {
            ArgType::Union
        } else if ty.is_function(id) {
            ArgType::Function
        } else {
            ArgType::Void
        };
        let name = ty.name(id);
        let base = ty.name(ty.resolve(id));
        pf::ArgDesc::named(at, &name, &base)
    }

    /// Whether `id` is an array of integers of `wchar_t`'s width (16 bits: Windows'), which
    /// `%ws` / `%ls` accept.
    fn is_wchar_wide_array(&self, id: crate::lang::types::TypeId) -> bool {
        let ty = &self.types;
        let wide = ty.lookup("wchar_t").map(|w| ty.size_of(w));
        ty.referent(id)
            .is_some_and(|e| ty.is_integer(e) && Some(ty.size_of(e)) == wide)
    }

    /// Whether `id` is a pointer to `wchar_t`, which `%ws` / `%ls` accept.
    pub(crate) fn is_wchar_pointer(&self, id: crate::lang::types::TypeId) -> bool {
        let ty = &self.types;
        ty.is_pointer(id)
            && ty.referent(id).map(|e| ty.resolve(e)) == ty.lookup("wchar_t").map(|w| ty.resolve(w))
    }

    fn printf_check(
        &mut self,
        b: &Builtin,
        args: &[Expr],
        typed: &[Typed],
        line: u32,
    ) -> DResult<()> {
        let Some(fmt) = typed.first().and_then(|t| t.str_const.clone()) else {
            let arg = typed
                .first()
                .map(|t| self.types.name(t.ty))
                .unwrap_or_default();
            return Err(derr(
                "D_PRINTF_ARG_FMT",
                line,
                format!(
                    "{}( ) argument #1 is incompatible with prototype:\n\tprototype: string constant\n\t argument: {arg}",
                    b.name
                ),
            ));
        };
        // dt_cc.c, dt_action_printflike: "." is libdtrace's sentinel for "restore stdout"
        // (DT_FREOPEN_RESTORE), so a script may not name it
        if b.name == "freopen" && fmt == "." {
            return Err(derr(
                "D_FREOPEN_INVALID",
                line,
                "freopen( ) argument #1 cannot be \".\"",
            ));
        }
        let _ = args;
        let parsed = pf::parse(&fmt).map_err(|e| derr(e.tag, line, e.message))?;
        let descs: Vec<pf::ArgDesc> = typed[1..].iter().map(|t| self.printf_arg(t)).collect();
        let opts = pf::CheckOptions {
            exact_len: true,
            ..pf::CheckOptions::for_func(b.name)
        };
        pf::check_args(&parsed, b.name, &descs, &opts).map_err(|e| derr(e.tag, line, e.message))?;
        Ok(())
    }

    fn agg_arg(
        &self,
        name: &str,
        t: &Typed,
        argno: usize,
        tag: &'static str,
        line: u32,
    ) -> DResult<String> {
        match &t.agg {
            Some(a) => Ok(a.clone()),
            None => Err(derr(
                tag,
                line,
                format!(
                    "{name}( ) argument #{argno} is incompatible with prototype:\n\tprototype: aggregation\n\t argument: {}",
                    self.types.name(t.ty)
                ),
            )),
        }
    }

    /// Types an action's arguments; aggregation references are allowed here.
    fn action_args(&mut self, args: &[Expr]) -> DResult<Vec<Typed>> {
        let mut v = Vec::with_capacity(args.len());
        for a in args {
            let t = match &a.kind {
                ExprKind::Agg(n) => Typed {
                    agg: Some(n.clone()),
                    dvar: true,
                    ..Typed::rvalue(self.types.int64)
                },
                ExprKind::Call { func, .. }
                    if matches!(&func.kind, ExprKind::Ident(n)
                        if self.builtin(n).is_some_and(|b| b.kind == BuiltinKind::AggFunc)) =>
                {
                    Typed {
                        action: true,
                        ..Typed::rvalue(self.types.void)
                    }
                }
                _ => self.expr(a)?,
            };
            v.push(t);
        }
        Ok(v)
    }

    fn agg_defined(&self, name: &str, tag: &'static str, line: u32) -> DResult<()> {
        if self.aggs.contains_key(name) {
            Ok(())
        } else {
            Err(derr(tag, line, format!("undefined aggregation: {name}")))
        }
    }

    /// An action called as a statement. Returns the kind of record it makes.
    pub(crate) fn action_stmt(
        &mut self,
        b: &'static Builtin,
        args: &[Expr],
        line: u32,
    ) -> DResult<ActKind> {
        let name = b.name;
        let typed = self.action_args(args)?;
        if b.destructive {
            self.uses_destructive = true;
        }
        let n = typed.len();
        let kind = match name {
            "printf" | "system" | "freopen" => {
                if n == 0 {
                    return Err(derr(
                        "D_PROTO_LEN",
                        line,
                        builtins::check_call_arity(
                            name,
                            &b.parsed_proto().map_err(|m| derr("D_UNKNOWN", line, m))?,
                            0,
                        )
                        .err()
                        .unwrap_or_default(),
                    ));
                }
                self.printf_check(b, args, &typed, line)?;
                if name == "printf" {
                    ActKind::DataRecording
                } else {
                    ActKind::Destructive
                }
            }
            "printa" => {
                if n == 0 || (n == 1 && typed[0].str_const.is_some()) {
                    let argr = if n >= 1 && typed[0].str_const.is_some() {
                        2
                    } else {
                        1
                    };
                    return Err(derr(
                        "D_PRINTA_PROTO",
                        line,
                        format!("printa( ) prototype mismatch: {n} args passed, {argr} expected"),
                    ));
                }
                let (fmt, first) = match &typed[0].str_const {
                    Some(f) => (Some(f.clone()), 1),
                    None => (None, 0),
                };
                let mut proto_keys: Option<Option<Vec<u32>>> = None;
                for (argr, t) in typed
                    .iter()
                    .enumerate()
                    .skip(first)
                    .map(|(i, t)| (i + 1, t))
                {
                    let a = self.agg_arg("printa", t, argr, "D_PRINTA_AGGARG", line)?;
                    self.agg_defined(&a, "D_PRINTA_AGGBAD", line)?;
                    let info = self.aggs[&a].clone();
                    let keys: Option<Vec<u32>> = info.keys.clone();
                    match &proto_keys {
                        None => proto_keys = Some(keys.clone()),
                        Some(p) => {
                            let pl = p.as_ref().map(|v| v.len()).unwrap_or(0);
                            let kl = keys.as_ref().map(|v| v.len()).unwrap_or(0);
                            let first_agg = typed[first].agg.clone().unwrap_or_default();
                            if pl != kl {
                                return Err(derr(
                                    "D_PRINTA_AGGKEY",
                                    line,
                                    format!(
                                        "printa( ): {first_agg} and {a} do not have matching key signatures: {first_agg} has {pl} key{}, {a} has {kl} key{}",
                                        if pl == 1 { "" } else { "s" },
                                        if kl == 1 { "" } else { "s" }
                                    ),
                                ));
                            }
                            if let (Some(p), Some(k)) = (p, &keys) {
                                for (i, (x, y)) in p.iter().zip(k).enumerate() {
                                    if !self.types.compatible(*x, *y) {
                                        return Err(derr(
                                            "D_PRINTA_AGGPROTO",
                                            line,
                                            format!(
                                                "printa( ): {first_agg}[ ] key #{} is incompatible with {a}:\n{:>9} key #{}: {}\n{:>9} key #{}: {}",
                                                i + 1,
                                                first_agg,
                                                i + 1,
                                                self.types.name(*x),
                                                a,
                                                i + 1,
                                                self.types.name(*y)
                                            ),
                                        ));
                                    }
                                }
                            }
                        }
                    }
                    if let Some(f) = &fmt {
                        if argr == first + 1 {
                            let parsed = pf::parse(f).map_err(|e| derr(e.tag, line, e.message))?;
                            let key_descs: Vec<pf::ArgDesc> = keys
                                .clone()
                                .unwrap_or_default()
                                .iter()
                                .map(|k| self.printf_arg(&Typed::rvalue(*k)))
                                .collect();
                            let opts = pf::CheckOptions {
                                aggregation: true,
                                agg_signed: info.func != "count",
                                ..pf::CheckOptions::for_func("printa")
                            };
                            pf::check_args(&parsed, "printa", &key_descs, &opts)
                                .map_err(|e| derr(e.tag, line, e.message))?;
                        }
                    }
                }
                ActKind::DataRecording
            }
            "trace" | "print" => {
                self.check_proto(b, &typed, line)?;
                let t = &typed[0];
                let tr = name == "trace";
                if t.agg.is_some() {
                    return Err(derr(
                        if tr { "D_TRACE_AGG" } else { "D_PRINT_AGG" },
                        line,
                        format!(
                            "{name}( ) may not be applied to an aggregation{}",
                            if tr { "" } else { " -- did you mean printa()?" }
                        ),
                    ));
                }
                if self.types.is_void(t.ty) {
                    return Err(derr(
                        if tr { "D_TRACE_VOID" } else { "D_PRINT_VOID" },
                        line,
                        format!("{name}( ) may not be applied to a void expression"),
                    ));
                }
                ActKind::DataRecording
            }
            "etw_trace" => {
                self.etw_trace_call(args, line)?;
                ActKind::DataRecording
            }
            "tracemem" => {
                if (2..=3).contains(&n) {
                    let p = b.parsed_proto().map_err(|m| derr("D_UNKNOWN", line, m))?;
                    self.check_proto_arg_types(b, &p, &typed, line)?;
                }
                if n < 2 {
                    return Err(derr(
                        "D_PROTO_LEN",
                        line,
                        format!(
                            "tracemem( ) prototype mismatch: {n} arg{}passed, 2 expected",
                            if n == 1 { " " } else { "s " }
                        ),
                    ));
                }
                let a = &typed[0];
                if !self.types.is_integer(a.ty)
                    && !self.types.is_pointer(a.ty)
                    && !self.types.is_array(a.ty)
                {
                    return Err(derr(
                        "D_TRACEMEM_ADDR",
                        line,
                        format!(
                            "tracemem( ) argument #1 is incompatible with prototype:\n\tprototype: pointer or integer\n\t argument: {}",
                            self.types.name(a.ty)
                        ),
                    ));
                }
                if !is_posconst(&typed[1]) {
                    return Err(derr(
                        "D_TRACEMEM_SIZE",
                        line,
                        "tracemem( ) argument #2 must be a non-zero positive integral constant expression",
                    ));
                }
                if n > 3 {
                    return Err(derr(
                        "D_TRACEMEM_ARGS",
                        line,
                        "tracemem ( ) prototype mismatch: expected at most 3 args",
                    ));
                }
                if n == 3 && !self.types.is_scalar(typed[2].ty) {
                    return Err(derr(
                        "D_TRACEMEM_DYNSIZE",
                        line,
                        "tracemem ( ) dynamic size (argument #3) must be of scalar type",
                    ));
                }
                ActKind::DataRecording
            }
            "stack" => {
                self.stack_args(&typed, line)?;
                ActKind::DataRecording
            }
            "ustack" | "jstack" => {
                self.ustack_args(&typed, line)?;
                ActKind::DataRecording
            }
            "clear" | "denormalize" => {
                let tag_proto = if name == "clear" {
                    "D_CLEAR_PROTO"
                } else {
                    "D_NORMALIZE_PROTO"
                };
                if n != 1 {
                    return Err(derr(
                        tag_proto,
                        line,
                        format!("{name}( ) prototype mismatch: {n} args passed, 1 expected"),
                    ));
                }
                let (argtag, badtag) = if name == "clear" {
                    ("D_CLEAR_AGGARG", "D_CLEAR_AGGBAD")
                } else {
                    ("D_NORMALIZE_AGGARG", "D_NORMALIZE_AGGBAD")
                };
                let a = self.agg_arg(name, &typed[0], 1, argtag, line)?;
                self.agg_defined(&a, badtag, line)?;
                ActKind::DataRecording
            }
            "normalize" => {
                if n != 2 {
                    return Err(derr(
                        "D_NORMALIZE_PROTO",
                        line,
                        format!("normalize( ) prototype mismatch: {n} args passed, 2 expected"),
                    ));
                }
                let a = self.agg_arg(name, &typed[0], 1, "D_NORMALIZE_AGGARG", line)?;
                if !self.types.is_scalar(typed[1].ty) || typed[1].agg.is_some() {
                    return Err(derr(
                        "D_NORMALIZE_SCALAR",
                        line,
                        "normalize( ) argument #2 must be of scalar type",
                    ));
                }
                self.agg_defined(&a, "D_NORMALIZE_AGGBAD", line)?;
                ActKind::DataRecording
            }
            "trunc" => {
                if !(1..=2).contains(&n) {
                    return Err(derr(
                        "D_TRUNC_PROTO",
                        line,
                        format!(
                            "trunc( ) prototype mismatch: {n} args passed, {} expected",
                            if n < 1 {
                                "at least 1"
                            } else {
                                "no more than 2"
                            }
                        ),
                    ));
                }
                let a = self.agg_arg(name, &typed[0], 1, "D_TRUNC_AGGARG", line)?;
                if n == 2 && (!self.types.is_scalar(typed[1].ty) || typed[1].agg.is_some()) {
                    return Err(derr(
                        "D_TRUNC_SCALAR",
                        line,
                        "trunc( ) argument #2 must be of scalar type",
                    ));
                }
                self.agg_defined(&a, "D_TRUNC_AGGBAD", line)?;
                ActKind::DataRecording
            }
            "speculate" => {
                self.check_proto(b, &typed, line)?;
                ActKind::Speculate
            }
            "commit" => {
                self.check_proto(b, &typed, line)?;
                ActKind::Commit
            }
            "discard" => {
                self.check_proto(b, &typed, line)?;
                ActKind::Discard
            }
            "exit" => {
                self.check_proto(b, &typed, line)?;
                ActKind::Exit
            }
            "setopt" => {
                self.check_proto(b, &typed, line)?;
                ActKind::DataRecording
            }
            "func" | "sym" | "mod" | "ufunc" | "usym" | "umod" | "uaddr" => {
                self.check_proto(b, &typed, line)?;
                ActKind::DataRecording
            }
            _ => {
                self.check_proto(b, &typed, line)?;
                if b.destructive {
                    ActKind::Destructive
                } else {
                    ActKind::DataRecording
                }
            }
        };
        Ok(kind)
    }

    fn stack_args(&mut self, typed: &[Typed], line: u32) -> DResult<()> {
        if typed.len() > 1 {
            return Err(derr(
                "D_STACK_PROTO",
                line,
                "stack( ) prototype mismatch: too many arguments",
            ));
        }
        if let Some(a) = typed.first() {
            if !is_posconst(a) {
                return Err(derr(
                    "D_STACK_SIZE",
                    line,
                    "stack( ) size must be a non-zero positive integral constant expression",
                ));
            }
        }
        Ok(())
    }

    fn ustack_args(&mut self, typed: &[Typed], line: u32) -> DResult<()> {
        if let Some(a) = typed.first() {
            if !is_posconst(a) {
                return Err(derr(
                    "D_USTACK_FRAMES",
                    line,
                    "ustack( ) argument #1 must be a non-zero positive integer constant",
                ));
            }
        }
        if let Some(a) = typed.get(1) {
            if !matches!(a.konst, Some(v) if v >= 0) {
                return Err(derr(
                    "D_USTACK_STRSIZE",
                    line,
                    "ustack( ) argument #2 must be a positive integer constant",
                ));
            }
            if typed.len() > 2 {
                return Err(derr(
                    "D_USTACK_PROTO",
                    line,
                    "ustack( ) prototype mismatch: too many arguments",
                ));
            }
        }
        Ok(())
    }

    /// Types an aggregation key, where `stack()`, `ustack()`, `sym()`... are allowed.
    fn agg_key(&mut self, k: &Expr, nth: usize) -> DResult<u32> {
        if let ExprKind::Call { func, args } = &k.kind {
            if let ExprKind::Ident(n) = &func.kind {
                if let Some(b) = self.builtin(n) {
                    if b.kind == BuiltinKind::Action {
                        let typed = self.action_args(args)?;
                        return match Subr::from_name(b.name) {
                            Subr::Stack => {
                                self.stack_args(&typed, k.line)?;
                                Ok(self.types.stack)
                            }
                            Subr::Ustack | Subr::Jstack => {
                                self.ustack_args(&typed, k.line)?;
                                Ok(self.types.stack)
                            }
                            Subr::Sym | Subr::Mod | Subr::Func => {
                                self.check_proto(b, &typed, k.line)?;
                                Ok(self.types.symaddr)
                            }
                            Subr::Usym | Subr::Umod | Subr::Ufunc | Subr::Uaddr => {
                                self.check_proto(b, &typed, k.line)?;
                                Ok(self.types.usymaddr)
                            }
                            _ => Err(derr(
                                "D_KEY_TYPE",
                                k.line,
                                format!("{n}( ) may not be used as an aggregation key"),
                            )),
                        };
                    }
                }
            }
        }
        let t = self.expr(k)?;
        if t.action || self.types.is_void(t.ty) || t.agg.is_some() {
            let what = if t.agg.is_some() {
                "aggregation".to_string()
            } else {
                self.types.name(t.ty)
            };
            return Err(derr(
                "D_KEY_TYPE",
                k.line,
                // dt_ident.c, dt_idcook_assc
                format!("{what} expression may not be used as aggregation index: key #{nth}"),
            ));
        }
        Ok(t.ty)
    }

    /// `@agg[keys] = func(args)`: the function, its keys and arguments, then the checks of the
    /// function's own family, then agreement with the aggregation's earlier uses.
    pub(crate) fn aggregation(
        &mut self,
        agg: &str,
        keys: Option<&[Expr]>,
        rhs: &Expr,
        line: u32,
    ) -> DResult<()> {
        let (b, args) = self.agg_function(agg, rhs, line)?;
        let mut key_types = Vec::new();
        if let Some(ks) = keys {
            for (i, k) in ks.iter().enumerate() {
                key_types.push(self.agg_key(k, i + 1)?);
            }
        }
        let typed = self.agg_args(b, args, line)?;
        let (params, incr_idx) = match b.name {
            "lquantize" => (self.lquantize_params(agg, &typed, line)?, Some((4, 5))),
            "llquantize" => (self.llquantize_params(agg, &typed, line)?, Some((5, 6))),
            "quantize" => (Vec::new(), Some((1, 2))),
            _ => (Vec::new(), None),
        };
        if let Some((idx, argmax)) = incr_idx {
            self.quantize_increment(b, &typed, idx, argmax, line)?;
        }
        if self.aggs.contains_key(agg) {
            return self.agg_matches_earlier(agg, b, &key_types, line);
        }
        let id = self.new_var_id();
        self.aggs.insert(
            agg.to_string(),
            AggInfo {
                func: b.name.to_string(),
                keys: keys.map(|_| key_types),
                id,
                params,
                line,
            },
        );
        Ok(())
    }

    /// The aggregating function `rhs` calls, and its arguments.
    fn agg_function<'e>(
        &self,
        agg: &str,
        rhs: &'e Expr,
        line: u32,
    ) -> DResult<(&'static Builtin, &'e [Expr])> {
        let not_agg = || {
            derr(
                "D_AGG_FUNC",
                line,
                format!("{agg} must be assigned the result of an aggregating function"),
            )
        };
        let ExprKind::Call { func, args } = &rhs.kind else {
            return Err(not_agg());
        };
        let fname = match &func.kind {
            ExprKind::Ident(n) => n.clone(),
            _ => String::new(),
        };
        match self.builtin(&fname) {
            Some(b) if b.kind == BuiltinKind::AggFunc => Ok((b, args)),
            Some(_) => Err(not_agg()),
            None => Err(derr(
                "D_FUNC_UNDEF",
                line,
                format!("undefined function name: {fname}"),
            )),
        }
    }

    /// The typed arguments of an aggregating function, checked against its prototype; the
    /// first (the value aggregated) must be a scalar.
    fn agg_args(&mut self, b: &Builtin, args: &[Expr], line: u32) -> DResult<Vec<Typed>> {
        let mut typed = Vec::new();
        for a in args {
            let t = self.expr(a)?;
            if t.action {
                return Err(derr(
                    "D_OP_ACT",
                    a.line,
                    "action cannot be used as a function argument",
                ));
            }
            typed.push(t);
        }
        let proto = b.parsed_proto().map_err(|m| derr("D_UNKNOWN", line, m))?;
        self.check_proto_args(b, &proto, &typed, line)?;
        if let Some(first) = typed.first() {
            if !self.types.is_scalar(first.ty) {
                return Err(derr(
                    "D_AGG_SCALAR",
                    line,
                    format!("{}( ) argument #1 must be of scalar type", b.name),
                ));
            }
        }
        Ok(typed)
    }

    /// `lquantize(value, base, limit[, step[, incr]])`: constant 32-bit bounds, a 16-bit step
    /// and level count, the same as an earlier use. Returns `[base, levels, step]`.
    fn lquantize_params(&self, agg: &str, typed: &[Typed], line: u32) -> DResult<Vec<i64>> {
        let base = typed[1].konst.ok_or_else(|| {
            derr(
                "D_LQUANT_BASETYPE",
                line,
                "lquantize( ) argument #1 must be an integer constant",
            )
        })?;
        if base < i32::MIN as i64 || base > i32::MAX as i64 {
            return Err(derr(
                "D_LQUANT_BASEVAL",
                line,
                "lquantize( ) argument #1 must be a 32-bit quantity",
            ));
        }
        let limit = typed[2].konst.ok_or_else(|| {
            derr(
                "D_LQUANT_LIMTYPE",
                line,
                "lquantize( ) argument #2 must be an integer constant",
            )
        })?;
        if limit < i32::MIN as i64 || limit > i32::MAX as i64 {
            return Err(derr(
                "D_LQUANT_LIMVAL",
                line,
                "lquantize( ) argument #2 must be a 32-bit quantity",
            ));
        }
        if limit < base {
            return Err(derr(
                "D_LQUANT_MISMATCH",
                line,
                "lquantize( ) base (argument #1) must be less than limit (argument #2)",
            ));
        }
        let step = lquantize_step(typed.get(3), line)?;
        let nlevels = (limit - base) / step;
        if nlevels == 0 {
            return Err(derr(
                "D_LQUANT_STEPLARGE",
                line,
                "lquantize( ) step (argument #3) too large: must have at least one quantization level",
            ));
        }
        if nlevels > u16::MAX as i64 {
            return Err(derr(
                "D_LQUANT_STEPSMALL",
                line,
                "lquantize( ) step (argument #3) too small: number of quantization levels must be a 16-bit quantity",
            ));
        }
        if let Some(old) = self.aggs.get(agg).filter(|a| a.func == "lquantize") {
            lquantize_matches(&old.params, base, nlevels, step, line)?;
        }
        Ok(vec![base, nlevels, step])
    }

    /// `llquantize(value, factor, low, high, nsteps[, incr])`: four unsigned 16-bit constants
    /// that make whole magnitudes within 64 bits, the same as an earlier use.
    fn llquantize_params(&self, agg: &str, typed: &[Typed], line: u32) -> DResult<Vec<i64>> {
        let mut vals = [0i64; 4];
        for (i, v) in vals.iter_mut().enumerate() {
            *v = llquantize_arg(typed, i, line)?;
        }
        let [factor, low, high, nsteps] = vals;
        if factor < 2 {
            return Err(derr(
                "D_LLQUANT_FACTORSMALL",
                line,
                "llquantize( ) factor (argument #1) must be two or more",
            ));
        }
        if low >= high {
            return Err(derr(
                "D_LLQUANT_MAGRANGE",
                line,
                "llquantize( ) high magnitude (argument #3) must be greater than low magnitude (argument #2)",
            ));
        }
        if nsteps < factor {
            return Err(derr(
                "D_LLQUANT_FACTORNSTEPS",
                line,
                "llquantize( ) factor (argument #1) must be less than or equal to the number of linear steps per magnitude (argument #4)",
            ));
        }
        let mut v = factor;
        while v < nsteps {
            v *= factor;
        }
        if nsteps % factor != 0 || v % nsteps != 0 {
            return Err(derr(
                "D_LLQUANT_FACTOREVEN",
                line,
                "llquantize( ) factor (argument #1) must evenly divide the number of steps per magnitude (argument #4), and the number of steps per magnitude must evenly divide a power of the factor",
            ));
        }
        let mut order: u64 = 1;
        for _ in 0..high {
            match order.checked_mul(factor as u64) {
                Some(o) => order = o,
                None => {
                    return Err(derr(
                        "D_LLQUANT_MAGTOOBIG",
                        line,
                        format!("llquantize( ) factor ({factor}) raised to power of high magnitude ({high}) overflows 64-bits"),
                    ))
                }
            }
        }
        if let Some(old) = self.aggs.get(agg).filter(|a| a.func == "llquantize") {
            for i in 0..4 {
                if old.params[i] != vals[i] {
                    return Err(derr(
                        LLQUANT_TAGS[i].2,
                        line,
                        format!(
                            "llquantize( ) {} (argument #{}) doesn't match previous declaration: expected {}, found {}",
                            LLQUANT_NAMES[i],
                            i + 1,
                            old.params[i],
                            vals[i]
                        ),
                    ));
                }
            }
        }
        Ok(vals.to_vec())
    }

    /// The quantizing functions' optional increment (argument `argmax`, at `idx`): a scalar,
    /// and the last argument.
    fn quantize_increment(
        &self,
        b: &Builtin,
        typed: &[Typed],
        idx: usize,
        argmax: usize,
        line: u32,
    ) -> DResult<()> {
        let Some(incr) = typed.get(idx) else {
            return Ok(());
        };
        if !self.types.is_scalar(incr.ty) {
            return Err(derr(
                "D_PROTO_ARG",
                line,
                format!(
                    "{}( ) increment value (argument #{argmax}) must be of scalar type",
                    b.name
                ),
            ));
        }
        if typed.len() > idx + 1 {
            return Err(derr(
                "D_PROTO_LEN",
                line,
                format!(
                    "{}( ) prototype mismatch: {} args passed, at most {argmax} expected",
                    b.name,
                    typed.len()
                ),
            ));
        }
        Ok(())
    }

    /// A later use of an aggregation: the same function, as many keys, of compatible types.
    fn agg_matches_earlier(
        &self,
        agg: &str,
        b: &Builtin,
        key_types: &[crate::lang::types::TypeId],
        line: u32,
    ) -> DResult<()> {
        let Some(old) = self.aggs.get(agg) else {
            return Ok(());
        };
        if old.func != b.name {
            return Err(derr(
                "D_AGG_REDEF",
                line,
                // dt_parser.c, dt_cook_op2 (DT_TOK_ASGN)
                format!(
                    "aggregation redefined: {agg}\n\t current: {agg} = {}( )\n\
                     \tprevious: {agg} = {}( ) : line {}",
                    b.name, old.func, old.line
                ),
            ));
        }
        let ol = old.keys.as_ref().map(|k| k.len()).unwrap_or(0);
        let nl = key_types.len();
        if ol != nl {
            return Err(derr(
                "D_AGG_MDIM",
                line,
                format!(
                    "{agg}[ ] prototype mismatch: {nl} key{}passed, {ol} expected",
                    if nl == 1 { " " } else { "s " }
                ),
            ));
        }
        let Some(ok) = &old.keys else {
            return Ok(());
        };
        for (i, (x, y)) in ok.iter().zip(key_types).enumerate() {
            let compat = self.types.compatible(*x, *y)
                || (self.types.is_integer(*x) && self.types.is_integer(*y))
                || (self.types.is_string(*x) && self.types.is_char_ptr_or_array(*y))
                || (self.types.is_string(*y) && self.types.is_char_ptr_or_array(*x));
            if !compat {
                return Err(derr(
                    "D_PROTO_ARG",
                    line,
                    format!(
                        "{agg}[ ] key #{} is incompatible with prototype:\n\tprototype: {}\n\t      key: {}",
                        i + 1,
                        self.types.name(*x),
                        self.types.name(*y)
                    ),
                ));
            }
        }
        Ok(())
    }
}
