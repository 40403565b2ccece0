//! `diag:::missed-stack` / `missed-ustack`: a StackWalk stack that names an event the trace
//! does not have. The real traces of `../shared/etl` have none (every stack walk's event is
//! there); a copy of the randomascii trace with one stack walk made to name a time no record
//! has must fire exactly one of the two probes, for that walk, with its frames.
//!
//! Skips, with a message, when `../shared/etl` is absent.

use crate::support::etl;

use std::io::Read;
use std::path::PathBuf;

use dtx::etw::reader::EtlFile;

fn shared() -> Option<PathBuf> {
    crate::support::etl::folder("etl", "randomascii_slow_ppt_trace.etl.zip")
}

const COUNT: &str = "diag:::missed-stack, diag:::missed-ustack, diag:::missed-dnet-stack \
                     { @[probename] = count(); } END { printa(\"%s %@d\\n\", @); }";

#[test]
fn the_real_traces_miss_no_stack() {
    let Some(dir) = shared() else { return };
    for f in [
        "randomascii_slow_ppt_trace.etl.zip",
        "perfview_net.4.5.2.x64.etl.zip",
        "perfview_net.4.5.2.x86.etl.zip",
    ] {
        let out = etl::quiet(dir.join(f).to_str().unwrap(), COUNT);
        assert_eq!(out.trim(), "", "{f}");
    }
}

#[test]
fn a_stack_walk_naming_no_event_is_missed() {
    let Some(dir) = shared() else { return };
    let zip = std::fs::File::open(dir.join("randomascii_slow_ppt_trace.etl.zip")).unwrap();
    let mut z = zip::ZipArchive::new(zip).unwrap();
    let name = (0..z.len())
        .map(|i| z.by_index(i).unwrap().name().to_string())
        .find(|n| n.ends_with(".etl"))
        .unwrap();
    let mut bytes = Vec::new();
    z.by_name(&name).unwrap().read_to_end(&mut bytes).unwrap();

    // every record's time, and the 1000th StackWalk Stack record (group 0x18, opcode 32):
    // EventTimeStamp (u64), StackProcess, StackThread, then the frames
    let etl = EtlFile::from_bytes(bytes.clone()).unwrap();
    let mut times = std::collections::HashSet::new();
    let mut walks = Vec::new();
    let mut it = etl.events();
    while let Some(r) = it.next_event() {
        let ev = r.unwrap();
        times.insert(ev.raw_timestamp);
        if ev.kernel_group == Some(0x18) && ev.opcode == 32 && walks.len() < 1000 {
            walks.push(ev.payload.to_vec());
        }
    }
    let walk = walks.pop().unwrap();
    let thread = u32::from_le_bytes(walk[12..16].try_into().unwrap());
    let frames = (walk.len() - 16) / 8;
    // a time between two records, so that no record has it
    let named = i64::from_le_bytes(walk[0..8].try_into().unwrap());
    let free = (named + 1..).find(|t| !times.contains(t)).unwrap();
    let at = bytes
        .windows(walk.len())
        .position(|w| w == walk.as_slice())
        .expect("the record's payload in the file");
    assert!(
        bytes[at + 1..]
            .windows(walk.len())
            .all(|w| w != walk.as_slice()),
        "the payload is unique"
    );
    bytes[at..at + 8].copy_from_slice(&free.to_le_bytes());
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("missed.etl");
    std::fs::write(&path, &bytes).unwrap();
    let trace = path.to_str().unwrap();

    let counted = etl::quiet(trace, COUNT);
    let shown = etl::quiet(
        trace,
        "diag:::missed-stack, diag:::missed-ustack { \
         printf(\"%d %d %d %d %d\\n\", arg0, arg1, arg3, stackdepth, ustackdepth); }",
    );
    let lines: Vec<&str> = counted.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 1, "{counted}");
    assert!(
        lines[0] == "missed-stack 1" || lines[0] == "missed-ustack 1",
        "{counted}"
    );
    let v: Vec<u64> = shown
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(v.len(), 5, "{shown}");
    assert_eq!(v[0], free as u64, "arg0: the time the walk names");
    assert_eq!(v[1], thread as u64, "arg1: its thread");
    assert_eq!(v[2], frames as u64, "arg3: its frames");
    assert_eq!(
        v[3] + v[4],
        frames as u64,
        "stack() and ustack() are its frames"
    );
}
