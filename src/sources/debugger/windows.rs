//! The Windows debugger: the Win32 debug API. A started target (`-c`) is created with
//! `DEBUG_ONLY_THIS_PROCESS` and run to its `main` (or entry point) before probes are created;
//! an attached one (`-p`) is grabbed with `DebugActiveProcess` and held at the loader's
//! break-in. Events come from `WaitForDebugEvent` and each is answered by one
//! `ContinueDebugEvent`: while an event is outstanding every thread of the target is stopped,
//! so clauses run with the target frozen. Modules are tracked from CREATE_PROCESS / LOAD_DLL /
//! UNLOAD_DLL events and published to the pid provider through [`ModuleReader`] as maps-style
//! lines. A single step (trap flag) suspends the other threads so no other event can come
//! between. Detaching puts back every original byte, answers what is still queued and calls
//! `DebugActiveProcessStop`, so the target lives on.
//!
//! Tested under Wine (`scripts/pid-windows-check.sh`), where this part of the API works.

use std::collections::HashMap;
use std::sync::Mutex;

use windows_sys::Win32::Foundation::{
    CloseHandle, GetLastError, DBG_CONTINUE, DBG_EXCEPTION_NOT_HANDLED, EXCEPTION_BREAKPOINT,
    EXCEPTION_SINGLE_STEP, HANDLE, STATUS_WX86_BREAKPOINT,
};
use windows_sys::Win32::Storage::FileSystem::GetFinalPathNameByHandleW;
use windows_sys::Win32::System::Diagnostics::Debug::{
    ContinueDebugEvent, DebugActiveProcess, DebugActiveProcessStop, DebugSetProcessKillOnExit,
    FlushInstructionCache, GetThreadContext, ReadProcessMemory, SetThreadContext,
    WaitForDebugEvent, WriteProcessMemory, CONTEXT, CONTEXT_FULL_AMD64, CREATE_PROCESS_DEBUG_EVENT,
    CREATE_THREAD_DEBUG_EVENT, DEBUG_EVENT, EXCEPTION_DEBUG_EVENT, EXIT_PROCESS_DEBUG_EVENT,
    EXIT_THREAD_DEBUG_EVENT, LOAD_DLL_DEBUG_EVENT, UNLOAD_DLL_DEBUG_EVENT,
};
use windows_sys::Win32::System::ProcessStatus::{
    K32EnumProcessModulesEx, K32GetModuleFileNameExW, K32GetModuleInformation, LIST_MODULES_ALL,
    MODULEINFO,
};
use windows_sys::Win32::System::Threading::{
    CreateProcessW, OpenProcess, ResumeThread, SuspendThread, TerminateProcess,
    CREATE_UNICODE_ENVIRONMENT, DEBUG_ONLY_THIS_PROCESS, INFINITE, PROCESS_INFORMATION,
    PROCESS_QUERY_INFORMATION, PROCESS_TERMINATE, PROCESS_VM_READ, STARTUPINFOW,
};

use super::{DebugEvent, ExitStatus, Regs, Stop, TargetProcess};
use crate::providers::pid::ProcessReader;

/// The monotonic clock in ns (from an arbitrary start).
pub fn monotonic_ns() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
}

/// The trap flag of RFLAGS.
const TRAP_FLAG: u32 = 0x100;
const ERROR_SEM_TIMEOUT: u32 = 121;

/// Module lists of the processes under a debugger of this dtx, as `/proc/PID/maps`-style text
/// and the main executable's path: what the pid provider reads (see [`ModuleReader`]).
static MODULES: Mutex<Option<HashMap<u32, (String, String)>>> = Mutex::new(None);

/// The pid provider's module reader on Windows: the module list a debugger loop of this
/// process keeps from its debug events, else the loader's list read with psapi.
pub struct ModuleReader;

impl ProcessReader for ModuleReader {
    fn maps(&self, pid: u32) -> Result<(String, String), String> {
        if let Some(m) = MODULES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|m| m.get(&pid).cloned())
        {
            return Ok(m);
        }
        psapi_modules(pid)
    }

    /// The code of managed methods, read with ReadProcessMemory (a handle opened per read:
    /// methods are read once, as the runtime reports them).
    fn read_memory(&self, pid: u32, addr: u64, buf: &mut [u8]) -> bool {
        if buf.is_empty() {
            return true;
        }
        // SAFETY: plain Win32 calls; `buf` is valid for `buf.len()` bytes and the handle is
        // closed below
        unsafe {
            let h = OpenProcess(PROCESS_VM_READ, 0, pid);
            if h.is_null() {
                return false;
            }
            let mut got = 0usize;
            let ok = ReadProcessMemory(
                h,
                addr as usize as *const std::ffi::c_void,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut got,
            );
            CloseHandle(h);
            ok != 0 && got == buf.len()
        }
    }

    /// Managed code comes from the CLR's ETW method events (`etw_live::clr`).
    fn clr_events(&self) -> bool {
        true
    }

    /// The rundown [`rundown_before_attach`] ran for a process this dtx then grabbed, else one
    /// run now for a process no debugger loop of this dtx holds (a held one cannot answer:
    /// the rundown runs on its threads).
    fn clr_rundown(
        &self,
        pid: u32,
    ) -> Option<Result<Vec<crate::symbols::managed::ManagedMethod>, String>> {
        if let Some(r) = lock(&RUNDOWNS).as_mut().and_then(|m| m.remove(&pid)) {
            return Some(r);
        }
        let held = lock(&MODULES)
            .as_ref()
            .is_some_and(|m| m.contains_key(&pid));
        if held {
            return None;
        }
        Some(crate::sources::etw_live::windows::clr_rundown(pid))
    }
}

/// The rundowns run before grabbing a process (see [`rundown_before_attach`]), until the pid
/// provider reads the process.
static RUNDOWNS: Mutex<Option<RundownResults>> = Mutex::new(None);

