//! The live ETW path replayed from real traces: every record of a `.etl` file is rebuilt as the
//! `EVENT_RECORD` a live session would hand over (classic kernel records with their class GUID
//! and the classic-header flag, EVENT_HEADER records with their extended items), passed through
//! the very callback the Windows session registers (`event_record_callback`), and pumped into
//! the engine by the live source. The output must equal what `-E file.etl` prints for the same
//! script. Runs on Linux and under Wine; skips when `../shared/etl` is absent.

use crate::support::etl;
use crate::support::stacks;
use etl::{shared, trace};
use stacks::{fold, folded_frame, snapshot_frames, stack_entries};

use std::io::Write;
use std::sync::{Arc, Mutex};

use dtx::engine::clock::LiveClock;
use dtx::engine::consumer::{Consumer, ConsumerOptions};
use dtx::engine::{Engine, EventSource};
use dtx::lang::options::DOptions;
use dtx::probes::Catalog;
use dtx::providers::etw::EtwProbes;
use dtx::sources::etl::TraceSource;
use dtx::sources::etw_live::raw::LiveEvent;
use dtx::sources::etw_live::{pass_to_callback, CallbackContext, EtwLiveSource};
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

fn engine(script: &str, catalog: &Catalog, out: &Shared) -> Engine {
    let spec = compile_text(script, "replay.d", catalog).expect("script compiles");
    let opts = DOptions::new();
    let consumer = Consumer::new(
        Box::new(out.clone()),
        ConsumerOptions::from_options(&opts, "dtx", true, false),
    );
    Engine::new(
        vec![("replay.d".into(), spec.program)],
        VmOptions::from_options(&spec.options),
        catalog,
        Box::new(LiveClock::new()),
        consumer,
    )
}

/// Every record of `src` through the live callback into `e` (which has begun), as a session
/// delivers them, pumped in batches; `no_metadata` leaves the EventMetadata records out. The
/// live source is returned before it finishes.
fn replay_live(
    e: &mut Engine,
    src: &TraceSource,
    etw: &EtwProbes,
    (context, rx): (
        Box<CallbackContext>,
        std::sync::mpsc::Receiver<dtx::sources::etw_live::LiveMessage>,
    ),
    stacks: bool,
    no_metadata: bool,
) -> EtwLiveSource {
    // the session's plan says which kernel records get stack walks
    let plan = dtx::sources::etw_live::plan::SessionPlan::for_engine(e, etw);
    let mut live = EtwLiveSource::new(context, rx, etw.clone(), *src.file.time_base(), stacks)
        .with_stack_events(&plan.stack_events);
    let ctx = live.context_ptr();
    let mut batch = 0;
    let mut events = src.file.events();
    while let Some(r) = events.next_event() {
        let Ok(ev) = r else { continue };
        if no_metadata && ev.provider == dtx::etw::decode::kernel::EVENT_METADATA {
            continue;
        }
        // SAFETY: ctx is the source's, alive for the call
        unsafe { pass_to_callback(&LiveEvent::from_record(&ev), ctx) };
        batch += 1;
        if batch == 2048 {
            batch = 0;
            live.drain(e);
        }
    }
    live.drain(e);
    live
}

/// (output of the `-E` path, output of the live path, records replayed, records dropped).
/// With `tdh`, the live replay leaves out the trace's EventMetadata records
/// (a live session has none) and the callback's schema lookup answers with their blobs, as
/// TdhGetEventInformation does on Windows.
fn both_paths_with(file: &str, script: &str, tdh: bool) -> (String, String, u64, u64) {
    let mut etw = EtwProbes::new();
    let mut src = TraceSource::open(file).unwrap();
    src.scan_providers(&mut etw);
    let catalog = dtx::providers::etw_catalog(&etw);

    // -E file.etl
    let file_out = Shared::default();
    let mut e = engine(script, &catalog, &file_out);
    let mut walk = TraceSource::open(file).unwrap();
    // a live session knows a thread from its records alone, not from the file's later ones
    walk.learn_threads_as_they_come();
    let stacks = e
        .runs
        .iter()
        .any(|r| dtx::engine::uses_stacks(&r.vm.program));
    if stacks {
        walk.collect_stacks();
    }
    e.run_trace(&mut walk, &etw);

    // live: the records as a session delivers them, through the session's callback
    let live_out = Shared::default();
    let mut e = engine(script, &catalog, &live_out);
    let (mut context, rx) = CallbackContext::channel(4096);
    let metadata = dtx::etw::decode::kernel::EVENT_METADATA;
    let lookups = Arc::new(std::sync::atomic::AtomicU64::new(0));
    if tdh {
        use dtx::etw::decode::tdh;
        // what TDH knows: each event's TRACE_EVENT_INFO, each provider's value maps by name
        let mut infos = std::collections::HashMap::new();
        let mut maps = std::collections::HashMap::new();
        let mut events = src.file.events();
        while let Some(r) = events.next_event() {
            let Ok(ev) = r else { continue };
            if ev.provider == metadata && ev.opcode == 32 {
                if let Some(info) = tdh::parse_trace_event_info(ev.payload) {
                    infos.insert(info.key, (ev.payload.to_vec(), info.schema));
                }
            }
            if ev.provider == metadata && ev.opcode == 33 {
                if let Some((provider, name, _)) = tdh::parse_event_map_info(ev.payload) {
                    maps.insert((provider, name), ev.payload.to_vec());
                }
            }
        }
        let n = lookups.clone();
        context = context.with_schema_lookup(Box::new(move |rec| {
            let h = &rec.header;
            let provider: dtx::etw::record::Guid = h.provider_id.into();
            let (info, schema) = infos.get(&(provider, h.descriptor.id, h.descriptor.version))?;
            n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let maps = schema
                .props
                .iter()
                .filter_map(|p| maps.get(&(provider, p.map.clone()?)).cloned())
                .collect();
            Some(dtx::sources::etw_live::EventSchema {
                event_info: info.clone(),
                maps,
            })
        }));
    }
    e.begin(None);
    let mut live = replay_live(&mut e, &src, &etw, (context, rx), stacks, tdh);
    live.finish(&mut e);
    live.stop();
    live.closing(&mut e);
    e.end();
    if tdh {
        // one lookup per distinct manifest event, not one per record
        let n = lookups.load(std::sync::atomic::Ordering::Relaxed);
        assert!(n > 0 && n < 1000, "{n} schema lookups");
    }
    let f = String::from_utf8(file_out.0.lock().unwrap().clone()).unwrap();
    let l = String::from_utf8(live_out.0.lock().unwrap().clone()).unwrap();
    (f, l, live.counts.records, live.counts.dropped)
}

