//! The perf ring-buffer record format (`include/uapi/linux/perf_event.h`): record types, the
//! sample layout selected by `sample_type`, call-chain context markers, and the `sample_id`
//! trailer of side-band records. Platform-neutral so that it is tested on any OS.

/// `perf_event_header.type`
pub mod kind {
    pub const MMAP: u32 = 1;
    pub const LOST: u32 = 2;
    pub const COMM: u32 = 3;
    pub const EXIT: u32 = 4;
    pub const FORK: u32 = 7;
    pub const SAMPLE: u32 = 9;
    pub const MMAP2: u32 = 10;
}

/// `perf_event_attr.sample_type` bits.
pub mod sample {
    pub const IP: u64 = 1 << 0;
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const ADDR: u64 = 1 << 3;
    pub const READ: u64 = 1 << 4;
    pub const CALLCHAIN: u64 = 1 << 5;
    pub const ID: u64 = 1 << 6;
    pub const CPU: u64 = 1 << 7;
    pub const PERIOD: u64 = 1 << 8;
    pub const STREAM_ID: u64 = 1 << 9;
    pub const RAW: u64 = 1 << 10;
    pub const BRANCH_STACK: u64 = 1 << 11;
    pub const REGS_USER: u64 = 1 << 12;
    pub const STACK_USER: u64 = 1 << 13;
    pub const IDENTIFIER: u64 = 1 << 16;
}

/// `PERF_REG_X86_*` indexes of `sample_regs_user` (x86-64).
pub mod x86_reg {
    pub const AX: u32 = 0;
    pub const BX: u32 = 1;
    pub const CX: u32 = 2;
    pub const DX: u32 = 3;
    pub const SI: u32 = 4;
    pub const DI: u32 = 5;
    pub const BP: u32 = 6;
    pub const SP: u32 = 7;
    pub const IP: u32 = 8;
    pub const FLAGS: u32 = 9;
    pub const CS: u32 = 10;
    pub const SS: u32 = 11;
    pub const R8: u32 = 16;
    /// Every register a 64-bit process can sample (the segment registers ds es fs gs, 12 to
    /// 15, are refused for 64-bit tasks).
    pub const MASK: u64 = 0x00ff_0fff;
}

/// A sample of `IDENTIFIER | TID | TIME | CPU | REGS_USER [| STACK_USER]`: the registers of
/// the user task (in `x86_reg` bit order of the mask asked for) and a copy of its stack.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UserSample<'a> {
    pub id: u64,
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub cpu: u32,
    /// `abi` 0 (no user registers: the task was in the kernel) leaves this empty.
    pub regs: &'a [u8],
    /// The bytes of the stack from the stack pointer up.
    pub stack: &'a [u8],
}

impl UserSample<'_> {
    /// Register `index` (a `x86_reg` number) of a sample taken with `mask`.
    pub fn reg(&self, mask: u64, index: u32) -> Option<u64> {
        reg_in(self.regs, mask, index)
    }
}

/// Parses a sample of [`UserSample`]'s layout; `mask` is the `sample_regs_user` asked for.
pub fn parse_user_sample(body: &[u8], mask: u64, stack: bool) -> Option<UserSample<'_>> {
    let mut c = Cursor { b: body, at: 0 };
    let mut s = UserSample {
        id: c.u64()?,
        ..Default::default()
    };
    s.pid = c.u32()?;
    s.tid = c.u32()?;
    s.time = c.u64()?;
    s.cpu = c.u32()?;
    c.u32()?;
    s.regs = c.user_regs(mask)?;
    if stack {
        s.stack = c.user_stack()?;
    }
    Some(s)
}

/// Call-chain entries at or above this are context markers, not addresses.
pub const CONTEXT_MAX: u64 = -4095i64 as u64;
pub const CONTEXT_KERNEL: u64 = -128i64 as u64;
pub const CONTEXT_USER: u64 = -512i64 as u64;

/// `PERF_RECORD_MISC_COMM_EXEC`: the COMM record of an `exec`.
pub const MISC_COMM_EXEC: u16 = 1 << 13;

/// The fixed record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: u32,
    pub misc: u16,
    pub size: u16,
}

impl Header {
    pub const SIZE: usize = 8;

