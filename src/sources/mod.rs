//! Event sources: what feeds the engine besides its timers. Today: recorded `.etl` files.

pub mod debugger;
pub mod etl;
