//! The console's live ETW path, on any OS: a console session whose ETW source is fed by a
//! replay of a real trace through the very callback a Windows session registers (records
//! rebuilt as `EVENT_RECORD`s on a thread of their own), and by a producer that never lets the
//! queue empty (a flood). What the console shows must equal what `-E` computes for the same
//! records; under a flood, timers, `exit()`, a merged target and Ctrl-C keep working.
//! Skips (with a message) when `../shared/etl` is absent.

use crate::support::etl;
use etl::trace;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dtx::agg::snapshot::{self, AggView};
use dtx::engine::clock::LiveClock;
use dtx::engine::consumer::{Consumer, ConsumerOptions};
use dtx::engine::session::{Command, EtwBackend, RunState, Session, SessionSource, Status, Update};
use dtx::engine::{Engine, EventSource, SourceState};
use dtx::lang::options::DOptions;
use dtx::probes::Catalog;
use dtx::providers::etw::EtwProbes;
use dtx::sources::etl::TraceSource;
use dtx::sources::etw_live::plan::SessionPlan;
use dtx::sources::etw_live::raw::{LiveEvent, RawEventHeader};
use dtx::sources::etw_live::replay::ReplayControl;
use dtx::sources::etw_live::{
    open_source, pass_to_callback, ControlStatus, OpenControl, SessionControl,
};
use dtx::sources::sink::Sink;
use dtx::tui::compile::compile_text;
use dtx::vm::VmOptions;

/// One test of this file at a time: the floods keep a core busy each, and the timing bounds
/// (a second for Ctrl-C, the target's turns) are about dtx, not about sharing two cores.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn dashboard(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/dscripts/top/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("dashboard script")
}

/// The providers of a trace (as the console over that trace would know them).
fn providers(path: &str) -> EtwProbes {
    let mut etw = EtwProbes::new();
    let mut src = TraceSource::open(path).unwrap();
    src.scan_providers(&mut etw);
    etw
}

/// The aggregations `-E path -s script` ends with.
/// With `as_live`, the walk learns threads as their records come, as a live session does
/// (a plain `-E` run reads the trace's thread table before the first firing).
fn file_aggregations(
    path: &str,
    script: &str,
    etw: &EtwProbes,
    catalog: &Catalog,
    as_live: bool,
) -> Vec<AggView> {
    let spec = compile_text(script, "d.d", catalog).expect("compiles");
    let mut e = Engine::new(
        vec![("d.d".into(), spec.program)],
        VmOptions::from_options(&spec.options),
        catalog,
        Box::new(LiveClock::new()),
        Consumer::new(
            Box::new(std::io::sink()),
            ConsumerOptions::from_options(&DOptions::new(), "dtx", true, false),
        ),
    );
    let mut src = TraceSource::open(path).unwrap();
    if as_live {
        src.learn_threads_as_they_come();
    }
    e.walk_trace(&mut src, etw, &mut |_, _| true);
    let mut v = Vec::new();
    for r in &e.runs {
        v.extend(snapshot::take(&r.vm.aggs, &dtx::agg::NoSymbols));
    }
    v
}

/// A backend that replays `path` once (the first open), keeping the control's plan list and
/// done flag for the test.
fn replay_backend(
    path: &str,
    etw: &EtwProbes,
) -> (EtwBackend, Arc<Mutex<Vec<SessionPlan>>>, Arc<AtomicBool>) {
    let (control, _) = ReplayControl::open(std::path::Path::new(path)).unwrap();
    let plans = control.plans();
    let done = control.done_flag();
    let slot = Arc::new(Mutex::new(Some(control)));
    let path = path.to_string();
    let open: OpenControl = Arc::new(move || {
        let control = slot.lock().unwrap().take().ok_or("opened twice")?;
        let (_, time) = ReplayControl::open(std::path::Path::new(&path))?;
        Ok((Box::new(control) as Box<dyn SessionControl>, time))
    });
    (
        EtwBackend {
            etw: Arc::new(etw.clone()),
            open,
        },
        plans,
        done,
    )
}

