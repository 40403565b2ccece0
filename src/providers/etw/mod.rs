//! Providers built from ETW events: `diag` (every record), the kernel providers of the Windows
//! DTrace port (`sched`, `proc`, `io`, `isr`, `dpc`, `syscall`, `profile:::sample-N`) and, by
//! name, the providers an `.etl` file carries, the manifests loaded and the system's provider
//! catalog: `microsoft-windows-dns-client:::events`, one probe per named keyword
//! (`microsoft-windows-dotnetruntime:::gc`), `:::capturestate`; and Microsoft's form by GUID,
//! `etw:<guid>:0xLL_0xKKKKKKKKKKKKKKKK:<event id>|generic_event` ([`guid_probe`]).
//!
//! [`EtwProbes::firings`] maps one decoded event to the probes it fires, with `arg0..` and the
//! thread the firing runs in.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use super::Provider;
use crate::etw::catalog::{keyword_probe_name, ProviderInfo};
use crate::etw::decode::DecodedEvent;
use crate::etw::record::{EventRecord, Guid, HeaderKind};
use crate::etw::state::SystemState;
use crate::probes::{glob_match, ProbeDesc, ProbeInfo};

pub mod absent;
mod diag;
pub use diag::blind_args;
pub mod dnet;
mod fsinfo;
pub mod guid_probe;
mod hwconfig;
mod io;
pub mod limits;
pub mod native;
mod net;
pub mod payload;
mod perf;
mod pf;
mod pmc;
mod proc;
mod reg;
mod sched;
pub mod syscall;
pub mod table;

pub use table::group;
use table::{Area, KernelProbe, GROUPS, KERNEL_PROBES};

/// First probe id of the ETW providers (after dtrace's and profile's).
const FIRST_ID: u64 = 100_000;
/// First id of the named providers found in a trace.
const FIRST_NAMED_ID: u64 = 200_000;
/// First id of the `etw:<guid>:...` probes (made on demand, up to the pid provider's ids).
const FIRST_GUID_ID: u64 = 800_000;

fn kernel_id(provider: &str, name: &str) -> Option<u64> {
    table::position(provider, name).map(|i| FIRST_ID + i as u64)
}

/// Which ETW probes a program enabled, in the form [`Interest::wants`] asks about for every
/// record: whether the record must be decoded for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interest {
    /// Bit `op` of `opcodes[group]`: a kernel event (group, opcode) fires an enabled probe.
    opcodes: [u128; GROUPS],
    /// Any kernel probe is enabled.
    kernel: bool,
    /// Any named provider's probe is enabled.
    named: bool,
    /// A probe that fires for every record (`diag:::events`, `diag:::ignored`) is enabled.
    every: bool,
    /// `diag:::events` is enabled (asked for every record: kept here, not looked up).
    events: bool,
    /// `diag:::ignored` is enabled.
    ignored: bool,
    /// Some enabled program may read what a firing carries beyond its probe, time and CPU:
    /// its arguments, thread, process, stacks (see [`Interest::set_reads_event`]). When none
    /// does, a record fires `diag:::events` with nothing decoded and nothing built.
    reads_event: bool,
    /// An enabled probe may fire that is neither `diag:::events` nor `diag:::ignored`.
    others: bool,
    /// `diag:::lostevent` is enabled.
    lost: bool,
    /// A `diag:::missed-*` probe is enabled.
    missed: bool,
    /// A probe of the records that name no thread (`isr`, `dpc`, `syscall`) is enabled: the
    /// context switches give their thread ([`crate::etw::state::CpuThreads`]).
    cpu_threads: bool,
    /// A `syscall` return probe is enabled: the entries say which call returns.
    syscall_entries: bool,
    /// Some record may need decoding for an enabled probe ([`Interest::wants`] may say
    /// yes): kept up to date by whatever changes the fields it follows from.
    decodes: bool,
}

impl Default for Interest {
    fn default() -> Self {
        Interest {
            opcodes: [0; GROUPS],
            kernel: false,
            named: false,
            every: false,
            events: false,
            ignored: false,
            reads_event: true,
            others: true,
            lost: false,
            missed: false,
            cpu_threads: false,
            syscall_entries: false,
            decodes: false,
        }
    }
}

impl Interest {
    /// Whether an enabled probe reads file names (then the walk first collects the names the
    /// trace's rundown gives, see `TraceSource::collect_file_names`).
    pub fn needs_file_names(&self) -> bool {
        self.opcodes[group::FILE_IO as usize] & 1 << 36 != 0
    }

    /// Whether an enabled probe fires on the DiskIo start records (ReadInit, WriteInit,
    /// FlushInit): `io:::start` reads its I/O's completion ahead (see
    /// `TraceSource::collect_disk_completions`).
    pub fn needs_disk_completions(&self) -> bool {
        self.opcodes[group::DISK_IO as usize]
            & io::START_OPCODES.iter().fold(0, |m, &op| m | 1 << op)
            != 0
    }

    /// Whether an enabled probe fires for stacks that belong to no event (then the walk first
    /// finds them: `TraceSource::collect_stacks_with`).
    pub fn needs_missed_stacks(&self) -> bool {
        self.missed
    }

    /// Whether a record must be decoded: a probe it fires needs its fields (or, with no thread
    /// id in its header, the thread id in its payload).
    #[inline]
    pub fn wants(&self, ev: &EventRecord<'_>) -> bool {
        if !self.decodes {
            return false;
        }
        let named_provider = ev.kind == HeaderKind::EventHeader || ev.kernel_group.is_none();
        // a record with no thread id in its header (PerfInfo) has it in its payload: needed
        // when a probe fires for every record; the kernel probes of the record ask below
        if ev.tid == u32::MAX
            && ((self.every && self.reads_event) || (self.named && named_provider))
            && tid_in_payload(ev)
        {
            return true;
        }
        let kernel = match ev.kernel_group {
            Some(g) if (g as usize) < GROUPS && ev.opcode < 128 => {
                self.opcodes[g as usize] >> ev.opcode & 1 == 1
            }
            _ => false,
        };
        kernel || (self.named && named_provider)
    }

    /// Adds the SampledProfile records: `profile-N` probes fire from them
    /// ([`EtwProbes::profile_firings`]).
    pub fn add_samples(&mut self) {
        self.kernel = true;
        self.opcodes[group::PERF_INFO as usize] |= 1 << perf::SAMPLED_PROFILE;
        self.refresh();
    }

    /// Works out [`Interest::decodes`] again: whether any record passes the tests of
    /// [`Interest::wants`] (a probe that fires for every record and reads it, a named
    /// provider's probe, a kernel probe's event), so that a walk whose probes read no
    /// record asks nothing per record.
    fn refresh(&mut self) {
        self.decodes = (self.kernel || self.named)
            && ((self.every && self.reads_event)
                || self.named
                || self.opcodes.iter().any(|&o| o != 0));
    }

