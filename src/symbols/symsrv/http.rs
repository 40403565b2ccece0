//! HTTP requests to a symbol server: `ureq`, with a connect timeout, a timeout for the
//! response's head and one for its body, one retry of a request that failed in transit, and
//! the proxy the environment names for the server's scheme (`http_proxy`/`HTTP_PROXY`,
//! `https_proxy`/`HTTPS_PROXY`, then `all_proxy`/`ALL_PROXY`; `no_proxy`/`NO_PROXY` lists
//! the hosts reached directly, as curl reads them). A failure is classified for the one line
//! a run says about a failing server: DNS, TLS, timeout, connection, HTTP status.

use std::io::{Read, Write};
use std::time::Duration;

/// Why a request did not give a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The server's name did not resolve.
    Dns,
    /// The TLS handshake failed (a certificate, a protocol).
    Tls(String),
    /// No connection or no answer's head within the timeout (`DTX_SYMBOL_TIMEOUT`).
    Timeout,
    /// An answer that came, but too slowly: the download's deadline passed (its bytes so far).
    TooSlow(u64),
    /// More bytes than the bound (`what`, the bound).
    TooBig(&'static str, u64),
    /// A 200 whose first bytes are not the file asked for (not an MSF PDB, not a cabinet).
    NotSymbolFile,
    /// A redirect dtx does not follow (another host, HTTPS to HTTP, too many): the reason.
    Redirect(String),
    /// A URL that cannot be requested (one file's, not the server's fault).
    BadUrl(String),
    /// Ctrl-C.
    Interrupted,
    /// The connection failed or broke (refused, reset, closed before the end).
    Connection(String),
    /// An answer other than 200 or 404.
    Status(u16),
    /// Writing what arrived failed (a full disk).
    Local(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Dns => write!(f, "DNS: the name does not resolve"),
            Failure::Tls(e) => write!(f, "TLS: {e}"),
            Failure::Timeout => write!(f, "timeout: no answer within {} s", timeout().as_secs_f64()),
            Failure::TooSlow(n) => write!(
                f,
                "answered too slowly: {n} bytes in {} s, the time a download may take (DTX_SYMBOL_DOWNLOAD_SECONDS)",
                super::guard::Limits::from_env().download.as_secs_f64()
            ),
            Failure::TooBig(what, max) => write!(f, "{what} larger than {max} bytes: refused"),
            Failure::NotSymbolFile => write!(f, "the answer is not a PDB or cabinet file"),
            Failure::Redirect(why) => write!(f, "redirect: {why}"),
            Failure::BadUrl(why) => write!(f, "no URL: {why}"),
            Failure::Interrupted => write!(f, "interrupted"),
            Failure::Connection(e) => write!(f, "connection: {e}"),
            Failure::Status(s) => write!(f, "HTTP status {s}"),
            Failure::Local(e) => write!(f, "{e}"),
        }
    }
}

impl Failure {
    /// Whether the server as a whole is failing (as against one file): no more requests go
    /// to it this run.
    pub fn server_down(&self) -> bool {
        matches!(
            self,
            Failure::Dns
                | Failure::Tls(_)
                | Failure::Timeout
                | Failure::TooSlow(_)
                | Failure::Connection(_)
                | Failure::Interrupted
        )
    }
}

/// What a GET gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Got {
    /// The body was written; its length.
    File(u64),
    NotFound,
}

/// The timeouts: `DTX_SYMBOL_TIMEOUT` (seconds, default 20) for connecting and for the head of
/// an answer; a body may take 30 times that (a kernel PDB is tens of megabytes).
pub fn timeout() -> Duration {
    let secs = std::env::var("DTX_SYMBOL_TIMEOUT")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(20.0);
    Duration::from_secs_f64(secs.min(3600.0))
}

