//! Names that follow time: a stack frame is named by the image that held its address of its
//! process when the stack was sampled, not by a later image at the same addresses. The pairs
//! of images that held the same addresses of one pid at different times are found from each
//! trace's own Image records; skips when `../shared` is absent.

#[path = "support/etl.rs"]
mod etl;

use dtx::sources::etl::TraceSource;

/// One image as the trace's Image records give it: when it was loaded (its first Load or
/// rundown record) and unloaded (its Unload record), in ns since the trace's start.
#[derive(Clone, Debug)]
struct Mapped {
    pid: u32,
    base: u64,
    size: u64,
    file: String,
    loaded: u64,
    unloaded: Option<u64>,
}

impl Mapped {
    fn name(&self) -> String {
        self.file
            .rsplit(['\\', '/'])
            .next()
            .unwrap_or("")
            .to_string()
    }
    fn overlaps(&self, o: &Mapped) -> bool {
        self.base < o.base + o.size && o.base < self.base + self.size
    }
}

/// Every image of the trace, and the pairs (older, newer) of images of one pid, of different
/// files, whose address ranges overlap and where the older was unloaded before the newer one
/// was loaded (also across processes that reused a pid).
fn image_pairs(path: &str) -> (Vec<Mapped>, Vec<(Mapped, Mapped)>) {
    let mut src = TraceSource::open(path).unwrap();
    let mut all: Vec<Mapped> = Vec::new();
    // the index in `all` of the image mapped at (pid, base)
    let mut live: std::collections::HashMap<(u32, u64), usize> = Default::default();
    src.walk(
        |ev, d, _| {
            if d.provider != "Image" {
                return true;
            }
            let (Some(pid), Some(base)) = (d.u64("ProcessId"), d.u64("ImageBase")) else {
                return true;
            };
            let pid = pid as u32;
            match d.name {
                "Load" | "DCStart" | "DCEnd" => {
                    let file = d.str("FileName").map(|s| s.to_string()).unwrap_or_default();
                    let size = d.u64("ImageSize").unwrap_or(0);
                    let same = live
                        .get(&(pid, base))
                        .is_some_and(|&i| all[i].file == file && all[i].size == size);
                    if !same && size > 0 {
                        if let Some(&i) = live.get(&(pid, base)) {
                            all[i].unloaded.get_or_insert(ev.time_ns);
                        }
                        live.insert((pid, base), all.len());
                        all.push(Mapped {
                            pid,
                            base,
                            size,
                            file,
                            loaded: ev.time_ns,
                            unloaded: None,
                        });
                    }
                }
                "Unload" => {
                    if let Some(i) = live.remove(&(pid, base)) {
                        all[i].unloaded = Some(ev.time_ns);
                    }
                }
                _ => {}
            }
            true
        },
        |_| {},
    );
    let mut pairs = Vec::new();
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            if a.pid == b.pid
                && a.file != b.file
                && a.overlaps(b)
                && a.unloaded.is_some_and(|u| u <= b.loaded)
            {
                pairs.push((a.clone(), b.clone()));
            }
        }
    }
    (all, pairs)
}

/// The traces where images of one pid held the same addresses at different times, with the
/// number of such pairs their Image records give.
const TRACES: [(&str, &str, usize); 3] = [
    ("etl-win11", "filtrace_etw.etl", 7),
    ("etl", "perfview_net.4.5.2.x86.etl.zip", 2),
    ("etl", "etlparser_ShutdownPerfDiagLogger.etl", 1),
];

/// The module a frame's text names (`module`function+0x..`, `module+0x..`).
fn module_of(frame: &str) -> &str {
    frame.split(['`', '+']).next().unwrap_or("").trim()
}

/// Names with no PDB: `module+0xoffset`.
fn names_of(state: &dtx::etw::state::SystemState) -> dtx::symbols::TraceSymbols {
    let store = dtx::symbols::PdbStore::new(dtx::symbols::pdb::SymbolPath::parse(""));
    dtx::sources::etl::frame_names(state, &[], &store)
}

/// The frame text of `addr` of `pid` (0: kernel) in a stack recorded at `epoch`.
fn frame_at(t: &dtx::symbols::TraceSymbols, pid: u32, epoch: u32, addr: u64) -> String {
    use dtx::agg::SymbolResolver;
    if pid == 0 {
        t.kernel_at(epoch, addr)
    } else {
        t.user_at(pid, epoch, addr)
    }
}

/// For every pair of every trace: an address both images held, the epoch a frame there
/// carries while the older image is mapped and while the newer one is, and the names of those
/// frames as built then (what prints before END) and at the end of the trace (END).
#[test]
fn symbol_time_each_pair_names_its_frames_by_the_image_of_their_time() {
    for (dir, name, want) in TRACES {
        let Some(path) = etl::shared(dir, name) else {
            return;
        };
        let (_, pairs) = image_pairs(&path);
        assert_eq!(pairs.len(), want, "{name}: {pairs:#?}");
        // (pair, older or newer) -> (epoch, name then)
        let mut seen: std::collections::HashMap<(usize, bool), (u32, String)> = Default::default();
        let addr = |(o, n): &(Mapped, Mapped)| o.base.max(n.base) + 0x10;
        let mut src = TraceSource::open(&path).unwrap();
        src.walk(
            |_, _, state| {
                for (i, pair) in pairs.iter().enumerate() {
                    let a = addr(pair);
                    let Some(img) = state.image_at(pair.0.pid, a) else {
                        continue;
                    };
                    for (newer, m) in [(false, &pair.0), (true, &pair.1)] {
                        if seen.contains_key(&(i, newer))
                            || (img.base, img.size, &img.file_name) != (m.base, m.size, &m.file)
                        {
                            continue;
                        }
                        let epoch = state.stack_epoch(m.pid, &[a]);
                        let then = frame_at(&names_of(state), m.pid, epoch, a);
                        seen.insert((i, newer), (epoch, then));
                    }
                }
                true
            },
            |_| {},
        );
        let end = names_of(&src.state);
        for (i, pair) in pairs.iter().enumerate() {
            let a = addr(pair);
            let (old, new) = (&seen[&(i, false)], &seen[&(i, true)]);
            assert_ne!(old.0, new.0, "{name}: {pair:?}");
            for ((epoch, then), m) in [(old, &pair.0), (new, &pair.1)] {
                let at_end = frame_at(&end, m.pid, *epoch, a);
                eprintln!(
                    "{name}: pid {} 0x{a:x} epoch {epoch}: {then} (then), {at_end} (END)",
                    m.pid
                );
                assert_eq!(module_of(then), m.name(), "{name}: {pair:?}");
                assert_eq!(module_of(&at_end), m.name(), "{name}: {pair:?}");
            }
        }
    }
}

#[test]
fn symbol_time_pairs_explore() {
    for (dir, name) in [
        ("etl-win11", "filtrace_etw.etl"),
        ("etl", "perfview_net.4.5.2.x86.etl.zip"),
        ("etl", "etlparser_ShutdownPerfDiagLogger.etl"),
    ] {
        let Some(path) = etl::shared(dir, name) else {
            return;
        };
        let (_, pairs) = image_pairs(&path);
        eprintln!("{name}: {} pairs", pairs.len());
        for (a, b) in &pairs {
            eprintln!(
                "  pid {} {:x}+{:x} {} [{}..{:?}]  then {:x}+{:x} {} [{}..{:?}]",
                a.pid,
                a.base,
                a.size,
                a.name(),
                a.loaded,
                a.unloaded,
                b.base,
                b.size,
                b.name(),
                b.loaded,
                b.unloaded
            );
        }
    }
}
