//! The `pid` provider's kernel backend on Linux: one `uprobe` perf event per probe site and CPU
//! (the `uprobe` PMU: `config1` the module's path, `config2` the file offset of the
//! instruction; samples of processes other than the target are dropped), sampling the user
//! registers and, for `ustack()` or stack arguments, a copy of the user
//! stack. The target never stops: the kernel records the hit in a ring buffer and the
//! clauses run here afterwards, over the sampled registers and stack. So this backend serves
//! only clauses that read nothing else of the target (see
//! [`crate::sources::debugger::stopped_target_needed`]); `-x pidmode=ptrace` keeps the
//! debugger loop.
//!
//! A hit costs a kernel trap and a sample (no context switch to dtx, no system call of dtx per
//! hit): `benches/pid_hit.rs` measures it next to the ptrace loop.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::abi::{
    event_id, finish, mono_ns, online_cpus, open_error, perf_event_open, PerfEventAttr, Ring,
    IOC_SET_OUTPUT,
};
use super::record::{self, kind, sample, x86_reg};
use crate::probes::ProbeInfo;
use crate::providers::pid::SiteKind;
use crate::sources::debugger::{
    walk_stack_in, DebugEvent, ExitStatus, PidPlan, Regs, TargetProcess, RSP,
};
use crate::sources::sink::{EventSource, Sink, SourceState};
use crate::symbols::ProcessModules;
use crate::vm::{AddressSpace, FiringCtx};

/// The dynamic PMU type of uprobes, or why there is none.
pub fn pmu_type() -> Result<u32, String> {
    let path = "/sys/bus/event_source/devices/uprobe/type";
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| format!("uprobes are unavailable on this system (no {path})"))
}

/// The `config` bit that makes a uprobe a return probe (a uretprobe), from the PMU's format.
pub fn retprobe_bit() -> Option<u32> {
    let f = std::fs::read_to_string("/sys/bus/event_source/devices/uprobe/format/retprobe").ok()?;
    f.trim().strip_prefix("config:")?.parse().ok()
}

/// The module file and file offset of run-time address `addr`, from `/proc/PID/maps` text.
pub fn file_offset(maps: &str, addr: u64) -> Option<(String, u64)> {
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (a, b) = f.next()?.split_once('-')?;
        let (start, end) = (
            u64::from_str_radix(a, 16).ok()?,
            u64::from_str_radix(b, 16).ok()?,
        );
        if addr < start || addr >= end {
            continue;
        }
        let _perms = f.next()?;
        let off = u64::from_str_radix(f.next()?, 16).ok()?;
        let path: String = f.skip(2).collect::<Vec<_>>().join(" ");
        if !path.starts_with('/') {
            return None;
        }
        return Some((path, addr - start + off));
    }
    None
}

/// The debugger's register set from a perf sample's user registers (`reg` answers for an
/// `x86_reg` index; registers not sampled read 0).
pub fn sampled_regs(reg: impl Fn(u32) -> Option<u64>) -> Regs {
    let r = |i: u32| reg(i).unwrap_or(0);
    let mut regs = Regs {
        rip: r(x86_reg::IP),
        rflags: r(x86_reg::FLAGS),
        cs: r(x86_reg::CS),
        ss: r(x86_reg::SS),
        ..Default::default()
    };
    regs.gpr[..8].copy_from_slice(&[
        r(x86_reg::AX),
        r(x86_reg::CX),
        r(x86_reg::DX),
        r(x86_reg::BX),
        r(x86_reg::SP),
        r(x86_reg::BP),
        r(x86_reg::SI),
        r(x86_reg::DI),
    ]);
    for k in 0..8 {
        regs.gpr[8 + k] = r(x86_reg::R8 + k as u32);
    }
    regs
}

/// The place of a target handed on (its methods are never called).
struct Gone(u32);

