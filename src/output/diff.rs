//! A comparison of two runs ([`crate::agg::diff`]) rendered: a table per aggregation with
//! every key's before, after, change and ratio; quantizations bucket by bucket with the two
//! distributions side by side; JSON of the same; and the stack aggregations as differential
//! folded stacks (`frames before after`, the lines inferno's `diff-folded` writes and its
//! flame graph reads: Brendan Gregg's difffolded.pl format) and a differential flame graph
//! drawn by inferno (red grew, blue shrank).

use std::io::Write;

use super::json::Json;
use crate::agg::diff::{buckets, is_total, AggDiff, Presence, RowDiff};
use crate::agg::snapshot::KeyCell;
use crate::agg::AggValue;

/// One side of a comparison.
#[derive(Clone, Debug, Default)]
pub struct Side {
    /// The saved result or trace it came from.
    pub source: String,
    /// How long the run's trace lasted, when known.
    pub seconds: Option<f64>,
}

/// How rows are ordered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortBy {
    /// By the size of the change, largest first.
    #[default]
    Change,
    /// By how far the ratio is from 1 (new and gone keys first), largest first.
    Ratio,
    /// By the keys as text.
    Name,
}

impl SortBy {
    pub fn parse(w: &str) -> Option<SortBy> {
        Some(match w {
            "change" => SortBy::Change,
            "ratio" => SortBy::Ratio,
            "name" | "key" => SortBy::Name,
            _ => return None,
        })
    }
    fn word(self) -> &'static str {
        match self {
            SortBy::Change => "change",
            SortBy::Ratio => "ratio",
            SortBy::Name => "name",
        }
    }
}

/// What is shown and how.
#[derive(Clone, Debug, Default)]
pub struct DiffView {
    pub before: Side,
    pub after: Side,
    /// Totals (counts, sums, histogram counts) divided by each run's seconds.
    pub per_second: bool,
    pub sort: SortBy,
    /// At most this many rows per aggregation.
    pub top: Option<usize>,
}

impl DiffView {
    /// The divisors of the two sides for an aggregation of `func` (1 when absolute or not a
    /// total).
    fn divisors(&self, func: &str) -> (f64, f64) {
        if self.per_second && is_total(func) {
            (
                self.before.seconds.unwrap_or(1.0).max(1e-9),
                self.after.seconds.unwrap_or(1.0).max(1e-9),
            )
        } else {
            (1.0, 1.0)
        }
    }

    /// Whether values are shown with decimals.
    fn fractional(&self, func: &str) -> bool {
        self.per_second && is_total(func)
    }
}

/// A row's two numbers as shown: the value dtrace prints (a histogram's total count), 0 for a
/// missing side, divided as the view says.
pub fn numbers(row: &RowDiff, func: &str, view: &DiffView) -> (f64, f64) {
    let (db, da) = view.divisors(func);
    let v = |x: &Option<AggValue>| x.as_ref().map_or(0.0, |v| v.scalar() as f64);
    (v(&row.before) / db, v(&row.after) / da)
}

/// `after / before`; `None` when `before` is 0.
fn ratio(b: f64, a: f64) -> Option<f64> {
    (b != 0.0).then(|| a / b)
}

