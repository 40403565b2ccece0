//! Decoding of ETW event payloads into named fields.
//!
//! * kernel and KernelTraceControl events: static [`layout::Layout`] tables ([`kernel`]);
//! * manifest events: schemas from EventMetadata (TRACE_EVENT_INFO) records ([`tdh`]) or from
//!   instrumentation manifests loaded from disk ([`manifest`]);
//! * TraceLogging events: the self-description in extended item 11 ([`tlg`]);
//! * anything else: delivered raw (one `Payload` field, [`SchemaSource::Raw`]).
//!
//! Feed every record to [`Decoder::observe`] (it registers EventMetadata schemas), then
//! [`Decoder::decode`] it.

pub mod kernel;
pub mod layout;
pub mod manifest;
pub mod schema;
pub mod tdh;
pub mod tlg;
pub mod value;

use crate::fasthash::FastMap;
use std::borrow::Cow;
use std::sync::Arc;

use crate::etw::record::{EventRecord, Guid, HeaderKind};
pub use layout::{Field, Layout, Source};
pub use schema::SchemaSource;
use schema::{Prop, Schema, SchemaCursor};
use tdh::SchemaKey;
pub use value::{FieldType, Value};

/// A decoded event: a view over the record's payload with the schema that names its fields.
/// Nothing is read until it is asked for: [`DecodedEvent::get`] steps over the fields before the
/// one named (computing their offsets, building no value), [`DecodedEvent::fields`] reads them
/// in order. Strings stay in the payload (UTF-16 as [`Value::Utf16`]) until converted. Making
/// one allocates nothing.
#[derive(Clone)]
pub struct DecodedEvent<'a> {
    /// Provider or kernel class name ("Thread", "Microsoft-Windows-DNS-Client", ...).
    pub provider: &'a str,
    /// Event name ("CSwitch", "ImageId", a TraceLogging event name, ...).
    pub name: &'a str,
    pub source: SchemaSource,
    view: View<'a>,
}

/// What a [`DecodedEvent`] reads its fields with.
#[derive(Clone)]
enum View<'a> {
    /// No fields (an event left undecoded).
    Empty,
    /// One field: the whole payload (raw events, EventMetadata blobs).
    Whole(&'static str, &'a [u8]),
    /// A static kernel/KernelTraceControl layout.
    Layout {
        layout: &'static Layout,
        payload: &'a [u8],
        ptr: u8,
        version: u8,
    },
    /// A manifest/EventMetadata schema, with the provider's value maps.
    Schema {
        schema: &'a Schema<String>,
        maps: Option<&'a FastMap<String, tdh::ValueMap>>,
        payload: &'a [u8],
        ptr: u8,
    },
    /// A TraceLogging schema, shared with the decoder's cache.
    TraceLogging {
        schema: Arc<Schema<String>>,
        payload: &'a [u8],
        ptr: u8,
    },
}

