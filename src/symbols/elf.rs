//! Function symbols of an ELF file (`.symtab` and `.dynsym`) and its loadable segments, to turn
//! an address inside a mapping of the file into a function name.

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

pub struct ElfSymbols {
    /// (address, size, name), sorted by address.
    syms: Vec<(u64, u64, Box<str>)>,
    /// Loadable segments: (file offset, file size, virtual address).
    segments: Vec<(u64, u64, u64)>,
}

impl ElfSymbols {
    pub fn parse(data: &[u8]) -> Result<ElfSymbols, String> {
        let file = object::File::parse(data).map_err(|e| e.to_string())?;
        if file.format() != object::BinaryFormat::Elf {
            return Err("not an ELF file".into());
        }
        let mut syms: Vec<(u64, u64, Box<str>)> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.into())))
            .filter(|(_, _, n): &(u64, u64, Box<str>)| !n.is_empty())
            .collect();
        syms.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        syms.dedup_by_key(|s| s.0);
        let segments = file
            .segments()
            .filter_map(|s| {
                let (off, size) = s.file_range();
                (size > 0).then_some((off, size, s.address()))
            })
            .collect();
        Ok(ElfSymbols { syms, segments })
    }

    /// The virtual address (as the file's symbols use) of a byte at `off` in the file.
    pub fn file_offset_to_vaddr(&self, off: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(o, s, _)| off >= *o && off < o + s)
            .map(|(o, _, a)| off - o + a)
    }

    /// The function containing `vaddr`: (name, start).
    pub fn lookup(&self, vaddr: u64) -> Option<(&str, u64)> {
        let i = self.syms.partition_point(|s| s.0 <= vaddr).checked_sub(1)?;
        let (start, size, name) = &self.syms[i];
        // a sized symbol must contain the address; unsized ones (assembly) are taken as is
        if *size != 0 && vaddr >= start + size {
            return None;
        }
        Some((name, *start))
    }

    pub fn len(&self) -> usize {
        self.syms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_input_is_an_error() {
        assert!(ElfSymbols::parse(b"not an object file").is_err());
        assert!(ElfSymbols::parse(&[0x7f, b'E', b'L', b'F', 2, 1, 1]).is_err());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn own_executable_names_its_functions() {
        #[inline(never)]
        fn marker_function_for_symbols() -> u64 {
            std::hint::black_box(42)
        }
        let exe = std::env::current_exe().unwrap();
        let e = ElfSymbols::parse(&std::fs::read(exe).unwrap()).unwrap();
        assert!(!e.is_empty());
        // the function's own address, relative to the executable's load address, names it
        let f = marker_function_for_symbols as *const () as usize as u64;
        let maps = super::super::maps::parse(&std::fs::read_to_string("/proc/self/maps").unwrap());
        let m = super::super::maps::find(&maps, f).unwrap();
        let vaddr = e.file_offset_to_vaddr(f - m.start + m.offset).unwrap();
        let (name, start) = e.lookup(vaddr).unwrap();
        assert!(name.contains("marker_function_for_symbols"), "{name}");
        assert!(start <= vaddr);
        assert_eq!(marker_function_for_symbols(), 42);
    }
}
