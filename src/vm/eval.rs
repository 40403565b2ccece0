//! Evaluation of lowered expressions, and the VM's memory accesses.

use super::memory::{decode, internal, Fault, Region};
use super::{FiringCtx, Vm};
use crate::ir::{BinOp, CmpKind, CmpOp, LValue, Node, Scope, ValKind};
use crate::lang::builtins::var;

type R<T> = Result<T, Fault>;

fn truncate(v: u64, size: u8, signed: bool) -> u64 {
    match (size, signed) {
        (1, true) => v as i8 as i64 as u64,
        (1, false) => v as u8 as u64,
        (2, true) => v as i16 as i64 as u64,
        (2, false) => v as u16 as u64,
        (4, true) => v as i32 as i64 as u64,
        (4, false) => v as u32 as u64,
        _ => v,
    }
}

impl Vm {
    // ------------------------------------------------------------------ memory

    fn region(&self, r: Region) -> &[u8] {
        match r {
            Region::Strings => &self.strings,
            Region::Scratch => &self.scratch,
            Region::Globals => &self.global_mem,
            Region::Dynamic => &self.dynvars.mem,
            Region::Locals => &self.local_mem,
            Region::Thread | Region::IdleThread => &self.thread_mem,
        }
    }

    fn region_mut(&mut self, r: Region) -> &mut Vec<u8> {
        match r {
            Region::Strings => &mut self.strings,
            Region::Scratch => &mut self.scratch,
            Region::Globals => &mut self.global_mem,
            Region::Dynamic => &mut self.dynvars.mem,
            Region::Locals => &mut self.local_mem,
            Region::Thread | Region::IdleThread => &mut self.thread_mem,
        }
    }

    /// An internal address as (region, offset into the region's storage): [`decode`], with
    /// the `struct thread` regions' offsets taken from the address of the struct last built
    /// (`curthread`). The struct of another thread is not kept: an address into it lies past
    /// the region's storage, and faults.
    fn place(&self, addr: u64) -> Option<(Region, usize)> {
        let (r, off) = decode(addr)?;
        match r {
            Region::Thread | Region::IdleThread => {
                let base = decode(self.thread_addr).filter(|&(br, _)| br == r);
                let inside = base.and_then(|(_, b)| off.checked_sub(b));
                Some((r, inside.unwrap_or(usize::MAX / 2)))
            }
            _ => Some((r, off)),
        }
    }

    /// Scratch is one space of `opts.scratch` bytes; only the part touched is materialised.
    /// As in dtrace (`dtrace_canstore()` checks the whole `dtms_scratch_size`), loads and
    /// stores anywhere in it are the clause's; past it they fault at their address.
    fn touch_scratch(&mut self, addr: u64, off: usize, len: usize) -> R<std::ops::Range<usize>> {
        let end = self.scratch_end(addr, off, len)?;
        if end > self.scratch.len() {
            self.scratch.resize(end, 0);
        }
        Ok(off..end)
    }

    /// The end of `off..off + len` when it lies inside the scratch space, else a fault at `addr`.
    fn scratch_end(&self, addr: u64, off: usize, len: usize) -> R<usize> {
        match off.checked_add(len) {
            Some(end) if end <= self.opts.scratch => Ok(end),
            _ => Err(Fault::BadAddr(addr)),
        }
    }

    /// Reads `buf.len()` bytes from any address. An internal address must lie inside its
    /// region (for scratch, the clause's scratch space, zero where never written).
    pub(crate) fn read_bytes(&self, addr: u64, buf: &mut [u8], cx: &FiringCtx<'_>) -> R<()> {
        match self.place(addr) {
            Some((Region::Scratch, off)) => {
                let end = self.scratch_end(addr, off, buf.len())?;
                // the materialised overlap, then zeros
                let have = self.scratch.len().clamp(off, end);
                let (mat, rest) = buf.split_at_mut(have - off);
                mat.copy_from_slice(self.scratch.get(off..have).unwrap_or_default());
                rest.fill(0);
                Ok(())
            }
            Some((r, off)) => {
                let mem = self.region(r);
                let end = off.checked_add(buf.len()).ok_or(Fault::BadAddr(addr))?;
                if end > mem.len() {
                    return Err(Fault::BadAddr(addr));
                }
                buf.copy_from_slice(&mem[off..end]);
                Ok(())
            }
            None => {
                if addr < 4096 {
                    return Err(Fault::BadAddr(addr));
                }
                cx.memory.read(addr, buf)
            }
        }
    }

