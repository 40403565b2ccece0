//! The console: a full-screen terminal UI over the engine's session handle. `app` holds the
//! state, `ui` and `panes/` draw it, `keys` and `theme` are data; this module owns the terminal
//! (raw mode, alternate screen, mouse) and the loop that joins keys, engine updates and frames.

pub mod agg_table;
pub mod app;
pub mod baseline;
pub mod compile;
pub mod dashboards;
pub mod editor;
pub mod highlight;
pub mod keys;
pub mod log;
pub mod panes;
pub mod probe_tree;
pub mod results;
pub mod scroll;
pub mod stack_tree;
pub mod theme;
pub mod ui;

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::{self, DisableMouseCapture, EnableMouseCapture, Event};
use crossterm::execute;
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::backend::{Backend, CrosstermBackend};
use ratatui::Terminal;

use crate::engine::session::{Command, Session, SessionSource, Status};
use crate::probes::Catalog;
use app::App;

/// How the console starts.
pub struct ConsoleOptions {
    pub source: SessionSource,
    pub catalog: Arc<Catalog>,
    /// A script to open, and whether to run it at once.
    pub script: Option<PathBuf>,
    /// Program text to start with when there is no script file (`-n`), run at once.
    pub text: Option<String>,
    pub run: bool,
    pub theme: Option<String>,
    pub keys: Option<PathBuf>,
    /// How often the engine sends snapshots.
    pub refresh: Duration,
    /// The process to trace (`-c`/`-p`), opened by the session.
    pub target: Option<crate::engine::session::SessionTarget>,
    /// `dtx --demo` with no script: the demo's dashboard ([`dashboards::DEMO`]) runs, and the
    /// aggregations pane has the keys, its stack view one key (→) from the first table.
    pub demo: bool,
    /// `-x metrics=HOST:PORT`: the console serves the aggregations of what it runs, as the
    /// exporter does (src/serve/metrics), and says where in its status line.
    pub metrics: Option<String>,
    /// `--baseline FILE`: results to compare with from the start.
    pub baseline: Option<baseline::Baseline>,
}

/// The console's keys file when `--keys` is not given: `$XDG_CONFIG_HOME/dtx/keys.toml`.
fn default_keys_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    let p = base.join("dtx").join("keys.toml");
    p.exists().then_some(p)
}

/// The editor's text for a target process and no script: calls of the program's functions.
const TARGET_SKELETON: &str = "pid$target:a.out::entry\n{\n\t@calls[probefunc] = count();\n}\n";

/// Builds the console's state: theme, keys, the script; `target` is the pid of the session's
/// target process, or 0.
pub fn build_app(opts: &ConsoleOptions, target: u32) -> Result<App, String> {
    let trace = matches!(opts.source, SessionSource::Trace { .. });
    let label = if target != 0 {
        format!("pid {target}")
    } else {
        opts.source.label()
    };
    if target != 0 {
        // the browser lists the target's functions: its pid and fpid probes are made before
        // listing
        use crate::probes::{ProbeCatalog, ProbeDesc};
        for provider in ["pid", "fpid"] {
            for name in ["entry", "return"] {
                let desc = format!("{provider}{target}:a.out::{name}");
                if let Ok(d) = ProbeDesc::parse(&desc) {
                    let _ = opts.catalog.matching(&d);
                }
            }
        }
    }
    let mut app = App::new(opts.catalog.clone(), Status::new(label), trace);
    app.target = target;
    if let Some(t) = &opts.theme {
        app.theme = theme::Theme::load(t)?;
    }
    if let Some(k) = opts.keys.clone().or_else(default_keys_file) {
        let text =
            std::fs::read_to_string(&k).map_err(|e| format!("keys file {}: {e}", k.display()))?;
        app.keys
            .apply_toml(&text)
            .map_err(|e| format!("keys file {}: {e}", k.display()))?;
    }
    if let Some(p) = &opts.script {
        app.open(p);
        if app.editor.path.is_none() {
            return Err(app
                .message
                .map(|m| m.text)
                .unwrap_or_else(|| format!("cannot open {}", p.display())));
        }
    } else if let Some(t) = &opts.text {
        // the command line's program: nothing the user edited yet
        app.editor.set_text(t);
        app.editor.mark_unmodified();
    } else if target != 0 {
        // a target waits at its start for the first run: offer a clause for its functions
        app.editor.set_text(TARGET_SKELETON);
        app.editor.mark_unmodified();
        app.say(
            format!("pid {target} is stopped; run the script to start tracing it"),
            false,
        );
        return Ok(app);
    } else if opts.demo {
        if let Some(text) = dashboards::by_name(dashboards::DEMO) {
            app.editor.open_builtin(dashboards::DEMO, text);
            app.run(false);
            app.focus = app::Focus::Results;
            app.say(
                "the built-in demo trace: → shows the hottest stacks, F1 the keys, Ctrl-Q quits",
                false,
            );
            return Ok(app);
        }
    } else if let Some((name, text)) = dashboards::default_for(&opts.catalog) {
        // no script: the default dashboard, running
        app.editor.open_builtin(name, text);
        app.run(false);
        return Ok(app);
    }
    if opts.run && !app.editor.text().trim().is_empty() {
        app.run(false);
    }
    Ok(app)
}

