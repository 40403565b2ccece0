//! Conformance runner: runs the illumos DTrace test suite against dtx the way
//! the suite's own driver (dtest.pl) does, with a timeout, parallel workers,
//! failure reports and a JSON result file.
//!
//! Usage: conformance [options] <suite-dir> <dtx-binary>

mod exec;
mod logic;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use exec::{Companion, Status};
use logic::Kind;

const USAGE: &str = "\
usage: conformance [options] <suite-dir> <dtx-binary>

Runs every tst.*, err.* and drp.* test under <suite-dir> (e.g.
tests/dtrace/tst) with `<dtx-binary> [-xerrtags|-xdroptags] -C -s <file>`
in the test's directory, judging results as the suite's dtest.pl does.

options:
  --list FILE      only run the tests listed in FILE (paths relative to
                   <suite-dir>; blank and # lines ignored; listed but
                   missing tests fail with reason 'missing')
  --filter SUBSTR  only run tests whose relative path contains SUBSTR
  --timeout SECS   per-test time limit (default 60)
  -j N             run N tests in parallel (default 1)
  --keep DIR       write a report per failed test into DIR
                   (default ./conformance-failures)
  --json FILE      write per-test results as JSON to FILE
  -v, --verbose    print a PASS/FAIL/SKIP line for every test
  -h, --help       show this help
";

struct Options {
    suite: PathBuf,
    dtx: OsString,
    list: Option<PathBuf>,
    filter: Option<String>,
    timeout: Duration,
    timeout_label: String,
    jobs: usize,
    keep: PathBuf,
    json: Option<PathBuf>,
    verbose: bool,
}

enum Parsed {
    Run(Box<Options>),
    Help,
}

fn parse_args(args: &[OsString]) -> Result<Parsed, String> {
    let mut positional: Vec<OsString> = Vec::new();
    let mut list = None;
    let mut filter = None;
    let mut timeout_label = "60".to_string();
    let mut jobs = 1usize;
    let mut keep = PathBuf::from("conformance-failures");
    let mut json = None;
    let mut verbose = false;
    let mut i = 0;
    let mut options_done = false;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        let s = match arg.to_str() {
            Some(s) if !options_done && s.starts_with('-') && s != "-" => s,
            _ => {
                positional.push(arg.clone());
                continue;
            }
        };
        if s == "--" {
            options_done = true;
            continue;
        }
        let (name, inline): (&str, Option<OsString>) = if let Some(rest) = s.strip_prefix("--") {
            match rest.split_once('=') {
                Some((n, v)) => (n, Some(OsString::from(v))),
                None => (rest, None),
            }
        } else if let Some(rest) = s.strip_prefix("-j").filter(|r| !r.is_empty()) {
            ("j", Some(OsString::from(rest)))
        } else {
            (&s[1..], None)
        };
        let takes_value = matches!(name, "list" | "filter" | "timeout" | "j" | "keep" | "json");
        let value = if takes_value {
            match inline {
                Some(v) => Some(v),
                None => {
                    if i >= args.len() {
                        return Err(format!("option {s} needs a value"));
                    }
                    i += 1;
                    Some(args[i - 1].clone())
                }
            }
        } else {
            if inline.is_some() {
                return Err(format!("option --{name} takes no value"));
            }
            None
        };
        let text = |v: &OsString| -> Result<String, String> {
            v.to_str()
                .map(str::to_string)
                .ok_or_else(|| format!("value of {s} is not valid UTF-8"))
        };
        match (name, value) {
            ("h" | "help", _) => return Ok(Parsed::Help),
            ("v" | "verbose", _) => verbose = true,
            ("list", Some(v)) => list = Some(PathBuf::from(v)),
            ("keep", Some(v)) => keep = PathBuf::from(v),
            ("json", Some(v)) => json = Some(PathBuf::from(v)),
            ("filter", Some(v)) => filter = Some(text(&v)?),
            ("timeout", Some(v)) => timeout_label = text(&v)?.trim().to_string(),
            ("j", Some(v)) => {
                jobs = match text(&v)?.trim().parse::<usize>() {
                    Ok(n) if n >= 1 => n,
                    _ => return Err(format!("-j needs a positive integer, not {v:?}")),
                }
            }
            _ => return Err(format!("unknown option {s}")),
        }
    }
    let secs: f64 = match timeout_label.parse() {
        Ok(x) if x > 0.0 && x < 1e9 => x,
        _ => {
            return Err(format!(
                "--timeout needs a positive number of seconds, not {timeout_label:?}"
            ))
        }
    };
    if positional.len() != 2 {
        return Err(format!(
            "expected <suite-dir> and <dtx-binary>, got {} argument(s)",
            positional.len()
        ));
    }
    Ok(Parsed::Run(Box::new(Options {
        suite: PathBuf::from(&positional[0]),
        dtx: positional[1].clone(),
        list,
        filter,
        timeout: Duration::from_secs_f64(secs),
        timeout_label,
        jobs,
        keep,
        json,
        verbose,
    })))
}

