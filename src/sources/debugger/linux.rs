//! The Linux debugger: ptrace. A started target (`-c`) is forked with `PTRACE_TRACEME` and
//! stops at its exec; an attached one (`-p`) is seized thread by thread and interrupted. New
//! threads follow by `PTRACE_O_TRACECLONE`; forked children are caught (`PTRACE_O_TRACEFORK`)
//! only to take the inherited breakpoints out of them. Memory goes through `/proc/PID/mem`
//! (one syscall per access, and it writes to read-only code pages). `waitpid` is bounded by a
//! POSIX timer that signals this thread at the deadline.

use std::collections::HashSet;
use std::ffi::CString;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{DebugEvent, ExitStatus, Regs, Stop, TargetProcess};

/// The monotonic clock in ns.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

static TIMER_FIRED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_timer(_sig: libc::c_int) {
    TIMER_FIRED.store(true, Ordering::SeqCst);
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn strerror(e: i32) -> String {
    match e {
        libc::ESRCH => "No such process".into(),
        libc::EPERM => "Permission denied".into(),
        libc::ENOENT => "No such file or directory".into(),
        libc::EACCES => "Permission denied".into(),
        _ => std::io::Error::from_raw_os_error(e).to_string(),
    }
}

/// Why `-p PID` cannot be had: "No such process" only when there is none; a process that
/// exists but refuses the debugger says so, and names its tracer when it has one.
fn grab_error(pid: u32, e: i32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"));
    let Ok(status) = status else {
        return format!("failed to grab pid {pid}: {}", strerror(libc::ESRCH));
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
            .unwrap_or_default()
    };
    let why = match field("TracerPid:").parse::<u32>() {
        Ok(t) if t != 0 => {
            // TracerPid is the tracing thread: name its process
            let tgid = std::fs::read_to_string(format!("/proc/{t}/status"))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("Tgid:"))
                        .and_then(|v| v.trim().parse::<u32>().ok())
                })
                .unwrap_or(t);
            format!("it is traced already, by pid {tgid}")
        }
        _ if pid == std::process::id() => "it is this dtx".to_string(),
        _ if e == libc::EPERM || e == libc::EACCES => {
            "ptrace refused: another user's or a protected process, kernel.yama.ptrace_scope, \
             or a container's limits"
                .to_string()
        }
        _ => strerror(e),
    };
    format!(
        "failed to grab pid {pid}: the process exists ({}) but cannot be traced: {why}",
        field("Name:")
    )
}

const OPTIONS: libc::c_int = libc::PTRACE_O_TRACECLONE
    | libc::PTRACE_O_TRACEFORK
    | libc::PTRACE_O_TRACEVFORK
    | libc::PTRACE_O_TRACEEXEC;

/// A process traced with ptrace.
pub struct LinuxTarget {
    pid: u32,
    mem: std::fs::File,
    threads: HashSet<u32>,
    /// Threads created but not yet seen stopping for the first time.
    starting: HashSet<u32>,
    /// vfork children sharing the target's memory until they exec or exit.
    vforked: HashSet<u32>,
    /// Threads held stopped until `resume_all`.
    held: Vec<u32>,
    timer: Option<libc::timer_t>,
    armed: Option<u64>,
    /// The exit of the whole process, once seen.
    exited: Option<ExitStatus>,
    /// The registers last read, by thread, until it runs again (saves a read in `set_regs`).
    last_regs: std::cell::Cell<Option<(u32, libc::user_regs_struct)>>,
    /// The address of a `syscall` instruction in the target's code, for [`TargetProcess::map_code`].
    syscall_insn: Option<u64>,
}

fn ptrace(req: libc::c_uint, tid: u32, addr: usize, data: usize) -> libc::c_long {
    // SAFETY: ptrace requests with integer or valid-pointer arguments; the kernel checks the
    // tracee.
    unsafe {
        libc::ptrace(
            req,
            tid as libc::pid_t,
            addr as *mut libc::c_void,
            data as *mut libc::c_void,
        )
    }
}

fn waitpid(pid: i32, flags: i32) -> Result<(u32, i32), i32> {
    let mut st = 0;
    // SAFETY: st is a valid out pointer.
    let r = unsafe { libc::waitpid(pid, &mut st, flags | libc::__WALL) };
    if r < 0 {
        Err(errno())
    } else {
        Ok((r as u32, st))
    }
}

impl LinuxTarget {
    /// Starts `argv` traced; it is stopped at its exec when this returns.
    pub fn spawn(argv: &[String]) -> Result<LinuxTarget, String> {
        Self::spawn_with_output(argv, None)
    }

