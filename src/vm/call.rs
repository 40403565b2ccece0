//! Calls of D subroutines from the VM: arguments are evaluated, strings read from memory, the
//! pure implementations in [`super::subr`] applied, and string results put in scratch space.

use super::memory::Fault;
use super::subr;
use super::{FiringCtx, Vm};
use crate::ir::{Node, Subr};

type R<T> = Result<T, Fault>;

impl From<subr::Fault> for Fault {
    fn from(f: subr::Fault) -> Fault {
        match f {
            subr::Fault::BadAddr(a) => Fault::BadAddr(a),
            subr::Fault::IllegalOp => Fault::IllegalOp,
            subr::Fault::NoScratch => Fault::NoScratch,
        }
    }
}

impl Vm {
    fn arg(&mut self, args: &[Node], i: usize, cx: &FiringCtx<'_>) -> R<u64> {
        match args.get(i) {
            Some(n) => self.eval(n, cx),
            None => Err(Fault::IllegalOp),
        }
    }

    fn opt_arg(&mut self, args: &[Node], i: usize, cx: &FiringCtx<'_>) -> R<Option<i64>> {
        match args.get(i) {
            Some(n) => Ok(Some(self.eval(n, cx)? as i64)),
            None => Ok(None),
        }
    }

    fn str_arg(&mut self, args: &[Node], i: usize, cx: &FiringCtx<'_>) -> R<Vec<u8>> {
        let a = self.arg(args, i, cx)?;
        let mut s = Vec::new();
        self.read_string_cx(a, cx, &mut s)?;
        Ok(s)
    }

    /// Puts a subroutine's string result into scratch and returns its address.
    fn result(&mut self, out: &[u8]) -> R<u64> {
        self.scratch_string(out)
    }

    /// The suffix of `s` from `off` as a new string, or NULL.
    fn suffix(&mut self, s: &[u8], off: Option<usize>) -> R<u64> {
        match off {
            Some(o) => self.result(&s[o.min(s.len())..]),
            None => Ok(0),
        }
    }

