//! The fpid source: fires the probes of the records its drain thread ([`super::drain`])
//! copies out of the shared ring of one traced process. The same on every platform; what differs (watching the process's end, the clock,
//! the argument registers) comes from [`super::platform`].

use super::drain::Drain;
use super::platform::{clock_ns, set_arg_regs, walk_stack, ExitWatch};
use super::ring::layout::KIND_RETURN;
use super::ring::{hits, SharedRing};
use super::sites::Installed;
use crate::sources::debugger::{Regs, SampledStack, RSP};
use crate::sources::sink::{EventSource, Sink, SourceState};
use crate::symbols::ProcessModules;
use crate::vm::{AddressSpace, FiringCtx};
use std::time::Duration;

/// The fpid hooks of one traced process, drained from its ring.
pub struct FpidSource {
    pid: u32,
    /// Present when this source owns the (running, untraced) process: its end is ours
    /// to report. Absent when a `pid` source of the same process does.
    pub(super) watch: Option<ExitWatch>,
    /// Only to see the process go, when a `pid` source reports its end.
    gone: ExitWatch,
    drain: Drain,
    hooks: Installed,
    modules: ProcessModules,
    execname: Vec<u8>,
    ppid: u64,
    want_ustack: bool,
    pub(super) announce: bool,
    /// Engine time minus the agent's clock, and wall time minus engine time.
    offset: Option<(u64, u64)>,
    ustack: Vec<u64>,
    reported: (u64, u64),
    ended: bool,
    /// Hits delivered, for tests and benches.
    pub hits: u64,
}

impl FpidSource {
    /// The source of a target whose hooks are in, from the pid plan it was handed over as:
    /// its modules as the provider knows them now (`modules`) or as the plan had them.
    pub(super) fn from_plan(
        pid: u32,
        watch: ExitWatch,
        ring: SharedRing,
        hooks: Installed,
        modules: Option<ProcessModules>,
        plan: crate::sources::debugger::PidPlan,
    ) -> FpidSource {
        let mut s = FpidSource::new(
            pid,
            Some(watch),
            ring,
            hooks,
            modules.unwrap_or(plan.modules),
            plan.execname,
            plan.ppid,
            plan.want_ustack,
        );
        s.announce = plan.announce;
        s
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        pid: u32,
        watch: Option<ExitWatch>,
        ring: SharedRing,
        hooks: Installed,
        modules: ProcessModules,
        execname: Vec<u8>,
        ppid: u64,
        want_ustack: bool,
    ) -> FpidSource {
        FpidSource {
            pid,
            watch,
            gone: ExitWatch::new(pid, false),
            drain: Drain::start(std::sync::Arc::new(ring)),
            hooks,
            modules,
            execname,
            ppid,
            want_ustack,
            announce: true,
            offset: None,
            ustack: Vec::with_capacity(64),
            reported: (0, 0),
            ended: false,
            hits: 0,
        }
    }

    /// Fires one chunk of records (waiting up to `wait` for one); false when there was none.
    fn fire_next(&mut self, wait: Duration, sink: &mut dyn Sink) -> bool {
        let Some(chunk) = self.drain.next(wait) else {
            return false;
        };
        for hit in hits(&chunk) {
            if sink.done() {
                break;
            }
            self.fire(&hit, sink);
        }
        self.drain.recycle(chunk);
        true
    }

    /// Stops the drain thread and fires everything left, in the queue and in the ring.
    fn fire_rest(&mut self, sink: &mut dyn Sink) {
        self.drain.stop();
        while !sink.done() && self.fire_next(Duration::ZERO, sink) {}
    }

