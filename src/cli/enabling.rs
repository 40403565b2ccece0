//! The checks dtrace's kernel makes when a compiled program is enabled, before any probe fires:
//! buffers that cannot be allocated, `bufpolicy=fill` buffers too small for the END clauses'
//! records, and static variables larger than the kernel allows. Each failure stops the run with
//! dtrace's message and exit status 1.

use crate::ir::{ActionKind, Program, Scope, ValKind};
use crate::lang::options::DOptions;

/// Largest by-reference global or clause-local variable the kernel accepts
/// (`dtrace_global_maxsize` and `dtrace_statvar_maxsize`, 16 KiB).
const STATIC_VAR_MAX: u32 = 16 * 1024;

/// Runs the enabling checks over every program of the invocation.
pub fn check(opts: &DOptions, programs: &[&Program], names: &[String]) -> Result<(), String> {
    for (p, name) in programs.iter().zip(names) {
        if p.variables.iter().any(|v| {
            matches!(v.scope, Scope::Global | Scope::Clause)
                && v.keys.is_none()
                && matches!(v.kind, ValKind::ByRef { size } if size > STATIC_VAR_MAX)
        }) {
            return Err(format!("failed to enable '{name}': Invalid argument"));
        }
    }
    let manual = opts.bufresize() == "manual";
    let uses_aggs = programs.iter().any(|p| !p.aggregations.is_empty());
    let uses_specs = programs.iter().any(|p| {
        p.actions()
            .iter()
            .any(|a| matches!(a.kind, ActionKind::Speculate))
    });
    let mut buffers = vec![opts.bufsize()];
    if uses_aggs {
        buffers.push(opts.aggsize());
    }
    if uses_specs {
        buffers.push(opts.specsize());
    }
    for size in buffers {
        allocatable(size, manual)?;
    }
    if opts.bufpolicy() == "fill" {
        // a filling buffer keeps room for what END records, so END can always run
        let strsize = opts.strsize() as usize;
        let reserve: u64 = programs
            .iter()
            .map(|p| crate::vm::ecb::end_reserve(p, strsize) as u64)
            .sum();
        if round_down(opts.bufsize()) < reserve {
            return Err("could not enable tracing: Arg list too long".into());
        }
    }
    Ok(())
}

/// A buffer of `size` bytes per CPU, as dtrace allocates it: rounded down to 8 bytes and, unless
/// resizing is manual, halved until it fits in memory.
fn allocatable(size: u64, manual: bool) -> Result<(), String> {
    let fail = || Err("could not enable tracing: Not enough space".to_string());
    let size = round_down(size);
    if size < 8 {
        return fail();
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    if manual && size.saturating_mul(cpus) > physical_memory() {
        return fail();
    }
    Ok(())
}

fn round_down(size: u64) -> u64 {
    size & !7
}

/// Bytes of physical memory (from `/proc/meminfo` where there is one; otherwise no limit).
fn physical_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(u64::MAX, |kb| kb.saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_below_one_word_cannot_be_allocated() {
        assert!(allocatable(0, false).is_err());
        assert!(allocatable(7, true).is_err());
        assert!(allocatable(8, true).is_ok());
        assert!(allocatable(4 << 20, false).is_ok());
    }

    #[test]
    fn manual_resize_fails_when_memory_cannot_hold_the_buffer() {
        if physical_memory() == u64::MAX {
            return;
        }
        assert!(allocatable(100 << 40, true).is_err());
        // automatic resizing halves the request until it fits
        assert!(allocatable(100 << 40, false).is_ok());
    }
}
