//! System state rebuilt from events fed in timestamp order: processes, threads, loaded images
//! (with PDB identities from KernelTraceControl, or read from the image files), and the stacks
//! that belong to events.

mod cpus;
mod devices;
pub mod disk;
pub mod epochs;
pub mod exited;
mod stacks;

use crate::fasthash::FastMap;

pub use cpus::{syscall_address, CpuThreads};
pub use devices::{DevicePaths, ImageIdentities};
pub use stacks::StackMatcher;

use crate::etw::decode::{DecodedEvent, Value};
use crate::etw::record::{EventRecord, Guid};

/// A process as known from Process Start/DCStart/End/DCEnd/Defunct events.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Process {
    pub pid: u32,
    pub parent: u32,
    pub session: u32,
    /// The image file name (e.g. `POWERPNT.EXE`).
    pub name: String,
    pub command_line: String,
    pub unique_key: u64,
    /// Start time (ns since trace start) when the start was seen (not for rundown processes).
    pub start_ns: Option<u64>,
    pub end_ns: Option<u64>,
    pub exit_status: Option<i64>,
    /// Loaded images, sorted by base address.
    pub images: Vec<Image>,
    /// Images an Image Unload record removed, in unload order (a process's images are all
    /// unloaded as it exits): frames sampled while they were mapped are named after them at
    /// the end of a trace ([`crate::symbols::trace`]).
    pub unloaded_images: Vec<Image>,
    /// How many Image Load records (not rundowns) named the process: the first one of a
    /// process that started in the trace maps its executable (`proc:::exec-success`).
    pub image_loads: u32,
}

/// A thread as known from Thread events.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Thread {
    pub tid: u32,
    pub pid: u32,
    pub name: Option<String>,
    pub start_ns: Option<u64>,
    pub end_ns: Option<u64>,
}

/// PDB identity of an image (KernelTraceControl DbgID_RSDS, or the CodeView RSDS record of the
/// image file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PdbInfo {
    pub guid: Guid,
    pub age: u32,
    pub file_name: String,
}

/// A loaded image.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Image {
    pub base: u64,
    pub size: u64,
    pub file_name: String,
    pub time_date_stamp: u32,
    pub checksum: u32,
    /// The original file name from KernelTraceControl ImageID, when present.
    pub original_name: Option<String>,
    pub pdb: Option<PdbInfo>,
    /// The epochs of its process id's address space in which it names its addresses
    /// ([`epochs`]).
    pub held: epochs::Held,
}

impl Image {
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.base && addr - self.base < self.size.max(1)
    }
}

/// Processes, threads and images, as of the last event observed.
#[derive(Default)]
pub struct SystemState {
    processes: FastMap<u32, Process>,
    /// Processes that ended and were replaced by a newer one with the same pid (bounded:
    /// [`exited`]).
    exited: exited::Exited,
    threads: FastMap<u32, Thread>,
    /// ImageID / DbgID facts that arrived before their image, by (pid, base).
    pending_ids: FastMap<(u32, u64), (Option<String>, Option<PdbInfo>)>,
    stacks: StackMatcher,
    /// File names by file object (or file key), from the FileIo name, create and rundown
    /// events that were decoded.
    files: FastMap<u64, String>,
    /// The trace's disk I/O completions by IRP, read ahead for `io:::start`
    /// ([`SystemState::set_disk_completions`]); empty live.
    disk_completions: disk::DiskCompletions,
    /// The first record's raw timestamp and ns since the start: the session clock's rate.
    clock0: Option<(i64, u64)>,
    /// The stack records that belong to no event (`stacks::event_key` of the record itself),
    /// as a trace's stack pass found them.
    missed_stacks: crate::fasthash::FastSet<stacks::EventKey>,
    /// PDB identities looked up by image file name ([`SystemState::identify_images`]).
    identities: ImageIdentities,
    /// Whether [`SystemState::observe`] feeds the stack matcher ([`SystemState::with_stacks`]).
    keep_stacks: bool,
    /// Counts the changes to the process table ([`SystemState::processes_changed`]).
    process_changes: u64,
    /// Counts the changes to the image tables ([`SystemState::names_changed`]).
    image_changes: u64,
    /// The thread on each CPU and the system call of each thread ([`SystemState::cpus`]).
    cpus: CpuThreads,
    /// The address-space epochs of the pids whose images replaced one another
    /// ([`SystemState::stack_epoch`]).
    epochs: epochs::Epochs,
    /// The pids whose images (or processes) changed since [`SystemState::take_names_dirty`]
    /// last took them: what a resolver kept up to date builds again.
    names_dirty: crate::fasthash::FastSet<u32>,
}

/// What an identity lookup of [`SystemState::identify_images_of`] answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The file's identity, or that it has none (remembered either way).
    Known(Option<PdbInfo>),
    /// Not known yet (being read elsewhere): asked again by a later call.
    Pending,
}

