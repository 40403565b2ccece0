//! The live ETW source's end of a run, on any OS: a session that ends while the queue is full
//! or after the callback panicked still ends the run with its reason, a session another
//! program stopped (ProcessTrace's 4201) says so, and the loss report keeps ETW's counters
//! apart from its in-band loss records. Records go through the very callback a Windows session
//! registers (`pass_to_callback`).

use std::io::Write;
use std::sync::{Arc, Mutex};

use dtx::engine::clock::LiveClock;
use dtx::engine::consumer::{Consumer, ConsumerOptions};
use dtx::engine::{Engine, EventSource, SourceState};
use dtx::lang::options::DOptions;
use dtx::probes::Catalog;
use dtx::providers::etw::EtwProbes;
use dtx::sources::etw_live::plan::SessionPlan;
use dtx::sources::etw_live::raw::{LiveEvent, RawEventHeader};
use dtx::sources::etw_live::{
    pass_to_callback, CallbackContext, ControlStatus, EtwLiveSource, SessionControl, RT_LOST_EVENT,
};
use dtx::tui::compile::compile_text;
use dtx::vm::VmOptions;

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn engine(script: &str, catalog: &Catalog) -> Engine {
    let spec = compile_text(script, "life.d", catalog).expect("script compiles");
    let opts = DOptions::new();
    let consumer = Consumer::new(
        Box::new(Shared::default()),
        ConsumerOptions::from_options(&opts, "dtx", true, false),
    );
    Engine::new(
        vec![("life.d".into(), spec.program)],
        VmOptions::from_options(&spec.options),
        catalog,
        Box::new(LiveClock::new()),
        consumer,
    )
}

/// A record of no provider the engine knows (a manifest event: no classic header flag).
fn plain_record() -> LiveEvent {
    LiveEvent {
        header: RawEventHeader::default(),
        cpu: 0,
        payload: Vec::new(),
        extended: Default::default(),
    }
}

/// The source's callback context (what a session's ProcessTrace thread reaches).
fn context(live: &EtwLiveSource) -> &CallbackContext {
    // SAFETY: context_ptr is the source's boxed context, alive as long as `live`
    unsafe { &*(live.context_ptr() as *const CallbackContext) }
}

/// Pumps until the source ends (at most a few seconds), returning whether it ended.
fn pump_to_end(live: &mut EtwLiveSource, e: &mut Engine) -> bool {
    for _ in 0..100 {
        let deadline = e.now_ns() + 20_000_000;
        if let SourceState::Ended(_) = live.pump(deadline, e) {
            return true;
        }
    }
    false
}

/// A source over a queue of `capacity` records, with the queue filled.
fn full_source(capacity: usize, e: &mut Engine) -> EtwLiveSource {
    let (context, rx) = CallbackContext::channel(capacity);
    let live = EtwLiveSource::new(context, rx, EtwProbes::new(), Default::default(), false);
    e.begin(None);
    let ctx = live.context_ptr();
    for _ in 0..capacity {
        // SAFETY: ctx is the live source's context
        unsafe { pass_to_callback(&plain_record(), ctx) };
    }
    live
}

#[test]
fn live_fix_end_survives_a_full_queue() {
    let catalog = dtx::providers::etw_catalog(&EtwProbes::new());
    let mut e = engine("tick-1h { exit(0); }", &catalog);
    let mut live = full_source(4, &mut e);
    // the session's ProcessTrace returns (stopped from outside) with no room for `Ended`
    context(&live).end(0);
    assert_eq!(context(&live).ended(), Some(0));
    assert!(pump_to_end(&mut live, &mut e), "the run went on silently");
    assert_eq!(live.ended(), Some(0));
    // the run's end (Engine::run_live) delivers what was queued before the end
    live.finish(&mut e);
    assert_eq!(
        live.counts.records, 4,
        "what was queued before the end is delivered"
    );
    let report = live.report("dtx");
    assert_eq!(
        report,
        vec!["dtx: an ETW session of this run was stopped by another program"]
    );
}

#[test]
fn live_fix_instance_not_found_is_stopped_by_another_program() {
    let catalog = dtx::providers::etw_catalog(&EtwProbes::new());
    let mut e = engine("tick-1h { exit(0); }", &catalog);
    let mut live = full_source(2, &mut e);
    // ERROR_WMI_INSTANCE_NOT_FOUND: what ProcessTrace may return when the session was stopped
    context(&live).end(4201);
    // a later end (another session's) does not replace the first
    context(&live).end(5);
    assert!(pump_to_end(&mut live, &mut e));
    let report = live.report("dtx");
    assert_eq!(
        report,
        vec!["dtx: an ETW session of this run was stopped by another program"]
    );
    // any other code is a failure, with its number
    let mut e = engine("tick-1h { exit(0); }", &catalog);
    let mut live = full_source(2, &mut e);
    context(&live).end(6);
    assert!(pump_to_end(&mut live, &mut e));
    assert_eq!(
        live.report("dtx"),
        vec!["dtx: reading the ETW session failed (ProcessTrace error 6)"]
    );
}

