//! What runs on each CPU, and the system call each thread is in, as the records say in time
//! order: a context switch (Thread CSwitch) puts its `NewThreadId` on the record's CPU; a
//! SysClEnter record starts a call of the thread on its CPU, the next SysClExit of that thread
//! ends it. The records of interrupts, DPCs and system calls name no thread (PerfInfo header, no
//! thread in the payload): they ran on a CPU, in the context of the thread that was on it, which
//! is where DTrace's `curthread` points in interrupt context and in a system call. Read straight
//! from the payload (the records need not be decoded), so that a walk that steps over the
//! records no probe reads still costs nothing per record here.
//!
//! The payloads read: CSwitch's `NewThreadId` (u32 at 0 in every version from 2, FORMAT.md
//! 4.9, Microsoft Learn's CSwitch class) and SysClEnter's `SysCallAddress` (a pointer at 0,
//! Microsoft Learn's SysCallEnter class).

use crate::etw::decode::value::{le_ptr, le_u32};
use crate::etw::group::{PERF_INFO, THREAD};
use crate::etw::opcode::{CSWITCH, SYSCALL_ENTER, SYSCALL_EXIT};
use crate::etw::record::EventRecord;
use crate::fasthash::FastMap;

/// The address a SysClEnter record's call starts at (`SysCallAddress`, a pointer at 0).
pub fn syscall_address(ev: &EventRecord<'_>) -> Option<u64> {
    le_ptr(ev.payload, 0, ev.pointer_size)
}

/// The thread on each CPU, and the pending system call of each thread.
#[derive(Default)]
pub struct CpuThreads {
    /// By CPU number: the thread the last context switch put on it (`u32::MAX`: none seen yet).
    on_cpu: Vec<u32>,
    /// By thread: the address of the system call it entered and has not returned from.
    in_call: FastMap<u32, u64>,
    /// The address of the call the last SysClExit record returned from, when its thread was
    /// known and its entry was seen.
    returned: Option<u64>,
}

impl CpuThreads {
    /// Feeds one record (in time order).
    #[inline]
    pub fn observe(&mut self, ev: &EventRecord<'_>) {
        match (ev.kernel_group, ev.opcode) {
            (Some(THREAD), CSWITCH) => {
                if let Some(tid) = le_u32(ev.payload, 0) {
                    let cpu = ev.cpu as usize;
                    if self.on_cpu.len() <= cpu {
                        self.on_cpu.resize(cpu + 1, u32::MAX);
                    }
                    self.on_cpu[cpu] = tid;
                }
            }
            (Some(PERF_INFO), SYSCALL_ENTER) => {
                if let (Some(tid), Some(addr)) = (self.thread_on_cpu(ev.cpu), syscall_address(ev)) {
                    self.in_call.insert(tid, addr);
                }
            }
            (Some(PERF_INFO), SYSCALL_EXIT) => {
                self.returned = self
                    .thread_on_cpu(ev.cpu)
                    .and_then(|tid| self.in_call.remove(&tid));
            }
            _ => {}
        }
    }

    /// The thread the last context switch on `cpu` put on it; None before the first one.
    #[inline]
    pub fn thread_on_cpu(&self, cpu: u16) -> Option<u32> {
        self.on_cpu
            .get(cpu as usize)
            .copied()
            .filter(|&t| t != u32::MAX)
    }

    /// The address of the system call the last SysClExit record returned from, when its
    /// thread was known and its entry was seen.
    pub fn returned_call(&self) -> Option<u64> {
        self.returned
    }

    /// The address of the system call thread `tid` is in (entered, not yet returned).
    pub fn call_of(&self, tid: u32) -> Option<u64> {
        self.in_call.get(&tid).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etw::record::{Guid, HeaderKind};

    fn record(group: u8, opcode: u8, cpu: u16, payload: &[u8]) -> EventRecord<'_> {
        EventRecord {
            header_type: 0x11,
            kind: HeaderKind::PerfInfo,
            flags: 0,
            provider: Guid::default(),
            kernel_group: Some(group),
            id: 0,
            version: 2,
            channel: 0,
            level: 0,
            opcode,
            task: 0,
            keyword: 0,
            pid: u32::MAX,
            tid: u32::MAX,
            cpu,
            raw_timestamp: 0,
            time_ns: 0,
            wall_ns: 0,
            pointer_size: 8,
            activity_id: Guid::default(),
            payload,
            extended: Default::default(),
        }
    }

    fn cswitch(new: u32) -> Vec<u8> {
        let mut p = new.to_le_bytes().to_vec();
        p.resize(24, 0);
        p
    }

    #[test]
    fn each_cpu_runs_what_its_last_switch_put_on_it_and_calls_pair_by_thread() {
        let mut c = CpuThreads::default();
        assert_eq!(c.thread_on_cpu(0), None);
        c.observe(&record(THREAD, CSWITCH, 1, &cswitch(700)));
        assert_eq!((c.thread_on_cpu(0), c.thread_on_cpu(1)), (None, Some(700)));
        // an entry on a CPU whose thread is unknown is not remembered
        c.observe(&record(PERF_INFO, SYSCALL_ENTER, 0, &0x10u64.to_le_bytes()));
        c.observe(&record(THREAD, CSWITCH, 0, &cswitch(500)));
        c.observe(&record(PERF_INFO, SYSCALL_ENTER, 0, &0x20u64.to_le_bytes()));
        c.observe(&record(PERF_INFO, SYSCALL_ENTER, 1, &0x30u64.to_le_bytes()));
        assert_eq!((c.call_of(500), c.call_of(700)), (Some(0x20), Some(0x30)));
        // thread 500 moves to CPU 1 while in its call and returns there
        c.observe(&record(THREAD, CSWITCH, 1, &cswitch(500)));
        c.observe(&record(PERF_INFO, SYSCALL_EXIT, 1, &0u32.to_le_bytes()));
        assert_eq!(c.returned_call(), Some(0x20));
        assert_eq!(c.call_of(500), None);
        // a second exit of the thread: its entry is gone
        c.observe(&record(PERF_INFO, SYSCALL_EXIT, 1, &0u32.to_le_bytes()));
        assert_eq!(c.returned_call(), None);
        assert_eq!(c.call_of(700), Some(0x30));
        // a short CSwitch payload changes nothing
        c.observe(&record(THREAD, CSWITCH, 1, &[1, 2]));
        assert_eq!(c.thread_on_cpu(1), Some(500));
    }
}
