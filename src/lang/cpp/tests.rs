//! Tests of the preprocessor, through [`super::preprocess`].

use super::*;

fn pp(src: &str) -> Result<String, CppError> {
    preprocess(src, "t.d", &CppOptions::default())
}

fn ok(src: &str) -> String {
    match pp(src) {
        Ok(s) => s,
        Err(e) => panic!("unexpected error: {e}\n--- source:\n{src}"),
    }
}

fn err(src: &str) -> CppError {
    match pp(src) {
        Ok(s) => panic!("expected an error, got:\n{s}"),
        Err(e) => e,
    }
}

/// Output lines (without markers) as they'd be numbered by a consumer
/// honouring `# N "file"` markers: returns (file, line, text) tuples.
fn numbered(out: &str) -> Vec<(String, u32, String)> {
    let mut v = Vec::new();
    let mut file = String::new();
    let mut line = 1u32;
    for l in out.lines() {
        if let Some(rest) = l.strip_prefix("# ") {
            let mut it = rest.splitn(2, ' ');
            if let Some(Ok(n)) = it.next().map(|n| n.parse::<u32>()) {
                line = n;
                // the name is a C string literal: `\\` and `\"` stand for `\` and `"`
                let quoted = it.next().unwrap_or("").trim_matches('"');
                file = quoted
                    .replace("\\\\", "\u{0}")
                    .replace("\\\"", "\"")
                    .replace('\u{0}', "\\");
                continue;
            }
        }
        v.push((file.clone(), line, l.to_string()));
        line += 1;
    }
    v
}

fn line_of(out: &str, needle: &str) -> (String, u32) {
    numbered(out)
        .into_iter()
        .find(|(_, _, t)| t.contains(needle))
        .map(|(f, l, _)| (f, l))
        .unwrap_or_else(|| panic!("{needle:?} not found in:\n{out}"))
}

#[test]
fn marker_at_start() {
    let out = ok("BEGIN {}\n");
    assert!(out.starts_with("# 1 \"t.d\"\n"), "{out}");
    assert_eq!(line_of(&out, "BEGIN"), ("t.d".into(), 1));
}

#[test]
fn lines_preserved_across_comment_and_skipped_block() {
    let src = "/*\n * multi\n * line\n */\nfirst;\n#if 0\nskipped1;\nskipped2;\n#else\nkept;\n#endif\n#define X 1\nlast X;\n";
    let out = ok(src);
    assert_eq!(line_of(&out, "first"), ("t.d".into(), 5));
    assert_eq!(line_of(&out, "kept"), ("t.d".into(), 10));
    assert_eq!(line_of(&out, "last 1"), ("t.d".into(), 13));
    assert!(!out.contains("skipped"));
    assert!(!out.contains("multi"));
}

#[test]
fn inline_comment_keeps_following_lines() {
    let out = ok("a /* x\ny */ b\nc\n");
    assert_eq!(line_of(&out, "a"), ("t.d".into(), 1));
    assert_eq!(line_of(&out, "b"), ("t.d".into(), 2));
    assert_eq!(line_of(&out, "c"), ("t.d".into(), 3));
    let out = ok("x = 1; // comment\ny\n");
    assert!(out.contains("x = 1;"));
    assert!(!out.contains("comment"));
    assert_eq!(line_of(&out, "y"), ("t.d".into(), 2));
}

#[test]
fn continuation_lines() {
    let out = ok("#define A 1 + \\\n 2\nA;\nz\n");
    assert!(out.contains("1 + 2;"), "{out}");
    assert_eq!(line_of(&out, "1 + 2"), ("t.d".into(), 3));
    assert_eq!(line_of(&out, "z"), ("t.d".into(), 4));
}

#[test]
fn object_macros() {
    let out = ok("#define MAXVAL 10 * 15\n/MAXVAL > 5/\n");
    assert!(out.contains("/10 * 15 > 5/"), "{out}");
}

