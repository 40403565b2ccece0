//! Puts the fpid agent into a Windows process and has it hook the functions of the run's
//! probes: the DLL written to a folder every identity may read and run from (see
//! `sites::agent_file`), loaded by a remote thread on `LoadLibraryW` (its path written with
//! VirtualAllocEx/WriteProcessMemory), then a second remote thread on the agent's
//! `dtx_fpid_attach` whose parameter is a handle of the unnamed file mapping dtx made (header,
//! table of functions, ring), duplicated into the target (DuplicateHandle). The agent answers each function's MinHook status in the table; a function
//! MinHook refuses is named on stderr and left alone. (Microsoft Learn: CreateRemoteThread,
//! LoadLibraryW, VirtualAllocEx, CreateFileMappingW, DuplicateHandle.)

use std::ffi::c_void;

use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, HMODULE, WAIT_OBJECT_0};
use windows_sys::Win32::System::Diagnostics::Debug::WriteProcessMemory;
use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};
use windows_sys::Win32::System::Memory::{
    VirtualAllocEx, VirtualFreeEx, MEM_COMMIT, MEM_RELEASE, MEM_RESERVE, PAGE_READWRITE,
};
use windows_sys::Win32::System::ProcessStatus::{
    K32EnumProcessModulesEx, K32GetModuleBaseNameW, LIST_MODULES_ALL,
};
use windows_sys::Win32::System::Threading::{
    CreateRemoteThread, GetCurrentProcess, GetExitCodeThread, OpenProcess, WaitForSingleObject,
    PROCESS_CREATE_THREAD, PROCESS_DUP_HANDLE, PROCESS_QUERY_INFORMATION, PROCESS_VM_OPERATION,
    PROCESS_VM_READ, PROCESS_VM_WRITE,
};

use super::ring::layout::{HOOK_ENTRY, HOOK_OK, HOOK_PENDING, HOOK_RETURN};
use super::ring::{RingConfig, SharedRing};
use super::sites::{agent_file, HookSite, Installed, RingOptions, STACK_BYTES};
use crate::providers::pid::PidProvider;

/// How long a remote call may take (loading the agent, hooking) before dtx gives up.
const CALL_MS: u32 = 20_000;

/// A process handle with the rights injection needs, closed on drop.
struct Process(HANDLE);

// SAFETY: a process handle may be used from any thread.
unsafe impl Send for Process {}

impl Drop for Process {
    fn drop(&mut self) {
        // SAFETY: our handle, closed once.
        unsafe { CloseHandle(self.0) };
    }
}

