//! Over a recorded trace, stacks and `sym()`/`umod()` keys name the modules the trace's
//! processes had loaded (`module+0xoffset`). Skips when `../shared/etl` is absent.

use crate::support::standin_pdb;

use crate::support::cli;
use crate::support::etl;

use cli::Dtx;

use standin_pdb::{clang_pdb, guid_bytes};

/// `dtx -q -E ../shared/etl/<trace> -n program`'s output, or None when the trace is absent.
fn run(trace: &str, program: &str) -> Option<String> {
    etl::trace(trace).map(|p| etl::quiet(&p, program))
}

#[test]
fn kernel_and_user_frames_name_their_modules() {
    let Some(k) = run(
        "perfview_net.4.5.2.x64.etl.zip",
        "profile:::sample-1ms { @[stack()] = count(); }",
    ) else {
        return;
    };
    let frames: Vec<&str> = k
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("+0x") || l.starts_with("0x"))
        .collect();
    let named = frames
        .iter()
        .filter(|f| f.contains(".exe+0x") || f.contains(".sys+0x") || f.contains(".dll+0x"))
        .count();
    assert!(frames.len() > 100, "{} frames", frames.len());
    // nearly every kernel frame lies in a loaded kernel module
    assert!(
        named * 10 >= frames.len() * 9,
        "{named} of {} frames named",
        frames.len()
    );
    assert!(k.contains("ntoskrnl.exe+0x"));
    let Some(u) = run(
        "perfview_net.4.5.2.x64.etl.zip",
        "profile:::sample-1ms { @[umod(arg1)] = count(); }",
    ) else {
        return;
    };
    assert!(u.contains("clr.dll") || u.contains("ntdll.dll"), "{u}");
}

/// The wiring of `-E` stacks to PDBs: a module's DbgID_RSDS identity from the trace, a PDB
/// with that identity in a `srv*` store on `_NT_SYMBOL_PATH`, and the module's frames print as
/// `module`function+0x..`. No PDB of the traced machine's DLLs is here, so the PDB is a
/// stand-in: a clang-built one given the module's GUID and age (the names are its own).
#[test]
fn frames_named_by_a_pdb_found_on_the_symbol_path() {
    let Some(trace) = crate::support::etl::path("etl", "perfview_net.4.5.2.x64.etl.zip") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let Some(pdb) = clang_pdb(
        dir.path(),
        "int standin_a(int x) { return x + 1; }\nint main(void) { return standin_a(1); }\n",
    ) else {
        return;
    };
    let (guid, age) = dtx::symbols::pdb::pdb_identity(&pdb).unwrap();
    let standin = dtx::symbols::pdb::read(&pdb, None).unwrap();
    let program = "profile:::sample-1ms { @[ustack()] = count(); }";
    let run = |symbol_path: Option<String>| {
        let args = [
            std::ffi::OsStr::new("-q"),
            "-E".as_ref(),
            trace.as_os_str(),
            "-n".as_ref(),
            program.as_ref(),
        ];
        Dtx::new(&args).symbol_path(symbol_path.as_deref()).ok()
    };
    let plain = run(None);
    // (module, offset) of every frame
    let frames: Vec<(String, u32)> = plain
        .lines()
        .filter_map(|l| {
            let (m, o) = l.trim().split_once("+0x")?;
            Some((m.to_string(), u32::from_str_radix(o, 16).ok()?))
        })
        .collect();
    assert!(frames.len() > 100, "{} frames", frames.len());
    let mut src = dtx::sources::etl::TraceSource::open(trace.to_str().unwrap()).unwrap();
    src.walk(|_, _, _| true, |_| {});
    // a module with a PDB identity some of whose frames lie in functions of the stand-in:
    // every image the trace recorded counts, those unloaded before its end included (they
    // name the frames sampled while they were mapped)
    let images: Vec<_> = src
        .state
        .processes()
        .flat_map(|p| p.images.iter().chain(&p.unloaded_images).cloned())
        .collect();
    let Some((module, info)) = frames.iter().find_map(|(m, o)| {
        standin.function_at(*o)?;
        // one identity for every image of that name (a 32-bit copy under WOW64 has another)
        let mut ids = images
            .iter()
            .filter(|i| dtx::output::stack::basename(&i.file_name) == m)
            .map(|i| i.pdb.clone());
        let first = ids.next()??;
        ids.all(|p| p.as_ref() == Some(&first))
            .then(|| (m.clone(), first))
    }) else {
        eprintln!("skipped: no sampled frame falls in a function of the stand-in PDB");
        return;
    };
    // the stand-in takes the module's GUID and age: the information stream holds age then
    // GUID, the DBI stream's header (signature -1, version 19990903) the age
    let mut bytes = std::fs::read(&pdb).unwrap();
    let dbi_header: Vec<u8> = [(-1i32).to_le_bytes(), 19990903u32.to_le_bytes()]
        .concat()
        .into_iter()
        .chain(age.to_le_bytes())
        .collect();
    let dbi: Vec<usize> = bytes
        .windows(12)
        .enumerate()
        .filter(|(_, w)| *w == dbi_header.as_slice())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(dbi.len(), 1, "the DBI header of the stand-in");
    bytes[dbi[0] + 8..dbi[0] + 12].copy_from_slice(&info.age.to_le_bytes());
    let from = guid_bytes(&guid);
    let to = guid_bytes(&info.guid);
    let at: Vec<usize> = bytes
        .windows(16)
        .enumerate()
        .filter(|(_, w)| *w == from)
        .map(|(i, _)| i)
        .collect();
    assert!(!at.is_empty());
    for i in at {
        bytes[i..i + 16].copy_from_slice(&to);
        if i >= 4 && bytes[i - 4..i] == age.to_le_bytes() {
            bytes[i - 4..i].copy_from_slice(&info.age.to_le_bytes());
        }
    }
    let name = dtx::symbols::basename(&info.file_name).to_string();
    let id = dtx::symbols::pdb::PdbId {
        guid: info.guid,
        age: info.age,
        path: info.file_name.clone(),
    };
    let store = dir.path().join("store");
    let place = store.join(&name).join(id.store_key());
    std::fs::create_dir_all(&place).unwrap();
    std::fs::write(place.join(&name), &bytes).unwrap();
    assert_eq!(
        dtx::symbols::pdb::pdb_identity(&place.join(&name)).unwrap(),
        (info.guid, info.age)
    );
    let named = run(Some(format!("srv*{}", store.display())));
    // line by line: the module's frames in a function of the stand-in are named by it, the
    // rest is unchanged
    let (p, n): (Vec<&str>, Vec<&str>) = (plain.lines().collect(), named.lines().collect());
    assert_eq!(p.len(), n.len());
    let mut renamed = 0;
    for (a, b) in p.iter().zip(&n) {
        let off = a
            .trim()
            .strip_prefix(&format!("{module}+0x"))
            .and_then(|o| u32::from_str_radix(o, 16).ok());
        match off.and_then(|o| Some((o, standin.function_at(o)?))) {
            Some((o, f)) => {
                let want = if o == f.rva {
                    format!("{module}`{}", f.name)
                } else {
                    format!("{module}`{}+0x{:x}", f.name, o - f.rva)
                };
                assert_eq!(b.trim(), want);
                renamed += 1;
            }
            None => assert_eq!(a, b),
        }
    }
    println!("{module}: {renamed} frames named by the stand-in PDB");
    assert!(renamed > 0);
}

