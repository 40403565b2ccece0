//! The loader of the BPF back end (`crate::bpf`): for each clause that the back end can run,
//! the per-CPU aggregation maps, the program (checked by the kernel's verifier) and its
//! attachment to `raw_syscalls:sys_enter` or `sys_exit`; then, whenever the engine may read
//! aggregations (after each pump, before END), the maps' entries folded into the program's
//! aggregations ([`crate::bpf::maps::Folder`]). A clause the kernel refuses stays in user
//! space with one line naming why (the verifier's last line); with `-v` or
//! `-x bpf=verbose` every clause says where it runs. All of it is held by descriptors:
//! nothing is pinned or written to tracefs, and any exit of dtx (SIGKILL included) frees it.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use super::abi::{attach_program, AttachFailed};
use super::bpfsys;
use super::format::EventFormat;
use crate::bpf::codegen::{compile, KernelClause, Layout, MapFds, AGG_DROPS, DYN_DROPS};
use crate::bpf::maps::{self, Folder, KeyPart, ProbeField};
use crate::bpf::plan::{global_vars, plan_clause, thread_vars};
use crate::ir::AggFunc;
use crate::providers::linux::syscall_probe_id;
use crate::sources::sink::Sink;

/// `-x bpf=`: whether clauses may run in the kernel, and whether to say where each runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BpfMode {
    #[default]
    On,
    Off,
    Verbose,
}

impl BpfMode {
    /// The mode of `-x bpf=WORD` (none: on), verbose also with `-v`.
    pub fn from_option(word: Option<&str>, verbose: bool) -> BpfMode {
        match word {
            Some("off") => BpfMode::Off,
            Some("verbose") => BpfMode::Verbose,
            _ if verbose => BpfMode::Verbose,
            _ => BpfMode::On,
        }
    }
}

/// Entries of each aggregation map.
const MAP_ENTRIES: u32 = 16384;
/// Entries of a program's thread-local map (`[thread, id]` -> u64).
const TLS_ENTRIES: u32 = 32768;

/// One aggregating statement's map.
struct AggMap {
    program: usize,
    agg: u32,
    func: AggFunc,
    parts: Vec<KeyPart>,
    ret: bool,
    fd: OwnedFd,
    key_bytes: usize,
    /// The data words of one aggregation entry (a quantization's buckets).
    stride: usize,
    words: usize,
    folder: Folder,
}

/// One clause's drop counters (aggregation, dynamic variable).
struct Drops {
    program: usize,
    fd: OwnedFd,
    seen: [u64; 2],
}

/// The clauses running in the kernel.
#[derive(Default)]
pub struct KernelClauses {
    /// The tracepoint events the programs are attached to (closed first, on stop).
    events: Vec<OwnedFd>,
    progs: Vec<OwnedFd>,
    maps: Vec<AggMap>,
    drops: Vec<Drops>,
    /// Each program's thread-locals, shared by its kernel clauses.
    tls: BTreeMap<usize, OwnedFd>,
    /// Each program's integer globals its kernel clauses add to (an array by variable id),
    /// with those ids: added to the engine's globals when the programs are done, for END.
    globals: BTreeMap<usize, (OwnedFd, Vec<u32>)>,
    cpus: usize,
    /// The engine's clock minus `CLOCK_MONOTONIC` (`timestamp` in the programs).
    clock_offset: i64,
}

/// The record layout of `raw_syscalls:NAME`.
fn layout(root: &Path, name: &str) -> Result<(u32, Layout), String> {
    let p = root.join("events/raw_syscalls").join(name).join("format");
    let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    let fmt = EventFormat::parse(&text).map_err(|e| format!("raw_syscalls:{name}: {e}"))?;
    let data = if name == "sys_enter" { "args" } else { "ret" };
    let off = |f: &str| -> Result<i16, String> {
        let f = fmt.require(f)?;
        i16::try_from(f.offset).map_err(|_| format!("raw_syscalls:{name}: offset of {f:?}"))
    };
    Ok((
        fmt.id,
        Layout {
            id_off: off("id")?,
            data_off: off(data)?,
        },
    ))
}

