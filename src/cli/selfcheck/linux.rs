//! The self-check on Linux: the privileges perf events and ptrace need, tracefs, uprobes, and
//! real runs of dtx over its own workload: a system call counted exactly, a `profile-997`
//! `ustack()` through functions built without frame pointers, the pid provider over uprobes
//! and the fpid agent counting calls exactly.

use super::common::{count_calls, ended_well, frame_function, has_chain, stack_entries, LIMIT};
use super::run::{count, dtx, words, workload_command};
use super::workload::{keeps_frame_pointer, BUSY_CHAIN, CALLS};
use super::Check;

const CAP_SYS_PTRACE: u32 = 19;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;

/// What this process may do.
struct Privilege {
    euid: u32,
    caps: u64,
    paranoid: Option<i32>,
    /// perf_event_open of a software event: Err(why).
    perf: Result<(), String>,
}

impl Privilege {
    fn now() -> Privilege {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let caps = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0);
        let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
            .ok()
            .and_then(|s| s.trim().parse().ok());
        Privilege {
            // SAFETY: geteuid has no preconditions and cannot fail
            euid: unsafe { libc::geteuid() },
            caps,
            paranoid,
            perf: crate::sources::perf::live::available(),
        }
    }

    fn has(&self, cap: u32) -> bool {
        self.caps & (1u64 << cap) != 0
    }

    /// Whether kernel probes (tracepoints, profile, uprobes) may be opened: root, CAP_PERFMON
    /// or CAP_SYS_ADMIN, and perf_event_open works.
    fn traces_kernel(&self) -> bool {
        (self.euid == 0 || self.has(CAP_PERFMON) || self.has(CAP_SYS_ADMIN)) && self.perf.is_ok()
    }

    fn summary(&self) -> String {
        let names: Vec<&str> = [
            (CAP_PERFMON, "CAP_PERFMON"),
            (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"),
            (CAP_SYS_PTRACE, "CAP_SYS_PTRACE"),
        ]
        .iter()
        .filter(|(c, _)| self.has(*c))
        .map(|(_, n)| *n)
        .collect();
        let caps = if names.is_empty() {
            "none of CAP_PERFMON, CAP_SYS_ADMIN, CAP_SYS_PTRACE".to_string()
        } else {
            names.join(" ")
        };
        let paranoid = self
            .paranoid
            .map_or("unreadable".to_string(), |p| p.to_string());
        format!(
            "euid {}; effective capabilities: {caps}; perf_event_paranoid {paranoid}",
            self.euid
        )
    }
}

/// What a check that needs the kernel's probes says when the privilege is missing.
const NEEDS_ROOT: &str = "needs root (or CAP_PERFMON)";

pub fn checks(progress: &mut dyn FnMut(&str)) -> Vec<Check> {
    let mut v = Vec::new();
    progress("privilege");
    let p = Privilege::now();
    v.push(privilege(&p));
    let kernel = p.traces_kernel();
    progress("tracefs");
    v.push(tracefs(kernel));
    progress("uprobes");
    v.push(if kernel {
        uprobes()
    } else {
        Check::skip("uprobes", format!("{NEEDS_ROOT}: pid probes over uprobes"))
    });
    progress("syscall-count");
    v.push(if kernel {
        syscall_count()
    } else {
        Check::skip(
            "syscall-count",
            format!("{NEEDS_ROOT}: syscall tracepoints"),
        )
    });
    progress("bpf");
    v.push(if kernel {
        bpf()
    } else {
        Check::skip("bpf", format!("{NEEDS_ROOT}: BPF programs"))
    });
    progress("profile-ustack");
    v.push(if kernel {
        profile_ustack()
    } else {
        Check::skip(
            "profile-ustack",
            format!("{NEEDS_ROOT}: profile-997 samples"),
        )
    });
    progress("fpid-agent");
    v.push(fpid_agent());
    v
}

fn privilege(p: &Privilege) -> Check {
    let summary = p.summary();
    let needs = "dtx's kernel probes (syscall, sched, proc, io, profile, pid over uprobes) \
                 need root or CAP_PERFMON (and CAP_SYS_PTRACE for -p); run dtx --check as root";
    let privileged = p.euid == 0 || p.has(CAP_PERFMON) || p.has(CAP_SYS_ADMIN);
    match &p.perf {
        Ok(()) if privileged => {
            Check::pass("privilege", format!("{summary}; perf_event_open works"))
        }
        Ok(()) => Check::skip("privilege", format!("{summary}: {needs}")),
        // privileged, and still refused: a container's seccomp policy, a kernel without perf
        Err(e) if privileged => Check::fail("privilege", format!("{summary}; {e}")),
        Err(_) => Check::skip(
            "privilege",
            format!("{summary}; perf_event_open refused: {needs}"),
        ),
    }
}

/// tracefs: mounted (or mounted now, as a run does), with the system-call tracepoints the
/// syscall provider opens.
fn tracefs(kernel: bool) -> Check {
    if !kernel {
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
        let at = mounts
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() >= 3 && f[2] == "tracefs").then(|| f[1].to_string())
            })
            .next();
        return Check::skip(
            "tracefs",
            match at {
                Some(at) => format!("mounted at {at}; reading its events {NEEDS_ROOT}"),
                None => format!("not mounted; mounting it {NEEDS_ROOT}"),
            },
        );
    }
    match crate::sources::perf::live::tracefs() {
        Ok(dir) => {
            let id = dir.join("events/syscalls/sys_enter_getppid/id");
            match std::fs::read_to_string(&id) {
                Ok(n) => Check::pass(
                    "tracefs",
                    format!(
                        "{}; syscalls:sys_enter_getppid is tracepoint {}",
                        dir.display(),
                        n.trim()
                    ),
                ),
                Err(e) => Check::fail(
                    "tracefs",
                    format!("{}: cannot read {}: {e}", dir.display(), id.display()),
                ),
            }
        }
        Err(e) => Check::fail("tracefs", e),
    }
}

