//! `sched`, with the Windows port's arguments, from CSwitch and ReadyThread:
//! * `on-cpu`: no typed arguments (`curlwpsinfo` is the thread taking the CPU); dtx gives
//!   arg0 = that thread's id, arg1 = the id of the thread that left;
//! * `off-cpu`: fires in the thread leaving the CPU; args[0] `lwpsinfo_t *` and args[1]
//!   `psinfo_t *` describe the thread the CPU runs next; arg2 = its id, arg3 = the leaving one's;
//! * `wakeup`: args[0] `lwpsinfo_t *` and args[1] `psinfo_t *` of the thread made ready (arg2 =
//!   its id), fired in the thread that readied it.

use super::native::NATIVE_BASE;
use super::{Emit, EventCx, Lwp};
use crate::vm::thread::{STATE_ONPROC, STATE_RUN};

pub(super) fn fire(cx: &EventCx<'_, '_>, name: &str, out: &mut Emit<'_>) {
    let mut a = [0u64; 10];
    match name {
        "on-cpu" | "off-cpu" => {
            let new = cx.dec.u64("NewThreadId").unwrap_or(0) as u32;
            let old = cx.dec.u64("OldThreadId").unwrap_or(0) as u32;
            if name == "on-cpu" {
                a[0] = new as u64;
                a[1] = old as u64;
                out.push(a, cx.pid_of(new), new);
            } else {
                a[0] = NATIVE_BASE;
                a[1] = NATIVE_BASE;
                a[2] = new as u64;
                a[3] = old as u64;
                let lwp = Lwp {
                    tid: new,
                    pid: cx.pid_of(new),
                    state: STATE_ONPROC,
                    cpu: cx.ev.cpu as u32,
                    fire_tid: old,
                    fire_pid: cx.pid_of(old),
                };
                cx.push_thread(out, a, lwp);
            }
        }
        "wakeup" => {
            let t = cx.dec.u64("TThreadId").unwrap_or(0) as u32;
            a[0] = NATIVE_BASE;
            a[1] = NATIVE_BASE;
            a[2] = t as u64;
            let lwp = Lwp {
                tid: t,
                pid: cx.pid_of(t),
                state: STATE_RUN,
                cpu: u32::MAX,
                fire_tid: cx.tid,
                fire_pid: cx.pid,
            };
            cx.push_thread(out, a, lwp);
        }
        _ => {}
    }
}
