//! `-F` (flowindent) output: the `-> func` / `<- func` lines and their
//! indentation, following dtrace's heuristics.
//!
//! * A probe named `entry` or ending in `-entry` indents (prefix ` -> `,
//!   or ` => ` for the syscall provider); `return` / `-return` unindents
//!   (` <- ` / ` <= `).  Anything else prints `| func:name`.
//! * An entry is not treated as one when the previous firing was a
//!   different enabling of the same probe; a return is not treated as one
//!   when the *next* record in the buffer is a different enabling of the
//!   same probe (so several clauses on one probe indent once).
//! * The indentation is a single counter shared by all CPUs (as in
//!   dtrace), never below zero.
//!
//! Each firing line is `"%3d %-41s "` of the CPU and the indented text;
//! it is printed even in quiet mode, and the heading
//! [`super::record::flow_header`] likewise.

use super::memory::pad_str;

/// How a firing participates in flow indentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowKind {
    None,
    Entry,
    Return,
}

/// The per-firing result of [`FlowIndent::firing`]: what to print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowLine {
    pub kind: FlowKind,
    /// Indentation (spaces) to print before the prefix.
    pub indent: usize,
    /// ` -> `, ` => `, ` <- `, ` <= ` or `| `.
    pub prefix: &'static str,
}

/// One enabled-probe firing as flowindent needs to know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowProbe<'a> {
    /// Enabled probe ID (EPID) of the record.
    pub epid: u32,
    /// Probe ID.
    pub probe_id: u32,
    pub provider: &'a str,
    pub name: &'a str,
}

/// Flow-indent state (dtrace keeps one for the whole consumer).
#[derive(Clone, Debug, Default)]
pub struct FlowIndent {
    indent: usize,
    /// (EPID, probe ID) of the last record consumed.
    last: Option<(u32, u32)>,
}

fn suffix_match(name: &str, word: &str) -> bool {
    name == word
        || (name.len() > word.len()
            && name.ends_with(word)
            && name.as_bytes()[name.len() - word.len() - 1] == b'-')
}

/// The flow kind implied by a probe name alone.
pub fn kind_of(name: &str) -> FlowKind {
    // dtrace looks at the *first* occurrence of "entry"/"return" and
    // requires it to end the name; for names where the word occurs twice
    // ("entry-entry") the first occurrence does not end the name.
    let first_is_last = |w: &str| name.find(w).map(|i| i + w.len() == name.len()) == Some(true);
    if first_is_last("entry") && suffix_match(name, "entry") {
        FlowKind::Entry
    } else if first_is_last("return") && suffix_match(name, "return") {
        FlowKind::Return
    } else {
        FlowKind::None
    }
}

impl FlowIndent {
    pub fn new() -> Self {
        Self::default()
    }

    /// Current indentation.
    pub fn indent(&self) -> usize {
        self.indent
    }

    /// Processes one firing in consumption order and returns how to print
    /// it.  `next` is the (EPID, probe ID) of the following record in the
    /// same buffer, if there is one (needed for returns).  Updates the
    /// state for the firing (indent after an entry, last EPID).
    pub fn firing(&mut self, p: &FlowProbe, next: Option<(u32, u32)>) -> FlowLine {
        let syscall = p.provider == "syscall";
        let mut kind = kind_of(p.name);
        if kind == FlowKind::Entry {
            if let Some((last_epid, last_probe)) = self.last {
                if last_epid != p.epid && last_probe == p.probe_id {
                    kind = FlowKind::None;
                }
            }
        }
        if kind == FlowKind::Return {
            if let Some((next_epid, next_probe)) = next {
                if next_epid != p.epid && next_probe == p.probe_id {
                    kind = FlowKind::None;
                }
            }
        }
        let prefix = match (kind, syscall) {
            (FlowKind::Entry, false) => " -> ",
            (FlowKind::Entry, true) => " => ",
            (FlowKind::Return, false) => " <- ",
            (FlowKind::Return, true) => " <= ",
            (FlowKind::None, _) => "| ",
        };
        if kind == FlowKind::Return {
            self.indent = self.indent.saturating_sub(2);
        }
        let line = FlowLine {
            kind,
            indent: self.indent,
            prefix,
        };
        if kind == FlowKind::Entry {
            self.indent += 2;
        }
        self.last = Some((p.epid, p.probe_id));
        line
    }
}

/// Longest function name and probe name dtrace keeps.
const FUNCNAMELEN: usize = 192;
const NAMELEN: usize = 64;

