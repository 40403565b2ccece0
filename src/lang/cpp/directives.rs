//! Directives: `#define`, `#include`, the conditionals, `#line`, `#error`, `#pragma`...

use std::path::Path;
use std::path::PathBuf;
use std::rc::Rc;

use super::lex::{is_hspace, is_ident_cont, is_ident_start, skip_sp, tokenize, Tok, K};
use super::lines::LLine;
use super::macros::parse_define;
use super::pp::{Cond, Pp, R};
use super::{parent_dir, MAX_INCLUDE_DEPTH};

impl<'o> Pp<'o> {
    pub(super) fn directive(
        &mut self,
        ll: &LLine,
        conds: &mut Vec<Cond>,
        active: bool,
        dir: &Option<PathBuf>,
        depth: usize,
    ) -> R<()> {
        self.line = ll.line;
        let text = ll.text.replace('\n', " ");
        let body = text.get(1..).unwrap_or("");
        let body = body.trim_start_matches(|c: char| c.is_ascii() && is_hspace(c as u8));
        let name_len = if body.bytes().next().is_some_and(is_ident_start) {
            body.bytes().take_while(|&b| is_ident_cont(b)).count()
        } else {
            0
        };
        let name = body.get(..name_len).unwrap_or("");
        let rest = body.get(name_len..).unwrap_or("");

        match name {
            "if" | "ifdef" | "ifndef" => {
                let kind = match name {
                    "if" => "#if",
                    "ifdef" => "#ifdef",
                    _ => "#ifndef",
                };
                let v = if active {
                    match name {
                        "if" => self.eval_if(rest)?,
                        "ifdef" => self.ifdef_name(rest, name)?,
                        _ => !self.ifdef_name(rest, name)?,
                    }
                } else {
                    false
                };
                conds.push(Cond {
                    kind,
                    line: ll.line,
                    parent_active: active,
                    taken: v || !active,
                    active: active && v,
                    seen_else: false,
                });
            }
            "elif" | "elifdef" | "elifndef" => {
                let Some(c) = conds.last() else {
                    return Err(self.err(format!("#{name} without #if")));
                };
                if c.seen_else {
                    return Err(self.err(format!("#{name} after #else")));
                }
                let (taken, parent_active) = (c.taken, c.parent_active);
                let v = if !taken && parent_active {
                    match name {
                        "elif" => self.eval_if(rest)?,
                        "elifdef" => self.ifdef_name(rest, name)?,
                        _ => !self.ifdef_name(rest, name)?,
                    }
                } else {
                    false
                };
                if let Some(c) = conds.last_mut() {
                    c.active = v;
                    c.taken |= v;
                }
            }
            "else" => {
                let Some(c) = conds.last_mut() else {
                    return Err(self.err("#else without #if"));
                };
                if c.seen_else {
                    return Err(self.err("#else after #else"));
                }
                c.seen_else = true;
                c.active = c.parent_active && !c.taken;
                c.taken = true;
                c.kind = "#else";
            }
            "endif" => {
                if conds.pop().is_none() {
                    return Err(self.err("#endif without #if"));
                }
            }
            _ if !active => {}
            "" => {
                let r = rest.trim();
                if r.starts_with(|c: char| c.is_ascii_digit()) {
                    return self.line_directive(ll, r, false);
                }
                if !r.is_empty() {
                    let shown: String = r.chars().take(20).collect();
                    return Err(self.err(format!("invalid preprocessing directive #{shown}")));
                }
            }
            "define" => {
                let m = parse_define(rest).map_err(|e| self.err(e))?;
                self.macros.insert(m.name.to_string(), Rc::new(m));
            }
            "undef" => {
                let toks = tokenize(rest);
                let i = skip_sp(&toks, 0);
                match toks.get(i) {
                    None => return Err(self.err("no macro name given in #undef directive")),
                    Some(t) if t.kind != K::Ident => {
                        return Err(self.err("macro names must be identifiers"));
                    }
                    Some(t) => {
                        self.macros.remove(&*t.text);
                    }
                }
            }
            "include" | "include_next" => return self.include(ll, rest, dir, depth),
            "pragma" => {
                if rest.trim() == "once" {
                    if let Some(p) = &self.cur_path {
                        let key = p.canonicalize().unwrap_or_else(|_| p.clone());
                        self.once.insert(key);
                    }
                } else {
                    self.out.push_str(&text);
                    self.out.push('\n');
                    self.newlines(ll.phys.saturating_sub(1));
                    return Ok(());
                }
            }
            "line" => return self.line_directive(ll, rest, true),
            "error" => {
                return Err(self.err(format!("#error {}", rest.trim())));
            }
            "warning" | "ident" | "sccs" | "assert" | "unassert" => {}
            _ => {
                return Err(self.err(format!("invalid preprocessing directive #{name}")));
            }
        }
        self.newlines(ll.phys);
        Ok(())
    }

