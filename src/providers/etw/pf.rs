//! `pf`: `hardflt` from PageFault HardFault (arg0 = virtual address, arg1 = byte count; the
//! firing runs in the faulting thread).

use super::{Emit, EventCx};

pub(super) fn fire(cx: &EventCx<'_, '_>, _name: &str, out: &mut Emit<'_>) {
    let dec = cx.dec;
    let mut a = [0u64; 10];
    a[0] = dec.u64("VirtualAddress").unwrap_or(0);
    a[1] = dec.u64("ByteCount").unwrap_or(0);
    let t = dec.u64("TThreadId").unwrap_or(cx.tid as u64) as u32;
    out.push(a, cx.pid_of(t), t);
}
