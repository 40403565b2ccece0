//! Names for the addresses of a recorded trace: the images its processes had loaded (from the
//! Image rundown and load events). A frame prints as `module`function+0xoffset` when the
//! image's PDB (identified by the trace's KernelTraceControl DbgID_RSDS event, or in a live
//! session by the image file's own RSDS record, see `SystemState::identify_images`: GUID, age,
//! name) is found on the symbol path (`_NT_SYMBOL_PATH`, see [`super::pdb`]), else as
//! `module+0xoffset`. Kernel modules are the images of process 0.
//!
//! A frame of a recorded stack is named by the image that held its address when the stack was
//! sampled: the stack keeps the address-space epoch of its frames
//! ([`crate::etw::state::epochs`]), and where images of one pid replaced one another, the
//! replaced ones are kept here with the epochs they held their addresses in.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use super::pdb::{PdbId, PdbSymbols, SymbolPath};

use crate::agg::SymbolResolver;
use crate::etw::state::epochs::{holder_at, Held};
use crate::etw::state::{Image, Process, SystemState};

#[derive(Clone, Debug)]
struct Module {
    base: u64,
    end: u64,
    name: String,
    /// The image's PDB, when the trace identifies it.
    pdb: Option<LazyPdb>,
    /// The epochs in which it named its addresses.
    held: Held,
}

/// An image's PDB, looked for on the symbol path the first time a frame of the image is named
/// (a trace loads hundreds of images; most runs name the frames of few or none): on this
/// machine first, then on the path's symbol servers.
#[derive(Clone)]
struct LazyPdb {
    id: PdbId,
    image_path: String,
    cache: Arc<Mutex<PdbCache>>,
    found: OnceLock<Found>,
}

/// Where an image's PDB came from, for the symbols report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PdbOrigin {
    /// A plain folder, the path the image records, beside the image.
    Local(PathBuf),
    /// A symbol store or cache of the symbol path.
    Cache(PathBuf),
    /// Downloaded from a symbol server this run (the URL), into the path.
    Downloaded(String, PathBuf),
    /// Not found: why.
    Missing(String),
}

/// A PDB looked for: its functions when found and read, and where it came from.
#[derive(Clone, Debug)]
struct Found {
    symbols: Option<Arc<PdbSymbols>>,
    origin: PdbOrigin,
}

impl LazyPdb {
    fn found(&self) -> &Found {
        self.found.get_or_init(|| {
            // the store's lock is held only to find the identity's slot: looking (a
            // download) runs unlocked, so that images are fetched in parallel
            let slot = match self.cache.lock() {
                Ok(mut c) => {
                    let path = c.path.clone();
                    let cell = c
                        .read
                        .entry((self.id.guid, self.id.age))
                        .or_default()
                        .clone();
                    Some((path, cell))
                }
                Err(_) => None,
            };
            match slot {
                Some((path, cell)) => cell
                    .get_or_init(|| look(&path, &self.id, &self.image_path))
                    .clone(),
                None => Found {
                    symbols: None,
                    origin: PdbOrigin::Missing("the PDB store failed".into()),
                },
            }
        })
    }

    fn get(&self) -> Option<&PdbSymbols> {
        if let Some(f) = self.found.get() {
            return f.symbols.as_deref();
        }
        let background = self.cache.lock().ok().and_then(|c| {
            c.background.then(|| {
                let cell = c.read.get(&(self.id.guid, self.id.age)).cloned();
                (c.path.clone(), cell)
            })
        });
        let Some((path, cell)) = background else {
            return self.found().symbols.as_deref();
        };
        if let Some(f) = cell.as_ref().and_then(|c| c.get()) {
            return self.found.get_or_init(|| f.clone()).symbols.as_deref();
        }
        // a live run: what this machine has is read here (quick); a download goes to a worker,
        // and the frame prints as module+offset until its PDB has arrived (issue 42, 12)
        let local = super::pdb::find_pdb(
            &self.id,
            Some(std::path::Path::new(&self.image_path)),
            &path,
        );
        if local.is_some() || path.servers.is_empty() || super::symsrv::guard::cancelled() {
            return self.found().symbols.as_deref();
        }
        self.fetch_in_background();
        None
    }

    /// Starts the worker that fills this identity's slot (once per identity).
    fn fetch_in_background(&self) {
        let Ok(mut c) = self.cache.lock() else { return };
        let key = (self.id.guid, self.id.age);
        if !c.started.insert(key) {
            return;
        }
        let cell = c.read.entry(key).or_default().clone();
        let path = c.path.clone();
        drop(c);
        let (id, image) = (self.id.clone(), self.image_path.clone());
        let _ = std::thread::Builder::new()
            .name("dtx-pdb-fetch".into())
            .spawn(move || {
                cell.get_or_init(|| look(&path, &id, &image));
            });
    }
}