    /// A load of `size` bytes, extended per `signed`. As on x86 DTrace (illumos, FreeBSD and
    /// the Windows port alike), a load need not be aligned: ETW payloads pack their fields, and
    /// `*(uint64_t *)(p + 10)` is how D scripts read them.
    pub(crate) fn load_int(&self, addr: u64, size: u8, signed: bool, cx: &FiringCtx<'_>) -> R<u64> {
        let size = size.clamp(1, 8);
        let mut b = [0u8; 8];
        self.read_bytes(addr, &mut b[..size as usize], cx)?;
        Ok(truncate(u64::from_le_bytes(b), size, signed))
    }

    /// Writes bytes to VM memory (variables, scratch) or, with destructive actions allowed, to
    /// the probe's address space. As dtrace's `dtrace_canstore()`, a store outside them (string
    /// literals, past the scratch space, an unmapped address) faults with `BadAddr` at the
    /// address.
    pub(crate) fn write_bytes(&mut self, addr: u64, data: &[u8], cx: &FiringCtx<'_>) -> R<()> {
        match self.place(addr) {
            Some((Region::Strings, _)) => Err(Fault::BadAddr(addr)),
            Some((Region::Scratch, off)) => {
                let range = self.touch_scratch(addr, off, data.len())?;
                self.scratch[range].copy_from_slice(data);
                Ok(())
            }
            Some((r, off)) => {
                let mem = self.region_mut(r);
                let end = off.checked_add(data.len()).ok_or(Fault::BadAddr(addr))?;
                if end > mem.len() {
                    return Err(Fault::BadAddr(addr));
                }
                mem[off..end].copy_from_slice(data);
                Ok(())
            }
            None => {
                if !self.opts.destructive || addr < 4096 {
                    return Err(Fault::BadAddr(addr));
                }
                cx.memory.write(addr, data)
            }
        }
    }

    /// Whether `len` bytes at `addr` are VM memory the program may store to, checked before a
    /// copy reads its source: for `copyinto` dtrace's `dtrace_canstore()` (a variable's
    /// storage, the scratch space); for `bcopy` (`allocated`) its `dtrace_inscratch()`, scratch
    /// below the allocation pointer only. Faults with `BadAddr` at `addr`.
    pub(crate) fn check_store(&self, addr: u64, len: usize, allocated: bool) -> R<()> {
        let limit = match self.place(addr) {
            Some((Region::Scratch, _)) if allocated => self.scratch_top,
            Some((Region::Scratch, _)) => self.opts.scratch,
            Some((r, _)) if r != Region::Strings && !allocated => self.region(r).len(),
            _ => return Err(Fault::BadAddr(addr)),
        };
        match self.place(addr).and_then(|(_, off)| off.checked_add(len)) {
            Some(end) if end <= limit => Ok(()),
            _ => Err(Fault::BadAddr(addr)),
        }
    }

    /// The bytes of the string at `addr` (up to NUL or `strsize` bytes: as dtrace's
    /// `dtrace_strlen()` bounds a read by `strsize`, a string of exactly `strsize` bytes needs
    /// no NUL), appended to `out`.
    pub(crate) fn read_string_cx(&self, addr: u64, cx: &FiringCtx<'_>, out: &mut Vec<u8>) -> R<()> {
        self.read_string(addr, cx.memory, out)
    }

    pub(crate) fn read_string(
        &self,
        addr: u64,
        mem: &dyn super::AddressSpace,
        out: &mut Vec<u8>,
    ) -> R<()> {
        let max = self.opts.strsize;
        out.clear();
        if addr == 0 {
            // a NULL string (an absent dynamic variable, what strtok() returns at the end)
            // faults where it is read, as dtrace's loads through it do (dtrace_strlen in
            // dtrace_vcanload, dtrace_store_by_ref, the subroutines): invalid address 0
            return Err(Fault::BadAddr(0));
        }
        match self.place(addr) {
            Some((r, off)) => {
                let m = self.region(r);
                if r == Region::Scratch && off < self.opts.scratch && off >= m.len() {
                    // scratch never written is zero: an empty string
                    return Ok(());
                }
                if off > m.len() {
                    return Err(Fault::BadAddr(addr));
                }
                let s = &m[off..];
                let n = s
                    .iter()
                    .take(max)
                    .position(|&c| c == 0)
                    .unwrap_or(s.len().min(max));
                out.extend_from_slice(&s[..n]);
                Ok(())
            }
            None => {
                if addr < 4096 {
                    return Err(Fault::BadAddr(addr));
                }
                let mut chunk = [0u8; 64];
                while out.len() < max {
                    let want = (max - out.len()).min(64);
                    let a = addr + out.len() as u64;
                    // read byte-wise at the end of a mapping
                    if mem.read(a, &mut chunk[..want]).is_err() {
                        let mut one = [0u8; 1];
                        mem.read(a, &mut one)?;
                        if one[0] == 0 {
                            break;
                        }
                        out.push(one[0]);
                        continue;
                    }
                    match chunk[..want].iter().position(|&c| c == 0) {
                        Some(n) => {
                            out.extend_from_slice(&chunk[..n]);
                            break;
                        }
                        None => out.extend_from_slice(&chunk[..want]),
                    }
                }
                Ok(())
            }
        }
    }

