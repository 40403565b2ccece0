//! `pmc`, in the Windows port's layout (its `sdt_etw_pmc_cb`, read by its `dscripts/demo/pmc.d`):
//! * `sample-src` (PerfInfo CollectionStart, opcode 73): `arg0` the profile source's id,
//!   `arg1` its name in lower case (`char *`, as the port lower-cases it), `arg2` the new
//!   interval, `arg3` the old one;
//! * `counter-src` (PerfInfo 48, the counters a session records): `arg0` how many, `arg1` a
//!   `wchar_t **` array of their names, lower case (`wstringof(args[1][0])`);
//! * `sample` (PMCSample, opcode 47): `arg0` the sampled instruction pointer, in the sampled
//!   thread, as the port's per-source probes give it; `arg1` the profile source's id (the
//!   port names one probe per source instead, `pmc:::branchmispredictions`, which dtx does not
//!   make: `pmc:::sample /arg1 == id/` selects one).

use super::native::NATIVE_BASE;
use super::{Emit, EventCx};

/// The native block of a source name.
const NAME_LEN: usize = 256;

pub(super) fn fire(cx: &EventCx<'_, '_>, name: &str, out: &mut Emit<'_>) {
    let dec = cx.dec;
    let u = |f: &str| dec.u64(f).unwrap_or(0);
    let mut a = [0u64; 10];
    match name {
        "sample-src" => {
            a[0] = u("SampleSource");
            a[1] = NATIVE_BASE;
            a[2] = u("NewInterval");
            a[3] = u("OldInterval");
            let src = dec
                .str("SourceName")
                .map(|s| s.to_lowercase())
                .unwrap_or_default();
            out.push_native(a, cx.pid, cx.tid, NAME_LEN, |w| w.str((0, NAME_LEN), &src));
        }
        "counter-src" => {
            let names = counter_names(cx.ev.payload);
            a[0] = names.len() as u64;
            a[1] = NATIVE_BASE;
            // the array of pointers, then the names (UTF-16, NUL-terminated) it points at
            let table = 8 * names.len();
            let size = table + names.iter().map(|n| 2 * (n.len() + 1)).sum::<usize>();
            out.push_native(a, cx.pid, cx.tid, size.max(8), |w| {
                let mut at = table;
                for (i, n) in names.iter().enumerate() {
                    w.u64(8 * i, NATIVE_BASE + at as u64);
                    for (k, c) in n.iter().enumerate() {
                        w.bytes(at + 2 * k, &c.to_le_bytes());
                    }
                    at += 2 * (n.len() + 1);
                }
            });
        }
        _ => {
            a[0] = u("InstructionPointer");
            a[1] = u("ProfileSource");
            out.push(a, cx.pid, cx.tid);
        }
    }
}

/// The counter names of a PerfInfo 48 record: a u32 count, then as many NUL-terminated UTF-16
/// names, lower-cased; a name the payload cuts short ends there.
fn counter_names(p: &[u8]) -> Vec<Vec<u16>> {
    let Some(count) = p
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    else {
        return Vec::new();
    };
    let mut units = p[4..]
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]));
    let mut names = Vec::new();
    for _ in 0..count.min(64) {
        let n: Vec<u16> = units.by_ref().take_while(|&c| c != 0).collect();
        if n.is_empty() {
            break;
        }
        let lower: Vec<u16> = String::from_utf16_lossy(&n)
            .to_lowercase()
            .encode_utf16()
            .collect();
        names.push(lower);
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_names_are_read_and_lower_cased() {
        let mut p = 2u32.to_le_bytes().to_vec();
        for s in ["TotalIssues", "BranchMispredictions"] {
            p.extend(s.encode_utf16().chain([0]).flat_map(|c| c.to_le_bytes()));
        }
        let n: Vec<String> = counter_names(&p)
            .iter()
            .map(|v| String::from_utf16_lossy(v))
            .collect();
        assert_eq!(n, ["totalissues", "branchmispredictions"]);
        assert!(counter_names(&[1, 0]).is_empty());
        // a count larger than the names there
        assert_eq!(counter_names(&9u32.to_le_bytes()).len(), 0);
    }
}
