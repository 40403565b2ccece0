//! The Linux agent: stubs in assembly, handlers in Rust, the thread's state behind one
//! initial-exec TLS word (no `__tls_get_addr`, which may call `malloc` on a thread's first
//! access: a hook on `malloc` would recurse), state pages from `mmap`.

use crate::layout::{
    Desc, Header, Record, HEADER_BYTES, HOOK_ENTRY, HOOK_RETURN, KIND_ENTRY, KIND_RETURN, MAGIC,
};
use crate::shadow::ShadowStack;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set in a forked child: the hooks it inherited pass through (the ring is the parent's).
static FORKED: AtomicBool = AtomicBool::new(false);
/// `pthread_atfork` was called.
static AT_FORK: AtomicBool = AtomicBool::new(false);

/// The most stack bytes a record carries.
const STACK_MAX: usize = 16 * 1024;

/// A thread's state, mapped at its first hit (and never unmapped: a thread may be inside a
/// hooked function when another ends tracing).
#[repr(C)]
struct State {
    tid: u64,
    pid: u64,
    /// Inside a handler: hits now (a hooked function the handler calls, a signal handler's
    /// calls) pass through.
    busy: u64,
    shadow: ShadowStack,
    stack: [u8; STACK_MAX],
}

// The thread's `State` pointer (initial-exec TLS: one `fs`-relative load), and the stubs.
//
// Both stubs save every register the ABI lets a call clobber (rax rcx rdx rsi rdi r8-r11,
// xmm0-15): a compiler that sees the hooked function's body (gcc's -fipa-ra) may keep values
// in the registers that function leaves alone, across the call.
//
// Entry stub, reached from a function's thunk with the descriptor pushed over its return
// address: saves those registers, calls `on_entry(frame)` with rbp as the frame (`[rbp]` saved rbp, `[rbp+8]` the
// descriptor, `[rbp+16]` the return address), puts the trampoline it returns into the
// descriptor's slot, restores everything and jumps there with the stack as at the function's
// entry. The red zone below the stack pointer is left alone by signal delivery, so the
// jump may read the slot just popped.
//
// Return stub, reached by a probed function's `ret`: makes room for the original return
// address where the old one was, saves the registers (`[rbp-8]` rax, `[rbp-16]` rdx: the
// return value), calls `on_return(frame)`, and returns to what it answers.
core::arch::global_asm!(
    ".section .tbss,\"awT\",@nobits",
    ".p2align 3",
    "dtx_fpid_tls_slot:",
    ".zero 8",
    ".text",
    ".p2align 4",
    ".globl dtx_fpid_tls_get",
    ".hidden dtx_fpid_tls_get",
    "dtx_fpid_tls_get:",
    "mov rax, qword ptr [rip + dtx_fpid_tls_slot@GOTTPOFF]",
    "mov rax, qword ptr fs:[rax]",
    "ret",
    ".p2align 4",
    ".globl dtx_fpid_tls_set",
    ".hidden dtx_fpid_tls_set",
    "dtx_fpid_tls_set:",
    "mov rax, qword ptr [rip + dtx_fpid_tls_slot@GOTTPOFF]",
    "mov qword ptr fs:[rax], rdi",
    "ret",
    ".p2align 4",
    ".globl dtx_fpid_entry_stub",
    ".hidden dtx_fpid_entry_stub",
    "dtx_fpid_entry_stub:",
    "push rbp",
    "mov rbp, rsp",
    "push rdi",
    "push rsi",
    "push rdx",
    "push rcx",
    "push r8",
    "push r9",
    "push rax",
    "push r10",
    "push r11",
    "sub rsp, 264",
    "movdqu xmmword ptr [rbp - 336], xmm0",
    "movdqu xmmword ptr [rbp - 320], xmm1",
    "movdqu xmmword ptr [rbp - 304], xmm2",
    "movdqu xmmword ptr [rbp - 288], xmm3",
    "movdqu xmmword ptr [rbp - 272], xmm4",
    "movdqu xmmword ptr [rbp - 256], xmm5",
    "movdqu xmmword ptr [rbp - 240], xmm6",
    "movdqu xmmword ptr [rbp - 224], xmm7",
    "movdqu xmmword ptr [rbp - 208], xmm8",
    "movdqu xmmword ptr [rbp - 192], xmm9",
    "movdqu xmmword ptr [rbp - 176], xmm10",
    "movdqu xmmword ptr [rbp - 160], xmm11",
    "movdqu xmmword ptr [rbp - 144], xmm12",
    "movdqu xmmword ptr [rbp - 128], xmm13",
    "movdqu xmmword ptr [rbp - 112], xmm14",
    "movdqu xmmword ptr [rbp - 96], xmm15",
    "and rsp, -16",
    "mov rdi, rbp",
    "call {on_entry}",
    "mov qword ptr [rbp + 8], rax",
    "movdqu xmm0, xmmword ptr [rbp - 336]",
    "movdqu xmm1, xmmword ptr [rbp - 320]",
    "movdqu xmm2, xmmword ptr [rbp - 304]",
    "movdqu xmm3, xmmword ptr [rbp - 288]",
    "movdqu xmm4, xmmword ptr [rbp - 272]",
    "movdqu xmm5, xmmword ptr [rbp - 256]",
    "movdqu xmm6, xmmword ptr [rbp - 240]",
    "movdqu xmm7, xmmword ptr [rbp - 224]",
    "movdqu xmm8, xmmword ptr [rbp - 208]",
    "movdqu xmm9, xmmword ptr [rbp - 192]",
    "movdqu xmm10, xmmword ptr [rbp - 176]",
    "movdqu xmm11, xmmword ptr [rbp - 160]",
    "movdqu xmm12, xmmword ptr [rbp - 144]",
    "movdqu xmm13, xmmword ptr [rbp - 128]",
    "movdqu xmm14, xmmword ptr [rbp - 112]",
    "movdqu xmm15, xmmword ptr [rbp - 96]",
    "lea rsp, [rbp - 72]",
    "pop r11",
    "pop r10",
    "pop rax",
    "pop r9",
    "pop r8",
    "pop rcx",
    "pop rdx",
    "pop rsi",
    "pop rdi",
    "pop rbp",
    "lea rsp, [rsp + 8]",
    "jmp qword ptr [rsp - 8]",
    ".p2align 4",
    ".globl dtx_fpid_return_stub",
    ".hidden dtx_fpid_return_stub",
    "dtx_fpid_return_stub:",
    "sub rsp, 8",
    "push rbp",
    "mov rbp, rsp",
    "push rax",
    "push rdx",
    "push rcx",
    "push rsi",
    "push rdi",
    "push r8",
    "push r9",
    "push r10",
    "push r11",
    "sub rsp, 264",
    "movdqu xmmword ptr [rbp - 336], xmm0",
    "movdqu xmmword ptr [rbp - 320], xmm1",
    "movdqu xmmword ptr [rbp - 304], xmm2",
    "movdqu xmmword ptr [rbp - 288], xmm3",
    "movdqu xmmword ptr [rbp - 272], xmm4",
    "movdqu xmmword ptr [rbp - 256], xmm5",
    "movdqu xmmword ptr [rbp - 240], xmm6",
    "movdqu xmmword ptr [rbp - 224], xmm7",
    "movdqu xmmword ptr [rbp - 208], xmm8",
    "movdqu xmmword ptr [rbp - 192], xmm9",
    "movdqu xmmword ptr [rbp - 176], xmm10",
    "movdqu xmmword ptr [rbp - 160], xmm11",
    "movdqu xmmword ptr [rbp - 144], xmm12",
    "movdqu xmmword ptr [rbp - 128], xmm13",
    "movdqu xmmword ptr [rbp - 112], xmm14",
    "movdqu xmmword ptr [rbp - 96], xmm15",
    "and rsp, -16",
    "mov rdi, rbp",
    "call {on_return}",
    "mov qword ptr [rbp + 8], rax",
    "movdqu xmm0, xmmword ptr [rbp - 336]",
    "movdqu xmm1, xmmword ptr [rbp - 320]",
    "movdqu xmm2, xmmword ptr [rbp - 304]",
    "movdqu xmm3, xmmword ptr [rbp - 288]",
    "movdqu xmm4, xmmword ptr [rbp - 272]",
    "movdqu xmm5, xmmword ptr [rbp - 256]",
    "movdqu xmm6, xmmword ptr [rbp - 240]",
    "movdqu xmm7, xmmword ptr [rbp - 224]",
    "movdqu xmm8, xmmword ptr [rbp - 208]",
    "movdqu xmm9, xmmword ptr [rbp - 192]",
    "movdqu xmm10, xmmword ptr [rbp - 176]",
    "movdqu xmm11, xmmword ptr [rbp - 160]",
    "movdqu xmm12, xmmword ptr [rbp - 144]",
    "movdqu xmm13, xmmword ptr [rbp - 128]",
    "movdqu xmm14, xmmword ptr [rbp - 112]",
    "movdqu xmm15, xmmword ptr [rbp - 96]",
    "lea rsp, [rbp - 72]",
    "pop r11",
    "pop r10",
    "pop r9",
    "pop r8",
    "pop rdi",
    "pop rsi",
    "pop rcx",
    "pop rdx",
    "pop rax",
    "pop rbp",
    "ret",
    on_entry = sym on_entry,
    on_return = sym on_return,
);

extern "C" {
    fn dtx_fpid_tls_get() -> *mut State;
    fn dtx_fpid_tls_set(state: *mut State);
    fn dtx_fpid_entry_stub();
    fn dtx_fpid_return_stub();
}

/// The calling thread's state, mapped at its first hit; null when no memory is left.
unsafe fn state() -> *mut State {
    let s = dtx_fpid_tls_get();
    if !s.is_null() {
        return s;
    }
    let p = libc::mmap(
        std::ptr::null_mut(),
        std::mem::size_of::<State>(),
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
    );
    if p == libc::MAP_FAILED {
        return std::ptr::null_mut();
    }
    let s = p as *mut State;
    // the mapping is zeroed: depth 0, not busy
    (*s).tid = libc::syscall(libc::SYS_gettid) as u64;
    (*s).pid = libc::getpid() as u64;
    dtx_fpid_tls_set(s);
    s
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Appends `r` (and, when the header asks, a copy of the stack from `sp` up) to the ring;
/// a full ring counts a drop.
unsafe fn write(h: &Header, st: &mut State, r: &mut Record, sp: u64) {
    let mut stack_len = 0usize;
    if h.stack_bytes != 0 {
        // the kernel copies what is mapped and stops at the stack's end
        let want = (h.stack_bytes as usize).min(STACK_MAX);
        let local = libc::iovec {
            iov_base: st.stack.as_mut_ptr() as *mut libc::c_void,
            iov_len: want,
        };
        let remote = libc::iovec {
            iov_base: sp as *mut libc::c_void,
            iov_len: want,
        };
        let n = libc::process_vm_readv(st.pid as libc::pid_t, &local, 1, &remote, 1, 0);
        if n > 0 {
            stack_len = n as usize & !7;
        }
    }
    crate::ring::append(h, r, st.stack.as_ptr(), stack_len);
}

/// A hooked function was called: `frame` as the entry stub describes. Returns the trampoline.
unsafe extern "C" fn on_entry(frame: *mut u64) -> u64 {
    let desc = &*(*frame.add(1) as *const Desc);
    let trampoline = desc.trampoline;
    if FORKED.load(Ordering::Relaxed) {
        return trampoline;
    }
    let h = &*(desc.header as *const Header);
    if h.enabled.load(Ordering::Relaxed) == 0 {
        return trampoline;
    }
    let st = state();
    if st.is_null() || (*st).busy != 0 {
        return trampoline;
    }
    let st = &mut *st;
    st.busy = 1;
    let flags = crate::ring::hook(h, desc.index).map_or(0, |k| k.flags.load(Ordering::Relaxed));
    let sp = frame.add(2) as u64;
    if flags & HOOK_ENTRY != 0 {
        let mut r = Record {
            hook: desc.index as u32,
            kind: KIND_ENTRY,
            tid: st.tid,
            time: now_ns(),
            rsp: sp,
            rbp: *frame,
            ..Record::default()
        };
        for i in 0..6 {
            r.args[i] = *frame.sub(1 + i);
        }
        if h.stack_args != 0 {
            for i in 0..4 {
                r.args[6 + i] = *frame.add(3 + i);
            }
        }
        write(h, st, &mut r, sp);
    }
    if flags & HOOK_RETURN != 0 {
        let stub = dtx_fpid_return_stub as *const () as u64;
        st.shadow
            .swap(h, frame.add(2), desc as *const Desc as u64, stub);
    }
    st.busy = 0;
    trampoline
}

/// A probed function returned: `frame` as the return stub describes. Returns the original
/// return address.
unsafe extern "C" fn on_return(frame: *mut u64) -> u64 {
    let slot = frame.add(1) as u64;
    let st = dtx_fpid_tls_get();
    if st.is_null() {
        // no thread swaps a return address without its state
        libc::abort();
    }
    let st = &mut *st;
    let Some(e) = st.shadow.take(slot) else {
        libc::abort()
    };
    if FORKED.load(Ordering::Relaxed) || st.busy != 0 {
        return e.ret;
    }
    let desc = &*(e.desc as *const Desc);
    let h = &*(desc.header as *const Header);
    if h.enabled.load(Ordering::Relaxed) == 0 {
        return e.ret;
    }
    let flags = crate::ring::hook(h, desc.index).map_or(0, |k| k.flags.load(Ordering::Relaxed));
    if flags & HOOK_RETURN != 0 {
        st.busy = 1;
        let mut r = Record {
            hook: desc.index as u32,
            kind: KIND_RETURN,
            tid: st.tid,
            time: now_ns(),
            rsp: slot + 8,
            rbp: *frame,
            pc: e.ret,
            ..Record::default()
        };
        r.args[0] = *frame.sub(1);
        r.args[1] = *frame.sub(2);
        write(h, st, &mut r, slot + 8);
        st.busy = 0;
    }
    e.ret
}

extern "C" fn forked_child() {
    FORKED.store(true, Ordering::Relaxed);
}

/// Maps the shared file at `path` (dtx made it for this process) and announces the entry stub
/// in its header. Returns the mapping's address, or a negative errno.
///
/// # Safety
/// `path` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn dtx_fpid_attach(path: *const libc::c_char) -> i64 {
    let errno = || {
        -(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO) as i64)
    };
    let fd = libc::open(path, libc::O_RDWR | libc::O_CLOEXEC);
    if fd < 0 {
        return errno();
    }
    let mut sb: libc::stat = std::mem::zeroed();
    if libc::fstat(fd, &mut sb) != 0 || (sb.st_size as usize) < HEADER_BYTES {
        libc::close(fd);
        return -(libc::EINVAL as i64);
    }
    let size = sb.st_size as usize;
    let p = libc::mmap(
        std::ptr::null_mut(),
        size,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_SHARED,
        fd,
        0,
    );
    let e = errno();
    libc::close(fd);
    if p == libc::MAP_FAILED {
        return e;
    }
    let h = &*(p as *const Header);
    if h.magic != MAGIC || h.ring_offset as usize + h.ring_size as usize > size {
        libc::munmap(p, size);
        return -(libc::EINVAL as i64);
    }
    h.entry_stub
        .store(dtx_fpid_entry_stub as *const () as u64, Ordering::Release);
    if !AT_FORK.swap(true, Ordering::Relaxed) {
        libc::pthread_atfork(None, None, Some(forked_child));
    }
    p as i64
}
