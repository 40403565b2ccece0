//! The BPF back end on Linux: the same D over the same workload (a child making a known mix
//! of system calls) with clauses in the kernel and with `-x bpf=off`, which must print the
//! same bytes; the reasons a clause stays in user space; and that no program or map of dtx's
//! outlives it, SIGKILL included; quantizations, thread-locals and `timestamp` in the kernel
//! against the same in user space. Each test skips with a message where perf events (root),
//! BPF or gcc are missing.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::cli::Dtx;

/// One test of these at a time: a run over every system call (the SIGKILL test) would load
/// the user-space run of another with events it could lose.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// getppid() `n` times, write(999, 0x1234, i) for i < `m` (EBADF), getpid() `k` times.
const MIX_C: &str = r#"
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000;
  long m = argc > 2 ? atol(argv[2]) : 100;
  long k = argc > 3 ? atol(argv[3]) : 10;
  for (long i = 0; i < n; i++) syscall(SYS_getppid);
  if (argc > 4) {
    /* a change of ids without an exec, then the same calls again */
    long u = atol(argv[4]);
    if (syscall(SYS_setresgid, u, u, u) != 0 || syscall(SYS_setresuid, u, u, u) != 0) return 3;
    for (long i = 0; i < n; i++) syscall(SYS_getppid);
  }
  for (long i = 0; i < m; i++) syscall(SYS_write, 999, (void *)0x1234, i);
  for (long i = 0; i < k; i++) syscall(SYS_getpid);
  return 0;
}
"#;

/// Why the tests cannot run here, if they cannot.
fn unavailable() -> Option<String> {
    if let Err(e) = dtx::sources::perf::live::available() {
        return Some(format!("perf events unavailable ({e})"));
    }
    if Command::new("gcc").arg("--version").output().is_err() {
        return Some("gcc not found".into());
    }
    None
}

macro_rules! require_bpf {
    () => {
        if let Some(why) = unavailable() {
            eprintln!("skipping: {why}");
            return;
        }
    };
}

fn compile(dir: &Path) -> PathBuf {
    let c = dir.join("dtxt_mix.c");
    std::fs::write(&c, MIX_C).unwrap();
    let exe = dir.join("dtxt_mix");
    let st = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(&c)
        .status()
        .unwrap();
    assert!(st.success(), "gcc failed");
    exe
}

/// Runs `script` over `cmd` (as `-c`) with `-x bpf=MODE`: (stdout, stderr).
fn run(script: &str, cmd: &str, mode: &str) -> (String, String) {
    let bpf = format!("bpf={mode}");
    let (code, out, err) = Dtx::new(&["-q", "-x", &bpf, "-n", script, "-c", cmd])
        .timeout(Duration::from_secs(60))
        .run();
    assert_eq!(code, 0, "{out}\n{err}");
    (out, err)
}

/// Aggregations over integers, execname and the probe's names, with predicates over
/// arithmetic, logic, casts and the ternary; one clause (with printf) stays in user space
/// and adds to an aggregation the kernel also adds to.
const DIFF: &str = r#"
syscall::getppid:entry, syscall::getpid:entry /pid == $target/
{ @calls[execname, probefunc] = count(); @zero[probefunc] = sum(arg0 & 0); }
syscall::write:entry /pid == $target && arg0 == 999 && !(arg2 > 80) /
{ @w[arg2 % 7, (int)arg2 * -3] = count(); @mx = max(arg2); @mn = min((long)arg2 - 50);
  @av[arg1 == 0x1234 ? 1 : 2] = avg(arg2 * 2 - 1); @sh = sum((arg2 << 3) >> 1 ^ 5); }
syscall::write:return /pid == $target && errno != 0/
{ @err[errno, probename, probeprov] = count(); @ret = sum(arg0); @t = sum(tid - pid); }
syscall::getpid:return /pid == $target/ { @calls[execname, probefunc] = count(); printf("r%d\n", arg0 == pid); }
END { printa(@calls); printa(@zero); printa(@w); printa(@mx); printa(@mn); printa(@av);
      printa(@sh); printa(@err); printa(@ret); printa(@t); }
"#;

