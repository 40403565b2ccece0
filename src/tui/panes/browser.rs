//! The probe browser pane: the filter line, the provider → module → function → name tree with
//! firing counts, and the selected probe's argument types.

use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{fit, frame, human, title};
use crate::tui::app::{App, Focus};
use crate::tui::scroll::first_visible;

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    let focused = app.focus == Focus::Browser;
    let block = frame(title("Probes", "F2", t), focused, t);
    let inner = block.inner(area);
    f.render_widget(block, area);
    if inner.height == 0 || inner.width == 0 {
        return;
    }
    let w = inner.width as usize;
    let tree = &app.browser;
    let mut lines = Vec::new();
    let filter = if tree.filter.is_empty() {
        Span::styled(fit("type to filter", w), t.dimmed())
    } else {
        Span::styled(
            fit(&format!("/{}", tree.filter), w),
            Style::default().fg(t.accent),
        )
    };
    lines.push(Line::from(filter));
    // the selected probe's arguments take the bottom lines when there is room
    let detail: Vec<Line> = match tree.selected_probe() {
        Some(p) if inner.height > 8 => {
            let mut d = vec![Line::from(Span::styled(
                fit(
                    &format!("{}:{}:{}:{}", p.provider, p.module, p.function, p.name),
                    w,
                ),
                Style::default().fg(t.probe),
            ))];
            // the arguments, and the members of the structs they point to, in at most half
            // the pane
            let room = (inner.height as usize / 2).max(2);
            for a in tree.arg_details() {
                if d.len() >= room {
                    break;
                }
                d.push(Line::from(Span::styled(
                    fit(&format!(" args[{}] {}", a.index, a.ty), w),
                    t.dimmed(),
                )));
                let arrow = if a.ty.trim_end().ends_with('*') {
                    "->"
                } else {
                    "."
                };
                let shown = room.saturating_sub(d.len());
                // names in full where the pane allows, types after them
                let longest = a.fields.iter().map(|f| f.name.chars().count()).max();
                let nw = (longest.unwrap_or(0) + 3 + arrow.len() + 1).min(w * 2 / 3);
                for f in a.fields.iter().take(shown) {
                    let name = fit(&format!("   {arrow}{}", f.name), nw);
                    let pad = nw.saturating_sub(name.chars().count());
                    d.push(Line::from(vec![
                        Span::styled(format!("{name}{}", " ".repeat(pad)), t.base()),
                        Span::styled(fit(&f.ty, w.saturating_sub(nw)), t.dimmed()),
                    ]));
                }
            }
            d
        }
        _ => Vec::new(),
    };
    let rows_h = (inner.height as usize)
        .saturating_sub(1)
        .saturating_sub(detail.len());
    let rows = tree.rows();
    let first = first_visible(tree.selected, rows_h);
    for (i, r) in rows.iter().enumerate().skip(first).take(rows_h) {
        let marker = if r.leaf {
            "  "
        } else if r.open {
            "▾ "
        } else {
            "▸ "
        };
        let count = r.count.map(|c| human(c as f64)).unwrap_or_default();
        let indent = "  ".repeat(r.depth);
        let room = w.saturating_sub(indent.len() + 2 + count.len() + 1);
        let label = fit(&r.label, room);
        let pad = w.saturating_sub(indent.len() + 2 + label.chars().count() + count.len());
        let style = if i == tree.selected {
            if focused {
                t.selected()
            } else {
                Style::default().add_modifier(Modifier::REVERSED)
            }
        } else if r.count == Some(0) {
            t.dimmed()
        } else {
            Style::default().fg(if r.leaf { t.text } else { t.probe })
        };
        lines.push(Line::from(vec![
            Span::styled(format!("{indent}{marker}{label}{}", " ".repeat(pad)), style),
            Span::styled(count, Style::default().fg(t.number)),
        ]));
    }
    while lines.len() < 1 + rows_h {
        lines.push(Line::default());
    }
    lines.extend(detail);
    f.render_widget(Paragraph::new(lines).style(t.base()), inner);
}
