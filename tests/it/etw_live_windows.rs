//! Live ETW on a real Windows machine: each test runs the built `dtx.exe` with a D program over
//! live sessions (the kernel logger, a user-mode session, both) and checks what it printed, and
//! that no `dtx-` session is left behind. They need an elevated prompt (a hosted GitHub Windows
//! runner is elevated; `.github/workflows/windows-live.yml` runs them there) and skip with a
//! message when not elevated, under Wine (whose OpenTrace is a stub) or when `DTX_LIVE_TESTS=0`;
//! with `DTX_LIVE_TESTS=require` (the workflow sets it) such a test fails instead of skipping.
//! Run them one at a time: `cargo test --release --test it etw_live_windows:: --
//! --test-threads=1 --nocapture` (a lock keeps them apart anyway). `docs/live-windows-tests.md` tells a Windows
//! user how to run them by hand.

use crate::support::cli::Dtx;
use crate::support::pty;
use crate::support::stacks;

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How long one dtx run may take before it is killed as hung.
const TIMEOUT: Duration = Duration::from_secs(60);

/// Keeps the live tests from running at once (they start sessions and look for leftover ones).
static LIVE: Mutex<()> = Mutex::new(());

/// Whether this process's token is elevated (an Administrator prompt), or None when the token
/// cannot be read.
pub(crate) fn elevated() -> Option<bool> {
    use windows_sys::Win32::Foundation::{CloseHandle, HANDLE};
    use windows_sys::Win32::Security::{
        GetTokenInformation, TokenElevation, TOKEN_ELEVATION, TOKEN_QUERY,
    };
    use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};
    let mut token: HANDLE = std::ptr::null_mut();
    // SAFETY: the pseudo handle of this process; `token` receives a handle we close below
    if unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) } == 0 {
        return None;
    }
    let mut info = TOKEN_ELEVATION { TokenIsElevated: 0 };
    let mut len = 0u32;
    // SAFETY: `info` is a TOKEN_ELEVATION of the size passed; `token` is open
    let ok = unsafe {
        GetTokenInformation(
            token,
            TokenElevation,
            (&mut info as *mut TOKEN_ELEVATION).cast(),
            std::mem::size_of::<TOKEN_ELEVATION>() as u32,
            &mut len,
        )
    };
    // SAFETY: the handle OpenProcessToken gave
    unsafe { CloseHandle(token) };
    (ok != 0).then_some(info.TokenIsElevated != 0)
}

/// Whether this runs under Wine (its ntdll exports `wine_get_version`).
pub(crate) fn under_wine() -> bool {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleA, GetProcAddress};
    // SAFETY: NUL-terminated names; ntdll is loaded in every process
    unsafe {
        let ntdll = GetModuleHandleA(c"ntdll.dll".as_ptr().cast());
        !ntdll.is_null() && GetProcAddress(ntdll, c"wine_get_version".as_ptr().cast()).is_some()
    }
}

/// Why live ETW cannot be tested here, or None when it can.
fn skip_reason() -> Option<String> {
    if std::env::var("DTX_LIVE_TESTS").is_ok_and(|v| v.trim() == "0") {
        return Some("DTX_LIVE_TESTS=0".into());
    }
    if under_wine() {
        return Some("running under Wine, whose live ETW sessions are stubs".into());
    }
    match elevated() {
        Some(true) => None,
        Some(false) => Some("not elevated: live ETW needs an Administrator prompt".into()),
        None => Some("the process token could not be read to tell elevation".into()),
    }
}

/// Whether a live test that cannot run must fail rather than skip (`DTX_LIVE_TESTS=require`,
/// as the Windows workflow sets it: a runner that lost its elevation must not pass green).
fn required() -> bool {
    std::env::var("DTX_LIVE_TESTS").is_ok_and(|v| v.trim() == "require")
}

/// The lock of the live tests when they can run here; None after saying why they are skipped.
/// With `DTX_LIVE_TESTS=require` a test that cannot run fails instead.
fn live(test: &str) -> Option<MutexGuard<'static, ()>> {
    if let Some(why) = skip_reason() {
        assert!(
            !required(),
            "{test}: DTX_LIVE_TESTS=require, but the test cannot run here: {why}"
        );
        eprintln!("skipped: {test}: {why}");
        return None;
    }
    Some(LIVE.lock().unwrap_or_else(|e| e.into_inner()))
}

