//! The extent of ready-to-run (R2R) method bodies, read from the R2R image itself: the runtime's
//! R2RGetEntryPoint event gives a precompiled method's entry point but not its size, and a
//! `return` probe needs the body's end.
//!
//! The layout followed (dotnet/runtime's docs/design/coreclr/botr/readytorun-format.md, and
//! `src/coreclr/inc/readytorun.h`): an R2R image is a PE file whose CLI header (data directory
//! 14, ECMA-335 II.25.3.3) has its `ManagedNativeHeader` directory (offset 64 of the CLI header)
//! pointing at a READYTORUN_HEADER: `Signature` 0x00525452 ("RTR"), `MajorVersion`,
//! `MinorVersion`, `Flags`, `NumberOfSections`, then that many READYTORUN_SECTION entries
//! {`Type`, `Section` (RVA, size)}. The section of type 102 (RuntimeFunctions) is the image's
//! table of x64 RUNTIME_FUNCTION entries {`BeginAddress`, `EndAddress`, `UnwindData`} (RVAs,
//! Microsoft Learn's RUNTIME_FUNCTION), sorted by `BeginAddress`. A method's entry point is the
//! `BeginAddress` of its main body; its funclets (catch, finally, filter) are entries of their
//! own that follow it, so the body is `[BeginAddress, EndAddress)` of the entry that starts at
//! the entry point.
//!
//! The same reader serves a file on disk (RVAs mapped to file offsets by the section table) and
//! an image mapped in a process (RVAs read from the base); the table's layout is the same on
//! Linux, whose R2R images mark their machine with an OS override (`pedecoder.h`'s
//! IMAGE_FILE_MACHINE_NATIVE_OS_OVERRIDE, xor-ed into the PE machine).

/// One RUNTIME_FUNCTION of an x64 image (RVAs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuntimeFunction {
    pub begin: u32,
    pub end: u32,
    pub unwind: u32,
}

/// The RuntimeFunctions table of an R2R image.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct R2rImage {
    /// By `begin`, as the image stores them.
    pub functions: Vec<RuntimeFunction>,
    /// READYTORUN_HEADER's (major, minor) version.
    pub version: (u16, u16),
}

/// The READYTORUN_HEADER signature, "RTR".
pub const SIGNATURE: u32 = 0x0052_5452;
/// READYTORUN_SECTION type of the RuntimeFunctions table.
pub const RUNTIME_FUNCTIONS: u32 = 102;
/// IMAGE_FILE_MACHINE_AMD64.
const AMD64: u16 = 0x8664;
/// The OS overrides xor-ed into the machine of a non-Windows R2R image (pedecoder.h: Apple,
/// FreeBSD, Linux, NetBSD, SunOS).
const OS_OVERRIDES: [u16; 5] = [0x4644, 0xADC4, 0x7B79, 0x1993, 0x1992];
/// A table larger than this is not taken (a corrupt size).
const MAX_TABLE: u32 = 64 << 20;
/// The size of an x64 RUNTIME_FUNCTION.
const ENTRY: u32 = 12;

impl R2rImage {
    /// The body whose entry point is at `rva`: `[begin, end)`, or None when no entry starts
    /// there (not a method's entry point in this image).
    pub fn body_at(&self, rva: u32) -> Option<(u32, u32)> {
        let i = self
            .functions
            .binary_search_by_key(&rva, |f| f.begin)
            .ok()?;
        let f = self.functions[i];
        (f.end > f.begin).then_some((f.begin, f.end))
    }

