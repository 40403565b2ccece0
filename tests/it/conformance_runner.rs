//! The conformance runner against a tiny suite in the illumos layout, judged with the real dtx:
//! error-tag tests that pass, one whose real error carries another tag, a listed test that does
//! not exist, and a shell test the runner skips.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const DTX: &str = env!("CARGO_BIN_EXE_dtx");
const RUNNER: &str = env!("CARGO_BIN_EXE_conformance");

/// A directory under the system temp dir: its path, and the folder itself (`tempfile`'s, held
/// only to be removed when dropped).
struct TempDir(PathBuf, #[allow(dead_code)] tempfile::TempDir);

impl TempDir {
    fn new(label: &str) -> TempDir {
        let dir = (tempfile::Builder::new().prefix(&format!("dtx-conformance-{label}-")))
            .tempdir()
            .expect("create temp dir");
        TempDir(dir.path().to_path_buf(), dir)
    }
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, text).expect("write");
}

/// Builds the suite under `root/tst` and returns (suite dir, list file).
fn build_suite(root: &Path) -> (PathBuf, PathBuf) {
    let suite = root.join("tst");
    let x = suite.join("common").join("x");
    // A real syntax error: passes as err.D_SYNTAX.
    write(
        &x.join("err.D_SYNTAX.bad.d"),
        "/* a missing operand */\nBEGIN\n{\n\tx = 1 + ;\n}\n",
    );
    // An undefined variable: passes as err.D_IDENT_UNDEF.
    write(
        &x.join("err.D_IDENT_UNDEF.u.d"),
        "BEGIN\n{\n\ttrace(no_such_variable);\n\texit(0);\n}\n",
    );
    // Fails to compile, but with D_IDENT_UNDEF rather than the D_SYNTAX its name claims.
    write(
        &x.join("err.D_SYNTAX.wrongtag.d"),
        "BEGIN\n{\n\ttrace(also_undefined);\n}\n",
    );
    // Shell tests are skipped.
    write(&x.join("tst.shell.ksh"), "#!/bin/ksh\nexit 0\n");
    // Not in the list, so never run (it would fail: tracing is not available).
    write(&x.join("tst.unlisted.d"), "BEGIN { exit(0); }\n");

    let list = root.join("list.txt");
    write(
        &list,
        "# tiny suite\n\
         common/x/err.D_SYNTAX.bad.d\n\
         \n\
         ./common/x/err.D_IDENT_UNDEF.u.d\n\
         common/x/err.D_SYNTAX.wrongtag.d\n\
         common/x/err.D_SYNTAX.missing.d\n\
         common/x/tst.shell.ksh\n\
         common/x/err.D_SYNTAX.bad.d\n",
    );
    (suite, list)
}

#[test]
#[cfg_attr(
    windows,
    ignore = "under Wine the runner cannot start dtx (os error 3, path not found); not diagnosed yet"
)]
fn runner_judges_a_tiny_suite() {
    let t = TempDir::new("suite");
    let (suite, list) = build_suite(&t.0);
    let keep = t.0.join("failures");
    let json = t.0.join("results.json");
    let o = Command::new(RUNNER)
        .arg("--list")
        .arg(&list)
        .args(["--timeout", "20"])
        .arg("--keep")
        .arg(&keep)
        .arg("--json")
        .arg(&json)
        .arg("-v")
        .arg(&suite)
        .arg(DTX)
        .current_dir(&t.0)
        .stdin(Stdio::null())
        .output()
        .expect("run conformance");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        out.lines().last(),
        Some("2 passed, 2 failed, 1 skipped"),
        "stdout:\n{out}\nstderr:\n{err}"
    );
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}");

    // Per-test lines (-v), in path order.
    let verdicts: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("PASS ") || l.starts_with("FAIL ") || l.starts_with("SKIP "))
        .collect();
    assert_eq!(verdicts.len(), 5, "{out}");
    assert_eq!(verdicts[0], "PASS common/x/err.D_IDENT_UNDEF.u.d");
    assert_eq!(verdicts[1], "PASS common/x/err.D_SYNTAX.bad.d");
    assert_eq!(
        verdicts[2],
        "FAIL common/x/err.D_SYNTAX.missing.d [missing]"
    );
    assert!(
        verdicts[3].starts_with(
            "FAIL common/x/err.D_SYNTAX.wrongtag.d [stderr first line lacks [D_SYNTAX]: "
        ) && verdicts[3].contains("[D_IDENT_UNDEF] line 3: "),
        "{}",
        verdicts[3]
    );
    assert!(
        verdicts[4].starts_with("SKIP common/x/tst.shell.ksh"),
        "{}",
        verdicts[4]
    );
    assert!(!out.contains("tst.unlisted.d"));

    // The category table counts the one category.
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["x", "2", "2", "1"]),
        "{out}"
    );

    // One report per failure, naming the command that was run.
    let mut reports: Vec<String> = fs::read_dir(&keep)
        .expect("failure reports")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    reports.sort();
    assert_eq!(
        reports,
        [
            "common__x__err.D_SYNTAX.missing.d.fail.txt",
            "common__x__err.D_SYNTAX.wrongtag.d.fail.txt"
        ]
    );
    let report = fs::read_to_string(keep.join(&reports[1])).expect("read report");
    assert!(
        report.contains("-xerrtags -C -s err.D_SYNTAX.wrongtag.d"),
        "{report}"
    );
    assert!(report.contains("status:  exit 1"), "{report}");

    let json = fs::read_to_string(&json).expect("json results");
    assert!(json.contains("\"passed\": 2,"), "{json}");
    assert!(json.contains("\"failed\": 2,"), "{json}");
    assert!(json.contains("\"skipped\": 1,"), "{json}");
}

#[test]
#[cfg_attr(
    windows,
    ignore = "under Wine the runner cannot start dtx (os error 3, path not found); not diagnosed yet"
)]
fn runner_passes_when_every_listed_test_passes() {
    let t = TempDir::new("allpass");
    let (suite, _) = build_suite(&t.0);
    let list = t.0.join("good.txt");
    write(
        &list,
        "common/x/err.D_SYNTAX.bad.d\ncommon/x/err.D_IDENT_UNDEF.u.d\n",
    );
    let o = Command::new(RUNNER)
        .arg("--list")
        .arg(&list)
        .args(["--timeout", "20", "-j", "2"])
        .arg("--keep")
        .arg(t.0.join("failures"))
        .arg(&suite)
        .arg(DTX)
        .current_dir(&t.0)
        .stdin(Stdio::null())
        .output()
        .expect("run conformance");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        out.lines().last(),
        Some("2 passed, 0 failed, 0 skipped"),
        "{out}"
    );
    assert_eq!(o.status.code(), Some(0));
    assert!(
        !t.0.join("failures").exists(),
        "no reports without failures"
    );
}

#[test]
fn runner_rejects_a_missing_suite_directory() {
    let t = TempDir::new("nosuite");
    let o = Command::new(RUNNER)
        .arg(t.0.join("does-not-exist"))
        .arg(DTX)
        .current_dir(&t.0)
        .stdin(Stdio::null())
        .output()
        .expect("run conformance");
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("conformance: suite directory "), "{err}");
    assert!(err.contains("usage: conformance"), "{err}");
}
