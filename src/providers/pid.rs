//! The `pid` provider: `pidN:module:function:entry|return|<hex offset>` probes on user
//! functions of process N, created from the ELF symbols of the modules the process has mapped
//! (as dtrace does, when a description names them). `entry` is the function's first
//! instruction, `return` every `ret` and jump out of the function, an offset any instruction
//! boundary. The debugger loop (`sources::debugger`) plants breakpoints at the probes' sites.
//!
//! Errors follow dtrace's `D_PROC_*` tags: a bad pid, an unknown function of a named module, a
//! bad probe name, an offset outside the function or inside an instruction, too many probes.
//!
//! The same code serves the `fpid` provider (`fpidN:module:function:entry|return`, hooks in
//! the target instead of breakpoints, see `sources::fpid`): [`PidProvider::fpid`] is a view
//! of the same state (the modules of a process are read once and name both providers'
//! stacks) that creates and lists `fpid` probes only, entry and return.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::Provider;
use crate::probes::{glob_match, ProbeDesc, ProbeError, ProbeInfo};
use crate::symbols::decode::{self, Emulation};
use crate::symbols::managed::{ManagedMethod, ManagedMethods, PerfMapFile};
use crate::symbols::r2r::R2rImage;
use crate::symbols::{ElfImage, LoadedModule, ProcessModules};

/// First id of pid probes (above every other provider's).
const FIRST_ID: u64 = 1_000_000;

/// The most probes dtx creates in one process (fasttrap's default `fasttrap-max-probes`).
pub const MAX_PROBES: usize = 250_000;

/// Where a probe's breakpoint is and what it reports there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SiteKind {
    Entry,
    /// A return site; `offset` (arg0) is the return instruction's offset in the function.
    Return {
        offset: u64,
    },
    Offset,
}

/// One breakpoint site of a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeSite {
    /// Run-time address.
    pub addr: u64,
    pub kind: SiteKind,
    /// How the debugger steps over the instruction there.
    pub emulation: Emulation,
    pub len: u8,
}

/// A created pid probe.
#[derive(Clone, Debug)]
pub struct PidProbe {
    pub info: ProbeInfo,
    pub pid: u32,
    pub sites: Vec<ProbeSite>,
    /// A probe on a managed (.NET) method: its sites grow as the runtime compiles code
    /// versions of the method.
    pub managed: bool,
}

/// Reads what the provider needs of a live process. The Linux implementation reads
/// `/proc/PID`; tests give their own.
pub trait ProcessReader: Send {
    /// `/proc/PID/maps` text and the main executable's path, or why not.
    fn maps(&self, pid: u32) -> Result<(String, String), String>;
    /// Where the .NET runtime of process `pid` writes its perf map (`None`: no managed code
    /// is looked for).
    fn perf_map(&self, _pid: u32) -> Option<std::path::PathBuf> {
        None
    }
    /// Reads the process's memory (the code of managed methods, which no file holds).
    fn read_memory(&self, _pid: u32, _addr: u64, _buf: &mut [u8]) -> bool {
        false
    }
    /// Whether the platform reports a process's managed code through the CLR's ETW method
    /// events (Windows: the debugger loop feeds them in with
    /// [`PidProvider::managed_methods`]) rather than a perf map.
    fn clr_events(&self) -> bool {
        false
    }
    /// The methods with code in process `pid` now, from a rundown of its runtime run to its
    /// end (Windows: the CLR rundown provider's MethodDCStartVerbose and ModuleDCStart, until
    /// its DCStartComplete), or why they cannot be had; `None` where no rundown can run (the
    /// platform has none, or the process is held by this dtx's debugger, which a rundown would
    /// wait on). Asked once per process, when a .NET runtime is mapped in it.
    fn clr_rundown(&self, _pid: u32) -> Option<Result<Vec<ManagedMethod>, String>> {
        None
    }
}

/// Reads `/proc/PID/maps` and `/proc/PID/exe`.
pub struct ProcReader;

impl ProcessReader for ProcReader {
    fn maps(&self, pid: u32) -> Result<(String, String), String> {
        let maps =
            std::fs::read_to_string(format!("/proc/{pid}/maps")).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => "No such process".to_string(),
                std::io::ErrorKind::PermissionDenied => "Permission denied".to_string(),
                _ => e.to_string(),
            })?;
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .map(|p| {
                p.to_string_lossy()
                    .trim_end_matches(" (deleted)")
                    .to_string()
            })
            .unwrap_or_default();
        Ok((maps, exe))
    }

    /// CoreCLR writes `perf-PID.map` in its temporary directory: `TMPDIR` of the process, else
    /// `/tmp` (the PAL's GetTempPath).
    fn perf_map(&self, pid: u32) -> Option<std::path::PathBuf> {
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let tmp = env
            .split(|&b| b == 0)
            .find_map(|v| v.strip_prefix(b"TMPDIR="))
            .filter(|v| !v.is_empty())
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_else(|| "/tmp".to_string());
        Some(std::path::Path::new(&tmp).join(format!("perf-{pid}.map")))
    }

    #[cfg(unix)]
    fn read_memory(&self, pid: u32, addr: u64, buf: &mut [u8]) -> bool {
        use std::os::unix::fs::FileExt;
        let Ok(f) = std::fs::File::open(format!("/proc/{pid}/mem")) else {
            return false;
        };
        f.read_exact_at(buf, addr).is_ok()
    }
}

struct PidProcess {
    modules: ProcessModules,
    count: usize,
    /// The managed code the runtime reported, and its perf map as read so far.
    managed: ManagedMethods,
    perf_map: Option<PerfMapFile>,
    /// A .NET process (its runtime is loaded, it has a perf map, or its executable is the
    /// `dotnet` host or an app host with a `.runtimeconfig.json`).
    dotnet: bool,
    /// CoreCLR is mapped (the process is past its start).
    runtime_loaded: bool,
    /// Why its managed code cannot be followed (a runtime dtx does not support).
    unsupported: Option<String>,
    /// Its managed code comes from the CLR's ETW events (Windows), not a perf map.
    clr_events: bool,
    /// Why the rundown that was to fill `managed` when the process was first read failed
    /// (Windows): a glob over methods that matches nothing says it.
    rundown_error: Option<String>,
}

#[derive(Default)]
struct PidState {
    processes: HashMap<u32, PidProcess>,
    images: HashMap<String, Arc<ElfImage>>,
    probes: Vec<PidProbe>,
    /// (provider, module, function, name) → index in `probes`.
    by_key: HashMap<(String, String, String, String), usize>,
    /// The RuntimeFunctions tables of ready-to-run images by path, read once (None: the image
    /// has none dtx reads).
    r2r: HashMap<String, Option<Arc<R2rImage>>>,
}

/// The `pid` provider (or its `fpid` view); clones share the created probes.
#[derive(Clone)]
pub struct PidProvider {
    state: Arc<Mutex<PidState>>,
    reader: Arc<Mutex<Box<dyn ProcessReader>>>,
    /// `fpid` rather than `pid`.
    fpid: bool,
}

