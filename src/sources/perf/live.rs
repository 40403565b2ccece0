//! The live perf-events source: opens the tracepoints and `cpu-clock` samplers the enabled
//! probes need on every online CPU, one ring buffer per CPU (every event of a CPU writes into
//! the ring of that CPU's side-band event), and turns records into firings of the `syscall`,
//! `sched`, `proc`, `io` and `profile` probes.
//!
//! Written over `libc` rather than a perf crate: dtx needs tracepoints with raw records,
//! software clocks and side-band records (COMM/FORK/EXIT for `execname` and `ppid`) multiplexed
//! into one ring per CPU and drained by one poll loop that the engine's deadline drives, which
//! is a small part of the ABI (`perf_event_open`, five ioctls, the mmap header); `perf-event2`
//! models counters and per-event samplers without raw tracepoint records, and `one_collect` is a
//! whole collection pipeline with its own event model and threads.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use super::abi::{
    attach_program, event_id, finish, flag, lost_samples, mono_ns, online_cpus, open_error,
    perf_event_open, AttachFailed, PerfEventAttr, Ring, IOC_SET_FILTER, IOC_SET_OUTPUT,
    SW_BPF_OUTPUT, SW_CPU_CLOCK, SW_DUMMY, TYPE_SOFTWARE, TYPE_TRACEPOINT,
};
pub use super::abi::{available, tracefs};
use super::bpfsys;
use super::capture;
use super::format::{EventFormat, Field};
pub use super::kernel::BpfMode;
use super::kernel::KernelClauses;
use super::record::{self, kind, sample};
use super::ustack::{self, UserStacks};
use crate::fasthash::FastMap;
use crate::probes::ProbeInfo;
use crate::providers::linux::{is_linux_probe, probe_id, syscall_of, syscall_probe_id};
use crate::providers::{parse_rate, TickKind};
use crate::sources::sink::{EventSource, Sink, SourceState};
use crate::symbols::LiveSymbols;
use crate::vm::{AddressSpace, Fault, FiringCtx};

/// The trailer every record carries (`sample_id_all`), and the start of every sample.
const COMMON: u64 = sample::IDENTIFIER | sample::TID | sample::TIME | sample::CPU;

/// Where a tracepoint's raw record appears to D (e.g. `proc:::exec`'s file name): a
/// non-canonical address that no process can map.
const RAW_BASE: u64 = 0xfffe_0000_0000_0000;

/// Kernel addresses: the upper half.
fn is_kernel_pc(pc: u64) -> bool {
    pc >= 0xffff_8000_0000_0000
}

fn load_format(root: &Path, system: &str, name: &str) -> Result<EventFormat, String> {
    let p = root.join("events").join(system).join(name).join("format");
    let text = std::fs::read_to_string(&p).map_err(|e| {
        format!(
            "could not enable tracing: tracepoint {system}:{name}: {}: {e}",
            p.display()
        )
    })?;
    EventFormat::parse(&text).map_err(|e| format!("tracepoint {system}:{name}: {e}"))
}

/// How one perf event's samples are decoded.
enum Decoder {
    SideBand,
    SysEnter {
        id: Field,
        args: Field,
    },
    SysExit {
        id: Field,
        ret: Field,
    },
    Switch {
        prev_comm: Field,
        prev_pid: Field,
        next_comm: Field,
        next_pid: Field,
    },
    Wakeup {
        pid: Field,
        target_cpu: Field,
    },
    NewTask {
        pid: Field,
        comm: Field,
        flags: Field,
    },
    Exit {
        comm: Field,
        pid: Field,
        group_dead: Option<Field>,
    },
    Exec {
        filename: Field,
    },
    BlockIssue {
        dev: Field,
        sector: Field,
        bytes: Field,
        rwbs: Field,
    },
    BlockComplete {
        dev: Field,
        sector: Field,
        nr_sector: Field,
        error: Field,
        rwbs: Field,
    },
    Profile {
        probe: u64,
    },
    /// A system call entry with its strings, from the capture programs' `BPF_OUTPUT` event
    /// (the record's call number picks the layout).
    Captured(Vec<capture::CallLayout>),
}

/// How long (ns) a record waits before it fires, so that the records of all CPUs' rings merge
/// in time order: more than the time between a record's time stamp and its write to the ring.
const HOLD_NS: u64 = 5_000_000;

/// Most frames a user stack is unwound to (perf's own limit is 127).
const MAX_USER_FRAMES: usize = 128;

/// What the source knows about a thread: its process, parent process and name.
#[derive(Clone, Copy)]
struct Task {
    pid: u32,
    ppid: u32,
    /// Real user and group ids (`uid`, `gid`): from `/proc` when the thread is first seen
    /// and at each exec, a fork's from its parent.
    uid: u32,
    gid: u32,
    comm: [u8; 16],
    len: u8,
}

impl Task {
    fn comm(&self) -> &[u8] {
        &self.comm[..self.len as usize]
    }

    fn set_comm(&mut self, c: &[u8]) {
        let n = c.len().min(16);
        self.comm[..n].copy_from_slice(&c[..n]);
        self.len = n as u8;
    }
}

/// The task of a thread from `/proc` (`Name`, `Tgid`, `PPid`, the real ids of `Uid` and
/// `Gid` of its status file).
fn task_from_proc(tid: u32) -> Option<Task> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let mut t = Task {
        pid: tid,
        ppid: 0,
        uid: 0,
        gid: 0,
        comm: [0; 16],
        len: 0,
    };
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("Name:") {
            t.set_comm(v.trim().as_bytes());
        } else if let Some(v) = line.strip_prefix("Tgid:") {
            t.pid = v.trim().parse().unwrap_or(tid);
        } else if let Some(v) = line.strip_prefix("PPid:") {
            t.ppid = v.trim().parse().unwrap_or(0);
        } else if let Some(v) = line.strip_prefix("Uid:") {
            t.uid = v
                .split_whitespace()
                .next()
                .and_then(|u| u.parse().ok())
                .unwrap_or(0);
        } else if let Some(v) = line.strip_prefix("Gid:") {
            t.gid = v
                .split_whitespace()
                .next()
                .and_then(|u| u.parse().ok())
                .unwrap_or(0);
        }
    }
    Some(t)
}

/// The `execname` of each CPU's idle task (thread 0 on every CPU): `swapper/N`, the kernel's
/// own name for it (its `comm`, what `sched_switch`, perf and Oracle's DTrace for Linux show;
/// illumos's DTrace says `sched`).
#[derive(Default)]
struct IdleNames(Vec<Vec<u8>>);

impl IdleNames {
    fn of(&mut self, cpu: u32) -> &[u8] {
        let cpu = cpu.min(4095) as usize;
        while self.0.len() <= cpu {
            let n = self.0.len();
            self.0.push(format!("swapper/{n}").into_bytes());
        }
        &self.0[cpu]
    }
}

/// Threads by id.
#[derive(Default)]
struct Tasks(FastMap<u32, Task>);

impl Tasks {
    /// Every thread alive now, from `/proc`: read once just after the side-band events are
    /// turned on (what starts or execs later comes in their FORK and COMM records), so that
    /// what lived before (a `-c` target stopped after its exec) keeps its name even when it
    /// exits before its first event is read.
    fn snapshot() -> Tasks {
        let mut tasks = Tasks::default();
        for pid in super::numbered_entries("/proc") {
            for tid in super::numbered_entries(&format!("/proc/{pid}/task")) {
                if let Some(task) = task_from_proc(tid) {
                    tasks.0.insert(tid, task);
                }
            }
        }
        tasks
    }