/// Appends the flow line for a firing: `"%3d %-41s "`, where the text is
/// the indentation, the prefix, and `func` (entry/return) or `func:name`.
pub fn flow_line(cpu: u32, line: &FlowLine, func: &str, name: &str, out: &mut Vec<u8>) {
    let mut text = Vec::with_capacity(line.indent + func.len() + name.len() + 8);
    text.resize(line.indent, b' ');
    text.extend_from_slice(line.prefix.as_bytes());
    text.extend_from_slice(func.as_bytes());
    let cap = if line.kind == FlowKind::None {
        text.push(b':');
        text.extend_from_slice(name.as_bytes());
        line.indent + FUNCNAMELEN + NAMELEN + 4
    } else {
        line.indent + FUNCNAMELEN + 4
    };
    text.truncate(cap);
    out.extend_from_slice(format!("{:>3} ", cpu as i32).as_bytes());
    pad_str(&text, -41, out);
    out.push(b' ');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p<'a>(epid: u32, probe_id: u32, name: &'a str) -> FlowProbe<'a> {
        FlowProbe {
            epid,
            probe_id,
            provider: "test_prov1",
            name,
        }
    }

    #[test]
    fn kinds() {
        assert_eq!(kind_of("entry"), FlowKind::Entry);
        assert_eq!(kind_of("method-entry"), FlowKind::Entry);
        assert_eq!(kind_of("carpentry"), FlowKind::None);
        assert_eq!(kind_of("gentry"), FlowKind::None);
        assert_eq!(kind_of("return"), FlowKind::Return);
        assert_eq!(kind_of("miniatureturn"), FlowKind::None);
        assert_eq!(kind_of("func-return"), FlowKind::Return);
        assert_eq!(kind_of("entry-entry"), FlowKind::None);
        assert_eq!(kind_of("BEGIN"), FlowKind::None);
    }

    #[test]
    fn usdt_entryreturn() {
        // usdt/tst.entryreturn.ksh.out: `dtrace -qF ... | cut -c5-`
        let seq: [(u32, u32, &str, &str); 9] = [
            (1, 1, "", "BEGIN"),
            (3, 10, "main", "entry"),
            (3, 11, "main", "-entry"),
            (3, 12, "main", "foo-entry"),
            (3, 13, "main", "carpentry"),
            (3, 14, "main", "miniatureturn"),
            (3, 15, "main", "foo-return"),
            (3, 16, "main", "-return"),
            (3, 17, "main", "done"),
        ];
        let mut f = FlowIndent::new();
        let mut out = Vec::new();
        out.extend_from_slice(super::super::record::flow_header().as_bytes());
        for (i, &(epid, id, func, name)) in seq.iter().enumerate() {
            let next = seq.get(i + 1).map(|n| (n.0, n.1));
            let line = f.firing(&p(epid, id, name), next);
            flow_line(0, &line, func, name, &mut out);
            out.push(b'\n'); // the script's printf("\n")
        }
        let got: String = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| format!("{}\n", l.get(4..).unwrap_or("")))
            .collect();
        let want = "FUNCTION                                 \n\
| :BEGIN                                  \n \
-> main                                  \n   \
-> main                                \n     \
-> main                              \n      \
| main:carpentry                    \n      \
| main:miniatureturn                \n     \
<- main                              \n   \
<- main                                \n  \
| main:done                             \n";
        assert_eq!(got, want);
    }

    #[test]
    fn same_probe_two_clauses() {
        let mut f = FlowIndent::new();
        // two enablings (EPIDs 5, 6) of probe 7 ("entry"): indent once
        let a = f.firing(&p(5, 7, "entry"), Some((6, 7)));
        let b = f.firing(&p(6, 7, "entry"), Some((8, 9)));
        assert_eq!((a.kind, b.kind), (FlowKind::Entry, FlowKind::None));
        assert_eq!(b.indent, 2);
        // two enablings of the return probe: unindent on the last one only
        let c = f.firing(&p(8, 9, "return"), Some((10, 9)));
        let d = f.firing(&p(10, 9, "return"), None);
        assert_eq!((c.kind, d.kind), (FlowKind::None, FlowKind::Return));
        assert_eq!(d.indent, 0);
        // never negative
        let e = f.firing(&p(10, 9, "return"), None);
        assert_eq!(e.indent, 0);
        let s = f.firing(
            &FlowProbe {
                epid: 11,
                probe_id: 12,
                provider: "syscall",
                name: "entry",
            },
            None,
        );
        assert_eq!(s.prefix, " => ");
    }
}
