//! `sched`, with the Windows port's arguments, from CSwitch and ReadyThread:
//! * `on-cpu`: no typed arguments (`curlwpsinfo` is the thread taking the CPU); dtx gives
//!   arg0 = that thread's id, arg1 = the id of the thread that left;
//! * `off-cpu`: fires in the thread leaving the CPU; args[0] `lwpsinfo_t *` and args[1]
//!   `psinfo_t *` describe the thread the CPU runs next; arg2 = its id, arg3 = the leaving one's;
//! * `wakeup`: args[0] `lwpsinfo_t *` and args[1] `psinfo_t *` of the thread made ready (arg2 =
//!   its id), fired in the thread that readied it.
//!
//! And DTrace's run-queue probes (DTrace Guide, sched provider), which the port lacks:
//! * `enqueue`: args[0] `lwpsinfo_t *`, args[1] `psinfo_t *` of a thread put on a ready queue,
//!   args[2] `cpuinfo_t *` of the queue's CPU, args[3] 1 when put at the front (ETW does not
//!   say: 0). A ReadyThread record enqueues the thread it readies (fired in the readying
//!   thread; the queue's CPU is not in the record: `cpu_id` -1); a CSwitch whose leaving
//!   thread is still runnable (`OldThreadState` Ready or DeferredReady: preempted, or its
//!   quantum ended) puts that thread back on this CPU's queue (fired in it);
//! * `dequeue`: args[0..2] as `enqueue`, of the thread a CSwitch takes off this CPU's queue to
//!   run next (not the idle thread), fired in the leaving thread as the dispatcher runs there;
//! * `sleep`: no arguments; fired in the thread a CSwitch leaves Waiting (`OldThreadState` 5),
//!   before its `off-cpu` (`curlwpsinfo` is the thread going to sleep).

use super::native::NATIVE_BASE;
use super::{Emit, EventCx, Lwp};
use crate::vm::thread::{STATE_ONPROC, STATE_RUN};

/// `KTHREAD_STATE` values of CSwitch's `OldThreadState` that leave the thread runnable:
/// Ready (1) and DeferredReady (7).
const STILL_RUNNABLE: [u64; 2] = [1, 7];
/// `KTHREAD_STATE` Waiting.
const WAITING: u64 = 5;

pub(super) fn fire(cx: &EventCx<'_, '_>, name: &str, out: &mut Emit<'_>) {
    let mut a = [0u64; 10];
    let cswitch = cx.ev.opcode == crate::etw::opcode::CSWITCH;
    let new = cx.dec.u64("NewThreadId").unwrap_or(0) as u32;
    let old = cx.dec.u64("OldThreadId").unwrap_or(0) as u32;
    let this_cpu = cx.ev.cpu as u32;
    match name {
        "on-cpu" => {
            a[0] = new as u64;
            a[1] = old as u64;
            out.push(a, cx.pid_of(new), new);
        }
        "off-cpu" => {
            a[0] = NATIVE_BASE;
            a[1] = NATIVE_BASE;
            a[2] = new as u64;
            a[3] = old as u64;
            let lwp = Lwp {
                tid: new,
                pid: cx.pid_of(new),
                state: STATE_ONPROC,
                cpu: this_cpu,
                fire_tid: old,
                fire_pid: cx.pid_of(old),
            };
            cx.push_thread(out, a, lwp);
        }
        "wakeup" => {
            let t = cx.dec.u64("TThreadId").unwrap_or(0) as u32;
            a[0] = NATIVE_BASE;
            a[1] = NATIVE_BASE;
            a[2] = t as u64;
            push_runnable(cx, out, a, t, u32::MAX, (cx.tid, cx.pid));
        }
        "enqueue" => {
            let (t, cpu, fire_in) = if cswitch {
                let state = cx.dec.u64("OldThreadState").unwrap_or(0);
                if old == 0 || !STILL_RUNNABLE.contains(&state) {
                    return;
                }
                (old, this_cpu, (old, cx.pid_of(old)))
            } else {
                let t = cx.dec.u64("TThreadId").unwrap_or(0) as u32;
                (t, u32::MAX, (cx.tid, cx.pid))
            };
            a[..3].fill(NATIVE_BASE);
            push_runnable(cx, out, a, t, cpu, fire_in);
        }
        "sleep" if old != 0 && cx.dec.u64("OldThreadState") == Some(WAITING) => {
            out.push(a, cx.pid_of(old), old);
        }
        "dequeue" => {
            if new == 0 {
                return;
            }
            a[..3].fill(NATIVE_BASE);
            push_runnable(cx, out, a, new, this_cpu, (old, cx.pid_of(old)));
        }
        _ => {}
    }
}

/// A firing whose arguments describe runnable thread `tid` (on or queued for `cpu`, -1 when
/// unknown), fired in thread `fire_in` (tid, pid).
fn push_runnable(
    cx: &EventCx<'_, '_>,
    out: &mut Emit<'_>,
    args: [u64; 10],
    tid: u32,
    cpu: u32,
    fire_in: (u32, u32),
) {
    let lwp = Lwp {
        tid,
        pid: cx.pid_of(tid),
        state: STATE_RUN,
        cpu,
        fire_tid: fire_in.0,
        fire_pid: fire_in.1,
    };
    cx.push_thread(out, args, lwp);
}
