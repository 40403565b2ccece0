//! The one runner of the built `dtx` for the integration tests: its arguments, its
//! environment and folder, bytes on its standard input (closed when none are given), a time
//! limit (a run past it is killed and fails the test with what it wrote so far), and what a
//! test reads of the run: its output, its status and text, or its stdout when it must succeed;
//! or the started process, for a test that talks to it while it runs.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// The built dtx that the tests run.
pub const DTX: &str = env!("CARGO_BIN_EXE_dtx");

/// A run of the built dtx to make.
pub struct Dtx {
    cmd: Command,
    stdin: Option<Vec<u8>>,
    timeout: Option<Duration>,
}

impl Dtx {
    /// dtx with `args`, standard input closed.
    pub fn new<S: AsRef<OsStr>>(args: &[S]) -> Dtx {
        Dtx::under(&[] as &[&str], args)
    }

    /// `prefix... dtx args...`: dtx started by another program (`setpriv ...`, `sudo -u ...`),
    /// standard input closed.
    pub fn under<P: AsRef<OsStr>, S: AsRef<OsStr>>(prefix: &[P], args: &[S]) -> Dtx {
        Dtx::under_exe(prefix, OsStr::new(DTX), args)
    }

    /// As [`Dtx::under`], with the dtx executable at `exe` (a copy somewhere else).
    pub fn under_exe<P: AsRef<OsStr>, S: AsRef<OsStr>>(
        prefix: &[P],
        exe: &OsStr,
        args: &[S],
    ) -> Dtx {
        let mut cmd = match prefix.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        cmd.args(args).stdin(Stdio::null());
        Dtx {
            cmd,
            stdin: None,
            timeout: None,
        }
    }

    /// With `arg` after the arguments so far.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Dtx {
        self.cmd.arg(arg);
        self
    }

    /// With `bytes` on its standard input, which is closed after them.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Dtx {
        self.stdin = Some(bytes.into());
        self
    }

    /// Killed, failing the test, when it has not ended after `limit`.
    pub fn timeout(mut self, limit: Duration) -> Dtx {
        self.timeout = Some(limit);
        self
    }

    /// The command itself, for what only one OS has (`creation_flags` on Windows).
    pub fn command(&mut self) -> &mut Command {
        &mut self.cmd
    }

    /// With `key` set to `value` in its environment.
    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Dtx {
        self.cmd.env(key, value);
        self
    }

    /// With `key` out of its environment.
    pub fn env_remove(mut self, key: &str) -> Dtx {
        self.cmd.env_remove(key);
        self
    }

    /// With `path` as its only symbol path (`_NT_SYMBOL_PATH`), or none: the machine's own
    /// symbol path variables are not passed on.
    pub fn symbol_path(self, path: Option<&str>) -> Dtx {
        let d = self
            .env_remove("_NT_ALT_SYMBOL_PATH")
            .env_remove("_NT_SYMBOL_PATH");
        match path {
            Some(p) => d.env("_NT_SYMBOL_PATH", p),
            None => d,
        }
    }

    /// Run in the folder `dir`.
    pub fn dir(mut self, dir: &Path) -> Dtx {
        self.cmd.current_dir(dir);
        self
    }

    /// Starts it with its stdout and stderr piped (its stdin too when bytes are to be
    /// written there, which they then are, by a thread of their own).
    pub fn spawn(mut self) -> Child {
        if self.stdin.is_some() {
            self.cmd.stdin(Stdio::piped());
        }
        let mut child = (self.cmd.stdout(Stdio::piped()).stderr(Stdio::piped()))
            .spawn()
            .expect("start dtx");
        if let (Some(bytes), Some(mut pipe)) = (self.stdin.take(), child.stdin.take()) {
            // a dtx that stops reading early closes the pipe: not the test's failure
            std::thread::spawn(move || {
                let _ = pipe.write_all(&bytes);
            });
        }
        child
    }

    /// Runs it to its end: the status and what it wrote.
    pub fn output(mut self) -> Output {
        if self.stdin.is_none() && self.timeout.is_none() {
            return self.cmd.output().expect("run dtx");
        }
        let args = self.args();
        let limit = self.timeout;
        let started = Instant::now();
        let mut child = self.spawn();
        let (out, err) = read_pipes(&mut child);
        let status: ExitStatus = loop {
            if let Some(st) = child.try_wait().expect("wait for dtx") {
                break st;
            }
            if let Some(limit) = limit.filter(|l| started.elapsed() > *l) {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "dtx {args:?} did not end within {:.1} s: killed\n--- stdout ---\n{}\n--- stderr ---\n{}",
                    limit.as_secs_f64(),
                    String::from_utf8_lossy(&out.join().unwrap_or_default()),
                    String::from_utf8_lossy(&err.join().unwrap_or_default())
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        Output {
            status,
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
        }
    }

    /// Its arguments, for messages.
    fn args(&self) -> Vec<std::ffi::OsString> {
        self.cmd.get_args().map(OsStr::to_os_string).collect()
    }

    /// Runs it to its end: (exit status, -1 when there is none; stdout; stderr).
    pub fn run(self) -> (i32, String, String) {
        let o = self.output();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// Runs it to its end, which must be a success: its stdout, which must be UTF-8.
    pub fn ok(self) -> String {
        let args = self.args();
        let o = self.output();
        assert!(
            o.status.success(),
            "dtx {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).expect("dtx's stdout is UTF-8")
    }
}

/// Runs dtx with `args`, no standard input, to its end: the status and what it wrote.
pub fn dtx<S: AsRef<OsStr>>(args: &[S]) -> Output {
    Dtx::new(args).output()
}

/// Runs dtx with `args` to its end: (exit status, -1 when there is none; stdout; stderr).
pub fn run<S: AsRef<OsStr>>(args: &[S]) -> (i32, String, String) {
    Dtx::new(args).run()
}

/// Runs dtx with `args` to its end, which must be a success: its stdout.
pub fn dtx_ok<S: AsRef<OsStr>>(args: &[S]) -> String {
    Dtx::new(args).ok()
}

/// (stdout, stderr) of a run that traced a program; on Windows with its line ends as `\n` (the
/// program's own output has `\r\n` there).
pub fn text(o: &Output) -> (String, String) {
    let text = |b: &[u8]| {
        let s = String::from_utf8_lossy(b);
        if cfg!(windows) {
            s.replace("\r\n", "\n")
        } else {
            s.into_owned()
        }
    };
    (text(&o.stdout), text(&o.stderr))
}

/// Reads a started child's stdout and stderr to their ends on threads of their own (so that
/// neither pipe fills while the other is read, and a caller may wait with a time limit).
pub fn read_pipes(
    child: &mut Child,
) -> (
    std::thread::JoinHandle<Vec<u8>>,
    std::thread::JoinHandle<Vec<u8>>,
) {
    fn read(pipe: Option<Box<dyn Read + Send>>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            bytes
        })
    }
    let out = read(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = read(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    (out, err)
}
