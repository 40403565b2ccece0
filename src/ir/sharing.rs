//! What a program shares between the firings of different traces of one run
//! (docs/many-traces.md): whether several traces may be walked at the same time, each by an
//! engine of its own, and give the answer one engine walking them one after another gives.
//!
//! They do when no state a probe clause leaves behind is read again: no global variable that
//! a probe clause writes is read by any clause, no probe clause calls `exit()` (which ends the
//! whole run), and no probe clause reads or changes what belongs to the consumer
//! (aggregations through `printa()`/`trunc()`/`clear()`/..., speculations, options, the
//! output file). BEGIN and END run once in the run's own engine either way. Anything else is
//! run one trace after another, and [`needs_one_engine`] says why.

use super::visit::visit_clause;
use super::{ActionKind, Clause, LValue, Node, Program, Scope};

/// Why the program's meaning over several traces needs one engine walking them in turn, in
/// words for the user (`None`: the traces may be walked in parallel).
pub fn needs_one_engine(p: &Program) -> Option<String> {
    let mut written: Vec<(u32, usize)> = Vec::new();
    let mut read: Vec<(u32, usize)> = Vec::new();
    for (i, c) in p.clauses.iter().enumerate() {
        let probe_clause = !begin_or_end_only(c);
        let mut action: Option<&'static str> = None;
        visit_clause(
            c,
            &mut |n| {
                globals_of(n, &mut |id, w| match w {
                    Access::Read => read.push((id, i)),
                    Access::Write if probe_clause => written.push((id, i)),
                    Access::Write => {}
                    Access::Both => {
                        read.push((id, i));
                        if probe_clause {
                            written.push((id, i));
                        }
                    }
                })
            },
            &mut |k| {
                if probe_clause && action.is_none() {
                    action = shared_action(k);
                }
            },
        );
        if let Some(a) = action {
            return Some(format!("{} {a}", clause_name(p, i)));
        }
    }
    for &(id, w) in &written {
        if let Some(&(_, r)) = read.iter().find(|(v, _)| *v == id) {
            let name = p.variable(id).map_or("?", |v| v.name.as_str());
            let reader = if r == w {
                "reads it too".to_string()
            } else {
                format!("{} reads it", clause_name(p, r))
            };
            return Some(format!(
                "{} writes the global variable `{name}` and {reader}",
                clause_name(p, w)
            ));
        }
    }
    None
}

/// What an action of a probe clause does that belongs to the whole run, if anything.
/// Why a structured document (`-x oformat=json|xml`) of a run over several traces needs the
/// traces walked in turn: a probe clause traces data (`printf`, `trace`, `stack`...), and the
/// one document holds those records in the order they fired, which the files' parallel
/// engines (each writing its own labelled lines) cannot give. `None`: nothing but BEGIN and
/// END records, and aggregations, which merge.
pub fn records_need_one_engine(p: &Program) -> Option<String> {
    for (i, c) in p.clauses.iter().enumerate() {
        if begin_or_end_only(c) {
            continue;
        }
        let mut what: Option<&'static str> = None;
        visit_clause(c, &mut |_| {}, &mut |k| {
            what = what.or(match k {
                ActionKind::Printf(_) => Some("printf"),
                ActionKind::Trace => Some("trace"),
                ActionKind::Print(_) => Some("print"),
                ActionKind::Tracemem => Some("tracemem"),
                ActionKind::Stack { .. } => Some("stack"),
                ActionKind::Ustack { .. } | ActionKind::Jstack { .. } => Some("ustack"),
                ActionKind::Sym | ActionKind::Mod | ActionKind::Usym | ActionKind::Umod => {
                    Some("sym/mod")
                }
                ActionKind::Uaddr => Some("uaddr"),
                _ => None,
            });
        });
        if let Some(w) = what {
            return Some(format!(
                "{} traces data ({w}), which the one document holds in the order it fired",
                clause_name(p, i)
            ));
        }
    }
    None
}

fn shared_action(k: &ActionKind) -> Option<&'static str> {
    Some(match k {
        ActionKind::Exit => "calls exit(), which ends the run",
        ActionKind::Printa { .. } => "prints aggregations (printa)",
        ActionKind::Clear(_)
        | ActionKind::Trunc(_)
        | ActionKind::Normalize(_)
        | ActionKind::Denormalize(_) => "changes aggregations (clear, trunc, normalize)",
        ActionKind::Speculate | ActionKind::Commit | ActionKind::Discard => {
            "uses speculations, which belong to the run"
        }
        ActionKind::Setopt => "sets options (setopt)",
        ActionKind::Freopen(_) | ActionKind::Ftruncate => "redirects the output (freopen)",
        _ => return None,
    })
}

/// A clause's name in a message: its first probe description and line.
fn clause_name(p: &Program, i: usize) -> String {
    let Some(c) = p.clauses.get(i) else {
        return "a clause".into();
    };
    let desc = c.probes.first().map_or(String::new(), |d| {
        format!("{}:{}:{}:{}", d.provider, d.module, d.function, d.name)
    });
    match c.line {
        0 => format!("the clause of {desc}"),
        line => format!("the clause of {desc} (line {line})"),
    }
}

/// Whether a clause fires only on BEGIN or END, which run once in the run's own engine.
fn begin_or_end_only(c: &Clause) -> bool {
    !c.probes.is_empty()
        && c.probes.iter().all(|d| {
            matches!(d.provider.as_str(), "" | "dtrace")
                && d.module.is_empty()
                && d.function.is_empty()
                && matches!(d.name.as_str(), "BEGIN" | "END")
        })
}

#[derive(Clone, Copy)]
enum Access {
    Read,
    Write,
    Both,
}

/// The global variables one node reads or writes (not its children: the visitor walks them).
fn globals_of(n: &Node, f: &mut impl FnMut(u32, Access)) {
    match n {
        Node::Var {
            id,
            scope: Scope::Global,
            ..
        }
        | Node::Array {
            id,
            scope: Scope::Global,
            ..
        } => f(*id, Access::Read),
        Node::Assign { target, .. } => lvalue_globals(target, Access::Write, f),
        Node::IncDec { target, .. } => lvalue_globals(target, Access::Both, f),
        // a global's address lets anything write it
        Node::AddrOf(target) => lvalue_globals(target, Access::Both, f),
        _ => {}
    }
}

fn lvalue_globals(l: &LValue, a: Access, f: &mut impl FnMut(u32, Access)) {
    if let LValue::Var {
        id,
        scope: Scope::Global,
        ..
    }
    | LValue::Array {
        id,
        scope: Scope::Global,
        ..
    } = l
    {
        f(*id, a);
    }
}
