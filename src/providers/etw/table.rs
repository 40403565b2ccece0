//! The one table of the kernel providers: every probe, the kernel events (group, opcode) that
//! fire it, the module that builds its firing, and its argument types. Both the decision to
//! decode a record ([`super::Interest::wants`]) and the firings of a decoded record
//! ([`super::EtwProbes::firings`]) come from it.

use std::sync::OnceLock;

/// Kernel groups (`HookId >> 8`).
pub mod group {
    pub const DISK_IO: u8 = 0x01;
    pub const PAGE_FAULT: u8 = 0x02;
    pub const PROCESS: u8 = 0x03;
    pub const FILE_IO: u8 = 0x04;
    pub const THREAD: u8 = 0x05;
    pub const TCP_IP: u8 = 0x06;
    pub const UDP_IP: u8 = 0x08;
    pub const REGISTRY: u8 = 0x09;
    pub const CONFIG: u8 = 0x0B;
    pub const PERF_INFO: u8 = 0x0F;
    pub const IMAGE: u8 = 0x14;
}
use group::*;

/// The module that turns a kernel event into the firing of one of its probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Area {
    /// `diag`: fired by the walk itself (every record, lost events), not by an event class.
    Diag,
    Sched,
    Proc,
    Io,
    /// PerfInfo: `profile:::sample-N`, `syscall`, `isr`, `dpc`.
    Perf,
    Pf,
}

/// One argument: its native type (what `argN` points at or holds) and, when `args[N]` is
/// translated, the translated type (DTrace's `dtargd_native` / `dtargd_xlate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeArg {
    pub native: &'static str,
    pub xlate: Option<&'static str>,
}

/// One probe of a kernel provider.
#[derive(Clone, Copy, Debug)]
pub struct KernelProbe {
    pub provider: &'static str,
    pub name: &'static str,
    /// The kernel events (group, opcode) that fire it.
    pub events: &'static [(u8, u8)],
    pub area: Area,
    pub args: &'static [ProbeArg],
}

const fn p(
    provider: &'static str,
    name: &'static str,
    area: Area,
    events: &'static [(u8, u8)],
    args: &'static [ProbeArg],
) -> KernelProbe {
    KernelProbe {
        provider,
        name,
        events,
        area,
        args,
    }
}

/// The probes of the kernel providers. A probe's id is `FIRST_ID` + its index here, so new
/// probes go at the end.
pub static KERNEL_PROBES: &[KernelProbe] = &[
    p("diag", "events", Area::Diag, &[], &[]),
    p("diag", "lostevent", Area::Diag, &[], &[]),
    // a CSwitch fires off-cpu (the old thread) before on-cpu (the new one): the probes of one
    // event fire in table order
    p("sched", "off-cpu", Area::Sched, &[(THREAD, 36)], &[]),
    p("sched", "on-cpu", Area::Sched, &[(THREAD, 36)], &[]),
    p("sched", "wakeup", Area::Sched, &[(THREAD, 50)], &[]),
    p("proc", "start", Area::Proc, &[(PROCESS, 1)], &[]),
    p("proc", "exit", Area::Proc, &[(PROCESS, 2)], &[]),
    p("proc", "lwp-start", Area::Proc, &[(THREAD, 1)], &[]),
    p("proc", "lwp-exit", Area::Proc, &[(THREAD, 2)], &[]),
    p("proc", "module-load", Area::Proc, &[(IMAGE, 10)], &[]),
    p("proc", "module-unload", Area::Proc, &[(IMAGE, 2)], &[]),
    p(
        "io",
        "start",
        Area::Io,
        &[(DISK_IO, 12), (DISK_IO, 13)],
        &[],
    ),
    p("io", "done", Area::Io, &[(DISK_IO, 10), (DISK_IO, 11)], &[]),
    p("isr", "isr", Area::Perf, &[(PERF_INFO, 67)], &[]),
    p("dpc", "dpc", Area::Perf, &[(PERF_INFO, 68)], &[]),
    p("dpc", "timer", Area::Perf, &[(PERF_INFO, 69)], &[]),
    p("dpc", "thread", Area::Perf, &[(PERF_INFO, 66)], &[]),
    p("syscall", "entry", Area::Perf, &[(PERF_INFO, 51)], &[]),
    p("syscall", "return", Area::Perf, &[(PERF_INFO, 52)], &[]),
    p("pf", "hardflt", Area::Pf, &[(PAGE_FAULT, 32)], &[]),
    p("profile", "sample-1ms", Area::Perf, &[(PERF_INFO, 46)], &[]),
];

/// Kernel groups are below this (the table's groups; StackWalk is 0x18).
pub const GROUPS: usize = 0x20;

/// The probe indexes each (group, opcode) fires, sorted by key (`group << 8 | opcode`).
fn index() -> &'static [(u16, u16)] {
    static INDEX: OnceLock<Vec<(u16, u16)>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut v: Vec<(u16, u16)> = KERNEL_PROBES
            .iter()
            .enumerate()
            .flat_map(|(i, p)| {
                p.events
                    .iter()
                    .map(move |&(g, op)| ((g as u16) << 8 | op as u16, i as u16))
            })
            .collect();
        v.sort_unstable(); // by key, then by table order
        v
    })
}

/// The indexes (in [`KERNEL_PROBES`]) of the probes a kernel event fires.
pub fn probes_of(group: u8, opcode: u8) -> impl Iterator<Item = usize> {
    let key = (group as u16) << 8 | opcode as u16;
    let idx = index();
    let start = idx.partition_point(|&(k, _)| k < key);
    idx[start..]
        .iter()
        .take_while(move |&&(k, _)| k == key)
        .map(|&(_, i)| i as usize)
}

/// The index of a probe by provider and name.
pub fn position(provider: &str, name: &str) -> Option<usize> {
    KERNEL_PROBES
        .iter()
        .position(|p| p.provider == provider && p.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_fit_the_interest_sets_and_names_are_unique() {
        for (i, p) in KERNEL_PROBES.iter().enumerate() {
            for &(g, op) in p.events {
                assert!(
                    (g as usize) < GROUPS && op < 128,
                    "{}:::{}",
                    p.provider,
                    p.name
                );
                assert!(probes_of(g, op).any(|j| j == i));
            }
            assert_eq!(position(p.provider, p.name), Some(i));
        }
        assert!(probes_of(THREAD, 36).count() == 2);
        assert_eq!(probes_of(THREAD, 99).count(), 0);
    }
}
