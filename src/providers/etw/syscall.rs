//! `syscall::<function>:entry` and `return` from the PerfInfo SysClEnter and SysClExit
//! records (the kernel logger's `EVENT_TRACE_FLAG_SYSTEMCALL`; Microsoft Learn, "SysCallEnter
//! class" and "SysCallExit class": the entry's only field is `SysCallAddress`, the address of
//! the NT function the call enters, the exit's is `SysCallNtStatus`; TraceEvent's
//! `KernelTraceEventParser.cs` reads the same two fields, FORMAT.md 4.10).
//!
//! The function of a probe is the symbol that names the address in the kernel (the images of
//! process 0): a trace's addresses are named before the run, from the kernel image's PDB found
//! on the symbol path, as `stack()` frames are (`crate::symbols::trace`). An address no symbol
//! names gets the function `<module>`0x<offset>` (`ntoskrnl.exe`0x3c1b0`; `0x<address>`
//! outside every kernel image), a valid probe-description token, so that `syscall:::entry`
//! still sees every call. Live, the running kernel's image file and its PDB name the calls by
//! offset ([`SyscallNames::of_kernel_image`]).
//!
//! A SysClExit record does not say which call returns: each thread's pending call is its last
//! entry (see [`crate::etw::state::CpuThreads`]), and the return fires in
//! `syscall::<that call>:return`. A return whose entry the trace did not hold (the trace began
//! during the call) fires nothing when the calls have names.
//!
//! Arguments: ETW logs none of a call's arguments. Entry: `arg0` is the service routine's
//! address, the others 0. Return: `arg0` and `arg1` are the NTSTATUS, sign-extended (as
//! DTrace's return probes give the return value in both; negative is an error).

use std::collections::HashMap;

use super::{EtwFirings, EventCx};
use crate::fasthash::FastMap;
use crate::probes::ProbeInfo;

use crate::etw::opcode::SYSCALL_ENTER as ENTER;
/// First id of the system call probes (`syscall::<function>:entry`; its return is the next
/// id), below the `etw:<guid>:...` probes.
pub(super) const FIRST_ID: u64 = 700_000;
/// The end of their range.
const END_ID: u64 = super::FIRST_GUID_ID;

/// The system calls a trace makes, by the address of their service routine, and the probes
/// they fire: `syscall::<function>:entry` (id [`FIRST_ID`] + 2·i) and `return` (+1).
#[derive(Clone, Debug, Default)]
pub struct SyscallNames {
    /// The probe function of each call.
    functions: Vec<String>,
    by_function: HashMap<String, u32>,
    by_address: FastMap<u64, u32>,
    /// How many addresses no symbol named.
    unnamed: usize,
    /// Live: the running kernel's calls by offset into its image, for the addresses met as
    /// the session goes.
    live: Option<std::sync::Arc<KernelCalls>>,
}

/// The system calls of the running kernel by their offset in its image (a live session knows
/// no address before the calls come): the service routines (`Nt*` functions) of the kernel
/// image file's PDB, found on the symbol path, or of its exports.
#[derive(Debug, Default)]
pub struct KernelCalls {
    /// The kernel image's base name, as the session's Image records name it (`ntoskrnl.exe`).
    image: String,
    /// (offset, index of the function), sorted by offset.
    by_rva: Vec<(u32, u32)>,
    /// Whether the names come from the PDB (else from the exports, a part of the calls).
    from_pdb: bool,
    /// The addresses met so far, and their function.
    seen: std::sync::Mutex<FastMap<u64, Option<u32>>>,
}

impl SyscallNames {
    /// Adds the call at `address` under `function` (a symbol, or the offset form when
    /// `named` is false). Several addresses may share a function.
    pub fn add(&mut self, address: u64, function: &str, named: bool) {
        if self.by_address.contains_key(&address) {
            return;
        }
        let Some(i) = self.function_index(function) else {
            return;
        };
        self.by_address.insert(address, i);
        if !named {
            self.unnamed += 1;
        }
    }

