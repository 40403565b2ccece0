//! The `dtrace` command's diagnostic messages (stderr), with the program
//! name `dtx`.  Every function returns the complete line including the
//! `dtx: ` prefix and the trailing newline.
//!
//! dtrace prints "notices" (probe match counts, process exit notes,
//! "allowing destructive actions") only when not quiet; errors, drops and
//! faults are always printed.  [`notice`] encodes that rule.

/// Program name used in messages.
pub const PROG: &str = "dtx";

/// `dtx: <msg>` — dtrace's `error()` for a message that ends in a newline.
pub fn error_line(msg: &str) -> String {
    if msg.ends_with('\n') {
        format!("{PROG}: {msg}")
    } else {
        format!("{PROG}: {msg}\n")
    }
}

/// `dtx: <msg>: <reason>` — dtrace's `error()`/`fatal()` for a message
/// without a trailing newline (dtrace appends the errno / libdtrace reason).
pub fn error_with_reason(msg: &str, reason: &str) -> String {
    format!("{PROG}: {msg}: {reason}\n")
}

/// A notice: `Some(line)` unless quiet.
pub fn notice(msg: &str, quiet: bool) -> Option<String> {
    if quiet {
        None
    } else {
        Some(error_line(msg))
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// What a compiled program came from, for the "matched" notice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgramSource {
    /// `-s file`: "script".
    Script,
    /// `-n`, `-P`, `-m`, `-f`, `-i`: "description".
    Description,
}

/// `dtx: script 'x.d' matched 3 probes` /
/// `dtx: description 'BEGIN' matched 1 probe`.
pub fn matched(src: ProgramSource, name: &str, n: u64) -> String {
    format!(
        "{PROG}: {} '{name}' matched {n} probe{}\n",
        src.word(),
        plural(n)
    )
}

impl ProgramSource {
    /// What dtrace calls the program in its messages: "script" or "description".
    pub fn word(self) -> &'static str {
        match self {
            ProgramSource::Script => "script",
            ProgramSource::Description => "description",
        }
    }
}

/// `-l` with a description that matches nothing:
/// `dtx: failed to match p:m:f:n: No probe matches description`.
pub fn failed_to_match(
    provider: &str,
    module: &str,
    func: &str,
    name: &str,
    reason: &str,
) -> String {
    format!("{PROG}: failed to match {provider}:{module}:{func}:{name}: {reason}\n")
}

/// `dtx: no probes matched` / `dtx: no probes specified`.
pub fn no_probes(had_programs: bool) -> String {
    format!(
        "{PROG}: no probes {}\n",
        if had_programs { "matched" } else { "specified" }
    )
}

// ---------------------------------------------------------------------------
// Faults
// ---------------------------------------------------------------------------

pub const DTRACEFLT_UNKNOWN: u32 = 0;
pub const DTRACEFLT_BADADDR: u32 = 1;
pub const DTRACEFLT_BADALIGN: u32 = 2;
pub const DTRACEFLT_ILLOP: u32 = 3;
pub const DTRACEFLT_DIVZERO: u32 = 4;
pub const DTRACEFLT_NOSCRATCH: u32 = 5;
pub const DTRACEFLT_KPRIV: u32 = 6;
pub const DTRACEFLT_UPRIV: u32 = 7;
pub const DTRACEFLT_TUPOFLOW: u32 = 8;
pub const DTRACEFLT_BADSTACK: u32 = 9;
pub const DTRACEFLT_LIBRARY: u32 = 1000;

/// The text for a DTRACEFLT_* code.
pub fn fault_str(fault: u32) -> &'static str {
    match fault {
        DTRACEFLT_BADADDR => "invalid address",
        DTRACEFLT_BADALIGN => "invalid alignment",
        DTRACEFLT_ILLOP => "illegal operation",
        DTRACEFLT_DIVZERO => "divide-by-zero",
        DTRACEFLT_NOSCRATCH => "out of scratch space",
        DTRACEFLT_KPRIV => "invalid kernel access",
        DTRACEFLT_UPRIV => "invalid user access",
        DTRACEFLT_TUPOFLOW => "tuple stack overflow",
        DTRACEFLT_BADSTACK => "bad stack",
        DTRACEFLT_LIBRARY => "library-level fault",
        _ => "unknown fault",
    }
}

/// The probe a fault happened in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultProbe<'a> {
    /// Enabled probe ID.
    pub epid: u32,
    /// Probe ID.
    pub id: u32,
    pub provider: &'a str,
    pub module: &'a str,
    pub func: &'a str,
    pub name: &'a str,
}

