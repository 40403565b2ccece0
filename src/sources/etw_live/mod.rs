//! Live ETW: the sessions the enabled probes need, their records fed through the same
//! decoders, system state, providers and engine step as `-E file.etl`.
//!
//! * [`raw`]: `EVENT_RECORD` mirrors and their conversion to the shared `EventRecord`;
//! * [`plan`]: the kernel flags, stack walks and user providers a run needs;
//! * this module: the `EventRecordCallback` ([`event_record_callback`]) that ProcessTrace
//!   calls on its worker thread, and [`EtwLiveSource`], the engine's `EventSource` that takes
//!   the copied records from it;
//! * [`SessionControl`]: what starts, re-plans and stops the sessions of a run; `windows`
//!   (cfg(windows)) implements it with StartTrace/EnableTraceEx2/ProcessTrace — the only part
//!   that needs Windows, and the only part not exercised by the tests here (Wine's OpenTrace
//!   is a stub; an elevated Windows runner runs `tests/it/etw_live_windows.rs`);
//! * [`replay`]: a [`SessionControl`] that feeds a recorded trace's records through the same
//!   callback, on a thread of its own, as a session would (the console's tests, on any OS).

pub mod clr;
pub mod interval;
pub mod names;
pub mod order;
pub mod plan;
pub mod raw;
pub mod replay;
#[cfg(windows)]
pub mod windows;

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Mutex;

use crate::etw::decode::{DecodedEvent, Decoder};
use crate::etw::reader::logfile::TimeBase;
use crate::etw::record::Guid;
use crate::etw::state::{StackMatcher, SystemState};
use crate::providers::etw::EtwProbes;
use crate::sources::etl::EventScratch;
use crate::sources::etl::{StackSource, STACK_WALK};
use crate::sources::sink::{EventSource, LiveStatus, Sink, SourceState};
use crate::vm::FiringCtx;
use plan::SessionPlan;
use raw::{LiveEvent, RawEventRecord};

/// Records held between the callback and the engine before the callback starts dropping them
/// (and counting them as lost).
pub const QUEUE_RECORDS: usize = 1 << 16;

/// The provider of the real-time loss records ETW inserts (`RT_LostEvent`).
pub const RT_LOST_EVENT: Guid = Guid {
    data1: 0x6a39_9ae0,
    data2: 0x4bc6,
    data3: 0x4de9,
    data4: [0x87, 0x0b, 0x36, 0x57, 0xf8, 0x94, 0x7e, 0x7e],
};

/// What the callback sends to the engine's side.
pub enum LiveMessage {
    Event(LiveEvent),
    /// The schema of the events that follow.
    Schema(EventSchema),
    /// A session ended that nobody stopped (ProcessTrace returned: the session was stopped by
    /// another program, or failed), with ProcessTrace's error code; or [`ENDED_BY_PANIC`].
    /// Only a prompt: the end itself is [`CallbackContext::ended`], which cannot be lost.
    Ended(u32),
}

/// An event's schema as TDH gives it, in the shape a trace's EventMetadata records carry it.
#[derive(Clone, Debug, Default)]
pub struct EventSchema {
    /// A TRACE_EVENT_INFO blob (TdhGetEventInformation).
    pub event_info: Vec<u8>,
    /// The value maps its fields name: each the provider GUID (16 bytes) then an
    /// EVENT_MAP_INFO blob (TdhGetEventMapInformation).
    pub maps: Vec<Vec<u8>>,
}

/// Finds the schema of a record a session delivers (on Windows, TDH).
pub type SchemaLookup = Box<dyn Fn(&RawEventRecord) -> Option<EventSchema> + Send + Sync>;

/// The state the callback reaches through `EVENT_RECORD.UserContext`.
pub struct CallbackContext {
    tx: SyncSender<LiveMessage>,
    /// Records dropped because the engine fell behind.
    pub dropped: AtomicU64,
    /// Set when the callback panicked: it passes nothing on after that.
    failed: AtomicBool,
    /// The end of a session nobody stopped: [`NOT_ENDED`], else the code of the first end
    /// ([`CallbackContext::end`]). An atomic besides the queue's `Ended` message, which a full
    /// queue cannot take: the source looks at it whenever the queue runs dry and every
    /// [`DEADLINE_EVERY`] records, so an end is never lost.
    ended: AtomicU64,
    /// Wait for room instead of dropping (a replay, which has no real-time deadline).
    backpressure: AtomicBool,
    /// Where the schemas of manifest providers' events come from (live sessions carry no
    /// EventMetadata records), and the events already looked up.
    schema_lookup: Option<SchemaLookup>,
    looked_up: Mutex<HashSet<(Guid, u16, u8)>>,
}

impl CallbackContext {
    /// A context and the receiving end for [`EtwLiveSource`].
    pub fn channel(capacity: usize) -> (Box<CallbackContext>, Receiver<LiveMessage>) {
        let (tx, rx) = std::sync::mpsc::sync_channel(capacity);
        (
            Box::new(CallbackContext {
                tx,
                dropped: AtomicU64::new(0),
                failed: AtomicBool::new(false),
                ended: AtomicU64::new(NOT_ENDED),
                backpressure: AtomicBool::new(false),
                schema_lookup: None,
                looked_up: Mutex::new(HashSet::new()),
            }),
            rx,
        )
    }

    /// Looks up the schema of each new manifest event (provider, id, version) with `lookup`
    /// before its first record goes to the engine.
    pub fn with_schema_lookup(mut self: Box<Self>, lookup: SchemaLookup) -> Box<Self> {
        self.schema_lookup = Some(lookup);
        self
    }

    /// Makes [`CallbackContext::send`] wait for room in the queue rather than drop, while
    /// `on` (for replays: a real session's callback must never hold up ETW's delivery
    /// thread). Turning it off lets a waiting sender go (dropping its record).
    pub fn set_backpressure(&self, on: bool) {
        self.backpressure.store(on, Ordering::SeqCst);
    }

    /// Sends the schema of `rec`'s event first when it is a manifest event not seen before
    /// (TraceLogging events carry their own; classic records have none to look up).
    fn schema_of(&self, rec: &RawEventRecord) {
        let Some(lookup) = &self.schema_lookup else {
            return;
        };
        let h = &rec.header;
        if h.flags & raw::flag::CLASSIC_HEADER != 0 || raw::has_tracelogging_schema(rec) {
            return;
        }
        let key = (
            Guid::from(h.provider_id),
            h.descriptor.id,
            h.descriptor.version,
        );
        let first = match self.looked_up.lock() {
            Ok(mut seen) => seen.insert(key),
            Err(_) => false,
        };
        if first {
            if let Some(info) = lookup(rec) {
                if self.tx.try_send(LiveMessage::Schema(info)).is_err() {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    // looked up again with the event's next record
                    if let Ok(mut seen) = self.looked_up.lock() {
                        seen.remove(&key);
                    }
                }
            }
        }
    }

    /// Tells the engine's side a session is over, with ProcessTrace's code (or
    /// [`ENDED_BY_PANIC`]). Never blocks and is never lost: the code is kept in
    /// [`CallbackContext::ended`] (the first end wins), and the queue's `Ended` message, when
    /// there is room for it, only wakes the source sooner.
    pub fn end(&self, code: u32) {
        let _ =
            self.ended
                .compare_exchange(NOT_ENDED, code as u64, Ordering::SeqCst, Ordering::SeqCst);
        let _ = self.tx.try_send(LiveMessage::Ended(code));
    }

    /// The code of the first end ([`CallbackContext::end`]), once a session ended.
    pub fn ended(&self) -> Option<u32> {
        match self.ended.load(Ordering::SeqCst) {
            NOT_ENDED => None,
            code => Some(code as u32),
        }
    }

