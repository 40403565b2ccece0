//! Reproductions of dtrace test-suite outputs from the values the D programs aggregate.
//!
//! Expected texts are read from the suite's `common/` (CRLF normalised) when `DTX_SUITE` names
//! it (see `crate::test_suite`); a few are also spelled out here.

use super::*;
use crate::agg::tests::{defs, int, lq, s};
use crate::agg::{
    AggError, AggValue, AggregationTable, Encoding, NoSymbols, SortOptions, SymbolResolver,
};
use crate::ir::value::Datum;
use crate::ir::{AggFunc, Aggregation};
use crate::output::printf::parse;

/// The expected output of the suite's test `name` (`aggs/tst.quantize.d`), when the suite is
/// there; a test it names that has no `.out` is a mistake here.
fn expected(name: &str) -> Option<String> {
    let path = crate::test_suite::common(&format!("{name}.out"))?;
    let s = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Some(String::from_utf8_lossy(&s).replace("\r\n", "\n"))
}

fn check(name: &str, got: &[u8]) {
    let got = String::from_utf8_lossy(got).into_owned();
    if let Some(want) = expected(name) {
        assert_eq!(got, want, "{name}");
    }
}

fn check_tail(name: &str, got: &[u8]) {
    let got = String::from_utf8_lossy(got).into_owned();
    if let Some(want) = expected(name) {
        assert!(
            want.ends_with(&got),
            "{name}:\n--- want\n{want}\n--- got\n{got}"
        );
    }
}

fn sized(v: i64, size: u8) -> Datum {
    Datum::Int {
        value: v,
        size,
        signed: true,
    }
}

/// The end of a run: dtrace's newline, then the unprinted aggregations.
fn end(t: &AggregationTable, opts: &SortOptions, out: &mut Vec<u8>) {
    out.push(b'\n');
    print_unprinted(t, opts, &NoSymbols, out);
}

#[test]
fn quantize_of_keys() {
    let mut t = AggregationTable::new(&defs(&[("a", AggFunc::Quantize)]));
    for i in (0..1000).step_by(100) {
        t.update(0, &[int(i)], &[i]).unwrap();
    }
    let mut out = Vec::new();
    end(&t, &SortOptions::default(), &mut out);
    assert!(out.starts_with(
        b"\n        0\n           value  ------------- Distribution ------------- count    \n\
          \x20             -1 |                                         0        \n"
    ));
    check("aggs/tst.quantize.d", &out);
}

#[test]
fn negative_quantize_counts() {
    let mut t = AggregationTable::new(&defs(&[("", AggFunc::Quantize)]));
    let mut q = |k: &str, v: i64, incr: Option<i64>| {
        let args: Vec<i64> = match incr {
            Some(i) => vec![v, i],
            None => vec![v],
        };
        t.update(0, &[s(k)], &args).unwrap();
    };
    q("j-church", 1, Some(100));
    q("j-church", 1, Some(-99));
    q("j-church", 1, Some(-1));
    q("k-ingleside", 1, Some(-123));
    q("l-taraval", 0, Some(-123));
    q("l-taraval", -1, Some(-123));
    q("l-taraval", 1, Some(123));
    q("l-taraval", 1, Some(123));
    q("m-oceanview", 1, Some(i64::MAX));
    q("m-oceanview", 1, None);
    q("m-oceanview", 2, Some(i64::MAX));
    q("m-oceanview", 8, Some(400000));
    q("n-judah", 1, Some(123));
    q("n-judah", 2, Some(123));
    q("n-judah", 2, Some(123));
    q("n-judah", 2, None);
    for (name, top) in [("f-market", i64::MAX), ("s-castro", i64::MAX - 3)] {
        let (mut i, mut v) = (1, top);
        for _ in 0..4 {
            q(name, i, Some(v));
            i <<= 1;
            v >>= 1;
        }
    }
    let mut out = Vec::new();
    end(&t, &SortOptions::default(), &mut out);
    check("aggs/tst.negquant.d", &out);
}

