//! `dtx --mcp` driven by a real MCP client: Python's MCP SDK (PyPI `mcp`, pinned with hashes),
//! installed into a cached venv by scripts/mcp-test-env.sh; the tests skip, saying why, only
//! when that install is impossible here. The client initialises, lists the tools and resources,
//! runs a D program over the built-in trace (the values must be the CLI's, key by key), and
//! gets a D syntax error back as a tool error with its position and a `system()` program
//! refused without `-w` (and run with it).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::support::cli::{dtx_ok, DTX};
use crate::support::mcp::{int, list, s};
use dtx::output::json::{parse, Json};

/// The venv's python with the MCP SDK, or None after saying why it cannot be had.
fn client_python() -> Option<&'static PathBuf> {
    static PY: OnceLock<Option<PathBuf>> = OnceLock::new();
    PY.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/mcp-test-env.sh");
        let out = Command::new("bash")
            .arg(&script)
            .output()
            .expect("run mcp-test-env.sh");
        let se = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(2) {
            eprintln!("skipping the MCP client tests: {}", se.trim());
            return None;
        }
        assert!(out.status.success(), "mcp-test-env.sh failed: {se}");
        let so = String::from_utf8_lossy(&out.stdout);
        let py = so
            .lines()
            .find_map(|l| l.strip_prefix("PYTHON="))
            .unwrap_or_else(|| panic!("no PYTHON= in {so}"));
        Some(PathBuf::from(py))
    })
    .as_ref()
}

/// The client: one session with `dtx --mcp` (and `-w` when asked), the calls of the test, and
/// what came back as one JSON document on stdout.
const CLIENT: &str = r#"
import asyncio, json, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

PROGRAM = sys.argv[3]
SAVED, OTHER = sys.argv[4], sys.argv[5]

def text(res):
    return {"isError": bool(res.isError), "text": "".join(c.text for c in res.content if c.type == "text")}

async def main():
    args = ["--mcp"] + (["-w"] if sys.argv[2] == "w" else [])
    params = StdioServerParameters(command=sys.argv[1], args=args)
    out = {}
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            init = await s.initialize()
            out["protocol"] = str(init.protocolVersion)
            out["server"] = init.serverInfo.name
            tools = await s.list_tools()
            out["tools"] = sorted(t.name for t in tools.tools)
            out["run"] = text(await s.call_tool("run", {"program": PROGRAM, "trace": "demo"}))
            out["syntax"] = text(await s.call_tool("run", {"program": "BEGIN\n{\n  x = ;\n}", "trace": "demo"}))
            out["system"] = text(await s.call_tool("run", {"program": "BEGIN { system(\"true\"); exit(0); }", "trace": "demo"}))
            out["probes"] = text(await s.call_tool("list_probes", {"trace": "demo", "match": "sched:::on-cpu"}))
            out["symbols"] = text(await s.call_tool("symbols", {"trace": "demo"}))
            out["check"] = text(await s.call_tool("check", {}))
            out["diff_saved"] = text(await s.call_tool("diff", {"before": SAVED, "after": SAVED}))
            out["diff_shapes"] = text(await s.call_tool("diff", {"before": SAVED, "after": OTHER}))
            out["diff_rate"] = text(await s.call_tool("diff", {"before": SAVED, "after": SAVED, "per_second": True}))
            res = await s.list_resources()
            out["resources"] = [str(x.uri) for x in res.resources]
            first = await s.read_resource(res.resources[0].uri)
            out["resource_text"] = first.contents[0].text
    print(json.dumps(out))

asyncio.run(main())
"#;

const PROGRAM: &str = "sched:::on-cpu { @c[execname] = count(); @q = quantize(tid); }";
/// A program whose aggregations have another shape than PROGRAM's.
const OTHER_PROGRAM: &str = "sched:::on-cpu { @c[execname, cpu] = count(); }";

fn session(py: &Path, destructive: bool) -> Json {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("client.py");
    std::fs::write(&script, CLIENT).unwrap();
    // two saved results for the diff tool: the program's, and another program's
    let saved = dir.path().join("saved.json");
    let other = dir.path().join("other.json");
    for (f, prog) in [(&saved, PROGRAM), (&other, OTHER_PROGRAM)] {
        let doc = dtx_ok(&["-q", "-x", "oformat=json", "-E", "demo", "-n", prog]);
        std::fs::write(f, doc).unwrap();
    }
    let out = Command::new(py)
        .arg(&script)
        .arg(DTX)
        .arg(if destructive { "w" } else { "-" })
        .arg(PROGRAM)
        .arg(&saved)
        .arg(&other)
        .output()
        .expect("run the MCP client");
    let so = String::from_utf8_lossy(&out.stdout);
    let se = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the MCP client failed: {se}\n{so}");
    parse(so.trim()).unwrap_or_else(|e| panic!("{e}: {so}"))
}

