//! dtrace's `printa` text of a stack aggregation (`@[ustack()] = count()`), as the flamegraph
//! tests read it and as `stackcollapse.pl` folds it.
#![allow(dead_code)]

/// One entry: the frames, innermost first, and the count.
pub type StackEntry = (Vec<String>, u64);

/// The entries of `printa`'s text: a blank line, the frames one a line, the count on a line of
/// its own (a stack with no frames is the count line alone).
pub fn stack_entries(text: &str) -> Vec<StackEntry> {
    let mut out = Vec::new();
    let mut frames = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() {
            frames.clear();
        } else if let Ok(n) = t.parse::<u64>() {
            out.push((std::mem::take(&mut frames), n));
        } else {
            frames.push(t.to_string());
        }
    }
    out
}

/// A frame as `stackcollapse.pl` keeps it: without its `+0x..` offset.
pub fn folded_frame(f: &str) -> &str {
    match f.rfind("+0x") {
        Some(i) if i > 0 => &f[..i],
        _ => f,
    }
}

/// An entry folded as `stackcollapse.pl` folds dtrace's output: the frames from the outermost
/// to the innermost joined by `;`, a space, the count.
pub fn fold(entry: &StackEntry) -> String {
    let frames: Vec<&str> = entry.0.iter().rev().map(|f| folded_frame(f)).collect();
    format!("{} {}", frames.join(";"), entry.1)
}