#[test]
fn lquantize_rounding() {
    let mut t = AggregationTable::new(&defs(&[("", lq(0, 1, 4))]));
    for (v, n) in [(0, 2), (1, 6), (2, 19)] {
        for _ in 0..n {
            t.update(0, &[], &[v, 0, 4]).unwrap();
        }
    }
    let mut out = Vec::new();
    end(&t, &SortOptions::default(), &mut out);
    let want = "\n\n           value  ------------- Distribution ------------- count    \n\
        \x20            < 0 |                                         0        \n\
        \x20              0 |@@@                                      2        \n\
        \x20              1 |@@@@@@@@@                                6        \n\
        \x20              2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@             19       \n\
        \x20              3 |                                         0        \n\n";
    assert_eq!(String::from_utf8_lossy(&out), want);
    check("aggs/tst.lquantround.d", &out);
}

#[test]
fn avg_and_stddev() {
    let mut t = AggregationTable::new(&defs(&[("", AggFunc::Avg)]));
    t.update(0, &[], &[0]).unwrap();
    t.update(0, &[], &[-900]).unwrap();
    let mut out = Vec::new();
    end(&t, &SortOptions::default(), &mut out);
    assert_eq!(out, b"\n             -450\n");
    check("aggs/tst.avg_neg.d", &out);

    let mut t = AggregationTable::new(&defs(&[("a", AggFunc::Stddev), ("b", AggFunc::Stddev)]));
    for i in 0..10 {
        t.update(0, &[], &[5_000_000_000 + 100 * i]).unwrap();
        t.update(1, &[], &[-5_000_000_000 - 100 * i]).unwrap();
    }
    let mut out = Vec::new();
    let opts = SortOptions::default();
    print_formatted(
        &t,
        &parse("%@d\n").unwrap(),
        &[0],
        &opts,
        &NoSymbols,
        &mut out,
    )
    .unwrap();
    end(&t, &opts, &mut out);
    assert_eq!(out, b"287\n\n              287\n");
    check("aggs/tst.stddev.d", &out);
}

#[test]
fn signed_and_sized_keys() {
    let d = defs(&[
        ("i8", AggFunc::Sum),
        ("i16", AggFunc::Sum),
        ("i32", AggFunc::Sum),
        ("i64", AggFunc::Sum),
    ]);
    let mut t = AggregationTable::new(&d);
    for (agg, size) in [(0u32, 1u8), (1, 2), (2, 4), (3, 8)] {
        for v in -2..=2 {
            t.update(agg, &[sized(v, size)], &[v]).unwrap();
        }
    }
    let opts = SortOptions {
        aggsortkey: true,
        ..SortOptions::default()
    };
    let mut out = Vec::new();
    end(&t, &opts, &mut out);
    check_tail("aggs/tst.signedkeys.d", &out);

    let mut t = AggregationTable::new(&defs(&[("", AggFunc::Sum)]));
    t.update(0, &[sized(1, 4), int(0)], &[10]).unwrap();
    t.update(0, &[sized(2, 8), int(0)], &[20]).unwrap();
    t.update(0, &[sized(3, 4), int(0)], &[30]).unwrap();
    t.update(0, &[sized(4, 8), int(0)], &[40]).unwrap();
    let mut out = Vec::new();
    print_default(&t, 0, &SortOptions::default(), &NoSymbols, &mut out);
    end(&t, &SortOptions::default(), &mut out);
    check("aggs/tst.sizedkeys.d", &out);

    let mut t = AggregationTable::new(&defs(&[("", AggFunc::Sum)]));
    for (a, b) in [(1, 3), (2, 2), (3, 1)] {
        t.update(0, &[int(a), int(b)], &[0]).unwrap();
    }
    let opts = SortOptions {
        aggsortkeypos: Some(1),
        ..SortOptions::default()
    };
    let mut out = Vec::new();
    end(&t, &opts, &mut out);
    check("aggs/tst.valsortkeypos.d", &out);
}

#[test]
fn trunc_and_normalize() {
    for (n, name) in [(10, "aggs/tst.trunc.d"), (-10, "aggs/tst.negtrunc.d")] {
        let mut t = AggregationTable::new(&defs(&[("", AggFunc::Sum)]));
        for i in 0..100 {
            t.update(0, &[int(i)], &[i]).unwrap();
        }
        t.trunc(0, Some(n), &NoSymbols);
        assert_eq!(t.entries(0), 10);
        let mut out = Vec::new();
        end(&t, &SortOptions::default(), &mut out);
        check(name, &out);
    }
    let mut t = AggregationTable::new(&defs(&[("func", AggFunc::Sum)]));
    for i in 0..20 {
        t.update(0, &[int(i % 5)], &[i * 100]).unwrap();
    }
    t.normalize(0, 5);
    let mut out = b"normalized data:\n".to_vec();
    end(&t, &SortOptions::default(), &mut out);
    check("aggs/tst.normalize.d", &out);
    t.trunc(0, None, &NoSymbols);
    assert!(t.is_empty(0));
}

