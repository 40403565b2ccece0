//! The one golden-file compare of the tests: what a run wrote against a file kept under
//! `tests/` (`tests/golden/...` for dtx's output, `tests/snapshots/...` for the console's
//! panes). `UPDATE_GOLDEN=1` (or `UPDATE_SNAPSHOTS=1`, its older name for the snapshots)
//! rewrites the files instead, after an intended change; the diff is then reviewed in git.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The file `tests/<rel>` of the checkout.
pub fn path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(rel)
}

/// True when the golden files are to be rewritten rather than compared.
pub fn updating() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some() || std::env::var_os("UPDATE_SNAPSHOTS").is_some()
}

/// Fails the test, naming `what` and the file, when `got` differs from `tests/<rel>` byte for
/// byte (the first line that differs is shown, then both texts); writes `got` there instead
/// when [`updating`].
pub fn check(what: &str, rel: &str, got: impl AsRef<[u8]>) {
    let got = got.as_ref();
    let file = path(rel);
    if updating() {
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).expect("create the golden file's folder");
        }
        std::fs::write(&file, got).expect("write the golden file");
        return;
    }
    let want = std::fs::read(&file)
        .unwrap_or_else(|e| panic!("{what}: {}: {e}; run with UPDATE_GOLDEN=1", file.display()));
    if got == want.as_slice() {
        return;
    }
    let (got, want) = (String::from_utf8_lossy(got), String::from_utf8_lossy(&want));
    let first = got
        .lines()
        .zip(want.lines())
        .position(|(g, w)| g != w)
        .unwrap_or_else(|| got.lines().count().min(want.lines().count()));
    panic!(
        "{what}: output differs from {} (first at line {}; UPDATE_GOLDEN=1 rewrites it after an \
         intended change)\n--- got ---\n{got}--- want ---\n{want}",
        file.display(),
        first + 1
    );
}
