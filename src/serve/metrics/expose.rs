//! The exposition: aggregation snapshots written as the Prometheus text format (0.0.4) or as
//! OpenMetrics 1.0.0, to their specs (prometheus.io "Exposition formats";
//! OpenObservability/OpenMetrics `specification/OpenMetrics.md`). A pure function of the
//! snapshot, the program's [`Config`] and dtx's own counters, so that it is tested without a
//! server.
//!
//! The choices the specs leave (docs/metrics.md says them to users):
//! - counters are written as integers, exactly; gauges that are means or scaled are floats;
//! - histogram `le` bounds are the buckets' inclusive upper bounds (a quantize() row of value 4
//!   counts 4..7, so its bound is 7), rendered as OpenMetrics' canonical numbers (Go's `%g`
//!   with `.0` appended) in both formats, so a series is the same whichever is negotiated;
//! - only the buckets from a metric's lowest to its highest non-empty one are written, with
//!   `+Inf` (OpenMetrics lets an exposer drop any bucket but `+Inf`); every series of a metric
//!   has the same bounds, so `sum by (le)` works;
//! - a quantization keeps no sum of its values, so no `_sum` is written; the text format gets
//!   `_count` (the `+Inf` bucket), OpenMetrics none (it allows `_count` only with a sum).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::config::{Config, Kind, MetricSpec};
use crate::agg::quantize::{bucket_value, llquantize_labels, NBUCKETS, ZERO_BUCKET};
use crate::agg::snapshot::{AggView, KeyCell};
use crate::agg::AggValue;
use crate::ir::AggFunc;

/// The two formats served at `/metrics`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text format, version 0.0.4.
    Text,
    /// OpenMetrics text, version 1.0.0.
    OpenMetrics,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The format an `Accept` header asks for, as the Prometheus client libraries negotiate
    /// it: OpenMetrics when the client accepts `application/openmetrics-text` (of version
    /// 1.0.0 or none given) with a weight at least that of the text format, else the text
    /// format (also for no header and for `*/*`).
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Text;
        };
        let mut om = None::<f64>;
        let mut text = None::<f64>;
        for part in accept.split(',') {
            let mut params = part.split(';').map(str::trim);
            let media = params.next().unwrap_or("").to_ascii_lowercase();
            let mut q = 1.0;
            let mut version = None;
            for p in params {
                if let Some((k, v)) = p.split_once('=') {
                    match k.trim().to_ascii_lowercase().as_str() {
                        "q" => q = v.trim().parse().unwrap_or(0.0),
                        "version" => version = Some(v.trim().to_string()),
                        _ => {}
                    }
                }
            }
            let best = |slot: &mut Option<f64>| *slot = Some(slot.map_or(q, |s: f64| s.max(q)));
            match media.as_str() {
                "application/openmetrics-text"
                    if version.as_deref().is_none_or(|v| v == "1.0.0") =>
                {
                    best(&mut om)
                }
                "text/plain" => best(&mut text),
                _ => {}
            }
        }
        match (om, text) {
            (Some(o), t) if o > 0.0 && o >= t.unwrap_or(0.0) => Format::OpenMetrics,
            _ => Format::Text,
        }
    }
}

/// dtx's own numbers at the scrape.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Own {
    pub events: u64,
    pub firings: u64,
    pub drops: u64,
    pub errors: u64,
    pub lost: u64,
    /// What the previous exposition cost, in seconds.
    pub last_scrape_seconds: f64,
}

/// Series dropped over the cardinality limit, per metric family, summed over the scrapes:
/// the exporter's state between scrapes (`dtx_metrics_dropped_series_total`).
pub type Dropped = BTreeMap<String, u64>;

/// Writes the exposition of `aggs` (a snapshot's aggregations) in `format`. Series over the
/// limit are counted into `dropped`.
pub fn encode(
    format: Format,
    config: &Config,
    aggs: &[AggView],
    own: &Own,
    dropped: &mut Dropped,
) -> String {
    let mut out = String::new();
    for spec in &config.metrics {
        let view = aggs.iter().find(|v| v.name == spec.agg);
        let mut series = series_of(spec, view, config.stacks);
        let over = limit(spec, &mut series, config.limit);
        if over > 0 {
            *dropped.entry(spec.family.clone()).or_default() += over as u64;
        }
        metric(&mut out, format, spec, &series);
    }
    own_metrics(&mut out, format, own, dropped);
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

/// A metric's series: label values (in label order) → value, merged where dropped stack
/// columns made rows alike.
type Series = BTreeMap<Vec<(String, String)>, AggValue>;

fn series_of(spec: &MetricSpec, view: Option<&AggView>, stacks: bool) -> Series {
    let mut out = Series::new();
    let Some(view) = view else {
        return out;
    };
    for row in &view.rows {
        let mut labels = Vec::with_capacity(row.keys.len());
        for (i, k) in row.keys.iter().enumerate() {
            let name = spec
                .labels
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("key{}", i + 1));
            match k {
                KeyCell::Text(t) => labels.push((name, t.clone())),
                // folded: outermost frame first, as flame graph tools read stacks
                KeyCell::Stack(frames) if stacks => {
                    let folded: Vec<&str> = frames.iter().rev().map(String::as_str).collect();
                    labels.push((name, folded.join(";")));
                }
                KeyCell::Stack(_) => {}
            }
        }
        match out.get_mut(&labels) {
            Some(v) => merge(v, &row.value),
            None => {
                out.insert(labels, row.value.clone());
            }
        }
    }
    out
}

