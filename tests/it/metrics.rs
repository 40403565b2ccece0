//! The Prometheus exporter (`-x metrics=HOST:PORT`, docs/metrics.md) end to end: `dtx` serves a
//! program's aggregations over a trace; a plain HTTP client, `promtool check metrics` and a
//! real Prometheus (Debian's, installed by scripts/prometheus-test-env.sh when missing; the
//! tests that need it skip, saying why, only when it cannot be had) read them back, and every
//! value must equal what dtx's own `printa()` prints for the same program over the same trace.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::support::cli::{dtx, Dtx};
use crate::support::etl;

/// Debian's `prometheus` and `promtool`, or None after saying why they cannot be had.
fn tools() -> Option<&'static (PathBuf, PathBuf)> {
    static T: OnceLock<Option<(PathBuf, PathBuf)>> = OnceLock::new();
    T.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/prometheus-test-env.sh");
        let out = Command::new("bash")
            .arg(&script)
            .output()
            .expect("run prometheus-test-env.sh");
        let so = String::from_utf8_lossy(&out.stdout);
        let se = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(2) {
            eprintln!("skipping: {}", se.trim());
            return None;
        }
        assert!(out.status.success(), "prometheus-test-env.sh failed: {se}");
        let var = |k: &str| {
            so.lines()
                .find_map(|l| l.strip_prefix(k))
                .map(PathBuf::from)
                .unwrap_or_else(|| panic!("no {k} in {so}"))
        };
        Some((var("PROMETHEUS="), var("PROMTOOL=")))
    })
    .as_ref()
}

/// A running exporter: the child, and the address it said it serves on.
struct Exporter {
    child: Child,
    addr: String,
}

impl Exporter {
    /// Starts `dtx -x metrics=127.0.0.1:0 args...` and waits for its address line, and (over a
    /// trace) for the line saying the trace has ended.
    fn start(args: &[&str]) -> Exporter {
        Self::start_until(args, true)
    }

    fn start_until(args: &[&str], trace_end: bool) -> Exporter {
        let mut all = vec!["-x", "metrics=127.0.0.1:0"];
        all.extend_from_slice(args);
        let mut child = Dtx::new(&all).spawn();
        let err = child.stderr.take().expect("stderr");
        // held from here, so that a failed wait below kills the exporter rather than leave it
        // serving after the test
        let mut ex = Exporter {
            child,
            addr: String::new(),
        };
        let (tx, said) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        let mut addr = None;
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let Ok(l) = said.recv_timeout(Duration::from_millis(200)) else {
                continue;
            };
            if let Some(rest) = l.strip_prefix("dtx: serving metrics on http://") {
                addr = rest.strip_suffix("/metrics").map(str::to_string);
                if !trace_end {
                    break;
                }
            }
            if l.contains("the trace has ended") {
                break;
            }
            assert!(!l.contains("cannot serve"), "dtx said: {l}");
        }
        ex.addr = addr.expect("dtx printed the address it serves on");
        ex
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// GET `path` from `addr` with an `Accept` header: (status code, headers, body).
fn get(addr: &str, path: &str, accept: Option<&str>) -> (u32, String, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).ok();
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n{accept}\r\n").expect("send");
    let mut bytes = Vec::new();
    s.read_to_end(&mut bytes).expect("read");
    let text = String::from_utf8(bytes).expect("utf-8");
    let (head, body) = text.split_once("\r\n\r\n").expect("a response");
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status");
    (code, head.to_string(), body.to_string())
}

/// `name{labels} value` lines of an exposition for one sample name: labels text → value.
fn samples(expo: &str, name: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for l in expo.lines() {
        let Some(rest) = l.strip_prefix(name) else {
            continue;
        };
        let (labels, value) = if let Some(r) = rest.strip_prefix('{') {
            let (l, v) = r.split_once("} ").expect("labels");
            (l.to_string(), v)
        } else if let Some(v) = rest.strip_prefix(' ') {
            (String::new(), v)
        } else {
            continue;
        };
        out.insert(labels, value.parse::<f64>().expect("a number"));
    }
    out
}

/// printa's default rows of a one-key count(): key → count.
fn printa_rows(out: &str) -> BTreeMap<String, f64> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (k, v) = l.trim().rsplit_once(char::is_whitespace).expect("a row");
            (k.trim().to_string(), v.parse().expect("count"))
        })
        .collect()
}

