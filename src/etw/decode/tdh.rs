//! TRACE_EVENT_INFO (tdh.h) blobs, as KernelTraceControl's EventMetadata events carry them,
//! turned into [`Schema`]s; and the TDH in/out type codes shared with manifests.

use super::schema::{Count, Len, Prop, Schema, SchemaSource};
use super::value::{le_u16, le_u32, le_u64, utf16_string, FieldType};
use crate::etw::record::Guid;

/// The schema key: provider, event id, version (manifest events) — for classic (MOF) events the
/// id is the opcode.
pub type SchemaKey = (Guid, u16, u8);

/// Maps a TDH in-type (with its out-type and whether a length is given) to a field type.
pub fn tdh_type(in_type: u16, out_type: u16, has_len: bool) -> FieldType {
    use FieldType::*;
    match in_type {
        1 if has_len => Utf16N,
        1 => Utf16Z,
        2 if has_len => AnsiN,
        2 => AnsiZ,
        3 => I8,
        4 => U8,
        5 => I16,
        6 if out_type == 22 => U16Be,
        6 => U16,
        7 => I32,
        8 if out_type == 23 => IpV4,
        8 => U32,
        9 => I64,
        10 => U64,
        11 => F32,
        12 => F64,
        13 => Bool32,
        14 if out_type == 24 && !has_len => IpV6,
        14 if out_type == 25 => SockAddr,
        14 => Binary,
        15 => Guid,
        16 => Ptr,
        17 => FileTime,
        18 => SystemTime,
        19 => Sid,
        20 => HexI32,
        21 => HexI64,
        22 => CountedUtf16,
        23 => CountedAnsi,
        24 => RevCountedUtf16,
        25 => RevCountedAnsi,
        26 => Utf16N,
        27 => AnsiN,
        28 => Utf16Char,
        29 => AnsiChar,
        30 => SizeT,
        31 => HexDump,
        32 => WmiSid,
        _ => Binary,
    }
}

fn string_at(b: &[u8], off: u32) -> Option<String> {
    if off == 0 || off as usize >= b.len() {
        return None;
    }
    Some(utf16_string(&b[off as usize..]))
}

/// A parsed TRACE_EVENT_INFO.
pub struct EventInfo {
    pub key: SchemaKey,
    /// The classic key (event GUID, opcode, version) when DecodingSource is WBEM.
    pub classic_key: Option<(Guid, u8, u8)>,
    pub schema: Schema<String>,
    /// The event's keyword bits with their names (KeywordsNameOffset), as far as TDH named them.
    pub keywords: Vec<(String, u64)>,
}

/// The keyword names of TRACE_EVENT_INFO (a list of strings ending with an empty one) paired
/// with the set bits of the event's keyword, lowest bit first. Bits 48 and up (reserved for ETW
/// and the channels) are only used when there are more names than bits below them.
fn keyword_names(b: &[u8], off: u32, keyword: u64) -> Vec<(String, u64)> {
    let mut names: Vec<String> = Vec::new();
    let mut at = off as usize;
    if off == 0 {
        return Vec::new();
    }
    while at + 1 < b.len() && names.len() < 64 {
        let s = utf16_string(&b[at..]);
        if s.is_empty() {
            break;
        }
        at += (s.encode_utf16().count() + 1) * 2;
        names.push(s);
    }
    let low: Vec<u64> = (0..48)
        .map(|i| 1u64 << i)
        .filter(|m| keyword & m != 0)
        .collect();
    let bits: Vec<u64> = if names.len() > low.len() {
        (0..64)
            .map(|i| 1u64 << i)
            .filter(|m| keyword & m != 0)
            .collect()
    } else {
        low
    };
    names.into_iter().zip(bits).collect()
}

