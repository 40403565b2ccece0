//! Live kernel probes on Linux through perf events: dtx traces small C programs (compiled here
//! with gcc) that it starts after its BEGIN, and the tests check what it saw. Each test skips
//! with a message where perf events (root) or gcc are missing.

use crate::support::stacks;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::cli;
use cli::{run, Dtx};

const SYS_C: &str = r#"
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000;
  for (long i = 0; i < n; i++) syscall(SYS_getppid);
  syscall(SYS_write, 999, (void *)0x1234, 77);
  return argc > 2 ? atoi(argv[2]) : 0;
}
"#;

const SPIN_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) double dtxt_leaf(double x) {
  for (int i = 0; i < 1000; i++) x = x * 1.0000001 + 0.5;
  return x;
}
__attribute__((noinline)) double dtxt_middle(double x) { return dtxt_leaf(x) + 1; }
int main(int argc, char **argv) {
  double ms = argc > 1 ? atof(argv[1]) : 1000, x = 0;
  struct timespec a, b;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
  do {
    x = dtxt_middle(x);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
  } while ((b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6 < ms);
  printf("%f\n", x);
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

macro_rules! require_perf {
    () => {
        if let Some(why) = unavailable() {
            eprintln!("skipping: {why}");
            return;
        }
    };
}

/// Compiles a C program named `name` into a fresh directory (with frame pointers).
fn compile(dir: &Path, name: &str, src: &str) -> PathBuf {
    compile_with(dir, name, src, &["-O1", "-fno-omit-frame-pointer"])
}

/// Compiles a C program named `name` with gcc `flags`.
fn compile_with(dir: &Path, name: &str, src: &str, flags: &[&str]) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let exe = dir.join(name);
    let st = Command::new("gcc")
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&c)
        .status()
        .unwrap();
    assert!(st.success(), "gcc failed for {name}");
    exe
}

/// Runs dtx with `script` (its BEGIN must print `ready`), starts `child` once dtx is ready,
/// and returns (dtx stdout, dtx stderr, the child's pid). `$1` in the script is this test
/// process's pid (the child's parent).
fn trace(script: &str, child: &mut Command) -> (String, String, u32) {
    let me = std::process::id().to_string();
    let mut dtx = Dtx::new(&["-q", "-n", script, &me]).spawn();
    let mut out = BufReader::new(dtx.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    if first.trim() != "ready" {
        let mut err = String::new();
        dtx.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        let _ = dtx.kill();
        panic!("dtx did not start: {first:?} {err}");
    }
    let mut c = child.stdout(Stdio::null()).spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    let mut rest = String::new();
    let status = wait_for(&mut dtx, Duration::from_secs(30));
    out.read_to_string(&mut rest).unwrap();
    let mut err = String::new();
    dtx.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status, "dtx did not finish: {rest} {err}");
    (rest, err, pid)
}

fn wait_for(c: &mut Child, limit: Duration) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Ok(Some(_)) = c.try_wait() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    let _ = c.wait();
    false
}

/// A guard so that a test never hangs: the program ends after 20 s whatever happens.
const TIMEOUT: &str = "tick-20s { printf(\"timeout\\n\"); exit(2); }";