/// Looks for `id`'s PDB: on this machine ([`super::pdb::find_pdb`]), then on the symbol
/// path's servers. Says once per run how to name a server when a PDB is missing and the path
/// names none.
fn look(path: &SymbolPath, id: &PdbId, image_path: &str) -> Found {
    let read = |at: &std::path::Path| super::pdb::read(at, Some(id)).map(Arc::new);
    if let Some(at) = super::pdb::find_pdb(id, Some(std::path::Path::new(image_path)), path) {
        let origin = if path.in_store(&at) {
            PdbOrigin::Cache(at.clone())
        } else {
            PdbOrigin::Local(at.clone())
        };
        return match read(&at) {
            Ok(s) => Found {
                symbols: Some(s),
                origin,
            },
            Err(e) => Found {
                symbols: None,
                origin: PdbOrigin::Missing(e),
            },
        };
    }
    if path.servers.is_empty() {
        hint_no_server(id);
        return Found {
            symbols: None,
            origin: PdbOrigin::Missing(
                "not on this machine, and the symbol path names no symbol server".into(),
            ),
        };
    }
    match super::symsrv::fetch(id, &path.servers) {
        Ok(d) => match read(&d.path) {
            Ok(s) => Found {
                symbols: Some(s),
                origin: PdbOrigin::Downloaded(d.url, d.path),
            },
            Err(e) => Found {
                symbols: None,
                origin: PdbOrigin::Missing(e),
            },
        },
        Err(why) => Found {
            symbols: None,
            origin: PdbOrigin::Missing(why),
        },
    }
}

/// Says once per run that frames go unnamed for want of a PDB, and how to name a server.
fn hint_no_server(id: &PdbId) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let ms = super::symsrv::MICROSOFT;
    crate::output::stderr::say(
        "dtx",
        format!(
            "no PDB for {} here, and the symbol path names no symbol server: its frames print as module+offset. To download PDBs, set _NT_SYMBOL_PATH=srv*<cache folder>*{ms} (Microsoft's public server), or for one run: -x sympath=srv*{ms}",
            id.file_name()
        ),
    );
}

impl std::fmt::Debug for LazyPdb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyPdb")
            .field("id", &self.id)
            .field("found", &self.found.get().map(|f| f.symbols.is_some()))
            .finish()
    }
}

/// The PDBs read for one trace or live session, by identity (an image loaded in many processes
/// is read once, and so is one named again by a resolver built later from the grown state).
#[derive(Clone)]
pub struct PdbStore(Arc<Mutex<PdbCache>>);

impl PdbStore {
    /// A store that looks for PDBs on `path` (or at the path the trace records for each).
    pub fn new(path: SymbolPath) -> PdbStore {
        PdbStore(Arc::new(Mutex::new(PdbCache {
            path: Arc::new(path),
            read: HashMap::new(),
            background: false,
            started: Default::default(),
        })))
    }

    /// This store, its downloads made on worker threads: a name asked for before its PDB has
    /// arrived is `module+offset` (a live run, whose engine thread must not wait on a server).
    pub fn fetching_in_background(self) -> PdbStore {
        if let Ok(mut c) = self.0.lock() {
            c.background = true;
        }
        self
    }

    /// Where `id`'s PDB comes from (looking for it now if this store has not yet: on this
    /// machine, then on the path's servers); `image_path`: the image's file.
    pub fn origin(&self, id: &PdbId, image_path: &str) -> PdbOrigin {
        LazyPdb {
            id: id.clone(),
            image_path: image_path.to_string(),
            cache: self.0.clone(),
            found: OnceLock::new(),
        }
        .found()
        .origin
        .clone()
    }

    /// A store over the run's symbol path (`-x sympath`, else `_NT_ALT_SYMBOL_PATH` /
    /// `_NT_SYMBOL_PATH`).
    pub fn from_env() -> PdbStore {
        PdbStore::new(SymbolPath::from_env())
    }
}

/// What a store has looked for, by (GUID, age): each slot is filled once, by the first
/// resolver that needs it (a miss is remembered for the run as well as a find).
struct PdbCache {
    path: Arc<SymbolPath>,
    read: HashMap<(crate::etw::record::Guid, u32), Arc<OnceLock<Found>>>,
    /// Downloads on workers ([`PdbStore::fetching_in_background`]), and those started.
    background: bool,
    started: std::collections::HashSet<(crate::etw::record::Guid, u32)>,
}