/// Parses a TRACE_EVENT_INFO blob.
pub fn parse_trace_event_info(b: &[u8]) -> Option<EventInfo> {
    let provider = Guid::from_le_bytes(b.get(0..16)?)?;
    let event_guid = Guid::from_le_bytes(b.get(16..32)?)?;
    let id = le_u16(b, 32)?;
    let version = *b.get(34)?;
    let opcode = *b.get(37)?;
    let decoding = le_u32(b, 48)?;
    let provider_name = string_at(b, le_u32(b, 52)?).unwrap_or_else(|| provider.to_string());
    let keywords = keyword_names(b, le_u32(b, 64)?, le_u64(b, 40)?);
    let task = string_at(b, le_u32(b, 68)?);
    let op = string_at(b, le_u32(b, 72)?);
    let ev_name = string_at(b, le_u32(b, 92)?);
    let count = le_u32(b, 100)? as usize;
    let top_count = le_u32(b, 104)? as usize;
    if count > 4096 || top_count > count || b.len() < 112 + 24 * count {
        return None;
    }
    let name = match (ev_name, task, op) {
        (Some(n), _, _) if !n.is_empty() => n,
        (_, Some(t), Some(o)) if !t.is_empty() && !o.is_empty() => format!("{t}/{o}"),
        (_, Some(t), _) if !t.is_empty() => t,
        (_, _, Some(o)) if !o.is_empty() => o,
        _ => format!("Event{id}"),
    };
    let mut props = Vec::with_capacity(count);
    for i in 0..count {
        let p = 112 + 24 * i;
        let flags = le_u32(b, p)?;
        let pname = string_at(b, le_u32(b, p + 4)?).unwrap_or_else(|| format!("Field{i}"));
        let a = le_u16(b, p + 8)?;
        let c = le_u16(b, p + 10)?;
        let map_off = le_u32(b, p + 12)?;
        let cnt = le_u16(b, p + 16)?;
        let len = le_u16(b, p + 18)?;
        let count = if flags & 0x4 != 0 {
            Count::Field(cnt as usize)
        } else if flags & 0x20 != 0 || cnt > 1 {
            Count::Fixed(cnt)
        } else {
            Count::One
        };
        let len = if flags & 0x2 != 0 {
            Len::Field(len as usize)
        } else if len > 0 || flags & 0x10 != 0 {
            Len::Fixed(len)
        } else {
            Len::None
        };
        let prop = if flags & 0x1 != 0 {
            Prop {
                name: pname,
                ty: FieldType::Struct,
                count,
                len: Len::None,
                members: (a as usize..a as usize + c as usize).collect(),
                map: None,
            }
        } else {
            Prop {
                name: pname,
                ty: tdh_type(a, c, len != Len::None),
                count,
                len,
                members: Vec::new(),
                map: if flags & 0x80 == 0 {
                    string_at(b, map_off)
                } else {
                    None
                },
            }
        };
        props.push(prop);
    }
    // Members must point forward and inside the array; drop anything else.
    for (i, p) in props.iter_mut().enumerate() {
        p.members.retain(|m| *m > i && *m < count);
        if let Count::Field(j) = p.count {
            if j >= count {
                p.count = Count::Fixed(0);
            }
        }
        if let Len::Field(j) = p.len {
            if j >= count {
                p.len = Len::Fixed(0);
            }
        }
    }
    let schema = Schema {
        provider: provider_name,
        name,
        props,
        top: (0..top_count).collect(),
        source: SchemaSource::EventMetadata,
    };
    Some(EventInfo {
        key: (provider, id, version),
        classic_key: (decoding == 1).then_some((event_guid, opcode, version)),
        schema,
        keywords,
    })
}

/// A value map (EVENT_MAP_INFO): names for the values of a field.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ValueMap {
    /// A bitmap: each entry names a bit (or bits), and a value names every entry it contains.
    pub bitmap: bool,
    pub entries: Vec<(u32, String)>,
}

impl ValueMap {
    /// The name of a value: the matching entry, or for a bitmap the entries of its set bits
    /// joined with `|` (what is left over as hex).
    pub fn name_of(&self, v: u64) -> Option<std::borrow::Cow<'_, str>> {
        if !self.bitmap {
            return self
                .entries
                .iter()
                .find(|(k, _)| *k as u64 == v)
                .map(|(_, n)| std::borrow::Cow::Borrowed(n.as_str()));
        }
        if v == 0 {
            return self
                .entries
                .iter()
                .find(|(k, _)| *k == 0)
                .map(|(_, n)| std::borrow::Cow::Borrowed(n.as_str()));
        }
        let mut names = Vec::new();
        let mut rest = v;
        for (k, n) in &self.entries {
            let k = *k as u64;
            if k != 0 && v & k == k {
                names.push(n.as_str());
                rest &= !k;
            }
        }
        if names.is_empty() {
            return None;
        }
        let mut s = names.join("|");
        if rest != 0 {
            s.push_str(&format!("|0x{rest:x}"));
        }
        Some(std::borrow::Cow::Owned(s))
    }
}

/// EVENT_MAP_INFO flags.
const MAP_BITMAP: u32 = 0x2;
const MAP_WBEM_BITMAP: u32 = 0x10;
const MAP_WBEM_FLAG: u32 = 0x20;
/// MapEntryValueType: the entries' keys are strings (pattern maps), not numbers.
const MAP_VALUE_STRING: u32 = 1;