/// The pid of a `pidN` provider name: `Ok(None)` when the name is not of that shape.
pub fn provider_pid(provider: &str) -> Result<Option<u32>, ProbeError> {
    provider_pid_of("pid", provider)
}

/// The pid of an `fpidN` provider name: `Ok(None)` when the name is not of that shape.
pub fn provider_fpid(provider: &str) -> Result<Option<u32>, ProbeError> {
    provider_pid_of("fpid", provider)
}

fn provider_pid_of(prefix: &str, provider: &str) -> Result<Option<u32>, ProbeError> {
    let Some(digits) = provider.strip_prefix(prefix) else {
        return Ok(None);
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(None);
    }
    match digits.parse::<u32>() {
        Ok(p) if p > 0 && p <= i32::MAX as u32 => Ok(Some(p)),
        _ => Err(ProbeError::new(
            "D_PROC_BADPID",
            format!("'{provider}' does not contain a valid pid"),
        )),
    }
}

fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

impl PidProvider {
    pub fn new(reader: Box<dyn ProcessReader>) -> Self {
        PidProvider {
            state: Arc::new(Mutex::new(PidState::default())),
            reader: Arc::new(Mutex::new(reader)),
            fpid: false,
        }
    }

    /// The `fpid` provider over the same processes and modules.
    pub fn fpid(&self) -> PidProvider {
        PidProvider {
            fpid: true,
            ..self.clone()
        }
    }

