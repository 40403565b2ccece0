//! The `dnet` provider: the .NET runtime's ETW events (Microsoft-Windows-DotNETRuntime and its
//! rundown provider) as probes by group, with the Windows DTrace port's probe names:
//! `dnet::gc:gc-start`, `dnet::jit:method-load`, `dnet::event:excp`, ...
//!
//! Arguments, as in the port: `arg0` = pointer to the payload (the 4-byte header of the ETW
//! provider probes precedes it), `arg1` = payload size, `arg2` = 0/1 for a 32/64-bit event,
//! `arg3` = event version; `args[0]` is the port's typed view of the event (`netgc_t *`,
//! `netexcp_t *`, ... [`arg0_xlate`], translators in `dscripts/lib/dnet.d`). dtx adds the decoded fields each probe's table row names as
//! `arg4..arg9` (for `gc-start`: count, depth, reason, type), and every field by name through
//! `etwfield("Name")` / `etwfield_str("Name")`.
//!
//! The fields come from the EventMetadata a trace carries, else from the runtime's manifest that
//! dtx ships ([`MANIFEST`], `assets/manifests/dotnet-runtime.man`).

use super::super::Provider;
use super::{EtwFirings, PAYLOAD_BASE};
use crate::etw::decode::DecodedEvent;
use crate::etw::record::{EventRecord, Guid, HeaderKind};
use crate::probes::{ProbeDesc, ProbeInfo};

/// Microsoft-Windows-DotNETRuntime {e13c0d23-ccbc-4e12-931b-d9cc2eee27e4}.
pub const RUNTIME: Guid = Guid {
    data1: 0xe13c0d23,
    data2: 0xccbc,
    data3: 0x4e12,
    data4: [0x93, 0x1b, 0xd9, 0xcc, 0x2e, 0xee, 0x27, 0xe4],
};

/// Microsoft-Windows-DotNETRuntimeRundown {a669021c-c450-4609-a035-5af59af4df18}.
pub const RUNDOWN: Guid = Guid {
    data1: 0xa669021c,
    data2: 0xc450,
    data3: 0x4609,
    data4: [0xa0, 0x35, 0x5a, 0xf5, 0x9a, 0xf4, 0xdf, 0x18],
};

/// The part of the runtime's instrumentation manifest dtx needs (written here from the public
/// event documentation); the decoder loads it so traces without EventMetadata decode too.
pub const MANIFEST: &str = include_str!("../../../assets/manifests/dotnet-runtime.man");

/// The ClrStackWalk event (runtime id 82): the managed stack of the event before it on the
/// same thread.
pub const CLR_STACK_WALK: u16 = 82;

/// One probe: `dnet::<function>:<name>`, fired by one event of one provider.
pub struct DnetProbe {
    pub function: &'static str,
    pub name: &'static str,
    pub rundown: bool,
    pub event: u16,
    /// Decoded fields given as `arg4..`.
    pub fields: &'static [&'static str],
}

const fn p(
    function: &'static str,
    name: &'static str,
    event: u16,
    fields: &'static [&'static str],
) -> DnetProbe {
    DnetProbe {
        function,
        name,
        rundown: false,
        event,
        fields,
    }
}

