//! The processes that ended and whose pid a newer process took: kept because their images name
//! the frames of stacks recorded while they ran (an aggregation prints those at END), but
//! bounded, since a live session may see processes come and go for hours.
//!
//! Two rules keep them few:
//! * A process whose images name nothing its successor under the same pid does not name the
//!   same way (every image of it, mapped or unloaded, is an identical image of the successor:
//!   same place, file, identity and epochs) is replaced by that successor: names built from
//!   either are the same. A program started again and again under reused pids (the common
//!   case of many short-lived processes) keeps one entry per pid.
//! * Past [`EXITED_MAX`] processes the one that ended first is forgotten. Frames of stacks it
//!   recorded are then named by the images of the newer processes of its pid at those
//!   addresses, or print as bare addresses; the count of forgotten processes is kept
//!   ([`Exited::forgotten`]) so that a report can say so.

use std::collections::VecDeque;

use super::{Image, Process};
use crate::fasthash::FastMap;

/// Ended processes kept at most (of all pids together).
pub const EXITED_MAX: usize = 4096;

/// The ended processes by pid, each pid's in the order they ended.
#[derive(Default)]
pub(super) struct Exited {
    by_pid: FastMap<u32, VecDeque<Process>>,
    /// The pid of each kept process, in the order they ended (the oldest first).
    order: VecDeque<u32>,
    forgotten: u64,
}

impl Exited {
    /// Keeps `p`, which ended and whose pid a new process took; returns whether the pid's
    /// previous ended process was replaced by it (it names nothing `p` does not).
    pub(super) fn push(&mut self, p: Process) -> bool {
        let pid = p.pid;
        let list = self.by_pid.entry(pid).or_default();
        if let Some(last) = list.back_mut() {
            if names_nothing_more(last, &p) {
                // its place in the order stays: it ended before the newer one, a little
                // earlier than this one did
                *last = p;
                return true;
            }
        }
        list.push_back(p);
        self.order.push_back(pid);
        while self.order.len() > EXITED_MAX {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(list) = self.by_pid.get_mut(&old) {
                if list.pop_front().is_some() {
                    self.forgotten += 1;
                }
                if list.is_empty() {
                    self.by_pid.remove(&old);
                }
            }
        }
        false
    }

    /// The ended processes of `pid`, the one that ended first first.
    pub(super) fn of_pid(&self, pid: u32) -> impl DoubleEndedIterator<Item = &Process> {
        self.by_pid.get(&pid).into_iter().flatten()
    }

    pub(super) fn of_pid_mut(&mut self, pid: u32) -> impl Iterator<Item = &mut Process> {
        self.by_pid.get_mut(&pid).into_iter().flatten()
    }

    /// Every kept process, each pid's in the order they ended.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Process> {
        self.by_pid.values().flatten()
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Process> {
        self.by_pid.values_mut().flatten()
    }

    /// How many are kept.
    pub(super) fn len(&self) -> usize {
        self.order.len()
    }

    /// How many were forgotten past [`EXITED_MAX`].
    pub(super) fn forgotten(&self) -> u64 {
        self.forgotten
    }
}

/// Whether every image of `old` (mapped or unloaded) is an identical image of `new`: then
/// `old` names no address `new` does not name the same way, in any epoch.
fn names_nothing_more(old: &Process, new: &Process) -> bool {
    let has = |i: &Image| {
        let mapped = new
            .images
            .binary_search_by_key(&i.base, |n| n.base)
            .is_ok_and(|k| new.images[k] == *i);
        mapped || new.unloaded_images.iter().any(|n| n == i)
    };
    old.pid == new.pid && old.images.iter().chain(&old.unloaded_images).all(has)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(pid: u32, files: &[(u64, &str)]) -> Process {
        Process {
            pid,
            images: files
                .iter()
                .map(|&(base, f)| Image {
                    base,
                    size: 0x1000,
                    file_name: f.to_string(),
                    ..Image::default()
                })
                .collect(),
            ..Process::default()
        }
    }

    #[test]
    fn live_fix_frame_names_exited_processes_are_bounded() {
        let mut x = Exited::default();
        // the same program again and again under 500 reused pids: one kept per pid
        for i in 0..10_000u32 {
            let p = process(
                1000 + 4 * (i % 500),
                &[(0x1000, "a.dll"), (0x2000, "b.dll")],
            );
            x.push(p);
        }
        assert_eq!(x.len(), 500);
        assert_eq!(x.forgotten(), 0);
        // another image at one of its places: the old one names its addresses differently,
        // and is kept
        x.push(process(1000, &[(0x1000, "c.dll"), (0x2000, "b.dll")]));
        assert_eq!(x.of_pid(1000).count(), 2);
        assert_eq!(x.of_pid(1000).next().unwrap().images[0].file_name, "a.dll");
        // processes that all differ: the oldest go past the bound, and are counted
        for i in 0..10_000u32 {
            x.push(process(7, &[(0x1000, &format!("p{i}.dll"))]));
        }
        assert_eq!(x.len(), EXITED_MAX);
        assert_eq!(x.forgotten(), 10_000 + 501 - EXITED_MAX as u64);
        assert_eq!(x.iter().count(), EXITED_MAX);
        // the newest stay, in the order they ended
        let last = x.of_pid(7).next_back().unwrap();
        assert_eq!(last.images[0].file_name, "p9999.dll");
        assert!(x.of_pid(1000).next().is_none());
    }
}
