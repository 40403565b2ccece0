//! Windows x64 stack unwinding from a PE image's exception directory: `.pdata` holds one
//! RUNTIME_FUNCTION (begin, end, UNWIND_INFO RVAs) per function that touches the stack, and
//! each UNWIND_INFO (in `.xdata`) lists the prolog's operations as unwind codes, last first.
//! Undoing them in that order gives the caller's `rsp`, its non-volatile registers and the
//! return address. A function without an entry is a leaf: its return address is at `[rsp]`.
//!
//! Covered: UWOP_PUSH_NONVOL, ALLOC_LARGE, ALLOC_SMALL, SET_FPREG, SAVE_NONVOL(_FAR),
//! SAVE_XMM128(_FAR) (XMM registers are not tracked, the slots are skipped), PUSH_MACHFRAME,
//! version 2's EPILOG codes (skipped), chained unwind info, codes of a prolog only partly run
//! (by code offset), and an epilog in progress (recognised from the code as the x64 rules
//! shape it: `add rsp, N` or `lea rsp, [reg+N]`, `pop`s, `ret` or a jump out). Platform-neutral:
//! the Windows debugger's `ustack()` uses it; Linux tests decode mingw-built images.

use iced_x86::{Code, Decoder, DecoderOptions, Instruction, OpKind, Register};

/// Register numbers of the unwind codes (and the order of [`Win64Regs::gpr`]): rax rcx rdx
/// rbx rsp rbp rsi rdi r8..r15.
const RSP: usize = 4;
const RBP: usize = 5;

const UNW_FLAG_CHAININFO: u8 = 0x4;

const UWOP_PUSH_NONVOL: u8 = 0;
const UWOP_ALLOC_LARGE: u8 = 1;
const UWOP_ALLOC_SMALL: u8 = 2;
const UWOP_SET_FPREG: u8 = 3;
const UWOP_SAVE_NONVOL: u8 = 4;
const UWOP_SAVE_NONVOL_FAR: u8 = 5;
const UWOP_EPILOG: u8 = 6;
const UWOP_SPARE_CODE: u8 = 7;
const UWOP_SAVE_XMM128: u8 = 8;
const UWOP_SAVE_XMM128_FAR: u8 = 9;
const UWOP_PUSH_MACHFRAME: u8 = 10;

/// The integer registers of one frame and its instruction pointer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Win64Regs {
    pub gpr: [u64; 16],
    pub rip: u64,
}

/// One `.pdata` entry: RVAs of the function's range and of its UNWIND_INFO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuntimeFunction {
    pub begin: u32,
    pub end: u32,
    pub unwind: u32,
}

/// One decoded unwind code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnwindOp {
    PushNonvol(u8),
    Alloc(u32),
    SetFpreg,
    SaveNonvol {
        reg: u8,
        offset: u32,
    },
    SaveXmm128 {
        reg: u8,
        offset: u32,
    },
    PushMachframe {
        error_code: bool,
    },
    /// Version 2 epilog descriptions and spare slots: nothing to undo.
    Other(u8),
}

/// A decoded UNWIND_INFO.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnwindInfo {
    pub version: u8,
    pub flags: u8,
    pub prolog_size: u8,
    pub frame_register: u8,
    /// Scaled by 16 already.
    pub frame_offset: u32,
    /// (offset in the prolog just after the operation, operation), in the order stored: the
    /// prolog's last operation first.
    pub codes: Vec<(u8, UnwindOp)>,
    /// The entry whose unwind info continues this one (UNW_FLAG_CHAININFO).
    pub chained: Option<RuntimeFunction>,
}

fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}

