//! Many traces in one run (`-E a -E b`, globs, zip members) and `dtx --merge`: the merged
//! aggregations against single runs, `--merge` of saved results against the merged run, the
//! `trace` variable, and the labelled per-file output (docs/many-traces.md). The tests skip
//! with a message when `../shared/etl` is absent.

#[path = "support/etl.rs"]
mod support;

#[path = "support/cli.rs"]
mod cli;
use cli::dtx_ok;

use std::collections::BTreeMap;

use dtx::output::json::{parse, Json};

/// `dtx -q [-x oformat=json] -E trace... -n prog`: its stdout.
fn run(json: bool, traces: &[&str], prog: &str) -> String {
    let mut args = vec!["-q"];
    if json {
        args.extend(["-x", "oformat=json"]);
    }
    for t in traces {
        args.extend(["-E", t]);
    }
    args.extend(["-n", prog]);
    dtx_ok(&args)
}

/// The scheduler trace and the .NET trace of the shared set.
fn two_traces() -> Option<(String, String)> {
    Some((
        support::trace("randomascii_slow_ppt_trace.etl.zip")?,
        support::trace("perfview_net.4.5.2.x64.etl.zip")?,
    ))
}

/// A copy of `trace` under another name (in a directory that lives as long as the guard).
fn copy_of(trace: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.etl.zip");
    std::fs::copy(trace, &copy).unwrap();
    (dir, copy.to_string_lossy().into_owned())
}

/// Every aggregating function over the scheduler's events.
const PROGRAM: &str = "sched:::on-cpu { @c[execname] = count(); @s[execname] = sum(tid & 0xff); \
     @mn[execname] = min(tid); @mx[execname] = max(tid); @a[cpu] = avg(tid); \
     @sd = stddev(tid & 0xfff); @q = quantize(tid); @l = lquantize(tid & 0xff, 0, 256, 16); }";

/// The aggregations of a `-x oformat=json` document: name → (key text → the row's value
/// fields as JSON text).
fn aggregations(doc: &str) -> BTreeMap<String, BTreeMap<String, Json>> {
    let doc = parse(doc).unwrap();
    let list = doc
        .get("dtrace")
        .and_then(|d| d.get("aggregations"))
        .unwrap();
    let Json::Array(list) = list else {
        panic!("no list")
    };
    let mut out = BTreeMap::new();
    for a in list {
        let Some(Json::Str(name)) = a.get("aggregation-name") else {
            panic!()
        };
        let Some(Json::Array(rows)) = a.get("aggregation-data") else {
            panic!()
        };
        let mut m = BTreeMap::new();
        for r in rows {
            m.insert(r.get("keys").unwrap().to_json(), r.clone());
        }
        out.insert(name.clone(), m);
    }
    out
}

fn int(j: &Json, field: &str) -> i64 {
    match j.get(field) {
        Some(Json::Int(v)) => *v,
        Some(Json::UInt(v)) => *v as i64,
        other => panic!("{field}: {other:?} in {}", j.to_json()),
    }
}

#[test]
fn two_copies_count_and_sum_twice_one_copy_min_and_max_the_same() {
    let Some((a, _)) = two_traces() else { return };
    let one = aggregations(&run(true, &[&a], PROGRAM));
    let two = aggregations(&run(true, &[&a, &a], PROGRAM));
    assert_eq!(
        one.keys().collect::<Vec<_>>(),
        two.keys().collect::<Vec<_>>()
    );
    assert!(one["c"].len() > 10, "the trace has processes on CPU");
    for (agg, field, factor) in [
        ("c", "count", 2),
        ("s", "sum", 2),
        ("mn", "min", 1),
        ("mx", "max", 1),
    ] {
        assert_eq!(one[agg].len(), two[agg].len(), "{agg}");
        for (k, row) in &one[agg] {
            assert_eq!(
                int(&two[agg][k], field),
                factor * int(row, field),
                "@{agg}[{k}]"
            );
        }
    }
    // avg: the same average of twice the count; quantize buckets doubled
    for (k, row) in &one["a"] {
        assert_eq!(int(&two["a"][k], "avg"), int(row, "avg"));
    }
    let total = |m: &BTreeMap<String, Json>| int(m.values().next().unwrap(), "total");
    assert_eq!(total(&two["q"]), 2 * total(&one["q"]));
    assert_eq!(total(&two["l"]), 2 * total(&one["l"]));
}

