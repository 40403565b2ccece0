//! `syscall::<function>:entry/return`, `isr` and `dpc` over a trace: the records that name no
//! thread fire in the thread a context switch put on their CPU, a return pairs with its
//! thread's entry, and a call's function is the kernel symbol at its address. No real trace
//! here has system call records: these tests write a small one (`support/synthetic_etl.rs`).

use std::path::{Path, PathBuf};

use crate::support::synthetic_etl as synthetic;

use crate::support::etl as support;

use crate::support::standin_pdb;

use crate::support::cli;

use cli::Dtx;

use standin_pdb::{clang_pdb, guid_bytes};

use synthetic::{CpuRecords, START};

/// Where the synthetic trace's kernel is.
const KERNEL: u64 = 0xfffff800_00000000;
const KERNEL_SIZE: u64 = 0x100000;

/// The threads: 104 of alpha.exe (pid 100), 204 and 208 of beta.exe (pid 200).
fn rundown(c: &mut CpuRecords, kernel: &str, pdb: Option<([u8; 16], u32)>) {
    let t = START + 1;
    c.process(t, 4, "System");
    c.process(t, 100, "alpha.exe");
    c.process(t, 200, "beta.exe");
    c.thread(t, 100, 104);
    c.thread(t, 200, 204);
    c.thread(t, 200, 208);
    c.image(
        t,
        0,
        KERNEL,
        KERNEL_SIZE,
        &format!(r"\SystemRoot\system32\{kernel}"),
    );
    if let Some((guid, age)) = pdb {
        c.pdb_identity(t, 0, KERNEL, guid, age, "ntkrnlmp.pdb");
    }
}

/// The trace: calls at `a` and `b` (kernel offsets), an offset no function holds, and an
/// address outside every image; two CPUs, a thread that moves between them during a call,
/// returns whose entry came before the trace, an ISR before its CPU's first switch.
fn write_trace(dir: &Path, a: u64, b: u64, pdb: Option<([u8; 16], u32)>) -> PathBuf {
    write_trace_of(dir, "ntoskrnl.exe", a, b, pdb)
}

/// [`write_trace`] with the kernel image file named `kernel`.
fn write_trace_of(
    dir: &Path,
    kernel: &str,
    a: u64,
    b: u64,
    pdb: Option<([u8; 16], u32)>,
) -> PathBuf {
    let (mut cpu0, mut cpu1) = (CpuRecords::default(), CpuRecords::default());
    rundown(&mut cpu0, kernel, pdb);
    let t = |us: i64| START + 10 * us;
    cpu0.isr(t(10), KERNEL + 0x500);
    cpu0.cswitch(t(20), 104, 0);
    cpu0.syscall_enter(t(30), KERNEL + a);
    cpu0.isr(t(40), KERNEL + 0x500);
    cpu0.cswitch(t(50), 204, 104);
    cpu0.syscall_enter(t(60), KERNEL + b);
    cpu0.syscall_exit(t(70), 0);
    cpu0.dpc(t(80), KERNEL + 0x600);
    cpu1.syscall_exit(t(15), 0);
    cpu1.cswitch(t(25), 208, 0);
    cpu1.syscall_exit(t(35), 0x103);
    cpu1.cswitch(t(55), 104, 208);
    cpu1.syscall_exit(t(65), 0xC000_0034);
    cpu1.syscall_enter(t(75), KERNEL + 0x90000);
    cpu1.syscall_exit(t(78), 0);
    cpu1.syscall_enter(t(85), 0x1234);
    let path = dir.join("syscalls.etl");
    std::fs::write(&path, synthetic::trace_bytes(&[cpu0, cpu1])).unwrap();
    path
}

fn dtx(trace: &Path, args: &[&str], symbol_path: Option<&str>) -> (String, String) {
    let mut all = vec![std::ffi::OsStr::new("-E"), trace.as_os_str()];
    all.extend(args.iter().map(std::ffi::OsStr::new));
    let out = Dtx::new(&all).symbol_path(symbol_path).output();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The lines of a program's output, trimmed, blank lines left out, sorted.
fn lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect();
    v.sort();
    v
}

