//! The MCP server's tools (`list_probes`, `run`, `diff`) and resources (the `dscripts/`
//! library), each answering dtx's JSON. A D program runs through the engine's session handle
//! ([`crate::engine::session::Session`]), as the console runs it: over a trace (or the
//! built-in `demo`), or live, for at most the seconds asked; its printed output and its
//! aggregations come back bounded in bytes and rows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::agg::snapshot::{AggView, KeyCell};
use crate::engine::session::{Command, ProgramSpec, RunState, Session, SessionSource, Update};
use crate::output::json::Json;
use crate::probes::{Catalog, ProbeCatalog};

/// How the server was started.
#[derive(Clone, Debug, Default)]
pub struct ServerOptions {
    /// `-w`: destructive actions (`system()`, `raise()`, `stop()`, ...) are allowed.
    pub destructive: bool,
    /// Reads a saved result (`-x oformat=json`) as aggregation views: the command line's reader
    /// (`cli::diff::views_of`), handed in by the command line that starts the server, so that
    /// `diff` over saved results reads them as `dtx --diff` does.
    pub saved_views: Option<SavedViews>,
    /// Opens live tracing for programs of these texts (none: for a listing of every probe):
    /// the session source and the catalog its programs compile against. The command line
    /// hands it in (`cli::mcp_live_source`), since only it may reach the live sources: live ETW
    /// on Windows, the live clock and perf events on Linux. None: the server traces nothing
    /// live, and says so.
    pub live: Option<LiveSource>,
}

/// See [`ServerOptions::live`].
pub type LiveSource = fn(&[String]) -> Result<(SessionSource, Arc<Catalog>), String>;

/// See [`ServerOptions::saved_views`]: the file's name (for errors) and its parsed document.
pub type SavedViews = fn(&str, Json) -> Result<Vec<AggView>, String>;

pub const NAMES: &[&str] = &["list_probes", "run", "diff", "symbols", "check"];

pub const INSTRUCTIONS: &str = "dtx runs DTrace's D language over Windows ETW traces (.etl, \
    also inside .zip) and live. Use list_probes to see what a trace can fire, run to run a D \
    program over a trace (or 'demo', a built-in trace) and get its aggregations as JSON, and \
    diff to compare one program's aggregations over two traces (or two saved results). Destructive actions \
    (system(), raise(), stop(), copyout()) are refused unless the server was started with -w.";

/// Bytes of printed output a run returns at most.
const MAX_OUTPUT: usize = 64 * 1024;
/// Rows per aggregation a run returns at most.
const MAX_ROWS: usize = 1000;
/// The longest run asked (seconds of wall time).
const MAX_SECONDS: f64 = 600.0;

fn schema(props: &[(&str, &str, &str)], required: &[&str]) -> Json {
    Json::object([
        ("type", Json::str("object")),
        (
            "properties",
            Json::Object(
                props
                    .iter()
                    .map(|(n, t, d)| {
                        (
                            n.to_string(),
                            Json::object([("type", Json::str(*t)), ("description", Json::str(*d))]),
                        )
                    })
                    .collect(),
            ),
        ),
        (
            "required",
            Json::Array(required.iter().map(|r| Json::str(*r)).collect()),
        ),
    ])
}

fn tool(name: &str, description: &str, input: Json) -> Json {
    Json::object([
        ("name", Json::str(name)),
        ("description", Json::str(description)),
        ("inputSchema", input),
    ])
}