/// The Idle process (pid 0) as a Windows 7 Process rundown record gives it (ImageFileName
/// `Idle`), for the traces that have no such record.
static IDLE: std::sync::LazyLock<Process> = std::sync::LazyLock::new(|| Process {
    pid: 0,
    name: "Idle".to_string(),
    ..Process::default()
});

/// The process id given to a thread no record of the trace names: never a real Windows pid
/// (those are multiples of 4), and `-1` as D's `pid_t`.
pub const UNKNOWN_PID: u32 = u32::MAX;

/// The `execname` of a thread that no record of the trace named (its pid is [`UNKNOWN_PID`]).
pub const UNKNOWN_EXECNAME: &[u8] = b"<unknown>";

impl SystemState {
    pub fn new() -> SystemState {
        SystemState::default()
    }

    /// A state whose [`SystemState::observe`] also matches stacks to events
    /// ([`SystemState::stacks`]). The engine's walks do not need it (they match a trace's stacks
    /// in a pass of their own, and only when a program records stacks), so [`SystemState::new`]
    /// leaves it off: it costs an allocation per stack record.
    pub fn with_stacks() -> SystemState {
        SystemState {
            keep_stacks: true,
            ..SystemState::default()
        }
    }

    /// Gives the state, before the first event, the threads and processes that a trace's records
    /// name later but that existed from its start ([`crate::sources::etl::TraceSource`]'s
    /// pass over its Process and Thread records): an event of such a thread is then attributed
    /// to its real process from the first record. What the records in time order say replaces
    /// these as they come.
    pub fn preload(&mut self, processes: Vec<Process>, threads: Vec<Thread>) {
        self.process_changes += 1;
        for p in processes {
            self.processes.entry(p.pid).or_insert(p);
        }
        for t in threads {
            self.threads.entry(t.tid).or_insert(t);
        }
    }

    /// The process of thread `tid`: thread 0 is an idle thread (of the Idle process, pid 0);
    /// a thread that no record named is [`UNKNOWN_PID`].
    pub fn pid_of_thread(&self, tid: u32) -> u32 {
        match self.threads.get(&tid) {
            Some(t) => t.pid,
            None if tid == 0 => 0,
            None => UNKNOWN_PID,
        }
    }

    /// The thread on each CPU (from the context switches so far) and the system call each
    /// thread is in: the context of the records that name no thread (interrupts, DPCs, system
    /// calls).
    pub fn cpus(&self) -> &CpuThreads {
        &self.cpus
    }

    /// Sets the stack records that belong to no event ([`StackMatcher::missed`]).
    pub fn set_missed_stacks(&mut self, missed: crate::fasthash::FastSet<stacks::EventKey>) {
        self.missed_stacks = missed;
    }

    /// Whether the stack record at this raw timestamp, holding thread `tid`'s stack, on this
    /// CPU belongs to no event of the trace.
    pub fn stack_missed(&self, raw_timestamp: i64, tid: u32, cpu: u16) -> bool {
        !self.missed_stacks.is_empty()
            && self
                .missed_stacks
                .contains(&stacks::event_key(raw_timestamp, tid, cpu))
    }

    /// Feeds one event (in timestamp order) with its decoded form.
    pub fn observe(&mut self, ev: &EventRecord<'_>, decoded: Option<&DecodedEvent<'_>>) {
        if self.keep_stacks {
            self.stacks.observe(ev, decoded);
        }
        if self.clock0.is_none() && ev.time_ns > 0 {
            self.clock0 = Some((ev.raw_timestamp, ev.time_ns));
        }
        self.cpus.observe(ev);
        let Some(d) = decoded else { return };
        match (d.provider, d.name) {
            ("Process", "Start" | "DCStart" | "DCEnd" | "End" | "Defunct") => {
                self.on_process(ev, d)
            }
            ("Thread", "Start" | "DCStart" | "DCEnd" | "End") => self.on_thread(ev, d),
            ("Thread", "SetName") => {
                if let (Some(tid), Some(name)) = (d.u64("TThreadId"), d.str("ThreadName")) {
                    let t = self.threads.entry(tid as u32).or_default();
                    t.tid = tid as u32;
                    if let Some(pid) = d.u64("ProcessId") {
                        t.pid = pid as u32;
                    }
                    t.name = Some(name.to_string());
                }
            }
            ("Image", "Load" | "DCStart" | "DCEnd") => self.on_image_load(d),
            ("FileIo", "Name" | "FileCreate" | "FileRundown" | "Create") => {
                let name = d.str("FileName").or_else(|| d.str("OpenPath"));
                if let (Some(obj), Some(name)) = (d.u64("FileObject"), name) {
                    if !name.is_empty() {
                        self.files.insert(obj, name.to_string());
                    }
                }
            }
            ("Image", "Unload") => {
                if let (Some(pid), Some(base)) = (d.u64("ProcessId"), d.u64("ImageBase")) {
                    self.unload_image(pid as u32, base);
                }
            }
            ("ImageID", "ImageId") => {
                if let (Some(pid), Some(base), Some(name)) = (
                    d.u64("ProcessId"),
                    d.u64("ImageBase"),
                    d.str("OriginalFileName"),
                ) {
                    let name = name.to_string();
                    match self.image_mut(pid as u32, base) {
                        Some(img) => img.original_name = Some(name),
                        None => {
                            self.pending_ids.entry((pid as u32, base)).or_default().0 = Some(name)
                        }
                    }
                }
            }
            ("ImageID", "DbgID_RSDS") => {
                let (Some(pid), Some(base)) = (d.u64("ProcessId"), d.u64("ImageBase")) else {
                    return;
                };
                let Some(crate::etw::decode::Value::Guid(guid)) = d.get("GuidSig") else {
                    return;
                };
                let pdb = PdbInfo {
                    guid,
                    age: d.u64("Age").unwrap_or(0) as u32,
                    file_name: d.str("PdbFileName").as_deref().unwrap_or("").to_string(),
                };
                match self.image_mut(pid as u32, base) {
                    Some(img) => {
                        img.pdb = Some(pdb);
                        self.image_changes += 1;
                    }
                    None => self.pending_ids.entry((pid as u32, base)).or_default().1 = Some(pdb),
                }
            }
            _ => {}
        }
    }

