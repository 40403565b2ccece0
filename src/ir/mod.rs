//! ir
