//! TraceLogging self-describing events: the metadata blob of extended item 11
//! (EVENT_SCHEMA_TL) and the provider traits of item 12 (FORMAT.md 4.12).

use super::schema::{Count, Len, Prop, Schema, SchemaSource};
use super::value::{le_u16, FieldType};

/// Extended item types.
pub const EXT_SCHEMA_TL: u16 = 11;
pub const EXT_PROV_TRAITS: u16 = 12;

fn tl_type(in_type: u8) -> FieldType {
    use FieldType::*;
    match in_type & 0x1f {
        1 => Utf16Z,
        2 => AnsiZ,
        3 => I8,
        4 => U8,
        5 => I16,
        6 => U16,
        7 => I32,
        8 => U32,
        9 => I64,
        10 => U64,
        11 => F32,
        12 => F64,
        13 => Bool32,
        14 => CountedBinary,
        15 => Guid,
        16 => Ptr,
        17 => FileTime,
        18 => SystemTime,
        19 => Sid,
        20 => HexI32,
        21 => HexI64,
        22 => CountedUtf16,
        23 => CountedAnsi,
        24 => Struct,
        25 => CountedBinary,
        _ => Binary,
    }
}

/// Out-type refinements that change how bytes are read.
fn refine(ty: FieldType, out_type: u8) -> FieldType {
    match (ty, out_type & 0x7f) {
        (FieldType::U16, 22) => FieldType::U16Be,
        (FieldType::U32, 23) => FieldType::IpV4,
        _ => ty,
    }
}

fn cstr<'a>(b: &'a [u8], pos: &mut usize) -> Option<&'a str> {
    let rest = b.get(*pos..)?;
    let n = rest.iter().position(|c| *c == 0)?;
    *pos += n + 1;
    std::str::from_utf8(&rest[..n]).ok()
}

/// Parses the item-11 metadata into a schema whose names borrow the record.
pub fn parse_metadata(meta: &[u8]) -> Option<Schema<&str>> {
    let size = le_u16(meta, 0)? as usize;
    let b = meta.get(..size.clamp(2, meta.len()))?;
    let mut pos = 2;
    // Event tags: bytes while bit 7 is set.
    while *b.get(pos)? & 0x80 != 0 {
        pos += 1;
    }
    pos += 1;
    let name = cstr(b, &mut pos)?;
    let mut props: Vec<Prop<&str>> = Vec::new();
    while pos < b.len() {
        let fname = cstr(b, &mut pos)?;
        let in_type = *b.get(pos)?;
        pos += 1;
        let mut out_type = 0u8;
        if in_type & 0x80 != 0 {
            out_type = *b.get(pos)?;
            pos += 1;
            if out_type & 0x80 != 0 {
                // Field tags: up to four bytes, bit 7 = another follows.
                for _ in 0..4 {
                    let t = *b.get(pos)?;
                    pos += 1;
                    if t & 0x80 == 0 {
                        break;
                    }
                }
            }
        }
        let count = match in_type & 0x60 {
            0x20 => {
                let n = le_u16(b, pos)?;
                pos += 2;
                Count::Fixed(n)
            }
            0x40 => Count::Prefixed,
            0x60 => {
                // Custom-serialized: u16 count, then schema bytes; the payload is a u16 size + bytes.
                let n = le_u16(b, pos)? as usize;
                pos += 2 + n;
                props.push(Prop::scalar(fname, FieldType::CountedBinary));
                continue;
            }
            _ => Count::One,
        };
        let ty = refine(tl_type(in_type), out_type);
        let members = if ty == FieldType::Struct {
            (out_type & 0x7f) as usize
        } else {
            0
        };
        props.push(Prop {
            name: fname,
            ty,
            count,
            len: Len::None,
            members: Vec::new(),
            map: None,
        });
        // Struct member counts are resolved below, once all fields are known.
        if ty == FieldType::Struct {
            props.last_mut()?.members = vec![usize::MAX; members];
        }
    }
    let mut next = 0usize;
    let top = nest(&mut props, &mut next, usize::MAX, 0)?;
    Some(Schema {
        provider: "",
        name,
        props,
        top,
        source: SchemaSource::TraceLogging,
    })
}

