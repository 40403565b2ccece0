//! Running the clauses enabled on a probe: predicate, statements, actions, speculation, and the
//! ERROR probe when a clause faults.

use super::memory::Fault;
use super::record::{Datum, Record};
use std::sync::Arc;

use super::{ErrorInfo, FireResult, FiringCtx, Vm};
use crate::agg::IntKey;
use crate::ir::{Action, ActionKind, LValue, Node, Program, Scope, Stmt, Subr, ValKind};
use crate::probes::{END_ID, ERROR_ID, ERROR_PROBE};

type R<T> = Result<T, Fault>;

/// How a clause ended.
/// (`exit()` lets the clause run on: it sets `exit_in_clause`.)
enum Flow {
    Done,
    /// The clause's remaining actions are dropped (dtrace's `CPU_DTRACE_DROP`, which ends the
    /// action loop): `speculate(0)`.
    Drop,
}

/// The adds of a clause of `n++` statements: (global?, variable, delta) each.
pub(super) type ClauseSteps = Box<[(bool, usize, i64)]>;

/// The adds of a clause that [`Vm::fire_into`] does without its setup: one with no
/// predicate whose statements (one at least) are all `++`/`--` of an integer global or
/// clause-local variable (of the `nvars` the program has). Such a clause cannot record,
/// speculate or fault, and reads nothing of the firing.
pub(super) fn clause_steps(clause: &crate::ir::Clause, nvars: usize) -> Option<ClauseSteps> {
    if clause.predicate.is_some() || clause.body.is_empty() {
        return None;
    }
    clause
        .body
        .iter()
        .map(|s| match s {
            Stmt::Eval(n) => static_step_of(n, nvars),
            _ => None,
        })
        .collect()
}

/// The variable (global or not) and the add of an `n++` statement of an integer global or
/// clause-local variable, one of the program's `nvars`.
fn static_step_of(n: &Node, nvars: usize) -> Option<(bool, usize, i64)> {
    let Node::IncDec { target, delta, .. } = n else {
        return None;
    };
    let LValue::Var {
        id,
        scope,
        kind: ValKind::Int { .. },
    } = &**target
    else {
        return None;
    };
    let i = *id as usize;
    match scope {
        Scope::Global if i < nvars => Some((true, i, *delta)),
        Scope::Clause if i < nvars => Some((false, i, *delta)),
        _ => None,
    }
}

/// Adds the delta of an `n++` step (as [`static_step_of`] gives it) to its global or
/// clause-local variable. Free of `Vm` so a firing can add the steps it borrows from the `Vm`.
#[inline(always)]
fn add_step(globals: &mut [u64], locals: &mut [u64], (global, i, delta): (bool, usize, i64)) {
    let v = match global {
        true => globals.get_mut(i),
        false => locals.get_mut(i),
    };
    // D variables hold the full 64-bit value (see `write_var`)
    if let Some(v) = v {
        *v = v.wrapping_add(delta as u64);
    }
}

impl Vm {
    /// Runs every clause enabled on the firing's probe, in program order.
    pub fn fire(&mut self, cx: &FiringCtx<'_>) -> FireResult {
        let mut res = FireResult::default();
        // the consumer takes each firing's data at once: the aggregation buffer is empty again,
        // and so is a principal buffer that is not filling
        self.aggs.new_window();
        if !self.opts.fill {
            self.buf_offset = 0;
        }
        self.fire_into(cx, &mut res, false);
        res
    }

