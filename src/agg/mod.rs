//! The aggregation engine: `@name[keys] = func(args)` storage, clear/trunc/normalize, the
//! merge of keys by symbol and the orders printa() reads the entries in. Printing them, in
//! dtrace's default layout or through a printa() format, is `output::printa`.
//!
//! Each aggregation keeps its keys encoded back to back in one byte arena and its data as
//! fixed-size runs of 64-bit words (the layout dtrace uses: `[count, sum]` for avg(), 127
//! buckets for quantize(), ...), indexed by a hash of the key bytes. A million distinct integer
//! keys of a count() take about 60 MB (see the `memory_million_keys` test).

pub mod diff;
pub(crate) mod funcs;
pub(crate) mod key;
pub(crate) mod quantize;
pub mod snapshot;
pub(crate) mod sort;

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

pub use key::IntKey;

use crate::ir::value::{Datum, DatumRef};

/// Bytes of one entry's value for `f` as dtrace's kernel sizes it
/// (`dtrace_ecb_aggregation_create()`): the data words dtx keeps, plus the word in which the
/// kernel keeps the encoded arguments of `lquantize()` and `llquantize()`.
pub fn entry_bytes(f: crate::ir::AggFunc) -> usize {
    let arg = matches!(
        f,
        crate::ir::AggFunc::Lquantize { .. } | crate::ir::AggFunc::Llquantize { .. }
    );
    (funcs::sanitize(f).stride() + usize::from(arg)) * 8
}
pub use sort::{Encoding, SortOptions};

/// A fresh entry's data words for `f` (what [`fold_words`] starts from): zeros, min()'s
/// `i64::MAX`, max()'s `i64::MIN`.
pub fn fresh_words(f: crate::ir::AggFunc) -> Vec<i64> {
    let f = funcs::sanitize(f);
    let mut d = vec![0; f.stride()];
    f.init(&mut d);
    d
}

/// Folds the data words `src` of one entry into `d` (same function, same stride), as the
/// aggregations fold their per-CPU parts: what the BPF back end's loader calls to fold the
/// kernel's per-CPU values, so that they merge exactly as here. Words of another length
/// are left alone.
pub fn fold_words(f: crate::ir::AggFunc, d: &mut [i64], src: &[i64]) {
    let f = funcs::sanitize(f);
    if d.len() == f.stride() && src.len() == f.stride() {
        f.merge(d, src);
    }
}

/// The words that, folded into `before` by [`fold_words`], give `now`: the difference for
/// the functions that add (stddev()'s sum of squares as the 128-bit number it is), `now`
/// itself for min() and max(), whose fold keeps the extreme.
pub fn words_since(f: crate::ir::AggFunc, now: &[i64], before: &[i64]) -> Vec<i64> {
    funcs::difference(funcs::sanitize(f), now, before)
}

use crate::ir::AggFunc;
use funcs::Fold;

/// Resolves addresses for printing stacks and symbol keys. The default methods print `0x` hex.
pub trait SymbolResolver {
    /// A kernel address as a stack frame: `module`function+0xoffset`.
    fn kernel(&self, addr: u64) -> String {
        format!("0x{addr:x}")
    }
    /// A user address of process `pid` as a stack frame.
    fn user(&self, pid: u32, addr: u64) -> String {
        let _ = pid;
        format!("0x{addr:x}")
    }
    /// The module containing a kernel address (`mod()`).
    fn kmod(&self, addr: u64) -> String {
        format!("0x{addr:x}")
    }
    /// The object containing a user address (`umod()`).
    fn umod(&self, pid: u32, addr: u64) -> String {
        let _ = pid;
        format!("0x{addr:x}")
    }
    /// The function containing a kernel address, without offset (`sym()` keys).
    fn kernel_func(&self, addr: u64) -> String {
        strip_offset(self.kernel(addr))
    }
    /// The function containing a user address, without offset (`usym()` keys).
    fn user_func(&self, pid: u32, addr: u64) -> String {
        strip_offset(self.user(pid, addr))
    }
    /// Readies the names of `frames` (a pid, None for the kernel; an address) about to be
    /// printed together: a resolver that fetches symbol files may fetch them at once.
    fn prefetch(&self, frames: &mut dyn Iterator<Item = (Option<u32>, u64)>) {
        let _ = frames;
    }
    /// A user address of process `pid` as a `ustack()` frame lookup.
    fn user_lookup(&self, pid: u32, addr: u64) -> Lookup {
        let _ = (pid, addr);
        Lookup::None
    }
    /// A kernel address as a frame of a stack recorded at address-space epoch `epoch`
    /// (`Datum::Stack`'s, `vm::StackEpochs`): named by the image that held it then. A
    /// resolver that knows no epochs names it as [`SymbolResolver::kernel`] does.
    fn kernel_at(&self, epoch: u32, addr: u64) -> String {
        let _ = epoch;
        self.kernel(addr)
    }
    /// A user address of process `pid` as a frame of a stack recorded at `epoch`.
    fn user_at(&self, pid: u32, epoch: u32, addr: u64) -> String {
        let _ = epoch;
        self.user(pid, addr)
    }
    /// [`SymbolResolver::user_lookup`] of a frame of a stack recorded at `epoch`.
    fn user_lookup_at(&self, pid: u32, epoch: u32, addr: u64) -> Lookup {
        let _ = epoch;
        self.user_lookup(pid, addr)
    }
}

