//! DTrace's portable probes that ETW's kernel events feed, over the real traces of
//! `../shared/etl` and `../shared/etl-win11`: `io:::start` with its I/O's size and file,
//! `sched:::enqueue` and `dequeue`, `proc:::exec-success`, `proc:::module-load`, and
//! `lwpsinfo_t`'s `pr_tname`. What each probe should give is worked out here from the records
//! themselves: the reader hands over the raw records and this file reads their payloads by
//! the documented layouts (DiskIo_TypeGroup1/2/3, FileIo_Name, CSwitch, Process, Image,
//! Thread), without the decoder, the system state or the providers under test. Skips when the
//! traces are absent.

use crate::support::etl;

use std::collections::{HashMap, HashSet};

use etl::shared;

use dtx::etw::reader::EtlFile;
use dtx::etw::record::EventRecord;

const DISK_IO: u8 = 0x01;
const PROCESS: u8 = 0x03;
const FILE_IO: u8 = 0x04;
const THREAD: u8 = 0x05;
const IMAGE: u8 = 0x14;

/// `dtx -q -E trace -n prog`, which must succeed: its output lines.
fn dtx_lines(trace: &str, prog: &str) -> Vec<String> {
    (etl::quiet(trace, prog).lines())
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// Calls `f` with every record of the trace, in timestamp order.
fn each_record(trace: &str, mut f: impl FnMut(&EventRecord<'_>)) {
    let file = EtlFile::open_path(trace).unwrap();
    let mut it = file.events();
    while let Some(r) = it.next_event() {
        if let Ok(ev) = r {
            f(&ev);
        }
    }
}

fn u32_at(p: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(p.get(off..off + 4)?.try_into().ok()?))
}

fn u64_at(p: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(p.get(off..off + 8)?.try_into().ok()?))
}

/// A pointer-sized field.
fn ptr_at(ev: &EventRecord<'_>, off: usize) -> Option<u64> {
    if ev.pointer_size == 4 {
        u32_at(ev.payload, off).map(u64::from)
    } else {
        u64_at(ev.payload, off)
    }
}

/// A NUL-terminated UTF-16 string at `off`.
fn utf16_at(p: &[u8], off: usize) -> String {
    let units: Vec<u16> = p
        .get(off..)
        .unwrap_or(&[])
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .take_while(|&u| u != 0)
        .collect();
    String::from_utf16_lossy(&units)
}

/// One start of the trace, as its records say: the flags of its kind, the IRP, and what its
/// completion says (size, file object) when the trace holds it.
struct ExpectedStart {
    flags: u64,
    irp: u64,
    done: Option<(u64, u64)>,
}

/// The starts of a trace, and the names each file object is given (by FileIo Name,
/// FileCreate and FileRundown records).
fn expected_starts(trace: &str) -> (Vec<ExpectedStart>, HashMap<u64, HashSet<String>>) {
    let mut starts: Vec<ExpectedStart> = Vec::new();
    // IRP → (start opcode, index in `starts`) of the start in flight
    let mut in_flight: HashMap<u64, (u8, usize)> = HashMap::new();
    let mut names: HashMap<u64, HashSet<String>> = HashMap::new();
    each_record(trace, |ev| {
        let p = ev.pointer_size as usize;
        match (ev.kernel_group, ev.opcode) {
            // ReadInit, WriteInit, FlushInit: Irp first
            (Some(DISK_IO), op @ (12 | 13 | 15)) => {
                let irp = ptr_at(ev, 0).unwrap();
                let flags = match op {
                    12 => 1,
                    13 => 2,
                    _ => 4,
                };
                in_flight.insert(irp, (op, starts.len()));
                starts.push(ExpectedStart {
                    flags,
                    irp,
                    done: None,
                });
            }
            // Read, Write: DiskNumber, IrpFlags, TransferSize, Reserved, ByteOffset,
            // FileObject, Irp, ...
            (Some(DISK_IO), op @ (10 | 11)) => {
                let irp = ptr_at(ev, 24 + p).unwrap();
                if let Some((start_op, i)) = in_flight.remove(&irp) {
                    if start_op == op + 2 {
                        let size = u32_at(ev.payload, 8).unwrap() as u64;
                        let file = ptr_at(ev, 24).unwrap();
                        starts[i].done = Some((size, file));
                    }
                }
            }
            // FlushBuffers: DiskNumber, IrpFlags, HighResResponseTime, Irp
            (Some(DISK_IO), 14) => {
                let irp = ptr_at(ev, 16).unwrap();
                if let Some((15, i)) = in_flight.remove(&irp) {
                    starts[i].done = Some((0, 0));
                }
            }
            // Name, FileCreate, FileRundown: FileObject, FileName
            (Some(FILE_IO), 0 | 32 | 36) => {
                let obj = ptr_at(ev, 0).unwrap();
                let name = utf16_at(ev.payload, p);
                if !name.is_empty() {
                    names.entry(obj).or_default().insert(name);
                }
            }
            _ => {}
        }
    });
    (starts, names)
}

