//! Many traces in one run (`-E a.etl -E b.etl`, `-E 'runs/*.etl'`): the traces are separate
//! systems watched by one consumer (docs/many-traces.md). A program means over many traces
//! what one engine walking them one after another means: globals, aggregations and
//! speculations are the run's; thread-locals, clocks and thread tables are each trace's;
//! BEGIN and END fire once; `exit()` ends the run.
//!
//! Two ways to run, with the same answer:
//! - in parallel ([`run`]), when the program lets no trace see what another left behind
//!   ([`crate::ir::sharing::needs_one_engine`]): one engine per file on a pool of threads,
//!   each starting from the globals BEGIN left, the files' aggregations and drops folded into
//!   the main engine's (as dtrace folds its per-CPU buffers), then END there;
//! - in turn ([`run_in_turn`]) otherwise: the main engine walks every file, in the order
//!   given, and dtx says once why.
//!
//! What a file's clauses print goes out line by line as `file: line`, in the file's own
//! order; their faults name the file. In a structured format (`-x oformat=json|xml|folded`)
//! the document is the main engine's; in JSON or XML, a program whose probe clauses trace
//! data (`printf`, `trace`...) runs the traces in turn, so the document holds those records
//! ([`crate::ir::sharing::records_need_one_engine`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::consumer::{Consumer, ConsumerOptions};
use super::Engine;
use crate::agg::{AggregationTable, SymbolResolver};
use crate::ir;
use crate::output::labelled::{LabelledWriter, SharedOutput};
use crate::probes::ProbeCatalog;
use crate::providers::etw::EtwProbes;
use crate::sources::etl::TraceSource;
use crate::vm::VmOptions;

/// What every file's engine of a many-trace run is built from.
pub struct ManyTraces<'a> {
    /// The traces, as named for the `trace` variable and the labels.
    pub traces: &'a [String],
    /// The compiled programs with their labels, as the main engine runs them.
    pub programs: Vec<(String, Arc<ir::Program>)>,
    pub vm_opts: VmOptions,
    pub catalog: &'a (dyn ProbeCatalog + Sync),
    /// The union of the traces' providers (see [`scan_providers`]).
    pub etw: &'a EtwProbes,
    /// What the scan learnt of each trace (its start, and the opened source when kept).
    pub scanned: Vec<Mutex<ScannedTrace>>,
    pub consumer: ConsumerOptions,
    /// The run's output, shared with the main engine's consumer.
    pub out: SharedOutput,
    /// Whether a program records stacks.
    pub stacks: bool,
    /// How far ahead of each walk its stacks are read (`-x stackwindow`, ns; 0: all before).
    pub stack_window: u64,
    /// Threads of the pool (at least 1).
    pub threads: usize,
}

/// What one file's engine hands back.
struct FileResult {
    /// Each program's aggregations.
    aggs: Vec<AggregationTable>,
    /// Each program's drops: (aggregation, principal buffer).
    drops: Vec<(u64, u64)>,
    /// Each program's dynamic-variable and speculation drops ([`crate::vm::Vm::spec_drops`]).
    dyn_drops: Vec<(u64, (u64, u64, u64))>,
    /// The status of an `exit()` in the file.
    exit: Option<i32>,
    errors: u64,
    /// Names the stack frames and symbol keys of the file.
    symbols: Box<dyn SymbolResolver + Send>,
}

/// The threads a pool of workers should have: as many as the machine has cores, no more
/// than there is work.
pub fn pool_size(jobs: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.min(jobs).max(1)
}

/// Runs `job(i)` for every `i` in `0..n` on `threads` threads (each taking the next index
/// when it is free) and returns the results in index order.
pub fn pool_map<T: Send>(n: usize, threads: usize, job: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<T>>> = (0..n).map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, n.max(1)) {
            let _ = std::thread::Builder::new()
                // as the main thread has: deep D expressions recurse in the checker and the VM
                .stack_size(8 << 20)
                .spawn_scoped(s, || loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= n {
                        break;
                    }
                    let r = job(i);
                    *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                });
        }
    });
    // a thread that could not start left its indices to the others; one that did not run
    // an index (none could start) runs it here
    slots
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            m.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .unwrap_or_else(|| job(i))
        })
        .collect()
}

/// One trace after the scan.
pub struct ScannedTrace {
    /// When the trace started (ns since 1970).
    pub start_unix_ns: u64,
    /// The source the scan opened (its threads known, its decoder fresh), kept for the walk
    /// when every trace is walked at once anyway (no more traces than threads); otherwise the
    /// walk opens the trace again, so that only the traces being walked are in memory.
    pub source: Option<TraceSource>,
    /// The threads and processes of the trace's start the scan found: a trace opened again
    /// takes them rather than read the file a second time for them.
    pub start: Option<std::sync::Arc<crate::sources::etl::StartTable>>,
}