/// `p` made absolute against the current directory (without resolving links).
fn absolute(p: &Path) -> PathBuf {
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        match std::env::current_dir() {
            Ok(d) => d.join(p),
            Err(_) => p.to_path_buf(),
        }
    };
    joined
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

/// One test selected to run.
struct Case {
    rel: String,
    path: PathBuf,
    missing: bool,
}

/// Recursively collect test files (dtest.pl's find pattern) under `dir`,
/// as '/'-separated paths relative to the suite root.  Symbolic links to
/// directories are not followed.
fn walk(dir: &Path, prefix: &str, out: &mut Vec<String>) {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(_) => return,
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = match name.to_str() {
            Some(n) => n.to_string(),
            None => continue,
        };
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let ft = match entry.file_type() {
            Ok(t) => t,
            Err(_) => continue,
        };
        if ft.is_dir() {
            walk(&entry.path(), &rel, out);
        } else if logic::is_test_name(&name) && entry.path().is_file() {
            out.push(rel);
        }
    }
}

fn select_cases(opts: &Options) -> Result<Vec<Case>, String> {
    let rels: Vec<String> = match &opts.list {
        Some(list) => {
            let bytes =
                fs::read(list).map_err(|e| format!("cannot read {}: {e}", list.display()))?;
            logic::parse_list(&String::from_utf8_lossy(&bytes))
        }
        None => {
            let mut v = Vec::new();
            walk(&opts.suite, "", &mut v);
            v
        }
    };
    let mut cases: Vec<Case> = rels
        .into_iter()
        .filter(|r| opts.filter.as_deref().is_none_or(|f| r.contains(f)))
        .map(|rel| {
            let mut path = opts.suite.clone();
            for part in rel.split('/').filter(|p| !p.is_empty()) {
                path.push(part);
            }
            let missing = !path.is_file();
            Case { rel, path, missing }
        })
        .collect();
    cases.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(cases)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Verdict {
    Pass,
    Fail,
    Skip,
}

impl Verdict {
    fn word(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Skip => "SKIP",
        }
    }
}

/// What a failure report (--keep) shows beyond the reason.
struct Detail {
    command: String,
    status: String,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    expected: Vec<String>,
}

struct TestResult {
    rel: String,
    verdict: Verdict,
    reason: String,
    seconds: f64,
    detail: Option<Detail>,
}

fn result(rel: &str, verdict: Verdict, reason: impl Into<String>) -> TestResult {
    TestResult {
        rel: rel.to_string(),
        verdict,
        reason: reason.into(),
        seconds: 0.0,
        detail: None,
    }
}

fn file_stem_and_name(path: &Path) -> Option<(String, String)> {
    let name = path.file_name()?.to_str()?.to_string();
    let base = match name.rfind('.') {
        Some(p) => name[..p].to_string(),
        None => name.clone(),
    };
    Some((name, base))
}