const fn r(name: &'static str, event: u16, fields: &'static [&'static str]) -> DnetProbe {
    DnetProbe {
        function: "rundown",
        name,
        rundown: true,
        event,
        fields,
    }
}

const METHOD: &[&str] = &[
    "MethodStartAddress",
    "MethodSize",
    "MethodID",
    "MethodToken",
];
const MODULE: &[&str] = &["ModuleID", "AssemblyID", "ModuleFlags"];
const ASSEMBLY: &[&str] = &["AssemblyID", "AppDomainID", "AssemblyFlags"];
const APPDOMAIN: &[&str] = &["AppDomainID", "AppDomainFlags", "AppDomainIndex"];
const CLR_ONLY: &[&str] = &["ClrInstanceID"];

/// The probes, in the port's order (its event ids), then the rundown provider's.
pub const PROBES: &[DnetProbe] = &[
    p(
        "event",
        "runtime",
        187,
        &["ClrInstanceID", "Sku", "StartupFlags"],
    ),
    p(
        "event",
        "excp",
        80,
        &["ExceptionEIP", "ExceptionHRESULT", "ExceptionFlags"],
    ),
    p("lock", "lck-wait", 81, &["ContentionFlags"]),
    p("lock", "lck-done", 91, &["ContentionFlags"]),
    p(
        "thread",
        "thr-start",
        50,
        &["ActiveWorkerThreadCount", "RetiredWorkerThreadCount"],
    ),
    p(
        "thread",
        "thr-stop",
        51,
        &["ActiveWorkerThreadCount", "RetiredWorkerThreadCount"],
    ),
    p(
        "thread",
        "thr-retire",
        52,
        &["ActiveWorkerThreadCount", "RetiredWorkerThreadCount"],
    ),
    p(
        "thread",
        "thr-unretire",
        53,
        &["ActiveWorkerThreadCount", "RetiredWorkerThreadCount"],
    ),
    p(
        "thread",
        "io-start",
        44,
        &["IOThreadCount", "RetiredIOThreads"],
    ),
    p(
        "thread",
        "io-exit",
        45,
        &["IOThreadCount", "RetiredIOThreads"],
    ),
    p(
        "thread",
        "io-retire",
        46,
        &["IOThreadCount", "RetiredIOThreads"],
    ),
    p(
        "thread",
        "io-unretire",
        47,
        &["IOThreadCount", "RetiredIOThreads"],
    ),
    p(
        "thread",
        "adj",
        54,
        &["AverageThroughput", "NewWorkerThreadCount", "Reason"],
    ),
    p(
        "thread",
        "adj-adj",
        55,
        &["AverageThroughput", "NewWorkerThreadCount", "Reason"],
    ),
    p("thread", "adj-stats", 56, &["Duration", "Throughput"]),
    p(
        "jit",
        "method-jit-begin",
        145,
        &["MethodID", "ModuleID", "MethodToken", "MethodILSize"],
    ),
    p("jit", "method-load", 143, METHOD),
    p("jit", "method-unload", 144, METHOD),
    p("jit", "static-method-load", 136, METHOD),
    p("jit", "static-method-unload", 137, METHOD),
    p("jit", "inline-fail", 186, CLR_ONLY),
    p("jit", "inline-success", 185, CLR_ONLY),
    p("jit", "tailcall-fail", 189, CLR_ONLY),
    p("jit", "tailcall-success", 188, CLR_ONLY),
    p(
        "interop",
        "stub-gen",
        88,
        &[
            "ModuleID",
            "StubMethodID",
            "StubFlags",
            "ManagedInteropMethodToken",
        ],
    ),
    p(
        "interop",
        "stub-hit",
        89,
        &["ModuleID", "StubMethodID", "ManagedInteropMethodToken"],
    ),
    p(
        "arm",
        "thr-create",
        85,
        &[
            "ManagedThreadID",
            "AppDomainID",
            "Flags",
            "ManagedThreadIndex",
            "OSThreadID",
        ],
    ),
    p("arm", "mem-allocate", 83, &["AppDomainID", "Allocated"]),
    p(
        "arm",
        "mem-survive",
        84,
        &["AppDomainID", "Survived", "ProcessSurvived"],
    ),
    p("arm", "thr-enter", 87, &["ManagedThreadID", "AppDomainID"]),
    p("arm", "thr-exit", 86, &["ManagedThreadID", "AppDomainID"]),
    p(
        "security",
        "strongname-start",
        181,
        &["VerificationFlags", "ErrorCode"],
    ),
    p(
        "security",
        "strongname-end",
        182,
        &["VerificationFlags", "ErrorCode"],
    ),
    p(
        "security",
        "authcode-start",
        183,
        &["VerificationFlags", "ErrorCode"],
    ),
    // the port's spelling
    p(
        "security",
        "authocode-end",
        184,
        &["VerificationFlags", "ErrorCode"],
    ),
    p("loader", "appdomain-load", 156, APPDOMAIN),
    p("loader", "appdomain-unload", 157, APPDOMAIN),
    p("loader", "assembly-load", 154, ASSEMBLY),
    p("loader", "assembly-unload", 155, ASSEMBLY),
    p("loader", "module-load", 152, MODULE),
    p("loader", "module-unload", 153, MODULE),
    p("loader", "module-range", 158, CLR_ONLY),
    p("gc", "gc-start", 1, &["Count", "Depth", "Reason", "Type"]),
    p("gc", "gc-end", 2, &["Count", "Depth"]),
    p(
        "gc",
        "heapstat",
        4,
        &[
            "GenerationSize0",
            "GenerationSize1",
            "GenerationSize2",
            "GenerationSize3",
            "TotalPromotedSize0",
            "TotalPromotedSize1",
        ],
    ),
    p("gc", "seg-create", 5, &["Address", "Size", "Type"]),
    p("gc", "seg-free", 6, &["Address"]),
    p("gc", "resume-begin", 7, CLR_ONLY),
    p("gc", "resume-end", 3, CLR_ONLY),
    p("gc", "suspend-start", 9, &["Reason", "Count"]),
    p("gc", "suspend-end", 8, CLR_ONLY),
    p(
        "gc",
        "allocate-tick",
        10,
        &[
            "AllocationAmount",
            "AllocationKind",
            "AllocationAmount64",
            "TypeID",
            "HeapIndex",
            "Address",
        ],
    ),
    p("gc", "finalizer-begin", 14, CLR_ONLY),
    p("gc", "finalizer-end", 13, &["Count"]),
    p("gc", "conc-thr-create", 11, CLR_ONLY),
    p("gc", "conc-thr-exit", 12, CLR_ONLY),
    r("method-dcstart", 143, METHOD),
    r("method-dcend", 144, METHOD),
    r("module-dcstart", 153, MODULE),
    r("module-dcend", 154, MODULE),
    r("assembly-dcstart", 155, ASSEMBLY),
    r("assembly-dcend", 156, ASSEMBLY),
    r("appdomain-dcstart", 157, APPDOMAIN),
    r("appdomain-dcend", 158, APPDOMAIN),
    r("runtime", 187, &["ClrInstanceID", "Sku", "StartupFlags"]),
];

/// Keywords of the runtime provider (Microsoft-Windows-DotNETRuntime, its manifest's
/// `<keyword>` masks).
pub mod keyword {
    pub const GC: u64 = 0x1;
    pub const LOADER: u64 = 0x8;
    pub const JIT: u64 = 0x10;
    /// Method events of precompiled (NGen/ReadyToRun) code.
    pub const NGEN: u64 = 0x20;
    pub const SECURITY: u64 = 0x400;
    pub const APPDOMAIN_RESOURCE_MANAGEMENT: u64 = 0x800;
    pub const JIT_TRACING: u64 = 0x1000;
    pub const INTEROP: u64 = 0x2000;
    pub const CONTENTION: u64 = 0x4000;
    pub const EXCEPTION: u64 = 0x8000;
    pub const THREADING: u64 = 0x10000;
    /// Forces a full blocking collection in every process that sees it.
    pub const GC_HEAP_DUMP: u64 = 0x10_0000;
    pub const GC_SAMPLED_ALLOCATION_HIGH: u64 = 0x20_0000;
    /// Triggers a garbage collection on demand.
    pub const GC_HEAP_COLLECT: u64 = 0x80_0000;
    pub const GC_SAMPLED_ALLOCATION_LOW: u64 = 0x200_0000;
    /// ClrStackWalk events after each event: the managed stacks.
    pub const STACK: u64 = 0x4000_0000;
    /// The bits that change what the runtime does (heap dumps, forced collections, sampled
    /// allocations): never enabled unless a probe names them.
    pub const INTRUSIVE: u64 =
        GC_HEAP_DUMP | GC_SAMPLED_ALLOCATION_HIGH | GC_HEAP_COLLECT | GC_SAMPLED_ALLOCATION_LOW;

    /// Keywords of the rundown provider (Microsoft-Windows-DotNETRuntimeRundown).
    pub mod rundown {
        pub const LOADER: u64 = 0x8;
        pub const JIT: u64 = 0x10;
        pub const NGEN: u64 = 0x20;
        /// DCStart events when the provider is enabled (the methods already compiled).
        pub const START: u64 = 0x40;
        /// DCEnd events when the provider is disabled.
        pub const END: u64 = 0x100;
    }
}

/// The runtime (or rundown) provider keywords that make a probe's event fire: its group's
/// keyword, as the runtime's manifest assigns them (GC events under GCKeyword, method loads
/// under JitKeyword, ...). Never one of [`keyword::INTRUSIVE`].
pub fn keywords_of(d: &DnetProbe) -> u64 {
    use keyword as k;
    if d.rundown {
        let start_or_end = if d.name.ends_with("-dcend") {
            k::rundown::END
        } else {
            k::rundown::START
        };
        let kind = match d.name {
            n if n.starts_with("method") => k::rundown::JIT,
            _ => k::rundown::LOADER,
        };
        return start_or_end | kind;
    }
    match (d.function, d.name) {
        ("event", "excp") => k::EXCEPTION,
        // RuntimeInformation is logged when the provider is enabled, under any keyword
        ("event", _) => k::LOADER,
        ("lock", _) => k::CONTENTION,
        ("thread", _) => k::THREADING,
        ("jit", n) if n.contains("inline") || n.contains("tailcall") => k::JIT_TRACING,
        ("jit", _) => k::JIT,
        ("interop", _) => k::INTEROP,
        ("arm", _) => k::APPDOMAIN_RESOURCE_MANAGEMENT,
        ("security", _) => k::SECURITY,
        ("loader", _) => k::LOADER,
        ("gc", _) => k::GC,
        _ => k::LOADER,
    }
}

/// The probe of a `dnet` probe id.
pub fn probe_of(id: u64) -> Option<&'static DnetProbe> {
    id.checked_sub(FIRST_ID)
        .and_then(|i| PROBES.get(i as usize))
}

