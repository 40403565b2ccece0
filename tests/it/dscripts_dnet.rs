//! The `dnet` provider and the .NET/DNS scripts over the real traces of `../shared/etl`:
//! * every `dnet` probe fires once per event of its (provider, id) in `expected_counts.json`;
//! * GC and JIT arguments decode (from EventMetadata on the net.4.5.2 traces, from dtx's own
//!   runtime manifest on the gcevents/diaghub traces, which carry none);
//! * `dscripts/dnet/*.d` and `dscripts/dns/*.d` match their golden output in `tests/golden/`
//!   (`UPDATE_GOLDEN=1` rewrites it after an intended change).
//!
//! Skips, with a message, when `../shared/etl` is absent.

use std::collections::BTreeMap;
use std::path::PathBuf;

use dtx::providers::etw::dnet::{arg0_xlate, PROBES, RUNDOWN, RUNTIME};

fn shared() -> Option<PathBuf> {
    crate::support::etl::folder("etl", "expected_counts.json")
}

use crate::support::cli;
use cli::dtx_ok;

/// Events of `provider`/`id` in one file of `expected_counts.json` (all opcodes).
fn expected(json: &str, file: &str, provider: &str, id: u16) -> u64 {
    let Some(start) = json.find(&format!("\"{file}\": {{")) else {
        panic!("{file} not in expected_counts.json");
    };
    // the section ends where the next file's "file" field starts
    let own = start + json[start..].find("\"file\": \"").unwrap() + 1;
    let end = json[own..]
        .find("\"file\": \"")
        .map_or(json.len(), |n| own + n);
    let section = &json[start..end];
    let key = format!("\"{provider}/{id}/");
    let mut total = 0;
    let mut rest = section;
    while let Some(i) = rest.find(&key) {
        let after = &rest[i + key.len()..];
        let colon = after.find(": ").unwrap() + 2;
        let digits: String = after[colon..]
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        total += digits.parse::<u64>().unwrap();
        rest = &after[colon..];
    }
    total
}

#[test]
fn dnet_probes_fire_once_per_runtime_event() {
    let Some(dir) = shared() else { return };
    let json = std::fs::read_to_string(dir.join("expected_counts.json")).unwrap();
    let diaghub = "perfview_diaghub-dotnetcore3.1-win-x64-diagsession.zip:\
                   diaghub-dotnetcore3.1-win-x64-diagsession/diaghub.user_paged.1.etl";
    let cases = [
        (
            "perfview_net.4.5.2.x64.etl.zip".to_string(),
            "net.4.5.2.x64.etl",
        ),
        (
            "perfview_net.4.5.2.x86.etl.zip".to_string(),
            "net.4.5.2.x86.etl",
        ),
        (
            "perfview_gcevents.etl.zip".to_string(),
            "gcevents/PerfViewData.etl",
        ),
        (
            "perfview_gcrundownevents.etl.zip".to_string(),
            "gcrundownevents/PerfViewData.clrRundown.etl",
        ),
        (
            diaghub.to_string(),
            "diaghub-dotnetcore3.1-win-x64-diagsession/diaghub.user_paged.1.etl",
        ),
    ];
    for (spec, key) in cases {
        let trace = format!("{}/{spec}", dir.display());
        let out = dtx_ok(&[
            "-q",
            "-E",
            &trace,
            "-n",
            "dnet::: { @[probefunc, probename] = count(); } \
             END { printa(\"%s:%s %@d\\n\", @); }",
        ]);
        let got: BTreeMap<String, u64> = out
            .lines()
            .filter_map(|l| {
                let (k, v) = l.trim().split_once(' ')?;
                Some((k.to_string(), v.parse().ok()?))
            })
            .collect();
        let mut fired = 0;
        for p in PROBES {
            let provider = if p.rundown { RUNDOWN } else { RUNTIME };
            let want = expected(&json, key, &provider.to_string(), p.event);
            let name = format!("{}:{}", p.function, p.name);
            assert_eq!(
                got.get(&name).copied().unwrap_or(0),
                want,
                "{key}: dnet::{name} (event {})",
                p.event
            );
            fired += want;
        }
        assert!(fired > 0, "{key}: no dnet probe fired");
    }
}

