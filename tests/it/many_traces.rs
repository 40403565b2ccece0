//! Many traces in one run (`-E a -E b`, globs, zip members) and `dtx --merge`: the merged
//! aggregations against single runs, `--merge` of saved results against the merged run, the
//! `trace` variable, and the labelled per-file output (docs/many-traces.md). The tests skip
//! with a message when `../shared/etl` is absent.

use crate::support::etl as support;

use crate::support::cli;
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
    // no probe clause writes a global: the traces are walked at the same time, each trace's
    // lines in its own order, labelled
    let out = run(
        false,
        &[&a, &b],
        "BEGIN { printf(\"begin\\n\"); } tick-100ms { printf(\"%d %s\\n\", timestamp, trace); } \
         END { printf(\"end\\n\"); }",
    );
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.first(), Some(&"begin"));
    assert_eq!(lines.last(), Some(&"end"));
    for t in [&a, &b] {
        let mine: Vec<u64> = lines
            .iter()
            .filter_map(|l| l.strip_prefix(&format!("{t}: ")))
            .map(|l| l.split(' ').next().unwrap().parse().unwrap())
            .collect();
        assert!(mine.len() > 5, "{t}: {out}");
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "{t} in order");
    }
}

#[test]
fn globals_written_by_probes_run_the_traces_in_turn() {
    let Some((a, b)) = two_traces() else { return };
    // n is a global a probe clause writes and reads: one engine walks a, then b
    let o = cli::dtx(&[
        "-q",
        "-E",
        &a,
        "-E",
        &b,
        "-n",
        "BEGIN { n = 100; printf(\"begin\\n\"); } tick-100ms /n < 110/ { printf(\"%d %s\\n\", ++n, trace); } END { printf(\"end %d\\n\", n); }",
    ]);
    let (out, err) = cli::text(&o);
    // (dtrace ends the run with an empty line)
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    let mut want = vec!["begin".to_string()];
    want.extend((101..=110).map(|i| format!("{a}: {i} {a}")));
    want.push("end 110".into());
    assert_eq!(lines, want, "b's clause sees a's n: nothing left to print");
    assert!(
        err.contains(
            "dtx: the traces run one after another, in the order given: the clause of \
             :::tick-100ms writes the global variable `n` and reads it too\n"
        ),
        "{err}"
    );
}

/// `prog` over `traces`: its stdout as a number.
fn number(traces: &[&str], prog: &str) -> i64 {
    let out = run(false, traces, prog);
    out.trim().parse().unwrap_or_else(|_| panic!("{out}"))
}

/// One trace made of two copies of `trace`, the second after the first in time.
fn doubled(trace: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("doubled.etl");
    let bytes = dtx::etw::reader::EtlFile::open_path(trace)
        .unwrap()
        .bytes()
        .to_vec();
    support::write_repeated_trace(&bytes, 2, &path);
    (dir, path.to_string_lossy().into_owned())
}

#[test]
fn a_global_count_over_two_copies_is_twice_one() {
    let Some((a, _)) = two_traces() else { return };
    let (_dir, b) = copy_of(&a);
    let prog = "sched:::on-cpu { n++; } END { printf(\"%d\\n\", n); }";
    let one = number(&[&a], prog);
    assert_eq!(one, 29_533, "the xperf trace's context switches");
    assert_eq!(number(&[&a, &b], prog), 2 * one);
    let (_d, both) = doubled(&a);
    assert_eq!(number(&[&both], prog), 2 * one, "one trace made of the two");
}

#[test]
fn exit_after_the_thousandth_firing_fires_a_thousand_times_in_all() {
    let Some((a, _)) = two_traces() else { return };
    let (_dir, b) = copy_of(&a);
    let prog = "sched:::on-cpu { @ = count(); } sched:::on-cpu /++n == 1000/ { exit(0); } \
                END { printa(\"%@d\\n\", @); }";
    assert_eq!(number(&[&a, &b], prog), 1000);
    let (_d, both) = doubled(&a);
    assert_eq!(number(&[&both], prog), 1000, "one trace made of the two");
    // a's exit() ends the run: b is not walked
    let per_trace =
        "sched:::on-cpu { @[trace] = count(); } sched:::on-cpu /++n == 1000/ { exit(3); } \
                     END { printa(\"%s %@d\\n\", @); }";
    let o = cli::dtx(&["-q", "-E", &a, "-E", &b, "-n", per_trace]);
    assert_eq!(o.status.code(), Some(3));
    let (out, _) = cli::text(&o);
    assert_eq!(out.trim(), format!("{a} 1000"));
}

/// `@[execname] = sum(on-CPU time)` with `self->ts`, as rows of text.
const ONCPU: &str = "sched:::on-cpu { self->ts = timestamp; } \
     sched:::off-cpu /self->ts/ { @[execname] = sum(timestamp - self->ts); self->ts = 0; } \
     END { printa(\"%s %@d\\n\", @); }";

