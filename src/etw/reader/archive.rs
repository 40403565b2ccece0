//! `.etl` files inside `.zip` archives: `open_path("x.zip")` picks the single `.etl` member (or
//! says which ones there are), `open_path("x.zip:member.etl")` selects one. `open_path("demo")`
//! opens the trace built into dtx ([`DEMO`]).

use std::io::{Read, Seek};
use std::path::Path;

use super::{EtlError, EtlFile};

const ZIP_MAGIC: &[u8] = b"PK\x03\x04";
const SEVEN_Z_MAGIC: &[u8] = b"7z\xBC\xAF\x27\x1C";
/// Members larger than this are refused (default 8 GiB; `DTX_ZIP_MAX_MB`), before either way
/// of unpacking, and a member is never unpacked past the size its entry records (a zip bomb
/// that records a small size and inflates to gigabytes stops there).
fn max_member() -> u64 {
    std::env::var("DTX_ZIP_MAX_MB")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0)
        .map_or(8 << 30, |mb| (mb * 1048576.0) as u64)
}

fn err(file: &str, message: impl Into<String>) -> EtlError {
    EtlError {
        file: file.to_string(),
        offset: 0,
        message: message.into(),
    }
}

/// The name `-E` gives the trace built into dtx (`dtx --demo`, `dtx -E demo`): the xperf trace of
/// a slow PowerPoint on Windows 7 (`assets/demo/`, Apache-2.0, credited in NOTICE), kept as the
/// zip archive it was published as. It names every process and has CPU samples with stacks,
/// context switches, disk I/O, interrupts and DPCs. A file of this name is read as `./demo`.
pub const DEMO: &str = "demo";

/// The archive of the built-in trace, in the binary: no file is needed beside dtx.
static DEMO_ZIP: &[u8] = include_bytes!("../../../assets/demo/slow-ppt-trace.etl.zip");

/// Whether `spec` names the built-in trace.
pub fn is_demo(spec: &str) -> bool {
    spec == DEMO
}

/// Opens the built-in trace, unpacked into memory.
fn open_demo() -> Result<EtlFile, EtlError> {
    let mut z = zip::ZipArchive::new(std::io::Cursor::new(DEMO_ZIP))
        .map_err(|e| err(DEMO, format!("the built-in trace is not readable: {e}")))?;
    let member = z
        .file_names()
        .find(|n| n.to_ascii_lowercase().ends_with(".etl"))
        .map(str::to_string)
        .ok_or_else(|| err(DEMO, "the built-in archive holds no .etl file"))?;
    read_member(&mut z, DEMO, &member, DEMO.to_string())
}

/// Splits `archive.zip:member` (case-insensitive `.zip:`); a Windows drive colon is not a split.
pub fn split_member(spec: &str) -> (&str, Option<&str>) {
    let lower = spec.to_ascii_lowercase();
    match lower.find(".zip:") {
        Some(i) => (&spec[..i + 4], Some(&spec[i + 5..])),
        None => (spec, None),
    }
}

fn magic(path: &Path) -> Result<[u8; 6], std::io::Error> {
    let mut m = [0u8; 6];
    let mut f = std::fs::File::open(path)?;
    let mut n = 0;
    while n < m.len() {
        let k = f.read(&mut m[n..])?;
        if k == 0 {
            break;
        }
        n += k;
    }
    Ok(m)
}

/// Opens an `.etl` file, a `.zip` holding one, or `archive.zip:member.etl`.
pub fn open_path(spec: &str) -> Result<EtlFile, EtlError> {
    if is_demo(spec) {
        return open_demo();
    }
    let (archive, member) = split_member(spec);
    if let Some(member) = member {
        return open_zip_member(archive, member);
    }
    let path = Path::new(spec);
    let m = magic(path).map_err(|e| err(spec, e.to_string()))?;
    if m.starts_with(ZIP_MAGIC) {
        let members = zip_etl_members(spec)?;
        return match members.as_slice() {
            [one] => open_zip_member(spec, one),
            [] => Err(err(spec, "the zip archive holds no .etl file")),
            many => Err(err(
                spec,
                format!(
                    "the zip archive holds {} .etl files; pick one as {spec}:MEMBER: {}",
                    many.len(),
                    many.join(", ")
                ),
            )),
        };
    }
    if m == SEVEN_Z_MAGIC {
        return Err(err(
            spec,
            "7z archives are not supported; unpack the .etl first (7z x)",
        ));
    }
    EtlFile::open(path)
}

