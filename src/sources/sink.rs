//! What an event source needs of whatever runs its firings: the narrow [`Sink`] trait sources
//! push into, the [`EventSource`] trait a live source implements, and what a source reports
//! back ([`SourceState`], [`LiveStatus`]). The engine implements [`Sink`]; sources name only
//! this module, so an event flows one way: source → sink.

use std::sync::Arc;

use crate::agg::SymbolResolver;
use crate::ir;
use crate::probes::{ProbeDesc, ProbeInfo};
use crate::providers::etw::{EtwProbes, Interest};
use crate::providers::ProfileSampler;
use crate::vm::FiringCtx;

/// What sources ask of the engine: its clock and state, the enabled probes and programs, and
/// the firing of a probe. Object-safe, so that a live source takes `&mut dyn Sink`; the walk
/// of a trace ([`crate::sources::etl::walk`]) is generic over it and pays no dynamic call
/// per record.
pub trait Sink {
    /// The live clock's time now (ns).
    fn now_ns(&self) -> u64;
    /// Whether the run should go to END: `exit()` was called or the run was interrupted.
    fn done(&self) -> bool;
    /// Whether a program called `exit()`.
    fn exited(&self) -> bool;
    /// Whether any program has `probe` enabled.
    fn is_enabled(&self, probe: u64) -> bool;
    /// The enabled probe with this id.
    fn probe_info(&self, probe: u64) -> Option<&ProbeInfo>;
    /// Every probe the programs enabled.
    fn enabled_probes(&self) -> Box<dyn Iterator<Item = &ProbeInfo> + '_>;
    /// The programs that run, in program order.
    fn programs(&self) -> Vec<&Arc<ir::Program>>;
    /// Changes whenever the set of programs (and so of enabled probes) changes.
    fn generation(&self) -> u64;
    /// Runs one firing in every program that enabled its probe.
    fn fire(&mut self, cx: &FiringCtx<'_>);
    /// Runs one firing of the enabled probe `probe`: `cx` with the sink's own description of
    /// the probe (and the name of the trace that drives the run) in place of `cx.probe` and
    /// `cx.trace`. Before the records a firing made are printed, `names` may hand a resolver
    /// for the names of stack frames current with the firing. Nothing fires for a probe the
    /// sink does not know. (`cx` is taken by value: the sink puts its probe in place, with
    /// no copy of the context per firing.)
    fn fire_probe(
        &mut self,
        probe: u64,
        cx: FiringCtx<'_>,
        names: &mut dyn FnMut() -> Option<Box<dyn SymbolResolver + Send>>,
    );
    /// Enables a probe that the descriptions `created_by` made (a pid probe of a module that
    /// appeared while tracing).
    fn enable_created_probe(&mut self, p: ProbeInfo, created_by: &[ProbeDesc]);
    /// Stops timing a `tick-N`/`profile-N` probe: the source fires it instead. Returns whether
    /// it was timed.
    fn detach_timer(&mut self, probe: u64) -> bool;
    /// From now on `profile-N` fires from ETW's SampledProfile records instead of its timer.
    fn profile_from_samples(&mut self);
    /// The `profile-N` probes fed from samples, when there are any.
    fn sampler(&mut self) -> Option<&mut ProfileSampler>;
    /// What the enabled probes need decoded of ETW records.
    fn etw_interest(&self, etw: &EtwProbes) -> Interest;
    /// The trace time now (ns since its start), when a trace drives the run.
    fn trace_time(&self) -> Option<u64>;
    /// When the next `tick-N`/`profile-N` is due (the clock's ns), if any is timed.
    fn next_timer_due(&self) -> Option<u64>;
    /// Trace time: fires every timer due at or before `t`, then sets the time to `t`.
    fn advance_to(&mut self, t: u64);
    /// Has the consumer name stack frames with `symbols` from now on.
    fn set_symbols(&mut self, symbols: Box<dyn SymbolResolver + Send>);
    /// Takes the resolver the consumer names stack frames with (it names none until
    /// [`Sink::set_symbols`]).
    fn take_symbols(&mut self) -> Box<dyn SymbolResolver + Send>;
    /// The program name dtx's messages start with.
    fn prog(&self) -> &str;
    /// The clauses enabled on `probe`, as (program index, clause index), one per enabling.
    fn enablings_of(&self, _probe: u64) -> Vec<(usize, usize)> {
        Vec::new()
    }
    /// Clause `clause` of program `program` runs in the kernel from now on (the BPF back
    /// end): the VM no longer runs it.
    fn run_in_kernel(&mut self, _program: usize, _clause: usize) {}
    /// Folds data words that the kernel aggregated (in `agg`'s layout for the function) into
    /// the entry of `key` of aggregation `agg` of program `program`; false when it did not fit.
    fn merge_kernel_agg(
        &mut self,
        _program: usize,
        _agg: u32,
        _key: &[crate::ir::value::Datum],
        _words: &[i64],
    ) -> bool {
        false
    }
    /// Adds `delta` (wrapping) to integer global `id` of program `program`: what clauses in
    /// the kernel added to it.
    fn add_to_global(&mut self, _program: usize, _id: u32, _delta: u64) {}
    /// Aggregation drops that happened in the kernel, counted as program `program`'s.
    fn add_agg_drops(&mut self, _program: usize, _n: u64) {}
    /// Dynamic variable drops that happened in the kernel (a full thread-local map).
    fn add_dynvar_drops(&mut self, _program: usize, _n: u64) {}
    /// Data words per entry of aggregation `agg` of program `program` (0: none).
    fn agg_stride(&self, _program: usize, _agg: u32) -> usize {
        0
    }
    /// `strsize` of program `program`: where strings are cut.
    fn strsize(&self, _program: usize) -> usize {
        crate::lang::options::DEFAULT_STRSIZE as usize
    }
}

/// What a live source says after a [`EventSource::pump`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceState {
    /// More events may come.
    Running,
    /// The source has ended (a traced process exited, with its status when known).
    Ended(Option<i32>),
}