fn check(file: &str, script: &str, min_lines: usize) {
    check_with(file, script, min_lines, false)
}

fn check_with(file: &str, script: &str, min_lines: usize, tdh: bool) {
    let Some(path) = trace(file) else { return };
    let (from_file, from_live, records, dropped) = both_paths_with(&path, script, tdh);
    assert_eq!(dropped, 0, "the replay outran the queue");
    assert!(records > 1000, "only {records} records replayed");
    if let Ok(d) = std::env::var("DTX_REPLAY_DUMP") {
        std::fs::write(format!("{d}.file"), &from_file).unwrap();
        std::fs::write(format!("{d}.live"), &from_live).unwrap();
    }
    let lines = from_file.lines().filter(|l| !l.trim().is_empty()).count();
    assert!(
        lines >= min_lines,
        "`-E` printed too little for {script}:\n{from_file}"
    );
    assert_eq!(
        from_live, from_file,
        "live replay and -E differ for {script} over {file}"
    );
    eprintln!("{file}: {records} records, {lines} lines of output agree");
}

#[test]
fn on_cpu_by_execname_matches_the_file_path() {
    check(
        "randomascii_slow_ppt_trace.etl.zip",
        "sched:::on-cpu { @[execname] = count(); }",
        5,
    );
}

#[test]
fn process_and_thread_events_match_the_file_path() {
    check(
        "randomascii_slow_ppt_trace.etl.zip",
        "proc:::lwp-start, proc:::lwp-exit, proc:::module-load { @[probename, execname] = count(); }",
        3,
    );
}

#[test]
fn dns_client_events_match_the_file_path() {
    check(
        "perfview_net.4.5.2.x64.etl.zip",
        "microsoft-windows-dns-client:::events { printf(\"%s %d %d %d %d\\n\", execname, pid, tid, cpu, arg0); @[execname, arg0] = count(); }",
        5,
    );
}

#[test]
fn manifest_fields_come_from_the_schema_lookup_without_metadata_records() {
    // dnsqueries.d reads DNS-client fields by name: live, their schemas come from TDH
    let script = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/dscripts/dns/dnsqueries.d"
    ))
    .unwrap();
    check_with("perfview_net.4.5.2.x64.etl.zip", &script, 5, true);
}

#[test]
fn every_record_of_the_net_trace_matches_the_file_path() {
    // diag:::events fires for every record: kernel, classic (MOF) and EVENT_HEADER ones alike
    check(
        "perfview_net.4.5.2.x64.etl.zip",
        "diag:::events { @[execname, arg0, arg1] = count(); }",
        50,
    );
}

#[test]
fn kernel_stacks_attach_to_their_events_as_in_the_file_path() {
    // a sample's kernel stack walk follows it, its user part comes when the thread returns
    // to user mode (maybe on another CPU): the live source holds the sample until both have
    // come, so stack() and ustack() are what they are over the file
    check(
        "randomascii_slow_ppt_trace.etl.zip",
        "profile:::sample-* { @[stack(4), ustack(3)] = count(); }",
        60,
    );
}

#[test]
fn profile_n_fires_from_the_sessions_samples_as_in_the_file_path() {
    // live, profile-N is the session's SampledProfile records thinned per CPU, as over a file
    check(
        "randomascii_slow_ppt_trace.etl.zip",
        "profile-97 { @[execname, cpu] = count(); } profile-199 /arg1/ { @u[pid] = count(); }",
        20,
    );
}

#[test]
fn lost_events_fire_diag_lostevent() {
    // ETW's real-time loss record (RT_LostEvent, opcode 32: events lost) reaches diag:::lostevent
    let catalog = dtx::providers::etw_catalog(&EtwProbes::new());
    let out = Shared::default();
    let mut e = engine("diag:::lostevent { @[arg1] = sum(arg0); }", &catalog, &out);
    let (context, rx) = CallbackContext::channel(16);
    let mut live = EtwLiveSource::new(context, rx, EtwProbes::new(), Default::default(), false);
    let ctx = live.context_ptr();
    e.begin(None);
    let mut header = dtx::sources::etw_live::raw::RawEventHeader {
        flags: 0x0040,
        provider_id: dtx::sources::etw_live::RT_LOST_EVENT.into(),
        ..Default::default()
    };
    header.descriptor.opcode = 32;
    let lost = LiveEvent {
        header,
        cpu: 0,
        payload: Vec::new(),
        extended: Default::default(),
    };
    for _ in 0..3 {
        // SAFETY: as above
        unsafe { pass_to_callback(&lost, ctx) };
    }
    // a full queue: the callback drops and counts, the source reports it as lost (kind 3)
    let filler = LiveEvent {
        header: dtx::sources::etw_live::raw::RawEventHeader::default(),
        ..lost.clone()
    };
    for _ in 0..20 {
        // SAFETY: as above
        unsafe { pass_to_callback(&filler, ctx) };
    }
    let now = e.now_ns();
    live.pump(now, &mut e);
    live.pump(e.now_ns(), &mut e);
    e.end();
    assert_eq!(live.counts.lost_notices, [3, 0, 0]);
    assert_eq!(live.counts.dropped, 7);
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .filter(|v: &Vec<&str>| v.len() == 2)
        .collect();
    assert_eq!(rows, vec![vec!["0", "3"], vec!["3", "7"]], "{text}");
}

/// The line cargo-flamegraph runs on Windows.
const FLAMEGRAPH_LINE: &str = "profile-997 /pid == $target/ { @[ustack(100)] = count(); }";

