//! `pid` probes on .NET methods on a real Windows machine: the C# program of
//! tests/dotnet_pid.rs, built here with the machine's .NET SDK (`dotnet build`; a hosted
//! GitHub Windows runner has one), traced by `dtx -c "dotnet app.dll"`, and grabbed with `-p`
//! while it runs (the listing and globs over methods, from the CLR rundown dtx runs first). The debugger loop
//! follows the runtime's method events through an ETW session on the target's pid, so these
//! tests need an elevated prompt, as tests/etw_live_windows.rs does. They skip with a message
//! when that or the SDK is missing, under Wine, or with `DTX_LIVE_TESTS=0`; with
//! `DTX_LIVE_TESTS=require` (the windows-live workflow sets it) a test that cannot run fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The program: `Work.Add` (never inlined) called 5,000 times with 0..4999 and 7.
const APP: &str = r#"
using System;
using System.Runtime.CompilerServices;

static class Work {
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Add(int a, int b) { return a + b; }
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long Late(long x) { return x * 3; }
}

class Program {
    static int Main(string[] args) {
        string mode = args.Length > 0 ? args[0] : "";
        int n = args.Length > 1 ? int.Parse(args[1]) : 5000;
        long total = 0;
        for (int i = 0; i < n; i++) total += Work.Add(i, 7);
        Console.WriteLine("total " + total);
        if (mode == "late") {
            System.Threading.Thread.Sleep(3000);
            Console.WriteLine("late " + Work.Late(14));
        }
        if (mode == "wait") {
            Console.WriteLine("ready");
            Console.ReadLine();
            long more = 0;
            for (int i = 0; i < 1000; i++) more += Work.Add(i, 1);
            Console.WriteLine("more " + more);
        }
        return 0;
    }
}
"#;

/// How long one dtx run may take before it is killed as hung.
const TIMEOUT: Duration = Duration::from_secs(180);

/// Keeps the runs apart (each starts an ETW session).
static ONE: Mutex<()> = Mutex::new(());

use crate::etw_live_windows::{elevated, under_wine};

/// Why the tests cannot run here, or None.
fn skip_reason() -> Option<String> {
    if std::env::var("DTX_LIVE_TESTS").is_ok_and(|v| v.trim() == "0") {
        return Some("DTX_LIVE_TESTS=0".into());
    }
    if under_wine() {
        return Some("running under Wine, whose live ETW sessions are stubs".into());
    }
    match elevated() {
        Some(true) => None,
        Some(false) => {
            Some("not elevated: the CLR's ETW session needs an Administrator prompt".into())
        }
        None => Some("the process token could not be read to tell elevation".into()),
    }
}

/// With `DTX_LIVE_TESTS=require` a test that cannot run fails.
fn cannot_run(test: &str, why: &str) {
    assert!(
        !std::env::var("DTX_LIVE_TESTS").is_ok_and(|v| v.trim() == "require"),
        "{test}: DTX_LIVE_TESTS=require, but the test cannot run here: {why}"
    );
    eprintln!("skipped: {test}: {why}");
}

/// Runs `cmd` to its end (killed after [`TIMEOUT`]).
fn run(cmd: &mut Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "{cmd:?} hung; stdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

/// The built program (`app.dll`), made once; None after saying why the tests cannot run.
fn app(test: &str) -> Option<&'static Path> {
    static APP_DLL: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = APP_DLL.get_or_init(|| {
        let version = Command::new("dotnet")
            .arg("--version")
            .output()
            .map_err(|e| format!("no .NET SDK (`dotnet --version`: {e})"))?;
        if !version.status.success() {
            return Err("no .NET SDK (`dotnet --version` failed)".into());
        }
        let v = String::from_utf8_lossy(&version.stdout).trim().to_string();
        let major = v.split('.').next().unwrap_or("8").to_string();
        // (dtx's -c splits its command on blanks, as dtrace does, with no quoting: a folder
        // under the target directory, whose path has none on a runner)
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("dtx-dotnet-pid-{}", std::process::id()));
        if dir.to_string_lossy().contains(char::is_whitespace) {
            return Err(format!(
                "{} has a blank, which -c cannot pass",
                dir.display()
            ));
        }
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("Program.cs"), APP).map_err(|e| e.to_string())?;
        std::fs::write(
            dir.join("app.csproj"),
            format!(
                r#"<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup>
    <OutputType>Exe</OutputType>
    <TargetFramework>net{major}.0</TargetFramework>
    <AssemblyName>app</AssemblyName>
    <ImplicitUsings>disable</ImplicitUsings>
    <Nullable>disable</Nullable>
  </PropertyGroup>
</Project>
"#
            ),
        )
        .map_err(|e| e.to_string())?;
        let out_dir = dir.join("out");
        let b = run(Command::new("dotnet")
            .args(["build", "-c", "Release", "-nologo", "-o"])
            .arg(&out_dir)
            .env("DOTNET_CLI_TELEMETRY_OPTOUT", "1")
            .env("DOTNET_NOLOGO", "1")
            .current_dir(&dir));
        assert!(
            b.status.success(),
            "dotnet build (SDK {v}) failed:\n{}\n{}",
            String::from_utf8_lossy(&b.stdout),
            String::from_utf8_lossy(&b.stderr)
        );
        eprintln!("built app.dll with the .NET SDK {v}");
        Ok(out_dir.join("app.dll"))
    });
    if let Some(why) = skip_reason() {
        cannot_run(test, &why);
        return None;
    }
    match built {
        Ok(p) => Some(p.as_path()),
        Err(why) => {
            cannot_run(test, why);
            None
        }
    }
}

