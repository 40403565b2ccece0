//! Which clauses run in the kernel: a clause whose every probe is a system call entry (or
//! every one a return), whose predicate the code generator compiles and whose statements are
//! all aggregations, `self->`/`this->` assignments (a clause-local no other clause of the
//! program names) and additions to integer globals it compiles. Where a global the kernel
//! adds to may also be named (BEGIN and END only) is the loader's to check, as for
//! thread-locals (`sources/perf/kernel.rs`). Anything else stays in user space,
//! with the reason. Thread-locals live on one side: a kernel clause that names a `self->`
//! variable some clause in user space also names goes to user space too ([`thread_vars`]).

use std::collections::BTreeSet;

use super::codegen::{compile, global_add, KernelAgg, KernelClause, KernelStmt, Layout, MapFds};
use super::maps::{KeyPart, ProbeField};
use crate::ir::visit::visit_clause;
use crate::ir::{ActionKind, AggFunc, Clause, LValue, Node, Program, Scope, Stmt, ValKind};
use crate::lang::builtins::var;
use crate::providers::linux::syscall_of;

/// The kernel clauses of clause `clause` of `program` (one per direction: entries and
/// returns), given the probes it is enabled on (one id per enabling), or why it stays in
/// user space.
pub fn plan_clause(
    prog: &Program,
    program: usize,
    clause: usize,
    probes: &[u64],
) -> Result<Vec<KernelClause>, String> {
    let c = prog.clauses.get(clause).ok_or("no such clause")?;
    if probes.is_empty() {
        return Err("it matches no probe".into());
    }
    let mut entry = Vec::new();
    let mut ret = Vec::new();
    for &p in probes {
        match syscall_of(p) {
            Some((nr, false)) => entry.push(nr),
            Some((nr, true)) => ret.push(nr),
            None => return Err("a probe that is not a system call's".into()),
        }
    }
    for v in [&mut entry, &mut ret] {
        let n = v.len();
        v.sort_unstable();
        v.dedup();
        if v.len() != n {
            return Err("a probe named by two of its descriptions".into());
        }
    }
    let mut aggs = Vec::new();
    let mut body = Vec::new();
    for s in &c.body {
        let a = match s {
            Stmt::Action(a) => a,
            Stmt::Eval(n) => {
                body.push(KernelStmt::Eval(n.clone()));
                continue;
            }
            Stmt::If { .. } => return Err("an if statement".into()),
        };
        let ActionKind::Aggregate { agg } = a.kind else {
            return Err(format!("the action {}", action_name(&a.kind)));
        };
        let def = prog
            .aggregations
            .get(agg as usize)
            .ok_or("no such aggregation")?;
        let mut keys = Vec::new();
        for (i, k) in a.keys.iter().enumerate() {
            let kind = a.key_kinds.get(i).copied().unwrap_or(ValKind::I64);
            keys.push(key_part(k, kind)?);
        }
        // the increment: quantize(v, incr), lquantize(v, b, l, s, incr), llquantize(v, f,
        // l, h, n, incr)
        let incr = match def.func {
            AggFunc::Quantize => a.args.get(1),
            AggFunc::Lquantize { .. } => a.args.get(4),
            AggFunc::Llquantize { .. } => a.args.get(5),
            _ => None,
        };
        check_params(def.func)?;
        body.push(KernelStmt::Agg(aggs.len()));
        aggs.push(KernelAgg {
            agg,
            func: def.func,
            keys,
            value: a.args.first().cloned(),
            incr: incr.cloned(),
        });
    }
    if body.is_empty() {
        return Err("no statement (the default action traces the probe)".into());
    }
    // clause-locals: the VM zeroes them once per firing, for all the clauses of the probe, so
    // one clause's `this->x` is another's on the same probe; a kernel clause's locals live
    // on its program's stack, so no other clause may name them
    let locals = vars_of(c, Scope::Clause);
    for (i, other) in prog.clauses.iter().enumerate() {
        if i == clause {
            continue;
        }
        if let Some(id) = vars_of(other, Scope::Clause).intersection(&locals).next() {
            let name = prog.variable(*id).map_or("?", |v| v.name.as_str());
            return Err(format!(
                "this->{name} is also used by clause {}, and clause-locals live on one side",
                i + 1
            ));
        }
    }
    let locals: Vec<u32> = locals.into_iter().collect();
    let mut globals = Vec::new();
    for s in &body {
        if let KernelStmt::Eval(n) = s {
            if let Some((id, _)) = global_add(n)? {
                globals.push(id);
            }
        }
    }
    globals.sort_unstable();
    globals.dedup();
    let mut out = Vec::new();
    for (nrs, is_ret) in [(entry, false), (ret, true)] {
        if nrs.is_empty() {
            continue;
        }
        let ranges = ranges(&nrs);
        if ranges.len() > 64 {
            return Err("more than 64 runs of system call numbers".into());
        }
        let k = KernelClause {
            program,
            clause,
            line: c.line,
            ret: is_ret,
            ranges,
            predicate: c.predicate.clone(),
            aggs: aggs.clone(),
            body: body.clone(),
            locals: locals.clone(),
            globals: globals.clone(),
        };
        // the generator is the judge of what it can express
        let fds = vec![-1; k.aggs.len()];
        let maps = MapFds {
            aggs: &fds,
            drops: -1,
            tls: -1,
            globals: -1,
            clock_offset: 0,
        };
        compile(&k, super::codegen::RAW_SYSCALLS, &maps)?;
        out.push(k);
    }
    Ok(out)
}

