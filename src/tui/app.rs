//! The console's state and what keys, mouse and engine updates do to it. Nothing here draws:
//! `ui.rs` renders an `App`; commands for the engine queue up in `outbox` for the runner.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::{Position, Rect};

use super::compile::compile_for;
use super::editor::Editor;
use super::keys::{Action, KeyMap};
use super::log::Log;
use super::probe_tree::ProbeTree;
use super::results::Results;
use super::theme::Theme;
use crate::engine::session::{Command, ProgramSpec, RunState, Speed, Status, Update};
use crate::lang::diag::Diagnostic;
use crate::probes::Catalog;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Focus {
    Browser,
    Editor,
    Results,
    Log,
}

const FOCUS_ORDER: [Focus; 4] = [Focus::Browser, Focus::Editor, Focus::Results, Focus::Log];

/// A window over the panes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Overlay {
    Help,
    /// Quitting with edits that were not saved: y quits, s saves and quits, n or Esc stays.
    ConfirmQuit,
    /// Scripts to open, and the selected one.
    Picker {
        files: Vec<PathBuf>,
        selected: usize,
    },
}

/// What the Aggregations pane exports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Export {
    /// Folded stacks (a stack key) or CSV, and the table as JSON.
    Data,
    /// An SVG flame graph (a stack key).
    FlameGraph,
}

/// Writes one aggregation's export files into `dir`; their names.
pub fn export_view(
    view: &crate::agg::snapshot::AggView,
    what: Export,
    dir: &Path,
) -> Result<Vec<String>, String> {
    use crate::output::folded;
    let base: String = view
        .name
        .trim_start_matches('@')
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let base = if base.is_empty() {
        "agg".to_string()
    } else {
        base
    };
    let path = |ext: &str| dir.join(format!("dtx-{base}.{ext}"));
    let write = |p: &Path, bytes: &[u8]| {
        std::fs::write(p, bytes)
            .map(|_| p.display().to_string())
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    let mut files = Vec::new();
    match what {
        Export::Data if view.has_stack_key() => {
            let mut out = Vec::new();
            folded::write_folded(view, &mut out);
            files.push(write(&path("folded"), &out)?);
        }
        Export::Data => {
            let mut out = Vec::new();
            folded::write_table_csv(view, &mut out).map_err(|e| e.to_string())?;
            files.push(write(&path("csv"), &out)?);
        }
        Export::FlameGraph if view.has_stack_key() => {
            let mut out = Vec::new();
            folded::write_flame_svg(view, &view.name, &mut out)?;
            files.push(write(&path("svg"), &out)?);
        }
        Export::FlameGraph => return Err(format!("{} has no stack key", view.name)),
    }
    if what == Export::Data {
        let json = folded::table_json(view).to_json_pretty();
        files.push(write(&path("json"), json.as_bytes())?);
    }
    Ok(files)
}

/// Where each pane was drawn last, for the mouse.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PaneAreas {
    pub browser: Option<Rect>,
    pub editor: Option<Rect>,
    pub results: Option<Rect>,
    pub log: Option<Rect>,
}

/// A line for the status bar, with how serious it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub text: String,
    pub error: bool,
}

pub struct App {
    pub theme: Theme,
    pub keys: KeyMap,
    pub focus: Focus,
    pub browser: ProbeTree,
    pub editor: Editor,
    pub results: Results,
    pub log: Log,
    pub status: Status,
    pub message: Option<Message>,
    pub overlay: Option<Overlay>,
    pub areas: PaneAreas,
    pub quit: bool,
    /// Commands for the engine, sent by the runner.
    pub outbox: Vec<Command>,
    /// Whether the source is a trace (replay controls apply).
    pub trace: bool,
    catalog: Arc<Catalog>,
    /// Where `Open` looks for scripts.
    pub script_dir: PathBuf,
    /// The session's target process (`$target`), or 0.
    pub target: u32,
    /// Where exports are written (the working directory).
    pub export_dir: PathBuf,
    /// When the editor last changed and has not been checked since.
    check_due: Option<Instant>,
    /// Where the console serves its aggregations as metrics (`-x metrics=`), for the
    /// status line.
    pub serving: Option<std::net::SocketAddr>,
}

impl App {
    pub fn new(catalog: Arc<Catalog>, status: Status, trace: bool) -> App {
        let browser = ProbeTree::new(crate::probes::ProbeCatalog::list(&*catalog));
        App {
            theme: Theme::default(),
            keys: KeyMap::default(),
            focus: Focus::Editor,
            browser,
            editor: Editor::new(),
            results: Results::default(),
            log: Log::default(),
            status,
            message: None,
            overlay: None,
            areas: PaneAreas::default(),
            quit: false,
            export_dir: PathBuf::from("."),
            outbox: Vec::new(),
            trace,
            catalog,
            script_dir: PathBuf::from("dscripts"),
            target: 0,
            check_due: None,
            serving: None,
        }
    }

