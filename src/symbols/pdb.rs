//! PDB symbols of Windows images: the function names a program database holds (procedures of
//! the module streams with their sizes, and public symbols), as RVAs through the PDB's address
//! map; an image's PDB identity from its CodeView RSDS debug record (GUID, age, path); and the
//! search for the matching PDB: the recorded path, beside the image, then the symbol path
//! (`_NT_ALT_SYMBOL_PATH`, `_NT_SYMBOL_PATH`: plain folders, `srv*cache*url`, `cache*dir`,
//! `symsrv*symsrv.dll*cache*url`, their local stores in the symbol server's
//! `name.pdb/<GUID><age>/name.pdb` layout). [`find_pdb`] looks only on this machine; the
//! symbol servers a path names are asked by [`super::symsrv`] (through the PDB store of a
//! trace or live session, `super::trace::PdbStore`). Only a PDB whose GUID and age match the
//! image's is used.
//!
//! Read with `pdb2` (the maintained fork of the `pdb` crate): its address map applies OMAP
//! (images rewritten after linking) and the section headers the PDB records. Platform-neutral:
//! tests build images and PDBs with clang + lld.

use std::path::{Path, PathBuf};

use crate::etw::record::Guid;
use pdb2::FallibleIterator;

/// The identity a PE image records for its PDB (CodeView `RSDS` entry of the debug directory),
/// or a trace records for an image (KernelTraceControl `DbgID_RSDS`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PdbId {
    pub guid: Guid,
    pub age: u32,
    /// The PDB's path as the linker wrote it (often a path on the build machine).
    pub path: String,
}

impl PdbId {
    /// The file name of the PDB (`ntdll.pdb`), from a Windows or POSIX path.
    pub fn file_name(&self) -> &str {
        super::basename(&self.path)
    }

    /// The symbol store's folder name for this identity: the GUID's 32 hex digits then the age
    /// in hex (`F512471370F69225...2E1`), upper case as symstore writes it.
    pub fn store_key(&self) -> String {
        let g = &self.guid;
        let mut s = format!("{:08X}{:04X}{:04X}", g.data1, g.data2, g.data3);
        for b in g.data4 {
            s.push_str(&format!("{b:02X}"));
        }
        s.push_str(&format!("{:X}", self.age));
        s
    }
}

/// The PDB identity of a PE image, from its debug directory.
pub fn image_pdb_id<'data, R: object::ReadRef<'data>>(
    file: &object::File<'data, R>,
) -> Option<PdbId> {
    use object::Object;
    let cv = file.pdb_info().ok()??;
    Some(PdbId {
        guid: Guid::from_le_bytes(&cv.guid())?,
        age: cv.age(),
        path: String::from_utf8_lossy(cv.path()).into_owned(),
    })
}

/// The PDB identity of the image file at `path`, from its CodeView RSDS record: what a live
/// session, which no KernelTraceControl DbgID_RSDS records reach, knows an image's PDB by.
/// Reads only the headers and the debug records, not the whole file. None when the file
/// cannot be read, is not a PE image or names no PDB.
pub fn pdb_info_from_file(path: &Path) -> Option<crate::etw::state::PdbInfo> {
    pdb_info_of_image(path, 0)
}

/// The PDB identity of the image file at `path` when it is the image an ETW Image record
/// describes: its link time stamp (`IMAGE_FILE_HEADER.TimeDateStamp`, which the record
/// carries) is `stamp`; 0 does not check. A file rebuilt or updated since the trace was
/// recorded has another stamp, and its PDB would name the trace's addresses wrongly.
pub fn pdb_info_of_image(path: &Path, stamp: u32) -> Option<crate::etw::state::PdbInfo> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    if stamp != 0 {
        let mut head = vec![0u8; 4096];
        let n = file.read(&mut head).ok()?;
        if pe_time_date_stamp(&head[..n]) != Some(stamp) {
            return None;
        }
    }
    let data = object::ReadCache::new(file);
    let image = object::File::parse(&data).ok()?;
    let id = image_pdb_id(&image)?;
    Some(crate::etw::state::PdbInfo {
        guid: id.guid,
        age: id.age,
        file_name: id.path,
    })
}

/// `IMAGE_FILE_HEADER.TimeDateStamp` of the PE image whose first bytes are `head`: the
/// `PE\0\0` signature at `e_lfanew` (offset 0x3c), then Machine, NumberOfSections and the
/// stamp.
pub fn pe_time_date_stamp(head: &[u8]) -> Option<u32> {
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(
            head.get(at..at.checked_add(4)?)?.try_into().ok()?,
        ))
    };
    if head.get(..2) != Some(b"MZ") {
        return None;
    }
    let pe = u32_at(0x3c)? as usize;
    if head.get(pe..pe.checked_add(4)?) != Some(b"PE\0\0") {
        return None;
    }
    u32_at(pe.checked_add(8)?)
}