/// Decodes the UNWIND_INFO at the start of `b` (its codes and, when chained, the entry after
/// them); `None` for a truncated or unknown record.
pub fn parse_unwind_info(b: &[u8]) -> Option<UnwindInfo> {
    let version = b.first()? & 7;
    let flags = b[0] >> 3;
    if !(1..=2).contains(&version) {
        return None;
    }
    let prolog_size = *b.get(1)?;
    let count = *b.get(2)? as usize;
    let frame_register = b.get(3)? & 0xf;
    let frame_offset = ((b[3] >> 4) as u32) * 16;
    let slot = |i: usize| u16_at(b, 4 + i * 2);
    let mut codes = Vec::with_capacity(count);
    let mut i = 0;
    while i < count {
        let c = slot(i)?;
        let offset = (c & 0xff) as u8;
        let op = ((c >> 8) & 0xf) as u8;
        let info = (c >> 12) as u8;
        let (decoded, used) = match op {
            UWOP_PUSH_NONVOL => (UnwindOp::PushNonvol(info), 1),
            UWOP_ALLOC_LARGE if info == 0 => (UnwindOp::Alloc(slot(i + 1)? as u32 * 8), 2),
            UWOP_ALLOC_LARGE => (
                UnwindOp::Alloc(slot(i + 1)? as u32 | (slot(i + 2)? as u32) << 16),
                3,
            ),
            UWOP_ALLOC_SMALL => (UnwindOp::Alloc(info as u32 * 8 + 8), 1),
            UWOP_SET_FPREG => (UnwindOp::SetFpreg, 1),
            UWOP_SAVE_NONVOL => (
                UnwindOp::SaveNonvol {
                    reg: info,
                    offset: slot(i + 1)? as u32 * 8,
                },
                2,
            ),
            UWOP_SAVE_NONVOL_FAR => (
                UnwindOp::SaveNonvol {
                    reg: info,
                    offset: slot(i + 1)? as u32 | (slot(i + 2)? as u32) << 16,
                },
                3,
            ),
            UWOP_EPILOG => (UnwindOp::Other(op), 2),
            UWOP_SPARE_CODE => (UnwindOp::Other(op), 3),
            UWOP_SAVE_XMM128 => (
                UnwindOp::SaveXmm128 {
                    reg: info,
                    offset: slot(i + 1)? as u32 * 16,
                },
                2,
            ),
            UWOP_SAVE_XMM128_FAR => (
                UnwindOp::SaveXmm128 {
                    reg: info,
                    offset: slot(i + 1)? as u32 | (slot(i + 2)? as u32) << 16,
                },
                3,
            ),
            UWOP_PUSH_MACHFRAME => (
                UnwindOp::PushMachframe {
                    error_code: info != 0,
                },
                1,
            ),
            _ => return None,
        };
        codes.push((offset, decoded));
        i += used;
    }
    let chained = if flags & UNW_FLAG_CHAININFO != 0 {
        // after the code slots, rounded up to an even count
        let at = 4 + count.div_ceil(2) * 2 * 2;
        Some(RuntimeFunction {
            begin: u32_at(b, at)?,
            end: u32_at(b, at + 4)?,
            unwind: u32_at(b, at + 8)?,
        })
    } else {
        None
    };
    Some(UnwindInfo {
        version,
        flags,
        prolog_size,
        frame_register,
        frame_offset,
        codes,
        chained,
    })
}

/// The `.pdata` entries of a PE image, sorted by begin RVA.
#[derive(Clone, Debug, Default)]
pub struct UnwindTable {
    pub functions: Vec<RuntimeFunction>,
}

impl UnwindTable {
    /// Reads the exception directory (`.pdata`) of a PE image; `None` when it has none.
    pub fn parse(file: &object::File<'_>) -> Option<UnwindTable> {
        use object::{Object, ObjectSection};
        let sec = file.section_by_name(".pdata")?;
        let data = sec.data().ok()?;
        let mut functions: Vec<RuntimeFunction> = data
            .chunks_exact(12)
            .filter_map(|e| {
                let f = RuntimeFunction {
                    begin: u32_at(e, 0)?,
                    end: u32_at(e, 4)?,
                    unwind: u32_at(e, 8)?,
                };
                (f.begin != 0 && f.end > f.begin).then_some(f)
            })
            .collect();
        functions.sort_unstable_by_key(|f| f.begin);
        Some(UnwindTable { functions })
    }

