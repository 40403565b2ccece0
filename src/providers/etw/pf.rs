//! `pf`, the probes of the Windows port, with its arguments (its `sdt_etw_pf_cb`):
//! `hardflt` from HardFault (arg0 = the file's name, `wchar_t *` (`wstringof(arg0)`, "" when
//! unknown), arg1 = virtual address, arg2 = initial time, arg3 = file offset, arg4 = the
//! faulting thread's id; dtx adds arg5 = byte count; the firing runs in the faulting thread);
//! `imgload` from ImageLoadBacked (arg0 = file name, `wchar_t *`, arg1 = load flags, arg2 =
//! device characteristics, arg3 = file characteristics; dtx adds arg4 = the file object);
//! `valloc` / `vfree` from VirtualAlloc / VirtualFree (arg0 = base, arg1 = process id, arg2 =
//! region size, arg3 = flags; the firing runs in that process); `trans_flt`, `dzero_flt`,
//! `cow_flt`, `gp_flt`, `hp_flt`, `av_flt` from the page fault events (arg0 = virtual
//! address, arg1 = program counter).

use super::native::{NativeWriter, NATIVE_BASE};
use super::{Emit, EventCx};

/// The native block of a file name argument: UTF-16 units, at least `MAX_PATH`, NUL-padded
/// (as `proc:::module-load`'s name).
fn name_units(name: &str) -> Vec<u16> {
    let mut v: Vec<u16> = name.encode_utf16().collect();
    v.push(0);
    v.resize(v.len().max(260), 0);
    v
}

fn write_units(w: &mut NativeWriter<'_>, units: &[u16]) {
    for (i, c) in units.iter().enumerate() {
        w.bytes(2 * i, &c.to_le_bytes());
    }
}

pub(super) fn fire(cx: &EventCx<'_, '_>, name: &str, out: &mut Emit<'_>) {
    let dec = cx.dec;
    let u = |f: &str| dec.u64(f).unwrap_or(0);
    let mut a = [0u64; 10];
    match name {
        "hardflt" => {
            let t = dec.u64("TThreadId").unwrap_or(cx.tid as u64) as u32;
            a[0] = NATIVE_BASE;
            a[1] = u("VirtualAddress");
            a[2] = u("InitialTime");
            a[3] = u("ReadOffset");
            a[4] = t as u64;
            a[5] = u("ByteCount");
            let file = name_units(cx.state.file_name(u("FileObject")).unwrap_or(""));
            out.push_native(a, cx.pid_of(t), t, 2 * file.len(), |w| {
                write_units(w, &file)
            });
        }
        "imgload" => {
            a[0] = NATIVE_BASE;
            a[1] = u("LoadFlags");
            a[2] = u("DeviceChar");
            a[3] = u("FileChar");
            a[4] = u("FileObject");
            let file = name_units(cx.state.file_name(a[4]).unwrap_or(""));
            out.push_native(a, cx.pid, cx.tid, 2 * file.len(), |w| write_units(w, &file));
        }
        "valloc" | "vfree" => {
            a[0] = u("BaseAddress");
            a[1] = u("ProcessId");
            a[2] = u("RegionSize");
            a[3] = u("Flags");
            let pid = if a[1] != 0 { a[1] as u32 } else { cx.pid };
            out.push(a, pid, cx.tid);
        }
        _ => {
            a[0] = u("VirtualAddress");
            a[1] = u("ProgramCounter");
            out.push(a, cx.pid, cx.tid);
        }
    }
}