/// A finished (or killed) dtx run.
struct Run {
    args: Vec<String>,
    /// None when it was killed after [`TIMEOUT`].
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Run {
    /// Everything about the run, for a failed assertion.
    fn report(&self) -> String {
        let status = match self.status {
            Some(s) => format!("{s}"),
            None => format!("killed after {} s (hung)", TIMEOUT.as_secs()),
        };
        format!(
            "dtx {:?}\nstatus: {status}, took {:.1} s\n--- stdout ---\n{}\n--- stderr ---\n{}\n",
            self.args,
            self.took.as_secs_f64(),
            self.stdout,
            self.stderr
        )
    }

    /// Panics, with the report, unless dtx ended by itself with status 0.
    fn assert_ok(&self) {
        assert!(
            self.status.is_some_and(|s| s.success()),
            "dtx did not end with status 0\n{}",
            self.report()
        );
    }

    /// The number on the first stdout line that starts with `tag` (as `printa("tag %@d\n")`
    /// prints it).
    fn count(&self, tag: &str) -> Option<u64> {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(tag)?.trim().parse().ok())
    }

    /// [`Run::count`], which must be there and above zero.
    fn positive_count(&self, tag: &str) -> u64 {
        match self.count(tag) {
            Some(n) if n > 0 => n,
            other => panic!(
                "expected a count above 0 on a line {tag:?}, got {other:?}\n{}",
                self.report()
            ),
        }
    }
}

/// A dtx process under way, its output read by two threads.
struct Running {
    args: Vec<String>,
    child: Child,
    started: Instant,
    stdout: JoinHandle<String>,
    stderr: JoinHandle<String>,
}

/// Reads a pipe to its end on a thread of its own.
fn drain(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<String> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).replace("\r\n", "\n")
    })
}

/// Starts dtx with `args`.
fn start(args: &[&str]) -> Running {
    start_without(args, &[])
}

/// Starts dtx with `args`, the environment variables `unset` left out of its environment.
fn start_without(args: &[&str], unset: &[&str]) -> Running {
    let mut dtx = Dtx::new(args);
    for v in unset {
        dtx = dtx.env_remove(v);
    }
    let mut child = dtx.spawn();
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    Running {
        args: args.iter().map(|a| a.to_string()).collect(),
        child,
        started: Instant::now(),
        stdout,
        stderr,
    }
}

impl Running {
    /// Waits for dtx to end, calling `each` every `every` meanwhile (to make the events the
    /// program waits for); kills it after [`TIMEOUT`].
    fn finish_while(mut self, every: Duration, mut each: impl FnMut()) -> Run {
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) => {}
                Err(e) => panic!("waiting for dtx: {e}"),
            }
            if self.started.elapsed() > TIMEOUT {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            each();
            thread::sleep(every);
        };
        let took = self.started.elapsed();
        Run {
            args: self.args,
            status,
            stdout: self.stdout.join().unwrap_or_default(),
            stderr: self.stderr.join().unwrap_or_default(),
            took,
        }
    }

    /// Waits for dtx to end; kills it after [`TIMEOUT`].
    fn finish(self) -> Run {
        self.finish_while(Duration::from_millis(50), || {})
    }
}

/// Runs dtx with `args` to its end.
fn dtx(args: &[&str]) -> Run {
    start(args).finish()
}

/// The lines of `logman query -ets` that name a dtx session.
fn dtx_sessions() -> Vec<String> {
    let out = Command::new("logman")
        .args(["query", "-ets"])
        .stdin(Stdio::null())
        .output()
        .expect("run logman query -ets");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "logman query -ets failed ({}):\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .filter(|l| l.to_ascii_lowercase().contains("dtx-"))
        .map(|l| l.trim().to_string())
        .collect()
}

/// Panics when a dtx session is still running after `run`.
fn assert_no_sessions_after(run: &Run) {
    let left = dtx_sessions();
    assert!(
        left.is_empty(),
        "sessions left after dtx ended: {left:?}\n{}",
        run.report()
    );
}