/// CPUs the kernel may run on (`/sys/devices/system/cpu/possible`): how many values a
/// per-CPU map's lookup returns.
fn possible_cpus() -> usize {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    let last = text
        .trim()
        .rsplit([',', '-'])
        .next()
        .and_then(|n| n.parse::<usize>().ok());
    last.map_or(1, |n| n + 1).min(8192)
}

impl KernelClauses {
    /// Plans every clause of the sink's programs, loads those the back end can run and has
    /// the engine stop running them; says (per `mode`) where each clause runs.
    pub fn open(sink: &mut dyn Sink, root: &Path, mode: BpfMode) -> KernelClauses {
        // the perf source moves its records' CLOCK_MONOTONIC times onto the engine's clock
        // by the same difference (live.rs)
        let clock_offset = sink.now_ns().wrapping_sub(super::abi::mono_ns()) as i64;
        let mut k = KernelClauses {
            cpus: possible_cpus(),
            clock_offset,
            ..Default::default()
        };
        if mode == BpfMode::Off {
            return k;
        }
        // (program, clause) -> probes, one per enabling
        let mut probes: BTreeMap<(usize, usize), Vec<u64>> = BTreeMap::new();
        let ids: Vec<u64> = sink.enabled_probes().map(|p| p.id).collect();
        for &id in &ids {
            for e in sink.enablings_of(id) {
                probes.entry(e).or_default().push(id);
            }
        }
        let programs: Vec<_> = sink.programs().into_iter().cloned().collect();
        let layouts = (layout(root, "sys_enter"), layout(root, "sys_exit"));
        let prog = sink.prog().to_string();
        let say = |m: std::fmt::Arguments| crate::output::stderr::say(&prog, m);
        // the clauses by number and first probe description (and line, in a file)
        let name = |p: usize, c: usize| {
            let clause = programs.get(p).and_then(|pr| pr.clauses.get(c));
            let (line, desc) = clause.map_or((0, String::new()), |c| {
                let d = c.probes.first().map(|d| d.to_string()).unwrap_or_default();
                (c.line, d)
            });
            let at = if line > 0 {
                format!(", line {line}")
            } else {
                String::new()
            };
            format!("bpf: clause {} ({desc}{at})", c + 1)
        };
        let mut planned = Vec::new();
        for (&(p, c), ids) in &probes {
            let Some(program) = programs.get(p) else {
                continue;
            };
            // the VM cuts both sides of a string comparison at `strsize`, the kernel compares
            // the whole `comm`: below its 16 bytes the two could differ
            let strsize = sink.strsize(p);
            let short = strsize < 16
                && program.clauses.get(c).is_some_and(|cl| {
                    crate::ir::visit::reads_builtin(cl, &[crate::lang::builtins::var::EXECNAME])
                });
            let planned_clause = match short {
                true => Err(format!(
                    "`execname` with strsize {strsize} (below the 16 bytes of the kernel's comm)"
                )),
                false => plan_clause(program, p, c, ids),
            };
            match planned_clause {
                Ok(v) => planned.push(((p, c), v)),
                Err(why) if mode == BpfMode::Verbose => {
                    say(format_args!("{} runs in user space: {why}", name(p, c)))
                }
                Err(_) => {}
            }
        }
        // a thread-local lives on one side: a kernel clause naming a `self->` variable that a
        // clause in user space names goes to user space too (until none does)
        type Vars = BTreeMap<(usize, usize), std::collections::BTreeSet<u32>>;
        let per_clause = |f: fn(&crate::ir::Clause) -> std::collections::BTreeSet<u32>| -> Vars {
            programs
                .iter()
                .enumerate()
                .flat_map(|(p, pr)| {
                    pr.clauses
                        .iter()
                        .enumerate()
                        .map(move |(c, cl)| ((p, c), f(cl)))
                })
                .collect()
        };
        let vars = per_clause(thread_vars);
        let var_name = |p: usize, id: u32| {
            programs
                .get(p)
                .and_then(|pr| pr.variable(id))
                .map_or_else(|| format!("#{id}"), |v| v.name.clone())
        };
        let globals = per_clause(global_vars);
        // BEGIN runs before the engine takes any event, END after the programs are done:
        // such clauses may name a global the kernel adds to (its sum is added before END)
        let (begin, end) = (crate::providers::BEGIN_ID, crate::providers::END_ID);
        let mut begin_end: BTreeMap<(usize, usize), bool> = BTreeMap::new();
        for &id in &ids {
            for e in sink.enablings_of(id) {
                let only = begin_end.entry(e).or_insert(true);
                *only &= id == begin || id == end;
            }
        }
        // why clause (p, c), planned for the kernel, shares a thread-local or a global with
        // user space
        let shares = |pc: (usize, usize), kernel: &dyn Fn(&(usize, usize)) -> bool| {
            let mine = vars.get(&pc)?;
            let thread = vars
                .iter()
                .filter(|(o, _)| o.0 == pc.0 && !kernel(o))
                .find_map(|(o, theirs)| {
                    let id = mine.intersection(theirs).next()?;
                    Some(format!(
                        "self->{} is also used by clause {}, which runs in user space",
                        var_name(pc.0, *id),
                        o.1 + 1
                    ))
                });
            let mine = globals.get(&pc)?;
            thread.or_else(|| {
                globals
                    .iter()
                    .filter(|(o, _)| o.0 == pc.0 && !kernel(o))
                    .filter(|(o, _)| !begin_end.get(o).copied().unwrap_or(false))
                    .find_map(|(o, theirs)| {
                        let id = mine.intersection(theirs).next()?;
                        Some(format!(
                            "the global {} is also used by clause {}, which runs in user space \
                             (only BEGIN and END may share a global with the kernel)",
                            var_name(pc.0, *id),
                            o.1 + 1
                        ))
                    })
            })
        };
        loop {
            let kept: Vec<(usize, usize)> = planned.iter().map(|(pc, _)| *pc).collect();
            let kernel = |o: &(usize, usize)| kept.contains(o);
            let Some((i, why)) = planned
                .iter()
                .enumerate()
                .find_map(|(i, (pc, _))| Some((i, shares(*pc, &kernel)?)))
            else {
                break;
            };
            let (pc, _) = planned.remove(i);
            if mode == BpfMode::Verbose {
                say(format_args!(
                    "{} runs in user space: {why}",
                    name(pc.0, pc.1)
                ));
            }
        }
        // every program keeps the tracepoint's perf samples (returns 1): the kernel runs a
        // tracepoint's programs before its perf events, and one that returns 0 drops the
        // samples of every perf event on that tracepoint, this dtx's user-space clauses',
        // another dtx's and any other tool's alike (perf_trace_run_bpf_submit in
        // kernel/events/core.c); the event each program is attached through takes none
        // (a filter that matches nothing). A refusal that takes clauses sharing
        // thread-locals to user space loads the rest again (refusals do not change).
        let mut refused: Vec<(usize, usize)> = Vec::new();
        let mut reasons = Vec::new();
        for _round in 0..planned.len() + 2 {
            k = KernelClauses {
                cpus: k.cpus,
                clock_offset,
                ..Default::default()
            };
            for ((p, c), kcs) in &planned {
                if refused.contains(&(*p, *c)) {
                    continue;
                }
                let n = (k.events.len(), k.progs.len(), k.maps.len(), k.drops.len());
                let mut loaded = Ok(());
                for kc in kcs {
                    let l = if kc.ret { &layouts.1 } else { &layouts.0 };
                    loaded = match l {
                        Ok((tp, l)) => k.load(kc, *tp, *l, &*sink),
                        Err(e) => Err(e.clone()),
                    };
                    if loaded.is_err() {
                        break;
                    }
                }
                if let Err(why) = loaded {
                    // what this clause loaded goes (detached first)
                    k.events.truncate(n.0);
                    k.progs.truncate(n.1);
                    k.maps.truncate(n.2);
                    k.drops.truncate(n.3);
                    refused.push((*p, *c));
                    reasons.push(format!(
                        "{} runs in user space: the kernel refused its program: {why}",
                        name(*p, *c)
                    ));
                }
            }
            // a refused clause takes to user space the kernel clauses sharing its thread-locals
            let mut more = false;
            loop {
                let kernel = |o: &(usize, usize)| {
                    planned.iter().any(|(pc, _)| pc == o) && !refused.contains(o)
                };
                let next = planned
                    .iter()
                    .filter(|(pc, _)| !refused.contains(pc))
                    .find_map(|(pc, _)| Some((*pc, shares(*pc, &kernel)?)));
                let Some((pc, why)) = next else {
                    break;
                };
                refused.push(pc);
                reasons.push(format!("{} runs in user space: {why}", name(pc.0, pc.1)));
                more = true;
            }
            if !more {
                break;
            }
        }
        for r in reasons {
            say(format_args!("{r}"));
        }
        for ((p, c), _) in &planned {
            if !refused.contains(&(*p, *c)) {
                sink.run_in_kernel(*p, *c);
                if mode == BpfMode::Verbose {
                    say(format_args!("{} runs in the kernel", name(*p, *c)));
                }
            }
        }
        k
    }

