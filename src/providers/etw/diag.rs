//! `diag`: `events` (every record), `ignored` (a record that fired no other probe of the
//! program), `lostevent` (the RT_LostEvent records a real-time session writes when it loses
//! events, buffers or its rundown: arg0 = the event's opcode, 32 events, 33 buffers, 34 rundown),
//! `missed-stack` / `missed-ustack` (listed; over a file dtx does not know which events asked
//! for stacks, so they do not fire).

use super::table::{DIAG_IGNORED, DIAG_LOSTEVENT};
use super::{Emit, EventCx, FIRST_ID};
use crate::etw::record::Guid;

pub(super) const IGNORED_ID: u64 = FIRST_ID + DIAG_IGNORED as u64;
pub(super) const LOST_ID: u64 = FIRST_ID + DIAG_LOSTEVENT as u64;

/// RT_LostEvent {6a399ae0-4bc6-4de9-870b-3657f8947e7e}.
pub(super) const LOST_EVENT: Guid = Guid {
    data1: 0x6a39_9ae0,
    data2: 0x4bc6,
    data3: 0x4de9,
    data4: [0x87, 0x0b, 0x36, 0x57, 0xf8, 0x94, 0x7e, 0x7e],
};

pub(super) fn lost(cx: &EventCx<'_, '_>, out: &mut Emit<'_>) {
    let mut a = [0u64; 10];
    a[0] = cx.ev.opcode as u64;
    out.push(a, cx.pid, cx.tid);
}