/// Keeps a thread of this process busy in the kernel (file metadata look-ups and yields) until
/// the returned flag is set, so that profile samples of this process land in kernel code.
fn busy_in_kernel() -> (Arc<AtomicBool>, JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let exe = std::env::current_exe().unwrap_or_default();
    let worker = thread::spawn(move || {
        while !flag.load(Ordering::Relaxed) {
            let _ = std::fs::metadata(&exe);
            thread::yield_now();
        }
    });
    (stop, worker)
}

/// The kernel logger sees context switches: `sched:::on-cpu` counts some in two seconds.
#[test]
fn live_windows_sched_on_cpu_counts() {
    let Some(_live) = live("live_windows_sched_on_cpu_counts") else {
        return;
    };
    let run = dtx(&[
        "-q",
        "-n",
        "sched:::on-cpu { @n = count(); } tick-2s { printa(\"on-cpu %@d\\n\", @n); exit(0); }",
    ]);
    run.assert_ok();
    let n = run.positive_count("on-cpu ");
    eprintln!("on-cpu: {n} context switches in 2 s");
}

/// `dtx --mcp`'s `run` without a trace traces live ETW (the command line's live source, handed
/// to the server), and its sessions are gone when the run's answer has come.
#[test]
fn live_windows_mcp_run_counts_on_cpu() {
    use dtx::output::json::Json;
    let Some(_live) = live("live_windows_mcp_run_counts_on_cpu") else {
        return;
    };
    let answers = crate::support::mcp::tool_calls_by_hand(&[(
        "run",
        Json::object([
            ("program", Json::str("sched:::on-cpu { @n = count(); }")),
            ("seconds", Json::Float(2.0)),
        ]),
    )]);
    let (run, err) = &answers[0];
    assert!(!err, "{run:?}");
    let rows = match run
        .get("aggregations")
        .and_then(|a| match a {
            Json::Array(a) => a.first(),
            _ => None,
        })
        .and_then(|a| a.get("rows"))
    {
        Some(Json::Array(r)) => r.clone(),
        other => panic!("no rows: {other:?} in {run:?}"),
    };
    let n = match rows.first().and_then(|r| r.get("value")) {
        Some(Json::Int(i)) => *i,
        Some(Json::UInt(u)) => *u as i64,
        other => panic!("no value: {other:?} in {run:?}"),
    };
    assert!(n > 0, "no context switch in 2 s of live ETW: {run:?}");
    let left = dtx_sessions();
    assert!(left.is_empty(), "sessions left after the MCP run: {left:?}");
}

