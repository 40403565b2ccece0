//! The target process of `-c cmd` / `-p pid`, and of `pidN` probes: created or grabbed before
//! the programs are compiled (so `$target` and the `pid` probes know it), run by the debugger
//! loop afterwards.

use super::args::{parse_pid, split_command, Args};
use crate::providers::pid::{provider_fpid, provider_pid, PidProvider};
use crate::sources::debugger::{OpenedTarget, PidSource, TargetProcess, TargetRequest};

/// A process under the debugger, stopped, waiting for the run.
pub struct Target {
    pub pid: u32,
    pub created: bool,
    process: Option<Box<dyn TargetProcess>>,
}

impl Drop for Target {
    /// A target the run never used (a compile error): a started one is killed, as dtrace
    /// does; a grabbed one is let go.
    fn drop(&mut self) {
        if let Some(mut p) = self.process.take() {
            if self.created {
                kill(self.pid);
            }
            p.detach(&[]);
        }
    }
}

#[cfg(target_os = "linux")]
fn kill(pid: u32) {
    // SAFETY: signalling the process we started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
}

#[cfg(windows)]
fn kill(pid: u32) {
    crate::sources::debugger::windows::kill(pid);
}

#[cfg(not(any(target_os = "linux", windows)))]
fn kill(_pid: u32) {}

impl Target {
    /// The target's module list (`/proc/PID/maps` lines) and its executable's path.
    pub fn maps(&self) -> Option<(String, String)> {
        self.process.as_ref()?.maps()
    }
}

/// The command line's `-c cmd` or `-p pid`, checked.
pub fn request(args: &Args) -> Result<Option<TargetRequest>, String> {
    if args.command.len() + args.pids.len() > 1 {
        return Err("only one target process (-c or -p) is supported".into());
    }
    if let Some(cmd) = args.command.first() {
        return Ok(Some(TargetRequest::Command(split_command(cmd))));
    }
    if let Some(p) = args.pids.first() {
        let pid = parse_pid(p)?;
        if pid <= 0 || pid > i32::MAX as i64 {
            return Err(format!("failed to grab pid {p}: No such process"));
        }
        return Ok(Some(TargetRequest::Pid(pid as u32)));
    }
    Ok(None)
}

/// Starts `-c cmd` (stopped at its `main`, its libraries loaded) or grabs `-p pid`.
pub fn create(args: &Args) -> Result<Option<Target>, String> {
    match request(args)? {
        Some(TargetRequest::Command(argv)) => start(&argv).map(Some),
        Some(TargetRequest::Pid(pid)) => {
            #[cfg(windows)]
            return grab_with(pid, may_name_methods(args)).map(Some);
            #[cfg(not(windows))]
            grab(pid).map(Some)
        }
        None => Ok(None),
    }
}

/// Whether the run may name .NET methods of its `-p` target: it lists probes, or a program
/// mentions `pid` (a `pid` probe; a script on standard input is not read twice, so it may).
/// Only then is the target's CLR rundown run before it is grabbed (Windows), which makes the
/// runtime write an event per method.
#[cfg(windows)]
fn may_name_methods(args: &Args) -> bool {
    use super::args::ProgramSource;
    args.list
        || args.programs.iter().any(|p| match p {
            ProgramSource::Script(path) if path.as_os_str() == "-" => true,
            p => p.text().contains("pid"),
        })
}

#[cfg(target_os = "linux")]
fn start(argv: &[String]) -> Result<Target, String> {
    let opened = start_process(argv, false)?;
    Ok(Target {
        pid: opened.process.pid(),
        created: true,
        process: Some(opened.process),
    })
}

