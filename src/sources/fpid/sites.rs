//! What the fpid hooks of a process are, on every platform: the functions of the enabled
//! probes with the probes each fires, and the agent written where the target can load it.

use std::collections::BTreeMap;

use crate::probes::ProbeInfo;
use crate::providers::pid::{PidProvider, SiteKind};
use crate::sources::sink::Sink;

/// Bytes of the ring.
pub const RING_BYTES: usize = 8 << 20;

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

/// Writes the agent next to the system's temporary files (named by its content, so that
/// every dtx of this build shares one copy) and returns its path.
pub fn agent_file(ext: &str) -> Result<String, String> {
    let bytes = super::AGENT;
    if bytes.is_empty() {
        return Err("fpid: this dtx was built without its agent".into());
    }
    // FNV-1a of the content
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let path = std::env::temp_dir().join(format!("dtx-fpid-agent-{hash:016x}.{ext}"));
    if std::fs::read(&path).ok().as_deref() == Some(bytes) {
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
