//! Function symbols of an ELF file (`.symtab` and `.dynsym`) and its loadable segments, to turn
//! an address inside a mapping of the file into a function name.

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

pub struct ElfSymbols {
    /// (address, size, name), sorted by address.
    syms: Vec<(u64, u64, Box<str>)>,
    /// Loadable segments: (file offset, file size, virtual address).
    segments: Vec<(u64, u64, u64)>,
}

impl ElfSymbols {
    /// The symbols of the ELF file `data` alone.
    pub fn parse(data: &[u8]) -> Result<ElfSymbols, String> {
        Self::parse_with(data, None)
    }

    /// The symbols of the ELF file at `path` (its bytes `data`) and, when it has no
    /// `.symtab`, of its separate debug file where one is installed
    /// ([`super::debugfile`]).
    pub fn parse_file(path: &str, data: &[u8]) -> Result<ElfSymbols, String> {
        let file = object::File::parse(data).map_err(|e| e.to_string())?;
        let debug = if file.symbols().next().is_none() {
            super::debugfile::read_for(std::path::Path::new(path), &file)
        } else {
            None
        };
        Self::parse_with(data, debug.as_deref())
    }

    fn parse_with(data: &[u8], debug: Option<&[u8]>) -> Result<ElfSymbols, String> {
        let file = object::File::parse(data).map_err(|e| e.to_string())?;
        if file.format() != object::BinaryFormat::Elf {
            return Err("not an ELF file".into());
        }
        let debug = debug.and_then(|d| object::File::parse(d).ok());
        let from_debug = debug.iter().flat_map(|f| f.symbols());
        // at one address the first name stays: the file's own, then the exported one, then
        // the debug file's (a stripped library's exported names read as they always have)
        let mut syms: Vec<(u64, u64, Box<str>)> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .chain(from_debug)
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .filter_map(|s| Some((s.address(), s.size(), demangle(s.name().ok()?).into())))
            .filter(|(_, _, n): &(u64, u64, Box<str>)| !n.is_empty())
            .collect();
        syms.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        syms.dedup_by_key(|s| s.0);
        let segments = file
            .segments()
            .filter_map(|s| {
                let (off, size) = s.file_range();
                (size > 0).then_some((off, size, s.address()))
            })
            .collect();
        Ok(ElfSymbols { syms, segments })
    }

    /// The virtual address (as the file's symbols use) of a byte at `off` in the file.
    pub fn file_offset_to_vaddr(&self, off: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(o, s, _)| off >= *o && off < o + s)
            .map(|(o, _, a)| off - o + a)
    }

    /// The function containing `vaddr`: (name, start).
    pub fn lookup(&self, vaddr: u64) -> Option<(&str, u64)> {
        let i = self.syms.partition_point(|s| s.0 <= vaddr).checked_sub(1)?;
        let (start, size, name) = &self.syms[i];
        // a sized symbol must contain the address; unsized ones (assembly) are taken as is.
        // One past its end is its own too: the return address of a call that ends a function
        // which never returns (`exit` calling `__run_exit_handlers`), as a stack shows it
        if *size != 0 && vaddr > start + size {
            return None;
        }
        Some((name, *start))
    }

    pub fn len(&self) -> usize {
        self.syms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }
}

/// A readable name for an Itanium-style nested name (`_ZN3std2io5stdio6_print17h0123456789abcdefE`
/// → `std::io::stdio::_print`), as Rust's legacy mangling and C++ produce; other names are kept.
/// Rust's hash component is dropped and its `$..$` escapes decoded; C++ parameter types after the
/// name are not shown.
pub fn demangle(name: &str) -> String {
    let Some(mut rest) = name.strip_prefix("_ZN") else {
        return name.to_string();
    };
    let mut parts: Vec<String> = Vec::new();
    while !rest.is_empty() && !rest.starts_with('E') {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let Ok(len) = rest[..digits].parse::<usize>() else {
            return name.to_string();
        };
        let Some(part) = rest.get(digits..digits + len) else {
            return name.to_string();
        };
        parts.push(part.to_string());
        rest = &rest[digits + len..];
    }
    if !rest.starts_with('E') || parts.is_empty() {
        return name.to_string();
    }
    let is_hash = |p: &str| {
        p.len() == 17 && p.starts_with('h') && p[1..].bytes().all(|c| c.is_ascii_hexdigit())
    };
    if parts.len() > 1 && parts.last().is_some_and(|p| is_hash(p)) {
        parts.pop();
    }
    let parts: Vec<String> = parts.iter().map(|p| unescape(p)).collect();
    parts.join("::")
}

