//! Where dtx differed from illumos' dtrace (issue 32, item 4): each difference as a minimal
//! repro run through the `dtx` binary, with the illumos function whose behaviour it checks
//! named at each test (libdtrace's dt_*.c, the kernel's dtrace.c, the dtrace(1M) command).

use crate::support::cli;
use cli::run;

/// Runs `-q -n prog`: (status, stdout, stderr).
fn d(prog: &str) -> (i32, String, String) {
    run(&["-q", "-n", prog])
}

/// Runs `-q -n prog`, which must succeed: its stdout without the line dtrace ends a run with.
fn ok(prog: &str) -> String {
    let (rc, out, err) = d(prog);
    assert_eq!(rc, 0, "{prog}: {err}");
    out.trim_end().to_string()
}

/// The `[D_TAG] message` of a program that must not compile (`-xerrtags`).
fn compile_error(prog: &str) -> String {
    let (rc, _, err) = run(&["-q", "-xerrtags", "-n", prog]);
    assert_eq!(rc, 1, "{prog} compiled: {err}");
    let at = err.find(": [").map_or(0, |i| i + 2);
    err[at..].trim_end().to_string()
}

// --- the banner --------------------------------------------------------------------------

/// Each clause's description is its own enabling, and the kernel's `dtrace_enabling_match`
/// sums their matches: two clauses on BEGIN match 2 probes.
#[test]
fn banner_counts_a_match_per_clause() {
    let (rc, _, err) = run(&["-n", "BEGIN {} BEGIN { exit(0); }"]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains("dtx: description 'BEGIN ' matched 2 probes\n"),
        "{err}"
    );
}

/// dtrace enables a program (and says what it matched, exec_prog) before the kernel refuses a
/// destructive one at DTRACEIOC_GO (`dtrace_state_go`: EACCES, EDT_DESTRUCTIVE).
#[test]
fn match_line_comes_before_the_destructive_refusal() {
    let (rc, _, err) = run(&["-n", "BEGIN { system(\"true\"); }"]);
    assert_eq!(rc, 1, "{err}");
    assert_eq!(
        err,
        "dtx: description 'BEGIN ' matched 1 probe\n\
         dtx: could not enable tracing: Destructive actions not allowed\n"
    );
}

/// `setopt("name")` records no value: dt_consume.c sets it to "1", and `dt_setopt`'s message
/// ends in a newline of its own, which `dt_handle_liberr` follows with another.
#[test]
fn setopt_without_a_value_reports_one() {
    let (rc, _, err) = d("BEGIN { setopt(\"bogus\"); } BEGIN { exit(0); }");
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        err,
        "dtx: error on enabled probe ID 1 (ID 1: dtrace:::BEGIN): couldn't set option \
         \"bogus\" to \"1\": Invalid option name\n\n"
    );
}

// --- NULL strings fault ------------------------------------------------------------------

/// A NULL string faults where it is read: the kernel's `dtrace_vcanload`/`dtrace_strlen` and
/// `dtrace_store_by_ref` load through it (invalid address 0), as do the subroutines. A
/// comparison reads it as "" (`dtrace_strncmp`).
#[test]
fn null_strings_fault() {
    for (prog, action) in [
        ("s[1] = \"x\"; trace(s[2]);", 2),
        ("trace(strlen(strtok(\"a\", \"a\")));", 1),
        ("trace(copyinstr(0));", 1),
    ] {
        let (rc, out, err) = d(&format!("BEGIN {{ {prog} }} BEGIN {{ exit(0); }}"));
        assert_eq!(rc, 0, "{prog}: {err}");
        assert_eq!(out.trim(), "", "{prog}");
        assert!(
            err.contains(&format!("invalid address (0x0) in action #{action}")),
            "{prog}: {err}"
        );
    }
    // dtrace_strncmp: a NULL string compares as ""
    assert_eq!(
        ok("BEGIN { s[1] = \"x\"; printf(\"%d %d\\n\", s[2] == \"\", s[2] != s[1]); exit(0); }"),
        "1 1"
    );
}

// --- strings as pointers -----------------------------------------------------------------