/// A process's start is seen with its process id: the test starts `cmd /c exit 0` again and
/// again until dtx reports one and exits.
#[test]
fn live_windows_proc_start_of_a_child() {
    let Some(_live) = live("live_windows_proc_start_of_a_child") else {
        return;
    };
    let running = start(&[
        "-q",
        "-n",
        "proc:::start /execname == \"cmd.exe\"/ { printf(\"started %d\\n\", pid); exit(0); }
         tick-30s { printf(\"no cmd.exe start seen\\n\"); exit(0); }",
    ]);
    let mut pids = Vec::new();
    let mut spawned = 0;
    let run = running.finish_while(Duration::from_millis(300), || {
        // give dtx a moment to start its session before the first child
        spawned += 1;
        if spawned < 3 {
            return;
        }
        if let Ok(mut child) = Command::new("cmd")
            .args(["/c", "exit 0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            pids.push(child.id());
            let _ = child.wait();
        }
    });
    run.assert_ok();
    let pid: u32 = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("started ")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no \"started <pid>\" line\n{}", run.report()));
    assert!(
        pids.contains(&pid),
        "the started pid {pid} is none of the {} cmd.exe started by the test ({pids:?})\n{}",
        pids.len(),
        run.report()
    );
}

/// A user-mode provider by name: the DNS client's events are counted while the test resolves
/// names (whether the names resolve does not matter).
#[test]
fn live_windows_dns_client_events() {
    let Some(_live) = live("live_windows_dns_client_events") else {
        return;
    };
    let running = start(&[
        "-q",
        "-n",
        "microsoft-windows-dns-client:::events { @n = count(); }
         tick-4s { printa(\"dns %@d\\n\", @n); exit(0); }",
    ]);
    let me = std::process::id();
    let mut round = 0u32;
    let run = running.finish_while(Duration::from_millis(250), || {
        use std::net::ToSocketAddrs;
        round += 1;
        // a name never asked before each time, so that no cache answers it
        let fresh = format!("dtx-live-{me}-{round}.example.com");
        for name in ["localhost", "example.invalid", fresh.as_str()] {
            let _ = (name, 80).to_socket_addrs();
        }
    });
    run.assert_ok();
    let n = run.positive_count("dns ");
    eprintln!("dns client: {n} events");
    assert_no_sessions_after(&run);
}

/// Profile samples carry kernel stacks with named frames (`module`function+0x..`): samples of
/// dtx itself and of this test process, which keeps a thread busy in the kernel meanwhile.
#[test]
fn live_windows_profile_sample_named_stack() {
    let Some(_live) = live("live_windows_profile_sample_named_stack") else {
        return;
    };
    let (stop, worker) = busy_in_kernel();
    let program = format!(
        "profile:::sample-1ms /execname == \"dtx.exe\" || pid == {}/ {{ @[stack(5)] = count(); }}
         tick-3s {{ exit(0); }}",
        std::process::id()
    );
    let run = dtx(&["-q", "-n", &program]);
    stop.store(true, Ordering::Relaxed);
    let _ = worker.join();
    run.assert_ok();
    let named = run
        .stdout
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("ntoskrnl") || l.contains('!') || l.contains('`'))
        .count();
    assert!(named > 0, "no named stack frame\n{}", run.report());
    eprintln!("profile: {named} named frame lines");
}

/// Sessions are stopped when a run ends by `exit(0)`: the kernel and the user-mode session of a
/// program with a kernel probe and a manifest provider's probe.
#[test]
fn live_windows_sessions_stop_after_exit() {
    let Some(_live) = live("live_windows_sessions_stop_after_exit") else {
        return;
    };
    let run = dtx(&[
        "-q",
        "-n",
        "sched:::on-cpu { @n = count(); } microsoft-windows-dns-client:::events { @d = count(); }
         tick-1s { printa(\"on-cpu %@d\\n\", @n); exit(0); }",
    ]);
    run.assert_ok();
    run.positive_count("on-cpu ");
    assert_no_sessions_after(&run);
}

/// Sessions are stopped when a run ends because its `-c` command ended.
#[test]
fn live_windows_sessions_stop_after_command_ends() {
    let Some(_live) = live("live_windows_sessions_stop_after_command_ends") else {
        return;
    };
    let run = dtx(&[
        "-q",
        "-c",
        "cmd /c ping -n 3 127.0.0.1",
        "-n",
        "sched:::on-cpu { @n = count(); }",
    ]);
    run.assert_ok();
    assert_no_sessions_after(&run);
}

/// A second dtx does not stop the first one's sessions: A runs six seconds, B starts and ends
/// within them, and A still ends normally with its count.
#[test]
fn live_windows_second_dtx_leaves_the_first_alone() {
    let Some(_live) = live("live_windows_second_dtx_leaves_the_first_alone") else {
        return;
    };
    let a = start(&[
        "-q",
        "-n",
        "sched:::on-cpu { @n = count(); } tick-6s { printa(\"a on-cpu %@d\\n\", @n); exit(0); }",
    ]);
    thread::sleep(Duration::from_secs(2));
    let b = dtx(&[
        "-q",
        "-n",
        "sched:::on-cpu { @n = count(); } tick-1s { printa(\"b on-cpu %@d\\n\", @n); exit(0); }",
    ]);
    let a = a.finish();
    a.assert_ok();
    a.positive_count("a on-cpu ");
    assert!(
        a.took >= Duration::from_secs(5),
        "dtx A ended early, after {:.1} s\n{}",
        a.took.as_secs_f64(),
        a.report()
    );
    b.assert_ok();
    b.positive_count("b on-cpu ");
    assert_no_sessions_after(&a);
}

/// The line cargo-flamegraph runs on Windows.
const FLAMEGRAPH_LINE: &str = "profile-997 /pid == $target/ { @[ustack(100)] = count(); }";

/// How long (CPU ms) the flamegraph target burns.
const BURN_MS: u64 = 1500;

/// `tests/pid_windows/burnwin.c` built with MSVC as a user builds a program with symbols
/// (`cl /O2 /Zi`, linked with `/DEBUG`), then moved with its PDB into `dir/run/` (the path the
/// linker recorded in the program no longer holds the PDB: it is found next to the program).
/// The compiler is MSVC's `cl.exe` (found as build scripts find it: the cc crate looks in the
/// environment, then asks vswhere for Visual Studio), else `clang-cl` on the PATH. The program,
/// or why it could not be built.
fn build_burnwin(dir: &std::path::Path) -> Result<std::path::PathBuf, String> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pid_windows/burnwin.c");
    let build = dir.join("build");
    std::fs::create_dir_all(&build).map_err(|e| e.to_string())?;
    let args = ["/nologo", "/O2", "/Zi", "/Feburnwin.exe"];
    let link = ["/link", "/DEBUG", "/INCREMENTAL:NO"];
    let mut cl = match cc::windows_registry::find_tool("x86_64-pc-windows-msvc", "cl.exe") {
        Some(tool) => tool.to_command(),
        None => {
            let clang_cl = Command::new("clang-cl").arg("--version").output();
            if !clang_cl.is_ok_and(|o| o.status.success()) {
                return Err("no C compiler: neither MSVC's cl.exe nor clang-cl was found".into());
            }
            Command::new("clang-cl")
        }
    };
    let out = cl
        .args(args)
        .arg(&src)
        .args(link)
        .current_dir(&build)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run the C compiler: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building burnwin.c failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let run = dir.join("run");
    std::fs::create_dir_all(&run).map_err(|e| e.to_string())?;
    for f in ["burnwin.exe", "burnwin.pdb"] {
        std::fs::rename(build.join(f), run.join(f)).map_err(|e| format!("moving {f}: {e}"))?;
    }
    Ok(run.join("burnwin.exe"))
}

/// The flamegraph line, live, on a CPU-bound program built with MSVC and its PDB: the run ends
/// when the program ends, no session is left, and `out.stacks` holds the program's stacks named
/// through its PDB (found next to it): at least half of the samples are stacks of three frames
/// or more reading `burnwin_leaf`, `burnwin_middle`, `burnwin_outer`, `main` from the inside
/// out, and inferno's dtrace collapser folds the file into lines with that chain.
#[test]
fn live_windows_flamegraph_line_names_the_targets_functions() {
    let Some(_live) = live("live_windows_flamegraph_line_names_the_targets_functions") else {
        return;
    };
    // -c splits its command at blanks: a folder of the target directory (no blanks on the
    // hosted runner) rather than the user's temporary folder
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a temporary folder");
    if dir
        .path()
        .display()
        .to_string()
        .contains(char::is_whitespace)
    {
        let why = format!(
            "the build folder {} has a blank, which -c cannot pass",
            dir.path().display()
        );
        assert!(!required(), "DTX_LIVE_TESTS=require: {why}");
        eprintln!("skipped: live_windows_flamegraph_line_names_the_targets_functions: {why}");
        return;
    }
    let exe = match build_burnwin(dir.path()) {
        Ok(exe) => exe,
        Err(why) => {
            assert!(!required(), "DTX_LIVE_TESTS=require: {why}");
            eprintln!("skipped: live_windows_flamegraph_line_names_the_targets_functions: {why}");
            return;
        }
    };
    let out = dir.path().join("out.stacks");
    let out_arg = out.display().to_string();
    let cmd = format!("{} {BURN_MS}", exe.display());
    // the PDB must be found next to the program, not on a symbol path
    let run = start_without(
        &[
            "-x",
            "ustackframes=100",
            "-n",
            FLAMEGRAPH_LINE,
            "-o",
            &out_arg,
            "-c",
            &cmd,
        ],
        &["_NT_SYMBOL_PATH", "_NT_ALT_SYMBOL_PATH"],
    )
    .finish();
    run.assert_ok();
    assert_no_sessions_after(&run);
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let stacks = stacks::stack_entries(&text);
    let total: u64 = stacks.iter().map(|s| s.1).sum();
    // at 997 Hz no more samples than the CPU time it burnt (each fires once), give or take
    assert!(
        total > 300 && total <= BURN_MS * 997 / 1000 * 115 / 100 + 10,
        "{total} samples in {BURN_MS} ms of CPU\n{text}\n{}",
        run.report()
    );
    let chain = ["burnwin_leaf", "burnwin_middle", "burnwin_outer", "main"];
    let good = stacks::samples_through(&stacks, "burnwin.exe", &chain);
    assert!(
        good * 2 >= total,
        "{good} of {total} samples have the stack {chain:?}\n{text}\n{}",
        run.report()
    );
    let outward = "burnwin.exe`main;burnwin.exe`burnwin_outer;burnwin.exe`burnwin_middle;\
                   burnwin.exe`burnwin_leaf";
    let (folded_total, with_main) = stacks::inferno_counts(&text, outward);
    assert_eq!(folded_total, total, "{text}");
    assert_eq!(with_main, good, "{text}");
    eprintln!(
        "flamegraph line: {good} of {total} samples have the full stack\n{}",
        run.stderr
    );
}

/// The sessions of the dtx whose process id is `pid` (`dtx-kernel-<pid>-<start>`,
/// `dtx-user-<pid>-<start>`...), as `logman query -ets` lists them.
fn sessions_of(pid: u32) -> Vec<String> {
    // dtx-<kind>-<pid>-<process start time>
    let tag = format!("-{pid}-");
    dtx_sessions()
        .into_iter()
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|name| name.contains(&tag))
        })
        .collect()
}

