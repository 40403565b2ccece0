//! Windows over the panes: the help (every key) and the script picker.

use std::path::PathBuf;

use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{centred, clear};
use super::{fit, frame};
use crate::tui::app::App;
use crate::tui::keys::ACTIONS;
use crate::tui::scroll::first_visible;

/// Keys that belong to one pane, for the help.
pub const PANE_KEYS: &[(&str, &str, &str)] = &[
    ("Editor", "Esc", "leave the editor (next pane)"),
    ("Editor", "Tab", "indent"),
    (
        "Probes",
        "type / Backspace / Esc",
        "filter the probes / clear the filter",
    ),
    ("Probes", "Up Down Left Right Space", "move, close, open"),
    (
        "Probes",
        "Enter",
        "insert a clause for the probe into the editor",
    ),
    ("Aggregations", "Left Right", "previous / next aggregation"),
    (
        "Aggregations",
        "e / g",
        "export: folded stacks or CSV + JSON / SVG flame graph",
    ),
    (
        "Aggregations",
        "Up Down PgUp PgDn Home End",
        "select a row (its histogram)",
    ),
    ("Aggregations", "s / r", "sort by the next column / reverse"),
    (
        "Aggregations",
        "b / B",
        "keep these results as the baseline (saved) / drop it",
    ),
    ("Aggregations", "Enter", "open or close a stack frame"),
    ("Output", "Up Down PgUp PgDn Home End", "scroll"),
    ("Output", "/ then n", "search back / next match"),
    (
        "Mouse",
        "click / wheel",
        "focus a pane, select a probe / scroll",
    ),
];

/// The help's lines.
pub fn help_lines(app: &App) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for (action, _, what, _) in ACTIONS {
        let keys: Vec<String> = app
            .keys
            .keys_of(*action)
            .iter()
            .map(|k| k.label())
            .collect();
        v.push((keys.join(" "), what.to_string()));
    }
    for (pane, keys, what) in PANE_KEYS {
        v.push((format!("{pane}: {keys}"), what.to_string()));
    }
    v
}

pub fn help(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    let all = help_lines(app);
    // more lines than the box holds: a wide terminal takes them in two columns, and a tall
    // one a taller box, so that every key shows (a narrow one shows what fits)
    let two = all.len() + 2 > 34 && area.width >= 120;
    let rows = if two { all.len().div_ceil(2) } else { 32 };
    let (bw, bh) = if two {
        (168, (rows + 2).max(34) as u16)
    } else {
        (84, 34)
    };
    let r = centred(area, bw, bh);
    clear(f, r);
    let block = frame(
        Line::from(Span::styled(
            " dtx keys (Esc closes) ",
            Style::default().fg(t.title),
        )),
        true,
        t,
    );
    let inner = block.inner(r);
    f.render_widget(block, r);
    let cols: Vec<Rect> = if two {
        let half = inner.width / 2;
        vec![
            Rect::new(inner.x, inner.y, half, inner.height),
            Rect::new(inner.x + half, inner.y, inner.width - half, inner.height),
        ]
    } else {
        vec![inner]
    };
    for (col, chunk) in cols.iter().zip(all.chunks(rows.max(1))) {
        help_column(f, *col, chunk, t);
    }
}

fn help_column(
    f: &mut Frame,
    inner: Rect,
    entries: &[(String, String)],
    t: &crate::tui::theme::Theme,
) {
    let w = inner.width as usize;
    let key_w = (w / 2).min(34);
    let lines: Vec<Line> = entries
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(
                    format!("{:<key_w$}", fit(k, key_w.saturating_sub(1))),
                    Style::default().fg(t.accent).add_modifier(Modifier::BOLD),
                ),
                Span::styled(
                    fit(what, w.saturating_sub(key_w)),
                    Style::default().fg(t.text),
                ),
            ])
        })
        .collect();
    f.render_widget(Paragraph::new(lines).style(t.base()), inner);
}

pub fn picker(f: &mut Frame, area: Rect, app: &App, files: &[PathBuf], selected: usize) {
    let t = &app.theme;
    let r = centred(area, 70, 20);
    clear(f, r);
    let block = frame(
        Line::from(Span::styled(
            " Open a script (Enter opens, Esc closes) ",
            Style::default().fg(t.title),
        )),
        true,
        t,
    );
    let inner = block.inner(r);
    f.render_widget(block, r);
    let h = inner.height as usize;
    let first = first_visible(selected, h);
    let lines: Vec<Line> = files
        .iter()
        .enumerate()
        .skip(first)
        .take(h)
        .map(|(i, p)| {
            let s = if i == selected {
                t.selected()
            } else {
                Style::default().fg(t.text)
            };
            Line::from(Span::styled(
                fit(&p.display().to_string(), inner.width as usize),
                s,
            ))
        })
        .collect();
    f.render_widget(Paragraph::new(lines).style(t.base()), inner);
}

/// The question before quitting with unsaved edits.
pub fn confirm_quit(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    let r = centred(area, 60, 7);
    clear(f, r);
    let block = frame(
        Line::from(Span::styled(" Quit? ", Style::default().fg(t.title))),
        true,
        t,
    );
    let inner = block.inner(r);
    f.render_widget(block, r);
    let w = inner.width as usize;
    let lines = vec![
        Line::from(Span::styled(
            fit(
                &format!("{} has edits that were not saved.", app.editor.file_label()),
                w,
            ),
            Style::default().fg(t.text),
        )),
        Line::from(Span::styled(
            fit("(They are in the autosave file.)", w),
            Style::default().fg(t.text),
        )),
        Line::from(Span::styled(
            fit("y quit   s save and quit   n/Esc stay", w),
            Style::default().fg(t.accent).add_modifier(Modifier::BOLD),
        )),
    ];
    f.render_widget(Paragraph::new(lines).style(t.base()), inner);
}