    /// [`LinuxTarget::spawn`], with the target's stdout and stderr going to `output` (a file
    /// descriptor the caller owns; the console reads it into its log) and its stdin from
    /// /dev/null, when given.
    pub fn spawn_with_output(argv: &[String], output: Option<i32>) -> Result<LinuxTarget, String> {
        let shown = argv.first().cloned().unwrap_or_default();
        let cargs: Vec<CString> = argv
            .iter()
            .map(|a| {
                CString::new(a.as_bytes())
                    .map_err(|_| format!("failed to execute {shown}: bad argument"))
            })
            .collect::<Result<_, _>>()?;
        if cargs.is_empty() {
            return Err("failed to execute: empty command".into());
        }
        let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        // dtx's environment with the .NET perf map turned on (managed pid probes)
        let cenv: Vec<CString> = super::target_environment()
            .into_iter()
            .filter_map(|(k, v)| {
                use std::os::unix::ffi::OsStrExt;
                let mut kv = k.as_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                CString::new(kv).ok()
            })
            .collect();
        let mut envp: Vec<*const libc::c_char> = cenv.iter().map(|c| c.as_ptr()).collect();
        envp.push(std::ptr::null());
        let dev_null = c"/dev/null";
        let mut fds = [0; 2];
        // SAFETY: fds is a valid array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(format!("failed to execute {shown}: {}", strerror(errno())));
        }
        // SAFETY: the child only calls async-signal-safe functions before exec or _exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!("failed to execute {shown}: {}", strerror(errno())));
        }
        if pid == 0 {
            // SAFETY: child side of fork: open, dup2, ptrace, execvpe, write and _exit only.
            unsafe {
                libc::close(fds[0]);
                if let Some(fd) = output {
                    let null = libc::open(dev_null.as_ptr(), libc::O_RDONLY);
                    if null >= 0 {
                        libc::dup2(null, 0);
                    }
                    libc::dup2(fd, 1);
                    libc::dup2(fd, 2);
                }
                libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0);
                libc::execvpe(ptrs[0], ptrs.as_ptr(), envp.as_ptr());
                let e = *libc::__errno_location();
                libc::write(fds[1], &e as *const i32 as *const libc::c_void, 4);
                libc::_exit(127);
            }
        }
        // SAFETY: closing our copy of the write end.
        unsafe { libc::close(fds[1]) };
        let mut e = [0u8; 4];
        // SAFETY: reading at most 4 bytes into e.
        let n = unsafe { libc::read(fds[0], e.as_mut_ptr() as *mut libc::c_void, 4) };
        // SAFETY: closing the read end.
        unsafe { libc::close(fds[0]) };
        if n == 4 {
            let _ = waitpid(pid, 0);
            return Err(format!(
                "failed to execute {shown}: {}",
                strerror(i32::from_ne_bytes(e))
            ));
        }
        match waitpid(pid, 0) {
            Ok((_, st)) if libc::WIFSTOPPED(st) => {}
            _ => {
                return Err(format!(
                    "failed to execute {shown}: the process did not start"
                ))
            }
        }
        ptrace(libc::PTRACE_SETOPTIONS, pid as u32, 0, OPTIONS as usize);
        let mut t = Self::with_pid(pid as u32).map_err(|e| e.to_string())?;
        t.threads.insert(pid as u32);
        t.held.push(pid as u32);
        Ok(t)
    }

    /// Attaches to every thread of `pid` and stops them.
    pub fn attach(pid: u32) -> Result<LinuxTarget, String> {
        let grab_err = |e: i32| grab_error(pid, e);
        if pid == 0 || pid == std::process::id() {
            return Err(grab_err(libc::EPERM));
        }
        let mut t =
            Self::with_pid(pid).map_err(|e| grab_err(e.raw_os_error().unwrap_or(libc::ESRCH)))?;
        // threads may come and go while we attach: repeat until the set is stable
        loop {
            let tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
                .map_err(|_| grab_err(libc::ESRCH))?
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect();
            let mut added = false;
            for tid in tids {
                if t.threads.contains(&tid) {
                    continue;
                }
                if ptrace(libc::PTRACE_SEIZE, tid, 0, OPTIONS as usize) != 0 {
                    let e = errno();
                    if tid == pid {
                        return Err(grab_err(e));
                    }
                    continue;
                }
                ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0);
                t.threads.insert(tid);
                added = true;
            }
            if !added {
                break;
            }
        }
        // collect the interrupt stops
        let mut pending: HashSet<u32> = t.threads.clone();
        while !pending.is_empty() {
            match waitpid(-1, 0) {
                Ok((tid, st)) if libc::WIFSTOPPED(st) => {
                    if pending.remove(&tid) {
                        t.held.push(tid);
                    } else if !t.threads.contains(&tid) {
                        // a thread born meanwhile (auto-attached)
                        t.threads.insert(tid);
                        t.held.push(tid);
                    } else {
                        ptrace(libc::PTRACE_CONT, tid, 0, 0);
                    }
                }
                Ok((tid, _)) => {
                    pending.remove(&tid);
                    t.threads.remove(&tid);
                    if tid == pid {
                        return Err(grab_err(libc::ESRCH));
                    }
                }
                Err(_) => break,
            }
        }
        Ok(t)
    }

    fn with_pid(pid: u32) -> Result<LinuxTarget, std::io::Error> {
        let mem = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/mem"))?;
        Ok(LinuxTarget {
            pid,
            mem,
            threads: HashSet::new(),
            starting: HashSet::new(),
            vforked: HashSet::new(),
            held: Vec::new(),
            timer: None,
            armed: None,
            exited: None,
            last_regs: std::cell::Cell::new(None),
            syscall_insn: None,
        })
    }

    /// A `syscall` instruction (the bytes 0f 05, wherever they are) in executable memory of
    /// the target, the vDSO's first.
    fn find_syscall_insn(&self, maps: &str) -> Option<u64> {
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for line in maps.lines() {
            let vdso = line.ends_with("[vdso]");
            let Some(&(s, e, x)) = mappings(line).first() else {
                continue;
            };
            if x && (vdso || !line.ends_with(']')) {
                if vdso {
                    ranges.insert(0, (s, e));
                } else {
                    ranges.push((s, e));
                }
            }
        }
        let mut buf = vec![0u8; 64 * 1024];
        for (s, e) in ranges {
            let mut at = s;
            while at < e {
                let n = ((e - at) as usize).min(buf.len());
                if !self.read_memory(at, &mut buf[..n]) {
                    break;
                }
                if let Some(i) = buf[..n].windows(2).position(|w| w == [0x0f, 0x05]) {
                    return Some(at + i as u64);
                }
                // a pair split across the chunk boundary is found by overlapping by one byte
                at += (n as u64).max(2) - 1;
            }
        }
        None
    }

    /// Runs a stopped, just-started target to `addr` (its `main`) with a temporary breakpoint,
    /// so that the libraries it needs are loaded. Leaves it stopped there.
    pub fn run_to(&mut self, addr: u64) -> Result<(), String> {
        let pid = self.pid;
        let mut orig = [0u8; 1];
        if !self.read_memory(addr, &mut orig) || !self.write_memory(addr, &[0xcc]) {
            return Err(format!(
                "pid {pid}: cannot plant a breakpoint at 0x{addr:x}"
            ));
        }
        self.held.retain(|&t| t != pid);
        self.resume(pid, 0);
        loop {
            match self.wait(None) {
                DebugEvent::Stopped {
                    tid,
                    stop: Stop::Trap,
                } => {
                    if let Some(mut r) = self.regs(tid) {
                        if r.rip == addr + 1 {
                            self.write_memory(addr, &orig);
                            r.rip = addr;
                            self.set_regs(tid, &r);
                            self.held.push(tid);
                            return Ok(());
                        }
                    }
                    self.resume(tid, libc::SIGTRAP);
                }
                DebugEvent::Stopped {
                    tid,
                    stop: Stop::Signal(s),
                } => self.resume(tid, s),
                DebugEvent::Stopped {
                    tid,
                    stop: Stop::Fork { child, .. },
                } => {
                    self.release_child(child, &[(addr, orig[0])]);
                    self.resume(tid, 0);
                }
                DebugEvent::Stopped { tid, .. } => self.resume(tid, 0),
                DebugEvent::ThreadExited { .. } | DebugEvent::Timeout => {}
                DebugEvent::Exited(_) => {
                    return Err(format!("pid {pid} exited before reaching main"));
                }
            }
        }
    }

    fn arm(&mut self, deadline: Option<u64>) {
        if self.armed == deadline {
            return;
        }
        let Some(deadline) = deadline else {
            self.disarm();
            return;
        };
        let timer = match self.timer {
            Some(t) => t,
            None => match make_timer() {
                Some(t) => {
                    self.timer = Some(t);
                    t
                }
                None => return,
            },
        };
        let now = monotonic_ns();
        let first = deadline.saturating_sub(now).max(1000);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 2_000_000,
            },
            it_value: libc::timespec {
                tv_sec: (first / 1_000_000_000) as libc::time_t,
                tv_nsec: (first % 1_000_000_000) as libc::c_long,
            },
        };
        TIMER_FIRED.store(false, Ordering::SeqCst);
        // SAFETY: a timer we created, a valid itimerspec.
        unsafe { libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) };
        self.armed = Some(deadline);
    }

    fn disarm(&mut self) {
        if let (Some(t), Some(_)) = (self.timer, self.armed) {
            // SAFETY: zeroed itimerspec disarms our timer.
            let spec: libc::itimerspec = unsafe { std::mem::zeroed() };
            unsafe { libc::timer_settime(t, 0, &spec, std::ptr::null_mut()) };
        }
        self.armed = None;
    }

    /// Turns a waitpid status into an event; `None` when it concerned no one we care about.
    fn event(&mut self, tid: u32, st: i32) -> Option<DebugEvent> {
        if libc::WIFEXITED(st) || libc::WIFSIGNALED(st) {
            let status = if libc::WIFEXITED(st) {
                ExitStatus::Code(libc::WEXITSTATUS(st))
            } else {
                ExitStatus::Signal(libc::WTERMSIG(st))
            };
            self.threads.remove(&tid);
            self.starting.remove(&tid);
            if self.vforked.remove(&tid) {
                return None;
            }
            if tid == self.pid {
                self.exited = Some(status);
                return Some(DebugEvent::Exited(status));
            }
            return Some(DebugEvent::ThreadExited { tid });
        }
        if !libc::WIFSTOPPED(st) {
            return None;
        }
        let sig = libc::WSTOPSIG(st);
        let event = (st >> 16) & 0xff;
        if !self.threads.contains(&tid) {
            // a new thread reporting before its parent's clone event
            self.threads.insert(tid);
            return Some(DebugEvent::Stopped {
                tid,
                stop: Stop::Quiet,
            });
        }
        let stop = match event {
            libc::PTRACE_EVENT_CLONE => {
                let mut msg: libc::c_ulong = 0;
                ptrace(
                    libc::PTRACE_GETEVENTMSG,
                    tid,
                    0,
                    &mut msg as *mut _ as usize,
                );
                let child = msg as u32;
                if !self.threads.contains(&child) {
                    self.threads.insert(child);
                    self.starting.insert(child);
                }
                Stop::Quiet
            }
            libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK => {
                let mut msg: libc::c_ulong = 0;
                ptrace(
                    libc::PTRACE_GETEVENTMSG,
                    tid,
                    0,
                    &mut msg as *mut _ as usize,
                );
                let child = msg as u32;
                let vfork = event == libc::PTRACE_EVENT_VFORK;
                if vfork {
                    // shares our memory and breakpoints until it execs: step it over them
                    self.threads.insert(child);
                    self.starting.insert(child);
                    self.vforked.insert(child);
                }
                Stop::Fork { child, vfork }
            }
            libc::PTRACE_EVENT_EXEC => {
                self.syscall_insn = None;
                if self.vforked.remove(&tid) {
                    self.threads.remove(&tid);
                    ptrace(libc::PTRACE_DETACH, tid, 0, 0);
                    return None;
                }
                Stop::Exec
            }
            libc::PTRACE_EVENT_STOP => {
                self.starting.remove(&tid);
                Stop::Quiet
            }
            _ if sig == libc::SIGTRAP => Stop::Trap,
            _ if sig == libc::SIGSTOP && self.starting.remove(&tid) => Stop::Quiet,
            _ => Stop::Signal(sig),
        };
        Some(DebugEvent::Stopped { tid, stop })
    }
}

