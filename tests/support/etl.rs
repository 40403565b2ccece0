//! The shared traces of `../shared/etl` for the tests: their paths (skipping, with a message,
//! when absent) and a quiet `dtx -E` run over one.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// The path of `../shared/etl/<name>`, or None (after saying the test skips) when it is absent.
pub fn trace(name: &str) -> Option<String> {
    shared("etl", name)
}

/// The path of `../shared/<dir>/<name>` (`etl`, `etl-win11`), or None (after saying the test
/// skips) when it is absent.
pub fn shared(dir: &str, name: &str) -> Option<String> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared")
        .join(dir)
        .join(name);
    if !p.exists() {
        eprintln!("skipped: ../shared/{dir}/{name} is not here");
        return None;
    }
    Some(p.to_string_lossy().into_owned())
}

/// `dtx -q -E trace -n prog`, which must succeed: its output.
pub fn quiet(trace: &str, prog: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_dtx"))
        .args(["-q", "-E", trace, "-n", prog])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{prog}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
