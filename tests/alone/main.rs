//! The integration tests that time dtx against a bound (a flood of live events must leave the
//! console a status every 200 ms, Ctrl-C within a second, the traced target its turns): they
//! need the machine to themselves, as they had when every test file was a binary of its own.
//! Inside `tests/it` they would share two cores with the other tests running at the same
//! time, and fail for that alone; as a second binary, which cargo runs after `it` and not
//! beside it, they run as before. They share `tests/it`'s support.

// these tests use a part of it only
#[allow(unused_imports)]
#[path = "../it/support/mod.rs"]
mod support;

mod console_live_etw;
