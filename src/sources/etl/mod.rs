//! A recorded trace as an event source: the file's records in timestamp order, decoded, with the
//! system state (processes, threads, images, stacks) rebuilt as they go by.

use crate::etw::decode::{DecodedEvent, Decoder};
use crate::etw::group::{self, IMAGE, PERF_INFO, PROCESS};
use crate::etw::opcode::{CSWITCH, READY_THREAD, SYSCALL_ENTER};
use crate::etw::reader::{EtlError, EtlFile, HookSet};
use crate::etw::record::{EventRecord, HeaderKind, RecordCopy};
use crate::etw::state::{StackMatcher, SystemState};
use crate::providers::etw::EtwProbes;
use crate::sources::first_records::{EarliestRecords, GROUPS};

pub mod stacks;
pub mod walk;
pub use walk::{fire_event, walk_trace, EventScratch};

/// An opened trace with its decoder state.
pub struct TraceSource {
    /// Shared with the look-ahead that reads a walk's stacks ([`crate::sources::etl::stacks`]).
    pub file: std::sync::Arc<EtlFile>,
    pub decoder: Decoder,
    pub state: SystemState,
    pub name: String,
    /// The stacks of the trace, when the program records stacks (a stack's records come after
    /// the event it belongs to): every one, collected before the run, or, in a windowed
    /// matcher, the key definitions, the rest read a window ahead of the walk
    /// ([`crate::sources::etl::stacks`]).
    pub stacks: Option<StackMatcher>,
    /// How far ahead of the walk its stacks are read, in ns of trace time (`-x stackwindow`);
    /// 0: every stack before the run.
    stack_window_ns: u64,
    /// The .NET methods the trace's runtime events describe (collected with the stacks), to
    /// name frames of JIT-compiled code.
    pub managed_methods: Vec<crate::providers::etw::dnet::ManagedMethod>,
    /// Whether [`TraceSource::collect_file_names`] ran.
    files_collected: bool,
    /// Whether [`TraceSource::collect_threads`] ran.
    threads_collected: bool,
    /// The threads and processes of the trace's start that pass found, kept so that a source
    /// opened again over the same file needs no second pass ([`TraceSource::start_table`]).
    start_table: Option<std::sync::Arc<StartTable>>,
    /// Whether [`TraceSource::collect_disk_completions`] ran.
    disks_collected: bool,
    /// Whether a walk must hand every record to its caller ([`TraceSource::walk_every_record`]).
    every_record: bool,
    /// The PDBs read to name the trace's frames, kept for every resolver built from it.
    pub pdbs: crate::symbols::PdbStore,
}

/// The threads and processes that existed from a trace's start ([`TraceSource::collect_threads`]).
#[derive(Debug, Default, PartialEq)]
pub struct StartTable {
    pub processes: Vec<crate::etw::state::Process>,
    pub threads: Vec<crate::etw::state::Thread>,
}

/// The names a walk of a trace gives stack frames as it goes, for what is printed before END
/// (a `printa()` of stacks in `tick-5s`, a `stack()` traced per event): built again from the
/// state as of the record when something is about to be printed and the images changed since
/// the last build, so a frame prints as dtrace's consumer would name it then.
pub struct WalkNames {
    pdbs: crate::symbols::PdbStore,
    methods: std::sync::Arc<Vec<crate::providers::etw::dnet::ManagedMethod>>,
    /// [`SystemState::names_changed`] at the last build, and when it was.
    built: Option<(u64, std::time::Instant)>,
}

impl WalkNames {
    /// Names for a walk of `source` (its PDB store and .NET methods).
    pub fn of(source: &TraceSource) -> WalkNames {
        WalkNames {
            pdbs: source.pdbs.clone(),
            methods: std::sync::Arc::new(source.managed_methods.clone()),
            built: None,
        }
    }

    /// A resolver current with `state`, when the last one is not.
    pub fn current(&mut self, state: &SystemState) -> Option<crate::symbols::TraceSymbols> {
        self.current_every(state, std::time::Duration::ZERO)
    }

    /// A resolver current with `state`, when the last one is not and was built at least
    /// `every` ago (a console's snapshots, refreshed many times a second, need no more).
    pub fn current_every(
        &mut self,
        state: &SystemState,
        every: std::time::Duration,
    ) -> Option<crate::symbols::TraceSymbols> {
        let now = state.names_changed();
        if (self.built).is_some_and(|(n, at)| n == now || at.elapsed() < every) {
            return None;
        }
        self.built = Some((now, std::time::Instant::now()));
        Some(frame_names(state, &self.methods, &self.pdbs))
    }
}