/// Waits for a status that `want` accepts (20 s at most), keeping the latest snapshot and the
/// messages.
fn wait_status(
    s: &Session,
    want: impl Fn(&Status) -> bool,
    last: &mut Option<Vec<AggView>>,
    said: &mut Vec<String>,
) -> Status {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        match s.wait(Duration::from_millis(100)) {
            Some(Update::Status(st)) if want(&st) => return st,
            Some(Update::Snapshot(snap)) => *last = Some(snap.aggs),
            Some(Update::Error(e)) => said.push(e),
            _ => {}
        }
    }
    panic!("no such status within 60 s (said: {said:?})");
}

/// A console session over `backend` running `script`.
fn run_console(backend: EtwBackend, catalog: &Arc<Catalog>, script: &str, name: &str) -> Session {
    let session = Session::start(
        SessionSource::Etw(backend),
        catalog.clone(),
        Duration::from_millis(50),
    );
    let spec = compile_text(script, name, catalog)
        .unwrap_or_else(|d| panic!("{name}: {}", d.render(true)));
    session.send(Command::Run {
        program: spec,
        restart: false,
    });
    session
}

/// Stops the run and waits for its end (the final snapshot lands in `last`).
fn stop_run(s: &Session, last: &mut Option<Vec<AggView>>, said: &mut Vec<String>) -> Status {
    s.send(Command::Stop);
    wait_status(s, |st| matches!(st.state, RunState::Ended(_)), last, said)
}

/// The console's tables (live, through the replay) against `-E`'s: equal, except that a live
/// source cannot know a thread before a record names it, where `-E` reads the trace's thread
/// table first. So what `-E` gives a process the live path may give `<unknown>`, and nothing else
/// differs: per key, live <= file, and the live `<unknown>` row holds exactly the difference.
fn same_but_unknown(got: &[AggView], want: &[AggView]) {
    use std::collections::HashMap;
    assert_eq!(got.len(), want.len(), "{got:?}\n{want:?}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g.name, w.name);
        let rows = |v: &AggView| -> HashMap<String, i64> {
            (v.rows.iter())
                .map(|r| (format!("{:?}", r.keys), r.value.scalar()))
                .collect()
        };
        let (live, file) = (rows(g), rows(w));
        let unknown = format!(
            "{:?}",
            [dtx::agg::snapshot::KeyCell::Text("<unknown>".into())]
        );
        assert!(!file.contains_key(&unknown), "{}: {w:?}", w.name);
        let mut moved = 0;
        for (k, f) in &file {
            let l = live.get(k).copied().unwrap_or(0);
            assert!(l <= *f, "{} {k}: live {l} > file {f}", w.name);
            moved += f - l;
        }
        assert!(live.keys().all(|k| file.contains_key(k) || *k == unknown));
        assert_eq!(
            live.get(&unknown).copied().unwrap_or(0),
            moved,
            "{}: the console's tables differ from -E's beyond unknown threads\n{g:?}\n{w:?}",
            w.name
        );
    }
}

fn records_in(path: &str) -> u64 {
    let src = TraceSource::open(path).unwrap();
    let mut n = 0;
    let mut events = src.file.events();
    while let Some(r) = events.next_event() {
        if r.is_ok() {
            n += 1;
        }
    }
    n
}

#[test]
fn console_live_etw_default_dashboard_equals_the_file_path() {
    let _one = one_at_a_time();
    let Some(path) = trace("randomascii_slow_ppt_trace.etl.zip") else {
        return;
    };
    let etw = providers(&path);
    let catalog = Arc::new(dtx::providers::etw_catalog(&etw));
    let script = dashboard("cpu.d");
    let want = file_aggregations(&path, &script, &etw, &catalog, false);
    let same_records = file_aggregations(&path, &script, &etw, &catalog, true);
    assert!(want.iter().all(|a| !a.rows.is_empty()), "{want:?}");

    let (backend, plans, done) = replay_backend(&path, &etw);
    let session = run_console(backend, &catalog, &script, "cpu.d");
    let total = records_in(&path);
    let (mut last, mut said) = (None, Vec::new());
    // every record through the callback and the engine
    let st = wait_status(
        &session,
        |st| st.events >= total && st.state == RunState::Running,
        &mut last,
        &mut said,
    );
    assert!(done.load(Ordering::SeqCst));
    assert_eq!(st.sessions.len(), 1, "{st:?}");
    assert_eq!(st.lost, 0, "the replay waits for room: nothing lost");
    stop_run(&session, &mut last, &mut said);
    let got = last.expect("a snapshot");
    // the same records known the same way: the same tables
    assert_eq!(got, same_records, "the console's tables differ from -E's");
    same_but_unknown(&got, &want);
    // the plan: the kernel session with context switches and samples
    let plans = plans.lock().unwrap();
    assert_eq!(plans.len(), 1);
    assert_ne!(plans[0].kernel_flags & 0x10, 0, "CSWITCH");
    assert_ne!(plans[0].kernel_flags & 0x0100_0000, 0, "PROFILE");
    eprintln!("{total} records; {} tables agree", got.len());
}