#[test]
fn function_macros_nested() {
    let src = "#define SQ(x) ((x) * (x))\n#define ADD(a, b) (a + b)\n#define TWO 2\nv = ADD(SQ(TWO), SQ(ADD(1, 3)));\n";
    let out = ok(src);
    assert!(
        out.contains("v = (((2) * (2)) + (((1 + 3)) * ((1 + 3))));"),
        "{out}"
    );
}

#[test]
fn function_macro_without_parens_is_not_expanded() {
    let out = ok("#define f(x) x+1\nf; f (2);\n");
    assert!(out.contains("f; 2+1;"), "{out}");
}

#[test]
fn self_reference_not_reexpanded() {
    let out = ok("#define foo foo + 1\n#define a b\n#define b a\nfoo; a; b;\n");
    assert!(out.contains("foo + 1; a; b;"), "{out}");
    let out = ok("#define f(x) x f\nf(1)(2);\n");
    assert!(out.contains("1 f(2);"), "{out}");
}

#[test]
fn stringify_and_paste() {
    let src = "#define S(x) #x\n#define CAT(a, b) a ## b\n#define XCAT(a, b) CAT(a, b)\n#define N 7\nS(a  \"q\\n\"  b); CAT(foo, bar); XCAT(v, N); CAT(x, ); S();\n";
    let out = ok(src);
    assert!(out.contains("\"a \\\"q\\\\n\\\" b\";"), "{out}");
    assert!(out.contains("foobar;"), "{out}");
    assert!(out.contains("v7;"), "{out}");
    assert!(out.contains("x;"), "{out}");
    assert!(out.contains("\"\";"), "{out}");
}

#[test]
fn variadic_macros() {
    let src = "#define P(fmt, ...) printf(fmt, __VA_ARGS__)\n#define Q(fmt, args...) printf(fmt , ## args)\n#define R(...) f(__VA_ARGS__)\nP(\"%d %d\", 1, 2); Q(\"x\"); Q(\"%d\", 3); R(); R(a, (b, c));\n";
    let out = ok(src);
    assert!(out.contains("printf(\"%d %d\", 1, 2);"), "{out}");
    assert!(out.contains("printf(\"x\");"), "{out}");
    assert!(out.contains("printf(\"%d\" ,3);"), "{out}");
    assert!(out.contains("f();"), "{out}");
    assert!(out.contains("f(a, (b, c));"), "{out}");
}

#[test]
fn multiline_invocation_keeps_numbering() {
    let src = "#define F(a, b) a + b\nx = F(1,\n 2);\ny;\n";
    let out = ok(src);
    assert_eq!(line_of(&out, "x = 1 + 2"), ("t.d".into(), 2));
    assert_eq!(line_of(&out, "y;"), ("t.d".into(), 4));
}

#[test]
fn no_expansion_in_strings_chars_or_d_specials() {
    let src = "#define VALUE 5\n#define target oops\nprintf(\"VALUE %d\\n\", VALUE); c = 'VALUE'; pid$target; $1; `VALUE; @a[VALUE];\n";
    let out = ok(src);
    assert!(out.contains("printf(\"VALUE %d\\n\", 5);"), "{out}");
    assert!(out.contains("'VALUE'"), "{out}");
    assert!(out.contains("pid$target;"), "{out}");
    assert!(out.contains("$1;"), "{out}");
    assert!(out.contains("`5;"), "{out}");
    assert!(out.contains("@a[5];"), "{out}");
}

#[test]
fn probe_descriptions_survive_expansion() {
    let out = ok("#define P syscall::open:entry\n#define T tick-10ms\nP, T, fbt::*:return\n");
    assert!(
        out.contains("syscall::open:entry, tick-10ms, fbt::*:return"),
        "{out}"
    );
}

