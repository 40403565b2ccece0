//! Event sources: what feeds the engine besides its timers: recorded `.etl` files, and live
//! perf events on Linux.

pub mod debugger;
pub mod etl;
pub mod etw_live;
pub mod first_records;
pub mod fpid;
pub mod merged;
pub mod perf;
pub mod secure_dir;
pub mod sink;