/// A live event source (perf events, a debugger loop, live ETW): it turns what arrives into
/// firings and runs them through [`Sink::fire`].
pub trait EventSource {
    /// Delivers what arrives until `deadline` (the sink clock's ns) or until the sink is
    /// [`Sink::done`], whichever is first, calling `sink.fire` for each firing.
    fn pump(&mut self, deadline: u64, sink: &mut dyn Sink) -> SourceState;
    /// After an interruption (Ctrl-C), before END: fires what the source has already
    /// buffered, until `exit()`.
    fn finish(&mut self, _sink: &mut dyn Sink) {}
    /// Stops the source: called once, before END (detach, close ring buffers, ...).
    fn stop(&mut self) {}
    /// Before timers fire (whose clauses print: `printa()` in `tick-5s`): brings the names the
    /// consumer gives stack frames up to date with what the source knows of the system now.
    fn name_frames(&mut self, _sink: &mut dyn Sink) {}
    /// After [`EventSource::stop`], before END: hands the sink what END's output needs
    /// from the source (e.g. the images that name stack frames).
    fn closing(&mut self, _sink: &mut dyn Sink) {}
    /// The programs were replaced: a source that can follow them without starting over (live
    /// ETW re-plans its sessions, keeping what it knows of the system) does so and returns
    /// notes for the user, or the error that kept a change from being applied; `None` for a
    /// source that must be stopped and opened again.
    fn reprogram(&mut self, _sink: &mut dyn Sink) -> Option<Result<Vec<String>, String>> {
        None
    }
    /// What a live source reports for a status line (sessions, records, losses), if it
    /// reports anything.
    fn live_status(&mut self) -> Option<LiveStatus> {
        None
    }
    /// A fresh resolver for the names of stack frames in snapshots, when what the source knows
    /// of the system's images has changed since the last call (a live source learns them as
    /// it goes; one whose resolver follows what it learns hands it over once); `None` when
    /// nothing changed.
    fn symbols(&mut self) -> Option<Box<dyn SymbolResolver + Send>> {
        None
    }
}

/// A live source's counters and news, for the console's status line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveStatus {
    /// The sessions (or other facilities) it reads from.
    pub sessions: Vec<String>,
    /// Records received.
    pub records: u64,
    /// Events the system lost before dtx saw them (ETW's loss counts).
    pub lost: u64,
    /// Records dtx dropped because it fell behind.
    pub dropped: u64,
    /// Lines for the user since the last report (each said once).
    pub messages: Vec<String>,
}

impl LiveStatus {
    /// Adds another source's status to this one.
    pub fn merge(&mut self, other: LiveStatus) {
        self.sessions.extend(other.sessions);
        self.records += other.records;
        self.lost += other.lost;
        self.dropped += other.dropped;
        self.messages.extend(other.messages);
    }
}

/// A sink for tests of a source's pumping: a live clock, no programs, nothing fires.
#[cfg(test)]
pub(crate) struct ClockSink {
    start: std::time::Instant,
}

#[cfg(test)]
impl ClockSink {
    pub(crate) fn new() -> ClockSink {
        ClockSink {
            start: std::time::Instant::now(),
        }
    }
}

#[cfg(test)]
impl Sink for ClockSink {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
    fn done(&self) -> bool {
        false
    }
    fn exited(&self) -> bool {
        false
    }
    fn is_enabled(&self, _probe: u64) -> bool {
        false
    }
    fn probe_info(&self, _probe: u64) -> Option<&ProbeInfo> {
        None
    }
    fn enabled_probes(&self) -> Box<dyn Iterator<Item = &ProbeInfo> + '_> {
        Box::new(std::iter::empty())
    }
    fn programs(&self) -> Vec<&Arc<ir::Program>> {
        Vec::new()
    }
    fn generation(&self) -> u64 {
        0
    }
    fn fire(&mut self, _cx: &FiringCtx<'_>) {}
    fn fire_probe(
        &mut self,
        _probe: u64,
        _cx: FiringCtx<'_>,
        _names: &mut dyn FnMut() -> Option<Box<dyn SymbolResolver + Send>>,
    ) {
    }
    fn enable_created_probe(&mut self, _p: ProbeInfo, _created_by: &[ProbeDesc]) {}
    fn detach_timer(&mut self, _probe: u64) -> bool {
        false
    }
    fn profile_from_samples(&mut self) {}
    fn sampler(&mut self) -> Option<&mut ProfileSampler> {
        None
    }
    fn etw_interest(&self, etw: &EtwProbes) -> Interest {
        etw.interest(&|_| false)
    }
    fn trace_time(&self) -> Option<u64> {
        None
    }
    fn next_timer_due(&self) -> Option<u64> {
        None
    }
    fn advance_to(&mut self, _t: u64) {}
    fn set_symbols(&mut self, _symbols: Box<dyn SymbolResolver + Send>) {}
    fn take_symbols(&mut self) -> Box<dyn SymbolResolver + Send> {
        Box::new(crate::agg::NoSymbols)
    }
    fn prog(&self) -> &str {
        "dtx"
    }
}