    /// Scratch space for the current clause.
    /// Allocates `size` zeroed bytes of scratch, 8-aligned, as dtrace's `alloca` does (the
    /// bytes may have been written past an earlier allocation).
    pub(crate) fn scratch_alloc(&mut self, size: usize) -> R<u64> {
        let off = self.scratch_reserve(size)?;
        self.scratch[off..off + size].fill(0);
        Ok(internal(Region::Scratch, off))
    }

    /// Reserves `size` bytes of scratch, aligned up to 8 and nothing more, as dtrace's
    /// DIF_SUBR_ALLOCA (two `alloca(0)` return the same address); returns their offset. The
    /// bytes are not cleared: the caller writes every one of them or clears them.
    #[inline]
    fn scratch_reserve(&mut self, size: usize) -> R<usize> {
        let off = (self.scratch_top + 7) & !7;
        let end = off.checked_add(size).ok_or(Fault::NoScratch)?;
        if end > self.opts.scratch {
            return Err(Fault::NoScratch);
        }
        if end > self.scratch.len() {
            self.scratch.resize(end, 0);
        }
        self.scratch_top = end;
        Ok(off)
    }

    /// Copies bytes into scratch as a NUL-terminated string; returns its address. It keeps up
    /// to `strsize` bytes: a record holds `strsize` bytes with no NUL (dtrace's
    /// `dtrace_store_by_ref` copies at most `strsize`), so `lltostr(1234)` is `1234` with
    /// `strsize=4`.
    pub(crate) fn scratch_string(&mut self, s: &[u8]) -> R<u64> {
        let n = s.len().min(self.opts.strsize);
        // every reserved byte is written: the string and its NUL
        let off = self.scratch_reserve(n + 1)?;
        self.scratch[off..off + n].copy_from_slice(&s[..n]);
        self.scratch[off + n] = 0;
        Ok(internal(Region::Scratch, off))
    }

    pub(crate) fn value_size(&self, kind: ValKind) -> usize {
        match kind {
            ValKind::Int { .. } => 8,
            ValKind::String => self.opts.strsize,
            ValKind::ByRef { size } => size as usize,
        }
    }

    // ------------------------------------------------------------------ variables

    /// Appends the tuple bytes of a key list (strings by their bytes, integers as 8 bytes).
    fn tuple(&mut self, id: u32, keys: &[Node], cx: &FiringCtx<'_>, out: &mut Vec<u8>) -> R<()> {
        let mut s = Vec::new();
        let program = self.program.clone();
        let kinds = program
            .variable(id)
            .and_then(|v| v.keys.as_deref())
            .unwrap_or(&[]);
        for (i, k) in keys.iter().enumerate() {
            let v = self.eval(k, cx)?;
            match kinds.get(i) {
                Some(ValKind::String) => {
                    self.read_string_cx(v, cx, &mut s)?;
                    out.extend_from_slice(&s);
                    out.push(0);
                }
                Some(ValKind::ByRef { size }) => {
                    // structs and arrays are keys by value
                    let at = out.len();
                    out.resize(at + *size as usize, 0);
                    self.read_bytes(v, &mut out[at..], cx)?;
                }
                _ => out.extend_from_slice(&v.to_le_bytes()),
            }
        }
        Ok(())
    }

