//! `stack()` / `ustack()` / `jstack()` output and the text of `sym()`,
//! `mod()`, `usym()`, `uaddr()` and `umod()` — as dtrace formats them.
//!
//! A stack is printed as a newline followed by one line per frame, each
//! indented by the `stackindent` option (default 14):
//!
//! ```text
//! (newline)
//!               genunix`cv_wait+0x3c
//!               0xfffffffffb84c2a1
//! ```
//!
//! Frames stop at the first zero program counter.

use super::memory::{pad_str, spaces};

/// Default `stackindent`.
pub const DEFAULT_INDENT: usize = 14;

/// Result of looking up an address (it lives beside [`crate::agg::SymbolResolver`], which
/// returns it).
pub use crate::agg::Lookup;

/// `module`sym+0xoff` (or without `+0x..` when at/before the symbol start),
/// `module`0xaddr`, or `0xaddr` — dtrace's frame text.  For user frames
/// the module is reduced to its base name first.
pub fn frame_text(pc: u64, lookup: &Lookup, user: bool) -> String {
    match lookup {
        Lookup::Sym {
            module,
            name,
            start,
        } => {
            // a trace's image and symbol names are a stranger's text
            let m = super::shown::shown(if user { basename(module) } else { module });
            let name = super::shown::shown(name);
            if pc > *start {
                format!("{m}`{name}+0x{:x}", pc - start)
            } else {
                format!("{m}`{name}")
            }
        }
        Lookup::Module(module) => {
            let m = super::shown::shown(if user { basename(module) } else { module });
            format!("{m}`0x{pc:x}")
        }
        Lookup::None => format!("0x{pc:x}"),
    }
}

