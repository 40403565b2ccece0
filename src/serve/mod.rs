//! Serving dtx to other programs, beside `cli` and `tui` over the engine's session handle.
pub mod mcp;
