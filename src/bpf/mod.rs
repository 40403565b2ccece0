//! The BPF back end: clauses of the IR compiled to BPF programs that aggregate in the kernel,
//! where the event happens, instead of sending every event to user space. One file per pass:
//! `plan` (which clauses the kernel can run, and why the others cannot), `codegen` (a
//! clause's program, from the same `ir::Node` trees the VM runs), `maps` (the aggregation
//! maps' layout, and their entries read back into `agg`'s words), `asm` (instructions and
//! labels). It builds programs and reads map bytes; `sources/perf` loads, attaches and reads
//! them (`sources/perf/kernel.rs`). It names `ir`, `lang`'s built-in ids and `providers`'
//! system call numbers, never the VM or a source (`tests/it/tidy.rs`).

pub mod asm;
pub mod codegen;
pub mod maps;
pub mod plan;
