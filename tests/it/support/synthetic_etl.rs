//! A small valid `.etl` written from hand-made records, for the events no real trace here has
//! (system calls): a header buffer with the TRACE_LOGFILE_HEADER, then one buffer per CPU with
//! that CPU's records in time order (the layouts of `../shared/etl/FORMAT.md`: 4.1 buffer
//! header, 4.4 system header, 4.5 perfinfo header, 4.6 event-trace header, 4.8 the logfile
//! header, 4.10 and 4.11 the payloads). 64-bit, QPC clock at 10 MHz: a raw timestamp `t` is
//! `t - START` ticks of 100 ns after the trace's start.
#![allow(dead_code)]

/// The raw timestamp of the logfile header: the trace's start.
pub const START: i64 = 1_000_000;
const BUFFER_SIZE: usize = 8192;
const BUFFER_HEADER: usize = 0x48;

/// The records of one CPU, in time order.
#[derive(Default)]
pub struct CpuRecords {
    records: Vec<Vec<u8>>,
    /// Each record's timestamp.
    stamps: Vec<i64>,
    first_ts: Option<i64>,
}

fn align8(n: usize) -> usize {
    (n + 7) & !7
}

/// A system-header record (0x20 bytes, header type 0x02): Process, Thread, CSwitch.
fn system(
    group: u8,
    opcode: u8,
    version: u16,
    tid: u32,
    pid: u32,
    ts: i64,
    payload: &[u8],
) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&version.to_le_bytes());
    r.extend_from_slice(&[0x02, 0xC0]);
    r.extend_from_slice(&((0x20 + payload.len()) as u16).to_le_bytes());
    r.extend_from_slice(&((group as u16) << 8 | opcode as u16).to_le_bytes());
    r.extend_from_slice(&tid.to_le_bytes());
    r.extend_from_slice(&pid.to_le_bytes());
    r.extend_from_slice(&ts.to_le_bytes());
    r.extend_from_slice(&[0; 8]);
    r.extend_from_slice(payload);
    r
}

/// A perfinfo-header record (0x10 bytes, header type 0x11): Image, SysClEnter/Exit, ISR, DPC.
fn perfinfo(group: u8, opcode: u8, version: u16, ts: i64, payload: &[u8]) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&version.to_le_bytes());
    r.extend_from_slice(&[0x11, 0xC0]);
    r.extend_from_slice(&((0x10 + payload.len()) as u16).to_le_bytes());
    r.extend_from_slice(&((group as u16) << 8 | opcode as u16).to_le_bytes());
    r.extend_from_slice(&ts.to_le_bytes());
    r.extend_from_slice(payload);
    r
}

fn utf16z(s: &str) -> Vec<u8> {
    s.encode_utf16()
        .chain([0])
        .flat_map(|u| u.to_le_bytes())
        .collect()
}

impl CpuRecords {
    fn push(&mut self, ts: i64, record: Vec<u8>) {
        self.first_ts.get_or_insert(ts);
        self.records.push(record);
        self.stamps.push(ts);
    }

    /// Process DCStart (v4): the process `pid` named `name`, running from the trace's start.
    pub fn process(&mut self, ts: i64, pid: u32, name: &str) {
        self.process_event(ts, pid, name, 3)
    }

    /// Process Start (v4): the process `pid` named `name` starts.
    pub fn process_start(&mut self, ts: i64, pid: u32, name: &str) {
        self.process_event(ts, pid, name, 1)
    }

    /// Process End (v4): the process `pid` named `name` ends.
    pub fn process_end(&mut self, ts: i64, pid: u32, name: &str) {
        self.process_event(ts, pid, name, 2)
    }

    fn process_event(&mut self, ts: i64, pid: u32, name: &str, opcode: u8) {
        let mut p = Vec::new();
        p.extend_from_slice(&(0xffff_0000_0000_0000u64 | pid as u64).to_le_bytes());
        for v in [pid, 4, 1, 0] {
            p.extend_from_slice(&v.to_le_bytes());
        }
        p.extend_from_slice(&0u64.to_le_bytes()); // DirectoryTableBase
        p.extend_from_slice(&0u32.to_le_bytes()); // Flags
        p.extend_from_slice(&0u32.to_le_bytes()); // no UserSID
        p.extend_from_slice(name.as_bytes());
        p.push(0);
        p.extend(utf16z(name)); // CommandLine
        p.extend(utf16z("")); // PackageFullName
        p.extend(utf16z("")); // ApplicationId
        self.push(ts, system(0x03, opcode, 4, 0, pid, ts, &p));
    }

