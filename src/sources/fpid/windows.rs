//! The Windows side of fpid: the agent DLL injected into the target and told what to hook
//! ([`super::inject`]), the process's end seen through its handle, QueryPerformanceCounter as
//! the clock, the x64 argument registers (rcx rdx r8 r9).
//!
//! Under `-c` the debugger loop holds the new process at its `main`: its threads are suspended
//! (SuspendThread), the debugger lets go of it (`DebugActiveProcessStop`), the agent goes in and
//! hooks, and the threads resume, so that no call is missed. Under `-p` the debugger lets go and
//! the agent goes into the running process (MinHook holds its threads while it patches).

use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, WAIT_OBJECT_0};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Thread32First, Thread32Next, TH32CS_SNAPTHREAD, THREADENTRY32,
};
use windows_sys::Win32::System::Performance::{QueryPerformanceCounter, QueryPerformanceFrequency};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, OpenProcess, OpenThread, ResumeThread, SuspendThread, TerminateProcess,
    WaitForSingleObject, PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SYNCHRONIZE, PROCESS_TERMINATE,
    THREAD_SUSPEND_RESUME,
};

use super::inject::install;
use super::sites::sites;
use super::source::FpidSource;
use crate::providers::pid::PidProvider;
use crate::sources::debugger::{PidSource, Regs, R8, R9, RAX, RCX, RDX};
use crate::sources::sink::{EventSource, Sink};

/// The clock the agent stamps records with: QueryPerformanceCounter, in ns (the agent converts
/// the same way).
pub fn clock_ns() -> u64 {
    let (mut c, mut f) = (0i64, 0i64);
    // SAFETY: two valid out-parameters.
    unsafe {
        QueryPerformanceCounter(&mut c);
        QueryPerformanceFrequency(&mut f);
    }
    let (c, f) = (c as u64, (f as u64).max(1));
    (c / f) * 1_000_000_000 + (c % f) * 1_000_000_000 / f
}

pub use crate::sources::debugger::walk_win64_stack_in as walk_stack;

/// Puts a record's registers where the Windows x64 convention has them: at entry the first
/// four arguments (rcx rdx r8 r9), at return rax.
pub fn set_arg_regs(regs: &mut Regs, ret: bool, args: &[u64; 10]) {
    let g = &mut regs.gpr;
    if ret {
        g[RAX] = args[0];
    } else {
        g[RCX] = args[0];
        g[RDX] = args[1];
        g[R8] = args[2];
        g[R9] = args[3];
    }
}

/// Watches a traced process that runs free (no debugger holds it) for its end, through a
/// handle opened while it was still held.
pub struct ExitWatch {
    handle: HANDLE,
    /// dtx started the process: its exit code is reported.
    child: bool,
}

// SAFETY: a process handle may be used from any thread.
unsafe impl Send for ExitWatch {}

impl ExitWatch {
    /// Opens process `pid` for waiting (a watch that never sees an end when it cannot).
    pub fn new(pid: u32, child: bool) -> ExitWatch {
        // a process dtx started may have to be ended with dtx (end_child)
        let access = PROCESS_SYNCHRONIZE
            | PROCESS_QUERY_LIMITED_INFORMATION
            | if child { PROCESS_TERMINATE } else { 0 };
        // SAFETY: plain call; a null handle is handled below.
        let handle = unsafe { OpenProcess(access, 0, pid) };
        ExitWatch { handle, child }
    }

    /// Ends the process when dtx started it and it still runs, as dtrace ends a `-c` command
    /// it created when it exits first.
    pub fn end_child(&self) {
        if self.child && !self.handle.is_null() && self.ended().is_none() {
            // SAFETY: our handle, opened with PROCESS_TERMINATE for a child
            unsafe { TerminateProcess(self.handle, 1) };
        }
    }