/// io:::start gives each I/O the size of its completion (paired by IRP and kind) and the
/// name of its file, on the two PerfView traces and the Windows 11 one: every start line of
/// dtx (flags, IRP, b_bcount, fi_pathname) is the one the records give, where the file
/// object's name is unambiguous.
#[test]
fn io_start_has_the_size_and_file_of_its_completion() {
    let traces = [
        shared("etl", "perfview_net.4.5.2.x64.etl.zip"),
        shared("etl", "perfview_net.4.5.2.x86.etl.zip"),
        shared("etl-win11", "filtrace_diskio.etl"),
    ];
    for trace in traces.into_iter().flatten() {
        let (starts, names) = expected_starts(&trace);
        let got = dtx_lines(
            &trace,
            "io:::start { printf(\"%d %x %d %s\\n\", args[0]->b_flags,
                 (uint64_t)args[0]->b_addr, args[0]->b_bcount, args[2]->fi_pathname); }",
        );
        assert_eq!(got.len(), starts.len(), "{trace}");
        let (mut sized, mut named, mut ambiguous) = (0, 0, 0);
        for (line, want) in got.iter().zip(&starts) {
            let mut f = line.splitn(4, ' ');
            let (flags, irp, size, file) = (
                f.next().unwrap(),
                f.next().unwrap(),
                f.next().unwrap(),
                f.next().unwrap_or(""),
            );
            assert_eq!(flags, want.flags.to_string(), "{trace}: {line}");
            assert_eq!(irp, format!("{:x}", want.irp), "{trace}: {line}");
            let (want_size, obj) = want.done.unwrap_or((0, 0));
            assert_eq!(size, want_size.to_string(), "{trace}: {line}");
            sized += (want_size > 0) as usize;
            match names.get(&obj) {
                Some(n) if n.len() == 1 => {
                    assert_eq!(Some(file), n.iter().next().map(|s| s.as_str()), "{line}");
                    named += 1;
                }
                Some(_) => ambiguous += 1,
                None => assert_eq!(file, "<none>", "{trace}: {line}"),
            }
        }
        // the figures the trace's records give: most starts have a size and a named file
        // (the Windows 11 trace reuses file objects for several names)
        eprintln!(
            "{trace}: {} starts, {sized} sized, {named} named, {ambiguous} of reused file objects",
            starts.len()
        );
        assert!(
            sized * 10 > starts.len() * 9,
            "{trace}: {sized} of {}",
            starts.len()
        );
        assert!(
            named * 2 > starts.len(),
            "{trace}: {named} of {}",
            starts.len()
        );
    }
}

/// A CSwitch record's (NewThreadId, OldThreadId, OldThreadState).
fn cswitch(ev: &EventRecord<'_>) -> Option<(u32, u32, u8)> {
    (ev.kernel_group == Some(THREAD) && ev.opcode == 36).then(|| {
        (
            u32_at(ev.payload, 0).unwrap(),
            u32_at(ev.payload, 4).unwrap(),
            ev.payload[14],
        )
    })
}

/// `tid count` lines into a map.
fn counts(lines: &[String], prefix: &str) -> HashMap<u32, u64> {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(|l| {
            let (t, n) = l.trim().split_once(' ').unwrap();
            (t.parse().unwrap(), n.trim().parse().unwrap())
        })
        .collect()
}

