//! Cost of one pid probe hit on Linux. A C program calls `hit()` N times; the time of
//! `dtx -c 'prog N'` for N calls less the time for 0 calls, divided by N, is the cost per hit
//! (wall clock, best of three; and the CPU time of dtx and the target together, which the
//! load of a shared machine disturbs less). Measured for both backends of the `pid` provider:
//! `-x pidmode=ptrace` (the target stops at the breakpoint, the clause runs, the target
//! resumes; the probed instruction runs out of line) and `-x pidmode=uprobe` (a kernel uprobe
//! samples the registers, the target never stops) — for an empty clause (the loop alone),
//! `count()`, an aggregation on an argument, a `return` probe and an offset probe — next to
//! the floors of this machine (a C tracer doing only trap/GETREGS/SETREGS/CONT; a C program
//! counting a bare uprobe) and gdb with a breakpoint command list on the same program.
//!
//! The `fpid` provider (hooks inside the target, no trap) is measured first, at 10,000,000
//! calls, beside both pid backends with the same `count()` clause (at the pid cases' N: a
//! hit of theirs costs microseconds, so 10,000,000 of them would take minutes per run).
//!
//! `cargo bench --bench pid_hit` (needs gcc; gdb for its line; ptrace allowed);
//! `cargo bench --bench pid_hit -- fpid` for the fpid comparison alone.
//!
//! On Windows (run under Wine by `scripts/windows-check.sh`) the same comparison is made on
//! `tests/pid_windows/fpidwin.c` built by mingw (the folder `DTX_PID_WIN_FIXTURES` names): one
//! fpid hit (the agent DLL's MinHook hooks) against one hit of the Win32 debugger loop, wall
//! clock only (no CPU accounting of children there).

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

/// The machine's uprobe floor: a C program that opens one counting uprobe (`RET`: a
/// uretprobe) on its child and runs it; prints the seconds the child ran.
const UPROBE_FLOOR: &str = r#"
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
int main(int argc, char **argv) {
    int type = atoi(argv[1]); const char *path = argv[2];
    unsigned long off = strtoul(argv[3], 0, 0); int ret = atoi(argv[4]);
    int go[2]; if (pipe(go)) return 1;
    pid_t p = fork();
    if (p == 0) { char c; if (read(go[0], &c, 1) != 1) _exit(1);
        execl(path, path, argv[5], (char *)0); _exit(127); }
    struct perf_event_attr a; memset(&a, 0, sizeof a);
    a.type = type; a.size = sizeof a; a.config = ret; a.config1 = (unsigned long)path;
    a.config2 = off;
    int fd = syscall(SYS_perf_event_open, &a, p, -1, -1, 0);
    if (fd < 0) { kill(p, 9); return 1; }
    struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
    if (write(go[1], "x", 1) != 1) return 1;
    int st; waitpid(p, &st, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long long n = 0; if (read(fd, &n, sizeof n) != sizeof n) return 1;
    printf("%lld %.6f\n", n, (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    return 0;
}
"#;

/// Per-hit µs of the uprobe floor at file offset `off` of `prog` (entry, or `ret` for a
/// uretprobe): (time of N calls less time of 0) / N.
fn uprobe_floor(dir: &Path, prog: &Path, off: u64, ret: bool, n: u64) -> Option<f64> {
    let ty = std::fs::read_to_string("/sys/bus/event_source/devices/uprobe/type").ok()?;
    let c = dir.join("upfloor.c");
    std::fs::write(&c, UPROBE_FLOOR).ok()?;
    let exe = dir.join("upfloor");
    Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&c)
        .status()
        .ok()?;
    let run = |k: u64| -> Option<f64> {
        let out = Command::new(&exe)
            .args([
                ty.trim(),
                &prog.display().to_string(),
                &format!("0x{off:x}"),
            ])
            .arg(if ret { "1" } else { "0" })
            .arg(k.to_string())
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let mut f = text.split_whitespace();
        let hits: u64 = f.next()?.parse().ok()?;
        (hits == k).then_some(())?;
        f.next()?.parse().ok()
    };
    let mut best = f64::MAX;
    for _ in 0..3 {
        best = best.min(run(n)? - run(0)?);
    }
    Some(best / n as f64 * 1e6)
}

/// The file offset of function `name` in the ELF file `prog`.
fn file_offset_of(prog: &Path, name: &str) -> Option<u64> {
    use object::{Object, ObjectSegment, ObjectSymbol};
    let data = std::fs::read(prog).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let addr = file.symbols().find(|s| s.name() == Ok(name))?.address();
    file.segments().find_map(|seg| {
        let (start, size) = (seg.address(), seg.size());
        (addr >= start && addr < start + size).then(|| addr - start + seg.file_range().0)
    })
}

/// CPU seconds (user + system) of the waited-for children so far.
fn children_cpu() -> f64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getrusage fills the struct.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
        let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
        t(u.ru_utime) + t(u.ru_stime)
    }
    #[cfg(not(target_os = "linux"))]
    {
        0.0
    }
}