/// A row's keys as one line of text (a stack as its frames, root first, joined by `;`).
pub fn key_text(keys: &[KeyCell]) -> String {
    keys.iter()
        .map(|k| match k {
            KeyCell::Text(t) => t.clone(),
            KeyCell::Stack(f) => f.iter().rev().cloned().collect::<Vec<_>>().join(";"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The rows of an aggregation in the view's order, cut to its `top`.
pub fn ordered<'a>(d: &'a AggDiff, view: &DiffView) -> Vec<&'a RowDiff> {
    let mut rows: Vec<(&RowDiff, f64, f64, String)> = d
        .rows
        .iter()
        .map(|r| {
            let (b, a) = numbers(r, d.func, view);
            let far = match ratio(b, a) {
                _ if b == a => 0.0,
                Some(x) if x > 0.0 => x.ln().abs(),
                _ => f64::INFINITY,
            };
            (r, (a - b).abs(), far, key_text(&r.keys))
        })
        .collect();
    rows.sort_by(|x, y| match view.sort {
        SortBy::Change => y.1.total_cmp(&x.1).then_with(|| x.3.cmp(&y.3)),
        SortBy::Ratio => {
            y.2.total_cmp(&x.2)
                .then_with(|| y.1.total_cmp(&x.1))
                .then_with(|| x.3.cmp(&y.3))
        }
        SortBy::Name => x.3.cmp(&y.3),
    });
    rows.truncate(view.top.unwrap_or(usize::MAX));
    rows.into_iter().map(|r| r.0).collect()
}

fn num(x: f64, fractional: bool) -> String {
    if fractional {
        format!("{x:.2}")
    } else {
        format!("{}", x as i64)
    }
}

fn signed(x: f64, fractional: bool) -> String {
    let s = num(x, fractional);
    if x > 0.0 || (x == 0.0 && !s.starts_with('-')) {
        format!("+{s}")
    } else {
        s
    }
}

fn ratio_text(row: &RowDiff, b: f64, a: f64) -> String {
    match row.presence() {
        Presence::New => "new".into(),
        Presence::Gone => "gone".into(),
        Presence::Both => match ratio(b, a) {
            Some(r) => format!("{r:.2}x"),
            None if a == 0.0 => "-".into(),
            None => "inf".into(),
        },
    }
}

fn seconds_text(s: &Side) -> String {
    match s.seconds {
        Some(x) => format!("{x:.3} s"),
        None => "length unknown".into(),
    }
}

/// The header that opens the text: the two sides, how values are shown (and the other way,
/// by option) and the order.
fn write_header(view: &DiffView, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "dtx --diff: before {} ({}), after {} ({})",
        view.before.source,
        seconds_text(&view.before),
        view.after.source,
        seconds_text(&view.after)
    )?;
    if view.per_second {
        writeln!(out, "values: per second of each run (counts, sums and histogram counts divided by its seconds; avg, min, max and stddev as they are); --absolute for the values printa prints")?;
    } else {
        writeln!(
            out,
            "values: absolute, as printa prints them; --per-second divides counts, sums and histogram counts by each run's seconds"
        )?;
    }
    let top = view
        .top
        .map(|n| format!(", the first {n} of each"))
        .unwrap_or_default();
    writeln!(
        out,
        "rows: sorted by {}{top} (--sort change|ratio|name, --top N)",
        view.sort.word()
    )
}

/// The text of a comparison: the header, then per aggregation its table (histograms bucket by
/// bucket).
pub fn write_text(diffs: &[AggDiff], view: &DiffView, out: &mut dyn Write) -> std::io::Result<()> {
    write_header(view, out)?;
    for d in diffs {
        writeln!(out)?;
        let func = match d.func {
            "" => "empty".to_string(),
            f => format!("{f}()"),
        };
        let rows = ordered(d, view);
        let shown = if rows.len() < d.rows.len() {
            format!(", {} of {} keys", rows.len(), d.rows.len())
        } else {
            format!(
                ", {} key{}",
                d.rows.len(),
                if d.rows.len() == 1 { "" } else { "s" }
            )
        };
        let (new, gone) = d.rows.iter().fold((0, 0), |(n, g), r| match r.presence() {
            Presence::New => (n + 1, g),
            Presence::Gone => (n, g + 1),
            Presence::Both => (n, g),
        });
        let side = match (new, gone) {
            (n, 0) if n > 0 && n == d.rows.len() => ", empty or absent before",
            (0, g) if g > 0 && g == d.rows.len() => ", empty or absent after",
            _ => "",
        };
        writeln!(
            out,
            "{} {func}{shown} ({new} new, {gone} gone{side})",
            d.name
        )?;
        if d.is_histogram() {
            for r in rows {
                write_histogram(d, r, view, out)?;
            }
            continue;
        }
        write_table(d, &rows, view, out)?;
    }
    Ok(())
}

fn write_table(
    d: &AggDiff,
    rows: &[&RowDiff],
    view: &DiffView,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let frac = view.fractional(d.func);
    let stacks = d.has_stack_key();
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            let (b, a) = numbers(r, d.func, view);
            let key = if stacks {
                let text: Vec<KeyCell> = r
                    .keys
                    .iter()
                    .filter(|k| matches!(k, KeyCell::Text(_)))
                    .cloned()
                    .collect();
                key_text(&text)
            } else {
                key_text(&r.keys)
            };
            [
                key,
                num(b, frac),
                num(a, frac),
                signed(a - b, frac),
                ratio_text(r, b, a),
            ]
        })
        .collect();
    let head = ["KEY", "BEFORE", "AFTER", "CHANGE", "RATIO"];
    let mut w = head.map(str::len);
    for c in &cells {
        for (i, s) in c.iter().enumerate() {
            w[i] = w[i].max(s.chars().count());
        }
    }
    let line = |c: [&str; 5], out: &mut dyn Write| {
        let s = format!(
            "  {:<w0$}  {:>w1$}  {:>w2$}  {:>w3$}  {:>w4$}",
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3],
            w4 = w[4]
        );
        writeln!(out, "{}", s.trim_end())
    };
    line(head, out)?;
    for (r, c) in rows.iter().zip(&cells) {
        if stacks {
            for k in &r.keys {
                if let KeyCell::Stack(frames) = k {
                    for f in frames {
                        writeln!(out, "    {f}")?;
                    }
                }
            }
        }
        line([&c[0], &c[1], &c[2], &c[3], &c[4]], out)?;
    }
    Ok(())
}

