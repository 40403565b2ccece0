//! Payload decoding and system state on the real traces in `shared/etl` (skipped with a message
//! when that folder is absent). Records come from a small test-only walker (`etw_decode/walker.rs`).

mod walker;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use dtx::etw::decode::{kernel, DecodedEvent, Decoder, SchemaSource, Value};
use dtx::etw::record::{EventRecord, Guid, HeaderKind};
use dtx::etw::state::SystemState;

/// The .etl files: loose ones plus the contents of the archives (unpacked once per build dir).
fn files() -> Option<Vec<PathBuf>> {
    let data = crate::support::etl::folder("etl", "")?;
    let data = data.as_path();
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("etl-unpacked");
    let _ = std::fs::create_dir_all(&out);
    // the tests of this binary run on several threads: one unpacks while the others wait, and
    // an archive appears under its name only once it is whole
    static UNPACK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _unpacking = UNPACK.lock().unwrap_or_else(|e| e.into_inner());
    let mut v: Vec<_> = std::fs::read_dir(data)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    v.sort();
    for p in &v {
        let stem = p.file_name().unwrap().to_string_lossy().to_string();
        let dest = out.join(&stem);
        if dest.is_dir() {
            continue;
        }
        let whole = dest.clone();
        let dest = out.join(format!("{stem}.partial"));
        let _ = std::fs::remove_dir_all(&dest);
        let ok = match p.extension().and_then(|x| x.to_str()) {
            Some("zip") => std::process::Command::new("unzip")
                .arg("-q")
                .arg("-o")
                .arg(p)
                .arg("-d")
                .arg(&dest)
                .status(),
            Some("7z") => std::process::Command::new("7z")
                .arg("x")
                .arg("-y")
                .arg(format!("-o{}", dest.display()))
                .arg(p)
                .status(),
            _ => continue,
        };
        if !ok.is_ok_and(|s| s.success()) || std::fs::rename(&dest, &whole).is_err() {
            eprintln!(
                "note: could not unpack {stem} (unzip/7z missing?); its events are not checked"
            );
            let _ = std::fs::remove_dir_all(&dest);
        }
    }
    let mut files = Vec::new();
    walker::etl_files(data, &mut files);
    walker::etl_files(&out, &mut files);
    Some(files)
}

/// Reads every field of a decoded event the three ways the view offers (the iterator, the
/// callback, each name on its own, which steps over the fields before it without reading
/// them) and checks that they agree; returns the number of fields.
fn read_all_ways(d: &DecodedEvent<'_>) -> usize {
    // Debug text, so that a NaN float still equals itself
    let by_iter: Vec<String> = d.fields().map(|(n, v)| format!("{n}={v:?}")).collect();
    let mut by_callback = Vec::new();
    let whole = d.for_each_field(|n, v| by_callback.push(format!("{n}={v:?}")));
    assert_eq!(by_iter, by_callback, "{} {}", d.provider, d.name);
    assert_eq!(whole, d.is_complete(), "{} {}", d.provider, d.name);
    assert_eq!(d.field_count(), by_iter.len(), "{} {}", d.provider, d.name);
    let mut seen = HashSet::new();
    for (n, v) in d.fields() {
        if seen.insert(n.to_string()) {
            let got = d.get(n).map(|g| format!("{g:?}"));
            assert_eq!(got, Some(format!("{v:?}")), "{} {} {n}", d.provider, d.name);
            let [picked, none] = d.pick([n, "no such field"]);
            assert_eq!(picked.map(|g| format!("{g:?}")), got);
            assert!(none.is_none());
            if let Some(t) = v.text() {
                assert_eq!(d.str(n).as_deref(), Some(&*t));
            }
        }
    }
    by_iter.len()
}

fn short(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().to_string()
}

/// Kernel groups whose every event must decode with a known layout.
const LISTED: &[u8] = &[
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x08, 0x09, 0x0B, 0x0F, 0x14, 0x18,
];

