//! The D virtual machine: runs the clauses of a compiled program for each probe firing.
//!
//! `eval` evaluates lowered expression trees to 64-bit values (integers, or addresses for
//! strings and by-reference data — see [`memory`]); `exec` runs predicates, statements and
//! actions and produces [`Record`]s for the consumer; `vars` holds variables; `subr` implements
//! D's subroutines. A fault aborts the clause and is reported as an ERROR firing.

mod call;
pub mod ecb;
mod eval;
mod exec;
pub mod memory;
mod record;
mod spec;
pub mod stack_use;
pub mod subr;
pub(crate) mod thread;
mod vars;

use std::collections::HashMap;
use std::sync::Arc;

use crate::agg::AggregationTable;
use crate::ir::{self, Node, Program, ValKind};
use crate::probes::{ProbeInfo, ERROR_ID};
pub use memory::{AddressSpace, Fault, NoMemory};
pub use record::{Datum, Record};
use vars::DynVars;

/// Limits and behaviours that come from D options.
#[derive(Clone, Debug)]
pub struct VmOptions {
    pub strsize: usize,
    /// `aggsize`, when the program set it.
    pub aggsize: Option<usize>,
    /// `bufsize`: the principal buffer, which the consumer takes after each firing unless it
    /// is filling.
    pub bufsize: usize,
    pub dynvarsize: usize,
    pub nspec: usize,
    pub specsize: usize,
    pub scratch: usize,
    pub destructive: bool,
    /// Quiet output: a clause that records nothing needs no probe line.
    pub quiet: bool,
    /// `bufpolicy=fill`: the principal buffer is never drained; tracing stops once it is full.
    pub fill: bool,
    /// `bufpolicy=ring`: the principal buffer wraps; a firing only needs to fit in it.
    pub ring: bool,
}

impl Default for VmOptions {
    fn default() -> Self {
        VmOptions {
            strsize: 256,
            aggsize: None,
            bufsize: 4 << 20,
            dynvarsize: 1 << 20,
            nspec: 1,
            specsize: 1 << 20,
            scratch: 8 << 20,
            destructive: false,
            quiet: false,
            fill: false,
            ring: false,
        }
    }
}

impl VmOptions {
    pub fn from_options(o: &crate::lang::options::DOptions) -> Self {
        VmOptions {
            strsize: o.strsize().clamp(2, 1 << 24) as usize,
            aggsize: o
                .is_set("aggsize")
                .then(|| o.aggsize().min(1 << 40) as usize),
            bufsize: o.bufsize().clamp(1, 1 << 40) as usize,
            dynvarsize: o.dynvarsize().min(1 << 34) as usize,
            nspec: o.nspec().min(1 << 16) as usize,
            specsize: o.specsize().min(1 << 34) as usize,
            scratch: 8 << 20,
            destructive: o.destructive(),
            quiet: o.quiet(),
            fill: o.bufpolicy() == "fill",
            ring: o.bufpolicy() == "ring",
        }
    }
}

/// Everything about one firing that the clause may read.
pub struct FiringCtx<'a> {
    pub probe: &'a ProbeInfo,
    pub args: [u64; 10],
    pub timestamp: u64,
    pub vtimestamp: u64,
    pub walltimestamp: u64,
    pub cpu: u32,
    pub pid: u64,
    pub ppid: u64,
    pub tid: u64,
    pub uid: u64,
    pub gid: u64,
    pub errno: i64,
    pub execname: &'a [u8],
    /// The process's command line (`curpsinfo->pr_psargs`), when the source knows it.
    pub psargs: &'a [u8],
    /// When the process started (ns, the source's clock), 0 when unknown.
    pub proc_start: u64,
    /// The thread's name (`curlwpsinfo->pr_tname`), when the source knows one.
    pub tname: &'a [u8],
    pub memory: &'a dyn AddressSpace,
    /// Kernel and user stacks of the firing, innermost first, when the source has them.
    pub stack: &'a [u64],
    pub ustack: &'a [u64],
    /// A user stack the source works out only when a clause asks for it (it takes the place of
    /// `ustack` when set).
    pub ustack_lazy: Option<&'a LazyUserStack<'a>>,
    pub uregs: &'a [u64],
    /// Which images name the frames of the firing's stacks, when the source's images can
    /// replace one another at the same addresses (ETW: the system state).
    pub epochs: Option<&'a dyn StackEpochs>,
    /// The trace the firing came from (the `trace` variable): the `-E` file name as given,
    /// `archive.zip:member.etl` for a zip member; empty when no trace drives the run.
    pub trace: &'a [u8],
}

