//! The one table of the kernel providers: every probe, the kernel events (group, opcode) that
//! fire it, the module that builds its firing, and its argument types. Both the decision to
//! decode a record ([`super::Interest::wants`]) and the firings of a decoded record
//! ([`super::EtwProbes::firings`]) come from it.

use std::sync::OnceLock;

pub use crate::etw::group;
use group::*;

/// The module that turns a kernel event into the firing of one of its probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Area {
    /// `diag`: fired by the walk itself (every record, lost events, ignored records).
    Diag,
    Sched,
    Proc,
    Io,
    /// PerfInfo: `profile:::sample-N`.
    Perf,
    /// PerfInfo records of interrupt context, which name no thread: `isr`, `dpc`.
    Interrupt,
    /// PerfInfo SysClEnter and SysClExit: `syscall` (see `super::syscall`).
    Syscall,
    Pf,
    Fsinfo,
    /// `tcpip` and `udpip`.
    Net,
    Reg,
    Hwconfig,
    Pmc,
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

const fn x(native: &'static str, xlate: &'static str) -> ProbeArg {
    ProbeArg {
        native,
        xlate: Some(xlate),
    }
}
const fn n(native: &'static str) -> ProbeArg {
    ProbeArg {
        native,
        xlate: None,
    }
}

const IO_ARGS: &[ProbeArg] = &[
    x("buf_t *", "bufinfo_t *"),
    x("buf_t *", "devinfo_t *"),
    x("buf_t *", "fileinfo_t *"),
];
const FS_ARGS: &[ProbeArg] = &[x("wfileinfo_t *", "fileinfo_t *")];
/// A thread and its process (sched:::off-cpu, wakeup; proc:::lwp-start).
const LWP_ARGS: &[ProbeArg] = &[
    x("struct thread *", "lwpsinfo_t *"),
    x("struct thread *", "psinfo_t *"),
];
/// A thread put on a ready queue: the thread, its process, the CPU of the queue, and whether
/// it went to the front (DTrace's `sched:::enqueue`).
const ENQUEUE_ARGS: &[ProbeArg] = &[
    x("struct thread *", "lwpsinfo_t *"),
    x("struct thread *", "psinfo_t *"),
    x("struct thread *", "cpuinfo_t *"),
    n("int"),
];
/// A thread taken off a ready queue: the thread, its process, the CPU (`sched:::dequeue`).
const DEQUEUE_ARGS: &[ProbeArg] = &[
    x("struct thread *", "lwpsinfo_t *"),
    x("struct thread *", "psinfo_t *"),
    x("struct thread *", "cpuinfo_t *"),
];
const MODULE_ARGS: &[ProbeArg] = &[n("wchar_t *"), n("uintptr_t"), n("pid_t"), n("size_t")];
/// diag:::events and ignored: provider name, event id, opcode, payload size, payload.
const DIAG_RECORD_ARGS: &[ProbeArg] = &[
    n("char *"),
    n("uint16_t"),
    n("uint8_t"),
    n("uint32_t"),
    n("void *"),
];
const TCP_ARGS: &[ProbeArg] = &[
    x("tcpip_msg_t *", "ipinfo_t *"),
    x("tcpip_msg_t *", "tcpinfo_t *"),
];
const UDP_ARGS: &[ProbeArg] = &[x("udpip_msg_t *", "udpinfo_t *")];
const FAIL_ARGS: &[ProbeArg] = &[n("uint16_t"), n("uint16_t")];
const REG_ARGS: &[ProbeArg] = &[x("reginfo_t *", "registry_t *")];
/// The payload of the event: arg0 = its address, arg1 = its size, arg2 = 1 for a 64-bit
/// event, arg3 = the event version.
const PAYLOAD_ARGS: &[ProbeArg] = &[n("char *"), n("uint32_t"), n("int"), n("int")];
/// VirtualAddress, ProgramCounter.
const FLT_ARGS: &[ProbeArg] = &[n("uintptr_t"), n("uintptr_t")];

