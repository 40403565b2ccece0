//! The `fpid` provider on Linux, end to end: C programs compiled here with gcc, their functions
//! hooked in-process by the agent, traced by `dtx -c` / `-p`. Skipped (with a message) when gcc
//! is missing or the machine does not let dtx trace a process.

use crate::support::ctarget;
use ctarget::{cmd, dtx, text};

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// `hit(i)` 5,000 times (or argv[1]); the program prints its own checksum of the returns.
/// Built with -O2: gcc's -fipa-ra then keeps the loop's values in registers `hit` leaves
/// alone, which the hooks must preserve.
const HIT: &str = r#"
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) long hit(long i) { return i * 3 + 1; }
__attribute__((noinline)) long wide(long a, long b, long c, long d, long e, long f, long g, long h) {
    return a + b + c + d + e + f + g + h;
}
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 5000, sum = 0;
    for (long i = 0; i < n; i++) sum += hit(i);
    sum += wide(1, 2, 3, 4, 5, 6, 7, 8);
    printf("checksum %ld\n", sum);
    return 0;
}
"#;

/// A call chain for stacks.
const CHAIN: &str = r#"
#include <stdio.h>
__attribute__((noinline)) int leaf(int x) { return x + 1; }
__attribute__((noinline)) int middle(int x) { return leaf(x) * 2; }
__attribute__((noinline)) int outer(int x) { return middle(x) + 3; }
int main(void) { int s = 0; for (int i = 0; i < 3; i++) s += outer(i); printf("chain %d\n", s); return 0; }
"#;

const LOOP: &str = r#"
#include <stdio.h>
#include <unistd.h>
__attribute__((noinline)) int tick(int i) { return i * 2; }
int main(void) {
    setvbuf(stdout, 0, _IOLBF, 0);
    printf("loop started\n");
    long s = 0;
    for (int i = 0; i < 300; i++) { s += tick(i); usleep(5000); }
    printf("loop finished %ld\n", s);
    return 7;
}
"#;

/// A folder of the tests' programs, built at the optimisation level each test gives.
struct Env(ctarget::Env);

impl Env {
    fn new() -> Option<Env> {
        ctarget::Env::new("fpid tests").map(Env)
    }

    fn build(&self, name: &str, src: &str, opt: &str) -> Option<PathBuf> {
        self.0.build(name, src, &[opt], &[])
    }
}

