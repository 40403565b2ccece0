//! Run-time schemas (TRACE_EVENT_INFO, instrumentation manifests, TraceLogging metadata) and the
//! one walker that decodes a payload with them.

use super::value::{le_u16, read_value, FieldType, Value};

/// How many elements a property has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    /// A scalar.
    One,
    /// A fixed-size array.
    Fixed(u16),
    /// An array whose length is the value of an earlier property (index into `props`).
    Field(usize),
    /// An array preceded by a u16 element count in the payload (TraceLogging).
    Prefixed,
}

/// The length of a string/binary property.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Len {
    None,
    Fixed(u16),
    Field(usize),
}

/// One property. `S` is `String` for owned schemas and `&str` for schemas borrowed from a record.
#[derive(Clone, Debug)]
pub struct Prop<S> {
    pub name: S,
    pub ty: FieldType,
    pub count: Count,
    pub len: Len,
    /// Indices of the members, for `FieldType::Struct`.
    pub members: Vec<usize>,
    /// The value map's name, if any (manifest/TDH).
    pub map: Option<S>,
}

impl<S> Prop<S> {
    pub fn scalar(name: S, ty: FieldType) -> Self {
        Prop {
            name,
            ty,
            count: Count::One,
            len: Len::None,
            members: Vec::new(),
            map: None,
        }
    }
}

/// Where a schema came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SchemaSource {
    /// A static kernel/KernelTraceControl layout.
    Kernel,
    /// A TRACE_EVENT_INFO record (KernelTraceControl EventMetadata).
    EventMetadata,
    /// An instrumentation manifest.
    Manifest,
    /// TraceLogging self-description (extended item 11).
    TraceLogging,
    /// No schema: the payload is delivered as one blob.
    Raw,
}

/// An event schema.
#[derive(Clone, Debug)]
pub struct Schema<S> {
    pub provider: S,
    pub name: S,
    pub props: Vec<Prop<S>>,
    /// Indices of the top-level properties, in payload order.
    pub top: Vec<usize>,
    pub source: SchemaSource,
}

/// Decodes a payload with a schema. `name` maps a property to its field name (borrowed from the
/// schema or from the record). Returns the fields and whether the whole schema was decoded.
pub fn decode_with<'p, 'a, S>(
    schema: &'p Schema<S>,
    name: &impl Fn(&'p Prop<S>) -> &'a str,
    payload: &'a [u8],
    ptr: u8,
) -> (Vec<(&'a str, Value<'a>)>, bool) {
    // the values of earlier properties (lengths and counts refer to them): on the stack for
    // the usual schema, so that decoding allocates only the fields it returns
    let mut small = [None; 32];
    let mut large = Vec::new();
    let vals: &mut [Option<u64>] = if schema.props.len() <= small.len() {
        &mut small[..schema.props.len()]
    } else {
        large.resize(schema.props.len(), None);
        &mut large
    };
    let mut pos = 0usize;
    let mut out = Vec::with_capacity(schema.top.len());
    let ok = walk(
        schema,
        &schema.top,
        name,
        payload,
        &mut pos,
        ptr,
        vals,
        &mut out,
        0,
    );
    (out, ok)
}

#[allow(clippy::too_many_arguments)]
fn walk<'p, 'a, S>(
    schema: &'p Schema<S>,
    idxs: &[usize],
    name: &impl Fn(&'p Prop<S>) -> &'a str,
    b: &'a [u8],
    pos: &mut usize,
    ptr: u8,
    vals: &mut [Option<u64>],
    out: &mut Vec<(&'a str, Value<'a>)>,
    depth: usize,
) -> bool {
    if depth > 16 {
        return false;
    }
    for &i in idxs {
        let Some(p) = schema.props.get(i) else {
            return false;
        };
        let count = match p.count {
            Count::One => None,
            Count::Fixed(n) => Some(n as usize),
            Count::Field(j) => Some(vals.get(j).copied().flatten().unwrap_or(0) as usize),
            Count::Prefixed => match le_u16(b, *pos) {
                Some(n) => {
                    *pos += 2;
                    Some(n as usize)
                }
                None => return false,
            },
        };
        let len = match p.len {
            Len::None => None,
            Len::Fixed(n) => Some(n as usize),
            Len::Field(j) => Some(vals.get(j).copied().flatten().unwrap_or(0) as usize),
        };
        let one = |pos: &mut usize, vals: &mut [Option<u64>]| -> Option<Value<'a>> {
            if p.ty == FieldType::Struct {
                let mut fields = Vec::new();
                if !walk(
                    schema,
                    &p.members,
                    name,
                    b,
                    pos,
                    ptr,
                    vals,
                    &mut fields,
                    depth + 1,
                ) {
                    return None;
                }
                Some(Value::Struct(fields))
            } else {
                if *pos > b.len() {
                    return None;
                }
                let (v, next) = read_value(p.ty, b, *pos, ptr, len)?;
                *pos = next;
                Some(v)
            }
        };
        match count {
            None => match one(pos, vals) {
                Some(v) => {
                    if let Some(slot) = vals.get_mut(i) {
                        *slot = v.as_u64();
                    }
                    out.push((name(p), v));
                }
                None => return false,
            },
            Some(n) => {
                let mut items = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    let before = *pos;
                    match one(pos, vals) {
                        Some(v) => items.push(v),
                        None => {
                            out.push((name(p), Value::Array(items)));
                            return false;
                        }
                    }
                    if *pos == before && items.len() > b.len() {
                        break;
                    }
                }
                out.push((name(p), Value::Array(items)));
            }
        }
    }
    true
}