fn sums(out: &str) -> BTreeMap<String, i64> {
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

#[test]
fn thread_locals_belong_to_their_trace_even_with_the_same_tids() {
    let Some((a, _)) = two_traces() else { return };
    let (_dir, b) = copy_of(&a);
    let one = sums(&run(false, &[&a], ONCPU));
    assert!(one.len() > 10);
    let twice: BTreeMap<String, i64> = one.iter().map(|(k, v)| (k.clone(), 2 * v)).collect();
    // in parallel (no global written)
    assert_eq!(sums(&run(false, &[&a, &b], ONCPU)), twice);
    // in turn, through one engine (a global written and read): b's threads have the tids of
    // a's, and start with no self->ts of a's
    let in_turn = format!("{ONCPU} sched:::on-cpu {{ k++; }} END {{ k = k; }}");
    assert_eq!(sums(&run(false, &[&a, &b], &in_turn)), twice);
}

#[test]
fn speculations_belong_to_the_run() {
    let Some((a, _)) = two_traces() else { return };
    let (_dir, b) = copy_of(&a);
    // a's clause speculates into the speculation BEGIN made, b's commits it
    let a_in_d = a.replace('\\', "\\\\");
    let prog = format!(
        "BEGIN {{ s = speculation(); put = 0; done = 0; }} \
         sched:::on-cpu /trace == \"{a_in_d}\" && !put/ {{ speculate(s); printf(\"from a\\n\"); }} \
         sched:::on-cpu /trace == \"{a_in_d}\" && !put/ {{ put = 1; }} \
         sched:::on-cpu /trace != \"{a_in_d}\" && !done/ {{ commit(s); done = 1; }}"
    );
    let out = run(false, &[&a, &b], &prog);
    assert_eq!(out.trim(), format!("{b}: from a"), "{out}");
}

#[test]
fn faults_and_drops_of_the_traces_count_and_name_the_trace() {
    let Some((a, _)) = two_traces() else { return };
    let (_dir, b) = copy_of(&a);
    let o = cli::dtx(&[
        "-q",
        "-E",
        &a,
        "-E",
        &b,
        "-n",
        "tick-1s { trace(*(int *)8); }",
    ]);
    let (_, err) = cli::text(&o);
    for t in [&a, &b] {
        assert!(
            err.contains(&format!("dtx: {t}: error on enabled probe ID 1 (ID ")),
            "{err}"
        );
    }
    // dynamic-variable drops in the traces' engines are the run's
    let drops = |traces: &[&str]| -> i64 {
        let mut args = vec!["-q", "-x", "dynvarsize=512"];
        for t in traces {
            args.extend(["-E", t]);
        }
        args.extend(["-n", "sched:::on-cpu { x[tid] = timestamp; }"]);
        let (_, err) = cli::text(&cli::dtx(&args));
        let line = err
            .lines()
            .find(|l| l.contains("dynamic variable drop"))
            .unwrap_or_else(|| panic!("{err}"));
        line.split(' ').nth(1).unwrap().parse().unwrap()
    };
    let one = drops(&[&a]);
    assert!(one > 0);
    assert_eq!(drops(&[&a, &b]), 2 * one);
}

#[test]
fn a_probe_whose_records_the_trace_lacks_says_so() {
    let Some((a, _)) = two_traces() else { return };
    let o = cli::dtx(&["-q", "-E", &a, "-n", "io:::start { @ = count(); }"]);
    assert!(o.status.success());
    let (_, err) = cli::text(&o);
    assert_eq!(
        err,
        "dtx: io:::start cannot fire: the trace has no DiskIo ReadInit, WriteInit or FlushInit \
         records (the kernel flag DISK_IO_INIT records them: xperf -on DISK_IO_INIT, or a WPR \
         profile with it)\n"
    );
    let o = cli::dtx(&["-q", "-E", &a, "-n", "io:::done { @ = count(); }"]);
    let (out, err) = cli::text(&o);
    assert_eq!(err, "", "the trace has its 361 completions");
    assert_eq!(out.trim(), "361");
    let (_dir, b) = copy_of(&a);
    let o = cli::dtx(&[
        "-q",
        "-E",
        &a,
        "-E",
        &b,
        "-n",
        "reg:::open, reg:::create { @ = count(); }",
    ]);
    let (_, err) = cli::text(&o);
    assert!(
        err.contains("dtx: reg:::create and reg:::open cannot fire: none of the 2 traces has Registry records of theirs"),
        "{err}"
    );
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
fn more_traces_than_threads_name_every_thread_from_the_scan() {
    // with more traces than the pool's threads the scan does not keep the traces open: each
    // is opened again for its walk and takes the start of the trace (its threads and
    // processes) from the scan instead of a second pass; each thread still has its process
    // from the first record, so three copies count three times one copy, key by key
    let Some((a, _)) = two_traces() else { return };
    let prog = "sched:::on-cpu { @c[execname] = count(); }";
    let one = aggregations(&run(true, &[&a], prog));
    let copies = dtx::engine::many::pool_size(8) + 1;
    let many = aggregations(&run(true, &vec![a.as_str(); copies], prog));
    assert!(one["c"].len() > 10, "the trace has processes on CPU");
    assert!(
        !one["c"].keys().any(|k| k.contains("unknown")),
        "{:?}",
        one["c"].keys()
    );
    assert_eq!(one["c"].len(), many["c"].len());
    for (k, row) in &one["c"] {
        assert_eq!(
            int(&many["c"][k], "count"),
            copies as i64 * int(row, "count"),
            "@c[{k}]"
        );
    }
}

#[test]
fn a_trace_opened_again_takes_the_start_the_scan_found() {
    use dtx::sources::etl::TraceSource;
    let Some((a, _)) = two_traces() else { return };
    let mut scanned = TraceSource::open(&a).unwrap();
    scanned.scan_providers(&mut dtx::providers::etw::EtwProbes::new());
    let table = scanned
        .start_table()
        .expect("the scan read the trace's start");
    assert!(!table.threads.is_empty() && !table.processes.is_empty());
    // the same table as a pass of its own over a fresh source
    let mut fresh = TraceSource::open(&a).unwrap();
    assert!(!fresh.knows_threads());
    fresh.collect_threads();
    assert_eq!(*fresh.start_table().unwrap(), *table);
    // and a source given it needs no pass
    let mut again = TraceSource::open(&a).unwrap();
    again.preload_start_table(table);
    assert!(again.knows_threads());
}
