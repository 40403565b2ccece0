//! `#if` expressions: `defined` resolved, macros expanded, then the constant expression
//! evaluated with C's integer rules (signed and unsigned, short-circuit).

use super::lex::{skip_sp, tokenize, Tok, K};
use super::pp::{Pp, R};
use super::MAX_EXPR_DEPTH;

impl<'o> Pp<'o> {
    pub(super) fn eval_if(&mut self, rest: &str) -> R<bool> {
        let toks = tokenize(rest);
        let mut pre: Vec<Tok> = Vec::with_capacity(toks.len());
        let mut i = 0;
        while i < toks.len() {
            let t = &toks[i];
            if t.kind == K::Ident && &*t.text == "defined" {
                let (v, next) = self.parse_defined(&toks, i + 1)?;
                let mut n = Tok::new(K::Number, if v { "1" } else { "0" });
                n.noexpand = true;
                pre.push(n);
                i = next;
            } else {
                pre.push(t.clone());
                i += 1;
            }
        }
        let expanded = self.expand_isolated(&pre)?;
        let toks: Vec<Tok> = expanded
            .into_iter()
            .filter(|t| !t.is_space() && !matches!(t.kind, K::End | K::Guard | K::Placemarker))
            .collect();
        if toks.is_empty() {
            return Err(self.err("#if with no expression"));
        }
        let mut p = ExprParser {
            toks: &toks,
            pos: 0,
            depth: 0,
            pp: self,
        };
        let v = p.parse_comma(true).map_err(|e| self.err(e))?;
        if let Some(t) = toks.get(p.pos) {
            return Err(self.err(format!(
                "missing binary operator before token \"{}\"",
                t.text
            )));
        }
        Ok(v.v != 0)
    }

    /// Parse the operand of `defined` starting at `i`; returns the value and
    /// the index after the operand.
    fn parse_defined(&self, toks: &[Tok], i: usize) -> R<(bool, usize)> {
        let j = skip_sp(toks, i);
        match toks.get(j) {
            Some(t) if t.kind == K::Ident => Ok((self.is_defined(&t.text), j + 1)),
            Some(t) if t.is("(") => {
                let k = skip_sp(toks, j + 1);
                match toks.get(k) {
                    Some(n) if n.kind == K::Ident => {
                        let l = skip_sp(toks, k + 1);
                        if toks.get(l).is_some_and(|t| t.is(")")) {
                            Ok((self.is_defined(&n.text), l + 1))
                        } else {
                            Err(self.err("missing ')' after \"defined\""))
                        }
                    }
                    _ => Err(self.err("operator \"defined\" requires an identifier")),
                }
            }
            _ => Err(self.err("operator \"defined\" requires an identifier")),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Val {
    pub(super) v: u64,
    uns: bool,
}

impl Val {
    fn signed(v: i64) -> Val {
        Val {
            v: v as u64,
            uns: false,
        }
    }
    fn truth(b: bool) -> Val {
        Val::signed(i64::from(b))
    }
}

struct ExprParser<'a, 'b, 'o> {
    pub(super) toks: &'a [Tok],
    pub(super) pos: usize,
    pub(super) depth: u32,
    pub(super) pp: &'b Pp<'o>,
}

fn binop_prec(t: &Tok) -> Option<u8> {
    if t.kind != K::Punct {
        return None;
    }
    Some(match &*t.text {
        "||" => 1,
        "&&" => 2,
        "|" => 3,
        "^" => 4,
        "&" => 5,
        "==" | "!=" => 6,
        "<" | ">" | "<=" | ">=" => 7,
        "<<" | ">>" => 8,
        "+" | "-" => 9,
        "*" | "/" | "%" => 10,
        _ => return None,
    })
}

impl ExprParser<'_, '_, '_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn peek_is(&self, p: &str) -> bool {
        self.peek().is_some_and(|t| t.is(p))
    }

    fn parse_comma(&mut self, eval: bool) -> Result<Val, String> {
        let mut v = self.parse_cond(eval)?;
        while self.peek_is(",") {
            self.pos += 1;
            v = self.parse_cond(eval)?;
        }
        Ok(v)
    }

    fn parse_cond(&mut self, eval: bool) -> Result<Val, String> {
        let c = self.parse_bin(1, eval)?;
        if !self.peek_is("?") {
            return Ok(c);
        }
        self.pos += 1;
        self.enter()?;
        let t = self.parse_comma(eval && c.v != 0)?;
        if !self.peek_is(":") {
            return Err("'?' without following ':'".into());
        }
        self.pos += 1;
        let f = self.parse_cond(eval && c.v == 0)?;
        self.depth -= 1;
        let uns = t.uns || f.uns;
        let v = if c.v != 0 { t.v } else { f.v };
        Ok(Val { v, uns })
    }