/// The proxy for `url`: the environment's ([`proxy_for`]) when it names one for the URL's
/// scheme (or `no_proxy`), else on Windows the user's system proxy, as symsrv's WinHTTP/WinINet
/// reads it ([`system_proxy`], from `HKCU\Software\Microsoft\Windows\CurrentVersion\Internet
/// Settings`: `ProxyEnable`, `ProxyServer`, `ProxyOverride`).
pub fn proxy_of(url: &str) -> Option<String> {
    let named = |n: &[&str]| {
        n.iter()
            .any(|v| std::env::var(v).is_ok_and(|v| !v.trim().is_empty()))
    };
    let https = url.to_ascii_lowercase().starts_with("https:");
    let env_names = if https {
        ["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]
    } else {
        ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
    };
    if named(&env_names) {
        return proxy_for(url);
    }
    #[cfg(windows)]
    {
        let s = windows_proxy::read();
        system_proxy(url, s.enable, s.server.as_deref(), s.bypass.as_deref())
    }
    #[cfg(not(windows))]
    None
}

/// The system proxy for `url` from the Internet Settings values (Microsoft Learn,
/// INTERNET_PER_CONN_OPTION / "Proxy server settings"): `ProxyServer` is `host:port` for every
/// scheme or `http=host:port;https=host:port;...`; `ProxyOverride` is a `;`-list of hosts
/// reached directly, with `*` wildcards, `<local>` naming every host without a dot.
pub fn system_proxy(
    url: &str,
    enable: bool,
    server: Option<&str>,
    bypass: Option<&str>,
) -> Option<String> {
    let server = server?.trim();
    if !enable || server.is_empty() {
        return None;
    }
    let https = url.to_ascii_lowercase().starts_with("https:");
    let want = if https { "https" } else { "http" };
    let chosen = if server.contains('=') {
        server.split(';').find_map(|e| {
            let (k, v) = e.split_once('=')?;
            k.trim()
                .eq_ignore_ascii_case(want)
                .then(|| v.trim().to_string())
        })?
    } else {
        server.to_string()
    };
    if chosen.is_empty() {
        return None;
    }
    let host = host_of(url).to_ascii_lowercase();
    let bypassed = bypass.unwrap_or("").split(';').map(str::trim).any(|e| {
        let e = e.to_ascii_lowercase();
        if e == "<local>" {
            return !host.contains('.') && !host.contains(':');
        }
        !e.is_empty() && wildcard(&e, &host)
    });
    if bypassed {
        return None;
    }
    Some(if chosen.contains("://") {
        chosen
    } else {
        format!("http://{chosen}")
    })
}

/// `pat` (with `*` for any run of characters) matches all of `s`.
fn wildcard(pat: &str, s: &str) -> bool {
    match pat.split_once('*') {
        None => pat == s,
        Some((head, rest)) => {
            let Some(after) = s.strip_prefix(head) else {
                return false;
            };
            (0..=after.len()).any(|i| after.is_char_boundary(i) && wildcard(rest, &after[i..]))
        }
    }
}

/// The user's Internet Settings proxy values, from the registry.
#[cfg(windows)]
mod windows_proxy {
    use windows_sys::Win32::System::Registry::{
        RegGetValueW, HKEY_CURRENT_USER, RRF_RT_REG_DWORD, RRF_RT_REG_SZ,
    };

    pub struct Settings {
        pub enable: bool,
        pub server: Option<String>,
        pub bypass: Option<String>,
    }

    fn wide(s: &str) -> Vec<u16> {
        s.encode_utf16().chain(std::iter::once(0)).collect()
    }

    const KEY: &str = r"Software\Microsoft\Windows\CurrentVersion\Internet Settings";

    fn string(name: &str) -> Option<String> {
        let (key, name) = (wide(KEY), wide(name));
        let mut buf = vec![0u16; 2048];
        let mut len = (buf.len() * 2) as u32;
        // SAFETY: the key and value names are NUL-terminated; `buf` holds `len` bytes
        let rc = unsafe {
            RegGetValueW(
                HKEY_CURRENT_USER,
                key.as_ptr(),
                name.as_ptr(),
                RRF_RT_REG_SZ,
                std::ptr::null_mut(),
                buf.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return None;
        }
        let n = (len as usize / 2).min(buf.len());
        let text = String::from_utf16_lossy(&buf[..n]);
        Some(text.trim_end_matches('\0').to_string())
    }

    fn dword(name: &str) -> Option<u32> {
        let (key, name) = (wide(KEY), wide(name));
        let mut v: u32 = 0;
        let mut len = 4u32;
        // SAFETY: as above; `v` holds 4 bytes
        let rc = unsafe {
            RegGetValueW(
                HKEY_CURRENT_USER,
                key.as_ptr(),
                name.as_ptr(),
                RRF_RT_REG_DWORD,
                std::ptr::null_mut(),
                (&mut v as *mut u32).cast(),
                &mut len,
            )
        };
        (rc == 0).then_some(v)
    }

    pub fn read() -> Settings {
        Settings {
            enable: dword("ProxyEnable").is_some_and(|v| v != 0),
            server: string("ProxyServer"),
            bypass: string("ProxyOverride"),
        }
    }
}

/// The proxy for `url` from the environment, unless `no_proxy` names its host.
pub fn proxy_for(url: &str) -> Option<String> {
    let env = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| std::env::var(n).ok().filter(|v| !v.trim().is_empty()))
    };
    let https = url.to_ascii_lowercase().starts_with("https:");
    let proxy = if https {
        env(&["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"])
    } else {
        env(&["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"])
    }?;
    let host = host_of(url);
    let bypass = env(&["no_proxy", "NO_PROXY"]).is_some_and(|list| {
        list.split(',').map(str::trim).any(|e| {
            let e = e.trim_start_matches("*.").trim_start_matches('.');
            e == "*"
                || (!e.is_empty()
                    && (host.eq_ignore_ascii_case(e)
                        || host
                            .to_ascii_lowercase()
                            .ends_with(&format!(".{}", e.to_ascii_lowercase()))))
        })
    });
    (!bypass).then(|| {
        if proxy.contains("://") {
            proxy
        } else {
            format!("http://{proxy}")
        }
    })
}