/// The module a frame names (`module`function+0x..`, `module+0x..`), if it names one.
fn frame_module(f: &str) -> Option<&str> {
    let m = f.split(['`', '+']).next()?;
    let lower = m.to_ascii_lowercase();
    [".dll", ".exe", ".sys"]
        .iter()
        .any(|e| lower.ends_with(e))
        .then_some(m)
}

/// Checks that `text` (an `-o` file of the line) folds as `stackcollapse.pl` folds it: every
/// entry with frames into a line `outermost;...;innermost N` with N > 0, the counts adding up
/// to the samples. Returns (samples, samples with no user stack).
fn check_folds(text: &str) -> (u64, u64) {
    assert!(
        text.starts_with('\n'),
        "printa's output starts with a blank line"
    );
    let entries = stack_entries(text);
    let total: u64 = entries.iter().map(|e| e.1).sum();
    let mut folded_total = 0;
    for e in entries.iter().filter(|e| !e.0.is_empty()) {
        let line = fold(e);
        let (stack, n) = line.rsplit_once(' ').expect("a count");
        let n: u64 = n.parse().expect("a count");
        assert!(n > 0, "{line}");
        assert!(
            !stack.is_empty() && stack.split(';').all(|f| !f.is_empty()),
            "{line}"
        );
        // the outermost frame first, the sampled one last
        assert!(
            stack.starts_with(folded_frame(e.0.last().unwrap())),
            "{line}"
        );
        assert!(stack.ends_with(folded_frame(&e.0[0])), "{line}");
        folded_total += n;
    }
    // a sample ETW logged no user stack for prints as its count alone, as dtrace prints an
    // empty ustack()
    let bare: u64 = entries.iter().filter(|e| e.0.is_empty()).map(|e| e.1).sum();
    assert_eq!(folded_total + bare, total);
    (total, bare)
}

/// The flamegraph line for the busy process `pid` of a trace whose samples carry full stack
/// walks (StackWalk records, as a live session of dtx delivers them: it enables no stack
/// caching): the plan a live run makes, the trace played through the live callback against
/// `-E`, and `dtx -E trace -o out.stacks`, whose file must fold. Returns the live path's text.
fn flamegraph_over(path: &str, pid: u32) -> String {
    let line = FLAMEGRAPH_LINE.replace("$target", &pid.to_string());
    let script = format!("#pragma D option ustackframes=100\n{line}");

    // samples at 997 Hz, with their stack walks (EVENT_TRACE_FLAG_PROFILE, and
    // TraceStackTracingInfo with SampledProfile's class) and the images that name the frames
    let mut etw = EtwProbes::new();
    TraceSource::open(path).unwrap().scan_providers(&mut etw);
    let catalog = dtx::providers::etw_catalog(&etw);
    let e = engine(&script, &catalog, &Shared::default());
    let plan = dtx::sources::etw_live::plan::SessionPlan::for_engine(&e, &etw);
    use dtx::sources::etw_live::plan::kernel_flag as k;
    assert_eq!(plan.kernel_flags & k::PROFILE, k::PROFILE, "{plan:?}");
    assert_eq!(plan.kernel_flags & k::IMAGE_LOAD, k::IMAGE_LOAD, "{plan:?}");
    let sampled_profile = (dtx::providers::etw::group::PERF_INFO, 46);
    assert_eq!(plan.stack_events, vec![sampled_profile], "{plan:?}");
    // 1/997 s in 100 ns units, inside what Windows accepts
    assert_eq!(plan.profile_interval_to_set(), Some((10_030, false)));

    let (from_file, from_live, records, dropped) = both_paths_with(path, &script, false);
    assert_eq!(dropped, 0, "the replay outran the queue");
    assert!(records > 1000, "only {records} records replayed");
    if let Ok(d) = std::env::var("DTX_REPLAY_DUMP") {
        std::fs::write(format!("{d}.file"), &from_file).unwrap();
        std::fs::write(format!("{d}.live"), &from_live).unwrap();
    }
    if from_live != from_file {
        let (live, file) = (stack_entries(&from_live), stack_entries(&from_file));
        let only_live: Vec<_> = live.iter().filter(|e| !file.contains(e)).take(3).collect();
        let only_file: Vec<_> = file.iter().filter(|e| !live.contains(e)).take(3).collect();
        panic!(
            "the live path and -E give other stacks for pid {pid} over {path}: {} and {} \
             entries; only live: {only_live:#?}\nonly -E: {only_file:#?}",
            live.len(),
            file.len()
        );
    }
    // the live path's text folds
    check_folds(&from_live);

    // the command line's -o file: printa's text, which folds
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.stacks");
    let run =
        crate::support::cli::Dtx::new(&["-x", "ustackframes=100", "-E", path, "-n", &line, "-o"])
            .arg(&out)
            .output();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(run.stdout.is_empty(), "the output went to the -o file");
    let text = std::fs::read_to_string(&out).unwrap();
    let (total, bare) = check_folds(&text);
    assert!(total > 100, "{total} samples of pid {pid}\n{text}");
    assert!(bare < total, "no sample of pid {pid} has a user stack");
    from_live
}

#[test]
fn the_flamegraph_line_over_live_samples_with_full_stacks() {
    // filtrace_diskio: Windows 11 build 26200, its samples' stacks in StackWalk records (full
    // stacks), Image rundown; pid 11112 is the process its samples land in
    let Some(path) = shared("etl-win11", "filtrace_diskio.etl") else {
        return;
    };
    let live = flamegraph_over(&path, 11112);
    let entries = stack_entries(&live);
    // of the samples with a user stack, most are stacks of three frames or more, named by
    // module (EtwRundown.dll, devobj.dll, cfgmgr32.dll, ...) or .NET method
    let stacked: u64 = entries
        .iter()
        .filter(|e| !e.0.is_empty())
        .map(|e| e.1)
        .sum();
    let deep: u64 = entries
        .iter()
        .filter(|(f, _)| f.len() >= 3 && f.iter().any(|x| !x.starts_with("0x")))
        .map(|e| e.1)
        .sum();
    eprintln!("filtrace_diskio: {deep} of {stacked} samples with a user stack in named stacks of 3+ frames");
    assert!(stacked > 50, "{stacked} samples with a user stack");
    assert!(deep * 2 >= stacked, "{deep} of {stacked}\n{live}");
    let modules: std::collections::BTreeSet<&str> = entries
        .iter()
        .flat_map(|e| e.0.iter())
        .filter_map(|f| frame_module(f))
        .collect();
    assert!(modules.len() >= 3, "{modules:?}");
    // managed frames by method name, from the runtime's method events
    assert!(
        entries.iter().any(|e| e
            .0
            .iter()
            .any(|f| f.starts_with("Microsoft.Diagnostics.Tracing."))),
        "no managed frame named\n{live}"
    );
}

