//! What a live ETW session must enable for the probes a run enabled: the kernel logger's
//! enable flags, the kernel events that need stack walks (those whose clauses record stacks),
//! and the user-mode providers to enable by name or GUID with their keywords and level.
//! Platform-neutral: the Windows layer only turns a [`SessionPlan`] into system calls.

use crate::etw::record::Guid;
use crate::probes::ProbeInfo;
use crate::providers::etw::table::{self, KernelProbe};
use crate::providers::etw::{group, guid_probe, EtwProbes, NamedProbe};
use crate::sources::sink::Sink;

/// `EVENT_TRACE_FLAG_*` of the kernel logger.
pub mod kernel_flag {
    pub const PROCESS: u32 = 0x0000_0001;
    pub const THREAD: u32 = 0x0000_0002;
    pub const IMAGE_LOAD: u32 = 0x0000_0004;
    pub const CSWITCH: u32 = 0x0000_0010;
    pub const DPC: u32 = 0x0000_0020;
    pub const INTERRUPT: u32 = 0x0000_0040;
    pub const SYSTEMCALL: u32 = 0x0000_0080;
    pub const DISK_IO: u32 = 0x0000_0100;
    pub const DISK_FILE_IO: u32 = 0x0000_0200;
    pub const DISK_IO_INIT: u32 = 0x0000_0400;
    pub const DISPATCHER: u32 = 0x0000_0800;
    pub const MEMORY_PAGE_FAULTS: u32 = 0x0000_1000;
    pub const MEMORY_HARD_FAULTS: u32 = 0x0000_2000;
    pub const NETWORK_TCPIP: u32 = 0x0001_0000;
    pub const REGISTRY: u32 = 0x0002_0000;
    pub const DRIVER: u32 = 0x0080_0000;
    pub const PROFILE: u32 = 0x0100_0000;
    pub const FILE_IO: u32 = 0x0200_0000;
    pub const FILE_IO_INIT: u32 = 0x0400_0000;
}

use kernel_flag as k;

/// `EVENT_TRACE_FLAG_VIRTUAL_ALLOC`: VirtualAlloc/VirtualFree (PageFault 98, 99).
pub const VIRTUAL_ALLOC: u32 = 0x0000_4000;

/// The kernel logger flags a probe of the provider table needs (its events, and the records
/// that give them meaning), or why it cannot be traced live. Process and thread records are
/// always on with any kernel probe: execname, pid and the thread's process come from them.
/// The flags are the `EVENT_TRACE_FLAG_*` of Microsoft Learn's EVENT_TRACE_PROPERTIES page,
/// read against the event classes the provider table names (CSwitch is Thread type 36 under
/// CSWITCH, ReadyThread type 50 under DISPATCHER, VirtualAlloc/Free under VIRTUAL_ALLOC, ...).
fn kernel_flags(kp: &KernelProbe) -> Result<u32, String> {
    let flags = match (kp.provider, kp.name) {
        ("sched", "wakeup") => k::DISPATCHER,
        // a thread is queued when readied (ReadyThread) or switched out runnable (CSwitch)
        ("sched", "enqueue") => k::DISPATCHER | k::CSWITCH,
        ("sched", _) => k::CSWITCH,
        ("proc", "module-load" | "module-unload" | "exec-success") => k::IMAGE_LOAD,
        ("proc", _) => 0,
        // DISK_FILE_IO: the FileIo Name records that name the files of disk I/O
        ("io", _) => k::DISK_IO | k::DISK_IO_INIT | k::DISK_FILE_IO,
        ("fsinfo", _) => k::FILE_IO | k::FILE_IO_INIT | k::DISK_FILE_IO,
        ("reg", _) => k::REGISTRY,
        ("pf", "hardflt") => k::MEMORY_HARD_FAULTS | k::DISK_FILE_IO,
        ("pf", "imgload") => k::MEMORY_HARD_FAULTS | k::MEMORY_PAGE_FAULTS,
        ("pf", "valloc" | "vfree") => VIRTUAL_ALLOC,
        ("pf", _) => k::MEMORY_PAGE_FAULTS,
        ("tcpip" | "udpip", _) => k::NETWORK_TCPIP,
        ("profile", _) => k::PROFILE,
        // their records name no thread: the context switches say which thread was on the CPU
        // (`SystemState::cpus`); a return's call is its thread's last entry
        ("dpc", _) => k::DPC | k::CSWITCH,
        ("isr", _) => k::INTERRUPT | k::CSWITCH,
        ("syscall", _) => k::SYSTEMCALL | k::CSWITCH,
        ("diag", "events" | "ignored") => k::IMAGE_LOAD,
        // lost events come from ETW's own loss records; missed stacks need a trace's walk
        ("diag", _) => 0,
        ("hwconfig", _) => {
            return Err(format!(
                "hwconfig:::{} is not available live: the system configuration events are \
                 written into a recorded trace's rundown (xperf, WPR); record one and read it with -E",
                kp.name
            ))
        }
        ("pmc", _) => {
            return Err(format!(
                "pmc:::{} is not available live: dtx does not configure hardware counter \
                 sources for a live session; record a trace with counters (wpr, xperf -pmc) and read it with -E",
                kp.name
            ))
        }
        (p, n) => return Err(format!("{p}:::{n} has no live kernel events")),
    };
    Ok(flags | k::PROCESS | k::THREAD)
}

/// The provider table's entry of a kernel probe (`sample-N` and `profile-N` probes are the
/// sample entry: both fire from SampledProfile records).
fn kernel_probe(p: &ProbeInfo) -> Option<&'static KernelProbe> {
    let name = if p.provider == "profile" && sample_interval(&p.name).is_some() {
        "sample-1ms"
    } else {
        &p.name
    };
    table::position(&p.provider, name).map(|i| &table::KERNEL_PROBES[i])
}

/// The sampling interval a `profile:::sample-N` or `profile-N` probe asks for, in 100 ns
/// units (what `TRACE_PROFILE_INTERVAL.Interval` takes): `sample-1ms`, `sample-250us`,
/// `sample-1000hz`, `profile-997` (1/997 s).
pub fn sample_interval(name: &str) -> Option<u32> {
    let ns = match crate::providers::parse_rate(name) {
        Some((crate::providers::TickKind::Profile, ns)) => ns,
        Some(_) => return None,
        None => crate::providers::parse_sample(name)?,
    };
    u32::try_from((ns / 100).max(1)).ok()
}

/// The interval range Windows accepts for the sampled profile source, in 100 ns units:
/// 0.1221 ms (8192 Hz) to 1 s (Microsoft Learn, TRACE_PROFILE_INTERVAL / xperf -setprofint).
pub const PROFILE_INTERVAL_MIN: u32 = 1221;
pub const PROFILE_INTERVAL_MAX: u32 = 10_000_000;

/// An interval clamped to what Windows accepts.
pub fn clamp_profile_interval(interval: u32) -> u32 {
    interval.clamp(PROFILE_INTERVAL_MIN, PROFILE_INTERVAL_MAX)
}

/// What the user is told about the sampling interval, or None when Windows samples at the
/// interval the probes asked for: `asked` is the probes' interval, `actual` the one Windows
/// reports after dtx set the nearest it accepts (TraceQueryInformation
/// TraceSampledProfileIntervalInfo, all in 100 ns units). The profile interrupt's interval is
/// system-wide, and the hardware's timer may not reach every value: xperf's `-setprofint` and
/// PerfView read it back the same way.
pub fn profile_interval_note(asked: u32, actual: u32) -> Option<String> {
    if asked == actual {
        return None;
    }
    let ms = |i: u32| i as f64 / 10_000.0;
    let why = if clamp_profile_interval(asked) != asked {
        "Windows samples every 0.1221 ms to 1 s"
    } else {
        "the nearest interval Windows accepts"
    };
    Some(format!(
        "profile samples were asked every {:.4} ms ({:.0} Hz); Windows samples every {:.4} ms \
         ({:.0} Hz), {why}",
        ms(asked),
        10_000_000.0 / asked.max(1) as f64,
        ms(actual),
        10_000_000.0 / actual.max(1) as f64,
    ))
}

/// The kernel flags of the high-frequency events (context switches, ready threads, DPCs,
/// interrupts, system calls). When a live run also logs to a file (`-E new.etl`), these go to
/// a session of their own that only writes the file; `-gE` processes them live too.
pub const HIGH_FREQUENCY: u32 = k::CSWITCH | k::DISPATCHER | k::DPC | k::INTERRUPT | k::SYSTEMCALL;

/// The kernel records those flags enable (their stack walks go with them).
fn is_high_frequency(event: (u8, u8)) -> bool {
    use crate::etw::opcode as op;
    matches!(
        event,
        (group::THREAD, op::CSWITCH | op::READY_THREAD)
            | (
                group::PERF_INFO,
                op::SYSCALL_ENTER | op::SYSCALL_EXIT | 66..=69
            )
    )
}

/// The part of a plan that is logged to a file only (see [`SessionPlan::split_logged_only`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoggedOnly {
    /// Enable flags of the file-only kernel session (with process, thread and image records,
    /// so that the file names its processes on its own).
    pub kernel_flags: u32,
    pub stack_events: Vec<(u8, u8)>,
}

/// Providers that are not ETW's: their probes need no session.
const NOT_ETW: &[&str] = &["dtrace", "profile", "tick", "pid", "fpid", "diag"];

/// Whether a provider name is that of one process's user functions: `pidN`, `fpidN`.
pub fn is_process_provider(provider: &str) -> bool {
    let base = provider.trim_end_matches(|c: char| c.is_ascii_digit());
    base.len() < provider.len() && matches!(base, "pid" | "fpid")
}

/// Whether a provider's probes come from somewhere other than ETW: dtx's own, and the process
/// providers.
fn not_etw(provider: &str) -> bool {
    provider.is_empty() || NOT_ETW.contains(&provider) || is_process_provider(provider)
}

