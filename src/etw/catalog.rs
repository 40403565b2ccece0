//! ETW providers as dtx knows them: name, GUID and named keywords. They come from instrumentation
//! manifests, from the EventMetadata (TRACE_EVENT_INFO) records of a trace, and on Windows from
//! the system's registered providers (TdhEnumerateProviders with their keywords), which dtx caches
//! in a file next to its executable ([`CATALOG_FILE`]) so that `dtx -l` and the console's probe
//! browser need not ask TDH every time.
//!
//! The cache is text, one provider per line and one keyword per indented line:
//!
//! ```text
//! dtx-provider-catalog 1
//! e13c0d23-ccbc-4e12-931b-d9cc2eee27e4 Microsoft-Windows-DotNETRuntime
//!  0x0000000000000001 GCKeyword
//! ```
//!
//! This module is platform-neutral; the TDH calls live in `sources::etw_live::windows`.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::etw::record::Guid;

/// The cache file's name, next to the executable (the seed's `dt_provlist.dat`).
pub const CATALOG_FILE: &str = "dtx_provlist.dat";
/// Environment variable naming another cache file (tests; a read-only install folder).
pub const CATALOG_ENV: &str = "DTX_PROVIDER_CATALOG";
/// First line of the cache file.
const MAGIC: &str = "dtx-provider-catalog";
const VERSION: u32 = 1;
/// A cache older than this is refreshed (on Windows) before use.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// One ETW provider and its named keywords.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderInfo {
    pub name: String,
    pub guid: Guid,
    /// (keyword name as the manifest gives it, mask), in mask order.
    pub keywords: Vec<(String, u64)>,
}

impl ProviderInfo {
    pub fn new(name: &str, guid: Guid) -> ProviderInfo {
        ProviderInfo {
            name: name.to_string(),
            guid,
            keywords: Vec::new(),
        }
    }

    /// Adds a keyword unless one with that mask or probe name is known already.
    pub fn add_keyword(&mut self, name: &str, mask: u64) {
        let probe = keyword_probe_name(name);
        if mask == 0
            || probe.is_empty()
            || self
                .keywords
                .iter()
                .any(|(n, m)| *m == mask || keyword_probe_name(n) == probe)
        {
            return;
        }
        self.keywords.push((name.to_string(), mask));
        self.keywords.sort_by_key(|k| k.1);
    }
}

/// The probe name of a keyword: lower case, a trailing `Keyword` dropped (the .NET runtime's
/// `GCKeyword` and TDH's localized `GC` both give `gc`), characters other than letters, digits,
/// `_`, `-` and `.` turned into `-`. Probe-name reserved words of the provider (`events`,
/// `capturestate`) get a `-keyword` suffix so that they stay distinct.
pub fn keyword_probe_name(name: &str) -> String {
    let lower = name.trim().to_ascii_lowercase();
    let base = match lower.strip_suffix("keyword") {
        Some(b) if !b.trim_end_matches(['_', '-']).is_empty() => b.trim_end_matches(['_', '-']),
        _ => lower.as_str(),
    };
    let mut s: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if matches!(s.as_str(), "events" | "capturestate") {
        s.push_str("-keyword");
    }
    s
}

/// The system's providers, as read from the cache file or from TDH.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderCatalog {
    pub providers: Vec<ProviderInfo>,
}

impl ProviderCatalog {
    /// A provider by name (case-insensitive) or GUID text.
    pub fn find(&self, name: &str) -> Option<&ProviderInfo> {
        match Guid::parse(name) {
            Some(g) => self.providers.iter().find(|p| p.guid == g),
            None => self
                .providers
                .iter()
                .find(|p| p.name.eq_ignore_ascii_case(name)),
        }
    }

    /// Up to `n` registered provider names close to `name` (a misspelling), closest first: by
    /// edit distance (case-insensitive), within a fifth of the name's length; a provider whose
    /// name contains `name` (`dns-client` for Microsoft-Windows-DNS-Client) counts as close.
    pub fn close_names(&self, name: &str, n: usize) -> Vec<&str> {
        let want = name.to_ascii_lowercase();
        let most = (want.chars().count() / 5).max(2);
        let mut scored: Vec<(usize, &str)> = self
            .providers
            .iter()
            .filter_map(|p| {
                let lower = p.name.to_ascii_lowercase();
                let d = edit_distance(&want, &lower);
                let d = if want.len() >= 4 && lower.contains(&want) {
                    d.min(1)
                } else {
                    d
                };
                (d <= most).then_some((d, p.name.as_str()))
            })
            .collect();
        scored.sort_unstable();
        scored.dedup_by(|a, b| a.1.eq_ignore_ascii_case(b.1));
        scored.into_iter().take(n).map(|(_, s)| s).collect()
    }

