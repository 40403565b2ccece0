//! Register pressure: DTrace's code generator evaluates an expression with a fixed set of seven
//! registers and refuses expressions that need more (`D_NOREG`). dtx's IR follows the same
//! evaluation order, so the same expressions are refused.

use crate::lang::ast::{Expr, ExprKind};
use crate::lang::diag::{derr, DResult};

/// Registers available to an expression (DIF has eight; `%r0` is always zero).
pub const NREGS: u32 = 7;

/// Registers needed to evaluate `e`: the left operand's result is held while the right one is
/// computed.
pub fn need(e: &Expr) -> u32 {
    match &e.kind {
        ExprKind::Binary(_, a, b) | ExprKind::Assign(_, a, b) => need(a).max(need(b) + 1),
        ExprKind::Ternary(c, a, b) => need(c).max(need(a)).max(need(b)),
        ExprKind::Unary(_, x)
        | ExprKind::Cast(_, x)
        | ExprKind::Stringof(x)
        | ExprKind::Xlate(_, x)
        | ExprKind::Member { base: x, .. } => need(x),
        // keys and arguments are pushed on the tuple stack one at a time
        ExprKind::Index { base, keys } => keys.iter().map(need).max().unwrap_or(1).max(need(base)),
        ExprKind::Call { args, .. } => args.iter().map(need).max().unwrap_or(1),
        _ => 1,
    }
}

pub fn check(e: &Expr) -> DResult<()> {
    if need(e) > NREGS {
        return Err(derr(
            "D_NOREG",
            e.line,
            "Insufficient registers to generate code",
        ));
    }
    Ok(())
}
