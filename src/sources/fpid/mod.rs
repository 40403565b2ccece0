//! The `fpid` provider's event source: user functions hooked inside the target by an agent dtx
//! loads into it (`agent/`, its own crate), their hits written into a shared ring that this
//! source drains. The target never stops for a hit: a hit costs tens of nanoseconds, not a
//! trap and a debugger round trip. The clauses run here afterwards over the registers and
//! the stack copy the hit recorded, so they cannot read the target's memory (the compiler
//! refuses `copyin`/`copyinstr` on fpid probes).
//!
//! Linux: the debugger loop (which holds the target stopped after `-c`/`-p`) makes the target
//! `dlopen` the agent and map the shared file, writes each hook's code near its function and
//! patches the function's first bytes with a jump ([`code`]); then it lets the target go (or
//! keeps it, when the same run has `pid` probes there). At the end, the hooks are made inert;
//! no code written into the target is ever freed, so a thread inside a trampoline runs on.

pub mod code;
#[cfg(target_os = "linux")]
mod install;
#[cfg(target_os = "linux")]
pub mod ring;

#[cfg(target_os = "linux")]
pub use linux_source::{split, FpidSource};

/// The agent built from `agent/` by `build.rs` (empty where none is built).
pub const AGENT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fpid-agent.bin"));

/// Whether a run enables `fpid` probes in process `pid`.
pub fn has_fpid_probes(engine: &crate::engine::Engine, pid: u32) -> bool {
    let provider = format!("fpid{pid}");
    engine.enabled_probes().any(|p| p.provider == provider)
}

#[cfg(target_os = "linux")]
mod linux_source {
    use super::install::{install, Installed};
    use super::ring::{hits, SharedRing};
    use crate::engine::{Engine, EventSource, SourceState};
    use crate::providers::pid::PidProvider;
    use crate::sources::debugger::{walk_stack_in, PidSource, Regs, RSP};
    use crate::sources::perf::uprobe::{ExitWatch, SampledStack};
    use crate::symbols::ProcessModules;
    use crate::vm::{AddressSpace, FiringCtx};

    use super::ring::layout::KIND_RETURN;

    /// The fpid hooks of one traced process, drained from its ring.
    pub struct FpidSource {
        pid: u32,
        /// Present when this source owns the (running, untraced) process: its end is ours
        /// to report. Absent when a `pid` source of the same process does.
        watch: Option<ExitWatch>,
        /// Only to see the process go, when a `pid` source reports its end.
        gone: ExitWatch,
        ring: SharedRing,
        hooks: Installed,
        modules: ProcessModules,
        execname: Vec<u8>,
        ppid: u64,
        want_ustack: bool,
        announce: bool,
        /// Engine time minus CLOCK_MONOTONIC, and wall time minus engine time.
        offset: Option<(u64, u64)>,
        buf: Vec<u8>,
        ustack: Vec<u64>,
        reported: (u64, u64),
        ended: bool,
        /// Hits delivered, for tests and benches.
        pub hits: u64,
    }