/// Which images named a stack's frames when it was recorded: a source whose images may
/// replace one another at the same addresses over a run (a DLL unloaded and another loaded at
/// its base) tells the epoch of the images that named them, which the recorded stack keeps so
/// that names built later (at END) name the frames by those images
/// (`etw::state::SystemState::stack_epoch`). It is asked only by firings that record a stack.
pub trait StackEpochs {
    /// The epoch of `frames` (innermost first, a zero ends them) of process `pid` (0 for
    /// kernel frames), sampled now; 0 where no image ever took another's place.
    fn stack_epoch(&self, pid: u32, frames: &[u64]) -> u32;
}

/// A user stack computed on first use: a source that unwinds stacks itself (from a sampled
/// copy of the stack) pays for it only in firings whose clauses read it, not in those a
/// predicate turns away.
pub struct LazyUserStack<'a> {
    frames: std::cell::OnceCell<Vec<u64>>,
    compute: &'a dyn Fn(&mut Vec<u64>),
}

impl<'a> LazyUserStack<'a> {
    /// A stack that `compute` fills in (innermost frame first) when first read.
    pub fn new(compute: &'a dyn Fn(&mut Vec<u64>)) -> Self {
        LazyUserStack {
            frames: std::cell::OnceCell::new(),
            compute,
        }
    }

    /// The frames, worked out now if no one asked before.
    pub fn get(&self) -> &[u64] {
        self.frames.get_or_init(|| {
            let mut v = Vec::new();
            (self.compute)(&mut v);
            v
        })
    }
}

impl<'a> FiringCtx<'a> {
    /// A firing with no event behind it (BEGIN, END, ticks): the consumer's own context.
    pub fn synthetic(
        probe: &'a ProbeInfo,
        timestamp: u64,
        walltimestamp: u64,
        execname: &'a [u8],
    ) -> Self {
        static PID: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();
        let (pid, ppid) = *PID.get_or_init(|| {
            #[cfg(unix)]
            let ppid = std::os::unix::process::parent_id() as u64;
            #[cfg(not(unix))]
            let ppid = 0;
            (std::process::id() as u64, ppid)
        });
        FiringCtx {
            probe,
            args: [0; 10],
            timestamp,
            vtimestamp: timestamp,
            walltimestamp,
            cpu: 0,
            pid,
            ppid,
            tid: pid,
            uid: 0,
            gid: 0,
            errno: 0,
            execname,
            psargs: b"",
            proc_start: 0,
            tname: b"",
            memory: &NoMemory,
            stack: &[],
            ustack: &[],
            ustack_lazy: None,
            uregs: &SYNTHETIC_UREGS,
            epochs: None,
            trace: b"",
        }
    }
}

impl FiringCtx<'_> {
    /// Sets `pid` and `tid` from a source's 32-bit ids. The id a source gives a thread or
    /// process it cannot name (`u32::MAX`, a task caught exiting or a record before its CPU's
    /// first context switch) reads as -1 in D: `pid_t` and `id_t` are signed, and D compares
    /// them as 64-bit values, so `pid == -1` and `pid != -1` hold as a script means them.
    #[inline]
    pub fn set_ids(&mut self, pid: u32, tid: u32) {
        self.pid = id_value(pid);
        self.tid = id_value(tid);
    }

    /// The firing's user stack, innermost first (worked out now when the source defers it).
    pub fn user_stack(&self) -> &[u64] {
        match self.ustack_lazy {
            Some(l) => l.get(),
            None => self.ustack,
        }
    }

    /// The thread whose `self->` variables the firing sees. Thread 0 is the idle thread of
    /// the firing's CPU (Windows gives every CPU's idle thread id 0, as Linux gives its swapper
    /// tasks pid 0): each CPU's idle thread is a thread of its own, as in DTrace, so its key is
    /// [`IDLE_THREAD_KEY`] plus the CPU, a value no thread id reaches.
    #[inline]
    pub fn thread_key(&self) -> u64 {
        if self.tid == 0 {
            IDLE_THREAD_KEY | self.cpu as u64
        } else {
            self.tid
        }
    }
}

/// Where the thread-local keys of the per-CPU idle threads start ([`FiringCtx::thread_key`]).
pub const IDLE_THREAD_KEY: u64 = 1 << 48;

