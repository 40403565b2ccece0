//! The results' model: the latest aggregation snapshot, one table (or stack tree) per
//! aggregation, which one is shown, and the rule that old results stay until new ones arrive.

use std::collections::HashMap;

use super::agg_table::AggTable;
use super::stack_tree::StackTree;
use crate::agg::snapshot::{AggView, Snapshot};

#[derive(Default)]
pub struct Results {
    pub views: Vec<AggView>,
    pub tables: HashMap<String, AggTable>,
    pub stacks: HashMap<String, StackTree>,
    pub current: usize,
    /// Generation of the views shown.
    pub generation: u64,
    /// A newer program runs but has no results yet: the ones shown are its predecessor's.
    pub stale: bool,
    awaited: u64,
    pub time_ns: u64,
}

impl Results {
    /// A re-run is on its way: keep showing these results until its first ones come.
    pub fn expect_generation(&mut self, g: u64) {
        self.awaited = self.awaited.max(g);
        self.stale = !self.views.is_empty();
    }

    pub fn update(&mut self, s: Snapshot) {
        let has_data = s.aggs.iter().any(|a| !a.rows.is_empty());
        if s.generation < self.generation {
            return;
        }
        if s.generation > self.generation {
            if !has_data && !self.views.is_empty() {
                // nothing new yet: the previous results stay visible
                self.stale = true;
                return;
            }
            self.tables.clear();
            self.stacks.clear();
            self.current = 0;
            self.generation = s.generation;
        }
        self.stale = self.generation < self.awaited;
        for v in &s.aggs {
            if v.has_stack_key() {
                self.stacks.entry(v.name.clone()).or_default().update(v);
            }
            self.tables
                .entry(v.name.clone())
                .or_default()
                .update(v, s.time_ns);
        }
        self.time_ns = s.time_ns;
        self.views = s.aggs;
        self.current = self.current.min(self.views.len().saturating_sub(1));
    }

    pub fn current_view(&self) -> Option<&AggView> {
        self.views.get(self.current)
    }

    pub fn next_view(&mut self, d: isize) {
        let n = self.views.len() as isize;
        if n > 0 {
            self.current = (self.current as isize + d).rem_euclid(n) as usize;
        }
    }

    fn current_name(&self) -> Option<String> {
        self.current_view().map(|v| v.name.clone())
    }

    pub fn move_by(&mut self, d: isize) {
        let Some(name) = self.current_name() else {
            return;
        };
        if let Some(st) = self.stacks.get_mut(&name) {
            st.move_by(d);
        } else if let Some(t) = self.tables.get_mut(&name) {
            let n = t.rows.len() as isize;
            t.selected = (t.selected as isize)
                .saturating_add(d)
                .clamp(0, (n - 1).max(0)) as usize;
        }
    }

    pub fn next_sort(&mut self) {
        if let Some(t) = self.current_name().and_then(|n| self.tables.get_mut(&n)) {
            t.next_sort();
        }
    }

    pub fn reverse(&mut self) {
        if let Some(t) = self.current_name().and_then(|n| self.tables.get_mut(&n)) {
            t.reverse();
        }
    }

    pub fn toggle(&mut self) {
        if let Some(st) = self.current_name().and_then(|n| self.stacks.get_mut(&n)) {
            st.toggle();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agg::snapshot::{AggRow, KeyCell};
    use crate::agg::AggValue;

    fn snap(generation: u64, rows: &[(&str, u64)]) -> Snapshot {
        Snapshot {
            generation,
            time_ns: generation * 1000,
            aggs: vec![AggView {
                name: "@".into(),
                rows: rows
                    .iter()
                    .map(|(k, v)| AggRow {
                        keys: vec![KeyCell::Text(k.to_string())],
                        value: AggValue::Count(*v),
                    })
                    .collect(),
            }],
        }
    }

    #[test]
    fn old_results_stay_until_new_ones_arrive() {
        let mut r = Results::default();
        r.update(snap(1, &[("a", 1)]));
        r.expect_generation(2);
        assert!(r.stale);
        r.update(snap(2, &[]));
        assert_eq!(r.views[0].rows.len(), 1);
        assert!(r.stale);
        r.update(snap(2, &[("b", 2)]));
        assert!(!r.stale);
        assert_eq!(r.tables["@"].rows[0].keys[0], "b");
        // a late snapshot of the old program is ignored
        r.update(snap(1, &[("a", 9)]));
        assert_eq!(r.tables["@"].rows[0].keys[0], "b");
    }
}
