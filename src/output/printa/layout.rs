//! dtrace's default aggregation layout (`dt_print_aggs`/`dt_print_datum`): each key component
//! in a column sized by its type, then the value, a graph for quantizations; `agghist` draws
//! sums and counts as bars, `aggpack` draws quantizations on one line.

use std::io::Write as _;

use super::graph::{self, Graph, Total};
use crate::agg::quantize::{self, ZERO_BUCKET};
use crate::agg::sort::{self, Encoding, SortOptions};
use crate::agg::{funcs, key, Agg, SymbolResolver};
use crate::ir::value::{Datum, DatumRef, Frames};
use crate::ir::AggFunc;
use crate::output::memory::pad_str;

/// Renders one stack frame's text into the output (a printa() conversion).
pub(crate) type FrameFormat<'a> = &'a dyn Fn(&str, &mut Vec<u8>);

/// Per-printing state: the aggregation whose packed/histogram header was printed last.
#[derive(Default)]
pub(crate) struct State {
    header_for: Option<*const Agg>,
}

/// What agghist/aggpack computed over a whole aggregation.
struct Extra {
    /// agghist: the total and whether there are positive/negative values.
    hist: Option<(Total, bool, bool)>,
    /// aggpack: the bucket range of all quantize() entries.
    pack: Option<(usize, usize)>,
}

fn graph(opts: &SortOptions) -> Graph {
    Graph {
        zoom: opts.aggzoom,
        utf8: opts.encoding == Encoding::Utf8,
    }
}

fn packed_utf8(opts: &SortOptions) -> bool {
    match opts.encoding {
        Encoding::Ascii => false,
        Encoding::Utf8 => true,
        Encoding::Default => !matches!(
            std::env::var("TERM").as_deref(),
            Ok("sun") | Ok("sun-color") | Ok("dumb")
        ),
    }
}

fn extra(a: &Agg, opts: &SortOptions) -> Extra {
    let mut ex = Extra {
        hist: None,
        pack: None,
    };
    if opts.agghist
        && matches!(
            a.func,
            AggFunc::Sum | AggFunc::Count | AggFunc::Avg | AggFunc::Stddev
        )
    {
        let (mut pos, mut neg) = (false, false);
        let mut total: u128 = 0;
        for i in 0..a.len() {
            let d = a.data(i);
            let v = match a.func {
                AggFunc::Stddev => funcs::stddev(d, 1) as i64,
                AggFunc::Avg => funcs::average(d, 1),
                _ => d[0],
            };
            pos |= v > 0;
            neg |= v < 0;
            let m = u128::from(v.unsigned_abs());
            if opts.aggzoom {
                total = total.max(m * 20 / 19);
            } else {
                total += m;
            }
        }
        ex.hist = Some((Total::exact(total), pos, neg));
    }
    if opts.aggpack && a.func == AggFunc::Quantize {
        let mut range: Option<(usize, usize)> = None;
        for i in 0..a.len() {
            let d = a.data(i);
            let (lo, hi) = match (
                d.iter().position(|&c| c != 0),
                d.iter().rposition(|&c| c != 0),
            ) {
                (Some(lo), Some(hi)) => (lo, hi),
                _ => (ZERO_BUCKET, ZERO_BUCKET),
            };
            range = Some(match range {
                None => (lo, hi),
                Some((l, h)) => (l.min(lo), h.max(hi)),
            });
        }
        ex.pack = Some(range.unwrap_or((ZERO_BUCKET, ZERO_BUCKET)));
    }
    if opts.aggpack && matches!(a.func, AggFunc::Lquantize { .. }) {
        ex.pack = Some((0, 0));
    }
    ex
}

/// printa(@a) of one aggregation: marks it printed when it has entries.
pub(crate) fn print_agg(
    a: &Agg,
    opts: &SortOptions,
    syms: &dyn SymbolResolver,
    st: &mut State,
    out: &mut Vec<u8>,
) {
    if a.len() > 0 {
        a.printed.set(true);
    }
    print_agg_entries(a, opts, syms, st, out);
}

