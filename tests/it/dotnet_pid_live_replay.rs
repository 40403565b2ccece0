//! The Windows live path of `pid` probes on .NET methods, replayed: PerfView's traces of a .NET
//! Framework 4.5.2 program (x64 and x86) played record by record
//!
//! * through the callback of dtx's CLR method session (`etw_live::clr::clr_record_callback`,
//!   each record rebuilt as the `EVENT_RECORD` a real-time session hands over), and
//! * through the debugger loop's view of the same events as the target writes them
//!   (`etw_live::clr::event_write`: the event descriptor and `EVENT_DATA_DESCRIPTOR`s in the
//!   target's memory at ntdll's `EtwEventWriteTransfer`, here a memory image the test lays out),
//!
//! into the `pid` provider's method resolver (`PidProvider::managed_methods`), as the loop
//! does while it runs. Each method the trace records (dtx's own `dnet` probes print them with
//! `-E` from the same records) must be found at its start and last byte under its name and
//! assembly, and a probe on one method must get a site at the start of each of its code
//! versions. Skipped (with a message) when ../shared/etl is absent.

use crate::support::etl;

use std::collections::HashMap;

use dtx::etw::record::EventRecord;
use dtx::output::stack::Lookup;
use dtx::probes::ProbeDesc;
use dtx::providers::pid::{PidProvider, ProcessReader};
use dtx::providers::Provider;
use dtx::sources::etw_live::clr::{self, ClrContext, EventWriteFn};
use dtx::sources::etw_live::raw::LiveEvent;

use crate::dotnet_pid_etw::{recorded, recorded_by};

/// A .NET process on Windows as the provider sees it: the CLR loaded, every byte of code
/// `push rbp` then `ret`s (only the sites' addresses matter here).
struct ClrProcess;

impl ProcessReader for ClrProcess {
    fn maps(&self, _pid: u32) -> Result<(String, String), String> {
        Ok((
            "7ff0000000-7ff0100000 r-xp 00000000 00:00 0 C:\\Windows\\Microsoft.NET\\Framework64\\v4.0.30319\\clr.dll\n"
                .into(),
            "C:\\app\\Test.x64.exe".into(),
        ))
    }
    fn read_memory(&self, _pid: u32, _addr: u64, buf: &mut [u8]) -> bool {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = if i == 0 { 0x55 } else { 0xc3 };
        }
        true
    }
    fn clr_events(&self) -> bool {
        true
    }
}

/// Target memory as the breakpoint on `EtwEventWriteTransfer` finds it: the event descriptor,
/// the array of data descriptors and the data they point at (the payload cut in pieces, as the
/// runtime's generated code passes one descriptor per field), and the stack with the fifth and
/// sixth arguments.
struct Written {
    mem: Vec<(u64, Vec<u8>)>,
}

impl Written {
    const DESC: u64 = 0x1000;
    const DATA: u64 = 0x2000;
    const STACK: u64 = 0x3000;
    const BYTES: u64 = 0x10_0000;

    fn of(ev: &EventRecord<'_>) -> Written {
        let mut d = Vec::new();
        d.extend(ev.id.to_le_bytes());
        d.extend([ev.version, ev.channel, ev.level, ev.opcode]);
        d.extend(ev.task.to_le_bytes());
        d.extend(ev.keyword.to_le_bytes());
        // pieces of 8, 4 and the rest
        let p = ev.payload;
        let cuts = [p.len().min(8), p.len().min(12), p.len()];
        let mut descs = Vec::new();
        let mut from = 0;
        for to in cuts {
            descs.extend((Self::BYTES + from as u64).to_le_bytes());
            descs.extend(((to - from) as u32).to_le_bytes());
            descs.extend(0u32.to_le_bytes());
            from = to;
        }
        let mut stack = vec![0u8; 0x38];
        stack[0x28..0x2c].copy_from_slice(&(cuts.len() as u32).to_le_bytes());
        stack[0x30..0x38].copy_from_slice(&Self::DATA.to_le_bytes());
        Written {
            mem: vec![
                (Self::DESC, d),
                (Self::DATA, descs),
                (Self::STACK, stack),
                (Self::BYTES, p.to_vec()),
            ],
        }
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        for (at, bytes) in &self.mem {
            if addr >= *at && addr + buf.len() as u64 <= at + bytes.len() as u64 {
                let o = (addr - at) as usize;
                buf.copy_from_slice(&bytes[o..o + buf.len()]);
                return true;
            }
        }
        buf.is_empty()
    }
}

