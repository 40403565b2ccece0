//! The Prometheus exporter: `dtx -x metrics=HOST:PORT -s script.d` runs the program on a
//! session (live, or over a trace with `-E`) and serves its aggregations at `/metrics`
//! (docs/metrics.md). The session's worker thread runs the engine and hands a snapshot of the
//! aggregations over at each refresh; a scrape encodes the last one, so scraping never stops
//! the event path. What the program prints goes to standard output as in a batch run.

pub mod config;
pub mod expose;
pub mod http;

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::engine::session::{Command, ProgramSpec, RunState, Session, SessionSource, Update};
use crate::probes::Catalog;

pub use config::Config;

/// How often the session hands a snapshot over (the age of the values a scrape sees, at
/// most), unless the program sets `aggrate`.
pub const REFRESH: Duration = Duration::from_millis(100);

/// An exporter run, as the command line asks for it: the exporter bound and its session started
/// ([`start`]), and the program to run on it.
pub struct Options {
    pub served: Served,
    pub program: ProgramSpec,
    /// Ctrl-C (and the like): ends the run.
    pub interrupted: Arc<AtomicBool>,
}

/// A bound exporter and the session it serves.
pub struct Served {
    pub exporter: Exporter,
    pub session: Session,
    over_trace: bool,
    /// The session's target process (`-c`/`-p`), for `$target`; 0 without one.
    pub target: u32,
}

/// Binds `bind` and then starts the session, so that a taken port is an error before anything
/// is traced; with a target (`-c`/`-p`), the session opens it on its engine thread (the
/// debugger's thread, as in the console) and [`Served::target`] is its pid, for compiling the
/// program's `$target`.
pub fn start(
    bind: &str,
    source: SessionSource,
    catalog: Arc<Catalog>,
    target: Option<crate::engine::session::SessionTarget>,
) -> Result<Served, String> {
    let exporter = Exporter::start(bind)?;
    let over_trace = matches!(source, SessionSource::Trace { .. });
    let (session, target) = match target {
        Some(t) => Session::start_with_target(source, catalog, REFRESH, t)?,
        None => (Session::start(source, catalog, REFRESH), 0),
    };
    Ok(Served {
        exporter,
        session,
        over_trace,
        target,
    })
}

/// A server of one console's or one run's aggregations: bound at [`Exporter::start`], fed the
/// session's updates as they arrive ([`Exporter::observe`]), told of each program that runs
/// ([`Exporter::program`]). Dropping it stops serving.
pub struct Exporter {
    shared: Arc<http::Shared>,
    server: http::Server,
    /// The generation of the snapshots served, and the metrics of the program that runs next.
    next: Mutex<(u64, Option<Arc<Config>>)>,
}

impl Exporter {
    /// Binds `bind` (`-x metrics=`'s value) before anything is traced: a taken port is an
    /// error now. No program yet: `/metrics` serves dtx's own metrics alone.
    pub fn start(bind: &str) -> Result<Exporter, String> {
        let addr = http::parse_bind(bind)?;
        let empty = Config::new(&crate::ir::Program::default(), &Default::default())?;
        let shared = Arc::new(http::Shared {
            config: Mutex::new(Arc::new(empty)),
            latest: Mutex::new(http::Latest::default()),
            dropped: Mutex::new(Default::default()),
            scrapes: Default::default(),
        });
        let server = http::Server::start(addr, shared.clone())?;
        Ok(Exporter {
            shared,
            server,
            next: Mutex::new((0, None)),
        })
    }