    /// Sends one record (ProcessTrace's thread; also how a Windows layer passes records it
    /// makes itself, e.g. TDH metadata).
    pub fn send(&self, ev: LiveEvent) {
        let mut msg = LiveMessage::Event(ev);
        while self.backpressure.load(Ordering::Relaxed) {
            match self.tx.try_send(msg) {
                Err(TrySendError::Full(m)) => {
                    msg = m;
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
                _ => return,
            }
        }
        match self.tx.try_send(msg) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

/// The `EventRecordCallback` of every live session: copies the record (its buffers are only
/// valid during the call) and queues it for the engine. `UserContext` is the session's
/// [`CallbackContext`].
///
/// # Safety
/// `rec` must be a valid record as ETW passes it, whose `user_context` is a live
/// `CallbackContext` (what the session set in `EVENT_TRACE_LOGFILEW.Context`).
///
/// Nothing unwinds out of it (a panic across ETW's frames would abort the process, leaving the
/// sessions running): a panic is caught, the callback passes nothing on after it, and the
/// source ends the run with a message.
pub unsafe extern "system" fn event_record_callback(rec: *mut RawEventRecord) {
    let Some(rec) = rec.as_ref() else { return };
    let Some(cx) = (rec.user_context as *const CallbackContext).as_ref() else {
        return;
    };
    if cx.failed.load(Ordering::Relaxed) {
        return;
    }
    IN_CALLBACK.with(|c| c.set(true));
    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cx.schema_of(rec);
        cx.send(LiveEvent::copy_from(rec));
    }));
    IN_CALLBACK.with(|c| c.set(false));
    if done.is_err() {
        cx.failed.store(true, Ordering::Relaxed);
        cx.end(ENDED_BY_PANIC);
    }
}

thread_local! {
    /// Set while [`event_record_callback`] runs its body on this thread.
    static IN_CALLBACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread runs [`event_record_callback`], whose panics are caught (and end the
/// run with a message): a panic hook asks, so that such a panic does not tear down what a
/// panic that ends the process would (the console's screen).
pub fn panic_is_caught() -> bool {
    IN_CALLBACK.with(|c| c.get())
}

/// Hands a copied record to [`event_record_callback`] as a session's ProcessTrace thread
/// would: rebuilt as the `EVENT_RECORD` (header, extended items, payload) a real-time session
/// delivers, with `context` as its `UserContext`. How replays and tests feed the live path.
///
/// # Safety
/// `context` must point at a live [`CallbackContext`] (the source's
/// [`EtwLiveSource::context_ptr`]) for the duration of the call.
pub unsafe fn pass_to_callback(ev: &LiveEvent, context: *mut std::ffi::c_void) {
    let mut parts = raw::RawRecordParts::new(ev, context);
    let mut rec = parts.record();
    // SAFETY: `rec` points into `ev` and `parts`, alive for the call; the caller vouches for
    // the context
    unsafe { event_record_callback(&mut rec) };
}

/// The code of [`LiveMessage::Ended`] when the callback panicked.
pub const ENDED_BY_PANIC: u32 = u32::MAX;

/// [`CallbackContext::ended`] before any end (above every u32 code).
const NOT_ENDED: u64 = u64::MAX;

/// ProcessTrace's code when the session it read was stopped by another program (winerror.h
/// ERROR_WMI_INSTANCE_NOT_FOUND): Process Hacker's etwmon.c takes it, as 0, for a session
/// stopped from outside, not for a failure.
pub const ERROR_WMI_INSTANCE_NOT_FOUND: u32 = 4201;

/// Starts, re-plans and stops the ETW sessions of a live run. On Windows, real sessions
/// (`windows::Sessions`); elsewhere, a replay of recorded records ([`replay::ReplayControl`])
/// or a test's producer. The records go through [`event_record_callback`] with the
/// source's [`CallbackContext`] as their `UserContext`.
pub trait SessionControl: Send {
    /// Brings the running sessions to `plan`: starts what is missing, changes what differs
    /// (providers' keywords and levels, kernel flags and stack walks), stops what is no longer
    /// needed. `context` is the callback's context (what `EVENT_TRACE_LOGFILEW.Context`
    /// takes). Returns notes for the user, one line each. On an error, the sessions that
    /// were running keep running.
    fn apply(
        &mut self,
        plan: &SessionPlan,
        context: *mut std::ffi::c_void,
    ) -> Result<Vec<String>, String>;
    /// Stops every session: when it returns, no record comes through the callback any more.
    fn stop(&mut self);
    /// Enables `provider` in the running user session as the run ends, before [`Self::stop`]:
    /// the .NET end rundown ([`SessionPlan::end_rundown`]). `Ok(true)` when it was enabled
    /// (its records are then awaited), `Ok(false)` when there is nothing to enable it in (a
    /// replay), else what went wrong, in words.
    fn end_rundown(&mut self, _provider: &plan::UserProvider) -> Result<bool, String> {
        Ok(false)
    }
    /// The sessions running and what ETW counts as lost in them (ControlTrace QUERY).
    fn status(&mut self) -> ControlStatus {
        ControlStatus::default()
    }
    /// Where the schemas of manifest events come from (TDH on Windows), taken once when the
    /// source is made.
    fn schema_lookup(&mut self) -> Option<SchemaLookup> {
        None
    }
}

/// Opens a new [`SessionControl`] for a live run and gives the clock its records' timestamps
/// are read with (on Windows: the sessions' QueryPerformanceCounter clock; a replay: the
/// trace's). The console keeps one to open its live source with.
pub type OpenControl =
    std::sync::Arc<dyn Fn() -> Result<(Box<dyn SessionControl>, TimeBase), String> + Send + Sync>;

/// A live source over the sessions `open` gives, for `etw`'s providers, planned for what
/// `sink`'s programs enable; with the notes of that first plan.
pub fn open_source(
    open: &OpenControl,
    etw: EtwProbes,
    sink: &dyn Sink,
    target: Option<u32>,
) -> Result<(EtwLiveSource, Vec<String>), String> {
    let (mut control, time) = open()?;
    let (mut context, rx) = CallbackContext::channel(QUEUE_RECORDS);
    if let Some(lookup) = control.schema_lookup() {
        context = context.with_schema_lookup(lookup);
    }
    let mut src = EtwLiveSource::new(context, rx, etw, time, false).with_control(control);
    src.target = target;
    let notes = src.replan(sink)?;
    Ok((src, notes))
}

/// What a [`SessionControl`] reports of its sessions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControlStatus {
    /// Names of the running sessions.
    pub sessions: Vec<String>,
    /// `EVENT_TRACE_PROPERTIES.EventsLost` summed over the sessions.
    pub events_lost: u64,
    /// `RealTimeBuffersLost` summed over the sessions.
    pub buffers_lost: u64,
}

/// What [`EtwLiveSource`] counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveCounts {
    pub records: u64,
    /// The RT_LostEvent records ETW inserted, by kind: of lost events, of lost real-time
    /// buffers, of a log file that could not be written. Each is a notice that something was
    /// lost, not a count of events: those are the sessions' EventsLost and
    /// RealTimeBuffersLost ([`ControlStatus`]), and the two are never added.
    pub lost_notices: [u64; 3],
    /// Records dropped between the callback and the engine.
    pub dropped: u64,
}