/// The buckets of a histogram row on both sides: (index, label, before, after), over the
/// range either side shows (its non-zero buckets and one of context each side).
pub fn bucket_rows(row: &RowDiff) -> Vec<(usize, i64, i64, i64)> {
    bucket_table(row)
        .into_iter()
        .map(|(i, l, _, b, a)| (i, l, b, a))
        .collect()
}

/// [`bucket_rows`] with each bucket's label as dtrace's text shows it (`< 0` for an
/// underflow bucket, `>= 100` for an overflow one): (index, value, label, before, after).
fn bucket_table(row: &RowDiff) -> Vec<(usize, i64, String, i64, i64)> {
    let mut labels: std::collections::BTreeMap<usize, (i64, String)> = Default::default();
    for v in [&row.before, &row.after].into_iter().flatten() {
        for b in super::structured::buckets_json(v) {
            let i = match b.get("index") {
                Some(Json::UInt(i)) => *i as usize,
                _ => continue,
            };
            if let Some(Json::Int(l)) = b.get("value") {
                let text = if b.get("underflow").is_some() {
                    format!("< {l}")
                } else if b.get("overflow").is_some() {
                    format!(">= {l}")
                } else {
                    l.to_string()
                };
                labels.insert(i, (*l, text));
            }
        }
    }
    let count = |v: &Option<AggValue>, i: usize| {
        v.as_ref()
            .and_then(|v| buckets(v).get(i).copied())
            .unwrap_or(0)
    };
    labels
        .into_iter()
        .map(|(i, (l, t))| (i, l, t, count(&row.before, i), count(&row.after, i)))
        .collect()
}

fn bar(n: f64, max: f64, width: usize) -> String {
    let k = if max > 0.0 {
        ((n.max(0.0) / max) * width as f64).round() as usize
    } else {
        0
    };
    format!("{:<width$}", "@".repeat(k.min(width)))
}

fn write_histogram(
    d: &AggDiff,
    r: &RowDiff,
    view: &DiffView,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let frac = view.fractional(d.func);
    let (db, da) = view.divisors(d.func);
    let (b, a) = numbers(r, d.func, view);
    writeln!(
        out,
        "  {}  total {} -> {} ({}, {})",
        match key_text(&r.keys) {
            k if k.is_empty() => "(no key)".to_string(),
            k => k,
        },
        num(b, frac),
        num(a, frac),
        signed(a - b, frac),
        ratio_text(r, b, a)
    )?;
    let rows: Vec<(String, f64, f64)> = bucket_table(r)
        .into_iter()
        .map(|(_, _, l, x, y)| (l, x as f64 / db, y as f64 / da))
        .collect();
    let max = rows.iter().fold(0.0f64, |m, r| m.max(r.1).max(r.2));
    const W: usize = 24;
    let cw = rows
        .iter()
        .map(|r| num(r.1, frac).len().max(num(r.2, frac).len()))
        .max()
        .unwrap_or(1)
        .max(5);
    writeln!(
        out,
        "  {:>16}  {:<W$}  {:>cw$}  {:<W$}  {:>cw$}  CHANGE",
        "value", "before", "count", "after", "count"
    )?;
    for (l, x, y) in rows {
        writeln!(
            out,
            "  {l:>16} |{} {:>cw$} |{} {:>cw$}  {}",
            bar(x, max, W),
            num(x, frac),
            bar(y, max, W),
            num(y, frac),
            signed(y - x, frac)
        )?;
    }
    Ok(())
}

fn number_json(x: f64, fractional: bool) -> Json {
    if fractional {
        Json::Float(x)
    } else {
        Json::Int(x as i64)
    }
}

