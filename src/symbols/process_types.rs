//! A target process's types: its executable's PDB, then its DLLs' (`ntdll.dll` first, so that
//! the Windows port's `(userland pid`_TEB *)` finds ntdll's `_TEB`), each read when a program
//! first needs it. What ``pid`NAME`` names is the first image in that order whose PDB has the
//! name; a `pid` probe's prototype comes from the PDB of the probe's own module. A PDB is read
//! when it is on this machine (beside the image, where the image records it, or in a store of
//! the symbol path): nothing is downloaded for it (`dtx --symbols -p PID` fetches a process's
//! PDBs into the cache when the symbol path names a server).

use super::pdb_types::{read_for_image, PdbTypes};
use crate::lang::target_types::TargetTypes;
use crate::lang::types::{TypeId, TypeTable};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// The DLLs whose types come first after the executable's, in this order (their PDBs hold
/// the system's own structures: `_TEB`, `_PEB`, `_UNICODE_STRING`).
const FIRST: &[&str] = &["ntdll.dll", "kernelbase.dll", "kernel32.dll"];

/// One image of the process and its types, read at most once.
struct Image {
    /// The file name, as `pid` probes name the module (`KERNEL32.DLL`, `app.exe`).
    name: String,
    path: PathBuf,
    source: u64,
    types: OnceLock<Option<PdbTypes>>,
}

/// The types of a process's images, in the order their names are looked up.
pub struct ProcessTypes {
    images: Vec<Image>,
}

/// A path's file name, whether it is written with `/` or `\`.
fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

impl ProcessTypes {
    /// The executable `exe`, then the images `modules` (paths; the executable and repeats
    /// are left out): [`FIRST`] in its order, then the others by file name.
    pub fn new(exe: &str, modules: &[String]) -> ProcessTypes {
        let exe_name = file_name(exe).to_ascii_lowercase();
        let mut rest: Vec<&String> = modules
            .iter()
            .filter(|m| file_name(m).to_ascii_lowercase() != exe_name)
            .collect();
        let rank = |m: &String| {
            let n = file_name(m).to_ascii_lowercase();
            let first = FIRST.iter().position(|f| *f == n).unwrap_or(FIRST.len());
            (first, n)
        };
        rest.sort_by_key(|m| rank(m));
        rest.dedup_by_key(|m| file_name(m).to_ascii_lowercase());
        let images = std::iter::once(exe)
            .chain(rest.into_iter().map(String::as_str))
            .enumerate()
            .map(|(i, p)| Image {
                name: file_name(p).to_string(),
                path: PathBuf::from(p),
                source: i as u64,
                types: OnceLock::new(),
            })
            .collect();
        ProcessTypes { images }
    }

    /// The file names of the images, in lookup order.
    pub fn order(&self) -> Vec<&str> {
        self.images.iter().map(|i| i.name.as_str()).collect()
    }

    fn types<'a>(&self, image: &'a Image) -> Option<&'a PdbTypes> {
        image
            .types
            .get_or_init(|| read_for_image(&image.path, image.source))
            .as_ref()
    }

    /// The first image whose PDB has a type of this name.
    fn with_name(&self, name: &str) -> Option<&PdbTypes> {
        self.images
            .iter()
            .filter_map(|i| self.types(i))
            .find(|t| t.has(name))
    }

    /// The PDB of the image a probe names by its file name (any case).
    fn of_module(&self, module: &str) -> Option<&PdbTypes> {
        let image = self
            .images
            .iter()
            .find(|i| i.name.eq_ignore_ascii_case(module))?;
        self.types(image)
    }
}

impl TargetTypes for ProcessTypes {
    fn has(&self, name: &str) -> bool {
        self.with_name(name).is_some()
    }

    fn import(&self, name: &str, table: &mut TypeTable) -> Option<TypeId> {
        self.with_name(name)?.import(name, table)
    }

    fn params(&self, module: &str, func: &str, table: &mut TypeTable) -> Option<Vec<TypeId>> {
        self.of_module(module)?.params(module, func, table)
    }

    fn returns(&self, module: &str, func: &str, table: &mut TypeTable) -> Option<TypeId> {
        self.of_module(module)?.returns(module, func, table)
    }

