//! The perf events ABI dtx uses, over `libc`: `struct perf_event_attr`, `perf_event_open`
//! and its ioctls, the CPUs to open on, tracefs, and one CPU's mmap ring. The live source
//! (`live.rs`) and the uprobe backend of the pid provider (`uprobe.rs`) both open events
//! through it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// `struct perf_event_attr` (`PERF_ATTR_SIZE_VER8`, 136 bytes).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct PerfEventAttr {
    pub(super) kind: u32,
    pub(super) size: u32,
    pub(super) config: u64,
    pub(super) sample_period: u64,
    pub(super) sample_type: u64,
    pub(super) read_format: u64,
    pub(super) flags: u64,
    pub(super) wakeup_watermark: u32,
    pub(super) bp_type: u32,
    pub(super) config1: u64,
    pub(super) config2: u64,
    pub(super) branch_sample_type: u64,
    pub(super) sample_regs_user: u64,
    pub(super) sample_stack_user: u32,
    pub(super) clockid: i32,
    pub(super) sample_regs_intr: u64,
    pub(super) aux_watermark: u32,
    pub(super) sample_max_stack: u16,
    pub(super) reserved_2: u16,
    pub(super) aux_sample_size: u32,
    pub(super) reserved_3: u32,
    pub(super) sig_data: u64,
    pub(super) config3: u64,
}

pub(super) const ATTR_SIZE: u32 = std::mem::size_of::<PerfEventAttr>() as u32;

pub(super) const TYPE_SOFTWARE: u32 = 1;
pub(super) const TYPE_TRACEPOINT: u32 = 2;
pub(super) const SW_CPU_CLOCK: u64 = 0;
pub(super) const SW_DUMMY: u64 = 9;
pub(super) const SW_BPF_OUTPUT: u64 = 10;
pub(super) const IOC_SET_BPF: libc::c_ulong = 0x4004_2408;

/// `perf_event_attr` flag bits.
pub(super) mod flag {
    pub const DISABLED: u64 = 1;
    pub const MMAP: u64 = 1 << 8;
    pub const COMM: u64 = 1 << 9;
    pub const TASK: u64 = 1 << 13;
    pub const WATERMARK: u64 = 1 << 14;
    pub const SAMPLE_ID_ALL: u64 = 1 << 18;
    pub const EXCLUDE_CALLCHAIN_USER: u64 = 1 << 22;
    pub const MMAP2: u64 = 1 << 23;
    pub const COMM_EXEC: u64 = 1 << 24;
    pub const USE_CLOCKID: u64 = 1 << 25;
}

pub(super) const IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
pub(super) const IOC_SET_FILTER: libc::c_ulong = 0x4008_2406;
pub(super) const IOC_ID: libc::c_ulong = 0x8008_2407;
pub(super) const FLAG_FD_CLOEXEC: libc::c_ulong = 8;

pub(super) fn perf_event_open(attr: &PerfEventAttr, pid: i32, cpu: i32) -> io::Result<OwnedFd> {
    // SAFETY: the attribute is a valid, fully initialised perf_event_attr of `size` bytes.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const PerfEventAttr,
            pid,
            cpu,
            -1 as libc::c_int,
            FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The message for a failed `perf_event_open`.
pub(super) fn open_error(what: &str, e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            format!("could not enable tracing: perf events need root (or CAP_PERFMON): {what}: {e}")
        }
        Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => {
            format!(
                "could not enable tracing: perf events are unavailable on this system: {what}: {e}"
            )
        }
        _ => format!("could not enable tracing: {what}: {e}"),
    }
}

/// Whether this process can open perf events (a side-band event on CPU 0).
pub fn available() -> Result<(), String> {
    let attr = PerfEventAttr {
        kind: TYPE_SOFTWARE,
        size: ATTR_SIZE,
        config: SW_DUMMY,
        ..Default::default()
    };
    perf_event_open(&attr, -1, 0)
        .map(drop)
        .map_err(|e| open_error("perf_event_open", &e))
}

