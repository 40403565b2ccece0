//! Record headers (FORMAT.md 4.3-4.7): one decoder per header kind over a byte slice, producing
//! the shared [`EventRecord`] view without copying the payload.

use super::bytes::{i64_at, u16_at, u32_at, u64_at};
use super::logfile::TimeBase;
use crate::etw::record::{EventRecord, ExtendedItems, Guid, HeaderKind};

pub const SYSTEM32: u8 = 0x01;
pub const SYSTEM64: u8 = 0x02;
pub const COMPACT32: u8 = 0x03;
pub const COMPACT64: u8 = 0x04;
pub const FULL_HEADER32: u8 = 0x0A;
pub const INSTANCE32: u8 = 0x0B;
pub const TIMED: u8 = 0x0C;
pub const ERROR: u8 = 0x0D;
pub const WNODE_HEADER: u8 = 0x0E;
pub const MESSAGE: u8 = 0x0F;
pub const PERFINFO32: u8 = 0x10;
pub const PERFINFO64: u8 = 0x11;
pub const EVENT_HEADER32: u8 = 0x12;
pub const EVENT_HEADER64: u8 = 0x13;
pub const FULL_HEADER64: u8 = 0x14;
pub const INSTANCE64: u8 = 0x15;

/// EVENT_HEADER flag: extended data items follow the header.
pub const EVENT_HEADER_FLAG_EXTENDED_INFO: u16 = 0x01;

/// The provider GUID of kernel records whose group has no known class GUID
/// (SystemTraceControlGuid, the NT kernel logger's own GUID).
pub const SYSTEM_TRACE_CONTROL_GUID: Guid = Guid {
    data1: 0x9e81_4aad,
    data2: 0x3204,
    data3: 0x11d2,
    data4: [0x9a, 0x82, 0x00, 0x60, 0x08, 0xa8, 0x69, 0x39],
};

/// Kernel groups (HookId >> 8): name and class GUID (FORMAT.md 4.9).
const KERNEL_GROUPS: &[(u8, &str, &str)] = &[
    (0x00, "Header", "68fdd900-4a3e-11d1-84f4-0000f80464e3"),
    (0x01, "DiskIo", "3d6fa8d4-fe05-11d0-9dda-00c04fd7ba7c"),
    (0x02, "PageFault", "3d6fa8d3-fe05-11d0-9dda-00c04fd7ba7c"),
    (0x03, "Process", "3d6fa8d0-fe05-11d0-9dda-00c04fd7ba7c"),
    (0x04, "FileIo", "90cbdc39-4a3e-11d1-84f4-0000f80464e3"),
    (0x05, "Thread", "3d6fa8d1-fe05-11d0-9dda-00c04fd7ba7c"),
    (0x06, "TcpIp", "9a280ac0-c8e0-11d1-84e2-00c04fb998a2"),
    (0x07, "Job", "3282fc76-feed-498e-8aa7-e70f459d430e"),
    (0x08, "UdpIp", "bf3a50c5-a9c9-4988-a005-2df0b7c80f80"),
    (0x09, "Registry", "ae53722e-c863-11d2-8659-00c04fa321a1"),
    (0x0A, "DbgPrint", "13976d09-a327-438c-950b-7f03192815c7"),
    (0x0B, "Config", "01853a65-418f-4f36-aefc-dc0f1d2fd235"),
    (0x0E, "Pool", "0268a8b6-74fd-4302-9dd0-6e8f1795c0cf"),
    (0x0F, "PerfInfo", "ce1dbfb4-137e-4da6-87b0-3f59aa102cbc"),
    (0x10, "Heap", "222962ab-6180-4b88-a825-346b75f2a24a"),
    (0x11, "Object", "89497f50-effe-4440-8cf2-ce6b1cdcaca7"),
    (0x12, "Power", "e43445e0-0903-48c3-b878-ff0fccebdd04"),
    (0x14, "Image", "2cb15d1d-5fc1-11d2-abe1-00a0c911f518"),
    (0x18, "StackWalk", "def2fe46-7bd6-4b80-bd94-f57fe20d0ce3"),
    (0x1A, "ALPC", "45d8cccd-539f-4b72-a8b7-5c683142609a"),
    (0x1B, "SplitIo", "d837ca92-12b9-44a5-ad6a-3a65b3578aa8"),
    (0x1C, "ThreadPool", "c861d0e2-a2c1-4d36-9f9c-970bab943a12"),
];

