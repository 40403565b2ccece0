//! Symbols for live stacks: kernel addresses from `/proc/kallsyms`, user addresses through a
//! process's module map (`/proc/PID/maps`) and the ELF symbol tables of its files (the `object`
//! crate). [`LiveSymbols`] is the resolver the consumer prints `stack()`/`ustack()` and
//! `sym()`/`usym()` keys with; the source that records user stacks calls
//! [`SymbolTables::note_process`] so that the map of a process is kept even after it exits.
//!
//! The parsers take text and bytes, so they are tested on any OS; only the paths are Linux's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::elf_table::ElfSymbols;
use super::kallsyms::KernelSymbols;
use super::maps::{self, Mapping};
use crate::agg::SymbolResolver;

/// Symbol state shared by a live source (which notes processes) and the consumer (which
/// resolves addresses when it prints).
#[derive(Default)]
pub struct SymbolTables {
    kernel: Option<KernelSymbols>,
    /// Module maps of the processes seen, by pid.
    maps: HashMap<u32, Arc<Vec<Mapping>>>,
    /// ELF symbols by file path (`None`: the file could not be read).
    files: HashMap<String, Option<Arc<ElfSymbols>>>,
}

impl SymbolTables {
    pub fn new() -> Self {
        SymbolTables::default()
    }

    /// Reads the module map of `pid` unless it is known already.
    pub fn note_process(&mut self, pid: u32) {
        self.note_process_or(pid, None);
    }

    /// Reads the module map of `pid` unless it is known already; `recorded` (in
    /// `/proc/PID/maps` form) stands for it when the process is gone.
    pub fn note_process_or(&mut self, pid: u32, recorded: Option<&str>) {
        if pid == 0 || self.maps.contains_key(&pid) {
            return;
        }
        let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        let text = match (text.is_empty(), recorded) {
            (true, Some(r)) => r,
            _ => &text,
        };
        self.maps.insert(pid, Arc::new(maps::parse(text)));
    }

    /// Forgets the module map of `pid` (after an `exec` replaced it).
    pub fn forget_process(&mut self, pid: u32) {
        self.maps.remove(&pid);
    }

    fn kernel_symbols(&mut self) -> &KernelSymbols {
        self.kernel.get_or_insert_with(|| {
            KernelSymbols::parse(&std::fs::read_to_string("/proc/kallsyms").unwrap_or_default())
        })
    }

    fn file(&mut self, path: &str) -> Option<Arc<ElfSymbols>> {
        self.files
            .entry(path.to_string())
            .or_insert_with(|| {
                std::fs::read(path)
                    .ok()
                    .and_then(|b| ElfSymbols::parse_file(path, &b).ok())
                    .map(Arc::new)
            })
            .clone()
    }

    /// (module path, symbol name, symbol start) of a user address, or just the module.
    fn lookup_user(&mut self, pid: u32, addr: u64) -> UserLookup {
        self.note_process(pid);
        let Some(mut map) = self.maps.get(&pid).cloned() else {
            return UserLookup::None;
        };
        if maps::find(&map, addr).is_none() {
            // mapped after the map was read (dlopen): read it again while the process lives
            let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
            if !text.is_empty() {
                map = Arc::new(maps::parse(&text));
                self.maps.insert(pid, map.clone());
            }
        }
        let Some(m) = maps::find(&map, addr) else {
            return UserLookup::None;
        };
        if m.path.is_empty() || m.path.starts_with('[') {
            return UserLookup::None;
        }
        let path = m.path.clone();
        let file_off = addr - m.start + m.offset;
        match self.file(&path).and_then(|f| {
            let vaddr = f.file_offset_to_vaddr(file_off)?;
            let (name, start) = f.lookup(vaddr)?;
            Some((name.to_string(), addr - (vaddr - start)))
        }) {
            Some((name, start)) => UserLookup::Sym(path, name, start),
            None => UserLookup::Module(path),
        }
    }
}

enum UserLookup {
    Sym(String, String, u64),
    Module(String),
    None,
}

fn basename(p: &str) -> &str {
    crate::output::stack::basename(p)
}

fn frame(module: &str, name: &str, start: u64, addr: u64) -> String {
    if addr > start {
        format!("{module}`{name}+0x{:x}", addr - start)
    } else {
        format!("{module}`{name}")
    }
}

/// The resolver over shared [`SymbolTables`].
#[derive(Clone, Default)]
pub struct LiveSymbols(pub Arc<Mutex<SymbolTables>>);

impl LiveSymbols {
    pub fn new() -> Self {
        LiveSymbols::default()
    }

    fn with<R>(&self, f: impl FnOnce(&mut SymbolTables) -> R) -> R {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g)
    }
}

impl SymbolResolver for LiveSymbols {
    fn kernel(&self, addr: u64) -> String {
        self.with(|t| match t.kernel_symbols().lookup(addr) {
            Some(s) => frame(s.module, s.name, s.start, addr),
            None => format!("0x{addr:x}"),
        })
    }

    fn kmod(&self, addr: u64) -> String {
        self.with(|t| match t.kernel_symbols().lookup(addr) {
            Some(s) => s.module.to_string(),
            None => format!("0x{addr:x}"),
        })
    }

    fn user(&self, pid: u32, addr: u64) -> String {
        self.with(|t| match t.lookup_user(pid, addr) {
            UserLookup::Sym(m, n, start) => frame(basename(&m), &n, start, addr),
            UserLookup::Module(m) => format!("{}`0x{addr:x}", basename(&m)),
            UserLookup::None => format!("0x{addr:x}"),
        })
    }

    fn umod(&self, pid: u32, addr: u64) -> String {
        self.with(|t| match t.lookup_user(pid, addr) {
            UserLookup::Sym(m, _, _) | UserLookup::Module(m) => basename(&m).to_string(),
            UserLookup::None => format!("0x{addr:x}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_text_has_dtrace_shape() {
        assert_eq!(
            frame("libc.so.6", "read", 0x1000, 0x1010),
            "libc.so.6`read+0x10"
        );
        assert_eq!(frame("a.out", "main", 0x1000, 0x1000), "a.out`main");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn user_addresses_of_this_process_are_named() {
        #[inline(never)]
        fn symbols_test_target_function() -> u32 {
            std::hint::black_box(7)
        }
        let syms = LiveSymbols::new();
        let pc = symbols_test_target_function as *const () as usize as u64 + 1;
        let s = syms.user(std::process::id(), pc);
        assert!(
            s.ends_with("symbols::live::tests::user_addresses_of_this_process_are_named::symbols_test_target_function+0x1"),
            "{s}"
        );
        let exe = std::env::current_exe().unwrap();
        let base = exe.file_name().unwrap().to_string_lossy().into_owned();
        assert!(s.starts_with(&format!("{base}`")), "{s}");
        assert_eq!(syms.umod(std::process::id(), pc), base);
        // nothing is mapped at page 1
        assert_eq!(syms.user(std::process::id(), 0x1008), "0x1008");
        assert_eq!(symbols_test_target_function(), 7);
    }
}