/// The names of stack frames as `state` knows the images: PDBs from `pdbs`, and the .NET
/// `methods` (JIT-compiled code) looked up before the images.
pub fn frame_names(
    state: &SystemState,
    methods: &[crate::providers::etw::dnet::ManagedMethod],
    pdbs: &crate::symbols::PdbStore,
) -> crate::symbols::TraceSymbols {
    let mut symbols = crate::symbols::TraceSymbols::with_store(state, pdbs);
    symbols.add_methods((methods.iter()).map(|m| (m.pid, m.start, m.size, m.name.as_str())));
    symbols
}

impl TraceSource {
    pub fn open(path: &str) -> Result<TraceSource, EtlError> {
        let file = EtlFile::open_path(path)?;
        // the PDB paths its images record are a stranger's: not opened as they are
        crate::symbols::pdb::set_recorded_trace();
        Ok(TraceSource {
            file: std::sync::Arc::new(file),
            decoder: TraceSource::new_decoder(),
            state: SystemState::new(),
            name: path.to_string(),
            stacks: None,
            stack_window_ns: crate::sources::etl::stacks::DEFAULT_WINDOW_NS,
            managed_methods: Vec::new(),
            files_collected: false,
            threads_collected: false,
            start_table: None,
            disks_collected: false,
            every_record: false,
            pdbs: crate::symbols::PdbStore::from_env(),
        })
    }

    /// When the trace started, as wall-clock time (ns since 1970; 0 when the file does not
    /// say): what its records' `walltimestamp` counts from.
    pub fn start_unix_ns(&self) -> u64 {
        self.file.header().start_unix_ns().max(0) as u64
    }

    /// A decoder with the manifests dtx ships (the .NET runtime's) loaded.
    pub fn new_decoder() -> Decoder {
        thread_local! {
            // parsed once per thread; every source starts from a copy
            static SHIPPED: Decoder = {
                let mut d = Decoder::new();
                d.load_manifest_str(crate::providers::etw::dnet::MANIFEST);
                d
            };
        }
        SHIPPED.with(Decoder::clone)
    }

    /// Makes ready the trace's stacks (StackWalk events, stack keys, STACK_TRACE items) so that
    /// each event can be given its stack when it fires: read a window ahead of the walk
    /// ([`TraceSource::set_stack_window`]; the key definitions and .NET methods in a pass
    /// before), or with a window of 0 every one before the run.
    pub fn collect_stacks(&mut self) {
        if self.stack_window_ns == 0 {
            return self.collect_stacks_with(false);
        }
        let (m, methods) = crate::sources::etl::stacks::collect_keys_and_methods(&self.file);
        self.stacks = Some(m);
        self.managed_methods = methods;
    }

    /// How far ahead of the walk, in ns of trace time, [`TraceSource::collect_stacks`] has the
    /// stacks read (`-x stackwindow`; 0: every stack before the run). Before `collect_stacks`.
    pub fn set_stack_window(&mut self, ns: u64) {
        self.stack_window_ns = ns;
    }

    /// How far ahead of the walk its stacks are read, when a windowed matcher holds them.
    pub fn stack_window(&self) -> u64 {
        self.stack_window_ns
    }

    /// Every stack of the trace, in a pass before the run; with `missed`, also finds the stack
    /// records that belong to no event of the trace (for `diag:::missed-stack`,
    /// `missed-ustack` and `missed-dnet-stack`), which the system state then knows: these
    /// need every record's time, so they always take this pass.
    pub fn collect_stacks_with(&mut self, missed: bool) {
        let (m, methods) = crate::sources::etl::stacks::collect_every_stack(&self.file, missed);
        self.state.set_missed_stacks(m.missed().clone());
        self.stacks = Some(m);
        self.managed_methods = methods;
    }

    /// The names of the stack frames of the trace as walked so far: the images its processes
    /// loaded (from the state) and, when the stacks were collected, its .NET methods.
    pub fn symbols(&mut self) -> crate::symbols::TraceSymbols {
        // a trace recorded here without ImageID records: identities from the image files
        #[cfg(windows)]
        crate::symbols::trace::identify_from_this_machine(&mut self.state, true);
        frame_names(&self.state, &self.managed_methods, &self.pdbs)
    }

