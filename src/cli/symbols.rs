//! `dtx --symbols`: for each image that frames fall in, its PDB identity, how many frames,
//! and where its PDB came from (found on this machine, in a symbol cache, downloaded, or
//! missing and why): symchk's answer to "why are my frames unnamed?". Over a trace (`-E`),
//! the frames are those of its StackWalk records, the kernel's images included; for a
//! process (`-p PID`, Windows), every image it has loaded; alone (Windows, elevated), the
//! running kernel's modules. PDBs are looked for, and fetched
//! when the symbol path names a server, only for the images listed.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::args::Args;
use crate::symbols::pdb::PdbId;
use crate::symbols::trace::PdbOrigin;

/// An image as the report counts it: its name and PDB identity.
type ImageKey = (String, Option<(crate::etw::record::Guid, u32)>);

/// Its frames, one of them (process, address) to look it up by, and its PDB identity.
type Frames = (u64, Option<u32>, u64, Option<PdbId>);

/// One line of the report.
struct Row {
    module: String,
    id: Option<PdbId>,
    frames: Option<u64>,
    origin: PdbOrigin,
}

pub fn report(prog: &str, args: &Args) -> Result<i32, String> {
    let _ = prog;
    // Ctrl-C ends the downloads going on (their partial files removed) and asks nothing more:
    // the report is then printed with what it has
    crate::symbols::symsrv::guard::install_ctrl_c();
    let rows = match (args.etl_files.as_slice(), args.pids.as_slice()) {
        ([one], []) => trace_rows(&one.to_string_lossy())?,
        ([], [pid]) => process_rows(pid)?,
        ([], []) => kernel_rows()?,
        _ => {
            return Err(
                "--symbols reports on one trace (--symbols -E file.etl), one process (--symbols -p PID) or the running kernel (--symbols)"
                    .into(),
            )
        }
    };
    let json = args
        .xopts
        .iter()
        .rev()
        .find(|(n, _)| n == "oformat")
        .and_then(|(_, v)| v.as_deref());
    let out = match json {
        None | Some("text") => {
            let mut out = String::new();
            print_rows(&rows, &mut out);
            out
        }
        Some(f) if f.starts_with("json") => json_rows(&rows),
        Some(other) => {
            return Err(format!(
                "--symbols: oformat {other}: the report is text or json"
            ))
        }
    };
    print!("{out}");
    Ok(0)
}

/// The report as one JSON document (`-x oformat=json`), for scripts and `dtx --mcp`'s
/// `symbols` tool: one object per image, with the same fields as the table's columns and
/// where its PDB came from as a kind and a path, URL or reason. Strings are JSON-escaped,
/// so a stranger's names cannot reach a terminal as control characters.
fn json_rows(rows: &[Row]) -> String {
    use crate::output::json::Json;
    let images = rows
        .iter()
        .map(|r| {
            let pdb = r.id.as_ref().map_or(Json::Null, |i| {
                Json::object([
                    ("file", Json::str(i.file_name())),
                    ("key", Json::str(i.store_key())),
                ])
            });
            let origin = match &r.origin {
                PdbOrigin::Local(p) => Json::object([
                    ("kind", Json::str("local")),
                    ("path", Json::str(p.display().to_string())),
                ]),
                PdbOrigin::Cache(p) => Json::object([
                    ("kind", Json::str("cache")),
                    ("path", Json::str(p.display().to_string())),
                ]),
                PdbOrigin::Downloaded(url, p) => Json::object([
                    ("kind", Json::str("downloaded")),
                    ("url", Json::str(url.clone())),
                    ("path", Json::str(p.display().to_string())),
                ]),
                PdbOrigin::Missing(why) => Json::object([
                    ("kind", Json::str("missing")),
                    ("why", Json::str(why.clone())),
                ]),
            };
            Json::object([
                ("module", Json::str(r.module.clone())),
                ("frames", r.frames.map_or(Json::Null, Json::UInt)),
                ("pdb", pdb),
                ("origin", origin),
            ])
        })
        .collect();
    let found = rows
        .iter()
        .filter(|r| !matches!(r.origin, PdbOrigin::Missing(_)))
        .count();
    let doc = Json::object([
        ("images", Json::Array(images)),
        ("with_pdb", Json::UInt(found as u64)),
    ]);
    let mut s = doc.to_json_pretty();
    s.push('\n');
    s
}