/// Folds `b` into `a` (values of one aggregating function).
fn merge(a: &mut AggValue, b: &AggValue) {
    match (a, b) {
        (AggValue::Count(x), AggValue::Count(y)) => *x = x.wrapping_add(*y),
        (AggValue::Sum(x), AggValue::Sum(y)) => *x = x.wrapping_add(*y),
        (AggValue::Min(x), AggValue::Min(y)) => *x = (*x).min(*y),
        (AggValue::Max(x), AggValue::Max(y)) => *x = (*x).max(*y),
        (AggValue::Avg { sum, count }, AggValue::Avg { sum: s, count: c }) => {
            *sum = sum.wrapping_add(*s);
            *count = count.wrapping_add(*c);
        }
        (
            AggValue::Stddev { count, sum, sum_sq },
            AggValue::Stddev {
                count: c,
                sum: s,
                sum_sq: q,
            },
        ) => {
            *count = count.wrapping_add(*c);
            *sum = sum.wrapping_add(*s);
            *sum_sq = sum_sq.wrapping_add(*q);
        }
        (AggValue::Quantize(x), AggValue::Quantize(y))
        | (AggValue::Lquantize { buckets: x, .. }, AggValue::Lquantize { buckets: y, .. })
        | (AggValue::Llquantize { buckets: x, .. }, AggValue::Llquantize { buckets: y, .. }) => {
            for (a, b) in x.iter_mut().zip(y) {
                *a = a.wrapping_add(*b);
            }
        }
        _ => {}
    }
}

/// The buckets of a histogram value.
fn buckets(v: &AggValue) -> &[i64] {
    match v {
        AggValue::Quantize(b)
        | AggValue::Lquantize { buckets: b, .. }
        | AggValue::Llquantize { buckets: b, .. } => b,
        _ => &[],
    }
}

/// What the limit ranks series by: the value, or a histogram's count.
fn weight(v: &AggValue) -> f64 {
    match v {
        AggValue::Quantize(_) | AggValue::Lquantize { .. } | AggValue::Llquantize { .. } => {
            buckets(v).iter().map(|&b| b as f64).sum()
        }
        v => scalar(v).unwrap_or(0.0),
    }
}

/// Keeps the `limit` series of the largest values (ties: the first in label order) and
/// those series only; also drops histograms with a negative bucket (a `quantize(x, incr)`
/// with a negative increment), which no histogram may have. Returns how many were dropped.
fn limit(spec: &MetricSpec, series: &mut Series, limit: usize) -> usize {
    let before = series.len();
    if matches!(spec.kind, Kind::Histogram | Kind::GaugeHistogram) {
        series.retain(|_, v| buckets(v).iter().all(|&b| b >= 0));
    }
    if series.len() > limit {
        let mut ranked: Vec<(f64, Vec<(String, String)>)> =
            series.iter().map(|(k, v)| (weight(v), k.clone())).collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        for (_, k) in ranked.into_iter().skip(limit) {
            series.remove(&k);
        }
    }
    before - series.len()
}

/// A gauge's or counter's value as a float (`None`: no value, as the mean of nothing).
fn scalar(v: &AggValue) -> Option<f64> {
    Some(match *v {
        AggValue::Count(c) => c as f64,
        AggValue::Sum(s) | AggValue::Min(s) | AggValue::Max(s) => s as f64,
        AggValue::Avg { sum, count } => {
            if count == 0 {
                return None;
            }
            sum as f64 / count as f64
        }
        AggValue::Stddev { count, sum, sum_sq } => {
            if count == 0 {
                return None;
            }
            let n = count as f64;
            let mean = sum as f64 / n;
            (sum_sq as f64 / n - mean * mean).max(0.0).sqrt()
        }
        _ => return None,
    })
}

