//! Call frame information (`.eh_frame`): where a function's caller's frame is when the code
//! keeps no frame pointer (most of libc, `-O2` programs). [`CallFrames`] indexes a module's
//! frame description entries by address; [`FrameRule`] is what one address needs to step to
//! its caller; [`unwind`] walks a stack with the rules where a module has them and the `rbp`
//! chain where it does not.

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameOffset, LittleEndian, Register, RegisterRule,
    UnwindContext, UnwindSection,
};

/// DWARF register numbers of x86-64.
const RBP: Register = Register(6);
const RSP: Register = Register(7);
const RA: Register = Register(16);

/// Which register the canonical frame address (the caller's `rsp`) is computed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CfaBase {
    Rsp,
    Rbp,
}

/// How to find the caller at one address: CFA = base + offset; the return address is saved at
/// CFA + `ra_at`; the caller's `rbp` at CFA + `rbp_at` when this function saved it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRule {
    pub base: CfaBase,
    pub offset: i64,
    pub ra_at: i64,
    pub rbp_at: Option<i64>,
}

/// The frame description entries of one image, sorted by address.
pub struct CallFrames {
    /// `.eh_frame`'s place in the file and its link-time address.
    file_range: (usize, usize),
    section_addr: u64,
    text_addr: u64,
    /// (start, end, offset in the section), by start.
    fdes: Vec<(u64, u64, usize)>,
}

impl CallFrames {
    /// Indexes the `.eh_frame` section of `data` (a whole ELF file); `None` when it has none.
    pub fn parse(file: &object::File<'_>, data: &[u8]) -> Option<CallFrames> {
        use object::{Object, ObjectSection};
        let sec = file.section_by_name(".eh_frame")?;
        let (off, size) = sec.file_range()?;
        let file_range = (off as usize, (off + size) as usize);
        let bytes = data.get(file_range.0..file_range.1)?;
        let section_addr = sec.address();
        let text_addr = file.section_by_name(".text").map_or(0, |s| s.address());
        let mut eh = EhFrame::new(bytes, LittleEndian);
        eh.set_address_size(8);
        let bases = BaseAddresses::default()
            .set_eh_frame(section_addr)
            .set_text(text_addr);
        let mut fdes = Vec::new();
        let mut entries = eh.entries(&bases);
        // a damaged entry ends the index; what came before it stays usable
        while let Ok(Some(entry)) = entries.next() {
            if let gimli::CieOrFde::Fde(partial) = entry {
                if let Ok(fde) = partial.parse(EhFrame::cie_from_offset) {
                    let start = fde.initial_address();
                    fdes.push((start, start.saturating_add(fde.len()), fde.offset()));
                }
            }
        }
        fdes.sort_unstable();
        Some(CallFrames {
            file_range,
            section_addr,
            text_addr,
            fdes,
        })
    }

    pub fn len(&self) -> usize {
        self.fdes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fdes.is_empty()
    }

    /// The rule at link-time address `pc`, from the same file bytes [`CallFrames::parse`] read;
    /// `None` where no entry covers it or the rule is not one this unwinder follows (DWARF
    /// expressions).
    pub fn rule(&self, data: &[u8], pc: u64) -> Option<FrameRule> {
        let i = self.fdes.partition_point(|f| f.0 <= pc).checked_sub(1)?;
        let (start, end, offset) = self.fdes[i];
        if pc < start || pc >= end {
            return None;
        }
        let bytes = data.get(self.file_range.0..self.file_range.1)?;
        let mut eh = EhFrame::new(bytes, LittleEndian);
        eh.set_address_size(8);
        let bases = BaseAddresses::default()
            .set_eh_frame(self.section_addr)
            .set_text(self.text_addr);
        let fde = eh
            .fde_from_offset(&bases, EhFrameOffset(offset), EhFrame::cie_from_offset)
            .ok()?;
        let mut ctx = UnwindContext::new();
        let row = fde
            .unwind_info_for_address(&eh, &bases, &mut ctx, pc)
            .ok()?;
        let (base, offset) = match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } if *register == RSP => {
                (CfaBase::Rsp, *offset)
            }
            CfaRule::RegisterAndOffset { register, offset } if *register == RBP => {
                (CfaBase::Rbp, *offset)
            }
            _ => return None,
        };
        let ra_at = match row.register(RA) {
            RegisterRule::Offset(o) => o,
            _ => return None,
        };
        let rbp_at = match row.register(RBP) {
            RegisterRule::Offset(o) => Some(o),
            RegisterRule::Undefined | RegisterRule::SameValue => None,
            _ => return None,
        };
        Some(FrameRule {
            base,
            offset,
            ra_at,
            rbp_at,
        })
    }
}

/// The registers an unwind step needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepRegs {
    pub pc: u64,
    pub rsp: u64,
    pub rbp: u64,
}

