//! Probe clauses: matching their probe descriptions against the probe catalog, the predicate,
//! and the statements of the body (expressions, actions, aggregations, `if`).

use super::actions::{ActKind, ClauseCx};
use super::Checker;
use crate::lang::ast::*;
use crate::lang::builtins::BuiltinKind;
use crate::lang::diag::{derr, DResult};
use crate::probes::ProbeDesc;

impl Checker<'_> {
    pub(crate) fn clause(&mut self, c: &Clause) -> DResult<()> {
        self.clause_probe_args(c)?;
        let r = self.clause_body(c);
        self.probe_args = None;
        self.probe_xlate.clear();
        r
    }

    /// The types of `args[]` of the probes a clause enables (when they all agree), and the
    /// native types of the translated ones.
    pub(crate) fn clause_probe_args(&mut self, c: &Clause) -> DResult<()> {
        let mut arg_types: Option<(Vec<String>, Vec<String>)> = None;
        let mut first = true;
        // dtrace's BEGIN and END take no arguments: args[N] there is D_ARGS_IDX
        let mut no_args = !c.probes.is_empty();
        // every probe matched gives args[] no types (none matched: not known)
        let mut untyped = None;
        // every probe matched is the `pid` entry (or every one the return) of this one
        // function, whose args[] the target's prototype can type
        let mut pid_entry: Option<Option<(String, String, bool)>> = None;
        self.probe_args_desc = None;
        for p in &c.probes {
            let (desc, line) = self.probe_desc(p)?;
            if self.probe_args_desc.is_none() {
                self.probe_args_desc = Some(desc.to_string());
            }
            let matched = self
                .catalog
                .try_matching(&desc)
                .map_err(|e| derr(e.tag, line, e.message))?;
            if matched.is_empty() && !self.opts.zdefs() {
                // dtrace's words, and why where a provider can say (a .NET target's methods)
                let why = self
                    .catalog
                    .why_none(&desc)
                    .map(|w| format!(": {w}"))
                    .unwrap_or_default();
                return Err(derr(
                    "D_PDESC_ZERO",
                    line,
                    format!("probe description {desc} does not match any probes{why}"),
                ));
            }
            no_args &= !matched.is_empty();
            for m in matched {
                no_args &= m.provider == "dtrace" && (m.name == "BEGIN" || m.name == "END");
                untyped = Some(untyped.unwrap_or(true) && m.arg_types.is_empty());
                let entry = (m.provider.starts_with("pid")
                    && matches!(m.name.as_str(), "entry" | "return")
                    && m.arg_types.is_empty())
                .then(|| (m.module.clone(), m.function.clone(), m.name == "return"));
                pid_entry = Some(match pid_entry {
                    None => entry,
                    Some(prev) if prev == entry => prev,
                    Some(_) => None,
                });
                let these = (m.arg_types.clone(), m.arg_native.clone());
                if first {
                    arg_types = Some(these);
                    first = false;
                } else if arg_types.as_ref() != Some(&these) {
                    arg_types = Some((Vec::new(), Vec::new()));
                }
            }
        }
        self.probe_xlate.clear();
        if let Some((types, native)) = &arg_types {
            for (i, n) in native.iter().enumerate() {
                let Some(x) = types.get(i) else { break };
                if n.is_empty() || n == x {
                    continue;
                }
                let names: crate::lang::parser::TypeNames =
                    self.types.type_names().cloned().collect();
                let parse = |t: &str| crate::lang::parser::parse_type_name(t, names.clone());
                if let (Ok(nt), Ok(xt)) = (parse(n), parse(x)) {
                    self.probe_xlate.insert(i, (nt, xt));
                }
            }
        }
        self.probe_no_args = no_args;
        self.probe_args_untyped = untyped == Some(true);
        self.probe_args =
            arg_types.map(|(v, _)| v.iter().map(|t| self.type_from_text(t)).collect());
        self.probe_args_pid = None;
        let pid_func = pid_entry.clone().flatten().map(|(_, f, _)| f);
        if let (Some(Some((module, func, ret))), Some(t)) = (pid_entry, self.target_types.clone()) {
            if !ret {
                if let Some(params) = t.params(&module, &func, &mut self.types) {
                    self.probe_args = Some(params);
                    self.probe_args_untyped = false;
                }
            } else if let Some(r) = t.returns(&module, &func, &mut self.types) {
                // at `return` arg0 is the return instruction's offset and arg1 rax: the
                // return value when it is an integer, an enum or a pointer (a float comes
                // back in xmm0, a struct of more than 8 bytes through a hidden buffer)
                if self.types.is_integer(r) || self.types.is_pointer(r) {
                    let offset = self.type_from_text("uint64_t");
                    self.probe_args = Some(vec![offset, r]);
                    self.probe_args_untyped = false;
                }
            }
        }
        // a pid function's args that stay untyped: the refusal of args[N]->x says why
        if let (true, Some(func), Some(t)) =
            (self.probe_args_untyped, pid_func, self.target_types.clone())
        {
            self.probe_args_pid = Some((func, t));
        }
        Ok(())
    }

    fn clause_body(&mut self, c: &Clause) -> DResult<()> {
        // DTrace cooks the actions first; if they refer to a variable the predicate creates,
        // it cooks the predicate first and then the actions.
        let mut cx = ClauseCx::default();
        let mut body_done = false;
        if let Some(body) = &c.body {
            match self.statements(body, &mut cx) {
                Ok(()) => body_done = true,
                Err(e)
                    if c.predicate.is_some()
                        && matches!(e.tag, "D_IDENT_UNDEF" | "D_VAR_UNDEF") =>
                {
                    cx = ClauseCx::default();
                }
                Err(e) => return Err(e),
            }
        } else {
            body_done = true;
        }
        if let Some(pred) = &c.predicate {
            let t = self.expr(pred)?;
            if t.action {
                return Err(derr(
                    "D_OP_ACT",
                    pred.line,
                    "action cannot be used in a conditional context",
                ));
            }
            if !self.types.is_scalar(t.ty) {
                return Err(derr(
                    "D_PRED_SCALAR",
                    pred.line,
                    "predicate result must be of scalar type",
                ));
            }
        }
        if !body_done {
            if let Some(body) = &c.body {
                self.statements(body, &mut cx)?;
            }
        }
        Ok(())
    }

    fn statements(&mut self, body: &[Stmt], cx: &mut ClauseCx) -> DResult<()> {
        for s in body {
            match s {
                Stmt::Empty => {}
                Stmt::If {
                    cond,
                    then,
                    otherwise,
                    line,
                } => {
                    let t = self.expr(cond)?;
                    if t.action {
                        return Err(derr(
                            "D_OP_ACT",
                            *line,
                            "action cannot be used in a conditional context",
                        ));
                    }
                    if !self.types.is_scalar(t.ty) && !self.types.is_string(t.ty) {
                        return Err(derr(
                            "D_COND_SCALAR",
                            *line,
                            "if condition must be of scalar type",
                        ));
                    }
                    self.statements(then, cx)?;
                    if let Some(o) = otherwise {
                        self.statements(o, cx)?;
                    }
                }
                Stmt::Expr(e) => {
                    let kind = self.statement(e)?;
                    super::regs::check(e)?;
                    cx.append(kind, e.line)?;
                }
            }
        }
        Ok(())
    }

    /// One expression statement: an action, an aggregation, or an expression.
    fn statement(&mut self, e: &Expr) -> DResult<ActKind> {
        match &e.kind {
            ExprKind::Call { func, args } => {
                if let ExprKind::Ident(n) = &func.kind {
                    if let Some(b) = self.builtin(n) {
                        if b.kind == BuiltinKind::Action {
                            return self.action_stmt(b, args, e.line);
                        }
                    }
                }
            }
            ExprKind::Assign(None, lhs, rhs) => {
                if let ExprKind::Index { base, .. } = &lhs.kind {
                    if let ExprKind::Index { base: inner, .. } = &base.kind {
                        if let ExprKind::Agg(a) = &inner.kind {
                            return Err(derr(
                                "D_AGG_MDIM",
                                e.line,
                                format!("improper attempt to reference {a} as a multi-dimensional array"),
                            ));
                        }
                    }
                }
                let target = match &lhs.kind {
                    ExprKind::Agg(a) => Some((a.clone(), None)),
                    ExprKind::Index { base, keys } => match &base.kind {
                        ExprKind::Agg(a) => Some((a.clone(), Some(keys.as_slice()))),
                        _ => None,
                    },
                    _ => None,
                };
                if let Some((agg, keys)) = target {
                    self.aggregation(&agg, keys, rhs, e.line)?;
                    return Ok(ActKind::Aggregation);
                }
            }
            ExprKind::Agg(a) => {
                if self.aggs.contains_key(a) {
                    return Err(derr(
                        "D_AGG_NULL",
                        e.line,
                        format!("expression has null effect: {a}"),
                    ));
                }
                return Err(self.undefined(a, e.line));
            }
            ExprKind::Index { base, .. } if matches!(base.kind, ExprKind::Agg(_)) => {
                let ExprKind::Agg(a) = &base.kind else {
                    unreachable!()
                };
                return Err(derr(
                    "D_AGG_NULL",
                    e.line,
                    format!("expression has null effect: {a}"),
                ));
            }
            _ => {}
        }
        let t = self.expr(e)?;
        if t.action {
            return Ok(ActKind::DataRecording);
        }
        if let ExprKind::Call { func, .. } = &e.kind {
            if let ExprKind::Ident(n) = &func.kind {
                if self.builtin(n).is_some_and(|b| b.destructive) {
                    self.uses_destructive = true;
                    return Ok(ActKind::Destructive);
                }
            }
        }
        // An expression statement is a DIFEXPR action whose return type libdtrace sets to
        // void (dt_cc.c, dt_compile_exp: `dtdo_rtype = dt_void_rtype`), and
        // dt_stmt_append skips void DIFEXPRs when it looks for data-recording actions:
        // `commit(s); strlen("x");` and `commit(s); x = 1;` are both accepted.
        Ok(ActKind::Silent)
    }
}