#[test]
fn calls_interrupts_and_dpcs_run_in_the_thread_on_their_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 0x1000, 0x2000, None);
    let prog = r#"syscall:::entry, syscall:::return, isr:::, dpc:::
        { printf("%d %s %s %s %d %d %d\n", timestamp / 1000, probefunc, probename, execname,
                 tid, pid, (int64_t)(probeprov == "syscall" ? arg0 : arg1)); }"#;
    let (out, err) = dtx(&trace, &["-q", "-n", prog], None);
    let a = KERNEL + 0x1000;
    let b = KERNEL + 0x2000;
    let c = KERNEL + 0x90000;
    let isr = KERNEL + 0x500;
    let dpc = KERNEL + 0x600;
    let want = [
        // before CPU 0's first switch: no thread
        format!("10 isr <unknown> -1 -1 {}", isr as i64),
        format!(
            "30 ntoskrnl.exe`0x1000 entry alpha.exe 104 100 {}",
            a as i64
        ),
        format!("40 isr alpha.exe 104 100 {}", isr as i64),
        format!("60 ntoskrnl.exe`0x2000 entry beta.exe 204 200 {}", b as i64),
        "70 ntoskrnl.exe`0x2000 return beta.exe 204 200 0".to_string(),
        format!("80 dpc beta.exe 204 200 {}", dpc as i64),
        // thread 104 returns on CPU 1 from the call it entered on CPU 0; NTSTATUS signed
        format!(
            "65 ntoskrnl.exe`0x1000 return alpha.exe 104 100 {}",
            0xC000_0034u32 as i32
        ),
        format!(
            "75 ntoskrnl.exe`0x90000 entry alpha.exe 104 100 {}",
            c as i64
        ),
        "78 ntoskrnl.exe`0x90000 return alpha.exe 104 100 0".to_string(),
        // an address in no kernel image
        "85 0x1234 entry alpha.exe 104 100 4660".to_string(),
    ];
    let mut want: Vec<String> = want.to_vec();
    want.sort();
    // the exits at 15 (no thread yet) and 35 (thread 208 entered before the trace) fire none
    assert_eq!(lines(&out), want, "{out}");
    // the unknown thread's ids are D's -1, as a predicate compares them
    let (unknown, _) = dtx(
        &trace,
        &[
            "-q",
            "-n",
            "isr::: /pid == -1 && tid == -1/ { printf(\"%s\\n\", execname); }",
        ],
        None,
    );
    assert_eq!(lines(&unknown), ["<unknown>"], "{unknown}");
    // the names need the kernel's PDB: said once
    assert_eq!(err.matches("ntkrnlmp.pdb").count(), 1, "{err}");
    assert!(
        err.contains("4 of the trace's 4 system call addresses"),
        "{err}"
    );
    // two traces in one run: named together, said once for the run
    let copy = dir.path().join("copy.etl");
    std::fs::copy(&trace, &copy).unwrap();
    let (two, err) = dtx(
        &trace,
        &[
            "-E",
            copy.to_str().unwrap(),
            "-q",
            "-n",
            "syscall:::entry { @[probefunc] = count(); }",
        ],
        None,
    );
    assert_eq!(err.matches("ntkrnlmp.pdb").count(), 1, "{err}");
    assert!(two.contains("ntoskrnl.exe`0x1000"), "{two}");

    // `@[probefunc] = count()`, the classic one-liner, and the same counts with every record
    // walked (a timer: nothing stepped over)
    for extra in ["", " tick-1000s { }"] {
        let (out, _) = dtx(
            &trace,
            &[
                "-q",
                "-n",
                &format!("syscall:::entry {{ @[probefunc] = count(); }}{extra}"),
            ],
            None,
        );
        assert_eq!(
            lines(&out),
            [
                "0x1234 1",
                "ntoskrnl.exe`0x1000 1",
                "ntoskrnl.exe`0x2000 1",
                "ntoskrnl.exe`0x90000 1"
            ]
        );
    }
    // a return probe alone still pairs (the entries are read though no entry probe is on)
    let (out, _) = dtx(
        &trace,
        &[
            "-q",
            "-n",
            "syscall::ntoskrnl.exe`0x1000:return { printf(\"%d %d\\n\", tid, arg1); }",
        ],
        None,
    );
    assert_eq!(lines(&out), [format!("104 {}", 0xC000_0034u32 as i32)]);
    // isr alone: the context switches are read for it
    let (out, _) = dtx(
        &trace,
        &["-q", "-n", "isr:::isr { @[execname] = count(); }"],
        None,
    );
    assert_eq!(lines(&out), ["<unknown> 1", "alpha.exe 1"]);
    // -l lists a pair of probes per call, by address
    let (out, _) = dtx(&trace, &["-l", "-P", "syscall"], None);
    let listed: Vec<String> = out
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().skip(2).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        listed,
        [
            "0x1234 entry",
            "0x1234 return",
            "ntoskrnl.exe`0x1000 entry",
            "ntoskrnl.exe`0x1000 return",
            "ntoskrnl.exe`0x2000 entry",
            "ntoskrnl.exe`0x2000 return",
            "ntoskrnl.exe`0x90000 entry",
            "ntoskrnl.exe`0x90000 return",
        ]
    );
}

