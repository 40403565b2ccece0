//! The extent of ready-to-run method bodies (`symbols::r2r`), on real R2R images: the
//! framework assemblies of the .NET Core 3.1 runtime that scripts/dotnet-test-env.sh installs
//! (PyPI's `dotnetcore2` wheel, cached under ~/.cache/dtx) are compiled ready-to-run for Linux
//! x64, whose RuntimeFunctions table is laid out as on Windows. The table must be whole and
//! sorted, and the entry point of a precompiled method, as the running runtime binds it, must
//! start a body whose returns dtx decodes. Skipped, saying why, only where the runtime cannot
//! be installed.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use dtx::symbols::r2r::R2rImage;

/// The shared framework folder of the installed runtime (`shared/Microsoft.NETCore.App/3.1.x`).
fn framework() -> Option<PathBuf> {
    let (dotnet, _) = crate::dotnet_pid::runtime_env()?;
    let shared = dotnet
        .parent()
        .expect("bin")
        .join("shared/Microsoft.NETCore.App");
    let mut versions: Vec<PathBuf> = std::fs::read_dir(&shared)
        .unwrap_or_else(|e| panic!("{}: {e}", shared.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("System.Private.CoreLib.dll").exists())
        .collect();
    versions.sort();
    Some(versions.pop().expect("a framework version"))
}

#[test]
fn dotnet_pid_r2r_tables_of_the_framework_images_are_whole_and_sorted() {
    let Some(fw) = framework() else { return };
    for (file, at_least) in [
        ("System.Private.CoreLib.dll", 10_000),
        ("System.Linq.dll", 500),
        ("System.Console.dll", 100),
    ] {
        let path = fw.join(file);
        let t =
            R2rImage::from_path(&path.to_string_lossy()).unwrap_or_else(|e| panic!("{file}: {e}"));
        let n = t.functions.len();
        assert!(n >= at_least, "{file}: {n} RUNTIME_FUNCTIONs");
        assert!(t.version.0 >= 3, "{file}: R2R version {:?}", t.version);
        for f in &t.functions {
            assert!(f.begin < f.end, "{file}: {f:?}");
            assert_ne!(f.unwind, 0, "{file}: {f:?}");
        }
        for w in t.functions.windows(2) {
            assert!(
                w[0].end <= w[1].begin,
                "{file}: not sorted or overlapping: {:?} {:?}",
                w[0],
                w[1]
            );
        }
        // every body is found from its start
        let f = t.functions[n / 2];
        assert_eq!(t.body_at(f.begin), Some((f.begin, f.end)));
        eprintln!("{file}: {n} RUNTIME_FUNCTIONs, R2R {:?}", t.version);
    }
    // an IL-only assembly (the C# compiler's output) says it is not ready-to-run
    let e = R2rImage::from_path(&fw.join("netstandard.dll").to_string_lossy());
    assert!(e.is_err(), "netstandard.dll is a facade of IL only");
}

/// Prints where the runtime bound some precompiled methods of CoreLib (their entry points,
/// through the precode a method pointer may lead to) and waits on stdin.
const PROGRAM: &str = r#"
using System;
using System.Reflection;
using System.Runtime.InteropServices;

class Program {
    // the code a method pointer leads to: through `jmp rel32` (a patched FixupPrecode),
    // `mov r10, imm64; jmp rel32` (a StubPrecode) or `jmp [rip+x]`
    static long Follow(IntPtr p) {
        for (int hop = 0; hop < 4; hop++) {
            byte b = Marshal.ReadByte(p);
            if (b == 0xE9) { p = p + 5 + Marshal.ReadInt32(p + 1); continue; }
            if (b == 0x49 && Marshal.ReadByte(p + 1) == 0xBA && Marshal.ReadByte(p + 10) == 0xE9) {
                p = p + 15 + Marshal.ReadInt32(p + 11); continue;
            }
            if (b == 0xFF && Marshal.ReadByte(p + 1) == 0x25) {
                p = Marshal.ReadIntPtr(p + 6 + Marshal.ReadInt32(p + 2)); continue;
            }
            break;
        }
        return (long)p;
    }

    static void Show(string name, MethodInfo m) {
        Console.WriteLine("fn " + name + " " + Follow(m.MethodHandle.GetFunctionPointer()).ToString("x"));
    }

    static int Main(string[] args) {
        string s = string.Concat(args.Length > 5 ? "x" : "a", "b");
        string t = s.PadLeft(args.Length + 4, '-');
        bool e = t.EndsWith("b", StringComparison.Ordinal);
        Show("String.Concat", typeof(string).GetMethod("Concat", new[] { typeof(string), typeof(string) }));
        Show("String.PadLeft", typeof(string).GetMethod("PadLeft", new[] { typeof(int), typeof(char) }));
        Show("String.EndsWith", typeof(string).GetMethod("EndsWith", new[] { typeof(string), typeof(StringComparison) }));
        Console.WriteLine("ready " + s + t + e);
        Console.ReadLine();
        return 0;
    }
}
"#;

#[test]
fn dotnet_pid_r2r_entry_points_start_bodies_whose_returns_are_found() {
    let Some(fw) = framework() else { return };
    let (dotnet, mcs) = crate::dotnet_pid::runtime_env().expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("ep.cs"), PROGRAM).expect("write");
    let dll = dir.path().join("ep.dll");
    let st = Command::new(mcs)
        .arg(format!("-out:{}", dll.display()))
        .arg(dir.path().join("ep.cs"))
        .output()
        .expect("mcs");
    assert!(st.status.success(), "mcs: {st:?}");
    std::fs::write(
        dir.path().join("ep.runtimeconfig.json"),
        r#"{"runtimeOptions":{"tfm":"netcoreapp3.1","framework":{"name":"Microsoft.NETCore.App","version":"3.1.0"}}}"#,
    )
    .expect("runtimeconfig");
    // without tiering the runtime runs a method's precompiled code for good
    let mut child = Command::new(dotnet)
        .arg(&dll)
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .env("COMPlus_TieredCompilation", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start dotnet");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut entries = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            out.read_line(&mut line).expect("read") > 0,
            "the program ended"
        );
        if line.starts_with("ready") {
            break;
        }
        if let ["fn", name, addr] = line.split_whitespace().collect::<Vec<_>>().as_slice() {
            entries.push((
                name.to_string(),
                u64::from_str_radix(addr, 16).expect("hex"),
            ));
        }
    }
    let pid = child.id();
    let corelib = fw.join("System.Private.CoreLib.dll");
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).expect("mem");
    let checked = std::panic::catch_unwind(|| check_entries(&corelib, &maps, &mem, &entries));
    let _ = child.kill();
    let _ = child.wait();
    match checked {
        Ok(text) => eprintln!("{text}"),
        Err(e) => std::panic::resume_unwind(e),
    }
}

