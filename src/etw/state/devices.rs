//! Image files by the names the kernel gives them, and their PDB identities read from disk.
//!
//! Kernel Image events name a file by its NT path: `\Device\HarddiskVolume3\Windows\System32\
//! ntdll.dll`, `\SystemRoot\system32\ntoskrnl.exe`, `\??\C:\...`. [`DevicePaths`] turns such a
//! name into a path the file system opens (`C:\Windows\System32\ntdll.dll`), by the drive
//! letters' device names and the system root; the mapping itself is text only, so it holds on
//! every platform. [`ImageIdentities`] remembers the PDB identity found for each file name, so a
//! live session that meets the same image in many processes reads its file once.

use std::collections::HashMap;

use super::PdbInfo;

/// The DOS names of NT device paths: which device each drive letter is, and the system root.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DevicePaths {
    /// (device, drive) pairs: (`\Device\HarddiskVolume3`, `C:`). The drive may be any path
    /// prefix (a folder, in tests).
    devices: Vec<(String, String)>,
    /// What `\SystemRoot` stands for (`C:\Windows`), when known.
    system_root: Option<String>,
}

/// Prefixes after which an NT path holds a DOS path (`\??\C:\x`) or `UNC\server\share`.
const DOS_PREFIXES: [&str; 5] = [r"\??\", r"\\?\", r"\\.\", r"\DosDevices\", r"\GLOBAL??\"];

impl DevicePaths {
    /// Device names with the drive each stands for, and the system root. Trailing separators
    /// of the device names are dropped; empty names are left out.
    pub fn new(devices: Vec<(String, String)>, system_root: Option<String>) -> DevicePaths {
        let devices = devices
            .into_iter()
            .map(|(d, drive)| (d.trim_end_matches(is_separator).to_string(), drive))
            .filter(|(d, drive)| !d.is_empty() && !drive.is_empty())
            .collect();
        DevicePaths {
            devices,
            system_root: system_root.filter(|r| !r.is_empty()),
        }
    }

    /// The (device, drive) pairs known.
    pub fn devices(&self) -> &[(String, String)] {
        &self.devices
    }

    /// What `\SystemRoot` stands for, when known.
    pub fn system_root(&self) -> Option<&str> {
        self.system_root.as_deref()
    }

    /// The DOS path of an NT path: a drive path as it is (`C:\x`); `\??\C:\x`, `\\?\C:\x`
    /// (and `\DosDevices\`, `\GLOBAL??\`, `\\.\`) without the prefix, their `UNC\server\share`
    /// as `\\server\share`; `\SystemRoot\x` under the system root; `\Device\Mup\server\share`
    /// as `\\server\share`; `\Device\HarddiskVolume3\x` under the drive of the longest device
    /// name that ends at a separator of the path. None for any other path, or when the device
    /// or the system root is not known.
    ///
    /// Letter case of the prefixes does not matter; the rest of the path is kept as given, its
    /// separators turned to `/` when the drive or root it goes under is a POSIX folder.
    pub fn to_dos(&self, nt_path: &str) -> Option<String> {
        if is_drive_path(nt_path) {
            return Some(nt_path.to_string());
        }
        // `\\?\GLOBALROOT` is the object namespace's root: an NT path follows
        let rooted;
        let nt_path = match strip_dir_prefix(nt_path, r"\\?\GLOBALROOT") {
            Some(rest) => {
                rooted = format!("\\{rest}");
                rooted.as_str()
            }
            None => nt_path,
        };
        for prefix in DOS_PREFIXES {
            if let Some(rest) = strip_prefix_ci(nt_path, prefix) {
                if is_drive_path(rest) {
                    return Some(rest.to_string());
                }
                return strip_dir_prefix(rest, "UNC")
                    .filter(|unc| !unc.is_empty())
                    .map(|unc| format!(r"\\{unc}"));
            }
        }
        if let Some(rest) = strip_dir_prefix(nt_path, r"\SystemRoot") {
            return Some(join(self.system_root.as_deref()?, rest));
        }
        let device = self
            .devices
            .iter()
            .filter_map(|(d, drive)| Some((d.len(), drive, strip_dir_prefix(nt_path, d)?)))
            .max_by_key(|(len, _, _)| *len);
        if let Some((_, drive, rest)) = device {
            return Some(join(drive, rest));
        }
        strip_dir_prefix(nt_path, r"\Device\Mup")
            .filter(|unc| !unc.is_empty())
            .map(|unc| format!(r"\\{unc}"))
    }

    /// This machine's device paths ([`DevicePaths::system`]), asked once per process; None
    /// where there are none to ask (not Windows).
    pub fn this_machine() -> Option<&'static DevicePaths> {
        #[cfg(windows)]
        {
            static DEVICES: std::sync::OnceLock<DevicePaths> = std::sync::OnceLock::new();
            Some(DEVICES.get_or_init(DevicePaths::system))
        }
        #[cfg(not(windows))]
        {
            None
        }
    }

    /// The device names of this machine's drive letters (QueryDosDevice of each drive
    /// GetLogicalDrives lists; a SUBST drive, whose target is a DOS path, is left out) and its
    /// system root (GetSystemWindowsDirectory: the shared Windows folder, not a terminal
    /// server user's own). What cannot be asked is left out.
    #[cfg(windows)]
    pub fn system() -> DevicePaths {
        use windows_sys::Win32::Storage::FileSystem::{GetLogicalDrives, QueryDosDeviceW};
        use windows_sys::Win32::System::SystemInformation::GetSystemWindowsDirectoryW;

        // SAFETY: no arguments; returns a bit mask.
        let mask = unsafe { GetLogicalDrives() };
        let mut devices = Vec::new();
        let mut buf = vec![0u16; 4096];
        for i in 0..26u8 {
            if mask & (1 << i) == 0 {
                continue;
            }
            let drive = format!("{}:", (b'A' + i) as char);
            let name: Vec<u16> = drive.encode_utf16().chain([0]).collect();
            // SAFETY: a NUL-terminated drive name and a buffer of buf.len() wide chars.
            let n = unsafe { QueryDosDeviceW(name.as_ptr(), buf.as_mut_ptr(), buf.len() as u32) };
            // the answer is a list of NUL-terminated names; the first is the current one
            let Some(first) = buf
                .get(..n as usize)
                .and_then(|b| b.split(|&c| c == 0).next())
            else {
                continue;
            };
            let target = String::from_utf16_lossy(first);
            if !target.is_empty() && strip_prefix_ci(&target, r"\??\").is_none() {
                devices.push((target, drive));
            }
        }
        let mut root = vec![0u16; 260];
        // SAFETY: a buffer of root.len() wide chars.
        let mut n = unsafe { GetSystemWindowsDirectoryW(root.as_mut_ptr(), root.len() as u32) };
        if n as usize > root.len() {
            // too small: n is the size needed, with the NUL
            root.resize(n as usize, 0);
            // SAFETY: as above, with the larger buffer.
            n = unsafe { GetSystemWindowsDirectoryW(root.as_mut_ptr(), root.len() as u32) };
        }
        let system_root = root
            .get(..n as usize)
            .filter(|r| !r.is_empty())
            .map(String::from_utf16_lossy);
        DevicePaths::new(devices, system_root)
    }
}

