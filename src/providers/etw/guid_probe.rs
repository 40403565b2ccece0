//! Microsoft's form of an ETW probe, by provider GUID:
//! `etw:<provider guid>:0xLL_0xKKKKKKKKKKKKKKKK:<event id>` or `...:generic_event`. The module
//! is the GUID (with or without braces), the function the level and keyword mask the events
//! must pass (as EnableTraceEx2 filters them: level at most LL, level 0 meaning any, and any of
//! the keyword bits, mask 0 or an event keyword of 0 meaning any), the name one event id or
//! every event. Such a probe is made when a description names it exactly, as dtrace makes
//! `tick-N`; descriptions with globs match the probes made so far.
//!
//! arg0 points to the event's `nt`_EVENT_HEADER` (80 bytes, `dscripts/lib/etw.d`) followed by
//! the payload; arg1 is the payload's size.

use std::sync::RwLock;

use super::{native, EtwFirings, FIRST_GUID_ID, FIRST_NAMED_ID};
use crate::etw::record::{EventRecord, Guid};
use crate::probes::{glob_match, ProbeDesc, ProbeError, ProbeInfo};
use crate::providers::Provider;

/// The provider name of these probes.
pub const PROVIDER: &str = "etw";
/// The probe name for every event of the provider.
pub const GENERIC: &str = "generic_event";
/// Where the pid provider's ids begin: the end of the range of these probes.
const PID_FIRST_ID: u64 = 1_000_000;
/// Size of EVENT_HEADER.
pub const EVENT_HEADER_SIZE: usize = 80;

/// One `etw:<guid>:...` probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuidProbe {
    pub id: u64,
    pub guid: Guid,
    pub level: u8,
    pub keywords: u64,
    /// One event id, or every event.
    pub event: Option<u16>,
}

impl GuidProbe {
    /// The probe's level/keyword field: `0xLL_0xKKKKKKKKKKKKKKKK`.
    pub fn function(&self) -> String {
        format!("0x{:02x}_0x{:016x}", self.level, self.keywords)
    }

    pub fn info(&self) -> ProbeInfo {
        ProbeInfo {
            id: self.id,
            provider: PROVIDER.to_string(),
            module: self.guid.to_string(),
            function: self.function(),
            name: match self.event {
                Some(id) => id.to_string(),
                None => GENERIC.to_string(),
            },
            arg_types: vec!["EVENT_HEADER *".into(), "uint32_t".into()],
            arg_native: Vec::new(),
        }
    }

    /// Whether an event of the probe's provider passes its filters.
    pub fn passes(&self, ev: &EventRecord<'_>) -> bool {
        ev.provider == self.guid
            && (self.level == 0 || ev.level <= self.level)
            && (self.keywords == 0 || ev.keyword == 0 || ev.keyword & self.keywords != 0)
            && self.event.is_none_or(|id| id == ev.id)
    }
}

/// Parses the level/keyword field `0xLL_0xKKKKKKKKKKKKKKKK` (hex digits, any count).
pub fn parse_level_keywords(s: &str) -> Option<(u8, u64)> {
    let (l, k) = s.split_once('_')?;
    fn hex(x: &str) -> Option<&str> {
        x.strip_prefix("0x")
            .or_else(|| x.strip_prefix("0X"))
            .filter(|h| !h.is_empty())
    }
    let level = u8::from_str_radix(hex(l)?, 16).ok()?;
    let keywords = u64::from_str_radix(hex(k)?, 16).ok()?;
    Some((level, keywords))
}

fn invalid(desc: &ProbeDesc, why: &str) -> ProbeError {
    ProbeError::new(
        "D_PDESC_INVAL",
        format!(
            "invalid probe description \"{desc}\": {why} (etw probes are \
             etw:<provider guid>:0xLL_0xKKKKKKKKKKKKKKKK:<event id>|generic_event)"
        ),
    )
}