    /// A number that changes whenever a process is added, replaced or renamed: a consumer
    /// that keeps a process's name across records rebuilds it when this moved.
    pub fn processes_changed(&self) -> u64 {
        self.process_changes
    }

    /// A number that changes whenever what names stack frames changes: a process or an image
    /// came or went, or an image was given its PDB identity. A resolver built from the state
    /// is current while this has not moved.
    pub fn names_changed(&self) -> u64 {
        self.process_changes.wrapping_add(self.image_changes)
    }

    fn on_process(&mut self, ev: &EventRecord<'_>, d: &DecodedEvent<'_>) {
        self.process_changes += 1;
        let Some(info) = process_of(ev, d) else {
            return;
        };
        let pid = info.pid;
        let starting = matches!(d.name, "Start" | "DCStart");
        if d.name == "Start" {
            if let Some(old) = self.processes.remove(&pid) {
                self.exited.push(old);
                self.names_dirty.insert(pid);
            }
        }
        let p = self.processes.entry(pid).or_insert_with(|| info.clone());
        if p.name.is_empty() {
            p.name = info.name;
        }
        if p.command_line.is_empty() {
            p.command_line = info.command_line;
        }
        if p.unique_key == 0 {
            p.unique_key = info.unique_key;
        }
        if p.parent == 0 {
            p.parent = info.parent;
        }
        if !starting && d.name != "DCEnd" {
            p.end_ns = Some(ev.time_ns);
            p.exit_status = info.exit_status;
        }
    }

    fn on_thread(&mut self, ev: &EventRecord<'_>, d: &DecodedEvent<'_>) {
        let Some((tid, pid, name)) = thread_of(d) else {
            return;
        };
        let t = self.threads.entry(tid).or_default();
        if d.name == "Start" || t.pid != pid {
            *t = Thread {
                tid,
                pid,
                ..Thread::default()
            };
        }
        if d.name == "Start" {
            t.start_ns = Some(ev.time_ns);
        }
        if let Some(n) = name {
            t.name = Some(n);
        }
        if d.name == "End" {
            t.end_ns = Some(ev.time_ns);
        }
    }

    fn on_image_load(&mut self, d: &DecodedEvent<'_>) {
        let [pid, base, size, file_name, time_date_stamp, checksum] = d.pick([
            "ProcessId",
            "ImageBase",
            "ImageSize",
            "FileName",
            "TimeDateStamp",
            "ImageChecksum",
        ]);
        let num = |v: &Option<Value<'_>>| v.as_ref().and_then(Value::as_u64);
        let (Some(pid), Some(base)) = (num(&pid), num(&base)) else {
            return;
        };
        let pid = pid as u32;
        let mut img = Image {
            base,
            size: num(&size).unwrap_or(0),
            file_name: file_name
                .and_then(Value::into_text)
                .map(|t| t.into_owned())
                .unwrap_or_default(),
            time_date_stamp: num(&time_date_stamp).unwrap_or(0) as u32,
            checksum: num(&checksum).unwrap_or(0) as u32,
            original_name: None,
            pdb: None,
            held: epochs::Held::default(),
        };
        if let Some((name, pdb)) = self.pending_ids.remove(&(pid, base)) {
            img.original_name = name;
            img.pdb = pdb;
        }
        self.load_image(pid, img, d.name == "Load");
    }

    /// The image at `base` of process `pid` was unloaded (an Image Unload record).
    pub(crate) fn unload_image(&mut self, pid: u32, base: u64) {
        if let Some(p) = self.processes.get_mut(&pid) {
            p.unload_image(base);
            self.image_changes += 1;
            self.names_dirty.insert(pid);
        }
    }