/// Opens every trace and gathers the providers they hold (in parallel, `threads` at a time)
/// into one set, in the order the traces were given: the catalog the programs compile
/// against and every file's engine fires through. A trace that cannot be read is an error
/// naming it.
pub fn scan_providers(
    traces: &[String],
    threads: usize,
) -> Result<(EtwProbes, Vec<Mutex<ScannedTrace>>), String> {
    let keep = traces.len() <= threads;
    let sets = pool_map(traces.len(), threads, |i| {
        let mut src = TraceSource::open(&traces[i]).map_err(|e| e.to_string())?;
        let mut etw = EtwProbes::new();
        src.scan_providers(&mut etw);
        // the walk starts from fresh decoder state, as a single trace's does
        src.decoder = TraceSource::new_decoder();
        let scanned = ScannedTrace {
            start_unix_ns: src.start_unix_ns(),
            start: (!keep).then(|| src.start_table()).flatten(),
            source: keep.then_some(src),
        };
        Ok::<_, String>((etw, Mutex::new(scanned)))
    });
    let mut all = EtwProbes::new();
    let mut scanned = Vec::new();
    for set in sets {
        let (etw, s) = set?;
        all.absorb(&etw);
        scanned.push(s);
    }
    Ok((all, scanned))
}

/// Runs the many-trace run on `main`, whose programs are `run.programs` and whose consumer
/// writes to `run.out`: BEGIN there, every file on the pool, the files' aggregations added
/// into `main`'s, END and the final printing there. Returns the exit status.
pub fn run(main: &mut Engine, run: &ManyTraces<'_>) -> i32 {
    let prog = main.consumer.prog().to_string();
    let first_start = run.scanned.first().map_or(0, |s| {
        s.lock().unwrap_or_else(|e| e.into_inner()).start_unix_ns
    });
    // once for the run: the traces' system call addresses are named together
    main.say_before_traces(run.etw, run.traces.len());
    let in_turn = run
        .programs
        .iter()
        .find_map(|(_, p)| crate::ir::sharing::needs_one_engine(p))
        .or_else(|| {
            // a JSON/XML document keeps the files' records: one engine writes them all
            run.consumer
                .oformat
                .is_structured()
                .then(|| {
                    run.programs
                        .iter()
                        .find_map(|(_, p)| crate::ir::sharing::records_need_one_engine(p))
                })
                .flatten()
        });
    if let Some(why) = &in_turn {
        crate::output::stderr::say(
            &prog,
            format_args!("the traces run one after another, in the order given: {why}"),
        );
    }
    main.begin(Some(first_start));
    if in_turn.is_some() {
        return run_in_turn(main, run, &prog);
    }
    let results = if main.done() {
        Vec::new()
    } else {
        let begun: Vec<_> = main.runs.iter().map(|r| r.vm.global_state()).collect();
        let flag = main.interrupt_flag();
        pool_map(run.traces.len(), run.threads, |i| {
            run_file(run, i, &begun, flag.clone(), &prog)
        })
    };
    let mut symbols: Vec<Box<dyn SymbolResolver + Send>> = Vec::new();
    let mut exit = None;
    for r in results.into_iter().flatten() {
        for ((target, aggs), (agg_drops, principal_drops)) in
            main.runs.iter_mut().zip(&r.aggs).zip(&r.drops)
        {
            target.vm.aggs.merge_from(aggs);
            target.vm.agg_drops += agg_drops;
            target.vm.principal_drops += principal_drops;
        }
        for (target, (dynvars, spec)) in main.runs.iter_mut().zip(&r.dyn_drops) {
            target.vm.add_drops(*dynvars, *spec);
        }
        main.consumer.errors += r.errors;
        exit = exit.or(r.exit);
        symbols.push(r.symbols);
    }
    if let Some(code) = exit {
        main.set_exit_status(code);
    }
    main.consumer.symbols = Box::new(crate::symbols::FirstNamed(symbols));
    main.end()
}

