//! A stand-in PDB for the tests that name addresses by a PDB found on the symbol path: no
//! PDB of a traced machine's images is here, so clang and lld build one from a small C
//! program (the tests skip, saying why, without them).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The PDB of `source` (C, with a `main`) built by clang + lld for x86_64-w64-mingw32 in
/// `dir`, next to its `standin.exe`, or None after saying why.
pub fn clang_pdb(dir: &Path, source: &str) -> Option<PathBuf> {
    let libgcc = Command::new("x86_64-w64-mingw32-gcc")
        .arg("-print-libgcc-file-name")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let Some(libgcc) = libgcc else {
        eprintln!("skipped: x86_64-w64-mingw32-gcc is not installed");
        return None;
    };
    let c = dir.join("standin.c");
    std::fs::write(&c, source).ok()?;
    let pdb = dir.join("standin.pdb");
    let ok = Command::new("clang")
        .args([
            "--target=x86_64-w64-mingw32",
            "-g",
            "-gcodeview",
            "-fuse-ld=lld",
        ])
        .arg(format!("-L{}", Path::new(&libgcc).parent()?.display()))
        .arg(format!("-Wl,--pdb={}", pdb.display()))
        .arg(&c)
        .arg("-o")
        .arg(dir.join("standin.exe"))
        .status()
        .is_ok_and(|s| s.success());
    if !ok || !pdb.is_file() {
        eprintln!("skipped: clang and lld could not build a PDB (apt-get install clang lld)");
        return None;
    }
    Some(pdb)
}

/// A GUID's bytes as a PDB and an RSDS record hold them.
pub fn guid_bytes(g: &dtx::etw::record::Guid) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&g.data1.to_le_bytes());
    b[4..6].copy_from_slice(&g.data2.to_le_bytes());
    b[6..8].copy_from_slice(&g.data3.to_le_bytes());
    b[8..16].copy_from_slice(&g.data4);
    b
}
