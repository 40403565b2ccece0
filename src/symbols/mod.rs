//! Symbols of user processes: the modules a process has mapped (from `/proc/PID/maps` text),
//! their ELF symbol tables, and address → `module`function+0xoff` lookup for `ustack()`.
//! Parsing is platform-neutral; only reading `/proc` needs Linux.

pub mod cfi;
pub mod debugfile;
pub mod decode;
pub mod elf;
pub mod elf_table;
pub mod kallsyms;
pub mod live;
pub mod managed;
pub mod maps;
pub mod msf;
pub mod pdb;
pub mod pdb_types;
pub mod pe;
pub mod process_types;
pub mod r2r;
pub mod symsrv;
pub mod trace;
pub mod unwind_info;

use std::collections::HashMap;
use std::sync::Arc;

pub use elf::{ElfImage, Function};
pub use live::{LiveSymbols, SymbolTables};
pub use trace::{PdbStore, TraceSymbols};

/// One line of `/proc/PID/maps` that maps a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub exec: bool,
    pub path: String,
}

/// Parses `/proc/PID/maps` text, keeping file mappings (see [`maps::parse`]).
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    maps::parse(text)
        .into_iter()
        .filter(|m| m.path.starts_with('/') || is_windows_path(&m.path))
        .map(|m| Mapping {
            start: m.start,
            end: m.end,
            offset: m.offset,
            exec: m.executable,
            path: m.path.trim_end_matches(" (deleted)").to_string(),
        })
        .collect()
}

/// A module loaded in a process: an ELF image and where it is.
#[derive(Clone)]
pub struct LoadedModule {
    /// Base name, as probes and stacks name it (`libc.so.6`).
    pub name: String,
    pub image: Arc<ElfImage>,
    /// Added to link-time addresses to get run-time ones.
    pub bias: u64,
    /// Run-time address range of the module's mappings.
    pub start: u64,
    pub end: u64,
    /// The main executable (also known as `a.out`).
    pub is_exec: bool,
}

impl LoadedModule {
    /// Whether a module field of a probe description (a glob) names this module.
    pub fn matches(&self, pattern: &str) -> bool {
        use crate::probes::glob_match;
        pattern.is_empty()
            || crate::probes::module_match(pattern, &self.name)
            || (self.is_exec && glob_match(pattern, "a.out"))
            || (!pattern.contains(['*', '?', '[']) && short_name_matches(pattern, &self.name))
    }
}

/// dtrace accepts a library named without its version suffix (`libc` for `libc.so.6`,
/// `libc.so` too); a Windows module without its extension and in any case (`kernel32` for
/// `KERNEL32.dll`).
fn short_name_matches(pattern: &str, name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    if (lower.ends_with(".dll") || lower.ends_with(".exe"))
        && (lower == pattern.to_ascii_lowercase()
            || lower[..lower.len() - 4] == pattern.to_ascii_lowercase())
    {
        return true;
    }
    name.strip_prefix(pattern).is_some_and(|rest| {
        rest.starts_with(".so") || (pattern.contains(".so") && rest.starts_with('.'))
    })
}

/// `C:\...`, `\\server\...`: an absolute Windows path (module lists of Windows targets).
fn is_windows_path(p: &str) -> bool {
    let b = p.as_bytes();
    (b.len() > 2 && b[0].is_ascii_alphabetic() && b[1] == b':' && b[2] == b'\\')
        || p.starts_with("\\\\")
}

