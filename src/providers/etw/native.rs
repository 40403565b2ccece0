//! The native structures that translated arguments point at (`buf_t`, `wfileinfo_t`,
//! `tcpip_msg_t`, `reginfo_t` of `dscripts/lib/io.d`, `net.d`, `registry.d`), built per firing
//! from the decoded event. They live in the firing's own memory at [`NATIVE_BASE`] (the engine
//! maps [`super::EtwFirings::native_of`] there, next to the payload), so `args[0]->fi_pathname`
//! reads them through the ordinary address space, as the Windows port's translators read the
//! structures its provider fills in. Every integer member is 64-bit and strings are inline
//! arrays at the end: one layout in both data models, checked against the compiler in `tests`.

/// Where a firing's native structure appears to D.
pub const NATIVE_BASE: u64 = 0x0000_7e10_0000_0000;

/// `buf_t` (io.d).
pub mod buf {
    pub const FLAGS: usize = 0;
    pub const IRPFLAGS: usize = 8;
    pub const BCOUNT: usize = 16;
    pub const OFFSET: usize = 24;
    pub const IRP: usize = 32;
    pub const DISKNO: usize = 40;
    pub const RESPTIME: usize = 48;
    pub const FILEOBJ: usize = 56;
    pub const DEVNAME: (usize, usize) = (64, 64);
    pub const FNAME: (usize, usize) = (128, 512);
    pub const SIZE: usize = 640;
}

/// `wfileinfo_t` (io.d).
pub mod wfileinfo {
    pub const OFFSET: usize = 0;
    pub const IOFLAGS: usize = 8;
    pub const CREATEOPT: usize = 16;
    pub const FILEATTRIB: usize = 24;
    pub const SHAREFLAGS: usize = 32;
    pub const IOSIZE: usize = 40;
    pub const EXTINFO: usize = 48;
    pub const NTSTATUS: usize = 56;
    pub const DLEN: usize = 64;
    pub const IRPPTR: usize = 72;
    pub const FILEOBJ: usize = 80;
    pub const INFOCLASS: usize = 88;
    pub const DPATTERN: (usize, usize) = (96, 256);
    pub const NAME: (usize, usize) = (352, 512);
    pub const SIZE: usize = 864;
}

/// `tcpip_msg_t` / `udpip_msg_t` (net.d).
pub mod tcpip_msg {
    pub const VER: usize = 0;
    pub const SIZE_: usize = 8;
    pub const SPORT: usize = 16;
    pub const DPORT: usize = 24;
    pub const CONNID: usize = 32;
    pub const SEQNUM: usize = 40;
    pub const STARTTIME: usize = 48;
    pub const ENDTIME: usize = 56;
    pub const MSS: usize = 64;
    pub const SACKOPT: usize = 72;
    pub const TSOPT: usize = 80;
    pub const WSOPT: usize = 88;
    pub const RCVWIN: usize = 96;
    pub const RCVWINSCALE: usize = 104;
    pub const SNDWINSCALE: usize = 112;
    pub const PID: usize = 120;
    pub const SADDR: (usize, usize) = (128, 48);
    pub const DADDR: (usize, usize) = (176, 48);
    pub const SIZE: usize = 224;
}

/// `reginfo_t` (registry.d).
pub mod reginfo {
    pub const INDEX: usize = 0;
    pub const STATUS: usize = 8;
    pub const TIME: usize = 16;
    pub const HANDLE: usize = 24;
    pub const NAME: (usize, usize) = (32, 512);
    pub const SIZE: usize = 544;
}

/// A native structure being written (zeroed first).
pub struct NativeWriter<'a> {
    buf: &'a mut [u8],
}

impl<'a> NativeWriter<'a> {
    pub fn new(buf: &'a mut [u8]) -> Self {
        buf.fill(0);
        NativeWriter { buf }
    }

    pub fn u64(&mut self, off: usize, v: u64) {
        self.buf[off..off + 8].copy_from_slice(&v.to_le_bytes());
    }

    /// Raw bytes at `off`.
    pub fn bytes(&mut self, off: usize, b: &[u8]) {
        self.buf[off..off + b.len()].copy_from_slice(b);
    }

    /// A `struct thread` (base.d) at the start of the structure.
    pub fn thread(&mut self, facts: &crate::vm::thread::ThreadFacts<'_>) {
        crate::vm::thread::write(self.buf, facts);
    }

    /// A NUL-terminated copy of `s` (cut at a character boundary) in a `char[len]` member.
    pub fn str(&mut self, (off, len): (usize, usize), s: &str) {
        let mut n = s.len().min(len - 1);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.buf[off..off + n].copy_from_slice(&s.as_bytes()[..n]);
        self.buf[off + n] = 0;
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::standalone::{standalone_vm, standard_probe};
    use crate::vm::FiringCtx;

    /// `offsetof`/`sizeof` of the library's native structures, as the compiler lays them out.
    fn layout(members: &[(&str, &str)]) -> Vec<i64> {
        let body: String = members
            .iter()
            .map(|(t, m)| {
                if m.is_empty() {
                    format!("trace(sizeof({t}));")
                } else {
                    format!("trace(offsetof({t}, {m}));")
                }
            })
            .collect();
        let (mut vm, _) = standalone_vm(&format!("BEGIN {{ {body} }}")).unwrap();
        let p = standard_probe("BEGIN").unwrap();
        vm.fire(&FiringCtx::synthetic(&p, 1, 1, b"x"));
        crate::engine::standalone::first_ints(&vm)
    }

    #[test]
    fn offsets_match_the_library_layouts() {
        use super::*;
        let b = "buf_t";
        assert_eq!(
            layout(&[
                (b, "b_irpflags"),
                (b, "b_resptime"),
                (b, "b_fileobj"),
                (b, "b_devname"),
                (b, "b_fname"),
                (b, "")
            ]),
            [
                buf::IRPFLAGS,
                buf::RESPTIME,
                buf::FILEOBJ,
                buf::DEVNAME.0,
                buf::FNAME.0,
                buf::SIZE
            ]
            .map(|x| x as i64)
        );
        let f = "wfileinfo_t";
        assert_eq!(
            layout(&[
                (f, "f_ntstatus"),
                (f, "f_infoclass"),
                (f, "f_dpattern"),
                (f, "f_name"),
                (f, "")
            ]),
            [
                wfileinfo::NTSTATUS,
                wfileinfo::INFOCLASS,
                wfileinfo::DPATTERN.0,
                wfileinfo::NAME.0,
                wfileinfo::SIZE
            ]
            .map(|x| x as i64)
        );
        let t = "tcpip_msg_t";
        assert_eq!(
            layout(&[(t, "ti_pid"), (t, "ti_saddr"), (t, "ti_daddr"), (t, "")]),
            [
                tcpip_msg::PID,
                tcpip_msg::SADDR.0,
                tcpip_msg::DADDR.0,
                tcpip_msg::SIZE
            ]
            .map(|x| x as i64)
        );
        let r = "reginfo_t";
        assert_eq!(
            layout(&[(r, "r_handle"), (r, "r_name"), (r, "")]),
            [reginfo::HANDLE, reginfo::NAME.0, reginfo::SIZE].map(|x| x as i64)
        );
    }
}