/// The modules of a trace's processes, as the trace knew them when this was taken.
#[derive(Clone, Debug, Default)]
pub struct TraceSymbols {
    kernel: Vec<Module>,
    user: HashMap<u32, Vec<Module>>,
    /// Code ranges of managed (JIT-compiled or precompiled .NET) methods by process, looked up
    /// before the images: a precompiled method lies inside its image.
    methods: HashMap<u32, Vec<Module>>,
    /// The images that later images at the same addresses replaced, by pid (0: the kernel's),
    /// for the pids that had such: they name the frames of stacks recorded in their epochs.
    replaced: HashMap<u32, Vec<Module>>,
}

fn modules<'a>(
    images: impl Iterator<Item = &'a Image>,
    pdbs: &Arc<Mutex<PdbCache>>,
) -> Vec<Module> {
    let mut v: Vec<Module> = images
        .filter(|i| i.size > 0)
        .map(|i| Module {
            base: i.base,
            end: i.base.saturating_add(i.size),
            name: crate::output::stack::basename(&i.file_name).to_string(),
            pdb: i.pdb.as_ref().map(|info| LazyPdb {
                id: PdbId {
                    guid: info.guid,
                    age: info.age,
                    path: info.file_name.clone(),
                },
                image_path: i.file_name.clone(),
                cache: pdbs.clone(),
                found: OnceLock::new(),
            }),
            held: i.held,
        })
        .collect();
    v.sort_by_key(|m| m.base);
    v
}

/// The images of `procs` (one pid's processes) that a later image replaced and that named
/// their addresses in some epoch.
fn replaced<'a, 'p>(procs: &'p [&'a Process]) -> impl Iterator<Item = &'a Image> + 'p
where
    'a: 'p,
{
    (procs.iter())
        .flat_map(|p| p.images.iter().chain(p.unloaded_images.iter()))
        .filter(|i| i.held.until.is_some_and(|u| u != i.held.since))
}

/// The images that name the addresses of one pid, from its processes newest first: each
/// process's images still mapped when the trace ended (or when it exited), then the ones it
/// unloaded, last unloaded first. An image is kept where no newer one overlaps it, so a frame
/// of an image unloaded before the end (every image of a process that exited) is still named,
/// and where two images held the same addresses at different times the newer one names them,
/// unless the frame's stack was recorded in an epoch the older one held them in
/// ([`TraceSymbols::module`]).
fn newest_first<'a>(procs: &[&'a Process]) -> impl Iterator<Item = &'a Image> {
    // the kept images by base: their ranges do not overlap, so a new range [base, end)
    // overlaps one of them exactly when the last one starting before `end` ends after `base`
    let mut kept: std::collections::BTreeMap<u64, &Image> = std::collections::BTreeMap::new();
    for p in procs {
        for i in p.images.iter().chain(p.unloaded_images.iter().rev()) {
            let end = i.base.saturating_add(i.size);
            let overlaps = kept
                .range(..end)
                .next_back()
                .is_some_and(|(_, k)| k.base.saturating_add(k.size) > i.base);
            if i.size > 0 && !overlaps {
                kept.insert(i.base, i);
            }
        }
    }
    kept.into_values()
}

/// Gives the images of `state` that have no PDB identity the identity their files on this
/// machine have, where a file's link time stamp is the one its Image record gives (a file
/// updated since is not believed): the identities of a live session (which no ImageID records
/// reach), and of a trace recorded without them (one a plain `xperf -start` or dtx's own `-E`
/// log wrote, not merged) read on the machine that recorded it. The kernel's NT paths become
/// DOS paths through this machine's drive devices. With `recorded` (a trace: its files may be
/// from another machine or another build), an image whose record gives no time stamp is left
/// alone; live, the file is the one running. Returns how many images were identified.
#[cfg(windows)]
pub fn identify_from_this_machine(state: &mut SystemState, recorded: bool) -> usize {
    let Some(devices) = crate::etw::state::DevicePaths::this_machine() else {
        return 0;
    };
    state.identify_images(&mut |nt, stamp| {
        if recorded && stamp == 0 {
            return None;
        }
        let path = devices.to_dos(nt)?;
        super::pdb::pdb_info_of_image(std::path::Path::new(&path), stamp)
    })
}

/// Reads the PDB identity of an image file, by its name as a session gives it (an NT path) and
/// its link time stamp.
pub type ImageIdentifier = Box<dyn FnMut(&str, u32) -> Option<crate::etw::state::PdbInfo> + Send>;