#[test]
fn no_accidental_token_paste() {
    let out = ok("#define NEG -1\n#define E\nx = -NEG; y = -E-; z = a/E*b;\n");
    assert!(out.contains("x = - -1;"), "{out}");
    assert!(out.contains("y = - -;"), "{out}");
    assert!(!out.contains("/*"), "{out}");
}

#[test]
fn pragma_passthrough() {
    let src = "#pragma D option quiet\n#pragma\tident\t\"%Z%%M%\t%I%\t%E% SMI\"\n#define quiet loud\nBEGIN\n";
    let out = ok(src);
    assert!(out.contains("\n#pragma D option quiet\n"), "{out}");
    assert!(
        out.contains("\n#pragma\tident\t\"%Z%%M%\t%I%\t%E% SMI\"\n"),
        "{out}"
    );
    assert_eq!(line_of(&out, "BEGIN"), ("t.d".into(), 4));
    let out = ok("#if 0\n#pragma D option quiet\n#endif\n");
    assert!(!out.contains("pragma"), "{out}");
}

#[test]
fn shebang_passthrough() {
    let out = ok("#!/usr/sbin/dtrace -Cs\nBEGIN\n");
    assert!(
        out.starts_with("#!/usr/sbin/dtrace -Cs\n# 2 \"t.d\"\n"),
        "{out}"
    );
    assert_eq!(line_of(&out, "BEGIN"), ("t.d".into(), 2));
}

#[test]
fn indented_directive_is_text() {
    let out = ok("\t#define VALUE 5\nVALUE\n");
    assert!(out.contains("\t#define VALUE 5\n"), "{out}");
    assert!(out.contains("\nVALUE\n"), "{out}");
}

#[test]
fn conditionals() {
    let src = "#define FLAG 1\n#if defined (FLAG) && !defined(NOPE)\nA\n#elif 1\nB\n#else\nC\n#endif\n#ifdef NOPE\nD\n#elif FLAG == 1\nE\n#endif\n#ifndef NOPE\nF\n#endif\n#if 0\n#if 1\nG\n#else\nH\n#endif\n#elif 0\nI\n#else\nJ\n#endif\n";
    let out = ok(src);
    for k in ["A", "E", "F", "J"] {
        assert!(out.lines().any(|l| l == k), "{k} missing:\n{out}");
    }
    for k in ["B", "C", "D", "G", "H", "I"] {
        assert!(!out.lines().any(|l| l == k), "{k} present:\n{out}");
    }
}

fn if_true(expr: &str) -> bool {
    let out = ok(&format!("#if {expr}\nYES\n#else\nNO\n#endif\n"));
    out.lines().any(|l| l == "YES")
}

#[test]
fn if_expressions() {
    assert!(if_true("1 + 2 * 3 == 7"));
    assert!(if_true("(1 + 2) * 3 == 9"));
    assert!(if_true("0x10 == 16 && 010 == 8 && 0b11 == 3"));
    assert!(if_true("10UL == 10 && 5u + 1L == 6"));
    assert!(if_true("1 << 4 == 16 && 256 >> 4 == 16"));
    assert!(if_true("(7 & 3) == 3 && (4 | 1) == 5 && (6 ^ 3) == 5"));
    assert!(if_true("~0 == -1 && !0 && -(-3) == 3 && +2 == 2"));
    assert!(if_true("1 ? 2 : 0"));
    assert!(!if_true("0 ? 2 : 0"));
    assert!(if_true("(0 ? 1 : 2) == 2"));
    assert!(if_true(
        "'a' == 97 && '\\n' == 10 && '\\x41' == 65 && '\\101' == 65"
    ));
    assert!(if_true("UNDEFINED_THING == 0"));
    assert!(if_true("-1 < 0"));
    assert!(!if_true("-1 < 0u"));
    assert!(if_true("7 / 2 == 3 && 7 % 2 == 1 && -7 / 2 == -3"));
    assert!(if_true("!(0 && (1 / 0))"));
    assert!(if_true("1 || (1 / 0)"));
    assert!(if_true("3 >= 3 && 3 <= 3 && 4 > 3 && 2 != 3"));
    assert!(!if_true("defined FOO"));
    assert!(if_true("defined __LINE__"));
    let out = ok("#define A B\n#define B 3\n#if A == 3\nYES\n#endif\n");
    assert!(out.lines().any(|l| l == "YES"));
    let out = ok("#define F(x) (x * 2)\n#if F(4) == 8\nYES\n#endif\n");
    assert!(out.lines().any(|l| l == "YES"));
}

