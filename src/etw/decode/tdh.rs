//! TRACE_EVENT_INFO (tdh.h) blobs, as KernelTraceControl's EventMetadata events carry them,
//! turned into [`Schema`]s; and the TDH in/out type codes shared with manifests.

use super::schema::{Count, Len, Prop, Schema, SchemaSource};
use super::value::{le_u16, le_u32, utf16_string, FieldType};
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
    })
}