#[test]
fn every_event_decodes() {
    let Some(files) = files() else { return };
    let mut report = Vec::new();
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let etl = walker::Etl::open(&bytes);
        let evs = etl.events();
        let mut dec = Decoder::new();
        for e in &evs {
            dec.observe(e);
        }
        let meta_providers: HashSet<Guid> = evs
            .iter()
            .filter(|e| e.provider == kernel::EVENT_METADATA && e.opcode == 32)
            .filter_map(|e| Guid::from_le_bytes(e.payload))
            .collect();
        let (mut named, mut unknown_kernel, mut tl, mut tl_bad, mut meta_ev, mut meta_bad) =
            (0, 0, 0, 0, 0, 0);
        let mut unknown: BTreeMap<String, usize> = BTreeMap::new();
        for e in &evs {
            let d = dec.decode(e);
            read_all_ways(&d);
            if d.is_named() {
                named += 1;
            }
            if let Some(g) = e.kernel_group {
                if LISTED.contains(&g) && !d.is_named() {
                    unknown_kernel += 1;
                    *unknown
                        .entry(format!("grp {g:#x} op {} v{}", e.opcode, e.version))
                        .or_default() += 1;
                }
            }
            if e.kind == HeaderKind::EventHeader && e.extended.iter().any(|x| x.ext_type == 11) {
                tl += 1;
                if d.source != SchemaSource::TraceLogging
                    || !d.is_complete()
                    || d.field_count() == 0 && !e.payload.is_empty()
                {
                    tl_bad += 1;
                    if tl_bad < 3 {
                        eprintln!("TL not decoded: {} {d:?}", short(f));
                    }
                }
            }
            if e.kind == HeaderKind::EventHeader && meta_providers.contains(&e.provider) {
                meta_ev += 1;
                if d.source != SchemaSource::EventMetadata && d.source != SchemaSource::TraceLogging
                {
                    meta_bad += 1;
                    *unknown
                        .entry(format!("meta {} id {} v{}", e.provider, e.id, e.version))
                        .or_default() += 1;
                }
            }
        }
        let share = 100.0 * named as f64 / evs.len().max(1) as f64;
        let line = format!(
            "{:<48} events {:>7}  named {:>7} ({share:5.1}%)  TL {tl}/{tl_bad} bad  metadata-provider events {meta_ev}/{meta_bad} bad  schemas {}",
            short(f),
            evs.len(),
            named,
            dec.schema_count()
        );
        println!("{line}");
        for (k, n) in &unknown {
            println!("    undecoded: {k} ×{n}");
        }
        report.push((short(f), unknown_kernel, tl_bad, meta_bad));
    }
    for (f, k, t, m) in report {
        assert_eq!(
            k, 0,
            "{f}: kernel events of listed classes without a layout"
        );
        assert_eq!(t, 0, "{f}: TraceLogging events not decoded");
        assert_eq!(
            m, 0,
            "{f}: events of a provider with EventMetadata not decoded"
        );
    }
}

#[test]
fn event_map_info_names_values() {
    let Some(files) = files() else { return };
    let mut total_maps = 0;
    let mut total_mapped = 0;
    let mut total_records = 0;
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let etl = walker::Etl::open(&bytes);
        let evs = etl.events();
        let map_records = evs
            .iter()
            .filter(|e| e.provider == kernel::EVENT_METADATA && e.opcode == 33)
            .count();
        let mut dec = Decoder::new();
        for e in &evs {
            dec.observe(e);
        }
        let mut mapped = 0;
        let mut example = None;
        for e in &evs {
            let d = dec.decode(e);
            for (n, v) in d.fields() {
                if let Value::Mapped { value, name } = &v {
                    mapped += 1;
                    // the name is the map's, the number is still there
                    assert_eq!(v.as_u64(), Some(*value));
                    assert!(!name.is_empty());
                    if example.is_none() {
                        example =
                            Some(format!("{}/{}: {n} = {value} ({name})", d.provider, d.name));
                    }
                }
            }
        }
        total_records += map_records;
        if map_records > 0 {
            println!(
                "{:<48} EventMapInfo records {map_records}, maps {}, mapped values {mapped}; e.g. {}",
                short(f),
                dec.value_maps(),
                example.unwrap_or_default()
            );
            // every map record parses (a provider may repeat a map name: count distinct)
            assert!(dec.value_maps() > 0, "{}: no value map parsed", short(f));
        }
        total_maps += dec.value_maps();
        total_mapped += mapped;
    }
    if total_records == 0 {
        // the traces with EventMapInfo records are all in archives
        eprintln!(
            "skipping: no trace with EventMapInfo records could be read (archives not unpacked)"
        );
        return;
    }
    assert!(total_maps > 0);
    assert!(total_mapped > 0, "no field value was named by a map");
}

