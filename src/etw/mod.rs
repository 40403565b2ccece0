//! The ETW data model with no Windows dependency: the event view shared by the .etl reader and
//! the live session, decoders, and the system state rebuilt from events.

pub mod catalog;
pub mod decode;
pub mod provider_guid;
pub mod reader;
pub mod record;
pub mod state;
pub mod tlg_event;
