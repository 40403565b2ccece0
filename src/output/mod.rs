//! Output formatting exactly as dtrace does it: printf, trace() records, print() of typed data,
//! tracemem, stacks, printa() of aggregations, -F flow indent, and dtrace's messages.

pub mod diff;
pub mod etw_writer;
pub mod flow;
pub mod folded;
pub mod json;
pub mod labelled;
pub mod live_dump;
pub mod localtime;
pub mod memory;
pub mod messages;
pub mod print;
pub mod printa;
pub mod printf;
pub mod record;
pub mod shown;
pub mod stack;
pub mod stderr;
pub mod structured;
