//! Run-time schemas (TRACE_EVENT_INFO, instrumentation manifests, TraceLogging metadata) and the
//! one walker that decodes a payload with them.

use super::value::{le_u16, read_value, value_end, FieldType, Value};

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

/// Where one top-level property lies in a payload: found by stepping over the values before
/// it, without building them.
#[derive(Clone, Copy, Debug)]
pub struct Span {
    /// Index of the property in the schema.
    pub prop: usize,
    /// Offset of the first value (after a count prefix).
    pub start: usize,
    /// The element count of an array property; `None` for a scalar.
    pub count: Option<usize>,
    /// The resolved string/binary length, if the property has one.
    pub len: Option<usize>,
}

/// The integer values of earlier properties of one record (0 when not numeric), kept only
/// for schemas whose array counts or string lengths refer to them (manifest events): the
/// kernel and TraceLogging schemas need none, so reading their payloads allocates nothing.
struct Vals(Vec<u64>);

impl Vals {
    fn new<S>(schema: &Schema<S>) -> Vals {
        let refs = schema
            .props
            .iter()
            .any(|p| matches!(p.count, Count::Field(_)) || matches!(p.len, Len::Field(_)));
        Vals(if refs {
            vec![0; schema.props.len()]
        } else {
            Vec::new()
        })
    }

    #[inline]
    fn slots(&mut self) -> &mut [u64] {
        &mut self.0
    }
}

/// Reads or steps over the top-level properties of a payload, one at a time.
pub struct SchemaCursor<'s, 'a, S> {
    schema: &'s Schema<S>,
    payload: &'a [u8],
    ptr: u8,
    pos: usize,
    next: usize,
    vals: Vals,
    /// Set once the payload ended before the schema did.
    pub short: bool,
}

impl<'s, 'a, S> SchemaCursor<'s, 'a, S> {
    pub fn new(schema: &'s Schema<S>, payload: &'a [u8], ptr: u8) -> Self {
        SchemaCursor {
            schema,
            payload,
            ptr,
            pos: 0,
            next: 0,
            vals: Vals::new(schema),
            short: false,
        }
    }

    /// A property of the schema.
    pub fn prop(&self, i: usize) -> Option<&'s Prop<S>> {
        self.schema.props.get(i)
    }

    /// Steps over the next top-level property: the property and where it lies, building no
    /// value. `None` at the end of the schema or of the payload (then `short` is set).
    pub fn next_span(&mut self) -> Option<(&'s Prop<S>, Span)> {
        if self.short {
            return None;
        }
        let &i = self.schema.top.get(self.next)?;
        self.next += 1;
        let vals = self.vals.slots();
        match skip(
            self.schema,
            i,
            self.payload,
            &mut self.pos,
            self.ptr,
            vals,
            0,
        ) {
            Ok(span) => Some((&self.schema.props[i], span)),
            Err(cut) => {
                self.short = true;
                cut.map(|span| (&self.schema.props[i], span))
            }
        }
    }

    /// Reads the next top-level property: the property and its value. `None` at the end of
    /// the schema or of the payload (then `short` is set; an array cut short still comes with
    /// the elements before the cut).
    pub fn next_value<'n>(
        &mut self,
        name: &impl Fn(&'s Prop<S>) -> &'n str,
    ) -> Option<(&'s Prop<S>, Value<'n>)>
    where
        's: 'n,
        'a: 'n,
    {
        if self.short {
            return None;
        }
        let &i = self.schema.top.get(self.next)?;
        self.next += 1;
        let p = self.schema.props.get(i)?;
        let (schema, b, ptr) = (self.schema, self.payload, self.ptr);
        let vals = self.vals.slots();
        let got = resolve(p, b, &mut self.pos, vals).and_then(|(count, len)| {
            if count.is_none() && p.ty != FieldType::Struct {
                // the common case: one scalar
                let (v, next) = read_value(p.ty, b, self.pos, ptr, len)?;
                self.pos = next;
                if let Some(slot) = vals.get_mut(i) {
                    *slot = v.as_u64().unwrap_or(0);
                }
                return Some((v, true));
            }
            read_counted(
                schema,
                p,
                i,
                name,
                b,
                &mut self.pos,
                ptr,
                vals,
                count,
                len,
                0,
            )
        });
        match got {
            Some((v, ok)) => {
                self.short = !ok;
                Some((p, v))
            }
            None => {
                self.short = true;
                None
            }
        }
    }

    /// The value of a property [`SchemaCursor::next_span`] stepped over (call it before the
    /// next step: the lengths inside a struct are read from the values seen so far).
    pub fn value<'n>(
        &mut self,
        span: &Span,
        name: &impl Fn(&'s Prop<S>) -> &'n str,
    ) -> Option<Value<'n>>
    where
        's: 'n,
        'a: 'n,
    {
        let p = self.schema.props.get(span.prop)?;
        let mut pos = span.start;
        let vals = self.vals.slots();
        read_counted(
            self.schema,
            p,
            span.prop,
            name,
            self.payload,
            &mut pos,
            self.ptr,
            vals,
            span.count,
            span.len,
            0,
        )
        .map(|(v, _)| v)
    }
}

