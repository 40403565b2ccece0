//! The live ETW source over a session that sees 10,000 short-lived processes (issue 28, frame
//! names): a synthetic trace (process start, a thread, eight image loads, context switches,
//! the process's end; pids reused, as Windows reuses them) played through the live callback
//! on a thread of its own (`ReplayControl`, as a session's ProcessTrace thread), and pumped by
//! the engine in 10 ms slices, as the run loop does. Prints records per second and the
//! longest pump call (a pump asked to return after 10 ms that returns later stalled the
//! engine thread: timers, keys, the console), for a program that prints no frame and one
//! that records stacks. `cargo bench --bench live_names`; figures in docs/performance.md.

#[path = "../tests/it/support/synthetic_etl.rs"]
mod synthetic_etl;

use std::time::{Duration, Instant};

use dtx::engine::clock::LiveClock;
use dtx::engine::consumer::{Consumer, ConsumerOptions};
use dtx::engine::{Engine, EventSource};
use dtx::lang::options::DOptions;
use dtx::providers::etw::EtwProbes;
use dtx::sources::etw_live::replay::ReplayControl;
use dtx::sources::etw_live::{CallbackContext, EtwLiveSource, QUEUE_RECORDS};
use dtx::tui::compile::compile_text;
use dtx::vm::VmOptions;
use synthetic_etl::{trace_bytes, CpuRecords, START};

const PROCESSES: u32 = 10_000;

/// The number of processes: [`PROCESSES`], or `DTX_BENCH_PROCESSES` (a smaller replay for
/// callgrind).
fn processes() -> u32 {
    std::env::var("DTX_BENCH_PROCESSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(PROCESSES)
}
const IMAGES: u64 = 8;
const SWITCHES: u32 = 60;

/// The trace: processes one after another over two CPUs, 2 ms apart.
fn trace() -> Vec<u8> {
    let mut cpus = [CpuRecords::default(), CpuRecords::default()];
    let mut ts = START + 10;
    for i in 0..processes() {
        let c = &mut cpus[(i % 2) as usize];
        let pid = 1000 + 4 * (i % 500);
        let tid = 100_000 + i;
        let name = format!("short{}.exe", i % 50);
        c.process_start(ts, pid, &name);
        c.thread(ts + 1, pid, tid);
        for k in 0..IMAGES {
            let file = format!("\\Windows\\System32\\lib{k}_{}.dll", i % 100);
            c.image_load(
                ts + 2 + k as i64,
                pid,
                0x7ff0_0000_0000 + k * 0x10_0000,
                0x8_0000,
                &file,
            );
        }
        for s in 0..SWITCHES {
            let t = ts + 20 + s as i64 * 100;
            if s % 2 == 0 {
                c.cswitch(t, tid, 0);
            } else {
                c.cswitch(t, 0, tid);
            }
        }
        c.process_end(ts + 19_000, pid, &name);
        ts += 20_000;
    }
    trace_bytes(&cpus)
}

/// (records, records/s, longest pump call, pump calls) for `script` over the trace at `path`.
fn run(path: &std::path::Path, script: &str) -> (u64, f64, Duration, u64) {
    let mut etw = EtwProbes::new();
    let mut scan = dtx::sources::etl::TraceSource::open(&path.to_string_lossy()).unwrap();
    scan.scan_providers(&mut etw);
    let catalog = dtx::providers::etw_catalog(&etw);
    let spec = compile_text(script, "bench.d", &catalog).expect("compiles");
    let opts = DOptions::new();
    let consumer = Consumer::new(
        Box::new(std::io::sink()),
        ConsumerOptions::from_options(&opts, "dtx", true, false),
    );
    let mut e = Engine::new(
        vec![("bench.d".into(), spec.program)],
        VmOptions::from_options(&spec.options),
        &catalog,
        Box::new(LiveClock::new()),
        consumer,
    );
    let (control, time) = ReplayControl::open(path).unwrap();
    let done = control.done_flag();
    let (context, rx) = CallbackContext::channel(QUEUE_RECORDS);
    let mut live =
        EtwLiveSource::new(context, rx, etw, time, false).with_control(Box::new(control));
    e.begin(None);
    let started = Instant::now();
    live.replan(&e).unwrap();
    let (mut longest, mut calls) = (Duration::ZERO, 0u64);
    while !done.load(std::sync::atomic::Ordering::SeqCst) {
        let t = Instant::now();
        let deadline = e.now_ns() + 10_000_000;
        live.pump(deadline, &mut e);
        longest = longest.max(t.elapsed());
        calls += 1;
    }
    live.finish(&mut e);
    live.closing(&mut e);
    let secs = started.elapsed().as_secs_f64();
    e.end();
    let n = live.counts.records;
    (n, n as f64 / secs, longest, calls)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("processes.etl");
    std::fs::write(&path, trace()).unwrap();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{} short-lived processes, {IMAGES} images each; load average {}",
        processes(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    for (what, script) in [
        ("no frames", "proc:::exit { @[execname] = count(); }"),
        (
            "ustack()",
            "proc:::exit { @[execname] = count(); } sched:::on-cpu { @s[ustack(2)] = count(); }",
        ),
    ] {
        // `DTX_BENCH_ONLY="no frames"` (or `ustack()`): one of the two (for callgrind)
        if std::env::var("DTX_BENCH_ONLY").is_ok_and(|o| o != what) {
            continue;
        }
        let (n, rate, longest, calls) = run(&path, script);
        println!(
            "{what:>10}: {n} records, {:.0} records/s, longest pump {:.1} ms of a 10 ms slice \
             ({calls} pumps)",
            rate,
            longest.as_secs_f64() * 1e3
        );
    }
}
