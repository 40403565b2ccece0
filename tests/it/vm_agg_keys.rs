//! Aggregation keys built by the VM's integer-key path match what the general path records:
//! sizes and signedness of each component, symbol keys kept as symbols, string keys as strings,
//! and aggregating arguments (sum, lquantize's parameters) in order.

use dtx::agg::AggValue;
use dtx::engine::standalone::{standalone_vm, standard_probe};
use dtx::ir::value::Datum;
use dtx::vm::{FiringCtx, Vm};

fn fire_all(vm: &mut Vm, args: &[[u64; 3]]) {
    let begin = standard_probe("BEGIN").expect("standard probe");
    for (i, a) in args.iter().enumerate() {
        let mut cx = FiringCtx::synthetic(&begin, i as u64, i as u64, b"test");
        cx.args[..3].copy_from_slice(a);
        let r = vm.fire(&cx);
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        vm.records.clear();
    }
}

fn int(value: i64, size: u8, signed: bool) -> Datum {
    Datum::Int {
        value,
        size,
        signed,
    }
}

#[test]
fn integer_keys_keep_their_width_and_sign() {
    let (mut vm, _) = standalone_vm(
        "#pragma D option quiet\n\
         BEGIN { @s[arg1, (uint8_t)arg2, (short)arg2] = sum(arg0); @c[arg1 > 1] = count(); }",
    )
    .expect("compiles");
    fire_all(&mut vm, &[[5, 1, 0x1ff], [7, 1, 0x2ff], [9, 2, 0x1ff]]);
    let s = vm.aggs.snapshot(0);
    assert_eq!(
        s,
        vec![
            (
                vec![int(1, 8, true), int(0xff, 1, false), int(0x1ff, 2, true)],
                AggValue::Sum(5)
            ),
            (
                vec![int(1, 8, true), int(0xff, 1, false), int(0x2ff, 2, true)],
                AggValue::Sum(7)
            ),
            (
                vec![int(2, 8, true), int(0xff, 1, false), int(0x1ff, 2, true)],
                AggValue::Sum(9)
            ),
        ]
    );
    let c = vm.aggs.snapshot(1);
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].1, AggValue::Count(2));
    assert_eq!(c[1].1, AggValue::Count(1));
}

#[test]
fn symbol_and_string_keys_take_the_general_path() {
    let (mut vm, _) = standalone_vm(
        "#pragma D option quiet\n\
         BEGIN { @a[sym(arg0), arg1] = count(); @b[probename, arg1] = lquantize(arg2, 0, 10, 2); }",
    )
    .expect("compiles");
    fire_all(&mut vm, &[[0x1000, 3, 4], [0x1000, 3, 5], [0x2000, 4, 100]]);
    let a = vm.aggs.snapshot(0);
    assert_eq!(a.len(), 2);
    assert_eq!(a[0].0, vec![Datum::Sym(0x1000), int(3, 8, true)]);
    assert_eq!(a[0].1, AggValue::Count(2));
    let b = vm.aggs.snapshot(1);
    assert_eq!(b.len(), 2);
    assert_eq!(b[0].0, vec![Datum::Str(b"BEGIN".to_vec()), int(3, 8, true)]);
    match &b[0].1 {
        AggValue::Lquantize { buckets, .. } => {
            // 4 and 5 both fall in the [4, 6) bucket (index 1 + 4 / 2)
            assert_eq!(buckets[3], 2, "{buckets:?}");
        }
        other => panic!("not an lquantize: {other:?}"),
    }
}