    /// The index of `function`, added when new; None when the id range is full.
    fn function_index(&mut self, function: &str) -> Option<u32> {
        if let Some(&i) = self.by_function.get(function) {
            return Some(i);
        }
        let i = self.functions.len() as u32;
        if FIRST_ID + 2 * i as u64 + 1 >= END_ID {
            return None;
        }
        self.functions.push(function.to_string());
        self.by_function.insert(function.to_string(), i);
        Some(i)
    }

    /// Adds the calls of `other` this set lacks (several traces read as one run: their
    /// kernels' addresses side by side).
    pub fn absorb(&mut self, other: &SyscallNames) {
        let mut theirs: Vec<(&u64, &u32)> = other.by_address.iter().collect();
        theirs.sort_unstable();
        for (&addr, &i) in theirs {
            let f = &other.functions[i as usize];
            let named = !f.contains('`') && !f.starts_with("0x");
            self.add(addr, f, named);
        }
    }

    /// Whether no call is known (then the table's `syscall:::entry` and `return` probes, with
    /// no function, stand for every call).
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }

    /// How many addresses are known.
    pub fn addresses(&self) -> usize {
        self.by_address.len()
    }

    /// How many addresses no symbol named.
    pub fn unnamed(&self) -> usize {
        self.unnamed
    }

    /// The probes, entry and return of each function, in the order the calls were added.
    pub fn probes(&self) -> Vec<ProbeInfo> {
        let mut v = Vec::with_capacity(self.functions.len() * 2);
        for (i, f) in self.functions.iter().enumerate() {
            for (k, name) in ["entry", "return"].into_iter().enumerate() {
                v.push(ProbeInfo {
                    id: FIRST_ID + 2 * i as u64 + k as u64,
                    provider: "syscall".to_string(),
                    module: String::new(),
                    function: f.clone(),
                    name: name.to_string(),
                    arg_types: Vec::new(),
                    arg_native: Vec::new(),
                });
            }
        }
        v
    }

    /// Whether any of these probes is enabled: (an entry, a return).
    pub fn enabled(&self, enabled: &dyn Fn(u64) -> bool) -> (bool, bool) {
        let mut any = (false, false);
        for i in 0..self.functions.len() as u64 {
            any.0 |= enabled(FIRST_ID + 2 * i);
            any.1 |= enabled(FIRST_ID + 2 * i + 1);
        }
        any
    }

    /// The entry probe of the call at `address` (`state` places the live kernel's image).
    fn entry_id(&self, address: u64, state: &crate::etw::state::SystemState) -> Option<u64> {
        let i = match self.by_address.get(&address) {
            Some(&i) => i,
            None => self.live.as_ref()?.function_at(address, state)?,
        };
        Some(FIRST_ID + 2 * i as u64)
    }

    /// Whether the table's `syscall:::entry` and `return` (no function) stand for the calls
    /// with no probe of their own: with no names at all, and live, where an address may have
    /// none (a call of another image, win32k's, or one the symbols do not list).
    pub fn has_unnamed_probes(&self) -> bool {
        self.is_empty() || self.live.is_some()
    }

    /// Live: names for the running kernel's calls, from the kernel image file at `path` and
    /// its PDB on `symbols` (else its exports). None when the file cannot be read or names
    /// no call.
    pub fn of_kernel_image(
        path: &std::path::Path,
        symbols: &crate::symbols::pdb::SymbolPath,
    ) -> Option<SyscallNames> {
        let bytes = std::fs::read(path).ok()?;
        let file = object::File::parse(&*bytes).ok()?;
        let pdb = crate::symbols::pdb::symbols_for_image(&file, path, symbols);
        let base = object::Object::relative_address_base(&file);
        let functions = crate::symbols::pe::functions_with_pdb(&file, pdb.as_ref());
        let image = crate::output::stack::basename(&path.to_string_lossy()).to_string();
        let mut names = SyscallNames::default();
        let mut calls = KernelCalls {
            image,
            from_pdb: pdb.is_some(),
            ..KernelCalls::default()
        };
        for f in &functions {
            let Some(name) = function_token(&f.name).filter(|n| is_service_routine(n)) else {
                continue;
            };
            let Ok(rva) = u32::try_from(f.addr.wrapping_sub(base)) else {
                continue;
            };
            let Some(i) = names.function_index(name) else {
                continue;
            };
            calls.by_rva.push((rva, i));
        }
        if calls.by_rva.is_empty() {
            return None;
        }
        calls.by_rva.sort_unstable();
        calls.by_rva.dedup_by_key(|(rva, _)| *rva);
        names.live = Some(std::sync::Arc::new(calls));
        Some(names)
    }

    /// Live: whether the names came from the kernel's PDB (else from its exports).
    pub fn live_from_pdb(&self) -> Option<bool> {
        self.live.as_ref().map(|l| l.from_pdb)
    }
}