fn trace_rows(path: &str) -> Result<Vec<Row>, String> {
    let src = crate::sources::etl::TraceSource::open(path).map_err(|e| e.to_string())?;
    #[allow(unused_mut)]
    let mut state = src.kernel_images();
    #[cfg(windows)]
    crate::symbols::trace::identify_from_this_machine(&mut state, true);
    let symbols = crate::symbols::TraceSymbols::with_store(&state, &src.pdbs);
    // frames by image (its name and PDB identity), with one frame of each to look it up by
    let mut by_image: HashMap<ImageKey, Frames> = HashMap::new();
    let mut outside = 0u64;
    src.each_stack_frame(|pid, pc| match symbols.image_at(pid, pc) {
        Some((name, _, id)) => {
            let key = (name.to_string(), id.map(|i| (i.guid, i.age)));
            by_image
                .entry(key)
                .or_insert_with(|| (0, pid, pc, id.cloned()))
                .0 += 1;
        }
        None => outside += 1,
    });
    let mut images: Vec<_> = by_image.into_iter().collect();
    images.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0 .0.cmp(&b.0 .0)));
    // the PDBs are looked for (fetched) together
    symbols.prefetch(&mut images.iter().map(|(_, (_, pid, pc, _))| (*pid, *pc)));
    let mut rows: Vec<Row> = images
        .into_iter()
        .map(|((module, _), (n, pid, pc, id))| Row {
            module,
            frames: Some(n),
            origin: symbols.pdb_origin(pid, pc).unwrap_or_else(|| {
                PdbOrigin::Missing(
                    "the trace gives no PDB identity for this image (no ImageID DbgID_RSDS record; merge the trace with xperf -merge or record it with the image identities)"
                        .into(),
                )
            }),
            id,
        })
        .collect();
    if outside > 0 {
        rows.push(Row {
            module: "(no image)".into(),
            id: None,
            frames: Some(outside),
            origin: PdbOrigin::Missing("no image of the trace holds these addresses".into()),
        });
    }
    Ok(rows)
}

#[cfg(windows)]
fn process_rows(pid: &str) -> Result<Vec<Row>, String> {
    use crate::providers::pid::ProcessReader;
    let n: u32 = pid
        .trim()
        .parse()
        .map_err(|_| format!("{pid}: not a process ID"))?;
    let (maps, _) = crate::sources::debugger::windows::ModuleReader.maps(n)?;
    let store = crate::symbols::PdbStore::from_env();
    let mut seen = std::collections::HashSet::new();
    let paths: Vec<String> = crate::symbols::parse_maps(&maps)
        .into_iter()
        .map(|m| m.path)
        .filter(|p| seen.insert(p.clone()))
        .collect();
    Ok(paths.iter().map(|p| image_row(&store, p)).collect())
}

/// The running kernel's modules (ntoskrnl.exe and the drivers), as psapi lists them. Without
/// elevation Windows gives no driver addresses, so nothing is listed then.
#[cfg(windows)]
fn kernel_rows() -> Result<Vec<Row>, String> {
    use windows_sys::Win32::System::ProcessStatus::{
        K32EnumDeviceDrivers, K32GetDeviceDriverFileNameW,
    };
    let mut bases: Vec<*mut core::ffi::c_void> = vec![std::ptr::null_mut(); 4096];
    let mut needed = 0u32;
    // SAFETY: the buffer holds `bases.len()` pointers, its size in bytes is passed
    let ok = unsafe {
        K32EnumDeviceDrivers(
            bases.as_mut_ptr(),
            (bases.len() * std::mem::size_of::<usize>()) as u32,
            &mut needed,
        )
    };
    if ok == 0 {
        return Err(format!(
            "the kernel's modules: {}",
            std::io::Error::last_os_error()
        ));
    }
    let n = (needed as usize / std::mem::size_of::<usize>()).min(bases.len());
    let devices = crate::etw::state::DevicePaths::this_machine();
    let store = crate::symbols::PdbStore::from_env();
    let mut rows = Vec::new();
    for &base in &bases[..n] {
        if base.is_null() {
            continue;
        }
        let mut buf = [0u16; 1024];
        // SAFETY: `buf` holds `buf.len()` UTF-16 units; `base` is one the system gave
        let len = unsafe { K32GetDeviceDriverFileNameW(base, buf.as_mut_ptr(), buf.len() as u32) };
        if len == 0 {
            continue;
        }
        let nt = String::from_utf16_lossy(&buf[..(len as usize).min(buf.len())]);
        let path = devices.and_then(|d| d.to_dos(&nt)).unwrap_or(nt);
        rows.push(image_row(&store, &path));
    }
    if rows.is_empty() {
        return Err("the kernel's modules: Windows gives their addresses only to an elevated process (run dtx --symbols as administrator)".into());
    }
    Ok(rows)
}