    /// The kernel events (by HookId) whose records may fire an enabled probe, or `None` when
    /// any kernel record may (a probe that fires for every record, or for the stack records
    /// no event claimed). A trace walk may step over the kernel records of the other events
    /// without building them.
    pub fn kernel_events(&self) -> Option<crate::etw::reader::HookSet> {
        if self.every || self.missed {
            return None;
        }
        let mut keep = crate::etw::reader::HookSet::default();
        for (g, ops) in self.opcodes.iter().enumerate() {
            for op in (0..128u8).filter(|&op| ops >> op & 1 == 1) {
                keep.insert(g as u8, op);
            }
        }
        // what the system state reads for them, though no enabled probe fires from it
        if self.cpu_threads {
            keep.insert(group::THREAD, crate::etw::opcode::CSWITCH);
        }
        if self.syscall_entries {
            keep.insert(group::PERF_INFO, crate::etw::opcode::SYSCALL_ENTER);
        }
        Some(keep)
    }

    /// Says whether any enabled program reads more of a firing than its probe, its time and
    /// its CPU (the engine asks the programs: arguments, built-in variables, thread-local
    /// variables, stacks...). When none does, the probes that fire for every record fire with
    /// no argument built and no thread looked up, and their records need no decoding: the
    /// program cannot tell.
    pub fn set_reads_event(&mut self, reads: bool) {
        self.reads_event = reads;
        self.refresh();
    }

    /// The probes every record fires, and all it fires, when no program reads anything of a
    /// firing and `diag:::events` / `diag:::ignored` are the only ETW probes enabled: `events`
    /// then `ignored`, in the order [`EtwProbes::firings_with`] gives them. Such a record needs
    /// no lookup of its thread, no provider name, no probe table ([`diag::blind_args`] are
    /// its arguments); `None` otherwise.
    #[inline]
    pub fn blind_probes(&self) -> Option<&'static [u64]> {
        const BOTH: [u64; 2] = [FIRST_ID, diag::IGNORED_ID];
        if self.reads_event || self.others {
            return None;
        }
        Some(match (self.events, self.ignored) {
            (true, true) => &BOTH,
            (true, false) => &BOTH[..1],
            (false, true) => &BOTH[1..],
            (false, false) => &[],
        })
    }

    /// Whether an enabled kernel probe may fire for this record: false for a record with a
    /// kernel group whose (group, opcode) no enabled kernel probe lists.
    #[inline]
    pub fn kernel_probe(&self, ev: &EventRecord<'_>) -> bool {
        match ev.kernel_group {
            Some(g) if (g as usize) < GROUPS && ev.opcode < 128 => {
                self.opcodes[g as usize] >> ev.opcode & 1 == 1
            }
            Some(_) => true,
            None => false,
        }
    }

    /// Whether a record may fire any enabled probe: [`Interest::wants`] it, or a probe that
    /// fires for every record is enabled. A record for which this is false fires nothing, so a
    /// trace walk need not map it to firings.
    #[inline]
    pub fn may_fire(&self, ev: &EventRecord<'_>) -> bool {
        self.every || (self.lost && ev.provider == diag::LOST_EVENT) || self.wants(ev)
    }
}

/// Whether a record with no thread id in its header must be decoded for one: a kernel record
/// whose layout has a `ThreadId` field (SampledProfile, ...), or any provider's record. A kernel
/// record with none (ISR, DPC, SysClEnter) fires in the thread on its CPU decoded or not (see
/// [`EventCx::new`]), so a probe that fires for every record need not decode it. (A layout
/// whose class is not its group's name is decoded too: `diag:::events` names the provider by
/// the decoded class.)
fn tid_in_payload(ev: &EventRecord<'_>) -> bool {
    use crate::etw::decode::{kernel, Source};
    static BITS: std::sync::OnceLock<[u128; GROUPS]> = std::sync::OnceLock::new();
    let Some(g) = ev.kernel_group else {
        return true;
    };
    if g as usize >= GROUPS || ev.opcode >= 128 {
        return true;
    }
    let bits = BITS.get_or_init(|| {
        let mut bits = [0u128; GROUPS];
        for l in kernel::LAYOUTS {
            let Source::Kernel(g) = l.source else {
                continue;
            };
            let needs = l.fields.iter().any(|f| f.name == "ThreadId")
                || kernel::group_name(g) != Some(l.class);
            if needs && (g as usize) < GROUPS {
                for &(op, _) in l.opcodes.iter().filter(|(op, _)| *op < 128) {
                    bits[g as usize] |= 1 << op;
                }
            }
        }
        bits
    });
    bits[g as usize] >> ev.opcode & 1 == 1
}

/// The thread of a record that names none, on a CPU whose first context switch has not come
/// yet: no real thread id (Windows' are multiples of 4), `-1` as D's `id_t`; its process is
/// [`crate::etw::state::UNKNOWN_PID`] (`execname` `<unknown>`).
pub const UNKNOWN_TID: u32 = u32::MAX;

/// What the area modules see of one decoded event.
pub(crate) struct EventCx<'a, 'e> {
    pub ev: &'a EventRecord<'e>,
    pub dec: &'a DecodedEvent<'e>,
    pub state: &'a SystemState,
    /// The thread and process of the event (from its header, or its payload and the state).
    pub tid: u32,
    pub pid: u32,
}

impl<'a, 'e> EventCx<'a, 'e> {
    /// The context of a record: its thread from the header, or (PerfInfo records) from the
    /// payload, or, for a record that names no thread (an interrupt, a DPC, a system call), the
    /// thread on its CPU ([`UNKNOWN_TID`] before the CPU's first context switch); and the
    /// thread's process from the header or the system state (idle for thread 0,
    /// [`crate::etw::state::UNKNOWN_PID`] for a thread no record named).
    pub fn new(ev: &'a EventRecord<'e>, dec: &'a DecodedEvent<'e>, state: &'a SystemState) -> Self {
        let tid = if ev.tid == u32::MAX {
            dec.u64("ThreadId")
                .map(|t| t as u32)
                .or_else(|| state.cpus().thread_on_cpu(ev.cpu))
                .unwrap_or(UNKNOWN_TID)
        } else {
            ev.tid
        };
        let pid = if ev.pid != u32::MAX && ev.pid != 0 {
            ev.pid
        } else {
            state.pid_of_thread(tid)
        };
        EventCx {
            ev,
            dec,
            state,
            tid,
            pid,
        }
    }

    /// The process of a thread, from the system state (idle for thread 0,
    /// [`crate::etw::state::UNKNOWN_PID`] for a thread no record named).
    pub fn pid_of(&self, tid: u32) -> u32 {
        self.state.pid_of_thread(tid)
    }

