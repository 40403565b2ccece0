//! The one event view every decoder works on, whether it came from an `.etl` file or from a live
//! ETW session (which fills it from a real `EVENT_RECORD`).

use std::fmt;

/// A GUID in its standard text form (`3d6fa8d0-fe05-11d0-9dda-00c04fd7ba7c`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Guid {
    pub data1: u32,
    pub data2: u16,
    pub data3: u16,
    pub data4: [u8; 8],
}

impl Guid {
    /// Reads the on-disk (mixed-endian) 16-byte form.
    pub fn from_le_bytes(b: &[u8]) -> Option<Guid> {
        if b.len() < 16 {
            return None;
        }
        let mut data4 = [0u8; 8];
        data4.copy_from_slice(&b[8..16]);
        Some(Guid {
            data1: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            data2: u16::from_le_bytes([b[4], b[5]]),
            data3: u16::from_le_bytes([b[6], b[7]]),
            data4,
        })
    }

    /// Parses `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (braces allowed).
    pub fn parse(s: &str) -> Option<Guid> {
        let s = s.trim().trim_start_matches('{').trim_end_matches('}');
        let hex: String = s.chars().filter(|c| *c != '-').collect();
        if hex.len() != 32 || s.len() != 36 {
            return None;
        }
        let n = u128::from_str_radix(&hex, 16).ok()?;
        let b = n.to_be_bytes();
        let mut data4 = [0u8; 8];
        data4.copy_from_slice(&b[8..16]);
        Some(Guid {
            data1: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            data2: u16::from_be_bytes([b[4], b[5]]),
            data3: u16::from_be_bytes([b[6], b[7]]),
            data4,
        })
    }
}

impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.data4;
        write!(
            f,
            "{:08x}-{:04x}-{:04x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
            self.data1, self.data2, self.data3, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]
        )
    }
}

/// Which on-disk header a record had (`HeaderType`, FORMAT.md 4.3); live events are `EventHeader`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HeaderKind {
    System,
    Compact,
    PerfInfo,
    /// EVENT_TRACE_HEADER (classic MOF events, KernelTraceControl).
    Full,
    /// EVENT_INSTANCE_HEADER.
    Instance,
    /// EVENT_HEADER (manifest and TraceLogging events).
    EventHeader,
    /// WPP/message records.
    Message,
    Other(u8),
}

/// One extended data item of an EVENT_HEADER record (FORMAT.md 4.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtendedItem<'a> {
    pub ext_type: u16,
    pub data: &'a [u8],
}

/// The extended data items of a record: the bytes of the record's item list (checked by the
/// header parser, read item by item when iterated: a record costs no allocation), or items
/// gathered one by one (a live `EVENT_RECORD`'s item array, tests).
#[derive(Clone, Debug, Default)]
pub struct ExtendedItems<'a> {
    /// Item headers (size u16, type u16, linkage u16, data size u16) each followed by the
    /// item's data, `size` bytes in all.
    raw: &'a [u8],
    items: Vec<ExtendedItem<'a>>,
}

impl<'a> ExtendedItems<'a> {
    /// The items of an EVENT_HEADER record's list; `raw` must hold whole items (sizes of at
    /// least 8 bytes, data within their item), as the header parser checks.
    pub fn from_raw(raw: &'a [u8]) -> ExtendedItems<'a> {
        ExtendedItems {
            raw,
            items: Vec::new(),
        }
    }

    /// Adds an item after the others.
    pub fn push(&mut self, item: ExtendedItem<'a>) {
        if !self.raw.is_empty() {
            let raw: Vec<ExtendedItem<'a>> = self.iter().collect();
            self.raw = &[];
            self.items = raw;
        }
        self.items.push(item);
    }

    pub fn iter(&self) -> ExtendedIter<'_, 'a> {
        ExtendedIter {
            raw: self.raw,
            items: self.items.iter(),
        }
    }

    pub fn len(&self) -> usize {
        self.iter().count()
    }

    pub fn is_empty(&self) -> bool {
        self.raw.is_empty() && self.items.is_empty()
    }
}

/// Equal when they hold the same items, however they were gathered.
impl PartialEq for ExtendedItems<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl<'a> FromIterator<ExtendedItem<'a>> for ExtendedItems<'a> {
    fn from_iter<I: IntoIterator<Item = ExtendedItem<'a>>>(iter: I) -> Self {
        ExtendedItems {
            raw: &[],
            items: iter.into_iter().collect(),
        }
    }
}