fn keys_json(keys: &[KeyCell]) -> Json {
    Json::Array(
        keys.iter()
            .map(|k| match k {
                KeyCell::Text(t) => Json::str(t.clone()),
                KeyCell::Stack(f) => Json::object([(
                    "stack-frames",
                    Json::Array(f.iter().map(|s| Json::str(s.clone())).collect()),
                )]),
            })
            .collect(),
    )
}

fn side_json(s: &Side) -> Json {
    Json::object([
        ("source", Json::str(s.source.clone())),
        ("seconds", s.seconds.map_or(Json::Null, Json::Float)),
    ])
}

/// The comparison as JSON (docs/compare.md): `{"dtx-diff": {"before", "after", "values",
/// "sort", "aggregations": [{"aggregation-name", "function", "rows": [{"keys", "presence",
/// "before", "after", "change", "ratio", "buckets"?}]}]}}`.
pub fn diff_json(diffs: &[AggDiff], view: &DiffView) -> Json {
    let aggs = diffs
        .iter()
        .map(|d| {
            let frac = view.fractional(d.func);
            let (db, da) = view.divisors(d.func);
            let rows = ordered(d, view)
                .into_iter()
                .map(|r| {
                    let (b, a) = numbers(r, d.func, view);
                    let mut m = vec![
                        ("keys".to_string(), keys_json(&r.keys)),
                        ("presence".to_string(), Json::str(r.presence().word())),
                        ("before".to_string(), number_json(b, frac)),
                        ("after".to_string(), number_json(a, frac)),
                        ("change".to_string(), number_json(a - b, frac)),
                        (
                            "ratio".to_string(),
                            ratio(b, a).map_or(Json::Null, Json::Float),
                        ),
                    ];
                    if d.is_histogram() {
                        let bs = bucket_rows(r)
                            .into_iter()
                            .map(|(i, l, x, y)| {
                                let (x, y) = (x as f64 / db, y as f64 / da);
                                Json::object([
                                    ("value", Json::Int(l)),
                                    ("index", Json::UInt(i as u64)),
                                    ("before", number_json(x, frac)),
                                    ("after", number_json(y, frac)),
                                    ("change", number_json(y - x, frac)),
                                ])
                            })
                            .collect();
                        m.push(("buckets".to_string(), Json::Array(bs)));
                    }
                    Json::Object(m)
                })
                .collect();
            Json::object([
                (
                    "aggregation-name",
                    Json::str(match d.name.trim_start_matches('@') {
                        "" => "_",
                        n => n,
                    }),
                ),
                ("function", Json::str(d.func)),
                ("rows", Json::Array(rows)),
            ])
        })
        .collect();
    Json::object([(
        "dtx-diff",
        Json::object([
            ("before", side_json(&view.before)),
            ("after", side_json(&view.after)),
            (
                "values",
                Json::str(if view.per_second {
                    "per-second"
                } else {
                    "absolute"
                }),
            ),
            ("sort", Json::str(view.sort.word())),
            ("aggregations", Json::Array(aggs)),
        ]),
    )])
}

/// The differential folded lines of an aggregation: `(frames, before, after)` per stack (its
/// keys folded as `-x oformat=folded` folds them), counts as printa prints them (a histogram's
/// total; below zero counts 0), lines of the same frames added, both-zero lines left out;
/// sorted by frames.
pub fn diff_folded_lines(d: &AggDiff) -> Vec<(String, u64, u64)> {
    let mut m: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    let c = |v: &Option<AggValue>| v.as_ref().map_or(0, |v| v.scalar().max(0) as u64);
    for r in &d.rows {
        let (b, a) = (c(&r.before), c(&r.after));
        if b == 0 && a == 0 {
            continue;
        }
        let e = m.entry(super::folded::folded_frames(&r.keys)).or_default();
        e.0 = e.0.saturating_add(b);
        e.1 = e.1.saturating_add(a);
    }
    m.into_iter().map(|(f, (b, a))| (f, b, a)).collect()
}

/// Appends the differential folded lines of an aggregation (`frames before after\n`).
pub fn write_diff_folded(d: &AggDiff, out: &mut dyn Write) -> std::io::Result<()> {
    for (f, b, a) in diff_folded_lines(d) {
        writeln!(out, "{f} {b} {a}")?;
    }
    Ok(())
}

