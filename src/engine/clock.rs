//! Time for the engine: the live clock, or trace time when a recorded trace drives the run.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub trait Clock {
    /// Nanoseconds since an arbitrary origin (DTrace's `timestamp`).
    fn now_ns(&self) -> u64;
    /// Nanoseconds since the Unix epoch (`walltimestamp`).
    fn wall_ns(&self) -> u64;
    /// Waits until `now_ns() >= t`, or until `interrupted` says stop.
    fn sleep_until(&self, t: u64, interrupted: &dyn Fn() -> bool);
}

/// The machine's clocks.
pub struct LiveClock {
    origin: Instant,
    wall_origin: u64,
    /// `timestamp` at the origin: a large value, as a monotonic clock has after boot.
    base: u64,
}

impl LiveClock {
    pub fn new() -> Self {
        let wall_origin = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        LiveClock {
            origin: Instant::now(),
            wall_origin,
            base: monotonic_base(),
        }
    }
}

impl Default for LiveClock {
    fn default() -> Self {
        Self::new()
    }
}

fn monotonic_base() -> u64 {
    // the system's uptime in ns when available, so timestamps look like DTrace's
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|x| x.parse::<f64>().ok())
        })
        .map(|secs| (secs * 1e9) as u64)
        .unwrap_or(1_000_000_000)
}

impl Clock for LiveClock {
    fn now_ns(&self) -> u64 {
        self.base + self.origin.elapsed().as_nanos() as u64
    }

    fn wall_ns(&self) -> u64 {
        self.wall_origin + self.origin.elapsed().as_nanos() as u64
    }

    fn sleep_until(&self, t: u64, interrupted: &dyn Fn() -> bool) {
        loop {
            if interrupted() {
                return;
            }
            let now = self.now_ns();
            if now >= t {
                return;
            }
            // wake at least every 50 ms to notice interruptions
            let d = (t - now).min(50_000_000);
            std::thread::sleep(Duration::from_nanos(d));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_clock_moves_forward_and_sleeps() {
        let c = LiveClock::new();
        let a = c.now_ns();
        c.sleep_until(a + 2_000_000, &|| false);
        assert!(c.now_ns() >= a + 2_000_000);
        assert!(c.wall_ns() > 1_600_000_000_000_000_000);
        let t0 = c.now_ns();
        c.sleep_until(t0 + 10_000_000_000, &|| true);
        assert!(
            c.now_ns() < t0 + 1_000_000_000,
            "an interrupted sleep returns at once"
        );
    }
}
