//! Managed (.NET) methods of a live process: where the runtime put the native code of each
//! method it compiled, by assembly and name. Platform-neutral; on Linux it is fed by the
//! runtime's perf map (`/tmp/perf-PID.map`, written when `DOTNET_PerfMapEnabled=1` or
//! `COMPlus_PerfMapEnabled=1`), one line per code version as the JIT produces it.
//!
//! The perf map format is the one `perf` reads (`START SIZE name`, hexadecimal, see the Linux
//! kernel's tools/perf/Documentation/jit-interface.txt); CoreCLR's perfmap.cpp writes the name
//! as `RETTYPE [ASSEMBLY] Namespace.Type::Method(PARAMS)[TIER]` for methods and
//! `stub<N> KIND` for its stubs (observed with .NET Core 3.1; the `[TIER]` suffix is
//! `QuickJitted`, `Optimized`, `OptimizedTier1`, `PreJIT`, ...).

use crate::output::stack::Lookup;

/// One code version of a managed method (or a runtime stub).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedMethod {
    /// Run-time address of the code.
    pub start: u64,
    pub size: u64,
    /// The assembly's simple name (`app`, `System.Private.CoreLib`); empty for a runtime stub.
    pub module: String,
    /// `Namespace.Type.Method`: the runtime's `Type::Method` with a dot, as `:` separates the
    /// fields of a probe description. A stub's whole text.
    pub name: String,
    /// The parameter list as the runtime prints it: `(int32,int32)`.
    pub signature: String,
    /// The code version's optimization tier (`QuickJitted`, `OptimizedTier1`, ...), empty when
    /// the runtime does not say.
    pub tier: String,
}

impl ManagedMethod {
    /// A runtime stub (precode, call counter): code, but no method a probe can name.
    pub fn is_stub(&self) -> bool {
        self.module.is_empty()
    }
}

/// One line of a perf map: `START SIZE NAME` with a managed method's or a stub's name. `None`
/// for a line of another shape.
pub fn parse_perf_map_line(line: &str) -> Option<ManagedMethod> {
    let line = line.trim_end_matches(['\r', '\n']);
    let mut parts = line.splitn(3, ' ');
    let start = u64::from_str_radix(parts.next()?, 16).ok()?;
    let size = u64::from_str_radix(parts.next()?, 16).ok()?;
    let text = parts.next()?.trim();
    if text.is_empty() || size == 0 {
        return None;
    }
    // the assembly: the first space-separated `[name]` token (a return type like `string[]`
    // or `int32[,]` is not one)
    let mut at = 0;
    let mut module = None;
    for tok in text.split(' ') {
        if tok.len() > 2
            && tok.starts_with('[')
            && tok.ends_with(']')
            && !tok[1..tok.len() - 1].contains(['[', ']', ','])
        {
            module = Some((at, tok));
            break;
        }
        at += tok.len() + 1;
    }
    let Some((at, tok)) = module else {
        return Some(ManagedMethod {
            start,
            size,
            module: String::new(),
            name: text.to_string(),
            signature: String::new(),
            tier: String::new(),
        });
    };
    let rest = text.get(at + tok.len()..)?.trim_start();
    // `Type::Method(params)[tier]`: the parameters open at the first `(` after the last `::`
    let sep = rest.find("::")?;
    let open = rest[sep..].find('(').map(|i| sep + i)?;
    let close = rest.rfind(')')?;
    if close < open {
        return None;
    }
    let tier = rest[close + 1..]
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let qualified = &rest[..open];
    let name = match qualified.rfind("::") {
        Some(i) => format!("{}.{}", &qualified[..i], &qualified[i + 2..]),
        None => qualified.to_string(),
    };
    Some(ManagedMethod {
        start,
        size,
        module: tok[1..tok.len() - 1].to_string(),
        name,
        signature: rest[open..=close].to_string(),
        tier,
    })
}

/// The managed code of one process, sorted by address.
#[derive(Clone, Debug, Default)]
pub struct ManagedMethods {
    methods: Vec<ManagedMethod>,
}

impl ManagedMethods {
    /// Adds a code version; false when the same code (address and name) is there already. Code
    /// at an address another method had (a heap reused after an unload) replaces it.
    pub fn insert(&mut self, m: ManagedMethod) -> bool {
        let i = self.methods.partition_point(|o| o.start < m.start);
        if let Some(o) = self.methods.get_mut(i) {
            if o.start == m.start {
                if *o == m {
                    return false;
                }
                *o = m;
                return true;
            }
        }
        self.methods.insert(i, m);
        true
    }

    /// The code containing `addr`.
    pub fn at(&self, addr: u64) -> Option<&ManagedMethod> {
        let i = self.methods.partition_point(|o| o.start <= addr);
        let m = self.methods.get(i.checked_sub(1)?)?;
        (addr < m.start.saturating_add(m.size)).then_some(m)
    }

    pub fn iter(&self) -> impl Iterator<Item = &ManagedMethod> {
        self.methods.iter()
    }

    pub fn len(&self) -> usize {
        self.methods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.methods.is_empty()
    }

    /// `ustack()` text lookup: `assembly`Namespace.Type.Method` (a stub as `[stub]`).
    pub fn lookup(&self, addr: u64) -> Lookup {
        match self.at(addr) {
            Some(m) => Lookup::Sym {
                module: if m.is_stub() {
                    "[stub]".to_string()
                } else {
                    m.module.clone()
                },
                name: m.name.clone(),
                start: m.start,
            },
            None => Lookup::None,
        }
    }
}