    /// `pid` or `fpid`.
    fn prefix(&self) -> &'static str {
        if self.fpid {
            "fpid"
        } else {
            "pid"
        }
    }

    /// Whether a probe is of this provider (not of its `pid`/`fpid` sibling).
    fn owns(&self, p: &PidProbe) -> bool {
        p.info.provider.starts_with('f') == self.fpid
    }

    /// The pid a provider name of this provider names.
    fn pid_in(&self, provider: &str) -> Result<Option<u32>, ProbeError> {
        provider_pid_of(self.prefix(), provider)
    }

    /// Every probe of this provider created in process `pid`.
    pub fn probes_of(&self, pid: u32) -> Vec<PidProbe> {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.probes
            .iter()
            .filter(|p| p.pid == pid && self.owns(p))
            .cloned()
            .collect()
    }

    /// Process `pid`'s module list (`/proc/PID/maps` text) and its executable's path, read
    /// now, or why not.
    pub fn process_maps(&self, pid: u32) -> Result<(String, String), String> {
        self.reader
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .maps(pid)
    }

    /// The modules of process `pid` as last read.
    pub fn modules_of(&self, pid: u32) -> Option<ProcessModules> {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.processes.get(&pid).map(|p| p.modules.clone())
    }

    /// Re-reads the modules of `pid` (after a `dlopen`) and returns those that are new.
    pub fn refresh_modules(&self, pid: u32) -> Vec<LoadedModule> {
        let Ok((maps, exe)) = self
            .reader
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .maps(pid)
        else {
            return Vec::new();
        };
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *st;
        let mods = ProcessModules::from_maps(&maps, &exe, &mut st.images);
        let Some(p) = st.processes.get_mut(&pid) else {
            return Vec::new();
        };
        p.runtime_loaded |= runtime_mapped(&maps);
        p.dotnet |= p.runtime_loaded;
        let new: Vec<LoadedModule> = mods
            .modules
            .iter()
            .filter(|m| {
                !p.modules
                    .modules
                    .iter()
                    .any(|o| o.start == m.start && o.image.path == m.image.path)
            })
            .cloned()
            .collect();
        p.modules = mods;
        new
    }

    /// Probes a description creates in the given modules of `pid` only (for modules that
    /// appear while tracing).
    pub fn create_in(
        &self,
        pid: u32,
        desc: &ProbeDesc,
        modules: &[LoadedModule],
    ) -> Result<Vec<ProbeInfo>, ProbeError> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = st.processes.get(&pid).filter(|p| p.dotnet) {
            let clr_events = p.clr_events;
            let native: Vec<LoadedModule> = modules
                .iter()
                .filter(|m| !is_assembly(m, clr_events))
                .cloned()
                .collect();
            return create(&mut st, self.fpid, pid, desc, &native, true);
        }
        create(&mut st, self.fpid, pid, desc, modules, true)
    }

    fn process_modules(&self, pid: u32) -> Result<Vec<LoadedModule>, ProbeError> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *st;
        if let Some(p) = st.processes.get(&pid) {
            return Ok(p.modules.modules.clone());
        }
        let reader = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        let (maps, exe) = reader.maps(pid).map_err(|e| {
            ProbeError::new("D_PROC_GRAB", format!("failed to grab pid {pid}: {e}"))
        })?;
        let modules = ProcessModules::from_maps(&maps, &exe, &mut st.images);
        let v = modules.modules.clone();
        let perf_map = reader.perf_map(pid).map(PerfMapFile::new);
        let mut managed = ManagedMethods::default();
        let mut perf_map = perf_map;
        if let Some(f) = &mut perf_map {
            for m in f.read_new() {
                managed.insert(m);
            }
        }
        let unsupported = unsupported_runtime(&maps, &exe);
        // only where the platform has a perf map to read (Linux) or the CLR's ETW events
        // (Windows)
        let clr_events = reader.clr_events();
        // Windows: the methods with code now, from a rundown of the runtime run to its end,
        // so that globs match and `-l` lists them (a process dtx started has no runtime yet)
        let mut rundown_error = None;
        if clr_events && runtime_mapped(&maps) {
            match reader.clr_rundown(pid) {
                Some(Ok(methods)) => {
                    for m in methods {
                        managed.insert(named_by_image(&modules, m));
                    }
                }
                Some(Err(e)) => rundown_error = Some(e),
                None => {}
            }
        }
        let dotnet = (perf_map.is_some()
            && (!managed.is_empty() || looks_dotnet(&maps, &exe) || unsupported.is_some()))
            || (clr_events && (looks_dotnet_windows(&maps, &exe) || !managed.is_empty()));
        st.processes.insert(
            pid,
            PidProcess {
                modules,
                count: 0,
                managed,
                perf_map,
                dotnet,
                runtime_loaded: runtime_mapped(&maps),
                unsupported,
                clr_events,
                rundown_error,
            },
        );
        Ok(v)
    }

    fn try_create(&self, desc: &ProbeDesc) -> Result<Vec<ProbeInfo>, ProbeError> {
        let Some(pid) = self.pid_in(&desc.provider)? else {
            // a glob over the provider: the probes already created in matching processes
            let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            return Ok(st
                .probes
                .iter()
                .filter(|p| {
                    self.owns(p)
                        && glob_match(&desc.provider, &p.info.provider)
                        && super::fields_match(desc, &p.info.module, &p.info.function, &p.info.name)
                })
                .map(|p| p.info.clone())
                .collect());
        };
        let mut modules = self.process_modules(pid)?;
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = st.processes.get(&pid).filter(|p| p.dotnet) {
            // the assemblies the runtime maps are files of IL (or ready-to-run code it does
            // not describe): their methods are the managed ones, not the PE image's symbols
            let clr_events = p.clr_events;
            modules.retain(|m| !is_assembly(m, clr_events));
        }
        let mut out = create(&mut st, self.fpid, pid, desc, &modules, false)?;
        if self.fpid
            && out.is_empty()
            && st.processes.get(&pid).is_some_and(|p| p.dotnet)
            && desc.function.contains('.')
            && !desc.module.is_empty()
            && !modules.iter().any(|m| m.matches(&desc.module))
        {
            return Err(ProbeError::new(
                "D_PROC_LIB",
                format!(
                    "fpid hooks do not go into JIT-compiled code: trace the .NET method '{}' with pid",
                    desc.function
                ),
            ));
        }
        if !self.fpid {
            let reader = self.reader.lock().unwrap_or_else(|e| e.into_inner());
            let read = |addr: u64, buf: &mut [u8]| reader.read_memory(pid, addr, buf);
            out.extend(create_managed(&mut st, pid, desc, &modules, &read)?);
            // a glob over methods whose rundown failed: nothing matched because nothing could
            // be listed, which the user is told rather than "matched 0 probes"
            if let Some(why) = st
                .processes
                .get(&pid)
                .and_then(|p| p.rundown_error.as_ref())
            {
                if out.is_empty() && (desc.function.is_empty() || is_glob(&desc.function)) {
                    return Err(ProbeError::new("D_PROC_LIB", why.clone()));
                }
            }
        }
        Ok(out)
    }

    /// Why a description over process `pid`'s functions matched nothing, when the process
    /// runs .NET: its methods are found as the runtime compiles them, so a glob made before
    /// matches only what was compiled then (nothing, for a program dtx started), and `-Z`
    /// makes the probes as methods appear. The same words on Linux and Windows.
    fn why_none_of(&self, desc: &ProbeDesc) -> Option<String> {
        if self.fpid || desc.function == "-" {
            return None;
        }
        let pid = self.pid_in(&desc.provider).ok()??;
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let p = st.processes.get(&pid).filter(|p| p.dotnet)?;
        if let Some(why) = &p.unsupported {
            return Some(format!("pid {pid}: {why}"));
        }
        let compiled = p.managed.iter().filter(|m| !m.is_stub()).count();
        Some(if compiled == 0 {
            format!(
                "pid {pid} runs .NET and has compiled no method yet (methods are found as the runtime compiles them); use -Z to make the probes as matching methods are compiled"
            )
        } else {
            format!(
                "pid {pid} runs .NET and none of the {compiled} methods it has compiled so far matches; use -Z to make the probes as matching methods are compiled"
            )
        })
    }

    /// Whether process `pid` runs .NET code (as far as its modules and perf map tell).
    pub fn is_dotnet(&self, pid: u32) -> bool {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.processes.get(&pid).is_some_and(|p| p.dotnet)
    }

    /// The managed code of process `pid` containing `addr`, as `ustack()` names it.
    pub fn managed_lookup(&self, pid: u32, addr: u64) -> crate::output::stack::Lookup {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match st.processes.get(&pid) {
            Some(p) => p.managed.lookup(addr),
            None => crate::output::stack::Lookup::None,
        }
    }

    /// Where process `pid`'s runtime writes its perf map.
    pub fn perf_map_path(&self, pid: u32) -> Option<std::path::PathBuf> {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.processes
            .get(&pid)
            .and_then(|p| p.perf_map.as_ref())
            .map(|f| f.path.clone())
    }

    /// The managed probes of process `pid` that have no site (their method has no code yet).
    pub fn unarmed_managed(&self, pid: u32) -> Vec<ProbeInfo> {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.probes
            .iter()
            .filter(|p| p.pid == pid && p.managed && p.sites.is_empty())
            .map(|p| p.info.clone())
            .collect()
    }

    /// New managed code of process `pid`: the lines of its perf map appended since the last
    /// read, or `text` (perf map lines the runtime is writing, seen at its `write`). Returns,
    /// for each probe that gains sites, the probe, the new sites, and the descriptions among
    /// `descs` that created it when it is new (empty for a probe that existed).
    pub fn managed_code(
        &self,
        pid: u32,
        text: Option<&str>,
        descs: &[ProbeDesc],
    ) -> Vec<(ProbeInfo, Vec<ProbeSite>, Vec<ProbeDesc>)> {
        let lines = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let Some(p) = st.processes.get_mut(&pid) else {
                return Vec::new();
            };
            match (text, &mut p.perf_map) {
                (Some(t), _) => t
                    .lines()
                    .filter_map(crate::symbols::managed::parse_perf_map_line)
                    .collect(),
                (None, Some(f)) => f.read_new(),
                (None, None) => Vec::new(),
            }
        };
        self.managed_methods(pid, lines, descs)
    }

    /// New managed code of process `pid` (from the CLR's ETW method events on Windows, from
    /// the perf map's lines on Linux): each method not seen before is added to the process's
    /// table, and the probes of its name get its code version's sites. A ready-to-run method
    /// whose assembly the events do not say (`?`) is named by the image that holds its code.
    /// Returns what [`PidProvider::managed_code`] returns.
    pub fn managed_methods(
        &self,
        pid: u32,
        methods: Vec<ManagedMethod>,
        descs: &[ProbeDesc],
    ) -> Vec<(ProbeInfo, Vec<ProbeSite>, Vec<ProbeDesc>)> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *st;
        let Some(p) = st.processes.get_mut(&pid) else {
            return Vec::new();
        };
        let fresh: Vec<ManagedMethod> = methods
            .into_iter()
            .map(|m| named_by_image(&p.modules, m))
            .map(|m| with_r2r_extent(&mut st.r2r, &p.modules, m))
            .filter(|m| p.managed.insert(m.clone()))
            .collect();
        if !fresh.is_empty() {
            p.dotnet = true;
        }
        let reader = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        let read = |addr: u64, buf: &mut [u8]| reader.read_memory(pid, addr, buf);
        let mut out: Vec<(ProbeInfo, Vec<ProbeSite>, Vec<ProbeDesc>)> = Vec::new();
        for m in fresh.iter().filter(|m| !m.is_stub()) {
            // probes that exist: one more code version
            for name in ["entry", "return"] {
                let key = (
                    format!("pid{pid}"),
                    m.module.clone(),
                    m.name.clone(),
                    name.to_string(),
                );
                let Some(&i) = st.by_key.get(&key) else {
                    continue;
                };
                let sites = method_sites(m, name == "return", &read);
                if sites.is_empty() {
                    continue;
                }
                st.probes[i].sites.extend(sites.iter().copied());
                let info = st.probes[i].info.clone();
                match out.iter_mut().find(|(o, _, _)| o.id == info.id) {
                    Some((_, s, _)) => s.extend(sites),
                    None => out.push((info, sites, Vec::new())),
                }
            }
            // descriptions that name it: new probes
            for d in descs {
                if !glob_match(or_star(&d.provider), &format!("pid{pid}"))
                    || !assembly_matches(or_star(&d.module), &m.module)
                    || !glob_match(or_star(&d.function), &m.name)
                {
                    continue;
                }
                for name in ["entry", "return"] {
                    if !glob_match(or_star(&d.name), name) {
                        continue;
                    }
                    let key = (
                        format!("pid{pid}"),
                        m.module.clone(),
                        m.name.clone(),
                        name.to_string(),
                    );
                    if st.by_key.contains_key(&key) {
                        if let Some((_, _, by)) = out.iter_mut().find(|(o, _, by)| {
                            !by.is_empty()
                                && o.module == m.module
                                && o.function == m.name
                                && o.name == name
                        }) {
                            if !by.contains(d) {
                                by.push(d.clone());
                            }
                        }
                        continue;
                    }
                    let sites = method_sites(m, name == "return", &read);
                    let info = add_probe(st, false, pid, &m.module, &m.name, name, sites.clone());
                    if let Some(i) = st.by_key.get(&key).copied() {
                        st.probes[i].managed = true;
                    }
                    out.push((info, sites, vec![d.clone()]));
                }
            }
        }
        out
    }
}

