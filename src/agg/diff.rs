//! What changed between two runs of one program: two snapshots of its aggregations
//! ([`AggView`]s) compared key by key. The comparison is data (`output::diff` renders it as a
//! table, JSON or differential folded stacks); it refuses two snapshots whose aggregations
//! differ in shape (another name, function, parameters or key layout), since their keys would
//! not mean the same thing.

use super::snapshot::{AggRow, AggView, KeyCell};
use super::AggValue;

/// One key of an aggregation, with its value on each side (`None`: the key is not there).
#[derive(Clone, Debug, PartialEq)]
pub struct RowDiff {
    pub keys: Vec<KeyCell>,
    pub before: Option<AggValue>,
    pub after: Option<AggValue>,
}

/// Whether a row was on both sides, only after (new) or only before (gone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    Both,
    New,
    Gone,
}

impl Presence {
    pub fn word(self) -> &'static str {
        match self {
            Presence::Both => "both",
            Presence::New => "new",
            Presence::Gone => "gone",
        }
    }
}

impl RowDiff {
    pub fn presence(&self) -> Presence {
        match (&self.before, &self.after) {
            (Some(_), None) => Presence::Gone,
            (None, Some(_)) => Presence::New,
            _ => Presence::Both,
        }
    }
}

/// One aggregation compared.
#[derive(Clone, Debug, PartialEq)]
pub struct AggDiff {
    /// `@name` as written.
    pub name: String,
    /// The function (`count`, `quantize`, ...); `""` when both sides are empty.
    pub func: &'static str,
    pub rows: Vec<RowDiff>,
}

impl AggDiff {
    /// Whether a key column is a stack.
    pub fn has_stack_key(&self) -> bool {
        self.rows
            .first()
            .is_some_and(|r| r.keys.iter().any(|k| matches!(k, KeyCell::Stack(_))))
    }

    pub fn is_histogram(&self) -> bool {
        matches!(self.func, "quantize" | "lquantize" | "llquantize")
    }
}

/// The function and parameters of a value, as an error message names them.
fn shape(v: &AggValue) -> String {
    match v {
        AggValue::Lquantize {
            base, step, levels, ..
        } => format!("lquantize({base}, {step}, {levels})"),
        AggValue::Llquantize {
            factor,
            low,
            high,
            nsteps,
            ..
        } => format!("llquantize({factor}, {low}, {high}, {nsteps})"),
        other => format!("{}()", AggView::func_of(other)),
    }
}

/// The layout of a row's keys: `string`/`stack` per column.
fn key_layout(r: &AggRow) -> String {
    let kinds: Vec<&str> = r
        .keys
        .iter()
        .map(|k| match k {
            KeyCell::Text(_) => "value",
            KeyCell::Stack(_) => "stack",
        })
        .collect();
    format!("[{}]", kinds.join(", "))
}

/// Compares two snapshots of the same program's aggregations (`before_name`/`after_name` name
/// the sides in errors). An aggregation on both sides must have the same function, parameters
/// and key layout (an empty one matches any); one on a single side is compared with an empty
/// one (a saved result leaves out the aggregations that had no entry). Rows are matched by
/// their keys as rendered. The aggregations keep the order of `before`, then those only
/// `after` has.
pub fn compare(
    before: &[AggView],
    after: &[AggView],
    before_name: &str,
    after_name: &str,
) -> Result<Vec<AggDiff>, String> {
    // an aggregation with no entry is not in a saved result: one side only has it
    let empty = |name: &str| AggView {
        name: name.to_string(),
        rows: Vec::new(),
    };
    let mut pairs: Vec<(AggView, AggView)> = before
        .iter()
        .map(|b| {
            let a = after.iter().find(|a| a.name == b.name);
            (b.clone(), a.cloned().unwrap_or_else(|| empty(&b.name)))
        })
        .collect();
    for a in after {
        if !before.iter().any(|b| b.name == a.name) {
            pairs.push((empty(&a.name), a.clone()));
        }
    }
    let mut out = Vec::new();
    for (b, a) in &pairs {
        if let (Some(rb), Some(ra)) = (b.rows.first(), a.rows.first()) {
            let (sb, sa) = (shape(&rb.value), shape(&ra.value));
            if sb != sa {
                return Err(format!(
                    "{}: {sb} in {before_name} but {sa} in {after_name}: the aggregations differ in shape",
                    b.name
                ));
            }
            let (kb, ka) = (key_layout(rb), key_layout(ra));
            if rb.keys.len() != ra.keys.len() || kb != ka {
                return Err(format!(
                    "{}: keys {kb} in {before_name} but {ka} in {after_name}: the aggregations differ in shape",
                    b.name
                ));
            }
        }
        let func = match b.func() {
            "" => a.func(),
            f => f,
        };
        let mut rows: Vec<RowDiff> = Vec::with_capacity(b.rows.len().max(a.rows.len()));
        let mut index: std::collections::HashMap<&[KeyCell], usize> =
            std::collections::HashMap::new();
        for r in &b.rows {
            index.insert(&r.keys, rows.len());
            rows.push(RowDiff {
                keys: r.keys.clone(),
                before: Some(r.value.clone()),
                after: None,
            });
        }
        for r in &a.rows {
            match index.get(r.keys.as_slice()) {
                Some(&i) => rows[i].after = Some(r.value.clone()),
                None => rows.push(RowDiff {
                    keys: r.keys.clone(),
                    before: None,
                    after: Some(r.value.clone()),
                }),
            }
        }
        out.push(AggDiff {
            name: b.name.clone(),
            func,
            rows,
        });
    }
    Ok(out)
}

