//! What the checks of both platforms share: counting a child's calls through a D program,
//! reading the stacks dtx printed.

use std::time::Duration;

use super::run::{count, dtx, words, workload_command, Ran};
use super::workload::CALLS;
use super::Check;

/// How long one checked dtx run may take.
pub const LIMIT: Duration = Duration::from_secs(40);

/// Whether `ran` ended by itself with status 0; else a failed check named `name`.
pub fn ended_well(name: &str, ran: &Ran) -> Result<(), Check> {
    if ran.code == Some(0) {
        return Ok(());
    }
    Err(Check::fail(name, ran.why()))
}

/// `calls N` counted by `probe` (a pid or fpid entry probe of `dtx_check_hit`), which must see
/// exactly N calls.
pub fn count_calls(name: &str, probe: &str, extra: &[&str], what: &str) -> Check {
    let cmd = match workload_command("calls", &[&CALLS.to_string()]) {
        Ok(c) => c,
        Err(e) => return Check::fail(name, e),
    };
    let program = format!("{probe} {{ @n = count(); }} END {{ printa(\"hits %@d\\n\", @n); }}");
    let mut args = words(extra);
    args.extend(words(&["-q", "-n", &program, "-c", &cmd]));
    let ran = dtx(&args, LIMIT);
    if let Err(c) = ended_well(name, &ran) {
        return c;
    }
    match count(&ran.stdout, "hits ") {
        Some(n) if n == CALLS => Check::pass(
            name,
            format!("{what}: {n} calls of dtx_check_hit in a child, exactly as made"),
        ),
        Some(n) => Check::fail(
            name,
            format!("{what}: counted {n} calls, the child made {CALLS}"),
        ),
        None => Check::fail(name, format!("{what}: no count printed ({})", ran.why())),
    }
}

/// One printed stack aggregation entry: its frames (innermost first) and its count.
pub fn stack_entries(text: &str) -> Vec<(Vec<String>, u64)> {
    let mut out = Vec::new();
    let mut frames = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() {
            continue;
        }
        match line.parse::<u64>() {
            Ok(n) if !frames.is_empty() => out.push((std::mem::take(&mut frames), n)),
            Ok(_) => {}
            Err(_) => frames.push(line.to_string()),
        }
    }
    out
}

/// The function a frame names (`module`function+0x1c` → `function`), or None for an address.
pub fn frame_function(frame: &str) -> Option<&str> {
    let f = frame.split_once('`')?.1;
    let f = f.split('+').next()?;
    (!f.starts_with("0x") && !f.is_empty()).then_some(f)
}

/// Whether `frames` (innermost first) hold `chain` (innermost first) one after another.
pub fn has_chain(frames: &[String], chain: &[&str]) -> bool {
    let names: Vec<&str> = frames.iter().filter_map(|f| frame_function(f)).collect();
    names.windows(chain.len()).any(|w| w == chain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::selfcheck::workload::BUSY_CHAIN;

    #[test]
    fn stack_entries_and_chains_are_read_from_dtraces_text() {
        let text = "\n              dtx`dtx_check_busy_leaf+0x1c\n              dtx`dtx_check_busy_middle+0x9\n              dtx`dtx_check_busy_outer+0x9\n              dtx`0x5555\n              150\n\n              libc.so.6`write+0x10\n                3\n";
        let s = stack_entries(text);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].1, 150);
        assert!(has_chain(&s[0].0, &BUSY_CHAIN));
        assert!(!has_chain(&s[1].0, &BUSY_CHAIN));
        assert_eq!(frame_function("dtx`0x5555"), None);
    }
}
