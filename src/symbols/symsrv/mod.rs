//! A symbol-server client: the PDBs a symbol path's `srv*` elements name on HTTP servers,
//! fetched in the store layout dbghelp's symsrv uses (Microsoft's "Symbol Storage Format",
//! "Using SymSrv"): `<server>/name.pdb/<GUID><age>/name.pdb`, else the compressed
//! `name.pd_` (a cabinet file), else `file.ptr` (a pointer to the file: `PATH:<path or URL>`,
//! or `MSG:<why there is none>`). A file is written into the chain's downstream stores
//! through a temporary file renamed into place once whole and checked: a PDB whose GUID or
//! age is not the image's is refused and not kept.
//!
//! Per run (per process): no URL is asked twice, a server that fails (DNS, TLS, timeout,
//! connection) is asked nothing more and said once in one line with the reason, an HTTP
//! status other than 404 is said once per server; the per-user cache a `srv*server` without
//! a cache uses is said once. Downloads longer than a moment show files and bytes on stderr
//! when it is a terminal (see [`progress`]).
//!
//! Layers: `grammar` (the symbol path), `cache` (store layout, writing), `http`, `cab`.

pub mod cab;
pub mod cache;
pub mod grammar;
pub mod http;
pub mod progress;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use super::pdb::PdbId;

/// Microsoft's public symbol server.
pub const MICROSOFT: &str = "https://msdl.microsoft.com/download/symbols";

/// One HTTP server of a symbol path, with the local stores it fills.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    /// The server's URL, without a trailing `/`.
    pub url: String,
    /// The downstream stores a file from it is written into, first first (never empty).
    pub downstream: Vec<PathBuf>,
    /// Whether the first downstream store is the per-user cache (the path named none).
    pub default_cache: bool,
}

/// What one run has asked the servers, for all the PDB stores of the process.
#[derive(Default)]
struct Run {
    /// URLs asked, and whether each gave nothing (a later ask gives the same answer).
    asked: HashSet<String>,
    /// Servers that failed, with the reason.
    down: HashMap<String, String>,
    /// Servers already said to fail (once each).
    said: HashSet<String>,
    agents: HashMap<String, ureq::Agent>,
    said_default_cache: bool,
    /// Requests sent (for the tests' and the report's counts).
    requests: u64,
}

fn run() -> std::sync::MutexGuard<'static, Run> {
    static RUN: OnceLock<Mutex<Run>> = OnceLock::new();
    RUN.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// How many requests this process has sent to symbol servers.
pub fn requests() -> u64 {
    run().requests
}

/// A PDB a server gave: where it now is, and the URL it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Downloaded {
    pub path: PathBuf,
    pub url: String,
}

/// Fetches `id`'s PDB from `servers` in order. Err: why it is missing (one reason per server
/// asked, `; `-separated).
pub fn fetch(id: &PdbId, servers: &[Server]) -> Result<Downloaded, String> {
    let name = id.file_name();
    if name.is_empty() || name.contains(['/', '\\']) || name == ".." {
        return Err("the image names no PDB file".into());
    }
    let mut reasons = Vec::new();
    for s in servers {
        match fetch_from(id, s) {
            Ok(d) => return Ok(d),
            Err(why) => reasons.push(why),
        }
    }
    Err(reasons.join("; "))
}

/// What asking one URL gave.
enum Asked {
    Kept(PathBuf),
    NotThere,
    /// The server gave a file that is not the one: the reason.
    Refused(String),
}

fn fetch_from(id: &PdbId, s: &Server) -> Result<Downloaded, String> {
    let host = &s.url;
    if let Some(why) = run().down.get(host) {
        return Err(format!("{host}: {why}"));
    }
    let store = s.downstream.first().ok_or("no cache folder")?;
    if s.default_cache {
        say_default_cache(store);
    }
    let name = id.file_name();
    let dir = format!("{host}/{name}/{}", id.store_key());
    // `name.pd_`: the name's last character replaced
    let mut packed: String = name.chars().collect();
    packed.pop();
    packed.push('_');
    let mut refused = None;
    for file in [name, packed.as_str(), "file.ptr"] {
        let url = format!("{dir}/{file}");
        let asked = match file {
            "file.ptr" => ask_pointer(&url, host, store, id),
            f if f == packed => ask(&url, host, store, id, true),
            _ => ask(&url, host, store, id, false),
        };
        match asked {
            Ok(Asked::Kept(path)) => {
                for other in &s.downstream[1..] {
                    // the other downstream stores get a copy; one that cannot take it is
                    // not a reason to lose the file
                    let _ = cache::copy_into(other, id, &path);
                }
                return Ok(Downloaded { path, url });
            }
            Ok(Asked::NotThere) => {}
            Ok(Asked::Refused(why)) => refused = Some(why),
            Err(why) => return Err(format!("{host}: {why}")),
        }
    }
    let why = match refused {
        Some(why) => why,
        None => format!("{name} {} is not there", id.store_key()),
    };
    say_once(
        host,
        &format!("{why} (the other PDBs it lacks are not said; dtx --symbols lists them)"),
    );
    Err(format!("{host}: {why}"))
}

/// Says one line about `host`, the first time only this run.
fn say_once(host: &str, what: &str) {
    if run().said.insert(host.to_string()) {
        progress::clear();
        crate::output::stderr::say("dtx", format!("symbol server {host}: {what}"));
    }
}

fn say_default_cache(store: &Path) {
    let mut r = run();
    if !r.said_default_cache {
        r.said_default_cache = true;
        drop(r);
        crate::output::stderr::say(
            "dtx",
            format!(
                "symbols: PDBs from symbol servers are kept in {} (name a cache in the path, srv*<dir>*<server>, to keep them elsewhere)",
                store.display()
            ),
        );
    }
}

