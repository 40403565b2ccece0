//! A running engine behind a handle, for interactive consumers (the TUI): the engine and its
//! event source live on a worker thread; commands go in (run a program, replace it while the
//! source keeps going, pause, speed, restart, stop), and updates come out (the text the program
//! printed, aggregation snapshots at the refresh rate, status: events/s, firings/s, drops,
//! errors, position in the trace).

use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::clock::LiveClock;
use super::consumer::{Consumer, ConsumerOptions};
use super::{Engine, EventSource, SourceState};
use crate::agg::snapshot::{self, Snapshot};
use crate::agg::{NoSymbols, SymbolResolver};
use crate::ir;
use crate::lang::options::DOptions;
use crate::probes::Catalog;
use crate::providers::etw::EtwProbes;
use crate::providers::pid::PidProvider;
use crate::sources::debugger::{OpenTarget, PidSource, TargetProcess, TargetRequest};
use crate::sources::etl::TraceSource;
use crate::vm::VmOptions;

/// Where a session's events come from.
#[derive(Clone)]
pub enum SessionSource {
    /// A recorded trace, replayed in trace time.
    Trace { path: String, etw: Arc<EtwProbes> },
    /// The live clock: BEGIN, END and the timers of `tick-N`/`profile-N`, and on Linux the
    /// perf events the program's probes need.
    Timers,
    /// The live clock and live ETW: sessions planned for the program's probes (kernel and
    /// user providers), re-planned when the program is replaced.
    Etw(EtwBackend),
}

/// How a console session gets its ETW sessions: on Windows real ones
/// (`sources::etw_live::windows::open_control`), elsewhere a replay of a trace through the
/// same callback (tests).
#[derive(Clone)]
pub struct EtwBackend {
    /// The providers the programs may name (the kernel providers and the user providers).
    pub etw: Arc<EtwProbes>,
    pub open: crate::sources::etw_live::OpenControl,
}

impl SessionSource {
    /// How the status line names the source.
    pub fn label(&self) -> String {
        match self {
            SessionSource::Trace { path, .. } => std::path::Path::new(path)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.clone()),
            SessionSource::Timers => "live".into(),
            SessionSource::Etw(_) => "live ETW".into(),
        }
    }
}

/// The process a live session traces (`-c cmd` / `-p pid` in the console). It is opened on
/// the session's thread (debugger APIs answer only the thread that attached), held stopped
/// until the first run, let go between runs and grabbed again for the next one.
pub struct SessionTarget {
    pub request: TargetRequest,
    pub open: OpenTarget,
    pub provider: PidProvider,
}

/// The session's side of its target.
struct WorkerTarget {
    pid: u32,
    created: bool,
    /// The process as opened, until the first run takes it.
    held: Option<Box<dyn TargetProcess>>,
    open: OpenTarget,
    provider: PidProvider,
    /// The process has ended (how), or can no longer be grabbed.
    gone: Option<String>,
}

/// A compiled program ready to run, with the options its text set.
#[derive(Clone)]
pub struct ProgramSpec {
    pub label: String,
    pub program: Arc<ir::Program>,
    pub options: DOptions,
}

/// How fast a trace is replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Speed {
    /// As fast as the engine goes.
    Max,
    /// N seconds of trace per second of wall time.
    Times(u32),
}

impl std::fmt::Display for Speed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Speed::Max => f.write_str("max"),
            Speed::Times(n) => write!(f, "{n}x"),
        }
    }
}

/// Commands to a session.
pub enum Command {
    /// Runs `program`. With a program already running: replaces it while the source keeps
    /// going (`restart: false`), or starts the trace over with it (`restart: true`).
    Run {
        program: ProgramSpec,
        restart: bool,
    },
    /// Pauses or resumes a trace replay.
    Pause(bool),
    Speed(Speed),
    /// Starts the trace over with the current program.
    Restart,
    /// Ends the current run: END fires and the final output comes.
    Stop,
    /// Ends the session.
    Quit,
}

/// What a session is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunState {
    /// No program yet.
    Idle,
    Running,
    Paused,
    /// The run ended (end of the trace, `exit()`, or Stop) with this status.
    Ended(i32),
}

/// The session's counters and state, sent at each refresh.
#[derive(Clone, Debug, PartialEq)]
pub struct Status {
    pub state: RunState,
    pub generation: u64,
    pub source: String,
    /// Trace time reached and the trace's length (ns), when replaying a trace.
    pub position: Option<(u64, u64)>,
    pub speed: Speed,
    pub events: u64,
    pub events_per_s: f64,
    pub firings: u64,
    pub firings_per_s: f64,
    pub drops: u64,
    pub errors: u64,
    /// The live sessions read from (ETW sessions, perf), empty when none.
    pub sessions: Vec<String>,
    /// Events the system lost before dtx saw them, plus those dtx dropped (live sources).
    pub lost: u64,
}

