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
    pub extended: Vec<ExtendedItem<'a>>,
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