    fn get(&mut self, tid: u32, pid_hint: u32) -> Task {
        if let Some(t) = self.0.get(&tid) {
            return *t;
        }
        let t = task_from_proc(tid).unwrap_or(Task {
            pid: if pid_hint != 0 { pid_hint } else { tid },
            ppid: 0,
            uid: 0,
            gid: 0,
            comm: [0; 16],
            len: 0,
        });
        self.0.insert(tid, t);
        t
    }
}

/// A target process's memory through `process_vm_readv`, and the raw record of a tracepoint
/// at [`RAW_BASE`].
struct LiveMemory<'a> {
    pid: u32,
    raw: &'a [u8],
    /// Strings captured at the probe: (address, bytes up to the NUL, or `None` where the
    /// kernel could not read them).
    captured: &'a [Option<capture::CapturedString<'a>>],
}

impl LiveMemory<'_> {
    /// A read inside a string captured at the probe, served from the capture (zeros after its
    /// NUL); `None` when `addr` is not in one.
    fn read_captured(&self, addr: u64, buf: &mut [u8]) -> Option<Result<(), Fault>> {
        for &(at, text) in self.captured.iter().flatten() {
            match text {
                None if addr == at => return Some(Err(Fault::BadAddr(addr))),
                Some(t) if addr >= at && addr <= at + t.len() as u64 => {
                    let from = &t[(addr - at) as usize..];
                    let n = from.len().min(buf.len());
                    buf[..n].copy_from_slice(&from[..n]);
                    buf[n..].fill(0);
                    return Some(Ok(()));
                }
                _ => {}
            }
        }
        None
    }
}

impl AddressSpace for LiveMemory<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        if addr >= RAW_BASE {
            let off = (addr - RAW_BASE) as usize;
            let src = self
                .raw
                .get(off..off.saturating_add(buf.len()))
                .ok_or(Fault::BadAddr(addr))?;
            buf.copy_from_slice(src);
            return Ok(());
        }
        if let Some(r) = self.read_captured(addr, buf) {
            return r;
        }
        if self.pid == 0 || is_kernel_pc(addr) || buf.is_empty() {
            return Err(Fault::BadAddr(addr));
        }
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as usize as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: one local iovec over `buf`; the kernel checks the remote range.
        let n = unsafe { libc::process_vm_readv(self.pid as i32, &local, 1, &remote, 1, 0) };
        if n == buf.len() as isize {
            Ok(())
        } else {
            Err(Fault::BadAddr(addr))
        }
    }
}

/// What the run asks of the perf source.
pub struct PerfConfig {
    /// Record call chains (the program uses `stack()`, `ustack()` or stack keys).
    pub stacks: bool,
    /// Bytes of ring buffer per CPU (rounded to a power-of-two number of pages).
    pub ring_bytes: usize,
    /// Whether clauses may run in the kernel (`-x bpf`).
    pub bpf: BpfMode,
}

impl PerfConfig {
    /// What a program's options ask: `-x bufsize` per CPU (at most 1 GiB), `-x bpf` (with
    /// `verbose`, `-v`, saying where each clause runs).
    pub fn from_options(
        opts: &crate::lang::options::DOptions,
        stacks: bool,
        verbose: bool,
    ) -> PerfConfig {
        PerfConfig {
            stacks,
            ring_bytes: opts.bufsize().min(1 << 30) as usize,
            bpf: BpfMode::from_option(opts.str_value("bpf"), verbose),
        }
    }
}

/// Opens the perf source for the engine's enabled probes when they need one (`Ok(None)` when
/// they do not), and has the engine's consumer name stack frames with its live symbols, which
/// come back with the source for other users (snapshots).
pub fn open_for(
    sink: &mut dyn Sink,
    config: &PerfConfig,
) -> Result<Option<(PerfSource, LiveSymbols)>, String> {
    if !needed(sink) {
        return Ok(None);
    }
    let symbols = LiveSymbols::new();
    let src = PerfSource::open(sink, config, symbols.clone())?;
    sink.set_symbols(Box::new(symbols.clone()));
    Ok(Some((src, symbols)))
}

/// Whether a run needs the perf source: a probe of the live Linux providers or a `profile-N`.
pub fn needed(sink: &dyn Sink) -> bool {
    sink.enabled_probes()
        .any(|p| is_linux_probe(p.id) || is_profile(p))
}

fn is_profile(p: &ProbeInfo) -> bool {
    p.provider == "profile" && matches!(parse_rate(&p.name), Some((TickKind::Profile, _)))
}

/// The live source.
pub struct PerfSource {
    rings: Vec<Ring>,
    /// Events (besides the ring owners) kept open.
    _fds: Vec<OwnedFd>,
    /// The capture programs and maps (closed after the events that use them).
    _capture: CapturePlan,
    /// System calls whose entries come from a capture program.
    captured_nrs: FastMap<u16, ()>,
    /// Whether the kernel reports each thread's new `uid`/`gid` (after an exec or a set-id
    /// call) through the credentials programs; else `/proc` is read at each exec.
    ids_followed: bool,
    /// The clauses that run in the kernel, and their maps.
    kernel: KernelClauses,
    decoders: Vec<Decoder>,
    /// perf event id → index into `decoders`.
    by_id: FastMap<u64, usize>,
    probes: FastMap<u64, ProbeInfo>,
    /// The probes some program enabled (fixed for the run).
    enabled: FastMap<u64, ()>,
    tasks: Tasks,
    /// Exit status from `exit`/`exit_group`, by thread id and process id.
    exit_status: FastMap<u32, i64>,
    track_exits: bool,
    symbols: LiveSymbols,
    noted: FastMap<u32, ()>,
    stacks: bool,
    /// `profile-N` samples carry user registers and a stack copy, unwound by `user_stacks`.
    sample_user: bool,
    user_stacks: UserStacks,
    idle_names: IdleNames,
    /// Engine time minus perf (CLOCK_MONOTONIC) time, and wall minus engine time.
    offset: Option<(u64, u64)>,
    /// Per ring, the records read and not yet fired (those of the last round held back).
    bufs: Vec<Vec<u8>>,
    /// Some records were held back for the next round.
    holding: bool,
    order: Vec<(u64, u32, u32)>,
    kstack: Vec<u64>,
    ustack: Vec<u64>,
    lost: Vec<u64>,
    /// Samples read from the rings since the start (the status line's and the exporter's
    /// counter).
    records: u64,
    /// Per ring, the losses its LOST records and the kernel's counts told (their sum is
    /// what the rings lost); and each event's descriptor with its ring, to ask the kernel
    /// for the losses no LOST record told yet.
    seen_lost: Vec<u64>,
    lost_fds: Vec<(usize, std::os::fd::RawFd)>,
}

/// The kernel filter that keeps the system calls in `nrs` (`None`: keep all).
fn syscall_filter(nrs: &[u16]) -> Option<String> {
    if nrs.is_empty() || nrs.len() > 64 {
        return None;
    }
    Some(
        nrs.iter()
            .map(|n| format!("id == {n}"))
            .collect::<Vec<_>>()
            .join(" || "),
    )
}