#[test]
fn dotnet_pid_live_clr_events_resolve_methods_as_the_traces_record() {
    for name in [
        "perfview_net.4.5.2.x64.etl.zip",
        "perfview_net.4.5.2.x86.etl.zip",
    ] {
        let Some(trace) = etl::trace(name) else {
            return;
        };
        let want = recorded(&trace);
        assert!(want.len() > 100, "{name}: {} methods", want.len());
        let file = dtx::etw::reader::EtlFile::open_path(&trace).expect("open trace");
        let time = *file.time_base();
        // one context per .NET process, as the debugger loop has for its target
        let pids: std::collections::BTreeSet<u32> = want.keys().map(|(p, _)| *p).collect();
        let session: HashMap<u32, ClrContext> = pids
            .iter()
            .map(|&p| (p, ClrContext::new(p, time)))
            .collect();
        let hooked: HashMap<u32, ClrContext> = pids
            .iter()
            .map(|&p| (p, ClrContext::new(p, time)))
            .collect();
        let by_session = PidProvider::new(Box::new(ClrProcess));
        let by_hook = PidProvider::new(Box::new(ClrProcess));
        let d = |s: String| ProbeDesc::parse(&s).expect("description");
        for &pid in &pids {
            // the processes are .NET: a method named before its code exists gets probes
            by_session
                .try_matching(&d(format!("pid{pid}:mscorlib:System.Nothing.Here:entry")))
                .expect("a .NET process");
            by_hook
                .try_matching(&d(format!("pid{pid}:mscorlib:System.Nothing.Here:entry")))
                .expect("a .NET process");
        }
        let mut armed: HashMap<u32, usize> = HashMap::new();
        let mut globbed: HashMap<u32, usize> = HashMap::new();
        let mut passed = 0u64;
        let mut written = 0u64;
        let mut it = file.events();
        let mut n = 0u64;
        while let Some(r) = it.next_event() {
            let Ok(ev) = r else { continue };
            let Some(cx) = session.get(&ev.pid) else {
                continue;
            };
            n += 1;
            clr::pass_to_clr_callback(&LiveEvent::from_record(&ev), cx);
            passed += 1;
            // the same event, written in the target
            if ev.provider == dtx::providers::etw::dnet::RUNTIME
                || ev.provider == dtx::providers::etw::dnet::RUNDOWN
            {
                let mem = Written::of(&ev);
                let got = clr::event_write(
                    EventWriteFn::WriteTransfer,
                    [0, Written::DESC, 0, 0],
                    Written::STACK,
                    &|a, b| mem.read(a, b),
                );
                if matches!(ev.id, 143 | 144 | 152 | 153 | 154) {
                    let is_method_or_module = (ev.provider == dtx::providers::etw::dnet::RUNTIME
                        && matches!(ev.id, 143 | 152))
                        || (ev.provider == dtx::providers::etw::dnet::RUNDOWN
                            && matches!(ev.id, 143 | 144 | 153 | 154));
                    if is_method_or_module {
                        let (desc, payload) = got.unwrap_or_else(|| {
                            panic!(
                                "{name}: event {} task {} opcode {} not read as written",
                                ev.id, ev.task, ev.opcode
                            )
                        });
                        assert_eq!(payload, ev.payload);
                        let live =
                            clr::written_event(desc, payload, ev.pid, ev.tid).expect("provider");
                        assert_eq!(
                            dtx::etw::record::Guid::from(live.header.provider_id),
                            ev.provider
                        );
                        hooked[&ev.pid].observe_live(&live);
                        written += 1;
                    }
                }
            }
            // the loop takes what is ready as it goes
            if n.is_multiple_of(500) {
                for (&pid, cx) in &session {
                    let got = by_session.managed_methods(pid, cx.take_ready(false), &[]);
                    *armed.entry(pid).or_default() += got.len();
                }
                for (&pid, cx) in &hooked {
                    // as with -Z: a glob makes probes as the methods it names appear
                    let glob = d(format!("pid{pid}:mscorlib:System.String.*:entry"));
                    for (info, sites, by) in by_hook.managed_methods(
                        pid,
                        cx.take_ready(false),
                        std::slice::from_ref(&glob),
                    ) {
                        if !by.is_empty() {
                            assert_eq!(by, std::slice::from_ref(&glob));
                            assert!(info.function.starts_with("System.String."), "{info:?}");
                            assert!(!sites.is_empty(), "{info:?}");
                            *globbed.entry(pid).or_default() += 1;
                        }
                    }
                }
            }
        }
        for (&pid, cx) in &session {
            by_session.managed_methods(pid, cx.take_ready(true), &[]);
            // a record of another process leaves a context alone
            let before = cx.records();
            assert!(before > 0, "{name}: pid {pid} saw no CLR record");
        }
        for (&pid, cx) in &hooked {
            let glob = d(format!("pid{pid}:mscorlib:System.String.*:entry"));
            for (_, _, by) in
                by_hook.managed_methods(pid, cx.take_ready(true), std::slice::from_ref(&glob))
            {
                if !by.is_empty() {
                    *globbed.entry(pid).or_default() += 1;
                }
            }
        }
        // one probe per System.String method name the trace records (taken as they came)
        for &pid in &pids {
            let mut names: Vec<&str> = want
                .iter()
                .filter(|((p, _), (_, m, module))| {
                    *p == pid && module == "mscorlib" && m.starts_with("System.String.")
                })
                .map(|(_, (_, m, _))| m.as_str())
                .collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(
                globbed.get(&pid).copied().unwrap_or(0),
                names.len(),
                "{name}: pid {pid}: probes made by the glob"
            );
        }
        assert!(
            passed > 0 && written > 100,
            "{name}: {passed} passed, {written} written"
        );
        for (label, p) in [("session", &by_session), ("written", &by_hook)] {
            for ((pid, start), (size, method, module)) in &want {
                let look = |a: u64| match p.managed_lookup(*pid, a) {
                    Lookup::Sym {
                        module,
                        name,
                        start,
                    } => Some((module, name, start)),
                    _ => None,
                };
                let want_sym = Some((module.clone(), method.clone(), *start));
                assert_eq!(
                    look(*start),
                    want_sym,
                    "{name} {label}: pid {pid} {start:x}"
                );
                assert_eq!(
                    look(start + size - 1),
                    want_sym,
                    "{name} {label}: last byte of {method}"
                );
                assert_ne!(
                    look(start + size).map(|s| s.2),
                    Some(*start),
                    "{name} {label}: the byte after {method}"
                );
            }
        }
        // a probe made now on a method with several code versions (or the program's first
        // method) has a site at each version's start
        let mut versions: HashMap<(u32, &str, &str), Vec<u64>> = HashMap::new();
        for ((pid, start), (_, method, module)) in &want {
            if !method.contains(':') && !method.contains(' ') && module != "?" {
                versions
                    .entry((*pid, module.as_str(), method.as_str()))
                    .or_default()
                    .push(*start);
            }
        }
        let ((pid, module, method), starts) = versions
            .iter()
            .max_by_key(|(k, v)| (v.len(), std::cmp::Reverse(k.2)))
            .expect("a method");
        let got = by_session
            .try_matching(&d(format!("pid{pid}:{module}:{method}:entry")))
            .unwrap_or_else(|e| panic!("{name}: {method}: {e:?}"));
        assert_eq!(got.len(), 1, "{name}: {module}`{method}");
        let probe = by_session
            .probes_of(*pid)
            .into_iter()
            .find(|p| p.info.id == got[0].id)
            .expect("probe");
        let mut sites: Vec<u64> = probe.sites.iter().map(|s| s.addr).collect();
        let mut starts = starts.clone();
        sites.sort_unstable();
        sites.dedup();
        starts.sort_unstable();
        assert_eq!(sites, starts, "{name}: {module}`{method}");
        eprintln!(
            "{name}: {} methods, {passed} records through the callback, {written} written; \
             {method} has {} code versions",
            want.len(),
            starts.len()
        );
    }
}