/// Probe ids of `dnet` (after the kernel providers', before the named providers').
pub const FIRST_ID: u64 = 150_000;

/// The type `args[0]` has for a probe (translated from the payload pointer by
/// `dscripts/lib/dnet.d`): the port's types, and dtx's `netmethod_t` for the method probes.
pub fn arg0_xlate(d: &DnetProbe) -> Option<&'static str> {
    Some(match (d.function, d.name) {
        ("event" | "rundown", "runtime") => "netrt_t *",
        ("event", "excp") => "netexcp_t *",
        ("lock", _) => "netlck_t *",
        ("thread", name) if !name.starts_with("adj") => "netthrinfo_t *",
        ("jit", name) if name.starts_with("method") || name.starts_with("static") => {
            "netmethod_t *"
        }
        ("rundown", "method-dcstart" | "method-dcend") => "netmethod_t *",
        ("interop", _) => "netirop_t *",
        ("arm", "thr-create") => "netthr_t *",
        ("loader", "appdomain-load" | "appdomain-unload")
        | ("rundown", "appdomain-dcstart" | "appdomain-dcend") => "netappdom_t *",
        ("loader", "assembly-load" | "assembly-unload")
        | ("rundown", "assembly-dcstart" | "assembly-dcend") => "netassm_t *",
        ("loader", "module-load" | "module-unload")
        | ("rundown", "module-dcstart" | "module-dcend") => "netmodule_t *",
        ("gc", "gc-start" | "gc-end" | "suspend-start" | "finalizer-end") => "netgc_t *",
        ("gc", "seg-create" | "seg-free") => "netgcseg_t *",
        ("gc", "heapstat") => "netgcheapstat_t *",
        ("gc", "allocate-tick") => "netgcalloctick_t *",
        _ => return None,
    })
}