fn open_zip(path: &str) -> Result<zip::ZipArchive<std::fs::File>, EtlError> {
    let f = std::fs::File::open(path).map_err(|e| err(path, e.to_string()))?;
    zip::ZipArchive::new(f).map_err(|e| err(path, format!("not a readable zip archive: {e}")))
}

/// The `.etl` members of a zip archive, in archive order.
pub fn zip_etl_members(path: &str) -> Result<Vec<String>, EtlError> {
    let z = open_zip(path)?;
    Ok(z.file_names()
        .filter(|n| n.to_ascii_lowercase().ends_with(".etl"))
        .map(str::to_string)
        .collect())
}

/// Reads one member of a zip archive into memory and opens it.
pub fn open_zip_member(path: &str, member: &str) -> Result<EtlFile, EtlError> {
    let name = format!("{path}:{member}");
    let mut z = open_zip(path)?;
    read_member(&mut z, path, member, name)
}

/// Unpacks `member` of an open archive (`path` for errors) into an [`EtlFile`] called `name`.
fn read_member<R: Read + Seek>(
    z: &mut zip::ZipArchive<R>,
    path: &str,
    member: &str,
    name: String,
) -> Result<EtlFile, EtlError> {
    let f = z.by_name(member).map_err(|e| {
        let e = format!("no member {member:?} ({e})");
        err(path, e)
    })?;
    let size = f.size();
    let max = max_member();
    if size > max {
        return Err(err(
            &name,
            format!("member too large to unpack: {size} bytes, more than {max} (DTX_ZIP_MAX_MB)"),
        ));
    }
    let past = || {
        err(
            &name,
            format!(
                "the member inflates past the {size} bytes its entry records: a damaged archive"
            ),
        )
    };
    // never more than the recorded size: one byte past it is the sign of a lie
    let mut f = f.take(size + 1);
    // a large member is unpacked as a stream into a temporary file that is then mapped, as a
    // plain trace is: the walk's pages are released behind it (`EtlFile::done_with`), so the
    // member's size is disk, not memory
    if size >= super::RELEASE_PAGES_ABOVE as u64 {
        let file = unpack_to_file(&mut f).map_err(|e| err(&name, format!("cannot unpack: {e}")))?;
        if file.metadata().map_or(0, |m| m.len()) > size {
            return Err(past());
        }
        return EtlFile::from_file_named(name, &file);
    }
    let mut bytes = Vec::with_capacity(size as usize);
    f.read_to_end(&mut bytes)
        .map_err(|e| err(&name, format!("cannot unpack: {e}")))?;
    if bytes.len() as u64 > size {
        return Err(past());
    }
    EtlFile::from_bytes_named(name, bytes)
}

/// Unpacks `member` into a temporary file that is gone when the returned handle is closed
/// (unlinked at once on Unix; delete-on-close on Windows), in the system's temporary
/// directory.
fn unpack_to_file(member: &mut impl Read) -> std::io::Result<std::fs::File> {
    let dir = std::env::temp_dir();
    let mut n = 0u32;
    let (mut file, path) = loop {
        let path = dir.join(format!("dtx-unpacked-{}-{n}.etl", std::process::id()));
        let mut o = std::fs::OpenOptions::new();
        o.read(true).write(true).create_new(true);
        #[cfg(windows)]
        {
            use std::os::windows::fs::OpenOptionsExt;
            // FILE_FLAG_DELETE_ON_CLOSE, shared for delete so that the map can open it
            o.custom_flags(0x0400_0000).share_mode(0x7);
        }
        match o.open(&path) {
            Ok(f) => break (f, path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
            Err(e) => return Err(e),
        }
    };
    #[cfg(unix)]
    let _ = std::fs::remove_file(&path);
    #[cfg(not(unix))]
    let _ = &path;
    std::io::copy(
        member,
        &mut std::io::BufWriter::with_capacity(1 << 20, &mut file),
    )?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::{open_path, split_member, DEMO};

    #[test]
    fn the_demo_trace_is_built_in() {
        // no file: the bytes are in the binary
        let etl = open_path(DEMO).unwrap();
        assert_eq!(etl.name(), DEMO);
        assert!(etl.bytes().len() > 30 << 20, "{}", etl.bytes().len());
    }

    #[test]
    fn member_split() {
        assert_eq!(split_member("a/b.zip:c.etl"), ("a/b.zip", Some("c.etl")));
        assert_eq!(
            split_member("C:\\x\\b.ZIP:d/c.etl"),
            ("C:\\x\\b.ZIP", Some("d/c.etl"))
        );
        assert_eq!(split_member("C:\\x\\b.etl"), ("C:\\x\\b.etl", None));
    }
}