/// The libdtrace error message (without `dtx: `), as also seen by a
/// dtrace:::ERROR consumer:
/// `error on enabled probe ID 1 (ID 1: dtrace:::BEGIN): invalid address (0x0) in action #1 at DIF offset 0\n`.
///
/// `action` 0 means the predicate; `dif_offset` -1 omits the offset;
/// the address is shown only for bad address / alignment / stack faults.
pub fn fault_message(
    p: &FaultProbe,
    action: i32,
    dif_offset: i32,
    fault: u32,
    addr: u64,
) -> String {
    let where_ = if action == 0 {
        "predicate".to_string()
    } else {
        format!("action #{action}")
    };
    let offinfo = if dif_offset != -1 {
        format!(" at DIF offset {dif_offset}")
    } else {
        String::new()
    };
    let details = match fault {
        DTRACEFLT_BADADDR | DTRACEFLT_BADALIGN | DTRACEFLT_BADSTACK => format!(" (0x{addr:x})"),
        _ => String::new(),
    };
    format!(
        "error on enabled probe ID {} (ID {}: {}:{}:{}:{}): {}{} in {}{}\n",
        p.epid,
        p.id,
        p.provider,
        p.module,
        p.func,
        p.name,
        fault_str(fault),
        details,
        where_,
        offinfo
    )
}

/// The stderr line for a run-time fault: `dtx: error on enabled probe ...`.
pub fn fault_line(p: &FaultProbe, action: i32, dif_offset: i32, fault: u32, addr: u64) -> String {
    error_line(&fault_message(p, action, dif_offset, fault, addr))
}

/// An I/O error as C's `strerror()` words it: the common kinds in POSIX's words on every OS
/// (Windows' own texts differ), else Rust's text without its ` (os error N)` tail.
pub fn strerror(e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::NotFound => return "No such file or directory".into(),
        ErrorKind::PermissionDenied => return "Permission denied".into(),
        ErrorKind::AlreadyExists => return "File exists".into(),
        _ => {}
    }
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) if s.ends_with(')') => s[..i].to_string(),
        _ => s,
    }
}

/// A library-level fault (consumer-side failure while processing a record),
/// e.g. `dtx: error on enabled probe ID 2 (ID 5: p:m:f:n): <why>`.
pub fn library_fault_line(p: &FaultProbe, why: &str) -> String {
    error_line(&format!(
        "error on enabled probe ID {} (ID {}: {}:{}:{}:{}): {}\n",
        p.epid, p.id, p.provider, p.module, p.func, p.name, why
    ))
}

// ---------------------------------------------------------------------------
// Drops
// ---------------------------------------------------------------------------

/// The kinds of drop dtrace reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropKind {
    /// Principal buffer drops (per CPU).
    Principal,
    /// Aggregation buffer drops (per CPU).
    Aggregation,
    Dynamic,
    DynRinse,
    DynDirty,
    Spec,
    SpecBusy,
    SpecUnavail,
    StackStrOverflow,
    DblError,
}

impl DropKind {
    /// dtrace's `dtrace_dropkind_t` number of the kind (FreeBSD's structured DROP `kind`).
    pub fn number(self) -> u64 {
        match self {
            DropKind::Principal => 0,
            DropKind::Aggregation => 1,
            DropKind::Dynamic => 2,
            DropKind::DynRinse => 3,
            DropKind::DynDirty => 4,
            DropKind::Spec => 5,
            DropKind::SpecBusy => 6,
            DropKind::SpecUnavail => 7,
            DropKind::StackStrOverflow => 8,
            DropKind::DblError => 9,
        }
    }

    /// The `DTRACEDROP_*` tag shown with `-x droptags`.
    pub fn tag(self) -> &'static str {
        match self {
            DropKind::Principal => "DTRACEDROP_PRINCIPAL",
            DropKind::Aggregation => "DTRACEDROP_AGGREGATION",
            DropKind::Dynamic => "DTRACEDROP_DYNAMIC",
            DropKind::DynRinse => "DTRACEDROP_DYNRINSE",
            DropKind::DynDirty => "DTRACEDROP_DYNDIRTY",
            DropKind::Spec => "DTRACEDROP_SPEC",
            DropKind::SpecBusy => "DTRACEDROP_SPECBUSY",
            DropKind::SpecUnavail => "DTRACEDROP_SPECUNAVAIL",
            DropKind::StackStrOverflow => "DTRACEDROP_STKSTROVERFLOW",
            DropKind::DblError => "DTRACEDROP_DBLERROR",
        }
    }
}

fn tag_prefix(kind: DropKind, droptags: bool) -> String {
    if droptags {
        format!("[{}] ", kind.tag())
    } else {
        String::new()
    }
}