    /// What an array element's key costs in the dynamic variable space: string keys are sized at
    /// `strsize`, as DTrace sizes its key slots.
    fn key_charge(&self, id: u32, tuple_len: usize) -> usize {
        let kinds = self
            .program
            .variable(id)
            .and_then(|v| v.keys.as_deref())
            .unwrap_or(&[]);
        let strings = kinds.iter().filter(|k| **k == ValKind::String).count();
        tuple_len.max(strings * self.opts.strsize)
    }

    /// The storage offset (in the Dynamic region) of a dynamic variable.
    fn dyn_slot(
        &mut self,
        id: u32,
        scope: Scope,
        keys: Option<&[Node]>,
        kind: ValKind,
        create: bool,
        cx: &FiringCtx<'_>,
    ) -> R<Option<usize>> {
        let size = self.value_size(kind);
        let tid = if scope == Scope::Thread {
            cx.thread_key()
        } else {
            0
        };
        match keys {
            None => Ok(self.dynvars.tls(id, tid, size, create)),
            Some(keys) => {
                let mut buf = std::mem::take(&mut self.key_buf);
                buf.clear();
                let r = self.tuple(id, keys, cx, &mut buf);
                let charge = self.key_charge(id, buf.len());
                let slot = r.map(|()| self.dynvars.element(id, tid, &buf, charge, size, create));
                self.key_buf = buf;
                slot
            }
        }
    }

    fn free_dyn(
        &mut self,
        id: u32,
        scope: Scope,
        keys: Option<&[Node]>,
        kind: ValKind,
        cx: &FiringCtx<'_>,
    ) -> R<()> {
        let size = self.value_size(kind);
        let tid = if scope == Scope::Thread {
            cx.thread_key()
        } else {
            0
        };
        match keys {
            None => self.dynvars.free_tls(id, tid, size),
            Some(keys) => {
                let mut buf = std::mem::take(&mut self.key_buf);
                buf.clear();
                let r = self.tuple(id, keys, cx, &mut buf);
                if r.is_ok() {
                    self.dynvars.free_element(id, tid, &buf, size);
                }
                self.key_buf = buf;
                r?;
            }
        }
        Ok(())
    }

    /// The value of a variable that may not exist: 0, or the address of zeroed storage.
    fn absent(&mut self, kind: ValKind) -> R<u64> {
        match kind {
            ValKind::Int { .. } => Ok(0),
            ValKind::String => Ok(0),
            ValKind::ByRef { size } => self.scratch_alloc(size as usize),
        }
    }

    fn read_var(
        &mut self,
        id: u32,
        scope: Scope,
        keys: Option<&[Node]>,
        kind: ValKind,
        cx: &FiringCtx<'_>,
    ) -> R<u64> {
        // the base of a store: an absent element is made (only the first read, not the reads
        // its keys make)
        let for_store = std::mem::take(&mut self.alloc_ref);
        let dynamic = scope == Scope::Thread || keys.is_some();
        if !dynamic {
            let i = id as usize;
            return Ok(match kind {
                ValKind::Int { .. } => match scope {
                    Scope::Global => self.globals.get(i).copied().unwrap_or(0),
                    _ => self.locals.get(i).copied().unwrap_or(0),
                },
                ValKind::String if self.null_strings.get(i).copied().unwrap_or(false) => 0,
                _ => match scope {
                    Scope::Global => internal(
                        Region::Globals,
                        self.global_off.get(i).copied().unwrap_or(0),
                    ),
                    _ => internal(Region::Locals, self.local_off.get(i).copied().unwrap_or(0)),
                },
            });
        }
        let create = for_store && matches!(kind, ValKind::ByRef { .. });
        match self.dyn_slot(id, scope, keys, kind, create, cx)? {
            Some(off) => Ok(match kind {
                ValKind::Int { .. } => {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(&self.dynvars.mem[off..off + 8]);
                    u64::from_le_bytes(b)
                }
                _ => internal(Region::Dynamic, off),
            }),
            None => self.absent(kind),
        }
    }

