//! Names for the addresses of a recorded trace: the images its processes had loaded (from the
//! Image rundown and load events), so a frame prints as `module+0xoffset` until PDB symbols are
//! read. Kernel modules are the images of process 0.

use std::collections::HashMap;

use crate::agg::SymbolResolver;
use crate::etw::state::SystemState;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Module {
    base: u64,
    end: u64,
    name: String,
}

/// The modules of a trace's processes, as the trace knew them when this was taken.
#[derive(Clone, Debug, Default)]
pub struct TraceSymbols {
    kernel: Vec<Module>,
    user: HashMap<u32, Vec<Module>>,
    /// Code ranges of managed (JIT-compiled or precompiled .NET) methods by process, looked up
    /// before the images: a precompiled method lies inside its image.
    methods: HashMap<u32, Vec<Module>>,
}

fn modules<'a>(images: impl Iterator<Item = &'a crate::etw::state::Image>) -> Vec<Module> {
    let mut v: Vec<Module> = images
        .filter(|i| i.size > 0)
        .map(|i| Module {
            base: i.base,
            end: i.base.saturating_add(i.size),
            name: crate::output::stack::basename(&i.file_name).to_string(),
        })
        .collect();
    v.sort_by_key(|m| m.base);
    v
}

fn find(mods: &[Module], addr: u64) -> Option<&Module> {
    let i = mods.partition_point(|m| m.base <= addr).checked_sub(1)?;
    let m = &mods[i];
    (addr < m.end).then_some(m)
}

impl TraceSymbols {
    pub fn from_state(state: &SystemState) -> TraceSymbols {
        let mut t = TraceSymbols::default();
        for p in state.processes() {
            let m = modules(p.images.iter());
            if m.is_empty() {
                continue;
            }
            if p.pid == 0 {
                t.kernel = m;
            } else {
                t.user.entry(p.pid).or_default().extend(m);
            }
        }
        for v in t.user.values_mut() {
            v.sort_by_key(|m| m.base);
        }
        t
    }

    /// Adds the code ranges of .NET methods: (pid, start, size, name).
    pub fn add_methods<'a>(&mut self, methods: impl Iterator<Item = (u32, u64, u64, &'a str)>) {
        for (pid, start, size, name) in methods {
            self.methods.entry(pid).or_default().push(Module {
                base: start,
                end: start.saturating_add(size),
                name: name.to_string(),
            });
        }
        for v in self.methods.values_mut() {
            v.sort_by_key(|m| m.base);
            v.dedup_by_key(|m| m.base);
        }
    }

    fn module(&self, pid: Option<u32>, addr: u64) -> Option<&Module> {
        pid.and_then(|p| self.methods.get(&p))
            .and_then(|m| find(m, addr))
            .or_else(|| {
                pid.and_then(|p| self.user.get(&p))
                    .and_then(|m| find(m, addr))
            })
            .or_else(|| find(&self.kernel, addr))
    }

    fn text(&self, pid: Option<u32>, addr: u64) -> String {
        match self.module(pid, addr) {
            Some(m) => format!("{}+0x{:x}", m.name, addr - m.base),
            None => format!("0x{addr:x}"),
        }
    }
}

impl SymbolResolver for TraceSymbols {
    fn kernel(&self, addr: u64) -> String {
        self.text(None, addr)
    }
    fn user(&self, pid: u32, addr: u64) -> String {
        self.text(Some(pid), addr)
    }
    fn kmod(&self, addr: u64) -> String {
        self.module(None, addr)
            .map(|m| m.name.clone())
            .unwrap_or_else(|| format!("0x{addr:x}"))
    }
    fn umod(&self, pid: u32, addr: u64) -> String {
        self.module(Some(pid), addr)
            .map(|m| m.name.clone())
            .unwrap_or_else(|| format!("0x{addr:x}"))
    }
    // a frame's function is not known without PDBs: keys by function merge by module offset
    fn kernel_func(&self, addr: u64) -> String {
        self.kernel(addr)
    }
    fn user_func(&self, pid: u32, addr: u64) -> String {
        self.user(pid, addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_by_module_and_offset() {
        let mut t = TraceSymbols {
            kernel: vec![Module {
                base: 0xfffff800_00000000,
                end: 0xfffff800_00100000,
                name: "ntoskrnl.exe".into(),
            }],
            user: [(
                7,
                vec![Module {
                    base: 0x400000,
                    end: 0x500000,
                    name: "app.exe".into(),
                }],
            )]
            .into_iter()
            .collect(),
            methods: HashMap::new(),
        };
        assert_eq!(t.kernel(0xfffff800_00001234), "ntoskrnl.exe+0x1234");
        assert_eq!(t.user(7, 0x400010), "app.exe+0x10");
        assert_eq!(t.user(8, 0x400010), "0x400010");
        assert_eq!(t.umod(7, 0x400010), "app.exe");
        assert_eq!(t.kernel(0x10), "0x10");
        // .NET methods: a precompiled one inside its image wins, the rest of the image stays
        t.add_methods(
            [
                (7, 0x401000, 0x100, "System.String.Concat"),
                (7, 0x401000, 0x100, "System.String.Concat"),
                (7, 0x7f0000, 0x20, "App.Main"),
            ]
            .into_iter(),
        );
        assert_eq!(t.user(7, 0x401010), "System.String.Concat+0x10");
        assert_eq!(t.user(7, 0x401200), "app.exe+0x1200");
        assert_eq!(t.user(7, 0x7f0004), "App.Main+0x4");
        assert_eq!(t.user(7, 0x7f0024), "0x7f0024");
        assert_eq!(t.methods[&7].len(), 2);
    }
}
