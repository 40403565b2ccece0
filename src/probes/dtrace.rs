//! The probes of the `dtrace` provider (`BEGIN`, `END`, `ERROR`) and their ids, as in DTrace.
//! They live here, below the VM, because the VM fires `ERROR` and knows `END`; the provider
//! that lists them is `providers::DtraceProvider`.

use super::ProbeInfo;

/// Probe ids of the dtrace provider, as in DTrace.
pub const BEGIN_ID: u64 = 1;
pub const END_ID: u64 = 2;
pub const ERROR_ID: u64 = 3;

/// `dtrace:::BEGIN`, `END` and `ERROR` (whose arguments are typed as DTrace's).
pub fn dtrace_probes() -> Vec<ProbeInfo> {
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

/// The ERROR probe, for firing it from the VM.
pub static ERROR_PROBE: std::sync::LazyLock<ProbeInfo> = std::sync::LazyLock::new(|| {
    dtrace_probes()
        .into_iter()
        .find(|p| p.id == ERROR_ID)
        .unwrap_or_else(|| unreachable!("the dtrace provider lists ERROR"))
});