    /// Thread DCStart (v3): thread `tid` of process `pid`.
    pub fn thread(&mut self, ts: i64, pid: u32, tid: u32) {
        let mut p = Vec::new();
        p.extend_from_slice(&pid.to_le_bytes());
        p.extend_from_slice(&tid.to_le_bytes());
        p.extend_from_slice(&[0; 7 * 8]);
        p.extend_from_slice(&0u32.to_le_bytes());
        p.extend_from_slice(&[8, 5, 2, 0]);
        self.push(ts, system(0x05, 3, 3, tid, pid, ts, &p));
    }

    /// Image DCStart (v2) of process `pid`.
    pub fn image(&mut self, ts: i64, pid: u32, base: u64, size: u64, file_name: &str) {
        self.image_record(3, ts, pid, base, size, file_name)
    }

    /// Image Load (v2) of process `pid`.
    pub fn image_load(&mut self, ts: i64, pid: u32, base: u64, size: u64, file_name: &str) {
        self.image_record(10, ts, pid, base, size, file_name)
    }

    /// Image Unload (v2) of process `pid`.
    pub fn image_unload(&mut self, ts: i64, pid: u32, base: u64, size: u64, file_name: &str) {
        self.image_record(2, ts, pid, base, size, file_name)
    }

    /// SampledProfile (v2) of thread `tid` at `ip`, then its StackWalk Stack record (v2) with
    /// `frames` (innermost first) of process `pid`.
    pub fn sample(&mut self, ts: i64, pid: u32, tid: u32, frames: &[u64]) {
        let mut p = Vec::new();
        p.extend_from_slice(&frames.first().copied().unwrap_or(0).to_le_bytes());
        p.extend_from_slice(&tid.to_le_bytes());
        p.extend_from_slice(&[1, 0, 0, 0]); // Count, flags, rank
        self.push(ts, perfinfo(0x0F, 46, 2, ts, &p));
        let mut s = Vec::new();
        s.extend_from_slice(&ts.to_le_bytes());
        s.extend_from_slice(&pid.to_le_bytes());
        s.extend_from_slice(&tid.to_le_bytes());
        for f in frames {
            s.extend_from_slice(&f.to_le_bytes());
        }
        self.push(ts, perfinfo(0x18, 32, 2, ts, &s));
    }

    fn image_record(
        &mut self,
        opcode: u8,
        ts: i64,
        pid: u32,
        base: u64,
        size: u64,
        file_name: &str,
    ) {
        let mut p = Vec::new();
        p.extend_from_slice(&base.to_le_bytes());
        p.extend_from_slice(&size.to_le_bytes());
        p.extend_from_slice(&pid.to_le_bytes());
        p.extend_from_slice(&[0; 12]); // checksum, TimeDateStamp, Reserved0
        p.extend_from_slice(&base.to_le_bytes()); // DefaultBase
        p.extend_from_slice(&[0; 16]);
        p.extend(utf16z(file_name));
        self.push(ts, perfinfo(0x14, opcode, 2, ts, &p));
    }

    /// KernelTraceControl's DbgID_RSDS (event-trace header, 0x14): the PDB of an image.
    pub fn pdb_identity(
        &mut self,
        ts: i64,
        pid: u32,
        base: u64,
        guid: [u8; 16],
        age: u32,
        pdb: &str,
    ) {
        let mut p = Vec::new();
        p.extend_from_slice(&base.to_le_bytes());
        p.extend_from_slice(&pid.to_le_bytes());
        p.extend_from_slice(&guid);
        p.extend_from_slice(&age.to_le_bytes());
        p.extend_from_slice(pdb.as_bytes());
        p.push(0);
        // ImageID provider b3e675d7-2554-4f18-830b-2762732560de
        let provider: [u8; 16] = [
            0xd7, 0x75, 0xe6, 0xb3, 0x54, 0x25, 0x18, 0x4f, 0x83, 0x0b, 0x27, 0x62, 0x73, 0x25,
            0x60, 0xde,
        ];
        let mut r = Vec::new();
        r.extend_from_slice(&((0x30 + p.len()) as u16).to_le_bytes());
        r.extend_from_slice(&[0x14, 0xC0, 36, 0]);
        r.extend_from_slice(&2u16.to_le_bytes());
        r.extend_from_slice(&u32::MAX.to_le_bytes());
        r.extend_from_slice(&u32::MAX.to_le_bytes());
        r.extend_from_slice(&ts.to_le_bytes());
        r.extend_from_slice(&provider);
        r.extend_from_slice(&[0; 8]);
        r.extend_from_slice(&p);
        self.push(ts, r);
    }

    /// A context switch (CSwitch v2) from thread `old` to thread `new` on this CPU.
    pub fn cswitch(&mut self, ts: i64, new: u32, old: u32) {
        let mut p = Vec::new();
        p.extend_from_slice(&new.to_le_bytes());
        p.extend_from_slice(&old.to_le_bytes());
        p.extend_from_slice(&[8, 8, 0, 0, 0, 0, 5, 0]); // old thread left Waiting
        p.extend_from_slice(&[0; 8]);
        self.push(ts, system(0x05, 36, 2, u32::MAX, u32::MAX, ts, &p));
    }