#[test]
fn console_live_etw_every_top_dashboard_runs_live() {
    let _one = one_at_a_time();
    let Some(path) = trace("randomascii_slow_ppt_trace.etl.zip") else {
        return;
    };
    let etw = providers(&path);
    let catalog = Arc::new(dtx::providers::etw_catalog(&etw));
    let dir = format!("{}/dscripts/top", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".d"))
        .collect();
    names.sort();
    assert!(names.len() >= 7, "{names:?}");
    for name in names {
        let (backend, plans, _) = replay_backend(&path, &etw);
        let session = run_console(backend, &catalog, &dashboard(&name), &name);
        let (mut last, mut said) = (None, Vec::new());
        wait_status(&session, |st| st.events > 10_000, &mut last, &mut said);
        stop_run(&session, &mut last, &mut said);
        let plans = plans.lock().unwrap();
        assert!(
            !plans.is_empty() && plans[0].kernel_flags != 0,
            "{name}: no kernel session planned"
        );
        eprintln!(
            "{name}: planned {:#x}, said {said:?}",
            plans[0].kernel_flags
        );
    }
}

#[test]
fn console_live_etw_replans_a_replaced_program_and_keeps_the_system_state() {
    let _one = one_at_a_time();
    let Some(path) = trace("randomascii_slow_ppt_trace.etl.zip") else {
        return;
    };
    let etw = providers(&path);
    let catalog = Arc::new(dtx::providers::etw_catalog(&etw));
    let (backend, plans, done) = replay_backend(&path, &etw);
    let session = run_console(
        backend,
        &catalog,
        "sched:::on-cpu { @a[execname] = count(); }",
        "a.d",
    );
    let (mut last, mut said) = (None, Vec::new());
    // the replay runs as fast as the engine takes records (the whole trace in about a second):
    // re-plan early, so that most of the trace comes after it
    wait_status(&session, |st| st.events > 20_000, &mut last, &mut said);
    // the edited program: other probes, stacks — the sessions follow, the source stays
    let b = compile_text(
        "profile:::sample-1ms { @b[execname] = count(); } proc:::module-load { @m = count(); }",
        "b.d",
        &catalog,
    )
    .unwrap();
    session.send(Command::Run {
        program: b,
        restart: false,
    });
    let st = wait_status(&session, |st| st.generation == 2, &mut last, &mut said);
    let before = st.events;
    // 100,000 records after the re-plan, or the end of the trace when fewer were left
    wait_status(
        &session,
        |st| st.events > before + 100_000 || done.load(std::sync::atomic::Ordering::SeqCst),
        &mut last,
        &mut said,
    );
    stop_run(&session, &mut last, &mut said);
    let plans = plans.lock().unwrap().clone();
    assert_eq!(plans.len(), 2, "{plans:?}");
    assert_ne!(plans[0].kernel_flags, plans[1].kernel_flags);
    assert_ne!(
        plans[1].kernel_flags & 0x0100_0000,
        0,
        "PROFILE after the re-plan"
    );
    assert_eq!(
        plans[1].kernel_flags & 0x10,
        0,
        "no CSWITCH after the re-plan"
    );
    // the processes the rundown at the trace's start named are still known: the samples
    // taken after the re-plan are attributed to them by name
    let aggs = last.expect("a snapshot");
    let b = aggs.iter().find(|a| a.name == "@b").expect("@b");
    let named = b
        .rows
        .iter()
        .filter(|r| {
            let k = format!("{:?}", r.keys);
            !k.contains("\"\"")
        })
        .count();
    assert!(named >= 5, "{:?}", b.rows);
}

