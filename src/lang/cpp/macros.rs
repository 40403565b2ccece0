//! Macros: a `#define` parsed into its parameters and body.

use std::rc::Rc;

use super::lex::{skip_sp, tokenize, Tok, K};

#[derive(Debug)]
pub(super) struct Macro {
    pub(super) name: Rc<str>,
    pub(super) params: Vec<String>,
    pub(super) variadic: bool,
    pub(super) func: bool,
    pub(super) body: Vec<Tok>,
}

pub(super) fn parse_define(text: &str) -> Result<Macro, String> {
    let toks = tokenize(text);
    let mut i = skip_sp(&toks, 0);
    let Some(t) = toks.get(i) else {
        return Err("no macro name given in #define directive".into());
    };
    if t.kind != K::Ident {
        return Err("macro names must be identifiers".into());
    }
    if &*t.text == "defined" {
        return Err("\"defined\" cannot be used as a macro name".into());
    }
    let name = t.text.clone();
    i += 1;
    let mut params: Vec<String> = Vec::new();
    let mut variadic = false;
    let mut func = false;
    const MISSING: &str = "missing ')' in macro parameter list";
    if toks.get(i).is_some_and(|t| t.is("(")) {
        func = true;
        i += 1;
        loop {
            i = skip_sp(&toks, i);
            let Some(t) = toks.get(i) else {
                return Err(MISSING.into());
            };
            if t.is(")") && params.is_empty() {
                i += 1;
                break;
            }
            if t.is("...") {
                variadic = true;
                params.push("__VA_ARGS__".into());
                i = skip_sp(&toks, i + 1);
                if toks.get(i).is_some_and(|t| t.is(")")) {
                    i += 1;
                    break;
                }
                return Err(MISSING.into());
            }
            if t.kind != K::Ident {
                return Err(format!("expected parameter name, found \"{}\"", t.text));
            }
            if &*t.text == "__VA_ARGS__" {
                return Err("__VA_ARGS__ can not be used as a parameter name".into());
            }
            if params.iter().any(|p| *p == *t.text) {
                return Err(format!("duplicate macro parameter \"{}\"", t.text));
            }
            params.push(t.text.to_string());
            i = skip_sp(&toks, i + 1);
            if toks.get(i).is_some_and(|t| t.is("...")) {
                variadic = true;
                i = skip_sp(&toks, i + 1);
                if toks.get(i).is_some_and(|t| t.is(")")) {
                    i += 1;
                    break;
                }
                return Err(MISSING.into());
            }
            match toks.get(i) {
                None => return Err(MISSING.into()),
                Some(t) if t.is(")") => {
                    i += 1;
                    break;
                }
                Some(t) if t.is(",") => i += 1,
                Some(t) => return Err(format!("expected ',' or ')', found \"{}\"", t.text)),
            }
        }
    }
    let mut body: Vec<Tok> = Vec::new();
    for t in toks.get(i..).unwrap_or(&[]) {
        if t.is_space() {
            if body.last().is_some_and(|l| l.kind != K::Space) {
                body.push(Tok::new(K::Space, " "));
            }
        } else if t.kind == K::Ident && func {
            match params.iter().position(|p| *p == *t.text) {
                Some(idx) => {
                    let mut p = t.clone();
                    p.kind = K::Param(idx);
                    body.push(p);
                }
                None => body.push(t.clone()),
            }
        } else {
            body.push(t.clone());
        }
    }
    while body.last().is_some_and(|t| t.kind == K::Space) {
        body.pop();
    }
    let nonspace: Vec<&Tok> = body.iter().filter(|t| t.kind != K::Space).collect();
    if nonspace.first().is_some_and(|t| t.is("##")) || nonspace.last().is_some_and(|t| t.is("##")) {
        return Err("'##' cannot appear at either end of a macro expansion".into());
    }
    if func {
        for (k, t) in nonspace.iter().enumerate() {
            if t.is("#")
                && !nonspace
                    .get(k + 1)
                    .is_some_and(|n| matches!(n.kind, K::Param(_)))
            {
                return Err("'#' is not followed by a macro parameter".into());
            }
        }
    }
    Ok(Macro {
        name,
        params,
        variadic,
        func,
        body,
    })
}
