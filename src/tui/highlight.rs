//! Syntax highlighting for the editor, from dtx's own D lexer: each line of the script becomes
//! runs of (byte range, kind). Probe descriptions are lexed at clause scope, everything inside
//! braces and predicates as expressions, exactly as the compiler reads them.

use crate::lang::lexer::{Lexer, Mode};
use crate::lang::token::{Punct, Tok};
use crate::lang::MacroEnv;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Keyword,
    Probe,
    Str,
    Number,
    Aggregation,
    Comment,
    Control,
    Punct,
    Ident,
    /// Text the lexer rejects.
    Error,
}

/// A highlighted run within one line: byte offsets into that line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub start: usize,
    pub end: usize,
    pub kind: Kind,
}

/// Highlights a whole script; the result has one entry per line of `lines`.
pub fn highlight(lines: &[String]) -> Vec<Vec<Run>> {
    let text = lines.join("\n");
    let mut starts = Vec::with_capacity(lines.len());
    let mut off = 0;
    for l in lines {
        starts.push(off);
        off += l.len() + 1;
    }
    let mut out: Vec<Vec<Run>> = vec![Vec::new(); lines.len()];
    let mut push = |start: usize, end: usize, kind: Kind| {
        // split a token over the lines it covers
        let mut s = start;
        while s < end {
            let li = match starts.binary_search(&s) {
                Ok(i) => i,
                Err(i) => i.saturating_sub(1),
            };
            let Some(line) = lines.get(li) else { break };
            let line_end = starts[li] + line.len();
            let e = end.min(line_end);
            if e > s {
                out[li].push(Run {
                    start: s - starts[li],
                    end: e - starts[li],
                    kind,
                });
            }
            s = line_end + 1;
        }
    };
    let mut lx = Lexer::new(&text, MacroEnv::default());
    let mut depth = 0i32;
    let mut in_pred = false;
    let mut prev_end = 0usize;
    loop {
        let mode = if depth == 0 && !in_pred {
            Mode::Clause
        } else {
            Mode::Expr
        };
        let before = prev_end;
        match lx.next(mode) {
            Ok(t) => {
                comments_between(&text, before, t.start, &mut push);
                prev_end = t.end;
                let kind = match &t.tok {
                    Tok::Eof => break,
                    Tok::Int { .. } => Kind::Number,
                    Tok::Str(_) => Kind::Str,
                    Tok::Ident(_) => Kind::Ident,
                    Tok::Agg(_) => Kind::Aggregation,
                    Tok::Pspec(_) => Kind::Probe,
                    Tok::Kw(_) => Kind::Keyword,
                    Tok::Control(_) => Kind::Control,
                    Tok::EndPred => {
                        in_pred = false;
                        Kind::Punct
                    }
                    Tok::Punct(p) => {
                        match p {
                            Punct::LBrace => depth += 1,
                            Punct::RBrace => depth = (depth - 1).max(0),
                            Punct::Slash if depth == 0 && !in_pred => in_pred = true,
                            _ => {}
                        }
                        Kind::Punct
                    }
                };
                push(t.start, t.end, kind);
            }
            Err(_) => {
                // mark the rest of the line and go on at the next one
                let from = before.min(text.len());
                let nl = text[from..]
                    .find('\n')
                    .map(|i| from + i)
                    .unwrap_or(text.len());
                let start = text[from..nl]
                    .find(|c: char| !c.is_whitespace())
                    .map(|i| from + i)
                    .unwrap_or(nl);
                push(start, nl, Kind::Error);
                if nl >= text.len() {
                    break;
                }
                let line = text[..=nl].matches('\n').count() as u32 + 1;
                lx.reset_to(nl + 1, line);
                prev_end = nl + 1;
            }
        }
    }
    for runs in &mut out {
        runs.sort_by_key(|r| r.start);
    }
    out
}

/// Comments in the gap between two tokens.
fn comments_between(text: &str, from: usize, to: usize, push: &mut impl FnMut(usize, usize, Kind)) {
    let Some(gap) = text.get(from..to) else {
        return;
    };
    let mut i = 0;
    let b = gap.as_bytes();
    while i + 1 < b.len() {
        if b[i] == b'/' && b[i + 1] == b'*' {
            let end = gap[i + 2..]
                .find("*/")
                .map(|e| i + 2 + e + 2)
                .unwrap_or(b.len());
            push(from + i, from + end, Kind::Comment);
            i = end;
        } else if b[i] == b'/' && b[i + 1] == b'/' {
            let end = gap[i..].find('\n').map(|e| i + e).unwrap_or(b.len());
            push(from + i, from + end, Kind::Comment);
            i = end;
        } else {
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<Vec<(String, Kind)>> {
        let lines: Vec<String> = src.lines().map(String::from).collect();
        highlight(&lines)
            .into_iter()
            .zip(&lines)
            .map(|(runs, l)| {
                runs.iter()
                    .map(|r| (l[r.start..r.end].to_string(), r.kind))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn probes_predicates_bodies_and_comments() {
        let k = kinds(
            "/* count */\nsyscall::read:entry\n/pid == 42/\n{\n  @[execname] = count(); // n\n  printf(\"%d\", 1);\n}",
        );
        assert_eq!(k[0], vec![("/* count */".into(), Kind::Comment)]);
        assert_eq!(k[1], vec![("syscall::read:entry".into(), Kind::Probe)]);
        assert!(k[2].contains(&("pid".into(), Kind::Ident)));
        assert!(k[2].contains(&("42".into(), Kind::Number)));
        assert!(k[4].contains(&("@".into(), Kind::Aggregation)));
        assert!(k[4].contains(&("// n".into(), Kind::Comment)));
        assert!(k[5].contains(&("\"%d\"".into(), Kind::Str)));
    }

    #[test]
    fn lexer_errors_are_marked_and_lexing_goes_on() {
        let k = kinds("BEGIN {\n  x = \"abc;\n  y = 2;\n}");
        assert!(k[1].iter().any(|(_, kind)| *kind == Kind::Error));
        assert!(k[2].contains(&("2".into(), Kind::Number)));
    }
}