impl<'a> DecodedEvent<'a> {
    /// An event left undecoded because nothing needs its fields.
    pub fn skipped() -> DecodedEvent<'static> {
        DecodedEvent {
            provider: "",
            name: "",
            source: SchemaSource::Raw,
            view: View::Empty,
        }
    }

    /// The fields in payload order, each read as it is reached.
    pub fn fields(&self) -> Fields<'_, 'a> {
        let state = match &self.view {
            View::Empty => FieldsState::Done,
            View::Whole(name, b) => FieldsState::Whole(name, b),
            View::Layout {
                layout,
                payload,
                ptr,
                version,
            } => FieldsState::Layout {
                fields: layout.fields,
                payload,
                ptr: *ptr,
                version: *version,
                next: 0,
                pos: 0,
            },
            View::Schema {
                schema,
                maps,
                payload,
                ptr,
            } => FieldsState::Schema(SchemaCursor::new(schema, payload, *ptr), *maps),
            View::TraceLogging {
                schema,
                payload,
                ptr,
            } => FieldsState::Schema(SchemaCursor::new(schema, payload, *ptr), None),
        };
        Fields {
            state,
            short: false,
        }
    }

    /// Reads every field in payload order, handing each name and value to `f` (the fastest
    /// way to read them all); returns false when the payload ended before the schema did.
    pub fn for_each_field(&self, mut f: impl FnMut(&str, &Value<'_>)) -> bool {
        match &self.view {
            View::Empty => true,
            View::Whole(name, b) => {
                f(name, &Value::Bytes(b));
                true
            }
            View::Layout {
                layout,
                payload,
                ptr,
                version,
            } => {
                let mut pos = 0;
                for fl in layout.fields {
                    if fl.since > *version {
                        continue;
                    }
                    // fields past the end of the payload are left out (older builds omit
                    // trailing fields); trailing bytes the layout does not name are ignored
                    if pos >= payload.len() {
                        return false;
                    }
                    let Some((v, end)) = value::read_value(fl.ty, payload, pos, *ptr, None) else {
                        return false;
                    };
                    f(fl.name, &v);
                    release(v);
                    pos = end;
                }
                true
            }
            View::Schema {
                schema,
                maps,
                payload,
                ptr,
            } => {
                let mut c = SchemaCursor::new(schema, payload, *ptr);
                while let Some((p, v)) = c.next_value(&|p: &Prop<String>| p.name.as_str()) {
                    let v = mapped(*maps, p, v);
                    f(&p.name, &v);
                    release(v);
                }
                !c.short
            }
            View::TraceLogging {
                schema,
                payload,
                ptr,
            } => {
                let mut c = SchemaCursor::new(schema, payload, *ptr);
                while let Some((p, v)) = c.next_value(&|p: &Prop<String>| p.name.as_str()) {
                    f(&p.name, &v);
                    release(v);
                }
                !c.short
            }
        }
    }

    /// A field by name (the first of that name).
    pub fn get(&self, name: &str) -> Option<Value<'_>> {
        if let Some((fields, payload, ptr, version)) = self.layout() {
            let (ty, pos) = layout_place(fields, payload, ptr, version, name)?;
            return value::read_value(ty, payload, pos, ptr, None).map(|(v, _)| v);
        }
        self.fields().find_value(name)
    }

    /// Several fields by name in one pass over the payload (what one `get` per name would give,
    /// without stepping over the fields before each again): `None` for a name the event lacks.
    pub fn pick<const N: usize>(&self, names: [&str; N]) -> [Option<Value<'_>>; N] {
        if self.layout().is_some() {
            // a layout's field is found by stepping over sizes: `get` per name is as cheap
            return names.map(|n| self.get(n));
        }
        let mut out: [Option<Value<'_>>; N] = std::array::from_fn(|_| None);
        let mut left = N;
        let mut f = self.fields();
        while left > 0 {
            let Some((n, at)) = f.next_span() else { break };
            if let Some(i) = names.iter().position(|x| *x == n) {
                if out[i].is_none() {
                    out[i] = f.value_at(&at);
                    left -= 1;
                }
            }
        }
        out
    }

    /// A numeric field by name.
    pub fn u64(&self, name: &str) -> Option<u64> {
        self.get(name)?.as_u64()
    }

    /// A string field by name (UTF-16 converted; a mapped integer's name).
    pub fn str(&self, name: &str) -> Option<Cow<'_, str>> {
        self.get(name)?.into_text()
    }

    /// The parts of a static-layout view: fields, payload, pointer size, event version.
    fn layout(&self) -> Option<(&'static [Field], &'a [u8], u8, u8)> {
        match &self.view {
            View::Layout {
                layout,
                payload,
                ptr,
                version,
            } => Some((layout.fields, payload, *ptr, *version)),
            _ => None,
        }
    }

    /// How many fields the payload holds.
    pub fn field_count(&self) -> usize {
        let mut f = self.fields();
        let mut n = 0;
        while f.next_span().is_some() {
            n += 1;
        }
        n
    }

    /// False when the payload ended before the schema did (the fields before that point are
    /// still read).
    pub fn is_complete(&self) -> bool {
        let mut f = self.fields();
        while f.next_span().is_some() {}
        !f.short
    }

    /// True when the event decoded to named fields (not raw).
    pub fn is_named(&self) -> bool {
        self.source != SchemaSource::Raw
    }
}