/// The probe an exact description names, made if new.
fn get_or_make(list: &RwLock<Vec<GuidProbe>>, desc: &ProbeDesc) -> Result<ProbeInfo, ProbeError> {
    let guid = Guid::parse(&desc.module).ok_or_else(|| invalid(desc, "bad provider GUID"))?;
    let (level, keywords) = parse_level_keywords(&desc.function)
        .ok_or_else(|| invalid(desc, "bad level/keyword field"))?;
    let event = if desc.name == GENERIC {
        None
    } else {
        Some(
            desc.name
                .parse::<u16>()
                .map_err(|_| invalid(desc, "bad event id"))?,
        )
    };
    let mut list = list
        .write()
        .map_err(|_| ProbeError::new("D_PDESC_ZERO", "etw probe list unavailable"))?;
    if let Some(p) = list
        .iter()
        .find(|p| p.guid == guid && p.level == level && p.keywords == keywords && p.event == event)
    {
        return Ok(p.info());
    }
    let id = FIRST_GUID_ID + list.len() as u64;
    if id >= PID_FIRST_ID {
        return Err(ProbeError::new("D_PDESC_ZERO", "too many etw probes"));
    }
    let p = GuidProbe {
        id,
        guid,
        level,
        keywords,
        event,
    };
    let info = p.info();
    list.push(p);
    Ok(info)
}

/// The catalog's `etw` provider.
pub struct GuidProvider {
    pub probes: std::sync::Arc<RwLock<Vec<GuidProbe>>>,
    /// The GUIDs of the providers known (the trace's, the provider catalog's), over which a
    /// description with globs (`etw:::`, `etw:<guid>:*:*`) is expanded.
    pub known: Vec<Guid>,
}

/// The level/keyword field of a probe that passes every event: any level, any keyword.
const ANY_LEVEL_KEYWORD: &str = "0x00_0x0000000000000000";

impl GuidProvider {
    /// The probes a description with globs names over the known providers, made: for each
    /// known provider whose GUID the module matches (or the one GUID an exact module names),
    /// the probe of the exact level/keyword field or, when the field is a glob matching it,
    /// any level and keyword; the exact event id or, when the name is a glob matching it,
    /// `generic_event`. Only a description that names the `etw` provider is expanded, so that
    /// `:::` does not make a probe of every provider.
    fn expand(&self, desc: &ProbeDesc) -> Result<Vec<ProbeInfo>, ProbeError> {
        let glob = |f: &str| f.contains(['*', '?', '[']);
        if desc.provider != PROVIDER {
            return Ok(Vec::new());
        }
        let function = if !desc.function.is_empty() && !glob(&desc.function) {
            desc.function.clone()
        } else if glob_match(&desc.function, ANY_LEVEL_KEYWORD) {
            ANY_LEVEL_KEYWORD.to_string()
        } else {
            return Ok(Vec::new());
        };
        let name = if !desc.name.is_empty() && !glob(&desc.name) {
            desc.name.clone()
        } else if glob_match(&desc.name, GENERIC) {
            GENERIC.to_string()
        } else {
            return Ok(Vec::new());
        };
        let module = desc.module.trim_start_matches('{').trim_end_matches('}');
        let guids: Vec<Guid> = match Guid::parse(module) {
            Some(g) if !glob(module) => vec![g],
            _ => {
                let pat = module.to_ascii_lowercase();
                self.known
                    .iter()
                    .filter(|g| glob_match(&pat, &g.to_string()))
                    .copied()
                    .collect()
            }
        };
        let mut made = Vec::new();
        for g in guids {
            let one = ProbeDesc {
                provider: PROVIDER.to_string(),
                module: g.to_string(),
                function: function.clone(),
                name: name.clone(),
            };
            made.push(get_or_make(&self.probes, &one)?);
        }
        Ok(made)
    }
}

impl Provider for GuidProvider {
    fn name(&self) -> &str {
        PROVIDER
    }

