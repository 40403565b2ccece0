//! The D editor's model: the text and its edit history (ratatui-textarea does the editing),
//! the file it came from, the compiler's last complaint, syntax highlighting from dtx's lexer,
//! atomic save, and an autosave that keeps every edit safe.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crossterm::event::KeyEvent;
use ratatui_textarea::{CursorMove, TextArea};

use super::highlight::{self, Run};
use crate::lang::diag::Diagnostic;

/// Edits are autosaved this long after the last one.
const AUTOSAVE_AFTER: Duration = Duration::from_secs(2);

pub struct Editor {
    pub area: TextArea<'static>,
    pub path: Option<PathBuf>,
    /// The built-in dashboard shown, when the text is one (saving writes a file of its name).
    pub builtin: Option<String>,
    pub diagnostic: Option<Diagnostic>,
    /// Bumped by every change of the text.
    version: u64,
    saved_version: u64,
    autosaved_version: u64,
    last_change: Option<Instant>,
    autosave: PathBuf,
    highlight: RefCell<(u64, Vec<Vec<Run>>)>,
    /// First line shown (kept by the drawing so the cursor stays visible).
    pub top: Cell<usize>,
}

impl Default for Editor {
    fn default() -> Self {
        Editor::new()
    }
}

/// Where the autosave goes: `$XDG_STATE_HOME/dtx/autosave.d` (or `~/.local/state/...`).
pub fn autosave_path() -> PathBuf {
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .or_else(|| std::env::var_os("USERPROFILE"))
                .map(|h| PathBuf::from(h).join(".local").join("state"))
        })
        .unwrap_or_else(std::env::temp_dir);
    base.join("dtx").join("autosave.d")
}

impl Editor {
    pub fn new() -> Editor {
        let mut area = TextArea::default();
        area.set_tab_length(4);
        area.set_max_histories(1000);
        Editor {
            area,
            path: None,
            builtin: None,
            diagnostic: None,
            version: 0,
            saved_version: 0,
            autosaved_version: 0,
            last_change: None,
            autosave: autosave_path(),
            highlight: RefCell::new((u64::MAX, Vec::new())),
            top: Cell::new(0),
        }
    }

    /// Where autosaves go (tests point it elsewhere).
    pub fn set_autosave_path(&mut self, p: PathBuf) {
        self.autosave = p;
    }

    pub fn text(&self) -> String {
        self.area.lines().join("\n")
    }

    pub fn set_text(&mut self, text: &str) {
        let lines: Vec<String> = text.lines().map(String::from).collect();
        let mut area = TextArea::new(if lines.is_empty() {
            vec![String::new()]
        } else {
            lines
        });
        area.set_tab_length(4);
        area.set_max_histories(1000);
        self.area = area;
        self.changed();
        self.top.set(0);
    }

    /// The name the compiler and the status line use.
    pub fn file_label(&self) -> String {
        match (&self.path, &self.builtin) {
            (Some(p), _) => p.display().to_string(),
            (None, Some(b)) => b.clone(),
            (None, None) => "untitled.d".into(),
        }
    }

    pub fn is_modified(&self) -> bool {
        self.version != self.saved_version
    }

    fn changed(&mut self) {
        self.version += 1;
        self.last_change = Some(Instant::now());
    }

    /// An editing key; true when the text changed.
    pub fn key(&mut self, k: KeyEvent) -> bool {
        let changed = self.area.input(k);
        if changed {
            self.changed();
        }
        changed
    }

    pub fn undo(&mut self) -> bool {
        let c = self.area.undo();
        if c {
            self.changed();
        }
        c
    }

    pub fn redo(&mut self) -> bool {
        let c = self.area.redo();
        if c {
            self.changed();
        }
        c
    }

    pub fn scroll_by(&mut self, d: isize) {
        let n = self.area.lines().len() as isize;
        let t = (self.top.get() as isize + d).clamp(0, (n - 1).max(0));
        self.top.set(t as usize);
        let (row, _) = (self.area.cursor().0, self.area.cursor().1);
        if (row as isize) < t {
            for _ in row..t as usize {
                self.area.move_cursor(CursorMove::Down);
            }
        }
    }

    /// Appends a clause at the end of the script and puts the cursor in its body.
    pub fn insert_clause(&mut self, clause: &str) {
        self.area.move_cursor(CursorMove::Bottom);
        self.area.move_cursor(CursorMove::End);
        let last_empty = self.area.lines().last().is_none_or(|l| l.is_empty());
        let only_line = self.area.lines().len() == 1 && last_empty;
        if !last_empty {
            self.area.insert_newline();
        }
        if !only_line {
            self.area.insert_newline();
        }
        let start_row = self.area.cursor().0;
        self.area.insert_str(clause.trim_end_matches('\n'));
        // onto the first line of the body
        let body = clause
            .lines()
            .position(|l| l.starts_with('\t'))
            .unwrap_or(0);
        self.area
            .move_cursor(CursorMove::Jump((start_row + body) as u16, 0));
        self.area.move_cursor(CursorMove::End);
        self.changed();
    }

