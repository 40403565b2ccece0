//! The debugger loop of the `pid` provider: int3 breakpoints at the sites of the enabled pid
//! probes of one target process; a hit stops the thread, the clauses run while it is stopped
//! (they read its registers, memory and stack), then the original instruction is emulated or
//! single-stepped and the thread resumes with the breakpoint still armed.
//!
//! The loop is platform-neutral over [`TargetProcess`]; `linux.rs` implements it with ptrace.
//! Modules loaded while tracing (`dlopen`) are noticed at the dynamic linker's
//! `_dl_debug_state` breakpoint, and probes of descriptions that name them are created and
//! enabled then.

#[cfg(target_os = "linux")]
pub mod linux;
#[cfg(windows)]
pub mod windows;

use std::collections::HashMap;

use crate::probes::{ProbeDesc, ProbeInfo};
use crate::providers::pid::{PidProvider, SiteKind};
use crate::sources::etw_live::clr::{ClrContext, EventWriteFn};
use crate::sources::sink::{EventSource, Sink, SourceState};
use crate::symbols::decode::Emulation;
use crate::symbols::ProcessModules;
use crate::vm::{AddressSpace, Fault, FiringCtx};

/// The `pid` provider with this platform's module reader: on Windows the debugger loop's
/// module list (or the loader's, read with psapi), elsewhere `/proc/PID/maps`. The provider
/// itself knows only the [`crate::providers::pid::ProcessReader`] trait.
pub fn pid_provider() -> PidProvider {
    #[cfg(windows)]
    {
        PidProvider::new(Box::new(windows::ModuleReader))
    }
    #[cfg(not(windows))]
    {
        PidProvider::new(Box::new(crate::providers::pid::ProcReader))
    }
}

/// x86-64 registers of a stopped thread. `gpr` is in [`crate::symbols::decode::GPR_ORDER`]:
/// rax rcx rdx rbx rsp rbp rsi rdi r8..r15.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Regs {
    pub gpr: [u64; 16],
    pub rip: u64,
    pub rflags: u64,
    pub cs: u64,
    pub ss: u64,
    pub ds: u64,
    pub es: u64,
    pub fs: u64,
    pub gs: u64,
    pub fs_base: u64,
    pub gs_base: u64,
}

pub const RAX: usize = 0;
pub const RCX: usize = 1;
pub const RDX: usize = 2;
pub const RBX: usize = 3;
pub const RSP: usize = 4;
pub const RBP: usize = 5;
pub const RSI: usize = 6;
pub const RDI: usize = 7;
pub const R8: usize = 8;
pub const R9: usize = 9;

impl Regs {
    /// `uregs[]` in the order of dtx's `regs.d` (dtrace's amd64 `R_*` indexes).
    pub fn uregs(&self) -> [u64; 28] {
        let g = &self.gpr;
        [
            g[15],
            g[14],
            g[13],
            g[12],
            g[11],
            g[10],
            g[9],
            g[8],
            g[RDI],
            g[RSI],
            g[RBP],
            g[RBX],
            g[RDX],
            g[RCX],
            g[RAX],
            3,
            0,
            self.rip,
            self.cs,
            self.rflags,
            g[RSP],
            self.ss,
            self.fs,
            self.gs,
            self.es,
            self.ds,
            self.fs_base,
            self.gs_base,
        ]
    }
}

/// Why a thread stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// SIGTRAP: a breakpoint (the pc is just after it) or a completed single step.
    Trap,
    /// A signal for the program, delivered when the thread resumes.
    Signal(i32),
    /// A stop of the debugger's own making (a new thread, a group stop): resume as it was.
    Quiet,
    /// The process forked `child` (stopped and traced until released).
    Fork { child: u32, vfork: bool },
    /// The thread called exec: the address space is new.
    Exec,
    /// A module was loaded or unloaded (Windows' LOAD_DLL / UNLOAD_DLL): the module list is
    /// read again and probes of new modules are created.
    Modules,
}

/// How the traced process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    Code(i32),
    Signal(i32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DebugEvent {
    Stopped {
        tid: u32,
        stop: Stop,
    },
    /// One thread ended; the process goes on.
    ThreadExited {
        tid: u32,
    },
    /// The process ended.
    Exited(ExitStatus),
    /// Nothing happened before the deadline.
    Timeout,
}

/// A process under the debugger's control. Every call happens on the thread that created it.
pub trait TargetProcess {
    fn pid(&self) -> u32;
    /// The Windows x64 calling convention (arguments in rcx rdx r8 r9, then on the stack
    /// above 32 bytes of home space) rather than System V's.
    fn win64(&self) -> bool {
        false
    }
    /// Reads target memory; false when any byte is unreadable.
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> bool;
    /// Writes target memory, read-only code pages too.
    fn write_memory(&self, addr: u64, data: &[u8]) -> bool;
    /// Writes code (breakpoints): [`TargetProcess::write_memory`] unless the platform has a
    /// quicker way for pages known to be read-only.
    fn write_code(&self, addr: u64, data: &[u8]) -> bool {
        self.write_memory(addr, data)
    }
    fn regs(&self, tid: u32) -> Option<Regs>;
    fn set_regs(&self, tid: u32, regs: &Regs) -> bool;
    /// Resumes a stopped thread, delivering `signal` when non-zero.
    fn resume(&mut self, tid: u32, signal: i32);
    /// Executes one instruction of a stopped thread.
    fn step(&mut self, tid: u32);
    /// Resumes every thread held stopped since the target was created or attached.
    fn resume_all(&mut self);
    /// Waits for the next event of any thread, until `deadline_ns` (the monotonic clock's ns)
    /// when given.
    fn wait(&mut self, deadline_ns: Option<u64>) -> DebugEvent;
    /// Waits for the next event of one thread (the end of a single step).
    fn wait_thread(&mut self, tid: u32) -> DebugEvent;
    /// A forked child inherited the breakpoints: writes back the original bytes in its
    /// memory and lets it go.
    fn release_child(&mut self, child: u32, restore: &[(u64, u8)]);
    /// Writes back the original bytes, stops every thread (rewinding those stopped just
    /// after a breakpoint) and detaches: the process runs on untraced.
    fn detach(&mut self, restore: &[(u64, u8)]);
    /// Ends the process (one dtx started that no run used), as dtrace does at exit.
    fn terminate(&mut self) {
        self.detach(&[]);
    }
    /// `/proc/PID/maps`-style text of the target's mappings and its executable's path.
    fn maps(&self) -> Option<(String, String)>;
    /// Maps `len` bytes of read+execute memory in the target, as near `near` as its free
    /// address space allows (for out-of-line copies of probed instructions), by having `tid`,
    /// stopped at one of our breakpoints, make the system call. `None` where the platform
    /// cannot: the debugger then single-steps those instructions in place.
    fn map_code(&mut self, _tid: u32, _near: u64, _len: u64) -> Option<u64> {
        None
    }
    /// The target's command name and parent pid.
    fn identity(&self) -> (Vec<u8>, u64);
    /// A thread held stopped since the target was created or attached (for
    /// [`TargetProcess::call_function`] and [`TargetProcess::map_code`] before any hit).
    fn held_thread(&self) -> Option<u32> {
        None
    }
    /// Has `tid`, held stopped, call the function at `func` with `data` copied onto its stack
    /// (that copy's address the first argument, `args` the next ones), then puts the thread
    /// back as it was. The function's return value, or `None` where the platform cannot or
    /// the call did not come back (the fpid agent is loaded and attached this way).
    fn call_function(&mut self, _tid: u32, _func: u64, _data: &[u8], _args: &[u64]) -> Option<u64> {
        None
    }
    /// The CLR method feed started for this process before it was grabbed, once (Windows).
    fn take_clr_feed(&mut self) -> Option<ClrFeed> {
        None
    }
}

/// Target memory as the VM sees it: `copyin`, `copyinstr`, `copyout`.
pub struct TargetMemory<'a>(pub &'a dyn TargetProcess);