    /// The cache file's text.
    pub fn to_text(&self) -> String {
        let mut s = format!("{MAGIC} {VERSION}\n");
        for p in &self.providers {
            s.push_str(&format!("{} {}\n", p.guid, one_line(&p.name)));
            for (k, m) in &p.keywords {
                s.push_str(&format!(" 0x{m:016x} {}\n", one_line(k)));
            }
        }
        s
    }

    /// Reads a cache file's text; the error names the line that is wrong.
    pub fn from_text(text: &str) -> Result<ProviderCatalog, String> {
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, l)) if l.trim_end() == format!("{MAGIC} {VERSION}") => {}
            Some((_, l)) if l.starts_with(MAGIC) => {
                return Err(format!(
                    "unsupported provider catalog version \"{}\" (dtx reads version {VERSION})",
                    l.trim_end()
                ))
            }
            _ => return Err("not a dtx provider catalog (no version line)".into()),
        }
        let mut providers: Vec<ProviderInfo> = Vec::new();
        for (i, line) in lines {
            let n = i + 1;
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() {
                continue;
            }
            if let Some(kw) = line.strip_prefix(' ') {
                let (mask, name) = kw
                    .trim_start()
                    .split_once(' ')
                    .ok_or_else(|| format!("line {n}: keyword line without a name"))?;
                let mask = mask
                    .strip_prefix("0x")
                    .and_then(|m| u64::from_str_radix(m, 16).ok())
                    .ok_or_else(|| format!("line {n}: bad keyword mask \"{mask}\""))?;
                let p = providers
                    .last_mut()
                    .ok_or_else(|| format!("line {n}: keyword before any provider"))?;
                p.keywords.push((name.to_string(), mask));
            } else {
                let (guid, name) = line
                    .split_once(' ')
                    .ok_or_else(|| format!("line {n}: provider line without a name"))?;
                let guid =
                    Guid::parse(guid).ok_or_else(|| format!("line {n}: bad GUID \"{guid}\""))?;
                providers.push(ProviderInfo::new(name, guid));
            }
        }
        Ok(ProviderCatalog { providers })
    }

    /// Reads a cache file.
    pub fn load(path: &Path) -> Result<ProviderCatalog, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read provider catalog {}: {e}", path.display()))?;
        ProviderCatalog::from_text(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Writes a cache file atomically (a temporary file renamed over it).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, self.to_text())?;
        std::fs::rename(&tmp, path)
    }
}

/// The keywords of a PROVIDER_FIELD_INFOARRAY as TdhEnumerateProviderFieldInformation returns
/// it: NumberOfElements u32, FieldType u32, then PROVIDER_FIELD_INFO { NameOffset u32,
/// DescriptionOffset u32, Value u64 } each, the names UTF-16 at their offsets in the buffer.
pub fn parse_field_info_array(bytes: &[u8]) -> Vec<(String, u64)> {
    let u32_at = |o: usize| {
        bytes
            .get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let count = u32_at(0).unwrap_or(0) as usize;
    let mut out = Vec::new();
    for i in 0..count.min(64) {
        let at = 8 + i * 16;
        let (Some(name_off), Some(v)) = (u32_at(at), bytes.get(at + 8..at + 16)) else {
            break;
        };
        let value = u64::from_le_bytes(v.try_into().unwrap_or([0; 8]));
        let name =
            crate::etw::decode::value::utf16_string(bytes.get(name_off as usize..).unwrap_or(&[]));
        if !name.is_empty() {
            out.push((name, value));
        }
    }
    out
}

/// Names are written on one line: line breaks become spaces.
fn one_line(s: &str) -> String {
    s.replace(['\r', '\n'], " ")
}

/// Where the cache lives: `$DTX_PROVIDER_CATALOG`, else next to the executable.
pub fn catalog_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(CATALOG_ENV) {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.join(CATALOG_FILE))
}

/// Whether a cache file written at `modified` is stale at `now`.
pub fn is_stale(modified: SystemTime, now: SystemTime) -> bool {
    now.duration_since(modified)
        .map(|age| age > MAX_AGE)
        .unwrap_or(false)
}