    /// Image `img` of process `pid` was loaded (`load`: by a Load record; else a rundown
    /// record named it).
    pub(crate) fn load_image(&mut self, pid: u32, mut img: Image, load: bool) {
        let base = img.base;
        let changes = &mut self.process_changes;
        let p = self.processes.entry(pid).or_insert_with(|| {
            *changes += 1;
            Process::unrecorded(pid)
        });
        if load {
            p.image_loads = p.image_loads.saturating_add(1);
        }
        self.image_changes += 1;
        self.names_dirty.insert(pid);
        if name_from_main_image(p, &img) {
            *changes += 1;
        }
        match p.images.binary_search_by_key(&base, |i| i.base) {
            Ok(i) if epochs::same_image(&p.images[i], &img) => {
                // a rundown record of an image mapped already
                let old = std::mem::take(&mut p.images[i]);
                img.original_name = img.original_name.or(old.original_name);
                img.pdb = img.pdb.or(old.pdb);
                img.held = old.held;
                p.images[i] = img;
                return;
            }
            // another image at its base with no Unload record between: it was unloaded
            Ok(_) => p.unload_image(base),
            Err(_) => {}
        }
        let earlier = (p.images.iter_mut().chain(p.unloaded_images.iter_mut())).chain(
            (self.exited.of_pid_mut(pid))
                .flat_map(|x| x.images.iter_mut().chain(x.unloaded_images.iter_mut())),
        );
        self.epochs.enter(pid, &mut img, earlier);
        let i = p.images.partition_point(|i| i.base < base);
        p.images.insert(i, img);
    }

    /// The address-space epoch ([`epochs`]) that `frames` (innermost first; a zero ends them)
    /// of process `pid` (0: kernel frames) sampled now carry: what a recorded stack keeps so
    /// that names built later name its frames by the images that held them now. 0 for every
    /// stack of a pid whose images never took the place of others.
    #[inline]
    pub fn stack_epoch(&self, pid: u32, frames: &[u64]) -> u32 {
        self.epochs.stack_epoch(pid, frames)
    }

    /// The current address-space epoch of `pid` (0 while its images never took the place of
    /// others).
    pub fn epoch_now(&self, pid: u32) -> u32 {
        self.epochs.now(pid)
    }

    fn image_mut(&mut self, pid: u32, base: u64) -> Option<&mut Image> {
        let p = self.processes.get_mut(&pid)?;
        let i = p.images.binary_search_by_key(&base, |i| i.base).ok()?;
        p.images.get_mut(i)
    }

    /// The live (or last) process with this pid. Pid 0 without a Process record (traces
    /// without a process rundown) is the Idle process, named `Idle` as Windows' rundown
    /// records name it.
    pub fn process(&self, pid: u32) -> Option<&Process> {
        self.processes
            .get(&pid)
            .or_else(|| (pid == 0).then(|| &*IDLE))
    }

    /// Every process seen, including ones whose pid was reused: the live ones first, then
    /// the ones whose pid was reused, in the order they ended.
    pub fn processes(&self) -> impl Iterator<Item = &Process> {
        self.processes.values().chain(self.exited.iter())
    }

    /// The processes of one pid, newest first: the live one (if any), then those that ended,
    /// the last to end first.
    pub fn processes_of(&self, pid: u32) -> Vec<&Process> {
        let mut v: Vec<&Process> = self.processes.get(&pid).into_iter().collect();
        v.extend(self.exited.of_pid(pid).rev());
        v
    }

    /// The ended processes kept for the names of their frames, and how many were forgotten
    /// past the bound ([`exited::EXITED_MAX`]).
    pub fn exited_counts(&self) -> (usize, u64) {
        (self.exited.len(), self.exited.forgotten())
    }

    /// The pids whose processes or images changed since the last call (in no order): a
    /// resolver that builds names per pid brings those up to date
    /// (`TraceSymbols::update_pids`).
    pub fn take_names_dirty(&mut self) -> Vec<u32> {
        self.names_dirty.drain().collect()
    }

    pub fn thread(&self, tid: u32) -> Option<&Thread> {
        self.threads.get(&tid)
    }

    /// The name of thread `tid` as the records so far gave it (`lwpsinfo_t`'s `pr_tname`), ""
    /// when none did.
    pub fn thread_name(&self, tid: u32) -> &str {
        // a firing whose thread is unknown (or not looked up) asks for every record
        if tid == u32::MAX {
            return "";
        }
        self.thread(tid)
            .and_then(|t| t.name.as_deref())
            .unwrap_or("")
    }

    /// The image that contains `addr` in process `pid`, falling back to kernel images (pid 0).
    pub fn image_at(&self, pid: u32, addr: u64) -> Option<&Image> {
        let find = |pid: u32| -> Option<&Image> {
            let imgs = &self.processes.get(&pid)?.images;
            let i = imgs.partition_point(|im| im.base <= addr);
            imgs.get(i.checked_sub(1)?).filter(|im| im.contains(addr))
        };
        find(pid).or_else(|| find(0))
    }

    /// The name of a file object (or file key), when a FileIo name, create or rundown event
    /// gave it.
    pub fn file_name(&self, file_object: u64) -> Option<&str> {
        if file_object == 0 {
            return None;
        }
        self.files.get(&file_object).map(|s| s.as_str())
    }

