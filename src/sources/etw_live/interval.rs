//! The system-wide sampling interval shared by concurrent dtx runs: who set it, what it was
//! before, and who gives it back. Platform-neutral rules over a small ledger; `windows` keeps
//! the ledger in a file (`%ProgramData%\dtx\sampling-interval.txt`) read and written under a
//! named mutex (`Global\dtx-sampling-interval`), so that every dtx on the machine sees the
//! same one.
//!
//! The interval (TraceSetInformation TraceSampledProfileIntervalInfo) is one value for the
//! whole system, and every run's `profile-N` fires from the samples taken at it. The rules:
//!
//! * the first run that needs it (no live holder) remembers the system's value and sets its
//!   own; later runs that want the same value join as holders; a later run that wants another
//!   value does not change it (that would change the first run's rate under it): its samples
//!   come at the held value, and it says so before it runs;
//! * a run that ends leaves the interval alone while other live runs hold it; the last holder
//!   gives the system its value back, and only when the system still samples at what dtx set:
//!   when another program changed it meanwhile, dtx leaves it and says so;
//! * holders whose process is gone (killed, logged off) are dropped whenever the ledger is
//!   read; when none is left and the system still samples at what they set, the next dtx that
//!   starts gives the system its value back (a logoff ends a dtx without a word to it).

use super::plan::session::Owner;

/// What the ledger holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    /// The system's interval before dtx first set it (100 ns units).
    pub original: Option<u32>,
    /// The interval the holders asked for.
    pub asked: Option<u32>,
    /// The interval the system took when it was set (read back: Windows rounds to what its
    /// timer can do).
    pub set: Option<u32>,
    /// The dtx runs that hold it.
    pub holders: Vec<Owner>,
}

/// What a run that wants an interval does ([`Ledger::claim`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Set the system's interval to this (the run is the first holder).
    Set(u32),
    /// Live holders asked for the same interval: joined them.
    Joined,
    /// Another live run holds another interval: left as it is (samples come at `interval`).
    Held { by: Owner, interval: u32 },
}

/// What a run that ends does with the interval ([`Ledger::release`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// Give the system this interval back (the run was the last holder).
    Restore(u32),
    /// Other live runs still hold it: left as it is.
    Kept,
    /// The system samples at `now`, not at what dtx set (`set`): another program changed it
    /// meanwhile, and it is left as it is.
    ChangedMeanwhile { now: u32, set: u32 },
    /// The run held nothing.
    NotHeld,
}

impl Ledger {
    /// The ledger as the file holds it: `original N`, `asked N`, `set N` and one `holder PID START` a
    /// line (START `-` when unknown). Lines it does not understand are skipped: a damaged
    /// file reads as what it still says, at worst as empty.
    pub fn parse(text: &str) -> Ledger {
        let mut l = Ledger::default();
        for line in text.lines() {
            let mut w = line.split_whitespace();
            match (w.next(), w.next(), w.next()) {
                (Some("original"), Some(v), None) => l.original = v.parse().ok(),
                (Some("asked"), Some(v), None) => l.asked = v.parse().ok(),
                (Some("set"), Some(v), None) => l.set = v.parse().ok(),
                (Some("holder"), Some(pid), Some(start)) => {
                    if let Ok(pid) = pid.parse() {
                        let started = start.parse().ok();
                        l.holders.push(Owner { pid, started });
                    }
                }
                _ => {}
            }
        }
        l
    }

    /// The text of [`Ledger::parse`].
    pub fn render(&self) -> String {
        let mut out = String::from(
            "# dtx: the system's sampling interval before dtx set it, what dtx set, the dtx runs \
             that hold it\n",
        );
        if let Some(v) = self.original {
            out.push_str(&format!("original {v}\n"));
        }
        if let Some(v) = self.asked {
            out.push_str(&format!("asked {v}\n"));
        }
        if let Some(v) = self.set {
            out.push_str(&format!("set {v}\n"));
        }
        for h in &self.holders {
            match h.started {
                Some(t) => out.push_str(&format!("holder {} {t}\n", h.pid)),
                None => out.push_str(&format!("holder {} -\n", h.pid)),
            }
        }
        out
    }

    /// Drops the holders `alive` says are gone.
    pub fn prune(&mut self, alive: impl Fn(Owner) -> bool) {
        self.holders.retain(|h| alive(*h));
    }