fn load(name: &str) -> Option<Vec<u8>> {
    let files = files()?;
    let f = files.iter().find(|p| short(p) == name)?;
    std::fs::read(f).ok()
}

#[test]
fn cswitch_and_processes_in_randomascii() {
    let Some(bytes) = load("2011-08-29_00-00-00 slow ppt trace.etl") else {
        eprintln!("SKIP: randomascii trace not available");
        return;
    };
    let etl = walker::Etl::open(&bytes);
    let evs = etl.events();
    let dec = Decoder::new();
    let mut state = SystemState::with_stacks();
    let mut cswitch = 0;
    let mut same = 0;
    for e in &evs {
        let d = dec.decode(e);
        if d.provider == "Thread" && d.name == "CSwitch" {
            cswitch += 1;
            assert!(d.is_complete());
            let new = d.u64("NewThreadId").unwrap();
            let old = d.u64("OldThreadId").unwrap();
            same += (new == old) as usize;
            let prio = |n| match d.get(n) {
                Some(Value::I64(v)) => v,
                _ => -1,
            };
            assert!((0..32).contains(&prio("NewThreadPriority")), "{d:?}");
            assert!((0..32).contains(&prio("OldThreadPriority")), "{d:?}");
            assert!((0..8).contains(&prio("OldThreadState")), "{d:?}");
            assert!((0..64).contains(&prio("OldThreadWaitReason")), "{d:?}");
        }
        state.observe(e, Some(&d));
    }
    assert_eq!(cswitch, 29_533);
    assert!(same < cswitch / 100, "{same} switches to the same thread");
    let ppt: Vec<_> = state
        .processes()
        .filter(|p| p.name.eq_ignore_ascii_case("powerpnt.exe"))
        .collect();
    assert!(!ppt.is_empty(), "PowerPnt.exe not among processes");
    let p = ppt[0];
    println!(
        "PowerPnt: pid {} parent {} cmd {:?} images {}",
        p.pid,
        p.parent,
        p.command_line,
        p.images.len()
    );
    assert!(p
        .images
        .iter()
        .any(|i| i.file_name.to_ascii_lowercase().ends_with("powerpnt.exe")));
    assert!(p
        .images
        .iter()
        .any(|i| i.file_name.to_ascii_lowercase().ends_with("ntdll.dll")));
    // Samples resolve to images and carry stacks.
    let (mut samples, mut in_image, mut with_stack) = (0, 0, 0);
    for e in &evs {
        if e.kernel_group != Some(0x0F) || e.opcode != 46 {
            continue;
        }
        let d = dec.decode(e);
        let ip = d.u64("InstructionPointer").unwrap();
        let tid = d.u64("ThreadId").unwrap() as u32;
        samples += 1;
        let pid = state.thread(tid).map(|t| t.pid).unwrap_or(0);
        if state.image_at(pid, ip).is_some() {
            in_image += 1;
        }
        if state.stacks().stack(e.raw_timestamp, tid, e.cpu).is_some() {
            with_stack += 1;
        }
    }
    println!("samples {samples}: in an image {in_image}, with a stack {with_stack}");
    assert!(in_image * 10 > samples * 8);
    assert!(with_stack * 2 > samples);
}

