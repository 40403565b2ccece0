//! `.pd_` files: a symbol store's compressed PDB is a cabinet file (makecab's MSZIP or LZX)
//! holding the one file. Expanded with the `cab` crate.

use std::io::{Read, Seek, Write};

/// Writes the first file of the cabinet `cab` to `out`, at most `max` bytes (the size the
/// cabinet records is checked first, then what the decoder gives: a cabinet bomb stops at the
/// bound); its size.
pub fn expand<R: Read + Seek>(cab: R, out: &mut dyn Write, max: u64) -> Result<u64, String> {
    // a damaged cabinet from a server must not end the run: the crate's decoders are not
    // promised never to panic on every malformed input
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
        // cut short, or not a cabinet: an error, no panic
        for len in [0, 10, 40, bytes.len() / 2] {
            let mut out = Vec::new();
            assert!(expand(std::io::Cursor::new(&bytes[..len]), &mut out, u64::MAX).is_err());
        }
    }
}