    /// Whether any clause runs in the kernel.
    pub fn any(&self) -> bool {
        !self.progs.is_empty()
    }

    /// Loads and attaches one kernel clause (its program keeps the tracepoint's perf
    /// samples for the other events on it).
    fn load(
        &mut self,
        kc: &KernelClause,
        tracepoint: u32,
        layout: Layout,
        sink: &dyn Sink,
    ) -> Result<(), String> {
        let err = |what: &str, e: io::Error| format!("{what}: {e}");
        let mut fds = Vec::new();
        let mut maps = Vec::new();
        for a in &kc.aggs {
            let words = maps::value_words(a.func).ok_or("no kernel layout for the function")?;
            let key_bytes = maps::key_bytes(&a.keys, a.func);
            let stride = sink.agg_stride(kc.program, a.agg);
            if maps::is_quantization(a.func) && stride == 0 {
                return Err("an aggregation with no buckets".into());
            }
            let fd = bpfsys::create_named_map(
                bpfsys::MAP_PERCPU_HASH,
                key_bytes as u32,
                (words * 8) as u32,
                MAP_ENTRIES,
                &format!("dtx_agg{}", a.agg),
            )
            .map_err(|e| err("BPF map", e))?;
            fds.push(fd.as_raw_fd());
            maps.push(AggMap {
                program: kc.program,
                agg: a.agg,
                func: a.func,
                parts: a.keys.clone(),
                ret: kc.ret,
                fd,
                key_bytes,
                stride,
                words,
                folder: Folder::default(),
            });
        }
        let drops = bpfsys::create_named_map(bpfsys::MAP_PERCPU_ARRAY, 4, 8, 2, "dtx_drops")
            .map_err(|e| err("BPF map", e))?;
        if let std::collections::btree_map::Entry::Vacant(slot) = self.tls.entry(kc.program) {
            let fd = bpfsys::create_named_map(bpfsys::MAP_HASH, 16, 8, TLS_ENTRIES, "dtx_self")
                .map_err(|e| err("BPF map", e))?;
            slot.insert(fd);
        }
        let tls = self.tls.get(&kc.program).map_or(-1, |f| f.as_raw_fd());
        if !kc.globals.is_empty() && !self.globals.contains_key(&kc.program) {
            let n = sink
                .programs()
                .get(kc.program)
                .map_or(0, |p| p.variables.len());
            let entries = u32::try_from(n.max(1)).map_err(|_| "too many variables")?;
            let fd = bpfsys::create_named_map(bpfsys::MAP_ARRAY, 4, 8, entries, "dtx_globals")
                .map_err(|e| err("BPF map", e))?;
            self.globals.insert(kc.program, (fd, Vec::new()));
        }
        let globals = self
            .globals
            .get(&kc.program)
            .map_or(-1, |(f, _)| f.as_raw_fd());
        let insns = compile(
            kc,
            layout,
            &MapFds {
                aggs: &fds,
                drops: drops.as_raw_fd(),
                tls,
                globals,
                clock_offset: self.clock_offset,
            },
        )?;
        let prog = bpfsys::load_named_program(&insns, &format!("dtx_clause{}", kc.clause + 1))?;
        let ev = attach_program(tracepoint, 0, &prog, c"id < 0").map_err(|f| match f {
            AttachFailed::Open(e) => err("tracepoint event", e),
            AttachFailed::SetBpf(e) => err("BPF attach", e),
        })?;
        self.maps.extend(maps);
        if let Some((_, ids)) = self.globals.get_mut(&kc.program) {
            ids.extend(&kc.globals);
            ids.sort_unstable();
            ids.dedup();
        }
        self.drops.push(Drops {
            program: kc.program,
            fd: drops,
            seen: [0; 2],
        });
        self.progs.push(prog);
        self.events.push(ev);
        Ok(())
    }