    /// A pass over the trace's Process and Thread records (every other record is stepped over
    /// unbuilt) that gives the system state, before the first event, each thread and process
    /// that existed from the trace's start: those whose earliest record is not their Start (a
    /// rundown, an End, a DCEnd at the file's end). An event of such a thread is then attributed
    /// to its process from the first record, as WPA and PerfView do, where the walk alone would
    /// learn it only at its first Thread record. Done once per source.
    pub fn collect_threads(&mut self) {
        if self.threads_collected {
            return;
        }
        let decoder = Decoder::new();
        let mut first = EarliestRecords::default();
        let mut it = self.file.events_in_file_order().kernel_groups_only(&GROUPS);
        while let Some(r) = it.next_event() {
            if let Ok(ev) = r {
                first.note(&ev, &decoder);
            }
        }
        self.preload(first);
    }

    /// Leaves the thread table to the records as they come, in time order, as a live session
    /// learns it: no preload ([`TraceSource::collect_threads`]). What the live-replay tests
    /// compare the live path with; a thread then counts as unknown until a record names it.
    pub fn learn_threads_as_they_come(&mut self) {
        self.threads_collected = true;
    }

    /// Makes the engine's walk hand every record to its caller, even the kernel records no
    /// enabled probe reads (which it otherwise steps over unbuilt): for a caller that counts
    /// the records or may change the programs on the way (the console).
    pub fn walk_every_record(&mut self) {
        self.every_record = true;
    }

    /// Whether [`TraceSource::walk_every_record`] was asked for.
    pub fn walks_every_record(&self) -> bool {
        self.every_record
    }

    /// Gives the state the threads and processes of the trace's start (once).
    fn preload(&mut self, first: EarliestRecords) {
        if !self.threads_collected {
            let (processes, threads) = first.at_start();
            self.preload_start_table(std::sync::Arc::new(StartTable { processes, threads }));
        }
    }

    /// The threads and processes of the trace's start, once a pass found them (the scan of
    /// [`TraceSource::scan_providers`] or [`TraceSource::collect_threads`]): what a source
    /// opened again over the same file takes instead of reading it again.
    pub fn start_table(&self) -> Option<std::sync::Arc<StartTable>> {
        self.start_table.clone()
    }

    /// Takes the start of the trace another source over the same file found
    /// ([`TraceSource::start_table`]): [`TraceSource::collect_threads`] then has nothing to do.
    pub fn preload_start_table(&mut self, table: std::sync::Arc<StartTable>) {
        if self.threads_collected {
            return;
        }
        self.threads_collected = true;
        self.state
            .preload(table.processes.clone(), table.threads.clone());
        self.start_table = Some(table);
    }

    /// Whether the state knows the trace's start (a pass found it, or another source's).
    pub fn knows_threads(&self) -> bool {
        self.threads_collected
    }

    /// A pass over the trace for the names of file objects (FileIo name, create and rundown
    /// events), so that the io, fsinfo and pf probes know a file's name even when its rundown
    /// comes at the end of the trace. Done once per source.
    pub fn collect_file_names(&mut self) {
        if self.files_collected {
            return;
        }
        self.files_collected = true;
        let decoder = Decoder::new();
        let mut it = self.file.events();
        while let Some(r) = it.next_event() {
            let Ok(ev) = r else { continue };
            if ev.kernel_group != Some(group::FILE_IO) || !matches!(ev.opcode, 0 | 32 | 36 | 64) {
                continue;
            }
            let dec = decoder.decode(&ev);
            let name = dec.str("FileName").or_else(|| dec.str("OpenPath"));
            if let (Some(obj), Some(name)) = (dec.u64("FileObject"), name) {
                if !name.is_empty() {
                    self.state.set_file_name(obj, &name);
                }
            }
        }
    }

    /// A pass over the trace's DiskIo records (the others are stepped over unbuilt) that pairs
    /// each start with its completion by IRP and gives the system state what the completion
    /// says (size, offset, disk, file object), for `io:::start`: the records it fires on
    /// (ReadInit, WriteInit, FlushInit) carry only the IRP. Done once per source.
    pub fn collect_disk_completions(&mut self) {
        if self.disks_collected {
            return;
        }
        self.disks_collected = true;
        let decoder = Decoder::new();
        let mut completions = crate::etw::state::disk::DiskCompletions::new();
        let disk = [group::DISK_IO];
        let mut it = self.file.events().kernel_groups_only(&disk);
        while let Some(r) = it.next_event() {
            let Ok(ev) = r else { continue };
            if ev.kernel_group == Some(disk[0])
                && crate::etw::state::disk::is_start_or_completion(ev.opcode)
            {
                completions.note(&ev, &decoder.decode(&ev));
            }
        }
        self.state.set_disk_completions(completions);
    }