impl PerfSource {
    /// Opens what the engine's enabled probes need on every online CPU. `profile-N` probes
    /// leave the engine's timers for `cpu-clock` sampling.
    pub fn open(
        sink: &mut dyn Sink,
        config: &PerfConfig,
        symbols: LiveSymbols,
    ) -> Result<PerfSource, String> {
        available()?;
        let enabled: Vec<ProbeInfo> = sink.enabled_probes().cloned().collect();
        // the clauses the BPF back end runs first: the probes only they enable need no
        // events in user space
        let syscalls = enabled.iter().any(|p| syscall_of(p.id).is_some());
        let kernel = match (config.bpf, syscalls) {
            (BpfMode::Off, _) | (_, false) => KernelClauses::default(),
            _ => match tracefs() {
                Ok(root) => KernelClauses::open(sink, &root, config.bpf),
                Err(_) => KernelClauses::default(),
            },
        };
        let enabled: Vec<ProbeInfo> = match kernel.any() {
            true => enabled
                .into_iter()
                .filter(|p| sink.is_enabled(p.id))
                .collect(),
            false => enabled,
        };
        let on = |provider: &str, name: &str| {
            probe_id(provider, name).is_some_and(|id| sink.is_enabled(id))
        };
        let mut entry_nrs = Vec::new();
        let mut return_nrs = Vec::new();
        let mut all_syscalls = (0, 0);
        for p in &enabled {
            if let Some((nr, ret)) = syscall_of(p.id) {
                if ret {
                    return_nrs.push(nr);
                    all_syscalls.1 += 1;
                } else {
                    entry_nrs.push(nr);
                    all_syscalls.0 += 1;
                }
            }
        }
        let track_exits = on("proc", "exit");
        let needs_tracefs_early = !entry_nrs.is_empty();
        let root_early = if needs_tracefs_early {
            Some(tracefs()?)
        } else {
            None
        };
        // system calls whose strings are captured at the probe (their entries then come from
        // the capture program, not from raw_syscalls:sys_enter)
        // and, where a program reads `uid` or `gid`, the credentials each thread has at its
        // firings, followed in the kernel (tracefs is needed for that alone only then)
        let reads_ids = reads_ids(sink);
        let root_ids = match (&root_early, reads_ids) {
            (None, true) => tracefs().ok(),
            _ => None,
        };
        let capture = CapturePlan::prepare(
            root_early.as_deref().or(root_ids.as_deref()),
            &copyinstr_calls(sink, &enabled),
            reads_ids,
        );
        entry_nrs.retain(|nr| !capture.covers(*nr));
        let total = crate::providers::linux::syscalls::X86_64.len();
        let enter_filter = if all_syscalls.0 == total && capture.calls.is_empty() {
            None
        } else if all_syscalls.0 == total {
            // every call but the captured ones
            let v: Vec<String> = capture
                .calls
                .iter()
                .map(|c| format!("id != {}", c.0.nr))
                .collect();
            Some(v.join(" && "))
        } else {
            let mut v = entry_nrs.clone();
            if track_exits {
                v.extend([60, 231]);
            }
            v.sort_unstable();
            v.dedup();
            syscall_filter(&v)
        };
        let exit_filter = if all_syscalls.1 == total {
            None
        } else {
            syscall_filter(&return_nrs)
        };
        let needs_tracefs = !entry_nrs.is_empty()
            || !return_nrs.is_empty()
            || enabled
                .iter()
                .any(|p| is_linux_probe(p.id) && syscall_of(p.id).is_none());
        // (system, name, filter)
        let mut tracepoints: Vec<(&str, &str, Option<String>)> = Vec::new();
        if !entry_nrs.is_empty() || track_exits {
            tracepoints.push(("raw_syscalls", "sys_enter", enter_filter));
        }
        if !return_nrs.is_empty() {
            tracepoints.push(("raw_syscalls", "sys_exit", exit_filter));
        }
        if on("sched", "on-cpu") || on("sched", "off-cpu") {
            tracepoints.push(("sched", "sched_switch", None));
        }
        if on("sched", "wakeup") {
            tracepoints.push(("sched", "sched_wakeup", None));
        }
        if on("proc", "create") || on("proc", "start") || on("proc", "lwp-start") {
            tracepoints.push(("task", "task_newtask", None));
        }
        if track_exits || on("proc", "lwp-exit") {
            tracepoints.push(("sched", "sched_process_exit", None));
        }
        if on("proc", "exec") || on("proc", "exec-success") {
            tracepoints.push(("sched", "sched_process_exec", None));
        }
        if on("io", "start") {
            tracepoints.push(("block", "block_rq_issue", None));
        }
        if on("io", "done") {
            tracepoints.push(("block", "block_rq_complete", None));
        }
        let root = match root_early {
            Some(r) => Some(r),
            None if needs_tracefs => Some(tracefs()?),
            None => None,
        };
        let mut decoders = vec![Decoder::SideBand];
        // (decoder index, attr, filter)
        let mut specs: Vec<(usize, PerfEventAttr, Option<String>)> = Vec::new();
        let chain = if config.stacks { sample::CALLCHAIN } else { 0 };
        // user registers and stack copies only for a program that reads user stacks: its user
        // frames come from unwinding the copy with the modules' `.eh_frame` (code built
        // without frame pointers, most distributions' and Rust's), not from the kernel's walk
        // of frame pointers; for every event, as `perf record --call-graph dwarf` does
        let sample_user = config.stacks
            && sink
                .programs()
                .into_iter()
                .any(|p| crate::vm::stack_use::uses_user_stacks(p));
        let user_part = |attr| with_user_stack(attr, sample_user);
        for (sys, name, filter) in tracepoints {
            let Some(root) = &root else { break };
            let fmt = load_format(root, sys, name)?;
            let r = |f: &str| fmt.require(f).cloned();
            let dec = match name {
                "sys_enter" => Decoder::SysEnter {
                    id: r("id")?,
                    args: r("args")?,
                },
                "sys_exit" => Decoder::SysExit {
                    id: r("id")?,
                    ret: r("ret")?,
                },
                "sched_switch" => Decoder::Switch {
                    prev_comm: r("prev_comm")?,
                    prev_pid: r("prev_pid")?,
                    next_comm: r("next_comm")?,
                    next_pid: r("next_pid")?,
                },
                "sched_wakeup" => Decoder::Wakeup {
                    pid: r("pid")?,
                    target_cpu: r("target_cpu")?,
                },
                "task_newtask" => Decoder::NewTask {
                    pid: r("pid")?,
                    comm: r("comm")?,
                    flags: r("clone_flags")?,
                },
                "sched_process_exit" => Decoder::Exit {
                    comm: r("comm")?,
                    pid: r("pid")?,
                    group_dead: fmt.field("group_dead").cloned(),
                },
                "sched_process_exec" => Decoder::Exec {
                    filename: r("filename")?,
                },
                "block_rq_issue" => Decoder::BlockIssue {
                    dev: r("dev")?,
                    sector: r("sector")?,
                    bytes: r("bytes")?,
                    rwbs: r("rwbs")?,
                },
                _ => Decoder::BlockComplete {
                    dev: r("dev")?,
                    sector: r("sector")?,
                    nr_sector: r("nr_sector")?,
                    error: r("error")?,
                    rwbs: r("rwbs")?,
                },
            };
            decoders.push(dec);
            let attr = user_part(PerfEventAttr {
                kind: TYPE_TRACEPOINT,
                config: fmt.id as u64,
                sample_period: 1,
                sample_type: COMMON | sample::RAW | chain,
                ..Default::default()
            });
            specs.push((decoders.len() - 1, attr, filter));
        }
        for p in &enabled {
            if let (true, Some((_, ns))) = (is_profile(p), parse_rate(&p.name)) {
                sink.detach_timer(p.id);
                decoders.push(Decoder::Profile { probe: p.id });
                let attr = user_part(PerfEventAttr {
                    kind: TYPE_SOFTWARE,
                    config: SW_CPU_CLOCK,
                    sample_period: ns,
                    sample_type: COMMON | sample::IP | sample::CALLCHAIN,
                    ..Default::default()
                });
                specs.push((decoders.len() - 1, attr, None));
            }
        }
        // the capture programs' output events, one per CPU, in the CPU's ring
        let capture_decoder = capture.active().then(|| {
            decoders.push(Decoder::Captured(
                capture.calls.iter().map(|c| c.0.clone()).collect(),
            ));
            decoders.len() - 1
        });
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let pages = (config.ring_bytes / page)
            .clamp(16, 16384)
            .next_power_of_two();
        let data_bytes = (pages * page) as u32;
        let mut rings = Vec::new();
        let mut fds = Vec::new();
        let mut by_id = FastMap::default();
        let mut lost_fds = Vec::new();
        let cpus = online_cpus();
        // the side-band events of every CPU first, then the snapshot of /proc, then the
        // probes' events: a task that starts while this runs is in the snapshot or has its
        // FORK and COMM records (before, a task started between the snapshot and its CPU's
        // side-band event had neither, and lost its name if it exited before its first event
        // was read); dtx's own reading of /proc comes before any probe's event is on
        let mut side_rings = Vec::with_capacity(cpus.len());
        // with stacks, the files each process maps (the executable segments: what unwinding
        // and naming need), for the processes gone before their events are read
        let mappings = if config.stacks {
            flag::MMAP | flag::MMAP2
        } else {
            0
        };
        for &cpu in &cpus {
            let side = PerfEventAttr {
                kind: TYPE_SOFTWARE,
                config: SW_DUMMY,
                sample_period: 1,
                sample_type: COMMON,
                flags: flag::COMM | flag::TASK | flag::COMM_EXEC | mappings,
                ..Default::default()
            };
            let fd = perf_event_open(&finish(side, data_bytes), -1, cpu as i32)
                .map_err(|e| open_error(&format!("side-band event on CPU {cpu}"), &e))?;
            by_id.insert(event_id(&fd)?, 0);
            let ring = Ring::map(fd, cpu, pages).map_err(|e| {
                format!("could not enable tracing: perf ring buffer on CPU {cpu}: {e}")
            })?;
            side_rings.push((cpu, ring));
        }
        let tasks = Tasks::snapshot();
        let mut user_stacks = UserStacks::default();
        if config.stacks {
            user_stacks.record_running();
        }
        for (cpu, ring) in side_rings {
            for (dec, attr, filter) in &specs {
                let fd = perf_event_open(&finish(*attr, data_bytes), -1, cpu as i32)
                    .map_err(|e| open_error(&format!("perf event on CPU {cpu}"), &e))?;
                if let Some(f) = filter {
                    if let Ok(c) = CString::new(f.as_str()) {
                        // SAFETY: a NUL-terminated filter string for SET_FILTER.
                        unsafe { libc::ioctl(fd.as_raw_fd(), IOC_SET_FILTER, c.as_ptr()) };
                    }
                }
                // SAFETY: SET_OUTPUT takes the descriptor of the ring's event.
                let r = unsafe { libc::ioctl(fd.as_raw_fd(), IOC_SET_OUTPUT, ring.fd.as_raw_fd()) };
                if r != 0 {
                    return Err(format!(
                        "could not enable tracing: perf SET_OUTPUT on CPU {cpu}: {}",
                        io::Error::last_os_error()
                    ));
                }
                by_id.insert(event_id(&fd)?, *dec);
                lost_fds.push((rings.len(), fd.as_raw_fd()));
                fds.push(fd);
            }
            if let Some(dec) = capture_decoder {
                let first = rings.is_empty();
                let (out, attached) =
                    capture.attach(cpu, first, chain, sample_user, data_bytes, &ring)?;
                by_id.insert(event_id(&out)?, dec);
                lost_fds.push((rings.len(), out.as_raw_fd()));
                fds.push(out);
                fds.extend(attached);
            }
            lost_fds.push((rings.len(), ring.fd.as_raw_fd()));
            rings.push(ring);
        }
        let on_ids = enabled
            .iter()
            .filter(|p| sink.is_enabled(p.id))
            .map(|p| (p.id, ()))
            .collect();
        let probes = enabled.into_iter().map(|p| (p.id, p)).collect();
        let n = rings.len();
        Ok(PerfSource {
            rings,
            _fds: fds,
            captured_nrs: capture.calls.iter().map(|c| (c.0.nr, ())).collect(),
            ids_followed: !capture.creds.is_empty(),
            _capture: capture,
            kernel,
            decoders,
            by_id,
            probes,
            enabled: on_ids,
            tasks,
            exit_status: FastMap::default(),
            track_exits,
            symbols,
            noted: FastMap::default(),
            stacks: config.stacks,
            sample_user,
            user_stacks,
            idle_names: IdleNames::default(),
            offset: None,
            bufs: vec![Vec::new(); n],
            holding: false,
            order: Vec::new(),
            kstack: Vec::new(),
            ustack: Vec::new(),
            lost: vec![0; n],
            records: 0,
            seen_lost: vec![0; n],
            lost_fds,
        })
    }