/// Live ETW as an engine event source: records come from [`event_record_callback`] through a
/// queue, and each is decoded, applied to the system state and fired exactly as a trace's.
pub struct EtwLiveSource {
    rx: Receiver<LiveMessage>,
    context: Box<CallbackContext>,
    decoder: Decoder,
    state: SystemState,
    stacks: StackSource,
    etw: EtwProbes,
    time: TimeBase,
    /// Engine clock (ns) at the session's time 0: live records fire on the engine's clock.
    clock_origin: Option<u64>,
    scratch: EventScratch,
    lost_probe: Option<u64>,
    /// The engine generation [`EtwLiveSource::deliver`]'s interest was computed for.
    interest: Option<(u64, crate::providers::etw::Interest)>,
    seen_dropped: u64,
    pub counts: LiveCounts,
    /// What starts, changes and stops the sessions (none: records come from elsewhere).
    control: Option<Box<dyn SessionControl>>,
    /// The plan the sessions run now.
    plan: Option<SessionPlan>,
    /// Methods the .NET runtime compiled or loaded (names of managed frames).
    methods: Vec<crate::providers::etw::dnet::ManagedMethod>,
    /// What the user should be told (a session that ended, a failed callback), once.
    messages: Vec<String>,
    /// The PDBs read for the resolvers, kept from one to the next.
    pdbs: crate::symbols::PdbStore,
    /// The names of stack frames as the session knows them: one resolver, built again as
    /// images come, that the consumer (from the first [`EventSource::name_frames`]) and the
    /// console's snapshots ([`EventSource::symbols`]) share.
    names: crate::symbols::SharedNames,
    /// What `names` was built from (the state's [`SystemState::names_changed`] and the method
    /// count) and when; `None` before its first build.
    names_built: Option<((u64, usize), std::time::Instant)>,
    /// The methods `names` has.
    methods_named: usize,
    /// Reads the PDB identities of image files on a worker thread (Windows: live images carry
    /// no ImageID records); `None`: images keep the identities their records give.
    identify: Option<names::Identify>,
    /// What naming cost ([`EtwLiveSource::names_stats`]).
    names_stats: names::NamesStats,
    /// Whether the consumer has `names`, and whether the console has.
    names_given: (bool, bool),
    /// Whether the programs print frames or symbols (per engine generation): only then are
    /// the names built.
    frames_printed: Option<(u64, bool)>,
    /// How long the last build of `names` took: the next waits at least
    /// [`NAMES_BUILD_SHARE`] times that, so that naming takes a bounded share of the engine
    /// thread however many processes and images the session saw.
    names_cost: std::time::Duration,
    ended: Option<u32>,
    /// Kernel (group, event type) records whose stack walk follows them (the plan's).
    stack_events: Vec<(u8, u8)>,
    /// Records in arrival order, held while the first awaits its stack walk record.
    held: VecDeque<Held>,
    /// Raw timestamp of the newest record at the last pruning of the stacks, and the records
    /// delivered since.
    prune_mark: i64,
    since_prune: u32,
    /// The newest session time seen (records wait [`STACK_WAIT_NS`] of it for their stacks).
    newest_ns: u64,
    /// Records that arrived, held until they can go on in time order ([`order`]).
    order: order::Reorder,
    /// The engine's clock at the source's last look (every [`DEADLINE_EVERY`] records, and
    /// whenever the queue ran dry): the arrival time of the records taken since. Reading the
    /// clock for each record cost more than a record's wait in the time-order window (a
    /// record waits 1.5 s; this is late by the few microseconds 64 records take).
    arrival_ns: u64,
    /// The run's target process (`-p`, `-c`), for the plans ([`SessionPlan::with_target`]).
    target: Option<u32>,
}

/// A record waiting in [`EtwLiveSource::held`].
struct Held {
    ev: LiveEvent,
    /// The stack it waits for, if it waits.
    awaits: Option<StackWait>,
    /// Engine time of its arrival.
    arrived: u64,
}

/// The stack a held record waits for.
struct StackWait {
    raw_timestamp: i64,
    tid: u32,
    cpu: u16,
    pointer_size: u8,
    /// The record's time in the session.
    time_ns: u64,
}

/// How long, in the session's time, a record waits for its stack walk records. ETW logs the
/// kernel part right after the record, the user part when the thread returns to user mode:
/// in the recorded traces 99.9% of user parts come within 3 ms, all within 115 ms.
pub const STACK_WAIT_NS: u64 = 250_000_000;
/// How long a record waits when the session goes quiet (no newer records come), from when it
/// left the time-order window: its user stack part, logged up to [`STACK_WAIT_NS`] later,
/// maybe on another, quiet CPU whose buffer is flushed only by the flush timer, reaches the
/// consumer up to a flush period after it was logged and then waits the window itself. So the
/// wait is the flush period, the window and a margin (3 s with a 1 s flush timer); waiting
/// just the flush period declared such stacks missing before they came.
pub const STACK_WAIT_QUIET_NS: u64 = stack_wait_quiet_ns(order::FLUSH_TIMER_S);

/// [`STACK_WAIT_QUIET_NS`] for a session flushed every `flush_timer_s` seconds.
pub const fn stack_wait_quiet_ns(flush_timer_s: u32) -> u64 {
    flush_timer_s as u64 * 1_000_000_000 + order::reorder_window_ns(flush_timer_s) + 500_000_000
}
/// Records held at most while waiting for stacks.
const HELD_MAX: usize = 1 << 16;
/// Stacks are pruned every this many records, dropping those older than the previous pruning.
const PRUNE_EVERY: u32 = 1 << 16;

impl EtwLiveSource {
    /// A source reading from `rx` (fed by `context`'s callback); `time` converts the session's
    /// raw timestamps; `stacks` keeps the stacks ETW attaches to records.
    pub fn new(
        context: Box<CallbackContext>,
        rx: Receiver<LiveMessage>,
        etw: EtwProbes,
        time: TimeBase,
        stacks: bool,
    ) -> EtwLiveSource {
        EtwLiveSource {
            rx,
            context,
            // the .NET runtime's shipped manifest, as a trace's walk has it: its method events
            // name managed frames even where TDH has no schema for them
            decoder: crate::sources::etl::TraceSource::new_decoder(),
            state: SystemState::new(),
            stacks: StackSource(stacks.then(StackMatcher::new)),
            etw,
            time,
            clock_origin: None,
            scratch: EventScratch::default(),
            lost_probe: None,
            interest: None,
            seen_dropped: 0,
            counts: LiveCounts::default(),
            control: None,
            plan: None,
            methods: Vec::new(),
            messages: Vec::new(),
            names: crate::symbols::SharedNames(Default::default()),
            names_built: None,
            methods_named: 0,
            identify: default_identify(),
            names_stats: names::NamesStats::default(),
            names_given: (false, false),
            frames_printed: None,
            names_cost: std::time::Duration::ZERO,
            // PDBs from servers arrive on workers: the engine thread never waits on a download
            pdbs: crate::symbols::PdbStore::from_env().fetching_in_background(),
            ended: None,
            stack_events: Vec::new(),
            held: VecDeque::new(),
            prune_mark: i64::MIN,
            since_prune: 0,
            newest_ns: 0,
            order: order::Reorder::new(order::reorder_window_ns(order::FLUSH_TIMER_S)),
            arrival_ns: 0,
            target: None,
        }
    }

    /// The kernel records whose clauses want stacks (`SessionPlan::stack_events`): each is
    /// held until its stack walk record arrives, so that it fires with its stack as it does
    /// over a trace.
    pub fn with_stack_events(mut self, events: &[(u8, u8)]) -> EtwLiveSource {
        self.stack_events = events.to_vec();
        self
    }

    /// Takes one record from the callback: it waits in the time-order window ([`order`]) and
    /// then goes on to [`EtwLiveSource::accept_ordered`] with the records that may go.
    pub fn accept(&mut self, ev: LiveEvent, sink: &mut dyn Sink) {
        // ETW's loss records are about the delivery, not a moment of the session: counted now
        if Guid::from(ev.header.provider_id) == RT_LOST_EVENT {
            self.deliver(&ev, sink);
            return;
        }
        self.order.push(ev, self.arrival_ns);
        self.release_ordered(sink, false);
    }

    /// Looks at the engine's clock: the arrival time of the records taken next.
    fn look_at_clock(&mut self, sink: &dyn Sink) -> u64 {
        self.arrival_ns = sink.now_ns();
        self.arrival_ns
    }

