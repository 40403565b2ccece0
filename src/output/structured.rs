//! Structured output (`-x oformat=json|xml`): what each record of a program becomes as a
//! [`Json`] value, in the shape FreeBSD's dtrace gives its libxo output (dtrace(1), section
//! STRUCTURED OUTPUT, of freebsd-src `cddl/contrib/opensolaris/cmd/dtrace/dtrace.1`): a top
//! object `dtrace` holding a list `probes`, each firing an object with `timestamp`, `cpu`, `id`,
//! `provider`, `module`, `function`, `name` and an `output` list; `trace()` gives
//! `{"value": ...}`, `printf()` a `{"message": ...}` followed by one value per argument,
//! aggregations `{"aggregation-name": ..., "aggregation-data": [{"keys": [...], "count": ...}]}`
//! with `buckets` of `value`/`count` for the quantizations, stacks `stack-frames` /
//! `ustack-frames` of `symbol`/`module`/`name`/`offset`, drops a pseudo-probe
//! `dtrace:INTERNAL:INTERNAL:DROP`.
//!
//! Where FreeBSD defines nothing dtx adds members, never renames FreeBSD's: every aggregation
//! names its `function` and parameters, every key its `type`, every row keeps the raw state
//! an aggregation merges by (`avg`'s sum and count, ...), every bucket its `index` — enough
//! for a saved aggregation to be read back and merged (docs/output-formats.md).

use super::json::Json;
use crate::agg::{AggValue, SymbolResolver};
use crate::ir::value::Datum;

/// The output format chosen with `-x oformat=...`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OFormat {
    /// dtrace's text (the default).
    #[default]
    Text,
    /// One JSON document; `pretty` indents it.
    Json { pretty: bool },
    /// One XML document; `pretty` indents it.
    Xml { pretty: bool },
    /// Stack aggregations as folded stacks (`frame;frame count`), for flame graph tools.
    Folded,
}

impl OFormat {
    /// The words `oformat` accepts.
    pub const WORDS: &'static [&'static str] = crate::lang::options::OFORMAT_WORDS;

    /// The format an `oformat` value names; `None` for a word dtx does not know.
    pub fn parse(word: &str) -> Option<OFormat> {
        Some(match word {
            "text" | "none" => OFormat::Text,
            "json" => OFormat::Json { pretty: false },
            "json,pretty" => OFormat::Json { pretty: true },
            "xml" => OFormat::Xml { pretty: false },
            "xml,pretty" => OFormat::Xml { pretty: true },
            "folded" => OFormat::Folded,
            _ => return None,
        })
    }

    /// Whether records are written as a JSON or XML document.
    pub fn is_structured(self) -> bool {
        matches!(self, OFormat::Json { .. } | OFormat::Xml { .. })
    }
}

/// The text of a string record: its bytes up to the first NUL, as UTF-8 (invalid sequences
/// replaced).
pub fn record_text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// An integer as JSON: unsigned values stay exact above `i64::MAX`.
pub fn int_json(value: i64, size: u8, signed: bool) -> Json {
    let bits = u32::from(size.clamp(1, 8)) * 8;
    if signed {
        let shift = 64 - bits;
        Json::Int((value << shift) >> shift)
    } else if bits == 64 {
        Json::UInt(value as u64)
    } else {
        Json::UInt(value as u64 & ((1u64 << bits) - 1))
    }
}

/// Bytes as lowercase hex digits, two per byte.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// One stack frame from its text (`module`name+0xoff`, `module`0xaddr` or `0xaddr`): FreeBSD's
/// `symbol`, `module`, `name`, `offset`, and the frame's `address`.
pub fn frame_json(addr: u64, text: &str) -> Json {
    let mut m = vec![("symbol".to_string(), Json::str(text))];
    if let Some((module, rest)) = text.split_once('`') {
        m.push(("module".into(), Json::str(module)));
        if !rest.starts_with("0x") {
            let (name, off) = match rest.rsplit_once("+0x") {
                Some((n, o)) => (n, format!("0x{o}")),
                None => (rest, "0x0".to_string()),
            };
            m.push(("name".into(), Json::str(name)));
            m.push(("offset".into(), Json::str(off)));
        }
    }
    m.push(("address".into(), Json::str(format!("0x{addr:x}"))));
    Json::Object(m)
}