    /// Reads the table of an image through `read(rva, buf)`, which fills `buf` from the image's
    /// RVA `rva` (false when it cannot). An error says why the image has no table dtx reads
    /// (not PE, not x64, not ready-to-run, a component of a composite image, corrupt).
    pub fn read(read: &dyn Fn(u32, &mut [u8]) -> bool) -> Result<R2rImage, String> {
        let get = |rva: u32, n: usize| -> Result<Vec<u8>, String> {
            let mut b = vec![0u8; n];
            if read(rva, &mut b) {
                Ok(b)
            } else {
                Err(format!("cannot read {n} bytes at RVA 0x{rva:x}"))
            }
        };
        let dos = get(0, 0x40)?;
        if &dos[0..2] != b"MZ" {
            return Err("not a PE image".into());
        }
        let pe = u32_at(&dos, 0x3c);
        let hdr = get(pe, NT_HEADERS)?;
        let cli_rva = cli_header_rva(&hdr)?;
        let machine = u16_at(&hdr, 4);
        if machine != AMD64 && !OS_OVERRIDES.iter().any(|o| machine ^ o == AMD64) {
            return Err(format!(
                "machine 0x{machine:04x} is not x64: its RUNTIME_FUNCTIONs have no end"
            ));
        }
        let cli = get(cli_rva, 72)?;
        let (native_rva, native_size) = (u32_at(&cli, 64), u32_at(&cli, 68));
        if native_rva == 0 || native_size < 16 {
            return Err("no ManagedNativeHeader: IL only, not ready-to-run".into());
        }
        let head = get(native_rva, 16)?;
        if u32_at(&head, 0) != SIGNATURE {
            return Err("the ManagedNativeHeader is not a READYTORUN_HEADER".into());
        }
        let version = (u16_at(&head, 4), u16_at(&head, 6));
        let sections = u32_at(&head, 12).min(1024);
        let list = get(native_rva + 16, sections as usize * 12)?;
        let Some(s) = list
            .chunks_exact(12)
            .find(|s| u32_at(s, 0) == RUNTIME_FUNCTIONS)
        else {
            return Err(
                "the READYTORUN_HEADER has no RuntimeFunctions section (a component of a composite image?)"
                    .into(),
            );
        };
        let (rva, size) = (u32_at(s, 4), u32_at(s, 8));
        if size > MAX_TABLE || size % ENTRY != 0 {
            return Err(format!("a RuntimeFunctions section of {size} bytes"));
        }
        let table = get(rva, size as usize)?;
        let functions = table
            .chunks_exact(ENTRY as usize)
            .map(|e| RuntimeFunction {
                begin: u32_at(e, 0),
                end: u32_at(e, 4),
                unwind: u32_at(e, 8),
            })
            .collect();
        Ok(R2rImage { functions, version })
    }

    /// The table of the R2R image in `file` (a PE file's bytes as on disk).
    pub fn from_file(file: &[u8]) -> Result<R2rImage, String> {
        let sections = file_sections(file);
        R2rImage::read(&|rva, buf| {
            let Some(at) = file_offset(&sections, rva) else {
                return false;
            };
            match file.get(at..at + buf.len()) {
                Some(b) => {
                    buf.copy_from_slice(b);
                    true
                }
                None => false,
            }
        })
    }

    /// The table of the R2R image at `path`.
    pub fn from_path(path: &str) -> Result<R2rImage, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        R2rImage::from_file(&bytes).map_err(|e| format!("{path}: {e}"))
    }
}

/// (VirtualAddress, VirtualSize, PointerToRawData, SizeOfRawData) of a PE file's sections.
fn file_sections(file: &[u8]) -> Vec<(u32, u32, u32, u32)> {
    let pe = file.get(0x3c..0x40).map_or(0, |b| u32_at(b, 0)) as usize;
    let Some(hdr) = file.get(pe..pe + 24) else {
        return Vec::new();
    };
    let n = u16_at(hdr, 6) as usize;
    let table = pe + 24 + u16_at(hdr, 20) as usize;
    (0..n)
        .filter_map(|i| file.get(table + i * 40..table + i * 40 + 40))
        .map(|s| (u32_at(s, 12), u32_at(s, 8), u32_at(s, 20), u32_at(s, 16)))
        .collect()
}

/// The file offset of an RVA: in the section that holds it, else (the headers, before the
/// first section) the RVA itself.
fn file_offset(sections: &[(u32, u32, u32, u32)], rva: u32) -> Option<usize> {
    for &(va, vsize, raw, rawsize) in sections {
        let len = vsize.max(rawsize);
        if rva >= va && rva - va < len {
            let o = rva - va;
            // past the raw data: zero-filled in memory, absent from the file
            return (o < rawsize).then(|| (raw + o) as usize);
        }
    }
    let first = sections.iter().map(|s| s.0).min().unwrap_or(u32::MAX);
    (rva < first).then_some(rva as usize)
}

