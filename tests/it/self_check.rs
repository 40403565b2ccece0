//! `dtx --check`, the self-check a user runs first (src/cli/selfcheck): its table, verdict,
//! exit status and JSON document. On Linux: as root every check passes (skipped with a message
//! when not root); run as an unprivileged user (uid 65534 through `setpriv`, as root) it says
//! what needs root and exits non-zero. On Windows (scripts/windows-check.sh runs this under
//! Wine): under Wine every ETW check is reported as not possible with Wine's reason and the
//! status is 3; on a real machine elevated every check passes, not elevated the ETW checks
//! say they need elevation.

use std::process::ExitStatus;
use std::time::{Duration, Instant};

use crate::support::cli::Dtx;

use dtx::output::json::{self, Json};

/// How long one self-check may take: it promises under a minute.
const LIMIT: Duration = Duration::from_secs(90);

/// A finished self-check: status, stdout, stderr.
struct Checked {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Checked {
    fn report(&self) -> String {
        format!(
            "status {} after {:.1} s\n--- stdout ---\n{}--- stderr ---\n{}",
            self.status,
            self.took.as_secs_f64(),
            self.stdout,
            self.stderr
        )
    }
}

/// Runs `prefix... dtx args...` to its end, failing the test when it takes over [`LIMIT`].
fn run(prefix: &[&str], args: &[&str]) -> Checked {
    run_exe(prefix, std::ffi::OsStr::new(crate::support::cli::DTX), args)
}

/// [`run`] with the dtx executable at `exe`.
fn run_exe(prefix: &[&str], exe: &std::ffi::OsStr, args: &[&str]) -> Checked {
    let started = Instant::now();
    let o = Dtx::under_exe(prefix, exe, args).timeout(LIMIT).output();
    Checked {
        status: o.status,
        stdout: String::from_utf8_lossy(&o.stdout).replace("\r\n", "\n"),
        stderr: String::from_utf8_lossy(&o.stderr).replace("\r\n", "\n"),
        took: started.elapsed(),
    }
}

/// The `checks` of a JSON report as (name, result, detail), after checking the document's
/// shape: every item has the three string members and a result of pass, fail or skip; its
/// `status` is the exit status.
fn checks_of(c: &Checked) -> Vec<(String, String, String)> {
    let doc = json::parse(&c.stdout).unwrap_or_else(|e| panic!("not JSON: {e}\n{}", c.report()));
    let Some(Json::Array(items)) = doc.get("checks") else {
        panic!("no checks list\n{}", c.report());
    };
    assert!(!items.is_empty(), "{}", c.report());
    assert_eq!(
        doc.get("status"),
        Some(&Json::Int(c.status.code().unwrap_or(-1) as i64)),
        "{}",
        c.report()
    );
    assert!(
        matches!(doc.get("verdict"), Some(Json::Str(v)) if v.starts_with("dtx --check: ")),
        "{}",
        c.report()
    );
    items
        .iter()
        .map(|i| {
            let s = |k: &str| match i.get(k) {
                Some(Json::Str(s)) => s.clone(),
                other => panic!("check member {k} is {other:?}\n{}", c.report()),
            };
            let (name, result, detail) = (s("name"), s("result"), s("detail"));
            assert!(
                ["pass", "fail", "skip"].contains(&result.as_str()),
                "{result}\n{}",
                c.report()
            );
            assert!(!detail.is_empty(), "{name} has no detail\n{}", c.report());
            (name, result, detail)
        })
        .collect()
}

/// `--check` takes no program, trace or target: a usage error, said before anything runs.
#[test]
fn self_check_runs_alone() {
    let c = run(&[], &["--check", "-n", "BEGIN { exit(0); }"]);
    assert_eq!(c.status.code(), Some(2), "{}", c.report());
    assert!(
        c.stderr.contains("dtx: --check runs alone"),
        "{}",
        c.report()
    );
    assert!(c.stdout.is_empty(), "{}", c.report());
}

#[cfg(target_os = "linux")]
mod linux {
    use super::*;

    /// The checks of Linux, in their order.
    const NAMES: [&str; 7] = [
        "privilege",
        "tracefs",
        "uprobes",
        "syscall-count",
        "bpf",
        "profile-ustack",
        "fpid-agent",
    ];