    /// The entry whose range holds `rva`.
    pub fn lookup(&self, rva: u32) -> Option<RuntimeFunction> {
        let i = self.functions.partition_point(|f| f.begin <= rva);
        let f = *self.functions.get(i.checked_sub(1)?)?;
        (rva < f.end).then_some(f)
    }

    /// Steps from a frame at `rva` (of this image) to its caller: `regs` become the caller's.
    /// `innermost`: `regs.rip` is where the thread stopped (not a return address), so it may be
    /// inside a prolog or an epilog. Returns false when the frame cannot be unwound (a stack
    /// read failed, damaged unwind info).
    /// `bytes` gives the image's bytes at an RVA (`len` of them) when the file holds them.
    pub fn step<'d>(
        &self,
        bytes: &dyn Fn(u32, usize) -> Option<&'d [u8]>,
        rva: u32,
        innermost: bool,
        regs: &mut Win64Regs,
        read: &dyn Fn(u64) -> Option<u64>,
    ) -> bool {
        // a return address points after its call: the call itself is what belongs to the
        // function (a call can be the last instruction of a function that does not return)
        let lookup = if innermost { rva } else { rva.wrapping_sub(1) };
        let Some(f) = self.lookup(lookup) else {
            // a leaf function: nothing pushed, the return address is on top
            return pop_return(regs, read);
        };
        if let Some(code) = bytes(rva, 64) {
            if let Some(done) = epilog(code, regs, read) {
                return done;
            }
        }
        let mut entry = f;
        let mut prolog_offset = Some(rva.wrapping_sub(f.begin));
        // chained entries: bounded, a loop in damaged data must end
        for _ in 0..32 {
            let Some(info) = unwind_info_at(bytes, entry.unwind) else {
                return false;
            };
            match undo_codes(&info, prolog_offset, regs, read) {
                Undone::Failed => return false,
                Undone::Machframe => return true,
                Undone::Done => {}
            }
            match info.chained {
                Some(next) => {
                    entry = next;
                    // the chained (primary) function's prolog has run in full
                    prolog_offset = None;
                }
                None => break,
            }
        }
        pop_return(regs, read)
    }
}

/// The UNWIND_INFO at `rva` of an image.
pub fn unwind_info_at<'d>(
    bytes: &dyn Fn(u32, usize) -> Option<&'d [u8]>,
    rva: u32,
) -> Option<UnwindInfo> {
    let h = bytes(rva, 4)?;
    let codes = 4 + h[2] as usize * 2;
    // the chained entry after the codes, when there is one (the record may end the section)
    let b = bytes(rva, codes + 16).or_else(|| bytes(rva, codes))?;
    parse_unwind_info(b)
}

fn pop_return(regs: &mut Win64Regs, read: &dyn Fn(u64) -> Option<u64>) -> bool {
    match read(regs.gpr[RSP]) {
        Some(ra) => {
            regs.rip = ra;
            regs.gpr[RSP] = regs.gpr[RSP].wrapping_add(8);
            true
        }
        None => false,
    }
}

enum Undone {
    Done,
    /// A machine frame gave rip and rsp: no return address to pop.
    Machframe,
    Failed,
}

