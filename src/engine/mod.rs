//! The engine: owns a run's lifecycle — enabling the probes a program's clauses match, BEGIN,
//! the timers of `tick-N`/`profile-N`, event sources, `exit()`, END, the final printing of
//! aggregations, and the exit status. Records go to a [`consumer::Consumer`].

pub mod clock;
pub mod consumer;
pub mod many;
mod reads;
pub mod session;
/// Moved to `agg` (it reads only aggregation tables); the old path still names it.
pub use crate::agg::snapshot;
pub mod standalone;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::ir;
use crate::probes::{ProbeCatalog, ProbeInfo};
use crate::providers::{parse_rate, TickKind, BEGIN_ID, END_ID};
use crate::sources::etl::TraceSource;
use crate::sources::sink::Sink;
pub use crate::sources::sink::{EventSource, LiveStatus, SourceState};
pub use crate::vm::stack_use::{uses_stacks, uses_user_stacks};
use crate::vm::{FiringCtx, Vm, VmOptions};
use clock::Clock;
use consumer::Consumer;

/// A program to run, with the name dtrace uses for it in messages.
pub struct ProgramRun {
    /// `script 'x.d'` or `description 'BEGIN'`.
    pub label: String,
    pub vm: Vm,
    /// Probes matched, summed over each clause's descriptions (a probe two clauses name counts twice).
    pub matched: usize,
}

/// A `tick-N` / `profile-N` probe being timed.
struct Timer {
    probe: u64,
    interval: u64,
    next: u64,
}

pub struct Engine {
    pub runs: Vec<ProgramRun>,
    probes: crate::fasthash::FastMap<u64, ProbeInfo>,
    timers: Vec<Timer>,
    clock: Box<dyn Clock>,
    pub consumer: Consumer,
    interrupted: Arc<AtomicBool>,
    exit: Option<i32>,
    execname: Vec<u8>,
    /// `statusrate` when set: END waits for the next status check after `exit()`, as in dtrace.
    pub statusrate: Option<u64>,
    start: u64,
    /// When a trace drives the run: the trace time now (ns since its start).
    trace_time: Option<u64>,
    /// When a trace drives the run: its start as wall-clock time (ns since 1970), what
    /// `walltimestamp` counts from in BEGIN, END and the ticks.
    trace_wall_start: u64,
    /// Whether `profile-N` fires from ETW's SampledProfile records (a trace, live ETW)
    /// rather than from a timer.
    profile_from_samples: bool,
    /// The `profile-N` probes fed from samples, when `profile_from_samples`.
    sampler: crate::providers::ProfileSampler,
    firings: u64,
    /// Bumped each time the programs are replaced.
    generation: u64,
    /// The name of the trace that drives the run (the `trace` variable), empty when none.
    trace_name: Vec<u8>,
}

