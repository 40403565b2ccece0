//! The Windows agent: functions hooked with MinHook (through `minhook-sys`, as the Windows
//! DTrace port's fpid provider does; MinHook's README and `MinHook.h` describe the calls used
//! here: `MH_Initialize`, `MH_CreateHook`, `MH_QueueEnableHook`, `MH_ApplyQueued`,
//! `MH_DisableHook`). Each hook's detour is a 12-byte thunk of ours (`push [desc]; jmp
//! [entry stub]`, the same shape dtx writes on Linux) followed by its descriptor; MinHook's
//! trampoline (the relocated first instructions) is where the entry stub goes on.
//!
//! dtx loads this DLL with a remote thread on `LoadLibraryW`, then runs `dtx_fpid_attach` in
//! another remote thread whose parameter is a handle of the (unnamed) file mapping it made,
//! duplicated into this process (the shared header, the table of functions to hook, the
//! ring). `dtx_fpid_detach` disables every hook; nothing
//! MinHook allocated is ever freed (a thread may be inside a trampoline), and a return stub
//! still pending finds its way back through the thread's shadow stack.
//!
//! Thread state is reached through the TEB (`gs:[0x30]`): the thread id (`ClientId`), the
//! stack's top (`NT_TIB.StackBase`) and the TLS slot dtx's index names (`TlsSlots`, past 63
//! `TlsExpansionSlots`), so that a
//! hit calls nothing in the system before it knows whether it is nested in the agent's own
//! work (a hooked `QueryPerformanceCounter` then passes straight through).

use crate::hit::{Platform, State};
use crate::layout::{Desc, Header, Record, HOOK_OK, MAGIC};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The most stack bytes a record carries.
const STACK_MAX: u64 = 16 * 1024;
/// Functions the agent can hook over its life (one code page area of thunks).
const MAX_HOOKS: usize = 4096;
/// Bytes of one hook's thunk and descriptor in the thunk area.
const THUNK_BYTES: usize = 64;
/// Offset of the descriptor after a thunk.
const DESC_AT: usize = 16;
/// `TlsSlots` in the x64 TEB: 64 slots of 8 bytes.
const TEB_TLS_SLOTS: usize = 0x1480;
/// `TlsExpansionSlots` in the x64 TEB: a pointer to 1024 more slots (TLS indexes 64 to 1087),
/// allocated from the process heap by the thread's first TlsSetValue of such an index
/// (Microsoft Learn, TlsAlloc and Thread Local Storage: up to 1088 indexes per process).
const TEB_TLS_EXPANSION: usize = 0x1780;
/// The TLS slots in the TEB itself (TLS_MINIMUM_AVAILABLE).
const TLS_MINIMUM_AVAILABLE: usize = 64;
/// The expansion slots (TLS_EXPANSION_SLOTS).
const TLS_EXPANSION_SLOTS: usize = 1024;
/// The TLS slot value while a thread's state is being allocated.
const ALLOCATING: usize = 1;

/// FILE_MAP_READ | FILE_MAP_WRITE: the rights of the handle dtx duplicates.
const FILE_MAP_READ_WRITE: u32 = 0x0004 | 0x0002;
const MEM_COMMIT_RESERVE: u32 = 0x1000 | 0x2000;
const PAGE_READWRITE: u32 = 0x04;
const PAGE_EXECUTE_READWRITE: u32 = 0x40;
const TLS_OUT_OF_INDEXES: u32 = 0xffff_ffff;

#[link(name = "kernel32")]
extern "system" {
    fn MapViewOfFile(map: *mut c_void, access: u32, high: u32, low: u32, len: usize)
        -> *mut c_void;
    fn CloseHandle(h: *mut c_void) -> i32;
    fn VirtualAlloc(at: *mut c_void, len: usize, kind: u32, protect: u32) -> *mut c_void;
    fn VirtualQuery(at: *const c_void, info: *mut MemoryInfo, len: usize) -> usize;
    fn QueryPerformanceCounter(count: *mut i64) -> i32;
    fn QueryPerformanceFrequency(freq: *mut i64) -> i32;
    fn TlsAlloc() -> u32;
    fn TlsSetValue(index: u32, value: *mut c_void) -> i32;
    fn FlushInstructionCache(process: *mut c_void, at: *const c_void, len: usize) -> i32;
    fn GetCurrentProcess() -> *mut c_void;
    fn SwitchToThread() -> i32;
    fn Sleep(ms: u32);
}