/// Base name of a path (`/` or, for Windows paths, `\\` separated).
pub fn basename(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// The modules of one process.
#[derive(Clone, Default)]
pub struct ProcessModules {
    pub modules: Vec<LoadedModule>,
}

impl ProcessModules {
    /// Builds the module list from maps text; `exe` is the path of the main executable. Images
    /// already read (by path) are taken from `cache`.
    pub fn from_maps(
        maps: &str,
        exe: &str,
        cache: &mut HashMap<String, Arc<ElfImage>>,
    ) -> ProcessModules {
        let maps = parse_maps(maps);
        let mut order: Vec<String> = Vec::new();
        let mut ranges: HashMap<String, (u64, u64, Option<u64>)> = HashMap::new();
        for m in &maps {
            let e = ranges.entry(m.path.clone()).or_insert_with(|| {
                order.push(m.path.clone());
                (m.start, m.end, None)
            });
            e.0 = e.0.min(m.start);
            e.1 = e.1.max(m.end);
            if m.offset == 0 && e.2.is_none() {
                e.2 = Some(m.start);
            }
        }
        let mut modules = Vec::new();
        for path in order {
            let (start, end, base) = ranges[&path];
            let image = match cache.get(&path) {
                Some(i) => i.clone(),
                None => match ElfImage::open(&path) {
                    Ok(i) => {
                        cache.insert(path.clone(), i.clone());
                        i
                    }
                    Err(_) => continue,
                },
            };
            let base = base.unwrap_or(start);
            modules.push(LoadedModule {
                name: basename(&path).to_string(),
                bias: base.wrapping_sub(image.first_load),
                image,
                start,
                end,
                is_exec: path == exe,
            });
        }
        ProcessModules { modules }
    }

    /// The module holding run-time address `pc`.
    pub fn module_at(&self, pc: u64) -> Option<&LoadedModule> {
        self.modules.iter().find(|m| pc >= m.start && pc < m.end)
    }

    /// `ustack()` text lookup of a run-time address.
    pub fn lookup(&self, pc: u64) -> crate::output::stack::Lookup {
        use crate::output::stack::Lookup;
        let Some(m) = self.module_at(pc) else {
            return Lookup::None;
        };
        match m.image.function_at(pc.wrapping_sub(m.bias)) {
            Some(f) => Lookup::Sym {
                module: m.name.clone(),
                name: f.name.clone(),
                start: f.addr.wrapping_add(m.bias),
            },
            None => Lookup::Module(m.name.clone()),
        }
    }
}

/// A resolver its owner replaces while the consumer holds it: a live source hands the consumer
/// this once and puts a newer resolver in as the system's images change.
#[derive(Clone)]
pub struct SharedNames(pub std::sync::Arc<std::sync::Mutex<TraceSymbols>>);

impl SharedNames {
    fn with<T>(&self, f: impl FnOnce(&TraceSymbols) -> T) -> T {
        f(&self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl crate::agg::SymbolResolver for SharedNames {
    fn kernel(&self, addr: u64) -> String {
        self.with(|r| r.kernel(addr))
    }
    fn user(&self, pid: u32, addr: u64) -> String {
        self.with(|r| r.user(pid, addr))
    }
    fn kmod(&self, addr: u64) -> String {
        self.with(|r| r.kmod(addr))
    }
    fn umod(&self, pid: u32, addr: u64) -> String {
        self.with(|r| r.umod(pid, addr))
    }
    fn kernel_func(&self, addr: u64) -> String {
        self.with(|r| r.kernel_func(addr))
    }
    fn user_func(&self, pid: u32, addr: u64) -> String {
        self.with(|r| r.user_func(pid, addr))
    }
    fn user_lookup(&self, pid: u32, addr: u64) -> crate::output::stack::Lookup {
        self.with(|r| r.user_lookup(pid, addr))
    }
    fn kernel_at(&self, epoch: u32, addr: u64) -> String {
        self.with(|r| r.kernel_at(epoch, addr))
    }
    fn user_at(&self, pid: u32, epoch: u32, addr: u64) -> String {
        self.with(|r| r.user_at(pid, epoch, addr))
    }
    fn user_lookup_at(&self, pid: u32, epoch: u32, addr: u64) -> crate::output::stack::Lookup {
        self.with(|r| r.user_lookup_at(pid, epoch, addr))
    }
}

/// Several resolvers asked in turn: each address takes the first answer that names it (an
/// unnamed address prints as `0x...`). A run with a pid target and live ETW names the
/// target's frames from its modules and the rest from the session's images.
pub struct FirstNamed(pub Vec<Box<dyn crate::agg::SymbolResolver + Send>>);

impl FirstNamed {
    fn first(&self, f: impl Fn(&dyn crate::agg::SymbolResolver) -> String) -> String {
        let mut last = String::new();
        for r in &self.0 {
            last = f(r.as_ref());
            if !last.starts_with("0x") {
                break;
            }
        }
        last
    }
}

impl crate::agg::SymbolResolver for FirstNamed {
    fn kernel(&self, addr: u64) -> String {
        self.first(|r| r.kernel(addr))
    }
    fn user(&self, pid: u32, addr: u64) -> String {
        self.first(|r| r.user(pid, addr))
    }
    fn kmod(&self, addr: u64) -> String {
        self.first(|r| r.kmod(addr))
    }
    fn umod(&self, pid: u32, addr: u64) -> String {
        self.first(|r| r.umod(pid, addr))
    }
    fn kernel_func(&self, addr: u64) -> String {
        self.first(|r| r.kernel_func(addr))
    }
    fn user_func(&self, pid: u32, addr: u64) -> String {
        self.first(|r| r.user_func(pid, addr))
    }
    fn user_lookup(&self, pid: u32, addr: u64) -> crate::output::stack::Lookup {
        self.first_lookup(|r| r.user_lookup(pid, addr))
    }
    fn kernel_at(&self, epoch: u32, addr: u64) -> String {
        self.first(|r| r.kernel_at(epoch, addr))
    }
    fn user_at(&self, pid: u32, epoch: u32, addr: u64) -> String {
        self.first(|r| r.user_at(pid, epoch, addr))
    }
    fn user_lookup_at(&self, pid: u32, epoch: u32, addr: u64) -> crate::output::stack::Lookup {
        self.first_lookup(|r| r.user_lookup_at(pid, epoch, addr))
    }
}

impl FirstNamed {
    /// The first lookup that names a symbol, else the first that names a module.
    fn first_lookup(
        &self,
        f: impl Fn(&dyn crate::agg::SymbolResolver) -> crate::output::stack::Lookup,
    ) -> crate::output::stack::Lookup {
        let mut best = crate::output::stack::Lookup::None;
        for r in &self.0 {
            match f(r.as_ref()) {
                crate::output::stack::Lookup::None => {}
                l @ crate::output::stack::Lookup::Sym { .. } => return l,
                l => {
                    if matches!(best, crate::output::stack::Lookup::None) {
                        best = l;
                    }
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(u64, &'static str);

    impl crate::agg::SymbolResolver for Named {
        fn kernel(&self, addr: u64) -> String {
            if addr == self.0 {
                self.1.to_string()
            } else {
                format!("0x{addr:x}")
            }
        }
    }

    #[test]
    fn the_first_resolver_that_names_an_address_answers() {
        let r = FirstNamed(vec![
            Box::new(Named(1, "a`f+0x1")),
            Box::new(Named(2, "b`g+0x2")),
        ]);
        use crate::agg::SymbolResolver;
        assert_eq!(r.kernel(1), "a`f+0x1");
        assert_eq!(r.kernel(2), "b`g+0x2");
        assert_eq!(r.kernel(3), "0x3");
        assert_eq!(r.kernel_func(2), "b`g");
    }

    #[test]
    fn maps_lines() {
        let t = "55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 123 /usr/bin/x y\n\
                 55d0c0a01000-55d0c0a02000 r-xp 00001000 08:01 123 /usr/bin/x y\n\
                 7ffd1000-7ffd2000 rw-p 00000000 00:00 0 [stack]\n";
        let m = parse_maps(t);
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].start, 0x55d0c0a01000);
        assert_eq!(m[1].offset, 0x1000);
        assert!(m[1].exec && !m[0].exec);
        assert_eq!(m[0].path, "/usr/bin/x y");
    }

    #[test]
    fn library_short_names() {
        assert!(short_name_matches("libc", "libc.so.6"));
        assert!(short_name_matches("libc.so", "libc.so.6"));
        assert!(!short_name_matches("lib", "libc.so.6"));
        assert!(!short_name_matches("libc", "libcrypt.so.1"));
    }
}
