//! The results pane: a tab per aggregation; counts, sums and the like as a sortable table with
//! delta, rate and a sparkline; quantizations as horizontal histograms of the selected key;
//! stack keys as a collapsible tree.

use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{fit, frame, human};
use crate::agg::snapshot::AggView;
use crate::agg::AggValue;
use crate::tui::agg_table::{AggTable, SortBy};
use crate::tui::app::{App, Focus};
use crate::tui::baseline::Change;
use crate::tui::scroll::first_visible;
use crate::tui::stack_tree::StackTree;
use crate::tui::theme::Theme;

const SPARK: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    let r = &app.results;
    let focused = app.focus == Focus::Results;
    let mut title = vec![Span::styled(" Aggregations ", Style::default().fg(t.title))];
    title.push(Span::styled("F4 ", t.dimmed()));
    for (i, v) in r.views.iter().enumerate() {
        let s = if i == r.current {
            t.selected()
        } else {
            t.dimmed()
        };
        title.push(Span::styled(format!(" {} ", v.name), s));
    }
    if r.stale {
        title.push(Span::styled(
            " (previous run) ",
            Style::default().fg(t.warning),
        ));
    }
    let block = frame(Line::from(title), focused, t);
    let inner = block.inner(area);
    f.render_widget(block, area);
    if inner.width == 0 || inner.height == 0 {
        return;
    }
    let Some(view) = r.current_view() else {
        let msg = if app.status.generation == 0 {
            "no program yet: write one in the editor (F3) and run it with F5"
        } else {
            "no aggregation data yet"
        };
        f.render_widget(
            Paragraph::new(Span::styled(fit(msg, inner.width as usize), t.dimmed())),
            inner,
        );
        return;
    };
    if let Some(st) = r.stacks.get(&view.name) {
        draw_stacks(f, inner, st, focused, t);
    } else if let Some(table) = r.tables.get(&view.name) {
        if view.is_histogram() && inner.width >= 40 {
            let cols = Layout::default()
                .direction(Direction::Horizontal)
                .constraints([Constraint::Percentage(40), Constraint::Percentage(60)])
                .split(inner);
            draw_table(f, cols[0], view, table, focused, t, false);
            if let Some(row) = table.rows.get(table.selected) {
                if let Some(e) = view.rows.get(row.entry) {
                    draw_histogram(f, cols[1], &e.value, t);
                }
            }
        } else {
            draw_table(f, inner, view, table, focused, t, true);
        }
    }
}

fn sort_mark(table: &AggTable, col: SortBy) -> &'static str {
    if table.sort != col {
        ""
    } else if table.descending {
        "▼"
    } else {
        "▲"
    }
}