/// How to start a test's companion program `<base>.exe` (dtest.pl starts it
/// when it is executable and passes its pid).  `Err` is a skip reason.
fn companion_argv(exe: &Path) -> Result<Vec<OsString>, String> {
    let shown = exe
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut head = [0u8; 256];
    let n = fs::File::open(exe)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| format!("cannot read companion program {shown}: {e}"))?;
    let head = &head[..n];
    if head.starts_with(b"MZ") {
        if cfg!(windows) {
            return Ok(vec![exe.as_os_str().to_owned()]);
        }
        return Err(format!("companion program {shown} is a Windows executable"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(md) = fs::metadata(exe) {
            if md.permissions().mode() & 0o111 != 0 {
                return Ok(vec![exe.as_os_str().to_owned()]);
            }
        }
    }
    if let Some(rest) = head.strip_prefix(b"#!") {
        let line = String::from_utf8_lossy(logic::first_line(rest)).into_owned();
        let mut words = line.split_whitespace();
        let interp = words.next().unwrap_or("").to_string();
        let arg: Option<String> = words.next().map(str::to_string);
        let mut argv: Vec<OsString> = Vec::new();
        if !interp.is_empty() && Path::new(&interp).is_file() {
            argv.push(interp.clone().into());
            if let Some(a) = arg {
                argv.push(a.into());
            }
        } else {
            let shell = interp.rsplit('/').next().unwrap_or("");
            let is_shell = matches!(shell, "sh" | "ksh" | "ksh93" | "bash" | "mksh" | "dash");
            if is_shell && cfg!(unix) && Path::new("/bin/sh").is_file() {
                argv.push("/bin/sh".into());
            } else {
                return Err(format!(
                    "companion program {shown} needs interpreter {interp:?}, not found"
                ));
            }
        }
        argv.push(exe.as_os_str().to_owned());
        return Ok(argv);
    }
    Err(format!("companion program {shown} is not executable"))
}

/// Builds a test's companion program from its C source with the machine's gcc, once, into a
/// folder of the temporary directory (the suite stays untouched). `Err` is a skip reason.
fn build_companion(c: &Path, rel: &str) -> Result<PathBuf, String> {
    let shown = c
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !cfg!(unix) {
        return Err(format!("needs companion program built from {shown}"));
    }
    let dir = std::env::temp_dir().join("dtx-conformance-companions");
    fs::create_dir_all(&dir).map_err(|e| format!("cannot build {shown}: {e}"))?;
    // the program keeps the name dtest.pl gives it (`tst.x.exe`): stacks show it
    let folder = match rel.rfind('/') {
        Some(i) => rel[..i].replace('/', "_"),
        None => String::new(),
    };
    let dir = dir.join(folder);
    fs::create_dir_all(&dir).map_err(|e| format!("cannot build {shown}: {e}"))?;
    let stem = shown.strip_suffix(".c").unwrap_or(&shown);
    let exe = dir.join(format!("{stem}.exe"));
    let fresh = match (fs::metadata(&exe), fs::metadata(c)) {
        (Ok(a), Ok(b)) => match (a.modified(), b.modified()) {
            (Ok(x), Ok(y)) => x >= y,
            _ => false,
        },
        _ => false,
    };
    if fresh {
        return Ok(exe);
    }
    let out = std::process::Command::new("gcc")
        .args(["-O0", "-g", "-w", "-o"])
        .arg(&exe)
        .arg(c)
        .output()
        .map_err(|e| format!("needs companion program built from {shown}: gcc: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().find(|l| l.contains("error")).unwrap_or("");
        return Err(format!("companion {shown} does not build here: {first}"));
    }
    Ok(exe)
}

fn status_text(st: &Status, timeout_label: &str) -> String {
    match st {
        Status::Exited(c) => format!("exit {c}"),
        Status::Signal(s, core) => {
            format!("signal {s}{}", if *core { " (core dumped)" } else { "" })
        }
        Status::Timeout => format!("timeout after {timeout_label}s"),
        Status::SpawnError(e) => format!("cannot run dtx: {e}"),
        Status::WaitError(e) => format!("cannot wait for dtx: {e}"),
    }
}

fn run_case(case: &Case, opts: &Options) -> TestResult {
    if case.missing {
        return result(&case.rel, Verdict::Fail, "missing");
    }
    let (name, base) = match file_stem_and_name(&case.path) {
        Some(x) => x,
        None => return result(&case.rel, Verdict::Fail, "not a valid test file name"),
    };
    let kind = logic::classify(&name);
    match kind {
        Kind::Ksh => return result(&case.rel, Verdict::Skip, "ksh test (not run)"),
        Kind::Invalid => return result(&case.rel, Verdict::Fail, "not a valid test file name"),
        _ => {}
    }
    let dir = match case.path.parent() {
        Some(d) => d.to_path_buf(),
        None => return result(&case.rel, Verdict::Fail, "test has no directory"),
    };

    // Companion program: dtest.pl starts `<dir>/<base>.exe` and passes its pid.
    let exe = dir.join(format!("{base}.exe"));
    let companion_cmd = if exe.is_file() {
        match companion_argv(&exe) {
            Ok(argv) => Some(argv),
            Err(why) => return result(&case.rel, Verdict::Skip, why),
        }
    } else {
        let c = dir.join(format!("{base}.c"));
        if c.is_file() {
            match build_companion(&c, &case.rel) {
                Ok(exe) => Some(vec![exe.into_os_string()]),
                Err(why) => return result(&case.rel, Verdict::Skip, why),
            }
        } else if dir.join(format!("{base}.s")).is_file() {
            return result(
                &case.rel,
                Verdict::Skip,
                format!("needs companion program {base}.exe built from {base}.s (i386 assembly)"),
            );
        } else {
            None
        }
    };

    let mut args: Vec<OsString> = Vec::new();
    let (expect_code, tag) = match &kind {
        Kind::Tst => (0, None),
        Kind::Err(t) => {
            if t.is_some() {
                args.push("-xerrtags".into());
            }
            (1, t.clone())
        }
        Kind::Drp(t) => {
            args.push("-xdroptags".into());
            (0, Some(t.clone()))
        }
        Kind::Ksh | Kind::Invalid => {
            return result(&case.rel, Verdict::Fail, "not a valid test file name")
        }
    };
    args.push("-C".into());
    args.push("-s".into());
    args.push(name.clone().into());

    let start = Instant::now();
    let companion = match companion_cmd {
        Some(argv) => match Companion::start(&argv, &dir) {
            Ok(c) => {
                args.push(c.pid().to_string().into());
                Some(c)
            }
            Err(e) => {
                let mut r = result(
                    &case.rel,
                    Verdict::Fail,
                    format!("cannot start companion program {base}.exe: {e}"),
                );
                r.seconds = start.elapsed().as_secs_f64();
                return r;
            }
        },
        None => None,
    };
    let outcome = exec::run(&opts.dtx, &args, &dir, opts.timeout);
    if let Some(c) = companion {
        c.stop();
    }
    let seconds = start.elapsed().as_secs_f64();

    let mut command = format!(
        "cd {} && {}",
        logic::shell_quote(&dir.to_string_lossy()),
        logic::shell_quote(&opts.dtx.to_string_lossy())
    );
    for a in &args {
        command.push(' ');
        command.push_str(&logic::shell_quote(&a.to_string_lossy()));
    }
    command.push_str(" </dev/null");

    let mut expected: Vec<String> = Vec::new();
    let verdict = judge(
        &kind,
        expect_code,
        tag.as_deref(),
        &outcome,
        &case.path,
        opts,
        &mut expected,
    );
    let (verdict, mut reason) = match verdict {
        Ok(()) => (Verdict::Pass, String::new()),
        Err(r) => (Verdict::Fail, r),
    };
    if verdict == Verdict::Fail && outcome.truncated {
        reason.push_str(" (output truncated)");
    }
    let detail = (verdict == Verdict::Fail).then(|| Detail {
        command,
        status: status_text(&outcome.status, &opts.timeout_label),
        stdout: outcome.stdout,
        stderr: outcome.stderr,
        expected,
    });
    TestResult {
        rel: case.rel.clone(),
        verdict,
        reason,
        seconds,
        detail,
    }
}

/// Compare a finished run against dtest.pl's expectations, in its order:
/// exit status, `<file>.out`, `<file>.err`, error tag, drop tag.  `notes`
/// collects expected-output text for the failure report.
fn judge(
    kind: &Kind,
    expect_code: i32,
    tag: Option<&str>,
    outcome: &exec::Outcome,
    path: &Path,
    opts: &Options,
    notes: &mut Vec<String>,
) -> Result<(), String> {
    let first_err = logic::first_line(&outcome.stderr);
    match &outcome.status {
        Status::Exited(c) if *c == expect_code => {}
        Status::Exited(c) => {
            let mut r = format!("exit {c}, expected {expect_code}");
            if !first_err.is_empty() {
                r.push_str(&format!("; stderr: {}", logic::show(first_err, 160)));
            }
            return Err(r);
        }
        other => return Err(status_text(other, &opts.timeout_label)),
    }
    for (suffix, actual, stream) in [
        ("out", &outcome.stdout, "stdout"),
        ("err", &outcome.stderr, "stderr"),
    ] {
        let mut reference = path.as_os_str().to_owned();
        reference.push(format!(".{suffix}"));
        let reference = PathBuf::from(reference);
        if !reference.is_file() {
            continue;
        }
        let want = match fs::read(&reference) {
            Ok(b) => logic::normalise_crlf(&b),
            Err(e) => return Err(format!("cannot read .{suffix} file: {e}")),
        };
        let got = logic::normalise_crlf(actual);
        if let Some(diff) = logic::first_difference(&want, &got) {
            notes.push(format!(
                "expected {stream} (.{suffix}, CRLF normalised):\n{}",
                String::from_utf8_lossy(&want)
            ));
            notes.push(format!(
                "diff (- expected, + actual):\n{}",
                logic::line_diff(&want, &got, 4_000_000)
            ));
            return Err(format!("{stream} differs from .{suffix} at {diff}"));
        }
    }
    match (kind, tag) {
        (Kind::Err(_), Some(t)) => {
            notes.push(format!(
                "expected: first stderr line matching /: \\[{t}\\] line \\d+:/"
            ));
            if !logic::errtag_matches(first_err, t) {
                let line = if outcome.stderr.is_empty() {
                    "<empty stderr>".to_string()
                } else {
                    logic::show(first_err, 200)
                };
                return Err(format!("stderr first line lacks [{t}]: {line}"));
            }
        }
        (Kind::Drp(_), Some(t)) => {
            notes.push(format!("expected: a stderr line containing \"[{t}] \""));
            if !logic::droptag_found(&outcome.stderr, t) {
                return Err(format!("no stderr line contains [{t}]"));
            }
        }
        _ => {}
    }
    Ok(())
}

fn report_name(rel: &str) -> String {
    let flat: String = rel
        .split(['/', '\\', ':'])
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("__");
    format!("{flat}.fail.txt")
}

fn write_report(dir: &Path, r: &TestResult) -> io::Result<()> {
    let mut text: Vec<u8> = Vec::new();
    let _ = writeln!(text, "test:    {}", r.rel);
    let _ = writeln!(text, "reason:  {}", r.reason);
    let _ = writeln!(text, "seconds: {:.3}", r.seconds);
    if let Some(d) = &r.detail {
        let _ = writeln!(text, "command: {}", d.command);
        let _ = writeln!(text, "status:  {}", d.status);
        for (label, data) in [("stdout", &d.stdout), ("stderr", &d.stderr)] {
            let _ = writeln!(text, "\n----- {label} ({} bytes) -----", data.len());
            text.extend_from_slice(data);
            if !data.is_empty() && !data.ends_with(b"\n") {
                text.extend_from_slice(b"\n[no newline at end]\n");
            }
        }
        for note in &d.expected {
            let _ = writeln!(text, "\n----- {note}");
        }
    }
    fs::write(dir.join(report_name(&r.rel)), text)
}

/// Remove reports left by an earlier run (only files this runner names).
fn clear_reports(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            let is_ours = e
                .file_name()
                .to_str()
                .is_some_and(|n| n.ends_with(".fail.txt"));
            if is_ours && e.path().is_file() {
                let _ = fs::remove_file(e.path());
            }
        }
    }
}