/// The `tools/list` answer.
pub fn list() -> Json {
    Json::Array(vec![
        tool(
            "list_probes",
            "The probes a trace (or 'demo', or live when no trace is given) can fire: provider, module, function, name and argument types; over a trace, how often each fired.",
            schema(
                &[
                    ("trace", "string", "a .etl file (or .zip), 'demo', or absent for live"),
                    ("match", "string", "a probe description glob, as provider:module:function:name (e.g. 'sched:::*')"),
                    ("limit", "integer", "at most this many probes (default 500)"),
                ],
                &[],
            ),
        ),
        tool(
            "run",
            "Runs a D program over a trace or live and returns what it printed and its aggregations as JSON. Compile errors and faults come back as errors with dtx's message and line.",
            schema(
                &[
                    ("program", "string", "the D program's text"),
                    ("trace", "string", "a .etl file (or .zip), 'demo', or absent for live"),
                    ("seconds", "number", "at most this many seconds of wall time (default 30; live: how long to trace, default 5)"),
                ],
                &["program"],
            ),
        ),
        tool(
            "diff",
            "Compares the aggregations of two runs key by key: before, after, change, ratio, new and gone keys (dtx --diff's JSON). With a program, it runs over the two traces; without one, before and after are two saved results (-x oformat=json files).",
            schema(
                &[
                    ("program", "string", "the D program's text (absent: compare two saved results)"),
                    ("before", "string", "the first trace, or saved result"),
                    ("after", "string", "the second trace, or saved result"),
                    ("per_second", "boolean", "divide counts and sums by each run's seconds"),
                    ("before_seconds", "number", "how long the first saved result's run lasted (per_second)"),
                    ("after_seconds", "number", "how long the second saved result's run lasted (per_second)"),
                    ("sort", "string", "change (default), ratio or name"),
                    ("top", "integer", "at most this many rows per aggregation"),
                ],
                &["before", "after"],
            ),
        ),
        tool(
            "symbols",
            "For each image a trace's stacks fall in: its PDB identity, how many frames, and where its PDB came from or why it is missing (dtx --symbols's JSON). Without a trace, on Windows: the running kernel's modules.",
            schema(
                &[
                    ("trace", "string", "a .etl file (or .zip) or 'demo'; absent: the running kernel (Windows)"),
                    ("seconds", "number", "at most this many seconds, downloads included (default 120)"),
                ],
                &[],
            ),
        ),
        tool(
            "check",
            "What works on this machine: dtx traces its own workload through the real probes and reports each facility as pass, fail or skip with the reason (dtx --check's JSON). Live facilities need the server to run with the privilege.",
            schema(
                &[("seconds", "number", "at most this many seconds (default 180)")],
                &[],
            ),
        ),
    ])
}

fn str_arg<'a>(args: &'a Json, name: &str) -> Option<&'a str> {
    match args.get(name) {
        Some(Json::Str(s)) => Some(s),
        _ => None,
    }
}

fn num_arg(args: &Json, name: &str) -> Option<f64> {
    match args.get(name)? {
        Json::Int(i) => Some(*i as f64),
        Json::UInt(u) => Some(*u as f64),
        Json::Float(f) => Some(*f),
        _ => None,
    }
}

/// Runs a tool; `Err` is a tool error (its text for the agent).
pub fn call(name: &str, args: &Json, opts: &ServerOptions) -> Result<Json, String> {
    match name {
        "list_probes" => list_probes(args, opts),
        "run" => {
            let program = str_arg(args, "program").ok_or("run needs a program")?;
            let trace = str_arg(args, "trace");
            let secs = num_arg(args, "seconds").unwrap_or(if trace.is_some() { 30.0 } else { 5.0 });
            let r = run(program, trace, secs, opts)?;
            Ok(r.json())
        }
        "diff" => diff(args, opts),
        "symbols" => super::reports::symbols(
            str_arg(args, "trace"),
            num_arg(args, "seconds").unwrap_or(120.0),
        ),
        "check" => super::reports::check(num_arg(args, "seconds").unwrap_or(180.0)),
        other => Err(format!("Unknown tool: {other}")),
    }
}

