//! The fpid agent: a shared object (Linux) or DLL (Windows) dtx loads into a traced process.
//! On Linux dtx writes, near each
//! hooked function, a thunk (`push [desc]; jmp [entry stub]`), the function's relocated first
//! instructions (the trampoline) and a descriptor, then patches the function's first bytes with
//! a jump to the thunk. The agent's entry stub saves the registers, records the hit in the
//! shared ring, and, when the function's return is probed, swaps the return address for the
//! return stub (keeping the original on a per-thread shadow stack); then it jumps to the
//! trampoline. The return stub records the return and goes back to the original caller.
//! On Windows the agent hooks the functions dtx lists itself, with MinHook, the thunk being
//! the detour and MinHook's trampoline the way on ([`windows`]); the stubs work the same way.
//!
//! Nothing here blocks, allocates from the heap, or takes a lock: a full ring counts a drop, a
//! hit inside the agent's own work (a hooked function it calls, a signal handler) passes
//! through untraced. dtx makes the hooks inert (the header's `enabled` word) when it stops;
//! code it wrote is never freed.
#![allow(clippy::missing_safety_doc)]

#[cfg(any(target_os = "linux", windows))]
#[macro_use]
mod stubs;
#[cfg(any(target_os = "linux", windows))]
mod hit;
#[cfg(any(target_os = "linux", windows))]
#[allow(dead_code)]
mod layout;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(any(target_os = "linux", windows))]
mod ring;
#[cfg(any(target_os = "linux", windows))]
mod shadow;
#[cfg(windows)]
mod windows;