    fn fire_into(&mut self, cx: &FiringCtx<'_>, res: &mut FireResult, in_error: bool) {
        let Some(slot) = self.enabling_slot(cx.probe.id) else {
            return;
        };
        if !self.clause_locals.is_empty() {
            for &id in &self.clause_locals {
                self.locals[id as usize] = 0;
                self.null_strings[id as usize] = false;
            }
            self.local_mem.fill(0);
        }
        // SAFETY: `self.program` is an `Arc` that nothing in a firing replaces or mutates (the
        // field is only assigned in `Vm::new`), so the program it points to outlives this call;
        // borrowing it through a pointer spares an atomic reference-count round trip per firing.
        let program: &Program = unsafe { &*Arc::as_ptr(&self.program) };
        let end = cx.probe.id == END_ID;
        let mut next = 0;
        // the enablings of a probe do not change while it fires (`enable` needs the Vm between
        // firings); they are read by index so the clauses can use `self` freely
        while let Some(&e) = self.enabling_lists[slot].get(next) {
            next += 1;
            if self.exiting && !end {
                break;
            }
            let plan = self
                .plans
                .get(e.clause)
                .copied()
                .unwrap_or(super::ClausePlan::NONE);
            // where the ECB starts in the principal buffer (0 when no firing can fill it)
            let offs = if self.buffer_accounted {
                match self.reserve(&plan, end, res) {
                    Some(offs) => offs,
                    None => continue,
                }
            } else {
                0
            };
            let clause = &program.clauses[e.clause];
            // a clause of `n++` statements alone, with no predicate: the adds are all it does
            // (no record, no speculation, no fault, nothing of the firing read), so none of
            // the state a clause's actions and faults need is set up for it
            if let Some(Some(steps)) = self.static_steps.get(e.clause) {
                for &step in steps.iter() {
                    add_step(&mut self.globals, &mut self.locals, step);
                }
                // as a clause that ran to its end with no speculation (below)
                self.buf_offset = offs + plan.ecb.size;
                continue;
            }
            self.current_clause = e.clause;
            self.current_epid = e.epid;
            self.current_spec = 0;
            self.header_sent = false;
            self.clause_first_record = self.records.len();
            self.clause_kept = self.clause_first_record;
            self.spec_mark = None;
            self.fire_cpu = cx.cpu;
            self.fire_probe = cx.probe.id;
            self.fire_ts = cx.timestamp;
            self.scratch.clear();
            self.scratch_top = 0;
            let mut action_no = 0u32;
            self.clause_ran = false;
            self.exit_in_clause = false;
            let r = (|| -> R<Flow> {
                if let Some(p) = &clause.predicate {
                    if self.eval_fast(p, cx)? == 0 {
                        return Ok(Flow::Done);
                    }
                }
                self.clause_ran = true;
                self.stmts(&clause.body, cx, &mut action_no, res)
            })();
            match r {
                Ok(Flow::Done) => {
                    if self.current_spec == 0 {
                        // a firing that ran to its end keeps its records in the principal
                        // buffer (a speculating one kept them in its speculation's buffer)
                        if self.clause_ran {
                            self.buf_offset = offs + plan.ecb.size;
                            // a clause with no statements shows its probe line (DTrace's
                            // default action); one whose statements record nothing (`@[k] =
                            // count()`, `self->ts = timestamp`) has an ECB of size 0 in dtrace
                            // and shows nothing
                            if clause.body.is_empty() && !self.header_sent && !self.opts.quiet {
                                self.records.push((
                                    e.epid,
                                    Record::Fire {
                                        cpu: cx.cpu,
                                        probe: cx.probe.id,
                                        ts: cx.timestamp,
                                    },
                                ));
                            }
                        }
                        if self.exit_in_clause {
                            // exit(): the remaining clauses of this firing do not run
                            self.exiting = true;
                        }
                    } else if !self.header_sent {
                        // a clause whose only record is speculate()'s keeps its header, in the
                        // speculation's buffer (dtrace_ecb_action_add sizes a speculate like
                        // a record)
                        self.header_sent = true;
                        let fire = Record::Fire {
                            cpu: cx.cpu,
                            probe: cx.probe.id,
                            ts: cx.timestamp,
                        };
                        self.spec.push(self.current_spec, (e.epid, fire));
                    }
                }
                // the enabled probe's record is not committed
                Ok(Flow::Drop) => self.records.truncate(self.clause_first_record),
                Err(fault) => {
                    let info = ErrorInfo {
                        epid: e.epid,
                        probe: cx.probe.id,
                        clause: e.clause,
                        action: action_no.max(1),
                        fault,
                    };
                    self.clause_faulted(cx, info, res, in_error);
                }
            }
        }
        self.spec.end_firing();
    }