type RundownResults = HashMap<u32, Result<Vec<crate::symbols::managed::ManagedMethod>, String>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs the CLR rundown of process `pid` (when a .NET runtime is mapped in it) before `-p`
/// grabs it: once the debugger holds it, the runtime cannot answer. What it gives (or why it
/// failed) waits for the pid provider's first read of the process, so that a glob over
/// methods matches what has code now and `dtx -l -p` lists it. The rundown runs in the method
/// session the debugger loop then follows the runtime with, which is returned, to be handed to
/// [`WindowsTarget::attach`]: the loop starts no session of its own, whose start rundown
/// would run again on the held process, through the EtwEventWrite breakpoints (issue 42,
/// finding 9). `None` when no runtime is mapped or the session cannot start (then said as the
/// rundown's failure).
pub fn rundown_before_attach(pid: u32) -> Option<super::ClrFeed> {
    let Ok((maps, _)) = psapi_modules(pid) else {
        return None;
    };
    if !crate::providers::pid::runtime_mapped(&maps) {
        return None;
    }
    let (r, feed) = match crate::sources::etw_live::windows::clr_rundown_kept(pid) {
        Ok((r, session, context)) => (r, Some(super::ClrFeed::running(session, context))),
        Err(e) => (Err(e), None),
    };
    lock(&RUNDOWNS)
        .get_or_insert_with(HashMap::new)
        .insert(pid, r);
    feed
}

/// The modules of a process we do not debug, from its loader's list.
fn psapi_modules(pid: u32) -> Result<(String, String), String> {
    // SAFETY: plain Win32 calls with valid buffers; the handle is closed below.
    unsafe {
        let h = OpenProcess(PROCESS_QUERY_INFORMATION | PROCESS_VM_READ, 0, pid);
        if h.is_null() {
            return Err(error_text(GetLastError()));
        }
        let mut mods: Vec<windows_sys::Win32::Foundation::HMODULE> =
            vec![std::ptr::null_mut(); 1024];
        let mut needed = 0u32;
        let ok = K32EnumProcessModulesEx(
            h,
            mods.as_mut_ptr(),
            (mods.len() * std::mem::size_of::<usize>()) as u32,
            &mut needed,
            LIST_MODULES_ALL,
        );
        if ok == 0 {
            let e = GetLastError();
            CloseHandle(h);
            return Err(error_text(e));
        }
        let n = (needed as usize / std::mem::size_of::<usize>()).min(mods.len());
        let mut text = String::new();
        let mut exe = String::new();
        for (i, &m) in mods[..n].iter().enumerate() {
            let mut buf = [0u16; 1024];
            let len = K32GetModuleFileNameExW(h, m, buf.as_mut_ptr(), buf.len() as u32);
            let mut info: MODULEINFO = std::mem::zeroed();
            if len == 0
                || K32GetModuleInformation(
                    h,
                    m,
                    &mut info,
                    std::mem::size_of::<MODULEINFO>() as u32,
                ) == 0
            {
                continue;
            }
            let path = clean_path(&String::from_utf16_lossy(&buf[..len as usize]));
            let base = info.lpBaseOfDll as u64;
            text.push_str(&maps_line(base, base + info.SizeOfImage as u64, &path));
            if i == 0 {
                exe = path;
            }
        }
        CloseHandle(h);
        Ok((text, exe))
    }
}

fn error_text(code: u32) -> String {
    match code {
        87 => "No such process".into(),
        5 => "Permission denied".into(),
        2 => "No such file or directory".into(),
        3 => "No such file or directory".into(),
        _ => std::io::Error::from_raw_os_error(code as i32).to_string(),
    }
}

/// One maps-style line for a module image at `[start, end)`.
fn maps_line(start: u64, end: u64, path: &str) -> String {
    format!("{start:x}-{end:x} r-xp 00000000 00:00 0 {path}\n")
}

