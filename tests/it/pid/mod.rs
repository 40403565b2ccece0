//! The `pid` provider end to end, on Linux and on Windows: one list of scenarios, run over the
//! target of the OS the tests are built for. The target is the same small C program on both
//! (`add`, `many`, `say`, `leaf`/`leaf2`, a `tick` loop, four threads calling `work`): on Linux
//! compiled here with gcc and traced through ptrace or uprobes (`linux.rs`); on Windows the
//! mingw-built `tests/pid_windows/pidwin.c` traced through the Win32 debugger loop
//! (`windows.rs`, run under Wine by `scripts/windows-check.sh`). What only one OS has (forks and
//! uprobes; DLLs, PDBs and crashes) is tested in its module. Every scenario skips, with a
//! message, where its OS's target cannot be had (no gcc, no ptrace; the programs not built).

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as os;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as os;

use std::io::Read;
use std::process::Output;

use crate::support::cli::{dtx, text, Dtx};
use os::Target;

/// `dtx args`, with `-x pidmode=MODE` first unless `mode` is empty (the OS's one backend).
fn dtx_mode(mode: &str, args: &[&str]) -> Output {
    if mode.is_empty() {
        return dtx(args);
    }
    let m = format!("pidmode={mode}");
    let mut v = vec!["-x", m.as_str()];
    v.extend_from_slice(args);
    dtx(&v)
}

#[test]
fn entry_return_counts_args_and_return_values() {
    let Some(t) = Target::new() else { return };
    let direct = t.run_main("50");
    let script = r#"
        pid$target:a.out:add:entry { @entries = count(); @argsum = sum(arg0); @b = max(arg1); }
        pid$target:a.out:add:return { @returns = count(); @retsum = sum(arg1); }
        pid$target:a.out:many:entry { printf("many %d %d %d %d %d %d %d %d\n", arg0, arg1, arg2, arg3, arg4, arg5, arg6, arg7); }
        pid$target:a.out:main:return { printf("main returns %d from %s`%s\n", arg1, probemod, probefunc); }
        END { printa("entries %@d\n", @entries); printa("returns %@d\n", @returns);
              printa("argsum %@d\n", @argsum); printa("b %@d\n", @b); printa("retsum %@d\n", @retsum); }
    "#;
    for mode in os::MODES {
        let out = dtx_mode(mode, &["-q", "-n", script, "-c", &t.main("50")]);
        let (so, se) = text(&out);
        assert!(out.status.success(), "{mode}: {se}");
        // the target's own output is there, unchanged
        let (direct_out, _) = text(&direct);
        assert!(so.contains(direct_out.trim()), "{mode}: {so}");
        assert_eq!(direct.status.code(), Some(3));
        assert!(so.contains("entries 50\n"), "{mode}: {so}");
        assert!(so.contains("returns 50\n"), "{mode}: {so}");
        assert!(
            so.contains(&format!("argsum {}\n", (0..50).sum::<i32>())),
            "{mode}: {so}"
        );
        assert!(so.contains("b 10\n"), "{mode}: {so}");
        assert!(
            so.contains(&format!(
                "retsum {}\n",
                (0..50).map(|i| i + 10).sum::<i32>()
            )),
            "{mode}: {so}"
        );
        // eight arguments: six (SysV) or four (Win64) in registers, the rest on the stack
        assert!(so.contains("many 1 2 3 4 5 6 7 8\n"), "{mode}: {so}");
        let main = format!("main returns 3 from {}`main\n", os::MODULE);
        assert!(so.contains(&main), "{mode}: {so}");
    }
    // quiet runs do not announce; a non-quiet run tells the exit status
    let out = dtx(&["-n", "pid$target:a.out:say:entry {}", "-c", &t.main("1")]);
    let (_, se) = text(&out);
    assert!(se.contains("exited with status 3"), "{se}");
}

#[test]
fn offsets_copyinstr_and_ustack() {
    let Some(t) = Target::new() else { return };
    // the return probe tells the offset of add's ret; an offset probe there fires as often
    let out = dtx(&[
        "-q",
        "-n",
        "pid$target:a.out:add:return { @[arg0] = count(); } END { printa(\"%x %@d\\n\", @); }",
        "-c",
        &t.main("4"),
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
        &t.main("4"),
    ]);
    let (so, se) = text(&out);
    assert!(so.contains("hits 4\n"), "{so}{se}");
    // inside an instruction (add's `mov rbp, rsp` after its one-byte `push rbp`: both
    // targets are built unoptimised with frame pointers)
    let out = dtx(&[
        "-xerrtags",
        "-n",
        "pid$target:a.out:add:2 {}",
        "-c",
        &t.main("4"),
    ]);
    let (so, se) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{se}");
    assert!(
        se.contains("[D_PROC_ALIGN]") || se.contains("[D_PROC_OFF]"),
        "{se}"
    );
    assert!(
        !so.contains("total"),
        "a started target is killed on a compile error: {so}"
    );
    // past the end, a bad name, an unknown function
    for (d, tag) in [
        ("pid$target:a.out:add:fff", "D_PROC_OFF"),
        ("pid$target:a.out:add:beginning", "D_PROC_NAME"),
        ("pid$target:a.out:nosuchfunc:entry", "D_PROC_FUNC"),
    ] {
        let out = dtx(&["-xerrtags", "-n", &format!("{d} {{}}"), "-c", &t.main("1")]);
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
        &t.main("1"),
    ]);
    let (so, se) = text(&out);
    assert!(so.contains("say(hello pid)\n"), "{so}{se}");
    let frames: Vec<&str> = so
        .lines()
        .map(str::trim)
        .filter(|l| l.contains('`'))
        .collect();
    let m = os::MODULE;
    assert_eq!(frames.first(), Some(&format!("{m}`leaf2").as_str()), "{so}");
    assert!(
        frames
            .get(1)
            .is_some_and(|f| f.starts_with(&format!("{m}`leaf+0x"))),
        "{so}"
    );
    assert!(
        frames
            .get(2)
            .is_some_and(|f| f.starts_with(&format!("{m}`main+0x"))),
        "{so}"
    );
    // every instruction of a function: single-stepped ones too
    let out = dtx(&[
        "-q",
        "-n",
        "pid$target:a.out:add: { @[probename] = count(); } END { printa(\"%s %@d\\n\", @); }",
        "-c",
        &t.main("3"),
    ]);
    let (so, se) = text(&out);
    assert!(
        so.contains("entry 3\n") && so.contains("return 3\n") && so.contains("\n0 3\n"),
        "{so}{se}"
    );
    assert!(so.contains(&format!("\n{off} 3\n")), "{so}");
    assert!(so.contains("total "), "the target ran to its end: {so}");
}