/// A source's 32-bit process or thread id as D reads it: `u32::MAX` (unknown) is -1.
#[inline]
pub fn id_value(id: u32) -> u64 {
    if id == u32::MAX {
        u64::MAX
    } else {
        id as u64
    }
}

/// The saved registers of a firing with no user thread behind it: all zero.
static SYNTHETIC_UREGS: [u64; 32] = [0; 32];

/// The outcome of running the clauses for a firing.
#[derive(Debug, Default)]
pub struct FireResult {
    /// `exit(n)` was called.
    pub exit: Option<i32>,
    /// Faults, as (enabled probe id, clause, action number, fault).
    pub errors: Vec<ErrorInfo>,
}

#[derive(Clone, Debug)]
pub struct ErrorInfo {
    pub epid: u32,
    /// The probe whose clause faulted.
    pub probe: u64,
    pub clause: usize,
    /// 1-based action index, 0 for the predicate.
    pub action: u32,
    pub fault: Fault,
}

/// What a clause's firing needs that its text fixes: worked out once in [`Vm::new`], not on
/// every firing (the hot path reads it by one index).
#[derive(Clone, Copy, Debug)]
struct ClausePlan {
    /// What the clause's ECB takes in a buffer.
    ecb: ecb::EcbSize,
    /// `ecb.align - 1`: the ECB's start is rounded up with a mask.
    align_mask: usize,
}

impl ClausePlan {
    /// A clause index with no plan (none is made for a clause the program lacks).
    const NONE: ClausePlan = ClausePlan {
        ecb: ecb::EcbSize {
            size: 0,
            needed: 0,
            align: 4,
        },
        align_mask: 3,
    };
}

/// An enabled probe: one clause on one probe (DTrace's ECB).
#[derive(Clone, Copy, Debug)]
pub struct Enabling {
    pub epid: u32,
    pub clause: usize,
}

/// The global state of a program's VM (global variables, associative arrays, string
/// storage): what BEGIN leaves for the engines of a many-trace run to start from.
#[derive(Clone)]
pub struct GlobalState {
    globals: Vec<u64>,
    global_mem: Vec<u8>,
    global_off: Vec<usize>,
    null_strings: Vec<bool>,
    strings: Vec<u8>,
    string_index: HashMap<usize, usize>,
    dynvars: DynVars,
}