#[test]
fn merge_of_saved_results_equals_the_merged_run() {
    let Some((a, b)) = two_traces() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (ja, jb) = (dir.path().join("a.json"), dir.path().join("b.json"));
    for (trace, file) in [(&a, &ja), (&b, &jb)] {
        let doc = run(true, &[trace], PROGRAM);
        std::fs::write(file, doc).unwrap();
    }
    let (ja, jb) = (ja.to_str().unwrap(), jb.to_str().unwrap());
    let merged_run = run(false, &[&a, &b], PROGRAM);
    assert!(merged_run.contains("value  ------------- Distribution -------------"));
    assert_eq!(dtx_ok(&["--merge", ja, jb]), merged_run);
    let merged_json = run(true, &[&a, &b], PROGRAM);
    assert_eq!(
        dtx_ok(&["--merge", "-x", "oformat=json", ja, jb]),
        merged_json
    );
    // a merged result merges again: (a + b) + a is a, b, a in one run
    let ab = dir.path().join("ab.json");
    std::fs::write(&ab, &merged_json).unwrap();
    assert_eq!(
        dtx_ok(&["--merge", ab.to_str().unwrap(), ja]),
        run(false, &[&a, &b, &a], PROGRAM)
    );
}

#[test]
fn the_trace_variable_splits_by_file() {
    let Some((a, net)) = two_traces() else { return };
    // the scheduler trace under a second name (the .NET trace has no context switches)
    let (_dir, b) = copy_of(&a);
    let count = |t: &str| -> i64 {
        let out = run(
            false,
            &[t],
            "sched:::on-cpu { @ = count(); } END { printa(\"%@d\\n\", @); }",
        );
        out.trim().parse().unwrap()
    };
    let doc = aggregations(&run(
        true,
        &[&a, &b],
        "sched:::on-cpu { @[trace] = count(); }",
    ));
    let rows = &doc["_"];
    assert_eq!(rows.len(), 2, "{rows:?}");
    for t in [&a, &b] {
        let key = Json::Array(vec![Json::object([
            ("type", Json::str("string")),
            ("value", Json::str(t.as_str())),
        ])]);
        assert_eq!(int(&rows[&key.to_json()], "count"), count(t), "{t}");
    }
    // one trace: its name as given; trace() the action is still the action
    let out = run(
        false,
        &[&a],
        "BEGIN { trace(trace); trace(\"|\"); exit(0); }",
    );
    assert_eq!(out, format!("{a}|\n"));
    // a trace without the probe's events gives no row
    let doc = aggregations(&run(
        true,
        &[&a, &net],
        "sched:::on-cpu { @[trace] = count(); }",
    ));
    assert_eq!(doc["_"].len(), 1);
}

#[test]
fn printed_lines_keep_file_order_and_are_labelled() {
    let Some((a, b)) = two_traces() else { return };
    // n is a global: BEGIN's value is every file's start, each file counts on its own
    let out = run(false, &[&a, &b], "BEGIN { n = 100; printf(\"begin\\n\"); } tick-100ms /n < 110/ { printf(\"%d %s\\n\", ++n, trace); } END { printf(\"end %d\\n\", n); }");
    // (dtrace ends the run with an empty line)
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.first(), Some(&"begin"));
    assert_eq!(lines.last(), Some(&"end 100"), "END sees BEGIN's globals");
    for t in [&a, &b] {
        let mine: Vec<&str> = lines
            .iter()
            .filter_map(|l| l.strip_prefix(&format!("{t}: ")))
            .collect();
        let want: Vec<String> = (101..=110).map(|i| format!("{i} {t}")).collect();
        assert_eq!(mine, want, "{t}");
    }
    assert_eq!(lines.len(), 22, "{out}");
}

