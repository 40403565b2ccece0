//! What dtx takes from a trace and a symbol server, which are untrusted input (a stranger's
//! `.etl`, a server that may lie): the decisions, each a small pure function so that the
//! Windows cases are unit tests here (Linux cannot show an SMB connection):
//! - **names**: a PDB name becomes a file name on every OS or fails that one file
//!   ([`file_name_problem`]), and a URL path segment only percent-encoded ([`segment`]);
//! - **containment**: where a `file.ptr` or a redirect may send dtx ([`may_follow`],
//!   [`local_pointer_problem`]), and which PDB paths a trace may make dtx open
//!   ([`recorded_path_allowed`]);
//! - **bounds**: the sizes and times a download may take ([`Limits`], from options);
//! - **quiet**: URLs printed without their user-info ([`redact`]), and text from traces and
//!   servers with its control characters escaped ([`shown`]);
//! - **interrupt**: Ctrl-C ends the downloads going on and asks nothing more ([`cancel`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Why `name` cannot be a file name on every OS dtx runs on, or None when it can: an
/// allow-list of what Windows, macOS and Linux all take (Microsoft Learn, "Naming Files,
/// Paths, and Namespaces"): no `<>:"/\|?*`, no control characters, no trailing dot or space,
/// not `.` or `..`, not a reserved device name (`CON`, `NUL.pdb`, `COM1`...), at most 255 bytes.
pub fn file_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("an empty file name");
    }
    if name == "." || name == ".." {
        return Some("a file name that names a folder");
    }
    if name.len() > 255 {
        return Some("a file name longer than 255 bytes");
    }
    if name.chars().any(|c| c.is_control()) {
        return Some("a file name with control characters");
    }
    if name.contains(['<', '>', ':', '"', '/', '\\', '|', '?', '*']) {
        return Some("a file name with a character Windows refuses (<>:\"/\\|?*)");
    }
    if name.ends_with(['.', ' ']) {
        return Some("a file name ending in a dot or a space");
    }
    let stem = name.split('.').next().unwrap_or("").trim_end();
    let upper = stem.to_ascii_uppercase();
    let reserved = matches!(upper.as_str(), "CON" | "PRN" | "AUX" | "NUL")
        || ((upper.starts_with("COM") || upper.starts_with("LPT"))
            && upper.len() == 4
            && upper.as_bytes()[3].is_ascii_digit()
            && upper.as_bytes()[3] != b'0');
    if reserved {
        return Some("a reserved device name of Windows");
    }
    None
}

