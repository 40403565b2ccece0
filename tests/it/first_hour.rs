//! What a new user's first hour runs into (issue 46): the quiet gaps, where dtx said nothing
//! or the wrong thing, each asserted by the message or the records it gives now, and the
//! command line's own help. Run as real processes, standard input closed (not a terminal).

use crate::support::cli::Dtx;
use crate::support::etl;

fn run(args: &[&str]) -> (i32, String, String) {
    Dtx::new(args).run()
}

/// Parallel many-trace runs keep the files' records out of a JSON document (each engine
/// writes labelled lines): a program whose probe clauses trace data runs the traces in turn,
/// says why, and the document holds both traces' records.
#[test]
fn many_traces_in_json_keep_the_traces_records() {
    let (Some(a), Some(b)) = (
        etl::trace("tx_HTTP_Server.etl"),
        etl::trace("tx_KernelNetwork.etl"),
    ) else {
        return;
    };
    let (rc, out, err) = run(&[
        "-q",
        "-x",
        "oformat=json",
        "-E",
        &a,
        "-E",
        &b,
        "-n",
        "tick-1s { printf(\"%s\\n\", trace); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains("the traces run one after another") && err.contains("traces data (printf)"),
        "{err}"
    );
    for t in [&a, &b] {
        assert!(
            // as JSON writes the name (a Windows path's `\` escaped)
            out.contains(&format!("{{\"value\":\"{}\"}}", t.replace('\\', "\\\\"))),
            "no record of {t} in the document:\n{out}"
        );
    }
    // without JSON the same program stays parallel: its lines are labelled
    let (rc, out, err) = run(&[
        "-q",
        "-E",
        &a,
        "-E",
        &b,
        "-n",
        "tick-1s { printf(\"%s\\n\", trace); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(!err.contains("one after another"), "{err}");
    assert!(out.contains(&format!("{b}: {b}")), "{out}");
}

/// `-c`/`-p` with a recorded trace in batch: refused, naming both, before anything runs.
#[test]
fn a_replay_refuses_a_live_target() {
    for target in [["-c", "/bin/echo hello"], ["-p", "1"]] {
        let (rc, out, err) = run(&[
            "-q",
            "-E",
            "demo",
            target[0],
            target[1],
            "-n",
            "BEGIN { printf(\"%d\\n\", $target); exit(0); }",
        ]);
        assert_eq!(rc, 1, "{target:?}: {out}{err}");
        assert!(out.is_empty(), "{out}");
        assert!(
            err.contains(&format!(
                "{} traces a live process, and -E demo replays a recording",
                target[0]
            )),
            "{err}"
        );
    }
}

/// A copy of a trace cut at a buffer's end (no record cut): the header's buffer count tells
/// how much is missing, and dtx says how much it read.
#[test]
fn a_truncated_trace_says_how_much_it_read() {
    let Some(bytes) = etl::trace_bytes("tx_BondEtwSample.etl") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.etl");
    std::fs::write(&cut, &bytes[..100_000]).unwrap();
    let cut = cut.to_string_lossy().into_owned();
    let (rc, _, err) = run(&["-q", "-E", &cut, "-n", "etw::: { @ = count(); }"]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains("warning")
            && err.contains("file truncated: it holds 1 of the 3 buffers")
            && err.contains("100000 bytes read"),
        "{err}"
    );
    // the whole trace: no such warning
    let whole = etl::trace("tx_BondEtwSample.etl").unwrap();
    let (rc, _, err) = run(&["-q", "-E", &whole, "-n", "etw::: { @ = count(); }"]);
    assert_eq!(rc, 0, "{err}");
    assert!(!err.contains("truncated"), "{err}");
}

#[test]
fn check_refuses_an_operand() {
    let (rc, _, err) = run(&["--check", "foo"]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("--check takes no operand ('foo')"), "{err}");
}

/// `-p` of a process that exists but cannot be traced says so (here: one a first dtx holds);
/// "No such process" is kept for a pid that has none.
#[cfg(target_os = "linux")]
#[test]
fn grab_says_exists_but_cannot_be_traced() {
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let mut first = Dtx::new(&["-q", "-p", &pid, "-n", "tick-20s { exit(0); }"]).spawn();
    let status = format!("/proc/{pid}/status");
    let traced = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        std::fs::read_to_string(&status).is_ok_and(|s| {
            s.lines()
                .any(|l| l.starts_with("TracerPid:") && l.trim_end() != "TracerPid:\t0")
        })
    });
    let second = traced.then(|| run(&["-q", "-p", &pid, "-n", "BEGIN { exit(0); }"]));
    let _ = first.kill();
    let _ = first.wait();
    let _ = child.kill();
    let _ = child.wait();
    let Some((rc, _, err)) = second else {
        eprintln!("skipped: the first dtx could not grab pid {pid} here");
        return;
    };
    assert_eq!(rc, 1, "{err}");
    assert!(
        err.contains(&format!("failed to grab pid {pid}: the process exists (sleep) but cannot be traced: it is traced already, by pid {}", first.id())),
        "{err}"
    );
    // a pid with no process
    let none = (4_000_000..4_100_000)
        .find(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
        .unwrap()
        .to_string();
    let (rc, _, err) = run(&["-q", "-p", &none, "-n", "BEGIN { exit(0); }"]);
    assert_eq!(rc, 1, "{err}");
    assert!(
        err.contains(&format!("failed to grab pid {none}: No such process")),
        "{err}"
    );
}

#[test]
fn a_braced_field_that_is_no_guid_is_named() {
    let (rc, _, err) = run(&["-E", "demo", "-n", "etw:{bogus}:0xff:1 {}"]);
    assert_eq!(rc, 1, "{err}");
    assert!(
        err.contains("field {bogus} is not a provider GUID") && !err.contains("::etw:"),
        "{err}"
    );
}

/// A forced `pidmode=uprobe` refused for an `-n` program names the clause by its probe, not
/// by a line it does not have.
#[cfg(target_os = "linux")]
#[test]
fn a_forced_uprobe_refusal_names_the_clause() {
    let (rc, _, err) = run(&[
        "-x",
        "pidmode=uprobe",
        "-n",
        "pid$target::main:entry { trace(copyinstr(arg0)); }",
        "-c",
        "/bin/true",
    ]);
    if err.contains("failed to") {
        eprintln!("skipped: cannot trace a process here: {err}");
        return;
    }
    assert_eq!(rc, 1, "{err}");
    assert!(
        err.contains("pidmode=uprobe: the clause of pid")
            && err.contains("main:entry uses copyinstr"),
        "{err}"
    );
    assert!(!err.contains("line 0"), "{err}");
}

/// A bad `--keys` file is named as given, not as `keys.toml` (on a terminal: the console
/// reads its keys before it takes the screen).
#[cfg(unix)]
#[test]
fn a_bad_keys_file_is_reported_under_its_own_name() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("my-bindings.toml");
    std::fs::write(&keys, "[keys]\nnosuch = \"f1\"\n").unwrap();
    let keys = keys.to_string_lossy().into_owned();
    let state = dir.path().to_string_lossy().into_owned();
    let mut s = crate::support::pty::PtySession::spawn(
        crate::support::cli::DTX,
        &["--tui", "--keys", &keys, "-E", "demo", "-n", "BEGIN {}"],
        &[("XDG_CONFIG_HOME", &state), ("XDG_STATE_HOME", &state)],
        100,
        30,
    );
    let screen = s.wait_for("the keys error", std::time::Duration::from_secs(30), |t| {
        t.contains("nosuch")
    });
    assert_eq!(
        s.wait_exit(std::time::Duration::from_secs(10)),
        Some(1),
        "{screen}"
    );
    let flat = screen.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("my-bindings.toml: no action 'nosuch'"),
        "{screen}"
    );
    assert!(!flat.contains("keys.toml"), "{screen}");
}

