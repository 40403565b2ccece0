//! User stacks of `profile-N` samples unwound in dtx: the kernel copies the sampled thread's
//! user registers and the top of its user stack into the sample (`PERF_SAMPLE_REGS_USER`,
//! `PERF_SAMPLE_STACK_USER`), and the frames are found with the call frame information
//! (`.eh_frame`) of the process's modules, the unwinder the pid provider uses
//! ([`crate::sources::debugger::walk_stack_in`]). So code built without frame pointers (`-O2`,
//! `-fomit-frame-pointer`, most distributions' libraries) shows its callers. `perf record
//! --call-graph dwarf` works the same way.

use std::collections::HashMap;
use std::sync::Arc;

use super::record::x86_reg;
use super::uprobe::{sampled_regs, SampledStack};
use crate::fasthash::FastMap;
use crate::sources::debugger::{walk_stack_in, Regs, RSP};
use crate::symbols::{ElfImage, ProcessModules};
use crate::vm::AddressSpace;

/// Bytes of user stack each sample copies: deep enough for the callers of most programs
/// (perf's own default is 8 KiB), small enough that a sample fits a ring many times over.
pub const STACK_BYTES: u32 = 16 * 1024;

/// The registers asked of every sample.
pub const REGS_MASK: u64 = x86_reg::MASK;

/// How often (ns) a process's module list may be read again for an address outside it (code
/// mapped after the list was read: `dlopen`, a JIT).
const REREAD_NS: u64 = 1_000_000_000;

/// One process's modules and when they were read.
struct Known {
    modules: Arc<ProcessModules>,
    read_at: u64,
}

/// The module lists of the processes sampled, and the images they share.
#[derive(Default)]
pub struct UserStacks {
    processes: FastMap<u32, Known>,
    images: HashMap<String, Arc<ElfImage>>,
    /// Each process's file mappings as the kernel's side-band records (and a reading of
    /// `/proc` when the run began) gave them, in `/proc/PID/maps` form: what stands for
    /// `/proc/PID/maps` once the process is gone (one that lived a millisecond is gone before
    /// its events are read).
    recorded: FastMap<u32, String>,
}

impl UserStacks {
    /// Forgets `pid`'s modules (after an `exec` replaced them): its mappings are recorded
    /// anew.
    pub fn forget(&mut self, pid: u32) {
        self.processes.remove(&pid);
        self.recorded.remove(&pid);
    }

