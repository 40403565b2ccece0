//! Matching stacks to the events they belong to:
//! * StackWalk Stack events (by the event's timestamp and thread);
//! * stack keys: StackKeyKernel/User reference a key that KeyDelete/KeyRundown define;
//! * STACK_TRACE32/64 extended items of EVENT_HEADER records.

use std::collections::HashMap;

use crate::etw::decode::{DecodedEvent, Value};
use crate::etw::record::EventRecord;
use crate::fasthash::FastSet;

const EXT_STACK_TRACE32: u16 = 5;
const EXT_STACK_TRACE64: u16 = 6;

/// Which event a stack belongs to: its raw timestamp and thread, and for the idle threads
/// (thread 0 on every CPU, sampled at the same tick on several CPUs) its CPU.
pub type EventKey = (i64, u32, u16);

pub fn event_key(raw_timestamp: i64, tid: u32, cpu: u16) -> EventKey {
    (raw_timestamp, tid, if tid == 0 { cpu } else { u16::MAX })
}

/// Collects stacks and answers "which stack belongs to the event at (timestamp, thread)".
#[derive(Default)]
pub struct StackMatcher {
    /// Direct stacks by event key, in the order their records came. Two events of a thread
    /// can share a timestamp, each with its own stack walk; a part that starts in user space
    /// continues the stack before it (the user half of a walk).
    direct: HashMap<EventKey, Vec<Vec<u64>>>,
    /// Key references by event: (key, is_user).
    refs: HashMap<EventKey, Vec<(u64, bool)>>,
    /// Key definitions.
    keys: HashMap<u64, Vec<u64>>,
    /// By thread (and CPU, for the idle threads): the last event whose stack comes in a later
    /// event of the same thread (the .NET runtime's ClrStackWalk follows the event it belongs
    /// to).
    awaiting: HashMap<(u32, u16), EventKey>,
    /// While [`StackMatcher::track_missed`] is on: what finds the stack walks that name no event.
    tracker: Option<MissedTracker>,
    tracked: bool,
    /// The stack records that belong to no event of the trace, by their own key (their raw
    /// timestamp, the thread whose stack they hold, their CPU); their frames are stored under
    /// that key too, so a firing for the record itself has them.
    missed: FastSet<EventKey>,
    /// While a trace walk reads the stacks a window ahead of the events it fires
    /// ([`StackMatcher::open_window`]): where the walk is, and the events whose stack came late.
    window: Option<Box<Window>>,
}

/// The state of a windowed matcher: a look-ahead over the trace feeds the stack parts of the
/// events a little ahead of the walk, and the walk's position says which events are behind it
/// (fired, their entries dropped). A part that comes for an event behind the walk came too
/// late: the event fired without it.
#[derive(Default)]
struct Window {
    /// The raw timestamp of the event the walk fires now: every event before it has fired.
    floor: i64,
    /// The events a firing asked the stack of, still remembered (those at or after
    /// `asked_floor`): behind a lock, as the walk asks through a shared reference.
    asked: std::sync::Mutex<FastSet<EventKey>>,
    /// Events before this time are no longer in `asked`.
    asked_floor: i64,
    /// Events a firing asked the stack of, and a part of whose stack came after they fired.
    late: u64,
    /// Stack parts that came for events behind the walk and before `asked_floor`: whether a
    /// firing asked for their event is no longer known.
    unknown: u64,
}

/// The facts for finding stack walks whose event the trace does not have.
#[derive(Default)]
struct MissedTracker {
    /// The raw timestamp of every record that is not a stack walk. Only the time is compared:
    /// the user half of a stack is logged when its thread returns to user mode, maybe on
    /// another CPU, and some events (samples) give their thread in the payload; at the clock's
    /// resolution another record at the very same tick is rare.
    seen: FastSet<i64>,
    /// Every StackWalk Stack record: the event it names and its own key.
    walks: Vec<(EventKey, EventKey)>,
}

impl StackMatcher {
    pub fn new() -> StackMatcher {
        StackMatcher::default()
    }

