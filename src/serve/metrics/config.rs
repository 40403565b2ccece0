//! How a program's aggregations become metrics, decided once before the program runs: each
//! aggregation's metric name (sanitised, with its unit suffix), type, labels, help text and
//! scale, from the program's IR and the `metric*` options (docs/metrics.md). Every mistake in
//! those options is an error here, before anything is traced.

use crate::ir::{self, ActionKind, AggFunc};
use crate::lang::options::DOptions;

/// The series one metric may have at a scrape unless `metriclimit` says otherwise.
pub const DEFAULT_LIMIT: usize = 10_000;

/// The prefix of every metric dtx exports.
pub const PREFIX: &str = "dtx_";

/// The metric name of the anonymous aggregation `@`.
pub const ANONYMOUS: &str = "anonymous";

/// The names of dtx's own metrics (their families), which no aggregation may take.
pub const OWN: &[&str] = &[
    "dtx_build",
    "dtx_build_info",
    "dtx_metrics_events",
    "dtx_metrics_firings",
    "dtx_metrics_drops",
    "dtx_metrics_errors",
    "dtx_metrics_lost_events",
    "dtx_metrics_scrape_duration_seconds",
    "dtx_metrics_dropped_series",
];

/// What a metric is, in Prometheus's types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `count()` and `sum()` of a program that never clears or truncates them.
    Counter,
    /// `min`, `max`, `avg`, `stddev`, and `count`/`sum` that `clear()` or `trunc()` reset.
    Gauge,
    /// `quantize`, `lquantize`, `llquantize`.
    Histogram,
    /// A histogram that `clear()` or `trunc()` reset: OpenMetrics' gaugehistogram (the
    /// Prometheus text format has no such type and calls it a histogram).
    GaugeHistogram,
}

/// One aggregation as a metric.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricSpec {
    /// The aggregation as snapshots name it (`@calls`, `@` for the anonymous one).
    pub agg: String,
    /// The metric family's name (`dtx_calls`, `dtx_latency_seconds`), without `_total`.
    pub family: String,
    pub kind: Kind,
    pub func: AggFunc,
    /// One label name per key column.
    pub labels: Vec<String>,
    /// The OpenMetrics unit (the family name's suffix), when the script gave one.
    pub unit: Option<String>,
    /// What values are multiplied by, then divided by (1 and 1e9 for a script's nanoseconds
    /// exported as seconds: a division by a power of ten rounds once, where a multiplication
    /// by 1e-9 would not give 3e-09 for 3).
    pub scale: f64,
    pub divisor: f64,
    pub help: String,
}

/// Every metric of a program.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub metrics: Vec<MetricSpec>,
    /// Series per metric at one scrape (`metriclimit`).
    pub limit: usize,
    /// Stack keys become a folded label (`metricstacks`).
    pub stacks: bool,
}

/// A unit a script may give: the unit exported, and the factor and divisor to it.
fn unit_of(word: &str) -> Option<(&'static str, f64, f64)> {
    Some(match word {
        "seconds" | "s" => ("seconds", 1.0, 1.0),
        "milliseconds" | "ms" => ("seconds", 1.0, 1e3),
        "microseconds" | "us" => ("seconds", 1.0, 1e6),
        "nanoseconds" | "ns" => ("seconds", 1.0, 1e9),
        "bytes" => ("bytes", 1.0, 1.0),
        "kilobytes" | "kb" => ("bytes", 1024.0, 1.0),
        "megabytes" | "mb" => ("bytes", 1024.0 * 1024.0, 1.0),
        "ratio" => ("ratio", 1.0, 1.0),
        "celsius" => ("celsius", 1.0, 1.0),
        "joules" => ("joules", 1.0, 1.0),
        "meters" => ("meters", 1.0, 1.0),
        "volts" => ("volts", 1.0, 1.0),
        "amperes" => ("amperes", 1.0, 1.0),
        "grams" => ("grams", 1.0, 1.0),
        _ => return None,
    })
}

impl MetricSpec {
    /// A value of the aggregation in the metric's unit.
    pub fn scaled(&self, v: f64) -> f64 {
        v * self.scale / self.divisor
    }

