//! The memory the fpid agent and dtx share for one traced process: a header, the table of
//! hooked functions, and a ring of hit records. dtx creates it as a file, the agent maps it;
//! both crates compile this one file (dtx through `#[path]`), so the layout has one
//! declaration.
//!
//! The ring is multi-producer (every thread of the target), single-consumer (dtx's drain
//! thread). A writer reserves `len` bytes by moving `head` forward with a compare-and-swap
//! (only when the reader's `tail` leaves room), writes the record, then publishes its first
//! word (`len | ... | COMMITTED`). The reader consumes published records in order, zeroes them
//! and moves `tail`.
//!
//! A full ring makes the writer wait for room while dtx is there to free it: it gives up after
//! `wait_ns` in which neither `tail` nor `beat` moved (dtx's drain thread bumps `beat` about
//! every millisecond while dtx consumes). Past that it counts a drop and sets `stalled`, and
//! from then on writers drop at once rather than wait again, until dtx (which drains on)
//! clears it. A dtx that died leaves `stalled` set: its target waits once, never again.
//!
//! A record in the ring is as small as it can be (see [`Record`] for its fields): the first
//! word (length, kind, how many value words), `hook | tid << 32`, `time`, `rsp`, `rbp`, then
//! at a return `pc`; then the value words (an entry's argument registers, and the stack
//! arguments when `stack_args` asks; a return's value registers); then the stack copy.

use std::sync::atomic::AtomicU64;

/// "dtxFPID1" in the first word.
pub const MAGIC: u64 = 0x3144_4950_4678_7464;

/// Bytes of the header; the hook table follows it.
pub const HEADER_BYTES: usize = 256;

/// The header at offset 0.
#[repr(C)]
pub struct Header {
    pub magic: u64,
    /// 1 while dtx traces; 0 makes every hook inert (no records, no new return hooks).
    pub enabled: AtomicU64,
    /// Entries of the hook table.
    pub hooks: u64,
    /// Offset and size (a power of two) of the ring.
    pub ring_offset: u64,
    pub ring_size: u64,
    /// Bytes reserved by writers, ever.
    pub head: AtomicU64,
    /// Bytes consumed by dtx, ever.
    pub tail: AtomicU64,
    /// Hits lost to a full ring.
    pub drops: AtomicU64,
    /// Bytes of the stack to copy into each record (for `ustack()`), 0 for none.
    pub stack_bytes: u64,
    /// Whether entry records carry the arguments past the registers (up to the tenth, read
    /// from the caller's stack): past six on Linux, past four on Windows.
    pub stack_args: u64,
    /// Written by the agent when it maps the file: its entry stub's address.
    pub entry_stub: AtomicU64,
    /// Return hooks not installed because a thread's shadow stack was full.
    pub shadow_full: AtomicU64,
    /// How long (ns) a writer waits for room in a full ring while dtx frees none; 0 drops at
    /// once.
    pub wait_ns: u64,
    /// Set by a writer whose wait ran out; cleared by dtx once it frees room again.
    pub stalled: AtomicU64,
    /// Times a writer found the ring full and waited (for dtx's figures).
    pub waits: AtomicU64,
    /// Bumped by dtx's drain thread about every millisecond while dtx consumes: a waiting
    /// writer's sign that dtx is there.
    pub beat: AtomicU64,
}

/// One hooked function.
#[repr(C)]
pub struct Hook {
    /// [`HOOK_ENTRY`] | [`HOOK_RETURN`]: the probes enabled on it.
    pub flags: AtomicU64,
    /// Windows: the function's address, which the agent hooks with MinHook (on Linux dtx
    /// patches the function itself and this is 0).
    pub addr: u64,
    /// Windows: written by the agent once it tried the hook, [`HOOK_PENDING`] before:
    /// [`HOOK_OK`], or MinHook's status code (`MH_STATUS`, positive) when it refused the
    /// function.
    pub status: AtomicU64,
}

/// A hook the agent has not tried yet.
pub const HOOK_PENDING: u64 = u64::MAX;
/// A hook the agent installed.
pub const HOOK_OK: u64 = 0;

pub const HOOK_ENTRY: u64 = 1;
pub const HOOK_RETURN: u64 = 2;

/// What a function's hook thunk hands the entry stub, in the code area dtx wrote near the
/// function (never freed: a thread may be in the trampoline at any time).
#[repr(C)]
pub struct Desc {
    /// This descriptor's own address (what the thunk pushes).
    pub this: u64,
    /// The agent's entry stub (where the thunk jumps).
    pub entry_stub: u64,
    /// The relocated first instructions of the function, then a jump back into it.
    pub trampoline: u64,
    /// The shared header in the target's address space.
    pub header: u64,
    /// Index in the hook table.
    pub index: u64,
}

/// Set in a record's first word once it is complete.
pub const COMMITTED: u64 = 1 << 63;
/// In a record's first word: the record is a return's.
pub const WORD_RETURN: u64 = 1 << 40;
/// Where the count of value words is in a record's first word (8 bits).
pub const WORD_VALUES_SHIFT: u32 = 32;
/// The length bits of a record's first word.
pub const WORD_LEN_MASK: u64 = 0xffff_ffff;
/// Words of a record in the ring before its value words: the first word, `hook | tid << 32`,
/// `time`, `rsp`, `rbp`.
pub const WIRE_HEAD_WORDS: usize = 5;
/// The smallest record in the ring (an entry without values or stack).
pub const WIRE_MIN_BYTES: usize = WIRE_HEAD_WORDS * 8;

/// Record kinds.
pub const KIND_ENTRY: u32 = 0;
pub const KIND_RETURN: u32 = 1;

/// A hit as the agent fills it and dtx reads it back; in the ring it takes the smaller form
/// the module's comment gives (`word`'s bits there are [`WORD_RETURN`], the value count and
/// the length; `tid` is 32 bits, as Linux and Windows thread ids are).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Record {
    /// Length in bytes (a multiple of 8) | [`COMMITTED`].
    pub word: u64,
    pub hook: u32,
    pub kind: u32,
    pub tid: u64,
    /// ns of the platform's monotonic clock: CLOCK_MONOTONIC on Linux,
    /// QueryPerformanceCounter on Windows.
    pub time: u64,
    /// At entry: the stack pointer at the function's first instruction. At return: just
    /// after the return (the caller's).
    pub rsp: u64,
    pub rbp: u64,
    /// At return: the address the function returned to.
    pub pc: u64,
    /// At entry the integer arguments; at return `rax`, `rdx`.
    pub args: [u64; 10],
    pub stack_len: u64,
}

/// Bytes of a record's fixed part.
pub const RECORD_BYTES: usize = std::mem::size_of::<Record>();
