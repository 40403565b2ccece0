//! The CLR's method events of one traced .NET process, live, platform-neutral: what the `pid`
//! provider's debugger loop arms managed probes from on Windows. Two ways in, one method table
//! ([`crate::providers::etw::dnet::ClrMethodFeed`]):
//!
//! * an ETW session of dtx's own on the target's pid (`windows::ClrMethodSession`), read with
//!   [`clr_record_callback`] on its ProcessTrace thread: the runtime's MethodLoadVerbose,
//!   ModuleLoad and R2RGetEntryPoint, and the rundown's MethodDCStartVerbose and
//!   ModuleDCStart for the code there before the session;
//! * the same events seen in the target as it writes them ([`event_write`]): the debugger loop
//!   has a breakpoint on ntdll's `EtwEventWrite`/`EtwEventWriteTransfer` (what advapi32's
//!   `EventWrite`/`EventWriteTransfer`, which CoreCLR's generated ETW code calls, forward to).
//!   The runtime writes MethodLoadVerbose when the JIT has finished a method and before the code
//!   is published, so the probe is armed before the first call; the session alone would arm it
//!   a buffer flush later.
//!
//! Both deliver the same records, and the table keeps a code version once.

use std::sync::Mutex;

use super::raw::{flag, LiveEvent, RawEventDescriptor, RawEventHeader, RawEventRecord};
use crate::etw::decode::Decoder;
use crate::etw::reader::logfile::TimeBase;
use crate::etw::record::EventRecord;
use crate::providers::etw::dnet::{self, ClrMethodFeed};
use crate::symbols::managed::ManagedMethod;

/// What the callback and the debugger loop share: the decoder of the runtime's events and the
/// method table they fill, for one process.
pub struct ClrContext {
    pid: u32,
    time: TimeBase,
    inner: Mutex<Inner>,
}

struct Inner {
    decoder: Decoder,
    feed: ClrMethodFeed,
    /// Records of the runtime's providers seen (both ways in).
    records: u64,
    /// Rundowns ended: completion events (DCStartComplete or DCEndComplete) seen.
    rundowns_complete: u32,
}