/// `s` as one path segment of a URL: every byte but RFC 3986's unreserved ones
/// (`A-Za-z0-9-._~`) percent-encoded, so that a space, `#` or `?` is part of the name.
pub fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The scheme, host and port of an `http(s)://` URL (lower case, the port made explicit), or
/// None when `url` is not one.
pub fn origin(url: &str) -> Option<(String, String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let auth = rest.split(['/', '?', '#']).next().unwrap_or("");
    let auth = auth.rsplit_once('@').map_or(auth, |(_, h)| h);
    let (host, port) = if let Some(v6) = auth.strip_prefix('[') {
        let (h, after) = v6.split_once(']')?;
        (h, after.strip_prefix(':'))
    } else {
        match auth.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (auth, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => default,
    };
    Some((scheme, host.to_ascii_lowercase(), port))
}

/// Whether a server at `from` may send dtx to `to` (a `file.ptr`'s `PATH:` URL, a redirect's
/// `Location`): only to the same scheme, host and port. So HTTPS never goes to HTTP, and no
/// host the user did not name is reached. The reason when not.
pub fn may_follow(from: &str, to: &str) -> Result<(), String> {
    let Some(a) = origin(from) else {
        return Err(format!("{} is not an http(s) URL", redact(from)));
    };
    let Some(b) = origin(to) else {
        return Err(format!("{} is not an http(s) URL", shown(&redact(to))));
    };
    if a.0 == "https" && b.0 == "http" {
        return Err(format!(
            "{} would go from HTTPS to HTTP: refused",
            shown(&redact(to))
        ));
    }
    if a != b {
        return Err(format!(
            "{} is on another host than the server named ({}://{}:{}): refused",
            shown(&redact(to)),
            a.0,
            a.1,
            a.2
        ));
    }
    Ok(())
}

/// Whether `p` is a UNC path (`\\server\share`, `//server/share`, `\\?\UNC\`): opening one
/// connects over SMB and hands the user's credentials to that server.
pub fn is_unc(p: &str) -> bool {
    let b = p.as_bytes();
    b.len() >= 2 && matches!(b[0], b'\\' | b'/') && matches!(b[1], b'\\' | b'/')
        || p.to_ascii_uppercase().starts_with("\\\\?\\UNC\\")
}

/// Why a `file.ptr` from the HTTP server `server` may not make dtx read the local or network
/// path `path`, or None when it may: only under `DTX_SYMBOL_POINTER_FILES=1`
/// ([`Limits::pointer_files`]). A pointer from a local store is the store's owner's to write;
/// one from a server is a stranger's, and would read any file (`/dev/zero`) or connect to any
/// share.
pub fn local_pointer_problem(path: &str, allowed: bool) -> Option<String> {
    if allowed {
        return None;
    }
    let what = if is_unc(path) {
        "a network share (UNC path)"
    } else {
        "a local file"
    };
    Some(format!(
        "points to {what}, {}: refused (DTX_SYMBOL_POINTER_FILES=1 allows it)",
        shown(path)
    ))
}

/// Whether the PDB path a trace records for an image may be opened: never a UNC path (an SMB
/// connection to the trace author's server); otherwise only live, or over a trace (`-E`) under
/// `DTX_TRACE_PDB_PATHS=1` (the symbol path is the way to name PDBs for a trace).
pub fn recorded_path_allowed(path: &str, recorded: bool, option: bool) -> bool {
    !is_unc(path) && (!recorded || option)
}

/// `url` with its user-info (`user:password@`) replaced by `***@`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// `text` with every control character (C0, DEL, C1: escape sequences, bells, newlines)
/// written as `\xNN` or `\u{NNNN}` ([`crate::output::shown`]), so that a trace's or a server's
/// text cannot move the cursor, set a title or clear the screen.
pub fn shown(text: &str) -> String {
    crate::output::shown::shown(text).into_owned()
}

/// The bounds of downloads from symbol servers, each an option (an environment variable).
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// `DTX_SYMBOL_MAX_MB`: the bytes one download may have, and a `.pd_` may expand to
    /// (default 4096 MiB: the largest PDBs of big programs are a few GiB).
    pub max_bytes: u64,
    /// `DTX_SYMBOL_POINTER_MAX_KB`: the bytes of a `file.ptr` (default 8 KiB: a path).
    pub pointer_bytes: u64,
    /// `DTX_SYMBOL_DOWNLOAD_SECONDS`: the time one download may take, whole (default 600).
    pub download: Duration,
    /// `DTX_SYMBOL_RUN_SECONDS`: the time all the downloads of a run may take (default 1800).
    pub run: Duration,
    /// `DTX_SYMBOL_POINTER_FILES=1`: a server's `file.ptr` may name a local file or a share.
    pub pointer_files: bool,
}

impl Limits {
    pub fn from_env() -> Limits {
        Limits::from(|k| std::env::var(k).ok())
    }

    /// The limits the variables `var` gives (a value that is not a positive number is the
    /// default).
    pub fn from(var: impl Fn(&str) -> Option<String>) -> Limits {
        let num = |k: &str, default: f64| {
            var(k)
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v > 0.0)
                .unwrap_or(default)
        };
        Limits {
            max_bytes: (num("DTX_SYMBOL_MAX_MB", 4096.0) * 1048576.0) as u64,
            pointer_bytes: (num("DTX_SYMBOL_POINTER_MAX_KB", 8.0) * 1024.0) as u64,
            download: Duration::from_secs_f64(num("DTX_SYMBOL_DOWNLOAD_SECONDS", 600.0).min(1e7)),
            run: Duration::from_secs_f64(num("DTX_SYMBOL_RUN_SECONDS", 1800.0).min(1e7)),
            pointer_files: var("DTX_SYMBOL_POINTER_FILES").is_some_and(|v| v.trim() == "1"),
        }
    }
}

static CANCELLED: AtomicBool = AtomicBool::new(false);

/// Ends the downloads going on (within a poll, a tenth of a second) and makes every later one
/// fail at once: Ctrl-C. Their partial files are removed; frames print as `module+offset`.
pub fn cancel() {
    CANCELLED.store(true, Ordering::SeqCst);
}

/// The flags Ctrl-C sets besides [`cancel`] (the engine's interrupt: the run goes to END).
static ON_CTRL_C: std::sync::Mutex<Vec<std::sync::Arc<AtomicBool>>> =
    std::sync::Mutex::new(Vec::new());

/// Installs the process's Ctrl-C handler (once; `ctrlc` allows one): it cancels the downloads
/// and sets the flags [`on_ctrl_c`] registered. Called by the run before its sessions start and
/// by the first download, whichever comes first, so that a Ctrl-C while a PDB downloads, even
/// before the run has begun, removes its partial file and ends the run as Ctrl-C does.
pub fn install_ctrl_c() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = ctrlc::set_handler(|| {
            cancel();
            for f in ON_CTRL_C.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                f.store(true, Ordering::SeqCst);
            }
        });
    });
}

/// Has Ctrl-C set `flag` too (at once when it came already).
pub fn on_ctrl_c(flag: std::sync::Arc<AtomicBool>) {
    install_ctrl_c();
    if cancelled() {
        flag.store(true, Ordering::SeqCst);
    }
    ON_CTRL_C
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(flag);
}

