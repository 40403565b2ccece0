//! What the fpid hooks of a process are, on every platform: the functions of the enabled
//! probes with the probes each fires, and the agent written where the target can load it.

use std::collections::BTreeMap;

use crate::probes::ProbeInfo;
use crate::providers::pid::{PidProvider, SiteKind};
use crate::sources::sink::Sink;

/// How the ring of a traced process is made: `-x fpidbufsize=SIZE` (bytes, rounded up to a
/// power of two; default 64m), `-x fpidwait=MS` (how long a hit waits for room in a full
/// ring while dtx frees none, before it is dropped; default 100, 0 drops at once).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RingOptions {
    pub bytes: usize,
    pub wait_ms: u64,
}

/// The largest ring (`fpidbufsize`): 4 GiB, which dtx maps whole.
pub const RING_MAX: u64 = 4 << 30;

impl Default for RingOptions {
    fn default() -> RingOptions {
        RingOptions {
            bytes: 64 << 20,
            wait_ms: 100,
        }
    }
}

impl RingOptions {
    /// The options a run's `-x` settings give (see [`RingOptions::check`]).
    pub fn from_options(o: &crate::lang::options::DOptions) -> RingOptions {
        let d = RingOptions::default();
        RingOptions {
            bytes: o
                .int("fpidbufsize")
                .map_or(d.bytes, |b| b.clamp(0, i64::MAX) as usize),
            wait_ms: o.int("fpidwait").map_or(d.wait_ms, |w| w.max(0) as u64),
        }
    }

    /// Refuses a ring larger than [`RING_MAX`].
    pub fn check(self) -> Result<RingOptions, String> {
        if self.bytes as u64 > RING_MAX {
            return Err(format!(
                "fpidbufsize {} is larger than the most fpid can map (4g)",
                self.bytes
            ));
        }
        Ok(self)
    }
}

/// Bytes of stack a record copies for `ustack()` (as the uprobe backend samples).
pub const STACK_BYTES: usize = 8 * 1024;

/// One hooked function and the probes its hits fire.
pub struct HookSite {
    /// Run-time address of its first instruction.
    pub func: u64,
    pub entries: Vec<ProbeInfo>,
    pub returns: Vec<ProbeInfo>,
    /// `arg0` of its return probes: the offset of its `ret` when it has one, else 0.
    pub ret_offset: u64,
}

/// The hooks of a process, by index in the shared hook table.
pub struct Installed {
    pub sites: Vec<HookSite>,
}

/// The hooked functions of the enabled fpid probes of the target, in address order.
pub fn sites(provider: &PidProvider, sink: &dyn Sink, pid: u32) -> Vec<HookSite> {
    let modules = provider.modules_of(pid).unwrap_or_default();
    let mut by_func: BTreeMap<u64, HookSite> = BTreeMap::new();
    for p in provider.probes_of(pid) {
        if !sink.is_enabled(p.info.id) {
            continue;
        }
        let Some(first) = p.sites.first() else {
            continue;
        };
        let func = match first.kind {
            SiteKind::Entry => first.addr,
            _ => {
                let Some(f) = modules.module_at(first.addr).and_then(|m| {
                    let f = m.image.function_at(first.addr.wrapping_sub(m.bias))?;
                    Some(f.addr.wrapping_add(m.bias))
                }) else {
                    continue;
                };
                f
            }
        };
        let site = by_func.entry(func).or_insert_with(|| HookSite {
            func,
            entries: Vec::new(),
            returns: Vec::new(),
            ret_offset: 0,
        });
        match first.kind {
            SiteKind::Entry => site.entries.push(p.info.clone()),
            SiteKind::Return { offset } => {
                if p.sites.len() == 1 {
                    site.ret_offset = offset;
                }
                site.returns.push(p.info.clone());
            }
            SiteKind::Offset => {}
        }
    }
    by_func.into_values().collect()
}

