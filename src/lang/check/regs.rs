//! Register pressure: DTrace's code generator evaluates an expression with a fixed set of seven
//! registers and refuses expressions that need more (`D_NOREG`). dtx's IR follows the same
//! evaluation order, so the same expressions are refused.

use crate::lang::ast::{BinOp, Expr, ExprKind};
use crate::lang::diag::{derr, DResult};

/// Registers available to an expression (DIF has eight; `%r0` is always zero).
pub const NREGS: u32 = 7;

/// Registers needed to evaluate `e`: the left operand's result is held while the right one is
/// computed. A plain assignment computes its value first and stores it straight into a
/// variable, so `a = b = c = ...` needs no more registers than its last value; the value is
/// held while an array's keys or a member's address are computed (illumos'
/// `dt_cg_asgn_op`: the right side first, then the store by kind of left side).
pub fn need(e: &Expr) -> u32 {
    match &e.kind {
        ExprKind::Assign(None, a, b) => match &a.kind {
            ExprKind::Ident(_) => need(b),
            ExprKind::Member { base, .. }
                if matches!(base.kind, ExprKind::SelfRef | ExprKind::ThisRef) =>
            {
                need(b)
            }
            ExprKind::Index { keys, .. } => {
                need(b).max(keys.iter().map(need).max().unwrap_or(0) + 1)
            }
            _ => need(b).max(need(a) + 1),
        },
        // `,`, `&&` and `||` free the left operand's register once it is tested, before the
        // right one is evaluated (illumos dt_cg.c: DT_TOK_COMMA, dt_cg_logical_and and
        // dt_cg_logical_or call dt_regset_free on dn_left first); `^^` keeps both
        ExprKind::Binary(BinOp::Comma | BinOp::And | BinOp::Or, a, b) => need(a).max(need(b)),
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

/// Tuple registers a key list may fill (DIF's `DIF_DTR_NREGS`): libdtrace's code generator
/// counts the keys it pushes for one array reference against it.
pub const NTUPREGS: usize = 8;

/// Refuses an expression that needs more than [`NREGS`] registers (`D_NOREG`), or that indexes
/// an associative array with more keys than the tuple stack holds: illumos' `dt_cg_arglist()`
/// then fails the compilation with `EDT_NOTUPREG`, a library error with no tag or line.
pub fn check(e: &Expr) -> DResult<()> {
    if need(e) > NREGS {
        return Err(derr(
            "D_NOREG",
            e.line,
            "Insufficient registers to generate code",
        ));
    }
    if widest_tuple(e) > NTUPREGS {
        return Err(derr(
            "EDT_NOTUPREG",
            0,
            "Insufficient tuple registers to generate code",
        ));
    }
    Ok(())
}

/// The most keys any array reference in `e` pushes on the tuple stack (aggregation keys are
/// recorded, not pushed, so they do not count).
fn widest_tuple(e: &Expr) -> usize {
    let sub = |xs: &[&Expr]| xs.iter().map(|x| widest_tuple(x)).max().unwrap_or(0);
    match &e.kind {
        ExprKind::Index { base, keys } => {
            let own = if matches!(base.kind, ExprKind::Agg(_)) {
                0
            } else {
                keys.len()
            };
            own.max(widest_tuple(base))
                .max(keys.iter().map(widest_tuple).max().unwrap_or(0))
        }
        ExprKind::Call { func, args } => {
            widest_tuple(func).max(args.iter().map(widest_tuple).max().unwrap_or(0))
        }
        ExprKind::Binary(_, a, b) | ExprKind::Assign(_, a, b) => sub(&[a, b]),
        ExprKind::Ternary(c, a, b) => sub(&[c, a, b]),
        ExprKind::Unary(_, x)
        | ExprKind::Cast(_, x)
        | ExprKind::Stringof(x)
        | ExprKind::Xlate(_, x)
        | ExprKind::SizeofExpr(x)
        | ExprKind::Member { base: x, .. } => widest_tuple(x),
        _ => 0,
    }
}