    /// With no live holder left: the interval to give the system back when it still samples
    /// at what the gone holders set (`current`). The record stays until the caller says the
    /// system took it back ([`Ledger::swept`]): a sweep that cannot set the interval (no
    /// SeSystemProfilePrivilege, a failed call) leaves it for the next dtx. With nothing to
    /// give back the ledger is emptied.
    pub fn sweep(&mut self, current: Option<u32>) -> Option<u32> {
        if !self.holders.is_empty() {
            return None;
        }
        let restore = match (self.original, self.set) {
            (Some(o), Some(s)) if current == Some(s) && o != s => Some(o),
            _ => None,
        };
        if restore.is_none() {
            *self = Ledger::default();
        }
        restore
    }

    /// After [`Ledger::sweep`]: the system samples at the original again; the record goes.
    pub fn swept(&mut self) {
        if self.holders.is_empty() {
            *self = Ledger::default();
        }
    }

    /// `me` wants the system to sample every `want` (100 ns units); the system samples at
    /// `current` now (None: cannot be read). Live holders only (after [`Ledger::prune`]).
    pub fn claim(&mut self, me: Owner, want: u32, current: Option<u32>) -> Claim {
        self.holders.retain(|h| *h != me);
        match (self.holders.first(), self.asked) {
            (Some(&by), Some(asked)) if asked != want => Claim::Held {
                by,
                interval: self.set.unwrap_or(asked),
            },
            (Some(_), Some(_)) => {
                self.holders.push(me);
                Claim::Joined
            }
            _ => {
                // the first holder: the system's value is what to give back, unless it is
                // still what gone holders set (their original stays the one to give back)
                let left_over = self.set.is_some() && self.set == current;
                if !left_over || self.original.is_none() {
                    self.original = current;
                }
                self.asked = Some(want);
                self.set = Some(want);
                self.holders = vec![me];
                Claim::Set(want)
            }
        }
    }

    /// After [`Claim::Set`]: the interval the system took (read back), what a release
    /// compares with.
    pub fn took(&mut self, actual: u32) {
        self.set = Some(actual);
    }

    /// Takes `me` out of the holders without touching the interval (setting it failed); the
    /// system samples at `current`. When that is still what gone holders set, the record
    /// says so (the original to give back, the interval they set) for a later sweep;
    /// otherwise the ledger is emptied.
    pub fn withdraw(&mut self, me: Owner, current: Option<u32>) {
        self.holders.retain(|h| *h != me);
        if self.holders.is_empty() {
            match (self.original, current) {
                (Some(o), Some(now)) if o != now => {
                    self.asked = Some(now);
                    self.set = Some(now);
                }
                _ => *self = Ledger::default(),
            }
        }
    }

    /// `me` ends; the system samples at `current` now. Live holders only.
    pub fn release(&mut self, me: Owner, current: Option<u32>) -> Release {
        let n = self.holders.len();
        self.holders.retain(|h| *h != me);
        if self.holders.len() == n {
            return Release::NotHeld;
        }
        if !self.holders.is_empty() {
            return Release::Kept;
        }
        let (original, set) = (self.original, self.set);
        *self = Ledger::default();
        match (original, set, current) {
            (Some(o), Some(s), Some(now)) if now == s => Release::Restore(o),
            (_, Some(s), Some(now)) => Release::ChangedMeanwhile { now, set: s },
            // the interval cannot be read: what dtx set is given back as remembered
            (Some(o), Some(_), None) => Release::Restore(o),
            _ => Release::NotHeld,
        }
    }
}

/// What a run that asked for `want` should be told of its claim, or None when it got what it
/// asked for. `profile-N` fires from each CPU's samples thinned to N a second: a held interval
/// finer than asked still gives N a second, a coarser one fewer.
pub fn claim_note(claim: Claim, want: u32) -> Option<String> {
    let ms = |i: u32| i as f64 / 10_000.0;
    match claim {
        Claim::Held { by, interval } => {
            let effect = if interval <= want {
                "profile probes here still fire at their own rate (thinned from its samples)"
                    .to_string()
            } else {
                format!(
                    "profile probes here fire at most once every {:.4} ms per CPU, less often \
                     than the {:.4} ms asked",
                    ms(interval),
                    ms(want)
                )
            };
            Some(format!(
                "the sampling interval is system-wide and another dtx (process {}) holds it at \
                 {:.4} ms while it runs; it is left so (changing it would change that run's \
                 rate): {effect}",
                by.pid,
                ms(interval)
            ))
        }
        _ => None,
    }
}

