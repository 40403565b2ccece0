//! Stacks as a collapsible tree (a text flame graph): the entries of an aggregation keyed by
//! `stack()`/`ustack()` merged from the outermost frame in, each node with its total and its
//! share of the whole.

use std::collections::{BTreeMap, HashSet};

use crate::agg::snapshot::{AggView, KeyCell};

#[derive(Default)]
struct Node {
    total: i64,
    children: BTreeMap<String, Node>,
}

/// One visible line of the tree.
#[derive(Clone, Debug, PartialEq)]
pub struct StackRow {
    pub depth: usize,
    pub frame: String,
    pub total: i64,
    pub percent: f64,
    pub open: bool,
    pub leaf: bool,
    path: String,
}

#[derive(Default)]
pub struct StackTree {
    root: Node,
    grand_total: i64,
    /// Paths of closed nodes (nodes are open by default down to `auto_depth`).
    toggled: HashSet<String>,
    rows: Vec<StackRow>,
    pub selected: usize,
}

/// Nodes deeper than this start closed.
const AUTO_DEPTH: usize = 6;

impl StackTree {
    /// Rebuilds the tree from a view's rows (the first stack key of each row).
    pub fn update(&mut self, view: &AggView) {
        let mut root = Node::default();
        let mut total = 0i64;
        for r in &view.rows {
            let Some(KeyCell::Stack(frames)) =
                r.keys.iter().find(|k| matches!(k, KeyCell::Stack(_)))
            else {
                continue;
            };
            let v = r.value.scalar();
            total += v;
            let mut n = &mut root;
            n.total += v;
            // outermost first
            for f in frames.iter().rev() {
                n = n.children.entry(f.clone()).or_default();
                n.total += v;
            }
        }
        self.root = root;
        self.grand_total = total;
        self.rebuild();
    }

    pub fn rows(&self) -> &[StackRow] {
        &self.rows
    }

    pub fn toggle(&mut self) {
        if let Some(r) = self.rows.get(self.selected) {
            if !r.leaf {
                let p = r.path.clone();
                if !self.toggled.remove(&p) {
                    self.toggled.insert(p);
                }
                self.rebuild();
            }
        }
    }

    pub fn move_by(&mut self, d: isize) {
        let n = self.rows.len() as isize;
        if n == 0 {
            self.selected = 0;
        } else {
            self.selected = (self.selected as isize + d).clamp(0, n - 1) as usize;
        }
    }

    fn rebuild(&mut self) {
        let mut rows = Vec::new();
        let total = self.grand_total.max(1) as f64;
        walk(&self.root, 0, "", &self.toggled, total, &mut rows);
        self.rows = rows;
        self.selected = self.selected.min(self.rows.len().saturating_sub(1));
    }
}

fn walk(
    n: &Node,
    depth: usize,
    path: &str,
    toggled: &HashSet<String>,
    total: f64,
    out: &mut Vec<StackRow>,
) {
    let mut kids: Vec<(&String, &Node)> = n.children.iter().collect();
    kids.sort_by(|a, b| b.1.total.cmp(&a.1.total).then_with(|| a.0.cmp(b.0)));
    for (frame, child) in kids {
        let p = format!("{path}\n{frame}");
        let leaf = child.children.is_empty();
        // open by default down to AUTO_DEPTH; a toggle flips that
        let open = !leaf && ((depth < AUTO_DEPTH) != toggled.contains(&p));
        out.push(StackRow {
            depth,
            frame: frame.clone(),
            total: child.total,
            percent: child.total as f64 * 100.0 / total,
            open,
            leaf,
            path: p.clone(),
        });
        if open {
            walk(child, depth + 1, &p, toggled, total, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agg::snapshot::AggRow;
    use crate::agg::AggValue;

    fn row(frames: &[&str], n: u64) -> AggRow {
        AggRow {
            keys: vec![KeyCell::Stack(
                frames.iter().map(|s| s.to_string()).collect(),
            )],
            value: AggValue::Count(n),
        }
    }

    #[test]
    fn merges_from_the_root_with_percentages() {
        let view = AggView {
            name: "@".into(),
            rows: vec![
                row(&["leaf1", "mid", "main"], 3),
                row(&["leaf2", "mid", "main"], 1),
                row(&["other", "main"], 4),
            ],
        };
        let mut t = StackTree::default();
        t.update(&view);
        let lines: Vec<(usize, &str, i64)> = t
            .rows()
            .iter()
            .map(|r| (r.depth, r.frame.as_str(), r.total))
            .collect();
        assert_eq!(
            lines,
            [
                (0, "main", 8),
                (1, "mid", 4),
                (2, "leaf1", 3),
                (2, "leaf2", 1),
                (1, "other", 4)
            ]
        );
        assert_eq!(t.rows()[1].percent, 50.0);
        t.selected = 1;
        t.toggle();
        assert_eq!(t.rows().len(), 3);
    }
}