/// `\\?\C:\x` → `C:\x`.
fn clean_path(p: &str) -> String {
    p.strip_prefix(r"\\?\").unwrap_or(p).to_string()
}

fn wide(s: &str) -> Vec<u16> {
    s.encode_utf16().chain(std::iter::once(0)).collect()
}

/// One argument quoted for a Windows command line (the rules `CommandLineToArgvW` undoes).
fn quote_arg(a: &str, out: &mut String) {
    if !a.is_empty() && !a.contains([' ', '\t', '"', '\n']) {
        out.push_str(a);
        return;
    }
    out.push('"');
    let mut backslashes = 0;
    for c in a.chars() {
        match c {
            '\\' => backslashes += 1,
            '"' => {
                out.extend(std::iter::repeat_n('\\', backslashes * 2 + 1));
                out.push('"');
                backslashes = 0;
            }
            _ => {
                out.extend(std::iter::repeat_n('\\', backslashes));
                out.push(c);
                backslashes = 0;
            }
        }
    }
    out.extend(std::iter::repeat_n('\\', backslashes * 2));
    out.push('"');
}

/// A CONTEXT with the alignment GetThreadContext needs.
#[repr(C, align(16))]
struct AlignedContext(CONTEXT);

impl AlignedContext {
    fn new() -> Box<AlignedContext> {
        // SAFETY: CONTEXT is plain data; all-zero is a valid value.
        let mut c: Box<AlignedContext> = Box::new(unsafe { std::mem::zeroed() });
        c.0.ContextFlags = CONTEXT_FULL_AMD64;
        c
    }
}

#[derive(Clone, Debug)]
struct Module {
    base: u64,
    end: u64,
    path: String,
}

/// A process under the Win32 debugger.
pub struct WindowsTarget {
    pid: u32,
    process: HANDLE,
    threads: HashMap<u32, HANDLE>,
    /// The thread whose event waits for `ContinueDebugEvent`.
    pending: Option<u32>,
    /// The held stop (creation, attach) is answered by `resume_all`.
    held: bool,
    /// The loader's initial breakpoint was seen (it is the debugger's, not the program's).
    loader_break: bool,
    /// A single step of this thread is under way.
    stepping: Option<u32>,
    suspended: Vec<HANDLE>,
    /// Address of the last breakpoint exception, by thread (its context's rip may be before
    /// or after the int3; `regs` reports it after, as the loop expects).
    bp_addr: Option<(u32, u64)>,
    modules: Vec<Module>,
    exe: String,
    /// Report module changes as stops (once the run has started).
    report_modules: bool,
    exited: Option<ExitStatus>,
    detached: bool,
    created: bool,
    ctx: std::cell::RefCell<Box<AlignedContext>>,
    /// The CLR method session started before the grab ([`rundown_before_attach`]), until the
    /// loop takes it; stopped with the target otherwise.
    clr_feed: Option<super::ClrFeed>,
}

impl WindowsTarget {
    fn new(pid: u32, created: bool) -> WindowsTarget {
        WindowsTarget {
            pid,
            process: std::ptr::null_mut(),
            threads: HashMap::new(),
            pending: None,
            held: false,
            loader_break: false,
            stepping: None,
            suspended: Vec::new(),
            bp_addr: None,
            modules: Vec::new(),
            exe: String::new(),
            report_modules: false,
            exited: None,
            detached: false,
            created,
            ctx: std::cell::RefCell::new(AlignedContext::new()),
            clr_feed: None,
        }
    }

    /// Starts `argv` under the debugger and runs it to the loader's initial breakpoint (its
    /// modules are mapped; nothing of the program ran). Stopped there when this returns.
    pub fn spawn(argv: &[String]) -> Result<WindowsTarget, String> {
        let shown = argv.first().cloned().unwrap_or_default();
        if argv.is_empty() {
            return Err("failed to execute: empty command".into());
        }
        let mut line = String::new();
        for (i, a) in argv.iter().enumerate() {
            if i > 0 {
                line.push(' ');
            }
            quote_arg(a, &mut line);
        }
        let mut wline = wide(&line);
        // the target's environment: dtx's, with the normal heap asked for
        let env = {
            use std::os::windows::ffi::OsStrExt;
            super::environment_block(
                std::env::vars_os()
                    .map(|(k, v)| (k.encode_wide().collect(), v.encode_wide().collect()))
                    .collect(),
            )
        };
        // SAFETY: zeroed STARTUPINFOW/PROCESS_INFORMATION are valid inputs/outputs.
        let mut si: STARTUPINFOW = unsafe { std::mem::zeroed() };
        si.cb = std::mem::size_of::<STARTUPINFOW>() as u32;
        // SAFETY: as above, a zeroed PROCESS_INFORMATION is a valid output.
        let mut pi: PROCESS_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: a mutable NUL-terminated command line, a UTF-16 environment block ending in
        // two NULs, the inherited directory.
        let ok = unsafe {
            CreateProcessW(
                std::ptr::null(),
                wline.as_mut_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                0,
                DEBUG_ONLY_THIS_PROCESS | CREATE_UNICODE_ENVIRONMENT,
                env.as_ptr().cast(),
                std::ptr::null(),
                &si,
                &mut pi,
            )
        };
        if ok == 0 {
            // SAFETY: reading the calling thread's last error.
            let e = unsafe { GetLastError() };
            return Err(format!("failed to execute {shown}: {}", error_text(e)));
        }
        // a 32-bit program runs under WOW64, whose breakpoints, contexts and modules this
        // 64-bit debugger loop does not follow: refused before anything of it ran
        let wow = process_machine(pi.hProcess).and_then(|m| wow64_words(pi.dwProcessId, m));
        // SAFETY: our own handles from CreateProcessW; the debug events bring their own.
        unsafe {
            if wow.is_some() {
                TerminateProcess(pi.hProcess, 1);
            }
            CloseHandle(pi.hThread);
            CloseHandle(pi.hProcess);
        }
        if let Some(why) = wow {
            return Err(format!("failed to execute {shown}: {why}"));
        }
        let mut t = WindowsTarget::new(pi.dwProcessId, true);
        t.run_to_loader_break()
            .map_err(|e| format!("failed to execute {shown}: {e}"))?;
        Ok(t)
    }

    /// Attaches to `pid`; held at the loader's break-in when this returns. `clr_feed` is the
    /// CLR method session [`rundown_before_attach`] started, kept for the loop (stopped here
    /// when the grab fails).
    pub fn attach(pid: u32, clr_feed: Option<super::ClrFeed>) -> Result<WindowsTarget, String> {
        let grab_err = |e: String| format!("failed to grab pid {pid}: {e}");
        if pid == 0 || pid == std::process::id() {
            return Err(grab_err("Permission denied".into()));
        }
        if let Some(why) = wow64_refusal(pid) {
            return Err(grab_err(why));
        }
        // SAFETY: plain call; fails for a pid that is not there or not ours.
        if unsafe { DebugActiveProcess(pid) } == 0 {
            // SAFETY: last error of this thread.
            let e = unsafe { GetLastError() };
            return Err(grab_err(error_text(e)));
        }
        // A grabbed process outlives dtx however dtx ends: by default Windows kills every
        // process a debugger thread debugs when that thread's process exits (Microsoft Learn,
        // DebugSetProcessKillOnExit), and a console close, Ctrl-C before the run's handler, End
        // task or a killed dtx end it without `detach`. The setting belongs to this thread's
        // debug object, so it is set at once, before anything can fail.
        // SAFETY: plain call on this thread's debug object, which DebugActiveProcess made.
        unsafe { DebugSetProcessKillOnExit(0) };
        install_exit_handler();
        let mut t = WindowsTarget::new(pid, false);
        t.clr_feed = clr_feed;
        t.run_to_loader_break().map_err(grab_err)?;
        Ok(t)
    }

    /// Answers events until the loader's breakpoint (creation) or break-in (attach), and holds
    /// it.
    fn run_to_loader_break(&mut self) -> Result<(), String> {
        loop {
            match self.next(INFINITE) {
                Some(DebugEvent::Stopped {
                    stop: Stop::Quiet, ..
                }) if self.loader_break => {
                    self.held = true;
                    self.publish();
                    return Ok(());
                }
                Some(DebugEvent::Exited(_)) => return Err("the process exited".into()),
                Some(DebugEvent::Stopped { tid, stop }) => {
                    let sig = matches!(stop, Stop::Signal(_)) as i32;
                    self.resume(tid, sig);
                }
                Some(_) => {}
                None => return Err("no debug events".into()),
            }
        }
    }

    /// The main executable's path.
    pub fn exe(&self) -> &str {
        &self.exe
    }

    /// Runs a held target to `addr` (its `main`) with a temporary breakpoint; held there.
    pub fn run_to(&mut self, addr: u64) -> Result<(), String> {
        let pid = self.pid;
        let mut orig = [0u8; 1];
        if !self.read_memory(addr, &mut orig) || !self.write_code(addr, &[0xcc]) {
            return Err(format!(
                "pid {pid}: cannot plant a breakpoint at 0x{addr:x}"
            ));
        }
        self.held = false;
        if let Some(tid) = self.pending {
            self.resume(tid, 0);
        }
        loop {
            match self.wait(None) {
                DebugEvent::Stopped {
                    tid,
                    stop: Stop::Trap,
                } => {
                    if let Some(mut r) = self.regs(tid) {
                        if r.rip == addr + 1 {
                            self.write_code(addr, &orig);
                            r.rip = addr;
                            self.set_regs(tid, &r);
                            self.held = true;
                            self.publish();
                            return Ok(());
                        }
                    }
                    self.resume(tid, 1);
                }
                DebugEvent::Stopped {
                    tid,
                    stop: Stop::Signal(s),
                } => self.resume(tid, s),
                DebugEvent::Stopped { tid, .. } => self.resume(tid, 0),
                DebugEvent::ThreadExited { .. } | DebugEvent::Timeout => {}
                DebugEvent::Exited(_) => {
                    return Err(format!("pid {pid} exited before reaching main"));
                }
            }
        }
    }

    /// Puts this process's module list where the pid provider reads it.
    fn publish(&self) {
        let mut text = String::new();
        for m in &self.modules {
            text.push_str(&maps_line(m.base, m.end, &m.path));
        }
        MODULES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(HashMap::new)
            .insert(self.pid, (text, self.exe.clone()));
    }

    fn unpublish(&self) {
        if let Some(m) = MODULES.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            m.remove(&self.pid);
        }
        if let Some(m) = lock(&PLANTED).as_mut() {
            m.remove(&self.pid);
        }
    }

    /// Detaches with every byte this dtx planted put back (what the registry of
    /// [`PLANTED`] holds): the exit paths that have no list of their own.
    fn detach_planted(&mut self) {
        let restore: Vec<(u64, u8)> = lock(&PLANTED)
            .as_ref()
            .and_then(|m| m.get(&self.pid))
            .map(|p| p.bytes.iter().map(|(a, b)| (*a, *b)).collect())
            .unwrap_or_default();
        self.detach(&restore);
    }

    /// Keeps [`PLANTED`] up to date with a write of code: an int3 over `before` is noted, a
    /// byte put back is forgotten.
    fn note_code_write(&self, addr: u64, data: &[u8], before: Option<u8>) {
        let mut g = lock(&PLANTED);
        let Some(p) = g.as_mut().and_then(|m| m.get_mut(&self.pid)) else {
            return;
        };
        match (data, before) {
            ([0xcc], Some(b)) if b != 0xcc => {
                p.bytes.insert(addr, b);
            }
            ([0xcc], _) => {}
            ([_], _) => {
                p.bytes.remove(&addr);
            }
            _ => {}
        }
    }

    fn thread(&self, tid: u32) -> HANDLE {
        self.threads
            .get(&tid)
            .copied()
            .unwrap_or(std::ptr::null_mut())
    }

    /// The size of the image mapped at `base` (its PE header's SizeOfImage).
    fn image_size(&self, base: u64) -> u64 {
        let mut b = [0u8; 4];
        if !self.read_memory(base + 0x3c, &mut b) {
            return 0x1000;
        }
        let nt = base + u32::from_le_bytes(b) as u64;
        if !self.read_memory(nt + 0x50, &mut b) {
            return 0x1000;
        }
        u32::from_le_bytes(b).max(0x1000) as u64
    }

    /// A module's path from its file handle (closed here), else from the name pointer the
    /// event carries.
    fn module_path(&self, file: HANDLE, name_ptr: u64, unicode: bool) -> String {
        let mut path = String::new();
        if !file.is_null() {
            let mut buf = [0u16; 1024];
            // SAFETY: a file handle the debug event gave us; buf is large enough or the call
            // reports the size needed.
            let n =
                unsafe { GetFinalPathNameByHandleW(file, buf.as_mut_ptr(), buf.len() as u32, 0) };
            if n > 0 && (n as usize) < buf.len() {
                path = clean_path(&String::from_utf16_lossy(&buf[..n as usize]));
            }
            // SAFETY: the debugger owns the file handles of CREATE_PROCESS / LOAD_DLL events.
            unsafe { CloseHandle(file) };
        }
        if path.is_empty() && name_ptr != 0 {
            let mut p = [0u8; 8];
            if self.read_memory(name_ptr, &mut p) {
                let at = u64::from_le_bytes(p);
                if at != 0 {
                    path = self.read_string(at, unicode);
                }
            }
        }
        path
    }

    fn read_string(&self, addr: u64, unicode: bool) -> String {
        if unicode {
            let mut v = Vec::new();
            let mut b = [0u8; 2];
            while v.len() < 1024 && self.read_memory(addr + 2 * v.len() as u64, &mut b) {
                let c = u16::from_le_bytes(b);
                if c == 0 {
                    break;
                }
                v.push(c);
            }
            String::from_utf16_lossy(&v)
        } else {
            let mut v = Vec::new();
            let mut b = [0u8; 1];
            while v.len() < 1024 && self.read_memory(addr + v.len() as u64, &mut b) && b[0] != 0 {
                v.push(b[0]);
            }
            String::from_utf8_lossy(&v).into_owned()
        }
    }

    fn continue_event(&mut self, tid: u32, status: i32) {
        self.bp_addr = None;
        // SAFETY: answers the event of (pid, tid) we received.
        unsafe { ContinueDebugEvent(self.pid, tid, status) };
        if self.pending == Some(tid) {
            self.pending = None;
        }
    }

    /// Waits up to `ms` for one debug event and turns it into what the loop sees; `None` on
    /// timeout. Events the loop does not care about are answered here.
    fn next(&mut self, ms: u32) -> Option<DebugEvent> {
        loop {
            // dtx is ending (a console event, see `release_for_exit`): this thread owns the
            // debug object, so it is the one that answers and lets go
            if EXITING.load(std::sync::atomic::Ordering::SeqCst)
                && !self.detached
                && self.exited.is_none()
            {
                self.detach_planted();
                return None;
            }
            // SAFETY: DEBUG_EVENT is plain data filled by the call.
            let mut ev: DEBUG_EVENT = unsafe { std::mem::zeroed() };
            // SAFETY: a valid out pointer.
            if unsafe { WaitForDebugEvent(&mut ev, ms) } == 0 {
                // SAFETY: last error of this thread.
                let e = unsafe { GetLastError() };
                return if e == ERROR_SEM_TIMEOUT || ms != INFINITE {
                    Some(DebugEvent::Timeout)
                } else {
                    None
                };
            }
            if ev.dwProcessId != self.pid {
                // SAFETY: answering an event of another process (a child we do not debug).
                unsafe { ContinueDebugEvent(ev.dwProcessId, ev.dwThreadId, DBG_CONTINUE) };
                continue;
            }
            let tid = ev.dwThreadId;
            self.pending = Some(tid);
            match ev.dwDebugEventCode {
                CREATE_PROCESS_DEBUG_EVENT => {
                    // SAFETY: the union member of this event code.
                    let info = unsafe { ev.u.CreateProcessInfo };
                    self.process = info.hProcess;
                    lock(&PLANTED).get_or_insert_with(HashMap::new).insert(
                        self.pid,
                        Planted {
                            process: info.hProcess as usize,
                            bytes: HashMap::new(),
                            running: false,
                        },
                    );
                    self.threads.insert(tid, info.hThread);
                    let base = info.lpBaseOfImage as u64;
                    let path =
                        self.module_path(info.hFile, info.lpImageName as u64, info.fUnicode != 0);
                    self.exe = path.clone();
                    let end = base + self.image_size(base);
                    self.modules.push(Module { base, end, path });
                    self.continue_event(tid, DBG_CONTINUE);
                }
                CREATE_THREAD_DEBUG_EVENT => {
                    // SAFETY: the union member of this event code.
                    let info = unsafe { ev.u.CreateThread };
                    self.threads.insert(tid, info.hThread);
                    if self.stepping.is_some() && self.stepping != Some(tid) {
                        // SAFETY: a thread handle of the event (THREAD_ALL_ACCESS).
                        unsafe { SuspendThread(info.hThread) };
                        self.suspended.push(info.hThread);
                    }
                    self.continue_event(tid, DBG_CONTINUE);
                }
                EXIT_THREAD_DEBUG_EVENT => {
                    self.threads.remove(&tid);
                    self.continue_event(tid, DBG_CONTINUE);
                    return Some(DebugEvent::ThreadExited { tid });
                }
                EXIT_PROCESS_DEBUG_EVENT => {
                    // SAFETY: the union member of this event code.
                    let code = unsafe { ev.u.ExitProcess.dwExitCode };
                    let st = ExitStatus::Code(code as i32);
                    self.exited = Some(st);
                    self.continue_event(tid, DBG_CONTINUE);
                    self.unpublish();
                    return Some(DebugEvent::Exited(st));
                }
                LOAD_DLL_DEBUG_EVENT => {
                    // SAFETY: the union member of this event code.
                    let info = unsafe { ev.u.LoadDll };
                    let base = info.lpBaseOfDll as u64;
                    let path =
                        self.module_path(info.hFile, info.lpImageName as u64, info.fUnicode != 0);
                    let end = base + self.image_size(base);
                    self.modules.retain(|m| m.base != base);
                    self.modules.push(Module { base, end, path });
                    if self.report_modules {
                        self.publish();
                        return Some(DebugEvent::Stopped {
                            tid,
                            stop: Stop::Modules,
                        });
                    }
                    self.continue_event(tid, DBG_CONTINUE);
                }
                UNLOAD_DLL_DEBUG_EVENT => {
                    // SAFETY: the union member of this event code.
                    let base = unsafe { ev.u.UnloadDll.lpBaseOfDll } as u64;
                    self.modules.retain(|m| m.base != base);
                    if self.report_modules {
                        self.publish();
                        return Some(DebugEvent::Stopped {
                            tid,
                            stop: Stop::Modules,
                        });
                    }
                    self.continue_event(tid, DBG_CONTINUE);
                }
                EXCEPTION_DEBUG_EVENT => {
                    // SAFETY: the union member of this event code.
                    let info = unsafe { ev.u.Exception };
                    let code = info.ExceptionRecord.ExceptionCode;
                    let at = info.ExceptionRecord.ExceptionAddress as u64;
                    if code == EXCEPTION_BREAKPOINT || code == STATUS_WX86_BREAKPOINT {
                        if !self.loader_break {
                            self.loader_break = true;
                            return Some(DebugEvent::Stopped {
                                tid,
                                stop: Stop::Quiet,
                            });
                        }
                        self.bp_addr = Some((tid, at));
                        return Some(DebugEvent::Stopped {
                            tid,
                            stop: Stop::Trap,
                        });
                    }
                    if code == EXCEPTION_SINGLE_STEP && self.stepping == Some(tid) {
                        return Some(DebugEvent::Stopped {
                            tid,
                            stop: Stop::Trap,
                        });
                    }
                    return Some(DebugEvent::Stopped {
                        tid,
                        stop: Stop::Signal(code),
                    });
                }
                _ => {
                    // debug strings, RIP events
                    self.continue_event(tid, DBG_CONTINUE);
                }
            }
        }
    }

    fn release_suspended(&mut self) {
        for h in std::mem::take(&mut self.suspended) {
            // SAFETY: a thread handle we suspended.
            unsafe { ResumeThread(h) };
        }
    }
}