    /// A firing whose arguments point at a `struct thread` (base.d) for thread `tid` of process
    /// `pid`, as the system state knows them: what `lwpsinfo_t *` and `psinfo_t *` arguments
    /// translate from (`dscripts/lib/psinfo.d`), as the port's sched and proc probes give them.
    pub fn push_thread(&self, out: &mut Emit<'_>, args: [u64; 10], lwp: Lwp) {
        let process = self.state.process(lwp.pid);
        let mut fname = [0u8; 15];
        let name = process.map_or("", |p| p.name.as_str()).as_bytes();
        let n = name.len().min(fname.len());
        fname[..n].copy_from_slice(&name[..n]);
        fname.make_ascii_lowercase();
        let facts = crate::vm::thread::ThreadFacts {
            tid: lwp.tid,
            state: lwp.state,
            cpu: lwp.cpu,
            pid: lwp.pid,
            ppid: process.map_or(0, |p| p.parent),
            proc_start: process.and_then(|p| p.start_ns).unwrap_or(0),
            start: self
                .state
                .thread(lwp.tid)
                .and_then(|t| t.start_ns)
                .unwrap_or(0),
            fname: &fname[..n],
            psargs: process.map_or(&[][..], |p| p.command_line.as_bytes()),
            tname: self.state.thread_name(lwp.tid).as_bytes(),
            procp: native::NATIVE_BASE + crate::vm::thread::T_PROC as u64,
            ..Default::default()
        };
        out.push_native(
            args,
            lwp.fire_pid,
            lwp.fire_tid,
            crate::vm::thread::SIZE,
            |w| w.thread(&facts),
        );
    }
}

/// The thread a [`EventCx::push_thread`] firing describes, and the one it fires in.
pub(crate) struct Lwp {
    pub tid: u32,
    pub pid: u32,
    /// `t_state` (`vm::thread::STATE_*`) and `t_cpu` (-1 when not on a CPU).
    pub state: u32,
    pub cpu: u32,
    pub fire_tid: u32,
    pub fire_pid: u32,
}

/// Where an area module puts the firings of one probe.
pub(crate) struct Emit<'o> {
    probe: u64,
    out: &'o mut EtwFirings,
}

impl Emit<'_> {
    pub fn push(&mut self, args: [u64; 10], pid: u32, tid: u32) {
        self.out.list.push(EtwFiring {
            probe: self.probe,
            args,
            pid,
            tid,
            native: (0, 0),
        });
    }

    /// A firing with a native structure of `size` bytes that `fill` writes; its address is
    /// [`native::NATIVE_BASE`].
    pub fn push_native(
        &mut self,
        args: [u64; 10],
        pid: u32,
        tid: u32,
        size: usize,
        fill: impl FnOnce(&mut native::NativeWriter<'_>),
    ) {
        let start = self.out.native.len();
        self.out.native.resize(start + size, 0);
        fill(&mut native::NativeWriter::new(
            &mut self.out.native[start..],
        ));
        self.out.list.push(EtwFiring {
            probe: self.probe,
            args,
            pid,
            tid,
            native: (start as u32, (start + size) as u32),
        });
    }
}

impl<'a> IntoIterator for &'a EtwFirings {
    type Item = &'a EtwFiring;
    type IntoIter = std::slice::Iter<'a, EtwFiring>;
    fn into_iter(self) -> Self::IntoIter {
        self.list.iter()
    }
}

/// The firings of one event, with the native structures their arguments point at.
#[derive(Clone, Debug, Default)]
pub struct EtwFirings {
    pub list: Vec<EtwFiring>,
    native: Vec<u8>,
}

impl EtwFirings {
    pub fn new() -> Self {
        EtwFirings::default()
    }

    pub fn clear(&mut self) {
        self.list.clear();
        self.native.clear();
    }

    /// A firing of `probe` with plain arguments (no native structure).
    pub fn push(&mut self, probe: u64, args: [u64; 10], pid: u32, tid: u32) {
        self.list.push(EtwFiring {
            probe,
            args,
            pid,
            tid,
            native: (0, 0),
        });
    }

    pub fn iter(&self) -> std::slice::Iter<'_, EtwFiring> {
        self.list.iter()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The native structure of a firing (mapped at [`native::NATIVE_BASE`]), empty if none.
    pub fn native_of(&self, f: &EtwFiring) -> &[u8] {
        &self.native[f.native.0 as usize..f.native.1 as usize]
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
    /// Its native structure in [`EtwFirings`] (start, end).
    native: (u32, u32),
}

/// A provider known by name, with its probes: `events`, one per named keyword, `capturestate`.
#[derive(Clone, Debug)]
pub struct NamedProvider {
    /// As the manifest or the trace spells it.
    pub display: String,
    pub guid: Option<Guid>,
    pub events: u64,
    pub capturestate: u64,
    /// (probe name, keyword mask, probe id).
    pub keywords: Vec<(String, u64, u64)>,
}

/// What one probe of a named provider stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamedProbe {
    /// Every event of the provider.
    Events,
    /// Capture-state (rundown) events.
    CaptureState,
    /// Events with any of these keyword bits.
    Keyword(u64),
}

/// The ETW providers of one run, including the named providers of a trace.
#[derive(Clone, Debug)]
pub struct EtwProbes {
    /// Lower-case provider name → its probes.
    named: BTreeMap<String, NamedProvider>,
    /// Provider GUID → key of `named` (events that did not decode still fire by GUID).
    by_guid: std::collections::HashMap<Guid, String>,
    next_id: u64,
    /// The `etw:<guid>:...` probes, made on demand when a description names one; shared by
    /// the clones of one run (the catalog's and the engine's).
    guid_probes: Arc<RwLock<Vec<guid_probe::GuidProbe>>>,
    /// The system calls of a trace by name (`syscall::<function>:entry`, `return`).
    syscalls: syscall::SyscallNames,
    /// The kernel events the trace (or, over several, any of the traces) holds: what a
    /// kernel probe needs to fire ([`absent::notes`]); `None` live.
    kernel_events: Option<crate::etw::reader::HookSet>,
    /// The GUIDs of the providers known (the trace's event-header providers, named or not,
    /// and the catalog's), over which `etw:::` globs expand.
    guids: std::collections::BTreeSet<Guid>,
    /// The GUIDs of the providers whose events a trace holds (its census; of any of the
    /// traces over several): an `etw:` or named probe of another provider cannot fire there.
    held_guids: std::collections::BTreeSet<Guid>,
}

impl Default for EtwProbes {
    fn default() -> Self {
        EtwProbes {
            named: BTreeMap::new(),
            by_guid: Default::default(),
            next_id: FIRST_NAMED_ID,
            guid_probes: Arc::default(),
            syscalls: syscall::SyscallNames::default(),
            kernel_events: None,
            guids: Default::default(),
            held_guids: Default::default(),
        }
    }
}