    /// Folds into the engine's aggregations what the kernel aggregated since the last call,
    /// and reports new drops.
    pub fn sync(&mut self, sink: &mut dyn Sink) {
        let cpus = self.cpus;
        for m in &mut self.maps {
            let mut key = vec![0u8; m.key_bytes];
            let mut next = vec![0u8; m.key_bytes];
            let mut value = vec![0u8; cpus * m.words * 8];
            let mut words = vec![0i64; cpus * m.words];
            let mut first = true;
            let mut merges = Vec::new();
            // a walk bounded by the map's size (entries cannot outnumber it)
            for _ in 0..=MAP_ENTRIES {
                let more = bpfsys::next_key(&m.fd, (!first).then_some(&key[..]), &mut next);
                if !more {
                    break;
                }
                first = false;
                std::mem::swap(&mut key, &mut next);
                if !bpfsys::lookup(&m.fd, &key, &mut value) {
                    continue;
                }
                for (w, b) in words.iter_mut().zip(value.chunks_exact(8)) {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(b);
                    *w = i64::from_le_bytes(a);
                }
                // the engine's own fold and its inverse (agg), for the function the kernel's
                // entries keep
                let kf = maps::kernel_func(m.func);
                let fold = |d: &mut [i64], s: &[i64]| crate::agg::fold_words(kf, d, s);
                let since = move |n: &[i64], b: &[i64]| crate::agg::words_since(kf, n, b);
                let now = maps::fold_cpus(&words, m.words, crate::agg::fresh_words(kf), &fold);
                if let Some(delta) = m.folder.delta(&key, now, &since) {
                    merges.push((key.clone(), delta));
                }
            }
            let ret = m.ret;
            for (k, delta) in merges {
                let name = |nr: u64, f: ProbeField| {
                    let p = sink.probe_info(syscall_probe_id(u16::try_from(nr).ok()?, ret))?;
                    Some(match f {
                        ProbeField::Provider => p.provider.clone(),
                        ProbeField::Module => p.module.clone(),
                        ProbeField::Function => p.function.clone(),
                        ProbeField::Name => p.name.clone(),
                    })
                };
                let Some(datums) = maps::decode_key(&m.parts, &k, &name) else {
                    continue;
                };
                let spread;
                let delta = if maps::is_quantization(m.func) {
                    let sum = delta.first().copied().unwrap_or(0);
                    match maps::bucket_of(&m.parts, &k, m.stride, sum) {
                        Some(w) => {
                            spread = w;
                            &spread
                        }
                        None => continue,
                    }
                } else {
                    &delta
                };
                if !sink.merge_kernel_agg(m.program, m.agg, &datums, delta) {
                    sink.add_agg_drops(m.program, 1);
                }
            }
        }
        for d in &mut self.drops {
            for (i, index) in [AGG_DROPS, DYN_DROPS].into_iter().enumerate() {
                let mut value = vec![0u8; cpus * 8];
                if !bpfsys::lookup(&d.fd, &(index as u32).to_le_bytes(), &mut value) {
                    continue;
                }
                let total: u64 = value
                    .chunks_exact(8)
                    .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
                    .fold(0, u64::wrapping_add);
                if total > d.seen[i] {
                    let n = total - d.seen[i];
                    if index == AGG_DROPS {
                        sink.add_agg_drops(d.program, n);
                    } else {
                        sink.add_dynvar_drops(d.program, n);
                    }
                    d.seen[i] = total;
                }
            }
        }
    }

    /// Detaches the programs: no firing updates the maps after this.
    pub fn detach(&mut self) {
        self.events.clear();
    }

    /// Detaches, folds in what is left, and frees everything.
    pub fn close(&mut self, sink: &mut dyn Sink) {
        self.detach();
        self.sync(sink);
        // what the kernel added to each global, added to the engine's: only BEGIN and END
        // clauses name them in user space (`open`), BEGIN's before any event is taken and
        // END's after this
        for (&program, (fd, ids)) in &self.globals {
            for &id in ids {
                let mut v = [0u8; 8];
                if bpfsys::lookup(fd, &id.to_le_bytes(), &mut v) {
                    sink.add_to_global(program, id, u64::from_le_bytes(v));
                }
            }
        }
        *self = KernelClauses::default();
    }
}
