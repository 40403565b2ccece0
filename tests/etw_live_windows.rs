//! Live ETW on a real Windows machine: each test runs the built `dtx.exe` with a D program over
//! live sessions (the kernel logger, a user-mode session, both) and checks what it printed, and
//! that no `dtx-` session is left behind. They need an elevated prompt (a hosted GitHub Windows
//! runner is elevated; `.github/workflows/windows-live.yml` runs them there) and skip with a
//! message when not elevated, under Wine (whose OpenTrace is a stub) or when `DTX_LIVE_TESTS=0`.
//! Run them one at a time: `cargo test --release --test etw_live_windows -- --test-threads=1
//! --nocapture` (a lock keeps them apart anyway). `docs/live-windows-tests.md` tells a Windows
//! user how to run them by hand.
#![cfg(windows)]

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
fn elevated() -> Option<bool> {
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
fn under_wine() -> bool {
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

/// The lock of the live tests when they can run here; None after saying why they are skipped.
fn live(test: &str) -> Option<MutexGuard<'static, ()>> {
    if let Some(why) = skip_reason() {
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
    let mut child = Command::new(env!("CARGO_BIN_EXE_dtx"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start dtx.exe");
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
