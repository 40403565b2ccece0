//! `lkd()`, Microsoft's DTrace for Windows' "live dump capture" action: a live kernel memory
//! dump, taken while the system keeps running, as Task Manager's "Create live kernel memory
//! dump file" takes it. Microsoft's scripts call it on a failing NTSTATUS (its
//! `samples/windows/livedump/capturelkd.d`) and find the dump under
//! `%SystemRoot%\LiveKernelReports`, where dtx writes it too.
//!
//! On Windows, live, the dump is asked of the kernel by `NtSystemDebugControl` with the control
//! code `SysDbgGetLiveKernelDump` (37) and a `SYSDBG_LIVEDUMP_CONTROL` (version 1: the bug check
//! code and its four parameters, the handle of the file to write, a cancel event, the flags and
//! the extra pages; 0x40 bytes on x64), the call the public live-dump tools make (phnt's
//! `ntexapi.h`, Sedeniono/livedump's README); it needs SeDebugPrivilege, which
//! [`check_privilege`] enables before the run starts. The bug check code is 0x161,
//! `LIVE_SYSTEM_DUMP` (Microsoft Learn: "Bug Check 0x161: LIVE_SYSTEM_DUMP"), the code a live
//! dump asked for from user mode carries.
//!
//! One dump per call site per [`RATE`] (a dump takes seconds and a lot of disk; a clause that
//! fires on every failing call would otherwise fill it), each with its path said on stderr.
//! Over a trace, and on a system that is not Windows, there is no live kernel to dump: the
//! first firing says so once and the script goes on.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The shortest time between two dumps of one call site.
pub const RATE: Duration = Duration::from_secs(60);

/// What one `lkd()` firing came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A dump was written to this file.
    Taken(PathBuf),
    /// No dump can be taken in this run; the words say why, the first time only.
    Unavailable(Option<String>),
    /// This call site took a dump less than [`RATE`] ago: none now. The words are said the
    /// first time a site is held back.
    Limited(Option<String>),
    /// The system refused the dump (the call and its status).
    Failed(String),
}

/// The call sites' last dumps, and whether dumps can be taken at all.
pub struct LiveDumps {
    /// Why no dump can be taken in this run, when none can.
    unavailable: Option<&'static str>,
    /// Set once the reason was said.
    said: bool,
    /// The last dump of each call site (the program's identity and the action's id).
    last: HashMap<(usize, u32), Instant>,
    /// Whether the rate limit was said for each site.
    limited_said: HashMap<(usize, u32), bool>,
    /// Dumps written by this process, for distinct file names.
    taken: u32,
}

impl Default for LiveDumps {
    fn default() -> Self {
        LiveDumps::new()
    }
}

/// Why there is no dump on a system that is not Windows.
const NOT_WINDOWS: &str = "lkd() takes a Windows live kernel memory dump, and this system is \
                           not Windows: no dump is taken, the script goes on";
/// Why there is no dump over a trace.
const OVER_TRACE: &str = "lkd() takes a live kernel memory dump, and a recorded trace has no \
                          live kernel: no dump is taken, the script goes on";

impl LiveDumps {
    pub fn new() -> Self {
        LiveDumps {
            unavailable: (!cfg!(windows)).then_some(NOT_WINDOWS),
            said: false,
            last: HashMap::new(),
            limited_said: HashMap::new(),
            taken: 0,
        }
    }

    /// The run is over a trace: no dump is taken.
    pub fn over_trace(&mut self) {
        if self.unavailable.is_none() {
            self.unavailable = Some(OVER_TRACE);
        }
    }

    /// One firing of the `lkd()` at `site`, at `now`.
    pub fn fire(&mut self, site: (usize, u32), now: Instant) -> Outcome {
        self.fire_with(site, now, take)
    }

