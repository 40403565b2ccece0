//! The size of what an enabled probe records in a dtrace buffer (its ECB): a 12-byte header (the
//! enabled probe ID and the timestamp), then each record at its type's size and alignment, the
//! whole rounded up to the largest alignment. `bufpolicy=fill` counts these bytes, and the END
//! clauses' sizes are what a filling buffer keeps in reserve.

use super::record::{Datum, Record};
use crate::ir::{ActionKind, Stmt, ValKind};

/// The record header: enabled probe ID (4 bytes) and timestamp (8 bytes, as two words).
pub const HEADER: usize = 12;

/// Adds one record of `size` bytes aligned to `align` at offset `at`; returns the new offset.
fn place(at: usize, size: usize, align: usize) -> usize {
    at.next_multiple_of(align.max(1)) + size
}

fn int_align(size: usize) -> usize {
    size.clamp(1, 8).next_power_of_two()
}

/// Bytes the records of one firing of one clause take.
pub fn firing_bytes(records: &[(u32, Record)], strsize: usize) -> usize {
    let (mut at, mut align) = (HEADER, 4usize);
    for (_, r) in records {
        let values = match r {
            Record::Fire { .. } => continue,
            Record::Exit(_) => {
                at = place(at, 4, 4);
                continue;
            }
            Record::Data { values, .. } | Record::Lib { values, .. } => values,
        };
        for d in values {
            let (size, a) = match d {
                Datum::Int { size, .. } => (usize::from(*size), int_align(usize::from(*size))),
                Datum::Str(_) => (strsize, 1),
                Datum::Bytes(b) => (b.len(), 1),
                Datum::Stack { frames, .. } => (frames.len().max(1) * 8, 8),
            };
            align = align.max(a);
            at = place(at, size, a);
        }
    }
    at.next_multiple_of(align)
}

/// The most a clause body can record in one firing (the larger branch of each `if`).
pub fn clause_bytes(body: &[Stmt], strsize: usize) -> usize {
    fn body_end(body: &[Stmt], strsize: usize, at: usize, align: &mut usize) -> usize {
        body.iter().fold(at, |at, s| match s {
            Stmt::Eval(_) => at,
            Stmt::If {
                then, otherwise, ..
            } => body_end(then, strsize, at, align).max(body_end(otherwise, strsize, at, align)),
            Stmt::Action(a) => match a.kind {
                ActionKind::Exit => place(at, 4, 4),
                ActionKind::Aggregate { .. } => at,
                _ => a.arg_kinds.iter().fold(at, |at, k| {
                    let (size, al) = match *k {
                        ValKind::Int { size, .. } => (usize::from(size), int_align(size.into())),
                        ValKind::String => (strsize, 1),
                        ValKind::ByRef { size } => (size as usize, 1),
                    };
                    *align = (*align).max(al);
                    place(at, size, al)
                }),
            },
        })
    }
    let mut align = 4;
    body_end(body, strsize, HEADER, &mut align).next_multiple_of(align)
}

/// What a filling buffer keeps for the program's END clauses.
pub fn end_reserve(program: &crate::ir::Program, strsize: usize) -> usize {
    program
        .clauses
        .iter()
        .filter(|c| c.probes.iter().any(|d| d.name == "END"))
        .map(|c| clause_bytes(&c.body, strsize))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(size: u8) -> Datum {
        Datum::Int {
            value: 1,
            size,
            signed: true,
        }
    }

    #[test]
    fn printf_of_an_int_takes_sixteen_bytes() {
        let recs = vec![
            (1, Record::Fire { cpu: 0, probe: 1 }),
            (
                1,
                Record::Data {
                    action: 0,
                    values: vec![int(4)],
                },
            ),
        ];
        assert_eq!(firing_bytes(&recs, 256), 16);
    }

    #[test]
    fn records_are_aligned_and_the_whole_rounded_up() {
        let recs = vec![(
            1,
            Record::Data {
                action: 0,
                values: vec![int(1), int(8)],
            },
        )];
        // 12 + 1 -> 13, aligned to 16 + 8 = 24
        assert_eq!(firing_bytes(&recs, 256), 24);
        let recs = vec![(
            1,
            Record::Data {
                action: 0,
                values: vec![Datum::Str(b"dtx".to_vec())],
            },
        )];
        assert_eq!(firing_bytes(&recs, 64), 76);
        assert_eq!(firing_bytes(&[(1, Record::Exit(0))], 64), 16);
    }
}
