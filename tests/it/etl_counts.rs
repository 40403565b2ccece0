//! The `.etl` reader against the real traces in `shared/etl`: for every file, the counts it
//! produces must equal `expected_counts.json` exactly (totals, header types, buffer flag/type,
//! kernel group/opcode, EVENT_HEADER provider/id/opcode, classic GUID/type/version, extended
//! items, logfile header). Also: merged order is by timestamp, and damaged files give errors
//! with offsets while the good records still come. Skips (with a message) when `shared/` is absent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use dtx::etw::reader::{kernel_group_name, open_zip_member, zip_etl_members, EtlError, EtlFile};
use dtx::etw::record::HeaderKind;

fn shared_dir() -> Option<PathBuf> {
    crate::support::etl::folder("etl", "expected_counts.json")
}

// ---------------------------------------------------------------------------------------------
// A small JSON reader (the test needs objects, strings and integers).

#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    fn get(&self, k: &str) -> Option<&Json> {
        match self {
            Json::Obj(v) => v.iter().find(|(n, _)| n == k).map(|(_, j)| j),
            _ => None,
        }
    }
    fn as_u64(&self) -> u64 {
        match self {
            Json::Num(n) => *n as u64,
            other => panic!("not a number: {other:?}"),
        }
    }
    fn as_str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            other => panic!("not a string: {other:?}"),
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn value(&mut self) -> Json {
        self.ws();
        match self.s[self.i] {
            b'{' => {
                self.i += 1;
                let mut v = Vec::new();
                loop {
                    self.ws();
                    if self.s[self.i] == b'}' {
                        self.i += 1;
                        return Json::Obj(v);
                    }
                    let Json::Str(k) = self.value() else {
                        panic!("bad key")
                    };
                    self.ws();
                    assert_eq!(self.s[self.i], b':');
                    self.i += 1;
                    let val = self.value();
                    v.push((k, val));
                    self.ws();
                    if self.s[self.i] == b',' {
                        self.i += 1;
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut v = Vec::new();
                loop {
                    self.ws();
                    if self.s[self.i] == b']' {
                        self.i += 1;
                        return Json::Arr(v);
                    }
                    v.push(self.value());
                    self.ws();
                    if self.s[self.i] == b',' {
                        self.i += 1;
                    }
                }
            }
            b'"' => {
                self.i += 1;
                let mut out = String::new();
                loop {
                    let c = self.s[self.i];
                    self.i += 1;
                    match c {
                        b'"' => return Json::Str(out),
                        b'\\' => {
                            let e = self.s[self.i];
                            self.i += 1;
                            match e {
                                b'n' => out.push('\n'),
                                b't' => out.push('\t'),
                                b'u' => {
                                    let h =
                                        std::str::from_utf8(&self.s[self.i..self.i + 4]).unwrap();
                                    self.i += 4;
                                    out.push(
                                        char::from_u32(u32::from_str_radix(h, 16).unwrap())
                                            .unwrap_or('?'),
                                    );
                                }
                                other => out.push(other as char),
                            }
                        }
                        _ => {
                            // Copy a UTF-8 sequence whole.
                            let start = self.i - 1;
                            let mut end = self.i;
                            while end < self.s.len() && (self.s[end] & 0xC0) == 0x80 {
                                end += 1;
                            }
                            out.push_str(std::str::from_utf8(&self.s[start..end]).unwrap());
                            self.i = end;
                        }
                    }
                }
            }
            b't' => {
                self.i += 4;
                Json::Bool(true)
            }
            b'f' => {
                self.i += 5;
                Json::Bool(false)
            }
            b'n' => {
                self.i += 4;
                Json::Null
            }
            _ => {
                let start = self.i;
                while self.i < self.s.len()
                    && matches!(
                        self.s[self.i],
                        b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
                    )
                {
                    self.i += 1;
                }
                Json::Num(
                    std::str::from_utf8(&self.s[start..self.i])
                        .unwrap()
                        .parse()
                        .unwrap(),
                )
            }
        }
    }
}

fn parse_json(s: &str) -> Json {
    Parser {
        s: s.as_bytes(),
        i: 0,
    }
    .value()
}

// ---------------------------------------------------------------------------------------------
// The files: plain .etl, .etl members of zips, and the .etl inside the .7z (unpacked once).

/// Unpacks the .7z samples into the target's temp dir once (kept between runs).
fn unpack_7z(archive: &Path) -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("etl_samples")
        .join(archive.file_stem().unwrap());
    let done = dir.join(".done");
    if !done.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        sevenz_rust::decompress_file(archive, &dir)
            .unwrap_or_else(|e| panic!("unpacking {}: {e}", archive.display()));
        std::fs::write(&done, b"").unwrap();
    }
    let mut out = Vec::new();
    let mut stack = vec![dir];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x.eq_ignore_ascii_case("etl")) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// How to open one sample.