    /// A first look at the trace: the providers it names (for `-l`, `<provider>:::events` and
    /// the keyword probes; the providers of the manifests loaded join them)
    /// and the schemas its metadata records carry. One pass in file order over the provider
    /// events (kernel records are stepped over unbuilt) registers the metadata (EventMetadata
    /// schemas and value maps, TraceLogging provider traits) and keeps the earliest record of
    /// each kind of event (provider, id, version, opcode); those are then decoded in time order,
    /// once the metadata is known, so that providers are numbered as they appear. The same pass
    /// reads the Process and Thread records for [`TraceSource::collect_threads`].
    pub fn scan_providers(&mut self, probes: &mut EtwProbes) {
        // by kind: (raw timestamp, place in file order) of the earliest record, and a copy of it
        let mut first: crate::fasthash::FastMap<_, ((i64, u64), RecordCopy)> =
            crate::fasthash::FastMap::default();
        let mut threads = (!self.threads_collected).then(EarliestRecords::default);
        // the Process and Thread records (for the thread table), and the system call entries
        // (for the `syscall` probes by name)
        let mut keep = HookSet::default();
        if threads.is_some() {
            for g in GROUPS {
                keep.insert_group(g);
            }
        }
        keep.insert(PERF_INFO, SYSCALL_ENTER);
        let mut it = self
            .file
            .events_in_file_order()
            .kernel_events_only(keep)
            .with_census();
        // the kernel events the trace holds: those delivered, with those stepped over
        let mut held = crate::etw::reader::HookSet::default();
        let thread_decoder = Decoder::new();
        let mut n = 0u64;
        let mut calls = crate::fasthash::FastSet::default();
        while let Some(r) = it.next_event() {
            let Ok(ev) = r else { continue };
            if let Some(g) = ev.kernel_group {
                held.insert(g, ev.opcode);
            }
            if ev.kernel_group == Some(PERF_INFO) && ev.opcode == SYSCALL_ENTER {
                calls.extend(crate::etw::state::syscall_address(&ev));
                continue;
            }
            // the Process and Thread records the other pass would have stepped over
            if let (Some(t), Some(g)) = (&mut threads, ev.kernel_group) {
                if GROUPS.contains(&g) {
                    t.note(&ev, &thread_decoder);
                    if skip_kernel_record_kind(&ev) {
                        continue;
                    }
                }
            }
            n += 1;
            self.decoder.observe(&ev);
            if ev.kernel_group.is_some() {
                continue;
            }
            let key = (
                ev.kind == HeaderKind::EventHeader,
                ev.provider,
                ev.id,
                ev.version,
                ev.opcode,
            );
            let at = (ev.raw_timestamp, n);
            match first.get_mut(&key) {
                Some((t, _)) if *t <= at => {}
                Some(slot) => *slot = (at, RecordCopy::of(&ev)),
                None => {
                    first.insert(key, (at, RecordCopy::of(&ev)));
                }
            }
        }
        if let Some(skipped) = it.census() {
            held.union(&skipped);
        }
        drop(it);
        probes.set_kernel_events(held);
        if let Some(t) = threads {
            self.preload(t);
        }
        if !calls.is_empty() {
            let symbols = crate::symbols::TraceSymbols::from_state(&self.kernel_images());
            probes.set_syscalls(crate::providers::etw::syscall::name_calls(calls, &symbols));
        }
        let mut first: Vec<_> = first.into_values().collect();
        first.sort_by_key(|(at, _)| *at);
        for (_, copy) in &first {
            let ev = copy.record();
            probes.note_held_guid(ev.provider);
            if ev.kind == HeaderKind::EventHeader {
                probes.note_guid(ev.provider);
            }
            let dec = self.decoder.decode(&ev);
            if dec.is_named() && !dec.provider.is_empty() {
                let mut info = crate::etw::catalog::ProviderInfo::new(dec.provider, ev.provider);
                if ev.kind == HeaderKind::EventHeader {
                    if let Some(known) = self.decoder.provider_info(ev.provider) {
                        info.keywords = known.keywords.clone();
                    }
                } else {
                    // a classic provider's GUID is its event class's
                    info.guid = crate::etw::record::Guid::default();
                }
                probes.add_provider(&info);
            }
        }
        // the providers of the manifests loaded, with their keywords
        let mut loaded: Vec<_> = self.decoder.providers().cloned().collect();
        loaded.sort_by(|a, b| a.name.cmp(&b.name));
        for p in &loaded {
            if !p.name.is_empty() {
                probes.add_provider(p);
            }
        }
    }