    /// [`LiveDumps::fire`] with the dump taken by `dump` (the file's sequence number in).
    fn fire_with(
        &mut self,
        site: (usize, u32),
        now: Instant,
        dump: impl FnOnce(u32) -> Result<PathBuf, String>,
    ) -> Outcome {
        if let Some(why) = self.unavailable {
            let first = !std::mem::replace(&mut self.said, true);
            return Outcome::Unavailable(first.then(|| why.to_string()));
        }
        if let Some(t) = self.last.get(&site) {
            let since = now.saturating_duration_since(*t);
            if since < RATE {
                let said = self.limited_said.entry(site).or_insert(false);
                let first = !std::mem::replace(said, true);
                return Outcome::Limited(first.then(|| {
                    format!(
                        "lkd(): this call took a dump {}s ago: one dump per call a minute, the \
                         calls until then take none",
                        since.as_secs()
                    )
                }));
            }
        }
        self.last.insert(site, now);
        self.taken += 1;
        match dump(self.taken) {
            Ok(path) => Outcome::Taken(path),
            Err(e) => Outcome::Failed(e),
        }
    }
}

/// The file a dump goes to: `dtx-<pid>-<seconds since 1970>-<n>.dmp` in `dir`.
#[cfg(any(windows, test))]
fn dump_path(dir: &std::path::Path, n: u32) -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    dir.join(format!("dtx-{}-{secs}-{n}.dmp", std::process::id()))
}

/// What the run needs before it starts when a program calls `lkd()` live on this system: on
/// Windows, SeDebugPrivilege enabled in the process token.
#[cfg(windows)]
pub fn check_privilege() -> Result<(), String> {
    windows::enable_debug_privilege()
}

/// What the run needs before it starts when a program calls `lkd()` live: nothing here, where
/// the first firing says that no dump is taken.
#[cfg(not(windows))]
pub fn check_privilege() -> Result<(), String> {
    Ok(())
}

#[cfg(windows)]
fn take(n: u32) -> Result<PathBuf, String> {
    windows::take(n)
}

#[cfg(not(windows))]
fn take(_n: u32) -> Result<PathBuf, String> {
    Err(NOT_WINDOWS.to_string())
}

#[cfg(windows)]
mod windows {
    use std::path::PathBuf;
    use windows_sys::Win32::Foundation::{
        CloseHandle, GetLastError, ERROR_NOT_ALL_ASSIGNED, HANDLE, LUID,
    };

    /// `SysDbgGetLiveKernelDump` of `SYSDBG_COMMAND`.
    const SYSDBG_GET_LIVE_KERNEL_DUMP: u32 = 37;
    /// `LIVE_SYSTEM_DUMP`, the bug check code of a live dump asked for from user mode.
    const LIVE_SYSTEM_DUMP: u32 = 0x161;

    /// `SYSDBG_LIVEDUMP_CONTROL`, version 1 (its fields as phnt's `ntexapi.h` names them).
    #[repr(C)]
    struct LiveDumpControl {
        version: u32,
        bug_check_code: u32,
        bug_check_params: [usize; 4],
        dump_file_handle: HANDLE,
        cancel_event_handle: HANDLE,
        /// `SYSDBG_LIVEDUMP_CONTROL_FLAGS`: 0, kernel pages only, not compressed.
        flags: u32,
        /// `SYSDBG_LIVEDUMP_CONTROL_ADDPAGES`: 0, no hypervisor pages.
        add_pages: u32,
    }

    #[cfg(target_pointer_width = "64")]
    const _: () = assert!(std::mem::size_of::<LiveDumpControl>() == 0x40);

    /// `NtSystemDebugControl(Command, InputBuffer, InputBufferLength, OutputBuffer,
    /// OutputBufferLength, ReturnLength)`.
    type NtSystemDebugControl = unsafe extern "system" fn(
        u32,
        *mut core::ffi::c_void,
        u32,
        *mut core::ffi::c_void,
        u32,
        *mut u32,
    ) -> i32;

    fn wide(s: &str) -> Vec<u16> {
        s.encode_utf16().chain(std::iter::once(0)).collect()
    }