const ONCPU: &str = "sched:::on-cpu { @oncpu[execname] = count(); }";

#[test]
fn metrics_curl_over_the_built_in_trace_equals_printa() {
    let printed = dtx(&["-q", "-E", "demo", "-n", ONCPU]);
    assert!(printed.status.success());
    let want = printa_rows(&String::from_utf8_lossy(&printed.stdout));
    assert!(want.len() > 10, "{want:?}");
    let ex = Exporter::start(&["-q", "-E", "demo", "-n", ONCPU]);
    assert!(ex.addr.starts_with("127.0.0.1:"), "{}", ex.addr);
    let (code, head, body) = get(&ex.addr, "/metrics", None);
    assert_eq!(code, 200, "{head}");
    assert!(
        head.contains("text/plain; version=0.0.4; charset=utf-8"),
        "{head}"
    );
    let got: BTreeMap<String, f64> = samples(&body, "dtx_oncpu_total")
        .into_iter()
        .map(|(l, v)| {
            let k = l.strip_prefix("key1=\"").and_then(|l| l.strip_suffix('"'));
            (k.expect("key1 label").to_string(), v)
        })
        .collect();
    assert_eq!(got, want);
    assert!(body.contains("# TYPE dtx_oncpu_total counter\n"), "{body}");
    assert!(body.contains("dtx_build_info{version="), "{body}");
    // OpenMetrics when asked for, as Prometheus asks
    let (_, head, om) = get(
        &ex.addr,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
    );
    assert!(
        head.contains("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        "{head}"
    );
    assert!(om.contains("# TYPE dtx_oncpu counter\n"), "{om}");
    assert!(om.ends_with("# EOF\n"), "{om}");
    assert_eq!(samples(&om, "dtx_oncpu_total").len(), want.len());
    // anything else is not found
    assert_eq!(get(&ex.addr, "/nope", None).0, 404);
}

#[test]
fn metrics_bind_failure_is_an_error_before_tracing() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let out = dtx(&[
        "-x",
        &format!("metrics=127.0.0.1:{port}"),
        "-E",
        "demo",
        "-n",
        ONCPU,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!("cannot serve metrics on 127.0.0.1:{port}")),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "nothing traced: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    // a script may not choose where dtx listens
    let out = dtx(&[
        "-x",
        "metrics=127.0.0.1:0",
        "-E",
        "demo",
        "-n",
        "#pragma D option metrics=0.0.0.0:80\nBEGIN { @a = count(); }",
    ]);
    assert!(!out.status.success());
    // a bad mapping option is refused before the run
    let out = dtx(&[
        "-x",
        "metrics=127.0.0.1:0",
        "-x",
        "metriclabels=@oncpu:a,b",
        "-E",
        "demo",
        "-n",
        ONCPU,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("1 key(s), 2 label"),
        "{err}"
    );
}

#[test]
fn metrics_a_client_that_never_reads_stalls_nothing() {
    let ex = Exporter::start(&["-q", "-E", "demo", "-n", ONCPU]);
    // connections that send a request and never read the answer, and one that sends nothing
    let mut stalled = Vec::new();
    for _ in 0..8 {
        let mut s = TcpStream::connect(&ex.addr).expect("connect");
        let _ = write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        stalled.push(s);
    }
    stalled.push(TcpStream::connect(&ex.addr).expect("connect"));
    let started = Instant::now();
    let (code, _, body) = get(&ex.addr, "/metrics", None);
    assert_eq!(code, 200);
    assert!(body.contains("dtx_oncpu_total"), "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    drop(stalled);
}

/// One clause per aggregating function; each is also run alone in a batch run for its printa.
const FUNCS: &[(&str, &str)] = &[
    ("oncpu", "@oncpu[execname] = count();"),
    ("pidsum", "@pidsum[cpu] = sum(pid);"),
    ("mn", "@mn = min(pid);"),
    ("mx", "@mx = max(pid);"),
    ("av", "@av = avg(pid);"),
    ("sd", "@sd = stddev(pid);"),
    ("q", "@q = quantize(pid);"),
    ("lq", "@lq = lquantize(cpu, 0, 8, 1);"),
    ("llq", "@llq = llquantize(tid, 10, 0, 6, 10);"),
];

/// A histogram's printa rows: (lower label, count); `< x` rows as i64::MIN.
fn printa_histogram(out: &str) -> Vec<(i64, u64)> {
    out.lines()
        .filter_map(|l| {
            let (label, rest) = l.split_once('|')?;
            let label = label.trim();
            let count: u64 = rest.split_whitespace().last()?.parse().ok()?;
            let v = if label.starts_with('<') {
                i64::MIN
            } else {
                label.trim_start_matches(">=").trim().parse().ok()?
            };
            Some((v, count))
        })
        .collect()
}

/// Prometheus's HTTP API: the instant vector of `query` as (labels, value) pairs.
fn promql(prom: &str, query: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    let q: String = query
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let (code, _, body) = get(prom, &format!("/api/v1/query?query={q}"), None);
    assert_eq!(code, 200, "{query}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["status"], "success", "{body}");
    v["data"]["result"]
        .as_array()
        .expect("a vector")
        .iter()
        .map(|r| {
            let labels = r["metric"]
                .as_object()
                .expect("labels")
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect();
            let value = r["value"][1]
                .as_str()
                .expect("value")
                .parse()
                .expect("number");
            (labels, value)
        })
        .collect()
}

/// The server, and its configuration and storage (removed with it).
struct Prometheus(Child, #[allow(dead_code)] tempfile::TempDir);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

#[test]
fn metrics_prometheus_scrapes_what_printa_prints() {
    let Some((prometheus, promtool)) = tools() else {
        return;
    };
    let Some(trace) = etl::trace("randomascii_slow_ppt_trace.etl.zip") else {
        return;
    };
    let body: String = FUNCS.iter().map(|(_, s)| *s).collect::<Vec<_>>().join(" ");
    let program = format!(
        "#pragma D option metriclabels=@oncpu:execname\n#pragma D option metriclabels=@pidsum:cpu\nsched:::on-cpu {{ {body} }}"
    );
    let ex = Exporter::start(&["-q", "-E", &trace, "-n", &program]);
    // the text format passes promtool's parser
    let (_, _, text) = get(&ex.addr, "/metrics", None);
    let mut check = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    check
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let checked = check.wait_with_output().expect("promtool ran");
    assert!(
        checked.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    // a Prometheus of its own scrapes dtx every 500 ms (OpenMetrics: Prometheus 2.42 asks
    // for it first, and its parser rejects a scrape that breaks the format)
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\nscrape_configs:\n  - job_name: dtx\n    static_configs:\n      - targets: ['{}']\n",
            ex.addr
        ),
    )
    .expect("config");
    let prom_addr = format!("127.0.0.1:{}", free_port());
    let child = Command::new(prometheus)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={prom_addr}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");
    let prom = Prometheus(child, dir);
    // two successful scrapes
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        assert!(
            Instant::now() < deadline,
            "Prometheus did not scrape dtx twice"
        );
        std::thread::sleep(Duration::from_millis(500));
        if TcpStream::connect(&prom_addr).is_err() {
            continue;
        }
        let up = promql(&prom_addr, "sum_over_time(up{job=\"dtx\"}[5m])");
        let scraped = promql(&prom_addr, "count_over_time(up{job=\"dtx\"}[5m])");
        if let (Some((_, u)), Some((_, n))) = (up.first(), scraped.first()) {
            assert_eq!(
                u, n,
                "a scrape failed (up == 0): the exposition did not parse"
            );
            if *n >= 2.0 {
                break;
            }
        }
    }
    for (name, clause) in FUNCS {
        let out = dtx(&[
            "-q",
            "-E",
            &trace,
            "-n",
            &format!("sched:::on-cpu {{ {clause} }}"),
        ]);
        assert!(out.status.success());
        let printed = String::from_utf8_lossy(&out.stdout).into_owned();
        match *name {
            "oncpu" | "pidsum" => {
                let label = if *name == "oncpu" { "execname" } else { "cpu" };
                let got: BTreeMap<String, f64> = promql(&prom_addr, &format!("dtx_{name}_total"))
                    .into_iter()
                    .map(|(l, v)| (l[label].clone(), v))
                    .collect();
                assert_eq!(got, printa_rows(&printed), "@{name}");
            }
            "mn" | "mx" | "av" | "sd" => {
                let want: f64 = printed.trim().parse().expect("a number");
                let got = promql(&prom_addr, &format!("dtx_{name}"));
                assert_eq!(got.len(), 1, "@{name}: {got:?}");
                let v = got[0].1;
                match *name {
                    // printa prints the mean and the deviation as integers
                    "av" => assert_eq!(v.trunc(), want, "@{name}"),
                    "sd" => assert!((v - want).abs() < 1.0, "@{name}: {v} vs {want}"),
                    _ => assert_eq!(v, want, "@{name}"),
                }
            }
            _ => {
                let rows = printa_histogram(&printed);
                assert!(rows.iter().any(|r| r.1 > 0), "@{name}: {printed}");
                let buckets = promql(&prom_addr, &format!("dtx_{name}_bucket"));
                assert!(buckets.len() >= 2, "@{name}: {buckets:?}");
                let total: u64 = rows.iter().map(|r| r.1).sum();
                let mut last = 0.0;
                let mut by_le: Vec<(f64, f64)> = buckets
                    .iter()
                    .map(|(l, v)| {
                        let le = &l["le"];
                        (
                            if le == "+Inf" {
                                f64::INFINITY
                            } else {
                                le.parse().expect("le")
                            },
                            *v,
                        )
                    })
                    .collect();
                by_le.sort_by(|a, b| a.0.total_cmp(&b.0));
                for (le, v) in by_le {
                    // cumulative: every printa row at or below the bound
                    let want: u64 = if le.is_infinite() {
                        total
                    } else {
                        rows.iter()
                            .filter(|r| (r.0 as f64) <= le)
                            .map(|r| r.1)
                            .sum()
                    };
                    assert_eq!(v, want as f64, "@{name} le={le}");
                    assert!(v >= last, "@{name}: buckets are cumulative");
                    last = v;
                }
                assert_eq!(last, total as f64, "@{name}: +Inf holds every value");
            }
        }
    }
    // dtx's own counters came along
    let firings = promql(&prom_addr, "dtx_metrics_firings_total");
    assert!(firings.first().is_some_and(|f| f.1 > 0.0), "{firings:?}");
    // the dashboard's queries are PromQL that this Prometheus accepts
    let dash = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("dscripts/metrics/grafana-dashboard.json"),
    )
    .expect("the dashboard");
    let dash: serde_json::Value = serde_json::from_str(&dash).expect("dashboard json");
    let mut queries = 0;
    for p in dash["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().expect("targets") {
            let expr = t["expr"].as_str().expect("expr").replace("$instance", ".*");
            promql(&prom_addr, &expr);
            queries += 1;
        }
    }
    assert!(queries >= 6, "{queries}");
    drop(prom);
}

#[test]
fn metrics_a_fault_in_a_clause_loses_no_aggregation() {
    let prog = "sched:::on-cpu { @c = count(); } sched:::on-cpu /cpu == 0/ { trace(*(int *)0); }";
    let printed = dtx(&["-q", "-E", "demo", "-n", prog]);
    let out = String::from_utf8_lossy(&printed.stdout);
    let want: f64 = out.trim().parse().expect("printa's count");
    assert!(
        String::from_utf8_lossy(&printed.stderr).contains("invalid address"),
        "the clause faults: {}",
        String::from_utf8_lossy(&printed.stderr)
    );
    let ex = Exporter::start(&["-q", "-E", "demo", "-n", prog]);
    let (_, _, body) = get(&ex.addr, "/metrics", None);
    assert_eq!(samples(&body, "dtx_c_total").get(""), Some(&want), "{body}");
    let errors = samples(&body, "dtx_metrics_errors_total");
    assert!(errors.get("").is_some_and(|&e| e > 0.0), "{body}");
}

#[test]
fn metrics_a_drop_loses_no_aggregation() {
    // a dynamic variable space too small for one key per firing: most stores drop
    let prog = "sched:::on-cpu { seen[tid, timestamp] = 1; @c = count(); }";
    let args = ["-q", "-x", "dynvarsize=4k", "-E", "demo", "-n", prog];
    let printed = dtx(&args);
    let out = String::from_utf8_lossy(&printed.stdout);
    let want: f64 = out.trim().parse().expect("printa's count");
    let said = String::from_utf8_lossy(&printed.stderr);
    assert!(
        said.contains("dynamic variable drops"),
        "the run drops: {said}"
    );
    let ex = Exporter::start(&args);
    let (_, _, body) = get(&ex.addr, "/metrics", None);
    assert_eq!(samples(&body, "dtx_c_total").get(""), Some(&want), "{body}");
    let drops = samples(&body, "dtx_metrics_drops_total");
    assert!(drops.get("").is_some_and(|&d| d > 0.0), "{body}");
}

/// Live on Linux: the test's own getppid() calls, counted by perf events and served as they
/// happen.
#[cfg(target_os = "linux")]
#[test]
fn metrics_live_syscalls_by_execname() {
    if let Err(e) = dtx::sources::perf::live::available() {
        eprintln!("skipping: perf events unavailable ({e})");
        return;
    }
    let me = std::process::id();
    let comm = std::fs::read_to_string("/proc/thread-self/comm").expect("comm");
    let prog = format!(
        "#pragma D option metriclabels=@calls:execname\nsyscall::getppid:entry /pid == {me}/ {{ @calls[execname] = count(); }}"
    );
    let ex = Exporter::start_until(&["-q", "-n", &prog], false);
    let calls = |body: &str| -> Option<f64> {
        samples(body, "dtx_calls_total")
            .get(&format!("execname=\"{}\"", comm.trim()))
            .copied()
    };
    // tracing is live once a call shows
    let deadline = Instant::now() + Duration::from_secs(30);
    let before = loop {
        assert!(Instant::now() < deadline, "no getppid() call was counted");
        let _ = std::os::unix::process::parent_id();
        std::thread::sleep(Duration::from_millis(20));
        if let Some(v) = calls(&get(&ex.addr, "/metrics", None).2) {
            std::thread::sleep(Duration::from_millis(500));
            break calls(&get(&ex.addr, "/metrics", None).2).unwrap_or(v);
        }
    };
    for _ in 0..1000 {
        let _ = std::os::unix::process::parent_id();
    }
    // the values as they stand: exactly 1000 more, within a few refreshes
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut now = before;
    while Instant::now() < deadline && now < before + 1000.0 {
        std::thread::sleep(Duration::from_millis(100));
        now = calls(&get(&ex.addr, "/metrics", None).2).unwrap_or(now);
    }
    std::thread::sleep(Duration::from_millis(300));
    let (_, _, body) = get(&ex.addr, "/metrics", None);
    assert_eq!(calls(&body), Some(before + 1000.0), "{body}");
}

/// The target of the `-c`/`-p` tests: waits for the file `argv[2]` (`-`: none), makes
/// `argv[1]` getppid() calls, waits for `argv[3]`, and exits 0.
#[cfg(target_os = "linux")]
const GATED_CALLS: &str = r#"
#include <stdlib.h>
#include <unistd.h>
static void wait_for(const char *p) { if (p[0] == '-') return; while (access(p, F_OK) != 0) usleep(10000); }
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    wait_for(argv[2]);
    for (long i = 0; i < n; i++) getppid();
    wait_for(argv[3]);
    return 0;
}
"#;