    /// Passes on the records of the time-order window that may go; with `quiet` also those
    /// that waited the window on the engine's clock (a live session's: a replay that drives
    /// the source itself between batches of records has no such clock, see [`Self::drain`]).
    fn release_ordered(&mut self, sink: &mut dyn Sink, quiet: bool) {
        // the clock matters only to what waited (quiet); else the session's time decides
        let now = if quiet { self.look_at_clock(sink) } else { 0 };
        while let Some(ev) = self.order.pop_ready(&self.time, now, quiet) {
            self.accept_ordered(ev, sink);
        }
    }

    /// Passes on every record of the time-order window (the end of a run, or of a session).
    fn flush_ordered(&mut self, sink: &mut dyn Sink) {
        while let Some(ev) = self.order.pop() {
            self.accept_ordered(ev, sink);
        }
    }

    /// Takes one record in time order: stack walk records are matched at once, and records
    /// fire in order, each held until its stack has come (or a wait passed).
    fn accept_ordered(&mut self, ev: LiveEvent, sink: &mut dyn Sink) {
        let Some(m) = self.stacks.0.as_mut() else {
            self.deliver(&ev, sink);
            return;
        };
        let rec = ev.record(&self.time);
        self.newest_ns = self.newest_ns.max(rec.time_ns);
        let awaits = match rec.kernel_group {
            Some(STACK_WALK) => {
                m.observe(&rec, Some(&self.decoder.decode(&rec)));
                None
            }
            Some(g) if self.stack_events.binary_search(&(g, rec.opcode)).is_ok() => {
                // kernel records name their thread in the payload when the header has none
                let tid = if rec.tid == u32::MAX {
                    self.decoder
                        .decode(&rec)
                        .u64("ThreadId")
                        .map_or(u32::MAX, |t| t as u32)
                } else {
                    rec.tid
                };
                Some(StackWait {
                    raw_timestamp: rec.raw_timestamp,
                    tid,
                    cpu: rec.cpu,
                    pointer_size: rec.pointer_size,
                    time_ns: rec.time_ns,
                })
            }
            _ => None,
        };
        let arrived = self.arrival_ns;
        self.held.push_back(Held {
            ev,
            awaits,
            arrived,
        });
        self.release(sink, false);
    }

    /// Fires the held records that may go: all with `all`, else up to the first that still
    /// waits for its stack.
    fn release(&mut self, sink: &mut dyn Sink, all: bool) {
        // the last look at the clock: fresh where the wait matters (a pump's deadline, a
        // queue run dry), a few records old on the way
        let now = self.arrival_ns;
        while let Some(h) = self.held.front() {
            let waiting = match &h.awaits {
                Some(w) if !all && self.held.len() < HELD_MAX => {
                    let waited = self.newest_ns.saturating_sub(w.time_ns) >= STACK_WAIT_NS
                        || now.saturating_sub(h.arrived) >= STACK_WAIT_QUIET_NS;
                    !waited && !self.stack_complete(w)
                }
                _ => false,
            };
            if waiting {
                break;
            }
            let h = self.held.pop_front().expect("a front record");
            self.deliver(&h.ev, sink);
        }
    }

    /// Whether an event's stack has all its parts: ETW logs the kernel part right after the
    /// event, and the user part when the thread next returns to user mode (later, maybe on
    /// another CPU). Threads that never run in user mode (the idle threads, the System
    /// process's) have only the kernel part.
    fn stack_complete(&self, w: &StackWait) -> bool {
        let Some(m) = self.stacks.0.as_ref() else {
            return true;
        };
        let Some(frames) = m.stack(w.raw_timestamp, w.tid, w.cpu) else {
            return false;
        };
        let user = frames
            .iter()
            .any(|&pc| !crate::etw::is_kernel_address(pc, w.pointer_size));
        user || w.tid == 0 || matches!(self.state.thread(w.tid).map(|t| t.pid), Some(0 | 4))
    }

    /// Registers an event schema the callback looked up, as a trace's EventMetadata records
    /// would (the decoder learns it the same way): EventInfo (type 32), EventMapInfo (33).
    fn learn_schema(&mut self, schema: EventSchema) {
        let parts = std::iter::once((32, schema.event_info))
            .chain(schema.maps.into_iter().map(|m| (33, m)));
        for (opcode, payload) in parts {
            let mut header = raw::RawEventHeader {
                flags: raw::flag::CLASSIC_HEADER,
                provider_id: crate::etw::decode::kernel::EVENT_METADATA.into(),
                ..Default::default()
            };
            header.descriptor.opcode = opcode;
            let ev = LiveEvent {
                header,
                cpu: 0,
                payload,
                extended: Vec::new(),
            };
            self.decoder.observe(&ev.record(&self.time));
        }
    }

    /// Bounds the stacks kept: those of records older than the previous pruning go.
    fn prune_stacks(&mut self, raw_timestamp: i64) {
        self.since_prune += 1;
        if self.since_prune < PRUNE_EVERY {
            return;
        }
        self.since_prune = 0;
        if let Some(m) = self.stacks.0.as_mut() {
            m.forget_before(self.prune_mark);
        }
        self.prune_mark = raw_timestamp;
    }

    /// The context to pass as `EVENT_TRACE_LOGFILEW.Context` (and `UserContext` in tests):
    /// it stays at this address while the source lives.
    pub fn context_ptr(&self) -> *mut std::ffi::c_void {
        &*self.context as *const CallbackContext as *mut std::ffi::c_void
    }

    /// The source with `control` starting and stopping its sessions ([`EtwLiveSource::replan`]
    /// starts them).
    pub fn with_control(mut self, control: Box<dyn SessionControl>) -> EtwLiveSource {
        self.control = Some(control);
        self
    }

    /// Plans the sessions for what `sink`'s programs enable now and brings the sessions to
    /// that plan (the first call starts them; after a program is replaced, the changes are
    /// applied while the system state, decoder and stacks stay). Returns notes for the user:
    /// probes that cannot fire live, a sampling interval Windows changed, ...
    pub fn replan(&mut self, sink: &dyn Sink) -> Result<Vec<String>, String> {
        let plan = SessionPlan::for_engine(sink, &self.etw).with_target(self.target);
        if self.plan.as_ref() == Some(&plan) {
            return Ok(Vec::new());
        }
        let mut notes = plan.not_live.clone();
        notes.extend(plan.notes.iter().cloned());
        let stacks = !plan.stack_events.is_empty() || plan.user.iter().any(|u| u.stacks);
        if stacks && self.stacks.0.is_none() {
            self.stacks.0 = Some(StackMatcher::new());
        }
        self.stack_events = plan.stack_events.clone();
        self.interest = None;
        let ctx = self.context_ptr();
        if let Some(c) = self.control.as_mut() {
            notes.extend(c.apply(&plan, ctx)?);
        }
        self.plan = Some(plan);
        Ok(notes)
    }

    /// The plan the sessions run now.
    pub fn plan(&self) -> Option<&SessionPlan> {
        self.plan.as_ref()
    }

    /// Stops the sessions (idempotent): no record comes after it.
    pub fn stop_sessions(&mut self) {
        if let Some(c) = self.control.as_mut() {
            c.stop();
        }
        self.plan = None;
    }

    /// The names of stack frames as of now: the images the session saw (PDBs found by their
    /// identity) and the .NET methods it saw compiled. Built whole, from every process seen;
    /// the source's own names are kept up to date by the pids that change instead
    /// ([`names`]).
    pub fn trace_symbols(&self) -> crate::symbols::TraceSymbols {
        crate::sources::etl::frame_names(&self.state, &self.methods, &self.pdbs)
    }

    /// Reads image identities with `identify` on a worker thread (what a Windows session does
    /// with the image files; tests give their own).
    pub fn with_identify(mut self, identify: names::IdentifyFn) -> EtwLiveSource {
        self.identify = Some(names::Identify::new(identify));
        self
    }