/// Live, what is printed before END names stack frames: before timers fire (a `printa()` in
/// `tick-5s`), the session's images as of then name them; once nothing changed, nothing is
/// built again; END's names are the images of the whole session. (Live, frames printed before
/// END were bare addresses: the session's images reached the consumer only at the end.)
#[test]
fn live_frames_are_named_before_end() {
    let Some(path) = trace("randomascii_slow_ppt_trace.etl.zip") else {
        return;
    };
    let mut etw = EtwProbes::new();
    let src = {
        let mut s = TraceSource::open(&path).unwrap();
        s.scan_providers(&mut etw);
        s
    };
    let catalog = dtx::providers::etw_catalog(&etw);
    let out = Shared::default();
    let mut e = engine("profile-97 { @[stack(2)] = count(); }", &catalog, &out);
    e.begin(None);
    let channel = CallbackContext::channel(4096);
    let mut live = replay_live(&mut e, &src, &etw, channel, true, false);
    let frames = |e: &Engine| {
        snapshot_frames(&dtx::agg::snapshot::take(
            &e.runs[0].vm.aggs,
            &*e.consumer.symbols,
        ))
    };
    // what the run loop does before a timer fires
    live.name_frames(&mut e);
    let before_end = frames(&e);
    let named = before_end.iter().filter(|f| f.contains(".exe+0x")).count();
    assert!(before_end.len() > 100, "{before_end:?}");
    assert!(
        named * 2 > before_end.len(),
        "{named} of {}",
        before_end.len()
    );
    live.stop();
    live.closing(&mut e);
    assert_eq!(frames(&e), before_end);
}

/// The records of `src` as a session would copy them, with their times since the start (ns).
fn live_records(src: &TraceSource) -> Vec<(LiveEvent, i64)> {
    let time = *src.file.time_base();
    let mut out = Vec::new();
    let mut events = src.file.events();
    while let Some(r) = events.next_event() {
        let Ok(ev) = r else { continue };
        let live = LiveEvent::from_record(&ev);
        let ns = time.since_start_ns(live.header.time_stamp);
        out.push((live, ns));
    }
    out
}

