//! What a hit does, the same on every platform: the entry and return stubs call these through
//! the platform's own `extern "C"` handlers, with the frame the stub built. The platform gives
//! the thread's state, the clock, the stack copy and where the stubs keep the registers
//! ([`Platform`]); everything else (the checks that let a hit pass through, the record, the
//! return address swapped on the shadow stack) is written once here.

use crate::layout::{Desc, Header, Record, HOOK_ENTRY, HOOK_RETURN, KIND_ENTRY, KIND_RETURN};
use crate::shadow::ShadowStack;
use std::sync::atomic::Ordering;

/// A thread's state: what every platform keeps, then the platform's own part. Mapped or
/// allocated zeroed at the thread's first hit (depth 0, not busy) and never freed: a thread
/// may be inside a hooked function when tracing ends.
#[repr(C)]
pub struct State<X> {
    pub tid: u64,
    /// Inside a handler: hits now (a hooked function the handler calls, a signal handler's
    /// calls) pass through.
    pub busy: u64,
    pub shadow: ShadowStack,
    /// The platform's part.
    pub extra: X,
}

/// The platform parts of a hit.
pub trait Platform {
    /// The platform's part of a thread's state.
    type Extra;
    /// Argument registers the entry stub saves right under its frame (`[rbp-8]` the first).
    const ARG_REGS: usize;
    /// Return value registers the return stub saves right under its frame (`[rbp-8]` the
    /// first).
    const RET_REGS: usize;
    /// The word above the entry frame where the arguments passed on the stack begin.
    const STACK_ARGS_AT: usize;

    /// Whether every hit passes through untraced (Linux: in a forked child).
    fn pass_through() -> bool {
        false
    }

    /// The calling thread's state, made at its first hit; null when it cannot be (no memory,
    /// or the state is being made by a hooked allocator).
    ///
    /// # Safety
    /// Called from a stub's handler on the thread hit.
    unsafe fn state() -> *mut State<Self::Extra>;

    /// The calling thread's state as it is, never made here; null when there is none.
    ///
    /// # Safety
    /// Called from a stub's handler on the thread hit.
    unsafe fn current() -> *mut State<Self::Extra>;

    /// The time a record is stamped with, in ns of the clock dtx reads too.
    ///
    /// # Safety
    /// Called after the agent attached.
    unsafe fn now_ns() -> u64;

    /// The `i`th word above `at`, on the calling thread's stack (0 where the platform knows
    /// it lies past the stack).
    ///
    /// # Safety
    /// `at` points into the calling thread's stack.
    unsafe fn stack_word(at: *const u64, i: usize) -> u64;

    /// Appends `r` to the ring and, when the header asks, a copy of the stack from `sp` up.
    ///
    /// # Safety
    /// `h` is a mapped header; `sp` is the calling thread's stack pointer at the hit.
    unsafe fn write(h: &Header, st: &mut State<Self::Extra>, r: &mut Record, sp: u64);

    /// The address of the return stub.
    fn return_stub() -> u64;
}

/// The flags of hook `index` of the table behind `h` (none when it has no such entry).
///
/// # Safety
/// `h` is a mapped header.
#[inline(always)]
unsafe fn flags(h: &Header, index: u64) -> u64 {
    crate::ring::hook(h, index).map_or(0, |k| k.flags.load(Ordering::Relaxed))
}

/// A hooked function was called: `frame` is the entry stub's (`[frame]` the saved rbp,
/// `[frame+8]` the descriptor, `[frame+16]` the return address, the argument registers below
/// it). Records the entry and swaps the return address when the hook asks; returns the
/// trampoline.
///
/// # Safety
/// Called by the entry stub with its frame.
#[inline(always)]
pub unsafe fn on_entry<P: Platform>(frame: *mut u64) -> u64 {
    let desc = &*(*frame.add(1) as *const Desc);
    let trampoline = desc.trampoline;
    if P::pass_through() {
        return trampoline;
    }
    let h = &*(desc.header as *const Header);
    if h.enabled.load(Ordering::Relaxed) == 0 {
        return trampoline;
    }
    let st = P::state();
    if st.is_null() || (*st).busy != 0 {
        return trampoline;
    }
    let st = &mut *st;
    st.busy = 1;
    let flags = flags(h, desc.index);
    let sp = frame.add(2) as u64;
    if flags & HOOK_ENTRY != 0 {
        let mut r = Record {
            hook: desc.index as u32,
            kind: KIND_ENTRY,
            tid: st.tid,
            time: P::now_ns(),
            rsp: sp,
            rbp: *frame,
            ..Record::default()
        };
        // the argument registers, then the caller's stack
        for i in 0..P::ARG_REGS {
            r.args[i] = *frame.sub(1 + i);
        }
        if h.stack_args != 0 {
            for i in 0..r.args.len() - P::ARG_REGS {
                r.args[P::ARG_REGS + i] = P::stack_word(frame.add(P::STACK_ARGS_AT), i);
            }
        }
        P::write(h, st, &mut r, sp);
    }
    if flags & HOOK_RETURN != 0 {
        st.shadow.swap(
            h,
            frame.add(2),
            desc as *const Desc as u64,
            P::return_stub(),
        );
    }
    st.busy = 0;
    trampoline
}

/// A probed function returned: `frame` is the return stub's (`[frame]` the saved rbp,
/// `[frame+8]` the slot for the original return address, the return registers below it).
/// Records the return when the hook asks; returns the original return address.
///
/// # Safety
/// Called by the return stub with its frame.
#[inline(always)]
pub unsafe fn on_return<P: Platform>(frame: *mut u64) -> u64 {
    let slot = frame.add(1) as u64;
    let st = P::current();
    if st.is_null() {
        // no thread swaps a return address without its state
        std::process::abort();
    }
    let st = &mut *st;
    let Some(e) = st.shadow.take(slot) else {
        std::process::abort()
    };
    if P::pass_through() || st.busy != 0 {
        return e.ret;
    }
    let desc = &*(e.desc as *const Desc);
    let h = &*(desc.header as *const Header);
    if h.enabled.load(Ordering::Relaxed) == 0 {
        return e.ret;
    }
    if flags(h, desc.index) & HOOK_RETURN != 0 {
        st.busy = 1;
        let mut r = Record {
            hook: desc.index as u32,
            kind: KIND_RETURN,
            tid: st.tid,
            time: P::now_ns(),
            rsp: slot + 8,
            rbp: *frame,
            pc: e.ret,
            ..Record::default()
        };
        for i in 0..P::RET_REGS {
            r.args[i] = *frame.sub(1 + i);
        }
        P::write(h, st, &mut r, slot + 8);
        st.busy = 0;
    }
    e.ret
}
