//! What a program reads of a firing beyond its probe, its time and its CPU: the question
//! the ETW providers ask before they decode a record or build a firing's arguments
//! ([`crate::providers::etw::Interest::set_reads_event`]). A firing that reads no field
//! decodes nothing and builds nothing (issue 30).
//!
//! The answer errs on the side of "reads": any argument, any memory load (a translated
//! structure, a pointer), any subroutine call, any thread-local variable, any built-in
//! variable but the few a firing's probe, time and CPU give, and any action that looks up
//! the firing's process or thread (stacks, symbols, `raise()`, `copyout()`...). Every clause
//! of the program counts, not only those of the probes that fire for every record: an
//! ERROR clause sees the context of the firing that faulted.

use crate::ir::{ActionKind, LValue, Node, Program, Scope};
use crate::lang::builtins::var;

/// Whether a program may read a firing's arguments, thread, process or stacks.
pub fn reads_event(p: &Program) -> bool {
    let mut reads = false;
    crate::ir::visit::visit_nodes(p, &mut |n| reads |= node_reads(n));
    reads || p.actions().iter().any(|a| action_reads(&a.kind))
}

fn node_reads(n: &Node) -> bool {
    match n {
        Node::Builtin { id, .. } => !matches!(
            *id,
            var::TIMESTAMP
                | var::ETWTIMESTAMP
                | var::VTIMESTAMP
                | var::WALLTIMESTAMP
                | var::ETWWALLTIMESTAMP
                | var::EPID
                | var::ID
                | var::PROBEPROV
                | var::PROBEMOD
                | var::PROBEFUNC
                | var::PROBENAME
                | var::TRACE
                | var::ZONENAME
                | var::CPU
                | var::IPL
        ),
        Node::Arg(_)
        | Node::Args { .. }
        | Node::Uregs(_)
        | Node::Load { .. }
        | Node::Bitfield { .. }
        | Node::Call { .. }
        | Node::Build { .. } => true,
        Node::Var { scope, .. } | Node::Array { scope, .. } => *scope == Scope::Thread,
        Node::Assign { target, .. } | Node::IncDec { target, .. } | Node::AddrOf(target) => {
            lvalue_reads(target)
        }
        _ => false,
    }
}

fn lvalue_reads(l: &LValue) -> bool {
    match l {
        LValue::Var { scope, .. } | LValue::Array { scope, .. } => *scope == Scope::Thread,
        // a store through memory or to uregs: what the address names may be the firing's
        LValue::Mem { .. } | LValue::Bitfield { .. } | LValue::Uregs(_) | LValue::Value(_) => true,
    }
}

fn action_reads(k: &ActionKind) -> bool {
    !matches!(
        k,
        ActionKind::Printf(_)
            | ActionKind::Printa { .. }
            | ActionKind::Trace
            | ActionKind::Exit
            | ActionKind::Speculate
            | ActionKind::Commit
            | ActionKind::Discard
            | ActionKind::Clear(_)
            | ActionKind::Trunc(_)
            | ActionKind::Normalize(_)
            | ActionKind::Denormalize(_)
            | ActionKind::Setopt
            | ActionKind::Ftruncate
            | ActionKind::Freopen(_)
            | ActionKind::Aggregate { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::reads_event;

    fn reads(src: &str) -> bool {
        // the standard catalog has no diag provider: a tick stands for it
        let src = src.replace("diag:::events", "tick-1s");
        let (vm, _) = crate::engine::standalone::standalone_vm(&src).expect("compiles");
        reads_event(&vm.program)
    }

    #[test]
    fn a_count_reads_nothing_of_the_firing() {
        assert!(!reads("diag:::events { n++; }"));
        assert!(!reads("diag:::events { @ = count(); } END { printa(@); }"));
        assert!(!reads(
            "diag:::events { @[probename, cpu] = count(); t = timestamp; }"
        ));
        assert!(!reads(
            "diag:::events /n < 10/ { n++; printf(\"%d\\n\", n); }"
        ));
    }

    #[test]
    fn arguments_context_and_stacks_are_read() {
        for src in [
            "diag:::events { @[arg1] = count(); }",
            "diag:::events { @[args[0]] = count(); }",
            "diag:::events { @[execname] = count(); }",
            "diag:::events { @[pid, tid] = count(); }",
            "diag:::events { self->n++; }",
            "diag:::events { self->n = 1; }",
            "diag:::events { @[copyinstr(arg0)] = count(); }",
            "diag:::events { @[stack()] = count(); }",
            "diag:::events { stack(); }",
            "diag:::events { ustack(); }",
            "diag:::events { n++; } dtrace:::ERROR { trace(pid); }",
            "diag:::events { trace(curthread->t_tid); }",
        ] {
            assert!(reads(src), "{src}");
        }
    }
}
