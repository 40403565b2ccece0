//! The area scripts of `dscripts/` (disk I/O, file I/O, page faults, TCP/UDP, hardware
//! configuration) over the real traces that have their events, compared with their golden
//! output in `tests/golden/<area>/` (`UPDATE_GOLDEN=1` rewrites it after an intended change);
//! the scripts whose events no trace has (registry, fsinfo) must compile. Also: how often each
//! kernel provider's probes fire on each trace, against the event counts of
//! `expected_counts.json`. Skips when `../shared/etl` is absent.

use std::path::PathBuf;

use crate::support::cli;
use cli::{dtx, dtx_ok};

const DIAGHUB_KERNEL: &str = "perfview_diaghub-dotnetcore3.1-win-x64-diagsession.zip:diaghub-dotnetcore3.1-win-x64-diagsession/diaghub.kernel.1.etl";

fn shared() -> Option<PathBuf> {
    crate::support::etl::folder("etl", "perfview_net.4.5.2.x64.etl.zip")
}

/// `dtx -q -E trace -n prog`, which must succeed: its output.
fn quiet(trace: &std::path::Path, prog: &str) -> String {
    dtx_ok(&["-q", "-E", trace.to_str().unwrap(), "-n", prog])
}

#[test]
fn area_scripts_match_their_golden_output() {
    let Some(etl) = shared() else { return };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let cases = [
        ("io/iosnoop", "randomascii_slow_ppt_trace.etl.zip"),
        ("io/iotop", "perfview_net.4.5.2.x64.etl.zip"),
        ("fileio/filebyproc", "perfview_net.4.5.2.x64.etl.zip"),
        ("pf/hardfaults", "perfview_net.4.5.2.x86.etl.zip"),
        ("net/tcpudp", "perfview_net.4.5.2.x86.etl.zip"),
        ("hwconfig/hwconfig", DIAGHUB_KERNEL),
    ];
    for (script, trace) in cases {
        let s = root.join("dscripts").join(format!("{script}.d"));
        let t = etl.join(trace);
        let o = dtx(&["-E", t.to_str().unwrap(), "-s", s.to_str().unwrap()]);
        let (out, err) = (o.stdout, String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "{script}: {err}");
        // a probe whose records the trace lacks is named before the run, and nothing else
        // is said (hardfaults.d's other fault kinds are not in its trace)
        let said: Vec<&str> = err
            .lines()
            .filter(|l| !l.contains(" cannot fire: "))
            .collect();
        assert!(said.is_empty(), "{script}: {err}");
        assert_eq!(
            err.contains(" cannot fire: "),
            script == "pf/hardfaults",
            "{script}: {err}"
        );
        crate::support::golden::check(script, &format!("golden/{script}.out"), &out);
    }
}

#[test]
fn scripts_without_a_trace_compile() {
    let Some(etl) = shared() else { return };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let t = etl.join("perfview_net.4.5.2.x64.etl.zip");
    for script in ["reg/registry", "fileio/fsinfo"] {
        let s = root.join("dscripts").join(format!("{script}.d"));
        dtx_ok(&["-e", "-E", t.to_str().unwrap(), "-s", s.to_str().unwrap()]);
    }
}

/// `provider:::name count` lines of every firing of the kernel providers on a trace.
fn probe_counts(trace: &str) -> Vec<String> {
    let etl = shared().unwrap();
    let t = etl.join(trace);
    let out = dtx_ok(&[
        "-q",
        "-E",
        t.to_str().unwrap(),
        "-n",
        "io:::,fsinfo:::,pf:::,tcpip:::,udpip:::,reg:::,hwconfig:::,pmc:::,diag:::lostevent \
         { @[probeprov, probename] = count(); } END { printa(\"%s:::%s %@d\\n\", @); }",
    ]);
    let mut v: Vec<String> = out
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    v.sort();
    v
}