/// Draws an aggregation's differential flame graph (inferno: a frame's width is its count
/// after, its colour how it changed: red grew, blue shrank).
pub fn write_diff_svg(d: &AggDiff, title: &str, out: impl Write) -> Result<(), String> {
    let lines: Vec<String> = diff_folded_lines(d)
        .into_iter()
        .map(|(f, b, a)| format!("{f} {b} {a}"))
        .collect();
    if lines.is_empty() {
        return Err(format!("{}: no stack with a count to draw", d.name));
    }
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = d.func.to_string();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), out)
        .map_err(|e| format!("{}: flame graph: {e}", d.name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agg::diff::compare;
    use crate::agg::snapshot::{AggRow, AggView};

    fn rows(v: &[(&str, u64)]) -> Vec<AggRow> {
        v.iter()
            .map(|(k, n)| AggRow {
                keys: vec![KeyCell::Text(k.to_string())],
                value: AggValue::Count(*n),
            })
            .collect()
    }

    fn sample() -> Vec<AggDiff> {
        let b = [AggView {
            name: "@c".into(),
            rows: rows(&[("a", 10), ("b", 100), ("gone", 4)]),
        }];
        let a = [AggView {
            name: "@c".into(),
            rows: rows(&[("a", 40), ("b", 90), ("new", 1)]),
        }];
        compare(&b, &a, "x", "y").unwrap()
    }

    #[test]
    fn rows_sort_by_change_ratio_and_name() {
        let d = sample();
        let names = |v: &DiffView| -> Vec<String> {
            ordered(&d[0], v)
                .iter()
                .map(|r| key_text(&r.keys))
                .collect()
        };
        let mut v = DiffView::default();
        assert_eq!(names(&v), ["a", "b", "gone", "new"]);
        v.sort = SortBy::Ratio;
        assert_eq!(names(&v), ["gone", "new", "a", "b"]);
        v.sort = SortBy::Name;
        v.top = Some(2);
        assert_eq!(names(&v), ["a", "b"]);
    }

    #[test]
    fn text_and_json_show_change_and_ratio() {
        let d = sample();
        let mut v = DiffView::default();
        let mut out = Vec::new();
        write_text(&d, &v, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("values: absolute"), "{text}");
        assert!(
            text.contains("@c count(), 4 keys (1 new, 1 gone)"),
            "{text}"
        );
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("a "))
            .unwrap();
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f, ["a", "10", "40", "+30", "4.00x"]);
        v.per_second = true;
        v.before.seconds = Some(10.0);
        v.after.seconds = Some(20.0);
        let j = diff_json(&d, &v);
        let r = match j
            .get("dtx-diff")
            .and_then(|d| d.get("aggregations"))
            .unwrap()
        {
            Json::Array(a) => a[0].get("rows").unwrap().clone(),
            _ => unreachable!(),
        };
        let Json::Array(r) = r else { unreachable!() };
        // per second: b (100 -> 90) fell by 5.5 a second, more than a rose (1.0 -> 2.0)
        assert_eq!(r[0].get("keys"), Some(&Json::Array(vec![Json::str("b")])));
        assert_eq!(r[0].get("change"), Some(&Json::Float(-5.5)));
        assert_eq!(r[1].get("before"), Some(&Json::Float(1.0)));
        assert_eq!(r[1].get("after"), Some(&Json::Float(2.0)));
        assert_eq!(r[1].get("ratio"), Some(&Json::Float(2.0)));
    }

    #[test]
    fn folded_diff_adds_frames_and_keeps_both_counts() {
        let st = |f: &[&str], n| AggRow {
            keys: vec![KeyCell::Stack(f.iter().map(|s| s.to_string()).collect())],
            value: AggValue::Count(n),
        };
        let b = [AggView {
            name: "@s".into(),
            rows: vec![st(&["leaf", "main"], 3), st(&["other", "main"], 2)],
        }];
        let a = [AggView {
            name: "@s".into(),
            rows: vec![st(&["leaf", "main"], 5), st(&["new", "main"], 1)],
        }];
        let d = compare(&b, &a, "x", "y").unwrap();
        assert_eq!(
            diff_folded_lines(&d[0]),
            [
                ("main;leaf".to_string(), 3, 5),
                ("main;new".to_string(), 0, 1),
                ("main;other".to_string(), 2, 0)
            ]
        );
        let mut svg = Vec::new();
        write_diff_svg(&d[0], "t", &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(svg.contains("main;leaf") || svg.contains("leaf"), "{svg}");
    }
}
