//! Classes of D behaviour checked against dtrace's own sources (illumos `dtrace.c`,
//! `dt_consume.c`, `dt_cc.c`, `dt_decl.c`, `dt_lex.l`, libctf's `ctf_create.c`): each test
//! runs small D programs through the `dtx` binary and compares what dtrace's code does, byte
//! for byte. The expected values are worked out from those sources in the comments.

use std::ffi::OsStr;
use std::process::Output;

use crate::support::cli;

/// A D script written to a temporary file (`tempfile`'s, removed when dropped).
struct Script(tempfile::TempPath);

impl Script {
    fn new(src: &str) -> Script {
        let p = (tempfile::Builder::new().prefix("dtx-classes-").suffix(".d"))
            .tempfile()
            .expect("create script")
            .into_temp_path();
        std::fs::write(&p, src).expect("write script");
        Script(p)
    }
}

/// Runs `src` as a script (`dtx -xerrtags [extra] -s file`).
fn run(src: &str, extra: &[&str]) -> Output {
    let s = Script::new(src);
    let mut args = vec![OsStr::new("-xerrtags")];
    args.extend(extra.iter().map(OsStr::new));
    args.extend([OsStr::new("-s"), s.0.as_os_str()]);
    cli::dtx(&args)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs a quiet script that must succeed; returns its standard output (with the newline
/// dtrace adds when tracing ends after output that did not end a line with a `printf`).
fn quiet_ok(src: &str) -> String {
    let o = run(&format!("#pragma D option quiet\n{src}"), &[]);
    assert!(o.status.success(), "{src}\nstderr: {}", stderr(&o));
    stdout(&o)
}

/// The compile error of `src` (the text after `failed to compile script F: `).
fn compile_error(src: &str) -> String {
    let o = run(src, &[]);
    assert_eq!(o.status.code(), Some(1), "{src}");
    let e = stderr(&o);
    let (_, msg) = e
        .split_once(": failed to compile script ")
        .unwrap_or_else(|| panic!("no compile error: {e}"));
    let (_, msg) = msg.split_once(": ").expect("file name");
    msg.trim_end().to_string()
}

/// Builds each address's bytes in a clause-local buffer and prints `call` for it, with
/// `ADDR` in `call` standing for the buffer; returns the lines printed.
fn ipv6_lines(call: &str, addrs: &[[u8; 16]]) -> Vec<String> {
    let mut src = String::from("BEGIN {\n");
    for a in addrs {
        src.push_str("this->a = (uint8_t *)alloca(16);\n");
        for (i, b) in a.iter().enumerate() {
            if *b != 0 {
                src.push_str(&format!("this->a[{i}] = {b};\n"));
            }
        }
        let c = call.replace("ADDR", "this->a");
        src.push_str(&format!("printf(\"%s\\n\", {c});\n"));
    }
    src.push_str("exit(0);\n}\n");
    quiet_ok(&src)
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// An IPv6 address from its eight 16-bit groups.
fn v6(groups: [u16; 8]) -> [u8; 16] {
    let mut b = [0u8; 16];
    for (i, g) in groups.iter().enumerate() {
        b[2 * i..2 * i + 2].copy_from_slice(&g.to_be_bytes());
    }
    b
}

/// An IPv4 address in the last four bytes after `prefix` (`0xffff` for v4-mapped).
fn v4_in_v6(prefix: u16, quad: [u8; 4]) -> [u8; 16] {
    let mut b = v6([0, 0, 0, 0, 0, prefix, 0, 0]);
    b[12..].copy_from_slice(&quad);
    b
}

#[test]
fn inet_ntoa6_of_every_ipv6_form() {
    // dtrace_dif_subr's DIF_SUBR_INET_NTOA6: the first longest run of zero groups becomes
    // "::" (a run of one group too, except a lone zero group at the very end, which the
    // byte scan never closes); IPv4-mapped and IPv4-compatible (not :: or ::1) addresses
    // are written as the IPv4 quad alone.
    let cases: Vec<([u8; 16], &str)> = vec![
        (v6([0; 8]), "::"),
        (v6([0, 0, 0, 0, 0, 0, 0, 1]), "::1"),
        (v4_in_v6(0xffff, [192, 168, 0, 1]), "192.168.0.1"),
        (v4_in_v6(0, [10, 0, 0, 1]), "10.0.0.1"),
        (v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1]), "2001:db8::1"),
        (v6([1, 0, 2, 3, 4, 5, 6, 7]), "1::2:3:4:5:6:7"),
        (v6([1, 2, 3, 4, 5, 6, 7, 0]), "1:2:3:4:5:6:7:0"),
        (v6([1, 2, 3, 4, 5, 6, 0, 0]), "1:2:3:4:5:6::"),
        (v6([1, 0, 0, 0, 0, 0, 0, 0]), "1::"),
        (v6([1, 0, 0, 1, 0, 0, 0, 1]), "1:0:0:1::1"),
        // two runs of two groups: the first is compressed...
        (v6([1, 0, 0, 0x200, 3, 0, 0, 0x400]), "1::200:3:0:0:400"),
        // ...unless the second is followed by a zero byte: the byte scan counts it, and the
        // second run looks longer
        (v6([1, 0, 0, 2, 3, 0, 0, 4]), "1:0:0:2:3::4"),
        (
            v6([0xfe80, 0, 0, 0, 0x214, 0x4fff, 0xfe0b, 0x76c8]),
            "fe80::214:4fff:fe0b:76c8",
        ),
        (
            v6([
                0xabcd, 0xef01, 0x2345, 0x6789, 0xabcd, 0xef01, 0x2345, 0x6789,
            ]),
            "abcd:ef01:2345:6789:abcd:ef01:2345:6789",
        ),
    ];
    let addrs: Vec<[u8; 16]> = cases.iter().map(|c| c.0).collect();
    let got = ipv6_lines("inet_ntoa6((struct in6_addr *)ADDR)", &addrs);
    let want: Vec<String> = cases.iter().map(|c| c.1.to_string()).collect();
    assert_eq!(got, want);
}

#[test]
fn inet_ntop_keeps_the_ipv6_prefix_of_embedded_ipv4() {
    let addrs = [
        v4_in_v6(0xffff, [192, 168, 0, 1]),
        v4_in_v6(0, [10, 0, 0, 1]),
        v6([0, 0, 0, 0, 0, 0, 0, 1]),
    ];
    // AF_INET6 is the value of the system dtx runs on; inet_ntop takes it
    let got = ipv6_lines("inet_ntop(AF_INET6, (void *)ADDR)", &addrs);
    assert_eq!(got, ["::ffff:192.168.0.1", "::10.0.0.1", "::1"]);
}

#[test]
fn substr_indexes_as_dtrace_clamps_them() {
    // DIF_SUBR_SUBSTR: a negative index counts from the end; a negative length leaves that
    // many characters off the end; out of range gives ""
    let out = quiet_ok(
        r#"BEGIN {
            printf("[%s][%s][%s][%s][%s][%s][%s]\n",
                substr("hello", -2), substr("hello", 1, -1), substr("hello", 10),
                substr("hello", -10, 3), substr("hello", -7, 4), substr("hello", 2, 100),
                substr("", 0));
            exit(0);
        }"#,
    );
    // -7 + 5 = -2, and -2 + 4 > 0: the length shrinks by 2 and the index becomes 0
    assert_eq!(out, "[lo][ell][][][he][llo][]\n\n");
}