/// A perf map file read as it grows: each call returns the lines completed since the last.
#[derive(Debug)]
pub struct PerfMapFile {
    pub path: std::path::PathBuf,
    offset: u64,
    partial: String,
}

impl PerfMapFile {
    pub fn new(path: std::path::PathBuf) -> Self {
        PerfMapFile {
            path,
            offset: 0,
            partial: String::new(),
        }
    }

    /// Whether the file exists (the runtime writes it from its start when asked to).
    pub fn exists(&self) -> bool {
        self.path.exists()
    }

    /// The methods of the lines appended since the last call (none when the file is absent).
    pub fn read_new(&mut self) -> Vec<ManagedMethod> {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        let mut buf = Vec::new();
        if f.seek(SeekFrom::Start(self.offset)).is_err() || f.read_to_end(&mut buf).is_err() {
            return Vec::new();
        }
        self.offset += buf.len() as u64;
        self.partial.push_str(&String::from_utf8_lossy(&buf));
        let Some(end) = self.partial.rfind('\n') else {
            return Vec::new();
        };
        let done: String = self.partial.drain(..=end).collect();
        done.lines().filter_map(parse_perf_map_line).collect()
    }
}

/// The assemblies of the runtime's `perfinfo-PID.map` (`ImageLoad;PATH;GUID;BASE;` lines): the
/// path of each, in load order.
pub fn perfinfo_images(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("ImageLoad;"))
        .filter_map(|l| l.split(';').next())
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_map_lines() {
        let m = parse_perf_map_line(
            "00007FD9A1842880 1c int32 [app] Work::Add(int32,int32)[QuickJitted]",
        )
        .unwrap();
        assert_eq!(m.start, 0x7FD9A1842880);
        assert_eq!(m.size, 0x1c);
        assert_eq!(m.module, "app");
        assert_eq!(m.name, "Work.Add");
        assert_eq!(m.signature, "(int32,int32)");
        assert_eq!(m.tier, "QuickJitted");
        assert!(!m.is_stub());
        let m = parse_perf_map_line(
            "00007F0000001000 40 string[] [System.Private.CoreLib] System.String::Split(char,valuetype System.StringSplitOptions)[OptimizedTier1]",
        )
        .unwrap();
        assert_eq!(m.module, "System.Private.CoreLib");
        assert_eq!(m.name, "System.String.Split");
        assert_eq!(m.tier, "OptimizedTier1");
        let m = parse_perf_map_line(
            "00007FD9A1830078 48 stub<1> AllocateTemporaryEntryPoints<PRECODE_FIXUP>",
        )
        .unwrap();
        assert!(m.is_stub());
        assert_eq!(
            m.name,
            "stub<1> AllocateTemporaryEntryPoints<PRECODE_FIXUP>"
        );
        // a nested type, a constructor, no tier suffix
        let m = parse_perf_map_line("10 8 void [a.b] N.Outer+Inner::.ctor()").unwrap();
        assert_eq!(
            (m.module.as_str(), m.name.as_str()),
            ("a.b", "N.Outer+Inner..ctor")
        );
        assert_eq!(m.tier, "");
        assert!(parse_perf_map_line("garbage").is_none());
        assert!(parse_perf_map_line("10 0 void [a] T::M()").is_none());
        assert!(parse_perf_map_line("zz 8 void [a] T::M()").is_none());
    }

    #[test]
    fn table_by_address() {
        let mut t = ManagedMethods::default();
        let m = |start, name: &str| ManagedMethod {
            start,
            size: 0x10,
            module: "app".into(),
            name: name.into(),
            signature: "()".into(),
            tier: String::new(),
        };
        assert!(t.insert(m(0x200, "B")));
        assert!(t.insert(m(0x100, "A")));
        assert!(!t.insert(m(0x100, "A")));
        assert_eq!(t.len(), 2);
        assert_eq!(t.at(0x10f).map(|m| m.name.as_str()), Some("A"));
        assert!(t.at(0x110).is_none());
        assert!(t.at(0xff).is_none());
        assert_eq!(
            t.lookup(0x204),
            Lookup::Sym {
                module: "app".into(),
                name: "B".into(),
                start: 0x200
            }
        );
        // reused code heap
        assert!(t.insert(m(0x200, "C")));
        assert_eq!(t.at(0x200).map(|m| m.name.as_str()), Some("C"));
    }

    #[test]
    fn perf_map_file_grows() {
        let dir = std::env::temp_dir().join(format!("dtx-perfmap-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("perf-1.map");
        std::fs::write(&path, "10 8 void [a] T::M()\n20 8 void [a] T::").unwrap();
        let mut f = PerfMapFile::new(path.clone());
        let got = f.read_new();
        assert_eq!(got.len(), 1);
        assert!(f.read_new().is_empty());
        use std::io::Write;
        let mut w = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        w.write_all(b"N()\n").unwrap();
        let got = f.read_new();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].name, "T.N");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn perfinfo() {
        let t = "ImageLoad;/x/System.Private.CoreLib.dll;{82d8};00007FD9A0EE0000;\nImageLoad;/tmp/app.dll;{b1};0000000000000000;\n";
        assert_eq!(
            perfinfo_images(t),
            vec!["/x/System.Private.CoreLib.dll", "/tmp/app.dll"]
        );
    }
}
