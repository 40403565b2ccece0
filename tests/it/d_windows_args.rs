//! D as Windows users write it (issue 32), the probes' side: the Windows port's argument
//! layout for the providers DTrace does not define (`isr`, `dpc`, `pmc`), the warnings for
//! what ETW leaves 0 or spells otherwise (exact text), Microsoft's `etw:` globs and the
//! built-ins of Microsoft's DTrace that dtx cannot give. Each test runs the `dtx` binary; the
//! real traces' tests skip when `../shared` is absent.

use crate::support::cli;
use crate::support::etl;
use cli::{run, Dtx};
use std::collections::BTreeMap;

const XPERF: &str = "randomascii_slow_ppt_trace.etl.zip";

/// `dtx -q -E trace -n prog` with no provider catalog, which must succeed: its stdout.
fn quiet(trace: &str, prog: &str) -> String {
    Dtx::new(&["-q", "-E", trace, "-n", prog])
        .env_remove("DTX_PROVIDER_CATALOG")
        .ok()
}

/// The PerfInfo ISR and DPC records of the xperf trace, read from the file (their documented
/// layouts, Microsoft Learn "ISR class" and "DPC class": InitialTime u64, Routine pointer, and
/// for an ISR ReturnValue u8, Vector u8): (probe name, time, routine, return value, vector).
fn interrupt_records(path: &str) -> Vec<(&'static str, u64, u64, u8, u8)> {
    let etl = dtx::etw::reader::EtlFile::open_path(path).unwrap();
    let mut v = Vec::new();
    let mut it = etl.events();
    while let Some(r) = it.next_event() {
        let Ok(ev) = r else { continue };
        let name = match (ev.kernel_group, ev.opcode) {
            (Some(0x0F), 67) => "isr",
            (Some(0x0F), 68) => "dpc",
            (Some(0x0F), 69) => "timer",
            (Some(0x0F), 66) => "thread",
            _ => continue,
        };
        assert_eq!(ev.pointer_size, 8, "the xperf trace is 64-bit");
        let p = ev.payload;
        let u = |o: usize| u64::from_le_bytes(p[o..o + 8].try_into().unwrap());
        let (ret, vec) = if name == "isr" {
            (p[16], p[17])
        } else {
            (0, 0)
        };
        v.push((name, u(0), u(8), ret, vec));
    }
    v
}

/// The port's layout (its sdt_etw_dpc_cb and sdt_etw_isr_cb; its systemcall.d aggregates
/// `sym(arg1)`): `arg0` the initial time, `arg1` the routine; an ISR's `arg2` its return value
/// and `arg3` its vector. Checked firing by firing against the records.
#[test]
fn dpc_and_isr_carry_the_time_in_arg0_and_the_routine_in_arg1() {
    let Some(t) = etl::trace(XPERF) else {
        return;
    };
    let records = interrupt_records(&t);
    // every DPC, one line each
    let out = quiet(
        &t,
        "dpc::: { printf(\"%s %d %d\\n\", probename, (uint64_t)arg0, (uint64_t)arg1); }",
    );
    let mut got: Vec<String> = out
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    let mut want: Vec<String> = records
        .iter()
        .filter(|r| r.0 != "isr")
        .map(|r| format!("{} {} {}", r.0, r.1, r.2))
        .collect();
    got.sort();
    want.sort();
    assert_eq!(want.len(), 13_487 + 1_772 + 8);
    assert_eq!(got, want);
    // the ISRs by (routine, return value, vector), and the sum of their times
    let out = quiet(
        &t,
        "isr:::isr { @[(uint64_t)arg1, arg2, arg3] = count(); @t = sum(arg0 & 0xffffff); } \
         END { printa(\"%d %d %d %@d\\n\", @); printa(\"time %@d\\n\", @t); }",
    );
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    let mut time = 0u64;
    for r in records.iter().filter(|r| r.0 == "isr") {
        *want.entry(format!("{} {} {}", r.2, r.3, r.4)).or_default() += 1;
        time += r.1 & 0xff_ffff;
    }
    let mut got: BTreeMap<String, u64> = BTreeMap::new();
    let mut got_time = None;
    for l in out.lines().filter(|l| !l.is_empty()) {
        if let Some(t) = l.strip_prefix("time ") {
            got_time = t.trim().parse::<u64>().ok();
            continue;
        }
        let (k, n) = l.rsplit_once(' ').unwrap();
        got.insert(k.to_string(), n.parse().unwrap());
    }
    assert_eq!(got, want);
    assert_eq!(got_time, Some(time));
    assert_eq!(want.values().sum::<u64>(), 138_599);
}

