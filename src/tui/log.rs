//! The output log: what the program printed (`printf`, `trace`, default probe lines, the final
//! aggregations) and, marked, what dtx said on its stderr meanwhile (errors on enabled probes,
//! drops, the sources' notes), scrollable and searchable, bounded in memory.

use std::collections::VecDeque;

use crossterm::event::{KeyCode, KeyEvent};

/// Lines kept; older ones are dropped.
pub const MAX_LINES: usize = 20_000;

#[derive(Default)]
pub struct Log {
    /// Each line, and whether dtx said it on stderr (not the program's output).
    lines: VecDeque<(String, bool)>,
    /// The last line, until its newline arrives.
    partial: String,
    /// Lines scrolled back from the end (0 follows the output).
    pub back: usize,
    pub search: String,
    pub searching: bool,
    /// Lines dropped from the front.
    pub dropped: u64,
}

impl Log {
    /// Adds output text. A line that starts with [`crate::output::stderr::MARK`] (anywhere in
    /// a line: after a partial line of output) is one dtx said on stderr, in its place among
    /// the output. Returns the last such line.
    pub fn push(&mut self, text: &str) -> Option<String> {
        let mut said = None;
        let mut rest = text;
        while let Some(i) = rest.find('\n') {
            let mut line = std::mem::take(&mut self.partial);
            line.push_str(&rest[..i]);
            match line.split_once(crate::output::stderr::MARK) {
                Some((before, own)) => {
                    // the output's partial line stays partial, after dtx's line
                    self.partial = before.to_string();
                    self.add(own.to_string(), true);
                    said = Some(own.to_string());
                }
                None => self.add(line, false),
            }
            rest = &rest[i + 1..];
        }
        self.partial.push_str(rest);
        said
    }

    /// A line dtx said on stderr: one line of its own, before a partial line of output.
    pub fn push_stderr(&mut self, line: String) {
        self.add(line, true);
    }

    fn add(&mut self, line: String, stderr: bool) {
        self.lines.push_back((line, stderr));
        if self.back > 0 {
            // keep the view where it is while output arrives
            self.back += 1;
        }
        while self.lines.len() > MAX_LINES {
            self.lines.pop_front();
            self.dropped += 1;
        }
        self.back = self.back.min(self.lines.len());
    }

    pub fn len(&self) -> usize {
        self.lines.len() + usize::from(!self.partial.is_empty())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn line(&self, i: usize) -> Option<&str> {
        match self.lines.get(i) {
            Some((l, _)) => Some(l),
            None if i == self.lines.len() && !self.partial.is_empty() => Some(&self.partial),
            None => None,
        }
    }

    /// Whether line `i` is one dtx said on stderr.
    pub fn is_stderr(&self, i: usize) -> bool {
        self.lines.get(i).is_some_and(|l| l.1)
    }

    /// The lines that fit in `height` rows: (first index, count).
    pub fn window(&self, height: usize) -> (usize, usize) {
        let n = self.len();
        let end = n.saturating_sub(self.back);
        let start = end.saturating_sub(height);
        (start, end - start)
    }

    pub fn scroll_by(&mut self, d: isize) {
        self.back = (self.back as isize + d).clamp(0, self.len() as isize) as usize;
    }

    /// Scrolls back to the previous line containing the search text.
    pub fn find_prev(&mut self) -> bool {
        if self.search.is_empty() {
            return false;
        }
        let n = self.len();
        let end = n.saturating_sub(self.back);
        for i in (0..end.saturating_sub(1)).rev() {
            if self.line(i).is_some_and(|l| l.contains(&self.search)) {
                self.back = n - (i + 1);
                return true;
            }
        }
        false
    }

    pub fn key(&mut self, k: KeyEvent) {
        match k.code {
            KeyCode::Up => self.scroll_by(1),
            KeyCode::Down => self.scroll_by(-1),
            KeyCode::PageUp => self.scroll_by(20),
            KeyCode::PageDown => self.scroll_by(-20),
            KeyCode::Home => self.back = self.len(),
            KeyCode::End => self.back = 0,
            KeyCode::Char('/') => {
                self.searching = true;
                self.search.clear();
            }
            KeyCode::Char('n') => {
                self.find_prev();
            }
            _ => {}
        }
    }

    /// Keys while the search text is typed.
    pub fn search_key(&mut self, k: KeyEvent) {
        match k.code {
            KeyCode::Enter => {
                self.searching = false;
                self.back = 0;
                self.find_prev();
            }
            KeyCode::Esc => {
                self.searching = false;
                self.search.clear();
            }
            KeyCode::Backspace => {
                self.search.pop();
            }
            KeyCode::Char(c) => self.search.push(c),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_windows_and_search() {
        let mut l = Log::default();
        l.push("one\ntw");
        l.push("o\nthree\n");
        assert_eq!(l.len(), 3);
        assert_eq!(l.line(1), Some("two"));
        assert_eq!(l.window(2), (1, 2));
        l.search = "one".into();
        assert!(l.find_prev());
        assert_eq!(l.window(1), (0, 1));
        for i in 0..MAX_LINES + 5 {
            l.push(&format!("{i}\n"));
        }
        assert_eq!(l.len(), MAX_LINES);
        assert!(l.dropped > 0);
    }

    #[test]
    fn stderr_lines_are_marked_and_go_before_a_partial_line() {
        let mut l = Log::default();
        l.push("done\nhalf");
        l.push_stderr("dtx: error on enabled probe ID 1".into());
        l.push(" line\n");
        // dtx's line in the output stream, marked, after a partial line of output
        let said = l.push("more\nand \u{1}dtx: 2 drops on CPU 1\nmore\n");
        assert_eq!(said.as_deref(), Some("dtx: 2 drops on CPU 1"));
        let lines: Vec<(&str, bool)> = (0..l.len())
            .map(|i| (l.line(i).unwrap(), l.is_stderr(i)))
            .collect();
        assert_eq!(
            lines,
            [
                ("done", false),
                ("dtx: error on enabled probe ID 1", true),
                ("half line", false),
                ("more", false),
                ("dtx: 2 drops on CPU 1", true),
                ("and more", false),
            ]
        );
        // a view scrolled back stays where it is
        l.scroll_by(1);
        l.push_stderr("dtx: 3 drops on CPU 0".into());
        assert_eq!(l.back, 2);
        assert_eq!(l.push("plain\n"), None);
    }
}
