//! The `pid` provider on Linux, end to end: small C programs compiled here with gcc, traced
//! by `dtx -c` / `-p`: the target of the shared scenarios (`super`), and what only Linux has
//! (forks, uprobes, relocated instructions). Skipped (with a message) when gcc is missing or
//! ptrace is not allowed.

use crate::support::cli::Dtx;
use crate::support::ctarget;
use ctarget::{cmd, dtx, text};

use super::dtx_mode;

use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Output, Stdio};

const PROG: &str = r#"
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
int add(int a, int b) { return a + b; }
long many(long a, long b, long c, long d, long e, long f, long g, long h) { return a+b+c+d+e+f+g+h; }
int say(const char *s) { return (int)strlen(s); }
int leaf2(int x) { return x * 2; }
int leaf(int x) { return leaf2(x) + 1; }
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 5, t = 0;
    for (int i = 0; i < n; i++) t += add(i, 10);
    t += (int)many(1, 2, 3, 4, 5, 6, 7, 8);
    t += say("hello pid");
    t += leaf(3);
    printf("total %d\n", t);
    return 3;
}
"#;

const THREADS: &str = r#"
#include <pthread.h>
#include <stdio.h>
int work(int x) { return x + 1; }
void *run(void *a) { long s = 0; for (int i = 0; i < 1000; i++) s += work(i); return (void *)s; }
int main(void) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], 0, run, 0);
    for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
    printf("threads done\n");
    return 0;
}
"#;

const LIB: &str = "int libfunc(int x) { return x * 3; }\n";

const DL: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { printf("dlopen failed\n"); return 1; }
    int (*f)(int) = (int (*)(int))dlsym(h, "libfunc");
    int s = 0;
    for (int i = 0; i < 7; i++) s += f(i);
    printf("dl %d\n", s);
    return 0;
}
"#;

const LOOP: &str = r#"
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
int tick(int i) { return i * 2; }
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 300;
    setvbuf(stdout, 0, _IOLBF, 0);
    printf("loop started\n");
    for (int i = 0; i < n; i++) { tick(i); usleep(5000); }
    printf("loop finished\n");
    return 7;
}
"#;

/// A folder of the tests' programs, built unoptimised with frame pointers unless told.
struct Env(ctarget::Env);

impl Env {
    fn new() -> Option<Env> {
        ctarget::Env::new("pid tests").map(Env)
    }

    fn build(&self, name: &str, src: &str, extra: &[&str]) -> Option<PathBuf> {
        self.0
            .build(name, src, &["-O0", "-fno-omit-frame-pointer"], extra)
    }
}

/// The backends the tests run the same checks over: the ptrace loop, and `auto` (kernel
/// uprobes where the clauses allow and the system has them, else the ptrace loop again).
pub const MODES: [&str; 2] = ["ptrace", "auto"];

/// The main program's module name, as probes and stacks name it.
pub const MODULE: &str = "prog";

/// A program that does not exist, and the end of dtx's line about it.
pub const NO_PROGRAM: &str = "/nonexistent/program";
pub const NO_PROGRAM_REASON: &str = "No such file or directory";

/// The shared scenarios' target on Linux: [`PROG`], [`THREADS`] and [`LOOP`], compiled on
/// first use into a folder of their own.
pub struct Target(Env);

impl Target {
    /// None (after saying why) when gcc is missing or dtx cannot trace a process here.
    pub fn new() -> Option<Target> {
        Env::new().map(Target)
    }

    fn program(&self, name: &str, src: &str, libs: &[&str]) -> PathBuf {
        let p = self.0 .0.dir().join(name);
        if p.is_file() {
            return p;
        }
        self.0.build(name, src, libs).expect("build a test program")
    }

    /// The main program run directly with `args`, untraced.
    pub fn run_main(&self, args: &str) -> Output {
        let p = self.program("prog", PROG, &[]);
        Command::new(p)
            .args(args.split_whitespace())
            .output()
            .unwrap()
    }

    /// The `-c` command of the main program with `args`.
    pub fn main(&self, args: &str) -> String {
        cmd(&self.program("prog", PROG, &[]), args)
    }

    /// The `-c` command of four threads calling `work` 1000 times each.
    pub fn threads(&self) -> String {
        let p = self.program("threads", THREADS, &["-pthread"]);
        p.to_string_lossy().into_owned()
    }

