//! `dtx --diff` (docs/compare.md) over the two Windows 11 traces of `../shared/etl-win11`: a trace
//! against itself changes nothing; two traces give, key by key, the numbers of their two
//! separate runs (computed here from the runs' own JSON); the differential folded stacks are
//! what inferno's `diff-folded` makes of the two runs' folded stacks, and the differential SVG
//! names their frames; per second divides by each trace's length; programs of another shape
//! are refused. Skips with a message when the traces are absent.

use std::collections::BTreeMap;

use crate::support::cli::{dtx_ok, run};
use crate::support::etl as support;
use dtx::output::json::{parse, Json};

fn traces() -> Option<(String, String)> {
    Some((
        support::shared("etl-win11", "filtrace_diskio.etl")?,
        support::shared("etl-win11", "filtrace_etw.etl")?,
    ))
}

const PROGRAM: &str = "sched:::on-cpu { @c[execname] = count(); @s[cpu] = sum(1); \
     @q = quantize(tid); @l[cpu % 2] = lquantize(tid & 0xff, 0, 256, 32); }";

fn list<'a>(j: &'a Json, name: &str) -> &'a [Json] {
    match j.get(name) {
        Some(Json::Array(a)) => a,
        other => panic!("{name}: {other:?}"),
    }
}

fn int(j: Option<&Json>) -> i64 {
    match j {
        Some(Json::Int(i)) => *i,
        Some(Json::UInt(u)) => *u as i64,
        other => panic!("not an integer: {other:?}"),
    }
}

/// A diff document's rows: aggregation → key text → the row.
fn diff_rows(text: &str) -> BTreeMap<String, BTreeMap<String, Json>> {
    let doc = parse(text).unwrap();
    let d = doc.get("dtx-diff").expect("a dtx-diff document");
    let mut out = BTreeMap::new();
    for a in list(d, "aggregations") {
        let Some(Json::Str(name)) = a.get("aggregation-name") else {
            panic!("no name")
        };
        let mut rows = BTreeMap::new();
        for r in list(a, "rows") {
            let key: Vec<String> = list(r, "keys")
                .iter()
                .map(|k| match k {
                    Json::Str(s) => s.clone(),
                    other => panic!("key {other:?}"),
                })
                .collect();
            rows.insert(key.join(","), r.clone());
        }
        out.insert(name.clone(), rows);
    }
    out
}

/// A run's aggregations, from its own `-x oformat=json`: aggregation → key text → (the value
/// printa prints: count, sum or a histogram's total; the buckets by index).
type Run = BTreeMap<String, BTreeMap<String, (i64, BTreeMap<i64, i64>)>>;

fn run_values(text: &str) -> Run {
    let doc = parse(text).unwrap();
    let mut out = Run::new();
    for a in list(doc.get("dtrace").unwrap(), "aggregations") {
        let Some(Json::Str(name)) = a.get("aggregation-name") else {
            panic!("no name")
        };
        let mut rows = BTreeMap::new();
        for r in list(a, "aggregation-data") {
            let key: Vec<String> = list(r, "keys")
                .iter()
                .map(|k| match k.get("value") {
                    Some(Json::Str(s)) => s.clone(),
                    v => int(v).to_string(),
                })
                .collect();
            let (total, buckets) = match r.get("buckets") {
                Some(Json::Array(b)) => (
                    int(r.get("total")),
                    b.iter()
                        .map(|b| (int(b.get("index")), int(b.get("count"))))
                        .collect(),
                ),
                _ => (
                    int(r.get("count").or_else(|| r.get("sum"))),
                    BTreeMap::new(),
                ),
            };
            rows.insert(key.join(","), (total, buckets));
        }
        out.insert(name.clone(), rows);
    }
    out
}

fn single(trace: &str, prog: &str) -> String {
    dtx_ok(&["-q", "-x", "oformat=json", "-E", trace, "-n", prog])
}

#[test]
fn diff_of_a_trace_against_itself_is_all_zero() {
    let Some((a, _)) = traces() else { return };
    let out = dtx_ok(&[
        "--diff",
        "-x",
        "oformat=json",
        "-E",
        &a,
        "-E",
        &a,
        "-n",
        PROGRAM,
    ]);
    let rows = diff_rows(&out);
    assert_eq!(rows.len(), 4, "{out}");
    let mut n = 0;
    for (agg, rows) in &rows {
        assert!(!rows.is_empty(), "{agg} has rows");
        for (k, r) in rows {
            n += 1;
            assert_eq!(r.get("presence"), Some(&Json::str("both")), "{agg}[{k}]");
            assert_eq!(int(r.get("change")), 0, "{agg}[{k}]");
            assert!(int(r.get("before")) > 0, "{agg}[{k}]");
            assert_eq!(r.get("ratio"), Some(&Json::Float(1.0)), "{agg}[{k}]");
            if let Some(Json::Array(b)) = r.get("buckets") {
                assert!(b.iter().all(|b| int(b.get("change")) == 0), "{agg}[{k}]");
            }
        }
    }
    assert!(n > 10, "{n} rows");
    // the text says the same: every change is +0
    let text = dtx_ok(&["--diff", "-E", &a, "-E", &a, "-n", PROGRAM]);
    assert!(text.contains("values: absolute"), "{text}");
    let mut changes = 0;
    for l in text.lines().filter(|l| l.starts_with("  ")) {
        let last = l.split_whitespace().last().unwrap_or("");
        if l.contains(" |") {
            // a bucket: its change is the last column
            assert_eq!(last, "+0", "{l}");
            changes += 1;
        } else if last == "1.00x" {
            changes += 1;
        }
        for t in l.split_whitespace().filter(|t| t.starts_with('+')) {
            assert!(t.trim_end_matches([',', ')']) == "+0", "{l}");
        }
    }
    assert!(changes > 10, "{text}");
}

