//! Functions of PE images (Windows executables and DLLs): names from the COFF symbol table
//! (mingw keeps one unless stripped), the export table and the image's PDB when one is found
//! ([`super::pdb`]); sizes from the PDB's procedures, else the exception directory (`.pdata`:
//! one RUNTIME_FUNCTION begin/end pair per function with unwind data), else up to the next
//! known function or the section's end. Every name of one address gets the same size. Addresses are link-time (image base
//! included), as for ELF. Platform-neutral: Linux tests read mingw-built images too.

use object::{Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind};

/// One named function start: link-time address, size, name, whether the name is global.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeFunction {
    pub addr: u64,
    pub size: u64,
    pub name: String,
    pub global: bool,
}

/// `[begin, end)` link-time ranges of the `.pdata` entries, sorted by begin.
pub fn runtime_functions(file: &object::File<'_>) -> Vec<(u64, u64)> {
    let base = file.relative_address_base();
    let Some(data) = file.section_by_name(".pdata").and_then(|s| s.data().ok()) else {
        return Vec::new();
    };
    let mut v: Vec<(u64, u64)> = data
        .chunks_exact(12)
        .filter_map(|e| {
            let begin = u32::from_le_bytes(e[0..4].try_into().ok()?) as u64;
            let end = u32::from_le_bytes(e[4..8].try_into().ok()?) as u64;
            (begin != 0 && end > begin).then_some((base + begin, base + end))
        })
        .collect();
    v.sort_unstable();
    v
}

/// The functions of a PE image, with sizes, from its COFF symbols and exports.
pub fn functions(file: &object::File<'_>) -> Vec<PeFunction> {
    functions_with_pdb(file, None)
}

