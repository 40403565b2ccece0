//! Instrumentation manifests (`.man` XML): providers, templates and events turned into schemas.
//! A small XML tokenizer covers what manifests use (elements, attributes, comments, CDATA,
//! processing instructions, the five predefined entities).

use std::borrow::Cow;
use std::collections::HashMap;

use super::schema::{Count, Len, Prop, Schema, SchemaSource};
use super::tdh::{tdh_type, SchemaKey};
use crate::etw::record::Guid;

/// One XML element start or end.
#[derive(Debug)]
enum Tok<'x> {
    Open(&'x str, Vec<(&'x str, Cow<'x, str>)>, bool),
    Close(&'x str),
}

fn unescape(s: &str) -> Cow<'_, str> {
    if !s.contains('&') {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

fn local(name: &str) -> &str {
    name.rsplit(':').next().unwrap_or(name)
}

fn tokens(x: &str) -> Vec<Tok<'_>> {
    let mut out = Vec::new();
    let mut i = 0;
    let b = x.as_bytes();
    while let Some(lt) = x[i..].find('<') {
        i += lt;
        let rest = &x[i..];
        if rest.starts_with("<!--") {
            i += rest.find("-->").map_or(rest.len(), |n| n + 3);
            continue;
        }
        if rest.starts_with("<![CDATA[") {
            i += rest.find("]]>").map_or(rest.len(), |n| n + 3);
            continue;
        }
        if rest.starts_with("<?") || rest.starts_with("<!") {
            i += rest.find('>').map_or(rest.len(), |n| n + 1);
            continue;
        }
        // Find the tag end, honouring quotes.
        let mut j = i + 1;
        let mut quote = 0u8;
        while j < b.len() {
            let c = b[j];
            if quote != 0 {
                if c == quote {
                    quote = 0;
                }
            } else if c == b'"' || c == b'\'' {
                quote = c;
            } else if c == b'>' {
                break;
            }
            j += 1;
        }
        let inner = &x[i + 1..j.min(x.len())];
        i = (j + 1).min(x.len());
        if let Some(name) = inner.strip_prefix('/') {
            out.push(Tok::Close(local(name.trim())));
            continue;
        }
        let self_close = inner.ends_with('/');
        let inner = inner.trim_end_matches('/');
        let name_end = inner
            .find(|c: char| c.is_whitespace())
            .unwrap_or(inner.len());
        let name = local(&inner[..name_end]);
        let mut attrs = Vec::new();
        let mut a = &inner[name_end..];
        while let Some(eq) = a.find('=') {
            let key = a[..eq].trim();
            let after = a[eq + 1..].trim_start();
            let Some(q) = after.chars().next() else { break };
            if q != '"' && q != '\'' {
                break;
            }
            let Some(end) = after[1..].find(q) else { break };
            attrs.push((local(key), unescape(&after[1..1 + end])));
            a = &after[end + 2..];
        }
        out.push(Tok::Open(name, attrs, self_close));
    }
    out
}

fn attr<'a>(attrs: &'a [(&str, Cow<'_, str>)], k: &str) -> Option<&'a str> {
    attrs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.as_ref())
}

fn in_type_code(s: &str) -> u16 {
    match s.rsplit(':').next().unwrap_or(s) {
        "UnicodeString" => 1,
        "AnsiString" => 2,
        "Int8" => 3,
        "UInt8" => 4,
        "Int16" => 5,
        "UInt16" => 6,
        "Int32" => 7,
        "UInt32" => 8,
        "Int64" => 9,
        "UInt64" => 10,
        "Float" => 11,
        "Double" => 12,
        "Boolean" => 13,
        "Binary" => 14,
        "GUID" => 15,
        "Pointer" => 16,
        "FILETIME" => 17,
        "SYSTEMTIME" => 18,
        "SID" => 19,
        "HexInt32" => 20,
        "HexInt64" => 21,
        "CountedUnicodeString" => 22,
        "CountedAnsiString" => 23,
        _ => 14,
    }
}

fn out_type_code(s: &str) -> u16 {
    match s.rsplit(':').next().unwrap_or(s) {
        "Port" => 22,
        "IPv4" => 23,
        "IPv6" => 24,
        "SocketAddress" => 25,
        _ => 0,
    }
}

/// Template under construction: properties plus a name → index table.
#[derive(Default)]
struct Tmpl {
    props: Vec<Prop<String>>,
    top: Vec<usize>,
}

/// The providers a manifest defines, with their named keywords (`<keyword name mask>`).
pub fn parse_manifest_providers(xml: &str) -> Vec<crate::etw::catalog::ProviderInfo> {
    let mut out: Vec<crate::etw::catalog::ProviderInfo> = Vec::new();
    for t in tokens(xml) {
        match t {
            Tok::Open("provider", attrs, _) => {
                if let Some(guid) = attr(&attrs, "guid").and_then(Guid::parse) {
                    out.push(crate::etw::catalog::ProviderInfo::new(
                        attr(&attrs, "name").unwrap_or(""),
                        guid,
                    ));
                }
            }
            Tok::Open("keyword", attrs, _) => {
                let mask = attr(&attrs, "mask").and_then(|m| {
                    let m = m.trim();
                    match m.strip_prefix("0x").or_else(|| m.strip_prefix("0X")) {
                        Some(h) => u64::from_str_radix(h, 16).ok(),
                        None => m.parse().ok(),
                    }
                });
                if let (Some(p), Some(name), Some(mask)) =
                    (out.last_mut(), attr(&attrs, "name"), mask)
                {
                    p.add_keyword(name, mask);
                }
            }
            _ => {}
        }
    }
    out
}

/// Parses a manifest; returns the schemas it defines, keyed by (provider, event id, version).
pub fn parse_manifest(xml: &str) -> Vec<(SchemaKey, Schema<String>)> {
    let toks = tokens(xml);
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if let Tok::Open("provider", attrs, false) = &toks[i] {
            let guid = attr(attrs, "guid").and_then(Guid::parse);
            let pname = attr(attrs, "name").unwrap_or("").to_string();
            let start = i;
            let mut depth = 0usize;
            let mut end = toks.len();
            for (k, t) in toks.iter().enumerate().skip(i) {
                match t {
                    Tok::Open("provider", _, false) => depth += 1,
                    Tok::Close("provider") => {
                        depth -= 1;
                        if depth == 0 {
                            end = k;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            if let Some(guid) = guid {
                provider(&toks[start..end], guid, &pname, &mut out);
            }
            i = end;
        }
        i += 1;
    }
    out
}

fn provider(toks: &[Tok<'_>], guid: Guid, pname: &str, out: &mut Vec<(SchemaKey, Schema<String>)>) {
    let mut templates: HashMap<String, Tmpl> = HashMap::new();
    let mut tasks: HashMap<String, String> = HashMap::new();
    let mut cur: Option<(String, Tmpl)> = None;
    let mut stack: Vec<usize> = Vec::new(); // open struct prop indices
    let mut names: HashMap<String, usize> = HashMap::new();
    for t in toks {
        match t {
            Tok::Open("template", a, sc) => {
                names.clear();
                stack.clear();
                let tid = attr(a, "tid").unwrap_or("").to_string();
                if *sc {
                    templates.insert(tid, Tmpl::default());
                } else {
                    cur = Some((tid, Tmpl::default()));
                }
            }
            Tok::Close("template") => {
                if let Some((tid, tm)) = cur.take() {
                    templates.insert(tid, tm);
                }
            }
            Tok::Open(kind @ ("data" | "struct"), a, sc) => {
                let Some((_, tm)) = cur.as_mut() else {
                    continue;
                };
                let name = attr(a, "name").unwrap_or("").to_string();
                let by_ref = |v: Option<&str>| -> Option<Result<u16, usize>> {
                    let v = v?;
                    match v.parse::<u16>() {
                        Ok(n) => Some(Ok(n)),
                        Err(_) => names.get(v).map(|i| Err(*i)),
                    }
                };
                let count = match by_ref(attr(a, "count")) {
                    Some(Ok(n)) => Count::Fixed(n),
                    Some(Err(i)) => Count::Field(i),
                    None => Count::One,
                };
                let len = match by_ref(attr(a, "length")) {
                    Some(Ok(n)) => Len::Fixed(n),
                    Some(Err(i)) => Len::Field(i),
                    None => Len::None,
                };
                let ty = if *kind == "struct" {
                    super::value::FieldType::Struct
                } else {
                    tdh_type(
                        in_type_code(attr(a, "inType").unwrap_or("")),
                        out_type_code(attr(a, "outType").unwrap_or("")),
                        len != Len::None,
                    )
                };
                let idx = tm.props.len();
                tm.props.push(Prop {
                    name: name.clone(),
                    ty,
                    count,
                    len,
                    members: Vec::new(),
                    map: attr(a, "map").map(str::to_string),
                });
                names.insert(name, idx);
                match stack.last() {
                    Some(&s) => tm.props[s].members.push(idx),
                    None => tm.top.push(idx),
                }
                if *kind == "struct" && !sc {
                    stack.push(idx);
                }
            }
            Tok::Close("struct") => {
                stack.pop();
            }
            Tok::Open("task", a, _) => {
                if let (Some(n), Some(v)) = (attr(a, "name"), attr(a, "value")) {
                    tasks.insert(n.to_string(), v.to_string());
                }
            }
            _ => {}
        }
    }
    for t in toks {
        let Tok::Open("event", a, _) = t else {
            continue;
        };
        let Some(id) = attr(a, "value").and_then(|v| v.parse::<u16>().ok()) else {
            continue;
        };
        let version = attr(a, "version")
            .and_then(|v| v.parse::<u8>().ok())
            .unwrap_or(0);
        let name = attr(a, "symbol")
            .or_else(|| attr(a, "name"))
            .map(str::to_string)
            .or_else(|| {
                let task = attr(a, "task")?;
                Some(match attr(a, "opcode") {
                    Some(op) => format!("{task}/{}", op.rsplit(':').next().unwrap_or(op)),
                    None => task.to_string(),
                })
            })
            .unwrap_or_else(|| format!("Event{id}"));
        let (props, top) = match attr(a, "template").and_then(|t| templates.get(t)) {
            Some(tm) => (tm.props.clone(), tm.top.clone()),
            None => (Vec::new(), Vec::new()),
        };
        let schema = Schema {
            provider: pname.to_string(),
            name,
            props,
            top,
            source: SchemaSource::Manifest,
        };
        out.push(((guid, id, version), schema));
    }
}
