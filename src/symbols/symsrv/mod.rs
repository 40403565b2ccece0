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
pub mod guard;
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
/// asked, `; `-separated). A name that cannot be a file name everywhere, and a URL that cannot
/// be built, fail this one file ([`guard::file_name_problem`]), never the server.
pub fn fetch(id: &PdbId, servers: &[Server]) -> Result<Downloaded, String> {
    let name = id.file_name();
    if let Some(why) = guard::file_name_problem(name) {
        return Err(format!(
            "the image's PDB name {:?}: {why}",
            guard::shown(name)
        ));
    }
    if guard::cancelled() {
        return Err("interrupted (Ctrl-C): nothing more is downloaded".into());
    }
    guard::install_ctrl_c();
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

/// The limits of this run, and when its downloads must end ([`guard::Limits::run`]).
fn limits() -> &'static (guard::Limits, std::time::Instant) {
    static L: OnceLock<(guard::Limits, std::time::Instant)> = OnceLock::new();
    L.get_or_init(|| {
        let l = guard::Limits::from_env();
        let end = std::time::Instant::now() + l.run;
        (l, end)
    })
}

/// When the download starting now must end: its own time, within the run's.
fn deadline() -> std::time::Instant {
    let (l, run_end) = limits();
    (std::time::Instant::now() + l.download).min(*run_end)
}

fn fetch_from(id: &PdbId, s: &Server) -> Result<Downloaded, String> {
    let host = &s.url;
    let shown_host = guard::redact(host);
    if let Some(why) = run().down.get(host) {
        return Err(format!("{shown_host}: {why}"));
    }
    if std::time::Instant::now() >= limits().1 {
        let why = format!(
            "the run's time for downloads is spent ({} s, DTX_SYMBOL_RUN_SECONDS)",
            limits().0.run.as_secs_f64()
        );
        say_once(host, &why);
        return Err(format!("{shown_host}: {why}"));
    }
    let store = s.downstream.first().ok_or("no cache folder")?;
    if s.default_cache {
        say_default_cache(store);
    }
    let name = id.file_name();
    let dir = format!("{host}/{}/{}", guard::segment(name), id.store_key());
    // `name.pd_`: the name's last character replaced
    let mut packed: String = name.chars().collect();
    packed.pop();
    packed.push('_');
    let mut refused = None;
    for file in [name, packed.as_str(), "file.ptr"] {
        let url = format!("{dir}/{}", guard::segment(file));
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
                return Ok(Downloaded {
                    path,
                    url: guard::redact(&url),
                });
            }
            Ok(Asked::NotThere) => {}
            // the first refusal is said: the PDB's own, before its fallbacks'
            Ok(Asked::Refused(why)) => {
                refused.get_or_insert(why);
            }
            Err(why) => return Err(format!("{shown_host}: {why}")),
        }
    }
    let why = match refused {
        Some(why) => why,
        None => format!("{} {} is not there", guard::shown(name), id.store_key()),
    };
    say_once(
        host,
        &format!("{why} (the other PDBs it lacks are not said; dtx --symbols lists them)"),
    );
    Err(format!("{shown_host}: {why}"))
}

