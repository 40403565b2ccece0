//! Live kernel probes on Linux through perf events: tracepoints (ids and record layouts from
//! tracefs), `cpu-clock` sampling for `profile-N`, per-CPU ring buffers. The record and
//! format parsers are platform-neutral; opening events and reading rings is Linux-only.

pub mod format;
pub mod record;

#[cfg(target_os = "linux")]
mod abi;
#[cfg(target_os = "linux")]
mod bpfsys;
#[cfg(target_os = "linux")]
pub mod capture;
#[cfg(target_os = "linux")]
pub mod kernel;
#[cfg(target_os = "linux")]
pub mod live;
#[cfg(target_os = "linux")]
pub mod uprobe;
#[cfg(target_os = "linux")]
pub mod ustack;

/// The numbered entries of a `/proc` folder (`/proc`: processes; `/proc/PID/task`: threads),
/// none when it cannot be read.
#[cfg(target_os = "linux")]
fn numbered_entries(dir: &str) -> impl Iterator<Item = u32> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
}
