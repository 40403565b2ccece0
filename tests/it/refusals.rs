//! What dtx says when a script asks for what it cannot give (issue 43): each refusal names what
//! is missing, why, and the closest thing dtx has, at compile time, before any tracing (the
//! BEGIN clause each program carries never prints, and a trace is not walked). Wording keeps
//! dtrace's where dtrace has a message for the case (`failed to resolve X: Unknown symbol
//! name`, `probe description X does not match any probes`) and adds the reason after it.

use crate::support::cli::run;

/// The one `dtx: ...` line of a refused program, after checking it started nothing: status 1,
/// nothing on stdout (its `BEGIN { printf("started") }` never ran).
fn refused(args: &[&str]) -> String {
    let (code, out, err) = run(args);
    assert_eq!(code, 1, "{args:?}: {err}");
    assert!(out.is_empty(), "{args:?} started tracing: {out}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: {err}");
    lines[0].to_string()
}

const STARTED: &str = "BEGIN { printf(\"started\"); }";

#[test]
fn kernel_variables_say_dtx_reads_no_kernel_memory() {
    let prog = format!("{STARTED} BEGIN {{ print(*nt`PsInitialSystemProcess); }}");
    let line = refused(&["-e", "-n", &prog]);
    assert!(
        line.ends_with(
            "failed to resolve nt`PsInitialSystemProcess: Unknown symbol name (a kernel \
             variable would be read from kernel memory, and dtx reads none: ETW delivers event \
             records, not the kernel's address space; the kernel providers' args[] (proc, \
             sched, io, syscall...) carry what the kernel records, and a pid target's own \
             variables and types resolve as pid`name)"
        ),
        "{line}"
    );
    // the address of one, and dtrace's kernel scope (a leading backquote)
    let prog = format!("{STARTED} BEGIN {{ trace(&`KeTickCount); }}");
    let line = refused(&["-e", "-n", &prog]);
    assert!(
        line.contains(
            "failed to resolve `KeTickCount: Unknown symbol name (a kernel variable would be read"
        ),
        "{line}"
    );
}

#[test]
fn kernel_types_say_why_they_have_no_definition() {
    // a cast to a kernel type as Microsoft's scripts spell it: not a syntax error
    let prog = format!("{STARTED} BEGIN {{ this->p = (nt`_RTL_USER_PROCESS_PARAMETERS *)arg0; }}");
    let line = refused(&["-e", "-n", &prog]);
    assert!(
        line.contains(
            "failed to resolve type nt`_RTL_USER_PROCESS_PARAMETERS: Unknown type name (a kernel \
             type would be read from kernel memory, and dtx reads none"
        ),
        "{line}"
    );
    // a kernel struct declared by its tag: a pointer to it is fine, a member is not there
    let prog = format!(
        "{STARTED} BEGIN {{ this->p = (struct nt`_EPROCESS *)0; trace(this->p->UniqueProcessId); }}"
    );
    let line = refused(&["-e", "-n", &prog]);
    assert!(
        line.contains(
            "operator -> cannot be applied to a forward declaration: no struct _EPROCESS \
             definition is available (a kernel structure would be read from kernel memory"
        ),
        "{line}"
    );
    // a struct of the program's own, never defined: dtrace's words alone
    let prog = format!("{STARTED} BEGIN {{ this->p = (struct mine *)0; trace(this->p->x); }}");
    let line = refused(&["-e", "-n", &prog]);
    assert!(
        line.ends_with("no struct mine definition is available"),
        "{line}"
    );
}

#[test]
fn fbt_says_etw_has_no_function_boundary_probes() {
    // over the built-in trace: live, the catalog needs Windows' provider list (none under Wine)
    let prog = format!("{STARTED} fbt:nt:NtCreateFile:entry {{ @ = count(); }}");
    let line = refused(&["-q", "-E", "demo", "-n", &prog]);
    assert!(
        line.ends_with(
            "probe description fbt:nt:NtCreateFile:entry does not match any probes: dtx has no \
             function boundary probes: ETW records no entry and return of kernel functions \
             (and dtx does not attach kprobes on Linux); the kernel's work shows in syscall \
             (system calls), the kernel providers (proc, sched, io, ...) and profile-N with \
             stack()"
        ),
        "{line}"
    );
}

#[test]
fn a_provider_that_is_not_there_names_the_closest() {
    let prog = format!("{STARTED} shed:::on-cpu {{ @ = count(); }}");
    let line = refused(&["-q", "-E", "demo", "-n", &prog]);
    assert!(
        line.ends_with(
            "probe description shed:::on-cpu does not match any probes: no provider named shed \
             here; the closest: sched"
        ),
        "{line}"
    );
}

/// dtrace's own words, which already name what is missing: the process.
#[cfg(target_os = "linux")]
#[test]
fn pid_of_a_process_that_is_not_there_says_so() {
    let prog = format!("{STARTED} pid999999999:::entry {{ }}");
    let line = refused(&["-e", "-n", &prog]);
    assert!(
        line.ends_with("failed to grab pid 999999999: No such process"),
        "{line}"
    );
}