impl std::fmt::Debug for DecodedEvent<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fields: Vec<(&str, Value<'_>)> = self.fields().collect();
        f.debug_struct("DecodedEvent")
            .field("provider", &self.provider)
            .field("name", &self.name)
            .field("source", &self.source)
            .field("fields", &fields)
            .field("complete", &self.is_complete())
            .finish()
    }
}

/// The fields of a [`DecodedEvent`], read one after the other.
pub struct Fields<'s, 'a> {
    state: FieldsState<'s, 'a>,
    /// Set once the payload ended before the schema did.
    short: bool,
}

enum FieldsState<'s, 'a> {
    Done,
    Whole(&'static str, &'a [u8]),
    Layout {
        fields: &'static [Field],
        payload: &'a [u8],
        ptr: u8,
        version: u8,
        next: usize,
        pos: usize,
    },
    Schema(
        SchemaCursor<'s, 'a, String>,
        Option<&'s FastMap<String, tdh::ValueMap>>,
    ),
}

/// Where the field a [`Fields`] stepped to lies.
enum At<'a> {
    Whole(&'a [u8]),
    Layout(FieldType, usize),
    Schema(schema::Span),
}

impl<'s, 'a> Fields<'s, 'a> {
    /// Steps to the next field: its name and where it lies, building no value.
    fn next_span(&mut self) -> Option<(&'s str, At<'a>)> {
        match &mut self.state {
            FieldsState::Done => None,
            FieldsState::Whole(name, b) => {
                let (name, b): (&'static str, &'a [u8]) = (name, b);
                self.state = FieldsState::Done;
                Some((name, At::Whole(b)))
            }
            FieldsState::Layout {
                fields,
                payload,
                ptr,
                version,
                next,
                pos,
            } => {
                let fl = next_field_at(fields, next, *version)?;
                // fields past the end of the payload are left out (older builds omit
                // trailing fields); trailing bytes the layout does not name are ignored
                let here = *pos;
                match (here < payload.len())
                    .then(|| value::value_end(fl.ty, payload, here, *ptr, None))
                    .flatten()
                {
                    Some((_, end)) => *pos = end,
                    None => {
                        self.short = true;
                        self.state = FieldsState::Done;
                        return None;
                    }
                }
                Some((fl.name, At::Layout(fl.ty, here)))
            }
            FieldsState::Schema(c, _) => {
                let r = c.next_span();
                self.short = c.short;
                let (p, span) = r?;
                Some((p.name.as_str(), At::Schema(span)))
            }
        }
    }

    /// The value of the field [`Fields::next_span`] stepped to.
    fn value_at(&mut self, at: &At<'a>) -> Option<Value<'s>>
    where
        'a: 's,
    {
        match (&mut self.state, at) {
            (_, At::Whole(b)) => Some(Value::Bytes(b)),
            (FieldsState::Layout { payload, ptr, .. }, At::Layout(ty, pos)) => {
                value::read_value(*ty, payload, *pos, *ptr, None).map(|(v, _)| v)
            }
            (FieldsState::Schema(c, maps), At::Schema(span)) => {
                let maps = *maps;
                let v = c.value(span, &|p: &Prop<String>| p.name.as_str())?;
                Some(mapped(maps, c.prop(span.prop)?, v))
            }
            _ => None,
        }
    }

    /// The value of the first field called `name`, stepping over (not reading) the others.
    fn find_value(mut self, name: &str) -> Option<Value<'s>>
    where
        'a: 's,
    {
        while let Some((n, at)) = self.next_span() {
            if n == name {
                return self.value_at(&at);
            }
        }
        None
    }
}

/// Where the first field called `name` of a static layout lies in a payload: its type and
/// offset. The fields before it are stepped over by their sizes (read only when variable); `None`
/// when the layout has no such field at this version or the payload ends before it.
#[inline]
fn layout_place(
    fields: &[Field],
    payload: &[u8],
    ptr: u8,
    version: u8,
    name: &str,
) -> Option<(FieldType, usize)> {
    let mut pos = 0;
    for fl in fields {
        if fl.since > version {
            continue;
        }
        // as in `Fields::next_span`: fields past the end of the payload are left out
        if pos >= payload.len() {
            return None;
        }
        if fl.name == name {
            return Some((fl.ty, pos));
        }
        pos = match fl.ty.fixed_size(ptr) {
            Some(n) => pos + n,
            None => value::value_end(fl.ty, payload, pos, ptr, None)?.1,
        };
    }
    None
}

/// The layout field at or after index `next` that events of `version` have; `next` moves past it.
#[inline]
fn next_field_at(
    fields: &'static [Field],
    next: &mut usize,
    version: u8,
) -> Option<&'static Field> {
    loop {
        let fl = fields.get(*next)?;
        *next += 1;
        if fl.since <= version {
            return Some(fl);
        }
    }
}