    /// Stores a value (an integer, or the address of the bytes to copy) into a variable.
    fn write_var(
        &mut self,
        id: u32,
        scope: Scope,
        keys: Option<&[Node]>,
        kind: ValKind,
        value: u64,
        cx: &FiringCtx<'_>,
    ) -> R<()> {
        let dynamic = scope == Scope::Thread || keys.is_some();
        if !dynamic {
            let i = id as usize;
            match kind {
                // D variables hold the full 64-bit register value, whatever their type (as
                // dtrace's stgs/stls do); only memory stores narrow
                ValKind::Int { .. } => {
                    let v = value;
                    match scope {
                        Scope::Global => self.globals[i] = v,
                        _ => self.locals[i] = v,
                    }
                }
                _ => {
                    if kind == ValKind::String {
                        self.null_strings[i] = value == 0;
                    }
                    let dst = match scope {
                        Scope::Global => internal(Region::Globals, self.global_off[i]),
                        _ => internal(Region::Locals, self.local_off[i]),
                    };
                    self.copy_value(dst, value, kind, cx)?;
                }
            }
            return Ok(());
        }
        // assigning zero (an integer 0, a NULL string) frees a dynamic variable; an empty
        // string is a value like any other (dtrace's STGAA/STTS deallocate when the register
        // is 0, dtrace_dif_emulate)
        let zero = match kind {
            ValKind::Int { .. } | ValKind::String => value == 0,
            ValKind::ByRef { .. } => false,
        };
        if zero {
            return self.free_dyn(id, scope, keys, kind, cx);
        }
        let Some(off) = self.dyn_slot(id, scope, keys, kind, true, cx)? else {
            return Ok(()); // dropped: counted by the dynamic variable space
        };
        match kind {
            ValKind::Int { .. } => {
                let v = value;
                self.dynvars.mem[off..off + 8].copy_from_slice(&v.to_le_bytes());
                Ok(())
            }
            _ => self.copy_value(internal(Region::Dynamic, off), value, kind, cx),
        }
    }

    /// Copies a by-reference value (string or bytes) from `src` to `dst`.
    fn copy_value(&mut self, dst: u64, src: u64, kind: ValKind, cx: &FiringCtx<'_>) -> R<()> {
        match kind {
            ValKind::String => {
                // NULL stored into a string makes it empty
                let mut s = Vec::new();
                if src != 0 {
                    self.read_string_cx(src, cx, &mut s)?;
                }
                // a string of `strsize` bytes fills its slot with no room for a NUL
                if s.len() < self.opts.strsize {
                    s.push(0);
                }
                self.write_bytes(dst, &s, cx)
            }
            ValKind::ByRef { size } => {
                let mut b = vec![0u8; size as usize];
                self.read_bytes(src, &mut b, cx)?;
                self.write_bytes(dst, &b, cx)
            }
            ValKind::Int { size, .. } => {
                self.write_bytes(dst, &src.to_le_bytes()[..size as usize], cx)
            }
        }
    }

    // ------------------------------------------------------------------ lvalues

    /// The address a store writes to (see `alloc_ref`).
    fn store_addr(&mut self, addr: &Node, cx: &FiringCtx<'_>) -> R<u64> {
        self.alloc_ref = true;
        let a = self.eval(addr, cx);
        self.alloc_ref = false;
        a
    }

    fn store(&mut self, l: &LValue, value: u64, cx: &FiringCtx<'_>) -> R<()> {
        match l {
            LValue::Var { id, scope, kind } => self.write_var(*id, *scope, None, *kind, value, cx),
            LValue::Array {
                id,
                scope,
                keys,
                kind,
            } => self.write_var(*id, *scope, Some(keys), *kind, value, cx),
            LValue::Mem { addr, kind } => {
                let a = self.store_addr(addr, cx)?;
                match kind {
                    ValKind::Int { size, .. } => self.write_bytes(
                        a,
                        &value.to_le_bytes()[..(*size).clamp(1, 8) as usize],
                        cx,
                    ),
                    _ => self.copy_value(a, value, *kind, cx),
                }
            }
            LValue::Bitfield {
                addr,
                size,
                shift,
                bits,
            } => {
                let a = self.store_addr(addr, cx)?;
                let old = self.load_int(a, *size, false, cx)?;
                let mask = if *bits >= 64 {
                    u64::MAX
                } else {
                    (1u64 << bits) - 1
                } << shift;
                let new = (old & !mask) | ((value << shift) & mask);
                self.write_bytes(a, &new.to_le_bytes()[..(*size).clamp(1, 8) as usize], cx)
            }
            LValue::Uregs(_) | LValue::Value(_) => Err(Fault::IllegalOp),
        }
    }