/// A method whose assembly the events did not say (`?`: a ready-to-run entry point) named by
/// the image that holds its code.
fn named_by_image(modules: &ProcessModules, mut m: ManagedMethod) -> ManagedMethod {
    if m.module == "?" {
        if let Some(owner) = modules.module_at(m.start) {
            m.module = assembly_name(&owner.name).to_string();
        }
    }
    m
}

/// A ready-to-run method known by its entry point alone (R2RGetEntryPoint gives no size) with
/// the extent of its body: the RUNTIME_FUNCTION of the image holding it that starts at the
/// entry point (`symbols::r2r`), read from the image's file. Unchanged when its size is known,
/// or no table of the image has a body starting there (it then has no `return` probe).
fn with_r2r_extent(
    cache: &mut HashMap<String, Option<Arc<R2rImage>>>,
    modules: &ProcessModules,
    mut m: ManagedMethod,
) -> ManagedMethod {
    if m.size != 0 {
        return m;
    }
    let Some(owner) = modules.module_at(m.start) else {
        return m;
    };
    let table = cache
        .entry(owner.image.path.clone())
        .or_insert_with(|| R2rImage::from_path(&owner.image.path).ok().map(Arc::new));
    let rva = u32::try_from(m.start - owner.start).ok();
    if let Some((b, e)) = table.as_ref().zip(rva).and_then(|(t, rva)| t.body_at(rva)) {
        m.size = (e - b) as u64;
    }
    m
}

fn or_star(s: &str) -> &str {
    if s.is_empty() {
        "*"
    } else {
        s
    }
}

/// Whether a module field names an assembly: a glob over its simple name, or that name with
/// `.dll`/`.exe`, in any case.
fn assembly_matches(pattern: &str, assembly: &str) -> bool {
    if pattern.is_empty() || glob_match(pattern, assembly) {
        return true;
    }
    let p = pattern.to_ascii_lowercase();
    let a = assembly.to_ascii_lowercase();
    p.strip_suffix(".dll")
        .or_else(|| p.strip_suffix(".exe"))
        .is_some_and(|s| s == a)
        || (!is_glob(&p) && p == a)
}

/// A managed runtime whose code dtx cannot follow: Mono (dtx reads CoreCLR's perf map and
/// nothing of Mono's JIT).
fn unsupported_runtime(maps: &str, exe: &str) -> Option<String> {
    let mono = maps.contains("/libmonosgen-")
        || maps.contains("/libmono-")
        || std::path::Path::new(exe)
            .file_name()
            .is_some_and(|n| n == "mono" || n == "mono-sgen");
    mono.then(|| "the Mono runtime is not supported (CoreCLR: .NET Core 3.1 and later)".to_string())
}

/// A .NET assembly's file name (`app.dll`, `app.exe`, `System.Runtime.dll`) among the modules
/// of a Linux process.
fn is_assembly_file(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(".dll") || lower.ends_with(".exe")
}

/// An assembly's simple name: a file name less `.dll`/`.exe` (any case).
fn assembly_name(file: &str) -> &str {
    let lower = file.to_ascii_lowercase();
    if lower.ends_with(".dll") || lower.ends_with(".exe") {
        &file[..file.len() - 4]
    } else {
        file
    }
}

/// Whether a module of a .NET process is a managed assembly rather than native code: on Linux
/// every `.dll`/`.exe` mapped (the runtime maps its assemblies as files); on Windows, where
/// native modules are `.dll`/`.exe` too, an image with a CLI header.
fn is_assembly(m: &LoadedModule, clr_events: bool) -> bool {
    is_assembly_file(&m.name) && (!clr_events || has_cli_header(&m.image.path))
}

/// Whether the PE file at `path` has a CLI (COR20) header: data directory 14 of its optional
/// header is not empty (ECMA-335 II.25.3.3; Microsoft Learn's "PE Format", Optional Header
/// Data Directories). False for a file that cannot be read or is not PE.
pub fn has_cli_header(path: &str) -> bool {
    use std::io::Read;
    let mut b = vec![0u8; 4096];
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    let n = f.read(&mut b).unwrap_or(0);
    cli_header_in(&b[..n])
}

/// [`has_cli_header`] over the first bytes of a PE file.
pub fn cli_header_in(b: &[u8]) -> bool {
    if b.get(0..2) != Some(b"MZ") {
        return false;
    }
    let pe = b
        .get(0x3c..0x40)
        .map_or(0, |x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]) as usize);
    b.get(pe..)
        .is_some_and(|nt| crate::symbols::r2r::cli_header_rva(nt).is_ok())
}

/// Whether a .NET runtime is mapped in the process: CoreCLR (Linux `libcoreclr.so`, Windows
/// `coreclr.dll`) or the .NET Framework's `clr.dll`.
pub fn runtime_mapped(maps: &str) -> bool {
    if maps.contains("/libcoreclr.so") {
        return true;
    }
    let lower = maps.to_ascii_lowercase();
    lower.contains("\\coreclr.dll") || lower.contains("\\clr.dll")
}

/// Whether a Windows process runs (or is about to run) .NET: a runtime is mapped, or its
/// executable is the `dotnet` host, or an app host next to its `.runtimeconfig.json`.
fn looks_dotnet_windows(maps: &str, exe: &str) -> bool {
    if runtime_mapped(maps) {
        return true;
    }
    let file = exe.rsplit(['\\', '/']).next().unwrap_or(exe);
    if file.eq_ignore_ascii_case("dotnet.exe") {
        return true;
    }
    let stem = assembly_name(exe);
    !exe.is_empty()
        && stem.len() < exe.len()
        && std::path::Path::new(&format!("{stem}.runtimeconfig.json")).exists()
}

/// Whether a process runs (or is about to run) .NET: CoreCLR is mapped, or its executable is
/// the `dotnet` host, or an app host next to its `.runtimeconfig.json`.
fn looks_dotnet(maps: &str, exe: &str) -> bool {
    if maps.contains("/libcoreclr.so") {
        return true;
    }
    let path = std::path::Path::new(exe);
    if path.file_name().is_some_and(|n| n == "dotnet") {
        return true;
    }
    let rc = path.with_extension("runtimeconfig.json");
    !exe.is_empty() && rc.exists()
}

