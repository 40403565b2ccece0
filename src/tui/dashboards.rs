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
];

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
        .find(|(n, t)| super::app::compile_text(t, n, catalog).is_ok())
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dashboards_need_the_kernel_providers() {
        // with only BEGIN/END/profile there is nothing to show
        assert!(default_for(&Catalog::standard()).is_none());
        let etw = crate::providers::etw::EtwProbes::new();
        let (name, _) = default_for(&Catalog::with_etw(&etw)).unwrap();
        assert_eq!(name, "top/cpu.d");
        assert!(by_name("builtin:top/disk.d").is_some());
        let catalog = Catalog::with_etw(&etw);
        for (name, text) in DASHBOARDS {
            if let Err(e) = super::super::app::compile_text(text, name, &catalog) {
                panic!("{name}: {e}");
            }
        }
    }
}