#[test]
fn if_expression_errors() {
    for e in [
        "1 / 0",
        "",
        "1 +",
        "(1",
        "()",
        "1 2",
        "\"s\"",
        "1.5",
        "1 ? 2",
        "!defined",
        "defined(",
        "defined(X",
        "09",
        "1abc",
    ] {
        let src = format!("#if {e}\n#endif\n");
        assert!(pp(&src).is_err(), "expected error for #if {e}");
    }
}

#[test]
fn cond_errors() {
    let e = err("#if 1\nA\n");
    assert_eq!(e.line, 1);
    assert!(e.message.contains("unterminated #if"), "{e}");
    let e = err("x\n#ifdef X\n");
    assert!(e.message.contains("unterminated #ifdef"), "{e}");
    assert_eq!(e.line, 2);
    assert!(err("#ifndef X\n").message.contains("unterminated #ifndef"));
    assert!(err("#if 1\n#else\n").message.contains("unterminated #else"));
    let e = err("#if 1\n#else\n#else\n#endif\n");
    assert!(e.message.contains("#else after #else"), "{e}");
    assert_eq!(e.line, 3);
    assert!(err("#if 1\n#else\n#elif 1\n#endif\n")
        .message
        .contains("#elif after #else"));
    assert!(err("#endif\n").message.contains("#endif without #if"));
    assert!(err("#else\n").message.contains("#else without #if"));
    assert!(err("#elif 1\n").message.contains("#elif without #if"));
    assert!(err("#ifdef\n#endif\n").message.contains("no macro name"));
    assert!(err("#ifdef 3\n#endif\n").message.contains("identifiers"));
}

#[test]
fn other_errors() {
    let e = err("a\n/* open\n\n");
    assert!(e.message.contains("unterminated comment"), "{e}");
    assert_eq!(e.line, 2);
    let e = err("#define F(a) a\nx = F(1,\n2\n");
    assert!(e.message.contains("unterminated argument list"), "{e}");
    assert_eq!(e.line, 2);
    assert!(err("#define F(a, b) a\nF(1);\n")
        .message
        .contains("requires 2"));
    assert!(err("#define F(a) a\nF(1, 2);\n")
        .message
        .contains("passed 2"));
    assert!(err("#define F() 1\nF(1);\n")
        .message
        .contains("takes just 0"));
    assert!(err("#define\n").message.contains("no macro name"));
    assert!(err("#define 1abc 2\n").message.contains("identifiers"));
    assert!(err("#define defined 2\n").message.contains("defined"));
    assert!(err("#define F(a 1\n")
        .message
        .contains("expected ',' or ')'"));
    assert!(err("#define F(a, a) 1\n").message.contains("duplicate"));
    assert!(err("#define F(a) # b\n").message.contains("'#'"));
    assert!(err("#define F(a) ## a\n").message.contains("'##'"));
    assert!(err("#undef\n").message.contains("no macro name"));
    let e = err("\n#error stop right here\n");
    assert_eq!(e.line, 2);
    assert!(e.message.contains("#error stop right here"), "{e}");
    assert_eq!(e.to_string(), "t.d:2: #error stop right here");
    let e = err("#foo bar\n");
    assert!(
        e.message.contains("invalid preprocessing directive #foo"),
        "{e}"
    );
    assert!(err("#include \"does/not/exist.h\"\n")
        .message
        .contains("No such file"));
    assert!(err("#include <does_not_exist.h>\n")
        .message
        .contains("No such file"));
    assert!(err("#include nothing\n").message.contains("expects"));
    // Errors are not reported inside skipped blocks.
    ok("#if 0\n#foo\n#error no\n#define\n#endif\n");
}