/// What a run should be told of its release, or None when nothing needs saying.
pub fn release_note(release: Release) -> Option<String> {
    match release {
        Release::ChangedMeanwhile { now, set } => Some(format!(
            "the sampling interval was not restored: dtx set it to {:.4} ms, and another program \
             changed it to {:.4} ms since; it is left as that program set it",
            set as f64 / 10_000.0,
            now as f64 / 10_000.0
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ledger that gone runs left: the system still samples at 0.1221 ms, 1 ms before.
    fn left_by_gone_runs() -> Ledger {
        Ledger {
            original: Some(10_000),
            asked: Some(1_221),
            set: Some(1_221),
            holders: Vec::new(),
        }
    }

    /// Issue 42, finding 5: the sweep's record stays until the system took the original back.
    #[test]
    fn win3_a_sweep_keeps_the_record_until_the_interval_is_given_back() {
        let mut l = left_by_gone_runs();
        assert_eq!(l.sweep(Some(1_221)), Some(10_000));
        // setting it failed (no SeSystemProfilePrivilege): the next dtx sweeps again
        assert_eq!(l.original, Some(10_000));
        assert_eq!(l.sweep(Some(1_221)), Some(10_000));
        l.swept();
        assert_eq!(l, Ledger::default());
        // nothing to give back: emptied at once
        let mut l = left_by_gone_runs();
        assert_eq!(l.sweep(Some(10_000)), None);
        assert_eq!(l, Ledger::default());
    }

    /// Issue 42, finding 5: a run whose set fails keeps what gone runs left to give back.
    #[test]
    fn win3_a_failed_set_keeps_the_original_of_gone_runs() {
        let me = of(42, 7);
        let mut l = left_by_gone_runs();
        assert_eq!(l.claim(me, 5_000, Some(1_221)), Claim::Set(5_000));
        l.withdraw(me, Some(1_221));
        assert_eq!(l.sweep(Some(1_221)), Some(10_000));
        // a claim of nothing left over that fails leaves nothing behind
        let mut l = Ledger::default();
        assert_eq!(l.claim(me, 5_000, Some(10_000)), Claim::Set(5_000));
        l.withdraw(me, Some(10_000));
        assert_eq!(l.sweep(Some(10_000)), None);
        assert_eq!(l, Ledger::default());
    }

    fn of(pid: u32, t: u64) -> Owner {
        Owner {
            pid,
            started: Some(t),
        }
    }

    const SYSTEM: u32 = 10_000;

    #[test]
    fn live_fix_interval_two_runs_the_last_restores() {
        let (a, b) = (of(1, 10), of(2, 20));
        let mut l = Ledger::default();
        assert_eq!(l.claim(a, 10_030, Some(SYSTEM)), Claim::Set(10_030));
        // the second run wants the same: it joins, and does not take 10_030 as the original
        assert_eq!(l.claim(b, 10_030, Some(10_030)), Claim::Joined);
        assert_eq!(l.original, Some(SYSTEM));
        // the first to end leaves it for the other
        assert_eq!(l.release(a, Some(10_030)), Release::Kept);
        assert_eq!(l.release(b, Some(10_030)), Release::Restore(SYSTEM));
        assert_eq!(l, Ledger::default());
        // a run that held nothing restores nothing
        assert_eq!(l.release(a, Some(10_030)), Release::NotHeld);
    }

    #[test]
    fn live_fix_interval_compares_what_the_system_took() {
        // Windows samples at 1 ms when 1.003 ms is asked: a second run asking 1.003 ms joins,
        // and the release compares the system's value with the 1 ms it took
        let (a, b) = (of(1, 10), of(2, 20));
        let mut l = Ledger::default();
        assert_eq!(l.claim(a, 10_030, Some(SYSTEM + 1)), Claim::Set(10_030));
        l.took(SYSTEM);
        assert_eq!(l.claim(b, 10_030, Some(SYSTEM)), Claim::Joined);
        assert_eq!(l.release(a, Some(SYSTEM)), Release::Kept);
        assert_eq!(l.release(b, Some(SYSTEM)), Release::Restore(SYSTEM + 1));
        // a failed set withdraws
        let mut l = Ledger::default();
        l.claim(a, 10_030, Some(SYSTEM));
        l.withdraw(a, Some(SYSTEM));
        assert_eq!(l, Ledger::default());
    }

    #[test]
    fn live_fix_interval_another_rate_is_not_forced() {
        let (a, b) = (of(1, 10), of(2, 20));
        let mut l = Ledger::default();
        assert_eq!(l.claim(a, 10_030, Some(SYSTEM)), Claim::Set(10_030));
        let held = l.claim(b, 1_221, Some(10_030));
        assert_eq!(
            held,
            Claim::Held {
                by: a,
                interval: 10_030
            }
        );
        let note = claim_note(held, 1_221).unwrap();
        assert!(
            note.contains("process 1")
                && note.contains("1.0030 ms")
                && note.contains("less often than the 0.1221 ms asked"),
            "{note}"
        );
        // a finer held interval still gives the asked rate
        let finer = claim_note(
            Claim::Held {
                by: a,
                interval: 1_221,
            },
            10_030,
        )
        .unwrap();
        assert!(finer.contains("at their own rate"), "{finer}");
        assert_eq!(claim_note(Claim::Joined, 10_030), None);
        // b holds nothing: its end changes nothing, a's end restores
        assert_eq!(l.release(b, Some(10_030)), Release::NotHeld);
        assert_eq!(l.release(a, Some(10_030)), Release::Restore(SYSTEM));
    }

    #[test]
    fn live_fix_interval_changed_meanwhile_is_left_and_said() {
        let a = of(1, 10);
        let mut l = Ledger::default();
        l.claim(a, 10_030, Some(SYSTEM));
        let r = l.release(a, Some(5_000));
        assert_eq!(
            r,
            Release::ChangedMeanwhile {
                now: 5_000,
                set: 10_030
            }
        );
        let note = release_note(r).unwrap();
        assert!(
            note.contains("not restored") && note.contains("0.5000 ms"),
            "{note}"
        );
    }

    #[test]
    fn live_fix_interval_left_by_a_dead_run_is_given_back() {
        let (dead, next) = (of(1, 10), of(2, 20));
        let mut l = Ledger::default();
        l.claim(dead, 10_030, Some(SYSTEM));
        // dead's process is gone (a logoff): the ledger outlives it
        let mut l = Ledger::parse(&l.render());
        l.prune(|o| o != dead);
        // the next dtx that starts gives the value back
        let mut swept = l.clone();
        assert_eq!(swept.sweep(Some(10_030)), Some(SYSTEM));
        // the record goes once the system took it back (issue 42: not before)
        swept.swept();
        assert_eq!(swept, Ledger::default());
        // not when someone changed it since
        let mut changed = l.clone();
        assert_eq!(changed.sweep(Some(3_000)), None);
        // a new run that sets it keeps the first original, not the dead run's value
        assert_eq!(l.claim(next, 1_221, Some(10_030)), Claim::Set(1_221));
        assert_eq!(l.release(next, Some(1_221)), Release::Restore(SYSTEM));
        // live holders are never swept
        let mut held = Ledger::default();
        held.claim(next, 1_221, Some(SYSTEM));
        assert_eq!(held.sweep(Some(1_221)), None);
        assert_eq!(held.holders, vec![next]);
    }

    #[test]
    fn live_fix_interval_ledger_reads_back_and_survives_damage() {
        let mut l = Ledger::default();
        l.claim(of(7, 99), 10_030, Some(SYSTEM));
        l.holders.push(Owner {
            pid: 8,
            started: None,
        });
        assert_eq!(Ledger::parse(&l.render()), l);
        let damaged = "original x\nset 10030\nholder 7\nholder 9 5\n\u{0}garbage\nholder q 1\n";
        let d = Ledger::parse(damaged);
        assert_eq!(d.original, None);
        assert_eq!(d.set, Some(10_030));
        assert_eq!(d.holders, vec![of(9, 5)]);
        // nothing to give back without an original
        let mut d = d;
        d.holders.clear();
        assert_eq!(d.sweep(Some(10_030)), None);
    }
}
