//! Providers: each one names its probes, lists them for `dtx -l`, and (in the runtime) turns
//! events into probe firings.

pub mod dnet;
mod dtrace;
pub mod etw;
pub mod linux;
pub mod pid;
mod profile;

pub use dtrace::{DtraceProvider, BEGIN_ID, END_ID, ERROR_ID, ERROR_PROBE};
pub use profile::{parse_rate, parse_sample, ProfileProvider, ProfileSampler, TickKind};

use crate::probes::{ProbeDesc, ProbeError, ProbeInfo};

pub trait Provider {
    fn name(&self) -> &str;
    /// Whether the provider field of a description (a glob) names this provider.
    fn matches_provider(&self, field: &str) -> bool {
        crate::probes::glob_match(field, self.name())
    }
    /// The probes matching a description (the provider field already matched).
    fn matching(&self, desc: &ProbeDesc) -> Vec<ProbeInfo>;
    /// [`Provider::matching`], or why the probes could not be created.
    fn try_matching(&self, desc: &ProbeDesc) -> Result<Vec<ProbeInfo>, ProbeError> {
        Ok(self.matching(desc))
    }
    /// The probes to show in `dtx -l`.
    fn list(&self) -> Vec<ProbeInfo>;
}

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

/// Matches the module/function/name fields of a description against one probe.
pub(crate) fn fields_match(desc: &ProbeDesc, module: &str, function: &str, name: &str) -> bool {
    use crate::probes::glob_match;
    glob_match(&desc.module, module)
        && glob_match(&desc.function, function)
        && glob_match(&desc.name, name)
}
