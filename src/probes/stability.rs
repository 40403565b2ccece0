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

    /// `Stable/Evolving/Common`: up to three parts, matched without regard to case, the
    /// missing ones at their maximum (libdtrace's `dtrace_str2attr`). `None` for a part that
    /// names nothing or a fourth part.
    pub fn parse(text: &str) -> Option<Attr> {
        let mut a = Attr::MAX;
        // an empty part ends the text, as `dt_getstrattr` reads it
        let mut parts = text.split('/').take_while(|p| !p.is_empty());
        if let Some(p) = parts.next() {
            a.name = Stability::parse(p)?;
        }
        if let Some(p) = parts.next() {
            a.data = Stability::parse(p)?;
        }
        if let Some(p) = parts.next() {
            a.class = DepClass::parse(p)?;
        }
        parts.next().is_none().then_some(a)
    }

    /// The strongest attribute, where a minimum starts (`_dtrace_maxattr`).
    pub const MAX: Attr = Attr::new(Stability::Standard, Stability::Standard, DepClass::Common);
    /// What D's own identifiers, literals and operators have (`_dtrace_defattr`).
    pub const DEFAULT: Attr = Attr::new(Stability::Stable, Stability::Stable, DepClass::Common);
    /// A kernel symbol or a type from a module (`_dtrace_symattr`, `_dtrace_typattr`).
    pub const PRIVATE: Attr = Attr::new(Stability::Private, Stability::Private, DepClass::Unknown);
    /// Built-ins whose meaning may still change (`DT_ATTR_EVOLCMN`).
    pub const EVOLVING: Attr =
        Attr::new(Stability::Evolving, Stability::Evolving, DepClass::Common);
    /// Every part of a description whose provider is not named (`_dtrace_prvdesc`).
    pub const UNNAMED: Attr = Attr::new(Stability::Unstable, Stability::Unstable, DepClass::Common);
}

impl Stability {
    const ALL: [Stability; 8] = [
        Stability::Internal,
        Stability::Private,
        Stability::Obsolete,
        Stability::External,
        Stability::Unstable,
        Stability::Evolving,
        Stability::Stable,
        Stability::Standard,
    ];

    fn parse(word: &str) -> Option<Stability> {
        Self::ALL
            .into_iter()
            .find(|s| s.to_string().eq_ignore_ascii_case(word))
    }
}

impl DepClass {
    const ALL: [DepClass; 7] = [
        DepClass::Unknown,
        DepClass::Cpu,
        DepClass::Platform,
        DepClass::Group,
        DepClass::Isa,
        DepClass::Etw,
        DepClass::Common,
    ];

    fn parse(word: &str) -> Option<DepClass> {
        Self::ALL
            .into_iter()
            .find(|c| c.to_string().eq_ignore_ascii_case(word))
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

/// The attributes a probe description gives the clauses under it (libdtrace's
/// `dt_probe_info`): those of the provider's name, weakened by those of each part that is
/// neither empty nor a glob. A description whose provider part is empty or a glob has
/// `Unstable` parts throughout.
pub fn description_attrs(desc: &crate::probes::ProbeDesc) -> Attr {
    let named = |part: &str| !open_part(part);
    if !named(&desc.provider) {
        return Attr::UNNAMED;
    }
    let p = provider_attrs(&desc.provider);
    let mut a = p.provider;
    for (part, attr) in [
        (&desc.module, p.module),
        (&desc.function, p.function),
        (&desc.name, p.name),
    ] {
        if named(part) {
            a = a.min(attr);
        }
    }
    a
}

/// What a description tells of the probes it matches (libdtrace's `dt_probe_info`): its
/// attributes and its provider's, or `None` when it stands for no one probe: it matches
/// none, or several of a provider whose arguments are less than `Evolving` in data, or
/// several whose differing part is at least `Evolving` in name but left empty or globbed
/// (such probes must share their arguments' signature, so one may stand for all).
pub fn description_info(
    desc: &crate::probes::ProbeDesc,
    matched: &[crate::probes::ProbeInfo],
) -> Option<(Attr, &'static ProviderAttrs)> {
    let first = matched.first()?;
    let p = provider_attrs(&first.provider);
    if matched.len() > 1
        && (p.args.data < Stability::Evolving
            || (p.module.name >= Stability::Evolving && open_part(&desc.module))
            || (p.function.name >= Stability::Evolving && open_part(&desc.function))
            || (p.name.name >= Stability::Evolving && open_part(&desc.name)))
    {
        return None;
    }
    Some((description_attrs(desc), p))
}

/// A description part that names no one thing: empty, or a glob (libdtrace's `strisglob`,
/// whose `\\` escapes count as glob characters).
fn open_part(part: &str) -> bool {
    part.is_empty() || part.contains(['*', '?', '[', '\\'])
}

/// What `probeprov`, `probemod`, `probefunc`, `probename` and `args` have in a clause whose
/// description matches no probe (`_dtrace_prvdesc`).
pub const UNNAMED_PROVIDER: ProviderAttrs = ProviderAttrs {
    provider: Attr::UNNAMED,
    module: Attr::UNNAMED,
    function: Attr::UNNAMED,
    name: Attr::UNNAMED,
    args: Attr::UNNAMED,
};

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

    #[test]
    fn attributes_parse_as_dtrace_str2attr_reads_them() {
        assert_eq!(
            Attr::parse("evolving/Unstable/isa"),
            Some(Attr::new(S::Evolving, S::Unstable, C::Isa))
        );
        // missing parts are at their maximum; an empty part ends the text
        assert_eq!(
            Attr::parse("Private"),
            Some(Attr::new(S::Private, S::Standard, C::Common))
        );
        assert_eq!(
            Attr::parse("Stable//ISA"),
            Some(Attr::new(S::Stable, S::Standard, C::Common))
        );
        assert_eq!(Attr::parse("Stable/Bogus"), None);
        assert_eq!(Attr::parse("Stable/Stable/Common/Common"), None);
    }

    #[test]
    fn a_description_stands_for_its_probes_only_where_dt_probe_info_lets_it() {
        let probe = |prov: &str, func: &str, name: &str| crate::probes::ProbeInfo {
            id: 1,
            provider: prov.into(),
            module: String::new(),
            function: func.into(),
            name: name.into(),
            arg_types: Vec::new(),
            arg_native: Vec::new(),
        };
        let desc = |t: &str| crate::probes::ProbeDesc::parse(t).unwrap();
        // none matched
        assert_eq!(description_info(&desc("dtrace:::BEGIN"), &[]), None);
        // one match: the provider's attributes, Unstable when the provider is not named
        let one = [probe("dtrace", "", "BEGIN")];
        let (a, p) = description_info(&desc("BEGIN"), &one).unwrap();
        assert_eq!(a, Attr::UNNAMED);
        assert_eq!(p, &DTRACE);
        let (a, _) = description_info(&desc("dtrace:::BEGIN"), &one).unwrap();
        assert_eq!(a, Attr::DEFAULT);
        // several matches of a provider whose arguments are less than Evolving: none
        let two = [
            probe("profile", "", "tick-1s"),
            probe("profile", "", "tick-1"),
        ];
        assert_eq!(description_info(&desc("profile:::tick-*"), &two), None);
        // several of a provider with Evolving arguments whose name part is globbed: none;
        // the same with the name part named: the first stands for them
        let two = [probe("sched", "a", "on-cpu"), probe("sched", "b", "on-cpu")];
        assert_eq!(description_info(&desc("sched:::on*"), &two), None);
        assert!(description_info(&desc("sched:::on-cpu"), &two).is_some());
    }
}
