//! `io`: `start` from DiskIo ReadInit/WriteInit, `done` from DiskIo Read/Write. arg0 = transfer
//! size, arg1 = byte offset, arg2 = IRP, arg3 = 1 for a write.

use super::{Emit, EventCx};

pub(super) fn fire(cx: &EventCx<'_, '_>, _name: &str, out: &mut Emit<'_>) {
    let dec = cx.dec;
    let op = cx.ev.opcode;
    let mut a = [0u64; 10];
    a[0] = dec.u64("TransferSize").unwrap_or(0);
    a[1] = dec.u64("ByteOffset").unwrap_or(0);
    a[2] = dec.u64("Irp").unwrap_or(0);
    a[3] = (op == 11 || op == 13) as u64;
    out.push(a, cx.pid, cx.tid);
}