/// Whether an event is a capture-state (rundown) event, which `<provider>:::capturestate` fires
/// for: the standard opcodes win:DC_Start (3) and win:DC_Stop (4) that providers log when asked
/// to capture their state (EVENT_CONTROL_CODE_CAPTURE_STATE) or at rundown; every event of a
/// provider whose name ends in `Rundown` (the .NET runtime's rundown provider, whose events
/// use opcodes of their own); and events whose name says DCStart, DCEnd, DCStop or Rundown
/// (e.g. the runtime's `MethodDCEndVerbose`, Kernel-Process's `ProcessRundown`).
pub fn is_capture_state(ev: &EventRecord<'_>, dec: &DecodedEvent<'_>, provider_key: &str) -> bool {
    if matches!(ev.opcode, 3 | 4) || provider_key.ends_with("rundown") {
        return true;
    }
    let name = dec.name.as_bytes();
    ["dcstart", "dcend", "dcstop", "rundown"].iter().any(|w| {
        name.windows(w.len())
            .any(|x| x.eq_ignore_ascii_case(w.as_bytes()))
    })
}

impl EtwProbes {
    pub fn new() -> Self {
        EtwProbes::default()
    }

    /// Notes the GUID of a provider a trace has events of (`etw:::` globs expand over it).
    pub fn note_guid(&mut self, guid: Guid) {
        if guid != Guid::default() {
            self.guids.insert(guid);
            self.held_guids.insert(guid);
        }
    }

    /// Notes the provider (or event class) GUID of any record a trace holds, classic or not:
    /// a probe by that GUID can fire.
    pub fn note_held_guid(&mut self, guid: Guid) {
        self.held_guids.insert(guid);
    }

    /// Makes `<name>:::events` and `<name>:::capturestate` available for a provider seen in a
    /// trace.
    pub fn add_named(&mut self, provider: &str) {
        self.named_entry(provider);
    }

    fn named_entry(&mut self, provider: &str) -> Option<&mut NamedProvider> {
        let key = provider.to_ascii_lowercase();
        if key.is_empty()
            || key.contains(|c: char| c.is_whitespace() || c == ':')
            || kernel_id(&key, "events").is_some()
            || key == "etw"
            || key == "dnet"
        {
            return None;
        }
        if !self.named.contains_key(&key) {
            if self.next_id + 2 > syscall::FIRST_ID {
                // the range of named probes is full (hundreds of thousands of probes)
                return None;
            }
            let id = self.next_id;
            self.next_id += 2;
            self.named.insert(
                key.clone(),
                NamedProvider {
                    display: provider.to_string(),
                    guid: None,
                    events: id,
                    capturestate: id + 1,
                    keywords: Vec::new(),
                },
            );
        }
        self.named.get_mut(&key)
    }

    /// Adds a provider with its GUID and named keywords (`<name>:::<keyword>` probes), or the
    /// keywords it did not have yet.
    pub fn add_provider(&mut self, info: &ProviderInfo) {
        if self.named_entry(&info.name).is_none() {
            return;
        }
        let mut next = self.next_id;
        let key = info.name.to_ascii_lowercase();
        let Some(p) = self.named.get_mut(&key) else {
            return;
        };
        if info.guid != Guid::default() {
            self.guids.insert(info.guid);
        }
        if p.guid.is_none() && info.guid != Guid::default() {
            p.guid = Some(info.guid);
            self.by_guid.entry(info.guid).or_insert(key);
        }
        for (k, mask) in &info.keywords {
            let name = keyword_probe_name(k);
            if name.is_empty()
                || next >= syscall::FIRST_ID
                || p.keywords.iter().any(|(n, m, _)| *n == name || m == mask)
            {
                continue;
            }
            p.keywords.push((name, *mask, next));
            next += 1;
        }
        self.next_id = self.next_id.max(next);
    }

    /// Adds every provider `other` knows (with its GUID and keywords) that this set lacks: the
    /// union of the providers of several traces, scanned each into its own set. Probe ids are
    /// this set's own.
    pub fn absorb(&mut self, other: &EtwProbes) {
        self.syscalls.absorb(&other.syscalls);
        if let Some(k) = &other.kernel_events {
            self.kernel_events
                .get_or_insert_with(Default::default)
                .union(k);
        }
        self.guids.extend(other.guids.iter().copied());
        self.held_guids.extend(other.held_guids.iter().copied());
        for p in other.named.values() {
            if self.named_entry(&p.display).is_none() {
                continue;
            }
            let mut next = self.next_id;
            let Some(mine) = self.named.get_mut(&p.display.to_ascii_lowercase()) else {
                continue;
            };
            if let (None, Some(g)) = (mine.guid, p.guid) {
                mine.guid = Some(g);
                self.by_guid
                    .entry(g)
                    .or_insert(p.display.to_ascii_lowercase());
            }
            for (name, mask, _) in &p.keywords {
                if next >= syscall::FIRST_ID
                    || mine.keywords.iter().any(|(n, m, _)| n == name || m == mask)
                {
                    continue;
                }
                mine.keywords.push((name.clone(), *mask, next));
                next += 1;
            }
            self.next_id = self.next_id.max(next);
        }
    }

    /// Gives the system calls of a trace their probes (`syscall::<function>:entry`,
    /// `return`), which then stand for every call in place of the table's `syscall:::entry`
    /// and `return`.
    pub fn set_syscalls(&mut self, names: syscall::SyscallNames) {
        self.syscalls = names;
    }

    /// Records the kernel events a trace holds (its census: see [`absent::notes`]).
    pub fn set_kernel_events(&mut self, events: crate::etw::reader::HookSet) {
        self.kernel_events = Some(events);
    }

    /// The system calls by name ([`EtwProbes::set_syscalls`]).
    pub fn syscalls(&self) -> &syscall::SyscallNames {
        &self.syscalls
    }

    /// A provider known by name (lower case).
    pub fn named(&self, provider: &str) -> Option<&NamedProvider> {
        self.named.get(&provider.to_ascii_lowercase())
    }

    /// The provider and meaning of a named provider's probe, by probe id.
    pub fn named_probe(&self, id: u64) -> Option<(&NamedProvider, NamedProbe)> {
        if !(FIRST_NAMED_ID..syscall::FIRST_ID).contains(&id) {
            return None;
        }
        self.named.values().find_map(|p| {
            if p.events == id {
                Some((p, NamedProbe::Events))
            } else if p.capturestate == id {
                Some((p, NamedProbe::CaptureState))
            } else {
                p.keywords
                    .iter()
                    .find(|k| k.2 == id)
                    .map(|k| (p, NamedProbe::Keyword(k.1)))
            }
        })
    }