/// Whether `c` separates the parts of a path.
fn is_separator(c: char) -> bool {
    c == '\\' || c == '/'
}

/// Whether a path starts with a drive letter, a colon and a separator (`C:\`).
fn is_drive_path(path: &str) -> bool {
    let b = path.as_bytes();
    b.len() > 2 && b[0].is_ascii_alphabetic() && b[1] == b':' && matches!(b[2], b'\\' | b'/')
}

/// The rest of `path` after `prefix`, in any letter case.
fn strip_prefix_ci<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    let head = path.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &path[prefix.len()..])
}

/// The rest of `path` after the folder `dir` (in any letter case) and the separator that ends
/// it: `\Device\HarddiskVolume1` is a folder of `\Device\HarddiskVolume1\x`, not of
/// `\Device\HarddiskVolume10\x`.
fn strip_dir_prefix<'a>(path: &'a str, dir: &str) -> Option<&'a str> {
    let rest = strip_prefix_ci(path, dir)?;
    rest.strip_prefix(is_separator)
}

/// `rest` under the folder `root`: joined by `\`, or by `/` with `rest`'s separators turned to
/// `/` when `root` is a POSIX folder (it has a `/` and no `\`).
fn join(root: &str, rest: &str) -> String {
    let posix = root.contains('/') && !root.contains('\\');
    let root = root.trim_end_matches(is_separator);
    if posix {
        format!("{root}/{}", rest.replace('\\', "/"))
    } else {
        format!("{root}\\{rest}")
    }
}

/// The PDB identities found for image files, misses included, so each is looked up once
/// however often the images are asked about.
#[derive(Clone, Debug, Default)]
pub struct ImageIdentities {
    /// By file name in lower case (Windows names ignore case) and the image's link time
    /// stamp as its Image record gives it.
    known: HashMap<(String, u32), Option<PdbInfo>>,
}

impl ImageIdentities {
    /// No names looked up yet.
    pub fn new() -> ImageIdentities {
        ImageIdentities::default()
    }

    /// What is known of the file named `file_name` with link time stamp `stamp`: `None` when
    /// it was never asked about.
    pub fn known(&self, file_name: &str, stamp: u32) -> Option<Option<PdbInfo>> {
        self.known
            .get(&(file_name.to_ascii_lowercase(), stamp))
            .cloned()
    }