impl Drop for WindowsTarget {
    fn drop(&mut self) {
        if !self.detached && self.exited.is_none() {
            self.detach_planted();
        }
        self.unpublish();
    }
}

impl TargetProcess for WindowsTarget {
    fn take_clr_feed(&mut self) -> Option<super::ClrFeed> {
        self.clr_feed.take()
    }

    fn pid(&self) -> u32 {
        self.pid
    }

    fn win64(&self) -> bool {
        true
    }

    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> bool {
        if buf.is_empty() {
            return true;
        }
        if addr >= 1 << 63 || self.process.is_null() {
            return false;
        }
        let mut n = 0usize;
        // SAFETY: buf is valid for buf.len() bytes; the system checks the remote range.
        let ok = unsafe {
            ReadProcessMemory(
                self.process,
                addr as *const _,
                buf.as_mut_ptr() as *mut _,
                buf.len(),
                &mut n,
            )
        };
        ok != 0 && n == buf.len()
    }

    fn write_memory(&self, addr: u64, data: &[u8]) -> bool {
        if addr >= 1 << 63 || self.process.is_null() {
            return false;
        }
        let mut n = 0usize;
        // SAFETY: data is valid for its length; WriteProcessMemory makes code pages writable
        // for the write itself.
        let ok = unsafe {
            WriteProcessMemory(
                self.process,
                addr as *const _,
                data.as_ptr() as *const _,
                data.len(),
                &mut n,
            )
        };
        ok != 0 && n == data.len()
    }