    /// Copies what every ring holds and fires it in time order, until the engine is done (or,
    /// with `to_exit`, until a program calls `exit()`). Returns whether there was any.
    fn drain_and_fire(&mut self, sink: &mut dyn Sink, to_exit: bool) -> bool {
        // a record stamped just now may still be on its way into its CPU's ring while the
        // other rings are read: the newest records wait for the next round, so that the rings
        // merge in time order (a process's FORK before its first sample on another CPU)
        let cutoff = if to_exit {
            u64::MAX
        } else {
            mono_ns().saturating_sub(HOLD_NS)
        };
        self.order.clear();
        for (i, ring) in self.rings.iter_mut().enumerate() {
            // after what the last round held back
            let buf = &mut self.bufs[i];
            ring.drain(buf);
            let mut at = 0usize;
            while let Some(h) = record::Header::parse(&buf[at..]) {
                let size = h.size as usize;
                if size < record::Header::SIZE || at + size > buf.len() {
                    break;
                }
                let body = &buf[at + record::Header::SIZE..at + size];
                let time = if h.kind == kind::SAMPLE {
                    // a profile sample has its PC before the thread and time
                    let id = body
                        .get(..8)
                        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
                    let st = match self.by_id.get(&id).map(|&d| &self.decoders[d]) {
                        Some(Decoder::Profile { .. }) => COMMON | sample::IP,
                        _ => COMMON,
                    };
                    record::parse_sample(body, st).map_or(0, |s| s.time)
                } else {
                    record::parse_sample_id(body, COMMON).map_or(0, |s| s.time)
                };
                self.order.push((time, i as u32, at as u32));
                at += size;
            }
        }
        if self.order.is_empty() {
            self.holding = false;
            return false;
        }
        // each ring is in time order already: the stable sort merges runs
        self.order.sort_by_key(|e| e.0);
        let order = std::mem::take(&mut self.order);
        let mut bufs = std::mem::take(&mut self.bufs);
        let mut held: Vec<(u32, u32)> = Vec::new();
        let mut ended = false;
        for (k, &(time, ring, at)) in order.iter().enumerate() {
            if time >= cutoff {
                held.push((ring, at));
                continue;
            }
            if sink.exited() {
                ended = true;
                break;
            }
            if !to_exit && sink.done() {
                // interrupted: what is read and not yet fired waits for `finish`, which
                // fires it (dtrace counts what its buffers hold at Ctrl-C); the records
                // after this one are all older than the cutoff, none is held yet
                held.extend(order[k..].iter().map(|&(_, r, a)| (r, a)));
                break;
            }
            let buf = &bufs[ring as usize];
            let at = at as usize;
            let Some(h) = record::Header::parse(&buf[at..]) else {
                continue;
            };
            let body = &buf[at + record::Header::SIZE..at + h.size as usize];
            self.record(h, body, ring as usize, sink);
        }
        // keep exactly the records held back, in time order
        self.holding = !ended && !held.is_empty();
        for (i, buf) in bufs.iter_mut().enumerate() {
            let mut keep = Vec::new();
            if self.holding {
                for &(_, at) in held.iter().filter(|h| h.0 as usize == i) {
                    let at = at as usize;
                    if let Some(h) = record::Header::parse(&buf[at..]) {
                        keep.extend_from_slice(&buf[at..at + h.size as usize]);
                    }
                }
            }
            if keep.is_empty() {
                buf.clear();
            } else {
                *buf = keep;
            }
        }
        self.order = order;
        self.bufs = bufs;
        true
    }