/// The element count and string length of property `p` at `pos` (reading a count prefix).
#[inline]
fn resolve<S>(
    p: &Prop<S>,
    b: &[u8],
    pos: &mut usize,
    vals: &[u64],
) -> Option<(Option<usize>, Option<usize>)> {
    let count = match p.count {
        Count::One => None,
        Count::Fixed(n) => Some(n as usize),
        Count::Field(j) => Some(vals.get(j).copied().unwrap_or(0) as usize),
        Count::Prefixed => {
            let n = le_u16(b, *pos)?;
            *pos += 2;
            Some(n as usize)
        }
    };
    let len = match p.len {
        Len::None => None,
        Len::Fixed(n) => Some(n as usize),
        Len::Field(j) => Some(vals.get(j).copied().unwrap_or(0) as usize),
    };
    Some((count, len))
}

/// Reads property `p` (index `i`) at `pos` with its resolved count and length: the value and
/// whether it was whole (an array cut short by the end of the payload keeps its elements so
/// far); `None` when not even that could be read.
#[allow(clippy::too_many_arguments)]
fn read_counted<'s, 'n, S>(
    schema: &'s Schema<S>,
    p: &'s Prop<S>,
    i: usize,
    name: &impl Fn(&'s Prop<S>) -> &'n str,
    b: &'n [u8],
    pos: &mut usize,
    ptr: u8,
    vals: &mut [u64],
    count: Option<usize>,
    len: Option<usize>,
    depth: usize,
) -> Option<(Value<'n>, bool)> {
    let one = |pos: &mut usize, vals: &mut [u64]| -> Option<Value<'n>> {
        if p.ty == FieldType::Struct {
            let mut fields = Vec::new();
            let ok = walk(
                schema,
                &p.members,
                name,
                b,
                pos,
                ptr,
                vals,
                &mut fields,
                depth + 1,
            );
            ok.then_some(Value::Struct(fields))
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
        None => {
            let v = one(pos, vals)?;
            if let Some(slot) = vals.get_mut(i) {
                *slot = v.as_u64().unwrap_or(0);
            }
            Some((v, true))
        }
        Some(n) => {
            let mut items = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                let before = *pos;
                match one(pos, vals) {
                    Some(v) => items.push(v),
                    None => return Some((Value::Array(items), false)),
                }
                if *pos == before && items.len() > b.len() {
                    break;
                }
            }
            Some((Value::Array(items), true))
        }
    }
}

/// Steps over property `i` at `pos`: its span, or `Err` when the payload ends inside it (with
/// the span of an array cut short, whose elements so far are still values).
fn skip<S>(
    schema: &Schema<S>,
    i: usize,
    b: &[u8],
    pos: &mut usize,
    ptr: u8,
    vals: &mut [u64],
    depth: usize,
) -> Result<Span, Option<Span>> {
    let Some(p) = schema.props.get(i) else {
        return Err(None);
    };
    let Some((count, len)) = resolve(p, b, pos, vals) else {
        return Err(None);
    };
    let span = Span {
        prop: i,
        start: *pos,
        count,
        len,
    };
    let one = |pos: &mut usize, vals: &mut [u64]| -> Option<Option<u64>> {
        if p.ty == FieldType::Struct {
            if depth > 16 {
                return None;
            }
            for &m in &p.members {
                skip(schema, m, b, pos, ptr, vals, depth + 1).ok()?;
            }
            Some(None)
        } else {
            let (v, next) = value_end(p.ty, b, *pos, ptr, len)?;
            *pos = next;
            Some(v)
        }
    };
    match count {
        None => match one(pos, vals) {
            Some(v) => {
                if let Some(slot) = vals.get_mut(i) {
                    *slot = v.unwrap_or(0);
                }
                Ok(span)
            }
            None => Err(None),
        },
        Some(n) => {
            for k in 0..n {
                let before = *pos;
                if one(pos, vals).is_none() {
                    return Err(Some(span));
                }
                if *pos == before && k >= b.len() {
                    break;
                }
            }
            Ok(span)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn walk<'p, 'a, S>(
    schema: &'p Schema<S>,
    idxs: &[usize],
    name: &impl Fn(&'p Prop<S>) -> &'a str,
    b: &'a [u8],
    pos: &mut usize,
    ptr: u8,
    vals: &mut [u64],
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
        let Some((count, len)) = resolve(p, b, pos, vals) else {
            return false;
        };
        match read_counted(schema, p, i, name, b, pos, ptr, vals, count, len, depth) {
            Some((v, ok)) => {
                out.push((name(p), v));
                if !ok {
                    return false;
                }
            }
            None => return false,
        }
    }
    true
}
