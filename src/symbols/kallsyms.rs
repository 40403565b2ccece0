//! Kernel symbols from the text of `/proc/kallsyms` (`address type name [module]`). Functions
//! (text symbols) only; an address resolves to the nearest one at or below it. Core kernel
//! symbols belong to the module `vmlinux`, as in dtrace on Linux.

/// A resolved kernel symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelSymbol<'a> {
    pub module: &'a str,
    pub name: &'a str,
    pub start: u64,
}

#[derive(Default)]
pub struct KernelSymbols {
    /// (address, name, index into `modules`), sorted by address.
    syms: Vec<(u64, Box<str>, u16)>,
    modules: Vec<String>,
}

impl KernelSymbols {
    pub fn parse(text: &str) -> KernelSymbols {
        let mut modules = vec!["vmlinux".to_string()];
        let mut syms = Vec::new();
        for line in text.lines() {
            let mut it = line.split_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            if !matches!(kind, "t" | "T" | "w" | "W") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr == 0 {
                // addresses hidden by kptr_restrict
                continue;
            }
            let module = match it.next() {
                Some(m) if m.starts_with('[') => {
                    let m = m.trim_start_matches('[').trim_end_matches(']');
                    match modules.iter().position(|x| x == m) {
                        Some(i) => i,
                        None => {
                            modules.push(m.to_string());
                            modules.len() - 1
                        }
                    }
                }
                _ => 0,
            };
            syms.push((addr, name.into(), module.min(u16::MAX as usize) as u16));
        }
        syms.sort_by_key(|s| s.0);
        KernelSymbols { syms, modules }
    }

    pub fn len(&self) -> usize {
        self.syms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The function containing `addr`: the nearest symbol at or below it.
    pub fn lookup(&self, addr: u64) -> Option<KernelSymbol<'_>> {
        let i = self.syms.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        // past the last symbol there is no telling where the text ends
        if i + 1 == self.syms.len() && addr - self.syms[i].0 > 1 << 20 {
            return None;
        }
        let (start, name, m) = &self.syms[i];
        Some(KernelSymbol {
            module: &self.modules[*m as usize],
            name,
            start: *start,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_text_symbol_with_module() {
        let k = KernelSymbols::parse(
            "ffffffff81000000 T _stext\n\
             ffffffff81001000 t do_syscall_64\n\
             ffffffff81002000 D some_data\n\
             ffffffff81003000 T ksys_write\n\
             ffffffffc0001000 t ext4_readdir\t[ext4]\n\
             0000000000000000 T hidden\n",
        );
        assert_eq!(k.len(), 4);
        let s = k.lookup(0xffffffff81001010).unwrap();
        assert_eq!(
            (s.module, s.name, s.start),
            ("vmlinux", "do_syscall_64", 0xffffffff81001000)
        );
        // data symbols do not split functions
        assert_eq!(k.lookup(0xffffffff81002010).unwrap().name, "do_syscall_64");
        let m = k.lookup(0xffffffffc0001004).unwrap();
        assert_eq!((m.module, m.name), ("ext4", "ext4_readdir"));
        assert!(k.lookup(0x1000).is_none());
        assert!(k.lookup(0xffffffffc1001004).is_none());
    }
}