    fn write_code(&self, addr: u64, data: &[u8]) -> bool {
        let before = if data == [0xcc] {
            let mut b = [0u8; 1];
            self.read_memory(addr, &mut b).then_some(b[0])
        } else {
            None
        };
        let ok = self.write_memory(addr, data);
        if ok {
            // SAFETY: flushing a range of the target we just wrote.
            unsafe { FlushInstructionCache(self.process, addr as *const _, data.len()) };
            self.note_code_write(addr, data, before);
        }
        ok
    }

    fn regs(&self, tid: u32) -> Option<Regs> {
        let h = self.thread(tid);
        if h.is_null() {
            return None;
        }
        let mut ctx = self.ctx.borrow_mut();
        ctx.0.ContextFlags = CONTEXT_FULL_AMD64;
        // SAFETY: an aligned CONTEXT; the thread is stopped by its debug event.
        if unsafe { GetThreadContext(h, &mut ctx.0) } == 0 {
            return None;
        }
        let c = &ctx.0;
        let mut rip = c.Rip;
        if let Some((t, at)) = self.bp_addr {
            // the loop expects the pc just after the int3
            if t == tid && rip == at {
                rip = at + 1;
            }
        }
        Some(Regs {
            gpr: [
                c.Rax, c.Rcx, c.Rdx, c.Rbx, c.Rsp, c.Rbp, c.Rsi, c.Rdi, c.R8, c.R9, c.R10, c.R11,
                c.R12, c.R13, c.R14, c.R15,
            ],
            rip,
            rflags: c.EFlags as u64,
            cs: c.SegCs as u64,
            ss: c.SegSs as u64,
            ds: c.SegDs as u64,
            es: c.SegEs as u64,
            fs: c.SegFs as u64,
            gs: c.SegGs as u64,
            fs_base: 0,
            gs_base: 0,
        })
    }

