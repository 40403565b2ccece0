//! Error paths of the `dtx` command line, run as a real process: every failure prints exactly
//! one `dtx: ...` line on stderr (plus the usage text for usage errors), never a panic, and exits
//! with dtrace's status (1 for failures, 2 for usage errors).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::cli;
use cli::{dtx, Dtx};

/// A directory under the system temp dir: its path, and the folder itself (`tempfile`'s, held
/// only to be removed when dropped).
struct TempDir(PathBuf, #[allow(dead_code)] tempfile::TempDir);

impl TempDir {
    fn new(label: &str) -> TempDir {
        let dir = (tempfile::Builder::new().prefix(&format!("dtx-cli-{label}-")))
            .tempdir()
            .expect("create temp dir");
        TempDir(dir.path().to_path_buf(), dir)
    }

    fn write(&self, name: &str, data: impl AsRef<[u8]>) -> PathBuf {
        let p = self.0.join(name);
        fs::write(&p, data).expect("write temp file");
        p
    }
}

/// Runs dtx with `args` in `dir`, stdin closed.
fn dtx_in(dir: &Path, args: &[&str]) -> Output {
    Dtx::new(args).dir(dir).output()
}

fn stderr_of(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout_of(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Asserts a clean failure: the given exit status, nothing on stdout, and stderr holding
/// exactly one newline-terminated line that starts with `dtx: `. Returns that line.
fn one_error_line(o: &Output, status: i32) -> String {
    let err = stderr_of(o);
    assert!(!err.contains("panicked"), "dtx panicked:\n{err}");
    assert_eq!(
        o.status.code(),
        Some(status),
        "exit status (stderr: {err:?})"
    );
    assert!(o.stdout.is_empty(), "unexpected stdout: {:?}", stdout_of(o));
    assert!(
        err.ends_with('\n'),
        "stderr not newline-terminated: {err:?}"
    );
    let line = &err[..err.len() - 1];
    assert!(!line.contains('\n'), "more than one stderr line: {err:?}");
    assert!(
        line.starts_with("dtx: "),
        "stderr line lacks `dtx: `: {err:?}"
    );
    line.to_string()
}

/// Asserts success: status 0 and an empty stderr.
fn success(o: &Output) {
    assert_eq!(
        o.status.code(),
        Some(0),
        "expected success; stderr: {}",
        stderr_of(o)
    );
    assert!(o.stderr.is_empty(), "unexpected stderr: {}", stderr_of(o));
}

/// Splits `[D_TAG] line N: message` (the part after `dtx: failed to compile script F: `).
fn split_tagged(rest: &str) -> (String, Option<u32>, String) {
    let rest = rest
        .strip_prefix('[')
        .unwrap_or_else(|| panic!("no [D_TAG] in {rest:?}"));
    let (tag, rest) = rest.split_once("] ").expect("closing ] of the tag");
    assert!(
        tag.starts_with("D_")
            && tag.len() > 2
            && tag
                .bytes()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_'),
        "malformed tag {tag:?}"
    );
    if let Some(r) = rest.strip_prefix("line ") {
        let (n, msg) = r.split_once(": ").expect("`line N: `");
        let n: u32 = n.parse().expect("line number");
        (tag.to_string(), Some(n), msg.to_string())
    } else {
        (tag.to_string(), None, rest.to_string())
    }
}

const SYNTAX_ERROR_SCRIPT: &str = "BEGIN\n{\n\tx = ;\n}\n";

#[test]
fn syntax_error_in_script_with_errtags() {
    let t = TempDir::new("syn");
    t.write("syn.d", SYNTAX_ERROR_SCRIPT);
    let o = dtx_in(&t.0, &["-xerrtags", "-e", "-s", "syn.d"]);
    let line = one_error_line(&o, 1);
    assert_eq!(
        line,
        "dtx: failed to compile script syn.d: [D_SYNTAX] line 3: syntax error near \";\""
    );
}

#[test]
fn syntax_error_in_script_without_errtags() {
    let t = TempDir::new("syn2");
    t.write("syn.d", SYNTAX_ERROR_SCRIPT);
    let o = dtx_in(&t.0, &["-e", "-s", "syn.d"]);
    let line = one_error_line(&o, 1);
    assert_eq!(
        line,
        "dtx: failed to compile script syn.d: line 3: syntax error near \";\""
    );
}

#[test]
fn syntax_error_line_counts_leading_comments_and_blank_lines() {
    let t = TempDir::new("synline");
    let mut text = String::from("/*\n * header comment\n */\n\n");
    for i in 0..20 {
        text.push_str(&format!("BEGIN {{ v{i} = {i}; }}\n"));
    }
    text.push_str("END { trace(1) trace(2); }\n"); // line 25
    t.write("late.d", &text);
    let o = dtx_in(&t.0, &["-xerrtags", "-e", "-s", "late.d"]);
    let line = one_error_line(&o, 1);
    let rest = line
        .strip_prefix("dtx: failed to compile script late.d: ")
        .expect("script prefix");
    let (tag, n, msg) = split_tagged(rest);
    assert_eq!(tag, "D_SYNTAX");
    assert_eq!(n, Some(25));
    assert_eq!(msg, "syntax error near \"trace\"");
}

#[test]
fn syntax_error_in_probe_specifier_has_no_line() {
    let o = dtx(&["-e", "-n", "BEGIN { x = ; }"]);
    let line = one_error_line(&o, 1);
    assert_eq!(
        line,
        "dtx: invalid probe specifier BEGIN { x = ; }: syntax error near \";\""
    );
    let o = dtx(&["-xerrtags", "-e", "-n", "BEGIN { x = ; }"]);
    let line = one_error_line(&o, 1);
    let rest = line
        .strip_prefix("dtx: invalid probe specifier BEGIN { x = ; }: ")
        .expect("probe specifier prefix");
    let (tag, n, msg) = split_tagged(rest);
    assert_eq!(tag, "D_SYNTAX");
    assert_eq!(n, None, "-n programs carry no line number");
    assert_eq!(msg, "syntax error near \";\"");
}

#[test]
fn cast_to_unknown_type_name() {
    // An unknown name is an identifier, not a type (the lexer hack), so `(foo_t)1` is a
    // parenthesised expression followed by a stray constant: a syntax error at the `1`.
    let o = dtx(&["-xerrtags", "-e", "-n", "BEGIN { x = (foo_t)1; }"]);
    let line = one_error_line(&o, 1);
    assert_eq!(
        line,
        "dtx: invalid probe specifier BEGIN { x = (foo_t)1; }: [D_SYNTAX] syntax error near \"1\""
    );

    let t = TempDir::new("cast");
    t.write("cast.d", "BEGIN\n{\n\tx = (bogus_t)1;\n}\n");
    let o = dtx_in(&t.0, &["-xerrtags", "-e", "-s", "cast.d"]);
    let line = one_error_line(&o, 1);
    let rest = line
        .strip_prefix("dtx: failed to compile script cast.d: ")
        .expect("script prefix");
    let (tag, n, msg) = split_tagged(rest);
    assert_eq!(tag, "D_SYNTAX");
    assert_eq!(n, Some(3));
    assert_eq!(msg, "syntax error near \"1\"");
}

#[test]
fn cast_to_undefined_struct() {
    let t = TempDir::new("caststruct");
    t.write("sc.d", "BEGIN\n{\n\tx = (struct nosuch)0;\n}\n");
    let o = dtx_in(&t.0, &["-xerrtags", "-e", "-s", "sc.d"]);
    let line = one_error_line(&o, 1);
    assert_eq!(
        line,
        "dtx: failed to compile script sc.d: [D_CAST_INVAL] line 3: invalid cast expression: \"int\" to \"struct nosuch\""
    );
}

#[test]
fn unterminated_string_literal() {
    let t = TempDir::new("str");
    t.write("str.d", "BEGIN\n{\n\tx = \"abc\n\";\n}\n");
    let o = dtx_in(&t.0, &["-xerrtags", "-e", "-s", "str.d"]);
    let line = one_error_line(&o, 1);
    assert_eq!(
        line,
        "dtx: failed to compile script str.d: [D_STR_NL] line 3: newline encountered in string literal"
    );
}

/// xorshift64* — deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// 1 MB of garbage: random bytes, with runs of NULs, invalid UTF-8 and D punctuation mixed in.
fn garbage(seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed);
    let mut v = Vec::with_capacity(1 << 20);
    while v.len() < 1 << 20 {
        let r = rng.next();
        match r % 8 {
            0 => v.extend_from_slice(&[0, 0, 0]),
            1 => v.extend_from_slice(&[0xff, 0xfe, 0xc0, 0x80]),
            2 => v.extend_from_slice(b"{ /* \" ' ( [ `"),
            3 => v.push(b'\n'),
            _ => v.extend_from_slice(&r.to_le_bytes()[..((r >> 60) as usize % 8) + 1]),
        }
    }
    v.truncate(1 << 20);
    v
}

#[test]
fn megabyte_of_garbage_is_one_clean_error() {
    let t = TempDir::new("garbage");
    for (i, seed) in [0x9e37_79b9_7f4a_7c15_u64, 42, 0xdead_beef]
        .iter()
        .enumerate()
    {
        let data = garbage(*seed);
        assert!(data.contains(&0) && std::str::from_utf8(&data).is_err());
        let name = format!("garbage{i}.d");
        t.write(&name, &data);
        for cpp in [false, true] {
            let mut args = vec!["-xerrtags", "-e"];
            if cpp {
                args.push("-C");
            }
            args.extend(["-s", name.as_str()]);
            let o = dtx_in(&t.0, &args);
            let line = one_error_line(&o, 1);
            let prefix = format!("dtx: failed to compile script {name}: [D_");
            assert!(
                line.starts_with(&prefix),
                "seed {seed:#x} cpp {cpp}: {line:?}"
            );
        }
    }
}

#[test]
fn garbage_starting_with_a_valid_clause_reports_a_later_line() {
    let t = TempDir::new("garbage2");
    let mut data = b"BEGIN { x = 1; }\n\n".to_vec();
    data.extend(garbage(7).into_iter().filter(|&b| b != b'\n' && b != b'\r'));
    t.write("g.d", &data);
    let o = dtx_in(&t.0, &["-xerrtags", "-e", "-s", "g.d"]);
    let line = one_error_line(&o, 1);
    let rest = line
        .strip_prefix("dtx: failed to compile script g.d: ")
        .expect("script prefix");
    let (_, n, _) = split_tagged(rest);
    assert_eq!(n, Some(3), "{line}");
}

#[test]
fn missing_script_file_is_named() {
    let t = TempDir::new("missing");
    let path = t.0.join("no-such-script.d");
    let shown = path.to_string_lossy().into_owned();
    let o = dtx(&["-e", "-s", &shown]);
    let line = one_error_line(&o, 1);
    assert_eq!(
        line,
        format!("dtx: failed to open {shown}: No such file or directory")
    );
}

fn assert_usage_error(o: &Output, first: &str) {
    assert_eq!(o.status.code(), Some(2), "stderr: {}", stderr_of(o));
    assert!(o.stdout.is_empty(), "stdout: {}", stdout_of(o));
    let err = stderr_of(o);
    assert!(!err.contains("panicked"), "{err}");
    let mut lines = err.lines();
    assert_eq!(lines.next(), Some(first));
    let usage = lines.next().unwrap_or("");
    assert!(
        usage.starts_with("Usage: dtx [-32|-64] [-aACeFGghHlqSvVwZ]"),
        "usage line: {usage:?}"
    );
    assert!(err.contains("\tpredicate -> '/' D-expression '/'\n"));
}

#[test]
fn unknown_option_is_a_usage_error() {
    assert_usage_error(&dtx(&["-k"]), "dtx: illegal option -- k");
    assert_usage_error(
        &dtx(&["-e", "-k", "-n", "BEGIN"]),
        "dtx: illegal option -- k",
    );
    assert_usage_error(&dtx(&["--bogus"]), "dtx: illegal option -- bogus");
    assert_usage_error(&dtx(&["-s"]), "dtx: option requires an argument -- s");
}

#[test]
fn no_arguments_prints_usage() {
    let o = dtx::<&str>(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr_of(&o).starts_with("Usage: dtx "));
}

#[test]
fn bad_x_option_fails_to_set() {
    let o = dtx(&["-x", "badoption", "-e", "-n", "BEGIN"]);
    let line = one_error_line(&o, 1);
    assert_eq!(line, "dtx: failed to set -x badoption: Invalid option name");
}

const LIST_HEADER: &str =
    "   ID   PROVIDER            MODULE                          FUNCTION NAME";

#[test]
fn list_all_probes() {
    let o = dtx(&["-l"]);
    success(&o);
    let out = stdout_of(&o);
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some(LIST_HEADER));
    let mut names = Vec::new();
    let mut ids = Vec::new();
    for l in lines {
        let fields: Vec<&str> = l.split_whitespace().collect();
        assert!(fields.len() >= 3, "probe line {l:?}");
        ids.push(fields[0].parse::<u64>().expect("numeric probe id"));
        // ID is right-aligned in 5 columns (`%5d`: a longer id, as the ETW providers' ids on
        // Windows, takes what it needs), the provider in the next 11.
        assert_eq!(
            l.find(fields[0]).map(|p| p + fields[0].len()),
            Some(fields[0].len().max(5)),
            "{l:?}"
        );
        names.push(fields[fields.len() - 1].to_string());
    }
    for n in ["BEGIN", "END", "ERROR"] {
        assert!(names.iter().any(|x| x == n), "{n} not listed");
    }
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len(), "duplicate probe ids");
}