/// The catalog's view of one probe.
fn info(i: usize, d: &DnetProbe) -> ProbeInfo {
    let mut arg_types = vec![
        "char *".to_string(),
        "uint32_t".to_string(),
        "int".to_string(),
        "int".to_string(),
    ];
    arg_types.extend(d.fields.iter().map(|_| "uint64_t".to_string()));
    let mut arg_native = Vec::new();
    if let Some(xlate) = arg0_xlate(d) {
        arg_native = vec![String::new(); arg_types.len()];
        arg_native[0] = std::mem::replace(&mut arg_types[0], xlate.to_string());
    }
    ProbeInfo {
        id: FIRST_ID + i as u64,
        provider: "dnet".to_string(),
        module: String::new(),
        function: d.function.to_string(),
        name: d.name.to_string(),
        arg_native,
        arg_types,
    }
}

/// The `dnet` provider for the probe catalog.
pub struct DnetProvider;

impl Provider for DnetProvider {
    fn name(&self) -> &str {
        "dnet"
    }

    fn matching(&self, desc: &ProbeDesc) -> Vec<ProbeInfo> {
        self.list()
            .into_iter()
            .filter(|p| super::super::fields_match(desc, &p.module, &p.function, &p.name))
            .collect()
    }

    fn list(&self) -> Vec<ProbeInfo> {
        PROBES.iter().enumerate().map(|(i, d)| info(i, d)).collect()
    }
}