/// `process_vm_readv`/`process_vm_writev` of one range: true when every byte moved. Cheaper
/// than `/proc/PID/mem`, but it honours page protections.
fn vm_rw(pid: u32, addr: u64, buf: *mut u8, len: usize, write: bool) -> bool {
    let local = libc::iovec {
        iov_base: buf as *mut libc::c_void,
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: `local` covers a buffer of `len` bytes owned by the caller (only read when
    // writing); the kernel checks the remote range.
    let n = unsafe {
        if write {
            libc::process_vm_writev(pid as libc::pid_t, &local, 1, &remote, 1, 0)
        } else {
            libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0)
        }
    };
    n == len as isize
}

/// The mappings of `/proc/PID/maps` text: (start, end, executable), in address order.
fn mappings(maps: &str) -> Vec<(u64, u64, bool)> {
    let mut v: Vec<(u64, u64, bool)> = maps
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (a, b) = f.next()?.split_once('-')?;
            let perms = f.next()?;
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
                perms.as_bytes().get(2) == Some(&b'x'),
            ))
        })
        .collect();
    v.sort_unstable();
    v
}

/// A page-aligned free range of `len` bytes in the address space `maps` describes, as near
/// `near` as there is one (within 1 GiB, so that RIP-relative operands of code near `near`
/// stay in reach), above the first 16 MiB and below the user half's top.
pub fn free_range_near(maps: &str, near: u64, len: u64) -> Option<u64> {
    const PAGE: u64 = 4096;
    const REACH: u64 = 1 << 30;
    const LOW: u64 = 16 << 20;
    const TOP: u64 = 0x7fff_ffff_0000;
    let len = len.div_ceil(PAGE) * PAGE;
    let m = mappings(maps);
    let mut best: Option<(u64, u64)> = None;
    let mut prev_end = LOW;
    for (start, end) in m
        .iter()
        .map(|&(s, e, _)| (s, e))
        .chain(std::iter::once((TOP, TOP)))
    {
        // one guard page either side of the gap
        let lo = prev_end.saturating_add(PAGE);
        let hi = start.saturating_sub(PAGE);
        if hi > lo && hi - lo >= len {
            let at = if near < lo {
                lo
            } else if near + len > hi {
                hi - len
            } else {
                near & !(PAGE - 1)
            };
            let d = at.abs_diff(near);
            if d < REACH && best.is_none_or(|(_, bd)| d < bd) {
                best = Some((at, d));
            }
        }
        prev_end = prev_end.max(end);
    }
    best.map(|(at, _)| at)
}

