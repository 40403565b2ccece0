//! The executable manual: every fenced example of README.md and docs/*.md that shows a
//! command with its output (a block whose lines start with `$ dtx` or `$ VAR=... dtx`, the
//! output following until the next `$ ` or the block's end) is run and compared with what the
//! page shows. docs/dev/docs-examples.md states the rules; in short:
//!
//! - the command runs through `sh -c` in a folder holding every trace of `../shared/etl` under
//!   its own name (and the names the page gives them, `<!-- example: a.etl=tx_Process.etl -->`
//!   on the line before the block), with the built dtx first on the PATH;
//! - shown lines starting `dtx: ` are compared with stderr, the others with stdout, line by
//!   line with trailing blanks and blank last lines left out; a shown `...` stands for any
//!   number of lines; the `example:` comment may say `order=per-trace` (lines labelled by
//!   trace compared trace by trace, as parallel traces interleave), `lines=N` (a block that
//!   shows no output but its text says how many lines), `windows` (listed, not run: it needs
//!   live Windows) or `live-linux` (run where perf events and ptrace are available, else
//!   skipped saying why).
//!
//! Unix only (the commands are shell lines); skipped, saying so, without `../shared/etl`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One example: where it is, what runs, what the page shows, and how it is compared.
#[derive(Debug)]
struct Example {
    page: String,
    line: usize,
    /// The line of its block's fence: the commands of one block run in turn in one folder,
    /// so that a later one reads what an earlier one wrote.
    block: usize,
    command: String,
    shown: Vec<String>,
    rule: Rule,
}

#[derive(Debug, Default)]
struct Rule {
    aliases: Vec<(String, String)>,
    per_trace: bool,
    lines: Option<usize>,
    windows: bool,
    live_linux: bool,
    /// `numbers`: every run of digits stands for any number (machine-dependent counts).
    numbers: bool,
    /// `stderr-any`: stderr is not compared (the page says what may show there).
    stderr_any: bool,
    /// `not-windows`: what dtx prints off Windows (the page says what Windows prints).
    not_windows: bool,
    /// Words of the comment that are no rule (a typo would otherwise pass unseen).
    unknown: Vec<String>,
}

fn parse_rule(comment: &str) -> Rule {
    let mut r = Rule::default();
    for w in comment.split_whitespace() {
        match w {
            "order=per-trace" => r.per_trace = true,
            "windows" => r.windows = true,
            "live-linux" => r.live_linux = true,
            "numbers" => r.numbers = true,
            "stderr-any" => r.stderr_any = true,
            "not-windows" => r.not_windows = true,
            _ => {
                if let Some(n) = w.strip_prefix("lines=") {
                    match n.parse() {
                        Ok(n) => r.lines = Some(n),
                        Err(_) => r.unknown.push(w.to_string()),
                    }
                } else if let Some((a, b)) = w.split_once('=') {
                    r.aliases.push((a.to_string(), b.to_string()));
                } else {
                    r.unknown.push(w.to_string());
                }
            }
        }
    }
    r
}

/// The pages: README.md and every docs/*.md (docs/dev is for developers, and included too).
fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut v = vec![root.join("README.md")];
    for dir in [root.join("docs"), root.join("docs/dev")] {
        let mut more: Vec<PathBuf> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        more.sort();
        v.extend(more);
    }
    v
}

/// Whether a `$ ` line is a command the test runs: dtx's (perhaps after `VAR=value` words),
/// or `cc`, which builds an example's target from `examples/c/`.
fn is_dtx_command(s: &str) -> bool {
    s.split_whitespace()
        .find(|w| !w.contains('='))
        .is_some_and(|w| w == "dtx" || w == "cc")
}

fn examples_of(page: &Path) -> Vec<Example> {
    let text = std::fs::read_to_string(page).unwrap();
    let name = page
        .strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or(page)
        .to_string_lossy()
        .trim_start_matches('/')
        .to_string();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].trim_start().starts_with("```") {
            i += 1;
            continue;
        }
        // the comment on the line before the fence (blank lines between allowed)
        let comment = lines[..i]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| l.trim().strip_prefix("<!-- example:"))
            .map(|l| l.trim_end_matches("-->").to_string())
            .unwrap_or_default();
        let start = i;
        i += 1;
        let mut body = Vec::new();
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            body.push(lines[i]);
            i += 1;
        }
        i += 1;
        let mut j = 0;
        while j < body.len() {
            let Some(cmd) = body[j].strip_prefix("$ ").filter(|c| is_dtx_command(c)) else {
                j += 1;
                continue;
            };
            let at = start + 2 + j;
            let mut command = cmd.to_string();
            j += 1;
            // a command goes on after a line that ends with `\` or leaves a `'` open (a D
            // program over several lines, as a shell reads it pasted)
            loop {
                if j >= body.len() {
                    break;
                }
                if command.ends_with('\\') {
                    command.pop();
                    command.push(' ');
                    command.push_str(body[j].trim());
                } else if command.matches('\'').count() % 2 == 1 {
                    command.push('\n');
                    command.push_str(body[j]);
                } else {
                    break;
                }
                j += 1;
            }
            let mut shown = Vec::new();
            while j < body.len() && !body[j].starts_with("$ ") {
                shown.push(body[j].trim_end().to_string());
                j += 1;
            }
            while shown.last().is_some_and(|l| l.is_empty()) {
                shown.pop();
            }
            out.push(Example {
                page: name.clone(),
                line: at,
                block: start + 1,
                command,
                shown,
                rule: parse_rule(&comment),
            });
        }
    }
    out
}