pub(crate) fn print_agg_entries(
    a: &Agg,
    opts: &SortOptions,
    syms: &dyn SymbolResolver,
    st: &mut State,
    out: &mut Vec<u8>,
) {
    let ex = extra(a, opts);
    let order = sort::sorted_entries(a, opts);
    prefetch(a, &order, syms);
    for i in order {
        let keys: Vec<DatumRef> = key::iter(a.key(i)).collect();
        let packed = ex.hist.is_some() || ex.pack.is_some();
        if packed && st.header_for != Some(a as *const Agg) {
            let width: usize = keys.iter().map(|k| packed_width(k) + 1).sum();
            if ex.hist.is_some() {
                graph::header(out, width);
            } else {
                let q = match a.func {
                    AggFunc::Quantize => ex.pack,
                    _ => None,
                };
                let levels = match a.func {
                    AggFunc::Lquantize { levels, .. } => levels as usize,
                    _ => 0,
                };
                graph::packed_header(out, width, q, levels);
            }
            st.header_for = Some(a as *const Agg);
        }
        for k in &keys {
            print_key(k, packed, opts, syms, out);
        }
        let d = a.data(i);
        let normal = a.normal(i);
        if let Some((total, pos, neg)) = &ex.hist {
            out.push(b' ');
            graph::quantline(
                out,
                d[0],
                normal,
                total,
                *pos,
                *neg,
                opts.encoding == Encoding::Utf8,
            );
            continue;
        }
        if let Some((minbin, maxbin)) = ex.pack {
            let g = graph(opts);
            match a.func {
                AggFunc::Quantize => {
                    graph::print_quantize_packed(out, d, minbin, maxbin, g, packed_utf8(opts))
                }
                AggFunc::Lquantize { base, step, levels } => {
                    graph::print_lquantize_packed(out, base, step, levels, d, g, packed_utf8(opts))
                }
                _ => {}
            }
            continue;
        }
        print_value(&a.func, d, normal, opts, out);
        out.push(b'\n');
    }
}

/// printa(@a, @b, ...) without a format.
/// Readies the names of every frame and symbol the entries' keys print (see
/// [`SymbolResolver::prefetch`]).
fn prefetch(a: &Agg, order: &[usize], syms: &dyn SymbolResolver) {
    let mut frames = order.iter().flat_map(|&i| {
        key::iter(a.key(i)).flat_map(|k| -> Vec<(Option<u32>, u64)> {
            match k {
                Datum::Stack {
                    frames, user, pid, ..
                } => frames
                    .iter()
                    .take_while(|&pc| pc != 0)
                    .map(|pc| (user.then_some(pid), pc))
                    .collect(),
                Datum::Sym(a) | Datum::Mod(a) => vec![(None, a)],
                Datum::Usym { addr, pid } | Datum::Umod { addr, pid } => {
                    vec![(Some(pid), addr)]
                }
                _ => Vec::new(),
            }
        })
    });
    syms.prefetch(&mut frames);
}

pub(crate) fn print_joined(
    aggs: &[&Agg],
    opts: &SortOptions,
    syms: &dyn SymbolResolver,
    _st: &mut State,
    out: &mut Vec<u8>,
) {
    let rows = sort::joined(aggs, opts);
    if !rows.is_empty() {
        for a in aggs {
            a.printed.set(true);
        }
    }
    for r in rows {
        for k in key::iter(r.key) {
            print_key(&k, false, opts, syms, out);
        }
        for (j, a) in aggs.iter().enumerate() {
            match r.entries[j] {
                Some(e) => print_value(&a.func, a.data(e), a.normal(e), opts, out),
                None => print_value(&a.func, &a.zero_data(), a.zero_normal(), opts, out),
            }
        }
        out.push(b'\n');
    }
}

/// Column width of a key component in packed layouts.
fn packed_width(k: &DatumRef) -> usize {
    match k {
        Datum::Int { size: 1, .. } => 3,
        Datum::Int { size: 2, .. } => 5,
        Datum::Int { size: 4, .. } => 8,
        _ => 16,
    }
}

/// An integer record of `size` bytes as `dt_print_datum` prints it.
fn print_int(out: &mut Vec<u8>, v: i64, size: u8) {
    let _ = match size {
        1 => write!(out, " {:>3}", v as u8),
        2 => write!(out, " {:>5}", v as u16),
        4 => write!(out, " {:>8}", v as u32 as i32),
        _ => write!(out, " {v:>16}"),
    };
}

/// One key component (`dt_print_datum` for a key record).
pub(crate) fn print_key(
    k: &DatumRef,
    packed: bool,
    opts: &SortOptions,
    syms: &dyn SymbolResolver,
    out: &mut Vec<u8>,
) {
    let width: i32 = if packed { 16 } else { -50 };
    match *k {
        Datum::Int { value, size, .. } => print_int(out, value, size),
        Datum::Str(s) => {
            let mut rec = s.to_vec();
            rec.truncate(opts.strsize);
            rec.resize(opts.strsize, 0);
            print_bytes(out, &rec, width, opts.rawbytes);
        }
        Datum::Bytes(b) => match b.len() {
            1 | 2 | 4 | 8 => {
                let mut a = [0u8; 8];
                a[..b.len()].copy_from_slice(b);
                print_int(out, i64::from_le_bytes(a), b.len() as u8);
            }
            _ => print_bytes(out, b, width, opts.rawbytes),
        },
        Datum::Stack {
            frames,
            user,
            pid,
            epoch,
        } => {
            let stack = StackKey {
                frames,
                user,
                pid,
                epoch,
            };
            print_stack(out, stack, opts.stackindent, None, syms)
        }
        Datum::Sym(a) => {
            let _ = write!(out, "  {:<50}", syms.kernel_func(a));
        }
        Datum::Mod(a) => {
            let _ = write!(out, "  {:<50}", syms.kmod(a));
        }
        Datum::Usym { addr, pid } => {
            let _ = write!(out, "  {:<50}", syms.user_func(pid, addr));
        }
        Datum::Uaddr { addr, pid } => {
            let _ = write!(out, "  {:<50}", syms.user(pid, addr));
        }
        Datum::Umod { addr, pid } => {
            let _ = write!(out, "  {:<50}", syms.umod(pid, addr));
        }
    }
}

