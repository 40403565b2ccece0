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

/// Every frame of the stack keys of a snapshot's aggregations (the console's view), in order.
pub fn snapshot_frames(aggs: &[dtx::agg::snapshot::AggView]) -> Vec<String> {
    aggs.iter()
        .flat_map(|a| a.rows.iter())
        .flat_map(|r| r.keys.iter())
        .filter_map(|k| match k {
            dtx::agg::snapshot::KeyCell::Stack(f) => Some(f.clone()),
            _ => None,
        })
        .flatten()
        .collect()
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

/// The samples (of `entries`) whose stack holds the functions `chain` of `module`, innermost
/// first, in that order (`module`function` frames, other frames between them allowed).
pub fn samples_through(entries: &[StackEntry], module: &str, chain: &[&str]) -> u64 {
    entries
        .iter()
        .filter(|(frames, _)| {
            let places: Vec<Option<usize>> = chain
                .iter()
                .map(|name| {
                    let head = format!("{module}`{name}");
                    frames
                        .iter()
                        .position(|f| f == &head || f.starts_with(&format!("{head}+")))
                })
                .collect();
            places.iter().all(Option::is_some) && places.windows(2).all(|w| w[0] < w[1])
        })
        .map(|e| e.1)
        .sum()
}

/// `text` folded by inferno's dtrace collapser (what `inferno-collapse-dtrace` prints): the
/// folded stack and the count of each line.
pub fn inferno_folded(text: &str) -> Vec<(String, u64)> {
    use inferno::collapse::Collapse;
    let mut folded = Vec::new();
    inferno::collapse::dtrace::Folder::default()
        .collapse(text.as_bytes(), &mut folded)
        .expect("inferno folds printa's text");
    String::from_utf8_lossy(&folded)
        .lines()
        .map(|l| {
            let (stack, n) = l
                .rsplit_once(' ')
                .expect("a folded line ends with its count");
            (stack.to_string(), n.parse().expect("a count"))
        })
        .collect()
}

/// `text` folded by inferno ([`inferno_folded`]): (every sample it counts, the samples whose
/// folded stack holds `outward`, frames outermost first joined by `;`).
pub fn inferno_counts(text: &str, outward: &str) -> (u64, u64) {
    let folded = inferno_folded(text);
    let total = folded.iter().map(|l| l.1).sum();
    let with = folded
        .iter()
        .filter(|(stack, _)| stack.contains(outward))
        .map(|l| l.1)
        .sum();
    (total, with)
}
