//! The stability attributes of a program's clauses, for `-v`'s report (dtrace's `exec_prog`).
//!
//! libdtrace gives every node it cooks an attribute and a clause the weakest of its nodes
//! (`dt_cook_clause`, `dt_node_list_cook`): D's own identifiers, literals and operators are
//! `Stable/Stable/Common`; a few built-ins are weaker (`curthread`, the `Evolving` byte-order and
//! lock subroutines of `dt_open.c`'s table); a kernel symbol or a type from a module is
//! `Private/Private/Unknown`; `probeprov`, `probemod`, `probefunc`, `probename` and `args` take
//! the attributes of the matched probe's provider (`dt_setcontext`); and `#pragma D attributes`
//! resets a program's own identifier. A clause with no action has D's default whatever its
//! predicate reads (`dt_compile_one_clause`).

use std::collections::HashMap;

use super::ast::{BaseSpec, Clause, Expr, ExprKind, Stmt, TypeName};
use super::check::Translator;
use super::types::TypeTable;
use crate::probes::stability::{description_info, Attr, UNNAMED_PROVIDER};
use crate::probes::{ProbeCatalog, ProbeDesc};

/// What one clause's statements give, before the probe it runs on is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClauseAttrs {
    /// The weakest attribute of the clause's nodes that do not depend on the probe.
    pub fixed: Attr,
    /// The probe-dependent identifiers the clause reads.
    pub context: ContextUse,
}

/// Which of the identifiers whose attributes are the provider's a clause reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextUse {
    pub probeprov: bool,
    pub probemod: bool,
    pub probefunc: bool,
    pub probename: bool,
    pub args: bool,
}

/// The built-ins weaker than D's default (`_dtrace_globals` in libdtrace's `dt_open.c`).
fn builtin_attr(name: &str) -> Option<Attr> {
    use crate::probes::stability::{DepClass, Stability};
    match name {
        "curthread" => Some(Attr {
            name: Stability::Stable,
            data: Stability::Private,
            class: DepClass::Common,
        }),
        "ddi_pathname"
        | "getmajor"
        | "getminor"
        | "htonl"
        | "htonll"
        | "htons"
        | "ntohl"
        | "ntohll"
        | "ntohs"
        | "mutex_owned"
        | "mutex_owner"
        | "mutex_type_adaptive"
        | "mutex_type_spin"
        | "rw_iswriter"
        | "rw_read_held"
        | "rw_write_held" => Some(Attr::EVOLVING),
        _ => None,
    }
}

/// The attributes of a program's own identifiers: an inline has those of its value (as
/// libdtrace cooks an inline's definition), and `#pragma D attributes A name` sets them.
pub fn program_idents(
    program: &super::ast::Program,
    pragmas: &[super::ast::Pragma],
    types: &TypeTable,
    translators: &[Translator],
) -> HashMap<String, Attr> {
    let mut out = HashMap::new();
    for item in &program.items {
        let super::ast::Item::Inline(def) = item else {
            continue;
        };
        let Some(name) = def.declarator.name() else {
            continue;
        };
        let mut walk = Walk {
            types,
            idents: &out,
            translators,
            attr: Attr::DEFAULT,
            context: ContextUse::default(),
        };
        walk.expr(&def.value);
        let a = walk.attr;
        out.insert(name.to_string(), a);
    }
    for p in pragmas {
        let w = &p.words;
        if w.len() == 5 && w[0] == "pragma" && w[1] == "D" && w[2] == "attributes" {
            if let Some(a) = Attr::parse(&w[3]) {
                out.insert(w[4].clone(), a);
            }
        }
    }
    out
}

/// The attributes of one clause's statements (see the module's comment).
pub fn clause_attrs(
    clause: &Clause,
    types: &TypeTable,
    idents: &HashMap<String, Attr>,
    translators: &[Translator],
) -> ClauseAttrs {
    let mut walk = Walk {
        types,
        idents,
        translators,
        attr: Attr::DEFAULT,
        context: ContextUse::default(),
    };
    // a clause with no action has D's default, whatever its predicate reads
    let body = clause.body.as_deref().unwrap_or(&[]);
    if body.iter().any(|s| !matches!(s, Stmt::Empty)) {
        walk.stmts(body);
        if let Some(p) = &clause.predicate {
            walk.expr(p);
        }
    }
    ClauseAttrs {
        fixed: walk.attr,
        context: walk.context,
    }
}

struct Walk<'a> {
    types: &'a TypeTable,
    /// The program's own identifiers' attributes ([`program_idents`]).
    idents: &'a HashMap<String, Attr>,
    translators: &'a [Translator],
    attr: Attr,
    context: ContextUse,
}