#[test]
fn multiaggs_sort_and_sortpos() {
    let d = defs(&[
        ("a", AggFunc::Sum),
        ("b", AggFunc::Sum),
        ("c", AggFunc::Sum),
        ("d", AggFunc::Sum),
    ]);
    let mut t = AggregationTable::new(&d);
    for i in 1..=100 {
        t.update(0, &[int(i)], &[100 - i / 2]).unwrap();
        t.update(1, &[int(i)], &[100 - i / 4]).unwrap();
        t.update(2, &[int(i)], &[100 - i / 8]).unwrap();
        t.update(3, &[int(i)], &[100 - i / 16]).unwrap();
    }
    let f = parse("%10d %@10d %@10d %@10d %@10d\n").unwrap();
    let opts = SortOptions::default();
    let mut out = Vec::new();
    print_formatted(&t, &f, &[0, 1, 2, 3], &opts, &NoSymbols, &mut out).unwrap();
    print_formatted(&t, &f, &[3, 2, 1, 0], &opts, &NoSymbols, &mut out).unwrap();
    end(&t, &opts, &mut out);
    check("multiaggs/tst.sort.d", &out);

    let mut t = AggregationTable::new(&d);
    for i in 1..=100 {
        t.update(0, &[int(i)], &[i]).unwrap();
        t.update(1, &[int(i)], &[(25 + i) % 100]).unwrap();
        t.update(2, &[int(i)], &[(50 + i) % 100]).unwrap();
        t.update(3, &[int(i)], &[(75 + i) % 100]).unwrap();
    }
    let f = parse("%9d %@9d %@9d %@9d %@9d %@9d %@9d\n").unwrap();
    let mut out = Vec::new();
    for j in 0..10 {
        out.extend_from_slice(format!("Sorted at position {j}:\n").as_bytes());
        let opts = SortOptions {
            aggsortpos: Some(j),
            ..SortOptions::default()
        };
        print_formatted(&t, &f, &[0, 1, 2, 0, 3, 0], &opts, &NoSymbols, &mut out).unwrap();
        out.push(b'\n');
    }
    end(&t, &SortOptions::default(), &mut out);
    check("multiaggs/tst.sortpos.d", &out);
}

#[test]
fn multiaggs_zero() {
    let d = defs(&[
        ("bop", AggFunc::Quantize),
        ("baz", lq(-10, 1, 10)),
        ("foo", AggFunc::Sum),
        ("bar", AggFunc::Sum),
    ]);
    let mut t = AggregationTable::new(&d);
    t.update(2, &[int(123)], &[123]).unwrap();
    t.update(3, &[int(456)], &[456]).unwrap();
    t.update(2, &[int(789)], &[789]).unwrap();
    t.update(3, &[int(789)], &[789]).unwrap();
    let opts = SortOptions::default();
    let mut out = Vec::new();
    let p = |s: &str| parse(s).unwrap();
    print_formatted(
        &t,
        &p("%10d %@10d %@10d\n"),
        &[2, 3],
        &opts,
        &NoSymbols,
        &mut out,
    )
    .unwrap();
    print_formatted(
        &t,
        &p("%10d %@10d %@10d %@10d\n"),
        &[2, 3, 0],
        &opts,
        &NoSymbols,
        &mut out,
    )
    .unwrap();
    print_formatted(
        &t,
        &p("%10d %@10d %@10d %@10d %@10d\n"),
        &[2, 3, 0, 1],
        &opts,
        &NoSymbols,
        &mut out,
    )
    .unwrap();
    end(&t, &opts, &mut out);
    check("multiaggs/tst.zero.d", &out);

    let mut t = AggregationTable::new(&d[..2]);
    let mut out = Vec::new();
    print_default(&t, 0, &opts, &NoSymbols, &mut out);
    print_default(&t, 1, &opts, &NoSymbols, &mut out);
    print_formatted(
        &t,
        &p("%@10d %@10d\n"),
        &[0, 1],
        &opts,
        &NoSymbols,
        &mut out,
    )
    .unwrap();
    end(&t, &opts, &mut out);
    assert_eq!(out, b"\n\n\n");
    check("multiaggs/tst.zero3.d", &out);
    t.clear(0);
}