    /// The `etw:<guid>:...` probe with this id.
    pub fn guid_probe(&self, id: u64) -> Option<guid_probe::GuidProbe> {
        let list = self.guid_probes.read().ok()?;
        list.iter().find(|g| g.id == id).cloned()
    }

    fn named_probes(&self, key: &str) -> Vec<ProbeInfo> {
        let Some(p) = self.named.get(key) else {
            return Vec::new();
        };
        let mut v = vec![probe(p.events, key, "events")];
        v.extend(p.keywords.iter().map(|(n, _, id)| probe(*id, key, n)));
        v.push(probe(p.capturestate, key, "capturestate"));
        for x in &mut v {
            x.arg_types = NAMED_ARGS.iter().map(|s| s.to_string()).collect();
        }
        v
    }

    /// The probes listed under one provider name.
    fn list_of(&self, provider: &str) -> Vec<ProbeInfo> {
        if provider == guid_probe::PROVIDER {
            return guid_probe::list(&self.guid_probes);
        }
        if self.named.contains_key(provider) {
            return self.named_probes(provider);
        }
        if provider == "syscall" && !self.syscalls.is_empty() {
            let mut v = self.syscalls.probes();
            if self.syscalls.has_unnamed_probes() {
                v.extend(self.kernel_probes(|k| k.provider == provider));
            }
            return v;
        }
        self.kernel_probes(|k| k.provider == provider)
    }

    /// Every provider name: the kernel ones, then the named ones.
    fn provider_names(&self) -> Vec<String> {
        let mut names: Vec<String> = KERNEL_PROBES
            .iter()
            .map(|k| k.provider.to_string())
            .collect();
        names.sort();
        names.dedup();
        names.extend(self.named.keys().cloned());
        names
    }

    /// The kernel probes `keep` says yes to.
    fn kernel_probes(&self, keep: impl Fn(&KernelProbe) -> bool) -> Vec<ProbeInfo> {
        KERNEL_PROBES
            .iter()
            .enumerate()
            .filter(|(_, k)| keep(k))
            .map(|(i, k)| {
                let mut p = probe(FIRST_ID + i as u64, k.provider, k.name);
                p.arg_types = k
                    .args
                    .iter()
                    .map(|a| a.xlate.unwrap_or(a.native).to_string())
                    .collect();
                if k.args.iter().any(|a| a.xlate.is_some()) {
                    p.arg_native = k
                        .args
                        .iter()
                        .map(|a| if a.xlate.is_some() { a.native } else { "" }.to_string())
                        .collect();
                }
                p
            })
            .collect()
    }

    #[cfg(test)]
    fn all(&self) -> Vec<ProbeInfo> {
        let mut v = self.kernel_probes(|_| true);
        for k in self.named.keys() {
            v.extend(self.named_probes(k));
        }
        v
    }

    /// What the enabled probes need decoded (see [`Interest::wants`]).
    pub fn interest(&self, enabled: &dyn Fn(u64) -> bool) -> Interest {
        let mut it = Interest::default();
        let mut others = false;
        for (i, k) in KERNEL_PROBES.iter().enumerate() {
            if enabled(FIRST_ID + i as u64) {
                it.kernel = true;
                others |= i != 0 && i != table::DIAG_IGNORED;
                for &(g, op) in k.events {
                    it.opcodes[g as usize] |= 1 << op;
                }
                if table::needs_file_names(k) {
                    for &(g, op) in table::FILE_NAME_EVENTS {
                        it.opcodes[g as usize] |= 1 << op;
                    }
                }
            }
        }
        it.named = self.named.values().any(|p| {
            enabled(p.events) || enabled(p.capturestate) || p.keywords.iter().any(|k| enabled(k.2))
        }) || dnet::any_enabled(enabled)
            || guid_probe::any_enabled(&self.guid_probes, enabled)
            || enabled(diag::MISSED_DNET_ID);
        // the named system calls: their records, the entries that say which call returns, and
        // the context switches that give every record of interrupt or call context its thread
        let (entry, ret) = self.syscalls.enabled(enabled);
        let perf = group::PERF_INFO as usize;
        if entry {
            it.opcodes[perf] |= 1 << crate::etw::opcode::SYSCALL_ENTER;
        }
        if ret {
            it.opcodes[perf] |= 1 << crate::etw::opcode::SYSCALL_EXIT;
        }
        it.kernel |= entry || ret;
        it.syscall_entries = ret || enabled(FIRST_ID + table::SYSCALL_RETURN as u64);
        it.cpu_threads = entry
            || ret
            || KERNEL_PROBES.iter().enumerate().any(|(i, k)| {
                matches!(k.area, Area::Syscall | Area::Interrupt) && enabled(FIRST_ID + i as u64)
            });
        it.missed = diag::MISSED_IDS.iter().any(|&id| enabled(id));
        it.events = enabled(FIRST_ID);
        it.ignored = enabled(diag::IGNORED_ID);
        it.every = it.events || it.ignored;
        it.lost = enabled(diag::LOST_ID);
        it.others = others || it.named || entry || ret;
        it.refresh();
        it
    }

    /// The probes one event fires; `enabled` says which probe ids a program uses.
    pub fn firings(
        &self,
        ev: &EventRecord<'_>,
        dec: &DecodedEvent<'_>,
        state: &SystemState,
        enabled: &dyn Fn(u64) -> bool,
        out: &mut EtwFirings,
    ) {
        self.firings_with(ev, dec, state, enabled, None, out)
    }