/// The host of an `http(s)://host[:port]/...` URL (an IPv6 literal without its brackets).
pub fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let auth = rest.split(['/', '?']).next().unwrap_or("");
    let auth = auth.rsplit_once('@').map_or(auth, |(_, h)| h);
    if let Some(v6) = auth.strip_prefix('[') {
        return v6.split(']').next().unwrap_or("");
    }
    auth.split(':').next().unwrap_or("")
}

/// An agent for requests to `server` (one per server: its proxy is chosen for its URL).
pub fn agent(server: &str) -> Result<ureq::Agent, Failure> {
    let t = timeout();
    let proxy = match proxy_of(server) {
        Some(p) => Some(ureq::Proxy::new(&p).map_err(|e| {
            Failure::Connection(format!("the proxy {}: {e}", super::guard::redact(&p)))
        })?),
        None => None,
    };
    let config = ureq::Agent::config_builder()
        .proxy(proxy)
        .timeout_connect(Some(t))
        .timeout_recv_response(Some(t))
        // the download's own deadline is kept by `get`; this one ends a thread left behind
        .timeout_global(Some(super::guard::Limits::from_env().download + t))
        // redirects are followed by `get`, each checked (same scheme, host and port)
        .max_redirects(0)
        .http_status_as_error(false)
        .user_agent(concat!(
            "dtx/",
            env!("CARGO_PKG_VERSION"),
            " (symbol server client)"
        ));
    // builds for MSVC have Windows's TLS, not rustls (see Cargo.toml)
    // and the machine's certificate store, not ureq's built-in roots (Mozilla's): a company
    // server signed by an internal CA, or a TLS-inspecting proxy, is trusted as Windows trusts
    // it (symsrv uses WinHTTP, which does the same)
    #[cfg(target_env = "msvc")]
    let config = config.tls_config(
        ureq::tls::TlsConfig::builder()
            .provider(ureq::tls::TlsProvider::NativeTls)
            .root_certs(ureq::tls::RootCerts::PlatformVerifier)
            .build(),
    );
    Ok(config.build().new_agent())
}

fn classify(e: &ureq::Error) -> Failure {
    match e {
        ureq::Error::HostNotFound => Failure::Dns,
        ureq::Error::Timeout(t) => {
            use ureq::Timeout as T;
            match t {
                T::RecvBody | T::Global | T::PerCall => Failure::TooSlow(0),
                _ => Failure::Timeout,
            }
        }
        ureq::Error::BadUri(e) => Failure::BadUrl(e.clone()),
        ureq::Error::Http(e) => Failure::BadUrl(e.to_string()),
        ureq::Error::TooManyRedirects | ureq::Error::RedirectFailed => {
            Failure::Redirect(e.to_string())
        }
        ureq::Error::ConnectionFailed => Failure::Connection("refused".into()),
        ureq::Error::Tls(t) => Failure::Tls(t.to_string()),
        ureq::Error::StatusCode(s) => Failure::Status(*s),
        ureq::Error::Io(io) => io_failure(io),
        other => {
            let text = other.to_string();
            if text.to_ascii_lowercase().contains("tls")
                || text.to_ascii_lowercase().contains("certificate")
            {
                Failure::Tls(text)
            } else {
                Failure::Connection(text)
            }
        }
    }
}

