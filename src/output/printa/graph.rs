//! The ASCII (or UTF-8) distribution graphs dtrace prints for quantize()/lquantize()/
//! llquantize() (`dt_print_quantize` and its kin), in full or packed (`aggpack`), and the bars
//! of `agghist`.

use std::io::Write as _;

use crate::agg::quantize::{bucket_value, norm, NBUCKETS, ZERO_BUCKET};

/// The scale of a distribution's bars: `num / den` is the (possibly zoomed) total.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Total {
    num: u128,
    den: u128,
}

impl Total {
    /// dtrace's `dt_quantize_total` over the printed buckets: the sum of magnitudes, or with
    /// `aggzoom` the largest magnitude scaled up by 1/0.95.
    pub(crate) fn of(vals: &[i64], zoom: bool) -> Total {
        if zoom {
            let max = vals.iter().map(|v| v.unsigned_abs()).max().unwrap_or(0);
            Total {
                num: u128::from(max) * 20,
                den: 19,
            }
        } else {
            Total {
                num: vals.iter().map(|v| u128::from(v.unsigned_abs())).sum(),
                den: 1,
            }
        }
    }

    /// A total given directly (agghist's per-aggregation total).
    pub(crate) fn exact(t: u128) -> Total {
        Total { num: t, den: 1 }
    }

    /// `(uint)(|v| * len / total + 0.5)`.
    fn scaled(&self, v: i64, len: u128) -> usize {
        if self.num == 0 {
            return 0;
        }
        let x = u128::from(v.unsigned_abs()) * len * self.den;
        ((2 * x + self.num) / (2 * self.num)).min(u128::from(u32::MAX)) as usize
    }

    /// Whole and eighths of `|v| * len / total` (for UTF-8 bars).
    fn eighths(&self, v: i64, len: u128) -> (usize, usize) {
        if self.num == 0 {
            return (0, 0);
        }
        let x = u128::from(v.unsigned_abs()) * len * self.den;
        let whole = (x / self.num).min(len) as usize;
        let e = ((x * 8 / self.num) - (x / self.num) * 8).min(7) as usize;
        (whole, e)
    }
}

fn spaces(out: &mut Vec<u8>, n: usize) {
    out.resize(out.len() + n, b' ');
}

fn ats(out: &mut Vec<u8>, n: usize) {
    out.resize(out.len() + n, b'@');
}

fn push_utf8(out: &mut Vec<u8>, cp: u32) {
    let mut b = [0u8; 4];
    if let Some(c) = char::from_u32(cp) {
        out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
    }
}

/// One bar of a distribution and its count (`dt_print_quantline`).
pub(crate) fn quantline(
    out: &mut Vec<u8>,
    val: i64,
    normal: u64,
    total: &Total,
    positives: bool,
    negatives: bool,
    utf8: bool,
) {
    const LEN: usize = 40;
    let count = norm(val, normal);
    if !negatives {
        if positives && utf8 {
            let (whole, partial) = total.eighths(val, LEN as u128);
            out.push(b'|');
            for _ in 0..whole {
                push_utf8(out, 0x2588);
            }
            let mut used = whole;
            if partial != 0 {
                push_utf8(out, 0x258f - (partial as u32 - 1));
                used += 1;
            }
            spaces(out, LEN.saturating_sub(used));
            let _ = writeln!(out, " {count:<9}");
            return;
        }
        let depth = if positives {
            total.scaled(val, LEN as u128).min(LEN)
        } else {
            0
        };
        out.push(b'|');
        ats(out, depth);
        spaces(out, LEN - depth);
        let _ = writeln!(out, " {count:<9}");
        return;
    }
    if !positives {
        let depth = total.scaled(val, LEN as u128).min(LEN);
        spaces(out, LEN - depth);
        ats(out, depth);
        let _ = writeln!(out, "| {count:<9}");
        return;
    }
    let half = LEN / 2;
    let depth = total.scaled(val, half as u128).min(half);
    if val <= 0 {
        spaces(out, half - depth);
        ats(out, depth);
        out.push(b'|');
        spaces(out, half);
    } else {
        spaces(out, half);
        out.push(b'|');
        ats(out, depth);
        spaces(out, half - depth);
    }
    let _ = writeln!(out, " {count:<9}");
}

/// Options that shape a graph.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Graph {
    pub zoom: bool,
    /// `encoding=utf8` was set explicitly (bars in block characters).
    pub utf8: bool,
}