/// The stand-in kernel: `NtStandInCall` is its system call.
const STANDIN: &str =
    "int NtStandInCall(int x) { return x + 1; }\nint main(void) { return NtStandInCall(1); }\n";

/// The offset of function `name` in the stand-in.
fn rva_of(pdb: &dtx::symbols::pdb::PdbSymbols, name: &str) -> u64 {
    pdb.functions
        .iter()
        .find(|f| f.name == name)
        .map(|f| f.rva as u64)
        .unwrap_or_else(|| panic!("{name} not in the stand-in"))
}

/// The kernel's PDB found on `_NT_SYMBOL_PATH` names the calls. No kernel PDB is here: the
/// stand-in is a clang-built PDB whose identity the trace's DbgID_RSDS record gives as the
/// kernel's, in a `srv*` store under the kernel PDB's name.
#[test]
fn calls_are_named_by_the_kernel_pdb_on_the_symbol_path() {
    let dir = tempfile::tempdir().unwrap();
    let Some(pdb) = clang_pdb(dir.path(), STANDIN) else {
        return;
    };
    let (guid, age) = dtx::symbols::pdb::pdb_identity(&pdb).unwrap();
    let standin = dtx::symbols::pdb::read(&pdb, None).unwrap();
    let rva = |name: &str| rva_of(&standin, name);
    let (a, b) = (rva("NtStandInCall"), rva("main"));
    let trace = write_trace(dir.path(), a, b, Some((guid_bytes(&guid), age)));
    let id = dtx::symbols::pdb::PdbId {
        guid,
        age,
        path: "ntkrnlmp.pdb".into(),
    };
    let place = dir
        .path()
        .join("store")
        .join("ntkrnlmp.pdb")
        .join(id.store_key());
    std::fs::create_dir_all(&place).unwrap();
    std::fs::copy(&pdb, place.join("ntkrnlmp.pdb")).unwrap();
    let store = format!("srv*{}", dir.path().join("store").display());
    let (out, err) = dtx(
        &trace,
        &[
            "-q",
            "-n",
            "syscall:::entry, syscall:::return { @[probefunc, probename, execname] = count(); }",
        ],
        Some(&store),
    );
    let unnamed = |o: u64| format!("ntoskrnl.exe`0x{o:x}");
    // the offset in no function of the stand-in keeps the offset form, as does the address
    // outside the kernel; the note counts them
    let mut want = vec![
        "NtStandInCall entry alpha.exe 1".to_string(),
        "NtStandInCall return alpha.exe 1".to_string(),
        "main entry beta.exe 1".to_string(),
        "main return beta.exe 1".to_string(),
        "0x1234 entry alpha.exe 1".to_string(),
    ];
    if standin.function_at(0x90000).is_none() {
        want.push(format!("{} entry alpha.exe 1", unnamed(0x90000)));
        want.push(format!("{} return alpha.exe 1", unnamed(0x90000)));
        assert!(
            err.contains("2 of the trace's 4 system call addresses"),
            "{err}"
        );
    }
    want.sort();
    assert_eq!(lines(&out), want, "{out}");
    // listed by name, and a description by name fires
    let (out, _) = dtx(&trace, &["-l", "-n", "syscall::NtStandIn*:"], Some(&store));
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(
        out.contains("NtStandInCall") && out.contains("return"),
        "{out}"
    );
    let (out, _) = dtx(
        &trace,
        &[
            "-q",
            "-n",
            "syscall::NtStandInCall:entry { printf(\"%s %d %x\\n\", probefunc, tid, arg0); }",
        ],
        Some(&store),
    );
    assert_eq!(out.trim(), format!("NtStandInCall 104 {:x}", KERNEL + a));
}