    /// ntdll's `NtSystemDebugControl`, looked up at run time (it is in no import library
    /// every toolchain has).
    fn nt_system_debug_control() -> Result<NtSystemDebugControl, String> {
        use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};
        let ntdll = wide("ntdll.dll");
        // SAFETY: a NUL-terminated module name; ntdll is loaded in every process
        let m = unsafe { GetModuleHandleW(ntdll.as_ptr()) };
        if m.is_null() {
            return Err("lkd(): ntdll.dll is not loaded".into());
        }
        // SAFETY: a NUL-terminated procedure name; the signature is the one phnt declares
        unsafe {
            match GetProcAddress(m, c"NtSystemDebugControl".as_ptr().cast()) {
                Some(f) => Ok(std::mem::transmute::<
                    unsafe extern "system" fn() -> isize,
                    NtSystemDebugControl,
                >(f)),
                None => Err("lkd(): ntdll.dll has no NtSystemDebugControl".into()),
            }
        }
    }

    /// Writes one live kernel dump under `%SystemRoot%\LiveKernelReports`; its path, or why
    /// not (a file that was created for it is removed).
    pub(super) fn take(n: u32) -> Result<PathBuf, String> {
        use std::os::windows::io::AsRawHandle;
        let root = std::env::var_os("SystemRoot").unwrap_or_else(|| r"C:\Windows".into());
        let dir = std::path::Path::new(&root).join("LiveKernelReports");
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("lkd(): cannot create {}: {e}", dir.display()))?;
        let path = super::dump_path(&dir, n);
        let call = nt_system_debug_control()?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| format!("lkd(): cannot create {}: {e}", path.display()))?;
        let mut control = LiveDumpControl {
            version: 1,
            bug_check_code: LIVE_SYSTEM_DUMP,
            bug_check_params: [0; 4],
            dump_file_handle: file.as_raw_handle(),
            cancel_event_handle: std::ptr::null_mut(),
            flags: 0,
            add_pages: 0,
        };
        let mut returned = 0u32;
        // SAFETY: the control block is a SYSDBG_LIVEDUMP_CONTROL of the size given, its file
        // handle open for the call's length; no output buffer
        let status = unsafe {
            call(
                SYSDBG_GET_LIVE_KERNEL_DUMP,
                (&mut control as *mut LiveDumpControl).cast(),
                std::mem::size_of::<LiveDumpControl>() as u32,
                std::ptr::null_mut(),
                0,
                &mut returned,
            )
        };
        drop(file);
        if status < 0 {
            let _ = std::fs::remove_file(&path);
            return Err(format!(
                "lkd(): no live kernel dump: NtSystemDebugControl(SysDbgGetLiveKernelDump) \
                 returned NTSTATUS 0x{:08X}",
                status as u32
            ));
        }
        Ok(path)
    }

    /// This process's token, closed when dropped.
    struct Token(HANDLE);

    impl Drop for Token {
        fn drop(&mut self) {
            // SAFETY: the handle OpenProcessToken gave, closed once
            unsafe { CloseHandle(self.0) };
        }
    }

    /// Enables SeDebugPrivilege, which the live dump needs. AdjustTokenPrivileges succeeds
    /// also when the token lacks the privilege: GetLastError then says ERROR_NOT_ALL_ASSIGNED.
    pub(super) fn enable_debug_privilege() -> Result<(), String> {
        use windows_sys::Win32::Security::{
            AdjustTokenPrivileges, LookupPrivilegeValueW, LUID_AND_ATTRIBUTES,
            SE_PRIVILEGE_ENABLED, TOKEN_ADJUST_PRIVILEGES, TOKEN_PRIVILEGES, TOKEN_QUERY,
        };
        use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};
        let denied = || {
            "lkd() takes a live kernel memory dump, which needs SeDebugPrivilege, and this \
             process cannot enable it: run dtx from an elevated prompt (as Administrator)"
                .to_string()
        };
        let mut h: HANDLE = std::ptr::null_mut();
        // SAFETY: the pseudo handle of this process; h receives a handle closed on drop
        let ok = unsafe {
            OpenProcessToken(
                GetCurrentProcess(),
                TOKEN_ADJUST_PRIVILEGES | TOKEN_QUERY,
                &mut h,
            )
        };
        if ok == 0 {
            return Err(denied());
        }
        let token = Token(h);
        let mut luid = LUID {
            LowPart: 0,
            HighPart: 0,
        };
        let name = wide("SeDebugPrivilege");
        // SAFETY: a NUL-terminated privilege name and a LUID out-parameter
        if unsafe { LookupPrivilegeValueW(std::ptr::null(), name.as_ptr(), &mut luid) } == 0 {
            return Err(denied());
        }
        let privileges = TOKEN_PRIVILEGES {
            PrivilegeCount: 1,
            Privileges: [LUID_AND_ATTRIBUTES {
                Luid: luid,
                Attributes: SE_PRIVILEGE_ENABLED,
            }],
        };
        // SAFETY: an open token with TOKEN_ADJUST_PRIVILEGES and one privilege to enable; no
        // previous state asked for
        let ok = unsafe {
            AdjustTokenPrivileges(
                token.0,
                0,
                &privileges,
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        // SAFETY: no arguments
        if ok == 0 || unsafe { GetLastError() } == ERROR_NOT_ALL_ASSIGNED {
            return Err(denied());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn available() -> LiveDumps {
        LiveDumps {
            unavailable: None,
            ..LiveDumps::new()
        }
    }

    #[test]
    fn one_dump_per_call_site_a_minute() {
        let mut d = available();
        let t0 = Instant::now();
        let ok = |n: u32| Ok(PathBuf::from(format!("d{n}.dmp")));
        assert_eq!(d.fire_with((1, 2), t0, ok), Outcome::Taken("d1.dmp".into()));
        // the same site again within the minute: held back, said once
        let held = d.fire_with((1, 2), t0 + Duration::from_secs(5), |_| panic!("dumped"));
        assert!(
            matches!(&held, Outcome::Limited(Some(w)) if w.contains("5s ago")),
            "{held:?}"
        );
        let again = d.fire_with((1, 2), t0 + Duration::from_secs(6), |_| panic!("dumped"));
        assert_eq!(again, Outcome::Limited(None));
        // another site dumps at once
        assert_eq!(d.fire_with((1, 3), t0, ok), Outcome::Taken("d2.dmp".into()));
        // a minute later the first site dumps again
        assert_eq!(
            d.fire_with((1, 2), t0 + RATE, ok),
            Outcome::Taken("d3.dmp".into())
        );
        // a refusal is said each time it happens, and counts as the site's dump
        assert_eq!(
            d.fire_with((2, 0), t0, |_| Err("refused".into())),
            Outcome::Failed("refused".into())
        );
        assert!(matches!(
            d.fire_with((2, 0), t0, |_| panic!("dumped")),
            Outcome::Limited(_)
        ));
    }

    #[test]
    fn over_a_trace_the_first_firing_says_why_and_none_dumps() {
        let mut d = available();
        d.over_trace();
        let t0 = Instant::now();
        let first = d.fire_with((1, 0), t0, |_| panic!("dumped"));
        assert_eq!(first, Outcome::Unavailable(Some(OVER_TRACE.to_string())));
        assert_eq!(
            d.fire_with((1, 1), t0, |_| panic!("dumped")),
            Outcome::Unavailable(None)
        );
    }

    #[cfg(not(windows))]
    #[test]
    fn not_windows_says_so() {
        let mut d = LiveDumps::new();
        let first = d.fire((0, 0), Instant::now());
        assert_eq!(first, Outcome::Unavailable(Some(NOT_WINDOWS.to_string())));
        // over a trace on this system the reason stays that it is not Windows
        d.over_trace();
        assert_eq!(d.fire((0, 0), Instant::now()), Outcome::Unavailable(None));
        assert!(check_privilege().is_ok());
    }

    #[test]
    fn dump_files_are_named_by_process_and_number() {
        let p = dump_path(std::path::Path::new("reports"), 3);
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let pid = std::process::id().to_string();
        assert!(name.starts_with(&format!("dtx-{pid}-")), "{name}");
        assert!(name.ends_with("-3.dmp"), "{name}");
    }
}
