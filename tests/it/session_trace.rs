//! The engine's session handle over a real trace: pause holds the replay still, 1x speed paces it
//! by trace time, a program replaced mid-trace takes over while the replay goes on (no restart),
//! and a restart replays from the beginning. Skips when `../shared/etl` is absent.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dtx::engine::session::{Command, RunState, Session, SessionSource, Speed, Status, Update};
use dtx::providers::etw::EtwProbes;
use dtx::sources::etl::TraceSource;
use dtx::tui::compile::compile_text;

use crate::support::etl;
use crate::support::stacks;
use etl::{quiet, shared, trace};
use stacks::snapshot_frames;

const TRACE: &str = "randomascii_slow_ppt_trace.etl.zip";

/// A console session over the trace at `path`, refreshing every 50 ms, and its probes.
fn start(path: &str) -> (Session, Arc<dtx::probes::Catalog>) {
    let mut etw = EtwProbes::new();
    let mut src = TraceSource::open(path).unwrap();
    src.scan_providers(&mut etw);
    let catalog = Arc::new(dtx::providers::etw_catalog(&etw));
    let s = Session::start(
        SessionSource::Trace {
            path: path.to_string(),
            etw: Arc::new(etw),
        },
        catalog.clone(),
        Duration::from_millis(50),
    );
    (s, catalog)
}

/// The last status within `wait` (updates of other kinds are dropped: only used while the
/// numbers do not matter).
fn latest_status(s: &Session, wait: Duration) -> Option<Status> {
    let deadline = Instant::now() + wait;
    let mut last = None;
    while Instant::now() < deadline {
        if let Some(Update::Status(st)) = s.wait(Duration::from_millis(20)) {
            last = Some(st);
        }
    }
    last
}

/// What has come so far besides statuses: the last snapshot of each generation, and output.
#[derive(Default)]
struct Seen {
    sums: std::collections::HashMap<u64, u64>,
    out: String,
}

fn wait_status(s: &Session, seen: &mut Seen, what: &str, f: impl Fn(&Status) -> bool) -> Status {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        match s.wait(Duration::from_millis(50)) {
            Some(Update::Status(st)) if f(&st) => return st,
            Some(Update::Snapshot(snap)) => {
                let sum = snap
                    .aggs
                    .iter()
                    .flat_map(|a| a.rows.iter())
                    .map(|r| r.value.scalar() as u64)
                    .sum();
                seen.sums.insert(snap.generation, sum);
            }
            Some(Update::Output(t)) => seen.out.push_str(&t),
            _ => {}
        }
    }
    panic!("no status with {what} within 60 s");
}

#[test]
fn pause_pace_replace_and_restart() {
    let Some(path) = trace(TRACE) else {
        return;
    };
    let (s, catalog) = start(&path);
    let count = compile_text("sched:::on-cpu { @n = count(); }", "a.d", &catalog).unwrap();
    s.send(Command::Speed(Speed::Times(1)));
    s.send(Command::Run {
        program: count,
        restart: false,
    });
    // 1x: after a second of wall time, about a second of trace time has gone by
    let mut seen = Seen::default();
    let st = wait_status(&s, &mut seen, "running", |st| st.state == RunState::Running);
    let t0 = Instant::now();
    let p0 = st.position.unwrap().0;
    let st = latest_status(&s, Duration::from_millis(1500)).unwrap();
    let trace_s = (st.position.unwrap().0 - p0) as f64 / 1e9;
    let wall_s = t0.elapsed().as_secs_f64();
    assert!(
        trace_s > 0.3 * wall_s && trace_s < 1.5 * wall_s,
        "1x replay went {trace_s:.2} s of trace in {wall_s:.2} s"
    );
    // paused: the position holds
    s.send(Command::Pause(true));
    let paused = wait_status(&s, &mut seen, "paused", |st| st.state == RunState::Paused);
    let later = latest_status(&s, Duration::from_millis(500)).unwrap();
    assert_eq!(later.state, RunState::Paused);
    assert_eq!(later.position, paused.position);
    // replace the program while the replay goes on: same run of the trace, new generation
    let by_name = compile_text(
        "sched:::on-cpu { @cpus[execname] = count(); }",
        "b.d",
        &catalog,
    )
    .unwrap();
    s.send(Command::Run {
        program: by_name,
        restart: false,
    });
    s.send(Command::Pause(false));
    s.send(Command::Speed(Speed::Max));
    let ended = wait_status(&s, &mut seen, "the end", |st| {
        matches!(st.state, RunState::Ended(_))
    });
    assert_eq!(ended.generation, 2);
    assert!(ended.position.unwrap().0 >= later.position.unwrap().0);
    // restart: the whole trace again with the current program
    s.send(Command::Restart);
    let again = wait_status(&s, &mut seen, "the end of the restart", |st| {
        st.generation == 3 && matches!(st.state, RunState::Ended(_))
    });
    // the replaced program saw only the rest of the trace: fewer switches than the whole
    let rest = seen.sums[&2];
    let whole = seen.sums[&3];
    let out = &seen.out;
    assert_eq!(again.generation, 3);
    assert_eq!(whole, 29_533, "on-cpu firings over the whole trace");
    assert!(rest > 0 && rest < whole, "rest {rest}, whole {whole}");
    assert!(
        out.contains("powerpnt.exe"),
        "final printing of the replaced program"
    );
}