/// The tracefs mount: an existing one, or `/sys/kernel/tracing` mounted now.
pub fn tracefs() -> Result<PathBuf, String> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 3 && f[2] == "tracefs" && Path::new(f[1]).join("events").is_dir() {
            return Ok(PathBuf::from(f[1]));
        }
    }
    for p in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if Path::new(p).join("events").is_dir() {
            return Ok(PathBuf::from(p));
        }
    }
    let target = "/sys/kernel/tracing";
    let (src, dir, fs) = (c"nodev", c"/sys/kernel/tracing", c"tracefs");
    // SAFETY: all pointers are NUL-terminated strings; no data argument.
    let r = unsafe { libc::mount(src.as_ptr(), dir.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(format!(
            "could not enable tracing: tracefs is not mounted and mounting it on {target} failed: {e}"
        ));
    }
    if Path::new(target).join("events").is_dir() {
        Ok(PathBuf::from(target))
    } else {
        Err(format!(
            "could not enable tracing: tracefs mounted on {target} has no events directory"
        ))
    }
}

/// The CPUs listed in `/sys/devices/system/cpu/online` (`0-3,5`).
pub(super) fn online_cpus() -> Vec<u32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut v = Vec::new();
    for part in text.trim().split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    v.extend(a..=b.min(a + 4096));
                }
            }
            None => v.extend(part.parse::<u32>().ok()),
        }
    }
    if v.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        v.extend(0..n as u32);
    }
    v
}

/// One CPU's ring buffer.
pub(super) struct Ring {
    base: *mut u8,
    len: usize,
    data_off: usize,
    data_size: u64,
    tail: u64,
    pub(super) fd: OwnedFd,
    pub(super) cpu: u32,
}

impl Ring {
    pub(super) fn map(fd: OwnedFd, cpu: u32, pages: usize) -> io::Result<Ring> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let len = (pages + 1) * page;
        // SAFETY: mapping a perf descriptor's ring as the ABI describes; checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = base as *mut u8;
        // SAFETY: the header page is mapped; data_offset/data_size are at 1040/1048.
        let (off, size) = unsafe {
            (
                std::ptr::read_volatile(base.add(1040) as *const u64),
                std::ptr::read_volatile(base.add(1048) as *const u64),
            )
        };
        let (data_off, data_size) = if off != 0 && size != 0 {
            (off as usize, size)
        } else {
            (page, (pages * page) as u64)
        };
        Ok(Ring {
            base,
            len,
            data_off,
            data_size,
            tail: 0,
            fd,
            cpu,
        })
    }

    fn head(&self) -> &AtomicU64 {
        // SAFETY: data_head is an aligned u64 at offset 1024 of the mapped header page.
        unsafe { &*(self.base.add(1024) as *const AtomicU64) }
    }

    fn tail_word(&self) -> &AtomicU64 {
        // SAFETY: data_tail is an aligned u64 at offset 1032 of the mapped header page.
        unsafe { &*(self.base.add(1032) as *const AtomicU64) }
    }

    /// Copies every complete record written since the last drain to `out` and frees the space.
    pub(super) fn drain(&mut self, out: &mut Vec<u8>) {
        let head = self.head().load(Ordering::Acquire);
        let n = head.wrapping_sub(self.tail).min(self.data_size) as usize;
        if n == 0 {
            return;
        }
        let size = self.data_size as usize;
        let start = (self.tail % self.data_size) as usize;
        let first = n.min(size - start);
        // SAFETY: [data_off, data_off + size) is the mapped data area; the kernel does not
        // write the range between tail and head until the tail moves past it.
        unsafe {
            let data = self.base.add(self.data_off);
            out.extend_from_slice(std::slice::from_raw_parts(data.add(start), first));
            out.extend_from_slice(std::slice::from_raw_parts(data, n - first));
        }
        self.tail = head;
        self.tail_word().store(head, Ordering::Release);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `map` mapped.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}

pub(super) fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Why [`attach_program`] failed: opening the event, or attaching the program to it.
pub(super) enum AttachFailed {
    Open(io::Error),
    SetBpf(io::Error),
}