/// Whether a kernel function is a system service routine: the `Nt` functions (`NtReadFile`);
/// the `Zw` ones are the kernel's own stubs that enter the dispatcher.
fn is_service_routine(name: &str) -> bool {
    name.len() > 2 && name.starts_with("Nt") && name.as_bytes()[2].is_ascii_uppercase()
}

impl KernelCalls {
    /// The function of the call at `address`: its offset in the kernel image the state knows
    /// (process 0's image of that name), looked up once per address.
    fn function_at(&self, address: u64, state: &crate::etw::state::SystemState) -> Option<u32> {
        let mut seen = self.seen.lock().ok()?;
        if let Some(&known) = seen.get(&address) {
            return known;
        }
        let kernel = state.process(0);
        let found = kernel
            .and_then(|p| {
                p.images.iter().find(|i| {
                    i.contains(address)
                        && crate::output::stack::basename(&i.file_name)
                            .eq_ignore_ascii_case(&self.image)
                })
            })
            .and_then(|img| u32::try_from(address - img.base).ok())
            .and_then(|rva| {
                let k = self.by_rva.binary_search_by_key(&rva, |e| e.0).ok()?;
                Some(self.by_rva[k].1)
            });
        // an address before its image's record is looked up again later
        if kernel.is_some_and(|p| !p.images.is_empty()) {
            seen.insert(address, found);
        }
        found
    }
}

/// The firing of a SysClEnter or SysClExit record: the named probe of its call when the
/// calls have names, else the table's probe with no function (`generic`: its id).
pub(super) fn fire(
    names: &SyscallNames,
    cx: &EventCx<'_, '_>,
    generic: u64,
    enabled: &dyn Fn(u64) -> bool,
    out: &mut EtwFirings,
) {
    let mut a = [0u64; 10];
    let unnamed = names.has_unnamed_probes().then_some(generic);
    let id = if cx.ev.opcode == ENTER {
        let address = cx.dec.u64("SysCallAddress").unwrap_or(0);
        a[0] = address;
        names.entry_id(address, cx.state).or(unnamed)
    } else {
        let status = cx.dec.u64("SysCallNtStatus").unwrap_or(0) as u32 as i32 as i64 as u64;
        a[0] = status;
        a[1] = status;
        match cx.state.cpus().returned_call() {
            Some(addr) => names.entry_id(addr, cx.state).map(|id| id + 1).or(unnamed),
            // the entry was not seen: only the probe of every call fires, with no names
            None => names.is_empty().then_some(generic),
        }
    };
    if let Some(id) = id.filter(|&id| enabled(id)) {
        out.push(id, a, cx.pid, cx.tid);
    }
}

/// The calls at `addresses` by the name `symbols` gives each in the kernel (sorted by
/// address, so that probe ids follow them).
pub fn name_calls(
    addresses: impl IntoIterator<Item = u64>,
    symbols: &crate::symbols::TraceSymbols,
) -> SyscallNames {
    let mut sorted: Vec<u64> = addresses.into_iter().collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut names = SyscallNames::default();
    for addr in sorted {
        let sym = symbols.kernel_symbol(addr);
        match sym.and_then(|(_, _, f)| function_token(f?)) {
            Some(f) => names.add(addr, f, true),
            None => {
                let f = offset_function(sym.map(|(m, base, _)| (m, base)), addr);
                names.add(addr, &f, false)
            }
        }
    }
    names
}

/// A symbol as a probe function: kept when every character may appear in a probe
/// description's field (letters, digits, `_`, `.`, `$`, `-`), else None.
pub fn function_token(symbol: &str) -> Option<&str> {
    let ok = !symbol.is_empty()
        && symbol
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.$-".contains(&b))
        && !symbol.starts_with(|c: char| c.is_ascii_digit() || c == '-');
    ok.then_some(symbol)
}