/// Starts `argv` under the debugger and runs it to `main`, so that `pid$target:libc...` finds
/// the libraries; with `capture`, its output comes back as a pipe.
#[cfg(target_os = "linux")]
fn start_process(argv: &[String], capture: bool) -> Result<OpenedTarget, String> {
    use crate::sources::debugger::linux::LinuxTarget;
    use std::os::fd::FromRawFd;
    let mut output = None;
    let mut t = if capture {
        let mut fds = [0; 2];
        // SAFETY: fds is a valid array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(format!(
                "failed to execute {}: {}",
                argv.first().map(String::as_str).unwrap_or(""),
                std::io::Error::last_os_error()
            ));
        }
        let spawned = LinuxTarget::spawn_with_output(argv, Some(fds[1]));
        // SAFETY: the write end is ours to close; the read end becomes the File.
        unsafe {
            libc::close(fds[1]);
            output = Some(std::fs::File::from_raw_fd(fds[0]));
        }
        spawned?
    } else {
        LinuxTarget::spawn(argv)?
    };
    if let Some((maps, exe)) = t.maps() {
        let mut cache = std::collections::HashMap::new();
        let mods = crate::symbols::ProcessModules::from_maps(&maps, &exe, &mut cache);
        let main = mods.modules.iter().find(|m| m.is_exec).and_then(|m| {
            m.image
                .function("main")
                .map(|f| f.addr.wrapping_add(m.bias))
        });
        if let Some(addr) = main {
            t.run_to(addr)?;
        }
    }
    Ok(OpenedTarget {
        process: Box::new(t),
        created: true,
        output,
    })
}

#[cfg(target_os = "linux")]
fn grab(pid: u32) -> Result<Target, String> {
    let t = crate::sources::debugger::linux::LinuxTarget::attach(pid)?;
    Ok(Target {
        pid,
        created: false,
        process: Some(Box::new(t)),
    })
}

/// Opens the console's target on its engine thread: see [`OpenTarget`].
pub fn open_target(req: &TargetRequest, capture: bool) -> Result<OpenedTarget, String> {
    #[cfg(target_os = "linux")]
    if let TargetRequest::Command(argv) = req {
        return start_process(argv, capture);
    }
    let _ = capture;
    #[cfg(target_os = "linux")]
    if let TargetRequest::Pid(pid) = req {
        // a process dtx started and let go may have ended since: reap it and say so
        let mut st = 0;
        // SAFETY: waitpid on one pid with WNOHANG; st is a valid int.
        if unsafe { libc::waitpid(*pid as i32, &mut st, libc::WNOHANG) } == *pid as i32 {
            return Err(format!("pid {pid} has exited"));
        }
    }
    let mut t = match req {
        TargetRequest::Command(argv) => start(argv)?,
        TargetRequest::Pid(pid) => {
            // the console's programs come later, and are often about the target's methods:
            // the rundown runs now, while the process can still answer (see `create`)
            #[cfg(windows)]
            let t = grab_with(*pid, true)?;
            #[cfg(not(windows))]
            let t = grab(*pid)?;
            t
        }
    };
    Ok(OpenedTarget {
        process: t.process.take().ok_or("the target is gone")?,
        created: t.created,
        output: None,
    })
}

/// The run-time address of `main` (else the entry point) of the program in `maps`.
#[cfg(windows)]
fn main_address(maps: &str, exe: &str) -> Option<u64> {
    let mut cache = std::collections::HashMap::new();
    let mods = crate::symbols::ProcessModules::from_maps(maps, exe, &mut cache);
    let m = mods.modules.iter().find(|m| m.is_exec)?;
    let at = m
        .image
        .function("main")
        .map(|f| f.addr)
        .unwrap_or(m.image.entry);
    (at != 0).then(|| at.wrapping_add(m.bias))
}

#[cfg(windows)]
fn start(argv: &[String]) -> Result<Target, String> {
    use crate::sources::debugger::windows::WindowsTarget;
    let mut t = WindowsTarget::spawn(argv)?;
    let pid = t.pid();
    // run to main: the C runtime is set up and the libraries it loads are there
    if let Some(addr) = t.maps().and_then(|(maps, exe)| main_address(&maps, &exe)) {
        t.run_to(addr)?;
    }
    Ok(Target {
        pid,
        created: true,
        process: Some(Box::new(t)),
    })
}

#[cfg(windows)]
fn grab(pid: u32) -> Result<Target, String> {
    grab_with(pid, false)
}

/// Grabs `pid`; with `rundown`, the CLR rundown of a .NET process runs first, while it can
/// still answer, in the method session the debugger loop then keeps (issue 42, finding 9).
#[cfg(windows)]
fn grab_with(pid: u32, rundown: bool) -> Result<Target, String> {
    use crate::sources::debugger::windows;
    let feed = if rundown {
        windows::rundown_before_attach(pid)
    } else {
        None
    };
    let t = windows::WindowsTarget::attach(pid, feed)?;
    Ok(Target {
        pid,
        created: false,
        process: Some(Box::new(t)),
    })
}