impl Engine {
    /// Builds the engine and enables every probe the programs match, in program order.
    pub fn new(
        programs: Vec<(String, Arc<ir::Program>)>,
        vm_opts: VmOptions,
        catalog: &dyn ProbeCatalog,
        clock: Box<dyn Clock>,
        consumer: Consumer,
    ) -> Self {
        let execname = std::env::current_exe()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "dtx".into())
            .into_bytes();
        let now = clock.now_ns();
        let mut engine = Engine {
            runs: Vec::new(),
            probes: Default::default(),
            timers: Vec::new(),
            clock,
            consumer,
            interrupted: Arc::new(AtomicBool::new(false)),
            exit: None,
            execname,
            statusrate: None,
            start: now,
            trace_time: None,
            trace_wall_start: 0,
            profile_from_samples: false,
            sampler: Default::default(),
            firings: 0,
            generation: 0,
            trace_name: Vec::new(),
        };
        engine.enable(programs, vm_opts, catalog);
        engine
    }

    /// Enables the programs' probes (replacing whatever ran before) and sets up their timers
    /// from the time now.
    fn enable(
        &mut self,
        programs: Vec<(String, Arc<ir::Program>)>,
        vm_opts: VmOptions,
        catalog: &dyn ProbeCatalog,
    ) {
        let mut probes = crate::fasthash::FastMap::default();
        let mut runs = Vec::new();
        for (label, program) in programs {
            let mut vm = Vm::new(program.clone(), vm_opts.clone());
            // counted as dtrace's kernel counts them (dtrace_enabling_match sums each
            // description's matches): `BEGIN{} BEGIN{}` matched 2 probes
            let mut matched = 0;
            for (ci, c) in program.clauses.iter().enumerate() {
                // each description of a clause is its own enabling, as in DTrace: a probe named
                // twice fires the clause twice
                for d in &c.probes {
                    for p in catalog.matching(d) {
                        vm.enable(p.id, ci);
                        matched += 1;
                        probes.entry(p.id).or_insert(p);
                    }
                }
            }
            runs.push(ProgramRun { label, vm, matched });
        }
        let now = self.trace_time.unwrap_or_else(|| self.clock.now_ns());
        let mut timers = Vec::new();
        let mut sampler = crate::providers::ProfileSampler::default();
        let mut ids: Vec<&u64> = probes.keys().collect();
        ids.sort();
        for id in ids {
            let p = &probes[id];
            if p.provider == "profile" {
                if let Some((kind, ns)) = parse_rate(&p.name) {
                    if kind == TickKind::Profile && self.profile_from_samples {
                        sampler.add(p.id, &p.name, ns);
                        continue;
                    }
                    timers.push(Timer {
                        probe: p.id,
                        interval: ns,
                        next: now + ns,
                    });
                }
            }
        }
        self.runs = runs;
        self.probes = probes;
        self.timers = timers;
        self.sampler = sampler;
    }

    /// From now on `profile-N` fires from ETW's SampledProfile records (see
    /// [`crate::providers::ProfileSampler`]) instead of its timer: a trace's walk, live ETW.
    pub fn profile_from_samples(&mut self) {
        if self.profile_from_samples {
            return;
        }
        self.profile_from_samples = true;
        let probes = &self.probes;
        let sampler = &mut self.sampler;
        self.timers.retain(|t| match probes.get(&t.probe) {
            Some(p) if matches!(parse_rate(&p.name), Some((TickKind::Profile, _))) => {
                sampler.add(t.probe, &p.name, t.interval);
                false
            }
            _ => true,
        });
    }

    /// What the user should know about the `profile-N` probes fed from samples (a trace
    /// without samples, or with slower ones).
    pub fn sampler_notes(&self) -> Vec<String> {
        self.sampler.notes()
    }

    /// What the user should know when a `syscall` probe is enabled and some of the trace's
    /// (or, over several, the traces') system call addresses have no name: where names come
    /// from.
    pub fn syscall_note(&self, etw: &crate::providers::etw::EtwProbes) -> Option<String> {
        let calls = etw.syscalls();
        let unnamed = calls.unnamed();
        (unnamed > 0 && self.probes.values().any(|p| p.provider == "syscall")).then(|| {
            format!(
                "{unnamed} of the trace's {} system call addresses have no name (their probe \
                 functions are module`0xoffset): names need the kernel's PDB (ntkrnlmp.pdb) on \
                 the symbol path (_NT_SYMBOL_PATH)",
                calls.addresses()
            )
        })
    }

    /// Says (on dtx's stderr, which the console shows) what the user should know before a
    /// trace is walked: that `syscall` probes go unnamed without the kernel's PDB.
    pub fn say_before_trace(&self, etw: &crate::providers::etw::EtwProbes) {
        self.say_before_traces(etw, 1);
    }

    /// [`Engine::say_before_trace`] for a run over `traces` traces (`etw` the union of
    /// theirs): also names the enabled kernel probes none of whose records they hold.
    pub fn say_before_traces(&self, etw: &crate::providers::etw::EtwProbes, traces: usize) {
        self.say_etw_limits();
        let enabled = |id: u64| self.probes.contains_key(&id);
        for n in crate::providers::etw::absent::notes(etw, &enabled, traces) {
            crate::output::stderr::say(self.consumer.prog(), n);
        }
        if let Some(n) = self.syscall_note(etw) {
            crate::output::stderr::say(self.consumer.prog(), n);
        }
    }

    /// Says, before an ETW run (a trace, or live on Windows), what the programs read that
    /// ETW does not record (`syscall:::entry` arguments past `arg0`, the other arguments the
    /// providers document as 0) and `execname` compared with a name in upper case.
    pub fn say_etw_limits(&self) {
        for r in &self.runs {
            for w in crate::providers::etw::limits::warnings(&r.vm.program) {
                crate::output::stderr::say(self.consumer.prog(), w);
            }
        }
    }

    /// Says what the walk of a trace (`label`, when several are read) left to know: the
    /// reader's first 20 warnings and the notes on `profile-N` samples.
    pub fn say_after_trace(&self, label: Option<&str>, warnings: &[String]) {
        let prog = match label {
            Some(l) => format!("{}: {l}", self.consumer.prog()),
            None => self.consumer.prog().to_string(),
        };
        for w in warnings.iter().take(20) {
            crate::output::stderr::say(&prog, format_args!("warning: {w}"));
        }
        for n in self.sampler_notes() {
            crate::output::stderr::say(&prog, n);
        }
    }

    /// What the enabled probes need decoded of ETW records (the `profile-N` probes fed from
    /// samples need SampledProfile).
    pub fn etw_interest(
        &self,
        etw: &crate::providers::etw::EtwProbes,
    ) -> crate::providers::etw::Interest {
        let mut it = etw.interest(&|id| self.is_enabled(id));
        if !self.sampler.is_empty() {
            it.add_samples();
        }
        it.set_reads_event(self.runs.iter().any(|r| reads::reads_event(&r.vm.program)));
        it
    }

    /// Swaps in new programs while the source keeps going: the old programs' pending output is
    /// flushed and they are dropped without END; the new ones get BEGIN, and their timers count
    /// from now. `consumer` replaces the old consumer when given (new print options).
    pub fn replace_programs(
        &mut self,
        programs: Vec<(String, Arc<ir::Program>)>,
        vm_opts: VmOptions,
        catalog: &dyn ProbeCatalog,
        consumer: Option<Consumer>,
    ) {
        self.consumer.flush();
        if let Some(c) = consumer {
            self.consumer = c;
        }
        self.exit = None;
        self.enable(programs, vm_opts, catalog);
        self.generation += 1;
        self.fire_synthetic(BEGIN_ID);
    }

    /// Names the trace that drives the run: what the `trace` variable reads from now on.
    pub fn set_trace_name(&mut self, name: &str) {
        self.trace_name = name.as_bytes().to_vec();
    }

    /// Probe firings run so far (each firing of each enabled program counts once).
    pub fn firings(&self) -> u64 {
        self.firings
    }

    /// Drops so far over all programs: dynamic variables, aggregations, speculations and the
    /// principal buffer.
    pub fn drops(&self) -> u64 {
        self.runs
            .iter()
            .map(|r| {
                let (a, b, c) = r.vm.spec_drops();
                r.vm.dynvar_drops() + r.vm.agg_drops + r.vm.principal_drops + a + b + c
            })
            .sum()
    }

    /// Faults reported as errors so far.
    pub fn errors(&self) -> u64 {
        self.consumer.errors
    }

    /// The exit status set by `exit()`, once called.
    pub fn exit_status(&self) -> Option<i32> {
        self.exit
    }

    /// A flag that, once set (by Ctrl-C), makes the run go to END.
    pub fn interrupt_flag(&self) -> Arc<AtomicBool> {
        self.interrupted.clone()
    }

    fn probe(&self, id: u64) -> Option<ProbeInfo> {
        self.probes.get(&id).cloned()
    }

    /// Fires a probe that has no event behind it (BEGIN, END, ticks) in every program.
    fn fire_synthetic(&mut self, id: u64) {
        let Some(p) = self.probe(id) else { return };
        let (ts, wall) = match self.trace_time {
            Some(t) => (t, self.trace_wall_start.saturating_add(t)),
            None => (self.clock.now_ns(), self.clock.wall_ns()),
        };
        let execname = self.execname.clone();
        let trace = self.trace_name.clone();
        let mut cx = FiringCtx::synthetic(&p, ts, wall, &execname);
        cx.trace = &trace;
        if p.provider == "profile" {
            // the interrupted program counter: dtx's own code, in user mode
            cx.args[1] = user_pc();
        }
        self.fire(&cx);
    }

    /// Whether any program has `probe` enabled.
    /// Changes whenever the set of programs (and so of enabled probes) changes.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn is_enabled(&self, probe: u64) -> bool {
        self.runs.iter().any(|r| r.vm.is_enabled(probe))
    }

    /// The enabled probe with this id.
    pub fn probe_info(&self, probe: u64) -> Option<&ProbeInfo> {
        self.probes.get(&probe)
    }

    /// Enables a probe that the descriptions `created_by` made (a pid probe of a module that
    /// appeared while tracing): their clauses fire for it even where the probe's fields do
    /// not match their text (a module named without its extension or version).
    pub fn enable_created_probe(&mut self, p: ProbeInfo, created_by: &[crate::probes::ProbeDesc]) {
        for run in &mut self.runs {
            let program = run.vm.program.clone();
            for (ci, c) in program.clauses.iter().enumerate() {
                for d in &c.probes {
                    if created_by.contains(d)
                        || (crate::probes::glob_match(&d.provider, &p.provider)
                            && crate::providers::fields_match(d, &p.module, &p.function, &p.name))
                    {
                        run.vm.enable(p.id, ci);
                    }
                }
            }
        }
        self.probes.entry(p.id).or_insert(p);
    }

    /// Every probe the programs enabled.
    pub fn enabled_probes(&self) -> impl Iterator<Item = &ProbeInfo> {
        self.probes.values()
    }

    /// Runs one firing in every program that enabled its probe, in program order, hands the
    /// records to the consumer and notes an `exit()`.
    pub fn fire(&mut self, cx: &FiringCtx) {
        self.firings += fire_runs(
            &mut self.runs,
            &mut self.consumer,
            &self.probes,
            &mut self.exit,
            cx,
            &mut |_| {},
        );
    }

    /// Whether a program called `exit()`.
    pub fn exited(&self) -> bool {
        self.exit.is_some()
    }

    /// Whether the run should go to END: `exit()` was called or the run was interrupted.
    pub fn done(&self) -> bool {
        self.exit.is_some() || self.interrupted.load(Ordering::SeqCst)
    }

    /// Fires BEGIN. With `trace`, the run is driven by a trace that started at that wall-clock
    /// time (ns since 1970): timers count from its start, [`Engine::advance_to`] moves time,
    /// and `profile-N` fires from the trace's samples.
    pub fn begin(&mut self, trace: Option<u64>) {
        if let Some(wall_start) = trace {
            self.start_trace(wall_start);
        }
        self.fire_synthetic(BEGIN_ID);
    }

    /// Puts the engine on trace time, for a trace that started at `wall_start` (ns since
    /// 1970), without firing BEGIN: what [`Engine::begin`] does first, and what the engine of
    /// one file of a many-trace run does (BEGIN ran once, before every file).
    pub fn start_trace(&mut self, wall_start: u64) {
        self.profile_from_samples();
        for t in &mut self.timers {
            t.next = t.interval;
        }
        self.trace_time = Some(0);
        self.trace_wall_start = wall_start;
        self.consumer.over_trace();
    }

    /// Shares another engine's interrupt flag: Ctrl-C then ends both.
    pub fn set_interrupt_flag(&mut self, flag: Arc<AtomicBool>) {
        self.interrupted = flag;
    }

    /// Sets the exit status as an `exit()` would, without stopping anything: the status of a
    /// many-trace run whose files called `exit()`. END may still set another.
    pub fn set_exit_status(&mut self, code: i32) {
        self.exit = Some(code);
    }

    /// Trace time: fires every `tick-N`/`profile-N` due at or before `t` (ns since the trace
    /// start), in time order, then sets the time to `t`.
    #[inline]
    pub fn advance_to(&mut self, t: u64) {
        if !self.timers.is_empty() {
            self.fire_timers_until(t);
        }
        self.trace_time = Some(t);
    }

    /// Fires the timers due at or before `t`, in time order.
    fn fire_timers_until(&mut self, t: u64) {
        while let Some((i, due)) = self.next_timer() {
            if due > t || self.exit.is_some() {
                break;
            }
            self.trace_time = Some(due);
            self.fire_timer(i);
        }
    }

    /// The trace time now, when a trace drives the run.
    pub fn trace_time(&self) -> Option<u64> {
        self.trace_time
    }

    fn next_timer(&self) -> Option<(usize, u64)> {
        self.timers
            .iter()
            .enumerate()
            .map(|(i, t)| (i, t.next))
            .min_by_key(|(_, t)| *t)
    }

    fn fire_timer(&mut self, i: usize) {
        let probe = self.timers[i].probe;
        self.timers[i].next += self.timers[i].interval;
        self.fire_synthetic(probe);
    }

    /// Fires END, prints what remains of every program's aggregations and flushes. Returns the
    /// exit status.
    pub fn end(&mut self) -> i32 {
        self.fire_synthetic(END_ID);
        for r in 0..self.runs.len() {
            self.consumer.finish(&mut self.runs[r].vm, &self.probes);
        }
        self.consumer.flush();
        self.exit.unwrap_or(0)
    }

    /// Runs to completion: BEGIN, timers until `exit()` or interruption, END, final output.
    /// Returns the exit status.
    pub fn run(&mut self) -> i32 {
        self.begin(None);
        while !self.done() {
            let Some((i, due)) = self.next_timer() else {
                // nothing will fire: wait for Ctrl-C
                let flag = self.interrupted.clone();
                self.clock
                    .sleep_until(u64::MAX, &|| flag.load(Ordering::SeqCst));
                break;
            };
            let flag = self.interrupted.clone();
            self.clock.sleep_until(due, &|| flag.load(Ordering::SeqCst));
            if self.interrupted.load(Ordering::SeqCst) {
                break;
            }
            self.fire_timer(i);
        }
        self.wait_status_check();
        self.end()
    }

    /// With `statusrate`, END waits for the consumer's next status check after `exit()`.
    fn wait_status_check(&mut self) {
        if let (Some(rate), true) = (self.statusrate, self.exit.is_some()) {
            if let Some(periods) = self
                .clock
                .now_ns()
                .saturating_sub(self.start)
                .checked_div(rate)
            {
                let next = self.start + (periods + 1) * rate;
                let flag = self.interrupted.clone();
                self.clock
                    .sleep_until(next, &|| flag.load(Ordering::SeqCst));
            }
        }
    }

    /// Runs with a live event source on the live clock: BEGIN, then events and timers as they
    /// come until `exit()`, interruption or the end of the source, then END.
    pub fn run_live<D: LiveDriver + ?Sized>(&mut self, source: &mut D) -> i32 {
        self.begin(None);
        let mut source_status = None;
        while !self.done() {
            // wake at the next timer, and at least every 100 ms to notice Ctrl-C
            let now = self.clock.now_ns();
            let deadline = self
                .next_timer()
                .map(|(_, d)| d)
                .unwrap_or(u64::MAX)
                .min(now + 100_000_000);
            match source.pump(deadline, self) {
                SourceState::Running => {}
                SourceState::Ended(status) => {
                    source_status = status;
                    break;
                }
            }
            let now = self.clock.now_ns();
            if self.next_timer().is_some_and(|(_, due)| due <= now) {
                source.name_frames(self);
            }
            while let Some((i, due)) = self.next_timer() {
                if due > now || self.done() {
                    break;
                }
                self.fire_timer(i);
            }
        }
        if self.exit.is_none() {
            // interrupted: what the source already holds still counts, as in dtrace
            source.finish(self);
        }
        source.stop();
        source.closing(self);
        let _ = source_status;
        self.wait_status_check();
        self.end()
    }

    /// Stops timing a `tick-N`/`profile-N` probe: a live source fires it instead (perf
    /// `cpu-clock` sampling for `profile-N`). Returns whether it was timed.
    pub fn detach_timer(&mut self, probe: u64) -> bool {
        let n = self.timers.len();
        self.timers.retain(|t| t.probe != probe);
        self.timers.len() != n
    }

    /// The live clock's time now (ns).
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }
}