/// Per-CPU buffer drops: `dtx: 3 drops on CPU 0` /
/// `dtx: 1 aggregation drop on CPU 2`.  `kind` must be `Principal` or
/// `Aggregation` (others are treated as principal).
pub fn cpu_drops(kind: DropKind, drops: u64, cpu: i32, droptags: bool) -> String {
    let agg = kind == DropKind::Aggregation;
    let kind = if agg { kind } else { DropKind::Principal };
    let msg = format!(
        "{}{} {}drop{} on CPU {}\n",
        tag_prefix(kind, droptags),
        drops,
        if agg { "aggregation " } else { "" },
        if drops > 1 { "s" } else { "" },
        cpu
    );
    error_line(&truncate79(msg))
}

/// Status-derived drops (`drops` new since the last status):
/// `dtx: 5 dynamic variable drops`, `dtx: 1 speculative drop`,
/// `dtx: 2 failed speculations (no speculative buffer available)`,
/// `dtx: 1 error in ERROR probe enabling`, ...
///
/// For `Principal`/`Aggregation` this falls back to [`cpu_drops`] on CPU 0.
pub fn status_drops(kind: DropKind, drops: u64, droptags: bool) -> String {
    let (what, tail) = match kind {
        DropKind::Dynamic => ("dynamic variable drop", ""),
        DropKind::DynRinse => ("dynamic variable drop", " with non-empty rinsing list"),
        DropKind::DynDirty => ("dynamic variable drop", " with non-empty dirty list"),
        DropKind::Spec => ("speculative drop", ""),
        DropKind::SpecBusy => ("failed speculation", " (available buffer(s) still busy)"),
        DropKind::SpecUnavail => ("failed speculation", " (no speculative buffer available)"),
        DropKind::StackStrOverflow => ("jstack()/ustack() string table overflow", ""),
        DropKind::DblError => ("error", " in ERROR probe enabling"),
        DropKind::Principal | DropKind::Aggregation => return cpu_drops(kind, drops, 0, droptags),
    };
    let msg = format!(
        "{}{} {}{}{}\n",
        tag_prefix(kind, droptags),
        drops,
        what,
        if drops > 1 { "s" } else { "" },
        tail
    );
    error_line(&truncate79(msg))
}

/// The order in which dtrace checks (and so reports) status drops.
pub const STATUS_DROP_ORDER: [DropKind; 8] = [
    DropKind::Dynamic,
    DropKind::DynRinse,
    DropKind::DynDirty,
    DropKind::Spec,
    DropKind::SpecBusy,
    DropKind::SpecUnavail,
    DropKind::StackStrOverflow,
    DropKind::DblError,
];

/// dtrace formats drop messages into an 80-byte buffer.
fn truncate79(mut s: String) -> String {
    if s.len() > 79 {
        let mut n = 79;
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        s.truncate(n);
    }
    s
}

// ---------------------------------------------------------------------------
// Option adjustments reported after `go`
// ---------------------------------------------------------------------------

/// `dtx: buffer size lowered to 2m` or `... lowered to 1000 bytes`.
/// `what` is e.g. "buffer size", "aggregation size", "speculation size",
/// "dynamic variable size", "string table size".
pub fn size_lowered(what: &str, new_size: i64) -> String {
    const UNITS: &[u8] = b" kmgtpe";
    let mut j = 0usize;
    let mut mul = 10u32;
    while mul < 63 && (1i64 << mul) <= new_size {
        j += 1;
        mul += 10;
    }
    let low_mask = (1i64 << (mul - 10)) - 1;
    if new_size & low_mask == 0 && j < UNITS.len() {
        format!(
            "{PROG}: {what} lowered to {}{}\n",
            new_size >> (mul - 10),
            UNITS[j] as char
        )
    } else {
        format!("{PROG}: {what} lowered to {new_size} bytes\n")
    }
}