/// The function of a call no symbol names: `<module>`0x<offset>` in a kernel image, else
/// `0x<address>`.
pub fn offset_function(module: Option<(&str, u64)>, address: u64) -> String {
    match module {
        Some((name, base)) => format!("{name}`0x{:x}", address.wrapping_sub(base)),
        None => format!("0x{address:x}"),
    }
}

/// What a program asks of `syscall:::entry` that ETW does not record: one warning per clause
/// that can fire on an entry probe and reads `arg1`..`arg9` or `args[]` (SysClEnter carries
/// only the routine's address, so they are 0). A probe description that names another
/// provider or probe (`syscall:::return`, `dpc:::`) is not such a clause.
pub fn argument_warnings(program: &crate::ir::Program) -> Vec<String> {
    use crate::ir::Node;
    use crate::probes::glob_match;
    let field = |pat: &str, text: &str| pat.is_empty() || glob_match(pat, text);
    let mut out = Vec::new();
    for c in &program.clauses {
        let Some(probe) = c
            .probes
            .iter()
            .find(|d| field(&d.provider, "syscall") && field(&d.name, "entry"))
        else {
            continue;
        };
        let mut read: Vec<String> = Vec::new();
        crate::ir::visit::visit_clause(
            c,
            &mut |n| {
                let name = match n {
                    Node::Arg(i) if *i >= 1 => format!("arg{i}"),
                    Node::Args { .. } => "args[]".to_string(),
                    _ => return,
                };
                if !read.contains(&name) {
                    read.push(name);
                }
            },
            &mut |_| {},
        );
        if read.is_empty() {
            continue;
        }
        let desc = format!(
            "{}:{}:{}:{}",
            probe.provider, probe.module, probe.function, probe.name
        );
        // a -n description has no line: the probe description names the clause
        let at = match c.line {
            0 => String::new(),
            n => format!(" at line {n}"),
        };
        out.push(format!(
            "warning: the clause{at} for {desc} reads {}, but ETW records no system-call \
             arguments: on entry only arg0 (the service routine's address) is set, the others \
             are 0",
            read.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_get_one_pair_of_probes_per_function() {
        let mut n = SyscallNames::default();
        assert!(n.is_empty());
        n.add(0x100, "NtReadFile", true);
        n.add(0x200, "ntoskrnl.exe`0x200", false);
        n.add(0x100, "Other", true);
        n.add(0x300, "NtReadFile", true);
        let p = n.probes();
        let names: Vec<String> = p
            .iter()
            .map(|p| {
                format!(
                    "{}:{}:{}:{} {}",
                    p.provider, p.module, p.function, p.name, p.id
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                "syscall::NtReadFile:entry 700000",
                "syscall::NtReadFile:return 700001",
                "syscall::ntoskrnl.exe`0x200:entry 700002",
                "syscall::ntoskrnl.exe`0x200:return 700003"
            ]
        );
        let state = crate::etw::state::SystemState::new();
        assert_eq!(n.entry_id(0x300, &state), Some(FIRST_ID));
        assert_eq!(n.entry_id(0x400, &state), None);
        assert!(!n.has_unnamed_probes());
        assert_eq!(n.unnamed(), 1);
        assert_eq!(n.enabled(&|id| id == FIRST_ID + 3), (false, true));
    }

    #[test]
    fn symbols_that_are_not_tokens_take_the_offset_form() {
        assert_eq!(function_token("NtReadFile"), Some("NtReadFile"));
        assert_eq!(function_token("ns::f<int>"), None);
        assert_eq!(function_token("1abc"), None);
        assert_eq!(function_token(""), None);
        assert_eq!(
            offset_function(
                Some(("ntoskrnl.exe", 0xfffff800_00000000)),
                0xfffff800_0003c1b0
            ),
            "ntoskrnl.exe`0x3c1b0"
        );
        assert_eq!(offset_function(None, 0x1234), "0x1234");
        // the lexer reads both as one probe-description token
        let d = crate::probes::ProbeDesc::parse("syscall::ntoskrnl.exe`0x3c1b0:entry").unwrap();
        assert_eq!(d.function, "ntoskrnl.exe`0x3c1b0");
    }
}