fn lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.split(',').map(|x| x.trim().to_string()).collect();
    v.sort();
    v
}

/// Expected counts: DiskIo 10+11+14 (done) and 12+13+15 (start), TcpIp and UdpIp opcodes of
/// IPv4 + IPv6, PageFault 32, SystemConfig opcodes, PerfInfo 73, from expected_counts.json.
#[test]
fn kernel_probes_fire_once_per_event() {
    if shared().is_none() {
        return;
    }
    let config_net = "hwconfig:::cpu 1, hwconfig:::disk-log 1, hwconfig:::disk-optical 1, \
        hwconfig:::disk-phy 1, hwconfig:::dpi 1, hwconfig:::ide 2, hwconfig:::network 1, \
        hwconfig:::nic 3, hwconfig:::platform 1, hwconfig:::pnp 78, hwconfig:::power 1, \
        hwconfig:::service 157, pmc:::sample-src 1";
    assert_eq!(
        probe_counts("perfview_net.4.5.2.x64.etl.zip"),
        lines(&format!(
            "{config_net}, io:::done 1231, io:::start 1231, pf:::hardflt 153, \
             tcpip:::send 240, tcpip:::receive 250, udpip:::send 7, udpip:::receive 29"
        ))
    );
    assert_eq!(
        probe_counts("perfview_net.4.5.2.x86.etl.zip"),
        lines(&format!(
            "{config_net}, io:::done 2393, io:::start 2393, pf:::hardflt 394, \
             tcpip:::send 234, tcpip:::receive 242, tcpip:::accept 1, tcpip:::disconnect 1, \
             udpip:::send 28, udpip:::receive 20"
        ))
    );
    assert_eq!(
        probe_counts("randomascii_slow_ppt_trace.etl.zip"),
        lines(
            "hwconfig:::cpu 1, hwconfig:::disk-log 1, hwconfig:::disk-phy 1, hwconfig:::ide 2, \
             hwconfig:::irq 24, hwconfig:::nic 10, hwconfig:::platform 1, hwconfig:::pnp 155, \
             hwconfig:::power 1, hwconfig:::service 178, hwconfig:::video 3, \
             pmc:::sample-src 1, io:::done 361, pf:::hardflt 1"
        )
    );
    assert_eq!(
        probe_counts(DIAGHUB_KERNEL),
        lines(
            "hwconfig:::boot 1, hwconfig:::code-integrity 1, hwconfig:::cpu 1, \
             hwconfig:::dev-family 1, hwconfig:::disk-log 2, hwconfig:::disk-phy 2, \
             hwconfig:::dpi 1, hwconfig:::flight-ids 1, hwconfig:::ide 2, hwconfig:::irq 13, \
             hwconfig:::nic 3, hwconfig:::platform 1, hwconfig:::pnp 101, hwconfig:::power 1, \
             hwconfig:::processor 4, hwconfig:::service 269, hwconfig:::telemetry 1, \
             hwconfig:::virtualization 1"
        )
    );
}