    /// What naming frames has cost so far.
    pub fn names_stats(&self) -> names::NamesStats {
        let mut s = self.names_stats;
        s.files_asked = self.identify.as_ref().map_or(0, |i| i.asked);
        s
    }

    /// Brings [`EtwLiveSource::names`] up to date when what names frames changed since its
    /// last update and that was at least `every` ago: built whole the first time, then only
    /// the pids that changed (and those whose images' identities the worker answered).
    fn refresh_names(&mut self, every: std::time::Duration) {
        let answered = match self.identify.as_mut() {
            Some(id) => id.take_answers(&mut self.state),
            None => Vec::new(),
        };
        let from = (self.state.names_changed(), self.methods.len());
        let every = if every.is_zero() {
            every
        } else {
            every.max(self.names_cost * NAMES_BUILD_SHARE)
        };
        if answered.is_empty()
            && (self.names_built).is_some_and(|(f, at)| f == from || at.elapsed() < every)
        {
            return;
        }
        let started = std::time::Instant::now();
        let mut pids = self.state.take_names_dirty();
        pids.extend(answered);
        if let Some(id) = self.identify.as_mut() {
            if self.names_built.is_none() {
                // the first build: every image seen
                pids = self.state.processes().map(|p| p.pid).collect();
            }
            pids.sort_unstable();
            pids.dedup();
            id.identify(&mut self.state, &pids);
            pids.extend(self.state.take_names_dirty());
        }
        pids.sort_unstable();
        pids.dedup();
        {
            let mut names = self.names.0.lock().unwrap_or_else(|e| e.into_inner());
            if self.names_built.is_none() {
                *names = crate::sources::etl::frame_names(&self.state, &self.methods, &self.pdbs);
                self.names_stats.full_builds += 1;
            } else {
                names.update_pids(&self.state, &pids, &self.pdbs);
                let new = &self.methods[self.methods_named.min(self.methods.len())..];
                names.add_methods(
                    new.iter()
                        .map(|m| (m.pid, m.start, m.size, m.name.as_str())),
                );
                self.names_stats.updates += 1;
                self.names_stats.pids_updated += pids.len() as u64;
            }
        }
        self.methods_named = self.methods.len();
        let from = (self.state.names_changed(), self.methods.len());
        self.names_built = Some((from, std::time::Instant::now()));
        self.names_cost = started.elapsed();
    }

    /// At the end of a run: waits (a bounded time) for the identities of images still being
    /// read, so that END names their frames, and brings the names up to date.
    fn final_names(&mut self) {
        // asks about the images not asked about yet (those of the last records)
        self.refresh_names(std::time::Duration::ZERO);
        if let Some(id) = self.identify.as_mut() {
            let pids = id.wait_answers(&mut self.state, IDENTIFY_WAIT);
            if !pids.is_empty() {
                let mut pids = pids;
                pids.sort_unstable();
                pids.dedup();
                id.identify(&mut self.state, &pids);
            }
        }
        self.refresh_names(std::time::Duration::ZERO);
    }

    /// Whether a program of `sink` prints stack frames or symbols (what `names` is for):
    /// programs that do not never pay for naming (no image's headers read, no resolver built).
    fn frames_printed(&mut self, sink: &dyn Sink) -> bool {
        match self.frames_printed {
            Some((g, v)) if g == sink.generation() => v,
            _ => {
                let v = sink.programs().into_iter().any(|p| prints_frames(p));
                self.frames_printed = Some((sink.generation(), v));
                v
            }
        }
    }

    /// Brings the names of frames up to date (at most `every` old) and, the first time, has
    /// the consumer name frames with them before what named frames already (a pid target's
    /// modules), so that the session's images name a frame first.
    fn give_names(&mut self, sink: &mut dyn Sink, every: std::time::Duration) {
        if !self.frames_printed(sink) {
            return;
        }
        self.refresh_names(every);
        if !self.names_given.0 {
            self.names_given.0 = true;
            let before = sink.take_symbols();
            sink.set_symbols(Box::new(crate::symbols::FirstNamed(vec![
                Box::new(self.names.clone()),
                before,
            ])));
        }
    }

    /// What went wrong and what was lost, in words, for the end of a run.
    pub fn report(&mut self, prog: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .take_messages()
            .into_iter()
            .map(|m| format!("{prog}: {m}"))
            .collect();
        let st = self
            .control
            .as_mut()
            .map(|c| c.status())
            .unwrap_or_default();
        out.extend(loss_lines(&st, self.counts.lost_notices).map(|l| format!("{prog}: {l}")));
        if self.counts.dropped > 0 {
            out.push(format!(
                "{prog}: {} events dropped (the sink fell behind the session)",
                self.counts.dropped
            ));
        }
        out
    }

    fn take_messages(&mut self) -> Vec<String> {
        std::mem::take(&mut self.messages)
    }

    /// Notes the end of a session nobody stopped.
    fn session_ended(&mut self, code: u32) {
        self.ended = Some(code);
        let m = match code {
            ENDED_BY_PANIC => "live ETW stopped: an internal error in the event callback \
                               (please report it); the sessions were stopped"
                .to_string(),
            0 | ERROR_WMI_INSTANCE_NOT_FOUND => {
                "an ETW session of this run was stopped by another program".to_string()
            }
            c => format!("reading the ETW session failed (ProcessTrace error {c})"),
        };
        self.messages.push(m);
    }

    /// The system state rebuilt from the session's records so far.
    pub fn state(&self) -> &SystemState {
        &self.state
    }

    /// The error code the session ended with, once it ended.
    pub fn ended(&self) -> Option<u32> {
        self.ended
    }

    /// Decodes and fires one record: the same decode → state → providers → engine step as a
    /// trace's walk ([`crate::sources::etl::fire_event`]).
    pub fn deliver(&mut self, ev: &LiveEvent, sink: &mut dyn Sink) {
        self.counts.records += 1;
        let mut rec = ev.record(&self.time);
        if rec.provider == RT_LOST_EVENT {
            // 32: events lost, 33: buffers lost, 34: the log file could not be written
            let kind = rec.opcode.saturating_sub(32) as u64;
            if let Some(n) = self.counts.lost_notices.get_mut(kind as usize) {
                *n += 1;
            }
            self.fire_lost(sink, 1, kind);
            return;
        }
        let origin = *self
            .clock_origin
            .get_or_insert_with(|| sink.now_ns().saturating_sub(rec.time_ns));
        rec.time_ns += origin;
        self.decoder.observe(&rec);
        // what the enabled probes need, recomputed when the programs change (a provider
        // catalog makes this a walk over every known provider's probes)
        // profile-N fires from the session's samples (the plan enabled them)
        sink.profile_from_samples();
        let interest = match self.interest {
            Some((g, it)) if g == sink.generation() => it,
            _ => {
                let it = sink.etw_interest(&self.etw);
                self.interest = Some((sink.generation(), it));
                it
            }
        };
        if let Some(m) = self.stacks.0.as_mut() {
            // stack walk records were matched when they arrived ([`EtwLiveSource::accept`])
            if rec.kernel_group != Some(STACK_WALK) {
                m.observe(&rec, None);
            }
        }
        let method = self.stacks.0.is_some()
            && crate::providers::etw::dnet::is_dotnet(&rec)
            && matches!(rec.id, 143 | 144);
        if crate::sources::etl::state_needs(&rec) || interest.wants(&rec) || method {
            let dec = self.decoder.decode(&rec);
            if method {
                if let Some(m) = crate::providers::etw::dnet::managed_method(&rec, &dec) {
                    self.methods.push(m);
                }
            }
            self.state.observe(&rec, Some(&dec));
            crate::sources::etl::fire_event(
                sink,
                &rec,
                &dec,
                &self.state,
                &self.etw,
                &self.stacks,
                &mut self.scratch,
            );
        } else {
            self.state.observe(&rec, None);
            crate::sources::etl::fire_event(
                sink,
                &rec,
                &DecodedEvent::skipped(),
                &self.state,
                &self.etw,
                &self.stacks,
                &mut self.scratch,
            );
        }
        self.prune_stacks(rec.raw_timestamp);
    }