    /// How the process ended (dtrace's words, and its exit code when dtx started it), once it
    /// has.
    pub fn ended(&self) -> Option<(String, Option<i32>)> {
        if self.handle.is_null() {
            return None;
        }
        // SAFETY: our handle; no wait.
        if unsafe { WaitForSingleObject(self.handle, 0) } != WAIT_OBJECT_0 {
            return None;
        }
        if !self.child {
            return Some(("has exited".to_string(), None));
        }
        let mut code = 0u32;
        // SAFETY: our handle, a valid out-parameter.
        unsafe { GetExitCodeProcess(self.handle, &mut code) };
        let code = code as i32;
        if code == 0 {
            Some(("has exited".to_string(), Some(0)))
        } else {
            Some((format!("exited with status {code}"), Some(code)))
        }
    }
}

impl Drop for ExitWatch {
    fn drop(&mut self) {
        if !self.handle.is_null() {
            // SAFETY: our handle, closed once.
            unsafe { CloseHandle(self.handle) };
        }
    }
}

/// The threads of a process, suspended while this lives.
struct Frozen(Vec<HANDLE>);

impl Frozen {
    /// Suspends every thread of `pid` (a thread that cannot be opened runs on).
    fn threads_of(pid: u32) -> Frozen {
        let mut held = Vec::new();
        // SAFETY: a snapshot of the system's threads, walked with a sized THREADENTRY32 and
        // closed; each thread opened is suspended and kept for the resume.
        unsafe {
            let snap = CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0);
            if snap.is_null() || snap as isize == -1 {
                return Frozen(held);
            }
            let mut e: THREADENTRY32 = std::mem::zeroed();
            e.dwSize = std::mem::size_of::<THREADENTRY32>() as u32;
            let mut ok = Thread32First(snap, &mut e) != 0;
            while ok {
                if e.th32OwnerProcessID == pid {
                    let t = OpenThread(THREAD_SUSPEND_RESUME, 0, e.th32ThreadID);
                    if !t.is_null() {
                        if SuspendThread(t) != u32::MAX {
                            held.push(t);
                        } else {
                            CloseHandle(t);
                        }
                    }
                }
                ok = Thread32Next(snap, &mut e) != 0;
            }
            CloseHandle(snap);
        }
        Frozen(held)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        for t in self.0.drain(..) {
            // SAFETY: a thread this suspended, resumed once and closed.
            unsafe {
                ResumeThread(t);
                CloseHandle(t);
            }
        }
    }
}

/// The Windows part of [`super::split`], for a process with `fpid` probes: takes the run's
/// debugger source over: the debugger lets the target go and the agent hooks its functions;
/// the fpid source then watches it alone. A run with both `pid` and `fpid` probes in one
/// process is refused (the debugger would have to answer the events of the injection: not
/// done yet on Windows).
pub fn split(
    mut src: PidSource,
    provider: &PidProvider,
    sink: &dyn Sink,
    ring_options: super::RingOptions,
) -> Result<(Option<PidSource>, Option<FpidSource>), String> {
    let pid = src.pid();
    if src.has_pid_probes() {
        if src.created {
            src.target_mut().terminate();
        } else {
            src.stop();
        }
        return Err(format!(
            "fpid: pid {pid} has pid probes too: pid and fpid in one process are not supported \
             on Windows yet (trace it with one of them)"
        ));
    }
    let fpid = provider.fpid();
    let sites = sites(&fpid, sink, pid);
    let modules = fpid.modules_of(pid);
    let mut plan = src.into_plan(sink);
    let created = plan.created;
    // a started target is held at main until its hooks are in; an attached one runs on
    let frozen = created.then(|| Frozen::threads_of(pid));
    let watch = ExitWatch::new(pid, created);
    plan.target.detach(&[]);
    let installed = install(
        pid,
        &fpid,
        sites,
        plan.want_ustack,
        plan.args_used,
        ring_options,
    );
    let (ring, hooks) = match installed {
        Ok(v) => v,
        Err(e) => {
            if created {
                crate::sources::debugger::windows::kill(pid);
            }
            drop(frozen);
            return Err(e);
        }
    };
    drop(frozen);
    let s = FpidSource::from_plan(pid, watch, ring, hooks, modules, plan);
    Ok((None, Some(s)))
}
