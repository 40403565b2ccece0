//! The console end to end: the real binary in a pseudo-terminal opens a recorded trace, a
//! script is typed and run, its aggregation table shows the right top row (the row the batch
//! command line prints last), the script is edited and re-run, and the new table appears — all
//! in one process, which then quits cleanly and restores the terminal.
//! Unix only: the pseudo-terminal is a Unix pty (Wine has no ConPTY for the Windows build).

use crate::support::cli;
use crate::support::pty;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use pty::{PtySession, CTRL_Q, F5, RIGHT};

const TRACE: &str = "randomascii_slow_ppt_trace.etl.zip";

fn trace() -> Option<PathBuf> {
    crate::support::etl::path("etl", TRACE)
}

/// Quits the console: Ctrl-Q, and `y` when it asks about unsaved edits; it must exit 0.
fn quit(s: &mut PtySession) {
    s.send(CTRL_Q);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if let Ok(Some(st)) = s.child.try_wait() {
            assert_eq!(st.exit_code(), 0);
            return;
        }
        if s.contents().contains("not saved") {
            s.send("y");
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(s.wait_exit(Duration::from_secs(10)), Some(0));
}

/// The top row of the aggregation as the batch command line prints it (dtrace prints the
/// largest value last): (key, value).
fn batch_top(trace: &str, program: &str) -> (String, String) {
    let text = cli::dtx_ok(&["-q", "-E", trace, "-n", program]);
    let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    let mut words: Vec<&str> = last.split_whitespace().collect();
    let value = words.pop().unwrap().to_string();
    (words.join(" "), value)
}

/// The first data row of the aggregation table on the screen.
fn screen_top(screen: &str) -> Option<String> {
    let mut lines = screen.lines();
    lines.find(|l| l.contains("key1") && (l.contains("count") || l.contains("sum")))?;
    lines.next().map(|l| l.to_string())
}

fn row_matches(screen: &str, key: &str, value: &str) -> bool {
    screen_top(screen).is_some_and(|row| {
        let words: Vec<&str> = row
            .split(|c: char| c.is_whitespace() || c == '│' || c == '┃')
            .filter(|w| !w.is_empty())
            .collect();
        words.windows(2).any(|w| w[0] == key && w[1] == value)
    })
}

#[test]
fn open_trace_type_run_edit_rerun_quit() {
    let Some(trace) = trace() else { return };
    let trace = trace.to_string_lossy().into_owned();
    let first = "sched:::on-cpu { @[execname] = count(); }";
    let second = "sched:::on-cpu { @[cpu] = count(); }";
    let (k1, v1) = batch_top(&trace, first);
    let (k2, v2) = batch_top(&trace, second);
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_string_lossy().into_owned();
    let mut s = PtySession::spawn(
        env!("CARGO_BIN_EXE_dtx"),
        &["--tui", "-E", &trace],
        &[
            ("XDG_STATE_HOME", &state_dir),
            ("XDG_CONFIG_HOME", &state_dir),
        ],
        120,
        36,
    );
    // with no script, the default dashboard runs
    s.wait_for("the default dashboard", Duration::from_secs(60), |t| {
        t.contains("top/cpu.d") && t.contains("@oncpu_us") && t.contains("ended 0")
    });
    s.send("\x0e"); // Ctrl-N: a new script
    s.wait_for("an empty editor", Duration::from_secs(10), |t| {
        t.contains("untitled.d")
    });
    s.type_text(first);
    s.send(F5);
    let screen = s.wait_for("the first table", Duration::from_secs(60), |t| {
        row_matches(t, &k1, &v1) && t.contains("ended 0")
    });
    assert!(screen.contains("run #2"), "{screen}");
    // edit: erase the line and write the second script, then run it in the same process
    for _ in 0..first.len() {
        s.send("\x7f");
    }
    s.type_text(second);
    s.send(F5);
    let screen = s.wait_for("the second table", Duration::from_secs(60), |t| {
        row_matches(t, &k2, &v2) && t.contains("run #3") && t.contains("ended 0")
    });
    assert!(screen.contains(second), "{screen}");
    quit(&mut s);
    let raw = s.raw.lock().unwrap().clone();
    let raw = String::from_utf8_lossy(&raw);
    // the alternate screen was left: the terminal is back as it was
    assert!(raw.contains("\x1b[?1049l"), "the terminal was not restored");
    // the unsaved script was autosaved on the way out
    let auto = std::fs::read_to_string(state.path().join("dtx/autosave.d")).unwrap();
    assert!(auto.contains(second), "{auto}");
}

/// `dtx --demo` as a newcomer runs it after an install: the binary alone in a directory of its
/// own (nothing beside it), started from an empty directory with an empty home, and no
/// `../shared`. The console opens over the built-in trace with the demo dashboard running: its
/// CPU table has rows with non-zero values, and one key (→) shows the stack tree.
#[test]
fn demo_shows_the_dashboard_from_a_fresh_install() {
    let root = tempfile::tempdir().unwrap();
    let bin_dir = root.path().join("bin");
    let work = root.path().join("work");
    let home = root.path().join("home");
    for d in [&bin_dir, &work, &home] {
        std::fs::create_dir(d).unwrap();
    }
    let bin = bin_dir.join("dtx");
    std::fs::copy(env!("CARGO_BIN_EXE_dtx"), &bin).unwrap();
    let home_s = home.to_string_lossy().into_owned();
    let mut s = PtySession::spawn_in(
        &bin.to_string_lossy(),
        &["--demo"],
        &[
            ("HOME", &home_s),
            ("XDG_STATE_HOME", &home_s),
            ("XDG_CONFIG_HOME", &home_s),
            ("_NT_SYMBOL_PATH", ""),
        ],
        &work,
        120,
        36,
    );
    let nonzero = |row: &str| {
        row.split(|c: char| c.is_whitespace() || c == '│')
            .any(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_digit()) && w != "0")
    };
    let screen = s.wait_for("the demo's CPU table", Duration::from_secs(60), |t| {
        t.contains("top/cpu-stacks.d")
            && t.contains("run #1")
            && t.contains("@oncpu_us")
            && screen_top(t).is_some_and(|r| nonzero(&r))
    });
    // the table's rows are the trace's processes, by name
    assert!(screen.contains(".exe"), "{screen}");
    eprintln!("the demo's first screen:\n{screen}");
    s.send(RIGHT);
    let screen = s.wait_for("the stack tree", Duration::from_secs(30), |t| {
        t.contains("@stacks") && t.contains('%') && t.contains(".dll+0x")
    });
    assert!(screen.contains('▾') || screen.contains('▼'), "{screen}");
    eprintln!("after →:\n{screen}");
    quit(&mut s);
    // nothing was needed, or written, beside the binary or in the working directory
    assert_eq!(std::fs::read_dir(&bin_dir).unwrap().count(), 1);
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
}