/// A session control whose "session" delivers records as fast as it can, never letting the
/// queue empty (the callback drops what does not fit), until stopped.
struct Flood {
    stop: Arc<AtomicBool>,
    stopped_at: Arc<Mutex<Option<Instant>>>,
    sent: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Flood {
    fn new() -> (Flood, Arc<Mutex<Option<Instant>>>, Arc<AtomicU64>) {
        let stopped_at = Arc::new(Mutex::new(None));
        let sent = Arc::new(AtomicU64::new(0));
        (
            Flood {
                stop: Arc::new(AtomicBool::new(false)),
                stopped_at: stopped_at.clone(),
                sent: sent.clone(),
                thread: None,
            },
            stopped_at,
            sent,
        )
    }
}

impl SessionControl for Flood {
    fn apply(
        &mut self,
        plan: &SessionPlan,
        context: *mut std::ffi::c_void,
    ) -> Result<Vec<String>, String> {
        if self.thread.is_some() || plan.is_empty() {
            return Ok(Vec::new());
        }
        let (stop, sent, ctx) = (self.stop.clone(), self.sent.clone(), context as usize);
        self.thread = Some(std::thread::spawn(move || {
            // a user provider's event no probe asks for: decoded as little as any record
            let ev = LiveEvent {
                header: RawEventHeader {
                    flags: 0x0040,
                    ..Default::default()
                },
                cpu: 0,
                payload: vec![0; 16],
                extended: Vec::new(),
            };
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: the context is the source's, alive until the source stops this
                // control
                unsafe { pass_to_callback(&ev, ctx as *mut std::ffi::c_void) };
                sent.fetch_add(1, Ordering::Relaxed);
            }
        }));
        Ok(Vec::new())
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
            *self.stopped_at.lock().unwrap() = Some(Instant::now());
        }
    }

    fn status(&mut self) -> ControlStatus {
        ControlStatus {
            sessions: vec!["flood".into()],
            ..Default::default()
        }
    }
}

/// A catalog with a user provider the flood's programs enable (so that a session is planned).
fn flood_catalog() -> (Catalog, EtwProbes) {
    let mut etw = EtwProbes::new();
    etw.add_named("flood-provider");
    (dtx::providers::etw_catalog(&etw), etw)
}

fn engine_for(script: &str, catalog: &Catalog) -> Engine {
    let spec = compile_text(script, "flood.d", catalog).expect("compiles");
    Engine::new(
        vec![("flood.d".into(), spec.program)],
        VmOptions::from_options(&spec.options),
        catalog,
        Box::new(LiveClock::new()),
        Consumer::new(
            Box::new(std::io::sink()),
            ConsumerOptions::from_options(&DOptions::new(), "dtx", true, false),
        ),
    )
}

fn flood_open(flood: Flood) -> OpenControl {
    let slot = Arc::new(Mutex::new(Some(flood)));
    Arc::new(move || {
        let f = slot.lock().unwrap().take().ok_or("opened twice")?;
        Ok((Box::new(f) as Box<dyn SessionControl>, Default::default()))
    })
}

fn agg_count(e: &Engine, name: &str) -> u64 {
    for r in &e.runs {
        for a in snapshot::take(&r.vm.aggs, &dtx::agg::NoSymbols) {
            if a.name == name {
                return match a.rows.first().map(|r| &r.value) {
                    Some(dtx::agg::AggValue::Count(n)) => *n,
                    _ => 0,
                };
            }
        }
    }
    0
}

#[test]
fn flood_ticks_fire_on_time_and_exit_ends_the_run() {
    let _one = one_at_a_time();
    let (catalog, etw) = flood_catalog();
    let mut e = engine_for(
        "flood-provider:::events { @n = count(); } tick-100ms { @t = count(); } tick-1s { exit(0); }",
        &catalog,
    );
    let (flood, stopped, sent) = Flood::new();
    let (mut src, _) = open_source(&flood_open(flood), etw, &e, None).unwrap();
    let t0 = Instant::now();
    let code = e.run_live(&mut src);
    let took = t0.elapsed();
    assert_eq!(code, 0);
    assert!(
        took < Duration::from_millis(1800),
        "exit() at 1 s ended the run after {took:?}"
    );
    let ticks = agg_count(&e, "@t");
    assert!((8..=11).contains(&ticks), "{ticks} ticks of 100 ms in 1 s");
    assert!(stopped.lock().unwrap().is_some(), "the session was stopped");
    let n = sent.load(Ordering::Relaxed);
    assert!(
        src.counts.dropped > 0 || n > 1_000_000,
        "not a flood: {n} sent, {} dropped",
        src.counts.dropped
    );
}