    /// Looks, from now on, for the stack walks that name no event ([`StackMatcher::missed`]):
    /// every record that is not a stack walk must then be given to
    /// [`StackMatcher::note_event`], and [`StackMatcher::resolve_missed`] called at the end.
    pub fn track_missed(&mut self) {
        self.tracker = Some(MissedTracker::default());
        self.tracked = true;
    }

    /// Whether the matcher looked for stack walks without an event.
    pub fn tracks_missed(&self) -> bool {
        self.tracked
    }

    /// Notes a record that is not a stack walk (when tracking missed stacks).
    #[inline]
    pub fn note_event(&mut self, ev: &EventRecord<'_>) {
        if let Some(t) = &mut self.tracker {
            t.seen.insert(ev.raw_timestamp);
        }
    }

    /// Ends the tracking: a StackWalk Stack record whose event time no other record of the
    /// trace has is missed; its frames are stored under its own key.
    pub fn resolve_missed(&mut self) {
        let Some(t) = self.tracker.take() else { return };
        for (target, own) in t.walks {
            if t.seen.contains(&target.0) {
                continue;
            }
            if let Some(frames) = self.direct.get(&target).cloned() {
                self.direct.entry(own).or_insert(frames);
            }
            self.missed.insert(own);
        }
    }

    /// The stack records that belong to no event, by their own key ([`event_key`]).
    pub fn missed(&self) -> &FastSet<EventKey> {
        &self.missed
    }

    /// Feeds one event (decoded, for kernel StackWalk events).
    #[inline]
    pub fn observe(&mut self, ev: &EventRecord<'_>, decoded: Option<&DecodedEvent<'_>>) {
        if decoded.is_some() || !ev.extended.is_empty() {
            self.observe_parts(ev, decoded);
        }
    }