/// uprobes: the PMU is there, and the pid provider over it counts a child's calls exactly.
fn uprobes() -> Check {
    match crate::sources::perf::uprobe::pmu_type() {
        Ok(_) => count_calls(
            "uprobes",
            "pid$target:a.out:dtx_check_hit:entry",
            &["-x", "pidmode=uprobe"],
            "pid provider over uprobes",
        ),
        Err(e) => Check::fail("uprobes", e),
    }
}

/// The fpid agent put into a child counts its calls exactly.
fn fpid_agent() -> Check {
    count_calls(
        "fpid-agent",
        "fpid$target:a.out:dtx_check_hit:entry",
        &[],
        "fpid agent",
    )
}

/// `syscall::getppid:entry` counts exactly the calls the workload makes.
fn syscall_count() -> Check {
    let name = "syscall-count";
    let cmd = match workload_command("syscalls", &[&CALLS.to_string()]) {
        Ok(c) => c,
        Err(e) => return Check::fail(name, e),
    };
    let program = "syscall::getppid:entry /pid == $target/ { @n = count(); } \
                   END { printa(\"calls %@d\\n\", @n); }";
    let ran = dtx(&words(&["-q", "-n", program, "-c", &cmd]), LIMIT);
    if let Err(c) = ended_well(name, &ran) {
        return c;
    }
    match count(&ran.stdout, "calls ") {
        Some(n) if n == CALLS => Check::pass(
            name,
            format!("syscall::getppid:entry counted {n} calls of a child, exactly as made"),
        ),
        Some(n) => Check::fail(
            name,
            format!("counted {n} getppid calls, the child made {CALLS}"),
        ),
        None => Check::fail(name, format!("no count printed ({})", ran.why())),
    }
}

/// The BPF back end: a counting clause runs in the kernel (`-x bpf=verbose` says so) and
/// counts exactly the calls the workload makes; a program the kernel refuses fails the
/// check with the verifier's reason (a run would still work, in user space).
fn bpf() -> Check {
    let name = "bpf";
    let cmd = match workload_command("syscalls", &[&CALLS.to_string()]) {
        Ok(c) => c,
        Err(e) => return Check::fail(name, e),
    };
    let program = "syscall::getppid:entry /pid == $target/ { @n = count(); } \
                   END { printa(\"calls %@d\\n\", @n); }";
    let ran = dtx(
        &words(&["-q", "-x", "bpf=verbose", "-n", program, "-c", &cmd]),
        LIMIT,
    );
    if let Err(c) = ended_well(name, &ran) {
        return c;
    }
    let said = |what: &str| ran.stderr.lines().find(|l| l.contains(what));
    if let Some(l) = said("clause 1 (syscall::getppid:entry) runs in user space") {
        return Check::fail(name, l.trim().to_string());
    }
    if said("clause 1 (syscall::getppid:entry) runs in the kernel").is_none() {
        return Check::fail(name, format!("no clause ran in the kernel ({})", ran.why()));
    }
    match count(&ran.stdout, "calls ") {
        Some(n) if n == CALLS => Check::pass(
            name,
            format!("syscall::getppid:entry counted {n} calls of a child in the kernel, exactly as made"),
        ),
        Some(n) => Check::fail(
            name,
            format!("counted {n} getppid calls in the kernel, the child made {CALLS}"),
        ),
        None => Check::fail(name, format!("no count printed ({})", ran.why())),
    }
}

/// `profile-997` `ustack()` of the busy loop: most samples unwind through the three
/// `dtx_check_busy_*` functions, built without frame pointers.
fn profile_ustack() -> Check {
    let name = "profile-ustack";
    const MS: u64 = 600;
    let cmd = match workload_command("busy", &[&MS.to_string()]) {
        Ok(c) => c,
        Err(e) => return Check::fail(name, e),
    };
    let program = "profile-997 /pid == $target/ { @[ustack(100)] = count(); }";
    let ran = dtx(
        &words(&["-q", "-x", "ustackframes=100", "-n", program, "-c", &cmd]),
        LIMIT,
    );
    if let Err(c) = ended_well(name, &ran) {
        return c;
    }
    let stacks = stack_entries(&ran.stdout);
    let total: u64 = stacks.iter().map(|s| s.1).sum();
    let good: u64 = stacks
        .iter()
        .filter(|(f, _)| has_chain(f, &BUSY_CHAIN))
        .map(|s| s.1)
        .sum();
    let deepest = stacks
        .iter()
        .filter(|(f, _)| has_chain(f, &BUSY_CHAIN))
        .map(|(f, _)| f.iter().filter(|x| frame_function(x).is_some()).count())
        .max()
        .unwrap_or(0);
    let fp = match keeps_frame_pointer() {
        Some(false) => "built without frame pointers",
        Some(true) => "built WITH frame pointers (this build does not test the unwinder)",
        None => "frame pointers not inspected on this architecture",
    };
    let detail = format!(
        "{good} of {total} samples unwound through {} ({fp}); up to {deepest} named frames",
        BUSY_CHAIN.join(" < ")
    );
    if total >= 50 && good * 2 >= total && deepest >= 3 {
        Check::pass(name, detail)
    } else {
        Check::fail(name, detail)
    }
}