#[test]
fn list_matching_begin() {
    let o = dtx(&["-l", "-n", "BEGIN"]);
    success(&o);
    assert_eq!(
        stdout_of(&o),
        format!(
            "{LIST_HEADER}\n    1     dtrace                                                     BEGIN\n"
        )
    );
    let o = dtx(&["-l", "-n", "dtrace:::END"]);
    success(&o);
    let out = stdout_of(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[1].ends_with(" END") && lines[1].contains(" dtrace "));
}

#[test]
fn cpp_defines_select_the_branch() {
    let t = TempDir::new("cpp");
    t.write(
        "cpp.d",
        "#if X\nBEGIN { x = 1; }\n#else\nBEGIN { x = ; }\n#endif\n",
    );
    success(&dtx_in(&t.0, &["-e", "-C", "-D", "X=1", "-s", "cpp.d"]));
    success(&dtx_in(&t.0, &["-e", "-C", "-DX", "-s", "cpp.d"]));
    // Without the definition the #else branch (a syntax error on line 4) is compiled.
    let o = dtx_in(&t.0, &["-xerrtags", "-e", "-C", "-s", "cpp.d"]);
    let line = one_error_line(&o, 1);
    assert_eq!(
        line,
        "dtx: failed to compile script cpp.d: [D_SYNTAX] line 4: syntax error near \";\""
    );
    let o = dtx_in(&t.0, &["-e", "-C", "-D", "X=0", "-s", "cpp.d"]);
    one_error_line(&o, 1);
    // -U removes a definition made earlier on the command line.
    let o = dtx_in(&t.0, &["-e", "-C", "-D", "X=1", "-U", "X", "-s", "cpp.d"]);
    one_error_line(&o, 1);
}

