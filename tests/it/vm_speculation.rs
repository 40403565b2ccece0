//! `speculate()` on a speculation that does not exist (0, what a failed `speculation()`
//! returns) drops the rest of its clause, as dtrace's action loop stops on `CPU_DTRACE_DROP`
//! (illumos `speculation/tst.SpeculationWithZero.d`).

use crate::support::begin;

/// Fires BEGIN once; returns the integers traced and the number of faults.
fn begin(src: &str) -> (Vec<i64>, usize) {
    let (faults, ints) = begin::run_begin(src);
    (ints, faults.len())
}

#[test]
fn speculate_zero_drops_the_rest_of_the_clause() {
    let (ints, faults) = begin(
        "BEGIN { flag = 0; s = speculation(); s = speculation(); }\n\
         BEGIN { speculate(s); flag++; }\n\
         BEGIN { trace(flag); }",
    );
    assert_eq!(faults, 0);
    assert_eq!(ints, vec![0]);
}

#[test]
fn speculate_on_a_live_speculation_runs_the_clause() {
    let (ints, faults) = begin(
        "BEGIN { flag = 0; s = speculation(); }\n\
         BEGIN { speculate(s); flag++; }\n\
         BEGIN { trace(flag); }",
    );
    assert_eq!(faults, 0);
    assert_eq!(ints, vec![1]);
}