/// The class name of a kernel group (`HookId >> 8`), e.g. 0x03 → "Process".
pub fn kernel_group_name(group: u8) -> Option<&'static str> {
    KERNEL_GROUPS.iter().find(|g| g.0 == group).map(|g| g.1)
}

/// The class GUID of a kernel group, or SystemTraceControlGuid when the group is unknown.
pub fn kernel_group_guid(group: u8) -> Guid {
    static TABLE: std::sync::OnceLock<[Guid; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [SYSTEM_TRACE_CONTROL_GUID; 256];
        for (g, _, s) in KERNEL_GROUPS {
            if let Some(guid) = Guid::parse(s) {
                t[*g as usize] = guid;
            }
        }
        t
    });
    table[group as usize]
}

/// Whether `ty` is a header type this reader can size (used to judge resynchronisation points).
pub fn known_header_type(ty: u8) -> bool {
    matches!(ty, 0x01..=0x04 | 0x0A | 0x0B | 0x0F..=0x15)
}

/// The outcome of decoding the record at one offset of a buffer.
pub enum Step<'a> {
    /// A record and the offset of the next one.
    Record(EventRecord<'a>, usize),
    /// No more records in this buffer.
    End,
    /// The record at this offset is damaged; the rest of the buffer cannot be walked.
    Error(String),
}

#[inline]
fn align8(x: usize) -> usize {
    (x + 7) & !7
}

fn blank<'a>(header_type: u8, kind: HeaderKind, cpu: u16, pointer_size: u8) -> EventRecord<'a> {
    EventRecord {
        header_type,
        kind,
        flags: 0,
        provider: Guid::default(),
        kernel_group: None,
        id: 0,
        version: 0,
        channel: 0,
        level: 0,
        opcode: 0,
        task: 0,
        keyword: 0,
        pid: 0,
        tid: 0,
        cpu,
        raw_timestamp: 0,
        time_ns: 0,
        wall_ns: 0,
        pointer_size,
        activity_id: Guid::default(),
        payload: &[],
        extended: ExtendedItems::default(),
    }
}

/// Decodes the record at `off` in `buf` (a whole buffer, header included); records end at `end`.
#[inline(always)]
pub fn parse_record<'a>(
    buf: &'a [u8],
    off: usize,
    end: usize,
    cpu: u16,
    time: &TimeBase,
) -> Step<'a> {
    let mut r = blank_record(cpu);
    match parse_record_into(buf, off, end, time, &mut r) {
        StepInto::Record(next) => Step::Record(r, next),
        StepInto::End => Step::End,
        StepInto::Error(e) => Step::Error(e),
    }
}

/// The outcome of [`parse_record_into`]: as [`Step`], the record written in place.
pub enum StepInto {
    /// The record was written; the offset of the next one.
    Record(usize),
    /// No more records in this buffer.
    End,
    /// The record at this offset is damaged; the rest of the buffer cannot be walked.
    Error(String),
}

/// A record with nothing read yet but its CPU: what [`parse_record_into`] fills in.
#[inline(always)]
pub fn blank_record<'a>(cpu: u16) -> EventRecord<'a> {
    blank(0, HeaderKind::Other(0), cpu, 0)
}