#[test]
fn misc_directives() {
    let out = ok("#\n#warning careful\n#ident \"x\"\nA\n");
    assert_eq!(line_of(&out, "A"), ("t.d".into(), 4));
    let out = ok("#line 100 \"other.d\"\nA\nB __LINE__ __FILE__\n");
    assert_eq!(line_of(&out, "A"), ("other.d".into(), 100));
    assert!(out.contains("B 101 \"other.d\""), "{out}");
    let e = err("#line 50\n#error x\n");
    assert_eq!(e.line, 50);
    assert!(err("#line abc\n").message.contains("positive integer"));
    let out = ok("# 33 \"gen.d\"\nA\n");
    assert_eq!(line_of(&out, "A"), ("gen.d".into(), 33));
    assert!(err("#33abc\n").message.contains("positive integer"));
    let e = err("#define F(a, b) a\n\nF(1,\n\n 2, 3)\n");
    assert_eq!(e.line, 3, "{e}");
    assert!(e.message.contains("passed 3"), "{e}");
}

#[test]
fn undef_and_redefine() {
    let out = ok("#define A 1\nA\n#undef A\nA\n#define A 2\nA\n");
    let lines: Vec<_> = numbered(&out).into_iter().map(|(_, _, t)| t).collect();
    assert_eq!(lines, vec!["", "1", "", "A", "", "2"]);
}

