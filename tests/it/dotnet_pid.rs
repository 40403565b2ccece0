//! `pid` probes on .NET methods on Linux, end to end, with a real runtime: a small C# program
//! compiled here with Mono's `mcs` runs under the .NET Core 3.1 runtime of PyPI's `dotnetcore2`
//! wheel, traced by `dtx -c` / `-p`. scripts/dotnet-test-env.sh installs both (cached under
//! ~/.cache/dtx); the tests skip, saying why, only when that install is impossible here.

use crate::support::cli;
use cli::{dtx, text, Dtx};

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

const APP: &str = r#"
using System;
using System.Runtime.CompilerServices;

static class Work {
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Add(int a, int b) { return a + b; }
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long Late(long x) { return x * 3; }
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Never() { }
}

class Acc {
    long total;
    [MethodImpl(MethodImplOptions.NoInlining)]
    public long Put(int v) { total += v; return total; }
}

class Program {
    static int Main(string[] args) {
        string mode = args.Length > 0 ? args[0] : "";
        int n = args.Length > 1 ? int.Parse(args[1]) : 5000;
        long total = 0;
        for (int i = 0; i < n; i++) total += Work.Add(i, 7);
        Console.WriteLine("total " + total);
        var a = new Acc();
        a.Put(5);
        if (mode == "late") {
            Console.WriteLine("ready");
            Console.ReadLine();
            Console.WriteLine("late " + Work.Late(14));
        }
        if (mode == "never-called") Work.Never();
        return 0;
    }
}
"#;

const RUNTIMECONFIG: &str = r#"{"runtimeOptions":{"tfm":"netcoreapp3.1","framework":{"name":"Microsoft.NETCore.App","version":"3.1.0"}}}"#;

/// The runtime and the compiled program, made once for all the tests of this binary.
struct DotNet {
    dotnet: PathBuf,
    app: PathBuf,
    _dir: tempfile::TempDir,
}

/// The .NET Core 3.1 runtime's `dotnet` and Mono's `mcs`, installed (once) by
/// scripts/dotnet-test-env.sh; None after saying why they cannot be installed here.
pub(crate) fn runtime_env() -> Option<&'static (PathBuf, PathBuf)> {
    static ENV: OnceLock<Option<(PathBuf, PathBuf)>> = OnceLock::new();
    ENV.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/dotnet-test-env.sh");
        let out = Command::new("bash")
            .arg(&script)
            .output()
            .expect("run dotnet-test-env.sh");
        let so = String::from_utf8_lossy(&out.stdout);
        let se = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(2) {
            eprintln!("skipping the dotnet_pid tests: {}", se.trim());
            return None;
        }
        assert!(out.status.success(), "dotnet-test-env.sh failed: {se}");
        let var = |k: &str| {
            so.lines()
                .find_map(|l| l.strip_prefix(k))
                .map(PathBuf::from)
                .unwrap_or_else(|| panic!("no {k} in {so}"))
        };
        Some((var("DOTNET="), var("MCS=")))
    })
    .as_ref()
}

fn setup() -> Option<&'static DotNet> {
    static ENV: OnceLock<Option<DotNet>> = OnceLock::new();
    ENV.get_or_init(|| {
        let (dotnet, mcs) = runtime_env()?.clone();
        let dir = tempfile::tempdir().expect("temp dir");
        let cs = dir.path().join("app.cs");
        std::fs::write(&cs, APP).expect("write app.cs");
        let app = dir.path().join("app.dll");
        let st = Command::new(&mcs)
            .arg("-target:exe")
            .arg(format!("-out:{}", app.display()))
            .arg(&cs)
            .output()
            .expect("run mcs");
        assert!(st.status.success(), "mcs failed: {st:?}");
        std::fs::write(dir.path().join("app.runtimeconfig.json"), RUNTIMECONFIG)
            .expect("write runtimeconfig");
        Some(DotNet {
            dotnet,
            app,
            _dir: dir,
        })
    })
    .as_ref()
}

impl DotNet {
    /// The `-c` command line of the program in `mode`.
    fn cmd(&self, mode: &str) -> String {
        format!("{} {} {mode}", self.dotnet.display(), self.app.display())
    }