    /// [`EtwProbes::firings`], with what the caller knows of the programs' interest (`None`:
    /// nothing). A record no enabled kernel probe lists skips the table of kernel probes
    /// ([`Interest::kernel_probe`]); when no program reads more than a firing's probe, time and
    /// CPU ([`Interest::set_reads_event`]), `diag:::events` and `diag:::ignored` fire with no
    /// thread looked up and no argument built.
    pub fn firings_with(
        &self,
        ev: &EventRecord<'_>,
        dec: &DecodedEvent<'_>,
        state: &SystemState,
        enabled: &dyn Fn(u64) -> bool,
        interest: Option<&Interest>,
        out: &mut EtwFirings,
    ) {
        let blind = interest.is_some_and(|i| !i.reads_event);
        if let Some(i) = interest.filter(|i| blind && !i.others) {
            // `diag:::events` / `diag:::ignored` alone, read by no program: the record fires
            // them and nothing else
            if i.events {
                diag::record_blind(
                    ev,
                    &mut Emit {
                        probe: FIRST_ID,
                        out,
                    },
                );
            }
            if i.ignored {
                diag::record_blind(
                    ev,
                    &mut Emit {
                        probe: diag::IGNORED_ID,
                        out,
                    },
                );
            }
            return;
        }
        let kernel_probes = interest.is_none_or(|i| i.kernel_probe(ev));
        // the record's thread and process, looked up when a firing needs them
        let full = std::cell::OnceCell::new();
        let cx = || full.get_or_init(|| EventCx::new(ev, dec, state));
        let payload_args = |id: u64| -> [u64; 10] {
            let mut a = [0u64; 10];
            a[0] = id;
            a[1] = ev.opcode as u64;
            a[2] = PAYLOAD_BASE;
            a[3] = ev.payload.len() as u64;
            // the event's version, as the port's sdt_etw_guid_cb gives it
            a[4] = ev.version as u64;
            a
        };
        let events_id = FIRST_ID; // diag:::events
        let before = out.list.len();
        if interest.map_or_else(|| enabled(events_id), |i| i.events) {
            let mut emit = Emit {
                probe: events_id,
                out,
            };
            match blind {
                true => diag::record_blind(ev, &mut emit),
                false => diag::record(cx(), &self.provider_name(ev, dec), &mut emit),
            }
        }
        if ev.provider == diag::LOST_EVENT && enabled(diag::LOST_ID) {
            diag::lost(
                cx(),
                &mut Emit {
                    probe: diag::LOST_ID,
                    out,
                },
            );
        }
        if let Some(g) = ev.kernel_group.filter(|_| kernel_probes) {
            for i in table::probes_of(g, ev.opcode) {
                let id = FIRST_ID + i as u64;
                let k = &KERNEL_PROBES[i];
                let mut emit = Emit { probe: id, out };
                match k.area {
                    // the call's named probe, or this one when the calls have no names
                    Area::Syscall => syscall::fire(&self.syscalls, cx(), id, enabled, emit.out),
                    _ if !enabled(id) => {}
                    Area::Diag => diag::fire(cx(), k.name, &mut emit),
                    Area::Sched => sched::fire(cx(), k.name, &mut emit),
                    Area::Proc => proc::fire(cx(), k.name, &mut emit),
                    Area::Io => io::fire(cx(), k.name, &mut emit),
                    Area::Perf | Area::Interrupt => perf::fire(cx(), k.name, &mut emit),
                    Area::Pf => pf::fire(cx(), k.name, &mut emit),
                    Area::Fsinfo => fsinfo::fire(cx(), k.name, &mut emit),
                    Area::Net => net::fire(cx(), k, &mut emit),
                    Area::Reg => reg::fire(cx(), k.name, &mut emit),
                    Area::Hwconfig => {
                        let c = cx();
                        emit.push(hwconfig::payload_args(c), c.pid, c.tid)
                    }
                    Area::Pmc => pmc::fire(cx(), k.name, &mut emit),
                }
            }
        }
        if ev.kind == HeaderKind::EventHeader || ev.kernel_group.is_none() {
            let by_guid = match ev.kind {
                HeaderKind::EventHeader => self.by_guid.get(&ev.provider),
                _ => None,
            };
            let key = match by_guid {
                Some(k) => std::borrow::Cow::Borrowed(k.as_str()),
                None => std::borrow::Cow::Owned(dec.provider.to_ascii_lowercase()),
            };
            let (pid, tid) = (cx().pid, cx().tid);
            if let Some(p) = self.named.get(key.as_ref()) {
                let args = payload_args(ev.id as u64);
                if enabled(p.events) {
                    out.push(p.events, args, pid, tid);
                }
                // an event with several keywords fires each matching keyword probe
                for &(_, mask, id) in &p.keywords {
                    if ev.keyword & mask != 0 && enabled(id) {
                        out.push(id, args, pid, tid);
                    }
                }
                if enabled(p.capturestate) && is_capture_state(ev, dec, &key) {
                    out.push(p.capturestate, args, pid, tid);
                }
            }
            guid_probe::firings(&self.guid_probes, ev, enabled, pid, tid, out);
        }
        if dnet::is_dotnet(ev) {
            dnet::firings(ev, dec, cx().pid, cx().tid, enabled, out);
        }
        // the cheap test first: `enabled` asks every program, for every record
        if dnet::is_clr_stack(ev) && enabled(diag::MISSED_DNET_ID) {
            diag::missed_dnet(
                cx(),
                &mut Emit {
                    probe: diag::MISSED_DNET_ID,
                    out,
                },
            );
        }
        // diag:::ignored: the record fired nothing else of the program
        let others = || {
            out.list[before..]
                .iter()
                .filter(|f| f.probe != events_id)
                .count()
        };
        if interest.map_or_else(|| enabled(diag::IGNORED_ID), |i| i.ignored) && others() == 0 {
            let mut emit = Emit {
                probe: diag::IGNORED_ID,
                out,
            };
            match blind {
                true => diag::record_blind(ev, &mut emit),
                false => diag::record(cx(), &self.provider_name(ev, dec), &mut emit),
            }
        }
    }

    /// The `profile-N` firings of a SampledProfile record: the probes `sampler` says are due
    /// on the record's CPU, each in the sampled thread's context with the sampled PC
    /// (see `perf::profile`).
    pub fn profile_firings(
        &self,
        ev: &EventRecord<'_>,
        dec: &DecodedEvent<'_>,
        state: &SystemState,
        sampler: &mut super::ProfileSampler,
        out: &mut EtwFirings,
    ) {
        if ev.kernel_group != Some(group::PERF_INFO) || ev.opcode != perf::SAMPLED_PROFILE {
            return;
        }
        let cx = EventCx::new(ev, dec, state);
        sampler.sample(ev.cpu as usize, ev.time_ns, |probe, late| {
            perf::profile(&cx, late, &mut Emit { probe, out });
        });
    }

    /// A record's provider as `diag:::events` names it: the decoded provider, the kernel
    /// group's class name, the name dtx knows the provider by, else its GUID.
    fn provider_name<'n>(
        &'n self,
        ev: &EventRecord<'_>,
        dec: &'n DecodedEvent<'_>,
    ) -> std::borrow::Cow<'n, str> {
        use std::borrow::Cow;
        if !dec.provider.is_empty() {
            return Cow::Borrowed(dec.provider);
        }
        if let Some(n) = ev
            .kernel_group
            .and_then(crate::etw::decode::kernel::group_name)
        {
            return Cow::Borrowed(n);
        }
        match self.by_guid.get(&ev.provider) {
            Some(n) => Cow::Borrowed(n.as_str()),
            None => Cow::Owned(ev.provider.to_string()),
        }
    }
}

/// The argument types of a named provider's probes: event id, opcode, payload, payload size.
const NAMED_ARGS: [&str; 4] = ["uint16_t", "uint8_t", "void *", "uint32_t"];

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
        arg_native: Vec::new(),
    }
}