impl Walk<'_> {
    fn weaken(&mut self, a: Attr) {
        self.attr = self.attr.min(a);
    }

    fn stmts(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            match s {
                Stmt::Expr(e) => self.expr(e),
                Stmt::If {
                    cond,
                    then,
                    otherwise,
                    ..
                } => {
                    self.expr(cond);
                    self.stmts(then);
                    if let Some(o) = otherwise {
                        self.stmts(o);
                    }
                }
                Stmt::Empty => {}
            }
        }
    }

    fn ident(&mut self, name: &str) {
        match name {
            "probeprov" => self.context.probeprov = true,
            "probemod" => self.context.probemod = true,
            "probefunc" => self.context.probefunc = true,
            "probename" => self.context.probename = true,
            "args" => self.context.args = true,
            // a kernel or user symbol (`` `sym``, ``nt`sym``): `_dtrace_symattr`
            _ if name.contains('`') => self.weaken(Attr::PRIVATE),
            _ => {
                if let Some(a) = builtin_attr(name).or_else(|| self.idents.get(name).copied()) {
                    self.weaken(a);
                }
            }
        }
    }

    /// The name of a type's base (`struct x`, `T`), if it has one.
    fn base_name(t: &TypeName) -> Option<String> {
        Some(match &t.specs.base {
            Some(BaseSpec::Named(n)) => n.clone(),
            Some(BaseSpec::Sou {
                kind,
                name: Some(n),
                ..
            }) => format!(
                "{} {n}",
                match kind {
                    super::ast::SouKind::Struct => "struct",
                    super::ast::SouKind::Union => "union",
                }
            ),
            Some(BaseSpec::Enum { name: Some(n), .. }) => format!("enum {n}"),
            _ => return None,
        })
    }

    fn type_name(&mut self, t: &TypeName) {
        let Some(name) = Self::base_name(t) else {
            return;
        };
        // a module's type (``nt`_GUID``, or one of the kernel's the library declares):
        // `_dtrace_typattr`; D's and the program's own types have the default
        let kernel = name.contains('`')
            || self
                .types
                .lookup(&name)
                .is_some_and(|id| self.types.is_kernel_type(id));
        if kernel {
            self.weaken(Attr::PRIVATE);
        }
    }

    /// A translator to `t` from a kernel type is a kernel module's (`dt_xlator_create` takes
    /// the weaker of its two types' attributes).
    fn translator(&mut self, t: &TypeName) {
        let types = self.types;
        let Some(out) = Self::base_name(t).and_then(|n| types.lookup(&n)) else {
            return;
        };
        let out = types.resolve(out);
        let kernel_input = |input| {
            let id = types.referent(input).unwrap_or(input);
            types.is_kernel_type(types.resolve(id))
        };
        if self
            .translators
            .iter()
            .any(|x| types.resolve(x.output) == out && kernel_input(x.input))
        {
            self.weaken(Attr::PRIVATE);
        }
    }

    fn expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Int { .. } | ExprKind::Str(_) | ExprKind::Agg(_) => {}
            ExprKind::SelfRef | ExprKind::ThisRef => {}
            ExprKind::Ident(n) => self.ident(n),
            ExprKind::Member { base, .. } => self.expr(base),
            ExprKind::Index { base, keys } => {
                self.expr(base);
                keys.iter().for_each(|k| self.expr(k));
            }
            ExprKind::Call { func, args } => {
                self.expr(func);
                args.iter().for_each(|a| self.expr(a));
            }
            ExprKind::Unary(_, x) | ExprKind::SizeofExpr(x) | ExprKind::Stringof(x) => self.expr(x),
            ExprKind::Binary(_, l, r) | ExprKind::Assign(_, l, r) => {
                self.expr(l);
                self.expr(r);
            }
            ExprKind::Ternary(c, a, b) => {
                self.expr(c);
                self.expr(a);
                self.expr(b);
            }
            ExprKind::Cast(t, x) => {
                self.type_name(t);
                self.expr(x);
            }
            ExprKind::Xlate(t, x) => {
                self.type_name(t);
                self.translator(t);
                self.expr(x);
            }
            ExprKind::SizeofType(t) => self.type_name(t),
            ExprKind::Offsetof(..) => {}
        }
    }
}

/// The two minimums of `exec_prog`'s report, over every description of every clause
/// (`dtrace_program_info`): the probe descriptions' attributes, and the statements'.
pub fn program_attrs(
    clauses: &[(ClauseAttrs, &[ProbeDesc])],
    catalog: &dyn ProbeCatalog,
) -> (Attr, Attr) {
    if clauses.iter().all(|(_, descs)| descs.is_empty()) {
        return (Attr::DEFAULT, Attr::DEFAULT);
    }
    let (mut desc_min, mut stmt_min) = (Attr::MAX, Attr::MAX);
    for (attrs, descs) in clauses {
        for d in descs.iter() {
            // the context's identifiers take the attributes of the provider of the probe
            // the description stands for (`dt_setcontext`); Unstable when none does
            let (desc_attr, pap) = match description_info(d, &catalog.matching(d)) {
                Some((a, p)) => (a, *p),
                None => (Attr::UNNAMED, UNNAMED_PROVIDER),
            };
            desc_min = desc_min.min(desc_attr);
            let c = attrs.context;
            let mut a = attrs.fixed;
            for (used, attr) in [
                (c.probeprov, pap.provider),
                (c.probemod, pap.module),
                (c.probefunc, pap.function),
                (c.probename, pap.name),
                (c.args, pap.args),
            ] {
                if used {
                    a = a.min(attr);
                }
            }
            stmt_min = stmt_min.min(a);
        }
    }
    (desc_min, stmt_min)
}