impl Status {
    /// The status of a session that has run nothing yet.
    pub fn new(source: String) -> Self {
        Status {
            state: RunState::Idle,
            generation: 0,
            source,
            position: None,
            speed: Speed::Max,
            events: 0,
            events_per_s: 0.0,
            firings: 0,
            firings_per_s: 0.0,
            drops: 0,
            errors: 0,
            sessions: Vec::new(),
            lost: 0,
        }
    }
}

/// What a session reports.
#[derive(Clone, Debug)]
pub enum Update {
    /// Text the program printed (dtrace's output), in order.
    Output(String),
    Snapshot(Snapshot),
    Status(Status),
    /// A problem with the source (a trace that cannot be opened).
    Error(String),
    /// What dtrace says on stderr that is no problem: the target process has exited (the
    /// command line writes it to stderr; the console shows it in its output pane).
    Notice(String),
}

/// The handle: commands in, updates out. Dropping it ends the session.
pub struct Session {
    commands: Sender<Command>,
    updates: Receiver<Update>,
    worker: Option<JoinHandle<()>>,
}

impl Session {
    /// Starts a session's worker thread; it waits for a [`Command::Run`].
    pub fn start(source: SessionSource, catalog: Arc<Catalog>, refresh: Duration) -> Session {
        match Self::start_traced(source, catalog, refresh, None) {
            Ok((s, _)) => s,
            // no engine thread: a session whose commands go nowhere and that sends nothing
            Err(_) => Session {
                commands: mpsc::channel().0,
                updates: mpsc::channel().1,
                worker: None,
            },
        }
    }

    /// [`Session::start`] on the live clock with a target process: it is started or grabbed
    /// before this returns, with its pid (for `$target`), or the reason it could not be.
    pub fn start_with_target(
        source: SessionSource,
        catalog: Arc<Catalog>,
        refresh: Duration,
        target: SessionTarget,
    ) -> Result<(Session, u32), String> {
        Self::start_traced(source, catalog, refresh, Some(target))
            .map(|(s, pid)| (s, pid.unwrap_or(0)))
    }