/// Undoes the operations of one UNWIND_INFO. `prolog_offset`: how far into the prolog the
/// thread is (operations whose code offset lies beyond it have not run), `None` when the whole
/// prolog has run.
fn undo_codes(
    info: &UnwindInfo,
    prolog_offset: Option<u32>,
    regs: &mut Win64Regs,
    read: &dyn Fn(u64) -> Option<u64>,
) -> Undone {
    let ran = |code_offset: u8| match prolog_offset {
        Some(o) if o < info.prolog_size as u32 => code_offset as u32 <= o,
        _ => true,
    };
    // the establisher frame: where SAVE_NONVOL/SAVE_XMM128 offsets count from
    let fp_set = info.frame_register != 0
        && info
            .codes
            .iter()
            .any(|(o, c)| *c == UnwindOp::SetFpreg && ran(*o));
    let frame = if fp_set {
        regs.gpr[info.frame_register as usize].wrapping_sub(info.frame_offset as u64)
    } else {
        regs.gpr[RSP]
    };
    for (offset, op) in &info.codes {
        if !ran(*offset) {
            continue;
        }
        match *op {
            UnwindOp::PushNonvol(r) => {
                let Some(v) = read(regs.gpr[RSP]) else {
                    return Undone::Failed;
                };
                regs.gpr[(r & 15) as usize] = v;
                regs.gpr[RSP] = regs.gpr[RSP].wrapping_add(8);
            }
            UnwindOp::Alloc(n) => regs.gpr[RSP] = regs.gpr[RSP].wrapping_add(n as u64),
            UnwindOp::SetFpreg => {
                if info.frame_register == 0 {
                    return Undone::Failed;
                }
                regs.gpr[RSP] =
                    regs.gpr[info.frame_register as usize].wrapping_sub(info.frame_offset as u64);
            }
            UnwindOp::SaveNonvol { reg, offset } => {
                let Some(v) = read(frame.wrapping_add(offset as u64)) else {
                    return Undone::Failed;
                };
                regs.gpr[(reg & 15) as usize] = v;
            }
            UnwindOp::SaveXmm128 { .. } | UnwindOp::Other(_) => {}
            UnwindOp::PushMachframe { error_code } => {
                // [rsp] (after the error code): rip, cs, rflags, rsp, ss
                let at = regs.gpr[RSP].wrapping_add(if error_code { 8 } else { 0 });
                let (Some(rip), Some(rsp)) = (read(at), read(at.wrapping_add(24))) else {
                    return Undone::Failed;
                };
                regs.rip = rip;
                regs.gpr[RSP] = rsp;
                return Undone::Machframe;
            }
        }
    }
    Undone::Done
}

/// When the code at `regs.rip` is an epilog in the shape x64 epilogs must have (optionally
/// `add rsp, imm` or `lea rsp, [reg+disp]`, then `pop reg`s, then `ret` or a jump), runs the
/// rest of it: `Some(true)` with the caller's registers, `Some(false)` when a read failed,
/// `None` when this is not an epilog.
fn epilog(code: &[u8], regs: &mut Win64Regs, read: &dyn Fn(u64) -> Option<u64>) -> Option<bool> {
    let mut dec = Decoder::with_ip(64, code, regs.rip, DecoderOptions::NONE);
    let mut ins = Instruction::default();
    let mut r = *regs;
    let mut first = true;
    while dec.can_decode() {
        dec.decode_out(&mut ins);
        match ins.code() {
            Code::Add_rm64_imm8 | Code::Add_rm64_imm32
                if first
                    && ins.op0_kind() == OpKind::Register
                    && ins.op0_register() == Register::RSP =>
            {
                r.gpr[RSP] = r.gpr[RSP].wrapping_add(ins.immediate(1));
            }
            Code::Lea_r64_m if first && ins.op0_register() == Register::RSP => {
                let base = gpr_index(ins.memory_base())?;
                if ins.memory_index() != Register::None {
                    return None;
                }
                r.gpr[RSP] = r.gpr[base].wrapping_add(ins.memory_displacement64());
            }
            Code::Pop_r64 => {
                let reg = gpr_index(ins.op0_register())?;
                let Some(v) = read(r.gpr[RSP]) else {
                    return Some(false);
                };
                r.gpr[reg] = v;
                r.gpr[RSP] = r.gpr[RSP].wrapping_add(8);
            }
            Code::Retnq | Code::Retnq_imm16 => {
                if !pop_return(&mut r, read) {
                    return Some(false);
                }
                *regs = r;
                return Some(true);
            }
            // a tail call out of the function ends an epilog too (only after its pops)
            Code::Jmp_rel32_64 | Code::Jmp_rm64 if !first => {
                if !pop_return(&mut r, read) {
                    return Some(false);
                }
                *regs = r;
                return Some(true);
            }
            _ => return None,
        }
        first = false;
    }
    None
}