    fn load_lvalue(&mut self, l: &LValue, cx: &FiringCtx<'_>) -> R<u64> {
        match l {
            LValue::Var { id, scope, kind } => self.read_var(*id, *scope, None, *kind, cx),
            LValue::Array {
                id,
                scope,
                keys,
                kind,
            } => self.read_var(*id, *scope, Some(keys), *kind, cx),
            LValue::Mem { addr, kind } => {
                let a = self.eval(addr, cx)?;
                match kind {
                    ValKind::Int { size, signed } => self.load_int(a, *size, *signed, cx),
                    _ => Ok(a),
                }
            }
            LValue::Bitfield {
                addr,
                size,
                shift,
                bits,
            } => {
                let a = self.eval(addr, cx)?;
                let v = self.load_int(a, *size, false, cx)? >> shift;
                Ok(if *bits >= 64 {
                    v
                } else {
                    v & ((1u64 << bits) - 1)
                })
            }
            LValue::Uregs(i) => {
                let i = self.eval(i, cx)? as usize;
                cx.uregs.get(i).copied().ok_or(Fault::IllegalOp)
            }
            LValue::Value(n) => self.eval(n, cx),
        }
    }

    fn lvalue_kind(l: &LValue) -> ValKind {
        match l {
            LValue::Var { kind, .. } | LValue::Array { kind, .. } | LValue::Mem { kind, .. } => {
                *kind
            }
            LValue::Bitfield { size, .. } => ValKind::Int {
                size: *size,
                signed: false,
            },
            _ => ValKind::I64,
        }
    }

    // ------------------------------------------------------------------ expressions

    fn builtin(&mut self, id: u32, cx: &FiringCtx<'_>) -> R<u64> {
        let p = cx.probe;
        Ok(match id {
            var::TIMESTAMP | var::ETWTIMESTAMP => cx.timestamp,
            var::VTIMESTAMP => cx.vtimestamp,
            var::WALLTIMESTAMP | var::ETWWALLTIMESTAMP => cx.walltimestamp,
            var::EPID => self.current_epid as u64,
            var::ID => p.id,
            x if (var::ARG0..var::ARG0 + 10).contains(&x) => cx.args[(x - var::ARG0) as usize],
            var::STACKDEPTH => cx.stack.len() as u64,
            var::USTACKDEPTH => cx.user_stack().len() as u64,
            var::CALLER => cx.stack.get(1).copied().unwrap_or(0),
            var::UCALLER => cx.user_stack().get(1).copied().unwrap_or(0),
            var::PROBEPROV => return self.scratch_string(p.provider.as_bytes()),
            var::PROBEMOD => return self.scratch_string(p.module.as_bytes()),
            var::PROBEFUNC => return self.scratch_string(p.function.as_bytes()),
            var::PROBENAME => return self.scratch_string(p.name.as_bytes()),
            var::PID => cx.pid,
            var::PPID => cx.ppid,
            var::TID => cx.tid,
            var::UID => cx.uid,
            var::GID => cx.gid,
            var::ERRNO => cx.errno as u64,
            var::EXECNAME => return self.scratch_string(cx.execname),
            var::TRACE => return self.scratch_string(cx.trace),
            // FreeBSD's `execargs` (the process's arguments, curpsinfo->pr_psargs) and
            // `threadname` (curlwpsinfo->pr_tname): what the source knows, else ""
            var::EXECARGS => return self.scratch_string(cx.psargs),
            var::THREADNAME => return self.scratch_string(cx.tname),
            var::ZONENAME => return self.scratch_string(b"global"),
            var::CPU => cx.cpu as u64,
            var::IPL => 0,
            var::CURTHREAD => {
                super::thread::build(&mut self.thread_mem, cx);
                self.thread_addr = super::thread::address(cx);
                self.thread_addr
            }
            _ => return Err(Fault::IllegalOp),
        })
    }

    /// `eval`, with the commonest leaves (constants, `arg0`..`arg9`) taken without a call.
    #[inline(always)]
    pub(crate) fn eval_fast(&mut self, n: &Node, cx: &FiringCtx<'_>) -> R<u64> {
        match n {
            Node::Const(v) => Ok(*v as u64),
            Node::Arg(i) => Ok(cx.args[*i as usize % 10]),
            // `arg0 > 10`: an integer comparison of two leaves
            Node::Compare { op, kind, a, b } if *kind != CmpKind::String => {
                match (leaf(a, cx), leaf(b, cx)) {
                    (Some(x), Some(y)) => Ok(compare_ints(*op, *kind, x, y)),
                    _ => self.eval(n, cx),
                }
            }
            _ => self.eval(n, cx),
        }
    }

