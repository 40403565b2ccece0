//! Walking a compiled program: every expression node of a clause (predicate, statements,
//! aggregation keys, action arguments) and every action kind. The checks after lowering, the
//! engine's planning and the debugger's breakpoint planning all ask the program what it uses
//! through here.

use super::{ActionKind, Clause, LValue, Node, Program, Stmt};

/// Calls `f` on every expression node of a program (predicates, statements, keys, arguments).
pub fn visit_nodes(p: &Program, f: &mut impl FnMut(&Node)) {
    for c in &p.clauses {
        if let Some(pr) = &c.predicate {
            walk(pr, f);
        }
        walk_stmts(&c.body, f);
    }
}

/// Visits every node of one clause (predicate and body) and every action kind it has.
pub fn visit_clause(
    c: &Clause,
    nodes: &mut impl FnMut(&Node),
    actions: &mut impl FnMut(&ActionKind),
) {
    fn acts(body: &[Stmt], f: &mut impl FnMut(&ActionKind)) {
        for s in body {
            match s {
                Stmt::If {
                    then, otherwise, ..
                } => {
                    acts(then, f);
                    acts(otherwise, f);
                }
                Stmt::Action(a) => f(&a.kind),
                Stmt::Eval(_) => {}
            }
        }
    }
    if let Some(pr) = &c.predicate {
        walk(pr, nodes);
    }
    walk_stmts(&c.body, nodes);
    acts(&c.body, actions);
}

/// Whether clause `c` reads any of the built-in variables `ids` (DIF variable ids).
pub fn reads_builtin(c: &Clause, ids: &[u32]) -> bool {
    let mut reads = false;
    visit_clause(
        c,
        &mut |n| {
            if let Node::Builtin { id, .. } = n {
                reads |= ids.contains(id);
            }
        },
        &mut |_| {},
    );
    reads
}

fn walk(n: &Node, f: &mut impl FnMut(&Node)) {
    f(n);
    match n {
        Node::Args { index: a, .. }
        | Node::Uregs(a)
        | Node::Load { addr: a, .. }
        | Node::Bitfield { addr: a, .. }
        | Node::Neg(a)
        | Node::BitNot(a)
        | Node::Not(a)
        | Node::Cast { value: a, .. }
        | Node::Stringof(a) => walk(a, f),
        Node::Binary { a, b, .. }
        | Node::Compare { a, b, .. }
        | Node::LogAnd(a, b)
        | Node::LogOr(a, b)
        | Node::LogXor(a, b)
        | Node::Seq(a, b) => {
            walk(a, f);
            walk(b, f);
        }
        Node::Ternary(a, b, c) => {
            walk(a, f);
            walk(b, f);
            walk(c, f);
        }
        Node::Array { keys, .. } => keys.iter().for_each(|k| walk(k, f)),
        Node::Call { args, .. } => args.iter().for_each(|k| walk(k, f)),
        Node::Assign { target, value } => {
            walk_lvalue(target, f);
            walk(value, f);
        }
        Node::IncDec { target, .. } | Node::AddrOf(target) => walk_lvalue(target, f),
        Node::Build { fields, .. } => fields.iter().for_each(|x| walk(&x.value, f)),
        _ => {}
    }
}

fn walk_lvalue(l: &LValue, f: &mut impl FnMut(&Node)) {
    match l {
        LValue::Array { keys, .. } => keys.iter().for_each(|k| walk(k, f)),
        LValue::Mem { addr, .. } | LValue::Bitfield { addr, .. } => walk(addr, f),
        LValue::Uregs(n) | LValue::Value(n) => walk(n, f),
        LValue::Var { .. } => {}
    }
}

fn walk_stmts(body: &[Stmt], f: &mut impl FnMut(&Node)) {
    for s in body {
        match s {
            Stmt::Eval(n) => walk(n, f),
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                walk(cond, f);
                walk_stmts(then, f);
                walk_stmts(otherwise, f);
            }
            Stmt::Action(a) => {
                a.keys.iter().for_each(|k| walk(k, f));
                a.args.iter().for_each(|k| walk(k, f));
            }
        }
    }
}