/// Whether a program enabled any `dnet` probe (the runtime's events must then be decoded).
pub fn any_enabled(enabled: &dyn Fn(u64) -> bool) -> bool {
    (0..PROBES.len()).any(|i| enabled(FIRST_ID + i as u64))
}

/// Whether a record comes from one of the .NET runtime's providers.
pub fn is_dotnet(ev: &EventRecord<'_>) -> bool {
    ev.kind == HeaderKind::EventHeader && (ev.provider == RUNTIME || ev.provider == RUNDOWN)
}

/// The `dnet` probes one event fires (at most one: a probe per event id and provider).
pub fn firings(
    ev: &EventRecord<'_>,
    dec: &DecodedEvent<'_>,
    pid: u32,
    tid: u32,
    enabled: &dyn Fn(u64) -> bool,
    out: &mut EtwFirings,
) {
    if !is_dotnet(ev) {
        return;
    }
    let rundown = ev.provider == RUNDOWN;
    for (i, d) in PROBES.iter().enumerate() {
        if d.event != ev.id || d.rundown != rundown {
            continue;
        }
        let id = FIRST_ID + i as u64;
        if !enabled(id) {
            continue;
        }
        let mut args = [0u64; 10];
        args[0] = PAYLOAD_BASE;
        args[1] = ev.payload.len() as u64;
        args[2] = (ev.pointer_size == 8) as u64;
        args[3] = ev.version as u64;
        for (slot, field) in args[4..].iter_mut().zip(d.fields) {
            *slot = dec.u64(field).unwrap_or(0);
        }
        out.push(id, args, pid, tid);
    }
}

/// A method the runtime compiled or loaded, with its code range: what names the frames of
/// JIT-compiled code in stacks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedMethod {
    pub pid: u32,
    pub start: u64,
    pub size: u64,
    /// `Namespace.Name`.
    pub name: String,
}

/// The method a MethodLoadVerbose/MethodUnloadVerbose (or rundown MethodDC*Verbose) event
/// describes, if `ev` is one.
pub fn managed_method(ev: &EventRecord<'_>, dec: &DecodedEvent<'_>) -> Option<ManagedMethod> {
    if !is_dotnet(ev) || !matches!(ev.id, 143 | 144) {
        return None;
    }
    let start = dec.u64("MethodStartAddress")?;
    let size = dec.u64("MethodSize")?;
    let name = match (dec.str("MethodNamespace"), dec.str("MethodName")) {
        (Some(ns), Some(n)) if !ns.is_empty() => format!("{ns}.{n}"),
        (_, Some(n)) => n.to_string(),
        _ => return None,
    };
    (size > 0).then_some(ManagedMethod {
        pid: ev.pid,
        start,
        size,
        name,
    })
}

/// The runtime's R2RGetEntryPoint event (id 159, CompilationDiagnosticKeyword): a
/// ready-to-run method's precompiled code bound as its entry point, fired as the method is
/// first prepared (fields MethodID, MethodNamespace, MethodName, MethodSignature, EntryPoint,
/// ClrInstanceID: Microsoft Learn's ".NET runtime method events"; PerfView TraceEvent's
/// `R2RGetEntryPointTraceData`). It gives no size and no module.
pub const R2R_GET_ENTRY_POINT: u16 = 159;

/// The runtime provider's CompilationDiagnosticKeyword (R2RGetEntryPoint), dotnet/runtime's
/// ClrEtwAll.man.
pub const COMPILATION_DIAGNOSTIC_KEYWORD: u64 = 0x20_0000_0000;

/// The runtime provider's keywords of the method and module events a live method table needs:
/// Loader (0x8: ModuleLoad), Jit (0x10: MethodLoadVerbose of JIT-compiled code), NGen (0x20:
/// the same for precompiled code) and CompilationDiagnostic (R2RGetEntryPoint), at the
/// verbose level (the *Verbose events carry the names) — Microsoft Learn's "CLR ETW Keywords
/// and Levels" and ".NET runtime method events".
pub const RUNTIME_METHOD_KEYWORDS: u64 = 0x8 | 0x10 | 0x20 | COMPILATION_DIAGNOSTIC_KEYWORD;

