//! Aggregating functions: the data words each keeps (the layout dtrace uses), how a value is
//! folded in, dtrace's 128-bit standard deviation and the value comparisons used for sorting.

use std::cmp::Ordering;

use super::quantize::{self, NBUCKETS, ZERO_BUCKET};
use crate::ir::AggFunc;

/// `f` with parameters made safe to compute with: never a zero step, a factor below 2, or a
/// `llquantize()` range whose top bucket overflows 64 bits. The function an aggregation keeps
/// is the compiler's [`AggFunc`] itself (there is no second type for it): only its parameters
/// are clamped, once, when the aggregation is made.
pub(crate) fn sanitize(f: AggFunc) -> AggFunc {
    match f {
        AggFunc::Lquantize { base, step, levels } => AggFunc::Lquantize {
            base,
            step: step.max(1),
            levels: levels.max(1),
        },
        AggFunc::Llquantize {
            factor,
            low,
            high,
            nsteps,
        } => {
            let factor = factor.max(2);
            let nsteps = nsteps.max(factor);
            // Keep factor^(high + 1) within 64 bits (the compiler refuses more).
            let mut max_high = 0u16;
            let mut v: i64 = 1;
            while let Some(n) = v.checked_mul(i64::from(factor)) {
                v = n;
                max_high += 1;
            }
            let high = high.min(max_high).max(1);
            let low = low.min(high - 1);
            AggFunc::Llquantize {
                factor,
                low,
                high,
                nsteps,
            }
        }
        f => f,
    }
}

/// What an aggregation does with its data words, for each aggregating function (whose
/// parameters went through [`sanitize`]).
pub(crate) trait Fold {
    fn stride(&self) -> usize;
    fn init(&self, d: &mut [i64]);
    fn apply(&self, d: &mut [i64], args: &[i64]);
    fn merge(&self, d: &mut [i64], src: &[i64]);
}

/// Which D argument is the increment (quantize(v, incr), lquantize(v, b, l, s, incr),
/// llquantize(v, f, l, h, n, incr)).
fn incr_index(f: &AggFunc) -> Option<usize> {
    match f {
        AggFunc::Quantize => Some(1),
        AggFunc::Lquantize { .. } => Some(4),
        AggFunc::Llquantize { .. } => Some(5),
        _ => None,
    }
}

impl Fold for AggFunc {
    /// Number of 64-bit data words per entry.
    fn stride(&self) -> usize {
        match self {
            AggFunc::Count | AggFunc::Sum | AggFunc::Min | AggFunc::Max => 1,
            AggFunc::Avg => 2,
            AggFunc::Stddev => 4,
            AggFunc::Quantize => NBUCKETS,
            AggFunc::Lquantize { levels, .. } => *levels as usize + 2,
            AggFunc::Llquantize {
                factor,
                low,
                high,
                nsteps,
            } => quantize::llquantize_labels(*factor, *low, *high, *nsteps).len(),
        }
    }

    /// Initialise a fresh entry's words.
    fn init(&self, d: &mut [i64]) {
        d.fill(0);
        match self {
            AggFunc::Min => d[0] = i64::MAX,
            AggFunc::Max => d[0] = i64::MIN,
            _ => {}
        }
    }

    /// Fold the evaluated arguments into an entry's words.
    #[inline]
    fn apply(&self, d: &mut [i64], args: &[i64]) {
        let v = args.first().copied().unwrap_or(0);
        let incr = || {
            incr_index(self)
                .and_then(|i| args.get(i).copied())
                .unwrap_or(1)
        };
        match *self {
            AggFunc::Count => d[0] = d[0].wrapping_add(1),
            AggFunc::Sum => d[0] = d[0].wrapping_add(v),
            AggFunc::Min => d[0] = d[0].min(v),
            AggFunc::Max => d[0] = d[0].max(v),
            AggFunc::Avg => {
                d[0] = d[0].wrapping_add(1);
                d[1] = d[1].wrapping_add(v);
            }
            AggFunc::Stddev => {
                d[0] = d[0].wrapping_add(1);
                d[1] = d[1].wrapping_add(v);
                let a = v.unsigned_abs() as u128;
                let sq = get_u128(d[2], d[3]).wrapping_add(a * a);
                d[2] = sq as u64 as i64;
                d[3] = (sq >> 64) as u64 as i64;
            }
            AggFunc::Quantize => {
                let b = quantize::quantize_bucket(v);
                d[b] = d[b].wrapping_add(incr());
            }
            AggFunc::Lquantize { base, step, levels } => {
                let b = quantize::lquantize_bucket(base, step, levels, v);
                d[b] = d[b].wrapping_add(incr());
            }
            AggFunc::Llquantize {
                factor,
                low,
                high,
                nsteps,
            } => {
                // the top bucket is the entry's last word
                let last = d.len().saturating_sub(1);
                let b = quantize::llquantize_bucket(factor, low, high, nsteps, v).min(last);
                d[b] = d[b].wrapping_add(incr());
            }
        }
    }

