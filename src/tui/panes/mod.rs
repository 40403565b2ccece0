//! One module per pane of the console; each draws its pane from the `App`.

pub mod browser;
pub mod editor;
pub mod log;
pub mod overlay;
pub mod results;
pub mod status;

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders};

use super::theme::Theme;

/// A pane's frame: its title, bold and coloured when the pane has the focus.
pub fn frame<'a>(title: Line<'a>, focused: bool, theme: &Theme) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Rounded
        })
        .border_style(theme.border(focused))
        .title(title)
}

/// A title with the key that focuses the pane.
pub fn title<'a>(text: &'a str, key: &'a str, theme: &Theme) -> Line<'a> {
    Line::from(vec![
        Span::styled(format!(" {text} "), Style::default().fg(theme.title)),
        Span::styled(format!("{key} "), theme.dimmed()),
    ])
}

/// Cuts a string to `w` display columns (characters), with `…` when cut.
pub fn fit(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n <= w {
        s.to_string()
    } else if w == 0 {
        String::new()
    } else {
        let mut t: String = s.chars().take(w - 1).collect();
        t.push('…');
        t
    }
}

/// A number in a short human form: 1234567 → `1.23M`.
pub fn human(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a.fract() == 0.0 || a >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// A centred rectangle of at most `w`×`h`.
pub fn centred(area: ratatui::layout::Rect, w: u16, h: u16) -> ratatui::layout::Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    ratatui::layout::Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

/// Clears a rectangle for an overlay.
pub fn clear(f: &mut ratatui::Frame, r: ratatui::layout::Rect) {
    f.render_widget(ratatui::widgets::Clear, r);
}