    fn root() -> bool {
        // SAFETY: geteuid has no preconditions
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn self_check_as_root_every_check_passes() {
        if !root() {
            eprintln!("skipped: self_check_as_root_every_check_passes: not root");
            return;
        }
        let c = run(&[], &["--check"]);
        eprintln!("{}", c.stdout);
        assert_eq!(c.status.code(), Some(0), "{}", c.report());
        let rows: Vec<&str> = c.stdout.lines().collect();
        assert!(rows[0].starts_with("CHECK "), "{}", c.report());
        for name in NAMES {
            assert!(
                rows.iter()
                    .any(|r| r.starts_with(&format!("{name} ")) && r.contains(" pass ")),
                "{name} did not pass\n{}",
                c.report()
            );
        }
        assert_eq!(
            rows.last().copied(),
            Some("dtx --check: all 7 checks passed"),
            "{}",
            c.report()
        );
        assert!(c.took < Duration::from_secs(60), "{}", c.report());
    }

    #[test]
    fn self_check_json_lists_every_check() {
        let c = run(&[], &["--check", "-x", "oformat=json"]);
        let checks = checks_of(&c);
        let names: Vec<&str> = checks.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(names, NAMES, "{}", c.report());
        if root() {
            assert!(
                checks.iter().all(|c| c.1 == "pass"),
                "{checks:?}\n{}",
                c.report()
            );
        }
        // the JSON document alone is on stdout: the progress lines are not written with it
        assert!(!c.stderr.contains("checking"), "{}", c.report());
    }

    /// A copy of dtx in a new folder of the system's temporary folder, mode 0755: what another
    /// user can run wherever the checkout is. Removed on drop.
    struct ReadableCopy {
        dir: std::path::PathBuf,
        exe: std::path::PathBuf,
    }

    impl ReadableCopy {
        fn new() -> ReadableCopy {
            use std::os::unix::fs::PermissionsExt;
            // one folder per copy: tests of one process make copies at once
            static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir =
                std::env::temp_dir().join(format!("dtx-check-copy-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir(&dir).unwrap();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
            let exe = dir.join("dtx");
            std::fs::copy(crate::support::cli::DTX, &exe).unwrap();
            std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
            ReadableCopy { dir, exe }
        }
    }

    impl Drop for ReadableCopy {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// `dtx --mcp`'s live `run` as a user who may not trace the system calls: the tool
    /// answers an error in dtx's words, as the command line exits 1, not an empty result.
    #[test]
    fn mcp_live_run_that_cannot_trace_is_a_tool_error() {
        use dtx::output::json::Json;
        if !root() {
            eprintln!(
                "skipped: mcp_live_run_that_cannot_trace_is_a_tool_error: needs root (for setpriv)"
            );
            return;
        }
        if std::process::Command::new("setpriv")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("skipped: mcp_live_run_that_cannot_trace_is_a_tool_error: no setpriv");
            return;
        }
        let copy = ReadableCopy::new();
        let server = Dtx::under_exe(
            &[
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
                "--",
            ],
            copy.exe.as_os_str(),
            &["--mcp"],
        );
        let answers = crate::support::mcp::tool_calls_of(
            server,
            &[(
                "run",
                Json::object([
                    ("program", Json::str("syscall:::entry { @n = count(); }")),
                    ("seconds", Json::Float(1.0)),
                ]),
            )],
        );
        let (answer, is_error) = &answers[0];
        assert!(
            *is_error,
            "an empty result where the run traced nothing: {answer:?}"
        );
        let text = match answer {
            Json::Str(t) => t.clone(),
            other => panic!("{other:?}"),
        };
        assert!(
            text.starts_with("live tracing could not start, so nothing was traced: "),
            "{text}"
        );
        // dtx's own words for the refusal, as the command line gives them
        let cli = run_exe(
            &[
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
                "--",
            ],
            copy.exe.as_os_str(),
            &[
                "-q",
                "-n",
                "syscall:::entry { @n = count(); } tick-1s { exit(0); }",
            ],
        );
        assert_eq!(cli.status.code(), Some(1), "{}", cli.report());
        let said = cli.stderr.trim().trim_start_matches("dtx: ");
        assert!(text.contains(said), "{text}\nthe command line: {said}");
    }

    /// Runs as uid/gid 65534 with no capabilities (setpriv, as root; or as this user when it
    /// already is unprivileged).
    #[test]
    fn self_check_unprivileged_says_what_needs_root_and_fails() {
        let prefix: &[&str] = if root() {
            if std::process::Command::new("setpriv")
                .arg("--version")
                .output()
                .is_err()
            {
                eprintln!(
                    "skipped: self_check_unprivileged_says_what_needs_root_and_fails: no setpriv"
                );
                return;
            }
            &[
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
                "--",
            ]
        } else {
            &[]
        };
        // the unprivileged user must be able to run dtx (and --check runs it again): the
        // checkout may be in a folder only its owner reads (root's home is 0700, `mktemp -d`
        // makes 0700), so the run is of a copy in a folder of its own that anyone may read
        let copy = ReadableCopy::new();
        let c = run_exe(prefix, copy.exe.as_os_str(), &["--check"]);
        eprintln!("{}", c.stdout);
        assert_eq!(c.status.code(), Some(3), "{}", c.report());
        let privilege = c
            .stdout
            .lines()
            .find(|l| l.starts_with("privilege "))
            .unwrap_or_else(|| panic!("no privilege row\n{}", c.report()));
        assert!(privilege.contains(" skip "), "{}", c.report());
        assert!(
            privilege.contains("need root or CAP_PERFMON"),
            "{}",
            c.report()
        );
        for name in ["uprobes", "syscall-count", "bpf", "profile-ustack"] {
            let row = c
                .stdout
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")));
            assert!(
                row.is_some_and(
                    |r| r.contains(" skip ") && r.contains("needs root (or CAP_PERFMON)")
                ),
                "{name}: {row:?}\n{}",
                c.report()
            );
        }
        let verdict = c.stdout.lines().last().unwrap_or("");
        assert!(
            verdict.starts_with("dtx --check: INCOMPLETE: ") && verdict.contains("could not run"),
            "{}",
            c.report()
        );
    }
}

#[cfg(windows)]
mod windows {
    use super::*;

    /// Whether this runs under Wine (its ntdll exports `wine_get_version`).
    fn under_wine() -> bool {
        use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleA, GetProcAddress};
        // SAFETY: NUL-terminated names; ntdll is loaded in every process
        unsafe {
            let ntdll = GetModuleHandleA(c"ntdll.dll".as_ptr().cast());
            !ntdll.is_null() && GetProcAddress(ntdll, c"wine_get_version".as_ptr().cast()).is_some()
        }
    }

    const ETW: [&str; 8] = [
        "etw-sessions",
        "etw-proc",
        "etw-file",
        "etw-dns",
        "etw-stack",
        "etw-interval",
        "etw-loss",
        "etw-no-session-left",
    ];

    /// `dtx.exe` exports the self-check's workload functions by name (build.rs), so that the
    /// pid-provider, fpid-inject and etw-stack checks name them where the image has neither
    /// COFF symbols nor a PDB beside it (an MSVC build, the release zip on a user's machine):
    /// the export table alone, read as the pid provider reads images, holds every one, each
    /// at the address of its code.
    #[test]
    fn self_check_workload_functions_are_exported() {
        use object::{Object, ObjectSymbol};
        let path = env!("CARGO_BIN_EXE_dtx");
        let bytes = std::fs::read(path).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        let exports: Vec<(String, u64)> = file
            .exports()
            .unwrap()
            .iter()
            .map(|e| (String::from_utf8_lossy(e.name()).into_owned(), e.address()))
            .collect();
        let names = dtx::cli::selfcheck::workload::BUSY_CHAIN
            .iter()
            .copied()
            .chain(["dtx_check_hit"]);
        let functions = dtx::symbols::pe::functions(&file);
        for name in names {
            let Some(&(_, addr)) = exports.iter().find(|(n, _)| n == name) else {
                panic!("{path} does not export {name}; its exports: {exports:?}");
            };
            // where the image has COFF symbols (mingw) they must agree with the export
            if let Some(sym) = file.symbols().find(|s| s.name() == Ok(name)) {
                assert_eq!(sym.address(), addr, "{name}");
            }
            assert!(
                functions
                    .iter()
                    .any(|f| f.name == name && f.addr == addr && f.size > 0),
                "{name} at {addr:#x} is not a sized function of {path}"
            );
        }
    }

    /// Under Wine: it runs, every ETW check is `skip` with Wine's reason, the status is 3
    /// (could not run everything), and the checks that need no ETW ran. On Windows: elevated,
    /// every check passes; not elevated, the ETW checks say they need elevation.
    #[test]
    fn self_check_reports_what_it_could_check_on_windows() {
        let c = run(&[], &["--check", "-x", "oformat=json"]);
        let checks = checks_of(&c);
        eprintln!("{}", c.stdout);
        let get = |n: &str| {
            checks
                .iter()
                .find(|c| c.0 == n)
                .unwrap_or_else(|| panic!("no check {n}\n{checks:?}"))
        };
        for n in [
            "elevation",
            "symbol-path",
            "pdb-ntdll",
            "pid-provider",
            "fpid-inject",
        ] {
            get(n);
        }
        if under_wine() {
            assert_eq!(c.status.code(), Some(3), "{}", c.report());
            for n in ETW {
                let (_, result, detail) = get(n);
                assert_eq!(result, "skip", "{n}\n{}", c.report());
                assert!(
                    detail.starts_with("not possible under Wine "),
                    "{n}: {detail}"
                );
            }
            return;
        }
        let elevated = get("elevation").1 == "pass";
        if elevated {
            assert_eq!(c.status.code(), Some(0), "{}", c.report());
        } else {
            assert_eq!(c.status.code(), Some(3), "{}", c.report());
            for n in ETW {
                assert_eq!(get(n).1, "skip", "{n}\n{}", c.report());
            }
            assert!(
                std::env::var("DTX_LIVE_TESTS").as_deref() != Ok("require"),
                "DTX_LIVE_TESTS=require but the self-check could not run its ETW checks\n{}",
                c.report()
            );
        }
    }
}