/// `dtx -n prog -c "dotnet app.dll args"`: its output, after checking it succeeded.
fn dtx(app: &Path, prog: &str, args: &str) -> (String, String) {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let cmd = format!("dotnet {} {args}", app.display());
    let out = run(Command::new(env!("CARGO_BIN_EXE_dtx")).args(["-n", prog, "-c", &cmd]));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "dtx {prog} -c {cmd}: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    (stdout, stderr)
}

/// The numbers dtx printed for its aggregations: the numeric lines after the program's own.
fn aggregations(stdout: &str) -> Vec<i64> {
    stdout
        .lines()
        .filter(|l| !l.contains("total") && !l.contains("late"))
        .filter_map(|l| l.trim().parse::<i64>().ok())
        .collect()
}

#[test]
fn dotnet_pid_windows_entry_counts_every_call_and_sums_arg0() {
    let Some(app) = app("dotnet_pid_windows_entry_counts_every_call_and_sums_arg0") else {
        return;
    };
    let (out, err) = dtx(
        app,
        "pid$target:app::Work.Add:entry { @c = count(); @s = sum(arg0); }",
        "",
    );
    let sum: i64 = (0..5000).sum();
    assert_eq!(
        aggregations(&out),
        vec![5000, sum],
        "stdout:\n{out}\nstderr:\n{err}"
    );
    assert!(!err.contains("armed 0 times"), "{err}");
}

#[test]
fn dotnet_pid_windows_return_sums_the_return_values() {
    let Some(app) = app("dotnet_pid_windows_return_sums_the_return_values") else {
        return;
    };
    let (out, err) = dtx(
        app,
        "pid$target:app::Work.Add:return { @c = count(); @r = sum(arg1); }",
        "",
    );
    let sum: i64 = (0..5000).map(|i| i + 7).sum();
    assert_eq!(
        aggregations(&out),
        vec![5000, sum],
        "stdout:\n{out}\nstderr:\n{err}"
    );
}

#[test]
fn dotnet_pid_windows_a_method_compiled_later_is_caught() {
    let Some(app) = app("dotnet_pid_windows_a_method_compiled_later_is_caught") else {
        return;
    };
    let (out, err) = dtx(
        app,
        "pid$target:app::Work.Late:entry { @c = count(); @s = sum(arg0); }",
        "late 10",
    );
    assert_eq!(
        aggregations(&out),
        vec![1, 14],
        "stdout:\n{out}\nstderr:\n{err}"
    );
}

#[test]
fn dotnet_pid_windows_a_method_never_compiled_is_said() {
    let Some(app) = app("dotnet_pid_windows_a_method_never_compiled_is_said") else {
        return;
    };
    let (_, err) = dtx(app, "pid$target:app::Work.Late:entry { @c = count(); }", "");
    assert!(
        err.contains("Work.Late:entry' matched 1 probe, armed 0 times: not JIT-compiled yet"),
        "{err}"
    );
}

/// The program started here in its `wait` mode, past its first 5,000 calls (it has printed
/// `ready`): its stdin (a line lets it go on) and stdout.
fn started_waiting(
    app: &Path,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
) {
    use std::io::BufRead;
    let mut child = Command::new("dotnet")
        .arg(app)
        .arg("wait")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start dotnet app.dll wait");
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    while line.trim() != "ready" {
        line.clear();
        assert!(
            out.read_line(&mut line).expect("read") > 0,
            "the program ended"
        );
    }
    (child, out)
}