#[test]
fn printa_formats() {
    let d = defs(&[
        ("a", AggFunc::Avg),
        ("b", AggFunc::Count),
        ("c", lq(1, 1, 10)),
        ("d", AggFunc::Max),
        ("e", AggFunc::Min),
        ("f", AggFunc::Sum),
        ("g", AggFunc::Quantize),
        ("h", AggFunc::Stddev),
    ]);
    let mut t = AggregationTable::new(&d);
    for a in 0..8 {
        t.update(a, &[], &[1, 1, 10]).unwrap();
    }
    let opts = SortOptions::default();
    let mut out = Vec::new();
    for (a, conv) in ["u", "u", "d", "u", "u", "u", "d", "d"].iter().enumerate() {
        let name = d[a].name.clone();
        let f = parse(&format!("@{name} = %@{conv}\n")).unwrap();
        print_formatted(&t, &f, &[a as u32], &opts, &NoSymbols, &mut out).unwrap();
    }
    end(&t, &opts, &mut out);
    check("printa/tst.basics.d", &out);

    let mut t = AggregationTable::new(&defs(&[("", AggFunc::Sum)]));
    t.update(0, &[int(10), int(100)], &[1]).unwrap();
    t.update(0, &[int(-10), int(200)], &[2]).unwrap();
    let mut out = Vec::new();
    print_formatted(
        &t,
        &parse("-->%-*d<--\n").unwrap(),
        &[0],
        &opts,
        &NoSymbols,
        &mut out,
    )
    .unwrap();
    print_formatted(
        &t,
        &parse("-->%*d<--\n").unwrap(),
        &[0],
        &opts,
        &NoSymbols,
        &mut out,
    )
    .unwrap();
    end(&t, &opts, &mut out);
    check("printa/tst.dynwidth.d", &out);

    let mut t = AggregationTable::new(&defs(&[("a", AggFunc::Count)]));
    t.update(0, &[int(1), int(2), int(3), int(4), int(5)], &[])
        .unwrap();
    let mut out = b"\n".to_vec();
    for f in [
        "%@u: -\n",
        "%@u: %d\n",
        "%@u: %d %d\n",
        "%@u: %d %d %d\n",
        "%@u: %d %d %d %d\n",
        "%@u: %d %d %d %d %d\n",
    ] {
        print_formatted(&t, &parse(f).unwrap(), &[0], &opts, &NoSymbols, &mut out).unwrap();
    }
    end(&t, &opts, &mut out);
    check("printa/tst.tuple.d", &out);
    // More conversions than keys: dtrace's mismatch error.
    let mut o = Vec::new();
    let e = print_formatted(
        &t,
        &parse("%d %d %d %d %d %d\n").unwrap(),
        &[0],
        &opts,
        &NoSymbols,
        &mut o,
    )
    .unwrap_err();
    assert_eq!(e.tag, "EDT_DMISMATCH");

    let mut t = AggregationTable::new(&defs(&[("a", AggFunc::Count)]));
    t.update(0, &[], &[]).unwrap();
    let mut out = Vec::new();
    print_formatted(
        &t,
        &parse("%@u %@u %@u %@u %@u %@u %@u\n").unwrap(),
        &[0],
        &opts,
        &NoSymbols,
        &mut out,
    )
    .unwrap();
    end(&t, &opts, &mut out);
    check("printa/tst.manyval.d", &out);
    let mut out = Vec::new();
    print_default(&t, 0, &opts, &NoSymbols, &mut out);
    end(&t, &opts, &mut out);
    assert_eq!(out, b"\n                1\n\n");
    check("printa/tst.def.d", &out);
}

fn llq(factor: u16, low: u16, high: u16, nsteps: u16) -> AggFunc {
    AggFunc::Llquantize {
        factor,
        low,
        high,
        nsteps,
    }
}