/// Reads the PDB identity of a live image's file on this machine (its NT path made a DOS
/// path through this machine's drive devices): what a live session's worker thread asks
/// (`sources::etw_live::names`). `None` when the drive devices cannot be read.
#[cfg(windows)]
pub fn image_identifier() -> Option<ImageIdentifier> {
    let devices = crate::etw::state::DevicePaths::this_machine()?;
    Some(Box::new(move |nt: &str, stamp: u32| {
        let path = devices.to_dos(nt)?;
        super::pdb::pdb_info_of_image(std::path::Path::new(&path), stamp)
    }))
}

fn find(mods: &[Module], addr: u64) -> Option<&Module> {
    let i = mods.partition_point(|m| m.base <= addr).checked_sub(1)?;
    let m = &mods[i];
    (addr < m.end).then_some(m)
}

impl TraceSymbols {
    /// The modules of the trace's processes, with the PDBs found on `_NT_ALT_SYMBOL_PATH` /
    /// `_NT_SYMBOL_PATH`.
    pub fn from_state(state: &SystemState) -> TraceSymbols {
        Self::with_store(state, &PdbStore::from_env())
    }

    /// The modules of the trace's processes, with the PDBs found on `path` (or at the path
    /// the trace records for each).
    pub fn with_symbol_path(state: &SystemState, path: SymbolPath) -> TraceSymbols {
        Self::with_store(state, &PdbStore::new(path))
    }

    /// The modules of the trace's processes, with their PDBs from `store`, which keeps what it
    /// reads for the next resolver built from the same trace.
    pub fn with_store(state: &SystemState, store: &PdbStore) -> TraceSymbols {
        let mut pids: Vec<u32> = state.processes().map(|p| p.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        let mut t = TraceSymbols::default();
        for pid in pids {
            t.build_pid(state, pid, &store.0);
        }
        t
    }

    /// Builds again the names of the processes of `pids` (the state's
    /// [`SystemState::take_names_dirty`]): a resolver kept up to date as a live session goes
    /// on costs what changed, not every process seen. The result is the one
    /// [`TraceSymbols::with_store`] builds from the same state.
    pub fn update_pids(&mut self, state: &SystemState, pids: &[u32], store: &PdbStore) {
        for &pid in pids {
            self.build_pid(state, pid, &store.0);
        }
    }

    /// The names of one pid's addresses from its processes (the live one, then those that
    /// ended, the last to end first).
    fn build_pid(&mut self, state: &SystemState, pid: u32, pdbs: &Arc<Mutex<PdbCache>>) {
        let procs = state.processes_of(pid);
        self.replaced.remove(&pid);
        if state.epoch_now(pid) > 0 {
            let r = modules(replaced(&procs), pdbs);
            if !r.is_empty() {
                self.replaced.insert(pid, r);
            }
        }
        let m = modules(newest_first(&procs), pdbs);
        if pid == 0 {
            self.kernel = m;
        } else if m.is_empty() {
            self.user.remove(&pid);
        } else {
            self.user.insert(pid, m);
        }
    }

    /// Adds the code ranges of .NET methods: (pid, start, size, name).
    pub fn add_methods<'a>(&mut self, methods: impl Iterator<Item = (u32, u64, u64, &'a str)>) {
        let mut touched: Vec<u32> = Vec::new();
        for (pid, start, size, name) in methods {
            self.methods.entry(pid).or_default().push(Module {
                base: start,
                end: start.saturating_add(size),
                name: name.to_string(),
                pdb: None,
                held: Held::default(),
            });
            if !touched.contains(&pid) {
                touched.push(pid);
            }
        }
        // only the pids that got methods: adding a few later costs what they touch
        for pid in touched {
            if let Some(v) = self.methods.get_mut(&pid) {
                v.sort_by_key(|m| m.base);
                v.dedup_by_key(|m| m.base);
            }
        }
    }

    /// The module that names `addr` of `pid` (kernel: `None`) in a stack recorded at `epoch`
    /// (`NOW`: as the images are at the end).
    fn module(&self, pid: Option<u32>, epoch: u32, addr: u64) -> Option<&Module> {
        let user = |p: u32| {
            let current = self.user.get(&p).map_or(&[][..], Vec::as_slice);
            self.held_at(p, current, epoch, addr)
        };
        pid.and_then(|p| self.methods.get(&p))
            .and_then(|m| find(m, addr))
            .or_else(|| pid.and_then(user))
            // a user stack holds no kernel frames: the kernel's images as they are now
            .or_else(|| self.held_at(0, &self.kernel, pid.map_or(epoch, |_| NOW), addr))
    }

    /// Of the images of `pid` (`current`, and the ones replaced), the one that held `addr` at
    /// `epoch`.
    fn held_at<'a>(
        &'a self,
        pid: u32,
        current: &'a [Module],
        epoch: u32,
        addr: u64,
    ) -> Option<&'a Module> {
        let Some(replaced) = self.replaced.get(&pid) else {
            return find(current, addr);
        };
        let covering = find(current, addr)
            .into_iter()
            .chain(replaced.iter().filter(|m| m.base <= addr && addr < m.end));
        holder_at(covering.map(|m| (m, m.held)), epoch).map(|(m, _)| m)
    }

    fn text(&self, pid: Option<u32>, addr: u64) -> String {
        self.text_at(pid, NOW, addr)
    }

    fn text_at(&self, pid: Option<u32>, epoch: u32, addr: u64) -> String {
        match self.module(pid, epoch, addr) {
            Some(m) => match function_of(m, addr) {
                Some((f, 0)) => format!("{}`{f}", m.name),
                Some((f, off)) => format!("{}`{f}+0x{off:x}", m.name),
                None => format!("{}+0x{:x}", m.name, addr - m.base),
            },
            None => format!("0x{addr:x}"),
        }
    }
}