/// One function of a PDB: RVA, size (a public symbol, whose size the PDB does not say, reaches
/// to the next function or its section's end; 0 when the PDB records no sections), name,
/// whether the name is global.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PdbFunction {
    pub rva: u32,
    pub size: u32,
    pub name: String,
    pub global: bool,
}

/// The functions of one PDB, sorted by RVA: procedures (sized) and the public function symbols
/// at addresses no procedure starts at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PdbSymbols {
    pub functions: Vec<PdbFunction>,
}

impl PdbSymbols {
    /// The function whose range holds `rva`: a procedure by its size; a public symbol up to the
    /// next function.
    pub fn function_at(&self, rva: u32) -> Option<&PdbFunction> {
        let i = self.functions.partition_point(|f| f.rva <= rva);
        let f = self.functions.get(i.checked_sub(1)?)?;
        let end = if f.size > 0 {
            f.rva.saturating_add(f.size)
        } else {
            self.functions.get(i).map_or(u32::MAX, |n| n.rva)
        };
        (rva < end).then_some(f)
    }
}

/// A PDB's own identity (GUID, and the age an image records: the DBI stream's).
pub fn pdb_identity(path: &Path) -> Result<(Guid, u32), String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    super::msf::check(&f).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut pdb = pdb2::PDB::open(f).map_err(|e| format!("{}: {e}", path.display()))?;
    identity_of(&mut pdb).map_err(|e| format!("{}: {e}", path.display()))
}

fn identity_of<'s, S: pdb2::Source<'s> + Send + 's>(
    pdb: &mut pdb2::PDB<'s, S>,
) -> pdb2::Result<(Guid, u32)> {
    let info = pdb.pdb_information()?;
    let (d1, d2, d3, d4) = info.guid.as_fields();
    let guid = Guid {
        data1: d1,
        data2: d2,
        data3: d3,
        data4: *d4,
    };
    // the image records the DBI stream's age; the information stream's may be higher
    let age = pdb
        .debug_information()
        .ok()
        .and_then(|d| d.age())
        .unwrap_or(info.age);
    Ok((guid, age))
}

/// Reads the functions of the PDB at `path`; with `expect`, only when its GUID and age match.
pub fn read(path: &Path, expect: Option<&PdbId>) -> Result<PdbSymbols, String> {
    let shown = path.display();
    let f = std::fs::File::open(path).map_err(|e| format!("{shown}: {e}"))?;
    super::msf::check(&f).map_err(|e| format!("{shown}: {e}"))?;
    let mut pdb = pdb2::PDB::open(f).map_err(|e| format!("{shown}: {e}"))?;
    if let Some(id) = expect {
        let (guid, age) = identity_of(&mut pdb).map_err(|e| format!("{shown}: {e}"))?;
        if guid != id.guid || age != id.age {
            return Err(format!(
                "{shown}: does not match the image (PDB {}, image wants {})",
                PdbId {
                    guid,
                    age,
                    path: String::new()
                }
                .store_key(),
                id.store_key()
            ));
        }
    }
    functions_of(&mut pdb).map_err(|e| format!("{shown}: {e}"))
}

fn functions_of<'s, S: pdb2::Source<'s> + Send + 's>(
    pdb: &mut pdb2::PDB<'s, S>,
) -> pdb2::Result<PdbSymbols> {
    let map = pdb.address_map()?;
    let mut out: Vec<PdbFunction> = Vec::new();
    // procedures, from each module's symbol stream
    let dbi = pdb.debug_information()?;
    let mut modules = dbi.modules()?;
    while let Some(m) = modules.next()? {
        let Ok(Some(info)) = pdb.module_info(&m) else {
            continue;
        };
        let Ok(mut syms) = info.symbols() else {
            continue;
        };
        // a damaged record ends this module's list; the others stay
        while let Ok(Some(s)) = syms.next() {
            if let Ok(pdb2::SymbolData::Procedure(p)) = s.parse() {
                let Some(rva) = p.offset.to_rva(&map) else {
                    continue;
                };
                out.push(PdbFunction {
                    rva: rva.0,
                    size: p.len,
                    name: p.name.to_string().into_owned(),
                    global: p.global,
                });
            }
        }
    }
    // public symbols where no procedure starts (stripped PDBs have only these)
    out.sort_by_key(|f| f.rva);
    let mut publics = Vec::new();
    if let Ok(globals) = pdb.global_symbols() {
        let mut it = globals.iter();
        while let Ok(Some(s)) = it.next() {
            if let Ok(pdb2::SymbolData::Public(p)) = s.parse() {
                if !(p.function || p.code) {
                    continue;
                }
                let Some(rva) = p.offset.to_rva(&map) else {
                    continue;
                };
                if out.binary_search_by_key(&rva.0, |f| f.rva).is_err() {
                    publics.push(PdbFunction {
                        rva: rva.0,
                        size: 0,
                        name: p.name.to_string().into_owned(),
                        global: true,
                    });
                }
            }
        }
    }
    out.extend(publics);
    out.sort_by(|a, b| a.rva.cmp(&b.rva).then(b.size.cmp(&a.size)));
    out.dedup_by(|b, a| a.rva == b.rva && a.name == b.name);
    // a public symbol reaches to the next function, within its section (the image's section
    // headers as the PDB recorded them)
    let sections: Vec<(u32, u32)> = pdb
        .sections()
        .ok()
        .flatten()
        .unwrap_or_default()
        .iter()
        .map(|h| {
            let start = h.virtual_address;
            (
                start,
                start.saturating_add(h.virtual_size.max(h.size_of_raw_data)),
            )
        })
        .collect();
    let starts: Vec<u32> = out.iter().map(|f| f.rva).collect();
    for f in out.iter_mut().filter(|f| f.size == 0) {
        let Some(&(_, end)) = sections.iter().find(|(s, e)| f.rva >= *s && f.rva < *e) else {
            continue;
        };
        let next = starts[starts.partition_point(|&s| s <= f.rva)..]
            .first()
            .copied()
            .unwrap_or(end);
        f.size = next.min(end) - f.rva;
    }
    Ok(PdbSymbols { functions: out })
}