/// Parses an EventMapInfo record's payload (the provider GUID, then an EVENT_MAP_INFO): the
/// provider, the map's name and its entries.
pub fn parse_event_map_info(payload: &[u8]) -> Option<(Guid, String, ValueMap)> {
    let provider = Guid::from_le_bytes(payload.get(0..16)?)?;
    let b = payload.get(16..)?;
    let name = string_at(b, le_u32(b, 0)?)?;
    let flag = le_u32(b, 4)?;
    let count = le_u32(b, 8)? as usize;
    let value_type = le_u32(b, 12)?;
    if count > 65536 || b.len() < 16 + 8 * count {
        return None;
    }
    let mut entries = Vec::with_capacity(count);
    for i in 0..count {
        let e = 16 + 8 * i;
        let out = string_at(b, le_u32(b, e)?).unwrap_or_default();
        if value_type == MAP_VALUE_STRING && flag & (MAP_BITMAP | MAP_WBEM_BITMAP) == 0 {
            // a pattern map keyed by strings: not a map of numbers
            continue;
        }
        let v = le_u32(b, e + 4)?;
        // names come with the trailing blank TDH leaves on them
        entries.push((v, out.trim_end().to_string()));
    }
    Some((
        provider,
        name,
        ValueMap {
            bitmap: flag & (MAP_BITMAP | MAP_WBEM_BITMAP | MAP_WBEM_FLAG) != 0,
            entries,
        },
    ))
}

#[cfg(test)]
mod map_tests {
    use super::*;

    fn utf16z(s: &str) -> Vec<u8> {
        s.encode_utf16()
            .chain(std::iter::once(0))
            .flat_map(|u| u.to_le_bytes())
            .collect()
    }

    /// An EventMapInfo payload built by hand: GUID, header, entries, then the strings.
    fn map_payload(name: &str, flag: u32, entries: &[(u32, &str)]) -> Vec<u8> {
        let mut b = vec![0u8; 16 + 8 * entries.len()];
        let mut strings = Vec::new();
        let base = b.len();
        let add = |s: &str, strings: &mut Vec<u8>| {
            let off = base + strings.len();
            strings.extend(utf16z(s));
            off as u32
        };
        let name_off = add(name, &mut strings);
        b[0..4].copy_from_slice(&name_off.to_le_bytes());
        b[4..8].copy_from_slice(&flag.to_le_bytes());
        b[8..12].copy_from_slice(&(entries.len() as u32).to_le_bytes());
        for (i, (v, n)) in entries.iter().enumerate() {
            let off = add(n, &mut strings);
            b[16 + 8 * i..20 + 8 * i].copy_from_slice(&off.to_le_bytes());
            b[20 + 8 * i..24 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        b.extend(strings);
        let mut p = vec![0x11u8; 16];
        p.extend(b);
        p
    }

    #[test]
    fn value_maps_and_bitmaps() {
        let p = map_payload(
            "StateMap",
            1,
            &[(0, "Idle "), (1, "Running "), (2, "Stopped ")],
        );
        let (_, name, m) = parse_event_map_info(&p).unwrap();
        assert_eq!(name, "StateMap");
        assert!(!m.bitmap);
        assert_eq!(m.name_of(1).as_deref(), Some("Running"));
        assert_eq!(m.name_of(9), None);
        let p = map_payload("Flags", 2, &[(1, "Read"), (2, "Write"), (8, "Sync")]);
        let (_, _, m) = parse_event_map_info(&p).unwrap();
        assert!(m.bitmap);
        assert_eq!(m.name_of(3).as_deref(), Some("Read|Write"));
        assert_eq!(m.name_of(0x19).as_deref(), Some("Read|Sync|0x10"));
        assert!(parse_event_map_info(&p[..30]).is_none());
    }
}

#[cfg(test)]
mod keyword_tests {
    use super::*;

    fn names_at(names: &[&str]) -> Vec<u8> {
        let mut b = vec![0u8; 8];
        for n in names {
            b.extend(n.encode_utf16().chain([0]).flat_map(|u| u.to_le_bytes()));
        }
        b.extend([0, 0]);
        b
    }

    #[test]
    fn keyword_names_pair_with_the_set_bits() {
        let b = names_at(&["FileIo", "Create"]);
        // channel bit 63 is set too; two names pair with the two low bits
        let k = keyword_names(&b, 8, 0x20 | 0x80 | 1 << 63);
        assert_eq!(
            k,
            [("FileIo".to_string(), 0x20), ("Create".to_string(), 0x80)]
        );
        assert!(keyword_names(&b, 0, 0x20).is_empty());
        // more names than low bits: the high bits are used as well
        let b = names_at(&["A", "B"]);
        assert_eq!(keyword_names(&b, 8, 0x1 | 1 << 50).len(), 2);
        // an offset past the end names nothing and does not panic
        assert!(keyword_names(&b, 4000, 0x1).is_empty());
    }
}
