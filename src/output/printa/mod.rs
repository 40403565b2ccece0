//! printa() and the end-of-run printing of aggregations, byte for byte as dtrace prints them:
//! the default layout (`layout.rs`, `dt_print_aggs`), a printa() format (`format.rs`,
//! `dt_printf_format` for aggregations) and the distribution graphs (`graph.rs`). The
//! aggregations themselves, their merge of keys by symbol and their orders are `crate::agg`'s;
//! this module only reads them.

mod format;
pub(crate) mod graph;
mod layout;

use crate::agg::{AggregationTable, SortOptions, SymbolResolver};
use crate::output::printf::{Format, FormatError};

/// `printa(@a)`: a newline, then every entry in dtrace's default layout. Marks the aggregation
/// printed when it has entries.
pub fn print_default(
    table: &AggregationTable,
    agg: u32,
    opts: &SortOptions,
    syms: &dyn SymbolResolver,
    out: &mut Vec<u8>,
) {
    print_default_multi(table, &[agg], opts, syms, out);
}

/// `printa(@a, @b, ...)` without a format: a newline, then one line per key of the union of
/// keys with each aggregation's value.
pub fn print_default_multi(
    table: &AggregationTable,
    aggs: &[u32],
    opts: &SortOptions,
    syms: &dyn SymbolResolver,
    out: &mut Vec<u8>,
) {
    out.push(b'\n');
    let Some(merged) = table.merged(aggs, syms) else {
        return;
    };
    let list = merged.list();
    let mut state = layout::State::default();
    if list.len() == 1 {
        layout::print_agg(list[0], opts, syms, &mut state, out);
    } else {
        layout::print_joined(&list, opts, syms, &mut state, out);
    }
    merged.mark_printed();
}

/// The end-of-run printing (`dtrace_aggregate_print`): every aggregation not printed by a
/// printa(), in order (reversed with `aggsortrev`). The caller prints the newline dtrace
/// writes before it.
pub fn print_unprinted(
    table: &AggregationTable,
    opts: &SortOptions,
    syms: &dyn SymbolResolver,
    out: &mut Vec<u8>,
) {
    let mut state = layout::State::default();
    let mut order: Vec<_> = table.list().iter().collect();
    if opts.aggsortrev {
        order.reverse();
    }
    for a in order {
        if !a.printed.get() && a.len() > 0 {
            let merged = a.merged_by_symbol(syms);
            layout::print_agg_entries(merged.as_ref().unwrap_or(a), opts, syms, &mut state, out);
        }
    }
}

/// `printa("fmt", @a, @b, ...)`: one line per key of the union of keys. Errors are those of
/// the format engine (e.g. more conversions than keys); output before the error stays.
pub fn print_formatted(
    table: &AggregationTable,
    fmt: &Format,
    aggs: &[u32],
    opts: &SortOptions,
    syms: &dyn SymbolResolver,
    out: &mut Vec<u8>,
) -> Result<(), FormatError> {
    let Some(merged) = table.merged(aggs, syms) else {
        return Ok(());
    };
    let done = format::printa(fmt, &merged.list(), opts, syms, out);
    merged.mark_printed();
    done
}

#[cfg(test)]
mod tests;