/// The functions of a PE image, with sizes: COFF symbols, exports and the functions of its PDB.
pub fn functions_with_pdb(
    file: &object::File<'_>,
    pdb: Option<&super::pdb::PdbSymbols>,
) -> Vec<PeFunction> {
    // code sections: [start, end)
    let code: Vec<(u64, u64)> = file
        .sections()
        .filter(|s| s.kind() == SectionKind::Text)
        .map(|s| (s.address(), s.address() + s.size()))
        .collect();
    let in_code = |a: u64| code.iter().find(|(s, e)| a >= *s && a < *e).copied();
    let mut named: Vec<(u64, String, bool)> = Vec::new();
    for s in file.symbols() {
        if s.kind() != SymbolKind::Text || !s.is_definition() {
            continue;
        }
        let (Ok(name), a) = (s.name(), s.address()) else {
            continue;
        };
        if name.is_empty() || a == 0 || in_code(a).is_none() {
            continue;
        }
        named.push((a, name.to_string(), s.is_global()));
    }
    if let Ok(exports) = file.exports() {
        for e in exports {
            let a = e.address();
            if in_code(a).is_none() {
                continue;
            }
            let name = String::from_utf8_lossy(e.name()).into_owned();
            if !named.iter().any(|(x, n, _)| *x == a && *n == name) {
                named.push((a, name, true));
            }
        }
    }
    // sizes the PDB states (its procedures), by address
    let mut stated: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    if let Some(p) = pdb {
        let base = file.relative_address_base();
        for f in &p.functions {
            let a = base + f.rva as u64;
            if in_code(a).is_none() {
                continue;
            }
            if f.size > 0 {
                let s = stated.entry(a).or_insert(0);
                *s = (*s).max(f.size as u64);
            }
            if !named.iter().any(|(x, n, _)| *x == a && *n == f.name) {
                named.push((a, f.name.clone(), f.global));
            }
        }
    }
    let pdata = runtime_functions(file);
    let mut starts: Vec<u64> = named.iter().map(|(a, _, _)| *a).collect();
    starts.extend(pdata.iter().map(|(b, _)| *b));
    starts.sort_unstable();
    starts.dedup();
    let mut out = Vec::with_capacity(named.len());
    for (addr, name, global) in named {
        let size = match pdata.binary_search_by_key(&addr, |(b, _)| *b) {
            _ if stated.contains_key(&addr) => stated[&addr],
            Ok(i) => pdata[i].1 - addr,
            Err(_) => {
                let section_end = in_code(addr).map_or(addr, |(_, e)| e);
                let i = starts.partition_point(|&s| s <= addr);
                starts
                    .get(i)
                    .copied()
                    .unwrap_or(section_end)
                    .min(section_end)
                    - addr
            }
        };
        if size > 0 {
            out.push(PeFunction {
                addr,
                size,
                name,
                global,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::{ElfImage, ProcessModules};

    /// The Windows test program built with the mingw cross compiler, when it is installed.
    fn mingw_program() -> Option<(tempfile::TempDir, std::path::PathBuf)> {
        let dir = tempfile::tempdir().ok()?;
        let exe = dir.path().join("pidwin.exe");
        let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pid_windows/pidwin.c");
        match std::process::Command::new("x86_64-w64-mingw32-gcc")
            .args(["-O0", "-fno-omit-frame-pointer", "-o"])
            .arg(&exe)
            .arg(src)
            .status()
        {
            Ok(st) if st.success() => Some((dir, exe)),
            _ => {
                eprintln!("skipping PE symbol test: x86_64-w64-mingw32-gcc is not installed");
                None
            }
        }
    }

    #[test]
    fn functions_of_a_mingw_program() {
        let Some((_dir, exe)) = mingw_program() else {
            return;
        };
        let bytes = std::fs::read(&exe).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        let pdata = runtime_functions(&file);
        assert!(!pdata.is_empty());
        let fns = functions(&file);
        let add = fns.iter().find(|f| f.name == "add").expect("add");
        // sized by its .pdata entry
        let entry = pdata
            .iter()
            .find(|(b, _)| *b == add.addr)
            .expect("pdata of add");
        assert_eq!(add.size, entry.1 - entry.0);
        assert!(add.global);

        let img = ElfImage::open(exe.to_str().unwrap()).unwrap();
        assert_eq!(img.first_load, file.relative_address_base());
        let f = img.function("add").unwrap().clone();
        assert_eq!((f.addr, f.size), (add.addr, add.size));
        // its code decodes to a function that returns
        let code = img.bytes(f.addr, f.size).unwrap();
        let insns = crate::symbols::decode::function(code, f.addr);
        assert!(insns.iter().any(|i| i.returns), "{insns:?}");
        assert!(img.function("main").is_some() && img.function("leaf2").is_some());
        assert_eq!(img.function_at(f.addr + 1).map(|g| g.addr), Some(f.addr));

        // loaded elsewhere than its image base: the module list relocates it
        let base = 0x7ff6_1000_0000u64;
        let maps = format!(
            "{base:x}-{:x} r-xp 00000000 00:00 0 {}\n",
            base + 0x100000,
            exe.display()
        );
        let mut cache = std::collections::HashMap::new();
        let mods = ProcessModules::from_maps(&maps, exe.to_str().unwrap(), &mut cache);
        let m = &mods.modules[0];
        assert!(m.is_exec && m.matches("a.out") && m.matches("pidwin"));
        let run_time = f.addr.wrapping_add(m.bias);
        assert_eq!(run_time - base, f.addr - img.first_load);
        match mods.lookup(run_time + 2) {
            crate::output::stack::Lookup::Sym { name, start, .. } => {
                assert_eq!((name.as_str(), start), ("add", run_time));
            }
            _ => panic!("add is not found at its run-time address"),
        }
    }

    #[test]
    fn windows_module_names() {
        let maps = "7ffb0000-7ffc0000 r-xp 00000000 00:00 0 C:\\windows\\system32\\KERNEL32.dll\n";
        let m = crate::symbols::parse_maps(maps);
        assert_eq!(m.len(), 1);
        assert_eq!(crate::symbols::basename(&m[0].path), "KERNEL32.dll");
        assert!(crate::symbols::short_name_matches(
            "kernel32",
            "KERNEL32.dll"
        ));
        assert!(crate::symbols::short_name_matches(
            "kernel32.dll",
            "KERNEL32.dll"
        ));
        assert!(!crate::symbols::short_name_matches(
            "kernel",
            "KERNEL32.dll"
        ));
    }
}
