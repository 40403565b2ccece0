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

/// Runs of records kept at most: a record that fits after none of them (later than no run's
/// last) goes into one by insertion, which costs a shift; with real-time delivery there are
/// about as many runs as streams delivering out of step (CPUs and sessions), far fewer.
const MAX_RUNS: usize = 64;

/// One held record: its key (raw timestamp, arrival number), the engine time of its arrival,
/// and the record.
struct Slot {
    ts: i64,
    seq: u64,
    arrived: u64,
    ev: LiveEvent,
}

/// The records waiting to go on in time order, as sorted runs: each record joins a run whose
/// last record is not later than it (records of one CPU's buffer, delivered whole and in
/// order, extend one run), so a run is sorted by (timestamp, arrival) and the oldest record
/// held is the oldest of the runs' first records. A small heap keeps the runs' first records
/// (one entry per run, not per record).
///
/// Records arrive mostly in order, so most join the run the previous one joined and leave
/// from its front: each record costs a push and a pop at the ends of a ring, and a heap of a
/// few entries, where a heap of every held record (50,000 in the `live_names` bench) cost a
/// sift through 16 levels of a 800 kB array per record (`docs/performance.md`).
pub struct Reorder {
    runs: Vec<VecDeque<Slot>>,
    /// The first record of each non-empty run: (timestamp, arrival number, run). An entry
    /// whose record is no longer its run's first (another was inserted before it) is stale
    /// and skipped.
    heads: BinaryHeap<Reverse<(i64, u64, usize)>>,
    /// The run the last record joined (the next one most likely joins it too).
    last_run: usize,
    len: usize,
    next_seq: u64,
    /// The newest raw timestamp that arrived.
    newest: i64,
    window_ns: u64,
}

impl Reorder {
    /// Holds records for `window_ns` (see [`reorder_window_ns`]).
    pub fn new(window_ns: u64) -> Reorder {
        Reorder {
            runs: Vec::new(),
            heads: BinaryHeap::new(),
            last_run: 0,
            len: 0,
            next_seq: 0,
            newest: i64::MIN,
            window_ns,
        }
    }

    /// Takes a record that arrived at engine time `now`.
    pub fn push(&mut self, ev: LiveEvent, now: u64) {
        let ts = ev.header.time_stamp;
        self.newest = self.newest.max(ts);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.len += 1;
        let slot = Slot {
            ts,
            seq,
            arrived: now,
            ev,
        };
        let fits = |r: &VecDeque<Slot>| r.back().is_none_or(|b| b.ts <= ts);
        let run = if self.runs.get(self.last_run).is_some_and(fits) {
            Some(self.last_run)
        } else {
            self.runs.iter().position(fits)
        };
        let r = match run {
            Some(r) => r,
            None if self.runs.len() < MAX_RUNS => {
                self.runs.push(VecDeque::new());
                self.runs.len() - 1
            }
            None => {
                // more streams out of step than runs: sorted into the run it goes furthest
                // back in (every run's last is later than it)
                let at = |r: &VecDeque<Slot>| r.partition_point(|s| (s.ts, s.seq) <= (ts, seq));
                let r = (0..self.runs.len())
                    .max_by_key(|&r| at(&self.runs[r]))
                    .unwrap_or(0);
                let i = at(&self.runs[r]);
                self.runs[r].insert(i, slot);
                if i == 0 {
                    self.heads.push(Reverse((ts, seq, r)));
                }
                self.last_run = r;
                return;
            }
        };
        let run = &mut self.runs[r];
        if run.is_empty() {
            self.heads.push(Reverse((ts, seq, r)));
        }
        run.push_back(slot);
        self.last_run = r;
    }

    /// The run holding the oldest record (its first), stale heap entries dropped.
    fn oldest(&mut self) -> Option<usize> {
        loop {
            let &Reverse((_, seq, r)) = self.heads.peek()?;
            if self.runs[r].front().is_some_and(|s| s.seq == seq) {
                return Some(r);
            }
            self.heads.pop();
        }
    }

    /// The oldest record when it may go: a record newer by the window arrived, it waited the
    /// window (with `quiet`: the engine's clock is the session's wall clock, not a replay's),
    /// or too many are held.
    pub fn pop_ready(&mut self, time: &TimeBase, now: u64, quiet: bool) -> Option<LiveEvent> {
        let r = self.oldest()?;
        let first = self.runs[r].front()?;
        let behind = time
            .since_start_ns(self.newest)
            .saturating_sub(time.since_start_ns(first.ts));
        let ready = behind >= 0 && behind as u64 >= self.window_ns
            || self.len > REORDER_MAX
            || quiet && now.saturating_sub(first.arrived) >= self.window_ns;
        if ready {
            self.take(r)
        } else {
            None
        }
    }

    /// The first record of run `r` (the oldest held).
    fn take(&mut self, r: usize) -> Option<LiveEvent> {
        self.heads.pop();
        let run = &mut self.runs[r];
        let slot = run.pop_front()?;
        if let Some(next) = run.front() {
            self.heads.push(Reverse((next.ts, next.seq, r)));
        }
        self.len -= 1;
        Some(slot.ev)
    }

    /// The oldest record, whatever its wait (the end of a run).
    pub fn pop(&mut self) -> Option<LiveEvent> {
        let r = self.oldest()?;
        self.take(r)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
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

    #[test]
    fn live_fix_reorder_runs_release_what_a_sort_would() {
        // streams delivered out of step (a few, and more than there are runs), with equal
        // timestamps across them: the records go in (timestamp, arrival) order, as a sort
        // keeping arrival order among equals gives them
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for streams in [1u16, 3, 200] {
            let mut next = vec![0i64; streams as usize];
            let mut r = Reorder::new(u64::MAX);
            // what is held, by (timestamp, arrival): the oldest is its first
            let mut shadow = std::collections::BTreeSet::new();
            for k in 0..20_000u64 {
                let s = rnd(streams as u64) as usize;
                next[s] += rnd(4) as i64;
                r.push(ev(next[s], s as u16), 0);
                shadow.insert((next[s], k, s as u16));
                // some leave while others come: each the oldest held then
                if k % 3 == 0 {
                    let e = r.pop().unwrap();
                    let want = shadow.pop_first().unwrap();
                    assert_eq!((e.header.time_stamp, e.cpu), (want.0, want.2), "{streams}");
                }
            }
            assert_eq!(r.len(), shadow.len());
            while let Some(want) = shadow.pop_first() {
                let e = r.pop().unwrap();
                assert_eq!((e.header.time_stamp, e.cpu), (want.0, want.2), "{streams}");
            }
            assert!(r.is_empty() && r.pop().is_none());
        }
        // everything held then taken: exactly the stable sort
        for streams in [2u64, 100] {
            let mut r = Reorder::new(u64::MAX);
            let mut arrivals = Vec::new();
            let mut next = vec![0i64; streams as usize];
            for k in 0..5_000u64 {
                let s = rnd(streams) as usize;
                next[s] += rnd(3) as i64;
                arrivals.push((next[s], s as u16, k));
                r.push(ev(next[s], s as u16), 0);
            }
            let mut want = arrivals.clone();
            want.sort_by_key(|e| (e.0, e.2));
            let got: Vec<(i64, u16)> = std::iter::from_fn(|| r.pop())
                .map(|e| (e.header.time_stamp, e.cpu))
                .collect();
            let want: Vec<(i64, u16)> = want.iter().map(|e| (e.0, e.1)).collect();
            assert_eq!(got, want, "{streams} streams");
        }
    }
}
