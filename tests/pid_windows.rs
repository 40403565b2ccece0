//! The `pid` provider on Windows, end to end: the mingw-built programs of `tests/pid_windows/`
//! traced by `dtx -c` / `-p` through the Win32 debugger loop. Run under Wine by
//! `scripts/pid-windows-check.sh`, which compiles the programs (a test running under Wine cannot
//! call the Linux cross compiler) and names their folder in `DTX_PID_WIN_FIXTURES`; skipped with
//! a message when that is not set.
#![cfg(windows)]

use std::path::PathBuf;
use std::process::{Command, Stdio};

#[path = "support/cli.rs"]
mod cli;
use cli::{dtx, text, Dtx};

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
fn entry_return_counts_args_and_return_values() {
    let Some(dir) = fixtures() else { return };
    let direct = Command::new(dir.join("pidwin.exe"))
        .arg("50")
        .output()
        .unwrap();
    let script = r#"
        pid$target:a.out:add:entry { @entries = count(); @argsum = sum(arg0); @b = max(arg1); }
        pid$target:a.out:add:return { @returns = count(); @retsum = sum(arg1); }
        pid$target:a.out:many:entry { printf("many %d %d %d %d %d %d %d %d\n", arg0, arg1, arg2, arg3, arg4, arg5, arg6, arg7); }
        pid$target:a.out:main:return { printf("main returns %d from %s`%s\n", arg1, probemod, probefunc); }
        END { printa("entries %@d\n", @entries); printa("returns %@d\n", @returns);
              printa("argsum %@d\n", @argsum); printa("b %@d\n", @b); printa("retsum %@d\n", @retsum); }
    "#;
    let out = dtx(&["-q", "-n", script, "-c", &prog(&dir, "50")]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    // the target's own output is there, unchanged
    let direct_out = String::from_utf8_lossy(&direct.stdout).replace("\r\n", "\n");
    assert!(so.contains(direct_out.trim()), "{so}");
    assert_eq!(direct.status.code(), Some(3));
    assert!(so.contains("entries 50\n"), "{so}");
    assert!(so.contains("returns 50\n"), "{so}");
    assert!(
        so.contains(&format!("argsum {}\n", (0..50).sum::<i32>())),
        "{so}"
    );
    assert!(so.contains("b 10\n"), "{so}");
    assert!(
        so.contains(&format!(
            "retsum {}\n",
            (0..50).map(|i| i + 10).sum::<i32>()
        )),
        "{so}"
    );
    // Win64: four in registers, the rest on the stack above the home space
    assert!(so.contains("many 1 2 3 4 5 6 7 8\n"), "{so}");
    assert!(so.contains("main returns 3 from pidwin.exe`main\n"), "{so}");
    // a non-quiet run tells the exit status
    let out = dtx(&[
        "-n",
        "pid$target:a.out:say:entry {}",
        "-c",
        &prog(&dir, "1"),
    ]);
    let (_, se) = text(&out);
    assert!(se.contains("exited with status 3"), "{se}");
}

#[test]
fn offsets_copyinstr_and_ustack() {
    let Some(dir) = fixtures() else { return };
    // the return probe tells the offset of add's ret; an offset probe there fires as often
    let out = dtx(&[
        "-q",
        "-n",
        "pid$target:a.out:add:return { @[arg0] = count(); } END { printa(\"%x %@d\\n\", @); }",
        "-c",
        &prog(&dir, "4"),
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    let line = so
        .lines()
        .find(|l| l.ends_with(" 4"))
        .unwrap_or_else(|| panic!("{so}{se}"))
        .to_string();
    let off = line.split_whitespace().next().unwrap().to_string();
    let out = dtx(&[
        "-q",
        "-n",
        &format!(
            "pid$target:a.out:add:{off} {{ @n = count(); }} END {{ printa(\"hits %@d\\n\", @n); }}"
        ),
        "-c",
        &prog(&dir, "4"),
    ]);
    let (so, se) = text(&out);
    assert!(so.contains("hits 4\n"), "{so}{se}");
    // every instruction of add: single-stepped ones too
    let out = dtx(&[
        "-q",
        "-n",
        "pid$target:a.out:add: { @[probename] = count(); } END { printa(\"%s %@d\\n\", @); }",
        "-c",
        &prog(&dir, "3"),
    ]);
    let (so, se) = text(&out);
    assert!(
        so.contains("entry 3\n") && so.contains("return 3\n") && so.contains("\n0 3\n"),
        "{so}{se}"
    );
    assert!(so.contains(&format!("\n{off} 3\n")), "{so}");
    assert!(so.contains("total "), "the target ran to its end: {so}");
    // bad offsets, names, functions
    for (d, tag) in [
        ("pid$target:a.out:add:fff", "D_PROC_OFF"),
        ("pid$target:a.out:add:beginning", "D_PROC_NAME"),
        ("pid$target:a.out:nosuchfunc:entry", "D_PROC_FUNC"),
    ] {
        let out = dtx(&[
            "-xerrtags",
            "-n",
            &format!("{d} {{}}"),
            "-c",
            &prog(&dir, "1"),
        ]);
        let (_, se) = text(&out);
        assert!(se.contains(&format!("[{tag}]")), "{d}: {se}");
    }
    // copyinstr of a string argument, ustack with names
    let out = dtx(&[
        "-q",
        "-n",
        "pid$target:a.out:say:entry { printf(\"say(%s)\\n\", copyinstr(arg0)); } \
         pid$target:a.out:leaf2:entry { ustack(); }",
        "-c",
        &prog(&dir, "1"),
    ]);
    let (so, se) = text(&out);
    assert!(so.contains("say(hello pid)\n"), "{so}{se}");
    let frames: Vec<&str> = so
        .lines()
        .map(str::trim)
        .filter(|l| l.contains('`'))
        .collect();
    assert_eq!(frames.first(), Some(&"pidwin.exe`leaf2"), "{so}");
    assert!(
        frames
            .get(1)
            .is_some_and(|f| f.starts_with("pidwin.exe`leaf+0x")),
        "{so}"
    );
    assert!(
        frames
            .get(2)
            .is_some_and(|f| f.starts_with("pidwin.exe`main+0x")),
        "{so}"
    );
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
fn start_loop(dir: &std::path::Path, n: &str) -> (std::process::Child, std::process::ChildStdout) {
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
fn attach_then_exit_leaves_target_running() {
    let Some(dir) = fixtures() else { return };
    let (mut child, mut stdout) = start_loop(&dir, "150");
    let pid = child.id().to_string();
    let out = dtx(&[
        "-q",
        "-n",
        "pid$target:a.out:tick:entry { printf(\"tick %d\\n\", arg0); n++; } \
         pid$target:a.out:tick:entry /n == 3/ { exit(0); }",
        "-p",
        &pid,
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert_eq!(so.matches("tick ").count(), 3, "{so}");
    // detached: the program finishes on its own with its own status
    let st = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert_eq!(st.code(), Some(7), "{rest}");
    assert!(rest.contains("loop finished"), "{rest}");
}

#[test]
fn started_target_survives_exit() {
    let Some(dir) = fixtures() else { return };
    // exit() after three ticks: the started program is let go and finishes
    let out = dtx(&[
        "-q",
        "-n",
        "pid$target:a.out:tick:entry { n++; } pid$target:a.out:tick:entry /n == 3/ { printf(\"three\\n\"); exit(0); }",
        "-c",
        &prog(&dir, "loop 20"),
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.contains("three\n"), "{so}");
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
fn bad_targets() {
    let out = dtx(&["-n", "BEGIN {}", "-c", "C:\\no\\such\\program.exe"]);
    let (_, se) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{se}");
    assert!(
        se.lines()
            .next()
            .is_some_and(|l| l.starts_with("dtx: failed to execute C:\\no\\such\\program.exe: ")),
        "{se}"
    );
    let out = dtx(&["-n", "BEGIN {}", "-p", "999999"]);
    let (_, se) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{se}");
    assert!(se.starts_with("dtx: failed to grab pid 999999: "), "{se}");
}

#[test]
fn threads() {
    let Some(dir) = fixtures() else { return };
    // the entry is emulated (push rbp); the offset-4 probe's instruction is single-stepped,
    // with the other threads held meanwhile
    let out = dtx(&[
        "-q",
        "-n",
        "pid$target:a.out:work:entry { @t[tid] = count(); @e = count(); } \
         pid$target:a.out:work:return { @r = count(); } \
         pid$target:a.out:work:4 { @s = count(); } \
         END { printa(\"entries %@d\\n\", @e); printa(\"returns %@d\\n\", @r); \
               printa(\"stepped %@d\\n\", @s); printa(\"tid %@d\\n\", @t); }",
        "-c",
        &prog(&dir, "threads"),
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.contains("threads done\n"), "{so}");
    assert!(so.contains("entries 4000\n"), "{so}");
    assert!(so.contains("returns 4000\n"), "{so}");
    assert!(so.contains("stepped 4000\n"), "{so}");
    assert_eq!(so.matches("tid 1000\n").count(), 4, "{so}");
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

#[test]
fn interrupt_detaches_and_target_finishes() {
    use std::os::windows::process::CommandExt;
    let Some(dir) = fixtures() else { return };
    let (mut child, mut stdout) = start_loop(&dir, "300");
    const CREATE_NEW_PROCESS_GROUP: u32 = 0x200;
    const CTRL_BREAK_EVENT: u32 = 1;
    let d = Command::new(env!("CARGO_BIN_EXE_dtx"))
        .args([
            "-q",
            "-n",
            "pid$target:a.out:tick:entry { @n = count(); } END { printa(\"ticks %@d\\n\", @n); }",
        ])
        .args(["-p", &child.id().to_string()])
        .creation_flags(CREATE_NEW_PROCESS_GROUP)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    // SAFETY: a console control event to the process group of the dtx we started.
    let sent = unsafe { GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, d.id()) } != 0;
    if !sent {
        // headless Wine has no console to carry the event: the run ends with the target
        let e = std::io::Error::last_os_error();
        let out = d.wait_with_output().unwrap();
        let _ = child.wait();
        eprintln!(
            "skipping the Ctrl-Break part: GenerateConsoleCtrlEvent failed ({e}); \
             dtx ended with the target: {}",
            text(&out).0.trim()
        );
        return;
    }
    let out = d.wait_with_output().unwrap();
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    let n: u64 = so
        .lines()
        .find_map(|l| l.strip_prefix("ticks "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{so}{se}"));
    // interrupted while the target still ran
    assert!(n > 0 && n < 300, "{so}");
    // the breakpoints are gone and the target runs to its own end
    let st = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert_eq!(st.code(), Some(7), "{rest}");
    assert!(rest.contains("loop finished"), "{rest}");
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
