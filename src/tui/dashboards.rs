//! The top-style dashboards of `dscripts/top/`, built into the binary so that the console has
//! them wherever it runs: the first that compiles against the session's probes is what the
//! console shows when it starts without a script.

use crate::probes::Catalog;

/// (name, text), in the order the console tries them.
pub const DASHBOARDS: &[(&str, &str)] = &[
    ("top/cpu.d", include_str!("../../dscripts/top/cpu.d")),
    (
        "top/switches.d",
        include_str!("../../dscripts/top/switches.d"),
    ),
    ("top/disk.d", include_str!("../../dscripts/top/disk.d")),
    ("top/files.d", include_str!("../../dscripts/top/files.d")),
    (
        "top/network.d",
        include_str!("../../dscripts/top/network.d"),
    ),
    (
        "top/syscalls.d",
        include_str!("../../dscripts/top/syscalls.d"),
    ),
    (
        "top/interrupts.d",
        include_str!("../../dscripts/top/interrupts.d"),
    ),
    (
        "top/cpu-stacks.d",
        include_str!("../../dscripts/top/cpu-stacks.d"),
    ),
];

/// The dashboard `dtx --demo` runs: the default one's CPU table, then the stacks the CPU
/// samples land in (the next tab).
pub const DEMO: &str = "top/cpu-stacks.d";

/// The prefix of a built-in dashboard's name in the script picker.
pub const BUILTIN: &str = "builtin:";

/// The built-in dashboard with this name.
pub fn by_name(name: &str) -> Option<&'static str> {
    let name = name.strip_prefix(BUILTIN).unwrap_or(name);
    DASHBOARDS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// The first dashboard whose probes the catalog has.
pub fn default_for(catalog: &Catalog) -> Option<(&'static str, &'static str)> {
    DASHBOARDS
        .iter()
        .find(|(n, t)| super::compile::compile_text(t, n, catalog).is_ok())
        .copied()
}

/// The dashboards whose probes fired in a trace (`counts`: firings by probe id), in the
/// console's order.
pub fn runnable(
    catalog: &Catalog,
    counts: &std::collections::HashMap<u64, u64>,
) -> Vec<&'static str> {
    DASHBOARDS
        .iter()
        .filter(|(name, text)| fires(catalog, counts, name, text))
        .map(|(n, _)| *n)
        .collect()
}

/// Whether any probe a dashboard's clauses name (other than dtrace's and the timers) fired.
fn fires(
    catalog: &Catalog,
    counts: &std::collections::HashMap<u64, u64>,
    name: &str,
    text: &str,
) -> bool {
    use crate::probes::ProbeCatalog;
    let Ok(spec) = super::compile::compile_text(text, name, catalog) else {
        return false;
    };
    spec.program
        .clauses
        .iter()
        .flat_map(|c| &c.probes)
        .any(|d| {
            catalog
                .matching(d)
                .iter()
                .filter(|p| p.provider != "dtrace" && !p.name.starts_with("tick-"))
                .any(|p| counts.get(&p.id).copied().unwrap_or(0) > 0)
        })
}

/// What to tell the user when the dashboard shown has nothing to show in this trace: which
/// ones it can run instead (None when it has events, or is not a built-in dashboard).
pub fn advice(
    catalog: &Catalog,
    counts: &std::collections::HashMap<u64, u64>,
    shown: &str,
) -> Option<String> {
    let text = by_name(shown)?;
    if fires(catalog, counts, shown, text) {
        return None;
    }
    let others = runnable(catalog, counts);
    Some(if others.is_empty() {
        format!("this trace has no events for {shown}, nor for any built-in dashboard")
    } else {
        format!(
            "this trace has no events for {shown}; it can run: {} (Ctrl-O opens one)",
            others.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dashboards_need_the_kernel_providers() {
        // with only BEGIN/END/profile there is nothing to show
        assert!(default_for(&crate::providers::standard_catalog()).is_none());
        let etw = crate::providers::etw::EtwProbes::new();
        let (name, _) = default_for(&crate::providers::etw_catalog(&etw)).unwrap();
        assert_eq!(name, "top/cpu.d");
        assert!(by_name("builtin:top/disk.d").is_some());
        assert!(by_name(DEMO).is_some());
        // a trace whose only events are system calls: cpu.d has nothing, syscalls.d has
        let catalog = crate::providers::etw_catalog(&etw);
        let entry = crate::probes::ProbeCatalog::matching(
            &catalog,
            &crate::probes::ProbeDesc::parse("syscall:::entry").unwrap(),
        );
        let counts: std::collections::HashMap<u64, u64> = entry.iter().map(|p| (p.id, 5)).collect();
        assert_eq!(runnable(&catalog, &counts), ["top/syscalls.d"]);
        let said = advice(&catalog, &counts, "top/cpu.d").unwrap();
        assert!(said.contains("no events for top/cpu.d") && said.contains("top/syscalls.d"));
        assert_eq!(advice(&catalog, &counts, "top/syscalls.d"), None);
        let catalog = crate::providers::etw_catalog(&etw);
        for (name, text) in DASHBOARDS {
            if let Err(e) = super::super::compile::compile_text(text, name, &catalog) {
                panic!("{name}: {e}");
            }
        }
    }
}