/// A sample's value: integers exactly, the rest as canonical floats.
fn value_text(spec: &MetricSpec, v: &AggValue) -> String {
    let int = match *v {
        AggValue::Count(c) => Some(c.to_string()),
        AggValue::Sum(s) | AggValue::Min(s) | AggValue::Max(s) if spec.unscaled() => {
            Some(s.to_string())
        }
        _ => None,
    };
    int.unwrap_or_else(|| match scalar(v) {
        Some(f) => canonical(spec.scaled(f)),
        None => "NaN".to_string(),
    })
}

/// The inclusive upper bound of every bucket of `func` (`None`: the last, `+Inf`).
fn upper_bounds(func: AggFunc) -> Vec<Option<i64>> {
    match func {
        AggFunc::Quantize => (0..NBUCKETS)
            .map(|i| match i {
                _ if i < ZERO_BUCKET => Some(bucket_value(i)),
                ZERO_BUCKET => Some(0),
                _ if i + 1 < NBUCKETS => Some(bucket_value(i + 1) - 1),
                _ => None,
            })
            .collect(),
        AggFunc::Lquantize { base, step, levels } => {
            let (base, step) = (i64::from(base), i64::from(step.max(1)));
            (0..=i64::from(levels) + 1)
                .map(|j| (j <= i64::from(levels)).then(|| base + j * step - 1))
                .collect()
        }
        AggFunc::Llquantize {
            factor,
            low,
            high,
            nsteps,
        } => {
            let labels = llquantize_labels(factor, low, high, nsteps);
            (0..labels.len())
                .map(|k| labels.get(k + 1).map(|next| next - 1))
                .collect()
        }
        _ => Vec::new(),
    }
}

fn metric(out: &mut String, format: Format, spec: &MetricSpec, series: &Series) {
    let f = &spec.family;
    let (sample, type_word) = match (spec.kind, format) {
        (Kind::Counter, Format::Text) => (format!("{f}_total"), "counter"),
        (Kind::Counter, Format::OpenMetrics) => (f.clone(), "counter"),
        (Kind::Gauge, _) => (f.clone(), "gauge"),
        (Kind::Histogram, _) | (Kind::GaugeHistogram, Format::Text) => (f.clone(), "histogram"),
        (Kind::GaugeHistogram, Format::OpenMetrics) => (f.clone(), "gaugehistogram"),
    };
    header(
        out,
        format,
        &sample,
        type_word,
        spec.unit.as_deref(),
        &spec.help,
    );
    match spec.kind {
        Kind::Counter | Kind::Gauge => {
            let name = match spec.kind {
                Kind::Counter => format!("{f}_total"),
                _ => f.clone(),
            };
            for (labels, v) in series {
                let _ = writeln!(
                    out,
                    "{name}{} {}",
                    label_text(labels, None),
                    value_text(spec, v)
                );
            }
        }
        Kind::Histogram | Kind::GaugeHistogram => {
            let bounds = upper_bounds(spec.func);
            // the bounds every series of the metric writes: lowest to highest non-empty
            let nonempty = |i: usize| {
                series
                    .values()
                    .any(|v| buckets(v).get(i).is_some_and(|&b| b != 0))
            };
            let lo = (0..bounds.len()).find(|&i| nonempty(i));
            let hi = (0..bounds.len()).rev().find(|&i| nonempty(i));
            for (labels, v) in series {
                let b = buckets(v);
                if let (Some(lo), Some(hi)) = (lo, hi) {
                    let mut total: i64 = b.iter().take(lo).sum();
                    for i in lo..=hi {
                        total += b.get(i).copied().unwrap_or(0);
                        let Some(Some(up)) = bounds.get(i) else {
                            continue;
                        };
                        let le = canonical(spec.scaled(*up as f64));
                        let _ =
                            writeln!(out, "{f}_bucket{} {total}", label_text(labels, Some(&le)));
                    }
                }
                let all: i64 = b.iter().sum();
                let _ = writeln!(out, "{f}_bucket{} {all}", label_text(labels, Some("+Inf")));
                if format == Format::Text {
                    let _ = writeln!(out, "{f}_count{} {all}", label_text(labels, None));
                }
            }
        }
    }
}

/// The metadata lines of a family: the text format's HELP and TYPE, or OpenMetrics' TYPE,
/// UNIT and HELP (in the order its spec recommends).
fn header(
    out: &mut String,
    format: Format,
    name: &str,
    type_word: &str,
    unit: Option<&str>,
    help: &str,
) {
    match format {
        Format::Text => {
            if !help.is_empty() {
                let _ = writeln!(out, "# HELP {name} {}", escape(help, false));
            }
            let _ = writeln!(out, "# TYPE {name} {type_word}");
        }
        Format::OpenMetrics => {
            let _ = writeln!(out, "# TYPE {name} {type_word}");
            if let Some(u) = unit {
                let _ = writeln!(out, "# UNIT {name} {u}");
            }
            if !help.is_empty() {
                let _ = writeln!(out, "# HELP {name} {}", escape(help, true));
            }
        }
    }
}