/// Small traces of the shared set, copied under other names or zipped.
fn small_traces() -> Option<(String, String)> {
    Some((
        support::trace("perfview_SelfDescribingSingleEvent.etl")?,
        support::trace("krabsetw_powershell.etl")?,
    ))
}

#[test]
fn globs_and_zip_members_name_the_same_traces() {
    let Some((a, b)) = small_traces() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    std::fs::copy(&a, format!("{d}/1.etl")).unwrap();
    std::fs::copy(&b, format!("{d}/2.etl")).unwrap();
    let zip_path = format!("{d}/both.zip");
    let mut z = zip::ZipWriter::new(std::fs::File::create(&zip_path).unwrap());
    for (name, src) in [("one.etl", &a), ("two.etl", &b)] {
        z.start_file(name, zip::write::SimpleFileOptions::default())
            .unwrap();
        std::io::Write::write_all(&mut z, &std::fs::read(src).unwrap()).unwrap();
    }
    z.finish().unwrap();
    let prog = ":::events { @[trace] = count(); } END { printa(\"%s %@d\\n\", @); }";
    let counts = |traces: &[&str]| -> Vec<i64> {
        let out = run(false, traces, prog);
        let mut v: Vec<(String, i64)> = out
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (name, n) = l.rsplit_once(' ').unwrap();
                (name.to_string(), n.parse().unwrap())
            })
            .collect();
        v.sort();
        v.into_iter().map(|(_, n)| n).collect()
    };
    let plain = counts(&[&format!("{d}/1.etl"), &format!("{d}/2.etl")]);
    assert_eq!(plain.len(), 2);
    assert!(plain.iter().all(|&n| n > 0));
    assert_eq!(counts(&[&format!("{d}/*.etl")]), plain);
    assert_eq!(counts(&[&zip_path]), plain);
    // the names: a glob's files as found, a zip's members as archive:member
    let names = run(false, &[&zip_path], prog);
    assert!(names.contains(&format!("{zip_path}:one.etl ")), "{names}");
    assert!(names.contains(&format!("{zip_path}:two.etl ")), "{names}");
    // a member glob picks some members
    let one = run(false, &[&format!("{zip_path}:t*.etl")], prog);
    assert_eq!(one.trim(), format!("{zip_path}:two.etl {}", plain[1]));
    // a glob that matches nothing is an error naming it
    let out = cli::dtx(&["-q", "-E", &format!("{d}/*.nothing"), "-n", "BEGIN"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no file matches"));
}

#[test]
fn exit_in_one_trace_ends_that_trace_only() {
    let Some((a, _)) = two_traces() else { return };
    let (_dir, b) = copy_of(&a);
    // the name inside a D string: Windows' backslashes escaped
    let a_in_d = a.replace('\\', "\\\\");
    let prog = format!(
        "sched:::on-cpu {{ @[trace] = count(); }} tick-1s /trace == \"{a_in_d}\"/ {{ exit(3); }} \
         END {{ printa(\"%s %@d\\n\", @); }}"
    );
    let out = cli::dtx(&["-q", "-E", &a, "-E", &b, "-n", &prog]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "the status of the trace's exit()"
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let count = |t: &str| -> i64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{t} ")))
            .unwrap();
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let whole = run(
        false,
        &[&a],
        "sched:::on-cpu { @ = count(); } END { printa(\"%@d\\n\", @); }",
    );
    let whole: i64 = whole.trim().parse().unwrap();
    // a stopped after its first second, the copy went to its end
    assert!(count(&a) > 0 && count(&a) < whole, "{text}");
    assert_eq!(count(&b), whole);
}
