//! D as Windows users write it (issue 32): the compiler rules their scripts hit, each checked
//! against libdtrace's source (the function is named at each test), and Microsoft's spellings
//! of kernel types. Every test runs a minimal repro through the `dtx` binary.

use crate::support::cli;
use crate::support::etl;
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

/// `%ws` takes any integer array of `wchar_t`'s width (libdtrace dt_printf.c, pfcheck_wstr:
/// an array whose element is an integer of NBBY * sizeof (wchar_t) bits), not only `wchar_t[]`.
#[test]
fn printf_ws_takes_a_uint16_array() {
    let out = ok("uint16_t a[3]; short b[2]; \
                  BEGIN { a[0] = 0x41; a[1] = 0x42; a[2] = 0; b[0] = 0x43; b[1] = 0; \
                  printf(\"%ws|%ls\\n\", a, b); exit(0); }");
    assert_eq!(out, "AB|C");
    // an array of bytes is still not a wide string
    let (rc, _, err) = d("uint8_t c[2]; BEGIN { printf(\"%ws\\n\", c); exit(0); }");
    assert_eq!(rc, 1);
    assert!(
        err.contains("argument #2 is incompatible with conversion #1"),
        "{err}"
    );
}

/// `(string)` of a scalar, a pointer or a char array (dt_parser.c, dt_cook_op2, DT_TOK_LPAR:
/// `dt_node_is_string(lp) && (dt_node_is_scalar(rp) || dt_node_is_pointer(rp) ||
/// dt_node_is_strcompat(rp))`).
#[test]
fn casts_to_string() {
    let out = ok("BEGIN { printf(\"%s|\", (string)curpsinfo->pr_fname); \
                  p = (char *)alloca(3); p[0] = 'h'; p[1] = 'i'; p[2] = 0; \
                  printf(\"%s\\n\", (string)p); exit(0); }");
    // the process's name: `dtx`, `dtx.exe` on Windows
    assert!(out.starts_with("dtx") && out.ends_with("|hi"), "{out}");
    // an integer compiles too (its value is the string's address)
    let (rc, _, err) = d("BEGIN { x = (string)arg0; exit(0); }");
    assert!(!err.contains("invalid cast"), "{err}");
    assert_eq!(rc, 0, "{err}");
    // a struct is not a string
    let (rc, _, err) = d("BEGIN { trace((string)*curpsinfo); exit(0); }");
    assert_eq!(rc, 1);
    assert!(err.contains("invalid cast expression"), "{err}");
}

/// An expression statement is a void DIFEXPR (dt_cc.c, dt_compile_exp sets `dtdo_rtype` to
/// `dt_void_rtype`), which dt_stmt_append does not count as data-recording: it may follow
/// commit(). exit() still may not (err.D_DREC_COMM.ExitAfterCommit).
#[test]
fn an_expression_statement_may_follow_commit() {
    let (rc, _, err) = d("BEGIN { s = speculation(); } \
                          BEGIN { commit(s); strlen(\"x\"); x = 1; } BEGIN { exit(0); }");
    assert_eq!(rc, 0, "{err}");
    let (rc, _, err) = d("BEGIN { s = speculation(); } BEGIN { commit(s); exit(0); }");
    assert_eq!(rc, 1);
    assert!(
        err.contains("data-recording actions may not follow commit( )"),
        "{err}"
    );
}

/// `,`, `&&` and `||` free their left operand's register before the right one is evaluated
/// (dt_cg.c: DT_TOK_COMMA, dt_cg_logical_and, dt_cg_logical_or), so right-nested chains
/// compile however deep; `+` holds its left operand and still runs out of registers.
#[test]
fn comma_and_logical_chains_need_no_extra_registers() {
    assert_eq!(
        ok("BEGIN { trace((1, (2, (3, (4, (5, (6, (7, 8)))))))); exit(0); }"),
        "8"
    );
    assert_eq!(
        ok(
            "BEGIN { trace(1 && (1 && (1 && (1 && (1 && (1 && (1 && (1 && 1)))))))); \
            exit(0); }"
        ),
        "1"
    );
    assert_eq!(
        ok(
            "BEGIN { trace(0 || (0 || (0 || (0 || (0 || (0 || (0 || (0 || 1)))))))); \
            exit(0); }"
        ),
        "1"
    );
    let (rc, _, err) = d("BEGIN { trace(1 + (1 + (1 + (1 + (1 + (1 + (1 + 1))))))); exit(0); }");
    assert_eq!(rc, 1);
    assert!(err.contains("Insufficient registers"), "{err}");
}

