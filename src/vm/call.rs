//! Calls of D subroutines from the VM: arguments are evaluated, strings read from memory, the
//! pure implementations in [`super::subr`] applied, and string results put in scratch space.

use super::memory::Fault;
use super::subr;
use super::{FiringCtx, Vm};
use crate::ir::Node;

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

    pub(crate) fn call(&mut self, name: &str, args: &[Node], cx: &FiringCtx<'_>) -> R<u64> {
        let strsize = self.opts.strsize;
        let mut out = Vec::new();
        Ok(match name {
            "strlen" => {
                let s = self.str_arg(args, 0, cx)?;
                subr::strlen(&s, strsize) as u64
            }
            "strjoin" => {
                let a = self.str_arg(args, 0, cx)?;
                let b = self.str_arg(args, 1, cx)?;
                subr::strjoin(&a, &b, strsize, &mut out)?;
                self.result(&out)?
            }
            "substr" => {
                let s = self.str_arg(args, 0, cx)?;
                let i = self.arg(args, 1, cx)? as i64;
                let len = self.opt_arg(args, 2, cx)?;
                subr::substr(&s, i, len, strsize, &mut out);
                self.result(&out)?
            }
            "index" | "rindex" => {
                let s = self.str_arg(args, 0, cx)?;
                let sub = self.str_arg(args, 1, cx)?;
                let start = self.opt_arg(args, 2, cx)?;
                let r = if name == "index" {
                    subr::index(&s, &sub, start)
                } else {
                    subr::rindex(&s, &sub, start)
                };
                r as u64
            }
            "strstr" => {
                let s = self.str_arg(args, 0, cx)?;
                let sub = self.str_arg(args, 1, cx)?;
                let off = subr::strstr(&s, &sub);
                self.suffix(&s, off)?
            }
            "strchr" | "strrchr" => {
                let s = self.str_arg(args, 0, cx)?;
                let c = self.arg(args, 1, cx)? as i64;
                let off = if name == "strchr" {
                    subr::strchr(&s, c, strsize)
                } else {
                    subr::strrchr(&s, c, strsize)
                };
                self.suffix(&s, off)?
            }
            "strtok" => {
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
            "tolower" | "toupper" | "basename" | "dirname" | "cleanpath" => {
                let s = self.str_arg(args, 0, cx)?;
                match name {
                    "tolower" => subr::tolower(&s, strsize, &mut out),
                    "toupper" => subr::toupper(&s, strsize, &mut out),
                    "basename" => subr::basename(&s, strsize, &mut out),
                    "dirname" => subr::dirname(&s, strsize, &mut out),
                    _ => subr::cleanpath(&s, strsize, &mut out),
                }
                self.result(&out)?
            }
            "lltostr" => {
                let v = self.arg(args, 0, cx)? as i64;
                let base = self.opt_arg(args, 1, cx)?;
                subr::lltostr(v, base, &mut out)?;
                self.result(&out)?
            }
            "strtoll" => {
                let s = self.str_arg(args, 0, cx)?;
                let base = self.opt_arg(args, 1, cx)?;
                subr::strtoll(&s, base)? as u64
            }
            "htons" => subr::htons(self.arg(args, 0, cx)?),
            "ntohs" => subr::ntohs(self.arg(args, 0, cx)?),
            "htonl" => subr::htonl(self.arg(args, 0, cx)?),
            "ntohl" => subr::ntohl(self.arg(args, 0, cx)?),
            "htonll" => subr::htonll(self.arg(args, 0, cx)?),
            "ntohll" => subr::ntohll(self.arg(args, 0, cx)?),
            "inet_ntoa" | "inet_ntoa6" => {
                let a = self.arg(args, 0, cx)?;
                let n = if name == "inet_ntoa" { 4 } else { 16 };
                let mut b = vec![0u8; n];
                self.read_bytes(a, &mut b, cx)?;
                if name == "inet_ntoa" {
                    subr::inet_ntoa(&b, &mut out)?;
                } else {
                    subr::inet_ntoa6(&b, &mut out)?;
                }
                self.result(&out)?
            }
            "inet_ntop" => {
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
            "json" => {
                let t = self.str_arg(args, 0, cx)?;
                let sel = self.str_arg(args, 1, cx)?;
                if subr::json(&t, &sel, strsize, &mut out) {
                    self.result(&out)?
                } else {
                    0
                }
            }
            "rand" => subr::rand(&mut self.rand_state) as u64,
            "speculation" => self.spec.allocate(),
            "alloca" => {
                let n = self.arg(args, 0, cx)? as usize;
                self.scratch_alloc(n)?
            }
            "bcopy" => {
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
            "copyin" => {
                let a = self.arg(args, 0, cx)?;
                let n = self.arg(args, 1, cx)? as usize;
                let dst = self.scratch_alloc(n)?;
                let mut b = vec![0u8; n];
                self.read_bytes(a, &mut b, cx)?;
                self.write_bytes(dst, &b, cx)?;
                dst
            }
            "copyinto" => {
                let a = self.arg(args, 0, cx)?;
                let n = self.arg(args, 1, cx)? as usize;
                let dst = self.arg(args, 2, cx)?;
                self.check_store(dst, n, false)?;
                let mut b = vec![0u8; n];
                self.read_bytes(a, &mut b, cx)?;
                self.write_bytes(dst, &b, cx)?;
                0
            }
            "copyinstr" => {
                let a = self.arg(args, 0, cx)?;
                let max = self.opt_arg(args, 1, cx)?;
                let mut s = Vec::new();
                self.read_string_cx(a, cx, &mut s)?;
                if let Some(m) = max {
                    s.truncate(m.max(0) as usize);
                }
                self.result(&s)?
            }
            "copyout" | "copyoutstr" => {
                let src = self.arg(args, 0, cx)?;
                let addr = self.arg(args, 1, cx)?;
                let n = self.arg(args, 2, cx)? as usize;
                let data = if name == "copyoutstr" {
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
            "progenyof" => {
                let p = self.arg(args, 0, cx)?;
                is_progeny(cx.pid, cx.ppid, p) as u64
            }
            "getmajor" => (self.arg(args, 0, cx)? >> 32) & 0xffff_ffff,
            "getminor" => self.arg(args, 0, cx)? & 0xffff_ffff,
            "wstrlen" | "wstringof" => {
                let a = self.arg(args, 0, cx)?;
                if a == 0 {
                    return if name == "wstrlen" {
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
                if name == "wstrlen" {
                    subr::wstrlen(&w, strsize) as u64
                } else {
                    subr::wstringof(&w, strsize, &mut out);
                    self.result(&out)?
                }
            }
            // dtx: the firing event's decoded fields by name (0 / "" when it has no such field)
            "etwfield" => {
                let field = self.str_arg(args, 0, cx)?;
                cx.memory.event_field(subr_cstr(&field)).unwrap_or(0)
            }
            "etwfield_str" => {
                let field = self.str_arg(args, 0, cx)?;
                cx.memory.event_field_str(subr_cstr(&field), &mut out);
                out.truncate(strsize.saturating_sub(1));
                self.result(&out)?
            }
            "ddi_pathname" => self.result(b"")?,
            // kernel objects that do not exist outside illumos
            "mutex_owned"
            | "mutex_owner"
            | "mutex_type_adaptive"
            | "mutex_type_spin"
            | "rw_read_held"
            | "rw_write_held"
            | "rw_iswriter"
            | "msgsize"
            | "msgdsize"
            | "getf" => 0,
            _ => return Err(Fault::IllegalOp),
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
