//! The drain thread of one traced process's fpid ring: it copies records out of the shared
//! ring as fast as the agent writes them, freeing the agent's room at once, into a queue of
//! chunks the fpid source fires from at the engine's pace. The queue is bounded (about the
//! ring's size, at most [`QUEUE_MAX`]); when the engine falls behind, the queue fills, the
//! ring fills, and the agent waits (bounded: `fpidwait`) for room, which the drain frees a
//! chunk at a time, so a hot loop is slowed to what dtx can count rather than losing hits.
//!
//! The thread also beats (the header's `beat`, about every millisecond): a waiting writer
//! waits while it sees dtx there. It stops beating when the source has taken nothing from a
//! full queue for [`GRACE`] (a consumer stuck, say on a blocked stdout): the target's hits
//! then wait `fpidwait` more and are dropped and counted, so a stuck dtx slows its target
//! for a bounded time and a dead one for `fpidwait` once.

use super::ring::SharedRing;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Most bytes of records the queue holds.
const QUEUE_MAX: usize = 64 << 20;

/// Bytes a chunk holds at most: small enough that the ring's `tail` moves often.
const CHUNK: usize = 1 << 20;

/// How long the thread sleeps when the ring was empty.
const IDLE: Duration = Duration::from_micros(500);

/// How long a full queue waits for the source to take a chunk before the thread stops
/// beating (it covers the start of a run, before the engine's first pump, on a busy machine).
const GRACE: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Queue {
    chunks: VecDeque<Vec<u8>>,
    bytes: usize,
    /// Chunks fired and handed back, for reuse.
    spare: Vec<Vec<u8>>,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when a chunk is queued (for the source) or taken (for the thread).
    changed: Condvar,
    stop: AtomicBool,
    /// When the source last took a chunk (or the thread started), as ns since `start`.
    taken_at: AtomicU64,
    start: Instant,
}

impl Shared {
    fn ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

/// The thread and its queue.
pub struct Drain {
    ring: Arc<SharedRing>,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drain {
    /// Starts draining `ring`; a thread that cannot start leaves the source draining the
    /// ring itself ([`Drain::next`] reads it directly then).
    pub fn start(ring: Arc<SharedRing>) -> Drain {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            taken_at: AtomicU64::new(0),
            start: Instant::now(),
        });
        let limit = ring.ring_size().clamp(CHUNK, QUEUE_MAX);
        let thread = {
            let (ring, shared) = (ring.clone(), shared.clone());
            std::thread::Builder::new()
                .name("dtx-fpid-drain".into())
                .spawn(move || run(&ring, &shared, limit))
                .ok()
        };
        Drain {
            ring,
            shared,
            thread,
        }
    }

    pub fn ring(&self) -> &SharedRing {
        &self.ring
    }

    /// The next chunk of records, waiting up to `wait` for one; `None` when there is none.
    /// Hand it back with [`Drain::recycle`].
    pub fn next(&self, wait: Duration) -> Option<Vec<u8>> {
        if self.thread.is_none() {
            return self.read_ring();
        }
        let Ok(mut q) = self.shared.queue.lock() else {
            return None;
        };
        if q.chunks.is_empty() && !wait.is_zero() {
            q = match self.shared.changed.wait_timeout(q, wait) {
                Ok((q, _)) => q,
                Err(_) => return None,
            };
        }
        let chunk = q.chunks.pop_front()?;
        q.bytes -= chunk.len();
        drop(q);
        self.shared
            .taken_at
            .store(self.shared.ns(), Ordering::Relaxed);
        self.shared.changed.notify_all();
        Some(chunk)
    }

    /// Takes a fired chunk back for reuse.
    pub fn recycle(&self, mut chunk: Vec<u8>) {
        chunk.clear();
        if let Ok(mut q) = self.shared.queue.lock() {
            if q.spare.len() < 4 {
                q.spare.push(chunk);
            }
        }
    }

    /// Stops the thread; what it queued stays to be taken, and [`Drain::next`] reads the
    /// ring itself from now on (what the target wrote last).
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.changed.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// With the thread stopped: what it queued, then what the ring holds.
    fn read_ring(&self) -> Option<Vec<u8>> {
        if let Ok(mut q) = self.shared.queue.lock() {
            if let Some(c) = q.chunks.pop_front() {
                q.bytes -= c.len();
                return Some(c);
            }
        }
        let mut buf = Vec::new();
        (self.ring.drain(&mut buf, CHUNK) > 0).then_some(buf)
    }
}

impl Drop for Drain {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The thread: copies chunks out of the ring while the queue has room.
fn run(ring: &SharedRing, shared: &Shared, limit: usize) {
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        ring.beat();
        let mut buf = {
            let Ok(mut q) = shared.queue.lock() else {
                return;
            };
            while q.bytes >= limit && !shared.stop.load(Ordering::Relaxed) {
                let idle = shared
                    .ns()
                    .saturating_sub(shared.taken_at.load(Ordering::Relaxed));
                if idle < GRACE.as_nanos() as u64 {
                    ring.beat();
                }
                q = match shared.changed.wait_timeout(q, Duration::from_millis(1)) {
                    Ok((q, _)) => q,
                    Err(_) => return,
                };
            }
            q.spare.pop().unwrap_or_default()
        };
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        if ring.drain(&mut buf, CHUNK) == 0 {
            if let Ok(mut q) = shared.queue.lock() {
                q.spare.push(buf);
            }
            std::thread::sleep(IDLE);
            continue;
        }
        let Ok(mut q) = shared.queue.lock() else {
            return;
        };
        q.bytes += buf.len();
        q.chunks.push_back(buf);
        drop(q);
        shared.changed.notify_all();
    }
}
