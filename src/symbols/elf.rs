//! ELF images: the function symbols (`.symtab`, else `.dynsym`) and the bytes of the loadable
//! segments of one executable or shared library, read from its file. PE images (Windows) take
//! the same shape: their sections are the segments and their functions come from [`super::pe`].

use std::collections::HashMap;
use std::sync::Arc;

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// A function symbol: one address range, possibly known by several names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// The preferred name (a strong global one when there is one).
    pub name: String,
    /// Link-time address.
    pub addr: u64,
    pub size: u64,
}

/// One loadable segment: link-time address range and where its bytes are in the file.
#[derive(Clone, Copy, Debug)]
struct Segment {
    vaddr: u64,
    memsz: u64,
    offset: u64,
    filesz: u64,
}

/// The symbols and code of one ELF file.
pub struct ElfImage {
    pub path: String,
    data: memmap2::Mmap,
    /// Distinct functions sorted by address.
    pub functions: Vec<Function>,
    /// Every name of a function (aliases too) → index into `functions`.
    by_name: HashMap<String, usize>,
    /// Every name of each function, in preference order.
    pub aliases: Vec<Vec<String>>,
    segments: Vec<Segment>,
    /// Link-time address of the first loadable segment, rounded down to the page.
    pub first_load: u64,
    /// Link-time entry point.
    pub entry: u64,
    /// `.eh_frame`'s index, for unwinding through code without frame pointers.
    frames: Option<super::cfi::CallFrames>,
    /// A PE image's `.pdata` (Windows x64 unwind data).
    unwind: Option<super::unwind_info::UnwindTable>,
}

/// The names of one address range, each with its [`rank`].
type RankedNames = Vec<((u8, usize, usize), String)>;

/// Preference among names of one address: strong global, then weak, then local; fewer leading
/// underscores first.
fn rank(global: bool, weak: bool, name: &str) -> (u8, usize, usize) {
    let bind = if global && !weak {
        0
    } else if weak {
        1
    } else {
        2
    };
    let underscores = name.bytes().take_while(|&b| b == b'_').count();
    (bind, underscores, name.len())
}