/// Where a run's events come from, with the probes it can name: the trace, or live tracing
/// for the programs `texts` (none: every probe, for a listing).
fn source_for(
    trace: Option<&str>,
    texts: &[String],
    opts: &ServerOptions,
) -> Result<(SessionSource, Arc<Catalog>), String> {
    match trace {
        Some(path) => {
            let mut etw = crate::providers::etw::EtwProbes::new();
            let mut src =
                crate::sources::etl::TraceSource::open(path).map_err(|e| format!("{path}: {e}"))?;
            src.scan_providers(&mut etw);
            let catalog = Arc::new(crate::providers::etw_catalog(&etw));
            Ok((
                SessionSource::Trace {
                    path: path.to_string(),
                    etw: Arc::new(etw),
                },
                catalog,
            ))
        }
        None => match opts.live {
            Some(live) => live(texts),
            None => {
                Err("this server traces nothing live: give a trace (a .etl file, or 'demo')".into())
            }
        },
    }
}

/// Compiles a program as the command line does; destructive actions only with `-w`.
fn compile(text: &str, catalog: &Catalog, opts: &ServerOptions) -> Result<ProgramSpec, String> {
    let mut options = crate::lang::options::DOptions::new();
    let c = crate::lang::compile(
        crate::lang::CompileInput {
            text,
            kind: crate::lang::SourceKind::File,
            macros: crate::lang::MacroEnv {
                args: vec!["program".to_string()],
                defaultargs: true,
                vars: vec![
                    ("pid".into(), std::process::id() as u64),
                    ("target".into(), 0),
                ],
            },
            cpp: None,
            file_name: "program",
            model: crate::lang::types::DataModel::Lp64,
        },
        &mut options,
        catalog,
    )
    .map_err(|d| format!("failed to compile the program: {d}"))?;
    if c.destructive && !opts.destructive {
        return Err(
            "destructive actions (system(), raise(), stop(), copyout(), ...) are refused: \
                    the server was started without -w (dtx --mcp -w allows them)"
                .into(),
        );
    }
    Ok(ProgramSpec {
        label: "program".into(),
        program: Arc::new(c.ir),
        options,
    })
}

/// What a run gave.
pub struct RunResult {
    pub source: String,
    pub output: String,
    pub output_truncated: bool,
    pub aggs: Vec<AggView>,
    pub messages: Vec<String>,
    pub exit: Option<i32>,
    /// Stopped because the seconds ran out.
    pub stopped: bool,
    pub errors: u64,
    pub drops: u64,
    /// The trace's length in seconds, when it was a trace.
    pub trace_seconds: Option<f64>,
}

fn row_json(func: &str, r: &crate::agg::snapshot::AggRow) -> Json {
    let keys = r
        .keys
        .iter()
        .map(|k| match k {
            KeyCell::Text(t) => Json::str(t.clone()),
            KeyCell::Stack(f) => Json::object([(
                "stack-frames",
                Json::Array(f.iter().map(|s| Json::str(s.clone())).collect()),
            )]),
        })
        .collect();
    let mut m = vec![
        ("keys".to_string(), Json::Array(keys)),
        ("value".to_string(), Json::Int(r.value.scalar())),
    ];
    if matches!(func, "quantize" | "lquantize" | "llquantize") {
        m.push((
            "buckets".to_string(),
            Json::Array(crate::output::structured::buckets_json(&r.value)),
        ));
    }
    Json::Object(m)
}

