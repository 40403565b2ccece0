//! Folders and files dtx keeps for the machine (the fpid agent's folder, the sampling
//! interval's ledger) where another user may have been first: a folder made with a security
//! descriptor of ours, one found there refused when it is a reparse point or owned by someone
//! other than SYSTEM or Administrators, and a file replaced whole (a temporary file in the same
//! folder, then moved over it) so that a reader sees the old content or the new, never part.
//! The verdicts are plain functions, tested on any OS; the Windows calls are below them.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Who owns a folder or a kernel object dtx found (GetSecurityInfo's owner SID).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// NT AUTHORITY\SYSTEM (S-1-5-18).
    System,
    /// BUILTIN\Administrators (S-1-5-32-544).
    Administrators,
    /// Anyone else, by SID string.
    Other(String),
}

/// Whether a folder found at a machine-wide place may be used: not a reparse point (a
/// junction or link planted to send dtx's writes elsewhere), a folder, and owned by SYSTEM
/// or Administrators (a folder a standard user made first: its owner may always rewrite its
/// DACL, whatever dtx sets). The reason for a refusal, to be said.
pub fn verdict(reparse_point: bool, is_dir: bool, owner: &Owner) -> Result<(), String> {
    if reparse_point {
        return Err("it is a reparse point (a junction or link): refused".into());
    }
    if !is_dir {
        return Err("it is not a folder: refused".into());
    }
    match owner {
        Owner::System | Owner::Administrators => Ok(()),
        Owner::Other(sid) => Err(format!(
            "it is owned by {sid}, not SYSTEM or Administrators (another user made it): \
             refused; remove it from an elevated prompt"
        )),
    }
}

/// Whether a named kernel object (a mutex) that already existed may be used: owned by SYSTEM
/// or Administrators, as dtx makes it; one another user made first is refused.
pub fn object_verdict(name: &str, owner: &Owner) -> Result<(), String> {
    match owner {
        Owner::System | Owner::Administrators => Ok(()),
        Owner::Other(sid) => Err(format!(
            "the mutex {name} exists and is owned by {sid}, not SYSTEM or Administrators \
             (another user made it): refused"
        )),
    }
}

/// The temporary file [`replace`] writes beside `path` first.
fn temp_beside(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.tmp", std::process::id()));
    path.with_file_name(name)
}

/// Replaces `path` by what `write` writes: into a new temporary file in the same folder,
/// flushed to disk, then moved over `path` (MoveFileExW with MOVEFILE_REPLACE_EXISTING and
/// MOVEFILE_WRITE_THROUGH on Windows, rename(2) elsewhere; Microsoft Learn MoveFileExW). A
/// `write` that fails leaves `path` as it was and no temporary file.
pub fn replace(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let tmp = temp_beside(path);
    let done = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        write(&mut f)?;
        f.flush()?;
        f.sync_all()?;
        drop(f);
        move_over(&tmp, path)
    })();
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

#[cfg(not(windows))]
fn move_over(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::rename(from, to)
}

#[cfg(windows)]
fn move_over(from: &Path, to: &Path) -> std::io::Result<()> {
    use windows_sys::Win32::Storage::FileSystem::{
        MoveFileExW, MOVEFILE_REPLACE_EXISTING, MOVEFILE_WRITE_THROUGH,
    };
    let (a, b) = (sys::wide(from.as_os_str()), sys::wide(to.as_os_str()));
    // SAFETY: two NUL-terminated paths
    let ok = unsafe {
        MoveFileExW(
            a.as_ptr(),
            b.as_ptr(),
            MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH,
        )
    };
    if ok == 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(windows)]
pub use sys::{check, inherit, make, owner_of, with_sddl};

/// The Windows calls (Microsoft Learn: Security Descriptor String Format, Well-known SIDs,
/// CreateDirectoryW, SetFileSecurityW, GetSecurityInfo, IsWellKnownSid, CreateFileW's
/// FILE_FLAG_OPEN_REPARSE_POINT).
#[cfg(windows)]
mod sys {
    use std::path::Path;

    use windows_sys::Win32::Foundation::{LocalFree, ERROR_SUCCESS, HANDLE};
    use windows_sys::Win32::Security::Authorization::{
        ConvertSidToStringSidW, ConvertStringSecurityDescriptorToSecurityDescriptorW,
        GetSecurityInfo, SDDL_REVISION_1, SE_FILE_OBJECT, SE_OBJECT_TYPE,
    };
    use windows_sys::Win32::Security::{
        IsWellKnownSid, SetFileSecurityW, WinBuiltinAdministratorsSid, WinLocalSystemSid,
        DACL_SECURITY_INFORMATION, OWNER_SECURITY_INFORMATION, PROTECTED_DACL_SECURITY_INFORMATION,
        PSECURITY_DESCRIPTOR, PSID, SECURITY_ATTRIBUTES, UNPROTECTED_DACL_SECURITY_INFORMATION,
    };
    use windows_sys::Win32::Storage::FileSystem::{
        CreateDirectoryW, FILE_ATTRIBUTE_REPARSE_POINT, FILE_FLAG_BACKUP_SEMANTICS,
        FILE_FLAG_OPEN_REPARSE_POINT, FILE_READ_ATTRIBUTES, READ_CONTROL,
    };