/// With no trace and no script on Linux, the console runs the default dashboard live from perf
/// events (skipped where perf events cannot be opened).
#[cfg(target_os = "linux")]
#[test]
fn live_console_runs_the_default_dashboard() {
    let probe = cli::dtx(&["-q", "-n", "sched:::on-cpu { exit(0); }"]);
    if !probe.status.success() {
        eprintln!(
            "skipped: perf events are not available here: {}",
            String::from_utf8_lossy(&probe.stderr).trim()
        );
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_string_lossy().into_owned();
    let mut s = PtySession::spawn(
        env!("CARGO_BIN_EXE_dtx"),
        &["--tui"],
        &[
            ("XDG_STATE_HOME", &state_dir),
            ("XDG_CONFIG_HOME", &state_dir),
        ],
        120,
        36,
    );
    let screen = s.wait_for("the live dashboard", Duration::from_secs(30), |t| {
        t.contains("top/cpu.d")
            && t.contains("● running")
            && screen_top(t).is_some_and(|r| {
                r.split_whitespace()
                    .any(|w| w.chars().all(|c| c.is_ascii_digit()) && w != "0")
            })
    });
    assert!(screen.contains("│ live │"), "{screen}");
    quit(&mut s);
}

/// `dtx --tui -c cmd`: the console starts the program stopped, the first run lets it go with
/// its pid probes armed, an edited script replaces them while it runs, its output shows in the
/// log, and its exit is reported (skipped without gcc or ptrace).
#[cfg(target_os = "linux")]
#[test]
fn console_traces_a_target_started_with_c() {
    const PROG: &str = r#"
#include <stdio.h>
#include <unistd.h>
int work(int i) { return i * 3; }
int tick(int i) { return i + 1; }
int main(void) {
    setvbuf(stdout, 0, _IOLBF, 0);
    printf("target says hello\n");
    for (int i = 0; i < 500; i++) { work(i); tick(i); usleep(10000); }
    printf("target done\n");
    return 0;
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("loop.c");
    std::fs::write(&src, PROG).unwrap();
    let exe = dir.path().join("loop");
    match Command::new("gcc")
        .args(["-O0", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
    {
        Ok(st) if st.success() => {}
        _ => {
            eprintln!("skipped: gcc is not available");
            return;
        }
    }
    let probe = cli::dtx(&[
        "-q",
        "-n",
        "BEGIN { exit(0); }",
        "-c",
        exe.to_str().unwrap(),
    ]);
    if !probe.status.success() {
        eprintln!(
            "skipped: cannot trace a process here: {}",
            String::from_utf8_lossy(&probe.stderr).trim()
        );
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_string_lossy().into_owned();
    let exe_s = exe.to_string_lossy().into_owned();
    let mut s = PtySession::spawn(
        env!("CARGO_BIN_EXE_dtx"),
        &["--tui", "-c", &exe_s],
        &[
            ("XDG_STATE_HOME", &state_dir),
            ("XDG_CONFIG_HOME", &state_dir),
        ],
        120,
        36,
    );
    // held at main until the first run, with a clause for its functions in the editor
    let screen = s.wait_for("the stopped target", Duration::from_secs(30), |t| {
        t.contains("is stopped") && t.contains("pid$target:a.out::entry")
    });
    assert!(!screen.contains("target says hello"), "{screen}");
    // the probe browser lists the target's functions
    s.send("\x1bOQ"); // F2: the browser
    s.type_text("work");
    s.wait_for("the target's functions", Duration::from_secs(10), |t| {
        t.contains("▾ pid") && t.contains("▾ work")
    });
    s.send("\x1b"); // Esc: the filter goes
                    // (a lone Esc must not run into the next key's escape sequence)
    std::thread::sleep(Duration::from_millis(400));
    s.send(F5);
    let screen = s.wait_for("calls of the target", Duration::from_secs(30), |t| {
        screen_top(t).is_some_and(|r| r.contains("work") || r.contains("tick"))
            && t.contains("target says hello")
    });
    assert!(screen.contains("● running"), "{screen}");
    // replace the program while the target runs: only tick() now
    s.send("\x0e"); // Ctrl-N: a new script
    s.wait_for("an empty editor", Duration::from_secs(10), |t| {
        t.contains("untitled.d")
    });
    let second = "pid$target::tick:entry { @ticks[probefunc] = count(); }";
    s.type_text(second);
    s.send(F5);
    let screen = s.wait_for(
        "the new table, then the exit",
        Duration::from_secs(30),
        |t| {
            screen_top(t).is_some_and(|r| r.contains("tick") && !r.contains("work"))
                && t.contains("has exited")
                && t.contains("target done")
        },
    );
    assert!(screen.contains("run #2"), "{screen}");
    quit(&mut s);
}

#[test]
fn bare_dtx_on_a_terminal_opens_the_console() {
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_string_lossy().into_owned();
    let mut s = PtySession::spawn(
        env!("CARGO_BIN_EXE_dtx"),
        &[],
        &[
            ("XDG_STATE_HOME", &state_dir),
            ("XDG_CONFIG_HOME", &state_dir),
        ],
        100,
        30,
    );
    // the console's panes and status line, not dtrace's usage text
    let screen = s.wait_for("the console", Duration::from_secs(30), |t| {
        t.contains("run #") || t.contains("idle")
    });
    assert!(!screen.contains("Usage:"), "{screen}");
    quit(&mut s);
}

#[test]
fn bare_dtx_without_a_terminal_prints_the_usage() {
    let out = cli::dtx(&[] as &[&str]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Usage:"));
}

/// What dtx says on stderr while the console runs (here dtrace's line for a fault in a clause)
/// shows in the output pane, not written over the screen where the cursor happens to be (a
/// redraw then erased it), in its place among the program's output, and the run goes on to
/// its end.
#[test]
fn a_fault_in_a_clause_shows_in_the_output_pane() {
    let Some(trace) = trace() else { return };
    let trace = trace.to_string_lossy().into_owned();
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_string_lossy().into_owned();
    let program = "BEGIN { printf(\"the start\\n\"); } BEGIN { trace(*(int *)8); } \
                   END { printf(\"the end\\n\"); }";
    let mut s = PtySession::spawn(
        env!("CARGO_BIN_EXE_dtx"),
        &["--tui", "-E", &trace, "-n", program],
        &[
            ("XDG_STATE_HOME", &state_dir),
            ("XDG_CONFIG_HOME", &state_dir),
        ],
        120,
        60,
    );
    let fault = "dtx: error on enabled probe ID 2 (ID 1: dtrace:::BEGIN): invalid address (0x8)";
    let screen = s.wait_for(
        "the fault in the output pane",
        Duration::from_secs(60),
        |t| t.contains(":END the end") && t.contains("ended 0"),
    );
    let rows: Vec<&str> = screen.lines().collect();
    let output = rows.iter().position(|r| r.contains(" Output ")).unwrap();
    let at = rows.iter().position(|r| r.contains(fault));
    let end = rows
        .iter()
        .position(|r| r.contains(":END the end"))
        .unwrap();
    let Some(start) = rows.iter().position(|r| r.contains(":BEGIN the start")) else {
        panic!("no BEGIN line:\n{screen}");
    };
    // in the pane, after BEGIN's output and before END's
    assert!(
        at.is_some_and(|at| at > output && start < at && at < end),
        "the fault is not in the output pane ({at:?}, {output}, {end}):\n{screen}"
    );
    // and it is said once, on the screen's one line for it in the pane
    assert_eq!(screen.matches(fault).count(), 1, "{screen}");
    quit(&mut s);
}

/// `-x metrics=` with the console: it serves the aggregations of what it runs, says where in
/// its status line, and a scrape gives what the batch command line prints; a re-run (F5)
/// serves the new run's values under the same names.
#[test]
fn console_serves_its_aggregations_as_metrics() {
    use std::collections::BTreeMap;
    use std::io::{Read, Write};
    let program = "sched:::on-cpu { @oncpu[execname] = count(); }";
    let printed = cli::dtx_ok(&["-q", "-E", "demo", "-n", program]);
    let want: BTreeMap<String, f64> = printed
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (k, v) = l.trim().rsplit_once(char::is_whitespace).unwrap();
            (k.trim().to_string(), v.parse().unwrap())
        })
        .collect();
    assert!(want.len() > 10, "{want:?}");
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_string_lossy().into_owned();
    let mut s = PtySession::spawn(
        env!("CARGO_BIN_EXE_dtx"),
        &[
            "--tui",
            "-E",
            "demo",
            "-x",
            "metrics=127.0.0.1:0",
            "-n",
            program,
        ],
        &[
            ("XDG_STATE_HOME", &state_dir),
            ("XDG_CONFIG_HOME", &state_dir),
        ],
        250,
        40,
    );
    let scrape = |screen: &str| -> BTreeMap<String, f64> {
        let at = screen
            .find("metrics http://")
            .expect("the status line names the address")
            + "metrics http://".len();
        let addr = &screen[at..at + screen[at..].find("/metrics").unwrap()];
        let mut c = std::net::TcpStream::connect(addr).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(20))).ok();
        write!(c, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
        let mut body = String::new();
        c.read_to_string(&mut body).unwrap();
        assert!(body.starts_with("HTTP/1.1 200"), "{body}");
        body.lines()
            .filter_map(|l| l.strip_prefix("dtx_oncpu_total{key1=\""))
            .map(|l| {
                let (k, v) = l.split_once("\"} ").unwrap();
                (
                    k.replace("\\\"", "\"").replace("\\\\", "\\"),
                    v.parse().unwrap(),
                )
            })
            .collect()
    };
    let screen = s.wait_for("the run and the address", Duration::from_secs(60), |t| {
        t.contains("metrics http://127.0.0.1:") && t.contains("ended 0")
    });
    assert!(screen.contains("run #1"), "{screen}");
    assert_eq!(scrape(&screen), want);
    s.send(F5);
    let screen = s.wait_for("the re-run", Duration::from_secs(60), |t| {
        t.contains("run #2") && t.contains("ended 0")
    });
    // the run's last snapshot reaches the exporter with its end: a moment after the screen
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut got = scrape(&screen);
    while got != want && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        got = scrape(&screen);
    }
    assert_eq!(got, want, "after the re-run");
    quit(&mut s);
}

/// The words of the aggregation table's first data row.
fn top_words(screen: &str) -> Vec<String> {
    screen_top(screen)
        .map(|row| {
            row.split(|c: char| c.is_whitespace() || c == '│' || c == '┃')
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `b` keeps the results as the baseline and saves it; after a re-run (F5) the table has a
/// `vs base` column, each row unchanged (`=`) over the same trace; the saved file holds them.
#[test]
fn console_baseline_set_rerun_and_saved() {
    let program = "sched:::on-cpu { @[execname] = count(); }";
    let (k, v) = batch_top("demo", program);
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().to_string_lossy().into_owned();
    let mut s = PtySession::spawn_in(
        env!("CARGO_BIN_EXE_dtx"),
        &["--tui", "-E", "demo", "-n", program],
        &[
            ("XDG_STATE_HOME", &state_dir),
            ("XDG_CONFIG_HOME", &state_dir),
        ],
        dir.path(),
        200,
        40,
    );
    s.wait_for("the run", Duration::from_secs(60), |t| {
        row_matches(t, &k, &v) && t.contains("ended 0")
    });
    s.send("\x1bOS"); // F4: the aggregations
    s.send("b");
    s.wait_for("the baseline set", Duration::from_secs(10), |t| {
        t.contains("baseline: run #1")
    });
    s.send(F5);
    let screen = s.wait_for(
        "the re-run against the baseline",
        Duration::from_secs(60),
        |t| t.contains("run #2") && t.contains("ended 0") && t.contains("vs base"),
    );
    let words = top_words(&screen);
    assert!(
        words
            .windows(3)
            .any(|w| w[0] == k && w[1] == v && w[2] == "="),
        "{words:?}\n{screen}"
    );
    quit(&mut s);
    let saved = std::fs::read_to_string(dir.path().join("dtx-baseline.json")).unwrap();
    let b = dtx::tui::baseline::Baseline::from_json(&saved)
        .unwrap()
        .expect("a baseline file");
    assert_eq!(b.label, "run #1");
    assert!(saved.contains(&format!("\"value\": {v}")), "{saved}");
}

/// The console over the demo trace running `program` against the saved result `saved`, its
/// state and configuration in `dir`.
fn console_against(dir: &std::path::Path, saved: &str, program: &str) -> PtySession {
    let state_dir = dir.to_string_lossy().into_owned();
    PtySession::spawn_in(
        env!("CARGO_BIN_EXE_dtx"),
        &["--tui", "-E", "demo", "--baseline", saved, "-n", program],
        &[
            ("XDG_STATE_HOME", &state_dir),
            ("XDG_CONFIG_HOME", &state_dir),
        ],
        dir,
        200,
        40,
    )
}

/// `--baseline FILE` with a result saved by the command line (`-x oformat=json`): the table
/// shows each key's change against it from the first run, as the two batch runs differ.
#[test]
fn console_baseline_from_a_saved_result() {
    let before = "sched:::on-cpu /cpu == 0/ { @[execname] = count(); }";
    let after = "sched:::on-cpu { @[execname] = count(); }";
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("before.json");
    let json = cli::dtx_ok(&["-q", "-x", "oformat=json", "-E", "demo", "-n", before]);
    std::fs::write(&saved, json).unwrap();
    let printed = cli::dtx_ok(&["-q", "-E", "demo", "-n", before]);
    let (k, v) = batch_top("demo", after);
    let then: Option<i64> = printed.lines().find_map(|l| {
        let (key, n) = l.trim().rsplit_once(char::is_whitespace)?;
        (key.trim() == k).then(|| n.parse().ok())?
    });
    let want = match then {
        Some(t) if v.parse::<i64>().unwrap() == t => "=".to_string(),
        Some(t) => format!("{:+}", v.parse::<i64>().unwrap() - t),
        None => "new".to_string(),
    };
    let saved_s = saved.to_string_lossy().into_owned();
    let mut s = console_against(dir.path(), &saved_s, after);
    let screen = s.wait_for(
        "the run against the saved result",
        Duration::from_secs(60),
        |t| row_matches(t, &k, &v) && t.contains("ended 0") && t.contains("vs base"),
    );
    let words = top_words(&screen);
    assert!(
        words
            .windows(3)
            .any(|w| w[0] == k && w[1] == v && w[2] == want),
        "{k} {v} {want}: {words:?}\n{screen}"
    );
    quit(&mut s);
    // a baseline is the console's: the command line says where to compare instead
    let (code, _, err) = cli::run(&["-q", "-E", "demo", "--baseline", &saved_s, "-n", after]);
    assert_ne!(code, 0);
    assert!(err.contains("dtx --diff"), "{err}");
}

/// Each stack of a batch run's text output, outermost frame first, with its count.
fn batch_stacks(trace: &str, program: &str) -> Vec<(Vec<String>, i64)> {
    let text = cli::dtx_ok(&["-q", "-E", trace, "-n", program]);
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut lines: Vec<&str> = block
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let Some(n) = lines.pop().and_then(|l| l.parse::<i64>().ok()) else {
            continue;
        };
        lines.reverse();
        out.push((lines.into_iter().map(str::to_string).collect(), n));
    }
    out
}

/// A stack aggregation against a saved result: the stack tree gives each frame its change. The
/// baseline is the same program on CPU 0 alone, so the whole-trace tree only grows: its top
/// frame shows what the two batch runs say it grew by, and no frame shrank.
#[test]
fn console_baseline_gives_each_stack_frame_its_change() {
    let before = "profile-997 /cpu == 0/ { @[stack()] = count(); }";
    let after = "profile-997 { @[stack()] = count(); }";
    let roots = |stacks: Vec<(Vec<String>, i64)>| {
        let mut m = std::collections::BTreeMap::<String, i64>::new();
        for (frames, n) in stacks {
            if let Some(f) = frames.first() {
                *m.entry(f.clone()).or_default() += n;
            }
        }
        m
    };
    let then = roots(batch_stacks("demo", before));
    let now = roots(batch_stacks("demo", after));
    assert!(!now.is_empty(), "the demo trace has kernel stacks");
    // the tree's first row: the outermost frame with the largest total (ties by name)
    let (top, total) = now
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(f, n)| (f.clone(), *n))
        .unwrap();
    let want = match then.get(&top) {
        Some(t) if *t == total => "=".to_string(),
        Some(t) => format!("{:+}", total - t),
        None => "new".to_string(),
    };
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("before.json");
    let json = cli::dtx_ok(&["-q", "-x", "oformat=json", "-E", "demo", "-n", before]);
    std::fs::write(&saved, json).unwrap();
    let saved_s = saved.to_string_lossy().into_owned();
    let mut s = console_against(dir.path(), &saved_s, after);
    let words_of = |l: &str| -> Vec<String> {
        l.split(|c: char| c.is_whitespace() || c == '│' || c == '┃')
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    let row_of = |screen: &str| -> Option<Vec<String>> {
        screen
            .lines()
            .map(words_of)
            .find(|w| w.last() == Some(&top) && w.contains(&total.to_string()))
    };
    let screen = s.wait_for(
        "the stack tree against the saved result",
        Duration::from_secs(60),
        |t| t.contains("ended 0") && row_of(t).is_some(),
    );
    let row = row_of(&screen).unwrap();
    assert!(
        row.contains(&want),
        "{top} {total} {want}: {row:?}\n{screen}"
    );
    // no frame of the tree shrank: every change shown is =, +N or new
    for l in screen.lines().filter(|l| l.contains('%')) {
        for w in words_of(l) {
            assert!(
                !(w.starts_with('-') && w[1..].parse::<i64>().is_ok()),
                "a frame shrank against a subset of itself: {l}\n{screen}"
            );
        }
    }
    quit(&mut s);
}