#[test]
fn syscalls_of_a_child_are_counted_with_their_arguments() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "dtxt_sys", SYS_C);
    let script = format!(
        "BEGIN {{ printf(\"ready\\n\"); }}
         syscall::getppid:entry /ppid == $1 && execname == \"dtxt_sys\"/ {{ @n = count(); }}
         syscall::write:entry /ppid == $1 && execname == \"dtxt_sys\"/
         {{ printf(\"write %d 0x%x %d\\n\", arg0, arg1, arg2); }}
         syscall::write:return /ppid == $1 && execname == \"dtxt_sys\"/
         {{ printf(\"return %d %d errno %d\\n\", arg0, arg1, errno); }}
         proc:::exit /ppid == $1 && execname == \"dtxt_sys\"/ {{ exit(0); }}
         END {{ printa(\"getppid %@d\\n\", @n); }}
         {TIMEOUT}"
    );
    let (out, err, _) = trace(&script, Command::new(&exe).args(["1234", "0"]));
    assert!(out.contains("write 999 0x1234 77\n"), "{out}\n{err}");
    // write(999, ...) fails with EBADF: the return value is -9 in arg0 and arg1
    assert!(out.contains("return -9 -9 errno 9\n"), "{out}\n{err}");
    assert!(out.contains("getppid 1234\n"), "{out}\n{err}");
    assert!(!out.contains("timeout"), "{out}");
}

#[test]
fn proc_start_exec_and_exit_see_a_spawned_process() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "dtxt_proc", SYS_C);
    let script = format!(
        "BEGIN {{ printf(\"ready\\n\"); }}
         proc:::start /ppid == $1/ {{ printf(\"start %d\\n\", pid); }}
         proc:::exec-success /ppid == $1/ {{ printf(\"exec %d %s\\n\", pid, execname); }}
         proc:::exec /ppid == $1/ {{ printf(\"path %d %s\\n\", pid, stringof(arg0)); }}
         proc:::exit /ppid == $1 && execname == \"dtxt_proc\"/
         {{ printf(\"exit %d %s %d %d\\n\", pid, execname, arg0, arg1); exit(0); }}
         {TIMEOUT}"
    );
    let (out, err, pid) = trace(&script, Command::new(&exe).args(["10", "3"]));
    assert!(out.contains(&format!("start {pid}\n")), "{out}\n{err}");
    assert!(
        out.contains(&format!("exec {pid} dtxt_proc\n")),
        "{out}\n{err}"
    );
    assert!(
        out.contains(&format!("path {pid} {}\n", exe.display())),
        "{out}\n{err}"
    );
    // exited normally (CLD_EXITED) with status 3
    assert!(
        out.contains(&format!("exit {pid} dtxt_proc 1 3\n")),
        "{out}\n{err}"
    );
}

#[test]
fn sched_on_cpu_fires_for_a_running_process() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "dtxt_sched", SPIN_C);
    let script = format!(
        "BEGIN {{ printf(\"ready\\n\"); }}
         sched:::on-cpu /ppid == $1 && execname == \"dtxt_sched\"/ {{ @on = count(); }}
         sched:::off-cpu /ppid == $1 && execname == \"dtxt_sched\"/ {{ @off = count(); }}
         proc:::exit /ppid == $1 && execname == \"dtxt_sched\"/ {{ exit(0); }}
         END {{ printa(\"on %@d\\n\", @on); printa(\"off %@d\\n\", @off); }}
         {TIMEOUT}"
    );
    let (out, err, _) = trace(&script, Command::new(&exe).arg("200"));
    let count = |what: &str| -> u64 {
        out.lines()
            .find_map(|l| l.strip_prefix(what))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    // the process ran after its exec: it came on a CPU at least once, and left it
    assert!(count("on ") >= 1, "{out}\n{err}");
    assert!(count("off ") >= 1, "{out}\n{err}");
}

#[test]
fn profile_samples_carry_stacks_naming_the_program_functions() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "dtxt_spin", SPIN_C);
    let script = format!(
        "BEGIN {{ printf(\"ready\\n\"); }}
         profile-997 /ppid == $1 && execname == \"dtxt_spin\"/
         {{ @[ustack()] = count(); @user[arg1 != 0] = count(); }}
         proc:::exit /ppid == $1 && execname == \"dtxt_spin\"/ {{ exit(0); }}
         {TIMEOUT}"
    );
    let (out, err, _) = trace(&script, Command::new(&exe).arg("1000"));
    // the program spins in dtxt_leaf: most samples name it, with its module
    assert!(out.contains("dtxt_spin`dtxt_leaf"), "{out}\n{err}");
    assert!(out.contains("dtxt_spin`main"), "{out}\n{err}");
    // a second of CPU time of one thread at 997 Hz (it spins on its own CPU clock, so a
    // loaded machine stretches the wall time, not the samples): hundreds with a user PC
    let user_samples: u64 = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() == 2 && f[0] == "1")
        .and_then(|f| f[1].parse().ok())
        .unwrap_or(0);
    assert!(user_samples > 200, "{user_samples} samples\n{out}");
}

#[test]
fn without_privileges_the_error_is_one_line() {
    require_perf!();
    // drop root for one run of dtx, where setpriv exists and can
    let probe = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(["--inh-caps=-all", "--bounding-set=-all", "true"])
        .status();
    if !matches!(probe, Ok(s) if s.success()) {
        eprintln!("skipping: setpriv cannot drop privileges here");
        return;
    }
    let o = Dtx::under(
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ],
        &["-n", "syscall:::entry { @ = count(); }"],
    )
    .output();
    let err = String::from_utf8_lossy(&o.stderr);
    if err.contains("Permission denied")
        && err.contains("os error 13")
        && o.status.code() == Some(126)
    {
        eprintln!("skipping: dtx is not executable by an unprivileged user here");
        return;
    }
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("dtx: could not enable tracing: perf events need root"),
        "{err}"
    );
}

#[test]
fn tracefs_is_mounted_when_absent() {
    require_perf!();
    // in a private mount namespace with every tracefs mount removed, dtx mounts its own
    let script = "for m in $(awk '$3 == \"tracefs\" { print $2 }' /proc/mounts); do umount \"$m\" || exit 90; done; \
                  grep -q tracefs /proc/mounts && exit 91; \
                  \"$0\" -q -n 'sched:::on-cpu { exit(0); } tick-10s { exit(3); }' || exit $?; \
                  grep -q '^nodev /sys/kernel/tracing tracefs' /proc/mounts || exit 92";
    let o = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", script])
        .arg(env!("CARGO_BIN_EXE_dtx"))
        .output();
    let o = match o {
        Ok(o)
            if o.status.code() != Some(90)
                && !o.status.success()
                && o.stderr.starts_with(b"unshare:") =>
        {
            eprintln!("skipping: unshare cannot make a mount namespace here");
            return;
        }
        Ok(o) if o.status.code() == Some(90) => {
            eprintln!("skipping: cannot unmount tracefs in a private namespace");
            return;
        }
        Ok(o) => o,
        Err(e) => {
            eprintln!("skipping: unshare not available ({e})");
            return;
        }
    };
    assert!(
        o.status.success(),
        "status {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_short_lived_c_target_has_its_execname() {
    require_perf!();
    // the -c child exits before dtx reads its first event: its name is known all the same
    let (code, text, err) = run(&[
        "-q",
        "-n",
        "syscall::openat:entry /pid == $target/ { @[execname] = count(); }",
        "-c",
        "/bin/cat /etc/hostname",
    ]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<(&str, u64)> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let k = f.next()?;
            Some((k, f.next()?.parse().ok()?))
        })
        .collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert_eq!(rows[0].0, "cat", "{text}");
    assert!(rows[0].1 > 0);
}

/// A CPU-bound program whose hot loop is three named calls below `main`, built as most
/// distributions build (`-O2`, no frame pointers): it burns `$1` ms of its own CPU time.
const BURN_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) static unsigned long dtxb_leaf(unsigned long n) {
  unsigned long x = 0;
  for (unsigned long i = 0; i < n; i++) { x = x * 2862933555777941757UL + i; __asm__ volatile("" : "+r"(x)); }
  return x;
}
__attribute__((noinline)) unsigned long dtxb_inner(unsigned long n) { return dtxb_leaf(n) + 1; }
__attribute__((noinline)) unsigned long dtxb_middle(unsigned long n) { return dtxb_inner(n) ^ 3; }
__attribute__((noinline)) unsigned long dtxb_outer(unsigned long n) { return dtxb_middle(n) * 5; }
int main(int argc, char **argv) {
  double ms = argc > 1 ? atof(argv[1]) : 500;
  struct timespec a, b;
  unsigned long acc = 0;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
  do {
    acc += dtxb_outer(200000);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
  } while ((b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6 < ms);
  printf("%lu\n", acc & 1);
  return 0;
}
"#;

/// Compiles [`BURN_C`] as distributions build: `-O2`, no frame pointers.
fn compile_burn(dir: &Path) -> PathBuf {
    compile_with(dir, "dtxburn", BURN_C, &["-O2", "-fomit-frame-pointer"])
}

/// Checks the `-o` file of the flamegraph line: at least half of the samples are stacks of 3
/// frames or more naming the program's functions down to `main`, and inferno's dtrace
/// collapser folds the file into lines that name `main`. The program ran `cpu_ms` of CPU time:
/// at 997 Hz about that many samples, and far fewer than twice as many (a sample fires once).
/// The margin is wide because the sampling clock runs on wall time while the program's CPU
/// clock leaves out what the hypervisor steals: a loaded virtual machine gave 729 samples in
/// 600 ms of CPU. Returns (good samples, all samples).
fn check_flamegraph_output(text: &str, cpu_ms: u64) -> (u64, u64) {
    let stacks = stacks::stack_entries(text);
    let total: u64 = stacks.iter().map(|s| s.1).sum();
    assert!(
        total <= cpu_ms * 997 / 1000 * 150 / 100 + 10,
        "{total} samples in {cpu_ms} ms"
    );
    let good = stacks::samples_through(
        &stacks,
        "dtxburn",
        &["dtxb_inner", "dtxb_middle", "dtxb_outer", "main"],
    );
    assert!(total > 50, "{total} samples\n{text}");
    assert!(
        good * 2 >= total,
        "{good} of {total} samples unwound\n{text}"
    );
    // libc's frame below main is named, not a bare address
    assert!(
        !text.contains("libc.so.6`0x"),
        "a libc frame without a name\n{text}"
    );
    let outward = "dtxburn`main;dtxburn`dtxb_outer;dtxburn`dtxb_middle;dtxburn`dtxb_inner";
    let (folded_total, with_main) = stacks::inferno_counts(text, outward);
    assert_eq!(folded_total, total, "{text}");
    assert_eq!(with_main, good, "{text}");
    (good, total)
}

const FLAMEGRAPH_LINE: &str = "profile-997 /pid == $target/ { @[ustack(100)] = count(); }";

#[test]
fn the_flamegraph_line_unwinds_a_c_target_without_frame_pointers() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_burn(dir.path());
    let out = dir.path().join("out.stacks");
    let mut dtx = Dtx::new(&["-x", "ustackframes=100", "-n", FLAMEGRAPH_LINE, "-o"])
        .arg(&out)
        .arg("-c")
        .arg(format!("{} 600", exe.display()))
        .spawn();
    // the run ends when the command ends
    assert!(
        wait_for(&mut dtx, Duration::from_secs(60)),
        "dtx did not end"
    );
    let mut err = String::new();
    dtx.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let (good, total) = check_flamegraph_output(&text, 600);
    eprintln!("-c: {good} of {total} samples have the full stack\n{err}");
}

#[test]
fn the_flamegraph_line_unwinds_a_grabbed_process() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_burn(dir.path());
    let out = dir.path().join("out.stacks");
    let mut burn = Command::new(&exe)
        .arg("800")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut dtx = Dtx::new(&["-x", "ustackframes=100", "-n", FLAMEGRAPH_LINE, "-o"])
        .arg(&out)
        .arg("-p")
        .arg(burn.id().to_string())
        .spawn();
    let ended = wait_for(&mut dtx, Duration::from_secs(60));
    let _ = burn.kill();
    let _ = burn.wait();
    assert!(ended, "dtx did not end with its target");
    let mut err = String::new();
    dtx.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(err.contains("has exited"), "{err}");
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let (good, total) = check_flamegraph_output(&text, 800);
    eprintln!("-p: {good} of {total} samples have the full stack");
}

/// A program whose `write` calls are three named calls below `main`, built without frame
/// pointers: it writes one byte to /dev/null `$1` times and exits, long before dtx reads its
/// events.
const WRITER_C: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
static int fd;
__attribute__((noinline)) int dtxw_inner(int i) { char c = (char)i; return (int)write(fd, &c, 1) + i; }
__attribute__((noinline)) int dtxw_middle(int i) { return dtxw_inner(i) ^ 3; }
__attribute__((noinline)) int dtxw_outer(int i) { return dtxw_middle(i) * 5; }
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100, acc = 0;
  fd = open("/dev/null", O_WRONLY);
  for (int i = 0; i < n; i++) acc += dtxw_outer(i);
  return acc == 42;
}
"#;

/// A system call's `ustack()` is unwound from the user registers and stack at the call, with
/// `.eh_frame`, as a `profile-N` sample's: through code built without frame pointers (it was
/// the kernel's frame-pointer walk, which gave `libc`'s `write` and the one caller it found).
/// The processes are gone when dtx reads their events: their modules come from the mappings
/// the kernel's side-band records gave (they were one unnamed frame), for the `-c` target
/// (mapped before the run began) and for processes a script starts during it.
#[test]
fn a_system_calls_user_stack_unwinds_without_frame_pointers() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_with(
        dir.path(),
        "dtxwrite",
        WRITER_C,
        &["-O2", "-fomit-frame-pointer"],
    );
    let check = |text: &str, err: &str, calls: u64| {
        let stacks = stacks::stack_entries(text);
        let total: u64 = stacks.iter().map(|s| s.1).sum();
        assert_eq!(total, calls, "{text}\n{err}");
        let through = stacks::samples_through(
            &stacks,
            "dtxwrite",
            &["dtxw_inner", "dtxw_middle", "dtxw_outer", "main"],
        );
        assert_eq!(through, calls, "{text}\n{err}");
    };
    let (code, text, err) = run(&[
        "-q",
        "-n",
        "syscall::write:entry /pid == $target/ { @[ustack()] = count(); }",
        "-c",
        &format!("{} 200", exe.display()),
    ]);
    assert_eq!(code, 0, "{err}");
    check(&text, &err, 200);
    // two more processes, forked and exec'd by a shell script during the run
    let script = dir.path().join("twice.sh");
    let exe = exe.display();
    std::fs::write(&script, format!("#!/bin/sh\n{exe} 100\n{exe} 50\n")).unwrap();
    let mut perms = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).unwrap();
    let (code, text, err) = run(&[
        "-q",
        "-n",
        "syscall::write:entry /execname == \"dtxwrite\"/ { @[ustack()] = count(); }",
        "-c",
        &script.display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    check(&text, &err, 150);
}

/// Opens a path, changes the buffer right after the call, then opens a bad address.
const CAPTURE_C: &str = r#"
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(void) {
  char buf[64];
  strcpy(buf, "/tmp/dtxt-capture-at-the-probe");
  syscall(SYS_openat, AT_FDCWD, buf, O_RDONLY);
  strcpy(buf, "/tmp/dtxt-CHANGED-after-the-call");
  syscall(SYS_openat, AT_FDCWD, (char *)8, O_RDONLY);
  return 0;
}
"#;

#[test]
fn copyinstr_reads_the_string_as_it_was_at_the_probe() {
    require_perf!();
    // a short-lived target: its paths are gone by the time dtx reads its events
    let clause = "syscall::openat:entry /pid == $target/ { printf(\"<%s>\\n\", copyinstr(arg1)); }";
    let (code, text, err) = run(&["-q", "-n", clause, "-c", "/bin/cat /etc/hostname"]);
    assert_eq!(code, 0, "{err}");
    if err.contains("cannot be captured at the probe here") {
        eprintln!("skipping: {err}");
        return;
    }
    assert!(
        text.lines().any(|l| l == "</etc/hostname>"),
        "{text}\n{err}"
    );
    // every path printed is a whole path, no bytes of something else
    for l in text.lines().filter(|l| l.starts_with('<')) {
        assert!(l.starts_with("</") && l.ends_with('>'), "{l:?}\n{text}");
    }
    // a buffer changed right after the call, and a bad address: the first reads as it was,
    // the second is the clause's error, as dtrace reports it
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "dtxt_capture", CAPTURE_C);
    let exe = exe.display().to_string();
    let (_, text, err) = run(&["-q", "-n", clause, "-c", &exe]);
    let paths: Vec<&str> = text.lines().filter(|l| l.starts_with('<')).collect();
    assert_eq!(paths, ["</tmp/dtxt-capture-at-the-probe>"], "{text}\n{err}");
    assert!(
        err.contains("syscall::openat:entry): invalid address (0x8) in action #1"),
        "{err}"
    );
}

#[test]
fn idle_samples_are_named_by_their_cpu() {
    require_perf!();
    let (code, text, err) = run(&[
        "-q",
        "-n",
        "profile-997 /pid != -1/ { @all[execname == \"\" || execname == \"<unknown>\"] = count(); }
         profile-997 /pid == -1/ { @gone[execname == \"<unknown>\" && tid == -1] = count(); }
         profile-997 /pid == 0/ { @idle[execname == strjoin(\"swapper/\", lltostr(cpu))] = count(); }
         tick-1s { exit(0); }
         END {
             printa(\"all %d %@d\\n\", @all);
             printa(\"gone %d %@d\\n\", @gone);
             printa(\"idle %d %@d\\n\", @idle);
         }",
    ]);
    assert_eq!(code, 0, "{err}");
    // no sample of a known process has an empty or unknown name
    assert!(text.lines().any(|l| l.starts_with("all 0 ")), "{text}");
    assert!(
        !text.lines().any(|l| l.starts_with("all 1 ")),
        "{text}\n{err}"
    );
    // a task so far into its exit that perf gives it no ids reads as D's -1 (`pid == -1`
    // holds: it once did not, and such samples passed `/pid != -1/` with an empty name) and
    // is named as ETW names a thread nothing identifies
    assert!(!text.lines().any(|l| l.starts_with("gone 0 ")), "{text}");
    // the idle task of CPU N is swapper/N (a busy machine may have no idle sample)
    assert!(!text.lines().any(|l| l.starts_with("idle 0 ")), "{text}");
    if !text.lines().any(|l| l.starts_with("idle 1 ")) {
        eprintln!("no idle sample in a second: the CPUs were busy");
    }
}

/// Ctrl-C just after the events: what dtx had read from the rings and not yet fired is still
/// counted (dtrace counts what its buffers hold at the interrupt). It used to be thrown away
/// when the interrupt came in the middle of a round, so a workload that ended an instant
/// before Ctrl-C was missing from the output.
#[test]
fn ctrl_c_right_after_the_events_still_counts_them() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "dtxt_sys", SYS_C);
    let me = std::process::id().to_string();
    let script = format!(
        "BEGIN {{ printf(\"ready\\n\"); }}
         syscall::getppid:entry /ppid == $1 && execname == \"dtxt_sys\"/ {{ @n = count(); }}
         END {{ printa(\"getppid %@d\\n\", @n); }}
         {TIMEOUT}"
    );
    for round in 0..3 {
        let mut dtx = Dtx::new(&["-q", "-x", "bpf=off", "-n", &script, &me]).spawn();
        let mut out = BufReader::new(dtx.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        assert_eq!(first.trim(), "ready");
        let st = Command::new(&exe)
            .args(["3000", "0"])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
        // SAFETY: kill(2) on the child this test started.
        unsafe { libc::kill(dtx.id() as i32, libc::SIGINT) };
        assert!(
            wait_for(&mut dtx, Duration::from_secs(30)),
            "dtx did not end"
        );
        let mut rest = String::new();
        out.read_to_string(&mut rest).unwrap();
        assert!(rest.contains("getppid 3000\n"), "round {round}: {rest}");
    }
}

/// No silent loss: with a ring far too small for the workload, every call is either counted
/// or in the drops dtx reports. A ring still full when the workload ends gets no LOST record
/// (the kernel writes one only when a later record fits), so those losses are asked of the
/// kernel at the end (PERF_FORMAT_LOST); before, they went unsaid.
#[test]
fn a_ring_too_small_reports_every_call_it_lost() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "dtxt_sys", SYS_C);
    let cmd = format!("{} 1000000 0", exe.display());
    let script = "syscall::getppid:entry /pid == $target/ { @n = count(); }
                  END { printa(\"getppid %@d\\n\", @n); }";
    for round in 0..3 {
        let (code, out, err) =
            Dtx::new(&["-q", "-x", "bpf=off", "-b", "64k", "-n", script, "-c", &cmd])
                .timeout(Duration::from_secs(60))
                .run();
        assert_eq!(code, 0, "{out}\n{err}");
        let counted: u64 = out
            .lines()
            .find_map(|l| l.strip_prefix("getppid "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        let dropped: u64 = err
            .lines()
            .filter_map(|l| l.strip_prefix("dtx: ")?.split_once(" drops on CPU"))
            .filter_map(|(n, _)| n.parse::<u64>().ok())
            .sum();
        assert!(
            counted + dropped >= 1_000_000,
            "round {round}: {counted} counted + {dropped} dropped < 1000000:\n{err}"
        );
        if dropped == 0 {
            assert_eq!(counted, 1_000_000, "{out}");
        }
    }
}
