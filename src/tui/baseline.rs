//! The console's baseline: the results of one moment kept aside, so that the tables show each
//! key's change against them after a re-run (F5) or over another trace. Set with `b` in the
//! aggregations pane (which also saves it as `dtx-baseline.json` in the working directory),
//! dropped with `B`, loaded at start with `--baseline FILE` (such a file, or a result saved with
//! `-x oformat=json`, as `dtx --diff` reads). A key is matched by every component, a stack by
//! every frame; an aggregation is matched by its name. For an aggregation keyed by a stack it
//! also keeps each node of the stack tree (`frame_paths`), so that the tree shows
//! each frame's change; the paths are this module's (`frame_paths`), and the tree reads them.

use std::collections::HashMap;

use crate::agg::snapshot::{AggRow, AggView, KeyCell};
use crate::output::json::{parse, Json};

/// Each node's total by its path from the outermost frame in (`frame_paths`): what a baseline
/// keeps of a stack aggregation, so that each frame of a later tree has its change.
pub type FramePaths = HashMap<String, i64>;

/// The path of a node: its frames from the outermost in, each after a newline.
pub(crate) fn child_path(parent: &str, frame: &str) -> String {
    format!("{parent}\n{frame}")
}

/// Every node's total, by path, of a view's stacks (the first stack key of each row).
pub fn frame_paths(view: &AggView) -> FramePaths {
    let mut out = FramePaths::new();
    for (frames, v) in stacks(view) {
        let mut p = String::new();
        for f in frames.iter().rev() {
            p = child_path(&p, f);
            *out.entry(p.clone()).or_default() += v;
        }
    }
    out
}

/// Each row's first stack key and its value.
pub(crate) fn stacks(view: &AggView) -> impl Iterator<Item = (&Vec<String>, i64)> {
    view.rows.iter().filter_map(
        |r| match r.keys.iter().find(|k| matches!(k, KeyCell::Stack(_))) {
            Some(KeyCell::Stack(frames)) => Some((frames, r.value.scalar())),
            _ => None,
        },
    )
}

/// The tag a saved baseline carries, with its format's version.
const TAG: &str = "dtx-baseline";

/// Results kept aside: per aggregation, each key's value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Baseline {
    /// What it was taken from (the run, or the file it was loaded from).
    pub label: String,
    aggs: HashMap<String, HashMap<String, i64>>,
    /// Per aggregation keyed by a stack: each node of its stack tree.
    frames: HashMap<String, FramePaths>,
}

/// A key as one string: its components, a stack's frames, each set apart.
pub fn key_id(keys: &[KeyCell]) -> String {
    let mut s = String::new();
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            s.push('\u{1f}');
        }
        match k {
            KeyCell::Text(t) => s.push_str(t),
            KeyCell::Stack(frames) => s.push_str(&frames.join("\u{1e}")),
        }
    }
    s
}

/// A row's change against the baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The key was there: now minus then.
    By(i64),
    /// The key is new since the baseline.
    New,
}

impl Baseline {
    /// The baseline of these results.
    pub fn of_views(label: impl Into<String>, views: &[AggView]) -> Baseline {
        let aggs = views
            .iter()
            .map(|v| {
                let rows = v
                    .rows
                    .iter()
                    .map(|r| (key_id(&r.keys), r.value.scalar()))
                    .collect();
                (v.name.clone(), rows)
            })
            .collect();
        let frames = views
            .iter()
            .filter(|v| v.has_stack_key())
            .map(|v| (v.name.clone(), frame_paths(v)))
            .collect();
        Baseline {
            label: label.into(),
            aggs,
            frames,
        }
    }

    /// The stack tree of `agg` as the baseline had it, when `agg` is keyed by a stack.
    pub fn frames(&self, agg: &str) -> Option<&FramePaths> {
        self.frames.get(agg)
    }

    /// Whether the baseline has this aggregation.
    pub fn has(&self, agg: &str) -> bool {
        self.aggs.contains_key(agg)
    }

    /// A row's change, or `None` when the baseline has no such aggregation.
    pub fn change(&self, agg: &str, row: &AggRow) -> Option<Change> {
        let rows = self.aggs.get(agg)?;
        Some(match rows.get(&key_id(&row.keys)) {
            Some(then) => Change::By(row.value.scalar().saturating_sub(*then)),
            None => Change::New,
        })
    }

    /// Keys of `agg` in the baseline that `now` has no more.
    pub fn gone(&self, agg: &str, now: &AggView) -> usize {
        let Some(rows) = self.aggs.get(agg) else {
            return 0;
        };
        let present: std::collections::HashSet<String> =
            now.rows.iter().map(|r| key_id(&r.keys)).collect();
        rows.keys().filter(|k| !present.contains(*k)).count()
    }