    /// The images of the trace's processes (the kernel's are process 0's) with their PDB
    /// identities, as of the trace's end: a pass in time order over the Process, Image and
    /// ImageID records, the others stepped over.
    pub fn kernel_images(&self) -> SystemState {
        let decoder = Decoder::new();
        let mut state = SystemState::new();
        let groups = [PROCESS, IMAGE];
        let mut it = self.file.events().kernel_groups_only(&groups);
        while let Some(r) = it.next_event() {
            let Ok(ev) = r else { continue };
            if state_needs(&ev) {
                state.observe(&ev, Some(&decoder.decode(&ev)));
            }
        }
        state
    }

    /// Every frame of the trace's StackWalk records (the stacks the kernel logs for its
    /// events and for the providers that ask for them): the process the stack was taken in
    /// (the kernel's frames are given with `None`) and the address.
    pub fn each_stack_frame(&self, mut f: impl FnMut(Option<u32>, u64)) {
        let mut it = self.file.events().kernel_groups_only(&[STACK_WALK]);
        while let Some(r) = it.next_event() {
            let Ok(ev) = r else { continue };
            // StackWalk_Event: EventTimeStamp (8), StackProcess (4), StackThread (4), frames
            if ev.kernel_group != Some(STACK_WALK) || ev.opcode != 32 || ev.payload.len() < 16 {
                continue;
            }
            let pid =
                u32::from_le_bytes([ev.payload[8], ev.payload[9], ev.payload[10], ev.payload[11]]);
            let width = if ev.pointer_size == 4 { 4 } else { 8 };
            for c in ev.payload[16..].chunks_exact(width) {
                let mut b = [0u8; 8];
                b[..width].copy_from_slice(c);
                let pc = u64::from_le_bytes(b);
                if pc == 0 {
                    continue;
                }
                let kernel = crate::etw::is_kernel_address(pc, ev.pointer_size);
                f((!kernel).then_some(pid), pc);
            }
        }
    }

    /// How often each probe of the ETW providers fires over the whole trace (by probe id): what
    /// the console's probe browser shows next to each probe.
    pub fn probe_counts(&mut self, probes: &EtwProbes) -> std::collections::HashMap<u64, u64> {
        let mut counts = std::collections::HashMap::new();
        let mut firings = crate::providers::etw::EtwFirings::new();
        self.walk(
            |ev, dec, state| {
                firings.clear();
                probes.firings(ev, dec, state, &|_| true, &mut firings);
                for f in &firings {
                    *counts.entry(f.probe).or_insert(0u64) += 1;
                }
                true
            },
            |_| {},
        );
        counts
    }

    /// Walks every record in timestamp order: `f` gets the record, its decoding and the state
    /// as of that record. Errors in the file are passed to `on_error` and the walk goes on.
    pub fn walk(
        &mut self,
        f: impl FnMut(&EventRecord<'_>, &DecodedEvent<'_>, &SystemState) -> bool,
        on_error: impl FnMut(&EtlError),
    ) {
        self.walk_filtered(|_| true, f, on_error)
    }

