//! The architecture page (docs/dev/architecture.md), executable, as rust-analyzer's tidy tests
//! keep its own: the rules the page states are read off the sources here, outside test code
//! (test modules, `#[cfg(test)]` items, tests/, benches/), comments and string literals.
//!
//! - the dependency order: every `crate::` path that reaches a module later in the page's order
//!   is an edge listed in the page's table of exceptions, and every listed edge still exists;
//! - every line dtx says on its own goes through `output::stderr`: no `eprintln!`/`eprint!`
//!   elsewhere;
//! - no `.unwrap()`;
//! - every `unsafe` block and `unsafe impl` says why it is sound in a `SAFETY:` comment;
//! - every `unsafe fn` has a doc comment (what its caller must uphold);
//! - `src/serve` reads the engine's session handle only, never a source.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A source file as the rules read it: its lines with comments and the insides of string and
/// character literals blanked (so that a `crate::x` or `unwrap()` in a message is no code),
/// and the lines of test code blanked too.
struct Code {
    /// The original lines (for the comments the rules look for).
    lines: Vec<String>,
    /// The code of each line, blanked as above.
    code: Vec<String>,
}

/// Blanks comments and literal contents, line by line (a block comment or a string may span
/// lines).
fn strip(text: &str) -> Vec<String> {
    #[derive(PartialEq)]
    enum St {
        Code,
        Block(u32),
        Str,
        Raw(usize),
    }
    let mut st = St::Code;
    let mut out = Vec::new();
    for line in text.lines() {
        let c: Vec<char> = line.chars().collect();
        let mut s = String::new();
        let mut i = 0;
        while i < c.len() {
            match st {
                St::Block(depth) => {
                    if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                        st = if depth == 1 {
                            St::Code
                        } else {
                            St::Block(depth - 1)
                        };
                        i += 2;
                    } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                        st = St::Block(depth + 1);
                        i += 2;
                    } else {
                        i += 1;
                    }
                    s.push(' ');
                }
                St::Str => {
                    if c[i] == '\\' {
                        i += 2;
                    } else {
                        if c[i] == '"' {
                            st = St::Code;
                            s.push('"');
                        }
                        i += 1;
                    }
                }
                St::Raw(hashes) => {
                    let closes = c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#'));
                    if closes {
                        st = St::Code;
                        s.push('"');
                        i += 1 + hashes;
                    } else {
                        i += 1;
                    }
                }
                St::Code => {
                    let next = c.get(i + 1).copied();
                    if c[i] == '/' && next == Some('/') {
                        break;
                    } else if c[i] == '/' && next == Some('*') {
                        st = St::Block(1);
                        i += 2;
                    } else if c[i] == '"' {
                        st = St::Str;
                        s.push('"');
                        i += 1;
                    } else if c[i] == 'r'
                        && (next == Some('"') || next == Some('#'))
                        && !c[..i]
                            .last()
                            .is_some_and(|p| p.is_alphanumeric() || *p == '_')
                    {
                        let hashes = c[i + 1..].iter().take_while(|&&x| x == '#').count();
                        if c.get(i + 1 + hashes) == Some(&'"') {
                            st = St::Raw(hashes);
                            s.push('"');
                            i += 2 + hashes;
                        } else {
                            s.push(c[i]);
                            i += 1;
                        }
                    } else if c[i] == '\'' {
                        // a character literal ('x', '\n', '\u{..}'), else a lifetime
                        let end = if next == Some('\\') {
                            c[i + 2..]
                                .iter()
                                .position(|&x| x == '\'')
                                .map(|p| i + 2 + p)
                        } else if c.get(i + 2) == Some(&'\'') {
                            Some(i + 2)
                        } else {
                            None
                        };
                        match end {
                            Some(e) => {
                                s.push_str("' '");
                                i = e + 1;
                            }
                            None => {
                                s.push('\'');
                                i += 1;
                            }
                        }
                    } else {
                        s.push(c[i]);
                        i += 1;
                    }
                }
            }
        }
        out.push(s);
    }
    out
}