    /// The baseline as a file: `{"dtx-baseline": 1, "label": ..., "aggregations": [{"name",
    /// "rows": [{"key", "value"}]}]}`, aggregations and keys in sorted order.
    pub fn to_json(&self) -> String {
        let mut names: Vec<&String> = self.aggs.keys().collect();
        names.sort();
        let aggs = names
            .into_iter()
            .map(|n| {
                let mut rows: Vec<(&String, &i64)> = self.aggs[n].iter().collect();
                rows.sort();
                let pairs = |rows: Vec<(&String, &i64)>, k: &'static str| {
                    Json::Array(
                        rows.into_iter()
                            .map(|(key, v)| {
                                Json::object([
                                    (k, Json::str(key.clone())),
                                    ("value", Json::Int(*v)),
                                ])
                            })
                            .collect(),
                    )
                };
                let mut fields = vec![("name", Json::str(n.clone())), ("rows", pairs(rows, "key"))];
                if let Some(f) = self.frames.get(n) {
                    let mut paths: Vec<(&String, &i64)> = f.iter().collect();
                    paths.sort();
                    fields.push(("frames", pairs(paths, "path")));
                }
                Json::object(fields)
            })
            .collect();
        let mut s = Json::object([
            (TAG, Json::Int(1)),
            ("label", Json::str(self.label.clone())),
            ("aggregations", Json::Array(aggs)),
        ])
        .to_json_pretty();
        s.push('\n');
        s
    }

    /// A saved baseline (`to_json`'s), or `None` when the text is JSON of another kind (a saved
    /// result, which the command line turns into views); an error for a malformed one.
    pub fn from_json(text: &str) -> Result<Option<Baseline>, String> {
        let doc = parse(text.trim()).map_err(|e| e.to_string())?;
        match doc.get(TAG) {
            None => return Ok(None),
            Some(Json::Int(1)) | Some(Json::UInt(1)) => {}
            Some(v) => return Err(format!("a baseline of version {v:?}: this dtx reads 1")),
        }
        let label = match doc.get("label") {
            Some(Json::Str(s)) => s.clone(),
            _ => String::new(),
        };
        let Some(Json::Array(list)) = doc.get("aggregations") else {
            return Err("a baseline without aggregations".into());
        };
        let mut aggs = HashMap::new();
        let mut frames = HashMap::new();
        for a in list {
            let Some(Json::Str(name)) = a.get("name") else {
                return Err("an aggregation without a name".into());
            };
            let Some(Json::Array(rows)) = a.get("rows") else {
                return Err(format!("{name}: no rows"));
            };
            aggs.insert(name.clone(), pairs_of(name, rows, "key")?);
            // a stack aggregation's tree (absent from a file without it: the table still compares)
            if let Some(f) = a.get("frames") {
                let Json::Array(f) = f else {
                    return Err(format!("{name}: frames that are not a list"));
                };
                frames.insert(name.clone(), pairs_of(name, f, "path")?);
            }
        }
        Ok(Some(Baseline {
            label,
            aggs,
            frames,
        }))
    }
}

/// A saved list of `{k, "value"}` objects as a map.
fn pairs_of(name: &str, list: &[Json], k: &str) -> Result<HashMap<String, i64>, String> {
    let mut m = HashMap::with_capacity(list.len());
    for r in list {
        let (Some(Json::Str(key)), Some(v)) = (r.get(k), r.get("value")) else {
            return Err(format!("{name}: an entry without {k} and value"));
        };
        let v = match v {
            Json::Int(i) => *i,
            Json::UInt(u) => i64::try_from(*u).unwrap_or(i64::MAX),
            _ => return Err(format!("{name}: a value that is not an integer")),
        };
        m.insert(key.clone(), v);
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agg::AggValue;

    fn view(name: &str, rows: &[(&str, u64)]) -> AggView {
        AggView::counts(name, rows)
    }

    #[test]
    fn changes_new_and_gone_keys_and_a_round_trip() {
        let b = Baseline::of_views("run #1", &[view("@c", &[("a", 10), ("b", 5)])]);
        let now = view("@c", &[("a", 25), ("c", 1)]);
        assert_eq!(b.change("@c", &now.rows[0]), Some(Change::By(15)));
        assert_eq!(b.change("@c", &now.rows[1]), Some(Change::New));
        assert_eq!(b.change("@other", &now.rows[0]), None);
        assert_eq!(b.gone("@c", &now), 1);
        let back = Baseline::from_json(&b.to_json()).unwrap().unwrap();
        assert_eq!(back, b);
        // another kind of JSON is not a baseline; a broken baseline is an error
        assert_eq!(Baseline::from_json("{\"dtrace\": {}}").unwrap(), None);
        assert!(Baseline::from_json("{\"dtx-baseline\": 2}").is_err());
        assert!(Baseline::from_json("{\"dtx-baseline\": 1}").is_err());
        assert!(Baseline::from_json("not json").is_err());
    }

    #[test]
    fn stacks_match_by_every_frame() {
        let stack = |f: &[&str]| AggRow {
            keys: vec![KeyCell::Stack(f.iter().map(|s| s.to_string()).collect())],
            value: AggValue::Count(3),
        };
        let b = Baseline::of_views(
            "x",
            &[AggView {
                name: "@s".into(),
                rows: vec![stack(&["f", "main"])],
            }],
        );
        assert_eq!(b.change("@s", &stack(&["f", "main"])), Some(Change::By(0)));
        assert_eq!(b.change("@s", &stack(&["f", "other"])), Some(Change::New));
        // the stack tree's nodes, kept and saved with it
        let tree = b.frames("@s").unwrap();
        assert_eq!(tree.get("\nmain"), Some(&3));
        assert_eq!(tree.get("\nmain\nf"), Some(&3));
        let back = Baseline::from_json(&b.to_json()).unwrap().unwrap();
        assert_eq!(back, b);
        assert!(Baseline::from_json(
            "{\"dtx-baseline\": 1, \"aggregations\": [{\"name\": \"@s\", \"rows\": [], \"frames\": 3}]}"
        )
        .is_err());
    }
}
