//! The top-style dashboards of `dscripts/top/` in batch mode over a real trace, compared with
//! their golden output in `tests/golden/top/` (`UPDATE_GOLDEN=1` rewrites it after an intended
//! change). Skips when `../shared/etl` is absent.

use std::path::PathBuf;

use crate::support::cli::Dtx;
use crate::support::golden;

const TRACE: &str = "randomascii_slow_ppt_trace.etl.zip";

/// The trace each dashboard runs on: one with the events it needs.
fn trace_for(name: &str) -> &'static str {
    match name {
        // TcpIp/UdpIp and named files: the PerfView traces have them, randomascii does not
        "network" => "perfview_net.4.5.2.x86.etl.zip",
        "files" => "perfview_net.4.5.2.x64.etl.zip",
        _ => TRACE,
    }
}

#[test]
fn dashboards_match_their_golden_output() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let Some(shared) = crate::support::etl::folder("etl", TRACE) else {
        return;
    };
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(root.join("dscripts/top"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "d"))
        .collect();
    scripts.sort();
    assert!(scripts.len() >= 5);
    for s in scripts {
        let name = s.file_stem().unwrap().to_string_lossy().into_owned();
        let trace = shared.join(trace_for(&name));
        let out = Dtx::new(&["-E"]).arg(&trace).arg("-s").arg(&s).output();
        // every dashboard shows something on its trace (no recorded trace here has system
        // call events, so syscalls.d is only checked to run)
        if name != "syscalls" {
            assert!(
                out.stdout.len() > 100,
                "{name}: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if name == "cpu-stacks" {
            // the demo's dashboard: cpu.d's tables, line for line in the same order, and the
            // stacks between them (all of them in batch mode: too many for a golden file)
            let cpu = std::fs::read_to_string(root.join("tests/golden/top/cpu.out")).unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let mut lines = text.lines();
            for want in cpu.lines().filter(|l| !l.trim().is_empty()) {
                assert!(
                    lines.any(|l| l == want),
                    "cpu-stacks: cpu.d's line {want:?} is missing or out of order"
                );
            }
            assert!(text.contains("MSO.DLL+0x"), "cpu-stacks: no user stacks");
            continue;
        }
        golden::check(&name, &format!("golden/top/{name}.out"), &out.stdout);
    }
}
