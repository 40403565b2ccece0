//! The model of one aggregation shown as a table: rows sorted by any key column or the value,
//! the change since the previous snapshot, the rate per second (of trace time over a trace),
//! and a short history of each leading row's value for its sparkline.

use std::collections::{HashMap, VecDeque};

use crate::agg::snapshot::AggView;

/// Points kept for a row's sparkline.
pub const HISTORY: usize = 40;
/// Rows whose history is kept (the top of the table).
const HISTORY_ROWS: usize = 200;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    Value,
    Key(usize),
    Delta,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TableRow {
    pub keys: Vec<String>,
    pub value: i64,
    pub delta: i64,
    pub rate: f64,
    /// Index of the entry in the view (for its histogram).
    pub entry: usize,
    /// The change against the console's baseline, when it has this aggregation.
    pub change: Option<super::baseline::Change>,
}

pub struct AggTable {
    pub sort: SortBy,
    pub descending: bool,
    pub rows: Vec<TableRow>,
    pub key_columns: usize,
    prev: HashMap<String, i64>,
    prev_time: Option<u64>,
    history: HashMap<String, VecDeque<u64>>,
    pub selected: usize,
    /// The baseline has this aggregation: the table shows each row's change against it.
    pub has_baseline: bool,
    /// Keys of the baseline this aggregation no longer has.
    pub gone: usize,
}

impl Default for AggTable {
    fn default() -> Self {
        AggTable {
            sort: SortBy::Value,
            descending: true,
            rows: Vec::new(),
            key_columns: 0,
            prev: HashMap::new(),
            prev_time: None,
            history: HashMap::new(),
            selected: 0,
            has_baseline: false,
            gone: 0,
        }
    }
}

fn row_id(keys: &[String]) -> String {
    keys.join("\u{1f}")
}

impl AggTable {
    /// Takes in a new snapshot of the aggregation taken at `time_ns`.
    pub fn update(&mut self, view: &AggView, time_ns: u64) {
        let dt = self
            .prev_time
            .map(|t| time_ns.saturating_sub(t) as f64 / 1e9)
            .unwrap_or(0.0);
        let mut next_prev = HashMap::with_capacity(view.rows.len());
        self.key_columns = view.rows.first().map_or(0, |r| r.keys.len());
        self.rows = view
            .rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let keys: Vec<String> = r.keys.iter().map(|k| k.text().to_string()).collect();
                let value = r.value.scalar();
                let id = row_id(&keys);
                let before = self.prev.get(&id).copied();
                let delta = before.map_or(0, |b| value - b);
                next_prev.insert(id, value);
                TableRow {
                    keys,
                    value,
                    delta,
                    rate: if dt > 0.0 && before.is_some() {
                        delta as f64 / dt
                    } else {
                        0.0
                    },
                    entry: i,
                    change: None,
                }
            })
            .collect();
        self.prev = next_prev;
        self.prev_time = Some(time_ns);
        self.sort_rows();
        // history for the leading rows; forget rows that left the top
        let mut history = HashMap::with_capacity(HISTORY_ROWS);
        for r in self.rows.iter().take(HISTORY_ROWS) {
            let id = row_id(&r.keys);
            let mut h = self.history.remove(&id).unwrap_or_default();
            if h.len() == HISTORY {
                h.pop_front();
            }
            h.push_back(r.value.max(0) as u64);
            history.insert(id, h);
        }
        self.history = history;
        self.selected = self.selected.min(self.rows.len().saturating_sub(1));
    }

    /// The recent values of a row.
    pub fn history_of(&self, row: &TableRow) -> Vec<u64> {
        self.history
            .get(&row_id(&row.keys))
            .map(|h| h.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Sorts by the next column: value, delta, then each key.
    pub fn next_sort(&mut self) {
        self.sort = match self.sort {
            SortBy::Value => SortBy::Delta,
            SortBy::Delta if self.key_columns > 0 => SortBy::Key(0),
            SortBy::Delta => SortBy::Value,
            SortBy::Key(k) if k + 1 < self.key_columns => SortBy::Key(k + 1),
            SortBy::Key(_) => SortBy::Value,
        };
        self.descending = !matches!(self.sort, SortBy::Key(_));
        self.sort_rows();
    }

    pub fn reverse(&mut self) {
        self.descending = !self.descending;
        self.sort_rows();
    }

    fn sort_rows(&mut self) {
        let by = self.sort;
        self.rows.sort_by(|a, b| {
            let o = match by {
                SortBy::Value => a.value.cmp(&b.value),
                SortBy::Delta => a.delta.cmp(&b.delta),
                SortBy::Key(k) => compare_keys(a.keys.get(k), b.keys.get(k)),
            };
            // ties: by the keys, so the order is stable between refreshes
            o.then_with(|| a.keys.cmp(&b.keys))
        });
        if self.descending {
            self.rows.reverse();
        }
    }
}

/// Numbers compare as numbers, other text as text.
fn compare_keys(a: Option<&String>, b: Option<&String>) -> std::cmp::Ordering {
    match (
        a.and_then(|s| s.parse::<i128>().ok()),
        b.and_then(|s| s.parse::<i128>().ok()),
    ) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => a.cmp(&b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(rows: &[(&str, u64)]) -> AggView {
        AggView::counts("@", rows)
    }

    #[test]
    fn sorts_deltas_rates_and_history() {
        let mut t = AggTable::default();
        t.update(&view(&[("a", 5), ("b", 10), ("10", 1), ("9", 1)]), 0);
        assert_eq!(t.rows[0].keys[0], "b");
        t.update(
            &view(&[("a", 25), ("b", 11), ("10", 1), ("9", 1)]),
            2_000_000_000,
        );
        assert_eq!(t.rows[0].keys[0], "a");
        assert_eq!(t.rows[0].delta, 20);
        assert_eq!(t.rows[0].rate, 10.0);
        assert_eq!(t.history_of(&t.rows[0].clone()), vec![5, 25]);
        t.next_sort(); // delta
        assert_eq!(t.rows[0].keys[0], "a");
        t.next_sort(); // key 0, ascending; numbers as numbers
        let keys: Vec<&str> = t.rows.iter().map(|r| r.keys[0].as_str()).collect();
        assert_eq!(keys, ["9", "10", "a", "b"]);
        t.reverse();
        assert_eq!(t.rows[0].keys[0], "b");
    }
}