    /// Reserves an ECB's room in the principal buffer before its predicate runs, and gives
    /// where it starts; without the room the firing is dropped whole
    /// (`dtrace_buffer_reserve()`), and a filling buffer stops tracing.
    #[inline]
    fn reserve(
        &mut self,
        plan: &super::ClausePlan,
        end: bool,
        res: &mut FireResult,
    ) -> Option<usize> {
        let filling = self.opts.fill && !end;
        if filling && self.filled {
            return None;
        }
        let limit = if filling {
            self.fill_limit
        } else {
            self.opts.bufsize & !7
        };
        // a mask, not `next_multiple_of`'s division, which costs tens of cycles a firing
        let offs = if self.opts.ring {
            0
        } else {
            (self.buf_offset + plan.align_mask) & !plan.align_mask
        };
        if offs + plan.ecb.needed <= limit {
            return Some(offs);
        }
        if filling {
            // the filling buffer is full: tracing stops (dtrace counts no drop, it marks the
            // buffer full)
            self.filled = true;
            self.exiting = true;
            res.exit.get_or_insert(0);
        } else {
            self.principal_drops += 1;
        }
        None
    }

    /// What a clause's fault leaves: dtrace_probe() leaves the buffer's offset where it was
    /// when a clause faults, so nothing the clause recorded is kept (what commit() released
    /// before the fault is); then `dtrace:::ERROR` fires. Out of line: faults are rare.
    #[cold]
    #[inline(never)]
    fn clause_faulted(
        &mut self,
        cx: &FiringCtx<'_>,
        info: ErrorInfo,
        res: &mut FireResult,
        in_error: bool,
    ) {
        self.records.truncate(self.clause_kept);
        if let (Some(mark), true) = (self.spec_mark, self.current_spec != 0) {
            self.spec.rollback(self.current_spec, mark);
        }
        if in_error {
            // a fault in an ERROR clause is counted, not reported again
            self.double_errors += 1;
        } else {
            res.errors.push(info.clone());
            self.fire_error(cx, &info, res);
        }
    }

    /// Fires `dtrace:::ERROR` for a fault: arg1 = EPID, arg2 = action, arg3 = offset,
    /// arg4 = DTRACEFLT code, arg5 = address. Kept out of line: faults are rare, and inlined
    /// into `fire_into` its copy of the firing context costs every firing.
    #[cold]
    #[inline(never)]
    fn fire_error(&mut self, cx: &FiringCtx<'_>, e: &ErrorInfo, res: &mut FireResult) {
        if self.enablings(ERROR_ID).is_empty() {
            return;
        }
        let probe = &*ERROR_PROBE;
        let ecx = FiringCtx {
            probe,
            args: [
                0,
                e.epid as u64,
                e.action as u64,
                u64::MAX,
                e.fault.code(),
                e.fault.addr(),
                0,
                0,
                0,
                0,
            ],
            ..*cx
        };
        let saved_epid = self.current_epid;
        let saved_scratch = (std::mem::take(&mut self.scratch), self.scratch_top);
        self.fire_into(&ecx, res, true);
        (self.scratch, self.scratch_top) = saved_scratch;
        self.current_epid = saved_epid;
    }