    /// Records the name of a file object (the trace's pre-pass of rundown names).
    pub fn set_file_name(&mut self, file_object: u64, name: &str) {
        self.files
            .entry(file_object)
            .or_insert_with(|| name.to_string());
    }

    /// Gives the state a trace's disk I/O completions (its read-ahead pass).
    pub fn set_disk_completions(&mut self, completions: disk::DiskCompletions) {
        self.disk_completions = completions;
    }

    /// The completion of the disk I/O that IRP `irp` started at `time_ns`, when the trace was
    /// read ahead for it ([`disk::DiskCompletions::completion_of`]).
    pub fn disk_completion(&self, irp: u64, time_ns: u64) -> Option<&disk::DiskCompletion> {
        self.disk_completions.completion_of(irp, time_ns)
    }

    /// A duration in the session clock's ticks (`ev` is the current record), in ns.
    pub fn ticks_to_ns(&self, ev: &EventRecord<'_>, ticks: u64) -> u64 {
        match self.clock0 {
            Some((raw0, ns0)) if ev.raw_timestamp > raw0 && ev.time_ns > ns0 => {
                let per = (ev.time_ns - ns0) as f64 / (ev.raw_timestamp - raw0) as f64;
                (ticks as f64 * per) as u64
            }
            _ => 0,
        }
    }

    /// The stack matcher fed by `observe`.
    pub fn stacks(&self) -> &StackMatcher {
        &self.stacks
    }

    /// Gives a PDB identity to every image with none (of every process, the kernel's included),
    /// by `identify` of its file name and link time stamp (0 when its record has none): a
    /// live session, which no KernelTraceControl ImageID records reach, and a trace recorded
    /// without them read on the machine that recorded it, read it from the image file. Each
    /// distinct name and stamp is asked about once per state, misses included, so calling
    /// this again as more images load stays cheap. The number of images given an identity.
    pub fn identify_images(
        &mut self,
        identify: &mut dyn FnMut(&str, u32) -> Option<PdbInfo>,
    ) -> usize {
        let mut filled = 0;
        let identities = &mut self.identities;
        let dirty = &mut self.names_dirty;
        for p in self.processes.values_mut().chain(self.exited.iter_mut()) {
            for img in p.images.iter_mut().chain(p.unloaded_images.iter_mut()) {
                if img.pdb.is_some() || img.file_name.is_empty() {
                    continue;
                }
                if let Some(pdb) =
                    identities.identity(&img.file_name, img.time_date_stamp, identify)
                {
                    img.pdb = Some(pdb);
                    filled += 1;
                    dirty.insert(p.pid);
                }
            }
        }
        self.image_changes += filled as u64;
        filled
    }

    /// Remembers the PDB identity read for an image file (its name and link time stamp), for
    /// [`SystemState::identify_images_of`] to give its images.
    pub fn remember_identity(&mut self, file_name: &str, stamp: u32, found: Option<PdbInfo>) {
        self.identities.remember(file_name, stamp, found);
    }

    /// [`SystemState::identify_images`] for the processes of `pids` only (live and ended),
    /// where `identify(pid, file, stamp)` may answer [`Lookup::Pending`] (the file is being
    /// read elsewhere: not remembered, asked again by a later call). What a live session
    /// does as images load: the work follows the images that came, not every image seen.
    pub fn identify_images_of(
        &mut self,
        pids: &[u32],
        identify: &mut dyn FnMut(u32, &str, u32) -> Lookup,
    ) -> usize {
        let mut filled = 0;
        for &pid in pids {
            let identities = &mut self.identities;
            let live = self.processes.get_mut(&pid).into_iter();
            for p in live.chain(self.exited.of_pid_mut(pid)) {
                for img in p.images.iter_mut().chain(p.unloaded_images.iter_mut()) {
                    if img.pdb.is_some() || img.file_name.is_empty() {
                        continue;
                    }
                    let (name, stamp) = (img.file_name.as_str(), img.time_date_stamp);
                    let found = match identities.known(name, stamp) {
                        Some(k) => k,
                        None => match identify(pid, name, stamp) {
                            Lookup::Known(k) => {
                                identities.remember(name, stamp, k.clone());
                                k
                            }
                            Lookup::Pending => None,
                        },
                    };
                    if let Some(pdb) = found {
                        img.pdb = Some(pdb);
                        filled += 1;
                        self.names_dirty.insert(pid);
                    }
                }
            }
        }
        self.image_changes += filled as u64;
        filled
    }
}