#[cfg(not(any(target_os = "linux", windows)))]
fn start(argv: &[String]) -> Result<Target, String> {
    Err(format!(
        "failed to execute {}: the debugger loop is not available on this system yet",
        argv.first().map(String::as_str).unwrap_or("")
    ))
}

#[cfg(not(any(target_os = "linux", windows)))]
fn grab(pid: u32) -> Result<Target, String> {
    Err(format!(
        "failed to grab pid {pid}: the debugger loop is not available on this system yet"
    ))
}

/// The pids whose `pid` or `fpid` probes the engine enabled.
fn probed_pids(engine: &crate::engine::Engine) -> Vec<u32> {
    let mut v: Vec<u32> = engine
        .enabled_probes()
        .filter_map(|p| {
            provider_pid(&p.provider)
                .ok()
                .flatten()
                .or_else(|| provider_fpid(&p.provider).ok().flatten())
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The event source of a run: the target, or the one process whose pid probes are enabled
/// (grabbed now, as dtrace does for `pid$1` probes). `None` when the run has neither.
pub fn source(
    target: Option<Target>,
    provider: &PidProvider,
    engine: &crate::engine::Engine,
    quiet: bool,
    want_ustack: bool,
) -> Result<Option<PidSource>, String> {
    let pids = probed_pids(engine);
    let target = match target {
        Some(t) => {
            if let Some(other) = pids.iter().find(|&&p| p != t.pid) {
                return Err(format!(
                    "pid {other}: tracing a process other than the target is not supported"
                ));
            }
            t
        }
        None => match pids.as_slice() {
            [] => return Ok(None),
            [pid] => grab(*pid)?,
            _ => return Err("tracing more than one process is not supported".into()),
        },
    };
    let mut target = target;
    let Some(process) = target.process.take() else {
        return Ok(None);
    };
    let mut src = PidSource::new(process, provider.clone(), engine);
    src.want_ustack = want_ustack;
    src.announce = !quiet;
    src.created = target.created;
    src.end_created = target.created;
    Ok(Some(src))
}

/// The backend of a run's pid probes (`-x pidmode=auto|ptrace|uprobe`): the ptrace debugger
/// loop, or (Linux) kernel uprobes. `auto` takes uprobes when every clause on the target's
/// probes reads nothing but the registers and stack of a hit (no `copyin`, `copyinstr`,
/// `copyout`, memory loads, `stop()`, `raise()`, `system()`), every description matched probes
/// at the start (uprobes do not follow `dlopen`), every site is in the main executable (a
/// uprobe in a shared library traps in every process mapping it), and the system has uprobes.
pub fn backend(
    src: Option<PidSource>,
    mode: Option<&str>,
    engine: &crate::engine::Engine,
) -> Result<Option<Box<dyn crate::engine::EventSource>>, String> {
    let Some(src) = src else { return Ok(None) };
    let mode = mode.unwrap_or("auto");
    if mode == "ptrace" {
        return Ok(Some(Box::new(src)));
    }
    #[cfg(target_os = "linux")]
    {
        use crate::sources::debugger::stopped_target_needed;
        use crate::sources::perf::uprobe::{pmu_type, UprobeSource};
        if src.follows_managed_code() {
            if mode == "uprobe" {
                return Err("pidmode=uprobe: probes on .NET methods need the ptrace loop: a uprobe cannot sit in the JIT's anonymous memory (use -x pidmode=ptrace)".into());
            }
            return Ok(Some(Box::new(src)));
        }
        let needs = stopped_target_needed(engine, src.pid());
        let unmatched = src.has_unmatched(engine);
        if mode == "uprobe" {
            if let Some(why) = needs {
                return Err(format!(
                    "pidmode=uprobe: {why}, which needs the target stopped at each hit (use -x pidmode=ptrace)"
                ));
            }
            pmu_type().map_err(|e| format!("pidmode=uprobe: {e}"))?;
        } else if needs.is_some() || unmatched || !src.sites_in_executable() || pmu_type().is_err()
        {
            return Ok(Some(Box::new(src)));
        }
        let plan = src.into_plan(engine);
        Ok(Some(Box::new(UprobeSource::open(plan)?)))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = engine;
        if mode == "uprobe" {
            return Err("pidmode=uprobe: uprobes are a Linux facility".into());
        }
        Ok(Some(Box::new(src)))
    }
}