pub struct Vm {
    pub program: Arc<Program>,
    pub opts: VmOptions,
    pub aggs: AggregationTable,
    globals: Vec<u64>,
    global_mem: Vec<u8>,
    global_off: Vec<usize>,
    locals: Vec<u64>,
    /// String variables (global and clause-local) that hold NULL rather than a string, by
    /// variable id: dtrace keeps this as a flag beside the variable's bytes.
    null_strings: Vec<bool>,
    local_mem: Vec<u8>,
    /// The `struct thread` of the current firing (`curthread`), built when first read.
    thread_mem: Vec<u8>,
    /// The address `thread_mem` appears at: each thread's struct has its own address
    /// ([`thread::address`]), 0 before the first is built.
    thread_addr: u64,
    local_off: Vec<usize>,
    dynvars: DynVars,
    strings: Vec<u8>,
    string_index: HashMap<usize, usize>,
    /// The clause's scratch space: its materialised part (the space is `opts.scratch` bytes,
    /// zero past what was touched).
    scratch: Vec<u8>,
    /// The scratch allocation pointer: the end of what `alloca`, strings and built structures
    /// have allocated (dtrace's `dtms_scratch_ptr`).
    scratch_top: usize,
    key_buf: Vec<u8>,
    /// Set while the address of a store is evaluated: the first variable read then is the
    /// base of the store, and an absent dynamic element of array or struct type is created
    /// (zeroed) rather than read as a temporary copy, as dtrace's dynvar lookup allocates for
    /// a store (`a[k][i] = v`, `self->s.x = v`).
    alloc_ref: bool,
    agg_keys: Vec<Datum>,
    agg_args: Vec<i64>,
    spec: spec::Speculations,
    strtok: subr::StrtokState,
    rand_state: u64,
    /// Records produced by the current firing, in order.
    pub records: Vec<(u32, Record)>,
    /// Clauses enabled on each probe, in program order: the probe id's slot in
    /// `enabling_lists`, and the last probe looked up (consecutive firings are often of the
    /// same probe).
    enablings: crate::fasthash::FastMap<u64, usize>,
    enabling_lists: Vec<Vec<Enabling>>,
    last_enabling: (u64, usize),
    /// Ids of clause-local variables (zeroed at each firing).
    clause_locals: Vec<u32>,
    next_epid: u32,
    /// The enabled probe whose clause is running.
    current_epid: u32,
    /// The speculation the running clause records into (0: none).
    current_spec: u64,
    /// Whether the running clause's `Fire` record was sent.
    header_sent: bool,
    /// `exit()` was called: only END clauses run from now on.
    pub exiting: bool,
    /// The running clause called `exit()`.
    exit_in_clause: bool,
    /// The running clause passed its predicate.
    clause_ran: bool,
    /// What each clause's firing needs decided before it runs, by clause index.
    plans: Vec<ClausePlan>,
    /// Whether firings reserve room in the principal buffer. Not when no firing can fill it
    /// ([`Vm::enable`] decides): a switching buffer starts empty at every firing.
    buffer_accounted: bool,
    /// What the enablings of each list (as `enabling_lists`) reserve together, at most.
    list_need: Vec<usize>,
    /// The largest of `list_need`, the longest list, and what ERROR's list reserves.
    worst_need: (usize, usize, usize),
    /// By clause index: for a clause with no predicate whose statements are all `++`/`--` of
    /// an integer global or clause-local variable, its adds (global?, variable, delta),
    /// worked out once here rather than from the statements at every firing.
    static_steps: Vec<Option<exec::ClauseSteps>>,
    /// Offset of the principal buffer: what the firings kept since the consumer last took
    /// the buffer (each firing when it is not filling).
    buf_offset: usize,
    /// Index of the running clause.
    current_clause: usize,
    /// Index in `records` where the running clause's records start.
    clause_first_record: usize,
    /// Records of this clause kept even if it faults (up to and with a `commit()`).
    clause_kept: usize,
    /// Where the speculation the clause speculates to stood before it (undone on a fault).
    spec_mark: Option<(usize, usize)>,
    /// Aggregation updates dropped (over `aggsize`).
    pub agg_drops: u64,
    /// Faults in ERROR clauses (not reported again as ERROR firings).
    pub double_errors: u64,
    /// Enabled-probe records dropped because they did not fit the principal buffer.
    pub principal_drops: u64,
    /// `bufpolicy=fill`: the most of the principal buffer firings may use (the buffer less
    /// what END keeps in reserve).
    fill_limit: usize,
    /// The filling buffer is full: nothing more is recorded before END.
    pub filled: bool,
    fire_cpu: u32,
    fire_probe: u64,
    fire_ts: u64,
}

impl Vm {
    /// A copy of the global state (see [`GlobalState`]).
    pub fn global_state(&self) -> GlobalState {
        GlobalState {
            globals: self.globals.clone(),
            global_mem: self.global_mem.clone(),
            global_off: self.global_off.clone(),
            null_strings: self.null_strings.clone(),
            strings: self.strings.clone(),
            string_index: self.string_index.clone(),
            dynvars: self.dynvars.clone(),
        }
    }

    /// Forgets every thread-local variable: the next firings are of another trace's threads
    /// (a many-trace run walking its traces in turn).
    pub fn clear_thread_locals(&mut self) {
        let program = self.program.clone();
        let strsize = self.opts.strsize;
        self.dynvars
            .clear_threads(|var| match program.variable(var).map(|v| v.kind) {
                Some(crate::ir::ValKind::String) => strsize,
                Some(crate::ir::ValKind::ByRef { size }) => size as usize,
                _ => 8,
            });
    }

    /// Starts from `g`, the global state of a VM of the same program.
    pub fn set_global_state(&mut self, g: GlobalState) {
        self.globals = g.globals;
        self.global_mem = g.global_mem;
        self.global_off = g.global_off;
        self.null_strings = g.null_strings;
        self.strings = g.strings;
        self.string_index = g.string_index;
        self.dynvars = g.dynvars;
    }