#[test]
fn options_define_undef() {
    let opts = CppOptions {
        predefined: vec![
            ("__SUNW_D".into(), "1".into()),
            ("_LP64".into(), "1".into()),
        ],
        defines: vec![
            ("FOO".into(), None),
            ("BAR".into(), Some("x + 1".into())),
            ("BAZ=7".into(), None),
            ("SQ(x)".into(), Some("((x)*(x))".into())),
        ],
        undefs: vec!["_LP64".into()],
        include_dirs: vec![],
    };
    let out = preprocess(
        "__SUNW_D FOO BAR BAZ SQ(2)\n#ifdef _LP64\nLP\n#endif\n",
        "t.d",
        &opts,
    )
    .unwrap();
    assert!(out.contains("1 1 x + 1 7 ((2)*(2))"), "{out}");
    assert!(!out.contains("LP"), "{out}");
    let bad = CppOptions {
        defines: vec![("1x".into(), None)],
        ..Default::default()
    };
    assert!(preprocess("", "t.d", &bad).is_err());
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dtx-cpp-{}-{}", tag, std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn include_files_and_markers() {
    let d = tmpdir("inc");
    std::fs::create_dir_all(d.join("sys")).unwrap();
    std::fs::write(d.join("defs.h"), "/* hdr */\n#define VALUE 42\ninc_line2\n").unwrap();
    std::fs::write(d.join("sys/angle.h"), "#define ANG 9\n").unwrap();
    let main = d.join("main.d");
    let src = "first\n#include \"defs.h\"\nafter VALUE\n#include <sys/angle.h>\nlast ANG\n";
    std::fs::write(&main, src).unwrap();
    let name = main.display().to_string();
    let opts = CppOptions {
        include_dirs: vec![d.clone()],
        ..Default::default()
    };
    let out = preprocess(src, &name, &opts).unwrap();
    let defs = d.join("defs.h").display().to_string();
    assert_eq!(line_of(&out, "first"), (name.clone(), 1));
    assert_eq!(line_of(&out, "inc_line2"), (defs.clone(), 3));
    assert_eq!(line_of(&out, "after 42"), (name.clone(), 3));
    assert_eq!(line_of(&out, "last 9"), (name.clone(), 5));
    // the marker writes the name as a C string (Windows' backslashes doubled)
    let quoted = |s: &str| s.replace('\\', "\\\\");
    assert!(
        out.contains(&format!("# 1 \"{}\"\n", quoted(&defs))),
        "{out}"
    );
    assert!(
        out.contains(&format!("# 3 \"{}\"\n", quoted(&name))),
        "{out}"
    );
    // <...> does not search the including file's directory.
    assert!(preprocess("#include <defs.h>\n", &name, &CppOptions::default()).is_err());
    // Macro-named include.
    let out = preprocess("#define H \"defs.h\"\n#include H\nVALUE\n", &name, &opts).unwrap();
    assert!(out.contains("\n42\n"), "{out}");
    // Unterminated conditional inside an include reports the include.
    std::fs::write(d.join("bad.h"), "#if 1\n").unwrap();
    let e = preprocess("#include \"bad.h\"\n", &name, &opts).unwrap_err();
    assert!(
        e.file.ends_with("bad.h") && e.message.contains("unterminated"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn include_recursion_limit_and_guards() {
    let d = tmpdir("rec");
    std::fs::write(d.join("self.h"), "#include \"self.h\"\n").unwrap();
    let name = d.join("m.d").display().to_string();
    let e = preprocess("#include \"self.h\"\n", &name, &CppOptions::default()).unwrap_err();
    assert!(e.message.contains("nested"), "{e}");
    std::fs::write(
        d.join("g.h"),
        "#ifndef G_H\n#define G_H\n#include \"g.h\"\nguarded\n#endif\n",
    )
    .unwrap();
    let out = preprocess(
        "#include \"g.h\"\n#include \"g.h\"\n",
        &name,
        &CppOptions::default(),
    )
    .unwrap();
    assert_eq!(out.matches("guarded").count(), 1, "{out}");
    std::fs::write(d.join("o.h"), "#pragma once\nonce_body\n").unwrap();
    let out = preprocess(
        "#include \"o.h\"\n#include \"o.h\"\n",
        &name,
        &CppOptions::default(),
    )
    .unwrap();
    assert_eq!(out.matches("once_body").count(), 1, "{out}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn suite_preprocessor_tests() {
    let Some(dir) = crate::test_suite::common("preprocessor") else {
        return;
    };
    let rd = std::fs::read_dir(&dir).unwrap();
    let mut n = 0;
    for e in rd.flatten() {
        let p = e.path();
        let fname = p
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or("")
            .to_string();
        if !fname.ends_with(".d") {
            continue;
        }
        let src = std::fs::read_to_string(&p).unwrap();
        let r = preprocess(&src, &p.display().to_string(), &CppOptions::default());
        // err.D_* tests fail later, in the D compiler, not in cpp.
        if fname.starts_with("err.") && !fname.starts_with("err.D_") {
            assert!(r.is_err(), "{fname} should fail");
        } else {
            let out = r.unwrap_or_else(|e| panic!("{fname}: {e}"));
            assert!(out.contains("#pragma D option quiet"), "{fname}");
            if fname.starts_with("tst.") {
                assert!(
                    !out.contains("VALUE") || fname == "tst.precondi.d",
                    "{fname}"
                );
            }
        }
        n += 1;
    }
    assert!(n >= 20);
    let tab = dir.join("err.D_PRAGCTL_INVAL.tabdefine.d");
    if let Ok(src) = std::fs::read_to_string(&tab) {
        let out = preprocess(&src, "x.d", &CppOptions::default()).unwrap();
        assert!(out.contains("\t#define VALUE 5\n"));
    }
}

#[test]
fn suite_expected_values() {
    let Some(dir) = crate::test_suite::common("preprocessor") else {
        return;
    };
    let cases = [
        ("tst.ifdef.d", "10"),
        ("tst.ifndef.d", "5"),
        ("tst.ifnotdef.d", "5"),
        ("tst.logicaland.d", "0"),
        ("tst.mulor.d", "0"),
        ("tst.preexpifelse.d", "5"),
    ];
    for (f, v) in cases {
        let src = std::fs::read_to_string(dir.join(f)).unwrap();
        let out = preprocess(&src, f, &CppOptions::default()).unwrap();
        assert!(out.contains(&format!("\\n\", {v});")), "{f}:\n{out}");
    }
}

#[test]
fn never_panics_on_garbage() {
    // Simple xorshift PRNG: deterministic "random" inputs.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let alphabet: &[&str] = &[
        "#",
        "define",
        "if",
        "ifdef",
        "elif",
        "else",
        "endif",
        "include",
        "undef",
        " ",
        "\n",
        "\\\n",
        "(",
        ")",
        ",",
        "\"",
        "'",
        "/*",
        "*/",
        "//",
        "##",
        "...",
        "F",
        "G",
        "x",
        "1",
        "0x",
        "defined",
        "__VA_ARGS__",
        "?",
        ":",
        "-",
        "<<",
        "/",
        "é",
        "\t",
        "line",
        "pragma",
        "error",
        "$1",
        "`",
        "@",
    ];
    let base = "#define F(a, ...) a ## __VA_ARGS__ #a\n#define G F(G, x)\n";
    for _ in 0..3000 {
        let len = (next() % 40) as usize;
        let mut s = String::from(base);
        for _ in 0..len {
            s.push_str(alphabet[(next() % alphabet.len() as u64) as usize]);
        }
        let _ = pp(&s);
    }
    for _ in 0..500 {
        let len = (next() % 64) as usize;
        let s: String = (0..len)
            .map(|_| char::from_u32((next() % 0x250) as u32).unwrap_or('?'))
            .collect();
        let _ = pp(&s);
    }
    let src = "#!/x\n/* c */\n#define F(a, b) a ## b #a\n#if defined(F) && (1 ? 2 : 3)\nF(\"x\", 'y') \"str\n#elif 1\n#endif\n";
    for (i, _) in src.char_indices() {
        let _ = pp(&src[..i]);
    }
    // Deep nesting is reported, not a stack overflow.
    let deep = format!(
        "#if {}1{}\n#endif\n",
        "(".repeat(100_000),
        ")".repeat(100_000)
    );
    assert!(pp(&deep).is_err());
    let deep = format!("#if {}1\n#endif\n", "!".repeat(100_000));
    assert!(pp(&deep).is_err());
    let deep = format!(
        "#define f(x) x\n{}1{}\n",
        "f(".repeat(1_000),
        ")".repeat(1_000)
    );
    assert!(pp(&deep).is_err());
    // Exponential expansion is cut off.
    let mut bomb = String::from("#define a0 x x\n");
    for i in 1..40 {
        bomb.push_str(&format!("#define a{i} a{} a{}\n", i - 1, i - 1));
    }
    bomb.push_str("a39\n");
    assert!(pp(&bomb).is_err());
}

#[test]
fn a_megabyte_of_input_expands_every_line() {
    // (its speed is measured by benches/parse.rs, `cpp`)
    let mut src = String::from("#define VAL 5\n#define F(a) ((a) + VAL)\n");
    let mut clauses = 0;
    while src.len() < 1_000_000 {
        src.push_str("syscall::read:entry /pid == $target/ { @[probefunc] = count(); x = F(VAL); } /* c */\n");
        src.push_str("tick-1s { printf(\"%d\\n\", 1); }\n");
        clauses += 1;
    }
    let out = pp(&src).unwrap();
    assert_eq!(out.matches("x = ((5) + 5);").count(), clauses);
    assert!(!out.contains("F(") && !out.contains("/* c */"));
    // every line is kept (plus the line marker), so diagnostics keep their line numbers
    assert_eq!(out.lines().count(), src.lines().count() + 1);
}
