//! `.pd_` files: a symbol store's compressed PDB is a cabinet file (makecab's MSZIP or LZX)
//! holding the one file. Expanded with the `cab` crate.

use std::io::{Read, Seek, Write};

/// Writes the first file of the cabinet `cab` to `out`, at most `max` bytes (the size the
/// cabinet records is checked first, then what the decoder gives: a cabinet bomb stops at the
/// bound); its size.
pub fn expand<R: Read + Seek>(mut cab: R, out: &mut dyn Write, max: u64) -> Result<u64, String> {
    single_file_at_start(&mut cab)?;
    // a damaged cabinet from a server must not end the run: the crate's decoders are not
    // promised never to panic on every malformed input; such a panic is caught here, and says
    // nothing on stderr (the error says what happened)
    let _quiet = QuietPanics::enter();
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<u64, String> {
        let mut cabinet = cab::Cabinet::new(cab).map_err(|e| format!("not a cabinet file: {e}"))?;
        let (name, size) = cabinet
            .folder_entries()
            .flat_map(|f| f.file_entries())
            .map(|f| (f.name().to_string(), f.uncompressed_size() as u64))
            .next()
            .ok_or("an empty cabinet file")?;
        let too_big =
            || format!("a cabinet file expanding past {max} bytes (DTX_SYMBOL_MAX_MB): refused");
        if size > max {
            return Err(too_big());
        }
        let reader = cabinet
            .read_file(&name)
            .map_err(|e| format!("cabinet file: {e}"))?;
        // never more than the recorded size, nor the bound
        let mut reader = reader.take(size.min(max) + 1);
        let n = std::io::copy(&mut reader, out).map_err(|e| format!("cabinet file: {e}"))?;
        if n > size {
            return Err(format!(
                "a cabinet file whose file expands past its recorded size ({size} bytes): refused"
            ));
        }
        Ok(n)
    }));
    run.unwrap_or_else(|_| Err("a damaged cabinet file".to_string()))
}

/// A `.pd_` holds one file, at the start of its folder: its CFFILE entry (at `coffFiles`, the
/// header's offset 16; the entry's `uoffFolderStart` at +4) must say offset 0. The `cab`
/// crate indexes past its data blocks for a file that starts beyond them (found by
/// `fuzz/fuzz_targets/symbols.rs`). Layout: Microsoft's Cabinet File Format, CFHEADER and
/// CFFILE. A file too short for the header is left for the crate to call not a cabinet.
fn single_file_at_start<R: Read + Seek>(cab: &mut R) -> Result<(), String> {
    let mut head = [0u8; 32];
    let at = cab.stream_position().map_err(|e| e.to_string())?;
    let n = crate::symbols::msf::read_up_to(cab, &mut head)?;
    let mut entry = [0u8; 8];
    let mut got = 0;
    if n == head.len() && &head[..4] == b"MSCF" {
        let files = u64::from(u32::from_le_bytes([head[16], head[17], head[18], head[19]]));
        cab.seek(std::io::SeekFrom::Start(at + files))
            .map_err(|e| e.to_string())?;
        got = crate::symbols::msf::read_up_to(cab, &mut entry)?;
    }
    cab.seek(std::io::SeekFrom::Start(at))
        .map_err(|e| e.to_string())?;
    if got == entry.len() && entry[4..8] != [0, 0, 0, 0] {
        return Err("a cabinet file whose file does not start its folder: not a .pd_".into());
    }
    Ok(())
}

thread_local! {
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// While held, a panic on this thread prints nothing (the process's panic hook is wrapped
/// once, and passes every other thread's panic to the hook it replaced).
struct QuietPanics(bool);

impl QuietPanics {
    fn enter() -> QuietPanics {
        static HOOK: std::sync::Once = std::sync::Once::new();
        HOOK.call_once(|| {
            let prev = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                if !QUIET.with(|q| q.get()) {
                    prev(info)
                }
            }));
        });
        QuietPanics(QUIET.with(|q| q.replace(true)))
    }
}

impl Drop for QuietPanics {
    fn drop(&mut self) {
        QUIET.with(|q| q.set(self.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cabinet_file_made_here_expands_to_its_file() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut b = cab::CabinetBuilder::new();
        b.add_folder(cab::CompressionType::MsZip).add_file("x.pdb");
        let mut w = b.build(std::io::Cursor::new(Vec::new())).unwrap();
        while let Some(mut f) = w.next_file().unwrap() {
            f.write_all(&data).unwrap();
        }
        let bytes = w.finish().unwrap().into_inner();
        assert!(bytes.len() < data.len());
        let mut out = Vec::new();
        assert_eq!(
            expand(std::io::Cursor::new(&bytes), &mut out, u64::MAX),
            Ok(data.len() as u64)
        );
        assert_eq!(out, data);
        // the bound: refused before a byte is written
        let mut out = Vec::new();
        let e = expand(std::io::Cursor::new(&bytes), &mut out, 1000).unwrap_err();
        assert!(e.contains("DTX_SYMBOL_MAX_MB"), "{e}");
        assert!(out.is_empty());
        // a file that does not start its folder (the crate indexed past its blocks): refused
        let crash = b"MSCF*\0\0\xff\xfd\0\0\0\0\0\0\0\x03\0\0\0v*\x11\0\0\0\x01\0\x01\0\0\0\x01\xcd\0\0\0\0#\0\0\0\0\0";
        let mut out = Vec::new();
        let e = expand(std::io::Cursor::new(&crash[..]), &mut out, u64::MAX).unwrap_err();
        assert!(!e.is_empty());
        // cut short, or not a cabinet: an error, no panic
        for len in [0, 10, 40, bytes.len() / 2] {
            let mut out = Vec::new();
            assert!(expand(std::io::Cursor::new(&bytes[..len]), &mut out, u64::MAX).is_err());
        }
    }
}