#[test]
fn strings_hold_strsize_bytes_without_a_nul() {
    // dtrace_strlen() bounds a string by strsize: a string of exactly strsize bytes keeps
    // them all (json/tst.strsize.d); substr() keeps strsize - 1 for its NUL; strjoin() of
    // more than strsize - 1 bytes runs out of scratch space
    let out = quiet_ok(
        r#"BEGIN {
            s = "abcdefghijk";
            printf("[%s] %d [%s] [%s]\n", s, strlen(s), substr("abcdefghijkl", 1),
                strjoin("abc", "defg"));
            exit(0);
        }"#
        .replace("BEGIN", "#pragma D option strsize=8\nBEGIN")
        .as_str(),
    );
    assert_eq!(out, "[abcdefgh] 8 [bcdefgh] [abcdefg]\n\n");
    let o = run(
        "#pragma D option strsize=8\nBEGIN { trace(strjoin(\"abcd\", \"efgh\")); }\n\
         ERROR { exit(0); }\n",
        &["-q"],
    );
    assert!(
        stderr(&o).contains("out of scratch space in action #1"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn strtok_and_strlen_edges() {
    let out = quiet_ok(
        r#"BEGIN {
            printf("[%s]", strtok("a,b,,c", ","));
            printf("[%s]", strtok(NULL, ","));
            printf("[%s]", strtok(NULL, ","));
            /* no token left is NULL: it compares as "" (dtrace_strncmp) and faults where
               it is read (tests/illumos_differences.rs) */
            printf("[%d]", strtok(NULL, ",") == "");
            printf("[%d][%d]", strtok("", ",") == "", strtok(",,,", ",") == "");
            printf(" %d %d [%s][%s]\n", strlen(""), strlen("abc"), strjoin("", ""),
                strjoin("a", ""));
            exit(0);
        }"#,
    );
    assert_eq!(out, "[a][b][c][1][1][1] 0 3 [][a]\n\n");
}

#[test]
fn bit_fields_are_laid_out_as_libctf_lays_them_out() {
    // ctf_add_member(): each member starts at the previous one's end rounded up to a byte,
    // then to its alignment; a bit-field is an integer of clp2(bytes) (a 40-bit field is 8
    // bytes, aligned to 8); the struct ends where its last member ends (no tail padding)
    let out = quiet_ok(
        r#"struct s1 { int a; char b; };
        struct s2 { int a:3; unsigned b:3; int c:1; unsigned long long d:64;
            long long e:40; char f:2; char g; };
        struct s3 { char a; int b:4; };
        struct s4 { unsigned int a:1; unsigned int b:31; unsigned int c:1; };
        BEGIN {
            printf("%d %d %d %d %d %d\n", sizeof (struct s1), sizeof (struct s2),
                offsetof(struct s2, g), sizeof (struct s3), sizeof (struct s4),
                offsetof(struct s1, b));
            exit(0);
        }"#,
    );
    assert_eq!(out, "5 23 22 2 9 4\n\n");
}

#[test]
fn bit_fields_read_signed_and_unsigned_and_print() {
    let out = quiet_ok(
        r#"struct bf { int a:3; unsigned int b:3; int c:1; unsigned long long d:64;
            long long e:40; char f:2; };
        struct bf2 { unsigned int a:1; unsigned int b:31; unsigned int c:1; };
        struct bf x;
        struct bf2 y;
        BEGIN {
            x.a = 7; x.b = 7; x.c = 1; x.d = 0xffffffffffffffff; x.e = -2; x.f = 3;
            printf("%d %d %d %u %d %d\n", x.a, x.b, x.c, x.d, x.e, x.f);
            x.a = 4; x.b = 9;
            printf("%d %d\n", x.a, x.b);
            y.b = 0x7fffffff; y.c = 1;
            printf("%d %d %d\n", y.a, y.b, y.c);
            print(x);
            exit(0);
        }"#,
    );
    // a signed field sign-extends from its width; a store keeps only the width's bits;
    // print() names a field's width when it is not a whole power-of-two integer
    // (dt_print_member) and shows its bits unextended (print_bitfield)
    assert_eq!(
        out,
        "-1 7 -1 18446744073709551615 -2 -1\n-4 1\n0 2147483647 1\n\
         struct bf {\n    int a :3 = 0x4\n    unsigned int b :3 = 0x1\n    int c :1 = 0x1\n    \
         unsigned long long d = 0xffffffffffffffff\n    long long e :40 = 0xfffffffffe\n    \
         char f :2 = 0x3\n}\n"
    );
}