/// `program` over `cmd` in user space (`-x bpf=off`) and with the kernel back end
/// (`-x bpf=verbose`): (user space's output, the kernel's, what the kernel run said on stderr).
/// User space may lose records on a busy machine (and says so): then both run again, up to
/// four times. None (after saying so) when this kernel refuses BPF programs.
fn both_ways(program: &str, cmd: &str) -> Option<(String, String, String)> {
    let mut tries = 0;
    loop {
        tries += 1;
        let (user, lost) = run(program, cmd, "off");
        let (kernel, why) = run(program, cmd, "verbose");
        if why.contains("the kernel refused") {
            eprintln!("skipping: BPF programs do not load here: {why}");
            return None;
        }
        let dropped = |e: &str| e.contains("drop") || e.contains("lost");
        if tries < 4 && (dropped(&lost) || dropped(&why)) {
            continue;
        }
        return Some((user, kernel, why));
    }
}

#[test]
fn bpf_kernel_and_user_space_print_the_same_aggregations() {
    require_bpf!();
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let cmd = format!("{} 20000 100 30", exe.display());
    // user space may lose records on a busy machine (and says so): then run again
    let Some((user, kernel, why)) = both_ways(DIFF, &cmd) else {
        return;
    };
    // the clauses without printf ran in the kernel, the one with it in user space
    for c in 1..=3 {
        assert!(
            why.contains(&format!("bpf: clause {c} (")) && why.contains("runs in the kernel"),
            "{why}"
        );
    }
    assert!(
        why.contains("clause 4 (syscall::getpid:return) runs in user space: the action printf()"),
        "{why}"
    );
    assert_eq!(kernel, user, "{why}");
    // and the numbers are the workload's
    let calls = user
        .lines()
        .find(|l| l.contains("dtxt_mix") && l.contains("getpid") && !l.contains("getppid"))
        .unwrap_or_default();
    assert!(
        calls.trim_end().ends_with(" 60"),
        "entry and return: {user}"
    );
    assert!(
        user.lines()
            .any(|l| l.contains("getppid") && l.trim_end().ends_with(" 20000")),
        "{user}"
    );
    assert!(
        user.lines()
            .any(|l| l.contains(" 9 ") && l.contains("return") && l.contains("syscall")),
        "EBADF on every write: {user}"
    );
    assert!(
        user.contains("-900"),
        "sum of the returns (-9 x 100): {user}"
    );
}

/// Quantizations (with increments, negative values, the 64-bit extremes, lquantize()'s 32-bit
/// values, llquantize()'s orders), thread-locals set on entry and read, incremented and freed
/// on return, `timestamp` differences; and a thread-local that a user-space clause also uses,
/// which keeps its kernel-capable clause in user space.
const QUANT: &str = r#"
syscall::write:entry /pid == $target && arg0 == 999/ { self->n = arg2 + 1; self->c++; self->ts = timestamp; }
syscall::write:return /self->n/
{ @q = quantize(self->n * 37 - 1000); @qi[errno] = quantize(self->n, 3);
  @ex = quantize(self->n == 5 ? -(1 << 62) : self->n == 6 ? 0 : self->n == 7 ? -1 : (1 << 61) + self->n);
  @l[probefunc] = lquantize(self->n, 0, 70, 7); @neg = lquantize((int)self->n - 50, -20, 20, 5, 2);
  @big = lquantize(self->n == 3 ? 0x100000005 : self->n, 0, 10, 1);
  @ll = llquantize(self->n * 1000, 10, 0, 6, 20); @ll2 = llquantize(self->n, 2, 1, 4, 4);
  @c = max(self->c); @pos = sum(timestamp - self->ts > 0); self->n = 0; self->ts = 0; }
syscall::write:return /pid == $target && self->n == 0 && self->ts == 0/ { @freed = count(); }
syscall::getpid:entry /pid == $target/ { self->g = pid; }
syscall::getpid:return /self->g/ { printf("g%d\n", self->g == pid); self->g = 0; }
END { printa(@q); printa(@qi); printa(@ex); printa(@l); printa(@neg); printa(@big); printa(@ll);
      printa(@ll2); printa(@c); printa(@pos); printa(@freed); }
"#;

