//! Kernel probes a trace cannot fire: an enabled `io:::start` over a trace recorded without
//! DiskIo init records would print nothing and exit 0, as if no I/O was started. Before the
//! walk, every enabled kernel probe none of whose records the trace holds is named, once,
//! with the records it needs and the kernel flag that records them, as `xperf -on` and
//! `wpr` profiles spell them (xperf's `-providers K` list: `DISK_IO_INIT`, `FILE_IO`, ...).

use super::table::{Area, KERNEL_PROBES};
use super::{EtwProbes, FIRST_ID};
use crate::etw::decode::{kernel, Source};
use crate::etw::group::{
    DISK_IO, FILE_IO, IMAGE, PAGE_FAULT, PERF_INFO, PROCESS, REGISTRY, TCP_IP, THREAD, UDP_IP,
};

/// One line per kernel flag whose records the trace lacks, naming the enabled probes that
/// wait for them; empty live (no census) or when every enabled probe can fire.
pub fn notes(etw: &EtwProbes, enabled: &dyn Fn(u64) -> bool, traces: usize) -> Vec<String> {
    let Some(held) = &etw.kernel_events else {
        return Vec::new();
    };
    // the kernel flags the trace was recorded with, as far as its records tell: a probe
    // whose flag was on but whose events did not happen (no TCP connect in the trace) is an
    // exact zero, not a probe that cannot fire
    let flags_on: Vec<&str> = held
        .iter()
        .map(|h| flag(((h >> 8) as u8, h as u8)))
        .collect();
    // (flag, class) → the probes waiting for its records, each with their records in words
    type Group<'a> = ((&'a str, &'a str), Vec<(String, String)>);
    let mut lacking: Vec<Group<'_>> = Vec::new();
    for (i, k) in KERNEL_PROBES.iter().enumerate() {
        // `profile-N` says why on its own (the sampler's notes)
        if k.events.is_empty()
            || matches!(k.area, Area::Diag | Area::Perf)
            || !enabled(FIRST_ID + i as u64)
        {
            continue;
        }
        if k.events
            .iter()
            .any(|&(g, op)| held.contains(u16::from(g) << 8 | u16::from(op)))
        {
            continue;
        }
        if flags_on.contains(&flag(k.events[0])) {
            continue;
        }
        let class = kernel::group_name(k.events[0].0).unwrap_or("kernel");
        let key = (flag(k.events[0]), class);
        let probe = (format!("{}:::{}", k.provider, k.name), records(k.events));
        match lacking.iter_mut().find(|(f, _)| *f == key) {
            Some((_, probes)) => probes.push(probe),
            None => lacking.push((key, vec![probe])),
        }
    }
    let which = if traces > 1 {
        format!("none of the {traces} traces has")
    } else {
        "the trace has no".to_string()
    };
    let mut providers = provider_notes(etw, enabled, &which);
    let kernel = lacking.into_iter().map(|((flag, class), probes)| {
        let (what, records) = match probes.as_slice() {
            [(one, records)] => (one.clone(), records.clone()),
            [(a, _), (b, _)] => (format!("{a} and {b}"), format!("{class} records of theirs")),
            [(a, _), (b, _), rest @ ..] => (
                format!("{a}, {b} and {} more probes", rest.len()),
                format!("{class} records of theirs"),
            ),
            [] => (String::new(), String::new()),
        };
        format!(
            "{what} cannot fire: {which} {records} (the kernel flag {flag} records them: \
                 xperf -on {flag}, or a WPR profile with it)"
        )
    });
    let mut v: Vec<String> = kernel.collect();
    v.append(&mut providers);
    v
}

/// The enabled probes of ETW providers (by GUID, `etw:<guid>:...`, or by name, known from a
/// manifest or the catalog) whose provider has no event in the trace.
fn provider_notes(etw: &EtwProbes, enabled: &dyn Fn(u64) -> bool, which: &str) -> Vec<String> {
    let mut v = Vec::new();
    if let Ok(list) = etw.guid_probes.read() {
        for p in list.iter().filter(|p| enabled(p.id)) {
            // a kernel class's GUID fires for kernel records, which the census counts by
            // group, not by GUID
            let kernel_class = kernel::GROUPS.iter().any(|(_, _, g)| *g == p.guid);
            if !kernel_class && !etw.held_guids.contains(&p.guid) {
                let i = p.info();
                v.push(format!(
                    "etw:{}:{}:{} cannot fire: {which} events of provider {} (the provider was \
                     not enabled when it was recorded)",
                    i.module, i.function, i.name, p.guid
                ));
            }
        }
    }
    for p in etw.named.values() {
        let Some(g) = p.guid else { continue };
        if etw.held_guids.contains(&g) {
            continue;
        }
        let ids = [p.events, p.capturestate]
            .into_iter()
            .chain(p.keywords.iter().map(|k| k.2));
        if ids.into_iter().any(enabled) {
            v.push(format!(
                "{}::: cannot fire: {which} events of provider {} ({g}) (the provider was not \
                 enabled when it was recorded)",
                p.display.to_ascii_lowercase(),
                p.display
            ));
        }
    }
    v
}