    pub(crate) fn say(&mut self, text: impl Into<String>, error: bool) {
        self.message = Some(Message {
            text: text.into(),
            error,
        });
    }

    /// Compiles the editor's text.
    pub fn compile_editor(&self) -> Result<ProgramSpec, Diagnostic> {
        let text = self.editor.text();
        let name = self.editor.file_label();
        compile_for(&text, &name, &self.catalog, self.target)
    }

    /// The session's probe catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.clone()
    }

    /// Compiles the script and, when it compiles, asks the engine to run it; a compile error
    /// leaves the running program alone.
    pub fn run(&mut self, restart: bool) {
        match self.compile_editor() {
            Ok(spec) => {
                self.editor.diagnostic = None;
                let matched = spec.program.clauses.len();
                self.outbox.push(Command::Run {
                    program: spec,
                    restart,
                });
                self.results.expect_generation(self.status.generation + 1);
                self.say(
                    format!(
                        "running {} ({} clause{})",
                        self.editor.file_label(),
                        matched,
                        if matched == 1 { "" } else { "s" }
                    ),
                    false,
                );
            }
            Err(d) => {
                self.say(
                    format!("not run: {}: {}", self.editor.file_label(), d.render(true)),
                    true,
                );
                self.editor.diagnostic = Some(d);
                self.focus = Focus::Editor;
            }
        }
    }

    /// Checks the script a moment after the last edit (compile-as-you-type).
    pub fn tick(&mut self, now: Instant) {
        if let Some(t) = self.check_due {
            if now >= t {
                self.check_due = None;
                self.editor.diagnostic = self.compile_editor().err();
            }
        }
        if let Err(e) = self.editor.autosave_if_due(now) {
            self.say(format!("autosave failed: {e}"), true);
        }
    }

    pub fn on_update(&mut self, u: Update) {
        match u {
            Update::Output(text) => {
                if let Some(said) = self.log.push(&text) {
                    self.say(said, true);
                }
            }
            Update::Snapshot(s) => self.results.update(s),
            Update::Status(s) => {
                if let RunState::Ended(code) = s.state {
                    if self.status.state != s.state {
                        self.say(format!("run ended (exit status {code})"), false);
                    }
                }
                self.status = s;
            }
            Update::Error(e) => {
                // kept in the output pane too: the message line holds only the last
                self.log.push_stderr(format!("dtx: {e}"));
                self.say(e, true);
            }
            Update::Notice(n) => {
                self.log.push_stderr(format!("dtx: {n}"));
                self.say(n, false);
            }
        }
    }

    /// What dtx said on stderr while the console captured it (errors on enabled probes,
    /// drops, the sources' notes): each line goes to the output pane, in the error colour, and
    /// the last is shown on the message line.
    pub fn on_stderr(&mut self, lines: Vec<String>, dropped: u64) {
        if dropped > 0 {
            self.log
                .push_stderr(format!("dtx: {dropped} earlier messages were dropped"));
        }
        let Some(last) = lines.last().cloned() else {
            return;
        };
        for l in lines {
            self.log.push_stderr(l);
        }
        self.say(last, true);
    }

    pub fn on_key(&mut self, k: KeyEvent) {
        if k.kind == crossterm::event::KeyEventKind::Release {
            return;
        }
        if let Some(o) = self.overlay.clone() {
            self.overlay_key(o, k);
            return;
        }
        if self.focus == Focus::Log && self.log.searching {
            self.log.search_key(k);
            return;
        }
        // Ctrl-C always quits
        if k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL) {
            self.quit = true;
            return;
        }
        if let Some(a) = self.keys.action(&k) {
            // Tab indents in the editor; Esc leaves it
            if !(a == Action::FocusNext && self.focus == Focus::Editor) {
                self.act(a);
                return;
            }
        }
        match self.focus {
            Focus::Editor => {
                if k.code == KeyCode::Esc {
                    self.focus_next(1);
                } else if self.editor.key(k) {
                    self.check_due = Some(Instant::now() + Duration::from_millis(300));
                }
            }
            Focus::Browser => self.browser_key(k),
            Focus::Results => self.results_key(k),
            Focus::Log => self.log.key(k),
        }
    }

    pub fn act(&mut self, a: Action) {
        match a {
            Action::Quit => self.ask_quit(),
            Action::Help => self.overlay = Some(Overlay::Help),
            Action::FocusNext => self.focus_next(1),
            Action::FocusPrev => self.focus_next(-1),
            Action::FocusBrowser => self.focus = Focus::Browser,
            Action::FocusEditor => self.focus = Focus::Editor,
            Action::FocusResults => self.focus = Focus::Results,
            Action::FocusLog => self.focus = Focus::Log,
            Action::Run => self.run(false),
            Action::RunFromStart => self.run(true),
            Action::Stop => self.outbox.push(Command::Stop),
            Action::Save => match self.editor.save() {
                Ok(p) => self.say(format!("saved {}", p.display()), false),
                Err(e) => self.say(e, true),
            },
            Action::Open => {
                let mut files = list_scripts(&self.script_dir);
                // the built-in dashboards, for when dscripts/ is not at hand
                for (name, _) in super::dashboards::DASHBOARDS {
                    files.push(PathBuf::from(format!(
                        "{}{name}",
                        super::dashboards::BUILTIN
                    )));
                }
                self.overlay = Some(Overlay::Picker { files, selected: 0 });
            }
            Action::New => {
                let _ = self.editor.autosave_now();
                self.editor.new_script();
                self.focus = Focus::Editor;
                self.say("new script", false);
            }
            Action::Undo => {
                self.editor.undo();
            }
            Action::Redo => {
                self.editor.redo();
            }
            Action::PauseResume => {
                let pause = self.status.state != RunState::Paused;
                self.outbox.push(Command::Pause(pause));
                self.say(if pause { "paused" } else { "resumed" }, false);
            }
            Action::Speed => {
                let next = match self.status.speed {
                    Speed::Times(1) => Speed::Times(10),
                    Speed::Times(_) => Speed::Max,
                    Speed::Max => Speed::Times(1),
                };
                self.status.speed = next;
                self.outbox.push(Command::Speed(next));
                self.say(format!("replay speed {next}"), false);
            }
            Action::RestartTrace => self.outbox.push(Command::Restart),
            Action::Redraw => {}
        }
    }

    fn focus_next(&mut self, d: isize) {
        let i = FOCUS_ORDER
            .iter()
            .position(|f| *f == self.focus)
            .unwrap_or(0) as isize;
        let n = FOCUS_ORDER.len() as isize;
        self.focus = FOCUS_ORDER[((i + d).rem_euclid(n)) as usize];
    }

    /// Quits, or asks first when the editor holds edits that were not saved (they are in the
    /// autosave file either way).
    pub fn ask_quit(&mut self) {
        if self.editor.is_modified() {
            self.overlay = Some(Overlay::ConfirmQuit);
        } else {
            self.quit = true;
        }
    }

    fn overlay_key(&mut self, o: Overlay, k: KeyEvent) {
        match o {
            Overlay::ConfirmQuit => match k.code {
                KeyCode::Char('y' | 'Y') => self.quit = true,
                KeyCode::Char('s' | 'S') => {
                    self.overlay = None;
                    match self.editor.save() {
                        Ok(_) => self.quit = true,
                        Err(e) => self.say(format!("not saved: {e}"), true),
                    }
                }
                KeyCode::Char('n' | 'N') | KeyCode::Esc => self.overlay = None,
                // the quit key again: quit
                _ if self.keys.action(&k) == Some(Action::Quit) => self.quit = true,
                _ => {}
            },
            Overlay::Help => {
                if matches!(
                    k.code,
                    KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q' | '?')
                ) || self.keys.action(&k) == Some(Action::Help)
                {
                    self.overlay = None;
                }
            }
            Overlay::Picker { files, selected } => match k.code {
                KeyCode::Esc => self.overlay = None,
                KeyCode::Up => {
                    self.overlay = Some(Overlay::Picker {
                        selected: selected.saturating_sub(1),
                        files,
                    })
                }
                KeyCode::Down => {
                    let s = (selected + 1).min(files.len().saturating_sub(1));
                    self.overlay = Some(Overlay::Picker { files, selected: s })
                }
                KeyCode::Enter => {
                    self.overlay = None;
                    if let Some(p) = files.get(selected) {
                        self.open(p);
                    }
                }
                _ => {}
            },
        }
    }

    /// Opens a script in the editor.
    pub fn open(&mut self, p: &Path) {
        let shown = p.to_string_lossy();
        if let Some(text) = shown
            .strip_prefix(super::dashboards::BUILTIN)
            .and_then(super::dashboards::by_name)
        {
            let name = shown
                .trim_start_matches(super::dashboards::BUILTIN)
                .to_string();
            self.editor.open_builtin(&name, text);
            self.focus = Focus::Editor;
            self.check_due = Some(Instant::now());
            self.say(format!("opened the built-in {name}"), false);
            return;
        }
        match self.editor.open(p) {
            Ok(()) => {
                self.focus = Focus::Editor;
                self.check_due = Some(Instant::now());
                self.say(format!("opened {}", p.display()), false);
            }
            Err(e) => self.say(e, true),
        }
    }

    fn browser_key(&mut self, k: KeyEvent) {
        match k.code {
            KeyCode::Up => self.browser.move_by(-1),
            KeyCode::Down => self.browser.move_by(1),
            KeyCode::PageUp => self.browser.move_by(-10),
            KeyCode::PageDown => self.browser.move_by(10),
            KeyCode::Right => self.browser.set_open(true),
            KeyCode::Left => self.browser.set_open(false),
            KeyCode::Enter => {
                if let Some(s) = self.browser.skeleton() {
                    let s = crate::tui::probe_tree::name_aggregation(&s, &self.editor.text());
                    self.editor.insert_clause(&s);
                    self.focus = Focus::Editor;
                    self.check_due = Some(Instant::now());
                }
            }
            KeyCode::Char(' ') => self.browser.toggle(),
            KeyCode::Backspace => {
                let mut f = self.browser.filter.clone();
                f.pop();
                self.browser.set_filter(&f);
            }
            KeyCode::Esc => self.browser.set_filter(""),
            KeyCode::Char(c) if !k.modifiers.contains(KeyModifiers::CONTROL) => {
                let f = format!("{}{c}", self.browser.filter);
                self.browser.set_filter(&f);
            }
            _ => {}
        }
    }

    fn results_key(&mut self, k: KeyEvent) {
        match k.code {
            KeyCode::Left => self.results.next_view(-1),
            KeyCode::Right => self.results.next_view(1),
            KeyCode::Up => self.results.move_by(-1),
            KeyCode::Down => self.results.move_by(1),
            KeyCode::PageUp => self.results.move_by(-10),
            KeyCode::PageDown => self.results.move_by(10),
            KeyCode::Home => self.results.move_by(isize::MIN / 2),
            KeyCode::End => self.results.move_by(isize::MAX / 2),
            KeyCode::Char('s') => self.results.next_sort(),
            KeyCode::Char('r') => self.results.reverse(),
            KeyCode::Char('e') => self.export(Export::Data),
            KeyCode::Char('g') => self.export(Export::FlameGraph),
            KeyCode::Char('b') => self.set_baseline(),
            KeyCode::Char('B') => {
                self.results.use_baseline(None);
                self.say("the baseline is dropped", false);
            }
            KeyCode::Enter | KeyCode::Char(' ') => self.results.toggle(),
            KeyCode::Char('?') => self.overlay = Some(Overlay::Help),
            _ => {}
        }
    }

    /// `b`: the results shown become the baseline, and are saved as `dtx-baseline.json` in
    /// the working directory (`--baseline` loads it again).
    pub fn set_baseline(&mut self) {
        let label = format!("run #{}", self.results.generation);
        let Some(b) = self.results.set_baseline(label) else {
            self.say("no results yet to keep as the baseline", true);
            return;
        };
        let path = self.export_dir.join("dtx-baseline.json");
        let text = b.to_json();
        let label = b.label.clone();
        match std::fs::write(&path, text) {
            Ok(()) => self.say(
                format!(
                    "baseline: {label} (saved as {}; B drops it)",
                    path.display()
                ),
                false,
            ),
            Err(e) => self.say(
                format!(
                    "baseline: {label}; it could not be saved as {}: {e}",
                    path.display()
                ),
                true,
            ),
        }
    }

    /// Writes the aggregation shown to a file in the working directory and says where: `e`
    /// its data (folded stacks for a stack key, else CSV, plus the table as JSON), `g` an SVG
    /// flame graph of a stack key.
    pub fn export(&mut self, what: Export) {
        let Some(view) = self.results.current_view().cloned() else {
            self.say("nothing to export yet".to_string(), true);
            return;
        };
        match export_view(&view, what, &self.export_dir) {
            Ok(files) => self.say(format!("wrote {}", files.join(", ")), false),
            Err(e) => self.say(format!("export failed: {e}"), true),
        }
    }

    pub fn on_mouse(&mut self, m: MouseEvent) {
        let at = Position::new(m.column, m.row);
        let hit = |r: Option<Rect>| r.is_some_and(|r| r.contains(at));
        let pane = if hit(self.areas.browser) {
            Some(Focus::Browser)
        } else if hit(self.areas.editor) {
            Some(Focus::Editor)
        } else if hit(self.areas.results) {
            Some(Focus::Results)
        } else if hit(self.areas.log) {
            Some(Focus::Log)
        } else {
            None
        };
        let Some(pane) = pane else { return };
        match m.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                self.focus = pane;
                if let (Focus::Browser, Some(r)) = (pane, self.areas.browser) {
                    // a click on a row selects it (rows start below the border and filter line)
                    let top = r.y + 2;
                    if m.row >= top {
                        let first = super::scroll::first_visible(
                            self.browser.selected,
                            r.height.saturating_sub(3) as usize,
                        );
                        self.browser.selected = (first + (m.row - top) as usize)
                            .min(self.browser.rows().len().saturating_sub(1));
                    }
                }
            }
            MouseEventKind::ScrollUp => self.scroll(pane, -3),
            MouseEventKind::ScrollDown => self.scroll(pane, 3),
            _ => {}
        }
    }

    fn scroll(&mut self, pane: Focus, d: isize) {
        match pane {
            Focus::Browser => self.browser.move_by(d),
            Focus::Results => self.results.move_by(d),
            Focus::Log => self.log.scroll_by(-d),
            Focus::Editor => self.editor.scroll_by(d),
        }
    }
}