    fn record(&mut self, h: record::Header, body: &[u8], ring: usize, sink: &mut dyn Sink) {
        match h.kind {
            kind::SAMPLE => {
                self.records += 1;
                // the identifier comes first in every sample dtx asks for
                let id = body
                    .get(..8)
                    .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
                let user = if self.sample_user { USER_STACK } else { 0 };
                let st = match self.by_id.get(&id).map(|&d| &self.decoders[d]) {
                    Some(Decoder::Profile { .. }) => COMMON | sample::IP | sample::CALLCHAIN | user,
                    Some(Decoder::SideBand) | None => return,
                    Some(_) => {
                        let chain = if self.stacks { sample::CALLCHAIN } else { 0 };
                        COMMON | sample::RAW | chain | user
                    }
                };
                if let Some(s) = record::parse_sample_regs(body, st, ustack::REGS_MASK) {
                    self.sample(&s, sink);
                }
            }
            kind::COMM => {
                if let Some((pid, tid, comm)) = record::parse_comm(body) {
                    let mut t = self.tasks.get(tid, pid);
                    t.pid = pid;
                    t.set_comm(comm);
                    if h.misc & record::MISC_COMM_EXEC != 0 && !self.ids_followed {
                        // an exec may change the credentials (a set-id program, or what the
                        // process set before it); read now, after the fact, where the kernel
                        // cannot report them
                        if let Some(p) = task_from_proc(tid) {
                            (t.uid, t.gid) = (p.uid, p.gid);
                        }
                    }
                    self.tasks.0.insert(tid, t);
                    if h.misc & record::MISC_COMM_EXEC != 0 {
                        self.user_stacks.forget(pid);
                    }
                    if h.misc & record::MISC_COMM_EXEC != 0 && self.noted.remove(&pid).is_some() {
                        self.symbols
                            .0
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .forget_process(pid);
                    }
                }
            }
            kind::MMAP2 => {
                if let Some(m) = record::parse_mmap2(body) {
                    let file = String::from_utf8_lossy(m.filename);
                    (self.user_stacks).record_mapping(m.pid, m.addr, m.len, m.pgoff, m.prot, &file);
                }
            }
            kind::FORK => {
                if let Some((pid, ppid, tid, ptid, _)) = record::parse_task(body) {
                    if pid == tid && pid != ppid {
                        self.user_stacks.record_fork(ppid, pid);
                    }
                    let parent = self.tasks.get(ptid, ppid);
                    let mut t = parent;
                    t.pid = pid;
                    t.ppid = if pid == tid { ppid } else { parent.ppid };
                    self.tasks.0.insert(tid, t);
                }
            }
            kind::EXIT => {
                if let Some((pid, _, tid, _, _)) = record::parse_task(body) {
                    if pid == tid {
                        self.user_stacks.record_exit(pid);
                    }
                }
            }
            kind::LOST | 13 => {
                let n = if h.kind == kind::LOST {
                    record::parse_lost(body).map_or(0, |l| l.1)
                } else {
                    body.get(..8)
                        .and_then(|b| b.try_into().ok())
                        .map_or(0, u64::from_le_bytes)
                };
                self.lost[ring] += n;
                if let Some(seen) = self.seen_lost.get_mut(ring) {
                    *seen += n;
                }
            }
            _ => {}
        }
    }