/// MEMORY_BASIC_INFORMATION (x64).
#[repr(C)]
struct MemoryInfo {
    base: usize,
    alloc_base: usize,
    alloc_protect: u32,
    partition: u16,
    size: usize,
    state: u32,
    protect: u32,
    kind: u32,
}

/// Codes `dtx_fpid_attach` answers (the remote thread's exit code); dtx words them.
pub const ATTACH_OK: u32 = 0;
pub const ATTACH_NO_MAPPING: u32 = 1;
pub const ATTACH_BAD_HEADER: u32 = 2;
pub const ATTACH_NO_MINHOOK: u32 = 3;
pub const ATTACH_NO_TLS: u32 = 4;
pub const ATTACH_NO_MEMORY: u32 = 5;

/// The TLS index whose slot holds each thread's `State` (TlsAlloc'd at the first attach).
static TLS: AtomicU32 = AtomicU32::new(TLS_OUT_OF_INDEXES);
/// QueryPerformanceFrequency.
static FREQ: AtomicU64 = AtomicU64::new(0);
/// The thunk area and how many hooks it holds; the functions hooked, by slot.
static THUNKS: AtomicU64 = AtomicU64::new(0);
static HOOKED: AtomicU64 = AtomicU64::new(0);
static TARGETS: AtomicU64 = AtomicU64::new(0);
/// MinHook was initialized.
static MH_READY: AtomicU32 = AtomicU32::new(0);

/// One stub of this platform (see `stub_asm!`): the registers pushed in the order given (the
/// argument or return registers first) and xmm0-5, the frame passed in rcx over 32 bytes of
/// home space; it `ret`s to what the handler answers.
macro_rules! stub {
    ($name:literal, before: [$($before:literal),*], push: [$($reg:literal),*], call: $handler:literal) => {
        stub_asm!(
            $name,
            directives: [".globl"],
            before: [$($before),*],
            push: [$($reg),*],
            pushed: 56,
            reserve: 104,
            xmm: [0 152, 1 136, 2 120, 3 104, 4 88, 5 72],
            call: ["sub rsp, 32", "mov rcx, rbp"],
            handler: $handler,
            after: ["ret"]
        )
    };
}

// Entry stub, reached from a hook's thunk with the descriptor pushed over the return address:
// saves the registers the Windows x64 convention lets a call clobber (rax rcx rdx r8-r11,
// xmm0-5: the arguments are among them), calls `on_entry(frame)` with rbp as the frame
// (`[rbp]` saved rbp, `[rbp+8]` the descriptor, `[rbp+16]` the return address, `[rbp-8]`..
// `[rbp-32]` rcx rdx r8 r9), puts the trampoline it answers into the descriptor's slot,
// restores everything and `ret`s into the trampoline with the stack as at the function's
// entry (nothing below the stack pointer is used: Windows has no red zone).
//
// Return stub, reached by a probed function's `ret`: makes room for the original return
// address where the old one was, saves the same registers (`[rbp-8]` rax, the return value),
// calls `on_return(frame)` and returns to what it answers.
//
// Both leave 32 bytes of home space under the aligned stack for the call, as the convention
// asks (Microsoft Learn, "x64 calling convention").
core::arch::global_asm!(
    ".text",
    stub!(
        "dtx_fpid_entry_stub",
        before: [],
        push: ["rcx", "rdx", "r8", "r9", "rax", "r10", "r11"],
        call: "on_entry"
    ),
    stub!(
        "dtx_fpid_return_stub",
        before: ["sub rsp, 8"],
        push: ["rax", "rcx", "rdx", "r8", "r9", "r10", "r11"],
        call: "on_return"
    ),
    on_entry = sym on_entry,
    on_return = sym on_return,
);

extern "C" {
    fn dtx_fpid_entry_stub();
    fn dtx_fpid_return_stub();
}

/// The calling thread's TEB.
#[inline(always)]
fn teb() -> *mut u8 {
    let t: *mut u8;
    // SAFETY: gs:[0x30] is the TEB's own address in every x64 Windows thread.
    unsafe {
        core::arch::asm!("mov {}, gs:[0x30]", out(reg) t, options(nostack, readonly, preserves_flags))
    };
    t
}