/// Drops a value, inline for the kinds that own nothing (most of them: numbers and views of
/// the payload), so that reading a field costs no call to drop it.
#[inline(always)]
fn release(v: Value<'_>) {
    match v {
        Value::Str(Cow::Owned(_))
        | Value::Ptrs(_)
        | Value::Array(_)
        | Value::Struct(_)
        | Value::Mapped { .. } => drop(v),
        v => std::mem::forget(v),
    }
}

/// A top-level value with its value map applied, when the trace gave the property's map.
fn mapped<'s>(
    maps: Option<&'s FastMap<String, tdh::ValueMap>>,
    p: &'s Prop<String>,
    v: Value<'s>,
) -> Value<'s> {
    let Some(m) = p.map.as_deref() else {
        return v;
    };
    if let Some(map) = maps.and_then(|maps| maps.get(m)) {
        if let Some(n) = v.as_u64() {
            if let Some(name) = map.name_of(n) {
                return Value::Mapped { value: n, name };
            }
        }
    }
    v
}

impl<'s, 'a: 's> Iterator for Fields<'s, 'a> {
    type Item = (&'s str, Value<'s>);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.state {
            FieldsState::Layout {
                fields,
                payload,
                ptr,
                version,
                next,
                pos,
            } => {
                let fl = next_field_at(fields, next, *version)?;
                // as in `next_span`: fields past the end of the payload are left out
                let got = (*pos < payload.len())
                    .then(|| value::read_value(fl.ty, payload, *pos, *ptr, None))
                    .flatten();
                match got {
                    Some((v, end)) => {
                        *pos = end;
                        Some((fl.name, v))
                    }
                    None => {
                        self.short = true;
                        self.state = FieldsState::Done;
                        None
                    }
                }
            }
            FieldsState::Schema(c, maps) => {
                let maps = *maps;
                let r = c.next_value(&|p: &Prop<String>| p.name.as_str());
                self.short = c.short;
                let (p, v) = r?;
                Some((p.name.as_str(), mapped(maps, p, v)))
            }
            _ => {
                let (n, at) = self.next_span()?;
                Some((n, self.value_at(&at)?))
            }
        }
    }
}

/// The payload decoder with its schema registry.
#[derive(Clone, Default)]
pub struct Decoder {
    /// Manifest-event schemas by (provider, id, version): EventMetadata and loaded manifests.
    schemas: FastMap<SchemaKey, Schema<String>>,
    /// Classic (MOF) schemas from EventMetadata by (event GUID, opcode, version).
    classic: FastMap<(Guid, u8, u8), Schema<String>>,
    /// TraceLogging provider names from PROV_TRAITS, by provider GUID.
    tl_providers: FastMap<Guid, String>,
    /// Value maps from EventMetadata (EVENT_MAP_INFO) by provider, then map name.
    maps: FastMap<Guid, FastMap<String, tdh::ValueMap>>,
    /// TraceLogging schemas, parsed once per distinct metadata blob (extended item 11): by the
    /// blob's hash, then the blob. Field names are kept as places in the blob, so that every
    /// record names its fields from its own copy of the metadata.
    tl_schemas: std::cell::RefCell<FastMap<u64, Vec<TlSchema>>>,
    /// Providers with their named keywords: from loaded manifests and EventMetadata records.
    providers: FastMap<Guid, crate::etw::catalog::ProviderInfo>,
    /// EventSource manifests sent in band (event 0xFFFE), by provider: the chunks so far.
    inband: FastMap<Guid, InbandManifest>,
}