fn draw_table(
    f: &mut Frame,
    area: Rect,
    view: &AggView,
    table: &AggTable,
    focused: bool,
    t: &Theme,
    extras: bool,
) {
    let w = area.width as usize;
    let value_w = 12usize;
    let base_w = if table.has_baseline { 11 } else { 0 };
    let extra_w = if extras && w >= 70 + base_w {
        10 + 10 + 1 + 16 + base_w
    } else {
        0
    };
    let keys = table.key_columns.max(1);
    let key_w = (w.saturating_sub(value_w + extra_w + 1) / keys).max(4);
    let mut lines = Vec::new();
    let mut head = String::new();
    for k in 0..table.key_columns {
        let name = format!("key{}{}", k + 1, sort_mark(table, SortBy::Key(k)));
        head.push_str(&format!("{:<key_w$}", fit(&name, key_w.saturating_sub(1))));
    }
    if table.key_columns == 0 {
        head.push_str(&format!("{:<key_w$}", ""));
    }
    let func = if view.func().is_empty() {
        "value"
    } else {
        view.func()
    };
    head.push_str(&format!(
        "{:>value_w$}",
        format!("{func}{}", sort_mark(table, SortBy::Value))
    ));
    if extra_w > 0 {
        if base_w > 0 {
            head.push_str(&format!("{:>11}", "vs base"));
        }
        head.push_str(&format!(
            "{:>10}{:>10} {}",
            format!("Δ{}", sort_mark(table, SortBy::Delta)),
            "rate/s",
            "trend"
        ));
    }
    lines.push(Line::from(Span::styled(
        fit(&head, w),
        Style::default().fg(t.title).add_modifier(Modifier::BOLD),
    )));
    let h = (area.height as usize).saturating_sub(1);
    let first = first_visible(table.selected, h);
    let max = table.rows.iter().map(|r| r.value).max().unwrap_or(1).max(1);
    for (i, row) in table.rows.iter().enumerate().skip(first).take(h) {
        let mut s = String::new();
        for k in &row.keys {
            s.push_str(&format!("{:<key_w$}", fit(k, key_w.saturating_sub(1))));
        }
        if row.keys.is_empty() {
            s.push_str(&" ".repeat(key_w));
        }
        s.push_str(&format!("{:>value_w$}", row.value));
        let style = if i == table.selected && focused {
            t.selected()
        } else {
            Style::default().fg(t.text)
        };
        let mut spans = vec![Span::styled(s, style)];
        if extra_w > 0 && base_w > 0 {
            spans.push(change_cell(row.change, t));
        }
        if extra_w > 0 {
            let delta = if row.delta == 0 {
                String::new()
            } else {
                format!("{:+}", row.delta)
            };
            spans.push(Span::styled(
                format!("{:>10}", delta),
                Style::default().fg(if row.delta > 0 { t.ok } else { t.dim }),
            ));
            spans.push(Span::styled(
                format!("{:>10} ", human(row.rate)),
                Style::default().fg(t.number),
            ));
            spans.push(Span::styled(
                sparkline(&table.history_of(row), 16),
                Style::default().fg(t.bar),
            ));
        } else if !extras {
            // the table beside a histogram: a bar of the value
        } else {
            let room = w.saturating_sub(spans[0].content.chars().count() + 1);
            let n = (row.value.max(0) as u128 * room as u128 / max as u128) as usize;
            spans.push(Span::styled(
                format!(" {}", "■".repeat(n)),
                Style::default().fg(t.bar),
            ));
        }
        lines.push(Line::from(spans));
    }
    if table.rows.is_empty() {
        lines.push(Line::from(Span::styled("(empty)", t.dimmed())));
    }
    if table.gone > 0 && lines.len() < area.height as usize {
        lines.push(Line::from(Span::styled(
            format!(
                "({} key{} of the baseline gone)",
                table.gone,
                if table.gone == 1 { "" } else { "s" }
            ),
            t.dimmed(),
        )));
    }
    f.render_widget(Paragraph::new(lines).style(t.base()), area);
}

/// The last `width` values as block characters scaled to their maximum.
pub fn sparkline(values: &[u64], width: usize) -> String {
    let v = &values[values.len().saturating_sub(width)..];
    let lo = v.iter().copied().min().unwrap_or(0);
    let hi = v.iter().copied().max().unwrap_or(0);
    v.iter()
        .map(|&x| {
            if hi == lo {
                SPARK[0]
            } else {
                SPARK[((x - lo) as u128 * 7 / (hi - lo) as u128) as usize]
            }
        })
        .collect()
}

/// The buckets of a quantization as (label, count), from the first to the last non-empty one
/// with one empty bucket each side, as dtrace prints them.
pub fn buckets(v: &AggValue) -> Vec<(String, i64)> {
    let (labels, counts): (Vec<String>, &[i64]) = match v {
        AggValue::Quantize(b) => (
            (0..b.len())
                .map(|i| {
                    let v: i128 = if i == 63 {
                        0
                    } else if i > 63 {
                        1i128 << (i - 64)
                    } else {
                        -(1i128 << (62 - i))
                    };
                    v.to_string()
                })
                .collect(),
            b,
        ),
        AggValue::Lquantize {
            base,
            step,
            levels,
            buckets,
        } => (
            (0..buckets.len())
                .map(|i| {
                    if i == 0 {
                        format!("< {base}")
                    } else if i == *levels as usize + 1 {
                        format!(">= {}", *base as i64 + *levels as i64 * *step as i64)
                    } else {
                        (*base as i64 + (i as i64 - 1) * *step as i64).to_string()
                    }
                })
                .collect(),
            buckets,
        ),
        AggValue::Llquantize { buckets, .. } => (
            (0..buckets.len()).map(|i| format!("#{i}")).collect(),
            buckets,
        ),
        _ => return Vec::new(),
    };
    let first = counts.iter().position(|&c| c != 0);
    let last = counts.iter().rposition(|&c| c != 0);
    let (Some(a), Some(b)) = (first, last) else {
        return Vec::new();
    };
    let a = a.saturating_sub(1);
    let b = (b + 1).min(counts.len() - 1);
    (a..=b).map(|i| (labels[i].clone(), counts[i])).collect()
}