fn make_timer() -> Option<libc::timer_t> {
    // SAFETY: installing a handler that only stores to an atomic; no SA_RESTART so that
    // waitpid returns EINTR.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_timer as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = 0;
        libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut());
        let mut sev: libc::sigevent = std::mem::zeroed();
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = libc::SIGALRM;
        sev.sigev_notify_thread_id = libc::gettid();
        let mut t: libc::timer_t = std::mem::zeroed();
        if libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut t) != 0 {
            return None;
        }
        Some(t)
    }
}

impl Drop for LinuxTarget {
    fn drop(&mut self) {
        if let Some(t) = self.timer.take() {
            // SAFETY: deleting our own timer once.
            unsafe { libc::timer_delete(t) };
        }
    }
}

impl TargetProcess for LinuxTarget {
    fn pid(&self) -> u32 {
        self.pid
    }

    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> bool {
        if addr >= 1 << 63 {
            return false;
        }
        if vm_rw(self.pid, addr, buf.as_mut_ptr(), buf.len(), false) {
            return true;
        }
        matches!(self.mem.read_at(buf, addr), Ok(n) if n == buf.len())
    }

    fn write_memory(&self, addr: u64, data: &[u8]) -> bool {
        if addr >= 1 << 63 {
            return false;
        }
        // writable data (the stack) directly; code pages through /proc/PID/mem
        if vm_rw(self.pid, addr, data.as_ptr() as *mut u8, data.len(), true) {
            return true;
        }
        matches!(self.mem.write_at(data, addr), Ok(n) if n == data.len())
    }