#[test]
fn stack_keys_and_pdbs_in_net452() {
    let Some(bytes) = load("net.4.5.2.x64.etl") else {
        eprintln!("SKIP: net.4.5.2.x64 not available");
        return;
    };
    let etl = walker::Etl::open(&bytes);
    let evs = etl.events();
    let dec = Decoder::new();
    let mut state = SystemState::with_stacks();
    for e in &evs {
        let d = dec.decode(e);
        state.observe(e, Some(&d));
    }
    let (direct, refs, keys) = state.stacks().counts();
    println!("stacks: direct {direct}, key refs {refs}, keys {keys}");
    let mut resolved = 0;
    let mut samples = 0;
    for e in &evs {
        if e.kernel_group == Some(0x0F) && e.opcode == 46 {
            samples += 1;
            let tid = dec.decode(e).u64("ThreadId").unwrap() as u32;
            resolved += state.stacks().stack(e.raw_timestamp, tid, e.cpu).is_some() as usize;
        }
    }
    println!("samples {samples}, with stacks {resolved}");
    // Only a minority of samples in this trace have stacks (FORMAT.md 4.10: ~6.5k key events).
    assert!(resolved > 6_000);
    let with_pdb = state
        .processes()
        .flat_map(|p| &p.images)
        .filter(|i| i.pdb.is_some())
        .count();
    println!("images with a PDB identity: {with_pdb}");
    assert!(with_pdb > 100);
    let ntdll = state.processes().flat_map(|p| &p.images).find(|i| {
        i.pdb.as_ref().is_some_and(|p| {
            p.file_name.eq_ignore_ascii_case("wntdll.pdb")
                || p.file_name.eq_ignore_ascii_case("ntdll.pdb")
        })
    });
    assert!(ntdll.is_some());
}

/// Garbage and truncated payloads must never panic, whatever the schema.
#[test]
fn mutated_payloads_do_not_panic() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let dec = Decoder::new();
    let mut buf = vec![0u8; 2048];
    for l in kernel::LAYOUTS {
        for (op, _) in l.opcodes {
            for round in 0..200 {
                let n = (rnd() % 600) as usize;
                for b in buf.iter_mut().take(n) {
                    *b = if round % 3 == 0 { 0xff } else { rnd() as u8 };
                }
                let mut ev = blank(&buf[..n]);
                match l.source {
                    dtx::etw::decode::Source::Kernel(g) => ev.kernel_group = Some(g),
                    dtx::etw::decode::Source::Classic(g) => {
                        ev.kind = HeaderKind::Full;
                        ev.provider = g
                    }
                }
                ev.opcode = *op;
                ev.version = *l.versions.start();
                ev.pointer_size = if round % 2 == 0 { 4 } else { 8 };
                read_all_ways(&dec.decode(&ev));
            }
        }
    }
    // TRACE_EVENT_INFO, TraceLogging metadata and manifests from noise and from mutated real blobs.
    let mut d2 = Decoder::new();
    for round in 0..3000 {
        let n = (rnd() % 1500) as usize;
        for b in buf.iter_mut().take(n) {
            *b = rnd() as u8;
        }
        if round % 2 == 0 && n > 120 {
            buf[100..104].copy_from_slice(&((rnd() % 8) as u32).to_le_bytes());
            buf[104..108].copy_from_slice(&((rnd() % 8) as u32).to_le_bytes());
        }
        let mut ev = blank(&buf[..n]);
        ev.kind = HeaderKind::Full;
        ev.provider = kernel::EVENT_METADATA;
        ev.opcode = 32;
        d2.observe(&ev);
        let _ = dtx::etw::decode::tlg::parse_metadata(&buf[..n]);
        let _ = dtx::etw::decode::manifest::parse_manifest(&String::from_utf8_lossy(&buf[..n]));
    }
    let tl_meta: &[u8] =
        b"\x20\x00\x00Ev\x00a\x00\x81\x05b\x00\x58\x00c\x00\x18\x02x\x00\x08y\x00\x01";
    for round in 0..3000 {
        let mut m = tl_meta.to_vec();
        let i = (rnd() as usize) % m.len();
        m[i] = rnd() as u8;
        let n = (rnd() % 64) as usize;
        for b in buf.iter_mut().take(n) {
            *b = rnd() as u8;
        }
        let mut ev = blank(&buf[..n]);
        ev.kind = HeaderKind::EventHeader;
        ev.extended.push(dtx::etw::record::ExtendedItem {
            ext_type: 11,
            data: if round % 2 == 0 { &m } else { tl_meta },
        });
        read_all_ways(&d2.decode(&ev));
    }
}

