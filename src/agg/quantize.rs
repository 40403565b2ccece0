//! Quantizations: bucket indexing for quantize()/lquantize()/llquantize() and the labels of
//! their buckets. The graphs dtrace draws of them are `output::printa::graph`.

/// Number of quantize() buckets: 63 negative, zero, 63 positive.
pub(crate) const NBUCKETS: usize = 127;
/// Index of the zero bucket.
pub(crate) const ZERO_BUCKET: usize = 63;

/// Lower bound of quantize() bucket `i` (`DTRACE_QUANTIZE_BUCKETVAL`).
pub(crate) fn bucket_value(i: usize) -> i64 {
    match i {
        0..=62 => -(1i64 << (62 - i)),
        63 => 0,
        _ => 1i64 << (i - 64).min(62),
    }
}

/// quantize() bucket of a value.
pub(crate) fn quantize_bucket(v: i64) -> usize {
    match v {
        0 => ZERO_BUCKET,
        v if v > 0 => 64 + (63 - v.leading_zeros() as usize),
        v => {
            let k = 63 - v.unsigned_abs().leading_zeros() as usize;
            62 - k.min(62)
        }
    }
}

/// lquantize() bucket: 0 is underflow, `levels + 1` overflow. The value is truncated to 32
/// bits as the kernel does.
pub(crate) fn lquantize_bucket(base: i32, step: u16, levels: u16, v: i64) -> usize {
    let v = v as i32;
    if v < base {
        return 0;
    }
    let level = (i64::from(v) - i64::from(base)) / i64::from(step.max(1));
    if level < i64::from(levels) {
        level as usize + 1
    } else {
        levels as usize + 1
    }
}

/// llquantize() bucket, as the kernel computes it (with overflow clamped).
pub(crate) fn llquantize_bucket(factor: u16, low: u16, high: u16, nsteps: u16, v: i64) -> usize {
    let f = i64::from(factor.max(2));
    let nsteps = i64::from(nsteps.max(1));
    let mut this: i64 = 1;
    for _ in 0..low {
        this = this.saturating_mul(f);
    }
    if v < this {
        return 0;
    }
    let mut value = v;
    let mut last = this;
    this = this.saturating_mul(f);
    let mut base: i64 = 1;
    let mut order = low;
    while order <= high {
        let nb = this.min(nsteps).max(1);
        let next = match this.checked_mul(f) {
            Some(n) => n,
            None => {
                value = this - 1;
                i64::MAX
            }
        };
        if value < this {
            let width = (this / nb).max(1);
            return (base + (value - last) / width).max(0) as usize;
        }
        base += nb - nb / f;
        last = this;
        this = next;
        order += 1;
    }
    base.max(0) as usize
}

/// The label value of every llquantize() bucket, as libdtrace walks them: bucket 0 is
/// "< labels[0]", the last is ">= label", the others start at their label.
pub(crate) fn llquantize_labels(factor: u16, low: u16, high: u16, nsteps: u16) -> Vec<i64> {
    let f = i64::from(factor.max(2));
    let ns = i64::from(nsteps.max(1));
    let mut value: i64 = 1;
    for _ in 0..low {
        value = value.saturating_mul(f);
    }
    let mut labels = vec![value];
    let step_for = |next: i64| if next > ns { next / ns } else { 1 };
    let mut next = value.saturating_mul(f);
    let mut step = step_for(next);
    let mut order = low;
    while order <= high && labels.len() < 1 << 22 {
        labels.push(value);
        match value.checked_add(step) {
            Some(v) => value = v,
            None => break,
        }
        if value < next {
            continue;
        }
        match value.checked_mul(f) {
            Some(n) => next = n,
            None => {
                order = high;
                next = i64::MAX;
            }
        }
        step = step_for(next);
        order += 1;
    }
    labels.push(value);
    labels
}

/// `(long long)val / normal` with dtrace's unsigned normal.
pub(crate) fn norm(v: i64, normal: u64) -> i64 {
    ((v as u64) / normal.max(1)) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets() {
        assert_eq!(quantize_bucket(0), 63);
        assert_eq!(quantize_bucket(1), 64);
        assert_eq!(quantize_bucket(2), 65);
        assert_eq!(quantize_bucket(3), 65);
        assert_eq!(quantize_bucket(i64::MAX), 126);
        assert_eq!(quantize_bucket(-1), 62);
        assert_eq!(quantize_bucket(-2), 61);
        assert_eq!(quantize_bucket(-3), 61);
        assert_eq!(quantize_bucket(i64::MIN), 0);
        assert_eq!(quantize_bucket(-(1 << 62)), 0);
        for i in 0..NBUCKETS {
            assert_eq!(quantize_bucket(bucket_value(i)), i);
        }
        assert_eq!(lquantize_bucket(0, 1, 4, -1), 0);
        assert_eq!(lquantize_bucket(0, 1, 4, 3), 4);
        assert_eq!(lquantize_bucket(0, 1, 4, 4), 5);
        assert_eq!(lquantize_bucket(i32::MIN, 1, 10, i64::MAX), 11);
    }

    #[test]
    fn llquantize_layout() {
        let labels = llquantize_labels(10, 0, 10, 10);
        assert_eq!(&labels[..12], &[1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20]);
        assert_eq!(llquantize_bucket(10, 0, 10, 10, 0), 0);
        assert_eq!(llquantize_bucket(10, 0, 10, 10, 1), 1);
        assert_eq!(llquantize_bucket(10, 0, 10, 10, 9), 9);
        assert_eq!(llquantize_bucket(10, 0, 10, 10, 10), 10);
        assert_eq!(llquantize_bucket(10, 0, 10, 10, 100), 19);
        assert_eq!(llquantize_bucket(10, 0, 10, 10, i64::MAX) + 1, labels.len());
        let labels = llquantize_labels(10, 1, 2, 20);
        assert_eq!(llquantize_bucket(10, 1, 2, 20, i64::MAX) + 1, labels.len());
        assert_eq!(labels[llquantize_bucket(10, 1, 2, 20, 49)], 45);
        assert_eq!(labels[llquantize_bucket(10, 1, 2, 20, 343)], 300);
    }
}
