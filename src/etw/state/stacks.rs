//! Matching stacks to the events they belong to:
//! * StackWalk Stack events (by the event's timestamp and thread);
//! * stack keys: StackKeyKernel/User reference a key that KeyDelete/KeyRundown define;
//! * STACK_TRACE32/64 extended items of EVENT_HEADER records.

use std::collections::HashMap;

use crate::etw::decode::{DecodedEvent, Value};
use crate::etw::record::EventRecord;

const EXT_STACK_TRACE32: u16 = 5;
const EXT_STACK_TRACE64: u16 = 6;

/// Collects stacks and answers "which stack belongs to the event at (timestamp, thread)".
#[derive(Default)]
pub struct StackMatcher {
    /// Direct frames by (event raw timestamp, thread); kernel part first when both came.
    direct: HashMap<(i64, u32), Vec<u64>>,
    /// Key references by (event raw timestamp, thread): (key, is_user).
    refs: HashMap<(i64, u32), Vec<(u64, bool)>>,
    /// Key definitions.
    keys: HashMap<u64, Vec<u64>>,
    /// By thread: the raw timestamp of the last event whose stack comes in a later event of
    /// the same thread (the .NET runtime's ClrStackWalk follows the event it belongs to).
    awaiting: HashMap<u32, i64>,
}

impl StackMatcher {
    pub fn new() -> StackMatcher {
        StackMatcher::default()
    }

    /// Feeds one event (decoded, for kernel StackWalk events).
    pub fn observe(&mut self, ev: &EventRecord<'_>, decoded: Option<&DecodedEvent<'_>>) {
        for x in &ev.extended {
            let step = match x.ext_type {
                EXT_STACK_TRACE32 => 4,
                EXT_STACK_TRACE64 => 8,
                _ => continue,
            };
            let frames: Vec<u64> = x
                .data
                .get(8..)
                .unwrap_or(&[])
                .chunks_exact(step)
                .map(|c| {
                    if step == 4 {
                        u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as u64
                    } else {
                        le64(c)
                    }
                })
                .collect();
            self.direct
                .entry((ev.raw_timestamp, ev.tid))
                .or_default()
                .extend(frames);
        }
        let Some(d) = decoded else { return };
        if d.provider != "StackWalk" {
            return;
        }
        let frames = || match d.get("Stack") {
            Some(Value::Ptrs(v)) => v.clone(),
            _ => Vec::new(),
        };
        let at = || {
            Some((
                d.u64("EventTimeStamp")? as i64,
                d.u64("StackThread")? as u32,
            ))
        };
        match d.name {
            "Stack" => {
                if let Some(k) = at() {
                    self.direct.entry(k).or_default().extend(frames());
                }
            }
            "StackKeyKernel" | "StackKeyUser" => {
                if let (Some(k), Some(key)) = (at(), d.u64("StackKey")) {
                    self.refs
                        .entry(k)
                        .or_default()
                        .push((key, d.name == "StackKeyUser"));
                }
            }
            "KeyDelete" | "KeyRundown" => {
                if let Some(key) = d.u64("StackKey") {
                    self.keys.insert(key, frames());
                }
            }
            _ => {}
        }
    }

    /// Notes an event whose stack, if any, comes in the next stack event of its thread
    /// ([`StackMatcher::stack_of_previous`]).
    pub fn await_stack(&mut self, ev: &EventRecord<'_>) {
        self.awaiting.insert(ev.tid, ev.raw_timestamp);
    }

    /// Gives `frames` (a stack event's, e.g. ClrStackWalk's) to the event of thread `tid` noted
    /// by [`StackMatcher::await_stack`], unless that event already has a stack.
    pub fn stack_of_previous(&mut self, tid: u32, frames: Vec<u64>) {
        if let Some(ts) = self.awaiting.remove(&tid) {
            let e = self.direct.entry((ts, tid)).or_default();
            if e.is_empty() {
                *e = frames;
            }
        }
    }

    /// The stack of the event with this raw timestamp on this thread: direct frames, then
    /// key-resolved kernel frames, then user frames. Keys not yet defined are skipped.
    pub fn stack(&self, raw_timestamp: i64, tid: u32) -> Option<Vec<u64>> {
        let k = (raw_timestamp, tid);
        let mut out = self.direct.get(&k).cloned().unwrap_or_default();
        if let Some(refs) = self.refs.get(&k) {
            for user in [false, true] {
                for (key, _) in refs.iter().filter(|(_, u)| *u == user) {
                    if let Some(fr) = self.keys.get(key) {
                        out.extend_from_slice(fr);
                    }
                }
            }
        }
        (!out.is_empty()).then_some(out)
    }

    /// The stack for an event record.
    pub fn stack_for(&self, ev: &EventRecord<'_>) -> Option<Vec<u64>> {
        self.stack(ev.raw_timestamp, ev.tid)
    }

    /// (direct stacks, key references, key definitions) held.
    pub fn counts(&self) -> (usize, usize, usize) {
        (self.direct.len(), self.refs.len(), self.keys.len())
    }
}

fn le64(c: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&c[..8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etw::record::{Guid, HeaderKind};

    fn ev(ts: i64, tid: u32) -> EventRecord<'static> {
        EventRecord {
            header_type: 0,
            kind: HeaderKind::EventHeader,
            flags: 0,
            provider: Guid::default(),
            kernel_group: None,
            id: 1,
            version: 0,
            channel: 0,
            level: 0,
            opcode: 0,
            task: 0,
            keyword: 0,
            pid: 1,
            tid,
            cpu: 0,
            raw_timestamp: ts,
            time_ns: 0,
            wall_ns: 0,
            pointer_size: 8,
            activity_id: Guid::default(),
            payload: &[],
            extended: Default::default(),
        }
    }

    #[test]
    fn a_following_stack_event_belongs_to_the_threads_previous_event() {
        let mut m = StackMatcher::new();
        m.await_stack(&ev(100, 7));
        m.await_stack(&ev(105, 8));
        m.stack_of_previous(7, vec![0x10, 0x20]);
        // a second stack event with no event before it on that thread is dropped
        m.stack_of_previous(7, vec![0x30]);
        assert_eq!(m.stack(100, 7), Some(vec![0x10, 0x20]));
        assert_eq!(m.stack(105, 8), None);
        m.stack_of_previous(8, vec![0x40]);
        assert_eq!(m.stack(105, 8), Some(vec![0x40]));
    }
}
