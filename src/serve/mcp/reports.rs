//! The `symbols` and `check` tools: dtx's own `--symbols` and `--check` reports, each run as a
//! child dtx (`-x oformat=json`) of this server's executable. A child, not a call, because
//! both reports write to stdout, which is the protocol's channel here, and because `--check`
//! starts workloads and sessions of its own: a child that overruns its time is killed, and
//! what it held goes with it. What comes back is bounded in time and in bytes, and must be
//! the report's JSON document; anything else is a tool error naming what the child said.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::output::json::{parse, Json};

/// At most this much of a report is read (a trace with thousands of images stays well inside).
const MAX_REPORT: usize = 4 << 20;

/// What a child said on stderr, at most this much of it, in a tool error.
const MAX_STDERR: usize = 4096;

/// `symbols`: the `--symbols` report of a trace (or `demo`), or of the running kernel on
/// Windows when no trace is given.
pub fn symbols(trace: Option<&str>, seconds: f64) -> Result<Json, String> {
    let mut argv = vec!["--symbols".to_string()];
    match trace {
        Some(t) => argv.extend(["-E".to_string(), t.to_string()]),
        None if cfg!(windows) => {}
        None => {
            return Err(
                "symbols needs a trace (a .etl file, or 'demo'): the running kernel's modules are listed on Windows only"
                    .into(),
            )
        }
    }
    argv.extend(["-x".to_string(), "oformat=json".to_string()]);
    child_report(&argv, seconds)
}

/// `check`: the `--check` report of this machine, as `dtx --check -x oformat=json` gives it
/// (its `status` is the exit status the command line would have).
pub fn check(seconds: f64) -> Result<Json, String> {
    child_report(
        &["--check".into(), "-x".into(), "oformat=json".into()],
        seconds,
    )
}

/// Runs this executable with `argv`, for at most `seconds`, and parses its stdout.
fn child_report(argv: &[String], seconds: f64) -> Result<Json, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find dtx's own executable: {e}"))?;
    let mut child = Command::new(&exe)
        .args(argv)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let (Some(out), Some(err)) = (child.stdout.take(), child.stderr.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err("the report's pipes could not be opened".into());
    };
    let stdout = std::thread::spawn(move || bounded(out, MAX_REPORT + 1));
    let stderr = std::thread::spawn(move || bounded(err, MAX_STDERR));
    let deadline = Instant::now() + Duration::from_secs_f64(seconds.clamp(1.0, 600.0));
    let mut timed_out = false;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() >= deadline => {
                timed_out = true;
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for the report: {e}")),
        }
    }
    let out = stdout.join().unwrap_or_default();
    let err = stderr.join().unwrap_or_default();
    let said = String::from_utf8_lossy(&err).trim().to_string();
    if timed_out {
        return Err(format!(
            "the report did not finish within {seconds} s and was stopped{}",
            if said.is_empty() {
                String::new()
            } else {
                format!(": {said}")
            }
        ));
    }
    if out.len() > MAX_REPORT {
        return Err(format!(
            "the report is larger than {} MiB",
            MAX_REPORT >> 20
        ));
    }
    let text = String::from_utf8_lossy(&out);
    parse(text.trim()).map_err(|_| {
        if said.is_empty() {
            "the report gave no JSON document".to_string()
        } else {
            said
        }
    })
}

/// Reads `r` to its end, keeping at most `max` bytes (the rest is read and dropped, so that
/// the child never blocks on a full pipe).
fn bounded(mut r: impl Read, max: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = max.saturating_sub(kept.len()).min(n);
                kept.extend_from_slice(&buf[..room]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_keeps_at_most_its_limit_and_reads_to_the_end() {
        let data = vec![7u8; 100_000];
        let kept = bounded(&data[..], 1000);
        assert_eq!(kept.len(), 1000);
        assert!(bounded(&data[..10], 1000).len() == 10);
    }

    #[test]
    fn symbols_without_a_trace_is_refused_off_windows() {
        if cfg!(windows) {
            return;
        }
        let e = symbols(None, 5.0).unwrap_err();
        assert!(e.contains("needs a trace"), "{e}");
    }
}