/// Result of looking up an address, supplied by the caller's symbol tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Address is inside symbol `name` of `module`, whose value (start
    /// address) is `start`.
    Sym {
        module: String,
        name: String,
        start: u64,
    },
    /// Only the containing module is known.
    Module(String),
    /// Nothing known.
    None,
}

fn strip_offset(s: String) -> String {
    match (s.find('`'), s.rfind('+')) {
        (Some(b), Some(p)) if p > b => s[..p].to_string(),
        _ => s,
    }
}

/// The resolver that knows no symbols.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoSymbols;

impl SymbolResolver for NoSymbols {}

/// Why an update was not recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggError {
    /// Over the aggregation size limit (`aggsize`): the data is dropped, as dtrace drops it.
    Drop,
    /// No aggregation with that id.
    NoSuchAgg(u32),
}

impl std::fmt::Display for AggError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AggError::Drop => f.write_str("aggregation drop"),
            AggError::NoSuchAgg(n) => write!(f, "no aggregation {n}"),
        }
    }
}

impl std::error::Error for AggError {}

/// The value of one aggregation entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AggValue {
    Count(u64),
    Sum(i64),
    Avg {
        sum: i64,
        count: u64,
    },
    Min(i64),
    Max(i64),
    Stddev {
        count: u64,
        sum: i64,
        sum_sq: u128,
    },
    /// 127 buckets: index 63 counts zeros, 64 + k counts [2^k, 2^(k+1)), 62 - k counts
    /// (-2^(k+1), -2^k].
    Quantize(Vec<i64>),
    /// `levels + 2` buckets: below `base`, then one per step, then `>= base + levels * step`.
    Lquantize {
        base: i32,
        step: u16,
        levels: u16,
        buckets: Vec<i64>,
    },
    Llquantize {
        factor: u16,
        low: u16,
        high: u16,
        nsteps: u16,
        buckets: Vec<i64>,
    },
}

impl AggValue {
    /// The single number dtrace would print for this value (the average for avg(), the
    /// standard deviation for stddev(), the sum of the buckets for quantizations).
    pub fn scalar(&self) -> i64 {
        match self {
            AggValue::Count(c) => *c as i64,
            AggValue::Sum(v) | AggValue::Min(v) | AggValue::Max(v) => *v,
            AggValue::Avg { sum, count } => funcs::average(&[*count as i64, *sum], 1),
            AggValue::Stddev { count, sum, sum_sq } => funcs::stddev(
                &[
                    *count as i64,
                    *sum,
                    *sum_sq as u64 as i64,
                    (*sum_sq >> 64) as u64 as i64,
                ],
                1,
            ) as i64,
            AggValue::Quantize(b)
            | AggValue::Lquantize { buckets: b, .. }
            | AggValue::Llquantize { buckets: b, .. } => {
                b.iter().fold(0i64, |t, v| t.wrapping_add(*v))
            }
        }
    }
}

/// Hashes are already SipHash outputs: use them as they are.
#[derive(Default)]
struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

