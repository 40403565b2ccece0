//! Cost of one pid probe hit on Linux: the target stops at the breakpoint, the clause runs,
//! the target resumes. A C program calls `hit()` N times; the time of `dtx -c 'prog N'` for
//! N calls less the time for 0 calls, divided by N, is the cost per hit. Measured for an empty
//! clause (the debugger loop alone), for `count()`, for an aggregation on an argument, at a
//! `return` (emulated `ret`), at an offset whose instruction is single-stepped, and for gdb
//! with a breakpoint command list on the same program. Best of three runs each.
//!
//! `cargo bench --bench pid_hit` (needs gcc; gdb for its line; ptrace allowed).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const PROG: &str = r#"
#include <stdlib.h>
__attribute__((noinline)) int hit(int x) { int y = x * 3; return y + 1; }
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 0, s = 0;
    for (long i = 0; i < n; i++) s += hit((int)i);
    return s == 42;
}
"#;

/// The machine's floor: a C tracer that only waits for an int3 trap of its child, reads and
/// writes its registers and continues it (no probe lookup, no clause).
const FLOOR: &str = r#"
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <sys/user.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <signal.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    pid_t p = fork();
    if (p == 0) { ptrace(PTRACE_TRACEME, 0, 0, 0); raise(SIGSTOP);
        for (long i = 0; i < n; i++) __asm__ volatile("int3"); _exit(0); }
    int st; waitpid(p, &st, 0);
    struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
    ptrace(PTRACE_CONT, p, 0, 0);
    for (;;) { waitpid(p, &st, __WALL); if (WIFEXITED(st)) break;
        struct user_regs_struct r; ptrace(PTRACE_GETREGS, p, 0, &r); ptrace(PTRACE_SETREGS, p, 0, &r);
        ptrace(PTRACE_CONT, p, 0, 0); }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.2f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n / 1000.0);
    return 0;
}
"#;

fn floor(dir: &Path) -> Option<f64> {
    let c = dir.join("floor.c");
    std::fs::write(&c, FLOOR).ok()?;
    let exe = dir.join("floor");
    Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&c)
        .status()
        .ok()?;
    let mut best = f64::MAX;
    for _ in 0..3 {
        let out = Command::new(&exe).arg("200000").output().ok()?;
        best = best.min(String::from_utf8_lossy(&out.stdout).trim().parse().ok()?);
    }
    Some(best)
}

fn best_of_3(f: &dyn Fn() -> bool) -> Option<f64> {
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        if !f() {
            return None;
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    Some(best)
}

fn dtx_run(prog: &Path, n: u64, script: &str) -> bool {
    Command::new(env!("CARGO_BIN_EXE_dtx"))
        .args(["-q", "-n", script, "-c", &format!("{} {n}", prog.display())])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn gdb_run(prog: &Path, n: u64, cmds: &Path) -> bool {
    Command::new("gdb")
        .args(["-batch", "-nx", "-x"])
        .arg(cmds)
        .arg("--args")
        .arg(prog)
        .arg(n.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn per_hit(n: u64, run: &dyn Fn(u64) -> bool) -> Option<f64> {
    let base = best_of_3(&|| run(0))?;
    let full = best_of_3(&|| run(n))?;
    Some((full - base) / n as f64 * 1e6)
}

fn build(dir: &Path) -> Option<PathBuf> {
    let c = dir.join("hit.c");
    std::fs::write(&c, PROG).ok()?;
    let exe = dir.join("hit");
    let ok = Command::new("gcc")
        .args([
            "-O0",
            "-fno-omit-frame-pointer",
            "-fcf-protection=none",
            "-o",
        ])
        .arg(&exe)
        .arg(&c)
        .status()
        .ok()?
        .success();
    ok.then_some(exe)
}

fn main() {
    if !cfg!(target_os = "linux") {
        println!("pid_hit: the pid provider's debugger loop is measured on Linux only");
        return;
    }
    let Ok(dir) = tempfile::tempdir() else { return };
    let Some(prog) = build(dir.path()) else {
        println!("pid_hit: skipped (gcc is not available)");
        return;
    };
    // `cargo test` runs this without `--bench`: a short smoke run only
    let full = std::env::args().any(|a| a == "--bench");
    if !full {
        let ok = dtx_run(&prog, 100, "pid$target:a.out:hit:entry { @c = count(); }");
        println!("pid_hit: smoke run {}", if ok { "ok" } else { "failed" });
        return;
    }
    let n = 200_000;
    println!("pid_hit: {n} calls of hit(); µs per hit (best of 3, less the run with 0 calls)");
    let cases: [(&str, &str); 5] = [
        (
            "entry (emulated push), empty clause",
            "pid$target:a.out:hit:entry {}",
        ),
        (
            "entry, @c = count()",
            "pid$target:a.out:hit:entry { @c = count(); }",
        ),
        (
            "entry, @[arg0 % 16] = sum(arg0)",
            "pid$target:a.out:hit:entry { @[arg0 % 16] = sum(arg0); }",
        ),
        (
            "return (emulated ret), count()",
            "pid$target:a.out:hit:return { @c = count(); }",
        ),
        (
            "offset 4 (single-stepped), count()",
            "pid$target:a.out:hit:4 { @c = count(); }",
        ),
    ];
    if let Some(us) = floor(dir.path()) {
        println!("  ptrace floor: C tracer, trap + GETREGS/SETREGS + CONT  {us:>8.2} µs");
    }
    for (label, script) in cases {
        match per_hit(n, &|k| dtx_run(&prog, k, script)) {
            Some(us) => println!("  dtx {label:<40} {us:>8.2} µs"),
            None => println!("  dtx {label:<40} failed (ptrace not allowed?)"),
        }
    }
    let cmds = dir.path().join("gdb.cmds");
    let _ = std::fs::write(
        &cmds,
        "set pagination off\nset $c = 0\nbreak hit\ncommands 1\nsilent\nset $c = $c + 1\ncontinue\nend\nrun\n",
    );
    if Command::new("gdb").arg("--version").output().is_err() {
        println!("  gdb: skipped (gdb is not installed)");
        return;
    }
    let gn = 20_000;
    match per_hit(gn, &|k| gdb_run(&prog, k, &cmds)) {
        Some(us) => println!("  gdb break + command list ({gn} calls)        {us:>8.2} µs"),
        None => println!("  gdb: failed"),
    }
}