impl ClrContext {
    /// A context for process `pid`; `time` converts the session's timestamps.
    pub fn new(pid: u32, time: TimeBase) -> ClrContext {
        let mut decoder = Decoder::new();
        decoder.load_manifest_str(dnet::MANIFEST);
        ClrContext {
            pid,
            time,
            inner: Mutex::new(Inner {
                decoder,
                feed: ClrMethodFeed::default(),
                records: 0,
                rundowns_complete: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes what a record of the runtime's providers says of methods and modules (records of
    /// other processes and providers are left).
    pub fn observe(&self, ev: &EventRecord<'_>) {
        if ev.pid != self.pid || !dnet::is_dotnet(ev) {
            return;
        }
        let mut inner = self.lock();
        let Inner {
            decoder,
            feed,
            records,
            rundowns_complete,
        } = &mut *inner;
        *records += 1;
        if dnet::is_rundown_complete(ev) {
            *rundowns_complete += 1;
        }
        let dec = decoder.decode(ev);
        feed.observe(ev, &dec);
    }

    /// [`ClrContext::observe`] of a record copied out of a session.
    pub fn observe_live(&self, ev: &LiveEvent) {
        self.observe(&ev.record(&self.time));
    }

    /// The methods of the process that became known since the last call (see
    /// [`ClrMethodFeed::take_ready`]; `all` at the end of a run).
    pub fn take_ready(&self, all: bool) -> Vec<ManagedMethod> {
        self.lock()
            .feed
            .take_ready(all)
            .into_iter()
            .filter(|(pid, _)| *pid == self.pid)
            .map(|(_, m)| m)
            .collect()
    }

    /// The process whose events this context takes.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Records of the runtime's providers seen so far.
    pub fn records(&self) -> u64 {
        self.lock().records
    }

    /// How many of the process's rundowns have ended (their DCStartComplete or
    /// DCEndComplete came): every method with code a rundown listed is in the table once its
    /// completion event is counted here.
    pub fn rundowns_complete(&self) -> u32 {
        self.lock().rundowns_complete
    }
}

/// How a wait for a rundown ended without its completion event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RundownUnfinished {
    /// The wait's time ran out.
    TimedOut,
    /// The run was interrupted (Ctrl-C) or the source ended.
    Stopped,
}

/// Waits until `cx` has seen one more of its process's rundowns end than the `before` it had
/// ([`ClrContext::rundowns_complete`]), looking every `poll`, for at most `wait`; `stop()`
/// ends the wait early (an interrupt, the session's reader gone). The methods are in `cx`
/// when this returns `Ok`.
pub fn wait_for_rundown(
    cx: &ClrContext,
    before: u32,
    wait: std::time::Duration,
    poll: std::time::Duration,
    stop: &dyn Fn() -> bool,
) -> Result<(), RundownUnfinished> {
    let until = std::time::Instant::now() + wait;
    loop {
        if cx.rundowns_complete() > before {
            return Ok(());
        }
        if stop() {
            return Err(RundownUnfinished::Stopped);
        }
        let now = std::time::Instant::now();
        if now >= until {
            return Err(RundownUnfinished::TimedOut);
        }
        std::thread::sleep(poll.min(until - now));
    }
}

/// How long dtx waits for a process's CLR rundown before it gives up (a runtime lists
/// tens of thousands of methods in well under a second; a process that is hung, or whose
/// runtime does not answer the rundown provider, is said so after this).
pub const RUNDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// What dtx says when a rundown did not end: `pid`'s methods cannot be listed, and why.
pub fn rundown_unfinished_words(pid: u32, why: RundownUnfinished) -> String {
    match why {
        RundownUnfinished::TimedOut => format!(
            "the .NET runtime of pid {pid} did not finish its method rundown (no DCStartComplete event) within {} s, so its methods cannot be listed",
            RUNDOWN_WAIT.as_secs()
        ),
        RundownUnfinished::Stopped => format!(
            "the method rundown of pid {pid} was interrupted, so its methods cannot be listed"
        ),
    }
}

/// What ETW lost in a CLR session of dtx's own, in words, or None when it lost nothing:
/// `lost` is the (EventsLost, RealTimeBuffersLost) ControlTrace STOP gave. Said as dtrace
/// says its drops (a count and what it costs), on stderr, before the run goes on.
pub fn clr_loss_words(what: &str, pid: u32, lost: (u64, u64)) -> Option<String> {
    let (events, buffers) = lost;
    (events > 0 || buffers > 0).then(|| {
        format!(
            "ETW lost {events} events and {buffers} real-time buffers of the {what} of pid {pid}: the methods they named are missing (probes on them are not created, and \
             their frames are not named)"
        )
    })
}

/// How a synchronous rundown ended, with what its session lost (`lost`, as
/// [`clr_loss_words`] takes it): Ok with a warning to print when events were lost but the
/// rundown's end came, else why its methods cannot be listed. A rundown whose end did not
/// come while ETW lost events is not said to be unfinished: its DCStartComplete may be among
/// what was lost.
pub fn rundown_outcome(
    pid: u32,
    waited: Result<(), RundownUnfinished>,
    lost: (u64, u64),
) -> Result<Option<String>, String> {
    let loss = clr_loss_words("method rundown", pid, lost);
    match (waited, loss) {
        (Ok(()), loss) => Ok(loss),
        (Err(RundownUnfinished::TimedOut), Some(_)) => Err(format!(
            "ETW lost {} events and {} real-time buffers of the method rundown of pid {pid} \
             (its end, DCStartComplete, may be among them), so its methods cannot be listed",
            lost.0, lost.1
        )),
        (Err(why), _) => Err(rundown_unfinished_words(pid, why)),
    }
}

/// The EventRecordCallback of a CLR method session: `user_context` is the session's
/// [`ClrContext`]. Never unwinds into ETW.
///
/// # Safety
/// `rec` is null or a record as ETW hands it to the callback, whose `user_context` is null or
/// a live [`ClrContext`].
pub unsafe extern "system" fn clr_record_callback(rec: *mut RawEventRecord) {
    // SAFETY: as the caller vouches
    let Some(rec) = (unsafe { rec.as_ref() }) else {
        return;
    };
    // SAFETY: as the caller vouches
    let Some(cx) = (unsafe { (rec.user_context as *const ClrContext).as_ref() }) else {
        return;
    };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: inside the callback ETW's record is whole (LiveEvent::copy_from)
        let ev = unsafe { LiveEvent::copy_from(rec) };
        cx.observe_live(&ev);
    }));
}