const NONE: u32 = u32::MAX;

/// Key equality, with short keys (one integer: 10 bytes) compared as two words rather than
/// through `memcmp`.
#[inline]
fn same_key(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if (8..=16).contains(&n) {
        let word = |s: &[u8], at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&s[at..at + 8]);
            u64::from_le_bytes(w)
        };
        return word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8);
    }
    a == b
}

fn hash_key(k: &[u8]) -> u64 {
    crate::fasthash::hash_bytes(k)
}

/// One aggregation's entries.
pub(crate) struct Agg {
    pub(crate) name: String,
    pub(crate) func: AggFunc,
    stride: usize,
    arena: Vec<u8>,
    /// Start of each entry's key in `arena` (the end is the next start).
    starts: Vec<u32>,
    /// Next entry with the same hash.
    chain: Vec<u32>,
    index: HashMap<u64, u32, BuildHasherDefault<IdentityHasher>>,
    data: Vec<i64>,
    /// normalize(): the factor and how many entries (the oldest) it applies to; entries added
    /// later print unnormalised, as in dtrace.
    normal: u64,
    normal_upto: usize,
    /// Whether a printa() printed it (then the end of the run does not).
    pub(crate) printed: Cell<bool>,
}

impl Agg {
    fn new(name: &str, func: AggFunc) -> Agg {
        Agg {
            name: name.to_string(),
            func,
            stride: func.stride(),
            arena: Vec::new(),
            starts: Vec::new(),
            chain: Vec::new(),
            index: HashMap::default(),
            data: Vec::new(),
            normal: 1,
            normal_upto: 0,
            printed: Cell::new(false),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.starts.len()
    }

    pub(crate) fn key(&self, i: usize) -> &[u8] {
        let s = self.starts[i] as usize;
        let e = self
            .starts
            .get(i + 1)
            .map_or(self.arena.len(), |&e| e as usize);
        &self.arena[s..e]
    }

    pub(crate) fn data(&self, i: usize) -> &[i64] {
        &self.data[i * self.stride..(i + 1) * self.stride]
    }

    pub(crate) fn normal(&self, i: usize) -> u64 {
        if i < self.normal_upto {
            self.normal
        } else {
            1
        }
    }

    /// The normalisation a missing (zero-filled) value of this aggregation prints with.
    pub(crate) fn zero_normal(&self) -> u64 {
        if self.normal_upto > 0 {
            self.normal
        } else {
            1
        }
    }

    /// All-zero data words (what a missing key prints as in a joined printa()).
    pub(crate) fn zero_data(&self) -> Vec<i64> {
        vec![0; self.stride]
    }

    // always inline: called once per aggregating firing, where a call's cost shows
    #[inline(always)]
    fn find(&self, k: &[u8], h: u64) -> Option<usize> {
        let mut e = *self.index.get(&h)?;
        while e != NONE {
            if same_key(self.key(e as usize), k) {
                return Some(e as usize);
            }
            e = self.chain[e as usize];
        }
        None
    }

    fn insert(&mut self, k: &[u8], h: u64) -> Option<usize> {
        let start = u32::try_from(self.arena.len()).ok()?;
        if self.len() >= NONE as usize - 1 {
            return None;
        }
        let i = self.len();
        self.arena.extend_from_slice(k);
        self.starts.push(start);
        let head = self.index.insert(h, i as u32).unwrap_or(NONE);
        self.chain.push(head);
        let old = self.data.len();
        self.data.resize(old + self.stride, 0);
        self.func.init(&mut self.data[old..]);
        Some(i)
    }

    fn bytes(&self) -> usize {
        self.arena.capacity()
            + self.starts.capacity() * 4
            + self.chain.capacity() * 4
            + self.data.capacity() * 8
            + self.index.capacity() * 17
    }

    /// Keep only the entries listed (in their original order).
    fn retain(&mut self, keep: &[bool]) {
        let mut next = Agg::new(&self.name, self.func);
        let mut upto = 0;
        for (i, _) in keep.iter().enumerate().filter(|(_, k)| **k) {
            let k = self.key(i).to_vec();
            if let Some(j) = next.insert(&k, hash_key(&k)) {
                next.data[j * self.stride..(j + 1) * self.stride].copy_from_slice(self.data(i));
                if i < self.normal_upto {
                    upto = j + 1;
                }
            }
        }
        next.normal = self.normal;
        next.normal_upto = upto;
        next.printed = self.printed.clone();
        *self = next;
    }

    /// The entries as dtrace's consumer keeps them: an address under `sym()`/`func()`,
    /// `mod()`, `usym()`/`ufunc()` or `umod()` stands for its function or module, so keys
    /// whose addresses fall in the same one are one entry, their values merged
    /// (dt_aggregate.c: dt_aggregate_sym, _mod, _usym and _umod turn the address into the
    /// symbol's or the module's start before keys are compared). Addresses are grouped by
    /// the name `syms` gives them; one without a name stays apart, as in dtrace. None when
    /// no key holds such an address (all keys of an aggregation have one shape).
    pub(crate) fn merged_by_symbol(&self, syms: &dyn SymbolResolver) -> Option<Agg> {
        let symbolic = |k: &DatumRef| {
            matches!(
                k,
                DatumRef::Sym(_) | DatumRef::Mod(_) | DatumRef::Usym { .. } | DatumRef::Umod { .. }
            )
        };
        if self.len() == 0 || !key::iter(self.key(0)).any(|k| symbolic(&k)) {
            return None;
        }
        // the first address seen under each (kind, pid, name) stands for the others
        let mut first: HashMap<(u8, u32, String), u64> = HashMap::new();
        let mut one = |kind: u8, pid: u32, name: String, addr: u64| {
            *first.entry((kind, pid, name)).or_insert(addr)
        };
        let mut next = Agg::new(&self.name, self.func);
        let mut upto = 0;
        let mut bytes = Vec::new();
        for i in 0..self.len() {
            let mut keys: Vec<Datum> = key::iter(self.key(i)).map(DatumRef::to_datum).collect();
            for k in &mut keys {
                match k {
                    Datum::Sym(a) => *a = one(0, 0, syms.kernel_func(*a), *a),
                    Datum::Mod(a) => *a = one(1, 0, syms.kmod(*a), *a),
                    Datum::Usym { addr, pid } => {
                        *addr = one(2, *pid, syms.user_func(*pid, *addr), *addr)
                    }
                    Datum::Umod { addr, pid } => {
                        *addr = one(3, *pid, syms.umod(*pid, *addr), *addr)
                    }
                    _ => {}
                }
            }
            bytes.clear();
            key::encode(&keys, &mut bytes);
            let h = hash_key(&bytes);
            let j = match next.find(&bytes, h) {
                Some(j) => j,
                None => match next.insert(&bytes, h) {
                    Some(j) => j,
                    None => continue,
                },
            };
            let s = self.stride;
            self.func
                .merge(&mut next.data[j * s..(j + 1) * s], self.data(i));
            if i < self.normal_upto {
                upto = upto.max(j + 1);
            }
        }
        next.normal = self.normal;
        next.normal_upto = upto;
        next.printed = self.printed.clone();
        Some(next)
    }

    /// Every entry, keys decoded, in the order they were created.
    fn entries(&self) -> Vec<(Vec<Datum>, AggValue)> {
        (0..self.len())
            .map(|i| {
                (
                    key::iter(self.key(i)).map(DatumRef::to_datum).collect(),
                    self.value(i),
                )
            })
            .collect()
    }

    fn value(&self, i: usize) -> AggValue {
        let d = self.data(i);
        match self.func {
            AggFunc::Count => AggValue::Count(d[0] as u64),
            AggFunc::Sum => AggValue::Sum(d[0]),
            AggFunc::Min => AggValue::Min(d[0]),
            AggFunc::Max => AggValue::Max(d[0]),
            AggFunc::Avg => AggValue::Avg {
                count: d[0] as u64,
                sum: d[1],
            },
            AggFunc::Stddev => AggValue::Stddev {
                count: d[0] as u64,
                sum: d[1],
                sum_sq: (d[2] as u64 as u128) | ((d[3] as u64 as u128) << 64),
            },
            AggFunc::Quantize => AggValue::Quantize(d.to_vec()),
            AggFunc::Lquantize { base, step, levels } => AggValue::Lquantize {
                base,
                step,
                levels,
                buckets: d.to_vec(),
            },
            AggFunc::Llquantize {
                factor,
                low,
                high,
                nsteps,
                ..
            } => AggValue::Llquantize {
                factor,
                low,
                high,
                nsteps,
                buckets: d.to_vec(),
            },
        }
    }
}

/// All aggregations of a program.
pub struct AggregationTable {
    aggs: Vec<Agg>,
    /// Bytes allowed across all aggregations (`aggsize`), if limited.
    limit: Option<usize>,
    string_key_size: usize,
    /// Bytes of new entries since the consumer last took the data (DTrace's kernel
    /// aggregation buffer, which `aggsize` bounds, is emptied at every snapshot).
    window_used: usize,
    scratch: Vec<u8>,
}

impl AggregationTable {
    pub fn new(defs: &[crate::ir::Aggregation]) -> Self {
        AggregationTable {
            aggs: defs
                .iter()
                .map(|d| Agg::new(&d.name, funcs::sanitize(d.func)))
                .collect(),
            limit: None,
            string_key_size: 0,
            window_used: 0,
            scratch: Vec::new(),
        }
    }