#[test]
fn mcp_client_runs_d_over_the_demo_trace() {
    let Some(py) = client_python() else { return };
    let out = session(py, false);
    assert_eq!(s(&out, "server"), "dtx");
    assert_eq!(s(&out, "protocol").len(), 10, "a revision date");
    let tools: Vec<&str> = list(&out, "tools")
        .iter()
        .map(|t| match t {
            Json::Str(s) => s.as_str(),
            _ => "",
        })
        .collect();
    assert_eq!(tools, ["check", "diff", "list_probes", "run", "symbols"]);

    // the run's values are the CLI's, key by key
    let run = out.get("run").unwrap();
    assert_eq!(run.get("isError"), Some(&Json::Bool(false)), "{run:?}");
    let doc = parse(s(run, "text")).unwrap();
    let cli = parse(&dtx_ok(&[
        "-q",
        "-x",
        "oformat=json",
        "-E",
        "demo",
        "-n",
        PROGRAM,
    ]))
    .unwrap();
    let cli_aggs = list(cli.get("dtrace").unwrap(), "aggregations");
    let mut compared = 0;
    for a in list(&doc, "aggregations") {
        let name = s(a, "aggregation-name");
        let c = cli_aggs
            .iter()
            .find(|c| c.get("aggregation-name") == Some(&Json::str(name)))
            .unwrap_or_else(|| panic!("@{name} not in the CLI's output"));
        let rows = list(a, "rows");
        assert_eq!(
            rows.len(),
            list(c, "aggregation-data").len(),
            "@{name} rows"
        );
        for r in rows {
            let key: Vec<Json> = list(r, "keys").to_vec();
            let cr = list(c, "aggregation-data")
                .iter()
                .find(|cr| {
                    let ck: Vec<Json> = list(cr, "keys")
                        .iter()
                        .map(|k| k.get("value").cloned().unwrap())
                        .collect();
                    ck == key
                })
                .unwrap_or_else(|| panic!("@{name}{key:?} not in the CLI's output"));
            let cv = cr
                .get("count")
                .map(|v| int(Some(v)))
                .unwrap_or_else(|| int(cr.get("total")));
            assert_eq!(int(r.get("value")), cv, "@{name}{key:?}");
            if let Some(Json::Array(b)) = r.get("buckets") {
                assert_eq!(b, list(cr, "buckets"), "@{name} buckets");
            }
            compared += 1;
        }
    }
    assert!(compared > 10, "{compared} rows compared");

    // a syntax error: a tool error with dtx's message and line
    let syn = out.get("syntax").unwrap();
    assert_eq!(syn.get("isError"), Some(&Json::Bool(true)));
    let t = s(syn, "text");
    assert!(t.contains("[D_SYNTAX]") && t.contains("line 3"), "{t}");

    // system() refused without -w
    let sys = out.get("system").unwrap();
    assert_eq!(sys.get("isError"), Some(&Json::Bool(true)));
    assert!(s(sys, "text").contains("started without -w"), "{sys:?}");

    // list_probes over the trace: the probe and how often it fired (as the run counted)
    let probes = parse(s(out.get("probes").unwrap(), "text")).unwrap();
    let p = &list(&probes, "probes")[0];
    assert_eq!((s(p, "provider"), s(p, "name")), ("sched", "on-cpu"));
    let total: i64 = list(&doc, "aggregations")
        .iter()
        .find(|a| s(a, "aggregation-name") == "c")
        .map(|a| list(a, "rows").iter().map(|r| int(r.get("value"))).sum())
        .unwrap();
    assert_eq!(int(p.get("fired")), total);

    // symbols: the --symbols report of the trace, image by image as the CLI gives it
    let sym = out.get("symbols").unwrap();
    assert_eq!(sym.get("isError"), Some(&Json::Bool(false)), "{sym:?}");
    let sym = parse(s(sym, "text")).unwrap();
    let cli = parse(&dtx_ok(&["--symbols", "-E", "demo", "-x", "oformat=json"])).unwrap();
    assert_eq!(sym, cli, "the tool's report is the CLI's");
    let images = list(&sym, "images");
    assert!(
        images.iter().any(
            |i| matches!(i.get("frames"), Some(Json::Int(_) | Json::UInt(_)))
                && int(i.get("frames")) > 0
        ),
        "no image with frames among {}",
        images.len()
    );

    // check: the --check document, each facility with a result the CLI knows
    let chk = out.get("check").unwrap();
    assert_eq!(chk.get("isError"), Some(&Json::Bool(false)), "{chk:?}");
    let chk = parse(s(chk, "text")).unwrap();
    let checks = list(&chk, "checks");
    assert!(checks.len() >= 3, "{checks:?}");
    for c in checks {
        assert!(["pass", "fail", "skip"].contains(&s(c, "result")), "{c:?}");
    }
    assert!(int(chk.get("status")) >= 0);

    // diff of two saved results: a result against itself changes nothing, and the tool's
    // document is `dtx --diff`'s of the same files
    let d = out.get("diff_saved").unwrap();
    assert_eq!(d.get("isError"), Some(&Json::Bool(false)), "{d:?}");
    let doc = parse(s(d, "text")).unwrap();
    let d = doc.get("dtx-diff").unwrap_or_else(|| panic!("{doc:?}"));
    let diffs = list(d, "aggregations");
    assert!(!diffs.is_empty(), "{d:?}");
    let mut rows = 0;
    for a in diffs {
        for r in list(a, "rows") {
            assert!(
                matches!(
                    r.get("change"),
                    Some(Json::Int(0) | Json::UInt(0)) | Some(Json::Float(0.0))
                ),
                "{r:?}"
            );
            assert_eq!(r.get("before"), r.get("after"), "{r:?}");
            rows += 1;
        }
    }
    assert!(rows > 10, "{rows} rows");
    // the saved results, written again for the CLI, give the same document
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("saved.json");
    std::fs::write(
        &f,
        dtx_ok(&["-q", "-x", "oformat=json", "-E", "demo", "-n", PROGRAM]),
    )
    .unwrap();
    let f = f.to_str().unwrap();
    let cli = parse(&dtx_ok(&["--diff", "-x", "oformat=json", f, f])).unwrap();
    assert_eq!(
        cli.get("dtx-diff").map(|c| list(c, "aggregations")),
        Some(diffs),
        "the tool's aggregations are the CLI's"
    );
    // other shapes are refused as the CLI refuses them; a rate needs the runs' lengths
    let sh = out.get("diff_shapes").unwrap();
    assert_eq!(sh.get("isError"), Some(&Json::Bool(true)), "{sh:?}");
    assert!(s(sh, "text").contains("@c"), "{sh:?}");
    let rate = out.get("diff_rate").unwrap();
    assert_eq!(rate.get("isError"), Some(&Json::Bool(true)), "{rate:?}");
    assert!(s(rate, "text").contains("before_seconds"), "{rate:?}");

    // resources: the dscripts library
    let res = list(&out, "resources");
    assert!(res.len() > 10, "{res:?}");
    assert!(res
        .iter()
        .all(|r| matches!(r, Json::Str(u) if u.starts_with("dtx://dscripts/"))));
    assert!(s(&out, "resource_text").contains("::"), "a D script");
}

