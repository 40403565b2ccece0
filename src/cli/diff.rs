//! `dtx --diff`: what changed between two runs of one program (docs/compare.md).
//!
//! - `dtx --diff before.json after.json`: two saved results (`-x oformat=json`, read back as
//!   `--merge` reads them);
//! - `dtx --diff -E before.etl -E after.etl -s prog.d`: the program run over each trace (each
//!   `-E` may be a glob or archive, merged as a run of it merges them), as `dtx -q -x
//!   oformat=json -E <trace> <the rest>` would run it: this executable is started once per
//!   side, so each side's numbers are exactly those of its own run.
//!
//! Both sides become aggregation snapshots, `agg::diff` compares them and `output::diff`
//! renders the result as a table, JSON, differential folded stacks or a differential flame
//! graph.

use std::io::Write;

use crate::agg::diff::AggDiff;
use crate::agg::snapshot::AggView;
use crate::output::diff::{DiffView, Side, SortBy};
use crate::output::json::Json;

/// What the output is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Text,
    Json { pretty: bool },
    Folded,
}

/// The arguments of `--diff`.
#[derive(Debug)]
struct DiffArgs {
    view: DiffView,
    format: Format,
    output: Option<String>,
    svg: Option<String>,
    /// Only this aggregation (`@name`).
    agg: Option<String>,
    /// Given seconds of the two sides (`--seconds B,A`), for saved results.
    seconds: Option<(f64, f64)>,
    /// The two `-E` traces, when comparing traces.
    traces: Vec<String>,
    /// The saved results, when comparing those.
    files: Vec<String>,
    /// What is handed to each run over a trace.
    run_args: Vec<String>,
}

const USAGE: &str = "usage: dtx --diff [options] before.json after.json\n       \
                     dtx --diff [options] -E before.etl -E after.etl (-s prog.d | -n 'D') [dtx options]";

fn parse_args(argv: &[String]) -> Result<DiffArgs, String> {
    let mut a = DiffArgs {
        view: DiffView::default(),
        format: Format::Text,
        output: None,
        svg: None,
        agg: None,
        seconds: None,
        traces: Vec::new(),
        files: Vec::new(),
        run_args: Vec::new(),
    };
    let mut positional = Vec::new();
    let mut it = argv.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("option {name} requires an argument"))
        };
        match arg.as_str() {
            "--sort" => {
                let w = value(arg)?;
                a.view.sort = SortBy::parse(&w)
                    .ok_or_else(|| format!("--sort {w}: sort by change, ratio or name"))?;
            }
            "--top" => {
                let w = value(arg)?;
                a.view.top = Some(
                    w.parse()
                        .map_err(|_| format!("--top {w}: a number of rows"))?,
                );
            }
            "--per-second" => a.view.per_second = true,
            "--absolute" => a.view.per_second = false,
            "--seconds" => {
                let w = value(arg)?;
                let p = w
                    .split_once(',')
                    .and_then(|(b, af)| Some((b.parse().ok()?, af.parse().ok()?)))
                    .filter(|&(b, af): &(f64, f64)| {
                        b > 0.0 && af > 0.0 && b.is_finite() && af.is_finite()
                    })
                    .ok_or_else(|| format!("--seconds {w}: the two runs' seconds, as 10.5,12"))?;
                a.seconds = Some(p);
            }
            "--svg" => a.svg = Some(value(arg)?),
            "--agg" => {
                let n = value(arg)?;
                a.agg = Some(if n.starts_with('@') {
                    n
                } else {
                    format!("@{n}")
                });
            }
            "-o" => a.output = Some(value(arg)?),
            "-E" => a.traces.push(value(arg)?),
            "-x" => {
                let v = value(arg)?;
                match v.split_once('=') {
                    Some(("oformat", f)) => {
                        a.format = match f {
                            "text" | "none" => Format::Text,
                            "json" => Format::Json { pretty: false },
                            "json,pretty" => Format::Json { pretty: true },
                            "folded" => Format::Folded,
                            _ => {
                                return Err(format!(
                                    "-x oformat={f}: a diff is written as text, json, json,pretty or folded"
                                ))
                            }
                        }
                    }
                    _ => a.run_args.extend(["-x".to_string(), v]),
                }
            }
            "-q" => {}
            _ if !a.traces.is_empty() || arg.starts_with('-') => {
                // the rest of a run's command line (-s, -n, -C, $1 arguments, ...)
                a.run_args.push(arg.clone());
                if matches!(
                    arg.as_str(),
                    "-s" | "-n"
                        | "-P"
                        | "-m"
                        | "-f"
                        | "-i"
                        | "-I"
                        | "-D"
                        | "-U"
                        | "-b"
                        | "-p"
                        | "-c"
                ) {
                    a.run_args.push(value(arg)?);
                }
            }
            _ => positional.push(arg.clone()),
        }
    }
    if a.traces.is_empty() {
        if !a.run_args.is_empty() {
            return Err(format!(
                "{}: two saved results are compared as they are (a program runs only over traces: -E before -E after)\n{USAGE}",
                a.run_args.join(" ")
            ));
        }
        if positional.len() != 2 {
            return Err(format!(
                "--diff compares two results, {} given\n{USAGE}",
                positional.len()
            ));
        }
        a.files = positional;
    } else {
        // arguments after the traces belong to the runs ($1 ... of the program)
        a.run_args.extend(positional);
        if a.traces.len() != 2 {
            return Err(format!(
                "--diff compares two traces (-E before -E after), {} given; a glob or an archive on one -E is one side\n{USAGE}",
                a.traces.len()
            ));
        }
        if !a
            .run_args
            .iter()
            .any(|x| matches!(x.as_str(), "-s" | "-n" | "-P" | "-m" | "-f" | "-i"))
        {
            return Err(format!(
                "--diff over traces needs the program to run (-s prog.d or -n 'D')\n{USAGE}"
            ));
        }
    }
    Ok(a)
}