impl AddressSpace for TargetMemory<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        if self.0.read_memory(addr, buf) {
            Ok(())
        } else {
            Err(Fault::BadAddr(addr))
        }
    }
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        if self.0.write_memory(addr, data) {
            Ok(())
        } else {
            Err(Fault::BadAddr(addr))
        }
    }
}

/// Where a site's instruction runs out of line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutOfLine {
    /// Not tried yet (done at the first hit, by the thread that hit it).
    Unknown,
    /// Relocated to this address of a scratch area.
    At(u64),
    /// Cannot be moved: emulated or single-stepped in place.
    Never,
}

/// Executable memory mapped in the target for out-of-line instructions.
struct Scratch {
    base: u64,
    used: u64,
}

/// Bytes of one scratch area.
const SCRATCH_SIZE: u64 = 64 * 1024;

/// One breakpoint.
struct Site {
    original: u8,
    emulation: Emulation,
    len: u8,
    /// The original instruction bytes (up to the longest x86 instruction).
    code: [u8; 16],
    code_len: u8,
    ool: OutOfLine,
    /// The probes firing here, in creation order, with what each reports.
    probes: Vec<(ProbeInfo, SiteKind)>,
    /// The dynamic linker's module-list hook.
    rtld: bool,
    /// libc's `write`, where a .NET runtime's perf map lines are seen as they are written.
    jit: bool,
    /// ntdll's `EtwEventWrite`/`EtwEventWriteTransfer`, where a .NET runtime's method events
    /// are seen as they are written (Windows).
    etw_write: Option<EventWriteFn>,
}

/// The CLR's method events of a .NET target (Windows): the ETW session on its pid and the
/// context its callback and the breakpoints on ntdll's event writing fill. The session is
/// stopped before the context goes. One started before a `-p` grab (its rundown the only one:
/// issue 42, finding 9) rides on the target ([`TargetProcess::take_clr_feed`]) until the loop
/// takes it, and goes with the target on every path where the loop never does.
pub struct ClrFeed {
    #[cfg(windows)]
    session: Option<crate::sources::etw_live::windows::ClrMethodSession>,
    context: Box<ClrContext>,
    /// The runtime's events seen at the EtwEventWrite breakpoints, and of them the rundown
    /// provider's: each was a stop of the target.
    at_event_write: u64,
    rundown_at_event_write: u64,
}

impl ClrFeed {
    /// A feed of a session already running on `context`'s process.
    #[cfg(windows)]
    pub fn running(
        session: crate::sources::etw_live::windows::ClrMethodSession,
        context: Box<ClrContext>,
    ) -> ClrFeed {
        ClrFeed {
            session: Some(session),
            context,
            at_event_write: 0,
            rundown_at_event_write: 0,
        }
    }

    /// A feed with no session (the events come from the breakpoints alone; tests).
    pub fn without_session(context: Box<ClrContext>) -> ClrFeed {
        ClrFeed {
            #[cfg(windows)]
            session: None,
            context,
            at_event_write: 0,
            rundown_at_event_write: 0,
        }
    }

    /// Starts the session on process `pid` (Windows; elsewhere there is none to start).
    fn start(pid: u32) -> Result<ClrFeed, String> {
        #[cfg(windows)]
        {
            let context = Box::new(ClrContext::new(
                pid,
                crate::sources::etw_live::windows::time_base(),
            ));
            let session =
                crate::sources::etw_live::windows::ClrMethodSession::start(pid, &context)?;
            Ok(ClrFeed::running(session, context))
        }
        #[cfg(not(windows))]
        {
            let _ = pid;
            Err("the CLR's ETW method events are read on Windows only".to_string())
        }
    }
}

impl ClrFeed {
    /// The feed of `target`: the one started before its grab (whose rundown the pid provider
    /// has read already), else a session started now, whose start rundown lists the code the
    /// process has (issue 42, finding 9: never both).
    fn of(target: &mut dyn TargetProcess) -> Result<ClrFeed, String> {
        match target.take_clr_feed() {
            Some(kept) => Ok(kept),
            None => ClrFeed::start(target.pid()),
        }
    }
}

impl Drop for ClrFeed {
    fn drop(&mut self) {
        #[cfg(windows)]
        if let Some(s) = &mut self.session {
            s.stop();
        }
        // what the feed saw, for the Windows workflow's test of finding 9 and for a user who
        // asks why a .NET target ran slowly while traced
        if std::env::var_os("DTX_CLR_STATS").is_some() {
            crate::output::stderr::say(
                "dtx",
                format_args!(
                    "the CLR's events of pid {}: {} in all, {} at EtwEventWrite ({} of the rundown)",
                    self.context.pid(),
                    self.context.records(),
                    self.at_event_write,
                    self.rundown_at_event_write
                ),
            );
        }
    }
}

/// Walks a user stack, innermost first: each frame by its module's `.eh_frame` rules (ELF) or
/// `.pdata`/`.xdata` unwind info (a Windows x64 target's PE images) where it has them (code
/// without frame pointers), else by the `rbp` chain; at a function's entry or its `ret`
/// (`at_edge`) the return address is at `[rsp]`.
pub fn walk_stack(
    t: &dyn TargetProcess,
    modules: &ProcessModules,
    regs: &Regs,
    at_edge: bool,
    max: usize,
    out: &mut Vec<u64>,
) {
    let read = |addr: u64| {
        let mut b = [0u8; 8];
        t.read_memory(addr, &mut b).then(|| u64::from_le_bytes(b))
    };
    if t.win64() {
        walk_win64_stack_in(&read, modules, regs, at_edge, max, out);
        return;
    }
    walk_stack_in(&read, modules, regs, at_edge, max, out);
}

/// [`walk_stack`] of a Windows x64 target over any source of stack words (a copy of the stack
/// taken at the hit): each frame by its PE image's `.pdata`/`.xdata` unwind info, else the
/// `rbp` chain.
pub fn walk_win64_stack_in(
    read: &dyn Fn(u64) -> Option<u64>,
    modules: &ProcessModules,
    regs: &Regs,
    at_edge: bool,
    max: usize,
    out: &mut Vec<u64>,
) {
    use crate::symbols::unwind_info::{walk, Win64Regs};
    let step = |r: &mut Win64Regs, innermost: bool| {
        // a return address may be just past its module's end: look up the call
        let at = if innermost {
            r.rip
        } else {
            r.rip.wrapping_sub(1)
        };
        let m = modules.module_at(at)?;
        let bias = m.bias;
        m.image
            .win64_step(r.rip.wrapping_sub(bias), innermost, r, read)
    };
    let start = Win64Regs {
        gpr: regs.gpr,
        rip: regs.rip,
    };
    walk(start, at_edge, max, &step, read, out);
}