/// A script's own declarations shadow dtx's built-in Windows types, which sit in a lower
/// scope as the kernel's types do in dtrace (libdtrace looks in the D container before the
/// modules'): Microsoft's IoCreateDevice sample declares its own `UNICODE_STRING`.
#[test]
fn a_script_declares_its_own_unicode_string() {
    let out = ok(
        "typedef struct _UNICODE_STRING { uint16_t Length; uint16_t MaximumLength; \
                  uint32_t Pad; } UNICODE_STRING; \
                  BEGIN { printf(\"%d %d\\n\", sizeof (UNICODE_STRING), \
                  sizeof (struct _UNICODE_STRING)); exit(0); }",
    );
    assert_eq!(out, "8 8");
    // the library's stays reachable by its scope
    let out = ok(
        "typedef struct _UNICODE_STRING { uint16_t Length; } UNICODE_STRING; \
                  BEGIN { printf(\"%d %d\\n\", sizeof (UNICODE_STRING), \
                  sizeof (nt`UNICODE_STRING)); exit(0); }",
    );
    assert_eq!(out, "2 16");
    // a second declaration in the script is still a redeclaration
    let (rc, _, err) = d("struct _GUID { int a; }; struct _GUID { int b; }; BEGIN { exit(0); }");
    assert_eq!(rc, 1);
    assert!(err.contains("type redeclared: struct _GUID"), "{err}");
}

/// ``nt`X`` names `struct X` when no typedef `X` exists, as Microsoft's scripts write kernel
/// types (``nt`_GUID``, ``nt`_OBJECT_ATTRIBUTES``).
#[test]
fn a_scoped_tag_names_its_struct() {
    let out = ok(
        "BEGIN { this->g = (nt`_GUID *)alloca(16); this->g->Data1 = 7; \
                  printf(\"%d %d\\n\", sizeof (nt`_GUID), this->g->Data1); exit(0); }",
    );
    assert_eq!(out, "16 7");
}

/// `execargs` and `threadname` read what the source knows of the process and thread (in BEGIN,
/// dtx's own), rather than faulting on every use.
#[test]
fn execargs_and_threadname_do_not_fault() {
    let (rc, out, err) = d("BEGIN { printf(\"[%s][%s]\\n\", execargs, threadname); exit(0); }");
    assert_eq!(rc, 0, "{err}");
    assert!(!err.contains("illegal operation"), "{err}");
    assert!(
        out.starts_with('[') && out.trim_end().ends_with(']'),
        "{out}"
    );
}

/// The common Windows typedefs are there with no scope, at Windows' x64 sizes, and with the
/// kernel's (``nt`PSIZE_T``); a script may declare any of them itself.
#[test]
fn windows_typedefs_are_known() {
    let out = ok(
        "BEGIN { printf(\"%d %d %d %d %d %d %d\\n\", sizeof (NTSTATUS), \
                  sizeof (HANDLE), sizeof (ULONG), sizeof (ULONG_PTR), sizeof (nt`PSIZE_T), \
                  sizeof (BOOLEAN), sizeof (OBJECT_ATTRIBUTES)); exit(0); }",
    );
    assert_eq!(out, "4 8 4 8 8 1 48");
    let out = ok("typedef uint64_t ULONG; BEGIN { trace(sizeof (ULONG)); exit(0); }");
    assert_eq!(out, "8");
}