#[test]
fn gc_and_jit_arguments_decode() {
    let Some(dir) = shared() else { return };
    // gcevents has no EventMetadata: GCStart v2 decodes through dtx's runtime manifest
    let gc = dtx_ok(&[
        "-q",
        "-E",
        &format!("{}/perfview_gcevents.etl.zip", dir.display()),
        "-n",
        "dnet::gc:gc-start { printf(\"%d %d %d %d %d\\n\", arg4, arg5, arg6, arg7, \
         etwfield(\"ClrInstanceID\")); }",
    ]);
    let gcs: Vec<&str> = gc.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(gcs.len(), 2, "{gc}");
    for (i, l) in gcs.iter().enumerate() {
        let f: Vec<u64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
        assert_eq!(f[0], i as u64 + 1, "GC count: {l}");
        assert!(f[1] <= 2, "GC depth is a generation: {l}");
        assert!(f[2] <= 16 && f[3] <= 2, "reason/type in range: {l}");
    }
    // JIT events of a 32-bit process (EVENT_HEADER32, 4-byte pointers) decode with names
    let jit = dtx_ok(&[
        "-q",
        "-E",
        &format!("{}/perfview_net.4.5.2.x86.etl.zip", dir.display()),
        "-n",
        "dnet::jit:method-load /arg2 == 0 && arg5 > 0/ { @[etwfield_str(\"MethodNamespace\"), \
         etwfield_str(\"MethodName\")] = count(); } \
         END { printa(\"%s.%s %@d\\n\", @); }",
    ]);
    assert!(jit.lines().count() > 100, "{jit}");
    assert!(
        jit.lines().any(|l| l.starts_with("System.String.")),
        "{jit}"
    );
    // and the method addresses are user-mode addresses of a 32-bit process
    let addr = dtx_ok(&[
        "-q",
        "-E",
        &format!("{}/perfview_net.4.5.2.x86.etl.zip", dir.display()),
        "-n",
        "dnet::jit:method-load /arg2 == 0/ { @lo = min(arg4); @hi = max(arg4); } \
         END { printa(\"%@d \", @lo); printa(\"%@d\\n\", @hi); }",
    ]);
    let v: Vec<u64> = addr
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    assert!(v[0] > 0x10000 && v[1] < 1 << 32, "{addr}");
}

