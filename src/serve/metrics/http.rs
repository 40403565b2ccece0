//! The HTTP side of the exporter: `/metrics` (the exposition, in the format the `Accept` header
//! negotiates), `/` (a line saying where the metrics are), 404 for anything else, 405 for
//! methods other than GET and HEAD. tiny_http reads requests on its own threads; a few workers
//! of ours answer them, so a client that stalls holds one worker at most and never the engine,
//! which runs on the session's thread and only hands snapshots over.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::config::Config;
use super::expose::{self, Dropped, Format, Own};
use crate::agg::snapshot::AggView;

/// Threads answering requests.
const WORKERS: usize = 4;

/// What the session last handed over: a scrape reads it without waiting for the engine.
#[derive(Default)]
pub struct Latest {
    pub aggs: Arc<Vec<AggView>>,
    pub own: Own,
}

/// The state scrapes share.
pub struct Shared {
    pub config: Config,
    pub latest: Mutex<Latest>,
    pub dropped: Mutex<Dropped>,
    pub scrapes: std::sync::atomic::AtomicU64,
}

/// A running server; dropping it stops the workers.
pub struct Server {
    server: Arc<tiny_http::Server>,
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    pub addr: SocketAddr,
}

/// `HOST:PORT`, `:PORT` or `PORT` (host 127.0.0.1), `[v6]:PORT`.
pub fn parse_bind(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    let with_host = if s.parse::<u16>().is_ok() {
        format!("127.0.0.1:{s}")
    } else if let Some(port) = s.strip_prefix(':') {
        format!("127.0.0.1:{port}")
    } else {
        s.to_string()
    };
    if let Ok(a) = with_host.parse::<SocketAddr>() {
        return Ok(a);
    }
    // a host name: `localhost:9100` (resolved once, the first address)
    match std::net::ToSocketAddrs::to_socket_addrs(&with_host) {
        Ok(mut it) => it
            .next()
            .ok_or_else(|| format!("-x metrics={s}: {with_host} names no address")),
        Err(e) => Err(format!(
            "-x metrics={s}: give HOST:PORT (e.g. 127.0.0.1:9464; port 0 picks a free one): {e}"
        )),
    }
}

impl Server {
    /// Binds `addr` (an error now, before anything is traced, when it cannot) and starts the
    /// workers.
    pub fn start(addr: SocketAddr, shared: Arc<Shared>) -> Result<Server, String> {
        let listener =
            TcpListener::bind(addr).map_err(|e| format!("cannot serve metrics on {addr}: {e}"))?;
        let bound = listener.local_addr().unwrap_or(addr);
        let server = tiny_http::Server::from_listener(listener, None)
            .map_err(|e| format!("cannot serve metrics on {addr}: {e}"))?;
        let server = Arc::new(server);
        let stop = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::new();
        for i in 0..WORKERS {
            let (server, stop, shared) = (server.clone(), stop.clone(), shared.clone());
            let w = std::thread::Builder::new()
                .name(format!("dtx-metrics-{i}"))
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        match server.recv_timeout(Duration::from_millis(200)) {
                            Ok(Some(rq)) => answer(rq, &shared),
                            Ok(None) => {}
                            Err(_) => std::thread::sleep(Duration::from_millis(50)),
                        }
                    }
                })
                .map_err(|e| format!("cannot start the metrics server: {e}"))?;
            workers.push(w);
        }
        Ok(Server {
            server,
            stop,
            workers,
            addr: bound,
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for _ in 0..WORKERS {
            self.server.unblock();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// Writes the exposition for `format` now, and notes its cost for the next one.
pub fn exposition(shared: &Shared, format: Format) -> String {
    let start = Instant::now();
    let (aggs, own) = match shared.latest.lock() {
        Ok(l) => (l.aggs.clone(), l.own.clone()),
        Err(e) => {
            let l = e.into_inner();
            (l.aggs.clone(), l.own.clone())
        }
    };
    let mut dropped = shared.dropped.lock().unwrap_or_else(|e| e.into_inner());
    let text = expose::encode(format, &shared.config, &aggs, &own, &mut dropped);
    drop(dropped);
    let cost = start.elapsed().as_secs_f64();
    if let Ok(mut l) = shared.latest.lock() {
        l.own.last_scrape_seconds = cost;
    }
    shared.scrapes.fetch_add(1, Ordering::Relaxed);
    text
}

fn header(name: &str, value: &str) -> Option<tiny_http::Header> {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).ok()
}

fn answer(rq: tiny_http::Request, shared: &Shared) {
    use tiny_http::{Method, Response};
    let path = rq.url().split('?').next().unwrap_or("").to_string();
    let head = *rq.method() == Method::Head;
    if !matches!(rq.method(), Method::Get | Method::Head) {
        let mut r = Response::from_string("only GET and HEAD\n").with_status_code(405);
        if let Some(h) = header("Allow", "GET, HEAD") {
            r.add_header(h);
        }
        let _ = rq.respond(r);
        return;
    }
    match path.as_str() {
        "/metrics" => {
            let accept = rq
                .headers()
                .iter()
                .find(|h| h.field.equiv("Accept"))
                .map(|h| h.value.as_str().to_string());
            let format = Format::negotiate(accept.as_deref());
            let text = exposition(shared, format);
            let mut r = Response::from_string(if head { String::new() } else { text });
            if let Some(h) = header("Content-Type", format.content_type()) {
                r.add_header(h);
            }
            if let Some(h) = header("Vary", "Accept") {
                r.add_header(h);
            }
            let _ = rq.respond(r);
        }
        "/" => {
            let mut r = Response::from_string("dtx: the metrics are at /metrics\n");
            if let Some(h) = header("Content-Type", "text/plain; charset=utf-8") {
                r.add_header(h);
            }
            let _ = rq.respond(r);
        }
        _ => {
            let _ = rq
                .respond(Response::from_string("not found: try /metrics\n").with_status_code(404));
        }
    }
}
