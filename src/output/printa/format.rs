//! printa() with a format (`dt_printf_format` for aggregations): conversions without `@` take
//! the key components in order (dynamic widths included), `%@` conversions take the values of
//! the listed aggregations in order (the last one repeats); quantizations print their graph
//! wherever their `%@` is, whatever its conversion.

use super::layout as print;
use crate::agg::quantize;
use crate::agg::sort::{self, SortOptions};
use crate::agg::{funcs, key, Agg, SymbolResolver};
use crate::ir::value::{Datum, DatumRef};
use crate::ir::AggFunc;
use crate::output::printf::{
    format_with, Context, Conversion, Count, Format, FormatError, Piece, PrintKind,
};

fn mismatch() -> FormatError {
    FormatError {
        tag: "EDT_DMISMATCH",
        message: "Data record list does not match statement".to_string(),
    }
}

fn single(c: &Conversion) -> Format {
    Format {
        pieces: vec![Piece::Conv(c.clone())],
        source: c.text.clone(),
    }
}

/// A string through `%<width>.<prec>s` (C semantics; a negative width left-justifies).
fn pad_str(out: &mut Vec<u8>, s: &[u8], width: i32, left: bool, prec: i32) {
    let s = if prec > 0 {
        &s[..s.len().min(prec as usize)]
    } else {
        s
    };
    let w = (width.unsigned_abs() as usize).min(1 << 20);
    let fill = w.saturating_sub(s.len());
    if left || width < 0 {
        out.extend_from_slice(s);
        out.resize(out.len() + fill, b' ');
    } else {
        out.resize(out.len() + fill, b' ');
        out.extend_from_slice(s);
    }
}

pub(crate) fn printa(
    fmt: &Format,
    aggs: &[&Agg],
    opts: &SortOptions,
    syms: &dyn SymbolResolver,
    out: &mut Vec<u8>,
) -> Result<(), FormatError> {
    let rows: Vec<(&[u8], Vec<Option<usize>>)> = if aggs.len() == 1 {
        sort::sorted_entries(aggs[0], opts)
            .into_iter()
            .map(|i| (aggs[0].key(i), vec![Some(i)]))
            .collect()
    } else {
        sort::joined(aggs, opts)
            .into_iter()
            .map(|r| (r.key, r.entries))
            .collect()
    };
    if rows.is_empty() {
        return Ok(());
    }
    for a in aggs {
        a.printed.set(true);
    }
    for (k, entries) in &rows {
        row(fmt, aggs, k, entries, opts, syms, out)?;
    }
    Ok(())
}

fn int_of(k: Option<&DatumRef>) -> Result<i64, FormatError> {
    match k {
        Some(Datum::Int { value, .. }) => Ok(*value),
        _ => Err(mismatch()),
    }
}