/// [`parse_record`] into `r`, a [`blank_record`] (its CPU the buffer's): a walk can build
/// each record where it reads it.
#[inline(always)]
pub fn parse_record_into<'a>(
    buf: &'a [u8],
    off: usize,
    end: usize,
    time: &TimeBase,
    r: &mut EventRecord<'a>,
) -> StepInto {
    let end = end.min(buf.len());
    if off >= end {
        return StepInto::End;
    }
    let Some(marker) = u32_at(buf, off) else {
        return StepInto::Error(format!("record header cut off: {} bytes left", end - off));
    };
    if off + 4 > end {
        return StepInto::Error(format!("record header cut off: {} bytes left", end - off));
    }
    if marker == 0xFFFF_FFFF {
        return StepInto::End;
    }
    let ty = (marker >> 16) as u8;
    let mflags = (marker >> 24) as u8;
    if mflags & 0x80 == 0 {
        return StepInto::Error(format!("not a record marker: {marker:#010x}"));
    }
    let rec = match buf.get(off..end) {
        Some(rec) => rec,
        None => return StepInto::Error("record outside its buffer".into()),
    };
    let size = match ty {
        SYSTEM32 | SYSTEM64 | COMPACT32 | COMPACT64 | PERFINFO32 | PERFINFO64
            if mflags & 0x40 != 0 =>
        {
            kernel_record(rec, marker, ty, time, r)
        }
        FULL_HEADER32 | FULL_HEADER64 | INSTANCE32 | INSTANCE64 if mflags & 0x40 != 0 => {
            classic_record(rec, ty, time, r)
        }
        EVENT_HEADER32 | EVENT_HEADER64 if mflags & 0x40 != 0 => {
            event_header_record(rec, ty, time, r)
        }
        _ if mflags & 0x10 != 0 && mflags & 0x40 == 0 => message_record(rec, marker, time, r),
        _ => Err(format!(
            "unknown record header type {ty:#04x} (marker {marker:#010x})"
        )),
    };
    match size {
        Ok(size) => StepInto::Record(off + align8(size)),
        Err(e) => StepInto::Error(e),
    }
}

/// Sets what the header's type says of a [`blank_record`].
#[inline(always)]
fn set_kind(r: &mut EventRecord<'_>, header_type: u8, kind: HeaderKind, pointer_size: u8) {
    r.header_type = header_type;
    r.kind = kind;
    r.pointer_size = pointer_size;
}

#[inline(always)]
fn check_size(rec: &[u8], size: usize, header: usize, what: &str) -> Result<(), String> {
    if size < header || size > rec.len() {
        return Err(size_error(rec, size, header, what));
    }
    Ok(())
}

#[cold]
fn size_error(rec: &[u8], size: usize, header: usize, what: &str) -> String {
    if size < header {
        format!("{what} record size {size:#x} is smaller than its header ({header:#x})")
    } else {
        format!(
            "{what} record size {size:#x} runs past the end of its buffer ({:#x} bytes left)",
            rec.len()
        )
    }
}

fn cut() -> String {
    "record header cut off at the end of its buffer".to_string()
}

#[inline(always)]
fn kernel_record<'a>(
    rec: &'a [u8],
    marker: u32,
    ty: u8,
    time: &TimeBase,
    r: &mut EventRecord<'a>,
) -> Result<usize, String> {
    let version_word = marker as u16;
    // Extra header bytes (FORMAT.md 4.3): +8 for bit 0x8000, +8 per PMC slot in bits 0x0700.
    let extra =
        if version_word & 0x8000 != 0 { 8 } else { 0 } + ((version_word >> 8) & 7) as usize * 8;
    let (kind, base, ptr) = match ty {
        SYSTEM32 => (HeaderKind::System, 0x20, 4),
        SYSTEM64 => (HeaderKind::System, 0x20, 8),
        COMPACT32 => (HeaderKind::Compact, 0x18, 4),
        COMPACT64 => (HeaderKind::Compact, 0x18, 8),
        PERFINFO32 => (HeaderKind::PerfInfo, 0x10, 4),
        _ => (HeaderKind::PerfInfo, 0x10, 8),
    };
    let header = base + extra;
    let size = u16_at(rec, 4).ok_or_else(cut)? as usize;
    check_size(rec, size, header, "kernel")?;
    let hook = u16_at(rec, 6).ok_or_else(cut)?;
    set_kind(r, ty, kind, ptr);
    let ts = if kind == HeaderKind::PerfInfo {
        r.pid = u32::MAX;
        r.tid = u32::MAX;
        i64_at(rec, 8).ok_or_else(cut)?
    } else {
        r.tid = u32_at(rec, 8).ok_or_else(cut)?;
        r.pid = u32_at(rec, 0x0C).ok_or_else(cut)?;
        i64_at(rec, 0x10).ok_or_else(cut)?
    };
    let group = (hook >> 8) as u8;
    r.kernel_group = Some(group);
    r.provider = kernel_group_guid(group);
    r.opcode = hook as u8;
    r.version = version_word as u8;
    time.stamp(r, ts);
    r.payload = rec.get(header..size).ok_or_else(cut)?;
    Ok(size)
}