fn io_failure(io: &std::io::Error) -> Failure {
    use std::io::ErrorKind as K;
    match io.kind() {
        K::TimedOut | K::WouldBlock => Failure::Timeout,
        K::ConnectionRefused => Failure::Connection("refused".into()),
        K::UnexpectedEof | K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => {
            Failure::Connection("closed before the end of the file".into())
        }
        _ => {
            // ureq wraps its own errors (a timeout while reading the body) in io errors
            if let Some(inner) = io.get_ref().and_then(|e| e.downcast_ref::<ureq::Error>()) {
                return classify(inner);
            }
            Failure::Connection(io.to_string())
        }
    }
}

impl Failure {
    /// Whether a request that failed so is worth one more try: it failed in transit (a
    /// connection closed or reset, no answer in time). Not a name that does not resolve, TLS,
    /// an HTTP status, a redirect refused, a bound hit, an answer too slow, Ctrl-C.
    pub fn retryable(&self) -> bool {
        matches!(self, Failure::Timeout) || matches!(self, Failure::Connection(e) if e != "refused")
    }
}

/// What a download must start with, and how much it may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// An MSF PDB or a cabinet (`.pdb`, `.pd_`, a pointer's target), up to `max` bytes.
    SymbolFile { max: u64 },
    /// A `file.ptr`'s text, up to `max` bytes.
    Pointer { max: u64 },
}

const MSF7: &[u8] = b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0";
const MSF2: &[u8] = b"Microsoft C/C++ program database 2.00\r\n\x1aJG\0\0";
const CAB: &[u8] = b"MSCF\0\0\0\0";

/// Whether `head` (the first bytes of a body, all of them when it is shorter) can start an
/// MSF PDB or a cabinet file.
pub fn symbol_file_head(head: &[u8]) -> bool {
    !head.is_empty()
        && [MSF7, MSF2, CAB].iter().any(|m| {
            let k = head.len().min(m.len());
            head[..k] == m[..k]
        })
}

/// The number of redirects a download follows (each to the same scheme, host and port).
const MAX_REDIRECTS: usize = 5;

/// What the worker thread of a GET sends: bytes, then the end.
enum Msg {
    Head(Option<u64>),
    Bytes(Vec<u8>),
    End(Result<Got, Failure>),
}