/// Microsoft's DTrace and the Windows debuggers call the kernel `nt`: a call the symbols do
/// not name (`ntoskrnl.exe`0x1000`, `ntkrnlmp.exe`0x1000` on a multiprocessor kernel) is
/// matched by `nt`0x1000`, and globs work after the backtick; the function prints as the
/// kernel image names it, as Windows' tools show it. (issue 32)
#[test]
fn nt_names_the_kernel_in_a_probe_function() {
    let dir = tempfile::tempdir().unwrap();
    for kernel in ["ntoskrnl.exe", "ntkrnlmp.exe"] {
        let trace = write_trace_of(dir.path(), kernel, 0x1000, 0x2000, None);
        let (out, _) = dtx(
            &trace,
            &[
                "-q",
                "-n",
                "syscall::nt`0x1000:entry, syscall::NT`0x2*:entry { @[probefunc] = count(); }",
            ],
            None,
        );
        assert_eq!(
            lines(&out),
            [format!("{kernel}`0x1000 1"), format!("{kernel}`0x2000 1")]
        );
        // a module glob other than the kernel's does not match
        let out = Dtx::new(&[
            std::ffi::OsStr::new("-E"),
            trace.as_os_str(),
            std::ffi::OsStr::new("-l"),
            std::ffi::OsStr::new("-n"),
            std::ffi::OsStr::new("syscall::win32k`0x1000:entry"),
        ])
        .symbol_path(None)
        .output();
        assert!(!out.status.success());
    }
}

