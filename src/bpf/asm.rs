//! A small BPF assembler: the instruction encoding of the BPF instruction set
//! (Documentation/bpf/standardization/instruction-set.rst), the helper numbers dtx calls
//! (`include/uapi/linux/bpf.h`), and forward jumps to labels resolved when the program is done.

/// One BPF instruction (8 bytes, as the kernel reads it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    pub code: u8,
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

/// An instruction from its parts: `src` in the high nibble of the register byte.
pub fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0xf),
        off,
        imm,
    }
}

/// Instruction codes.
pub mod op {
    pub const MOV64_REG: u8 = 0xbf;
    pub const MOV64_IMM: u8 = 0xb7;
    pub const MOV32_IMM: u8 = 0xb4;
    pub const ADD64_IMM: u8 = 0x07;
    pub const LDX_DW: u8 = 0x79;
    pub const STX_DW: u8 = 0x7b;
    pub const ST_W: u8 = 0x62;
    pub const ST_DW: u8 = 0x7a;
    /// `BPF_STX | BPF_DW | BPF_ATOMIC`, with [`ATOMIC_ADD`] in `imm`: `*(u64 *)(dst + off) +=
    /// src`, atomically.
    pub const ATOMIC_DW: u8 = 0xdb;
    pub const ATOMIC_ADD: i32 = 0x00;
    pub const LD_IMM64: u8 = 0x18;
    pub const JNE_IMM: u8 = 0x55;
    pub const CALL: u8 = 0x85;
    pub const EXIT: u8 = 0x95;

    /// ALU64 operations (class 0x07), with [`K`] (immediate) or [`X`] (register) source.
    pub const ALU64: u8 = 0x07;
    pub const ADD: u8 = 0x00;
    pub const SUB: u8 = 0x10;
    pub const MUL: u8 = 0x20;
    pub const DIV: u8 = 0x30;
    pub const OR: u8 = 0x40;
    pub const AND: u8 = 0x50;
    pub const LSH: u8 = 0x60;
    pub const RSH: u8 = 0x70;
    pub const NEG: u8 = 0x80;
    pub const MOD: u8 = 0x90;
    pub const XOR: u8 = 0xa0;
    pub const MOV: u8 = 0xb0;
    pub const ARSH: u8 = 0xc0;
    pub const K: u8 = 0x00;
    pub const X: u8 = 0x08;

    /// Jumps (class 0x05).
    pub const JMP: u8 = 0x05;
    pub const JA: u8 = 0x00;
    pub const JEQ: u8 = 0x10;
    pub const JGT: u8 = 0x20;
    pub const JGE: u8 = 0x30;
    pub const JNE: u8 = 0x50;
    pub const JSGT: u8 = 0x60;
    pub const JSGE: u8 = 0x70;
    pub const JLT: u8 = 0xa0;
    pub const JLE: u8 = 0xb0;
    pub const JSLT: u8 = 0xc0;
    pub const JSLE: u8 = 0xd0;
}

/// `src` of a 64-bit immediate load that names a map by its descriptor.
pub const PSEUDO_MAP_FD: u8 = 1;

/// Helper function numbers.
pub mod helper {
    pub const MAP_LOOKUP_ELEM: i32 = 1;
    pub const MAP_UPDATE_ELEM: i32 = 2;
    pub const MAP_DELETE_ELEM: i32 = 3;
    pub const KTIME_GET_NS: i32 = 5;
    pub const GET_SMP_PROCESSOR_ID: i32 = 8;
    pub const GET_CURRENT_PID_TGID: i32 = 14;
    pub const GET_CURRENT_UID_GID: i32 = 15;
    pub const GET_CURRENT_COMM: i32 = 16;
    pub const PERF_EVENT_OUTPUT: i32 = 25;
    pub const PROBE_READ_USER_STR: i32 = 114;
}

/// Registers.
pub mod reg {
    pub const R0: u8 = 0;
    pub const R1: u8 = 1;
    pub const R2: u8 = 2;
    pub const R3: u8 = 3;
    pub const R4: u8 = 4;
    pub const R5: u8 = 5;
    pub const R6: u8 = 6;
    pub const R7: u8 = 7;
    pub const FP: u8 = 10;
}

/// `dst = map` (the map's descriptor, which the kernel replaces by the map).
pub fn load_map(dst: u8, fd: i32) -> [Insn; 2] {
    [
        insn(op::LD_IMM64, dst, PSEUDO_MAP_FD, 0, fd),
        insn(0, 0, 0, 0, 0),
    ]
}

/// A place in the program that jumps name before it is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Label(usize);

/// A program being written: instructions, and jumps waiting for their labels.
#[derive(Default)]
pub struct Asm {
    pub insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, Label)>,
}