#[test]
fn mcp_with_w_runs_destructive_programs() {
    let Some(py) = client_python() else { return };
    let out = session(py, true);
    let sys = out.get("system").unwrap();
    assert_eq!(sys.get("isError"), Some(&Json::Bool(false)), "{sys:?}");
}

/// `run` without a trace traces live (on Linux the live clock and perf events, handed in by
/// the command line), and `list_probes` without one lists the live probes.
#[cfg(target_os = "linux")]
#[test]
fn mcp_runs_live_without_a_trace() {
    let answers = crate::support::mcp::tool_calls_by_hand(&[
        (
            "run",
            Json::object([
                ("program", Json::str("profile-97 { @ticks = count(); }")),
                ("seconds", Json::Float(1.5)),
            ]),
        ),
        (
            "list_probes",
            Json::object([("match", Json::str("syscall::getppid:entry"))]),
        ),
    ]);
    let (run, err) = &answers[0];
    assert!(!err, "{run:?}");
    assert_eq!(s(run, "source"), "live", "{run:?}");
    let aggs = list(run, "aggregations");
    let ticks = aggs
        .iter()
        .find(|a| s(a, "aggregation-name") == "ticks")
        .unwrap_or_else(|| panic!("no @ticks: {run:?}"));
    let n = int(list(ticks, "rows").first().and_then(|r| r.get("value")));
    // 97 Hz on every CPU for 1.5 s: far more than one, far fewer than a second's worth times 10
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as i64;
    assert!(n > 20 && n < 97 * 2 * cpus, "{n} ticks: {run:?}");
    let (probes, err) = &answers[1];
    assert!(!err, "{probes:?}");
    assert_eq!(int(probes.get("matched")), 1, "{probes:?}");
}