impl TargetProcess for Gone {
    fn pid(&self) -> u32 {
        self.0
    }
    fn read_memory(&self, _: u64, _: &mut [u8]) -> bool {
        false
    }
    fn write_memory(&self, _: u64, _: &[u8]) -> bool {
        false
    }
    fn regs(&self, _: u32) -> Option<Regs> {
        None
    }
    fn set_regs(&self, _: u32, _: &Regs) -> bool {
        false
    }
    fn resume(&mut self, _: u32, _: i32) {}
    fn step(&mut self, _: u32) {}
    fn resume_all(&mut self) {}
    fn wait(&mut self, _: Option<u64>) -> DebugEvent {
        DebugEvent::Exited(ExitStatus::Code(0))
    }
    fn wait_thread(&mut self, _: u32) -> DebugEvent {
        DebugEvent::Exited(ExitStatus::Code(0))
    }
    fn release_child(&mut self, _: u32, _: &[(u64, u8)]) {}
    fn detach(&mut self, _: &[(u64, u8)]) {}
    fn maps(&self) -> Option<(String, String)> {
        None
    }
    fn identity(&self) -> (Vec<u8>, u64) {
        (Vec::new(), 0)
    }
}

pub use crate::sources::debugger::SampledStack;

/// Watches a traced process that runs free (no debugger holds it) for its end.
pub struct ExitWatch {
    pid: u32,
    /// dtx started the process (it is our child: its exit status is ours to read).
    child: bool,
    pidfd: Option<OwnedFd>,
}

impl ExitWatch {
    pub fn new(pid: u32, child: bool) -> ExitWatch {
        // SAFETY: pidfd_open of the target; the descriptor is owned below.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        let pidfd = (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) });
        ExitWatch { pid, child, pidfd }
    }

    /// Ends the process when dtx started it and it still runs, as dtrace ends a `-c` command
    /// it created when it exits first (dt_proc.c: a created process is released with
    /// PRELEASE_KILL). While unreaped, our child keeps its pid, so the signal cannot reach
    /// another process: a child already reaped (waitpid fails) is left alone.
    pub fn end_child(&self) {
        if !self.child {
            return;
        }
        let mut st = 0;
        // SAFETY: waitpid on our own child with WNOHANG; st is a valid int.
        if unsafe { libc::waitpid(self.pid as i32, &mut st, libc::WNOHANG) } != 0 {
            return;
        }
        // SAFETY: signalling our own unreaped child, then reaping it.
        unsafe {
            libc::kill(self.pid as i32, libc::SIGKILL);
            libc::waitpid(self.pid as i32, &mut st, 0);
        }
    }

    /// A descriptor that polls readable when the process ends.
    pub fn fd(&self) -> Option<i32> {
        self.pidfd.as_ref().map(|f| f.as_raw_fd())
    }

    /// How the process ended (dtrace's words, and its status when dtx started it), once it
    /// has.
    pub fn ended(&self) -> Option<(String, Option<i32>)> {
        if self.child {
            let mut st = 0;
            // SAFETY: waitpid on our own child with WNOHANG; st is a valid int.
            let r = unsafe { libc::waitpid(self.pid as i32, &mut st, libc::WNOHANG) };
            if r == self.pid as i32 {
                if libc::WIFEXITED(st) {
                    let c = libc::WEXITSTATUS(st);
                    if c == 0 {
                        return Some(("has exited".to_string(), Some(0)));
                    }
                    return Some((format!("exited with status {c}"), Some(c)));
                }
                let s = libc::WTERMSIG(st);
                return Some((format!("terminated by signal {s}"), Some(128 + s)));
            }
            if r < 0 {
                return Some(("has exited".to_string(), None));
            }
            return None;
        }
        let gone = match &self.pidfd {
            Some(fd) => {
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd, no wait.
                unsafe { libc::poll(&mut p, 1, 0) > 0 }
            }
            // SAFETY: kill with signal 0 only checks that the process exists.
            None => (unsafe { libc::kill(self.pid as i32, 0) }) != 0,
        };
        gone.then(|| ("has exited".to_string(), None))
    }
}

/// The pid provider through uprobes: one traced process.
pub struct UprobeSource {
    pid: u32,
    watch: ExitWatch,
    rings: Vec<Ring>,
    _events: Vec<OwnedFd>,
    /// Event id → index in `sites`.
    by_id: HashMap<u64, usize>,
    sites: Vec<(u64, Vec<(ProbeInfo, SiteKind)>)>,
    /// Sites served by a uretprobe (the sample is taken back in the caller).
    returns: Vec<bool>,
    modules: ProcessModules,
    execname: Vec<u8>,
    ppid: u64,
    want_ustack: bool,
    args_used: usize,
    stack: bool,
    announce: bool,
    /// Engine time minus CLOCK_MONOTONIC, and wall time minus engine time.
    offset: Option<(u64, u64)>,
    buf: Vec<u8>,
    ustack: Vec<u64>,
    lost: u64,
    ended: bool,
    /// Hits delivered, for tests and benches.
    pub hits: u64,
}