    fn fire(&mut self, hit: &super::ring::Hit<'_>, sink: &mut dyn Sink) {
        let r = &hit.record;
        let Some(hook) = self.hooks.sites.get(r.hook as usize) else {
            return;
        };
        self.hits += 1;
        let ret = r.kind == KIND_RETURN;
        let (off, wall_off) = *self.offset.get_or_insert_with(|| {
            let e = sink.now_ns();
            let wall = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            (e.wrapping_sub(clock_ns()), wall.wrapping_sub(e))
        });
        let now = r.time.wrapping_add(off);
        let wall = now.wrapping_add(wall_off);
        // the registers the record has: at entry the function's first instruction, at
        // return the caller just after the call
        let mut regs = Regs {
            rip: if ret { r.pc } else { hook.func },
            ..Default::default()
        };
        regs.gpr[RSP] = r.rsp;
        regs.gpr[crate::sources::debugger::RBP] = r.rbp;
        let mem = SampledStack {
            base: r.rsp,
            bytes: hit.stack,
        };
        let args = if ret {
            [hook.ret_offset, r.args[0], r.args[1], 0, 0, 0, 0, 0, 0, 0]
        } else {
            r.args
        };
        set_arg_regs(&mut regs, ret, &r.args);
        if self.want_ustack {
            let read = |a: u64| {
                let mut b = [0u8; 8];
                mem.read(a, &mut b).ok().map(|_| u64::from_le_bytes(b))
            };
            if ret {
                walk_stack(&read, &self.modules, &regs, false, 99, &mut self.ustack);
                self.ustack.insert(0, hook.func + hook.ret_offset);
            } else {
                walk_stack(&read, &self.modules, &regs, true, 100, &mut self.ustack);
            }
        }
        let uregs = regs.uregs();
        let probes = if ret { &hook.returns } else { &hook.entries };
        for info in probes {
            if !sink.is_enabled(info.id) {
                continue;
            }
            let mut cx = FiringCtx::synthetic(info, now, wall, &self.execname);
            cx.args = args;
            cx.pid = self.pid as u64;
            cx.ppid = self.ppid;
            cx.tid = r.tid;
            cx.memory = &mem;
            cx.uregs = &uregs;
            cx.ustack = &self.ustack;
            sink.fire(&cx);
        }
    }

    /// Says what the ring lost since the last report.
    fn report_losses(&mut self) {
        let (drops, shadow) = self.drain.ring().losses();
        if drops > self.reported.0 {
            crate::output::stderr::say(
                "dtx",
                format_args!(
                    "{} fpid drops in pid {} (its ring was full)",
                    drops - self.reported.0,
                    self.pid
                ),
            );
        }
        if shadow > self.reported.1 {
            crate::output::stderr::say(
                "dtx",
                format_args!(
                    "{} fpid return probes missed in pid {} (calls nested too deep)",
                    shadow - self.reported.1,
                    self.pid
                ),
            );
        }
        self.reported = (drops, shadow);
    }

    fn end(&mut self, how: &str, code: Option<i32>) -> SourceState {
        self.ended = true;
        self.drain.ring().disable();
        if self.announce && self.watch.is_some() {
            crate::output::stderr::say("dtx", format_args!("pid {} {how}", self.pid));
        }
        SourceState::Ended(code)
    }
}

impl EventSource for FpidSource {
    fn pump(&mut self, deadline: u64, sink: &mut dyn Sink) -> SourceState {
        if self.ended {
            return SourceState::Ended(None);
        }
        loop {
            // what is queued, a chunk at a time, until the deadline
            while !sink.done() && sink.now_ns() < deadline {
                if !self.fire_next(Duration::ZERO, sink) {
                    break;
                }
            }
            let end = match &self.watch {
                Some(w) => w.ended(),
                None => self.gone.ended().map(|(_, _)| (String::new(), None)),
            };
            if let Some((how, code)) = end {
                // what the process wrote before it ended
                self.fire_rest(sink);
                self.report_losses();
                return self.end(&how, code);
            }
            self.report_losses();
            let now = sink.now_ns();
            if sink.done() || now >= deadline {
                return SourceState::Running;
            }
            // wait for the drain thread's next chunk for up to a millisecond
            let wait = Duration::from_nanos((deadline - now).min(1_000_000));
            self.fire_next(wait, sink);
        }
    }

    fn finish(&mut self, sink: &mut dyn Sink) {
        self.fire_rest(sink);
        self.report_losses();
    }

    fn stop(&mut self) {
        // the hooks pass straight through from now on; a grabbed target runs on, one dtx
        // started ends with dtx (as dtrace ends the `-c` command it created)
        self.drain.ring().disable();
        if !self.ended {
            if let Some(w) = &self.watch {
                w.end_child();
            }
        }
        self.ended = true;
    }
}

impl Drop for FpidSource {
    fn drop(&mut self) {
        self.drain.ring().disable();
        self.drain.stop();
    }
}
