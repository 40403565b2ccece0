//! Sorting aggregation entries the way libdtrace does (`dt_aggregate_qsort` and friends).
//!
//! Default order: by value ascending, ties by key; `aggsortkey` sorts by key; `aggsortrev`
//! reverses everything; `aggsortkeypos` picks the key component compared first; for printa()
//! of several aggregations (`dtrace_aggregate_walk_joined`) the rows are the union of keys,
//! sorted by the value of the aggregation at `aggsortpos` (then the next ones), ties by key.

use std::cmp::Ordering;

use super::funcs::cmp_values;
use super::key;
use super::Agg;

/// Printing and sorting options (dtrace's `agg*` options and a few related ones).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SortOptions {
    pub aggsortkey: bool,
    pub aggsortrev: bool,
    pub aggsortpos: Option<usize>,
    pub aggsortkeypos: Option<usize>,
    pub aggpack: bool,
    pub agghist: bool,
    pub aggzoom: bool,
    /// The `encoding` option.
    pub encoding: Encoding,
    /// `stackindent` (default 14).
    pub stackindent: usize,
    /// `strsize` (default 256): the record size of string keys, which shows in how they sort
    /// and how unprintable ones are dumped.
    pub strsize: usize,
    /// `rawbytes`: dump string keys as bytes.
    pub rawbytes: bool,
}

/// The `encoding` option.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Encoding {
    /// Not set: plain `@` bars; packed graphs in UTF-8 unless `TERM` is a known dumb terminal.
    #[default]
    Default,
    Ascii,
    Utf8,
}

impl Default for SortOptions {
    fn default() -> Self {
        SortOptions {
            aggsortkey: false,
            aggsortrev: false,
            aggsortpos: None,
            aggsortkeypos: None,
            aggpack: false,
            agghist: false,
            aggzoom: false,
            encoding: Encoding::Default,
            stackindent: 14,
            strsize: 256,
            rawbytes: false,
        }
    }
}

/// The entries of one aggregation in printing order.
pub(crate) fn sorted_entries(agg: &Agg, opts: &SortOptions) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..agg.len()).collect();
    let keypos = opts.aggsortkeypos.unwrap_or(0);
    let cmp = |&a: &usize, &b: &usize| {
        let kc = || key::cmp_keys(agg.key(a), agg.key(b), keypos, opts.strsize);
        let o = if opts.aggsortkey {
            kc()
        } else {
            cmp_values(&agg.func, agg.data(a), agg.data(b)).then_with(kc)
        };
        if opts.aggsortrev {
            o.reverse()
        } else {
            o
        }
    };
    idx.sort_by(cmp);
    idx
}

/// Entries in value order (descending with `rev`), ties by key, as trunc() walks them:
/// explicit comparators ignore the sorting options.
pub(crate) fn value_order(agg: &Agg, rev: bool, strsize: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..agg.len()).collect();
    idx.sort_by(|&a, &b| {
        let o = cmp_values(&agg.func, agg.data(a), agg.data(b))
            .then_with(|| key::cmp_keys(agg.key(a), agg.key(b), 0, strsize));
        if rev {
            o.reverse()
        } else {
            o
        }
    });
    idx
}

/// One row of a joined printa(): the representative key and, per listed aggregation (in the
/// caller's order), the entry holding that key, if any.
pub(crate) struct Row<'a> {
    pub key: &'a [u8],
    pub entries: Vec<Option<usize>>,
}

/// `dtrace_aggregate_walk_joined`: the union of the keys of `aggs`, sorted.
pub(crate) fn joined<'a>(aggs: &[&'a Agg], opts: &SortOptions) -> Vec<Row<'a>> {
    let n = aggs.len();
    let mut rows: Vec<Row<'a>> = Vec::new();
    // Entry lookup by key across aggregations: the first listed aggregation holding a key
    // provides its representative bytes.
    let mut seen: std::collections::HashMap<&'a [u8], usize> = std::collections::HashMap::new();
    for (j, a) in aggs.iter().enumerate() {
        // The same aggregation listed twice shares its rows.
        if aggs[..j].iter().any(|b| std::ptr::eq(*a, *b)) {
            continue;
        }
        for e in 0..a.len() {
            let k = a.key(e);
            let r = *seen.entry(k).or_insert_with(|| {
                rows.push(Row {
                    key: k,
                    entries: vec![None; n],
                });
                rows.len() - 1
            });
            for (jj, b) in aggs.iter().enumerate() {
                if std::ptr::eq(*a, *b) {
                    rows[r].entries[jj] = Some(e);
                }
            }
        }
    }
    let sortpos = match opts.aggsortpos {
        Some(p) if p < n => p,
        _ => 0,
    };
    let keypos = opts.aggsortkeypos.unwrap_or(0);
    let mut order: Vec<usize> = (0..rows.len()).collect();
    let zero_cache: Vec<Vec<i64>> = aggs.iter().map(|a| a.zero_data()).collect();
    let value = |r: usize, j: usize| -> &[i64] {
        match rows[r].entries[j] {
            Some(e) => aggs[j].data(e),
            None => &zero_cache[j],
        }
    };
    order.sort_by(|&a, &b| {
        let kc = || key::cmp_keys(rows[a].key, rows[b].key, keypos, opts.strsize);
        let mut o = Ordering::Equal;
        if opts.aggsortkey {
            o = kc();
        }
        if o == Ordering::Equal {
            for i in 0..n {
                let j = (i + sortpos) % n;
                o = cmp_values(&aggs[j].func, value(a, j), value(b, j));
                if o != Ordering::Equal {
                    break;
                }
            }
            if o == Ordering::Equal && !opts.aggsortkey {
                o = kc();
            }
        }
        if opts.aggsortrev {
            o.reverse()
        } else {
            o
        }
    });
    let mut slots: Vec<Option<Row<'a>>> = rows.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}
