//! `sched`: `on-cpu` / `off-cpu` from CSwitch (arg0 = new thread id, arg1 = old thread id; the
//! firing runs in the thread that takes or leaves the CPU), `wakeup` from ReadyThread (arg0 =
//! the thread made ready).

use super::{Emit, EventCx};

pub(super) fn fire(cx: &EventCx<'_, '_>, name: &str, out: &mut Emit<'_>) {
    let mut a = [0u64; 10];
    match name {
        "on-cpu" | "off-cpu" => {
            let new = cx.dec.u64("NewThreadId").unwrap_or(0) as u32;
            let old = cx.dec.u64("OldThreadId").unwrap_or(0) as u32;
            a[0] = new as u64;
            a[1] = old as u64;
            let t = if name == "on-cpu" { new } else { old };
            out.push(a, cx.pid_of(t), t);
        }
        "wakeup" => {
            a[0] = cx.dec.u64("TThreadId").unwrap_or(0);
            out.push(a, cx.pid, cx.tid);
        }
        _ => {}
    }
}