/// Each entry point inside CoreLib's image must start a body of its table, whose code (read
/// from the process) has returns dtx decodes; at least one is there.
fn check_entries(
    corelib: &Path,
    maps: &str,
    mem: &std::fs::File,
    entries: &[(String, u64)],
) -> String {
    use std::os::unix::fs::FileExt;
    let path = corelib.to_string_lossy();
    // the image's base: its lowest mapping (the headers, at file offset 0)
    let ranges: Vec<(u64, u64)> = maps
        .lines()
        .filter(|l| l.ends_with(path.as_ref()))
        .filter_map(|l| {
            let (a, b) = l.split_whitespace().next()?.split_once('-')?;
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            ))
        })
        .collect();
    let base = ranges.iter().map(|r| r.0).min().expect("CoreLib mapped");
    let end = ranges.iter().map(|r| r.1).max().expect("CoreLib mapped");
    let table = R2rImage::from_path(&path).expect("CoreLib's table");
    let mut report = String::new();
    let mut inside = 0;
    for (name, addr) in entries {
        if *addr < base || *addr >= end {
            report.push_str(&format!("{name}: {addr:x} is not in CoreLib's image\n"));
            continue;
        }
        inside += 1;
        let rva = (addr - base) as u32;
        let (b, e) = table
            .body_at(rva)
            .unwrap_or_else(|| panic!("{name}: RVA 0x{rva:x} starts no RUNTIME_FUNCTION"));
        let mut code = vec![0u8; (e - b) as usize];
        mem.read_exact_at(&mut code, base + b as u64)
            .expect("read the body");
        let insns = dtx::symbols::decode::function(&code, base + b as u64);
        let rets = insns.iter().filter(|i| i.returns).count();
        assert!(rets > 0, "{name}: no return in {} bytes", code.len());
        // the decoding covers the body: its last instruction ends at the body's end
        let last = insns.last().expect("instructions");
        assert!(
            last.offset + last.len as u64 <= code.len() as u64,
            "{name}: decoded past the body"
        );
        report.push_str(&format!(
            "{name}: RVA 0x{rva:x}, body of {} bytes, {rets} returns\n",
            e - b
        ));
    }
    assert!(inside > 0, "no entry point in CoreLib's image:\n{report}");
    report
}