    /// Fires `diag:::lostevent` (arg0: how many, arg1: 0 events, 1 buffers, 2 log file,
    /// 3 dropped by dtx's queue) when a program enabled it.
    fn fire_lost(&mut self, sink: &mut dyn Sink, n: u64, kind: u64) {
        let probe = match self.lost_probe {
            Some(id) => id,
            None => {
                let Some(p) = sink
                    .enabled_probes()
                    .find(|p| p.provider == "diag" && p.name == "lostevent")
                else {
                    return;
                };
                self.lost_probe = Some(p.id);
                p.id
            }
        };
        let Some(p) = sink.probe_info(probe).cloned() else {
            return;
        };
        let now = sink.now_ns();
        let mut cx = FiringCtx::synthetic(&p, now, now, b"dtx");
        cx.args[0] = n;
        cx.args[1] = kind;
        sink.fire(&cx);
    }

    fn check_dropped(&mut self, sink: &mut dyn Sink) {
        let d = self.context.dropped.load(Ordering::Relaxed);
        if d > self.seen_dropped {
            let n = d - self.seen_dropped;
            self.seen_dropped = d;
            self.counts.dropped = d;
            self.fire_lost(sink, n, 3);
        }
    }
}

/// A build of the frames' names is followed by at least this many times its duration
/// without one (on the pump's path: at most 1/20 of the engine thread goes to naming).
const NAMES_BUILD_SHARE: u32 = 20;

/// The longest the end of a run waits for image identities still being read.
const IDENTIFY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The identities of live images: on Windows read from this machine's image files (a live
/// session carries no ImageID records); elsewhere images keep what their records give.
fn default_identify() -> Option<names::Identify> {
    #[cfg(windows)]
    {
        crate::symbols::trace::image_identifier().map(names::Identify::new)
    }
    #[cfg(not(windows))]
    {
        None
    }
}

/// Whether a program prints stack frames or symbols: records stacks (`stack()`, `ustack()`,
/// `jstack()`, a stack key), formats addresses as symbols (`sym()`, `mod()`, `usym()`,
/// `umod()`, `uaddr()`), or prints with a `%a`/`%A` conversion.
pub fn prints_frames(p: &crate::ir::Program) -> bool {
    use crate::ir::ActionKind as A;
    let symbol_format = |f: &crate::ir::printf::Format| {
        let b = f.source.as_bytes();
        b.iter().enumerate().any(|(i, &c)| {
            c == b'%'
                && b[i + 1..]
                    .iter()
                    .find(|c| {
                        !matches!(
                            c,
                            b'0'..=b'9'
                                | b'-'
                                | b'+'
                                | b' '
                                | b'#'
                                | b'.'
                                | b'*'
                                | b'?'
                                | b'l'
                                | b'h'
                        )
                    })
                    .is_some_and(|c| matches!(c, b'a' | b'A'))
        })
    };
    crate::vm::stack_use::uses_stacks(p)
        || p.actions().iter().any(|a| match &a.kind {
            A::Sym | A::Mod | A::Usym | A::Umod | A::Uaddr => true,
            A::Printf(f) => symbol_format(f),
            A::Printa {
                format: Some(f), ..
            } => symbol_format(f),
            _ => false,
        })
}

/// What ETW lost, in words: the sessions' counters (EventsLost, RealTimeBuffersLost: how many
/// events and buffers), then the RT_LostEvent records it inserted (how many times it said so
/// in band, by kind), each in its own unit.
fn loss_lines(st: &ControlStatus, notices: [u64; 3]) -> impl Iterator<Item = String> {
    let counted = (st.events_lost > 0 || st.buffers_lost > 0).then(|| {
        format!(
            "ETW lost {} events and {} real-time buffers (the sessions could not keep up)",
            st.events_lost, st.buffers_lost
        )
    });
    let [events, buffers, file] = notices;
    let noticed = (events + buffers + file > 0).then(|| {
        format!(
            "ETW inserted {} loss records (RT_LostEvent: {events} of lost events, {buffers} of \
             lost buffers, {file} of an unwritten log file){}",
            events + buffers + file,
            if counted.is_some() {
                ""
            } else {
                "; how many events each stands for is not known"
            }
        )
    });
    counted.into_iter().chain(noticed)
}

/// How many records [`EtwLiveSource::pump`] takes between looks at the clock.
const DEADLINE_EVERY: u32 = 64;
/// The longest [`EventSource::finish`] spends on what the stopped sessions left queued.
const FINISH_NS: u64 = 2_000_000_000;

impl EtwLiveSource {
    /// Handles one message; false when a session ended.
    fn take(&mut self, msg: LiveMessage, sink: &mut dyn Sink) -> bool {
        match msg {
            LiveMessage::Event(ev) => self.accept(ev, sink),
            LiveMessage::Schema(info) => self.learn_schema(info),
            LiveMessage::Ended(code) => {
                let code = self.context.ended().unwrap_or(code);
                self.end_run(code, sink);
                return false;
            }
        }
        true
    }

    /// Whether a session ended that nobody stopped ([`CallbackContext::ended`], which a full
    /// queue or a panicking callback cannot lose); the end is noted (once) when it did.
    fn ended_now(&mut self, sink: &mut dyn Sink) -> bool {
        match self.context.ended() {
            Some(code) => {
                self.end_run(code, sink);
                true
            }
            None => false,
        }
    }

    /// Notes a session's end (once) and fires what was held for stacks.
    fn end_run(&mut self, code: u32, sink: &mut dyn Sink) {
        if self.ended.is_none() {
            self.session_ended(code);
        }
        // what the time-order window still holds goes before the run ends
        self.flush_ordered(sink);
        self.release(sink, true);
    }
}