    /// Limit the memory the aggregations may use (dtrace's `aggsize`); updates that would
    /// add a key beyond it fail with [`AggError::Drop`].
    pub fn set_aggsize(&mut self, bytes: Option<usize>) {
        self.limit = bytes;
    }

    /// The consumer took a snapshot: the aggregation buffer starts empty again.
    pub fn new_window(&mut self) {
        self.window_used = 0;
    }

    /// What a string key component costs against `aggsize` (DTrace records string keys at
    /// `strsize` bytes).
    pub fn set_string_key_size(&mut self, bytes: usize) {
        self.string_key_size = bytes;
    }

    /// Approximate bytes held by all aggregations.
    pub fn memory_usage(&self) -> usize {
        self.aggs.iter().map(Agg::bytes).sum()
    }

    /// Number of aggregations.
    pub fn count(&self) -> usize {
        self.aggs.len()
    }

    /// The aggregation's name as written (`@calls`, or `@` alone).
    pub fn name(&self, agg: u32) -> Option<&str> {
        self.aggs.get(agg as usize).map(|a| a.name.as_str())
    }

    /// Number of keys of an aggregation.
    pub fn entries(&self, agg: u32) -> usize {
        self.aggs.get(agg as usize).map_or(0, Agg::len)
    }

    /// `@agg[key] = func(value, params...)`: `args` are the evaluated D arguments (value first,
    /// then e.g. quantize's increment; for lquantize/llquantize all their arguments, the
    /// increment being the last).
    pub fn update(&mut self, agg: u32, key: &[Datum], args: &[i64]) -> Result<(), AggError> {
        // keys of integers only (`@[pid]`, `@[arg1, cpu]`) are encoded on the stack
        if let Some(k) = key::encode_small_ints(key) {
            return self.update_ints(agg, &k, args);
        }
        let mut k = std::mem::take(&mut self.scratch);
        k.clear();
        key::encode(key, &mut k);
        let strings = key.iter().filter(|c| matches!(c, Datum::Str(_))).count();
        let charge = k.len() + strings * self.string_key_size;
        let r = self.update_encoded(agg, &k, charge, args);
        self.scratch = k;
        r
    }