/// Runs `dtx --diff ...` (`argv` after `--diff`); returns the exit status.
pub fn main(prog: &str, argv: &[String]) -> i32 {
    match run(argv) {
        Ok(()) => 0,
        Err(e) => {
            crate::output::stderr::say(prog, e);
            1
        }
    }
}

/// A saved result as aggregation snapshots (the names it saved for frames and symbols).
pub fn views_of(file: &str, doc: Json) -> Result<Vec<AggView>, String> {
    let m = super::merge::merge(&[(file, doc.clone())])?;
    let mut views = crate::agg::snapshot::take(&m.table, &m.names);
    // an aggregation with no entry has no function, and `merge` leaves it out: it is still
    // the program's, empty
    for name in super::merge::aggregation_names(&doc) {
        let name = if name == "@_" { "@".to_string() } else { name };
        if !views.iter().any(|v| v.name == name) {
            views.push(AggView {
                name,
                rows: Vec::new(),
            });
        }
    }
    Ok(views)
}

fn read_doc(f: &str) -> Result<Json, String> {
    let text = if f == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .map_err(|e| format!("failed to read standard input: {e}"))?;
        s
    } else {
        std::fs::read_to_string(f).map_err(|e| format!("failed to open {f}: {e}"))?
    };
    crate::output::json::parse(&text).map_err(|e| format!("{f}: {e}"))
}

/// How long a trace lasted by its logfile header (its start to the session's stop); `None`
/// for a glob or when the header does not say.
pub fn trace_seconds(spec: &str) -> Option<f64> {
    if spec.contains(['*', '?', '[']) {
        return None;
    }
    let src = crate::sources::etl::TraceSource::open(spec).ok()?;
    let h = src.file.header();
    (h.end_time > h.start_time && h.start_time > 0)
        .then(|| (h.end_time - h.start_time) as f64 / 1e7)
}

/// Runs the program over one trace as its own run of this executable, returning the JSON
/// document it printed.
fn run_over(trace: &str, run_args: &[String]) -> Result<Json, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find dtx itself: {e}"))?;
    let out = std::process::Command::new(exe)
        .args(["-q", "-x", "oformat=json", "-E", trace])
        .args(run_args)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("{trace}: cannot run dtx over it: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{trace}: the run over it failed ({}); its messages are above",
            out.status
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    crate::output::json::parse(&text).map_err(|e| format!("{trace}: its run's JSON: {e}"))
}

/// The two sides' documents and how long each ran.
fn load(a: &DiffArgs) -> Result<[(Side, Json); 2], String> {
    if a.traces.is_empty() {
        let secs = a.seconds;
        let side = |i: usize, f: &String| -> Result<(Side, Json), String> {
            Ok((
                Side {
                    source: f.clone(),
                    seconds: secs.map(|s| if i == 0 { s.0 } else { s.1 }),
                },
                read_doc(f)?,
            ))
        };
        return Ok([side(0, &a.files[0])?, side(1, &a.files[1])?]);
    }
    // both runs at once (each is one process; the machine's cores share them)
    let (b, af) = std::thread::scope(|s| {
        let h = s.spawn(|| run_over(&a.traces[0], &a.run_args));
        let af = run_over(&a.traces[1], &a.run_args);
        (
            h.join()
                .unwrap_or_else(|_| Err("the run over the first trace failed".into())),
            af,
        )
    });
    let secs = |i: usize, t: &str| match a.seconds {
        Some(s) => Some(if i == 0 { s.0 } else { s.1 }),
        None => trace_seconds(t),
    };
    Ok([
        (
            Side {
                source: a.traces[0].clone(),
                seconds: secs(0, &a.traces[0]),
            },
            b?,
        ),
        (
            Side {
                source: a.traces[1].clone(),
                seconds: secs(1, &a.traces[1]),
            },
            af?,
        ),
    ])
}