    /// SysClEnter: a call of the service routine at `address`.
    pub fn syscall_enter(&mut self, ts: i64, address: u64) {
        self.push(ts, perfinfo(0x0F, 51, 2, ts, &address.to_le_bytes()));
    }

    /// SysClExit with `status`.
    pub fn syscall_exit(&mut self, ts: i64, status: u32) {
        self.push(ts, perfinfo(0x0F, 52, 2, ts, &status.to_le_bytes()));
    }

    /// An ISR of `routine` (vector 0x31).
    pub fn isr(&mut self, ts: i64, routine: u64) {
        let mut p = Vec::new();
        p.extend_from_slice(&(ts - 1).to_le_bytes());
        p.extend_from_slice(&routine.to_le_bytes());
        p.extend_from_slice(&[1, 0x31, 0, 0]);
        self.push(ts, perfinfo(0x0F, 67, 2, ts, &p));
    }

    /// A DPC of `routine`.
    pub fn dpc(&mut self, ts: i64, routine: u64) {
        let mut p = Vec::new();
        p.extend_from_slice(&(ts - 1).to_le_bytes());
        p.extend_from_slice(&routine.to_le_bytes());
        self.push(ts, perfinfo(0x0F, 68, 2, ts, &p));
    }
}

/// One buffer of `records` for CPU `cpu` (flags, type as FORMAT.md 4.1 observed).
fn buffer(cpu: u8, ts: i64, flags: u16, kind: u16, records: &[Vec<u8>]) -> Vec<u8> {
    let mut b = vec![0u8; BUFFER_HEADER];
    for r in records {
        b.extend_from_slice(r);
        b.resize(align8(b.len()), 0);
    }
    let filled = b.len();
    assert!(filled <= BUFFER_SIZE, "records overflow one buffer");
    b.resize(BUFFER_SIZE, 0xFF);
    b[0..4].copy_from_slice(&(BUFFER_SIZE as u32).to_le_bytes());
    b[4..8].copy_from_slice(&(filled as u32).to_le_bytes());
    b[8..12].copy_from_slice(&(filled as u32).to_le_bytes());
    b[0x10..0x18].copy_from_slice(&ts.to_le_bytes());
    b[0x28] = cpu;
    b[0x30..0x34].copy_from_slice(&(filled as u32).to_le_bytes());
    b[0x34..0x36].copy_from_slice(&flags.to_le_bytes());
    b[0x36..0x38].copy_from_slice(&kind.to_le_bytes());
    b
}

/// The TRACE_LOGFILE_HEADER record (64-bit) of a trace of `cpus` processors.
fn logfile_header(cpus: u32) -> Vec<u8> {
    let mut p = vec![0u8; 0x118];
    p[0..4].copy_from_slice(&(BUFFER_SIZE as u32).to_le_bytes());
    p[4..8].copy_from_slice(&[6, 1, 1, 0]);
    p[8..12].copy_from_slice(&7601u32.to_le_bytes());
    p[0x0C..0x10].copy_from_slice(&cpus.to_le_bytes());
    p[0x2C..0x30].copy_from_slice(&8u32.to_le_bytes());
    p[0x100..0x108].copy_from_slice(&10_000_000i64.to_le_bytes());
    // 2026-01-01 as FILETIME
    p[0x108..0x110].copy_from_slice(&134_116_992_000_000_000i64.to_le_bytes());
    p[0x110..0x114].copy_from_slice(&1u32.to_le_bytes());
    p.extend(utf16z("dtx synthetic"));
    p.extend(utf16z("synthetic.etl"));
    let mut r = system(0, 0, 2, 0, 0, START, &p);
    r[0..2].copy_from_slice(&2u16.to_le_bytes());
    r
}

/// The bytes of a trace whose CPU `i` logged `cpus[i]`.
pub fn trace_bytes(cpus: &[CpuRecords]) -> Vec<u8> {
    let mut out = buffer(0, START, 0x01, 4, &[logfile_header(cpus.len() as u32)]);
    for (i, c) in cpus.iter().enumerate() {
        // as many buffers as the records fill, each stamped with its first record's time
        let mut from = 0;
        while from < c.records.len() {
            let (mut to, mut used) = (from, BUFFER_HEADER);
            while to < c.records.len() && used + align8(c.records[to].len()) <= BUFFER_SIZE {
                used += align8(c.records[to].len());
                to += 1;
            }
            let first = c.stamps.get(from).copied().or(c.first_ts).unwrap_or(START);
            out.extend(buffer(
                i as u8,
                first,
                0,
                0,
                &c.records[from..to.max(from + 1)],
            ));
            from = to.max(from + 1);
        }
    }
    out
}
