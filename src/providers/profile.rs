//! The `profile` provider: `profile-N` (every CPU) and `tick-N` (one CPU) at a rate or interval
//! with units `ns us ms s m h d hz` (`nsec`, `usec`, `msec`, `sec`, `min`, `hour`, `day` too).
//! As in DTrace, probes are created when a description names them, and intervals shorter than
//! 200 microseconds are refused.

use super::Provider;
use crate::probes::{glob_match, ProbeDesc, ProbeInfo};

pub struct ProfileProvider;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TickKind {
    Profile,
    Tick,
}

/// The shortest interval the provider accepts, in nanoseconds.
pub const MIN_INTERVAL_NS: u64 = 200_000;

/// First id of the profile provider's probes; on-demand probes get ids from their name.
const FIRST_ID: u64 = 4;

/// Parses `profile-97`, `tick-1sec`, `tick-10ms`, `profile-1000hz` into (kind, interval in ns).
pub fn parse_rate(name: &str) -> Option<(TickKind, u64)> {
    let (kind, rest) = if let Some(r) = name.strip_prefix("profile-") {
        (TickKind::Profile, r)
    } else if let Some(r) = name.strip_prefix("tick-") {
        (TickKind::Tick, r)
    } else {
        return None;
    };
    let digits = rest.bytes().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let n: u64 = rest[..digits].parse().ok()?;
    let unit = &rest[digits..];
    let mult: u64 = match unit {
        "ns" | "nsec" => 1,
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" | "hour" => 3_600_000_000_000,
        "d" | "day" => 86_400_000_000_000,
        "" | "hz" => {
            if n == 0 {
                return None;
            }
            let ns = 1_000_000_000 / n;
            return (ns >= MIN_INTERVAL_NS).then_some((kind, ns));
        }
        _ => return None,
    };
    let ns = n.checked_mul(mult)?;
    (ns >= MIN_INTERVAL_NS).then_some((kind, ns))
}

const LISTED: [&str; 15] = [
    "profile-97",
    "profile-199",
    "profile-499",
    "profile-997",
    "profile-1999",
    "profile-4001",
    "profile-4999",
    "tick-1",
    "tick-10",
    "tick-100",
    "tick-500",
    "tick-1000",
    "tick-5000",
    "tick-1sec",
    "tick-10sec",
];

fn probe(id: u64, name: &str) -> ProbeInfo {
    let args = match parse_rate(name) {
        Some((TickKind::Profile, _)) => {
            vec!["uintptr_t".into(), "uintptr_t".into(), "hrtime_t".into()]
        }
        _ => vec!["uintptr_t".into(), "uintptr_t".into()],
    };
    ProbeInfo {
        id,
        provider: "profile".into(),
        module: String::new(),
        function: String::new(),
        name: name.to_string(),
        arg_types: args,
        arg_native: Vec::new(),
    }
}

impl Provider for ProfileProvider {
    fn name(&self) -> &str {
        "profile"
    }

    fn matching(&self, desc: &ProbeDesc) -> Vec<ProbeInfo> {
        if !desc.module.is_empty() && !glob_match(&desc.module, "") {
            return Vec::new();
        }
        if !desc.function.is_empty() && !glob_match(&desc.function, "") {
            return Vec::new();
        }
        let mut v: Vec<ProbeInfo> = LISTED
            .iter()
            .enumerate()
            .filter(|(_, n)| glob_match(&desc.name, n))
            .map(|(i, n)| probe(FIRST_ID + i as u64, n))
            .collect();
        if v.is_empty() && desc.is_exact() && desc.name.starts_with("sample-") {
            // sample-N: every kernel sample of a recorded trace
            let mut p = super::etw::sample_probe();
            p.name = desc.name.clone();
            v.push(p);
        } else if !desc.is_exact()
            && !desc.name.is_empty()
            && desc.name != "*"
            && glob_match(&desc.name, "sample-1ms")
        {
            // a pattern naming the samples (`sample-*`): the sample probe
            v.push(super::etw::sample_probe());
        }
        if v.is_empty() && desc.is_exact() && parse_rate(&desc.name).is_some() {
            let id = FIRST_ID + LISTED.len() as u64 + name_hash(&desc.name);
            v.push(probe(id, &desc.name));
        }
        v
    }

    fn list(&self) -> Vec<ProbeInfo> {
        LISTED
            .iter()
            .enumerate()
            .map(|(i, n)| probe(FIRST_ID + i as u64, n))
            .collect()
    }
}

/// A stable id for an on-demand probe, above the listed ones.
fn name_hash(name: &str) -> u64 {
    let mut h: u64 = 1469598103934665603;
    for b in name.bytes() {
        h = (h ^ b as u64).wrapping_mul(1099511628211);
    }
    1000 + (h % 60_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_patterns_match_the_sample_probe() {
        let p = ProfileProvider;
        let names = |d: &str| -> Vec<String> {
            p.matching(&ProbeDesc::parse(d).unwrap())
                .into_iter()
                .map(|i| i.name)
                .collect()
        };
        assert_eq!(names("profile:::sample-*"), ["sample-1ms"]);
        assert_eq!(names("profile:::sample-5ms"), ["sample-5ms"]);
        // a bare pattern does not pull the samples in
        assert!(!names("profile:::*").iter().any(|n| n.starts_with("sample")));
    }

    #[test]
    fn rates_and_units() {
        assert_eq!(
            parse_rate("tick-1sec"),
            Some((TickKind::Tick, 1_000_000_000))
        );
        assert_eq!(parse_rate("tick-1s"), Some((TickKind::Tick, 1_000_000_000)));
        assert_eq!(
            parse_rate("profile-97"),
            Some((TickKind::Profile, 1_000_000_000 / 97))
        );
        assert_eq!(
            parse_rate("profile-1ms"),
            Some((TickKind::Profile, 1_000_000))
        );
        assert_eq!(parse_rate("tick-1ns"), None);
        assert_eq!(parse_rate("tick-100us"), None);
        assert_eq!(parse_rate("tick-200us"), Some((TickKind::Tick, 200_000)));
        assert_eq!(parse_rate("tick-5001"), None);
        assert_eq!(parse_rate("tick-x"), None);
    }
}