    pub fn parse(b: &[u8]) -> Option<Header> {
        let b = b.get(..8)?;
        Some(Header {
            kind: u32::from_le_bytes(b[0..4].try_into().ok()?),
            misc: u16::from_le_bytes([b[4], b[5]]),
            size: u16::from_le_bytes([b[6], b[7]]),
        })
    }
}

/// A `PERF_RECORD_SAMPLE` body, for the sample types dtx asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample<'a> {
    pub id: u64,
    pub ip: u64,
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub cpu: u32,
    /// The call chain: little-endian u64 entries, context markers included.
    pub callchain: &'a [u8],
    /// The tracepoint's raw record.
    pub raw: &'a [u8],
    /// The user registers (`REGS_USER`, in `x86_reg` bit order of the mask asked for); empty
    /// when the sampled task has no user context (a kernel thread, the idle task).
    pub regs: &'a [u8],
    /// The copy of the user stack from the stack pointer up (`STACK_USER`).
    pub stack: &'a [u8],
}

impl Sample<'_> {
    /// Register `index` (a `x86_reg` number) of a sample taken with `mask`.
    pub fn reg(&self, mask: u64, index: u32) -> Option<u64> {
        reg_in(self.regs, mask, index)
    }
}

/// Register `index` of a register block sampled with `mask`.
fn reg_in(regs: &[u8], mask: u64, index: u32) -> Option<u64> {
    if index >= 64 || mask & (1 << index) == 0 {
        return None;
    }
    let at = (mask & ((1u64 << index) - 1)).count_ones() as usize * 8;
    Some(u64::from_le_bytes(regs.get(at..at + 8)?.try_into().ok()?))
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn u64(&mut self) -> Option<u64> {
        let v = u64::from_le_bytes(self.b.get(self.at..self.at + 8)?.try_into().ok()?);
        self.at += 8;
        Some(v)
    }
    fn u32(&mut self) -> Option<u32> {
        let v = u32::from_le_bytes(self.b.get(self.at..self.at + 4)?.try_into().ok()?);
        self.at += 4;
        Some(v)
    }
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    /// `REGS_USER`: the ABI word, then one word per bit of `mask` unless the ABI is 0 (no
    /// user context).
    fn user_regs(&mut self, mask: u64) -> Option<&'a [u8]> {
        let abi = self.u64()?;
        if abi == 0 {
            return Some(&[]);
        }
        self.take(mask.count_ones() as usize * 8)
    }
    /// `STACK_USER`: the size asked for, the copy, and how much of it is stack (`dyn_size`,
    /// present only when the size is not 0).
    fn user_stack(&mut self) -> Option<&'a [u8]> {
        let size = self.u64()? as usize;
        if size == 0 {
            return Some(&[]);
        }
        let data = self.take(size)?;
        let dyn_size = self.u64()? as usize;
        Some(&data[..dyn_size.min(size)])
    }
}

/// Parses a sample's body (after the header) laid out by `sample_type`. Fields dtx never asks
/// for (`READ`, branch stacks...) end the parse; those after them are left empty. User
/// registers, when asked for, were sampled with `regs_mask`.
pub fn parse_sample(body: &[u8], sample_type: u64) -> Option<Sample<'_>> {
    parse_sample_regs(body, sample_type, 0)
}

/// [`parse_sample`] of a sample that may carry user registers (`sample_regs_user` = `regs_mask`)
/// and a copy of the user stack.
pub fn parse_sample_regs(body: &[u8], sample_type: u64, regs_mask: u64) -> Option<Sample<'_>> {
    let mut c = Cursor { b: body, at: 0 };
    let mut s = Sample::default();
    if sample_type & sample::IDENTIFIER != 0 {
        s.id = c.u64()?;
    }
    if sample_type & sample::IP != 0 {
        s.ip = c.u64()?;
    }
    if sample_type & sample::TID != 0 {
        s.pid = c.u32()?;
        s.tid = c.u32()?;
    }
    if sample_type & sample::TIME != 0 {
        s.time = c.u64()?;
    }
    if sample_type & sample::ADDR != 0 {
        c.u64()?;
    }
    if sample_type & sample::ID != 0 {
        s.id = c.u64()?;
    }
    if sample_type & sample::STREAM_ID != 0 {
        c.u64()?;
    }
    if sample_type & sample::CPU != 0 {
        s.cpu = c.u32()?;
        c.u32()?;
    }
    if sample_type & sample::PERIOD != 0 {
        c.u64()?;
    }
    if sample_type & sample::READ != 0 {
        return Some(s);
    }
    if sample_type & sample::CALLCHAIN != 0 {
        let n = c.u64()? as usize;
        s.callchain = c.take(n.checked_mul(8)?)?;
    }
    if sample_type & sample::RAW != 0 {
        let n = c.u32()? as usize;
        s.raw = c.take(n)?;
    }
    if sample_type & sample::BRANCH_STACK != 0 {
        return Some(s);
    }
    if sample_type & sample::REGS_USER != 0 {
        s.regs = c.user_regs(regs_mask)?;
    }
    if sample_type & sample::STACK_USER != 0 {
        s.stack = c.user_stack()?;
    }
    Some(s)
}