    fn enter(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_EXPR_DEPTH {
            return Err("#if expression nested too deeply".into());
        }
        Ok(())
    }

    fn parse_bin(&mut self, min_prec: u8, eval: bool) -> Result<Val, String> {
        let mut lhs = self.parse_unary(eval)?;
        while let Some(op) = self.peek() {
            let Some(prec) = binop_prec(op) else { break };
            if prec < min_prec {
                break;
            }
            let op = op.text.clone();
            self.pos += 1;
            lhs = match &*op {
                "&&" => {
                    let r = self.parse_bin(prec + 1, eval && lhs.v != 0)?;
                    Val::truth(lhs.v != 0 && r.v != 0)
                }
                "||" => {
                    let r = self.parse_bin(prec + 1, eval && lhs.v == 0)?;
                    Val::truth(lhs.v != 0 || r.v != 0)
                }
                _ => {
                    let r = self.parse_bin(prec + 1, eval)?;
                    apply_binop(&op, lhs, r, eval)?
                }
            };
        }
        Ok(lhs)
    }

    fn parse_unary(&mut self, eval: bool) -> Result<Val, String> {
        self.enter()?;
        let r = self.parse_unary_inner(eval);
        self.depth -= 1;
        r
    }

    fn parse_unary_inner(&mut self, eval: bool) -> Result<Val, String> {
        let Some(t) = self.peek() else {
            return Err(
                match self.pos.checked_sub(1).and_then(|p| self.toks.get(p)) {
                    Some(prev) => format!("operator '{}' has no right operand", prev.text),
                    None => "#if with no expression".into(),
                },
            );
        };
        if t.kind == K::Punct {
            match &*t.text {
                "+" | "-" | "~" | "!" => {
                    let op = t.text.clone();
                    self.pos += 1;
                    let v = self.parse_unary(eval)?;
                    return Ok(match &*op {
                        "+" => v,
                        "-" => Val {
                            v: v.v.wrapping_neg(),
                            uns: v.uns,
                        },
                        "~" => Val {
                            v: !v.v,
                            uns: v.uns,
                        },
                        _ => Val::truth(v.v == 0),
                    });
                }
                "(" => {
                    self.pos += 1;
                    if self.peek_is(")") {
                        return Err("missing expression between '(' and ')'".into());
                    }
                    let v = self.parse_comma(eval)?;
                    if !self.peek_is(")") {
                        return Err("missing ')' in expression".into());
                    }
                    self.pos += 1;
                    return Ok(v);
                }
                _ => {}
            }
        }
        match t.kind {
            K::Number => {
                let v = parse_number(&t.text)?;
                self.pos += 1;
                Ok(v)
            }
            K::Char => {
                let v = parse_char(&t.text)?;
                self.pos += 1;
                Ok(v)
            }
            K::Ident => {
                if &*t.text == "defined" {
                    let (v, next) = self
                        .pp
                        .parse_defined(self.toks, self.pos + 1)
                        .map_err(|e| e.message)?;
                    self.pos = next;
                    return Ok(Val::truth(v));
                }
                self.pos += 1;
                Ok(Val::signed(0))
            }
            _ => Err(format!(
                "token \"{}\" is not valid in preprocessor expressions",
                t.text
            )),
        }
    }
}

fn apply_binop(op: &str, a: Val, b: Val, eval: bool) -> Result<Val, String> {
    let uns = a.uns || b.uns;
    let (x, y) = (a.v, b.v);
    let (sx, sy) = (x as i64, y as i64);
    let v = match op {
        "*" => x.wrapping_mul(y),
        "/" | "%" => {
            if y == 0 {
                if eval {
                    return Err("division by zero in #if".into());
                }
                0
            } else if uns {
                if op == "/" {
                    x / y
                } else {
                    x % y
                }
            } else if op == "/" {
                sx.wrapping_div(sy) as u64
            } else {
                sx.wrapping_rem(sy) as u64
            }
        }
        "+" => x.wrapping_add(y),
        "-" => x.wrapping_sub(y),
        "<<" | ">>" => {
            return Ok(Val {
                v: shift(a, b, op == "<<"),
                uns: a.uns,
            })
        }
        "<" | ">" | "<=" | ">=" => {
            let ord = if uns { x.cmp(&y) } else { sx.cmp(&sy) };
            let r = match op {
                "<" => ord.is_lt(),
                ">" => ord.is_gt(),
                "<=" => ord.is_le(),
                _ => ord.is_ge(),
            };
            return Ok(Val::truth(r));
        }
        "==" => return Ok(Val::truth(x == y)),
        "!=" => return Ok(Val::truth(x != y)),
        "&" => x & y,
        "|" => x | y,
        "^" => x ^ y,
        _ => return Err(format!("invalid operator \"{op}\" in #if")),
    };
    Ok(Val { v, uns })
}