/// dt_cook_op2: `(string)` takes a pointer or a scalar (DT_TOK_LPAR), D treats a string as a
/// pointer for `+` and `-` (DT_TOK_ADD: "D permits strings to be treated as pointers"), and
/// E1[E2] on anything but an associative array is *(E1 + E2) (DT_TOK_LBRAC).
#[test]
fn strings_act_as_pointers() {
    assert_eq!(
        ok("BEGIN { p = (char *)alloca(3); p[0] = 'h'; p[1] = 'i'; \
            s = \"hello\"; printf(\"%s|%s|%s|%c%c\\n\", (string)p, s + 1, 2 + \"hello\", \
            probename[0], probename[4]); exit(0); }"),
        "hi|ello|llo|BN"
    );
    assert!(ok("BEGIN { printf(\"%c\", execname[0]); exit(0); }").starts_with('d'));
    // (string)0 is a NULL string: it compiles, and faults where it is read
    let (rc, _, err) = d("BEGIN { trace((string)0); } BEGIN { exit(0); }");
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("invalid address (0x0) in action #1"), "{err}");
}

// --- strsize -----------------------------------------------------------------------------

/// A string record holds `strsize` bytes and no NUL (`dtrace_store_by_ref`); `lltostr` keeps
/// its digits and `substr` takes up to `strsize` bytes (DIF_SUBR_LLTOSTR, DIF_SUBR_SUBSTR).
#[test]
fn strings_hold_strsize_bytes() {
    let (rc, out, err) = run(&[
        "-q",
        "-x",
        "strsize=4",
        "-n",
        "BEGIN { printf(\"%s|%s|%s\\n\", lltostr(1234), probename, substr(\"abcdef\", 0)); \
         exit(0); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out.trim_end(), "1234|BEGI|abcd");
}

// --- escapes -----------------------------------------------------------------------------

/// libdtrace's `stresc2chr` (dt_string.c) knows \a \b \f \n \r \t \v, octal, \x, \" and \\;
/// any other escape keeps its backslash: '\?' is the two bytes 0x5c3f, "a\?b" is `a\?b`.
#[test]
fn unknown_escapes_keep_the_backslash() {
    assert_eq!(
        ok("BEGIN { printf(\"%d %d %s %s|\\n\", '\\?', '\\'', \"a\\?b\", \"\\q\\\"\"); exit(0); }"),
        "23615 23591 a\\?b \\q\"|"
    );
}

// --- alloca ------------------------------------------------------------------------------

/// DIF_SUBR_ALLOCA takes the size asked for after aligning to 8: two `alloca(0)` are the same
/// address.
#[test]
fn alloca_zero_takes_no_room() {
    assert_eq!(
        ok(
            "BEGIN { a = alloca(0); b = alloca(0); c = alloca(1); d = alloca(0); \
            printf(\"%d %d\\n\", b - a, d - c); exit(0); }"
        ),
        "0 8"
    );
}

// --- a faulting clause -------------------------------------------------------------------

/// `dtrace_probe` does not advance the buffer's offset past a clause that faults: nothing it
/// recorded is kept, in the principal buffer or in a speculation's.
#[test]
fn a_faulting_clause_keeps_no_record() {
    let (rc, out, err) = d("BEGIN { printf(\"before\\n\"); x = *(int *)8; } \
                            BEGIN { printf(\"after\\n\"); exit(0); }");
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out.trim_end(), "after");
    assert!(err.contains("invalid address (0x8) in action #2"), "{err}");
    // a speculated record of a faulting clause is dropped too
    let (rc, out, err) = d("BEGIN { s = speculation(); } \
                            BEGIN { speculate(s); printf(\"lost\\n\"); x = *(int *)8; } \
                            BEGIN { speculate(s); printf(\"kept\\n\"); } \
                            BEGIN { commit(s); } BEGIN { exit(0); }");
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out.trim_end(), "kept");
}

// --- speculation -------------------------------------------------------------------------

/// `dtrace_speculation_commit`/`_discard` raise CPU_DTRACE_ILLOP for an id past the last
/// buffer (the id is a 32-bit dtrace_specid_t, so -1 is past it too); 0 is nothing.
#[test]
fn commit_and_discard_of_a_bad_id_are_illegal() {
    for prog in ["commit(99);", "discard(99);", "commit(-1);"] {
        let (rc, _, err) = d(&format!("BEGIN {{ {prog} }} BEGIN {{ exit(0); }}"));
        assert_eq!(rc, 0, "{prog}: {err}");
        assert!(
            err.contains("illegal operation in action #1"),
            "{prog}: {err}"
        );
    }
    let (rc, _, err) = d("BEGIN { commit(0); discard(0); } BEGIN { exit(0); }");
    assert_eq!(rc, 0, "{err}");
    assert_eq!(err, "");
}