impl UprobeSource {
    /// Opens the uprobes of `plan`'s sites while its target is stopped, then lets it go. On an
    /// error, a target dtx started is killed and a grabbed one let go.
    pub fn open(mut plan: PidPlan) -> Result<UprobeSource, String> {
        let created = plan.created;
        let pid = plan.target.pid();
        let target = std::mem::replace(&mut plan.target, Box::new(Gone(pid)));
        Self::open_with(plan, target).map_err(|(e, mut target)| {
            if created {
                target.terminate();
            } else {
                target.detach(&[]);
            }
            e
        })
    }

    #[allow(clippy::type_complexity)]
    fn open_with(
        plan: PidPlan,
        mut target: Box<dyn TargetProcess>,
    ) -> Result<UprobeSource, (String, Box<dyn TargetProcess>)> {
        macro_rules! bail {
            ($e:expr) => {
                match $e {
                    Ok(v) => v,
                    Err(e) => return Err((e, target)),
                }
            };
        }
        let pmu = bail!(pmu_type());
        let pid = target.pid();
        let (maps, _) = bail!(target
            .maps()
            .ok_or_else(|| format!("pid {pid}: cannot read its mappings")));
        let stack = plan.want_ustack || plan.args_used > 6;
        let stack_bytes: u32 = if plan.want_ustack { 8 * 1024 } else { 64 };
        // a function's only `ret` is probed by a uretprobe at its entry: the kernel single-steps
        // a `ret` out of line (two traps), where the return trampoline costs one
        let retbit = retprobe_bit();
        let mut locations = Vec::new();
        let mut returns = Vec::new();
        for (addr, _) in &plan.sites {
            let (at, config) = match (plan.return_of.get(addr), retbit) {
                (Some(&entry), Some(bit)) => (entry, 1u64 << bit),
                _ => (*addr, 0),
            };
            returns.push(config != 0);
            let (path, off) = bail!(file_offset(&maps, at).ok_or_else(|| {
                format!("pid {pid}: no module file maps 0x{at:x} (cannot place a uprobe)")
            }));
            let path = bail!(CString::new(path).map_err(|_| format!("pid {pid}: bad module path")));
            locations.push((path, off, config));
        }
        let pages = if plan.want_ustack { 4096 } else { 1024 };
        let data_bytes = (pages * 4096) as u32;
        let mut events = Vec::new();
        let mut by_id = HashMap::new();
        // one event per (site, CPU), each CPU's events writing into one ring. Not per task:
        // the threads a task creates do not inherit uprobe events (their hits were never
        // delivered here), so the events see every process that runs the code and the samples
        // of others are dropped by pid
        let cpus = online_cpus();
        let mut leaders: Vec<Option<Ring>> = cpus.iter().map(|_| None).collect();
        {
            for (i, (path, off, config)) in locations.iter().enumerate() {
                for (c, &cpu) in cpus.iter().enumerate() {
                    let mut a = PerfEventAttr {
                        kind: pmu,
                        config: *config,
                        config1: path.as_ptr() as u64,
                        config2: *off,
                        sample_period: 1,
                        sample_type: sample::IDENTIFIER
                            | sample::TID
                            | sample::TIME
                            | sample::CPU
                            | sample::REGS_USER
                            | if stack { sample::STACK_USER } else { 0 },
                        sample_regs_user: x86_reg::MASK,
                        sample_stack_user: if stack { stack_bytes } else { 0 },
                        ..Default::default()
                    };
                    a = finish(a, data_bytes);
                    let fd = match perf_event_open(&a, -1, cpu as i32) {
                        Ok(fd) => fd,
                        Err(e) => {
                            let e = open_error(
                                &format!("uprobe {}:0x{off:x}", path.to_string_lossy()),
                                &e,
                            );
                            return Err((e, target));
                        }
                    };
                    by_id.insert(bail!(event_id(&fd)), i);
                    match &leaders[c] {
                        None => {
                            let ring = bail!(Ring::map(fd, cpu, pages).map_err(|e| {
                                format!("could not enable tracing: perf ring buffer: {e}")
                            }));
                            leaders[c] = Some(ring);
                        }
                        Some(l) => {
                            // SAFETY: redirecting this event's records into the CPU's ring.
                            let r = unsafe {
                                libc::ioctl(fd.as_raw_fd(), IOC_SET_OUTPUT, l.fd.as_raw_fd())
                            };
                            if r != 0 {
                                let e = format!(
                                    "could not enable tracing: perf set-output: {}",
                                    std::io::Error::last_os_error()
                                );
                                return Err((e, target));
                            }
                            events.push(fd);
                        }
                    }
                }
            }
        }
        let rings: Vec<Ring> = leaders.into_iter().flatten().collect();
        let watch = ExitWatch::new(pid, plan.created);
        // the uprobes are in place: the target runs on untraced
        target.detach(&[]);
        Ok(UprobeSource {
            pid,
            watch,
            rings,
            _events: events,
            by_id,
            sites: plan.sites,
            returns,
            modules: plan.modules,
            execname: plan.execname,
            ppid: plan.ppid,
            want_ustack: plan.want_ustack,
            args_used: plan.args_used,
            stack,
            announce: plan.announce,
            offset: None,
            buf: Vec::new(),
            ustack: Vec::with_capacity(64),
            lost: 0,
            ended: false,
            hits: 0,
        })
    }