    fn sample(&mut self, s: &record::Sample<'_>, sink: &mut dyn Sink) {
        let Some(&d) = self.by_id.get(&s.id) else {
            return;
        };
        let (off, wall_off) = *self.offset.get_or_insert_with(|| {
            let e = sink.now_ns();
            let wall = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            (e.wrapping_sub(mono_ns()), wall.wrapping_sub(e))
        });
        let ts = s.time.wrapping_add(off);
        if self.stacks || matches!(self.decoders[d], Decoder::Profile { .. }) {
            record::split_callchain(s.callchain, &mut self.kstack, &mut self.ustack);
        } else {
            self.kstack.clear();
            self.ustack.clear();
        }
        // a sample's user registers and stack copy (any event's, when a program reads user
        // stacks): its user stack is unwound only for a clause that reads it
        let user_sampled =
            !s.regs.is_empty() && s.reg(ustack::REGS_MASK, record::x86_reg::IP).unwrap_or(0) != 0;
        let uregs = if user_sampled {
            Some(super::uprobe::sampled_regs(|i| s.reg(ustack::REGS_MASK, i)).uregs())
        } else {
            None
        };
        let user_stacks = std::cell::RefCell::new(&mut self.user_stacks);
        let unwind = |out: &mut Vec<u64>| {
            let reg = |i| s.reg(ustack::REGS_MASK, i);
            let mut us = user_stacks.borrow_mut();
            us.unwind(s.pid, reg, s.stack, ts, MAX_USER_FRAMES, out);
        };
        let lazy = crate::vm::LazyUserStack::new(&unwind);
        let raw = s.raw;
        let mut strings: [Option<capture::CapturedString<'_>>; capture::MAX_STRINGS] =
            [None; capture::MAX_STRINGS];
        let mut args = [0u64; 10];
        let mut errno = 0i64;
        // (probe, thread the firing runs in, its process when known)
        let mut fire: [(u64, u32, u32); 2] = [(0, 0, 0); 2];
        let mut n = 0;
        let enabled = &self.enabled;
        let mut push = |probe: Option<u64>, tid: u32, pid: u32| {
            if let Some(p) = probe {
                if n < 2 && enabled.contains_key(&p) {
                    fire[n] = (p, tid, pid);
                    n += 1;
                }
            }
        };
        match &self.decoders[d] {
            Decoder::SideBand => return,
            Decoder::SysEnter { id, args: a } => {
                let nr = id.int(raw, 0).unwrap_or(u64::MAX);
                a.u64s(raw, &mut args[..6]);
                if self.track_exits && (nr == 60 || nr == 231) {
                    let key = if nr == 231 { s.pid } else { s.tid };
                    self.exit_status.insert(key, args[0] as i64);
                }
                // a captured call fires from its capture program's record
                if nr < 1024 && !self.captured_nrs.contains_key(&(nr as u16)) {
                    push(Some(syscall_probe_id(nr as u16, false)), s.tid, s.pid);
                }
            }
            Decoder::Captured(layouts) => {
                // a thread's ids as they are after its exec or set-id call
                if let Some((uid, gid)) = capture::parse_creds(raw) {
                    let mut t = self.tasks.get(s.tid, s.pid);
                    (t.uid, t.gid) = (uid, gid);
                    self.tasks.0.insert(s.tid, t);
                    return;
                }
                let nr = raw.get(..8).map_or(u64::MAX, |b| {
                    u64::from_le_bytes(b.try_into().unwrap_or([0xff; 8]))
                });
                let layout = layouts.iter().find(|l| l.nr as u64 == nr);
                if let Some(c) = layout.and_then(|l| capture::parse_record(raw, l)) {
                    args[..6].copy_from_slice(&c.args);
                    strings = c.strings;
                    if c.nr < 1024 {
                        push(Some(syscall_probe_id(c.nr as u16, false)), s.tid, s.pid);
                    }
                }
            }
            Decoder::SysExit { id, ret } => {
                let nr = id.int(raw, 0).unwrap_or(u64::MAX);
                let r = ret.int(raw, 0).unwrap_or(0);
                args[0] = r;
                args[1] = r;
                if (-4095..0).contains(&(r as i64)) {
                    errno = -(r as i64);
                }
                if nr < 1024 {
                    push(Some(syscall_probe_id(nr as u16, true)), s.tid, s.pid);
                }
            }
            Decoder::Switch {
                prev_comm,
                prev_pid,
                next_comm,
                next_pid,
            } => {
                let prev = prev_pid.int(raw, 0).unwrap_or(0) as u32;
                let next = next_pid.int(raw, 0).unwrap_or(0) as u32;
                for (tid, comm) in [(prev, prev_comm), (next, next_comm)] {
                    let c = comm.bytes(raw).unwrap_or_default();
                    let mut t = self.tasks.get(tid, 0);
                    if t.comm() != c {
                        t.set_comm(c);
                        self.tasks.0.insert(tid, t);
                    }
                }
                args[0] = next as u64;
                args[1] = prev as u64;
                push(probe_id("sched", "off-cpu"), prev, 0);
                push(probe_id("sched", "on-cpu"), next, 0);
            }
            Decoder::Wakeup { pid, target_cpu } => {
                let woken = pid.int(raw, 0).unwrap_or(0) as u32;
                args[0] = woken as u64;
                args[1] = self.tasks.get(woken, 0).pid as u64;
                args[2] = target_cpu.int(raw, 0).unwrap_or(0);
                push(probe_id("sched", "wakeup"), s.tid, s.pid);
            }
            Decoder::NewTask { pid, comm, flags } => {
                const CLONE_THREAD: u64 = 0x0001_0000;
                let child = pid.int(raw, 0).unwrap_or(0) as u32;
                let thread = flags.int(raw, 0).unwrap_or(0) & CLONE_THREAD != 0;
                let mut t = self.tasks.get(s.tid, s.pid);
                t.set_comm(comm.bytes(raw).unwrap_or_default());
                let child_pid = if thread { s.pid } else { child };
                if !thread {
                    t.ppid = s.pid;
                }
                t.pid = child_pid;
                self.tasks.0.insert(child, t);
                args[0] = child as u64;
                args[1] = child_pid as u64;
                if thread {
                    push(probe_id("proc", "lwp-start"), child, child_pid);
                } else {
                    args[0] = child_pid as u64;
                    args[1] = s.pid as u64;
                    push(probe_id("proc", "create"), s.tid, s.pid);
                    push(probe_id("proc", "start"), child, child_pid);
                }
            }
            Decoder::Exit {
                comm,
                pid,
                group_dead,
            } => {
                let tid = pid.int(raw, 0).unwrap_or(s.tid as u64) as u32;
                let mut t = self.tasks.get(tid, s.pid);
                t.set_comm(comm.bytes(raw).unwrap_or_default());
                self.tasks.0.insert(tid, t);
                let dead = match group_dead {
                    Some(g) => g.int(raw, 0).unwrap_or(0) != 0,
                    None => tid == s.pid,
                };
                if dead {
                    let status = self
                        .exit_status
                        .remove(&s.pid)
                        .or_else(|| self.exit_status.remove(&tid));
                    // arg0: how the process ended (CLD_EXITED 1, CLD_KILLED 2), arg1: status
                    args[0] = if status.is_some() { 1 } else { 2 };
                    args[1] = status.unwrap_or(0) as u64;
                    push(probe_id("proc", "exit"), tid, s.pid);
                } else {
                    self.exit_status.remove(&tid);
                    args[0] = tid as u64;
                    push(probe_id("proc", "lwp-exit"), tid, s.pid);
                }
            }
            Decoder::Exec { filename } => {
                args[0] = filename.data_offset(raw).map_or(0, |o| RAW_BASE + o as u64);
                push(probe_id("proc", "exec"), s.tid, s.pid);
                push(probe_id("proc", "exec-success"), s.tid, s.pid);
            }
            Decoder::BlockIssue {
                dev,
                sector,
                bytes,
                rwbs,
            } => {
                let (dv, sec) = (
                    dev.int(raw, 0).unwrap_or(0),
                    sector.int(raw, 0).unwrap_or(0),
                );
                args[0] = bytes.int(raw, 0).unwrap_or(0);
                args[1] = sec.wrapping_mul(512);
                args[2] = io_key(dv, sec);
                args[3] = rwbs.bytes(raw).unwrap_or_default().contains(&b'W') as u64;
                args[4] = dv;
                push(probe_id("io", "start"), s.tid, s.pid);
            }
            Decoder::BlockComplete {
                dev,
                sector,
                nr_sector,
                error,
                rwbs,
            } => {
                let (dv, sec) = (
                    dev.int(raw, 0).unwrap_or(0),
                    sector.int(raw, 0).unwrap_or(0),
                );
                args[0] = nr_sector.int(raw, 0).unwrap_or(0).wrapping_mul(512);
                args[1] = sec.wrapping_mul(512);
                args[2] = io_key(dv, sec);
                args[3] = rwbs.bytes(raw).unwrap_or_default().contains(&b'W') as u64;
                args[4] = dv;
                args[5] = error.int(raw, 0).unwrap_or(0);
                push(probe_id("io", "done"), s.tid, s.pid);
            }
            Decoder::Profile { probe } => {
                let kernel = is_kernel_pc(s.ip);
                args[0] = if kernel { s.ip } else { 0 };
                args[1] = if kernel {
                    match user_sampled {
                        true => s.reg(ustack::REGS_MASK, record::x86_reg::IP).unwrap_or(0),
                        false => self.ustack.first().copied().unwrap_or(0),
                    }
                } else {
                    s.ip
                };
                push(Some(*probe), s.tid, s.pid);
            }
        }
        for &(probe, tid, pid_hint) in &fire[..n] {
            // a thread caught as it exits (its id already released) reads as -1: it has its
            // process's name
            let t = if tid == u32::MAX && pid_hint != 0 && pid_hint != u32::MAX {
                self.tasks.get(pid_hint, pid_hint)
            } else {
                self.tasks.get(tid, pid_hint)
            };
            let pid = if pid_hint != 0 { pid_hint } else { t.pid };
            if self.stacks
                && (user_sampled || !self.ustack.is_empty())
                && !self.noted.contains_key(&pid)
            {
                self.noted.insert(pid, ());
                self.symbols
                    .0
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .note_process_or(pid, user_stacks.borrow().recorded(pid));
            }
            let Some(p) = self.probes.get(&probe) else {
                continue;
            };
            let mem = LiveMemory {
                pid,
                raw,
                captured: &strings,
            };
            // thread 0 is the CPU's idle task: named as the kernel names it on that CPU; a
            // task perf gives no id (so far into its exit that its ids are released) is the
            // unknown thread that ETW sources also name `<unknown>`
            let comm = if tid == 0 {
                self.idle_names.of(s.cpu)
            } else if pid == u32::MAX && t.len == 0 {
                crate::etw::state::UNKNOWN_EXECNAME
            } else {
                t.comm()
            };
            let mut cx = FiringCtx::synthetic(p, ts, ts.wrapping_add(wall_off), comm);
            cx.args = args;
            cx.set_ids(pid, tid);
            cx.ppid = t.ppid as u64;
            cx.uid = u64::from(t.uid);
            cx.gid = u64::from(t.gid);
            cx.cpu = s.cpu;
            cx.errno = errno;
            cx.memory = &mem;
            cx.stack = &self.kstack;
            cx.ustack = &self.ustack;
            if let Some(r) = &uregs {
                cx.uregs = r;
                cx.ustack_lazy = Some(&lazy);
            }
            sink.fire(&cx);
        }
    }

    /// The losses no LOST record has told (a ring full at the end of the run, with no
    /// record after it), from the kernel's count of each event's lost samples.
    fn count_untold_losses(&mut self) {
        let mut per = vec![0u64; self.rings.len()];
        for &(ring, fd) in &self.lost_fds {
            if let (Some(n), Some(sum)) = (lost_samples(fd), per.get_mut(ring)) {
                *sum += n;
            }
        }
        for (ring, n) in per.into_iter().enumerate() {
            let seen = self.seen_lost.get(ring).copied().unwrap_or(0);
            if n > seen {
                self.lost[ring] += n - seen;
                self.seen_lost[ring] = n;
            }
        }
    }

    fn report_drops(&mut self, sink: &dyn Sink) {
        for (i, n) in self.lost.iter_mut().enumerate() {
            if *n > 0 {
                let msg = crate::output::messages::cpu_drops(
                    crate::output::messages::DropKind::Principal,
                    *n,
                    self.rings[i].cpu as i32,
                    false,
                );
                let prog = sink.prog();
                crate::output::stderr::write(&msg.replacen("dtx", prog, 1));
                *n = 0;
            }
        }
    }
}

/// `attr` with, when `user`, the user registers and a copy of the user stack in each sample
/// (the user frames are unwound from them) and no user part in the kernel's call chain.
fn with_user_stack(mut attr: PerfEventAttr, user: bool) -> PerfEventAttr {
    if user {
        attr.sample_type |= USER_STACK;
        attr.sample_regs_user = ustack::REGS_MASK;
        attr.sample_stack_user = ustack::STACK_BYTES;
        attr.flags |= flag::EXCLUDE_CALLCHAIN_USER;
    }
    attr
}

/// What a sample carries to unwind its user stack ([`with_user_stack`]).
const USER_STACK: u64 = sample::REGS_USER | sample::STACK_USER;

/// What a program that reads `uid` or `gid` is told where the kernel cannot report a
/// thread's new ids.
const IDS_AFTER_THE_FACT: &str = "uid and gid are read from /proc when a thread is first seen and \
     at each exec: a change by setuid() or the like, and the ids of a process gone before its \
     exec was read, are missed";

/// Whether a clause of the run reads `uid` or `gid`.
fn reads_ids(sink: &dyn Sink) -> bool {
    use crate::lang::builtins::var;
    sink.programs().iter().any(|p| {
        (p.clauses.iter()).any(|c| crate::ir::visit::reads_builtin(c, &[var::UID, var::GID]))
    })
}

/// The system calls of enabled `syscall::X:entry` probes that a clause calling `copyinstr()`
/// matches.
fn copyinstr_calls(sink: &dyn Sink, enabled: &[ProbeInfo]) -> Vec<u16> {
    use crate::ir::Node;
    let mut nrs = Vec::new();
    for program in sink.programs() {
        for c in &program.clauses {
            let mut uses = false;
            crate::ir::visit::visit_clause(
                c,
                &mut |n| {
                    if let Node::Call { subr, .. } = n {
                        uses |= *subr == crate::ir::Subr::Copyinstr;
                    }
                },
                &mut |_| {},
            );
            if !uses {
                continue;
            }
            for p in enabled {
                let Some((nr, false)) = syscall_of(p.id) else {
                    continue;
                };
                let hit = c.probes.iter().any(|d| {
                    crate::probes::glob_match(&d.provider, &p.provider)
                        && crate::providers::fields_match(d, &p.module, &p.function, &p.name)
                });
                if hit && !nrs.contains(&nr) {
                    nrs.push(nr);
                }
            }
        }
    }
    nrs
}

/// The capture programs of a run (see [`capture`]): one per system call with string
/// arguments, their two maps, and the tracepoint each attaches to; and the credentials
/// programs ([`capture::creds_program`]), which write into the same output events.
#[derive(Default)]
struct CapturePlan {
    /// (layout, program) per call.
    calls: Vec<(capture::CallLayout, OwnedFd)>,
    /// (program, tracepoint id, a filter no record of the tracepoint matches) of the
    /// credentials programs.
    creds: Vec<(OwnedFd, u32, &'static std::ffi::CStr)>,
    /// `sys_enter_X` tracepoint ids, by call.
    tracepoints: Vec<u32>,
    scratch: Option<OwnedFd>,
    events: Option<OwnedFd>,
}

impl CapturePlan {
    /// Loads the programs for `nrs` and, with `ids`, the credentials programs; where the
    /// kernel cannot (no BPF, no tracefs or tracepoints), says once what is read after the
    /// fact instead, and plans nothing of that part.
    fn prepare(root: Option<&Path>, nrs: &[u16], ids: bool) -> CapturePlan {
        let say = |what: &str, e: &str| {
            crate::output::stderr::say(
                "dtx",
                format_args!("{what} (it cannot be followed at the probe here: {e})"),
            );
        };
        let mut plan = CapturePlan::default();
        let root = match root {
            Some(r) => r,
            None => {
                if ids {
                    say(IDS_AFTER_THE_FACT, "tracefs is not mounted");
                }
                return plan;
            }
        };
        if !nrs.is_empty() {
            match Self::try_prepare(root, nrs) {
                Ok(p) => plan = p,
                Err(e) => say(
                    "copyinstr() on system call arguments reads the process after the call \
                     was recorded",
                    &e,
                ),
            }
        }
        if ids {
            if let Err(e) = plan.follow_ids(root) {
                plan.creds.clear();
                say(IDS_AFTER_THE_FACT, &e);
            }
        }
        plan
    }

