use super::*;
use crate::agg::snapshot::AggRow;
use crate::engine::standalone::standalone_vm;
use crate::lang::options::DOptions;

fn config(text: &str, opts: &[&str]) -> Config {
    let (vm, _) = standalone_vm(text).expect("compiles");
    let mut o = DOptions::new();
    for a in opts {
        o.set_assignment(crate::lang::options::SetContext::CommandLine, a)
            .expect("option");
    }
    Config::new(&vm.program, &o).expect("config")
}

fn row(keys: &[&str], value: AggValue) -> AggRow {
    AggRow {
        keys: keys.iter().map(|k| KeyCell::Text(k.to_string())).collect(),
        value,
    }
}

#[test]
fn canonical_numbers_follow_openmetrics() {
    let cases = [
        (0.0, "0.0"),
        (0.001, "0.001"),
        (0.95, "0.95"),
        (1.0, "1.0"),
        (1.7, "1.7"),
        (10.0, "10.0"),
        (1e-10, "1e-10"),
        (1e-9, "1e-09"),
        (1e-5, "1e-05"),
        (0.0001, "0.0001"),
        (100000.0, "100000.0"),
        (1e6, "1e+06"),
        (1e10, "1e+10"),
        (1.1e23, "1.1e+23"),
        (7.0, "7.0"),
        (-3.0, "-3.0"),
        (1048575.0, "1.048575e+06"),
        (f64::INFINITY, "+Inf"),
    ];
    for (f, want) in cases {
        assert_eq!(canonical(f), want, "{f}");
    }
}

#[test]
fn negotiation_follows_accept() {
    assert_eq!(Format::negotiate(None), Format::Text);
    assert_eq!(Format::negotiate(Some("*/*")), Format::Text);
    assert_eq!(Format::negotiate(Some("text/plain")), Format::Text);
    // what Prometheus 2.42 sends
    let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    assert_eq!(Format::negotiate(Some(prom)), Format::OpenMetrics);
    assert_eq!(
        Format::negotiate(Some(
            "application/openmetrics-text; version=1.0.0; q=0.2, text/plain;q=0.9"
        )),
        Format::Text
    );
    assert_eq!(
        Format::negotiate(Some("application/openmetrics-text;version=2.0.0")),
        Format::Text
    );
}

#[test]
fn counters_gauges_and_labels() {
    let c = config(
        "BEGIN { @calls[\"a\", 1] = count(); @bytes = sum(3); @lo = min(2); @m = avg(3); @ = count(); }",
        &["metriclabels=@calls:name,fd", "metrichelp=@calls:Calls by \"name\""],
    );
    let aggs = vec![
        AggView {
            name: "@calls".into(),
            rows: vec![
                row(&["b\\x\n", "2"], AggValue::Count(5)),
                row(&["a", "1"], AggValue::Count(7)),
            ],
        },
        AggView {
            name: "@m".into(),
            rows: vec![row(&[], AggValue::Avg { sum: 7, count: 2 })],
        },
    ];
    let mut dropped = Dropped::new();
    let text = encode(Format::Text, &c, &aggs, &Own::default(), &mut dropped);
    assert!(
        text.contains("# HELP dtx_calls_total Calls by \"name\"\n# TYPE dtx_calls_total counter\n"),
        "{text}"
    );
    assert!(
        text.contains("dtx_calls_total{name=\"a\",fd=\"1\"} 7\n"),
        "{text}"
    );
    assert!(
        text.contains("dtx_calls_total{name=\"b\\\\x\\n\",fd=\"2\"} 5\n"),
        "{text}"
    );
    assert!(text.contains("# TYPE dtx_m gauge\ndtx_m 3.5\n"), "{text}");
    assert!(
        text.contains("# TYPE dtx_anonymous_total counter\n"),
        "{text}"
    );
    assert!(text.contains("# TYPE dtx_lo gauge\n"), "{text}");
    let om = encode(
        Format::OpenMetrics,
        &c,
        &aggs,
        &Own::default(),
        &mut dropped,
    );
    assert!(
        om.contains("# TYPE dtx_calls counter\n# HELP dtx_calls Calls by \\\"name\\\"\n"),
        "{om}"
    );
    assert!(
        om.contains("dtx_calls_total{name=\"a\",fd=\"1\"} 7\n"),
        "{om}"
    );
    assert!(om.contains("# TYPE dtx_build info\n"), "{om}");
    assert!(om.ends_with("# EOF\n"), "{om}");
}

#[test]
fn clear_makes_gauges() {
    let c = config(
        "BEGIN { @c = count(); @q = quantize(1); } tick-1s { clear(@c); trunc(@q); }",
        &[],
    );
    let kinds: Vec<Kind> = c.metrics.iter().map(|m| m.kind).collect();
    assert_eq!(kinds, [Kind::Gauge, Kind::GaugeHistogram]);
}

