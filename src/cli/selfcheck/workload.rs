//! The self-check's workload: `dtx --check-workload WHAT [N]`, this same executable started
//! by a checked dtx run as its `-c` target. Its functions have fixed, unmangled names
//! (`dtx_check_*`) so that a D program can name them (`fpid$target:a.out:dtx_check_hit:entry`)
//! and a stack can be checked for them; they are never inlined. dtx's release build keeps no
//! frame pointers (Rust's default on x86-64), so a `ustack()` through [`dtx_check_busy_leaf`]
//! needs the unwind tables: [`keeps_frame_pointer`] says whether the function sets one up.

use std::hint::black_box;
use std::io::Write;
use std::time::{Duration, Instant};

/// The tag of the facts the workload prints (one line each: `dtx-check: <key> <value>`).
pub const FACT: &str = "dtx-check: ";

/// The calls (and system calls) the counting checks make: an odd number no runtime makes by
/// itself.
pub const CALLS: u64 = 4099;

/// Called `N` times by `calls N`: the function the pid and fpid checks count.
#[no_mangle]
#[inline(never)]
pub extern "C" fn dtx_check_hit(i: u64) -> u64 {
    black_box(i.wrapping_mul(3).wrapping_add(1))
}

/// The innermost of the busy loop's three functions: where the samples land.
#[no_mangle]
#[inline(never)]
pub extern "C" fn dtx_check_busy_leaf(n: u64) -> u64 {
    let mut x = black_box(n);
    for i in 0..n {
        x = black_box(x.wrapping_mul(2862933555777941757).wrapping_add(i));
    }
    x
}

#[no_mangle]
#[inline(never)]
pub extern "C" fn dtx_check_busy_middle(n: u64) -> u64 {
    black_box(dtx_check_busy_leaf(black_box(n))) ^ 3
}

#[no_mangle]
#[inline(never)]
pub extern "C" fn dtx_check_busy_outer(n: u64) -> u64 {
    black_box(dtx_check_busy_middle(black_box(n))).wrapping_mul(5)
}

/// The functions a sample of the busy loop must show, from the inside out.
pub const BUSY_CHAIN: [&str; 3] = [
    "dtx_check_busy_leaf",
    "dtx_check_busy_middle",
    "dtx_check_busy_outer",
];

/// Burns `ms` of this process's CPU time in [`dtx_check_busy_outer`] (where the CPU clock can
/// be read; else `ms` of wall time), for at most ten times as long in wall time: on a loaded
/// machine the samples still cover the CPU time asked for.
pub fn busy(ms: u64) -> u64 {
    let start = Instant::now();
    let cpu0 = cpu_time();
    let wall_limit = Duration::from_millis(ms.saturating_mul(10));
    let mut acc = 0u64;
    loop {
        acc = acc.wrapping_add(dtx_check_busy_outer(200_000));
        let spent = match (cpu0, cpu_time()) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => start.elapsed(),
        };
        if spent >= Duration::from_millis(ms) || start.elapsed() >= wall_limit {
            return acc;
        }
    }
}

/// This process's CPU time (CLOCK_PROCESS_CPUTIME_ID), on Linux.
fn cpu_time() -> Option<Duration> {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: ts is a valid timespec for the call to fill
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
        (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// Whether [`dtx_check_busy_leaf`] starts by setting up a frame pointer (`push rbp; mov rbp,
/// rsp`, x86-64), so that the stack check says what it unwound through. None on other
/// architectures.
pub fn keeps_frame_pointer() -> Option<bool> {
    if !cfg!(target_arch = "x86_64") {
        return None;
    }
    let f = dtx_check_busy_leaf as *const () as *const u8;
    let mut head = [0u8; 4];
    // SAFETY: the first four bytes of a function of this executable: its code is mapped and
    // readable for as long as the program runs, and the function is longer than four bytes
    unsafe { std::ptr::copy_nonoverlapping(f, head.as_mut_ptr(), head.len()) };
    Some(head == [0x55, 0x48, 0x89, 0xe5])
}

/// Prints one fact line, whole, with one write.
pub fn fact(key: &str, value: impl std::fmt::Display) {
    let line = format!("{FACT}{key} {value}\n");
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
}

/// `dtx --check-workload WHAT [N]`: runs the workload, returns the exit status.
pub fn main(args: &[String]) -> i32 {
    let what = args.first().map(String::as_str).unwrap_or("");
    let n: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    match what {
        "calls" => {
            let mut sum = 0u64;
            for i in 0..n {
                sum = sum.wrapping_add(dtx_check_hit(i));
            }
            fact("checksum", sum);
            0
        }
        "busy" => {
            fact("busy", busy(n) & 1);
            0
        }
        #[cfg(target_os = "linux")]
        "syscalls" => {
            for _ in 0..n {
                // SAFETY: getppid takes no arguments and cannot fail
                black_box(unsafe { libc::syscall(libc::SYS_getppid) });
            }
            fact("syscalls", n);
            0
        }
        "windows" => windows_workload(n),
        _ => {
            crate::output::stderr::say(
                "dtx",
                format!(
                    "--check-workload: unknown workload {what:?} (calls, busy, syscalls, windows)"
                ),
            );
            2
        }
    }
}

/// The ETW check's workload: a child process started and ended, a temporary file written,
/// flushed and read, a DNS query for a name that cannot resolve (`.invalid`, RFC 6761), and
/// `ms` of busy loop. Each thing done is printed as a fact for the check to compare.
fn windows_workload(ms: u64) -> i32 {
    let me = std::process::id();
    // the child: this executable again, ending at once
    match std::env::current_exe().and_then(|exe| {
        std::process::Command::new(exe)
            .args(["--check-workload", "calls", "1"])
            .stdout(std::process::Stdio::null())
            .spawn()
    }) {
        Ok(mut child) => {
            fact("child", child.id());
            let _ = child.wait();
        }
        Err(e) => fact("child-error", e),
    }
    // the file
    let path = std::env::temp_dir().join(format!("dtx-check-{me}.tmp"));
    let written = std::fs::File::create(&path).and_then(|mut f| {
        f.write_all(&[b'x'; 8192])?;
        f.flush()?;
        f.sync_all()
    });
    match written.and_then(|_| std::fs::read(&path)) {
        Ok(bytes) => fact("file", format!("{} {}", bytes.len(), path.display())),
        Err(e) => fact("file-error", e),
    }
    let _ = std::fs::remove_file(&path);
    // the DNS query: a fresh name each run, so that no cache answers it
    let name = format!("dtx-check-{me}.invalid");
    let resolved = std::net::ToSocketAddrs::to_socket_addrs(&(name.as_str(), 80));
    fact(
        "dns",
        format!(
            "{name} {}",
            if resolved.is_ok() {
                "resolved"
            } else {
                "unresolved"
            }
        ),
    );
    fact("busy", busy(ms) & 1);
    0
}