fn row(
    fmt: &Format,
    aggs: &[&Agg],
    k: &[u8],
    entries: &[Option<usize>],
    opts: &SortOptions,
    syms: &dyn SymbolResolver,
    out: &mut Vec<u8>,
) -> Result<(), FormatError> {
    let keys: Vec<DatumRef> = key::iter(k).collect();
    let n = aggs.len();
    let signed = aggs[0].func != AggFunc::Count;
    let mut ki = 0usize;
    let mut aggk = 0usize;
    for piece in &fmt.pieces {
        let c = match piece {
            Piece::Text(t) => {
                out.extend_from_slice(t.as_bytes());
                continue;
            }
            Piece::Conv(c) => c,
        };
        let kind = c.print_kind();
        if kind == PrintKind::Pct {
            out.push(b'%');
            continue;
        }
        let mut stars: Vec<DatumRef> = Vec::new();
        let mut width = match c.width {
            Count::Fixed(w) => w,
            _ => 0,
        };
        let mut prec = match c.precision {
            Count::Fixed(p) => p,
            _ => 0,
        };
        let mut dynwidth = None;
        if c.width == Count::Star {
            let v = int_of(keys.get(ki))?;
            ki += 1;
            width = v as i32;
            dynwidth = Some(width);
            stars.push(Datum::int(v, 8, true));
        }
        if c.precision == Count::Star {
            let v = int_of(keys.get(ki))?;
            ki += 1;
            prec = v as i32;
            stars.push(Datum::int(v, 8, true));
        }
        if c.flags.agg {
            let j = aggk.min(n - 1);
            aggk += 1;
            let a = aggs[j];
            let zero;
            let (d, normal) = match entries.get(j).copied().flatten() {
                Some(e) => (a.data(e), a.normal(e)),
                None => {
                    zero = a.zero_data();
                    (&zero[..], a.zero_normal())
                }
            };
            let sn = if normal == 0 { 1 } else { normal as i64 };
            let v = match a.func {
                AggFunc::Quantize | AggFunc::Lquantize { .. } | AggFunc::Llquantize { .. } => {
                    print::print_value(&a.func, d, normal, opts, out);
                    continue;
                }
                AggFunc::Avg => funcs::average_unsigned(d, normal) as i64,
                AggFunc::Stddev => funcs::stddev(d, normal) as i64,
                _ => {
                    let is_signed = match kind {
                        PrintKind::Sint => true,
                        PrintKind::Uint => false,
                        _ => signed,
                    };
                    if is_signed {
                        d[0].wrapping_div(sn)
                    } else {
                        quantize::norm(d[0], normal)
                    }
                }
            };
            let agg = [Datum::int(v, 8, signed)];
            let ctx = Context {
                agg: &agg,
                ..Context::default()
            };
            format_with(&single(c), &stars, &ctx, out)?;
            continue;
        }
        let Some(kv) = keys.get(ki) else {
            return Err(mismatch());
        };
        ki += 1;
        let rendered: String;
        let value = match *kv {
            Datum::Mod(a) | Datum::Umod { addr: a, .. } => {
                let s = match *kv {
                    Datum::Umod { addr, pid } => syms.umod(pid, addr),
                    _ => syms.kmod(a),
                };
                pad_str(out, s.as_bytes(), width, c.flags.left, prec);
                continue;
            }
            Datum::Stack {
                frames,
                user,
                pid,
                epoch,
            } => {
                let left = c.flags.left;
                let indent = match dynwidth {
                    Some(w) if w < 0 => w.unsigned_abs() as usize,
                    _ if left => width.unsigned_abs() as usize,
                    _ => 0,
                };
                let fw = if left { 0 } else { width };
                let field = |s: &str, o: &mut Vec<u8>| pad_str(o, s.as_bytes(), fw, false, prec);
                let stack = print::StackKey {
                    frames,
                    user,
                    pid,
                    epoch,
                };
                print::print_stack(out, stack, indent, Some(&field), syms);
                continue;
            }
            Datum::Int {
                value,
                size,
                signed,
            } => match kind {
                PrintKind::Addr | PrintKind::UAddr => {
                    let addr = if size >= 8 {
                        value as u64
                    } else {
                        (value as u64) & ((1u64 << (8 * size)) - 1)
                    };
                    rendered = if kind == PrintKind::Addr {
                        syms.kernel(addr)
                    } else {
                        syms.user(0, addr)
                    };
                    Datum::Bytes(rendered.as_bytes())
                }
                _ => Datum::int(value, size, signed),
            },
            Datum::Str(s) => Datum::Str(s),
            Datum::Bytes(b) => Datum::Bytes(b),
            Datum::Sym(a) => match kind {
                PrintKind::Sint | PrintKind::Uint | PrintKind::Dint => {
                    Datum::int(a as i64, 8, false)
                }
                _ => {
                    rendered = syms.kernel(a);
                    Datum::Bytes(rendered.as_bytes())
                }
            },
            Datum::Usym { addr, pid } | Datum::Uaddr { addr, pid } => match kind {
                PrintKind::Sint | PrintKind::Uint | PrintKind::Dint => {
                    Datum::int(addr as i64, 8, false)
                }
                _ => {
                    rendered = if matches!(kv, Datum::Usym { .. }) {
                        syms.user_func(pid, addr)
                    } else {
                        syms.user(pid, addr)
                    };
                    Datum::Bytes(rendered.as_bytes())
                }
            },
        };
        stars.push(value);
        format_with(&single(c), &stars, &Context::default(), out)?;
    }
    Ok(())
}