#[test]
fn bpf_quantizations_and_thread_locals_print_what_user_space_prints() {
    require_bpf!();
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let cmd = format!("{} 1000 100 5", exe.display());
    let Some((user, kernel, why)) = both_ways(QUANT, &cmd) else {
        return;
    };
    for c in 1..=3 {
        assert!(
            why.contains(&format!("bpf: clause {c} (")) && why.contains("runs in the kernel"),
            "{why}"
        );
    }
    assert!(
        why.contains("clause 4 (syscall::getpid:entry) runs in user space: self->g is also used by clause 5, which runs in user space"),
        "{why}"
    );
    assert!(
        why.contains("clause 5 (syscall::getpid:return) runs in user space: the action printf()"),
        "{why}"
    );
    assert_eq!(kernel, user, "{why}");
    // the numbers are the workload's: 100 writes, each freeing its thread-locals
    assert_eq!(user.lines().filter(|l| *l == "g1").count(), 5, "{user}");
    let last_numbers: Vec<&str> = user
        .lines()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .take(3)
        .collect();
    assert_eq!(
        last_numbers.iter().map(|l| l.trim()).collect::<Vec<_>>(),
        ["100", "100", "100"],
        "@c, @pos, @freed: {user}"
    );
    assert!(user.contains("-4611686018427387904 |"), "{user}");
    assert!(user.contains(">= 70 "), "{user}");
}

#[test]
fn bpf_timestamp_in_the_kernel_is_the_engines_clock() {
    require_bpf!();
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let cmd = format!("{} 1000 1 1", exe.display());
    let script = r#"BEGIN { b = timestamp; }
        syscall::getppid:entry /pid == $target/ { @first = min(timestamp); @last = max(timestamp); }
        END { printf("%d %d\n", b, timestamp); printa("%@d %@d\n", @first, @last); }"#;
    let (out, why) = run(script, &cmd, "verbose");
    if why.contains("the kernel refused") {
        eprintln!("skipping: BPF programs do not load here: {why}");
        return;
    }
    assert!(
        why.contains("clause 2 (syscall::getppid:entry) runs in the kernel"),
        "{why}"
    );
    let n: Vec<u64> = out
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(n.len(), 4, "{out}");
    let (begin, end, first, last) = (n[0], n[1], n[2], n[3]);
    assert!(
        begin <= first && first <= last && last <= end,
        "BEGIN {begin} <= first {first} <= last {last} <= END {end}"
    );
    assert!(first - begin < 30_000_000_000, "{out}");
}

#[test]
fn bpf_v_says_which_clauses_run_in_the_kernel() {
    require_bpf!();
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let cmd = format!("{} 500 1 1", exe.display());
    let script = "syscall::getppid:entry /pid == $target/ { self->ts = timestamp; }
        syscall::getppid:return /self->ts/ { @ = quantize(timestamp - self->ts); self->ts = 0; }";
    let (code, out, err) = Dtx::new(&["-q", "-v", "-n", script, "-c", &cmd])
        .timeout(Duration::from_secs(60))
        .run();
    assert_eq!(code, 0, "{out}\n{err}");
    if err.contains("the kernel refused") {
        eprintln!("skipping: BPF programs do not load here: {err}");
        return;
    }
    for c in [
        "clause 1 (syscall::getppid:entry)",
        "clause 2 (syscall::getppid:return)",
    ] {
        assert!(
            err.contains(&format!("bpf: {c} runs in the kernel")),
            "{err}"
        );
    }
    // every call timed: the distribution's counts add up to the calls
    let total: u64 = out
        .lines()
        .filter(|l| l.contains('|'))
        .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
        .sum();
    assert_eq!(total, 500, "{out}");
}

#[test]
fn bpf_off_and_what_the_kernel_cannot_run_stay_in_user_space_with_a_reason() {
    require_bpf!();
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let cmd = format!("{} 10 1 1", exe.display());
    let script = "syscall::getppid:entry /pid == $target/ { @u[ppid] = count(); }
                  syscall::getppid:entry /pid == $target/ { @n = count(); }
                  syscall::getppid:entry /pid == $target && arg0 / arg1/ { @d = count(); }";
    let (out, why) = run(script, &cmd, "verbose");
    assert!(
        why.contains("clause 1 (syscall::getppid:entry) runs in user space: `ppid`"),
        "{why}"
    );
    assert!(why.contains("clause 3 (syscall::getppid:entry) runs in user space: a division by a value that may be zero"), "{why}");
    assert!(out.contains("10"), "{out}");
    // off: nothing said, nothing in the kernel
    let (_, quiet) = run(script, &cmd, "off");
    assert!(!quiet.contains("bpf:"), "{quiet}");
    // on (the default): only refusals by the kernel would be said
    let (_, default) = run(script, &cmd, "on");
    assert!(!default.contains("bpf:"), "{default}");
}