/// GETs `url` into `out`; `progress` gets the bytes as they arrive. A body shorter than its
/// `Content-Length` is an error; so is one longer than `expect` allows (the length checked
/// first), one that does not start as `expect` says, one not whole by `deadline`, and Ctrl-C
/// ([`super::guard::cancel`]), which ends it within a tenth of a second. Redirects are
/// followed only to the same scheme, host and port ([`super::guard::may_follow`]). One try:
/// the caller retries ([`Failure::retryable`]) with a fresh `out`.
///
/// The request runs on a thread of its own and hands its bytes over through a small channel
/// (at most 4 x 64 KiB in flight), so that the caller notices the deadline and Ctrl-C even
/// while the server sends nothing; a thread left behind ends at ureq's global timeout.
pub fn get(
    agent: &ureq::Agent,
    url: &str,
    out: &mut dyn Write,
    progress: &dyn Fn(u64),
    expect: Expect,
    deadline: std::time::Instant,
) -> Result<Got, Failure> {
    if super::guard::cancelled() {
        return Err(Failure::Interrupted);
    }
    let (tx, rx) = std::sync::mpsc::sync_channel::<Msg>(4);
    let (agent, first) = (agent.clone(), url.to_string());
    let max = match expect {
        Expect::SymbolFile { max } | Expect::Pointer { max } => max,
    };
    let worker = std::thread::Builder::new()
        .name("dtx-symsrv-get".into())
        .spawn(move || {
            let end = fetch_on(&agent, &first, max, &tx);
            let _ = tx.send(Msg::End(end));
        });
    if let Err(e) = worker {
        return Err(Failure::Local(format!(
            "cannot start a download thread: {e}"
        )));
    }
    let mut n: u64 = 0;
    let mut head = Vec::new();
    let tick = Duration::from_millis(100);
    loop {
        if super::guard::cancelled() {
            return Err(Failure::Interrupted);
        }
        let now = std::time::Instant::now();
        if now >= deadline {
            return Err(Failure::TooSlow(n));
        }
        let msg = match rx.recv_timeout(tick.min(deadline - now)) {
            Ok(m) => m,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Failure::Connection("the download thread ended".into()))
            }
        };
        match msg {
            Msg::Head(Some(len)) if len > max => {
                return Err(too_big(expect, max));
            }
            Msg::Head(_) => {}
            Msg::Bytes(b) => {
                if let Expect::SymbolFile { .. } = expect {
                    if head.len() < 64 {
                        head.extend_from_slice(&b[..b.len().min(64 - head.len())]);
                        if !symbol_file_head(&head) {
                            return Err(Failure::NotSymbolFile);
                        }
                    }
                }
                n += b.len() as u64;
                if n > max {
                    return Err(too_big(expect, max));
                }
                out.write_all(&b)
                    .map_err(|e| Failure::Local(format!("writing the cache: {e}")))?;
                progress(b.len() as u64);
            }
            Msg::End(Ok(Got::File(_))) => {
                if matches!(expect, Expect::SymbolFile { .. }) && n == 0 {
                    return Err(Failure::NotSymbolFile);
                }
                return Ok(Got::File(n));
            }
            Msg::End(end) => return end,
        }
    }
}

fn too_big(expect: Expect, max: u64) -> Failure {
    match expect {
        Expect::SymbolFile { .. } => Failure::TooBig("a download (DTX_SYMBOL_MAX_MB)", max),
        Expect::Pointer { .. } => Failure::TooBig("a file.ptr (DTX_SYMBOL_POINTER_MAX_KB)", max),
    }
}

/// The worker of [`get`]: the request, its redirects, its body in pieces to `tx`.
fn fetch_on(
    agent: &ureq::Agent,
    first: &str,
    max: u64,
    tx: &std::sync::mpsc::SyncSender<Msg>,
) -> Result<Got, Failure> {
    let mut url = first.to_string();
    let mut hops = 0;
    let mut resp = loop {
        let resp = agent.get(&url).call().map_err(|e| classify(&e))?;
        let status = resp.status().as_u16();
        if !matches!(status, 301 | 302 | 303 | 307 | 308) {
            break resp;
        }
        hops += 1;
        if hops > MAX_REDIRECTS {
            return Err(Failure::Redirect(format!(
                "more than {MAX_REDIRECTS} redirects"
            )));
        }
        let to = resp
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| Failure::Redirect(format!("a {status} without a Location")))?;
        let to = resolve(&url, to.trim());
        super::guard::may_follow(first, &to).map_err(Failure::Redirect)?;
        url = to;
    };
    match resp.status().as_u16() {
        200 => {}
        404 => return Ok(Got::NotFound),
        s => return Err(Failure::Status(s)),
    }
    let expect: Option<u64> = resp
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok());
    if tx.send(Msg::Head(expect)).is_err() {
        return Err(Failure::Interrupted);
    }
    if expect.is_some_and(|e| e > max) {
        return Err(Failure::Interrupted);
    }
    let mut body = resp.body_mut().as_reader();
    let mut n: u64 = 0;
    loop {
        let mut buf = vec![0u8; 64 * 1024];
        let k = match body.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_failure(&e)),
        };
        buf.truncate(k);
        n += k as u64;
        if tx.send(Msg::Bytes(buf)).is_err() || n > max {
            // the caller has gone (a bound, the deadline, Ctrl-C): read no more
            return Err(Failure::Interrupted);
        }
    }
    if expect.is_some_and(|e| e != n) {
        return Err(Failure::Connection(
            "closed before the end of the file".into(),
        ));
    }
    Ok(Got::File(n))
}