/// Waits until the dtx `pid` has a session running (it has started tracing).
fn wait_for_sessions(pid: u32, limit: Duration) -> Vec<String> {
    let started = Instant::now();
    loop {
        let s = sessions_of(pid);
        if !s.is_empty() || started.elapsed() > limit {
            return s;
        }
        thread::sleep(Duration::from_millis(200));
    }
}

/// The system's sampling interval is what profile-997 asks for while a run samples, and what
/// it was before once the run has ended (issue 28: the interval is system-wide and must not be
/// left changed).
#[test]
fn live_windows_interval_set_and_restored() {
    let Some(_live) = live("live_windows_interval_set_and_restored") else {
        return;
    };
    use dtx::sources::etw_live::{plan, windows::system_profile_interval};
    let before = system_profile_interval().expect("the sampling interval can be read");
    let asked = plan::clamp_profile_interval(plan::sample_interval("profile-997").unwrap());
    let running = start(&[
        "-q",
        "-n",
        "profile-997 { @n = count(); } tick-3s { printa(\"samples %@d\\n\", @n); exit(0); }",
    ]);
    let mut seen = Vec::new();
    let run = running.finish_while(Duration::from_millis(50), || {
        if let Some(i) = system_profile_interval() {
            if !seen.contains(&i) {
                seen.push(i);
            }
        }
    });
    run.assert_ok();
    run.positive_count("samples ");
    let after = system_profile_interval();
    eprintln!("interval: before {before}, while running {seen:?}, after {after:?}, asked {asked}");
    assert!(
        before == asked || seen.iter().any(|&i| i != before),
        "the interval stayed {before} while profile-997 (asking {asked}) ran: {seen:?}\n{}",
        run.report()
    );
    assert_eq!(after, Some(before), "not restored\n{}", run.report());
}