#[test]
fn trace_prints_by_record_size() {
    // dt_consume_cpu() prints a trace() record by its size alone: 1 and 2 bytes unsigned,
    // 4 and 8 bytes signed; an 8-byte struct is printed as an integer too
    let out = quiet_ok(
        r#"struct p { char c; short s; int i; };
        struct p v;
        BEGIN {
            trace((char)-1); trace(" "); trace((unsigned char)255); trace(" ");
            trace((short)-2); trace(" "); trace((unsigned short)65535); trace(" ");
            trace((int)-3); trace(" "); trace((unsigned int)4294967295); trace(" ");
            trace((long long)-4); trace(" "); trace((unsigned long long)18446744073709551615);
            trace(" ");
            v.c = 1; v.s = 2; v.i = 3;
            trace(v);
            exit(0);
        }"#,
    );
    assert_eq!(out, "255 255 65534 65535 -3 -1 -4 -1 12885032961\n");
    // without -q each width has its column
    let o = run(
        "BEGIN { trace((char)1); trace((short)2); trace(3); trace(4LL); exit(0); }",
        &[],
    );
    let text = stdout(&o);
    let line = text.lines().nth(1).expect("firing line");
    assert!(
        line.ends_with(":BEGIN    1     2        3                4"),
        "{line:?}"
    );
}