/// The names of dtx's BPF programs and maps the kernel holds now (from `bpftool`), or
/// `None` where bpftool is missing.
fn dtx_bpf_objects() -> Option<Vec<String>> {
    let mut v = Vec::new();
    for what in ["prog", "map"] {
        let o = Command::new("bpftool").args([what, "show"]).output().ok()?;
        if !o.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        v.extend(
            text.lines()
                .filter_map(|l| l.split("name ").nth(1))
                .filter_map(|n| n.split_whitespace().next())
                .filter(|n| n.starts_with("dtx_clause") || n.starts_with("dtx_agg"))
                .map(str::to_string),
        );
    }
    Some(v)
}

#[test]
fn bpf_programs_and_maps_are_gone_after_sigkill_and_a_normal_end() {
    require_bpf!();
    let _one = serial();
    let Some(before) = dtx_bpf_objects() else {
        eprintln!("skipping: bpftool not found (Debian's bpftool)");
        return;
    };
    if !before.is_empty() {
        // another dtx of a test running beside this one: wait for it a little
        std::thread::sleep(Duration::from_secs(3));
    }
    let script = "BEGIN { printf(\"ready\\n\"); } syscall:::entry { @[execname] = count(); }
                  tick-30s { exit(2); }";
    let mut dtx = Dtx::new(&["-q", "-x", "bpf=verbose", "-n", script]).spawn();
    let mut out = BufReader::new(dtx.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert_eq!(first.trim(), "ready");
    let during = dtx_bpf_objects().unwrap_or_default();
    let pid = dtx.id() as i32;
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let _ = dtx.wait();
    if during.is_empty() {
        eprintln!("skipping: no BPF program of dtx was loaded (the kernel refused them?)");
        return;
    }
    assert!(
        during.iter().any(|n| n.starts_with("dtx_clause")),
        "{during:?}"
    );
    // the kernel frees them once the descriptors are closed (promptly, by RCU)
    let t = Instant::now();
    let mut left = dtx_bpf_objects().unwrap_or_default();
    while !left.is_empty() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
        left = dtx_bpf_objects().unwrap_or_default();
    }
    assert!(left.is_empty(), "left after SIGKILL: {left:?}");
    // a normal end (exit()) leaves nothing either
    let st = Dtx::new(&[
        "-q",
        "-n",
        "syscall:::entry { @[execname] = count(); } tick-1s { exit(0); }",
    ])
    .command()
    .stdout(Stdio::null())
    .status()
    .unwrap();
    assert!(st.success());
    let t = Instant::now();
    let mut left = dtx_bpf_objects().unwrap_or_default();
    while !left.is_empty() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
        left = dtx_bpf_objects().unwrap_or_default();
    }
    assert!(left.is_empty(), "left after exit(): {left:?}");
}

/// stddev() in the kernel: small values, values whose squares pass 64 bits (the sum of
/// squares is 128 bits, carried across two words), negative ones and `i64::MIN`, keyed and
/// not; merged across CPUs and reads as the engine merges.
const STDDEV: &str = r#"
syscall::write:entry /pid == $target && arg0 == 999/
{ @s = stddev(arg2); @big = stddev((long)arg2 * 1000000000000 + 7);
  @neg[arg2 % 3] = stddev(-(long)arg2 * 3 - 1);
  @ext = stddev(arg2 == 4 ? -9223372036854775807 - 1 : arg2 == 5 ? 9223372036854775807 : arg2);
  @mix[execname] = stddev(arg2 & 1 ? 4294967296 * (long)arg2 : 4294967295); }
END { printa(@s); printa(@big); printa(@neg); printa(@ext); printa(@mix); }
"#;

