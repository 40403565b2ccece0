//! The results' model: the latest aggregation snapshot, one table (or stack tree) per
//! aggregation, which one is shown, and the rule that old results stay until new ones arrive.

use std::collections::HashMap;

use super::agg_table::AggTable;
use super::baseline::Baseline;
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
    /// Results kept aside to compare with (`b`; `--baseline FILE`).
    pub baseline: Option<Baseline>,
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
        self.apply_baseline();
    }

    /// Keeps the results shown as the baseline; `None` when there are none yet.
    pub fn set_baseline(&mut self, label: String) -> Option<&Baseline> {
        if self.views.is_empty() {
            return None;
        }
        self.baseline = Some(Baseline::of_views(label, &self.views));
        self.apply_baseline();
        self.baseline.as_ref()
    }

    /// Compares with a baseline from elsewhere (a file), or with none.
    pub fn use_baseline(&mut self, b: Option<Baseline>) {
        self.baseline = b;
        self.apply_baseline();
    }

    /// Each table row's change against the baseline.
    fn apply_baseline(&mut self) {
        let b = self.baseline.as_ref();
        for v in &self.views {
            let Some(t) = self.tables.get_mut(&v.name) else {
                continue;
            };
            if let Some(st) = self.stacks.get_mut(&v.name) {
                st.set_base(b.and_then(|b| b.frames(&v.name)).cloned());
            }
            t.has_baseline = b.is_some_and(|b| b.has(&v.name));
            t.gone = b.map_or(0, |b| b.gone(&v.name, v));
            for r in &mut t.rows {
                r.change =
                    b.and_then(|b| v.rows.get(r.entry).and_then(|row| b.change(&v.name, row)));
            }
        }
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

    fn snap(generation: u64, rows: &[(&str, u64)]) -> Snapshot {
        Snapshot {
            generation,
            time_ns: generation * 1000,
            aggs: vec![AggView::counts("@", rows)],
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

    #[test]
    fn a_baseline_gives_each_row_its_change_across_a_rerun() {
        use crate::tui::baseline::Change;
        let mut r = Results::default();
        assert!(r.set_baseline("nothing".into()).is_none());
        r.update(snap(1, &[("a", 4), ("b", 2)]));
        assert!(r.set_baseline("run #1".into()).is_some());
        assert!(r.tables["@"]
            .rows
            .iter()
            .all(|row| row.change == Some(Change::By(0))));
        r.expect_generation(2);
        r.update(snap(2, &[("a", 10), ("c", 1)]));
        let t = &r.tables["@"];
        assert!(t.has_baseline);
        assert_eq!(t.gone, 1, "b is gone");
        let by_key = |k: &str| t.rows.iter().find(|row| row.keys[0] == k).unwrap().change;
        assert_eq!(by_key("a"), Some(Change::By(6)));
        assert_eq!(by_key("c"), Some(Change::New));
        r.use_baseline(None);
        assert!(r.tables["@"].rows.iter().all(|row| row.change.is_none()));
    }
}