/// One element of a symbol path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SymbolPathEntry {
    /// A plain folder: `dir\name.pdb`, `dir\<ext>\name.pdb`, `dir\symbols\<ext>\name.pdb`, or a
    /// symbol store laid out in it.
    Folder(PathBuf),
    /// Local symbol stores (the folders of `srv*`/`symsrv*` chains, the per-user cache a chain
    /// without one gets, and `cache*` folders):
    /// `store\name.pdb\<GUID><age>\name.pdb` (or the two-tier `index2.txt` layout).
    Stores(Vec<PathBuf>),
}

/// A parsed `_NT_SYMBOL_PATH`: the local places, searched first, then the HTTP symbol
/// servers (see [`super::symsrv`]), asked only for a PDB no local place has.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SymbolPath {
    pub entries: Vec<SymbolPathEntry>,
    pub servers: Vec<super::symsrv::Server>,
}

/// The symbol path `-x sympath=...` sets for the run, in place of the environment's.
static OVERRIDE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Whether this run reads a recorded trace (a stranger's, maybe): see [`set_recorded_trace`].
static RECORDED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Says that this run reads a recorded trace: the PDB path each image records is then not
/// opened as it is, unless `DTX_TRACE_PDB_PATHS=1` (the symbol path is the way to name PDBs
/// for a trace); a UNC path is never opened ([`super::symsrv::guard::recorded_path_allowed`]).
pub fn set_recorded_trace() {
    RECORDED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Sets the symbol path of this run (`-x sympath=...`), used in place of
/// `_NT_ALT_SYMBOL_PATH` / `_NT_SYMBOL_PATH`. Only the first call counts.
pub fn set_run_symbol_path(text: &str) {
    let _ = OVERRIDE.set(text.to_string());
}

impl SymbolPath {
    /// Parses `;`-separated elements: `srv*[store*...]*url`, `symsrv*dll*[store*...]*url`,
    /// `cache*[dir]`, and plain folders (see [`super::symsrv::grammar`]). Empty elements are
    /// skipped.
    pub fn parse(text: &str) -> SymbolPath {
        use super::symsrv::grammar::{Element, Store};
        let mut p = SymbolPath::default();
        // the folder of the last `cache*` element: where servers after it put what they give
        let mut cache: Option<PathBuf> = None;
        for el in super::symsrv::grammar::parse(text) {
            match el {
                Element::Folder(d) => p.entries.push(SymbolPathEntry::Folder(d)),
                Element::Cache(d) => {
                    if let Some(d) = d.or_else(super::symsrv::cache::default_dir) {
                        p.entries.push(SymbolPathEntry::Stores(vec![d.clone()]));
                        cache = Some(d);
                    }
                }
                Element::Chain(stores) => {
                    let mut local: Vec<PathBuf> = Vec::new();
                    for st in stores {
                        match st {
                            Store::Dir(d) => local.push(d),
                            Store::Http(url) => {
                                let (downstream, default_cache) = if !local.is_empty() {
                                    (local.clone(), false)
                                } else if let Some(c) = &cache {
                                    (vec![c.clone()], false)
                                } else {
                                    let Some(d) = super::symsrv::cache::default_dir() else {
                                        continue;
                                    };
                                    local.push(d.clone());
                                    (vec![d], true)
                                };
                                p.servers.push(super::symsrv::Server {
                                    url,
                                    downstream,
                                    default_cache,
                                });
                            }
                        }
                    }
                    if !local.is_empty() {
                        p.entries.push(SymbolPathEntry::Stores(local));
                    }
                }
            }
        }
        p
    }

    /// The run's symbol path (`-x sympath`), else `_NT_ALT_SYMBOL_PATH` then
    /// `_NT_SYMBOL_PATH`, as the debuggers search them.
    pub fn from_env() -> SymbolPath {
        if let Some(text) = OVERRIDE.get() {
            return SymbolPath::parse(text);
        }
        let mut p = SymbolPath::default();
        for var in ["_NT_ALT_SYMBOL_PATH", "_NT_SYMBOL_PATH"] {
            if let Ok(v) = std::env::var(var) {
                let more = SymbolPath::parse(&v);
                p.entries.extend(more.entries);
                p.servers.extend(more.servers);
            }
        }
        p
    }

    /// Whether `path` lies in a folder or store the user named in this path.
    pub fn names(&self, path: &Path) -> bool {
        self.entries.iter().any(|e| match e {
            SymbolPathEntry::Stores(dirs) => dirs.iter().any(|d| path.starts_with(d)),
            SymbolPathEntry::Folder(d) => path.starts_with(d),
        })
    }

    /// Whether `path` lies in one of this path's stores (a cache) rather than a plain folder.
    pub fn in_store(&self, path: &Path) -> bool {
        self.entries.iter().any(|e| match e {
            SymbolPathEntry::Stores(dirs) => dirs.iter().any(|d| path.starts_with(d)),
            SymbolPathEntry::Folder(_) => false,
        })
    }

    /// The places this path would look for `id`'s PDB, in order (existing or not).
    pub fn candidates(&self, id: &PdbId, image_ext: &str) -> Vec<PathBuf> {
        let name = id.file_name();
        let mut out = Vec::new();
        if name.is_empty() {
            return out;
        }
        for e in &self.entries {
            match e {
                SymbolPathEntry::Folder(d) => {
                    out.push(d.join(name));
                    if !image_ext.is_empty() {
                        out.push(d.join(image_ext).join(name));
                        out.push(d.join("symbols").join(image_ext).join(name));
                    }
                    store_candidates(d, id, &mut out);
                }
                SymbolPathEntry::Stores(dirs) => {
                    for d in dirs {
                        store_candidates(d, id, &mut out);
                    }
                }
            }
        }
        out
    }
}

/// `store/name.pdb/<key>/name.pdb`, the key's age also in lower case, and the two-tier layout
/// (`store/na/name.pdb/...`) of stores that have an `index2.txt`.
fn store_candidates(store: &Path, id: &PdbId, out: &mut Vec<PathBuf>) {
    let name = id.file_name();
    let key = id.store_key();
    let lower_age = format!("{}{:x}", &key[..32], id.age);
    let mut roots = vec![store.to_path_buf()];
    if store.join("index2.txt").is_file() {
        let tier: String = name.chars().take(2).collect();
        roots.push(store.join(tier.to_ascii_lowercase()));
    }
    for r in roots {
        for k in [&key, &lower_age] {
            let p = r.join(name).join(k).join(name);
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
}

/// Finds the PDB that matches `id`: the path the image records, beside the image
/// (`image_path`, also when it is the NT path an ETW Image record carries: see
/// [`image_folder`]), then `symbol_path`. Returns the first candidate whose GUID and age match.
pub fn find_pdb(
    id: &PdbId,
    image_path: Option<&Path>,
    symbol_path: &SymbolPath,
) -> Option<PathBuf> {
    find_pdb_with(
        id,
        image_path,
        symbol_path,
        crate::etw::state::DevicePaths::this_machine(),
    )
}

/// [`find_pdb`], with NT device paths turned into this machine's paths by `devices`.
pub fn find_pdb_with(
    id: &PdbId,
    image_path: Option<&Path>,
    symbol_path: &SymbolPath,
    devices: Option<&crate::etw::state::DevicePaths>,
) -> Option<PathBuf> {
    use super::symsrv::guard;
    let mut candidates = Vec::new();
    let recorded = RECORDED.load(std::sync::atomic::Ordering::Relaxed);
    let option = std::env::var("DTX_TRACE_PDB_PATHS").is_ok_and(|v| v.trim() == "1");
    if guard::recorded_path_allowed(&id.path, recorded, option) {
        candidates.push(PathBuf::from(&id.path));
    }
    // a name that is not a plain file name (`..`, `C:x`, a device) names no file of a folder
    if guard::file_name_problem(id.file_name()).is_some() {
        return candidates.into_iter().find(|c| {
            c.is_file() && pdb_identity(c).is_ok_and(|(guid, age)| guid == id.guid && age == id.age)
        });
    }
    let mut ext = String::new();
    if let Some(img) = image_path {
        if let Some(dir) = image_folder(img, devices) {
            candidates.push(dir.join(id.file_name()));
        }
        ext = img
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
    }
    candidates.extend(symbol_path.candidates(id, &ext));
    // no share is opened for a name the trace gave (an SMB connection to its author)
    candidates.retain(|c| !guard::is_unc(&c.to_string_lossy()) || symbol_path.names(c));
    candidates.into_iter().find(|c| {
        c.is_file() && pdb_identity(c).is_ok_and(|(guid, age)| guid == id.guid && age == id.age)
    })
}

/// The folder an image file is in, as this machine can open it. ETW's Image records name an
/// image by its NT path (`\Device\HarddiskVolume3\app\prog.exe`), which no file API opens:
/// `devices` turns it into the drive path (`C:\app\prog.exe`), so that the PDB a user keeps
/// next to their program is found live and over a trace recorded on this machine. A path that
/// is not an NT path is taken as it is; an NT path `devices` cannot place has no folder here.
pub fn image_folder(
    image_path: &Path,
    devices: Option<&crate::etw::state::DevicePaths>,
) -> Option<PathBuf> {
    let text = image_path.to_string_lossy();
    // `\Device\..`, `\SystemRoot\..`, `\??\C:\..` and `\\?\..`; a share (`\\server\..`)
    // opens as it is
    let nt = text.starts_with('\\')
        && (!text.starts_with("\\\\")
            || text.starts_with("\\\\?\\")
            || text.starts_with("\\\\.\\"));
    let path = if nt {
        PathBuf::from(devices?.to_dos(&text)?)
    } else {
        image_path.to_path_buf()
    };
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map(Path::to_path_buf)
}

/// The functions of the PDB matching a PE image, when one is found (see [`find_pdb`]).
pub fn symbols_for_image(
    file: &object::File<'_>,
    image_path: &Path,
    symbol_path: &SymbolPath,
) -> Option<PdbSymbols> {
    let id = image_pdb_id(file)?;
    let pdb = find_pdb(&id, Some(image_path), symbol_path)?;
    read(&pdb, Some(&id)).ok()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A C program built by clang for x86_64-w64-mingw32 with lld writing a PDB, and stripped
    /// of its COFF symbols: `(dir, exe, pdb)`. None (after saying why) without clang, lld or
    /// the mingw runtime.
    pub fn clang_program(name: &str, src: &str) -> Option<(tempfile::TempDir, PathBuf, PathBuf)> {
        let dir = tempfile::tempdir().ok()?;
        let c = dir.path().join(format!("{name}.c"));
        std::fs::write(&c, src).ok()?;
        let exe = dir.path().join(format!("{name}.exe"));
        let pdb = dir.path().join(format!("{name}.pdb"));
        let libgcc = std::process::Command::new("x86_64-w64-mingw32-gcc")
            .arg("-print-libgcc-file-name")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        let Some(libgcc) = libgcc else {
            eprintln!("skipping PDB test: x86_64-w64-mingw32-gcc is not installed");
            return None;
        };
        let libdir = Path::new(&libgcc).parent()?.to_path_buf();
        let built = std::process::Command::new("clang")
            .args(["--target=x86_64-w64-mingw32", "-O1", "-g", "-gcodeview"])
            .arg("-fuse-ld=lld")
            .arg(format!("-L{}", libdir.display()))
            .arg(format!("-Wl,--pdb={}", pdb.display()))
            .arg("-s")
            .arg(&c)
            .arg("-o")
            .arg(&exe)
            .output();
        match built {
            Ok(o) if o.status.success() && pdb.is_file() => Some((dir, exe, pdb)),
            Ok(o) => {
                eprintln!(
                    "skipping PDB test: clang/lld could not build a PDB: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
                None
            }
            Err(_) => {
                eprintln!("skipping PDB test: clang is not installed (apt-get install clang lld)");
                None
            }
        }
    }

    pub const PROGRAM: &str = r#"
        #include <stdio.h>
        __attribute__((noinline)) static int triple(int x) { return x * 3; }
        __attribute__((noinline)) int add(int a, int b) { return triple(a) + b; }
        int main(int argc, char **argv) { printf("%d\n", add(argc, 2)); return 0; }
    "#;

    /// A minimal PE32+ image: headers, and one section holding a debug directory with a
    /// CodeView entry (`RSDS`, the GUID in its on-disk form, the age, the PDB path).
    pub fn pe_with_rsds(guid: &[u8; 16], age: u32, pdb_path: &str) -> Vec<u8> {
        let mut f = vec![0u8; 0x400];
        let mut put = |at: usize, bytes: &[u8]| f[at..at + bytes.len()].copy_from_slice(bytes);
        put(0, b"MZ");
        put(0x3c, &0x40u32.to_le_bytes());
        put(0x40, b"PE\0\0");
        // COFF header: AMD64, one section, a PE32+ optional header with 16 data directories
        put(0x44, &0x8664u16.to_le_bytes());
        put(0x46, &1u16.to_le_bytes());
        put(0x54, &0xf0u16.to_le_bytes());
        put(0x56, &0x22u16.to_le_bytes());
        let opt = 0x58;
        put(opt, &0x20bu16.to_le_bytes());
        put(opt + 24, &0x1_4000_0000u64.to_le_bytes());
        put(opt + 32, &0x1000u32.to_le_bytes());
        put(opt + 36, &0x200u32.to_le_bytes());
        put(opt + 56, &0x2000u32.to_le_bytes());
        put(opt + 60, &0x200u32.to_le_bytes());
        put(opt + 68, &3u16.to_le_bytes());
        put(opt + 108, &16u32.to_le_bytes());
        // data directory 6: the debug directory, one 28-byte entry at RVA 0x1000
        put(opt + 112 + 6 * 8, &0x1000u32.to_le_bytes());
        put(opt + 112 + 6 * 8 + 4, &28u32.to_le_bytes());
        // the section: RVA 0x1000, file offset 0x200
        let sec = opt + 0xf0;
        put(sec, b".rdata\0\0");
        put(sec + 8, &0x100u32.to_le_bytes());
        put(sec + 12, &0x1000u32.to_le_bytes());
        put(sec + 16, &0x200u32.to_le_bytes());
        put(sec + 20, &0x200u32.to_le_bytes());
        put(sec + 36, &0x4000_0040u32.to_le_bytes());
        // the debug directory entry: CodeView, its record at RVA 0x1020 / offset 0x220
        let mut rsds = b"RSDS".to_vec();
        rsds.extend_from_slice(guid);
        rsds.extend_from_slice(&age.to_le_bytes());
        rsds.extend_from_slice(pdb_path.as_bytes());
        rsds.push(0);
        put(0x200 + 12, &2u32.to_le_bytes());
        put(0x200 + 16, &(rsds.len() as u32).to_le_bytes());
        put(0x200 + 20, &0x1020u32.to_le_bytes());
        put(0x200 + 24, &0x220u32.to_le_bytes());
        put(0x220, &rsds);
        f
    }

    #[test]
    fn the_pdb_identity_of_an_image_file() {
        let guid: [u8; 16] = *b"\x13\x47\x12\xf5\x69\x7f\x56\x22LLD PDB.";
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("x.dll");
        std::fs::write(&exe, pe_with_rsds(&guid, 7, r"C:\build\x.pdb")).unwrap();
        let info = pdb_info_from_file(&exe).expect("RSDS record");
        assert_eq!(info.guid, Guid::from_le_bytes(&guid).unwrap());
        assert_eq!(info.guid.data1, 0xf5124713);
        assert_eq!(info.age, 7);
        assert_eq!(info.file_name, r"C:\build\x.pdb");
        // the same as the parsed image gives
        let bytes = std::fs::read(&exe).unwrap();
        let id = image_pdb_id(&object::File::parse(&*bytes).unwrap()).unwrap();
        assert_eq!(
            (id.guid, id.age, id.path),
            (info.guid, info.age, info.file_name)
        );
        // no file, not an image, an image cut short: no identity, no panic
        assert_eq!(pdb_info_from_file(&dir.path().join("none.dll")), None);
        assert_eq!(pdb_info_from_file(dir.path()), None);
        let text = dir.path().join("text.dll");
        std::fs::write(&text, "MZ not a PE").unwrap();
        assert_eq!(pdb_info_from_file(&text), None);
        for len in [0, 2, 0x40, 0x100, 0x148, 0x200, 0x210, 0x228, 0x23c] {
            let cut = dir.path().join("cut.dll");
            std::fs::write(&cut, &bytes[..len]).unwrap();
            assert_eq!(pdb_info_from_file(&cut), None, "{len}");
        }
    }

    #[test]
    fn an_image_named_by_its_nt_path_read_through_a_device_map() {
        let guid = [7u8; 16];
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("System32")).unwrap();
        let exe = dir.path().join("System32").join("ntdll.dll");
        std::fs::write(&exe, pe_with_rsds(&guid, 1, "ntdll.pdb")).unwrap();
        // the temporary folder stands for the volume's drive
        let volume = format!("{}/", dir.path().display());
        let devices = crate::etw::state::DevicePaths::new(
            vec![(r"\Device\HarddiskVolume3".into(), volume)],
            None,
        );
        let nt = r"\Device\HarddiskVolume3\System32\ntdll.dll";
        let identify = |nt: &str| pdb_info_from_file(Path::new(&devices.to_dos(nt)?));
        let info = identify(nt).expect("identity through the device map");
        assert_eq!(
            (info.guid, info.age),
            (Guid::from_le_bytes(&guid).unwrap(), 1)
        );
        assert_eq!(info.file_name, "ntdll.pdb");
        assert_eq!(
            identify(r"\Device\HarddiskVolume30\System32\ntdll.dll"),
            None
        );
    }

    #[test]
    fn symbol_path_forms() {
        let p = SymbolPath::parse(concat!(
            r"C:\syms; srv*C:\cache*https://msdl.microsoft.com/download/symbols;;cache*D:\c;",
            r"symsrv*symsrv.dll*E:\store*F:\second*http://x;srv*https://only.url;cache*",
        ));
        let default = crate::symbols::symsrv::cache::default_dir();
        let mut want = vec![
            SymbolPathEntry::Folder(r"C:\syms".into()),
            SymbolPathEntry::Stores(vec![r"C:\cache".into()]),
            SymbolPathEntry::Stores(vec![r"D:\c".into()]),
            SymbolPathEntry::Stores(vec![r"E:\store".into(), r"F:\second".into()]),
        ];
        want.extend(
            default
                .iter()
                .map(|d| SymbolPathEntry::Stores(vec![d.clone()])),
        );
        assert_eq!(p.entries, want);
        let server = |url: &str, downstream: Vec<PathBuf>| crate::symbols::symsrv::Server {
            url: url.into(),
            downstream,
            default_cache: false,
        };
        // the server after `cache*D:\c` fills it; the others their chains' folders
        assert_eq!(
            p.servers,
            vec![
                server(
                    "https://msdl.microsoft.com/download/symbols",
                    vec![r"C:\cache".into()]
                ),
                server("http://x", vec![r"E:\store".into(), r"F:\second".into()]),
                server("https://only.url", vec![r"D:\c".into()]),
            ]
        );
        // a server alone gets the per-user cache
        let alone = SymbolPath::parse("srv*http://127.0.0.1:1");
        if let Some(d) = default {
            assert_eq!(
                alone.entries,
                vec![SymbolPathEntry::Stores(vec![d.clone()])]
            );
            assert_eq!(
                alone.servers,
                vec![crate::symbols::symsrv::Server {
                    url: "http://127.0.0.1:1".into(),
                    downstream: vec![d],
                    default_cache: true,
                }]
            );
        }
        let id = PdbId {
            guid: Guid {
                data1: 0xf5124713,
                data2: 0x7f69,
                data3: 0x2256,
                data4: [0x4c, 0x4c, 0x44, 0x20, 0x50, 0x44, 0x42, 0x2e],
            },
            age: 10,
            path: r"C:\build\out\Prog.pdb".into(),
        };
        assert_eq!(id.file_name(), "Prog.pdb");
        assert_eq!(id.store_key(), "F51247137F6922564C4C44205044422EA");
        let c = SymbolPath::parse("/s").candidates(&id, "exe");
        assert!(c.contains(&PathBuf::from("/s/Prog.pdb")));
        assert!(c.contains(&PathBuf::from("/s/exe/Prog.pdb")));
        assert!(c.contains(&PathBuf::from(
            "/s/Prog.pdb/F51247137F6922564C4C44205044422EA/Prog.pdb"
        )));
        assert!(c.contains(&PathBuf::from(
            "/s/Prog.pdb/F51247137F6922564C4C44205044422Ea/Prog.pdb"
        )));
    }

    #[test]
    fn functions_of_a_clang_pdb_and_the_image_identity() {
        let Some((_dir, exe, pdb)) = clang_program("pdbprog", PROGRAM) else {
            return;
        };
        let bytes = std::fs::read(&exe).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        // stripped: the COFF symbol table gives no names
        assert!(super::super::pe::functions(&file)
            .iter()
            .all(|f| f.name != "add" && f.name != "triple"));
        let id = image_pdb_id(&file).expect("RSDS record");
        assert_eq!(id.file_name(), "pdbprog.pdb");
        assert_eq!(pdb_identity(&pdb).unwrap(), (id.guid, id.age));
        // read from the file, as a live session does
        let info = pdb_info_from_file(&exe).expect("RSDS record from the file");
        assert_eq!(
            (info.guid, info.age, &info.file_name),
            (id.guid, id.age, &id.path)
        );
        let syms = read(&pdb, Some(&id)).unwrap();
        let add = syms.functions.iter().find(|f| f.name == "add").unwrap();
        let triple = syms.functions.iter().find(|f| f.name == "triple").unwrap();
        assert!(add.global && !triple.global);
        assert!(add.size > 0 && triple.size > 0);
        // the RVAs are where the code is: .pdata has an entry starting at each
        use object::{Object, ObjectSection};
        let base = file.relative_address_base();
        let pdata = super::super::pe::runtime_functions(&file);
        let at = base + add.rva as u64;
        assert!(
            pdata
                .iter()
                .any(|(b, e)| *b == at && e - b == add.size as u64),
            "{add:?} {pdata:x?}"
        );
        // triple is a leaf (no .pdata entry) in the same code section
        let text = file.section_by_name(".text").unwrap();
        let t = base + triple.rva as u64;
        assert!(t >= text.address() && t + triple.size as u64 <= text.address() + text.size());
        // llvm-pdbutil agrees, when it is here
        if let Ok(o) = std::process::Command::new("llvm-pdbutil")
            .args(["dump", "--publics"])
            .arg(&pdb)
            .output()
        {
            let t = String::from_utf8_lossy(&o.stdout);
            assert!(!o.status.success() || t.contains("`add`"), "{t}");
        }
        assert_eq!(
            syms.function_at(add.rva + 1).map(|f| f.name.as_str()),
            Some("add")
        );
        assert!(syms
            .function_at(add.rva + add.size)
            .is_none_or(|f| f.name != "add"));
    }

    #[test]
    fn symbol_store_search_and_a_wrong_guid() {
        let Some((_d1, exe, pdb)) = clang_program("storeprog", PROGRAM) else {
            return;
        };
        // the same name, other code: another GUID
        let Some((_d2, _exe2, other_pdb)) = clang_program(
            "storeprog",
            "int other(int x) { return x + 1; } int main(void) { return other(2); }",
        ) else {
            return;
        };
        let bytes = std::fs::read(&exe).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        let mut id = image_pdb_id(&file).unwrap();
        // as if built on another machine: the recorded path is not here
        id.path = r"C:\build\storeprog.pdb".into();
        let cache = tempfile::tempdir().unwrap();
        let place = cache
            .path()
            .join("storeprog.pdb")
            .join(id.store_key())
            .join("storeprog.pdb");
        std::fs::create_dir_all(place.parent().unwrap()).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let img_elsewhere = elsewhere.path().join("storeprog.exe");
        let sp = SymbolPath::parse(&format!("srv*{}", cache.path().display()));
        // a PDB of another build in the store's place is rejected
        std::fs::copy(&other_pdb, &place).unwrap();
        assert_eq!(find_pdb(&id, Some(&img_elsewhere), &sp), None);
        let err = read(&place, Some(&id)).unwrap_err();
        assert!(err.contains("does not match"), "{err}");
        // the right one is found there
        std::fs::copy(&pdb, &place).unwrap();
        assert_eq!(
            find_pdb(&id, Some(&img_elsewhere), &sp),
            Some(place.clone())
        );
        // cache*dir and a plain folder work too; beside the image as well
        let sp2 = SymbolPath::parse(&format!("cache*{}", cache.path().display()));
        assert_eq!(find_pdb(&id, None, &sp2), Some(place.clone()));
        let flat = tempfile::tempdir().unwrap();
        std::fs::copy(&pdb, flat.path().join("storeprog.pdb")).unwrap();
        let sp3 = SymbolPath::parse(&format!("{}", flat.path().display()));
        assert_eq!(
            find_pdb(&id, None, &sp3),
            Some(flat.path().join("storeprog.pdb"))
        );
        assert_eq!(
            find_pdb(&id, Some(&exe), &SymbolPath::default()),
            Some(exe.with_extension("pdb"))
        );
        // an age the PDB does not have
        id.age += 1;
        assert_eq!(find_pdb(&id, Some(&exe), &sp), None);
    }

    #[test]
    fn a_pdb_beside_an_image_named_by_its_nt_path() {
        // what a live session or a trace recorded here names the image by: its NT path; the
        // PDB the user keeps next to the program (moved there with it, so the path the linker
        // recorded is gone) is found through the drive the device stands for
        let Some((_built, exe, pdb)) = clang_program("besideprog", PROGRAM) else {
            return;
        };
        let bytes = std::fs::read(&exe).unwrap();
        let id = image_pdb_id(&object::File::parse(&*bytes).unwrap()).unwrap();
        let drive = tempfile::tempdir().unwrap();
        let moved = drive.path().join("apps");
        std::fs::create_dir_all(&moved).unwrap();
        std::fs::copy(&exe, moved.join("besideprog.exe")).unwrap();
        std::fs::rename(&pdb, moved.join("besideprog.pdb")).unwrap();
        assert!(!Path::new(&id.path).exists());
        let devices = crate::etw::state::DevicePaths::new(
            vec![(
                r"\Device\HarddiskVolume9".into(),
                drive.path().display().to_string(),
            )],
            None,
        );
        let nt = Path::new(r"\Device\HarddiskVolume9\apps\besideprog.exe");
        let none = SymbolPath::default();
        assert_eq!(
            find_pdb_with(&id, Some(nt), &none, Some(&devices)),
            Some(moved.join("besideprog.pdb"))
        );
        // a device this machine does not have, or no device names at all: not found
        let other = Path::new(r"\Device\HarddiskVolume2\apps\besideprog.exe");
        assert_eq!(find_pdb_with(&id, Some(other), &none, Some(&devices)), None);
        assert_eq!(find_pdb_with(&id, Some(nt), &none, None), None);
        // a path the file system knows is taken as it is
        assert_eq!(
            find_pdb_with(&id, Some(&moved.join("besideprog.exe")), &none, None),
            Some(moved.join("besideprog.pdb"))
        );
        // the folders
        assert_eq!(image_folder(nt, Some(&devices)), Some(moved.clone()));
        assert_eq!(image_folder(Path::new("prog.exe"), None), None);
        assert_eq!(
            image_folder(Path::new(r"\\server\share\x.exe"), None).is_some(),
            cfg!(windows)
        );
    }

    #[test]
    fn stripped_image_functions_come_from_its_pdb() {
        let Some((_dir, exe, _pdb)) = clang_program("imgprog", PROGRAM) else {
            return;
        };
        // the PDB lies beside the image
        let img = crate::symbols::ElfImage::open(exe.to_str().unwrap()).unwrap();
        let add = img.function("add").expect("add from the PDB").clone();
        let triple = img.function("triple").expect("triple from the PDB").clone();
        assert!(add.size > 0 && triple.size > 0);
        assert_eq!(
            img.function_at(add.addr + 1).map(|f| f.name.as_str()),
            Some("add")
        );
        let code = img.bytes(add.addr, add.size).unwrap();
        let insns = crate::symbols::decode::function(code, add.addr);
        assert!(insns.iter().any(|i| i.returns), "{insns:?}");
        assert!(img.function("main").is_some());
    }
}
