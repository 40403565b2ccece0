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

/// An exporter run, as the command line asks for it.
pub struct Options {
    /// `-x metrics=`'s value.
    pub bind: String,
    pub source: SessionSource,
    pub catalog: Arc<Catalog>,
    pub program: ProgramSpec,
    /// Ctrl-C (and the like): ends the run.
    pub interrupted: Arc<AtomicBool>,
}

/// Runs the exporter until the program ends (live: `exit()`; its exit status) or, over a
/// trace, until interrupted: the values stay as they stood at the trace's end.
pub fn run(o: Options) -> Result<i32, String> {
    let config = Config::new(&o.program.program, &o.program.options)?;
    let addr = http::parse_bind(&o.bind)?;
    let shared = Arc::new(http::Shared {
        config,
        latest: Mutex::new(http::Latest::default()),
        dropped: Mutex::new(Default::default()),
        scrapes: Default::default(),
    });
    // bound before anything is traced: a taken port is an error now
    let server = http::Server::start(addr, shared.clone())?;
    crate::output::stderr::write(&format!(
        "dtx: serving metrics on http://{}/metrics\n",
        server.addr
    ));
    if !server.addr.ip().is_loopback() {
        crate::output::stderr::write(&format!(
            "dtx: note: {} is reachable from other machines: anyone who can connect reads every aggregation (docs/metrics.md)\n",
            server.addr.ip()
        ));
    }
    let over_trace = matches!(o.source, SessionSource::Trace { .. });
    let session = Session::start(o.source, o.catalog, REFRESH);
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
            Update::Snapshot(s) => {
                if let Ok(mut l) = shared.latest.lock() {
                    l.aggs = Arc::new(s.aggs);
                }
            }
            Update::Status(st) => {
                if let Ok(mut l) = shared.latest.lock() {
                    l.own.events = st.events;
                    l.own.firings = st.firings;
                    l.own.drops = st.drops;
                    l.own.errors = st.errors;
                    l.own.lost = st.lost;
                }
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
            Update::Error(e) => {
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
    drop(server);
    Ok(ended.unwrap_or(0))
}