fn all_examples() -> Vec<Example> {
    pages().iter().flat_map(|p| examples_of(p)).collect()
}

/// Whether `got` matches `shown`, where a shown `...` stands for any lines.
fn matches_lines(shown: &[String], got: &[String]) -> bool {
    match shown.split_first() {
        None => got.is_empty(),
        Some((first, rest)) if first.trim() == "..." => {
            (0..=got.len()).any(|k| matches_lines(rest, &got[k..]))
        }
        Some((first, rest)) => got
            .split_first()
            .is_some_and(|(g, grest)| g == first && matches_lines(rest, grest)),
    }
}

fn clean(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text.lines().map(|l| l.trim_end().to_string()).collect();
    while v.last().is_some_and(|l| l.is_empty()) {
        v.pop();
    }
    v
}

/// Lines grouped by their `label: ` (unlabelled lines under ""), each group in order.
fn by_trace(lines: &[String], labels: &[&str]) -> BTreeMap<String, Vec<String>> {
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for l in lines {
        let label = labels
            .iter()
            .find(|t| l.starts_with(&format!("{t}: ")))
            .map_or(String::new(), |t| t.to_string());
        m.entry(label).or_default().push(l.clone());
    }
    m
}

/// `l` with every run of digits as `N` and every run of blanks as one.
fn any_number(l: &str) -> String {
    let mut out = String::new();
    let mut prev = ' ';
    for c in l.trim_end().chars() {
        let c = if c.is_ascii_digit() { 'N' } else { c };
        if (c == 'N' && prev == 'N') || (c == ' ' && prev == ' ' && !out.is_empty()) {
            continue;
        }
        out.push(c);
        prev = c;
    }
    out
}

/// Why the example does not hold, or None.
fn check(ex: &Example, got_out: &str, got_err: &str) -> Option<String> {
    let mut out = clean(got_out);
    let mut shown_all = ex.shown.clone();
    if ex.rule.numbers {
        out = out.iter().map(|l| any_number(l)).collect();
        shown_all = shown_all.iter().map(|l| any_number(l)).collect();
    }
    let err: Vec<String> = clean(got_err)
        .into_iter()
        .filter(|l| l.starts_with("dtx: "))
        .collect();
    if let Some(n) = ex.rule.lines {
        let have = out.iter().filter(|l| !l.trim().is_empty()).count();
        return (have != n).then(|| format!("{have} lines where the page says {n}:\n{got_out}"));
    }
    let shown_err: Vec<String> = shown_all
        .iter()
        .filter(|l| l.starts_with("dtx: "))
        .cloned()
        .collect();
    let shown_out: Vec<String> = shown_all
        .iter()
        .filter(|l| !l.starts_with("dtx: "))
        .cloned()
        .collect();
    let ok_out = if ex.rule.per_trace {
        let labels: Vec<&str> = ex.rule.aliases.iter().map(|(a, _)| a.as_str()).collect();
        let s = by_trace(&shown_out, &labels);
        let g = by_trace(&out, &labels);
        s.len() == g.len()
            && s.iter()
                .all(|(k, v)| g.get(k).is_some_and(|gv| matches_lines(v, gv)))
    } else {
        matches_lines(&shown_out, &out)
    };
    let ok_err = ex.rule.stderr_any || matches_lines(&shown_err, &err);
    (!(ok_out && ok_err)).then(|| {
        format!(
            "the page shows:\n{}\ndtx printed (stdout):\n{got_out}\n(stderr):\n{got_err}",
            ex.shown.join("\n")
        )
    })
}

/// A folder for one example: `work/`, where it runs, holds every shared trace by name, the
/// checkout's scripts and the example's aliases; beside it `shared` is `../shared`, so that a
/// page may also name a trace as a checkout names it (`../shared/etl-win11/filtrace_etw.etl`).
fn trace_folder(traces: &Path, rule: &Rule) -> tempfile::TempDir {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("work");
    std::fs::create_dir(&dir).unwrap();
    if let Some(shared) = traces.parent() {
        let _ = std::os::unix::fs::symlink(shared, top.path().join("shared"));
    }
    for e in std::fs::read_dir(traces).unwrap().flatten() {
        let _ = std::os::unix::fs::symlink(e.path(), dir.join(e.file_name()));
    }
    // the checkout's scripts, as the pages name them (`-s dscripts/sched/oncpu.d`)
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for d in ["dscripts", "scripts", "examples"] {
        let _ = std::os::unix::fs::symlink(root.join(d), dir.join(d));
    }
    for (alias, real) in &rule.aliases {
        let _ = std::os::unix::fs::symlink(traces.join(real), dir.join(alias));
    }
    top
}