    pub(crate) fn eval(&mut self, n: &Node, cx: &FiringCtx<'_>) -> R<u64> {
        Ok(match n {
            Node::Const(v) => *v as u64,
            Node::Str(s) => {
                let off = self.string_index.get(&(s.as_ptr() as usize)).copied();
                match off {
                    Some(o) => internal(Region::Strings, o),
                    None => self.scratch_string(s.as_bytes())?,
                }
            }
            Node::Arg(i) => cx.args[*i as usize % 10],
            Node::Builtin { id, .. } => self.builtin(*id, cx)?,
            Node::Args { index, kind } => {
                let i = self.eval(index, cx)? as usize;
                let v = *cx.args.get(i).ok_or(Fault::IllegalOp)?;
                match kind {
                    ValKind::Int { size, signed } => truncate(v, *size, *signed),
                    _ => v,
                }
            }
            Node::Uregs(i) => {
                let i = self.eval(i, cx)? as usize;
                cx.uregs.get(i).copied().ok_or(Fault::IllegalOp)?
            }
            Node::Var { id, scope, kind } => self.read_var(*id, *scope, None, *kind, cx)?,
            Node::Array {
                id,
                scope,
                keys,
                kind,
            } => self.read_var(*id, *scope, Some(keys), *kind, cx)?,
            Node::Load { addr, kind } => {
                let a = self.eval(addr, cx)?;
                match kind {
                    ValKind::Int { size, signed } => self.load_int(a, *size, *signed, cx)?,
                    _ => {
                        if a == 0 {
                            return Err(Fault::BadAddr(0));
                        }
                        a
                    }
                }
            }
            Node::Bitfield {
                addr,
                size,
                shift,
                bits,
                signed,
            } => {
                let a = self.eval(addr, cx)?;
                let v = self.load_int(a, *size, false, cx)? >> shift;
                let v = if *bits >= 64 {
                    v
                } else {
                    v & ((1u64 << bits) - 1)
                };
                if *signed && *bits < 64 && (v >> (bits - 1)) & 1 == 1 {
                    v | !((1u64 << bits) - 1)
                } else {
                    v
                }
            }
            Node::Binary { op, signed, a, b } => {
                let x = self.eval_fast(a, cx)?;
                let y = self.eval_fast(b, cx)?;
                binary(*op, *signed, x, y)?
            }
            Node::Compare { op, kind, a, b } => {
                let x = self.eval_fast(a, cx)?;
                let y = self.eval_fast(b, cx)?;
                if *kind != CmpKind::String {
                    return Ok(compare_ints(*op, *kind, x, y));
                }
                // dtrace_strncmp reads a NULL string as ""
                let mut sa = Vec::new();
                let mut sb = Vec::new();
                if x != 0 {
                    self.read_string_cx(x, cx, &mut sa)?;
                }
                if y != 0 {
                    self.read_string_cx(y, cx, &mut sb)?;
                }
                comparison(*op, sa.cmp(&sb))
            }
            Node::Neg(x) => (self.eval(x, cx)? as i64).wrapping_neg() as u64,
            Node::BitNot(x) => !self.eval(x, cx)?,
            Node::Not(x) => (self.eval(x, cx)? == 0) as u64,
            Node::LogAnd(a, b) => (self.eval(a, cx)? != 0 && self.eval(b, cx)? != 0) as u64,
            Node::LogOr(a, b) => (self.eval(a, cx)? != 0 || self.eval(b, cx)? != 0) as u64,
            Node::LogXor(a, b) => ((self.eval(a, cx)? != 0) ^ (self.eval(b, cx)? != 0)) as u64,
            Node::Ternary(c, a, b) => {
                if self.eval(c, cx)? != 0 {
                    self.eval(a, cx)?
                } else {
                    self.eval(b, cx)?
                }
            }
            Node::Cast {
                value,
                size,
                signed,
            } => truncate(self.eval(value, cx)?, *size, *signed),
            Node::Assign { target, value } => {
                let v = self.eval(value, cx)?;
                self.store(target, v, cx)?;
                match (&**target, Self::lvalue_kind(target)) {
                    (LValue::Var { .. } | LValue::Array { .. }, _) => v,
                    (_, ValKind::Int { size, signed }) => truncate(v, size, signed),
                    _ => v,
                }
            }
            Node::IncDec {
                target,
                delta,
                post,
            } => {
                let old = self.load_lvalue(target, cx)?;
                let new = old.wrapping_add(*delta as u64);
                self.store(target, new, cx)?;
                let (o, n) = match (&**target, Self::lvalue_kind(target)) {
                    (LValue::Var { .. } | LValue::Array { .. }, _) => (old, new),
                    (_, ValKind::Int { size, signed }) => {
                        (truncate(old, size, signed), truncate(new, size, signed))
                    }
                    _ => (old, new),
                };
                if *post {
                    o
                } else {
                    n
                }
            }
            Node::Call { subr, args, .. } => self.call(*subr, args, cx)?,
            Node::AddrOf(l) => match &**l {
                LValue::Mem { addr, .. } | LValue::Bitfield { addr, .. } => self.eval(addr, cx)?,
                other => self.load_lvalue(other, cx)?,
            },
            Node::Stringof(x) => self.eval(x, cx)?,
            Node::Seq(a, b) => {
                self.eval(a, cx)?;
                self.eval(b, cx)?
            }
            Node::Build { size, fields } => {
                let base = self.scratch_alloc(*size as usize)?;
                for f in fields {
                    let v = self.eval(&f.value, cx)?;
                    let at = base + f.offset_bits / 8;
                    match (f.kind, f.bits) {
                        (ValKind::Int { size, .. }, Some(bits)) => {
                            let shift = (f.offset_bits % 8) as u8;
                            let old = self.load_int(at, size, false, cx)?;
                            let mask = if bits >= 64 {
                                u64::MAX
                            } else {
                                (1u64 << bits) - 1
                            } << shift;
                            let new = (old & !mask) | ((v << shift) & mask);
                            self.write_bytes(at, &new.to_le_bytes()[..size as usize], cx)?;
                        }
                        (ValKind::Int { size, .. }, None) => {
                            self.write_bytes(at, &v.to_le_bytes()[..size.clamp(1, 8) as usize], cx)?
                        }
                        (kind, _) => self.copy_value(at, v, kind, cx)?,
                    }
                }
                base
            }
        })
    }
}

