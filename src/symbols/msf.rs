//! The MSF container of a PDB ("Microsoft C/C++ MSF 7.00"; LLVM's "The MSF File Format"),
//! checked before `pdb2` reads it: a PDB comes from a trace's machine or a symbol server, and
//! its GUID (in the URL, so anyone can match it) says nothing about its stream sizes. `pdb2`
//! allocates what the stream directory says; here every size is held against the file's own
//! length first, so a lying header is an error, not a gigabyte.

use std::io::{Read, Seek, SeekFrom};

const MAGIC: &[u8] = b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0";

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// Checks the MSF 7.00 header and stream directory of `f`: the block size one MSF allows, the
/// block count within the file, the directory and every stream within the file. Files of the
/// older format (PDB 2.00) are left to `pdb2`, which reads them without such sizes.
pub fn check(f: &std::fs::File) -> Result<(), String> {
    let len = f.metadata().map_err(|e| e.to_string())?.len();
    let mut r = f;
    check_reader(&mut r, len)
}

/// [`check`] over any reader of `len` bytes (the fuzz target's).
pub fn check_reader<R: Read + Seek>(mut r: &mut R, len: u64) -> Result<(), String> {
    r.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
    let mut head = [0u8; 56];
    let n = read_up_to(&mut r, &mut head)?;
    if n < MAGIC.len() || &head[..MAGIC.len()] != MAGIC {
        // not MSF 7.00: pdb2 says what it is
        return Ok(());
    }
    let bad = |what: &str| Err(format!("not a valid PDB: {what}"));
    if n < 56 {
        return bad("its header is cut short");
    }
    let bs = u32_at(&head, 32).unwrap_or(0) as u64;
    let blocks = u32_at(&head, 40).unwrap_or(0) as u64;
    let dir_bytes = u32_at(&head, 44).unwrap_or(0) as u64;
    let map_block = u32_at(&head, 52).unwrap_or(0) as u64;
    if !matches!(bs, 512 | 1024 | 2048 | 4096 | 8192 | 16384 | 32768) {
        return bad("its block size");
    }
    if blocks.saturating_mul(bs) > len.saturating_add(bs) {
        return bad("it claims more blocks than the file holds");
    }
    if dir_bytes > len || dir_bytes < 4 {
        return bad("its stream directory's size");
    }
    let dir_blocks = dir_bytes.div_ceil(bs);
    if dir_blocks * 4 > bs || map_block >= blocks {
        return bad("its stream directory's block map");
    }
    let read_block = |r: &mut &mut R, b: u64, out: &mut Vec<u8>| -> Result<(), String> {
        if b >= blocks || (b + 1) * bs > len.saturating_add(bs) {
            return Err("not a valid PDB: a block outside the file".into());
        }
        r.seek(SeekFrom::Start(b * bs)).map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; bs as usize];
        read_up_to(r, &mut buf)?;
        out.extend_from_slice(&buf);
        Ok(())
    };
    let mut map = Vec::new();
    read_block(&mut r, map_block, &mut map)?;
    let mut dir = Vec::with_capacity(dir_bytes as usize);
    for i in 0..dir_blocks as usize {
        let b = u32_at(&map, i * 4).unwrap_or(u32::MAX) as u64;
        read_block(&mut r, b, &mut dir)?;
    }
    dir.truncate(dir_bytes as usize);
    let streams = u32_at(&dir, 0).unwrap_or(0) as u64;
    if 4 + streams * 4 > dir_bytes {
        return bad("its stream count");
    }
    let mut total_blocks: u64 = 0;
    for i in 0..streams as usize {
        let size = u32_at(&dir, 4 + i * 4).unwrap_or(0);
        if size == u32::MAX {
            // a nil stream
            continue;
        }
        let size = size as u64;
        if size > len {
            return bad("a stream larger than the file");
        }
        total_blocks += size.div_ceil(bs);
    }
    if total_blocks > blocks {
        return bad("its streams need more blocks than the file holds");
    }
    if 4 + streams * 4 + total_blocks * 4 > dir_bytes {
        return bad("its stream directory is shorter than its streams' block lists");
    }
    Ok(())
}

pub(crate) fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> Result<usize, String> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// An MSF file of 4 blocks of 512 bytes: the header, the block map (block 2), the
    /// directory (block 3) naming one stream of `size` bytes in block 1.
    fn msf(size: u32) -> Vec<u8> {
        let bs = 512usize;
        let mut f = vec![0u8; bs * 4];
        f[..MAGIC.len()].copy_from_slice(MAGIC);
        let put =
            |f: &mut Vec<u8>, at: usize, v: u32| f[at..at + 4].copy_from_slice(&v.to_le_bytes());
        put(&mut f, 32, bs as u32);
        put(&mut f, 36, 1);
        put(&mut f, 40, 4);
        put(&mut f, 44, 12);
        put(&mut f, 52, 2);
        put(&mut f, 2 * bs, 3);
        put(&mut f, 3 * bs, 1);
        put(&mut f, 3 * bs + 4, size);
        put(&mut f, 3 * bs + 8, 1);
        f
    }

    fn checked(bytes: &[u8]) -> Result<(), String> {
        let mut t = tempfile::tempfile().unwrap();
        t.write_all(bytes).unwrap();
        check(&t)
    }

    #[test]
    fn hostile_pdb_stream_sizes_are_held_against_the_file() {
        assert_eq!(checked(&msf(100)), Ok(()));
        // a stream of 1 GB in a 2 KB file: refused before anything allocates it
        let e = checked(&msf(1 << 30)).unwrap_err();
        assert!(e.contains("stream larger than the file"), "{e}");
        // cut short, lying counts: errors
        assert!(checked(&msf(100)[..40]).is_err());
        let mut m = msf(100);
        m[40..44].copy_from_slice(&1_000_000u32.to_le_bytes());
        assert!(checked(&m).is_err());
        let mut m = msf(100);
        m[3 * 512..3 * 512 + 4].copy_from_slice(&0x4000_0000u32.to_le_bytes());
        assert!(checked(&m).is_err());
        // not MSF 7.00: for pdb2 to say
        assert_eq!(checked(b"hello"), Ok(()));
    }
}