/// `TRACE_LEVEL_VERBOSE`: every event of a user provider.
pub const LEVEL_VERBOSE: u8 = 5;

/// The user provider a probe needs enabled: its name, GUID when known, the keywords
/// (MatchAnyKeyword) and level. `<name>:::events` and `:::capturestate` need every keyword,
/// `<name>:::<keyword>` its keyword's mask, `etw:<guid>:0xLL_0xKK:...` level LL and keywords KK
/// (0 meaning any: all levels, all keywords); dnet's probes the .NET runtime's provider with
/// the keyword of the probe's event (or the rundown provider for `dnet::rundown:*`).
///
/// The .NET runtime provider never gets its intrusive keywords (heap dumps, forced
/// collections, sampled allocations: `dnet::keyword::INTRUSIVE`) unless a probe names that
/// keyword: enabling "every keyword" of it would make every .NET process on the machine run
/// full blocking collections (the keyword list of dotnet/runtime's ClrEtwAll.man; PerfView
/// leaves the same bits out of its default .NET keywords).
fn user_need(p: &ProbeInfo, etw: &EtwProbes) -> (String, Option<Guid>, u64, u8) {
    use crate::providers::etw::dnet;
    if p.provider == "dnet" {
        let d = dnet::probe_of(p.id);
        let keywords = d.map_or(dnet::keyword::LOADER, dnet::keywords_of);
        return match d {
            Some(d) if d.rundown => (
                "microsoft-windows-dotnetruntimerundown".to_string(),
                Some(dnet::RUNDOWN),
                keywords,
                LEVEL_VERBOSE,
            ),
            _ => (
                "microsoft-windows-dotnetruntime".to_string(),
                Some(dnet::RUNTIME),
                keywords,
                LEVEL_VERBOSE,
            ),
        };
    }
    if let Some((guid, level, kw)) = guid_probe::enable_of(p) {
        let kw = if kw == 0 { all_keywords(guid) } else { kw };
        let level = if level == 0 { u8::MAX } else { level };
        return (guid.to_string(), Some(guid), kw, level);
    }
    let guid = etw
        .named(&p.provider)
        .and_then(|n| n.guid)
        .or_else(|| Guid::parse(&p.provider));
    let keywords = match etw.named_probe(p.id) {
        Some((_, NamedProbe::Keyword(mask))) => mask,
        _ => guid.map_or(u64::MAX, all_keywords),
    };
    (p.provider.clone(), guid, keywords, LEVEL_VERBOSE)
}

/// "Every keyword" of a provider: all bits, but for the .NET runtime provider all but the
/// intrusive ones.
fn all_keywords(guid: Guid) -> u64 {
    use crate::providers::etw::dnet;
    if guid == dnet::RUNTIME {
        !dnet::keyword::INTRUSIVE
    } else {
        u64::MAX
    }
}

/// How long, at the end of a run, the .NET runtimes are given for their end rundown (the
/// DCEnd events of `dnet::rundown:*-dcend`): records stop being awaited when none of the
/// rundown provider came for [`END_RUNDOWN_QUIET_NS`], or after this, whichever is first.
/// PerfView waits for its rundown file to stop growing, up to its `/RundownTimeout`; a live
/// console has to end promptly, so the bound is shorter, and what did not come by then is
/// said (`EtwLiveSource::finish`).
pub const END_RUNDOWN_MAX_NS: u64 = 5_000_000_000;

/// How long no rundown record may come before the end rundown counts as done: the runtimes
/// log it at once when the keyword comes (eventtrace.cpp), and it reaches the consumer within
/// the sessions' flush period, so a little more than that.
pub const END_RUNDOWN_QUIET_NS: u64 = super::order::reorder_window_ns(super::order::FLUSH_TIMER_S);

/// A user-mode provider to enable in the user session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserProvider {
    /// The name the probes gave (a provider name, or a GUID's text).
    pub name: String,
    /// Known when the name is a GUID; otherwise resolved from the system's provider list.
    pub guid: Option<Guid>,
    /// MatchAnyKeyword (all bits: every event).
    pub keywords: u64,
    pub level: u8,
    /// Whether events of this provider need their stacks (EVENT_ENABLE_PROPERTY_STACK_TRACE).
    pub stacks: bool,
    /// Enabled only so that the run's stacks are walked and named (the .NET providers of
    /// [`SessionPlan::add_managed_code_providers`]), not for a probe of its own: with a target
    /// the target's events are all it needs ([`SessionPlan::pid_filter`]).
    pub for_stacks: bool,
}

/// Everything a live run asks of ETW.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionPlan {
    /// The kernel logger's `EnableFlags` (0: no kernel session).
    pub kernel_flags: u32,
    /// Kernel (group, event type) records to stack-walk, sorted.
    pub stack_events: Vec<(u8, u8)>,
    pub user: Vec<UserProvider>,
    /// The sampled profile interval the `sample-N` probes ask for (100 ns units, the
    /// shortest of them, before clamping to what Windows accepts).
    pub profile_interval: Option<u32>,
    /// Enabled probes that cannot fire live, each with the reason (one line each).
    pub not_live: Vec<String>,
    /// Enabled probes that fire live otherwise than over a trace, each with how (one line
    /// each).
    pub notes: Vec<String>,
    /// The .NET rundown provider to enable when the run ends, before its sessions stop: the
    /// end rundown (`dnet::rundown:*-dcend`). The .NET runtime runs its end rundown as soon as
    /// a session enables the rundown provider with the end-rundown keyword (dotnet/runtime
    /// `eventtrace.cpp`: the rundown provider's enable callback calls
    /// `ETW::EnumerationLog::EndRundown` when `CLR_RUNDOWNEND_KEYWORD` is on), so enabling
    /// it with the others at the start would fire the DCEnd probes at the start. A PerfView
    /// trace has them at its end: PerfView's `DoClrRundownForSession` (CommandProcessor.cs),
    /// when collection stops, enables the rundown provider with its default rundown keywords
    /// (the end rundown's among them) in a session of its own and waits until the rundown
    /// stops coming. Live, the provider is enabled again in the run's user session with these
    /// keywords (without the start rundown's: that would run the start rundown again).
    pub end_rundown: Option<UserProvider>,
    /// The run's target process (`-p`, `-c`): what the providers enabled for stacks only are
    /// enabled for ([`SessionPlan::pid_filter`]).
    pub target: Option<u32>,
}