/// The probes of the kernel providers. A probe's id is `FIRST_ID` + its index here, so new
/// probes go at the end.
pub static KERNEL_PROBES: &[KernelProbe] = &[
    p("diag", "events", Area::Diag, &[], DIAG_RECORD_ARGS),
    p("diag", "lostevent", Area::Diag, &[], &[]),
    // a CSwitch fires off-cpu (the old thread) before on-cpu (the new one): the probes of one
    // event fire in table order
    p("sched", "off-cpu", Area::Sched, &[(THREAD, 36)], LWP_ARGS),
    p("sched", "on-cpu", Area::Sched, &[(THREAD, 36)], &[]),
    p("sched", "wakeup", Area::Sched, &[(THREAD, 50)], LWP_ARGS),
    p(
        "proc",
        "start",
        Area::Proc,
        &[(PROCESS, 1)],
        &[x("struct thread *", "psinfo_t *")],
    ),
    p("proc", "exit", Area::Proc, &[(PROCESS, 2)], &[n("int")]),
    p("proc", "lwp-start", Area::Proc, &[(THREAD, 1)], LWP_ARGS),
    p("proc", "lwp-exit", Area::Proc, &[(THREAD, 2)], &[]),
    // an image load is logged as Image Load (Image group) or, on the systems of every trace
    // here, under the Process group's hook with opcode 10 (same layout)
    p(
        "proc",
        "module-load",
        Area::Proc,
        &[(IMAGE, 10), (PROCESS, 10)],
        MODULE_ARGS,
    ),
    p(
        "proc",
        "module-unload",
        Area::Proc,
        &[(IMAGE, 2)],
        MODULE_ARGS,
    ),
    p(
        "io",
        "start",
        Area::Io,
        &[(DISK_IO, 12), (DISK_IO, 13), (DISK_IO, 15)],
        IO_ARGS,
    ),
    p(
        "io",
        "done",
        Area::Io,
        &[(DISK_IO, 10), (DISK_IO, 11), (DISK_IO, 14)],
        IO_ARGS,
    ),
    p("isr", "isr", Area::Interrupt, &[(PERF_INFO, 67)], &[]),
    p("dpc", "dpc", Area::Interrupt, &[(PERF_INFO, 68)], &[]),
    p("dpc", "timer", Area::Interrupt, &[(PERF_INFO, 69)], &[]),
    p("dpc", "thread", Area::Interrupt, &[(PERF_INFO, 66)], &[]),
    p("syscall", "entry", Area::Syscall, &[(PERF_INFO, 51)], &[]),
    p("syscall", "return", Area::Syscall, &[(PERF_INFO, 52)], &[]),
    p(
        "pf",
        "hardflt",
        Area::Pf,
        &[(PAGE_FAULT, 32)],
        &[
            n("wchar_t *"),
            n("uintptr_t"),
            n("int64_t"),
            n("uint64_t"),
            n("uint32_t"),
            n("uint32_t"),
        ],
    ),
    p("profile", "sample-1ms", Area::Perf, &[(PERF_INFO, 46)], &[]),
    // diag (DIAG_IGNORED and the others are fired by the walk)
    p("diag", "ignored", Area::Diag, &[], DIAG_RECORD_ARGS),
    // a StackWalk Stack record (opcode 32) that names no event of the trace
    p(
        "diag",
        "missed-stack",
        Area::Diag,
        &[(STACK_WALK, 32)],
        &[n("uint64_t"), n("uint32_t"), n("uint32_t"), n("uint32_t")],
    ),
    p(
        "diag",
        "missed-ustack",
        Area::Diag,
        &[(STACK_WALK, 32)],
        &[n("uint64_t"), n("uint32_t"), n("uint32_t"), n("uint32_t")],
    ),
    // a .NET ClrStackWalk that follows no event of its thread (fired by the walk)
    p(
        "diag",
        "missed-dnet-stack",
        Area::Diag,
        &[],
        &[n("uint16_t"), n("uint32_t")],
    ),
    // pf
    p(
        "pf",
        "imgload",
        Area::Pf,
        &[(PAGE_FAULT, 105)],
        &[
            n("wchar_t *"),
            n("uint32_t"),
            n("uint32_t"),
            n("uint32_t"),
            n("uintptr_t"),
        ],
    ),
    p(
        "pf",
        "valloc",
        Area::Pf,
        &[(PAGE_FAULT, 98)],
        &[n("uintptr_t"), n("pid_t"), n("size_t"), n("uint32_t")],
    ),
    p(
        "pf",
        "vfree",
        Area::Pf,
        &[(PAGE_FAULT, 99)],
        &[n("uintptr_t"), n("pid_t"), n("size_t"), n("uint32_t")],
    ),
    p("pf", "trans_flt", Area::Pf, &[(PAGE_FAULT, 10)], FLT_ARGS),
    p("pf", "dzero_flt", Area::Pf, &[(PAGE_FAULT, 11)], FLT_ARGS),
    p("pf", "cow_flt", Area::Pf, &[(PAGE_FAULT, 12)], FLT_ARGS),
    p("pf", "gp_flt", Area::Pf, &[(PAGE_FAULT, 13)], FLT_ARGS),
    p("pf", "hp_flt", Area::Pf, &[(PAGE_FAULT, 14)], FLT_ARGS),
    p("pf", "av_flt", Area::Pf, &[(PAGE_FAULT, 15)], FLT_ARGS),
    // fsinfo
    p("fsinfo", "create", Area::Fsinfo, &[(FILE_IO, 64)], FS_ARGS),
    p("fsinfo", "cleanup", Area::Fsinfo, &[(FILE_IO, 65)], FS_ARGS),
    p("fsinfo", "close", Area::Fsinfo, &[(FILE_IO, 66)], FS_ARGS),
    p("fsinfo", "read", Area::Fsinfo, &[(FILE_IO, 67)], FS_ARGS),
    p("fsinfo", "write", Area::Fsinfo, &[(FILE_IO, 68)], FS_ARGS),
    p("fsinfo", "setinfo", Area::Fsinfo, &[(FILE_IO, 69)], FS_ARGS),
    p("fsinfo", "delete", Area::Fsinfo, &[(FILE_IO, 70)], FS_ARGS),
    p("fsinfo", "rename", Area::Fsinfo, &[(FILE_IO, 71)], FS_ARGS),
    p("fsinfo", "direnum", Area::Fsinfo, &[(FILE_IO, 72)], FS_ARGS),
    p("fsinfo", "flush", Area::Fsinfo, &[(FILE_IO, 73)], FS_ARGS),
    p(
        "fsinfo",
        "queryinfo",
        Area::Fsinfo,
        &[(FILE_IO, 74)],
        FS_ARGS,
    ),
    p(
        "fsinfo",
        "fscontrol",
        Area::Fsinfo,
        &[(FILE_IO, 75)],
        FS_ARGS,
    ),
    p("fsinfo", "done", Area::Fsinfo, &[(FILE_IO, 76)], FS_ARGS),
    p(
        "fsinfo",
        "dirnotify",
        Area::Fsinfo,
        &[(FILE_IO, 77)],
        FS_ARGS,
    ),
    // tcpip: the IPv4 opcode and the IPv6 one (16 more)
    p(
        "tcpip",
        "send",
        Area::Net,
        &[(TCP_IP, 10), (TCP_IP, 26)],
        TCP_ARGS,
    ),
    p(
        "tcpip",
        "receive",
        Area::Net,
        &[(TCP_IP, 11), (TCP_IP, 27)],
        TCP_ARGS,
    ),
    p(
        "tcpip",
        "connect",
        Area::Net,
        &[(TCP_IP, 12), (TCP_IP, 28)],
        TCP_ARGS,
    ),
    p(
        "tcpip",
        "disconnect",
        Area::Net,
        &[(TCP_IP, 13), (TCP_IP, 29)],
        TCP_ARGS,
    ),
    p(
        "tcpip",
        "retransmit",
        Area::Net,
        &[(TCP_IP, 14), (TCP_IP, 30)],
        TCP_ARGS,
    ),
    p(
        "tcpip",
        "accept",
        Area::Net,
        &[(TCP_IP, 15), (TCP_IP, 31)],
        TCP_ARGS,
    ),
    p(
        "tcpip",
        "reconnect",
        Area::Net,
        &[(TCP_IP, 16), (TCP_IP, 32)],
        TCP_ARGS,
    ),
    p(
        "tcpip",
        "copy",
        Area::Net,
        &[(TCP_IP, 18), (TCP_IP, 34)],
        TCP_ARGS,
    ),
    p("tcpip", "fail", Area::Net, &[(TCP_IP, 17)], FAIL_ARGS),
    p(
        "udpip",
        "send",
        Area::Net,
        &[(UDP_IP, 10), (UDP_IP, 26)],
        UDP_ARGS,
    ),
    p(
        "udpip",
        "receive",
        Area::Net,
        &[(UDP_IP, 11), (UDP_IP, 27)],
        UDP_ARGS,
    ),
    p("udpip", "fail", Area::Net, &[(UDP_IP, 17)], FAIL_ARGS),
    // reg
    p("reg", "create", Area::Reg, &[(REGISTRY, 10)], REG_ARGS),
    p("reg", "open", Area::Reg, &[(REGISTRY, 11)], REG_ARGS),
    p("reg", "delete", Area::Reg, &[(REGISTRY, 12)], REG_ARGS),
    p("reg", "query", Area::Reg, &[(REGISTRY, 13)], REG_ARGS),
    p("reg", "setvalue", Area::Reg, &[(REGISTRY, 14)], REG_ARGS),
    p("reg", "delvalue", Area::Reg, &[(REGISTRY, 15)], REG_ARGS),
    p("reg", "queryvalue", Area::Reg, &[(REGISTRY, 16)], REG_ARGS),
    p("reg", "enumkey", Area::Reg, &[(REGISTRY, 17)], REG_ARGS),
    p(
        "reg",
        "enumvaluekey",
        Area::Reg,
        &[(REGISTRY, 18)],
        REG_ARGS,
    ),
    p(
        "reg",
        "querymulvalue",
        Area::Reg,
        &[(REGISTRY, 19)],
        REG_ARGS,
    ),
    p("reg", "setinfo", Area::Reg, &[(REGISTRY, 20)], REG_ARGS),
    p("reg", "flush", Area::Reg, &[(REGISTRY, 21)], REG_ARGS),
    p("reg", "kcbcreate", Area::Reg, &[(REGISTRY, 22)], REG_ARGS),
    p("reg", "kcbdelete", Area::Reg, &[(REGISTRY, 23)], REG_ARGS),
    p("reg", "virtualize", Area::Reg, &[(REGISTRY, 26)], REG_ARGS),
    p("reg", "close", Area::Reg, &[(REGISTRY, 27)], REG_ARGS),
    // hwconfig: the SystemConfig events, by the port's names
    p(
        "hwconfig",
        "cpu",
        Area::Hwconfig,
        &[(CONFIG, 10)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "disk-phy",
        Area::Hwconfig,
        &[(CONFIG, 11)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "disk-log",
        Area::Hwconfig,
        &[(CONFIG, 12)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "nic",
        Area::Hwconfig,
        &[(CONFIG, 13)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "video",
        Area::Hwconfig,
        &[(CONFIG, 14)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "service",
        Area::Hwconfig,
        &[(CONFIG, 15)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "power",
        Area::Hwconfig,
        &[(CONFIG, 16)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "network",
        Area::Hwconfig,
        &[(CONFIG, 17)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "disk-optical",
        Area::Hwconfig,
        &[(CONFIG, 18)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "irq",
        Area::Hwconfig,
        &[(CONFIG, 21)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "pnp",
        Area::Hwconfig,
        &[(CONFIG, 22)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "ide",
        Area::Hwconfig,
        &[(CONFIG, 23)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "platform",
        Area::Hwconfig,
        &[(CONFIG, 25)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "dpi",
        Area::Hwconfig,
        &[(CONFIG, 28)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "code-integrity",
        Area::Hwconfig,
        &[(CONFIG, 29)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "telemetry",
        Area::Hwconfig,
        &[(CONFIG, 30)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "defrag",
        Area::Hwconfig,
        &[(CONFIG, 31)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "dev-family",
        Area::Hwconfig,
        &[(CONFIG, 33)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "flight-ids",
        Area::Hwconfig,
        &[(CONFIG, 34)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "processor",
        Area::Hwconfig,
        &[(CONFIG, 35)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "virtualization",
        Area::Hwconfig,
        &[(CONFIG, 36)],
        PAYLOAD_ARGS,
    ),
    p(
        "hwconfig",
        "boot",
        Area::Hwconfig,
        &[(CONFIG, 37)],
        PAYLOAD_ARGS,
    ),
    // pmc: the sample sources of a profiling session (PerfInfo CollectionStart), counter
    // sources, and PMC interrupt samples
    // (as the port's sdt_etw_pmc_cb and sdt_args give them: see `super::pmc`)
    p(
        "pmc",
        "sample-src",
        Area::Pmc,
        &[(PERF_INFO, 73)],
        &[n("uint32_t"), n("char *"), n("uint32_t"), n("uint32_t")],
    ),
    p(
        "pmc",
        "counter-src",
        Area::Pmc,
        &[(PERF_INFO, 48)],
        &[n("int"), n("wchar_t **")],
    ),
    p(
        "pmc",
        "sample",
        Area::Pmc,
        &[(PERF_INFO, 47)],
        &[n("uintptr_t"), n("uint16_t")],
    ),
    // the portable sched and proc probes of DTrace's providers that the kernel events can feed
    // (DTrace Guide, sched and proc providers): a thread put on a ready queue (readied, or
    // switched out still runnable), taken off one (switched in), a process whose executable
    // is mapped
    p(
        "sched",
        "enqueue",
        Area::Sched,
        &[(THREAD, 36), (THREAD, 50)],
        ENQUEUE_ARGS,
    ),
    p(
        "sched",
        "dequeue",
        Area::Sched,
        &[(THREAD, 36)],
        DEQUEUE_ARGS,
    ),
    p(
        "proc",
        "exec-success",
        Area::Proc,
        &[(IMAGE, 10), (PROCESS, 10)],
        &[],
    ),
    // a thread going to wait (a CSwitch leaving it Waiting); a process or thread created,
    // fired in its creator
    p("sched", "sleep", Area::Sched, &[(THREAD, 36)], &[]),
    p(
        "proc",
        "create",
        Area::Proc,
        &[(PROCESS, 1)],
        &[x("struct thread *", "psinfo_t *")],
    ),
    p("proc", "lwp-create", Area::Proc, &[(THREAD, 1)], LWP_ARGS),
];

/// The order in which the probes of one event fire, where it matters: a CSwitch puts the
/// leaving thread back on a ready queue (`enqueue`) before it leaves (`off-cpu`), and takes
/// the next thread off one (`dequeue`) before it runs (`on-cpu`); a ReadyThread wakes the
/// thread (`wakeup`) before it queues it, as illumos' sleep queues and dispatcher do; a
/// thread leaving to wait fires `sleep` before `off-cpu`; a Process or Thread Start fires
/// `create` / `lwp-create` (in the creator) before `start` / `lwp-start`. Probes not named
/// here fire in table order after these.
fn firing_rank(p: &KernelProbe) -> u8 {
    match (p.provider, p.name) {
        ("sched", "wakeup") | ("proc", "create" | "lwp-create") => 0,
        ("sched", "enqueue" | "sleep") => 1,
        ("sched", "off-cpu") => 2,
        ("sched", "dequeue") => 3,
        ("sched", "on-cpu") => 4,
        _ => 5,
    }
}

/// Index of `syscall:::return`.
pub const SYSCALL_RETURN: usize = 18;

/// Indexes of the diag probes the walk fires itself.
pub const DIAG_LOSTEVENT: usize = 1;
pub const DIAG_IGNORED: usize = 21;
pub const DIAG_MISSED_STACK: usize = 22;
pub const DIAG_MISSED_USTACK: usize = 23;
pub const DIAG_MISSED_DNET_STACK: usize = 24;

/// The FileIo events that name file objects (Name, FileCreate, FileDelete, FileRundown,
/// Create): decoded for the system state's file names when a probe with file names is on.
pub const FILE_NAME_EVENTS: &[(u8, u8)] = &[
    (FILE_IO, 0),
    (FILE_IO, 32),
    (FILE_IO, 35),
    (FILE_IO, 36),
    (FILE_IO, 64),
];

/// Whether a probe reads file names from the system state.
pub fn needs_file_names(k: &KernelProbe) -> bool {
    matches!(k.area, Area::Io | Area::Fsinfo) || (k.provider == "pf" && k.name == "hardflt")
}

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
        // by key, then by firing rank and table order
        v.sort_unstable_by_key(|&(k, i)| (k, firing_rank(&KERNEL_PROBES[i as usize]), i));
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
        let cswitch: Vec<&str> = probes_of(THREAD, 36)
            .map(|i| KERNEL_PROBES[i].name)
            .collect();
        assert_eq!(
            cswitch,
            ["enqueue", "sleep", "off-cpu", "dequeue", "on-cpu"]
        );
        let start: Vec<&str> = probes_of(PROCESS, 1)
            .map(|i| KERNEL_PROBES[i].name)
            .collect();
        assert_eq!(start, ["create", "start"]);
        let ready: Vec<&str> = probes_of(THREAD, 50)
            .map(|i| KERNEL_PROBES[i].name)
            .collect();
        assert_eq!(ready, ["wakeup", "enqueue"]);
        assert_eq!(position("diag", "lostevent"), Some(DIAG_LOSTEVENT));
        assert_eq!(position("syscall", "return"), Some(SYSCALL_RETURN));
        assert_eq!(position("diag", "ignored"), Some(DIAG_IGNORED));
        assert_eq!(position("diag", "missed-stack"), Some(DIAG_MISSED_STACK));
        assert_eq!(position("diag", "missed-ustack"), Some(DIAG_MISSED_USTACK));
        assert_eq!(
            position("diag", "missed-dnet-stack"),
            Some(DIAG_MISSED_DNET_STACK)
        );
        assert_eq!(probes_of(THREAD, 99).count(), 0);
    }
}