#[test]
fn speculation_buffers_are_sized_by_the_ecb() {
    // four printf()s without arguments record 8 bytes each: the speculating ECB needs
    // 12 + 4 + 32 = 48 bytes, more than specsize=40; the firing is dropped whole, its
    // variable update included (CPU_DTRACE_DROP ends the action loop)
    let src = |opt: &str| {
        format!(
            "#pragma D option quiet\n#pragma D option {opt}\n\
             BEGIN {{ self->spec = speculation(); }}\n\
             BEGIN {{ speculate(self->spec); printf(\"a\"); printf(\"b\"); printf(\"c\");\n\
                 printf(\"d\"); self->ran++; }}\n\
             BEGIN /self->ran/ {{ commit(self->spec); }}\n\
             BEGIN {{ printf(\"ran %d\\n\", self->ran); exit(0); }}\n"
        )
    };
    let o = run(&src("specsize=40"), &[]);
    assert_eq!(stdout(&o), "ran 0\n\n");
    assert!(stderr(&o).contains("1 speculative drop"), "{}", stderr(&o));
    let o = run(&src("specsize=48"), &[]);
    assert_eq!(stdout(&o), "abcdran 1\n\n");
    assert!(!stderr(&o).contains("drop"), "{}", stderr(&o));
}

#[test]
fn speculate_on_an_inactive_or_unknown_buffer_drops_silently() {
    // dtrace_speculation_buffer() gives no buffer: the firing is dropped, nothing is
    // reported (the illegal-operation flag of an id past nspec is lost with the drop)
    for id in ["1", "3456710", "-1"] {
        let o = run(
            &format!(
                "#pragma D option quiet\nBEGIN {{ speculate({id}); self->i++; }}\n\
                 BEGIN {{ printf(\"%d\\n\", self->i); exit(0); }}\nERROR {{ exit(1); }}\n"
            ),
            &[],
        );
        assert!(o.status.success(), "{id}: {}", stderr(&o));
        assert_eq!(stdout(&o), "0\n\n", "{id}");
        assert_eq!(stderr(&o), "", "{id}");
    }
}