impl SessionPlan {
    /// The plan for the probes `probes`; `wants_stack(p)` says whether a clause that `p`
    /// fires records stacks. A kernel probe's flags come from [`kernel_flags`] and its stack
    /// walks are the events of its entry in the provider table (the events that fire it).
    pub fn for_probes<'a>(
        probes: impl IntoIterator<Item = &'a ProbeInfo>,
        wants_stack: &dyn Fn(&ProbeInfo) -> bool,
        etw: &EtwProbes,
    ) -> SessionPlan {
        let mut plan = SessionPlan::default();
        let mut any_stack = false;
        for p in probes {
            if let Some(kp) = kernel_probe(p) {
                match kernel_flags(kp) {
                    Ok(flags) => plan.kernel_flags |= flags,
                    Err(why) => {
                        if !plan.not_live.contains(&why) {
                            plan.not_live.push(why);
                        }
                        continue;
                    }
                }
                if kp.provider == "profile" {
                    let n = sample_interval(&p.name).unwrap_or(10_000);
                    plan.profile_interval = Some(plan.profile_interval.map_or(n, |m| m.min(n)));
                }
                if wants_stack(p) && !kp.events.is_empty() {
                    any_stack = true;
                    plan.stack_events.extend_from_slice(kp.events);
                    // stacks print by module: the images must be known
                    plan.kernel_flags |= k::IMAGE_LOAD;
                }
                continue;
            }
            if not_etw(&p.provider) {
                continue;
            }
            let stacks = wants_stack(p);
            any_stack |= stacks;
            let (name, guid, mut keywords, level) = user_need(p, etw);
            let managed_frames = p.provider == "dnet" && stacks;
            if managed_frames {
                // managed frames: the ClrStackWalk events, and the methods that name them
                keywords |= crate::providers::etw::dnet::keyword::STACK
                    | crate::providers::etw::dnet::keyword::JIT
                    | crate::providers::etw::dnet::keyword::LOADER;
            }
            plan.add_user(UserProvider {
                name,
                guid,
                keywords,
                level,
                stacks,
                for_stacks: false,
            });
            if managed_frames {
                // the rundown provider's DCStart events name what was compiled before the
                // session began (StartRundownKeyword, as dotnet/runtime's eventtrace.cpp
                // reads the rundown keywords)
                plan.add_user(UserProvider {
                    name: "microsoft-windows-dotnetruntimerundown".into(),
                    guid: Some(crate::providers::etw::dnet::RUNDOWN),
                    keywords: crate::providers::etw::dnet::keyword::rundown::START
                        | crate::providers::etw::dnet::keyword::rundown::JIT
                        | crate::providers::etw::dnet::keyword::rundown::LOADER,
                    level: LEVEL_VERBOSE,
                    stacks: false,
                    for_stacks: false,
                });
            }
        }
        if any_stack {
            plan.add_managed_code_providers();
        }
        plan.split_end_rundown();
        plan.stack_events.sort_unstable();
        plan.stack_events.dedup();
        plan
    }

    /// What .NET processes need to be walked and named in any stack a clause records: the
    /// runtime provider with its JIT, NGen and Loader keywords at level 5 (verbose), and the
    /// rundown provider's start rundown. On x64 the runtime registers the unwind information
    /// of the code it compiles with the OS only while its provider is enabled with the JIT
    /// keyword at level 5 (dotnet/runtime eventtrace.cpp, EtwCallback); without it a kernel
    /// stack walk of a sample stops at the first managed frame. The method events (JIT, NGen,
    /// Loader; the rundown's DCStart for code compiled before the session began) name the
    /// managed frames. samply's Windows profiler enables the same set for the same reason
    /// (its coreclr provider properties: Loader, JIT, NGen, Stack keywords and the start
    /// rundown); the Stack keyword (ClrStackWalk events) is left to `dnet` probes with stacks,
    /// which is where managed stacks of runtime events are read.
    fn add_managed_code_providers(&mut self) {
        use crate::providers::etw::dnet;
        self.add_user(UserProvider {
            name: "microsoft-windows-dotnetruntime".into(),
            guid: Some(dnet::RUNTIME),
            keywords: dnet::keyword::JIT | dnet::keyword::NGEN | dnet::keyword::LOADER,
            level: LEVEL_VERBOSE,
            stacks: false,
            for_stacks: true,
        });
        self.add_user(UserProvider {
            name: "microsoft-windows-dotnetruntimerundown".into(),
            guid: Some(dnet::RUNDOWN),
            keywords: dnet::keyword::rundown::START
                | dnet::keyword::rundown::JIT
                | dnet::keyword::rundown::NGEN
                | dnet::keyword::rundown::LOADER,
            level: LEVEL_VERBOSE,
            stacks: false,
            for_stacks: true,
        });
    }

    /// Moves the end-rundown keyword of the .NET rundown provider out of the providers the
    /// sessions start with, into [`SessionPlan::end_rundown`]: what is enabled when the run
    /// ends (with the rundown's kinds of events, without the start rundown). The start-time
    /// entry stays only if it still asks for the start rundown.
    fn split_end_rundown(&mut self) {
        use crate::providers::etw::dnet::{keyword::rundown, RUNDOWN};
        let Some(i) = (self.user.iter())
            .position(|u| u.guid == Some(RUNDOWN) && u.keywords & rundown::END != 0)
        else {
            return;
        };
        let at_start = &mut self.user[i];
        let mut end = at_start.clone();
        end.keywords &= !rundown::START;
        end.stacks = false;
        at_start.keywords &= !rundown::END;
        if at_start.keywords & rundown::START == 0 {
            self.user.remove(i);
        }
        self.end_rundown = Some(end);
    }

    /// Adds a user provider, merged with one of the same name or GUID already planned
    /// (keywords OR'ed, the highest level, stacks if either wants them).
    fn add_user(&mut self, n: UserProvider) {
        let same = |u: &UserProvider| u.name == n.name || (n.guid.is_some() && u.guid == n.guid);
        match self.user.iter_mut().find(|u| same(u)) {
            Some(u) => {
                u.stacks |= n.stacks;
                // a probe of its own wants it from every process
                u.for_stacks &= n.for_stacks;
                u.keywords |= n.keywords;
                u.level = u.level.max(n.level);
                u.guid = u.guid.or(n.guid);
            }
            None => self.user.push(n),
        }
    }

    /// Merges the user providers that turned out to be one (a name and a GUID naming the same
    /// provider), once every name has its GUID: one EnableTraceEx2 per provider, with the
    /// keywords of all, instead of the second call overriding the first's keywords.
    pub fn merge_by_guid(&mut self) {
        let user = std::mem::take(&mut self.user);
        for u in user {
            match self
                .user
                .iter_mut()
                .find(|x| x.guid.is_some() && x.guid == u.guid)
            {
                Some(x) => {
                    x.stacks |= u.stacks;
                    x.for_stacks &= u.for_stacks;
                    x.keywords |= u.keywords;
                    x.level = x.level.max(u.level);
                }
                None => self.user.push(u),
            }
        }
    }

    /// The sampled profile interval to set (clamped to what Windows accepts), and whether
    /// clamping changed what the probes asked for.
    pub fn profile_interval_to_set(&self) -> Option<(u32, bool)> {
        self.profile_interval
            .map(|i| (clamp_profile_interval(i), clamp_profile_interval(i) != i))
    }

    /// The plan for what `sink`'s programs enabled: a probe needs stacks when a clause
    /// that names it calls `stack()`/`ustack()` (or keys on a stack).
    pub fn for_engine(sink: &dyn Sink, etw: &EtwProbes) -> SessionPlan {
        let mut stack_clauses = Vec::new();
        for program in sink.programs() {
            for c in &program.clauses {
                let one = crate::ir::Program {
                    clauses: vec![c.clone()],
                    ..(**program).clone()
                };
                if crate::vm::stack_use::uses_stacks(&one) {
                    stack_clauses.extend(c.probes.iter().cloned());
                }
            }
        }
        let wants_stack = |p: &ProbeInfo| {
            stack_clauses.iter().any(|d| {
                crate::probes::glob_match(&d.provider, &p.provider)
                    && crate::providers::fields_match(d, &p.module, &p.function, &p.name)
            })
        };
        let mut probes: Vec<&ProbeInfo> = sink.enabled_probes().collect();
        probes.sort_by_key(|p| p.id);
        SessionPlan::for_probes(probes, &wants_stack, etw)
    }

    /// The plan for a run whose target process is `target` (`-p`, `-c`; None: no target).
    pub fn with_target(mut self, target: Option<u32>) -> SessionPlan {
        self.target = target;
        if let Some(pid) = target.filter(|_| self.user.iter().any(|u| u.for_stacks)) {
            // said, not silent: a clause's stacks of other processes lose their managed names
            self.notes.push(format!(
                "the .NET runtime's method events for stacks are asked of the target (pid \
                 {pid}) only: managed frames in other processes' stacks are not named"
            ));
        }
        self
    }

    /// The process the provider `u` is enabled for, with an EVENT_FILTER_TYPE_PID filter
    /// (Microsoft Learn: EVENT_FILTER_DESCRIPTOR, ENABLE_TRACE_PARAMETERS; Windows 8.1 and
    /// later): the run's target, for a provider enabled only for stacks ([`UserProvider::
    /// for_stacks`]), so that a stack clause with a target does not have every .NET process
    /// on the machine run its method rundown (issue 42, finding 18); None, every process,
    /// without a target or for a provider a probe asks for (its events come from anywhere).
    pub fn pid_filter(&self, u: &UserProvider) -> Option<u32> {
        self.target.filter(|_| u.for_stacks)
    }

    /// Takes the high-frequency kernel events out of the plan, for a session that only logs
    /// them (`-E new.etl` without `-g`): None when the plan has none.
    pub fn split_logged_only(&mut self) -> Option<LoggedOnly> {
        let flags = self.kernel_flags & HIGH_FREQUENCY;
        if flags == 0 {
            return None;
        }
        self.kernel_flags &= !HIGH_FREQUENCY;
        if self.kernel_flags & !(k::PROCESS | k::THREAD | k::IMAGE_LOAD) == 0 {
            // only the bookkeeping the high-frequency probes asked for is left: no session
            self.kernel_flags = 0;
        }
        let (logged, live): (Vec<_>, Vec<_>) = self
            .stack_events
            .iter()
            .partition(|e| is_high_frequency(**e));
        self.stack_events = live;
        Some(LoggedOnly {
            kernel_flags: flags | k::PROCESS | k::THREAD | k::IMAGE_LOAD,
            stack_events: logged,
        })
    }

    /// Whether the kernel logger is needed.
    pub fn needs_kernel(&self) -> bool {
        self.kernel_flags != 0
    }

    /// Whether any session is needed at all. A plan whose only ETW probes are the end
    /// rundown's (`dnet::rundown:*-dcend`) is not empty: the user session must run from the
    /// start, with no provider, so that the end rundown has a session to be enabled in.
    pub fn is_empty(&self) -> bool {
        self.kernel_flags == 0 && !self.needs_user_session()
    }

    /// Whether the user session is needed: a user provider at the start, or the end rundown
    /// (enabled in that session when the run ends, [`SessionPlan::end_rundown`]).
    pub fn needs_user_session(&self) -> bool {
        !self.user.is_empty() || self.end_rundown.is_some()
    }
}

/// The platform-neutral rules of the Windows sessions: their names (one set per dtx process,
/// so that two dtx runs never stop each other's sessions), the words for ETW's error codes,
/// the buffer counts, and the log files each session writes. The Windows layer only calls
/// these; they are tested here on any OS.
pub mod session {
    use std::path::{Path, PathBuf};

    /// What every dtx session name starts with.
    pub const PREFIX: &str = "dtx-";

