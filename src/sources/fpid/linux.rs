//! The Linux side of fpid: the hooks put in through the debugger loop ([`super::install`]),
//! the process's end seen through a pidfd, CLOCK_MONOTONIC, the System V argument registers.

use super::install::install;
use super::source::FpidSource;
use crate::providers::pid::PidProvider;
use crate::sources::debugger::{PidSource, Regs};
pub use crate::sources::perf::uprobe::ExitWatch;
use crate::sources::sink::EventSource;
use crate::sources::sink::Sink;

/// The clock the agent stamps records with (CLOCK_MONOTONIC), in ns.
pub fn clock_ns() -> u64 {
    crate::sources::debugger::monotonic_ns()
}

pub use crate::sources::debugger::walk_stack_in as walk_stack;

/// Puts a record's registers where the System V convention has them: at entry the arguments
/// (rdi rsi rdx rcx r8 r9), at return rax and rdx.
pub fn set_arg_regs(regs: &mut Regs, ret: bool, args: &[u64; 10]) {
    let g = &mut regs.gpr;
    if ret {
        g[0] = args[0];
        g[2] = args[1];
    } else {
        g[7] = args[0];
        g[6] = args[1];
        g[2] = args[2];
        g[1] = args[3];
        g[8] = args[4];
        g[9] = args[5];
    }
}

/// The Linux part of [`super::split`], for a process with `fpid` probes: the hooks go in now
/// (the target is still stopped). With no `pid` probes in the process, the debugger lets
/// it go and the fpid source alone watches it; else both run, the `pid` source reporting
/// the end.
pub fn split(
    mut src: PidSource,
    provider: &PidProvider,
    sink: &dyn Sink,
    ring_options: super::RingOptions,
) -> Result<(Option<PidSource>, Option<FpidSource>), String> {
    let pid = src.pid();
    let fpid = provider.fpid();
    if src.has_pid_probes() {
        let avoid = src.probe_sites();
        let want_ustack = src.want_ustack;
        let args_used = src.args_used();
        let installed = src.without_breakpoints(|target| {
            install(
                target,
                &fpid,
                sink,
                &avoid,
                want_ustack,
                args_used,
                ring_options,
            )
        });
        let (ring, hooks) = match installed {
            Ok(v) => v,
            Err(e) => {
                // the breakpoints out, the target let go (as a failed uprobe start does)
                if src.created {
                    src.target_mut().terminate();
                } else {
                    src.stop();
                }
                return Err(e);
            }
        };
        let (execname, ppid) = src.target_mut().identity();
        let modules = fpid.modules_of(pid).unwrap_or_default();
        let s = FpidSource::new(pid, None, ring, hooks, modules, execname, ppid, want_ustack);
        return Ok((Some(src), Some(s)));
    }
    let mut plan = src.into_plan(sink);
    let installed = install(
        &mut *plan.target,
        &fpid,
        sink,
        &[],
        plan.want_ustack,
        plan.args_used,
        ring_options,
    );
    let (ring, hooks) = match installed {
        Ok(v) => v,
        Err(e) => {
            if plan.created {
                plan.target.terminate();
            } else {
                plan.target.detach(&[]);
            }
            return Err(e);
        }
    };
    // the hooks are in: the target runs on untraced
    plan.target.detach(&[]);
    let watch = ExitWatch::new(pid, plan.created);
    let modules = fpid.modules_of(pid);
    let s = FpidSource::from_plan(pid, watch, ring, hooks, modules, plan);
    Ok((None, Some(s)))
}