/// One file: its own engine, from the globals BEGIN left, on the file's trace time.
fn run_file(
    run: &ManyTraces<'_>,
    i: usize,
    begun: &[crate::vm::GlobalState],
    flag: Arc<std::sync::atomic::AtomicBool>,
    prog: &str,
) -> Option<FileResult> {
    let name = &run.traces[i];
    let mut src = open_trace(run, i, prog)?;
    // a structured document (JSON, XML) is the main engine's alone: it holds BEGIN's and
    // END's firings and the merged aggregations, not the files' own records
    let out: Box<dyn std::io::Write + Send> = if run.consumer.oformat.is_structured()
        || run.consumer.oformat == crate::output::structured::OFormat::Folded
    {
        Box::new(std::io::sink())
    } else {
        Box::new(LabelledWriter::new(name, run.out.clone()))
    };
    let consumer = Consumer::new(out, run.consumer.clone());
    let mut engine = Engine::new(
        run.programs.clone(),
        run.vm_opts.clone(),
        run.catalog,
        Box::new(super::clock::LiveClock::new()),
        consumer,
    );
    engine.set_interrupt_flag(flag);
    engine.set_trace_name(name);
    engine.consumer.set_trace_label(Some(name));
    for (r, g) in engine.runs.iter_mut().zip(begun) {
        r.vm.set_global_state(g.clone());
    }
    engine.start_trace(src.start_unix_ns());
    let warnings = engine.walk_trace(&mut src, run.etw, &mut |_, _| true);
    engine.say_after_trace(Some(name), &warnings);
    engine.consumer.flush();
    let symbols = src.symbols();
    let drops = engine
        .runs
        .iter()
        .map(|r| (r.vm.agg_drops, r.vm.principal_drops))
        .collect();
    let dyn_drops = engine
        .runs
        .iter()
        .map(|r| (r.vm.dynvar_drops(), r.vm.spec_drops()))
        .collect();
    let aggs = engine
        .runs
        .iter_mut()
        .map(|r| std::mem::replace(&mut r.vm.aggs, AggregationTable::new(&[])))
        .collect();
    Some(FileResult {
        aggs,
        drops,
        dyn_drops,
        exit: engine.exit_status(),
        errors: engine.errors(),
        symbols: Box::new(symbols),
    })
}

/// The trace `i` of the run, as the scan kept it or opened again, with its stacks collected
/// when a program records them; `None` (said on stderr) when it cannot be read.
fn open_trace(run: &ManyTraces<'_>, i: usize, prog: &str) -> Option<TraceSource> {
    let name = &run.traces[i];
    let (kept, start) = match run.scanned.get(i) {
        Some(s) => {
            let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
            (s.source.take(), s.start.take())
        }
        None => (None, None),
    };
    let mut src = match kept.map_or_else(|| TraceSource::open(name), Ok) {
        Ok(s) => s,
        Err(e) => {
            crate::output::stderr::say(prog, e);
            return None;
        }
    };
    // the scan read the trace's start: the walk does not read the file again for it
    if let Some(t) = start {
        src.preload_start_table(t);
    }
    if run.stacks {
        src.set_stack_window(run.stack_window);
        src.collect_stacks();
    }
    Some(src)
}

/// The run for a program whose meaning over several traces needs one engine (see
/// [`crate::ir::sharing::needs_one_engine`]): after BEGIN, `main` walks the traces one after
/// another, in the order given. Globals, aggregations and speculations carry over from one
/// trace to the next; thread-local variables do not (another trace's threads), and each
/// trace has its own clock, timers and thread table. `exit()` ends the run. What a trace's
/// clauses print is labelled with its name, as in the parallel run.
fn run_in_turn(main: &mut Engine, run: &ManyTraces<'_>, prog: &str) -> i32 {
    let structured = run.consumer.oformat.is_structured()
        || run.consumer.oformat == crate::output::structured::OFormat::Folded;
    let mut symbols: Vec<Box<dyn SymbolResolver + Send>> = Vec::new();
    for (i, name) in run.traces.iter().enumerate() {
        if main.done() {
            break;
        }
        let Some(mut src) = open_trace(run, i, prog) else {
            continue;
        };
        main.set_trace_name(name);
        main.consumer.set_trace_label(Some(name));
        for r in &mut main.runs {
            r.vm.clear_thread_locals();
        }
        // one document holds every record in a structured format; text lines are labelled
        let before = (!structured).then(|| {
            main.consumer
                .swap_output(Box::new(LabelledWriter::new(name, run.out.clone())))
        });
        main.start_trace(src.start_unix_ns());
        let warnings = main.walk_trace(&mut src, run.etw, &mut |_, _| true);
        main.say_after_trace(Some(name), &warnings);
        if let Some(before) = before {
            // dropping the labelled writer ends a line left open
            drop(main.consumer.swap_output(before));
        }
        main.consumer.set_trace_label(None);
        symbols.push(Box::new(src.symbols()));
    }
    main.set_trace_name("");
    main.consumer.symbols = Box::new(crate::symbols::FirstNamed(symbols));
    main.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_keeps_index_order() {
        let squares = pool_map(37, 3, |i| i * i);
        assert_eq!(squares, (0..37).map(|i| i * i).collect::<Vec<_>>());
        assert!(pool_map(0, 4, |i| i).is_empty());
        assert!(pool_size(1000) >= 1);
        assert_eq!(pool_size(1), 1);
    }
}
