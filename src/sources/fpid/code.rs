//! The code dtx writes into a target for one hooked function: a block near the function
//! (a thunk, the descriptor the agent reads, the trampoline) and the jump that replaces the
//! function's first bytes. Pure: addresses in, bytes out.

use crate::symbols::decode::relocate_prologue;

/// Bytes of a `jmp rel32`, what a hook writes over a function's start.
pub const PATCH_LEN: usize = 5;

/// Offset of the descriptor in a block (after the thunk).
const DESC_AT: u64 = 16;
/// Offset of the trampoline (after the descriptor's five words).
const TRAMPOLINE_AT: u64 = DESC_AT + 40;

/// A hook of one function, ready to write.
pub struct HookCode {
    /// The block, written at its address.
    pub block: Vec<u8>,
    /// The bytes written over the function's start: the jump, then `int3` up to the end of the
    /// last instruction it covers.
    pub patch: Vec<u8>,
}

/// The most bytes a block takes (a trampoline relocates at most a few instructions).
pub const MAX_BLOCK: usize = 256;

/// The hook of the function at `func` whose code is `code` (`size` bytes by its symbol, see
/// [`relocate_prologue`]), with its block at `at` (within
/// a 32-bit displacement of `func`): `push [desc]; jmp [entry_stub]`, the descriptor (its own
/// address, the agent's entry stub, the trampoline, the shared header's address in the target,
/// the hook's index), then the trampoline. The error says why the function cannot be hooked.
#[allow(clippy::too_many_arguments)]
pub fn hook_code(
    code: &[u8],
    size: usize,
    func: u64,
    at: u64,
    entry_stub: u64,
    header: u64,
    index: u64,
) -> Result<HookCode, String> {
    let rel = at as i64 - (func as i64 + PATCH_LEN as i64);
    if i32::try_from(rel).is_err() {
        return Err("no room for its hook within reach".into());
    }
    let trampoline_at = at + TRAMPOLINE_AT;
    let (trampoline, covered) =
        relocate_prologue(code, func, trampoline_at, PATCH_LEN, size).map_err(str::to_string)?;
    let mut block = Vec::with_capacity(TRAMPOLINE_AT as usize + trampoline.len());
    // push qword [rip + (DESC_AT - 6)]: the descriptor's first word, its own address
    block.extend_from_slice(&[0xff, 0x35]);
    block.extend_from_slice(&((DESC_AT - 6) as i32).to_le_bytes());
    // jmp qword [rip + (DESC_AT + 8 - 12)]: the entry stub
    block.extend_from_slice(&[0xff, 0x25]);
    block.extend_from_slice(&((DESC_AT + 8 - 12) as i32).to_le_bytes());
    block.resize(DESC_AT as usize, 0xcc);
    for w in [at + DESC_AT, entry_stub, trampoline_at, header, index] {
        block.extend_from_slice(&w.to_le_bytes());
    }
    block.extend_from_slice(&trampoline);
    if block.len() > MAX_BLOCK {
        return Err("its first instructions relocate to too much code".into());
    }
    let mut patch = vec![0xe9];
    patch.extend_from_slice(&(rel as i32).to_le_bytes());
    patch.resize(covered, 0xcc);
    Ok(HookCode { block, patch })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::decode::function;

    #[test]
    fn thunk_descriptor_trampoline_and_patch() {
        // push rbp; mov rbp,rsp; mov eax,edi; pop rbp; ret
        let code = [0x55, 0x48, 0x89, 0xe5, 0x89, 0xf8, 0x5d, 0xc3];
        let h = hook_code(
            &code,
            code.len(),
            0x40_1000,
            0x40_8000,
            0x7000_0000,
            0x7100_0000,
            3,
        )
        .unwrap();
        // the thunk decodes as two instructions reading the descriptor's first two words
        let thunk = function(&h.block[..12], 0x40_8000);
        assert_eq!(thunk.len(), 2);
        let word =
            |i: usize| u64::from_le_bytes(h.block[16 + 8 * i..24 + 8 * i].try_into().unwrap());
        assert_eq!(word(0), 0x40_8010);
        assert_eq!(word(1), 0x7000_0000);
        assert_eq!(word(2), 0x40_8038);
        assert_eq!(word(3), 0x7100_0000);
        assert_eq!(word(4), 3);
        // push rbp; mov rbp,rsp; mov eax,edi relocated as they are, then back to +6
        assert_eq!(&h.block[56..62], &code[..6]);
        assert_eq!(&h.block[62..64], &[0xff, 0x25]);
        assert_eq!(
            u64::from_le_bytes(h.block[68..76].try_into().unwrap()),
            0x40_1006
        );
        // jmp rel32 to the block, then int3 over the rest of the covered instruction
        assert_eq!(h.patch[0], 0xe9);
        let rel = i32::from_le_bytes(h.patch[1..5].try_into().unwrap()) as i64;
        assert_eq!(0x40_1005 + rel, 0x40_8000);
        assert_eq!(h.patch.len(), 6);
        assert_eq!(h.patch[5], 0xcc);
        // out of reach, or too short a function
        assert!(hook_code(&code, code.len(), 0x40_1000, 0x4000_0000_0000, 0, 0, 0).is_err());
        assert!(hook_code(&[0xc3], 1, 0x40_1000, 0x40_8000, 0, 0, 0).is_err());
    }
}