/// sched:::sleep fires in every thread a CSwitch leaves Waiting; sched:::dequeue fires for every thread a CSwitch takes to run (not the idle thread), on the
/// CSwitch's CPU, before its on-cpu; sched:::enqueue for every thread a CSwitch leaves still
/// runnable (Ready or DeferredReady) and every thread a ReadyThread readies, per thread as
/// often as the records say.
#[test]
fn sched_queue_probes_follow_the_context_switches() {
    let traces = [
        shared("etl", "randomascii_slow_ppt_trace.etl.zip"),
        shared("etl-win11", "filtrace_etw.etl"),
    ];
    for trace in traces.into_iter().flatten() {
        let mut deq: HashMap<u32, u64> = HashMap::new();
        let mut enq: HashMap<u32, u64> = HashMap::new();
        let mut sleep: HashMap<u32, u64> = HashMap::new();
        let mut switches_to_a_thread = 0u64;
        each_record(&trace, |ev| {
            if let Some((new, old, state)) = cswitch(ev) {
                if new != 0 {
                    *deq.entry(new).or_default() += 1;
                    switches_to_a_thread += 1;
                }
                if old != 0 && matches!(state, 1 | 7) {
                    *enq.entry(old).or_default() += 1;
                }
                if old != 0 && state == 5 {
                    *sleep.entry(old).or_default() += 1;
                }
            }
            if ev.kernel_group == Some(THREAD) && ev.opcode == 50 {
                *enq.entry(u32_at(ev.payload, 0).unwrap()).or_default() += 1;
            }
        });
        let out = dtx_lines(
            &trace,
            "sched:::dequeue { @d[args[0]->pr_lwpid] = count(); last = args[0]->pr_lwpid;
                 @dcpu[args[2]->cpu_id == cpu] = count(); }
             sched:::enqueue { @e[args[0]->pr_lwpid] = count(); }
             sched:::sleep { @s[tid] = count(); }
             sched:::on-cpu /tid != 0/ { @order[tid == last] = count(); }
             END { printa(\"deq %d %@d\\n\", @d); printa(\"enq %d %@d\\n\", @e);
                   printa(\"sleep %d %@d\\n\", @s);
                   printa(\"order %d %@d\\n\", @order); printa(\"dcpu %d %@d\\n\", @dcpu); }",
        );
        assert_eq!(counts(&out, "deq "), deq, "{trace}");
        assert_eq!(counts(&out, "enq "), enq, "{trace}");
        assert_eq!(counts(&out, "sleep "), sleep, "{trace}");
        let order = format!("order 1 {switches_to_a_thread}");
        let dcpu = format!("dcpu 1 {switches_to_a_thread}");
        assert!(out.contains(&order), "{trace}: {order} in {out:?}");
        assert!(out.contains(&dcpu), "{trace}: {dcpu} in {out:?}");
        eprintln!(
            "{trace}: {switches_to_a_thread} dequeues, {} enqueues",
            enq.values().sum::<u64>()
        );
    }
}

/// proc:::exec-success fires once for each process whose Start the trace has and which then
/// loads an image, at its first image load (its executable: dtx's execname is the loaded
/// file's name), in that process; proc:::module-load fires for every Image Load record,
/// whichever group logged it.
#[test]
fn exec_success_fires_at_a_started_process_first_image_load() {
    let traces = [
        shared("etl-win11", "filtrace_etw.etl"),
        shared("etl", "randomascii_slow_ppt_trace.etl.zip"),
        shared("etl", "perfview_net.4.5.2.x64.etl.zip"),
    ];
    for trace in traces.into_iter().flatten() {
        let mut started: HashSet<u32> = HashSet::new();
        let mut loaded: HashSet<u32> = HashSet::new();
        // (pid, file name of its first image) of each started process
        let mut want: Vec<(u32, String)> = Vec::new();
        let mut loads = 0u64;
        each_record(&trace, |ev| {
            let p = ev.pointer_size as usize;
            match (ev.kernel_group, ev.opcode) {
                // Process Start: UniqueProcessKey, ProcessId, ...
                (Some(PROCESS), 1) => {
                    let pid = u32_at(ev.payload, p).unwrap();
                    started.insert(pid);
                    loaded.remove(&pid);
                }
                // Image Load: ImageBase, ImageSize, ProcessId, Checksum, TimeDateStamp,
                // Reserved0 (or the signature bytes), DefaultBase, Reserved1..4, FileName
                (Some(PROCESS | IMAGE), 10) => {
                    loads += 1;
                    let pid = u32_at(ev.payload, 2 * p).unwrap();
                    if started.contains(&pid) && loaded.insert(pid) {
                        let file = utf16_at(ev.payload, 3 * p + 32);
                        let base = file.rsplit('\\').next().unwrap_or("").to_lowercase();
                        want.push((pid, base));
                    }
                }
                _ => {}
            }
        });
        let out = dtx_lines(
            &trace,
            "proc:::exec-success { printf(\"exec %d %s\\n\", pid, execname); }
             proc:::module-load { @loads = count(); }
             END { printa(\"loads %@d\\n\", @loads); }",
        );
        let got: Vec<(u32, String)> = out
            .iter()
            .filter_map(|l| l.strip_prefix("exec "))
            .map(|l| {
                let (pid, name) = l.split_once(' ').unwrap();
                (pid.parse().unwrap(), name.to_string())
            })
            .collect();
        assert_eq!(got.len(), want.len(), "{trace}: {out:?}");
        for ((gp, gname), (wp, wname)) in got.iter().zip(&want) {
            assert_eq!(gp, wp, "{trace}");
            // execname is the process's image name, at most the name's first 15 bytes when
            // the Process record cut it
            assert!(
                !gname.is_empty() && wname.starts_with(gname.as_str()),
                "{trace}: {gname} is not the first image {wname}"
            );
        }
        let loads_line = if loads == 0 {
            None
        } else {
            Some(format!("loads {loads}"))
        };
        assert_eq!(
            out.iter().find(|l| l.starts_with("loads ")).cloned(),
            loads_line,
            "{trace}"
        );
        eprintln!(
            "{trace}: {} started processes, {} exec-success, {loads} image loads",
            started.len(),
            want.len()
        );
    }
}

/// `curlwpsinfo->pr_tname` and off-cpu's `args[0]->pr_tname` are the names the trace's Thread
/// records (Start, End, DCStart, DCEnd: ThreadName; SetName) give the thread, "" for a
/// thread they name none; the Windows 11 trace names some of its .NET threads.
#[test]
fn pr_tname_is_the_thread_name_of_the_records() {
    let Some(trace) = shared("etl-win11", "filtrace_etw.etl") else {
        return;
    };
    let mut names: HashMap<u32, HashSet<String>> = HashMap::new();
    each_record(&trace, |ev| {
        let p = ev.pointer_size as usize;
        let (tid, name) = match (ev.kernel_group, ev.opcode) {
            // ProcessId, TThreadId, 7 pointers, SubProcessTag, 4 priority bytes, ThreadName
            (Some(THREAD), 1..=4) if ev.version >= 3 => (
                u32_at(ev.payload, 4).unwrap(),
                utf16_at(ev.payload, 16 + 7 * p),
            ),
            // SetName: ProcessId, TThreadId, ThreadName
            (Some(THREAD), 72) => (u32_at(ev.payload, 4).unwrap(), utf16_at(ev.payload, 8)),
            _ => return,
        };
        // a thread may be named after its Start: "" is what it had until then
        names.entry(tid).or_default().insert(name);
    });
    let out = dtx_lines(
        &trace,
        "sched:::on-cpu { @[tid, curlwpsinfo->pr_tname] = count(); }
         sched:::off-cpu { @[args[0]->pr_lwpid, args[0]->pr_tname] = count(); }
         END { printa(\"%d|%s|%@d\\n\", @); }",
    );
    let mut named = HashSet::new();
    for l in &out {
        let mut f = l.split('|');
        let tid: u32 = f.next().unwrap().trim().parse().unwrap();
        let name = f.next().unwrap();
        match names.get(&tid) {
            Some(n) => {
                assert!(n.contains(name), "thread {tid}: {name:?} is none of {n:?}");
                if !name.is_empty() {
                    named.insert(tid);
                }
            }
            None => assert_eq!(name, "", "thread {tid}"),
        }
    }
    let in_records = (names.values())
        .filter(|n| n.iter().any(|x| !x.is_empty()))
        .count();
    eprintln!(
        "{in_records} threads named in the records, {} seen named on a CPU",
        named.len()
    );
    assert!(!named.is_empty(), "{out:?}");
}

/// `dtx -l -E` lists the new probes with DTrace's argument types.
#[test]
fn the_portable_probes_are_listed_with_their_arguments() {
    let Some(trace) = shared("etl-win11", "filtrace_etw.etl") else {
        return;
    };
    let out = crate::support::cli::dtx(&[
        "-lv",
        "-E",
        &trace,
        "-n",
        "sched:::enqueue,sched:::dequeue,sched:::sleep,proc:::exec-success,proc:::create,\
         proc:::lwp-create,io:::start",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    // probe name → the types of its args[] lines, from the listing's blocks
    let mut listed: HashMap<String, Vec<String>> = HashMap::new();
    let mut current = String::new();
    for l in text.lines() {
        let first = l.split_whitespace().next().unwrap_or("");
        if first.parse::<u64>().is_ok() {
            current = l.split_whitespace().last().unwrap_or("").to_string();
            listed.entry(current.clone()).or_default();
        } else if let Some((_, ty)) = l
            .trim()
            .strip_prefix("args[")
            .and_then(|r| r.split_once("]: "))
        {
            listed
                .entry(current.clone())
                .or_default()
                .push(ty.to_string());
        }
    }
    for (probe, args) in [
        (
            "enqueue",
            &["lwpsinfo_t *", "psinfo_t *", "cpuinfo_t *", "int"][..],
        ),
        (
            "dequeue",
            &["lwpsinfo_t *", "psinfo_t *", "cpuinfo_t *"][..],
        ),
        ("exec-success", &[][..]),
        ("sleep", &[][..]),
        ("create", &["psinfo_t *"][..]),
        ("lwp-create", &["lwpsinfo_t *", "psinfo_t *"][..]),
        ("start", &["bufinfo_t *", "devinfo_t *", "fileinfo_t *"][..]),
    ] {
        assert_eq!(
            listed.get(probe).map(Vec::as_slice),
            Some(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>()[..]),
            "{probe}:\n{text}"
        );
    }
}

/// proc:::create fires for every Process Start record in the thread that logged it (the
/// creator), with the new process in args[0]; proc:::lwp-create for every Thread Start, with
/// the new thread in args[0] and its process in args[1].
#[test]
fn create_probes_fire_in_the_creating_thread() {
    let traces = [
        shared("etl-win11", "filtrace_etw.etl"),
        shared("etl", "randomascii_slow_ppt_trace.etl.zip"),
    ];
    for trace in traces.into_iter().flatten() {
        let mut want: Vec<String> = Vec::new();
        each_record(&trace, |ev| {
            let p = ev.pointer_size as usize;
            match (ev.kernel_group, ev.opcode) {
                // UniqueProcessKey, ProcessId
                (Some(PROCESS), 1) => want.push(format!(
                    "create {} {}",
                    ev.tid,
                    u32_at(ev.payload, p).unwrap()
                )),
                // ProcessId, TThreadId
                (Some(THREAD), 1) => want.push(format!(
                    "lwp {} {} {}",
                    ev.tid,
                    u32_at(ev.payload, 4).unwrap(),
                    u32_at(ev.payload, 0).unwrap()
                )),
                _ => {}
            }
        });
        let mut got = dtx_lines(
            &trace,
            "proc:::create { printf(\"create %d %d\\n\", tid, args[0]->pr_pid); }
             proc:::lwp-create { printf(\"lwp %d %d %d\\n\", tid, args[0]->pr_lwpid,
                 args[1]->pr_pid); }",
        );
        want.sort();
        got.sort();
        assert_eq!(got, want, "{trace}");
        eprintln!("{trace}: {} creations", want.len());
    }
}

/// `printf("%ws", args[0])` of `proc:::module-load` (a `wchar_t *`, as the Windows port's
/// scripts print it) gives the file name of each Image record of the process, and so does
/// `*(wchar_t(*)[260])args[0]` (the name's buffer holds at least MAX_PATH units).
#[test]
fn module_load_file_name_prints_with_ws() {
    let Some(trace) = shared("etl-win11", "filtrace_diskio.etl") else {
        return;
    };
    let mut want: Vec<String> = Vec::new();
    each_record(&trace, |ev| {
        let p = ev.pointer_size as usize;
        // Image Load (10) and DCStart (3): ImageBase, ImageSize, ProcessId, ..., FileName
        if matches!(ev.kernel_group, Some(PROCESS | IMAGE)) && matches!(ev.opcode, 3 | 10) {
            let pid = u32_at(ev.payload, 2 * p).unwrap();
            if pid == 11112 {
                want.push(utf16_at(ev.payload, 3 * p + 32));
            }
        }
    });
    want.sort();
    assert_eq!(want.len(), 12, "pid 11112's Image records");
    for prog in [
        "proc:::module-load /pid == 11112/ { printf(\"%ws\\n\", args[0]); }",
        "proc:::module-load /pid == 11112/ { printf(\"%ls\\n\", *(wchar_t(*)[260])args[0]); }",
    ] {
        let mut got = dtx_lines(&trace, prog);
        got.sort();
        assert_eq!(got, want, "{prog}");
    }
}

/// The Idle process (pid 0) has the same `execname` whether a Process rundown record names it
/// (the Windows 7 trace: `Idle`) or no record does (the Windows 11 traces, where only its
/// kernel images are recorded).
#[test]
fn idle_process_is_named_with_or_without_a_rundown() {
    let traces = [
        shared("etl", "randomascii_slow_ppt_trace.etl.zip"),
        shared("etl-win11", "filtrace_diskio.etl"),
        shared("etl-win11", "filtrace_etw.etl"),
    ];
    for trace in traces.into_iter().flatten() {
        let got = dtx_lines(
            &trace,
            "sched:::on-cpu /pid == 0/ { @[execname] = count(); }
             END { printa(\"%s\\n\", @); }",
        );
        assert_eq!(got, ["idle"], "{trace}");
    }
}

/// The flamegraph line (`@[pid, ustack(8)] = count()`) over a Windows 11 trace with samples
/// and stacks: a user frame is named by module exactly when an Image record of its process
/// covers it (module name the record's file), and stays a bare address otherwise (the images
/// loaded before the trace began, such as ntdll, which these traces without an image rundown
/// never record). Frames in JIT-compiled code carry the CLR's method names and are not checked
/// here. Multi-frame user stacks with named frames are among them.
#[test]
fn ustack_frames_are_named_by_the_images_the_trace_records() {
    let Some(trace) = shared("etl-win11", "filtrace_etw.etl") else {
        return;
    };
    // pid -> (base, size, file base name) of each Image record (Load, DCStart, DCEnd, Unload)
    let mut images: HashMap<u32, Vec<(u64, u64, String)>> = HashMap::new();
    each_record(&trace, |ev| {
        let p = ev.pointer_size as usize;
        if matches!(ev.kernel_group, Some(PROCESS | IMAGE)) && matches!(ev.opcode, 2 | 3 | 4 | 10) {
            let (Some(base), Some(size), Some(pid)) =
                (ptr_at(ev, 0), ptr_at(ev, p), u32_at(ev.payload, 2 * p))
            else {
                return;
            };
            let file = utf16_at(ev.payload, 3 * p + 32);
            let name = file.rsplit('\\').next().unwrap_or("").to_lowercase();
            images.entry(pid).or_default().push((base, size, name));
        }
    });
    let out = etl::quiet(&trace, "profile-997 { @[pid, ustack(8)] = count(); }");
    let mut lines = out.lines().map(str::trim).filter(|l| !l.is_empty());
    let (mut named, mut bare, mut multi_named) = (0, 0, 0);
    while let Some(pid) = lines.next() {
        let mut w = pid.split_whitespace();
        let pid: u32 = w.next().unwrap().parse().unwrap();
        if w.next().is_some() {
            continue; // an empty user stack: the count is on the key's line
        }
        let mut frames_named = 0;
        for frame in lines.by_ref() {
            if frame.parse::<u64>().is_ok() {
                break; // the count ends the stack
            }
            let recorded = images.get(&pid).map(Vec::as_slice).unwrap_or(&[]);
            if let Some(hex) = frame.strip_prefix("0x") {
                let a = u64::from_str_radix(hex, 16).unwrap();
                assert!(
                    !recorded.iter().any(|(b, s, _)| (*b..b + s).contains(&a)),
                    "pid {pid}: {frame} lies in a recorded image"
                );
                bare += 1;
            } else {
                let module = frame.split(['`', '+']).next().unwrap().to_lowercase();
                if !module.ends_with(".dll") && !module.ends_with(".exe") {
                    continue; // JIT-compiled code, named by the CLR's method records
                }
                assert!(
                    recorded.iter().any(|(_, _, n)| *n == module
                        || n.rsplit_once('.').map(|x| x.0) == Some(&module)),
                    "pid {pid}: {frame} names no recorded image"
                );
                named += 1;
                frames_named += 1;
            }
        }
        multi_named += (frames_named >= 2) as usize;
    }
    assert!(
        named > 0 && bare > 0 && multi_named > 0,
        "{named} {bare} {multi_named}"
    );
}