#[test]
fn dotnet_pid_windows_list_p_lists_the_methods_with_code() {
    let Some(app) = app("dotnet_pid_windows_list_p_lists_the_methods_with_code") else {
        return;
    };
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let (mut child, _out) = started_waiting(app);
    let pid = child.id();
    let out = run(Command::new(env!("CARGO_BIN_EXE_dtx")).args([
        "-l",
        "-p",
        &pid.to_string(),
        "-n",
        "pid$target:app::",
    ]));
    let _ = child.kill();
    let _ = child.wait();
    let so = String::from_utf8_lossy(&out.stdout);
    let se = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{so}\nstderr:\n{se}");
    let has = |f: &str, n: &str| {
        so.lines().any(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            c.len() == 5 && c[1] == format!("pid{pid}") && c[2] == "app" && c[3] == f && c[4] == n
        })
    };
    for f in ["Work.Add", "Program.Main"] {
        assert!(
            has(f, "entry") && has(f, "return"),
            "{f}:\n{so}\nstderr:\n{se}"
        );
    }
    // Late was never called: no code, nothing to list
    assert!(!so.contains("Work.Late"), "{so}");
}

/// What a `-p` run of `prog` over the waiting program gave: whether its BEGIN's `attached`
/// line came (then the program was let go: 1,000 more calls, then it ends, and dtx with it),
/// dtx's status, the rest of its stdout and its stderr.
struct Grabbed {
    attached: bool,
    success: bool,
    line: String,
    rest: String,
    stderr: String,
}

fn grabbed(app: &Path, prog: &str, env: &[(&str, &str)]) -> Grabbed {
    use std::io::{BufRead, Read, Write};
    let (mut child, _out) = started_waiting(app);
    let pid = child.id();
    let mut d = Command::new(env!("CARGO_BIN_EXE_dtx"))
        .args(["-q", "-n", prog, "-p", &pid.to_string()])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start dtx");
    let mut dout = std::io::BufReader::new(d.stdout.take().expect("dtx stdout"));
    let mut line = String::new();
    let attached = dout.read_line(&mut line).expect("read dtx") > 0 && line == "attached\n";
    if attached {
        let _ = child.stdin.as_mut().expect("stdin").write_all(b"go\n");
    } else {
        let _ = child.kill();
    }
    let reader = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = dout.read_to_string(&mut rest);
        rest
    });
    let start = Instant::now();
    while d.try_wait().expect("wait").is_none() {
        if start.elapsed() > TIMEOUT {
            let _ = d.kill();
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let st = d.wait().expect("dtx");
    let rest = reader.join().unwrap_or_default();
    let mut stderr = String::new();
    if let Some(mut e) = d.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let _ = child.kill();
    let _ = child.wait();
    Grabbed {
        attached,
        success: st.success(),
        line,
        rest,
        stderr,
    }
}

#[test]
fn dotnet_pid_windows_p_glob_matches_without_z() {
    let Some(app) = app("dotnet_pid_windows_p_glob_matches_without_z") else {
        return;
    };
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let g = grabbed(
        app,
        "BEGIN { printf(\"attached\\n\"); } pid$target:app:*Ad*:entry { @c = count(); @s = sum(arg0); }",
        &[],
    );
    let Grabbed {
        line, rest, stderr, ..
    } = &g;
    assert!(g.attached && g.success, "{line}{rest}\nstderr:\n{stderr}");
    let sum: i64 = (0..1000).sum();
    assert_eq!(
        aggregations(rest),
        vec![1000, sum],
        "stdout:\n{rest}\nstderr:\n{stderr}"
    );
}

/// Issue 42, finding 9: the rundown a `-p` run needs runs once, before the grab, in the
/// session the debugger loop then follows the runtime with; none of its events reaches the
/// EtwEventWrite breakpoints (a loop that started a session of its own ran a second rundown
/// on the held process, an event per method, each a stop of it).
#[test]
fn win3_9_dotnet_pid_windows_p_runs_the_rundown_once() {
    let Some(app) = app("win3_9_dotnet_pid_windows_p_runs_the_rundown_once") else {
        return;
    };
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let g = grabbed(
        app,
        "BEGIN { printf(\"attached\\n\"); } pid$target:app:*Ad*:entry { @c = count(); }",
        &[("DTX_CLR_STATS", "1")],
    );
    let Grabbed {
        line, rest, stderr, ..
    } = &g;
    assert!(g.attached && g.success, "{line}{rest}\nstderr:\n{stderr}");
    assert_eq!(
        aggregations(rest),
        vec![1000],
        "stdout:\n{rest}\nstderr:\n{stderr}"
    );
    // "dtx: the CLR's events of pid N: X in all, Y at EtwEventWrite (Z of the rundown)"
    let stats = stderr
        .lines()
        .find_map(|l| l.split_once("the CLR's events of pid ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no statistics line:\n{stderr}"));
    let numbers: Vec<u64> = stats
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    let [_pid, all, _at_write, of_rundown] = numbers[..] else {
        panic!("{stats}");
    };
    // the pre-grab rundown listed the program's methods into the loop's own table
    assert!(all > 0, "{stats}");
    assert_eq!(of_rundown, 0, "{stats}\n{stderr}");
}
