//! The console's keymap, as data: every global action, its default keys, and overrides read
//! from a `keys.toml` (`[keys]` with `action = "ctrl-r"` or `action = ["f5", "ctrl-r"]`).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What a key does, whichever pane has the focus.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Quit,
    Help,
    FocusNext,
    FocusPrev,
    FocusBrowser,
    FocusEditor,
    FocusResults,
    FocusLog,
    /// Compile the editor's script and swap it in while the source keeps going.
    Run,
    /// Compile and start the trace over with it.
    RunFromStart,
    /// End the running program (END fires, final output).
    Stop,
    Save,
    Open,
    New,
    Undo,
    Redo,
    PauseResume,
    Speed,
    RestartTrace,
    Redraw,
}

/// Each action: its name in `keys.toml`, what the help overlay says, its default keys.
pub const ACTIONS: &[(Action, &str, &str, &[&str])] = &[
    (Action::Quit, "quit", "quit dtx", &["ctrl-q", "f10"]),
    (Action::Help, "help", "this help", &["f1"]),
    (
        Action::FocusNext,
        "focus-next",
        "next pane (Esc in the editor)",
        &["tab"],
    ),
    (
        Action::FocusPrev,
        "focus-prev",
        "previous pane",
        &["backtab"],
    ),
    (
        Action::FocusBrowser,
        "focus-browser",
        "probe browser",
        &["f2"],
    ),
    (Action::FocusEditor, "focus-editor", "D editor", &["f3"]),
    (
        Action::FocusResults,
        "focus-results",
        "aggregations",
        &["f4"],
    ),
    (Action::FocusLog, "focus-log", "output log", &["f6"]),
    (
        Action::Run,
        "run",
        "compile and run; swaps the program, the source goes on",
        &["f5", "ctrl-r"],
    ),
    (
        Action::RunFromStart,
        "run-from-start",
        "compile and run from the start of the trace",
        &["shift-f5", "ctrl-t"],
    ),
    (
        Action::Stop,
        "stop",
        "stop the program (END, final output)",
        &["ctrl-x"],
    ),
    (Action::Save, "save", "save the script", &["ctrl-s"]),
    (
        Action::Open,
        "open",
        "open a script (dscripts/ picker)",
        &["ctrl-o"],
    ),
    (Action::New, "new", "a new, empty script", &["ctrl-n"]),
    (Action::Undo, "undo", "undo an edit", &["ctrl-z"]),
    (Action::Redo, "redo", "redo an edit", &["ctrl-y"]),
    (
        Action::PauseResume,
        "pause",
        "pause or resume the trace replay",
        &["f8", "ctrl-p"],
    ),
    (
        Action::Speed,
        "speed",
        "replay speed: 1x, 10x, max",
        &["f9"],
    ),
    (
        Action::RestartTrace,
        "restart",
        "replay the trace from its start",
        &["f7"],
    ),
    (Action::Redraw, "redraw", "redraw the screen", &["ctrl-l"]),
];

/// A key with its modifiers, as the keymap matches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeySpec {
    pub code: KeyCode,
    pub mods: KeyModifiers,
}

impl KeySpec {
    pub fn of(ev: &KeyEvent) -> KeySpec {
        // a shifted character arrives as its upper-case form: the shift is in the character
        let mods = match ev.code {
            KeyCode::Char(_) | KeyCode::BackTab => ev.modifiers - KeyModifiers::SHIFT,
            _ => ev.modifiers,
        };
        let code = match ev.code {
            KeyCode::Char(c) if mods.contains(KeyModifiers::CONTROL) => {
                KeyCode::Char(c.to_ascii_lowercase())
            }
            c => c,
        };
        KeySpec { code, mods }
    }

    /// Reads `ctrl-r`, `shift-f5`, `alt-1`, `tab`, `esc`, `space`, `?`.
    pub fn parse(s: &str) -> Result<KeySpec, String> {
        let lower = s.trim().to_ascii_lowercase();
        let mut mods = KeyModifiers::NONE;
        let mut rest = lower.as_str();
        loop {
            if let Some(r) = rest.strip_prefix("ctrl-") {
                mods |= KeyModifiers::CONTROL;
                rest = r;
            } else if let Some(r) = rest.strip_prefix("alt-") {
                mods |= KeyModifiers::ALT;
                rest = r;
            } else if let Some(r) = rest.strip_prefix("shift-") {
                mods |= KeyModifiers::SHIFT;
                rest = r;
            } else {
                break;
            }
        }
        let code = match rest {
            "tab" => KeyCode::Tab,
            "backtab" => KeyCode::BackTab,
            "esc" | "escape" => KeyCode::Esc,
            "enter" | "return" => KeyCode::Enter,
            "space" => KeyCode::Char(' '),
            "up" => KeyCode::Up,
            "down" => KeyCode::Down,
            "left" => KeyCode::Left,
            "right" => KeyCode::Right,
            "home" => KeyCode::Home,
            "end" => KeyCode::End,
            "pageup" => KeyCode::PageUp,
            "pagedown" => KeyCode::PageDown,
            "backspace" => KeyCode::Backspace,
            "delete" | "del" => KeyCode::Delete,
            "insert" => KeyCode::Insert,
            f if f.starts_with('f')
                && f.len() > 1
                && f[1..].chars().all(|c| c.is_ascii_digit()) =>
            {
                let n: u8 = f[1..].parse().map_err(|_| format!("bad key '{s}'"))?;
                if !(1..=24).contains(&n) {
                    return Err(format!("bad key '{s}'"));
                }
                KeyCode::F(n)
            }
            c if c.chars().count() == 1 => {
                let ch = c.chars().next().unwrap_or(' ');
                // shift on a character is in the character itself
                mods -= KeyModifiers::SHIFT;
                KeyCode::Char(ch)
            }
            _ => return Err(format!("bad key '{s}'")),
        };
        Ok(KeySpec { code, mods })
    }

