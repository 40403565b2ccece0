//! Providers: each one names its probes, lists them for `dtx -l`, and (in the runtime) turns
//! events into probe firings.

mod dtrace;
pub mod etw;
pub mod linux;
mod profile;

pub use dtrace::{DtraceProvider, BEGIN_ID, END_ID, ERROR_ID, ERROR_PROBE};
pub use profile::{parse_rate, ProfileProvider, TickKind};

use crate::probes::{ProbeDesc, ProbeInfo};

pub trait Provider {
    fn name(&self) -> &str;
    /// The probes matching a description (the provider field already matched).
    fn matching(&self, desc: &ProbeDesc) -> Vec<ProbeInfo>;
    /// The probes to show in `dtx -l`.
    fn list(&self) -> Vec<ProbeInfo>;
}

/// The providers of every run.
pub fn standard() -> Vec<Box<dyn Provider + Send + Sync>> {
    vec![Box::new(DtraceProvider), Box::new(ProfileProvider)]
}

/// Matches the module/function/name fields of a description against one probe.
pub(crate) fn fields_match(desc: &ProbeDesc, module: &str, function: &str, name: &str) -> bool {
    use crate::probes::glob_match;
    glob_match(&desc.module, module)
        && glob_match(&desc.function, function)
        && glob_match(&desc.name, name)
}