/// Polls `/metrics` until `dtx_calls_total{key1="getppid"}` stops short of nothing: the value
/// once it has been `want` for half a second (or what it is at the deadline).
#[cfg(target_os = "linux")]
fn settled_calls(addr: &str, want: f64) -> Option<f64> {
    let calls = |body: &str| {
        samples(body, "dtx_calls_total")
            .get("key1=\"getppid\"")
            .copied()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut now = None;
    while Instant::now() < deadline && now != Some(want) {
        std::thread::sleep(Duration::from_millis(100));
        now = calls(&get(addr, "/metrics", None).2).or(now);
    }
    std::thread::sleep(Duration::from_millis(500));
    calls(&get(addr, "/metrics", None).2).or(now)
}

/// Waits for the exporter to end by itself (its target exited) and gives its status and what
/// it printed.
#[cfg(target_os = "linux")]
fn ended_by_itself(ex: &mut Exporter) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(Some(st)) = ex.child.try_wait() {
            let mut out = String::new();
            if let Some(mut o) = ex.child.stdout.take() {
                let _ = o.read_to_string(&mut out);
            }
            return (st.code(), out);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the exporter did not end when its target exited");
}

/// `-x metrics` with `-c`: the started process's calls (`$target`) are served while it runs,
/// exactly; when it exits the exporter ends, as `dtrace -c` does, printing the same value.
#[cfg(target_os = "linux")]
#[test]
fn metrics_serves_a_process_started_with_c() {
    let Some(env) = crate::support::ctarget::Env::new("metrics with -c") else {
        return;
    };
    let Some(bin) = env.build("gated", GATED_CALLS, &["-O0"], &[]) else {
        return;
    };
    let go = env.dir().join("go");
    let cmd = format!("{} 4321 - {}", bin.display(), go.display());
    let prog = "syscall::getppid:entry /pid == $target/ { @calls[probefunc] = count(); }";
    let mut ex = Exporter::start_until(&["-q", "-c", &cmd, "-n", prog], false);
    assert_eq!(settled_calls(&ex.addr, 4321.0), Some(4321.0));
    std::fs::write(&go, "").unwrap();
    let (code, out) = ended_by_itself(&mut ex);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(printa_rows(&out).get("getppid"), Some(&4321.0), "{out}");
}

/// `-x metrics` with `-p`: a running process is grabbed, its calls served exactly, and it is
/// let go running: it exits by itself, with its own status, after the exporter has ended.
#[cfg(target_os = "linux")]
#[test]
fn metrics_serves_a_grabbed_process_and_lets_it_run() {
    let Some(env) = crate::support::ctarget::Env::new("metrics with -p") else {
        return;
    };
    let Some(bin) = env.build("gated", GATED_CALLS, &["-O0"], &[]) else {
        return;
    };
    let (start, go) = (env.dir().join("start"), env.dir().join("go"));
    let mut target = Command::new(&bin)
        .arg("2468")
        .arg(&start)
        .arg(&go)
        .spawn()
        .expect("the target starts");
    struct Reap(Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let pid = target.id().to_string();
    let prog = "syscall::getppid:entry /pid == $target/ { @calls[probefunc] = count(); }";
    let ex = Exporter::start_until(&["-q", "-p", &pid, "-n", prog], false);
    std::fs::write(&start, "").unwrap();
    assert_eq!(settled_calls(&ex.addr, 2468.0), Some(2468.0));
    // Ctrl-C ends the exporter with the target still running; it is let go, not killed
    let mut ex = ex;
    // SAFETY: a signal to the exporter this test started (still its child, not reaped).
    unsafe { libc::kill(ex.child.id() as i32, libc::SIGINT) };
    let (code, out) = ended_by_itself(&mut ex);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(printa_rows(&out).get("getppid"), Some(&2468.0), "{out}");
    std::fs::write(&go, "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(st) = target.try_wait().unwrap() {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "the grabbed process did not run on"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let _reap = Reap(target);
    assert_eq!(
        status.code(),
        Some(0),
        "the grabbed process survives the exporter"
    );
}

/// dtx's own counters on Linux live: with every clause in user space (`-x bpf=off`, which the
/// exporter takes from the command line as a batch run does), each of the target's calls is
/// an event read and a firing run, so both are at least the count served (other processes'
/// `getppid` calls fire the probe too and fail the predicate). They read 0 when the session
/// ignored the program's options and never counted perf records.
#[cfg(target_os = "linux")]
#[test]
fn metrics_own_counters_count_what_user_space_read() {
    let Some(env) = crate::support::ctarget::Env::new("metrics own counters") else {
        return;
    };
    let Some(bin) = env.build("gated", GATED_CALLS, &["-O0"], &[]) else {
        return;
    };
    let go = env.dir().join("go");
    let cmd = format!("{} 3210 - {}", bin.display(), go.display());
    let prog = "syscall::getppid:entry /pid == $target/ { @calls[probefunc] = count(); }";
    let mut ex = Exporter::start_until(&["-q", "-x", "bpf=off", "-c", &cmd, "-n", prog], false);
    assert_eq!(settled_calls(&ex.addr, 3210.0), Some(3210.0));
    let (_, _, body) = get(&ex.addr, "/metrics", None);
    let own = |name: &str| samples(&body, name).get("").copied().unwrap_or(-1.0);
    let (events, firings) = (
        own("dtx_metrics_events_total"),
        own("dtx_metrics_firings_total"),
    );
    assert!(firings >= 3210.0, "firings {firings}:\n{body}");
    assert!(
        events >= firings,
        "events {events}, firings {firings}:\n{body}"
    );
    std::fs::write(&go, "").unwrap();
    let (code, out) = ended_by_itself(&mut ex);
    assert_eq!(code, Some(0), "{out}");
}
