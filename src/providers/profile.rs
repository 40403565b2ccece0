//! The `profile` provider: `profile-N` (every CPU) and `tick-N` (one CPU) at a rate or interval
//! with units `ns us ms s m h d hz` (`nsec`, `usec`, `msec`, `sec`, `min`, `hour`, `day` too).
//! As in DTrace, probes are created when a description names them, and intervals shorter than
//! 200 microseconds are refused.

use super::Provider;
use crate::probes::{glob_match, ProbeDesc, ProbeInfo};

/// The profile provider. With `samples` (a run over ETW, recorded or live), `-l` also lists
/// the Windows port's `sample-N` probe, which fires for every SampledProfile record.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProfileProvider {
    pub samples: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TickKind {
    Profile,
    Tick,
}

/// The shortest interval the provider accepts, in nanoseconds.
pub const MIN_INTERVAL_NS: u64 = 200_000;

/// First id of the profile provider's probes; on-demand probes get ids from their name.
const FIRST_ID: u64 = 4;

/// `N` with a time unit (`ns us ms s`, and with `long` also `m h d`, each with its long
/// spelling) or a rate (`N`, `Nhz`: N per second), in nanoseconds; None for 0, no digits or
/// another unit. The one reading of the interval in `profile-N`, `tick-N` and `sample-N`.
fn interval_ns(rest: &str, long: bool) -> Option<u64> {
    let digits = rest.bytes().take_while(|c| c.is_ascii_digit()).count();
    let n: u64 = rest.get(..digits)?.parse().ok()?;
    if n == 0 {
        return None;
    }
    let mult: u64 = match &rest[digits..] {
        "ns" | "nsec" => 1,
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" if long => 60_000_000_000,
        "h" | "hour" if long => 3_600_000_000_000,
        "d" | "day" if long => 86_400_000_000_000,
        "" | "hz" => return Some(1_000_000_000 / n),
        _ => return None,
    };
    n.checked_mul(mult)
}

/// Parses `profile-97`, `tick-1sec`, `tick-10ms`, `profile-1000hz` into (kind, interval in ns).
pub fn parse_rate(name: &str) -> Option<(TickKind, u64)> {
    let (kind, rest) = if let Some(r) = name.strip_prefix("profile-") {
        (TickKind::Profile, r)
    } else {
        (TickKind::Tick, name.strip_prefix("tick-")?)
    };
    let ns = interval_ns(rest, true)?;
    (ns >= MIN_INTERVAL_NS).then_some((kind, ns))
}

/// Parses the interval of the Windows port's `sample-N` probe name (`sample-1ms`,
/// `sample-250us`, `sample-1000hz`, `sample-1000`: N per second), in nanoseconds; `None` for a
/// name that is not one (`sample-foo`).
pub fn parse_sample(name: &str) -> Option<u64> {
    interval_ns(name.strip_prefix("sample-")?, false).map(|ns| ns.max(1))
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
        if v.is_empty() && desc.is_exact() && parse_sample(&desc.name).is_some() {
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
        let mut v: Vec<ProbeInfo> = LISTED
            .iter()
            .enumerate()
            .map(|(i, n)| probe(FIRST_ID + i as u64, n))
            .collect();
        if self.samples {
            v.push(super::etw::sample_probe());
        }
        v
    }
}

/// The `profile-N` probes of a run over ETW, fired from the kernel's SampledProfile records
/// instead of a timer: each CPU's samples thinned to N a second, so that, as in DTrace, a
/// firing runs in the context of whatever the CPU was running (pid, tid, execname, the PCs,
/// the stacks of the sample). With a trace that sampled more slowly than N Hz, every sample
/// fires ([`ProfileSampler::notes`] says so).
#[derive(Clone, Debug, Default)]
pub struct ProfileSampler {
    rates: Vec<SampledRate>,
    /// Per CPU: the times of its first and last samples (ns) and how many it had.
    spans: Vec<(u64, u64, u64)>,
    samples: u64,
}

/// One `profile-N` probe being fed from samples.
#[derive(Clone, Debug)]
struct SampledRate {
    probe: u64,
    name: String,
    interval: u64,
    /// Per CPU, when the probe is next due (ns); 0 before its first sample.
    next: Vec<u64>,
}

/// The most CPUs the sampler keeps time for (the processor numbers of an ETW record).
const MAX_CPUS: usize = 4096;

impl ProfileSampler {
    /// Adds a `profile-N` probe (`name` for the notes, `interval` in ns).
    pub fn add(&mut self, probe: u64, name: &str, interval: u64) {
        if self.rates.iter().all(|r| r.probe != probe) {
            self.rates.push(SampledRate {
                probe,
                name: name.to_string(),
                interval: interval.max(1),
                next: Vec::new(),
            });
        }
    }

    /// Whether no probe is fed from samples.
    pub fn is_empty(&self) -> bool {
        self.rates.is_empty()
    }