impl RunResult {
    pub fn json(&self) -> Json {
        let aggs = self
            .aggs
            .iter()
            .map(|v| {
                let func = v.func();
                let mut rows: Vec<&crate::agg::snapshot::AggRow> = v.rows.iter().collect();
                // printa's order: by value, largest last; here largest first, cut to MAX_ROWS
                rows.sort_by_key(|r| std::cmp::Reverse(r.value.scalar()));
                let total = rows.len();
                rows.truncate(MAX_ROWS);
                Json::object([
                    (
                        "aggregation-name",
                        Json::str(match v.name.trim_start_matches('@') {
                            "" => "_",
                            n => n,
                        }),
                    ),
                    ("function", Json::str(func)),
                    (
                        "rows",
                        Json::Array(rows.iter().map(|r| row_json(func, r)).collect()),
                    ),
                    ("rows-total", Json::UInt(total as u64)),
                ])
            })
            .collect();
        Json::object([
            ("source", Json::str(self.source.clone())),
            ("output", Json::str(self.output.clone())),
            ("output-truncated", Json::Bool(self.output_truncated)),
            ("aggregations", Json::Array(aggs)),
            (
                "messages",
                Json::Array(self.messages.iter().map(|m| Json::str(m.clone())).collect()),
            ),
            (
                "exit",
                self.exit.map_or(Json::Null, |c| Json::Int(i64::from(c))),
            ),
            ("stopped-after-seconds", Json::Bool(self.stopped)),
            ("errors", Json::UInt(self.errors)),
            ("drops", Json::UInt(self.drops)),
            (
                "trace-seconds",
                self.trace_seconds.map_or(Json::Null, Json::Float),
            ),
        ])
    }
}

/// Runs `program` over `trace` (or live) through a session, for at most `seconds`.
pub fn run(
    program: &str,
    trace: Option<&str>,
    seconds: f64,
    opts: &ServerOptions,
) -> Result<RunResult, String> {
    if seconds.is_nan() || seconds <= 0.0 {
        return Err("seconds must be more than 0".into());
    }
    let seconds = seconds.min(MAX_SECONDS);
    let (source, catalog) = source_for(trace, &[program.to_string()], opts)?;
    let spec = compile(program, &catalog, opts)?;
    let label = source.label();
    let session = Session::start(source, catalog, Duration::from_millis(200));
    session.send(Command::Run {
        program: spec,
        restart: false,
    });
    let mut r = RunResult {
        source: label,
        output: String::new(),
        output_truncated: false,
        aggs: Vec::new(),
        messages: Vec::new(),
        exit: None,
        stopped: false,
        errors: 0,
        drops: 0,
        trace_seconds: None,
    };
    // what the source said went wrong, and how many events it gave: a live run whose
    // source failed and gave nothing is a tool error, as the command line exits 1 for it
    let mut source_errors: Vec<String> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    // after a Stop, END and the last snapshot still come; how long they may take
    let mut hard = deadline + Duration::from_secs(30);
    let events = loop {
        let now = Instant::now();
        if now >= hard {
            return Err(format!(
                "the run did not end within {:.0} s of being stopped",
                (hard - deadline).as_secs_f64()
            ));
        }
        if now >= deadline && !r.stopped {
            r.stopped = true;
            session.send(Command::Stop);
            hard = Instant::now() + Duration::from_secs(30);
        }
        let Some(u) = session.wait(Duration::from_millis(100)) else {
            continue;
        };
        match u {
            Update::Output(t) => {
                if r.output.len() + t.len() > MAX_OUTPUT {
                    let mut room = MAX_OUTPUT.saturating_sub(r.output.len());
                    while room > 0 && !t.is_char_boundary(room) {
                        room -= 1;
                    }
                    r.output.push_str(&t[..room]);
                    r.output_truncated = true;
                } else {
                    r.output.push_str(&t);
                }
            }
            Update::Snapshot(s) => r.aggs = s.aggs,
            Update::Error(m) => {
                if source_errors.len() < 10 {
                    source_errors.push(m.clone());
                }
                if r.messages.len() < 100 {
                    r.messages.push(m);
                }
            }
            Update::Notice(m) => {
                if r.messages.len() < 100 {
                    r.messages.push(m);
                }
            }
            Update::Status(st) => {
                r.errors = st.errors;
                r.drops = st.drops;
                if let Some((_, len)) = st.position {
                    r.trace_seconds = Some(len as f64 / 1e9);
                }
                if let RunState::Ended(code) = st.state {
                    r.exit = Some(code);
                    break st.events;
                }
            }
        }
    };
    session.send(Command::Quit);
    // a live run that only stopped because of the seconds is not "stopped" early: that is
    // what seconds means there
    if trace.is_none() {
        r.stopped = false;
        if events == 0 && !source_errors.is_empty() {
            return Err(format!(
                "live tracing could not start, so nothing was traced: {}",
                source_errors.join("; ")
            ));
        }
    }
    Ok(r)
}

