//! C programs compiled for a test with gcc and traced by the built `dtx` (the pid and fpid
//! tests on Linux): a temporary folder for them, a check that this machine lets dtx trace a
//! process, and the runs of dtx.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub use super::cli::{dtx, text};

/// A folder of compiled test programs.
pub struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    /// None (after printing why `what` is skipped) when gcc is missing or dtx cannot trace a
    /// process here.
    pub fn new(what: &str) -> Option<Env> {
        if Command::new("gcc").arg("--version").output().is_err() {
            eprintln!("skipping {what}: gcc is not installed");
            return None;
        }
        let env = Env {
            dir: tempfile::tempdir().ok()?,
        };
        let t = env.build(
            "probe_ptrace",
            "int main(void) { return 0; }",
            &["-O0"],
            &[],
        )?;
        let out = dtx(&["-q", "-n", "BEGIN {}", "-c", t.to_str()?]);
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            eprintln!("skipping {what}: cannot trace a process here: {err}");
            return None;
        }
        Some(env)
    }

    /// The folder the programs are built in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Compiles `src` as `name` with gcc: `flags` before the output name (`-O2`, ...), `libs`
    /// after the source (`-ldl`, `-pthread`); with `-g` always.
    pub fn build(&self, name: &str, src: &str, flags: &[&str], libs: &[&str]) -> Option<PathBuf> {
        let c = self.dir.path().join(format!("{name}.c"));
        std::fs::write(&c, src).ok()?;
        let out = self.dir.path().join(name);
        let st = Command::new("gcc")
            .args(flags)
            .args(["-g", "-o"])
            .arg(&out)
            .arg(&c)
            .args(libs)
            .status()
            .ok()?;
        assert!(st.success(), "gcc failed for {name}");
        Some(out)
    }
}

/// A `-c` command line: the program and its arguments.
pub fn cmd(p: &Path, args: &str) -> String {
    format!("{} {args}", p.display())
}
