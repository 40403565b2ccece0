//! `proc`, with the Windows port's arguments, from Process, Thread and Image events:
//! * `start`: args[0] `psinfo_t *` of the new process (arg1 = its id, arg2 = its parent's);
//! * `exit`: arg0 = the exit status (arg1 = the process id); `curpsinfo` is the process;
//! * `lwp-start`: args[0] `lwpsinfo_t *` and args[1] `psinfo_t *` of the new thread (arg2 = its
//!   id, arg3 = its process id);
//! * `lwp-exit`: `curlwpsinfo` is the thread (arg0 = its id, arg1 = its process id);
//! * `module-load` / `module-unload`: arg0 = the module's file name (`wchar_t *`), arg1 = its
//!   base address, arg2 = the process id, as the port's `sdt_etw_module_cb` gives them (dtx's
//!   arg3 = its size);
//! * `create` (DTrace's): args[0] `psinfo_t *` of the new process, fired in the thread that
//!   created it (the Process Start record's thread); `lwp-create`: args[0] `lwpsinfo_t *`,
//!   args[1] `psinfo_t *` of the new thread, fired in the thread that created it (the Thread
//!   Start record's);
//! * `exec-success` (DTrace's, which the port lacks): no arguments; fires in the new process,
//!   in the thread that maps its executable, at the first Image Load of a process whose Start
//!   the trace (or the live session) saw: Windows creates a process and maps its program in
//!   one step, so its first image load is where DTrace's `exec` has succeeded. A process that
//!   was running before the trace began (rundown records only) fires none.

use super::native::NATIVE_BASE;

/// Windows' `MAX_PATH`: the least length, in `wchar_t`, of a module-load file name's buffer.
const MAX_PATH: usize = 260;
use super::{Emit, EventCx, Lwp};
use crate::vm::thread::STATE_RUN;

pub(super) fn fire(cx: &EventCx<'_, '_>, name: &str, out: &mut Emit<'_>) {
    let dec = cx.dec;
    let mut a = [0u64; 10];
    let p = dec.u64("ProcessId").unwrap_or(cx.pid as u64) as u32;
    match name {
        "start" => {
            a[0] = NATIVE_BASE;
            a[1] = p as u64;
            a[2] = dec.u64("ParentId").unwrap_or(0);
            let lwp = Lwp {
                tid: 0,
                pid: p,
                state: STATE_RUN,
                cpu: u32::MAX,
                fire_tid: cx.tid,
                fire_pid: p,
            };
            cx.push_thread(out, a, lwp);
        }
        "create" | "lwp-create" => {
            let t = if name == "create" {
                0
            } else {
                dec.u64("TThreadId").unwrap_or(0) as u32
            };
            a[0] = NATIVE_BASE;
            a[1] = NATIVE_BASE;
            let lwp = Lwp {
                tid: t,
                pid: p,
                state: STATE_RUN,
                cpu: u32::MAX,
                fire_tid: cx.tid,
                fire_pid: cx.pid_of(cx.tid),
            };
            cx.push_thread(out, a, lwp);
        }
        "exit" => {
            a[0] = dec.get("ExitStatus").and_then(|v| v.as_u64()).unwrap_or(0);
            a[1] = p as u64;
            out.push(a, p, cx.tid);
        }
        "lwp-start" => {
            let t = dec.u64("TThreadId").unwrap_or(cx.tid as u64) as u32;
            a[0] = NATIVE_BASE;
            a[1] = NATIVE_BASE;
            a[2] = t as u64;
            a[3] = p as u64;
            let lwp = Lwp {
                tid: t,
                pid: p,
                state: STATE_RUN,
                cpu: u32::MAX,
                fire_tid: t,
                fire_pid: p,
            };
            cx.push_thread(out, a, lwp);
        }
        "lwp-exit" => {
            let t = dec.u64("TThreadId").unwrap_or(cx.tid as u64) as u32;
            a[0] = t as u64;
            a[1] = p as u64;
            out.push(a, p, t);
        }
        "module-load" | "module-unload" => {
            a[0] = NATIVE_BASE;
            a[1] = dec.u64("ImageBase").unwrap_or(0);
            a[2] = p as u64;
            a[3] = dec.u64("ImageSize").unwrap_or(0);
            let file = dec.str("FileName").unwrap_or_default();
            let units: Vec<u16> = file.encode_utf16().chain([0]).collect();
            // at least MAX_PATH (260) units, NUL-padded: scripts read the name as
            // `*(wchar_t(*)[260])args[0]`, which must not run past the buffer
            let len = units.len().max(MAX_PATH) * 2;
            out.push_native(a, p, cx.tid, len, |w| {
                for (i, u) in units.iter().enumerate() {
                    w.bytes(2 * i, &u.to_le_bytes());
                }
            });
        }
        "exec-success" => {
            let first_load = cx
                .state
                .process(p)
                .is_some_and(|proc_| proc_.start_ns.is_some() && proc_.image_loads == 1);
            if first_load {
                out.push(a, p, cx.tid);
            }
        }
        _ => {}
    }
}