/// Probes are listed under their own provider names; this adapter exposes one of them.
pub struct EtwProvider {
    pub name: String,
    pub probes: Arc<EtwProbes>,
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
                    && crate::probes::function_match(&desc.function, &p.function)
                    && (glob_match(&desc.name, &p.name)
                        || (p.name == "sample-1ms"
                            && desc.name.starts_with("sample-")
                            && desc.is_exact()))
            })
            .collect()
    }

    fn why_none(&self, desc: &ProbeDesc) -> Option<String> {
        absent::why_none(&self.probes, &self.name, desc)
    }

    fn list(&self) -> Vec<ProbeInfo> {
        self.probes.list_of(&self.name)
    }
}

/// One catalog provider per ETW provider name, and `etw` for the probes by GUID.
pub fn providers(probes: &EtwProbes) -> Vec<Box<dyn Provider + Send + Sync>> {
    let shared = Arc::new(probes.clone());
    let mut v: Vec<Box<dyn Provider + Send + Sync>> = shared
        .provider_names()
        .into_iter()
        .filter(|n| n != "profile")
        .map(|name| {
            Box::new(EtwProvider {
                name,
                probes: shared.clone(),
            }) as Box<dyn Provider + Send + Sync>
        })
        .collect();
    v.push(Box::new(guid_probe::GuidProvider {
        probes: shared.guid_probes.clone(),
        known: shared.guids.iter().copied().collect(),
    }));
    v
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
        let mut info = ProviderInfo::new("Microsoft-Windows-DNS-Client", Guid::default());
        info.add_keyword("DnsQuery", 0x2);
        info.add_keyword("Events", 0x4);
        p.add_provider(&info);
        let names: Vec<String> = p
            .all()
            .into_iter()
            .filter(|x| x.provider.starts_with("microsoft"))
            .map(|x| x.name)
            .collect();
        assert_eq!(
            names,
            ["events", "dnsquery", "events-keyword", "capturestate"]
        );
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

    /// `diag:::events` / `diag:::ignored` alone, read by no program: every record fires them
    /// in that order, and no record is decoded; anything read, or any other probe, and not.
    #[test]
    fn a_probe_for_every_record_read_by_nothing_is_blind() {
        let p = EtwProbes::new();
        let id = |provider: &str, name: &str| {
            p.all()
                .into_iter()
                .find(|x| x.provider == provider && x.name == name)
                .map(|x| x.id)
                .unwrap()
        };
        let (events, ignored, oncpu) = (
            id("diag", "events"),
            id("diag", "ignored"),
            id("sched", "on-cpu"),
        );
        let interest = |ids: &[u64], reads: bool| {
            let mut it = p.interest(&|x| ids.contains(&x));
            it.set_reads_event(reads);
            it
        };
        let record = |group: Option<u8>, tid: u32| EventRecord {
            header_type: 0,
            kind: HeaderKind::PerfInfo,
            flags: 0,
            provider: Guid::default(),
            kernel_group: group,
            id: 0,
            version: 2,
            channel: 0,
            level: 0,
            opcode: 46,
            task: 0,
            keyword: 0,
            pid: u32::MAX,
            tid,
            cpu: 0,
            raw_timestamp: 0,
            time_ns: 0,
            wall_ns: 0,
            pointer_size: 8,
            activity_id: Guid::default(),
            payload: &[],
            extended: Default::default(),
        };
        // a SampledProfile record (its thread in the payload) and a provider's record
        let recs = [record(Some(group::PERF_INFO), u32::MAX), record(None, 8)];
        let blind = interest(&[events, ignored], false);
        assert_eq!(blind.blind_probes(), Some(&[events, ignored][..]));
        assert_eq!(
            interest(&[ignored], false).blind_probes(),
            Some(&[ignored][..])
        );
        assert!(recs.iter().all(|r| !blind.wants(r)));
        let read = interest(&[events], true);
        assert_eq!(read.blind_probes(), None);
        assert!(read.wants(&recs[0]), "the thread of a sample is read");
        assert_eq!(interest(&[events, oncpu], false).blind_probes(), None);
        let mut sampled = interest(&[events], false);
        sampled.add_samples();
        assert!(sampled.wants(&recs[0]), "profile-N reads the samples");
    }
}

/// The whole path of a translated argument on synthetic FileIo and Registry events (no trace
/// has them): event → firing with its native structure → `args[0]->...` in a compiled clause.
#[cfg(test)]
mod xlate_tests {
    use super::*;
    use crate::etw::decode::Decoder;
    use crate::etw::record::Guid;
    use crate::lang::options::DOptions;
    use crate::lang::types::DataModel;
    use crate::lang::{compile, CompileInput, MacroEnv, SourceKind};
    use crate::probes::ProbeCatalog;
    use crate::providers::etw::payload::PayloadMemory;
    use crate::vm::{Datum, FiringCtx, Record, Vm, VmOptions};
    use std::sync::Arc;

