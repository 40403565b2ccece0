//! Probes: descriptions (`provider:module:function:name`), glob matching, and the catalog that
//! answers "which probes does this description enable" for the compiler and `dtx -l`.

pub mod absent;
mod desc;
mod dtrace;
mod glob;
pub mod stability;

pub use desc::ProbeDesc;
pub use dtrace::{dtrace_probes, BEGIN_ID, END_ID, ERROR_ID, ERROR_PROBE};
pub use glob::{function_match, glob_match, is_kernel_image, module_match, KERNEL_IMAGES};

/// One concrete probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeInfo {
    pub id: u64,
    pub provider: String,
    pub module: String,
    pub function: String,
    pub name: String,
    /// D types of `args[0..]`, as type text (e.g. `"psinfo_t *"`).
    pub arg_types: Vec<String>,
    /// Native types of `arg0..` where `args[N]` is translated (DTrace's `dtargd_native`; the
    /// translated type is `arg_types[N]`); empty when no argument is translated, `""` for one
    /// that is not.
    pub arg_native: Vec<String>,
}

impl ProbeInfo {
    pub fn desc(&self) -> ProbeDesc {
        ProbeDesc {
            provider: self.provider.clone(),
            module: self.module.clone(),
            function: self.function.clone(),
            name: self.name.clone(),
        }
    }
}

/// Why a provider could not create the probes a description names (dtrace's `D_PROC_*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeError {
    pub tag: &'static str,
    pub message: String,
}

impl ProbeError {
    pub fn new(tag: &'static str, message: impl Into<String>) -> Self {
        ProbeError {
            tag,
            message: message.into(),
        }
    }
}

/// What the compiler and the listing need from the set of providers.
pub trait ProbeCatalog {
    /// Every probe matching the description (creating on-demand probes such as `tick-1s`).
    fn matching(&self, desc: &ProbeDesc) -> Vec<ProbeInfo>;
    /// [`ProbeCatalog::matching`], or why a provider could not create the probes.
    fn try_matching(&self, desc: &ProbeDesc) -> Result<Vec<ProbeInfo>, ProbeError> {
        Ok(self.matching(desc))
    }
    /// Why a description that matched no probe matched none, when a provider can say more
    /// than "does not match any probes" (a .NET process whose methods are not compiled yet).
    fn why_none(&self, _desc: &ProbeDesc) -> Option<String> {
        None
    }
    /// The description of the probe with this id.
    fn by_id(&self, id: u64) -> Option<ProbeDesc>;
    /// Every probe the catalog can list.
    fn list(&self) -> Vec<ProbeInfo>;
    /// This catalog as one that can be shared between threads, if it can.
    fn as_sync(&self) -> Option<&(dyn ProbeCatalog + Sync)> {
        None
    }
}

/// A DTrace provider: names its probes, creates those a description matches, and lists them
/// for `dtx -l`. The providers themselves live in `crate::providers`.
pub trait Provider {
    fn name(&self) -> &str;
    /// Whether the provider field of a description (a glob) names this provider.
    fn matches_provider(&self, field: &str) -> bool {
        glob_match(field, self.name())
    }
    /// The probes matching a description (the provider field already matched).
    fn matching(&self, desc: &ProbeDesc) -> Vec<ProbeInfo>;
    /// [`Provider::matching`], or why the probes could not be created.
    fn try_matching(&self, desc: &ProbeDesc) -> Result<Vec<ProbeInfo>, ProbeError> {
        Ok(self.matching(desc))
    }
    /// See [`ProbeCatalog::why_none`] (the provider field already matched).
    fn why_none(&self, _desc: &ProbeDesc) -> Option<String> {
        None
    }
    /// The probes to show in `dtx -l`.
    fn list(&self) -> Vec<ProbeInfo>;
}

/// The catalog of a set of providers.
pub struct Catalog {
    providers: Vec<Box<dyn Provider + Send + Sync>>,
}

impl Catalog {
    pub fn new(providers: Vec<Box<dyn Provider + Send + Sync>>) -> Self {
        Catalog { providers }
    }

    /// Adds a provider (the `pid` provider of a run with a target).
    pub fn add(&mut self, p: Box<dyn Provider + Send + Sync>) {
        self.providers.push(p);
    }
}

impl ProbeCatalog for Catalog {
    fn matching(&self, desc: &ProbeDesc) -> Vec<ProbeInfo> {
        self.try_matching(desc).unwrap_or_default()
    }

    fn try_matching(&self, desc: &ProbeDesc) -> Result<Vec<ProbeInfo>, ProbeError> {
        let mut v = Vec::new();
        for p in &self.providers {
            if !desc.provider.is_empty() && !p.matches_provider(&desc.provider) {
                continue;
            }
            v.extend(p.try_matching(desc)?);
        }
        Ok(v)
    }

    fn why_none(&self, desc: &ProbeDesc) -> Option<String> {
        let mut matched = false;
        let why = self
            .providers
            .iter()
            .filter(|p| desc.provider.is_empty() || p.matches_provider(&desc.provider))
            .inspect(|_| matched = true)
            .find_map(|p| p.why_none(desc));
        if why.is_some() {
            return why;
        }
        let names: Vec<&str> = self.providers.iter().map(|p| p.name()).collect();
        absent::why_no_provider(&desc.provider, &names, matched)
    }

    fn by_id(&self, id: u64) -> Option<ProbeDesc> {
        self.list()
            .into_iter()
            .find(|p| p.id == id)
            .map(|p| p.desc())
    }

    fn list(&self) -> Vec<ProbeInfo> {
        let mut v: Vec<ProbeInfo> = self.providers.iter().flat_map(|p| p.list()).collect();
        v.sort_by_key(|p| p.id);
        v
    }

    fn as_sync(&self) -> Option<&(dyn ProbeCatalog + Sync)> {
        Some(self)
    }
}