/// A `stack()` or `ustack()`: `{"stack-frames": [...]}` or `{"ustack-frames": [...]}`, innermost
/// frame first; a user stack also names its process.
pub fn stack_json(
    frames: &[u64],
    user: bool,
    pid: u32,
    epoch: u32,
    syms: &dyn SymbolResolver,
) -> Json {
    let list = frames
        .iter()
        .take_while(|&&f| f != 0)
        .map(|&f| {
            let text = if user {
                syms.user_at(pid, epoch, f)
            } else {
                syms.kernel_at(epoch, f)
            };
            frame_json(f, &text)
        })
        .collect();
    let mut m = vec![(
        if user {
            "ustack-frames"
        } else {
            "stack-frames"
        }
        .to_string(),
        Json::Array(list),
    )];
    if user {
        m.push(("pid".into(), Json::UInt(u64::from(pid))));
    }
    Json::Object(m)
}

/// One aggregation key component: `{"type": ..., "value": ...}` (a stack key carries its
/// frames instead of a value).
pub fn key_json(k: &Datum, syms: &dyn SymbolResolver) -> Json {
    let typed = |ty: &str, value: Json| Json::object([("type", Json::str(ty)), ("value", value)]);
    match k {
        Datum::Int {
            value,
            size,
            signed,
        } => Json::object([
            ("type", Json::str(if *signed { "int" } else { "uint" })),
            ("size", Json::UInt(u64::from(*size))),
            ("value", int_json(*value, *size, *signed)),
        ]),
        Datum::Str(s) => typed("string", Json::str(record_text(s))),
        Datum::Bytes(b) => typed("bytes", Json::str(hex(b))),
        Datum::Stack {
            frames,
            user,
            pid,
            epoch,
        } => {
            let mut j = stack_json(frames, *user, *pid, *epoch, syms);
            j.push_member("type", Json::str(if *user { "ustack" } else { "stack" }));
            j
        }
        Datum::Sym(a) => Json::object([
            ("type", Json::str("sym")),
            ("value", Json::str(syms.kernel_func(*a))),
            ("address", Json::str(format!("0x{a:x}"))),
        ]),
        Datum::Mod(a) => Json::object([
            ("type", Json::str("mod")),
            ("value", Json::str(syms.kmod(*a))),
            ("address", Json::str(format!("0x{a:x}"))),
        ]),
        Datum::Usym { addr, pid } => user_key("usym", syms.user_func(*pid, *addr), *addr, *pid),
        Datum::Umod { addr, pid } => user_key("umod", syms.umod(*pid, *addr), *addr, *pid),
        Datum::Uaddr { addr, pid } => user_key("uaddr", syms.user(*pid, *addr), *addr, *pid),
    }
}

fn user_key(ty: &str, text: String, addr: u64, pid: u32) -> Json {
    Json::object([
        ("type", Json::str(ty)),
        ("value", Json::str(text)),
        ("address", Json::str(format!("0x{addr:x}"))),
        ("pid", Json::UInt(u64::from(pid))),
    ])
}

/// The aggregating function's name.
pub fn func_name(v: &AggValue) -> &'static str {
    crate::agg::snapshot::AggView::func_of(v)
}

/// The function's parameters (`lquantize`'s base, step and levels, `llquantize`'s factor, low,
/// high and steps), as an object; empty for the others.
pub fn func_params(v: &AggValue) -> Json {
    match v {
        AggValue::Lquantize {
            base, step, levels, ..
        } => Json::object([
            ("base", Json::Int(i64::from(*base))),
            ("step", Json::UInt(u64::from(*step))),
            ("levels", Json::UInt(u64::from(*levels))),
        ]),
        AggValue::Llquantize {
            factor,
            low,
            high,
            nsteps,
            ..
        } => Json::object([
            ("factor", Json::UInt(u64::from(*factor))),
            ("low", Json::UInt(u64::from(*low))),
            ("high", Json::UInt(u64::from(*high))),
            ("nsteps", Json::UInt(u64::from(*nsteps))),
        ]),
        _ => Json::Object(vec![]),
    }
}