/// A value's bucket counts (empty for the functions that have none).
pub fn buckets(v: &AggValue) -> &[i64] {
    match v {
        AggValue::Quantize(b)
        | AggValue::Lquantize { buckets: b, .. }
        | AggValue::Llquantize { buckets: b, .. } => b,
        _ => &[],
    }
}

/// Whether a function's values are totals that grow with the length of a run (`count`,
/// `sum` and the quantizations' counts), so that dividing by the run's seconds gives a rate;
/// `avg`, `min`, `max` and `stddev` are not.
pub fn is_total(func: &str) -> bool {
    matches!(
        func,
        "count" | "sum" | "quantize" | "lquantize" | "llquantize"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(name: &str, rows: &[(&str, AggValue)]) -> AggView {
        AggView {
            name: name.into(),
            rows: rows
                .iter()
                .map(|(k, v)| AggRow {
                    keys: vec![KeyCell::Text(k.to_string())],
                    value: v.clone(),
                })
                .collect(),
        }
    }

    #[test]
    fn rows_match_by_key_new_and_gone() {
        let b = [view(
            "@c",
            &[("read", AggValue::Count(3)), ("open", AggValue::Count(1))],
        )];
        let a = [view(
            "@c",
            &[("read", AggValue::Count(5)), ("close", AggValue::Count(2))],
        )];
        let d = compare(&b, &a, "a", "b").unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].func, "count");
        let got: Vec<(String, Presence)> = d[0]
            .rows
            .iter()
            .map(|r| (r.keys[0].text().to_string(), r.presence()))
            .collect();
        assert_eq!(
            got,
            [
                ("read".to_string(), Presence::Both),
                ("open".to_string(), Presence::Gone),
                ("close".to_string(), Presence::New)
            ]
        );
        assert_eq!(d[0].rows[0].after, Some(AggValue::Count(5)));
    }

    #[test]
    fn shapes_that_differ_are_refused() {
        let b = [view("@c", &[("x", AggValue::Count(3))])];
        let e = compare(&b, &[view("@c", &[("x", AggValue::Sum(3))])], "a", "b").unwrap_err();
        assert!(e.contains("count() in a but sum() in b"), "{e}");
        // one side only: compared with an empty one
        let d = compare(&b, &[view("@d", &[("y", AggValue::Count(2))])], "a", "b").unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].rows[0].presence(), Presence::Gone);
        assert_eq!(
            (d[1].name.as_str(), d[1].rows[0].presence()),
            ("@d", Presence::New)
        );
        let lq = |base| AggValue::Lquantize {
            base,
            step: 1,
            levels: 4,
            buckets: vec![0; 6],
        };
        let e = compare(
            &[view("@q", &[("x", lq(0))])],
            &[view("@q", &[("x", lq(2))])],
            "a",
            "b",
        )
        .unwrap_err();
        assert!(
            e.contains("lquantize(0, 1, 4) in a but lquantize(2, 1, 4)"),
            "{e}"
        );
        let two = AggView {
            name: "@c".into(),
            rows: vec![AggRow {
                keys: vec![KeyCell::Text("x".into()), KeyCell::Text("y".into())],
                value: AggValue::Count(1),
            }],
        };
        assert!(compare(&b, &[two], "a", "b")
            .unwrap_err()
            .contains("differ in shape"));
        // an empty aggregation matches any
        assert!(compare(&b, &[view("@c", &[])], "a", "b").is_ok());
    }
}
