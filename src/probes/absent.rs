//! Why a description whose provider field names no provider of this run matched nothing: the
//! DTrace providers dtx does not have, with what it has instead; and, for any other name, the
//! provider names closest to it. The catalog answers with this when no provider of its own
//! could ([`super::ProbeCatalog::why_none`]).

/// The reason for a description no provider could explain, given the names of the providers
/// there are and whether one of them took the provider field (then nothing is added: that
/// provider's own words stand).
pub fn why_no_provider(field: &str, names: &[&str], matched: bool) -> Option<String> {
    if field.is_empty() || field.contains(['*', '?', '[']) {
        return None;
    }
    let lower = field.to_ascii_lowercase();
    let known = match lower.as_str() {
        "fbt" => Some(
            "dtx has no function boundary probes: ETW records no entry and return of kernel \
             functions (and dtx does not attach kprobes on Linux); the kernel's work shows in \
             syscall (system calls), the kernel providers (proc, sched, io, ...) and profile-N \
             with stack()",
        ),
        "sdt" => Some(
            "dtx has no statically defined kernel probes: the kernel's ETW events are its \
             providers here (dtx -l lists them); named ETW providers are probes too",
        ),
        "lockstat" => Some(
            "dtx has no lock probes: ETW records no kernel lock acquisitions; the sched \
             provider's off-cpu and on-cpu show the waits",
        ),
        "plockstat" => Some(
            "dtx has no user-level lock probes: use pid probes on the lock functions \
             (pid$target::EnterCriticalSection:entry)",
        ),
        "cpc" => {
            Some("dtx has no CPU performance counter probes: the profile provider samples instead")
        }
        _ => None,
    };
    if matched {
        return None;
    }
    if let Some(k) = known {
        return Some(k.to_string());
    }
    let close: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| near(&lower, &n.to_ascii_lowercase()))
        .take(3)
        .collect();
    Some(if close.is_empty() {
        format!(
            "no provider named {field} here (dtx -l lists the providers; over a trace, the \
             ETW providers are those whose events it holds)"
        )
    } else {
        format!(
            "no provider named {field} here; the closest: {}",
            close.join(", ")
        )
    })
}

/// Whether two provider names are near: one holds the other, or at most two edits apart.
fn near(a: &str, b: &str) -> bool {
    if a.len() >= 3 && b.len() >= 3 && (a.contains(b) || b.contains(a)) {
        return true;
    }
    edits(a, b) <= 2
}

/// Levenshtein distance (small strings only: provider names).
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_dtrace_providers_say_what_dtx_has_instead() {
        let fbt = why_no_provider("fbt", &["syscall", "sched"], false).unwrap();
        assert!(
            fbt.starts_with("dtx has no function boundary probes"),
            "{fbt}"
        );
        assert!(why_no_provider("fbt*", &[], false).is_none());
        let near = why_no_provider("shed", &["sched", "syscall", "io"], false).unwrap();
        assert_eq!(near, "no provider named shed here; the closest: sched");
        // a provider that took the field explains its own (pid's), or nothing is added
        assert!(why_no_provider("fbt", &["fbt"], true).is_none());
        assert_eq!(edits("kitten", "sitting"), 3);
    }
}
