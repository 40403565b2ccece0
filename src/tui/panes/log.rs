//! The output pane: the program's printed lines, and dtx's own (stderr) lines in the error
//! colour, scrollable, with the search text marked.

use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{fit, frame};
use crate::tui::app::{App, Focus};

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    let log = &app.log;
    let focused = app.focus == Focus::Log;
    let mut title = vec![
        Span::styled(" Output ", Style::default().fg(t.title)),
        Span::styled("F6 ", t.dimmed()),
    ];
    if log.searching || !log.search.is_empty() {
        title.push(Span::styled(
            format!(" /{}{} ", log.search, if log.searching { "▏" } else { "" }),
            Style::default().fg(t.accent),
        ));
    }
    if log.back > 0 {
        title.push(Span::styled(
            format!(" ↑{} ", log.back),
            Style::default().fg(t.warning),
        ));
    }
    let block = frame(Line::from(title), focused, t);
    let inner = block.inner(area);
    f.render_widget(block, area);
    if inner.height == 0 || inner.width == 0 {
        return;
    }
    let (start, n) = log.window(inner.height as usize);
    let w = inner.width as usize;
    let mut lines = Vec::with_capacity(n);
    for i in start..start + n {
        let l = log.line(i).unwrap_or("");
        let text = fit(&l.replace('\t', "    "), w);
        if !log.search.is_empty() && l.contains(&log.search) {
            lines.push(Line::from(Span::styled(
                text,
                Style::default().fg(t.accent).add_modifier(Modifier::BOLD),
            )));
        } else {
            let fg = if log.is_stderr(i) { t.error } else { t.text };
            lines.push(Line::from(Span::styled(text, Style::default().fg(fg))));
        }
    }
    f.render_widget(Paragraph::new(lines).style(t.base()), inner);
}