    /// Whether any program writes into the output events.
    fn active(&self) -> bool {
        !self.calls.is_empty() || !self.creds.is_empty()
    }

    fn events_map() -> Result<OwnedFd, String> {
        let slots = online_cpus().iter().max().map_or(1, |m| m + 1);
        bpfsys::create_map(bpfsys::MAP_PERF_EVENT_ARRAY, 4, 4, slots)
            .map_err(|e| format!("BPF map: {e}"))
    }

    /// The credentials programs, on `raw_syscalls:sys_exit` and `sched:sched_process_exec`.
    fn follow_ids(&mut self, root: &Path) -> Result<(), String> {
        if self.events.is_none() {
            self.events = Some(Self::events_map()?);
        }
        let events = self.events.as_ref().map_or(-1, |f| f.as_raw_fd());
        let exit = load_format(root, "raw_syscalls", "sys_exit")?;
        let id_at = exit
            .fields
            .iter()
            .find(|f| f.name == "id" && f.size == 8)
            .and_then(|f| i16::try_from(f.offset).ok())
            .ok_or("raw_syscalls:sys_exit has no 8-byte `id` field")?;
        let exec = load_format(root, "sched", "sched_process_exec")?;
        for (fmt, at, never) in [(exit, Some(id_at), c"id < 0"), (exec, None, c"pid < 0")] {
            let prog = bpfsys::load_program(&capture::creds_program(events, at)?)
                .map_err(|e| format!("BPF program for {}: {e}", fmt.name))?;
            self.creds.push((prog, fmt.id, never));
        }
        Ok(())
    }