/// Assigns struct members (the fields that follow a struct) and returns the indices of `want`
/// fields from `next` (all remaining when `want` is `usize::MAX`).
fn nest(
    props: &mut [Prop<&str>],
    next: &mut usize,
    want: usize,
    depth: usize,
) -> Option<Vec<usize>> {
    if depth > 16 {
        return None;
    }
    let mut out = Vec::new();
    while out.len() < want && *next < props.len() {
        let i = *next;
        *next += 1;
        out.push(i);
        if props[i].ty == FieldType::Struct {
            let n = props[i].members.len();
            props[i].members = nest(props, next, n, depth + 1)?;
        }
    }
    Some(out)
}

/// The provider name in a PROV_TRAITS item.
pub fn provider_name(traits: &[u8]) -> Option<&str> {
    let mut pos = 2;
    cstr(traits, &mut pos)
}

/// A schema parsed from a record's metadata with its names copied out of the record.
pub fn owned(s: &Schema<&str>) -> Schema<String> {
    Schema {
        provider: s.provider.to_string(),
        name: s.name.to_string(),
        props: s
            .props
            .iter()
            .map(|p| Prop {
                name: p.name.to_string(),
                ty: p.ty,
                count: p.count,
                len: p.len,
                members: p.members.clone(),
                map: None,
            })
            .collect(),
        top: s.top.clone(),
        source: s.source,
    }
}

/// A name inside a metadata blob: its byte offset and length. A schema parsed once keeps its
/// names this way and every record with the same blob reads them from its own copy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NameAt {
    pub offset: u32,
    pub len: u32,
}

impl NameAt {
    /// The place of `name`, a slice of `blob`.
    pub fn of(name: &str, blob: &[u8]) -> NameAt {
        let offset = (name.as_ptr() as usize).wrapping_sub(blob.as_ptr() as usize);
        NameAt {
            offset: offset.min(blob.len()) as u32,
            len: name.len() as u32,
        }
    }

    /// The name in a blob equal to the one it was parsed from ("" if it is not).
    #[inline]
    pub fn get(self, blob: &[u8]) -> &str {
        let (o, n) = (self.offset as usize, self.len as usize);
        blob.get(o..o + n)
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or("")
    }

    /// A schema parsed from `blob` with its names turned into places in it.
    pub fn schema(s: &Schema<&str>, blob: &[u8]) -> Schema<NameAt> {
        Schema {
            provider: NameAt::default(),
            name: NameAt::of(s.name, blob),
            props: s
                .props
                .iter()
                .map(|p| Prop {
                    name: NameAt::of(p.name, blob),
                    ty: p.ty,
                    count: p.count,
                    len: p.len,
                    members: p.members.clone(),
                    map: None,
                })
                .collect(),
            top: s.top.clone(),
            source: s.source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_kept_as_places_read_back_from_another_copy() {
        // size, one tag byte, event "Ev", field "a" u32, field "bc" UTF-16 string
        let mut blob = vec![0u8, 0, 0];
        blob.extend_from_slice(b"Ev\0a\0");
        blob.push(8);
        blob.extend_from_slice(b"bc\0");
        blob.push(1);
        let n = blob.len() as u16;
        blob[..2].copy_from_slice(&n.to_le_bytes());
        let s = parse_metadata(&blob).unwrap();
        let plan = NameAt::schema(&s, &blob);
        let copy = blob.clone();
        assert_eq!(plan.name.get(&copy), "Ev");
        let names: Vec<&str> = plan.props.iter().map(|p| p.name.get(&copy)).collect();
        assert_eq!(names, ["a", "bc"]);
        assert_eq!(plan.props[1].ty, FieldType::Utf16Z);
        assert_eq!(NameAt { offset: 99, len: 2 }.get(&copy), "");
    }
}