    /// The program in `mode` started here (not under dtx), its stdin and stdout piped.
    fn spawn(&self, mode: &str) -> Child {
        Command::new(&self.dotnet)
            .arg(&self.app)
            .arg(mode)
            .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
            .env("COMPlus_PerfMapEnabled", "1")
            .env("DOTNET_PerfMapEnabled", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start dotnet")
    }
}

/// Ends a program the test started and removes the perf map files its runtime left.
fn finish(mut child: Child) {
    let pid = child.id();
    let _ = child.stdin.take();
    let _ = child.kill();
    let _ = child.wait();
    for f in [format!("perf-{pid}.map"), format!("perfinfo-{pid}.map")] {
        let _ = std::fs::remove_file(Path::new("/tmp").join(f));
    }
}

/// dtx with the environment the runtime needs here (no ICU on this machine).
fn dtx_net(args: &[&str]) -> Dtx {
    Dtx::new(args).env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
}

/// The value of an aggregation printed as `name value`.
fn value(so: &str, name: &str) -> i64 {
    so.lines()
        .find_map(|l| l.trim().strip_prefix(name))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {so}"))
}

#[test]
fn dotnet_pid_entry_counts_every_call_and_reads_arg0() {
    let Some(net) = setup() else { return };
    let out = dtx_net(&[
        "-q",
        "-n",
        "pid$target:app:Work.Add:entry { @c = count(); @s = sum(arg0); } \
         END { printa(\"calls %@d\\n\", @c); printa(\"args %@d\\n\", @s); \
         printf(\"target %d\\n\", $target); }",
        "-c",
        &net.cmd(""),
    ])
    .output();
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.contains("total 12532500\n"), "{so}");
    assert_eq!(value(&so, "calls "), 5000, "{so}");
    // arg0 of a static method is its first argument: 0 + 1 + ... + 4999
    assert_eq!(value(&so, "args "), 12_497_500, "{so}");
    // dtx turned the perf map on for its target, and takes its files away
    let pid = value(&so, "target ");
    assert!(!Path::new(&format!("/tmp/perf-{pid}.map")).exists());
    assert!(!Path::new(&format!("/tmp/perfinfo-{pid}.map")).exists());
}

#[test]
fn dotnet_pid_return_gives_the_return_value() {
    let Some(net) = setup() else { return };
    let out = dtx_net(&[
        "-q",
        "-n",
        "pid$target:app:Work.Add:return { @c = count(); @r = sum(arg1); } \
         END { printa(\"rets %@d\\n\", @c); printa(\"sum %@d\\n\", @r); }",
        "-c",
        &net.cmd(""),
    ])
    .output();
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert_eq!(value(&so, "rets "), 5000, "{so}");
    // (i + 7) for i below 5000
    assert_eq!(value(&so, "sum "), 12_532_500, "{so}");
}

#[test]
fn dotnet_pid_instance_method_has_this_first() {
    let Some(net) = setup() else { return };
    let out = dtx_net(&[
        "-q",
        "-n",
        "pid$target:app:Acc.Put:entry { printf(\"put %d this %d\\n\", arg1, arg0 != 0); }",
        "-c",
        &net.cmd(""),
    ])
    .output();
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(so.contains("put 5 this 1\n"), "{so}");
}

#[test]
fn dotnet_pid_every_tier_of_a_hot_method_is_armed() {
    let Some(net) = setup() else { return };
    // tier-up after 30 calls without the usual 100 ms delay: Add gets a second code version
    // (OptimizedTier1) while the loop runs, and each call fires once whichever version runs
    let out = dtx_net(&[
        "-q",
        "-n",
        "pid$target:app:Work.Add:entry { @c = count(); @v[uregs[R_PC]] = count(); } \
         END { printa(\"calls %@d\\n\", @c); printa(\"version %x %@d\\n\", @v); }",
        "-c",
        &net.cmd("hot 200000"),
    ])
    .env("COMPlus_TC_CallCountingDelayMs", "0")
    .output();
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert_eq!(value(&so, "calls "), 200_000, "{so}");
    let versions = so.lines().filter(|l| l.starts_with("version ")).count();
    assert!(versions >= 2, "one code version only: {so}");
}

/// Starts the program in `late` mode and waits until it has run its loop (Add and Main are
/// compiled, Late is not).
fn started_late(net: &DotNet) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut child = net.spawn("late");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    loop {
        line.clear();
        assert!(out.read_line(&mut line).expect("read") > 0, "program ended");
        if line == "ready\n" {
            break;
        }
    }
    (child, out)
}

#[test]
fn dotnet_pid_method_compiled_after_the_trace_started_is_caught() {
    let Some(net) = setup() else { return };
    let (mut child, mut child_out) = started_late(net);
    let pid = child.id().to_string();
    let mut d = Dtx::new(&[
        "-q",
        "-n",
        "BEGIN { printf(\"attached\\n\"); } \
         pid$target:app:Work.Late:entry { printf(\"late arg %d\\n\", arg0); } \
         pid$target:app:Work.Late:return { printf(\"late ret %d\\n\", arg1); exit(0); }",
        "-p",
        &pid,
    ])
    .spawn();
    let mut dout = BufReader::new(d.stdout.take().expect("dtx stdout"));
    let mut line = String::new();
    assert!(
        dout.read_line(&mut line).expect("read dtx") > 0,
        "dtx ended"
    );
    assert_eq!(line, "attached\n");
    // now the program compiles and calls Late
    child
        .stdin
        .as_mut()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("write");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut dout, &mut rest).expect("read dtx");
    let st = d.wait().expect("dtx");
    let _ = child.stdin.take();
    let mut se = String::new();
    if let Some(mut e) = d.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut se);
    }
    assert!(st.success(), "{se}");
    assert!(rest.contains("late arg 14\n"), "{rest}{se}");
    assert!(rest.contains("late ret 42\n"), "{rest}{se}");
    let mut prog = String::new();
    std::io::Read::read_to_string(&mut child_out, &mut prog).expect("read program");
    let ok = child.wait().expect("program").success();
    finish(child);
    assert!(ok);
    assert!(prog.contains("late 42\n"), "{prog}");
}

