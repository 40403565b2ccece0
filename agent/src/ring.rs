//! Appending one record to the shared ring, the same on every platform: reserve room by a
//! compare-and-swap on `head` (a full ring counts a drop, the thread never waits), write the
//! body, then publish the first word.

use crate::layout::{Header, Hook, Record, COMMITTED, HEADER_BYTES, RECORD_BYTES};
use std::sync::atomic::{AtomicU64, Ordering};

/// Appends `r` and `stack_len` bytes (a multiple of 8) read from `stack`; a full ring counts
/// a drop.
///
/// # Safety
/// `h` is the mapped header of a ring it describes; `stack` is readable for `stack_len` bytes.
pub unsafe fn append(h: &Header, r: &mut Record, stack: *const u8, stack_len: usize) {
    let len = (RECORD_BYTES + stack_len) as u64;
    let size = h.ring_size;
    if len > size {
        h.drops.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let mut head = h.head.load(Ordering::Relaxed);
    loop {
        let tail = h.tail.load(Ordering::Acquire);
        if head.wrapping_add(len).wrapping_sub(tail) > size {
            h.drops.fetch_add(1, Ordering::Relaxed);
            return;
        }
        match h.head.compare_exchange_weak(
            head,
            head.wrapping_add(len),
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => break,
            Err(now) => head = now,
        }
    }
    let mask = size - 1;
    let base = (h as *const Header as *mut u8).add(h.ring_offset as usize);
    // volatile word stores: no call to the C library's memcpy (it may clear the upper halves
    // of the vector registers the hooked function's caller passed arguments in)
    let put = |i: usize, v: u64| {
        let at = (head.wrapping_add(8 * i as u64) & mask) as usize;
        std::ptr::write_volatile(base.add(at) as *mut u64, v);
    };
    r.stack_len = stack_len as u64;
    let words = r as *const Record as *const u64;
    for i in 1..RECORD_BYTES / 8 {
        put(i, std::ptr::read(words.add(i)));
    }
    for k in 0..stack_len / 8 {
        put(
            RECORD_BYTES / 8 + k,
            std::ptr::read_volatile(stack.add(8 * k) as *const u64),
        );
    }
    let first = &*(base.add((head & mask) as usize) as *const AtomicU64);
    first.store(len | COMMITTED, Ordering::Release);
}

/// Entry `index` of the hook table that follows the header.
///
/// # Safety
/// `h` is the mapped header of a table of `h.hooks` entries.
pub unsafe fn hook(h: &Header, index: u64) -> Option<&Hook> {
    if index >= h.hooks {
        return None;
    }
    let base = h as *const Header as *const u8;
    Some(&*(base.add(HEADER_BYTES + index as usize * std::mem::size_of::<Hook>()) as *const Hook))
}
