//! Drawing the console: the layout of the panes for the terminal's size, then each pane from
//! its own module. Drawing reads the state and never changes it (but for the editor's scroll).

use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::widgets::Block;
use ratatui::Frame;

use super::app::{App, Focus, Overlay, PaneAreas};
use super::panes;

/// Below this size the console shows the focused pane alone.
const MIN_SPLIT_WIDTH: u16 = 60;
const MIN_SPLIT_HEIGHT: u16 = 12;

/// Draws everything; returns where the panes went.
pub fn draw(f: &mut Frame, app: &App) -> PaneAreas {
    let area = f.area();
    f.render_widget(Block::default().style(app.theme.base()), area);
    if area.width == 0 || area.height == 0 {
        return PaneAreas::default();
    }
    let (body, status) = if area.height >= 2 {
        let v = Layout::default()
            .direction(Direction::Vertical)
            .constraints([Constraint::Min(1), Constraint::Length(1)])
            .split(area);
        (v[0], Some(v[1]))
    } else {
        (area, None)
    };
    let areas = layout(body, app.focus);
    if let Some(r) = areas.browser {
        panes::browser::draw(f, r, app);
    }
    if let Some(r) = areas.editor {
        panes::editor::draw(f, r, app);
    }
    if let Some(r) = areas.results {
        panes::results::draw(f, r, app);
    }
    if let Some(r) = areas.log {
        panes::log::draw(f, r, app);
    }
    if let Some(s) = status {
        panes::status::draw(f, s, app);
    }
    match &app.overlay {
        Some(Overlay::Help) => panes::overlay::help(f, area, app),
        Some(Overlay::ConfirmQuit) => panes::overlay::confirm_quit(f, area, app),
        Some(Overlay::Picker { files, selected }) => {
            panes::overlay::picker(f, area, app, files, *selected)
        }
        None => {}
    }
    areas
}

/// Where each pane goes in the body.
pub fn layout(body: Rect, focus: Focus) -> PaneAreas {
    if body.width < MIN_SPLIT_WIDTH || body.height < MIN_SPLIT_HEIGHT {
        let mut a = PaneAreas::default();
        match focus {
            Focus::Browser => a.browser = Some(body),
            Focus::Editor => a.editor = Some(body),
            Focus::Results => a.results = Some(body),
            Focus::Log => a.log = Some(body),
        }
        return a;
    }
    let browser_w = (body.width / 4).clamp(22, 40);
    let h = Layout::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Length(browser_w), Constraint::Min(20)])
        .split(body);
    let right = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Percentage(38),
            Constraint::Percentage(42),
            Constraint::Min(3),
        ])
        .split(h[1]);
    PaneAreas {
        browser: Some(h[0]),
        editor: Some(right[0]),
        results: Some(right[1]),
        log: Some(right[2]),
    }
}