/// The `.d` files under a folder, sorted.
pub fn list_scripts(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                // the type library is not a script
                if p.file_name().is_some_and(|n| n != "lib") {
                    stack.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "d") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod quit_tests {
    use super::*;

    fn app() -> App {
        App::new(
            Arc::new(crate::providers::standard_catalog()),
            Status::new("t".into()),
            false,
        )
    }

    #[test]
    fn quitting_with_unsaved_edits_asks() {
        let mut a = app();
        a.act(Action::Quit);
        assert!(a.quit, "nothing edited: quits at once");
        let mut a = app();
        a.editor.insert_clause("BEGIN { exit(0); }\n");
        a.act(Action::Quit);
        assert!(!a.quit);
        assert_eq!(a.overlay, Some(Overlay::ConfirmQuit));
        a.on_key(KeyEvent::from(KeyCode::Char('n')));
        assert!(!a.quit && a.overlay.is_none(), "n stays");
        a.act(Action::Quit);
        a.on_key(KeyEvent::from(KeyCode::Char('y')));
        assert!(a.quit, "y quits");
    }

    #[test]
    fn the_command_lines_program_is_no_edit() {
        let mut a = app();
        a.editor.set_text("BEGIN { exit(0); }");
        a.editor.mark_unmodified();
        a.act(Action::Quit);
        assert!(a.quit);
    }
}

#[cfg(test)]
mod export_tests {
    use super::*;
    use crate::agg::snapshot::{AggRow, AggView, KeyCell};
    use crate::agg::AggValue;

    fn view(stack: bool) -> AggView {
        let key = |f: &str| {
            if stack {
                KeyCell::Stack(vec![format!("k`{f}"), "k`root".into()])
            } else {
                KeyCell::Text(f.into())
            }
        };
        AggView {
            name: "@by fn".into(),
            rows: vec![
                AggRow {
                    keys: vec![key("a")],
                    value: AggValue::Count(3),
                },
                AggRow {
                    keys: vec![key("b")],
                    value: AggValue::Count(4),
                },
            ],
        }
    }

    #[test]
    fn export_writes_folded_stacks_csv_json_and_a_flame_graph() {
        let dir = tempfile::tempdir().unwrap();
        let files = export_view(&view(true), Export::Data, dir.path()).unwrap();
        assert_eq!(files.len(), 2, "{files:?}");
        let folded = std::fs::read_to_string(dir.path().join("dtx-by_fn.folded")).unwrap();
        let total: u64 = folded
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum();
        assert_eq!(total, 7, "{folded}");
        assert!(folded.contains("k`root;k`b 4"), "{folded}");
        let json = std::fs::read_to_string(dir.path().join("dtx-by_fn.json")).unwrap();
        assert!(json.contains("\"rows\""));
        export_view(&view(true), Export::FlameGraph, dir.path()).unwrap();
        let svg = std::fs::read_to_string(dir.path().join("dtx-by_fn.svg")).unwrap();
        assert!(svg.contains("<svg") && svg.contains("k`b"));
        // a table without stacks: CSV, and no flame graph
        export_view(&view(false), Export::Data, dir.path()).unwrap();
        let csv = std::fs::read_to_string(dir.path().join("dtx-by_fn.csv")).unwrap();
        assert!(csv.lines().any(|l| l == "b,4"), "{csv}");
        assert!(export_view(&view(false), Export::FlameGraph, dir.path()).is_err());
    }
}