/// The row of the image file at `path`: the identity its file records, where its PDB is.
#[cfg(windows)]
fn image_row(store: &crate::symbols::PdbStore, path: &str) -> Row {
    let id = crate::symbols::pdb::pdb_info_from_file(std::path::Path::new(path)).map(|i| PdbId {
        guid: i.guid,
        age: i.age,
        path: i.file_name,
    });
    let origin = match &id {
        Some(id) => store.origin(id, path),
        None => PdbOrigin::Missing("the image names no PDB (no CodeView record)".into()),
    };
    Row {
        module: crate::output::stack::basename(path).to_string(),
        id,
        frames: None,
        origin,
    }
}

#[cfg(not(windows))]
fn process_rows(pid: &str) -> Result<Vec<Row>, String> {
    Err(format!(
        "--symbols -p {pid}: the images of a live process are reported on Windows (here: --symbols -E trace.etl)"
    ))
}

#[cfg(not(windows))]
fn kernel_rows() -> Result<Vec<Row>, String> {
    Err("--symbols alone reports the running kernel's modules on Windows (here: --symbols -E trace.etl)".into())
}

fn origin_text(o: &PdbOrigin) -> String {
    match o {
        PdbOrigin::Local(p) => format!("local {}", p.display()),
        PdbOrigin::Cache(p) => format!("cache {}", p.display()),
        PdbOrigin::Downloaded(url, p) => format!("downloaded {url} -> {}", p.display()),
        PdbOrigin::Missing(why) => format!("missing: {why}"),
    }
}

fn print_rows(rows: &[Row], out: &mut String) {
    let _ = writeln!(
        out,
        "{:<28} {:>9}  {:<48}  PDB",
        "MODULE", "FRAMES", "PDB IDENTITY"
    );
    let (mut frames, mut named) = (0u64, 0u64);
    for r in rows {
        let id =
            r.id.as_ref()
                .map(|i| format!("{} {}", i.file_name(), i.store_key()))
                .unwrap_or_else(|| "-".into());
        let n = r.frames.map_or("-".to_string(), |n| n.to_string());
        // a trace's image and PDB names and a server's text are a stranger's: their control
        // characters are escaped before they reach the terminal
        let shown = crate::output::shown::shown;
        let _ = writeln!(
            out,
            "{:<28} {:>9}  {:<48}  {}",
            shown(&r.module),
            n,
            shown(&id),
            shown(&origin_text(&r.origin))
        );
        frames += r.frames.unwrap_or(0);
        if !matches!(r.origin, PdbOrigin::Missing(_)) {
            named += r.frames.unwrap_or(0);
        }
    }
    let found = rows
        .iter()
        .filter(|r| !matches!(r.origin, PdbOrigin::Missing(_)))
        .count();
    if rows.iter().any(|r| r.frames.is_some()) {
        let _ = writeln!(
            out,
            "{} images, {found} with their PDB; {frames} frames, {named} in images with their PDB",
            rows.len()
        );
    } else {
        let _ = writeln!(out, "{} images, {found} with their PDB", rows.len());
    }
}