#[test]
fn fpid_counts_args_and_return_values_exactly() {
    let Some(env) = Env::new() else { return };
    let prog = env.build("hit", HIT, "-O2").unwrap();
    let direct = Command::new(&prog).output().unwrap();
    let direct = String::from_utf8_lossy(&direct.stdout).into_owned();
    let expected: i64 = (0..5000i64).map(|i| i * 3 + 1).sum::<i64>() + 36;
    assert_eq!(direct.trim(), format!("checksum {expected}"));
    let script = r#"
        fpid$target:a.out:hit:entry { @entries = count(); @argsum = sum(arg0); }
        fpid$target:a.out:hit:return { @returns = count(); @retsum = sum(arg1); }
        fpid$target:a.out:wide:entry { printf("wide %d %d %d %d %d %d %d %d\n", arg0, arg1, arg2, arg3, arg4, arg5, arg6, arg7); }
        fpid$target:a.out:wide:return { printf("wide returns %d in %s`%s\n", arg1, probemod, probefunc); }
        END { printa("entries %@d\n", @entries); printa("returns %@d\n", @returns);
              printa("argsum %@d\n", @argsum); printa("retsum %@d\n", @retsum); }
    "#;
    let out = dtx(&["-q", "-n", script, "-c", prog.to_str().unwrap()]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    // the target finished unharmed: its own checksum, as untraced
    assert!(so.contains(direct.trim()), "{so}");
    assert!(so.contains("entries 5000\n"), "{so}");
    assert!(so.contains("returns 5000\n"), "{so}");
    assert!(
        so.contains(&format!("argsum {}\n", (0..5000i64).sum::<i64>())),
        "{so}"
    );
    assert!(so.contains(&format!("retsum {}\n", expected - 36)), "{so}");
    assert!(so.contains("wide 1 2 3 4 5 6 7 8\n"), "{so}");
    assert!(so.contains("wide returns 36 in hit`wide\n"), "{so}");
    // not quiet: the end of the process is told as pid's is
    let out = dtx(&[
        "-n",
        "fpid$target:a.out:hit:entry {}",
        "-c",
        &cmd(&prog, "3"),
    ]);
    let (_, se) = text(&out);
    assert!(se.contains("matched 1 probe"), "{se}");
    assert!(se.contains("has exited"), "{se}");
}

/// The function names of the frames of a `ustack()` (unnamed addresses, which move from run
/// to run, left out).
fn frames(out: &str) -> Vec<String> {
    out.lines()
        .map(str::trim)
        .filter(|l| l.contains('`') && !l.contains("`0x"))
        .map(|l| l.split('+').next().unwrap_or(l).to_string())
        .collect()
}

/// A tight loop of 10,000,000 calls counted exactly with the default settings: the drain
/// thread keeps the ring's room free and, when dtx falls behind (a loaded machine), the hit
/// waits for room (`fpidwait`, bounded by dtx making no progress at all) rather than drop.
/// Nothing here depends on speed; a drop would be said on stderr and the count would differ.
#[test]
fn fpid_counts_a_ten_million_call_loop_exactly() {
    let Some(env) = Env::new() else { return };
    let prog = env.build("hit", HIT, "-O2").unwrap();
    let n: i64 = 10_000_000;
    let expected: i64 = (0..n).map(|i| i * 3 + 1).sum::<i64>() + 36;
    let out = dtx(&[
        "-q",
        "-n",
        "fpid$target:a.out:hit:entry { @n = count(); @s = sum(arg0); } \
         fpid$target:a.out:hit:return { @r = count(); } \
         END { printa(\"entries %@d\\n\", @n); printa(\"argsum %@d\\n\", @s); \
               printa(\"returns %@d\\n\", @r); }",
        "-c",
        &cmd(&prog, &n.to_string()),
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.contains(&format!("checksum {expected}\n")), "{so}");
    assert!(so.contains(&format!("entries {n}\n")), "{so}\n{se}");
    assert!(so.contains(&format!("returns {n}\n")), "{so}\n{se}");
    assert!(
        so.contains(&format!("argsum {}\n", (0..n).sum::<i64>())),
        "{so}"
    );
    assert!(!se.contains("drops"), "{se}");
    // with no wait allowed (the old behaviour) and a small ring, the same loop outruns dtx
    // and the loss is said, never a silent short count
    let out = dtx(&[
        "-q",
        "-x",
        "fpidwait=0",
        "-x",
        "fpidbufsize=64k",
        "-n",
        "fpid$target:a.out:hit:entry { @n = count(); } END { printa(\"entries %@d\\n\", @n); }",
        "-c",
        &cmd(&prog, &n.to_string()),
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    let counted: i64 = so
        .lines()
        .find_map(|l| l.strip_prefix("entries ")?.parse().ok())
        .unwrap_or(0);
    let dropped: i64 = se
        .lines()
        .filter_map(|l| {
            l.strip_prefix("dtx: ")?
                .split_once(" fpid drops in pid ")?
                .0
                .parse::<i64>()
                .ok()
        })
        .sum();
    assert!(dropped > 0, "{se}");
    assert_eq!(counted + dropped, n, "{so}\n{se}");
}

#[test]
fn fpid_ustack_names_functions_as_pid_does() {
    let Some(env) = Env::new() else { return };
    let prog = env.build("chain", CHAIN, "-O2").unwrap();
    let run = |provider: &str| {
        let script = format!(
            "{provider}$target:a.out:leaf:entry /n++ == 0/ {{ ustack(); }} \
             {provider}$target:a.out:leaf:return /m++ == 0/ {{ printf(\"return\\n\"); ustack(); }}"
        );
        let out = dtx(&[
            "-q",
            "-x",
            "pidmode=ptrace",
            "-n",
            &script,
            "-c",
            prog.to_str().unwrap(),
        ]);
        let (so, se) = text(&out);
        assert!(out.status.success(), "{se}");
        assert!(so.contains("chain 21"), "{so}");
        let (entry, ret) = so.split_once("return\n").expect("both stacks");
        (frames(entry), frames(ret))
    };
    let (fe, fr) = run("fpid");
    let (pe, pr) = run("pid");
    assert_eq!(
        &fe[..3],
        ["chain`leaf", "chain`middle", "chain`outer"],
        "{fe:?}"
    );
    assert!(fe.contains(&"chain`main".to_string()), "{fe:?}");
    assert_eq!(fe, pe);
    assert_eq!(fr, pr);
}

#[test]
fn fpid_refuses_copyin_naming_pid_and_checks_names() {
    let Some(env) = Env::new() else { return };
    let prog = env.build("hit", HIT, "-O2").unwrap();
    let out = dtx(&[
        "-n",
        "fpid$target:a.out:hit:entry { trace(copyinstr(arg0)); }",
        "-c",
        prog.to_str().unwrap(),
    ]);
    let (so, se) = text(&out);
    assert!(!out.status.success());
    assert!(
        se.contains("copyinstr()") && se.contains("pid provider"),
        "{se}"
    );
    assert!(!so.contains("checksum"), "the target must not run: {so}");
    // a ring larger than fpid maps is refused before the target runs
    let out = dtx(&[
        "-x",
        "fpidbufsize=5g",
        "-n",
        "fpid$target:a.out:hit:entry {}",
        "-c",
        prog.to_str().unwrap(),
    ]);
    let (so, se) = text(&out);
    assert!(!out.status.success());
    assert!(se.contains("fpidbufsize 5368709120 is larger than"), "{se}");
    assert!(!so.contains("checksum"), "the target must not run: {so}");
    // entry and return only
    let out = dtx(&[
        "-n",
        "fpid$target:a.out:hit:4 {}",
        "-c",
        prog.to_str().unwrap(),
    ]);
    let (_, se) = text(&out);
    assert!(!out.status.success());
    assert!(se.contains("invalid probe name"), "{se}");
    // the listing shows the entry and return of every matched function
    let out = dtx(&[
        "-l",
        "-n",
        "fpid$target:a.out:hi*:",
        "-c",
        prog.to_str().unwrap(),
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    let probes: Vec<&str> = so.lines().skip(1).collect();
    assert_eq!(probes.len(), 2, "{so}");
    assert!(
        probes
            .iter()
            .all(|l| l.contains("fpid") && l.contains("hit")),
        "{so}"
    );
    assert!(probes.iter().any(|l| l.ends_with("hit entry")), "{so}");
    assert!(probes.iter().any(|l| l.ends_with("hit return")), "{so}");
}

#[test]
fn fpid_attach_then_exit_leaves_target_running() {
    let Some(env) = Env::new() else { return };
    let prog = env.build("loop", LOOP, "-O0").unwrap();
    let mut child = Command::new(&prog).stdout(Stdio::piped()).spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 13];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    assert_eq!(&first, b"loop started\n");
    let pid = child.id().to_string();
    let out = dtx(&[
        "-q",
        "-n",
        "fpid$target:a.out:tick:entry { printf(\"tick %d\\n\", arg0); n++; } \
         fpid$target:a.out:tick:return /n == 3/ { printf(\"ret %d\\n\", arg1); exit(0); }",
        "-p",
        &pid,
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.matches("tick ").count() >= 3, "{so}");
    let ticks: Vec<i64> = so
        .lines()
        .filter_map(|l| l.strip_prefix("tick ")?.parse().ok())
        .collect();
    assert!(ticks.windows(2).all(|w| w[1] == w[0] + 1), "{so}");
    assert!(so.contains(&format!("ret {}\n", ticks[2] * 2)), "{so}");
    // the hooks are inert now: the program finishes with its own sum and status
    let st = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert_eq!(st.code(), Some(7));
    let sum: i64 = (0..300i64).map(|i| i * 2).sum();
    assert!(rest.contains(&format!("loop finished {sum}")), "{rest}");
}

/// Sleeps three seconds (dtx attaches meanwhile, while no thread is inside `hit`), then calls
/// `hit()` as fast as it can for two seconds of wall time and prints how many calls.
const SPIN: &str = r#"
#include <stdio.h>
#include <time.h>
#include <unistd.h>
__attribute__((noinline)) long hit(long i) { return i * 3 + 1; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(void) {
    setvbuf(stdout, 0, _IOLBF, 0);
    printf("spinning\n");
    sleep(3);
    double end = now() + 2;
    long n = 0, sum = 0;
    while (now() < end) for (int k = 0; k < 100000; k++, n++) sum += hit(n);
    printf("spun %ld %d\n", n, sum != 0);
    return 0;
}
"#;

/// A dtx killed outright while its target's hot loop fills the ring never hangs the target:
/// the hit that finds the ring full waits `fpidwait` for a dtx that is gone, then the ring is
/// stalled and every later hit drops at once; the target finishes on its own.
#[test]
fn fpid_killed_dtx_never_hangs_the_target() {
    let Some(env) = Env::new() else { return };
    let prog = env.build("spin", SPIN, "-O2").unwrap();
    let mut child = Command::new(&prog).stdout(Stdio::piped()).spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 9];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    assert_eq!(&first, b"spinning\n");
    let mut tracer = Command::new(env!("CARGO_BIN_EXE_dtx"))
        .args([
            "-q",
            "-n",
            "fpid$target:a.out:hit:entry { @n = count(); }",
            "-p",
            &child.id().to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(4000));
    // SIGKILL: no clean-up of any kind
    tracer.kill().unwrap();
    tracer.wait().unwrap();
    let start = std::time::Instant::now();
    let st = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert!(st.success(), "{st:?}");
    assert!(
        rest.starts_with("spun ") && rest.trim_end().ends_with(" 1"),
        "{rest}"
    );
    // a second of spinning left: a target waiting on the dead dtx would never end
    assert!(start.elapsed() < std::time::Duration::from_secs(30));
}

#[test]
fn fpid_and_pid_mix_in_one_program() {
    let Some(env) = Env::new() else { return };
    let prog = env.build("chain", CHAIN, "-O0").unwrap();
    let out = dtx(&[
        "-q",
        "-x",
        "pidmode=ptrace",
        "-n",
        "pid$target:a.out:outer:entry { @p = count(); } \
         fpid$target:a.out:leaf:entry { @f = sum(arg0); } \
         END { printa(\"pid %@d\\n\", @p); printa(\"fpid %@d\\n\", @f); }",
        "-c",
        prog.to_str().unwrap(),
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.contains("chain 21"), "{so}");
    assert!(so.contains("pid 3\n"), "{so}");
    assert!(so.contains("fpid 3\n"), "{so}");
}