/// Best wall-clock and best CPU seconds of three runs.
fn best_of_3(f: &dyn Fn() -> bool) -> Option<(f64, f64)> {
    let (mut best, mut best_cpu) = (f64::MAX, f64::MAX);
    for _ in 0..3 {
        let c = children_cpu();
        let t = Instant::now();
        if !f() {
            return None;
        }
        best = best.min(t.elapsed().as_secs_f64());
        best_cpu = best_cpu.min(children_cpu() - c);
    }
    Some((best, best_cpu))
}

fn dtx_run(prog: &Path, n: u64, script: &str, mode: &str) -> bool {
    Command::new(env!("CARGO_BIN_EXE_dtx"))
        .args(["-x", &format!("pidmode={mode}")])
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

/// µs per hit: wall clock and CPU time.
fn per_hit(n: u64, run: &dyn Fn(u64) -> bool) -> Option<(f64, f64)> {
    let base = best_of_3(&|| run(0))?;
    let full = best_of_3(&|| run(n))?;
    Some((
        (full.0 - base.0) / n as f64 * 1e6,
        (full.1 - base.1).max(0.0) / n as f64 * 1e6,
    ))
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
    if cfg!(windows) {
        windows_fpid_against_pid();
        return;
    }
    if !cfg!(target_os = "linux") {
        println!("pid_hit: the pid provider's debugger loop is measured on Linux and Windows only");
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
        let ok = dtx_run(
            &prog,
            100,
            "pid$target:a.out:hit:entry { @c = count(); }",
            "ptrace",
        ) && dtx_run(
            &prog,
            100,
            "fpid$target:a.out:hit:entry { @c = count(); }",
            "auto",
        );
        println!("pid_hit: smoke run {}", if ok { "ok" } else { "failed" });
        return;
    }
    let n = 200_000;
    fpid_against_pid(&prog, n);
    if std::env::args().any(|a| a == "fpid") {
        return;
    }
    println!(
        "pid_hit: {n} calls of hit(); µs per hit, wall clock (best of 3, less the run with 0 calls) / CPU of dtx + target"
    );
    let cases: [(&str, &str); 5] = [
        ("entry, empty clause", "pid$target:a.out:hit:entry {}"),
        (
            "entry, @c = count()",
            "pid$target:a.out:hit:entry { @c = count(); }",
        ),
        (
            "entry, @[arg0 % 16] = sum(arg0)",
            "pid$target:a.out:hit:entry { @[arg0 % 16] = sum(arg0); }",
        ),
        (
            "return, count()",
            "pid$target:a.out:hit:return { @c = count(); }",
        ),
        (
            "offset 4 (a store), count()",
            "pid$target:a.out:hit:4 { @c = count(); }",
        ),
    ];
    if let Some(us) = floor(dir.path()) {
        println!("  floor  ptrace: C tracer, trap + GETREGS/SETREGS + CONT   {us:>8.2}");
    }
    match file_offset_of(&prog, "hit") {
        Some(off) => {
            for (label, ret) in [("uprobe at entry", false), ("uretprobe", true)] {
                match uprobe_floor(dir.path(), &prog, off, ret, n) {
                    Some(us) => println!("  floor  C program counting a {label:<24} {us:>8.2}"),
                    None => println!("  floor  {label}: skipped (uprobes unavailable)"),
                }
            }
        }
        None => println!("  floor  uprobe: skipped (no symbol hit)"),
    }
    let plain = per_hit(n, &|k| {
        Command::new(&prog)
            .arg(k.to_string())
            .status()
            .map(|_| true)
            .unwrap_or(false)
    });
    if let Some((us, _)) = plain {
        println!("  untraced call of hit()                                {us:>8.3}");
    }
    for mode in ["ptrace", "uprobe"] {
        for (label, script) in cases {
            match per_hit(n, &|k| dtx_run(&prog, k, script, mode)) {
                Some((us, cpu)) => {
                    println!("  dtx {mode:<6} {label:<36} {us:>8.2} / {cpu:>6.2} cpu")
                }
                None => {
                    println!("  dtx {mode:<6} {label:<36} failed (ptrace or uprobes not allowed?)")
                }
            }
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
        Some((us, cpu)) => {
            println!("  gdb break + command list ({gn} calls)          {us:>8.2} / {cpu:>6.2} cpu")
        }
        None => println!("  gdb: failed"),
    }
}

/// One fpid hit with `count()` at 10,000,000 calls, over the untraced call, beside the pid
/// backends' hits with the same clause (at `n` calls), and the ratios.
fn fpid_against_pid(prog: &Path, n: u64) {
    let big = 10_000_000;
    let count = |p: &str| format!("{p}$target:a.out:hit:entry {{ @c = count(); }}");
    println!(
        "fpid: µs per hit, wall clock (best of 3, less the run with 0 calls) / CPU of dtx + target"
    );
    let plain = per_hit(big, &|k| {
        Command::new(prog)
            .arg(k.to_string())
            .status()
            .map(|_| true)
            .unwrap_or(false)
    });
    let untraced = plain.map_or(0.0, |(us, _)| us);
    println!("  untraced call of hit() ({big} calls)                {untraced:>10.4}");
    let fpid = per_hit(big, &|k| dtx_run(prog, k, &count("fpid"), "auto"));
    let Some((fpid_us, fpid_cpu)) = fpid else {
        println!("  dtx fpid: failed (ptrace not allowed?)");
        return;
    };
    println!(
        "  dtx fpid   entry, @c = count() ({big} calls)   {fpid_us:>10.4} / {fpid_cpu:>8.4} cpu; over the untraced call {:.1} ns",
        (fpid_us - untraced) * 1000.0
    );
    let both = "fpid$target:a.out:hit:entry, fpid$target:a.out:hit:return { @c = count(); }";
    if let Some((us, cpu)) = per_hit(big, &|k| dtx_run(prog, k, both, "auto")) {
        println!(
            "  dtx fpid   entry + return, count() ({big} calls) {us:>10.4} / {cpu:>8.4} cpu (two hits a call)"
        );
    }
    for mode in ["uprobe", "ptrace"] {
        match per_hit(n, &|k| dtx_run(prog, k, &count("pid"), mode)) {
            Some((us, cpu)) => println!(
                "  dtx pid {mode:<6} entry, @c = count() ({n} calls) {us:>10.4} / {cpu:>8.4} cpu: fpid {:.0}x cheaper (wall), {:.0}x (cpu)",
                us / (fpid_us - untraced).max(1e-6),
                cpu / fpid_cpu.max(1e-6)
            ),
            None => println!("  dtx pid {mode:<6}: failed (ptrace or uprobes not allowed?)"),
        }
    }
}

/// Windows: one fpid hit with `count()` against one hit of the debugger loop with the same
/// clause, on the mingw-built `fpidwin.exe`, and the ratio; then the count of one fpid run at
/// the large N, to show no hit was dropped.
fn windows_fpid_against_pid() {
    let Some(dir) = std::env::var_os("DTX_PID_WIN_FIXTURES") else {
        println!("pid_hit: skipped (DTX_PID_WIN_FIXTURES names no folder of test programs)");
        return;
    };
    let prog = PathBuf::from(dir).join("fpidwin.exe");
    if !prog.is_file() {
        println!("pid_hit: skipped (no {})", prog.display());
        return;
    }
    let count = |p: &str| format!("{p}$target:a.out:hit:entry {{ @c = count(); }}");
    if !std::env::args().any(|a| a == "--bench") {
        let ok = dtx_run(&prog, 100, &count("fpid"), "auto")
            && dtx_run(&prog, 100, &count("pid"), "auto");
        println!("pid_hit: smoke run {}", if ok { "ok" } else { "failed" });
        return;
    }
    let (big, n) = (2_000_000u64, 5_000u64);
    println!("fpid on Windows: µs per hit, wall clock (best of 3, less the run with 0 calls)");
    let plain = per_hit(big, &|k| {
        Command::new(&prog)
            .arg(k.to_string())
            .stdout(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    });
    let untraced = plain.map_or(0.0, |(us, _)| us);
    println!("  untraced call of hit() ({big} calls)                 {untraced:>10.4}");
    let Some((fpid_us, _)) = per_hit(big, &|k| dtx_run(&prog, k, &count("fpid"), "auto")) else {
        println!("  dtx fpid: failed");
        return;
    };
    let over = (fpid_us - untraced).max(1e-6);
    println!(
        "  dtx fpid      entry, @c = count() ({big} calls) {fpid_us:>10.4}; over the untraced call {:.1} ns",
        over * 1000.0
    );
    match per_hit(n, &|k| dtx_run(&prog, k, &count("pid"), "auto")) {
        Some((us, _)) => println!(
            "  dtx pid (debugger) entry, @c = count() ({n} calls) {us:>10.4}: fpid {:.0}x cheaper",
            us / over
        ),
        None => println!("  dtx pid (debugger): failed"),
    }
    // every hit counted: nothing dropped at this rate
    let out = Command::new(env!("CARGO_BIN_EXE_dtx"))
        .args(["-q", "-n"])
        .arg(format!(
            "{} END {{ printa(\"%@d\\n\", @c); }}",
            count("fpid")
        ))
        .args(["-c", &format!("{} {big}", prog.display())])
        .output();
    if let Ok(o) = out {
        let so = String::from_utf8_lossy(&o.stdout);
        let counted = so
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .to_string();
        let drops = String::from_utf8_lossy(&o.stderr)
            .lines()
            .filter(|l| l.contains("drops"))
            .collect::<Vec<_>>()
            .join("; ");
        println!("  fpid counted {counted} of {big} calls {drops}");
    }
}