/// Rust legacy mangling escapes: `$LT$` `<`, `$GT$` `>`, `$RF$` `&`, `$BP$` `*`, `$C$` `,`,
/// `$u20$` and other `$uXX$` code points, `..` for `::`, a leading `_$` for `$`.
fn unescape(p: &str) -> String {
    let p = p
        .strip_prefix("_$")
        .map_or(p.to_string(), |r| format!("${r}"));
    let mut out = String::with_capacity(p.len());
    let mut rest = p.as_str();
    while let Some(i) = rest.find(['$', '.']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(t) = tail.strip_prefix("..") {
            out.push_str("::");
            rest = t;
            continue;
        }
        if let Some(t) = tail.strip_prefix('.') {
            out.push('.');
            rest = t;
            continue;
        }
        let Some(end) = tail[1..].find('$') else {
            out.push_str(tail);
            return out;
        };
        let code = &tail[1..1 + end];
        let text = match code {
            "LT" => Some('<'),
            "GT" => Some('>'),
            "RF" => Some('&'),
            "BP" => Some('*'),
            "C" => Some(','),
            "SP" => Some('@'),
            "LP" => Some('('),
            "RP" => Some(')'),
            _ => code
                .strip_prefix('u')
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .and_then(char::from_u32),
        };
        match text {
            Some(c) => out.push(c),
            None => out.push_str(&tail[..end + 2]),
        }
        rest = &tail[end + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_names_are_demangled() {
        assert_eq!(
            demangle("_ZN3std2io5stdio6_print17h0123456789abcdefE"),
            "std::io::stdio::_print"
        );
        assert_eq!(
            demangle("_ZN4core3ptr85drop_in_place$LT$std..rt..lang_start$LT$$LP$$RP$$GT$..$u7b$$u7b$closure$u7d$$u7d$$GT$17h0123456789abcdefE"),
            "core::ptr::drop_in_place<std::rt::lang_start<()>::{{closure}}>"
        );
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar");
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_ZN3fooE"), "foo");
        // malformed names are kept as they are
        assert_eq!(demangle("_ZN99fooE"), "_ZN99fooE");
        assert_eq!(demangle("_ZN3foo"), "_ZN3foo");
    }

    #[test]
    fn a_return_address_just_past_a_function_names_it() {
        let e = ElfSymbols {
            syms: vec![(0x1000, 0x20, "exit".into()), (0x1040, 0x10, "next".into())],
            segments: Vec::new(),
        };
        assert_eq!(e.lookup(0x101f), Some(("exit", 0x1000)));
        // a call that ends `exit` returns to 0x1020
        assert_eq!(e.lookup(0x1020), Some(("exit", 0x1000)));
        // padding between functions is no one's
        assert_eq!(e.lookup(0x1030), None);
        assert_eq!(e.lookup(0x1040), Some(("next", 0x1040)));
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(ElfSymbols::parse(b"not an object file").is_err());
        assert!(ElfSymbols::parse(&[0x7f, b'E', b'L', b'F', 2, 1, 1]).is_err());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn own_executable_names_its_functions() {
        #[inline(never)]
        fn marker_function_for_symbols() -> u64 {
            std::hint::black_box(42)
        }
        let exe = std::env::current_exe().unwrap();
        let e = ElfSymbols::parse(&std::fs::read(exe).unwrap()).unwrap();
        assert!(!e.is_empty());
        // the function's own address, relative to the executable's load address, names it
        let f = marker_function_for_symbols as *const () as usize as u64;
        let maps = super::super::maps::parse(&std::fs::read_to_string("/proc/self/maps").unwrap());
        let m = super::super::maps::find(&maps, f).unwrap();
        let vaddr = e.file_offset_to_vaddr(f - m.start + m.offset).unwrap();
        let (name, start) = e.lookup(vaddr).unwrap();
        assert!(name.ends_with("::marker_function_for_symbols"), "{name}");
        assert!(start <= vaddr);
        assert_eq!(marker_function_for_symbols(), 42);
    }
}
