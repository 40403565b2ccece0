//! Over a recorded trace, stacks and `sym()`/`umod()` keys name the modules the trace's
//! processes had loaded (`module+0xoffset`). Skips when `../shared/etl` is absent.

use std::path::PathBuf;
use std::process::Command;

fn run(trace: &str, program: &str) -> Option<String> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/etl")
        .join(trace);
    if !p.exists() {
        eprintln!("skipped: ../shared/etl/{trace} is not here");
        return None;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_dtx"))
        .arg("-q")
        .arg("-E")
        .arg(&p)
        .args(["-n", program])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).unwrap())
}

#[test]
fn kernel_and_user_frames_name_their_modules() {
    let Some(k) = run(
        "perfview_net.4.5.2.x64.etl.zip",
        "profile:::sample-1ms { @[stack()] = count(); }",
    ) else {
        return;
    };
    let frames: Vec<&str> = k
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("+0x") || l.starts_with("0x"))
        .collect();
    let named = frames
        .iter()
        .filter(|f| f.contains(".exe+0x") || f.contains(".sys+0x") || f.contains(".dll+0x"))
        .count();
    assert!(frames.len() > 100, "{} frames", frames.len());
    // nearly every kernel frame lies in a loaded kernel module
    assert!(
        named * 10 >= frames.len() * 9,
        "{named} of {} frames named",
        frames.len()
    );
    assert!(k.contains("ntoskrnl.exe+0x"));
    let Some(u) = run(
        "perfview_net.4.5.2.x64.etl.zip",
        "profile:::sample-1ms { @[umod(arg1)] = count(); }",
    ) else {
        return;
    };
    assert!(u.contains("clr.dll") || u.contains("ntdll.dll"), "{u}");
}