/// The agent for `host`, and whether `url` may be asked (not asked before this run, the
/// server not failing); counts the request.
fn may_ask(url: &str, host: &str) -> Result<Option<ureq::Agent>, String> {
    let mut r = run();
    if let Some(why) = r.down.get(host) {
        return Err(why.clone());
    }
    if !r.asked.insert(url.to_string()) {
        return Ok(None);
    }
    let agent = match r.agents.get(host) {
        Some(a) => a.clone(),
        None => {
            let a = http::agent(host).map_err(|f| f.to_string())?;
            r.agents.insert(host.to_string(), a.clone());
            a
        }
    };
    r.requests += 1;
    Ok(Some(agent))
}

/// Notes a failure of `host`: said once per server per run; a server that is down is asked
/// nothing more.
fn failed(host: &str, f: &http::Failure) -> String {
    let why = f.to_string();
    if f.server_down() {
        run().down.insert(host.to_string(), why.clone());
    }
    say_once(
        host,
        &format!("{why}; frames it would name print as module+offset"),
    );
    why
}

/// GETs `url` into a temporary file of `store`; expands it (`packed`); keeps it when it is
/// `id`'s PDB.
fn ask(url: &str, host: &str, store: &Path, id: &PdbId, packed: bool) -> Result<Asked, String> {
    let Some(agent) = may_ask(url, host)? else {
        return Ok(Asked::NotThere);
    };
    // one more try for a request that failed in transit, into a new temporary file
    let mut retried = false;
    let (got, part) = loop {
        let mut part = cache::Partial::new(store)?;
        let got = {
            let _shown = progress::start();
            http::get(&agent, url, part.file(), &progress::received)
        };
        match got {
            Err(f) if f.retryable() && !retried => retried = true,
            got => break (got, part),
        }
    };
    match got {
        Ok(http::Got::NotFound) => Ok(Asked::NotThere),
        Ok(http::Got::File(_)) if packed => {
            let mut plain = cache::Partial::new(store)?;
            let cab = std::fs::File::open(part.path()).map_err(|e| e.to_string())?;
            if let Err(why) = cab::expand(std::io::BufReader::new(cab), plain.file()) {
                return Ok(Asked::Refused(format!("{url}: {why}")));
            }
            drop(part);
            keep(plain, store, id, url)
        }
        Ok(http::Got::File(_)) => keep(part, store, id, url),
        Err(f) => Err(failed(host, &f)),
    }
}

fn keep(mut part: cache::Partial, store: &Path, id: &PdbId, url: &str) -> Result<Asked, String> {
    if let Err(why) = part.check(id) {
        return Ok(Asked::Refused(format!("{url}: {why}")));
    }
    part.keep(store, id).map(Asked::Kept)
}

/// `file.ptr`: `PATH:<path>` (a file a client reads directly: a share, or a URL) or
/// `MSG:<text>` (why the file is not there).
fn ask_pointer(url: &str, host: &str, store: &Path, id: &PdbId) -> Result<Asked, String> {
    let Some(agent) = may_ask(url, host)? else {
        return Ok(Asked::NotThere);
    };
    let mut text = Vec::new();
    let mut got = http::get(&agent, url, &mut text, &|_| {});
    if got.as_ref().is_err_and(http::Failure::retryable) {
        text.clear();
        got = http::get(&agent, url, &mut text, &|_| {});
    }
    match got {
        Ok(http::Got::NotFound) => Ok(Asked::NotThere),
        Ok(http::Got::File(_)) => {
            let text = String::from_utf8_lossy(&text);
            let text = text.trim();
            match pointer(text) {
                Pointer::Path(p) if grammar::is_url(&p) => {
                    let target = http::host_of(&p).to_string();
                    ask(
                        &p,
                        &target,
                        store,
                        id,
                        p.to_ascii_lowercase().ends_with('_'),
                    )
                    .or_else(|why| Ok(Asked::Refused(format!("{url} points to {p}: {why}"))))
                }
                Pointer::Path(p) => match cache::copy_into(store, id, Path::new(&p)) {
                    Ok(path) => Ok(Asked::Kept(path)),
                    Err(why) => Ok(Asked::Refused(format!("{url} points to {p}: {why}"))),
                },
                Pointer::Msg(m) => Ok(Asked::Refused(format!("{url}: the server says: {m}"))),
                Pointer::Other => Ok(Asked::Refused(format!("{url}: not a file pointer"))),
            }
        }
        Err(f) => Err(failed(host, &f)),
    }
}

/// What a `file.ptr` holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Pointer {
    Path(String),
    Msg(String),
    Other,
}

/// Parses a `file.ptr`'s text.
pub fn pointer(text: &str) -> Pointer {
    let text = text.trim();
    let (head, rest) = text.split_once(':').unwrap_or((text, ""));
    match head.to_ascii_uppercase().as_str() {
        "PATH" if !rest.trim().is_empty() => Pointer::Path(rest.trim().to_string()),
        "MSG" => Pointer::Msg(rest.trim().to_string()),
        _ => Pointer::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_pointers() {
        assert_eq!(
            pointer("PATH:\\\\server\\share\\x.pdb\r\n"),
            Pointer::Path("\\\\server\\share\\x.pdb".into())
        );
        assert_eq!(
            pointer("PATH:http://h/x.pdb"),
            Pointer::Path("http://h/x.pdb".into())
        );
        assert_eq!(pointer("MSG: withdrawn"), Pointer::Msg("withdrawn".into()));
        assert_eq!(pointer("PATH:"), Pointer::Other);
        assert_eq!(pointer("<html>"), Pointer::Other);
    }
}