    fn ifdef_name(&self, rest: &str, dname: &str) -> R<bool> {
        let toks = tokenize(rest);
        let i = skip_sp(&toks, 0);
        match toks.get(i) {
            None => Err(self.err(format!("no macro name given in #{dname} directive"))),
            Some(t) if t.kind != K::Ident => Err(self.err("macro names must be identifiers")),
            Some(t) => Ok(self.is_defined(&t.text)),
        }
    }

    pub(super) fn is_defined(&self, name: &str) -> bool {
        self.macros.contains_key(name) || name == "__LINE__" || name == "__FILE__"
    }

    fn line_directive(&mut self, ll: &LLine, rest: &str, expand: bool) -> R<()> {
        let mut toks = tokenize(rest);
        if expand {
            toks = self.expand_isolated(&toks)?;
        }
        let toks: Vec<Tok> = toks.into_iter().filter(|t| !t.is_space()).collect();
        let Some(n) = toks.first() else {
            return Err(self.err("unexpected end of line after #line"));
        };
        if n.kind != K::Number || !n.text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.err(format!(
                "\"{}\" after #line is not a positive integer",
                n.text
            )));
        }
        let num: i64 = n.text.parse().unwrap_or(i64::from(u32::MAX));
        if let Some(f) = toks.get(1) {
            if f.kind != K::Str || f.text.len() < 2 || !f.text.ends_with('"') {
                return Err(self.err(format!("invalid filename \"{}\"", f.text)));
            }
            let inner = f.text.get(1..f.text.len() - 1).unwrap_or("");
            let mut s = String::new();
            let mut esc = false;
            for c in inner.chars() {
                if esc || c != '\\' {
                    s.push(c);
                    esc = false;
                } else {
                    esc = true;
                }
            }
            self.file = s;
        }
        let next_phys = i64::from(ll.line) + i64::from(ll.phys);
        self.delta = num - next_phys;
        let file = self.file.clone();
        self.marker(num, &file);
        Ok(())
    }

    fn include(&mut self, ll: &LLine, rest: &str, dir: &Option<PathBuf>, depth: usize) -> R<()> {
        let spec = rest.trim();
        let (fname, angle) = match parse_include_spec(spec) {
            Some(x) => x,
            None => {
                let toks = tokenize(spec);
                let toks = self.expand_isolated(&toks)?;
                let mut s = String::new();
                for t in &toks {
                    if !matches!(t.kind, K::End | K::Guard | K::Placemarker) {
                        s.push_str(&t.text);
                    }
                }
                match parse_include_spec(s.trim()) {
                    Some(x) => x,
                    None => {
                        return Err(self.err("#include expects \"FILENAME\" or <FILENAME>"));
                    }
                }
            }
        };
        if fname.is_empty() {
            return Err(self.err("empty filename in #include"));
        }
        let p = Path::new(&fname);
        let mut cands: Vec<PathBuf> = Vec::new();
        if p.is_absolute() {
            cands.push(p.to_path_buf());
        } else {
            if !angle {
                cands.push(match dir {
                    Some(d) => d.join(p),
                    None => p.to_path_buf(),
                });
            }
            for d in &self.opts.include_dirs {
                cands.push(d.join(p));
            }
        }
        let Some(found) = cands.into_iter().find(|c| c.is_file()) else {
            return Err(self.err(format!("{fname}: No such file or directory")));
        };
        if depth + 1 >= MAX_INCLUDE_DEPTH {
            return Err(self.err(format!(
                "#include nested depth {} exceeds maximum of {}",
                depth + 1,
                MAX_INCLUDE_DEPTH
            )));
        }
        let key = found.canonicalize().unwrap_or_else(|_| found.clone());
        if self.once.contains(&key) {
            self.newlines(ll.phys);
            return Ok(());
        }
        let bytes =
            std::fs::read(&found).map_err(|e| self.err(format!("{}: {}", found.display(), e)))?;
        let content = String::from_utf8_lossy(&bytes).into_owned();
        let shown = found.display().to_string();
        let saved_file = std::mem::take(&mut self.file);
        let saved_delta = self.delta;
        let saved_path = self.cur_path.replace(found.clone());
        self.process_file(&content, &shown, parent_dir(&found), depth + 1)?;
        self.file = saved_file;
        self.delta = saved_delta;
        self.cur_path = saved_path;
        let back = i64::from(ll.line) + i64::from(ll.phys) + self.delta;
        let file = self.file.clone();
        self.marker(back, &file);
        Ok(())
    }
}

/// Parse `"file"` or `<file>`; returns the name and whether it was `<...>`.
fn parse_include_spec(s: &str) -> Option<(String, bool)> {
    let (close, angle) = match s.as_bytes().first()? {
        b'"' => ('"', false),
        b'<' => ('>', true),
        _ => return None,
    };
    let inner = s.get(1..)?;
    let end = inner.find(close)?;
    Some((inner.get(..end)?.to_string(), angle))
}