#[test]
fn bpf_stddev_in_the_kernel_prints_what_user_space_prints() {
    require_bpf!();
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let cmd = format!("{} 10 100 1", exe.display());
    let Some((user, kernel, why)) = both_ways(STDDEV, &cmd) else {
        return;
    };
    assert!(
        why.contains("clause 1 (syscall::write:entry) runs in the kernel"),
        "{why}"
    );
    assert_eq!(kernel, user, "{why}");
    // 0..99 as dt_stddev computes it: sqrt(328350 / 100 - (4950 / 100)^2), each division
    // truncated: sqrt(3283 - 49^2) = 29
    let first = user.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    assert_eq!(first.trim(), "29", "{user}");
    assert!(user.contains("28866070047722"), "1e12 x 28.866...: {user}");
}

/// `uid` and `gid` in the kernel (bpf_get_current_uid_gid) and in user space (the perf
/// source reads them from /proc at the exec): the workload runs as nobody (65534), by
/// setpriv, which sets the ids and then execs it.
#[test]
fn bpf_uid_and_gid_in_the_kernel_are_user_spaces() {
    require_bpf!();
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipping: setpriv (util-linux) not found");
        return;
    }
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    // nobody executes the workload from the test's directory
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let cmd = format!(
        "setpriv --reuid=65534 --regid=65534 --clear-groups {} 2000 10 1",
        exe.display()
    );
    let script = "syscall::getppid:entry /uid == 65534/ { @a = count(); }
        syscall::getppid:entry /uid != 0/ { @[uid, gid, uid + gid * 2] = count(); }
        syscall::write:entry /gid == 65534 && arg0 == 999/ { @w[uid] = sum(arg2); }";
    let (user, _) = run(script, &cmd, "off");
    let (kernel, why) = run(script, &cmd, "verbose");
    if why.contains("the kernel refused") {
        eprintln!("skipping: BPF programs do not load here: {why}");
        return;
    }
    for c in 1..=3 {
        assert!(
            why.contains(&format!("bpf: clause {c} (")) && why.contains("runs in the kernel"),
            "{why}"
        );
    }
    assert_eq!(kernel, user, "{why}");
    assert!(
        user.lines().any(|l| l.trim() == "2000"),
        "@a: every getppid() as nobody: {user}"
    );
    assert!(
        user.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["65534", "65534", "196602", "2000"]),
        "{user}"
    );
    assert!(
        user.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["65534", "45"]),
        "{user}"
    );
    // in user space at the exec itself (printf keeps the clause there): the ids the exec
    // gave, whether or not the process is still there when its records are read
    let (out, _) = run(
        "proc:::exec-success /pid == $target/ { printf(\"exec %d %d\\n\", uid, gid); }",
        &cmd,
        "on",
    );
    assert!(out.lines().any(|l| l == "exec 65534 65534"), "{out}");
}

// A process that changes its ids without an exec (setresuid(2)) has the new ones at its next
// firing and at the call's own return, in user space as in the kernel: user space used to
// know ids only from /proc at an exec, and kept root's.
#[test]
fn bpf_uid_after_setresuid_without_exec_is_exact_both_ways() {
    require_bpf!();
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let cmd = format!("{} 1500 0 0 4242", exe.display());
    let script = "syscall::getppid:entry /pid == $target/ { @[uid, gid] = count(); }
        syscall::setresuid:return /pid == $target/ { @r[uid, gid] = count(); }
        syscall::setresgid:return /pid == $target/ { @g[uid, gid] = count(); }";
    let rows = |out: &str| -> Vec<Vec<String>> {
        out.lines()
            .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
            .filter(|w| !w.is_empty())
            .collect()
    };
    let (user, _) = run(script, &cmd, "off");
    let want: Vec<Vec<String>> = [
        &["0", "4242", "1"][..],
        &["4242", "4242", "1"],
        &["0", "0", "1500"],
        &["4242", "4242", "1500"],
    ]
    .iter()
    .map(|r| r.iter().map(|s| s.to_string()).collect())
    .collect();
    let got = rows(&user);
    for w in &want {
        assert!(got.contains(w), "user space: no row {w:?} in:\n{user}");
    }
    assert_eq!(got.len(), want.len(), "{user}");
    let (kernel, why) = run(script, &cmd, "verbose");
    if why.contains("the kernel refused") {
        eprintln!("skipping the kernel half: BPF programs do not load here: {why}");
        return;
    }
    assert_eq!(kernel, user, "{why}");
}

