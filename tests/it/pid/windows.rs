//! The `pid` provider on Windows, end to end: the mingw-built programs of `tests/pid_windows/`
//! traced by `dtx -c` / `-p` through the Win32 debugger loop: the target of the shared
//! scenarios (`super`), and what only Windows has (DLLs, PDBs, crashes). Run under Wine by
//! `scripts/pid-windows-check.sh`, which compiles the programs (a test running under Wine cannot
//! call the Linux cross compiler) and names their folder in `DTX_PID_WIN_FIXTURES`; skipped with
//! a message when that is not set.

use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Output, Stdio};

use crate::support::cli;
use cli::{dtx, text, Dtx};

/// One backend: the debugger loop (no `pidmode` to choose).
pub const MODES: [&str; 1] = [""];

/// The main program's module name, as probes and stacks name it.
pub const MODULE: &str = "pidwin.exe";

/// A program that does not exist, and the end of dtx's line about it (Windows' text for the
/// error differs between Windows and Wine, so any).
pub const NO_PROGRAM: &str = "C:\\no\\such\\program.exe";
pub const NO_PROGRAM_REASON: &str = "";

/// The shared scenarios' target on Windows: `pidwin.exe`, whose modes are the scenarios'
/// programs (its main, `threads`, `loop N`).
pub struct Target(PathBuf);

impl Target {
    /// None (after saying why) when the programs are not built.
    pub fn new() -> Option<Target> {
        fixtures().map(Target)
    }

    /// The main program run directly with `args`, untraced.
    pub fn run_main(&self, args: &str) -> Output {
        let p = self.0.join("pidwin.exe");
        Command::new(p)
            .args(args.split_whitespace())
            .output()
            .unwrap()
    }

    /// The `-c` command of the main program with `args`.
    pub fn main(&self, args: &str) -> String {
        prog(&self.0, args)
    }

    /// The `-c` command of four threads calling `work` 1000 times each.
    pub fn threads(&self) -> String {
        prog(&self.0, "threads")
    }

    /// The `-c` command of `n` calls of `tick`, 10 ms apart; it exits 7.
    pub fn looping(&self, n: u32) -> String {
        prog(&self.0, &format!("loop {n}"))
    }

    /// The loop of [`Target::looping`] started untraced, once it printed its first line.
    pub fn start_loop(&self, n: u32) -> (Child, ChildStdout) {
        start_loop(&self.0, &n.to_string())
    }
}

/// A new process group for `dtx`, so that a console control event can be sent to it alone.
pub fn interruptible(dtx: &mut Dtx) {
    use std::os::windows::process::CommandExt;
    const CREATE_NEW_PROCESS_GROUP: u32 = 0x200;
    dtx.command().creation_flags(CREATE_NEW_PROCESS_GROUP);
}

/// Ctrl-Break to `dtx`'s process group (made by [`interruptible`]), as a console sends; an
/// error where there is no console to carry it (headless Wine).
pub fn interrupt(dtx: &Child) -> Result<(), String> {
    const CTRL_BREAK_EVENT: u32 = 1;
    // SAFETY: a console control event to the process group of the dtx we started.
    let sent = unsafe { GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, dtx.id()) } != 0;
    if sent {
        Ok(())
    } else {
        let e = std::io::Error::last_os_error();
        Err(format!("GenerateConsoleCtrlEvent failed ({e})"))
    }
}

/// The folder of the built test programs, or None (after saying why).
fn fixtures() -> Option<PathBuf> {
    let Some(dir) = std::env::var_os("DTX_PID_WIN_FIXTURES") else {
        eprintln!(
            "skipping pid Windows tests: DTX_PID_WIN_FIXTURES is not set \
             (scripts/pid-windows-check.sh builds the test programs and sets it)"
        );
        return None;
    };
    let dir = PathBuf::from(dir);
    if !dir.join("pidwin.exe").is_file() {
        eprintln!(
            "skipping pid Windows tests: {} has no pidwin.exe",
            dir.display()
        );
        return None;
    }
    Some(dir)
}

