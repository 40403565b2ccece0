//! The `bpf(2)` calls dtx makes, over `libc`: maps (create, update, lookup, walk), and the
//! loading of tracepoint programs with the verifier's last line as the error. Everything is
//! held by descriptors: closing them frees it, on every exit of dtx.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::bpf::asm::Insn;

/// `union bpf_attr` for the commands used, zero-padded as the kernel expects.
#[repr(C)]
struct BpfAttr([u64; 16]);

fn bpf(cmd: i64, attr: &mut BpfAttr) -> io::Result<i64> {
    // SAFETY: `attr` is a zero-padded bpf_attr of its full size for this command.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut BpfAttr,
            std::mem::size_of::<BpfAttr>(),
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl BpfAttr {
    /// Writes `name` (cut to 15 bytes, NUL-terminated) at byte `at`: a map's or program's
    /// object name, which `bpftool` shows.
    fn set_name(&mut self, at: usize, name: &str) {
        let mut bytes = [0u8; 128];
        for (i, w) in self.0.iter().enumerate() {
            bytes[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        let n = name.len().min(15);
        bytes[at..at + n].copy_from_slice(&name.as_bytes()[..n]);
        for (i, w) in self.0.iter_mut().enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
            *w = u64::from_le_bytes(b);
        }
    }
}

fn owned(fd: i64) -> OwnedFd {
    // SAFETY: a new descriptor returned by the kernel that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd as i32) }
}

/// A BPF map.
pub fn create_map(kind: u32, key: u32, value: u32, entries: u32) -> io::Result<OwnedFd> {
    create_named_map(kind, key, value, entries, "dtx")
}

/// A BPF map with an object name.
pub fn create_named_map(
    kind: u32,
    key: u32,
    value: u32,
    entries: u32,
    name: &str,
) -> io::Result<OwnedFd> {
    let mut a = BpfAttr([0; 16]);
    a.0[0] = kind as u64 | (key as u64) << 32;
    a.0[1] = value as u64 | (entries as u64) << 32;
    a.set_name(28, name);
    bpf(0, &mut a).map(owned)
}

/// Copies the value of `key` into `value` (for a per-CPU map, every possible CPU's value,
/// each rounded up to 8 bytes); false when the map has no such key.
pub fn lookup(map: &OwnedFd, key: &[u8], value: &mut [u8]) -> bool {
    let mut a = BpfAttr([0; 16]);
    a.0[0] = map.as_raw_fd() as u64;
    a.0[1] = key.as_ptr() as u64;
    a.0[2] = value.as_mut_ptr() as u64;
    bpf(1, &mut a).is_ok()
}

/// The key after `key` (the first key with `None`) into `next`; false after the last.
pub fn next_key(map: &OwnedFd, key: Option<&[u8]>, next: &mut [u8]) -> bool {
    let mut a = BpfAttr([0; 16]);
    a.0[0] = map.as_raw_fd() as u64;
    a.0[1] = key.map_or(0, |k| k.as_ptr() as u64);
    a.0[2] = next.as_mut_ptr() as u64;
    bpf(4, &mut a).is_ok()
}

/// Sets `map[key] = value` (u32 key and value: a perf event array's slot).
pub fn update_u32(map: &OwnedFd, key: u32, value: u32) -> io::Result<()> {
    let mut a = BpfAttr([0; 16]);
    a.0[0] = map.as_raw_fd() as u64;
    a.0[1] = &key as *const u32 as u64;
    a.0[2] = &value as *const u32 as u64;
    bpf(2, &mut a).map(drop)
}

/// Loads a tracepoint program; the verifier's log comes back in the error.
pub fn load_program(insns: &[Insn]) -> Result<OwnedFd, String> {
    load_named_program(insns, "dtx_capture")
}

/// [`load_program`] with an object name (`bpftool prog` shows it).
pub fn load_named_program(insns: &[Insn], name: &str) -> Result<OwnedFd, String> {
    const PROG_TYPE_TRACEPOINT: u64 = 5;
    // the kernel offers the helpers that read user memory and write perf events to programs
    // declaring a GPL-compatible license only; dtx (MIT) is GPL-compatible
    let license = c"GPL";
    let mut log = vec![0u8; 64 * 1024];
    let mut a = BpfAttr([0; 16]);
    a.0[0] = PROG_TYPE_TRACEPOINT | (insns.len() as u64) << 32;
    a.0[1] = insns.as_ptr() as u64;
    a.0[2] = license.as_ptr() as u64;
    a.0[3] = 1 | (log.len() as u64) << 32;
    a.0[4] = log.as_mut_ptr() as u64;
    a.set_name(48, name);
    match bpf(5, &mut a) {
        Ok(fd) => Ok(owned(fd)),
        Err(e) => {
            let n = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..n]);
            let last = text
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            Err(format!(
                "{e}{}",
                if last.is_empty() {
                    String::new()
                } else {
                    format!(" ({last})")
                }
            ))
        }
    }
}

pub const MAP_HASH: u32 = 1;
pub const MAP_ARRAY: u32 = 2;
pub const MAP_PERF_EVENT_ARRAY: u32 = 4;
pub const MAP_PERCPU_ARRAY: u32 = 6;
pub const MAP_PERCPU_HASH: u32 = 5;