    pub(crate) fn call(&mut self, subr: Subr, args: &[Node], cx: &FiringCtx<'_>) -> R<u64> {
        let strsize = self.opts.strsize;
        let mut out = Vec::new();
        Ok(match subr {
            Subr::Strlen => {
                let s = self.str_arg(args, 0, cx)?;
                subr::strlen(&s, strsize) as u64
            }
            Subr::Strjoin => {
                let a = self.str_arg(args, 0, cx)?;
                let b = self.str_arg(args, 1, cx)?;
                subr::strjoin(&a, &b, strsize, &mut out)?;
                self.result(&out)?
            }
            Subr::Substr => {
                let s = self.str_arg(args, 0, cx)?;
                let i = self.arg(args, 1, cx)? as i64;
                let len = self.opt_arg(args, 2, cx)?;
                subr::substr(&s, i, len, strsize, &mut out);
                self.result(&out)?
            }
            Subr::Index | Subr::Rindex => {
                let s = self.str_arg(args, 0, cx)?;
                let sub = self.str_arg(args, 1, cx)?;
                let start = self.opt_arg(args, 2, cx)?;
                let r = if subr == Subr::Index {
                    subr::index(&s, &sub, start)
                } else {
                    subr::rindex(&s, &sub, start)
                };
                r as u64
            }
            Subr::Strstr => {
                let s = self.str_arg(args, 0, cx)?;
                let sub = self.str_arg(args, 1, cx)?;
                let off = subr::strstr(&s, &sub);
                self.suffix(&s, off)?
            }
            Subr::Strchr | Subr::Strrchr => {
                let s = self.str_arg(args, 0, cx)?;
                let c = self.arg(args, 1, cx)? as i64;
                let off = if subr == Subr::Strchr {
                    subr::strchr(&s, c, strsize)
                } else {
                    subr::strrchr(&s, c, strsize)
                };
                self.suffix(&s, off)?
            }
            Subr::Strtok => {
                let a = self.arg(args, 0, cx)?;
                let s = if a == 0 {
                    None
                } else {
                    let mut s = Vec::new();
                    self.read_string_cx(a, cx, &mut s)?;
                    Some(s)
                };
                let delim = self.str_arg(args, 1, cx)?;
                let mut st = std::mem::take(&mut self.strtok);
                let r = subr::strtok(s.as_deref(), &delim, &mut st, strsize, &mut out);
                self.strtok = st;
                if r? {
                    self.result(&out)?
                } else {
                    0
                }
            }
            Subr::Tolower | Subr::Toupper | Subr::Basename | Subr::Dirname | Subr::Cleanpath => {
                let s = self.str_arg(args, 0, cx)?;
                match subr {
                    Subr::Tolower => subr::tolower(&s, strsize, &mut out),
                    Subr::Toupper => subr::toupper(&s, strsize, &mut out),
                    Subr::Basename => subr::basename(&s, strsize, &mut out),
                    Subr::Dirname => subr::dirname(&s, strsize, &mut out),
                    _ => subr::cleanpath(&s, strsize, &mut out),
                }
                self.result(&out)?
            }
            Subr::Lltostr => {
                let v = self.arg(args, 0, cx)? as i64;
                let base = self.opt_arg(args, 1, cx)?;
                subr::lltostr(v, base, &mut out)?;
                self.result(&out)?
            }
            Subr::Strtoll => {
                let s = self.str_arg(args, 0, cx)?;
                let base = self.opt_arg(args, 1, cx)?;
                subr::strtoll(&s, base)? as u64
            }
            Subr::Htons => subr::htons(self.arg(args, 0, cx)?),
            Subr::Ntohs => subr::ntohs(self.arg(args, 0, cx)?),
            Subr::Htonl => subr::htonl(self.arg(args, 0, cx)?),
            Subr::Ntohl => subr::ntohl(self.arg(args, 0, cx)?),
            Subr::Htonll => subr::htonll(self.arg(args, 0, cx)?),
            Subr::Ntohll => subr::ntohll(self.arg(args, 0, cx)?),
            Subr::InetNtoa | Subr::InetNtoa6 => {
                let a = self.arg(args, 0, cx)?;
                let n = if subr == Subr::InetNtoa { 4 } else { 16 };
                let mut b = vec![0u8; n];
                self.read_bytes(a, &mut b, cx)?;
                if subr == Subr::InetNtoa {
                    subr::inet_ntoa(&b, &mut out)?;
                } else {
                    subr::inet_ntoa6(&b, &mut out)?;
                }
                self.result(&out)?
            }
            Subr::InetNtop => {
                let af = self.arg(args, 0, cx)? as i64;
                let a = self.arg(args, 1, cx)?;
                let n = if af as i32 == subr::AF_INET as i32 {
                    4
                } else {
                    16
                };
                let mut b = vec![0u8; n];
                self.read_bytes(a, &mut b, cx)?;
                subr::inet_ntop(af, &b, &mut out)?;
                self.result(&out)?
            }
            Subr::Json => {
                let t = self.str_arg(args, 0, cx)?;
                let sel = self.str_arg(args, 1, cx)?;
                if subr::json(&t, &sel, strsize, &mut out) {
                    self.result(&out)?
                } else {
                    0
                }
            }
            Subr::Rand => subr::rand(&mut self.rand_state) as u64,
            Subr::Speculation => self.spec.allocate(),
            Subr::Alloca => {
                let n = self.arg(args, 0, cx)? as usize;
                self.scratch_alloc(n)?
            }
            Subr::Bcopy => {
                let src = self.arg(args, 0, cx)?;
                let dst = self.arg(args, 1, cx)?;
                let n = self.arg(args, 2, cx)? as usize;
                // the whole destination must be allocated scratch before anything is read
                self.check_store(dst, n, true)?;
                let mut b = vec![0u8; n];
                self.read_bytes(src, &mut b, cx)?;
                self.write_bytes(dst, &b, cx)?;
                0
            }
            Subr::Copyin => {
                let a = self.arg(args, 0, cx)?;
                let n = self.arg(args, 1, cx)? as usize;
                let dst = self.scratch_alloc(n)?;
                let mut b = vec![0u8; n];
                self.read_bytes(a, &mut b, cx)?;
                self.write_bytes(dst, &b, cx)?;
                dst
            }
            Subr::Copyinto => {
                let a = self.arg(args, 0, cx)?;
                let n = self.arg(args, 1, cx)? as usize;
                let dst = self.arg(args, 2, cx)?;
                self.check_store(dst, n, false)?;
                let mut b = vec![0u8; n];
                self.read_bytes(a, &mut b, cx)?;
                self.write_bytes(dst, &b, cx)?;
                0
            }
            Subr::Copyinstr => {
                let a = self.arg(args, 0, cx)?;
                let max = self.opt_arg(args, 1, cx)?;
                let mut s = Vec::new();
                self.read_string_cx(a, cx, &mut s)?;
                if let Some(m) = max {
                    s.truncate(m.max(0) as usize);
                }
                self.result(&s)?
            }
            Subr::Copyout | Subr::Copyoutstr => {
                let src = self.arg(args, 0, cx)?;
                let addr = self.arg(args, 1, cx)?;
                let n = self.arg(args, 2, cx)? as usize;
                let data = if subr == Subr::Copyoutstr {
                    let mut s = Vec::new();
                    self.read_string_cx(src, cx, &mut s)?;
                    s.push(0);
                    s.truncate(n);
                    s
                } else {
                    let mut b = vec![0u8; n.min(self.opts.scratch)];
                    self.read_bytes(src, &mut b, cx)?;
                    b
                };
                if !self.opts.destructive {
                    return Err(Fault::IllegalOp);
                }
                cx.memory.write(addr, &data)?;
                0
            }
            Subr::Progenyof => {
                let p = self.arg(args, 0, cx)?;
                is_progeny(cx.pid, cx.ppid, p) as u64
            }
            Subr::Getmajor => (self.arg(args, 0, cx)? >> 32) & 0xffff_ffff,
            Subr::Getminor => self.arg(args, 0, cx)? & 0xffff_ffff,
            Subr::Wstrlen | Subr::Wstringof => {
                let a = self.arg(args, 0, cx)?;
                if a == 0 {
                    return if subr == Subr::Wstrlen {
                        Ok(0)
                    } else {
                        self.result(b"")
                    };
                }
                let mut w = Vec::new();
                let mut unit = [0u8; 2];
                while w.len() < strsize * 2 {
                    self.read_bytes(a + w.len() as u64, &mut unit, cx)?;
                    if unit == [0, 0] {
                        break;
                    }
                    w.extend_from_slice(&unit);
                }
                if subr == Subr::Wstrlen {
                    subr::wstrlen(&w, strsize) as u64
                } else {
                    subr::wstringof(&w, strsize, &mut out);
                    self.result(&out)?
                }
            }
            // dtx: the firing event's decoded fields by name (0 / "" when it has no such field)
            Subr::Etwfield => {
                let field = self.str_arg(args, 0, cx)?;
                cx.memory.event_field(subr_cstr(&field)).unwrap_or(0)
            }
            Subr::EtwfieldStr => {
                let field = self.str_arg(args, 0, cx)?;
                cx.memory.event_field_str(subr_cstr(&field), &mut out);
                out.truncate(strsize.saturating_sub(1));
                self.result(&out)?
            }
            Subr::DdiPathname => self.result(b"")?,
            // kernel objects that do not exist outside illumos
            Subr::MutexOwned
            | Subr::MutexOwner
            | Subr::MutexTypeAdaptive
            | Subr::MutexTypeSpin
            | Subr::RwReadHeld
            | Subr::RwWriteHeld
            | Subr::RwIswriter
            | Subr::Msgsize
            | Subr::Msgdsize
            | Subr::Getf => 0,
            // the key makers are evaluated as keys (`agg_key`), never called for a value
            Subr::Stack
            | Subr::Ustack
            | Subr::Jstack
            | Subr::Sym
            | Subr::Func
            | Subr::Mod
            | Subr::Usym
            | Subr::Ufunc
            | Subr::Umod
            | Subr::Uaddr
            | Subr::Other => return Err(Fault::IllegalOp),
        })
    }
}

/// Whether `pid` (with parent `ppid`) is `ancestor` or a descendant of it. On Linux the chain
/// of parents is read from /proc; elsewhere only the process and its parent are known.
fn is_progeny(pid: u64, ppid: u64, ancestor: u64) -> bool {
    if pid == ancestor || ppid == ancestor {
        return true;
    }
    let mut cur = ppid;
    for _ in 0..256 {
        if cur == ancestor {
            return true;
        }
        if cur <= 1 {
            return ancestor == 1 && cur == 1;
        }
        let Some(next) = std::fs::read_to_string(format!("/proc/{cur}/stat"))
            .ok()
            .and_then(|s| {
                let rest = &s[s.rfind(')')? + 2..];
                rest.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
        else {
            return false;
        };
        cur = next;
    }
    false
}

/// The bytes of a D string before its NUL.
fn subr_cstr(s: &[u8]) -> &[u8] {
    s.iter().position(|&c| c == 0).map_or(s, |n| &s[..n])
}