/// TDH decodes a manifest provider's fields by name: the DNS client's `QueryName` is the name
/// the test asked for (under `.invalid`, RFC 6761, so that it cannot resolve).
#[test]
fn live_windows_dns_query_name_field() {
    let Some(_live) = live("live_windows_dns_query_name_field") else {
        return;
    };
    let name = format!("dtx-live-{}.invalid", std::process::id());
    let program = format!(
        "microsoft-windows-dns-client:::events /etwfield_str(\"QueryName\") == \"{name}\"/ {{
             printf(\"query %s event %d\\n\", etwfield_str(\"QueryName\"), arg0); exit(0); }}
         tick-20s {{ printf(\"no query seen\\n\"); exit(0); }}"
    );
    let running = start(&["-q", "-n", &program]);
    let run = running.finish_while(Duration::from_millis(250), || {
        use std::net::ToSocketAddrs;
        let _ = (name.as_str(), 80).to_socket_addrs();
    });
    run.assert_ok();
    assert!(
        run.stdout.contains(&format!("query {name} event ")),
        "no DNS client event with QueryName {name}\n{}",
        run.report()
    );
    assert_no_sessions_after(&run);
}

/// Ctrl-C's twin sent by GenerateConsoleCtrlEvent (CTRL_BREAK_EVENT: Windows delivers
/// CTRL_C_EVENT to no process group but the caller's own, so a test cannot aim it at one child;
/// dtx handles both alike) ends a run that would go on forever, and leaves no session.
#[test]
fn live_windows_ctrl_break_leaves_no_session() {
    let Some(_live) = live("live_windows_ctrl_break_leaves_no_session") else {
        return;
    };
    use std::os::windows::process::CommandExt;
    use windows_sys::Win32::System::Console::{GenerateConsoleCtrlEvent, CTRL_BREAK_EVENT};
    const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
    let mut child = Command::new(env!("CARGO_BIN_EXE_dtx"))
        .args(["-q", "-n", "sched:::on-cpu { @n = count(); }"])
        .creation_flags(CREATE_NEW_PROCESS_GROUP)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start dtx.exe");
    let pid = child.id();
    let err = drain(child.stderr.take());
    let sessions = wait_for_sessions(pid, Duration::from_secs(30));
    assert!(!sessions.is_empty(), "dtx {pid} started no session");
    // SAFETY: a console control event to the process group the child leads
    let sent = unsafe { GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, pid) };
    assert_ne!(
        sent,
        0,
        "GenerateConsoleCtrlEvent failed: {}",
        std::io::Error::last_os_error()
    );
    let started = Instant::now();
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break Some(s);
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(50));
    };
    let err = err.join().unwrap_or_default();
    assert!(
        status.is_some(),
        "dtx did not end after CTRL_BREAK_EVENT\n{err}"
    );
    let left = sessions_of(pid);
    assert!(
        left.is_empty(),
        "left after CTRL_BREAK_EVENT: {left:?} (had {sessions:?})\n{err}"
    );
}

/// The console itself, live, in a pseudo console (ConPTY, as Windows Terminal hosts it): a
/// program's table shows rows from the live sessions, keys reach it, Ctrl-Q quits with 0, and
/// no session is left.
#[test]
fn live_windows_console_runs_live_and_quits() {
    let Some(_live) = live("live_windows_console_runs_live_and_quits") else {
        return;
    };
    let state = tempfile::tempdir().expect("a temporary folder");
    let state_dir = state.path().to_string_lossy().into_owned();
    let mut s = pty::PtySession::spawn(
        env!("CARGO_BIN_EXE_dtx"),
        &["--tui", "-n", "sched:::on-cpu { @[execname] = count(); }"],
        &[("APPDATA", &state_dir), ("LOCALAPPDATA", &state_dir)],
        120,
        36,
    );
    let pid = s.child.process_id().expect("the console's pid");
    s.wait_for("live rows", Duration::from_secs(60), |t| {
        t.to_ascii_lowercase().contains(".exe")
    });
    assert!(
        !sessions_of(pid).is_empty(),
        "the console runs without a session"
    );
    // a key the console answers: Ctrl-N opens a new script in the editor
    s.send("\x0e");
    s.wait_for("an empty editor", Duration::from_secs(10), |t| {
        t.contains("untitled.d")
    });
    s.send(pty::CTRL_Q);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if s.contents().contains("not saved") {
            s.send("y");
            break;
        }
        if let Ok(Some(_)) = s.child.try_wait() {
            break;
        }
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        s.wait_exit(Duration::from_secs(20)),
        Some(0),
        "{}",
        s.contents()
    );
    let left = sessions_of(pid);
    assert!(left.is_empty(), "left after the console quit: {left:?}");
}