/// The port's `systemcall.d` clause, `@[probename, sym(arg1)] = count()` on the DPC probes,
/// gives routines (module+offset without the kernel's PDB), not timestamps.
#[test]
fn the_ports_systemcall_d_aggregates_routines() {
    let Some(t) = etl::trace(XPERF) else {
        return;
    };
    let out = quiet(
        &t,
        "dpc:::thread, dpc:::timer, dpc:::dpc { @dpc[probename, sym(arg1)] = count(); }",
    );
    let mut total = 0u64;
    let mut rows = 0;
    for l in out.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = l.split_whitespace().collect();
        let [_, routine, n] = f.as_slice() else {
            panic!("{l}");
        };
        assert!(
            routine.contains(".sys+0x")
                || routine.contains(".SYS+0x")
                || routine.starts_with("ntoskrnl.exe+0x")
                || routine.contains('`'),
            "{l}"
        );
        total += n.parse::<u64>().unwrap();
        rows += 1;
    }
    assert_eq!(total, 13_487 + 1_772 + 8);
    assert!(rows < 100, "{rows} rows: routines, not times");
}

/// `pmc:::sample-src` in the port's layout: `arg0` the source id, `arg1` its name in lower
/// case, `arg2` the new interval, `arg3` the old one (PerfInfo CollectionStart, read here
/// from the record: SampleSource, NewInterval, OldInterval u32, SourceName UTF-16).
#[test]
fn pmc_sample_src_has_the_ports_arguments() {
    let Some(t) = etl::trace(XPERF) else {
        return;
    };
    let etl = dtx::etw::reader::EtlFile::open_path(&t).unwrap();
    let mut it = etl.events();
    let mut want = Vec::new();
    while let Some(r) = it.next_event() {
        let Ok(ev) = r else { continue };
        if ev.kernel_group == Some(0x0F) && ev.opcode == 73 {
            let p = ev.payload;
            let u = |o: usize| u32::from_le_bytes(p[o..o + 4].try_into().unwrap());
            let name: Vec<u16> = p[12..]
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .take_while(|&c| c != 0)
                .collect();
            let name = String::from_utf16_lossy(&name).to_lowercase();
            want.push(format!("{} {name} {} {}", u(0), u(4), u(8)));
        }
    }
    assert_eq!(want.len(), 1);
    let out = quiet(
        &t,
        "pmc:::sample-src { printf(\"%d %s %d %d\\n\", arg0, stringof(arg1), arg2, arg3); }",
    );
    let got: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(got, want);
}

/// The warnings of a run over the xperf trace (which has the probes), `-n` or `-s`.
fn warnings(args: &[&str]) -> Vec<String> {
    let t = etl::trace(XPERF).unwrap();
    let mut all = vec!["-q", "-E", &t];
    all.extend_from_slice(args);
    let (rc, _, err) = run(&all);
    assert_eq!(rc, 0, "{err}");
    err.lines()
        .filter(|l| l.contains("warning:"))
        .map(str::to_string)
        .collect()
}

/// `sched:::enqueue`'s `args[3]` (put at the front of the queue) is documented as always 0:
/// a clause that reads it, as `arg3` or `args[3]`, is told, naming the probe; one that reads
/// the other arguments is not.
#[test]
fn an_argument_documented_as_zero_is_warned_of() {
    if etl::trace(XPERF).is_none() {
        return;
    }
    assert_eq!(
        warnings(&[
            "-n",
            "sched:::enqueue /args[3]/ { @a = count(); } \
             sched:::enqueue { @b[args[1]->pr_fname, arg3] = count(); } \
             sched:::dequeue { @c[arg3] = count(); } \
             sched:::enqueue { @d[args[0]->pr_lwpid] = count(); }"
        ]),
        vec![
            "dtx: warning: the clause for sched:::enqueue reads args[3], but ETW does not say \
             whether a thread is put at the front of its run queue: it is always 0",
            "dtx: warning: the clause for sched:::enqueue reads arg3, but ETW does not say \
             whether a thread is put at the front of its run queue: it is always 0",
        ]
    );
}

