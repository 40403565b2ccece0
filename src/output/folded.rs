//! Aggregations out of dtx in the formats other tools read: folded stacks (`root;...;leaf
//! count`, one line per stack, the input of inferno, flamegraph.pl and speedscope), an SVG flame
//! graph drawn by the `inferno` crate, and a table as CSV or JSON. Each works on one
//! aggregation of a snapshot ([`AggView`]), so the console can export what it shows and the
//! command line can write `-x oformat=folded`.

use std::io::Write;

use super::json::Json;
use crate::agg::snapshot::{AggView, KeyCell};

/// What a frame may not contain in a folded line: `;` separates frames and a newline ends the
/// line; both become `_`.
fn clean_frame(f: &str) -> String {
    f.chars()
        .map(|c| {
            if matches!(c, ';' | '\n' | '\r') {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// The folded stack of one row: its keys in order, a stack key as its frames from the
/// outermost (root) to the innermost, other keys as one frame each (so `@[execname, ustack()]`
/// roots each process's stacks at its name). A row with no frame at all folds to `[empty]`.
pub fn folded_frames(keys: &[KeyCell]) -> String {
    let mut frames: Vec<String> = Vec::new();
    for k in keys {
        match k {
            KeyCell::Text(t) => frames.push(clean_frame(t)),
            KeyCell::Stack(f) => frames.extend(f.iter().rev().map(|s| clean_frame(s))),
        }
    }
    if frames.is_empty() {
        frames.push("[empty]".into());
    }
    frames.join(";")
}

/// The folded lines of an aggregation: `(frames, count)` per row, the count being the row's
/// value as dtrace prints it (a quantization's total count); rows of zero or less are left out
/// (a flame graph has no room for them). Lines with the same frames are merged.
pub fn folded_lines(view: &AggView) -> Vec<(String, u64)> {
    let mut lines: Vec<(String, u64)> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for row in &view.rows {
        let v = row.value.scalar();
        if v <= 0 {
            continue;
        }
        let f = folded_frames(&row.keys);
        match index.get(&f) {
            Some(&i) => lines[i].1 = lines[i].1.saturating_add(v as u64),
            None => {
                index.insert(f.clone(), lines.len());
                lines.push((f, v as u64));
            }
        }
    }
    lines.sort();
    lines
}

/// Appends the folded lines of an aggregation (`frames count\n` each).
pub fn write_folded(view: &AggView, out: &mut Vec<u8>) {
    for (f, n) in folded_lines(view) {
        let _ = writeln!(out, "{f} {n}");
    }
}

/// Draws an aggregation's stacks as an SVG flame graph titled `title` (inferno's renderer:
/// one box per frame, its width the share of the total count).
pub fn write_flame_svg(view: &AggView, title: &str, out: impl Write) -> Result<(), String> {
    let lines: Vec<String> = folded_lines(view)
        .into_iter()
        .map(|(f, n)| format!("{f} {n}"))
        .collect();
    if lines.is_empty() {
        return Err(format!(
            "{}: no stack with a positive count to draw",
            view.name
        ));
    }
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = view.func().to_string();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), out)
        .map_err(|e| format!("{}: flame graph: {e}", view.name))
}

/// One key cell as a single text field (a stack's frames joined by `;`, innermost last as in
/// folded stacks).
fn cell_text(k: &KeyCell) -> String {
    match k {
        KeyCell::Text(t) => t.clone(),
        KeyCell::Stack(f) => f.iter().rev().cloned().collect::<Vec<_>>().join(";"),
    }
}

/// A CSV field, quoted when it holds a comma, quote or line break (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The aggregation as a CSV table: a header `key1,...,keyN,<function>`, then one line per row
/// with the value as dtrace prints it (a quantization's total count).
pub fn write_table_csv(view: &AggView, mut out: impl Write) -> std::io::Result<()> {
    let nkeys = view.rows.first().map_or(0, |r| r.keys.len());
    let mut header: Vec<String> = (1..=nkeys).map(|i| format!("key{i}")).collect();
    header.push(match view.func() {
        "" => "value".to_string(),
        f => f.to_string(),
    });
    writeln!(out, "{}", header.join(","))?;
    for row in &view.rows {
        let mut fields: Vec<String> = row.keys.iter().map(|k| csv_field(&cell_text(k))).collect();
        fields.push(row.value.scalar().to_string());
        writeln!(out, "{}", fields.join(","))?;
    }
    Ok(())
}

/// The aggregation as a JSON table: `{"aggregation-name", "function", "rows": [{"keys": [...],
/// "value": n}]}`, a stack key as its list of frames (innermost first).
pub fn table_json(view: &AggView) -> Json {
    let rows = view
        .rows
        .iter()
        .map(|r| {
            let keys = r
                .keys
                .iter()
                .map(|k| match k {
                    KeyCell::Text(t) => Json::str(t.clone()),
                    KeyCell::Stack(f) => {
                        Json::Array(f.iter().map(|s| Json::str(s.clone())).collect())
                    }
                })
                .collect();
            Json::object([
                ("keys", Json::Array(keys)),
                ("value", Json::Int(r.value.scalar())),
            ])
        })
        .collect();
    Json::object([
        (
            "aggregation-name",
            Json::str(view.name.strip_prefix('@').unwrap_or(&view.name)),
        ),
        ("function", Json::str(view.func())),
        ("rows", Json::Array(rows)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agg::snapshot::AggRow;
    use crate::agg::AggValue;

    fn stacks() -> AggView {
        let row = |proc_: &str, frames: &[&str], n: u64| AggRow {
            keys: vec![
                KeyCell::Text(proc_.into()),
                KeyCell::Stack(frames.iter().map(|s| s.to_string()).collect()),
            ],
            value: AggValue::Count(n),
        };
        AggView {
            name: "@s".into(),
            rows: vec![
                row("a.exe", &["k`leaf+0x1", "k`mid", "k;root"], 3),
                row("a.exe", &["k`other", "k`mid", "k;root"], 2),
                row("b.exe", &[], 1),
            ],
        }
    }

    #[test]
    fn folds_root_first_and_sums() {
        let lines = folded_lines(&stacks());
        assert_eq!(
            lines,
            vec![
                ("a.exe;k_root;k`mid;k`leaf+0x1".to_string(), 3),
                ("a.exe;k_root;k`mid;k`other".to_string(), 2),
                ("b.exe".to_string(), 1),
            ]
        );
        let mut out = Vec::new();
        write_folded(&stacks(), &mut out);
        let total: u64 = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum();
        assert_eq!(total, 6);
    }

    #[test]
    fn svg_and_tables() {
        let mut svg = Vec::new();
        write_flame_svg(&stacks(), "stacks", &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(svg.contains("<svg"), "{}", &svg[..200.min(svg.len())]);
        assert!(svg.contains("k`leaf+0x1"));
        let mut csv = Vec::new();
        write_table_csv(&stacks(), &mut csv).unwrap();
        let csv = String::from_utf8(csv).unwrap();
        assert_eq!(csv.lines().next(), Some("key1,key2,count"));
        assert!(csv.contains("a.exe,k;root;k`mid;k`leaf+0x1,3"), "{csv}");
        let j = table_json(&stacks()).to_json();
        assert!(j.starts_with(r#"{"aggregation-name":"s","function":"count","rows":[{"keys":["a.exe",["k`leaf+0x1""#), "{j}");
        let empty = AggView {
            name: "@e".into(),
            rows: vec![],
        };
        assert!(write_flame_svg(&empty, "e", Vec::new()).is_err());
    }
}