impl Asm {
    pub fn push(&mut self, i: Insn) {
        self.insns.push(i);
    }

    pub fn extend(&mut self, v: impl IntoIterator<Item = Insn>) {
        self.insns.extend(v);
    }

    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// The next instruction is `l`.
    pub fn bind(&mut self, l: Label) {
        if let Some(slot) = self.labels.get_mut(l.0) {
            *slot = Some(self.insns.len());
        }
    }

    /// `if dst OP imm goto l` (`OP` a jump operation of [`op`]).
    pub fn jump_imm(&mut self, jop: u8, dst: u8, imm: i32, l: Label) {
        self.fixups.push((self.insns.len(), l));
        self.insns.push(insn(op::JMP | jop | op::K, dst, 0, 0, imm));
    }

    /// `if dst OP src goto l`.
    pub fn jump_reg(&mut self, jop: u8, dst: u8, src: u8, l: Label) {
        self.fixups.push((self.insns.len(), l));
        self.insns.push(insn(op::JMP | jop | op::X, dst, src, 0, 0));
    }

    /// `goto l`.
    pub fn goto(&mut self, l: Label) {
        self.fixups.push((self.insns.len(), l));
        self.insns.push(insn(op::JMP | op::JA, 0, 0, 0, 0));
    }

    /// `dst = v` with the shortest load that holds it.
    pub fn mov_imm(&mut self, dst: u8, v: i64) {
        if let Ok(small) = i32::try_from(v) {
            self.push(insn(op::MOV64_IMM, dst, 0, 0, small));
        } else {
            self.push(insn(op::LD_IMM64, dst, 0, 0, v as u32 as i32));
            self.push(insn(0, 0, 0, 0, (v >> 32) as u32 as i32));
        }
    }

    /// `dst OP= imm` / `dst OP= src` (64-bit ALU).
    pub fn alu_imm(&mut self, aop: u8, dst: u8, imm: i32) {
        self.push(insn(op::ALU64 | aop | op::K, dst, 0, 0, imm));
    }

    pub fn alu_reg(&mut self, aop: u8, dst: u8, src: u8) {
        self.push(insn(op::ALU64 | aop | op::X, dst, src, 0, 0));
    }

    /// `dst = *(u64 *)(src + off)`.
    pub fn load(&mut self, dst: u8, src: u8, off: i16) {
        self.push(insn(op::LDX_DW, dst, src, off, 0));
    }

    /// `*(u64 *)(dst + off) = src`.
    pub fn store(&mut self, dst: u8, off: i16, src: u8) {
        self.push(insn(op::STX_DW, dst, src, off, 0));
    }

    pub fn call(&mut self, helper: i32) {
        self.push(insn(op::CALL, 0, 0, 0, helper));
    }

    /// `return v`.
    pub fn exit_with(&mut self, v: i32) {
        self.push(insn(op::MOV64_IMM, reg::R0, 0, 0, v));
        self.push(insn(op::EXIT, 0, 0, 0, 0));
    }

    /// The program, every jump pointing at its label; an error names a label never bound or
    /// a jump too far for its 16-bit offset.
    pub fn finish(mut self) -> Result<Vec<Insn>, String> {
        for &(at, l) in &self.fixups {
            let target = self
                .labels
                .get(l.0)
                .copied()
                .flatten()
                .ok_or("a jump to a label never placed")?;
            let off = target as i64 - at as i64 - 1;
            let off = i16::try_from(off).map_err(|_| "a jump too far for BPF")?;
            self.insns[at].off = off;
        }
        Ok(self.insns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_point_at_their_labels_forward_and_back() {
        let mut a = Asm::default();
        let top = a.label();
        let end = a.label();
        a.bind(top);
        a.mov_imm(reg::R0, 1);
        a.jump_imm(op::JEQ, reg::R0, 0, end);
        a.goto(top);
        a.bind(end);
        a.exit_with(0);
        let p = a.finish().unwrap();
        assert_eq!(p[1].off, 1, "over the goto");
        assert_eq!(p[2].off, -3, "back to the first instruction");
        assert_eq!(p[1].code, 0x15, "JEQ with an immediate");
    }

    #[test]
    fn wide_constants_take_two_slots_and_unplaced_labels_are_errors() {
        let mut a = Asm::default();
        a.mov_imm(reg::R0, 0x1_0000_0002);
        assert_eq!(a.insns.len(), 2);
        assert_eq!((a.insns[0].imm, a.insns[1].imm), (2, 1));
        a.mov_imm(reg::R0, -5);
        assert_eq!(a.insns.len(), 3);
        let l = a.label();
        a.goto(l);
        assert!(a.finish().is_err());
    }
}