/// Checks that `c` compiles for the tracepoint's actual layout.
pub fn check(c: &KernelClause, layout: Layout) -> Result<(), String> {
    let fds = vec![-1; c.aggs.len()];
    compile(
        c,
        layout,
        &MapFds {
            aggs: &fds,
            drops: -1,
            tls: -1,
            globals: -1,
            clock_offset: 0,
        },
    )
    .map(drop)
}

/// Refuses the parameters `agg` would clamp (`agg::funcs::sanitize`; the compiler refuses
/// them first): the kernel computes buckets with them as given.
fn check_params(f: AggFunc) -> Result<(), String> {
    let ok = match f {
        AggFunc::Lquantize { step, levels, .. } => step >= 1 && levels >= 1,
        AggFunc::Llquantize {
            factor,
            low,
            high,
            nsteps,
        } => {
            let top = (0..=u32::from(high)).try_fold(1i64, |v, _| v.checked_mul(i64::from(factor)));
            factor >= 2 && nsteps >= factor && high >= 1 && low < high && top.is_some()
        }
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{f:?}: parameters the aggregation would adjust"))
    }
}

/// The thread-local (`self->`) variables clause `c` names.
pub fn thread_vars(c: &Clause) -> BTreeSet<u32> {
    vars_of(c, Scope::Thread)
}

/// The global variables clause `c` names.
pub fn global_vars(c: &Clause) -> BTreeSet<u32> {
    vars_of(c, Scope::Global)
}

/// The variables of `scope` clause `c` names.
fn vars_of(c: &Clause, scope: Scope) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    let target = |t: &LValue, out: &mut BTreeSet<u32>| {
        if let LValue::Var { id, scope: s, .. } | LValue::Array { id, scope: s, .. } = t {
            if *s == scope {
                out.insert(*id);
            }
        }
    };
    visit_clause(
        c,
        &mut |n| match n {
            Node::Var { id, scope: s, .. } | Node::Array { id, scope: s, .. } if *s == scope => {
                out.insert(*id);
            }
            Node::Assign { target: t, .. } | Node::IncDec { target: t, .. } | Node::AddrOf(t) => {
                target(t, &mut out)
            }
            _ => {}
        },
        &mut |_| {},
    );
    out
}