/// One bucket: its lower bound (`value`, as dtrace's text shows it), `count` and `index`;
/// the first and last bucket of `lquantize`/`llquantize` are marked `underflow`/`overflow`
/// (their `value` is then the bound itself: below it, at or above it).
fn bucket(index: usize, value: i64, count: i64, edge: Option<&str>) -> Json {
    let mut m = vec![
        ("value".to_string(), Json::Int(value)),
        ("count".to_string(), Json::Int(count)),
        ("index".to_string(), Json::UInt(index as u64)),
    ];
    if let Some(e) = edge {
        m.push((e.to_string(), Json::Bool(true)));
    }
    Json::Object(m)
}

/// The buckets dtrace's text shows for a quantization (first to last non-zero bucket with a
/// zero bucket of context each side).
pub fn buckets_json(v: &AggValue) -> Vec<Json> {
    use crate::agg::quantize::{bucket_value, llquantize_labels, ZERO_BUCKET};
    use crate::output::printa::graph::range;
    match v {
        AggValue::Quantize(d) => {
            let (lo, hi) = range(d, (ZERO_BUCKET - 1, ZERO_BUCKET + 1));
            (lo..=hi.min(d.len().saturating_sub(1)))
                .filter(|_| !d.is_empty())
                .map(|i| bucket(i, bucket_value(i), d[i], None))
                .collect()
        }
        AggValue::Lquantize {
            base,
            step,
            levels,
            buckets: d,
        } => {
            if d.is_empty() {
                return Vec::new();
            }
            let (lo, hi) = range(d, (0, 2));
            let last = *levels as usize + 1;
            (lo..=hi)
                .map(|i| {
                    let step = i64::from(*step);
                    let base = i64::from(*base);
                    if i == 0 {
                        bucket(i, base, d[i], Some("underflow"))
                    } else if i == last {
                        bucket(i, base + step * i64::from(*levels), d[i], Some("overflow"))
                    } else {
                        bucket(i, base + step * (i as i64 - 1), d[i], None)
                    }
                })
                .collect()
        }
        AggValue::Llquantize {
            factor,
            low,
            high,
            nsteps,
            buckets: d,
        } => {
            let labels = llquantize_labels(*factor, *low, *high, *nsteps);
            let n = d.len().min(labels.len());
            if n < 2 {
                return Vec::new();
            }
            let (lo, hi) = range(&d[..n], (0, 1));
            (lo..=hi)
                .map(|i| {
                    let edge = if i == 0 {
                        Some("underflow")
                    } else if i == n - 1 {
                        Some("overflow")
                    } else {
                        None
                    };
                    bucket(i, labels[i], d[i], edge)
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// The value members of one aggregation row: FreeBSD's `"<function>": value` for the scalar
/// functions (`avg` and `stddev` as dtrace prints them) with the raw state they merge by, or
/// `buckets` for the quantizations.
pub fn value_members(v: &AggValue) -> Vec<(String, Json)> {
    let f = func_name(v).to_string();
    match v {
        AggValue::Count(c) => vec![(f, Json::UInt(*c))],
        AggValue::Sum(x) | AggValue::Min(x) | AggValue::Max(x) => vec![(f, Json::Int(*x))],
        AggValue::Avg { sum, count } => vec![
            (f, Json::Int(v.scalar())),
            (
                "raw".into(),
                Json::object([("count", Json::UInt(*count)), ("sum", Json::Int(*sum))]),
            ),
        ],
        AggValue::Stddev { count, sum, sum_sq } => vec![
            (f, Json::Int(v.scalar())),
            (
                "raw".into(),
                Json::object([
                    ("count", Json::UInt(*count)),
                    ("sum", Json::Int(*sum)),
                    // 128 bits: a decimal string, exact in every JSON reader
                    ("sum-of-squares", Json::str(sum_sq.to_string())),
                ]),
            ),
        ],
        _ => vec![
            ("buckets".into(), Json::Array(buckets_json(v))),
            ("total".into(), Json::Int(v.scalar())),
        ],
    }
}

/// One aggregation: `aggregation-name` (without `@`; `_` for the anonymous one), its
/// `function` and `parameters`, and `aggregation-data` with one object per row in the
/// order given.
pub fn aggregation_json(
    name: &str,
    rows: &[(Vec<Datum>, AggValue)],
    syms: &dyn SymbolResolver,
) -> Json {
    let name = name.strip_prefix('@').unwrap_or(name);
    let data = rows
        .iter()
        .map(|(keys, value)| {
            let mut m = vec![(
                "keys".to_string(),
                Json::Array(keys.iter().map(|k| key_json(k, syms)).collect()),
            )];
            m.extend(value_members(value));
            Json::Object(m)
        })
        .collect();
    let mut m = vec![("aggregation-name".to_string(), Json::str(name))];
    if let Some((_, v)) = rows.first() {
        m.push(("function".into(), Json::str(func_name(v))));
        m.push(("parameters".into(), func_params(v)));
    }
    m.push(("aggregation-data".into(), Json::Array(data)));
    Json::Object(m)
}

/// The probe part of a firing: FreeBSD's `timestamp`, `cpu`, `id` and the probe's
/// description, then the `output` list.
pub fn probe_json(timestamp: u64, cpu: i64, id: i64, desc: [&str; 4], output: Vec<Json>) -> Json {
    Json::object([
        ("timestamp", Json::UInt(timestamp)),
        ("cpu", Json::Int(cpu)),
        ("id", Json::Int(id)),
        ("provider", Json::str(desc[0])),
        ("module", Json::str(desc[1])),
        ("function", Json::str(desc[2])),
        ("name", Json::str(desc[3])),
        ("output", Json::Array(output)),
    ])
}

/// A pseudo-probe of dtx's own (`dtrace:INTERNAL:INTERNAL:<name>`, cpu and id -1), as FreeBSD
/// reports drops: `DROP` or `ERROR`, with the members given.
pub fn internal_json(timestamp: u64, name: &str, members: Vec<(String, Json)>) -> Json {
    let mut m = vec![
        ("cpu".to_string(), Json::Int(-1)),
        ("id".to_string(), Json::Int(-1)),
        ("provider".to_string(), Json::str("dtrace")),
        ("module".to_string(), Json::str("INTERNAL")),
        ("function".to_string(), Json::str("INTERNAL")),
        ("name".to_string(), Json::str(name)),
        ("timestamp".to_string(), Json::UInt(timestamp)),
    ];
    m.extend(members);
    Json::Object(m)
}

/// Nanoseconds since the Unix epoch now (FreeBSD stamps each object when it is written).
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agg::NoSymbols;

    #[test]
    fn frames_split_into_freebsd_members() {
        let f = frame_json(0x1010, "ntdll.dll`RtlUserThreadStart+0x21");
        assert_eq!(f.get("module"), Some(&Json::str("ntdll.dll")));
        assert_eq!(f.get("name"), Some(&Json::str("RtlUserThreadStart")));
        assert_eq!(f.get("offset"), Some(&Json::str("0x21")));
        let bare = frame_json(0x1010, "0x1010");
        assert_eq!(bare.get("module"), None);
        assert_eq!(bare.get("address"), Some(&Json::str("0x1010")));
    }

    #[test]
    fn quantize_rows_carry_buckets_and_keys() {
        let mut d = vec![0i64; 127];
        d[64 + 5] = 3; // [32, 64)
        d[64 + 7] = 1; // [128, 256)
        let rows = vec![(
            vec![
                Datum::Str(b"bash".to_vec()),
                Datum::Int {
                    value: -1,
                    size: 4,
                    signed: false,
                },
            ],
            AggValue::Quantize(d),
        )];
        let j = aggregation_json("@lat", &rows, &NoSymbols);
        let text = j.to_json();
        assert!(text.starts_with(r#"{"aggregation-name":"lat","function":"quantize""#));
        assert!(text.contains(r#""keys":[{"type":"string","value":"bash"},{"type":"uint","size":4,"value":4294967295}]"#), "{text}");
        assert!(
            text.contains(r#"{"value":16,"count":0,"index":68},{"value":32,"count":3,"index":69}"#),
            "{text}"
        );
        assert!(
            text.contains(r#"{"value":256,"count":0,"index":72}],"total":4"#),
            "{text}"
        );
    }

    #[test]
    fn oformat_words_parse() {
        for w in OFormat::WORDS {
            assert!(OFormat::parse(w).is_some(), "{w}");
        }
        assert_eq!(OFormat::parse("yaml"), None);
        assert!(OFormat::parse("json").unwrap().is_structured());
        assert!(!OFormat::parse("folded").unwrap().is_structured());
    }
}