/// Closing the console's window (here its pseudo console: ClosePseudoConsole sends
/// CTRL_CLOSE_EVENT, as closing a console window does) leaves no session: Windows gives the
/// handler a few seconds before it ends dtx.
#[test]
fn live_windows_console_close_leaves_no_session() {
    let Some(_live) = live("live_windows_console_close_leaves_no_session") else {
        return;
    };
    let state = tempfile::tempdir().expect("a temporary folder");
    let state_dir = state.path().to_string_lossy().into_owned();
    let s = pty::PtySession::spawn(
        env!("CARGO_BIN_EXE_dtx"),
        &["--tui", "-n", "profile-997 { @[execname] = count(); }"],
        &[("APPDATA", &state_dir), ("LOCALAPPDATA", &state_dir)],
        120,
        36,
    );
    let pid = s.child.process_id().expect("the console's pid");
    let sessions = wait_for_sessions(pid, Duration::from_secs(60));
    assert!(!sessions.is_empty(), "the console {pid} started no session");
    let mut child = s.close();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        thread::sleep(Duration::from_millis(100));
    }
    let ended = matches!(child.try_wait(), Ok(Some(_)));
    if !ended {
        let _ = child.kill();
    }
    let left = sessions_of(pid);
    assert!(
        left.is_empty(),
        "left after the console was closed: {left:?} (had {sessions:?}; dtx ended: {ended})"
    );
}

