//! `io`: `start` from DiskIo ReadInit/WriteInit/FlushInit, `done` from DiskIo Read/Write/
//! FlushBuffers. As on the Windows port, args[0] is a `bufinfo_t *`, args[1] a `devinfo_t *`,
//! args[2] a `fileinfo_t *`, all translated from one `buf_t` (dscripts/lib/io.d) built here.
//! The init events carry only the IRP (and the thread); over a recorded trace, `start` reads
//! the rest (size, offset, disk, file object, hence the file's name) from the completion of the
//! same IRP, which the trace's read-ahead pass found (`crate::etw::state::disk`), so that
//! `b_bcount` and the file are known at the start, as DTrace's io provider gives them. Live,
//! and for a start whose completion the trace does not hold, they are 0 and `<none>`. At
//! `done`, `resp` (bufinfo_t) is the disk's response time in ns.

use super::native::{buf, NATIVE_BASE};
use super::{Emit, EventCx};

/// `B_READ`, `B_WRITE`, `B_FLUSH`.
const B_READ: u64 = 1;
const B_WRITE: u64 = 2;
const B_FLUSH: u64 = 4;

/// The DiskIo opcodes of the start records: ReadInit, WriteInit, FlushInit.
pub(super) const START_OPCODES: [u8; 3] = [12, 13, 15];

/// The request's facts, as its own record or (at a start) its completion says them.
#[derive(Default)]
struct Request {
    irp_flags: u64,
    bcount: u64,
    offset: u64,
    disk: u64,
    fileobj: u64,
}

pub(super) fn fire(cx: &EventCx<'_, '_>, _name: &str, out: &mut Emit<'_>) {
    let dec = cx.dec;
    let flags = match cx.ev.opcode {
        10 | 12 => B_READ,
        11 | 13 => B_WRITE,
        _ => B_FLUSH,
    };
    let irp = dec.u64("Irp").unwrap_or(0);
    let req = if START_OPCODES.contains(&cx.ev.opcode) {
        match cx.state.disk_completion(irp, cx.ev.time_ns) {
            Some(c) => Request {
                irp_flags: c.irp_flags,
                bcount: c.transfer_size,
                offset: c.byte_offset,
                disk: c.disk_number,
                fileobj: c.file_object,
            },
            None => Request::default(),
        }
    } else {
        Request {
            irp_flags: dec.u64("IrpFlags").unwrap_or(0),
            bcount: dec.u64("TransferSize").unwrap_or(0),
            offset: dec.u64("ByteOffset").unwrap_or(0),
            disk: dec.u64("DiskNumber").unwrap_or(0),
            fileobj: dec.u64("FileObject").unwrap_or(0),
        }
    };
    let name = cx.state.file_name(req.fileobj).unwrap_or("");
    // the issuing thread, when the event names it (version 3)
    let tid = dec
        .u64("IssuingThreadId")
        .map(|t| t as u32)
        .unwrap_or(cx.tid);
    let pid = if tid == cx.tid {
        cx.pid
    } else {
        cx.pid_of(tid)
    };
    let mut a = [NATIVE_BASE; 10];
    a[3..].fill(0);
    let resp = dec
        .u64("HighResResponseTime")
        .map(|t| cx.state.ticks_to_ns(cx.ev, t))
        .unwrap_or(0);
    out.push_native(a, pid, tid, buf::SIZE, |w| {
        w.u64(buf::FLAGS, flags);
        w.u64(buf::IRPFLAGS, req.irp_flags);
        w.u64(buf::BCOUNT, req.bcount);
        w.u64(buf::OFFSET, req.offset);
        w.u64(buf::IRP, irp);
        w.u64(buf::DISKNO, req.disk);
        w.u64(buf::RESPTIME, resp);
        w.u64(buf::FILEOBJ, req.fileobj);
        w.str(buf::DEVNAME, device_of(name));
        w.str(buf::FNAME, name);
    });
}

/// The device part of an NT path (`\Device\HarddiskVolume2` of
/// `\Device\HarddiskVolume2\Windows\x.dll`), or "".
pub(super) fn device_of(path: &str) -> &str {
    let Some(rest) = path.strip_prefix("\\Device\\") else {
        return "";
    };
    match rest.find('\\') {
        Some(i) => &path[..8 + i],
        None => path,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn device_of_an_nt_path() {
        assert_eq!(
            super::device_of("\\Device\\HarddiskVolume2\\Windows\\x.dll"),
            "\\Device\\HarddiskVolume2"
        );
        assert_eq!(super::device_of("C:\\x"), "");
    }
}