/// The rundown provider's DCStartComplete (145) and DCEndComplete (146): the last event of a
/// start or end rundown, after every MethodDC*Verbose and ModuleDC* it wrote (dotnet/runtime's
/// ClrEtwAll.man, task CLRMethodRundown; eventtrace.cpp's `ETW::EnumerationLog::StartRundown`
/// and `EndRundown` fire it once the enumeration is done; PerfView TraceEvent's
/// `DCStartCompleteV2`/`DCEndCompleteV2`).
pub const DC_START_COMPLETE: u16 = 145;
/// See [`DC_START_COMPLETE`].
pub const DC_END_COMPLETE: u16 = 146;

/// Whether a record is the end of a rundown of the runtime (either kind).
pub fn is_rundown_complete(ev: &EventRecord<'_>) -> bool {
    is_dotnet(ev) && ev.provider == RUNDOWN && matches!(ev.id, DC_START_COMPLETE | DC_END_COMPLETE)
}

/// The rundown provider's keywords for the code already there when a session starts: Loader
/// (0x8), Jit (0x10), NGen (0x20) and StartRundown (0x40: MethodDCStartVerbose and
/// ModuleDCStart as the provider is enabled) — the same documents.
pub const RUNDOWN_START_KEYWORDS: u64 = 0x8 | 0x10 | 0x20 | 0x40;

/// The method tables of the .NET processes of a trace (or a live session), fed by the CLR's
/// method and module events: MethodLoadVerbose (JIT-compiled code) and the rundown's
/// MethodDCStartVerbose/MethodDCEndVerbose (code there before the session: JIT-compiled and
/// ready-to-run), R2RGetEntryPoint (ready-to-run code as it is bound; no size, assembly `?`),
/// named by assembly from ModuleLoad and the rundown's ModuleDCStart/End
/// (`ModuleILPath`'s file name less its extension). The same
/// [`crate::symbols::managed::ManagedMethods`] the Linux perf map fills, so `pid` probes and
/// stacks name managed code alike on both systems.
#[derive(Debug, Default)]
pub struct ClrMethodFeed {
    /// (pid, ModuleID) → assembly.
    modules: std::collections::HashMap<(u32, u64), String>,
    /// (pid, ModuleID, code version): a method's module may come after it (the rundown lists
    /// methods before their modules).
    methods: Vec<(u32, u64, crate::symbols::managed::ManagedMethod)>,
    /// `methods[..taken]` were looked at by [`ClrMethodFeed::take_ready`].
    taken: usize,
    /// Indexes into `methods` that `take_ready` held back: their module was not named yet.
    waiting: Vec<usize>,
}

impl ClrMethodFeed {
    /// Takes what a record says of methods and modules (nothing for other records).
    pub fn observe(&mut self, ev: &EventRecord<'_>, dec: &DecodedEvent<'_>) {
        if !is_dotnet(ev) {
            return;
        }
        let rundown = ev.provider == RUNDOWN;
        match ev.id {
            // MethodLoadVerbose; the rundown's MethodDCStartVerbose and MethodDCEndVerbose
            143 | 144 if rundown || ev.id == 143 => {
                let (Some(start), Some(size)) =
                    (dec.u64("MethodStartAddress"), dec.u64("MethodSize"))
                else {
                    return;
                };
                let name = match (dec.str("MethodNamespace"), dec.str("MethodName")) {
                    (Some(ns), Some(n)) if !ns.is_empty() => format!("{ns}.{n}"),
                    (_, Some(n)) => n.to_string(),
                    _ => return,
                };
                if size == 0 {
                    return;
                }
                let module_id = dec.u64("ModuleID").unwrap_or(0);
                self.methods.push((
                    ev.pid,
                    module_id,
                    crate::symbols::managed::ManagedMethod {
                        start,
                        size,
                        module: String::new(),
                        name,
                        signature: dec.str("MethodSignature").unwrap_or_default().to_string(),
                        tier: String::new(),
                    },
                ));
            }
            R2R_GET_ENTRY_POINT if !rundown => {
                if let Some((name, signature, entry)) = r2r_entry_point(ev.payload) {
                    if entry != 0 {
                        self.methods.push((
                            ev.pid,
                            0,
                            crate::symbols::managed::ManagedMethod {
                                start: entry,
                                size: 0,
                                module: String::new(),
                                name,
                                signature,
                                tier: "ReadyToRun".to_string(),
                            },
                        ));
                    }
                }
            }
            // ModuleLoad; the rundown's ModuleDCStart and ModuleDCEnd
            152 if !rundown => self.module(ev, dec),
            153 | 154 if rundown => self.module(ev, dec),
            _ => {}
        }
    }