impl SymbolResolver for TraceSymbols {
    fn prefetch(&self, frames: &mut dyn Iterator<Item = (Option<u32>, u64)>) {
        TraceSymbols::prefetch(self, frames)
    }
    fn kernel(&self, addr: u64) -> String {
        self.text(None, addr)
    }
    fn user(&self, pid: u32, addr: u64) -> String {
        self.text(Some(pid), addr)
    }
    fn kmod(&self, addr: u64) -> String {
        self.module(None, NOW, addr)
            .map(|m| m.name.clone())
            .unwrap_or_else(|| format!("0x{addr:x}"))
    }
    fn umod(&self, pid: u32, addr: u64) -> String {
        self.module(Some(pid), NOW, addr)
            .map(|m| m.name.clone())
            .unwrap_or_else(|| format!("0x{addr:x}"))
    }
    // `module`function` where the PDB names the function; without it, keys by function merge
    // by module offset
    fn kernel_func(&self, addr: u64) -> String {
        self.func_text(None, addr)
    }
    fn user_func(&self, pid: u32, addr: u64) -> String {
        self.func_text(Some(pid), addr)
    }
    fn kernel_at(&self, epoch: u32, addr: u64) -> String {
        self.text_at(None, epoch, addr)
    }
    fn user_at(&self, pid: u32, epoch: u32, addr: u64) -> String {
        self.text_at(Some(pid), epoch, addr)
    }
}

/// The epoch of the images as they are at the end (`sym()`, `umod()` keys and the addresses
/// `printf` names, which keep no epoch).
const NOW: u32 = u32::MAX;

/// The PDB function holding `addr` in module `m`, and the offset into it.
fn function_of(m: &Module, addr: u64) -> Option<(&str, u64)> {
    let rva = u32::try_from(addr.checked_sub(m.base)?).ok()?;
    let f = m.pdb.as_ref()?.get()?.function_at(rva)?;
    Some((f.name.as_str(), (rva - f.rva) as u64))
}

impl TraceSymbols {
    fn func_text(&self, pid: Option<u32>, addr: u64) -> String {
        match self.module(pid, NOW, addr) {
            Some(m) => match function_of(m, addr) {
                Some((f, _)) => format!("{}`{f}", m.name),
                None => self.text(pid, addr),
            },
            None => self.text(pid, addr),
        }
    }
}

impl TraceSymbols {
    /// The kernel image holding `addr` (its file's base name and base address) and the PDB
    /// function that holds it, when the image's PDB was found and names one.
    pub fn kernel_symbol(&self, addr: u64) -> Option<(&str, u64, Option<&str>)> {
        let m = find(&self.kernel, addr)?;
        Some((
            m.name.as_str(),
            m.base,
            function_of(m, addr).map(|(f, _)| f),
        ))
    }
}

/// How many PDBs are looked for (downloaded) at once when a batch of frames is named.
pub const PARALLEL: usize = 4;

impl TraceSymbols {
    /// The image a frame falls in (`pid` None: the kernel's), and its PDB identity when the
    /// trace gives one: what the symbols report counts frames by.
    pub fn image_at(&self, pid: Option<u32>, addr: u64) -> Option<(&str, u64, Option<&PdbId>)> {
        let m = self.module(pid, NOW, addr)?;
        Some((m.name.as_str(), m.base, m.pdb.as_ref().map(|p| &p.id)))
    }