#[test]
fn dotnet_pid_live_clr_context_takes_only_its_process() {
    let Some(trace) = etl::trace("perfview_net.4.5.2.x64.etl.zip") else {
        return;
    };
    let file = dtx::etw::reader::EtlFile::open_path(&trace).expect("open trace");
    let cx = ClrContext::new(1, *file.time_base());
    let mut it = file.events();
    let mut dotnet = 0;
    while let Some(r) = it.next_event() {
        let Ok(ev) = r else { continue };
        if dtx::providers::etw::dnet::is_dotnet(&ev) {
            dotnet += 1;
            clr::pass_to_clr_callback(&LiveEvent::from_record(&ev), &cx);
        }
    }
    assert!(dotnet > 100);
    assert_eq!(cx.records(), 0, "records of other processes were taken");
    assert!(cx.take_ready(true).is_empty());
}

/// (pid, start) → (size, Namespace.Type.Method, assembly) of the methods the traces' rundown
/// lists (MethodDCEndVerbose, named by ModuleDCEnd), as dtx's `dnet` probes print them with
/// `-E`: what a rundown run to its completion event must have put in the table.
fn rundown_recorded(trace: &str) -> HashMap<(u32, u64), (u64, String, String)> {
    recorded_by(
        trace,
        "dnet::rundown:method-dcend",
        "dnet::rundown:module-dcend",
    )
}

