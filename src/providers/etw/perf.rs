//! PerfInfo events: `profile:::sample-N` from SampledProfile (arg0 = kernel PC or 0, arg1 = user
//! PC or 0, as `profile-N`), `syscall:::entry` (arg0 = system call address) / `return` (arg0 =
//! NTSTATUS), `isr:::isr` (arg0 = routine, arg1 = vector, arg2 = initial time), `dpc:::dpc`,
//! `timer`, `thread` (arg0 = routine, arg1 = initial time).

use super::{Emit, EventCx};

pub(super) fn fire(cx: &EventCx<'_, '_>, name: &str, out: &mut Emit<'_>) {
    let dec = cx.dec;
    let mut a = [0u64; 10];
    match name {
        "sample-1ms" => {
            let pc = dec.u64("InstructionPointer").unwrap_or(0);
            let kernel = pc >> 63 == 1;
            a[0] = if kernel { pc } else { 0 };
            a[1] = if kernel { 0 } else { pc };
        }
        "entry" => a[0] = dec.u64("SysCallAddress").unwrap_or(0),
        "return" => a[0] = dec.u64("SysCallNtStatus").unwrap_or(0),
        "isr" => {
            a[0] = dec.u64("Routine").unwrap_or(0);
            a[1] = dec.u64("Vector").unwrap_or(0);
            a[2] = dec.u64("InitialTime").unwrap_or(0);
        }
        _ => {
            a[0] = dec.u64("Routine").unwrap_or(0);
            a[1] = dec.u64("InitialTime").unwrap_or(0);
        }
    }
    out.push(a, cx.pid, cx.tid);
}