/// The probes' `args[0]` (the port's `net*_t` types, translated in `dscripts/lib/dnet.d`):
/// every typed probe prints its struct whole, and the members agree with the payload read at
/// the offsets the runtime's event layouts give, in 64- and 32-bit processes.
#[test]
fn typed_args_are_the_ports_structs() {
    let Some(dir) = shared() else { return };
    let x64 = format!("{}/perfview_net.4.5.2.x64.etl.zip", dir.display());
    let x86 = format!("{}/perfview_net.4.5.2.x86.etl.zip", dir.display());
    let mut all = String::new();
    let mut typed = 0;
    for d in PROBES {
        if let Some(t) = arg0_xlate(d) {
            let name = t.trim_end_matches(" *");
            all += &format!(
                "dnet::{}:{} {{ n[\"{name}\"]++; }}\n\
                 dnet::{}:{} /n[\"{name}\"] == 1/ {{ print(*args[0]); printf(\"\\n\"); }}\n",
                d.function, d.name, d.function, d.name
            );
            typed += 1;
        }
    }
    assert!(typed >= 40, "{typed} typed probes");
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("dnet-typed.d");
    std::fs::write(&script, format!("#pragma D option quiet\n{all}")).unwrap();
    let printed = dtx_ok(&["-E", &x64, "-s", script.to_str().unwrap()]);
    for t in [
        "netgc_t {",
        "netgcalloctick_t {",
        "netmodule_t {",
        "netmethod_t {",
        "netrt_t {",
    ] {
        assert!(printed.contains(t), "{t}: {printed}");
    }
    assert!(
        printed.contains("string gc_typename = [ \"System."),
        "{printed}"
    );

    let check = |trace: &str, prog: &str| -> BTreeMap<String, u64> {
        let out = dtx_ok(&[
            "-q",
            "-E",
            trace,
            "-n",
            &format!("{prog} END {{ printa(\"%s %@d\\n\", @); }}"),
        ]);
        out.lines()
            .filter_map(|l| {
                let (k, v) = l.rsplit_once(' ')?;
                Some((k.to_string(), v.parse().ok()?))
            })
            .collect()
    };
    for trace in [&x64, &x86] {
        // GCStart: Count, Depth, Reason, Type (u32 each), ClrInstanceID (u16)
        let gc = check(
            trace,
            "dnet::gc:gc-start { @[args[0]->gc_count == *(uint32_t *)arg0 && \
             args[0]->gc_depth == *(uint32_t *)(arg0 + 4) && \
             args[0]->gc_reason == *(uint32_t *)(arg0 + 8) && \
             args[0]->gc_type == *(uint32_t *)(arg0 + 12) && \
             args[0]->clr_instid == *(uint16_t *)(arg0 + 16) ? \"same\" : \"differs\"] = count(); }",
        );
        assert_eq!(gc.len(), 1, "{trace}: {gc:?}");
        assert!(gc["same"] > 100, "{trace}: {gc:?}");
        // GCAllocationTick: amount, kind, ClrInstanceID, the amount again as a u64, a
        // pointer-sized TypeID, then the type name
        let tick = check(
            trace,
            "dnet::gc:allocate-tick { this->ptr = arg2 ? 8 : 4; \
             @[args[0]->gc_amt == *(uint32_t *)arg0 && \
             args[0]->gc_kind == *(uint32_t *)(arg0 + 4) && \
             args[0]->gc_amt64 == *(uint64_t *)(arg0 + 10) && \
             args[0]->gc_typename == wstringof((wchar_t *)(arg0 + 18 + this->ptr)) && \
             args[0]->gc_typename != \"\" ? \"same\" : \"differs\"] = count(); }",
        );
        assert_eq!(tick.len(), 1, "{trace}: {tick:?}");
        assert!(tick["same"] > 1000, "{trace}: {tick:?}");
        // MethodLoadVerbose: MethodID, ModuleID, MethodStartAddress (u64), MethodSize (u32)
        let jit = check(
            trace,
            "dnet::jit:method-load { @[args[0]->clr_methid == *(uint64_t *)arg0 && \
             args[0]->clr_start == *(uint64_t *)(arg0 + 16) && \
             args[0]->clr_size == *(uint32_t *)(arg0 + 24) && \
             args[0]->clr_name == wstringof((wchar_t *)(arg0 + 36 + \
             2 * (wstrlen((wchar_t *)(arg0 + 36)) + 1))) ? \"same\" : \"differs\"] = count(); }",
        );
        assert_eq!(jit.len(), 1, "{trace}: {jit:?}");
        assert!(jit["same"] > 200, "{trace}: {jit:?}");
        // thread pool threads started: the worker count
        let thr = check(
            trace,
            "dnet::thread:thr-start { @[args[0]->clr_thrco == *(uint32_t *)arg0 && \
             args[0]->clr_thrco > 0 ? \"same\" : \"differs\"] = count(); }",
        );
        assert_eq!(thr.len(), 1, "{trace}: {thr:?}");
        assert!(thr.contains_key("same"), "{trace}: {thr:?}");
        // the exception both processes throw, with its HRESULT
        let excp = check(
            trace,
            "dnet::event:excp { @[strjoin(args[0]->clr_excep, \
             args[0]->clr_res == 0x80070002 ? \" ENOENT\" : \" other\")] = count(); }",
        );
        assert_eq!(
            excp.get("System.IO.FileNotFoundException ENOENT"),
            Some(&1),
            "{trace}: {excp:?}"
        );
    }
}

#[test]
fn dnet_ustack_is_the_clr_stack_with_method_names() {
    let Some(dir) = shared() else { return };
    let out = dtx_ok(&[
        "-q",
        "-E",
        &format!("{}/perfview_net.4.5.2.x64.etl.zip", dir.display()),
        "-n",
        "dnet::gc:gc-start /pid == 3676/ { @[ustack()] = count(); } END { trunc(@, 1); }",
    ]);
    // the test program's GCs come from DateTime.Now in Main; the frames of JIT-compiled code
    // are named from the runtime's MethodLoadVerbose events
    let main = out.find("Test.Program.Main+0x").expect(&out);
    let now = out.find("System.DateTime.get_Now+0x").expect(&out);
    assert!(now < main, "innermost first: {out}");
}

#[test]
fn dns_fields_by_name_and_wstringof() {
    let Some(dir) = shared() else { return };
    let trace = format!("{}/perfview_net.4.5.2.x64.etl.zip", dir.display());
    // the port's way: the payload's first field is a wide string
    let out = dtx_ok(&[
        "-q",
        "-E",
        &trace,
        "-n",
        "microsoft-windows-dns-client:::events /arg0 == 1001/ { printf(\"%s %s %d\\n\", \
         wstringof((wchar_t *)arg2), etwfield_str(\"Interface\"), etwfield(\"Index\")); }",
    ]);
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines,
        [
            "Ethernet Ethernet 1",
            "Ethernet Ethernet 2",
            "Ethernet Ethernet 3",
            "Ethernet Ethernet 4"
        ]
    );
    // a field the event does not have reads as 0 / ""
    let none = dtx_ok(&[
        "-q",
        "-E",
        &trace,
        "-n",
        "microsoft-windows-dns-client:::events { printf(\"[%s] %d\\n\", \
         etwfield_str(\"NoSuchField\"), etwfield(\"NoSuchField\")); exit(0); }",
    ]);
    assert_eq!(none.trim_end(), "[] 0");
}

