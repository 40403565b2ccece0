//! Builds the fpid agent (`agent/`, its own crate: a shared object the target loads) with the
//! same cargo and compiler, into this build's OUT_DIR, for `src/sources/fpid` to embed. Where
//! no agent is built for the target (not Linux yet), an empty file stands in and fpid says so
//! at run time.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=agent/src");
    println!("cargo:rerun-if-changed=agent/Cargo.toml");
    println!("cargo:rerun-if-changed=agent/Cargo.lock");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dest = out.join("fpid-agent.bin");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os != "linux" {
        std::fs::write(&dest, []).expect("write the empty agent");
        return;
    }
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
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
    let mut built = target_dir.join("release");
    if target != host {
        cmd.args(["--target", &target]);
        built = target_dir.join(&target).join("release");
    }
    let status = cmd.status().expect("run cargo for the fpid agent");
    assert!(status.success(), "building the fpid agent (agent/) failed");
    let so = built.join("libdtx_fpid_agent.so");
    std::fs::copy(&so, &dest).expect("copy the fpid agent");
}