/// What is printed before END names frames too, with the images loaded by then, as dtrace's
/// consumer names them when it prints: `printa()` in a `tick-5s` prints what END would, and a
/// `stack()` traced by a sample is named (both printed bare addresses once).
#[test]
fn frames_printed_before_end_are_named() {
    let trace = "randomascii_slow_ppt_trace.etl.zip";
    let agg = "profile-97 { @[stack(4), ustack(4)] = count(); }";
    let Some(at_tick) = run(
        trace,
        &format!("{agg} tick-5s {{ printa(@); trunc(@); exit(0); }}"),
    ) else {
        return;
    };
    let at_end = run(trace, &format!("{agg} tick-5s {{ exit(0); }}")).unwrap();
    let named = |s: &str| s.lines().filter(|l| l.contains("+0x")).count();
    assert!(named(&at_end) > 100, "{at_end}");
    // the same text but END's final newline
    assert_eq!(at_tick.trim_end(), at_end.trim_end());
    let traced = run(
        trace,
        "profile-97 /cpu == 0 && arg0 != 0/ { stack(3); exit(0); }",
    )
    .unwrap();
    let frames: Vec<&str> = traced.split_whitespace().collect();
    assert!(!frames.is_empty(), "{traced}");
    assert!(
        frames.iter().all(|f| f.starts_with("ntoskrnl.exe+0x")),
        "{traced}"
    );
}

/// A trace recorded without ImageID records (a plain `xperf -start`, dtx's own `-E` log), read
/// on the machine that recorded it, has its images' PDB identities read from their files on
/// Windows (as a live session does): only from a file whose link time stamp is the one the
/// Image record gives, so a DLL updated since the recording is not believed.
#[test]
fn an_image_file_is_believed_only_with_the_records_time_stamp() {
    use object::read::pe::ImageNtHeaders;
    let dir = tempfile::tempdir().unwrap();
    let Some(pdb) = clang_pdb(dir.path(), "int main(void) { return 0; }") else {
        return;
    };
    let exe = dir.path().join("standin.exe");
    let data = std::fs::read(&exe).unwrap();
    // the stamp as the object crate reads the headers
    let pe = object::read::pe::PeFile64::parse(&data[..]).unwrap();
    let stamp = (pe.nt_headers().file_header().time_date_stamp).get(object::LittleEndian);
    assert_ne!(stamp, 0);
    assert_eq!(
        dtx::symbols::pdb::pe_time_date_stamp(&data[..4096]),
        Some(stamp)
    );
    let of = |s: u32| dtx::symbols::pdb::pdb_info_of_image(&exe, s);
    let info = of(stamp).expect("the image's identity");
    assert!(info.file_name.ends_with("standin.pdb"), "{info:?}");
    assert_eq!(of(0), Some(info.clone()), "0 checks no stamp");
    assert_eq!(of(stamp ^ 1), None, "another build of the file");
    // the identity is the PDB's own
    let read = dtx::symbols::pdb::read(&pdb, None).unwrap();
    assert!(!read.functions.is_empty());
    // not a PE: no stamp
    assert_eq!(dtx::symbols::pdb::pe_time_date_stamp(b"MZ"), None);
    assert_eq!(dtx::symbols::pdb::pe_time_date_stamp(&[0u8; 64]), None);
}