fn list_probes(args: &Json, opts: &ServerOptions) -> Result<Json, String> {
    let trace = str_arg(args, "trace");
    let pattern = str_arg(args, "match").unwrap_or("*");
    let limit = num_arg(args, "limit")
        .unwrap_or(500.0)
        .clamp(1.0, 100_000.0) as usize;
    let (catalog, counts) = match trace {
        Some(path) => {
            let mut etw = crate::providers::etw::EtwProbes::new();
            let mut src =
                crate::sources::etl::TraceSource::open(path).map_err(|e| format!("{path}: {e}"))?;
            src.scan_providers(&mut etw);
            let counts = src.probe_counts(&etw);
            (Arc::new(crate::providers::etw_catalog(&etw)), Some(counts))
        }
        None => (source_for(None, &[], opts)?.1, None),
    };
    // a description with fewer fields matches from the name backwards, as dtrace's -n does
    let mut parts: Vec<&str> = pattern.split(':').collect();
    while parts.len() < 4 {
        parts.insert(0, "");
    }
    let field = |pat: &str, v: &str| pat.is_empty() || crate::probes::glob_match(pat, v);
    let mut probes = Vec::new();
    let mut total = 0usize;
    for p in catalog.list() {
        if !(field(parts[0], &p.provider)
            && field(parts[1], &p.module)
            && field(parts[2], &p.function)
            && field(parts[3], &p.name))
        {
            continue;
        }
        total += 1;
        if probes.len() >= limit {
            continue;
        }
        let mut m = vec![
            ("id".to_string(), Json::UInt(p.id)),
            ("provider".to_string(), Json::str(p.provider.clone())),
            ("module".to_string(), Json::str(p.module.clone())),
            ("function".to_string(), Json::str(p.function.clone())),
            ("name".to_string(), Json::str(p.name.clone())),
            (
                "args".to_string(),
                Json::Array(p.arg_types.iter().map(|t| Json::str(t.clone())).collect()),
            ),
        ];
        if let Some(c) = &counts {
            if let Some(n) = c.get(&p.id) {
                m.push(("fired".to_string(), Json::UInt(*n)));
            }
        }
        probes.push(Json::Object(m));
    }
    Ok(Json::object([
        ("source", Json::str(trace.unwrap_or("live"))),
        ("probes", Json::Array(probes)),
        ("matched", Json::UInt(total as u64)),
    ]))
}