/// Runs the console until the user quits. Returns the exit status.
pub fn run(mut opts: ConsoleOptions) -> Result<i32, String> {
    // said before a session starts: a pipe or a closed stdin has no screen to draw on
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout())
        && std::io::IsTerminal::is_terminal(&std::io::stdin());
    if !terminal {
        return Err("cannot start the console: it needs a terminal on standard input and output (run dtx from one; or give a program, -n or -s, without --tui/--demo to run in batch)".into());
    }
    // dtx's stderr lines (errors on enabled probes, drops, the sources' notes) show in the
    // output pane while the console has the screen; what is left is written after it
    // bound before a session starts: a taken port is an error before anything is traced
    let exporter = match &opts.metrics {
        Some(bind) => Some(crate::serve::metrics::Exporter::start(bind)?),
        None => None,
    };
    let _held = crate::output::stderr::capture();
    if let Some(e) = &exporter {
        crate::output::stderr::write(&e.notice());
    }
    let (session, target) = match opts.target.take() {
        Some(t) => {
            Session::start_with_target(opts.source.clone(), opts.catalog.clone(), opts.refresh, t)?
        }
        None => (
            Session::start(opts.source.clone(), opts.catalog.clone(), opts.refresh),
            0,
        ),
    };
    let mut app = build_app(&opts, target)?;
    app.serving = exporter.as_ref().map(|e| e.addr());
    if let Some(b) = opts.baseline.take() {
        app.say(format!("comparing with the baseline {}", b.label), false);
        app.results.use_baseline(Some(b));
    }
    // over a trace, count what each probe fires in the background for the browser
    let counts = match &opts.source {
        SessionSource::Trace { path, etw } => Some(spawn_counts(path.clone(), etw.clone())),
        SessionSource::Timers | SessionSource::Etw(_) => None,
    };
    let mut terminal = enter().map_err(|e| format!("cannot start the console: {e}"))?;
    let result = event_loop(&mut terminal, &mut app, &session, counts, exporter.as_ref());
    let _ = app.editor.autosave_now();
    leave();
    drop(session);
    result.map_err(|e| format!("console: {e}"))?;
    Ok(0)
}

/// Counts the firings of every probe over a trace, on a thread.
fn spawn_counts(
    path: String,
    etw: Arc<crate::providers::etw::EtwProbes>,
) -> mpsc::Receiver<HashMap<u64, u64>> {
    let (tx, rx) = mpsc::channel();
    let _ = std::thread::Builder::new()
        .name("dtx-counts".into())
        .spawn(move || {
            if let Ok(mut src) = crate::sources::etl::TraceSource::open(&path) {
                let _ = tx.send(src.probe_counts(&etw));
            }
        });
    rx
}

type Term = Terminal<CrosstermBackend<std::io::Stdout>>;

fn enter() -> std::io::Result<Term> {
    // the terminal comes back even when dtx panics
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if crate::sources::etw_live::panic_is_caught() {
            // the live callback catches its panics and ends the run with a message: the
            // console stays, and the panic's words go to its stderr pane
            crate::output::stderr::say("dtx", format_args!("internal error: {info}"));
            return;
        }
        leave();
        prev(info);
    }));
    enable_raw_mode()?;
    let mut out = std::io::stdout();
    execute!(out, EnterAlternateScreen, EnableMouseCapture)?;
    Terminal::new(CrosstermBackend::new(out))
}

fn leave() {
    let _ = disable_raw_mode();
    let mut out = std::io::stdout();
    let _ = execute!(
        out,
        DisableMouseCapture,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    let _ = out.flush();
}

/// Joins keys, engine updates and frames until the user quits.
pub fn event_loop<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    session: &Session,
    mut counts: Option<mpsc::Receiver<HashMap<u64, u64>>>,
    exporter: Option<&crate::serve::metrics::Exporter>,
) -> Result<(), String>
where
    B::Error: std::fmt::Display,
{
    let mut dirty = true;
    let mut last_draw = Instant::now();
    loop {
        let outbox: Vec<Command> = app.outbox.drain(..).collect();
        for c in outbox {
            if let (Some(e), Command::Run { program, .. }) = (exporter, &c) {
                if let Err(m) = e.program(program) {
                    app.say(format!("metrics: {m}"), true);
                }
            }
            session.send(c);
        }
        for u in session.poll() {
            if let Some(e) = exporter {
                e.observe(&u);
            }
            app.on_update(u);
            dirty = true;
        }
        let (said, dropped) = crate::output::stderr::take();
        if !said.is_empty() || dropped > 0 {
            app.on_stderr(said, dropped);
            dirty = true;
        }
        if let Some(rx) = &counts {
            if let Ok(c) = rx.try_recv() {
                // a built-in dashboard with nothing to show in this trace: say which can run
                if let Some(shown) = app.editor.builtin.clone() {
                    if let Some(m) = dashboards::advice(&app.catalog(), &c, &shown) {
                        app.say(m, false);
                    }
                }
                app.browser.set_counts(c);
                counts = None;
                dirty = true;
            }
        }
        app.tick(Instant::now());
        if dirty || last_draw.elapsed() >= Duration::from_millis(500) {
            let mut areas = app.areas;
            terminal
                .draw(|f| areas = ui::draw(f, app))
                .map_err(|e| e.to_string())?;
            app.areas = areas;
            dirty = false;
            last_draw = Instant::now();
        }
        if event::poll(Duration::from_millis(30)).map_err(|e| e.to_string())? {
            // take every event that is waiting before drawing again
            loop {
                match event::read().map_err(|e| e.to_string())? {
                    Event::Key(k) => app.on_key(k),
                    Event::Mouse(m) => app.on_mouse(m),
                    Event::Resize(..) => {
                        let _ = terminal.autoresize();
                    }
                    _ => {}
                }
                if !event::poll(Duration::ZERO).map_err(|e| e.to_string())? {
                    break;
                }
            }
            dirty = true;
        }
        if app.quit {
            return Ok(());
        }
    }
}