#[inline(always)]
fn classic_record<'a>(
    rec: &'a [u8],
    ty: u8,
    time: &TimeBase,
    r: &mut EventRecord<'a>,
) -> Result<usize, String> {
    let (kind, header, ptr) = match ty {
        FULL_HEADER32 => (HeaderKind::Full, 0x30, 4),
        FULL_HEADER64 => (HeaderKind::Full, 0x30, 8),
        INSTANCE32 => (HeaderKind::Instance, 0x48, 4),
        _ => (HeaderKind::Instance, 0x48, 8),
    };
    let size = u16_at(rec, 0).ok_or_else(cut)? as usize;
    check_size(rec, size, header, "classic")?;
    set_kind(r, ty, kind, ptr);
    r.opcode = *rec.get(4).ok_or_else(cut)?;
    r.level = *rec.get(5).ok_or_else(cut)?;
    r.version = u16_at(rec, 6).ok_or_else(cut)? as u8;
    r.tid = u32_at(rec, 8).ok_or_else(cut)?;
    r.pid = u32_at(rec, 0x0C).ok_or_else(cut)?;
    let ts = i64_at(rec, 0x10).ok_or_else(cut)?;
    r.provider = Guid::from_le_bytes(rec.get(0x18..0x28).ok_or_else(cut)?).ok_or_else(cut)?;
    time.stamp(r, ts);
    r.payload = rec.get(header..size).ok_or_else(cut)?;
    Ok(size)
}

#[inline]
fn event_header_record<'a>(
    rec: &'a [u8],
    ty: u8,
    time: &TimeBase,
    r: &mut EventRecord<'a>,
) -> Result<usize, String> {
    const HEADER: usize = 0x50;
    let ptr = if ty == EVENT_HEADER32 { 4 } else { 8 };
    let size = u16_at(rec, 0).ok_or_else(cut)? as usize;
    check_size(rec, size, HEADER, "EVENT_HEADER")?;
    let h = rec.get(..HEADER).ok_or_else(cut)?;
    set_kind(r, ty, HeaderKind::EventHeader, ptr);
    r.flags = u16_at(h, 4).ok_or_else(cut)?;
    r.tid = u32_at(h, 8).ok_or_else(cut)?;
    r.pid = u32_at(h, 0x0C).ok_or_else(cut)?;
    let ts = i64_at(h, 0x10).ok_or_else(cut)?;
    r.provider = Guid::from_le_bytes(h.get(0x18..0x28).ok_or_else(cut)?).ok_or_else(cut)?;
    r.id = u16_at(h, 0x28).ok_or_else(cut)?;
    r.version = *h.get(0x2A).ok_or_else(cut)?;
    r.channel = *h.get(0x2B).ok_or_else(cut)?;
    r.level = *h.get(0x2C).ok_or_else(cut)?;
    r.opcode = *h.get(0x2D).ok_or_else(cut)?;
    r.task = u16_at(h, 0x2E).ok_or_else(cut)?;
    r.keyword = u64_at(h, 0x30).ok_or_else(cut)?;
    r.activity_id = Guid::from_le_bytes(h.get(0x40..0x50).ok_or_else(cut)?).ok_or_else(cut)?;
    time.stamp(r, ts);
    let mut p = HEADER;
    if r.flags & EVENT_HEADER_FLAG_EXTENDED_INFO != 0 {
        let first = p;
        loop {
            let item = rec.get(p..size).ok_or_else(cut)?;
            let (Some(item_size), Some(_), Some(linkage), Some(data_size)) = (
                u16_at(item, 0),
                u16_at(item, 2),
                u16_at(item, 4),
                u16_at(item, 6),
            ) else {
                return Err(format!(
                    "extended item header at +{p:#x} runs past the record ({size:#x} bytes)"
                ));
            };
            let (item_size, data_size) = (item_size as usize, data_size as usize);
            if item_size < 8 || item_size > item.len() || data_size > item_size - 8 {
                return Err(format!(
                    "extended item at +{p:#x} has size {item_size:#x} / data {data_size:#x}, record is {size:#x} bytes"
                ));
            }
            p += item_size;
            if linkage & 1 == 0 {
                break;
            }
        }
        // the items are read from these bytes when asked (their sizes checked above)
        r.extended = ExtendedItems::from_raw(rec.get(first..p).ok_or_else(cut)?);
    }
    r.payload = rec.get(p..size).ok_or_else(cut)?;
    Ok(size)
}