/// The sampled stack of a hit as the clause's address space: bytes from the stack pointer up;
/// anything else is a bad address (the target was not stopped to be read).
pub struct SampledStack<'a> {
    pub base: u64,
    pub bytes: &'a [u8],
}

impl AddressSpace for SampledStack<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let off = addr.wrapping_sub(self.base) as usize;
        match self.bytes.get(off..off.saturating_add(buf.len())) {
            Some(b) if addr >= self.base => {
                buf.copy_from_slice(b);
                Ok(())
            }
            _ => Err(Fault::BadAddr(addr)),
        }
    }
    fn write(&self, addr: u64, _data: &[u8]) -> Result<(), Fault> {
        Err(Fault::BadAddr(addr))
    }
}

/// [`walk_stack`] over any source of stack words (a copy of the stack taken by the kernel).
pub fn walk_stack_in(
    read: &dyn Fn(u64) -> Option<u64>,
    modules: &ProcessModules,
    regs: &Regs,
    at_edge: bool,
    max: usize,
    out: &mut Vec<u64>,
) {
    use crate::symbols::cfi::{unwind, StepRegs};
    let rule_at = |pc: u64| {
        let m = modules.module_at(pc)?;
        m.image.frame_rule(pc.wrapping_sub(m.bias))
    };
    let start = StepRegs {
        pc: regs.rip,
        rsp: regs.gpr[RSP],
        rbp: regs.gpr[RBP],
    };
    unwind(start, at_edge, max, &rule_at, read, out);
}

/// Why the clauses of process `pid`'s probes need the target stopped at each hit (they read
/// or write its memory, or act on the process), or `None` when a copy of its registers and
/// stack taken at the hit is all they read: then a kernel uprobe can serve them.
pub fn stopped_target_needed(sink: &dyn Sink, pid: u32) -> Option<String> {
    use crate::ir::{ActionKind, Node};
    let provider = format!("pid{pid}");
    for program in sink.programs() {
        for c in &program.clauses {
            if !c
                .probes
                .iter()
                .any(|d| crate::probes::glob_match(&d.provider, &provider))
            {
                continue;
            }
            let why = std::cell::RefCell::new(None::<String>);
            let note = |w: Option<&str>| {
                let mut why = why.borrow_mut();
                if let (Some(w), None) = (w, &*why) {
                    *why = Some(w.to_string());
                }
            };
            crate::ir::visit::visit_clause(
                c,
                &mut |n| {
                    let w = match n {
                        Node::Load { .. } | Node::Bitfield { .. } => Some("a memory load"),
                        Node::Stringof(_) => Some("stringof()"),
                        Node::Call { subr, name, .. } if subr.copies() => Some(*name),
                        _ => None,
                    };
                    note(w);
                },
                &mut |a| {
                    let w = match a {
                        ActionKind::Copyout => Some("copyout()"),
                        ActionKind::Copyoutstr => Some("copyoutstr()"),
                        ActionKind::Stop => Some("stop()"),
                        ActionKind::Raise => Some("raise()"),
                        ActionKind::System(_) => Some("system()"),
                        ActionKind::Jstack { .. } => Some("jstack()"),
                        ActionKind::Tracemem => Some("tracemem()"),
                        _ => None,
                    };
                    note(w);
                },
            );
            if let Some(w) = why.into_inner() {
                // `-n`/`-P`... programs have no lines: name the clause by its description
                return Some(match (c.line, c.probes.first()) {
                    (0, Some(d)) => format!("the clause of {d} uses {w}"),
                    (line, _) => format!("the clause at line {line} uses {w}"),
                });
            }
        }
    }
    None
}

/// A pid source handed over to another backend: the target (still stopped, breakpoints
/// removed) and where each enabled probe fires.
pub struct PidPlan {
    pub target: Box<dyn TargetProcess>,
    pub modules: ProcessModules,
    pub execname: Vec<u8>,
    pub ppid: u64,
    pub want_ustack: bool,
    pub args_used: usize,
    pub announce: bool,
    pub created: bool,
    /// Run-time address of each site and the probes firing there.
    pub sites: Vec<(u64, Vec<(ProbeInfo, SiteKind)>)>,
    /// For sites that are the one `ret` of their function and fire only `return` probes: the
    /// function's entry (a return probe there, a uretprobe, catches the same returns).
    pub return_of: HashMap<u64, u64>,
    /// Descriptions of this process's probes that matched none at the start (they may name a
    /// module loaded later).
    pub unmatched: Vec<ProbeDesc>,
}

/// The `pid` provider's event source: one traced process.
pub struct PidSource {
    target: Box<dyn TargetProcess>,
    provider: PidProvider,
    sites: HashMap<u64, Site>,
    modules: ProcessModules,
    execname: Vec<u8>,
    ppid: u64,
    /// Descriptions naming this process, retried when modules appear.
    descs: Vec<ProbeDesc>,
    /// Collect `ustack()` frames at firings.
    pub want_ustack: bool,
    /// How many arguments the clauses read (`argN` up to N-1; `args[]`: all ten): those past
    /// the ABI's registers are read from the stack at a hit.
    args_used: usize,
    /// Print dtrace's notice when the process ends.
    pub announce: bool,
    /// Whether dtx started the process (`-c`).
    pub created: bool,
    /// Whether a started process ends with this source (the command line's run, as dtrace
    /// ends the `-c` command it created); the console keeps its target across runs and ends
    /// it with the session.
    pub end_created: bool,
    ustack: Vec<u64>,
    exec_lost: bool,
    ended: bool,
    /// The threads held stopped at creation were let go.
    running: bool,
    /// Hits of breakpoints, for benches and tests.
    pub hits: u64,
    /// Scratch areas holding relocated instructions.
    scratch: Vec<Scratch>,
    /// Mapping a scratch area failed once: no more tries.
    scratch_failed: bool,
    /// Run instructions out of line (else emulate or single-step them in place).
    pub out_of_line: bool,
    /// The target runs .NET and the run names its probes: managed code is followed as the
    /// runtime compiles it (its perf map, read at libc's `write` and at each pump).
    managed: bool,
    /// The file descriptor of the runtime's perf map in the target, once seen.
    perf_map_fd: Option<i32>,
    /// The unarmed managed probes were reported.
    unarmed_said: bool,
    /// The CLR's method events of a .NET target on Windows, once its managed code is followed.
    clr: Option<ClrFeed>,
    /// Starting the CLR's method session failed once (said then; not tried again).
    clr_failed: bool,
    /// When the methods the CLR's events named were last taken ([`monotonic_ns`]).
    clr_taken_at: u64,
}

