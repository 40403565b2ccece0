//! Every `dtx` command of README.md's `sh` blocks runs as written: through `sh -c` in the
//! checkout, with the built binary first on the PATH and `TRACES` naming the public traces of
//! `../shared/etl`. Batch commands must exit 0 and print something (and no warning); console
//! commands (`--tui`, `--demo`) must open the console in a pseudo-terminal and quit cleanly.
//! Unix only (the commands are shell lines); skips the commands that read `$TRACES`, saying so,
//! when `../shared/etl` is absent (those over the built-in trace, `-E demo`, always run).

use crate::support::pty;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// The lines of README.md's ```sh blocks that run dtx.
fn readme_commands() -> Vec<String> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let mut out = Vec::new();
    let mut in_sh = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_sh = !in_sh && t == "```sh";
            continue;
        }
        if in_sh && t.starts_with("dtx ") {
            out.push(t.to_string());
        }
    }
    out
}

/// Whether a README command opens the console.
fn is_console(cmd: &str) -> bool {
    cmd.contains("--tui") || cmd.contains("--demo")
}

fn traces() -> Option<PathBuf> {
    crate::support::etl::folder("etl", "")
}

fn path_with_dtx() -> String {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_dtx"));
    let dir = bin.parent().unwrap().to_string_lossy().into_owned();
    format!("{dir}:{}", std::env::var("PATH").unwrap_or_default())
}

#[test]
fn readme_has_ten_one_liners_and_the_console() {
    let cmds = readme_commands();
    let batch = cmds.iter().filter(|c| !is_console(c)).count();
    assert!(batch >= 10, "{batch} batch commands: {cmds:#?}");
    assert!(cmds.iter().any(|c| c.contains("--tui")), "{cmds:#?}");
    // the first console command is the demo, and most one-liners read the built-in trace
    assert_eq!(
        cmds.iter().find(|c| is_console(c)).map(String::as_str),
        Some("dtx --demo")
    );
    let demo = cmds.iter().filter(|c| c.contains("-E demo")).count();
    assert!(demo * 2 > batch, "{demo} of {batch} one-liners use -E demo");
    let lines = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .unwrap()
        .lines()
        .count();
    assert!(
        lines < 250,
        "README.md has {lines} lines: it is the front page"
    );
}

#[test]
fn readme_batch_commands_run() {
    let traces = traces();
    for cmd in readme_commands().iter().filter(|c| !is_console(c)) {
        if cmd.contains("$TRACES") && traces.is_none() {
            eprintln!("skipped (../shared/etl is absent): {cmd}");
            continue;
        }
        let out = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("PATH", path_with_dtx())
            .env("TRACES", traces.clone().unwrap_or_default())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{cmd}\nstatus {:?}\n{stdout}\n{stderr}",
            out.status
        );
        assert!(!stdout.trim().is_empty(), "{cmd} printed nothing\n{stderr}");
        assert!(!stderr.contains("warning"), "{cmd}\n{stderr}");
        eprintln!("ok: {cmd} ({} lines)", stdout.lines().count());
    }
}

#[test]
fn readme_console_commands_open_the_console() {
    let traces = traces();
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_string_lossy().into_owned();
    let trace_dir = traces
        .as_ref()
        .map(|t| t.to_string_lossy().into_owned())
        .unwrap_or_default();
    let path = path_with_dtx();
    for cmd in readme_commands().iter().filter(|c| is_console(c)) {
        if cmd.contains("$TRACES") && traces.is_none() {
            eprintln!("skipped (../shared/etl is absent): {cmd}");
            continue;
        }
        let mut s = pty::PtySession::spawn(
            "sh",
            &["-c", cmd],
            &[
                ("XDG_STATE_HOME", &state_dir),
                ("XDG_CONFIG_HOME", &state_dir),
                ("TRACES", &trace_dir),
                ("PATH", &path),
            ],
            120,
            36,
        );
        s.wait_for(cmd, Duration::from_secs(60), |t| {
            t.contains("run #1") && t.contains("ended 0")
        });
        s.send(pty::CTRL_Q);
        assert_eq!(s.wait_exit(Duration::from_secs(10)), Some(0), "{cmd}");
    }
}
