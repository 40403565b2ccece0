//! `pf`, the probes of the Windows port: `hardflt` from HardFault (arg0 = virtual address,
//! arg1 = byte count, arg2 = file offset, arg3 = the file's name (`char *`, "" when unknown),
//! arg4 = initial time; the firing runs in the faulting thread); `imgload` from
//! ImageLoadBacked (arg0 = file name, arg1 = device characteristics, arg2 = file
//! characteristics and load flags, arg3 = file object); `valloc` / `vfree` from VirtualAlloc /
//! VirtualFree (arg0 = base, arg1 = process id, arg2 = region size, arg3 = flags; the firing
//! runs in that process); `trans_flt`, `dzero_flt`, `cow_flt`, `gp_flt`, `hp_flt`, `av_flt`
//! from the page fault events (arg0 = virtual address, arg1 = program counter).

use super::native::NATIVE_BASE;
use super::{Emit, EventCx};

/// The native block of a file name argument.
const NAME_LEN: usize = 512;

pub(super) fn fire(cx: &EventCx<'_, '_>, name: &str, out: &mut Emit<'_>) {
    let dec = cx.dec;
    let u = |f: &str| dec.u64(f).unwrap_or(0);
    let mut a = [0u64; 10];
    match name {
        "hardflt" => {
            a[0] = u("VirtualAddress");
            a[1] = u("ByteCount");
            a[2] = u("ReadOffset");
            a[3] = NATIVE_BASE;
            a[4] = u("InitialTime");
            let t = dec.u64("TThreadId").unwrap_or(cx.tid as u64) as u32;
            let file = cx.state.file_name(u("FileObject")).unwrap_or("");
            out.push_native(a, cx.pid_of(t), t, NAME_LEN, |w| w.str((0, NAME_LEN), file));
        }
        "imgload" => {
            a[0] = NATIVE_BASE;
            a[1] = u("DeviceChar");
            a[2] = u("FileChar") | u("LoadFlags") << 16;
            a[3] = u("FileObject");
            let file = cx.state.file_name(a[3]).unwrap_or("");
            out.push_native(a, cx.pid, cx.tid, NAME_LEN, |w| w.str((0, NAME_LEN), file));
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
