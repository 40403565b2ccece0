//! The walk of a recorded trace into a [`Sink`]: every record offered to the ETW providers,
//! what they map it to fired, trace time moved along. [`fire_event`], the step from one decoded
//! record to its firings, is shared with live ETW (`sources::etw_live`). Both are generic over
//! the sink, so a walk into the engine makes no dynamic call per record.

use crate::agg::SymbolResolver;
use crate::etw::decode::DecodedEvent;
use crate::etw::record::EventRecord;
use crate::etw::state::SystemState;
use crate::providers::etw::EtwProbes;
use crate::sources::sink::Sink;
use crate::vm::FiringCtx;

use super::{StackSource, TraceSource, WalkNames};

/// Offers every record of the trace to the ETW providers and fires what they map it to into
/// `sink`, moving trace time along, until the end of the file, `exit()`, interruption, or
/// `between` (called before each record with the sink and the system state as of the record
/// before) returns false. The sink is on trace time already (the engine's `begin`). Returns
/// the reader's warnings.
pub fn walk_trace<S: Sink>(
    sink: &mut S,
    source: &mut TraceSource,
    etw: &EtwProbes,
    between: &mut impl FnMut(&mut S, &SystemState) -> bool,
) -> Vec<String> {
    let mut scratch = EventScratch::default();
    // decode only what the enabled probes read (recomputed when the programs change)
    // borrowed, not copied, per record (the probe masks make it a large value)
    let interest = std::cell::RefCell::new(sink.etw_interest(etw));
    scratch.set_interest(*interest.borrow());
    // every thread attributed to its process from the first record
    source.collect_threads();
    if interest.borrow().needs_file_names() {
        source.collect_file_names();
    }
    if interest.borrow().needs_disk_completions() {
        source.collect_disk_completions();
    }
    if interest.borrow().needs_missed_stacks()
        && !source.stacks.as_ref().is_some_and(|m| m.tracks_missed())
    {
        source.collect_stacks_with(true);
    }
    // what is printed before END names frames with the images loaded by then
    scratch.names = Some(WalkNames::of(source));
    let stacks = source.stacks.take();
    let mut errors = Vec::new();
    let mut stack_source = StackSource(stacks);
    // a windowed matcher is fed by a look-ahead over the file (sources::etl::stacks)
    let file = source.file.clone();
    let window = source.stack_window();
    let mut ahead =
        crate::sources::etl::stacks::StackWindow::start(&file, stack_source.0.as_mut(), window);
    let mut generation = sink.generation();
    // the kernel records no enabled probe reads are stepped over unbuilt, unless timers
    // run (a timer fires at the first record at or after its time, which a record stepped
    // over would move) or the programs may change on the way (the console's re-runs)
    let keep = match sink.next_timer_due().is_none() && !source.walks_every_record() {
        true => interest.borrow().kernel_events(),
        false => None,
    };
    let end = source.walk_kernel_events(
        keep,
        |ev| interest.borrow().wants(ev),
        |ev, dec, state| {
            if sink.done() || !between(sink, state) {
                return false;
            }
            if sink.generation() != generation {
                generation = sink.generation();
                *interest.borrow_mut() = sink.etw_interest(etw);
                scratch.set_interest(*interest.borrow());
            }
            // a timer's clause may print stacks (`printa()` in `tick-5s`)
            if sink.next_timer_due().is_some_and(|due| due <= ev.time_ns) {
                current_names(&mut scratch.names, sink, state);
            }
            sink.advance_to(ev.time_ns);
            if !interest.borrow().may_fire(ev) {
                return true;
            }
            if let (Some(a), Some(m)) = (ahead.as_mut(), stack_source.0.as_mut()) {
                a.advance(ev, m);
            }
            fire_event(sink, ev, dec, state, etw, &stack_source, &mut scratch);
            true
        },
        |e| errors.push(e.to_string()),
    );
    // the trace's clock ends at its last record, delivered or stepped over
    if let Some(t) = end.filter(|_| !sink.done()) {
        current_names(&mut scratch.names, sink, &source.state);
        sink.advance_to(t);
    }
    // firings that lacked a part of their stack that came later than the window
    errors.extend(ahead.and_then(|a| a.finish(stack_source.0.as_ref())));
    source.stacks = stack_source.0;
    errors
}