/// A redirect's `Location` against the URL it answered: absolute, `//host/..`, `/path` or
/// relative to the folder.
fn resolve(base: &str, loc: &str) -> String {
    if loc.contains("://") {
        return loc.to_string();
    }
    let (scheme, rest) = base.split_once("://").unwrap_or(("http", base));
    if let Some(net) = loc.strip_prefix("//") {
        return format!("{scheme}://{net}");
    }
    let auth_end = rest.find('/').unwrap_or(rest.len());
    let auth = &rest[..auth_end];
    if loc.starts_with('/') {
        return format!("{scheme}://{auth}{loc}");
    }
    let path = &rest[auth_end..];
    let path = path.split(['?', '#']).next().unwrap_or("");
    let dir = path.rfind('/').map_or("/", |i| &path[..=i]);
    format!("{scheme}://{auth}{dir}{loc}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn win3_system_proxy_as_symsrv_reads_it() {
        let u = "https://msdl.microsoft.com/download/symbols";
        let p = |enable, server, bypass| system_proxy(u, enable, server, bypass);
        assert_eq!(
            p(true, Some("proxy.corp:8080"), None),
            Some("http://proxy.corp:8080".into())
        );
        assert_eq!(p(false, Some("proxy.corp:8080"), None), None);
        assert_eq!(p(true, None, None), None);
        assert_eq!(
            p(true, Some("http=h1:80;https=h2:443;ftp=h3:21"), None),
            Some("http://h2:443".into())
        );
        assert_eq!(
            system_proxy(
                "http://sym.corp/s",
                true,
                Some("http=h1:80;https=h2:443"),
                None
            ),
            Some("http://h1:80".into())
        );
        assert_eq!(p(true, Some("ftp=h3:21"), None), None);
        assert_eq!(
            p(true, Some("proxy:1"), Some("*.microsoft.com;<local>")),
            None
        );
        assert_eq!(p(true, Some("proxy:1"), Some("msdl.*")), None);
        assert!(p(true, Some("proxy:1"), Some("*.corp;<local>")).is_some());
        assert_eq!(
            system_proxy("http://symbols/s", true, Some("proxy:1"), Some("<local>")),
            None
        );
    }

    #[test]
    fn win3_msvc_tls_trusts_the_windows_store() {
        let a = agent("https://127.0.0.1:1").unwrap();
        let roots = a.config().tls_config().root_certs();
        if cfg!(target_env = "msvc") {
            assert!(
                matches!(roots, ureq::tls::RootCerts::PlatformVerifier),
                "{roots:?}"
            );
        } else {
            // rustls with Mozilla's roots (the platform verifier would pull C in)
            assert!(matches!(roots, ureq::tls::RootCerts::WebPki), "{roots:?}");
        }
    }

    #[test]
    fn hostile_redirects_resolve_and_bodies_must_be_symbol_files() {
        assert_eq!(resolve("http://h:1/a/b/c.pdb", "/x"), "http://h:1/x");
        assert_eq!(
            resolve("http://h:1/a/b/c.pdb", "d.pdb"),
            "http://h:1/a/b/d.pdb"
        );
        assert_eq!(resolve("https://h/a", "//e/x"), "https://e/x");
        assert_eq!(resolve("https://h/a", "http://e/x"), "http://e/x");
        assert!(symbol_file_head(b"Microsoft C/C++ MSF 7.00\r\n\x1aDS"));
        assert!(symbol_file_head(b"MSCF"));
        assert!(symbol_file_head(b"Micro"));
        assert!(!symbol_file_head(b"<html>"));
        assert!(!symbol_file_head(b""));
        assert!(!Failure::Tls("x".into()).retryable());
        assert!(!Failure::Redirect("x".into()).retryable());
        assert!(!Failure::TooSlow(1).retryable());
        assert!(Failure::Connection("closed before the end of the file".into()).retryable());
        assert!(!Failure::Connection("refused".into()).retryable());
        assert!(Failure::TooSlow(3)
            .to_string()
            .contains("answered too slowly"));
    }

    #[test]
    fn hosts_and_proxies_of_urls() {
        assert_eq!(host_of("http://127.0.0.1:8080/a/b"), "127.0.0.1");
        assert_eq!(
            host_of("https://msdl.microsoft.com/download/symbols"),
            "msdl.microsoft.com"
        );
        assert_eq!(host_of("http://u:p@h.example:1"), "h.example");
        assert_eq!(host_of("http://[::1]:80/x"), "::1");
        assert_eq!(host_of("http://h"), "h");
    }
}