/// A .NET process whose methods a rundown gave (or failed to give) when the provider first
/// read it, as the Windows module reader hands over the rundown it ran before `-p` grabbed
/// the process.
struct RundownProcess(Result<Vec<dtx::symbols::managed::ManagedMethod>, String>);

impl ProcessReader for RundownProcess {
    fn maps(&self, pid: u32) -> Result<(String, String), String> {
        ClrProcess.maps(pid)
    }
    fn read_memory(&self, pid: u32, addr: u64, buf: &mut [u8]) -> bool {
        ClrProcess.read_memory(pid, addr, buf)
    }
    fn clr_events(&self) -> bool {
        true
    }
    fn clr_rundown(
        &self,
        _pid: u32,
    ) -> Option<Result<Vec<dtx::symbols::managed::ManagedMethod>, String>> {
        Some(self.0.clone())
    }
}

/// The records of the rundown provider of .NET process `pid`, in trace order: what a session
/// that enables only that provider for that pid (the synchronous rundown of `-l -p` and `-p`)
/// receives.
fn rundown_records(trace: &str, pid: u32) -> Vec<LiveEvent> {
    let file = dtx::etw::reader::EtlFile::open_path(trace).expect("open trace");
    let mut it = file.events();
    let mut v = Vec::new();
    while let Some(r) = it.next_event() {
        let Ok(ev) = r else { continue };
        if ev.pid == pid && ev.provider == dtx::providers::etw::dnet::RUNDOWN {
            v.push(LiveEvent::from_record(&ev));
        }
    }
    v
}