/// A string literal with upper-case letters compared with `execname` never matches (dtx
/// gives process names in lower case, the port's convention): the warning gives the spelling
/// to use. Predicates, `!=` and `strstr` are seen; a lower-case name is not warned of.
#[test]
fn execname_compared_with_upper_case_is_warned_of() {
    if etl::trace(XPERF).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("n.d");
    std::fs::write(
        &script,
        "sched:::on-cpu /execname == \"POWERPNT.EXE\"/ { @a = count(); }\n\
         sched:::on-cpu /execname != \"xperf.exe\"/ { @b = count(); }\n\
         sched:::on-cpu { @c[strstr(execname, \"PowerPnt\")] = count(); }\n",
    )
    .unwrap();
    assert_eq!(
        warnings(&["-s", &script.to_string_lossy()]),
        vec![
            "dtx: warning: the clause at line 1 compares execname with \"POWERPNT.EXE\", which \
             never matches: dtx gives process names in lower case, as the Windows port does; \
             write \"powerpnt.exe\"",
            "dtx: warning: the clause at line 3 compares execname with \"PowerPnt\", which \
             never matches: dtx gives process names in lower case, as the Windows port does; \
             write \"powerpnt\"",
        ]
    );
    // and the lower-case spelling matches
    let t = etl::trace(XPERF).unwrap();
    let n = quiet(
        &t,
        "sched:::on-cpu /execname == \"powerpnt.exe\"/ { @ = count(); } END { printa(\"%@d\", @); }",
    );
    assert!(n.trim().parse::<u64>().unwrap() > 0, "{n}");
}

/// Microsoft's `etw:<guid>:…:*` and `etw:::` expand over the trace's providers: one
/// `generic_event` probe (any level, any keyword) per provider GUID, listed by `-l` and
/// counting every event of its provider (expected_counts.json, event_header_providers).
#[test]
fn etw_globs_expand_over_the_traces_providers() {
    let Some(t) = etl::trace("perfview_net.4.5.2.x64.etl.zip") else {
        return;
    };
    let counts: BTreeMap<&str, u64> = [
        ("a669021c-c450-4609-a035-5af59af4df18", 33011),
        ("e13c0d23-ccbc-4e12-931b-d9cc2eee27e4", 32730),
        ("763fd754-7086-4dfe-95eb-c01a46faf4ca", 1627),
        ("edd08927-9cc4-4e65-b970-c2560fb5c289", 562),
        ("a8a71ac1-040f-54a2-07ca-00a89b5ab761", 108),
        ("b675ec37-bdb6-4648-bc92-f3fdc74d3ca2", 77),
        ("2e5dba47-a3d2-4d16-8ee0-6671ffdcd7b5", 8),
        ("315a8872-923e-4ea2-9889-33cd4754bf64", 8),
        ("8e9f5090-2d75-4d03-8a81-e5afbf85daf1", 6),
        ("1c95126e-7eea-49a9-a3fe-a378b03ddb4d", 4),
        ("22fb2cd6-0e7b-422b-a0c7-2fad1fd0e716", 2),
    ]
    .into_iter()
    .collect();
    let listed = Dtx::new(&["-l", "-E", &t, "-n", "etw:::"])
        .env_remove("DTX_PROVIDER_CATALOG")
        .ok();
    let mut modules: Vec<String> = listed
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(
                (f[1], f[3], f[4]),
                ("etw", "0x00_0x0000000000000000", "generic_event"),
                "{l}"
            );
            f[2].to_string()
        })
        .collect();
    modules.sort();
    let want: Vec<String> = counts.keys().map(|s| s.to_string()).collect();
    assert_eq!(modules, want, "{listed}");
    // each provider's events, by the probes `etw:::` made
    let out = quiet(&t, "etw::: { @[probemod] = count(); }");
    let got: BTreeMap<String, u64> = out
        .lines()
        .filter_map(|l| {
            let (k, n) = l.trim().split_once(char::is_whitespace)?;
            Some((k.to_string(), n.trim().parse().ok()?))
        })
        .collect();
    let want: BTreeMap<String, u64> = counts.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    assert_eq!(got, want);
    // one GUID, braced, with globs in the other fields
    let out = quiet(
        &t,
        "etw:{E13C0D23-CCBC-4E12-931B-D9CC2EEE27E4}:*:* { @ = count(); } \
         END { printa(\"%@d\", @); }",
    );
    assert_eq!(out.trim(), "32730");
    // a level/keyword field given exactly (the runtime's GC keyword, 0x1) with a glob name:
    // the probe of the exact description, the same events
    let count = |d: &str| {
        quiet(
            &t,
            &format!("{d} {{ @ = count(); }} END {{ printa(\"%@d\", @); }}"),
        )
    };
    let gc = count("etw:e13c0d23-ccbc-4e12-931b-d9cc2eee27e4:0x00_0x1:*");
    assert_eq!(
        gc,
        count("etw:e13c0d23-ccbc-4e12-931b-d9cc2eee27e4:0x00_0x1:generic_event")
    );
    // (the GC events, and those with no keyword, which pass every mask)
    assert!(gc.trim().parse::<u64>().unwrap() >= 16_528, "{gc}");
}

