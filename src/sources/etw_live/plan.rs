//! What a live ETW session must enable for the probes a run enabled: the kernel logger's
//! enable flags, the kernel events that need stack walks (those whose clauses record stacks),
//! and the user-mode providers to enable by name or GUID with their keywords and level.
//! Platform-neutral: the Windows layer only turns a [`SessionPlan`] into system calls.

use crate::engine::Engine;
use crate::etw::record::Guid;
use crate::probes::ProbeInfo;
use crate::providers::etw::{group, guid_probe, EtwProbes, NamedProbe};

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

const REGISTRY: u8 = 0x09;
const TCPIP: u8 = 0x06;
const UDPIP: u8 = 0x08;

/// What one kernel probe needs from the kernel logger.
struct KernelNeed {
    provider: &'static str,
    /// Probe names it covers (`*` for all of the provider's probes).
    names: &'static [&'static str],
    flags: u32,
    /// The (kernel group, event type) records the probe fires on: stack walks are asked for
    /// these when the probe's clauses record stacks.
    events: &'static [(u8, u8)],
}

/// The kernel providers' needs, by provider and probe name. Process and thread records are
/// always on with any kernel probe: execname, pid and the thread's process come from them.
const KERNEL_NEEDS: &[KernelNeed] = &[
    KernelNeed {
        provider: "sched",
        names: &["on-cpu", "off-cpu"],
        flags: k::CSWITCH | k::DISPATCHER,
        events: &[(group::THREAD, 36)],
    },
    KernelNeed {
        provider: "sched",
        names: &["*"],
        flags: k::CSWITCH | k::DISPATCHER,
        events: &[(group::THREAD, 50)],
    },
    KernelNeed {
        provider: "proc",
        names: &["module-load", "module-unload"],
        flags: k::PROCESS | k::THREAD | k::IMAGE_LOAD,
        events: &[(group::IMAGE, 10), (group::IMAGE, 2)],
    },
    KernelNeed {
        provider: "proc",
        names: &["*"],
        flags: k::PROCESS | k::THREAD,
        events: &[
            (group::PROCESS, 1),
            (group::PROCESS, 2),
            (group::THREAD, 1),
            (group::THREAD, 2),
        ],
    },
    KernelNeed {
        provider: "io",
        names: &["*"],
        flags: k::DISK_IO | k::DISK_IO_INIT | k::DRIVER,
        events: &[
            (group::DISK_IO, 10),
            (group::DISK_IO, 11),
            (group::DISK_IO, 12),
            (group::DISK_IO, 13),
        ],
    },
    KernelNeed {
        provider: "fsinfo",
        names: &["*"],
        flags: k::FILE_IO | k::FILE_IO_INIT | k::DISK_FILE_IO,
        events: &[
            (group::FILE_IO, 64),
            (group::FILE_IO, 67),
            (group::FILE_IO, 68),
        ],
    },
    KernelNeed {
        provider: "reg",
        names: &["*"],
        flags: k::REGISTRY,
        events: &[
            (REGISTRY, 10),
            (REGISTRY, 11),
            (REGISTRY, 14),
            (REGISTRY, 16),
        ],
    },
    KernelNeed {
        provider: "pf",
        names: &["*"],
        flags: k::MEMORY_PAGE_FAULTS | k::MEMORY_HARD_FAULTS,
        events: &[(group::PAGE_FAULT, 32)],
    },
    KernelNeed {
        provider: "tcpip",
        names: &["*"],
        flags: k::NETWORK_TCPIP,
        events: &[(TCPIP, 10), (TCPIP, 11), (TCPIP, 12), (TCPIP, 15)],
    },
    KernelNeed {
        provider: "udpip",
        names: &["*"],
        flags: k::NETWORK_TCPIP,
        events: &[(UDPIP, 10), (UDPIP, 11)],
    },
    KernelNeed {
        provider: "profile",
        names: &["sample-*"],
        flags: k::PROFILE,
        events: &[(group::PERF_INFO, 46)],
    },
    KernelNeed {
        provider: "dpc",
        names: &["*"],
        flags: k::DPC,
        events: &[
            (group::PERF_INFO, 66),
            (group::PERF_INFO, 68),
            (group::PERF_INFO, 69),
        ],
    },
    KernelNeed {
        provider: "isr",
        names: &["*"],
        flags: k::INTERRUPT,
        events: &[(group::PERF_INFO, 67)],
    },
    KernelNeed {
        provider: "syscall",
        names: &["*"],
        flags: k::SYSTEMCALL,
        events: &[(group::PERF_INFO, 51), (group::PERF_INFO, 52)],
    },
    KernelNeed {
        provider: "diag",
        names: &["events"],
        flags: k::PROCESS | k::THREAD | k::IMAGE_LOAD,
        events: &[],
    },
];

