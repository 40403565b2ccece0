//! x86-64 decoding of a function's code (iced-x86): instruction boundaries for offset probes,
//! the places where a function returns (every `ret`, and jumps out of the function: tail
//! calls), and which instructions the debugger may emulate instead of single-stepping.

use iced_x86::{
    Code, Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, OpKind, Register,
};

/// What a probed instruction does, as far as the debugger's step-over cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emulation {
    /// No effect but advancing the program counter (`nop`, `endbr64`).
    Skip,
    /// `push reg` of a 64-bit general register (index in [`GPR_ORDER`]).
    Push(u8),
    /// `mov dst, src` between 64-bit general registers.
    MovReg(u8, u8),
    /// `sub rsp, imm` (negative for `add`).
    SubRsp(i64),
    /// Near `ret` without an immediate.
    Ret,
    /// Anything else: execute it with a single step.
    Step,
}

/// General registers in the order [`Emulation`] indexes them.
pub const GPR_ORDER: [Register; 16] = [
    Register::RAX,
    Register::RCX,
    Register::RDX,
    Register::RBX,
    Register::RSP,
    Register::RBP,
    Register::RSI,
    Register::RDI,
    Register::R8,
    Register::R9,
    Register::R10,
    Register::R11,
    Register::R12,
    Register::R13,
    Register::R14,
    Register::R15,
];

fn gpr(r: Register) -> Option<u8> {
    GPR_ORDER.iter().position(|&g| g == r).map(|i| i as u8)
}

/// One decoded instruction of a function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    /// Offset from the function start.
    pub offset: u64,
    pub len: u8,
    /// The function returns here (a `ret`, or a jump out of the function).
    pub returns: bool,
    pub emulation: Emulation,
}

/// Decodes the code of a function at run-time address `ip`. Decoding stops at the first
/// invalid instruction (data in the text, padding).
pub fn function(code: &[u8], ip: u64) -> Vec<Insn> {
    let size = code.len() as u64;
    let mut dec = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let mut v = Vec::new();
    let mut ins = Instruction::default();
    while dec.can_decode() {
        dec.decode_out(&mut ins);
        if ins.is_invalid() {
            break;
        }
        let off = ins.ip() - ip;
        let returns = match ins.flow_control() {
            FlowControl::Return => true,
            FlowControl::UnconditionalBranch => {
                // a jump to outside the function: a tail call
                ins.op0_kind() == OpKind::NearBranch64 && {
                    let t = ins.near_branch_target();
                    t < ip || t >= ip + size
                }
            }
            _ => false,
        };
        v.push(Insn {
            offset: off,
            len: ins.len() as u8,
            returns,
            emulation: emulation(&ins),
        });
    }
    v
}

/// How the debugger can step over an instruction without single-stepping it.
pub fn emulation(ins: &Instruction) -> Emulation {
    match ins.code() {
        Code::Endbr64
        | Code::Nopd
        | Code::Nopq
        | Code::Nopw
        | Code::Nop_rm16
        | Code::Nop_rm32
        | Code::Nop_rm64 => Emulation::Skip,
        Code::Push_r64 => gpr(ins.op0_register()).map_or(Emulation::Step, Emulation::Push),
        Code::Mov_rm64_r64 | Code::Mov_r64_rm64
            if ins.op0_kind() == OpKind::Register && ins.op1_kind() == OpKind::Register =>
        {
            match (gpr(ins.op0_register()), gpr(ins.op1_register())) {
                (Some(d), Some(s)) => Emulation::MovReg(d, s),
                _ => Emulation::Step,
            }
        }
        Code::Sub_rm64_imm8 | Code::Sub_rm64_imm32
            if ins.op0_kind() == OpKind::Register && ins.op0_register() == Register::RSP =>
        {
            Emulation::SubRsp(ins.immediate(1) as i64)
        }
        Code::Add_rm64_imm8 | Code::Add_rm64_imm32
            if ins.op0_kind() == OpKind::Register && ins.op0_register() == Register::RSP =>
        {
            Emulation::SubRsp((ins.immediate(1) as i64).wrapping_neg())
        }
        Code::Retnq if ins.mnemonic() == Mnemonic::Ret => Emulation::Ret,
        _ => Emulation::Step,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_offsets_and_emulation() {
        // endbr64; push rbp; mov rbp,rsp; sub rsp,0x10; cmp edi,0; je +5; leave; ret;
        // jmp <outside>; nop
        let code = [
            0xf3, 0x0f, 0x1e, 0xfa, // endbr64
            0x55, // push rbp
            0x48, 0x89, 0xe5, // mov rbp,rsp
            0x48, 0x83, 0xec, 0x10, // sub rsp,0x10
            0x83, 0xff, 0x00, // cmp edi,0
            0x74, 0x02, // je +2
            0xc9, // leave
            0xc3, // ret
            0xe9, 0x00, 0x10, 0x00, 0x00, // jmp far outside
            0x90, // nop
        ];
        let v = function(&code, 0x1000);
        let offs: Vec<u64> = v.iter().map(|i| i.offset).collect();
        assert_eq!(offs, [0, 4, 5, 8, 12, 15, 17, 18, 19, 24]);
        let rets: Vec<u64> = v.iter().filter(|i| i.returns).map(|i| i.offset).collect();
        assert_eq!(rets, [18, 19]);
        assert_eq!(v[0].emulation, Emulation::Skip);
        assert_eq!(v[1].emulation, Emulation::Push(5));
        assert_eq!(v[2].emulation, Emulation::MovReg(5, 4));
        assert_eq!(v[3].emulation, Emulation::SubRsp(16));
        assert_eq!(v[4].emulation, Emulation::Step);
        assert_eq!(v[7].emulation, Emulation::Ret);
    }
}