fn write_json(
    path: &Path,
    opts: &Options,
    results: &[TestResult],
    counts: (usize, usize, usize),
) -> io::Result<()> {
    let mut s = String::new();
    s.push_str("{\n");
    s.push_str(&format!(
        "  \"suite\": \"{}\",\n  \"dtx\": \"{}\",\n  \"timeout\": {},\n",
        logic::json_escape(&opts.suite.to_string_lossy()),
        logic::json_escape(&opts.dtx.to_string_lossy()),
        opts.timeout.as_secs_f64()
    ));
    s.push_str(&format!(
        "  \"passed\": {},\n  \"failed\": {},\n  \"skipped\": {},\n  \"tests\": [",
        counts.0, counts.1, counts.2
    ));
    for (i, r) in results.iter().enumerate() {
        s.push_str(if i == 0 { "\n" } else { ",\n" });
        s.push_str(&format!(
            "    {{\"path\": \"{}\", \"category\": \"{}\", \"status\": \"{}\", \"reason\": \"{}\", \"seconds\": {:.3}}}",
            logic::json_escape(&r.rel),
            logic::json_escape(&logic::category(&r.rel)),
            r.verdict.word().to_ascii_lowercase(),
            logic::json_escape(&r.reason),
            r.seconds
        ));
    }
    s.push_str(if results.is_empty() {
        "]\n}\n"
    } else {
        "\n  ]\n}\n"
    });
    fs::write(path, s)
}