    /// Whether values are exported as they are.
    pub fn unscaled(&self) -> bool {
        self.scale == 1.0 && self.divisor == 1.0
    }
}

/// Whether `s` is a Prometheus label name (`[a-zA-Z_][a-zA-Z0-9_]*`, not `__`-prefixed, which
/// Prometheus reserves).
pub fn is_label_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
        && !s.starts_with("__")
}

/// The metric name part of an aggregation name: `@calls` → `calls`, `@`/`@_` → `anonymous`,
/// anything outside `[a-zA-Z0-9_]` replaced by `_` (D's identifiers never have any, but a name
/// must keep to Prometheus's grammar whatever comes).
pub fn base_name(agg: &str) -> String {
    let n = agg.strip_prefix('@').unwrap_or(agg);
    if n.is_empty() || n == "_" {
        return ANONYMOUS.to_string();
    }
    n.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The aggregation name as snapshots give it.
fn snapshot_name(agg: &str) -> String {
    match agg.strip_prefix('@').unwrap_or(agg) {
        "" | "_" => "@".to_string(),
        n => format!("@{n}"),
    }
}

/// Splits `@name:value` (the `metric*` options' form; the `@` may be left out).
fn split_spec<'a>(option: &str, v: &'a str) -> Result<(String, &'a str), String> {
    let Some((name, value)) = v.split_once(':') else {
        return Err(format!(
            "-x {option}={v}: give the aggregation and the value as @name:value"
        ));
    };
    Ok((snapshot_name(name.trim()), value.trim()))
}

