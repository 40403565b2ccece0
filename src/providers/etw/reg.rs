//! `reg`: one probe per Registry operation (create 10 ... close 27, as the Windows port names
//! them). args[0] is a `registry_t *` translated from a `reginfo_t` (dscripts/lib/registry.d)
//! built here from the event's index, status, initial time, key handle and key name.

use super::native::{reginfo, NATIVE_BASE};
use super::{Emit, EventCx};

pub(super) fn fire(cx: &EventCx<'_, '_>, _name: &str, out: &mut Emit<'_>) {
    let dec = cx.dec;
    let mut a = [0u64; 10];
    a[0] = NATIVE_BASE;
    out.push_native(a, cx.pid, cx.tid, reginfo::SIZE, |w| {
        w.u64(reginfo::INDEX, dec.u64("Index").unwrap_or(0));
        w.u64(reginfo::STATUS, dec.u64("Status").unwrap_or(0));
        w.u64(reginfo::TIME, dec.u64("InitialTime").unwrap_or(0));
        w.u64(reginfo::HANDLE, dec.u64("KeyHandle").unwrap_or(0));
        w.str(reginfo::NAME, dec.str("KeyName").as_deref().unwrap_or(""));
    });
}
