//! Naming a trace's frames with PDBs from a symbol server far away: 20 images, each with its
//! own PDB (the clang-built stand-in given 20 GUIDs), on a server on 127.0.0.1 that waits
//! 50 ms before each answer (tests/it/support/symbol_server.rs). Serial: each image's PDB is
//! fetched when its first frame is named (what a lone `stack()` does); parallel: the frames of
//! an aggregation about to be printed are handed to `TraceSymbols::prefetch` first, which
//! fetches 4 PDBs at a time. Every run has a new server and cache (a run asks no URL twice).
//!
//! `cargo bench --bench symbol_server` (needs clang, lld and the mingw runtime).

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

#[path = "../tests/it/support/synthetic_etl.rs"]
mod synthetic;

#[path = "../tests/it/support/standin_pdb.rs"]
mod standin_pdb;

#[path = "../tests/it/support/symbol_server.rs"]
mod server;

use dtx::agg::SymbolResolver;

const IMAGES: u64 = 20;
const BASE: u64 = 0x7ff0_0000_0000;
const LATENCY: Duration = Duration::from_millis(50);

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let Some(pdb) = standin_pdb::clang_pdb(
        dir.path(),
        "int standin(int x) { return x + 1; }\nint main(void) { return standin(1); }\n",
    ) else {
        return;
    };
    let bytes = std::fs::read(&pdb).unwrap();
    let (guid, age) = dtx::symbols::pdb::pdb_identity(&pdb).unwrap();
    let syms = dtx::symbols::pdb::read(&pdb, None).unwrap();
    let rva = syms
        .functions
        .iter()
        .find(|f| f.name == "standin")
        .unwrap()
        .rva as u64;
    let old = standin_pdb::guid_bytes(&guid);
    // 20 PDBs: the stand-in with its GUID changed (every copy of it in the file)
    let mut files = HashMap::new();
    let mut c = synthetic::CpuRecords::default();
    let t = synthetic::START + 1;
    c.process(t, 100, "app.exe");
    c.thread(t, 100, 104);
    for i in 0..IMAGES {
        let mut g = old;
        g[15] = g[15].wrapping_add(1 + i as u8);
        let mut b = bytes.clone();
        let mut at = 0;
        while let Some(k) = b[at..].windows(16).position(|w| w == old) {
            b[at + k..at + k + 16].copy_from_slice(&g);
            at += k + 16;
        }
        let name = format!("lib{i}.pdb");
        let id = dtx::symbols::pdb::PdbId {
            guid: dtx::etw::record::Guid::from_le_bytes(&g).unwrap(),
            age,
            path: name.clone(),
        };
        files.insert(format!("/{name}/{}/{name}", id.store_key()), b);
        let base = BASE + i * 0x100000;
        c.image(t, 100, base, 0x100000, &format!(r"C:\app\lib{i}.dll"));
        c.pdb_identity(t, 100, base, g, age, &name);
    }
    let trace = dir.path().join("app.etl");
    std::fs::write(&trace, synthetic::trace_bytes(&[c])).unwrap();
    let src = dtx::sources::etl::TraceSource::open(&trace.to_string_lossy()).unwrap();
    let state = src.kernel_images();
    let frames: Vec<(Option<u32>, u64)> = (0..IMAGES)
        .map(|i| (Some(100), BASE + i * 0x100000 + rva))
        .collect();
    let once = |parallel: bool| -> Duration {
        let s = server::Server::start(files.clone(), server::Mode::Serve, LATENCY);
        let cache = tempfile::tempdir().unwrap();
        let path = dtx::symbols::pdb::SymbolPath::parse(&format!(
            "srv*{}*{}",
            cache.path().display(),
            s.url()
        ));
        let store = dtx::symbols::PdbStore::new(path);
        let names = dtx::symbols::TraceSymbols::with_store(&state, &store);
        let t0 = Instant::now();
        if parallel {
            names.prefetch(&mut frames.iter().copied());
        }
        for &(pid, pc) in &frames {
            let n = names.user(pid.unwrap_or(0), pc);
            assert!(n.ends_with("`standin"), "{n}");
        }
        let took = t0.elapsed();
        assert_eq!(s.asked().len(), IMAGES as usize);
        assert_eq!(files_in(cache.path()), IMAGES as usize);
        took
    };
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "machine load (1, 5, 15 min): {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    for (label, parallel) in [("serial", false), ("parallel (4 at a time)", true)] {
        let mut runs: Vec<Duration> = (0..5).map(|_| once(parallel)).collect();
        runs.sort();
        println!(
            "{IMAGES} PDBs, {} ms per request, {label}: median {:.0} ms (min {:.0}, max {:.0})",
            LATENCY.as_millis(),
            runs[2].as_secs_f64() * 1e3,
            runs[0].as_secs_f64() * 1e3,
            runs[4].as_secs_f64() * 1e3
        );
    }
}

fn files_in(dir: &Path) -> usize {
    server::files_under(dir).len()
}