/// The shape of Microsoft's IoCreateDevice sample: its own `UNICODE_STRING` typedef, a
/// ``nt`_GUID`` and `NTSTATUS` with no scope, all in one script that compiles.
#[test]
fn an_io_create_device_style_script_compiles() {
    let (rc, out, err) = run(&[
        "-q",
        "-e",
        "-n",
        "typedef struct _UNICODE_STRING { USHORT Length; USHORT MaximumLength; PWSTR Buffer; } \
         UNICODE_STRING; \
         typedef UNICODE_STRING *PUNICODE_STRING; \
         BEGIN { this->name = (PUNICODE_STRING)alloca(sizeof (UNICODE_STRING)); \
         this->guid = (nt`_GUID *)alloca(sizeof (nt`_GUID)); \
         this->status = (NTSTATUS)0xC0000022; \
         printf(\"%d %x %d\\n\", this->name->Length, this->status, this->guid->Data1); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out, "");
}

/// Rows of `  key   count` from a printa() of one key: (key, count).
fn rows(out: &str) -> Vec<(String, u64)> {
    out.lines()
        .filter_map(|l| {
            let (k, n) = l.trim().rsplit_once(char::is_whitespace)?;
            Some((k.trim().to_string(), n.parse().ok()?))
        })
        .collect()
}

/// `mod()` keys are merged by module and print the module's name alone, as dtrace's consumer
/// does (dt_aggregate.c, dt_aggregate_mod; dt_consume.c, dt_print_mod): over the xperf trace,
/// with no kernel PDB, `sym()` leaves one row per address, and `mod()` gives one
/// `ntoskrnl.exe` row whose count is their sum. trunc() keeps the top merged rows.
#[test]
fn mod_keys_merge_by_module() {
    let Some(t) = etl::trace("randomascii_slow_ppt_trace.etl.zip") else {
        return;
    };
    let by_sym = rows(&etl::quiet(&t, "profile-997 { @[sym(arg0)] = count(); }"));
    let nt: Vec<&(String, u64)> = by_sym
        .iter()
        .filter(|(k, _)| k.starts_with("ntoskrnl.exe+0x"))
        .collect();
    assert!(nt.len() > 10, "{by_sym:?}");
    let sum: u64 = nt.iter().map(|(_, n)| n).sum();
    let by_mod = rows(&etl::quiet(&t, "profile-997 { @[mod(arg0)] = count(); }"));
    let named: Vec<&(String, u64)> = by_mod.iter().filter(|(k, _)| k == "ntoskrnl.exe").collect();
    assert_eq!(named.len(), 1, "{by_mod:?}");
    assert_eq!(named[0].1, sum);
    assert!(by_mod.iter().all(|(k, _)| !k.contains("+0x")), "{by_mod:?}");
    // trunc() ranks the merged rows: the module, not its hottest address
    let top = rows(&etl::quiet(
        &t,
        "profile-997 { @[mod(arg0)] = count(); } END { trunc(@, 1); }",
    ));
    assert_eq!(top, vec![("ntoskrnl.exe".to_string(), sum)]);
}

/// A clause on `syscall:::entry` that reads `arg1`..`arg9` or `args[]` is told, before the run,
/// that ETW records no system-call arguments (Microsoft's in-kernel provider fills them; ETW's
/// SysClEnter carries only the routine's address). `arg0` and return probes are not.
#[test]
fn syscall_entry_arguments_are_said_to_be_zero() {
    let Some(t) = etl::trace("randomascii_slow_ppt_trace.etl.zip") else {
        return;
    };
    // the trace recorded no system calls: -Z lets the probes match none
    let (rc, _, err) = run(&[
        "-q",
        "-Z",
        "-E",
        &t,
        "-n",
        "syscall::NtReadFile:entry { @[arg0] = count(); }\n\
         syscall::NtReadFile:entry /arg2 > 0/ { @s[execname] = sum(arg3); }\n\
         syscall:::return { @r = sum(arg1); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning:")).collect();
    assert_eq!(
        warnings,
        vec![
            "dtx: warning: the clause for syscall::NtReadFile:entry reads arg2, arg3, \
             but ETW records no system-call arguments: on entry only arg0 (the service \
             routine's address) is set, the others are 0"
        ],
        "{err}"
    );
}

/// A `-c` command dies with dtx when dtx ends first (`exit()` here), as dtrace kills a process
/// it created (dt_proc.c: a created process is released with PRELEASE_KILL).
#[cfg(target_os = "linux")]
#[test]
fn a_c_command_ends_with_dtx() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let script = dir.join("spin.sh");
    let pidfile = dir.join("pid");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $$ > {}\nwhile :; do :; done\n",
            pidfile.display()
        ),
    )
    .expect("write script");
    std::process::Command::new("chmod")
        .args(["+x", &script.to_string_lossy()])
        .status()
        .expect("chmod");
    let (rc, _, err) = run(&[
        "-q",
        "-n",
        "tick-1s { exit(0); }",
        "-c",
        &script.to_string_lossy(),
    ]);
    assert_eq!(rc, 0, "{err}");
    let pid = std::fs::read_to_string(&pidfile).expect("the command ran");
    let alive = std::path::Path::new(&format!("/proc/{}", pid.trim())).exists();
    assert!(
        !alive,
        "the -c command {} still runs after dtx returned",
        pid.trim()
    );
}
