//! Serving: dtx's results to programs rather than to a person at a terminal. A consumer of the
//! engine beside `cli` and `tui`: it drives `engine::session::Session` (commands in; output,
//! aggregation snapshots and status out) and reads only what the session hands it
//! (docs/dev/architecture.md; `tests/it/tidy.rs` keeps it so).
//!
//! - `metrics`: the Prometheus exporter (`-x metrics=HOST:PORT`, docs/metrics.md).
//! - `mcp`: `dtx --mcp`, the Model Context Protocol on stdio (docs/agents.md).

pub mod mcp;
pub mod metrics;
