//! The editor pane: line numbers, the script highlighted by dtx's lexer, the cursor, and the
//! compiler's error at its line.

use ratatui::layout::{Position, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{fit, frame};
use crate::tui::app::{App, Focus};
use crate::tui::highlight::Kind;
use crate::tui::theme::Theme;

fn style_of(k: Kind, t: &Theme) -> Style {
    let c = match k {
        Kind::Keyword => t.keyword,
        Kind::Probe => t.probe,
        Kind::Str => t.string,
        Kind::Number => t.number,
        Kind::Aggregation => t.aggregation,
        Kind::Comment => t.comment,
        Kind::Control => t.control,
        Kind::Punct => t.punct,
        Kind::Ident => t.ident,
        Kind::Error => t.error,
    };
    let s = Style::default().fg(c);
    match k {
        Kind::Keyword | Kind::Probe => s.add_modifier(Modifier::BOLD),
        Kind::Error => s.add_modifier(Modifier::UNDERLINED),
        _ => s,
    }
}

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    let ed = &app.editor;
    let focused = app.focus == Focus::Editor;
    let name = format!(
        " {}{} ",
        ed.file_label(),
        if ed.is_modified() { " ●" } else { "" }
    );
    let mut title = vec![
        Span::styled(name, Style::default().fg(t.title)),
        Span::styled("F3 ", t.dimmed()),
    ];
    if let Some(d) = &ed.diagnostic {
        title.push(Span::styled(
            format!(" {} ", d.tag),
            Style::default().fg(t.error).add_modifier(Modifier::BOLD),
        ));
    }
    let block = frame(Line::from(title), focused, t);
    let inner = block.inner(area);
    f.render_widget(block, area);
    if inner.width == 0 || inner.height == 0 {
        return;
    }
    let lines = ed.area.lines();
    let (crow, ccol) = (ed.area.cursor().0, ed.area.cursor().1);
    // the error's message takes the last row
    let err_line = ed.diagnostic.as_ref().map(|d| {
        Line::from(Span::styled(
            fit(
                &format!("line {}: {}", d.line, d.message.replace('\n', " ")),
                inner.width as usize,
            ),
            Style::default().fg(t.error),
        ))
    });
    let text_h = inner.height as usize - usize::from(err_line.is_some() && inner.height > 2);
    let mut top = ed.top.get();
    if crow < top {
        top = crow;
    } else if text_h > 0 && crow >= top + text_h {
        top = crow + 1 - text_h;
    }
    ed.top.set(top);
    let gutter = lines.len().to_string().len().max(2);
    let width = (inner.width as usize).saturating_sub(gutter + 1);
    // horizontal scroll keeps the cursor in view
    let cursor_x = lines.get(crow).map_or(0, |l| display_col(l, ccol));
    let left = cursor_x.saturating_sub(width.saturating_sub(1));
    let hl = ed.highlighted();
    let err_row = ed
        .diagnostic
        .as_ref()
        .and_then(|d| (d.line > 0).then(|| d.line as usize - 1));
    let mut out = Vec::with_capacity(text_h);
    for (i, line) in lines.iter().enumerate().skip(top).take(text_h) {
        let num_style = if Some(i) == err_row {
            Style::default().fg(t.error).add_modifier(Modifier::BOLD)
        } else if i == crow {
            Style::default().fg(t.title)
        } else {
            t.dimmed()
        };
        let mut spans = vec![Span::styled(format!("{:>gutter$} ", i + 1), num_style)];
        spans.extend(styled_line(
            line,
            hl.1.get(i).map(|v| &v[..]).unwrap_or(&[]),
            left,
            width,
            t,
        ));
        out.push(Line::from(spans));
    }
    while out.len() < text_h {
        out.push(Line::from(Span::styled(
            format!("{:>gutter$}", "~"),
            t.dimmed(),
        )));
    }
    if let Some(e) = err_line {
        if inner.height > 2 {
            out.push(e);
        }
    }
    f.render_widget(Paragraph::new(out).style(t.base()), inner);
    if focused && crow >= top && crow < top + text_h {
        let x = inner.x + (gutter + 1 + cursor_x - left) as u16;
        let y = inner.y + (crow - top) as u16;
        if x < inner.right() && y < inner.bottom() {
            f.set_cursor_position(Position::new(x, y));
        }
    }
}

const TAB: usize = 4;

/// The display column of the `chars`-th character of a line.
pub fn display_col(line: &str, chars: usize) -> usize {
    line.chars().take(chars).fold(
        0,
        |c, ch| if ch == '\t' { c + TAB - c % TAB } else { c + 1 },
    )
}

/// One line cut to the view (`left`, `width` in characters) and coloured by its runs.
fn styled_line<'a>(
    line: &'a str,
    runs: &[crate::tui::highlight::Run],
    left: usize,
    width: usize,
    t: &Theme,
) -> Vec<Span<'a>> {
    let mut spans = Vec::new();
    let mut pos = 0usize;
    let mut pieces: Vec<(usize, usize, Style)> = Vec::new();
    for r in runs {
        if r.start > pos {
            pieces.push((pos, r.start, Style::default().fg(t.text)));
        }
        if r.end > r.start.max(pos) {
            pieces.push((r.start.max(pos), r.end, style_of(r.kind, t)));
        }
        pos = pos.max(r.end);
    }
    if pos < line.len() {
        pieces.push((pos, line.len(), Style::default().fg(t.text)));
    }
    // display columns [left, left + width); tabs stop every TAB columns
    let mut col = 0usize;
    for (s, e, st) in pieces {
        let Some(piece) = line.get(s..e) else {
            continue;
        };
        let mut text = String::new();
        for ch in piece.chars() {
            let w = if ch == '\t' { TAB - col % TAB } else { 1 };
            for _ in 0..w {
                if col >= left && col < left + width {
                    text.push(if ch == '\t' { ' ' } else { ch });
                }
                col += 1;
            }
        }
        if !text.is_empty() {
            spans.push(Span::styled(text, st));
        }
    }
    spans
}
