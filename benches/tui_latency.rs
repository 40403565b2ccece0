//! Console responsiveness while the engine replays a trace at full speed: the real binary runs
//! in a pseudo-terminal over `randomascii_slow_ppt_trace.etl.zip` with a script that fires on
//! every context switch, interrupt and sample; the bench presses F1 and Esc over and over and
//! times each key until the screen shows its effect. Target: every key answered within 50 ms.
//! Run with `cargo bench --bench tui_latency`; skips when the trace is absent.

#[path = "../tests/it/support/pty.rs"]
mod pty;

use std::time::{Duration, Instant};

fn main() {
    let trace = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/etl/randomascii_slow_ppt_trace.etl.zip");
    if !trace.exists() {
        eprintln!("skipped: {} is not here", trace.display());
        return;
    }
    let bin = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/dtx");
    if !bin.exists() {
        eprintln!("skipped: build target/release/dtx first (cargo build --release)");
        return;
    }
    let state = std::env::temp_dir().join("dtx-latency-bench");
    let state_s = state.to_string_lossy().into_owned();
    let trace_s = trace.to_string_lossy().into_owned();
    let script =
        "sched:::on-cpu, isr:::isr, profile:::sample-1ms { @[execname, probename] = count(); }";
    let mut s = pty::PtySession::spawn(
        &bin.to_string_lossy(),
        &["--tui", "-E", &trace_s, "-n", script],
        &[("XDG_STATE_HOME", &state_s), ("XDG_CONFIG_HOME", &state_s)],
        120,
        40,
    );
    // the first run (it may be over already: the replay takes about a second)
    s.wait_for("the run", Duration::from_secs(30), |t| {
        t.contains("running") || t.contains("ended 0")
    });
    let mut busy = Vec::new();
    let until = Instant::now() + Duration::from_secs(30);
    let mut runs = 0;
    while Instant::now() < until && busy.len() < 200 {
        // start the trace over: the engine thread reopens it and replays it at full speed
        // (about a second), and the keys below are pressed meanwhile
        s.send("\x1b[18~"); // F7
        runs += 1;
        std::thread::sleep(Duration::from_millis(20));
        for _ in 0..3 {
            let t0 = Instant::now();
            s.send("\x1bOP"); // F1
            s.wait_for("help", Duration::from_secs(5), |t| t.contains("dtx keys"));
            busy.push(t0.elapsed());
            let t1 = Instant::now();
            s.send("\x1b");
            s.wait_for("help closed", Duration::from_secs(5), |t| {
                !t.contains("dtx keys")
            });
            busy.push(t1.elapsed());
        }
        s.wait_for("the end of the replay", Duration::from_secs(30), |t| {
            t.contains(&format!("run #{} ", runs + 1)) && t.contains("ended")
        });
    }
    s.send("\x11");
    s.wait_exit(Duration::from_secs(10));
    report("while the engine replays at full speed", &mut busy);
}

fn report(what: &str, v: &mut [Duration]) {
    if v.is_empty() {
        println!("{what}: no samples");
        return;
    }
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "key latency {what}: {} keys, median {:.1} ms, p95 {:.1} ms, max {:.1} ms",
        v.len(),
        ms(v[v.len() / 2]),
        ms(v[v.len() * 95 / 100]),
        ms(v[v.len() - 1])
    );
}