/// The kernel flags of the high-frequency events (context switches, ready threads, DPCs,
/// interrupts, system calls). When a live run also logs to a file (`-E new.etl`), these go to
/// a session of their own that only writes the file; `-gE` processes them live too.
pub const HIGH_FREQUENCY: u32 = k::CSWITCH | k::DISPATCHER | k::DPC | k::INTERRUPT | k::SYSTEMCALL;

/// The kernel records those flags enable (their stack walks go with them).
fn is_high_frequency(event: (u8, u8)) -> bool {
    matches!(
        event,
        (group::THREAD, 36 | 50) | (group::PERF_INFO, 51 | 52 | 66..=69)
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
/// (0 meaning any: all levels, all keywords); dnet's probes the .NET runtime's provider.
fn user_need(p: &ProbeInfo, etw: &EtwProbes) -> (String, Option<Guid>, u64, u8) {
    if p.provider == "dnet" {
        return (
            "microsoft-windows-dotnetruntime".to_string(),
            Some(crate::providers::dnet::RUNTIME),
            u64::MAX,
            LEVEL_VERBOSE,
        );
    }
    if let Some((guid, level, kw)) = guid_probe::enable_of(p) {
        let kw = if kw == 0 { u64::MAX } else { kw };
        let level = if level == 0 { u8::MAX } else { level };
        return (guid.to_string(), Some(guid), kw, level);
    }
    let guid = etw
        .named(&p.provider)
        .and_then(|n| n.guid)
        .or_else(|| Guid::parse(&p.provider));
    let keywords = match etw.named_probe(p.id) {
        Some((_, NamedProbe::Keyword(mask))) => mask,
        _ => u64::MAX,
    };
    (p.provider.clone(), guid, keywords, LEVEL_VERBOSE)
}

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
}

/// Everything a live run asks of ETW.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionPlan {
    /// The kernel logger's `EnableFlags` (0: no kernel session).
    pub kernel_flags: u32,
    /// Kernel (group, event type) records to stack-walk, sorted.
    pub stack_events: Vec<(u8, u8)>,
    pub user: Vec<UserProvider>,
}