/// The calling thread's TLS slot of the agent: in the TEB's `TlsSlots`, or for an index past
/// 63 in its `TlsExpansionSlots` (None while the thread has none: see [`expand`]).
#[inline(always)]
unsafe fn slot() -> Option<*mut usize> {
    let i = TLS.load(Ordering::Relaxed) as usize;
    if i < TLS_MINIMUM_AVAILABLE {
        return Some(teb().add(TEB_TLS_SLOTS + 8 * i) as *mut usize);
    }
    if i >= TLS_MINIMUM_AVAILABLE + TLS_EXPANSION_SLOTS {
        return None;
    }
    let more = *(teb().add(TEB_TLS_EXPANSION) as *const *mut usize);
    if more.is_null() {
        return None;
    }
    Some(more.add(i - TLS_MINIMUM_AVAILABLE))
}

/// Threads inside [`expand`] (their ids), so that a hooked function the heap allocation calls
/// passes straight through instead of expanding again.
static EXPANDING: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];

/// Has the system allocate the calling thread's expansion slots (TlsSetValue of the agent's
/// index, with 0: what the slot holds already). Whether the thread has them now.
unsafe fn expand() -> bool {
    let tid = *(teb().add(0x48) as *const u64);
    if EXPANDING.iter().any(|t| t.load(Ordering::Acquire) == tid) {
        return false;
    }
    let Some(cell) = EXPANDING.iter().find(|t| {
        t.compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }) else {
        return false;
    };
    TlsSetValue(TLS.load(Ordering::Relaxed), std::ptr::null_mut());
    cell.store(0, Ordering::Release);
    slot().is_some()
}

/// The Windows parts of a hit: the state behind the agent's TLS slot, read from the TEB,
/// QueryPerformanceCounter, the stack copied in place up to the thread's stack base, the x64
/// registers (rcx rdx r8 r9 at entry, rax at return, the stack arguments past the return
/// address and the 32 bytes of home space).
struct Windows;

impl Platform for Windows {
    type Extra = ();
    const ARG_REGS: usize = 4;
    const RET_REGS: usize = 1;
    const STACK_ARGS_AT: usize = 7;

    /// Allocated at the thread's first hit; null while it is being allocated (a hooked
    /// allocator) or when no memory is left.
    unsafe fn state() -> *mut State<()> {
        let slot = match slot() {
            Some(slot) => slot,
            // an index past 63 on a thread without expansion slots yet
            None if TLS.load(Ordering::Relaxed) as usize >= TLS_MINIMUM_AVAILABLE && expand() => {
                match slot() {
                    Some(slot) => slot,
                    None => return std::ptr::null_mut(),
                }
            }
            None => return std::ptr::null_mut(),
        };
        let s = *slot;
        if s == ALLOCATING {
            return std::ptr::null_mut();
        }
        if s != 0 {
            return s as *mut State<()>;
        }
        *slot = ALLOCATING;
        let p = VirtualAlloc(
            std::ptr::null_mut(),
            std::mem::size_of::<State<()>>(),
            MEM_COMMIT_RESERVE,
            PAGE_READWRITE,
        ) as *mut State<()>;
        if p.is_null() {
            *slot = 0;
            return p;
        }
        // zeroed by VirtualAlloc: depth 0, not busy; ClientId.UniqueThread is at TEB+0x48
        (*p).tid = *(teb().add(0x48) as *const u64);
        *slot = p as usize;
        p
    }

    unsafe fn current() -> *mut State<()> {
        match slot() {
            Some(slot) if *slot > ALLOCATING => *slot as *mut State<()>,
            _ => std::ptr::null_mut(),
        }
    }

    /// The time in ns of QueryPerformanceCounter (what dtx reads too).
    unsafe fn now_ns() -> u64 {
        let mut c = 0i64;
        QueryPerformanceCounter(&mut c);
        let f = FREQ.load(Ordering::Relaxed).max(1);
        let c = c as u64;
        (c / f) * 1_000_000_000 + (c % f) * 1_000_000_000 / f
    }

    /// 0 for a word at or past the thread's stack base.
    unsafe fn stack_word(at: *const u64, i: usize) -> u64 {
        let p = at.add(i);
        if (p as u64) + 8 <= stack_base() {
            *p
        } else {
            0
        }
    }

    /// The stack is copied from where it is, up to the thread's stack base.
    unsafe fn write(h: &Header, _st: &mut State<()>, r: &mut Record, sp: u64) {
        let mut len = 0u64;
        if h.stack_bytes != 0 {
            len = h
                .stack_bytes
                .min(STACK_MAX)
                .min(stack_base().saturating_sub(sp))
                & !7;
        }
        let values = crate::ring::values(h, r, Self::ARG_REGS, Self::RET_REGS);
        crate::ring::append(h, r, values, sp as *const u8, len as usize, &WAITER);
    }