impl Engine {
    /// Runs over a recorded trace: trace time drives the timers, every record is offered to
    /// the ETW providers, END fires at the end of the file (or after `exit()`).
    pub fn run_trace(
        &mut self,
        source: &mut TraceSource,
        etw: &crate::providers::etw::EtwProbes,
    ) -> i32 {
        self.set_trace_name(&source.name);
        self.say_before_trace(etw);
        self.begin(Some(source.start_unix_ns()));
        let errors = self.walk_trace(source, etw, &mut |_, _| true);
        self.say_after_trace(None, &errors);
        // stacks print with the modules the trace had loaded
        self.consumer.symbols = Box::new(source.symbols());
        self.end()
    }

    /// Offers every record of the trace to the ETW providers and fires what they map it to
    /// (see [`crate::sources::etl::walk_trace`]). Returns the reader's warnings.
    pub fn walk_trace(
        &mut self,
        source: &mut TraceSource,
        etw: &crate::providers::etw::EtwProbes,
        between: &mut impl FnMut(&mut Engine, &crate::etw::state::SystemState) -> bool,
    ) -> Vec<String> {
        crate::sources::etl::walk_trace(self, source, etw, between)
    }
}

/// A recorded stack keeps the epoch of the images that named its frames as the ETW system
/// state knew them when it was sampled.
impl crate::vm::StackEpochs for crate::etw::state::SystemState {
    fn stack_epoch(&self, pid: u32, frames: &[u64]) -> u32 {
        crate::etw::state::SystemState::stack_epoch(self, pid, frames)
    }
}