/// `dtx: cleaning rate reduced to 50 hz` and friends.  `old`/`new` are
/// intervals in nanoseconds; `what` is e.g. "aggregation rate",
/// "cleaning rate", "status rate", "switch rate".  `None` if unchanged.
pub fn rate_changed(what: &str, old: i64, new: i64) -> Option<String> {
    const NANOSEC: i64 = 1_000_000_000;
    if new == 0 || old == new {
        return None;
    }
    let dir = if new > old { "reduced" } else { "increased" };
    Some(if new > 0 && new <= NANOSEC && NANOSEC % new == 0 {
        format!("{PROG}: {what} {dir} to {} hz\n", NANOSEC / new)
    } else if new % NANOSEC == 0 {
        format!(
            "{PROG}: {what} {dir} to once every {} seconds\n",
            new / NANOSEC
        )
    } else {
        format!("{PROG}: {what} {dir} to once every {new} nanoseconds\n")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matched_lines() {
        assert_eq!(
            matched(ProgramSource::Script, "x.d", 3),
            "dtx: script 'x.d' matched 3 probes\n"
        );
        assert_eq!(
            matched(ProgramSource::Description, "BEGIN", 1),
            "dtx: description 'BEGIN' matched 1 probe\n"
        );
        assert_eq!(
            matched(ProgramSource::Description, "foo", 0),
            "dtx: description 'foo' matched 0 probes\n"
        );
        assert_eq!(notice("x\n", true), None);
        assert_eq!(no_probes(true), "dtx: no probes matched\n");
        assert_eq!(
            failed_to_match("test_prov*", "", "", "", "No probe matches description"),
            "dtx: failed to match test_prov*:::: No probe matches description\n"
        );
    }

    #[test]
    fn faults() {
        let p = FaultProbe {
            epid: 1,
            id: 1,
            provider: "dtrace",
            module: "",
            func: "",
            name: "BEGIN",
        };
        assert_eq!(
            fault_line(&p, 1, 0, DTRACEFLT_BADADDR, 0),
            "dtx: error on enabled probe ID 1 (ID 1: dtrace:::BEGIN): invalid address (0x0) in action #1 at DIF offset 0\n"
        );
        assert_eq!(
            fault_line(&p, 0, 12, DTRACEFLT_DIVZERO, 0),
            "dtx: error on enabled probe ID 1 (ID 1: dtrace:::BEGIN): divide-by-zero in predicate at DIF offset 12\n"
        );
        assert_eq!(
            fault_message(&p, 2, -1, DTRACEFLT_BADALIGN, 0x1001),
            "error on enabled probe ID 1 (ID 1: dtrace:::BEGIN): invalid alignment (0x1001) in action #2\n"
        );
        assert_eq!(fault_str(77), "unknown fault");
        assert_eq!(
            library_fault_line(&p, "failed to allocate"),
            "dtx: error on enabled probe ID 1 (ID 1: dtrace:::BEGIN): failed to allocate\n"
        );
    }

    #[test]
    fn drops() {
        assert_eq!(
            status_drops(DropKind::Dynamic, 5, false),
            "dtx: 5 dynamic variable drops\n"
        );
        assert_eq!(
            status_drops(DropKind::Dynamic, 1, false),
            "dtx: 1 dynamic variable drop\n"
        );
        assert_eq!(
            status_drops(DropKind::DynDirty, 2, false),
            "dtx: 2 dynamic variable drops with non-empty dirty list\n"
        );
        assert_eq!(
            status_drops(DropKind::Spec, 1, false),
            "dtx: 1 speculative drop\n"
        );
        assert_eq!(
            status_drops(DropKind::SpecUnavail, 3, false),
            "dtx: 3 failed speculations (no speculative buffer available)\n"
        );
        assert_eq!(
            status_drops(DropKind::SpecBusy, 1, true),
            "dtx: [DTRACEDROP_SPECBUSY] 1 failed speculation (available buffer(s) still busy)\n"
        );
        assert_eq!(
            status_drops(DropKind::DblError, 1, false),
            "dtx: 1 error in ERROR probe enabling\n"
        );
        assert_eq!(
            cpu_drops(DropKind::Principal, 7, 0, false),
            "dtx: 7 drops on CPU 0\n"
        );
        assert_eq!(
            cpu_drops(DropKind::Aggregation, 1, 3, false),
            "dtx: 1 aggregation drop on CPU 3\n"
        );
        // "0 drops" never happens in dtrace but must not panic
        let _ = cpu_drops(DropKind::Principal, 0, -1, true);
    }

    #[test]
    fn adjustments() {
        assert_eq!(
            size_lowered("buffer size", 2 << 20),
            "dtx: buffer size lowered to 2m\n"
        );
        assert_eq!(
            size_lowered("buffer size", 1025),
            "dtx: buffer size lowered to 1025 bytes\n"
        );
        assert_eq!(
            size_lowered("buffer size", 512),
            "dtx: buffer size lowered to 512 \n"
        );
        let _ = size_lowered("x", i64::MAX);
        let _ = size_lowered("x", -5);
        assert_eq!(
            rate_changed("cleaning rate", 10_000_000, 20_000_000).unwrap(),
            "dtx: cleaning rate reduced to 50 hz\n"
        );
        assert_eq!(
            rate_changed("status rate", 1_000_000_000, 2_000_000_000).unwrap(),
            "dtx: status rate reduced to once every 2 seconds\n"
        );
        assert_eq!(rate_changed("x", 5, 5), None);
        let _ = rate_changed("x", 5, -7);
    }
}