impl ElfImage {
    /// Reads the file at `path`.
    pub fn open(path: &str) -> Result<Arc<ElfImage>, String> {
        let f = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
        // SAFETY: the mapping is read-only; a file changed underneath gives wrong symbols, not
        // undefined behaviour in safe code reading bytes.
        let data = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| format!("{path}: {e}"))?;
        Self::parse(path, data).map(Arc::new)
    }

    fn parse(path: &str, data: memmap2::Mmap) -> Result<ElfImage, String> {
        let file = object::File::parse(&*data).map_err(|e| format!("{path}: {e}"))?;
        let mut segments = Vec::new();
        for s in file.segments() {
            let (offset, filesz) = s.file_range();
            segments.push(Segment {
                vaddr: s.address(),
                memsz: s.size(),
                offset,
                filesz,
            });
        }
        // where the image's first byte is at link time: the image base of a PE (its headers
        // are mapped there), the first loadable segment's page for ELF
        let first_load = if file.format() == object::BinaryFormat::Pe {
            file.relative_address_base()
        } else {
            segments.iter().map(|s| s.vaddr).min().unwrap_or(0) & !0xfff
        };
        // (addr, size) → names with rank
        let mut ranges: HashMap<(u64, u64), RankedNames> = HashMap::new();
        let mut collect = |syms: &mut dyn Iterator<Item = object::Symbol<'_, '_>>| {
            let mut n = 0;
            for s in syms {
                if s.kind() != SymbolKind::Text || !s.is_definition() || s.size() == 0 {
                    continue;
                }
                let Ok(name) = s.name() else { continue };
                if name.is_empty() {
                    continue;
                }
                let r = rank(s.is_global(), s.is_weak(), name);
                let names = ranges.entry((s.address(), s.size())).or_default();
                if !names.iter().any(|(_, n)| n == name) {
                    names.push((r, name.to_string()));
                    n += 1;
                }
            }
            n
        };
        let pe = file.format() == object::BinaryFormat::Pe;
        if pe {
            // COFF symbols, exports and the PDB's functions, sized from the PDB or .pdata
            let pdb = super::pdb::symbols_for_image(
                &file,
                std::path::Path::new(path),
                &super::pdb::SymbolPath::from_env(),
            );
            for f in super::pe::functions_with_pdb(&file, pdb.as_ref()) {
                let r = rank(f.global, false, &f.name);
                let names = ranges.entry((f.addr, f.size)).or_default();
                if !names.iter().any(|(_, n)| *n == f.name) {
                    names.push((r, f.name));
                }
            }
        } else {
            if collect(&mut file.symbols()) == 0 {
                // a stripped library: its full table from a separate debug file, if installed
                let debug = super::debugfile::read_for(std::path::Path::new(path), &file);
                if let Some(f) = debug.as_deref().and_then(|d| object::File::parse(d).ok()) {
                    collect(&mut f.symbols());
                }
                collect(&mut file.dynamic_symbols());
            }
            // MiniDebugInfo: the local functions of a stripped binary, in an xz-compressed ELF
            if let Some(mini) = gnu_debugdata(&file) {
                if let Ok(inner) = object::File::parse(&*mini) {
                    collect(&mut inner.symbols());
                }
            }
        }
        if ranges.is_empty() && file.entry() != 0 && !pe {
            // a stripped program: find `main` from the code at the entry point
            if let Some((addr, size)) = stripped_main(&file, &segments, &data) {
                ranges.insert((addr, size), vec![((0, 0, 4), "main".to_string())]);
            }
        }
        let mut list: Vec<((u64, u64), RankedNames)> = ranges.into_iter().collect();
        list.sort_by_key(|((a, s), _)| (*a, std::cmp::Reverse(*s)));
        let mut functions = Vec::with_capacity(list.len());
        let mut aliases = Vec::with_capacity(list.len());
        let mut by_name = HashMap::new();
        for ((addr, size), mut names) in list {
            names.sort();
            let idx = functions.len();
            for (_, n) in &names {
                by_name.entry(n.clone()).or_insert(idx);
            }
            functions.push(Function {
                name: names[0].1.clone(),
                addr,
                size,
            });
            aliases.push(names.into_iter().map(|(_, n)| n).collect());
        }
        let entry = file.entry();
        let frames = super::cfi::CallFrames::parse(&file, &data);
        let unwind = if pe {
            super::unwind_info::UnwindTable::parse(&file)
        } else {
            None
        };
        Ok(ElfImage {
            path: path.to_string(),
            data,
            functions,
            by_name,
            aliases,
            segments,
            first_load,
            entry,
            frames,
            unwind,
        })
    }

    /// Steps a Windows x64 frame at link-time address `pc` to its caller by the image's
    /// `.pdata`/`.xdata` (see [`super::unwind_info::UnwindTable::step`]); `None` when the image
    /// has no unwind data.
    pub fn win64_step(
        &self,
        pc: u64,
        innermost: bool,
        regs: &mut super::unwind_info::Win64Regs,
        read: &dyn Fn(u64) -> Option<u64>,
    ) -> Option<bool> {
        let table = self.unwind.as_ref()?;
        let rva = u32::try_from(pc.checked_sub(self.first_load)?).ok()?;
        let bytes = |rva: u32, len: usize| self.bytes(self.first_load + rva as u64, len as u64);
        Some(table.step(&bytes, rva, innermost, regs, read))
    }

    /// How to find the caller at link-time address `addr`, from `.eh_frame`.
    pub fn frame_rule(&self, addr: u64) -> Option<super::cfi::FrameRule> {
        self.frames.as_ref()?.rule(&self.data, addr)
    }

    /// The function with this name (any of its aliases).
    pub fn function(&self, name: &str) -> Option<&Function> {
        self.by_name.get(name).map(|&i| &self.functions[i])
    }

    /// The function whose range holds the link-time address `addr`.
    pub fn function_at(&self, addr: u64) -> Option<&Function> {
        let i = self.functions.partition_point(|f| f.addr <= addr);
        // functions may nest (a larger range starting earlier); look back a few
        self.functions[..i]
            .iter()
            .rev()
            .take(8)
            .find(|f| addr < f.addr + f.size)
    }

    /// The file bytes at link-time addresses `addr .. addr + len`, when the file holds them.
    pub fn bytes(&self, addr: u64, len: u64) -> Option<&[u8]> {
        let s = self
            .segments
            .iter()
            .find(|s| addr >= s.vaddr && addr + len <= s.vaddr + s.filesz.min(s.memsz))?;
        let start = (s.offset + addr - s.vaddr) as usize;
        self.data.get(start..start + len as usize)
    }
}

/// The ELF image in a `.gnu_debugdata` section (MiniDebugInfo, as Fedora ships its binaries:
/// the symbols `strip` removed, xz-compressed), unpacked; None when absent or unreadable.
fn gnu_debugdata(file: &object::File<'_>) -> Option<Vec<u8>> {
    use object::ObjectSection;
    let packed = file.section_by_name(".gnu_debugdata")?.data().ok()?;
    let mut out = Vec::new();
    lzma_rs::xz_decompress(&mut std::io::BufReader::new(packed), &mut out).ok()?;
    Some(out)
}

