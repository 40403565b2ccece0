//! The `fpid` provider's event source: user functions hooked inside the target by an agent dtx
//! loads into it (`agent/`, its own crate), their hits written into a shared ring that this
//! source drains. The target never stops for a hit: a hit costs tens of nanoseconds, not a
//! trap and a debugger round trip. The clauses run here afterwards over the registers and
//! the stack copy the hit recorded, so they cannot read the target's memory (the compiler
//! refuses `copyin`/`copyinstr` on fpid probes).
//!
//! Linux: the debugger loop (which holds the target stopped after `-c`/`-p`) makes the target
//! `dlopen` the agent and map the shared file, writes each hook's code near its function and
//! patches the function's first bytes with a jump ([`code`]); then it lets the target go (or
//! keeps it, when the same run has `pid` probes there). At the end, the hooks are made inert;
//! no code written into the target is ever freed, so a thread inside a trampoline runs on.
//!
//! Windows: the agent is a DLL that hooks with MinHook; dtx injects it with a remote thread on
//! `LoadLibraryW` and names the file mapping holding the functions to hook ([`inject`]). At the
//! end the hooks are made inert and the agent disables them; trampolines stay.

pub mod cet;
pub mod code;
#[cfg(any(target_os = "linux", windows))]
mod drain;
#[cfg(windows)]
mod inject;
#[cfg(target_os = "linux")]
mod install;
#[cfg(target_os = "linux")]
#[path = "linux.rs"]
mod platform;
#[cfg(windows)]
#[path = "windows.rs"]
mod platform;
#[cfg(any(target_os = "linux", windows))]
pub mod ring;
#[cfg(any(target_os = "linux", windows))]
mod sites;
#[cfg(any(target_os = "linux", windows))]
mod source;

#[cfg(any(target_os = "linux", windows))]
pub use sites::RingOptions;
#[cfg(any(target_os = "linux", windows))]
pub use source::FpidSource;

#[cfg(any(target_os = "linux", windows))]
use crate::{providers::pid::PidProvider, sources::debugger::PidSource, sources::sink::Sink};

/// The agent built from `agent/` by `build.rs` (empty where none is built).
pub const AGENT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fpid-agent.bin"));

/// Whether a run enables `fpid` probes in process `pid`.
pub fn has_fpid_probes(sink: &dyn Sink, pid: u32) -> bool {
    let provider = format!("fpid{pid}");
    sink.enabled_probes().any(|p| p.provider == provider)
}

/// Splits a run's debugger source in two when it has `fpid` probes in its process: the hooks
/// go in now, while the target is still held, and the fpid source drains their hits. A run
/// without fpid probes there keeps its debugger source as it is. What the platform does with
/// a process that has both `pid` and `fpid` probes is its own ([`platform::split`]).
#[cfg(any(target_os = "linux", windows))]
pub fn split(
    src: Option<PidSource>,
    provider: &PidProvider,
    sink: &dyn Sink,
    ring: RingOptions,
) -> Result<(Option<PidSource>, Option<FpidSource>), String> {
    let Some(src) = src else {
        return Ok((None, None));
    };
    if !has_fpid_probes(sink, src.pid()) {
        return Ok((Some(src), None));
    }
    platform::split(src, provider, sink, ring)
}
