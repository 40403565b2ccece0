//! The self-check on Windows. Without elevation: the symbol path, the PDB of `ntdll.dll`, the
//! pid provider and fpid injection on a child (this executable's workload). Elevated: one D
//! program whose probes make dtx plan the sessions a real program needs (`sched`, `proc`,
//! `profile-997` with kernel and user stacks, `fsinfo`, Microsoft-Windows-DNS-Client, `dnet`
//! with stacks), run by this dtx over its Windows workload (a child process, a temporary file,
//! a DNS query for a name under `.invalid`, a busy loop); then what arrived is compared with
//! what the workload did, the system's sampling interval is watched while the run lasts and
//! after, the loss report is read, and the sessions are listed as `logman query -ets` lists
//! them (QueryAllTracesW). Under Wine, whose ETW consumer functions are stubs, the ETW checks
//! are tried once and reported as not possible with what the attempt said.

use std::path::PathBuf;
use std::time::Duration;

use super::common::{count_calls, ended_well, frame_function, has_chain, stack_entries};
use super::run::{dtx_while, words, workload_command, Ran};
use super::workload::{BUSY_CHAIN, FACT};
use super::Check;
use crate::sources::etw_live::plan;
use crate::sources::etw_live::windows as live;

/// How long the ETW run may take (the sessions' start, the workload, their stop).
const ETW_LIMIT: Duration = Duration::from_secs(45);
/// The busy loop's length, in ms.
const BUSY_MS: u64 = 800;

/// The names of the ETW checks, in order.
const ETW_CHECKS: [&str; 8] = [
    "etw-sessions",
    "etw-proc",
    "etw-file",
    "etw-dns",
    "etw-stack",
    "etw-interval",
    "etw-loss",
    "etw-no-session-left",
];

/// The prefix of the lines the checked program prints.
const SEEN: &str = "dtx-check-seen: ";

/// The checked D program: the probes a real program uses, so that the planner starts the
/// kernel session (sched, proc, profile with stacks, file I/O) and the user session (DNS
/// client, .NET runtime with stacks).
const PROGRAM: &str = r#"
proc:::start /ppid == $target/ { printf("dtx-check-seen: child %d %s\n", pid, execname); }
fsinfo:::write, fsinfo:::read /pid == $target/ { @files[args[0]->fi_pathname] = count(); }
microsoft-windows-dns-client:::events { @dns[etwfield_str("QueryName")] = count(); }
profile-997 /pid == $target/ { @u[ustack(100)] = count(); @k[stack(30)] = count(); }
sched:::on-cpu /pid == $target/ { @cs = count(); }
dnet::gc:gc-start { @gc[ustack(20)] = count(); }
END {
    printa("dtx-check-seen: file %s %@d\n", @files);
    printa("dtx-check-seen: dns %s %@d\n", @dns);
    printa("dtx-check-seen: on-cpu %@d\n", @cs);
    printf("dtx-check-seen: user stacks\n");
    printa(@u);
    printf("dtx-check-seen: kernel stacks\n");
    printa(@k);
    printf("dtx-check-seen: end\n");
}
"#;

pub fn checks(progress: &mut dyn FnMut(&str)) -> Vec<Check> {
    let mut v = Vec::new();
    let wine = live::wine_version();
    let elevated = live::process_elevated();
    progress("elevation");
    v.push(match (&wine, elevated) {
        (Some(w), _) => Check::pass(
            "elevation",
            format!(
                "running under Wine {w} (elevated: {}); live ETW cannot run there",
                if elevated { "yes" } else { "no" }
            ),
        ),
        (None, true) => Check::pass("elevation", "elevated (an Administrator prompt)"),
        (None, false) => Check::skip(
            "elevation",
            format!(
                "not elevated: the live ETW checks ({}) need an Administrator prompt",
                ETW_CHECKS.join(", ")
            ),
        ),
    });
    progress("symbol-path");
    v.push(symbol_path());
    progress("pdb-ntdll");
    v.push(pdb_ntdll());
    progress("pid-provider");
    v.push(count_calls(
        "pid-provider",
        "pid$target:a.out:dtx_check_hit:entry",
        &[],
        "pid provider (the debugger loop)",
    ));
    progress("fpid-inject");
    v.push(count_calls(
        "fpid-inject",
        "fpid$target:a.out:dtx_check_hit:entry",
        &[],
        "fpid agent injected",
    ));
    if let Some(w) = wine {
        progress("etw (under Wine)");
        let why = wine_reason();
        for name in ETW_CHECKS {
            v.push(Check::skip(
                name,
                format!(
                    "not possible under Wine {w}, whose ETW consumer (OpenTrace/ProcessTrace) \
                     is a stub; a live run there says: {why}"
                ),
            ));
        }
    } else if !elevated {
        for name in ETW_CHECKS {
            v.push(Check::skip(
                name,
                "needs elevation (an Administrator prompt)",
            ));
        }
    } else {
        progress("etw (sessions, workload, events)");
        v.extend(etw_checks());
    }
    v
}