    fn observe_parts(&mut self, ev: &EventRecord<'_>, decoded: Option<&DecodedEvent<'_>>) {
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
            let k = event_key(ev.raw_timestamp, ev.tid, ev.cpu);
            self.add_part(k, frames, ev.pointer_size);
        }
        let Some(d) = decoded else { return };
        if d.provider != "StackWalk" {
            return;
        }
        let frames = || match d.get("Stack") {
            Some(Value::Ptrs(v)) => v.clone(),
            _ => Vec::new(),
        };
        // a stack walk is logged on the CPU of the event it belongs to
        let at = || {
            Some(event_key(
                d.u64("EventTimeStamp")? as i64,
                d.u64("StackThread")? as u32,
                ev.cpu,
            ))
        };
        match d.name {
            "Stack" => {
                if let Some(k) = at() {
                    self.add_part(k, frames(), ev.pointer_size);
                    if let Some(t) = &mut self.tracker {
                        let own = event_key(ev.raw_timestamp, k.1, ev.cpu);
                        t.walks.push((k, own));
                    }
                }
            }
            "StackKeyKernel" | "StackKeyUser" => {
                if let (Some(k), Some(key)) = (at(), d.u64("StackKey")) {
                    if self.came_late(k) {
                        return;
                    }
                    self.refs
                        .entry(k)
                        .or_default()
                        .push((key, d.name == "StackKeyUser"));
                }
            }
            // a windowed walk's definitions were all read before it (the last one of a key
            // answers for the whole trace, as in the pass over the whole trace)
            "KeyDelete" | "KeyRundown" if self.window.is_none() => {
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
        let k = event_key(ev.raw_timestamp, ev.tid, ev.cpu);
        self.awaiting.insert((k.1, k.2), k);
    }

    /// Gives `frames` (a stack event's, e.g. ClrStackWalk's) to the event of its thread noted
    /// by [`StackMatcher::await_stack`], unless that event already has a stack. With no such
    /// event the stack event is missed, and keeps the frames under its own key.
    pub fn stack_of_previous(&mut self, stack_event: &EventRecord<'_>, frames: Vec<u64>) {
        // by thread, and CPU for an idle thread (each CPU's is a thread of its own)
        let (_, tid, cpu) = event_key(0, stack_event.tid, stack_event.cpu);
        match self.awaiting.remove(&(tid, cpu)) {
            Some(k) if self.came_late(k) => {}
            Some(k) => {
                let e = self.direct.entry(k).or_default();
                if e.is_empty() {
                    e.push(frames);
                }
            }
            None => {
                let own = event_key(stack_event.raw_timestamp, stack_event.tid, stack_event.cpu);
                self.direct.entry(own).or_default().push(frames);
                if self.window.is_none() {
                    self.missed.insert(own);
                }
            }
        }
    }

    /// The stack of the event with this raw timestamp on this thread (and CPU, which tells
    /// the idle threads apart): direct frames, then key-resolved kernel frames, then user
    /// frames. Keys not yet defined are skipped.
    pub fn stack(&self, raw_timestamp: i64, tid: u32, cpu: u16) -> Option<Vec<u64>> {
        self.stack_at(raw_timestamp, tid, cpu, None)
    }

    /// As [`StackMatcher::stack`]; when several stacks share the event's key, the one whose
    /// innermost frame is `pc` (a sample's instruction pointer), else the first.
    pub fn stack_at(
        &self,
        raw_timestamp: i64,
        tid: u32,
        cpu: u16,
        pc: Option<u64>,
    ) -> Option<Vec<u64>> {
        let k = event_key(raw_timestamp, tid, cpu);
        if let Some(w) = &self.window {
            w.asked.lock().unwrap_or_else(|e| e.into_inner()).insert(k);
        }
        let mut out = match self.direct.get(&k) {
            Some(stacks) => pc
                .and_then(|pc| stacks.iter().find(|s| s.first() == Some(&pc)))
                .or(stacks.first())
                .cloned()
                .unwrap_or_default(),
            None => Vec::new(),
        };
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
        self.stack(ev.raw_timestamp, ev.tid, ev.cpu)
    }

    /// Adds one stack walk record's frames to the event's stacks: a continuation of the last
    /// stack when it starts in user space and that stack has no user frames yet, else a
    /// stack of its own.
    fn add_part(&mut self, k: EventKey, frames: Vec<u64>, pointer_size: u8) {
        if frames.is_empty() || self.came_late(k) {
            return;
        }
        let stacks = self.direct.entry(k).or_default();
        let user = |pc: u64| !crate::etw::is_kernel_address(pc, pointer_size);
        match stacks.last_mut() {
            Some(last) if user(frames[0]) && !last.iter().any(|&pc| user(pc)) => {
                last.extend(frames)
            }
            _ => stacks.push(frames),
        }
    }

    /// Whether any stack part has come for the event.
    pub fn has_stack(&self, raw_timestamp: i64, tid: u32, cpu: u16) -> bool {
        let k = event_key(raw_timestamp, tid, cpu);
        self.direct.contains_key(&k) || self.refs.contains_key(&k)
    }

    /// Drops the stacks of events before `raw_timestamp` (a live session's matcher would
    /// otherwise grow for as long as it runs). Key definitions stay.
    pub fn forget_before(&mut self, raw_timestamp: i64) {
        self.direct.retain(|k, _| k.0 >= raw_timestamp);
        self.refs.retain(|k, _| k.0 >= raw_timestamp);
        self.awaiting.retain(|_, k| k.0 >= raw_timestamp);
    }

    /// Starts a windowed walk: from now on the stack parts come a window ahead of the walk,
    /// which says where it is with [`StackMatcher::walk_at`]; the entries of the events behind
    /// it are dropped, and a part that comes for such an event is counted
    /// ([`StackMatcher::late`]) and dropped. What a previous walk left of the events' stacks
    /// goes; key definitions stay (a first pass reads them all: they may come only in the
    /// rundown at the trace's end).
    pub fn open_window(&mut self) {
        self.direct.clear();
        self.refs.clear();
        self.awaiting.clear();
        self.missed.clear();
        self.tracker = None;
        self.tracked = false;
        self.window = Some(Box::default());
    }

    /// Whether a windowed walk is on ([`StackMatcher::open_window`]).
    pub fn is_windowed(&self) -> bool {
        self.window.is_some()
    }

    /// In a windowed walk: the walk fires the event at this raw timestamp (every event before
    /// it has fired).
    #[inline]
    pub fn walk_at(&mut self, raw_timestamp: i64) {
        if let Some(w) = &mut self.window {
            w.floor = w.floor.max(raw_timestamp);
        }
    }

    /// In a windowed walk: drops the stacks of the events behind the walk (they fired), and
    /// forgets which events before `asked_before` asked for their stacks. The `.NET` events
    /// waiting for a stack stay (one per thread): a stack that comes for one late is counted.
    pub fn forget_behind(&mut self, asked_before: i64) {
        let Some(w) = &mut self.window else { return };
        let floor = w.floor;
        self.direct.retain(|k, _| k.0 >= floor);
        self.refs.retain(|k, _| k.0 >= floor);
        let asked_before = asked_before.min(floor);
        if asked_before > w.asked_floor {
            w.asked_floor = asked_before;
            let asked = w.asked.get_mut().unwrap_or_else(|e| e.into_inner());
            asked.retain(|k| k.0 >= asked_before);
        }
    }

    /// In a windowed walk: (events that fired asking for their stack before a part of it
    /// came, stack parts that came for events so long behind the walk that whether they fired
    /// is no longer known).
    pub fn late(&self) -> (u64, u64) {
        self.window.as_ref().map_or((0, 0), |w| (w.late, w.unknown))
    }

    /// Whether a stack part for the event `k` comes too late (a windowed walk is past it):
    /// then it is counted, and not kept.
    #[inline]
    fn came_late(&mut self, k: EventKey) -> bool {
        let Some(w) = &mut self.window else {
            return false;
        };
        if k.0 >= w.floor {
            return false;
        }
        if k.0 < w.asked_floor {
            w.unknown += 1;
        } else if (w.asked.get_mut().unwrap_or_else(|e| e.into_inner())).remove(&k) {
            // counted once per event, however many of its parts come late
            w.late += 1;
        }
        true
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

    pub(super) fn ev(ts: i64, tid: u32) -> EventRecord<'static> {
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
        m.stack_of_previous(&ev(101, 7), vec![0x10, 0x20]);
        // a second stack event with no event before it on that thread is missed: it keeps its
        // frames under its own key
        m.stack_of_previous(&ev(102, 7), vec![0x30]);
        assert_eq!(m.stack(100, 7, 0), Some(vec![0x10, 0x20]));
        assert_eq!(m.stack(102, 7, 0), Some(vec![0x30]));
        assert_eq!(m.stack(105, 8, 0), None);
        m.stack_of_previous(&ev(106, 8), vec![0x40]);
        assert_eq!(m.stack(105, 8, 0), Some(vec![0x40]));
        let missed: Vec<_> = m.missed().iter().copied().collect();
        assert_eq!(missed, [event_key(102, 7, 0)]);
    }
}

#[cfg(test)]
mod idle_tests {
    use super::*;
    use crate::etw::record::ExtendedItem;

