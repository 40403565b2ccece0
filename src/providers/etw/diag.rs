//! `diag`: `events` (every record), `ignored` (a record that fired no other probe of the
//! program) — both with the port's arguments: arg0 = the provider's name (`char *`), arg1 = the
//! event id, arg2 = the opcode, arg3 = the payload's size, arg4 = the payload (with the 4-byte
//! header of the ETW probes before it); `lostevent` (the RT_LostEvent records a real-time
//! session writes when it loses events, buffers or its rundown: arg0 = the event's opcode, 32
//! events, 33 buffers, 34 rundown),
//! `missed-stack` / `missed-ustack` (a StackWalk stack that names an event the trace does not
//! have: `missed-stack` when its frames start in the kernel, `missed-ustack` when in user space;
//! arg0 = the raw timestamp of the event it names, arg1 = its thread, arg2 = its process,
//! arg3 = the frames; `stack()` / `ustack()` are those frames), `missed-dnet-stack` (a .NET
//! ClrStackWalk that follows no other runtime event of its thread: arg0 = ClrInstanceID,
//! arg1 = the frames; `ustack()` is the managed stack). The stack pass over the trace
//! (`TraceSource::collect_stacks_with`) finds the missed stacks; a live session has none.

use super::table::{
    DIAG_IGNORED, DIAG_LOSTEVENT, DIAG_MISSED_DNET_STACK, DIAG_MISSED_STACK, DIAG_MISSED_USTACK,
};
use super::{Emit, EventCx, FIRST_ID};
use crate::etw::decode::Value;
use crate::etw::record::Guid;

pub(super) const IGNORED_ID: u64 = FIRST_ID + DIAG_IGNORED as u64;
pub(super) const LOST_ID: u64 = FIRST_ID + DIAG_LOSTEVENT as u64;
pub(super) const MISSED_IDS: [u64; 3] = [
    FIRST_ID + DIAG_MISSED_STACK as u64,
    FIRST_ID + DIAG_MISSED_USTACK as u64,
    FIRST_ID + DIAG_MISSED_DNET_STACK as u64,
];
pub(super) const MISSED_DNET_ID: u64 = MISSED_IDS[2];

/// RT_LostEvent {6a399ae0-4bc6-4de9-870b-3657f8947e7e}.
pub(super) const LOST_EVENT: Guid = Guid {
    data1: 0x6a39_9ae0,
    data2: 0x4bc6,
    data3: 0x4de9,
    data4: [0x87, 0x0b, 0x36, 0x57, 0xf8, 0x94, 0x7e, 0x7e],
};

/// `missed-stack` / `missed-ustack` for a StackWalk Stack record that names no event.
pub(super) fn fire(cx: &EventCx<'_, '_>, name: &str, out: &mut Emit<'_>) {
    let d = cx.dec;
    let (Some(ts), Some(tid)) = (d.u64("EventTimeStamp"), d.u64("StackThread")) else {
        return;
    };
    let tid = tid as u32;
    if !cx.state.stack_missed(cx.ev.raw_timestamp, tid, cx.ev.cpu) {
        return;
    }
    let Some(Value::Ptrs(frames)) = d.get("Stack") else {
        return;
    };
    let Some(&first) = frames.first() else { return };
    let user = !crate::etw::is_kernel_address(first, cx.ev.pointer_size);
    if user != (name == "missed-ustack") {
        return;
    }
    let pid = d.u64("StackProcess").unwrap_or(0) as u32;
    let mut a = [0u64; 10];
    a[0] = ts;
    a[1] = tid as u64;
    a[2] = pid as u64;
    a[3] = frames.len() as u64;
    out.push(a, pid, tid);
}

/// `missed-dnet-stack` for a ClrStackWalk record that follows no event of its thread.
pub(super) fn missed_dnet(cx: &EventCx<'_, '_>, out: &mut Emit<'_>) {
    let ev = cx.ev;
    let Some((instance, frames)) = crate::providers::etw::dnet::clr_stack_header(ev) else {
        return;
    };
    if !cx.state.stack_missed(ev.raw_timestamp, ev.tid, ev.cpu) {
        return;
    }
    let mut a = [0u64; 10];
    a[0] = instance as u64;
    a[1] = frames as u64;
    out.push(a, cx.pid, cx.tid);
}

/// `events` / `ignored` for one record, naming its provider `name`.
pub(super) fn record(cx: &EventCx<'_, '_>, name: &str, out: &mut Emit<'_>) {
    let mut a = [0u64; 10];
    a[0] = super::native::NATIVE_BASE;
    a[1] = cx.ev.id as u64;
    a[2] = cx.ev.opcode as u64;
    a[3] = cx.ev.payload.len() as u64;
    a[4] = super::PAYLOAD_BASE;
    out.push_native(a, cx.pid, cx.tid, name.len() + 1, |w| {
        w.bytes(0, name.as_bytes())
    });
}

/// `events` / `ignored` for one record when no program reads a firing's arguments or
/// context ([`super::Interest::set_reads_event`]): the header's fields only, no provider name
/// written, the thread of a record that names none not looked up.
pub(super) fn record_blind(ev: &crate::etw::record::EventRecord<'_>, out: &mut Emit<'_>) {
    out.push(
        blind_args(ev),
        crate::etw::state::UNKNOWN_PID,
        super::UNKNOWN_TID,
    );
}

/// The arguments of [`record_blind`]'s firings: the header's event id, opcode and payload
/// size in `arg1..arg3`, nothing else. Its firings run as the unknown thread of the unknown
/// process ([`super::UNKNOWN_TID`], [`crate::etw::state::UNKNOWN_PID`]).
#[inline]
pub fn blind_args(ev: &crate::etw::record::EventRecord<'_>) -> [u64; 10] {
    let mut a = [0u64; 10];
    a[1] = ev.id as u64;
    a[2] = ev.opcode as u64;
    a[3] = ev.payload.len() as u64;
    a
}

pub(super) fn lost(cx: &EventCx<'_, '_>, out: &mut Emit<'_>) {
    let mut a = [0u64; 10];
    a[0] = cx.ev.opcode as u64;
    out.push(a, cx.pid, cx.tid);
}