/// A Process record's process (Start, DCStart, DCEnd, End, Defunct), as the record says it;
/// `None` without a process id.
pub fn process_of(ev: &EventRecord<'_>, d: &DecodedEvent<'_>) -> Option<Process> {
    // one pass over the payload for all the fields
    let [pid, parent, session, name, command_line, unique_key, exit_status] = d.pick([
        "ProcessId",
        "ParentId",
        "SessionId",
        "ImageFileName",
        "CommandLine",
        "UniqueProcessKey",
        "ExitStatus",
    ]);
    let num = |v: &Option<Value<'_>>| v.as_ref().and_then(Value::as_u64);
    let text = |v: Option<Value<'_>>| {
        v.and_then(Value::into_text)
            .map(|t| t.into_owned())
            .unwrap_or_default()
    };
    let pid = num(&pid)? as u32;
    Some(Process {
        pid,
        parent: num(&parent).unwrap_or(0) as u32,
        session: num(&session).unwrap_or(0) as u32,
        name: text(name),
        command_line: text(command_line),
        unique_key: num(&unique_key).unwrap_or(0),
        start_ns: (d.name == "Start").then_some(ev.time_ns),
        end_ns: None,
        exit_status: matches!(d.name, "End" | "Defunct")
            .then(|| num(&exit_status).map(|v| v as i32 as i64))
            .flatten(),
        images: Vec::new(),
        unloaded_images: Vec::new(),
        image_loads: 0,
    })
}

impl Process {
    /// An Image Unload record of the image at `base`: it moves to
    /// [`Process::unloaded_images`]. The same image unloaded again (a DLL loaded and freed in
    /// a loop) replaces its earlier entry, so the list grows with the distinct images only,
    /// also in a live session of days; an entry that a later image replaced is kept for the
    /// samples of its epochs (their number is bounded by [`epochs::MAX_EPOCHS`]).
    fn unload_image(&mut self, base: u64) {
        if let Ok(i) = self.images.binary_search_by_key(&base, |i| i.base) {
            let gone = self.images.remove(i);
            // one that a later image replaced since stays: it names the samples of its epochs
            // (one replaced past the bound of epochs, which named nothing, goes)
            self.unloaded_images.retain(|u| match u.held.until {
                Some(until) => until != u.held.since,
                None => (u.base, u.size, &u.file_name) != (gone.base, gone.size, &gone.file_name),
            });
            self.unloaded_images.push(gone);
        }
    }

    /// A process that a record names before any Process record describes it (an Image
    /// record of a trace without a process rundown): pid 0 is the Idle process as a rundown
    /// record gives it ([`IDLE`], which [`SystemState::process`] also answers for a pid 0
    /// that no record named), any other pid starts unnamed.
    fn unrecorded(pid: u32) -> Process {
        if pid == 0 {
            IDLE.clone()
        } else {
            Process {
                pid,
                ..Process::default()
            }
        }
    }
}

/// Names a process that no Process record named after its first user-mode `.exe` image, as
/// WPA and PerfView do for traces without a process rundown (the Windows 11 traces here have
/// none). The Idle and System processes (0 and 4) load only kernel images and stay as the
/// records leave them (the Idle process is named when its entry is made,
/// [`Process::unrecorded`]). Returns whether the name changed.
fn name_from_main_image(p: &mut Process, img: &Image) -> bool {
    let user = img.base < 0x8000_0000 || (img.base >> 32 != 0 && img.base < 0xffff_8000_0000_0000);
    if !p.name.is_empty() || p.pid == 0 || p.pid == 4 || !user {
        return false;
    }
    let base_name = img.file_name.rsplit(['\\', '/']).next().unwrap_or("");
    let is_exe = base_name.len() > 4
        && base_name.is_char_boundary(base_name.len() - 4)
        && base_name[base_name.len() - 4..].eq_ignore_ascii_case(".exe");
    if !is_exe {
        return false;
    }
    p.name = base_name.to_string();
    true
}