fn prog(dir: &std::path::Path, args: &str) -> String {
    let p = dir.join("pidwin.exe");
    if args.is_empty() {
        p.display().to_string()
    } else {
        format!("{} {args}", p.display())
    }
}

#[test]
fn entry_count() {
    let Some(dir) = fixtures() else { return };
    let out = dtx(&[
        "-q",
        "-n",
        "pid$target:a.out:add:entry { @n = count(); } END { printa(\"entries %@d\\n\", @n); }",
        "-c",
        &prog(&dir, "50"),
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.contains("entries 50\n"), "{so}{se}");
}

#[test]
fn library_module_probes() {
    let Some(dir) = fixtures() else { return };
    // a function of a DLL the program imports (strlen from msvcrt), named without extension
    let out = dtx(&[
        "-q",
        "-n",
        "pid$target:msvcrt:strlen:entry /copyinstr(arg0) == \"hello pid\"/ { @n = count(); } \
         END { printa(\"strlen %@d\\n\", @n); }",
        "-c",
        &prog(&dir, "1"),
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.contains("strlen 1\n"), "{so}{se}");
}

/// Starts the loop mode of the test program and waits for its first line.
fn start_loop(dir: &std::path::Path, n: &str) -> (Child, ChildStdout) {
    let mut child = Command::new(dir.join("pidwin.exe"))
        .args(["loop", n])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = Vec::new();
    let mut b = [0u8; 1];
    while !first.ends_with(b"\n") {
        std::io::Read::read_exact(&mut stdout, &mut b).unwrap();
        first.push(b[0]);
    }
    assert!(first.starts_with(b"loop started"), "{first:?}");
    (child, stdout)
}

#[test]
fn crashing_target_ends_the_run() {
    let Some(dir) = fixtures() else { return };
    let out = dtx(&[
        "-n",
        "pid$target:a.out:add:entry { printf(\"add %d\", arg1); }",
        "-c",
        &prog(&dir, "crash"),
    ]);
    let (so, se) = text(&out);
    assert!(so.contains("add 2"), "{so}{se}");
    // the access violation's status
    assert!(se.contains("exited with status -1073741819"), "{se}");
}

#[test]
fn dll_loaded_while_tracing() {
    let Some(dir) = fixtures() else { return };
    let lib = dir.join("pidlib.dll");
    if !lib.is_file() {
        eprintln!("skipping: no pidlib.dll in {}", dir.display());
        return;
    }
    // the module does not exist when the script is compiled (-Z); its probes are created at
    // its LOAD_DLL event
    let out = dtx(&[
        "-q",
        "-Z",
        "-n",
        "pid$target:pidlib:libfunc:entry { @c = count(); @s = sum(arg0); } \
         pid$target:pidlib.dll:libfunc:return { @r = sum(arg1); } \
         END { printa(\"calls %@d\\n\", @c); printa(\"args %@d\\n\", @s); printa(\"rets %@d\\n\", @r); }",
        "-c",
        &prog(&dir, &format!("dl {}", lib.display())),
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.contains("dl 63\n"), "{so}");
    assert!(so.contains("calls 7\n"), "{so}{se}");
    assert!(so.contains("args 21\n"), "{so}");
    assert!(so.contains("rets 63\n"), "{so}");
}

#[link(name = "kernel32")]
extern "system" {
    fn GenerateConsoleCtrlEvent(event: u32, group: u32) -> i32;
}

/// The `ustack()` lines of a run's output: indented, naming a module.
fn frames(so: &str) -> Vec<&str> {
    so.lines()
        .filter(|l| l.starts_with("  "))
        .map(str::trim)
        .filter(|l| l.contains('`') || l.contains(".dll") || l.contains(".exe"))
        .collect()
}

#[test]
fn ustack_unwinds_through_code_without_frame_pointers() {
    let Some(dir) = fixtures() else { return };
    let exe = dir.join("unwind.exe");
    if !exe.is_file() {
        eprintln!("skipping: {} was not built", exe.display());
        return;
    }
    // main -> sort_them -> msvcrt's qsort -> cmp, all built without frame pointers: only
    // .pdata/.xdata unwinding reaches main
    let out = dtx(&[
        "-q",
        "-n",
        "pid$target:a.out:cmp:entry /n++ == 0/ { ustack(); }",
        "-c",
        &exe.display().to_string(),
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.contains("sorted 63"), "{so}");
    let f = frames(&so);
    assert!(
        f.first().is_some_and(|l| l.starts_with("unwind.exe`cmp")),
        "{so}"
    );
    let crt = f
        .iter()
        .position(|l| l.to_ascii_lowercase().starts_with("msvcrt"));
    let sort = f
        .iter()
        .position(|l| l.starts_with("unwind.exe`sort_them+0x"));
    let main = f.iter().position(|l| l.starts_with("unwind.exe`main+0x"));
    assert!(crt.is_some() && sort.is_some() && main.is_some(), "{so}");
    assert!(crt < sort && sort < main, "{so}");
}

/// The clang-built, stripped copy of pidwin.exe and its PDB (the scripts build them when clang
/// and lld are installed).
fn pdb_program(dir: &std::path::Path) -> Option<(PathBuf, PathBuf)> {
    let exe = dir.join("pidwin_pdb.exe");
    let pdb = dir.join("pidwin_pdb.pdb");
    if exe.is_file() && pdb.is_file() {
        Some((exe, pdb))
    } else {
        eprintln!(
            "skipping PDB test: {} was not built (clang and lld are needed)",
            exe.display()
        );
        None
    }
}

#[test]
fn pdb_names_probes_of_a_stripped_program() {
    let Some(dir) = fixtures() else { return };
    let Some((exe, _pdb)) = pdb_program(&dir) else {
        return;
    };
    // no COFF symbols, no exports: add, leaf and leaf2 are known from the PDB beside the image
    let bytes = std::fs::read(&exe).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    assert!(dtx::symbols::pe::functions(&file)
        .iter()
        .all(|f| f.name != "add" && f.name != "leaf2"));
    let script = "pid$target:a.out:add:entry { @e = count(); @a = sum(arg0); }
        pid$target:a.out:add:return { @r = count(); @v = sum(arg1); }
        pid$target:a.out:leaf2:entry { printf(\"in %s`%s\\n\", probemod, probefunc); ustack(); }
        END { printa(\"entries %@d args %@d\\n\", @e, @a); printa(\"returns %@d values %@d\\n\", @r, @v); }";
    let out = dtx(&["-q", "-n", script, "-c", &format!("{} 20", exe.display())]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(
        so.contains(&format!("entries 20 args {}\n", (0..20).sum::<i32>())),
        "{so}{se}"
    );
    assert!(
        so.contains(&format!(
            "returns 20 values {}\n",
            (0..20).map(|i| i + 10).sum::<i32>()
        )),
        "{so}"
    );
    assert!(so.contains("in pidwin_pdb.exe`leaf2\n"), "{so}");
    let f = frames(&so);
    let leaf2 = f.iter().position(|l| *l == "pidwin_pdb.exe`leaf2");
    let leaf = f
        .iter()
        .position(|l| l.starts_with("pidwin_pdb.exe`leaf+0x"));
    let main = f
        .iter()
        .position(|l| l.starts_with("pidwin_pdb.exe`main+0x"));
    assert!(
        leaf2 == Some(0) && leaf == Some(1) && main == Some(2),
        "{so}"
    );
}

#[test]
fn pdb_found_on_the_symbol_path() {
    let Some(dir) = fixtures() else { return };
    let Some((exe, pdb)) = pdb_program(&dir) else {
        return;
    };
    // the image alone in a folder: its recorded PDB path (C:\build\...) does not exist
    let alone = tempfile::tempdir().unwrap();
    let copy = alone.path().join("pidwin_pdb.exe");
    std::fs::copy(&exe, &copy).unwrap();
    let run = |symbol_path: Option<&str>| {
        let d = Dtx::new(&[
            "-q",
            "-n",
            "pid$target:a.out:add:entry { @[probefunc] = count(); }",
            "-c",
            &format!("{} 4", copy.display()),
        ])
        .env_remove("_NT_ALT_SYMBOL_PATH")
        .env_remove("_NT_SYMBOL_PATH");
        match symbol_path {
            Some(p) => d.env("_NT_SYMBOL_PATH", p),
            None => d,
        }
        .output()
    };
    let out = run(None);
    let (_, se) = text(&out);
    assert!(
        !out.status.success() && se.contains("failed to lookup 'add'"),
        "{se}"
    );
    // a symbol server's downstream store holding it under name.pdb/<GUID><age>/
    let bytes = std::fs::read(&copy).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    let id = dtx::symbols::pdb::image_pdb_id(&file).unwrap();
    let store = tempfile::tempdir().unwrap();
    let place = store.path().join("pidwin_pdb.pdb").join(id.store_key());
    std::fs::create_dir_all(&place).unwrap();
    std::fs::copy(&pdb, place.join("pidwin_pdb.pdb")).unwrap();
    let sp = format!(
        "{};srv*{}*https://msdl.microsoft.com/download/symbols",
        alone.path().display(),
        store.path().display()
    );
    let out = run(Some(&sp));
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.contains("add") && so.contains(" 4\n"), "{so}");
}

// ---------------------------------------------------------------------------------------------
// The third reading of the Windows code (issue 42): a `-p` target outlives dtx however dtx ends,
// with every int3 put back; a 32-bit (WOW64) program is refused with words that say why.
//
// The two exit tests run their dtx side in a child: this test binary again, with
// `DTX_WIN3_CHILD` naming the target's pid, holding it with the library's debugger loop (the one
// `dtx -p` runs) and then ending as dtx would: the console handler Windows runs at a console
// close or a Ctrl-C, then ExitProcess (what the default handler does), its debugger thread still
// holding the process.

const WIN3_CHILD: &str = "DTX_WIN3_CHILD";
const CTRL_C_EVENT: u32 = 0;
const CTRL_CLOSE_EVENT: u32 = 2;
/// ExitProcess's code after the default handler's Ctrl-C.
const STATUS_CONTROL_C_EXIT: i32 = 0xC000_013Au32 as i32;

#[link(name = "kernel32")]
extern "system" {
    fn GetModuleHandleW(name: *const u16) -> *mut std::ffi::c_void;
    fn GetProcAddress(m: *mut std::ffi::c_void, name: *const u8) -> *const std::ffi::c_void;
    fn OpenProcess(access: u32, inherit: i32, pid: u32) -> *mut std::ffi::c_void;
    fn ReadProcessMemory(
        h: *mut std::ffi::c_void,
        at: *const std::ffi::c_void,
        buf: *mut std::ffi::c_void,
        len: usize,
        got: *mut usize,
    ) -> i32;
    fn CloseHandle(h: *mut std::ffi::c_void) -> i32;
}

/// The address of `Sleep` (what `pidwin loop` calls between ticks), the same in every process
/// of the session: system DLLs are mapped at one base for all.
fn sleep_addr() -> u64 {
    let k32: Vec<u16> = "kernel32.dll".encode_utf16().chain(Some(0)).collect();
    // SAFETY: NUL-terminated names; kernel32 is loaded in every process
    unsafe { GetProcAddress(GetModuleHandleW(k32.as_ptr()), c"Sleep".as_ptr().cast()) as u64 }
}

/// 16 bytes at `at` in process `pid`, read through a handle of our own.
fn remote_bytes(pid: u32, at: u64) -> Option<[u8; 16]> {
    const PROCESS_VM_READ: u32 = 0x10;
    let mut b = [0u8; 16];
    // SAFETY: plain calls with a buffer of the size given; the handle is closed
    unsafe {
        let h = OpenProcess(PROCESS_VM_READ, 0, pid);
        if h.is_null() {
            return None;
        }
        let mut got = 0;
        let ok = ReadProcessMemory(h, at as *const _, b.as_mut_ptr().cast(), 16, &mut got);
        CloseHandle(h);
        (ok != 0 && got == 16).then_some(b)
    }
}

/// The same 16 bytes in this process: what the target's are when nothing is planted.
fn local_bytes(at: u64) -> [u8; 16] {
    // SAFETY: code of a loaded system DLL, readable
    unsafe { std::ptr::read_unaligned(at as *const [u8; 16]) }
}

/// Runs this test again in a child with `DTX_WIN3_CHILD=pid`; its output.
fn win3_child(test: &str, pid: u32) -> Output {
    let path = module_path!().split_once("::").map_or("", |(_, p)| p);
    Command::new(std::env::current_exe().unwrap())
        .args([
            &format!("{path}::{test}"),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(WIN3_CHILD, pid.to_string())
        .output()
        .unwrap()
}

fn win3_child_pid() -> Option<u32> {
    std::env::var(WIN3_CHILD).ok()?.parse().ok()
}

/// The child's side of a console close while the target runs: an int3 on `Sleep`, a thread of
/// the target stopped at it, the handler run on a thread of its own while the debugger thread
/// goes on waiting (as the run's loop does), then ExitProcess.
fn win3_close_child(pid: u32) -> ! {
    use dtx::sources::debugger::windows::{self as dbg, WindowsTarget};
    use dtx::sources::debugger::{DebugEvent, Stop, TargetProcess};
    let at = sleep_addr();
    let mut t = WindowsTarget::attach(pid, None).unwrap();
    assert!(t.write_code(at, &[0xcc]));
    println!("child: planted {:?}", dbg::planted_bytes(pid));
    t.resume_all();
    let until = dbg::monotonic_ns() + 10_000_000_000;
    loop {
        match t.wait(Some(until)) {
            DebugEvent::Stopped {
                stop: Stop::Trap, ..
            } => break,
            DebugEvent::Stopped { tid, stop } => {
                let sig = matches!(stop, Stop::Signal(_)) as i32;
                t.resume(tid, sig)
            }
            DebugEvent::Exited(st) => panic!("the target exited: {st:?}"),
            DebugEvent::Timeout if dbg::monotonic_ns() > until => panic!("no hit of Sleep"),
            _ => {}
        }
    }
    println!("child: a thread is stopped at the int3");
    let handler = std::thread::spawn(|| {
        let t0 = std::time::Instant::now();
        let r = dbg::console_event(CTRL_CLOSE_EVENT);
        (r, t0.elapsed())
    });
    while !handler.is_finished() {
        let _ = t.wait(Some(dbg::monotonic_ns() + 20_000_000));
    }
    let (r, took) = handler.join().unwrap();
    println!(
        "child: handler returned {r} after {} ms; planted now {:?}",
        took.as_millis(),
        dbg::planted_bytes(pid)
    );
    std::mem::forget(t);
    std::process::exit(STATUS_CONTROL_C_EXIT)
}

/// The child's side of a Ctrl-C while the programs compile: the target grabbed and held at
/// the loader's break-in, an int3 planted (the pid provider's, before the first pump), the
/// handler, then ExitProcess without any detach.
fn win3_interrupt_child(pid: u32) -> ! {
    use dtx::sources::debugger::windows::{self as dbg, WindowsTarget};
    use dtx::sources::debugger::TargetProcess;
    let at = sleep_addr();
    let t = WindowsTarget::attach(pid, None).unwrap();
    assert!(t.write_code(at, &[0xcc]));
    println!("child: held, planted {:?}", dbg::planted_bytes(pid));
    let r = dbg::console_event(CTRL_C_EVENT);
    println!("child: handler returned {r}");
    std::mem::forget(t);
    std::process::exit(STATUS_CONTROL_C_EXIT)
}

/// The target's end after the child's: it ran `pidwin loop` to its own end (exit 7), and its
/// `Sleep` is what this process's is.
fn win3_target_lived(mut target: Child, mut stdout: ChildStdout, child: &Output, at: u64) {
    let (so, se) = text(child);
    assert_eq!(child.status.code(), Some(STATUS_CONTROL_C_EXIT), "{so}{se}");
    assert!(
        so.contains("child: planted [(") || so.contains("child: held, planted [("),
        "{so}{se}"
    );
    let pid = target.id();
    let now = remote_bytes(pid, at);
    assert_eq!(
        now,
        Some(local_bytes(at)),
        "the target's Sleep after dtx ended\n{so}{se}"
    );
    let st = target.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert_eq!(
        st.code(),
        Some(7),
        "the target did not live on: {rest}\n{so}{se}"
    );
    assert!(rest.contains("loop finished"), "{rest}");
}

#[test]
fn win3_p_target_survives_a_console_close_with_its_bytes_restored() {
    if let Some(pid) = win3_child_pid() {
        win3_close_child(pid);
    }
    let Some(dir) = fixtures() else { return };
    let (target, stdout) = start_loop(&dir, "400");
    let child = win3_child(
        "win3_p_target_survives_a_console_close_with_its_bytes_restored",
        target.id(),
    );
    let (so, _) = text(&child);
    // the handler let the debugger thread answer the stopped thread and detach in time
    assert!(so.contains("handler returned false"), "{so}");
    assert!(so.contains("planted now []"), "{so}");
    win3_target_lived(target, stdout, &child, sleep_addr());
}

#[test]
fn win3_p_target_survives_ctrl_c_while_the_program_compiles() {
    if let Some(pid) = win3_child_pid() {
        win3_interrupt_child(pid);
    }
    let Some(dir) = fixtures() else { return };
    let (target, stdout) = start_loop(&dir, "400");
    let child = win3_child(
        "win3_p_target_survives_ctrl_c_while_the_program_compiles",
        target.id(),
    );
    let (so, _) = text(&child);
    assert!(so.contains("handler returned false"), "{so}");
    win3_target_lived(target, stdout, &child, sleep_addr());
}

/// The 32-bit build of pidwin.c, when it was built and this Wine (or Windows) runs it.
fn wow64_program(dir: &std::path::Path) -> Option<PathBuf> {
    let p = dir.join("pidwin32.exe");
    if !p.is_file() {
        eprintln!(
            "skipping: no pidwin32.exe in {} (no i686 mingw gcc)",
            dir.display()
        );
        return None;
    }
    let ran = Command::new(&p).arg("1").output().ok();
    if ran.as_ref().and_then(|o| o.status.code()) != Some(3) {
        eprintln!("skipping: 32-bit programs do not run here (Wine without wine32?): {ran:?}");
        return None;
    }
    Some(p)
}

const WOW64_WORDS: &str = "is a 32-bit (x86) process running under WOW64: dtx's pid and fpid \
                           providers trace 64-bit processes only";

#[test]
fn win3_wow64_program_is_refused_by_pid_c() {
    let Some(dir) = fixtures() else { return };
    let Some(p) = wow64_program(&dir) else { return };
    let out = dtx(&[
        "-n",
        "pid$target:a.out:add:entry {}",
        "-c",
        &format!("{} 3", p.display()),
    ]);
    let (so, se) = text(&out);
    assert!(!out.status.success(), "{so}{se}");
    assert!(se.contains(WOW64_WORDS), "{se}");
}

#[test]
fn win3_wow64_process_is_refused_by_pid_and_fpid_p() {
    let Some(dir) = fixtures() else { return };
    let Some(p) = wow64_program(&dir) else { return };
    let mut child = Command::new(&p)
        .args(["loop", "300"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut b = [0u8; 13];
    std::io::Read::read_exact(&mut stdout, &mut b).unwrap();
    let pid = child.id().to_string();
    for probe in [
        "pid$target:a.out:tick:entry {}",
        "fpid$target:a.out:tick:entry {}",
    ] {
        let out = dtx(&["-n", probe, "-p", &pid]);
        let (so, se) = text(&out);
        assert!(!out.status.success(), "{probe}: {so}{se}");
        assert!(se.contains(WOW64_WORDS), "{probe}: {se}");
    }
    // refused before anything was done to it: it runs to its own end
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(7));
}

/// A DLL's types (issue 43): rings.exe has no PDB and imports ringlib_pdb.dll, which has one,
/// so `args[]` of the DLL's `pid` probes are typed from the DLL's prototypes and
/// ``pid`RING`` names the DLL's struct, as ``pid`_TEB`` names ntdll's on Windows.
#[test]
fn pdb_types_of_a_dll_of_the_target() {
    let Some(dir) = fixtures() else { return };
    let exe = dir.join("rings.exe");
    if !exe.is_file() || !dir.join("ringlib_pdb.pdb").is_file() {
        eprintln!(
            "skipping the DLL types test: {} was not built (clang and lld are needed)",
            exe.display()
        );
        return;
    }
    let script = "pid$target:ringlib_pdb:ring_size:entry { print(*args[0]); printf(\"\\n\");
            r = (userland pid`RING *)arg0;
            printf(\"size %d level %d wrapped %d\\n\", r->size, r->level, r->wrapped); }
        pid$target:ringlib_pdb:ring_self:return { printf(\"self size %d\\n\", args[1]->size); }";
    let out = dtx(&["-q", "-n", script, "-c", &exe.display().to_string()]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.contains("size 12 level 9 wrapped 1\n"), "{so}{se}");
    assert!(so.contains("self size 12\n"), "{so}{se}");
    for line in [
        "struct _RING {",
        "    int size = 0xc",
        "    unsigned int wrapped :1 = 0x1",
        "    unsigned int level :4 = 0x9",
    ] {
        assert!(
            so.lines().any(|l| l == line),
            "no line {line:?} in:\n{so}{se}"
        );
    }
    // a name no PDB of the target has: the refusal says which PDBs were read and which
    // images have none here
    let script = "pid$target:a.out:main:entry { t = (userland pid`NO_SUCH_TYPE *)arg0; }";
    let out = dtx(&["-q", "-n", script, "-c", &exe.display().to_string()]);
    let (so, se) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{so}{se}");
    assert!(
        se.contains(
            "failed to resolve type pid`NO_SUCH_TYPE: Unknown type name (the PDBs of \
             ringlib_pdb.dll have no type of that name; no PDB was found for "
        ) && se.contains(" of its images (rings.exe, ntdll.dll, "),
        "{se}"
    );
}

/// The target's own types from its PDB (issue 43): `args[0]` of a `pid` entry probe typed from
/// the function's prototype, so that `print(*args[0])` prints the struct as dtrace prints
/// CTF-typed data (the PDB's layout, its typedef names, bit-fields with their widths), and a
/// `(userland pid`SHAPE *)` cast of `arg0` reading the same members; at `return`, `args[1]`
/// typed from the prototype's return type.
#[test]
fn pdb_types_type_args_and_casts() {
    let Some(dir) = fixtures() else { return };
    let exe = dir.join("shapes_pdb.exe");
    if !exe.is_file() || !dir.join("shapes_pdb.pdb").is_file() {
        eprintln!(
            "skipping PDB types test: {} was not built (clang and lld are needed)",
            exe.display()
        );
        return;
    }
    let script = "pid$target:a.out:area:entry { print(*args[0]); printf(\"\\n\");
            s = (userland pid`SHAPE *)arg0;
            printf(\"id %d count %d kind %d flag %d colour %d name %s\\n\", s->id, s->count,
                s->kind, s->flag, s->colour, stringof(s->name)); }";
    let out = dtx(&["-q", "-n", script, "-c", &exe.display().to_string()]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(
        so.contains("id 7 count 9 kind 5 flag 1 colour 40 name box\n"),
        "{so}{se}"
    );
    for line in [
        "struct _SHAPE {",
        "    int id = 0x7",
        "    long count = 0x9",
        "    struct _INNER inner = {",
        "        short a = 0x3",
        "    unsigned int flag :1 = 0x1",
        "    unsigned int kind :3 = 0x5",
        "    enum _COLOUR colour = BLUE",
    ] {
        assert!(
            so.lines().any(|l| l == line),
            "no line {line:?} in:\n{so}{se}"
        );
    }
    // at `return`, args[1] has the prototype's return type: an enum, a pointer to the struct
    let script = "pid$target:a.out:colour_of:return { printf(\"colour \"); print(args[1]);
            printf(\"\\n\"); }
        pid$target:a.out:self_of:return { printf(\"self id %d kind %d\\n\", args[1]->id,
            args[1]->kind); }";
    let out = dtx(&["-q", "-n", script, "-c", &exe.display().to_string()]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.contains("self id 7 kind 5\n"), "{so}{se}");
    assert!(
        so.lines()
            .any(|l| l.starts_with("colour ") && l.contains("BLUE")),
        "{so}{se}"
    );
}