    fn write_code(&self, addr: u64, data: &[u8]) -> bool {
        addr < 1 << 63 && matches!(self.mem.write_at(data, addr), Ok(n) if n == data.len())
    }

    fn regs(&self, tid: u32) -> Option<Regs> {
        // SAFETY: user_regs_struct is plain data filled by the kernel.
        let mut u: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        if ptrace(libc::PTRACE_GETREGS, tid, 0, &mut u as *mut _ as usize) != 0 {
            return None;
        }
        self.last_regs.set(Some((tid, u)));
        Some(Regs {
            gpr: [
                u.rax, u.rcx, u.rdx, u.rbx, u.rsp, u.rbp, u.rsi, u.rdi, u.r8, u.r9, u.r10, u.r11,
                u.r12, u.r13, u.r14, u.r15,
            ],
            rip: u.rip,
            rflags: u.eflags,
            cs: u.cs,
            ss: u.ss,
            ds: u.ds,
            es: u.es,
            fs: u.fs,
            gs: u.gs,
            fs_base: u.fs_base,
            gs_base: u.gs_base,
        })
    }

    fn set_regs(&self, tid: u32, r: &Regs) -> bool {
        let mut u = match self.last_regs.get() {
            Some((t, u)) if t == tid => u,
            _ => {
                // SAFETY: as in regs().
                let mut u: libc::user_regs_struct = unsafe { std::mem::zeroed() };
                if ptrace(libc::PTRACE_GETREGS, tid, 0, &mut u as *mut _ as usize) != 0 {
                    return false;
                }
                u
            }
        };
        let g = &r.gpr;
        u.rax = g[0];
        u.rcx = g[1];
        u.rdx = g[2];
        u.rbx = g[3];
        u.rsp = g[4];
        u.rbp = g[5];
        u.rsi = g[6];
        u.rdi = g[7];
        u.r8 = g[8];
        u.r9 = g[9];
        u.r10 = g[10];
        u.r11 = g[11];
        u.r12 = g[12];
        u.r13 = g[13];
        u.r14 = g[14];
        u.r15 = g[15];
        u.rip = r.rip;
        u.eflags = r.rflags;
        let ok = ptrace(libc::PTRACE_SETREGS, tid, 0, &u as *const _ as usize) == 0;
        self.last_regs.set(ok.then_some((tid, u)));
        ok
    }