/// Writes the agent into [`agent_dir`] (named by its content, so that every dtx of this build
/// shares one copy) and returns its path.
pub fn agent_file(ext: &str) -> Result<String, String> {
    let bytes = super::AGENT;
    if bytes.is_empty() {
        return Err("fpid: this dtx was built without its agent".into());
    }
    // FNV-1a of the content
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let path = agent_dir()?.join(format!("dtx-fpid-agent-{hash:016x}.{ext}"));
    if std::fs::read(&path).ok().as_deref() == Some(bytes) {
        // a copy found there keeps the folder's DACL, whoever wrote it
        #[cfg(windows)]
        crate::sources::secure_dir::inherit(&path)
            .map_err(|e| format!("fpid: the agent {}: {e}", path.display()))?;
        return Ok(path.to_string_lossy().into_owned());
    }
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    let written = std::fs::write(&tmp, bytes).and_then(|_| {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
        }
        std::fs::rename(&tmp, &path)
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!(
            "fpid: cannot write the agent to {}: {e}",
            path.display()
        ));
    }
    Ok(path.to_string_lossy().into_owned())
}

/// The folder of the agent: the system's temporary folder on Linux. The target loads the file,
/// so it must be able to read it whatever user it runs as.
#[cfg(not(windows))]
fn agent_dir() -> Result<std::path::PathBuf, String> {
    Ok(std::env::temp_dir())
}

/// The folder of the agent on Windows, made with a DACL of its own, inherited by the agent
/// file: SYSTEM and Administrators full control, its owner full control (OWNER RIGHTS), and
/// read and execute for Everyone, ALL APPLICATION PACKAGES and ALL RESTRICTED APPLICATION
/// PACKAGES, so that a service in session 0, an IIS app pool identity, a low-integrity or an
/// AppContainer process can load it (reading needs no integrity above the file's: the default
/// mandatory policy is no-write-up). An elevated dtx uses `%ProgramData%\dtx\fpid` (no
/// standard user can write there: the DACL is protected, nothing inherited from ProgramData),
/// else `%TEMP%\dtx-fpid`. A folder that is a reparse point is refused (a junction planted
/// to send the agent elsewhere). (Microsoft Learn: Security Descriptor String Format,
/// Well-known SIDs, CreateDirectoryW, SetFileSecurityW, Mandatory Integrity Control.)
#[cfg(windows)]
fn agent_dir() -> Result<std::path::PathBuf, String> {
    let (dir, sddl) = if crate::sources::etw_live::windows::is_elevated() {
        let base = std::env::var_os("ProgramData").unwrap_or_else(|| "C:\\ProgramData".into());
        (
            std::path::Path::new(&base).join("dtx").join("fpid"),
            AGENT_DIR_SDDL_ADMIN,
        )
    } else {
        (std::env::temp_dir().join("dtx-fpid"), AGENT_DIR_SDDL)
    };
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("fpid: cannot make {}: {e}", parent.display()))?;
    }
    crate::sources::secure_dir::make(&dir, sddl)
        .map_err(|e| format!("fpid: the agent's folder {}: {e}", dir.display()))?;
    Ok(dir)
}

/// The agent folder's security descriptor (SDDL): protected DACL (P), inherited by files and
/// folders (OICI); FA full access, 0x1200a9 FILE_GENERIC_READ | FILE_GENERIC_EXECUTE; SY
/// SYSTEM, BA Administrators, OW OWNER RIGHTS, WD Everyone, AC ALL APPLICATION PACKAGES,
/// S-1-15-2-2 ALL RESTRICTED APPLICATION PACKAGES. For the user's own `%TEMP%` folder.
#[cfg_attr(not(windows), allow(dead_code))]
pub const AGENT_DIR_SDDL: &str = "D:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICI;FA;;;OW)\
     (A;OICI;0x1200a9;;;WD)(A;OICI;0x1200a9;;;AC)(A;OICI;0x1200a9;;;S-1-15-2-2)";

/// The same for the elevated dtx's `%ProgramData%` folder: its owner only reads and runs (an
/// OWNER RIGHTS entry replaces the owner's implicit WRITE_DAC), so that a folder a standard
/// user made there first gives that user nothing more than anyone.
#[cfg_attr(not(windows), allow(dead_code))]
pub const AGENT_DIR_SDDL_ADMIN: &str = "D:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)\
     (A;OICI;0x1200a9;;;OW)(A;OICI;0x1200a9;;;WD)(A;OICI;0x1200a9;;;AC)\
     (A;OICI;0x1200a9;;;S-1-15-2-2)";
