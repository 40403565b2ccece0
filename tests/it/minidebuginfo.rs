//! MiniDebugInfo (`.gnu_debugdata`): a stripped program that keeps its local function symbols
//! in an xz-compressed ELF section, as Fedora builds its binaries. dtx reads them: the pid
//! provider probes a `static` function of such a program by name. Builds the program with gcc
//! and the section with objcopy/nm/xz; skips with a message where those are missing.

use std::path::{Path, PathBuf};
use std::process::Command;

use dtx::symbols::ElfImage;

const PROGRAM: &str = r#"
#include <stdio.h>
static __attribute__((noinline)) int helper(int x) { return x * 3 + 1; }
int main(void) {
    int s = 0;
    for (int i = 0; i < 7; i++)
        s += helper(i);
    printf("%d\n", s);
    return 0;
}
"#;

fn run(cmd: &mut Command) -> bool {
    cmd.status().map(|s| s.success()).unwrap_or(false)
}

fn sh(dir: &Path, script: &str) -> bool {
    run(Command::new("sh").arg("-c").arg(script).current_dir(dir))
}

/// (program with full symbols, stripped with MiniDebugInfo, stripped without), or None. Each
/// test builds in its own folder (`tag`): the tests run in parallel.
fn build(tag: &str) -> Option<(PathBuf, PathBuf, PathBuf)> {
    for tool in ["gcc", "objcopy", "nm", "xz", "strip"] {
        if !run(Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {tool} >/dev/null")))
        {
            eprintln!("skipped: {tool} is not installed");
            return None;
        }
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("minidebuginfo-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).ok()?;
    std::fs::write(dir.join("p.c"), PROGRAM).ok()?;
    // the recipe Fedora's find-debuginfo uses: the function symbols .dynsym lacks, in an
    // xz-compressed debug-only ELF added as .gnu_debugdata to the stripped program
    let ok = sh(
        &dir,
        "gcc -O1 -g -o full p.c && cp full mini && cp full bare && strip --strip-all bare && \
         nm -D mini --format=posix --defined-only | awk '{print $1}' | sort > dynsyms && \
         nm mini --format=posix --defined-only | awk '$2 == \"T\" || $2 == \"t\" {print $1}' | sort > funcsyms && \
         comm -13 dynsyms funcsyms > keep && \
         objcopy --only-keep-debug mini mini.dbg && \
         objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols=keep mini.dbg mini.debuginfo && \
         strip --strip-all -R .comment mini && xz -f mini.debuginfo && \
         objcopy --add-section .gnu_debugdata=mini.debuginfo.xz mini",
    );
    if !ok {
        eprintln!("skipped: could not build the MiniDebugInfo program");
        return None;
    }
    Some((dir.join("full"), dir.join("mini"), dir.join("bare")))
}

#[test]
fn local_functions_come_from_gnu_debugdata() {
    let Some((full, mini, bare)) = build("symbols") else {
        return;
    };
    let open = |p: &Path| ElfImage::open(p.to_str().unwrap()).unwrap();
    let (full, mini, bare) = (open(&full), open(&mini), open(&bare));
    let at = full
        .function("helper")
        .expect("the unstripped program has helper")
        .clone();
    assert!(
        bare.function("helper").is_none(),
        "a stripped program without .gnu_debugdata has no local symbols"
    );
    let f = mini
        .function("helper")
        .expect("helper comes from .gnu_debugdata");
    assert_eq!((f.addr, f.size), (at.addr, at.size));
    assert_eq!(
        mini.function_at(at.addr + 1).map(|f| f.name.as_str()),
        Some("helper")
    );
}

#[test]
fn pid_probes_a_static_function_of_a_stripped_program() {
    let Some((_, mini, _)) = build("pid") else {
        return;
    };
    let out = crate::support::cli::Dtx::new(&[
            "-q",
            "-x",
            "pidmode=ptrace",
            "-n",
            "pid$target:a.out:helper:entry { @n = count(); @a = sum(arg0); } END { printa(\"calls %@d\\n\", @n); printa(\"args %@d\\n\", @a); }",
            "-c",
        ])
        .arg(&mini)
        .output();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "dtx failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // the program's own output (sum of 3i+1 for i < 7) and the probe's counts
    assert!(text.contains("70\n"), "{text}");
    assert!(text.contains("calls 7\n"), "{text}");
    assert!(text.contains("args 21\n"), "{text}");
}