#[test]
fn macro_arguments() {
    success(&dtx(&["-e", "-n", "BEGIN { trace($1); }", "42"]));
    success(&dtx(&["-e", "-n", "BEGIN { trace($$1); }", "hello"]));
    let o = dtx(&["-xerrtags", "-e", "-n", "BEGIN { trace($1); }"]);
    let line = one_error_line(&o, 1);
    assert_eq!(
        line,
        "dtx: invalid probe specifier BEGIN { trace($1); }: [D_MACRO_UNDEF] macro argument $1 is not defined"
    );
    let o = dtx(&["-xerrtags", "-e", "-n", "BEGIN { trace($1); }", "42", "43"]);
    let line = one_error_line(&o, 1);
    assert_eq!(
        line,
        "dtx: invalid probe specifier BEGIN { trace($1); }: [D_MACRO_UNUSED] extraneous argument '43' ($2 is not referenced)"
    );
}

#[test]
fn pragma_options() {
    let t = TempDir::new("pragma");
    t.write("q.d", "#pragma D option quiet\nBEGIN { x = 1; }\n");
    success(&dtx_in(&t.0, &["-e", "-s", "q.d"]));

    t.write("bad.d", "#pragma D option nosuchopt\nBEGIN { x = 1; }\n");
    let o = dtx_in(&t.0, &["-xerrtags", "-e", "-s", "bad.d"]);
    let line = one_error_line(&o, 1);
    assert_eq!(
        line,
        "dtx: failed to compile script bad.d: [D_PRAGMA_OPTSET] line 1: failed to set option 'nosuchopt': Invalid option name"
    );

    t.write(
        "badval.d",
        "\n#pragma D option bufsize=zzz\nBEGIN { x = 1; }\n",
    );
    let o = dtx_in(&t.0, &["-xerrtags", "-e", "-s", "badval.d"]);
    let line = one_error_line(&o, 1);
    assert_eq!(
        line,
        "dtx: failed to compile script badval.d: [D_PRAGMA_OPTSET] line 2: failed to set option 'bufsize' to 'zzz': Invalid value for specified option"
    );
}

