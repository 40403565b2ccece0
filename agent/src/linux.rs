//! The Linux agent: stubs in assembly, handlers in Rust, the thread's state behind one
//! initial-exec TLS word (no `__tls_get_addr`, which may call `malloc` on a thread's first
//! access: a hook on `malloc` would recurse), state pages from `mmap`.

use crate::hit::{Platform, State};
use crate::layout::{Header, Record, HEADER_BYTES, MAGIC};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set in a forked child: the hooks it inherited pass through (the ring is the parent's).
static FORKED: AtomicBool = AtomicBool::new(false);
/// `pthread_atfork` was called.
static AT_FORK: AtomicBool = AtomicBool::new(false);

/// The most stack bytes a record carries.
const STACK_MAX: usize = 16 * 1024;

/// The Linux part of a thread's state (mapped at its first hit, never unmapped).
#[repr(C)]
struct Extra {
    pid: u64,
    /// Where the stack copy of a record is read into.
    stack: [u8; STACK_MAX],
}

/// One stub of this platform (see `stub_asm!`): hidden, the registers pushed in the order given
/// (the System V argument or return registers first) and xmm0-15, the frame passed in rdi.
macro_rules! stub {
    (
        $name:literal,
        before: [$($before:literal),*],
        push: [$($reg:literal),*],
        call: $handler:literal,
        after: [$($after:literal),*]
    ) => {
        stub_asm!(
            $name,
            directives: [".globl", ".hidden"],
            before: [$($before),*],
            push: [$($reg),*],
            pushed: 72,
            reserve: 264,
            xmm: [
                0 336, 1 320, 2 304, 3 288, 4 272, 5 256, 6 240, 7 224,
                8 208, 9 192, 10 176, 11 160, 12 144, 13 128, 14 112, 15 96
            ],
            call: ["mov rdi, rbp"],
            handler: $handler,
            after: [$($after),*]
        )
    };
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
    stub!(
        "dtx_fpid_entry_stub",
        before: [],
        push: ["rdi", "rsi", "rdx", "rcx", "r8", "r9", "rax", "r10", "r11"],
        call: "on_entry",
        after: ["lea rsp, [rsp + 8]", "jmp qword ptr [rsp - 8]"]
    ),
    stub!(
        "dtx_fpid_return_stub",
        before: ["sub rsp, 8"],
        push: ["rax", "rdx", "rcx", "rsi", "rdi", "r8", "r9", "r10", "r11"],
        call: "on_return",
        after: ["ret"]
    ),
    on_entry = sym on_entry,
    on_return = sym on_return,
);

extern "C" {
    fn dtx_fpid_tls_get() -> *mut State<Extra>;
    fn dtx_fpid_tls_set(state: *mut State<Extra>);
    fn dtx_fpid_entry_stub();
    fn dtx_fpid_return_stub();
}

/// The Linux parts of a hit: the state behind the TLS word, CLOCK_MONOTONIC, the stack copied
/// by `process_vm_readv`, the System V registers (rdi rsi rdx rcx r8 r9 at entry, rax rdx at
/// return, the stack arguments right above the return address).
struct Linux;

impl Platform for Linux {
    type Extra = Extra;
    const ARG_REGS: usize = 6;
    const RET_REGS: usize = 2;
    const STACK_ARGS_AT: usize = 3;

    fn pass_through() -> bool {
        FORKED.load(Ordering::Relaxed)
    }

    /// Mapped at the thread's first hit; null when no memory is left.
    unsafe fn state() -> *mut State<Extra> {
        let s = dtx_fpid_tls_get();
        if !s.is_null() {
            return s;
        }
        let p = libc::mmap(
            std::ptr::null_mut(),
            std::mem::size_of::<State<Extra>>(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return std::ptr::null_mut();
        }
        let s = p as *mut State<Extra>;
        // the mapping is zeroed: depth 0, not busy
        (*s).tid = libc::syscall(libc::SYS_gettid) as u64;
        (*s).extra.pid = libc::getpid() as u64;
        dtx_fpid_tls_set(s);
        s
    }

    unsafe fn current() -> *mut State<Extra> {
        dtx_fpid_tls_get()
    }

    unsafe fn now_ns() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    unsafe fn stack_word(at: *const u64, i: usize) -> u64 {
        *at.add(i)
    }

    /// The stack copy is read by the kernel, which copies what is mapped and stops at the
    /// stack's end.
    unsafe fn write(h: &Header, st: &mut State<Extra>, r: &mut Record, sp: u64) {
        let mut stack_len = 0usize;
        if h.stack_bytes != 0 {
            let want = (h.stack_bytes as usize).min(STACK_MAX);
            let local = libc::iovec {
                iov_base: st.extra.stack.as_mut_ptr() as *mut libc::c_void,
                iov_len: want,
            };
            let remote = libc::iovec {
                iov_base: sp as *mut libc::c_void,
                iov_len: want,
            };
            let n = libc::process_vm_readv(st.extra.pid as libc::pid_t, &local, 1, &remote, 1, 0);
            if n > 0 {
                stack_len = n as usize & !7;
            }
        }
        let values = crate::ring::values(h, r, Self::ARG_REGS, Self::RET_REGS);
        crate::ring::append(h, r, values, st.extra.stack.as_ptr(), stack_len, &WAITER);
    }

    fn return_stub() -> u64 {
        dtx_fpid_return_stub as *const () as u64
    }
}

/// How a writer waits for room in a full ring: spins a little, then sleeps 20 us at a time
/// (a real sleep, which lets dtx's drain thread have this CPU on a busy machine).
const WAITER: crate::ring::Waiter = crate::ring::Waiter {
    now_ns: <Linux as Platform>::now_ns,
    pause,
};

unsafe fn pause(round: u32) {
    if round < 64 {
        std::hint::spin_loop();
        return;
    }
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 20_000,
    };
    libc::nanosleep(&ts, std::ptr::null_mut());
}

/// The entry stub's handler ([`crate::hit::on_entry`]).
unsafe extern "C" fn on_entry(frame: *mut u64) -> u64 {
    crate::hit::on_entry::<Linux>(frame)
}

/// The return stub's handler ([`crate::hit::on_return`]).
unsafe extern "C" fn on_return(frame: *mut u64) -> u64 {
    crate::hit::on_return::<Linux>(frame)
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