/// The sites of one code version of a managed method: its first instruction, or every `ret`
/// and jump out of it (its code read from the process, as no file holds it).
fn method_sites(
    m: &ManagedMethod,
    ret: bool,
    read: &dyn Fn(u64, &mut [u8]) -> bool,
) -> Vec<ProbeSite> {
    // the JIT's methods are small; a larger one is read up to this much
    const MAX_CODE: u64 = 1 << 20;
    // a ready-to-run method's entry point comes without its size (R2RGetEntryPoint): its
    // first instruction is all there is to decode, and it has no return sites
    if m.size == 0 && ret {
        return Vec::new();
    }
    let len = if m.size == 0 {
        16
    } else {
        m.size.min(MAX_CODE)
    };
    let mut code = vec![0u8; len as usize];
    if !read(m.start, &mut code) {
        return Vec::new();
    }
    let insns = decode::function(&code, m.start);
    if ret {
        insns
            .iter()
            .filter(|i| i.returns)
            .map(|i| ProbeSite {
                addr: m.start + i.offset,
                kind: SiteKind::Return { offset: i.offset },
                emulation: i.emulation,
                len: i.len,
            })
            .collect()
    } else {
        insns
            .first()
            .map(|i| ProbeSite {
                addr: m.start,
                kind: SiteKind::Entry,
                emulation: i.emulation,
                len: i.len,
            })
            .into_iter()
            .collect()
    }
}

/// The probes a description creates on managed methods of process `pid`: an `entry` and a
/// `return` probe per method name (`Namespace.Type.Method`; overloads and every code version
/// share them), with a site per code version compiled so far. A method named exactly in an
/// assembly that is not a native module of a .NET process gets its probes before its code
/// exists: they are armed as the runtime compiles it.
fn create_managed(
    st: &mut PidState,
    pid: u32,
    desc: &ProbeDesc,
    modules: &[LoadedModule],
    read: &dyn Fn(u64, &mut [u8]) -> bool,
) -> Result<Vec<ProbeInfo>, ProbeError> {
    let Some(p) = st.processes.get(&pid) else {
        return Ok(Vec::new());
    };
    if desc.function == "-" {
        return Ok(Vec::new());
    }
    if !p.dotnet {
        // `Namespace.Type.Method` in a module the process does not have
        let dotted = desc.function.contains('.') && !is_glob(&desc.function);
        if dotted
            && !desc.module.is_empty()
            && !is_glob(&desc.module)
            && !modules.iter().any(|m| m.matches(&desc.module))
        {
            if p.clr_events {
                return Err(ProbeError::new(
                    "D_PROC_LIB",
                    format!(
                        "pid {pid} is not a .NET process (no coreclr.dll or clr.dll, not the dotnet host): no method '{}' in '{}'",
                        desc.function, desc.module
                    ),
                ));
            }
            if p.perf_map.is_none() {
                return Err(ProbeError::new(
                    "D_PROC_LIB",
                    format!(
                        "pid {pid} has no module '{}'; .NET methods are traced on Linux and Windows only",
                        desc.module
                    ),
                ));
            }
            return Err(ProbeError::new(
                "D_PROC_LIB",
                format!(
                    "pid {pid} is not a .NET process (no CoreCLR, no perf map): no method '{}' in '{}'",
                    desc.function, desc.module
                ),
            ));
        }
        return Ok(Vec::new());
    }
    let module_pat = or_star(&desc.module).to_string();
    let func_pat = or_star(&desc.function).to_string();
    let name_pat = or_star(&desc.name).to_string();
    // (assembly, method) → its code versions
    let mut found: Vec<((String, String), Vec<ManagedMethod>)> = Vec::new();
    for m in p.managed.iter().filter(|m| !m.is_stub()) {
        if !assembly_matches(&module_pat, &m.module) || !glob_match(&func_pat, &m.name) {
            continue;
        }
        let key = (m.module.clone(), m.name.clone());
        match found.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(m.clone()),
            None => found.push((key, vec![m.clone()])),
        }
    }
    let wants = |n: &str| glob_match(&name_pat, n);
    if !found.is_empty() && !is_glob(&name_pat) && !wants("entry") && !wants("return") {
        return Err(ProbeError::new(
            "D_PROC_NAME",
            format!(
                "'{name_pat}' is an invalid probe name: probes on managed methods are entry and return"
            ),
        ));
    }
    let mut out = Vec::new();
    // (a managed method is always `Type.Method`; a `.so` is a native library loaded later)
    let named_missing = found.is_empty()
        && !is_glob(&module_pat)
        && !is_glob(&func_pat)
        && func_pat.contains('.')
        && !module_pat.contains(".so")
        && !desc.module.is_empty()
        && !modules.iter().any(|m| m.matches(&module_pat));
    if named_missing {
        if let Some(why) = &p.unsupported {
            return Err(ProbeError::new(
                "D_PROC_LIB",
                format!("pid {pid}: {why}: no probes on '{module_pat}' methods"),
            ));
        }
        if p.runtime_loaded && p.perf_map.as_ref().is_some_and(|f| !f.exists()) {
            return Err(ProbeError::new(
                "D_PROC_LIB",
                format!(
                    "pid {pid} runs .NET but writes no perf map, so its methods cannot be found: \
                     start it with DOTNET_PerfMapEnabled=1 (COMPlus_PerfMapEnabled=1 before .NET 5), \
                     as dtx does for -c"
                ),
            ));
        }
    }
    if named_missing {
        // not compiled yet: probes without sites, armed as code appears
        let assembly = assembly_name(&module_pat);
        for name in ["entry", "return"] {
            if wants(name) {
                let info = add_probe(st, false, pid, assembly, &func_pat, name, Vec::new());
                mark_managed(st, &info);
                out.push(info);
            }
        }
        return Ok(out);
    }
    for ((module, name), versions) in found {
        for n in ["entry", "return"] {
            if !wants(n) {
                continue;
            }
            let sites: Vec<ProbeSite> = versions
                .iter()
                .flat_map(|v| method_sites(v, n == "return", read))
                .collect();
            let info = add_probe(st, false, pid, &module, &name, n, sites);
            mark_managed(st, &info);
            out.push(info);
        }
    }
    Ok(out)
}

fn mark_managed(st: &mut PidState, info: &ProbeInfo) {
    if let Some(p) = st.probes.get_mut((info.id - FIRST_ID) as usize) {
        p.managed = true;
    }
}