#[test]
fn dotnet_pid_glob_lists_the_programs_methods() {
    let Some(net) = setup() else { return };
    let (child, _out) = started_late(net);
    let pid = child.id();
    let out = dtx(&["-l", "-p", &pid.to_string(), "-n", "pid$target:app::"]);
    let (so, se) = text(&out);
    // a glob over the method names
    let out2 = dtx(&["-l", "-n", &format!("pid{pid}:app:Work.*:entry")]);
    let (so2, _) = text(&out2);
    finish(child);
    assert!(out.status.success(), "{se}");
    let has = |f: &str, n: &str| {
        so.lines().any(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            c.len() == 5 && c[1] == format!("pid{pid}") && c[2] == "app" && c[3] == f && c[4] == n
        })
    };
    for f in ["Work.Add", "Program.Main", "Acc.Put"] {
        assert!(has(f, "entry") && has(f, "return"), "{f}: {so}");
    }
    // Late was not compiled yet: no code, no probe to list
    assert!(!so.contains("Work.Late"), "{so}");
    assert!(so2.contains("Work.Add"), "{so2}");
    assert!(!so2.contains("Program.Main"), "{so2}");
}

#[test]
fn dotnet_pid_ustack_names_managed_frames() {
    let Some(net) = setup() else { return };
    let out = dtx_net(&[
        "-q",
        "-n",
        "pid$target:app:Work.Add:entry /++n == 100/ { ustack(); }",
        "-c",
        &net.cmd(""),
    ])
    .output();
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    let frames: Vec<&str> = so
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert!(
        frames
            .first()
            .is_some_and(|f| f.starts_with("app`Work.Add")),
        "{so}"
    );
    assert!(
        frames.iter().any(|f| f.starts_with("app`Program.Main")),
        "{so}"
    );
}

#[test]
fn dotnet_pid_method_never_compiled_is_said() {
    let Some(net) = setup() else { return };
    let out = dtx_net(&[
        "-q",
        "-n",
        "pid$target:app:Work.Never:entry { @ = count(); }",
        "-c",
        &net.cmd(""),
    ])
    .output();
    let (_, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(
        se.contains("matched 1 probe, armed 0 times: not JIT-compiled yet")
            && se.contains("Work.Never:entry"),
        "{se}"
    );
}

#[test]
fn dotnet_pid_uprobe_mode_is_refused() {
    let Some(net) = setup() else { return };
    let out = dtx_net(&[
        "-q",
        "-x",
        "pidmode=uprobe",
        "-n",
        "pid$target:app:Work.Add:entry { @ = count(); }",
        "-c",
        &net.cmd(""),
    ])
    .output();
    let (_, se) = text(&out);
    assert!(!out.status.success());
    assert!(se.contains("anonymous memory"), "{se}");
}

#[test]
fn dotnet_pid_clear_words_for_processes_it_cannot_follow() {
    let Some(net) = setup() else { return };
    let desc = "pid$target:app:Work.Add:entry { @ = count(); }";
    // a native program
    let out = dtx(&["-n", desc, "-c", "/bin/true"]);
    let (_, se) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{se}");
    assert!(se.contains("is not a .NET process"), "{se}");
    // a .NET program started without the perf map
    let mut child = Command::new(&net.dotnet)
        .arg(&net.app)
        .arg("late")
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .env_remove("COMPlus_PerfMapEnabled")
        .env_remove("DOTNET_PerfMapEnabled")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start dotnet");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    while line != "ready\n" {
        line.clear();
        assert!(out.read_line(&mut line).expect("read") > 0, "program ended");
    }
    let o = dtx(&["-n", desc, "-p", &child.id().to_string()]);
    finish(child);
    let (_, se) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{se}");
    assert!(se.contains("writes no perf map"), "{se}");
    // Mono (installed with mcs) runs the same assembly
    if Command::new("mono").arg("--version").output().is_ok() {
        let o = dtx(&["-n", desc, "-c", &format!("mono {}", net.app.display())]);
        let (_, se) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{se}");
        assert!(se.contains("Mono runtime is not supported"), "{se}");
    }
}

#[test]
fn dotnet_pid_glob_before_any_method_is_compiled_says_why() {
    let Some(net) = setup() else { return };
    // -c: the program has compiled nothing when the probes are made
    let prog = "pid$target:app:*Ad*:entry { @c = count(); }";
    let out = dtx_net(&["-q", "-n", prog, "-c", &net.cmd("")]).output();
    let (_, se) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{se}");
    assert!(
        se.contains("does not match any probes: pid ")
            && se.contains("runs .NET and has compiled no method yet")
            && se.contains("use -Z"),
        "{se}"
    );
    // with -Z the probes are made as the runtime compiles matching methods
    let out = dtx_net(&["-q", "-Z", "-n", prog, "-c", &net.cmd("")]).output();
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    let counts: Vec<i64> = so
        .lines()
        .filter(|l| !l.contains("total"))
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert_eq!(counts, [5000], "{so}{se}");
}