#[test]
fn diff_of_two_traces_matches_their_two_runs() {
    let Some((a, b)) = traces() else { return };
    let (ra, rb) = (
        run_values(&single(&a, PROGRAM)),
        run_values(&single(&b, PROGRAM)),
    );
    let out = dtx_ok(&[
        "--diff",
        "-x",
        "oformat=json",
        "-E",
        &a,
        "-E",
        &b,
        "-n",
        PROGRAM,
    ]);
    let rows = diff_rows(&out);
    let mut changed = 0;
    for agg in ["c", "s", "q", "l"] {
        let (before, after) = (&ra[agg], &rb[agg]);
        let d = &rows[agg];
        // every key of either run, and no other
        let keys: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
        assert_eq!(
            keys,
            d.keys().collect(),
            "@{agg}: the diff's keys are the runs' keys"
        );
        for k in keys {
            let r = &d[k];
            let bv = before.get(k).map_or(0, |v| v.0);
            let av = after.get(k).map_or(0, |v| v.0);
            assert_eq!(int(r.get("before")), bv, "@{agg}[{k}] before");
            assert_eq!(int(r.get("after")), av, "@{agg}[{k}] after");
            assert_eq!(int(r.get("change")), av - bv, "@{agg}[{k}] change");
            let presence = match (before.contains_key(k), after.contains_key(k)) {
                (true, true) => "both",
                (false, true) => "new",
                _ => "gone",
            };
            assert_eq!(r.get("presence"), Some(&Json::str(presence)), "@{agg}[{k}]");
            if av != bv {
                changed += 1;
            }
            if let Some(Json::Array(buckets)) = r.get("buckets") {
                for bk in buckets {
                    let i = int(bk.get("index"));
                    let x = before
                        .get(k)
                        .and_then(|v| v.1.get(&i))
                        .copied()
                        .unwrap_or(0);
                    let y = after.get(k).and_then(|v| v.1.get(&i)).copied().unwrap_or(0);
                    assert_eq!(
                        (int(bk.get("before")), int(bk.get("after"))),
                        (x, y),
                        "@{agg}[{k}] bucket {i}"
                    );
                }
                // every non-zero bucket of either run is in the diff
                let shown: Vec<i64> = buckets.iter().map(|b| int(b.get("index"))).collect();
                for side in [before.get(k), after.get(k)].into_iter().flatten() {
                    for (i, n) in &side.1 {
                        assert!(*n == 0 || shown.contains(i), "@{agg}[{k}] bucket {i}");
                    }
                }
            }
        }
    }
    assert!(changed > 5, "two traces differ: {changed} changed rows");
    // the rows come sorted by the size of the change
    let doc = parse(&out).unwrap();
    let first = &list(doc.get("dtx-diff").unwrap(), "aggregations")[0];
    let changes: Vec<i64> = list(first, "rows")
        .iter()
        .map(|r| int(r.get("change")).abs())
        .collect();
    assert!(changes.windows(2).all(|w| w[0] >= w[1]), "{changes:?}");
}

#[test]
fn per_second_divides_by_each_trace_length() {
    let Some((a, b)) = traces() else { return };
    let prog = "sched:::on-cpu { @c = count(); @m = max(tid); }";
    let abs = diff_rows(&dtx_ok(&[
        "--diff",
        "-x",
        "oformat=json",
        "-E",
        &a,
        "-E",
        &b,
        "-n",
        prog,
    ]));
    let text = dtx_ok(&[
        "--diff",
        "--per-second",
        "-x",
        "oformat=json",
        "-E",
        &a,
        "-E",
        &b,
        "-n",
        prog,
    ]);
    let doc = parse(&text).unwrap();
    let d = doc.get("dtx-diff").unwrap();
    assert_eq!(d.get("values"), Some(&Json::str("per-second")));
    let secs = |side: &str| match d.get(side).and_then(|s| s.get("seconds")) {
        Some(Json::Float(s)) => *s,
        other => panic!("{side}: {other:?}"),
    };
    let (sb, sa) = (secs("before"), secs("after"));
    assert!(sb > 0.0 && sa > 0.0 && sb != sa, "{sb} {sa}");
    let rate = diff_rows(&text);
    let f = |j: Option<&Json>| match j {
        Some(Json::Float(x)) => *x,
        other => panic!("{other:?}"),
    };
    let c = &rate["c"][""];
    assert!((f(c.get("before")) - int(abs["c"][""].get("before")) as f64 / sb).abs() < 1e-6);
    assert!((f(c.get("after")) - int(abs["c"][""].get("after")) as f64 / sa).abs() < 1e-6);
    // max() is not a total: it stays as it is
    assert_eq!(rate["m"][""].get("before"), abs["m"][""].get("before"));
    // the text header says which
    let t = dtx_ok(&["--diff", "--per-second", "-E", &a, "-E", &b, "-n", prog]);
    assert!(
        t.lines().nth(1).unwrap().starts_with("values: per second"),
        "{t}"
    );
}

