//! The tests' own layout, checked with the tidy rules: they are one crate (`tests/it`, and
//! `tests/alone` for the few that need the machine to themselves), so a test file left beside
//! them would be a binary of its own again (a link step more), and a file in one that its
//! `main.rs` does not name would never compile or run, silently.

use std::path::{Path, PathBuf};

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// The names of `dir`'s entries, sorted.
fn entries(dir: &Path) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.path().is_dir(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn tidy_tests_are_one_crate() {
    let loose: Vec<String> = entries(&tests_dir())
        .into_iter()
        .filter(|(n, dir)| !dir && n.ends_with(".rs"))
        .map(|(n, _)| n)
        .collect();
    assert!(
        loose.is_empty(),
        "test files beside tests/it (move them there with `git mv` and name them in \
         tests/it/main.rs): {loose:?}"
    );
    let mut unnamed = Vec::new();
    for krate in ["it", "alone"] {
        unnamed.extend(unnamed_modules(&tests_dir().join(krate)));
    }
    assert!(
        unnamed.is_empty(),
        "modules that their crate's main.rs does not name (their tests never run): {unnamed:?}"
    );
}

/// The modules of the test crate `dir` that its `main.rs` does not name.
fn unnamed_modules(dir: &Path) -> Vec<String> {
    let main = std::fs::read_to_string(dir.join("main.rs")).unwrap();
    let declared = |m: &str| main.lines().any(|l| l.trim() == format!("mod {m};"));
    let mut unnamed = Vec::new();
    for (name, is_dir) in entries(dir) {
        let module = match name.strip_suffix(".rs") {
            Some("main") => continue,
            Some(m) if !is_dir => m.to_string(),
            // a folder is a module of its own when it has a mod.rs (else it holds a file
            // module's children, as etw_decode/ does)
            _ if is_dir && dir.join(&name).join("mod.rs").is_file() => name.clone(),
            _ => continue,
        };
        if !declared(&module) {
            unnamed.push(format!("{}/{module}", dir.display()));
        }
    }
    unnamed
}