/// The `execname` of a thread that no record of the trace named.
pub use crate::etw::state::UNKNOWN_EXECNAME;

/// Runs one firing in every program that enabled its probe (see [`Engine::fire`]); returns
/// how many programs ran it. `before_print` sees the consumer before it takes records that
/// a firing made (to bring its names of stack frames up to date). Inlined into each of its
/// callers, as it was into the walk's firing before that moved to `sources::etl::walk`.
#[inline(always)]
fn fire_runs(
    runs: &mut [ProgramRun],
    consumer: &mut Consumer,
    probes: &crate::fasthash::FastMap<u64, ProbeInfo>,
    exit: &mut Option<i32>,
    cx: &FiringCtx,
    before_print: &mut dyn FnMut(&mut Consumer),
) -> u64 {
    let id = cx.probe.id;
    let mut n = 0;
    for run in runs.iter_mut() {
        if !run.vm.is_enabled(id) {
            continue;
        }
        n += 1;
        let res = run.vm.fire(cx);
        if !run.vm.records.is_empty() {
            before_print(consumer);
        }
        consumer.consume(&mut run.vm, &res, probes, cx.timestamp);
        // the last exit() consumed sets the status (END may override an earlier one)
        if let Some(code) = consumer.exit_code.take().or(res.exit) {
            *exit = Some(code);
        }
    }
    n
}