fn draw_histogram(f: &mut Frame, area: Rect, v: &AggValue, t: &Theme) {
    let b = buckets(v);
    let total: i64 = b.iter().map(|(_, c)| *c).sum::<i64>().max(1);
    let label_w = b.iter().map(|(l, _)| l.len()).max().unwrap_or(5).max(5);
    let count_w = b
        .iter()
        .map(|(_, c)| c.to_string().len())
        .max()
        .unwrap_or(5)
        .max(5);
    let bar_w = (area.width as usize).saturating_sub(label_w + count_w + 4);
    let mut lines = vec![Line::from(Span::styled(
        fit(
            &format!(
                "{:>label_w$} {:<bar_w$} {:>count_w$}",
                "value", "distribution", "count"
            ),
            area.width as usize,
        ),
        Style::default().fg(t.title).add_modifier(Modifier::BOLD),
    ))];
    for (label, c) in b.iter().take(area.height.saturating_sub(1) as usize) {
        let n = (*c as i128 * bar_w as i128 / total as i128).max(0) as usize;
        lines.push(Line::from(vec![
            Span::styled(format!("{label:>label_w$} "), Style::default().fg(t.number)),
            Span::styled(
                format!("{:<bar_w$}", "█".repeat(n)),
                Style::default().fg(t.bar),
            ),
            Span::styled(format!(" {c:>count_w$}"), Style::default().fg(t.text)),
        ]));
    }
    f.render_widget(Paragraph::new(lines).style(t.base()), area);
}

/// A row's change against the baseline, 11 columns wide, in one colour rule for the table and
/// the stack tree: grew in the error colour (a differential flame graph's red), shrank in the
/// accent, unchanged `=` dimmed, a key or frame the baseline lacks `new`.
fn change_cell(change: Option<Change>, t: &Theme) -> Span<'static> {
    let (text, colour) = match change {
        Some(Change::By(0)) => ("=".to_string(), t.dim),
        Some(Change::By(d)) if d > 0 => (format!("{d:+}"), t.error),
        Some(Change::By(d)) => (format!("{d:+}"), t.accent),
        Some(Change::New) => ("new".to_string(), t.error),
        None => (String::new(), t.dim),
    };
    Span::styled(format!("{text:>11}"), Style::default().fg(colour))
}

fn draw_stacks(f: &mut Frame, area: Rect, st: &StackTree, focused: bool, t: &Theme) {
    let w = area.width as usize;
    let h = area.height as usize;
    let first = first_visible(st.selected, h);
    let mut lines = Vec::new();
    for (i, r) in st.rows().iter().enumerate().skip(first).take(h) {
        let marker = if r.leaf {
            "  "
        } else if r.open {
            "▾ "
        } else {
            "▸ "
        };
        let num = format!("{:>6.1}% {:>8} ", r.percent, r.total);
        let bar_w = ((r.percent / 100.0) * 10.0).round() as usize;
        let bar = format!("{:<10} ", "▇".repeat(bar_w.min(10)));
        let indent = " ".repeat(r.depth.min(40));
        // the change column, after the bar, only while a baseline is set and the pane has room
        let with_change = st.has_base() && w >= 48;
        let change_w = if with_change { 12 } else { 0 };
        let room = w.saturating_sub(num.len() + 11 + change_w + indent.len() + 2);
        let style = if i == st.selected && focused {
            t.selected()
        } else {
            Style::default().fg(t.text)
        };
        let mut spans = vec![
            Span::styled(num, Style::default().fg(t.number)),
            Span::styled(bar, Style::default().fg(t.bar)),
        ];
        if with_change {
            spans.push(change_cell(r.change, t));
            spans.push(Span::raw(" "));
        }
        spans.push(Span::styled(
            format!("{indent}{marker}{}", fit(&r.frame, room)),
            style,
        ));
        lines.push(Line::from(spans));
    }
    if lines.is_empty() {
        lines.push(Line::from(Span::styled("(no stacks)", t.dimmed())));
    }
    f.render_widget(Paragraph::new(lines).style(t.base()), area);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_buckets_and_sparklines() {
        let mut b = vec![0i64; 127];
        b[64 + 3] = 5; // [8, 16)
        b[64 + 5] = 2;
        let v = buckets(&AggValue::Quantize(b));
        let labels: Vec<&str> = v.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, ["4", "8", "16", "32", "64"]);
        assert_eq!(v[1].1, 5);
        assert_eq!(sparkline(&[0, 7, 14], 8), "▁▄█");
        assert_eq!(sparkline(&[3, 3], 8), "▁▁");
    }
}
