//! x86-64 decoding of a function's code (iced-x86): instruction boundaries for offset probes,
//! the places where a function returns (every `ret`, and jumps out of the function: tail
//! calls), and which instructions the debugger may emulate instead of single-stepping.

use iced_x86::{
    Code, ConditionCode, Decoder, DecoderOptions, Encoder, FlowControl, Instruction, Mnemonic,
    OpKind, Register,
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

/// The most bytes [`relocate`] writes for one instruction.
pub const MAX_RELOCATED: usize = 48;

/// `jmp qword [rip+0]` followed by the absolute target: a jump anywhere, 14 bytes.
fn jump_to(out: &mut Vec<u8>, target: u64) {
    out.extend_from_slice(&[0xff, 0x25, 0, 0, 0, 0]);
    out.extend_from_slice(&target.to_le_bytes());
}

/// Pushes `ret` as a return address without touching the flags or any register:
/// `push rax; mov rax, ret; xchg [rsp], rax`.
fn push_return(out: &mut Vec<u8>, ret: u64) {
    out.push(0x50);
    out.extend_from_slice(&[0x48, 0xb8]);
    out.extend_from_slice(&ret.to_le_bytes());
    out.extend_from_slice(&[0x48, 0x87, 0x04, 0x24]);
}

fn encode_at(ins: &Instruction, at: u64, out: &mut Vec<u8>) -> Option<()> {
    let mut enc = Encoder::new(64);
    enc.encode(ins, at).ok()?;
    out.extend_from_slice(&enc.take_buffer());
    Some(())
}

/// Code to run out of line, at address `at`, in place of the instruction `code` starts with
/// (at run-time address `ip`): the instruction re-encoded for its new address (RIP-relative
/// operands keep their targets), then a jump back to the instruction after it. Branches are
/// rewritten: `jmp rel` becomes an absolute jump, `jcc rel` a near `jcc` choosing between two
/// absolute jumps, `call rel` and `call r/m` push the original return address and jump. `ret`
/// runs as it is. `None` for what cannot be moved (a RIP-relative operand out of reach of
/// `at`, `loop`/`jrcxz`, an indirect call through `rsp`, far transfers, invalid code): the
/// debugger single-steps those in place.
pub fn relocate(code: &[u8], ip: u64, at: u64) -> Option<Vec<u8>> {
    let mut dec = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let ins = dec.decode();
    if ins.is_invalid() {
        return None;
    }
    let next = ins.next_ip();
    let mut out = Vec::with_capacity(MAX_RELOCATED);
    match ins.flow_control() {
        FlowControl::Next => {
            encode_at(&ins, at, &mut out)?;
            jump_to(&mut out, next);
        }
        FlowControl::Return if matches!(ins.code(), Code::Retnq | Code::Retnq_imm16) => {
            encode_at(&ins, at, &mut out)?;
        }
        FlowControl::UnconditionalBranch if ins.is_jmp_short_or_near() => {
            jump_to(&mut out, ins.near_branch_target());
        }
        FlowControl::ConditionalBranch if ins.is_jcc_short_or_near() => {
            let cc = ins.condition_code();
            if cc == ConditionCode::None {
                return None;
            }
            // jcc +14 (over the fall-through jump) to the taken jump
            out.extend_from_slice(&[0x0f, 0x80 + (cc as u8 - 1), 14, 0, 0, 0]);
            jump_to(&mut out, next);
            jump_to(&mut out, ins.near_branch_target());
        }
        FlowControl::Call if ins.is_call_near() => {
            push_return(&mut out, next);
            jump_to(&mut out, ins.near_branch_target());
        }
        FlowControl::IndirectCall if ins.is_call_near_indirect() => {
            // the operand is read after the push: not when it depends on rsp
            let uses_rsp = ins.op0_kind() == OpKind::Memory
                && (ins.memory_base() == Register::RSP || ins.memory_index() == Register::RSP)
                || ins.op0_kind() == OpKind::Register && ins.op0_register() == Register::RSP;
            if uses_rsp || ins.code() != Code::Call_rm64 {
                return None;
            }
            push_return(&mut out, next);
            let mut jmp = ins;
            jmp.set_code(Code::Jmp_rm64);
            encode_at(&jmp, at + out.len() as u64, &mut out)?;
        }
        FlowControl::IndirectBranch if ins.is_jmp_near_indirect() => {
            encode_at(&ins, at, &mut out)?;
        }
        _ => return None,
    }
    (out.len() <= MAX_RELOCATED).then_some(out)
}

/// The first instructions of the function whose code `code` is (at run-time address `ip`,
/// `size` bytes long by its symbol; `code` may go on past it) that cover at least `min` bytes,
/// re-encoded to run at `at`, then a jump to the instruction after them: the trampoline of a
/// hook that overwrites those bytes with a jump. A function shorter than `min` qualifies when
/// its last instruction (a `ret` or a jump) comes first and only padding (`nop`, `int3`)
/// follows it up to `min` (the caller checks that no other function starts there). Returns
/// the code and how many bytes the hook may overwrite, or why the function cannot be hooked
/// safely: a branch, call or `ret` before the last covered instruction, a RIP-relative operand
/// that cannot reach from `at`, or some branch of the function landing inside the covered
/// bytes (it would land in the middle of the jump).
pub fn relocate_prologue(
    code: &[u8],
    ip: u64,
    at: u64,
    min: usize,
    size: usize,
) -> Result<(Vec<u8>, usize), &'static str> {
    let mut dec = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let mut all = Vec::new();
    while dec.can_decode() && dec.position() < size.max(min) {
        let ins = dec.decode();
        if ins.is_invalid() {
            break;
        }
        all.push(ins);
    }
    let mut out = Vec::with_capacity(64);
    let mut covered = 0usize;
    let mut ended = false;
    for ins in &all {
        if covered >= min || ended {
            break;
        }
        covered += ins.len();
        let last = covered >= min || covered >= size;
        match ins.flow_control() {
            FlowControl::Next => {
                encode_at(ins, at + out.len() as u64, &mut out)
                    .ok_or("a RIP-relative operand out of reach of the trampoline")?;
            }
            FlowControl::UnconditionalBranch if ins.is_jmp_short_or_near() && last => {
                jump_to(&mut out, ins.near_branch_target());
                ended = true;
            }
            FlowControl::Return
                if last && matches!(ins.code(), Code::Retnq | Code::Retnq_imm16) =>
            {
                encode_at(ins, at + out.len() as u64, &mut out)
                    .ok_or("its return cannot be moved")?;
                ended = true;
            }
            FlowControl::Return => return Err("it returns within its first bytes"),
            _ => return Err("a branch or call within its first bytes"),
        }
    }
    if ended && covered < min {
        // the function ends first: what follows up to `min` must be padding
        let rest = code.get(covered..).ok_or("it is shorter than a jump")?;
        let mut pad = Decoder::with_ip(64, rest, ip + covered as u64, DecoderOptions::NONE);
        let mut padded = covered;
        while padded < min && pad.can_decode() {
            let ins = pad.decode();
            if ins.is_invalid() || !(ins.mnemonic() == Mnemonic::Nop || ins.code() == Code::Int3) {
                break;
            }
            padded += ins.len();
        }
        if padded < min {
            return Err("it is shorter than a jump");
        }
        covered = min;
    }
    if covered < min {
        return Err("it is shorter than a jump");
    }
    let (lo, hi) = (ip + 1, ip + covered as u64);
    let lands_inside = all.iter().any(|i| {
        matches!(
            i.op0_kind(),
            OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
        ) && (lo..hi).contains(&i.near_branch_target())
    });
    if lands_inside {
        return Err("a branch lands within its first bytes");
    }
    if !ended {
        jump_to(&mut out, ip + covered as u64);
    }
    Ok((out, covered))
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

    /// Decodes relocated code at `at`: each instruction with its memory or branch target.
    fn listing(code: &[u8], at: u64) -> Vec<Instruction> {
        let mut dec = Decoder::with_ip(64, code, at, DecoderOptions::NONE);
        let mut v = Vec::new();
        while dec.can_decode() {
            v.push(dec.decode());
        }
        v
    }

    /// The absolute target of `jmp [rip+0]` followed by 8 bytes, at `i` of `code`.
    fn abs_jump(code: &[u8], i: usize) -> u64 {
        assert_eq!(&code[i..i + 6], &[0xff, 0x25, 0, 0, 0, 0]);
        u64::from_le_bytes(code[i + 6..i + 14].try_into().unwrap())
    }

    #[test]
    fn relocates_rip_relative_operands() {
        // lea rax, [rip+0x100] at 0x40_0000: the operand is 0x40_0107
        let code = [0x48, 0x8d, 0x05, 0x00, 0x01, 0x00, 0x00];
        let at = 0x7000_0000;
        let r = relocate(&code, 0x40_0000, at).unwrap();
        let l = listing(&r[..r.len() - 14], at);
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].code(), Code::Lea_r64_m);
        assert!(l[0].is_ip_rel_memory_operand());
        assert_eq!(l[0].ip_rel_memory_address(), 0x40_0107);
        assert_eq!(abs_jump(&r, r.len() - 14), 0x40_0007);
        // out of reach of a RIP-relative displacement
        assert_eq!(relocate(&code, 0x40_0000, 0x7f00_0000_0000), None);
    }

    #[test]
    fn relocates_plain_instructions_and_ret() {
        // push rbp: itself, then back
        let r = relocate(&[0x55], 0x1000, 0x9000).unwrap();
        assert_eq!(r[0], 0x55);
        assert_eq!(abs_jump(&r, 1), 0x1001);
        assert_eq!(r.len(), 15);
        // sub rsp, 0x10
        let r = relocate(&[0x48, 0x83, 0xec, 0x10], 0x1000, 0x9000).unwrap();
        assert_eq!(&r[..4], &[0x48, 0x83, 0xec, 0x10]);
        assert_eq!(abs_jump(&r, 4), 0x1004);
        // ret and ret 8: as they are, nothing after
        assert_eq!(relocate(&[0xc3], 0x1000, 0x9000).unwrap(), [0xc3]);
        assert_eq!(
            relocate(&[0xc2, 0x08, 0x00], 0x1000, 0x9000).unwrap(),
            [0xc2, 0x08, 0x00]
        );
    }

    #[test]
    fn rewrites_branches_and_calls() {
        // jmp rel32 to 0x2000
        let r = relocate(&[0xe9, 0xfb, 0x0f, 0x00, 0x00], 0x1000, 0x9000).unwrap();
        assert_eq!(abs_jump(&r, 0), 0x2000);
        // je +0x10 (short): jcc near to the taken jump, fall-through first
        let r = relocate(&[0x74, 0x10], 0x1000, 0x9000).unwrap();
        assert_eq!(&r[..6], &[0x0f, 0x84, 14, 0, 0, 0]);
        assert_eq!(abs_jump(&r, 6), 0x1002);
        assert_eq!(abs_jump(&r, 20), 0x1012);
        // call rel32 to 0x3000 from 0x1000: pushes 0x1005, then jumps
        let r = relocate(&[0xe8, 0xfb, 0x1f, 0x00, 0x00], 0x1000, 0x9000).unwrap();
        let l = listing(&r[..r.len() - 14], 0x9000);
        let codes: Vec<Code> = l.iter().map(|i| i.code()).collect();
        assert_eq!(
            codes,
            [Code::Push_r64, Code::Mov_r64_imm64, Code::Xchg_rm64_r64]
        );
        assert_eq!(l[1].immediate64(), 0x1005);
        assert_eq!(abs_jump(&r, r.len() - 14), 0x3000);
        // call [rip+0x10]: the same memory operand, as a jmp
        let r = relocate(&[0xff, 0x15, 0x10, 0x00, 0x00, 0x00], 0x1000, 0x9000).unwrap();
        let l = listing(&r, 0x9000);
        assert_eq!(l[1].immediate64(), 0x1006);
        assert_eq!(l[3].code(), Code::Jmp_rm64);
        assert_eq!(l[3].ip_rel_memory_address(), 0x1016);
        // call [rsp+8], loop, int3: not moved
        assert_eq!(relocate(&[0xff, 0x54, 0x24, 0x08], 0x1000, 0x9000), None);
        assert_eq!(relocate(&[0xe2, 0x10], 0x1000, 0x9000), None);
        assert_eq!(relocate(&[0xcc], 0x1000, 0x9000), None);
    }

    #[test]
    fn prologue_relocation() {
        // endbr64; push rbp; mov rbp,rsp; mov eax,[rip+0x10]; ret
        let code = [
            0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0x8b, 0x05, 0x10, 0, 0, 0, 0xc3,
        ];
        let (out, covered) = relocate_prologue(&code, 0x1000, 0x2000, 5, code.len()).unwrap();
        assert_eq!(covered, 5);
        // the two instructions as they were, then jmp [rip+0] to 0x1005
        assert_eq!(&out[..5], &code[..5]);
        assert_eq!(&out[5..11], &[0xff, 0x25, 0, 0, 0, 0]);
        assert_eq!(u64::from_le_bytes(out[11..19].try_into().unwrap()), 0x1005);
        // covering the RIP-relative load: re-encoded for its new place
        let (out, covered) = relocate_prologue(&code, 0x1000, 0x2000, 9, code.len()).unwrap();
        assert_eq!(covered, 14);
        // four instructions, then the jump back at the end
        let moved = function(&out, 0x2000);
        assert_eq!(moved[4].offset as usize, out.len() - 14);
        let mut dec = Decoder::with_ip(
            64,
            &out[moved[3].offset as usize..],
            0x2000 + moved[3].offset,
            DecoderOptions::NONE,
        );
        // the load still reads 0x1000 + 14 + 0x10
        assert_eq!(dec.decode().memory_displacement64(), 0x101e);
        // too short, a ret in the way, a jump back into the covered bytes
        assert!(relocate_prologue(&[0x31, 0xc0, 0xc3], 0x1000, 0x2000, 5, 3).is_err());
        // xor eax,eax; ret; then padding: the hook covers the padding, the ret moves
        let short = [0x31, 0xc0, 0xc3, 0x66, 0x90, 0xcc, 0xcc];
        let (out, covered) = relocate_prologue(&short, 0x1000, 0x2000, 5, 3).unwrap();
        assert_eq!((out.as_slice(), covered), (&short[..3], 5));
        // but not when code follows, nor when the ret is not the function's end
        assert!(
            relocate_prologue(&[0x31, 0xc0, 0xc3, 0x31, 0xc0, 0xc3], 0x1000, 0x2000, 5, 3).is_err()
        );
        assert!(relocate_prologue(&short, 0x1000, 0x2000, 5, 7).is_err());
        // nop; nop; nop; nop; nop; jmp -4 (to 0x1002)
        let back = [0x90, 0x90, 0x90, 0x90, 0x90, 0xeb, 0xfb];
        assert_eq!(
            relocate_prologue(&back, 0x1000, 0x2000, 5, back.len()).unwrap_err(),
            "a branch lands within its first bytes"
        );
    }
}