/// Compares two saved documents as `--diff` does; `agg` keeps one aggregation.
pub fn compare_docs(
    before: (&str, Json),
    after: (&str, Json),
    agg: Option<&str>,
) -> Result<Vec<AggDiff>, String> {
    let vb = views_of(before.0, before.1)?;
    let va = views_of(after.0, after.1)?;
    let mut d = crate::agg::diff::compare(&vb, &va, before.0, after.0)?;
    if let Some(name) = agg {
        d.retain(|x| x.name == name);
        if d.is_empty() {
            return Err(format!("{name}: no such aggregation in {}", before.0));
        }
    }
    Ok(d)
}

fn run(argv: &[String]) -> Result<(), String> {
    let mut a = parse_args(argv)?;
    let [(sb, db), (sa, da)] = load(&a)?;
    if a.view.per_second {
        for s in [&sb, &sa] {
            if s.seconds.is_none() {
                return Err(format!(
                    "{}: how long its run lasted is not known ({}); --seconds BEFORE,AFTER gives it",
                    s.source,
                    if a.traces.is_empty() {
                        "a saved result does not say"
                    } else {
                        "its header does not say"
                    }
                ));
            }
        }
    }
    let diffs = compare_docs((&sb.source, db), (&sa.source, da), a.agg.as_deref())?;
    a.view.before = sb;
    a.view.after = sa;
    let mut out: Box<dyn Write> = match &a.output {
        Some(p) => Box::new(
            std::fs::File::create(p)
                .map_err(|e| format!("failed to open output file '{p}': {e}"))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let stacks: Vec<&AggDiff> = diffs.iter().filter(|d| d.has_stack_key()).collect();
    let io = |e: std::io::Error| format!("failed to write the diff: {e}");
    match a.format {
        Format::Text => crate::output::diff::write_text(&diffs, &a.view, &mut out).map_err(io)?,
        Format::Json { pretty } => {
            let j = crate::output::diff::diff_json(&diffs, &a.view);
            let text = if pretty {
                j.to_json_pretty()
            } else {
                j.to_json()
            };
            writeln!(out, "{text}").map_err(io)?;
        }
        Format::Folded => {
            if stacks.is_empty() {
                return Err("-x oformat=folded: no aggregation has a stack key".into());
            }
            for d in &stacks {
                crate::output::diff::write_diff_folded(d, &mut out).map_err(io)?;
            }
        }
    }
    out.flush().map_err(io)?;
    if let Some(path) = &a.svg {
        let d = match stacks.as_slice() {
            [] => return Err("--svg: no aggregation has a stack key to draw".into()),
            [d] => d,
            many => {
                return Err(format!(
                    "--svg: {} aggregations have stacks ({}); --agg names the one to draw",
                    many.len(),
                    many.iter()
                        .map(|d| d.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
        };
        let title = format!(
            "{}: {} -> {} (red grew, blue shrank)",
            d.name, a.view.before.source, a.view.after.source
        );
        let f = std::fs::File::create(path)
            .map_err(|e| format!("failed to open output file '{path}': {e}"))?;
        crate::output::diff::write_diff_svg(d, &title, std::io::BufWriter::new(f))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<DiffArgs, String> {
        parse_args(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn options_split_between_the_diff_and_the_runs() {
        let a = args("--sort ratio --top 5 --per-second -x oformat=json a.json b.json").unwrap();
        assert_eq!(a.view.sort, SortBy::Ratio);
        assert_eq!(a.view.top, Some(5));
        assert!(a.view.per_second);
        assert_eq!(a.format, Format::Json { pretty: false });
        assert_eq!(a.files, ["a.json", "b.json"]);
        let a = args("-E x.etl -E y.etl -x stackwindow=0 -s p.d arg1").unwrap();
        assert_eq!(a.traces, ["x.etl", "y.etl"]);
        assert_eq!(a.run_args, ["-x", "stackwindow=0", "-s", "p.d", "arg1"]);
        assert!(args("a.json").unwrap_err().contains("two results, 1 given"));
        assert!(args("-E x.etl -s p.d").unwrap_err().contains("two traces"));
        assert!(args("-E x -E y").unwrap_err().contains("needs the program"));
        assert!(args("-s p.d a.json b.json")
            .unwrap_err()
            .contains("compared as they are"));
        assert!(args("-x oformat=xml a b").is_err());
        assert!(args("--seconds 1 a b").is_err());
        assert_eq!(
            args("--seconds 1.5,3 a b").unwrap().seconds,
            Some((1.5, 3.0))
        );
    }
}