    fn return_stub() -> u64 {
        dtx_fpid_return_stub as *const () as u64
    }
}

/// How a writer waits for room in a full ring: spins a little, gives its time slice away a
/// while (SwitchToThread), then sleeps a millisecond at a time (Sleep's granularity: Microsoft
/// Learn, Sleep), letting dtx's drain thread run on a busy machine.
const WAITER: crate::ring::Waiter = crate::ring::Waiter {
    now_ns: <Windows as Platform>::now_ns,
    pause,
};

unsafe fn pause(round: u32) {
    if round < 64 {
        std::hint::spin_loop();
    } else if round < 1024 {
        SwitchToThread();
    } else {
        Sleep(1);
    }
}

/// The top of the calling thread's stack (`NT_TIB.StackBase`): everything below it down to the
/// stack pointer is committed.
unsafe fn stack_base() -> u64 {
    *(teb().add(8) as *const u64)
}

/// The entry stub's handler ([`crate::hit::on_entry`]).
unsafe extern "C" fn on_entry(frame: *mut u64) -> u64 {
    crate::hit::on_entry::<Windows>(frame)
}

/// The return stub's handler ([`crate::hit::on_return`]).
unsafe extern "C" fn on_return(frame: *mut u64) -> u64 {
    crate::hit::on_return::<Windows>(frame)
}

/// The thunk area: `MAX_HOOKS` slots of a thunk and its descriptor, then the hooked
/// functions' addresses. Allocated once, never freed.
unsafe fn thunk_area() -> Option<*mut u8> {
    let t = THUNKS.load(Ordering::Acquire);
    if t != 0 {
        return Some(t as *mut u8);
    }
    let p = VirtualAlloc(
        std::ptr::null_mut(),
        MAX_HOOKS * THUNK_BYTES,
        MEM_COMMIT_RESERVE,
        PAGE_EXECUTE_READWRITE,
    ) as *mut u8;
    let targets = VirtualAlloc(
        std::ptr::null_mut(),
        MAX_HOOKS * 8,
        MEM_COMMIT_RESERVE,
        PAGE_READWRITE,
    ) as u64;
    if p.is_null() || targets == 0 {
        return None;
    }
    THUNKS.store(p as u64, Ordering::Release);
    TARGETS.store(targets, Ordering::Release);
    Some(p)
}

/// Whether `addr` lies in committed executable memory (what MinHook also checks; asked here
/// too so that a wrong address is refused with a clear status).
unsafe fn executable(addr: u64) -> bool {
    let mut m: MemoryInfo = std::mem::zeroed();
    if VirtualQuery(
        addr as *const c_void,
        &mut m,
        std::mem::size_of::<MemoryInfo>(),
    ) == 0
    {
        return false;
    }
    m.state == 0x1000 && m.protect & 0xf0 != 0
}

/// Hooks (or re-aims, when an earlier attach hooked it) the function of table entry `index`
/// at `addr`. Returns `HOOK_OK` or MinHook's status. The hook is queued for enabling.
unsafe fn hook_one(area: *mut u8, header: u64, index: u64, addr: u64) -> u64 {
    let targets = TARGETS.load(Ordering::Acquire) as *mut u64;
    let n = HOOKED.load(Ordering::Relaxed) as usize;
    // hooked before: the same thunk now feeds this header's entry
    for k in 0..n {
        if *targets.add(k) == addr {
            let desc = area.add(k * THUNK_BYTES + DESC_AT) as *mut Desc;
            (*desc).index = index;
            (*desc).header = header;
            return match minhook_sys::MH_QueueEnableHook(addr as *mut c_void) {
                minhook_sys::MH_OK => HOOK_OK,
                s => s as u64,
            };
        }
    }
    if n >= MAX_HOOKS {
        return minhook_sys::MH_ERROR_MEMORY_ALLOC as u64;
    }
    if !executable(addr) {
        return minhook_sys::MH_ERROR_NOT_EXECUTABLE as u64;
    }
    let thunk = area.add(n * THUNK_BYTES);
    let desc = thunk.add(DESC_AT) as *mut Desc;
    desc.write(Desc {
        this: desc as u64,
        entry_stub: dtx_fpid_entry_stub as *const () as u64,
        trampoline: 0,
        header,
        index,
    });
    // push qword [rip + DESC_AT - 6]: the descriptor's own address
    let mut code = [0xccu8; DESC_AT];
    code[..2].copy_from_slice(&[0xff, 0x35]);
    code[2..6].copy_from_slice(&((DESC_AT - 6) as i32).to_le_bytes());
    // jmp qword [rip + DESC_AT + 8 - 12]: the entry stub
    code[6..8].copy_from_slice(&[0xff, 0x25]);
    code[8..12].copy_from_slice(&((DESC_AT + 8 - 12) as i32).to_le_bytes());
    std::ptr::copy_nonoverlapping(code.as_ptr(), thunk, DESC_AT);
    FlushInstructionCache(GetCurrentProcess(), thunk as *const c_void, THUNK_BYTES);
    let mut original: *mut c_void = std::ptr::null_mut();
    let s = minhook_sys::MH_CreateHook(addr as *mut c_void, thunk as *mut c_void, &mut original);
    if s != minhook_sys::MH_OK {
        return s as u64;
    }
    (*desc).trampoline = original as u64;
    *targets.add(n) = addr;
    HOOKED.store(n as u64 + 1, Ordering::Release);
    match minhook_sys::MH_QueueEnableHook(addr as *mut c_void) {
        minhook_sys::MH_OK => HOOK_OK,
        s => s as u64,
    }
}