impl Config {
    /// The metrics of `program` under `opts`, or what is wrong with the options.
    pub fn new(program: &ir::Program, opts: &DOptions) -> Result<Config, String> {
        let limit = match opts.int("metriclimit") {
            Some(n) if n > 0 => n as usize,
            _ => DEFAULT_LIMIT,
        };
        let stacks = opts.is_set("metricstacks");
        // which aggregations clear() or trunc() reset
        let mut reset = vec![false; program.aggregations.len()];
        for a in program.actions() {
            if let ActionKind::Clear(id) | ActionKind::Trunc(id) = a.kind {
                if let Some(r) = reset.get_mut(id as usize) {
                    *r = true;
                }
            }
        }
        let mut metrics: Vec<MetricSpec> = program
            .aggregations
            .iter()
            .zip(&reset)
            .map(|(a, &reset)| {
                let kind = match (a.func, reset) {
                    (AggFunc::Count | AggFunc::Sum, false) => Kind::Counter,
                    (
                        AggFunc::Quantize | AggFunc::Lquantize { .. } | AggFunc::Llquantize { .. },
                        false,
                    ) => Kind::Histogram,
                    (
                        AggFunc::Quantize | AggFunc::Lquantize { .. } | AggFunc::Llquantize { .. },
                        true,
                    ) => Kind::GaugeHistogram,
                    _ => Kind::Gauge,
                };
                MetricSpec {
                    agg: snapshot_name(&a.name),
                    family: format!("{PREFIX}{}", base_name(&a.name)),
                    kind,
                    func: a.func,
                    labels: (1..=a.keys.len()).map(|i| format!("key{i}")).collect(),
                    unit: None,
                    scale: 1.0,
                    divisor: 1.0,
                    help: format!(
                        "{} of D aggregation {}",
                        func_name(a.func),
                        snapshot_name(&a.name)
                    ),
                }
            })
            .collect();
        let find = |metrics: &mut Vec<MetricSpec>, option: &str, name: &str| {
            let known: Vec<&str> = program
                .aggregations
                .iter()
                .map(|a| a.name.as_str())
                .collect();
            metrics.iter().position(|m| m.agg == name).ok_or_else(|| {
                format!(
                    "-x {option}: the program has no aggregation {name} (it has {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                )
            })
        };
        for v in opts.list("metriclabels") {
            let (name, value) = split_spec("metriclabels", v)?;
            let i = find(&mut metrics, "metriclabels", &name)?;
            let labels: Vec<String> = value.split(',').map(|l| l.trim().to_string()).collect();
            let m = &mut metrics[i];
            if labels.len() != m.labels.len() {
                return Err(format!(
                    "-x metriclabels={v}: {name} has {} key(s), {} label name(s) given",
                    m.labels.len(),
                    labels.len()
                ));
            }
            for l in &labels {
                if !is_label_name(l) {
                    return Err(format!(
                        "-x metriclabels={v}: {l:?} is no Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __)"
                    ));
                }
            }
            m.labels = labels;
        }
        for v in opts.list("metricunit") {
            let (name, value) = split_spec("metricunit", v)?;
            let i = find(&mut metrics, "metricunit", &name)?;
            let (unit, scale, divisor) = unit_of(value).ok_or_else(|| {
                format!("-x metricunit={v}: unknown unit {value:?} (seconds, milliseconds, microseconds, nanoseconds, bytes, kilobytes, megabytes, ratio, celsius, joules, meters, volts, amperes, grams)")
            })?;
            let m = &mut metrics[i];
            if m.func == AggFunc::Count {
                return Err(format!(
                    "-x metricunit={v}: {name} is a count(), which has no unit"
                ));
            }
            m.unit = Some(unit.to_string());
            m.scale = scale;
            m.divisor = divisor;
            m.family = format!("{PREFIX}{}_{unit}", base_name(&name));
        }
        for v in opts.list("metrichelp") {
            let (name, value) = split_spec("metrichelp", v)?;
            let i = find(&mut metrics, "metrichelp", &name)?;
            metrics[i].help = value.to_string();
        }
        for v in opts.list("metrictype") {
            let (name, value) = split_spec("metrictype", v)?;
            let i = find(&mut metrics, "metrictype", &name)?;
            let m = &mut metrics[i];
            m.kind = match (value, m.kind) {
                ("gauge", Kind::Counter | Kind::Gauge) => Kind::Gauge,
                ("counter", Kind::Counter) => Kind::Counter,
                ("gauge", Kind::Histogram | Kind::GaugeHistogram) => Kind::GaugeHistogram,
                ("histogram", Kind::Histogram) => Kind::Histogram,
                _ => {
                    return Err(format!(
                        "-x metrictype={v}: {name} ({}) cannot be a {value}; a count() or sum() may be a gauge, a quantization a gauge histogram",
                        func_name(m.func)
                    ))
                }
            };
        }
        // every metric's samples are named apart from the others' and from dtx's own
        let mut seen: std::collections::BTreeMap<String, String> = OWN
            .iter()
            .map(|n| (n.to_string(), "dtx's own metrics".to_string()))
            .collect();
        for m in &metrics {
            for s in sample_names(m) {
                if let Some(other) = seen.insert(s.clone(), m.agg.clone()) {
                    return Err(format!(
                        "aggregation {}'s metric {s} is also {other}'s; rename the aggregation",
                        m.agg
                    ));
                }
            }
            if matches!(m.kind, Kind::Histogram | Kind::GaugeHistogram)
                && m.labels.iter().any(|l| l == "le")
            {
                return Err(format!(
                    "aggregation {}: a histogram's labels may not be named le",
                    m.agg
                ));
            }
        }
        Ok(Config {
            metrics,
            limit,
            stacks,
        })
    }
}

/// The sample names a metric's family writes (and its family name), for the collision check.
fn sample_names(m: &MetricSpec) -> Vec<String> {
    let f = &m.family;
    match m.kind {
        Kind::Counter => vec![f.clone(), format!("{f}_total"), format!("{f}_created")],
        Kind::Gauge => vec![f.clone()],
        Kind::Histogram | Kind::GaugeHistogram => vec![
            f.clone(),
            format!("{f}_bucket"),
            format!("{f}_count"),
            format!("{f}_sum"),
            format!("{f}_gcount"),
            format!("{f}_gsum"),
        ],
    }
}

/// The D name of an aggregating function.
pub fn func_name(f: AggFunc) -> &'static str {
    match f {
        AggFunc::Count => "count()",
        AggFunc::Sum => "sum()",
        AggFunc::Avg => "avg()",
        AggFunc::Min => "min()",
        AggFunc::Max => "max()",
        AggFunc::Stddev => "stddev()",
        AggFunc::Quantize => "quantize()",
        AggFunc::Lquantize { .. } => "lquantize()",
        AggFunc::Llquantize { .. } => "llquantize()",
    }
}