/// A delivery order of `records` as real-time sessions make it: each CPU's records go in
/// buffers (up to 256 records spanning at most 200 ms) delivered whole, each buffer up to
/// 0.8 s after its last record (never before the CPU's previous buffer), so that every record
/// arrives within 1 s of its time and CPUs interleave by buffer. `seed` makes it repeatable.
fn shuffled_delivery(records: &[(LiveEvent, i64)], seed: u64) -> Vec<usize> {
    let mut x = seed.max(1);
    let mut rnd = move |n: u64| {
        // xorshift64
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut by_cpu: std::collections::BTreeMap<u16, Vec<usize>> = Default::default();
    for (i, (ev, _)) in records.iter().enumerate() {
        by_cpu.entry(ev.cpu).or_default().push(i);
    }
    // (delivery time, cpu, the buffer's records)
    let mut buffers: Vec<(i64, u16, Vec<usize>)> = Vec::new();
    for (cpu, idx) in by_cpu {
        let mut last_key = i64::MIN;
        let mut i = 0;
        while i < idx.len() {
            let size = 1 + rnd(256) as usize;
            let first_ns = records[idx[i]].1;
            let mut j = i;
            while j < idx.len() && j - i < size && records[idx[j]].1 - first_ns <= 200_000_000 {
                j += 1;
            }
            let last_ns = records[idx[j - 1]].1;
            let key = (last_ns + rnd(800_000_000) as i64).max(last_key);
            last_key = key;
            buffers.push((key, cpu, idx[i..j].to_vec()));
            i = j;
        }
    }
    buffers.sort_by_key(|b| (b.0, b.1));
    buffers.into_iter().flat_map(|b| b.2).collect()
}

/// The output of `script` with `records` delivered through the live callback in `order`.
fn live_output(
    script: &str,
    catalog: &Catalog,
    etw: &EtwProbes,
    src: &TraceSource,
    records: &[(LiveEvent, i64)],
    order: &[usize],
) -> String {
    let out = Shared::default();
    let mut e = engine(script, catalog, &out);
    let plan = dtx::sources::etw_live::plan::SessionPlan::for_engine(&e, etw);
    let (context, rx) = CallbackContext::channel(4096);
    let mut live = EtwLiveSource::new(context, rx, etw.clone(), *src.file.time_base(), true)
        .with_stack_events(&plan.stack_events);
    let ctx = live.context_ptr();
    e.begin(None);
    for (n, &i) in order.iter().enumerate() {
        // SAFETY: ctx is the source's, alive for the call
        unsafe { pass_to_callback(&records[i].0, ctx) };
        if n % 2048 == 2047 {
            live.drain(&mut e);
        }
    }
    live.drain(&mut e);
    live.finish(&mut e);
    live.stop();
    live.closing(&mut e);
    e.end();
    assert_eq!(live.counts.dropped, 0, "the replay outran the queue");
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    text
}

/// Real-time records arrive in arrival order: each CPU's buffers come when full or flushed, so
/// a quiet CPU's records come after a busy CPU's newer ones. The live source puts them back in
/// time order within its window (the flush period and a margin) before the system state and
/// the probes see them: delivery shuffled within 1 s per CPU prints byte for byte what
/// in-order delivery prints (execnames from the process and thread records, stacks named by
/// the images loaded, the processes' lives).
#[test]
fn live_fix_shuffled_delivery_prints_what_in_order_delivery_prints() {
    let Some(path) = trace("randomascii_slow_ppt_trace.etl.zip") else {
        return;
    };
    let mut etw = EtwProbes::new();
    let mut src = TraceSource::open(&path).unwrap();
    src.scan_providers(&mut etw);
    let catalog = dtx::providers::etw_catalog(&etw);
    let script = "profile:::sample-* { @s[execname, stack(3), ustack(3)] = count(); } \
                  sched:::on-cpu { @c[execname, cpu] = count(); } \
                  proc:::lwp-start, proc:::lwp-exit, proc:::module-load \
                  { @p[probename, execname, pid] = count(); }";
    let records = live_records(&src);
    let in_order: Vec<usize> = (0..records.len()).collect();
    let shuffled = shuffled_delivery(&records, 0x005e_ed28);
    assert_eq!(shuffled.len(), records.len());
    // the shuffle does reorder: many records arrive after a newer one, none more than 1 s late
    let mut newest = i64::MIN;
    let (mut late, mut latest) = (0u64, 0i64);
    for &i in &shuffled {
        let ns = records[i].1;
        if ns < newest {
            late += 1;
            latest = latest.max(newest - ns);
        }
        newest = newest.max(ns);
    }
    eprintln!(
        "{} records, {late} delivered after a newer one, up to {:.3} s late",
        records.len(),
        latest as f64 / 1e9
    );
    assert!(
        late * 10 > records.len() as u64,
        "{late} records out of order"
    );
    assert!(latest < 1_000_000_000 && latest > 100_000_000, "{latest}");
    let a = live_output(script, &catalog, &etw, &src, &records, &in_order);
    let b = live_output(script, &catalog, &etw, &src, &records, &shuffled);
    let lines = a.lines().filter(|l| !l.trim().is_empty()).count();
    assert!(lines > 100, "too little output:\n{a}");
    assert!(a.contains(".exe"), "no frame named by an image:\n{a}");
    if a != b {
        if let Ok(d) = std::env::var("DTX_REPLAY_DUMP") {
            std::fs::write(format!("{d}.inorder"), &a).unwrap();
            std::fs::write(format!("{d}.shuffled"), &b).unwrap();
        }
        panic!("shuffled delivery printed other output than in-order delivery");
    }
}

/// `profile-997 { @[ustack()] = count(); }` on a .NET process: the plan a live run makes
/// enables the runtime's JIT, NGen and Loader keywords at level 5 (without which x64 stacks
/// stop at the first managed frame) and its start rundown; a program that records no stack
/// enables neither.
#[test]
fn live_fix_a_clause_recording_stacks_plans_the_dotnet_providers() {
    use dtx::providers::etw::dnet::{self, keyword};
    use dtx::sources::etw_live::plan::{SessionPlan, LEVEL_VERBOSE};
    let etw = EtwProbes::new();
    let catalog = dtx::providers::etw_catalog(&etw);
    for (script, managed) in [
        ("profile-997 { @[ustack()] = count(); }", true),
        ("profile-997 /pid == 4/ { @[stack()] = count(); }", true),
        ("profile-997 { @[execname] = count(); }", false),
    ] {
        let e = engine(script, &catalog, &Shared::default());
        let plan = SessionPlan::for_engine(&e, &etw);
        let rt = plan.user.iter().find(|u| u.guid == Some(dnet::RUNTIME));
        let rd = plan.user.iter().find(|u| u.guid == Some(dnet::RUNDOWN));
        assert_eq!(rt.is_some(), managed, "{script}: {plan:?}");
        assert_eq!(rd.is_some(), managed, "{script}: {plan:?}");
        if let (Some(rt), Some(rd)) = (rt, rd) {
            assert_eq!(rt.level, LEVEL_VERBOSE);
            assert_eq!(
                rt.keywords,
                keyword::JIT | keyword::NGEN | keyword::LOADER,
                "{script}"
            );
            assert_ne!(rd.keywords & keyword::rundown::START, 0);
        }
    }
}

/// A clock the test moves by hand.
#[derive(Clone, Default)]
struct HandClock(Arc<std::sync::atomic::AtomicU64>);

impl dtx::engine::clock::Clock for HandClock {
    fn now_ns(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn wall_ns(&self) -> u64 {
        self.now_ns()
    }
    fn sleep_until(&self, _t: u64, _interrupted: &dyn Fn() -> bool) {}
}

impl HandClock {
    fn advance(&self, ns: u64) {
        self.0.fetch_add(ns, std::sync::atomic::Ordering::SeqCst);
    }
}

/// On a quiet CPU a sample's user stack part comes with the buffer's flush, up to the flush
/// period (1 s) after the sample: the sample waits for it longer than that (its wait is
/// derived from the session's flush timer) and fires with its stack.
#[test]
fn live_fix_a_quiet_cpus_stack_after_the_flush_period_still_joins_its_sample() {
    use dtx::etw::group;
    let Some(path) = trace("randomascii_slow_ppt_trace.etl.zip") else {
        return;
    };
    let mut etw = EtwProbes::new();
    let mut src = TraceSource::open(&path).unwrap();
    src.scan_providers(&mut etw);
    let catalog = dtx::providers::etw_catalog(&etw);
    // the first sample whose stack walk records include a user part
    let mut samples: std::collections::HashMap<i64, LiveEvent> = Default::default();
    let mut found: Option<(LiveEvent, Vec<LiveEvent>)> = None;
    let mut walks: std::collections::HashMap<i64, Vec<LiveEvent>> = Default::default();
    let mut events = src.file.events();
    while let Some(r) = events.next_event() {
        let Ok(ev) = r else { continue };
        match (ev.kernel_group, ev.opcode) {
            (Some(group::PERF_INFO), 46) => {
                samples.insert(ev.raw_timestamp, LiveEvent::from_record(&ev));
            }
            (Some(group::STACK_WALK), _) if ev.payload.len() >= 24 => {
                let at = i64::from_le_bytes(ev.payload[..8].try_into().unwrap());
                let user = ev.payload[16..]
                    .chunks_exact(8)
                    .any(|c| u64::from_le_bytes(c.try_into().unwrap()) < 0x8000_0000_0000_0000);
                walks
                    .entry(at)
                    .or_default()
                    .push(LiveEvent::from_record(&ev));
                if user {
                    if let Some(s) = samples.get(&at) {
                        found = Some((s.clone(), walks.remove(&at).unwrap()));
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    drop(events);
    let (sample, stack) = found.expect("a sample with a user stack");

    let out = Shared::default();
    let script = "profile:::sample-* { @[ustack(2)] = count(); }";
    let spec = compile_text(script, "quiet.d", &catalog).unwrap();
    let clock = HandClock::default();
    clock.advance(1_000_000_000);
    let opts = DOptions::new();
    let consumer = Consumer::new(
        Box::new(out.clone()),
        ConsumerOptions::from_options(&opts, "dtx", true, false),
    );
    let mut e = Engine::new(
        vec![("quiet.d".into(), spec.program)],
        VmOptions::from_options(&spec.options),
        &catalog,
        Box::new(clock.clone()),
        consumer,
    );
    let plan = dtx::sources::etw_live::plan::SessionPlan::for_engine(&e, &etw);
    let (context, rx) = CallbackContext::channel(64);
    let mut live = EtwLiveSource::new(context, rx, etw.clone(), *src.file.time_base(), true)
        .with_stack_events(&plan.stack_events);
    let ctx = live.context_ptr();
    e.begin(None);
    // SAFETY: ctx is the source's, alive for the calls
    unsafe { pass_to_callback(&sample, ctx) };
    let pump = |live: &mut EtwLiveSource, e: &mut Engine| {
        let now = e.now_ns();
        live.pump(now, e);
    };
    pump(&mut live, &mut e);
    // the sample leaves the time-order window, then waits for its stack: 1.2 s more, past the
    // flush period, and still it has not fired without it
    clock.advance(dtx::sources::etw_live::order::reorder_window_ns(1));
    pump(&mut live, &mut e);
    clock.advance(1_200_000_000);
    pump(&mut live, &mut e);
    assert_eq!(
        live.counts.records, 0,
        "the sample fired before its stack could come"
    );
    // the quiet CPU's buffer comes: the stack, and the sample with it
    for s in &stack {
        // SAFETY: as above
        unsafe { pass_to_callback(s, ctx) };
    }
    pump(&mut live, &mut e);
    clock.advance(dtx::sources::etw_live::order::reorder_window_ns(1));
    pump(&mut live, &mut e);
    assert!(live.counts.records >= 2, "{}", live.counts.records);
    live.finish(&mut e);
    live.stop();
    live.closing(&mut e);
    e.end();
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let entries = stack_entries(&text);
    assert_eq!(entries.len(), 1, "{text}");
    assert!(
        !entries[0].0.is_empty(),
        "the sample fired without its stack:\n{text}"
    );
    // the wait is derived from the flush timer: longer than a flush period and the window
    assert!(
        dtx::sources::etw_live::STACK_WAIT_QUIET_NS
            > 1_000_000_000 + dtx::sources::etw_live::order::reorder_window_ns(1)
    );
}

use crate::support::synthetic_etl;

/// A synthetic trace at `path` played through the live callback (in time order) for
/// `script`, pumped in batches of `batch` records with the run loop's `name_frames` after
/// each (what a timer's clause gets); `identify` gives the source an image-identity reader.
/// The output, the source's naming costs and its state's (kept, forgotten) ended processes.
fn synthetic_live(
    path: &std::path::Path,
    script: &str,
    batch: usize,
    identify: Option<dtx::sources::etw_live::names::IdentifyFn>,
) -> (
    String,
    dtx::sources::etw_live::names::NamesStats,
    (usize, u64),
    EtwLiveSource,
) {
    let mut etw = EtwProbes::new();
    let src = {
        let mut s = TraceSource::open(&path.to_string_lossy()).unwrap();
        s.scan_providers(&mut etw);
        s
    };
    let catalog = dtx::providers::etw_catalog(&etw);
    let out = Shared::default();
    let mut e = engine(script, &catalog, &out);
    let plan = dtx::sources::etw_live::plan::SessionPlan::for_engine(&e, &etw);
    let (context, rx) = CallbackContext::channel(1 << 16);
    let mut live = EtwLiveSource::new(context, rx, etw.clone(), *src.file.time_base(), true)
        .with_stack_events(&plan.stack_events);
    if let Some(f) = identify {
        live = live.with_identify(f);
    }
    let ctx = live.context_ptr();
    e.begin(None);
    let records = live_records(&src);
    for (n, (ev, _)) in records.iter().enumerate() {
        // SAFETY: ctx is the source's, alive for the call
        unsafe { pass_to_callback(ev, ctx) };
        if n % batch == batch - 1 {
            live.drain(&mut e);
            live.name_frames(&mut e);
        }
    }
    live.drain(&mut e);
    live.finish(&mut e);
    live.stop();
    live.closing(&mut e);
    e.end();
    assert_eq!(live.counts.dropped, 0, "the replay outran the queue");
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let stats = live.names_stats();
    let exited = live.state().exited_counts();
    (text, stats, exited, live)
}

/// Processes started and ended one after another under reused pids, each loading `images`
/// DLLs, with a sample whose user stack is in its first DLL (file `lib0_<i % kinds>.dll`).
fn churn_trace(processes: u32, pids: u32, kinds: u32, images: u64) -> Vec<u8> {
    use synthetic_etl::{CpuRecords, START};
    let mut c = CpuRecords::default();
    let mut ts = START + 10;
    for i in 0..processes {
        let pid = 1000 + 4 * (i % pids);
        let tid = 100_000 + i;
        c.process_start(ts, pid, "churn.exe");
        c.thread(ts + 1, pid, tid);
        for k in 0..images {
            let file = format!("C:\\Windows\\System32\\lib{k}_{}.dll", i % kinds);
            c.image_load(
                ts + 2 + k as i64,
                pid,
                0x7ff0_0000_0000 + k * 0x10_0000,
                0x8_0000,
                &file,
            );
        }
        c.sample(ts + 100, pid, tid, &[0x7ff0_0000_0000 + 0x10]);
        c.process_end(ts + 19_000, pid, "churn.exe");
        // 20 ms apart: the time-order window (1.5 s) lets records go as the replay goes on
        ts += 200_000;
    }
    synthetic_etl::trace_bytes(&[c])
}

/// Naming frames in a live session costs what changed: the resolver is built whole once,
/// then each `name_frames` builds only the pids whose processes or images changed since;
/// it is never rebuilt per image load on the engine thread. A program that prints no frame
/// builds nothing.
#[test]
fn live_fix_frame_names_the_resolver_is_built_once_then_by_changed_pids() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("churn.etl");
    // 3,000 processes over 300 pids, 8 DLLs each
    std::fs::write(&path, churn_trace(3000, 300, 300, 8)).unwrap();
    let script = "profile:::sample-* { @[ustack(1)] = count(); }";
    let (out, stats, exited, _) = synthetic_live(&path, script, 500, None);
    assert!(out.contains("lib0_"), "frames unnamed:\n{out}");
    assert_eq!(stats.full_builds, 1, "{stats:?}");
    // each update builds the pids that changed since the one before: ~3,000 process starts
    // in all, where building every pid seen at each of ~30 updates would be ~9,000 (and
    // every process seen, ~45,000)
    assert!(stats.updates >= 10, "{stats:?}");
    assert!(stats.pids_updated <= 3000 + 300, "{stats:?}");
    // the processes ended under a reused pid are kept, bounded
    assert!(
        exited.0 <= dtx::etw::state::exited::EXITED_MAX,
        "{exited:?}"
    );
    // no frame printed: nothing built
    let (_, stats, _, _) =
        synthetic_live(&path, "proc:::exit { @[execname] = count(); }", 500, None);
    assert_eq!(stats, Default::default());
}

/// Frames recorded before a process exits print named at END, by the images it had, also
/// when its pid was taken by later processes with other images at the same addresses, or by
/// processes with the same images (which take its place among the ended processes).
#[test]
fn live_fix_frame_names_frames_of_exited_processes_print_named_at_end() {
    use synthetic_etl::{CpuRecords, START};
    let dll = 0x7ff0_0000_0000u64;
    let mut c = CpuRecords::default();
    let mut ts = START + 10;
    let one = |c: &mut CpuRecords, ts: &mut i64, pid: u32, tid: u32, file: &str| {
        c.process_start(*ts, pid, "app.exe");
        c.thread(*ts + 1, pid, tid);
        c.image_load(*ts + 2, pid, dll, 0x10000, file);
        c.sample(*ts + 100, pid, tid, &[dll + 0x10]);
        c.process_end(*ts + 1000, pid, "app.exe");
        // a second apart: records leave the time-order window while the replay goes on
        *ts += 10_000_000;
    };
    // pid 8: old.dll, then new.dll at its addresses
    one(&mut c, &mut ts, 8, 80, r"C:\app\old.dll");
    one(&mut c, &mut ts, 8, 81, r"C:\app\new.dll");
    // pid 12: the same DLL three times
    for t in 0..3 {
        one(&mut c, &mut ts, 12, 120 + t, r"C:\app\same.dll");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("exited.etl");
    std::fs::write(&path, synthetic_etl::trace_bytes(&[c])).unwrap();
    let script = "profile:::sample-* { @[pid, ustack(1)] = count(); }";
    // the names are brought up to date between records, as a live run's timers do
    for batch in [3, 1 << 20] {
        let (out, stats, exited, _) = synthetic_live(&path, script, batch, None);
        let flat: Vec<String> = out.split_whitespace().map(String::from).collect();
        let count_after = |frame: &str| {
            let i = flat.iter().position(|w| w == frame)?;
            flat[i + 1].parse::<u64>().ok()
        };
        assert_eq!(
            count_after("old.dll+0x10"),
            Some(1),
            "batch {batch}:\n{out}"
        );
        assert_eq!(
            count_after("new.dll+0x10"),
            Some(1),
            "batch {batch}:\n{out}"
        );
        assert_eq!(
            count_after("same.dll+0x10"),
            Some(3),
            "batch {batch}:\n{out}"
        );
        assert!(!out.contains("0x7ff0"), "an unnamed frame:\n{out}");
        // pid 8's old process is kept (its images differ); pid 12's first two were replaced
        // by the next, whose images are the same
        assert_eq!(exited, (2, 0), "{stats:?}");
    }
}

/// A live image's PDB identity comes from its file's headers: they are read on a worker
/// thread, never the engine's, each file once; the answers reach the names by the next
/// update, and END waits for what is still being read.
#[test]
fn live_fix_frame_names_image_files_are_read_off_the_engine_thread() {
    use dtx::etw::state::PdbInfo;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ids.etl");
    // 400 processes over 40 pids, 3 DLLs each of 20 kinds: 60 distinct files
    std::fs::write(&path, churn_trace(400, 40, 20, 3)).unwrap();
    let engine_thread = std::thread::current().id();
    let asked: Arc<Mutex<Vec<(String, std::thread::ThreadId)>>> = Default::default();
    let log = asked.clone();
    let identify: dtx::sources::etw_live::names::IdentifyFn = Box::new(move |name, _stamp| {
        log.lock()
            .unwrap()
            .push((name.to_string(), std::thread::current().id()));
        // a slow disk
        std::thread::sleep(std::time::Duration::from_millis(2));
        let base = name.rsplit('\\').next()?.strip_suffix(".dll")?;
        Some(PdbInfo {
            guid: dtx::etw::record::Guid::default(),
            age: 1,
            file_name: format!("{base}.pdb"),
        })
    });
    let script = "profile:::sample-* { @[ustack(1)] = count(); }";
    let (out, stats, _, live) = synthetic_live(&path, script, 200, Some(identify));
    let asked = asked.lock().unwrap().clone();
    assert!(!asked.is_empty(), "{stats:?}");
    assert!(
        asked.iter().all(|(_, t)| *t != engine_thread),
        "an image file was read on the engine thread"
    );
    let mut files: Vec<&str> = asked.iter().map(|(f, _)| f.as_str()).collect();
    files.sort();
    let n = files.len();
    files.dedup();
    assert_eq!(files.len(), n, "a file was read twice");
    assert_eq!(n, 60);
    assert_eq!(stats.files_asked, 60);
    assert!(out.contains("lib0_"), "{out}");
    // every image has the identity its file gave
    let names = live.trace_symbols();
    let (module, _, pdb) = names.image_at(Some(1000), 0x7ff0_0000_0010).unwrap();
    assert!(module.starts_with("lib0_"), "{module}");
    assert_eq!(
        pdb.map(|p| p.path.as_str()),
        Some(&*module.replace(".dll", ".pdb"))
    );
    // a program that prints no frame reads no file
    let (_, stats, _, _) = synthetic_live(
        &path,
        "proc:::exit { @[execname] = count(); }",
        200,
        Some(Box::new(|_: &str, _: u32| -> Option<PdbInfo> {
            panic!("read a file")
        })),
    );
    assert_eq!(stats.files_asked, 0);
}

/// What a [`SessionControl`] was asked, in order, with the record of the end rundown it
/// sends (as the .NET runtime logs its end rundown when the keyword comes) some time after
/// being asked, from a thread of its own.
struct EndRundownControl {
    log: Arc<Mutex<Vec<String>>>,
    context: usize,
    sender: Option<std::thread::JoinHandle<()>>,
}

impl dtx::sources::etw_live::SessionControl for EndRundownControl {
    fn apply(
        &mut self,
        plan: &dtx::sources::etw_live::plan::SessionPlan,
        context: *mut std::ffi::c_void,
    ) -> Result<Vec<String>, String> {
        self.context = context as usize;
        let rundown = plan
            .user
            .iter()
            .find(|u| u.guid == Some(dtx::providers::etw::dnet::RUNDOWN))
            .map(|u| u.keywords);
        self.log
            .lock()
            .unwrap()
            .push(format!("apply rundown {rundown:?}"));
        Ok(Vec::new())
    }
    fn stop(&mut self) {
        self.log.lock().unwrap().push("stop".into());
    }
    fn end_rundown(
        &mut self,
        provider: &dtx::sources::etw_live::plan::UserProvider,
    ) -> Result<bool, String> {
        self.log
            .lock()
            .unwrap()
            .push(format!("end_rundown {:#x}", provider.keywords));
        let (context, log) = (self.context, self.log.clone());
        self.sender = Some(std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(400));
            let mut ev = LiveEvent {
                header: Default::default(),
                cpu: 0,
                payload: vec![0; 8],
                extended: Vec::new(),
            };
            ev.header.provider_id = dtx::providers::etw::dnet::RUNDOWN.into();
            ev.header.descriptor.id = 146; // DCEndComplete
                                           // SAFETY: the source's context, alive until the control is dropped (which joins
                                           // this thread first)
            unsafe { pass_to_callback(&ev, context as *mut std::ffi::c_void) };
            log.lock().unwrap().push("rundown record sent".into());
        }));
        Ok(true)
    }
}

impl Drop for EndRundownControl {
    fn drop(&mut self) {
        if let Some(t) = self.sender.take() {
            let _ = t.join();
        }
    }
}

/// `dnet::rundown:*-dcend` fires at the end of a live run, as over a PerfView trace: no
/// session starts with the end-rundown keyword (the runtime would run the end rundown at
/// once); when the run ends (Ctrl-C), the rundown provider is enabled with it before the
/// sessions stop, and its records are awaited (until they stop coming) and fired before the
/// sessions stop.
#[test]
fn live_fix_dcend_the_end_rundown_comes_before_the_sessions_stop() {
    let etw = EtwProbes::new();
    let catalog = dtx::providers::etw_catalog(&etw);
    let out = Shared::default();
    let mut e = engine(
        "dnet::rundown:method-dcend { @ = count(); }",
        &catalog,
        &out,
    );
    let log: Arc<Mutex<Vec<String>>> = Default::default();
    let control = EndRundownControl {
        log: log.clone(),
        context: 0,
        sender: None,
    };
    let (context, rx) = CallbackContext::channel(4096);
    let time = dtx::etw::reader::logfile::TimeBase::default();
    let mut live =
        EtwLiveSource::new(context, rx, etw, time, false).with_control(Box::new(control));
    e.begin(None);
    live.replan(&e).unwrap();
    let end = dtx::providers::etw::dnet::keyword::rundown::END;
    assert_eq!(log.lock().unwrap().as_slice(), ["apply rundown None"]);
    let started = std::time::Instant::now();
    live.finish(&mut e);
    let waited = started.elapsed();
    let log = log.lock().unwrap().clone();
    assert_eq!(log.len(), 4, "{log:?}");
    assert!(log[1].starts_with("end_rundown "), "{log:?}");
    let kw = u64::from_str_radix(log[1].trim_start_matches("end_rundown 0x"), 16).unwrap();
    assert_eq!(kw & end, end, "{log:?}");
    assert_eq!(kw & dtx::providers::etw::dnet::keyword::rundown::START, 0);
    assert_eq!(&log[2..], ["rundown record sent", "stop"], "{log:?}");
    assert_eq!(live.counts.records, 1);
    // it waited for the record, then for the quiet period after it, and not much more
    let quiet = dtx::sources::etw_live::plan::END_RUNDOWN_QUIET_NS;
    assert!(
        waited.as_nanos() as u64 >= 400_000_000 + quiet,
        "{waited:?}"
    );
    assert!(
        (waited.as_nanos() as u64) < dtx::sources::etw_live::plan::END_RUNDOWN_MAX_NS,
        "{waited:?}"
    );
}