/// Attaches the loaded tracepoint program `prog` to tracepoint `id` through an event of
/// dtx's own on `cpu`, which holds it there (closing the event detaches it). A tracepoint's
/// programs belong to the tracepoint: attached through one event, on one CPU, the program
/// runs at every hit on every CPU. dtx's programs return 1, keeping the tracepoint's samples
/// for the other perf events on it (dtx's own, another tool's): the kernel drops them all
/// when one of the tracepoint's programs returns 0 (`perf_trace_run_bpf_submit` in
/// `kernel/events/core.c`). The event is never enabled, so it is on no CPU's list of the
/// tracepoint's events and takes no samples (the program runs all the same), and `never`,
/// a filter no record of the tracepoint matches, would keep it from taking any if it were.
pub(super) fn attach_program(
    id: u32,
    cpu: i32,
    prog: &OwnedFd,
    never: &std::ffi::CStr,
) -> Result<OwnedFd, AttachFailed> {
    let attr = PerfEventAttr {
        kind: TYPE_TRACEPOINT,
        size: ATTR_SIZE,
        config: u64::from(id),
        sample_period: 1,
        flags: flag::DISABLED,
        ..Default::default()
    };
    let fd = perf_event_open(&attr, -1, cpu).map_err(AttachFailed::Open)?;
    // SAFETY: a NUL-terminated filter string for SET_FILTER.
    unsafe { libc::ioctl(fd.as_raw_fd(), IOC_SET_FILTER, never.as_ptr()) };
    // SAFETY: SET_BPF takes a loaded tracepoint program's descriptor.
    if unsafe { libc::ioctl(fd.as_raw_fd(), IOC_SET_BPF, prog.as_raw_fd()) } != 0 {
        return Err(AttachFailed::SetBpf(io::Error::last_os_error()));
    }
    Ok(fd)
}

/// `read_format` bit: a `read()` of the event gives its lost samples after its value.
const FORMAT_LOST: u64 = 1 << 4;

/// Whether the kernel counts each event's lost samples (`PERF_FORMAT_LOST`, Linux 6.0):
/// asked once, by opening a dummy event of dtx's own with it.
fn lost_counted() -> bool {
    static KNOWN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *KNOWN.get_or_init(|| {
        let a = PerfEventAttr {
            kind: TYPE_SOFTWARE,
            size: ATTR_SIZE,
            config: SW_DUMMY,
            read_format: FORMAT_LOST,
            flags: flag::DISABLED,
            ..Default::default()
        };
        perf_event_open(&a, 0, -1).is_ok()
    })
}

/// The samples the kernel could not write for the event `fd` (opened by [`finish`]'s
/// attributes), where the kernel counts them: the ring was full. A loss the kernel reports
/// with a LOST record only when a later record fits, so one at the end of a run is known
/// only this way.
pub(super) fn lost_samples(fd: std::os::fd::RawFd) -> Option<u64> {
    if !lost_counted() {
        return None;
    }
    let mut v = [0u64; 2];
    // SAFETY: read(2) of at most 16 bytes into a 16-byte buffer.
    let n = unsafe { libc::read(fd, v.as_mut_ptr().cast(), 16) };
    (n == 16).then_some(v[1])
}

/// Attribute fields every event shares: size, the clock, the sample-id trailer, wakeups.
pub(super) fn finish(mut a: PerfEventAttr, data_bytes: u32) -> PerfEventAttr {
    if lost_counted() {
        a.read_format |= FORMAT_LOST;
    }
    a.size = ATTR_SIZE;
    a.flags |= flag::SAMPLE_ID_ALL | flag::USE_CLOCKID | flag::WATERMARK;
    a.clockid = libc::CLOCK_MONOTONIC;
    a.wakeup_watermark = (data_bytes / 4).max(4096);
    a
}

pub(super) fn event_id(fd: &OwnedFd) -> Result<u64, String> {
    let mut id = 0u64;
    // SAFETY: PERF_EVENT_IOC_ID writes one u64.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), IOC_ID, &mut id as *mut u64) };
    if r != 0 {
        return Err(format!(
            "could not enable tracing: perf event id: {}",
            io::Error::last_os_error()
        ));
    }
    Ok(id)
}