#[test]
fn llquantize_outputs() {
    let mut t = AggregationTable::new(&defs(&[("", llq(10, 0, 10, 10))]));
    for i in 1..=101 {
        t.update(0, &[], &[i, 10, 0, 10, 10]).unwrap();
    }
    let mut out = Vec::new();
    end(&t, &SortOptions::default(), &mut out);
    check("llquantize/tst.basic.d", &out);

    let mut t = AggregationTable::new(&defs(&[("", llq(10, 0, 10, 10))]));
    for i in 1..=101 {
        t.update(0, &[], &[i, 10, 0, 10, 10, 50 - i]).unwrap();
    }
    let mut out = Vec::new();
    end(&t, &SortOptions::default(), &mut out);
    check("llquantize/tst.negvalue.d", &out);

    let mut t = AggregationTable::new(&defs(&[("", llq(10, 1, 2, 20))]));
    for (k, v, incr) in [
        ("Screven", 0, 25),
        ("Katz", 1, -100),
        ("Kurian", 7, 15),
        ("Rozwat", 49, 15),
        ("Fowler", 343, 150),
    ] {
        t.update(0, &[s(k)], &[v, 10, 1, 2, 20, incr]).unwrap();
    }
    let mut out = Vec::new();
    print_default(&t, 0, &SortOptions::default(), &NoSymbols, &mut out);
    end(&t, &SortOptions::default(), &mut out);
    check("llquantize/tst.range.d", &out);
}

#[test]
fn agghist_and_zoom() {
    let d = defs(&[
        ("", AggFunc::Sum),
        ("bagnoogle", AggFunc::Sum),
        ("stalloogle", AggFunc::Sum),
    ]);
    let mut t = AggregationTable::new(&d);
    for (a, k, v) in [
        (0, "demerit", -10),
        (0, "wtf", 10),
        (0, "bot", 20),
        (1, "SOAP/XML", 1),
        (1, "XACML store", 5),
        (1, "SAML token", 6),
        (2, "breakfast", -5),
        (2, "non-diet pepsi", -20),
        (2, "parrot", -100),
    ] {
        t.update(a, &[s(k)], &[v]).unwrap();
    }
    let mut opts = SortOptions {
        agghist: true,
        ..SortOptions::default()
    };
    let mut out = Vec::new();
    for a in 0..3 {
        print_default(&t, a, &opts, &NoSymbols, &mut out);
    }
    out.extend_from_slice(b"\nzoomed:");
    opts.aggzoom = true;
    for a in 0..3 {
        print_default(&t, a, &opts, &NoSymbols, &mut out);
    }
    end(&t, &opts, &mut out);
    check("aggs/tst.agghist.d", &out);

    let mut t = AggregationTable::new(&defs(&[("", lq(0, 1, 100))]));
    for i in 1..=90 {
        t.update(0, &[], &[i, 0, 100, 1, 1000]).unwrap();
    }
    t.update(0, &[], &[100, 0, 100, 1, 2000]).unwrap();
    t.update(0, &[], &[101, 0, 100, 1, 3000]).unwrap();
    let mut opts = SortOptions {
        encoding: Encoding::Ascii,
        ..SortOptions::default()
    };
    let mut out = Vec::new();
    print_default(&t, 0, &opts, &NoSymbols, &mut out);
    opts.aggzoom = true;
    print_default(&t, 0, &opts, &NoSymbols, &mut out);
    end(&t, &opts, &mut out);
    check("aggs/tst.aggzoom.d", &out);
}

#[test]
fn aggpack_layouts() {
    let d = defs(&[
        ("x", AggFunc::Quantize),
        ("y", AggFunc::Quantize),
        ("z", AggFunc::Quantize),
        ("xx", AggFunc::Quantize),
        ("neg", lq(-10, 1, 20)),
        ("a", AggFunc::Quantize),
    ]);
    let mut t = AggregationTable::new(&d);
    t.update(0, &[], &[1 << 32]).unwrap();
    t.update(1, &[int(1)], &[1]).unwrap();
    t.update(2, &[s("mumble")], &[1]).unwrap();
    t.update(3, &[s("foo"), sized(1, 1), sized(2, 2), sized(3, 8)], &[1])
        .unwrap();
    t.update(4, &[], &[-10, -10, 20, 1, -1]).unwrap();
    t.update(4, &[], &[-5, -10, 20, 1, 1]).unwrap();
    t.update(4, &[], &[0, -10, 20, 1, 1]).unwrap();
    for i in 0..=100 {
        t.update(5, &[int(i)], &[0, i]).unwrap();
        t.update(5, &[int(i)], &[1, 100 - i]).unwrap();
    }
    let mut opts = SortOptions {
        aggpack: true,
        encoding: Encoding::Ascii,
        ..SortOptions::default()
    };
    let mut out = Vec::new();
    opts.aggzoom = true;
    print_default(&t, 4, &opts, &NoSymbols, &mut out);
    opts.aggzoom = false;
    print_default(&t, 4, &opts, &NoSymbols, &mut out);
    end(&t, &opts, &mut out);
    check("aggs/tst.aggpack.d", &out);
}