    /// [`update`](Self::update) for a key of integers only, already encoded.
    #[inline]
    pub fn update_ints(&mut self, agg: u32, key: &IntKey, args: &[i64]) -> Result<(), AggError> {
        let k = key.bytes();
        self.update_encoded(agg, k, k.len(), args)
    }

    #[inline]
    fn update_encoded(
        &mut self,
        agg: u32,
        k: &[u8],
        charge: usize,
        args: &[i64],
    ) -> Result<(), AggError> {
        let used = self.window_used;
        let a = self
            .aggs
            .get_mut(agg as usize)
            .ok_or(AggError::NoSuchAgg(agg))?;
        let h = hash_key(k);
        let i = match a.find(k, h) {
            Some(i) => i,
            None => {
                if let Some(limit) = self.limit {
                    if used + charge + a.stride * 8 + 32 > limit {
                        return Err(AggError::Drop);
                    }
                    self.window_used += charge + a.stride * 8 + 32;
                }
                a.insert(k, h).ok_or(AggError::Drop)?
            }
        };
        let s = a.stride;
        let func = a.func;
        func.apply(&mut a.data[i * s..(i + 1) * s], args);
        Ok(())
    }

    /// Folds every entry of `other` (a table of the same program, e.g. the one an engine over
    /// another trace filled) into this one, as dtrace folds per-CPU aggregation buffers: a key
    /// new here is added with `other`'s value, a key present on both sides combines (see
    /// [`funcs::Fold::merge`]). Aggregations are matched by position; a pair whose functions differ
    /// (not the same program) is skipped. `aggsize` does not apply: the entries exist already.
    pub fn merge_from(&mut self, other: &AggregationTable) {
        for (a, b) in self.aggs.iter_mut().zip(&other.aggs) {
            if a.func != b.func {
                continue;
            }
            for i in 0..b.len() {
                let k = b.key(i);
                let h = hash_key(k);
                let j = match a.find(k, h) {
                    Some(j) => j,
                    None => match a.insert(k, h) {
                        Some(j) => j,
                        None => continue,
                    },
                };
                let s = a.stride;
                let func = a.func;
                func.merge(&mut a.data[j * s..(j + 1) * s], b.data(i));
            }
        }
    }