    fn start_traced(
        source: SessionSource,
        catalog: Arc<Catalog>,
        refresh: Duration,
        target: Option<SessionTarget>,
    ) -> Result<(Session, Option<u32>), String> {
        let (ctx, crx) = mpsc::channel();
        let (utx, urx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<Option<u32>, String>>();
        let worker = std::thread::Builder::new()
            .name("dtx-engine".into())
            .spawn(move || {
                let target = match target.map(|t| open_target(t, &utx)) {
                    None => None,
                    Some(Ok(t)) => Some(t),
                    Some(Err(e)) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let mut status = Status::new(source.label());
                if let Some(t) = &target {
                    status.source = format!("pid {}", t.pid);
                }
                let _ = ready_tx.send(Ok(target.as_ref().map(|t| t.pid)));
                let mut w = Worker {
                    target,
                    commands: crx,
                    updates: utx,
                    catalog,
                    status,
                    source,
                    default_refresh: refresh,
                    refresh,
                    output: SharedOutput::default(),
                    pending: None,
                    current: None,
                    paused: false,
                    speed: Speed::Max,
                    symbols: Box::new(NoSymbols),
                    live: None,
                };
                // while the console captures dtx's stderr lines, they go among the program's
                // output in the order they are said
                let mut said = w.output.clone();
                let _routed = crate::output::stderr::route(Box::new(move |line: &str| {
                    let _ = writeln!(said, "{}{line}", crate::output::stderr::MARK);
                }));
                w.serve();
                w.release_target();
            })
            .map_err(|e| format!("failed to start the engine thread: {e}"))?;
        let pid = ready_rx
            .recv()
            .map_err(|_| "the engine thread ended".to_string())??;
        Ok((
            Session {
                commands: ctx,
                updates: urx,
                worker: Some(worker),
            },
            pid,
        ))
    }

    /// Sends a command; false when the session has ended.
    pub fn send(&self, c: Command) -> bool {
        self.commands.send(c).is_ok()
    }

    /// The updates that have arrived, without waiting.
    pub fn poll(&self) -> Vec<Update> {
        self.updates.try_iter().collect()
    }

    /// Waits up to `timeout` for the next update.
    pub fn wait(&self, timeout: Duration) -> Option<Update> {
        self.updates.recv_timeout(timeout).ok()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Quit);
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// The consumer's output, shared with the worker, which hands it on at each refresh.
#[derive(Clone, Default)]
struct SharedOutput(Arc<Mutex<Vec<u8>>>);

impl Write for SharedOutput {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut v) = self.0.lock() {
            v.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedOutput {
    fn take(&self) -> Vec<u8> {
        self.0
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }
}

/// Opens a session's target on the worker thread; a started process's output goes to the
/// session's log, line by line.
fn open_target(t: SessionTarget, updates: &Sender<Update>) -> Result<WorkerTarget, String> {
    let opened = (t.open)(&t.request, true)?;
    if let Some(out) = opened.output {
        let updates = updates.clone();
        let _ = std::thread::Builder::new()
            .name("dtx-target-output".into())
            .spawn(move || forward_output(out, &updates));
    }
    Ok(WorkerTarget {
        pid: opened.process.pid(),
        created: opened.created,
        held: Some(opened.process),
        open: t.open,
        provider: t.provider,
        gone: None,
    })
}

/// Sends what a target prints as [`Update::Output`], a line (or 4 KiB) at a time, until it
/// closes its output.
fn forward_output(mut from: impl std::io::Read, updates: &Sender<Update>) {
    let mut buf = [0u8; 4096];
    let mut line = Vec::new();
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        line.extend_from_slice(&buf[..n]);
        if let Some(end) = line.iter().rposition(|&b| b == b'\n') {
            let rest = line.split_off(end + 1);
            let text = String::from_utf8_lossy(&line).into_owned();
            line = rest;
            if updates.send(Update::Output(text)).is_err() {
                return;
            }
        } else if line.len() >= buf.len() {
            let text = String::from_utf8_lossy(&line).into_owned();
            line.clear();
            if updates.send(Update::Output(text)).is_err() {
                return;
            }
        }
    }
    if !line.is_empty() {
        let _ = updates.send(Update::Output(String::from_utf8_lossy(&line).into_owned()));
    }
}

/// How a run ended, for the worker's loop.
enum Outcome {
    /// The run is over; wait for the next command.
    Ended,
    /// Start over with the pending program.
    Restart,
    Quit,
}

struct Worker {
    target: Option<WorkerTarget>,
    commands: Receiver<Command>,
    updates: Sender<Update>,
    catalog: Arc<Catalog>,
    source: SessionSource,
    status: Status,
    /// The session's refresh interval, and the one in force (a program's `aggrate` when set).
    default_refresh: Duration,
    refresh: Duration,
    output: SharedOutput,
    /// The program of the next run.
    pending: Option<ProgramSpec>,
    /// The program running (or run last).
    current: Option<ProgramSpec>,
    paused: bool,
    speed: Speed,
    /// Names stack frames and symbol keys in snapshots (a live source's resolver).
    symbols: Box<dyn SymbolResolver + Send>,
    /// What the live sources reported at the last refresh.
    live: Option<crate::engine::LiveStatus>,
}

/// What a command means for the run in progress.
enum Step {
    Continue,
    /// Leave the walk: the outcome says what next.
    Leave(Outcome),
}

impl Worker {
    fn serve(&mut self) {
        loop {
            if self.pending.is_none() {
                match self.commands.recv() {
                    Ok(Command::Run { program, .. }) => self.pending = Some(program),
                    Ok(Command::Restart) => self.pending = self.current.clone(),
                    Ok(Command::Pause(p)) => self.paused = p,
                    Ok(Command::Speed(s)) => self.set_speed(s),
                    Ok(Command::Stop) => {}
                    Ok(Command::Quit) | Err(_) => return,
                }
                continue;
            }
            let Some(spec) = self.pending.take() else {
                continue;
            };
            self.current = Some(spec.clone());
            self.status.generation += 1;
            let outcome = match self.source.clone() {
                SessionSource::Trace { path, etw } => self.run_trace(&path, &etw, spec),
                SessionSource::Timers | SessionSource::Etw(_) => self.run_timers(spec),
            };
            match outcome {
                Outcome::Ended | Outcome::Restart => {}
                Outcome::Quit => return,
            }
        }
    }

    fn set_speed(&mut self, s: Speed) {
        self.speed = s;
        self.status.speed = s;
    }

    /// Snapshots come at the program's `aggrate` when it sets one (at least every 10 ms), else
    /// at the session's refresh rate.
    fn set_refresh(&mut self, spec: &ProgramSpec) {
        self.refresh = if spec.options.is_set("aggrate") {
            Duration::from_nanos(spec.options.aggrate().max(10_000_000))
        } else {
            self.default_refresh
        };
    }

    fn engine_for(&mut self, spec: &ProgramSpec) -> Engine {
        self.set_refresh(spec);
        Engine::new(
            vec![(spec.label.clone(), spec.program.clone())],
            VmOptions::from_options(&spec.options),
            &*self.catalog,
            Box::new(LiveClock::new()),
            self.consumer_for(spec),
        )
    }

    fn consumer_for(&self, spec: &ProgramSpec) -> Consumer {
        Consumer::new(
            Box::new(self.output.clone()),
            ConsumerOptions::from_options(&spec.options, "dtx", false, false),
        )
    }

    /// Applies a command in the middle of a run.
    fn command(&mut self, c: Command, engine: &mut Engine) -> Step {
        match c {
            Command::Run {
                program,
                restart: false,
            } => {
                self.status.generation += 1;
                self.set_refresh(&program);
                let consumer = self.consumer_for(&program);
                engine.replace_programs(
                    vec![(program.label.clone(), program.program.clone())],
                    VmOptions::from_options(&program.options),
                    &*self.catalog,
                    Some(consumer),
                );
                self.current = Some(program);
                // the old results stay on screen until the new program has some
                Step::Continue
            }
            Command::Run {
                program,
                restart: true,
            } => {
                self.pending = Some(program);
                Step::Leave(Outcome::Restart)
            }
            Command::Restart => {
                self.pending = self.current.clone();
                Step::Leave(Outcome::Restart)
            }
            Command::Pause(p) => {
                self.paused = p;
                Step::Continue
            }
            Command::Speed(s) => {
                self.set_speed(s);
                Step::Continue
            }
            Command::Stop => Step::Leave(Outcome::Ended),
            Command::Quit => Step::Leave(Outcome::Quit),
        }
    }

    /// Takes the next command, waiting up to `wait` (not at all when it is zero), and applies
    /// it: `Ok(true)` when one was applied, `Ok(false)` when none came, `Err` with what follows
    /// when the run is to end (the handle's side gone means Quit).
    fn receive(&mut self, wait: Duration, engine: &mut Engine) -> Result<bool, Outcome> {
        let c = if wait.is_zero() {
            match self.commands.try_recv() {
                Ok(c) => c,
                Err(TryRecvError::Empty) => return Ok(false),
                Err(TryRecvError::Disconnected) => return Err(Outcome::Quit),
            }
        } else {
            match self.commands.recv_timeout(wait) {
                Ok(c) => c,
                Err(RecvTimeoutError::Timeout) => return Ok(false),
                Err(RecvTimeoutError::Disconnected) => return Err(Outcome::Quit),
            }
        };
        match self.command(c, engine) {
            Step::Continue => Ok(true),
            Step::Leave(o) => Err(o),
        }
    }

    /// Sends what the program printed, a snapshot and the status.
    fn publish(&mut self, engine: &Engine, rates: &mut Rates) {
        let text = self.output.take();
        if !text.is_empty() {
            let _ = self
                .updates
                .send(Update::Output(String::from_utf8_lossy(&text).into_owned()));
        }
        let mut aggs = Vec::new();
        for r in &engine.runs {
            aggs.extend(snapshot::take(&r.vm.aggs, &*self.symbols));
        }
        let _ = self.updates.send(Update::Snapshot(Snapshot {
            generation: self.status.generation,
            time_ns: engine.trace_time().unwrap_or_else(|| engine.now_ns()),
            aggs,
        }));
        self.status.firings = engine.firings();
        self.status.drops = engine.drops();
        self.status.errors = engine.errors();
        if let Some(live) = self.live.as_mut() {
            self.status.events = live.records;
            self.status.sessions = live.sessions.clone();
            self.status.lost = live.lost + live.dropped;
            for m in std::mem::take(&mut live.messages) {
                let _ = self.updates.send(Update::Error(m));
            }
        }
        rates.update(&mut self.status);
        let _ = self.updates.send(Update::Status(self.status.clone()));
    }

    fn run_trace(&mut self, path: &str, etw: &EtwProbes, spec: ProgramSpec) -> Outcome {
        let mut src = match TraceSource::open(path) {
            Ok(s) => s,
            Err(e) => {
                let _ = self.updates.send(Update::Error(e.to_string()));
                return Outcome::Ended;
            }
        };
        let h = src.file.header();
        let length = if h.end_time > h.start_time && h.start_time > 0 {
            (h.end_time - h.start_time) as u64 * 100
        } else {
            0
        };
        if super::uses_stacks(&spec.program) {
            src.collect_stacks();
        }
        // the status counts every record, and a re-run may enable other probes mid-walk
        src.walk_every_record();
        let mut engine = self.engine_for(&spec);
        self.status.state = RunState::Running;
        self.status.events = 0;
        self.status.position = Some((0, length));
        let mut rates = Rates::new();
        engine.set_trace_name(&src.name);
        engine.say_before_trace(etw);
        engine.begin(Some(src.start_unix_ns()));
        let mut last = Instant::now();
        // pacing: trace time `anchor.1` was reached at wall time `anchor.0`
        let mut anchor: Option<(Instant, u64)> = None;
        let mut outcome = None;
        let mut events = 0u64;
        // the snapshots name stack frames with the images the walk has seen so far (PDBs
        // read once for the run), rebuilt as images come
        let mut names = crate::sources::etl::WalkNames::of(&src);
        let errors = engine.walk_trace(&mut src, etw, &mut |engine, state| {
            events += 1;
            if events & 255 != 0 && self.speed == Speed::Max {
                return true;
            }
            self.status.events = events;
            let t = engine.trace_time().unwrap_or(0);
            self.status.position = Some((t, length.max(t)));
            loop {
                match self.receive(Duration::ZERO, engine) {
                    Ok(true) if self.speed != Speed::Max => anchor = None,
                    Ok(_) => {}
                    Err(o) => {
                        outcome = Some(o);
                        return false;
                    }
                }
                let now = Instant::now();
                if now.duration_since(last) >= self.refresh {
                    last = now;
                    self.status.state = if self.paused {
                        RunState::Paused
                    } else {
                        RunState::Running
                    };
                    if let Some(n) = names.current_every(state, Duration::from_secs(1)) {
                        self.symbols = Box::new(n);
                    }
                    self.publish(engine, &mut rates);
                }
                let wait = if self.paused {
                    Some(Duration::from_millis(20))
                } else if let Speed::Times(x) = self.speed {
                    let (w0, t0) = *anchor.get_or_insert((now, t));
                    let due = w0 + Duration::from_nanos(t.saturating_sub(t0) / x.max(1) as u64);
                    due.checked_duration_since(now)
                        .map(|d| d.min(Duration::from_millis(20)))
                } else {
                    None
                };
                match wait {
                    Some(d) if !d.is_zero() => match self.receive(d, engine) {
                        Ok(true) => anchor = None,
                        Ok(false) => {}
                        Err(o) => {
                            outcome = Some(o);
                            return false;
                        }
                    },
                    _ => return true,
                }
            }
        });
        self.status.events = events;
        match outcome {
            Some(Outcome::Restart) => Outcome::Restart,
            Some(Outcome::Quit) => Outcome::Quit,
            _ => {
                engine.say_after_trace(None, &errors);
                // stacks print with the modules the trace had loaded
                let syms = src.symbols();
                engine.consumer.symbols = Box::new(syms.clone());
                self.symbols = Box::new(syms);
                let code = engine.end();
                self.status.state = RunState::Ended(code);
                if let Some((t, len)) = self.status.position {
                    self.status.position = Some((t.max(len), len.max(t)));
                }
                self.publish(&engine, &mut rates);
                Outcome::Ended
            }
        }
    }

    fn run_timers(&mut self, spec: ProgramSpec) -> Outcome {
        let mut engine = self.engine_for(&spec);
        self.status.state = RunState::Running;
        self.status.position = None;
        self.status.events = 0;
        self.live = None;
        let kernel = self.open_kernel(&mut engine, &spec.options);
        let target = self.open_target(&mut engine, kernel.is_some());
        let mut pump = CommandPump {
            worker: self,
            outcome: None,
            last: Instant::now(),
            rates: Rates::new(),
            generation: 0,
            kernel,
            target,
            options: spec.options.clone(),
        };
        pump.generation = pump.worker.status.generation;
        let code = engine.run_live(&mut pump);
        let outcome = pump.outcome.take();
        let mut rates = std::mem::replace(&mut pump.rates, Rates::new());
        pump.refresh_live();
        drop(pump);
        self.symbols = Box::new(NoSymbols);
        match outcome {
            Some(Outcome::Restart) => Outcome::Restart,
            Some(Outcome::Quit) => Outcome::Quit,
            _ => {
                self.status.state = RunState::Ended(code);
                self.publish(&engine, &mut rates);
                Outcome::Ended
            }
        }
    }

    /// Whether the programs record stacks.
    fn uses_stacks(engine: &Engine) -> bool {
        engine
            .runs
            .iter()
            .any(|r| super::uses_stacks(&r.vm.program))
    }

    /// The live source of the system's events the program's probes need: live ETW sessions
    /// (the session's ETW backend), or perf events on Linux. A failure to open it is reported
    /// (one line in the console) and the run goes on without it.
    fn open_kernel(
        &mut self,
        engine: &mut Engine,
        options: &DOptions,
    ) -> Option<Box<dyn EventSource>> {
        // the ETW sessions take their sizes from the backend the session was opened with
        #[cfg(not(target_os = "linux"))]
        let _ = options;
        if let SessionSource::Etw(backend) = &self.source {
            let opened = crate::sources::etw_live::open_source(
                &backend.open,
                (*backend.etw).clone(),
                engine,
                self.target.as_ref().map(|t| t.pid),
            );
            return match opened {
                Ok((src, notes)) => {
                    for n in notes {
                        let _ = self.updates.send(Update::Error(n));
                    }
                    Some(Box::new(src))
                }
                Err(e) => {
                    let _ = self.updates.send(Update::Error(e));
                    None
                }
            };
        }
        #[cfg(target_os = "linux")]
        {
            use crate::sources::perf::live::{open_for, PerfConfig};
            // the program's own `-x bufsize` and `-x bpf`, as the command line reads them
            let config = PerfConfig::from_options(options, Self::uses_stacks(engine), false);
            match open_for(engine, &config) {
                Ok(None) => {}
                Ok(Some((src, symbols))) => {
                    self.symbols = Box::new(symbols);
                    return Some(Box::new(src));
                }
                Err(e) => {
                    let _ = self.updates.send(Update::Error(e));
                }
            }
        }
        None
    }

    /// The target as a run's source (when the session has one); its resolver names the
    /// snapshots' user frames when no kernel source does.
    fn open_target(
        &mut self,
        engine: &mut Engine,
        kernel_names_frames: bool,
    ) -> Option<Box<dyn EventSource>> {
        let stacks = Self::uses_stacks(engine);
        let src = self.open_target_source(engine, stacks, !kernel_names_frames)?;
        // fpid hooks go in while the target is still held
        #[cfg(any(target_os = "linux", windows))]
        {
            let provider = self.target.as_ref()?.provider.clone();
            let ring = crate::sources::fpid::RingOptions::default();
            match crate::sources::fpid::split(Some(src), &provider, engine, ring) {
                Ok((pid, fpid)) => {
                    let mut v: Vec<Box<dyn EventSource>> = Vec::new();
                    if let Some(p) = pid {
                        v.push(Box::new(p));
                    }
                    if let Some(f) = fpid {
                        v.push(Box::new(f));
                    }
                    crate::sources::merged::MergedSource::new(v).simplify()
                }
                Err(e) => {
                    let _ = self.updates.send(Update::Error(e));
                    None
                }
            }
        }
        #[cfg(not(any(target_os = "linux", windows)))]
        Some(Box::new(src) as Box<dyn EventSource>)
    }

    /// The target as a run's source: the process held since the session started, or grabbed
    /// again (it ran untraced since the last run).
    fn open_target_source(
        &mut self,
        engine: &Engine,
        stacks: bool,
        name_stacks: bool,
    ) -> Option<PidSource> {
        let t = self.target.as_mut()?;
        if t.gone.is_some() {
            return None;
        }
        let process = match t.held.take() {
            Some(p) => p,
            None => match (t.open)(&TargetRequest::Pid(t.pid), false) {
                Ok(o) => o.process,
                Err(e) => {
                    t.gone = Some(e.clone());
                    self.status.source = format!("pid {} (gone)", t.pid);
                    let _ = self.updates.send(Update::Error(e));
                    return None;
                }
            },
        };
        if name_stacks {
            self.symbols = Box::new(crate::providers::pid::UserSymbols(t.provider.clone()));
        }
        let mut src = PidSource::new(process, t.provider.clone(), engine);
        src.want_ustack = stacks;
        src.announce = false;
        src.created = t.created;
        Some(src)
    }

    /// A live source ended: when the session has a target, it was the target exiting.
    fn source_ended(&mut self, status: Option<i32>) {
        let Some(t) = self.target.as_mut() else {
            return;
        };
        let how = match status {
            Some(0) | None => format!("pid {} has exited", t.pid),
            Some(c) if c > 128 => format!("pid {} terminated by signal {}", t.pid, c - 128),
            Some(c) => format!("pid {} exited with status {c}", t.pid),
        };
        self.status.source = format!("pid {} (exited)", t.pid);
        let _ = self.updates.send(Update::Notice(how.clone()));
        t.gone = Some(how);
    }

    /// At the end of the session: a target that no run used is ended if dtx started it (as
    /// dtrace does), else let go.
    fn release_target(&mut self) {
        if let Some(t) = self.target.as_mut() {
            if let Some(mut p) = t.held.take() {
                if t.created {
                    p.terminate();
                } else {
                    p.detach(&[]);
                }
            }
        }
    }
}

/// The live source of a session with no trace: the kernel's events (live ETW, or perf
/// events on Linux) and the target process when the program needs them, and the commands,
/// until the next timer. When the program is replaced, live ETW re-plans its sessions in place
/// (the system state it built stays); the other sources are opened again.
struct CommandPump<'w> {
    worker: &'w mut Worker,
    outcome: Option<Outcome>,
    last: Instant,
    rates: Rates,
    /// The program generation the live sources were opened for.
    generation: u64,
    kernel: Option<Box<dyn EventSource>>,
    target: Option<Box<dyn EventSource>>,
    /// The options of the run's program (a live source opened again takes its sizes).
    options: DOptions,
}

impl CommandPump<'_> {
    /// Applies a command waiting up to `wait` (with `all`, every command already waiting);
    /// false when the run is to end.
    fn receive(&mut self, wait: Duration, all: bool, engine: &mut Engine) -> bool {
        loop {
            match self.worker.receive(wait, engine) {
                Ok(true) if all => {}
                Ok(_) => return true,
                Err(o) => {
                    self.outcome = Some(o);
                    return false;
                }
            }
        }
    }

    fn sources(&mut self) -> Vec<&mut (dyn EventSource + 'static)> {
        self.kernel
            .iter_mut()
            .chain(self.target.iter_mut())
            .map(|b| &mut **b)
            .collect()
    }

    /// The programs changed: live ETW re-plans, the other sources are opened again.
    fn follow_programs(&mut self, engine: &mut Engine) {
        let mut reopen_kernel = true;
        if let Some(k) = self.kernel.as_mut() {
            match k.reprogram(engine) {
                Some(Ok(notes)) => {
                    reopen_kernel = false;
                    for n in notes {
                        let _ = self.worker.updates.send(Update::Error(n));
                    }
                }
                Some(Err(e)) => {
                    reopen_kernel = false;
                    let _ = self.worker.updates.send(Update::Error(e));
                }
                None => {}
            }
        }
        if reopen_kernel {
            if let Some(mut old) = self.kernel.take() {
                old.stop();
            }
            self.kernel = self.worker.open_kernel(engine, &self.options);
        }
        if let Some(mut old) = self.target.take() {
            old.stop();
        }
        self.target = self.worker.open_target(engine, self.kernel.is_some());
    }

    /// Gathers the live sources' counters for the next status.
    fn refresh_live(&mut self) {
        let mut live: Option<crate::engine::LiveStatus> = None;
        for s in self.sources() {
            if let Some(st) = s.live_status() {
                live.get_or_insert_with(Default::default).merge(st);
            }
        }
        if let Some(mut l) = live {
            if let Some(old) = self.worker.live.take() {
                // messages not yet published stay
                let mut m = old.messages;
                m.append(&mut l.messages);
                l.messages = m;
            }
            self.worker.live = Some(l);
        }
    }

    /// The kernel source's names for stack frames, when they changed (live ETW learns its
    /// images as it goes; other sources name frames from the start).
    fn refresh_symbols(&mut self) {
        if let Some(symbols) = self.kernel.as_mut().and_then(|k| k.symbols()) {
            self.worker.symbols = symbols;
        }
    }
}

impl super::LiveDriver for CommandPump<'_> {
    fn pump(&mut self, deadline: u64, engine: &mut Engine) -> SourceState {
        loop {
            let now = engine.now_ns();
            if now >= deadline || engine.done() {
                return SourceState::Running;
            }
            let until_refresh = self.worker.refresh.saturating_sub(self.last.elapsed());
            let wait = Duration::from_nanos(deadline - now).min(until_refresh);
            if self.kernel.is_some() || self.target.is_some() {
                // events until the refresh (or the deadline), then the commands
                let until = now.saturating_add(wait.as_nanos() as u64).min(deadline);
                let state = crate::sources::merged::pump_all(&mut self.sources(), until, engine);
                if let SourceState::Ended(status) = state {
                    if self.kernel.is_some() && self.target.is_none() {
                        // a live session ended that nobody stopped: say why
                        self.refresh_live();
                    } else {
                        self.worker.source_ended(status);
                    }
                    return SourceState::Ended(status);
                }
                // then every command waiting, without blocking
                if !self.receive(Duration::ZERO, true, engine) {
                    return SourceState::Ended(None);
                }
            } else if !self.receive(wait, false, engine) {
                return SourceState::Ended(None);
            }
            if self.worker.status.generation != self.generation {
                self.generation = self.worker.status.generation;
                self.follow_programs(engine);
            }
            if self.last.elapsed() >= self.worker.refresh {
                self.last = Instant::now();
                self.refresh_live();
                self.refresh_symbols();
                self.worker.publish(engine, &mut self.rates);
            }
            if engine.interrupt_flag().load(Ordering::SeqCst) {
                return SourceState::Running;
            }
        }
    }

