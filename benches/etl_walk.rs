//! Walking real `.etl` files with the pure-Rust reader: records/s and MB/s for the merged
//! (timestamp-ordered) and file-order walks over the 43 MB TraceLoggingTester.etl (inside a .7z,
//! unpacked once into the target dir) and the 33 MB randomascii slow-ppt trace (inside a zip,
//! read into memory). Skips when `shared/etl` is absent.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use dtx::etw::decode::{Decoder, Value};
use dtx::etw::reader::{open_zip_member, zip_etl_members, EtlFile};

fn shared() -> Option<PathBuf> {
    let p = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/etl"));
    p.exists().then_some(p)
}

fn trace_logging_tester(dir: &std::path::Path) -> EtlFile {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("etl_samples")
        .join("etwanalyzer_TraceLoggingTester");
    let etl = out.join("TraceLoggingTester.etl");
    if !out.join(".done").exists() {
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        sevenz_rust::decompress_file(dir.join("etwanalyzer_TraceLoggingTester.7z"), &out).unwrap();
        std::fs::write(out.join(".done"), b"").unwrap();
    }
    EtlFile::open(etl).unwrap()
}

fn slow_ppt(dir: &std::path::Path) -> EtlFile {
    let z = dir.join("randomascii_slow_ppt_trace.etl.zip");
    let z = z.to_str().unwrap();
    let m = zip_etl_members(z).unwrap().remove(0);
    open_zip_member(z, &m).unwrap()
}

/// Walks every record, touching a few fields so nothing is optimised away.
fn walk(etl: &EtlFile, merged: bool) -> u64 {
    let mut n = 0u64;
    let mut acc = 0u64;
    let mut it = if merged {
        etl.events()
    } else {
        etl.events_in_file_order()
    };
    while let Some(r) = it.next_event() {
        if let Ok(ev) = r {
            n += 1;
            acc = acc.wrapping_add(ev.time_ns ^ ev.payload.len() as u64 ^ ev.opcode as u64);
        }
    }
    black_box(acc);
    n
}

/// Folds a value into a checksum the way a consumer reads it: numbers as numbers, strings
/// converted to UTF-8 text (into a reused buffer, as `etwfield_str` does), arrays and structs
/// element by element.
fn touch(v: &Value<'_>, text: &mut Vec<u8>) -> u64 {
    match v {
        Value::Str(_) | Value::Utf16(_) | Value::Mapped { .. } => {
            text.clear();
            v.write_text(text);
            text.len() as u64
        }
        Value::Array(items) => items.iter().map(|v| touch(v, text)).sum(),
        Value::Struct(fields) => fields.iter().map(|(_, v)| touch(v, text)).sum(),
        Value::Bytes(b) | Value::Sid(b) => b.len() as u64,
        Value::Ptrs(p) => p.len() as u64,
        v => v.as_u64().unwrap_or(1),
    }
}

/// Walks every record in time order, decodes its payload (schemas learnt on the way) and reads
/// every field's value through the public API ([`touch`]); counts the events that decoded to
/// named fields.
fn walk_decode(etl: &EtlFile) -> (u64, u64) {
    let mut dec = Decoder::new();
    let (mut n, mut named) = (0u64, 0u64);
    let mut acc = 0u64;
    let mut text = Vec::new();
    let mut it = etl.events();
    while let Some(r) = it.next_event() {
        if let Ok(ev) = r {
            n += 1;
            dec.observe(&ev);
            let d = dec.decode(&ev);
            if d.is_named() {
                named += 1;
            }
            d.for_each_field(|name, v| {
                acc = acc.wrapping_add(name.len() as u64 + touch(v, &mut text));
            });
        }
    }
    black_box(acc);
    (n, named)
}

fn bench(c: &mut Criterion) {
    let Some(dir) = shared() else {
        eprintln!("etl_walk: shared/etl not found, skipping");
        return;
    };
    let files = [
        ("TraceLoggingTester", trace_logging_tester(&dir)),
        ("slow_ppt", slow_ppt(&dir)),
    ];
    let mut g = c.benchmark_group("etl_walk");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    for (name, etl) in &files {
        let records = walk(etl, true);
        let mb = etl.bytes().len() as f64 / 1e6;
        // A plain timing line with the two rates the project tracks.
        for merged in [true, false] {
            let t = Instant::now();
            let reps = 5;
            for _ in 0..reps {
                assert_eq!(walk(etl, merged), records);
            }
            let s = t.elapsed().as_secs_f64() / reps as f64;
            eprintln!(
                "{name} ({}): {records} records, {mb:.1} MB: {:.1} M records/s, {:.0} MB/s",
                if merged { "merged" } else { "file order" },
                records as f64 / s / 1e6,
                mb / s
            );
        }
        let t = Instant::now();
        let (n, named) = walk_decode(etl);
        let s = t.elapsed().as_secs_f64();
        eprintln!(
            "{name} (merged + decoded): {n} records ({named} to named fields), {mb:.1} MB: {:.1} M records/s, {:.0} MB/s",
            n as f64 / s / 1e6,
            mb / s
        );
        g.throughput(Throughput::Elements(records));
        g.bench_function(format!("{name}/merged"), |b| b.iter(|| walk(etl, true)));
        g.bench_function(format!("{name}/file_order"), |b| {
            b.iter(|| walk(etl, false))
        });
        g.bench_function(format!("{name}/merged_decoded"), |b| {
            b.iter(|| walk_decode(etl))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
