//! Names that follow time: a stack frame is named by the image that held its address of its
//! process when the stack was sampled, not by a later image at the same addresses. The pairs
//! of images that held the same addresses of one pid at different times are found from each
//! trace's own Image records; skips when `../shared` is absent.

use crate::support::etl;
use crate::support::synthetic_etl as synthetic;

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
    /// The same file at the same place (records spell one file's path in more than one way:
    /// a rundown at the end of a trace may name it otherwise than its Load did).
    fn same(&self, o: &Mapped) -> bool {
        (self.pid, self.base, self.size) == (o.pid, o.base, o.size)
            && self.name().eq_ignore_ascii_case(&o.name())
    }
}

/// Every image of the trace, and the pairs (older, newer) of images of one pid, not the same
/// file at the same place, whose address ranges overlap and where the older was unloaded before the newer one
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
                    let new = Mapped {
                        pid,
                        base,
                        size: d.u64("ImageSize").unwrap_or(0),
                        file: d.str("FileName").map(|s| s.to_string()).unwrap_or_default(),
                        loaded: ev.time_ns,
                        unloaded: None,
                    };
                    let same = live.get(&(pid, base)).is_some_and(|&i| all[i].same(&new));
                    if !same && new.size > 0 {
                        if let Some(&i) = live.get(&(pid, base)) {
                            all[i].unloaded.get_or_insert(ev.time_ns);
                        }
                        live.insert((pid, base), all.len());
                        all.push(new);
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
                && !a.same(b)
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

/// The stacks of `dtx -q` output made of `@<timestamp> <pid>` lines each followed by a stack's
/// frames, up to the `=END` line (what was printed before END) and after it (END's `printa`).
type Sampled = Vec<(u64, u32, Vec<String>)>;

fn sampled(out: &str) -> (Sampled, Sampled) {
    let (mut before, mut end) = (Vec::new(), Vec::new());
    let mut at_end = false;
    for line in out.lines() {
        let list = if at_end { &mut end } else { &mut before };
        if line == "=END" {
            at_end = true;
        } else if let Some(head) = line.strip_prefix('@') {
            let mut f = head.split_whitespace().map(|v| v.parse::<u64>().unwrap());
            let (t, pid) = (f.next().unwrap(), f.next().unwrap() as u32);
            list.push((t, pid, Vec::new()));
        } else if let Some(last) = list.last_mut() {
            if !line.trim().is_empty() {
                last.2.push(line.trim().to_string());
            }
        }
    }
    (before, end)
}

/// Over the real traces: every stack sampled in a pid of a pair (the kernel's for a pair of
/// drivers) while the older image was mapped names no frame after the newer one, and the other
/// way round, printed as sampled and by END's `printa`. (The samples of these traces fall in
/// neither image of any pair while it was mapped: the count of such frames is printed; the
/// synthetic trace below has them.)
#[test]
fn symbol_time_sampled_stacks_name_the_image_of_their_time() {
    let mut exercised = 0;
    for (dir, name, _) in TRACES {
        let Some(path) = etl::shared(dir, name) else {
            return;
        };
        let (all, pairs) = image_pairs(&path);
        let mut user: Vec<u32> = pairs.iter().map(|p| p.0.pid).filter(|&p| p != 0).collect();
        user.sort();
        user.dedup();
        let kernel = pairs.iter().any(|p| p.0.pid == 0);
        let mut prog = String::new();
        if !user.is_empty() {
            let pred: Vec<String> = user.iter().map(|p| format!("pid == {p}")).collect();
            prog += &format!(
                "profile:::sample-1ms /{}/ {{ @u[timestamp, pid, ustack()] = count(); \
                 printf(\"@%d %d\\n\", timestamp, pid); ustack(); }}\n",
                pred.join(" || ")
            );
        }
        if kernel {
            prog += "profile:::sample-1ms { @k[timestamp, 0, stack()] = count(); \
                     printf(\"@%d 0\\n\", timestamp); stack(); }\n";
        }
        prog += "END { printf(\"=END\\n\"); ";
        if !user.is_empty() {
            prog += "printa(\"@%d %d%k\\n\", @u); ";
        }
        if kernel {
            prog += "printa(\"@%d %d%k\\n\", @k); ";
        }
        prog += "}";
        let out = crate::support::cli::dtx(&["-q", "-E", &path, "-n", &prog]);
        let text = String::from_utf8_lossy(&out.stdout);
        if String::from_utf8_lossy(&out.stderr).contains("has none") {
            eprintln!("{name}: no sampled stacks");
            continue;
        }
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (before, end) = sampled(&text);
        // a key per sample (two samples of one time, pid and stack are one key)
        assert!(
            end.len() <= before.len() && end.len() * 10 >= before.len() * 9,
            "{name}"
        );
        // whether an image of `file`'s base name was mapped in `pid` at `t`
        let mapped = |pid: u32, base_name: &str, t: u64| {
            all.iter().any(|m| {
                m.pid == pid
                    && m.name().eq_ignore_ascii_case(base_name)
                    && m.loaded <= t
                    && m.unloaded.is_none_or(|u| t < u)
            })
        };
        for (o, n) in &pairs {
            if o.name().eq_ignore_ascii_case(&n.name()) {
                continue;
            }
            for (phase, stacks) in [("before END", &before), ("END", &end)] {
                let mut hits = [0usize; 2];
                for (t, pid, frames) in stacks.iter() {
                    if *pid != o.pid {
                        continue;
                    }
                    for (k, (this, other)) in [(o, n), (n, o)].into_iter().enumerate() {
                        let during = this.loaded <= *t && this.unloaded.is_none_or(|u| *t < u);
                        if !during {
                            continue;
                        }
                        for f in frames {
                            let m = module_of(f);
                            if m.eq_ignore_ascii_case(&this.name()) {
                                hits[k] += 1;
                            }
                            assert!(
                                !m.eq_ignore_ascii_case(&other.name())
                                    || mapped(o.pid, &other.name(), *t),
                                "{name} ({phase}): at {t} pid {pid} frame {f} names {} while {} \
                                 was mapped",
                                other.name(),
                                this.name()
                            );
                        }
                    }
                }
                eprintln!(
                    "{name} ({phase}): pid {} {} then {}: {} and {} frames",
                    o.pid,
                    o.name(),
                    n.name(),
                    hits[0],
                    hits[1]
                );
                if hits[0] > 0 && hits[1] > 0 {
                    exercised += 1;
                }
            }
        }
    }
    eprintln!("{exercised} pairs with frames of both images");
}

/// A trace written here (`support/synthetic_etl.rs`) where process 7's `old.dll` is unloaded
/// and `new.dll` loaded at its base, and the kernel's `olddrv.sys` replaced by `newdrv.sys`,
/// with stacks sampled under each: every stack is named by the images of its time, traced per
/// sample, printed by a `printa()` in a tick after the replacement (before END) and by END.
#[test]
fn symbol_time_a_synthetic_trace_names_each_sample_by_its_images() {
    use synthetic::{CpuRecords, START};
    const S: i64 = 10_000_000; // a second in raw ticks
    let (dll, ntdll, drv) = (0x1000_0000u64, 0x7000_0000u64, 0xffff_f800_0000_0000u64);
    let mut c = CpuRecords::default();
    c.process(START + 1, 7, "app.exe");
    c.thread(START + 2, 7, 70);
    c.image(
        START + 3,
        7,
        ntdll,
        0x10000,
        r"C:\Windows\System32\ntdll.dll",
    );
    c.image(
        START + 4,
        0,
        drv,
        0x10000,
        r"\SystemRoot\system32\drivers\olddrv.sys",
    );
    c.image_load(START + 5, 7, dll, 0x10000, r"C:\app\old.dll");
    let frames = [drv + 0x30, dll + 0x10, ntdll + 0x20];
    for k in 0..3 {
        c.sample(START + S + k * 1000, 7, 70, &frames);
    }
    c.image_unload(START + 2 * S, 7, dll, 0x10000, r"C:\app\old.dll");
    c.image_unload(
        START + 2 * S + 1,
        0,
        drv,
        0x10000,
        r"\SystemRoot\system32\drivers\olddrv.sys",
    );
    c.image_load(START + 2 * S + 2, 7, dll, 0x10000, r"C:\app\new.dll");
    c.image_load(
        START + 2 * S + 3,
        0,
        drv,
        0x10000,
        r"\SystemRoot\system32\drivers\newdrv.sys",
    );
    for k in 0..2 {
        c.sample(START + 3 * S + k * 1000, 7, 70, &frames);
    }
    // after the tick: one more under the new images
    c.sample(START + 5 * S, 7, 70, &frames);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("replaced.etl");
    std::fs::write(&path, synthetic::trace_bytes(&[c])).unwrap();
    let prog = r#"profile:::sample-1ms { @u[ustack()] = count(); @k[stack()] = count();
        printf("@%d 7\n", timestamp); stack(); ustack(); }
        tick-4s { printf("=tick\n"); printa(@u); printa(@k); }
        END { printf("=END\n"); printa(@u); printa(@k); }"#;
    let out = etl::quiet(path.to_str().unwrap(), prog);
    let (per_sample, rest) = out.split_once("=tick").unwrap();
    let (tick, end) = rest.split_once("=END").unwrap();
    // traced per sample: each with the images of its time
    let (samples, _) = sampled(per_sample);
    let names: Vec<Vec<String>> = samples.iter().map(|s| s.2.clone()).collect();
    let old = ["olddrv.sys+0x30", "old.dll+0x10", "ntdll.dll+0x20"];
    let new = ["newdrv.sys+0x30", "new.dll+0x10", "ntdll.dll+0x20"];
    assert_eq!(
        names,
        vec![old; 3]
            .into_iter()
            .chain(vec![new; 2])
            .collect::<Vec<_>>(),
        "{out}"
    );
    // printed by printa: one key per stack under each image, with its count
    let count_of = |text: &str, frame: &str| -> Option<u64> {
        let mut lines = text.lines().skip_while(|l| l.trim() != frame);
        lines.next()?;
        lines
            .map(str::trim)
            .find(|l| l.parse::<u64>().is_ok())?
            .parse()
            .ok()
    };
    for (phase, text, newer) in [("tick", tick, 2), ("END", end, 3)] {
        assert_eq!(count_of(text, "old.dll+0x10"), Some(3), "{phase}: {text}");
        assert_eq!(
            count_of(text, "new.dll+0x10"),
            Some(newer),
            "{phase}: {text}"
        );
        assert_eq!(
            count_of(text, "olddrv.sys+0x30"),
            Some(3),
            "{phase}: {text}"
        );
        assert_eq!(
            count_of(text, "newdrv.sys+0x30"),
            Some(newer),
            "{phase}: {text}"
        );
    }
}