/// The event id of an EventSource's manifest, sent in band in manifest mode.
pub const MANIFEST_EVENT_ID: u16 = 0xFFFE;

/// An EventSource manifest arriving in chunks, and the hash of the last one loaded (it is sent
/// again at each enable: loaded once).
#[derive(Clone, Default)]
struct InbandManifest {
    chunks: Vec<Option<Vec<u8>>>,
    loaded: Option<u64>,
}

/// A TraceLogging metadata blob, the place of the event name in it and the schema parsed from
/// it (shared with the events decoded with it).
type TlSchema = (Box<[u8]>, tlg::NameAt, Arc<Schema<String>>);

impl Decoder {
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Learns from a record: EventMetadata (TRACE_EVENT_INFO) schemas and TraceLogging provider
    /// names. Call it for every record, before `decode`.
    #[inline]
    pub fn observe(&mut self, ev: &EventRecord<'_>) {
        // kernel records carry no metadata
        if ev.kernel_group.is_none() {
            self.observe_provider_event(ev);
        }
    }

    fn observe_provider_event(&mut self, ev: &EventRecord<'_>) {
        if ev.provider == kernel::EVENT_METADATA
            && ev.kind != HeaderKind::EventHeader
            && ev.opcode == 32
        {
            if let Some(info) = tdh::parse_trace_event_info(ev.payload) {
                if let Some(k) = info.classic_key {
                    self.classic.insert(k, info.schema.clone());
                } else {
                    let (guid, name) = (info.key.0, info.schema.provider.as_str());
                    let p = self
                        .providers
                        .entry(guid)
                        .or_insert_with(|| crate::etw::catalog::ProviderInfo::new(name, guid));
                    for (k, m) in &info.keywords {
                        p.add_keyword(k, *m);
                    }
                }
                // A manifest loaded from disk is not replaced by metadata (they agree, or the
                // manifest is the newer truth).
                self.schemas.entry(info.key).or_insert(info.schema);
            }
        }
        if ev.provider == kernel::EVENT_METADATA
            && ev.kind != HeaderKind::EventHeader
            && ev.opcode == 33
        {
            if let Some((provider, name, map)) = tdh::parse_event_map_info(ev.payload) {
                self.maps.entry(provider).or_default().insert(name, map);
            }
        }
        if ev.kind == HeaderKind::EventHeader && ev.id == MANIFEST_EVENT_ID {
            self.observe_inband_manifest(ev);
        }
        if ev.kind == HeaderKind::EventHeader && !self.tl_providers.contains_key(&ev.provider) {
            if let Some(t) = ev
                .extended
                .iter()
                .find(|x| x.ext_type == tlg::EXT_PROV_TRAITS)
            {
                if let Some(n) = tlg::provider_name(t.data) {
                    self.tl_providers.insert(ev.provider, n.to_string());
                }
            }
        }
    }