/// Creates (or finds) the probes a description names in `modules` of process `pid`: `pid`
/// probes, or with `fpid` the entry and return probes of the `fpid` provider.
fn create(
    st: &mut PidState,
    fpid: bool,
    pid: u32,
    desc: &ProbeDesc,
    modules: &[LoadedModule],
    quiet_missing: bool,
) -> Result<Vec<ProbeInfo>, ProbeError> {
    let or_star = |s: &str| {
        if s.is_empty() {
            "*".to_string()
        } else {
            s.to_string()
        }
    };
    let module_pat = or_star(&desc.module);
    let func_pat = or_star(&desc.function);
    let name_pat = or_star(&desc.name);
    let mut out = Vec::new();
    if fpid
        && (func_pat == "-" || !is_glob(&name_pat) && name_pat != "entry" && name_pat != "return")
    {
        return Err(ProbeError::new(
            "D_PROC_NAME",
            format!("'{name_pat}' is an invalid probe name: fpid probes are entry and return"),
        ));
    }

    if func_pat == "-" {
        // an absolute address in the main executable
        if !desc.module.is_empty()
            && (is_glob(&module_pat)
                || !modules.iter().any(|m| m.is_exec && m.matches(&module_pat)))
        {
            return Err(ProbeError::new(
                "D_PROC_LIB",
                "only the a.out module is valid with the '-' function",
            ));
        }
        if is_glob(&name_pat) {
            return Err(ProbeError::new(
                "D_PROC_NAME",
                "only individual addresses may be specified with the '-' function",
            ));
        }
        let Ok(addr) = u64::from_str_radix(&name_pat, 16) else {
            return Err(ProbeError::new(
                "D_PROC_NAME",
                format!("'{name_pat}' is an invalid probe name"),
            ));
        };
        let Some(m) = modules.iter().find(|m| m.is_exec) else {
            return Ok(out);
        };
        let site = ProbeSite {
            addr,
            kind: SiteKind::Offset,
            emulation: Emulation::Step,
            len: 1,
        };
        out.push(add_probe(
            st,
            fpid,
            pid,
            &m.name,
            "-",
            &name_pat,
            vec![site],
        ));
        return Ok(out);
    }

    for m in modules.iter().filter(|m| m.matches(&module_pat)) {
        let img = m.image.clone();
        let mut chosen: Vec<(usize, String)> = Vec::new();
        if !is_glob(&func_pat) {
            match img.function(&func_pat) {
                Some(f) => {
                    let i = img
                        .functions
                        .iter()
                        .position(|g| g.addr == f.addr && g.size == f.size);
                    if let Some(i) = i {
                        chosen.push((i, func_pat.clone()));
                    }
                }
                None if !is_glob(&module_pat) && !quiet_missing => {
                    return Err(ProbeError::new(
                        "D_PROC_FUNC",
                        format!("failed to lookup '{func_pat}' in module '{module_pat}'"),
                    ));
                }
                None => {}
            }
        } else {
            for (i, names) in img.aliases.iter().enumerate() {
                if let Some(n) = names.iter().find(|n| glob_match(&func_pat, n)) {
                    if n == "_init" || n == "_fini" {
                        continue;
                    }
                    chosen.push((i, n.clone()));
                }
            }
        }
        for (i, fname) in chosen {
            let f = img.functions[i].clone();
            let start = f.addr.wrapping_add(m.bias);
            let code = img.bytes(f.addr, f.size);
            let insns = code.map(|c| decode::function(c, start)).unwrap_or_default();
            let first = insns.first().copied();
            let mut matched = false;
            if glob_match(&name_pat, "return") {
                let sites: Vec<ProbeSite> = insns
                    .iter()
                    .filter(|i| i.returns)
                    .map(|i| ProbeSite {
                        addr: start + i.offset,
                        kind: SiteKind::Return { offset: i.offset },
                        emulation: i.emulation,
                        len: i.len,
                    })
                    .collect();
                if !sites.is_empty() {
                    out.push(add_probe(st, fpid, pid, &m.name, &fname, "return", sites));
                }
                matched = true;
            }
            if glob_match(&name_pat, "entry") {
                if let Some(i) = first {
                    let site = ProbeSite {
                        addr: start,
                        kind: SiteKind::Entry,
                        emulation: i.emulation,
                        len: i.len,
                    };
                    out.push(add_probe(
                        st,
                        fpid,
                        pid,
                        &m.name,
                        &fname,
                        "entry",
                        vec![site],
                    ));
                }
                matched = true;
            }
            if fpid {
                continue;
            }
            if !is_glob(&name_pat) && !matched {
                let Ok(off) = u64::from_str_radix(&name_pat, 16) else {
                    return Err(ProbeError::new(
                        "D_PROC_NAME",
                        format!("'{name_pat}' is an invalid probe name"),
                    ));
                };
                if off >= f.size {
                    return Err(ProbeError::new(
                        "D_PROC_OFF",
                        format!("offset 0x{off:x} outside of function '{fname}'"),
                    ));
                }
                let Some(ins) = insns.iter().find(|i| i.offset == off) else {
                    return Err(ProbeError::new(
                        "D_PROC_ALIGN",
                        format!("offset 0x{off:x} is not aligned on an instruction"),
                    ));
                };
                let site = ProbeSite {
                    addr: start + off,
                    kind: SiteKind::Offset,
                    emulation: ins.emulation,
                    len: ins.len,
                };
                out.push(add_probe(
                    st,
                    false,
                    pid,
                    &m.name,
                    &fname,
                    &name_pat,
                    vec![site],
                ));
            } else if is_glob(&name_pat) {
                for ins in &insns {
                    let n = format!("{:x}", ins.offset);
                    if !glob_match(&name_pat, &n) {
                        continue;
                    }
                    let count = st.processes.get(&pid).map_or(0, |p| p.count);
                    if count >= MAX_PROBES {
                        return Err(ProbeError::new(
                            "D_PROC_CREATEFAIL",
                            format!(
                                "failed to create offset probes in '{fname}': Not enough space"
                            ),
                        ));
                    }
                    let site = ProbeSite {
                        addr: start + ins.offset,
                        kind: SiteKind::Offset,
                        emulation: ins.emulation,
                        len: ins.len,
                    };
                    out.push(add_probe(st, false, pid, &m.name, &fname, &n, vec![site]));
                }
            }
        }
    }
    Ok(out)
}

fn add_probe(
    st: &mut PidState,
    fpid: bool,
    pid: u32,
    module: &str,
    function: &str,
    name: &str,
    sites: Vec<ProbeSite>,
) -> ProbeInfo {
    let provider = format!("{}pid{pid}", if fpid { "f" } else { "" });
    let key = (
        provider.clone(),
        module.to_string(),
        function.to_string(),
        name.to_string(),
    );
    if let Some(&i) = st.by_key.get(&key) {
        return st.probes[i].info.clone();
    }
    let info = ProbeInfo {
        id: FIRST_ID + st.probes.len() as u64,
        provider,
        module: module.to_string(),
        function: function.to_string(),
        name: name.to_string(),
        arg_types: Vec::new(),
        arg_native: Vec::new(),
    };
    st.by_key.insert(key, st.probes.len());
    st.probes.push(PidProbe {
        info: info.clone(),
        pid,
        sites,
        managed: false,
    });
    if let Some(p) = st.processes.get_mut(&pid) {
        p.count += 1;
    }
    info
}

impl Provider for PidProvider {
    fn name(&self) -> &str {
        self.prefix()
    }