    fn module(&mut self, ev: &EventRecord<'_>, dec: &DecodedEvent<'_>) {
        let (Some(id), Some(path)) = (dec.u64("ModuleID"), dec.str("ModuleILPath")) else {
            return;
        };
        let path: &str = &path;
        let file = path.rsplit(['\\', '/']).next().unwrap_or(path);
        let lower = file.to_ascii_lowercase();
        let name = if lower.ends_with(".dll") || lower.ends_with(".exe") {
            &file[..file.len() - 4]
        } else {
            file
        };
        self.modules.insert((ev.pid, id), name.to_string());
    }

    /// The methods observed since the last call whose assembly is known (a JIT helper's, of
    /// module 0, and a ready-to-run entry point's are `?`), as (pid, method); those whose
    /// module event has not come yet wait for it (the rundown gives methods before their
    /// module). With `all`, those waiting come too, as `?` (at the end of a run).
    pub fn take_ready(&mut self, all: bool) -> Vec<(u32, crate::symbols::managed::ManagedMethod)> {
        let mut out = Vec::new();
        let fresh = self.taken..self.methods.len();
        self.taken = self.methods.len();
        let candidates: Vec<usize> = std::mem::take(&mut self.waiting)
            .into_iter()
            .chain(fresh)
            .collect();
        for i in candidates {
            let Some((pid, module_id, m)) = self.methods.get(i) else {
                continue;
            };
            let module = if *module_id == 0 {
                Some("?".to_string())
            } else {
                self.modules.get(&(*pid, *module_id)).cloned()
            };
            match module {
                Some(module) => out.push((
                    *pid,
                    crate::symbols::managed::ManagedMethod {
                        module,
                        ..m.clone()
                    },
                )),
                None if all => out.push((
                    *pid,
                    crate::symbols::managed::ManagedMethod {
                        module: "?".to_string(),
                        ..m.clone()
                    },
                )),
                None => self.waiting.push(i),
            }
        }
        out
    }

    /// Each process's methods, by address, named by assembly (`?` for a module no event
    /// named).
    pub fn tables(
        &self,
    ) -> std::collections::HashMap<u32, crate::symbols::managed::ManagedMethods> {
        let mut out: std::collections::HashMap<u32, crate::symbols::managed::ManagedMethods> =
            std::collections::HashMap::new();
        for (pid, module_id, m) in &self.methods {
            let mut m = m.clone();
            m.module = self
                .modules
                .get(&(*pid, *module_id))
                .cloned()
                .unwrap_or_else(|| "?".to_string());
            out.entry(*pid).or_default().insert(m);
        }
        out
    }
}

/// The (`Namespace.Type.Method`, signature, EntryPoint) of an R2RGetEntryPoint payload:
/// MethodID (u64), three NUL-terminated UTF-16 strings, EntryPoint (u64), ClrInstanceID (u16).
pub fn r2r_entry_point(payload: &[u8]) -> Option<(String, String, u64)> {
    let mut at = 8usize;
    let mut text = || -> Option<String> {
        let rest = payload.get(at..)?;
        let units: Vec<u16> = rest
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .take_while(|&u| u != 0)
            .collect();
        at += units.len() * 2 + 2;
        (at <= payload.len()).then(|| String::from_utf16_lossy(&units))
    };
    let ns = text()?;
    let name = text()?;
    let signature = text()?;
    let entry = u64::from_le_bytes(payload.get(at..at + 8)?.try_into().ok()?);
    let full = if ns.is_empty() {
        name
    } else {
        format!("{ns}.{name}")
    };
    Some((full, signature, entry))
}

/// Whether a record is the runtime's ClrStackWalk event.
pub fn is_clr_stack(ev: &EventRecord<'_>) -> bool {
    ev.kind == HeaderKind::EventHeader && ev.provider == RUNTIME && ev.id == CLR_STACK_WALK
}