    fn resume(&mut self, tid: u32, signal: i32) {
        self.last_regs.set(None);
        ptrace(libc::PTRACE_CONT, tid, 0, signal as usize);
    }

    fn step(&mut self, tid: u32) {
        self.last_regs.set(None);
        ptrace(libc::PTRACE_SINGLESTEP, tid, 0, 0);
    }

    fn resume_all(&mut self) {
        self.last_regs.set(None);
        for tid in std::mem::take(&mut self.held) {
            ptrace(libc::PTRACE_CONT, tid, 0, 0);
        }
    }

    fn wait(&mut self, deadline: Option<u64>) -> DebugEvent {
        if let Some(st) = self.exited {
            return DebugEvent::Exited(st);
        }
        self.arm(deadline);
        loop {
            if let Some(d) = deadline {
                if TIMER_FIRED.load(Ordering::Relaxed) && monotonic_ns() >= d {
                    self.disarm();
                    return DebugEvent::Timeout;
                }
            }
            match waitpid(-1, 0) {
                Ok((tid, st)) => {
                    if let Some(ev) = self.event(tid, st) {
                        return ev;
                    }
                }
                Err(libc::EINTR) => {}
                Err(_) => {
                    // no children left
                    self.disarm();
                    let st = self.exited.unwrap_or(ExitStatus::Code(0));
                    self.exited = Some(st);
                    return DebugEvent::Exited(st);
                }
            }
        }
    }

    fn wait_thread(&mut self, tid: u32) -> DebugEvent {
        loop {
            match waitpid(tid as i32, 0) {
                Ok((t, st)) => {
                    if let Some(ev) = self.event(t, st) {
                        return ev;
                    }
                }
                Err(libc::EINTR) => {}
                Err(_) => return DebugEvent::ThreadExited { tid },
            }
        }
    }

    fn release_child(&mut self, child: u32, restore: &[(u64, u8)]) {
        // its first stop
        loop {
            match waitpid(child as i32, 0) {
                Ok((_, st)) if libc::WIFSTOPPED(st) => break,
                Ok(_) => return,
                Err(libc::EINTR) => continue,
                Err(_) => return,
            }
        }
        if let Ok(mem) = std::fs::OpenOptions::new()
            .write(true)
            .open(format!("/proc/{child}/mem"))
        {
            for (addr, b) in restore {
                let _ = mem.write_at(&[*b], *addr);
            }
        }
        ptrace(libc::PTRACE_DETACH, child, 0, 0);
    }

    fn terminate(&mut self) {
        self.disarm();
        if self.exited.is_some() {
            return;
        }
        // SAFETY: killing the process dtx started; the tracer reaps it below.
        unsafe { libc::kill(self.pid as i32, libc::SIGKILL) };
        while let Ok((tid, st)) = waitpid(self.pid as i32, 0) {
            if tid == self.pid && (libc::WIFEXITED(st) || libc::WIFSIGNALED(st)) {
                break;
            }
        }
        self.held.clear();
        self.threads.clear();
    }

