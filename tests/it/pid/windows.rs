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
