//! Puts the fpid hooks into a stopped Linux target: the agent written to a file and loaded by a
//! call of the target's `dlopen`, the shared file created and mapped by a call of the agent's
//! `dtx_fpid_attach`, then for each hooked function its block near it and the jump over its
//! first bytes. A function that cannot be hooked safely is named on stderr and left alone.

use super::code::{hook_code, MAX_BLOCK};
use super::ring::layout::{HOOK_ENTRY, HOOK_RETURN};
use super::ring::{RingConfig, SharedRing};
use super::sites::{agent_file, sites, Installed, RingOptions, STACK_BYTES};
use crate::providers::pid::PidProvider;
use crate::sources::debugger::TargetProcess;
use crate::sources::sink::Sink;

/// Bytes of one code area mapped near hooked functions.
const AREA: u64 = 256 * 1024;

/// The uid and gid of process `pid` (from `/proc/PID/status`).
fn owner_of(pid: u32) -> Option<(u32, u32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u32> {
        let line = s.lines().find(|l| l.starts_with(name))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    Some((field("Uid:")?, field("Gid:")?))
}

fn c_string(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

/// Loads the agent into the target (once: a second run finds it loaded) and returns the
/// address of its `dtx_fpid_attach`.
fn load_agent(
    target: &mut dyn TargetProcess,
    provider: &PidProvider,
    tid: u32,
) -> Result<u64, String> {
    let pid = target.pid();
    let path = agent_file("so")?;
    let find_attach = |provider: &PidProvider| {
        let modules = provider.modules_of(pid)?;
        modules.modules.iter().find_map(|m| {
            if m.image.path != path {
                return None;
            }
            let f = m.image.function("dtx_fpid_attach")?;
            Some(f.addr.wrapping_add(m.bias))
        })
    };
    if let Some(a) = find_attach(provider) {
        return Ok(a);
    }
    let modules = provider.modules_of(pid).unwrap_or_default();
    let function = |names: &[&str]| {
        names.iter().find_map(|name| {
            modules.modules.iter().find_map(|m| {
                let f = m.image.function(name)?;
                Some(f.addr.wrapping_add(m.bias))
            })
        })
    };
    let Some(dlopen) = function(&["dlopen", "__libc_dlopen_mode"]) else {
        return Err(format!(
            "fpid: pid {pid} has no dlopen to load the agent with (a static program?)"
        ));
    };
    const RTLD_NOW: u64 = 2;
    match target.call_function(tid, dlopen, &c_string(&path), &[RTLD_NOW]) {
        Some(h) if h != 0 => {}
        Some(_) => {
            // dlerror's words, when the target can say them
            let why = function(&["dlerror"])
                .and_then(|f| target.call_function(tid, f, &[0], &[]))
                .filter(|&a| a != 0)
                .map(|a| {
                    let mut b = vec![0u8; 512];
                    let n = (0..b.len())
                        .rev()
                        .find(|&n| target.read_memory(a, &mut b[..n]))
                        .unwrap_or(0);
                    b.truncate(n);
                    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                    String::from_utf8_lossy(&b[..end]).into_owned()
                })
                .unwrap_or_default();
            return Err(format!(
                "fpid: pid {pid} could not load the agent {path}: {why}"
            ));
        }
        None => return Err(format!("fpid: pid {pid} could not load the agent {path}")),
    }
    provider.refresh_modules(pid);
    find_attach(provider)
        .ok_or_else(|| format!("fpid: the agent loaded into pid {pid} has no dtx_fpid_attach"))
}

/// Creates the shared file and has the agent map it. Returns the ring and the header's
/// address in the target.
fn attach(
    target: &mut dyn TargetProcess,
    tid: u32,
    attach_fn: u64,
    config: &RingConfig,
) -> Result<(SharedRing, u64), String> {
    let pid = target.pid();
    let dir = ["/dev/shm"]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|d| d.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    let nanos = crate::sources::debugger::monotonic_ns();
    let path = dir.join(format!("dtx-fpid-{pid}-{}-{nanos:x}", std::process::id()));
    // SAFETY: geteuid has no failure mode.
    let owner = if unsafe { libc::geteuid() } == 0 {
        owner_of(pid)
    } else {
        None
    };
    let ring = SharedRing::create(&path, config, owner)?;
    let r = target.call_function(tid, attach_fn, &c_string(&path.to_string_lossy()), &[]);
    // both sides have it mapped (or never will): the name goes now
    let _ = std::fs::remove_file(&path);
    match r {
        Some(a) if (a as i64) > 0 => Ok((ring, a)),
        Some(e) => Err(format!(
            "fpid: the agent in pid {pid} could not map {}: {}",
            path.display(),
            std::io::Error::from_raw_os_error(-(e as i64) as i32)
        )),
        None => Err(format!("fpid: the call into the agent in pid {pid} failed")),
    }
}

/// Executable memory in the target for hook blocks.
struct Areas {
    list: Vec<(u64, u64)>,
}

impl Areas {
    /// Places the hook of `func` (code `code`) in an area within reach, mapping one when none
    /// has room. Returns where and what to write.
    fn place(
        &mut self,
        target: &mut dyn TargetProcess,
        tid: u32,
        func: u64,
        make: &dyn Fn(u64) -> Result<super::code::HookCode, String>,
    ) -> Result<(u64, super::code::HookCode), String> {
        let mut last = None;
        for (base, used) in &mut self.list {
            if AREA - *used < MAX_BLOCK as u64 {
                continue;
            }
            let at = *base + *used;
            match make(at) {
                Ok(h) => {
                    *used += (h.block.len() as u64).div_ceil(16) * 16;
                    return Ok((at, h));
                }
                Err(e) => last = Some(e),
            }
        }
        let Some(base) = target.map_code(tid, func, AREA) else {
            return Err(last.unwrap_or_else(|| "no memory for its hook near it".into()));
        };
        let h = make(base)?;
        self.list
            .push((base, (h.block.len() as u64).div_ceil(16) * 16));
        Ok((base, h))
    }
}

/// Installs the hooks of the run's enabled fpid probes in the stopped target, skipping
/// functions whose first bytes hold a `pid` breakpoint (`avoid`).
pub fn install(
    target: &mut dyn TargetProcess,
    provider: &PidProvider,
    sink: &dyn Sink,
    avoid: &[u64],
    want_ustack: bool,
    args_used: usize,
    ring_options: RingOptions,
) -> Result<(SharedRing, Installed), String> {
    let pid = target.pid();
    let ring_options = ring_options.check()?;
    let sites = sites(provider, sink, pid);
    let tid = target
        .held_thread()
        .ok_or_else(|| format!("fpid: no stopped thread of pid {pid} to load the agent with"))?;
    let attach_fn = load_agent(target, provider, tid)?;
    let config = RingConfig {
        hooks: sites.len().max(1),
        ring_bytes: ring_options.bytes,
        stack_bytes: if want_ustack { STACK_BYTES } else { 0 },
        stack_args: args_used > 6,
        wait_ms: ring_options.wait_ms,
    };
    let (ring, header) = attach(target, tid, attach_fn, &config)?;
    let entry_stub = ring.entry_stub();
    if entry_stub == 0 {
        return Err(format!("fpid: the agent in pid {pid} did not answer"));
    }
    let modules = provider.modules_of(pid).unwrap_or_default();
    let mut areas = Areas { list: Vec::new() };
    let mut hooked = 0;
    for (i, s) in sites.iter().enumerate() {
        let module = modules.module_at(s.func);
        let function = module.and_then(|m| m.image.function_at(s.func.wrapping_sub(m.bias)));
        let name = match (module, function) {
            (Some(m), Some(f)) => format!("{}`{}", m.name, f.name),
            _ => format!("0x{:x}", s.func),
        };
        let size = function.map_or(64, |f| f.size) as usize;
        // the bytes up to the next function: a hook may cover a short function's padding
        let room = module
            .and_then(|m| {
                let at = s.func.wrapping_sub(m.bias);
                let next = m.image.functions.iter().find(|f| f.addr > at)?;
                Some((next.addr - at) as usize)
            })
            .unwrap_or(size)
            .max(size);
        let mut code = vec![0u8; room.min(64)];
        while !code.is_empty() && !target.read_memory(s.func, &mut code) {
            code.truncate(code.len() / 2);
        }
        // a breakpoint within the bytes a hook may overwrite (up to an instruction past the
        // jump) would be written back over the hook
        let why = if avoid.iter().any(|a| (s.func..s.func + 24).contains(a)) {
            Err("a pid probe is on its first bytes".to_string())
        } else if code.is_empty() {
            Err("its code cannot be read".to_string())
        } else {
            let make = |at: u64| hook_code(&code, size, s.func, at, entry_stub, header, i as u64);
            areas.place(target, tid, s.func, &make).and_then(|(at, h)| {
                if !target.write_code(at, &h.block) {
                    return Err("its hook cannot be written".into());
                }
                let flags = if s.entries.is_empty() { 0 } else { HOOK_ENTRY }
                    | if s.returns.is_empty() { 0 } else { HOOK_RETURN };
                ring.set_hook(i, flags);
                if !target.write_code(s.func, &h.patch) {
                    ring.set_hook(i, 0);
                    return Err("its first bytes cannot be written".into());
                }
                Ok(())
            })
        };
        match why {
            Ok(()) => hooked += 1,
            Err(why) => {
                crate::output::stderr::say("dtx", format_args!("fpid: {name} is not traced: {why}"))
            }
        }
    }
    if hooked == 0 && !sites.is_empty() {
        return Err(format!("fpid: no function of pid {pid} could be hooked"));
    }
    Ok((ring, Installed { sites }))
}