    fn set_regs(&self, tid: u32, r: &Regs) -> bool {
        let h = self.thread(tid);
        if h.is_null() {
            return false;
        }
        let mut ctx = self.ctx.borrow_mut();
        ctx.0.ContextFlags = CONTEXT_FULL_AMD64;
        // SAFETY: as in regs(); read first so that the fields we do not set stay.
        if unsafe { GetThreadContext(h, &mut ctx.0) } == 0 {
            return false;
        }
        let c = &mut ctx.0;
        let g = &r.gpr;
        c.Rax = g[0];
        c.Rcx = g[1];
        c.Rdx = g[2];
        c.Rbx = g[3];
        c.Rsp = g[4];
        c.Rbp = g[5];
        c.Rsi = g[6];
        c.Rdi = g[7];
        c.R8 = g[8];
        c.R9 = g[9];
        c.R10 = g[10];
        c.R11 = g[11];
        c.R12 = g[12];
        c.R13 = g[13];
        c.R14 = g[14];
        c.R15 = g[15];
        c.Rip = r.rip;
        c.EFlags = r.rflags as u32;
        // SAFETY: the thread is stopped; a full, aligned context.
        unsafe { SetThreadContext(h, &ctx.0) != 0 }
    }

    fn resume(&mut self, tid: u32, signal: i32) {
        if self.pending == Some(tid) {
            let status = if signal != 0 {
                DBG_EXCEPTION_NOT_HANDLED
            } else {
                DBG_CONTINUE
            };
            self.continue_event(tid, status);
        }
    }

    fn step(&mut self, tid: u32) {
        let h = self.thread(tid);
        {
            let mut ctx = self.ctx.borrow_mut();
            ctx.0.ContextFlags = CONTEXT_FULL_AMD64;
            // SAFETY: the thread is stopped by its event; aligned context.
            unsafe {
                if GetThreadContext(h, &mut ctx.0) != 0 {
                    ctx.0.EFlags |= TRAP_FLAG;
                    SetThreadContext(h, &ctx.0);
                }
            }
        }
        if self.threads.len() > 1 {
            for (&t, &th) in &self.threads {
                // SAFETY: thread handles of the target's events.
                if t != tid && unsafe { SuspendThread(th) } != u32::MAX {
                    self.suspended.push(th);
                }
            }
        }
        self.stepping = Some(tid);
        self.continue_event(tid, DBG_CONTINUE);
    }

    fn resume_all(&mut self) {
        self.report_modules = true;
        if let Some(p) = lock(&PLANTED).as_mut().and_then(|m| m.get_mut(&self.pid)) {
            p.running = true;
        }
        if self.held {
            self.held = false;
            if let Some(tid) = self.pending {
                self.continue_event(tid, DBG_CONTINUE);
            }
        }
    }