fn path_with_dtx() -> String {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_dtx"));
    let dir = bin.parent().unwrap().to_string_lossy().into_owned();
    format!("{dir}:{}", std::env::var("PATH").unwrap_or_default())
}

/// Whether this machine can run live Linux examples (perf events, ptrace): why not if not.
fn live_linux_missing() -> Option<String> {
    if !cfg!(target_os = "linux") {
        return Some("not Linux".into());
    }
    let probe = crate::support::cli::dtx(&[
        "-q",
        "-n",
        "syscall::openat:entry /pid == $target/ { @ = count(); }",
        "-c",
        "/bin/true",
    ]);
    (!probe.status.success()).then(|| String::from_utf8_lossy(&probe.stderr).trim().to_string())
}

#[test]
fn the_manual_shows_commands_with_their_output() {
    let all = all_examples();
    let windows: Vec<&Example> = all.iter().filter(|e| e.rule.windows).collect();
    eprintln!(
        "{} examples with output in README.md and docs/, {} Windows-only (listed, not run):",
        all.len(),
        windows.len()
    );
    for e in &windows {
        eprintln!("  windows: {}:{}: {}", e.page, e.line, e.command);
    }
    assert!(all.len() >= 30, "{all:#?}");
    let unknown: Vec<String> = all
        .iter()
        .filter(|e| !e.rule.unknown.is_empty())
        .map(|e| format!("{}:{}: {:?}", e.page, e.line, e.rule.unknown))
        .collect();
    assert!(unknown.is_empty(), "words that are no rule: {unknown:?}");
    // every page with such a block is read
    for page in [
        "docs/many-traces.md",
        "docs/trace-threads.md",
        "docs/live-linux.md",
    ] {
        assert!(
            all.iter().any(|e| e.page == page),
            "no example found in {page}"
        );
    }
}

#[test]
fn every_example_of_the_manual_gives_what_it_shows() {
    let Some(traces) = crate::support::etl::folder("etl", "tx_Process.etl") else {
        return;
    };
    let live = std::cell::OnceCell::new();
    let mut failures = Vec::new();
    let mut ran = 0;
    let mut folder: Option<((String, usize), tempfile::TempDir)> = None;
    for ex in all_examples() {
        if ex.rule.windows || (ex.rule.not_windows && cfg!(windows)) {
            continue;
        }
        if ex.rule.live_linux {
            if let Some(why) = live.get_or_init(live_linux_missing) {
                eprintln!("skipped ({why}): {}:{}", ex.page, ex.line);
                continue;
            }
        }
        let key = (ex.page.clone(), ex.block);
        if folder.as_ref().is_none_or(|(k, _)| *k != key) {
            folder = Some((key, trace_folder(&traces, &ex.rule)));
        }
        let Some((_, dir)) = &folder else { continue };
        let Some((out, err)) = run_bounded(&ex.command, &dir.path().join("work")) else {
            failures.push(format!(
                "{}:{}: {}\ndid not end within {} s (an example must run to its end)",
                ex.page,
                ex.line,
                ex.command,
                EXAMPLE_LIMIT.as_secs()
            ));
            continue;
        };
        ran += 1;
        let (out, err) = (String::from_utf8_lossy(&out), String::from_utf8_lossy(&err));
        match check(&ex, &out, &err) {
            Some(why) => failures.push(format!("{}:{}: {}\n{why}", ex.page, ex.line, ex.command)),
            None => eprintln!("ok: {}:{}", ex.page, ex.line),
        }
    }
    eprintln!("{ran} examples run");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_rules_compare_as_they_say() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert!(matches_lines(
        &s(&["a", "...", "d"]),
        &s(&["a", "b", "c", "d"])
    ));
    assert!(!matches_lines(&s(&["a", "...", "d"]), &s(&["a", "b", "c"])));
    assert!(!matches_lines(&s(&["a"]), &s(&["a", "b"])));
    let g = by_trace(
        &s(&["x", "a.etl: 1", "b.etl: 1", "a.etl: 2"]),
        &["a.etl", "b.etl"],
    );
    assert_eq!(g["a.etl"], s(&["a.etl: 1", "a.etl: 2"]));
    assert_eq!(g[""], s(&["x"]));
}

/// How long one example may run: a page's example runs to its end (a command that serves or
/// traces until interrupted is shown without `$ `).
const EXAMPLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Runs `command` through `sh -c` in `dir` in a process group of its own: its stdout and
/// stderr, or `None` (the whole group killed) when it has not ended within [`EXAMPLE_LIMIT`].
fn run_bounded(command: &str, dir: &std::path::Path) -> Option<(Vec<u8>, Vec<u8>)> {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .env("PATH", path_with_dtx())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("start sh");
    let (out, err) = crate::support::cli::read_pipes(&mut child);
    let started = std::time::Instant::now();
    loop {
        if child.try_wait().expect("wait for sh").is_some() {
            break;
        }
        if started.elapsed() > EXAMPLE_LIMIT {
            // SAFETY: kill(2) of the example's own process group (its pid, set above)
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            let _ = (out.join(), err.join());
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Some((
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    ))
}