impl EtwLiveSource {
    /// Runs the .NET end rundown when the plan has one (`dnet::rundown:*-dcend`), before the
    /// sessions stop, as a PerfView trace has it at its end: the rundown provider is enabled
    /// with the end-rundown keyword, and records are taken until none of the rundown provider
    /// came for [`plan::END_RUNDOWN_QUIET_NS`] (the runtimes log it at once; it arrives
    /// within the flush period), for [`plan::END_RUNDOWN_MAX_NS`] at most. A rundown still
    /// coming then is cut short, and said.
    fn end_rundown(&mut self, sink: &mut dyn Sink) {
        let Some(provider) = self.plan.as_ref().and_then(|p| p.end_rundown.clone()) else {
            return;
        };
        let Some(c) = self.control.as_mut() else {
            return;
        };
        match c.end_rundown(&provider) {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                self.messages.push(format!(
                    "dnet::rundown:*-dcend: the .NET end rundown could not be started: {e}"
                ));
                return;
            }
        }
        let start = sink.now_ns();
        let (mut last, mut records) = (start, 0u64);
        let cut_short = loop {
            if sink.exited() {
                break false;
            }
            let now = self.look_at_clock(sink);
            let quiet = now.saturating_sub(last);
            if quiet >= plan::END_RUNDOWN_QUIET_NS {
                break false;
            }
            if now.saturating_sub(start) >= plan::END_RUNDOWN_MAX_NS {
                break true;
            }
            let wait = (plan::END_RUNDOWN_QUIET_NS - quiet).min(50_000_000);
            match self.rx.recv_timeout(std::time::Duration::from_nanos(wait)) {
                Ok(LiveMessage::Event(ev)) => {
                    if Guid::from(ev.header.provider_id) == crate::providers::etw::dnet::RUNDOWN {
                        last = sink.now_ns();
                        records += 1;
                    }
                    self.accept(ev, sink);
                }
                Ok(m) => {
                    if !self.take(m, sink) {
                        break false;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break false,
            }
        };
        if cut_short {
            self.messages.push(format!(
                "the .NET end rundown was still coming after {} s ({records} records): \
                 dnet::rundown:*-dcend fired for the part that came",
                plan::END_RUNDOWN_MAX_NS / 1_000_000_000
            ));
        }
    }

    /// Fires everything queued now, with no deadline (a replay that drives the source
    /// itself, between batches of records); false when a session ended.
    pub fn drain(&mut self, sink: &mut dyn Sink) -> bool {
        self.look_at_clock(sink);
        while let Ok(msg) = self.rx.try_recv() {
            if !self.take(msg, sink) {
                return false;
            }
        }
        self.check_dropped(sink);
        !self.ended_now(sink)
    }
}

impl EventSource for EtwLiveSource {
    /// Delivers records until `deadline`, also when they never stop coming: the clock is
    /// looked at every [`DEADLINE_EVERY`] records, so that timers (`tick-N`), `exit()`,
    /// commands and a merged target get their turn under any load.
    fn pump(&mut self, deadline: u64, sink: &mut dyn Sink) -> SourceState {
        sink.profile_from_samples();
        // what events print (a `stack()` traced per event), and the console's snapshots,
        // name frames with images at most a second old; a timer's clause gets them current
        // (`name_frames` before timers)
        self.give_names(sink, std::time::Duration::from_secs(1));
        let mut n = 0u32;
        loop {
            if sink.done() {
                return SourceState::Running;
            }
            n = n.wrapping_add(1);
            if n % DEADLINE_EVERY == 1 {
                self.check_dropped(sink);
                if self.ended_now(sink) {
                    return SourceState::Ended(None);
                }
                if self.look_at_clock(sink) >= deadline && n > 1 {
                    // records keep coming: an older one may still wait in the queue, so
                    // only the session's time lets records go (not their wait)
                    self.release_ordered(sink, false);
                    self.release(sink, false);
                    return SourceState::Running;
                }
            }
            let msg = match self.rx.try_recv() {
                Ok(m) => m,
                Err(_) => {
                    // a queue run dry may be a session that ended without room for its
                    // message
                    if self.ended_now(sink) {
                        return SourceState::Ended(None);
                    }
                    let now = self.look_at_clock(sink);
                    if now >= deadline {
                        // the queue is empty: records that waited the window since they were
                        // taken (every older record has been delivered by then: ETW delivers
                        // within the flush period, and the queue keeps order), and records
                        // whose stacks did not come, go after their waits
                        self.release_ordered(sink, true);
                        self.release(sink, false);
                        return SourceState::Running;
                    }
                    let wait = std::time::Duration::from_nanos((deadline - now).min(50_000_000));
                    match self.rx.recv_timeout(wait) {
                        Ok(m) => {
                            self.look_at_clock(sink);
                            m
                        }
                        Err(RecvTimeoutError::Timeout) => continue,
                        Err(RecvTimeoutError::Disconnected) => return SourceState::Ended(None),
                    }
                }
            };
            if !self.take(msg, sink) {
                return SourceState::Ended(None);
            }
        }
    }

    /// After Ctrl-C: the sessions are stopped first (so that nothing more arrives, however
    /// busy the system), then what they had already delivered is fired, until `exit()` or a
    /// bound of [`FINISH_NS`].
    fn finish(&mut self, sink: &mut dyn Sink) {
        self.end_rundown(sink);
        self.stop_sessions();
        let until = self.look_at_clock(sink).saturating_add(FINISH_NS);
        let mut n = 0u32;
        while !sink.exited() {
            n = n.wrapping_add(1);
            if n.is_multiple_of(DEADLINE_EVERY) && self.look_at_clock(sink) >= until {
                break;
            }
            match self.rx.try_recv() {
                Ok(LiveMessage::Ended(_)) | Err(_) => break,
                Ok(m) => {
                    self.take(m, sink);
                }
            }
        }
        self.flush_ordered(sink);
        self.release(sink, true);
        self.check_dropped(sink);
    }

    fn name_frames(&mut self, sink: &mut dyn Sink) {
        self.give_names(sink, std::time::Duration::ZERO);
    }

    fn closing(&mut self, sink: &mut dyn Sink) {
        // END's output names frames with every image the session saw
        if self.frames_printed(sink) {
            self.final_names();
        }
        self.give_names(sink, std::time::Duration::ZERO);
    }

    fn stop(&mut self) {
        self.stop_sessions();
    }

    fn reprogram(&mut self, sink: &mut dyn Sink) -> Option<Result<Vec<String>, String>> {
        Some(self.replan(sink))
    }

    fn symbols(&mut self) -> Option<Box<dyn crate::agg::SymbolResolver + Send>> {
        // handed over once: the resolver follows the rebuilds the pumps make
        if self.names_given.1 {
            return None;
        }
        self.names_given.1 = true;
        self.refresh_names(std::time::Duration::ZERO);
        Some(Box::new(self.names.clone()))
    }

    fn live_status(&mut self) -> Option<LiveStatus> {
        let st = self
            .control
            .as_mut()
            .map(|c| c.status())
            .unwrap_or_default();
        Some(LiveStatus {
            sessions: st.sessions,
            records: self.counts.records,
            // ETW's counters; the in-band notices only where no counter is read (a replay):
            // never the two added
            lost: (st.events_lost + st.buffers_lost).max(self.counts.lost_notices.iter().sum()),
            dropped: self.counts.dropped,
            messages: self.take_messages(),
        })
    }
}

impl Drop for EtwLiveSource {
    fn drop(&mut self) {
        self.stop_sessions();
        // the control goes while the callback's context it points at still lives (fields drop
        // in declaration order, and `context` comes first)
        self.control = None;
    }
}

/// The ETW side of a live run on Windows: the providers the programs name (kernel ones and
/// user providers by name or GUID) and the file to also log to (`-E file.etl` where the file
/// does not exist).
#[derive(Clone, Debug, Default)]
pub struct LiveEtw {
    pub etw: EtwProbes,
    pub log_file: Option<std::path::PathBuf>,
}

impl LiveEtw {
    /// Gives the `syscall` probes the names of the running kernel's calls, read from its image
    /// file `kernel` and its PDB on the symbol path (else its exports), when the programs'
    /// texts name the `syscall` provider or every probe is listed. What the user should know when the
    /// names are missing or partial (said only when the programs name `syscall`).
    pub fn name_kernel_calls(
        &mut self,
        texts: &[String],
        list_all: bool,
        kernel: &std::path::Path,
    ) -> Option<String> {
        let asked = texts.iter().any(|t| t.contains("syscall"));
        if !asked && !list_all {
            return None;
        }
        let symbols = crate::symbols::pdb::SymbolPath::from_env();
        let names = crate::providers::etw::syscall::SyscallNames::of_kernel_image(kernel, &symbols);
        let note = match names.as_ref().and_then(|n| n.live_from_pdb()) {
            Some(true) => None,
            Some(false) => Some(format!(
                "syscall probes name only the calls {} exports: the other names need the \
                 kernel's PDB (ntkrnlmp.pdb) on the symbol path (_NT_SYMBOL_PATH)",
                kernel.display()
            )),
            None => Some(format!(
                "syscall probes have no function names: {} names no call (names need the \
                 kernel's PDB, ntkrnlmp.pdb, on the symbol path, _NT_SYMBOL_PATH)",
                kernel.display()
            )),
        };
        if let Some(n) = names {
            self.etw.set_syscalls(n);
        }
        // `dtx -l` of every probe lists what names there are without a word on stderr, as
        // dtrace -l prints only the list; the note is for a program or listing of syscall
        note.filter(|_| asked)
    }

