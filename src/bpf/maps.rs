//! The layout of the kernel's aggregation maps, and how user space reads them back.
//!
//! Each aggregating statement of a kernel clause has a per-CPU hash map of its own. Its key is
//! the statement's key parts back to back ([`KeyPart`]: 8 bytes per integer, the probe's
//! system call number for `probefunc` and the other probe names, `bpf_get_current_comm`'s 16
//! bytes for `execname`). Its value is, per CPU, `[updates, data...]`: the number of firings
//! that CPU folded in, then the data words `agg` keeps for the function (`[count]`, `[sum]`,
//! `[count, sum]` for avg(), `[count, sum, squares low, squares high]` for stddev()...). A quantization (`quantize()`, `lquantize()`, `llquantize()`)
//! has one entry per bucket that a firing added to: its key ends in the bucket's index (the
//! program computes it as `agg` does) and its data is `[sum of increments]`, so that it is
//! folded like a sum and spread into the function's buckets in user space ([`bucket_of`]).
//! User space reads every entry (all CPUs' values), and folds
//! into the program's aggregation what happened since it last read ([`Folder`]): the
//! difference for the functions that add, the value itself for min() and max(), whose merge
//! is idempotent. A CPU that never updated an entry has zeros there, which its update count
//! of 0 tells apart from a minimum of 0. The aggregation then holds what the VM would have
//! made of the same firings, and `clear()`, `trunc()` and `printa()` work on it unchanged.

use std::collections::HashMap;

use crate::ir::value::Datum;
use crate::ir::{AggFunc, Node};

/// What one part of an aggregation key is, in the kernel.
#[derive(Clone, Debug)]
pub enum KeyPart {
    /// An integer expression, recorded as the key's D type (`size`, `signed`).
    Int { node: Node, size: u8, signed: bool },
    /// `execname`: the thread's `comm`.
    Execname,
    /// `probeprov`, `probemod`, `probefunc` or `probename`: constant per probe, kept as the
    /// system call number and named in user space.
    Probe(ProbeField),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeField {
    Provider,
    Module,
    Function,
    Name,
}

impl KeyPart {
    /// Bytes of the part in the map's key.
    pub fn bytes(&self) -> usize {
        match self {
            KeyPart::Execname => 16,
            _ => 8,
        }
    }
}

/// Bytes of the key parts (where a quantization's bucket index starts).
pub fn parts_bytes(parts: &[KeyPart]) -> usize {
    parts.iter().map(KeyPart::bytes).sum::<usize>()
}

/// Bytes of the key of an aggregation of `f` keyed by `parts`: the parts, then for a
/// quantization its bucket's index (a key of none is one zero word: a hash map's key has
/// bytes).
pub fn key_bytes(parts: &[KeyPart], f: AggFunc) -> usize {
    let bucket = if is_quantization(f) { 8 } else { 0 };
    (parts_bytes(parts) + bucket).max(8)
}

/// Whether `f` keeps buckets (one map entry per bucket in the kernel).
pub fn is_quantization(f: AggFunc) -> bool {
    matches!(
        f,
        AggFunc::Quantize | AggFunc::Lquantize { .. } | AggFunc::Llquantize { .. }
    )
}

/// The function the kernel's map entries of `f` keep: a quantization's bucket entries are
/// sums of increments.
pub fn kernel_func(f: AggFunc) -> AggFunc {
    if is_quantization(f) {
        AggFunc::Sum
    } else {
        f
    }
}

/// Words of one CPU's value: the update count, then the function's data; `None` for a
/// function the kernel does not aggregate.
pub fn value_words(f: AggFunc) -> Option<usize> {
    match kernel_func(f) {
        AggFunc::Count | AggFunc::Sum | AggFunc::Min | AggFunc::Max => Some(2),
        AggFunc::Avg => Some(3),
        // [updates, count, sum, sum of squares' low and high words]
        AggFunc::Stddev => Some(5),
        _ => None,
    }
}

/// A quantization entry's words in `agg`'s layout (`stride` buckets): `sum` added to the
/// bucket the key `raw` names (after `parts`), the last bucket for an index past it (as `agg`
/// clamps an `llquantize()` value); `None` for a key too short or no buckets.
pub fn bucket_of(parts: &[KeyPart], raw: &[u8], stride: usize, sum: i64) -> Option<Vec<i64>> {
    let at = parts_bytes(parts);
    let b = u64::from_le_bytes(raw.get(at..at + 8)?.try_into().ok()?);
    let last = stride.checked_sub(1)?;
    let mut words = vec![0i64; stride];
    words[usize::try_from(b).unwrap_or(usize::MAX).min(last)] = sum;
    Some(words)
}

/// The key `parts` of a map key as the VM would have made it; `probe` names the probe field
/// of a system call number (`None`: the call has no probe, and the entry is skipped).
pub fn decode_key(
    parts: &[KeyPart],
    raw: &[u8],
    probe: &dyn Fn(u64, ProbeField) -> Option<String>,
) -> Option<Vec<Datum>> {
    let mut out = Vec::with_capacity(parts.len());
    let mut at = 0usize;
    for p in parts {
        let b = raw.get(at..at + p.bytes())?;
        at += p.bytes();
        let word = || u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8]));
        out.push(match p {
            KeyPart::Int { size, signed, .. } => Datum::Int {
                value: word() as i64,
                size: *size,
                signed: *signed,
            },
            KeyPart::Execname => {
                let n = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                Datum::Str(b[..n].to_vec())
            }
            KeyPart::Probe(f) => Datum::Str(probe(word(), *f)?.into_bytes()),
        });
    }
    Some(out)
}