    fn matching(&self, desc: &ProbeDesc) -> Vec<ProbeInfo> {
        self.try_matching(desc).unwrap_or_default()
    }

    fn try_matching(&self, desc: &ProbeDesc) -> Result<Vec<ProbeInfo>, ProbeError> {
        let fields = [&desc.module, &desc.function, &desc.name];
        if fields
            .iter()
            .all(|f| !f.is_empty() && !f.contains(['*', '?', '[']))
        {
            return Ok(vec![get_or_make(&self.probes, desc)?]);
        }
        // the probes the globs name over the known providers (their level/keyword field as
        // the probe spells it, which an exact field of the description may not), and those
        // made before that match
        let mut found = self.expand(desc)?;
        let module = desc.module.trim_start_matches('{').trim_end_matches('}');
        let module = module.to_ascii_lowercase();
        for p in list(&self.probes) {
            if glob_match(&module, &p.module)
                && glob_match(&desc.function, &p.function)
                && glob_match(&desc.name, &p.name)
                && !found.iter().any(|f| f.id == p.id)
            {
                found.push(p);
            }
        }
        found.sort_by_key(|p| p.id);
        Ok(found)
    }

    fn list(&self) -> Vec<ProbeInfo> {
        list(&self.probes)
    }
}

/// The probes made so far.
pub fn list(probes: &RwLock<Vec<GuidProbe>>) -> Vec<ProbeInfo> {
    match probes.read() {
        Ok(l) => l.iter().map(GuidProbe::info).collect(),
        Err(_) => Vec::new(),
    }
}

pub(super) fn any_enabled(probes: &RwLock<Vec<GuidProbe>>, enabled: &dyn Fn(u64) -> bool) -> bool {
    probes
        .read()
        .map(|l| l.iter().any(|p| enabled(p.id)))
        .unwrap_or(false)
}

/// The GUID of an `etw` probe's description, with its level and keyword mask (for the live
/// session plan).
pub fn enable_of(p: &ProbeInfo) -> Option<(Guid, u8, u64)> {
    if p.provider != PROVIDER || p.id < FIRST_NAMED_ID {
        return None;
    }
    let (level, kw) = parse_level_keywords(&p.function)?;
    Some((Guid::parse(&p.module)?, level, kw))
}

fn guid_bytes(g: &Guid) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&g.data1.to_le_bytes());
    b[4..6].copy_from_slice(&g.data2.to_le_bytes());
    b[6..8].copy_from_slice(&g.data3.to_le_bytes());
    b[8..16].copy_from_slice(&g.data4);
    b
}

/// The EVENT_HEADER of a record, as a consumer sees it on Windows.
pub fn event_header(ev: &EventRecord<'_>) -> [u8; EVENT_HEADER_SIZE] {
    let mut h = [0u8; EVENT_HEADER_SIZE];
    let size = (EVENT_HEADER_SIZE + ev.payload.len()).min(u16::MAX as usize) as u16;
    h[0..2].copy_from_slice(&size.to_le_bytes());
    h[4..6].copy_from_slice(&ev.flags.to_le_bytes());
    h[8..12].copy_from_slice(&ev.tid.to_le_bytes());
    h[12..16].copy_from_slice(&ev.pid.to_le_bytes());
    h[16..24].copy_from_slice(&ev.raw_timestamp.to_le_bytes());
    h[24..40].copy_from_slice(&guid_bytes(&ev.provider));
    h[40..42].copy_from_slice(&ev.id.to_le_bytes());
    h[42] = ev.version;
    h[43] = ev.channel;
    h[44] = ev.level;
    h[45] = ev.opcode;
    h[46..48].copy_from_slice(&ev.task.to_le_bytes());
    h[48..56].copy_from_slice(&ev.keyword.to_le_bytes());
    h[64..80].copy_from_slice(&guid_bytes(&ev.activity_id));
    h
}