    /// Drains every ring and fires what it held.
    fn drain(&mut self, sink: &mut dyn Sink) {
        let mut buf = std::mem::take(&mut self.buf);
        for i in 0..self.rings.len() {
            buf.clear();
            self.rings[i].drain(&mut buf);
            let mut at = 0;
            while let Some(h) = buf.get(at..).and_then(record::Header::parse) {
                let size = h.size as usize;
                if size < record::Header::SIZE || at + size > buf.len() {
                    break;
                }
                let body = &buf[at + record::Header::SIZE..at + size];
                match h.kind {
                    kind::SAMPLE => {
                        if let Some(s) = record::parse_user_sample(body, x86_reg::MASK, self.stack)
                        {
                            self.sample(&s, sink);
                        }
                    }
                    kind::LOST => {
                        if let Some((_, n)) = record::parse_lost(body) {
                            self.lost += n;
                        }
                    }
                    _ => {}
                }
                at += size;
            }
        }
        self.buf = buf;
    }

    fn sample(&mut self, s: &record::UserSample<'_>, sink: &mut dyn Sink) {
        // forked children inherit the events: only the target's own hits count
        if s.pid != self.pid || sink.done() {
            return;
        }
        let Some(&i) = self.by_id.get(&s.id) else {
            return;
        };
        if s.regs.is_empty() {
            return;
        }
        self.hits += 1;
        let mut regs = sampled_regs(|i| s.reg(x86_reg::MASK, i));
        let (off, wall_off) = *self.offset.get_or_insert_with(|| {
            let e = sink.now_ns();
            let wall = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            (e.wrapping_sub(mono_ns()), wall.wrapping_sub(e))
        });
        let now = s.time.wrapping_add(off);
        let wall = now.wrapping_add(wall_off);
        let mem = SampledStack {
            base: regs.gpr[RSP],
            bytes: s.stack,
        };
        let g = regs.gpr;
        let mut entry_args = [g[7], g[6], g[2], g[1], g[8], g[9], 0, 0, 0, 0];
        if self.args_used > 6 {
            for (k, a) in entry_args[6..].iter_mut().enumerate() {
                let mut b = [0u8; 8];
                if mem.read(g[RSP] + 8 + 8 * k as u64, &mut b).is_ok() {
                    *a = u64::from_le_bytes(b);
                }
            }
        }
        let site = self.sites[i].0;
        let uretprobe = self.returns[i];
        // a uretprobe's registers are the caller's, just after the return: report the `ret`
        let caller = regs;
        if uretprobe {
            regs.rip = site;
        }
        let uregs = regs.uregs();
        let probes = &self.sites[i].1;
        for (info, kind) in probes {
            if !sink.is_enabled(info.id) {
                continue;
            }
            let args = match kind {
                SiteKind::Return { offset } => [*offset, g[0], g[2], 0, 0, 0, 0, 0, 0, 0],
                _ => entry_args,
            };
            if self.want_ustack {
                let at_edge = matches!(kind, SiteKind::Entry | SiteKind::Return { .. });
                let read = |a: u64| {
                    let mut b = [0u8; 8];
                    mem.read(a, &mut b).ok().map(|_| u64::from_le_bytes(b))
                };
                if uretprobe {
                    walk_stack_in(&read, &self.modules, &caller, false, 99, &mut self.ustack);
                    self.ustack.insert(0, site);
                } else {
                    walk_stack_in(&read, &self.modules, &regs, at_edge, 100, &mut self.ustack);
                }
            }
            let mut cx = FiringCtx::synthetic(info, now, wall, &self.execname);
            cx.args = args;
            cx.pid = self.pid as u64;
            cx.ppid = self.ppid;
            cx.tid = s.tid as u64;
            cx.cpu = s.cpu;
            cx.memory = &mem;
            cx.uregs = &uregs;
            cx.ustack = &self.ustack;
            sink.fire(&cx);
        }
    }