/// The header of a ClrStackWalk event: ClrInstanceID (u16), two reserved bytes, the frame
/// count (u32).
pub fn clr_stack_header(ev: &EventRecord<'_>) -> Option<(u16, u32)> {
    if !is_clr_stack(ev) {
        return None;
    }
    let b = ev.payload;
    Some((
        u16::from_le_bytes(b.get(0..2)?.try_into().ok()?),
        u32::from_le_bytes(b.get(4..8)?.try_into().ok()?),
    ))
}

/// The frames of a ClrStackWalk event (its header, then the frames, pointer-sized), innermost
/// first.
pub fn clr_stack(ev: &EventRecord<'_>) -> Option<Vec<u64>> {
    let (_, count) = clr_stack_header(ev)?;
    let count = count as usize;
    let b = ev.payload;
    let step = if ev.pointer_size == 4 { 4 } else { 8 };
    let frames = b.get(8..)?;
    Some(
        frames
            .chunks_exact(step)
            .take(count)
            .map(|c| {
                let mut a = [0u8; 8];
                a[..step].copy_from_slice(c);
                u64::from_le_bytes(a)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_have_unique_names_and_match_by_group() {
        let mut seen = std::collections::HashSet::new();
        for d in PROBES {
            assert!(
                seen.insert((d.function, d.name)),
                "{}:{}",
                d.function,
                d.name
            );
            assert!(d.fields.len() <= 6, "{}", d.name);
        }
        let gc = DnetProvider.matching(&ProbeDesc::parse("dnet::gc:").unwrap());
        assert!(gc.iter().any(|p| p.name == "gc-start"));
        assert!(gc.iter().all(|p| p.function == "gc"));
        let one = DnetProvider.matching(&ProbeDesc::parse("dnet::jit:method-load").unwrap());
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].arg_types.len(), 8);
    }

    #[test]
    fn r2r_entry_points_and_methods_before_their_module() {
        let mut payload = 0x1234u64.to_le_bytes().to_vec();
        for s in ["Sys.Text", "Join", "string(char,string[])"] {
            payload.extend(s.encode_utf16().flat_map(u16::to_le_bytes));
            payload.extend([0, 0]);
        }
        payload.extend(0x7ff0_1000u64.to_le_bytes());
        payload.extend(1u16.to_le_bytes());
        assert_eq!(
            r2r_entry_point(&payload),
            Some((
                "Sys.Text.Join".to_string(),
                "string(char,string[])".to_string(),
                0x7ff0_1000
            ))
        );
        assert_eq!(r2r_entry_point(&payload[..payload.len() - 12]), None);
        // a method whose module is named later waits for it; `all` gives the rest as `?`
        let mut f = ClrMethodFeed::default();
        let m = |start| crate::symbols::managed::ManagedMethod {
            start,
            size: 4,
            module: String::new(),
            name: "T.M".into(),
            signature: String::new(),
            tier: String::new(),
        };
        f.methods.push((1, 0xa, m(0x10)));
        f.methods.push((1, 0, m(0x20)));
        f.methods.push((1, 0xb, m(0x30)));
        let got = f.take_ready(false);
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].1.start, got[0].1.module.as_str()), (0x20, "?"));
        f.modules.insert((1, 0xa), "app".into());
        let got = f.take_ready(false);
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].1.start, got[0].1.module.as_str()), (0x10, "app"));
        let got = f.take_ready(true);
        assert_eq!((got.len(), got[0].1.module.as_str()), (1, "?"));
        assert!(f.take_ready(true).is_empty());
    }

    #[test]
    fn manifest_defines_the_probed_events() {
        let mut d = crate::etw::decode::Decoder::new();
        assert!(d.load_manifest_str(MANIFEST) > 30);
        for (id, v) in [(1u16, 2u8), (2, 1), (10, 4), (143, 1), (145, 1), (80, 1)] {
            let s = d
                .schema(RUNTIME, id, v)
                .unwrap_or_else(|| panic!("{id} v{v}"));
            assert!(!s.top.is_empty());
        }
        let s = d.schema(RUNTIME, 1, 2).unwrap();
        let names: Vec<&str> = s.top.iter().map(|&i| s.props[i].name.as_str()).collect();
        assert_eq!(
            names,
            [
                "Count",
                "Depth",
                "Reason",
                "Type",
                "ClrInstanceID",
                "ClientSequenceNumber"
            ]
        );
        assert!(d.schema(RUNDOWN, 144, 1).is_some());
    }
}