    fn with_stack(ts: i64, tid: u32, cpu: u16, data: &[u8]) -> EventRecord<'_> {
        EventRecord {
            cpu,
            extended: [ExtendedItem {
                ext_type: EXT_STACK_TRACE64,
                data,
            }]
            .into_iter()
            .collect(),
            ..super::tests::ev(ts, tid)
        }
    }

    fn item(pc: u64) -> Vec<u8> {
        let mut d = vec![0u8; 8];
        d.extend_from_slice(&pc.to_le_bytes());
        d
    }

    #[test]
    fn idle_threads_sampled_at_the_same_tick_keep_their_own_stacks() {
        // every CPU's idle thread is thread 0: the same (timestamp, thread) on two CPUs
        let (a, b, c) = (item(0xA), item(0xB), item(0x7ff0_0000_000c));
        let mut m = StackMatcher::new();
        m.observe(&with_stack(500, 0, 1, &a), None);
        m.observe(&with_stack(500, 0, 2, &b), None);
        assert_eq!(m.stack(500, 0, 1), Some(vec![0xA]));
        assert_eq!(m.stack(500, 0, 2), Some(vec![0xB]));
        // a real thread is one CPU at a time: its stack parts meet whatever CPU logged them,
        // and a part starting in user space continues a kernel-only part
        let (k1, k2) = (item(0xffff_f800_0000_1000), item(0xffff_f800_0000_2000));
        m.observe(&with_stack(600, 9, 1, &k1), None);
        m.observe(&with_stack(600, 9, 3, &c), None);
        assert_eq!(
            m.stack(600, 9, 0),
            Some(vec![0xffff_f800_0000_1000, 0x7ff0_0000_000c])
        );
        assert!(m.has_stack(600, 9, 5));
        // another event of the thread at the same tick has a stack of its own: the sample's
        // instruction pointer picks it, else the first stack answers
        m.observe(&with_stack(600, 9, 1, &k2), None);
        assert_eq!(
            m.stack_at(600, 9, 1, Some(0xffff_f800_0000_2000)),
            Some(vec![0xffff_f800_0000_2000])
        );
        assert_eq!(
            m.stack(600, 9, 1),
            Some(vec![0xffff_f800_0000_1000, 0x7ff0_0000_000c])
        );
        m.forget_before(600);
        assert!(!m.has_stack(500, 0, 1));
        assert!(m.has_stack(600, 9, 1));
    }
}