#[test]
fn a_firing_that_does_not_fit_the_principal_buffer_is_dropped() {
    // bufsize=49 is 48 bytes: the first ECB keeps 16, the second needs 12 + 4 + 32 = 48
    let o = run(
        "#pragma D option quiet\n#pragma D option bufsize=49\n\
         BEGIN { printf(\"%d\", 1); }\n\
         BEGIN { printf(\"a\"); printf(\"b\"); printf(\"c\"); printf(\"d\"); self->x = 1; }\n\
         BEGIN { printf(\"%d\\n\", self->x); exit(0); }\n",
        &[],
    );
    assert_eq!(stdout(&o), "10\n\n");
    assert!(stderr(&o).contains("1 drop on CPU 0"), "{}", stderr(&o));
}

#[test]
fn an_error_firing_counts_in_what_its_firing_reserves() {
    // bufsize=57 is 56 bytes. The three BEGIN clauses together need less than that, so only
    // the ERROR firing of the second one's fault can overflow: the first ECB keeps 16 bytes,
    // then ERROR's four printf()s need 12 + 4 * 8 = 44 more and are dropped; exit() fits.
    // (A VM that skipped the reservation because each probe's own clauses fit would print
    // them.)
    let o = run(
        "#pragma D option quiet\n#pragma D option bufsize=57\n\
         BEGIN { printf(\"%d\", 1); }\n\
         BEGIN { x = *(int *)0; }\n\
         BEGIN { exit(0); }\n\
         ERROR { printf(\"a\"); printf(\"b\"); printf(\"c\"); printf(\"d\"); }\n",
        &[],
    );
    assert_eq!(stdout(&o), "1\n");
    let e = stderr(&o);
    assert!(e.contains("1 drop on CPU 0"), "{e}");
    assert!(e.contains("invalid address (0x0)"), "{e}");
}

#[test]
fn setopt_and_freopen_argument_checks() {
    let o = run(
        "#pragma D option quiet\nBEGIN { setopt(\"nonexistent\"); setopt(\"quiet\", \"maybe\");\n\
         printf(\"after\\n\"); exit(0); }\n",
        &[],
    );
    assert_eq!(stdout(&o), "after\n\n");
    let e = stderr(&o);
    assert!(
        e.contains("couldn't set option \"nonexistent\" to \"1\": Invalid option name\n\n"),
        "{e}"
    );
    assert!(
        e.contains(
            "couldn't set option \"quiet\" to \"maybe\": Invalid value for specified option"
        ),
        "{e}"
    );
    assert_eq!(
        compile_error("BEGIN { freopen(\".\"); }"),
        "[D_FREOPEN_INVALID] line 1: freopen( ) argument #1 cannot be \".\""
    );
    // freopen() is destructive
    let o = run("BEGIN { freopen(\"/dev/null\"); exit(0); }", &[]);
    assert!(stderr(&o).contains("Destructive actions not allowed"));
}