fn diff(args: &Json, opts: &ServerOptions) -> Result<Json, String> {
    let before = str_arg(args, "before").ok_or("diff needs a before trace or saved result")?;
    let after = str_arg(args, "after").ok_or("diff needs an after trace or saved result")?;
    let per_second = matches!(args.get("per_second"), Some(Json::Bool(true)));
    let (diffs, sb, sa) = match str_arg(args, "program") {
        Some(program) => {
            let secs = num_arg(args, "seconds").unwrap_or(60.0);
            let rb = run(program, Some(before), secs, opts)?;
            let ra = run(program, Some(after), secs, opts)?;
            for r in [&rb, &ra] {
                if r.stopped {
                    return Err(format!(
                        "{}: the run did not reach the end of the trace within {secs} s",
                        r.source
                    ));
                }
            }
            let diffs = crate::agg::diff::compare(&rb.aggs, &ra.aggs, before, after)?;
            (diffs, rb.trace_seconds, ra.trace_seconds)
        }
        None => {
            // two saved results, read back as `dtx --diff a.json b.json` reads them
            let doc = |f: &str| -> Result<Json, String> {
                let text = read_saved(f)?;
                crate::output::json::parse(&text).map_err(|e| format!("{f}: {e}"))
            };
            let secs = |name: &str| num_arg(args, name).filter(|s| *s > 0.0 && s.is_finite());
            let Some(views) = opts.saved_views else {
                return Err(
                    "this server reads no saved results: give program and two traces".into(),
                );
            };
            let vb = views(before, doc(before)?)?;
            let va = views(after, doc(after)?)?;
            let diffs = crate::agg::diff::compare(&vb, &va, before, after)?;
            (diffs, secs("before_seconds"), secs("after_seconds"))
        }
    };
    if per_second {
        for (src, s) in [(before, sb), (after, sa)] {
            if s.is_none() {
                return Err(format!(
                    "{src}: how long its run lasted is not known; give before_seconds and after_seconds, or compare absolute values"
                ));
            }
        }
    }
    let mut view = crate::output::diff::DiffView {
        before: crate::output::diff::Side {
            source: before.to_string(),
            seconds: sb,
        },
        after: crate::output::diff::Side {
            source: after.to_string(),
            seconds: sa,
        },
        per_second,
        ..Default::default()
    };
    if let Some(s) = str_arg(args, "sort") {
        view.sort = crate::output::diff::SortBy::parse(s)
            .ok_or_else(|| format!("sort {s}: change, ratio or name"))?;
    }
    view.top = Some(num_arg(args, "top").map_or(MAX_ROWS, |n| (n.max(1.0) as usize).min(MAX_ROWS)));
    Ok(crate::output::diff::diff_json(&diffs, &view))
}

/// The most of a saved result the diff tool reads: a result of dtx's is far smaller; a file
/// past it is refused rather than held in memory whole.
const MAX_SAVED: u64 = 64 << 20;

/// A saved result's text, bounded by `MAX_SAVED`.
fn read_saved(f: &str) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(f).map_err(|e| format!("failed to open {f}: {e}"))?;
    let mut text = String::new();
    file.take(MAX_SAVED + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("failed to read {f}: {e}"))?;
    if text.len() as u64 > MAX_SAVED {
        return Err(format!(
            "{f}: larger than {} MiB; a saved result of dtx is far smaller",
            MAX_SAVED >> 20
        ));
    }
    Ok(text)
}

/// The `dscripts/` library, built in: (path under dscripts/, text).
const DSCRIPTS: &[(&str, &str)] = &include!(concat!(env!("OUT_DIR"), "/mcp_dscripts.rs"));

/// A script's description: its opening comment's first line.
fn description(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .map(|l| {
            l.trim_start_matches("/*")
                .trim_start_matches('*')
                .trim_start_matches("//")
                .trim()
        })
        .find(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("!/"))
        .unwrap_or("")
        .to_string()
}

/// The `resources/list` answer: each script of `dscripts/` as `dtx://dscripts/<path>`.
pub fn resources() -> Json {
    Json::Array(
        DSCRIPTS
            .iter()
            .map(|(p, t)| {
                Json::object([
                    ("uri", Json::str(format!("dtx://dscripts/{p}"))),
                    ("name", Json::str(*p)),
                    ("description", Json::str(description(t))),
                    ("mimeType", Json::str("text/x-dtrace")),
                ])
            })
            .collect(),
    )
}

/// One script by its URI.
pub fn read_resource(uri: &str) -> Option<Json> {
    let p = uri.strip_prefix("dtx://dscripts/")?;
    let (_, text) = DSCRIPTS.iter().find(|(n, _)| *n == p)?;
    Some(Json::object([
        ("uri", Json::str(uri)),
        ("mimeType", Json::str("text/x-dtrace")),
        ("text", Json::str(*text)),
    ]))
}