/// Two concurrent dtx runs and the system-wide sampling interval (issue 28): A samples at
/// 5 kHz; B, which asks for 997 Hz while A runs, leaves A's interval alone and says so; B's
/// end does not restore it under A; A's end gives the system its value back.
#[test]
fn live_fix_windows_two_runs_share_the_interval() {
    use dtx::sources::etw_live::windows::sampling_interval;
    let Some(_live) = live("live_fix_windows_two_runs_share_the_interval") else {
        return;
    };
    let Some(before) = sampling_interval() else {
        let why = "the sampling interval cannot be read on this system";
        assert!(!required(), "DTX_LIVE_TESTS=require: {why}");
        eprintln!("skipped: live_fix_windows_two_runs_share_the_interval: {why}");
        return;
    };
    let a = start(&[
        "-q",
        "-n",
        "profile-4999 { @n = count(); } tick-8s { printa(\"a samples %@d\\n\", @n); exit(0); }",
    ]);
    thread::sleep(Duration::from_secs(2));
    let during_a = sampling_interval();
    let b = dtx(&[
        "-q",
        "-n",
        "profile-997 { @n = count(); } tick-1s { printa(\"b samples %@d\\n\", @n); exit(0); }",
    ]);
    let after_b = sampling_interval();
    let a = a.finish();
    let after_a = sampling_interval();
    a.assert_ok();
    b.assert_ok();
    a.positive_count("a samples ");
    assert!(
        during_a.is_some_and(|i| i < before),
        "A did not set its interval (about 0.2 ms): {during_a:?}, before {before}\n{}",
        a.report()
    );
    assert!(
        b.stderr.contains("another dtx"),
        "B did not say that another dtx holds the interval\n{}",
        b.report()
    );
    assert_eq!(
        after_b,
        during_a,
        "B's end changed A's interval\n{}",
        b.report()
    );
    assert_eq!(
        after_a,
        Some(before),
        "A's end did not restore the interval\n{}",
        a.report()
    );
    assert_no_sessions_after(&a);
}

/// A `dtx-` session left under a pid that now names another process instance (here: this test
/// process, whose start time is not the session's) is stale: the next dtx stops it before its
/// own sessions start (issue 28: "a stale session under a reused pid is never cleaned up").
#[test]
fn live_fix_windows_stale_session_under_a_reused_pid_is_stopped() {
    let Some(_live) = live("live_fix_windows_stale_session_under_a_reused_pid_is_stopped") else {
        return;
    };
    // a session named as a dtx of this pid that started at time 1 would name it
    let name = format!("dtx-user-{}-1", std::process::id());
    let tmp = tempfile::tempdir().expect("a temporary folder");
    let dir = tmp.path();
    let made = Command::new("logman")
        .args(["start", &name, "-p", "Microsoft-Windows-DNS-Client", "-o"])
        .arg(dir.join("stale.etl"))
        .arg("-ets")
        .stdin(Stdio::null())
        .output()
        .expect("run logman start");
    assert!(
        made.status.success(),
        "logman start {name} failed:\n{}{}",
        String::from_utf8_lossy(&made.stdout),
        String::from_utf8_lossy(&made.stderr)
    );
    assert!(
        dtx_sessions().iter().any(|l| l.contains(&name)),
        "the stale session did not start"
    );
    let run = dtx(&[
        "-q",
        "-n",
        "sched:::on-cpu { @n = count(); } tick-1s { exit(0); }",
    ]);
    let left = dtx_sessions();
    if left.iter().any(|l| l.contains(&name)) {
        let _ = Command::new("logman")
            .args(["stop", &name, "-ets"])
            .output();
    }
    run.assert_ok();
    assert!(left.is_empty(), "sessions left: {left:?}\n{}", run.report());
}
