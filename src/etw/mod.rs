//! The ETW data model with no Windows dependency: the event view shared by the .etl reader and
//! the live session, decoders, and the system state rebuilt from events.

pub mod catalog;
pub mod decode;
pub mod provider_guid;
pub mod reader;
pub mod record;
pub mod state;
pub mod tlg_event;

/// Kernel groups (`HookId >> 8`).
pub mod group {
    pub const DISK_IO: u8 = 0x01;
    pub const PAGE_FAULT: u8 = 0x02;
    pub const PROCESS: u8 = 0x03;
    pub const FILE_IO: u8 = 0x04;
    pub const THREAD: u8 = 0x05;
    pub const TCP_IP: u8 = 0x06;
    pub const UDP_IP: u8 = 0x08;
    pub const REGISTRY: u8 = 0x09;
    pub const CONFIG: u8 = 0x0B;
    pub const PERF_INFO: u8 = 0x0F;
    pub const IMAGE: u8 = 0x14;
    pub const STACK_WALK: u8 = 0x18;
}

/// Opcodes of kernel events that code outside the decoder's tables reads by number.
pub mod opcode {
    /// Thread group: CSwitch (a context switch) and ReadyThread.
    pub const CSWITCH: u8 = 36;
    pub const READY_THREAD: u8 = 50;
    /// PerfInfo group: SysClEnter and SysClExit (a system call's entry and exit).
    pub const SYSCALL_ENTER: u8 = 51;
    pub const SYSCALL_EXIT: u8 = 52;
}

/// Kernel addresses: the upper half of the address space.
pub fn is_kernel_address(pc: u64, pointer_size: u8) -> bool {
    if pointer_size == 4 {
        pc >= 0x8000_0000
    } else {
        pc >= 0xffff_8000_0000_0000
    }
}