/// The bytes of a PE image's NT headers up to and including data directory 14 (PE32+: the
/// signature and file header, 24 bytes, the optional header's 112 before its directories, and
/// 15 directories of 8 bytes).
const NT_HEADERS: usize = 24 + 112 + 15 * 8;

/// The RVA of a PE image's CLI header: its data directory 14 (ECMA-335 II.25.3.3; Microsoft
/// Learn's "PE Format", Optional Header Data Directories), from `nt`, the image's bytes from
/// its `PE\0\0` signature on. An error says why there is none (not PE, no CLI header: a
/// native image). Bytes past the end of `nt` read as 0.
pub fn cli_header_rva(nt: &[u8]) -> Result<u32, String> {
    if nt.get(0..4) != Some(b"PE\0\0") {
        return Err("not a PE image".into());
    }
    let opt = 24usize;
    // PE32+: the data directories start at +112, PE32 at +96; 8 bytes each
    let (count_at, dirs) = match u16_at(nt, opt) {
        0x20b => (opt + 108, opt + 112),
        0x10b => (opt + 92, opt + 96),
        m => return Err(format!("optional header magic 0x{m:x}")),
    };
    let rva = match u32_at(nt, count_at) {
        0..=14 => 0,
        _ => u32_at(nt, dirs + 14 * 8),
    };
    if rva == 0 {
        return Err("no CLI header: not a .NET assembly".into());
    }
    Ok(rva)
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    b.get(o..o + 2)
        .map_or(0, |x| u16::from_le_bytes([x[0], x[1]]))
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    b.get(o..o + 4)
        .map_or(0, |x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
}

/// A small R2R image laid out as on disk, for tests: headers, one section (`.text` at RVA
/// 0x1000, file offset 0x400) holding the CLI header, the READYTORUN_HEADER, the
/// RuntimeFunctions table of `functions`, and `code` at RVA 0x2000.
#[cfg(test)]
pub(crate) fn synthetic_image(machine: u16, functions: &[(u32, u32)], code: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 0x400];
    f[0..2].copy_from_slice(b"MZ");
    let pe = 0x80usize;
    f[0x3c..0x40].copy_from_slice(&(pe as u32).to_le_bytes());
    f[pe..pe + 4].copy_from_slice(b"PE\0\0");
    f[pe + 4..pe + 6].copy_from_slice(&machine.to_le_bytes());
    f[pe + 6..pe + 8].copy_from_slice(&1u16.to_le_bytes());
    f[pe + 20..pe + 22].copy_from_slice(&240u16.to_le_bytes());
    let opt = pe + 24;
    f[opt..opt + 2].copy_from_slice(&0x20bu16.to_le_bytes());
    f[opt + 108..opt + 112].copy_from_slice(&16u32.to_le_bytes());
    // data directory 14: the CLI header at RVA 0x1000
    let d14 = opt + 112 + 14 * 8;
    f[d14..d14 + 4].copy_from_slice(&0x1000u32.to_le_bytes());
    f[d14 + 4..d14 + 8].copy_from_slice(&72u32.to_le_bytes());
    // the one section: RVA 0x1000, 0x2000 bytes, at file offset 0x400
    let s = opt + 240;
    f[s..s + 5].copy_from_slice(b".text");
    f[s + 8..s + 12].copy_from_slice(&0x2000u32.to_le_bytes());
    f[s + 12..s + 16].copy_from_slice(&0x1000u32.to_le_bytes());
    f[s + 16..s + 20].copy_from_slice(&0x2000u32.to_le_bytes());
    f[s + 20..s + 24].copy_from_slice(&0x400u32.to_le_bytes());
    let mut text = vec![0u8; 0x2000];
    // CLI header at 0x1000: cb, then ManagedNativeHeader at +64 → 0x1100
    text[0..4].copy_from_slice(&72u32.to_le_bytes());
    text[64..68].copy_from_slice(&0x1100u32.to_le_bytes());
    text[68..72].copy_from_slice(&28u32.to_le_bytes());
    // READYTORUN_HEADER at 0x1100: one section, RuntimeFunctions at 0x1200
    let h = 0x100;
    text[h..h + 4].copy_from_slice(&SIGNATURE.to_le_bytes());
    text[h + 4..h + 6].copy_from_slice(&4u16.to_le_bytes());
    text[h + 12..h + 16].copy_from_slice(&1u32.to_le_bytes());
    text[h + 16..h + 20].copy_from_slice(&RUNTIME_FUNCTIONS.to_le_bytes());
    text[h + 20..h + 24].copy_from_slice(&0x1200u32.to_le_bytes());
    text[h + 24..h + 28].copy_from_slice(&(functions.len() as u32 * ENTRY).to_le_bytes());
    for (i, (b, e)) in functions.iter().enumerate() {
        let at = 0x200 + i * 12;
        text[at..at + 4].copy_from_slice(&b.to_le_bytes());
        text[at + 4..at + 8].copy_from_slice(&e.to_le_bytes());
        text[at + 8..at + 12].copy_from_slice(&0x1f00u32.to_le_bytes());
    }
    let n = code.len().min(0x1000);
    text[0x1000..0x1000 + n].copy_from_slice(&code[..n]);
    f.extend(text);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_synthetic_image_gives_its_table_and_bodies() {
        // two methods at 0x2000 and 0x2010, a funclet of the second at 0x2020
        let code = [
            0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // first
            0x55, 0x31, 0xc0, 0x5d, 0xc3, 0x90, 0x5d, 0xc3, 0, 0, 0, 0, 0, 0, 0, 0,    // second
            0xc3, // funclet
        ];
        let fns = [(0x2000, 0x2006), (0x2010, 0x2018), (0x2020, 0x2021)];
        for machine in [AMD64, AMD64 ^ 0x7B79] {
            let img = synthetic_image(machine, &fns, &code);
            let t = R2rImage::from_file(&img).expect("table");
            assert_eq!(t.version, (4, 0));
            assert_eq!(t.functions.len(), 3);
            assert_eq!(t.body_at(0x2010), Some((0x2010, 0x2018)));
            assert_eq!(t.body_at(0x2000), Some((0x2000, 0x2006)));
            // inside a body, or no entry there
            assert_eq!(t.body_at(0x2011), None);
            assert_eq!(t.body_at(0x3000), None);
            // the second body's returns, decoded from the file's bytes at its RVA
            let (b, e) = t.body_at(0x2010).expect("body");
            let sections = file_sections(&img);
            let at = file_offset(&sections, b).expect("offset");
            let body = &img[at..at + (e - b) as usize];
            let rets = crate::symbols::decode::function(body, b as u64)
                .iter()
                .filter(|i| i.returns)
                .count();
            assert_eq!(rets, 2);
        }
    }

    #[test]
    fn images_without_a_table_say_why() {
        let fns = [(0x2000, 0x2006)];
        // ARM64 (no EndAddress in its RUNTIME_FUNCTIONs)
        let e = R2rImage::from_file(&synthetic_image(0xaa64, &fns, &[])).unwrap_err();
        assert!(e.contains("not x64"), "{e}");
        // IL only: no ManagedNativeHeader
        let mut il = synthetic_image(AMD64, &fns, &[]);
        il[0x400 + 64..0x400 + 72].fill(0);
        let e = R2rImage::from_file(&il).unwrap_err();
        assert!(e.contains("not ready-to-run"), "{e}");
        // a bad signature, a table of no section type 102, a truncated file
        let mut bad = synthetic_image(AMD64, &fns, &[]);
        bad[0x500] = 0;
        assert!(R2rImage::from_file(&bad).is_err());
        let mut none = synthetic_image(AMD64, &fns, &[]);
        none[0x510] = 7;
        let e = R2rImage::from_file(&none).unwrap_err();
        assert!(e.contains("no RuntimeFunctions"), "{e}");
        let whole = synthetic_image(AMD64, &fns, &[]);
        assert!(R2rImage::from_file(&whole[..0x500]).is_err());
        assert!(R2rImage::from_file(b"not a PE").is_err());
        assert!(R2rImage::from_file(&[]).is_err());
    }
}