/// The symbol path dtx searches for PDBs, in words.
fn symbol_path() -> Check {
    let alt = std::env::var("_NT_ALT_SYMBOL_PATH").ok();
    let main = std::env::var("_NT_SYMBOL_PATH").ok();
    let path = crate::symbols::pdb::SymbolPath::from_env();
    let shown = [("_NT_ALT_SYMBOL_PATH", alt), ("_NT_SYMBOL_PATH", main)]
        .into_iter()
        .filter_map(|(n, v)| v.map(|v| format!("{n}={v}")))
        .collect::<Vec<_>>()
        .join("; ");
    if shown.is_empty() {
        return Check::pass(
            "symbol-path",
            "no _NT_SYMBOL_PATH: PDBs are found where the image records them and beside it; \
             system DLLs are named from their exports",
        );
    }
    Check::pass(
        "symbol-path",
        format!(
            "{shown} ({} local places; servers by URL are not contacted)",
            path.entries.len()
        ),
    )
}

/// ntdll.dll's PDB identity, looked up as a live run does; its exports otherwise.
fn pdb_ntdll() -> Check {
    let name = "pdb-ntdll";
    let dir = std::env::var_os("SystemRoot")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("C:\\Windows"));
    let image = dir.join("System32").join("ntdll.dll");
    let bytes = match std::fs::read(&image) {
        Ok(b) => b,
        Err(e) => return Check::fail(name, format!("cannot read {}: {e}", image.display())),
    };
    let file = match object::File::parse(&*bytes) {
        Ok(f) => f,
        Err(e) => return Check::fail(name, format!("{}: not a PE image: {e}", image.display())),
    };
    let exports = crate::symbols::pe::functions(&file).len();
    let Some(id) = crate::symbols::pdb::image_pdb_id(&file) else {
        return Check::pass(
            name,
            format!(
                "{} records no PDB; its {exports} exported functions name its frames",
                image.display()
            ),
        );
    };
    let symbol_path = crate::symbols::pdb::SymbolPath::from_env();
    match crate::symbols::pdb::find_pdb(&id, Some(&image), &symbol_path) {
        Some(pdb) => match crate::symbols::pdb::read(&pdb, Some(&id)) {
            Ok(_) => Check::pass(
                name,
                format!(
                    "{} {} found: {}",
                    id.file_name(),
                    id.store_key(),
                    pdb.display()
                ),
            ),
            Err(e) => Check::fail(name, format!("{}: {e}", pdb.display())),
        },
        None => Check::pass(
            name,
            format!(
                "{} {} is not in a local store (dtx downloads nothing): ntdll's frames are \
                 named from its {exports} exports; symchk or a debugger fills the cache of \
                 _NT_SYMBOL_PATH",
                id.file_name(),
                id.store_key()
            ),
        ),
    }
}

/// What a live session says under Wine: the first line of a short run's error, or that it
/// hung.
fn wine_reason() -> String {
    let ran = super::run::dtx(
        &words(&[
            "-q",
            "-n",
            "sched:::on-cpu { exit(0); } tick-2s { exit(0); }",
        ]),
        Duration::from_secs(15),
    );
    match ran.code {
        Some(0) if !ran.hung => {
            "Wine's ETW consumer (OpenTrace/ProcessTrace) is a stub: a session starts but delivers nothing".into()
        }
        _ => ran.why(),
    }
}

