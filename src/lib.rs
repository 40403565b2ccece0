//! dtx: DTrace for Windows as a terminal console.
//!
//! The crate follows the data flow of `ARCHITECTURE.md`: `lang` turns D source into a checked
//! [`ir::Program`], `probes`/`providers` describe what can fire, and `cli` is the dtrace-compatible
//! front end.

pub mod agg;
pub mod bpf;
pub mod cli;
pub mod engine;
pub mod etw;
pub mod fasthash;
pub mod ir;
pub mod lang;
pub mod output;
pub mod probes;
pub mod providers;
pub mod serve;
pub mod sources;
pub mod symbols;
pub mod tui;
pub mod vm;

#[cfg(test)]
mod test_suite;