/// Every long option the command line takes is in `--help`: read from the parser's source,
/// so an option added there and not to the help fails here.
#[test]
fn help_lists_every_long_option() {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut longs: Vec<String> = Vec::new();
    let args = std::fs::read_to_string(format!("{root}/src/cli/args.rs")).unwrap();
    for (i, _) in args.match_indices("(\"") {
        let rest = &args[i + 2..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '-')
            .collect();
        let after = &rest[name.len()..];
        if !name.is_empty() && (after.starts_with("\", None)") || after.starts_with("\", Some(")) {
            longs.push(format!("--{name}"));
        }
    }
    let main = std::fs::read_to_string(format!("{root}/src/cli/mod.rs")).unwrap();
    for (i, _) in main.match_indices("== \"--") {
        let name: String = main[i + 4..].chars().take_while(|c| *c != '"').collect();
        // the self-check's own workload, run by the checked dtx, not by users
        if name != "--check-workload" {
            longs.push(name);
        }
    }
    assert!(longs.len() >= 8, "{longs:?}");
    let help = Dtx::new(&["--help"]).ok();
    for l in &longs {
        assert!(help.contains(l), "--help does not list {l}:\n{help}");
    }
    // --merge's own help is help, not a file named --help
    let (rc, out, err) = run(&["--merge", "--help"]);
    assert_eq!(rc, 0, "{err}");
    assert!(out.starts_with("Usage: dtx --merge"), "{out}");
    let (rc, _, err) = run(&["--merge", "--bogus", "a.json"]);
    assert_eq!(rc, 1);
    assert!(err.contains("unknown option '--bogus'"), "{err}");
}

/// The console off a terminal says what it needs; `-E` alone off one says it too.
#[test]
fn the_console_off_a_terminal_says_what_it_needs() {
    let (rc, _, err) = run(&["--demo"]);
    assert_eq!(rc, 1, "{err}");
    assert!(
        err.contains("cannot start the console: it needs a terminal") && !err.contains("os error"),
        "{err}"
    );
    let (rc, _, err) = run(&["-E", "demo"]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("no probes specified (-E alone opens the console, which needs a terminal"),
        "{err}"
    );
}