    /// Splits a run's debugger source in two when it has `fpid` probes: the hooks go in now
    /// (the target is still stopped). With no `pid` probes in the process, the debugger lets
    /// it go and the fpid source alone watches it; else both run, the `pid` source reporting
    /// the end.
    pub fn split(
        src: Option<PidSource>,
        provider: &PidProvider,
        engine: &Engine,
    ) -> Result<(Option<PidSource>, Option<FpidSource>), String> {
        let Some(mut src) = src else {
            return Ok((None, None));
        };
        let pid = src.pid();
        if !super::has_fpid_probes(engine, pid) {
            return Ok((Some(src), None));
        }
        let fpid = provider.fpid();
        if src.has_pid_probes() {
            let avoid = src.probe_sites();
            let want_ustack = src.want_ustack;
            let args_used = src.args_used();
            let announce = src.announce;
            let installed = src.without_breakpoints(|target| {
                install(target, &fpid, engine, &avoid, want_ustack, args_used)
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
            let _ = announce;
            return Ok((Some(src), Some(s)));
        }
        let mut plan = src.into_plan(engine);
        let installed = install(
            &mut *plan.target,
            &fpid,
            engine,
            &[],
            plan.want_ustack,
            plan.args_used,
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
        let modules = fpid.modules_of(pid).unwrap_or(plan.modules);
        let mut s = FpidSource::new(
            pid,
            Some(watch),
            ring,
            hooks,
            modules,
            plan.execname,
            plan.ppid,
            plan.want_ustack,
        );
        s.announce = plan.announce;
        Ok((None, Some(s)))
    }

    impl FpidSource {
        #[allow(clippy::too_many_arguments)]
        fn new(
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
                ring,
                hooks,
                modules,
                execname,
                ppid,
                want_ustack,
                announce: true,
                offset: None,
                buf: Vec::new(),
                ustack: Vec::with_capacity(64),
                reported: (0, 0),
                ended: false,
                hits: 0,
            }
        }

        /// Fires what the ring holds.
        fn drain(&mut self, engine: &mut Engine) {
            let mut buf = std::mem::take(&mut self.buf);
            buf.clear();
            self.ring.drain(&mut buf);
            for hit in hits(&buf) {
                if engine.done() {
                    break;
                }
                self.fire(&hit, engine);
            }
            self.buf = buf;
        }

        fn fire(&mut self, hit: &super::ring::Hit<'_>, engine: &mut Engine) {
            let r = &hit.record;
            let Some(hook) = self.hooks.sites.get(r.hook as usize) else {
                return;
            };
            self.hits += 1;
            let ret = r.kind == KIND_RETURN;
            let (off, wall_off) = *self.offset.get_or_insert_with(|| {
                let e = engine.now_ns();
                let wall = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64);
                (
                    e.wrapping_sub(crate::sources::debugger::monotonic_ns()),
                    wall.wrapping_sub(e),
                )
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
            if ret {
                regs.gpr[0] = r.args[0];
                regs.gpr[2] = r.args[1];
            } else {
                let g = &mut regs.gpr;
                g[7] = r.args[0];
                g[6] = r.args[1];
                g[2] = r.args[2];
                g[1] = r.args[3];
                g[8] = r.args[4];
                g[9] = r.args[5];
            }
            if self.want_ustack {
                let read = |a: u64| {
                    let mut b = [0u8; 8];
                    mem.read(a, &mut b).ok().map(|_| u64::from_le_bytes(b))
                };
                if ret {
                    walk_stack_in(&read, &self.modules, &regs, false, 99, &mut self.ustack);
                    self.ustack.insert(0, hook.func + hook.ret_offset);
                } else {
                    walk_stack_in(&read, &self.modules, &regs, true, 100, &mut self.ustack);
                }
            }
            let uregs = regs.uregs();
            let probes = if ret { &hook.returns } else { &hook.entries };
            for info in probes {
                if !engine.is_enabled(info.id) {
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
                engine.fire(&cx);
            }
        }

        /// Says what the ring lost since the last report.
        fn report_losses(&mut self) {
            let (drops, shadow) = self.ring.losses();
            if drops > self.reported.0 {
                eprintln!(
                    "dtx: {} fpid drops in pid {} (its ring was full)",
                    drops - self.reported.0,
                    self.pid
                );
            }
            if shadow > self.reported.1 {
                eprintln!(
                    "dtx: {} fpid return probes missed in pid {} (calls nested too deep)",
                    shadow - self.reported.1,
                    self.pid
                );
            }
            self.reported = (drops, shadow);
        }

        fn end(&mut self, how: &str, code: Option<i32>) -> SourceState {
            self.ended = true;
            self.ring.disable();
            if self.announce && self.watch.is_some() {
                eprintln!("dtx: pid {} {how}", self.pid);
            }
            SourceState::Ended(code)
        }
    }

    impl EventSource for FpidSource {
        fn pump(&mut self, deadline: u64, engine: &mut Engine) -> SourceState {
            if self.ended {
                return SourceState::Ended(None);
            }
            loop {
                self.drain(engine);
                let end = match &self.watch {
                    Some(w) => w.ended(),
                    None => self.gone.ended().map(|(_, _)| (String::new(), None)),
                };
                if let Some((how, code)) = end {
                    // what the process wrote before it ended
                    self.drain(engine);
                    self.report_losses();
                    return self.end(&how, code);
                }
                let now = engine.now_ns();
                if engine.done() || now >= deadline {
                    return SourceState::Running;
                }
                // the ring has no wake-up: poll the process's end for up to a millisecond
                let ms = (deadline - now).div_ceil(1_000_000).min(1) as i32;
                let fd = self
                    .watch
                    .as_ref()
                    .and_then(|w| w.fd())
                    .or_else(|| self.gone.fd());
                match fd {
                    Some(fd) => {
                        let mut p = libc::pollfd {
                            fd,
                            events: libc::POLLIN,
                            revents: 0,
                        };
                        // SAFETY: one valid pollfd.
                        unsafe { libc::poll(&mut p, 1, ms) };
                    }
                    None => std::thread::sleep(std::time::Duration::from_millis(ms as u64)),
                }
            }
        }

        fn finish(&mut self, engine: &mut Engine) {
            self.drain(engine);
            self.report_losses();
        }

        fn stop(&mut self) {
            // the hooks pass straight through from now on; the target runs on
            self.ring.disable();
            self.ended = true;
        }
    }

    impl Drop for FpidSource {
        fn drop(&mut self) {
            self.ring.disable();
        }
    }
}