/// The firings of the `etw` probes an event passes.
pub(super) fn firings(
    probes: &RwLock<Vec<GuidProbe>>,
    ev: &EventRecord<'_>,
    enabled: &dyn Fn(u64) -> bool,
    pid: u32,
    tid: u32,
    out: &mut EtwFirings,
) {
    let Ok(list) = probes.try_read() else { return };
    for p in list.iter() {
        if !p.passes(ev) || !enabled(p.id) {
            continue;
        }
        let mut args = [0u64; 10];
        args[0] = native::NATIVE_BASE;
        args[1] = ev.payload.len() as u64;
        super::Emit { probe: p.id, out }.push_native(
            args,
            pid,
            tid,
            EVENT_HEADER_SIZE + ev.payload.len(),
            |w| {
                w.bytes(0, &event_header(ev));
                w.bytes(EVENT_HEADER_SIZE, ev.payload);
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_make_probes_once() {
        let list = std::sync::Arc::new(RwLock::new(Vec::new()));
        let mut prov = GuidProvider {
            probes: list.clone(),
            known: Vec::new(),
        };
        let d = ProbeDesc::parse(
            "etw:{1C95126E-7EEA-49A9-A3FE-A378B03DDB4D}:0x5_0xffffffffffffffff:generic_event",
        )
        .unwrap();
        let a = prov.try_matching(&d).unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].module, "1c95126e-7eea-49a9-a3fe-a378b03ddb4d");
        assert_eq!(a[0].function, "0x05_0xffffffffffffffff");
        assert_eq!(a[0].name, "generic_event");
        let d2 = ProbeDesc::parse(
            "etw:1c95126e-7eea-49a9-a3fe-a378b03ddb4d:0x05_0xffffffffffffffff:generic_event",
        )
        .unwrap();
        assert_eq!(prov.try_matching(&d2).unwrap(), a);
        let d3 = ProbeDesc::parse("etw:1c95126e-7eea-49a9-a3fe-a378b03ddb4d:0x4_0x1:3008").unwrap();
        let b = prov.try_matching(&d3).unwrap();
        assert_ne!(a[0].id, b[0].id);
        assert_eq!(prov.list().len(), 2);
        // globs match the probes made so far
        assert_eq!(
            prov.try_matching(&ProbeDesc::parse("etw:::3008").unwrap())
                .unwrap()
                .len(),
            1
        );
        // over known providers, etw::: makes the probe of every event of each
        let known = Guid::parse("e13c0d23-ccbc-4e12-931b-d9cc2eee27e4").unwrap();
        prov.known = vec![known];
        let all = prov
            .try_matching(&ProbeDesc::parse("etw:::").unwrap())
            .unwrap();
        assert_eq!(all.len(), 3, "{all:?}");
        assert!(all.iter().any(|p| p.module == known.to_string()
            && p.function == ANY_LEVEL_KEYWORD
            && p.name == GENERIC));
        // a glob module that matches no known GUID makes nothing
        assert!(prov
            .try_matching(&ProbeDesc::parse("etw:ffff*::").unwrap())
            .unwrap()
            .is_empty());
        // malformed exact descriptions are errors
        for bad in [
            "etw:not-a-guid:0x5_0x1:generic_event",
            "etw:1c95126e-7eea-49a9-a3fe-a378b03ddb4d:5_1:generic_event",
            "etw:1c95126e-7eea-49a9-a3fe-a378b03ddb4d:0x5_0x1:event",
        ] {
            let e = prov
                .try_matching(&ProbeDesc::parse(bad).unwrap())
                .unwrap_err();
            assert_eq!(e.tag, "D_PDESC_INVAL", "{bad}");
        }
        assert_eq!(
            enable_of(&b[0]),
            Some((
                Guid::parse("1c95126e-7eea-49a9-a3fe-a378b03ddb4d").unwrap(),
                4,
                1
            ))
        );
    }
}
