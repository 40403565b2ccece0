//! `hwconfig` (the SystemConfig events a kernel session writes at its end: CPU, disks, NICs,
//! video, services, PnP devices, IRQs, ...): as on the Windows port (its `sdt_etw_hwconfig_cb`), arg0 points at the event's payload, arg1 = its size,
//! arg2 = 1 for a 64-bit event, arg3 = the event version. Scripts read the payload with
//! casts (`*(uint32_t *)(arg0 + 4)`), see `dscripts/hwconfig/`.

use super::{EventCx, PAYLOAD_BASE};

pub(super) fn payload_args(cx: &EventCx<'_, '_>) -> [u64; 10] {
    let mut a = [0u64; 10];
    a[0] = PAYLOAD_BASE;
    a[1] = cx.ev.payload.len() as u64;
    a[2] = (cx.ev.pointer_size == 8) as u64;
    a[3] = cx.ev.version as u64;
    a
}