/// Fires what one decoded ETW record maps to in every program of `sink`: the step shared by a
/// recorded trace ([`walk_trace`]) and live ETW (`sources::etw_live`). `state` is the system
/// state as of this record; stacks come from `stacks` when it holds any. The caller moves
/// time (trace time, or the live clock).
pub fn fire_event<S: Sink + ?Sized>(
    sink: &mut S,
    ev: &EventRecord<'_>,
    dec: &DecodedEvent<'_>,
    state: &SystemState,
    etw: &EtwProbes,
    stacks: &StackSource,
    scratch: &mut EventScratch,
) {
    use crate::providers::etw::payload::PayloadMemory;
    let t = sink.trace_time().unwrap_or(ev.time_ns);
    let EventScratch {
        names,
        firings,
        execname,
        psargs,
        kstack,
        ustack,
        interest,
        blind,
        process,
    } = scratch;
    // no program reads a field of the record: it fires `diag:::events` / `diag:::ignored` as
    // the unknown thread, with nothing decoded, listed or looked up (the firing
    // `firings_with` would list, built in place)
    if let Some(blind) = *blind {
        if stacks.0.is_none() && sink.sampler().is_none() {
            let mem = PayloadMemory {
                id: ev.id,
                version: ev.version,
                wide: ev.pointer_size == 8,
                payload: ev.payload,
                native: &[],
            };
            let mem = crate::providers::etw::payload::EventMemory {
                payload: &mem,
                event: dec,
            };
            let mut before_print = || {
                names
                    .as_mut()
                    .and_then(|n| n.current(state))
                    .map(|n| Box::new(n) as Box<dyn SymbolResolver + Send>)
            };
            for &probe in blind {
                let mut cx = FiringCtx::synthetic(
                    &UNNAMED_PROBE,
                    t,
                    ev.wall_ns,
                    crate::etw::state::UNKNOWN_EXECNAME,
                );
                cx.args = crate::providers::etw::blind_args(ev);
                cx.set_ids(
                    crate::etw::state::UNKNOWN_PID,
                    crate::providers::etw::UNKNOWN_TID,
                );
                cx.ppid = 0;
                cx.cpu = ev.cpu as u32;
                cx.memory = &mem;
                sink.fire_probe(probe, cx, &mut before_print);
            }
            return;
        }
    }
    firings.clear();
    etw.firings_with(
        ev,
        dec,
        state,
        &|id| sink.is_enabled(id),
        interest.as_ref(),
        firings,
    );
    if let Some(sampler) = sink.sampler() {
        etw.profile_firings(ev, dec, state, sampler, firings);
    }
    for f in firings.iter() {
        // the process's names are built once for a run of firings of one process
        let known = (f.pid, state.processes_changed());
        if process.0 != Some(known) {
            *process = (Some(known), 0, 0);
            execname.clear();
            psargs.clear();
            if f.pid == crate::etw::state::UNKNOWN_PID {
                execname.extend_from_slice(crate::etw::state::UNKNOWN_EXECNAME);
            } else if let Some(proc_) = state.process(f.pid) {
                execname.extend(proc_.name.bytes().map(|b| b.to_ascii_lowercase()));
                psargs.extend_from_slice(proc_.command_line.as_bytes());
                process.1 = proc_.start_ns.unwrap_or(0);
                process.2 = proc_.parent as u64;
            }
        }
        let (proc_start, ppid) = (process.1, process.2);
        let mem = PayloadMemory {
            id: ev.id,
            version: ev.version,
            wide: ev.pointer_size == 8,
            payload: ev.payload,
            native: firings.native_of(f),
        };
        let mem = crate::providers::etw::payload::EventMemory {
            payload: &mem,
            event: dec,
        };
        // the sink puts its own description of the probe in place of this one
        let mut cx = FiringCtx::synthetic(&UNNAMED_PROBE, t, ev.wall_ns, execname);
        cx.args = f.args;
        cx.set_ids(f.pid, f.tid);
        cx.ppid = ppid;
        cx.cpu = ev.cpu as u32;
        cx.psargs = psargs;
        cx.proc_start = proc_start;
        cx.tname = state.thread_name(f.tid).as_bytes();
        cx.memory = &mem;
        if stacks.0.is_some() {
            stacks.stack_of(ev, f.tid, dec.u64("InstructionPointer"), kstack, ustack);
            cx.stack = kstack;
            cx.ustack = ustack;
            cx.epochs = Some(state);
        }
        let mut before_print = || {
            names
                .as_mut()
                .and_then(|n| n.current(state))
                .map(|n| Box::new(n) as Box<dyn SymbolResolver + Send>)
        };
        sink.fire_probe(f.probe, cx, &mut before_print);
    }
}

/// What [`fire_event`] builds a firing's context with before the sink names its probe.
static UNNAMED_PROBE: crate::probes::ProbeInfo = crate::probes::ProbeInfo {
    id: 0,
    provider: String::new(),
    module: String::new(),
    function: String::new(),
    name: String::new(),
    arg_types: Vec::new(),
    arg_native: Vec::new(),
};

/// Buffers [`fire_event`] reuses from one record to the next.
#[derive(Default)]
pub struct EventScratch {
    /// A trace walk's names for stack frames, brought up to date before a firing's records
    /// are printed (`None` where the source names frames otherwise: live ETW).
    names: Option<WalkNames>,
    firings: crate::providers::etw::EtwFirings,
    execname: Vec<u8>,
    psargs: Vec<u8>,
    kstack: Vec<u64>,
    ustack: Vec<u64>,
    /// The programs' interest, when the caller knows it: records no enabled kernel probe
    /// lists skip the kernel probe table.
    interest: Option<crate::providers::etw::Interest>,
    /// The interest's [`crate::providers::etw::Interest::blind_probes`], asked once.
    blind: Option<&'static [u64]>,
    /// The process `execname` and `psargs` hold and the state's
    /// [`SystemState::processes_changed`] when they were built; its start time and parent.
    process: (Option<(u32, u64)>, u64, u64),
}

impl EventScratch {
    /// Sets the programs' interest (and what follows from it for every record).
    fn set_interest(&mut self, interest: crate::providers::etw::Interest) {
        self.blind = interest.blind_probes();
        self.interest = Some(interest);
    }
}

/// Has `sink` name stack frames with names current with `state`, when a trace walk's `names`
/// are not.
fn current_names<S: Sink + ?Sized>(
    names: &mut Option<WalkNames>,
    sink: &mut S,
    state: &SystemState,
) {
    if let Some(n) = names.as_mut().and_then(|n| n.current(state)) {
        sink.set_symbols(Box::new(n));
    }
}