    fn detach(&mut self, restore: &[(u64, u8)]) {
        self.disarm();
        if self.exited.is_some() {
            return;
        }
        for (addr, b) in restore {
            self.write_memory(*addr, &[*b]);
        }
        let was_bp: HashSet<u64> = restore.iter().map(|(a, _)| *a).collect();
        let mut running: HashSet<u32> = self.threads.clone();
        for t in std::mem::take(&mut self.held) {
            running.remove(&t);
            ptrace(libc::PTRACE_DETACH, t, 0, 0);
        }
        for &tid in &running {
            // SAFETY: signalling a thread of the target.
            unsafe { libc::syscall(libc::SYS_tgkill, self.pid as i32, tid as i32, libc::SIGSTOP) };
        }
        while !running.is_empty() {
            let Ok((tid, st)) = waitpid(-1, 0) else { break };
            if !running.contains(&tid) {
                continue;
            }
            if !libc::WIFSTOPPED(st) {
                running.remove(&tid);
                continue;
            }
            let sig = libc::WSTOPSIG(st);
            let event = (st >> 16) & 0xff;
            if sig == libc::SIGSTOP || event == libc::PTRACE_EVENT_STOP {
                running.remove(&tid);
                ptrace(libc::PTRACE_DETACH, tid, 0, 0);
                continue;
            }
            if sig == libc::SIGTRAP && event == 0 {
                // stopped just after one of our breakpoints: run the original instruction
                if let Some(mut r) = self.regs(tid) {
                    if was_bp.contains(&r.rip.wrapping_sub(1)) {
                        r.rip -= 1;
                        self.set_regs(tid, &r);
                    }
                }
                ptrace(libc::PTRACE_CONT, tid, 0, 0);
                continue;
            }
            let deliver = if event == 0 { sig } else { 0 };
            ptrace(libc::PTRACE_CONT, tid, 0, deliver as usize);
        }
        self.threads.clear();
    }

    fn maps(&self) -> Option<(String, String)> {
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", self.pid)).ok()?;
        let exe = std::fs::read_link(format!("/proc/{}/exe", self.pid))
            .ok()?
            .to_string_lossy()
            .trim_end_matches(" (deleted)")
            .to_string();
        Some((maps, exe))
    }

    fn map_code(&mut self, tid: u32, near: u64, len: u64) -> Option<u64> {
        let (maps, _) = self.maps()?;
        let syscall_at = match self.syscall_insn {
            Some(a) => a,
            None => {
                let a = self.find_syscall_insn(&maps)?;
                self.syscall_insn = Some(a);
                a
            }
        };
        let at = free_range_near(&maps, near, len).unwrap_or(0);
        // SAFETY: user_regs_struct is plain data filled by the kernel.
        let mut saved: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        if ptrace(libc::PTRACE_GETREGS, tid, 0, &mut saved as *mut _ as usize) != 0 {
            return None;
        }
        self.last_regs.set(None);
        let mut r = saved;
        r.rax = libc::SYS_mmap as u64;
        r.orig_rax = u64::MAX;
        r.rdi = at;
        r.rsi = len;
        r.rdx = (libc::PROT_READ | libc::PROT_EXEC) as u64;
        r.r10 = (libc::MAP_PRIVATE
            | libc::MAP_ANONYMOUS
            | if at != 0 {
                libc::MAP_FIXED_NOREPLACE
            } else {
                0
            }) as u64;
        r.r8 = u64::MAX;
        r.r9 = 0;
        r.rip = syscall_at;
        let mut result = None;
        if ptrace(libc::PTRACE_SETREGS, tid, 0, &r as *const _ as usize) == 0 {
            let mut pending = 0;
            loop {
                ptrace(libc::PTRACE_SINGLESTEP, tid, 0, 0);
                match waitpid(tid as i32, 0) {
                    Ok((_, st)) if libc::WIFSTOPPED(st) => {
                        let sig = libc::WSTOPSIG(st);
                        if sig == libc::SIGTRAP && (st >> 16) == 0 {
                            break;
                        }
                        if (st >> 16) == 0 {
                            pending = sig;
                        }
                    }
                    Ok((_, st)) => {
                        // the thread died meanwhile
                        let _ = self.event(tid, st);
                        return None;
                    }
                    Err(libc::EINTR) => {}
                    Err(_) => return None,
                }
            }
            // SAFETY: as above.
            let mut after: libc::user_regs_struct = unsafe { std::mem::zeroed() };
            if ptrace(libc::PTRACE_GETREGS, tid, 0, &mut after as *mut _ as usize) == 0
                && after.rip == syscall_at + 2
                && (after.rax as i64) > 0
            {
                result = Some(after.rax);
            }
            if pending != 0 {
                // a signal that came during the call: delivered again once the thread runs
                // SAFETY: signalling a thread of the target.
                unsafe { libc::syscall(libc::SYS_tgkill, self.pid as i32, tid as i32, pending) };
            }
        }
        ptrace(libc::PTRACE_SETREGS, tid, 0, &saved as *const _ as usize);
        result
    }

    fn held_thread(&self) -> Option<u32> {
        if self.held.contains(&self.pid) {
            return Some(self.pid);
        }
        self.held.first().copied()
    }

