//! Runs this dtx executable as a child (a D program over the real engine and sources, or the
//! workload) with a time limit, its output read by two threads so that neither pipe fills.

use std::io::Read;
use std::process::{Command, Stdio};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// A finished (or killed) run.
#[derive(Debug, Default)]
pub struct Ran {
    /// The exit code; None when it was killed at the time limit or ended by a signal.
    pub code: Option<i32>,
    pub hung: bool,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

impl Ran {
    /// The first line of stderr that says something (for a detail), or the exit status.
    pub fn why(&self) -> String {
        if self.hung {
            return format!(
                "did not end within {} s and was killed",
                self.took.as_secs()
            );
        }
        let line = self
            .stderr
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.contains("matched "));
        match (line, self.code) {
            (Some(l), _) => l.to_string(),
            (None, Some(c)) => format!("dtx exited with status {c}"),
            (None, None) => "dtx ended by a signal".into(),
        }
    }
}

/// The path of this executable, which the checks run again.
pub fn this_dtx() -> Result<std::path::PathBuf, String> {
    std::env::current_exe().map_err(|e| format!("cannot find this dtx executable: {e}"))
}

/// The `-c` command that runs this dtx's workload `what` with `args`, or why it cannot be
/// given (see [`command_head`]).
pub fn workload_command(what: &str, args: &[&str]) -> Result<String, String> {
    let exe = this_dtx()?;
    let head = command_head(&exe.display().to_string(), cfg!(windows))?;
    let mut cmd = format!("{head} --check-workload {what}");
    for a in args {
        cmd.push(' ');
        cmd.push_str(a);
    }
    Ok(cmd)
}

/// The executable `shown` as the first word of a `-c` command: as it is without blanks;
/// double-quoted on Windows (`-c` reads quotes there, as every Windows program does: dtx in
/// `C:\Program Files`); else refused, saying why (dtrace's `-c` splits at every blank).
pub fn command_head(shown: &str, windows: bool) -> Result<String, String> {
    if !shown.contains(char::is_whitespace) {
        return Ok(shown.to_string());
    }
    if windows && !shown.contains('"') && !shown.ends_with('\\') {
        return Ok(format!("\"{shown}\""));
    }
    Err(format!(
        "this dtx's path ({shown}) has a blank, which -c cannot pass; copy dtx to a folder without one"
    ))
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<String> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).replace("\r\n", "\n")
    })
}

/// Runs this dtx with `args`, killed after `limit`; `each` is called every 50 ms meanwhile
/// (what the caller watches while dtx runs).
pub fn dtx_while(args: &[String], limit: Duration, each: impl FnMut()) -> Ran {
    match this_dtx() {
        Ok(exe) => exe_while(&exe, args, limit, each),
        Err(e) => Ran {
            stderr: e,
            ..Ran::default()
        },
    }
}

/// [`dtx_while`] of the executable `exe`.
fn exe_while(
    exe: &std::path::Path,
    args: &[String],
    limit: Duration,
    mut each: impl FnMut(),
) -> Ran {
    let started = Instant::now();
    let mut child = match Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            // the checks run this executable again (as the user running --check): one in a
            // folder that user cannot read or run from cannot check anything
            return Ran {
                stderr: format!(
                    "cannot run this dtx again ({}) for the check: {e}; --check starts its own \
                     executable, so the user running it must be able to run that file",
                    exe.display()
                ),
                ..Ran::default()
            };
        }
    };
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let mut hung = false;
    let code = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s.code(),
            Ok(None) => {}
            Err(_) => break None,
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            hung = true;
            break None;
        }
        each();
        thread::sleep(Duration::from_millis(50));
    };
    Ran {
        code,
        hung,
        took: started.elapsed(),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// Runs this dtx with `args`, killed after `limit`.
pub fn dtx(args: &[String], limit: Duration) -> Ran {
    dtx_while(args, limit, || {})
}

/// The words of a command line as owned strings.
pub fn words(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// The number on the first stdout line that starts with `tag`.
pub fn count(out: &str, tag: &str) -> Option<u64> {
    out.lines()
        .find_map(|l| l.strip_prefix(tag)?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::command_head;
    use crate::cli::args::split_windows_command;

    /// `dtx --check` from `C:\Program Files\dtx\dtx.exe`: the workload's `-c` command gives
    /// the path back whole (issue 42: the command line was not quoted).
    #[test]
    fn win3_check_workload_command_quotes_a_path_with_blanks() {
        let exe = r"C:\Program Files\dtx 1.0\dtx.exe";
        let head = command_head(exe, true).unwrap();
        let cmd = format!("{head} --check-workload calls 4099");
        assert_eq!(
            split_windows_command(&cmd),
            [exe, "--check-workload", "calls", "4099"]
        );
        assert_eq!(
            command_head(r"C:\dtx\dtx.exe", true).unwrap(),
            r"C:\dtx\dtx.exe"
        );
        // no quoting in dtrace's -c: refused there, saying why
        assert!(command_head("/opt/my dtx/dtx", false)
            .unwrap_err()
            .contains("has a blank"));
    }

    /// Issue 42, item 5: a dtx that cannot start itself again says so plainly, naming the file.
    #[test]
    fn win3_check_says_plainly_when_it_cannot_start_itself() {
        let exe = std::path::Path::new("/nonexistent/dtx-check/dtx");
        let r = super::exe_while(exe, &[], std::time::Duration::from_secs(5), || {});
        assert_eq!(r.code, None);
        assert!(
            r.why()
                .starts_with("cannot run this dtx again (/nonexistent/dtx-check/dtx)"),
            "{}",
            r.why()
        );
    }

    #[test]
    fn win3_windows_command_lines_split_as_commandlinetoargvw() {
        let cases: [(&str, &[&str]); 6] = [
            (r#"a "b c" d"#, &["a", "b c", "d"]),
            (r#""a\"b" c"#, &[r#"a"b"#, "c"]),
            (r#"a\\"b c" d"#, &[r"a\b c", "d"]),
            (r"a\\b c", &[r"a\\b", "c"]),
            (r#""" x"#, &["", "x"]),
            ("  a\t b  ", &["a", "b"]),
        ];
        for (line, want) in cases {
            assert_eq!(split_windows_command(line), want, "{line}");
        }
    }
}