fn blank(payload: &[u8]) -> EventRecord<'_> {
    EventRecord {
        header_type: 0,
        kind: HeaderKind::System,
        flags: 0,
        provider: Guid::default(),
        kernel_group: None,
        id: 0,
        version: 0,
        channel: 0,
        level: 0,
        opcode: 0,
        task: 0,
        keyword: 0,
        pid: 0,
        tid: 0,
        cpu: 0,
        raw_timestamp: 0,
        time_ns: 0,
        wall_ns: 0,
        pointer_size: 8,
        activity_id: Guid::default(),
        payload,
        extended: Default::default(),
    }
}

#[test]
fn manifest_schemas_decode() {
    let xml = r#"<?xml version="1.0"?>
<instrumentationManifest xmlns="http://schemas.microsoft.com/win/2004/08/events">
 <instrumentation><events>
  <provider name="Test-Provider" guid="{11111111-2222-3333-4444-555555555555}" symbol="P">
   <templates>
    <template tid="T1">
      <data name="Count" inType="win:UInt16"/>
      <data name="Values" inType="win:UInt32" count="Count"/>
      <data name="Name" inType="win:UnicodeString"/>
      <struct name="Pair" count="2"><data name="A" inType="win:UInt8"/><data name="B" inType="win:UInt8"/></struct>
      <data name="Port" inType="win:UInt16" outType="win:Port"/>
    </template>
   </templates>
   <events><event value="7" version="1" template="T1" symbol="Hello"/></events>
  </provider>
 </events></instrumentation>
</instrumentationManifest>"#;
    let mut dec = Decoder::new();
    assert_eq!(dec.load_manifest_str(xml), 1);
    let mut p = vec![2, 0, 1, 0, 0, 0, 2, 0, 0, 0];
    p.extend_from_slice(&[b'h', 0, b'i', 0, 0, 0, 1, 2, 3, 4, 0x01, 0xbb]);
    let mut ev = blank(&p);
    ev.kind = HeaderKind::EventHeader;
    ev.provider = Guid::parse("11111111-2222-3333-4444-555555555555").unwrap();
    ev.id = 7;
    ev.version = 1;
    let d = dec.decode(&ev);
    assert_eq!(d.name, "Hello");
    assert_eq!(d.provider, "Test-Provider");
    assert!(d.is_complete(), "{d:?}");
    assert_eq!(
        d.get("Values"),
        Some(Value::Array(vec![Value::U64(1), Value::U64(2)]))
    );
    assert_eq!(d.get("Name"), Some(Value::Utf16(&[b'h', 0, b'i', 0])));
    assert_eq!(d.str("Name").as_deref(), Some("hi"));
    assert_eq!(d.u64("Port"), Some(443));
    assert!(dtx::etw::decode::list_layouts()
        .iter()
        .any(|l| l.starts_with("Thread::CSwitch")));
}

#[test]
#[ignore]
fn dump_samples() {
    for (file, filt) in [
        (
            "diaghub.kernel.1.etl",
            &["Defunct", "PnP", "DCEnd", "Services", "Platform", "CPU"][..],
        ),
        (
            "net.4.5.2.x64.etl",
            &[
                "RecvIPV6",
                "Microsoft-Windows-DNS-Client",
                "Create",
                "Read",
                "HardFault",
            ][..],
        ),
        (
            "diaghub.user_paged.1.etl",
            &["Microsoft-Diagnostics-DiagnosticSource"][..],
        ),
    ] {
        let Some(bytes) = load(file) else { continue };
        let etl = walker::Etl::open(&bytes);
        let evs = etl.events();
        let mut dec = Decoder::new();
        evs.iter().for_each(|e| dec.observe(e));
        let mut seen = HashSet::new();
        for e in &evs {
            let d = dec.decode(e);
            if (filt.contains(&d.name) || filt.contains(&d.provider))
                && seen.insert((d.provider, d.name))
            {
                let s: Vec<String> = d
                    .fields()
                    .map(|(n, v)| {
                        format!("{n}={}", v.to_string().chars().take(60).collect::<String>())
                    })
                    .collect();
                println!(
                    "{file} {}::{} v{} {}",
                    d.provider,
                    d.name,
                    e.version,
                    s.join(" ")
                );
            }
        }
    }
}