#[test]
fn threads() {
    let Some(t) = Target::new() else { return };
    let prog = t.threads();
    // the entry is emulated (push rbp); the offset-4 probe's instruction is single-stepped,
    // with the other threads held meanwhile
    for mode in os::MODES {
        let out = dtx_mode(
            mode,
            &[
                "-q",
                "-n",
                "pid$target:a.out:work:entry { @t[tid] = count(); @e = count(); } \
                 pid$target:a.out:work:return { @r = count(); } \
                 pid$target:a.out:work:4 { @s = count(); } \
                 END { printa(\"entries %@d\\n\", @e); printa(\"returns %@d\\n\", @r); \
                       printa(\"stepped %@d\\n\", @s); printa(\"tid %@d\\n\", @t); }",
                "-c",
                &prog,
            ],
        );
        let (so, se) = text(&out);
        assert!(out.status.success(), "{mode}: {se}");
        assert!(so.contains("threads done\n"), "{mode}: {so}");
        assert!(so.contains("entries 4000\n"), "{mode}: {so}");
        assert!(so.contains("returns 4000\n"), "{mode}: {so}");
        assert!(so.contains("stepped 4000\n"), "{mode}: {so}");
        assert_eq!(so.matches("tid 1000\n").count(), 4, "{mode}: {so}");
    }
}

#[test]
fn attach_then_exit_leaves_target_running() {
    let Some(t) = Target::new() else { return };
    let (mut child, mut stdout) = t.start_loop(150);
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
    stdout.read_to_string(&mut rest).unwrap();
    assert_eq!(st.code(), Some(7), "{rest}");
    assert!(rest.contains("loop finished"), "{rest}");
}

#[test]
fn started_target_survives_exit() {
    let Some(t) = Target::new() else { return };
    // exit() after three ticks: the started program is let go and finishes
    let out = dtx(&[
        "-q",
        "-n",
        "pid$target:a.out:tick:entry { n++; } pid$target:a.out:tick:entry /n == 3/ { printf(\"three\\n\"); exit(0); }",
        "-c",
        &t.looping(20),
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.contains("three\n"), "{so}");
}

#[test]
fn interrupt_detaches_and_target_finishes() {
    let Some(t) = Target::new() else { return };
    let (mut child, mut stdout) = t.start_loop(300);
    let mut d = Dtx::new(&[
        "-q",
        "-n",
        "pid$target:a.out:tick:entry { @n = count(); } END { printa(\"ticks %@d\\n\", @n); }",
        "-p",
        &child.id().to_string(),
    ]);
    os::interruptible(&mut d);
    let d = d.spawn();
    std::thread::sleep(std::time::Duration::from_millis(800));
    if let Err(why) = os::interrupt(&d) {
        let out = d.wait_with_output().unwrap();
        let _ = child.wait();
        eprintln!(
            "skipping the interrupt: {why}; dtx ended with the target: {}",
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
    stdout.read_to_string(&mut rest).unwrap();
    assert_eq!(st.code(), Some(7), "{rest}");
    assert!(rest.contains("loop finished"), "{rest}");
}

#[test]
fn bad_targets() {
    // no target program is needed: these fail before one would start
    let out = dtx(&["-n", "BEGIN {}", "-c", os::NO_PROGRAM]);
    let (_, se) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{se}");
    let first = se.lines().next().unwrap_or_default();
    let want = format!("dtx: failed to execute {}: ", os::NO_PROGRAM);
    assert!(
        first.starts_with(&want) && first.ends_with(os::NO_PROGRAM_REASON),
        "{se}"
    );
    let out = dtx(&["-n", "BEGIN {}", "-p", "999999"]);
    let (_, se) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{se}");
    assert!(se.starts_with("dtx: failed to grab pid 999999: "), "{se}");
    let out = dtx(&["-xerrtags", "-n", "pid0:::entry {}"]);
    let (_, se) = text(&out);
    assert!(se.contains("[D_PROC_BADPID]"), "{se}");
}