/// `execname` against literals in predicates and the ternary, and clause-locals: the
/// workload runs under a name longer than `comm` holds, so its `comm` is the first 15 bytes
/// (`dtxt_mix_longer`); the full name and a 16-byte literal equal it on neither side.
const EXECNAME: &str = r#"
syscall::getppid:entry /execname == "dtxt_mix_longer"/
{ @eq = count(); this->n = 2; this->n++; @loc = sum(this->n);
  @full = sum(execname == "dtxt_mix_longer_name"); @sixteen = sum(execname == "dtxt_mix_longerX");
  @short = sum(execname == "dtxt_mix_longe"); }
syscall::write:entry /pid == $target && arg0 == 999/
{ this->k = arg2 % 4; this->k += execname == "dtxt_mix_long" ? 100 : 10;
  @t[execname != "dtxt_mix_longer" ? -1 : this->k] = count();
  @ne = sum(execname != "dtxt_mix_longer_name"); @ne16 = sum("0123456789abcdef" != execname); }
syscall::getpid:entry /"dtxt_mix_longer" == execname && pid == $target/ { @r = count(); }
syscall::getpid:entry /execname != "dtxt_mix_longer" && pid == $target/ { @never = count(); }
END { printa("eq %@d\n", @eq); printa("loc %@d\n", @loc); printa("full %@d\n", @full);
      printa("sixteen %@d\n", @sixteen); printa("short %@d\n", @short); printa(@t);
      printa("ne %@d\n", @ne); printa("ne16 %@d\n", @ne16); printa("r %@d\n", @r);
      printa("never %@d\n", @never); }
"#;