    /// The `-c` command of `n` calls of `tick`, 5 ms apart; it exits 7.
    pub fn looping(&self, n: u32) -> String {
        cmd(&self.program("loop", LOOP, &[]), &n.to_string())
    }

    /// The loop of [`Target::looping`] started untraced, once it printed its first line.
    pub fn start_loop(&self, n: u32) -> (Child, ChildStdout) {
        let p = self.program("loop", LOOP, &[]);
        let mut child = (Command::new(p).arg(n.to_string()).stdout(Stdio::piped()))
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut first = [0u8; 13];
        std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
        assert_eq!(&first, b"loop started\n");
        (child, stdout)
    }
}

/// Nothing to do: SIGINT reaches the dtx it is sent to.
pub fn interruptible(_: &mut Dtx) {}

/// SIGINT to `dtx`, as Ctrl-C sends.
pub fn interrupt(dtx: &Child) -> Result<(), String> {
    let st = Command::new("kill")
        .args(["-INT", &dtx.id().to_string()])
        .status()
        .map_err(|e| format!("kill: {e}"))?;
    assert!(st.success(), "kill -INT {}", dtx.id());
    Ok(())
}

#[test]
fn dlopened_library() {
    let Some(env) = Env::new() else { return };
    let lib = env.0.dir().join("libdtxtest.so");
    let c = env.0.dir().join("lib.c");
    std::fs::write(&c, LIB).unwrap();
    let st = Command::new("gcc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&c)
        .status()
        .unwrap();
    assert!(st.success());
    let prog = env.build("dl", DL, &["-ldl"]).unwrap();
    let out = dtx(&[
        "-q",
        "-Z",
        "-n",
        "pid$target:libdtxtest.so:libfunc:entry { @c = count(); @s = sum(arg0); } \
         pid$target:libdtxtest.so:libfunc:return { @r = sum(arg1); } \
         END { printa(\"calls %@d\\n\", @c); printa(\"args %@d\\n\", @s); printa(\"rets %@d\\n\", @r); }",
        "-c",
        &cmd(&prog, lib.to_str().unwrap()),
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.contains("dl 63\n"), "{so}");
    assert!(so.contains("calls 7\n"), "{so}");
    assert!(so.contains("args 21\n"), "{so}");
    assert!(so.contains("rets 63\n"), "{so}");
}

const FORKS: &str = r#"
#include <stdio.h>
#include <unistd.h>
#include <sys/wait.h>
int f(int x) { return x + 1; }
int main(void) {
    int s = 0;
    for (int i = 0; i < 5; i++) {
        pid_t p = fork();
        if (p == 0) { int t = 0; for (int j = 0; j < 100; j++) t += f(j); _exit(t == 5050 ? 0 : 1); }
        int st; waitpid(p, &st, 0); s += WIFEXITED(st) && WEXITSTATUS(st) == 0;
        s += f(i) > 0;
    }
    printf("children ok %d\n", s);
    return 0;
}
"#;

#[test]
fn forked_children_lose_the_breakpoints() {
    let Some(env) = Env::new() else { return };
    let prog = env.build("forks", FORKS, &[]).unwrap();
    let out = dtx(&[
        "-q",
        "-n",
        "pid$target:a.out:f:entry { @n = count(); } END { printa(\"hits %@d\\n\", @n); }",
        "-c",
        prog.to_str().unwrap(),
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    // the children ran f() 100 times each without a breakpoint left in them
    assert!(so.contains("children ok 10\n"), "{so}");
    // only the target's own calls fire
    assert!(so.contains("hits 5\n"), "{so}");
}

#[test]
fn flowindent_over_pid_probes() {
    let Some(env) = Env::new() else { return };
    let prog = env.build("prog", PROG, &[]).unwrap();
    let out = dtx(&[
        "-F",
        "-n",
        "pid$target:a.out:leaf*:entry, pid$target:a.out:leaf*:return {}",
        "-c",
        &cmd(&prog, "1"),
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    // the CPU column is the hit's CPU under uprobes: compare the rest
    let lines: Vec<String> = so
        .lines()
        .map(str::trim_end)
        .map(|l| match l.get(..3) {
            Some(c) if c.trim().parse::<u32>().is_ok() => format!("  0{}", &l[3..]),
            _ => l.to_string(),
        })
        .collect();
    let i = lines
        .iter()
        .position(|l| l.starts_with("CPU FUNCTION"))
        .expect(&so);
    assert_eq!(
        &lines[i + 1..i + 5],
        [
            "  0  -> leaf",
            "  0    -> leaf2",
            "  0    <- leaf2",
            "  0  <- leaf"
        ],
        "{so}"
    );
}

const QSORT: &str = r#"
#include <stdlib.h>
#include <stdio.h>
__attribute__((noinline)) int cmp(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}
__attribute__((noinline)) int sort_them(int *v, int n) {
    qsort(v, n, sizeof(int), cmp);
    return v[0] + v[n - 1];
}
int main(void) {
    int v[] = { 5, 3, 9, 1 };
    printf("%d\n", sort_them(v, 4));
    return 0;
}
"#;

/// A user stack through libc, which keeps no frame pointers: `.eh_frame` carries the walk past
/// `qsort`'s frames to the program's own callers.
#[test]
fn ustack_unwinds_through_code_without_frame_pointers() {
    let Some(env) = Env::new() else { return };
    // the program itself without frame pointers too
    let prog = env
        .build("qsort", QSORT, &["-O2", "-fomit-frame-pointer"])
        .unwrap();
    for mode in MODES {
        let out = dtx_mode(
            mode,
            &[
                "-q",
                "-n",
                "pid$target:a.out:cmp:entry /n++ == 0/ { ustack(); }",
                "-c",
                &cmd(&prog, ""),
            ],
        );
        let (so, se) = text(&out);
        assert!(out.status.success(), "{se}");
        // the stack's lines (with uprobes the clause's output may follow the program's)
        let frames: Vec<&str> = so
            .lines()
            .map(str::trim)
            .filter(|l| l.contains('`'))
            .collect();
        assert!(frames[0].contains("`cmp"), "{so}");
        let libc = frames.iter().position(|f| f.starts_with("libc.so"));
        let sort = frames.iter().position(|f| f.contains("`sort_them"));
        let main = frames.iter().position(|f| f.contains("`main"));
        assert!(libc.is_some() && sort.is_some() && main.is_some(), "{so}");
        assert!(libc < sort && sort < main, "{so}");
    }
}

/// A function whose instructions are each of a kind the debugger moves out of line: RIP-relative
/// load and `lea`, a direct and an indirect call, a conditional and an unconditional jump,
/// `leave`, `ret`. Run in four threads so that hits of the same site overlap.
const KINDS: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
__attribute__((used)) int data = 5;
__attribute__((noinline, used)) int twice(int x) { return 2 * x; }
__attribute__((used)) int (*volatile fp)(int) = twice;
__attribute__((naked, noinline)) int kinds(int x) {
    __asm__ volatile(
        "push %rbp\n"
        "mov %rsp, %rbp\n"
        "sub $16, %rsp\n"
        "mov data(%rip), %eax\n"
        "lea data(%rip), %rcx\n"
        "add (%rcx), %eax\n"
        "add %edi, %eax\n"
        "mov %eax, -4(%rbp)\n"
        "call twice\n"
        "add %eax, -4(%rbp)\n"
        "mov fp(%rip), %rdx\n"
        "call *%rdx\n"
        "add %eax, -4(%rbp)\n"
        "test $1, %edi\n"
        "jz 1f\n"
        "addl $100, -4(%rbp)\n"
        "jmp 2f\n"
        "1: addl $1000, -4(%rbp)\n"
        "2: mov -4(%rbp), %eax\n"
        "leave\n"
        "ret\n");
}
static long n;
void *run(void *a) { long s = 0; for (long i = 0; i < n; i++) s += kinds((int)i); return (void *)s; }
int main(int argc, char **argv) {
    n = argc > 1 ? atol(argv[1]) : 7;
    pthread_t t[4];
    long total = 0;
    for (int i = 0; i < 4; i++) pthread_create(&t[i], 0, run, 0);
    for (int i = 0; i < 4; i++) { void *r; pthread_join(t[i], &r); total += (long)r; }
    printf("kinds total %ld\n", total);
    return 0;
}
"#;

#[test]
fn relocated_instruction_kinds() {
    let Some(env) = Env::new() else { return };
    let prog = env.build("kinds", KINDS, &["-pthread"]).unwrap();
    let direct = Command::new(&prog).arg("7").output().unwrap();
    let direct = String::from_utf8_lossy(&direct.stdout).into_owned();
    // 10 + 5x, plus 100 (odd x) or 1000 (even), over x = 0..7, four times
    let expect: i64 = 4
        * (0..7)
            .map(|x| 10 + 5 * x + if x % 2 == 1 { 100 } else { 1000 })
            .sum::<i64>();
    assert_eq!(direct.trim(), format!("kinds total {expect}"));
    let out = dtx_mode(
        "ptrace",
        &[
            "-q",
            "-n",
            "pid$target:a.out:kinds: { @[probename] = count(); } \
         pid$target:a.out:twice:entry { @calls = count(); @stk[ustack(2)] = count(); } \
         END { printa(\"%s %@d\\n\", @); printa(\"twice %@d\\n\", @calls); printa(@stk); }",
            "-c",
            &cmd(&prog, "7"),
        ],
    );
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    // the program computes the same: every relocated instruction did what it does in place
    assert!(so.contains(&direct), "{so}");
    let counts: Vec<(String, u64)> = so
        .lines()
        .filter_map(|l| {
            let (name, c) = l.trim().split_once(' ')?;
            Some((name.to_string(), c.trim().parse().ok()?))
        })
        .filter(|(name, _)| name != "twice" && name != "kinds")
        .collect();
    let get = |n: &str| counts.iter().find(|(k, _)| k == n).map(|(_, c)| *c);
    assert_eq!(get("entry"), Some(28), "{so}");
    assert_eq!(get("return"), Some(28), "{so}");
    // each offset: 28 hits, but the two instructions of odd x (12 hits) and the one of even
    // x (16 hits)
    let offsets: Vec<u64> = counts
        .iter()
        .filter(|(k, _)| k.chars().all(|c| c.is_ascii_hexdigit()))
        .map(|(_, c)| *c)
        .collect();
    assert_eq!(offsets.len(), 21, "{so}");
    assert_eq!(offsets.iter().filter(|&&c| c == 12).count(), 2, "{so}");
    assert_eq!(offsets.iter().filter(|&&c| c == 16).count(), 1, "{so}");
    assert_eq!(offsets.iter().filter(|&&c| c == 28).count(), 18, "{so}");
    // both calls reached twice with the caller's own return address on the stack
    assert!(so.contains("twice 56\n"), "{so}");
    // two call sites, each frame inside kinds (not in the scratch area)
    assert_eq!(so.matches("kinds`kinds+0x").count(), 2, "{so}");
}

/// Calls `f` 300 times, then tells whether it is being traced (`TracerPid`).
const TRACED: &str = r#"
#include <stdio.h>
#include <string.h>
__attribute__((noinline)) int f(int x) { return x + 1; }
int main(void) {
    int s = 0;
    for (int i = 0; i < 300; i++) s += f(i);
    char line[256];
    FILE *fp = fopen("/proc/self/status", "r");
    while (fp && fgets(line, sizeof line, fp))
        if (!strncmp(line, "TracerPid:", 10)) printf("%s", line);
    printf("sum %d\n", s);
    return 0;
}
"#;

/// Whether the kernel offers uprobes through perf (else the uprobe tests skip).
fn uprobes() -> bool {
    let ok = std::path::Path::new("/sys/bus/event_source/devices/uprobe/type").exists();
    if !ok {
        eprintln!("skipping uprobe tests: this kernel has no uprobe PMU");
    }
    ok
}

#[test]
fn uprobe_backend_counts_args_and_untraced_target() {
    let Some(env) = Env::new() else { return };
    if !uprobes() {
        return;
    }
    let prog = env.build("traced", TRACED, &[]).unwrap();
    let script = "pid$target:a.out:f:entry { @e = count(); @a = sum(arg0); } \
                  pid$target:a.out:f:return { @r = count(); @v = sum(arg1); @o = max(arg0); \
                  @s[ustack(1)] = count(); } \
                  END { printa(\"entries %@d\\n\", @e); printa(\"returns %@d\\n\", @r); \
                  printa(\"args %@d\\n\", @a); printa(\"values %@d\\n\", @v); \
                  printa(\"offset %@d\\n\", @o); printa(@s); }";
    let out = dtx_mode(
        "uprobe",
        &["-q", "-n", script, "-c", prog.to_str().unwrap()],
    );
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.contains("entries 300\n"), "{so}");
    assert!(so.contains("returns 300\n"), "{so}");
    assert!(
        so.contains(&format!("args {}\n", (0..300).sum::<i32>())),
        "{so}"
    );
    assert!(
        so.contains(&format!("values {}\n", (1..301).sum::<i32>())),
        "{so}"
    );
    assert!(
        so.contains(&format!("sum {}\n", (1..301).sum::<i32>())),
        "{so}"
    );
    // the target ran untraced: no debugger stopped it
    assert!(so.contains("TracerPid:\t0\n"), "{so}");
    // the ptrace loop on the same program: same counts, and it was traced
    let out = dtx_mode(
        "ptrace",
        &["-q", "-n", script, "-c", prog.to_str().unwrap()],
    );
    let (so2, _) = text(&out);
    assert!(
        so2.contains("entries 300\n") && so2.contains("returns 300\n"),
        "{so2}"
    );
    assert!(!so2.contains("TracerPid:\t0\n"), "{so2}");
    // the return offset and the pc agree between the backends (a uretprobe reports the ret)
    let ret_lines = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.starts_with("offset ") || l.contains("traced`f"))
            .map(|l| l.trim().to_string())
            .collect()
    };
    assert_eq!(ret_lines(&so).len(), 2, "{so}");
    assert!(ret_lines(&so)[1].starts_with("traced`f+0x"), "{so}");
    assert_eq!(ret_lines(&so), ret_lines(&so2), "{so}\n---\n{so2}");
}

#[test]
fn uprobe_backend_threads_stack_arguments_and_ustack() {
    let Some(env) = Env::new() else { return };
    if !uprobes() {
        return;
    }
    let prog = env.build("threads", THREADS, &["-pthread"]).unwrap();
    let out = dtx_mode(
        "uprobe",
        &[
            "-q",
            "-n",
            "pid$target:a.out:work:entry { @e = count(); @t[tid] = count(); } \
             END { printa(\"entries %@d\\n\", @e); printa(\"tid %@d\\n\", @t); }",
            "-c",
            prog.to_str().unwrap(),
        ],
    );
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.contains("entries 4000\n"), "{so}");
    assert_eq!(so.matches("tid 1000\n").count(), 4, "{so}");
    // arguments past the registers come from the sampled stack; ustack() walks it
    let prog = env.build("prog", PROG, &[]).unwrap();
    let out = dtx_mode(
        "uprobe",
        &[
            "-q",
            "-n",
            "pid$target:a.out:many:entry { printf(\"many %d %d %d %d %d %d %d %d\\n\", \
             arg0, arg1, arg2, arg3, arg4, arg5, arg6, arg7); } \
             pid$target:a.out:leaf2:entry { ustack(); }",
            "-c",
            &cmd(&prog, "2"),
        ],
    );
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.contains("many 1 2 3 4 5 6 7 8\n"), "{so}");
    let frames: Vec<&str> = so
        .lines()
        .map(str::trim)
        .filter(|l| l.contains('`'))
        .collect();
    assert_eq!(frames.first(), Some(&"prog`leaf2"), "{so}");
    assert!(
        frames.get(1).is_some_and(|f| f.starts_with("prog`leaf+0x")),
        "{so}"
    );
    assert!(
        frames.get(2).is_some_and(|f| f.starts_with("prog`main+0x")),
        "{so}"
    );
}

#[test]
fn uprobe_backend_refuses_clauses_that_read_the_target() {
    let Some(env) = Env::new() else { return };
    let prog = env.build("prog", PROG, &[]).unwrap();
    let out = dtx_mode(
        "uprobe",
        &[
            "-q",
            "-n",
            "pid$target:a.out:say:entry { printf(\"%s\\n\", copyinstr(arg0)); }",
            "-c",
            &cmd(&prog, "1"),
        ],
    );
    let (so, se) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{so}{se}");
    assert!(
        se.contains("pidmode=uprobe") && se.contains("copyinstr")
            || se.contains("uprobes are unavailable"),
        "{se}"
    );
    assert_eq!(se.lines().count(), 1, "{se}");
    // auto takes the ptrace loop for it
    let out = dtx(&[
        "-q",
        "-n",
        "pid$target:a.out:say:entry { printf(\"%s\\n\", copyinstr(arg0)); }",
        "-c",
        &cmd(&prog, "1"),
    ]);
    let (so, _) = text(&out);
    assert!(so.contains("hello pid\n"), "{so}");
    // an unknown mode
    let out = dtx_mode("fast", &["-n", "BEGIN { exit(0); }"]);
    let (_, se) = text(&out);
    assert!(!out.status.success() && se.contains("pidmode"), "{se}");
}