/// Over the Windows 7 xperf trace (138,599 ISRs, 13,487 DPCs, 1,772 timer DPCs, 8 threaded
/// DPCs), each interrupt and DPC fires in the thread the last context switch on its CPU put
/// there, as this test finds it from the records themselves (CSwitch `NewThreadId`, the first
/// u32 of its payload), and `-1` before a CPU's first switch; not all in the idle thread.
#[test]
fn xperf_interrupts_and_dpcs_run_in_the_switched_in_thread() {
    let Some(path) = support::trace("randomascii_slow_ppt_trace.etl.zip") else {
        return;
    };
    let etl = dtx::etw::reader::EtlFile::open_path(&path).unwrap();
    let mut on_cpu: std::collections::HashMap<u16, u32> = Default::default();
    let mut want: std::collections::BTreeMap<(String, i64), u64> = Default::default();
    let mut it = etl.events();
    while let Some(r) = it.next_event() {
        let Ok(ev) = r else { continue };
        let name = match (ev.kernel_group, ev.opcode) {
            (Some(0x05), 36) => {
                let b = &ev.payload[..4];
                on_cpu.insert(ev.cpu, u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                continue;
            }
            (Some(0x0F), 67) => "isr",
            (Some(0x0F), 68) => "dpc",
            (Some(0x0F), 69) => "timer",
            (Some(0x0F), 66) => "thread",
            _ => continue,
        };
        let tid = on_cpu.get(&ev.cpu).map_or(-1, |&t| t as i64);
        *want.entry((name.to_string(), tid)).or_default() += 1;
    }
    let out = support::quiet(
        &path,
        "isr:::, dpc::: { @[probename, (int)tid] = count(); }",
    );
    let got: std::collections::BTreeMap<(String, i64), u64> = out
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f.as_slice() {
                [name, tid, n] => Some(((name.to_string(), tid.parse().ok()?), n.parse().ok()?)),
                _ => None,
            }
        })
        .collect();
    assert_eq!(got, want);
    let total: u64 = want.values().sum();
    assert_eq!(total, 138_599 + 13_487 + 1_772 + 8);
    let idle: u64 = want
        .iter()
        .filter(|((_, tid), _)| *tid == 0)
        .map(|(_, n)| n)
        .sum();
    assert!(
        idle < total * 95 / 100,
        "{idle} of {total} in the idle thread"
    );
}

/// Live, the calls are named by the running kernel's image file and its PDB, by their offset
/// in the kernel image the session's records place: the stand-in program plays the kernel
/// image (its `Nt*` functions are the calls), a trace walked without its own names plays the
/// session. An address no `Nt*` function starts at fires the probe with no function.
#[test]
fn live_calls_are_named_by_the_kernel_image_file() {
    let dir = tempfile::tempdir().unwrap();
    let Some(pdb) = clang_pdb(dir.path(), STANDIN) else {
        return;
    };
    let exe = dir.path().join("standin.exe");
    let standin = dtx::symbols::pdb::read(&pdb, None).unwrap();
    let rva = |name: &str| rva_of(&standin, name);
    let names = dtx::providers::etw::syscall::SyscallNames::of_kernel_image(
        &exe,
        &dtx::symbols::pdb::SymbolPath::default(),
    )
    .expect("the stand-in names a call");
    assert_eq!(names.live_from_pdb(), Some(true));
    let mut etw = dtx::providers::etw::EtwProbes::new();
    etw.set_syscalls(names);
    let listed: std::collections::HashMap<u64, (String, String)> =
        dtx::providers::etw::providers(&etw)
            .into_iter()
            .filter(|p| p.name() == "syscall")
            .flat_map(|p| p.list())
            .map(|p| (p.id, (p.function, p.name)))
            .collect();
    let mut functions: Vec<&str> = listed.values().map(|(f, _)| f.as_str()).collect();
    functions.sort();
    functions.dedup();
    // the Nt functions, and the probes of the calls with no name
    assert_eq!(functions, ["", "NtStandInCall"]);
    let trace = write_trace_of(
        dir.path(),
        "standin.exe",
        rva("NtStandInCall"),
        rva("main"),
        None,
    );
    let mut src = dtx::sources::etl::TraceSource::open(trace.to_str().unwrap()).unwrap();
    let mut fired = Vec::new();
    let mut out = dtx::providers::etw::EtwFirings::new();
    src.walk(
        |ev, dec, state| {
            out.clear();
            etw.firings(ev, dec, state, &|id| listed.contains_key(&id), &mut out);
            for f in &out {
                let (func, name) = &listed[&f.probe];
                fired.push(format!("{func}:{name} {}", f.tid));
            }
            true
        },
        |_| {},
    );
    assert_eq!(
        fired,
        [
            "NtStandInCall:entry 104",
            // main is no service routine: the probe with no function
            ":entry 204",
            // thread 104 returns on the other CPU; the returns with no entry fire nothing
            "NtStandInCall:return 104",
            ":return 204",
            ":entry 104",
            ":return 104",
            ":entry 104",
        ]
    );
}
