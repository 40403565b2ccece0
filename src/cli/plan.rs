//! What a command line asks for, decided before anything runs: console or batch, which
//! traces, where the output goes, whether a target is opened, and how the run ends. A pure
//! function of the parsed arguments and two facts found outside them (the traces a `-E` glob
//! names, whether standard input and output are a terminal), so it is tested without running
//! anything; [`super::run`] then carries the plan out.

use std::path::PathBuf;

use super::args::{self, Args};
use crate::lang::types::DataModel;

/// A run, as the command line plans it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The console (`--tui`, or no program on a terminal) or dtrace's batch run.
    pub mode: Mode,
    /// The recorded traces replayed (`-E`), or none for a live run.
    pub traces: Traces,
    /// Where a batch run's output goes (`-o`).
    pub output: Output,
    /// The data model programs are compiled for (`-32`/`-64`).
    pub model: DataModel,
    /// Whether the target (`-c`/`-p`) is opened before compiling: always, except for a
    /// listing with no target, where nothing is traced.
    pub open_target: bool,
    /// What a batch run does once its programs compile.
    pub end: End,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Console,
    Batch,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Traces {
    /// A live run.
    Live,
    /// One trace, replayed on the run's own engine (or, where it does not exist on Windows,
    /// the file a live session logs to).
    One(PathBuf),
    /// Several traces, each on its own engine, merged.
    Many(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Output {
    Stdout,
    /// Appended to, as dtrace's `-o`.
    File(PathBuf),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// `-l`: list the probes the programs match (every probe with no program).
    List,
    /// No program and no `-l`: dtrace's "no probes specified".
    NoProbes,
    /// `-e`: stop once compiled.
    CompileOnly,
    /// Trace.
    Run,
}

/// Plans the run `args` ask for. `traces` are the files `-E` names once its globs and zip
/// members are expanded; `terminal` is whether standard input and output are both a
/// terminal. Combinations no run can serve are refused here, before anything starts.
pub(crate) fn plan(args: &Args, traces: Vec<String>, terminal: bool) -> Result<Plan, String> {
    let traces = match traces.len() {
        0 => Traces::Live,
        1 => Traces::One(PathBuf::from(&traces[0])),
        _ => Traces::Many(traces),
    };
    let mode =
        if args.tui || (args.programs.is_empty() && !args.list && !args.compile_only && terminal) {
            Mode::Console
        } else {
            Mode::Batch
        };
    let many = matches!(traces, Traces::Many(_));
    if mode == Mode::Console && many {
        return Err("the console replays one trace; give -E once".into());
    }
    if many && (!args.command.is_empty() || !args.pids.is_empty()) {
        return Err("a trace replay (-E) cannot trace a process (-c/-p)".into());
    }
    if mode == Mode::Batch && args.baseline.is_some() {
        return Err("--baseline compares in the console (--tui); on the command line, compare two saved results with dtx --diff before.json after.json".into());
    }
    let end = if args.list {
        End::List
    } else if args.programs.is_empty() {
        End::NoProbes
    } else if args.compile_only {
        End::CompileOnly
    } else {
        End::Run
    };
    Ok(Plan {
        mode,
        traces,
        output: match &args.output {
            Some(p) => Output::File(p.clone()),
            None => Output::Stdout,
        },
        model: match args.data_model {
            Some(args::DataModel::Ilp32) => DataModel::Ilp32,
            _ => DataModel::Lp64,
        },
        open_target: !(args.list && args.command.is_empty() && args.pids.is_empty()),
        end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn args(line: &[&str]) -> Args {
        let argv: Vec<OsString> = std::iter::once("dtx")
            .chain(line.iter().copied())
            .map(OsString::from)
            .collect();
        match args::parse(&argv) {
            Ok(a) => a,
            Err(e) => panic!("{line:?} parses: {:?}", e.message),
        }
    }

    fn planned(line: &[&str], traces: &[&str], terminal: bool) -> Result<Plan, String> {
        let traces = traces.iter().map(|s| s.to_string()).collect();
        plan(&args(line), traces, terminal)
    }

    #[test]
    fn a_program_runs_in_batch_live_to_stdout() {
        let p = planned(&["-n", "BEGIN { exit(0); }"], &[], true).unwrap();
        assert_eq!(
            p,
            Plan {
                mode: Mode::Batch,
                traces: Traces::Live,
                output: Output::Stdout,
                model: DataModel::Lp64,
                open_target: true,
                end: End::Run,
            }
        );
    }

    #[test]
    fn no_program_on_a_terminal_is_the_console_and_off_one_is_no_probes() {
        let p = planned(&["-E", "a.etl"], &["a.etl"], true).unwrap();
        assert_eq!(p.mode, Mode::Console);
        assert_eq!(p.traces, Traces::One(PathBuf::from("a.etl")));
        let p = planned(&["-E", "a.etl"], &["a.etl"], false).unwrap();
        assert_eq!((p.mode, p.end), (Mode::Batch, End::NoProbes));
    }

    #[test]
    fn tui_asks_for_the_console_with_a_program_too() {
        let p = planned(&["--tui", "-n", "BEGIN"], &[], false).unwrap();
        assert_eq!(p.mode, Mode::Console);
    }

    #[test]
    fn listing_and_compiling_only_stay_in_batch_on_a_terminal() {
        let p = planned(&["-l"], &[], true).unwrap();
        assert_eq!(
            (p.mode, p.end, p.open_target),
            (Mode::Batch, End::List, false)
        );
        let p = planned(&["-l", "-p", "1"], &[], true).unwrap();
        assert!(
            p.open_target,
            "a listing with -p opens its target for pid probes"
        );
        let p = planned(&["-e", "-n", "BEGIN"], &[], true).unwrap();
        assert_eq!((p.mode, p.end), (Mode::Batch, End::CompileOnly));
        // -l wins over -e, as the run checks the listing first
        let p = planned(&["-l", "-e", "-n", "BEGIN"], &[], false).unwrap();
        assert_eq!(p.end, End::List);
    }

    #[test]
    fn output_file_and_data_model() {
        let p = planned(&["-o", "out.txt", "-32", "-n", "BEGIN"], &[], false).unwrap();
        assert_eq!(p.output, Output::File(PathBuf::from("out.txt")));
        assert_eq!(p.model, DataModel::Ilp32);
    }

    #[test]
    fn several_traces_run_merged_but_not_in_the_console_nor_with_a_target() {
        let p = planned(&["-n", "BEGIN"], &["a.etl", "b.etl"], false).unwrap();
        assert_eq!(
            p.traces,
            Traces::Many(vec!["a.etl".to_string(), "b.etl".to_string()])
        );
        let e = planned(&["--tui"], &["a.etl", "b.etl"], false).unwrap_err();
        assert_eq!(e, "the console replays one trace; give -E once");
        let e = planned(&["-n", "BEGIN", "-p", "1"], &["a.etl", "b.etl"], false).unwrap_err();
        assert_eq!(e, "a trace replay (-E) cannot trace a process (-c/-p)");
        // one trace with a target is the run's to refuse (the console opens its own)
        assert!(planned(&["-n", "BEGIN", "-p", "1"], &["a.etl"], false).is_ok());
    }
}
