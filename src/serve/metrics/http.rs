//! The HTTP side of the exporter: `/metrics` (the exposition, in the format the `Accept` header
//! negotiates), `/` (a line saying where the metrics are), 404 for anything else, 405 for
//! methods other than GET and HEAD. One request per connection, each on a thread of its own
//! (32 at most), with read and write timeouts: a client that stalls holds its own thread for a
//! while and never the others or the engine, which runs on the session's thread and only hands
//! snapshots over. A plain HTTP/1.1 server over std sockets: tiny_http, tried first, keeps an
//! idle keep-alive connection on a pool thread with no timeout, and its pool can queue a new
//! connection behind such threads, which the stalled-client test caught.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::config::Config;
use super::expose::{self, Dropped, Format, Own};
use crate::agg::snapshot::AggView;

/// What the session last handed over: a scrape reads it without waiting for the engine.
#[derive(Default)]
pub struct Latest {
    pub aggs: Arc<Vec<AggView>>,
    pub own: Own,
}

/// The state scrapes share.
pub struct Shared {
    /// The metrics of the program whose aggregations `latest` holds (the console swaps both
    /// at a re-run).
    pub config: Mutex<Arc<Config>>,
    pub latest: Mutex<Latest>,
    pub dropped: Mutex<Dropped>,
    pub scrapes: std::sync::atomic::AtomicU64,
}

/// A running server; dropping it stops accepting.
pub struct Server {
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
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
    /// Binds `addr` (an error now, before anything is traced, when it cannot) and starts
    /// accepting.
    pub fn start(addr: SocketAddr, shared: Arc<Shared>) -> Result<Server, String> {
        let listener =
            TcpListener::bind(addr).map_err(|e| format!("cannot serve metrics on {addr}: {e}"))?;
        let bound = listener.local_addr().unwrap_or(addr);
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("cannot serve metrics on {addr}: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let acceptor = std::thread::Builder::new()
            .name("dtx-metrics".into())
            .spawn(move || accept(listener, &shared, &stop2))
            .map_err(|e| format!("cannot start the metrics server: {e}"))?;
        Ok(Server {
            stop,
            acceptor: Some(acceptor),
            addr: bound,
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}

/// Connections answered at once at most; one more is closed unanswered.
const MAX_CONNECTIONS: usize = 32;
/// How long a client may take to send its request, or to take the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request head read.
const MAX_HEAD: usize = 16 * 1024;

fn accept(listener: TcpListener, shared: &Arc<Shared>, stop: &AtomicBool) {
    let open = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        let conn = match listener.accept() {
            Ok((c, _)) => c,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::SeqCst);
            continue; // dropped: closed
        }
        let (shared, open2) = (shared.clone(), open.clone());
        let spawned = std::thread::Builder::new()
            .name("dtx-metrics-client".into())
            .spawn(move || {
                connection(conn, &shared);
                open2.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            open.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// One request on one connection, answered and closed (`Connection: close`): a client that
/// stalls holds its own thread, for [`CLIENT_TIMEOUT`] at a time.
fn connection(mut conn: TcpStream, shared: &Shared) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(CLIENT_TIMEOUT));
    let _ = conn.set_write_timeout(Some(CLIENT_TIMEOUT));
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > MAX_HEAD {
            let _ = respond(
                &mut conn,
                431,
                "text/plain",
                b"request head too large\n",
                false,
            );
            return;
        }
    }
    let text = String::from_utf8_lossy(&head);
    let mut lines = text.split("\r\n");
    let mut first = lines.next().unwrap_or("").split_whitespace();
    let (method, target) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    let accept = lines.find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("accept")
            .then(|| v.trim().to_string())
    });
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        let _ = respond(&mut conn, 405, "text/plain", b"only GET and HEAD\n", false);
        return;
    }
    let path = target.split('?').next().unwrap_or("");
    let _ = match path {
        "/metrics" => {
            let format = Format::negotiate(accept.as_deref());
            let body = exposition(shared, format);
            respond(
                &mut conn,
                200,
                format.content_type(),
                body.as_bytes(),
                head_only,
            )
        }
        "/" => respond(
            &mut conn,
            200,
            "text/plain; charset=utf-8",
            b"dtx: the metrics are at /metrics\n",
            head_only,
        ),
        _ => respond(
            &mut conn,
            404,
            "text/plain",
            b"not found: try /metrics\n",
            head_only,
        ),
    };
}

fn respond(
    conn: &mut TcpStream,
    code: u16,
    content_type: &str,
    body: &[u8],
    head_only: bool,
) -> std::io::Result<()> {
    let reason = match code {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Request Header Fields Too Large",
    };
    let allow = if code == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nVary: Accept\r\n{allow}Connection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes())?;
    if !head_only {
        conn.write_all(body)?;
    }
    conn.flush()?;
    let _ = conn.shutdown(std::net::Shutdown::Write);
    Ok(())
}

/// Writes the exposition for `format` now, and notes its cost for the next one.
pub fn exposition(shared: &Shared, format: Format) -> String {
    let start = Instant::now();
    // the program's metrics and its aggregations are taken together, under `latest`'s lock,
    // so that a re-run in the console never pairs one program's values with another's names
    let (aggs, own, config) = {
        let l = shared.latest.lock().unwrap_or_else(|e| e.into_inner());
        let c = shared.config.lock().unwrap_or_else(|e| e.into_inner());
        (l.aggs.clone(), l.own.clone(), c.clone())
    };
    let mut dropped = shared.dropped.lock().unwrap_or_else(|e| e.into_inner());
    let text = expose::encode(format, &config, &aggs, &own, &mut dropped);
    drop(dropped);
    let cost = start.elapsed().as_secs_f64();
    if let Ok(mut l) = shared.latest.lock() {
        l.own.last_scrape_seconds = cost;
    }
    shared.scrapes.fetch_add(1, Ordering::Relaxed);
    text
}