#[test]
fn dotnet_pid_live_rundown_ends_with_its_completion_event() {
    for name in [
        "perfview_net.4.5.2.x64.etl.zip",
        "perfview_net.4.5.2.x86.etl.zip",
    ] {
        let Some(trace) = etl::trace(name) else {
            return;
        };
        let want = rundown_recorded(&trace);
        let pids: std::collections::BTreeSet<u32> = want.keys().map(|(p, _)| *p).collect();
        assert!(!pids.is_empty(), "{name}: no rundown");
        let time = *dtx::etw::reader::EtlFile::open_path(&trace)
            .expect("open trace")
            .time_base();
        for pid in pids {
            let records = rundown_records(&trace, pid);
            // these traces hold PerfView's end rundown, in two passes each ending with its
            // DCEndComplete: the loader's (ModuleDCEnd, AssemblyDCEnd, ...), then the methods'
            // (DCEndInit, MethodDCEndVerbose, ModuleDCEnd, DCEndComplete). A start rundown is
            // the same with DCStart events and DCStartComplete. The last pass is the one
            // that lists the methods, as one enable of the provider would.
            let completes: Vec<usize> = records
                .iter()
                .enumerate()
                .filter(|(_, e)| {
                    e.header.descriptor.id == dtx::providers::etw::dnet::DC_END_COMPLETE
                })
                .map(|(i, _)| i)
                .collect();
            let complete_at = *completes
                .last()
                .unwrap_or_else(|| panic!("{name}: pid {pid}: no DCEndComplete"));
            let from = completes.iter().rev().nth(1).map_or(0, |i| i + 1);
            let cx = std::sync::Arc::new(ClrContext::new(pid, time));
            // the passes before the last, as they came: rundowns that named modules only
            for ev in &records[..from] {
                clr::pass_to_clr_callback(ev, &cx);
            }
            let before = cx.rundowns_complete();
            assert_eq!(before as usize, completes.len() - 1, "{name}: pid {pid}");
            assert!(
                cx.take_ready(false).is_empty(),
                "{name}: methods before the last pass"
            );
            // every record through the session's callback on a thread of its own, as
            // ProcessTrace delivers them, while dtx waits for the completion event
            let feeder = {
                let cx = cx.clone();
                let records = records[from..=complete_at].to_vec();
                std::thread::spawn(move || {
                    for (i, ev) in records.iter().enumerate() {
                        assert_eq!(cx.rundowns_complete(), before, "complete before record {i}");
                        clr::pass_to_clr_callback(ev, &cx);
                    }
                })
            };
            let waited = clr::wait_for_rundown(
                &cx,
                before,
                std::time::Duration::from_secs(60),
                std::time::Duration::from_millis(5),
                &|| false,
            );
            feeder.join().expect("feeder");
            assert_eq!(waited, Ok(()), "{name}: pid {pid}");
            assert_eq!(cx.rundowns_complete(), before + 1);
            // what the rundown listed, each method named by its assembly (the modules came
            // after the methods, before the completion event)
            let got = cx.take_ready(false);
            let got_map: HashMap<u64, (u64, String, String)> = got
                .iter()
                .map(|m| (m.start, (m.size, m.name.clone(), m.module.clone())))
                .collect();
            let want_pid: HashMap<u64, (u64, String, String)> = want
                .iter()
                .filter(|((p, _), _)| *p == pid)
                .map(|((_, s), v)| (*s, v.clone()))
                .collect();
            assert_eq!(got_map.len(), want_pid.len(), "{name}: pid {pid}");
            assert_eq!(got_map, want_pid, "{name}: pid {pid}");
            assert!(cx.take_ready(true).is_empty(), "{name}: left waiting");

            // the table the pid provider starts from: `-l -p PID -n 'pidPID:mscorlib::'`
            let p = PidProvider::new(Box::new(RundownProcess(Ok(got.clone()))));
            let d = |s: String| ProbeDesc::parse(&s).expect("description");
            let listed = p
                .try_matching(&d(format!("pid{pid}:mscorlib::")))
                .expect("listing");
            let mut names: Vec<&str> = want_pid
                .values()
                .filter(|(_, _, m)| m == "mscorlib")
                .map(|(_, n, _)| n.as_str())
                .collect();
            names.sort_unstable();
            names.dedup();
            assert!(
                names.len() > 100,
                "{name}: {} mscorlib methods",
                names.len()
            );
            assert_eq!(
                listed.len(),
                2 * names.len(),
                "{name}: entry and return each"
            );
            assert!(listed.iter().all(|i| i.module == "mscorlib"));
            // a glob over methods with -p matches like a native one, without -Z
            let strings = names
                .iter()
                .filter(|n| n.starts_with("System.String."))
                .count();
            let globbed = p
                .try_matching(&d(format!("pid{pid}:mscorlib:System.String.*:entry")))
                .expect("glob");
            assert_eq!(globbed.len(), strings, "{name}");
            assert!(strings > 5, "{name}: {strings} String methods");
            // and one that matches nothing says why
            let none = d(format!("pid{pid}:mscorlib:No.Such.*:entry"));
            assert!(p.try_matching(&none).expect("no match").is_empty());
            let why = p.why_none(&none).expect("why");
            assert!(
                why.contains(&format!("pid {pid} runs .NET"))
                    && why.contains("compiled so far")
                    && why.contains("-Z"),
                "{why}"
            );
            eprintln!(
                "{name}: pid {pid}: {} records to DCEndComplete, {} methods, {} listed",
                complete_at + 1 - from,
                got.len(),
                listed.len()
            );
        }
    }
}

#[test]
fn dotnet_pid_live_rundown_without_completion_is_said() {
    // no completion event: the wait ends, and a glob over the methods says why
    let cx = ClrContext::new(7, dtx::etw::reader::logfile::TimeBase::default());
    let short = std::time::Duration::from_millis(30);
    assert_eq!(
        clr::wait_for_rundown(&cx, 0, short, std::time::Duration::from_millis(5), &|| {
            false
        }),
        Err(clr::RundownUnfinished::TimedOut)
    );
    assert_eq!(
        clr::wait_for_rundown(&cx, 0, short * 100, short, &|| true),
        Err(clr::RundownUnfinished::Stopped)
    );
    let words = clr::rundown_unfinished_words(7, clr::RundownUnfinished::TimedOut);
    assert!(
        words.contains("pid 7") && words.contains("DCStartComplete"),
        "{words}"
    );
    let p = PidProvider::new(Box::new(RundownProcess(Err(words.clone()))));
    let d = |s: &str| ProbeDesc::parse(s).expect("description");
    let e = p
        .try_matching(&d("pid7:app::"))
        .expect_err("a listing with no rundown");
    assert_eq!(e.message, words);
    let e = p
        .try_matching(&d("pid7:app:*Parse*:entry"))
        .expect_err("a glob with no rundown");
    assert_eq!(e.message, words);
    // a method named exactly still gets its probe, armed when the run's session reports it
    let one = p
        .try_matching(&d("pid7:app:Work.Add:entry"))
        .expect("named method");
    assert_eq!(one.len(), 1);
}
