//! The quantizations' buckets in the program: the index `agg::quantize` gives a value, for
//! `quantize()`, `lquantize()` and `llquantize()` with their parameters known.

use super::super::asm::{insn, op, reg, Label};
use super::Gen;
use crate::ir::AggFunc;

impl Gen<'_> {
    /// `r0` = the bucket of the value in `r0` for quantization `f`, as `agg::quantize`
    /// indexes it (`llquantize()`'s index before `agg` clamps it to its last bucket).
    /// Clobbers `r1`, `r2`.
    pub(super) fn bucket(&mut self, f: AggFunc) -> Result<(), String> {
        use reg::{R0, R1};
        let done = self.a.label();
        match f {
            AggFunc::Quantize => {
                let (zero, pos) = (self.a.label(), self.a.label());
                self.a.jump_imm(op::JEQ, R0, 0, zero);
                self.a.jump_imm(op::JSGT, R0, 0, pos);
                // negative: 62 - min(log2(|v|), 62), |i64::MIN| being 2^63 unsigned
                self.a.push(insn(op::ALU64 | op::NEG, R0, 0, 0, 0));
                self.log2();
                let small = self.a.label();
                self.a.jump_imm(op::JLE, R1, 62, small);
                self.a.mov_imm(R1, 62);
                self.a.bind(small);
                self.a.mov_imm(R0, 62);
                self.a.alu_reg(op::SUB, R0, R1);
                self.a.goto(done);
                self.a.bind(pos);
                self.log2();
                self.a.mov_imm(R0, 64);
                self.a.alu_reg(op::ADD, R0, R1);
                self.a.goto(done);
                self.a.bind(zero);
                self.a.mov_imm(R0, 63);
            }
            AggFunc::Lquantize { base, step, levels } => {
                if step == 0 || levels == 0 {
                    return Err("lquantize() with no step or no levels".into());
                }
                // the value as 32 bits, signed, as the kernel's lquantize takes it
                let inside = self.a.label();
                self.a.alu_imm(op::LSH, R0, 32);
                self.a.alu_imm(op::ARSH, R0, 32);
                self.a.jump_imm(op::JSGE, R0, base, inside);
                self.a.mov_imm(R0, 0);
                self.a.goto(done);
                self.a.bind(inside);
                self.a.alu_imm(op::SUB, R0, base);
                self.a.alu_imm(op::DIV, R0, i32::from(step));
                let level = self.a.label();
                self.a.jump_imm(op::JLT, R0, i32::from(levels), level);
                self.a.mov_imm(R0, i64::from(levels) + 1);
                self.a.goto(done);
                self.a.bind(level);
                self.a.alu_imm(op::ADD, R0, 1);
            }
            AggFunc::Llquantize {
                factor,
                low,
                high,
                nsteps,
            } => self.llquantize_bucket(factor, low, high, nsteps, done),
            f => return Err(format!("{f:?} has no buckets")),
        }
        self.a.bind(done);
        Ok(())
    }

    /// `r1 = floor(log2(r0))` for `r0` > 0 as unsigned; clobbers `r0`, `r2`.
    fn log2(&mut self) {
        use reg::{R0, R1, R2};
        self.a.mov_imm(R1, 0);
        for shift in [32, 16, 8, 4, 2, 1] {
            let skip = self.a.label();
            self.a.push(insn(op::MOV64_REG, R2, R0, 0, 0));
            self.a.alu_imm(op::RSH, R2, shift);
            self.a.jump_imm(op::JEQ, R2, 0, skip);
            self.a.push(insn(op::MOV64_REG, R0, R2, 0, 0));
            self.a.alu_imm(op::ADD, R1, shift);
            self.a.bind(skip);
        }
    }

    /// `llquantize()`'s bucket of `r0`: `agg::quantize::llquantize_bucket` with its
    /// parameters known, so its walk over the orders of magnitude is unrolled into
    /// comparisons with constants (the one order whose top overflows 64 bits gives a
    /// constant, as the walk does).
    fn llquantize_bucket(&mut self, factor: u16, low: u16, high: u16, nsteps: u16, done: Label) {
        use reg::{R0, R1};
        let f = i64::from(factor.max(2));
        let nsteps = i64::from(nsteps.max(1));
        let mut this: i64 = 1;
        for _ in 0..low {
            this = this.saturating_mul(f);
        }
        let above = self.a.label();
        self.a.mov_imm(R1, this);
        self.a.jump_reg(op::JSGE, R0, R1, above);
        self.a.mov_imm(R0, 0);
        self.a.goto(done);
        self.a.bind(above);
        let mut last = this;
        this = this.saturating_mul(f);
        let mut base: i64 = 1;
        let mut order = low;
        while order <= high {
            let nb = this.min(nsteps).max(1);
            let width = (this / nb).max(1);
            let Some(next) = this.checked_mul(f) else {
                // the walk takes the value as this - 1 here
                self.a
                    .mov_imm(R0, (base + (this - 1 - last) / width).max(0));
                self.a.goto(done);
                return;
            };
            let over = self.a.label();
            self.a.mov_imm(R1, this);
            self.a.jump_reg(op::JSGE, R0, R1, over);
            self.a.mov_imm(R1, last);
            self.a.alu_reg(op::SUB, R0, R1);
            self.a.mov_imm(R1, width);
            self.a.alu_reg(op::DIV, R0, R1);
            self.a.mov_imm(R1, base);
            self.a.alu_reg(op::ADD, R0, R1);
            self.a.goto(done);
            self.a.bind(over);
            base += nb - nb / f;
            last = this;
            this = next;
            order += 1;
        }
        self.a.mov_imm(R0, base.max(0));
    }
}