#[test]
fn system_calls_by_name_over_a_trace_without_their_records_name_the_flag() {
    let prog = format!("{STARTED} syscall::NtReadFile:entry {{ @ = count(); }}");
    let line = refused(&["-q", "-E", "demo", "-n", &prog]);
    assert!(
        line.ends_with(
            "probe description syscall::NtReadFile:entry does not match any probes: the trace \
             has no PerfInfo SysClEnter records (the kernel flag SYSCALL records them: xperf \
             -on SYSCALL, or a WPR profile with it), and the system calls' names come from \
             those records"
        ),
        "{line}"
    );
}

/// Not a refusal: a probe of an ETW provider the trace has no event of is legal (the trace
/// simply holds none), but it cannot fire, and dtx says so before the walk, as it does for a
/// kernel probe without its records.
#[test]
fn an_etw_provider_the_trace_lacks_is_named_before_the_walk() {
    let guid = "11111111-2222-3333-4444-555555555555";
    let prog = format!("etw:{{{guid}}}:0x00_0x0000000000000000:generic_event {{ @ = count(); }}");
    let (code, out, err) = run(&["-q", "-E", "demo", "-n", &prog]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "", "{out}");
    assert!(
        err.contains(&format!(
            "etw:{guid}:0x00_0x0000000000000000:generic_event cannot fire: the trace has no \
             events of provider {guid} (the provider was not enabled when it was recorded)"
        )),
        "{err}"
    );
}

/// Live on Linux the kernel providers' probes carry their arguments untyped (arg0..arg9):
/// `args[0]->b_bcount` there is said to be out of range of a probe without typed arguments,
/// as dtrace's `dt_idcook_args` says, not "operator -> must be applied to a pointer".
#[cfg(target_os = "linux")]
#[test]
fn args_of_a_probe_without_argument_types_here_say_so() {
    let prog = format!("{STARTED} io:::start {{ trace(args[0]->b_bcount); }}");
    let line = refused(&["-e", "-n", &prog]);
    assert!(
        line.ends_with(
            "index 0 is out of range for io:::start args[ ]: io:::start has no typed arguments \
             here (arg0..arg9 hold their raw values)"
        ),
        "{line}"
    );
    // over a trace the same probe has its types: bufinfo_t's b_bcount
    let prog = "io:::start { @ = sum(args[0]->b_bcount); }";
    let (code, _, err) = run(&["-q", "-E", "demo", "-n", prog]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn a_pid_type_without_a_target_says_to_give_one() {
    let prog = format!("{STARTED} BEGIN {{ t = (userland pid`_TEB *)0; }}");
    let line = refused(&["-e", "-n", &prog]);
    assert!(
        line.ends_with(
            "failed to resolve type pid`_TEB: Unknown type name (pid`NAME names a type of the \
             target's PDBs, and this run has no target: give -c or -p)"
        ),
        "{line}"
    );
}

/// With a Linux target, a ``pid`NAME`` type and the typed `args[]` of its `pid` probes are
/// refused with why: dtx reads a target's types from PDBs, and an ELF target has none.
#[cfg(target_os = "linux")]
#[test]
fn pid_types_of_a_linux_target_say_they_come_from_pdbs() {
    let Some(env) = crate::support::ctarget::Env::new("pid types of a Linux target") else {
        return;
    };
    let Some(prog) = env.build(
        "typed",
        "__attribute__((noinline)) int add(int a, int b) { return a + b; }\n\
         int main(void) { return add(1, 2) == 3 ? 0 : 1; }\n",
        &["-O0"],
        &[],
    ) else {
        return;
    };
    let target = prog.to_string_lossy().into_owned();
    let why = "the target is not a Windows executable: dtx reads a target's types from PDBs, \
               not from DWARF";
    let cast = format!("{STARTED} pid$target:a.out:add:entry {{ t = (pid`_TEB *)arg0; }}");
    let line = refused(&["-n", &cast, "-c", &target]);
    assert!(
        line.ends_with(&format!(
            "failed to resolve type pid`_TEB: Unknown type name ({why})"
        )),
        "{line}"
    );
    let member = format!("{STARTED} pid$target:a.out:add:entry {{ print(*args[0]); }}");
    let line = refused(&["-n", &member, "-c", &target]);
    assert!(
        line.contains("args[ ]: ") && line.contains(" has no typed arguments here (arg0..arg9 hold their raw values); a pid probe's args[] are typed from its function's prototype in the target's PDBs, and none gives add's ("),
        "{line}"
    );
    assert!(line.ends_with(&format!("({why})")), "{line}");
    // the exporter's target (opened by its session) is read for types too
    let line = refused(&["-x", "metrics=127.0.0.1:0", "-n", &cast, "-c", &target]);
    assert!(
        line.ends_with(&format!(
            "failed to resolve type pid`_TEB: Unknown type name ({why})"
        )),
        "{line}"
    );
}
