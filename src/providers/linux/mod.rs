//! The kernel providers of a live Linux system, with the names of the Windows ones: `syscall`
//! (one `entry`/`return` pair per system call, `probefunc` = the call's name), `sched`
//! (`on-cpu`, `off-cpu`, `wakeup`), `proc` (`create`, `start`, `exit`, `lwp-start`,
//! `lwp-exit`, `exec`, `exec-success`) and `io` (`start`, `done`). The perf source
//! (`sources::perf`) fires them from tracepoints; this module is only the probe list and ids, so
//! it is platform-neutral.

pub mod syscalls;

use super::{fields_match, Provider};
use crate::probes::{ProbeDesc, ProbeInfo};

/// First id of the `syscall` probes: `SYSCALL_FIRST_ID + 2 * number + (0 entry | 1 return)`.
/// The ids fit `dtx -l`'s five-digit column, above the profile provider's on-demand ids
/// (below 62,000) and below the ETW providers' (100,000 and up).
const SYSCALL_FIRST_ID: u64 = 70_000;
/// First id of the other probes, in [`PROBES`] order.
const FIRST_ID: u64 = 73_000;

/// The non-syscall probes: (provider, name).
pub const PROBES: &[(&str, &str)] = &[
    ("sched", "on-cpu"),
    ("sched", "off-cpu"),
    ("sched", "wakeup"),
    ("proc", "create"),
    ("proc", "start"),
    ("proc", "exit"),
    ("proc", "lwp-start"),
    ("proc", "lwp-exit"),
    ("proc", "exec"),
    ("proc", "exec-success"),
    ("io", "start"),
    ("io", "done"),
];

/// The id of a non-syscall probe.
pub fn probe_id(provider: &str, name: &str) -> Option<u64> {
    PROBES
        .iter()
        .position(|(p, n)| *p == provider && *n == name)
        .map(|i| FIRST_ID + i as u64)
}

/// The id of `syscall::<name of nr>:entry` (or `:return`).
pub fn syscall_probe_id(nr: u16, ret: bool) -> u64 {
    SYSCALL_FIRST_ID + 2 * nr as u64 + ret as u64
}

/// The system call number and entry/return of a `syscall` probe id.
pub fn syscall_of(id: u64) -> Option<(u16, bool)> {
    let off = id.checked_sub(SYSCALL_FIRST_ID)?;
    if off >= 2 * 1024 {
        return None;
    }
    Some(((off / 2) as u16, off % 2 == 1))
}

/// The name of system call `nr` (x86-64).
pub fn syscall_name(nr: u64) -> Option<&'static str> {
    let t = syscalls::X86_64;
    t.binary_search_by_key(&nr, |(n, _)| *n as u64)
        .ok()
        .map(|i| t[i].1)
}

fn probe(id: u64, provider: &str, function: &str, name: &str) -> ProbeInfo {
    ProbeInfo {
        id,
        provider: provider.to_string(),
        module: String::new(),
        function: function.to_string(),
        name: name.to_string(),
        arg_types: Vec::new(),
        arg_native: Vec::new(),
    }
}

/// One provider of the live Linux set.
pub struct LinuxProvider {
    name: &'static str,
}

impl LinuxProvider {
    fn all(&self) -> Vec<ProbeInfo> {
        if self.name == "syscall" {
            let mut v = Vec::with_capacity(2 * syscalls::X86_64.len());
            for (nr, name) in syscalls::X86_64 {
                v.push(probe(
                    syscall_probe_id(*nr, false),
                    "syscall",
                    name,
                    "entry",
                ));
                v.push(probe(
                    syscall_probe_id(*nr, true),
                    "syscall",
                    name,
                    "return",
                ));
            }
            return v;
        }
        PROBES
            .iter()
            .enumerate()
            .filter(|(_, (p, _))| *p == self.name)
            .map(|(i, (p, n))| probe(FIRST_ID + i as u64, p, "", n))
            .collect()
    }
}

impl Provider for LinuxProvider {
    fn name(&self) -> &str {
        self.name
    }

    fn matching(&self, desc: &ProbeDesc) -> Vec<ProbeInfo> {
        self.all()
            .into_iter()
            .filter(|p| fields_match(desc, &p.module, &p.function, &p.name))
            .collect()
    }

    fn list(&self) -> Vec<ProbeInfo> {
        self.all()
    }
}

/// The providers of the live Linux catalog.
pub fn providers() -> Vec<Box<dyn Provider + Send + Sync>> {
    ["syscall", "sched", "proc", "io"]
        .into_iter()
        .map(|name| Box::new(LinuxProvider { name }) as Box<dyn Provider + Send + Sync>)
        .collect()
}

/// Whether a probe is one that the live Linux source fires.
pub fn is_linux_probe(id: u64) -> bool {
    syscall_of(id).is_some() || (FIRST_ID..FIRST_ID + PROBES.len() as u64).contains(&id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syscall_probes_by_name_and_number() {
        assert_eq!(syscall_name(0), Some("read"));
        assert_eq!(syscall_name(39), Some("getpid"));
        assert_eq!(syscall_name(110), Some("getppid"));
        assert_eq!(syscall_name(231), Some("exit_group"));
        assert_eq!(syscall_name(400), None);
        let t = syscalls::X86_64;
        assert!(
            t.windows(2).all(|w| w[0].0 < w[1].0),
            "table in number order"
        );
        let id = syscall_probe_id(110, true);
        assert_eq!(syscall_of(id), Some((110, true)));
        assert!(is_linux_probe(id));
        let sc = LinuxProvider { name: "syscall" };
        let m = sc.matching(&ProbeDesc::parse("syscall::getppid:entry").unwrap());
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].id, syscall_probe_id(110, false));
        assert_eq!(m[0].function, "getppid");
        let all = sc.matching(&ProbeDesc::parse("syscall:::entry").unwrap());
        assert_eq!(all.len(), t.len());
        let proc_ = LinuxProvider { name: "proc" };
        let e = proc_.matching(&ProbeDesc::parse("proc:::exit").unwrap());
        assert_eq!(e.len(), 1);
        assert_eq!(Some(e[0].id), probe_id("proc", "exit"));
        assert!(is_linux_probe(e[0].id));
        assert!(!is_linux_probe(1));
    }

    #[test]
    fn ids_fit_the_listing_and_clash_with_no_other_provider() {
        // profile's on-demand probes end below 62,000; ETW's start at 100,000
        assert!(syscall_probe_id(0, false) > 62_000);
        assert!(syscall_probe_id(1023, true) < FIRST_ID);
        assert!(FIRST_ID + (PROBES.len() as u64) < 100_000);
        assert_eq!(syscall_of(FIRST_ID), None);
    }
}
