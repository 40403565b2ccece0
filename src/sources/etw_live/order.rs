//! Real-time records put back in time order before the system state and the probes see them.
//!
//! A real-time session hands its records over buffer by buffer: each CPU logs into buffers of
//! its own, and a buffer reaches the consumer when it is full or when the session's flush
//! timer (`EVENT_TRACE_PROPERTIES.FlushTimer`, Microsoft Learn) fires; a run's kernel and
//! user sessions are read by two ProcessTrace threads. So records arrive in arrival order, not
//! time order: a quiet CPU's records can come up to a flush period after a busy CPU's newer
//! ones. A trace file's reader merges the per-CPU buffers by timestamp
//! (`etw::reader::merge`); live, the same order is rebuilt within a window a little longer
//! than the flush period: a record goes on once a record newer by the window has arrived (then
//! nothing older can still come), or once it has waited the window itself (a quiet session).
//! Records of the same timestamp keep their arrival order (as the trace reader keeps a
//! buffer's order), so in-order delivery goes on exactly as it came.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::raw::LiveEvent;
use crate::etw::reader::logfile::TimeBase;

/// The flush timer of dtx's real-time sessions, in seconds (`FlushTimer`): a quiet CPU's
/// buffer reaches the consumer at most this long after its records were logged.
pub const FLUSH_TIMER_S: u32 = 1;

/// How long, in ns, a record is held for older records that may still come: the flush period
/// plus a margin for the delivery itself (the ProcessTrace thread's turn, the queue).
pub const fn reorder_window_ns(flush_timer_s: u32) -> u64 {
    flush_timer_s as u64 * 1_000_000_000 + 500_000_000
}

/// Records held at most: past this the oldest goes on without waiting (memory stays bounded
/// under any rate; at 100,000 records/s the window holds about 150,000).
pub const REORDER_MAX: usize = 1 << 19;

/// The records waiting to go on in time order: the records themselves in arrival order (a
/// ring indexed by arrival number: they leave about in arrival order, so it stays about the
/// window's size), and a heap of their small keys (moving a key is cheaper than a record).
pub struct Reorder {
    heap: BinaryHeap<Reverse<(i64, u64)>>,
    /// Slot `i` holds the record of arrival number `first + i` (None once it went) and the
    /// engine time of its arrival.
    slots: VecDeque<Option<(LiveEvent, u64)>>,
    first: u64,
    /// The newest raw timestamp that arrived.
    newest: i64,
    window_ns: u64,
}

impl Reorder {
    /// Holds records for `window_ns` (see [`reorder_window_ns`]).
    pub fn new(window_ns: u64) -> Reorder {
        Reorder {
            heap: BinaryHeap::new(),
            slots: VecDeque::new(),
            first: 0,
            newest: i64::MIN,
            window_ns,
        }
    }

    /// Takes a record that arrived at engine time `now`.
    pub fn push(&mut self, ev: LiveEvent, now: u64) {
        let ts = ev.header.time_stamp;
        self.newest = self.newest.max(ts);
        let seq = self.first + self.slots.len() as u64;
        self.heap.push(Reverse((ts, seq)));
        self.slots.push_back(Some((ev, now)));
    }

    /// The oldest record when it may go: a record newer by the window arrived, it waited the
    /// window (with `quiet`: the engine's clock is the session's wall clock, not a replay's),
    /// or too many are held.
    pub fn pop_ready(&mut self, time: &TimeBase, now: u64, quiet: bool) -> Option<LiveEvent> {
        let &Reverse((ts, seq)) = self.heap.peek()?;
        let behind = time
            .since_start_ns(self.newest)
            .saturating_sub(time.since_start_ns(ts));
        let ready = behind >= 0 && behind as u64 >= self.window_ns
            || self.heap.len() > REORDER_MAX
            || quiet && now.saturating_sub(self.arrived(seq)) >= self.window_ns;
        if ready {
            self.pop()
        } else {
            None
        }
    }

    fn arrived(&self, seq: u64) -> u64 {
        let i = seq.wrapping_sub(self.first) as usize;
        match self.slots.get(i) {
            Some(Some((_, at))) => *at,
            _ => 0,
        }
    }

    /// The oldest record, whatever its wait (the end of a run).
    pub fn pop(&mut self) -> Option<LiveEvent> {
        let Reverse((_, seq)) = self.heap.pop()?;
        let i = seq.wrapping_sub(self.first) as usize;
        let ev = self
            .slots
            .get_mut(i)
            .and_then(Option::take)
            .map(|(ev, _)| ev);
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.first += 1;
        }
        ev
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: i64, cpu: u16) -> LiveEvent {
        let mut e = LiveEvent {
            header: Default::default(),
            cpu,
            payload: Vec::new(),
            extended: Vec::new(),
        };
        e.header.time_stamp = ts;
        e
    }

    #[test]
    fn live_fix_reorder_releases_in_time_order_after_the_window() {
        // a TimeBase of 10 MHz ticks (100 ns), as QPC commonly runs
        let time = TimeBase::default();
        let tick = |ns: i64| ns / 100;
        let mut r = Reorder::new(reorder_window_ns(FLUSH_TIMER_S));
        // CPU 1's buffer comes 0.9 s late, after CPU 0's newer records
        r.push(ev(tick(1_000_000_000), 0), 0);
        r.push(ev(tick(1_100_000_000), 0), 0);
        r.push(ev(tick(200_000_000), 1), 0);
        r.push(ev(tick(1_000_000_000), 1), 0);
        // nothing is 1.5 s behind the newest yet
        assert!(r.pop_ready(&time, 0, true).is_none());
        // a record 1.5 s newer than the oldest lets it go, and only it
        r.push(ev(tick(1_700_000_000), 0), 0);
        let first = r.pop_ready(&time, 0, false).unwrap();
        assert_eq!(first.header.time_stamp, tick(200_000_000));
        assert!(r.pop_ready(&time, 0, false).is_none());
        // a quiet session: the wait alone lets records go, once the window has passed
        assert!(r.pop_ready(&time, 1_499_999_999, true).is_none());
        let next = r.pop_ready(&time, 1_500_000_000, true).unwrap();
        // equal timestamps go in arrival order
        assert_eq!((next.header.time_stamp, next.cpu), (tick(1_000_000_000), 0));
        let next = r.pop_ready(&time, 1_500_000_000, true).unwrap();
        assert_eq!((next.header.time_stamp, next.cpu), (tick(1_000_000_000), 1));
        // the end of a run takes all, in order
        let rest: Vec<i64> = std::iter::from_fn(|| r.pop())
            .map(|e| e.header.time_stamp)
            .collect();
        assert_eq!(rest, vec![tick(1_100_000_000), tick(1_700_000_000)]);
        assert!(r.is_empty());
    }
}
