//! A symbol server for the tests, on 127.0.0.1 (port 0): a thread that answers GETs from a
//! map of paths to bodies (404 for the rest), one request per connection, and logs each path
//! asked; it can stall (read the request, answer nothing), close mid-file (send a full
//! Content-Length and half the body), or wait before each answer (a server far away). Also a
//! loopback HTTP proxy (CONNECT tunnels, to 127.0.0.1 only) that counts what it carries.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Serve,
    Stall,
    CloseMidFile,
    /// A 200 with no length whose body (an MSF header, then zeros) never ends.
    Endless,
    /// A 200 whose body comes one byte a second.
    Drip,
}

pub struct Server {
    pub port: u16,
    files: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// A server answering from `files` (paths from `/`), in `mode`, `latency` before each
    /// answer.
    pub fn start(files: HashMap<String, Vec<u8>>, mode: Mode, latency: Duration) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let files = Arc::new(Mutex::new(files));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (f, l) = (files.clone(), log.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (f, l) = (f.clone(), l.clone());
                std::thread::spawn(move || answer(conn, &f, &l, mode, latency));
            }
        });
        Server { port, files, log }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The paths asked so far, in order.
    pub fn asked(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    pub fn put(&self, path: &str, body: Vec<u8>) {
        self.files.lock().unwrap().insert(path.to_string(), body);
    }
}

/// The request head: its lines up to the blank one.
fn read_head(conn: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match conn.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => return None,
        }
        if head.len() > 64 * 1024 {
            return None;
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

fn answer(
    mut conn: TcpStream,
    files: &Mutex<HashMap<String, Vec<u8>>>,
    log: &Mutex<Vec<String>>,
    mode: Mode,
    latency: Duration,
) {
    let Some(head) = read_head(&mut conn) else {
        return;
    };
    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
    log.lock().unwrap().push(path.clone());
    if mode == Mode::Stall {
        std::thread::sleep(Duration::from_secs(600));
        return;
    }
    if let Some(to) = path.strip_prefix("/redirect/") {
        // `/redirect/<url, percent-free>`: a 302 to it
        let _ = write!(
            conn,
            "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        return;
    }
    if matches!(mode, Mode::Endless | Mode::Drip) {
        let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
        let _ = conn.write_all(b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0");
        let zeros = vec![0u8; 64 * 1024];
        loop {
            let sent = if mode == Mode::Drip {
                std::thread::sleep(Duration::from_secs(1));
                conn.write_all(&zeros[..1])
            } else {
                conn.write_all(&zeros)
            };
            if sent.is_err() {
                return;
            }
        }
    }
    std::thread::sleep(latency);
    let body = files.lock().unwrap().get(&path).cloned();
    let _ = match body {
        Some(b) => {
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                b.len()
            );
            let send = if mode == Mode::CloseMidFile {
                &b[..b.len() / 2]
            } else {
                &b[..]
            };
            conn.write_all(send)
        }
        None => conn
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
    };
    let _ = conn.flush();
}

/// A loopback HTTP proxy: tunnels `CONNECT 127.0.0.1:port` and counts the tunnels.
pub struct Proxy {
    pub port: u16,
    pub tunnels: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    pub fn start() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let tunnels = Arc::new(Mutex::new(Vec::new()));
        let t = tunnels.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let t = t.clone();
                std::thread::spawn(move || {
                    let Some(head) = read_head(&mut conn) else {
                        return;
                    };
                    let mut words = head.split_whitespace();
                    let (Some("CONNECT"), Some(target)) = (words.next(), words.next()) else {
                        let _ = conn.write_all(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n");
                        return;
                    };
                    t.lock().unwrap().push(target.to_string());
                    // only to this machine's loopback
                    let Some(port) = target.strip_prefix("127.0.0.1:") else {
                        let _ = conn.write_all(b"HTTP/1.1 403 Forbidden\r\n\r\n");
                        return;
                    };
                    let Ok(up) = TcpStream::connect(("127.0.0.1", port.parse().unwrap_or(0)))
                    else {
                        let _ = conn.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
                        return;
                    };
                    let _ = conn.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
                    let (mut a, mut b) = (conn.try_clone().unwrap(), up.try_clone().unwrap());
                    let (mut c, mut d) = (conn, up);
                    let one = std::thread::spawn(move || {
                        let _ = std::io::copy(&mut a, &mut d);
                        let _ = d.shutdown(std::net::Shutdown::Write);
                    });
                    let _ = std::io::copy(&mut b, &mut c);
                    let _ = c.shutdown(std::net::Shutdown::Write);
                    let _ = one.join();
                });
            }
        });
        Proxy { port, tunnels }
    }

    pub fn count(&self) -> usize {
        self.tunnels.lock().unwrap().len()
    }
}

/// `bytes` as a cabinet file holding `name` (MSZIP): a store's `.pd_`.
pub fn cabinet(name: &str, bytes: &[u8]) -> Vec<u8> {
    let mut b = cab::CabinetBuilder::new();
    b.add_folder(cab::CompressionType::MsZip).add_file(name);
    let mut w = b.build(std::io::Cursor::new(Vec::new())).unwrap();
    while let Some(mut f) = w.next_file().unwrap() {
        f.write_all(bytes).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// Every file under `dir`, recursively.
pub fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}