impl PidSource {
    /// Plants the breakpoints of the enabled probes of the target (the engine already knows
    /// them) and of the dynamic linker hook; the target stays stopped until the first pump.
    pub fn new(target: Box<dyn TargetProcess>, provider: PidProvider, sink: &dyn Sink) -> Self {
        let pid = target.pid();
        let (execname, ppid) = target.identity();
        let modules = provider.modules_of(pid).unwrap_or_default();
        let mut descs = Vec::new();
        for program in sink.programs() {
            for c in &program.clauses {
                for d in &c.probes {
                    if crate::probes::glob_match(&d.provider, &format!("pid{pid}"))
                        && !descs.contains(d)
                    {
                        descs.push(d.clone());
                    }
                }
            }
        }
        let mut s = PidSource {
            target,
            provider,
            sites: HashMap::new(),
            modules,
            execname,
            ppid,
            descs,
            want_ustack: false,
            args_used: sink
                .programs()
                .into_iter()
                .map(|program| {
                    let mut used = 0;
                    crate::ir::visit::visit_nodes(program, &mut |n| match n {
                        crate::ir::Node::Arg(i) => used = used.max(*i as usize + 1),
                        crate::ir::Node::Args { .. } => used = 10,
                        _ => {}
                    });
                    used
                })
                .max()
                .unwrap_or(0),
            announce: true,
            created: false,
            end_created: false,
            ustack: Vec::with_capacity(64),
            exec_lost: false,
            ended: false,
            running: false,
            hits: 0,
            scratch: Vec::new(),
            scratch_failed: false,
            out_of_line: true,
            managed: false,
            perf_map_fd: None,
            unarmed_said: false,
            clr: None,
            clr_failed: false,
            clr_taken_at: 0,
        };
        s.managed = !s.descs.is_empty() && s.provider.is_dotnet(pid);
        if !s.managed {
            // a method session started before the grab follows nothing now: stopped at once
            drop(s.target.take_clr_feed());
        }
        let probes = s.provider.probes_of(pid);
        for p in probes {
            if sink.is_enabled(p.info.id) {
                s.plant(&p.info, &p.sites);
            }
        }
        s.plant_rtld_hook();
        s.plant_jit_hook();
        s
    }

    /// A breakpoint on libc's `write` in a .NET target: CoreCLR writes each perf map line
    /// with one `write` as the JIT finishes a method and before the code is used, so the
    /// probes of a method are armed before its code first runs (every `write` of the process
    /// stops it once; see docs/pid.md).
    ///
    /// On Windows the runtime's method events are read instead: an ETW session on the
    /// target's pid enables them (and has the rundown list the code there now), and
    /// breakpoints on ntdll's `EtwEventWrite` and `EtwEventWriteTransfer` see each as the
    /// runtime writes it, after the JIT finished the method and before its code is used
    /// (`etw_live::clr`).
    fn plant_jit_hook(&mut self) {
        if !self.managed {
            return;
        }
        if self.target.win64() {
            self.start_clr();
            if self.clr.is_none() || self.sites.values().any(|s| s.etw_write.is_some()) {
                return;
            }
            let ntdll = |name: &str| name.eq_ignore_ascii_case("ntdll.dll");
            self.plant_hook(&ntdll, EventWriteFn::ALL[0].0, |s| {
                s.etw_write = Some(EventWriteFn::Write)
            });
            self.plant_hook(&ntdll, EventWriteFn::ALL[1].0, |s| {
                s.etw_write = Some(EventWriteFn::WriteTransfer)
            });
            return;
        }
        if self.sites.values().any(|s| s.jit) {
            return;
        }
        let libc = |name: &str| name.starts_with("libc.so") || name.starts_with("libc-");
        self.plant_hook(&libc, "write", |s| s.jit = true);
    }

    /// Starts the session of the CLR's method events on the target (once); when it cannot be
    /// started, says that the managed probes will not be armed.
    fn start_clr(&mut self) {
        if self.clr.is_some() || self.clr_failed {
            return;
        }
        let pid = self.target.pid();
        match ClrFeed::of(&mut *self.target) {
            Ok(f) => self.clr = Some(f),
            Err(e) => {
                self.clr_failed = true;
                crate::output::stderr::say(
                    "dtx",
                    format_args!(
                        "warning: the .NET methods of pid {pid} cannot be followed, so their probes stay unarmed: {e}"
                    ),
                );
            }
        }
    }

    /// A stop at ntdll's `which`: when it writes one of the runtime's method or module
    /// events, the method table takes it, and a method compiled now is armed at once.
    fn clr_written(&mut self, tid: u32, regs: &Regs, which: EventWriteFn, sink: &mut dyn Sink) {
        let Some(clr) = &mut self.clr else {
            return;
        };
        let g = &regs.gpr;
        let t = &*self.target;
        let read = |addr: u64, buf: &mut [u8]| t.read_memory(addr, buf);
        let Some((desc, payload)) = crate::sources::etw_live::clr::event_write(
            which,
            [g[RCX], g[RDX], g[R8], g[R9]],
            g[RSP],
            &read,
        ) else {
            return;
        };
        let (id, task) = (desc.id, desc.task);
        let Some(ev) = crate::sources::etw_live::clr::written_event(desc, payload, t.pid(), tid)
        else {
            return;
        };
        clr.context.observe_live(&ev);
        // the runtime's MethodLoadVerbose and R2RGetEntryPoint: code about to run; a
        // rundown's thousands of events are taken at the next wait, or every 100 ms while the
        // target keeps the loop busy
        let provider = crate::sources::etw_live::clr::provider_of_task(id, task);
        clr.at_event_write += 1;
        if provider == Some(crate::providers::etw::dnet::RUNDOWN) {
            clr.rundown_at_event_write += 1;
        }
        let runtime = provider == Some(crate::providers::etw::dnet::RUNTIME);
        let now = monotonic_ns();
        if (runtime && matches!(id, 143 | crate::providers::etw::dnet::R2R_GET_ENTRY_POINT))
            || now.saturating_sub(self.clr_taken_at) > 100_000_000
        {
            self.clr_changed(false, sink);
        }
    }

    /// Arms the probes of the methods the CLR's events named since the last call (`all`: also
    /// those whose assembly no event named).
    fn clr_changed(&mut self, all: bool, sink: &mut dyn Sink) {
        let Some(clr) = &self.clr else {
            return;
        };
        self.clr_taken_at = monotonic_ns();
        let methods = clr.context.take_ready(all);
        if methods.is_empty() {
            return;
        }
        let pid = self.target.pid();
        for (info, sites, by) in self.provider.managed_methods(pid, methods, &self.descs) {
            if !by.is_empty() && !sink.is_enabled(info.id) {
                sink.enable_created_probe(info.clone(), &by);
            }
            if sink.is_enabled(info.id) {
                self.plant(&info, &sites);
            }
        }
    }

    /// Managed code appeared (`text`: perf map lines seen at `write`; `None`: read the perf
    /// map file): arm the probes of its methods, creating those the descriptions name.
    fn managed_changed(&mut self, text: Option<&str>, sink: &mut dyn Sink) {
        let pid = self.target.pid();
        for (info, sites, by) in self.provider.managed_code(pid, text, &self.descs) {
            if !by.is_empty() && !sink.is_enabled(info.id) {
                sink.enable_created_probe(info.clone(), &by);
            }
            if sink.is_enabled(info.id) {
                self.plant(&info, &sites);
            }
        }
    }

