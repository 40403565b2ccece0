//! Separate debug files: where a distribution keeps the full symbol table of a stripped
//! library (Debian's `libc6-dbg`, `*-dbgsym` packages, Fedora's `debuginfo`). The file is found
//! as GDB finds it (GDB manual, "Debugging Information in Separate Files"): by the image's
//! build id under `/usr/lib/debug/.build-id/xx/rest.debug`, else by its `.gnu_debuglink` name
//! next to the image, in its `.debug` directory, or under `/usr/lib/debug` plus the image's
//! directory. A file found by name must carry the same build id when the image has one.

use std::path::{Path, PathBuf};

use object::Object;

/// The global debug directory.
const DEBUG_DIR: &str = "/usr/lib/debug";

/// `.build-id/xx/rest.debug` for a build id (relative to the debug directory).
pub fn build_id_path(id: &[u8]) -> Option<PathBuf> {
    let (first, rest) = id.split_first()?;
    if rest.is_empty() {
        return None;
    }
    let hex: String = rest.iter().map(|b| format!("{b:02x}")).collect();
    Some(
        Path::new(".build-id")
            .join(format!("{first:02x}"))
            .join(format!("{hex}.debug")),
    )
}

/// The places a debug file named `link` (from `.gnu_debuglink`) of the image at `path` may be.
pub fn debuglink_candidates(path: &Path, link: &str) -> Vec<PathBuf> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let mut v = vec![dir.join(link), dir.join(".debug").join(link)];
    let rel = dir.strip_prefix("/").unwrap_or(dir);
    v.push(Path::new(DEBUG_DIR).join(rel).join(link));
    // the file's own name would be the image itself
    v.retain(|p| p != path);
    v
}

/// The bytes of the debug file of the image at `path` (parsed as `file`), when one is there.
pub fn read_for(path: &Path, file: &object::File<'_>) -> Option<Vec<u8>> {
    let id = file.build_id().ok().flatten();
    if let Some(rel) = id.and_then(build_id_path) {
        if let Ok(b) = std::fs::read(Path::new(DEBUG_DIR).join(rel)) {
            return Some(b);
        }
    }
    let (link, _crc) = file.gnu_debuglink().ok().flatten()?;
    let link = std::str::from_utf8(link).ok()?;
    for p in debuglink_candidates(path, link) {
        let Ok(b) = std::fs::read(&p) else { continue };
        let same = match (id, object::File::parse(&*b).ok()) {
            (Some(id), Some(f)) => f.build_id().ok().flatten() == Some(id),
            (None, Some(_)) => true,
            (_, None) => false,
        };
        if same {
            return Some(b);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_gdbs_layout() {
        assert_eq!(
            build_id_path(&[0x93, 0xac, 0x61, 0x0e]),
            Some(PathBuf::from(".build-id/93/ac610e.debug"))
        );
        assert_eq!(build_id_path(&[0x93]), None);
        assert_eq!(
            debuglink_candidates(Path::new("/usr/lib/x/libz.so.1"), "libz.so.1.debug"),
            vec![
                PathBuf::from("/usr/lib/x/libz.so.1.debug"),
                PathBuf::from("/usr/lib/x/.debug/libz.so.1.debug"),
                PathBuf::from("/usr/lib/debug/usr/lib/x/libz.so.1.debug"),
            ]
        );
    }

    /// Where the C library's debug file is installed (Debian's `libc6-dbg`), the function
    /// that calls `main`, which `.dynsym` does not list, is named.
    #[test]
    fn libc_local_functions_come_from_its_debug_file() {
        let Some(path) = [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
        ]
        .into_iter()
        .find(|p| Path::new(p).exists()) else {
            eprintln!("skipping: no x86-64 libc here");
            return;
        };
        let data = std::fs::read(path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let Some(debug) = read_for(Path::new(path), &file) else {
            eprintln!("skipping: no debug file for {path} (install libc6-dbg)");
            return;
        };
        assert!(object::File::parse(&*debug).is_ok());
        let image = crate::symbols::ElfImage::open(path).unwrap();
        assert!(
            image.function("__libc_start_call_main").is_some(),
            "the debug file's local symbols are read"
        );
        let syms = crate::symbols::elf_table::ElfSymbols::parse_file(path, &data).unwrap();
        let f = image.function("__libc_start_call_main").unwrap();
        assert_eq!(
            syms.lookup(f.addr + 1).map(|(n, _)| n),
            Some("__libc_start_call_main")
        );
    }
}
