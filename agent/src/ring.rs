//! Appending one record to the shared ring, the same on every platform: reserve room by a
//! compare-and-swap on `head` (a full ring makes the thread wait, bounded, for dtx to free
//! room: see `layout.rs`), write the body in the ring's small form, then publish the first
//! word.

use super::layout::{
    Header, Hook, Record, COMMITTED, HEADER_BYTES, KIND_RETURN, WIRE_HEAD_WORDS, WORD_RETURN,
    WORD_VALUES_SHIFT,
};
use std::sync::atomic::{AtomicU64, Ordering};

/// What a writer needs of its platform to wait for room.
pub struct Waiter {
    /// A monotonic clock in ns.
    pub now_ns: unsafe fn() -> u64,
    /// Lets other threads run for a while; `round` counts the pauses of this wait so far
    /// (the first ones may spin).
    pub pause: unsafe fn(round: u32),
}

/// The value words `r` carries in the ring: a return's `ret_regs`; an entry's `arg_regs`, or
/// all ten when the header asks for the stack arguments.
pub fn values(h: &Header, r: &Record, arg_regs: usize, ret_regs: usize) -> usize {
    if r.kind == KIND_RETURN {
        ret_regs
    } else if h.stack_args != 0 {
        r.args.len()
    } else {
        arg_regs
    }
}

/// Waits for `len` bytes of room past `head`; false when the wait ran out (the ring is then
/// stalled), or tracing ended meanwhile.
///
/// # Safety
/// `h` is a mapped header; `w`'s functions may be called on this thread.
unsafe fn wait_for_room(h: &Header, len: u64, w: &Waiter) -> bool {
    if h.wait_ns == 0 || h.stalled.load(Ordering::Relaxed) != 0 {
        return false;
    }
    h.waits.fetch_add(1, Ordering::Relaxed);
    let mut seen = (
        h.tail.load(Ordering::Acquire),
        h.beat.load(Ordering::Relaxed),
    );
    let mut since = (w.now_ns)();
    let mut round = 0u32;
    loop {
        (w.pause)(round);
        round = round.saturating_add(1);
        if h.enabled.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let tail = h.tail.load(Ordering::Acquire);
        let head = h.head.load(Ordering::Relaxed);
        if head.wrapping_add(len).wrapping_sub(tail) <= h.ring_size {
            return true;
        }
        let now = (w.now_ns)();
        let beat = h.beat.load(Ordering::Relaxed);
        if (tail, beat) != seen {
            // dtx is there, freeing room: the bound is on a wait without a sign of it
            seen = (tail, beat);
            since = now;
        } else if now.wrapping_sub(since) > h.wait_ns {
            h.stalled.store(1, Ordering::Relaxed);
            return false;
        }
    }
}

/// Appends `r` with `values` of its value words (its `args`) and `stack_len` bytes (a
/// multiple of 8) read from `stack`; a full ring waits for room as `w` allows, then counts a
/// drop.
///
/// # Safety
/// `h` is the mapped header of a ring it describes; `stack` is readable for `stack_len` bytes.
pub unsafe fn append(
    h: &Header,
    r: &Record,
    values: usize,
    stack: *const u8,
    stack_len: usize,
    w: &Waiter,
) {
    let values = values.min(r.args.len());
    let ret = r.kind == KIND_RETURN;
    let words = WIRE_HEAD_WORDS + ret as usize + values;
    let len = (8 * words + stack_len) as u64;
    let size = h.ring_size;
    if len > size {
        h.drops.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let mut head = h.head.load(Ordering::Relaxed);
    loop {
        let tail = h.tail.load(Ordering::Acquire);
        if head.wrapping_add(len).wrapping_sub(tail) > size {
            if !wait_for_room(h, len, w) {
                if h.enabled.load(Ordering::Relaxed) != 0 {
                    h.drops.fetch_add(1, Ordering::Relaxed);
                }
                return;
            }
            head = h.head.load(Ordering::Relaxed);
            continue;
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
    put(1, r.hook as u64 | (r.tid & 0xffff_ffff) << 32);
    put(2, r.time);
    put(3, r.rsp);
    put(4, r.rbp);
    let mut i = WIRE_HEAD_WORDS;
    if ret {
        put(i, r.pc);
        i += 1;
    }
    for v in &r.args[..values] {
        put(i, *v);
        i += 1;
    }
    for k in 0..stack_len / 8 {
        put(
            i + k,
            std::ptr::read_volatile(stack.add(8 * k) as *const u64),
        );
    }
    let first = &*(base.add((head & mask) as usize) as *const AtomicU64);
    let word =
        len | (values as u64) << WORD_VALUES_SHIFT | if ret { WORD_RETURN } else { 0 } | COMMITTED;
    first.store(word, Ordering::Release);
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
