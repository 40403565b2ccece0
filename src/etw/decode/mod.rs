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
use std::path::Path;

use crate::etw::record::{EventRecord, Guid, HeaderKind};
pub use layout::{Field, Layout, Source};
pub use schema::SchemaSource;
use schema::{decode_with, Schema};
use tdh::SchemaKey;
pub use value::{FieldType, Value};

/// A decoded event: names borrow the decoder's schemas, the record's metadata, or static tables;
/// values borrow the payload where they can.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodedEvent<'a> {
    /// Provider or kernel class name ("Thread", "Microsoft-Windows-DNS-Client", ...).
    pub provider: &'a str,
    /// Event name ("CSwitch", "ImageId", a TraceLogging event name, ...).
    pub name: &'a str,
    pub source: SchemaSource,
    pub fields: Vec<(&'a str, Value<'a>)>,
    /// False when the payload ended before the schema did (the fields decoded so far are kept).
    pub complete: bool,
}

impl<'a> DecodedEvent<'a> {
    /// An event left undecoded because nothing needs its fields (no allocation).
    pub fn skipped() -> DecodedEvent<'static> {
        DecodedEvent {
            provider: "",
            name: "",
            source: SchemaSource::Raw,
            fields: Vec::new(),
            complete: true,
        }
    }

    /// A field by name.
    pub fn get(&self, name: &str) -> Option<&Value<'a>> {
        self.fields.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// A numeric field by name.
    pub fn u64(&self, name: &str) -> Option<u64> {
        self.get(name)?.as_u64()
    }

    /// A string field by name.
    pub fn str(&self, name: &str) -> Option<&str> {
        self.get(name)?.as_str()
    }

    /// True when the event decoded to named fields (not raw).
    pub fn is_named(&self) -> bool {
        self.source != SchemaSource::Raw
    }
}

/// The payload decoder with its schema registry.
#[derive(Default)]
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
}

/// A TraceLogging metadata blob and the schema parsed from it.
type TlSchema = (Box<[u8]>, Schema<tlg::NameAt>);

impl Decoder {
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Learns from a record: EventMetadata (TRACE_EVENT_INFO) schemas and TraceLogging provider
    /// names. Call it for every record, before `decode`.
    pub fn observe(&mut self, ev: &EventRecord<'_>) {
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

    /// Loads every `*.man` (and `*.xml`) manifest in a folder; returns how many events were defined.
    pub fn load_manifest_dir(&mut self, dir: &Path) -> std::io::Result<usize> {
        let mut n = 0;
        for e in std::fs::read_dir(dir)? {
            let p = e?.path();
            if p.extension()
                .is_some_and(|x| x.eq_ignore_ascii_case("man") || x.eq_ignore_ascii_case("xml"))
            {
                if let Ok(text) = std::fs::read_to_string(&p) {
                    n += self.load_manifest_str(&text);
                }
            }
        }
        Ok(n)
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
                    let i = match same.iter().position(|(b, _)| **b == *blob) {
                        Some(i) => Some(i),
                        None => tlg::parse_metadata(blob).map(|s| {
                            same.push((blob.into(), tlg::NameAt::schema(&s, blob)));
                            same.len() - 1
                        }),
                    };
                    if let Some(s) = i.map(|i| &same[i].1) {
                        let provider = ev
                            .extended
                            .iter()
                            .find(|x| x.ext_type == tlg::EXT_PROV_TRAITS)
                            .and_then(|t| tlg::provider_name(t.data))
                            .or_else(|| self.tl_providers.get(&ev.provider).map(String::as_str))
                            .unwrap_or("");
                        let (fields, complete) =
                            decode_with(s, &|p| p.name.get(blob), payload, ptr);
                        return DecodedEvent {
                            provider,
                            name: s.name.get(blob),
                            source: SchemaSource::TraceLogging,
                            fields,
                            complete,
                        };
                    }
                }
                if let Some(s) = self.schemas.get(&(ev.provider, ev.id, ev.version)) {
                    return self.mapped(ev.provider, s, from_schema(s, payload, ptr));
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
                        fields: vec![("Info", Value::Bytes(payload))],
                        complete: true,
                    };
                }
                if let Some(s) = self.classic.get(&(ev.provider, ev.opcode, ev.version)) {
                    return self.mapped(ev.provider, s, from_schema(s, payload, ptr));
                }
                raw("", payload)
            }
        }
    }
}

impl Decoder {
    /// Names the values of the fields that have a value map the trace carried.
    fn mapped<'a>(
        &'a self,
        provider: Guid,
        s: &'a Schema<String>,
        mut d: DecodedEvent<'a>,
    ) -> DecodedEvent<'a> {
        let Some(maps) = self.maps.get(&provider) else {
            return d;
        };
        // the fields come out in the order of the schema's top-level properties
        for ((_, value), p) in d
            .fields
            .iter_mut()
            .zip(s.top.iter().filter_map(|&i| s.props.get(i)))
        {
            let Some(map) = p.map.as_deref().and_then(|m| maps.get(m)) else {
                continue;
            };
            if let Some(v) = value.as_u64() {
                if let Some(n) = map.name_of(v) {
                    *value = Value::Mapped { value: v, name: n };
                }
            }
        }
        d
    }

    /// How many value maps the trace has given so far.
    pub fn value_maps(&self) -> usize {
        self.maps.values().map(|m| m.len()).sum()
    }
}

fn from_layout<'a>(l: &'static Layout, ev: &EventRecord<'a>, ptr: u8) -> DecodedEvent<'a> {
    let (fields, complete) = l.decode(ev.payload, ptr, ev.version);
    DecodedEvent {
        provider: l.class,
        name: l.event_name(ev.opcode).unwrap_or(""),
        source: SchemaSource::Kernel,
        fields,
        complete,
    }
}

fn from_schema<'a>(s: &'a Schema<String>, payload: &'a [u8], ptr: u8) -> DecodedEvent<'a> {
    let (fields, complete) = decode_with(s, &|p| p.name.as_str(), payload, ptr);
    DecodedEvent {
        provider: &s.provider,
        name: &s.name,
        source: s.source,
        fields,
        complete,
    }
}

fn raw<'a>(provider: &'a str, payload: &'a [u8]) -> DecodedEvent<'a> {
    DecodedEvent {
        provider,
        name: "",
        source: SchemaSource::Raw,
        fields: vec![("Payload", Value::Bytes(payload))],
        complete: true,
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