    /// Data words per entry of an aggregation (1 for count, 2 for avg, the buckets of a
    /// quantization...): the layout [`AggregationTable::merge_words`] takes.
    pub fn stride(&self, agg: u32) -> usize {
        self.aggs.get(agg as usize).map_or(0, |a| a.stride)
    }

    /// Folds one entry's data words (a saved result read back) into the entry of `key`, as
    /// [`AggregationTable::merge_from`] folds a whole table. `words` has [`Self::stride`]
    /// words in the function's layout.
    pub fn merge_words(&mut self, agg: u32, key: &[Datum], words: &[i64]) -> Result<(), AggError> {
        let a = self
            .aggs
            .get_mut(agg as usize)
            .ok_or(AggError::NoSuchAgg(agg))?;
        if words.len() != a.stride {
            return Err(AggError::NoSuchAgg(agg));
        }
        let mut k = Vec::new();
        key::encode(key, &mut k);
        let h = hash_key(&k);
        let i = match a.find(&k, h) {
            Some(i) => i,
            None => a.insert(&k, h).ok_or(AggError::Drop)?,
        };
        let s = a.stride;
        let func = a.func;
        func.merge(&mut a.data[i * s..(i + 1) * s], words);
        Ok(())
    }

    /// clear(): values to zero, keys kept.
    pub fn clear(&mut self, agg: u32) {
        if let Some(a) = self.aggs.get_mut(agg as usize) {
            a.data.fill(0);
        }
    }

    /// trunc(@a) / trunc(@a, n): keep the `n` entries with the highest values (negative: the
    /// lowest), none when `n` is absent.
    /// Over the entries as the consumer sees them: keys merged by symbol first (dtrace
    /// truncates its consumer-side aggregation, whose `mod()`/`sym()` keys are already
    /// merged; see [`Agg::merged_by_symbol`]).
    pub fn trunc(&mut self, agg: u32, n: Option<i64>, syms: &dyn SymbolResolver) {
        let Some(a) = self.aggs.get_mut(agg as usize) else {
            return;
        };
        if let Some(merged) = a.merged_by_symbol(syms) {
            *a = merged;
        }
        let n = n.unwrap_or(0);
        let order = sort::value_order(a, n >= 0, 256);
        let keepn = usize::try_from(n.unsigned_abs()).unwrap_or(usize::MAX);
        if keepn >= a.len() {
            return;
        }
        let mut keep = vec![false; a.len()];
        for &i in order.iter().take(keepn) {
            keep[i] = true;
        }
        a.retain(&keep);
    }

    /// normalize(@a, n): the existing entries print divided by `n`.
    pub fn normalize(&mut self, agg: u32, n: i64) {
        if let Some(a) = self.aggs.get_mut(agg as usize) {
            a.normal = if n == 0 { 1 } else { n as u64 };
            a.normal_upto = a.len();
        }
    }