/// WPP/TraceMessage records (MESSAGE_TRACE_HEADER): Size u16, then MessageNumber u16 and
/// OptionFlags u16 at 4; optional fields follow in flag order. Not seen in the sample files.
fn message_record<'a>(
    rec: &'a [u8],
    marker: u32,
    time: &TimeBase,
    r: &mut EventRecord<'a>,
) -> Result<usize, String> {
    let size = (marker & 0xFFFF) as usize;
    check_size(rec, size, 8, "message")?;
    set_kind(r, MESSAGE, HeaderKind::Message, 8);
    r.id = u16_at(rec, 4).ok_or_else(cut)?;
    let opts = u16_at(rec, 6).ok_or_else(cut)?;
    r.flags = opts;
    let mut p = 8;
    let mut ts = 0;
    if opts & 0x01 != 0 {
        p += 4; // sequence number
    }
    if opts & 0x02 != 0 {
        r.provider = Guid::from_le_bytes(rec.get(p..p + 16).ok_or_else(cut)?).ok_or_else(cut)?;
        p += 16;
    } else if opts & 0x04 != 0 {
        p += 4; // component id
    }
    if opts & 0x08 != 0 {
        ts = i64_at(rec, p).ok_or_else(cut)?;
        p += 8;
    }
    if opts & 0x20 != 0 {
        r.tid = u32_at(rec, p).ok_or_else(cut)?;
        r.pid = u32_at(rec, p + 4).ok_or_else(cut)?;
        p += 8;
    }
    if p > size {
        return Err(format!(
            "message record of {size:#x} bytes is smaller than its header ({p:#x})"
        ));
    }
    time.stamp(r, ts);
    r.payload = rec.get(p..size).ok_or_else(cut)?;
    Ok(size)
}

/// The offset after the kernel (system/compact/perfinfo) record at `off` when it is a whole,
/// well-formed one, without building it: walks that need no kernel records step over them.
/// `None` for any other record, the end marker, or damage (which `parse_record` reports).
#[inline]
pub fn skip_kernel_record(buf: &[u8], off: usize, end: usize) -> Option<usize> {
    let marker = u32_at(buf, off)?;
    if marker >> 24 & 0xC0 != 0xC0 {
        return None;
    }
    let base = match (marker >> 16) as u8 {
        SYSTEM32 | SYSTEM64 => 0x20,
        COMPACT32 | COMPACT64 => 0x18,
        PERFINFO32 | PERFINFO64 => 0x10,
        _ => return None,
    };
    let version_word = marker as u16;
    let extra =
        if version_word & 0x8000 != 0 { 8 } else { 0 } + ((version_word >> 8) & 7) as usize * 8;
    let size = u16_at(buf, off + 4)? as usize;
    if size < base + extra || off + size > end.min(buf.len()) {
        return None;
    }
    Some(off + align8(size))
}

/// The raw timestamp of the record at `off`, without building the record (for merge ordering).
#[inline]
pub fn record_timestamp(buf: &[u8], off: usize) -> Option<i64> {
    let marker = u32_at(buf, off)?;
    match (marker >> 16) as u8 {
        SYSTEM32 | SYSTEM64 | COMPACT32 | COMPACT64 => i64_at(buf, off + 0x10),
        PERFINFO32 | PERFINFO64 => i64_at(buf, off + 8),
        FULL_HEADER32 | FULL_HEADER64 | INSTANCE32 | INSTANCE64 | EVENT_HEADER32
        | EVENT_HEADER64 => i64_at(buf, off + 0x10),
        _ => None,
    }
}
