//! PerfInfo events: `profile:::sample-N` from SampledProfile (arg0 = kernel PC or 0, arg1 = user
//! PC or 0, as `profile-N`), `isr:::isr` and `dpc:::dpc`, `timer`, `thread` in the Windows
//! port's layout (its `sdt_etw_isr_cb` and `sdt_etw_dpc_cb`, which its `systemcall.d` reads
//! with `sym(arg1)`): `arg0` the initial time, `arg1` the routine, and for an ISR `arg2` the
//! routine's return value and `arg3` the vector. The interrupt and DPC records name no thread:
//! they fire in the thread that was on their CPU (`EventCx::new`).
//! The `syscall` probes are in `super::syscall`.

use super::{Emit, EventCx};

/// The PerfInfo opcode of SampledProfile.
pub(super) const SAMPLED_PROFILE: u8 = 46;

/// The sampled program counter as DTrace's profile probes give it: (kernel PC or 0, user PC or
/// 0), by the PC's half of the address space.
fn sampled_pcs(cx: &EventCx<'_, '_>) -> (u64, u64) {
    let pc = cx.dec.u64("InstructionPointer").unwrap_or(0);
    let kernel = if cx.ev.pointer_size == 4 {
        pc >= 0x8000_0000
    } else {
        pc >> 63 == 1
    };
    if kernel {
        (pc, 0)
    } else {
        (0, pc)
    }
}

/// A `profile-N` firing of a sample: `arg0` the kernel PC (0 in user mode), `arg1` the user PC
/// (0 in the kernel), `arg2` how late the firing is (ns past its due time, as in illumos'
/// profile provider), in the sampled thread.
pub(super) fn profile(cx: &EventCx<'_, '_>, late: u64, out: &mut Emit<'_>) {
    let (k, u) = sampled_pcs(cx);
    let mut a = [0u64; 10];
    a[0] = k;
    a[1] = u;
    a[2] = late;
    out.push(a, cx.pid, cx.tid);
}

pub(super) fn fire(cx: &EventCx<'_, '_>, name: &str, out: &mut Emit<'_>) {
    let dec = cx.dec;
    let mut a = [0u64; 10];
    match name {
        "sample-1ms" => (a[0], a[1]) = sampled_pcs(cx),
        "isr" => {
            a[0] = dec.u64("InitialTime").unwrap_or(0);
            a[1] = dec.u64("Routine").unwrap_or(0);
            a[2] = dec.u64("ReturnValue").unwrap_or(0);
            a[3] = dec.u64("Vector").unwrap_or(0);
        }
        _ => {
            a[0] = dec.u64("InitialTime").unwrap_or(0);
            a[1] = dec.u64("Routine").unwrap_or(0);
        }
    }
    out.push(a, cx.pid, cx.tid);
}