    /// denormalize(@a).
    pub fn denormalize(&mut self, agg: u32) {
        if let Some(a) = self.aggs.get_mut(agg as usize) {
            a.normal = 1;
            a.normal_upto = 0;
        }
    }

    /// No keys at all.
    pub fn is_empty(&self, agg: u32) -> bool {
        self.aggs.get(agg as usize).is_none_or(|a| a.len() == 0)
    }

    /// Whether a printa() has printed this aggregation (then the end-of-run printing skips it).
    pub fn is_printed(&self, agg: u32) -> bool {
        self.aggs.get(agg as usize).is_some_and(|a| a.printed.get())
    }

    /// Marks an aggregation printed, as a printa() of it does (the structured output prints
    /// it without going through the text printers).
    pub fn mark_printed(&self, agg: u32) {
        if let Some(a) = self.aggs.get(agg as usize) {
            if a.len() > 0 {
                a.printed.set(true);
            }
        }
    }

    /// The entries of an aggregation, in the order they were created.
    pub fn snapshot(&self, agg: u32) -> Vec<(Vec<Datum>, AggValue)> {
        self.aggs
            .get(agg as usize)
            .map_or_else(Vec::new, Agg::entries)
    }

    /// [`Self::snapshot`], with keys merged by symbol as printa() merges them (see
    /// [`Agg::merged_by_symbol`]).
    pub fn snapshot_named(
        &self,
        agg: u32,
        syms: &dyn SymbolResolver,
    ) -> Vec<(Vec<Datum>, AggValue)> {
        let Some(a) = self.aggs.get(agg as usize) else {
            return Vec::new();
        };
        let merged = a.merged_by_symbol(syms);
        merged.as_ref().unwrap_or(a).entries()
    }

    /// The entries in the order printa() would print them, keys merged by symbol as printa()
    /// merges them (see [`Agg::merged_by_symbol`]).
    pub fn sorted_snapshot(
        &self,
        agg: u32,
        opts: &SortOptions,
        syms: &dyn SymbolResolver,
    ) -> Vec<(Vec<Datum>, AggValue)> {
        let Some(a) = self.aggs.get(agg as usize) else {
            return Vec::new();
        };
        let merged = a.merged_by_symbol(syms);
        let a = merged.as_ref().unwrap_or(a);
        sort::sorted_entries(a, opts)
            .into_iter()
            .map(|i| {
                (
                    key::iter(a.key(i)).map(|r| r.to_datum()).collect(),
                    a.value(i),
                )
            })
            .collect()
    }

    /// The aggregations `aggs` names, each with its keys merged by symbol as dtrace's
    /// consumer merges them ([`Agg::merged_by_symbol`]). None when one is missing.
    pub(crate) fn merged<'a>(
        &'a self,
        aggs: &[u32],
        syms: &dyn SymbolResolver,
    ) -> Option<Merged<'a>> {
        let list: Vec<(&Agg, Option<Agg>)> = aggs
            .iter()
            .filter_map(|&a| self.aggs.get(a as usize))
            .map(|a| (a, a.merged_by_symbol(syms)))
            .collect();
        (!list.is_empty() && list.len() == aggs.len()).then_some(Merged(list))
    }

    /// The aggregations, in the order the program declares them.
    pub(crate) fn list(&self) -> &[Agg] {
        &self.aggs
    }
}

/// Aggregations to print, each with its by-symbol merge when it has one.
pub(crate) struct Merged<'a>(Vec<(&'a Agg, Option<Agg>)>);

impl Merged<'_> {
    /// What to print: the merged entries where there are some, else the aggregation's own.
    pub(crate) fn list(&self) -> Vec<&Agg> {
        self.0
            .iter()
            .map(|(a, m)| m.as_ref().unwrap_or(a))
            .collect()
    }

    /// Carries "printed" from the merged copies back to the aggregations (END prints only
    /// the aggregations no printa() printed).
    pub(crate) fn mark_printed(&self) {
        for (a, m) in &self.0 {
            if m.as_ref().is_some_and(|m| m.printed.get()) {
                a.printed.set(true);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