/// The last path component (either separator), as dtrace's `dt_basename`.
pub fn basename(path: &str) -> &str {
    match path.rfind(['/', '\\']) {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// `stack()`: `frames` are the recorded program counters (the record holds
/// the requested depth; a zero ends the stack).
pub fn stack(frames: &[u64], indent: usize, resolve: &dyn Fn(u64) -> Lookup, out: &mut Vec<u8>) {
    out.push(b'\n');
    for &pc in frames {
        if pc == 0 {
            break;
        }
        spaces(indent, out);
        out.extend_from_slice(frame_text(pc, &resolve(pc), false).as_bytes());
        out.push(b'\n');
    }
}

/// `stack()` with a simple resolver that returns the finished frame text
/// (or `None` for a bare `0x...` address).
pub fn stack_simple(
    frames: &[u64],
    indent: usize,
    resolve: &dyn Fn(u64) -> Option<String>,
    out: &mut Vec<u8>,
) {
    out.push(b'\n');
    for &pc in frames {
        if pc == 0 {
            break;
        }
        spaces(indent, out);
        match resolve(pc) {
            Some(t) => out.extend_from_slice(t.as_bytes()),
            None => out.extend_from_slice(format!("0x{pc:x}").as_bytes()),
        }
        out.push(b'\n');
    }
}

/// `ustack()`/`jstack()`.  `frames` are the program counters (without the
/// leading pid word); an empty `frames` prints nothing at all (dtrace's
/// depth-0 case).  `strtab` is the helper string table (NUL-separated
/// strings, one per frame) if the record has one.
///
/// A frame that the resolver cannot name as a symbol uses its helper string
/// when that string is non-empty and does not start with `@`; a string
/// starting with `@` is an annotation printed beneath the frame as
/// `  [ text ]`.  (dtrace also refuses helper strings for addresses in
/// non-writable mappings; a resolver that knows this should return
/// `Lookup::Module` for such frames — the string is then still used, so
/// callers wanting that refinement must pass `strtab: None`.)
pub fn ustack(
    pid: u32,
    frames: &[u64],
    strtab: Option<&[u8]>,
    indent: usize,
    resolve: &dyn Fn(u64) -> Lookup,
    out: &mut Vec<u8>,
) {
    let _ = pid;
    if frames.is_empty() {
        return;
    }
    out.push(b'\n');
    let mut strs = strtab.filter(|s| !s.is_empty());
    for &pc in frames {
        if pc == 0 {
            break;
        }
        spaces(indent, out);
        let cur: Option<&[u8]> = strs.map(|s| match s.iter().position(|&b| b == 0) {
            Some(n) => &s[..n],
            None => s,
        });
        let lk = resolve(pc);
        match (&lk, cur) {
            (Lookup::Sym { .. }, _) => out.extend_from_slice(frame_text(pc, &lk, true).as_bytes()),
            (_, Some(s)) if !s.is_empty() && s[0] != b'@' => out.extend_from_slice(s),
            _ => out.extend_from_slice(frame_text(pc, &lk, true).as_bytes()),
        }
        out.push(b'\n');
        if let Some(s) = cur {
            if s.first() == Some(&b'@') {
                spaces(indent, out);
                out.extend_from_slice(b"  [ ");
                out.extend_from_slice(&s[1..]);
                out.extend_from_slice(b" ]");
                out.push(b'\n');
            }
            strs = strs.and_then(|all| {
                let next = s.len() + 1;
                if next >= all.len() {
                    None
                } else {
                    Some(&all[next..])
                }
            });
        }
    }
}

/// `sym(addr)` / `func(addr)`: the symbol without offset.
pub fn sym_text(pc: u64, lookup: &Lookup) -> String {
    match lookup {
        Lookup::Sym { module, name, .. } => format!("{module}`{name}"),
        Lookup::Module(m) => format!("{m}`0x{pc:x}"),
        Lookup::None => format!("0x{pc:x}"),
    }
}

/// `mod(addr)`: the module name only.
pub fn mod_text(pc: u64, lookup: &Lookup) -> String {
    match lookup {
        Lookup::Sym { module, .. } | Lookup::Module(module) => module.clone(),
        Lookup::None => format!("0x{pc:x}"),
    }
}

/// `uaddr(addr)`: like a ustack frame (offset included).
pub fn uaddr_text(pc: u64, lookup: &Lookup) -> String {
    frame_text(pc, lookup, true)
}

/// `usym(addr)` / `ufunc(addr)`: the symbol without offset (dtrace moves
/// the address to the symbol start before formatting).
pub fn usym_text(pc: u64, lookup: &Lookup) -> String {
    match lookup {
        Lookup::Sym { start, .. } => frame_text(*start, lookup, true),
        _ => frame_text(pc, lookup, true),
    }
}

/// `umod(addr)`: base name of the containing object, else `0x...`.
pub fn umod_text(pc: u64, lookup: &Lookup) -> String {
    match lookup {
        Lookup::Sym { module, .. } | Lookup::Module(module) => basename(module).to_string(),
        Lookup::None => format!("0x{pc:x}"),
    }
}

/// How `sym()` & co. appear in trace output: `"  %-50s"`.
pub fn symbolic_field(text: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(b"  ");
    pad_str(text.as_bytes(), -50, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kres(pc: u64) -> Lookup {
        match pc {
            0x1000..=0x1fff => Lookup::Sym {
                module: "genunix".into(),
                name: "cv_wait".into(),
                start: 0x1000,
            },
            0x2000..=0x2fff => Lookup::Module("unix".into()),
            _ => Lookup::None,
        }
    }

    #[test]
    fn kernel_stack() {
        let mut out = Vec::new();
        stack(
            &[0x1010, 0x1000, 0x2abc, 0xdead, 0, 0x1000],
            14,
            &kres,
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\n              genunix`cv_wait+0x10\n              genunix`cv_wait\n              unix`0x2abc\n              0xdead\n"
        );
    }

    #[test]
    fn user_stack_annotated() {
        // i386/ustack/tst.annotated.d.out
        let res = |pc: u64| {
            if pc == 0x400 {
                Lookup::Sym {
                    module: "C:\\tmp\\tst.annotated.exe".into(),
                    name: "baz".into(),
                    start: 0x400,
                }
            } else {
                Lookup::None
            }
        };
        let mut out = Vec::new();
        ustack(
            1,
            &[0x400, 0],
            Some(b"@it's annotated\0"),
            14,
            &res,
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\n              tst.annotated.exe`baz\n                [ it's annotated ]\n"
        );
    }

    #[test]
    fn user_stack_helper_strings() {
        let mut out = Vec::new();
        ustack(
            1,
            &[0x10, 0x20, 0x30],
            Some(b"foo\0\0bar"),
            2,
            &|_| Lookup::None,
            &mut out,
        );
        assert_eq!(String::from_utf8(out).unwrap(), "\n  foo\n  0x20\n  bar\n");
        let mut out = Vec::new();
        ustack(1, &[], None, 2, &|_| Lookup::None, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn sym_family() {
        let l = kres(0x1010);
        assert_eq!(sym_text(0x1010, &l), "genunix`cv_wait");
        assert_eq!(mod_text(0x1010, &l), "genunix");
        assert_eq!(mod_text(5, &Lookup::None), "0x5");
        let u = Lookup::Sym {
            module: "/usr/lib/libc.so.1".into(),
            name: "printf".into(),
            start: 0x100,
        };
        assert_eq!(usym_text(0x104, &u), "libc.so.1`printf");
        assert_eq!(uaddr_text(0x104, &u), "libc.so.1`printf+0x4");
        assert_eq!(umod_text(0x104, &u), "libc.so.1");
        let mut out = Vec::new();
        symbolic_field("x", &mut out);
        assert_eq!(out.len(), 52);
    }
}