    fn finish(&mut self, engine: &mut Engine) {
        for s in self.sources() {
            s.finish(engine);
        }
    }

    fn stop(&mut self) {
        for s in self.sources() {
            s.stop();
        }
    }

    fn closing(&mut self, engine: &mut Engine) {
        for s in self.sources() {
            s.closing(engine);
        }
    }
}

/// Events/s and firings/s between refreshes.
struct Rates {
    at: Instant,
    events: u64,
    firings: u64,
}

impl Rates {
    fn new() -> Self {
        Rates {
            at: Instant::now(),
            events: 0,
            firings: 0,
        }
    }

    fn update(&mut self, s: &mut Status) {
        let dt = self.at.elapsed().as_secs_f64();
        if dt > 0.0 {
            s.events_per_s = s.events.saturating_sub(self.events) as f64 / dt;
            s.firings_per_s = s.firings.saturating_sub(self.firings) as f64 / dt;
        }
        self.at = Instant::now();
        self.events = s.events;
        self.firings = s.firings;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::types::DataModel;
    use crate::lang::{compile, CompileInput, MacroEnv, SourceKind};

    pub(crate) fn spec(text: &str, catalog: &Catalog) -> ProgramSpec {
        let mut options = DOptions::new();
        let c = compile(
            CompileInput {
                text,
                kind: SourceKind::File,
                macros: MacroEnv::default(),
                cpp: None,
                file_name: "t.d",
                model: DataModel::Lp64,
            },
            &mut options,
            catalog,
        )
        .unwrap();
        ProgramSpec {
            label: "t.d".into(),
            program: Arc::new(c.ir),
            options,
        }
    }

    /// Waits for a status in the given state, collecting output on the way.
    fn wait_for(s: &Session, want: impl Fn(&Status) -> bool, out: &mut String) -> Status {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            match s.wait(Duration::from_millis(100)) {
                Some(Update::Status(st)) if want(&st) => return st,
                Some(Update::Output(t)) => out.push_str(&t),
                _ => {}
            }
        }
        panic!("no such status within 20 s");
    }

