//! The `dtrace` provider: `BEGIN`, `END` and `ERROR`.

use super::{fields_match, Provider};
use crate::probes::{ProbeDesc, ProbeInfo};

pub struct DtraceProvider;

/// Probe ids of the dtrace provider, as in DTrace.
pub const BEGIN_ID: u64 = 1;
pub const END_ID: u64 = 2;
pub const ERROR_ID: u64 = 3;

/// The ERROR probe, for firing it from the VM.
pub static ERROR_PROBE: std::sync::LazyLock<ProbeInfo> = std::sync::LazyLock::new(|| {
    DtraceProvider
        .list()
        .into_iter()
        .find(|p| p.id == ERROR_ID)
        .unwrap_or_else(|| unreachable!("the dtrace provider lists ERROR"))
});

impl Provider for DtraceProvider {
    fn name(&self) -> &str {
        "dtrace"
    }

    fn matching(&self, desc: &ProbeDesc) -> Vec<ProbeInfo> {
        self.list()
            .into_iter()
            .filter(|p| fields_match(desc, &p.module, &p.function, &p.name))
            .collect()
    }

    fn list(&self) -> Vec<ProbeInfo> {
        [(BEGIN_ID, "BEGIN"), (END_ID, "END"), (ERROR_ID, "ERROR")]
            .iter()
            .map(|(id, n)| ProbeInfo {
                id: *id,
                provider: "dtrace".into(),
                module: String::new(),
                function: String::new(),
                name: n.to_string(),
                arg_types: if *n == "ERROR" {
                    vec![
                        "uint64_t".into(),
                        "uint_t".into(),
                        "uint_t".into(),
                        "int".into(),
                        "int".into(),
                        "uint64_t".into(),
                    ]
                } else {
                    Vec::new()
                },
                arg_native: Vec::new(),
            })
            .collect()
    }
}