fn print_line(out: &mut impl Write, r: &TestResult, verbose: bool) {
    let _ = match (verbose, r.verdict) {
        (true, _) if r.reason.is_empty() => writeln!(out, "{} {}", r.verdict.word(), r.rel),
        (true, _) => writeln!(out, "{} {} [{}]", r.verdict.word(), r.rel, r.reason),
        (false, Verdict::Fail) => writeln!(out, "FAIL {}: {}", r.rel, r.reason),
        (false, _) => Ok(()),
    };
    let _ = out.flush();
}

fn run(opts: Options) -> ExitCode {
    let cases = match select_cases(&opts) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("conformance: {e}");
            return ExitCode::from(2);
        }
    };
    if cases.is_empty() {
        eprintln!("conformance: no tests selected");
    }
    clear_reports(&opts.keep);
    let mut keep_ok = true;

    let total = cases.len();
    let cases = Arc::new(cases);
    let opts = Arc::new(opts);
    let next = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel::<(usize, TestResult)>();
    let workers = opts.jobs.min(total.max(1));
    for _ in 0..workers {
        let (cases, opts, next, tx) = (cases.clone(), opts.clone(), next.clone(), tx.clone());
        let spawned = thread::Builder::new().spawn(move || loop {
            let i = next.fetch_add(1, Ordering::SeqCst);
            if i >= cases.len() {
                break;
            }
            let r = run_case(&cases[i], &opts);
            if tx.send((i, r)).is_err() {
                break;
            }
        });
        if let Err(e) = spawned {
            eprintln!("conformance: cannot start worker thread: {e}");
        }
    }
    drop(tx);

    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut slots: Vec<Option<TestResult>> = (0..total).map(|_| None).collect();
    let mut printed = 0;
    for (i, mut r) in rx {
        if r.verdict == Verdict::Fail && keep_ok {
            let written = fs::create_dir_all(&opts.keep).and_then(|_| write_report(&opts.keep, &r));
            if let Err(e) = written {
                eprintln!(
                    "conformance: cannot write failure report into {}: {e}",
                    opts.keep.display()
                );
                keep_ok = false;
            }
        }
        r.detail = None;
        if i < total {
            slots[i] = Some(r);
        }
        while printed < total {
            match &slots[printed] {
                Some(r) => print_line(&mut out, r, opts.verbose),
                None => break,
            }
            printed += 1;
        }
    }
    // Any test without a result (a worker died) counts as failed.
    let results: Vec<TestResult> = slots
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            s.unwrap_or_else(|| {
                let r = result(&cases[i].rel, Verdict::Fail, "runner error: no result");
                print_line(&mut out, &r, opts.verbose);
                r
            })
        })
        .collect();

    let mut table: BTreeMap<String, [usize; 3]> = BTreeMap::new();
    let mut counts = (0, 0, 0);
    for r in &results {
        let row = table.entry(logic::category(&r.rel)).or_insert([0; 3]);
        match r.verdict {
            Verdict::Pass => {
                row[0] += 1;
                counts.0 += 1;
            }
            Verdict::Fail => {
                row[1] += 1;
                counts.1 += 1;
            }
            Verdict::Skip => {
                row[2] += 1;
                counts.2 += 1;
            }
        }
    }
    if !table.is_empty() {
        let width = table.keys().map(|k| k.len()).max().unwrap_or(0).max(8);
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:<width$}  {:>6}  {:>6}  {:>7}",
            "category", "passed", "failed", "skipped"
        );
        for (cat, row) in &table {
            let _ = writeln!(
                out,
                "{cat:<width$}  {:>6}  {:>6}  {:>7}",
                row[0], row[1], row[2]
            );
        }
        let _ = writeln!(out);
    }
    if let Some(path) = &opts.json {
        if let Err(e) = write_json(path, &opts, &results, counts) {
            eprintln!("conformance: cannot write {}: {e}", path.display());
        }
    }
    let _ = writeln!(
        out,
        "{} passed, {} failed, {} skipped",
        counts.0, counts.1, counts.2
    );
    let _ = out.flush();
    if counts.1 == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