    #[test]
    fn timers_session_runs_replaces_and_stops() {
        let catalog = Arc::new(crate::providers::standard_catalog());
        let s = Session::start(
            SessionSource::Timers,
            catalog.clone(),
            Duration::from_millis(20),
        );
        let mut out = String::new();
        s.send(Command::Run {
            program: spec(
                "BEGIN { printf(\"first\\n\"); } tick-10ms { @ticks = count(); }",
                &catalog,
            ),
            restart: false,
        });
        wait_for(&s, |st| st.state == RunState::Running, &mut out);
        s.send(Command::Run {
            program: spec(
                "BEGIN { printf(\"second\\n\"); } tick-10ms { @n[\"x\"] = count(); } tick-50ms { exit(3); }",
                &catalog,
            ),
            restart: false,
        });
        let st = wait_for(&s, |st| matches!(st.state, RunState::Ended(_)), &mut out);
        assert_eq!(st.state, RunState::Ended(3));
        assert_eq!(st.generation, 2);
        assert!(out.contains("first\n"), "{out:?}");
        assert!(out.contains("second\n"), "{out:?}");
        // the final printing of the second program's aggregation
        assert!(out.contains("  x  "), "{out:?}");
    }

    #[test]
    fn snapshots_follow_the_programs_aggrate() {
        let catalog = Arc::new(crate::providers::standard_catalog());
        let s = Session::start(
            SessionSource::Timers,
            catalog.clone(),
            Duration::from_millis(10),
        );
        s.send(Command::Run {
            program: spec(
                "#pragma D option aggrate=400ms\ntick-10ms { @n = count(); } tick-1s { exit(0); }",
                &catalog,
            ),
            restart: false,
        });
        let mut snapshots = 0;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match s.wait(Duration::from_millis(50)) {
                Some(Update::Snapshot(_)) => snapshots += 1,
                Some(Update::Status(st)) if matches!(st.state, RunState::Ended(_)) => break,
                _ => {}
            }
            assert!(Instant::now() < deadline, "the run did not end");
        }
        // one second at 400 ms: two or three refreshes and the final one, not a hundred
        assert!((2..=5).contains(&snapshots), "{snapshots} snapshots");
    }
}