/// A stack, one frame a line after a newline (`dt_print_stack`/`dt_print_ustack`); `field`
/// renders each frame's text (a printa() conversion), `indent` spaces before each.
/// A stack key's frames (little-endian words), process and epoch.
#[derive(Clone, Copy)]
pub(crate) struct StackKey<'a> {
    pub frames: Frames<'a>,
    pub user: bool,
    pub pid: u32,
    pub epoch: u32,
}

pub(crate) fn print_stack(
    out: &mut Vec<u8>,
    stack: StackKey<'_>,
    indent: usize,
    field: Option<FrameFormat>,
    syms: &dyn SymbolResolver,
) {
    let StackKey {
        frames,
        user,
        pid,
        epoch,
    } = stack;
    if user && frames.is_empty() {
        return;
    }
    out.push(b'\n');
    for pc in frames.iter() {
        if pc == 0 {
            break;
        }
        out.resize(out.len() + indent.min(1 << 16), b' ');
        let s = if user {
            syms.user_at(pid, epoch, pc)
        } else {
            syms.kernel_at(epoch, pc)
        };
        match field {
            Some(f) => f(&s, out),
            None => out.extend_from_slice(s.as_bytes()),
        }
        out.push(b'\n');
    }
}

fn is_printable(c: u8) -> bool {
    (0x20..=0x7e).contains(&c) || matches!(c, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 8 | 7)
}

/// `dt_print_bytes`: a string if the bytes look like one, else a hex dump.
pub(crate) fn print_bytes(out: &mut Vec<u8>, c: &[u8], width: i32, raw: bool) {
    if c.is_empty() {
        return;
    }
    if !raw {
        let mut i = 0;
        while i < c.len() {
            if is_printable(c[i]) {
                i += 1;
                continue;
            }
            if c[i] == 0 && i > 0 && c[i + 1..].iter().all(|&b| b == 0) {
                out.push(b' ');
                if width < 0 {
                    out.push(b' ');
                }
                pad_str(&c[..i], width, out);
                return;
            }
            break;
        }
        if i == c.len() {
            out.extend_from_slice(b"  ");
            pad_str(c, -(width.unsigned_abs() as i32), out);
            return;
        }
    }
    let _ = write!(out, "\n{:5}      ", "");
    for d in b"0123456789abcdef" {
        let _ = write!(out, "  {}", *d as char);
    }
    out.extend_from_slice(b"  0123456789abcdef\n");
    for (n, row) in c.chunks(16).enumerate() {
        let _ = write!(out, "{:5}{:5x}:", "", n * 16);
        for b in row {
            let _ = write!(out, " {b:02x}");
        }
        for _ in row.len()..16 {
            out.extend_from_slice(b"   ");
        }
        out.extend_from_slice(b"  ");
        for &b in row {
            out.push(if !(b' '..=b'~').contains(&b) { b'.' } else { b });
        }
        out.push(b'\n');
    }
}

/// The value of an entry in the default layout (without the final newline).
pub(crate) fn print_value(
    f: &AggFunc,
    d: &[i64],
    normal: u64,
    opts: &SortOptions,
    out: &mut Vec<u8>,
) {
    let g = graph(opts);
    match *f {
        AggFunc::Count | AggFunc::Sum | AggFunc::Min | AggFunc::Max => {
            let _ = write!(out, " {:>16}", quantize::norm(d[0], normal));
        }
        AggFunc::Avg => {
            let _ = write!(out, " {:>16}", funcs::average(d, normal));
        }
        AggFunc::Stddev => {
            let _ = write!(out, " {:>16}", funcs::stddev(d, normal));
        }
        AggFunc::Quantize => graph::print_quantize(out, d, normal, g),
        AggFunc::Lquantize { base, step, levels } => {
            graph::print_lquantize(out, base, step, levels, d, normal, g)
        }
        AggFunc::Llquantize {
            factor,
            low,
            high,
            nsteps,
            ..
        } => {
            let labels = quantize::llquantize_labels(factor, low, high, nsteps);
            graph::print_llquantize(out, &labels, d, normal, g)
        }
    }
}