    /// The target's end, when it has ended: its status when dtx started it.
    fn exited(&mut self) -> Option<SourceState> {
        let (how, code) = self.watch.ended()?;
        Some(self.end(&how, code))
    }

    fn end(&mut self, how: &str, code: Option<i32>) -> SourceState {
        self.ended = true;
        if self.announce {
            crate::output::stderr::say("dtx", format_args!("pid {} {how}", self.pid));
        }
        SourceState::Ended(code)
    }

    fn report_lost(&mut self) {
        if self.lost > 0 {
            crate::output::stderr::say(
                "dtx",
                format_args!(
                    "{} pid probe hits lost (the uprobe ring buffer was full)",
                    self.lost
                ),
            );
            self.lost = 0;
        }
    }
}

impl EventSource for UprobeSource {
    fn pump(&mut self, deadline: u64, sink: &mut dyn Sink) -> SourceState {
        if self.ended {
            return SourceState::Ended(None);
        }
        loop {
            self.drain(sink);
            if let Some(end) = self.exited() {
                // what the process wrote before it ended
                self.drain(sink);
                self.report_lost();
                return end;
            }
            let now = sink.now_ns();
            if sink.done() || now >= deadline {
                return SourceState::Running;
            }
            let ms = (deadline - now).div_ceil(1_000_000).min(100) as i32;
            let mut fds: Vec<libc::pollfd> = self
                .rings
                .iter()
                .map(|r| r.fd.as_raw_fd())
                .chain(self.watch.fd())
                .map(|fd| libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            // SAFETY: `fds` is a valid array of pollfd of the given length.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        }
    }

    fn finish(&mut self, sink: &mut dyn Sink) {
        self.drain(sink);
        self.report_lost();
    }

    fn stop(&mut self) {
        // closing the events takes the uprobes out; a grabbed target runs on, one dtx
        // started ends with dtx
        self._events.clear();
        self.rings.clear();
        if !self.ended {
            self.watch.end_child();
        }
        self.ended = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_offsets_from_maps() {
        let maps = "\
55d0c0000000-55d0c0001000 r--p 00000000 08:01 123 /usr/bin/prog
55d0c0001000-55d0c0002000 r-xp 00001000 08:01 123 /usr/bin/prog
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 [heap]
7f1000000000-7f1000100000 r-xp 00028000 08:01 456 /lib/x86_64-linux-gnu/libc.so.6
";
        assert_eq!(
            file_offset(maps, 0x55d0c0001139),
            Some(("/usr/bin/prog".into(), 0x1139))
        );
        assert_eq!(
            file_offset(maps, 0x7f1000000010),
            Some(("/lib/x86_64-linux-gnu/libc.so.6".into(), 0x28010))
        );
        assert_eq!(file_offset(maps, 0x7f0000000010), None);
        assert_eq!(file_offset(maps, 0x10), None);
    }

    #[test]
    fn sampled_stack_reads_only_what_was_copied() {
        let bytes = [1u8, 2, 3, 4, 5, 6, 7, 8];
        let m = SampledStack {
            base: 0x1000,
            bytes: &bytes,
        };
        let mut b = [0u8; 4];
        assert!(m.read(0x1004, &mut b).is_ok());
        assert_eq!(b, [5, 6, 7, 8]);
        assert!(m.read(0x1006, &mut b).is_err());
        assert!(m.read(0xfff, &mut b).is_err());
        assert!(m.write(0x1000, &b).is_err());
    }
}