/// An address in dtx's own code: the user program counter of a profile firing.
fn user_pc() -> u64 {
    user_pc as *const () as usize as u64
}

/// What [`Engine::run_live`] drives: any [`EventSource`] (which sees the engine as a
/// [`Sink`]), or a driver of the engine's own that needs the engine itself (the console's
/// command pump, `session`). The methods are [`EventSource`]'s.
pub trait LiveDriver {
    /// See [`EventSource::pump`].
    fn pump(&mut self, deadline: u64, engine: &mut Engine) -> SourceState;
    /// See [`EventSource::finish`].
    fn finish(&mut self, _engine: &mut Engine) {}
    /// See [`EventSource::stop`].
    fn stop(&mut self) {}
    /// See [`EventSource::name_frames`].
    fn name_frames(&mut self, _engine: &mut Engine) {}
    /// See [`EventSource::closing`].
    fn closing(&mut self, _engine: &mut Engine) {}
}

impl<T: EventSource + ?Sized> LiveDriver for T {
    fn pump(&mut self, deadline: u64, engine: &mut Engine) -> SourceState {
        EventSource::pump(self, deadline, engine)
    }
    fn finish(&mut self, engine: &mut Engine) {
        EventSource::finish(self, engine)
    }
    fn stop(&mut self) {
        EventSource::stop(self)
    }
    fn name_frames(&mut self, engine: &mut Engine) {
        EventSource::name_frames(self, engine)
    }
    fn closing(&mut self, engine: &mut Engine) {
        EventSource::closing(self, engine)
    }
}

