//! Event sources: what feeds the engine besides its timers: recorded `.etl` files, and live
//! perf events on Linux.

pub mod etl;
pub mod perf;