    fn wait(&mut self, deadline: Option<u64>) -> DebugEvent {
        if let Some(st) = self.exited {
            return DebugEvent::Exited(st);
        }
        let ms = match deadline {
            None => INFINITE,
            Some(d) => {
                let now = monotonic_ns();
                if d <= now {
                    0
                } else {
                    (d - now).div_ceil(1_000_000).min(INFINITE as u64 - 1) as u32
                }
            }
        };
        match self.next(ms) {
            Some(ev) => ev,
            // the debugger lost the process
            None => {
                let st = ExitStatus::Code(0);
                self.exited = Some(st);
                DebugEvent::Exited(st)
            }
        }
    }

    fn wait_thread(&mut self, tid: u32) -> DebugEvent {
        loop {
            let Some(ev) = self.next(INFINITE) else {
                return DebugEvent::ThreadExited { tid };
            };
            match ev {
                DebugEvent::Stopped { tid: t, stop } if t != tid => {
                    // another thread (the others are suspended, so rarely): a breakpoint is
                    // taken again later (pc back on the int3), anything else goes on
                    if stop == Stop::Trap {
                        if let Some((_, at)) = self.bp_addr {
                            if let Some(mut r) = self.regs(t) {
                                r.rip = at;
                                self.set_regs(t, &r);
                            }
                        }
                    }
                    let status = if matches!(stop, Stop::Signal(_)) {
                        DBG_EXCEPTION_NOT_HANDLED
                    } else {
                        DBG_CONTINUE
                    };
                    self.continue_event(t, status);
                }
                DebugEvent::ThreadExited { tid: t } if t != tid => {}
                DebugEvent::Timeout => {}
                _ => {
                    if self.stepping == Some(tid) {
                        self.stepping = None;
                        self.release_suspended();
                    }
                    return ev;
                }
            }
        }
    }

    fn release_child(&mut self, _child: u32, _restore: &[(u64, u8)]) {}

    /// Ends a process dtx started that still runs: let go of it, then TerminateProcess (as
    /// dtrace ends the `-c` command it created when it exits first).
    fn terminate(&mut self) {
        let running = self.exited.is_none();
        self.detach(&[]);
        if running && self.created {
            kill(self.pid);
        }
    }

    fn detach(&mut self, restore: &[(u64, u8)]) {
        if self.detached || self.exited.is_some() {
            self.detached = true;
            return;
        }
        self.detached = true;
        for (addr, b) in restore {
            self.write_code(*addr, &[*b]);
        }
        let was_bp: std::collections::HashSet<u64> = restore.iter().map(|(a, _)| *a).collect();
        self.stepping = None;
        self.release_suspended();
        // answer what is outstanding and what is queued: threads stopped just after one of
        // our breakpoints run the original instruction
        let answer = |t: &mut WindowsTarget, tid: u32| {
            let bp = t.bp_addr.filter(|(x, _)| *x == tid).map(|(_, a)| a);
            if let Some(at) = bp {
                if was_bp.contains(&at) {
                    if let Some(mut r) = t.regs(tid) {
                        r.rip = at;
                        t.set_regs(tid, &r);
                    }
                    t.continue_event(tid, DBG_CONTINUE);
                    return;
                }
            }
            t.continue_event(tid, DBG_CONTINUE);
        };
        if let Some(tid) = self.pending {
            answer(self, tid);
        }
        loop {
            match self.next(0) {
                Some(DebugEvent::Stopped { tid, stop }) => match stop {
                    Stop::Signal(_) => self.continue_event(tid, DBG_EXCEPTION_NOT_HANDLED),
                    _ => answer(self, tid),
                },
                Some(DebugEvent::Exited(_)) => return,
                Some(DebugEvent::ThreadExited { .. }) => {}
                Some(DebugEvent::Timeout) | None => break,
            }
        }
        // SAFETY: stop debugging; the process runs on.
        unsafe {
            DebugSetProcessKillOnExit(0);
            DebugActiveProcessStop(self.pid);
        }
        self.unpublish();
    }

    fn maps(&self) -> Option<(String, String)> {
        let mut text = String::new();
        for m in &self.modules {
            text.push_str(&maps_line(m.base, m.end, &m.path));
        }
        Some((text, self.exe.clone()))
    }

    fn identity(&self) -> (Vec<u8>, u64) {
        let name = self
            .exe
            .rsplit(['\\', '/'])
            .next()
            .unwrap_or(&self.exe)
            .as_bytes()
            .to_vec();
        let ppid = if self.created {
            std::process::id() as u64
        } else {
            0
        };
        (name, ppid)
    }
}

// ---------------------------------------------------------------------------------------------
// Every exit of dtx leaves a grabbed process running, without our int3s

/// What the debugger loops of this dtx planted in one process: the original byte under each
/// int3 and a handle to put them back with from any thread (the debugger's own handle of the
/// process, from its CREATE_PROCESS event: all access, valid until the loop lets go).
struct Planted {
    process: usize,
    bytes: HashMap<u64, u8>,
    /// The loop has let the process run (threads may be stopped at our int3s).
    running: bool,
}

/// The processes the debugger loops of this dtx hold, by pid.
static PLANTED: Mutex<Option<HashMap<u32, Planted>>> = Mutex::new(None);

/// dtx is ending: every debugger loop detaches at its next wait (see [`release_for_exit`]).
static EXITING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How long the console handler waits for the debugger loops to let go: Windows gives a console
/// close 5 s for every handler (microsoft/terminal, doc/ConsoleCtrlEvent.md), and the live
/// sessions' handler may have taken 2 s of it for the sampling interval's ledger.
pub const EXIT_WAIT: std::time::Duration = std::time::Duration::from_millis(2500);

