//! The managed-method table of the `pid` provider fed by the CLR's ETW method events (what a
//! live session on Windows gives): PerfView's traces of a .NET Framework 4.5.2 program replayed
//! through `dnet::ClrMethodFeed` give each process the methods, code ranges and assemblies the
//! trace records, as dtx's own `dnet` probes print them from the same records. Skipped (with a
//! message) when ../shared/etl is absent.

use crate::support::etl;

use std::collections::HashMap;

use dtx::providers::etw::dnet::ClrMethodFeed;

/// (pid, start) → (size, Namespace.Type.Method, assembly), from dtx's `dnet` probes (also what
/// the live replay of `dotnet_pid_live_replay` is compared with).
pub(crate) fn recorded(trace: &str) -> HashMap<(u32, u64), (u64, String, String)> {
    recorded_by(
        trace,
        "dnet::jit:method-load, dnet::rundown:method-dcstart, dnet::rundown:method-dcend",
        "dnet::loader:module-load, dnet::rundown:module-dcstart, dnet::rundown:module-dcend",
    )
}

/// [`recorded`], from the method events of the `dnet` probes `method_probes` and the module
/// events of `module_probes` only (a rundown's, say).
pub(crate) fn recorded_by(
    trace: &str,
    method_probes: &str,
    module_probes: &str,
) -> HashMap<(u32, u64), (u64, String, String)> {
    let prog = format!(
        r#"
        {method_probes}
        {{ printf("m %d %x %x %x %s.%s\n", pid, args[0]->clr_start, args[0]->clr_size,
                 args[0]->clr_modid, args[0]->clr_namespace, args[0]->clr_name); }}
        {module_probes}
        {{ printf("mod %d %x %s\n", pid, args[0]->clr_modid, args[0]->clr_modilpath); }}"#
    );
    let out = crate::support::cli::dtx(&["-q", "-E", trace, "-n", &prog]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let hex = |s: &str| u64::from_str_radix(s, 16).expect("hex");
    let mut modules = HashMap::new();
    let mut methods = Vec::new();
    for l in text.lines() {
        let f: Vec<&str> = l.splitn(6, ' ').collect();
        match f.as_slice() {
            ["mod", pid, id, path] => {
                let file = path.rsplit('\\').next().unwrap_or(path);
                let name = file.rsplit_once('.').map_or(file, |(n, _)| n);
                modules.insert(
                    (pid.parse::<u32>().expect("pid"), hex(id)),
                    name.to_string(),
                );
            }
            ["m", pid, start, size, modid, name] => methods.push((
                pid.parse::<u32>().expect("pid"),
                hex(start),
                hex(size),
                hex(modid),
                name.to_string(),
            )),
            _ if l.starts_with("mod ") => {
                // a module event without a path
                let f: Vec<&str> = l.split(' ').collect();
                assert!(f.len() >= 3, "{l}");
            }
            _ => {}
        }
    }
    let mut out = HashMap::new();
    for (pid, start, size, modid, name) in methods {
        if size == 0 {
            continue;
        }
        let module = modules
            .get(&(pid, modid))
            .cloned()
            .unwrap_or_else(|| "?".into());
        out.insert((pid, start), (size, name, module));
    }
    out
}

#[test]
fn dotnet_pid_method_table_from_clr_jit_and_rundown_events() {
    for name in [
        "perfview_net.4.5.2.x64.etl.zip",
        "perfview_net.4.5.2.x86.etl.zip",
    ] {
        let Some(trace) = etl::trace(name) else {
            return;
        };
        let file = dtx::etw::reader::EtlFile::open_path(&trace).expect("open trace");
        let decoder = dtx::sources::etl::TraceSource::new_decoder();
        let mut feed = ClrMethodFeed::default();
        let mut it = file.events();
        while let Some(r) = it.next_event() {
            let Ok(ev) = r else { continue };
            if dtx::providers::etw::dnet::is_dotnet(&ev) {
                let dec = decoder.decode(&ev);
                feed.observe(&ev, &dec);
            }
        }
        let tables = feed.tables();
        let want = recorded(&trace);
        assert!(want.len() > 100, "{name}: {} methods", want.len());
        let got: usize = tables.values().map(|t| t.len()).sum();
        assert_eq!(got, want.len(), "{name}: methods in the table");
        for ((pid, start), (size, method, module)) in &want {
            let t = tables
                .get(pid)
                .unwrap_or_else(|| panic!("{name}: pid {pid}"));
            let m = t
                .at(*start)
                .unwrap_or_else(|| panic!("{name}: no code at {start:x} in {pid}"));
            assert_eq!(
                (m.start, m.size, &m.name, &m.module),
                (*start, *size, method, module),
                "{name}"
            );
            // the last byte is in it, the one after is not this method's
            assert_eq!(t.at(start + size - 1).map(|m| m.start), Some(*start));
            assert_ne!(t.at(start + size).map(|m| m.start), Some(*start));
        }
        // the program's own assembly names its methods
        let named: usize = tables
            .values()
            .flat_map(|t| t.iter())
            .filter(|m| m.module == "mscorlib")
            .count();
        assert!(named > 0, "{name}: no mscorlib method");
    }
}
