//! Records: what a firing hands to the consumer, in order — the data of each recording
//! action, and the library actions (`printa`, `clear`, `exit`...) the consumer carries out.

/// One recorded value: the crate's one value model.
pub use crate::ir::value::Datum;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// An enabled probe fired (its clause passed the predicate): the line `CPU ID FUNC:NAME`
    /// starts here when not quiet. Sent before the clause's first record, to wherever that
    /// record goes (the output or a speculation).
    Fire {
        cpu: u32,
        probe: u64,
        /// The firing's `timestamp` (the record's time over a trace): the `timestamp` member of
        /// the structured formats' probe object, as dtrace's record header carries it.
        ts: u64,
    },
    /// The output of action `action` (printf, trace, print, tracemem, stack, sym...): its values.
    Data {
        action: u32,
        values: Vec<Datum>,
    },
    /// `printa`, `clear`, `trunc`, `normalize`, `denormalize`, `setopt`, `ftruncate`, `freopen`,
    /// `system`: carried out by the consumer when it reaches the record.
    Lib {
        action: u32,
        values: Vec<Datum>,
    },
    Exit(i32),
}
