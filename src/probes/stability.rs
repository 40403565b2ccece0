//! Stability attributes (DTrace's `dtrace_pattr_t`): how stable each part of a provider's
//! probe names and arguments is, and on what the names depend. `dtx -lv` prints them for each
//! probe as dtrace does; the values are those the Windows DTrace port gives its providers.

use std::fmt;

/// How stable an interface is, least first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stability {
    Internal,
    Private,
    Obsolete,
    External,
    Unstable,
    Evolving,
    Stable,
    Standard,
}

/// What an interface depends on, least portable first (the Windows port adds `ETW` before
/// `Common`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DepClass {
    Unknown,
    Cpu,
    Platform,
    Group,
    Isa,
    Etw,
    Common,
}

impl fmt::Display for Stability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stability::Internal => "Internal",
            Stability::Private => "Private",
            Stability::Obsolete => "Obsolete",
            Stability::External => "External",
            Stability::Unstable => "Unstable",
            Stability::Evolving => "Evolving",
            Stability::Stable => "Stable",
            Stability::Standard => "Standard",
        })
    }
}

impl fmt::Display for DepClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DepClass::Unknown => "Unknown",
            DepClass::Cpu => "CPU",
            DepClass::Platform => "Platform",
            DepClass::Group => "Group",
            DepClass::Isa => "ISA",
            DepClass::Etw => "ETW",
            DepClass::Common => "Common",
        })
    }
}

/// One attribute: name stability, data stability, dependency class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    pub name: Stability,
    pub data: Stability,
    pub class: DepClass,
}

impl Attr {
    const fn new(name: Stability, data: Stability, class: DepClass) -> Attr {
        Attr { name, data, class }
    }

    /// The weaker of two attributes, part by part.
    pub fn min(self, o: Attr) -> Attr {
        Attr {
            name: self.name.min(o.name),
            data: self.data.min(o.data),
            class: self.class.min(o.class),
        }
    }
}

/// A provider's attributes: of its name, of the module, function and name parts of its probe
/// descriptions, and of its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProviderAttrs {
    pub provider: Attr,
    pub module: Attr,
    pub function: Attr,
    pub name: Attr,
    pub args: Attr,
}

use DepClass as C;
use Stability as S;

/// The `dtrace` provider (BEGIN, END, ERROR).
const DTRACE: ProviderAttrs = ProviderAttrs {
    provider: Attr::new(S::Stable, S::Stable, C::Common),
    module: Attr::new(S::Private, S::Private, C::Unknown),
    function: Attr::new(S::Private, S::Private, C::Unknown),
    name: Attr::new(S::Stable, S::Stable, C::Common),
    args: Attr::new(S::Stable, S::Stable, C::Common),
};

/// `profile` (the port's: its timers are the session's).
const PROFILE: ProviderAttrs = ProviderAttrs {
    provider: Attr::new(S::Evolving, S::Evolving, C::Etw),
    module: Attr::new(S::Private, S::Private, C::Unknown),
    function: Attr::new(S::Private, S::Private, C::Isa),
    name: Attr::new(S::Evolving, S::Evolving, C::Common),
    args: Attr::new(S::Private, S::Private, C::Isa),
};

/// `pid` and `fpid`.
const PID: ProviderAttrs = ProviderAttrs {
    provider: Attr::new(S::Evolving, S::Evolving, C::Isa),
    module: Attr::new(S::Private, S::Private, C::Unknown),
    function: Attr::new(S::Private, S::Private, C::Unknown),
    name: Attr::new(S::Evolving, S::Evolving, C::Isa),
    args: Attr::new(S::Private, S::Private, C::Unknown),
};

/// The providers made from ETW events: the kernel ones, `dnet`, `diag`, `hwconfig`, `pmc`,
/// and every named ETW provider.
const ETW: ProviderAttrs = ProviderAttrs {
    provider: Attr::new(S::Evolving, S::Evolving, C::Etw),
    module: Attr::new(S::Private, S::Private, C::Unknown),
    function: Attr::new(S::Private, S::Private, C::Unknown),
    name: Attr::new(S::Evolving, S::Evolving, C::Isa),
    args: Attr::new(S::Evolving, S::Evolving, C::Isa),
};

/// The attributes of a provider, by its name.
pub fn provider_attrs(provider: &str) -> &'static ProviderAttrs {
    let base = provider.trim_end_matches(|c: char| c.is_ascii_digit());
    match base {
        "dtrace" => &DTRACE,
        "profile" => &PROFILE,
        "pid" | "fpid" => &PID,
        _ => &ETW,
    }
}

/// The attributes of one fully named probe, as `dtrace -lv` shows them: the provider's,
/// weakened by those of each non-empty part of its description; and those of its arguments.
pub fn probe_attrs(provider: &str, module: &str, function: &str, name: &str) -> (Attr, Attr) {
    let p = provider_attrs(provider);
    let mut a = p.provider;
    for (part, attr) in [(module, p.module), (function, p.function), (name, p.name)] {
        if !part.is_empty() {
            a = a.min(attr);
        }
    }
    (a, p.args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn description_attributes_are_the_weakest_of_the_named_parts() {
        let (d, a) = probe_attrs("dtrace", "", "", "BEGIN");
        assert_eq!(d, Attr::new(S::Stable, S::Stable, C::Common));
        assert_eq!(a, d);
        // a function part (Private/Unknown) weakens the description
        let (d, a) = probe_attrs("sched", "", "event", "on-cpu");
        assert_eq!(d, Attr::new(S::Private, S::Private, C::Unknown));
        assert_eq!(a, Attr::new(S::Evolving, S::Evolving, C::Isa));
        let (d, _) = probe_attrs("diag", "", "", "events");
        assert_eq!(d, Attr::new(S::Evolving, S::Evolving, C::Isa));
        let (d, _) = probe_attrs("profile", "", "", "profile-97");
        assert_eq!(d, Attr::new(S::Evolving, S::Evolving, C::Etw));
        assert_eq!(provider_attrs("pid1234"), &PID);
        assert_eq!(
            format!("{}/{}/{}", d.name, d.data, d.class),
            "Evolving/Evolving/ETW"
        );
    }
}
