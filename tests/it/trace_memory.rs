//! Memory bounded by what the program keeps, not by the trace: a synthetic trace nine times
//! the Windows 7 xperf trace (about 300 MB, its buffers repeated with their timestamps moved
//! on, see `support/etl.rs`) is walked with the same resident memory, give or take, as the
//! 33 MB original, and every record of it counts. The multi-GB run is
//! `scripts/bench-memory.sh`. Skips when `../shared/etl` is absent.

use crate::support::etl;

const TRACE: &str = "randomascii_slow_ppt_trace.etl.zip";
#[cfg(target_os = "linux")]
const COPIES: usize = 9;
#[cfg(target_os = "linux")]
const PROG: &str = "diag:::events { @[execname] = count(); @n = count(); } \
                    END { printa(\"total %@d\\n\", @n); }";

/// The `total N` line of [`PROG`]'s output.
#[cfg(target_os = "linux")]
fn total(out: &str) -> u64 {
    let line = out.lines().find_map(|l| l.strip_prefix("total "));
    line.and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no total in {out}"))
}

#[cfg(target_os = "linux")]
#[test]
fn a_trace_nine_times_as_long_takes_no_more_memory() {
    let Some(bytes) = etl::trace_bytes(TRACE) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (one, big) = (dir.path().join("one.etl"), dir.path().join("big.etl"));
    std::fs::write(&one, &bytes).unwrap();
    etl::write_repeated_trace(&bytes, COPIES, &big);
    let size = std::fs::metadata(&big).unwrap().len();
    assert_eq!(size, COPIES as u64 * bytes.len() as u64);
    let (out1, rss1) = etl::quiet_with_peak_rss(one.to_str().unwrap(), PROG);
    let (out9, rss9) = etl::quiet_with_peak_rss(big.to_str().unwrap(), PROG);
    // every record of every copy is read
    assert_eq!(total(&out9), COPIES as u64 * total(&out1), "{out1}\n{out9}");
    assert_eq!(total(&out1), 505_715);
    // the whole 33 MB trace may stay mapped; of the 300 MB one only the buffers being read
    eprintln!(
        "peak RSS: {rss1} KB over 33 MB, {rss9} KB over {} MB",
        size >> 20
    );
    assert!(rss1 > 0 && rss9 > 0);
    assert!(rss9 < 2 * rss1, "{rss9} KB against {rss1} KB");
    assert!(rss9 * 1024 < size / 4, "{rss9} KB for {size} bytes");
}

#[cfg(target_os = "linux")]
#[test]
fn a_large_trace_inside_a_zip_streams_rather_than_inflates_into_memory() {
    let Some(bytes) = etl::trace_bytes(TRACE) else {
        return;
    };
    // five copies: past the size (128 MB) above which a member is unpacked to disk
    const ZIPPED: usize = 5;
    let dir = tempfile::tempdir().unwrap();
    let (one, big) = (dir.path().join("one.etl"), dir.path().join("big.etl"));
    std::fs::write(&one, &bytes).unwrap();
    etl::write_repeated_trace(&bytes, ZIPPED, &big);
    let zip_path = dir.path().join("big.zip");
    let mut z = zip::ZipWriter::new(std::fs::File::create(&zip_path).unwrap());
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .compression_level(Some(1))
        .large_file(true);
    z.start_file("big.etl", opts).unwrap();
    std::io::copy(&mut std::fs::File::open(&big).unwrap(), &mut z).unwrap();
    z.finish().unwrap();
    let size = std::fs::metadata(&big).unwrap().len();
    std::fs::remove_file(&big).unwrap();
    let (out1, rss1) = etl::quiet_with_peak_rss(one.to_str().unwrap(), PROG);
    let (outz, rssz) = etl::quiet_with_peak_rss(zip_path.to_str().unwrap(), PROG);
    assert_eq!(total(&outz), ZIPPED as u64 * total(&out1), "{outz}");
    eprintln!(
        "peak RSS: {rss1} KB over 33 MB, {rssz} KB over a {} MB member",
        size >> 20
    );
    // inflated into memory the member alone would be resident: 170 MB
    assert!(rssz * 1024 < size / 2, "{rssz} KB for a {size}-byte member");
    // and the temporary file is gone
    let left = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("dtx-unpacked-"))
        .count();
    assert_eq!(left, 0, "a temporary unpacked trace is left");
}

/// Writes the synthetic trace of `scripts/bench-memory.sh`: `$DTX_BIG_COPIES` copies of the
/// xperf trace into `$DTX_BIG_TRACE`. Ignored by default (it writes gigabytes).
#[test]
#[ignore]
fn write_big_trace() {
    let (Ok(path), Ok(copies)) = (
        std::env::var("DTX_BIG_TRACE"),
        std::env::var("DTX_BIG_COPIES"),
    ) else {
        panic!("set DTX_BIG_TRACE and DTX_BIG_COPIES");
    };
    let bytes = etl::trace_bytes(TRACE).expect("../shared/etl is needed");
    etl::write_repeated_trace(&bytes, copies.parse().unwrap(), path.as_ref());
}
