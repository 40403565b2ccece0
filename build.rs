//! Builds the fpid agent (`agent/`, its own crate: a shared object or DLL the target loads)
//! with the same cargo and compiler, into this build's OUT_DIR, for `src/sources/fpid` to
//! embed. Linux: `libdtx_fpid_agent.so`. Windows: `dtx_fpid_agent.dll`, whose MinHook is C
//! compiled by `cc` (mingw-w64's gcc when cross-building for `*-windows-gnu`; when the target's
//! std is not installed, as with Debian's compiler, the agent's std is built too). Where no
//! agent can be built (another OS, or the `*-windows-msvc` type check on a machine that is not
//! Windows: no C compiler for it), an empty file stands in and fpid says so at run time.
//!
//! On Windows it also has `dtx.exe` export the self-check's workload functions (`dtx_check_*`,
//! `src/cli/selfcheck/workload.rs`): an MSVC image has no COFF symbols, so without its PDB
//! (which the release zip does not carry) only the export table can name them to the pid and
//! fpid providers and to stacks. And the agent links its C runtime as dtx does: with
//! `+crt-static` (`.cargo/config.toml`, for `*-windows-msvc`) both, and MinHook's C code through
//! `cc` (`/MT`), need no `VCRUNTIME140.dll` on the user's machine.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=agent/src");
    println!("cargo:rerun-if-changed=agent/Cargo.toml");
    println!("cargo:rerun-if-changed=agent/Cargo.lock");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    dscripts_list(&out);
    let dest = out.join("fpid-agent.bin");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "windows" {
        export_check_functions(&out, &env);
    }
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    let msvc_elsewhere = os == "windows" && env == "msvc" && !host.contains("windows");
    if !(os == "linux" || os == "windows") || msvc_elsewhere {
        std::fs::write(&dest, []).expect("write the empty agent");
        return;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target_dir = out.join("agent-target");
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--release", "--manifest-path", "agent/Cargo.toml"])
        .arg("--target-dir")
        .arg(&target_dir);
    // the outer build's settings are not the agent's: its own target dir, no outer rustflags
    for var in [
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_PROFILE_RELEASE_DEBUG",
    ] {
        cmd.env_remove(var);
    }
    // the outer build's C runtime, though: a static one (+crt-static) for the agent's Rust code
    // and, through cc's reading of the target features, /MT for MinHook's C code
    let static_crt = std::env::var("CARGO_CFG_TARGET_FEATURE")
        .is_ok_and(|f| f.split(',').any(|f| f == "crt-static"));
    if os == "windows" && env == "msvc" && static_crt {
        let key = format!(
            "CARGO_TARGET_{}_RUSTFLAGS",
            target.to_uppercase().replace(['-', '.'], "_")
        );
        cmd.env(key, "-Ctarget-feature=+crt-static");
    }
    let mut built = target_dir.join("release");
    if target != host {
        cmd.args(["--target", &target]);
        built = target_dir.join(&target).join("release");
        if !std_installed(&target) {
            cmd.arg("-Zbuild-std=std,panic_abort")
                .env("RUSTC_BOOTSTRAP", "1");
        }
    }
    let status = cmd.status().expect("run cargo for the fpid agent");
    assert!(status.success(), "building the fpid agent (agent/) failed");
    let file = if os == "windows" {
        "dtx_fpid_agent.dll"
    } else {
        "libdtx_fpid_agent.so"
    };
    std::fs::copy(built.join(file), &dest).expect("copy the fpid agent");
}

/// Whether the compiler has a prebuilt std for `target` (rustup's toolchains do for the
/// targets added; Debian's compiler only for its own).
fn std_installed(target: &str) -> bool {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = Command::new(rustc)
        .args(["--print", "target-libdir", "--target", target])
        .output()
    else {
        return true;
    };
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    std::fs::read_dir(dir).is_ok_and(|d| {
        d.flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("libstd-"))
    })
}

/// The workload's functions: every `pub extern "C" fn dtx_check_*` of `workload.rs`.
const WORKLOAD: &str = "src/cli/selfcheck/workload.rs";

/// Has the linker put the workload's functions in `dtx.exe`'s export table: `/EXPORT:` for
/// MSVC's link.exe (and lld-link), a module-definition file for mingw's ld. Only the `dtx`
/// binary: tests and the conformance runner export nothing.
fn export_check_functions(out: &std::path::Path, env: &str) {
    println!("cargo:rerun-if-changed={WORKLOAD}");
    let source = std::fs::read_to_string(WORKLOAD).expect("read the self-check's workload");
    let names: Vec<&str> = source
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub extern \"C\" fn dtx_check_"))
        .filter_map(|rest| rest.split('(').next())
        .collect();
    assert!(
        names.len() >= 4,
        "build.rs: {WORKLOAD} has {} `pub extern \"C\" fn dtx_check_*` functions; dtx.exe \
         must export them (the self-check counts dtx_check_hit and walks dtx_check_busy_*)",
        names.len()
    );
    if env == "msvc" {
        for n in &names {
            println!("cargo:rustc-link-arg-bin=dtx=/EXPORT:dtx_check_{n}");
        }
    } else {
        let def = out.join("dtx-exports.def");
        let text: String = names
            .iter()
            .map(|n| format!("    dtx_check_{n}\n"))
            .collect();
        std::fs::write(&def, format!("EXPORTS\n{text}")).expect("write dtx-exports.def");
        println!("cargo:rustc-link-arg-bin=dtx={}", def.display());
    }
}

/// `mcp_dscripts.rs`: the scripts of `dscripts/` (not `lib/`, the type library), as a list
/// `[("dir/name.d", include_str!(...)), ...]` sorted by path, the MCP server's resources.
fn dscripts_list(out: &std::path::Path) {
    println!("cargo:rerun-if-changed=dscripts");
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it")).join("dscripts");
    let mut found = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "lib") {
                    dirs.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "d") {
                println!("cargo:rerun-if-changed={}", p.display());
                found.push(p);
            }
        }
    }
    found.sort();
    let mut text = String::from("[\n");
    for p in &found {
        let rel = p
            .strip_prefix(&root)
            .expect("under dscripts")
            .to_string_lossy()
            .replace('\\', "/");
        text.push_str(&format!(
            "    ({rel:?}, include_str!({:?})),\n",
            p.display().to_string()
        ));
    }
    text.push(']');
    std::fs::write(out.join("mcp_dscripts.rs"), text).expect("write mcp_dscripts.rs");
}
