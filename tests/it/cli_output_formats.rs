//! The command line's output formats: `--version`, `-x oformat=json|xml` (FreeBSD's structured
//! output) against the text output of the same run, and `-x oformat=folded` stacks whose
//! counts add up to the aggregation. The trace tests skip when `../shared/etl` is absent.

use std::path::PathBuf;
use std::process::Command;

use crate::support::cli;
use cli::run;

fn trace(name: &str) -> Option<PathBuf> {
    crate::support::etl::path("etl", name)
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn version_prints_the_package_version() {
    let (code, out, err) = run(&["--version"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, format!("dtx {}\n", env!("CARGO_PKG_VERSION")));
}

#[cfg(not(windows))]
#[test]
fn missing_etl_says_the_file_is_missing_first() {
    let (code, _, err) = run(&["-E", "missing.etl", "-n", "BEGIN"]);
    assert_eq!(code, 1);
    let missing = err.find("no such file").expect(&err);
    let live = err.find("needs Windows").expect(&err);
    assert!(err.starts_with("dtx: missing.etl: no such file"), "{err}");
    assert!(missing < live, "{err}");
}

/// Runs python3 on `script` with `input` on stdin; its stdout. `None` when python3 is absent.
fn python(script: &str, input: &str) -> Option<String> {
    use std::io::Write;
    let mut child = match Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(_) => {
            eprintln!("skipped the python3 check: no python3");
            return None;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "python3 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).unwrap())
}

/// The quantize sections of dtrace's text: `(key, [(value, count)])` per key.
fn text_histograms(text: &str) -> Vec<(String, Vec<(i64, i64)>)> {
    let mut out: Vec<(String, Vec<(i64, i64)>)> = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_start().starts_with("value  ---") && i > 0 {
            let key = lines[i - 1].trim().to_string();
            let mut rows = Vec::new();
            i += 1;
            while i < lines.len() && lines[i].contains('|') {
                let (v, rest) = lines[i].split_once('|').unwrap();
                let count = rest.split_whitespace().last().unwrap();
                rows.push((v.trim().parse().unwrap(), count.parse().unwrap()));
                i += 1;
            }
            out.push((key, rows));
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn json_output_parses_and_matches_the_text_output() {
    let Some(t) = trace("randomascii_slow_ppt_trace.etl.zip") else {
        return;
    };
    let script = root().join("dscripts/sched/oncpu.d");
    let (t, s) = (t.to_str().unwrap(), script.to_str().unwrap());
    let (code, text, err) = run(&["-q", "-E", t, "-s", s]);
    assert_eq!(code, 0, "{err}");
    let (code, json, err) = run(&["-q", "-x", "oformat=json", "-E", t, "-s", s]);
    assert_eq!(code, 0, "{err}");
    // python's own JSON reader accepts it
    let Some(pretty) = python(
        "import json,sys; json.dump(json.load(sys.stdin), sys.stdout, indent=1)",
        &json,
    ) else {
        return;
    };
    assert!(pretty.contains("\"aggregation-name\": \"oncpu\""));
    // the histograms: every key and bucket of the text, in the same order
    let hist = python(
        r#"
import json, sys
d = json.load(sys.stdin)["dtrace"]
end = [p for p in d["probes"] if p["name"] == "END"][0]
for o in end["output"]:
    if o.get("aggregation-name") == "oncpu":
        assert o["function"] == "quantize"
        for row in o["aggregation-data"]:
            print(row["keys"][0]["value"] + "\t" + " ".join("%d:%d" % (b["value"], b["count"]) for b in row["buckets"]))
"#,
        &json,
    )
    .unwrap();
    let from_text: Vec<String> = text_histograms(&text)
        .into_iter()
        .map(|(k, rows)| {
            let b: Vec<String> = rows.iter().map(|(v, c)| format!("{v}:{c}")).collect();
            format!("{k}\t{}", b.join(" "))
        })
        .collect();
    let from_json: Vec<String> = hist.lines().map(str::to_string).collect();
    assert!(from_text.len() > 10, "{text}");
    assert_eq!(from_json, from_text);
    // the printa() table of sums: the same processes and values, and the printf headings
    let sums = python(
        r#"
import json, sys
end = [p for p in json.load(sys.stdin)["dtrace"]["probes"] if p["name"] == "END"][0]
msgs = [o["message"] for o in end["output"] if "message" in o]
sys.stdout.write(msgs[0])
for o in end["output"]:
    if o.get("aggregation-name") == "total":
        for row in o["aggregation-data"]:
            print("%-24s %16d" % (row["keys"][0]["value"], row["sum"]))
"#,
        &json,
    )
    .unwrap();
    let tail_start = text.find("PROCESS").unwrap();
    assert_eq!(
        sums,
        text[tail_start..].trim_end_matches('\n').to_string() + "\n"
    );
}

#[test]
fn xml_output_is_one_document() {
    let (code, xml, err) = run(&[
        "-q",
        "-x",
        "oformat=xml",
        "-n",
        r#"BEGIN { printf("a<b %d", 3); @c["x&y"] = count(); exit(0); }"#,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        xml.starts_with("<?xml version=\"1.0\"?>\n<dtrace>\n"),
        "{xml}"
    );
    assert!(xml.ends_with("</dtrace>\n"), "{xml}");
    assert!(xml.contains("<message>a&lt;b 3</message>"), "{xml}");
    assert!(xml.contains("<value>x&amp;y</value>"), "{xml}");
    let Some(out) = python(
        "import sys, xml.dom.minidom as m; d = m.parseString(sys.stdin.read()); print(len(d.getElementsByTagName('probes')))",
        &xml,
    ) else {
        return;
    };
    assert_eq!(out.trim(), "1");
}

#[test]
fn unknown_oformat_is_refused() {
    let (code, _, err) = run(&["-x", "oformat=yaml", "-n", "BEGIN"]);
    assert_ne!(code, 0);
    assert!(err.contains("oformat"), "{err}");
}

#[test]
fn folded_stacks_sum_to_the_aggregation() {
    let Some(t) = trace("perfview_net.4.5.2.x64.etl.zip") else {
        return;
    };
    let t = t.to_str().unwrap();
    let prog = "profile:::sample-1ms { @[execname, stack()] = count(); }";
    let (code, folded, err) = run(&["-q", "-x", "oformat=folded", "-E", t, "-n", prog]);
    assert_eq!(code, 0, "{err}");
    let (code, text, err) = run(&[
        "-q",
        "-E",
        t,
        "-n",
        "profile:::sample-1ms { @n = count(); }",
    ]);
    assert_eq!(code, 0, "{err}");
    let total: u64 = text.trim().parse().expect(&text);
    assert!(total > 100, "{text}");
    let mut sum = 0u64;
    for line in folded.lines() {
        let (frames, n) = line.rsplit_once(' ').expect(line);
        assert!(!frames.is_empty() && !frames.contains('\n'), "{line}");
        assert!(frames.split(';').all(|f| !f.is_empty()), "{line}");
        sum += n.parse::<u64>().expect(line);
    }
    assert_eq!(sum, total);
    // some samples have kernel stacks: process, then frames root first
    assert!(
        folded
            .lines()
            .any(|l| l.matches(';').count() >= 3 && l.contains("ntoskrnl.exe+0x")),
        "{folded}"
    );
}

/// A program with `etw_trace()` (Microsoft's example) compiles and runs everywhere; without
/// ETW its events go nowhere, which stderr says once however many fire.
#[cfg(not(windows))]
#[test]
fn etw_trace_runs_and_says_once_that_there_is_no_etw() {
    let prog = r#"tick-1ms /i++ < 5/ {
        etw_trace("Tools.DTrace.Platform", "AAD330CC-4BB9-588A-B252-08276853AF02",
            "My custom event from DTrace", 1, 0x0000000000000020,
            "etw_int32", "PID", (int32_t)pid,
            "etw_string", "Execname", execname,
            "etw_string", "Probefunc", probefunc);
        printf("%d\n", i);
    }
    tick-1ms /i >= 5/ { exit(0); }"#;
    let (code, out, err) = run(&["-q", "-n", prog]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().filter(|l| !l.is_empty()).count(), 5, "{out}");
    assert_eq!(err.matches("etw_trace()").count(), 1, "{err}");
    assert!(err.contains("no ETW"), "{err}");
}

/// A probe object's `timestamp` in the structured formats is the firing's time (dtrace's record
/// header carries it; FreeBSD's output prints it), the value the D variable `timestamp` has in
/// the same clause: over a trace, the record's time, not the host's clock at replay.
#[test]
fn json_timestamp_is_the_records_time_over_a_trace() {
    use dtx::output::json::{parse, Json};
    let (code, out, err) = run(&[
        "-q",
        "-E",
        "demo",
        "-x",
        "oformat=json",
        "-n",
        "sched:::on-cpu /n < 3/ { n++; printf(\"%d\", timestamp); }",
    ]);
    assert_eq!(code, 0, "{err}");
    let doc = parse(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let probes = match doc.get("dtrace").and_then(|d| d.get("probes")) {
        Some(Json::Array(p)) => p.clone(),
        other => panic!("no probes list: {other:?}\n{out}"),
    };
    assert_eq!(probes.len(), 3, "{out}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    for p in &probes {
        let ts = match p.get("timestamp") {
            Some(Json::UInt(t)) => *t,
            Some(Json::Int(t)) => *t as u64,
            other => panic!("timestamp {other:?} in {p:?}"),
        };
        let printed = match p.get("output") {
            Some(Json::Array(o)) => format!("{o:?}"),
            other => panic!("output {other:?}"),
        };
        assert!(
            printed.contains(&ts.to_string()),
            "the record's timestamp {ts} is not what printf printed: {printed}"
        );
        // the host's clock at replay is decades later than any trace's own time
        assert!(ts < now / 2, "{ts} looks like the host's clock ({now})");
    }
}

/// A trace's text reaches a terminal escaped: a process whose name carries escape sequences
/// (a title, a clear screen) is printed by `printf("%s")` with them written out, while the
/// script's own format text (its colours) is kept; into a pipe the bytes are dtrace's.
#[cfg(unix)]
#[test]
fn printf_strings_from_a_trace_are_escaped_on_a_terminal_only() {
    use crate::support::synthetic_etl::{self as synthetic, CpuRecords, START};
    let dir = tempfile::tempdir().unwrap();
    let mut c = CpuRecords::default();
    c.process(START + 1, 100, "ev\x1b]0;pwned\x07il\x1b[2j.exe");
    c.thread(START + 1, 100, 104);
    c.cswitch(START + 20, 104, 0);
    c.syscall_enter(START + 30, 0xfffff800_00001000);
    let trace = dir.path().join("names.etl");
    std::fs::write(&trace, synthetic::trace_bytes(&[c])).unwrap();
    let trace = trace.to_string_lossy().into_owned();
    let prog = r#"syscall:::entry { printf("\033[1m[%s]\033[0m\n", execname); exit(0); }"#;
    let args = ["-q", "-E", trace.as_str(), "-n", prog];
    // a pipe: dtrace's bytes
    let piped = crate::support::cli::Dtx::new(&args).output();
    assert!(piped.status.success(), "{piped:?}");
    let want = b"\x1b[1m[ev\x1b]0;pwned\x07il\x1b[2j.exe]\x1b[0m\n";
    assert!(piped.stdout.starts_with(want), "{:?}", piped.stdout);
    // a terminal: the value escaped, the format's own sequences kept
    let mut s =
        crate::support::pty::PtySession::spawn(crate::support::cli::DTX, &args, &[], 100, 10);
    assert_eq!(s.wait_exit(std::time::Duration::from_secs(30)), Some(0));
    let raw = s.raw.lock().unwrap().clone();
    let text = String::from_utf8_lossy(&raw);
    assert!(
        text.contains("\x1b[1m[ev\\x1b]0;pwned\\x07il\\x1b[2j.exe]\x1b[0m"),
        "{text:?}"
    );
    assert!(!text.contains("\x1b]0;pwned"), "{text:?}");
}

/// `--symbols -x oformat=json` is the table's report as one document: the same images, in
/// the same order, with the same frame counts and origins.
#[test]
fn symbols_report_as_json_is_the_table() {
    use dtx::output::json::{parse, Json};
    let text = cli::dtx_ok(&["--symbols", "-E", "demo"]);
    let doc = parse(cli::dtx_ok(&["--symbols", "-E", "demo", "-x", "oformat=json"]).trim())
        .expect("one JSON document");
    let Some(Json::Array(images)) = doc.get("images") else {
        panic!("no images: {doc:?}")
    };
    let rows: Vec<&str> = text
        .lines()
        .skip(1)
        .filter(|l| !l.contains(" images, "))
        .collect();
    assert_eq!(rows.len(), images.len(), "{text}");
    assert!(!images.is_empty());
    for (line, image) in rows.iter().zip(images) {
        let Some(Json::Str(module)) = image.get("module") else {
            panic!("{image:?}")
        };
        // a module name may hold blanks ("(no image)"): the frames follow it
        let rest = line
            .strip_prefix(module.as_str())
            .unwrap_or_else(|| panic!("{line} / {module}"));
        let f: Vec<&str> = rest.split_whitespace().collect();
        let frames = match image.get("frames") {
            Some(Json::UInt(n)) => n.to_string(),
            Some(Json::Int(n)) => n.to_string(),
            _ => "-".into(),
        };
        assert_eq!(f[0], frames, "{line}");
        let Some(Json::Str(kind)) = image.get("origin").and_then(|o| o.get("kind")) else {
            panic!("{image:?}")
        };
        assert!(line.contains(kind.as_str()), "{line} / {kind}");
    }
    let (code, _, err) = cli::run(&["--symbols", "-E", "demo", "-x", "oformat=xml"]);
    assert_ne!(code, 0);
    assert!(err.contains("the report is text or json"), "{err}");
}
