//! `fsinfo`: one probe per FileIo operation (create 64 ... dirnotify 77, done = OperationEnd).
//! As on the Windows port, args[0] is a `fileinfo_t *` translated from a `wfileinfo_t`
//! (dscripts/lib/io.d) built here; the file name comes from the create's path or from the
//! FileIo name and rundown events (the system state). The firing runs in the thread that
//! issued the operation (TTID).

use super::native::{wfileinfo, NATIVE_BASE};
use super::{Emit, EventCx};

pub(super) fn fire(cx: &EventCx<'_, '_>, _name: &str, out: &mut Emit<'_>) {
    let dec = cx.dec;
    let obj = dec.u64("FileObject").unwrap_or(0);
    let open_path = dec.str("OpenPath");
    let name = open_path
        .as_deref()
        .or_else(|| cx.state.file_name(obj))
        .or_else(|| cx.state.file_name(dec.u64("FileKey").unwrap_or(0)))
        .unwrap_or("");
    let tid = match dec.u64("TTID") {
        Some(t) if t != 0 && t <= u32::MAX as u64 => t as u32,
        _ => cx.tid,
    };
    let pid = if tid == cx.tid {
        cx.pid
    } else {
        cx.pid_of(tid)
    };
    let mut a = [0u64; 10];
    a[0] = NATIVE_BASE;
    let directory = matches!(cx.ev.opcode, 72 | 77);
    out.push_native(a, pid, tid, wfileinfo::SIZE, |w| {
        w.u64(wfileinfo::OFFSET, dec.u64("Offset").unwrap_or(0));
        w.u64(wfileinfo::IOFLAGS, dec.u64("IoFlags").unwrap_or(0));
        w.u64(wfileinfo::CREATEOPT, dec.u64("CreateOptions").unwrap_or(0));
        w.u64(
            wfileinfo::FILEATTRIB,
            dec.u64("FileAttributes").unwrap_or(0),
        );
        w.u64(wfileinfo::SHAREFLAGS, dec.u64("ShareAccess").unwrap_or(0));
        w.u64(wfileinfo::IOSIZE, dec.u64("IoSize").unwrap_or(0));
        w.u64(wfileinfo::EXTINFO, dec.u64("ExtraInfo").unwrap_or(0));
        w.u64(wfileinfo::NTSTATUS, dec.u64("NtStatus").unwrap_or(0));
        w.u64(wfileinfo::DLEN, dec.u64("Length").unwrap_or(0));
        w.u64(wfileinfo::IRPPTR, dec.u64("IrpPtr").unwrap_or(0));
        w.u64(wfileinfo::FILEOBJ, obj);
        w.u64(wfileinfo::INFOCLASS, dec.u64("InfoClass").unwrap_or(0));
        if directory {
            w.str(
                wfileinfo::DPATTERN,
                dec.str("FileName").as_deref().unwrap_or(""),
            );
        }
        w.str(wfileinfo::NAME, name);
    });
}