/// Maps the file mapping named `name` (dtx made it for this process), hooks the functions its
/// table lists, writing each one's status into the table, and enables them together (MinHook
/// holds the other threads meanwhile). Run by dtx as a remote thread; answers an `ATTACH_*`
/// code.
///
/// # Safety
/// `name` is a NUL-terminated UTF-16 string.
#[no_mangle]
pub unsafe extern "system" fn dtx_fpid_attach(map: *mut c_void) -> u32 {
    // the section's handle, which dtx duplicated into this process (the mapping has no name)
    if map.is_null() {
        return ATTACH_NO_MAPPING;
    }
    let p = MapViewOfFile(map, FILE_MAP_READ_WRITE, 0, 0, 0);
    // the view keeps the mapping alive
    CloseHandle(map);
    if p.is_null() {
        return ATTACH_NO_MAPPING;
    }
    let h = &*(p as *const Header);
    if h.magic != MAGIC || h.ring_size == 0 || !h.ring_size.is_power_of_two() {
        return ATTACH_BAD_HEADER;
    }
    if TLS.load(Ordering::Relaxed) == TLS_OUT_OF_INDEXES {
        let i = TlsAlloc();
        if i as usize >= TLS_MINIMUM_AVAILABLE + TLS_EXPANSION_SLOTS {
            return ATTACH_NO_TLS;
        }
        TLS.store(i, Ordering::Relaxed);
    }
    if FREQ.load(Ordering::Relaxed) == 0 {
        let mut f = 0i64;
        QueryPerformanceFrequency(&mut f);
        FREQ.store(f.max(1) as u64, Ordering::Relaxed);
    }
    if MH_READY.load(Ordering::Relaxed) == 0 {
        if minhook_sys::MH_Initialize() != minhook_sys::MH_OK {
            return ATTACH_NO_MINHOOK;
        }
        MH_READY.store(1, Ordering::Relaxed);
    }
    let Some(area) = thunk_area() else {
        return ATTACH_NO_MEMORY;
    };
    let header = p as u64;
    for i in 0..h.hooks {
        let Some(k) = crate::ring::hook(h, i) else {
            break;
        };
        let s = if k.addr == 0 {
            minhook_sys::MH_ERROR_FUNCTION_NOT_FOUND as u64
        } else {
            hook_one(area, header, i, k.addr)
        };
        k.status.store(s, Ordering::Release);
    }
    if minhook_sys::MH_ApplyQueued() != minhook_sys::MH_OK {
        return ATTACH_NO_MINHOOK;
    }
    h.entry_stub
        .store(dtx_fpid_entry_stub as *const () as u64, Ordering::Release);
    ATTACH_OK
}

/// Disables every hook (their first bytes are put back; trampolines and thunks stay, for the
/// threads inside them). Run by dtx as a remote thread when it stops tracing.
///
/// # Safety
/// Called as a thread's start routine; the argument is unused.
#[no_mangle]
pub unsafe extern "system" fn dtx_fpid_detach(_unused: *mut c_void) -> u32 {
    if MH_READY.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    // MH_ALL_HOOKS is NULL
    minhook_sys::MH_DisableHook(std::ptr::null_mut()) as u32
}
