//! What stacks a program reads: a source records or copies stacks only for programs that
//! print or key on them.

/// Whether a program records stacks (`stack()`, `ustack()`, or a stack aggregation key).
pub fn uses_stacks(p: &crate::ir::Program) -> bool {
    let (kernel, user) = stack_use(p);
    kernel || user
}

/// Whether a program reads user stacks (`ustack()`, `jstack()`, `ustackdepth`, `ucaller`): a
/// live source that copies user stacks to unwind them does so only then.
pub fn uses_user_stacks(p: &crate::ir::Program) -> bool {
    stack_use(p).1
}

/// (kernel stacks, user stacks) a program reads.
fn stack_use(p: &crate::ir::Program) -> (bool, bool) {
    use crate::ir::{ActionKind, Node};
    use crate::lang::builtins::var;
    let (mut kernel, mut user) = (false, false);
    crate::ir::visit::visit_nodes(p, &mut |n| match n {
        Node::Call { name, .. } => match *name {
            "stack" => kernel = true,
            "ustack" | "jstack" => user = true,
            _ => {}
        },
        Node::Builtin { id, .. } => match *id {
            var::STACKDEPTH | var::CALLER => kernel = true,
            var::USTACKDEPTH | var::UCALLER => user = true,
            _ => {}
        },
        _ => {}
    });
    for a in p.actions() {
        match a.kind {
            ActionKind::Stack { .. } => kernel = true,
            ActionKind::Ustack { .. } | ActionKind::Jstack { .. } => user = true,
            _ => {}
        }
    }
    (kernel, user)
}