/// The caller's registers by `rule`, reading the stack with `read`.
pub fn step(rule: &FrameRule, r: &StepRegs, read: &dyn Fn(u64) -> Option<u64>) -> Option<StepRegs> {
    let base = match rule.base {
        CfaBase::Rsp => r.rsp,
        CfaBase::Rbp => r.rbp,
    };
    let cfa = base.wrapping_add(rule.offset as u64);
    let pc = read(cfa.wrapping_add(rule.ra_at as u64))?;
    let rbp = match rule.rbp_at {
        Some(o) => read(cfa.wrapping_add(o as u64))?,
        None => r.rbp,
    };
    Some(StepRegs { pc, rsp: cfa, rbp })
}

/// Walks a user stack, innermost first, into `out` (at most `max` frames): each frame by its
/// module's call frame information (`rule_at` answers for an address, or `None`), else by the
/// frame pointer chain. `at_edge`: the innermost function has not set up its frame (its entry,
/// its `ret`), so its return address is at `[rsp]` whatever the rules say.
pub fn unwind(
    regs: StepRegs,
    at_edge: bool,
    max: usize,
    rule_at: &dyn Fn(u64) -> Option<FrameRule>,
    read: &dyn Fn(u64) -> Option<u64>,
    out: &mut Vec<u64>,
) {
    out.clear();
    let mut r = regs;
    out.push(r.pc);
    let mut innermost = true;
    while out.len() < max {
        // a return address points after its call: look up the call itself
        let lookup = if innermost {
            r.pc
        } else {
            r.pc.wrapping_sub(1)
        };
        let next = if innermost && at_edge {
            read(r.rsp).map(|pc| StepRegs {
                pc,
                rsp: r.rsp.wrapping_add(8),
                rbp: r.rbp,
            })
        } else if let Some(rule) = rule_at(lookup) {
            step(&rule, &r, read)
        } else {
            // the frame pointer chain: [rbp] = caller's rbp, [rbp + 8] = return address
            if r.rbp == 0 || !r.rbp.is_multiple_of(8) || r.rbp < r.rsp {
                None
            } else {
                match (read(r.rbp), read(r.rbp.wrapping_add(8))) {
                    (Some(rbp), Some(pc)) => Some(StepRegs {
                        pc,
                        rsp: r.rbp.wrapping_add(16),
                        rbp,
                    }),
                    _ => None,
                }
            }
        };
        let Some(n) = next else { break };
        // the stack grows down: a caller's frame is above its callee's
        if n.pc == 0 || n.rsp <= r.rsp {
            break;
        }
        out.push(n.pc);
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

    #[test]
    fn rules_and_frame_pointers_combine() {
        // f (no frame pointer, 0x1000..0x1100, 24 bytes of frame) called by g (0x2000..,
        // frame pointer) called by h (return address 0x3050)
        let rule = FrameRule {
            base: CfaBase::Rsp,
            offset: 32,
            ra_at: -8,
            rbp_at: None,
        };
        let rule_at = move |pc: u64| (0x1000..0x1100).contains(&pc).then_some(rule);
        let read = mem(&[
            (0x7f18, 0x2010), // f's return address, into g: CFA = 0x7f00 + 32
            (0x7f40, 0x7f80), // g's saved rbp
            (0x7f48, 0x3050), // g's return address
            (0x7f80, 0),      // h's frame: end of the chain
            (0x7f88, 0),
        ]);
        let mut out = Vec::new();
        let regs = StepRegs {
            pc: 0x1020,
            rsp: 0x7f00,
            rbp: 0x7f40,
        };
        unwind(regs, false, 10, &rule_at, &read, &mut out);
        assert_eq!(out, vec![0x1020, 0x2010, 0x3050]);
        // at f's entry, the return address is at [rsp] whatever the rule says
        let read2 = mem(&[(0x7f00, 0x2010), (0x7f40, 0x7f80), (0x7f48, 0x3050)]);
        unwind(regs, true, 10, &rule_at, &read2, &mut out);
        assert_eq!(out, vec![0x1020, 0x2010, 0x3050]);
        // a frame that does not move up the stack ends the walk
        let looping = mem(&[(0x7f18, 0x1030)]);
        let same = FrameRule {
            base: CfaBase::Rsp,
            offset: 0,
            ra_at: 0x18,
            rbp_at: None,
        };
        unwind(regs, false, 10, &|_| Some(same), &looping, &mut out);
        assert_eq!(out, vec![0x1020]);
    }

    #[test]
    fn libc_has_rules_for_its_functions() {
        let Some(path) = [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
        ]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists()) else {
            eprintln!("skipping: no x86-64 libc here");
            return;
        };
        let data = std::fs::read(path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let cf = CallFrames::parse(&file, &data).unwrap();
        assert!(cf.len() > 1000, "{} entries", cf.len());
        // at the first instruction of any function the CFA is rsp + 8 and the return address
        // is at CFA - 8
        let (start, _, _) = cf.fdes[cf.len() / 2];
        let r = cf.rule(&data, start).unwrap();
        assert_eq!(
            r,
            FrameRule {
                base: CfaBase::Rsp,
                offset: 8,
                ra_at: -8,
                rbp_at: None
            }
        );
        assert!(cf.rule(&data, 0).is_none());
    }
}