    /// [`TraceSource::walk`], decoding only the records the system state needs and those for
    /// which `wants` says so; the others reach `f` with [`DecodedEvent::skipped`]. Decoding is
    /// most of a walk's cost, and a program usually needs few event kinds.
    pub fn walk_filtered(
        &mut self,
        wants: impl Fn(&EventRecord<'_>) -> bool,
        f: impl FnMut(&EventRecord<'_>, &DecodedEvent<'_>, &SystemState) -> bool,
        on_error: impl FnMut(&EtlError),
    ) {
        self.walk_kernel_events(None, wants, f, on_error);
    }

    /// [`TraceSource::walk_filtered`]; with `keep`, the kernel records (system, compact and
    /// perfinfo headers) of the events not in it are stepped over unbuilt and never reach
    /// `f` (provider records always do), together with the events the system state reads
    /// ([`state_kernel_events`] is added to `keep`). When the walk went to the end of the file
    /// and a record stepped over was the trace's last, its time (ns since the trace's start):
    /// where the trace's clock ends.
    pub fn walk_kernel_events(
        &mut self,
        keep: Option<HookSet>,
        wants: impl Fn(&EventRecord<'_>) -> bool,
        mut f: impl FnMut(&EventRecord<'_>, &DecodedEvent<'_>, &SystemState) -> bool,
        mut on_error: impl FnMut(&EtlError),
    ) -> Option<u64> {
        let mut it = self.file.events();
        if let Some(mut keep) = keep {
            state_kernel_events(&mut keep);
            // the state's clock starts at the trace's first record, delivered or not
            let mut first = self.file.events();
            while let Some(r) = first.next_event() {
                if let Ok(ev) = r {
                    if ev.time_ns > 0 {
                        self.state.observe(&ev, None);
                        break;
                    }
                }
            }
            it = it.kernel_events_only(keep);
        }
        let mut last = i64::MIN;
        loop {
            // each record is built in place, where it is read (`Events::next_into`)
            let mut ev = crate::etw::reader::blank_record(0);
            match it.next_into(&mut ev) {
                None => break,
                Some(Err(e)) => {
                    on_error(&e);
                    continue;
                }
                Some(Ok(())) => {}
            }
            let ev = &ev;
            last = ev.raw_timestamp;
            self.decoder.observe(ev);
            let go_on = if state_needs(ev) || wants(ev) {
                let dec = self.decoder.decode(ev);
                self.state.observe(ev, Some(&dec));
                f(ev, &dec, &self.state)
            } else {
                self.state.observe(ev, None);
                f(ev, &DecodedEvent::skipped(), &self.state)
            };
            if !go_on {
                return None;
            }
        }
        let end = it.skipped_until().filter(|&t| t > last)?;
        Some(self.file.time_base().since_start_ns(end).max(0) as u64)
    }
}

/// Adds to `keep` the kernel events the system state reads ([`state_needs`]): process, image
/// and thread records but the context switches and ready-thread events.
pub fn state_kernel_events(keep: &mut HookSet) {
    keep.insert_group(group::PROCESS);
    keep.insert_group(group::IMAGE);
    for op in 0..=255u8 {
        if op != CSWITCH && op != READY_THREAD {
            keep.insert(group::THREAD, op);
        }
    }
}

/// Whether a record has one of the kernel headers (system, compact, perfinfo) that
/// [`crate::etw::reader::Events::skip_kernel_records`] steps over.
fn skip_kernel_record_kind(ev: &EventRecord<'_>) -> bool {
    matches!(
        ev.kind,
        HeaderKind::System | HeaderKind::Compact | HeaderKind::PerfInfo
    )
}

/// Whether the system state needs a record decoded: process, thread (not the context switches
/// and ready-thread events), image and image-id records. (Stack walks are matched to their
/// events before the run, by [`TraceSource::collect_stacks`].)
pub(crate) fn state_needs(ev: &EventRecord<'_>) -> bool {
    match ev.kernel_group {
        Some(group::PROCESS | group::IMAGE) => true,
        Some(group::THREAD) => ev.opcode != CSWITCH && ev.opcode != READY_THREAD,
        Some(_) => false,
        None => ev.provider == crate::etw::decode::kernel::IMAGE_ID,
    }
}

/// The kernel group of StackWalk records.
pub const STACK_WALK: u8 = group::STACK_WALK;

/// The stacks of a trace, taken out of the source while it is walked.
pub struct StackSource(pub Option<StackMatcher>);

impl StackSource {
    /// The kernel and user frames of the event's stack; `pc` (a sample's instruction
    /// pointer) picks among stacks that share the event's timestamp and thread.
    pub fn stack_of(
        &self,
        ev: &EventRecord<'_>,
        tid: u32,
        pc: Option<u64>,
        kernel: &mut Vec<u64>,
        user: &mut Vec<u64>,
    ) {
        Self::frames(self.0.as_ref(), ev, tid, pc, kernel, user)
    }

    fn frames(
        m: Option<&StackMatcher>,
        ev: &EventRecord<'_>,
        tid: u32,
        pc: Option<u64>,
        kernel: &mut Vec<u64>,
        user: &mut Vec<u64>,
    ) {
        kernel.clear();
        user.clear();
        let Some(m) = m else { return };
        let frames = m
            .stack_at(ev.raw_timestamp, tid, ev.cpu, pc)
            .or_else(|| m.stack_for(ev));
        for pc in frames.into_iter().flatten() {
            if crate::etw::is_kernel_address(pc, ev.pointer_size) {
                kernel.push(pc);
            } else {
                user.push(pc);
            }
        }
    }
}