const HEADER_DASHES: &str = "------------- Distribution -------------";

/// The `value ---- Distribution ---- count` header (`width` 0: "value" in 16 columns).
pub(crate) fn header(out: &mut Vec<u8>, width: usize) {
    let (w, name) = if width == 0 {
        (16, "value")
    } else {
        (width, "key")
    };
    let _ = writeln!(out, "\n{name:>w$} {HEADER_DASHES:>41} {:<9}", "count");
}

/// Rows from the first to the last non-zero bucket with one bucket of context each side, or
/// `empty` when all are zero.
pub(crate) fn range(d: &[i64], empty: (usize, usize)) -> (usize, usize) {
    let n = d.len();
    let Some(first) = d.iter().position(|&c| c != 0) else {
        return (
            empty.0.min(n.saturating_sub(1)),
            empty.1.min(n.saturating_sub(1)),
        );
    };
    let last = d.iter().rposition(|&c| c != 0).unwrap_or(first);
    (first.saturating_sub(1), (last + 1).min(n - 1))
}

fn flags(d: &[i64]) -> (bool, bool) {
    (d.iter().any(|&c| c > 0), d.iter().any(|&c| c < 0))
}

/// `dt_print_quantize`.
pub(crate) fn print_quantize(out: &mut Vec<u8>, d: &[i64], normal: u64, g: Graph) {
    if d.len() != NBUCKETS {
        return;
    }
    // dtrace looks for the first non-zero bucket below the last one only.
    let first = d[..NBUCKETS - 1].iter().position(|&c| c != 0);
    let (lo, hi) = match first {
        None => (ZERO_BUCKET - 1, ZERO_BUCKET + 1),
        Some(f) => {
            let last = d.iter().rposition(|&c| c != 0).unwrap_or(f);
            (f.saturating_sub(1), (last + 1).min(NBUCKETS - 1))
        }
    };
    let rows = &d[lo..=hi];
    let total = Total::of(rows, g.zoom);
    let (pos, neg) = flags(rows);
    header(out, 0);
    for (i, &c) in rows.iter().enumerate() {
        let _ = write!(out, "{:>16} ", bucket_value(lo + i));
        quantline(out, c, normal, &total, pos, neg, g.utf8);
    }
}

/// `dt_print_lquantize`.
pub(crate) fn print_lquantize(
    out: &mut Vec<u8>,
    base: i32,
    step: u16,
    levels: u16,
    d: &[i64],
    normal: u64,
    g: Graph,
) {
    let levels = levels as usize;
    if d.len() != levels + 2 {
        return;
    }
    let (lo, hi) = range(d, (0, 2));
    let rows = &d[lo..=hi];
    let total = Total::of(rows, g.zoom);
    let (pos, neg) = flags(rows);
    header(out, 0);
    let step = i32::from(step);
    for (i, &c) in rows.iter().enumerate() {
        let i = lo + i;
        if i == 0 {
            let _ = write!(out, "{:>16} ", format!("< {base}"));
        } else if i == levels + 1 {
            let lim = base.wrapping_add((levels as i32).wrapping_mul(step));
            let _ = write!(out, "{:>16} ", format!(">= {lim}"));
        } else {
            let v = base.wrapping_add((i as i32 - 1).wrapping_mul(step));
            let _ = write!(out, "{v:>16} ");
        }
        quantline(out, c, normal, &total, pos, neg, g.utf8);
    }
}

/// `dt_print_llquantize`.
pub(crate) fn print_llquantize(
    out: &mut Vec<u8>,
    labels: &[i64],
    d: &[i64],
    normal: u64,
    g: Graph,
) {
    let n = d.len().min(labels.len());
    if n < 2 {
        return;
    }
    let d = &d[..n];
    let (lo, hi) = range(d, (0, 1));
    let rows = &d[lo..=hi];
    let total = Total::of(rows, g.zoom);
    let (pos, neg) = flags(rows);
    header(out, 0);
    for (i, &c) in rows.iter().enumerate() {
        let i = lo + i;
        if i == 0 {
            let _ = write!(out, "{:>16} ", format!("< {}", labels[0]));
        } else if i == n - 1 {
            let _ = write!(out, "{:>16} ", format!(">= {}", labels[i]));
        } else {
            let _ = write!(out, "{:>16} ", labels[i]);
        }
        quantline(out, c, normal, &total, pos, neg, g.utf8);
    }
}