    /// The probes due at a sample of `cpu` at time `t` (ns), with how late each is (ns past
    /// its due time, `profile-N`'s `arg2`): `fire(probe, late)` for each.
    pub fn sample(&mut self, cpu: usize, t: u64, mut fire: impl FnMut(u64, u64)) {
        if cpu >= MAX_CPUS {
            return;
        }
        self.samples += 1;
        if self.spans.len() <= cpu {
            self.spans.resize(cpu + 1, (0, 0, 0));
        }
        let span = &mut self.spans[cpu];
        if span.2 == 0 {
            span.0 = t;
        }
        span.1 = t;
        span.2 += 1;
        for r in &mut self.rates {
            if r.next.len() <= cpu {
                r.next.resize(cpu + 1, 0);
            }
            let next = &mut r.next[cpu];
            // a sample up to half an interval early counts: a sampling interval a little
            // shorter than the probe's (Windows rounds it to 100 ns) must not halve the rate
            if *next != 0 && t.saturating_add(r.interval / 2) < *next {
                continue;
            }
            let late = if *next == 0 {
                0
            } else {
                t.saturating_sub(*next)
            };
            // keep the phase (N a second on average), unless the CPU had no samples for more
            // than an interval
            *next = if *next == 0 || late >= r.interval {
                t.max(1) + r.interval
            } else {
                *next + r.interval
            };
            fire(r.probe, late);
        }
    }

    /// The mean time between two samples of one CPU (ns), over every CPU that had two or
    /// more; 0 when none had.
    fn sampling_interval(&self) -> u64 {
        let (time, gaps) = self
            .spans
            .iter()
            .filter(|s| s.2 >= 2)
            .fold((0u64, 0u64), |(t, g), s| {
                (t.saturating_add(s.1 - s.0), g + s.2 - 1)
            });
        time.checked_div(gaps).unwrap_or(0)
    }

    /// What the user should know once the samples are read: the trace had none, or sampled
    /// more slowly than a probe's rate.
    pub fn notes(&self) -> Vec<String> {
        let mut v = Vec::new();
        let sampled = self.sampling_interval();
        for r in &self.rates {
            if self.samples == 0 {
                v.push(format!(
                    "profile:::{} fires from the trace's SampledProfile records, and it has none",
                    r.name
                ));
            } else if sampled > r.interval + r.interval / 20 {
                v.push(format!(
                    "profile:::{}: the trace sampled each CPU every {:.3} ms, more slowly than \
                     the probe's rate: every sample fires",
                    r.name,
                    sampled as f64 / 1e6
                ));
            }
        }
        v
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
        let p = ProfileProvider::default();
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
    fn sample_names_need_an_interval() {
        assert_eq!(parse_sample("sample-1ms"), Some(1_000_000));
        assert_eq!(parse_sample("sample-1000hz"), Some(1_000_000));
        assert_eq!(parse_sample("sample-250us"), Some(250_000));
        assert_eq!(parse_sample("sample-foo"), None);
        assert_eq!(parse_sample("sample-0ms"), None);
        let p = ProfileProvider::default();
        let d = ProbeDesc::parse("profile:::sample-foo").unwrap();
        assert!(p.matching(&d).is_empty());
        assert!(!p.list().iter().any(|x| x.name.starts_with("sample-")));
        let p = ProfileProvider { samples: true };
        assert!(p.list().iter().any(|x| x.name == "sample-1ms"));
    }

    #[test]
    fn samples_thin_to_the_rate_per_cpu() {
        let mut s = ProfileSampler::default();
        // 97 Hz from 1 kHz samples on two CPUs over 2 seconds
        s.add(7, "profile-97", 1_000_000_000 / 97);
        let mut fired = [0u32; 2];
        for ms in 1..=2000u64 {
            for (cpu, n) in fired.iter_mut().enumerate() {
                s.sample(cpu, ms * 1_000_000 + cpu as u64, |p, _| {
                    assert_eq!(p, 7);
                    *n += 1;
                });
            }
        }
        for n in fired {
            assert!((193..=195).contains(&n), "{n}");
        }
        assert!(s.notes().is_empty());
        // a slower trace: every sample fires, with a note
        let mut s = ProfileSampler::default();
        s.add(7, "profile-997", 1_000_000_000 / 997);
        let mut n = 0;
        for ms in 1..=100u64 {
            s.sample(0, ms * 10_000_000, |_, _| n += 1);
        }
        assert_eq!(n, 100);
        assert_eq!(s.notes().len(), 1);
        assert!(s.notes()[0].contains("every 10.000 ms"), "{:?}", s.notes());
        // samples a little more often than the rate (Windows' 100 ns rounding): each fires
        let mut s = ProfileSampler::default();
        s.add(7, "profile-97", 1_000_000_000 / 97);
        let mut n = 0;
        for k in 1..=1000u64 {
            s.sample(3, k * 10_300_000, |_, _| n += 1);
        }
        assert!(n >= 999, "{n}");
        let mut s = ProfileSampler::default();
        s.add(7, "profile-97", 1_000_000_000 / 97);
        assert!(s.notes()[0].contains("has none"));
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
