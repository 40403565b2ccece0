//! Macro expansion: the rescanning expander, arguments collected across lines,
//! substitution with `#` and `##`.

use super::lex::{escape_str, lex_one, stringify, tokenize, trim_toks, would_paste, Tok, K};
use super::macros::Macro;
use super::pp::{Pp, R};
use super::MAX_MACRO_NEST;

impl<'o> Pp<'o> {
    fn first_macro_use(&self, chunk: &str) -> Option<usize> {
        let b = chunk.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let (k, j) = lex_one(b, i);
            let j = j.clamp(i + 1, b.len());
            if k == K::Ident {
                let name = chunk.get(i..j).unwrap_or("");
                if self.macros.contains_key(name) || name == "__LINE__" || name == "__FILE__" {
                    return Some(i);
                }
            }
            i = j;
        }
        None
    }

    pub(super) fn expand_chunk(&mut self, chunk: &str, first_line: u32) -> R<()> {
        let Some(pos) = self.first_macro_use(chunk) else {
            self.out.push_str(chunk);
            return Ok(());
        };
        let start = chunk
            .get(..pos)
            .and_then(|p| p.rfind('\n'))
            .map_or(0, |x| x + 1);
        let prefix = chunk.get(..start).unwrap_or("");
        self.out.push_str(prefix);
        let nls = prefix.bytes().filter(|&b| b == b'\n').count();
        self.line = first_line.saturating_add(u32::try_from(nls).unwrap_or(u32::MAX));
        let mut stack = tokenize(chunk.get(start..).unwrap_or(""));
        stack.reverse();
        let mut out = Vec::new();
        self.pending_nl = 0;
        self.expand(&mut stack, &mut out, true)?;
        self.flush_pending(&mut out);
        self.write_tokens(&out);
        Ok(())
    }

    fn flush_pending(&mut self, out: &mut Vec<Tok>) {
        if self.pending_nl > 0 {
            let nl = Tok::new(K::Newline, "\n");
            for _ in 0..self.pending_nl {
                out.push(nl.clone());
            }
            self.pending_nl = 0;
        }
    }

    fn write_tokens(&mut self, toks: &[Tok]) {
        let mut prev: Option<&Tok> = None;
        let mut guard = false;
        for t in toks {
            match t.kind {
                K::Guard => guard = true,
                K::End | K::Placemarker => {}
                K::Space | K::Newline => {
                    self.out.push_str(&t.text);
                    prev = None;
                    guard = false;
                }
                _ => {
                    if let Some(p) = prev {
                        if (guard || p.expanded || t.expanded) && would_paste(p, t) {
                            self.out.push(' ');
                        }
                    }
                    self.out.push_str(&t.text);
                    prev = Some(t);
                    guard = false;
                }
            }
        }
    }

    /// Fully macro-expand `toks` on their own (arguments, `#if`, `#include`).
    pub(super) fn expand_isolated(&mut self, toks: &[Tok]) -> R<Vec<Tok>> {
        if self.nest >= MAX_MACRO_NEST {
            return Err(self.err("macro invocations nested too deeply"));
        }
        self.nest += 1;
        let mut stack: Vec<Tok> = toks.iter().rev().cloned().collect();
        let mut out = Vec::with_capacity(toks.len());
        let r = self.expand(&mut stack, &mut out, false);
        self.nest -= 1;
        r?;
        Ok(out)
    }

    fn expand(&mut self, stack: &mut Vec<Tok>, out: &mut Vec<Tok>, top: bool) -> R<()> {
        let mut depth: u32 = 0;
        while let Some(mut t) = stack.pop() {
            match t.kind {
                K::End => {
                    self.disabled.remove(&t.text);
                    depth = depth.saturating_sub(1);
                    if top {
                        out.push(Tok::new(K::Guard, ""));
                        if depth == 0 {
                            self.flush_pending(out);
                        }
                    }
                }
                K::Newline => {
                    if top {
                        self.line = self.line.saturating_add(1);
                    }
                    out.push(t);
                }
                K::Ident if !t.noexpand => {
                    let Some(m) = self.macros.get(&*t.text).cloned() else {
                        if let Some(b) = self.builtin(&t.text) {
                            if top {
                                out.push(Tok::new(K::Guard, ""));
                            }
                            out.push(b);
                            if top {
                                out.push(Tok::new(K::Guard, ""));
                            }
                        } else {
                            out.push(t);
                        }
                        continue;
                    };
                    if self.disabled.contains(&t.text) {
                        t.noexpand = true;
                        out.push(t);
                        continue;
                    }
                    let body = if m.func {
                        if !next_is_lparen(stack) {
                            out.push(t);
                            continue;
                        }
                        let args = self.collect_args(stack, &m, &mut depth, top)?;
                        self.substitute(&m, Some(args))?
                    } else {
                        self.substitute(&m, None)?
                    };
                    self.budget = self
                        .budget
                        .saturating_add(u64::try_from(body.len()).unwrap_or(u64::MAX))
                        .saturating_add(1);
                    if self.budget > self.budget_limit {
                        return Err(self.err("macro expansion too large"));
                    }
                    if top {
                        out.push(Tok::new(K::Guard, ""));
                    }
                    self.disabled.insert(m.name.clone());
                    depth += 1;
                    stack.push(Tok {
                        kind: K::End,
                        text: m.name.clone(),
                        noexpand: false,
                        expanded: false,
                    });
                    stack.extend(body.into_iter().rev());
                }
                K::Guard if !top => {}
                _ => out.push(t),
            }
        }
        Ok(())
    }

    fn builtin(&self, name: &str) -> Option<Tok> {
        let mut t = match name {
            "__LINE__" => Tok::new(K::Number, &self.presumed(self.line).to_string()),
            "__FILE__" => Tok::new(K::Str, &format!("\"{}\"", escape_str(&self.file))),
            _ => return None,
        };
        t.expanded = true;
        Some(t)
    }

    fn collect_args(
        &mut self,
        stack: &mut Vec<Tok>,
        m: &Macro,
        depth: &mut u32,
        top: bool,
    ) -> R<Vec<Vec<Tok>>> {
        let start_line = self.line;
        // Consume everything up to and including the '('.
        while let Some(t) = stack.pop() {
            match t.kind {
                K::End => {
                    self.disabled.remove(&t.text);
                    *depth = depth.saturating_sub(1);
                }
                K::Newline if top => {
                    self.pending_nl += 1;
                    self.line = self.line.saturating_add(1);
                }
                _ if t.is("(") => break,
                _ => {}
            }
        }
        let np = m.params.len();
        let mut args: Vec<Vec<Tok>> = vec![Vec::new()];
        let mut paren = 0usize;
        loop {
            let Some(t) = stack.pop() else {
                return Err(self.err_at(
                    start_line,
                    format!("unterminated argument list invoking macro \"{}\"", m.name),
                ));
            };
            match t.kind {
                K::End => {
                    self.disabled.remove(&t.text);
                    *depth = depth.saturating_sub(1);
                    continue;
                }
                K::Guard => continue,
                K::Newline => {
                    if top {
                        self.pending_nl += 1;
                        self.line = self.line.saturating_add(1);
                    }
                    if let Some(a) = args.last_mut() {
                        a.push(Tok::new(K::Space, " "));
                    }
                    continue;
                }
                _ => {}
            }
            if t.is("(") {
                paren += 1;
            } else if t.is(")") {
                if paren == 0 {
                    break;
                }
                paren -= 1;
            } else if t.is(",") && paren == 0 && !(m.variadic && args.len() >= np) {
                args.push(Vec::new());
                continue;
            }
            if let Some(a) = args.last_mut() {
                a.push(t);
            }
        }
        let mut args: Vec<Vec<Tok>> = args.into_iter().map(trim_toks).collect();
        let given = args.len();
        if np == 0 {
            if given == 1 && args[0].is_empty() {
                args.clear();
            } else {
                return Err(self.err_at(
                    start_line,
                    format!(
                        "macro \"{}\" passed {} arguments, but takes just 0",
                        m.name, given
                    ),
                ));
            }
        } else if m.variadic {
            if given + 1 < np {
                return Err(self.err_at(
                    start_line,
                    format!(
                        "macro \"{}\" requires at least {} arguments, but only {} given",
                        m.name,
                        np - 1,
                        given
                    ),
                ));
            }
            if given < np {
                args.push(Vec::new());
            }
        } else if given < np {
            return Err(self.err_at(
                start_line,
                format!(
                    "macro \"{}\" requires {} arguments, but only {} given",
                    m.name, np, given
                ),
            ));
        } else if given > np {
            return Err(self.err_at(
                start_line,
                format!(
                    "macro \"{}\" passed {} arguments, but takes just {}",
                    m.name, given, np
                ),
            ));
        }
        Ok(args)
    }

    fn substitute(&mut self, m: &Macro, args: Option<Vec<Vec<Tok>>>) -> R<Vec<Tok>> {
        let raw = args.unwrap_or_default();
        let mut expanded: Vec<Option<Vec<Tok>>> = vec![None; raw.len()];
        let body = &m.body;
        let mut result: Vec<Tok> = Vec::with_capacity(body.len());
        let mut paste_next = false;
        let next_ns = |i: usize| -> Option<usize> {
            let mut j = i;
            while j < body.len() && body[j].kind == K::Space {
                j += 1;
            }
            (j < body.len()).then_some(j)
        };
        let mut i = 0;
        while i < body.len() {
            let t = &body[i];
            if t.kind == K::Space {
                if !paste_next {
                    result.push(t.clone());
                }
                i += 1;
                continue;
            }
            if m.func && t.is("#") {
                if let Some(j) = next_ns(i + 1) {
                    if let K::Param(p) = body[j].kind {
                        let s = stringify(raw.get(p).map_or(&[][..], |v| &v[..]));
                        emit(&mut result, &mut paste_next, vec![Tok::new(K::Str, &s)]);
                        i = j + 1;
                        continue;
                    }
                }
            }
            if t.is("##") {
                let j = next_ns(i + 1);
                let va = m.params.len().checked_sub(1);
                if let (Some(j), Some(va)) = (j, va) {
                    let last_is_comma = result
                        .iter()
                        .rev()
                        .find(|t| t.kind != K::Space)
                        .is_some_and(|t| t.is(","));
                    if m.variadic && body[j].kind == K::Param(va) && last_is_comma {
                        let arg = raw.get(va).cloned().unwrap_or_default();
                        let trim = |r: &mut Vec<Tok>| {
                            while r.last().is_some_and(|t| t.kind == K::Space) {
                                r.pop();
                            }
                        };
                        trim(&mut result);
                        if arg.is_empty() {
                            result.pop();
                            trim(&mut result);
                        } else {
                            result.extend(arg);
                        }
                        i = j + 1;
                        continue;
                    }
                }
                while result.last().is_some_and(|t| t.kind == K::Space) {
                    result.pop();
                }
                paste_next = true;
                i += 1;
                continue;
            }
            if let K::Param(p) = t.kind {
                let next_paste = next_ns(i + 1).is_some_and(|j| body[j].is("##"));
                let toks = if paste_next || next_paste {
                    let a = raw.get(p).cloned().unwrap_or_default();
                    if a.is_empty() {
                        vec![Tok::new(K::Placemarker, "")]
                    } else {
                        a
                    }
                } else {
                    if expanded.get(p).is_some_and(|e| e.is_none()) {
                        let a = raw.get(p).cloned().unwrap_or_default();
                        let e = self.expand_isolated(&a)?;
                        if let Some(slot) = expanded.get_mut(p) {
                            *slot = Some(e);
                        }
                    }
                    expanded.get(p).and_then(|e| e.clone()).unwrap_or_default()
                };
                emit(&mut result, &mut paste_next, toks);
            } else {
                emit(&mut result, &mut paste_next, vec![t.clone()]);
            }
            i += 1;
        }
        result.retain(|t| t.kind != K::Placemarker);
        for t in &mut result {
            t.expanded = true;
        }
        Ok(result)
    }
}

pub(super) fn emit(result: &mut Vec<Tok>, paste_next: &mut bool, toks: Vec<Tok>) {
    if !*paste_next {
        result.extend(toks);
        return;
    }
    *paste_next = false;
    let mut it = toks.into_iter();
    let Some(r) = it.next() else {
        return;
    };
    match result.pop() {
        None => result.push(r),
        Some(l) => {
            if l.kind == K::Placemarker {
                result.push(r);
            } else if r.kind == K::Placemarker {
                result.push(l);
            } else {
                let s = format!("{}{}", l.text, r.text);
                result.extend(tokenize(&s));
            }
        }
    }
    result.extend(it);
}

fn next_is_lparen(stack: &[Tok]) -> bool {
    for t in stack.iter().rev() {
        match t.kind {
            K::Space | K::Newline | K::End | K::Guard => continue,
            _ => return t.is("("),
        }
    }
    false
}