    /// How the help overlay shows the key.
    pub fn label(&self) -> String {
        let mut s = String::new();
        if self.mods.contains(KeyModifiers::CONTROL) {
            s.push_str("Ctrl-");
        }
        if self.mods.contains(KeyModifiers::ALT) {
            s.push_str("Alt-");
        }
        if self.mods.contains(KeyModifiers::SHIFT) {
            s.push_str("Shift-");
        }
        match self.code {
            KeyCode::F(n) => s.push_str(&format!("F{n}")),
            KeyCode::Char(' ') => s.push_str("Space"),
            KeyCode::Char(c) => s.push(c.to_ascii_uppercase()),
            KeyCode::Tab => s.push_str("Tab"),
            KeyCode::BackTab => s.push_str("Shift-Tab"),
            KeyCode::Esc => s.push_str("Esc"),
            KeyCode::Enter => s.push_str("Enter"),
            other => s.push_str(&format!("{other:?}")),
        }
        s
    }
}

/// Keys to actions.
#[derive(Clone, Debug)]
pub struct KeyMap {
    bindings: Vec<(KeySpec, Action)>,
}

impl Default for KeyMap {
    fn default() -> Self {
        let mut bindings = Vec::new();
        for (action, _, _, keys) in ACTIONS {
            for k in *keys {
                if let Ok(spec) = KeySpec::parse(k) {
                    bindings.push((spec, *action));
                }
            }
        }
        KeyMap { bindings }
    }
}

impl KeyMap {
    /// The action bound to a key press.
    pub fn action(&self, ev: &KeyEvent) -> Option<Action> {
        let k = KeySpec::of(ev);
        self.bindings.iter().find(|(s, _)| *s == k).map(|(_, a)| *a)
    }

    /// The keys of an action, for the help overlay.
    pub fn keys_of(&self, a: Action) -> Vec<KeySpec> {
        self.bindings
            .iter()
            .filter(|(_, b)| *b == a)
            .map(|(k, _)| *k)
            .collect()
    }

    /// Applies a `keys.toml`: each action named there gets exactly the keys given. Errors
    /// name no file: the caller prefixes the file it read.
    pub fn apply_toml(&mut self, text: &str) -> Result<(), String> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
        let Some(keys) = table.get("keys").and_then(|k| k.as_table()) else {
            return Ok(());
        };
        for (name, v) in keys {
            let action = ACTIONS
                .iter()
                .find(|(_, n, _, _)| n == name)
                .map(|(a, ..)| *a)
                .ok_or_else(|| format!("no action '{name}'"))?;
            let specs: Vec<&str> = match v {
                toml::Value::String(s) => vec![s.as_str()],
                toml::Value::Array(a) => a.iter().filter_map(|x| x.as_str()).collect(),
                _ => return Err(format!("{name}: give a key or a list of keys")),
            };
            let parsed = specs
                .iter()
                .map(|s| KeySpec::parse(s))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("{name}: {e}"))?;
            self.bindings
                .retain(|(k, a)| *a != action && !parsed.contains(k));
            for k in parsed {
                self.bindings.push((k, action));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(code: KeyCode, mods: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, mods)
    }

    #[test]
    fn default_bindings_and_overrides() {
        let mut m = KeyMap::default();
        assert_eq!(
            m.action(&press(KeyCode::F(5), KeyModifiers::NONE)),
            Some(Action::Run)
        );
        assert_eq!(
            m.action(&press(KeyCode::Char('r'), KeyModifiers::CONTROL)),
            Some(Action::Run)
        );
        assert_eq!(
            m.action(&press(KeyCode::F(5), KeyModifiers::SHIFT)),
            Some(Action::RunFromStart)
        );
        assert_eq!(
            m.action(&press(KeyCode::Char('r'), KeyModifiers::NONE)),
            None
        );
        m.apply_toml("[keys]\nrun = [\"ctrl-g\"]\nquit = \"ctrl-r\"")
            .unwrap();
        assert_eq!(
            m.action(&press(KeyCode::Char('g'), KeyModifiers::CONTROL)),
            Some(Action::Run)
        );
        assert_eq!(
            m.action(&press(KeyCode::Char('r'), KeyModifiers::CONTROL)),
            Some(Action::Quit)
        );
        assert_eq!(m.action(&press(KeyCode::F(5), KeyModifiers::NONE)), None);
        assert!(m.apply_toml("[keys]\nnosuch = \"f1\"").is_err());
        assert!(m.apply_toml("[keys]\nrun = \"ctrl-\"").is_err());
        assert!(KeySpec::parse("f99").is_err());
    }

    #[test]
    fn every_action_has_a_default_key() {
        let m = KeyMap::default();
        for (a, name, _, _) in ACTIONS {
            assert!(!m.keys_of(*a).is_empty(), "{name}");
        }
    }
}