/// The cache, if there is one and it can be read (an unreadable one is ignored: on Windows it is
/// rewritten from TDH; elsewhere there is nothing to list). With `fresh_only`, a stale cache
/// counts as none.
pub fn load_cached(fresh_only: bool) -> Option<ProviderCatalog> {
    let path = catalog_path()?;
    let meta = std::fs::metadata(&path).ok()?;
    if fresh_only {
        let modified = meta.modified().ok()?;
        if is_stale(modified, SystemTime::now()) {
            return None;
        }
    }
    ProviderCatalog::load(&path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyword_names_become_probe_names() {
        assert_eq!(keyword_probe_name("GCKeyword"), "gc");
        assert_eq!(keyword_probe_name("GC"), "gc");
        assert_eq!(keyword_probe_name("JitKeyword"), "jit");
        assert_eq!(keyword_probe_name("Keyword"), "keyword");
        assert_eq!(
            keyword_probe_name("WINEVENT_KEYWORD_PROCESS"),
            "winevent_keyword_process"
        );
        assert_eq!(keyword_probe_name("Thread Pool"), "thread-pool");
        assert_eq!(keyword_probe_name("Events"), "events-keyword");
    }

    #[test]
    fn text_round_trip_and_errors() {
        let mut p = ProviderInfo::new(
            "Microsoft-Windows-DotNETRuntime",
            Guid::parse("e13c0d23-ccbc-4e12-931b-d9cc2eee27e4").unwrap(),
        );
        p.add_keyword("JitKeyword", 0x10);
        p.add_keyword("GCKeyword", 0x1);
        p.add_keyword("GC", 0x1); // same mask: kept once
        let c = ProviderCatalog {
            providers: vec![p, ProviderInfo::new("Empty Provider", Guid::default())],
        };
        let text = c.to_text();
        assert!(text.starts_with("dtx-provider-catalog 1\n"));
        assert!(text.contains(" 0x0000000000000001 GCKeyword\n"));
        let back = ProviderCatalog::from_text(&text).unwrap();
        assert_eq!(back, c);
        assert_eq!(
            back.find("microsoft-windows-dotnetruntime")
                .unwrap()
                .keywords
                .len(),
            2
        );
        assert!(back
            .find("{e13c0d23-ccbc-4e12-931b-d9cc2eee27e4}")
            .is_some());
        assert!(ProviderCatalog::from_text("dtx-provider-catalog 7\n")
            .unwrap_err()
            .contains("version"));
        assert!(ProviderCatalog::from_text("hello\n").is_err());
        let bad = "dtx-provider-catalog 1\nnot-a-guid Name\n";
        assert!(ProviderCatalog::from_text(bad)
            .unwrap_err()
            .contains("line 2"));
        let bad = "dtx-provider-catalog 1\n 0x1 Orphan\n";
        assert!(ProviderCatalog::from_text(bad)
            .unwrap_err()
            .contains("line 2"));
    }

    #[test]
    fn provider_field_info_array() {
        // a count of 3 with two real entries: the third reads name text as its offset, which
        // points past the buffer, and is skipped
        let mut b = Vec::new();
        b.extend(3u32.to_le_bytes());
        b.extend(0u32.to_le_bytes()); // EventKeywordInformation
        let names_at = 8 + 2 * 16;
        let gc: Vec<u8> = "GCKeyword\0"
            .encode_utf16()
            .flat_map(|u| u.to_le_bytes())
            .collect();
        for (off, v) in [(names_at, 0x1u64), (names_at + gc.len(), 0x10)] {
            b.extend((off as u32).to_le_bytes());
            b.extend(0u32.to_le_bytes());
            b.extend(v.to_le_bytes());
        }
        b.extend(&gc);
        b.extend("JitKeyword\0".encode_utf16().flat_map(|u| u.to_le_bytes()));
        assert_eq!(
            parse_field_info_array(&b),
            [
                ("GCKeyword".to_string(), 0x1),
                ("JitKeyword".to_string(), 0x10)
            ]
        );
        assert!(parse_field_info_array(&[]).is_empty());
    }

    #[test]
    fn staleness() {
        let now = SystemTime::now();
        assert!(!is_stale(now - Duration::from_secs(3600), now));
        assert!(is_stale(now - Duration::from_secs(2 * 24 * 3600), now));
    }
}

/// The Levenshtein distance of two strings (insertions, deletions, substitutions of chars).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod close_name_tests {
    use super::*;

    #[test]
    fn live_fix_misspelled_provider_names_find_close_registered_ones() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
        let catalog = ProviderCatalog {
            providers: [
                "Microsoft-Windows-DNS-Client",
                "Microsoft-Windows-Kernel-Process",
                "Microsoft-Windows-Kernel-File",
                "Microsoft-Windows-TCPIP",
            ]
            .iter()
            .map(|n| ProviderInfo::new(n, Guid::default()))
            .collect(),
        };
        // one letter off, case apart
        assert_eq!(
            catalog.close_names("microsoft-windows-dns-clinet", 3),
            vec!["Microsoft-Windows-DNS-Client"]
        );
        assert_eq!(
            catalog.close_names("Microsoft-Windows-Kernel-Proces", 3)[0],
            "Microsoft-Windows-Kernel-Process"
        );
        // a part of the name
        assert_eq!(
            catalog.close_names("dns-client", 3),
            vec!["Microsoft-Windows-DNS-Client"]
        );
        // nothing close: nothing listed
        assert!(catalog.close_names("contoso-widgets", 3).is_empty());
    }
}