fn segment_bytes<'d>(
    segments: &[Segment],
    data: &'d [u8],
    addr: u64,
    len: u64,
) -> Option<&'d [u8]> {
    let s = segments
        .iter()
        .find(|s| addr >= s.vaddr && addr + len <= s.vaddr + s.filesz.min(s.memsz))?;
    let start = (s.offset + addr - s.vaddr) as usize;
    data.get(start..start + len as usize)
}

/// The start and size of `main` in a program without a symbol table: the C runtime's entry
/// code passes its address to `__libc_start_main` in `rdi` (`lea rdi, [rip+main]` before the
/// first call); its size is the range of its unwind entry in `.eh_frame_hdr`.
fn stripped_main(file: &object::File<'_>, segments: &[Segment], data: &[u8]) -> Option<(u64, u64)> {
    use iced_x86::{Code, Decoder, DecoderOptions, FlowControl, Instruction, Register};
    let entry = file.entry();
    let code = segment_bytes(segments, data, entry, 64)?;
    let mut dec = Decoder::with_ip(64, code, entry, DecoderOptions::NONE);
    let mut ins = Instruction::default();
    let mut main = None;
    while dec.can_decode() {
        dec.decode_out(&mut ins);
        if ins.is_invalid() {
            break;
        }
        if ins.code() == Code::Lea_r64_m
            && ins.op0_register() == Register::RDI
            && ins.memory_base() == Register::RIP
        {
            main = Some(ins.ip_rel_memory_address());
        }
        if matches!(
            ins.flow_control(),
            FlowControl::Call | FlowControl::IndirectCall
        ) {
            break;
        }
    }
    let main = main?;
    let size = unwind_range(file, main)?;
    Some((main, size))
}

/// The code range length of the `.eh_frame` entry that starts at `addr`, through the sorted
/// table of `.eh_frame_hdr` (GCC's and LLVM's encodings: data-relative 4-byte table entries,
/// program-counter-relative 4-byte FDE addresses).
fn unwind_range(file: &object::File<'_>, addr: u64) -> Option<u64> {
    use object::ObjectSection;
    let hdr = file.section_by_name(".eh_frame_hdr")?;
    let base = hdr.address();
    let h = hdr.data().ok()?;
    // version 1, table encoding DW_EH_PE_datarel|sdata4, count as udata4
    if h.len() < 12 || h[0] != 1 || h[3] != 0x3b || h[2] != 0x03 {
        return None;
    }
    let count = u32::from_le_bytes(h[8..12].try_into().ok()?) as usize;
    let table = h.get(12..12 + count * 8)?;
    let entry = |i: usize| -> (u64, u64) {
        let r =
            |o: usize| i32::from_le_bytes(table[o..o + 4].try_into().unwrap_or_default()) as i64;
        (
            (base as i64 + r(i * 8)) as u64,
            (base as i64 + r(i * 8 + 4)) as u64,
        )
    };
    let i = (0..count)
        .collect::<Vec<_>>()
        .partition_point(|&i| entry(i).0 < addr);
    if i >= count || entry(i).0 != addr {
        return None;
    }
    let fde = entry(i).1;
    let eh = file.section_by_name(".eh_frame")?;
    let d = eh.data().ok()?;
    let off = fde.checked_sub(eh.address())? as usize;
    let b = d.get(off..off + 16)?;
    // length, CIE pointer, pc_begin (pcrel sdata4), pc_range (sdata4)
    let begin = (fde as i64 + 8 + i32::from_le_bytes(b[8..12].try_into().ok()?) as i64) as u64;
    if begin != addr {
        return None;
    }
    Some(u32::from_le_bytes(b[12..16].try_into().ok()?) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_executable() {
        let exe = std::env::current_exe().unwrap();
        if !cfg!(target_os = "linux") {
            return;
        }
        let img = ElfImage::open(exe.to_str().unwrap()).unwrap();
        assert!(!img.functions.is_empty());
        let f = img.functions[img.functions.len() / 2].clone();
        assert_eq!(img.function_at(f.addr).map(|g| g.addr), Some(f.addr));
        assert!(img.bytes(f.addr, f.size).is_some());
        assert!(img.function(&f.name).is_some());
        assert!(rank(true, false, "malloc") < rank(true, false, "__libc_malloc"));
        assert!(rank(true, false, "b") < rank(false, false, "a"));
    }
}