impl Checker<'_> {
    /// A clause's probe description (`prov:mod:func:name`, or a probe id) and its line.
    pub(crate) fn probe_desc(&self, spec: &ProbeSpec) -> DResult<(ProbeDesc, u32)> {
        match spec {
            ProbeSpec::Name { text, line } => ProbeDesc::parse(text)
                .map(|d| (d, *line))
                .map_err(|msg| derr("D_PDESC_INVAL", *line, msg)),
            ProbeSpec::Id { id, line } => {
                self.catalog.by_id(*id).map(|d| (d, *line)).ok_or_else(|| {
                    derr(
                        "D_PDESC_ZERO",
                        *line,
                        format!("probe description {id} does not match any probes"),
                    )
                })
            }
        }
    }

    /// The argument types (translated, native) the probes one description matches agree on,
    /// `None` when they differ or the description is invalid or matches nothing (the checker
    /// reports those).
    fn description_args(&self, spec: &ProbeSpec) -> Option<(Vec<String>, Vec<String>)> {
        let (desc, _) = self.probe_desc(spec).ok()?;
        let matched = self.catalog.try_matching(&desc).ok()?;
        let first = matched.first()?;
        let args = (first.arg_types.clone(), first.arg_native.clone());
        matched
            .iter()
            .all(|m| m.arg_types == args.0 && m.arg_native == args.1)
            .then_some(args)
    }

    /// DTrace compiles a clause once for each of its probe descriptions, each with its own
    /// `args[]` types: `io:::start, tcpip:::send { print(*args[0]); }` prints a `bufinfo_t` for
    /// one and an `ipinfo_t` for the other. A clause whose descriptions give different argument
    /// types becomes one clause per description here (in order, with the same predicate and
    /// body); the others stay whole.
    pub fn split_clauses(&self, program: Program) -> Program {
        let mut items = Vec::with_capacity(program.items.len());
        for item in program.items {
            let Item::Clause(c) = item else {
                items.push(item);
                continue;
            };
            let split = c.probes.len() > 1 && {
                let args: Vec<_> = c.probes.iter().map(|s| self.description_args(s)).collect();
                args.iter().all(Option::is_some) && args.windows(2).any(|w| w[0] != w[1])
            };
            if !split {
                items.push(Item::Clause(c));
                continue;
            }
            for spec in &c.probes {
                items.push(Item::Clause(Clause {
                    probes: vec![spec.clone()],
                    ..c.clone()
                }));
            }
        }
        Program { items }
    }
}
