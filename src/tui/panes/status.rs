//! The status line: program state, source and position in the trace, speed, events/s,
//! firings/s, drops, errors, where the metrics are served, the progress of symbol downloads,
//! and the latest message.

use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{fit, human};
use crate::engine::session::RunState;
use crate::tui::app::App;

fn secs(ns: u64) -> String {
    format!("{:.1}s", ns as f64 / 1e9)
}

/// The status line's text pieces (state, rest), for drawing and for tests.
pub fn text(app: &App) -> (String, String) {
    let s = &app.status;
    let state = match s.state {
        RunState::Idle => "○ idle".to_string(),
        RunState::Running => "● running".to_string(),
        RunState::Paused => "‖ paused".to_string(),
        RunState::Ended(c) => format!("■ ended {c}"),
    };
    let mut rest = format!(
        " │ {} │ run #{} │ {} ",
        hints(app),
        s.generation,
        fit(&s.source, 28)
    );
    let replay_over = matches!(s.state, RunState::Ended(_)) && s.position.is_some();
    if let (true, Some((pos, _))) = (replay_over, s.position) {
        rest.push_str(&format!("replay ended at {} ", secs(pos)));
    } else if let Some((pos, len)) = s.position {
        let frac = if len > 0 {
            (pos as f64 / len as f64).min(1.0)
        } else {
            0.0
        };
        let filled = (frac * 10.0).round() as usize;
        rest.push_str(&format!(
            "[{}{}] {}/{} {} ",
            "█".repeat(filled),
            "░".repeat(10 - filled.min(10)),
            secs(pos),
            secs(len),
            s.speed
        ));
    }
    if !s.sessions.is_empty() {
        rest.push_str(&format!(
            "│ {} │ lost {} ",
            fit(&s.sessions.join("+"), 36),
            s.lost
        ));
    }
    // a live run whose source counts no records (Linux perf events, timers alone) has no
    // event rate to show: a dash, not a 0 beside a counting fire/s
    let ev = if s.position.is_none() && s.sessions.is_empty() && s.events == 0 {
        "-".to_string()
    } else {
        human(s.events_per_s)
    };
    rest.push_str(&format!(
        "│ ev/s {} │ fire/s {} │ drops {} │ errors {} ",
        ev,
        human(s.firings_per_s),
        s.drops,
        s.errors,
    ));
    // the console's aggregations served to Prometheus (`-x metrics=`)
    if let Some(addr) = app.serving {
        rest.push_str(&format!("│ metrics http://{addr}/metrics "));
    }
    // long work of the run's own: symbol downloads (src/symbols/symsrv/progress.rs)
    if let Some(p) = crate::output::stderr::status_text() {
        rest.push_str(&format!("│ {} ", fit(p.trim_start_matches("dtx: "), 48)));
    }
    (state, rest)
}

/// The keys a newcomer needs first: help and quit, as bound.
pub fn hints(app: &App) -> String {
    use crate::tui::keys::Action;
    let key = |a: Action, default: &str| {
        app.keys
            .keys_of(a)
            .first()
            .map_or_else(|| default.to_string(), |k| k.label())
    };
    format!(
        "{} help · {} quit",
        key(Action::Help, "F1"),
        key(Action::Quit, "Ctrl-Q")
    )
}

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    let (state, rest) = text(app);
    let state_style = match app.status.state {
        RunState::Running => Style::default().fg(t.ok),
        RunState::Paused => Style::default().fg(t.warning),
        RunState::Ended(0) | RunState::Idle => Style::default().fg(t.status_fg),
        RunState::Ended(_) => Style::default().fg(t.error),
    }
    .add_modifier(Modifier::BOLD);
    let w = area.width as usize;
    let mut spans = vec![Span::styled(fit(&state, w), state_style)];
    let used = state.chars().count();
    let mut tail = rest;
    match &app.message {
        Some(m) => {
            tail.push_str("│ ");
            let room = w.saturating_sub(used + tail.chars().count());
            spans.push(Span::raw(fit(&tail, w.saturating_sub(used))));
            spans.push(Span::styled(
                fit(&m.text, room),
                Style::default().fg(if m.error { t.error } else { t.accent }),
            ));
        }
        None => {
            tail.push('│');
            spans.push(Span::raw(fit(&tail, w.saturating_sub(used))));
        }
    }
    f.render_widget(Paragraph::new(Line::from(spans)).style(t.status()), area);
}