#[test]
fn clear_keeps_keys() {
    let mut t = AggregationTable::new(&defs(&[("", AggFunc::Min), ("q", lq(0, 1, 4))]));
    t.update(0, &[s("a")], &[5]).unwrap();
    t.update(1, &[], &[2, 0, 4]).unwrap();
    t.clear(0);
    t.clear(1);
    assert_eq!(t.snapshot(0), vec![(vec![s("a")], AggValue::Min(0))]);
    t.update(0, &[s("a")], &[7]).unwrap();
    assert_eq!(t.snapshot(0)[0].1, AggValue::Min(0));
    let mut out = Vec::new();
    print_default(&t, 1, &SortOptions::default(), &NoSymbols, &mut out);
    assert!(String::from_utf8_lossy(&out).contains("             < 0 |"));
}

#[test]
fn key_layouts() {
    struct Syms;
    impl SymbolResolver for Syms {
        fn kernel(&self, addr: u64) -> String {
            format!("genunix`f{addr}+0x4")
        }
        fn kmod(&self, _: u64) -> String {
            "genunix".to_string()
        }
    }
    let mut t = AggregationTable::new(&defs(&[("", AggFunc::Count)]));
    t.update(
        0,
        &[
            Datum::Stack {
                frames: vec![1, 2, 0, 0],
                user: false,
                pid: 0,
                epoch: 0,
            },
            Datum::Sym(3),
            Datum::Mod(3),
            s(""),
        ],
        &[],
    )
    .unwrap();
    let opts = SortOptions {
        strsize: 4,
        ..SortOptions::default()
    };
    let mut out = Vec::new();
    print_default(&t, 0, &opts, &Syms, &mut out);
    let want = format!(
        "\n\n              genunix`f1+0x4\n              genunix`f2+0x4\n  {:<50}  {:<50}\n\
         \x20            0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f  0123456789abcdef\n\
         \x20        0: 00 00 00 00                                      ....\n\
         \x20               1\n",
        "genunix`f3", "genunix"
    );
    assert_eq!(String::from_utf8_lossy(&out), want);
    let mut out = Vec::new();
    print_formatted(
        &t,
        &parse("%-4k|%a|%10a|%s\n").unwrap(),
        &[0],
        &opts,
        &Syms,
        &mut out,
    )
    .unwrap_or(());
    assert!(String::from_utf8_lossy(&out)
        .starts_with("\n    genunix`f1+0x4\n    genunix`f2+0x4\n|genunix`f3+0x4|   genunix|"));
}