/// Blanks test code: from a `#[cfg(test)]` before `mod name {` to the end of the file (clippy's
/// `items_after_test_module` keeps test modules last), and any other `#[cfg(test)]` item to its
/// closing brace or semicolon.
fn blank_tests(code: &mut [String]) {
    let mut i = 0;
    while i < code.len() {
        if !is_test_cfg(&code[i]) {
            i += 1;
            continue;
        }
        // the item the attribute is on (after any further attributes)
        let mut j = i + 1;
        while j < code.len() && code[j].trim_start().starts_with("#[") {
            j += 1;
        }
        let item = code
            .get(j)
            .map(|l| l.trim().to_string())
            .unwrap_or_default();
        let is_mod_block =
            (item.starts_with("mod ") || item.starts_with("pub mod ")) && item.ends_with('{');
        if is_mod_block {
            for l in &mut code[i..] {
                l.clear();
            }
            return;
        }
        // to the end of the item: braces balanced, or a `;` before any brace
        let mut depth = 0i32;
        let mut seen_brace = false;
        let mut k = i;
        'item: while k < code.len() {
            for ch in code[k].chars() {
                match ch {
                    '{' => {
                        depth += 1;
                        seen_brace = true;
                    }
                    '}' => depth -= 1,
                    ';' if !seen_brace && k >= j => break 'item,
                    _ => {}
                }
            }
            if seen_brace && depth <= 0 {
                break;
            }
            k += 1;
        }
        let last = k.min(code.len() - 1);
        for l in &mut code[i..=last] {
            l.clear();
        }
        i = k + 1;
    }
}

/// `#[cfg(test)]`, `#[cfg(all(test, unix))]`: an attribute that compiles the item for tests
/// only.
fn is_test_cfg(line: &str) -> bool {
    let l = line.trim();
    l == "#[cfg(test)]"
        || (l.starts_with("#[cfg(all(") && l.contains("test") && !l.contains("not(test"))
}

/// Files that are test modules as a whole: `#[cfg(test)] mod name;` names `name.rs` or
/// `name/mod.rs` beside the declaring file.
fn test_files(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if !is_test_cfg(l) {
                continue;
            }
            let Some(next) = lines.get(i + 1).map(|l| l.trim()) else {
                continue;
            };
            let Some(name) = next
                .strip_prefix("mod ")
                .or_else(|| next.strip_prefix("pub mod "))
                .or_else(|| next.strip_prefix("pub(crate) mod "))
                .and_then(|n| n.strip_suffix(';'))
            else {
                continue;
            };
            let dir = match f.file_name().and_then(|n| n.to_str()) {
                Some("mod.rs" | "lib.rs" | "main.rs") => f.parent().unwrap().to_path_buf(),
                _ => f.with_extension(""),
            };
            out.insert(dir.join(format!("{name}.rs")));
            out.insert(dir.join(name).join("mod.rs"));
        }
    }
    out
}

/// Every file of `src/` that belongs to the library's modules (not `lib.rs`/`main.rs`, not
/// `src/bin`, not test files), with its code.
fn sources() -> Vec<(PathBuf, Code)> {
    let src = root().join("src");
    let files = rust_files(&src);
    let tests = test_files(&files);
    files
        .into_iter()
        .filter(|f| !tests.contains(f))
        .filter(|f| !f.starts_with(src.join("bin")))
        .filter(|f| f.parent() != Some(&src) || module_of(f).is_some())
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            let mut code = strip(&text);
            blank_tests(&mut code);
            let lines = text.lines().map(str::to_string).collect();
            (f, Code { lines, code })
        })
        .collect()
}

/// The top module of a file under `src/` (`src/engine/many.rs` → `engine`, `src/fasthash.rs` →
/// `fasthash`); `None` for the crate roots.
fn module_of(f: &Path) -> Option<String> {
    let rel = f.strip_prefix(root().join("src")).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    match first {
        "lib.rs" | "main.rs" => None,
        f if f.ends_with(".rs") => Some(f.trim_end_matches(".rs").to_string()),
        d => Some(d.to_string()),
    }
}

fn rel(f: &Path) -> String {
    f.strip_prefix(root()).unwrap_or(f).display().to_string()
}

/// The page's order of modules, lowest first, and its table of edges against the order.
fn page() -> (Vec<String>, BTreeSet<(String, String)>) {
    let text = std::fs::read_to_string(root().join("docs/dev/architecture.md")).unwrap();
    let start = text
        .find("The intended order, lowest first:")
        .expect("the page states the order");
    let sentence = &text[start..text[start..].find(". ").map_or(text.len(), |e| start + e)];
    let order: Vec<String> = sentence
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    let mut table = BTreeSet::new();
    for l in text[start..].lines() {
        let Some(cell) = l.strip_prefix("| `") else {
            continue;
        };
        let Some((from, rest)) = cell.split_once("` → `") else {
            continue;
        };
        let Some((to, _)) = rest.split_once('`') else {
            continue;
        };
        table.insert((from.to_string(), to.to_string()));
    }
    (order, table)
}