    /// A stop at libc's `write`: when it writes to the runtime's perf map, the lines it
    /// writes name new code.
    fn jit_write(&mut self, regs: &Regs, sink: &mut dyn Sink) {
        let fd = regs.gpr[RDI] as i32;
        let (buf, len) = (regs.gpr[RSI], regs.gpr[RDX]);
        if self.perf_map_fd != Some(fd) {
            let pid = self.target.pid();
            let Some(path) = self.provider.perf_map_path(pid) else {
                return;
            };
            let Ok(link) = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")) else {
                return;
            };
            if link != path && link.file_name() != path.file_name() {
                return;
            }
            self.perf_map_fd = Some(fd);
        }
        // one line is about a hundred bytes; more than this is not a perf map line
        let mut b = vec![0u8; len.min(64 * 1024) as usize];
        if !self.target.read_memory(buf, &mut b) {
            return;
        }
        let text = String::from_utf8_lossy(&b).into_owned();
        self.managed_changed(Some(&text), sink);
    }

    /// Says which managed probes never got code (once, at the end of the run).
    fn report_unarmed(&mut self) {
        if self.unarmed_said {
            return;
        }
        self.unarmed_said = true;
        for p in self.provider.unarmed_managed(self.target.pid()) {
            crate::output::stderr::say(
                "dtx",
                format_args!(
                    "description '{}:{}:{}:{}' matched 1 probe, armed 0 times: not JIT-compiled yet",
                    p.provider, p.module, p.function, p.name
                ),
            );
        }
    }

    /// Whether the run follows the target's managed code (its probes can only be breakpoints:
    /// a uprobe needs a file-backed mapping, and JIT code is anonymous memory).
    pub fn follows_managed_code(&self) -> bool {
        self.managed
    }

    /// Removes the perf map files of a process dtx started with the perf map turned on by
    /// dtx alone (the runtime leaves them behind).
    fn remove_perf_maps(&self) {
        if !self.created || !perf_map_set_by_dtx() {
            return;
        }
        if let Some(path) = self.provider.perf_map_path(self.target.pid()) {
            let _ = std::fs::remove_file(&path);
            let info = path.with_file_name(format!("perfinfo-{}.map", self.target.pid()));
            let _ = std::fs::remove_file(info);
        }
    }

    fn plant(&mut self, info: &ProbeInfo, sites: &[crate::providers::pid::ProbeSite]) {
        for ps in sites {
            if let Some(site) = self.sites.get_mut(&ps.addr) {
                site.probes.push((info.clone(), ps.kind));
                continue;
            }
            let (code, code_len) = self.read_code(ps.addr);
            if code_len == 0 || !self.target.write_code(ps.addr, &[0xcc]) {
                continue;
            }
            self.sites.insert(
                ps.addr,
                Site {
                    original: code[0],
                    emulation: ps.emulation,
                    len: ps.len,
                    code,
                    code_len,
                    ool: OutOfLine::Unknown,
                    probes: vec![(info.clone(), ps.kind)],
                    rtld: false,
                    jit: false,
                    etw_write: None,
                },
            );
        }
    }

    /// A breakpoint on the dynamic linker's `_dl_debug_state` (called around every change of
    /// the module list) when some description may name modules loaded later.
    fn plant_rtld_hook(&mut self) {
        if self.descs.is_empty() {
            return;
        }
        self.plant_hook(&|_: &str| true, "_dl_debug_state", |s| s.rtld = true);
    }

    /// A breakpoint of dtx's own on the function `name` of the first module `module` accepts
    /// that has it, marked by `mark` (as the dynamic linker's or the JIT's hook); an existing
    /// probe site there is marked instead.
    fn plant_hook(&mut self, module: &dyn Fn(&str) -> bool, name: &str, mark: fn(&mut Site)) {
        let Some((addr, emulation, len)) = self.modules.modules.iter().find_map(|m| {
            if !module(&m.name) {
                return None;
            }
            let f = m.image.function(name)?;
            let start = f.addr.wrapping_add(m.bias);
            let code = m.image.bytes(f.addr, f.size)?;
            let first = *crate::symbols::decode::function(code, start).first()?;
            Some((start, first.emulation, first.len))
        }) else {
            return;
        };
        if let Some(s) = self.sites.get_mut(&addr) {
            mark(s);
            return;
        }
        let (code, code_len) = self.read_code(addr);
        if code_len != 0 && self.target.write_code(addr, &[0xcc]) {
            let mut site = Site {
                original: code[0],
                emulation,
                len,
                code,
                code_len,
                ool: OutOfLine::Unknown,
                probes: Vec::new(),
                rtld: false,
                jit: false,
                etw_write: None,
            };
            mark(&mut site);
            self.sites.insert(addr, site);
        }
    }

    /// The bytes at `addr` before a breakpoint goes there: 16, or as many as are readable.
    fn read_code(&self, addr: u64) -> ([u8; 16], u8) {
        let mut b = [0u8; 16];
        for n in [16usize, 8, 4, 2, 1] {
            if self.target.read_memory(addr, &mut b[..n]) {
                return (b, n as u8);
            }
        }
        (b, 0)
    }

    /// The out-of-line copy of the instruction at `addr` (a site), made at its first hit by
    /// `tid`: relocated into a scratch area near it (one is mapped when none has room or
    /// reach). `None` when it cannot be moved.
    fn out_of_line_at(&mut self, tid: u32, addr: u64) -> Option<u64> {
        use crate::symbols::decode::{relocate, MAX_RELOCATED};
        let site = self.sites.get(&addr)?;
        match site.ool {
            OutOfLine::At(a) => return Some(a),
            OutOfLine::Never => return None,
            OutOfLine::Unknown => {}
        }
        let code = site.code;
        let code = &code[..site.code_len as usize];
        let mut placed = None;
        // movable at all (its own address is always in reach)
        if self.out_of_line && relocate(code, addr, addr).is_some() {
            for sc in &mut self.scratch {
                if SCRATCH_SIZE - sc.used < MAX_RELOCATED as u64 {
                    continue;
                }
                let at = sc.base + sc.used;
                if let Some(bytes) = relocate(code, addr, at) {
                    sc.used += (bytes.len() as u64).div_ceil(16) * 16;
                    placed = Some((at, bytes));
                    break;
                }
            }
            if placed.is_none() && !self.scratch_failed {
                match self.target.map_code(tid, addr, SCRATCH_SIZE) {
                    Some(base) => {
                        if let Some(bytes) = relocate(code, addr, base) {
                            placed = Some((base, bytes.clone()));
                            self.scratch.push(Scratch {
                                base,
                                used: (bytes.len() as u64).div_ceil(16) * 16,
                            });
                        } else {
                            self.scratch.push(Scratch { base, used: 0 });
                        }
                    }
                    None => self.scratch_failed = true,
                }
            }
        }
        let ool = match placed {
            Some((at, bytes)) if self.target.write_code(at, &bytes) => OutOfLine::At(at),
            _ => OutOfLine::Never,
        };
        if let Some(site) = self.sites.get_mut(&addr) {
            site.ool = ool;
        }
        match ool {
            OutOfLine::At(a) => Some(a),
            _ => None,
        }
    }

    /// The traced process.
    pub fn pid(&self) -> u32 {
        self.target.pid()
    }

    /// The target, still held stopped before the first pump (the fpid hooks go in then).
    pub fn target_mut(&mut self) -> &mut dyn TargetProcess {
        &mut *self.target
    }

    /// Whether the run has `pid` probes in this process (breakpoints, or descriptions naming
    /// the provider that may match modules loaded later).
    pub fn has_pid_probes(&self) -> bool {
        self.descs.iter().any(|d| d.provider.starts_with("pid"))
            || self.sites.values().any(|s| !s.probes.is_empty())
    }

    /// Runs `f` on the target with every breakpoint taken out (code the target runs for `f`,
    /// such as the fpid agent's loading, must not trap), then puts them back.
    pub fn without_breakpoints<R>(&mut self, f: impl FnOnce(&mut dyn TargetProcess) -> R) -> R {
        for (addr, s) in &self.sites {
            self.target.write_code(*addr, &[s.original]);
        }
        let r = f(&mut *self.target);
        for addr in self.sites.keys() {
            self.target.write_code(*addr, &[0xcc]);
        }
        r
    }

    /// The addresses of the breakpoints of `pid` probes.
    pub fn probe_sites(&self) -> Vec<u64> {
        self.sites
            .iter()
            .filter(|(_, s)| !s.probes.is_empty())
            .map(|(a, _)| *a)
            .collect()
    }

    /// How many arguments the clauses read (see the field).
    pub fn args_used(&self) -> usize {
        self.args_used
    }

    /// Descriptions of this process's probes that matched no enabled probe.
    fn unmatched(&self, sink: &dyn Sink) -> Vec<ProbeDesc> {
        let provider = format!("pid{}", self.target.pid());
        self.descs
            .iter()
            .filter(|d| {
                !sink.enabled_probes().any(|p| {
                    p.provider == provider
                        && (d.module == "a.out" || crate::probes::glob_match(&d.module, &p.module))
                        && crate::probes::glob_match(&d.function, &p.function)
                        && crate::probes::glob_match(&d.name, &p.name)
                })
            })
            .cloned()
            .collect()
    }

    /// Whether every probe site is in the target's main executable (a uprobe in a shared
    /// library traps in every process that maps it).
    pub fn sites_in_executable(&self) -> bool {
        self.sites.iter().all(|(a, s)| {
            s.probes.is_empty() || self.modules.module_at(*a).is_some_and(|m| m.is_exec)
        })
    }

    /// Whether a description of this process's probes matched none (it may name a module
    /// loaded later).
    pub fn has_unmatched(&self, sink: &dyn Sink) -> bool {
        !self.unmatched(sink).is_empty()
    }

    /// Takes the breakpoints out (the target stays stopped) and hands the target and its probe
    /// sites over (to the uprobe backend).
    pub fn into_plan(self, sink: &dyn Sink) -> PidPlan {
        for (addr, s) in &self.sites {
            self.target.write_code(*addr, &[s.original]);
        }
        let unmatched = self.unmatched(sink);
        let probes = self.provider.probes_of(self.target.pid());
        let mut return_of = HashMap::new();
        for (addr, site) in &self.sites {
            let only_returns = !site.probes.is_empty()
                && site.probes.iter().all(|(info, kind)| {
                    matches!(kind, SiteKind::Return { .. })
                        && probes
                            .iter()
                            .find(|p| p.info.id == info.id)
                            .is_some_and(|p| p.sites.len() == 1)
                });
            if !only_returns || site.original != 0xc3 {
                continue;
            }
            let entry = self.modules.module_at(*addr).and_then(|m| {
                let f = m.image.function_at(addr.wrapping_sub(m.bias))?;
                Some(f.addr.wrapping_add(m.bias))
            });
            if let Some(e) = entry {
                return_of.insert(*addr, e);
            }
        }
        let sites = self
            .sites
            .into_iter()
            .filter(|(_, s)| !s.probes.is_empty())
            .map(|(a, s)| (a, s.probes))
            .collect();
        PidPlan {
            target: self.target,
            modules: self.modules,
            execname: self.execname,
            ppid: self.ppid,
            want_ustack: self.want_ustack,
            args_used: self.args_used,
            announce: self.announce,
            created: self.created,
            sites,
            return_of,
            unmatched,
        }
    }

    fn restore_list(&self) -> Vec<(u64, u8)> {
        self.sites.iter().map(|(a, s)| (*a, s.original)).collect()
    }

    /// New modules: create the probes the run's descriptions name in them and arm them.
    fn modules_changed(&mut self, sink: &mut dyn Sink) {
        let pid = self.target.pid();
        let new = self.provider.refresh_modules(pid);
        if let Some(m) = self.provider.modules_of(pid) {
            self.modules = m;
        }
        if !self.managed && !self.descs.is_empty() && self.provider.is_dotnet(pid) {
            self.managed = true;
        }
        self.plant_jit_hook();
        if new.is_empty() {
            return;
        }
        // each new probe with the descriptions that made it
        let mut created: Vec<(ProbeInfo, Vec<ProbeDesc>)> = Vec::new();
        for d in &self.descs {
            for info in self.provider.create_in(pid, d, &new).unwrap_or_default() {
                match created.iter_mut().find(|(i, _)| i.id == info.id) {
                    Some((_, by)) => by.push(d.clone()),
                    None => created.push((info, vec![d.clone()])),
                }
            }
        }
        if created.is_empty() {
            return;
        }
        let probes = self.provider.probes_of(pid);
        for (info, by) in created {
            if sink.is_enabled(info.id) {
                continue;
            }
            sink.enable_created_probe(info.clone(), &by);
            if let Some(p) = probes.iter().find(|p| p.info.id == info.id) {
                let sites = p.sites.clone();
                self.plant(&info, &sites);
            }
        }
    }

    /// A thread stopped on a trap: fire the probes of the breakpoint, step over it, resume.
    fn breakpoint(&mut self, tid: u32, sink: &mut dyn Sink) -> Option<SourceState> {
        let mut regs = self.target.regs(tid)?;
        let addr = regs.rip.wrapping_sub(1);
        let Some(site) = self.sites.get(&addr) else {
            // the program's own trap
            self.target.resume(tid, SIGTRAP);
            return None;
        };
        self.hits += 1;
        regs.rip = addr;
        let rtld = site.rtld;
        let site_jit = site.jit;
        let etw_write = site.etw_write;
        let (emulation, len, original) = (site.emulation, site.len, site.original);
        if !site.probes.is_empty() {
            let probes = site.probes.clone();
            self.fire(tid, &regs, &probes, sink);
        }
        if rtld {
            self.modules_changed(sink);
        }
        if site_jit && self.managed {
            self.jit_write(&regs, sink);
        }
        if let Some(which) = etw_write.filter(|_| self.managed) {
            self.clr_written(tid, &regs, which, sink);
        }
        self.step_over(tid, &mut regs, addr, emulation, len, original)
    }

    fn fire(
        &mut self,
        tid: u32,
        regs: &Regs,
        probes: &[(ProbeInfo, SiteKind)],
        sink: &mut dyn Sink,
    ) {
        let uregs = regs.uregs();
        let g = &regs.gpr;
        let win64 = self.target.win64();
        let mut entry_args = if win64 {
            [g[RCX], g[RDX], g[R8], g[R9], 0, 0, 0, 0, 0, 0]
        } else {
            [g[RDI], g[RSI], g[RDX], g[RCX], g[R8], g[R9], 0, 0, 0, 0]
        };
        let mut stack_read = self.args_used <= if win64 { 4 } else { 6 };
        let now = sink.now_ns();
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        for (info, kind) in probes {
            if !sink.is_enabled(info.id) {
                continue;
            }
            let args = match kind {
                SiteKind::Return { offset } => [*offset, g[RAX], g[RDX], 0, 0, 0, 0, 0, 0, 0],
                _ => {
                    if !stack_read {
                        // arguments past the registers are on the stack, above the return
                        // address (and, on Windows, the four registers' home space)
                        let (first, at) = if win64 {
                            (4, g[RSP] + 0x28)
                        } else {
                            (6, g[RSP] + 8)
                        };
                        let mut b = [0u8; 48];
                        let n = (10 - first) * 8;
                        if self.target.read_memory(at, &mut b[..n]) {
                            for i in 0..10 - first {
                                entry_args[first + i] = u64::from_le_bytes(
                                    b[i * 8..i * 8 + 8].try_into().unwrap_or_default(),
                                );
                            }
                        }
                        stack_read = true;
                    }
                    entry_args
                }
            };
            if self.want_ustack {
                let at_edge = matches!(kind, SiteKind::Entry | SiteKind::Return { .. });
                let mut frames = std::mem::take(&mut self.ustack);
                walk_stack(
                    &*self.target,
                    &self.modules,
                    regs,
                    at_edge,
                    100,
                    &mut frames,
                );
                self.ustack = frames;
            }
            let mem = TargetMemory(&*self.target);
            let mut cx = FiringCtx::synthetic(info, now, wall, &self.execname);
            cx.args = args;
            cx.pid = self.target.pid() as u64;
            cx.ppid = self.ppid;
            cx.tid = tid as u64;
            cx.memory = &mem;
            cx.uregs = &uregs;
            cx.ustack = &self.ustack;
            sink.fire(&cx);
        }
    }

    fn step_over(
        &mut self,
        tid: u32,
        regs: &mut Regs,
        addr: u64,
        emulation: Emulation,
        len: u8,
        original: u8,
    ) -> Option<SourceState> {
        let next = addr + len as u64;
        if !matches!(emulation, Emulation::Skip | Emulation::MovReg(..)) {
            if let Some(at) = self.out_of_line_at(tid, addr) {
                regs.rip = at;
                self.target.set_regs(tid, regs);
                self.target.resume(tid, 0);
                return None;
            }
        }
        match emulation {
            Emulation::Skip => {
                regs.rip = next;
            }
            Emulation::Push(r) => {
                let v = regs.gpr[r as usize];
                let sp = regs.gpr[RSP].wrapping_sub(8);
                if !self.target.write_memory(sp, &v.to_le_bytes()) {
                    return self.single_step(tid, regs, addr, original);
                }
                regs.gpr[RSP] = sp;
                regs.rip = next;
            }
            Emulation::MovReg(d, s) => {
                regs.gpr[d as usize] = regs.gpr[s as usize];
                regs.rip = next;
            }
            Emulation::Ret => {
                let mut b = [0u8; 8];
                if !self.target.read_memory(regs.gpr[RSP], &mut b) {
                    return self.single_step(tid, regs, addr, original);
                }
                regs.rip = u64::from_le_bytes(b);
                regs.gpr[RSP] = regs.gpr[RSP].wrapping_add(8);
            }
            Emulation::SubRsp(_) | Emulation::Step => {
                return self.single_step(tid, regs, addr, original);
            }
        }
        self.target.set_regs(tid, regs);
        self.target.resume(tid, 0);
        None
    }

    /// Puts the original byte back, executes the instruction alone, re-arms the breakpoint.
    fn single_step(
        &mut self,
        tid: u32,
        regs: &Regs,
        addr: u64,
        original: u8,
    ) -> Option<SourceState> {
        self.target.write_code(addr, &[original]);
        self.target.set_regs(tid, regs);
        let mut pending = 0;
        let outcome = loop {
            self.target.step(tid);
            match self.target.wait_thread(tid) {
                DebugEvent::Stopped {
                    stop: Stop::Trap, ..
                } => break None,
                DebugEvent::Stopped {
                    stop: Stop::Signal(s),
                    ..
                } => {
                    // delivered once the instruction is done
                    pending = s;
                }
                DebugEvent::Stopped { .. } => {}
                DebugEvent::Exited(st) => break Some(self.ended_with(st)),
                DebugEvent::ThreadExited { .. } => {
                    self.target.write_code(addr, &[0xcc]);
                    return None;
                }
                DebugEvent::Timeout => {}
            }
        };
        if outcome.is_some() {
            return outcome;
        }
        self.target.write_code(addr, &[0xcc]);
        self.target.resume(tid, pending);
        None
    }

    fn ended_with(&mut self, st: ExitStatus) -> SourceState {
        self.ended = true;
        // the CLR's session ends with its process
        self.clr = None;
        self.report_unarmed();
        self.remove_perf_maps();
        let pid = self.target.pid();
        if self.announce {
            match st {
                ExitStatus::Code(0) => {
                    crate::output::stderr::say("dtx", format_args!("pid {pid} has exited"))
                }
                ExitStatus::Code(c) => crate::output::stderr::say(
                    "dtx",
                    format_args!("pid {pid} exited with status {c}"),
                ),
                ExitStatus::Signal(s) => crate::output::stderr::say(
                    "dtx",
                    format_args!("pid {pid} terminated by signal {s}"),
                ),
            }
        }
        SourceState::Ended(Some(match st {
            ExitStatus::Code(c) => c,
            ExitStatus::Signal(s) => 128 + s,
        }))
    }
}