    /// An EventSource in manifest mode sends its manifest in band as event 0xFFFE, in chunks
    /// of at most 0xFF00 bytes, each after an 8-byte envelope: format (1: the XML as UTF-8),
    /// major and minor version, magic 0x5B, total chunks (u16), this chunk's number (u16)
    /// (System.Diagnostics.Tracing's ManifestEnvelope; PerfView's TraceEvent reads it the same
    /// way). Once every chunk of a manifest has come, its events' schemas are registered, so
    /// that the provider's later events decode by field name, over a trace and live.
    fn observe_inband_manifest(&mut self, ev: &EventRecord<'_>) {
        let p = ev.payload;
        if p.len() < 8 || p[0] != 1 || p[3] != 0x5B {
            return;
        }
        let total = u16::from_le_bytes([p[4], p[5]]) as usize;
        let number = u16::from_le_bytes([p[6], p[7]]) as usize;
        if total == 0 || number >= total {
            return;
        }
        let m = self.inband.entry(ev.provider).or_default();
        if m.chunks.len() != total || number == 0 {
            // a new manifest begins (its first chunk, or another chunk count)
            m.chunks = vec![None; total];
        }
        m.chunks[number] = Some(p[8..].to_vec());
        if m.chunks.iter().any(Option::is_none) {
            return;
        }
        let bytes: Vec<u8> = m.chunks.drain(..).flatten().flatten().collect();
        let hash = crate::fasthash::hash_bytes(&bytes);
        if m.loaded == Some(hash) {
            return;
        }
        m.loaded = Some(hash);
        let text = String::from_utf8_lossy(&bytes);
        self.load_manifest_str(text.trim_end_matches('\0'));
    }

    /// Registers the schemas of a manifest's XML text; returns how many events it defined.
    pub fn load_manifest_str(&mut self, xml: &str) -> usize {
        for p in manifest::parse_manifest_providers(xml) {
            let known = self
                .providers
                .entry(p.guid)
                .or_insert_with(|| crate::etw::catalog::ProviderInfo::new(&p.name, p.guid));
            for (k, m) in &p.keywords {
                known.add_keyword(k, *m);
            }
        }
        let list = manifest::parse_manifest(xml);
        let n = list.len();
        for (k, s) in list {
            self.schemas.insert(k, s);
        }
        n
    }

    /// A provider known from a manifest or EventMetadata, with its named keywords.
    pub fn provider_info(&self, guid: Guid) -> Option<&crate::etw::catalog::ProviderInfo> {
        self.providers.get(&guid)
    }

    /// Every provider known from manifests and EventMetadata.
    pub fn providers(&self) -> impl Iterator<Item = &crate::etw::catalog::ProviderInfo> {
        self.providers.values()
    }

    /// The schema registered for a manifest event, if any.
    pub fn schema(&self, provider: Guid, id: u16, version: u8) -> Option<&Schema<String>> {
        self.schemas.get(&(provider, id, version))
    }

    /// Number of registered schemas (manifest-event and classic).
    pub fn schema_count(&self) -> usize {
        self.schemas.len() + self.classic.len()
    }