/// The value of a leaf node (a constant or `argN`) without evaluating anything.
#[inline(always)]
fn leaf(n: &Node, cx: &FiringCtx<'_>) -> Option<u64> {
    match n {
        Node::Const(v) => Some(*v as u64),
        Node::Arg(i) => Some(cx.args[*i as usize % 10]),
        _ => None,
    }
}

/// An integer comparison's 0 or 1.
#[inline(always)]
fn compare_ints(op: CmpOp, kind: CmpKind, x: u64, y: u64) -> u64 {
    let ord = match kind {
        CmpKind::Signed => (x as i64).cmp(&(y as i64)),
        _ => x.cmp(&y),
    };
    comparison(op, ord)
}

#[inline(always)]
fn comparison(op: CmpOp, ord: std::cmp::Ordering) -> u64 {
    use std::cmp::Ordering::*;
    (match op {
        CmpOp::Eq => ord == Equal,
        CmpOp::Ne => ord != Equal,
        CmpOp::Lt => ord == Less,
        CmpOp::Le => ord != Greater,
        CmpOp::Gt => ord == Greater,
        CmpOp::Ge => ord != Less,
    }) as u64
}

fn binary(op: BinOp, signed: bool, x: u64, y: u64) -> R<u64> {
    Ok(match op {
        BinOp::Add => x.wrapping_add(y),
        BinOp::Sub => x.wrapping_sub(y),
        BinOp::Mul => x.wrapping_mul(y),
        BinOp::Div => {
            // the most negative value divided by -1 traps like a division by zero
            if y == 0 || (signed && x as i64 == i64::MIN && y as i64 == -1) {
                return Err(Fault::DivZero);
            }
            if signed {
                (x as i64).wrapping_div(y as i64) as u64
            } else {
                x / y
            }
        }
        BinOp::Mod => {
            if y == 0 || (signed && x as i64 == i64::MIN && y as i64 == -1) {
                return Err(Fault::DivZero);
            }
            if signed {
                (x as i64).wrapping_rem(y as i64) as u64
            } else {
                x % y
            }
        }
        BinOp::And => x & y,
        BinOp::Or => x | y,
        BinOp::Xor => x ^ y,
        BinOp::Shl => x.wrapping_shl(y as u32),
        BinOp::Shr => {
            if signed {
                (x as i64).wrapping_shr(y as u32) as u64
            } else {
                x.wrapping_shr(y as u32)
            }
        }
    })
}
