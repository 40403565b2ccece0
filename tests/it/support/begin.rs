//! Runs a D program's BEGIN clauses once in a standalone VM, for the VM's tests.

#![allow(dead_code)]

use dtx::engine::standalone::{standalone_vm, standard_probe};
use dtx::vm::{Datum, Fault, FiringCtx, Record};

/// Compiles `src`, fires BEGIN once, and returns the faults it raised and the integers it
/// traced, in order.
pub fn run_begin(src: &str) -> (Vec<Fault>, Vec<i64>) {
    let (mut vm, _) = standalone_vm(src).unwrap_or_else(|e| panic!("{src}: {e}"));
    let begin = standard_probe("BEGIN").expect("standard probe");
    let r = vm.fire(&FiringCtx::synthetic(&begin, 1, 1, b"test"));
    let mut ints = Vec::new();
    for (_, rec) in &vm.records {
        if let Record::Data { values, .. } = rec {
            for v in values {
                if let Datum::Int { value, .. } = v {
                    ints.push(*value);
                }
            }
        }
    }
    (r.errors.iter().map(|e| e.fault).collect(), ints)
}
