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
    /// No answer within the timeout.
    Timeout,
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
            Failure::Timeout => write!(f, "timeout: no answer"),
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
            Failure::Dns | Failure::Tls(_) | Failure::Timeout | Failure::Connection(_)
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
    let proxy = match proxy_for(server) {
        Some(p) => Some(
            ureq::Proxy::new(&p).map_err(|e| Failure::Connection(format!("the proxy {p}: {e}")))?,
        ),
        None => None,
    };
    let config = ureq::Agent::config_builder()
        .proxy(proxy)
        .timeout_connect(Some(t))
        .timeout_recv_response(Some(t))
        .timeout_recv_body(Some(t * 30))
        .http_status_as_error(false)
        .user_agent(concat!(
            "dtx/",
            env!("CARGO_PKG_VERSION"),
            " (symbol server client)"
        ));
    // builds for MSVC have Windows's TLS, not rustls (see Cargo.toml)
    #[cfg(target_env = "msvc")]
    let config = config.tls_config(
        ureq::tls::TlsConfig::builder()
            .provider(ureq::tls::TlsProvider::NativeTls)
            .build(),
    );
    Ok(config.build().new_agent())
}

fn classify(e: &ureq::Error) -> Failure {
    match e {
        ureq::Error::HostNotFound => Failure::Dns,
        ureq::Error::Timeout(_) => Failure::Timeout,
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
    /// Whether a request that failed so is worth one more try (it failed in transit; not a
    /// name that does not resolve, a TLS failure or an HTTP status).
    pub fn retryable(&self) -> bool {
        matches!(self, Failure::Timeout | Failure::Connection(_))
    }
}

/// GETs `url` into `out`; `progress` gets the bytes as they arrive. A body shorter than its
/// `Content-Length` is an error. One try: the caller retries ([`Failure::retryable`]) with a
/// fresh `out`.
pub fn get(
    agent: &ureq::Agent,
    url: &str,
    out: &mut dyn Write,
    progress: &dyn Fn(u64),
) -> Result<Got, Failure> {
    get_once(agent, url, out, progress)
}

fn get_once(
    agent: &ureq::Agent,
    url: &str,
    out: &mut dyn Write,
    progress: &dyn Fn(u64),
) -> Result<Got, Failure> {
    let mut resp = agent.get(url).call().map_err(|e| classify(&e))?;
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
    let mut body = resp.body_mut().as_reader();
    let mut buf = vec![0u8; 64 * 1024];
    let mut n: u64 = 0;
    loop {
        let k = match body.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_failure(&e)),
        };
        out.write_all(&buf[..k])
            .map_err(|e| Failure::Local(format!("writing the cache: {e}")))?;
        n += k as u64;
        progress(k as u64);
    }
    if expect.is_some_and(|e| e != n) {
        return Err(Failure::Connection(
            "closed before the end of the file".into(),
        ));
    }
    Ok(Got::File(n))
}

#[cfg(test)]
mod tests {
    use super::*;

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