#[derive(Clone, Debug)]
enum Sample {
    Plain(PathBuf),
    Zip(PathBuf, String),
}

impl Sample {
    fn open(&self) -> EtlFile {
        match self {
            Sample::Plain(p) => EtlFile::open(p).unwrap_or_else(|e| panic!("{e}")),
            Sample::Zip(z, m) => {
                open_zip_member(z.to_str().unwrap(), m).unwrap_or_else(|e| panic!("{e}"))
            }
        }
    }
    fn base_name(&self) -> String {
        let s = match self {
            Sample::Plain(p) => p.file_name().unwrap().to_string_lossy().to_string(),
            Sample::Zip(_, m) => m.clone(),
        };
        s.rsplit('/').next().unwrap().to_string()
    }
}

fn samples(dir: &Path) -> Vec<Sample> {
    static CACHE: OnceLock<Vec<Sample>> = OnceLock::new();
    CACHE
        .get_or_init(|| {
            let mut out = Vec::new();
            let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            entries.sort();
            for p in entries {
                let name = p
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .to_ascii_lowercase();
                if name.ends_with(".etl") {
                    out.push(Sample::Plain(p));
                } else if name.ends_with(".zip") {
                    for m in zip_etl_members(p.to_str().unwrap()).unwrap() {
                        out.push(Sample::Zip(p.clone(), m));
                    }
                } else if name.ends_with(".7z") {
                    out.extend(unpack_7z(&p).into_iter().map(Sample::Plain));
                }
            }
            out
        })
        .clone()
}

fn expected() -> Option<(PathBuf, Json)> {
    let dir = shared_dir()?;
    let j = parse_json(&std::fs::read_to_string(dir.join("expected_counts.json")).unwrap());
    Some((dir, j))
}

/// The expected entry for a file: same base name and size.
fn entry_for<'a>(j: &'a Json, name: &str, size: u64) -> Option<(&'a str, &'a Json)> {
    let Json::Obj(all) = j else { return None };
    all.iter()
        .find(|(_, e)| {
            e.get("file").map(Json::as_str) == Some(name)
                && e.get("size").map(Json::as_u64) == Some(size)
        })
        .map(|(k, e)| (k.as_str(), e))
}

// ---------------------------------------------------------------------------------------------
// Counting.

type Counts = BTreeMap<String, BTreeMap<String, u64>>;

const EH_FLAGS: &[(u16, &str)] = &[
    (0x01, "EXTENDED_INFO"),
    (0x02, "PRIVATE_SESSION"),
    (0x04, "STRING_ONLY"),
    (0x08, "TRACE_MESSAGE"),
    (0x10, "NO_CPUTIME"),
    (0x20, "32_BIT_HEADER"),
    (0x40, "64_BIT_HEADER"),
    (0x100, "CLASSIC_HEADER"),
    (0x200, "PROCESSOR_INDEX"),
];

struct Tally {
    counts: Counts,
    total: u64,
    buffers: u64,
    errors: Vec<EtlError>,
}