/// Puts back every byte under an int3 this dtx planted, from whatever thread calls it (the
/// debug API leaves WriteProcessMemory free of the debugger thread), and has each debugger
/// loop detach at its next wait; waits at most `wait` for the loops whose processes run (a
/// thread of theirs may be stopped at one of our breakpoints, which only the debugger thread
/// can answer, its pc moved back onto the original instruction). A process still held at the
/// loader's break-in (Ctrl-C while the program compiles) needs nothing more: kill-on-exit is
/// off, and the break-in thread's `DbgBreakPoint` is guarded by DbgUiRemoteBreakin. Returns
/// whether every loop let go in time. Called by the console handler (HandlerRoutine), and by
/// any exit path that cannot reach the loops.
pub fn release_for_exit(wait: std::time::Duration) -> bool {
    EXITING.store(true, std::sync::atomic::Ordering::SeqCst);
    restore_planted();
    let until = std::time::Instant::now() + wait;
    loop {
        let busy = lock(&PLANTED)
            .as_ref()
            .is_some_and(|m| m.values().any(|p| p.running));
        if !busy {
            return true;
        }
        if std::time::Instant::now() >= until {
            // what a loop may have planted again meanwhile (a single step's re-arm)
            restore_planted();
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Writes every planted byte back (the entries stay: the debugger thread's detach needs their
/// addresses to move a stopped thread's pc back).
fn restore_planted() {
    let g = lock(&PLANTED);
    let Some(m) = g.as_ref() else {
        return;
    };
    for p in m.values() {
        let h = p.process as HANDLE;
        for (&addr, &b) in &p.bytes {
            let mut n = 0usize;
            // SAFETY: the debugger's handle of a process it still holds (the entry goes when
            // the loop lets go); one byte of ours, written where we wrote an int3
            unsafe {
                WriteProcessMemory(h, addr as *const _, (&b as *const u8).cast(), 1, &mut n);
                FlushInstructionCache(h, addr as *const _, 1);
            }
        }
    }
}

/// The planted bytes of process `pid` (address, original byte), for tests and diagnostics.
pub fn planted_bytes(pid: u32) -> Vec<(u64, u8)> {
    let mut v: Vec<(u64, u8)> = lock(&PLANTED)
        .as_ref()
        .and_then(|m| m.get(&pid))
        .map(|p| p.bytes.iter().map(|(a, b)| (*a, *b)).collect())
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// What Windows runs when a console event reaches a dtx holding a process (after the handlers
/// registered later declined it), as it runs it: the tests' way to close the console.
pub fn console_event(ctrl: u32) -> bool {
    // SAFETY: the handler takes any control code and touches no caller memory
    unsafe { exit_handler(ctrl) != 0 }
}

/// Registers (once, at the first grab) [`exit_handler`].
fn install_exit_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        use windows_sys::Win32::System::Console::SetConsoleCtrlHandler;
        // SAFETY: a handler that stays valid for the life of the process
        unsafe { SetConsoleCtrlHandler(Some(exit_handler), 1) };
    });
}

/// The HandlerRoutine of a dtx holding a process: it runs when no handler registered after it
/// took the event (the command line's Ctrl-C handler, registered later, takes Ctrl-C and
/// Ctrl-Break once the run has started and ends the run in order), so dtx is about to end:
/// the grabbed processes are given back ([`release_for_exit`]). FALSE lets the next handler
/// (in the end ExitProcess) run.
unsafe extern "system" fn exit_handler(_ctrl: u32) -> windows_sys::core::BOOL {
    let _ = std::panic::catch_unwind(|| release_for_exit(EXIT_WAIT));
    0
}

// ---------------------------------------------------------------------------------------------
// 32-bit (WOW64) processes

/// The machine of a WOW64 process (`IMAGE_FILE_MACHINE_*`), 0 for a native one; None when it
/// cannot be told. IsWow64Process2 (Windows 10 1511 and later; Microsoft Learn) is looked up
/// at run time, IsWow64Process (x86 only) where it is missing.
fn process_machine(h: HANDLE) -> Option<u16> {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};
    type Wow2 = unsafe extern "system" fn(HANDLE, *mut u16, *mut u16) -> i32;
    type Wow1 = unsafe extern "system" fn(HANDLE, *mut i32) -> i32;
    let k32 = wide("kernel32.dll");
    // SAFETY: a NUL-terminated module name; kernel32 is loaded in every process
    let m = unsafe { GetModuleHandleW(k32.as_ptr()) };
    if m.is_null() {
        return None;
    }
    // SAFETY: procedure names NUL-terminated; the signatures are Microsoft Learn's
    unsafe {
        if let Some(f) = GetProcAddress(m, c"IsWow64Process2".as_ptr().cast()) {
            let f: Wow2 = std::mem::transmute(f);
            let (mut process, mut native) = (0u16, 0u16);
            return (f(h, &mut process, &mut native) != 0).then_some(process);
        }
        let f: Wow1 = std::mem::transmute(GetProcAddress(m, c"IsWow64Process".as_ptr().cast())?);
        let mut wow = 0i32;
        (f(h, &mut wow) != 0).then_some(if wow != 0 { 0x014c } else { 0 })
    }
}

/// Why a process of machine `machine` (as [`process_machine`] answers) is refused, if it is.
pub fn wow64_words(_pid: u32, machine: u16) -> Option<String> {
    let name = match machine {
        0 => return None,
        0x014c => "x86".to_string(),
        0x01c4 => "ARM".to_string(),
        m => format!("machine 0x{m:04x}"),
    };
    Some(format!(
        "it is a 32-bit ({name}) process running under WOW64: dtx's pid and fpid providers \
         trace 64-bit processes only"
    ))
}

/// [`wow64_words`] for process `pid`, opened for the question (None when it is native or
/// cannot be opened: then the grab's own error says why).
pub fn wow64_refusal(pid: u32) -> Option<String> {
    use windows_sys::Win32::System::Threading::PROCESS_QUERY_LIMITED_INFORMATION;
    // SAFETY: plain calls; the handle is closed below
    unsafe {
        let h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if h.is_null() {
            return None;
        }
        let m = process_machine(h);
        CloseHandle(h);
        m.and_then(|m| wow64_words(pid, m))
    }
}

/// Ends a process dtx started (a run that never began).
pub fn kill(pid: u32) {
    // SAFETY: opening and terminating a process by pid; the handle is closed.
    unsafe {
        let h = OpenProcess(PROCESS_TERMINATE, 0, pid);
        if !h.is_null() {
            TerminateProcess(h, 1);
            CloseHandle(h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_quoting() {
        let mut s = String::new();
        quote_arg("plain", &mut s);
        s.push(' ');
        quote_arg("two words", &mut s);
        s.push(' ');
        quote_arg(r#"a"b\"#, &mut s);
        assert_eq!(s, r#"plain "two words" "a\"b\\""#);
    }
}