/// Why a description of a kernel provider over a trace matched no probe, when the records its
/// probes need are missing: `syscall::NtReadFile:entry` over a trace without system-call
/// records names no call, since those records are where the names come from. `None` live, or
/// when the records are there (the description then names nothing that happened).
pub fn why_none(
    etw: &EtwProbes,
    provider: &str,
    desc: &crate::probes::ProbeDesc,
) -> Option<String> {
    etw.kernel_events.as_ref()?;
    let wanted = |id: u64| {
        id.checked_sub(FIRST_ID)
            .and_then(|i| KERNEL_PROBES.get(i as usize))
            .is_some_and(|k| {
                k.provider == provider && crate::probes::glob_match(&desc.name, k.name)
            })
    };
    let lines = notes(etw, &wanted, 1);
    if lines.is_empty() {
        return None;
    }
    let why: Vec<&str> = lines
        .iter()
        .map(|l| {
            l.split_once(" cannot fire: ")
                .map_or(l.as_str(), |(_, w)| w)
        })
        .collect();
    let names = if provider == "syscall" {
        ", and the system calls' names come from those records"
    } else {
        ""
    };
    Some(format!("{}{names}", why.join("; ")))
}

/// The kernel flag (xperf's name) that records a kernel event.
fn flag((g, op): (u8, u8)) -> &'static str {
    match (g, op) {
        (THREAD, 36) => "CSWITCH",
        (THREAD, 50) => "DISPATCHER",
        (THREAD, _) | (PROCESS, _) => "PROC_THREAD",
        (IMAGE, _) => "LOADER",
        // ReadInit, WriteInit, FlushInit
        (DISK_IO, 12 | 13 | 15) => "DISK_IO_INIT",
        (DISK_IO, _) => "DISK_IO",
        // OperationEnd is FILE_IO; the operations themselves FILE_IO_INIT
        (FILE_IO, 76) => "FILE_IO",
        (FILE_IO, _) => "FILE_IO_INIT",
        (PERF_INFO, 46) => "PROFILE",
        (PERF_INFO, 47 | 73) => "PMC_PROFILE",
        (PERF_INFO, 51 | 52) => "SYSCALL",
        (PERF_INFO, 67 | 50) => "INTERRUPT",
        (PERF_INFO, 66 | 68 | 69) => "DPC",
        (PAGE_FAULT, 32) => "HARD_FAULTS",
        (PAGE_FAULT, 98 | 99) => "VIRT_ALLOC",
        (PAGE_FAULT, _) => "ALL_FAULTS",
        (TCP_IP, _) | (UDP_IP, _) => "NETWORK",
        (REGISTRY, _) => "REGISTRY",
        _ => "the matching",
    }
}

/// The records of a probe's events in words: `DiskIo ReadInit, WriteInit or FlushInit records`.
fn records(events: &[(u8, u8)]) -> String {
    let class = kernel::group_name(events[0].0).unwrap_or("kernel");
    let mut names: Vec<&str> = Vec::new();
    for &(g, op) in events {
        let n = kernel::LAYOUTS
            .iter()
            .filter(|l| l.source == Source::Kernel(g))
            .find_map(|l| l.event_name(op));
        if let Some(n) = n.filter(|n| !names.contains(n)) {
            names.push(n);
        }
    }
    match names.as_slice() {
        [] => format!("{class} records"),
        [one] => format!("{class} {one} records"),
        [init @ .., last] => format!("{class} {} or {last} records", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_without_its_records_is_named_with_its_flag() {
        let mut etw = EtwProbes::new();
        let mut held = crate::etw::reader::HookSet::default();
        held.insert(DISK_IO, 10);
        held.insert(TCP_IP, 10);
        etw.set_kernel_events(held);
        let id = |p: &str, n: &str| super::super::kernel_id(p, n);
        let start = id("io", "start").unwrap();
        let done = id("io", "done").unwrap();
        let lines = notes(&etw, &|p| p == start || p == done, 1);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("io:::start cannot fire: the trace has no DiskIo "));
        assert!(lines[0].contains("DISK_IO_INIT"), "{}", lines[0]);
        // NETWORK was on (a send): no connect in the trace is an exact zero
        let connect = id("tcpip", "connect").unwrap();
        assert!(notes(&etw, &|p| p == connect, 1).is_empty());
        // live: no census, nothing said
        assert!(notes(&EtwProbes::new(), &|p| p == start, 1).is_empty());
    }
}