    fn call_function(&mut self, tid: u32, func: u64, data: &[u8], args: &[u64]) -> Option<u64> {
        // SAFETY: user_regs_struct is plain data filled by the kernel.
        let mut saved: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        if ptrace(libc::PTRACE_GETREGS, tid, 0, &mut saved as *mut _ as usize) != 0 {
            return None;
        }
        self.last_regs.set(None);
        // below the red zone: the data, then a return address of 0, whose fault ends the call
        let data_at = (saved.rsp - 256 - data.len() as u64) & !15;
        let sp = data_at - 8;
        if !self.write_memory(data_at, data) || !self.write_memory(sp, &0u64.to_le_bytes()) {
            return None;
        }
        let mut r = saved;
        let mut regs = [data_at, 0, 0, 0, 0, 0];
        for (slot, a) in regs[1..].iter_mut().zip(args) {
            *slot = *a;
        }
        r.rdi = regs[0];
        r.rsi = regs[1];
        r.rdx = regs[2];
        r.rcx = regs[3];
        r.r8 = regs[4];
        r.r9 = regs[5];
        r.rax = 0;
        // not a system call to restart
        r.orig_rax = u64::MAX;
        r.rsp = sp;
        r.rip = func;
        if ptrace(libc::PTRACE_SETREGS, tid, 0, &r as *const _ as usize) != 0 {
            return None;
        }
        let mut pending = Vec::new();
        let mut result = None;
        let mut deliver = 0;
        loop {
            ptrace(libc::PTRACE_CONT, tid, 0, deliver);
            deliver = 0;
            match waitpid(tid as i32, 0) {
                Ok((_, st)) if libc::WIFSTOPPED(st) => {
                    let sig = libc::WSTOPSIG(st);
                    if (st >> 16) != 0 {
                        // a ptrace event (a thread the call made): go on
                        continue;
                    }
                    if sig == libc::SIGSEGV {
                        // SAFETY: as above.
                        let mut after: libc::user_regs_struct = unsafe { std::mem::zeroed() };
                        if ptrace(libc::PTRACE_GETREGS, tid, 0, &mut after as *mut _ as usize) == 0
                            && after.rip == 0
                            && after.rsp == sp + 8
                        {
                            result = Some(after.rax);
                        }
                        // a fault elsewhere: the call failed; the thread is put back
                        break;
                    }
                    if matches!(
                        sig,
                        libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGABRT
                    ) {
                        break;
                    }
                    if sig == libc::SIGSTOP || sig == libc::SIGTRAP {
                        continue;
                    }
                    // for the program: delivered once the thread is back
                    pending.push(sig);
                }
                Ok((_, st)) => {
                    let _ = self.event(tid, st);
                    return None;
                }
                Err(libc::EINTR) => {}
                Err(_) => return None,
            }
        }
        ptrace(libc::PTRACE_SETREGS, tid, 0, &saved as *const _ as usize);
        for sig in pending {
            // SAFETY: signalling a thread of the target.
            unsafe { libc::syscall(libc::SYS_tgkill, self.pid as i32, tid as i32, sig) };
        }
        result
    }

    fn identity(&self) -> (Vec<u8>, u64) {
        let comm = std::fs::read(format!("/proc/{}/comm", self.pid))
            .map(|mut c| {
                while c.last() == Some(&b'\n') {
                    c.pop();
                }
                c
            })
            .unwrap_or_default();
        let ppid = std::fs::read_to_string(format!("/proc/{}/stat", self.pid))
            .ok()
            .and_then(|s| {
                let rest = &s[s.rfind(')')? + 2..];
                rest.split_whitespace().nth(1)?.parse().ok()
            })
            .unwrap_or(0);
        (comm, ppid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_range_near_code() {
        let maps = "\
555555554000-555555556000 r-xp 00000000 08:01 1 /prog
555555556000-555555558000 rw-p 00002000 08:01 1 /prog
7ffff7dd0000-7ffff7ff0000 r-xp 00000000 08:01 2 /lib/ld.so
";
        // just past the program, a guard page away
        let at = free_range_near(maps, 0x555555555000, 0x10000).unwrap();
        assert_eq!(at, 0x555555559000);
        // near the library: below it
        let at = free_range_near(maps, 0x7ffff7de0000, 0x10000).unwrap();
        assert_eq!(at, 0x7ffff7dd0000 - 0x1000 - 0x10000);
        // nothing within reach of an address far from every gap's edge is refused
        let full = "0-7fffffff0000 rw-p 00000000 00:00 0\n";
        assert_eq!(free_range_near(full, 0x4000_0000, 0x1000), None);
    }

    #[test]
    fn mappings_in_address_order() {
        let m = mappings("2000-3000 r-xp 0 0:0 0 /a\n1000-2000 rw-p 0 0:0 0 /b\n");
        assert_eq!(m, [(0x1000, 0x2000, false), (0x2000, 0x3000, true)]);
    }
}