const SIGTRAP: i32 = 5;

impl EventSource for PidSource {
    fn pump(&mut self, deadline: u64, sink: &mut dyn Sink) -> SourceState {
        if self.ended {
            return SourceState::Ended(None);
        }
        if !self.running {
            self.running = true;
            self.target.resume_all();
        }
        // the engine clock and the target's wait share the monotonic clock
        let deadline_mono = monotonic_ns().saturating_add(deadline.saturating_sub(sink.now_ns()));
        while !sink.done() {
            match self.target.wait(Some(deadline_mono)) {
                DebugEvent::Timeout => {
                    if self.managed {
                        self.managed_changed(None, sink);
                        self.clr_changed(false, sink);
                    }
                    return SourceState::Running;
                }
                DebugEvent::Exited(st) => return self.ended_with(st),
                DebugEvent::ThreadExited { .. } => {}
                DebugEvent::Stopped { tid, stop } => match stop {
                    Stop::Trap => {
                        if let Some(s) = self.breakpoint(tid, sink) {
                            return s;
                        }
                    }
                    Stop::Signal(s) => self.target.resume(tid, s),
                    Stop::Quiet => self.target.resume(tid, 0),
                    Stop::Fork { child, vfork } => {
                        if !vfork {
                            let r = self.restore_list();
                            self.target.release_child(child, &r);
                        }
                        self.target.resume(tid, 0);
                    }
                    Stop::Modules => {
                        self.modules_changed(sink);
                        self.target.resume(tid, 0);
                    }
                    Stop::Exec => {
                        // the breakpoints and scratch areas went with the old image
                        self.sites.clear();
                        self.scratch.clear();
                        self.exec_lost = true;
                        self.target.resume(tid, 0);
                    }
                },
            }
        }
        SourceState::Running
    }