    /// The process instance that owns a session: its id and, in the names of this dtx, its
    /// start time (the process's creation time, FILETIME's 100 ns units). A pid alone does
    /// not name a process: Windows reuses them, and a session left by a dead dtx would
    /// otherwise pass for the session of whatever process took its pid (this one included).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Owner {
        pub pid: u32,
        /// None in the names of an older dtx (`dtx-<kind>-<pid>`).
        pub started: Option<u64>,
    }

    /// The name of `owner`'s session of `kind` (`kernel`, `user`, `hfreq`):
    /// `dtx-<kind>-<pid>-<start>`.
    pub fn name(kind: &str, owner: Owner) -> String {
        match owner.started {
            Some(t) => format!("{PREFIX}{kind}-{}-{t}", owner.pid),
            None => format!("{PREFIX}{kind}-{}", owner.pid),
        }
    }

    /// The name of `owner`'s `serial`th session of `kind`, for the kinds one dtx may run
    /// more than one of at a time (`clr`, `clrrundown`: a rundown per `-p` process, each
    /// target's method session): `dtx-<kind><serial>-<pid>-<start>`. StartTrace refuses a
    /// second session of a name that runs (ERROR_ALREADY_EXISTS), so one name per kind would
    /// make the second fail, or stop the first (issue 42, 14). The sessions of one per run
    /// (`kernel`, `user`, `hfreq`) keep [`name`].
    pub fn numbered_name(kind: &str, serial: u32, owner: Owner) -> String {
        name(&format!("{kind}{serial}"), owner)
    }

    /// The process that made a session named `dtx-<kind>-<pid>-<start>` (or an older dtx's
    /// `dtx-<kind>-<pid>`; kind: ASCII letters, then the digits of a [`numbered_name`]), or
    /// None for every other name. Session names are case-insensitive (StartTrace), so is the
    /// prefix.
    pub fn owner(name: &str) -> Option<Owner> {
        let head = name.get(..PREFIX.len())?;
        if !head.eq_ignore_ascii_case(PREFIX) {
            return None;
        }
        let mut parts = name[PREFIX.len()..].split('-');
        let kind = parts.next()?;
        let letters = kind.trim_end_matches(|c: char| c.is_ascii_digit());
        if letters.is_empty() || !letters.bytes().all(|b| b.is_ascii_alphabetic()) {
            return None;
        }
        let number = |s: &str| -> Option<u64> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            s.parse().ok()
        };
        let pid = u32::try_from(number(parts.next()?)?).ok()?;
        let started = match parts.next() {
            Some(t) => Some(number(t)?),
            None => None,
        };
        if parts.next().is_some() {
            return None;
        }
        Some(Owner { pid, started })
    }

    /// The kind of a dtx session named `name` (`kernel`, `clrrundown` of
    /// `dtx-clrrundown3-<pid>-<start>`: the letters, without a [`numbered_name`]'s digits),
    /// or None for a name not of dtx.
    pub fn kind(name: &str) -> Option<String> {
        owner(name)?;
        let rest = &name[PREFIX.len()..];
        let kind = rest.split('-').next()?;
        Some(
            kind.trim_end_matches(|c: char| c.is_ascii_digit())
                .to_ascii_lowercase(),
        )
    }

    /// The sessions of this dtx (by name, of `started`) a console event that comes while a
    /// synchronous CLR rundown runs stops. A Ctrl-C or Ctrl-Break that the run's own handler
    /// takes (`run_takes_interrupt`: the run goes on to its end in order, which stops its
    /// sessions and reads what they lost) interrupts the rundowns only; every other event
    /// ends dtx (a closed console, logoff, shutdown; an interrupt before the run's handler
    /// exists goes to ExitProcess), so every session is stopped before it does.
    pub fn stopped_on_console_event<'a>(
        started: &'a [String],
        interrupt: bool,
        run_takes_interrupt: bool,
        rundown_kind: &str,
    ) -> Vec<&'a String> {
        let rundowns_only = interrupt && run_takes_interrupt;
        started
            .iter()
            .filter(|n| !rundowns_only || kind(n).as_deref() == Some(rundown_kind))
            .collect()
    }

    /// Whether a dtx session owned by `owner` is stale, seen from the dtx `me`: its process is
    /// gone, or its pid now names another process (another start time; this one too, when
    /// the session is not of this instance). `running(pid)` is None when no process has that
    /// id, else that process's start time if it can be read. A session of an older dtx (no
    /// start time in its name) under a running pid other than `me`'s cannot be told from a
    /// live one and is left alone.
    pub fn is_stale(owner: Owner, me: Owner, running: impl Fn(u32) -> Option<Option<u64>>) -> bool {
        if owner == me {
            return false;
        }
        if owner.pid == me.pid {
            // this pid is this process: a session under it that is not this instance's was
            // left by an earlier process of the same id
            return true;
        }
        match (running(owner.pid), owner.started) {
            (None, _) => true,
            (Some(Some(now)), Some(then)) => now != then,
            (Some(_), _) => false,
        }
    }

    /// Win32 error codes ETW's control functions return (winerror.h).
    pub mod code {
        pub const ERROR_PATH_NOT_FOUND: u32 = 3;
        pub const ERROR_ACCESS_DENIED: u32 = 5;
        pub const ERROR_INVALID_PARAMETER: u32 = 87;
        pub const ERROR_DISK_FULL: u32 = 112;
        pub const ERROR_BAD_PATHNAME: u32 = 161;
        pub const ERROR_ALREADY_EXISTS: u32 = 183;
        pub const ERROR_NO_SYSTEM_RESOURCES: u32 = 1450;
    }

    /// What failed, in words: `action` is what dtx was doing ("starting ETW session
    /// dtx-kernel-12"), `session` the session it concerns, `code` the Win32 error and `elevated`
    /// whether dtx's token is elevated. The causes are those Microsoft Learn's StartTrace and
    /// EnableTraceEx2 pages give for each code.
    pub fn error_words(action: &str, session: &str, code: u32, elevated: bool) -> String {
        use code::*;
        match code {
            ERROR_ACCESS_DENIED if !elevated => {
                "live ETW tracing needs an elevated prompt: run dtx as Administrator".to_string()
            }
            ERROR_ACCESS_DENIED => format!(
                "access denied {action} (elevated, but a policy or the Performance Log Users \
                 group denies it)"
            ),
            ERROR_NO_SYSTEM_RESOURCES => format!(
                "{action} failed: the system's ETW sessions are all in use (64 sessions, of them \
                 8 system loggers, by default); stop another tool's session (`logman query -ets` \
                 lists them)"
            ),
            ERROR_ALREADY_EXISTS => format!(
                "{action} failed: a session named {session} already runs; no other running dtx \
                 can have this name, so it is a stale one, and it was not stopped (stop it with \
                 `logman stop {session} -ets`)"
            ),
            ERROR_DISK_FULL => format!(
                "{action} failed: not enough free disk space for the log file (ETW also wants \
                 200 MB free on the system drive)"
            ),
            ERROR_BAD_PATHNAME => format!(
                "{action} failed: the log file name is not valid or another session writes to \
                 that file"
            ),
            ERROR_PATH_NOT_FOUND => {
                format!("{action} failed: the log file's folder does not exist")
            }
            ERROR_INVALID_PARAMETER => format!(
                "{action} failed: Windows rejected the session's settings (invalid parameter)"
            ),
            _ => format!("{action} failed: error {code}"),
        }
    }

    /// The process token's standing, for what a denied privilege means (GetTokenInformation
    /// TokenElevation and TokenElevationType: an administrator under UAC runs with a limited
    /// token, `TokenElevationTypeLimited`, until the prompt is elevated).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Standing {
        /// An elevated token: the privilege is missing all the same (a policy removed it).
        Elevated,
        /// An administrator's limited token: the prompt is not elevated.
        AdminNotElevated,
        /// A user outside the Administrators group.
        NotAdmin,
    }

    /// Why SeSystemProfilePrivilege (profile sampling) could not be enabled, for `standing`.
    pub fn profile_privilege_words(standing: Standing) -> String {
        let head = "profile sampling needs SeSystemProfilePrivilege";
        match standing {
            Standing::Elevated => format!(
                "{head}, which this elevated process does not hold: a policy (User Rights \
                 Assignment, \"Profile system performance\") removed it from the \
                 Administrators"
            ),
            Standing::AdminNotElevated => format!(
                "{head}, which only an elevated prompt holds: this prompt is not elevated (run \
                 dtx from a prompt opened with \"Run as administrator\")"
            ),
            Standing::NotAdmin => format!(
                "{head}, which Administrators hold: this account is not in the Administrators \
                 group (run dtx elevated from an administrator's account)"
            ),
        }
    }

    /// A session's buffer pool for `cpus` processors: (MinimumBuffers, MaximumBuffers).
    /// At least two buffers per processor (Microsoft Learn's EVENT_TRACE_PROPERTIES; krabsetw
    /// repeats it), plus a few, and never fewer than 16; the maximum leaves room for bursts,
    /// 64 buffers (16 MB of 256 KB buffers) above the minimum or 8 per processor (PerfView's
    /// TraceEventSession sizes its pool by the processor count in the same way).
    pub fn buffer_counts(cpus: u32) -> (u32, u32) {
        // (a count past any machine's is taken as that many: no overflow)
        let cpus = cpus.clamp(1, 1 << 16);
        let min = (2 * cpus + 4).max(16);
        let max = (min + 64).max(8 * cpus);
        (min, max)
    }

    /// The sessions that may write a log file.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum LogKind {
        Kernel,
        User,
        /// The file-only session of the high-frequency kernel events.
        HighFrequency,
    }

    /// The log files of one run (`-E new.etl`): the first session that starts takes the
    /// file itself, the kernel and user sessions otherwise `new.kernel.etl` / `new.user.etl`,
    /// the high-frequency session `new.hfreq.etl`. A session started again (a restart after a
    /// re-plan) never overwrites a file of this run: it gets `new.kernel.2.etl`, ...
    #[derive(Clone, Debug)]
    pub struct LogFiles {
        /// The file the run was asked to log to.
        base: PathBuf,
        /// The file it logs to: `base`, or a new name when that exists.
        actual: PathBuf,
        used: Vec<PathBuf>,
    }

    impl LogFiles {
        /// The files of a run asked to log to `base`: when `base` exists (the console runs a
        /// program again with the same `-E new.etl`), the run writes `new.2.etl` (then
        /// `new.3.etl`, ...) and the names derived from it, and the earlier run's file stays.
        pub fn new(base: &Path) -> LogFiles {
            let mut actual = base.to_path_buf();
            let mut n = 2u32;
            while actual.exists() {
                actual = base.with_extension(format!("{n}.etl"));
                n += 1;
            }
            LogFiles {
                base: base.to_path_buf(),
                actual,
                used: Vec::new(),
            }
        }

        /// The file the next session of `kind` writes (remembered as used): never one this
        /// run wrote, nor one that exists.
        pub fn next(&mut self, kind: LogKind) -> PathBuf {
            let preferred = match kind {
                LogKind::HighFrequency => self.actual.with_extension("hfreq.etl"),
                _ if !self.used.contains(&self.actual) => self.actual.clone(),
                LogKind::Kernel => self.actual.with_extension("kernel.etl"),
                LogKind::User => self.actual.with_extension("user.etl"),
            };
            let mut path = preferred.clone();
            let mut n = 2u32;
            // nor a file that exists (one left by an earlier run)
            while self.used.contains(&path) || path.exists() {
                path = preferred.with_extension(format!("{n}.etl"));
                n += 1;
            }
            self.used.push(path.clone());
            path
        }

        /// The file the run was asked to log to.
        pub fn base(&self) -> &Path {
            &self.base
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn of(pid: u32, started: Option<u64>) -> Owner {
            Owner { pid, started }
        }

        #[test]
        fn live_fix_names_carry_the_process_instance() {
            let me = of(4242, Some(133_000_000_000_000_000));
            assert_eq!(name("kernel", me), "dtx-kernel-4242-133000000000000000");
            assert_eq!(owner(&name("kernel", me)), Some(me));
            // an older dtx's names: a pid alone
            assert_eq!(name("kernel", of(4242, None)), "dtx-kernel-4242");
            assert_eq!(owner("dtx-kernel-4242"), Some(of(4242, None)));
            assert_eq!(owner("DTX-User-7-9"), Some(of(7, Some(9))));
            let max = of(u32::MAX, Some(u64::MAX));
            assert_eq!(owner(&name("hfreq", max)), Some(max));
            for other in [
                "dtx-kernel",
                "dtx-user",
                "dtx-hfreq",
                "dtx--12",
                "dtx-kernel-",
                "dtx-kernel-12-",
                "dtx-kernel-12-3-4",
                "dtx-kernel-12-3a",
                "dtx-kernel-12-99999999999999999999",
                "dtx-kernel-12a",
                "dtx-kernel-+12",
                "dtx-ker-nel-12",
                "dtx-kernel-99999999999",
                "dtx-live-12-0.example.com",
                "NT Kernel Logger",
                "xdtx-kernel-12",
                "dtx",
                "",
            ] {
                assert_eq!(owner(other), None, "{other}");
            }
        }

        /// Issue 42, finding 14: every CLR rundown of one dtx was `dtx-clrrundown-<pid>-<start>`
        /// (every method session `dtx-clr-…`), so a second one ran into the first's name.
        #[test]
        fn win3_14_each_clr_session_has_a_name_of_its_own() {
            let me = of(4242, Some(133));
            let (a, b) = (
                numbered_name("clrrundown", 1, me),
                numbered_name("clrrundown", 2, me),
            );
            assert_ne!(a, b);
            assert_eq!(a, "dtx-clrrundown1-4242-133");
            assert_ne!(numbered_name("clr", 1, me), numbered_name("clr", 2, me));
            // they stay this process's sessions: stale ones are still swept, live ones kept
            for n in [&a, &b, &numbered_name("clr", 7, me)] {
                assert_eq!(owner(n), Some(me), "{n}");
            }
            // the one-per-run sessions keep their names
            assert_eq!(name("user", me), "dtx-user-4242-133");
            // digits only, or digits before letters, are no kind
            for other in ["dtx-12-4242-133", "dtx-1clr-4242-133", "dtx-cl1r-4242-133"] {
                assert_eq!(owner(other), None, "{other}");
            }
        }

        /// Issue 42, finding 13: a Ctrl-C during a CLR rundown stopped every session of the
        /// run, which then went on (its handler took the Ctrl-C) with its sessions gone: the
        /// end rundown failed, what they lost went unread, the stops were taken for another's.
        #[test]
        fn win3_13_ctrl_c_during_a_rundown_stops_the_rundowns_only() {
            let me = of(9, Some(5));
            let started: Vec<String> = vec![
                name("kernel", me),
                name("user", me),
                numbered_name("clr", 1, me),
                numbered_name("clrrundown", 2, me),
                numbered_name("clrrundown", 3, me),
            ];
            assert_eq!(kind(&started[3]).as_deref(), Some("clrrundown"));
            assert_eq!(kind(&started[2]).as_deref(), Some("clr"));
            assert_eq!(kind("DTX-User-7-9").as_deref(), Some("user"));
            assert_eq!(kind("NT Kernel Logger"), None);
            // the run takes Ctrl-C: only the rundowns are interrupted
            let stopped = stopped_on_console_event(&started, true, true, "clrrundown");
            assert_eq!(stopped, vec![&started[3], &started[4]]);
            // an interrupt no handler of the run takes ends dtx: everything stops
            assert_eq!(
                stopped_on_console_event(&started, true, false, "clrrundown").len(),
                5
            );
            // a closed console ends dtx whatever handles Ctrl-C
            assert_eq!(
                stopped_on_console_event(&started, false, true, "clrrundown").len(),
                5
            );
        }

        #[test]
        fn live_fix_stale_sessions_are_told_by_process_instance() {
            let me = of(100, Some(5000));
            // pid 200 runs, started at 7000; pid 300 runs, its start time unreadable; no 400
            let running = |pid: u32| match pid {
                100 => Some(Some(5000)),
                200 => Some(Some(7000)),
                300 => Some(None),
                _ => None,
            };
            // this instance's own session
            assert!(!is_stale(me, me, running));
            // an earlier process with this pid (a reused pid of our own), new or old naming
            assert!(is_stale(of(100, Some(4000)), me, running));
            assert!(is_stale(of(100, None), me, running));
            // another live dtx
            assert!(!is_stale(of(200, Some(7000)), me, running));
            // a dead dtx whose pid another process took since
            assert!(is_stale(of(200, Some(6999)), me, running));
            // gone
            assert!(is_stale(of(400, Some(1)), me, running));
            assert!(is_stale(of(400, None), me, running));
            // cannot be told from a live one: left alone
            assert!(!is_stale(of(300, Some(1)), me, running));
            assert!(!is_stale(of(200, None), me, running));
        }

        #[test]
        fn live_fix_privilege_error_says_elevation() {
            let elevated = profile_privilege_words(Standing::Elevated);
            assert!(
                elevated.contains("elevated process") && elevated.contains("policy"),
                "{elevated}"
            );
            assert!(!elevated.contains("Run as administrator"), "{elevated}");
            let limited = profile_privilege_words(Standing::AdminNotElevated);
            assert!(
                limited.contains("not elevated") && limited.contains("Run as administrator"),
                "{limited}"
            );
            let user = profile_privilege_words(Standing::NotAdmin);
            assert!(user.contains("not in the Administrators group"), "{user}");
        }

        #[test]
        fn errors_say_what_to_do() {
            use code::*;
            let start = "starting ETW session dtx-kernel-9";
            let s = "dtx-kernel-9";
            assert_eq!(
                error_words(start, s, ERROR_ACCESS_DENIED, false),
                "live ETW tracing needs an elevated prompt: run dtx as Administrator"
            );
            assert_eq!(
                error_words(start, s, ERROR_ACCESS_DENIED, true),
                "access denied starting ETW session dtx-kernel-9 (elevated, but a policy or the \
                 Performance Log Users group denies it)"
            );
            let limit = error_words(start, s, ERROR_NO_SYSTEM_RESOURCES, true);
            assert!(
                limit.contains("logman query -ets") && limit.contains("64"),
                "{limit}"
            );
            let stale = error_words(start, s, ERROR_ALREADY_EXISTS, true);
            assert!(stale.contains("stale") && stale.contains("logman stop dtx-kernel-9 -ets"));
            assert!(error_words(start, s, ERROR_DISK_FULL, true).contains("disk space"));
            assert!(error_words(start, s, ERROR_BAD_PATHNAME, true).contains("log file name"));
            assert!(error_words(start, s, ERROR_PATH_NOT_FOUND, true).contains("folder"));
            assert!(error_words(start, s, ERROR_INVALID_PARAMETER, true).contains("invalid"));
            assert_eq!(
                error_words(start, s, 1234, false),
                "starting ETW session dtx-kernel-9 failed: error 1234"
            );
        }

        #[test]
        fn buffers_grow_with_the_processors() {
            assert_eq!(buffer_counts(0), (16, 80));
            assert_eq!(buffer_counts(4), (16, 80));
            assert_eq!(buffer_counts(16), (36, 128));
            assert_eq!(buffer_counts(64), (132, 512));
            for cpus in [1, 2, 3, 8, 12, 100, 640, u32::MAX] {
                let (min, max) = buffer_counts(cpus);
                assert!(min >= 16 && max > min, "{cpus}: {min} {max}");
                assert!(min >= cpus.min(1 << 16) * 2);
            }
        }

        #[test]
        fn a_session_started_again_writes_a_new_file() {
            let mut files = LogFiles::new(Path::new("run.etl"));
            // user first: it takes the file; the kernel session then writes its own
            assert_eq!(files.next(LogKind::User), Path::new("run.etl"));
            assert_eq!(files.next(LogKind::Kernel), Path::new("run.kernel.etl"));
            assert_eq!(
                files.next(LogKind::HighFrequency),
                Path::new("run.hfreq.etl")
            );
            // restarts
            assert_eq!(files.next(LogKind::Kernel), Path::new("run.kernel.2.etl"));
            assert_eq!(files.next(LogKind::Kernel), Path::new("run.kernel.3.etl"));
            assert_eq!(files.next(LogKind::User), Path::new("run.user.etl"));
            assert_eq!(
                files.next(LogKind::HighFrequency),
                Path::new("run.hfreq.2.etl")
            );
            // kernel first, as a run with both starts them
            let mut files = LogFiles::new(Path::new("dir/t.etl"));
            assert_eq!(files.next(LogKind::Kernel), Path::new("dir/t.etl"));
            assert_eq!(files.next(LogKind::User), Path::new("dir/t.user.etl"));
            assert_eq!(files.base(), Path::new("dir/t.etl"));
        }

        #[test]
        fn live_fix_a_second_run_to_the_same_file_keeps_the_first() {
            // the console's re-run with `-E new.etl`: the first run's file stays
            let dir = tempfile::tempdir().unwrap();
            let base = dir.path().join("new.etl");
            let mut first = LogFiles::new(&base);
            assert_eq!(first.next(LogKind::Kernel), base);
            std::fs::write(&base, b"first run").unwrap();
            std::fs::write(dir.path().join("new.hfreq.etl"), b"first run").unwrap();
            let mut second = LogFiles::new(&base);
            assert_eq!(second.next(LogKind::Kernel), dir.path().join("new.2.etl"));
            assert_eq!(
                second.next(LogKind::User),
                dir.path().join("new.2.user.etl")
            );
            assert_eq!(
                second.next(LogKind::HighFrequency),
                dir.path().join("new.2.hfreq.etl")
            );
            assert_eq!(second.base(), base);
            assert_eq!(std::fs::read(&base).unwrap(), b"first run");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn high_frequency_events_split_off_for_logging_only() {
        let mut p = plan(
            &[("sched", "on-cpu"), ("syscall", "entry"), ("io", "start")],
            true,
        );
        let logged = p
            .split_logged_only()
            .expect("sched and syscall are high-frequency");
        assert_eq!(
            logged.kernel_flags & HIGH_FREQUENCY,
            k::CSWITCH | k::SYSTEMCALL
        );
        assert!(logged.kernel_flags & k::PROCESS != 0);
        assert_eq!(
            logged.stack_events,
            vec![(group::THREAD, 36), (group::PERF_INFO, 51)]
        );
        // io stays live, with its stack walks
        assert_eq!(p.kernel_flags & HIGH_FREQUENCY, 0);
        assert!(p.kernel_flags & k::DISK_IO != 0);
        assert!(p.stack_events.iter().all(|e| e.0 == group::DISK_IO));
        // nothing but high-frequency probes: no live kernel session at all
        let mut p = plan(&[("sched", "on-cpu")], false);
        assert!(p.split_logged_only().is_some());
        assert!(!p.needs_kernel());
        // nothing high-frequency: nothing to split
        let mut p = plan(&[("proc", "start")], false);
        assert_eq!(p.split_logged_only(), None);
        assert!(p.needs_kernel());
    }

    /// `dnet::gc:gc-start` with its catalog id and function.
    fn gc_start_probe() -> ProbeInfo {
        use crate::providers::etw::dnet;
        let mut gc = probe("dnet", "gc-start");
        if let Some(i) = dnet::PROBES.iter().position(|d| d.name == "gc-start") {
            gc.id = dnet::FIRST_ID + i as u64;
            gc.function = dnet::PROBES[i].function.into();
        }
        gc
    }

    fn probe(provider: &str, name: &str) -> ProbeInfo {
        ProbeInfo {
            id: 1,
            provider: provider.into(),
            module: String::new(),
            function: String::new(),
            name: name.into(),
            arg_native: Vec::new(),
            arg_types: Vec::new(),
        }
    }

    fn plan(probes: &[(&str, &str)], stacks: bool) -> SessionPlan {
        let v: Vec<ProbeInfo> = probes.iter().map(|(p, n)| probe(p, n)).collect();
        SessionPlan::for_probes(&v, &|_| stacks, &EtwProbes::new())
    }

    #[test]
    fn process_providers_need_no_session_and_dnet_is_the_runtime() {
        assert!(plan(
            &[
                ("pid1234", "entry"),
                ("fpid77", "entry"),
                ("dtrace", "BEGIN")
            ],
            false
        )
        .is_empty());
        let p = plan(&[("dnet", "gc-start")], true);
        assert_eq!(
            p.user.len(),
            2,
            "the runtime, and its rundown for the frames' names"
        );
        assert_eq!(p.user[0].guid, Some(crate::providers::etw::dnet::RUNTIME));
        assert!(p.user[0].stacks);
        assert_eq!(p.user[1].guid, Some(crate::providers::etw::dnet::RUNDOWN));
        // a provider merely named like one stays a user provider
        assert_eq!(plan(&[("pidgin", "events")], false).user.len(), 1);
    }

    /// The kernel logger flag that enables one kernel event class (Microsoft Learn's
    /// EVENT_TRACE_PROPERTIES EnableFlags and the MOF classes of each group): the oracle the
    /// plan of every probe in the provider table is checked against.
    fn flag_enabling(event: (u8, u8)) -> u32 {
        use group::*;
        match event {
            (THREAD, 36) => k::CSWITCH,
            (THREAD, 50) => k::DISPATCHER,
            (THREAD, _) => k::THREAD,
            (PROCESS, 10) | (IMAGE, _) => k::IMAGE_LOAD,
            (PROCESS, _) => k::PROCESS,
            (DISK_IO, 12 | 13 | 15) => k::DISK_IO_INIT,
            (DISK_IO, _) => k::DISK_IO,
            (FILE_IO, _) => k::FILE_IO_INIT | k::FILE_IO,
            (TCP_IP | UDP_IP, _) => k::NETWORK_TCPIP,
            (REGISTRY, _) => k::REGISTRY,
            (PAGE_FAULT, 98 | 99) => VIRTUAL_ALLOC,
            (PAGE_FAULT, 32 | 105) => k::MEMORY_HARD_FAULTS,
            (PAGE_FAULT, _) => k::MEMORY_PAGE_FAULTS,
            (PERF_INFO, 46) => k::PROFILE,
            (PERF_INFO, 51 | 52) => k::SYSTEMCALL,
            (PERF_INFO, 66 | 68 | 69) => k::DPC,
            (PERF_INFO, 67) => k::INTERRUPT,
            _ => 0,
        }
    }

    #[test]
    fn every_kernel_probe_plans_the_flags_and_stack_walks_of_its_events() {
        let mut live = 0;
        for (i, kp) in table::KERNEL_PROBES.iter().enumerate() {
            let mut info = probe(kp.provider, kp.name);
            info.id = i as u64;
            let p = SessionPlan::for_probes([&info], &|_| true, &EtwProbes::new());
            if matches!(kp.provider, "hwconfig" | "pmc") {
                assert!(p.is_empty(), "{}:::{} {p:?}", kp.provider, kp.name);
                assert_eq!(p.not_live.len(), 1, "{}:::{}", kp.provider, kp.name);
                assert!(p.not_live[0].contains("not available live"));
                continue;
            }
            if kp.provider == "diag" {
                // a stack recorded brings only the .NET runtime's providers (managed frames)
                use crate::providers::etw::dnet::{RUNDOWN, RUNTIME};
                assert!(p.not_live.is_empty());
                assert!(p
                    .user
                    .iter()
                    .all(|u| u.guid == Some(RUNTIME) || u.guid == Some(RUNDOWN)));
                continue;
            }
            live += 1;
            assert!(p.not_live.is_empty(), "{p:?}");
            assert_eq!(
                p.kernel_flags & (k::PROCESS | k::THREAD),
                k::PROCESS | k::THREAD
            );
            for &e in kp.events {
                let f = flag_enabling(e);
                assert_ne!(f, 0, "no oracle for {e:?}");
                assert_ne!(
                    p.kernel_flags & f,
                    0,
                    "{}:::{} fires on {e:?} but its plan {:#x} lacks {f:#x}",
                    kp.provider,
                    kp.name,
                    p.kernel_flags
                );
                assert!(
                    p.stack_events.contains(&e),
                    "{}:::{}: no stack walk for {e:?}",
                    kp.provider,
                    kp.name
                );
            }
            assert_ne!(p.kernel_flags & k::IMAGE_LOAD, 0);
            // a record that names no thread runs in the thread a context switch put there
            if matches!(kp.provider, "isr" | "dpc" | "syscall") {
                assert_ne!(
                    p.kernel_flags & k::CSWITCH,
                    0,
                    "{}:::{}",
                    kp.provider,
                    kp.name
                );
            }
            // no stacks asked: no stack walks
            let p = SessionPlan::for_probes([&info], &|_| false, &EtwProbes::new());
            assert!(p.stack_events.is_empty());
            // io has no probe on driver events
            assert_eq!(p.kernel_flags & k::DRIVER, 0);
            if needs_file_names_probe(kp) {
                assert_ne!(p.kernel_flags & k::DISK_FILE_IO, 0, "{}", kp.name);
            }
        }
        assert!(live > 60, "{live} live kernel probes");
    }

    fn needs_file_names_probe(kp: &KernelProbe) -> bool {
        crate::providers::etw::table::needs_file_names(kp)
    }

    #[test]
    fn kernel_flags_follow_the_probes() {
        let base = k::PROCESS | k::THREAD;
        let flags = |probes: &[(&str, &str)]| plan(probes, false).kernel_flags;
        assert_eq!(flags(&[("sched", "on-cpu")]), base | k::CSWITCH);
        assert_eq!(flags(&[("sched", "wakeup")]), base | k::DISPATCHER);
        assert_eq!(
            flags(&[("sched", "enqueue")]),
            base | k::DISPATCHER | k::CSWITCH
        );
        assert_eq!(flags(&[("sched", "dequeue")]), base | k::CSWITCH);
        assert_eq!(flags(&[("proc", "exec-success")]), base | k::IMAGE_LOAD);
        assert_eq!(flags(&[("proc", "exit")]), base);
        assert_eq!(flags(&[("proc", "module-load")]), base | k::IMAGE_LOAD);
        assert_eq!(
            flags(&[("io", "start")]),
            base | k::DISK_IO | k::DISK_IO_INIT | k::DISK_FILE_IO
        );
        assert_eq!(flags(&[("pf", "valloc")]), base | VIRTUAL_ALLOC);
        assert_eq!(
            flags(&[("dpc", "dpc"), ("isr", "isr"), ("syscall", "entry")]),
            base | k::DPC | k::INTERRUPT | k::SYSTEMCALL | k::CSWITCH
        );
        assert_eq!(flags(&[("profile", "sample-5ms")]), base | k::PROFILE);
        // timers and dtrace's own probes need no session
        let none = plan(&[("dtrace", "BEGIN"), ("profile", "tick-1s")], false);
        assert!(none.is_empty(), "{none:?}");
    }

    #[test]
    fn sample_probes_set_the_profile_interval() {
        assert_eq!(sample_interval("sample-1ms"), Some(10_000));
        assert_eq!(sample_interval("sample-250us"), Some(2_500));
        assert_eq!(sample_interval("sample-1000hz"), Some(10_000));
        assert_eq!(sample_interval("sample-2s"), Some(20_000_000));
        assert_eq!(sample_interval("sample-x"), None);
        let p = plan(
            &[("profile", "sample-5ms"), ("profile", "sample-2ms")],
            false,
        );
        assert_eq!(p.profile_interval, Some(20_000));
        assert_eq!(p.profile_interval_to_set(), Some((20_000, false)));
        // 100 us is faster than Windows samples: the fastest it accepts, said as changed
        let p = plan(&[("profile", "sample-100us")], false);
        assert_eq!(
            p.profile_interval_to_set(),
            Some((PROFILE_INTERVAL_MIN, true))
        );
        let p = plan(&[("profile", "sample-2s")], false);
        assert_eq!(
            p.profile_interval_to_set(),
            Some((PROFILE_INTERVAL_MAX, true))
        );
    }

    #[test]
    fn the_flamegraph_lines_samples_are_walked_by_their_class() {
        // `profile-997 { @[ustack(100)] = count(); }`: the kernel session's PROFILE flag, the
        // images, and the stack walks of SampledProfile, which the Windows layer asks for as
        // the CLASSIC_EVENT_ID {PerfInfo class GUID, type 46}
        let p = plan(&[("profile", "profile-997")], true);
        assert_eq!(p.stack_events, vec![(group::PERF_INFO, 46)]);
        assert_eq!(
            p.kernel_flags,
            k::PROFILE | k::PROCESS | k::THREAD | k::IMAGE_LOAD
        );
        assert_eq!(
            crate::etw::reader::headers::kernel_group_guid(group::PERF_INFO),
            Guid::parse("ce1dbfb4-137e-4da6-87b0-3f59aa102cbc").unwrap()
        );
    }

    #[test]
    fn a_sampling_interval_windows_changed_is_said() {
        // profile-997: 1/997 s, set as 10030 x 100 ns
        assert_eq!(profile_interval_note(10_030, 10_030), None);
        assert_eq!(
            profile_interval_note(10_030, 10_000).as_deref(),
            Some(
                "profile samples were asked every 1.0030 ms (997 Hz); Windows samples every \
                 1.0000 ms (1000 Hz), the nearest interval Windows accepts"
            )
        );
        let fast = profile_interval_note(100, PROFILE_INTERVAL_MIN).unwrap();
        assert!(
            fast.contains("0.1221 ms to 1 s") && fast.contains("8190 Hz"),
            "{fast}"
        );
    }

    #[test]
    fn profile_rates_sample_at_their_rate_and_ticks_do_not() {
        assert_eq!(sample_interval("profile-997"), Some(10_030));
        assert_eq!(sample_interval("profile-1ms"), Some(10_000));
        assert_eq!(sample_interval("tick-1s"), None);
        let p = plan(&[("profile", "profile-997")], false);
        assert_eq!(p.kernel_flags & k::PROFILE, k::PROFILE);
        assert_eq!(p.profile_interval_to_set(), Some((10_030, false)));
        // the faster of profile-N and sample-N
        let p = plan(
            &[("profile", "profile-97"), ("profile", "sample-2ms")],
            false,
        );
        assert_eq!(p.profile_interval, Some(20_000));
        let p = plan(&[("profile", "tick-1s")], false);
        assert_eq!(p.kernel_flags, 0);
        assert_eq!(p.profile_interval, None);
        // stacks of profile-N: the samples' stack walks
        let p = plan(&[("profile", "profile-97")], true);
        assert!(p.stack_events.contains(&(group::PERF_INFO, 46)));
    }

    /// Issue 42, finding 18: a stack clause with a target (`-p`, `-c`) enabled the .NET
    /// providers for stacks, and with them the start rundown, in every process on the
    /// machine. With a target they carry its PID filter; without one they do not; and a
    /// provider a probe asks for (`dnet::gc:gc-start`, merged into the runtime's entry) stays
    /// machine-wide, as that probe's events come from any process.
    #[test]
    fn win3_18_stack_providers_of_a_target_run_carry_its_pid_filter() {
        use crate::providers::etw::dnet;
        let p = plan(&[("profile", "profile-997")], true);
        let dotnet: Vec<&UserProvider> = p
            .user
            .iter()
            .filter(|u| u.guid == Some(dnet::RUNTIME) || u.guid == Some(dnet::RUNDOWN))
            .collect();
        assert_eq!(dotnet.len(), 2, "{p:?}");
        assert!(
            dotnet.iter().all(|u| p.pid_filter(u).is_none()),
            "no target: {p:?}"
        );
        let t = p.clone().with_target(Some(4242));
        assert!(
            dotnet.iter().all(|u| t.pid_filter(u) == Some(4242)),
            "{t:?}"
        );
        // a probe's own provider is not filtered to the target
        let gc = gc_start_probe();
        let sample = probe("profile", "profile-997");
        let p = SessionPlan::for_probes(
            [&gc, &sample],
            &|p| p.provider == "profile",
            &EtwProbes::new(),
        )
        .with_target(Some(4242));
        let rt = p
            .user
            .iter()
            .find(|u| u.guid == Some(dnet::RUNTIME))
            .expect("runtime");
        assert_eq!(p.pid_filter(rt), None, "{p:?}");
        let rd = p
            .user
            .iter()
            .find(|u| u.guid == Some(dnet::RUNDOWN))
            .expect("rundown");
        assert_eq!(p.pid_filter(rd), Some(4242), "{p:?}");
    }

    #[test]
    fn live_fix_stacks_bring_the_dotnet_runtime_for_managed_frames() {
        use crate::providers::etw::dnet::{self, keyword};
        let runtime = |p: &SessionPlan| {
            p.user
                .iter()
                .find(|u| u.guid == Some(dnet::RUNTIME))
                .cloned()
        };
        let rundown = |p: &SessionPlan| {
            p.user
                .iter()
                .find(|u| u.guid == Some(dnet::RUNDOWN))
                .cloned()
        };
        // a sample's stacks (kernel probe) and a user provider's stacks both bring them
        for probes in [
            &[("profile", "profile-997")][..],
            &[("microsoft-windows-dns-client", "events")],
        ] {
            let p = plan(probes, true);
            let rt = runtime(&p).unwrap_or_else(|| panic!("{p:?}"));
            // unwind info for JIT code is published only with JIT at level 5
            assert_eq!(rt.level, LEVEL_VERBOSE);
            let want = keyword::JIT | keyword::NGEN | keyword::LOADER;
            assert_eq!(rt.keywords & want, want);
            assert_eq!(rt.keywords & keyword::INTRUSIVE, 0);
            let rd = rundown(&p).unwrap();
            assert_ne!(rd.keywords & keyword::rundown::START, 0);
            assert_ne!(rd.keywords & keyword::rundown::JIT, 0);
            assert_eq!(rd.keywords & keyword::rundown::END, 0);
            // without stacks, no .NET provider is asked for
            let p = plan(probes, false);
            assert!(runtime(&p).is_none() && rundown(&p).is_none(), "{p:?}");
        }
        // merged with what dnet probes ask: one entry per provider, keywords OR'ed
        let gc = gc_start_probe();
        let sample = probe("profile", "profile-997");
        let p = SessionPlan::for_probes(
            [&gc, &sample],
            &|p| p.provider == "profile",
            &EtwProbes::new(),
        );
        let rt: Vec<_> = p
            .user
            .iter()
            .filter(|u| u.guid == Some(dnet::RUNTIME))
            .collect();
        assert_eq!(rt.len(), 1, "{p:?}");
        assert_ne!(rt[0].keywords & keyword::JIT, 0);
    }

    #[test]
    fn live_fix_dcend_the_end_rundown_is_enabled_only_when_the_run_ends() {
        use crate::providers::etw::dnet::{self, keyword::rundown};
        let dnet_probe = |name: &str| {
            let i = dnet::PROBES
                .iter()
                .position(|d| d.name == name && d.rundown)
                .expect("a rundown probe");
            let mut p = probe("dnet", name);
            p.id = dnet::FIRST_ID + i as u64;
            p.function = dnet::PROBES[i].function.into();
            p
        };
        let rundown_at_start = |p: &SessionPlan| {
            p.user
                .iter()
                .find(|u| u.guid == Some(dnet::RUNDOWN))
                .cloned()
        };
        let dcend = dnet_probe("method-dcend");
        let p = SessionPlan::for_probes([&dcend], &|_| false, &EtwProbes::new());
        // nothing is said of it any more: it fires at the end, as over a trace
        assert!(p.notes.is_empty(), "{p:?}");
        // no session starts with the end-rundown keyword (the runtime would run the end
        // rundown at once), and with no start rundown asked for, the provider waits
        assert!(rundown_at_start(&p).is_none(), "{p:?}");
        let end = p.end_rundown.clone().expect("the end rundown is planned");
        assert_eq!(end.guid, Some(dnet::RUNDOWN));
        assert_ne!(end.keywords & rundown::END, 0);
        assert_ne!(end.keywords & rundown::JIT, 0);
        assert_eq!(end.keywords & rundown::START, 0, "{end:?}");
        assert_eq!(end.level, LEVEL_VERBOSE);
        // with a dcstart probe (or stacks) too: the start rundown at the start, without END;
        // the end rundown at the end, without START (it would run the start rundown again)
        let dcstart = dnet_probe("method-dcstart");
        let p = SessionPlan::for_probes([&dcend, &dcstart], &|_| false, &EtwProbes::new());
        let start = rundown_at_start(&p).expect("the start rundown");
        assert_ne!(start.keywords & rundown::START, 0);
        assert_eq!(start.keywords & rundown::END, 0);
        let end = p.end_rundown.clone().unwrap();
        assert_eq!(
            (end.keywords & rundown::END, end.keywords & rundown::START),
            (rundown::END, 0)
        );
        let sample = probe("profile", "profile-997");
        let p = SessionPlan::for_probes(
            [&dcend, &sample],
            &|p| p.provider == "profile",
            &EtwProbes::new(),
        );
        assert_eq!(rundown_at_start(&p).unwrap().keywords & rundown::END, 0);
        assert!(p.end_rundown.is_some());
        // a dcstart probe alone, or stacks alone: no end rundown
        let p = SessionPlan::for_probes([&dcstart], &|_| false, &EtwProbes::new());
        assert!(p.notes.is_empty() && p.end_rundown.is_none(), "{p:?}");
        let p = SessionPlan::for_probes([&sample], &|_| true, &EtwProbes::new());
        assert!(p.end_rundown.is_none(), "{p:?}");
    }

    /// Issue 42, finding 4: a program whose only ETW probes are `dnet::rundown:*-dcend` has
    /// no provider at the start, and was taken for one that needs no session (`open_for`
    /// started nothing, `end_rundown` found no user session): it never fired, silently.
    #[test]
    fn win3_4_a_dcend_only_program_still_starts_the_user_session() {
        use crate::providers::etw::dnet;
        let i = dnet::PROBES
            .iter()
            .position(|d| d.name == "method-dcend" && d.rundown)
            .expect("a rundown probe");
        let mut dcend = probe("dnet", "method-dcend");
        dcend.id = dnet::FIRST_ID + i as u64;
        dcend.function = dnet::PROBES[i].function.into();
        let p = SessionPlan::for_probes([&dcend], &|_| false, &EtwProbes::new());
        assert!(p.user.is_empty() && p.kernel_flags == 0, "{p:?}");
        assert!(p.end_rundown.is_some(), "{p:?}");
        assert!(!p.is_empty(), "a dcend-only plan needs a session: {p:?}");
        assert!(p.needs_user_session(), "{p:?}");
        // and a plan with nothing of ETW stays empty
        let none =
            SessionPlan::for_probes([&probe("dtrace", "BEGIN")], &|_| false, &EtwProbes::new());
        assert!(none.is_empty() && !none.needs_user_session(), "{none:?}");
    }

    #[test]
    fn dnet_probes_never_carry_the_intrusive_keywords() {
        use crate::providers::etw::dnet::{self, keyword};
        let mut all = Vec::new();
        for (i, d) in dnet::PROBES.iter().enumerate() {
            let mut info = probe("dnet", d.name);
            info.function = d.function.into();
            info.id = dnet::FIRST_ID + i as u64;
            all.push(info);
        }
        for stacks in [false, true] {
            for info in &all {
                let p = SessionPlan::for_probes([info], &|_| stacks, &EtwProbes::new());
                // what the sessions start with, and the end rundown (`*-dcend`) at the end
                let enabled: Vec<&UserProvider> =
                    p.user.iter().chain(p.end_rundown.iter()).collect();
                assert!(!enabled.is_empty());
                for u in &enabled {
                    assert_eq!(u.keywords & keyword::INTRUSIVE, 0, "{}: {u:?}", info.name);
                    assert_ne!(u.keywords, 0);
                }
                let d = dnet::probe_of(info.id).unwrap();
                let want = if d.rundown {
                    dnet::RUNDOWN
                } else {
                    dnet::RUNTIME
                };
                assert!(enabled.iter().any(|u| u.guid == Some(want)));
            }
            let p = SessionPlan::for_probes(&all, &|_| stacks, &EtwProbes::new());
            assert_eq!(p.user.len(), 2, "{p:?}");
            assert!(p.user.iter().all(|u| u.keywords & keyword::INTRUSIVE == 0));
        }
        // gc probes enable the GC keyword, exceptions the exception keyword, not more
        let gc = all.iter().find(|p| p.name == "gc-start").unwrap();
        let p = SessionPlan::for_probes([gc], &|_| false, &EtwProbes::new());
        assert_eq!(p.user[0].keywords, keyword::GC);
        // stacks: the stack keyword and the rundown of the methods that name the frames
        let p = SessionPlan::for_probes([gc], &|_| true, &EtwProbes::new());
        assert_ne!(p.user[0].keywords & keyword::STACK, 0);
        assert_eq!(p.user[1].guid, Some(dnet::RUNDOWN));
        assert_ne!(p.user[1].keywords & keyword::rundown::START, 0);
        // the runtime's ":::events" by name: every keyword but the intrusive ones
        let mut etw = EtwProbes::new();
        let info = crate::etw::catalog::ProviderInfo::new(
            "Microsoft-Windows-DotNETRuntime",
            dnet::RUNTIME,
        );
        etw.add_provider(&info);
        let catalog = crate::providers::etw_catalog(&etw);
        let events = crate::probes::ProbeCatalog::matching(
            &catalog,
            &crate::probes::ProbeDesc::parse("microsoft-windows-dotnetruntime:::events").unwrap(),
        );
        let p = SessionPlan::for_probes(&events, &|_| false, &etw);
        assert_eq!(p.user[0].keywords, !keyword::INTRUSIVE);
    }

    #[test]
    fn a_provider_by_name_and_by_guid_is_enabled_once_with_both_keywords() {
        let g = Guid::parse("1c95126e-7eea-49a9-a3fe-a378b03ddb4d").unwrap();
        let mut p = SessionPlan::default();
        p.add_user(UserProvider {
            name: "microsoft-windows-dns-client".into(),
            guid: None,
            keywords: 0x1,
            level: 4,
            stacks: false,
            for_stacks: false,
        });
        p.add_user(UserProvider {
            name: g.to_string(),
            guid: Some(g),
            keywords: 0x8,
            level: 5,
            stacks: true,
            for_stacks: false,
        });
        assert_eq!(p.user.len(), 2);
        // the name resolved to the same GUID
        p.user[0].guid = Some(g);
        p.merge_by_guid();
        assert_eq!(p.user.len(), 1);
        assert_eq!((p.user[0].keywords, p.user[0].level), (0x9, 5));
        assert!(p.user[0].stacks);
    }

    #[test]
    fn stacks_are_walked_only_for_clauses_that_record_them() {
        assert!(plan(&[("sched", "on-cpu")], false).stack_events.is_empty());
        let p = plan(&[("sched", "on-cpu"), ("profile", "sample-1ms")], true);
        assert_eq!(
            p.stack_events,
            vec![(group::THREAD, 36), (group::PERF_INFO, 46)]
        );
        assert_ne!(p.kernel_flags & k::IMAGE_LOAD, 0);
    }

    #[test]
    fn keyword_and_guid_probes_set_keywords_and_level() {
        use crate::etw::catalog::ProviderInfo;
        use crate::probes::{ProbeCatalog, ProbeDesc};
        let runtime = Guid::parse("e13c0d23-ccbc-4e12-931b-d9cc2eee27e4").unwrap();
        let mut info = ProviderInfo::new("Microsoft-Windows-DotNETRuntime", runtime);
        info.add_keyword("GCKeyword", 0x1);
        info.add_keyword("JitKeyword", 0x10);
        let mut etw = EtwProbes::new();
        etw.add_provider(&info);
        let catalog = crate::providers::etw_catalog(&etw);
        let mut probes = Vec::new();
        for d in [
            "microsoft-windows-dotnetruntime:::gc",
            "microsoft-windows-dotnetruntime:::jit",
            "etw:{1c95126e-7eea-49a9-a3fe-a378b03ddb4d}:0x04_0x0000000000000002:3008",
            "etw:1c95126e-7eea-49a9-a3fe-a378b03ddb4d:0x02_0x8:generic_event",
        ] {
            probes.extend(catalog.matching(&ProbeDesc::parse(d).unwrap()));
        }
        assert_eq!(probes.len(), 4);
        let p = SessionPlan::for_probes(&probes, &|_| false, &etw);
        assert_eq!(p.user.len(), 2, "{p:?}");
        assert_eq!(p.user[0].guid, Some(runtime));
        assert_eq!((p.user[0].keywords, p.user[0].level), (0x11, LEVEL_VERBOSE));
        // one provider by GUID: keywords OR'ed, the highest level
        assert_eq!(
            p.user[1].guid,
            Guid::parse("1c95126e-7eea-49a9-a3fe-a378b03ddb4d")
        );
        assert_eq!((p.user[1].keywords, p.user[1].level), (0xa, 4));
        // events and capturestate need every keyword
        let all = catalog
            .matching(&ProbeDesc::parse("microsoft-windows-dotnetruntime:::events").unwrap());
        let p = SessionPlan::for_probes(&all, &|_| false, &etw);
        // (but for the runtime's own intrusive keywords)
        assert_eq!(
            p.user[0].keywords,
            !crate::providers::etw::dnet::keyword::INTRUSIVE
        );
    }

    #[test]
    fn user_providers_by_name_or_guid() {
        let p = plan(
            &[
                ("microsoft-windows-dns-client", "events"),
                ("1c95126e-7eea-49a9-a3fe-a378b03ddb4d", "events"),
                ("microsoft-windows-dns-client", "events"),
            ],
            false,
        );
        assert_eq!(p.kernel_flags, 0);
        assert_eq!(p.user.len(), 2);
        assert_eq!(p.user[0].name, "microsoft-windows-dns-client");
        assert_eq!(p.user[0].guid, None);
        assert_eq!(
            p.user[1].guid,
            Guid::parse("1c95126e-7eea-49a9-a3fe-a378b03ddb4d")
        );
        assert_eq!(
            (p.user[0].keywords, p.user[0].level),
            (u64::MAX, LEVEL_VERBOSE)
        );
    }
}