/// A glob matching no GUID of the trace still matches nothing (dtrace's D_PDESC_ZERO), and a
/// description of another provider makes no `etw` probe.
#[test]
fn etw_globs_that_match_no_provider() {
    let Some(t) = etl::trace("perfview_gcevents.etl.zip") else {
        return;
    };
    let (rc, _, err) = Dtx::new(&["-l", "-E", &t, "-n", "etw:ffff*::"])
        .env_remove("DTX_PROVIDER_CATALOG")
        .run();
    assert_ne!(rc, 0);
    assert!(err.contains("does not match any probes"), "{err}");
    let listed = Dtx::new(&["-l", "-E", &t, "-n", "etw:e13c*::"])
        .env_remove("DTX_PROVIDER_CATALOG")
        .ok();
    assert_eq!(listed.lines().count(), 2, "{listed}");
}

/// Microsoft's `irql`, `memref()` and `printm()` are named with why dtx cannot give them,
/// before the run, instead of "undefined".
#[test]
fn microsofts_built_ins_are_refused_with_a_reason() {
    let cases = [
        (
            "BEGIN { trace(irql); }",
            "irql is Microsoft's DTrace variable for the processor's interrupt request level \
             when the probe fired: ETW records do not carry the IRQL, so dtx cannot give it",
        ),
        (
            "BEGIN { x = memref(0, 8); }",
            "memref() is the DTrace (Microsoft's, FreeBSD's) subroutine that pairs an address \
             with a size for printm(): dtx has neither; tracemem(addr, size) prints the same \
             bytes",
        ),
        (
            "BEGIN { printm(8, 0); }",
            "printm() is the DTrace (Microsoft's, FreeBSD's) action that prints the memory a \
             memref() names: dtx has neither; tracemem(addr, size) prints the same bytes",
        ),
        (
            "BEGIN /irql > 1/ { exit(0); }",
            "irql is Microsoft's DTrace variable",
        ),
    ];
    for (prog, why) in cases {
        let (rc, _, err) = run(&["-q", "-n", prog]);
        assert_ne!(rc, 0, "{prog}");
        assert!(err.contains(why), "{prog}: {err}");
        assert!(!err.contains("undefined"), "{prog}: {err}");
    }
}

/// The port's `pf` (sdt_etw_pf_cb), `proc:::module-load` (sdt_etw_module_cb) and named
/// provider (sdt_etw_guid_cb) arguments: `hardflt`'s `arg0` the file's wide name and `arg4`
/// the faulting thread (the firing's), `module-load`'s `arg2` the process id, a named probe's
/// `arg4` the event's version (the byte the port puts before the payload too).
#[test]
fn pf_module_and_named_probes_have_the_ports_arguments() {
    let Some(t) = etl::trace("perfview_net.4.5.2.x86.etl.zip") else {
        return;
    };
    let out = quiet(
        &t,
        "pf:::hardflt { @h[arg4 == tid, wstringof((wchar_t *)arg0) != \"\"] = count(); } \
         proc:::module-load { @m[arg2 == pid] = count(); } \
         microsoft-windows-dotnetruntime:::events { @v[arg4 == *(uint8_t *)(arg2 - 2)] = count(); } \
         END { printa(\"h %d %d %@d\\n\", @h); printa(\"m %d %@d\\n\", @m); \
               printa(\"v %d %@d\\n\", @v); }",
    );
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    // every hard fault in its thread; every named file (394 faults: expected_counts)
    let faults: u64 = lines
        .iter()
        .filter_map(|l| l.strip_prefix("h 1 "))
        .map(|l| l.split_whitespace().last().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(faults, 394, "{out}");
    assert!(!lines.iter().any(|l| l.starts_with("h 0 ")), "{out}");
    assert!(lines.iter().any(|l| l.starts_with("m 1 ")), "{out}");
    assert!(!lines.iter().any(|l| l.starts_with("m 0 ")), "{out}");
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("v "))
            .collect::<Vec<_>>(),
        [&"v 1 11608"],
        "{out}"
    );
}