/// Says one line about `host`, the first time only this run.
fn say_once(host: &str, what: &str) {
    if run().said.insert(host.to_string()) {
        progress::clear();
        crate::output::stderr::say(
            "dtx",
            format!("symbol server {}: {what}", guard::redact(host)),
        );
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
/// nothing more. A failure of one file (a bound, a redirect refused, a URL) is that file's.
fn failed(host: &str, url: &str, f: &http::Failure) -> Result<Asked, String> {
    let why = f.to_string();
    if !f.server_down() {
        return Ok(Asked::Refused(format!("{}: {why}", guard::redact(url))));
    }
    run().down.insert(host.to_string(), why.clone());
    if *f != http::Failure::Interrupted {
        say_once(
            host,
            &format!("{why}; frames it would name print as module+offset"),
        );
    }
    Err(why)
}

/// GETs `url`, retrying once what failed in transit, each try into a fresh `out`.
fn get_retried<W>(
    agent: &ureq::Agent,
    url: &str,
    mut fresh: impl FnMut() -> Result<W, String>,
    out: impl Fn(&mut W) -> &mut dyn std::io::Write,
    expect: http::Expect,
    shown: bool,
) -> Result<(Result<http::Got, http::Failure>, W), String> {
    let mut retried = false;
    loop {
        let mut w = fresh()?;
        let got = {
            let _shown = shown.then(progress::start);
            http::get(
                agent,
                url,
                out(&mut w),
                &progress::received,
                expect,
                deadline(),
            )
        };
        match got {
            Err(f) if f.retryable() && !retried => retried = true,
            got => return Ok((got, w)),
        }
    }
}

/// GETs `url` into a temporary file of `store`; expands it (`packed`); keeps it when it is
/// `id`'s PDB.
fn ask(url: &str, host: &str, store: &Path, id: &PdbId, packed: bool) -> Result<Asked, String> {
    let Some(agent) = may_ask(url, host)? else {
        return Ok(Asked::NotThere);
    };
    let max = limits().0.max_bytes;
    let (got, part) = get_retried(
        &agent,
        url,
        || cache::Partial::new(store),
        |p| p.file(),
        http::Expect::SymbolFile { max },
        true,
    )?;
    match got {
        Ok(http::Got::NotFound) => Ok(Asked::NotThere),
        Ok(http::Got::File(_)) if packed => {
            let mut plain = cache::Partial::new(store)?;
            let cab = std::fs::File::open(part.path()).map_err(|e| e.to_string())?;
            if let Err(why) = cab::expand(std::io::BufReader::new(cab), plain.file(), max) {
                return Ok(Asked::Refused(format!("{}: {why}", guard::redact(url))));
            }
            drop(part);
            keep(plain, store, id, url)
        }
        Ok(http::Got::File(_)) => keep(part, store, id, url),
        Err(f) => failed(host, url, &f),
    }
}

fn keep(mut part: cache::Partial, store: &Path, id: &PdbId, url: &str) -> Result<Asked, String> {
    if let Err(why) = part.check(id) {
        return Ok(Asked::Refused(format!("{}: {why}", guard::redact(url))));
    }
    part.keep(store, id).map(Asked::Kept)
}

/// `file.ptr`: `PATH:<path>` (a file a client reads directly: a share, or a URL) or
/// `MSG:<text>` (why the file is not there). From an HTTP server, a URL is followed only on
/// the same scheme, host and port, and a path only under `DTX_SYMBOL_POINTER_FILES=1`
/// ([`guard`]).
fn ask_pointer(url: &str, host: &str, store: &Path, id: &PdbId) -> Result<Asked, String> {
    let Some(agent) = may_ask(url, host)? else {
        return Ok(Asked::NotThere);
    };
    let (l, _) = limits();
    let (got, text) = get_retried(
        &agent,
        url,
        || Ok(Vec::new()),
        |v| v as &mut dyn std::io::Write,
        http::Expect::Pointer {
            max: l.pointer_bytes,
        },
        false,
    )?;
    let shown_url = guard::redact(url);
    match got {
        Ok(http::Got::NotFound) => Ok(Asked::NotThere),
        Ok(http::Got::File(_)) => {
            let text = String::from_utf8_lossy(&text);
            let text = text.trim();
            match pointer(text) {
                Pointer::Path(p) if grammar::is_url(&p) => {
                    let shown_p = guard::shown(&guard::redact(&p));
                    if let Err(why) = guard::may_follow(host, &p) {
                        return Ok(Asked::Refused(format!("{shown_url} points to {why}")));
                    }
                    ask(&p, host, store, id, p.to_ascii_lowercase().ends_with('_')).or_else(|why| {
                        Ok(Asked::Refused(format!(
                            "{shown_url} points to {shown_p}: {why}"
                        )))
                    })
                }
                Pointer::Path(p) => {
                    if let Some(why) = guard::local_pointer_problem(&p, l.pointer_files) {
                        return Ok(Asked::Refused(format!("{shown_url} {why}")));
                    }
                    match cache::copy_into(store, id, Path::new(&p)) {
                        Ok(path) => Ok(Asked::Kept(path)),
                        Err(why) => Ok(Asked::Refused(format!(
                            "{shown_url} points to {}: {}",
                            guard::shown(&p),
                            guard::shown(&why)
                        ))),
                    }
                }
                Pointer::Msg(m) => Ok(Asked::Refused(format!(
                    "{shown_url}: the server says: {}",
                    guard::shown(&m)
                ))),
                Pointer::Other => Ok(Asked::Refused(format!("{shown_url}: not a file pointer"))),
            }
        }
        Err(f) => failed(host, url, &f),
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