/// A Thread record's thread id, process id and name (when it has a non-empty one).
pub fn thread_of(d: &DecodedEvent<'_>) -> Option<(u32, u32, Option<String>)> {
    let [tid, pid, name] = d.pick(["TThreadId", "ProcessId", "ThreadName"]);
    let tid = tid.as_ref().and_then(Value::as_u64)? as u32;
    let pid = pid.as_ref().and_then(Value::as_u64)? as u32;
    let name = name
        .and_then(Value::into_text)
        .filter(|n| !n.is_empty())
        .map(|n| n.into_owned());
    Some((tid, pid, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(base: u64, file_name: &str, pdb: Option<PdbInfo>) -> Image {
        Image {
            base,
            size: 0x1000,
            file_name: file_name.into(),
            pdb,
            ..Image::default()
        }
    }

    fn info(age: u32, file_name: &str) -> PdbInfo {
        PdbInfo {
            guid: Guid {
                data1: 0x1234_5678,
                ..Guid::default()
            },
            age,
            file_name: file_name.into(),
        }
    }

    #[test]
    fn an_image_loaded_and_freed_in_a_loop_is_kept_once() {
        let mut p = Process::unrecorded(8);
        for round in 0..1000 {
            p.images = vec![
                image(0x1000_0000, r"C:\x\a.dll", None),
                image(0x2000_0000, r"C:\x\b.dll", None),
            ];
            p.unload_image(0x1000_0000);
            if round % 2 == 0 {
                p.unload_image(0x2000_0000);
            }
            p.unload_image(0x3000_0000); // nothing there
        }
        let names: Vec<&str> = p.unloaded_images.iter().map(|i| &*i.file_name).collect();
        // the last round unloaded only a.dll: it is the newest
        assert_eq!(names, [r"C:\x\b.dll", r"C:\x\a.dll"]);
        assert_eq!(p.images.len(), 1);
    }

    #[test]
    fn symbol_time_epochs_move_only_when_an_image_takes_anothers_place() {
        let mut state = SystemState::new();
        let load = |state: &mut SystemState, pid: u32, base: u64, name: &str| {
            state.load_image(pid, image(base, name, None), true)
        };
        let (a, b, ntdll) = (0x1000_0000, 0x1000_0000, 0x7000_0000);
        load(&mut state, 7, a, r"C:\x\a.dll");
        load(&mut state, 7, ntdll, r"C:\w\ntdll.dll");
        // no image replaced another: every stack carries epoch 0, nothing is kept
        assert_eq!(state.stack_epoch(7, &[a + 0x10, ntdll + 0x20]), 0);
        assert_eq!(state.epoch_now(7), 0);
        // the same image unloaded and loaded again (and a rundown record of it) moves nothing
        state.unload_image(7, a);
        load(&mut state, 7, a, r"C:\x\a.dll");
        state.load_image(7, image(a, r"C:\x\a.dll", None), false);
        assert_eq!(state.epoch_now(7), 0);
        state.unload_image(7, a);
        // b.dll at a.dll's base: epoch 1, for its frames only
        load(&mut state, 7, b, r"C:\x\b.dll");
        assert_eq!(state.epoch_now(7), 1);
        assert_eq!(state.stack_epoch(7, &[b + 0x10, ntdll + 0x20]), 1);
        assert_eq!(state.stack_epoch(7, &[ntdll + 0x20, 0, b + 0x10]), 0);
        assert_eq!(state.stack_epoch(8, &[b + 0x10]), 0, "another pid");
        let p = state.process(7).unwrap();
        assert_eq!(p.unloaded_images.len(), 1);
        assert_eq!(p.unloaded_images[0].held.until, Some(1));
        // another image at b.dll's base without an Unload record between: b.dll was unloaded
        load(&mut state, 7, b, r"C:\x\c.dll");
        assert_eq!(state.stack_epoch(7, &[b + 0x10]), 2);
        let p = state.process(7).unwrap();
        let held: Vec<_> = (p.unloaded_images.iter())
            .map(|i| (&*i.file_name, i.held.since, i.held.until))
            .collect();
        assert_eq!(
            held,
            [(r"C:\x\a.dll", 0, Some(1)), (r"C:\x\b.dll", 1, Some(2))]
        );
        // kernel drivers (pid 0) count their own epochs
        load(&mut state, 0, 0xffff_f800_0000_0000, "drv1.sys");
        state.unload_image(0, 0xffff_f800_0000_0000);
        load(&mut state, 0, 0xffff_f800_0000_0000, "drv2.sys");
        assert_eq!(state.stack_epoch(0, &[0xffff_f800_0000_0010]), 1);
        assert_eq!(state.epoch_now(7), 2);
    }

    #[test]
    fn symbol_time_replacements_stop_counting_at_the_bound() {
        let mut state = SystemState::new();
        for round in 0..(epochs::MAX_EPOCHS + 50) {
            let name = if round % 2 == 0 { "a.dll" } else { "b.dll" };
            state.load_image(9, image(0x1000_0000, name, None), true);
            state.unload_image(9, 0x1000_0000);
        }
        assert_eq!(state.epoch_now(9), epochs::MAX_EPOCHS);
        // the images replaced past the bound named nothing and are not kept
        let kept = state.process(9).unwrap().unloaded_images.len() as u32;
        assert!(kept <= epochs::MAX_EPOCHS + 1, "{kept}");
    }

    #[test]
    fn a_thread_is_known_from_the_preload_until_its_records_say_otherwise() {
        let mut state = SystemState::new();
        assert_eq!(state.pid_of_thread(0), 0, "thread 0 is idle");
        assert_eq!(state.pid_of_thread(7092), UNKNOWN_PID);
        let thread = |tid, pid| Thread {
            tid,
            pid,
            ..Thread::default()
        };
        let process = Process {
            pid: 2452,
            name: "xperf.exe".into(),
            ..Process::default()
        };
        state.preload(vec![process], vec![thread(7092, 2452), thread(0, 0)]);
        assert_eq!(state.pid_of_thread(7092), 2452);
        assert_eq!(state.process(2452).unwrap().name, "xperf.exe");
        // a preload never replaces what the state already knows
        state.preload(Vec::new(), vec![thread(7092, 8)]);
        assert_eq!(state.pid_of_thread(7092), 2452);
        assert_eq!(state.pid_of_thread(7096), UNKNOWN_PID);
    }

    #[test]
    fn an_unnamed_process_takes_the_name_of_its_exe_image() {
        let unnamed = |pid| Process {
            pid,
            ..Process::default()
        };
        // pid 0 without a Process record is Idle, as rundown records name it
        assert_eq!(
            SystemState::new().process(0).map(|p| p.name.as_str()),
            Some("Idle")
        );
        assert!(SystemState::new().process(8).is_none());
        let mut p = unnamed(9144);
        assert!(!name_from_main_image(
            &mut p,
            &image(
                0x7ffd_0000_0000,
                r"\Device\HarddiskVolume3\Windows\System32\ntdll.dll",
                None
            )
        ));
        assert!(p.name.is_empty());
        assert!(name_from_main_image(
            &mut p,
            &image(
                0x1_4000_0000,
                r"\Device\HarddiskVolume3\bench\HotLoop.EXE",
                None
            )
        ));
        assert_eq!(p.name, "HotLoop.EXE");
        // the first .exe wins; a record's name is never replaced
        assert!(!name_from_main_image(
            &mut p,
            &image(0x40_0000, r"C:\x\other.exe", None)
        ));
        assert_eq!(p.name, "HotLoop.EXE");
        // kernel images (the Idle and System processes' drivers, ntoskrnl.exe) name nothing;
        // the Idle process is named when a record first makes its entry
        let mut idle = Process::unrecorded(0);
        assert_eq!((idle.pid, idle.name.as_str()), (0, "Idle"));
        assert_eq!(Process::unrecorded(8), unnamed(8));
        let ntos = image(
            0xffff_f800_0000_0000,
            r"\SystemRoot\system32\ntoskrnl.exe",
            None,
        );
        assert!(!name_from_main_image(&mut idle, &ntos));
        assert_eq!(idle.name, "Idle");
        let mut other = unnamed(77);
        assert!(!name_from_main_image(
            &mut other,
            &image(
                0xffff_f800_0000_0000,
                r"\SystemRoot\system32\ntoskrnl.exe",
                None
            )
        ));
        assert!(other.name.is_empty());
        // a 32-bit process's image below 2 GB
        assert!(name_from_main_image(
            &mut other,
            &image(0x0040_0000, r"C:\app\a.exe", None)
        ));
        assert_eq!(other.name, "a.exe");
    }

    #[test]
    fn identify_images_fills_the_images_without_an_identity() {
        let ntdll = r"\Device\HarddiskVolume3\Windows\System32\ntdll.dll";
        let kernel = r"\SystemRoot\system32\ntoskrnl.exe";
        let mut state = SystemState::new();
        let process = |pid: u32, images: Vec<Image>| Process {
            pid,
            images,
            ..Process::default()
        };
        state.processes.insert(
            0,
            process(0, vec![image(0xffff_f800_0000_0000, kernel, None)]),
        );
        state.processes.insert(
            7,
            process(
                7,
                vec![
                    image(0x10000, r"\Device\HarddiskVolume3\app.exe", None),
                    image(0x7ff0_0000, ntdll, None),
                    // the trace's identity stays
                    image(0x7ff1_0000, r"\x\traced.dll", Some(info(9, "traced.pdb"))),
                    image(0x7ff2_0000, "", None),
                ],
            ),
        );
        state
            .exited
            .push(process(8, vec![image(0x7ff0_0000, ntdll, None)]));
        assert_eq!(state.exited_counts(), (1, 0));
        let mut asked = Vec::new();
        let mut identify = |name: &str, _stamp: u32| {
            asked.push(name.to_string());
            match name {
                n if n == ntdll => Some(info(1, "ntdll.pdb")),
                n if n == kernel => Some(info(2, "ntkrnlmp.pdb")),
                _ => None,
            }
        };
        assert_eq!(state.identify_images(&mut identify), 3);
        // again: nothing new to fill, nothing asked twice
        assert_eq!(state.identify_images(&mut identify), 0);
        asked.sort();
        assert_eq!(asked.len(), 3, "{asked:?}");
        let pdb_at = |pid: u32, addr: u64| state.image_at(pid, addr).and_then(|i| i.pdb.clone());
        assert_eq!(pdb_at(7, 0x7ff0_0010), Some(info(1, "ntdll.pdb")));
        assert_eq!(
            pdb_at(7, 0xffff_f800_0000_0010),
            Some(info(2, "ntkrnlmp.pdb"))
        );
        assert_eq!(pdb_at(7, 0x7ff1_0010), Some(info(9, "traced.pdb")));
        assert_eq!(pdb_at(7, 0x10010), None);
        assert_eq!(
            state.exited.of_pid(8).next().unwrap().images[0].pdb,
            Some(info(1, "ntdll.pdb"))
        );
        // an image loaded later is filled by the next call, its name's answer remembered
        state
            .processes
            .insert(9, process(9, vec![image(0x7ff0_0000, ntdll, None)]));
        let mut never = |_: &str, _: u32| -> Option<PdbInfo> { panic!("asked again") };
        assert_eq!(state.identify_images(&mut never), 1);
        assert_eq!(
            state.image_at(9, 0x7ff0_0010).and_then(|i| i.pdb.clone()),
            Some(info(1, "ntdll.pdb"))
        );
    }
}
