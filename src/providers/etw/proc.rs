//! `proc`: `start` / `exit` (arg0 = process id, arg1 = parent id, arg2 = exit status),
//! `lwp-start` / `lwp-exit` (arg0 = thread id, arg1 = process id), `module-load` /
//! `module-unload` (arg0 = image base, arg1 = image size), from Process, Thread and Image events.

use super::{Emit, EventCx};

pub(super) fn fire(cx: &EventCx<'_, '_>, name: &str, out: &mut Emit<'_>) {
    let dec = cx.dec;
    let mut a = [0u64; 10];
    let p = dec.u64("ProcessId").unwrap_or(cx.pid as u64) as u32;
    match name {
        "start" | "exit" => {
            a[0] = p as u64;
            a[1] = dec.u64("ParentId").unwrap_or(0);
            a[2] = dec.get("ExitStatus").and_then(|v| v.as_u64()).unwrap_or(0);
            out.push(a, p, cx.tid);
        }
        "lwp-start" | "lwp-exit" => {
            let t = dec.u64("TThreadId").unwrap_or(cx.tid as u64) as u32;
            a[0] = t as u64;
            a[1] = p as u64;
            out.push(a, p, t);
        }
        "module-load" | "module-unload" => {
            a[0] = dec.u64("ImageBase").unwrap_or(0);
            a[1] = dec.u64("ImageSize").unwrap_or(0);
            out.push(a, p, cx.tid);
        }
        _ => {}
    }
}
