//! The ETW data model with no Windows dependency: the event view shared by the .etl reader and
//! the live session, decoders, and the system state rebuilt from events.

pub mod catalog;
pub mod decode;
pub mod provider_guid;
pub mod reader;
pub mod record;
pub mod state;
pub mod tlg_event;

/// Kernel addresses: the upper half of the address space.
pub fn is_kernel_address(pc: u64, pointer_size: u8) -> bool {
    if pointer_size == 4 {
        pc >= 0x8000_0000
    } else {
        pc >= 0xffff_8000_0000_0000
    }
}