/// `lkd()` is a destructive action, as in Microsoft's DTrace: without `-w` the run is refused
/// before anything is traced, as dtrace refuses `system()` or `raise()`.
#[test]
fn lkd_needs_destructive_actions() {
    let (rc, out, err) = run(&["-q", "-n", "BEGIN { lkd(0); exit(0); }"]);
    assert_ne!(rc, 0, "{out}{err}");
    assert!(
        err.contains("could not enable tracing: Destructive actions not allowed"),
        "{err}"
    );
}

/// Over a trace there is no live kernel to dump: `lkd()` compiles, the first firing says so
/// once, and the rest of the script runs (every firing's printf).
#[test]
fn lkd_over_a_trace_says_once_that_no_dump_is_taken() {
    let (rc, out, err) = run(&[
        "-q",
        "-w",
        "-E",
        "demo",
        "-n",
        "sched:::on-cpu /n < 3/ { n++; lkd(1); printf(\"after %d\\n\", n); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    // (the last newline is dtrace's at the end of a run)
    assert_eq!(out, "after 1\nafter 2\nafter 3\n\n", "{err}");
    let notice = if cfg!(windows) {
        "dtx: lkd() takes a live kernel memory dump, and a recorded trace has no live kernel: \
         no dump is taken, the script goes on\n"
    } else {
        "dtx: lkd() takes a Windows live kernel memory dump, and this system is not Windows: no \
         dump is taken, the script goes on\n"
    };
    assert_eq!(err.matches(notice).count(), 1, "{err}");
    assert_eq!(err.matches("lkd()").count(), 1, "{err}");
}

/// Live on a system that is not Windows: the same one notice, and the script goes on to its
/// `exit()`.
#[cfg(not(windows))]
#[test]
fn lkd_live_elsewhere_says_once_that_no_dump_is_taken() {
    let (rc, out, err) = run(&[
        "-q",
        "-w",
        "-n",
        "BEGIN { lkd(0); lkd(1); printf(\"after\\n\"); exit(0); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out, "after\n\n", "{err}");
    assert_eq!(
        err,
        "dtx: lkd() takes a Windows live kernel memory dump, and this system is not Windows: no \
         dump is taken, the script goes on\n"
    );
}

/// Under Wine, live: the privilege is enabled at the start and the dump is asked of ntdll's
/// `NtSystemDebugControl`, which Wine does not implement: its failure is said on stderr with
/// the NTSTATUS, no dump file is left behind, and the script goes on. (On a real Windows this
/// would take a dump: scripts/windows-live.sh does that on the elevated runner.)
#[cfg(windows)]
#[test]
fn lkd_under_wine_reports_the_system_calls_failure() {
    if !crate::etw_live_windows::under_wine() {
        eprintln!("skipped: on a real Windows this takes a live kernel dump (see scripts/windows-live.sh)");
        return;
    }
    let root = std::env::var("SystemRoot").unwrap_or_else(|_| r"C:\windows".into());
    let reports = std::path::Path::new(&root).join("LiveKernelReports");
    let mine = |d: &std::path::Path| -> usize {
        std::fs::read_dir(d).map_or(0, |r| {
            r.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("dtx-"))
                .count()
        })
    };
    let before = mine(&reports);
    let (rc, out, err) = run(&[
        "-q",
        "-w",
        "-n",
        "BEGIN { lkd(0); printf(\"after\\n\"); exit(0); }",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out, "after\n\n", "{err}");
    assert!(
        err.starts_with(
            "dtx: lkd(): no live kernel dump: NtSystemDebugControl(SysDbgGetLiveKernelDump) \
             returned NTSTATUS 0x"
        ),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(
        mine(&reports),
        before,
        "a dump file was left in {}",
        reports.display()
    );
}
