//! A thread's shadow stack of swapped return addresses, the same on every platform: a probed
//! function's entry swaps its return address for the return stub and keeps the original here;
//! the return stub takes it back.

use crate::layout::Header;
use std::sync::atomic::Ordering;

/// Return addresses a thread keeps for probed returns.
pub const SHADOW: usize = 512;

/// One swapped return address.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Shadow {
    /// Where the return address was (the stack pointer at the function's entry).
    pub slot: u64,
    /// The original return address.
    pub ret: u64,
    /// The function's descriptor.
    pub desc: u64,
}

/// The entries of one thread (zeroed memory is an empty stack).
#[repr(C)]
pub struct ShadowStack {
    depth: u64,
    entries: [Shadow; SHADOW],
}

impl ShadowStack {
    /// Swaps the return address at `slot` for `stub`, keeping it with `desc`; a full stack
    /// leaves it alone and counts the missed return probe in the header.
    ///
    /// # Safety
    /// `slot` is the hooked function's return address slot, on the calling thread's stack.
    pub unsafe fn swap(&mut self, h: &Header, slot: *mut u64, desc: u64, stub: u64) {
        let d = self.depth as usize;
        if d >= SHADOW {
            h.shadow_full.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.entries[d] = Shadow {
            slot: slot as u64,
            ret: *slot,
            desc,
        };
        self.depth += 1;
        *slot = stub;
    }

    /// Takes the entry of the return address slot `slot` (a return stub's); entries of deeper
    /// frames an exception or a longjmp left are below it and are dropped. None when there is
    /// no entry: the return stub cannot know where to go.
    pub fn take(&mut self, slot: u64) -> Option<Shadow> {
        let mut d = self.depth as usize;
        while d > 1 && self.entries[d - 1].slot < slot {
            d -= 1;
        }
        if d == 0 {
            return None;
        }
        self.depth = (d - 1) as u64;
        Some(self.entries[d - 1])
    }
}