/// What sources ask of the engine (see [`crate::sources::sink`]).
impl Sink for Engine {
    fn now_ns(&self) -> u64 {
        Engine::now_ns(self)
    }

    fn done(&self) -> bool {
        Engine::done(self)
    }

    fn exited(&self) -> bool {
        Engine::exited(self)
    }

    #[inline]
    fn is_enabled(&self, probe: u64) -> bool {
        Engine::is_enabled(self, probe)
    }

    fn probe_info(&self, probe: u64) -> Option<&ProbeInfo> {
        Engine::probe_info(self, probe)
    }

    fn enabled_probes(&self) -> Box<dyn Iterator<Item = &ProbeInfo> + '_> {
        Box::new(self.probes.values())
    }

    fn programs(&self) -> Vec<&Arc<ir::Program>> {
        self.runs.iter().map(|r| &r.vm.program).collect()
    }

    fn generation(&self) -> u64 {
        self.generation
    }

    fn fire(&mut self, cx: &FiringCtx<'_>) {
        Engine::fire(self, cx)
    }

    // inlined into the walk's `fire_event`, so that the context is built once, in place
    #[inline(always)]
    fn fire_probe(
        &mut self,
        probe: u64,
        cx: FiringCtx<'_>,
        names: &mut dyn FnMut() -> Option<Box<dyn crate::agg::SymbolResolver + Send>>,
    ) {
        let Engine {
            runs,
            probes,
            consumer,
            exit,
            firings,
            trace_name,
            ..
        } = self;
        let Some(p) = probes.get(&probe) else {
            return;
        };
        let cx = FiringCtx {
            probe: p,
            trace: trace_name,
            ..cx
        };
        let mut before_print = |c: &mut Consumer| {
            if let Some(s) = names() {
                c.symbols = s;
            }
        };
        *firings += fire_runs(runs, consumer, probes, exit, &cx, &mut before_print);
    }

    fn enable_created_probe(&mut self, p: ProbeInfo, created_by: &[crate::probes::ProbeDesc]) {
        Engine::enable_created_probe(self, p, created_by)
    }

    fn detach_timer(&mut self, probe: u64) -> bool {
        Engine::detach_timer(self, probe)
    }

    fn profile_from_samples(&mut self) {
        Engine::profile_from_samples(self)
    }

    #[inline]
    fn sampler(&mut self) -> Option<&mut crate::providers::ProfileSampler> {
        (!self.sampler.is_empty()).then_some(&mut self.sampler)
    }

    fn etw_interest(
        &self,
        etw: &crate::providers::etw::EtwProbes,
    ) -> crate::providers::etw::Interest {
        Engine::etw_interest(self, etw)
    }

    #[inline]
    fn trace_time(&self) -> Option<u64> {
        self.trace_time
    }

    #[inline]
    fn next_timer_due(&self) -> Option<u64> {
        self.next_timer().map(|(_, due)| due)
    }

    #[inline]
    fn advance_to(&mut self, t: u64) {
        Engine::advance_to(self, t)
    }

    fn set_symbols(&mut self, symbols: Box<dyn crate::agg::SymbolResolver + Send>) {
        self.consumer.symbols = symbols;
    }

    fn take_symbols(&mut self) -> Box<dyn crate::agg::SymbolResolver + Send> {
        std::mem::replace(&mut self.consumer.symbols, Box::new(crate::agg::NoSymbols))
    }

    fn enablings_of(&self, probe: u64) -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        for (i, r) in self.runs.iter().enumerate() {
            v.extend(r.vm.enablings(probe).iter().map(|e| (i, e.clause)));
        }
        v
    }

    fn run_in_kernel(&mut self, program: usize, clause: usize) {
        if let Some(r) = self.runs.get_mut(program) {
            r.vm.run_elsewhere(clause);
        }
    }

    fn merge_kernel_agg(
        &mut self,
        program: usize,
        agg: u32,
        key: &[crate::ir::value::Datum],
        words: &[i64],
    ) -> bool {
        self.runs
            .get_mut(program)
            .is_some_and(|r| r.vm.aggs.merge_words(agg, key, words).is_ok())
    }

    fn add_to_global(&mut self, program: usize, id: u32, delta: u64) {
        if let Some(r) = self.runs.get_mut(program) {
            r.vm.add_to_global(id, delta);
        }
    }

    fn add_agg_drops(&mut self, program: usize, n: u64) {
        if let Some(r) = self.runs.get_mut(program) {
            r.vm.agg_drops += n;
        }
    }

    fn add_dynvar_drops(&mut self, program: usize, n: u64) {
        if let Some(r) = self.runs.get_mut(program) {
            r.vm.add_drops(n, (0, 0, 0));
        }
    }

    fn agg_stride(&self, program: usize, agg: u32) -> usize {
        self.runs.get(program).map_or(0, |r| r.vm.aggs.stride(agg))
    }

    fn strsize(&self, program: usize) -> usize {
        self.runs
            .get(program)
            .map_or(crate::lang::options::DEFAULT_STRSIZE as usize, |r| {
                r.vm.opts.strsize
            })
    }

    fn prog(&self) -> &str {
        self.consumer.prog()
    }
}