/// Passes a recorded event through [`clr_record_callback`] as a session would (the replay
/// tests).
pub fn pass_to_clr_callback(ev: &LiveEvent, context: &ClrContext) {
    let mut parts =
        super::raw::RawRecordParts::new(ev, context as *const ClrContext as *mut std::ffi::c_void);
    let mut rec = parts.record();
    // SAFETY: `rec` points into `ev` and `parts`, alive for the call, and its context is
    // `context`, borrowed for the call
    unsafe { clr_record_callback(&mut rec) };
}

/// Which of ntdll's event-writing functions a breakpoint is on: their arguments differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventWriteFn {
    /// `EtwEventWrite(RegHandle, EventDescriptor, UserDataCount, UserData)`.
    Write,
    /// `EtwEventWriteTransfer(RegHandle, EventDescriptor, ActivityId, RelatedActivityId,
    /// UserDataCount, UserData)`.
    WriteTransfer,
}

impl EventWriteFn {
    /// ntdll's export of each (Microsoft Learn: EventWrite, EventWriteTransfer, whose advapi32
    /// exports forward to these).
    pub const ALL: [(&'static str, EventWriteFn); 2] = [
        ("EtwEventWrite", EventWriteFn::Write),
        ("EtwEventWriteTransfer", EventWriteFn::WriteTransfer),
    ];
}

/// The size of `EVENT_DATA_DESCRIPTOR` (Ptr u64, Size u32, Reserved u32).
const DATA_DESCRIPTOR: usize = 16;
/// More data descriptors than an event of the runtime has (MethodLoadVerbose_V2 has eleven).
const MAX_DESCRIPTORS: u64 = 64;
/// A payload larger than this is not a method or module event.
const MAX_PAYLOAD: u64 = 64 * 1024;

/// The tasks of the runtime's method and module events (dotnet/runtime's ClrEtwAll.man,
/// PerfView's ClrTraceEventParser: CLRMethod 9 and CLRLoader 10 in the runtime provider,
/// CLRMethodRundown 1 and CLRLoaderRundown 2 in the rundown provider): an event written in the
/// target carries no provider GUID, its descriptor's task tells whose it is.
pub fn provider_of_task(id: u16, task: u16) -> Option<crate::etw::record::Guid> {
    match (id, task) {
        (143 | 152 | dnet::R2R_GET_ENTRY_POINT, 9 | 10) => Some(dnet::RUNTIME),
        (143 | 144 | 153 | 154, 1 | 2) => Some(dnet::RUNDOWN),
        _ => None,
    }
}

/// The event a target thread stopped at the entry of ntdll's `which` is writing, when it is
/// one of the runtime's method or module events: its descriptor and payload (the data
/// descriptors' bytes one after the other, as ETW stores them), read through `read` (the
/// target's memory). `args` are the first four integer arguments (rcx rdx r8 r9) and `rsp` the
/// stack pointer at the entry (the fifth and sixth are at rsp+0x28 and rsp+0x30).
pub fn event_write(
    which: EventWriteFn,
    args: [u64; 4],
    rsp: u64,
    read: &dyn Fn(u64, &mut [u8]) -> bool,
) -> Option<(RawEventDescriptor, Vec<u8>)> {
    let mut d = [0u8; 16];
    if !read(args[1], &mut d) {
        return None;
    }
    let u16_at = |o: usize| u16::from_le_bytes([d[o], d[o + 1]]);
    let desc = RawEventDescriptor {
        id: u16_at(0),
        version: d[2],
        channel: d[3],
        level: d[4],
        opcode: d[5],
        task: u16_at(6),
        keyword: u64::from_le_bytes(d[8..16].try_into().ok()?),
    };
    provider_of_task(desc.id, desc.task)?;
    let (count, data) = match which {
        EventWriteFn::Write => (args[2] & 0xffff_ffff, args[3]),
        EventWriteFn::WriteTransfer => {
            let mut b = [0u8; 16];
            if !read(rsp + 0x28, &mut b) {
                return None;
            }
            (
                u32::from_le_bytes(b[0..4].try_into().ok()?) as u64,
                u64::from_le_bytes(b[8..16].try_into().ok()?),
            )
        }
    };
    if count > MAX_DESCRIPTORS {
        return None;
    }
    let mut descs = vec![0u8; count as usize * DATA_DESCRIPTOR];
    if count > 0 && !read(data, &mut descs) {
        return None;
    }
    let mut payload = Vec::new();
    for c in descs.chunks_exact(DATA_DESCRIPTOR) {
        let ptr = u64::from_le_bytes(c[0..8].try_into().ok()?);
        let size = u32::from_le_bytes(c[8..12].try_into().ok()?) as u64;
        // Type (the low byte of Reserved): 0 for event data; TraceLogging's metadata blobs
        // (1, 2) are not part of the payload
        if c[12] != 0 {
            continue;
        }
        if payload.len() as u64 + size > MAX_PAYLOAD {
            return None;
        }
        let at = payload.len();
        payload.resize(at + size as usize, 0);
        if size > 0 && !read(ptr, &mut payload[at..]) {
            return None;
        }
    }
    Some((desc, payload))
}

/// The record of an event [`event_write`] read, as a session of process `pid` (thread `tid`)
/// would deliver it.
pub fn written_event(
    desc: RawEventDescriptor,
    payload: Vec<u8>,
    pid: u32,
    tid: u32,
) -> Option<LiveEvent> {
    let provider = provider_of_task(desc.id, desc.task)?;
    Some(LiveEvent {
        header: RawEventHeader {
            size: 80,
            flags: flag::HEADER_64_BIT,
            thread_id: tid,
            process_id: pid,
            provider_id: provider.into(),
            descriptor: desc,
            ..RawEventHeader::default()
        },
        cpu: 0,
        payload,
        extended: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Target memory of a few (address, bytes) pieces.
    fn reader(pieces: Vec<(u64, Vec<u8>)>) -> impl Fn(u64, &mut [u8]) -> bool {
        move |addr, buf| {
            pieces.iter().any(|(at, b)| {
                let ok = addr >= *at && addr + buf.len() as u64 <= at + b.len() as u64;
                if ok {
                    let o = (addr - at) as usize;
                    buf.copy_from_slice(&b[o..o + buf.len()]);
                }
                ok
            })
        }
    }

    fn descriptor(id: u16, task: u16) -> Vec<u8> {
        let mut d = id.to_le_bytes().to_vec();
        d.extend([2, 0, 5, 37]);
        d.extend(task.to_le_bytes());
        d.extend(0x30u64.to_le_bytes());
        d
    }

    fn data(pieces: &[(u64, u32, u8)]) -> Vec<u8> {
        let mut v = Vec::new();
        for (ptr, size, ty) in pieces {
            v.extend(ptr.to_le_bytes());
            v.extend(size.to_le_bytes());
            v.extend([*ty, 0, 0, 0]);
        }
        v
    }

    #[test]
    fn event_write_reads_the_descriptors_of_either_function() {
        let mem = vec![
            (0x100, descriptor(143, 9)),
            (0x200, data(&[(0x400, 4, 0), (0x500, 3, 2), (0x600, 2, 0)])),
            (0x400, vec![1, 2, 3, 4]),
            (0x500, vec![9, 9, 9]),
            (0x600, vec![5, 6]),
        ];
        let read = reader(mem.clone());
        // EtwEventWrite: count in r8, data in r9; the metadata piece (type 2) is left out
        let (d, p) = event_write(EventWriteFn::Write, [0, 0x100, 3, 0x200], 0, &read).unwrap();
        assert_eq!((d.id, d.task, d.opcode, d.level), (143, 9, 37, 5));
        assert_eq!(p, [1, 2, 3, 4, 5, 6]);
        // EtwEventWriteTransfer: count and data on the stack above the home space
        let mut stack = vec![0u8; 0x38];
        stack[0x28] = 3;
        stack[0x30..0x38].copy_from_slice(&0x200u64.to_le_bytes());
        let mut with_stack = mem;
        with_stack.push((0x800, stack));
        let read = reader(with_stack);
        let (_, p2) =
            event_write(EventWriteFn::WriteTransfer, [0, 0x100, 0, 0], 0x800, &read).unwrap();
        assert_eq!(p2, p);
        let ev = written_event(d, p, 7, 8).unwrap();
        assert_eq!(
            crate::etw::record::Guid::from(ev.header.provider_id),
            dnet::RUNTIME
        );
        assert_eq!((ev.header.process_id, ev.header.thread_id), (7, 8));
    }

    #[test]
    fn event_write_leaves_other_events_and_bad_memory() {
        // another provider's event 143 (task 0), a GC event of the runtime
        for (id, task) in [(143, 0), (1, 1), (144, 9)] {
            let read = reader(vec![(0x100, descriptor(id, task)), (0x200, data(&[]))]);
            assert!(event_write(EventWriteFn::Write, [0, 0x100, 0, 0x200], 0, &read).is_none());
        }
        assert_eq!(provider_of_task(144, 1), Some(dnet::RUNDOWN));
        assert_eq!(provider_of_task(159, 9), Some(dnet::RUNTIME));
        // unreadable data, too many descriptors
        let read = reader(vec![(0x100, descriptor(143, 9))]);
        assert!(event_write(EventWriteFn::Write, [0, 0x100, 1, 0x200], 0, &read).is_none());
        assert!(event_write(EventWriteFn::Write, [0, 0x100, 1000, 0x200], 0, &read).is_none());
        assert!(event_write(EventWriteFn::Write, [0, 0x999, 0, 0], 0, &read).is_none());
    }

    /// Issue 42, finding 10: what the rundown sessions lost (ControlTrace STOP's counts) was
    /// thrown away, so a rundown missing methods passed for a whole one, and one whose
    /// DCStartComplete was lost was said not to have finished.
    #[test]
    fn win3_10_a_rundown_says_what_etw_lost_in_it() {
        // nothing lost: nothing said, and the two unfinished cases keep their words
        assert_eq!(rundown_outcome(7, Ok(()), (0, 0)), Ok(None));
        assert_eq!(
            rundown_outcome(7, Err(RundownUnfinished::TimedOut), (0, 0)),
            Err(rundown_unfinished_words(7, RundownUnfinished::TimedOut))
        );
        assert_eq!(
            rundown_outcome(7, Err(RundownUnfinished::Stopped), (3, 0)),
            Err(rundown_unfinished_words(7, RundownUnfinished::Stopped))
        );
        // a finished rundown that lost events: it goes on, and says how many and what it costs
        let w = rundown_outcome(7, Ok(()), (12, 1))
            .unwrap()
            .expect("the loss is said");
        assert!(w.contains("lost 12 events and 1 real-time buffers"), "{w}");
        assert!(w.contains("pid 7") && w.contains("missing"), "{w}");
        // an end that did not come while events were lost: not "did not finish"
        let e = rundown_outcome(7, Err(RundownUnfinished::TimedOut), (0, 2)).unwrap_err();
        assert!(!e.contains("did not finish"), "{e}");
        assert!(e.contains("lost 0 events and 2 real-time buffers"), "{e}");
        assert!(e.contains("DCStartComplete"), "{e}");
        // the method session of a -p target says its loss the same way
        assert_eq!(clr_loss_words("method events", 9, (0, 0)), None);
        let m = clr_loss_words("method events", 9, (4, 0)).unwrap();
        assert!(
            m.contains("lost 4 events") && m.contains("method events of pid 9"),
            "{m}"
        );
    }
}