    fn kernel_event(group: u8, opcode: u8, version: u8, payload: &[u8]) -> EventRecord<'_> {
        EventRecord {
            header_type: 0,
            kind: HeaderKind::System,
            flags: 0,
            provider: Guid::default(),
            kernel_group: Some(group),
            id: 0,
            version,
            channel: 0,
            level: 0,
            opcode,
            task: 0,
            keyword: 0,
            pid: 40,
            tid: 41,
            cpu: 0,
            raw_timestamp: 0,
            time_ns: 5,
            wall_ns: 5,
            pointer_size: 8,
            activity_id: Guid::default(),
            payload,
            extended: Default::default(),
        }
    }

    /// The values a clause traces when `ev` fires its probe.
    fn traced(src: &str, ev: &EventRecord<'_>, state: &SystemState) -> Vec<String> {
        let etw = EtwProbes::new();
        let catalog = crate::providers::etw_catalog(&etw);
        let mut opts = DOptions::new();
        let c = compile(
            CompileInput {
                text: src,
                kind: SourceKind::File,
                macros: MacroEnv::default(),
                cpp: None,
                file_name: "t.d",
                model: DataModel::Lp64,
            },
            &mut opts,
            &catalog,
        )
        .unwrap();
        let program = Arc::new(c.ir);
        let mut vm = Vm::new(program.clone(), VmOptions::from_options(&opts));
        let mut probes = std::collections::HashMap::new();
        for (i, clause) in program.clauses.iter().enumerate() {
            for d in &clause.probes {
                for p in catalog.matching(d) {
                    vm.enable(p.id, i);
                    probes.insert(p.id, p);
                }
            }
        }
        let decoder = Decoder::new();
        let dec = decoder.decode(ev);
        let mut out = EtwFirings::new();
        etw.firings(ev, &dec, state, &|id| probes.contains_key(&id), &mut out);
        assert!(!out.is_empty(), "no firing");
        for f in &out {
            // the thread the firing runs in, and its process's name, as the engine gives them
            let execname: Vec<u8> = state
                .process(f.pid)
                .map(|p| p.name.to_ascii_lowercase().into_bytes())
                .unwrap_or_default();
            let mem = PayloadMemory {
                id: ev.id,
                version: ev.version,
                wide: true,
                payload: ev.payload,
                native: out.native_of(f),
            };
            let mut cx = FiringCtx::synthetic(&probes[&f.probe], 1, 1, &execname);
            cx.args = f.args;
            cx.set_ids(f.pid, f.tid);
            cx.memory = &mem;
            vm.fire(&cx);
        }
        vm.records
            .iter()
            .flat_map(|(_, r)| match r {
                Record::Data { values, .. } => values
                    .iter()
                    .map(|d| match d {
                        Datum::Int { value, .. } => value.to_string(),
                        Datum::Str(s) | Datum::Bytes(s) => {
                            let n = s.iter().position(|&b| b == 0).unwrap_or(s.len());
                            String::from_utf8_lossy(&s[..n]).into_owned()
                        }
                        other => format!("{other:?}"),
                    })
                    .collect::<Vec<_>>(),
                _ => Vec::new(),
            })
            .collect()
    }

    #[test]
    fn fsinfo_read_translates_to_fileinfo() {
        // FileIo Read v3: Offset, IrpPtr, FileObject, FileKey, TTID, IoSize, IoFlags
        let mut p = Vec::new();
        p.extend_from_slice(&4096u64.to_le_bytes());
        p.extend_from_slice(&0xaaaau64.to_le_bytes());
        p.extend_from_slice(&0xf00du64.to_le_bytes());
        p.extend_from_slice(&0u64.to_le_bytes());
        p.extend_from_slice(&41u32.to_le_bytes());
        p.extend_from_slice(&512u32.to_le_bytes());
        p.extend_from_slice(&0u32.to_le_bytes());
        let ev = kernel_event(group::FILE_IO, 67, 3, &p);
        let mut state = SystemState::new();
        state.set_file_name(0xf00d, "\\Device\\HarddiskVolume2\\data\\a.txt");
        let got = traced(
            "fsinfo:::read { trace(args[0]->fi_pathname); trace(args[0]->fi_name);
               trace(args[0]->fi_dirname); trace(args[0]->fi_offset);
               trace(args[0]->fi_bcount); trace((uint64_t)args[0]->fi_irp); }",
            &ev,
            &state,
        );
        assert_eq!(
            got,
            [
                "\\Device\\HarddiskVolume2\\data\\a.txt",
                "a.txt",
                "\\Device\\HarddiskVolume2\\data",
                "4096",
                "512",
                "43690"
            ]
        );
    }

    /// `sched:::wakeup` and `sched:::enqueue` from a ReadyThread record (Thread group, opcode
    /// 50) of each version Windows writes: no trace here has one, so the record is built as
    /// Microsoft Learn's ReadyThread class and PerfView's DispatcherReadyThreadTraceData lay it
    /// out (8 bytes: the readied thread's id, then AdjustReason, AdjustIncrement, Flag and a
    /// reserved byte). Both fire in the thread that readied it (the record's header); the
    /// readied thread is the arguments' `lwpsinfo_t` and `psinfo_t`, and `enqueue` names no
    /// queue's CPU (-1). A header without a process id (a thread readied from a DPC, PerfView
    /// notes) takes the process of its thread.
    #[test]
    fn ready_thread_fires_wakeup_and_enqueue_of_the_readied_thread() {
        let process = |pid: u32, name: &str| crate::etw::state::Process {
            pid,
            name: name.into(),
            ..Default::default()
        };
        let thread = |tid: u32, pid: u32| crate::etw::state::Thread {
            tid,
            pid,
            ..Default::default()
        };
        let mut state = SystemState::new();
        state.preload(
            vec![process(40, "Waker.exe"), process(300, "Sleeper.exe")],
            vec![thread(41, 40), thread(500, 300)],
        );
        // readied thread 500, AdjustReason 1 (Unwait), AdjustIncrement 2, Flag 1 (from a DPC)
        let payload = [500u32.to_le_bytes().as_slice(), &[1, 2, 1, 0]].concat();
        for version in [2, 3, 4] {
            for header_pid in [40, u32::MAX] {
                let mut ev = kernel_event(group::THREAD, 50, version, &payload);
                ev.pid = header_pid;
                let decoder = Decoder::new();
                let dec = decoder.decode(&ev);
                assert_eq!((dec.provider, dec.name), ("Thread", "ReadyThread"));
                let fields = dec.pick(["TThreadId", "AdjustReason", "AdjustIncrement", "Flag"]);
                let fields: Vec<_> = fields.iter().map(|v| v.as_ref()?.as_u64()).collect();
                assert_eq!(fields, [Some(500), Some(1), Some(2), Some(1)], "v{version}");
                let got = traced(
                    "sched:::wakeup { trace(args[0]->pr_lwpid); trace(args[1]->pr_pid);
                       trace(args[1]->pr_fname); trace(arg2); trace(tid); trace(pid);
                       trace(execname); }
                     sched:::enqueue { trace(args[0]->pr_lwpid); trace(args[1]->pr_fname);
                       trace(args[2]->cpu_id); trace(tid); trace(execname); }",
                    &ev,
                    &state,
                );
                assert_eq!(
                    got,
                    [
                        "500",
                        "300",
                        "sleeper.exe",
                        "500",
                        "41",
                        "40",
                        "waker.exe",
                        "500",
                        "sleeper.exe",
                        "-1",
                        "41",
                        "waker.exe"
                    ],
                    "v{version}, header pid {header_pid}"
                );
            }
        }
    }

    #[test]
    fn reg_queryvalue_translates_to_registry() {
        // Registry v2: InitialTime, Status, Index, KeyHandle, KeyName
        let mut p = Vec::new();
        p.extend_from_slice(&77i64.to_le_bytes());
        p.extend_from_slice(&0xc000_0034u32.to_le_bytes());
        p.extend_from_slice(&3u32.to_le_bytes());
        p.extend_from_slice(&0x1234u64.to_le_bytes());
        for c in "\\REGISTRY\\MACHINE\\SOFTWARE".encode_utf16().chain([0]) {
            p.extend_from_slice(&c.to_le_bytes());
        }
        let ev = kernel_event(group::REGISTRY, 16, 2, &p);
        let got = traced(
            "reg:::queryvalue { trace(args[0]->r_rname); trace(args[0]->r_index);
               trace(args[0]->r_status); trace(args[0]->r_intime); }",
            &ev,
            &SystemState::new(),
        );
        assert_eq!(
            got,
            [
                "\\REGISTRY\\MACHINE\\SOFTWARE",
                "3",
                (0xc000_0034u32 as i32).to_string().as_str(),
                "77"
            ]
        );
    }
}