#[test]
fn bpf_execname_comparisons_and_clause_locals_print_what_user_space_prints() {
    require_bpf!();
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let long = dir.path().join("dtxt_mix_longer_name");
    std::fs::copy(&exe, &long).unwrap();
    let cmd = format!("{} 2000 40 7", long.display());
    let Some((user, kernel, why)) = both_ways(EXECNAME, &cmd) else {
        return;
    };
    for c in 1..=4 {
        assert!(
            why.contains(&format!("bpf: clause {c} (")) && why.contains("runs in the kernel"),
            "{why}"
        );
    }
    assert_eq!(kernel, user, "{why}");
    // the numbers are the workload's: comm is the name's first 15 bytes
    for want in [
        "eq 2000",
        "loc 6000",
        "full 0",
        "sixteen 0",
        "short 0",
        "ne 40",
        "ne16 40",
        "r 7",
    ] {
        assert!(user.lines().any(|l| l == want), "{want}: {user}");
    }
    assert!(!user.contains("never"), "{user}");
    let row = |k: &str| {
        user.lines()
            .find(|l| l.split_whitespace().next() == Some(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or_default()
            .to_string()
    };
    for k in ["10", "11", "12", "13"] {
        assert_eq!(row(k), "10", "40 writes, arg2 % 4: {user}");
    }
}

/// Integer globals the kernel adds to (`++`, `--`, `+=`, `-=`: atomic adds, the same sum in
/// any order of the CPUs), set in BEGIN and printed in END; a global a user-space clause
/// reads while the run goes keeps the clause adding to it in user space.
const GLOBALS: &str = r#"
int64_t n, total, w, neg, shared;
syscall::getppid:entry /pid == $target/ { n++; total += 3; }
syscall::write:entry /pid == $target && arg0 == 999/ { w += arg2; neg -= arg2 * 2; n--; }
BEGIN { total = 100; }
syscall::getpid:entry /pid == $target/ { shared++; }
syscall::getpid:return /pid == $target/ { printf("s%d\n", shared); }
END { printf("n %d total %d w %d neg %d shared %d\n", n, total, w, neg, shared); }
"#;

#[test]
fn bpf_globals_added_to_in_the_kernel_print_what_user_space_prints() {
    require_bpf!();
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let cmd = format!("{} 2000 40 7", exe.display());
    let Some((user, kernel, why)) = both_ways(GLOBALS, &cmd) else {
        return;
    };
    for c in 1..=2 {
        assert!(
            why.contains(&format!("bpf: clause {c} (")) && why.contains("runs in the kernel"),
            "{why}"
        );
    }
    assert!(
        why.contains("clause 4 (syscall::getpid:entry) runs in user space: the global shared is also used by clause 5, which runs in user space"),
        "{why}"
    );
    assert_eq!(kernel, user, "{why}");
    assert!(
        user.lines()
            .any(|l| l == "n 1960 total 6100 w 780 neg -1560 shared 7"),
        "{user}"
    );
    assert_eq!(
        user.lines().filter(|l| l.starts_with('s')).count(),
        7,
        "{user}"
    );
}

/// A global four processes add to at once, on every CPU: the kernel's atomic adds lose none
/// (a load, add and store would, where two CPUs add at the same time). User space, which
/// drops records at the rate of the first run, is compared with the kernel on a lighter one.
#[test]
fn bpf_a_global_added_to_on_every_cpu_at_once_loses_nothing() {
    require_bpf!();
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let e = exe.display();
    let four = |n: u32, name: &str| {
        let sh = dir.path().join(name);
        let text = format!("{e} {n} 0 0 & {e} {n} 0 0 & {e} {n} 0 0 & {e} {n} 0 0; wait\n");
        std::fs::write(&sh, text).unwrap();
        format!("sh {}", sh.display())
    };
    let script = r#"int64_t n;
        syscall::getppid:entry /execname == "dtxt_mix"/ { n++; @c = count(); }
        END { printf("n %d\n", n); printa("c %@d\n", @c); }"#;
    let (kernel, why) = run(script, &four(50000, "heavy.sh"), "verbose");
    if why.contains("the kernel refused") {
        eprintln!("skipping: BPF programs do not load here: {why}");
        return;
    }
    assert!(
        why.contains("clause 1 (syscall::getppid:entry) runs in the kernel"),
        "{why}"
    );
    assert!(kernel.lines().any(|l| l == "n 200000"), "{kernel}");
    assert!(kernel.lines().any(|l| l == "c 200000"), "{kernel}");
    let Some((user, kernel, why)) = both_ways(script, &four(2000, "light.sh")) else {
        return;
    };
    assert_eq!(kernel, user, "{why}");
    assert!(kernel.lines().any(|l| l == "n 8000"), "{kernel}");
}

// Two tracers on one tracepoint: a dtx whose clause runs in user space (`-x bpf=off`) and one
// whose clause runs in the kernel count the same calls at the same time, both exactly. The
// kernel drops a tracepoint's perf samples for every event on it when one of its BPF programs
// returns 0, so a kernel clause that "kept no samples" used to blind the other dtx (and any
// other tool's perf events there).
#[test]
fn bpf_a_kernel_clause_leaves_another_tracers_events_alone() {
    require_bpf!();
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let watcher = "BEGIN { printf(\"ready\\n\"); }
        syscall::getppid:entry /execname == \"dtxt_mix\"/ { @seen = count(); }";
    let mut a = Dtx::new(&["-q", "-x", "bpf=off", "-n", watcher]).spawn();
    let mut out = BufReader::new(a.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert_eq!(first.trim(), "ready");
    let cmd = format!("{} 2500 0 0", exe.display());
    let (kernel, why) = run(
        "syscall::getppid:entry /pid == $target/ { @n = count(); }",
        &cmd,
        "verbose",
    );
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(a.id() as i32, libc::SIGINT) };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let _ = a.wait();
    assert_eq!(kernel.trim(), "2500", "{why}");
    assert_eq!(rest.trim(), "2500", "the user-space dtx beside it: {rest}");
    if !why.contains("runs in the kernel") {
        eprintln!("note: the clause ran in user space here: {why}");
    }
}

// With `strsize` below comm's 16 bytes the VM compares strings cut at `strsize`, so a clause
// that reads `execname` stays in user space and says why: the kernel would compare the whole
// comm and answer differently.
#[test]
fn bpf_execname_with_a_short_strsize_stays_in_user_space() {
    require_bpf!();
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let cmd = format!("{} 300 0 0", exe.display());
    let script = "#pragma D option strsize=8
        syscall::getppid:entry /pid == $target && execname == \"dtxt_mix_and_more\"/ { @n = count(); }";
    let (user, _) = run(script, &cmd, "off");
    let (kernel, why) = run(script, &cmd, "verbose");
    assert!(why.contains("strsize 8"), "{why}");
    assert_eq!(kernel, user, "{why}");
    assert_eq!(
        user.trim(),
        "300",
        "both cut at 8 bytes: dtxt_mix == dtxt_mix"
    );
}
