//! The VM's address space: every D value that is not an integer (strings, structs, arrays) is an
//! address, as in DTrace. Addresses with the tag [`INTERNAL_TAG`] in their top 16 bits (never a
//! canonical x86-64 address) are the VM's own memory — string literals, scratch space, variable
//! storage; every other address is read through the firing's [`AddressSpace`] (an event payload,
//! a stopped target process), and a bad one faults.

/// Why a clause was aborted (DTrace's `DTRACEFLT_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    BadAddr(u64),
    BadAlign(u64),
    IllegalOp,
    DivZero,
    NoScratch,
    KPriv(u64),
    UPriv(u64),
    TupleOverflow,
    BadStack,
}

impl Fault {
    /// The `DTRACEFLT_*` code (`arg4` of the ERROR probe).
    pub fn code(self) -> u64 {
        match self {
            Fault::BadAddr(_) => 1,
            Fault::BadAlign(_) => 2,
            Fault::IllegalOp => 3,
            Fault::DivZero => 4,
            Fault::NoScratch => 5,
            Fault::KPriv(_) => 6,
            Fault::UPriv(_) => 7,
            Fault::TupleOverflow => 8,
            Fault::BadStack => 9,
        }
    }

    /// The faulting address (`arg5` of the ERROR probe), 0 when there is none.
    pub fn addr(self) -> u64 {
        match self {
            Fault::BadAddr(a) | Fault::BadAlign(a) | Fault::KPriv(a) | Fault::UPriv(a) => a,
            _ => 0,
        }
    }

    /// dtrace's words for the fault, as in its error messages.
    pub fn describe(self) -> String {
        match self {
            Fault::BadAddr(a) => format!("invalid address (0x{a:x})"),
            Fault::BadAlign(a) => format!("invalid alignment (0x{a:x})"),
            Fault::IllegalOp => "illegal operation".into(),
            Fault::DivZero => "divide-by-zero".into(),
            Fault::NoScratch => "out of scratch space".into(),
            Fault::KPriv(a) => format!("invalid kernel access (0x{a:x})"),
            Fault::UPriv(a) => format!("invalid user access (0x{a:x})"),
            Fault::TupleOverflow => "tuple stack overflow".into(),
            Fault::BadStack => "bad stack".into(),
        }
    }
}

/// Memory outside the VM: what a probe's pointers point into.
pub trait AddressSpace {
    /// Reads `buf.len()` bytes at `addr`, or faults.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault>;
    /// Writes (for `copyout`); most spaces are read-only.
    fn write(&self, addr: u64, _data: &[u8]) -> Result<(), Fault> {
        Err(Fault::BadAddr(addr))
    }
    /// The decoded field `name` of the event behind the firing as a number (`etwfield()`),
    /// when the firing has an event with that field.
    fn event_field(&self, _name: &[u8]) -> Option<u64> {
        None
    }
    /// The decoded field `name` as text (`etwfield_str()`), appended to `out`; false when the
    /// firing has no such field.
    fn event_field_str(&self, _name: &[u8], _out: &mut Vec<u8>) -> bool {
        false
    }
}

/// An address space with nothing mapped: every access faults.
pub struct NoMemory;

impl AddressSpace for NoMemory {
    fn read(&self, addr: u64, _buf: &mut [u8]) -> Result<(), Fault> {
        Err(Fault::BadAddr(addr))
    }
}

pub const INTERNAL_TAG: u64 = 0x0dd0;
const REGION_SHIFT: u32 = 40;

/// The VM's own regions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Region {
    /// String literals of the program.
    Strings = 1,
    /// Per-firing scratch (temporary strings, `alloca`, built structures).
    Scratch = 2,
    /// Storage of global variables that are strings, structs or arrays.
    Globals = 3,
    /// Dynamic variables (associative arrays, thread-locals).
    Dynamic = 4,
    /// Clause-local variables that are strings, structs or arrays.
    Locals = 5,
    /// The `struct thread` that `curthread` points at, built from the firing's context: at
    /// offset `tid << 8` (see [`super::thread::address`]).
    Thread = 6,
    /// The `struct thread` of a CPU's idle thread (thread 0): at offset `cpu << 8`.
    IdleThread = 7,
}

pub fn internal(region: Region, offset: usize) -> u64 {
    (INTERNAL_TAG << 48) | ((region as u64) << REGION_SHIFT) | offset as u64
}

/// Splits an internal address into its region and offset.
pub fn decode(addr: u64) -> Option<(Region, usize)> {
    if addr >> 48 != INTERNAL_TAG {
        return None;
    }
    let region = match (addr >> REGION_SHIFT) & 0xff {
        1 => Region::Strings,
        2 => Region::Scratch,
        3 => Region::Globals,
        4 => Region::Dynamic,
        5 => Region::Locals,
        6 => Region::Thread,
        7 => Region::IdleThread,
        _ => return None,
    };
    Some((region, (addr & ((1 << REGION_SHIFT) - 1)) as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_round_trip() {
        let a = internal(Region::Scratch, 1234);
        assert_eq!(decode(a), Some((Region::Scratch, 1234)));
        assert_eq!(decode(0x7fff_0000_1000), None);
        assert_eq!(decode(0), None);
        assert_eq!(Fault::BadAddr(0).describe(), "invalid address (0x0)");
    }
}