/// `dtrace_ecb_action_add` sizes a speculate() like a record: a clause holding only
/// `speculate()` keeps its header in the speculation, and commit() shows its probe line.
#[test]
fn a_lone_speculate_commits_its_header() {
    let (rc, out, err) = run(&[
        "-n",
        "BEGIN { s = speculation(); speculate(s); } BEGIN { commit(s); } \
         BEGIN { exit(0); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    // the committed header and exit()'s record
    assert_eq!(out.matches(":BEGIN").count(), 2, "{out}");
}

// --- types -------------------------------------------------------------------------------

/// dt_cg_asgn_op stores a struct by copy (COPYS in dt_cg_store) into any lvalue, a member too.
#[test]
fn struct_assigns_into_a_struct_member() {
    assert_eq!(
        ok(
            "struct s { int a; }; struct t { int z; struct s m; }; struct s x; struct t y; \
            BEGIN { x.a = 5; y.m = x; printf(\"%d %d\\n\", y.m.a, y.z); exit(0); }"
        ),
        "5 0"
    );
}

/// `dt_type_promote` (dt_parser.c) gives a binary operation the type of the operand of the
/// higher rank (bits, plus one when unsigned), with no promotion to int.
#[test]
fn arithmetic_keeps_the_wider_operand_type() {
    assert_eq!(
        ok("unsigned char a, b; BEGIN { a = 200; b = 100; c = a + b; \
            printf(\"%d %d %d %d\\n\", sizeof (a + b), c, sizeof (a + 1), a + 1); exit(0); }"),
        "1 44 4 201"
    );
}

// --- tags --------------------------------------------------------------------------------

/// The tags libdtrace gives these errors, each from the function named.
#[test]
fn error_tags() {
    // dt_cook_op2 DT_TOK_ADD: an aggregation has a dynamic type (dt_cook_aggregation)
    assert_eq!(
        compile_error("BEGIN { @a = count(); trace(@a + 1); }"),
        "[D_OP_INCOMPAT] operands have incompatible types: \"aggregation\" + \"int\""
    );
    // dt_cg_node: an aggregating function outside an aggregation assignment
    assert_eq!(
        compile_error("BEGIN { count(); }"),
        "[D_CG_EXPR] aggregating function count( ) may not be called from a D \
         expression (D program context required)"
    );
    // dt_xcook_ident: args is an associative array
    assert_eq!(
        compile_error("BEGIN { trace(args); }"),
        "[D_IDENT_BADREF] associative array 'args' may not be referenced as scalar"
    );
    // dt_idcook_args: BEGIN takes no arguments
    assert_eq!(
        compile_error("BEGIN { trace(args[0]); }"),
        "[D_ARGS_IDX] index 0 is out of range for :::BEGIN args[ ]"
    );
    // dt_cook_op2 DT_TOK_LPAR: xlate<> has a dynamic type
    assert_eq!(
        compile_error(
            "struct o { int x; }; translator struct o < int i > { x = i; }; \
             BEGIN { trace((uintptr_t)xlate<struct o *>(1)); }"
        ),
        "[D_CAST_INVAL] invalid cast expression: \"pointer to translated data\" to \
         \"uintptr_t\""
    );
    // dt_action_printflike: "." is DT_FREOPEN_RESTORE
    assert_eq!(
        compile_error("BEGIN { freopen(\".\"); }"),
        "[D_FREOPEN_INVALID] freopen( ) argument #1 cannot be \".\""
    );
}

// --- aggregations ------------------------------------------------------------------------

/// The kernel counts `quantize(1LL << 62)` in the top bucket (dtrace_aggregate_quantize), and
/// `dt_print_quantize` looks for the first non-zero bucket below the last one: alone, the top
/// bucket prints as an empty distribution around 0, with a lower value it is shown. dtx does
/// both as dtrace does; this was no difference.
#[test]
fn quantize_counts_the_top_bucket() {
    let out = ok("BEGIN { @ = quantize(1LL << 62); @ = quantize(1); exit(0); }");
    let top = out
        .lines()
        .find(|l| l.trim_start().starts_with("4611686018427387904 |"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(top.trim_end().ends_with(" 1"), "{out}");
    let alone = ok("BEGIN { @ = quantize(1LL << 62); exit(0); }");
    assert!(!alone.contains("4611686018427387904"), "{alone}");
    assert!(alone.contains("               0 |"), "{alone}");
}

// --- the preprocessor --------------------------------------------------------------------

/// dt_cc.c, dt_preproc: `__STDC__` is 0 in the default -Xa mode (and -Xt), 1 with -Xc, and
/// undefined with -Xs.
#[test]
fn cpp_defines_stdc() {
    let prog =
        "BEGIN { \n#ifdef __STDC__\ntrace(__STDC__);\n#else\ntrace(\"none\");\n#endif\n exit(0); }";
    for (opts, want) in [
        (&[][..], "0"),
        (&["-xstdc=c"][..], "1"),
        (&["-Xc"][..], "1"),
        (&["-Xt"][..], "0"),
        (&["-Xs"][..], "none"),
    ] {
        let mut args = vec!["-q", "-C"];
        args.extend_from_slice(opts);
        args.extend_from_slice(&["-n", prog]);
        let (rc, out, err) = run(&args);
        assert_eq!(rc, 0, "{opts:?}: {err}");
        assert_eq!(out.trim_end(), want, "{opts:?}");
    }
}

/// dt_lex.l, input(): the end of input inside a control line is an error.
#[test]
fn pragma_at_end_of_file_needs_its_newline() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let f = dir.join("p.d");
    std::fs::write(&f, "BEGIN { exit(0); }\n#pragma D option quiet").unwrap();
    let (rc, _, err) = run(&["-xerrtags", "-s", f.to_str().unwrap()]);
    assert_eq!(rc, 1, "{err}");
    assert!(
        err.contains("[D_SYNTAX] line 2: end-of-file encountered before end of control line"),
        "{err}"
    );
    std::fs::write(&f, "BEGIN { exit(0); }\n#pragma D option quiet\n").unwrap();
    let (rc, out, err) = run(&["-s", f.to_str().unwrap()]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out.trim(), "");
}

// --- compile-error messages --------------------------------------------------------------

/// Messages whose text differed from the format libdtrace gives them (each from the function
/// named), found by comparing dtx's message for every err.* test of the illumos suite with
/// libdtrace's format strings for the test's tag.
#[test]
fn compile_error_messages_follow_libdtrace() {
    for (prog, want) in [
        // dt_cook_op2 (DT_TOK_ASGN)
        (
            "BEGIN { @a = count(); }\nBEGIN { @a = max(1); }",
            "[D_AGG_REDEF] line 2: aggregation redefined: @a\n\t current: @a = max( )\n\
             \tprevious: @a = count( ) : line 1",
        ),
        // dt_idcook_assc
        (
            "BEGIN { @a[1, (void)0] = count(); }",
            "[D_KEY_TYPE] line 1: void expression may not be used as aggregation index: key #2",
        ),
        // dt_cook_op2 (DT_TOK_LBRAC), dt_node_name
        (
            "int x[5];\nBEGIN { x[1, 2] = 1; }",
            "[D_ARR_BADREF] line 2: cannot access scalar x as an associative array",
        ),
        // dt_decl_prototype
        (
            "int x[void, char];",
            "[D_DECL_PROTO_TYPE] line 1: array prototype may not use parameter of type void: \
             (anonymous), parameter #1",
        ),
        (
            "int a(int b[int]);",
            "[D_DECL_PROTO_TYPE] line 1: function prototype may not use parameter of type \
             <DYN>: b, parameter #1",
        ),
        // dt_decl_member
        (
            "struct s { string b : 2; };",
            "[D_DECL_BFTYPE] line 1: invalid type for bit-field: b",
        ),
        // dt_node_decl
        (
            "int `xyz;",
            "[D_DECL_SCOPE] line 1: D scoping operator may not be used in a declaration name \
             (`xyz)",
        ),
        // dt_node_xlator
        (
            "translator int < int x > { };",
            "[D_XLATE_SOU] line 1: translator output type must be a struct or union",
        ),
        // dt_cook_op2 (DT_TOK_LBRAC)
        (
            "BEGIN { this->x[1] = 1; }",
            "[D_ARR_LOCAL] line 1: local variables may not be used as associative arrays: x",
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let f = dir.join("e.d");
        std::fs::write(&f, format!("{prog}\n")).unwrap();
        let (rc, _, err) = run(&["-xerrtags", "-s", f.to_str().unwrap()]);
        assert_eq!(rc, 1, "{prog}: {err}");
        let at = err.find(": [").map_or(0, |i| i + 2);
        assert_eq!(err[at..].trim_end(), want, "{prog}");
    }
}