    fn stmts(
        &mut self,
        body: &[Stmt],
        cx: &FiringCtx<'_>,
        action_no: &mut u32,
        res: &mut FireResult,
    ) -> R<Flow> {
        for s in body {
            *action_no += 1;
            match s {
                Stmt::Eval(n) => {
                    if !self.step_static(n) {
                        self.eval(n, cx)?;
                    }
                }
                Stmt::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    let branch = if self.eval(cond, cx)? != 0 {
                        then
                    } else {
                        otherwise
                    };
                    match self.stmts(branch, cx, action_no, res)? {
                        Flow::Done => {}
                        stop => return Ok(stop),
                    }
                }
                Stmt::Action(a) => match self.action(a, cx, res)? {
                    Flow::Done => {}
                    stop => return Ok(stop),
                },
            }
        }
        Ok(Flow::Done)
    }

    /// `n++` / `n--` / `++n` / `--n` as a statement on an integer global or clause-local
    /// variable: the value is not used, so the add is all there is to do (what `eval` does
    /// for it through `load_lvalue` and `store`, without the calls: `diag:::events { n++; }`
    /// runs it for every record). False, having done nothing, for any other statement.
    #[inline(always)]
    fn step_static(&mut self, n: &Node) -> bool {
        let Some(step) = self.static_step(n) else {
            return false;
        };
        add_step(&mut self.globals, &mut self.locals, step);
        true
    }

    /// The variable (global or not) and the add of an `n++` statement [`Vm::step_static`]
    /// does.
    #[inline(always)]
    fn static_step(&self, n: &Node) -> Option<(bool, usize, i64)> {
        static_step_of(n, self.globals.len().min(self.locals.len()))
    }

    /// The recorded form of a value.
    fn datum(&mut self, n: &Node, kind: ValKind, cx: &FiringCtx<'_>) -> R<Datum> {
        let v = self.eval(n, cx)?;
        Ok(match kind {
            ValKind::Int { size, signed } => Datum::Int {
                value: v as i64,
                size,
                signed,
            },
            ValKind::String => {
                let mut s = Vec::new();
                self.read_string_cx(v, cx, &mut s)?;
                Datum::Str(s)
            }
            ValKind::ByRef { size } => {
                let mut b = vec![0u8; size as usize];
                self.read_bytes(v, &mut b, cx)?;
                Datum::Bytes(b)
            }
        })
    }

    fn data(&mut self, a: &Action, cx: &FiringCtx<'_>) -> R<Vec<Datum>> {
        let mut v = Vec::with_capacity(a.args.len());
        for (n, k) in a.args.iter().zip(&a.arg_kinds) {
            v.push(self.datum(n, *k, cx)?);
        }
        Ok(v)
    }

    /// Sends a record to the output, or to the clause's speculation.
    fn emit(&mut self, rec: Record) {
        let epid = self.current_epid;
        if !self.header_sent {
            self.header_sent = true;
            let fire = Record::Fire {
                cpu: self.fire_cpu,
                probe: self.fire_probe,
                ts: self.fire_ts,
            };
            if self.current_spec != 0 {
                self.spec.push(self.current_spec, (epid, fire));
            } else {
                self.records.push((epid, fire));
            }
        }
        if self.current_spec != 0 {
            self.spec.push(self.current_spec, (epid, rec));
        } else {
            self.records.push((epid, rec));
        }
    }

    fn stack_datum(&self, frames: u32, user: bool, cx: &FiringCtx<'_>) -> Datum {
        let src = if user { cx.user_stack() } else { cx.stack };
        let n = (frames as usize).min(src.len());
        // a kernel stack is the same key whatever process it ran for
        let pid = if user { cx.pid as u32 } else { 0 };
        Datum::Stack {
            frames: src[..n].to_vec(),
            user,
            pid,
            epoch: cx.epochs.map_or(0, |e| e.stack_epoch(pid, &src[..n])),
        }
    }

    fn action(&mut self, a: &Action, cx: &FiringCtx<'_>, res: &mut FireResult) -> R<Flow> {
        match &a.kind {
            ActionKind::Aggregate { agg } => {
                if a.keys.len() <= IntKey::MAX && a.args.len() <= 8 {
                    if let Some(()) = self.aggregate_ints(*agg, a, cx)? {
                        return Ok(Flow::Done);
                    }
                }
                // key values are rebuilt in place so string keys reuse their buffers
                let mut keys = std::mem::take(&mut self.agg_keys);
                let mut args = std::mem::take(&mut self.agg_args);
                args.clear();
                let r = (|| -> R<()> {
                    for (i, k) in a.keys.iter().enumerate() {
                        if keys.len() <= i {
                            keys.push(Datum::Int {
                                value: 0,
                                size: 8,
                                signed: true,
                            });
                        }
                        let kind = a.key_kinds.get(i).copied().unwrap_or(ValKind::I64);
                        self.agg_key(k, kind, cx, &mut keys[i])?;
                    }
                    keys.truncate(a.keys.len());
                    for n in &a.args {
                        args.push(self.eval_fast(n, cx)? as i64);
                    }
                    Ok(())
                })();
                if r.is_ok() && self.aggs.update(*agg, &keys, &args).is_err() {
                    self.agg_drops += 1;
                }
                self.agg_keys = keys;
                self.agg_args = args;
                r?;
            }
            ActionKind::Exit => {
                if self.exit_in_clause {
                    // dtrace moves to draining on the first exit(); later ones in the same
                    // firing are dropped
                    return Ok(Flow::Done);
                }
                let code = match a.args.first() {
                    Some(n) => self.eval(n, cx)? as i32,
                    None => 0,
                };
                self.emit(Record::Exit(code));
                if self.current_spec == 0 {
                    res.exit = Some(code);
                    // the clause's remaining statements still run; later clauses do not
                    self.exit_in_clause = true;
                }
            }
            ActionKind::Speculate => {
                let id = match a.args.first() {
                    Some(n) => self.eval(n, cx)?,
                    None => 0,
                };
                // no speculation (0, what a failed `speculation()` returns), one not active,
                // or one without room for the ECB: dtrace's `dtrace_speculation_buffer()` or
                // `dtrace_buffer_reserve()` fails, the firing is dropped and the clause's later
                // actions do not run
                let ecb = self.plans.get(self.current_clause).map(|p| p.ecb);
                let mark = self.spec.mark(id);
                match ecb {
                    Some(ecb) if self.spec.reserve(id, ecb) => {
                        self.current_spec = id;
                        self.spec_mark = mark;
                    }
                    _ => return Ok(Flow::Drop),
                }
            }
            ActionKind::Commit => {
                let id = match a.args.first() {
                    Some(n) => self.eval(n, cx)?,
                    None => 0,
                };
                if self.spec.out_of_range(id) {
                    return Err(Fault::IllegalOp);
                }
                let recs = self.spec.commit(id);
                // what the clause recorded so far is committed with it (dtrace's COMMIT sets
                // the principal buffer's offset): a later fault keeps it
                self.clause_kept = self.records.len() + recs.len();
                for (epid, r) in recs {
                    if let Record::Exit(code) = r {
                        res.exit = Some(code);
                    }
                    self.records.push((epid, r));
                }
            }
            ActionKind::Discard => {
                let id = match a.args.first() {
                    Some(n) => self.eval(n, cx)?,
                    None => 0,
                };
                if self.spec.out_of_range(id) {
                    return Err(Fault::IllegalOp);
                }
                self.spec.discard(id);
            }
            ActionKind::Stack { frames } => {
                let d = self.stack_datum(*frames, false, cx);
                self.emit(Record::Data {
                    action: a.id,
                    values: vec![d],
                });
            }
            ActionKind::Ustack { frames, .. } | ActionKind::Jstack { frames, .. } => {
                let d = self.stack_datum(*frames, true, cx);
                self.emit(Record::Data {
                    action: a.id,
                    values: vec![d],
                });
            }
            ActionKind::Tracemem => {
                let addr = match a.args.first() {
                    Some(n) => self.eval(n, cx)?,
                    None => 0,
                };
                let max = match a.args.get(1) {
                    Some(n) => self.eval(n, cx)? as usize,
                    None => 0,
                };
                let len = match a.args.get(2) {
                    Some(n) => (self.eval(n, cx)? as usize).min(max),
                    None => max,
                };
                let mut b = vec![0u8; len.min(1 << 20)];
                self.read_bytes(addr, &mut b, cx)?;
                self.emit(Record::Data {
                    action: a.id,
                    values: vec![Datum::Bytes(b)],
                });
            }
            ActionKind::Printf(_)
            | ActionKind::Trace
            | ActionKind::Print(_)
            | ActionKind::Sym
            | ActionKind::Mod
            | ActionKind::Usym
            | ActionKind::Umod
            | ActionKind::Uaddr => {
                let values = self.data(a, cx)?;
                self.emit(Record::Data {
                    action: a.id,
                    values,
                });
            }
            ActionKind::Raise
            | ActionKind::Stop
            | ActionKind::Chill
            | ActionKind::Breakpoint
            | ActionKind::Panic
            | ActionKind::Lkd => {
                let values = self.data(a, cx)?;
                self.emit(Record::Lib {
                    action: a.id,
                    values,
                });
            }
            _ => {
                let values = self.data(a, cx)?;
                self.emit(Record::Lib {
                    action: a.id,
                    values,
                });
            }
        }
        Ok(Flow::Done)
    }

    /// An aggregation update whose key components are all plain integers (`@[pid]`,
    /// `@[arg1, cpu]`), with the key encoded on the stack; `None` (nothing evaluated) for any
    /// other key.
    #[inline]
    fn aggregate_ints(&mut self, agg: u32, a: &Action, cx: &FiringCtx<'_>) -> R<Option<()>> {
        let plain = a.keys.iter().enumerate().all(|(i, k)| {
            matches!(a.key_kinds.get(i), Some(ValKind::Int { .. }) | None)
                && !matches!(k, Node::Call { subr, .. } if subr.is_key())
        });
        if !plain {
            return Ok(None);
        }
        let mut key = IntKey::new();
        for (i, k) in a.keys.iter().enumerate() {
            let v = self.eval_fast(k, cx)?;
            let (size, signed) = match a.key_kinds.get(i) {
                Some(ValKind::Int { size, signed }) => (*size, *signed),
                _ => (8, true),
            };
            key.push(v as i64, size, signed);
        }
        let mut args = [0i64; 8];
        for (slot, n) in args.iter_mut().zip(&a.args) {
            *slot = self.eval_fast(n, cx)? as i64;
        }
        if self
            .aggs
            .update_ints(agg, &key, &args[..a.args.len()])
            .is_err()
        {
            self.agg_drops += 1;
        }
        Ok(Some(()))
    }

    /// Evaluates one aggregation key into `slot`, reusing its buffer for strings.
    fn agg_key(&mut self, k: &Node, kind: ValKind, cx: &FiringCtx<'_>, slot: &mut Datum) -> R<()> {
        if let Node::Call { subr, args, .. } = k {
            match *subr {
                Subr::Stack | Subr::Ustack | Subr::Jstack => {
                    let user = *subr != Subr::Stack;
                    let frames = match args.first() {
                        Some(n) => self.eval(n, cx)? as u32,
                        None => u32::MAX,
                    };
                    *slot = self.stack_datum(frames, user, cx);
                    return Ok(());
                }
                Subr::Sym | Subr::Func | Subr::Mod => {
                    let v = match args.first() {
                        Some(n) => self.eval(n, cx)?,
                        None => 0,
                    };
                    // mod() keys name (and merge by) the module, sym()/func() the function
                    *slot = if *subr == Subr::Mod {
                        Datum::Mod(v)
                    } else {
                        Datum::Sym(v)
                    };
                    return Ok(());
                }
                Subr::Usym | Subr::Ufunc | Subr::Umod | Subr::Uaddr => {
                    let v = match args.first() {
                        Some(n) => self.eval(n, cx)?,
                        None => 0,
                    };
                    let pid = cx.pid as u32;
                    *slot = match *subr {
                        Subr::Umod => Datum::Umod { addr: v, pid },
                        Subr::Uaddr => Datum::Uaddr { addr: v, pid },
                        _ => Datum::Usym { addr: v, pid },
                    };
                    return Ok(());
                }
                _ => {}
            }
        }
        let v = self.eval_fast(k, cx)?;
        match kind {
            ValKind::String => {
                if !matches!(slot, Datum::Str(_)) {
                    *slot = Datum::Str(Vec::new());
                }
                if let Datum::Str(buf) = slot {
                    self.read_string_cx(v, cx, buf)?;
                }
            }
            ValKind::Int { size, signed } => {
                *slot = Datum::Int {
                    value: v as i64,
                    size,
                    signed,
                }
            }
            ValKind::ByRef { size } => {
                let mut b = vec![0u8; size as usize];
                self.read_bytes(v, &mut b, cx)?;
                *slot = Datum::Str(b);
            }
        }
        Ok(())
    }
}
