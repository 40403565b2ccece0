//! Providers built from ETW events: `diag` (every record), the kernel providers of the Windows
//! DTrace port (`sched`, `proc`, `io`, `isr`, `dpc`, `syscall`, `profile:::sample-N`) and, by
//! name, the providers an `.etl` file carries (`microsoft-windows-dns-client:::events`).
//!
//! [`EtwProbes::firings`] maps one decoded event to the probes it fires, with `arg0..` and the
//! thread the firing runs in.

use std::collections::BTreeMap;

use super::Provider;
use crate::etw::decode::DecodedEvent;
use crate::etw::record::{EventRecord, HeaderKind};
use crate::etw::state::SystemState;
use crate::probes::{glob_match, ProbeDesc, ProbeInfo};

/// Kernel groups (`HookId >> 8`).
pub mod group {
    pub const DISK_IO: u8 = 0x01;
    pub const PAGE_FAULT: u8 = 0x02;
    pub const PROCESS: u8 = 0x03;
    pub const FILE_IO: u8 = 0x04;
    pub const THREAD: u8 = 0x05;
    pub const PERF_INFO: u8 = 0x0F;
    pub const IMAGE: u8 = 0x14;
}

/// The probes of the kernel providers: (provider, name).
const KERNEL_PROBES: &[(&str, &str)] = &[
    ("diag", "events"),
    ("diag", "lostevent"),
    ("sched", "on-cpu"),
    ("sched", "off-cpu"),
    ("sched", "wakeup"),
    ("proc", "start"),
    ("proc", "exit"),
    ("proc", "lwp-start"),
    ("proc", "lwp-exit"),
    ("proc", "module-load"),
    ("proc", "module-unload"),
    ("io", "start"),
    ("io", "done"),
    ("isr", "isr"),
    ("dpc", "dpc"),
    ("dpc", "timer"),
    ("dpc", "thread"),
    ("syscall", "entry"),
    ("syscall", "return"),
    ("pf", "hardflt"),
    ("profile", "sample-1ms"),
];

/// First probe id of the ETW providers (after dtrace's and profile's).
const FIRST_ID: u64 = 100_000;
/// First id of the named providers found in a trace.
const FIRST_NAMED_ID: u64 = 200_000;

fn kernel_id(provider: &str, name: &str) -> Option<u64> {
    KERNEL_PROBES
        .iter()
        .position(|(p, n)| *p == provider && *n == name)
        .map(|i| FIRST_ID + i as u64)
}

/// Which ETW probes a program enabled, in the form [`Interest::wants`] asks about for every
/// record: whether the record must be decoded for them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Interest {
    /// Bit i: KERNEL_PROBES[i] is enabled.
    kernel: u64,
    /// Any named provider's probe is enabled.
    named: bool,
}