/// `dt_ndigits`: printed width of a value, at least 4.
pub(crate) fn ndigits(v: i64) -> usize {
    let mut n = 1;
    let mut val = v;
    if val < 0 {
        val = if val == i64::MIN { i64::MAX } else { -val };
        n += 1;
    }
    let mut cmp: i64 = 10;
    while val > cmp && cmp > 0 {
        n += 1;
        cmp = cmp.wrapping_mul(10);
    }
    n.max(4)
}

/// One packed cell (`dt_print_packed`).
fn packed_cell(out: &mut Vec<u8>, v: i64, total: &Total, utf8: bool) {
    if v == 0 {
        out.push(b' ');
    } else if v < 0 {
        let neg = b"vvvvVV";
        out.push(neg[total.scaled(v, 5).min(5)]);
    } else if utf8 {
        push_utf8(out, 0x2581 + total.scaled(v, 7).min(7) as u32);
    } else {
        let ascii = b"__xxxxXX";
        out.push(ascii[total.scaled(v, 7).min(7)]);
    }
}

/// Adjusted bucket range of a packed quantize() (`dtada_minbin`/`dtada_maxbin` widened by one).
pub(crate) fn packed_quantize_range(minbin: usize, maxbin: usize) -> (usize, usize) {
    let min = if minbin != 0 && minbin != ZERO_BUCKET {
        minbin - 1
    } else {
        minbin
    };
    let max = if maxbin < NBUCKETS - 1 {
        maxbin + 1
    } else {
        maxbin
    };
    (min, max.min(NBUCKETS - 1))
}

/// `dt_print_quantize_packed`.
pub(crate) fn print_quantize_packed(
    out: &mut Vec<u8>,
    d: &[i64],
    minbin: usize,
    maxbin: usize,
    g: Graph,
    utf8: bool,
) {
    if d.len() != NBUCKETS {
        return;
    }
    let (min, max) = packed_quantize_range(minbin, maxbin);
    let (min, max) = (min.min(max), max);
    let minval = bucket_value(min);
    let maxval = bucket_value(max);
    let _ = write!(out, " {:>w$} :", minval, w = ndigits(minval));
    let rows = &d[min..=max];
    let total = Total::of(rows, g.zoom);
    let count: i128 = rows.iter().map(|&c| i128::from(c)).sum();
    for &c in rows {
        packed_cell(out, c, &total, utf8);
    }
    let _ = writeln!(
        out,
        ": {:<w$} | {}",
        maxval,
        count as i64,
        w = ndigits(maxval)
    );
}

/// `dt_print_lquantize_packed`.
pub(crate) fn print_lquantize_packed(
    out: &mut Vec<u8>,
    base: i32,
    step: u16,
    levels: u16,
    d: &[i64],
    g: Graph,
    utf8: bool,
) {
    if d.len() != levels as usize + 2 {
        return;
    }
    let _ = write!(out, "{:>8} :", format!("< {base}"));
    let total = Total::of(d, g.zoom);
    let count: i128 = d.iter().map(|&c| i128::from(c)).sum();
    for &c in d {
        packed_cell(out, c, &total, utf8);
    }
    let lim = base.wrapping_add(i32::from(levels).wrapping_mul(i32::from(step)));
    let _ = writeln!(out, ": {:<8} | {}", format!(">= {lim}"), count as i64);
}

/// The packed header (`dt_print_quanthdr_packed`); `lquantize` gives the number of levels.
pub(crate) fn packed_header(
    out: &mut Vec<u8>,
    width: usize,
    quantize: Option<(usize, usize)>,
    lquantize_levels: usize,
) {
    let (minwidth, maxwidth, dashes) = match quantize {
        Some((minbin, maxbin)) => {
            let (min, max) = packed_quantize_range(minbin, maxbin);
            (
                ndigits(bucket_value(min)),
                ndigits(bucket_value(max)),
                max.saturating_sub(min) + 1,
            )
        }
        None => (7, 8, lquantize_levels + 2),
    };
    let key = if width > 0 { "key" } else { "" };
    let _ = write!(out, "\n{key:>width$} {:>minwidth$} .", "min");
    out.resize(out.len() + dashes, b'-');
    let _ = writeln!(out, ". {:<maxwidth$} | count", "max");
}
