//! Colour themes: `themes/*.toml` (dark, light and high-contrast are built in), chosen with
//! `--theme NAME` or `--theme path/to/file.toml`.

use ratatui::style::{Color, Modifier, Style};

const BUILT_IN: [(&str, &str); 3] = [
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
];

/// The names of the built-in themes.
pub fn built_in_names() -> impl Iterator<Item = &'static str> {
    BUILT_IN.iter().map(|(n, _)| *n)
}

#[derive(Clone, Debug, PartialEq)]
pub struct Theme {
    pub name: String,
    pub background: Color,
    pub text: Color,
    pub dim: Color,
    pub border: Color,
    pub border_focus: Color,
    pub title: Color,
    pub selection_bg: Color,
    pub selection_fg: Color,
    pub status_bg: Color,
    pub status_fg: Color,
    pub error: Color,
    pub warning: Color,
    pub ok: Color,
    pub bar: Color,
    pub accent: Color,
    pub keyword: Color,
    pub probe: Color,
    pub string: Color,
    pub number: Color,
    pub aggregation: Color,
    pub comment: Color,
    pub control: Color,
    pub punct: Color,
    pub ident: Color,
}

impl Default for Theme {
    fn default() -> Self {
        Theme::parse(BUILT_IN[0].1).unwrap_or_else(|_| Theme::fallback())
    }
}

impl Theme {
    /// A built-in theme by name, or a theme file.
    pub fn load(name_or_path: &str) -> Result<Theme, String> {
        if let Some((_, text)) = BUILT_IN.iter().find(|(n, _)| *n == name_or_path) {
            return Theme::parse(text);
        }
        let text = std::fs::read_to_string(name_or_path).map_err(|e| {
            format!(
                "theme '{name_or_path}': {e} (built-in themes: {})",
                built_in_names().collect::<Vec<_>>().join(", ")
            )
        })?;
        Theme::parse(&text).map_err(|e| format!("theme '{name_or_path}': {e}"))
    }

    /// Reads a theme's TOML text; missing entries keep the dark theme's colours.
    pub fn parse(text: &str) -> Result<Theme, String> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
        let mut t = Theme::fallback();
        if let Some(n) = table.get("name").and_then(|v| v.as_str()) {
            t.name = n.to_string();
        }
        for section in ["ui", "syntax"] {
            let Some(s) = table.get(section).and_then(|v| v.as_table()) else {
                continue;
            };
            for (k, v) in s {
                let v = v
                    .as_str()
                    .ok_or_else(|| format!("[{section}] {k}: a colour is a string"))?;
                let c =
                    parse_color(v).ok_or_else(|| format!("[{section}] {k}: bad colour '{v}'"))?;
                if !t.set(k, c) {
                    return Err(format!("[{section}] {k}: no such colour slot"));
                }
            }
        }
        Ok(t)
    }

    fn set(&mut self, key: &str, c: Color) -> bool {
        let slot = match key {
            "background" => &mut self.background,
            "text" => &mut self.text,
            "dim" => &mut self.dim,
            "border" => &mut self.border,
            "border_focus" => &mut self.border_focus,
            "title" => &mut self.title,
            "selection_bg" => &mut self.selection_bg,
            "selection_fg" => &mut self.selection_fg,
            "status_bg" => &mut self.status_bg,
            "status_fg" => &mut self.status_fg,
            "error" => &mut self.error,
            "warning" => &mut self.warning,
            "ok" => &mut self.ok,
            "bar" => &mut self.bar,
            "accent" => &mut self.accent,
            "keyword" => &mut self.keyword,
            "probe" => &mut self.probe,
            "string" => &mut self.string,
            "number" => &mut self.number,
            "aggregation" => &mut self.aggregation,
            "comment" => &mut self.comment,
            "control" => &mut self.control,
            "punct" => &mut self.punct,
            "ident" => &mut self.ident,
            _ => return false,
        };
        *slot = c;
        true
    }

    fn fallback() -> Theme {
        Theme {
            name: "default".into(),
            background: Color::Reset,
            text: Color::Gray,
            dim: Color::DarkGray,
            border: Color::DarkGray,
            border_focus: Color::LightCyan,
            title: Color::White,
            selection_bg: Color::Blue,
            selection_fg: Color::White,
            status_bg: Color::DarkGray,
            status_fg: Color::White,
            error: Color::LightRed,
            warning: Color::Yellow,
            ok: Color::LightGreen,
            bar: Color::Cyan,
            accent: Color::LightMagenta,
            keyword: Color::LightMagenta,
            probe: Color::LightCyan,
            string: Color::LightGreen,
            number: Color::Yellow,
            aggregation: Color::LightBlue,
            comment: Color::DarkGray,
            control: Color::Magenta,
            punct: Color::Gray,
            ident: Color::White,
        }
    }

    pub fn base(&self) -> Style {
        Style::default().fg(self.text).bg(self.background)
    }
    pub fn dimmed(&self) -> Style {
        Style::default().fg(self.dim)
    }
    pub fn selected(&self) -> Style {
        Style::default()
            .fg(self.selection_fg)
            .bg(self.selection_bg)
            .add_modifier(Modifier::BOLD)
    }
    pub fn border(&self, focused: bool) -> Style {
        if focused {
            Style::default()
                .fg(self.border_focus)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::default().fg(self.border)
        }
    }
    pub fn status(&self) -> Style {
        Style::default().fg(self.status_fg).bg(self.status_bg)
    }
}

/// A colour name (`lightcyan`, `darkgray`, `reset`) or `#rrggbb`.
pub fn parse_color(s: &str) -> Option<Color> {
    let s = s.trim();
    if let Some(hex) = s.strip_prefix('#') {
        if hex.len() != 6 {
            return None;
        }
        let v = u32::from_str_radix(hex, 16).ok()?;
        return Some(Color::Rgb((v >> 16) as u8, (v >> 8) as u8, v as u8));
    }
    Some(
        match s.to_ascii_lowercase().replace(['_', '-', ' '], "").as_str() {
            "reset" | "default" => Color::Reset,
            "black" => Color::Black,
            "red" => Color::Red,
            "green" => Color::Green,
            "yellow" => Color::Yellow,
            "blue" => Color::Blue,
            "magenta" => Color::Magenta,
            "cyan" => Color::Cyan,
            "gray" | "grey" => Color::Gray,
            "darkgray" | "darkgrey" => Color::DarkGray,
            "lightred" => Color::LightRed,
            "lightgreen" => Color::LightGreen,
            "lightyellow" => Color::LightYellow,
            "lightblue" => Color::LightBlue,
            "lightmagenta" => Color::LightMagenta,
            "lightcyan" => Color::LightCyan,
            "white" => Color::White,
            _ => return None,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_themes_parse_and_differ() {
        let themes: Vec<Theme> = built_in_names().map(|n| Theme::load(n).unwrap()).collect();
        assert_eq!(themes.len(), 3);
        assert_eq!(themes[1].name, "light");
        assert_ne!(themes[0].text, themes[1].text);
        assert_eq!(themes[2].border_focus, Color::Yellow);
    }

    #[test]
    fn bad_themes_are_errors() {
        assert!(Theme::parse("[ui]\ntext = \"nosuchcolour\"").is_err());
        assert!(Theme::parse("[ui]\nnoslot = \"red\"").is_err());
        assert!(Theme::parse("[ui\n").is_err());
        assert!(Theme::load("/no/such/theme.toml").is_err());
        assert_eq!(parse_color("#102030"), Some(Color::Rgb(16, 32, 48)));
    }
}