    pub fn new(program: Arc<Program>, opts: VmOptions) -> Self {
        let strsize = opts.strsize;
        let fill_limit =
            (opts.bufsize & !7).saturating_sub(ecb::end_reserve(&program, opts.strsize));
        let mut aggs = AggregationTable::new(&program.aggregations);
        aggs.set_aggsize(opts.aggsize);
        aggs.set_string_key_size(opts.strsize);
        let mut vm = Vm {
            opts,
            aggs,
            globals: vec![0; program.variables.len()],
            global_mem: Vec::new(),
            global_off: vec![usize::MAX; program.variables.len()],
            locals: vec![0; program.variables.len()],
            null_strings: vec![false; program.variables.len()],
            local_mem: Vec::new(),
            thread_mem: Vec::new(),
            thread_addr: 0,
            local_off: vec![usize::MAX; program.variables.len()],
            dynvars: DynVars::new(0),
            strings: vec![0],
            string_index: HashMap::new(),
            scratch: Vec::new(),
            scratch_top: 0,
            key_buf: Vec::new(),
            alloc_ref: false,
            agg_keys: Vec::new(),
            agg_args: Vec::new(),
            spec: spec::Speculations::default(),
            strtok: subr::StrtokState::default(),
            rand_state: 0x2545_f491_4f6c_dd1d,
            records: Vec::new(),
            enablings: Default::default(),
            enabling_lists: Vec::new(),
            last_enabling: (u64::MAX, usize::MAX),
            clause_locals: Vec::new(),
            next_epid: 1,
            current_epid: 0,
            current_spec: 0,
            header_sent: false,
            exiting: false,
            exit_in_clause: false,
            clause_ran: false,
            plans: Vec::new(),
            buffer_accounted: true,
            list_need: Vec::new(),
            worst_need: (0, 0, 0),
            static_steps: program
                .clauses
                .iter()
                .map(|c| exec::clause_steps(c, program.variables.len()))
                .collect(),
            buf_offset: 0,
            current_clause: 0,
            clause_first_record: 0,
            clause_kept: 0,
            spec_mark: None,
            agg_drops: 0,
            double_errors: 0,
            principal_drops: 0,
            fill_limit,
            filled: false,
            fire_cpu: 0,
            fire_probe: 0,
            fire_ts: 0,
            program,
        };
        vm.dynvars = DynVars::new(vm.opts.dynvarsize);
        vm.spec = spec::Speculations::new(vm.opts.nspec, vm.opts.specsize);
        vm.clause_locals = vm
            .program
            .variables
            .iter()
            .enumerate()
            .filter(|(_, v)| v.scope == ir::Scope::Clause && !v.name.is_empty())
            .map(|(i, _)| i as u32)
            .collect();
        vm.layout_variables();
        vm.intern_strings();
        vm.plans = vm.plan_clauses(strsize);
        vm.buffer_accounted = vm.opts.fill || vm.opts.ring;
        vm
    }

    /// Each clause's [`ClausePlan`]: its ECB, from the program.
    fn plan_clauses(&self, strsize: usize) -> Vec<ClausePlan> {
        let program = &*self.program;
        program
            .clauses
            .iter()
            .map(|c| {
                let ecb = ecb::ecb_size(c, program, strsize);
                ClausePlan {
                    ecb,
                    align_mask: ecb.align.max(1) - 1,
                }
            })
            .collect()
    }

    /// Gives every by-reference global and clause-local its storage.
    fn layout_variables(&mut self) {
        let strsize = self.opts.strsize;
        for (i, v) in self.program.variables.iter().enumerate() {
            if v.keys.is_some() {
                continue;
            }
            let size = match v.kind {
                ValKind::String => strsize,
                ValKind::ByRef { size } => size as usize,
                ValKind::Int { .. } => continue,
            };
            let mem = match v.scope {
                ir::Scope::Global => &mut self.global_mem,
                ir::Scope::Clause => &mut self.local_mem,
                ir::Scope::Thread => continue,
            };
            let off = (mem.len() + 7) & !7;
            mem.resize(off + size.max(1), 0);
            match v.scope {
                ir::Scope::Global => self.global_off[i] = off,
                _ => self.local_off[i] = off,
            }
        }
    }

    /// Copies every string literal of the program into the Strings region.
    fn intern_strings(&mut self) {
        let program = self.program.clone();
        let mut visit = |n: &Node| {
            if let Node::Str(s) = n {
                let key = s.as_ptr() as usize;
                if let std::collections::hash_map::Entry::Vacant(e) = self.string_index.entry(key) {
                    let off = self.strings.len();
                    self.strings.extend_from_slice(s.as_bytes());
                    self.strings.push(0);
                    e.insert(off);
                }
            }
        };
        crate::ir::visit::visit_nodes(&program, &mut visit);
    }

    /// Enables the program's clauses on a probe (called by the engine for every probe a clause's
    /// descriptions match, in program order). Returns the new EPIDs.
    pub fn enable(&mut self, probe: u64, clause: usize) -> u32 {
        let epid = self.next_epid;
        self.next_epid += 1;
        let lists = &mut self.enabling_lists;
        let slot = *self.enablings.entry(probe).or_insert_with(|| {
            lists.push(Vec::new());
            lists.len() - 1
        });
        self.enabling_lists[slot].push(Enabling { epid, clause });
        self.account_enabling(slot, probe, clause);
        epid
    }