/// The bits of `names` in [`Interest::kernel`], computed at compile time (`const { .. }` at
/// every use) rather than by comparing strings for every record.
const fn kernel_mask(names: &[(&str, &str)]) -> u64 {
    const fn eq(a: &str, b: &str) -> bool {
        let (a, b) = (a.as_bytes(), b.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        let mut i = 0;
        while i < a.len() {
            if a[i] != b[i] {
                return false;
            }
            i += 1;
        }
        true
    }
    let mut mask = 0u64;
    let mut j = 0;
    while j < names.len() {
        let mut i = 0;
        while i < KERNEL_PROBES.len() {
            if eq(KERNEL_PROBES[i].0, names[j].0) && eq(KERNEL_PROBES[i].1, names[j].1) {
                mask |= 1 << i;
            }
            i += 1;
        }
        j += 1;
    }
    mask
}

impl Interest {
    fn any(&self, mask: u64) -> bool {
        self.kernel & mask != 0
    }

    /// Whether a record may fire any enabled probe: [`Interest::wants`] it, or `diag:::events`
    /// (which fires for every record) is enabled. A record for which this is false fires
    /// nothing, so a trace walk need not map it to firings.
    pub fn may_fire(&self, ev: &EventRecord<'_>) -> bool {
        self.any(const { kernel_mask(&[("diag", "events")]) }) || self.wants(ev)
    }

    /// Whether a record must be decoded: a probe it fires needs its fields (or, with no thread
    /// id in its header, the thread id in its payload).
    pub fn wants(&self, ev: &EventRecord<'_>) -> bool {
        if self.kernel == 0 && !self.named {
            return false;
        }
        let named_provider = ev.kind == HeaderKind::EventHeader || ev.kernel_group.is_none();
        // a record with no thread id in its header (PerfInfo) has it in its payload: needed
        // when diag:::events fires for it (the other probes are asked for below)
        if ev.tid == u32::MAX && self.any(const { kernel_mask(&[("diag", "events")]) }) {
            return true;
        }
        let kernel = match (ev.kernel_group, ev.opcode) {
            (Some(group::THREAD), 36) => {
                self.any(const { kernel_mask(&[("sched", "on-cpu"), ("sched", "off-cpu")]) })
            }
            (Some(group::THREAD), 50) => self.any(const { kernel_mask(&[("sched", "wakeup")]) }),
            (Some(group::PROCESS), 1 | 2) => {
                self.any(const { kernel_mask(&[("proc", "start"), ("proc", "exit")]) })
            }
            (Some(group::THREAD), 1 | 2) => {
                self.any(const { kernel_mask(&[("proc", "lwp-start"), ("proc", "lwp-exit")]) })
            }
            (Some(group::IMAGE), 10 | 2) => self
                .any(const { kernel_mask(&[("proc", "module-load"), ("proc", "module-unload")]) }),
            (Some(group::DISK_IO), 10..=13) => {
                self.any(const { kernel_mask(&[("io", "start"), ("io", "done")]) })
            }
            (Some(group::PAGE_FAULT), 32) => self.any(const { kernel_mask(&[("pf", "hardflt")]) }),
            (Some(group::PERF_INFO), 46) => {
                self.any(const { kernel_mask(&[("profile", "sample-1ms")]) })
            }
            (Some(group::PERF_INFO), 51 | 52) => {
                self.any(const { kernel_mask(&[("syscall", "entry"), ("syscall", "return")]) })
            }
            (Some(group::PERF_INFO), 67) => self.any(const { kernel_mask(&[("isr", "isr")]) }),
            (Some(group::PERF_INFO), 66 | 68 | 69) => self
                .any(const { kernel_mask(&[("dpc", "dpc"), ("dpc", "timer"), ("dpc", "thread")]) }),
            _ => false,
        };
        kernel || (self.named && named_provider)
    }
}

/// One probe firing produced by an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EtwFiring {
    pub probe: u64,
    pub args: [u64; 10],
    /// The thread (and its process) the firing runs in.
    pub pid: u32,
    pub tid: u32,
}

/// The ETW providers of one run, including the named providers of a trace.
#[derive(Clone, Debug, Default)]
pub struct EtwProbes {
    /// Lower-case provider name → probe id of its `events` probe.
    named: BTreeMap<String, u64>,
}

impl EtwProbes {
    pub fn new() -> Self {
        EtwProbes::default()
    }

    /// Makes `<name>:::events` available for a provider seen in a trace.
    pub fn add_named(&mut self, provider: &str) {
        let key = provider.to_ascii_lowercase();
        if key.is_empty() || kernel_id(&key, "events").is_some() || self.named.contains_key(&key) {
            return;
        }
        let id = FIRST_NAMED_ID + self.named.len() as u64;
        self.named.insert(key, id);
    }

    fn all(&self) -> Vec<ProbeInfo> {
        let mut v: Vec<ProbeInfo> = KERNEL_PROBES
            .iter()
            .enumerate()
            .map(|(i, (p, n))| probe(FIRST_ID + i as u64, p, n))
            .collect();
        v.extend(self.named.iter().map(|(p, id)| probe(*id, p, "events")));
        v
    }

    /// What the enabled probes need decoded (see [`Interest::wants`]).
    pub fn interest(&self, enabled: &dyn Fn(u64) -> bool) -> Interest {
        let mut kernel = 0u64;
        for i in 0..KERNEL_PROBES.len() {
            if enabled(FIRST_ID + i as u64) {
                kernel |= 1 << i;
            }
        }
        Interest {
            kernel,
            named: self.named.values().any(|id| enabled(*id)) || super::dnet::any_enabled(enabled),
        }
    }

