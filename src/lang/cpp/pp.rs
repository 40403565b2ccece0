//! The preprocessor's state ([`Pp`]: macros, output, presumed line and file, limits) and
//! the walk over one file's logical lines.

use std::collections::HashMap;
use std::collections::HashSet;
use std::path::PathBuf;
use std::rc::Rc;

use super::lex::escape_str;
use super::lines::split_lines;
use super::macros::{parse_define, Macro};
use super::{CppError, CppOptions, CMDLINE, EXPANSION_TOKENS_PER_BYTE, MAX_EXPANSION_TOKENS};

pub(super) struct Cond {
    pub(super) kind: &'static str,
    pub(super) line: u32,
    pub(super) parent_active: bool,
    pub(super) taken: bool,
    pub(super) active: bool,
    pub(super) seen_else: bool,
}

pub(super) struct Pp<'o> {
    pub(super) opts: &'o CppOptions,
    pub(super) macros: HashMap<String, Rc<Macro>>,
    pub(super) disabled: HashSet<Rc<str>>,
    pub(super) out: String,
    /// Newlines swallowed by macro invocations, to re-emit after them.
    pub(super) pending_nl: u32,
    /// Current physical line (for errors and `__LINE__`).
    pub(super) line: u32,
    /// Presumed line = physical line + delta (changed by `#line`).
    pub(super) delta: i64,
    /// Presumed file name.
    pub(super) file: String,
    pub(super) cur_path: Option<PathBuf>,
    pub(super) nest: u32,
    pub(super) budget: u64,
    pub(super) budget_limit: u64,
    pub(super) once: HashSet<PathBuf>,
}

pub(super) type R<T> = Result<T, CppError>;

impl<'o> Pp<'o> {
    pub(super) fn new(opts: &'o CppOptions) -> Self {
        Pp {
            opts,
            macros: HashMap::new(),
            disabled: HashSet::new(),
            out: String::new(),
            pending_nl: 0,
            line: 0,
            delta: 0,
            file: String::new(),
            cur_path: None,
            nest: 0,
            budget: 0,
            budget_limit: MAX_EXPANSION_TOKENS,
            once: HashSet::new(),
        }
    }

    pub(super) fn presumed(&self, line: u32) -> u32 {
        (i64::from(line) + self.delta).clamp(0, i64::from(u32::MAX)) as u32
    }

    pub(super) fn err_at(&self, line: u32, msg: impl Into<String>) -> CppError {
        CppError {
            file: self.file.clone(),
            line: self.presumed(line),
            message: msg.into(),
        }
    }

    pub(super) fn err(&self, msg: impl Into<String>) -> CppError {
        self.err_at(self.line, msg)
    }

    pub(super) fn init_macros(&mut self) -> R<()> {
        let cmd_err = |m: String| CppError {
            file: CMDLINE.into(),
            line: 0,
            message: m,
        };
        let opts = self.opts;
        for (n, v) in &opts.predefined {
            let m = parse_define(&format!("{n} {v}")).map_err(cmd_err)?;
            self.macros.insert(m.name.to_string(), Rc::new(m));
        }
        for (n, v) in &opts.defines {
            let (name, value) = match (v, n.split_once('=')) {
                (Some(v), _) => (n.as_str(), v.as_str()),
                (None, Some((a, b))) => (a, b),
                (None, None) => (n.as_str(), "1"),
            };
            let m = parse_define(&format!("{name} {value}")).map_err(cmd_err)?;
            self.macros.insert(m.name.to_string(), Rc::new(m));
        }
        for u in &opts.undefs {
            self.macros.remove(u.trim());
        }
        Ok(())
    }

    pub(super) fn marker(&mut self, line: i64, file: &str) {
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.out.push('\n');
        }
        let line = line.clamp(0, i64::from(u32::MAX));
        self.out
            .push_str(&format!("# {} \"{}\"\n", line, escape_str(file)));
    }

    pub(super) fn newlines(&mut self, n: u32) {
        for _ in 0..n {
            self.out.push('\n');
        }
    }

    pub(super) fn process_file(
        &mut self,
        src: &str,
        name: &str,
        dir: Option<PathBuf>,
        depth: usize,
    ) -> R<()> {
        self.file = name.to_string();
        self.delta = 0;
        let extra = u64::try_from(src.len())
            .unwrap_or(u64::MAX)
            .saturating_mul(EXPANSION_TOKENS_PER_BYTE);
        self.budget_limit = self.budget_limit.saturating_add(extra);
        let mut rest = src;
        let mut first_line = 1;
        if src.starts_with("#!") {
            let end = src.find('\n').map_or(src.len(), |e| e + 1);
            let first = src.get(..end).unwrap_or("");
            if depth == 0 {
                self.out.push_str(first);
                if !first.ends_with('\n') {
                    self.out.push('\n');
                }
                self.marker(2, name);
            } else {
                self.marker(1, name);
                self.out.push('\n');
            }
            rest = src.get(end..).unwrap_or("");
            first_line = 2;
        } else {
            self.marker(1, name);
        }
        let lines = split_lines(rest, first_line).map_err(|(l, m)| self.err_at(l, m))?;
        let mut conds: Vec<Cond> = Vec::new();
        let mut chunk = String::new();
        let mut chunk_line = first_line;
        for ll in &lines {
            let active = conds.last().is_none_or(|c| c.active);
            if ll.text.starts_with('#') {
                if !chunk.is_empty() {
                    self.expand_chunk(&chunk, chunk_line)?;
                    chunk.clear();
                }
                self.directive(ll, &mut conds, active, &dir, depth)?;
            } else if active {
                if chunk.is_empty() {
                    chunk_line = ll.line;
                }
                chunk.push_str(&ll.text);
                for _ in 0..=ll.cont {
                    chunk.push('\n');
                }
            } else {
                self.newlines(ll.phys);
            }
        }
        if !chunk.is_empty() {
            self.expand_chunk(&chunk, chunk_line)?;
        }
        if let Some(c) = conds.last() {
            return Err(self.err_at(c.line, format!("unterminated {}", c.kind)));
        }
        Ok(())
    }
}
