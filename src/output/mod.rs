//! Output formatting exactly as dtrace does it.

pub mod printf;
