//! dtx's integration tests, as one test crate (cargo's own test suite is laid out so): one
//! binary to compile and link instead of one per file, which on a small machine is most of a
//! test build's time. Each former `tests/<name>.rs` is the module `<name>`, so a test is
//! `cargo test --release --test it <name>::` (or by its function's name alone); `support` is
//! what they share: the runner of the built dtx (`support::cli`), the shared traces
//! (`support::etl`), the golden files (`support::golden`), programs compiled for a test
//! (`support::ctarget`), a pseudo-terminal (`support::pty`).
//!
//! The tests that time dtx against a bound and need the machine to themselves are a second
//! binary, `tests/alone` (its `main.rs` says why). Modules for one OS are compiled for it
//! alone; the conformance runner's needs `--features conformance` (the `conformance` binary it
//! drives is built only then).

mod support;

#[cfg(target_os = "linux")]
mod bpf_linux;
mod cli_buffers;
mod cli_errors;
mod cli_listing;
mod cli_output_formats;
mod cli_variables;
#[cfg(feature = "conformance")]
mod conformance_runner;
mod d_classes;
mod d_windows;
mod d_windows_args;
mod diag_missed;
mod diff;
#[cfg(unix)]
mod docs_examples;
#[cfg(target_os = "linux")]
mod dotnet_pid;
mod dotnet_pid_etw;
mod dotnet_pid_live_replay;
#[cfg(target_os = "linux")]
mod dotnet_pid_r2r;
#[cfg(windows)]
mod dotnet_pid_windows;
mod dscripts_dnet;
mod dscripts_etw;
mod dscripts_top;
mod dtrace_scripts;
mod etl_counts;
mod etl_mutation;
mod etw_decode;
mod etw_live_lifecycle;
mod etw_live_replay;
#[cfg(windows)]
mod etw_live_windows;
mod etw_named;
mod etw_portable_probes;
mod etw_syscalls;
mod eventsource_manifest;
mod first_hour;
#[cfg(target_os = "linux")]
mod fpid_linux;
#[cfg(windows)]
mod fpid_windows;
mod illumos_differences;
mod layout;
mod many_traces;
// their clients (Python's mcp, Prometheus) are set up by shell scripts: Linux and Unix only
#[cfg(unix)]
mod mcp;
#[cfg(unix)]
mod metrics;
#[cfg(target_os = "linux")]
mod minidebuginfo;
mod no_panic;
#[cfg(target_os = "linux")]
mod perf_linux;
#[cfg(any(target_os = "linux", windows))]
mod pid;
#[cfg(unix)]
mod readme;
mod refusals;
mod self_check;
mod session_trace;
mod symbol_server;
mod symbol_time;
mod tidy;
mod trace_memory;
mod trace_stack_window;
mod trace_symbols;
mod trace_threads;
#[cfg(unix)]
mod tui_e2e;
mod tui_panes;
mod vm_agg_keys;
mod vm_bounds;
mod vm_no_alloc;
mod vm_speculation;
