//! Live kernel probes on Linux through perf events: tracepoints (ids and record layouts from
//! tracefs), `cpu-clock` sampling for `profile-N`, per-CPU ring buffers. The record and
//! format parsers are platform-neutral; opening events and reading rings is Linux-only.

pub mod format;
pub mod record;

#[cfg(target_os = "linux")]
pub mod capture;
#[cfg(target_os = "linux")]
pub mod live;
#[cfg(target_os = "linux")]
pub mod uprobe;
#[cfg(target_os = "linux")]
pub mod ustack;