#[cfg(test)]
mod window_tests {
    use super::tests::ev;
    use super::*;

    #[test]
    fn stacks_that_come_after_the_walk_passed_their_event_are_counted_once() {
        let mut m = StackMatcher::new();
        m.open_window();
        // four .NET events whose managed stacks come in ClrStackWalk events after them
        for (ts, tid) in [(100, 8), (110, 7), (120, 9), (140, 10)] {
            m.await_stack(&ev(ts, tid));
        }
        // the walk fires the events of threads 8 and 7 (their stacks not yet read) and asks
        m.walk_at(100);
        assert_eq!(m.stack(100, 8, 0), None);
        m.walk_at(110);
        assert_eq!(m.stack(110, 7, 0), None);
        // it is past them all but thread 10's event; events before 105 are no longer
        // remembered as asked
        m.walk_at(130);
        m.forget_behind(105);
        // thread 7's stack comes late: its firing lacked it
        m.stack_of_previous(&ev(131, 7), vec![0x10]);
        // a second late part of the same event counts no more
        m.await_stack(&ev(110, 7));
        m.stack_of_previous(&ev(131, 7), vec![0x11]);
        // thread 9's event fired nothing: its late stack is dropped, not counted
        m.stack_of_previous(&ev(132, 9), vec![0x20]);
        // thread 8's event is before what is remembered: counted as unknown
        m.stack_of_previous(&ev(133, 8), vec![0x30]);
        // thread 10's event is ahead of the walk: its stack is kept for it
        m.stack_of_previous(&ev(141, 10), vec![0x40]);
        assert_eq!(m.late(), (1, 1));
        m.walk_at(140);
        assert_eq!(m.stack(140, 10, 0), Some(vec![0x40]));
        // late parts are not kept, and what is behind the walk goes
        assert_eq!(m.stack(110, 7, 0), None);
        assert_eq!(m.counts().0, 1);
        m.walk_at(150);
        m.forget_behind(i64::MIN);
        assert_eq!(m.counts().0, 0);
        // the missed stacks are the whole-trace pass's business, not the window's
        assert!(m.missed().is_empty());
    }

    #[test]
    fn a_matcher_without_a_window_counts_nothing_late() {
        let mut m = StackMatcher::new();
        m.await_stack(&ev(100, 7));
        m.walk_at(200);
        m.stack_of_previous(&ev(300, 7), vec![0x10]);
        assert_eq!(m.stack(100, 7, 0), Some(vec![0x10]));
        assert_eq!(m.late(), (0, 0));
    }
}