#[test]
fn live_fix_end_survives_a_callback_panic_and_the_console_is_told() {
    let catalog = dtx::providers::etw_catalog(&EtwProbes::new());
    let mut e = engine("tick-1h { exit(0); }", &catalog);
    let (cx, rx) = CallbackContext::channel(1);
    // the schema lookup runs inside the callback: make it panic on the first manifest event
    // (and see that a panic hook can tell the panic is the callback's, caught: the console's
    // hook then keeps its screen)
    let caught = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = caught.clone();
    let cx = cx.with_schema_lookup(Box::new(move |_| {
        seen.store(
            dtx::sources::etw_live::panic_is_caught(),
            std::sync::atomic::Ordering::SeqCst,
        );
        panic!("lookup failed")
    }));
    let mut live = EtwLiveSource::new(cx, rx, EtwProbes::new(), Default::default(), false);
    e.begin(None);
    let ctx = live.context_ptr();
    // a TraceLogging-free manifest record fills the queue only after the lookup: fill it with
    // a classic record (no lookup), then the panicking one finds no room for `Ended`
    let mut classic = plain_record();
    classic.header.flags = dtx::sources::etw_live::raw::flag::CLASSIC_HEADER;
    // SAFETY: ctx is the live source's context
    unsafe { pass_to_callback(&classic, ctx) };
    // SAFETY: as above
    unsafe { pass_to_callback(&plain_record(), ctx) };
    assert_eq!(
        context(&live).ended(),
        Some(dtx::sources::etw_live::ENDED_BY_PANIC)
    );
    assert!(caught.load(std::sync::atomic::Ordering::SeqCst));
    assert!(
        !dtx::sources::etw_live::panic_is_caught(),
        "only inside the callback"
    );
    assert!(pump_to_end(&mut live, &mut e), "the run went on silently");
    let report = live.report("dtx");
    assert_eq!(report.len(), 1, "{report:?}");
    assert!(
        report[0].contains("internal error in the event callback"),
        "{report:?}"
    );
}

/// A control whose sessions report ETW's loss counters.
struct Counting(ControlStatus);

impl SessionControl for Counting {
    fn apply(&mut self, _: &SessionPlan, _: *mut std::ffi::c_void) -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }
    fn stop(&mut self) {}
    fn status(&mut self) -> ControlStatus {
        self.0.clone()
    }
}

/// A source that took `n` RT_LostEvent records of each kind (events, buffers, log file).
fn with_loss_records(control: Option<Counting>, n: [u32; 3]) -> EtwLiveSource {
    let catalog = dtx::providers::etw_catalog(&EtwProbes::new());
    let mut e = engine("tick-1h { exit(0); }", &catalog);
    let (context, rx) = CallbackContext::channel(64);
    let mut live = EtwLiveSource::new(context, rx, EtwProbes::new(), Default::default(), false);
    if let Some(c) = control {
        live = live.with_control(Box::new(c));
    }
    e.begin(None);
    let ctx = live.context_ptr();
    for (kind, count) in n.iter().enumerate() {
        let mut header = RawEventHeader {
            flags: 0x0040,
            provider_id: RT_LOST_EVENT.into(),
            ..Default::default()
        };
        header.descriptor.opcode = 32 + kind as u8;
        let rec = LiveEvent {
            header,
            ..plain_record()
        };
        for _ in 0..*count {
            // SAFETY: ctx is the live source's context
            unsafe { pass_to_callback(&rec, ctx) };
        }
    }
    assert!(live.drain(&mut e));
    live
}

#[test]
fn live_fix_loss_report_keeps_records_apart_from_counts() {
    // ETW's counters say 100 events and 2 buffers; it inserted 3 + 1 loss records
    let counting = Counting(ControlStatus {
        sessions: vec!["dtx-kernel-1-2".into()],
        events_lost: 100,
        buffers_lost: 2,
    });
    let mut live = with_loss_records(Some(counting), [3, 1, 0]);
    assert_eq!(live.counts.lost_notices, [3, 1, 0]);
    let report = live.report("dtx");
    assert_eq!(
        report,
        vec![
            "dtx: ETW lost 100 events and 2 real-time buffers (the sessions could not keep up)",
            "dtx: ETW inserted 4 loss records (RT_LostEvent: 3 of lost events, 1 of lost \
             buffers, 0 of an unwritten log file)",
        ]
    );
    let status = live.live_status().unwrap();
    assert_eq!(
        status.lost, 102,
        "the counters, not the counters plus the records"
    );
    // without counters (a replay): the records alone, said to be records
    let mut live = with_loss_records(None, [2, 0, 1]);
    let report = live.report("dtx");
    assert_eq!(
        report,
        vec![
            "dtx: ETW inserted 3 loss records (RT_LostEvent: 2 of lost events, 0 of lost \
             buffers, 1 of an unwritten log file); how many events each stands for is not known"
        ]
    );
    assert_eq!(live.live_status().unwrap().lost, 3);
}