/// Folds what the CPUs hold of one entry (`cpus` values of `words` words, one after
/// another, each `[updates, data...]`): `(updates, data words)`. The data are folded by
/// `fold` from `fresh` (the aggregation engine's own fold and fresh entry, which the loader
/// passes: the kernel's parts merge exactly as the engine merges); a CPU that never updated
/// the entry is skipped.
pub fn fold_cpus(
    per_cpu: &[i64],
    words: usize,
    fresh: Vec<i64>,
    fold: &dyn Fn(&mut [i64], &[i64]),
) -> (i64, Vec<i64>) {
    let mut updates = 0i64;
    let mut data = fresh;
    for v in per_cpu.chunks_exact(words.max(1)) {
        if v.first().is_none_or(|&n| n == 0) {
            continue;
        }
        updates = updates.wrapping_add(v[0]);
        fold(&mut data, &v[1..]);
    }
    (updates, data)
}

/// The engine's inverse of its fold: the words that take `before` (second) to `now` (first).
pub type Since = dyn Fn(&[i64], &[i64]) -> Vec<i64>;

/// What one map's entries held when user space last folded them in.
#[derive(Default)]
pub struct Folder {
    last: HashMap<Vec<u8>, (i64, Vec<i64>)>,
}

impl Folder {
    /// The words to merge into the aggregation for an entry that now holds `(updates,
    /// data)`: nothing when no firing updated it since the last read; else `since(now,
    /// before)` (the engine's inverse of its fold: the difference for the functions that
    /// add, the value for min() and max()), or the value itself at the first read.
    pub fn delta(&mut self, key: &[u8], now: (i64, Vec<i64>), since: &Since) -> Option<Vec<i64>> {
        let before = self.last.get(key);
        if before.is_some_and(|b| b.0 == now.0) || now.0 == 0 {
            return None;
        }
        let out = match before {
            None => now.1.clone(),
            Some(b) => since(&now.1, &b.1),
        };
        self.last.insert(key.to_vec(), now);
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_back_as_the_vms_datums() {
        let parts = [
            KeyPart::Execname,
            KeyPart::Int {
                node: Node::Const(0),
                size: 4,
                signed: true,
            },
            KeyPart::Probe(ProbeField::Function),
        ];
        assert_eq!(key_bytes(&parts, AggFunc::Count), 32);
        assert_eq!(key_bytes(&parts, AggFunc::Quantize), 40);
        assert_eq!(key_bytes(&[], AggFunc::Sum), 8);
        assert_eq!(key_bytes(&[], AggFunc::Quantize), 8);
        let mut raw = vec![0u8; 32];
        raw[..5].copy_from_slice(b"bash\0");
        raw[16..24].copy_from_slice(&(-3i64).to_le_bytes());
        raw[24..32].copy_from_slice(&110u64.to_le_bytes());
        let name = |nr: u64, f: ProbeField| {
            (nr == 110 && f == ProbeField::Function).then(|| "getppid".to_string())
        };
        let k = decode_key(&parts, &raw, &name).unwrap();
        assert_eq!(k[0], Datum::Str(b"bash".to_vec()));
        assert_eq!(k[1], Datum::int(-3, 4, true));
        assert_eq!(k[2], Datum::Str(b"getppid".to_vec()));
        // a call with no probe: no entry
        raw[24] = 111;
        assert!(decode_key(&parts, &raw, &name).is_none());
        assert!(decode_key(&parts, &raw[..20], &name).is_none());
    }

    #[test]
    fn a_bucket_entry_spreads_into_the_functions_buckets() {
        let parts = [KeyPart::Execname];
        let mut raw = vec![0u8; 24];
        raw[16..].copy_from_slice(&65u64.to_le_bytes());
        let w = bucket_of(&parts, &raw, 127, 7).unwrap();
        assert_eq!((w.len(), w[65], w.iter().sum::<i64>()), (127, 7, 7));
        // past the last bucket: the last, as agg clamps llquantize()
        raw[16..].copy_from_slice(&900u64.to_le_bytes());
        assert_eq!(bucket_of(&parts, &raw, 10, 2).unwrap()[9], 2);
        assert!(bucket_of(&parts, &raw, 0, 2).is_none());
        assert!(bucket_of(&parts, &raw[..20], 10, 2).is_none());
        assert_eq!(value_words(AggFunc::Quantize), Some(2));
        assert_eq!(value_words(AggFunc::Stddev), Some(5));
    }

    /// A fold and its inverse as the engine's (`agg`) are for count(), sum() and min()
    /// (the loader passes the engine's own; these stand in for them here).
    fn add(d: &mut [i64], s: &[i64]) {
        for (a, b) in d.iter_mut().zip(s) {
            *a = a.wrapping_add(*b);
        }
    }
    fn min(d: &mut [i64], s: &[i64]) {
        d[0] = d[0].min(s[0]);
    }
    fn sub(n: &[i64], b: &[i64]) -> Vec<i64> {
        n.iter().zip(b).map(|(x, y)| x - y).collect()
    }

    #[test]
    fn cpus_that_never_updated_an_entry_do_not_count() {
        // min over two CPUs, the second untouched (its zeros are no minimum)
        let (n, d) = fold_cpus(&[2, 7, 0, 0], 2, vec![i64::MAX], &min);
        assert_eq!((n, d), (2, vec![7]));
        let (n, d) = fold_cpus(&[1, 1, 5, 2, 2, 9], 3, vec![0, 0], &add);
        assert_eq!((n, d), (3, vec![3, 14]));
    }

    #[test]
    fn each_read_folds_in_what_happened_since_the_last() {
        let mut f = Folder::default();
        assert_eq!(f.delta(b"k", (3, vec![3]), &sub), Some(vec![3]));
        assert_eq!(f.delta(b"k", (3, vec![3]), &sub), None);
        assert_eq!(f.delta(b"k", (5, vec![5]), &sub), Some(vec![2]));
        assert_eq!(f.delta(b"j", (0, vec![0]), &sub), None);
    }
}