#[test]
fn buffers_that_cannot_be_allocated_fail_enabling() {
    let o = dtx(&["-q", "-x", "bufsize=0", "-n", "BEGIN { exit(0); }"]);
    let line = one_error_line(&o, 1);
    assert_eq!(line, "dtx: could not enable tracing: Not enough space");
}

#[test]
fn fill_buffer_too_small_for_end_fails_enabling() {
    let o = dtx(&[
        "-q",
        "-x",
        "bufpolicy=fill",
        "-x",
        "bufsize=32",
        "-n",
        "BEGIN { exit(0); } END { trace(execname); }",
    ]);
    let line = one_error_line(&o, 1);
    assert_eq!(line, "dtx: could not enable tracing: Arg list too long");
    // the same END fits a bigger buffer
    let o = dtx(&[
        "-q",
        "-x",
        "bufpolicy=fill",
        "-x",
        "bufsize=4k",
        "-n",
        "BEGIN { exit(0); } END { trace(execname); }",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr_of(&o));
}

#[test]
fn oversized_static_variable_fails_enabling() {
    let o = dtx(&[
        "-q",
        "-n",
        "struct big { char c[100000]; }; struct big b; BEGIN { b.c[0] = 'x'; exit(0); }",
    ]);
    let line = one_error_line(&o, 1);
    assert!(line.ends_with(": Invalid argument"), "{line}");
}