pub fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let mut opts = match parse_args(&args) {
        Ok(Parsed::Run(o)) => *o,
        Ok(Parsed::Help) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("conformance: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if !opts.suite.is_dir() {
        eprintln!(
            "conformance: suite directory {} not found\n\n{USAGE}",
            opts.suite.display()
        );
        return ExitCode::from(2);
    }
    opts.suite = absolute(&opts.suite);
    // A dtx given with a directory part is made absolute, since each test runs
    // in its own directory; a bare name is looked up in PATH as usual.
    let dtx_path = Path::new(&opts.dtx);
    if dtx_path.components().count() > 1 || dtx_path.is_absolute() {
        if !dtx_path.is_file() {
            eprintln!(
                "conformance: dtx binary {} not found\n\n{USAGE}",
                dtx_path.display()
            );
            return ExitCode::from(2);
        }
        opts.dtx = absolute(dtx_path).into_os_string();
    }
    run(opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn parses_options() {
        let p = parse_args(&args(&[
            "-v",
            "-j4",
            "--timeout=2.5",
            "--list",
            "l.txt",
            "--filter",
            "aggs",
            "suite",
            "dtx",
        ]))
        .unwrap();
        let Parsed::Run(o) = p else {
            panic!("expected options")
        };
        assert!(o.verbose);
        assert_eq!(o.jobs, 4);
        assert_eq!(o.timeout, Duration::from_millis(2500));
        assert_eq!(o.timeout_label, "2.5");
        assert_eq!(o.list, Some(PathBuf::from("l.txt")));
        assert_eq!(o.filter.as_deref(), Some("aggs"));
        assert_eq!(o.suite, PathBuf::from("suite"));
        assert_eq!(o.keep, PathBuf::from("conformance-failures"));
        assert!(parse_args(&args(&["-j", "0", "s", "d"])).is_err());
        assert!(parse_args(&args(&["--timeout", "x", "s", "d"])).is_err());
        assert!(parse_args(&args(&["--bogus", "s", "d"])).is_err());
        assert!(parse_args(&args(&["s"])).is_err());
        assert!(parse_args(&args(&["--list"])).is_err());
        assert!(matches!(parse_args(&args(&["-h"])), Ok(Parsed::Help)));
    }

    #[test]
    fn report_names_are_flat() {
        assert_eq!(
            report_name("common/aggs/err.D_AGG_FUNC.bad.d"),
            "common__aggs__err.D_AGG_FUNC.bad.d.fail.txt"
        );
    }
}