/// Translated arguments read what the event said: io:::done's file names come from the FileIo
/// rundown, TCP addresses and ports from the TcpIp payload.
#[test]
fn translated_args_carry_the_event_fields() {
    let Some(etl) = shared() else { return };
    let t = etl.join("perfview_net.4.5.2.x64.etl.zip");
    let out = quiet(
        &t,
        "io:::done /args[2]->fi_name == \"clr.dll\"/ { @io[args[1]->dev_statname] = count(); }
         io:::done /args[2]->fi_pathname == \"<none>\"/ { @none = count(); }
         tcpip:::send { @tcp[args[0]->ip_ver, args[1]->tcp_dport] = sum(args[0]->ip_plength); }
         END { printa(\"io %s %@d\\n\", @io); printa(\"none %@d\\n\", @none);
               printa(\"tcp %d %d %@d\\n\", @tcp); }",
    );
    assert!(out.contains("io disk0 670\n"), "{out}");
    assert!(out.contains("tcp 6 445 "), "{out}");
    // a few I/Os (the logger's own, metadata) name no file the rundown knows
    let none: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("none "))
        .map(|n| n.trim().parse().unwrap())
        .unwrap_or(0);
    assert!(none < 100, "{out}");
}

/// The sched and proc probes give the port's typed arguments: off-cpu's `lwpsinfo_t *` and
/// `psinfo_t *` describe the thread the CPU runs next (the same thread, process and name the
/// following on-cpu fires in), proc:::start's `psinfo_t *` the new process (name, command line
/// and parent from the Process event), proc:::exit's arg0 the exit status, module-load's arg0
/// the module's wide file name.
#[test]
fn sched_and_proc_args_are_the_ports() {
    let Some(etl) = shared() else { return };
    let t = etl.join("randomascii_slow_ppt_trace.etl.zip");
    let out = quiet(
        &t,
        "sched:::off-cpu { nexttid = args[0]->pr_lwpid; nextpid = args[1]->pr_pid;
             next = stringof(args[1]->pr_fname);
             @off[args[0]->pr_lwpid == arg2 && args[0]->pr_sname == 'O'] = count(); }
         sched:::on-cpu { @on[tid == nexttid && pid == nextpid &&
             substr(execname, 0, 15) == next] = count(); }
         proc:::start { printf(\"start %d %d %s|%s\\n\", args[0]->pr_pid == arg1,
             args[0]->pr_ppid, args[0]->pr_fname, args[0]->pr_psargs); }
         proc:::exit { printf(\"exit %s %d\\n\", execname, arg0); }
         proc:::lwp-start { @lwp[args[0]->pr_lwpid == tid && args[1]->pr_pid == pid] = count(); }
         proc:::module-unload { @mod[strstr(wstringof((wchar_t *)arg0), \"\\\\\") != NULL] = count(); }
         END { printa(\"off %d %@d\\n\", @off); printa(\"on %d %@d\\n\", @on);
               printa(\"lwp %d %@d\\n\", @lwp); printa(\"mod %d %@d\\n\", @mod); }",
    );
    // one CSwitch each (29,533), every one agreeing
    for want in [
        "off 1 29533\n",
        "on 1 29533\n",
        "lwp 1 33\n",
        "mod 1 132\n",
        "start 1 4136 xperf.exe|xperf  -loggers \n",
        "start 1 4136 xperf.exe|xperf  -stop gamesession -stop -d c:\\temp\\slowppt2.etl\n",
        "exit xperf.exe 0\n",
    ] {
        assert!(out.contains(want), "{want:?} in\n{out}");
    }
    assert_eq!(out.lines().filter(|l| l.starts_with("start ")).count(), 3);
    assert!(!out.contains("off 0") && !out.contains("on 0"), "{out}");
}

/// diag:::events with the port's arguments: arg0 the provider's name, arg1 the event id, arg2
/// the opcode, arg3 the payload size, arg4 the payload (the event id in the header before it).
#[test]
fn diag_events_name_their_provider() {
    let Some(etl) = shared() else { return };
    let t = etl.join("perfview_net.4.5.2.x64.etl.zip");
    let out = quiet(
        &t,
        "diag:::events { @[stringof(arg0), arg1] = count();
             @hdr[*(uint16_t *)(arg4 - 4) == arg1] = count(); }
         END { printa(\"%s %d %@d\\n\", @); printa(\"hdr %d %@d\\n\", @hdr); }",
    );
    // the DNS client's four server events (expected_counts.json), the samples' class
    assert!(
        out.contains("microsoft-windows-dns-client 1001 4\n"),
        "{out}"
    );
    let perfinfo: u64 = out
        .lines()
        .filter(|l| l.starts_with("PerfInfo "))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(perfinfo >= 79_528, "{out}");
    assert!(out.contains("hdr 1 179474\n"), "{out}");
}