impl SessionPlan {
    /// The plan for the probes `probes`; `wants_stack(p)` says whether a clause that `p`
    /// fires records stacks.
    pub fn for_probes<'a>(
        probes: impl IntoIterator<Item = &'a ProbeInfo>,
        wants_stack: &dyn Fn(&ProbeInfo) -> bool,
        etw: &EtwProbes,
    ) -> SessionPlan {
        let mut plan = SessionPlan::default();
        for p in probes {
            let mut kernel = false;
            for need in KERNEL_NEEDS.iter().filter(|n| n.provider == p.provider) {
                kernel = true;
                if !need
                    .names
                    .iter()
                    .any(|n| crate::probes::glob_match(n, &p.name))
                {
                    continue;
                }
                plan.kernel_flags |= need.flags | k::PROCESS | k::THREAD;
                if wants_stack(p) {
                    plan.stack_events.extend_from_slice(need.events);
                    // stacks print by module: the images must be known
                    plan.kernel_flags |= k::IMAGE_LOAD;
                }
                // the first matching entry of a provider decides
                break;
            }
            if kernel || not_etw(&p.provider) {
                continue;
            }
            let stacks = wants_stack(p);
            let (name, guid, keywords, level) = user_need(p, etw);
            let same = |u: &UserProvider| u.name == name || (guid.is_some() && u.guid == guid);
            match plan.user.iter_mut().find(|u| same(u)) {
                Some(u) => {
                    u.stacks |= stacks;
                    u.keywords |= keywords;
                    u.level = u.level.max(level);
                    u.guid = u.guid.or(guid);
                }
                None => plan.user.push(UserProvider {
                    name,
                    guid,
                    keywords,
                    level,
                    stacks,
                }),
            }
        }
        plan.stack_events.sort_unstable();
        plan.stack_events.dedup();
        plan
    }

    /// The plan for what `engine`'s programs enabled: a probe needs stacks when a clause
    /// that names it calls `stack()`/`ustack()` (or keys on a stack).
    pub fn for_engine(engine: &Engine, etw: &EtwProbes) -> SessionPlan {
        let mut stack_clauses = Vec::new();
        for run in &engine.runs {
            let program = &run.vm.program;
            for c in &program.clauses {
                let one = crate::ir::Program {
                    clauses: vec![c.clone()],
                    ..(**program).clone()
                };
                if crate::engine::uses_stacks(&one) {
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
        let mut probes: Vec<&ProbeInfo> = engine.enabled_probes().collect();
        probes.sort_by_key(|p| p.id);
        SessionPlan::for_probes(probes, &wants_stack, etw)
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

    /// Whether any session is needed at all.
    pub fn is_empty(&self) -> bool {
        self.kernel_flags == 0 && self.user.is_empty()
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
            k::CSWITCH | k::DISPATCHER | k::SYSTEMCALL
        );
        assert!(logged.kernel_flags & k::PROCESS != 0);
        assert_eq!(
            logged.stack_events,
            vec![
                (group::THREAD, 36),
                (group::PERF_INFO, 51),
                (group::PERF_INFO, 52)
            ]
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
        assert_eq!(p.user.len(), 1);
        assert_eq!(p.user[0].guid, Some(crate::providers::dnet::RUNTIME));
        assert!(p.user[0].stacks);
        // a provider merely named like one stays a user provider
        assert_eq!(plan(&[("pidgin", "events")], false).user.len(), 1);
    }

    #[test]
    fn kernel_flags_follow_the_probes() {
        let base = k::PROCESS | k::THREAD;
        assert_eq!(
            plan(&[("sched", "on-cpu")], false).kernel_flags,
            base | k::CSWITCH | k::DISPATCHER
        );
        assert_eq!(plan(&[("proc", "exit")], false).kernel_flags, base);
        assert_eq!(
            plan(&[("proc", "module-load")], false).kernel_flags,
            base | k::IMAGE_LOAD
        );
        assert_eq!(
            plan(&[("io", "start")], false).kernel_flags,
            base | k::DISK_IO | k::DISK_IO_INIT | k::DRIVER
        );
        assert_eq!(
            plan(&[("fsinfo", "read")], false).kernel_flags,
            base | k::FILE_IO | k::FILE_IO_INIT | k::DISK_FILE_IO
        );
        assert_eq!(
            plan(&[("reg", "open")], false).kernel_flags,
            base | k::REGISTRY
        );
        assert_eq!(
            plan(&[("pf", "hardflt")], false).kernel_flags,
            base | k::MEMORY_PAGE_FAULTS | k::MEMORY_HARD_FAULTS
        );
        assert_eq!(
            plan(&[("tcpip", "send"), ("udpip", "recv")], false).kernel_flags,
            base | k::NETWORK_TCPIP
        );
        assert_eq!(
            plan(&[("profile", "sample-1ms")], false).kernel_flags,
            base | k::PROFILE
        );
        assert_eq!(
            plan(
                &[("dpc", "dpc"), ("isr", "isr"), ("syscall", "entry")],
                false
            )
            .kernel_flags,
            base | k::DPC | k::INTERRUPT | k::SYSTEMCALL
        );
        // timers and dtrace's own probes need no session
        let none = plan(&[("dtrace", "BEGIN"), ("profile", "tick-1s")], false);
        assert!(none.is_empty(), "{none:?}");
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
        use crate::probes::{Catalog, ProbeCatalog, ProbeDesc};
        let runtime = Guid::parse("e13c0d23-ccbc-4e12-931b-d9cc2eee27e4").unwrap();
        let mut info = ProviderInfo::new("Microsoft-Windows-DotNETRuntime", runtime);
        info.add_keyword("GCKeyword", 0x1);
        info.add_keyword("JitKeyword", 0x10);
        let mut etw = EtwProbes::new();
        etw.add_provider(&info);
        let catalog = Catalog::with_etw(&etw);
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
        assert_eq!(p.user[0].keywords, u64::MAX);
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