    fn stop(&mut self) {
        if self.ended {
            return;
        }
        self.clr = None;
        self.report_unarmed();
        self.remove_perf_maps();
        // a process dtx started ends with dtx, as dtrace kills the `-c` command it created
        // (dt_proc.c: PRELEASE_KILL); a grabbed one runs on without our breakpoints
        if self.created && self.end_created {
            self.target.terminate();
        } else {
            let r = self.restore_list();
            self.target.detach(&r);
        }
        self.sites.clear();
        self.ended = true;
    }
}

/// The environment variables that have CoreCLR write its perf map (`/tmp/perf-PID.map`):
/// `DOTNET_` for .NET 5 and later, `COMPlus_` before (both are read by every runtime that
/// knows the setting). dtx sets both for the processes it starts, unless the user set them.
pub const PERF_MAP_VARS: [&str; 2] = ["DOTNET_PerfMapEnabled", "COMPlus_PerfMapEnabled"];

/// Whether dtx's own environment leaves the perf map to dtx (the user set neither variable).
pub fn perf_map_set_by_dtx() -> bool {
    PERF_MAP_VARS.iter().all(|v| std::env::var_os(v).is_none())
}

/// The environment of a process dtx starts: dtx's own, with the perf map variables added.
pub fn target_environment() -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let mut vars: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os().collect();
    if perf_map_set_by_dtx() {
        for v in PERF_MAP_VARS {
            vars.push((v.into(), "1".into()));
        }
    }
    vars
}