    /// Folds another entry's words `src` into `d`, as dtrace's consumer folds the per-CPU
    /// buffers of one aggregation (`dt_aggregate_snap_cpu`: `dtagd_aggregate` per function):
    /// counts, sums and buckets add, min and max keep the extreme, avg and stddev add their
    /// count, sum (and 128-bit sum of squares).
    fn merge(&self, d: &mut [i64], src: &[i64]) {
        match self {
            AggFunc::Min => d[0] = d[0].min(src[0]),
            AggFunc::Max => d[0] = d[0].max(src[0]),
            AggFunc::Stddev => {
                d[0] = d[0].wrapping_add(src[0]);
                d[1] = d[1].wrapping_add(src[1]);
                let sq = get_u128(d[2], d[3]).wrapping_add(get_u128(src[2], src[3]));
                d[2] = sq as u64 as i64;
                d[3] = (sq >> 64) as u64 as i64;
            }
            _ => {
                for (a, b) in d.iter_mut().zip(src) {
                    *a = a.wrapping_add(*b);
                }
            }
        }
    }
}

/// The inverse of [`Fold::merge`] for the functions that add: `now - before`, word by word,
/// stddev()'s sum of squares (words 2 and 3) as one 128-bit number; for min() and max() the
/// value `now` (their merge is idempotent). Words past the shorter of the two are `now`'s.
pub(crate) fn difference(f: AggFunc, now: &[i64], before: &[i64]) -> Vec<i64> {
    let mut out = now.to_vec();
    match f {
        AggFunc::Min | AggFunc::Max => {}
        AggFunc::Stddev if now.len() == 4 && before.len() == 4 => {
            out[0] = now[0].wrapping_sub(before[0]);
            out[1] = now[1].wrapping_sub(before[1]);
            let sq = get_u128(now[2], now[3]).wrapping_sub(get_u128(before[2], before[3]));
            out[2] = sq as u64 as i64;
            out[3] = (sq >> 64) as u64 as i64;
        }
        _ => {
            for (o, b) in out.iter_mut().zip(before) {
                *o = o.wrapping_sub(*b);
            }
        }
    }
    out
}

fn get_u128(lo: i64, hi: i64) -> u128 {
    (lo as u64 as u128) | ((hi as u64 as u128) << 64)
}

/// dtrace's `dt_stddev`: sqrt(sum_sq/n/n'^2 - (sum/n'/n)^2) in 128-bit integers (n' is the
/// normalisation), with the same truncations and wrap-around.
pub(crate) fn stddev(d: &[i64], normal: u64) -> u64 {
    let count = d[0] as u64;
    let normal = normal.max(1);
    if count == 0 {
        return 0;
    }
    let sq = get_u128(d[2], d[3]);
    let avg_sq = sq / normal as u128 / normal as u128 / count as u128;
    let navg = d[1]
        .wrapping_div(normal as i64)
        .checked_div(count as i64)
        .unwrap_or(0)
        .unsigned_abs() as u128;
    let diff = avg_sq.wrapping_sub(navg * navg);
    diff.isqrt() as u64
}

/// The average as `dt_print_average` prints it (signed division).
pub(crate) fn average(d: &[i64], normal: u64) -> i64 {
    if d[0] == 0 {
        return 0;
    }
    let n = if normal == 0 { 1 } else { normal as i64 };
    d[1].wrapping_div(n).checked_div(d[0]).unwrap_or(0)
}

/// The average as printa's `%@` conversions get it (unsigned division, `pfprint_average`).
pub(crate) fn average_unsigned(d: &[i64], normal: u64) -> u64 {
    if d[0] == 0 {
        return 0;
    }
    (d[1] as u64) / normal.max(1) / (d[0] as u64)
}