    /// Records the file mappings of every process alive now (from `/proc`), for those that
    /// will be gone when their events are read.
    pub fn record_running(&mut self) {
        for pid in super::numbered_entries("/proc") {
            let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
                continue;
            };
            // the files' executable segments and where each file starts: what the module
            // list is made of
            let files: String = maps
                .lines()
                .filter(|l| {
                    let mut f = l.split(' ');
                    let perms = f.nth(1).unwrap_or("");
                    let offset = f.next().unwrap_or("");
                    l.contains(" /")
                        && (perms.as_bytes().get(2) == Some(&b'x')
                            || offset.bytes().all(|b| b == b'0'))
                })
                .flat_map(|l| [l, "\n"])
                .collect();
            if !files.is_empty() {
                self.recorded.insert(pid, files);
            }
        }
    }

    /// Records a file mapped into process `pid` at `addr` (`len` bytes from file offset
    /// `pgoff`, protection `prot`). A mapping at an offset past 0 of a file not mapped from 0
    /// yet (an executable segment: the kernel reports only those) also records where the file
    /// starts, which the module list takes the load address from.
    pub fn record_mapping(
        &mut self,
        pid: u32,
        addr: u64,
        len: u64,
        pgoff: u64,
        prot: u32,
        file: &str,
    ) {
        use std::fmt::Write;
        if !file.starts_with('/') {
            return;
        }
        let text = self.recorded.entry(pid).or_default();
        if pgoff > 0 && addr >= pgoff && !text.contains(&format!(" {file}\n")) {
            let _ = writeln!(
                text,
                "{:x}-{addr:x} r--p 00000000 00:00 0 {file}",
                addr - pgoff
            );
        }
        let flag = |bit: u32, c: char| if prot & bit != 0 { c } else { '-' };
        let _ = writeln!(
            text,
            "{addr:x}-{:x} {}{}{}p {pgoff:08x} 00:00 0 {file}",
            addr.saturating_add(len),
            flag(1, 'r'),
            flag(2, 'w'),
            flag(4, 'x'),
        );
    }

    /// A process `child` forked from `parent`: it has the parent's mappings.
    pub fn record_fork(&mut self, parent: u32, child: u32) {
        if let Some(t) = self.recorded.get(&parent).cloned() {
            self.recorded.insert(child, t);
        }
    }

    /// Process `pid` exited: its events are all read (they come before its exit in time).
    pub fn record_exit(&mut self, pid: u32) {
        self.recorded.remove(&pid);
    }

    /// The mappings recorded for `pid`, in `/proc/PID/maps` form.
    pub fn recorded(&self, pid: u32) -> Option<&str> {
        self.recorded.get(&pid).map(String::as_str)
    }

    /// The modules of `pid` (read from `/proc` the first time), re-read when `pc` is outside
    /// all of them and the last reading is old enough.
    fn modules(&mut self, pid: u32, pc: u64, now: u64) -> Arc<ProcessModules> {
        let stale = match self.processes.get(&pid) {
            None => true,
            Some(k) => {
                k.modules.module_at(pc).is_none() && now.saturating_sub(k.read_at) >= REREAD_NS
            }
        };
        if stale {
            let mut maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
            if maps.is_empty() {
                // gone: what its side-band records said
                maps = self.recorded.get(&pid).cloned().unwrap_or_default();
            }
            let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            let modules = Arc::new(ProcessModules::from_maps(&maps, &exe, &mut self.images));
            self.processes.insert(
                pid,
                Known {
                    modules,
                    read_at: now,
                },
            );
        }
        self.processes
            .get(&pid)
            .map(|k| k.modules.clone())
            .unwrap_or_default()
    }

    /// Unwinds the user stack of a sample of process `pid` into `out` (innermost first, at
    /// most `max` frames) from its registers (`reg` answers for an `x86_reg` index) and its
    /// stack copy; returns the registers, or `None` when the sample has no user context.
    pub fn unwind(
        &mut self,
        pid: u32,
        reg: impl Fn(u32) -> Option<u64>,
        stack: &[u8],
        now: u64,
        max: usize,
        out: &mut Vec<u64>,
    ) -> Option<Regs> {
        out.clear();
        let regs = sampled_regs(reg);
        if regs.rip == 0 {
            return None;
        }
        let modules = self.modules(pid, regs.rip, now);
        let mem = SampledStack {
            base: regs.gpr[RSP],
            bytes: stack,
        };
        let read = |a: u64| {
            let mut b = [0u8; 8];
            mem.read(a, &mut b).ok().map(|_| u64::from_le_bytes(b))
        };
        walk_stack_in(&read, &modules, &regs, false, max, out);
        Some(regs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test's own thread, unwound from registers and a stack copy taken here: the walk
    /// reaches the functions that called the one taking the copy.
    #[test]
    fn a_copy_of_this_threads_stack_unwinds_through_its_callers() {
        #[inline(never)]
        fn take(out: &mut (u64, u64, u64, Vec<u8>)) {
            let (rip, rsp, rbp): (u64, u64, u64);
            // SAFETY: reads three registers; no memory is touched.
            unsafe {
                std::arch::asm!(
                    "lea {ip}, [rip]", "mov {sp}, rsp", "mov {bp}, rbp",
                    ip = out(reg) rip, sp = out(reg) rsp, bp = out(reg) rbp,
                );
            }
            // as the kernel copies it: from rsp up to the end of the stack's mapping, at most
            // STACK_BYTES; one iovec per page, so that the read stops at the first page
            // that is not mapped
            let mut copy = vec![0u8; STACK_BYTES as usize];
            let mut local = Vec::new();
            let mut remote = Vec::new();
            let mut at = 0usize;
            while at < copy.len() {
                let addr = rsp as usize + at;
                let n = (4096 - addr % 4096).min(copy.len() - at);
                local.push(libc::iovec {
                    iov_base: copy[at..].as_mut_ptr() as *mut libc::c_void,
                    iov_len: n,
                });
                remote.push(libc::iovec {
                    iov_base: addr as *mut libc::c_void,
                    iov_len: n,
                });
                at += n;
            }
            // SAFETY: every local iovec lies in `copy`; the kernel checks the remote ones.
            let got = unsafe {
                libc::process_vm_readv(
                    libc::getpid(),
                    local.as_ptr(),
                    local.len() as libc::c_ulong,
                    remote.as_ptr(),
                    remote.len() as libc::c_ulong,
                    0,
                )
            };
            copy.truncate(got.max(0) as usize);
            *out = (rip, rsp, rbp, copy);
        }
        #[inline(never)]
        fn dtx_ustack_caller_two(out: &mut (u64, u64, u64, Vec<u8>)) {
            take(out);
            std::hint::black_box(&out);
        }
        #[inline(never)]
        fn dtx_ustack_caller_one(out: &mut (u64, u64, u64, Vec<u8>)) {
            dtx_ustack_caller_two(out);
            std::hint::black_box(&out);
        }
        let mut got = (0, 0, 0, Vec::new());
        dtx_ustack_caller_one(&mut got);
        let (rip, rsp, rbp, copy) = got;
        let mut stacks = UserStacks::default();
        let mut frames = Vec::new();
        let reg = |i: u32| match i {
            x86_reg::IP => Some(rip),
            x86_reg::SP => Some(rsp),
            x86_reg::BP => Some(rbp),
            _ => Some(0),
        };
        let regs = stacks.unwind(std::process::id(), reg, &copy, 0, 64, &mut frames);
        assert_eq!(regs.map(|r| r.rip), Some(rip));
        let syms = crate::symbols::LiveSymbols::new();
        use crate::agg::SymbolResolver;
        let names: Vec<String> = frames
            .iter()
            .map(|&pc| syms.user(std::process::id(), pc))
            .collect();
        let at = |n: &str| names.iter().position(|f| f.contains(n));
        let (two, one) = (at("dtx_ustack_caller_two"), at("dtx_ustack_caller_one"));
        assert!(
            matches!((two, one), (Some(a), Some(b)) if a < b),
            "{names:#?}"
        );
        // no registers: no user context
        assert!(stacks
            .unwind(1, |_| None, &[], 0, 64, &mut frames)
            .is_none());
        assert!(frames.is_empty());
    }
}