    /// Decodes a record. Always returns an event: with no schema the payload comes back raw.
    pub fn decode<'a>(&'a self, ev: &EventRecord<'a>) -> DecodedEvent<'a> {
        let ptr = if ev.pointer_size == 4 { 4 } else { 8 };
        let payload = ev.payload;
        // Kernel events.
        if let Some(group) = ev.kernel_group {
            if let Some(l) = kernel::layout_for(Source::Kernel(group), ev.opcode, ev.version) {
                return from_layout(l, ev, ptr);
            }
            return raw(kernel::group_name(group).unwrap_or("Kernel"), payload);
        }
        match ev.kind {
            HeaderKind::EventHeader => {
                if let Some(meta) = ev
                    .extended
                    .iter()
                    .find(|x| x.ext_type == tlg::EXT_SCHEMA_TL)
                {
                    let blob = meta.data;
                    let hash = {
                        use std::hash::{BuildHasher, Hasher};
                        let mut h = crate::fasthash::FastBuild::default().build_hasher();
                        h.write(blob);
                        h.finish()
                    };
                    let mut cache = self.tl_schemas.borrow_mut();
                    let same = cache.entry(hash).or_default();
                    let i = match same.iter().position(|(b, _, _)| **b == *blob) {
                        Some(i) => Some(i),
                        None => tlg::parse_metadata(blob).map(|s| {
                            let name = tlg::NameAt::of(s.name, blob);
                            same.push((blob.into(), name, Arc::new(tlg::owned(&s))));
                            same.len() - 1
                        }),
                    };
                    if let Some((_, name, s)) = i.map(|i| &same[i]) {
                        let provider = ev
                            .extended
                            .iter()
                            .find(|x| x.ext_type == tlg::EXT_PROV_TRAITS)
                            .and_then(|t| tlg::provider_name(t.data))
                            .or_else(|| self.tl_providers.get(&ev.provider).map(String::as_str))
                            .unwrap_or("");
                        return DecodedEvent {
                            provider,
                            name: name.get(blob),
                            source: SchemaSource::TraceLogging,
                            view: View::TraceLogging {
                                schema: s.clone(),
                                payload,
                                ptr,
                            },
                        };
                    }
                }
                if let Some(s) = self.schemas.get(&(ev.provider, ev.id, ev.version)) {
                    return self.with_schema(ev.provider, s, payload, ptr);
                }
                raw("", payload)
            }
            _ => {
                if let Some(l) =
                    kernel::layout_for(Source::Classic(ev.provider), ev.opcode, ev.version)
                {
                    return from_layout(l, ev, ptr);
                }
                if ev.provider == kernel::EVENT_METADATA {
                    let name = if ev.opcode == 32 {
                        "EventInfo"
                    } else {
                        "EventMapInfo"
                    };
                    return DecodedEvent {
                        provider: "EventMetadata",
                        name,
                        source: SchemaSource::Kernel,
                        view: View::Whole("Info", payload),
                    };
                }
                if let Some(s) = self.classic.get(&(ev.provider, ev.opcode, ev.version)) {
                    return self.with_schema(ev.provider, s, payload, ptr);
                }
                raw("", payload)
            }
        }
    }
}

impl Decoder {
    /// An event read with a manifest/EventMetadata schema and its provider's value maps.
    fn with_schema<'a>(
        &'a self,
        provider: Guid,
        schema: &'a Schema<String>,
        payload: &'a [u8],
        ptr: u8,
    ) -> DecodedEvent<'a> {
        DecodedEvent {
            provider: &schema.provider,
            name: &schema.name,
            source: schema.source,
            view: View::Schema {
                schema,
                maps: self.maps.get(&provider),
                payload,
                ptr,
            },
        }
    }

    /// How many value maps the trace has given so far.
    pub fn value_maps(&self) -> usize {
        self.maps.values().map(|m| m.len()).sum()
    }
}

fn from_layout<'a>(l: &'static Layout, ev: &EventRecord<'a>, ptr: u8) -> DecodedEvent<'a> {
    DecodedEvent {
        provider: l.class,
        name: l.event_name(ev.opcode).unwrap_or(""),
        source: SchemaSource::Kernel,
        view: View::Layout {
            layout: l,
            payload: ev.payload,
            ptr,
            version: ev.version,
        },
    }
}

fn raw<'a>(provider: &'a str, payload: &'a [u8]) -> DecodedEvent<'a> {
    DecodedEvent {
        provider,
        name: "",
        source: SchemaSource::Raw,
        view: View::Whole("Payload", payload),
    }
}

/// One line per static layout and version range, for `-lv` style listings:
/// `Thread::CSwitch v2..=4  NewThreadId:uint32_t@0 ...` (offsets for a 64-bit pointer size).
pub fn list_layouts() -> Vec<String> {
    let mut out = Vec::new();
    for l in kernel::LAYOUTS {
        let v = *l.versions.end();
        let fields: Vec<String> = l
            .offsets(8, v)
            .iter()
            .zip(l.fields_at(v))
            .map(|((n, off), fl)| match off {
                Some(o) => format!("{n}:{}@{o}", fl.ty.d_type()),
                None => format!("{n}:{}", fl.ty.d_type()),
            })
            .collect();
        for (_, name) in l.opcodes {
            out.push(format!(
                "{}::{} v{:?} {}",
                l.class,
                name,
                l.versions,
                fields.join(" ")
            ));
        }
    }
    out
}