/// The `sample_id` trailer of a side-band record (`sample_id_all`): its time and CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleId {
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub cpu: u32,
    pub id: u64,
}

/// Parses the trailer at the end of `body` for `sample_type` (only its `TID TIME ID STREAM_ID
/// CPU IDENTIFIER` bits lay out the trailer).
pub fn parse_sample_id(body: &[u8], sample_type: u64) -> Option<SampleId> {
    let len = sample_id_len(sample_type);
    let start = body.len().checked_sub(len)?;
    let mut c = Cursor { b: body, at: start };
    let mut s = SampleId::default();
    if sample_type & sample::TID != 0 {
        s.pid = c.u32()?;
        s.tid = c.u32()?;
    }
    if sample_type & sample::TIME != 0 {
        s.time = c.u64()?;
    }
    if sample_type & sample::ID != 0 {
        s.id = c.u64()?;
    }
    if sample_type & sample::STREAM_ID != 0 {
        c.u64()?;
    }
    if sample_type & sample::CPU != 0 {
        s.cpu = c.u32()?;
        c.u32()?;
    }
    if sample_type & sample::IDENTIFIER != 0 {
        s.id = c.u64()?;
    }
    Some(s)
}

fn sample_id_len(sample_type: u64) -> usize {
    [
        sample::TID,
        sample::TIME,
        sample::ID,
        sample::STREAM_ID,
        sample::CPU,
        sample::IDENTIFIER,
    ]
    .iter()
    .filter(|b| sample_type & **b != 0)
    .count()
        * 8
}

/// Splits a call chain into kernel and user frames (innermost first), dropping context markers.
pub fn split_callchain(chain: &[u8], kernel: &mut Vec<u64>, user: &mut Vec<u64>) {
    kernel.clear();
    user.clear();
    let mut in_user = false;
    for e in chain.chunks_exact(8) {
        let pc = u64::from_le_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]]);
        if pc >= CONTEXT_MAX {
            in_user = pc == CONTEXT_USER;
            continue;
        }
        if in_user {
            user.push(pc);
        } else {
            kernel.push(pc);
        }
    }
}

/// `PERF_RECORD_COMM`: pid, tid and the new name.
pub fn parse_comm(body: &[u8]) -> Option<(u32, u32, &[u8])> {
    let pid = u32::from_le_bytes(body.get(0..4)?.try_into().ok()?);
    let tid = u32::from_le_bytes(body.get(4..8)?.try_into().ok()?);
    let rest = body.get(8..)?;
    let n = rest.iter().position(|&c| c == 0)?;
    Some((pid, tid, &rest[..n]))
}

/// `PERF_RECORD_FORK` / `PERF_RECORD_EXIT`: (pid, ppid, tid, ptid, time).
pub fn parse_task(body: &[u8]) -> Option<(u32, u32, u32, u32, u64)> {
    let mut c = Cursor { b: body, at: 0 };
    Some((c.u32()?, c.u32()?, c.u32()?, c.u32()?, c.u64()?))
}

/// A `PERF_RECORD_MMAP2`: a file mapped into a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mmap2<'a> {
    pub pid: u32,
    pub addr: u64,
    pub len: u64,
    pub pgoff: u64,
    pub prot: u32,
    pub filename: &'a [u8],
}