/// A fact the workload printed: the rest of its line after `key `.
fn fact<'a>(out: &'a str, key: &str) -> Option<&'a str> {
    out.lines()
        .find_map(|l| l.strip_prefix(FACT)?.strip_prefix(key)?.strip_prefix(' '))
}

/// The lines the program printed with `tag` after [`SEEN`].
fn seen<'a>(out: &'a str, tag: &str) -> Vec<&'a str> {
    out.lines()
        .filter_map(|l| l.strip_prefix(SEEN)?.strip_prefix(tag)?.strip_prefix(' '))
        .collect()
}

/// The text between two [`SEEN`] marker lines.
fn section<'a>(out: &'a str, from: &str, to: &str) -> &'a str {
    let start = format!("{SEEN}{from}\n");
    let end = format!("{SEEN}{to}\n");
    let Some(a) = out.find(&start) else {
        return "";
    };
    let rest = &out[a + start.len()..];
    &rest[..rest.find(&end).unwrap_or(rest.len())]
}

/// The elevated run and what it proves.
fn etw_checks() -> Vec<Check> {
    let cmd = match workload_command("windows", &[&BUSY_MS.to_string()]) {
        Ok(c) => c,
        Err(e) => {
            return ETW_CHECKS
                .iter()
                .map(|n| Check::fail(n, e.clone()))
                .collect()
        }
    };
    let before = live::system_profile_interval();
    let asked = plan::sample_interval("profile-997").map(plan::clamp_profile_interval);
    let mut during = Vec::new();
    let mut sessions: Vec<String> = Vec::new();
    let args = words(&["-x", "ustackframes=100", "-n", PROGRAM, "-c", &cmd]);
    let ran = dtx_while(&args, ETW_LIMIT, || {
        if let Some(i) = live::system_profile_interval() {
            if during.last() != Some(&i) {
                during.push(i);
            }
        }
        for s in live::running_session_names() {
            if s.starts_with("dtx-") && !sessions.contains(&s) {
                sessions.push(s);
            }
        }
    });
    let after = live::system_profile_interval();
    let left: Vec<String> = live::running_session_names()
        .into_iter()
        .filter(|s| s.starts_with("dtx-"))
        .collect();
    let has = |kind: &str| sessions.iter().any(|s| s.starts_with(kind));
    let mut v = Vec::new();
    v.push(match ended_well("etw-sessions", &ran) {
        // the plan of this program: a kernel session (sched, proc, profile, fsinfo) and a
        // user session (the DNS client, the .NET runtime)
        Ok(()) if has("dtx-kernel-") && has("dtx-user-") => Check::pass(
            "etw-sessions",
            format!("started and ran: {}", sessions.join(", ")),
        ),
        Ok(()) => Check::fail(
            "etw-sessions",
            format!(
                "the run ended well, but a kernel and a user session were planned and the \
                 sessions seen while it ran were: {sessions:?}"
            ),
        ),
        Err(c) => c,
    });
    v.push(proc_check(&ran));
    v.push(file_check(&ran));
    v.push(dns_check(&ran));
    v.push(stack_check(&ran));
    v.push(interval_check(asked, before, &during, after));
    v.push(loss_check(&ran));
    v.push(if left.is_empty() {
        Check::pass(
            "etw-no-session-left",
            "QueryAllTracesW (logman query -ets) lists no dtx- session",
        )
    } else {
        Check::fail(
            "etw-no-session-left",
            format!(
                "still running: {} (logman stop <name> -ets)",
                left.join(", ")
            ),
        )
    });
    v
}

fn proc_check(ran: &Ran) -> Check {
    let name = "etw-proc";
    let Some(child) = fact(&ran.stdout, "child").and_then(|c| c.trim().parse::<u32>().ok()) else {
        return Check::fail(
            name,
            format!("the workload started no child ({})", ran.why()),
        );
    };
    let seen = seen(&ran.stdout, "child");
    let hit = seen.iter().find_map(|l| {
        let (pid, image) = l.split_once(' ')?;
        (pid.parse::<u32>().ok()? == child).then_some(image)
    });
    match hit {
        Some(image) if image.eq_ignore_ascii_case("dtx.exe") => Check::pass(
            name,
            format!("proc:::start of the child: pid {child}, image {image}"),
        ),
        Some(image) => Check::fail(
            name,
            format!("proc:::start of pid {child} named its image {image:?}, not dtx.exe"),
        ),
        None => Check::fail(
            name,
            format!("no proc:::start for the child {child} (seen: {seen:?})"),
        ),
    }
}