#[test]
fn freopen_sends_the_output_to_a_file_and_back() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let file = tmp.path().join("freopen");
    // a D string: Windows' backslashes escaped
    let name = file.display().to_string().replace('\\', "\\\\");
    let o = run(
        &format!(
            "#pragma D option quiet\n#pragma D option destructive\n\
             BEGIN {{ printf(\"one\\n\"); freopen(\"{name}\"); printf(\"two\\n\"); }}\n\
             BEGIN {{ freopen(\"\"); printf(\"three\\n\");\n\
                 freopen(\"/nonexistent-dir-dtx/x\"); printf(\"four\\n\"); exit(0); }}\n"
        ),
        &[],
    );
    let written = std::fs::read_to_string(&file).unwrap_or_default();
    assert_eq!(stdout(&o), "one\nthree\nfour\n\n");
    assert_eq!(written, "two\n");
    assert!(
        stderr(&o)
            .contains("couldn't freopen() \"/nonexistent-dir-dtx/x\": No such file or directory"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn error_tags_of_declarations_and_types() {
    let cases = [
        (
            "typedef int foo_t; typedef char foo_t;",
            "[D_DECL_IDRED] line 1: identifier redeclared: foo_t",
        ),
        (
            "translator int < int x > { y = 1; };",
            "[D_XLATE_SOU] line 1: translator output type must be a struct or union",
        ),
        (
            "enum e { A = 2147483647, B };",
            "[D_DECL_ENOFLOW] line 1: enumerator 'B' value overflows INT_MAX (2147483647)",
        ),
        (
            "BEGIN { trace('ab\n'); }",
            "[D_CHR_NL] line 1: newline encountered in character constant",
        ),
        (
            "BEGIN { trace(''); }",
            "[D_CHR_NULL] line 1: empty character constant",
        ),
        // dt_cg_arglist(): more keys than the 8 tuple registers is a library error, with
        // no tag and no line
        (
            "BEGIN { a[0, 1, 2, 3, 4, 5, 6, 7, 8] = 0; }",
            "Insufficient tuple registers to generate code",
        ),
    ];
    for (src, want) in cases {
        assert_eq!(compile_error(src), want, "{src}");
    }
    // eight keys fit
    let o = run("BEGIN { a[0, 1, 2, 3, 4, 5, 6, 7] = 1; exit(0); }", &["-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn function_types_declared_in_d_are_int_returning() {
    // dt_decl_type(): every function D declares is libdtrace's one representative function
    // type, CTF's `int ()`, whatever its return type and parameters
    let out = quiet_ok(
        r#"struct f { void (*g)(); char *(*h)(int, int); };
        struct f v;
        BEGIN { v.g = (void *)8; print(v); exit(0); }"#,
    );
    assert_eq!(
        out,
        "struct f {\n    int (*)() g = 0x8\n    int (*)() h = 0\n}\n"
    );
}

#[test]
fn constants_are_typed_as_dtrace_types_them() {
    // dt_node_int(): decimal constants try int, long, long long; others add the unsigned
    // types; a character constant is an int, several characters packed big-end first
    let out = quiet_ok(
        r#"BEGIN {
            printf("%d %d %d %d %d %d %d %d %d\n", sizeof (1), sizeof (1L), sizeof ('a'),
                sizeof (0x80000000), sizeof (2147483648), sizeof (4294967296),
                sizeof (1UL), sizeof ("abc"), 'ab');
            exit(0);
        }"#,
    );
    assert_eq!(out, "4 8 4 4 8 8 8 4 24930\n\n");
}

#[test]
fn lexer_edges_at_end_of_file() {
    assert_eq!(
        compile_error("BEGIN { exit(0); } /* unterminated"),
        "[D_SYNTAX] line 1: end-of-file encountered before matching */"
    );
    assert_eq!(
        compile_error("BEGIN { trace(\"abc"),
        "[D_STR_NL] line 1: newline encountered in string literal"
    );
    // "#pragma D" with nothing after it is no pragma at all (dt_pragma() ignores it)
    assert_eq!(
        compile_error("#pragma D option quiet\n#pragma D\n"),
        "[D_EMPTY] line 3: empty D program translation unit"
    );
    // and a control line must end in a newline (dt_lex.l, input())
    assert_eq!(
        compile_error("#pragma D option quiet\n#pragma D"),
        "[D_SYNTAX] line 2: end-of-file encountered before end of control line"
    );
}

#[test]
fn records_wait_for_an_explicit_switchrate() {
    // dtrace's consumer takes the buffers once per switchrate and printa() shows the
    // aggregation as it is then (misc/tst.dynopt.d): with a 10 s switch, the records after
    // the first switch are all taken at the end, when the count is 5
    let out = quiet_ok(
        "#pragma D option switchrate=10sec\n\
         tick-10ms { @ = count(); printa(\"%@d\\n\", @); }\n\
         tick-10ms /++i == 5/ { exit(0); }\n",
    );
    assert_eq!(out, "1\n5\n5\n5\n5\n\n");
}
