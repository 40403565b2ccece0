//! The size of what an enabled probe records in a dtrace buffer (its ECB), computed from the
//! clause's actions before anything fires, as illumos' `dtrace_ecb_action_add()` and
//! `dtrace_ecb_resize()` compute it: a 12-byte header (the enabled probe ID and the timestamp),
//! then one record per action at its size, each aligned to the largest power of two up to 8 that
//! divides its size; aggregation keys are laid out past the records (they count in what the
//! ECB needs, not in what it keeps). Every firing reserves `needed` bytes of its buffer before
//! the predicate runs and keeps `size` of them; a buffer without the room drops the firing
//! whole. `bufpolicy=fill` counts these bytes, and the END clauses' needs are what a filling
//! buffer keeps in reserve.

use crate::ir::{ActionKind, Clause, Program, Stmt, ValKind};

/// The record header: enabled probe ID (4 bytes) and timestamp (8 bytes, as two words).
pub const HEADER: usize = 12;

/// What one clause's ECB takes in a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EcbSize {
    /// Bytes kept in the buffer by a firing (0 when no action records data).
    pub size: usize,
    /// Bytes a firing reserves before it runs (records plus aggregation keys).
    pub needed: usize,
    /// Alignment of the ECB's start in the buffer.
    pub align: usize,
}

/// A record's alignment: the largest power of two up to 8 that divides its size.
fn rec_align(size: usize) -> usize {
    [8, 4, 2]
        .into_iter()
        .find(|a| size.is_multiple_of(*a))
        .unwrap_or(1)
}

/// Bytes a value of kind `k` records.
fn value_size(k: &ValKind, strsize: usize) -> usize {
    match *k {
        ValKind::Int { size, .. } => usize::from(size),
        ValKind::String => strsize,
        ValKind::ByRef { size } => size as usize,
    }
}

/// The data records (sizes in order) an action adds to the ECB, as libdtrace compiles it and
/// the kernel sizes it.
fn action_records(a: &crate::ir::Action, strsize: usize) -> Vec<usize> {
    let args = || -> Vec<usize> { a.arg_kinds.iter().map(|k| value_size(k, strsize)).collect() };
    match &a.kind {
        // a printf-like action with no arguments still records one 64-bit word
        ActionKind::Printf(_) | ActionKind::System(_) | ActionKind::Freopen(_) => {
            if a.arg_kinds.is_empty() {
                vec![8]
            } else {
                args()
            }
        }
        // one aggregation ID per aggregation
        ActionKind::Printa { aggs, .. } => vec![8; aggs.len()],
        ActionKind::Trace | ActionKind::Print(_) | ActionKind::EtwTrace(_) => args(),
        ActionKind::Tracemem => {
            let n = match a.args.get(1) {
                Some(crate::ir::Node::Const(n)) => (*n).max(0) as usize,
                _ => 0,
            };
            if a.args.len() > 2 {
                // the dynamic size is a record of its own, before the memory
                vec![8, n]
            } else {
                vec![n]
            }
        }
        ActionKind::Stack { frames } => vec![*frames as usize * 8],
        ActionKind::Ustack { frames, strsize } | ActionKind::Jstack { frames, strsize } => {
            // a slot for the pid, the frames, then the strings
            vec![((*frames as usize + 1) * 8 + *strsize as usize).next_multiple_of(8)]
        }
        ActionKind::Sym | ActionKind::Mod => vec![8],
        // the pid and the address, each 64 bits
        ActionKind::Usym | ActionKind::Umod | ActionKind::Uaddr => vec![16],
        ActionKind::Exit => vec![4],
        // the aggregation's ID
        ActionKind::Clear(_) | ActionKind::Denormalize(_) | ActionKind::Ftruncate => vec![8],
        ActionKind::Trunc(_) | ActionKind::Normalize(_) => {
            let mut v = vec![8];
            v.push(a.arg_kinds.first().map_or(8, |k| value_size(k, strsize)));
            v
        }
        ActionKind::Setopt => {
            let mut v = args();
            if v.len() == 1 {
                v.push(8);
            }
            v
        }
        ActionKind::Speculate
        | ActionKind::Commit
        | ActionKind::Discard
        | ActionKind::Raise
        | ActionKind::Stop
        | ActionKind::Chill
        | ActionKind::Breakpoint
        | ActionKind::Panic
        | ActionKind::Lkd
        | ActionKind::Copyout
        | ActionKind::Copyoutstr
        | ActionKind::Aggregate { .. } => Vec::new(),
    }
}

/// The layout being built: the kept size, the needed size and the alignment so far.
#[derive(Clone, Copy)]
struct Layout {
    size: usize,
    needed: usize,
    align: usize,
    /// An action other than `speculate` was laid out.
    acted: bool,
}

impl Layout {
    fn record(&mut self, size: usize) {
        let al = rec_align(size);
        self.align = self.align.max(al);
        self.size = self.size.next_multiple_of(al) + size;
        self.needed = self.needed.max(self.size);
    }

    /// An aggregation: its keys from offset 4 of an 8-byte block past the records, then its
    /// value; only what the ECB needs grows.
    fn aggregation(&mut self, keys: &[usize], data: usize) {
        let mut cur = self.size.next_multiple_of(8) + 4;
        for &k in keys {
            let al = rec_align(k);
            self.align = self.align.max(al);
            cur = cur.next_multiple_of(al) + k;
        }
        self.align = self.align.max(8);
        cur = cur.next_multiple_of(8) + data;
        self.needed = self.needed.max(cur);
    }