    /// The highlighting of every line, recomputed when the text has changed.
    pub fn highlighted(&self) -> std::cell::Ref<'_, (u64, Vec<Vec<Run>>)> {
        if self.highlight.borrow().0 != self.version {
            let runs = highlight::highlight(self.area.lines());
            *self.highlight.borrow_mut() = (self.version, runs);
        }
        self.highlight.borrow()
    }

    pub fn open(&mut self, p: &Path) -> Result<(), String> {
        let bytes = std::fs::read(p).map_err(|e| format!("cannot open {}: {e}", p.display()))?;
        let text = String::from_utf8_lossy(&bytes).replace('\r', "");
        self.set_text(&text);
        self.path = Some(p.to_path_buf());
        self.builtin = None;
        self.saved_version = self.version;
        self.diagnostic = None;
        Ok(())
    }

    /// Starts an empty script with no file.
    pub fn new_script(&mut self) {
        self.set_text("");
        self.path = None;
        self.builtin = None;
        self.saved_version = self.version;
        self.diagnostic = None;
    }

    /// Takes the text as it is now for the unedited state (text the user did not write: the
    /// command line's program, a skeleton).
    pub fn mark_unmodified(&mut self) {
        self.saved_version = self.version;
    }

    /// Shows a built-in dashboard's text (it has no file until saved).
    pub fn open_builtin(&mut self, name: &str, text: &str) {
        self.set_text(text);
        self.path = None;
        self.builtin = Some(name.to_string());
        self.saved_version = self.version;
        self.diagnostic = None;
    }

    /// Saves to the script's file (a new script goes to `untitled.d`): written beside it and
    /// renamed over it, so a failure never leaves half a file.
    pub fn save(&mut self) -> Result<PathBuf, String> {
        let path = self.path.clone().unwrap_or_else(|| {
            PathBuf::from(
                self.builtin
                    .as_deref()
                    .and_then(|b| b.rsplit('/').next())
                    .unwrap_or("untitled.d"),
            )
        });
        let mut text = self.text();
        text.push('\n');
        write_atomic(&path, text.as_bytes())
            .map_err(|e| format!("cannot save {}: {e}", path.display()))?;
        self.path = Some(path.clone());
        self.saved_version = self.version;
        Ok(path)
    }

    /// Writes the autosave when the text changed and has been still for a moment.
    pub fn autosave_if_due(&mut self, now: Instant) -> Result<(), String> {
        match self.last_change {
            Some(t) if now.duration_since(t) >= AUTOSAVE_AFTER => self.autosave_now(),
            _ => Ok(()),
        }
    }

    /// Writes the autosave now if there is anything unsaved in it.
    pub fn autosave_now(&mut self) -> Result<(), String> {
        if self.autosaved_version == self.version || !self.is_modified() {
            return Ok(());
        }
        if let Some(d) = self.autosave.parent() {
            std::fs::create_dir_all(d).map_err(|e| e.to_string())?;
        }
        let mut text = format!("/* dtx autosave of {} */\n", self.file_label());
        text.push_str(&self.text());
        text.push('\n');
        write_atomic(&self.autosave, text.as_bytes()).map_err(|e| e.to_string())?;
        self.autosaved_version = self.version;
        Ok(())
    }
}

/// Writes a file by writing a sibling and renaming it over the target.
pub fn write_atomic(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "script.d".into());
    let tmp = path.with_file_name(format!(".{name}.dtx-tmp"));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::{KeyCode, KeyModifiers};

    #[test]
    fn edits_undo_save_and_autosave() {
        let dir = tempfile::tempdir().unwrap();
        let mut e = Editor::new();
        e.set_autosave_path(dir.path().join("auto.d"));
        for c in "BEGIN".chars() {
            e.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
        }
        assert_eq!(e.text(), "BEGIN");
        e.undo();
        assert_ne!(e.text(), "BEGIN");
        e.redo();
        assert_eq!(e.text(), "BEGIN");
        e.autosave_now().unwrap();
        let auto = std::fs::read_to_string(dir.path().join("auto.d")).unwrap();
        assert!(auto.contains("BEGIN"));
        e.path = Some(dir.path().join("s.d"));
        e.save().unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("s.d")).unwrap(),
            "BEGIN\n"
        );
        assert!(!e.is_modified());
        // nothing unsaved: the autosave is not rewritten
        std::fs::remove_file(dir.path().join("auto.d")).unwrap();
        e.autosave_now().unwrap();
        assert!(!dir.path().join("auto.d").exists());
    }

    #[test]
    fn clause_insertion_lands_in_the_body() {
        let mut e = Editor::new();
        e.insert_clause("sched:::on-cpu\n{\n\t@[probefunc] = count();\n}\n");
        assert_eq!(e.text(), "sched:::on-cpu\n{\n\t@[probefunc] = count();\n}");
        assert_eq!(e.area.cursor().0, 2);
        e.insert_clause("BEGIN\n{\n\tx = 1;\n}\n");
        assert!(
            e.text().ends_with("}\n\nBEGIN\n{\n\tx = 1;\n}"),
            "{:?}",
            e.text()
        );
    }
}