fn file_check(ran: &Ran) -> Check {
    let name = "etw-file";
    let Some(file) = fact(&ran.stdout, "file") else {
        return Check::fail(name, "the workload wrote no file");
    };
    // `<bytes> <path>`
    let path = file.split_once(' ').map_or(file, |(_, p)| p);
    let base = path
        .rsplit(['\\', '/'])
        .next()
        .unwrap_or(path)
        .to_ascii_lowercase();
    let seen = seen(&ran.stdout, "file");
    match seen.iter().find(|l| l.to_ascii_lowercase().contains(&base)) {
        Some(l) => Check::pass(name, format!("fsinfo read/write named the file: {l}")),
        None => Check::fail(
            name,
            format!("no fsinfo event named {base} ({} files seen)", seen.len()),
        ),
    }
}

fn dns_check(ran: &Ran) -> Check {
    let name = "etw-dns";
    let Some(query) = fact(&ran.stdout, "dns") else {
        return Check::fail(name, "the workload made no DNS query");
    };
    let asked = query
        .split(' ')
        .next()
        .unwrap_or(query)
        .to_ascii_lowercase();
    let seen = seen(&ran.stdout, "dns");
    match seen
        .iter()
        .find(|l| l.to_ascii_lowercase().starts_with(&asked))
    {
        Some(l) => Check::pass(
            name,
            format!("Microsoft-Windows-DNS-Client QueryName field read: {l}"),
        ),
        None => Check::fail(
            name,
            format!(
                "no DNS client event with QueryName {asked} ({} names seen)",
                seen.len()
            ),
        ),
    }
}

fn stack_check(ran: &Ran) -> Check {
    let name = "etw-stack";
    let user = stack_entries(section(&ran.stdout, "user stacks", "kernel stacks"));
    let kernel = stack_entries(section(&ran.stdout, "kernel stacks", "end"));
    let total: u64 = user.iter().map(|s| s.1).sum();
    let named = |f: &Vec<String>| f.iter().filter(|x| frame_function(x).is_some()).count();
    let best = user.iter().map(|(f, _)| named(f)).max().unwrap_or(0);
    let busy: u64 = user
        .iter()
        .filter(|(f, _)| has_chain(f, &BUSY_CHAIN))
        .map(|s| s.1)
        .sum();
    let kernel_named = kernel.iter().map(|(f, _)| named(f)).max().unwrap_or(0);
    let detail = format!(
        "{total} user stacks, the best with {best} named frames; {busy} through {}; \
         kernel stacks with up to {kernel_named} named frames",
        BUSY_CHAIN.join(" < ")
    );
    if best >= 3 {
        Check::pass(name, detail)
    } else {
        Check::fail(name, detail)
    }
}

fn interval_check(
    asked: Option<u32>,
    before: Option<u32>,
    during: &[u32],
    after: Option<u32>,
) -> Check {
    let name = "etw-interval";
    let (Some(asked), Some(before), Some(after)) = (asked, before, after) else {
        return Check::fail(
            name,
            format!("the sampling interval could not be read (before {before:?}, after {after:?})"),
        );
    };
    // a system already at the asked interval shows no change while dtx runs
    let set = during.iter().any(|&i| i != before) || before == asked;
    let detail = format!(
        "before {before}, while running {during:?}, after {after} (100 ns units; profile-997 asks {asked})"
    );
    if set && after == before {
        Check::pass(name, format!("set and restored: {detail}"))
    } else if !set {
        Check::fail(name, format!("never set: {detail}"))
    } else {
        Check::fail(name, format!("not restored: {detail}"))
    }
}

fn loss_check(ran: &Ran) -> Check {
    let name = "etw-loss";
    let lines: Vec<&str> = ran
        .stderr
        .lines()
        .filter(|l| l.contains(" lost ") || l.contains(" dropped"))
        .collect();
    if lines.is_empty() {
        Check::pass(name, "no events or buffers lost or dropped")
    } else {
        Check::fail(name, lines.join("\n"))
    }
}