fn shift(a: Val, b: Val, left: bool) -> u64 {
    let amount: i64 = if b.uns {
        if b.v > 64 {
            64
        } else {
            b.v as i64
        }
    } else {
        b.v as i64
    };
    let (left, amount) = if amount < 0 {
        (!left, amount.checked_neg().unwrap_or(i64::MAX))
    } else {
        (left, amount)
    };
    let negative = !a.uns && (a.v as i64) < 0;
    if amount >= 64 {
        return if !left && negative { u64::MAX } else { 0 };
    }
    let amount = amount as u32;
    if left {
        a.v << amount
    } else if a.uns {
        a.v >> amount
    } else {
        ((a.v as i64) >> amount) as u64
    }
}

fn parse_number(text: &str) -> Result<Val, String> {
    let b = text.as_bytes();
    let mut end = b.len();
    while end > 0 && matches!(b[end - 1], b'u' | b'U' | b'l' | b'L') {
        end -= 1;
    }
    let suffix = text.get(end..).unwrap_or("");
    let digits = text.get(..end).unwrap_or("");
    let ucount = suffix.bytes().filter(|c| matches!(c, b'u' | b'U')).count();
    let lcount = suffix.len() - ucount;
    if ucount > 1 || lcount > 2 {
        return Err(format!("invalid suffix \"{suffix}\" on integer constant"));
    }
    let lower = digits.to_ascii_lowercase();
    let (radix, ds, kind) = if let Some(h) = lower.strip_prefix("0x") {
        (16u32, h, "hexadecimal")
    } else if let Some(bn) = lower.strip_prefix("0b") {
        (2, bn, "binary")
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..], "octal")
    } else {
        (10, lower.as_str(), "decimal")
    };
    if radix != 16 && (ds.contains('.') || ds.contains('e')) {
        return Err("floating constant in preprocessor expression".into());
    }
    if radix == 16 && (ds.contains('.') || ds.contains('p')) {
        return Err("floating constant in preprocessor expression".into());
    }
    if ds.is_empty() && radix != 8 {
        return Err(format!(
            "invalid suffix \"{}\" on integer constant",
            &text[1..]
        ));
    }
    let mut v: u64 = 0;
    for (k, c) in ds.chars().enumerate() {
        let Some(d) = c.to_digit(radix) else {
            if (radix == 8 || radix == 2) && c.is_ascii_digit() {
                return Err(format!("invalid digit \"{c}\" in {kind} constant"));
            }
            let bad: String = ds.chars().skip(k).collect();
            return Err(format!(
                "invalid suffix \"{bad}{suffix}\" on integer constant"
            ));
        };
        v = v.wrapping_mul(u64::from(radix)).wrapping_add(u64::from(d));
    }
    Ok(Val {
        v,
        uns: ucount > 0 || v > i64::MAX as u64,
    })
}

fn parse_char(text: &str) -> Result<Val, String> {
    let b = text.as_bytes();
    if b.len() < 2 || b[b.len() - 1] != b'\'' || b.first() != Some(&b'\'') {
        return Err("missing terminating ' character".into());
    }
    let inner = &b[1..b.len() - 1];
    let mut bytes: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < inner.len() {
        let c = inner[i];
        i += 1;
        if c != b'\\' {
            bytes.push(c);
            continue;
        }
        let Some(&e) = inner.get(i) else {
            bytes.push(b'\\');
            break;
        };
        i += 1;
        let v = match e {
            b'n' => b'\n',
            b't' => b'\t',
            b'r' => b'\r',
            b'a' => 7,
            b'b' => 8,
            b'f' => 12,
            b'v' => 11,
            b'e' | b'E' => 27,
            b'0'..=b'7' => {
                let mut v = u32::from(e - b'0');
                let mut n = 1;
                while n < 3 && i < inner.len() && (b'0'..=b'7').contains(&inner[i]) {
                    v = v * 8 + u32::from(inner[i] - b'0');
                    i += 1;
                    n += 1;
                }
                (v & 0xff) as u8
            }
            b'x' => {
                let mut v: u32 = 0;
                while i < inner.len() && inner[i].is_ascii_hexdigit() {
                    v = (v << 4) | char::from(inner[i]).to_digit(16).unwrap_or(0);
                    v &= 0xfff;
                    i += 1;
                }
                (v & 0xff) as u8
            }
            other => other,
        };
        bytes.push(v);
    }
    match bytes.len() {
        0 => Err("empty character constant".into()),
        1 => Ok(Val::signed(i64::from(bytes[0] as i8))),
        _ => {
            let mut v: u32 = 0;
            for &c in &bytes {
                v = (v << 8) | u32::from(c);
            }
            Ok(Val::signed(i64::from(v as i32)))
        }
    }
}