    /// Where it serves.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.server.addr
    }

    /// The line a user reads about it: the URL, and what serving beyond loopback exposes.
    pub fn notice(&self) -> String {
        let mut s = format!("dtx: serving metrics on http://{}/metrics\n", self.addr());
        if !self.addr().ip().is_loopback() {
            s.push_str(&format!(
                "dtx: note: {} is reachable from other machines: anyone who can connect reads every aggregation (docs/metrics.md)\n",
                self.addr().ip()
            ));
        }
        s
    }

    /// A program is about to run: its metrics replace the last program's with its first
    /// snapshot (an older run's late snapshots are not served under the new names).
    pub fn program(&self, spec: &ProgramSpec) -> Result<(), String> {
        let config = Config::new(&spec.program, &spec.options)?;
        if let Ok(mut n) = self.next.lock() {
            n.1 = Some(Arc::new(config));
        }
        Ok(())
    }

    /// Takes what the session said: snapshots and the run's own counters.
    pub fn observe(&self, u: &Update) {
        match u {
            Update::Snapshot(s) => self.snapshot(s.generation, s.aggs.clone()),
            Update::Status(st) => self.status(st),
            Update::Output(_) | Update::Error(_) | Update::Notice(_) => {}
        }
    }

    fn snapshot(&self, generation: u64, aggs: Vec<crate::agg::snapshot::AggView>) {
        let Ok(mut n) = self.next.lock() else { return };
        if generation < n.0 {
            return;
        }
        let mut latest = self.shared.latest.lock().unwrap_or_else(|e| e.into_inner());
        if generation > n.0 {
            let Some(config) = n.1.take() else {
                // a run this exporter was not told of: nothing to name its values by
                return;
            };
            n.0 = generation;
            *self.shared.config.lock().unwrap_or_else(|e| e.into_inner()) = config;
        }
        latest.aggs = Arc::new(aggs);
    }

    fn status(&self, st: &crate::engine::session::Status) {
        if let Ok(mut l) = self.shared.latest.lock() {
            l.own.events = st.events;
            l.own.firings = st.firings;
            l.own.drops = st.drops;
            l.own.errors = st.errors;
            l.own.lost = st.lost;
        }
    }
}

/// Runs the exporter until the program ends (live: `exit()`; its exit status) or, over a
/// trace, until interrupted: the values stay as they stood at the trace's end.
pub fn run(o: Options) -> Result<i32, String> {
    let Served {
        exporter,
        session,
        over_trace,
        ..
    } = o.served;
    exporter.program(&o.program)?;
    crate::output::stderr::write(&exporter.notice());
    if !session.send(Command::Run {
        program: o.program,
        restart: false,
    }) {
        return Err("the engine thread ended before the program ran".into());
    }
    let mut stdout = std::io::stdout();
    let mut ended = None;
    loop {
        if o.interrupted.load(Ordering::SeqCst) {
            break;
        }
        let Some(u) = session.wait(Duration::from_millis(100)) else {
            continue;
        };
        match u {
            Update::Output(text) => {
                let _ = stdout.write_all(text.as_bytes());
                let _ = stdout.flush();
            }
            Update::Snapshot(s) => exporter.snapshot(s.generation, s.aggs),
            Update::Status(st) => {
                exporter.status(&st);
                if let RunState::Ended(code) = st.state {
                    if ended.is_none() {
                        ended = Some(code);
                        if !over_trace {
                            break;
                        }
                        crate::output::stderr::write(
                            "dtx: the trace has ended; its final values are served until dtx is interrupted\n",
                        );
                    }
                }
            }
            Update::Error(e) | Update::Notice(e) => {
                crate::output::stderr::write(&format!("dtx: {e}\n"));
            }
        }
    }
    // interrupted while the program runs: END fires, and what it prints comes before the end
    if ended.is_none() {
        session.send(Command::Stop);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            match session.wait(Duration::from_millis(100)) {
                Some(Update::Output(text)) => {
                    let _ = stdout.write_all(text.as_bytes());
                }
                Some(Update::Status(st)) => {
                    if let RunState::Ended(code) = st.state {
                        ended = Some(code);
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    for u in session.poll() {
        if let Update::Output(text) = u {
            let _ = stdout.write_all(text.as_bytes());
        }
    }
    let _ = stdout.flush();
    drop(exporter);
    Ok(ended.unwrap_or(0))
}
