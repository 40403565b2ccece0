//! The one trace lookup of the tests: the shared traces of `../shared/etl` and
//! `../shared/etl-win11`, their paths and folders (skipping, with a message, when absent), and a
//! quiet `dtx -E` run over one.
#![allow(dead_code)]

use std::path::PathBuf;

/// The path of `../shared/etl/<name>`, or None (after saying the test skips) when it is absent.
pub fn trace(name: &str) -> Option<String> {
    shared("etl", name)
}

/// The path of `../shared/<dir>/<name>` (`etl`, `etl-win11`), or None (after saying the test
/// skips) when it is absent.
pub fn shared(dir: &str, name: &str) -> Option<String> {
    path(dir, name).map(|p| p.to_string_lossy().into_owned())
}

/// [`shared`] as a path.
pub fn path(dir: &str, name: &str) -> Option<PathBuf> {
    let p = root().join(dir).join(name);
    if !p.exists() {
        eprintln!("skipped: ../shared/{dir}/{name} is not here");
        return None;
    }
    Some(p)
}

/// The folder `../shared/<dir>` when it holds `file` (what a test reads there first, so that a
/// folder left half copied skips too), or None after saying the test skips. The one place the
/// tests find the traces kept beside the checkout (they are not in the repository).
pub fn folder(dir: &str, file: &str) -> Option<PathBuf> {
    let p = root().join(dir);
    if !p.join(file).exists() {
        eprintln!(
            "skipped: ../shared/{dir}/{file} is not here (the real traces live beside the \
             checkout, in ../shared)"
        );
        return None;
    }
    Some(p)
}

/// `../shared`, beside the checkout.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared")
}

/// `dtx -q -E trace -n prog`, which must succeed: its output.
pub fn quiet(trace: &str, prog: &str) -> String {
    let out = super::cli::dtx(&["-q", "-E", trace, "-n", prog]);
    assert!(
        out.status.success(),
        "{prog}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The bytes of `../shared/etl/<name>`'s trace: the file, or the one `.etl` member of a zip.
pub fn trace_bytes(name: &str) -> Option<Vec<u8>> {
    let path = trace(name)?;
    let etl = dtx::etw::reader::EtlFile::open_path(&path).unwrap();
    Some(etl.bytes().to_vec())
}

/// Writes to `out` a trace `copies` times as long as the uncompressed trace `etl`: its buffers
/// (FORMAT.md 4.1) `copies` times over, copy `k`'s record and buffer timestamps moved on by
/// `k` times the trace's span (and so the event times that stack walks name), so that the
/// copies follow each other in time. What a trace of
/// many gigabytes looks like to a reader (the same threads and processes, at steady rates),
/// built in seconds from a real one. Records are stepped over by their size (4.3-4.7): a
/// system/compact/perfinfo record's size is at +4, every other header's at +0.
pub fn write_repeated_trace(etl: &[u8], copies: usize, out: &std::path::Path) {
    use std::io::Write;
    const HEADER: usize = 0x48;
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let u32_at = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    // (offset, size) of each buffer, and where each record's timestamp sits
    let mut buffers = Vec::new();
    let mut stamps = Vec::new();
    // and where the stack walks' event times sit (moved with the records, not in the span)
    let mut named = Vec::new();
    let mut at = 0;
    while at + HEADER <= etl.len() {
        let size = u32_at(etl, at) as usize;
        let filled = (u32_at(etl, at + 0x30) as usize).min(size);
        assert!(
            size >= HEADER && at + size <= etl.len(),
            "buffer at {at:#x}"
        );
        assert_eq!(u16_at(etl, at + 0x34) & 0x40, 0, "compressed buffer");
        buffers.push((at, size));
        // the buffer's own time may be on another clock than its records': moved, not measured
        named.push(at + 0x10);
        let mut pos = at + HEADER;
        while pos + 8 <= at + filled {
            let marker = u32_at(etl, pos);
            if marker == 0xFFFF_FFFF {
                break;
            }
            let (len, ts) = match (marker >> 16) as u8 {
                0x01..=0x04 => (u16_at(etl, pos + 4), Some(0x10)),
                0x10 | 0x11 => (u16_at(etl, pos + 4), Some(0x08)),
                0x0A | 0x0B | 0x12..=0x15 => (u16_at(etl, pos), Some(0x10)),
                _ => (u16_at(etl, pos), None),
            };
            if len == 0 {
                break;
            }
            stamps.extend(ts.map(|t| pos + t));
            // a StackWalk Stack or StackKey record names its event by the event's timestamp,
            // the first field of its payload (after a system, compact or perfinfo header)
            let payload = match (marker >> 16) as u8 {
                0x01 | 0x02 => Some(0x20),
                0x03 | 0x04 => Some(0x18),
                0x10 | 0x11 => Some(0x10),
                _ => None,
            };
            if let Some(p) = payload {
                let (opcode, group) = (etl[pos + 6], etl[pos + 7]);
                if group == 0x18 && matches!(opcode, 32 | 37 | 38) && p + 8 <= len {
                    named.push(pos + p);
                }
            }
            pos += (len + 7) & !7;
        }
        at += size;
    }
    let ts = |b: &[u8], o: usize| i64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let (lo, hi) = (stamps.iter().map(|&o| ts(etl, o)))
        .fold((i64::MAX, i64::MIN), |(lo, hi), t| (lo.min(t), hi.max(t)));
    let span = hi - lo + 1;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(out).unwrap());
    let mut copy = etl.to_vec();
    for k in 0..copies as i64 {
        for &o in stamps.iter().chain(&named) {
            let t = ts(etl, o) + k * span;
            copy[o..o + 8].copy_from_slice(&t.to_le_bytes());
        }
        for &(at, size) in &buffers {
            w.write_all(&copy[at..at + size]).unwrap();
        }
    }
    w.flush().unwrap();
}

/// Runs `dtx -q -E trace -n prog` and returns its output and its peak resident memory in KB
/// (`VmHWM`, read from `/proc` while it runs: the last reading before it exits).
#[cfg(target_os = "linux")]
pub fn quiet_with_peak_rss(trace: &str, prog: &str) -> (String, u64) {
    quiet_with_peak_rss_args(trace, prog, &[])
}

/// [`quiet_with_peak_rss`] with more arguments for dtx (`-x stackwindow=0`) before the others.
#[cfg(target_os = "linux")]
pub fn quiet_with_peak_rss_args(trace: &str, prog: &str, more: &[&str]) -> (String, u64) {
    use std::io::Read;
    let mut args: Vec<&str> = more.to_vec();
    args.extend(["-q", "-E", trace, "-n", prog]);
    let mut child = super::cli::Dtx::new(&args).spawn();
    let status = format!("/proc/{}/status", child.id());
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).unwrap();
        s
    });
    let mut stderr = child.stderr.take().unwrap();
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        let hwm = std::fs::read_to_string(&status).ok().and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        });
        peak = peak.max(hwm.unwrap_or(0));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let ok = child.wait().unwrap().success();
    assert!(ok, "{prog}: {}", errors.join().unwrap_or_default());
    (reader.join().unwrap(), peak)
}