fn key_part(k: &Node, kind: ValKind) -> Result<KeyPart, String> {
    match (k, kind) {
        (Node::Builtin { id, .. }, ValKind::String) => Ok(match *id {
            var::EXECNAME => KeyPart::Execname,
            var::PROBEPROV => KeyPart::Probe(ProbeField::Provider),
            var::PROBEMOD => KeyPart::Probe(ProbeField::Module),
            var::PROBEFUNC => KeyPart::Probe(ProbeField::Function),
            var::PROBENAME => KeyPart::Probe(ProbeField::Name),
            _ => return Err("a string key other than execname and the probe's names".into()),
        }),
        (_, ValKind::Int { size, signed }) => Ok(KeyPart::Int {
            node: k.clone(),
            size,
            signed,
        }),
        _ => Err("a key that is not an integer, execname or a probe name".into()),
    }
}

/// An action as D spells it, for the reason a clause stays in user space.
fn action_name(k: &ActionKind) -> String {
    let d = format!("{k:?}");
    let name: String = d.chars().take_while(|c| c.is_alphanumeric()).collect();
    format!("{}()", name.to_lowercase())
}

/// Sorted numbers as inclusive runs.
fn ranges(nrs: &[u16]) -> Vec<(u16, u16)> {
    let mut out: Vec<(u16, u16)> = Vec::new();
    for &n in nrs {
        match out.last_mut() {
            Some((_, hi)) if n == *hi + 1 => *hi = n,
            _ => out.push((n, n)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_os = "linux")]
    use crate::providers::linux::syscall_probe_id;

    #[cfg(target_os = "linux")]
    fn compile_d(src: &str) -> Program {
        use crate::lang::options::DOptions;
        use crate::lang::types::DataModel;
        use crate::lang::{CompileInput, MacroEnv, SourceKind};
        let catalog = crate::providers::live_catalog();
        let input = CompileInput {
            text: src,
            kind: SourceKind::File,
            macros: MacroEnv::default(),
            cpp: None,
            file_name: "plan.d",
            model: DataModel::Lp64,
        };
        crate::lang::compile(input, &mut DOptions::new(), &catalog)
            .unwrap_or_else(|e| panic!("{src}: {e}"))
            .ir
    }

    #[cfg(target_os = "linux")]
    fn plan(src: &str, probes: &[u64]) -> Result<Vec<KernelClause>, String> {
        plan_clause(&compile_d(src), 0, 0, probes)
    }

    // compiled against the live catalog, which is Linux's only on Linux
    #[cfg(target_os = "linux")]
    #[test]
    fn counting_by_execname_on_every_entry_runs_in_the_kernel() {
        let all: Vec<u64> = (0..3).map(|n| syscall_probe_id(n, false)).collect();
        let k = plan("syscall:::entry { @[execname] = count(); }", &all).unwrap();
        assert_eq!(k.len(), 1);
        assert_eq!(k[0].ranges, vec![(0, 2)]);
        assert!(!k[0].ret);
        let k = plan(
            "syscall::getppid:return /pid == 7 && (arg0 > 0 ? 1 : errno) != 3/ \
             { @a[tid, probefunc] = sum(arg1 % 3); @b = max(cpu); @c[(int)arg0] = avg(arg0 << 2); \
             @d[execname] = stddev(arg0); }",
            &[syscall_probe_id(110, true)],
        )
        .unwrap();
        assert_eq!((k[0].ret, k[0].aggs.len()), (true, 4));
    }

    // compiled against the live catalog, which is Linux's only on Linux
    #[cfg(target_os = "linux")]
    #[test]
    fn what_the_kernel_cannot_give_exactly_stays_in_user_space_with_the_reason() {
        let p = [syscall_probe_id(0, false)];
        for (src, why) in [
            (
                "syscall::read:entry { printf(\"%d\", pid); }",
                "action printf()",
            ),
            ("syscall::read:entry { @[ppid] = count(); }", "`ppid`"),
            (
                "syscall::read:entry /arg0 / arg1/ { @ = count(); }",
                "may be zero",
            ),
            (
                "syscall::read:entry { @[copyinstr(arg1)] = count(); }",
                "not an integer",
            ),
            ("syscall::read:entry { self->s = \"a\"; }", "integer"),
            (
                "syscall::read:entry { x = 1; }",
                "global assigned other than",
            ),
            (
                "int x; syscall::read:entry /x > 2/ { x++; }",
                "a global read in the kernel",
            ),
            (
                "int x; syscall::read:entry { x += x; }",
                "a global read in the kernel",
            ),
            // int = (int)(x + arg0): narrowed at each assignment, where `x++` is not
            (
                "int x; syscall::read:entry { x += arg0; }",
                "global assigned other than",
            ),
            ("syscall::read:entry { }", "no statement"),
            (
                "syscall::read:entry /execname < \"x\"/ { @ = count(); }",
                "other than `==` and `!=`",
            ),
            (
                "syscall::read:entry /execname == probefunc/ { @ = count(); }",
                "other than `execname` with a literal",
            ),
            (
                "syscall::read:entry { this->s = execname; @ = count(); }",
                "this->",
            ),
            (
                "syscall::read:entry { x = 1; @ = count(); }",
                "global assigned",
            ),
            (
                "syscall::read:entry { self->a = 1; @ = count(); y = self->a + 1; }",
                "global assigned",
            ),
        ] {
            let e = plan(src, &p).unwrap_err();
            assert!(e.contains(why), "{src}: {e}");
        }
        let e = plan("BEGIN { @ = count(); }", &[1]).unwrap_err();
        assert!(e.contains("not a system call"), "{e}");
        let e = plan("syscall::read:entry { @ = count(); }", &[p[0], p[0]]).unwrap_err();
        assert!(e.contains("two of its descriptions"), "{e}");
    }

    // compiled against the live catalog, which is Linux's only on Linux
    #[cfg(target_os = "linux")]
    #[test]
    fn quantizations_thread_locals_and_timestamp_run_in_the_kernel() {
        let e = [syscall_probe_id(110, false)];
        let r = [syscall_probe_id(110, true)];
        let k = plan(
            "syscall::getppid:entry /pid == 3/ { self->ts = timestamp; self->n++; }",
            &e,
        )
        .unwrap();
        assert_eq!((k[0].aggs.len(), k[0].body.len()), (0, 2));
        let src = "self uint64_t ts; self int n;
                   syscall::getppid:return /self->ts/ { @q = quantize(timestamp - self->ts);
                   @l[execname] = lquantize(arg0, 0, 100, 10, 2);
                   @g = llquantize(self->n, 10, 0, 6, 20); self->ts = 0; }";
        let k = plan(src, &r).unwrap();
        assert_eq!(k[0].aggs.len(), 3);
        assert!(k[0].aggs[1].incr.is_some() && k[0].aggs[0].incr.is_none());
        let p = compile_d(src);
        assert_eq!(thread_vars(&p.clauses[0]).len(), 2);
    }

    // compiled against the live catalog, which is Linux's only on Linux
    #[cfg(target_os = "linux")]
    #[test]
    fn execname_against_literals_and_clause_locals_run_in_the_kernel() {
        let p = [syscall_probe_id(0, false)];
        let k = plan(
            "syscall::read:entry /execname == \"dtxt_mix\" || \"a\" != execname/
             { this->n = arg2 * 2; this->n++; @[execname != \"0123456789abcdefg\" ? this->n : 0] = sum(this->n); }",
            &p,
        )
        .unwrap();
        assert_eq!(k[0].locals.len(), 1);
        let k = plan(
            "int x, z; int64_t y; syscall::read:entry { x++; y -= arg0; x += 2; this->a = 1; z = z - this->a; }",
            &p,
        )
        .unwrap();
        assert_eq!(k[0].globals.len(), 3);
        // a clause-local another clause names stays in user space: the VM shares it between
        // the clauses of one firing
        let two = compile_d(
            "syscall::read:entry { this->n = 1; @ = count(); }
             syscall::read:entry { @b = sum(this->n); }",
        );
        for c in 0..2 {
            let e = plan_clause(&two, 0, c, &p).unwrap_err();
            assert!(e.contains("this->n is also used by clause"), "{e}");
        }
    }

    #[test]
    fn runs_of_numbers() {
        assert_eq!(ranges(&[0, 1, 2, 5, 7, 8]), vec![(0, 2), (5, 5), (7, 8)]);
        assert!(ranges(&[]).is_empty());
    }
}
