//! What the integration tests share: each piece is here once.

pub mod begin;
pub mod cli;
#[cfg(target_os = "linux")]
pub mod ctarget;
pub mod etl;
pub mod golden;
pub mod mcp;
pub mod pty;
pub mod stacks;
pub mod standin_pdb;
pub mod symbol_server;
pub mod synthetic_etl;