    /// Remembers what was found of the file named `file_name` with link time stamp `stamp`.
    pub fn remember(&mut self, file_name: &str, stamp: u32, found: Option<PdbInfo>) {
        self.known
            .insert((file_name.to_ascii_lowercase(), stamp), found);
    }

    /// The PDB identity of the image file named `file_name` whose record gives link time stamp
    /// `stamp`, asking `identify` the first time the name (in any letter case) and stamp are
    /// met.
    pub fn identity(
        &mut self,
        file_name: &str,
        stamp: u32,
        identify: &mut dyn FnMut(&str, u32) -> Option<PdbInfo>,
    ) -> Option<PdbInfo> {
        let key = (file_name.to_ascii_lowercase(), stamp);
        if let Some(known) = self.known.get(&key) {
            return known.clone();
        }
        let found = identify(file_name, stamp);
        self.known.insert(key, found.clone());
        found
    }

    /// How many distinct names were looked up.
    pub fn len(&self) -> usize {
        self.known.len()
    }

    /// Whether no name was looked up yet.
    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> DevicePaths {
        DevicePaths::new(
            vec![
                (r"\Device\HarddiskVolume1".into(), "D:".into()),
                (r"\Device\HarddiskVolume3\".into(), "C:".into()),
                (r"\Device\HarddiskVolume10".into(), "E:".into()),
            ],
            Some(r"C:\Windows".into()),
        )
    }

    #[test]
    fn device_paths_under_their_drive() {
        let p = paths();
        assert_eq!(
            p.to_dos(r"\Device\HarddiskVolume3\Windows\System32\ntdll.dll")
                .as_deref(),
            Some(r"C:\Windows\System32\ntdll.dll")
        );
        // letter case of the device name does not matter; the rest is kept
        assert_eq!(
            p.to_dos(r"\DEVICE\harddiskvolume3\Program Files\App.EXE")
                .as_deref(),
            Some(r"C:\Program Files\App.EXE")
        );
        assert_eq!(
            p.to_dos(r"\Device\HarddiskVolume10\x.dll").as_deref(),
            Some(r"E:\x.dll")
        );
        assert_eq!(
            p.to_dos(r"\Device\HarddiskVolume1\x.dll").as_deref(),
            Some(r"D:\x.dll")
        );
        assert_eq!(p.devices()[1].0, r"\Device\HarddiskVolume3");
    }

    #[test]
    fn near_miss_device_names_do_not_match() {
        let p = DevicePaths::new(vec![(r"\Device\HarddiskVolume1".into(), "D:".into())], None);
        assert_eq!(p.to_dos(r"\Device\HarddiskVolume10\x"), None);
        assert_eq!(p.to_dos(r"\Device\HarddiskVolume1x\x"), None);
        assert_eq!(p.to_dos(r"\Device\HarddiskVolume"), None);
        assert_eq!(p.to_dos(r"\Device\HarddiskVolume2\x"), None);
        assert_eq!(p.to_dos(r"\Device\HarddiskVolume1"), None);
    }

    #[test]
    fn the_longest_device_name_wins() {
        let p = DevicePaths::new(
            vec![
                (r"\Device\Net".into(), "N:".into()),
                (r"\Device\Net\share".into(), "S:".into()),
            ],
            None,
        );
        assert_eq!(p.to_dos(r"\Device\Net\share\a").as_deref(), Some(r"S:\a"));
        assert_eq!(
            p.to_dos(r"\Device\Net\other\a").as_deref(),
            Some(r"N:\other\a")
        );
    }

    #[test]
    fn system_root_paths() {
        let p = paths();
        assert_eq!(
            p.to_dos(r"\SystemRoot\system32\ntoskrnl.exe").as_deref(),
            Some(r"C:\Windows\system32\ntoskrnl.exe")
        );
        assert_eq!(
            p.to_dos(r"\systemroot\System32\drivers\ACPI.sys")
                .as_deref(),
            Some(r"C:\Windows\System32\drivers\ACPI.sys")
        );
        // not a folder of the root
        assert_eq!(p.to_dos(r"\SystemRootX\a.sys"), None);
        // no root known
        let none = DevicePaths::new(Vec::new(), None);
        assert_eq!(none.to_dos(r"\SystemRoot\system32\ntoskrnl.exe"), None);
        let root_sep = DevicePaths::new(Vec::new(), Some(r"C:\Windows\".into()));
        assert_eq!(
            root_sep.to_dos(r"\SystemRoot\a.sys").as_deref(),
            Some(r"C:\Windows\a.sys")
        );
    }

    #[test]
    fn dos_device_prefixes_and_drive_paths() {
        let p = paths();
        for nt in [
            r"\??\C:\Windows\System32\drivers\x.sys",
            r"\\?\C:\Windows\System32\drivers\x.sys",
            r"\DosDevices\C:\Windows\System32\drivers\x.sys",
            r"\GLOBAL??\C:\Windows\System32\drivers\x.sys",
            r"C:\Windows\System32\drivers\x.sys",
        ] {
            assert_eq!(
                p.to_dos(nt).as_deref(),
                Some(r"C:\Windows\System32\drivers\x.sys"),
                "{nt}"
            );
        }
        assert_eq!(p.to_dos("d:/a/b.dll").as_deref(), Some("d:/a/b.dll"));
        assert_eq!(
            p.to_dos(r"\??\UNC\server\share\a.dll").as_deref(),
            Some(r"\\server\share\a.dll")
        );
        assert_eq!(
            p.to_dos(r"\Device\Mup\server\share\a.dll").as_deref(),
            Some(r"\\server\share\a.dll")
        );
        assert_eq!(
            p.to_dos(r"\\?\GLOBALROOT\Device\HarddiskVolume3\a.dll")
                .as_deref(),
            Some(r"C:\a.dll")
        );
        // a volume GUID name, a drive without a separator, unknown forms
        assert_eq!(p.to_dos(r"\??\Volume{1234}\a.dll"), None);
        assert_eq!(p.to_dos(r"\??\C:"), None);
        assert_eq!(p.to_dos("C:"), None);
        assert_eq!(p.to_dos(r"\Windows\System32\a.dll"), None);
        assert_eq!(p.to_dos(r"system32\drivers\a.sys"), None);
        assert_eq!(p.to_dos(""), None);
        assert_eq!(p.to_dos(r"\Device\Mup\"), None);
        // a name cut inside a multi-byte character does not panic
        assert_eq!(p.to_dos("\\Devi\u{e9}"), None);
        assert_eq!(p.to_dos("\u{e9}\u{e9}"), None);
    }

    #[test]
    fn a_posix_folder_as_a_drive() {
        let p = DevicePaths::new(
            vec![(r"\Device\HarddiskVolume9".into(), "/tmp/vol9/".into())],
            Some("/tmp/win".into()),
        );
        assert_eq!(
            p.to_dos(r"\Device\HarddiskVolume9\sub\x.dll").as_deref(),
            Some("/tmp/vol9/sub/x.dll")
        );
        assert_eq!(
            p.to_dos(r"\SystemRoot\system32\k.exe").as_deref(),
            Some("/tmp/win/system32/k.exe")
        );
    }

    #[test]
    fn empty_names_are_left_out() {
        let p = DevicePaths::new(
            vec![
                (String::new(), "C:".into()),
                (r"\".into(), "C:".into()),
                (r"\Device\X".into(), String::new()),
            ],
            Some(String::new()),
        );
        assert!(p.devices().is_empty());
        assert_eq!(p.system_root(), None);
        assert_eq!(p.to_dos(r"\x"), None);
    }

    #[cfg(windows)]
    #[test]
    fn this_machines_drives_and_system_root() {
        let p = DevicePaths::system();
        let root = p.system_root().expect("the system root").to_string();
        let ntdll = p.to_dos(r"\SystemRoot\System32\ntdll.dll").unwrap();
        assert!(std::path::Path::new(&ntdll).is_file(), "{ntdll}");
        // the system drive's device name leads back to the root
        let (drive, folder) = root.split_at(2);
        let (device, _) = p
            .devices()
            .iter()
            .find(|(_, d)| d.eq_ignore_ascii_case(drive))
            .expect("the system drive's device");
        assert_eq!(
            p.to_dos(&format!("{device}{folder}"))
                .map(|r| r.to_lowercase()),
            Some(root.to_lowercase())
        );
    }

    #[test]
    fn identities_are_asked_once_per_name() {
        let info = PdbInfo {
            guid: crate::etw::record::Guid::default(),
            age: 3,
            file_name: "a.pdb".into(),
        };
        let mut asked = Vec::new();
        let mut ids = ImageIdentities::new();
        let mut identify = |name: &str, stamp: u32| {
            asked.push(format!("{name} {stamp}"));
            (name.ends_with("a.dll") && stamp == 7).then(|| info.clone())
        };
        for _ in 0..2 {
            assert_eq!(
                ids.identity(r"C:\a.dll", 7, &mut identify),
                Some(info.clone())
            );
            assert_eq!(
                ids.identity(r"C:\A.DLL", 7, &mut identify),
                Some(info.clone())
            );
            assert_eq!(ids.identity(r"C:\b.dll", 7, &mut identify), None);
            // another build of the same file is another question
            assert_eq!(ids.identity(r"C:\a.dll", 8, &mut identify), None);
        }
        assert_eq!(asked, [r"C:\a.dll 7", r"C:\b.dll 7", r"C:\a.dll 8"]);
        assert_eq!(ids.len(), 3);
        assert!(!ids.is_empty());
    }
}