    use super::Owner;

    pub(super) fn wide(p: &std::ffi::OsStr) -> Vec<u16> {
        use std::os::windows::ffi::OsStrExt;
        p.encode_wide().chain(Some(0)).collect()
    }

    /// Runs `f` with SECURITY_ATTRIBUTES holding the descriptor `sddl` (freed after).
    pub fn with_sddl<T>(
        sddl: &str,
        f: impl FnOnce(&SECURITY_ATTRIBUTES) -> T,
    ) -> Result<T, String> {
        let text = wide(std::ffi::OsStr::new(sddl));
        let mut sd: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
        // SAFETY: a NUL-terminated SDDL string; the descriptor is freed with LocalFree below
        let ok = unsafe {
            ConvertStringSecurityDescriptorToSecurityDescriptorW(
                text.as_ptr(),
                SDDL_REVISION_1,
                &mut sd,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            return Err(format!("bad SDDL: {}", std::io::Error::last_os_error()));
        }
        let sa = SECURITY_ATTRIBUTES {
            nLength: std::mem::size_of::<SECURITY_ATTRIBUTES>() as u32,
            lpSecurityDescriptor: sd,
            bInheritHandle: 0,
        };
        let out = f(&sa);
        // SAFETY: what ConvertStringSecurityDescriptorToSecurityDescriptorW allocated
        unsafe { LocalFree(sd) };
        Ok(out)
    }

    /// The owner of the object `h` (a file or folder: SE_FILE_OBJECT; a mutex:
    /// SE_KERNEL_OBJECT).
    ///
    /// # Safety
    /// `h` is an open handle of an object of kind `kind`, with READ_CONTROL on it.
    pub unsafe fn owner_of(h: HANDLE, kind: SE_OBJECT_TYPE) -> Result<Owner, String> {
        let mut owner: PSID = std::ptr::null_mut();
        let mut sd: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
        // SAFETY: a handle the caller holds; the owner points into `sd`, freed below
        let rc = unsafe {
            GetSecurityInfo(
                h,
                kind,
                OWNER_SECURITY_INFORMATION,
                &mut owner,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut sd,
            )
        };
        if rc != ERROR_SUCCESS {
            return Err(format!(
                "cannot read its owner: {}",
                std::io::Error::from_raw_os_error(rc as i32)
            ));
        }
        let who = if owner.is_null() {
            Owner::Other("nobody".into())
        // SAFETY: a SID GetSecurityInfo gave, valid while `sd` is
        } else if unsafe { IsWellKnownSid(owner, WinLocalSystemSid) } != 0 {
            Owner::System
        // SAFETY: as above
        } else if unsafe { IsWellKnownSid(owner, WinBuiltinAdministratorsSid) } != 0 {
            Owner::Administrators
        } else {
            let mut s: windows_sys::core::PWSTR = std::ptr::null_mut();
            // SAFETY: as above; the string is freed with LocalFree
            let text = if unsafe { ConvertSidToStringSidW(owner, &mut s) } != 0 && !s.is_null() {
                // SAFETY: a NUL-terminated string the conversion allocated
                let len = (0..).take_while(|&i| unsafe { *s.add(i) } != 0).count();
                // SAFETY: `len` u16s read above
                let t = String::from_utf16_lossy(unsafe { std::slice::from_raw_parts(s, len) });
                // SAFETY: what ConvertSidToStringSidW allocated
                unsafe { LocalFree(s.cast()) };
                t
            } else {
                "an unknown SID".into()
            };
            Owner::Other(text)
        };
        // SAFETY: what GetSecurityInfo allocated
        unsafe { LocalFree(sd) };
        Ok(who)
    }

    /// [`super::verdict`] on the folder `dir` as it is (opened without following a reparse
    /// point: its attributes and owner read through the one handle).
    pub fn check(dir: &Path) -> Result<(), String> {
        use std::os::windows::fs::{MetadataExt, OpenOptionsExt};
        use std::os::windows::io::AsRawHandle;
        let f = std::fs::OpenOptions::new()
            .access_mode(READ_CONTROL | FILE_READ_ATTRIBUTES)
            .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
            .open(dir)
            .map_err(|e| format!("cannot open it: {e}"))?;
        let m = f.metadata().map_err(|e| format!("cannot read it: {e}"))?;
        // SAFETY: the folder's handle, opened with READ_CONTROL, alive for the call
        let owner = unsafe { owner_of(f.as_raw_handle(), SE_FILE_OBJECT) }?;
        super::verdict(
            m.file_attributes() & FILE_ATTRIBUTE_REPARSE_POINT != 0,
            m.is_dir(),
            &owner,
        )
    }

    /// Makes `dir` with the descriptor `sddl`, or gives an existing one that descriptor's
    /// DACL; a reparse point (junction, symbolic link) is refused.
    pub fn make(dir: &Path, sddl: &str) -> Result<(), String> {
        if let Ok(m) = std::fs::symlink_metadata(dir) {
            use std::os::windows::fs::MetadataExt;
            if m.file_attributes() & FILE_ATTRIBUTE_REPARSE_POINT != 0 {
                return Err("it is a reparse point (a junction or link): refused".into());
            }
            if !m.is_dir() {
                return Err("it is not a folder".into());
            }
        }
        let path = wide(dir.as_os_str());
        with_sddl(sddl, |sa| {
            // SAFETY: a NUL-terminated path; the attributes point at a valid descriptor
            let made = unsafe { CreateDirectoryW(path.as_ptr(), sa) } != 0;
            if made {
                return Ok(());
            }
            // it exists (checked above, or made meanwhile): our DACL on it, protected
            // SAFETY: as above; the descriptor has a DACL
            let set = unsafe {
                SetFileSecurityW(
                    path.as_ptr(),
                    DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION,
                    sa.lpSecurityDescriptor,
                )
            } != 0;
            if set || !dir.is_dir() {
                dir.is_dir()
                    .then_some(())
                    .ok_or_else(|| std::io::Error::last_os_error().to_string())
            } else {
                Err(format!(
                    "cannot set its DACL: {}",
                    std::io::Error::last_os_error()
                ))
            }
        })?
    }

    /// Gives the file `path` an empty DACL of its own that inherits its folder's (an
    /// unprotected, empty DACL set with SetFileSecurityW is filled by inheritance): what a
    /// file found in our folder, written by whoever, may do is what the folder says.
    pub fn inherit(path: &Path) -> Result<(), String> {
        let p = wide(path.as_os_str());
        with_sddl("D:AI", |sa| {
            // SAFETY: a NUL-terminated path and a valid descriptor
            let set = unsafe {
                SetFileSecurityW(
                    p.as_ptr(),
                    DACL_SECURITY_INFORMATION | UNPROTECTED_DACL_SECURITY_INFORMATION,
                    sa.lpSecurityDescriptor,
                )
            } != 0;
            set.then_some(())
                .ok_or_else(|| format!("cannot set its DACL: {}", std::io::Error::last_os_error()))
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Finding 6 of issue 42: a ledger folder a standard user planted (a junction, a file, a
    /// folder they own) is refused, naming why; SYSTEM's and Administrators' are used.
    #[test]
    fn win3_6_a_planted_folder_is_refused_by_owner_and_reparse_point() {
        assert_eq!(verdict(false, true, &Owner::System), Ok(()));
        assert_eq!(verdict(false, true, &Owner::Administrators), Ok(()));
        let user = Owner::Other("S-1-5-21-1-2-3-1001".into());
        let e = verdict(false, true, &user).expect_err("a user's folder");
        assert!(
            e.contains("S-1-5-21-1-2-3-1001") && e.contains("refused"),
            "{e}"
        );
        let e = verdict(true, true, &Owner::Administrators).expect_err("a junction");
        assert!(e.contains("reparse point"), "{e}");
        assert!(verdict(false, false, &Owner::System).is_err());
        assert_eq!(object_verdict("Global\\m", &Owner::Administrators), Ok(()));
        let e = object_verdict("Global\\m", &user).expect_err("a user's mutex");
        assert!(
            e.contains("Global\\m") && e.contains("S-1-5-21-1-2-3-1001"),
            "{e}"
        );
    }

    /// The ledger is replaced whole: a write that fails halfway leaves the old content and no
    /// temporary file; one that succeeds leaves the new content only.
    #[test]
    fn win3_6_a_ledger_write_leaves_the_old_content_or_the_new() {
        let dir = std::env::temp_dir().join(format!("dtx-replace-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp folder");
        let path = dir.join("ledger.txt");
        std::fs::write(&path, "old content\n").expect("old");
        let failed = replace(&path, |f| {
            f.write_all(b"new")?;
            Err(std::io::Error::other("the disk filled"))
        });
        assert!(failed.is_err());
        assert_eq!(
            std::fs::read_to_string(&path).ok().as_deref(),
            Some("old content\n")
        );
        replace(&path, |f| f.write_all(b"new content\n")).expect("replaced");
        assert_eq!(
            std::fs::read_to_string(&path).ok().as_deref(),
            Some("new content\n")
        );
        let left: Vec<_> = std::fs::read_dir(&dir)
            .expect("list")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("ledger.txt")]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