/// The monotonic clock in ns (the clock `wait` deadlines are in).
pub fn monotonic_ns() -> u64 {
    #[cfg(target_os = "linux")]
    {
        linux::monotonic_ns()
    }
    #[cfg(windows)]
    {
        windows::monotonic_ns()
    }
    #[cfg(not(any(target_os = "linux", windows)))]
    {
        0
    }
}

/// The environment variable that keeps Windows from giving a process created under a debugger
/// the debug heap (heap checks on every allocation, no low-fragmentation heap): a `-c` target
/// then allocates as it does when run alone, and a profile of it shows its own heap's work
/// (WinDbg's "Behavior of Spawned Processes", HeapSetInformation on Microsoft Learn).
pub const NO_DEBUG_HEAP: &str = "_NO_DEBUG_HEAP";

/// The UTF-16 environment block of a target dtx starts (CreateProcessW with
/// CREATE_UNICODE_ENVIRONMENT): `vars` (name, value) as `name=value` strings, each ending in a
/// NUL, sorted by name without regard to case as Windows keeps its own blocks, and one more NUL
/// at the end; with [`NO_DEBUG_HEAP`]`=1` added unless `vars` set it (a user's own value stays).
pub fn environment_block(mut vars: Vec<(Vec<u16>, Vec<u16>)>) -> Vec<u16> {
    let upper = |s: &[u16]| -> Vec<u16> {
        String::from_utf16_lossy(s)
            .to_uppercase()
            .encode_utf16()
            .collect()
    };
    let no_heap: Vec<u16> = NO_DEBUG_HEAP.encode_utf16().collect();
    if !vars.iter().any(|(k, _)| upper(k) == no_heap) {
        vars.push((no_heap, "1".encode_utf16().collect()));
    }
    vars.sort_by_cached_key(|(k, _)| upper(k));
    let mut block = Vec::new();
    for (k, v) in vars {
        block.extend(k);
        block.push(u16::from(b'='));
        block.extend(v);
        block.push(0);
    }
    block.push(0);
    block
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_targets_environment_asks_for_the_normal_heap() {
        let w = |s: &str| -> Vec<u16> { s.encode_utf16().collect() };
        let text = |b: &[u16]| String::from_utf16_lossy(b);
        let block = environment_block(vec![
            (w("Path"), w(r"C:\Windows")),
            (w("=C:"), w(r"C:\work")),
            (w("apple"), w("1")),
        ]);
        assert_eq!(
            text(&block),
            // (upper-case ordinal order: `_` after the letters)
            "=C:=C:\\work\0apple=1\0Path=C:\\Windows\0_NO_DEBUG_HEAP=1\0\0"
        );
        // a value of the user's own stays, in any letter case
        let block = environment_block(vec![(w("_no_debug_heap"), w("0"))]);
        assert_eq!(text(&block), "_no_debug_heap=0\0\0");
        assert_eq!(text(&environment_block(Vec::new())), "_NO_DEBUG_HEAP=1\0\0");
    }

    /// A target that was grabbed with a method feed (and can do nothing else).
    struct Held(u32, Option<ClrFeed>);

    impl TargetProcess for Held {
        fn pid(&self) -> u32 {
            self.0
        }
        fn read_memory(&self, _: u64, _: &mut [u8]) -> bool {
            false
        }
        fn write_memory(&self, _: u64, _: &[u8]) -> bool {
            false
        }
        fn regs(&self, _: u32) -> Option<Regs> {
            None
        }
        fn set_regs(&self, _: u32, _: &Regs) -> bool {
            false
        }
        fn resume(&mut self, _: u32, _: i32) {}
        fn step(&mut self, _: u32) {}
        fn resume_all(&mut self) {}
        fn wait(&mut self, _: Option<u64>) -> DebugEvent {
            DebugEvent::Exited(ExitStatus::Code(0))
        }
        fn wait_thread(&mut self, _: u32) -> DebugEvent {
            DebugEvent::Exited(ExitStatus::Code(0))
        }
        fn release_child(&mut self, _: u32, _: &[(u64, u8)]) {}
        fn detach(&mut self, _: &[(u64, u8)]) {}
        fn maps(&self) -> Option<(String, String)> {
            None
        }
        fn identity(&self) -> (Vec<u8>, u64) {
            (Vec::new(), 0)
        }
        fn take_clr_feed(&mut self) -> Option<ClrFeed> {
            self.1.take()
        }
    }

    #[test]
    fn win3_9_the_feed_started_before_the_grab_is_the_loops_only_one() {
        let time = crate::etw::reader::logfile::TimeBase::default();
        let kept = ClrFeed::without_session(Box::new(ClrContext::new(4242, time)));
        let kept_at = &*kept.context as *const ClrContext;
        let mut t = Held(4242, Some(kept));
        let feed = ClrFeed::of(&mut t).expect("the kept feed");
        // the very context the rundown before the grab filled: no session, no second rundown
        assert_eq!(&*feed.context as *const ClrContext, kept_at);
        assert!(t.1.is_none(), "taken once");
        drop(feed);
        // without one, a session of its own is started (elsewhere than Windows: refused; on
        // Windows the workflow's dotnet_pid_windows test counts what a `-p` run's breakpoints
        // saw of a rundown)
        #[cfg(not(windows))]
        assert!(ClrFeed::of(&mut t).is_err());
    }

    #[test]
    fn uregs_order() {
        let mut r = Regs::default();
        r.gpr[RAX] = 1;
        r.gpr[RSP] = 2;
        r.rip = 3;
        r.gpr[15] = 4;
        r.gpr[RDI] = 5;
        let u = r.uregs();
        assert_eq!(u[14], 1); // R_RAX
        assert_eq!(u[20], 2); // R_RSP
        assert_eq!(u[17], 3); // R_RIP
        assert_eq!(u[0], 4); // R_R15
        assert_eq!(u[8], 5); // R_RDI
    }
}

/// The process a run traces: one to start (`-c`), or one running already (`-p`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetRequest {
    Command(Vec<String>),
    Pid(u32),
}

/// A target process, stopped and ready for a [`PidSource`].
pub struct OpenedTarget {
    pub process: Box<dyn TargetProcess>,
    /// Whether dtx started it.
    pub created: bool,
    /// The started process's stdout and stderr, when they were asked for.
    pub output: Option<std::fs::File>,
}

/// Opens a target on the calling thread (debugger APIs answer only the thread that attached);
/// `capture` asks for a started process's output as a pipe instead of dtx's terminal.
pub type OpenTarget = fn(&TargetRequest, bool) -> Result<OpenedTarget, String>;