/// The modules a line of code names through `crate::` (with `use crate::{a, b}` groups).
fn crate_paths(code: &str, out: &mut Vec<String>) {
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + 7..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            for part in group.split(['}'].as_ref()).next().unwrap_or("").split(',') {
                let name: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.push(name);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push(name);
        }
    }
}

#[test]
fn tidy_dependencies_follow_the_pages_order() {
    let (order, table) = page();
    assert!(order.len() > 10, "the page's order: {order:?}");
    let rank: BTreeMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();
    // edge → the files that make it
    let mut against: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    let mut unknown = BTreeSet::new();
    for (f, code) in sources() {
        let Some(from) = module_of(&f) else { continue };
        let Some(&r_from) = rank.get(from.as_str()) else {
            unknown.insert(from);
            continue;
        };
        let mut names = Vec::new();
        for l in &code.code {
            crate_paths(l, &mut names);
        }
        for to in names {
            match rank.get(to.as_str()) {
                Some(&r_to) if r_to > r_from => {
                    against
                        .entry((from.clone(), to.clone()))
                        .or_default()
                        .insert(rel(&f));
                }
                _ => {}
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "modules the page's order does not list: {unknown:?}"
    );
    let unlisted: Vec<String> = against
        .iter()
        .filter(|(e, _)| !table.contains(e))
        .map(|((a, b), files)| format!("{a} → {b} in {files:?}"))
        .collect();
    assert!(
        unlisted.is_empty(),
        "edges against docs/dev/architecture.md's order, not in its table:\n{}",
        unlisted.join("\n")
    );
    let stale: Vec<String> = table
        .iter()
        .filter(|e| !against.contains_key(*e))
        .map(|(a, b)| format!("{a} → {b}"))
        .collect();
    assert!(
        stale.is_empty(),
        "the page's table lists edges the code no longer has (move them to 'Undone so far'): {stale:?}"
    );
}

/// The BPF back end reads the IR as the VM does and is checked against it, never through
/// it: `bpf` names only the modules its page entry lists, and only the perf source (its
/// loader, `sources/perf/`) names `bpf`.
#[test]
fn tidy_the_bpf_back_end_reads_ir_and_hands_programs_to_sources_perf() {
    const BPF_MAY_NAME: [&str; 4] = ["ir", "lang", "providers", "bpf"];
    let mut bad = Vec::new();
    for (f, code) in sources() {
        let Some(m) = module_of(&f) else { continue };
        let mut names = Vec::new();
        for l in &code.code {
            crate_paths(l, &mut names);
        }
        // one separator on every OS (Windows' paths use `\`)
        let path = rel(&f).replace('\\', "/");
        for n in names {
            if m == "bpf" && !BPF_MAY_NAME.contains(&n.as_str()) {
                bad.push(format!("{path} names {n}"));
            }
            if m != "bpf" && n == "bpf" && !path.starts_with("src/sources/perf/") {
                bad.push(format!("{path} names bpf"));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:?}");
}

/// A module's siblings it names: `super::x` from a file (or `super::super::x` from a folder's
/// `mod.rs`... not followed: only direct siblings), and `crate::<folder>::x`.
fn sibling_edges() -> BTreeMap<(String, String), BTreeSet<String>> {
    let src = root().join("src");
    let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (f, code) in sources() {
        // the module's own name and folder: `a/b/c.rs` is c in a/b; `a/b/mod.rs` is b in a
        let rel_path = f.strip_prefix(&src).unwrap().to_path_buf();
        let (folder, me) = if f.file_name().is_some_and(|n| n == "mod.rs") {
            let dir = rel_path.parent().unwrap();
            (
                dir.parent().unwrap().to_path_buf(),
                dir.file_name().unwrap().to_string_lossy().into_owned(),
            )
        } else {
            (
                rel_path.parent().unwrap().to_path_buf(),
                f.file_stem().unwrap().to_string_lossy().into_owned(),
            )
        };
        if folder.as_os_str().is_empty() {
            continue; // top-level modules: the order above covers them
        }
        let siblings: BTreeSet<String> = std::fs::read_dir(src.join(&folder))
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter_map(|p| {
                if p.is_dir() {
                    p.file_name().map(|n| n.to_string_lossy().into_owned())
                } else if p.extension().is_some_and(|x| x == "rs") {
                    p.file_stem().map(|n| n.to_string_lossy().into_owned())
                } else {
                    None
                }
            })
            .filter(|n| n != "mod" && *n != me)
            .collect();
        let crate_prefix = format!(
            "crate::{}::",
            folder.to_string_lossy().replace(['/', '\\'], "::")
        );
        // from a folder's mod.rs, `super::` is the folder above: siblings are reached so too
        let prefixes = ["super::".to_string(), crate_prefix];
        for l in &code.code {
            for pre in &prefixes {
                let mut rest = l.as_str();
                while let Some(i) = rest.find(pre.as_str()) {
                    let before = rest[..i].chars().last();
                    rest = &rest[i + pre.len()..];
                    if pre == "super::" && before.is_some_and(|c| c == ':') {
                        continue; // super::super::
                    }
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if siblings.contains(&name) {
                        let a = format!("{}/{me}", folder.display());
                        let b = format!("{}/{name}", folder.display());
                        out.entry((a, b)).or_default().insert(rel(&f));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn tidy_no_circles_inside_folders() {
    let text = std::fs::read_to_string(root().join("docs/dev/architecture.md")).unwrap();
    let edges = sibling_edges();
    let mut circles = BTreeSet::new();
    for (a, b) in edges.keys() {
        if a < b && edges.contains_key(&(b.clone(), a.clone())) {
            circles.insert(format!("{a} ↔ {b}"));
        }
    }
    // the page names each circle still to undo as `a` ↔ `b`
    let unlisted: Vec<&String> = circles
        .iter()
        .filter(|c| {
            let (a, b) = c.split_once(" ↔ ").unwrap();
            !text.contains(&format!("`{a}` ↔ `{b}`")) && !text.contains(&format!("`{b}` ↔ `{a}`"))
        })
        .collect();
    assert!(
        unlisted.is_empty(),
        "modules of one folder that import each other, not listed in docs/dev/architecture.md: {unlisted:?}"
    );
}

/// Lines of code (outside test code) for which `bad` holds, as `file:line: text`.
fn offending(bad: impl Fn(&Code, usize) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    for (f, code) in sources() {
        for i in 0..code.code.len() {
            if bad(&code, i) {
                out.push(format!("{}:{}: {}", rel(&f), i + 1, code.lines[i].trim()));
            }
        }
    }
    out
}

/// Serving (`src/serve`) sits beside `cli` and `tui` over the engine's session handle: it
/// reads snapshots and never reaches into what produces them.
#[test]
fn tidy_serving_reads_the_session_only() {
    const NEVER: &[&str] = &["sources", "providers", "vm", "etw", "symbols"];
    // the exporter; the MCP server opens a trace and its catalog for a session
    // (tidy_serving_keeps_stdout_for_the_protocol holds it to sources::etl)
    let serve = root().join("src/serve/metrics");
    let mut bad = Vec::new();
    for (f, code) in sources() {
        if !f.starts_with(&serve) {
            continue;
        }
        for (i, l) in code.code.iter().enumerate() {
            let mut names = Vec::new();
            crate_paths(l, &mut names);
            for n in names.iter().filter(|n| NEVER.contains(&n.as_str())) {
                bad.push(format!(
                    "{}:{}: crate::{n}: {}",
                    rel(&f),
                    i + 1,
                    code.lines[i].trim()
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "src/serve reaches past the session handle (docs/dev/architecture.md):\n{}",
        bad.join("\n")
    );
}

#[test]
fn tidy_what_dtx_says_goes_through_output_stderr() {
    let stderr_rs = root().join("src/output/stderr.rs");
    let mut bad = Vec::new();
    for (f, code) in sources() {
        if f == stderr_rs {
            continue;
        }
        for (i, l) in code.code.iter().enumerate() {
            if l.contains("eprintln!") || l.contains("eprint!") {
                bad.push(format!("{}:{}: {}", rel(&f), i + 1, code.lines[i].trim()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "eprintln!/eprint! outside output::stderr (use output::stderr::write or say):\n{}",
        bad.join("\n")
    );
}

/// The MCP server's stdout carries protocol messages only (MCP's stdio transport): nothing in
/// `src/serve/` prints, and only the server's loop (`serve/mcp/mod.rs`) holds stdout; and
/// serving reaches no source but `sources::etl`, to open a trace for a session.
#[test]
fn tidy_serving_keeps_stdout_for_the_protocol() {
    let serve = root().join("src/serve");
    let server_loop = serve.join("mcp/mod.rs");
    let exporter = serve.join("metrics/mod.rs");
    let mut bad = Vec::new();
    for (f, code) in sources() {
        if !f.starts_with(&serve) {
            continue;
        }
        for (i, l) in code.code.iter().enumerate() {
            let prints = l.contains("println!") || l.contains("print!(");
            // the exporter's program output is dtx's ordinary output, on stdout as any run's
            let stdout = l.contains("stdout()") && f != server_loop && f != exporter;
            let source = l.contains("crate::sources::") && !l.contains("crate::sources::etl::");
            if prints || stdout || source {
                bad.push(format!("{}:{}: {}", rel(&f), i + 1, code.lines[i].trim()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "src/serve prints, holds stdout outside the MCP loop, or reaches a source:\n{}",
        bad.join("\n")
    );
}

#[test]
fn tidy_no_unwrap_outside_tests() {
    let bad = offending(|c, i| c.code[i].contains(".unwrap()"));
    assert!(
        bad.is_empty(),
        ".unwrap() outside tests:\n{}",
        bad.join("\n")
    );
}

/// Whether a `SAFETY:` comment is on line `i` or in the comment lines just above it (attributes
/// and further comment lines between them allowed).
fn has_safety_comment(c: &Code, i: usize) -> bool {
    if c.lines[i].contains("SAFETY:") {
        return true;
    }
    let mut j = i;
    while j > 0 {
        j -= 1;
        let l = c.lines[j].trim();
        if l.contains("SAFETY:") {
            return true;
        }
        // a run of statements with unsafe blocks shares the comment above the run
        let comment_or_attr = l.starts_with("//")
            || l.starts_with("#[")
            || l.is_empty()
            || c.code[j].contains("unsafe");
        // a statement the unsafe block is part of may start lines above (`let x = match
        // unsafe {`, a call whose argument is the block): look through the code of the
        // statement too, but not past the end of the one before it
        let in_statement = !l.ends_with(';') && !l.ends_with('}') && !l.ends_with('{');
        if !(comment_or_attr || in_statement) || i - j > 12 {
            return false;
        }
    }
    false
}

#[test]
fn tidy_unsafe_blocks_say_why_they_are_sound() {
    let bad = offending(|c, i| {
        let l = &c.code[i];
        let block = l.contains("unsafe {") || l.trim_end().ends_with("unsafe");
        let imp = l.contains("unsafe impl");
        (block || imp) && !has_safety_comment(c, i)
    });
    assert!(
        bad.is_empty(),
        "unsafe without a SAFETY: comment:\n{}",
        bad.join("\n")
    );
}

#[test]
fn tidy_unsafe_fns_are_documented() {
    let bad = offending(|c, i| {
        let l = &c.code[i];
        let is_unsafe_fn = l.contains("unsafe fn ")
            || (l.contains("unsafe extern") && l.contains(" fn ") && !l.contains("type "));
        if !is_unsafe_fn || l.contains('=') || l.contains("(unsafe") {
            return false;
        }
        // a doc comment above, past attributes
        let mut j = i;
        while j > 0 {
            j -= 1;
            let above = c.lines[j].trim();
            if above.starts_with("///") {
                return false;
            }
            if !above.starts_with("#[") {
                return true;
            }
        }
        true
    });
    assert!(
        bad.is_empty(),
        "unsafe fn without a doc comment (say what the caller must uphold):\n{}",
        bad.join("\n")
    );
}

#[test]
fn tidy_the_stripper_reads_code_only() {
    let lines = strip(
        "let a = \"crate::engine x.unwrap()\"; // crate::tui\nlet b = r#\"eprintln!(\"x\")\"#; let c = '{';\n/* crate::cli\n */ let d = x.unwrap();",
    );
    assert!(!lines[0].contains("crate::"), "{lines:?}");
    assert!(!lines[1].contains("eprintln"), "{lines:?}");
    assert!(!lines[1].contains('{'), "{lines:?}");
    assert!(!lines[2].contains("crate::"), "{lines:?}");
    assert!(lines[3].contains(".unwrap()"), "{lines:?}");
    let mut names = Vec::new();
    crate_paths(
        "use crate::{agg, output::stderr}; crate::vm::Vm",
        &mut names,
    );
    assert_eq!(names, ["agg", "output", "vm"]);
    let mut code: Vec<String> = [
        "fn a() {}",
        "#[cfg(test)]",
        "fn t() {",
        "x.unwrap();",
        "}",
        "fn b() {}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    blank_tests(&mut code);
    assert_eq!(code, ["fn a() {}", "", "", "", "", "fn b() {}"]);
}