    fn why_missing(&self) -> String {
        // a Linux target (ELF): its DWARF types are not read
        if self
            .images
            .first()
            .is_some_and(|i| !i.name.to_ascii_lowercase().ends_with(".exe"))
        {
            return "the target is not a Windows executable: dtx reads a target's types from \
                    PDBs, not from DWARF"
                .into();
        }
        let (with, without): (Vec<&Image>, Vec<&Image>) =
            self.images.iter().partition(|i| self.types(i).is_some());
        let names = |v: &[&Image]| {
            let mut s: Vec<&str> = v.iter().take(6).map(|i| i.name.as_str()).collect();
            if v.len() > 6 {
                s.push("...");
            }
            s.join(", ")
        };
        let found = if with.is_empty() {
            "no image of the target has its PDB on this machine".to_string()
        } else {
            format!("the PDBs of {} have no type of that name", names(&with))
        };
        let missing = if without.is_empty() {
            String::new()
        } else {
            format!(
                "; no PDB was found for {} of its images ({}): a PDB is read from beside its \
                 image, where the image records it, or a store of _NT_SYMBOL_PATH, and \
                 dtx --symbols -p PID downloads a process's PDBs into the cache",
                without.len(),
                names(&without)
            )
        };
        format!("{found}{missing}")
    }
}

/// The types of a process whose executable is `exe` and whose module list (`/proc/PID/maps`
/// lines, as the debugger gives them) is `maps`.
pub fn for_process(exe: &str, maps: &str) -> Arc<dyn TargetTypes> {
    Arc::new(ProcessTypes::new(exe, &pe_images(maps)))
}

/// The PE images (`.exe`, `.dll`) of a module list.
fn pe_images(maps: &str) -> Vec<String> {
    super::parse_maps(maps)
        .into_iter()
        .map(|m| m.path)
        .filter(|p| {
            let n = file_name(p).to_ascii_lowercase();
            n.ends_with(".dll") || n.ends_with(".exe")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_executable_then_ntdll_then_the_rest_by_name() {
        let t = ProcessTypes::new(
            r"C:\app\App.exe",
            &[
                r"C:\Windows\System32\USER32.dll".into(),
                r"C:\app\App.exe".into(),
                r"C:\Windows\System32\KERNEL32.DLL".into(),
                r"C:\app\zlib.dll".into(),
                r"C:\Windows\System32\ntdll.dll".into(),
                r"C:\Windows\System32\ntdll.dll".into(),
                r"C:\Windows\System32\KERNELBASE.dll".into(),
                r"C:\app\alpha.dll".into(),
            ],
        );
        assert_eq!(
            t.order(),
            [
                "App.exe",
                "ntdll.dll",
                "KERNELBASE.dll",
                "KERNEL32.DLL",
                "alpha.dll",
                "USER32.dll",
                "zlib.dll"
            ]
        );
    }

    #[test]
    fn images_without_a_pdb_name_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let not_pe = dir.path().join("x.dll");
        std::fs::write(&not_pe, b"MZ not really").unwrap();
        let t = ProcessTypes::new(
            &dir.path().join("missing.exe").to_string_lossy(),
            &[not_pe.to_string_lossy().into_owned()],
        );
        let mut table = TypeTable::new(crate::lang::types::DataModel::Lp64);
        assert!(!t.has("_TEB"));
        assert_eq!(t.import("_TEB", &mut table), None);
        assert_eq!(t.params("x.dll", "f", &mut table), None);
    }

    #[test]
    fn maps_lines_give_the_pe_images() {
        let maps = "7ff600000000-7ff600010000 r-xp 00000000 00:00 0 C:\\app\\app.exe\n\
                    7ffa00000000-7ffa00100000 r-xp 00000000 00:00 0 C:\\Windows\\System32\\ntdll.dll\n\
                    7ffb00000000-7ffb00001000 r-xp 00000000 00:00 0 C:\\data\\file.dat\n";
        assert_eq!(
            pe_images(maps),
            ["C:\\app\\app.exe", "C:\\Windows\\System32\\ntdll.dll"]
        );
        // nothing here has a PDB: every name is absent, and nothing fails
        assert!(!for_process("C:\\app\\app.exe", maps).has("_TEB"));
    }
}