#[test]
fn quantize_buckets_are_cumulative_upper_bounds() {
    let c = config(
        "BEGIN { @lat = quantize(1); }",
        &["metricunit=@lat:nanoseconds"],
    );
    let mut b = vec![0i64; 127];
    b[64] = 2; // 1
    b[66] = 3; // 4..7
    b[67] = 1; // 8..15
    let aggs = vec![AggView {
        name: "@lat".into(),
        rows: vec![row(&[], AggValue::Quantize(b))],
    }];
    let text = encode(
        Format::Text,
        &c,
        &aggs,
        &Own::default(),
        &mut Dropped::new(),
    );
    let want = "# TYPE dtx_lat_seconds histogram\n\
dtx_lat_seconds_bucket{le=\"1e-09\"} 2\n\
dtx_lat_seconds_bucket{le=\"3e-09\"} 2\n\
dtx_lat_seconds_bucket{le=\"7e-09\"} 5\n\
dtx_lat_seconds_bucket{le=\"1.5e-08\"} 6\n\
dtx_lat_seconds_bucket{le=\"+Inf\"} 6\n\
dtx_lat_seconds_count 6\n";
    assert!(text.contains(want), "{text}");
    let om = encode(
        Format::OpenMetrics,
        &c,
        &aggs,
        &Own::default(),
        &mut Dropped::new(),
    );
    assert!(om.contains("# UNIT dtx_lat_seconds seconds\n"), "{om}");
    assert!(!om.contains("dtx_lat_seconds_count"), "{om}");
}

#[test]
fn lquantize_and_llquantize_bounds() {
    assert_eq!(
        upper_bounds(AggFunc::Lquantize {
            base: 0,
            step: 10,
            levels: 3
        }),
        [Some(-1), Some(9), Some(19), Some(29), None]
    );
    let ll = upper_bounds(AggFunc::Llquantize {
        factor: 10,
        low: 0,
        high: 1,
        nsteps: 10,
    });
    assert_eq!(ll.first(), Some(&Some(0)));
    assert_eq!(&ll[1..4], &[Some(1), Some(2), Some(3)]);
    assert_eq!(ll.last(), Some(&None));
    // quantize: the bucket of value v has a bound >= v and the bucket below one < v
    let q = upper_bounds(AggFunc::Quantize);
    for v in [-9i64, -2, -1, 0, 1, 2, 3, 4, 1000, i64::MAX / 2] {
        let i = crate::agg::quantize::quantize_bucket(v);
        assert!(q[i].is_none_or(|u| u >= v), "{v}");
        if i > 0 {
            assert!(q[i - 1].is_some_and(|u| u < v), "{v}");
        }
    }
}

#[test]
fn cardinality_is_bounded() {
    let c = config("BEGIN { @c[1] = count(); }", &["metriclimit=2"]);
    let aggs = vec![AggView {
        name: "@c".into(),
        rows: (1..=5)
            .map(|i| row(&[&i.to_string()], AggValue::Count(i)))
            .collect(),
    }];
    let mut dropped = Dropped::new();
    let text = encode(Format::Text, &c, &aggs, &Own::default(), &mut dropped);
    assert!(
        text.contains("dtx_c_total{key1=\"5\"} 5\ndtx_c_total{key1=\"4\"} 4\n")
            || text.contains("dtx_c_total{key1=\"4\"} 4\ndtx_c_total{key1=\"5\"} 5\n"),
        "{text}"
    );
    assert!(!text.contains("key1=\"3\""), "{text}");
    assert!(
        text.contains("dtx_metrics_dropped_series_total{metric=\"dtx_c\"} 3\n"),
        "{text}"
    );
    let text = encode(Format::Text, &c, &aggs, &Own::default(), &mut dropped);
    assert!(
        text.contains("dtx_metrics_dropped_series_total{metric=\"dtx_c\"} 6\n"),
        "{text}"
    );
}

#[test]
fn bad_options_are_errors() {
    let (vm, _) = standalone_vm("BEGIN { @c[1, 2] = count(); @metrics_events = count(); }")
        .expect("compiles");
    let err = |opts: &[&str]| {
        let mut o = DOptions::new();
        for a in opts {
            o.set_assignment(crate::lang::options::SetContext::CommandLine, a)
                .expect("option");
        }
        Config::new(&vm.program, &o).expect_err("refused")
    };
    assert!(err(&[]).contains("dtx's own"), "{}", err(&[]));
    let (vm2, _) = standalone_vm("BEGIN { @c[1, 2] = count(); }").expect("compiles");
    let err2 = |opts: &[&str]| {
        let mut o = DOptions::new();
        for a in opts {
            o.set_assignment(crate::lang::options::SetContext::CommandLine, a)
                .expect("option");
        }
        Config::new(&vm2.program, &o).expect_err("refused")
    };
    assert!(err2(&["metriclabels=@c:one"]).contains("2 key(s), 1 label"));
    assert!(err2(&["metriclabels=@c:a,__b"]).contains("no Prometheus label name"));
    assert!(err2(&["metriclabels=@nope:a"]).contains("no aggregation @nope"));
    assert!(err2(&["metricunit=@c:seconds"]).contains("count()"));
    assert!(err2(&["metriclabels=c"]).contains("@name:value"));
}