/// The console's replay names stack frames as `dtx -E` does: also the .NET methods the
/// runtime's events describe (the console once named only the images, so managed frames were
/// bare addresses in its stack view).
#[test]
fn the_console_names_managed_frames_as_the_command_line_does() {
    // filtrace_diskio: Windows 11, full stacks, .NET method events; its samples land in 11112
    let Some(path) = shared("etl-win11", "filtrace_diskio.etl") else {
        return;
    };
    let program = "profile-997 /pid == 11112/ { @[ustack(100)] = count(); }";
    let (s, catalog) = start(&path);
    s.send(Command::Run {
        program: compile_text(program, "a.d", &catalog).unwrap(),
        restart: false,
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut last = None;
    let mut ended = false;
    while Instant::now() < deadline && !ended {
        match s.wait(Duration::from_millis(50)) {
            Some(Update::Snapshot(snap)) => last = Some(snap),
            Some(Update::Status(st)) => ended = matches!(st.state, RunState::Ended(_)),
            _ => {}
        }
    }
    // the snapshot published with the end comes before its status
    let snap = last.expect("no snapshot");
    assert!(ended, "the replay did not end");
    let frames = snapshot_frames(&snap.aggs);
    let managed = |f: &String| f.starts_with("Microsoft.Diagnostics.Tracing.");
    assert!(
        frames.iter().any(managed),
        "no managed frame named in {} frames: {:?}",
        frames.len(),
        &frames[..frames.len().min(20)]
    );
    // the same frames as the command line's
    let text = quiet(&path, program);
    for f in frames.iter().filter(|f| managed(f)) {
        assert!(text.contains(f.as_str()), "{f} is not in dtx -E's output");
    }
}

/// While the console replays a trace, its snapshots name stack frames with the images loaded
/// so far (they were bare addresses until the replay ended).
#[test]
fn stacks_are_named_while_the_replay_runs() {
    let Some(path) = trace(TRACE) else {
        return;
    };
    let (s, catalog) = start(&path);
    // 1x: the replay of this 17-second trace is still going when the first stacks come
    s.send(Command::Speed(Speed::Times(1)));
    s.send(Command::Run {
        program: compile_text("profile-97 { @[stack(2)] = count(); }", "a.d", &catalog).unwrap(),
        restart: false,
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut running = false;
    let mut frames: Vec<String> = Vec::new();
    while Instant::now() < deadline && frames.len() < 20 {
        match s.wait(Duration::from_millis(50)) {
            Some(Update::Status(st)) => running = st.state == RunState::Running,
            Some(Update::Snapshot(snap)) if running => {
                frames = snapshot_frames(&snap.aggs);
            }
            _ => {}
        }
    }
    assert!(running, "the replay was not running");
    assert!(frames.len() >= 20, "{frames:?}");
    let named = frames.iter().filter(|f| f.contains(".exe+0x")).count();
    assert!(
        named * 2 > frames.len(),
        "{named} of {}: {frames:?}",
        frames.len()
    );
}