    /// Whether, with a new enabling of `clause` in list `slot`, a firing could need more room
    /// than the principal buffer has: a firing runs its list's enablings, and each may fault
    /// and fire ERROR once (a fault in an ERROR clause fires nothing), so it reserves at most
    /// the largest list's need plus, per enabling of the longest list, ERROR's need. Firings
    /// skip the reservation while that bound fits (`fill` and `ring` always account).
    fn account_enabling(&mut self, slot: usize, probe: u64, clause: usize) {
        let plan = self.plans.get(clause).copied().unwrap_or(ClausePlan::NONE);
        if self.list_need.len() <= slot {
            self.list_need.resize(slot + 1, 0);
        }
        let need = self.list_need[slot].saturating_add(plan.ecb.needed + plan.align_mask);
        self.list_need[slot] = need;
        let (max_need, max_len, error_need) = &mut self.worst_need;
        *max_need = (*max_need).max(need);
        *max_len = (*max_len).max(self.enabling_lists[slot].len());
        if probe == ERROR_ID {
            *error_need = need;
        }
        let worst = max_need.saturating_add(max_len.saturating_mul(*error_need));
        self.buffer_accounted = self.opts.fill || self.opts.ring || worst > self.opts.bufsize & !7;
    }

    /// The slot in `enabling_lists` of a probe with enablings.
    #[inline]
    fn enabling_slot(&mut self, probe: u64) -> Option<usize> {
        let (last, slot) = self.last_enabling;
        if last == probe {
            return Some(slot);
        }
        let slot = *self.enablings.get(&probe)?;
        self.last_enabling = (probe, slot);
        Some(slot)
    }

    /// Stops running `clause` on every probe (it runs elsewhere: in the kernel, through the
    /// BPF back end). A probe left with no clause is no longer enabled in this VM.
    pub fn run_elsewhere(&mut self, clause: usize) {
        for l in &mut self.enabling_lists {
            l.retain(|e| e.clause != clause);
        }
        let lists = &self.enabling_lists;
        self.enablings
            .retain(|_, slot| lists.get(*slot).is_some_and(|l| !l.is_empty()));
        self.last_enabling = (u64::MAX, usize::MAX);
    }

    #[inline]
    pub fn is_enabled(&self, probe: u64) -> bool {
        // probes are enabled, never disabled: the last one fired needs no lookup
        self.last_enabling.0 == probe || self.enablings.contains_key(&probe)
    }

    pub fn enablings(&self, probe: u64) -> &[Enabling] {
        match self.enablings.get(&probe) {
            Some(&slot) => &self.enabling_lists[slot],
            None => &[],
        }
    }

    /// Dynamic variable drops so far.
    pub fn dynvar_drops(&self) -> u64 {
        self.dynvars.drops()
    }

    /// Speculation drops so far: (records that did not fit, busy, unavailable).
    pub fn spec_drops(&self) -> (u64, u64, u64) {
        (
            self.spec.drops,
            self.spec.busy_drops,
            self.spec.unavail_drops,
        )
    }

    /// Adds `delta` (wrapping, as `+=` does) to the integer global `id`: what the program's
    /// clauses in the kernel added to it (the BPF back end).
    pub fn add_to_global(&mut self, id: u32, delta: u64) {
        if let Some(g) = self.globals.get_mut(id as usize) {
            *g = g.wrapping_add(delta);
        }
    }

    /// Counts drops that happened in another VM of the same program (the engine of one trace
    /// of a many-trace run) as this one's, for the run's final drop messages: dynamic
    /// variables, and speculations (as [`Vm::spec_drops`] gives them).
    pub fn add_drops(&mut self, dynvars: u64, spec: (u64, u64, u64)) {
        self.dynvars.add_drops(dynvars);
        self.spec.drops += spec.0;
        self.spec.busy_drops += spec.1;
        self.spec.unavail_drops += spec.2;
    }

    /// Bytes of a string value (an address), up to its NUL and `strsize`.
    pub fn string_at(&self, addr: u64, mem: &dyn AddressSpace) -> Result<Vec<u8>, Fault> {
        let mut out = Vec::new();
        self.read_string(addr, mem, &mut out)?;
        Ok(out)
    }
}
