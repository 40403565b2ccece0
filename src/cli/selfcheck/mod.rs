//! `dtx --check`: a self-check of the machine dtx runs on, for a user to run first and to send
//! back when something does not work. Each check runs the real thing where it can: a D program
//! through this same `dtx` executable (the real command line, engine and sources, started as a
//! child process with a time limit so that nothing here can hang), over a small workload that
//! is also this executable (`dtx --check-workload ...`, [`workload`]), and compares what dtx saw
//! with what the workload did. The platform's list is in [`linux`] and [`windows`]; the table,
//! the verdict and the JSON document in [`report`].
//!
//! Exit status: 0 when every check passed; 1 when a check failed; 3 when none failed but some
//! could not run (the privilege they need is missing, or the platform cannot: Wine).

mod common;
mod report;
mod run;
pub mod workload;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(windows)]
mod windows;

pub use report::{exit_status, json_document, table, verdict};

/// The result of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail,
    /// It could not run here (the detail says why: a missing privilege, Wine).
    Skip,
}

impl Outcome {
    /// The word the table and the JSON document use.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Skip => "skip",
        }
    }
}

/// One row of the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    pub result: Outcome,
    pub detail: String,
}

impl Check {
    pub fn pass(name: &str, detail: impl Into<String>) -> Check {
        Check::new(name, Outcome::Pass, detail)
    }
    pub fn fail(name: &str, detail: impl Into<String>) -> Check {
        Check::new(name, Outcome::Fail, detail)
    }
    pub fn skip(name: &str, detail: impl Into<String>) -> Check {
        Check::new(name, Outcome::Skip, detail)
    }
    fn new(name: &str, result: Outcome, detail: impl Into<String>) -> Check {
        Check {
            name: name.to_string(),
            result,
            detail: detail.into(),
        }
    }
}

/// The checks of this platform, in the order they ran. `progress` is told each check's name as
/// it starts (the terminal shows it while a check runs).
pub fn run_checks(progress: &mut dyn FnMut(&str)) -> Vec<Check> {
    #[cfg(target_os = "linux")]
    return linux::checks(progress);
    #[cfg(windows)]
    return windows::checks(progress);
    #[cfg(not(any(target_os = "linux", windows)))]
    {
        progress("platform");
        vec![Check::skip(
            "platform",
            "dtx traces live only on Windows and Linux; -E reads .etl files here",
        )]
    }
}

/// `dtx --check [-x oformat=json]`: runs the checks, prints the table and the verdict (or the
/// JSON document), and returns the exit status.
pub fn main(prog: &str, json: bool) -> i32 {
    use std::io::Write;
    let mut progress = |name: &str| {
        if !json {
            crate::output::stderr::say(prog, format!("checking {name}..."));
        }
    };
    let checks = run_checks(&mut progress);
    let mut out = std::io::stdout().lock();
    let text = if json {
        json_document(prog, &checks)
    } else {
        format!("{}{}\n", table(&checks), verdict(prog, &checks))
    };
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    exit_status(&checks)
}