impl<'s, 'a> IntoIterator for &'s ExtendedItems<'a> {
    type Item = ExtendedItem<'a>;
    type IntoIter = ExtendedIter<'s, 'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// The items of an [`ExtendedItems`], in record order.
pub struct ExtendedIter<'s, 'a> {
    raw: &'a [u8],
    items: std::slice::Iter<'s, ExtendedItem<'a>>,
}

impl<'a> Iterator for ExtendedIter<'_, 'a> {
    type Item = ExtendedItem<'a>;

    #[inline]
    fn next(&mut self) -> Option<ExtendedItem<'a>> {
        if let Some(x) = self.items.next() {
            return Some(*x);
        }
        let h = self.raw.get(..8)?;
        let size = u16::from_le_bytes([h[0], h[1]]) as usize;
        let ext_type = u16::from_le_bytes([h[2], h[3]]);
        let data_size = u16::from_le_bytes([h[6], h[7]]) as usize;
        let data = self.raw.get(8..8 + data_size)?;
        self.raw = self.raw.get(size.max(8)..).unwrap_or(&[]);
        Some(ExtendedItem { ext_type, data })
    }
}

/// An event: header fields, descriptor, context, payload and extended items.
#[derive(Clone, Debug)]
pub struct EventRecord<'a> {
    /// The raw `HeaderType` byte (0 for live events).
    pub header_type: u8,
    pub kind: HeaderKind,
    /// EVENT_HEADER flags (0x01 extended info, 0x20 32-bit, 0x40 64-bit, ...).
    pub flags: u16,
    /// The provider: EVENT_HEADER ProviderId, the classic event GUID, or the kernel group's GUID.
    pub provider: Guid,
    /// For kernel (system/compact/perfinfo) records: `HookId >> 8`.
    pub kernel_group: Option<u8>,
    pub id: u16,
    pub version: u8,
    pub channel: u8,
    pub level: u8,
    pub opcode: u8,
    pub task: u16,
    pub keyword: u64,
    pub pid: u32,
    pub tid: u32,
    pub cpu: u16,
    /// Raw timestamp (clock of the session).
    pub raw_timestamp: i64,
    /// Nanoseconds since the start of the trace.
    pub time_ns: u64,
    /// Wall-clock time, nanoseconds since the Unix epoch.
    pub wall_ns: u64,
    /// 4 or 8: from the record's header type (not the file).
    pub pointer_size: u8,
    pub activity_id: Guid,
    pub payload: &'a [u8],
    pub extended: ExtendedItems<'a>,
}

/// An owned copy of a record (header fields, payload and extended items), for the few records a
/// pass keeps after the walk has moved past their buffers.
#[derive(Clone, Debug)]
pub struct RecordCopy {
    /// The header fields; its payload and items are empty (they are below).
    head: EventRecord<'static>,
    payload: Vec<u8>,
    extended: Vec<(u16, Vec<u8>)>,
}

impl RecordCopy {
    pub fn of(r: &EventRecord<'_>) -> RecordCopy {
        RecordCopy {
            head: EventRecord {
                header_type: r.header_type,
                kind: r.kind,
                flags: r.flags,
                provider: r.provider,
                kernel_group: r.kernel_group,
                id: r.id,
                version: r.version,
                channel: r.channel,
                level: r.level,
                opcode: r.opcode,
                task: r.task,
                keyword: r.keyword,
                pid: r.pid,
                tid: r.tid,
                cpu: r.cpu,
                raw_timestamp: r.raw_timestamp,
                time_ns: r.time_ns,
                wall_ns: r.wall_ns,
                pointer_size: r.pointer_size,
                activity_id: r.activity_id,
                payload: &[],
                extended: ExtendedItems::default(),
            },
            payload: r.payload.to_vec(),
            extended: r
                .extended
                .iter()
                .map(|x| (x.ext_type, x.data.to_vec()))
                .collect(),
        }
    }

    /// The record, borrowing the copy.
    pub fn record(&self) -> EventRecord<'_> {
        let mut r = self.head.clone();
        r.payload = &self.payload;
        r.extended = self
            .extended
            .iter()
            .map(|(ext_type, data)| ExtendedItem {
                ext_type: *ext_type,
                data,
            })
            .collect();
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guids_round_trip() {
        let g = Guid::parse("3d6fa8d0-fe05-11d0-9dda-00c04fd7ba7c").unwrap();
        assert_eq!(g.to_string(), "3d6fa8d0-fe05-11d0-9dda-00c04fd7ba7c");
        let le = [
            0xd0, 0xa8, 0x6f, 0x3d, 0x05, 0xfe, 0xd0, 0x11, 0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7,
            0xba, 0x7c,
        ];
        assert_eq!(Guid::from_le_bytes(&le), Some(g));
        assert!(Guid::parse("nope").is_none());
    }
}