fn own_metrics(out: &mut String, format: Format, own: &Own, dropped: &Dropped) {
    let counters: [(&str, &str, u64); 5] = [
        (
            "dtx_metrics_events",
            "Events dtx has read from its sources.",
            own.events,
        ),
        (
            "dtx_metrics_firings",
            "Probe firings the D program has run.",
            own.firings,
        ),
        (
            "dtx_metrics_drops",
            "Data the D program dropped (aggregation, dynamic variable and buffer drops).",
            own.drops,
        ),
        (
            "dtx_metrics_errors",
            "Faults in the D program's clauses (dtrace:::ERROR).",
            own.errors,
        ),
        (
            "dtx_metrics_lost_events",
            "Events the system lost before dtx saw them, and events dtx dropped.",
            own.lost,
        ),
    ];
    for (family, help, v) in counters {
        let name = match format {
            Format::Text => format!("{family}_total"),
            Format::OpenMetrics => family.to_string(),
        };
        header(out, format, &name, "counter", None, help);
        let _ = writeln!(out, "{family}_total {v}");
    }
    header(
        out,
        format,
        "dtx_metrics_scrape_duration_seconds",
        "gauge",
        Some("seconds"),
        "What writing the previous exposition cost.",
    );
    let _ = writeln!(
        out,
        "dtx_metrics_scrape_duration_seconds {}",
        canonical(own.last_scrape_seconds)
    );
    let name = match format {
        Format::Text => "dtx_metrics_dropped_series_total",
        Format::OpenMetrics => "dtx_metrics_dropped_series",
    };
    header(
        out,
        format,
        name,
        "counter",
        None,
        "Series left out of expositions over the per-metric limit (metriclimit), summed over scrapes.",
    );
    for (family, n) in dropped {
        let _ = writeln!(
            out,
            "dtx_metrics_dropped_series_total{{metric=\"{}\"}} {n}",
            escape(family, true)
        );
    }
    let version = env!("CARGO_PKG_VERSION");
    match format {
        Format::Text => {
            header(
                out,
                format,
                "dtx_build_info",
                "gauge",
                None,
                "dtx's version; always 1.",
            );
        }
        Format::OpenMetrics => {
            header(out, format, "dtx_build", "info", None, "dtx's version.");
        }
    }
    let _ = writeln!(out, "dtx_build_info{{version=\"{version}\"}} 1");
}

/// `{a="x",le="7.0"}`, or nothing for no labels.
fn label_text(labels: &[(String, String)], le: Option<&str>) -> String {
    if labels.is_empty() && le.is_none() {
        return String::new();
    }
    let mut s = String::from("{");
    for (i, (n, v)) in labels.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{n}=\"{}\"", escape(v, true));
    }
    if let Some(le) = le {
        if !labels.is_empty() {
            s.push(',');
        }
        let _ = write!(s, "le=\"{le}\"");
    }
    s.push('}');
    s
}

/// Escapes a label value (`quotes`: also `"`) or a text format HELP: backslash and line feed
/// (and double quote) as the formats say. A carriage return, which neither format escapes and
/// OpenMetrics forbids in line endings, becomes a space.
fn escape(s: &str, quotes: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quotes => out.push_str("\\\""),
            '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A float as OpenMetrics' canonical numbers render it: Go's `%g` of the shortest
/// representation (exponent form below 1e-4 and from 1e+06), with `.0` appended when there is
/// neither a point nor an exponent; `+Inf`, `-Inf`, `NaN`.
pub fn canonical(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if f == 0.0 {
        return "0.0".into();
    }
    // Rust's `{:e}` is the shortest round-trip digits: "-1.2345e-7"
    let e = format!("{f:e}");
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    if !(-4..6).contains(&exp) {
        s.push_str(&digits[..1]);
        if digits.len() > 1 {
            s.push('.');
            s.push_str(&digits[1..]);
        }
        let _ = write!(
            s,
            "e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.unsigned_abs()
        );
        return s;
    }
    if exp < 0 {
        s.push_str("0.");
        for _ in 0..(-exp - 1) {
            s.push('0');
        }
        s.push_str(&digits);
    } else {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            s.push_str(&digits);
            for _ in digits.len()..int_len {
                s.push('0');
            }
            s.push_str(".0");
        } else {
            s.push_str(&digits[..int_len]);
            s.push('.');
            s.push_str(&digits[int_len..]);
        }
    }
    s
}

#[cfg(test)]
mod tests;