#[test]
fn folded_diff_is_inferno_diff_folded_of_the_two_runs() {
    let Some((a, b)) = traces() else { return };
    let prog = "profile-997 { @s[stack()] = count(); }";
    let folded = |t: &str| dtx_ok(&["-q", "-x", "oformat=folded", "-E", t, "-n", prog]);
    let (fa, fb) = (folded(&a), folded(&b));
    let mut want = Vec::new();
    inferno::differential::from_readers(
        inferno::differential::Options::default(),
        fa.as_bytes(),
        fb.as_bytes(),
        &mut want,
    )
    .unwrap();
    let sorted = |t: &str| {
        let mut v: Vec<String> = t.lines().map(String::from).collect();
        v.sort();
        v
    };
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("diff.svg");
    let got = dtx_ok(&[
        "--diff",
        "-x",
        "oformat=folded",
        "--svg",
        &svg.to_string_lossy(),
        "-E",
        &a,
        "-E",
        &b,
        "-n",
        prog,
    ]);
    let want = String::from_utf8(want).unwrap();
    assert!(want.lines().count() > 10, "{want}");
    assert_eq!(sorted(&got), sorted(&want));
    // parsed back: three fields, the counts those of the two runs
    let count = |t: &str, frames: &str| {
        t.lines()
            .find_map(|l| l.rsplit_once(' ').filter(|(f, _)| *f == frames))
            .map_or(0, |(_, n)| n.parse::<u64>().unwrap())
    };
    for l in got.lines() {
        let mut f = l.rsplitn(3, ' ');
        let (after, before, frames) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
        assert_eq!(before.parse::<u64>().unwrap(), count(&fa, frames), "{l}");
        assert_eq!(after.parse::<u64>().unwrap(), count(&fb, frames), "{l}");
    }
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<?xml") && svg.contains("<svg"), "an SVG");
    let leaf = got
        .lines()
        .next()
        .and_then(|l| l.rsplitn(3, ' ').nth(2))
        .and_then(|f| f.rsplit(';').next())
        .unwrap();
    let leaf_escaped = leaf
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    assert!(
        svg.contains(&leaf_escaped) || svg.contains(&leaf_escaped[..leaf_escaped.len().min(20)]),
        "the SVG names {leaf}"
    );
}

#[test]
fn saved_results_diff_and_other_shapes_are_refused() {
    let Some((a, b)) = traces() else { return };
    let dir = tempfile::tempdir().unwrap();
    let save = |name: &str, t: &str, prog: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, single(t, prog)).unwrap();
        p.to_string_lossy().into_owned()
    };
    let prog = "sched:::on-cpu { @c[execname] = count(); }";
    let (ja, jb) = (save("a.json", &a, prog), save("b.json", &b, prog));
    // saved results give what the traces give
    let saved = dtx_ok(&["--diff", "-x", "oformat=json", &ja, &jb]);
    let direct = dtx_ok(&[
        "--diff",
        "-x",
        "oformat=json",
        "-E",
        &a,
        "-E",
        &b,
        "-n",
        prog,
    ]);
    assert_eq!(diff_rows(&saved), diff_rows(&direct));
    let js = save("sum.json", &b, "sched:::on-cpu { @c[execname] = sum(1); }");
    let (code, _, err) = run(&["--diff", &ja, &js]);
    assert_eq!(code, 1);
    assert!(
        err.contains("@c: count() in") && err.contains("differ in shape"),
        "{err}"
    );
    let jk = save(
        "keys.json",
        &b,
        "sched:::on-cpu { @c[execname, cpu] = count(); }",
    );
    let (code, _, err) = run(&["--diff", &ja, &jk]);
    assert_eq!(code, 1);
    assert!(
        err.contains("keys [value] in") && err.contains("[value, value]"),
        "{err}"
    );
    // per second of saved results needs their lengths
    let (code, _, err) = run(&["--diff", "--per-second", &ja, &jb]);
    assert_eq!(code, 1);
    assert!(err.contains("--seconds BEFORE,AFTER"), "{err}");
    let t = dtx_ok(&["--diff", "--per-second", "--seconds", "2,4", &ja, &jb]);
    assert!(t.contains("(2.000 s)") && t.contains("(4.000 s)"), "{t}");
}