#[test]
fn scripts_match_their_golden_output() {
    let Some(dir) = shared() else { return };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let diaghub = "perfview_diaghub-dotnetcore3.1-win-x64-diagsession.zip:\
                   diaghub-dotnetcore3.1-win-x64-diagsession/diaghub.user_paged.1.etl";
    let x64 = "perfview_net.4.5.2.x64.etl.zip";
    let cases = [
        ("dnet/gc.d", x64, "gc-net452x64"),
        ("dnet/gc.d", "perfview_gcevents.etl.zip", "gc-gcevents"),
        ("dnet/jit.d", x64, "jit-net452x64"),
        ("dnet/jit.d", diaghub, "jit-diaghub"),
        ("dnet/exceptions.d", x64, "exceptions-net452x64"),
        (
            "dnet/exceptions.d",
            "perfview_net.4.5.2.x86.etl.zip",
            "exceptions-net452x86",
        ),
        ("dns/dnsqueries.d", x64, "dnsqueries-net452x64"),
    ];
    for (script, trace, name) in cases {
        let out = dtx_ok(&[
            "-s",
            &root.join("dscripts").join(script).to_string_lossy(),
            "-E",
            &format!("{}/{trace}", dir.display()),
        ]);
        crate::support::golden::check(name, &format!("golden/dnet/{name}.out"), &out);
    }
}

/// dtx's runtime manifest agrees with the EventMetadata (TRACE_EVENT_INFO) the net.4.5.2
/// traces carry, for every event both describe: same field names, types and counts.
#[test]
fn manifest_agrees_with_trace_metadata() {
    use dtx::etw::decode::Decoder;
    let Some(dir) = shared() else { return };
    let mut ours = Decoder::new();
    ours.load_manifest_str(dtx::providers::etw::dnet::MANIFEST);
    let mut compared = 0;
    for f in [
        "perfview_net.4.5.2.x64.etl.zip",
        "perfview_net.4.5.2.x86.etl.zip",
    ] {
        let file = dtx::etw::reader::EtlFile::open_path(&format!("{}/{f}", dir.display())).unwrap();
        let mut meta = Decoder::new();
        let mut keys = std::collections::BTreeSet::new();
        let mut it = file.events();
        while let Some(r) = it.next_event() {
            let Ok(ev) = r else { continue };
            meta.observe(&ev);
            if ev.provider == RUNTIME || ev.provider == RUNDOWN {
                keys.insert((ev.provider, ev.id, ev.version));
            }
        }
        for (p, id, v) in keys {
            let (Some(a), Some(b)) = (ours.schema(p, id, v), meta.schema(p, id, v)) else {
                continue;
            };
            let shape = |s: &dtx::etw::decode::schema::Schema<String>| -> Vec<String> {
                s.top
                    .iter()
                    .map(|&i| {
                        let pr = &s.props[i];
                        format!(
                            "{}:{:?}:{:?}",
                            pr.name,
                            pr.ty,
                            pr.count == dtx::etw::decode::schema::Count::One
                        )
                    })
                    .collect()
            };
            assert_eq!(shape(a), shape(b), "{f}: event {id} v{v}");
            compared += 1;
        }
    }
    assert!(compared >= 30, "only {compared} events compared");
}

/// As in DTrace, a clause is compiled once per probe description, each with its own `args[]`
/// types: one clause prints a `netrt_t` for the runtime event and a `netexcp_t` for the
/// exception, and a member only one of the types has is an error for the other description.
#[test]
fn each_description_of_a_clause_has_its_own_args() {
    let Some(dir) = shared() else { return };
    let x64 = format!("{}/perfview_net.4.5.2.x64.etl.zip", dir.display());
    let out = dtx_ok(&[
        "-q",
        "-E",
        &x64,
        "-n",
        "dnet::event:runtime, dnet::event:excp { print(*args[0]); printf(\"\\n\"); }",
    ]);
    assert!(
        out.contains("netrt_t {") && out.contains("netexcp_t {"),
        "{out}"
    );
    assert!(
        out.contains("string clr_cmdline = [ \"Test.x64.exe\" ]"),
        "{out}"
    );
    assert!(
        out.contains("string clr_excep = [ \"System.IO.FileNotFoundException\" ]"),
        "{out}"
    );
    let bad = cli::dtx(&[
        "-q",
        "-E",
        &x64,
        "-n",
        "dnet::event:runtime, dnet::event:excp { trace(args[0]->clr_excep); }",
    ]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("clr_excep"), "{err}");
}