/// dtrace's value comparison (`dt_aggregate_valcmp`), ascending.
pub(crate) fn cmp_values(f: &AggFunc, a: &[i64], b: &[i64]) -> Ordering {
    match *f {
        AggFunc::Count | AggFunc::Sum | AggFunc::Min | AggFunc::Max => a[0].cmp(&b[0]),
        AggFunc::Avg => average(a, 1).cmp(&average(b, 1)),
        AggFunc::Stddev => stddev(a, 1).cmp(&stddev(b, 1)),
        AggFunc::Quantize => {
            let total = |d: &[i64]| {
                (0..NBUCKETS).fold(0i128, |t, i| {
                    t.saturating_add(
                        i128::from(quantize::bucket_value(i)).saturating_mul(i128::from(d[i])),
                    )
                })
            };
            total(a)
                .cmp(&total(b))
                .then(a[ZERO_BUCKET].cmp(&b[ZERO_BUCKET]))
        }
        AggFunc::Lquantize { base, step, levels } => {
            let sum = |d: &[i64]| {
                let mut base = i64::from(base);
                let mut t = i128::from(d[0]).saturating_mul(i128::from(base - 1));
                for i in 0..levels as usize {
                    t = t.saturating_add(i128::from(d[i + 1]).saturating_mul(i128::from(base)));
                    base += i64::from(step);
                }
                t.saturating_add(
                    i128::from(d[levels as usize + 1]).saturating_mul(i128::from(base + 1)),
                )
            };
            let zero = |d: &[i64]| {
                let mut base = i64::from(base);
                if base - 1 == 0 {
                    return d[0];
                }
                for i in 0..levels as usize {
                    if base == 0 {
                        return d[i + 1];
                    }
                    base += i64::from(step);
                }
                if base + 1 == 0 {
                    return d[levels as usize + 1];
                }
                0
            };
            sum(a).cmp(&sum(b)).then(zero(a).cmp(&zero(b)))
        }
        AggFunc::Llquantize {
            factor,
            low,
            high,
            nsteps,
        } => {
            let nbuckets = a.len().min(b.len());
            let labels = quantize::llquantize_labels(factor, low, high, nsteps);
            let sum = |d: &[i64]| {
                let mut t = 0i128;
                for (bin, &label) in labels.iter().enumerate().take(nbuckets) {
                    let w = if bin == 0 { label - 1 } else { label };
                    t = t.saturating_add(i128::from(d[bin]).saturating_mul(i128::from(w)));
                }
                t
            };
            sum(a).cmp(&sum(b)).then(a[0].cmp(&b[0]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(f: AggFunc, vals: &[&[i64]]) -> (AggFunc, Vec<i64>) {
        let f = sanitize(f);
        let mut d = vec![0; f.stride()];
        f.init(&mut d);
        for a in vals {
            f.apply(&mut d, a);
        }
        (f, d)
    }

    #[test]
    fn a_difference_folded_back_gives_the_later_words() {
        // stddev()'s sum of squares carries across its two words
        let before = [1, 5, -1, 0];
        let mut now = before;
        AggFunc::Stddev.merge(&mut now, &[1, 3, 9, 0]);
        assert_eq!(now, [2, 8, 8, 1]);
        let d = difference(AggFunc::Stddev, &now, &before);
        assert_eq!(d, vec![1, 3, 9, 0]);
        let mut back = before;
        AggFunc::Stddev.merge(&mut back, &d);
        assert_eq!(back, now);
        assert_eq!(difference(AggFunc::Min, &[3], &[7]), vec![3]);
        assert_eq!(difference(AggFunc::Avg, &[3, 9], &[1, 4]), vec![2, 5]);
    }

    #[test]
    fn stddev_like_dtrace() {
        // tst.stddev.d: ten values 5000000000 + 100 * i.
        let v: Vec<[i64; 1]> = (0..10).map(|i| [5_000_000_000 + 100 * i]).collect();
        let r: Vec<&[i64]> = v.iter().map(|a| &a[..]).collect();
        let (_, d) = run(AggFunc::Stddev, &r);
        assert_eq!(stddev(&d, 1), 287);
        let v: Vec<[i64; 1]> = (0..10).map(|i| [-5_000_000_000 - 100 * i]).collect();
        let r: Vec<&[i64]> = v.iter().map(|a| &a[..]).collect();
        let (_, d) = run(AggFunc::Stddev, &r);
        assert_eq!(stddev(&d, 1), 287);
        // Extremes do not panic.
        let (_, d) = run(AggFunc::Stddev, &[&[i64::MIN], &[i64::MAX], &[i64::MIN]]);
        let _ = stddev(&d, 1);
        let _ = stddev(&d, u64::MAX);
        let _ = stddev(&d, 0);
    }

    #[test]
    fn avg_division() {
        let (_, d) = run(AggFunc::Avg, &[&[0], &[-900]]);
        assert_eq!(average(&d, 1), -450);
        let (_, d) = run(AggFunc::Avg, &[&[i64::MIN]]);
        assert_eq!(average(&d, u64::MAX), i64::MIN);
        assert_eq!(average_unsigned(&d, 0), 1 << 63);
    }

    #[test]
    fn min_max_initial() {
        let (_, d) = run(AggFunc::Min, &[&[5], &[3], &[9]]);
        assert_eq!(d[0], 3);
        let (_, d) = run(AggFunc::Max, &[&[-5], &[-3], &[-9]]);
        assert_eq!(d[0], -3);
    }

    #[test]
    fn weird_params_do_not_panic() {
        for f in [
            AggFunc::Lquantize {
                base: i32::MIN,
                step: 0,
                levels: 0,
            },
            AggFunc::Lquantize {
                base: i32::MAX,
                step: u16::MAX,
                levels: u16::MAX,
            },
            AggFunc::Llquantize {
                factor: 0,
                low: 0,
                high: 0,
                nsteps: 0,
            },
            AggFunc::Llquantize {
                factor: 65535,
                low: 65535,
                high: 65535,
                nsteps: 1,
            },
            AggFunc::Llquantize {
                factor: 2,
                low: 0,
                high: 63,
                nsteps: 4,
            },
        ] {
            let f = sanitize(f);
            let mut d = vec![0; f.stride()];
            f.init(&mut d);
            for v in [i64::MIN, -1, 0, 1, i64::MAX] {
                f.apply(&mut d, &[v, 0, 0, 0, 0, v]);
            }
            let _ = cmp_values(&f, &d, &d);
        }
    }
}