    /// Where the PDB of the image holding the frame came from (looking for it now if it was
    /// not yet: downloading it when the symbol path names a server). None: no image, or the
    /// trace gives its PDB no identity.
    pub fn pdb_origin(&self, pid: Option<u32>, addr: u64) -> Option<PdbOrigin> {
        let m = self.module(pid, NOW, addr)?;
        Some(m.pdb.as_ref()?.found().origin.clone())
    }

    /// Looks for the PDBs of the images `frames` fall in that were not looked for yet, up to
    /// [`PARALLEL`] at once, when the symbol path names a server (on this machine alone the
    /// lookups are quick, and are left to the first frame that needs each): the PDBs a batch
    /// of frames about to be printed needs arrive together instead of one after another.
    pub fn prefetch(&self, frames: &mut dyn Iterator<Item = (Option<u32>, u64)>) {
        let mut due: Vec<&LazyPdb> = Vec::new();
        for (pid, addr) in frames {
            let Some(p) = self.module(pid, NOW, addr).and_then(|m| m.pdb.as_ref()) else {
                continue;
            };
            if p.found.get().is_none() && !due.iter().any(|d| d.id == p.id) {
                due.push(p);
            }
        }
        let servers = due.first().and_then(|p| {
            p.cache
                .lock()
                .ok()
                .map(|c| !c.path.servers.is_empty() && !c.background)
        });
        // a live run's store fetches on its own workers, as frames are named
        if due.len() < 2 || servers != Some(true) {
            return;
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..PARALLEL.min(due.len()) {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(p) = due.get(i) else { break };
                    p.found();
                });
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_by_module_and_offset() {
        let mut t = TraceSymbols {
            kernel: vec![Module {
                base: 0xfffff800_00000000,
                end: 0xfffff800_00100000,
                name: "ntoskrnl.exe".into(),
                pdb: None,
                held: Held::default(),
            }],
            user: [(
                7,
                vec![Module {
                    base: 0x400000,
                    end: 0x500000,
                    name: "app.exe".into(),
                    pdb: None,
                    held: Held::default(),
                }],
            )]
            .into_iter()
            .collect(),
            methods: HashMap::new(),
            replaced: HashMap::new(),
        };
        assert_eq!(t.kernel(0xfffff800_00001234), "ntoskrnl.exe+0x1234");
        assert_eq!(t.user(7, 0x400010), "app.exe+0x10");
        assert_eq!(t.user(8, 0x400010), "0x400010");
        assert_eq!(t.umod(7, 0x400010), "app.exe");
        assert_eq!(t.kernel(0x10), "0x10");
        // .NET methods: a precompiled one inside its image wins, the rest of the image stays
        t.add_methods(
            [
                (7, 0x401000, 0x100, "System.String.Concat"),
                (7, 0x401000, 0x100, "System.String.Concat"),
                (7, 0x7f0000, 0x20, "App.Main"),
            ]
            .into_iter(),
        );
        assert_eq!(t.user(7, 0x401010), "System.String.Concat+0x10");
        assert_eq!(t.user(7, 0x401200), "app.exe+0x1200");
        assert_eq!(t.user(7, 0x7f0004), "App.Main+0x4");
        assert_eq!(t.user(7, 0x7f0024), "0x7f0024");
        assert_eq!(t.methods[&7].len(), 2);
    }

    #[test]
    fn symbol_time_frames_are_named_by_the_image_of_their_epoch() {
        let img = |base: u64, file_name: &str| Image {
            base,
            size: 0x1000,
            file_name: file_name.into(),
            ..Default::default()
        };
        let (dll, ntdll, drv) = (0x1000_0000, 0x7000_0000, 0xffff_f800_0000_0000);
        let mut state = SystemState::new();
        state.load_image(7, img(dll, r"C:\x\old.dll"), true);
        state.load_image(7, img(ntdll, r"C:\w\ntdll.dll"), true);
        state.load_image(0, img(drv, "olddrv.sys"), true);
        let old_user = state.stack_epoch(7, &[dll + 0x10, ntdll + 0x20]);
        let old_kernel = state.stack_epoch(0, &[drv + 0x30]);
        state.unload_image(7, dll);
        state.unload_image(0, drv);
        state.load_image(7, img(dll, r"C:\x\new.dll"), true);
        state.load_image(0, img(drv, "newdrv.sys"), true);
        let new_user = state.stack_epoch(7, &[dll + 0x10, ntdll + 0x20]);
        let new_kernel = state.stack_epoch(0, &[drv + 0x30]);
        let ntdll_only = state.stack_epoch(7, &[ntdll + 0x20]);
        assert_ne!(old_user, new_user);
        assert_ne!(old_kernel, new_kernel);
        assert_eq!(ntdll_only, old_user, "the same images: the same key");
        let names = |t: &TraceSymbols| {
            [
                t.user_at(7, old_user, dll + 0x10),
                t.user_at(7, new_user, dll + 0x10),
                t.user_at(7, old_user, ntdll + 0x20),
                t.user_at(7, new_user, ntdll + 0x20),
                t.kernel_at(old_kernel, drv + 0x30),
                t.kernel_at(new_kernel, drv + 0x30),
                // what keeps no epoch (umod(), sym() keys) is named as the images are now
                t.user(7, dll + 0x10),
                t.umod(7, dll + 0x10),
                t.kernel(drv + 0x30),
            ]
        };
        let want = [
            "old.dll+0x10",
            "new.dll+0x10",
            "ntdll.dll+0x20",
            "ntdll.dll+0x20",
            "olddrv.sys+0x30",
            "newdrv.sys+0x30",
            "new.dll+0x10",
            "new.dll",
            "newdrv.sys+0x30",
        ];
        // names built now (what prints before END) and after the pid and the driver went on
        // (END): the same
        let before_end = TraceSymbols::with_symbol_path(&state, SymbolPath::parse(""));
        assert_eq!(names(&before_end), want);
        state.unload_image(7, dll);
        state.load_image(7, img(dll, r"C:\x\newer.dll"), true);
        let end = TraceSymbols::with_symbol_path(&state, SymbolPath::parse(""));
        assert_eq!(names(&end)[..6], want[..6]);
        let newest = state.stack_epoch(7, &[dll + 0x10]);
        assert_eq!(end.user_at(7, newest, dll + 0x10), "newer.dll+0x10");
        assert_eq!(end.user(7, dll + 0x10), "newer.dll+0x10");
    }

    #[test]
    fn unloaded_images_name_what_no_newer_image_covers() {
        let img = |base: u64, file_name: &str| Image {
            base,
            size: 0x1000,
            file_name: file_name.into(),
            ..Default::default()
        };
        // pid 7 was an old process that unloaded all its images as it exited (two DLLs at one
        // base in turn), then a new one that has app2.exe mapped and unloaded plugin.dll
        let newer = Process {
            pid: 7,
            images: vec![img(0x40_0000, r"C:\apps\app2.exe")],
            unloaded_images: vec![img(0x1000_0000, r"C:\plugin.dll")],
            ..Default::default()
        };
        let older = Process {
            pid: 7,
            unloaded_images: vec![
                img(0x2000_0000, r"C:\apps\first.dll"),
                img(0x40_0000, r"C:\apps\app1.exe"),
                img(0x2000_0000, r"C:\second.dll"),
                img(0x3000_0000, r"C:\old.dll"),
            ],
            ..Default::default()
        };
        let pdbs = PdbStore::new(SymbolPath::parse("")).0;
        let t = TraceSymbols {
            user: [(7, modules(newest_first(&[&newer, &older]), &pdbs))]
                .into_iter()
                .collect(),
            ..Default::default()
        };
        assert_eq!(t.user(7, 0x40_0010), "app2.exe+0x10");
        assert_eq!(t.user(7, 0x1000_0010), "plugin.dll+0x10");
        assert_eq!(t.user(7, 0x2000_0010), "second.dll+0x10");
        assert_eq!(t.user(7, 0x3000_0fff), "old.dll+0xfff");
        assert_eq!(t.user(7, 0x3000_1000), "0x30001000");
        assert_eq!(t.user[&7].len(), 4);
    }

    #[test]
    fn frames_by_function_from_a_pdb_on_the_symbol_path() {
        use crate::symbols::pdb::tests::{clang_program, PROGRAM};
        let Some((_dir, exe, pdb)) = clang_program("traceprog", PROGRAM) else {
            return;
        };
        let bytes = std::fs::read(&exe).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        let id = crate::symbols::pdb::image_pdb_id(&file).unwrap();
        let syms = crate::symbols::pdb::read(&pdb, None).unwrap();
        let add = syms.functions.iter().find(|f| f.name == "add").unwrap();
        // a symbol server cache holding the PDB; the trace names it as built elsewhere
        let cache = tempfile::tempdir().unwrap();
        let place = cache.path().join("traceprog.pdb").join(id.store_key());
        std::fs::create_dir_all(&place).unwrap();
        std::fs::copy(&pdb, place.join("traceprog.pdb")).unwrap();
        let image = |age: u32| crate::etw::state::Image {
            base: 0x7ff6_0000_0000,
            size: 0x20000,
            file_name: r"\Device\HarddiskVolume3\apps\traceprog.exe".into(),
            pdb: Some(crate::etw::state::PdbInfo {
                guid: id.guid,
                age,
                file_name: r"C:\build\traceprog.pdb".into(),
            }),
            ..Default::default()
        };
        let cache_of = |path: &str| PdbStore::new(SymbolPath::parse(&format!("srv*{path}"))).0;
        let pdbs = cache_of(&cache.path().display().to_string());
        let imgs = [image(id.age)];
        let t = TraceSymbols {
            user: [(7, modules(imgs.iter(), &pdbs))].into_iter().collect(),
            ..Default::default()
        };
        let at = 0x7ff6_0000_0000 + add.rva as u64;
        assert_eq!(t.user(7, at + 2), "traceprog.exe`add+0x2");
        assert_eq!(t.user(7, at), "traceprog.exe`add");
        assert_eq!(t.user_func(7, at + 2), "traceprog.exe`add");
        assert_eq!(t.umod(7, at + 2), "traceprog.exe");
        // another age: that PDB does not match, frames keep module+offset
        let pdbs = cache_of(&cache.path().display().to_string());
        let imgs = [image(id.age + 1)];
        let t = TraceSymbols {
            user: [(7, modules(imgs.iter(), &pdbs))].into_iter().collect(),
            ..Default::default()
        };
        assert_eq!(
            t.user(7, at + 2),
            format!("traceprog.exe+0x{:x}", add.rva + 2)
        );
    }

    #[test]
    fn win3_live_pdb_downloads_do_not_hold_the_engine_thread() {
        // a server that accepts and never answers
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for c in l.incoming().flatten() {
                held.push(c);
            }
        });
        let cache = tempfile::tempdir().unwrap();
        let path = format!("srv*{}*http://127.0.0.1:{port}", cache.path().display());
        let img = crate::etw::state::Image {
            base: 0x1000_0000,
            size: 0x10000,
            file_name: r"\Device\HarddiskVolume3\nowhere\live.exe".into(),
            pdb: Some(crate::etw::state::PdbInfo {
                guid: crate::etw::record::Guid {
                    data1: 0x1234,
                    data2: 1,
                    data3: 2,
                    data4: [3; 8],
                },
                age: 1,
                file_name: "live.pdb".into(),
            }),
            ..Default::default()
        };
        let store = PdbStore::new(SymbolPath::parse(&path)).fetching_in_background();
        let t = TraceSymbols {
            user: [(7, modules([img].iter(), &store.0))].into_iter().collect(),
            ..Default::default()
        };
        let t0 = std::time::Instant::now();
        assert_eq!(t.user(7, 0x1000_0010), "live.exe+0x10");
        assert_eq!(t.user(7, 0x1000_0020), "live.exe+0x20");
        // a blocking lookup would wait for the server's timeout (20 s)
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t0.elapsed()
        );
        assert_eq!(store.0.lock().unwrap().started.len(), 1);
    }

    #[test]
    fn where_a_pdb_came_from() {
        use crate::symbols::pdb::tests::{clang_program, PROGRAM};
        let Some((_dir, exe, pdb)) = clang_program("originprog", PROGRAM) else {
            return;
        };
        let bytes = std::fs::read(&exe).unwrap();
        let mut id =
            crate::symbols::pdb::image_pdb_id(&object::File::parse(&*bytes).unwrap()).unwrap();
        id.path = r"C:\build\originprog.pdb".into();
        let image = r"\Device\HarddiskVolume9\apps\originprog.exe";
        // a plain folder: local
        let flat = tempfile::tempdir().unwrap();
        std::fs::copy(&pdb, flat.path().join("originprog.pdb")).unwrap();
        let store = PdbStore::new(SymbolPath::parse(&flat.path().display().to_string()));
        assert_eq!(
            store.origin(&id, image),
            PdbOrigin::Local(flat.path().join("originprog.pdb"))
        );
        // a symbol store: cache
        let cache = tempfile::tempdir().unwrap();
        let place = crate::symbols::symsrv::cache::place(cache.path(), &id);
        std::fs::create_dir_all(place.parent().unwrap()).unwrap();
        std::fs::copy(&pdb, &place).unwrap();
        let store = PdbStore::new(SymbolPath::parse(&format!(
            "srv*{}",
            cache.path().display()
        )));
        assert_eq!(store.origin(&id, image), PdbOrigin::Cache(place));
        // nowhere, and no server named: missing, with why
        let store = PdbStore::new(SymbolPath::parse(""));
        match store.origin(&id, image) {
            PdbOrigin::Missing(why) => assert!(why.contains("no symbol server"), "{why}"),
            o => panic!("{o:?}"),
        }
    }
}
