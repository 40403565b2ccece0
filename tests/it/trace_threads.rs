//! Threads and processes of a recorded trace as the firings see them, on the Windows 7 xperf
//! trace (randomascii's slow PowerPoint session): every event belongs to its real process
//! from the first record (the thread table is known before the first firing), and each CPU's
//! idle thread is a thread of its own for `self->`. The reference is computed here from the
//! CSwitch records themselves, with the reader and decoder alone. Skips when `../shared/etl`
//! is absent.

use crate::support::etl;
use etl::quiet;

use std::collections::HashMap;

use dtx::etw::decode::Decoder;
use dtx::etw::reader::EtlFile;

const TRACE: &str = "randomascii_slow_ppt_trace.etl.zip";
/// Kernel group of Thread records, and the CSwitch opcode.
const THREAD: u8 = 0x05;
const CSWITCH: u8 = 36;
const PROCESS: u8 = 0x03;

fn cswitch_sums(etl: &EtlFile) -> HashMap<String, u64> {
    let dec = Decoder::new();
    let mut thread_pid: HashMap<u32, u32> = HashMap::new();
    let mut names: HashMap<u32, String> = HashMap::new();
    // per CPU: when the running thread came in, and which it is
    let mut running: HashMap<u16, (u64, u32)> = HashMap::new();
    let mut by_tid: HashMap<u32, u64> = HashMap::new();
    let mut it = etl.events();
    while let Some(r) = it.next_event() {
        let Ok(ev) = r else { continue };
        match (ev.kernel_group, ev.opcode) {
            (Some(THREAD), CSWITCH) => {
                let d = dec.decode(&ev);
                let new = d.u64("NewThreadId").unwrap() as u32;
                if let Some((since, tid)) = running.insert(ev.cpu, (ev.time_ns, new)) {
                    *by_tid.entry(tid).or_default() += ev.time_ns - since;
                }
            }
            (Some(THREAD), 1..=4) => {
                let d = dec.decode(&ev);
                let (tid, pid) = (d.u64("TThreadId").unwrap(), d.u64("ProcessId").unwrap());
                thread_pid.entry(tid as u32).or_insert(pid as u32);
            }
            (Some(PROCESS), 1..=4) => {
                let d = dec.decode(&ev);
                let pid = d.u64("ProcessId").unwrap() as u32;
                let name = d.str("ImageFileName").unwrap().to_ascii_lowercase();
                names.entry(pid).or_insert(name);
            }
            _ => {}
        }
    }
    let mut out: HashMap<String, u64> = HashMap::new();
    for (tid, ns) in by_tid {
        let name = match tid {
            0 => "idle".to_string(),
            t => thread_pid
                .get(&t)
                .and_then(|p| names.get(p))
                .cloned()
                .unwrap_or_else(|| format!("tid {t}")),
        };
        *out.entry(name).or_default() += ns;
    }
    out
}

/// The lines `name value` of a `printa("%s %@d\n", @)` as a map.
fn by_name(out: &str) -> HashMap<String, u64> {
    out.lines()
        .filter_map(|l| {
            let (name, v) = l.rsplit_once(' ')?;
            Some((name.to_string(), v.parse().ok()?))
        })
        .collect()
}

#[test]
fn on_cpu_time_per_process_equals_the_cswitch_records_sums() {
    let Some(t) = etl::trace(TRACE) else { return };
    let etl = EtlFile::open_path(&t).unwrap();
    let want = cswitch_sums(&etl);
    let got = by_name(&quiet(
        &t,
        "sched:::on-cpu { self->ts = timestamp; } \
         sched:::off-cpu /self->ts/ { @[execname] = sum(timestamp - self->ts); self->ts = 0; } \
         END { printa(\"%s %@d\\n\", @); }",
    ));
    for name in ["xperf.exe", "idle"] {
        let (w, g) = (want[name], got[name]);
        let off = (g as f64 - w as f64).abs() / w as f64;
        assert!(
            off < 0.005,
            "{name}: dtx says {g} ns on CPU, the CSwitch records {w} ns ({:.2}% apart)",
            off * 100.0
        );
    }
    // the trace's own figures (issue 22): 687 ms and 124.4 s
    assert_eq!(want["xperf.exe"] / 1_000_000, 687);
    assert_eq!(want["idle"] / 100_000_000, 1244);
}

#[test]
fn a_thread_seen_before_its_thread_record_belongs_to_its_process() {
    let Some(t) = etl::trace(TRACE) else { return };
    // thread 7092 of xperf.exe switches in six times in the first 141 ms, before any record
    // names its process
    let out = quiet(
        &t,
        "sched:::on-cpu /tid == 7092 && timestamp < 141000000/ { @[pid, execname] = count(); } \
         END { printa(\"%d %s %@d\\n\", @); }",
    );
    assert_eq!(out.trim(), "2452 xperf.exe 6", "{out}");
}

#[test]
fn each_cpu_has_its_own_idle_thread() {
    let Some(t) = etl::trace(TRACE) else { return };
    // a CPU's idle thread starts and stops on that CPU: with one idle thread for all CPUs, a
    // `self->cpu` set on one CPU is read back on another
    let out = quiet(
        &t,
        "sched:::on-cpu /tid == 0/ { self->cpu = cpu + 1; } \
         sched:::off-cpu /tid == 0 && self->cpu/ { @[self->cpu - 1 == cpu] = count(); } \
         END { printa(\"%d %@d\\n\", @); }",
    );
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 1, "{out}");
    let (same, n) = lines[0].split_once(' ').unwrap();
    assert_eq!(same, "1", "{out}");
    assert!(n.parse::<u64>().unwrap() > 1000, "{out}");
}

#[test]
fn curthread_tells_threads_apart_and_each_cpus_idle_thread() {
    let Some(t) = etl::trace(TRACE) else { return };
    // one key per thread, and one per CPU for the idle threads: as many `curthread` values
    // as (thread, or CPU for thread 0) pairs
    let out = quiet(
        &t,
        "sched:::on-cpu { @threads[curthread] = count(); \
                          @want[tid == 0 ? 1 << 40 | cpu : tid] = count(); } \
         sched:::on-cpu /tid == 0/ { @idle[curthread] = count(); @cpus[cpu] = count(); } \
         END { printa(\"threads %@d\\n\", @threads); printa(\"want %@d\\n\", @want); \
               printa(\"idle %@d\\n\", @idle); printa(\"cpus %@d\\n\", @cpus); }",
    );
    let counts = |tag: &str| -> Vec<u64> {
        let mut v: Vec<u64> = out
            .lines()
            .filter_map(|l| l.strip_prefix(tag)?.trim().parse().ok())
            .collect();
        v.sort_unstable();
        v
    };
    let (threads, want) = (counts("threads "), counts("want "));
    assert!(threads.len() > 50, "{out}");
    assert_eq!(threads, want);
    // the trace's 8 CPUs each ran their idle thread
    assert_eq!(counts("idle "), counts("cpus "));
    assert_eq!(counts("idle ").len(), 8, "{out}");
}