impl Process {
    fn open(pid: u32) -> Result<Process, String> {
        // SAFETY: plain call; null on failure.
        let h = unsafe {
            OpenProcess(
                PROCESS_CREATE_THREAD
                    | PROCESS_DUP_HANDLE
                    | PROCESS_QUERY_INFORMATION
                    | PROCESS_VM_OPERATION
                    | PROCESS_VM_READ
                    | PROCESS_VM_WRITE,
                0,
                pid,
            )
        };
        if h.is_null() {
            return Err(format!(
                "fpid: cannot open pid {pid} to load the agent: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Process(h))
    }

    /// Duplicates this process's handle `h` into the target, with the rights to map it
    /// (SECTION_QUERY | SECTION_MAP_READ | SECTION_MAP_WRITE); its value there.
    fn duplicate_into(&self, h: usize) -> Result<usize, String> {
        use windows_sys::Win32::Foundation::DuplicateHandle;
        use windows_sys::Win32::System::Memory::{FILE_MAP_READ, FILE_MAP_WRITE};
        let mut remote: HANDLE = std::ptr::null_mut();
        // SAFETY: our section handle, the target's process handle (PROCESS_DUP_HANDLE), an out
        // pointer for the value in the target
        let ok = unsafe {
            DuplicateHandle(
                GetCurrentProcess(),
                h as HANDLE,
                self.0,
                &mut remote,
                FILE_MAP_READ | FILE_MAP_WRITE,
                0,
                0,
            )
        };
        if ok == 0 {
            return Err(format!(
                "fpid: cannot hand the ring to the target: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(remote as usize)
    }

    /// Runs `func(param)` in a new thread of the process and returns the thread's exit code.
    fn call_with(&self, func: u64, param: *mut c_void) -> Result<u32, String> {
        // SAFETY: a start routine of the `DWORD (LPVOID)` shape in the target; the thread
        // handle is closed below.
        unsafe {
            let start: unsafe extern "system" fn(*mut c_void) -> u32 = std::mem::transmute(func);
            let t = CreateRemoteThread(
                self.0,
                std::ptr::null(),
                0,
                Some(start),
                param,
                0,
                std::ptr::null_mut(),
            );
            if t.is_null() {
                return Err(format!(
                    "cannot start a thread in it: {}",
                    std::io::Error::last_os_error()
                ));
            }
            let r = if WaitForSingleObject(t, CALL_MS) == WAIT_OBJECT_0 {
                let mut code = 0u32;
                GetExitCodeThread(t, &mut code);
                Ok(code)
            } else {
                Err(format!("its thread did not finish in {} s", CALL_MS / 1000))
            };
            CloseHandle(t);
            r
        }
    }

    /// Runs `func(param)` in a new thread of the process, `data` copied into the process for
    /// `param` (null when empty), and returns the thread's exit code.
    fn call(&self, func: u64, data: &[u8]) -> Result<u32, String> {
        let mut param: *mut c_void = std::ptr::null_mut();
        if !data.is_empty() {
            // SAFETY: memory in the target, of data's size, written once.
            unsafe {
                param = VirtualAllocEx(
                    self.0,
                    std::ptr::null(),
                    data.len(),
                    MEM_COMMIT | MEM_RESERVE,
                    PAGE_READWRITE,
                );
                if param.is_null() {
                    return Err(format!("no memory: {}", std::io::Error::last_os_error()));
                }
                let mut n = 0usize;
                if WriteProcessMemory(
                    self.0,
                    param,
                    data.as_ptr() as *const c_void,
                    data.len(),
                    &mut n,
                ) == 0
                {
                    VirtualFreeEx(self.0, param, 0, MEM_RELEASE);
                    return Err(format!("cannot write: {}", std::io::Error::last_os_error()));
                }
            }
        }
        // LoadLibraryW and the agent's exports have the `DWORD (LPVOID)` shape
        let result = self.call_with(func, param);
        // the memory goes only when the thread is done with it
        if result.is_ok() && !param.is_null() {
            // SAFETY: what was allocated above.
            unsafe { VirtualFreeEx(self.0, param, 0, MEM_RELEASE) };
        }
        result
    }

    /// The base of the module named `name` (case-insensitive) in the process.
    fn module_base(&self, name: &str) -> Option<u64> {
        let mut mods: Vec<HMODULE> = vec![std::ptr::null_mut(); 1024];
        let mut needed = 0u32;
        // SAFETY: a buffer of the size given; the names read into a sized buffer.
        unsafe {
            if K32EnumProcessModulesEx(
                self.0,
                mods.as_mut_ptr(),
                (mods.len() * std::mem::size_of::<HMODULE>()) as u32,
                &mut needed,
                LIST_MODULES_ALL,
            ) == 0
            {
                return None;
            }
            let n = (needed as usize / std::mem::size_of::<HMODULE>()).min(mods.len());
            let mut buf = [0u16; 260];
            mods[..n].iter().find_map(|&m| {
                let len = K32GetModuleBaseNameW(self.0, m, buf.as_mut_ptr(), buf.len() as u32);
                let got = String::from_utf16_lossy(&buf[..len as usize]);
                got.eq_ignore_ascii_case(name).then_some(m as u64)
            })
        }
    }
}

/// The address of `LoadLibraryW` in the process: kernel32's base there plus its offset in
/// this process's kernel32.
fn load_library_in(p: &Process) -> Result<u64, String> {
    let k32: Vec<u16> = "kernel32.dll".encode_utf16().chain(Some(0)).collect();
    // SAFETY: a NUL-terminated module name and procedure name.
    let (base, func) = unsafe {
        let m = GetModuleHandleW(k32.as_ptr());
        (
            m as u64,
            GetProcAddress(m, c"LoadLibraryW".as_ptr() as *const u8),
        )
    };
    let Some(func) = func else {
        return Err("fpid: no LoadLibraryW here".into());
    };
    let remote = p
        .module_base("kernel32.dll")
        .ok_or("fpid: the target has no kernel32.dll loaded yet")?;
    Ok(remote + (func as usize as u64 - base))
}

/// The relative address of the agent's export `name`, read from the embedded DLL.
fn export_rva(name: &str) -> Option<u64> {
    use object::{Object, ObjectKind};
    let file = object::File::parse(super::AGENT).ok()?;
    if file.kind() != ObjectKind::Dynamic {
        return None;
    }
    let base = file.relative_address_base();
    file.exports()
        .ok()?
        .iter()
        .find(|e| e.name() == name.as_bytes())
        .map(|e| e.address().wrapping_sub(base))
}

/// Words for `dtx_fpid_attach`'s answers (agent/src/windows.rs).
fn attach_error(code: u32) -> &'static str {
    match code {
        1 => "it cannot open the shared mapping",
        2 => "the shared mapping's header is not dtx's",
        3 => "MinHook failed to start",
        4 => "no thread-local slot is left",
        5 => "no memory for its thunks",
        _ => "unknown error",
    }
}

/// MinHook's status names (MinHook.h).
fn minhook_status(s: u64) -> String {
    let name = match s {
        3 => "MH_ERROR_ALREADY_CREATED",
        7 => "MH_ERROR_NOT_EXECUTABLE",
        8 => "MH_ERROR_UNSUPPORTED_FUNCTION",
        9 => "MH_ERROR_MEMORY_ALLOC",
        10 => "MH_ERROR_MEMORY_PROTECT",
        12 => "MH_ERROR_FUNCTION_NOT_FOUND",
        HOOK_PENDING => return "the agent did not try it".into(),
        _ => return format!("MinHook status {s}"),
    };
    format!("MinHook refused it ({name})")
}

/// Loads the agent into process `pid` (once: a second run finds it loaded), has it hook
/// `sites`, and returns the ring and the hooks. A function MinHook refuses is named on stderr.
pub fn install(
    pid: u32,
    provider: &PidProvider,
    sites: Vec<HookSite>,
    want_ustack: bool,
    args_used: usize,
    ring_options: RingOptions,
) -> Result<(SharedRing, Installed), String> {
    let ring_options = ring_options.check()?;
    // a 32-bit process has a 32-bit kernel32 (LoadLibraryW is elsewhere in it) and could not
    // load this 64-bit agent: refused before anything is written into it
    if let Some(why) = crate::sources::debugger::windows::wow64_refusal(pid) {
        return Err(format!("fpid: pid {pid}: {why}"));
    }
    // CET shadow stacks end the process at its first hit (issue 42, finding 11)
    if let Some(why) = super::cet::refusal(pid, super::cet::policy(pid)) {
        return Err(why);
    }
    let path = agent_file("dll")?;
    let p = Process::open(pid)?;
    let file_name = std::path::Path::new(&path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let agent = match p.module_base(&file_name) {
        Some(b) => b,
        None => {
            let wpath: Vec<u8> = path
                .encode_utf16()
                .chain(Some(0))
                .flat_map(u16::to_le_bytes)
                .collect();
            let loaded = p
                .call(load_library_in(&p)?, &wpath)
                .map_err(|e| format!("fpid: cannot load the agent into pid {pid}: {e}"))?;
            p.module_base(&file_name).ok_or_else(|| {
                format!(
                    "fpid: pid {pid} could not load the agent {path} (LoadLibraryW answered {loaded:#x})"
                )
            })?
        }
    };
    let (Some(attach), Some(detach)) =
        (export_rva("dtx_fpid_attach"), export_rva("dtx_fpid_detach"))
    else {
        return Err("fpid: the agent has no dtx_fpid_attach".into());
    };
    let config = RingConfig {
        hooks: sites.len().max(1),
        ring_bytes: ring_options.bytes,
        stack_bytes: if want_ustack { STACK_BYTES } else { 0 },
        stack_args: args_used > 4,
        wait_ms: ring_options.wait_ms,
    };
    let mut ring = SharedRing::create_unnamed(&config)?;
    for (i, s) in sites.iter().enumerate() {
        ring.set_hook_addr(i, s.func);
        let flags = if s.entries.is_empty() { 0 } else { HOOK_ENTRY }
            | if s.returns.is_empty() { 0 } else { HOOK_RETURN };
        ring.set_hook(i, flags);
    }
    // the section reaches the agent as a handle of its own process, the remote thread's
    // parameter; the agent maps it and closes it
    let remote = p.duplicate_into(ring.section_handle())?;
    let code = p
        .call_with(agent + attach, remote as *mut c_void)
        .map_err(|e| format!("fpid: the agent in pid {pid} did not answer: {e}"))?;
    if code != 0 {
        return Err(format!(
            "fpid: the agent in pid {pid} could not hook: {}",
            attach_error(code)
        ));
    }
    let modules = provider.modules_of(pid).unwrap_or_default();
    let mut hooked = 0;
    for (i, s) in sites.iter().enumerate() {
        let status = ring.hook_status(i);
        if status == HOOK_OK {
            hooked += 1;
            continue;
        }
        ring.set_hook(i, 0);
        let name = modules
            .module_at(s.func)
            .and_then(|m| {
                let f = m.image.function_at(s.func.wrapping_sub(m.bias))?;
                Some(format!("{}`{}", m.name, f.name))
            })
            .unwrap_or_else(|| format!("0x{:x}", s.func));
        crate::output::stderr::say(
            "dtx",
            format_args!("fpid: {name} is not traced: {}", minhook_status(status)),
        );
    }
    if hooked == 0 && !sites.is_empty() {
        return Err(format!("fpid: no function of pid {pid} could be hooked"));
    }
    // when tracing ends, the agent puts every function's first bytes back
    let detach_at = agent + detach;
    if let Ok(mut slot) = ring.on_disable.lock() {
        *slot = Some(Box::new(move || {
            let _ = p.call(detach_at, &[]);
        }));
    }
    Ok((ring, Installed { sites }))
}