/// Whether [`cancel`] was called.
pub fn cancelled() -> bool {
    CANCELLED.load(Ordering::SeqCst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_fail_one_file() {
        for ok in [
            "ntkrnlmp.pdb",
            "my app.pdb",
            "a#b.pdb",
            "c++.pdb",
            "x.y.pdb",
            "COM0.pdb",
        ] {
            assert_eq!(file_name_problem(ok), None, "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "C:evil.bat",
            "a\"b.pdb",
            "<x>.pdb",
            "a?b",
            "a*b",
            "x.pdb.",
            "x.pdb ",
            "CON",
            "nul.pdb",
            "Com1.pdb",
            "lpt9",
            "a\u{1b}[2J.pdb",
            "a\nb",
            "a/b",
            "a\\b",
            "a|b",
        ] {
            assert!(file_name_problem(bad).is_some(), "{bad:?}");
        }
        assert!(file_name_problem(&"a".repeat(256)).is_some());
        assert_eq!(segment("my app#1?.pdb"), "my%20app%231%3F.pdb");
        assert_eq!(segment("ntkrnlmp.pdb"), "ntkrnlmp.pdb");
        assert_eq!(segment("é"), "%C3%A9");
    }

    #[test]
    fn hostile_pointers_and_redirects_stay_on_the_server() {
        let s = "https://sym.example/symbols";
        assert!(may_follow(s, "https://sym.example/other/x.pdb").is_ok());
        assert!(may_follow(s, "HTTPS://SYM.example:443/x").is_ok());
        assert!(may_follow(s, "http://sym.example/x.pdb")
            .unwrap_err()
            .contains("HTTPS to HTTP"));
        assert!(may_follow(s, "https://evil.example/x.pdb")
            .unwrap_err()
            .contains("another host"));
        assert!(may_follow(s, "https://sym.example:8443/x").is_err());
        assert!(may_follow(s, "https://u:p@evil.example/x")
            .unwrap_err()
            .contains("***@"));
        assert!(may_follow(s, "file:///etc/passwd").is_err());
        assert!(may_follow("http://127.0.0.1:81/s", "http://127.0.0.1:81/t").is_ok());
        assert!(may_follow("http://[::1]:81/s", "http://[::1]:82/t").is_err());
    }

    #[test]
    fn hostile_unc_paths_are_never_opened() {
        for unc in [
            r"\\attacker\share\x.pdb",
            "//attacker/share/x.pdb",
            r"\\?\UNC\attacker\s\x.pdb",
            r"\/attacker\x",
        ] {
            assert!(is_unc(unc), "{unc}");
            assert!(!recorded_path_allowed(unc, false, true), "{unc}");
            assert!(!recorded_path_allowed(unc, true, true), "{unc}");
            assert!(local_pointer_problem(unc, false)
                .unwrap()
                .contains("network share"));
        }
        let local = r"C:\build\x.pdb";
        assert!(!is_unc(local));
        // live: the image's own record; a trace: only under the option
        assert!(recorded_path_allowed(local, false, false));
        assert!(!recorded_path_allowed(local, true, false));
        assert!(recorded_path_allowed(local, true, true));
        assert!(local_pointer_problem("/dev/zero", false)
            .unwrap()
            .contains("local file"));
        assert_eq!(local_pointer_problem("/dev/zero", true), None);
    }

    #[test]
    fn hostile_text_is_quiet() {
        assert_eq!(
            redact("http://user:pass@host:8/x@y"),
            "http://***@host:8/x@y"
        );
        assert_eq!(redact("https://host/a@b"), "https://host/a@b");
        assert_eq!(shown("a\u{1b}]0;pwned\u{7}b"), "a\\x1b]0;pwned\\x07b");
        assert_eq!(shown("x\u{9b}2J\r\n"), "x\\x9b2J\\x0d\\x0a");
        assert_eq!(shown("plain ü"), "plain ü");
    }

    #[test]
    fn hostile_limits_are_options() {
        let d = Limits::from(|_| None);
        assert_eq!(d.max_bytes, 4096 << 20);
        assert_eq!(d.pointer_bytes, 8192);
        assert_eq!(d.download, Duration::from_secs(600));
        assert!(!d.pointer_files);
        let l = Limits::from(|k| {
            Some(
                match k {
                    "DTX_SYMBOL_MAX_MB" => "1.5",
                    "DTX_SYMBOL_DOWNLOAD_SECONDS" => "2",
                    "DTX_SYMBOL_POINTER_FILES" => "1",
                    _ => "-3",
                }
                .into(),
            )
        });
        assert_eq!(l.max_bytes, 1572864);
        assert_eq!(l.download, Duration::from_secs(2));
        assert_eq!(l.pointer_bytes, 8192);
        assert!(l.pointer_files);
    }
}
