//! What a program reads that ETW does not record, said before an ETW run (a trace, or live on
//! Windows): the probe arguments the providers document as always 0, and comparisons of
//! `execname` with a name that has upper-case letters (dtx gives process names in lower
//! case, the Windows port's convention, so such a comparison never matches).

use crate::ir::{CmpKind, Node, Program};
use crate::probes::glob_match;

/// A probe argument that ETW never fills: `argN` and `args[N]` of `provider:::name` are 0.
struct Zero {
    provider: &'static str,
    name: &'static str,
    index: u8,
    why: &'static str,
}

/// The arguments the providers document as always 0 (docs/providers.md). `syscall:::entry`,
/// whose arguments past `arg0` are all 0, has its own warning
/// ([`super::syscall::argument_warnings`]).
const ZEROS: &[Zero] = &[Zero {
    provider: "sched",
    name: "enqueue",
    index: 3,
    why: "ETW does not say whether a thread is put at the front of its run queue: it is always 0",
}];

/// The warnings of a program, in clause order: system-call arguments, the other arguments
/// that are always 0, and `execname` compared with a name in another case.
pub fn warnings(program: &Program) -> Vec<String> {
    let mut out = super::syscall::argument_warnings(program);
    out.extend(zero_argument_warnings(program));
    out.extend(execname_case_warnings(program));
    out
}

/// ` at line N`, or nothing for a `-n` description (it names the clause).
fn at_line(line: u32) -> String {
    match line {
        0 => String::new(),
        n => format!(" at line {n}"),
    }
}

/// One warning per clause and always-0 argument it reads (`argN`, or `args[N]` with a
/// constant index) on a probe description that can name the probe.
fn zero_argument_warnings(program: &Program) -> Vec<String> {
    let field = |pat: &str, text: &str| pat.is_empty() || glob_match(pat, text);
    let mut out = Vec::new();
    for c in &program.clauses {
        for z in ZEROS {
            let Some(probe) = c
                .probes
                .iter()
                .find(|d| field(&d.provider, z.provider) && field(&d.name, z.name))
            else {
                continue;
            };
            let mut read: Vec<String> = Vec::new();
            crate::ir::visit::visit_clause(
                c,
                &mut |n| {
                    let name = match n {
                        Node::Arg(i) if *i == z.index => format!("arg{i}"),
                        Node::Args { index, .. } if matches!(**index, Node::Const(i) if i == z.index as i64) =>
                        {
                            format!("args[{}]", z.index)
                        }
                        _ => return,
                    };
                    if !read.contains(&name) {
                        read.push(name);
                    }
                },
                &mut |_| {},
            );
            if read.is_empty() {
                continue;
            }
            out.push(format!(
                "warning: the clause{} for {}:{}:{}:{} reads {}, but {}",
                at_line(c.line),
                probe.provider,
                probe.module,
                probe.function,
                probe.name,
                read.join(", "),
                z.why
            ));
        }
    }
    out
}

/// One warning per string literal with upper-case letters that a clause compares with
/// `execname` (`==`, `!=`, `<`...) or looks for in it (`strstr(execname, "...")`).
fn execname_case_warnings(program: &Program) -> Vec<String> {
    let is_execname = |n: &Node| {
        matches!(
            n,
            Node::Builtin {
                name: "execname",
                ..
            }
        )
    };
    let mut out = Vec::new();
    for c in &program.clauses {
        let mut names: Vec<String> = Vec::new();
        let mut note = |s: &str| {
            if s.bytes().any(|b| b.is_ascii_uppercase()) && !names.iter().any(|n| n == s) {
                names.push(s.to_string());
            }
        };
        crate::ir::visit::visit_clause(
            c,
            &mut |n| match n {
                Node::Compare {
                    kind: CmpKind::String,
                    a,
                    b,
                    ..
                } => match (&**a, &**b) {
                    (x, Node::Str(s)) | (Node::Str(s), x) if is_execname(x) => note(s),
                    _ => {}
                },
                Node::Call {
                    subr: crate::ir::Subr::Strstr,
                    args,
                    ..
                } => {
                    if let [x, Node::Str(s)] = args.as_slice() {
                        if is_execname(x) {
                            note(s);
                        }
                    }
                }
                _ => {}
            },
            &mut |_| {},
        );
        for s in names {
            out.push(format!(
                "warning: the clause{} compares execname with \"{s}\", which never matches: \
                 dtx gives process names in lower case, as the Windows port does; write \"{}\"",
                at_line(c.line),
                s.to_ascii_lowercase()
            ));
        }
    }
    out
}