    /// The user provider names (or GUIDs) the probe descriptions of the programs' texts name.
    pub fn provider_names(texts: &[String]) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for text in texts {
            for name in named_providers_in(text) {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        names
    }

    /// The providers `names` names, with their GUIDs and keywords from the system's provider
    /// `catalog` (then a name it lacks is an error), and with `list_all` every provider of the
    /// catalog (for `dtx -l`).
    pub fn with_catalog(
        names: &[String],
        log_file: Option<std::path::PathBuf>,
        catalog: Option<&crate::etw::catalog::ProviderCatalog>,
        list_all: bool,
    ) -> Result<LiveEtw, String> {
        use crate::etw::catalog::ProviderInfo;
        let mut etw = EtwProbes::new();
        for name in names {
            let known = catalog.and_then(|c| c.find(name));
            match (Guid::parse(name), known) {
                // a GUID stays the provider's name in the program's descriptions
                (Some(guid), k) => {
                    let mut info = ProviderInfo::new(name, guid);
                    if let Some(k) = k {
                        info.keywords = k.keywords.clone();
                    }
                    etw.add_provider(&info);
                }
                (None, Some(k)) => {
                    let mut info = k.clone();
                    info.name = name.clone();
                    etw.add_provider(&info);
                }
                (None, None) if catalog.is_some() => {
                    return Err(format!(
                        "unknown ETW provider '{name}' (not registered on this system)"
                    ))
                }
                (None, None) => etw.add_named(name),
            }
        }
        if list_all {
            for p in catalog.map(|c| c.providers.as_slice()).unwrap_or(&[]) {
                etw.add_provider(p);
            }
        }
        Ok(LiveEtw { etw, log_file })
    }
}

/// What dtx says, before a run starts, of a provider name the system does not register: the
/// session can only enable it by the GUID the name hashes to (EventSource and TraceLogging
/// providers register none), which sees nothing if the name is misspelled, so it is said
/// loudly, with the registered names closest to it.
pub fn unregistered_provider_warning(
    name: &str,
    catalog: Option<&crate::etw::catalog::ProviderCatalog>,
) -> String {
    let guid = crate::etw::provider_guid::event_source_guid(name);
    let mut s = format!(
        "warning: ETW provider '{name}' is not registered on this system: it is enabled by the \
         GUID its name hashes to ({guid}), which sees events only from an EventSource or \
         TraceLogging provider of exactly that name"
    );
    let close = catalog.map(|c| c.close_names(name, 5)).unwrap_or_default();
    if !close.is_empty() {
        s.push_str(&format!("; did you mean: {}?", close.join(", ")));
    }
    s
}

/// Providers that are dtx's own or the kernel's, never a user ETW provider.
const BUILT_IN: &[&str] = &[
    "dtrace", "profile", "tick", "pid", "fpid", "diag", "sched", "proc", "io", "isr", "dpc",
    "syscall", "pf", "fsinfo", "reg", "tcpip", "udpip", "pmc", "dnet", "hwconfig", "lockstat",
    "etw",
];

/// The provider names of the probe descriptions in a D program (`name:::probe`,
/// `name:mod:func:probe`) that may be user ETW providers: names and GUIDs, lower-case, with no
/// glob characters, in order of first appearance.
pub fn named_providers_in(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let is_name = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '{' | '}');
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(i) = rest.find(':') {
            let before = &rest[..i];
            let start = before
                .char_indices()
                .rev()
                .find(|(_, c)| !is_name(*c))
                .map(|(j, c)| j + c.len_utf8())
                .unwrap_or(0);
            let name = before[start..].trim_matches(|c| c == '{' || c == '}');
            // a description has three colons (`a:::b` or `a:b:c:d`); `?:` or `::` in
            // expressions have fewer
            let after = &rest[i..];
            let colons = after
                .chars()
                .take_while(|c| *c != '{' && *c != '/' && !c.is_whitespace() && *c != ',')
                .filter(|c| *c == ':')
                .count();
            // a macro (`pid$target`, `$1`) is part of a provider name that is not ETW's
            let macro_part = before[..start].ends_with('$');
            if colons == 3
                && !name.is_empty()
                && !macro_part
                && !name.starts_with(|c: char| c.is_ascii_digit() && !name.contains('-'))
            {
                let lower = name.to_ascii_lowercase();
                if !plan::is_process_provider(&lower)
                    && !BUILT_IN.contains(&lower.as_str())
                    && !out.contains(&lower)
                {
                    out.push(lower);
                }
            }
            // skip this whole description
            let skip = after
                .find(|c: char| c == '{' || c == '/' || c.is_whitespace() || c == ',')
                .unwrap_or(after.len());
            rest = &after[skip.max(1)..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_resolves_names_and_keywords() {
        use crate::etw::catalog::{ProviderCatalog, ProviderInfo};
        let dns = Guid::parse("1c95126e-7eea-49a9-a3fe-a378b03ddb4d").unwrap();
        let mut info = ProviderInfo::new("Microsoft-Windows-DNS-Client", dns);
        info.add_keyword("DnsQuery", 0x8);
        let catalog = ProviderCatalog {
            providers: vec![info, ProviderInfo::new("Other", Guid::default())],
        };
        let names = vec!["microsoft-windows-dns-client".to_string()];
        let live = LiveEtw::with_catalog(&names, None, Some(&catalog), false).unwrap();
        let p = live.etw.named("microsoft-windows-dns-client").unwrap();
        assert_eq!(p.guid, Some(dns));
        assert_eq!(p.keywords[0].0, "dnsquery");
        assert!(live.etw.named("other").is_none());
        let all = LiveEtw::with_catalog(&names, None, Some(&catalog), true).unwrap();
        assert!(all.etw.named("other").is_some());
        let e = LiveEtw::with_catalog(&["no-such-provider".into()], None, Some(&catalog), false)
            .unwrap_err();
        assert_eq!(
            e,
            "unknown ETW provider 'no-such-provider' (not registered on this system)"
        );
        // without a catalog a name is taken as it is (resolved when the session starts)
        let live = LiveEtw::with_catalog(&["x-y".into()], None, None, false).unwrap();
        assert!(live.etw.named("x-y").is_some());
    }

    #[test]
    fn live_fix_an_unregistered_provider_is_said_with_close_names() {
        use crate::etw::catalog::{ProviderCatalog, ProviderInfo};
        let catalog = ProviderCatalog {
            providers: vec![ProviderInfo::new(
                "Microsoft-Windows-DNS-Client",
                Guid::default(),
            )],
        };
        let w = unregistered_provider_warning("microsoft-windows-dns-clinet", Some(&catalog));
        assert!(
            w.starts_with("warning: ETW provider 'microsoft-windows-dns-clinet' is not registered"),
            "{w}"
        );
        assert!(
            w.ends_with("did you mean: Microsoft-Windows-DNS-Client?"),
            "{w}"
        );
        let g = crate::etw::provider_guid::event_source_guid("microsoft-windows-dns-clinet");
        assert!(w.contains(&g.to_string()), "{w}");
        let w = unregistered_provider_warning("contoso-widgets", Some(&catalog));
        assert!(!w.contains("did you mean"), "{w}");
    }

    #[test]
    fn provider_names_come_from_probe_descriptions() {
        let d = "microsoft-windows-dns-client:::events, sched:::on-cpu\n\
                 {1c95126e-7eea-49a9-a3fe-a378b03ddb4d}:::events /pid == 4/ { x = a ? b : c; }\n\
                 Microsoft-Windows-Kernel-Process:mod:func:name { @[execname] = count(); }\n\
                 // other-provider:::events\n\
                 profile:::tick-1s { exit(0); }\n\
                 pid$target:a.out:main:entry, pid123::f:return, fpid$1:::entry {}";
        assert_eq!(
            named_providers_in(d),
            vec![
                "microsoft-windows-dns-client",
                "1c95126e-7eea-49a9-a3fe-a378b03ddb4d",
                "microsoft-windows-kernel-process",
            ]
        );
    }
}