/// `PERF_RECORD_MMAP2`: pid, tid, addr, len, pgoff, 24 bytes of device and inode (or build
/// id), prot, flags, the file name (NUL-padded to 8 bytes), then the `sample_id` trailer.
pub fn parse_mmap2(body: &[u8]) -> Option<Mmap2<'_>> {
    let mut c = Cursor { b: body, at: 0 };
    let pid = c.u32()?;
    let _tid = c.u32()?;
    let (addr, len, pgoff) = (c.u64()?, c.u64()?, c.u64()?);
    c.take(24)?;
    let prot = c.u32()?;
    let _flags = c.u32()?;
    let rest = body.get(c.at..)?;
    let n = rest.iter().position(|&b| b == 0)?;
    Some(Mmap2 {
        pid,
        addr,
        len,
        pgoff,
        prot,
        filename: &rest[..n],
    })
}

/// `PERF_RECORD_LOST`: (id, records lost).
pub fn parse_lost(body: &[u8]) -> Option<(u64, u64)> {
    let mut c = Cursor { b: body, at: 0 };
    Some((c.u64()?, c.u64()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push64(v: &mut Vec<u8>, x: u64) {
        v.extend_from_slice(&x.to_le_bytes());
    }

    #[test]
    fn an_mmap2_record_gives_its_file_and_range() {
        let mut b = Vec::new();
        push32(&mut b, 42);
        push32(&mut b, 43);
        push64(&mut b, 0x7f00_0000_1000);
        push64(&mut b, 0x2000);
        push64(&mut b, 0x1000);
        b.extend_from_slice(&[0u8; 24]);
        push32(&mut b, 5);
        push32(&mut b, 2);
        b.extend_from_slice(b"/usr/lib/libc.so.6\0\0\0\0\0\0");
        // the sample_id trailer
        push64(&mut b, 7);
        let m = parse_mmap2(&b).unwrap();
        assert_eq!(
            m,
            Mmap2 {
                pid: 42,
                addr: 0x7f00_0000_1000,
                len: 0x2000,
                pgoff: 0x1000,
                prot: 5,
                filename: b"/usr/lib/libc.so.6",
            }
        );
        // cut short: nothing
        assert_eq!(parse_mmap2(&b[..40]), None);
        assert_eq!(parse_mmap2(&b[..70]), None);
    }
    fn push32(v: &mut Vec<u8>, x: u32) {
        v.extend_from_slice(&x.to_le_bytes());
    }

    #[test]
    fn sample_fields_follow_sample_type_order() {
        let st = sample::IDENTIFIER
            | sample::IP
            | sample::TID
            | sample::TIME
            | sample::CPU
            | sample::CALLCHAIN
            | sample::RAW;
        let mut b = Vec::new();
        push64(&mut b, 77); // identifier
        push64(&mut b, 0xffff_ffff_8100_0000); // ip
        push32(&mut b, 10); // pid
        push32(&mut b, 11); // tid
        push64(&mut b, 123_456); // time
        push32(&mut b, 1); // cpu
        push32(&mut b, 0); // res
        push64(&mut b, 4); // callchain nr
        push64(&mut b, CONTEXT_KERNEL);
        push64(&mut b, 0xffff_ffff_8100_0010);
        push64(&mut b, CONTEXT_USER);
        push64(&mut b, 0x40_1000);
        push32(&mut b, 4); // raw size
        b.extend_from_slice(&[1, 2, 3, 4]);
        let s = parse_sample(&b, st).unwrap();
        assert_eq!(
            (s.id, s.pid, s.tid, s.time, s.cpu),
            (77, 10, 11, 123_456, 1)
        );
        assert_eq!(s.raw, &[1, 2, 3, 4]);
        let (mut k, mut u) = (Vec::new(), Vec::new());
        split_callchain(s.callchain, &mut k, &mut u);
        assert_eq!(k, vec![0xffff_ffff_8100_0010]);
        assert_eq!(u, vec![0x40_1000]);
        // a truncated body is refused rather than misread
        assert!(parse_sample(&b[..b.len() - 2], st).is_none());
    }

    #[test]
    fn side_band_records_and_trailer() {
        let st = sample::IDENTIFIER | sample::TID | sample::TIME | sample::CPU;
        let mut b = Vec::new();
        push32(&mut b, 5);
        push32(&mut b, 6);
        b.extend_from_slice(b"true\0\0\0\0");
        // trailer: pid tid, time, cpu res, identifier
        push32(&mut b, 5);
        push32(&mut b, 6);
        push64(&mut b, 999);
        push32(&mut b, 3);
        push32(&mut b, 0);
        push64(&mut b, 42);
        assert_eq!(parse_comm(&b), Some((5, 6, &b"true"[..])));
        let id = parse_sample_id(&b, st).unwrap();
        assert_eq!((id.time, id.cpu, id.id, id.tid), (999, 3, 42, 6));
        let h = Header::parse(&[9, 0, 0, 0, 0, 0x20, 48, 0]).unwrap();
        assert_eq!((h.kind, h.misc, h.size), (kind::SAMPLE, MISC_COMM_EXEC, 48));
        let mut lost = Vec::new();
        push64(&mut lost, 1);
        push64(&mut lost, 17);
        assert_eq!(parse_lost(&lost), Some((1, 17)));
    }

    #[test]
    fn a_profile_sample_with_user_registers_and_stack() {
        let st = sample::IDENTIFIER
            | sample::IP
            | sample::TID
            | sample::TIME
            | sample::CPU
            | sample::CALLCHAIN
            | sample::REGS_USER
            | sample::STACK_USER;
        let mask = (1 << x86_reg::SP) | (1 << x86_reg::IP);
        let head = |b: &mut Vec<u8>| {
            push64(b, 5); // identifier
            push64(b, 0x40_1000); // ip
            push32(b, 10);
            push32(b, 11);
            push64(b, 99); // time
            push32(b, 0);
            push32(b, 0);
            push64(b, 0); // no call chain
        };
        let mut b = Vec::new();
        head(&mut b);
        push64(&mut b, 2); // abi 64
        push64(&mut b, 0x7ff0); // sp
        push64(&mut b, 0x40_1000); // ip
        push64(&mut b, 8); // stack size
        push64(&mut b, 0x40_2000);
        push64(&mut b, 8); // dyn size
        let s = parse_sample_regs(&b, st, mask).unwrap();
        assert_eq!((s.ip, s.tid), (0x40_1000, 11));
        assert_eq!(s.reg(mask, x86_reg::SP), Some(0x7ff0));
        assert_eq!(s.stack, &0x40_2000u64.to_le_bytes());
        // a kernel thread: abi 0, no registers, a stack of size 0 with no dyn_size
        let mut k = Vec::new();
        head(&mut k);
        push64(&mut k, 0);
        push64(&mut k, 0);
        let s = parse_sample_regs(&k, st, mask).unwrap();
        assert!(s.regs.is_empty() && s.stack.is_empty());
        assert_eq!(s.reg(mask, x86_reg::IP), None);
        // cut short
        assert!(parse_sample_regs(&b[..b.len() - 4], st, mask).is_none());
    }

    #[test]
    fn user_sample_registers_and_stack() {
        let mask = (1 << x86_reg::AX) | (1 << x86_reg::SP) | (1 << x86_reg::IP);
        let mut b = Vec::new();
        push64(&mut b, 77); // identifier
        push32(&mut b, 10); // pid
        push32(&mut b, 11); // tid
        push64(&mut b, 1234); // time
        push32(&mut b, 1); // cpu
        push32(&mut b, 0);
        push64(&mut b, 2); // abi 64
        push64(&mut b, 0xaa); // ax
        push64(&mut b, 0x7ff0); // sp
        push64(&mut b, 0x401000); // ip
        push64(&mut b, 16); // stack size
        b.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
        push64(&mut b, 8); // dyn size: half of it is the stack
        let s = parse_user_sample(&b, mask, true).unwrap();
        assert_eq!((s.id, s.pid, s.tid, s.time, s.cpu), (77, 10, 11, 1234, 1));
        assert_eq!(s.reg(mask, x86_reg::AX), Some(0xaa));
        assert_eq!(s.reg(mask, x86_reg::SP), Some(0x7ff0));
        assert_eq!(s.reg(mask, x86_reg::IP), Some(0x401000));
        assert_eq!(s.reg(mask, x86_reg::BX), None);
        assert_eq!(s.stack, &[1, 2, 3, 4, 5, 6, 7, 8]);
        // a sample cut short is refused
        assert_eq!(parse_user_sample(&b[..40], mask, true), None);
    }
}