    /// The probes one event fires; `enabled` says which probe ids a program uses.
    pub fn firings(
        &self,
        ev: &EventRecord<'_>,
        dec: &DecodedEvent<'_>,
        state: &SystemState,
        enabled: &dyn Fn(u64) -> bool,
        out: &mut Vec<EtwFiring>,
    ) {
        let tid = if ev.tid == u32::MAX {
            dec.u64("ThreadId").map(|t| t as u32).unwrap_or(0)
        } else {
            ev.tid
        };
        let pid_of = |tid: u32, fallback: u32| -> u32 {
            if fallback != u32::MAX && fallback != 0 {
                return fallback;
            }
            state.thread(tid).map(|t| t.pid).unwrap_or(0)
        };
        let pid = pid_of(tid, ev.pid);
        let payload_args = |id: u64| -> [u64; 10] {
            let mut a = [0u64; 10];
            a[0] = id;
            a[1] = ev.opcode as u64;
            a[2] = PAYLOAD_BASE;
            a[3] = ev.payload.len() as u64;
            a
        };
        let mut fire = |name: (&str, &str), args: [u64; 10], pid: u32, tid: u32| {
            if let Some(id) = kernel_id(name.0, name.1) {
                if enabled(id) {
                    out.push(EtwFiring {
                        probe: id,
                        args,
                        pid,
                        tid,
                    });
                }
            }
        };
        fire(("diag", "events"), payload_args(ev.id as u64), pid, tid);
        match (ev.kernel_group, ev.opcode) {
            (Some(group::THREAD), 36) => {
                // CSwitch: the old thread leaves the CPU, the new one takes it
                let new = dec.u64("NewThreadId").unwrap_or(0) as u32;
                let old = dec.u64("OldThreadId").unwrap_or(0) as u32;
                let mut a = [0u64; 10];
                a[0] = new as u64;
                a[1] = old as u64;
                fire(("sched", "off-cpu"), a, pid_of(old, u32::MAX), old);
                fire(("sched", "on-cpu"), a, pid_of(new, u32::MAX), new);
            }
            (Some(group::THREAD), 50) => {
                let woken = dec.u64("TThreadId").unwrap_or(0);
                let mut a = [0u64; 10];
                a[0] = woken;
                fire(("sched", "wakeup"), a, pid, tid);
            }
            (Some(group::PROCESS), op @ (1 | 2)) => {
                let p = dec.u64("ProcessId").unwrap_or(pid as u64) as u32;
                let mut a = [0u64; 10];
                a[0] = p as u64;
                a[1] = dec.u64("ParentId").unwrap_or(0);
                a[2] = dec.get("ExitStatus").and_then(|v| v.as_u64()).unwrap_or(0);
                let name = if op == 1 { "start" } else { "exit" };
                fire(("proc", name), a, p, tid);
            }
            (Some(group::THREAD), op @ (1 | 2)) => {
                let t = dec.u64("TThreadId").unwrap_or(tid as u64) as u32;
                let p = dec.u64("ProcessId").unwrap_or(pid as u64) as u32;
                let mut a = [0u64; 10];
                a[0] = t as u64;
                a[1] = p as u64;
                let name = if op == 1 { "lwp-start" } else { "lwp-exit" };
                fire(("proc", name), a, p, t);
            }
            (Some(group::IMAGE), op @ (10 | 2)) => {
                let p = dec.u64("ProcessId").unwrap_or(pid as u64) as u32;
                let mut a = [0u64; 10];
                a[0] = dec.u64("ImageBase").unwrap_or(0);
                a[1] = dec.u64("ImageSize").unwrap_or(0);
                let name = if op == 10 {
                    "module-load"
                } else {
                    "module-unload"
                };
                fire(("proc", name), a, p, tid);
            }
            (Some(group::DISK_IO), op @ (10..=13)) => {
                let mut a = [0u64; 10];
                a[0] = dec.u64("TransferSize").unwrap_or(0);
                a[1] = dec.u64("ByteOffset").unwrap_or(0);
                a[2] = dec.u64("Irp").unwrap_or(0);
                a[3] = (op == 11 || op == 13) as u64;
                let name = if op >= 12 { "start" } else { "done" };
                fire(("io", name), a, pid, tid);
            }
            (Some(group::PAGE_FAULT), 32) => {
                let mut a = [0u64; 10];
                a[0] = dec.u64("VirtualAddress").unwrap_or(0);
                a[1] = dec.u64("ByteCount").unwrap_or(0);
                let t = dec.u64("TThreadId").unwrap_or(tid as u64) as u32;
                fire(("pf", "hardflt"), a, pid_of(t, u32::MAX), t);
            }
            (Some(group::PERF_INFO), op) => {
                let mut a = [0u64; 10];
                match op {
                    46 => {
                        // SampledProfile: arg0 kernel PC or 0, arg1 user PC or 0, as profile-N
                        let pc = dec.u64("InstructionPointer").unwrap_or(0);
                        let kernel = pc >> 63 == 1;
                        a[0] = if kernel { pc } else { 0 };
                        a[1] = if kernel { 0 } else { pc };
                        fire(("profile", "sample-1ms"), a, pid, tid);
                    }
                    51 => {
                        a[0] = dec.u64("SysCallAddress").unwrap_or(0);
                        fire(("syscall", "entry"), a, pid, tid);
                    }
                    52 => {
                        a[0] = dec.u64("SysCallNtStatus").unwrap_or(0);
                        fire(("syscall", "return"), a, pid, tid);
                    }
                    67 => {
                        a[0] = dec.u64("Routine").unwrap_or(0);
                        a[1] = dec.u64("Vector").unwrap_or(0);
                        a[2] = dec.u64("InitialTime").unwrap_or(0);
                        fire(("isr", "isr"), a, pid, tid);
                    }
                    66 | 68 | 69 => {
                        a[0] = dec.u64("Routine").unwrap_or(0);
                        a[1] = dec.u64("InitialTime").unwrap_or(0);
                        let name = match op {
                            66 => "thread",
                            68 => "dpc",
                            _ => "timer",
                        };
                        fire(("dpc", name), a, pid, tid);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        if ev.kind == HeaderKind::EventHeader || ev.kernel_group.is_none() {
            let key = dec.provider.to_ascii_lowercase();
            if let Some(&id) = self.named.get(&key) {
                if enabled(id) {
                    out.push(EtwFiring {
                        probe: id,
                        args: payload_args(ev.id as u64),
                        pid,
                        tid,
                    });
                }
            }
        }
        super::dnet::firings(ev, dec, pid, tid, enabled, out);
    }
}

/// Where an event's payload appears to D (`arg2`): 4 bytes before it hold the event id (u16),
/// the version (u8) and 0/1 for a 32/64-bit event (u8), as in the Windows port.
pub const PAYLOAD_BASE: u64 = 0x0000_7e00_0000_0004;

fn probe(id: u64, provider: &str, name: &str) -> ProbeInfo {
    ProbeInfo {
        id,
        provider: provider.to_string(),
        module: String::new(),
        function: String::new(),
        name: name.to_string(),
        arg_types: Vec::new(),
    }
}

/// Probes are listed under their own provider names; this adapter exposes one of them.
pub struct EtwProvider {
    pub name: String,
    pub probes: EtwProbes,
}

impl Provider for EtwProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn matching(&self, desc: &ProbeDesc) -> Vec<ProbeInfo> {
        self.list()
            .into_iter()
            .filter(|p| {
                glob_match(&desc.module, &p.module)
                    && glob_match(&desc.function, &p.function)
                    && (glob_match(&desc.name, &p.name)
                        || (p.name == "sample-1ms"
                            && desc.name.starts_with("sample-")
                            && desc.is_exact()))
            })
            .collect()
    }

    fn list(&self) -> Vec<ProbeInfo> {
        self.probes
            .all()
            .into_iter()
            .filter(|p| p.provider == self.name)
            .collect()
    }
}

/// One catalog provider per ETW provider name.
pub fn providers(probes: &EtwProbes) -> Vec<Box<dyn Provider + Send + Sync>> {
    let mut names: Vec<String> = probes.all().into_iter().map(|p| p.provider).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|n| n != "profile")
        .map(|name| {
            Box::new(EtwProvider {
                name,
                probes: probes.clone(),
            }) as Box<dyn Provider + Send + Sync>
        })
        .collect()
}

/// The `profile` provider's `sample-N` probe, for the catalog's profile provider.
pub fn sample_probe() -> ProbeInfo {
    probe(
        kernel_id("profile", "sample-1ms").unwrap_or(FIRST_ID),
        "profile",
        "sample-1ms",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_probes_have_stable_ids_and_names() {
        let p = EtwProbes::new();
        let all = p.all();
        assert!(all
            .iter()
            .any(|x| x.provider == "sched" && x.name == "on-cpu"));
        let ids: std::collections::HashSet<u64> = all.iter().map(|x| x.id).collect();
        assert_eq!(ids.len(), all.len());
        let mut p = EtwProbes::new();
        p.add_named("Microsoft-Windows-DNS-Client");
        p.add_named("microsoft-windows-dns-client");
        assert_eq!(p.named.len(), 1);
        let provs = providers(&p);
        assert!(provs
            .iter()
            .any(|x| x.name() == "microsoft-windows-dns-client"));
        let sched = provs.iter().find(|x| x.name() == "sched").unwrap();
        assert_eq!(
            sched
                .matching(&ProbeDesc::parse("sched:::on-cpu").unwrap())
                .len(),
            1
        );
    }
}