fn tally(etl: &EtlFile) -> Tally {
    let mut c: Counts = BTreeMap::new();
    let mut bump = |cat: &str, key: String| {
        *c.entry(cat.to_string())
            .or_default()
            .entry(key)
            .or_insert(0) += 1
    };
    let mut buffers = 0;
    for b in etl.buffers() {
        let Ok(b) = b else { continue };
        buffers += 1;
        bump(
            "buffer_flag_type",
            format!("{:#x}/{}", b.header.flags, b.header.buffer_type),
        );
        if b.header.is_compressed() {
            bump("header_types", "compressed_buffers".to_string());
        }
    }
    let mut total = 0;
    let mut errors = Vec::new();
    let mut it = etl.events_in_file_order();
    while let Some(r) = it.next_event() {
        let ev = match r {
            Ok(ev) => ev,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        total += 1;
        bump("header_types", format!("0x{:02x}", ev.header_type));
        match ev.kind {
            HeaderKind::System | HeaderKind::Compact | HeaderKind::PerfInfo => {
                let g = ev.kernel_group.unwrap();
                let name = kernel_group_name(g)
                    .map(str::to_string)
                    .unwrap_or(format!("0x{g:02x}"));
                bump("kernel_group_opcode", format!("{name}/{}", ev.opcode));
            }
            HeaderKind::Full | HeaderKind::Instance => {
                bump(
                    "classic_guid_type_version",
                    format!("{}/{}/{}", ev.provider, ev.opcode, ev.version),
                );
            }
            HeaderKind::EventHeader => {
                bump(
                    "event_header_provider_id_opcode",
                    format!("{}/{}/{}", ev.provider, ev.id, ev.opcode),
                );
                bump("event_header_providers", ev.provider.to_string());
                for (bit, name) in EH_FLAGS {
                    if ev.flags & bit != 0 {
                        bump("event_header_flags_and_ext", format!("flag_{name}"));
                    }
                }
                for x in &ev.extended {
                    bump(
                        "event_header_flags_and_ext",
                        format!("ext_type_{}", x.ext_type),
                    );
                }
            }
            _ => bump("other_kinds", format!("{:?}", ev.kind)),
        }
    }
    Tally {
        counts: c,
        total,
        buffers,
        errors,
    }
}

fn expected_map(e: &Json, cat: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    if let Some(Json::Obj(v)) = e.get(cat) {
        for (k, n) in v {
            // Provider names in parentheses are the oracle's annotation, not data of the file.
            let k = match k.find(" (") {
                Some(i) if cat == "event_header_providers" => k[..i].to_string(),
                _ => k.clone(),
            };
            m.insert(k, n.as_u64());
        }
    }
    m
}

const CATEGORIES: &[&str] = &[
    "header_types",
    "buffer_flag_type",
    "kernel_group_opcode",
    "event_header_provider_id_opcode",
    "event_header_providers",
    "classic_guid_type_version",
    "event_header_flags_and_ext",
];

#[test]
fn counts_match_expected_for_every_file() {
    let Some((dir, j)) = expected() else { return };
    let all = samples(&dir);
    let Json::Obj(entries) = &j else {
        panic!("expected_counts.json is not an object")
    };
    let mut checked = Vec::new();
    let mut failures = Vec::new();
    for s in &all {
        let etl = s.open();
        let size = etl.bytes().len() as u64;
        let Some((key, e)) = entry_for(&j, &s.base_name(), size) else {
            failures.push(format!("{s:?}: no entry in expected_counts.json"));
            continue;
        };
        let t = tally(&etl);
        let mut problems = Vec::new();
        if !t.errors.is_empty() {
            problems.push(format!(
                "errors: {:?}",
                t.errors
                    .iter()
                    .take(3)
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
            ));
        }
        if t.total != e.get("events_total").unwrap().as_u64() {
            problems.push(format!(
                "events_total {} != {}",
                t.total,
                e.get("events_total").unwrap().as_u64()
            ));
        }
        if let Some(b) = e.get("buffers") {
            if t.buffers != b.as_u64() {
                problems.push(format!("buffers {} != {}", t.buffers, b.as_u64()));
            }
        }
        for cat in CATEGORIES {
            let want = expected_map(e, cat);
            let got = t.counts.get(*cat).cloned().unwrap_or_default();
            if want != got {
                let mut diff = Vec::new();
                for k in want.keys().chain(got.keys()) {
                    let (a, b) = (want.get(k), got.get(k));
                    if a != b
                        && !diff
                            .iter()
                            .any(|d: &String| d.starts_with(&format!("{k}:")))
                    {
                        diff.push(format!("{k}: want {a:?} got {b:?}"));
                    }
                }
                problems.push(format!(
                    "{cat}: {}",
                    diff.into_iter().take(8).collect::<Vec<_>>().join("; ")
                ));
            }
        }
        if let Some(k) = t.counts.get("other_kinds") {
            problems.push(format!("unexpected record kinds {k:?}"));
        }
        // The merged walk sees the same records.
        let mut merged = 0u64;
        let mut it = etl.events();
        while let Some(r) = it.next_event() {
            if r.is_ok() {
                merged += 1;
            }
        }
        if merged != t.total {
            problems.push(format!(
                "merged walk saw {merged} records, file order {}",
                t.total
            ));
        }
        // the walk that builds each record where it is read (`next_into`, the `-E` run's)
        // gives the same records and errors as `next_event`, field by field
        if let Some(p) = next_into_differs(&etl) {
            problems.push(p);
        }
        eprintln!(
            "{key}: {} records, {} buffers{}",
            t.total,
            t.buffers,
            if problems.is_empty() { ", ok" } else { "" }
        );
        if problems.is_empty() {
            checked.push(key.to_string());
        } else {
            failures.push(format!("{key}:\n    {}", problems.join("\n    ")));
        }
    }
    assert!(
        failures.is_empty(),
        "count mismatches:\n{}",
        failures.join("\n")
    );
    for (k, _) in entries {
        assert!(
            checked.contains(k),
            "expected_counts.json entry {k} was not checked (file not found)"
        );
    }
}

#[test]
fn logfile_headers_match_expected() {
    let Some((dir, j)) = expected() else { return };
    for s in samples(&dir) {
        let etl = s.open();
        let Some((key, e)) = entry_for(&j, &s.base_name(), etl.bytes().len() as u64) else {
            continue;
        };
        let want = e.get("logfile_header").unwrap();
        let h = etl.header();
        assert!(
            etl.header_error().is_none(),
            "{key}: {:?}",
            etl.header_error()
        );
        let n = |k: &str| want.get(k).unwrap().as_u64();
        assert_eq!(h.buffer_size as u64, n("buffer_size"), "{key} buffer_size");
        assert_eq!(
            h.version_string(),
            want.get("version").unwrap().as_str(),
            "{key} version"
        );
        assert_eq!(h.os_build as u64, n("os_build"), "{key} os_build");
        assert_eq!(h.nproc as u64, n("nproc"), "{key} nproc");
        assert_eq!(
            format!("{:#x}", h.log_file_mode),
            want.get("log_file_mode").unwrap().as_str(),
            "{key} mode"
        );
        assert_eq!(
            h.buffers_written as u64,
            n("buffers_written"),
            "{key} buffers_written"
        );
        assert_eq!(
            h.pointer_size as u64,
            n("pointer_size"),
            "{key} pointer_size"
        );
        assert_eq!(h.events_lost as u64, n("events_lost"), "{key} events_lost");
        assert_eq!(h.cpu_mhz as u64, n("cpu_mhz"), "{key} cpu_mhz");
        // FORMAT.md 4.8: every sample uses the QPC clock.
        assert_eq!(h.clock_type, 1, "{key} clock type");
        assert!(h.perf_freq > 0, "{key} perf_freq");
        // Start between 2005 and 2035, as FILETIME.
        let year_ns = 365 * 24 * 3600 * 1_000_000_000i64;
        let start = h.start_unix_ns();
        assert!(
            start > 35 * year_ns && start < 65 * year_ns,
            "{key} start time {start}"
        );
        assert_eq!(
            h.compressed(),
            etl.buffers().flatten().any(|b| b.header.is_compressed()),
            "{key} compressed"
        );
    }
}

#[test]
fn merged_events_are_in_timestamp_order() {
    let Some(dir) = shared_dir() else { return };
    for s in samples(&dir) {
        let etl = s.open();
        let start_ns = etl.header().start_unix_ns() as u64;
        let mut last = i64::MIN;
        let mut last_ns = 0u64;
        let mut n = 0u64;
        let mut inversions_file_order = 0u64;
        let mut it = etl.events();
        while let Some(r) = it.next_event() {
            let ev = r.unwrap_or_else(|e| panic!("{e}"));
            assert!(
                ev.raw_timestamp >= last,
                "{}: record {n} goes back in time",
                etl.name()
            );
            assert!(
                ev.time_ns >= last_ns,
                "{}: time_ns goes back at record {n}",
                etl.name()
            );
            assert_eq!(
                ev.wall_ns,
                start_ns + ev.time_ns,
                "{}: wall clock",
                etl.name()
            );
            assert!(ev.cpu < 4096, "{}: cpu {}", etl.name(), ev.cpu);
            last = ev.raw_timestamp;
            last_ns = ev.time_ns;
            n += 1;
        }
        let mut prev = i64::MIN;
        let mut it = etl.events_in_file_order();
        while let Some(r) = it.next_event() {
            let ts = r.unwrap().raw_timestamp;
            if ts < prev {
                inversions_file_order += 1;
            }
            prev = ts;
        }
        eprintln!(
            "{}: {n} records merged; {inversions_file_order} inversions in file order",
            etl.name()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Damage: truncation, corrupt buffer headers, records running past buffers, non-ETL input.

fn small_samples(dir: &Path) -> Vec<(String, Vec<u8>)> {
    samples(dir)
        .into_iter()
        .map(|s| {
            let etl = s.open();
            (etl.name().to_string(), etl.bytes().to_vec())
        })
        .filter(|(_, b)| b.len() <= 5 << 20)
        .collect()
}

fn walk(name: &str, bytes: Vec<u8>) -> (u64, Vec<EtlError>) {
    match EtlFile::from_bytes_named(name, bytes) {
        Err(e) => (0, vec![e]),
        Ok(etl) => {
            let mut ok = 0;
            let mut errs = Vec::new();
            for merged in [false, true] {
                let mut it = if merged {
                    etl.events()
                } else {
                    etl.events_in_file_order()
                };
                while let Some(r) = it.next_event() {
                    match r {
                        Ok(_) => ok += 1,
                        Err(e) => errs.push(e),
                    }
                }
            }
            (ok / 2, errs)
        }
    }
}

#[test]
fn truncated_files_keep_the_good_records() {
    let Some(dir) = shared_dir() else { return };
    for (name, bytes) in small_samples(&dir) {
        let (full, errs) = walk(&name, bytes.clone());
        assert!(errs.is_empty(), "{name}: {errs:?}");
        let len = bytes.len();
        let mut prev_ok = 0;
        // Many cuts on the small files, a few on the big (compressed) ones to keep debug runs short.
        let cuts = if len > 2 << 20 { 6 } else { 24 };
        for k in 1..=cuts {
            let cut = len * k / (cuts + 1) + (k * 7919) % 97;
            let cut = cut.min(len - 1);
            let (ok, errs) = walk(&name, bytes[..cut].to_vec());
            assert!(
                ok <= full,
                "{name} cut at {cut}: more records than the whole file"
            );
            assert!(
                ok + 2 >= prev_ok || ok >= prev_ok,
                "{name} cut at {cut}: {ok} < {prev_ok}"
            );
            prev_ok = ok;
            for e in &errs {
                assert!(
                    e.offset <= cut as u64,
                    "{name} cut at {cut}: error offset beyond the end: {e}"
                );
                assert!(e.to_string().contains("offset 0x"), "{e}");
            }
            if cut > 0x10000 {
                assert!(ok > 0, "{name} cut at {cut}: no records");
            }
        }
    }
}

#[test]
fn corrupt_buffer_headers_are_reported_and_skipped() {
    let Some(dir) = shared_dir() else { return };
    for (name, bytes) in small_samples(&dir) {
        let etl = EtlFile::from_bytes_named(name.clone(), bytes.clone()).unwrap();
        let buffers: Vec<_> = etl.buffers().flatten().collect();
        if buffers.len() < 3 {
            continue;
        }
        let (full, _) = walk(&name, bytes.clone());
        // Smash the size and flags of a middle buffer.
        let victim = buffers[buffers.len() / 2];
        let mut bad = bytes.clone();
        let o = victim.offset as usize;
        bad[o..o + 4].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
        bad[o + 0x34] = 0xFF;
        bad[o + 0x35] = 0xFF;
        let (ok, errs) = walk(&name, bad);
        assert!(
            !errs.is_empty(),
            "{name}: no error for a smashed buffer header"
        );
        assert!(
            errs.iter()
                .any(|e| e.offset == victim.offset && e.file == name),
            "{name}: errors do not name offset {:#x}: {errs:?}",
            victim.offset
        );
        assert!(
            ok > 0 && ok < full,
            "{name}: {ok} of {full} records after one bad buffer"
        );
        // Records after the damage still come: at least all but the victim's records.
        let victim_records = {
            let end = victim.offset + victim.header.buffer_size as u64;
            // Count by walking a file made of just that buffer after the first one.
            let first = buffers[0];
            let mut one = bytes
                [first.offset as usize..(first.offset + first.header.buffer_size as u64) as usize]
                .to_vec();
            one.extend_from_slice(&bytes[victim.offset as usize..end as usize]);
            let (k, _) = walk("victim", one);
            let (h, _) = walk("first", bytes[..first.header.buffer_size as usize].to_vec());
            k - h
        };
        assert_eq!(
            ok + victim_records,
            full,
            "{name}: records lost beyond the damaged buffer"
        );
    }
}

#[test]
fn records_running_past_their_buffer_are_errors() {
    let Some(dir) = shared_dir() else { return };
    let (name, bytes) = small_samples(&dir)
        .into_iter()
        .find(|(n, _)| n.ends_with("tx_HTTP_Server.etl"))
        .unwrap();
    let etl = EtlFile::from_bytes_named(name.clone(), bytes.clone()).unwrap();
    let b = etl.buffers().flatten().nth(3).unwrap();
    let rec = b.offset as usize + 0x48;
    let mut bad = bytes.clone();
    // EVENT_HEADER records start with their size: make it run past the buffer.
    bad[rec..rec + 2].copy_from_slice(&0xFFF0u16.to_le_bytes());
    let (ok, errs) = walk(&name, bad.clone());
    let (full, _) = walk(&name, bytes.clone());
    assert!(ok < full && ok > full / 2, "{ok} of {full}");
    assert!(
        errs.iter()
            .any(|e| e.offset == rec as u64 && e.message.contains("runs past")),
        "{errs:?}"
    );
    // An unknown header type.
    let mut bad = bytes;
    bad[rec + 2] = 0x3F;
    let (_, errs) = walk(&name, bad);
    assert!(
        errs.iter()
            .any(|e| e.offset == rec as u64 && e.message.contains("unknown record header type")),
        "{errs:?}"
    );
}

#[test]
fn non_etl_input_is_a_clear_error() {
    let e = EtlFile::from_bytes_named("empty", Vec::new()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("empty: offset 0x0: not an ETL file"),
        "{e}"
    );
    let e = EtlFile::from_bytes_named(
        "text",
        b"hello world, this is not a trace at all".repeat(100),
    )
    .unwrap_err();
    assert!(e.message.contains("not an ETL file"), "{e}");
    let Some(dir) = shared_dir() else { return };
    // A zip holding no .etl file.
    let tmp = tempfile::tempdir().unwrap();
    let zpath = tmp.path().join("no_etl.zip");
    {
        let f = std::fs::File::create(&zpath).unwrap();
        let mut w = zip::ZipWriter::new(f);
        w.start_file("readme.txt", zip::write::SimpleFileOptions::default())
            .unwrap();
        std::io::Write::write_all(&mut w, b"not a trace").unwrap();
        w.finish().unwrap();
    }
    let e = dtx::etw::reader::open_path(zpath.to_str().unwrap()).unwrap_err();
    assert!(e.message.contains("no .etl"), "{e}");
    // A zip with several .etl files asks for one; `zip:member` picks it.
    let diag = dir.join("perfview_diaghub-dotnetcore3.1-win-x64-diagsession.zip");
    let e = dtx::etw::reader::open_path(diag.to_str().unwrap()).unwrap_err();
    assert!(e.message.contains("4 .etl files"), "{e}");
    let members = zip_etl_members(diag.to_str().unwrap()).unwrap();
    let one = dtx::etw::reader::open_path(&format!("{}:{}", diag.display(), members[0])).unwrap();
    assert!(one.header().buffer_size > 0);
    // A single-member zip opens directly.
    let gc = dir.join("perfview_gcevents.etl.zip");
    assert!(dtx::etw::reader::open_path(gc.to_str().unwrap()).is_ok());
}

/// Where `Events::next_into` and `Events::next_event` first disagree over a merged walk of
/// `etl`, if anywhere.
fn next_into_differs(etl: &EtlFile) -> Option<String> {
    let (mut a, mut b) = (etl.events(), etl.events());
    let mut n = 0u64;
    loop {
        let mut into = dtx::etw::reader::blank_record(0);
        let got = b.next_into(&mut into);
        match (a.next_event(), got) {
            (None, None) => return None,
            (Some(Ok(ev)), Some(Ok(()))) => {
                let same = (
                    ev.header_type,
                    ev.kind,
                    ev.flags,
                    ev.provider,
                    ev.kernel_group,
                    ev.id,
                    ev.version,
                    ev.channel,
                    ev.level,
                    ev.opcode,
                    ev.task,
                    ev.keyword,
                ) == (
                    into.header_type,
                    into.kind,
                    into.flags,
                    into.provider,
                    into.kernel_group,
                    into.id,
                    into.version,
                    into.channel,
                    into.level,
                    into.opcode,
                    into.task,
                    into.keyword,
                ) && (
                    ev.pid,
                    ev.tid,
                    ev.cpu,
                    ev.raw_timestamp,
                    ev.time_ns,
                    ev.wall_ns,
                    ev.pointer_size,
                    ev.activity_id,
                    ev.payload,
                ) == (
                    into.pid,
                    into.tid,
                    into.cpu,
                    into.raw_timestamp,
                    into.time_ns,
                    into.wall_ns,
                    into.pointer_size,
                    into.activity_id,
                    into.payload,
                ) && ev.extended.iter().eq(into.extended.iter());
                if !same {
                    return Some(format!("next_into differs from next_event at record {n}"));
                }
            }
            (Some(Err(x)), Some(Err(y))) if x.to_string() == y.to_string() => {}
            (x, y) => {
                return Some(format!(
                    "next_into differs from next_event after {n} records: {:?} / {:?}",
                    x.map(|r| r.is_ok()),
                    y.map(|r| r.is_ok())
                ))
            }
        }
        n += 1;
    }
}
