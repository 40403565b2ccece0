//! Aggregation snapshots: what a program's aggregations hold at one moment, with keys already
//! rendered as text, for consumers that draw tables instead of printing dtrace's text (the TUI).

use crate::agg::{AggValue, AggregationTable, SymbolResolver};
use crate::ir::value::Datum;

/// One key component, rendered.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KeyCell {
    Text(String),
    /// A `stack()`/`ustack()` key: frames, innermost first, as text.
    Stack(Vec<String>),
}

impl KeyCell {
    /// The cell as one line of text (a stack shows its innermost frame).
    pub fn text(&self) -> &str {
        match self {
            KeyCell::Text(s) => s,
            KeyCell::Stack(f) => f.first().map(String::as_str).unwrap_or(""),
        }
    }
}

/// One entry of an aggregation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggRow {
    pub keys: Vec<KeyCell>,
    pub value: AggValue,
}

/// One aggregation at the moment of the snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggView {
    /// `@name` as written (`@` alone for the anonymous aggregation).
    pub name: String,
    pub rows: Vec<AggRow>,
}

impl AggView {
    /// A view of `count()`s keyed by one string each, for tests.
    #[cfg(test)]
    pub fn counts(name: &str, rows: &[(&str, u64)]) -> AggView {
        AggView {
            name: name.into(),
            rows: rows
                .iter()
                .map(|(k, v)| AggRow {
                    keys: vec![KeyCell::Text(k.to_string())],
                    value: crate::agg::AggValue::Count(*v),
                })
                .collect(),
        }
    }

    /// What the aggregating function is, from its values (`count`, `quantize`, ...), or `""`
    /// while the aggregation is empty.
    pub fn func(&self) -> &'static str {
        self.rows.first().map_or("", |r| AggView::func_of(&r.value))
    }

    /// The aggregating function a value is of (`count`, `quantize`, ...).
    pub fn func_of(v: &AggValue) -> &'static str {
        match v {
            AggValue::Count(_) => "count",
            AggValue::Sum(_) => "sum",
            AggValue::Avg { .. } => "avg",
            AggValue::Min(_) => "min",
            AggValue::Max(_) => "max",
            AggValue::Stddev { .. } => "stddev",
            AggValue::Quantize(_) => "quantize",
            AggValue::Lquantize { .. } => "lquantize",
            AggValue::Llquantize { .. } => "llquantize",
        }
    }

    /// Whether the rows carry histograms.
    pub fn is_histogram(&self) -> bool {
        matches!(self.func(), "quantize" | "lquantize" | "llquantize")
    }

    /// Whether a key column is a stack.
    pub fn has_stack_key(&self) -> bool {
        self.rows
            .first()
            .is_some_and(|r| r.keys.iter().any(|k| matches!(k, KeyCell::Stack(_))))
    }
}

/// All aggregations of a program at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Which run of the program this is (bumped by each re-run).
    pub generation: u64,
    /// Trace time (ns) or live clock time of the snapshot.
    pub time_ns: u64,
    pub aggs: Vec<AggView>,
}

/// Renders one key component as text.
pub fn key_cell(k: &Datum, symbols: &dyn SymbolResolver) -> KeyCell {
    match k {
        // the aggregation hands integers back sign- or zero-extended to 64 bits already
        Datum::Int { value, signed, .. } => KeyCell::Text(if *signed {
            value.to_string()
        } else {
            (*value as u64).to_string()
        }),
        Datum::Str(s) => KeyCell::Text(String::from_utf8_lossy(s).into_owned()),
        Datum::Bytes(b) => {
            let mut s = String::with_capacity(b.len() * 3);
            for (i, x) in b.iter().enumerate() {
                if i > 0 {
                    s.push(' ');
                }
                s.push_str(&format!("{x:02x}"));
            }
            KeyCell::Text(s)
        }
        Datum::Stack {
            frames,
            user,
            pid,
            epoch,
        } => KeyCell::Stack(
            frames
                .iter()
                .take_while(|&&f| f != 0)
                .map(|&f| {
                    if *user {
                        symbols.user_at(*pid, *epoch, f)
                    } else {
                        symbols.kernel_at(*epoch, f)
                    }
                })
                .collect(),
        ),
        Datum::Sym(a) => KeyCell::Text(symbols.kernel_func(*a)),
        Datum::Mod(a) => KeyCell::Text(symbols.kmod(*a)),
        Datum::Usym { addr, pid } => KeyCell::Text(symbols.user_func(*pid, *addr)),
        Datum::Umod { addr, pid } => KeyCell::Text(symbols.umod(*pid, *addr)),
        Datum::Uaddr { addr, pid } => KeyCell::Text(symbols.user(*pid, *addr)),
    }
}

/// Takes a snapshot of every aggregation of a table.
pub fn take(table: &AggregationTable, symbols: &dyn SymbolResolver) -> Vec<AggView> {
    (0..table.count() as u32)
        .map(|a| AggView {
            // the anonymous aggregation is `@_` inside, `@` to the user
            name: match table.name(a).unwrap_or("") {
                "@_" => "@".to_string(),
                n => n.to_string(),
            },
            rows: table
                .snapshot_named(a, symbols)
                .into_iter()
                .map(|(keys, value)| AggRow {
                    keys: keys.iter().map(|k| key_cell(k, symbols)).collect(),
                    value,
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agg::NoSymbols;
    use crate::engine::standalone::{standalone_vm, standard_probe};
    use crate::vm::FiringCtx;

    #[test]
    fn snapshot_renders_keys_and_values() {
        let (mut vm, _) = standalone_vm(
            r#"BEGIN { @calls["read", 3] = count(); @calls["read", 3] = count();
                      @calls["write", -1] = count(); @lat = quantize(100); }"#,
        )
        .unwrap();
        let p = standard_probe("BEGIN").unwrap();
        vm.fire(&FiringCtx::synthetic(&p, 1, 1, b"dtx"));
        let views = take(&vm.aggs, &NoSymbols);
        let calls = views.iter().find(|v| v.name == "@calls").unwrap();
        assert_eq!(calls.func(), "count");
        let mut rows: Vec<(String, String, i64)> = calls
            .rows
            .iter()
            .map(|r| {
                (
                    r.keys[0].text().to_string(),
                    r.keys[1].text().to_string(),
                    r.value.scalar(),
                )
            })
            .collect();
        rows.sort();
        assert_eq!(
            rows,
            vec![
                ("read".into(), "3".into(), 2),
                ("write".into(), "-1".into(), 1)
            ]
        );
        let lat = views.iter().find(|v| v.name == "@lat").unwrap();
        assert!(lat.is_histogram());
        assert_eq!(lat.rows.len(), 1);
    }
}