    fn try_prepare(root: &Path, nrs: &[u16]) -> Result<CapturePlan, String> {
        let scratch =
            bpfsys::create_map(bpfsys::MAP_PERCPU_ARRAY, 4, capture::RECORD_BYTES as u32, 1)
                .map_err(|e| format!("BPF map: {e}"))?;
        let mut plan = CapturePlan {
            scratch: Some(scratch),
            events: Some(Self::events_map()?),
            ..Default::default()
        };
        for &nr in nrs {
            let table = crate::providers::linux::syscalls::X86_64;
            let Some(&(_, name)) = table.iter().find(|(n, _)| *n == nr) else {
                continue;
            };
            // a call the kernel has no tracepoint of its own for (a name of dtx's table the
            // kernel spells differently) keeps the read after the fact
            let Ok(fmt) = load_format(root, "syscalls", &format!("sys_enter_{name}")) else {
                continue;
            };
            let Some(layout) = capture::CallLayout::from_format(nr, &fmt) else {
                continue;
            };
            let (s, e) = (
                plan.scratch.as_ref().map_or(-1, |f| f.as_raw_fd()),
                plan.events.as_ref().map_or(-1, |f| f.as_raw_fd()),
            );
            let prog = bpfsys::load_program(&capture::program(&layout, s, e))
                .map_err(|e| format!("BPF program for {name}: {e}"))?;
            plan.calls.push((layout, prog));
            plan.tracepoints.push(fmt.id);
        }
        Ok(plan)
    }

    /// Whether system call `nr` is captured.
    fn covers(&self, nr: u16) -> bool {
        self.calls.iter().any(|c| c.0.nr == nr)
    }

    /// On `cpu`: the output event the programs write into (entered in the event array at
    /// the CPU's slot, its records going to `ring`), and with `first` the call tracepoints
    /// with their programs attached. A tracepoint's programs belong to the tracepoint, not to
    /// one of its perf events: attached through one event (on one CPU), a program runs at
    /// every hit on every CPU, and attaching it again is refused (`EEXIST`).
    fn attach(
        &self,
        cpu: u32,
        first: bool,
        chain: u64,
        user: bool,
        data_bytes: u32,
        ring: &Ring,
    ) -> Result<(OwnedFd, Vec<OwnedFd>), String> {
        let fail = |what: &str, e: io::Error| format!("could not enable tracing: {what}: {e}");
        let out_attr = with_user_stack(
            PerfEventAttr {
                kind: TYPE_SOFTWARE,
                config: SW_BPF_OUTPUT,
                sample_period: 1,
                sample_type: COMMON | sample::RAW | chain,
                ..Default::default()
            },
            user,
        );
        let out = perf_event_open(&finish(out_attr, data_bytes), -1, cpu as i32)
            .map_err(|e| open_error(&format!("BPF output event on CPU {cpu}"), &e))?;
        // SAFETY: SET_OUTPUT takes the descriptor of the ring's event.
        if unsafe { libc::ioctl(out.as_raw_fd(), IOC_SET_OUTPUT, ring.fd.as_raw_fd()) } != 0 {
            return Err(fail("perf SET_OUTPUT", io::Error::last_os_error()));
        }
        if let Some(events) = &self.events {
            bpfsys::update_u32(events, cpu, out.as_raw_fd() as u32)
                .map_err(|e| fail("BPF event array", e))?;
        }
        let mut attached = Vec::new();
        let mut attach = |id: u32, prog: &OwnedFd, never: &std::ffi::CStr| {
            let fd = attach_program(id, cpu as i32, prog, never).map_err(|f| match f {
                AttachFailed::Open(e) => open_error(&format!("tracepoint {id} on CPU {cpu}"), &e),
                AttachFailed::SetBpf(e) => fail("BPF attach", e),
            })?;
            attached.push(fd);
            Ok::<(), String>(())
        };
        if first {
            for ((_, prog), &id) in self.calls.iter().zip(&self.tracepoints) {
                attach(id, prog, c"__syscall_nr < 0")?;
            }
            for (prog, id, never) in &self.creds {
                attach(*id, prog, never)?;
            }
        }
        Ok((out, attached))
    }
}

/// One I/O's identity, the same at `io:::start` and `io:::done`: device and sector.
fn io_key(dev: u64, sector: u64) -> u64 {
    (dev << 44) ^ sector
}

impl EventSource for PerfSource {
    fn pump(&mut self, deadline: u64, sink: &mut dyn Sink) -> SourceState {
        loop {
            self.drain_and_fire(sink, false);
            self.report_drops(sink);
            let now = sink.now_ns();
            if sink.done() || now >= deadline {
                // the timers due now may print aggregations: what the kernel holds first
                self.kernel.sync(sink);
                return SourceState::Running;
            }
            // records held back are due in a few ms
            let most = if self.holding {
                HOLD_NS.div_ceil(1_000_000)
            } else {
                1000
            };
            let ms = (deadline - now).div_ceil(1_000_000).min(most) as i32;
            let mut fds: Vec<libc::pollfd> = self
                .rings
                .iter()
                .map(|r| libc::pollfd {
                    fd: r.fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            // SAFETY: `fds` is a valid array of pollfd of the given length.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        }
    }

    fn finish(&mut self, sink: &mut dyn Sink) {
        // the events stay enabled: take what the rings hold now; a ring that overflowed reports
        // its loss only with the next record written after space was freed, so look once more
        self.drain_and_fire(sink, true);
        std::thread::sleep(std::time::Duration::from_millis(20));
        self.drain_and_fire(sink, true);
        self.count_untold_losses();
        self.report_drops(sink);
        self.kernel.sync(sink);
    }

    fn stop(&mut self) {
        self.kernel.detach();
        self._fds.clear();
        self._capture = CapturePlan::default();
    }

    fn closing(&mut self, sink: &mut dyn Sink) {
        // detached in stop(): the maps hold their last updates
        self.kernel.close(sink);
    }

    /// What the rings gave: the events that came to user space (those of clauses that run
    /// in the kernel stay there, counted in their aggregations) and what the rings lost.
    fn live_status(&mut self) -> Option<crate::sources::sink::LiveStatus> {
        Some(crate::sources::sink::LiveStatus {
            sessions: vec!["perf".into()],
            records: self.records,
            lost: self.seen_lost.iter().sum(),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_captured_at_the_probe_are_read_from_the_capture() {
        let captured = [
            Some((0x5000, Some(&b"/etc/hostname"[..]))),
            Some((0x9000, None)),
        ];
        let mem = LiveMemory {
            pid: 0,
            raw: &[],
            captured: &captured,
        };
        // a chunk that runs past the NUL: the string, then zeros
        let mut b = [0xaau8; 16];
        mem.read(0x5005, &mut b).unwrap();
        assert_eq!(&b, b"hostname\0\0\0\0\0\0\0\0");
        // the address the kernel could not read is the firing's fault
        assert_eq!(mem.read(0x9000, &mut b), Err(Fault::BadAddr(0x9000)));
        // anything else is the process's memory (none here: pid 0)
        assert_eq!(mem.read(0x7000, &mut b), Err(Fault::BadAddr(0x7000)));
        assert!(mem.read(0x500e, &mut b).is_err());
    }

    #[test]
    fn idle_tasks_are_named_by_cpu() {
        let mut n = IdleNames::default();
        assert_eq!(n.of(3), b"swapper/3");
        assert_eq!(n.of(0), b"swapper/0");
    }
}