    fn matches_provider(&self, field: &str) -> bool {
        if matches!(self.pid_in(field), Ok(Some(_)) | Err(_)) {
            return true;
        }
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        is_glob(field)
            && st
                .processes
                .keys()
                .any(|pid| glob_match(field, &format!("{}{pid}", self.prefix())))
    }

    fn matching(&self, desc: &ProbeDesc) -> Vec<ProbeInfo> {
        self.try_create(desc).unwrap_or_default()
    }

    fn try_matching(&self, desc: &ProbeDesc) -> Result<Vec<ProbeInfo>, ProbeError> {
        self.try_create(desc)
    }

    fn why_none(&self, desc: &ProbeDesc) -> Option<String> {
        self.why_none_of(desc)
    }

    fn list(&self) -> Vec<ProbeInfo> {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.probes
            .iter()
            .filter(|p| self.owns(p))
            .map(|p| p.info.clone())
            .collect()
    }
}

/// Names user addresses of the processes a pid run traces, from the pid provider's module
/// lists (read again after a `dlopen`).
pub struct UserSymbols(pub PidProvider);

impl crate::agg::SymbolResolver for UserSymbols {
    fn user(&self, pid: u32, addr: u64) -> String {
        crate::output::stack::frame_text(addr, &self.user_lookup(pid, addr), true)
    }
    fn umod(&self, pid: u32, addr: u64) -> String {
        match self
            .0
            .modules_of(pid)
            .as_ref()
            .and_then(|m| m.module_at(addr))
        {
            Some(m) => m.name.clone(),
            None => match self.0.managed_lookup(pid, addr) {
                crate::output::stack::Lookup::Sym { module, .. } => module,
                _ => format!("0x{addr:x}"),
            },
        }
    }
    fn user_lookup(&self, pid: u32, addr: u64) -> crate::output::stack::Lookup {
        use crate::output::stack::Lookup;
        match self.0.modules_of(pid).map(|m| m.lookup(addr)) {
            Some(Lookup::None) | None => self.0.managed_lookup(pid, addr),
            Some(l) => l,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_names() {
        assert_eq!(provider_pid("pid123").unwrap(), Some(123));
        assert_eq!(provider_pid("profile").unwrap(), None);
        assert_eq!(provider_pid("pidfoo").unwrap(), None);
        let e = provider_pid("pid0").unwrap_err();
        assert_eq!(e.tag, "D_PROC_BADPID");
    }

    /// The test binary itself, as process "1": probes from its own symbols.
    struct SelfReader;
    impl ProcessReader for SelfReader {
        fn maps(&self, _pid: u32) -> Result<(String, String), String> {
            let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| e.to_string())?;
            let exe = std::fs::read_link("/proc/self/exe").map_err(|e| e.to_string())?;
            Ok((maps, exe.to_string_lossy().into_owned()))
        }
    }

    /// A .NET process "7" (CoreCLR mapped) whose perf map is a file the test writes and
    /// whose every method's code is `push rbp; mov rbp, rsp; pop rbp; ret`.
    struct NetReader(std::path::PathBuf);
    impl ProcessReader for NetReader {
        fn maps(&self, _pid: u32) -> Result<(String, String), String> {
            Ok((
                "7f0000000000-7f0000001000 r-xp 00000000 08:01 1 /x/libcoreclr.so\n".into(),
                "/x/dotnet".into(),
            ))
        }
        fn perf_map(&self, _pid: u32) -> Option<std::path::PathBuf> {
            Some(self.0.clone())
        }
        fn read_memory(&self, _pid: u32, _addr: u64, buf: &mut [u8]) -> bool {
            let code = [0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3];
            for (i, b) in buf.iter_mut().enumerate() {
                *b = code.get(i).copied().unwrap_or(0xcc);
            }
            true
        }
    }

    /// A .NET process "9" on Windows (the CLR's events) with the ready-to-run image `app.dll`
    /// (the file at `.0`, whose bytes are `.1`) mapped at 0x7000_0000.
    struct R2rReader(std::path::PathBuf, Vec<u8>);
    impl ProcessReader for R2rReader {
        fn maps(&self, _pid: u32) -> Result<(String, String), String> {
            Ok((
                format!(
                    "70000000-70003000 r-xp 00000000 00:00 0 {}\n\
                     7f00000000-7f00001000 r-xp 00000000 00:00 0 C:\\x\\coreclr.dll\n",
                    self.0.display()
                ),
                "C:\\x\\dotnet.exe".into(),
            ))
        }
        fn read_memory(&self, _pid: u32, addr: u64, buf: &mut [u8]) -> bool {
            // the image's one section: RVA 0x1000 at file offset 0x400
            let Some(rva) = addr.checked_sub(0x7000_0000).filter(|r| *r >= 0x1000) else {
                return false;
            };
            let at = (rva - 0x1000 + 0x400) as usize;
            match self.1.get(at..at + buf.len()) {
                Some(b) => {
                    buf.copy_from_slice(b);
                    true
                }
                None => false,
            }
        }
        fn clr_events(&self) -> bool {
            true
        }
    }

    #[test]
    fn ready_to_run_entry_points_get_return_sites_from_the_image() {
        // two bodies: at RVA 0x2000 (6 bytes) and 0x2010 (8 bytes, two returns)
        let code = [
            0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, //
            0x55, 0x31, 0xc0, 0x5d, 0xc3, 0x90, 0x5d, 0xc3,
        ];
        let img = crate::symbols::r2r::synthetic_image(
            0x8664,
            &[(0x2000, 0x2006), (0x2010, 0x2018)],
            &code,
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.dll");
        std::fs::write(&path, &img).unwrap();
        let p = PidProvider::new(Box::new(R2rReader(path, img)));
        let d = |s: &str| ProbeDesc::parse(s).unwrap();
        // named before its code is bound: unarmed
        let r = p.try_matching(&d("pid9:app:T.M:return")).unwrap();
        assert_eq!(r.len(), 1);
        // R2RGetEntryPoint: an entry point, no size, no assembly
        let entry = ManagedMethod {
            start: 0x7000_2010,
            size: 0,
            module: "?".into(),
            name: "T.M".into(),
            signature: String::new(),
            tier: "ReadyToRun".into(),
        };
        let got = p.managed_methods(9, vec![entry.clone()], &[]);
        assert_eq!(got.len(), 1);
        let (info, sites, _) = &got[0];
        assert_eq!(
            (info.module.as_str(), info.name.as_str()),
            ("app", "return")
        );
        let at: Vec<u64> = sites.iter().map(|s| s.addr).collect();
        assert_eq!(at, [0x7000_2014, 0x7000_2017]);
        // the method is named with its extent in stacks
        match p.managed_lookup(9, 0x7000_2017) {
            crate::output::stack::Lookup::Sym { name, start, .. } => {
                assert_eq!((name.as_str(), start), ("T.M", 0x7000_2010))
            }
            other => panic!("{other:?}"),
        }
        // an entry point no RUNTIME_FUNCTION starts: still no return site
        let inside = ManagedMethod {
            start: 0x7000_2011,
            name: "T.N".into(),
            ..entry
        };
        let r = p.try_matching(&d("pid9:app:T.N:return")).unwrap();
        assert_eq!(r.len(), 1);
        assert!(p.managed_methods(9, vec![inside], &[]).is_empty());
    }

    #[test]
    fn managed_probes_from_the_perf_map() {
        let dir = std::env::temp_dir().join(format!("dtx-pid-net-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let map = dir.join("perf-7.map");
        std::fs::write(
            &map,
            "1000 6 int32 [app] Work::Add(int32,int32)[QuickJitted]\n\
             2000 8 stub<1> AllocateTemporaryEntryPoints<PRECODE_FIXUP>\n",
        )
        .unwrap();
        let p = PidProvider::new(Box::new(NetReader(map.clone())));
        let d = |s: &str| ProbeDesc::parse(s).unwrap();
        let e = p.try_matching(&d("pid7:app:Work.Add:entry")).unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!(
            (e[0].module.as_str(), e[0].function.as_str()),
            ("app", "Work.Add")
        );
        let probe = |id: u64| {
            p.probes_of(7)
                .into_iter()
                .find(|q| q.info.id == id)
                .unwrap()
        };
        assert_eq!(probe(e[0].id).sites.len(), 1);
        assert_eq!(probe(e[0].id).sites[0].addr, 0x1000);
        let r = p.try_matching(&d("pid7:app.dll:Work.Add:return")).unwrap();
        assert_eq!(probe(r[0].id).sites[0].addr, 0x1005);
        // not compiled yet: a probe without sites; a native library's function: none
        let late = p.try_matching(&d("pid7:app:Work.Late:entry")).unwrap();
        assert_eq!(late.len(), 1);
        assert!(probe(late[0].id).sites.is_empty());
        assert!(p
            .try_matching(&d("pid7:libfoo.so:foo.bar:entry"))
            .unwrap()
            .is_empty());
        assert_eq!(p.unarmed_managed(7).len(), 1);
        let err = p.try_matching(&d("pid7:app:Work.Add:4")).unwrap_err();
        assert_eq!(err.tag, "D_PROC_NAME");
        let err = p
            .fpid()
            .try_matching(&d("fpid7:app:Work.Add:entry"))
            .unwrap_err();
        assert!(err.message.contains("with pid"), "{}", err.message);
        // the runtime compiles Late, then a tier-1 Add: both armed, a glob makes a new probe
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&map).unwrap();
        f.write_all(
            b"3000 6 int64 [app] Work::Late(int64)[QuickJitted]\n\
              4000 6 int32 [app] Work::Add(int32,int32)[OptimizedTier1]\n\
              5000 6 void [app] Other::Run()[QuickJitted]\n",
        )
        .unwrap();
        let got = p.managed_code(7, None, &[d("pid7:app:Other.*:entry")]);
        let sites_of = |id: u64| {
            got.iter()
                .find(|(i, _, _)| i.id == id)
                .map(|(_, s, _)| s.iter().map(|s| s.addr).collect::<Vec<_>>())
        };
        assert_eq!(sites_of(late[0].id), Some(vec![0x3000]));
        assert_eq!(sites_of(e[0].id), Some(vec![0x4000]));
        assert_eq!(sites_of(r[0].id), Some(vec![0x4005]));
        let run = got
            .iter()
            .find(|(i, _, _)| i.function == "Other.Run")
            .unwrap();
        assert_eq!(run.2.len(), 1, "made by the glob");
        assert!(p.unarmed_managed(7).is_empty());
        // the same lines again (seen at `write`, then in the file): nothing new
        assert!(p
            .managed_code(
                7,
                Some("3000 6 int64 [app] Work::Late(int64)[QuickJitted]\n"),
                &[]
            )
            .is_empty());
        // stacks: a method and a stub
        let names = UserSymbols(p.clone());
        use crate::agg::SymbolResolver;
        assert_eq!(names.user(7, 0x4002), "app`Work.Add+0x2");
        assert_eq!(names.umod(7, 0x2004), "[stub]");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn cli_header_tells_assemblies_from_native_images() {
        // a PE32+ header with 16 data directories; directory 14 set or not
        let image = |cli: u32| {
            let mut b = vec![0u8; 512];
            b[0..2].copy_from_slice(b"MZ");
            b[0x3c..0x40].copy_from_slice(&0x80u32.to_le_bytes());
            b[0x80..0x84].copy_from_slice(b"PE\0\0");
            let opt = 0x80 + 24;
            b[opt..opt + 2].copy_from_slice(&0x20bu16.to_le_bytes());
            b[opt + 108..opt + 112].copy_from_slice(&16u32.to_le_bytes());
            let dir = opt + 112 + 14 * 8;
            b[dir..dir + 4].copy_from_slice(&cli.to_le_bytes());
            b
        };
        assert!(cli_header_in(&image(0x2008)));
        assert!(!cli_header_in(&image(0)));
        assert!(!cli_header_in(&image(0x2008)[..0x90]));
        assert!(!cli_header_in(b"\x7fELF"));
        assert!(runtime_mapped("1-2 r-xp 0 00:00 0 C:\\x\\CoreCLR.dll\n"));
        assert!(!runtime_mapped("1-2 r-xp 0 00:00 0 C:\\x\\notclr.dll\n"));
        assert!(looks_dotnet_windows(
            "",
            "C:\\Program Files\\dotnet\\dotnet.exe"
        ));
        assert!(!looks_dotnet_windows("", "C:\\x\\app.exe"));
        assert_eq!(assembly_name("App.DLL"), "App");
    }

    #[test]
    fn creates_probes_from_own_symbols() {
        if !cfg!(target_os = "linux") {
            return;
        }
        let p = PidProvider::new(Box::new(SelfReader));
        let d = |s: &str| ProbeDesc::parse(s).unwrap();
        let e = p.try_matching(&d("pid1:a.out:main:entry")).unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].name, "entry");
        assert_eq!(e[0].provider, "pid1");
        // the same description finds the same probe
        assert_eq!(
            p.try_matching(&d("pid1:a.out:main:entry")).unwrap()[0].id,
            e[0].id
        );
        let r = p.try_matching(&d("pid1:a.out:main:return")).unwrap();
        assert_eq!(r.len(), 1);
        let err = p
            .try_matching(&d("pid1:a.out:no_such_function_x:entry"))
            .unwrap_err();
        assert_eq!(err.tag, "D_PROC_FUNC");
        let err = p.try_matching(&d("pid1:a.out:main:beginning")).unwrap_err();
        assert_eq!(err.tag, "D_PROC_NAME");
        let err = p.try_matching(&d("pid1:a.out:main:fffffff")).unwrap_err();
        assert_eq!(err.tag, "D_PROC_OFF");
        let all = p.try_matching(&d("pid1:a.out:main:")).unwrap();
        assert!(all.len() > 3, "entry, return and offsets: {}", all.len());
        let err = p.try_matching(&d("pid1:libc:-:800")).unwrap_err();
        assert_eq!(err.tag, "D_PROC_LIB");
        let err = p.try_matching(&d("pid1::-:10*")).unwrap_err();
        assert_eq!(err.tag, "D_PROC_NAME");
    }
}