    fn body(&mut self, body: &[Stmt], program: &Program, strsize: usize) {
        for s in body {
            match s {
                Stmt::Eval(_) => {}
                Stmt::If {
                    then, otherwise, ..
                } => {
                    let (mut a, mut b) = (*self, *self);
                    a.body(then, program, strsize);
                    b.body(otherwise, program, strsize);
                    *self = if (b.size, b.needed) > (a.size, a.needed) {
                        b
                    } else {
                        a
                    };
                }
                Stmt::Action(a) => {
                    if let ActionKind::Aggregate { agg } = a.kind {
                        let keys: Vec<usize> =
                            a.key_kinds.iter().map(|k| value_size(k, strsize)).collect();
                        let data = program
                            .aggregations
                            .get(agg as usize)
                            .map_or(8, |g| crate::agg::entry_bytes(g.func));
                        self.acted = true;
                        self.aggregation(&keys, data);
                        continue;
                    }
                    if !matches!(a.kind, ActionKind::Speculate) {
                        self.acted = true;
                    }
                    for r in action_records(a, strsize) {
                        self.record(r);
                    }
                }
            }
        }
    }
}

/// The ECB of one clause, as `dtrace_ecb_resize()` sizes it.
pub fn ecb_size(clause: &Clause, program: &Program, strsize: usize) -> EcbSize {
    let mut l = Layout {
        size: HEADER,
        needed: HEADER,
        align: 4,
        acted: false,
    };
    l.body(&clause.body, program, strsize);
    // actions that all record nothing keep nothing, not even the header (a lone speculate()
    // keeps its header)
    let size = if l.acted && l.size == HEADER {
        0
    } else {
        l.size
    };
    EcbSize {
        size: size.next_multiple_of(4),
        needed: l.needed.next_multiple_of(4),
        align: l.align,
    }
}

/// What a filling buffer keeps for the program's END clauses (`dtrace_state_prereserve()`:
/// each END ECB's needs and its alignment).
pub fn end_reserve(program: &Program, strsize: usize) -> usize {
    program
        .clauses
        .iter()
        .filter(|c| c.probes.iter().any(|d| d.name == "END"))
        .map(|c| {
            let e = ecb_size(c, program, strsize);
            e.needed + e.align
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Action;

    fn action(kind: ActionKind, arg_kinds: Vec<ValKind>) -> Stmt {
        Stmt::Action(Action {
            id: 0,
            kind,
            keys: Vec::new(),
            args: Vec::new(),
            arg_kinds,
            key_kinds: Vec::new(),
            line: 0,
        })
    }

    fn size_of(body: Vec<Stmt>) -> EcbSize {
        let clause = Clause {
            probes: Vec::new(),
            predicate: None,
            body,
            line: 0,
        };
        ecb_size(&clause, &Program::default(), 256)
    }

    fn printf(kinds: Vec<ValKind>) -> Stmt {
        action(
            ActionKind::Printf(crate::output::printf::parse("x").unwrap()),
            kinds,
        )
    }

    #[test]
    fn printf_of_an_int_takes_sixteen_bytes() {
        let int = ValKind::Int {
            size: 4,
            signed: true,
        };
        let e = size_of(vec![printf(vec![int])]);
        assert_eq!((e.size, e.needed, e.align), (16, 16, 4));
    }

    #[test]
    fn printf_without_arguments_records_a_word() {
        // the speculative clause of the illumos SpecSizeVariations tests: four of them
        let mut body = vec![action(ActionKind::Speculate, Vec::new())];
        body.extend((0..4).map(|_| printf(Vec::new())));
        let e = size_of(body);
        assert_eq!((e.size, e.needed, e.align), (48, 48, 8));
    }

    #[test]
    fn exit_and_no_data() {
        let e = size_of(vec![
            printf(Vec::new()),
            action(ActionKind::Exit, Vec::new()),
        ]);
        assert_eq!((e.size, e.needed), (28, 28));
        // commit() records nothing: the ECB keeps nothing but still needs its header
        let e = size_of(vec![action(ActionKind::Commit, Vec::new())]);
        assert_eq!((e.size, e.needed), (0, 12));
        // a lone speculate() keeps its header
        let e = size_of(vec![action(ActionKind::Speculate, Vec::new())]);
        assert_eq!(e.size, 12);
        // an empty clause records its probe (the default action)
        assert_eq!(size_of(Vec::new()).size, 12);
    }

    #[test]
    fn strings_take_strsize_aligned_to_eight() {
        let e = size_of(vec![action(ActionKind::Trace, vec![ValKind::String])]);
        assert_eq!((e.size, e.align), (16 + 256, 8));
        let e = size_of(vec![action(
            ActionKind::Printa {
                format: None,
                aggs: vec![0, 1],
            },
            Vec::new(),
        )]);
        assert_eq!(e.size, 32);
    }

    #[test]
    fn aggregations_need_room_past_the_records_but_keep_none() {
        let program = Program {
            aggregations: vec![crate::ir::Aggregation {
                name: "a".into(),
                func: crate::ir::AggFunc::Avg,
                keys: vec![ValKind::I64],
            }],
            ..Program::default()
        };
        let agg = Stmt::Action(Action {
            id: 0,
            kind: ActionKind::Aggregate { agg: 0 },
            keys: Vec::new(),
            args: Vec::new(),
            arg_kinds: Vec::new(),
            key_kinds: vec![ValKind::I64],
            line: 0,
        });
        let clause = Clause {
            probes: Vec::new(),
            predicate: None,
            body: vec![agg],
            line: 0,
        };
        let e = ecb_size(&clause, &program, 256);
        // the key at 20 (offset 4 of an 8-byte block past the header), 8 bytes; the value
        // (avg: count and total) at 32, 16 bytes
        assert_eq!((e.size, e.needed, e.align), (0, 48, 8));
    }
}