#[test]
fn no_panics_on_extremes() {
    let d = defs(&[
        ("c", AggFunc::Count),
        ("s", AggFunc::Sum),
        ("a", AggFunc::Avg),
        ("mi", AggFunc::Min),
        ("ma", AggFunc::Max),
        ("sd", AggFunc::Stddev),
        ("q", AggFunc::Quantize),
        ("l", lq(i32::MIN + 1, 65535, i32::MAX)),
        ("ll", llq(2, 0, 63, 2)),
    ]);
    let mut t = AggregationTable::new(&d);
    let vals = [i64::MIN, -1, 0, 1, i64::MAX, i64::MIN + 1];
    for a in 0..d.len() as u32 {
        for (i, &v) in vals.iter().enumerate() {
            let key = [sized(v, (1 << (i % 4)) as u8), Datum::Str(vec![0xff, b'x'])];
            t.update(a, &key, &[v, v, v, v, v, v]).unwrap();
            t.update(a, &[], &[v, v, v, v, v, v]).unwrap();
        }
    }
    assert_eq!(t.update(99, &[], &[]), Err(AggError::NoSuchAgg(99)));
    let all: Vec<u32> = (0..d.len() as u32).collect();
    for opts in [
        SortOptions::default(),
        SortOptions {
            aggsortkey: true,
            aggsortrev: true,
            aggsortpos: Some(usize::MAX),
            aggsortkeypos: Some(usize::MAX),
            encoding: Encoding::Utf8,
            ..SortOptions::default()
        },
        SortOptions {
            agghist: true,
            aggpack: true,
            aggzoom: true,
            ..SortOptions::default()
        },
    ] {
        let mut out = Vec::new();
        for &a in &all {
            print_default(&t, a, &opts, &NoSymbols, &mut out);
            let _ = print_formatted(
                &t,
                &parse("%d %*d %s %@d %@x %@u\n").unwrap(),
                &[a],
                &opts,
                &NoSymbols,
                &mut out,
            );
            t.normalize(a, -1);
            print_default(&t, a, &opts, &NoSymbols, &mut out);
            t.normalize(a, 0);
            t.denormalize(a);
        }
        print_default_multi(&t, &all, &opts, &NoSymbols, &mut out);
        let _ = print_formatted(
            &t,
            &parse("%d %@d %@d\n").unwrap(),
            &all,
            &opts,
            &NoSymbols,
            &mut out,
        );
        print_unprinted(&t, &opts, &NoSymbols, &mut out);
    }
    for &a in &all {
        t.trunc(a, Some(i64::MIN), &NoSymbols);
        t.trunc(a, Some(1), &NoSymbols);
        t.trunc(a, Some(-1), &NoSymbols);
        assert_eq!(t.entries(a), 1);
        t.trunc(a, None, &NoSymbols);
        assert!(t.is_empty(a));
    }
}

/// A million distinct integer keys of a count(): well under 200 MB.
#[test]
#[ignore]
fn memory_million_keys() {
    let mut t = AggregationTable::new(&defs(&[("", AggFunc::Count)]));
    for i in 0..1_000_000 {
        t.update(0, &[int(i)], &[]).unwrap();
    }
    let bytes = t.memory_usage();
    eprintln!("1M int keys: {} MB", bytes >> 20);
    assert!(bytes < 200 << 20);
    let mut out = Vec::new();
    print_default(&t, 0, &SortOptions::default(), &NoSymbols, &mut out);
    assert_eq!(out.len(), 1 + 1_000_000 * 27);
}

/// A resolver that names kernel addresses by 0x100-byte "functions" in 0x1000-byte "modules".
struct Blocks;

impl SymbolResolver for Blocks {
    fn kernel_func(&self, addr: u64) -> String {
        format!("m{}`f{}", addr >> 12, (addr >> 8) & 0xf)
    }
    fn kmod(&self, addr: u64) -> String {
        format!("m{}", addr >> 12)
    }
}

#[test]
fn symbol_keys_merge_by_function_and_module() {
    let mut t = AggregationTable::new(&[Aggregation {
        name: "@".into(),
        func: AggFunc::Count,
        keys: Vec::new(),
    }]);
    for a in [0x1010u64, 0x1020, 0x1110, 0x2010] {
        t.update(0, &[Datum::Mod(a)], &[]).unwrap();
        t.update(0, &[Datum::Mod(a)], &[]).unwrap();
    }
    let snap = t.snapshot_named(0, &Blocks);
    let counts: Vec<u64> = snap.iter().map(|(_, v)| v.scalar() as u64).collect();
    assert_eq!(counts, vec![6, 2]);
    // the first address of each module stands for it
    assert_eq!(snap[0].0, vec![Datum::Mod(0x1010)]);
    let mut out = Vec::new();
    print_default(&t, 0, &SortOptions::default(), &Blocks, &mut out);
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("m1 ") && text.contains("m2 "), "{text}");
    assert_eq!(text.lines().filter(|l| !l.is_empty()).count(), 2, "{text}");
    // trunc() keeps the top merged row
    t.trunc(0, Some(1), &Blocks);
    assert_eq!(
        t.snapshot(0),
        vec![(vec![Datum::Mod(0x1010)], AggValue::Count(6))]
    );
}
