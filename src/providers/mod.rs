//! Providers: each one names its probes, lists them for `dtx -l`, and (in the runtime) turns
//! events into probe firings.

mod dtrace;
pub mod etw;
pub mod linux;
pub mod pid;
mod profile;

pub use dtrace::{DtraceProvider, BEGIN_ID, END_ID, ERROR_ID, ERROR_PROBE};
pub use profile::{parse_rate, parse_sample, ProfileProvider, ProfileSampler, TickKind};

pub use crate::probes::Provider;
use crate::probes::{Catalog, ProbeDesc};

/// The providers of every run.
pub fn standard() -> Vec<Box<dyn Provider + Send + Sync>> {
    standard_with_samples(false)
}

/// The standard providers; with `samples`, the profile provider lists `sample-N` (runs over
/// ETW).
pub fn standard_with_samples(samples: bool) -> Vec<Box<dyn Provider + Send + Sync>> {
    vec![
        Box::new(DtraceProvider),
        Box::new(ProfileProvider { samples }),
    ]
}

/// The catalog every dtx run has: `dtrace` and `profile`.
pub fn standard_catalog() -> Catalog {
    Catalog::new(standard())
}

/// The catalog of a live run (no recorded trace): on Linux the standard providers plus the
/// kernel providers that perf events back (`syscall`, `sched`, `proc`, `io`); elsewhere the
/// standard ones.
pub fn live_catalog() -> Catalog {
    #[cfg(target_os = "linux")]
    {
        let mut p = standard();
        p.extend(linux::providers());
        Catalog::new(p)
    }
    #[cfg(not(target_os = "linux"))]
    standard_catalog()
}

/// The standard providers plus the ETW providers (kernel ones, and those named in a trace).
pub fn etw_catalog(etw: &etw::EtwProbes) -> Catalog {
    let mut p = standard_with_samples(true);
    p.extend(etw::providers(etw));
    p.push(Box::new(etw::dnet::DnetProvider));
    Catalog::new(p)
}

/// Matches the module/function/name fields of a description against one probe.
pub(crate) fn fields_match(desc: &ProbeDesc, module: &str, function: &str, name: &str) -> bool {
    use crate::probes::glob_match;
    glob_match(&desc.module, module)
        && glob_match(&desc.function, function)
        && glob_match(&desc.name, name)
}
