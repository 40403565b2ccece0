//! The aggregations' own behaviour: the `aggsize` limit and the merge of tables. Their
//! printing is tested with `output::printa`, which builds its tables with the helpers here.

use super::*;
use crate::ir::{AggFunc, Aggregation};

pub(crate) fn defs(list: &[(&str, AggFunc)]) -> Vec<Aggregation> {
    list.iter()
        .map(|(n, f)| Aggregation {
            name: n.to_string(),
            func: *f,
            keys: Vec::new(),
        })
        .collect()
}

pub(crate) fn int(v: i64) -> Datum {
    Datum::Int {
        value: v,
        size: 4,
        signed: true,
    }
}

pub(crate) fn s(v: &str) -> Datum {
    Datum::Str(v.as_bytes().to_vec())
}

pub(crate) fn lq(base: i32, step: u16, limit: i32) -> AggFunc {
    AggFunc::Lquantize {
        base,
        step,
        levels: ((i64::from(limit) - i64::from(base)) / i64::from(step)) as u16,
    }
}

#[test]
fn aggsize_drops() {
    let mut t = AggregationTable::new(&defs(&[("", AggFunc::Count)]));
    t.set_aggsize(Some(4096));
    let mut drops = 0;
    for i in 0..10_000 {
        if t.update(0, &[int(i)], &[]) == Err(AggError::Drop) {
            drops += 1;
        }
    }
    assert!(drops > 0 && t.memory_usage() <= 4096 * 2);
}

/// Folding one table into another gives what one table fed with both sets of updates holds,
/// for every aggregating function (dtrace's per-CPU merge).
#[test]
fn merge_equals_one_table_of_both_halves() {
    let funcs = [
        ("c", AggFunc::Count),
        ("s", AggFunc::Sum),
        ("a", AggFunc::Avg),
        ("mn", AggFunc::Min),
        ("mx", AggFunc::Max),
        ("sd", AggFunc::Stddev),
        ("q", AggFunc::Quantize),
        ("l", lq(0, 10, 100)),
        (
            "ll",
            AggFunc::Llquantize {
                factor: 10,
                low: 0,
                high: 3,
                nsteps: 10,
            },
        ),
    ];
    let d = defs(&funcs);
    let (mut left, mut right, mut both) = (
        AggregationTable::new(&d),
        AggregationTable::new(&d),
        AggregationTable::new(&d),
    );
    let first: Vec<i64> = (0..50).map(|i| i * 37 % 211 - 40).collect();
    let second: Vec<i64> = (0..70).map(|i| i * 53 % 997 - 3).collect();
    for (table, values) in [(&mut left, &first), (&mut right, &second)] {
        for (n, &v) in values.iter().enumerate() {
            let key = [s(if n % 3 == 0 { "x" } else { "y" }), int(n as i64 % 5)];
            for agg in 0..funcs.len() as u32 {
                table.update(agg, &key, &[v]).unwrap();
                both.update(agg, &key, &[v]).unwrap();
            }
        }
    }
    // a key only the right side has
    right.update(0, &[s("z"), int(9)], &[1]).unwrap();
    both.update(0, &[s("z"), int(9)], &[1]).unwrap();
    left.merge_from(&right);
    let sorted = |t: &AggregationTable, agg: u32| {
        let mut v: Vec<String> = t.snapshot(agg).iter().map(|e| format!("{e:?}")).collect();
        v.sort();
        v
    };
    for agg in 0..funcs.len() as u32 {
        assert_eq!(
            sorted(&left, agg),
            sorted(&both, agg),
            "{}",
            funcs[agg as usize].0
        );
    }
    // and twice one table is every count and sum doubled, min and max the same
    let mut twice = AggregationTable::new(&d);
    twice.merge_from(&both);
    twice.merge_from(&both);
    for (k, v) in twice.snapshot(0) {
        let one = both
            .snapshot(0)
            .into_iter()
            .find(|(k1, _)| *k1 == k)
            .unwrap()
            .1;
        assert_eq!(v.scalar(), 2 * one.scalar());
    }
    assert_eq!(sorted(&twice, 3), sorted(&both, 3));
    assert_eq!(sorted(&twice, 4), sorted(&both, 4));
}