/// The unwind register number of an iced 64-bit general register.
fn gpr_index(r: Register) -> Option<usize> {
    Some(match r {
        Register::RAX => 0,
        Register::RCX => 1,
        Register::RDX => 2,
        Register::RBX => 3,
        Register::RSP => 4,
        Register::RBP => 5,
        Register::RSI => 6,
        Register::RDI => 7,
        Register::R8 => 8,
        Register::R9 => 9,
        Register::R10 => 10,
        Register::R11 => 11,
        Register::R12 => 12,
        Register::R13 => 13,
        Register::R14 => 14,
        Register::R15 => 15,
        _ => return None,
    })
}

/// Walks a Windows x64 stack, innermost first, into `out` (at most `max` frames). `step` moves
/// `regs` to the caller of the frame at `regs.rip` (its second argument: the innermost frame)
/// and answers `Some(false)` when that fails, `None` when no image with unwind data holds the
/// address: then the `rbp` chain is followed. `at_edge`: the innermost function is at its
/// entry or its `ret`, so its return address is at `[rsp]`.
pub fn walk(
    start: Win64Regs,
    at_edge: bool,
    max: usize,
    step: &dyn Fn(&mut Win64Regs, bool) -> Option<bool>,
    read: &dyn Fn(u64) -> Option<u64>,
    out: &mut Vec<u64>,
) {
    out.clear();
    let mut r = start;
    out.push(r.rip);
    let mut innermost = true;
    while out.len() < max {
        let mut n = r;
        let ok = if innermost && at_edge {
            pop_return(&mut n, read)
        } else {
            match step(&mut n, innermost) {
                Some(ok) => ok,
                None => {
                    // no unwind data: the frame pointer chain
                    let bp = r.gpr[RBP];
                    if bp == 0 || !bp.is_multiple_of(8) || bp < r.gpr[RSP] {
                        false
                    } else {
                        match (read(bp), read(bp.wrapping_add(8))) {
                            (Some(saved), Some(ra)) => {
                                n.gpr[RBP] = saved;
                                n.rip = ra;
                                n.gpr[RSP] = bp.wrapping_add(16);
                                true
                            }
                            _ => false,
                        }
                    }
                }
            }
        };
        // the stack grows down: a caller's frame is above its callee's
        if !ok || n.rip == 0 || n.gpr[RSP] <= r.gpr[RSP] {
            break;
        }
        out.push(n.rip);
        r = n;
        innermost = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn mem(words: &[(u64, u64)]) -> impl Fn(u64) -> Option<u64> {
        let m: HashMap<u64, u64> = words.iter().copied().collect();
        move |a| m.get(&a).copied()
    }

    /// UNWIND_INFO bytes: version 1, flags, prolog size, frame register/offset, codes.
    fn info(flags: u8, prolog: u8, frame: u8, codes: &[u16], chained: Option<[u32; 3]>) -> Vec<u8> {
        let mut b = vec![1 | flags << 3, prolog, codes.len() as u8, frame];
        for c in codes {
            b.extend_from_slice(&c.to_le_bytes());
        }
        if codes.len() % 2 == 1 {
            b.extend_from_slice(&[0, 0]);
        }
        if let Some(c) = chained {
            for v in c {
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
        b
    }

    fn code(offset: u8, op: u8, info: u8) -> u16 {
        offset as u16 | (op as u16) << 8 | (info as u16) << 12
    }

    #[test]
    fn decodes_every_operation() {
        let b = info(
            0,
            0x20,
            0x35, // rbp, offset 3 * 16
            &[
                code(0x1c, UWOP_SAVE_XMM128_FAR, 6),
                0x0010,
                0x0001,
                code(0x18, UWOP_SAVE_XMM128, 7),
                3,
                code(0x14, UWOP_SAVE_NONVOL_FAR, 3),
                0x1000,
                0,
                code(0x10, UWOP_SAVE_NONVOL, 6),
                2,
                code(0x0c, UWOP_SET_FPREG, 0),
                code(0x08, UWOP_ALLOC_LARGE, 1),
                0x0000,
                0x0002,
                code(0x05, UWOP_ALLOC_LARGE, 0),
                0x0100,
                code(0x02, UWOP_ALLOC_SMALL, 3),
                code(0x01, UWOP_PUSH_NONVOL, 5),
                code(0x00, UWOP_PUSH_MACHFRAME, 1),
            ],
            None,
        );
        let u = parse_unwind_info(&b).unwrap();
        assert_eq!(
            (u.frame_register, u.frame_offset, u.prolog_size),
            (5, 48, 0x20)
        );
        assert_eq!(
            u.codes.iter().map(|(_, c)| *c).collect::<Vec<_>>(),
            vec![
                UnwindOp::SaveXmm128 {
                    reg: 6,
                    offset: 0x10010
                },
                UnwindOp::SaveXmm128 { reg: 7, offset: 48 },
                UnwindOp::SaveNonvol {
                    reg: 3,
                    offset: 0x1000
                },
                UnwindOp::SaveNonvol { reg: 6, offset: 16 },
                UnwindOp::SetFpreg,
                UnwindOp::Alloc(0x20000),
                UnwindOp::Alloc(0x800),
                UnwindOp::Alloc(32),
                UnwindOp::PushNonvol(5),
                UnwindOp::PushMachframe { error_code: true },
            ]
        );
        // truncated and unknown versions are refused
        assert!(parse_unwind_info(&b[..b.len() - 4]).is_none());
        assert!(parse_unwind_info(&[3, 0, 0, 0]).is_none());
    }

    /// An image of two functions: f (0x1000..0x1040) pushes rbx, allocates 0x28 and sets rbp
    /// as frame register at rsp+0x10 (its prolog: push rbx @1, sub rsp,0x28 @5,
    /// lea rbp,[rsp+0x10] @10), saving rsi at frame+0x18; g (0x2000..0x2100) is chained to f's
    /// info after its own push r12.
    fn image() -> (UnwindTable, HashMap<u32, Vec<u8>>) {
        let f_info = info(
            0,
            10,
            0x15,
            &[
                code(10, UWOP_SAVE_NONVOL, 6),
                3,
                code(10, UWOP_SET_FPREG, 0),
                code(5, UWOP_ALLOC_SMALL, 4),
                code(1, UWOP_PUSH_NONVOL, 3),
            ],
            None,
        );
        let g_info = info(
            UNW_FLAG_CHAININFO,
            2,
            0,
            &[code(2, UWOP_PUSH_NONVOL, 12)],
            Some([0x1000, 0x1040, 0x5000]),
        );
        let mut bytes = HashMap::new();
        bytes.insert(0x5000, f_info);
        bytes.insert(0x5100, g_info);
        // code bytes: nop-filled bodies, so no epilog is recognised inside them
        bytes.insert(0x1000, vec![0x90; 0x40]);
        bytes.insert(0x2000, vec![0x90; 0x100]);
        let table = UnwindTable {
            functions: vec![
                RuntimeFunction {
                    begin: 0x1000,
                    end: 0x1040,
                    unwind: 0x5000,
                },
                RuntimeFunction {
                    begin: 0x2000,
                    end: 0x2100,
                    unwind: 0x5100,
                },
            ],
        };
        (table, bytes)
    }

    fn lookup_bytes<'a>(
        m: &'a HashMap<u32, Vec<u8>>,
    ) -> impl Fn(u32, usize) -> Option<&'a [u8]> + 'a {
        move |rva, len| {
            m.iter().find_map(|(start, b)| {
                let o = rva.checked_sub(*start)? as usize;
                b.get(o..).map(|s| &s[..len.min(s.len())])
            })
        }
    }

    #[test]
    fn undoes_prologs_fully_and_partly_and_chains() {
        let (table, bytes) = image();
        let b = lookup_bytes(&bytes);
        // in f's body: rbp = rsp + 0x10; frame = rbp - 0x10 = 0x7f00; rsi saved at
        // frame + 0x18; the 0x28 allocation then rbx's push, then the return address
        let read = mem(&[(0x7f18, 0x66), (0x7f28, 0xbb), (0x7f30, 0x40_3000)]);
        let mut r = Win64Regs {
            rip: 0x1020,
            ..Default::default()
        };
        r.gpr[RSP] = 0x7f00;
        r.gpr[RBP] = 0x7f10;
        assert!(table.step(&b, 0x1020, true, &mut r, &read));
        assert_eq!(
            (r.rip, r.gpr[RSP], r.gpr[3], r.gpr[6]),
            (0x40_3000, 0x7f38, 0xbb, 0x66)
        );
        // at offset 1 (after push rbx, before the allocation): only the push is undone
        let read = mem(&[(0x7f00, 0xbb), (0x7f08, 0x40_3000)]);
        let mut r = Win64Regs {
            rip: 0x1001,
            ..Default::default()
        };
        r.gpr[RSP] = 0x7f00;
        assert!(table.step(&b, 0x1001, true, &mut r, &read));
        assert_eq!((r.rip, r.gpr[RSP], r.gpr[3]), (0x40_3000, 0x7f10, 0xbb));
        // g: its own push r12, then all of f's prolog (chained), then the return address
        let read = mem(&[
            (0x7f00, 0x12), // r12 (pushed last, popped first)
            (0x7f08 + 0x18, 0x66),
            (0x7f08 + 0x28, 0xbb),
            (0x7f08 + 0x30, 0x40_4000),
        ]);
        let mut r = Win64Regs {
            rip: 0x2050,
            ..Default::default()
        };
        r.gpr[RSP] = 0x7f00;
        r.gpr[RBP] = 0x7f08 + 0x10; // frame = rbp - 0x10, just above r12's slot
        assert!(table.step(&b, 0x2050, false, &mut r, &read));
        assert_eq!(r.gpr[12], 0x12);
        assert_eq!((r.rip, r.gpr[3]), (0x40_4000, 0xbb));
        // a leaf (no entry): the return address is on top
        let read = mem(&[(0x7f00, 0x40_5000)]);
        let mut r = Win64Regs {
            rip: 0x3000,
            ..Default::default()
        };
        r.gpr[RSP] = 0x7f00;
        assert!(table.step(&b, 0x3000, true, &mut r, &read));
        assert_eq!((r.rip, r.gpr[RSP]), (0x40_5000, 0x7f08));
    }

    #[test]
    fn epilogs_and_machine_frames() {
        // add rsp, 0x28; pop rbx; pop rsi; ret
        let code = [0x48, 0x83, 0xc4, 0x28, 0x5b, 0x5e, 0xc3];
        let read = mem(&[(0x7f28, 0xb), (0x7f30, 0x5), (0x7f38, 0x40_1000)]);
        let mut r = Win64Regs::default();
        r.gpr[RSP] = 0x7f00;
        assert_eq!(epilog(&code, &mut r, &read), Some(true));
        assert_eq!(
            (r.rip, r.gpr[RSP], r.gpr[3], r.gpr[6]),
            (0x40_1000, 0x7f40, 0xb, 0x5)
        );
        // not an epilog: a call
        assert_eq!(epilog(&[0xe8, 0, 0, 0, 0], &mut r, &read), None);
        // a machine frame (an interrupt's): rip at [rsp], rsp at [rsp + 24]
        let i = info(0, 0, 0, &[code_of_machframe()], None);
        let u = parse_unwind_info(&i).unwrap();
        let read = mem(&[(0x7f00, 0x40_2000), (0x7f18, 0x8000)]);
        let mut r = Win64Regs::default();
        r.gpr[RSP] = 0x7f00;
        assert!(matches!(
            undo_codes(&u, None, &mut r, &read),
            Undone::Machframe
        ));
        assert_eq!((r.rip, r.gpr[RSP]), (0x40_2000, 0x8000));
    }

    fn code_of_machframe() -> u16 {
        code(0, UWOP_PUSH_MACHFRAME, 0)
    }

    #[test]
    fn walk_mixes_unwind_data_and_frame_pointers() {
        // frame 1 has unwind data (a leaf rule), frame 2 none: its rbp chain ends the walk
        let read = mem(&[
            (0x7f00, 0x2010), // the leaf's return address
            (0x7f40, 0),      // the caller's saved rbp: end of the chain
            (0x7f48, 0x3050),
        ]);
        let step = |r: &mut Win64Regs, _inner: bool| -> Option<bool> {
            if (0x1000..0x1100).contains(&r.rip) {
                Some(pop_return(r, &read))
            } else {
                None
            }
        };
        let mut start = Win64Regs {
            rip: 0x1020,
            ..Default::default()
        };
        start.gpr[RSP] = 0x7f00;
        start.gpr[RBP] = 0x7f40;
        let mut out = Vec::new();
        walk(start, false, 10, &step, &read, &mut out);
        assert_eq!(out, vec![0x1020, 0x2010, 0x3050]);
    }

    /// A mingw-built program (gcc emits .pdata/.xdata for every function that is not a leaf):
    /// every entry's unwind info decodes, and `main`'s prolog is described by its codes.
    #[test]
    fn decodes_the_unwind_info_of_a_mingw_program() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("pidwin.exe");
        let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pid_windows/pidwin.c");
        match std::process::Command::new("x86_64-w64-mingw32-gcc")
            .args(["-O2", "-fomit-frame-pointer", "-o"])
            .arg(&exe)
            .arg(src)
            .status()
        {
            Ok(s) if s.success() => {}
            _ => {
                eprintln!("skipping unwind test: x86_64-w64-mingw32-gcc is not installed");
                return;
            }
        }
        let img = crate::symbols::ElfImage::open(exe.to_str().unwrap()).unwrap();
        let data = std::fs::read(&exe).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let table = UnwindTable::parse(&file).unwrap();
        assert!(table.functions.len() > 20, "{}", table.functions.len());
        let base = img.first_load;
        let bytes = |rva: u32, len: usize| img.bytes(base + rva as u64, len as u64);
        let mut ops = 0;
        for f in &table.functions {
            let u =
                unwind_info_at(&bytes, f.unwind).unwrap_or_else(|| panic!("unwind info of {f:x?}"));
            assert!(u.codes.iter().all(|(o, _)| *o <= u.prolog_size), "{u:?}");
            ops += u.codes.len();
        }
        assert!(ops > 20);
        // main calls other functions: it has an entry, and its prolog allocates stack
        let main = img.function("main").unwrap();
        let rf = table
            .lookup((main.addr - base) as u32)
            .expect("main's entry");
        let u = unwind_info_at(&bytes, rf.unwind).unwrap();
        assert!(
            u.codes.iter().any(|(_, c)| matches!(c, UnwindOp::Alloc(_))),
            "{u:?}"
        );
        // the code at main's start is what the codes say: the first operation undone last is
        // the first instruction of the prolog
        let code = img.bytes(main.addr, 16).unwrap();
        let mut dec = Decoder::with_ip(64, code, main.addr, DecoderOptions::NONE);
        let first = dec.decode();
        let (off0, op0) = *u.codes.last().unwrap();
        assert_eq!(off0 as usize, first.len(), "{:?} {u:?}", first.code());
        match op0 {
            UnwindOp::PushNonvol(r) => {
                assert_eq!(first.code(), Code::Push_r64);
                assert_eq!(gpr_index(first.op0_register()), Some(r as usize));
            }
            UnwindOp::Alloc(n) => {
                assert!(matches!(
                    first.code(),
                    Code::Sub_rm64_imm8 | Code::Sub_rm64_imm32
                ));
                assert_eq!(first.immediate(1), n as u64);
            }
            other => panic!("main starts with {:?}, codes {other:?}", first.code()),
        }
    }
}
