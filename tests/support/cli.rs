//! Runs of the built `dtx` for the integration tests, as the command line: its arguments, no
//! standard input, and where a test needs them its environment and folder; what a test reads
//! of the run (its output, its status and text, or its stdout when it must succeed).
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A run of the built dtx to make.
pub struct Dtx(Command);

impl Dtx {
    /// dtx with `args`, standard input closed.
    pub fn new<S: AsRef<OsStr>>(args: &[S]) -> Dtx {
        let mut c = Command::new(env!("CARGO_BIN_EXE_dtx"));
        c.args(args).stdin(Stdio::null());
        Dtx(c)
    }

    /// With `key` set to `value` in its environment.
    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Dtx {
        self.0.env(key, value);
        self
    }

    /// With `key` out of its environment.
    pub fn env_remove(mut self, key: &str) -> Dtx {
        self.0.env_remove(key);
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
        self.0.current_dir(dir);
        self
    }

    /// Runs it to its end: the status and what it wrote.
    pub fn output(mut self) -> Output {
        self.0.output().expect("run dtx")
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
    pub fn ok(mut self) -> String {
        let args: Vec<_> = self.0.get_args().map(OsStr::to_os_string).collect();
        let o = self.0.output().expect("run dtx");
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