/// A merged source that records when it gets its turns.
struct Target {
    turns: Arc<Mutex<Vec<Instant>>>,
}

impl EventSource for Target {
    fn pump(&mut self, deadline: u64, sink: &mut dyn Sink) -> SourceState {
        self.turns.lock().unwrap().push(Instant::now());
        while sink.now_ns() < deadline && !sink.done() {
            std::thread::sleep(Duration::from_micros(200));
        }
        SourceState::Running
    }
}

#[test]
fn flood_a_merged_target_keeps_its_turns() {
    let _one = one_at_a_time();
    let (catalog, etw) = flood_catalog();
    let mut e = engine_for(
        "flood-provider:::events { @n = count(); } tick-1s { exit(0); }",
        &catalog,
    );
    let (flood, _, _) = Flood::new();
    let (src, _) = open_source(&flood_open(flood), etw, &e, None).unwrap();
    let turns = Arc::new(Mutex::new(Vec::new()));
    let mut merged = dtx::sources::merged::MergedSource::new(vec![
        Box::new(src),
        Box::new(Target {
            turns: turns.clone(),
        }),
    ]);
    e.run_live(&mut merged);
    let turns = turns.lock().unwrap();
    // without the deadline inside the ETW pump the target got no turn at all; the gap below
    // tells a starved target (no turn for most of the 1 s run) from a served one, not a speed
    // (Wine on a loaded 2-core machine gave 15 turns, and gaps of 125 to 225 ms)
    assert!(turns.len() >= 5, "{} turns in 1 s", turns.len());
    let gap = turns
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default();
    assert!(
        gap < Duration::from_millis(500),
        "the target waited {gap:?}"
    );
}

#[test]
fn flood_ctrl_c_stops_within_a_second() {
    let _one = one_at_a_time();
    let (catalog, etw) = flood_catalog();
    let mut e = engine_for("flood-provider:::events { @n = count(); }", &catalog);
    let (flood, stopped, _) = Flood::new();
    let (mut src, _) = open_source(&flood_open(flood), etw, &e, None).unwrap();
    let flag = e.interrupt_flag();
    let pressed = Arc::new(Mutex::new(None));
    let p = pressed.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        *p.lock().unwrap() = Some(Instant::now());
        flag.store(true, Ordering::SeqCst);
    });
    e.run_live(&mut src);
    let ended = Instant::now();
    t.join().unwrap();
    let pressed = pressed.lock().unwrap().expect("pressed");
    assert!(
        ended - pressed < Duration::from_secs(1),
        "Ctrl-C took {:?}",
        ended - pressed
    );
    // the sessions stopped before the end
    let stopped = stopped.lock().unwrap().expect("stopped");
    assert!(stopped <= ended);
}

#[test]
fn console_live_etw_flood_keeps_the_console_responsive() {
    let _one = one_at_a_time();
    let (catalog, etw) = flood_catalog();
    let catalog = Arc::new(catalog);
    let (flood, stopped, _) = Flood::new();
    let backend = EtwBackend {
        etw: Arc::new(etw),
        open: flood_open(flood),
    };
    let session = run_console(
        backend,
        &catalog,
        "flood-provider:::events { @n = count(); } tick-100ms { @t = count(); }",
        "f.d",
    );
    let (mut last, mut said) = (None, Vec::new());
    wait_status(
        &session,
        |st| st.state == RunState::Running && st.events > 0,
        &mut last,
        &mut said,
    );
    // statuses keep coming at the refresh rate under the flood
    let t0 = Instant::now();
    let mut statuses = 0;
    while t0.elapsed() < Duration::from_millis(600) {
        if let Some(Update::Status(_)) = session.wait(Duration::from_millis(50)) {
            statuses += 1;
        }
    }
    assert!(statuses >= 3, "{statuses} statuses in 600 ms");
    let asked = Instant::now();
    let st = stop_run(&session, &mut last, &mut said);
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(1), "stopping took {took:?}");
    assert!(stopped.lock().unwrap().is_some());
    assert_eq!(st.sessions, vec!["flood".to_string()]);
}
