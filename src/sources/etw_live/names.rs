//! The names of frames in a live session, kept up to date at the cost of what changed.
//!
//! A trace names its frames once, at the end, from every process it saw. A live session names
//! them while it runs (what each event prints, the console's snapshots, each `printa`), as
//! processes come and go for hours; building the names from every process seen each time
//! grew with the session and stalled the engine thread. So here:
//!
//! * the resolver is built whole once, when a program first needs names, and after that only
//!   the pids whose processes or images changed are built again
//!   ([`crate::etw::state::SystemState::take_names_dirty`],
//!   [`crate::symbols::TraceSymbols::update_pids`]);
//! * the PDB identity of a live image comes from its file's headers (no ImageID records reach
//!   a live session): the files are read by a worker thread ([`Identify`]), one per file name
//!   and link time stamp, and their answers are taken in by the next update; a frame named
//!   before its image's answer came prints as `module+offset`, and by name after;
//! * programs that print no frame and no symbol build nothing and read no file.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, Sender};

use crate::etw::state::{Lookup, PdbInfo, SystemState};

/// Reads the PDB identity of an image file by its name as the session gives it (an NT path)
/// and its link time stamp.
pub type IdentifyFn = crate::symbols::trace::ImageIdentifier;

/// A (file name in lower case, link time stamp) pair: what one answer is for.
type Key = (String, u32);

/// The worker that reads image files' headers for their PDB identities, off the engine thread.
pub struct Identify {
    /// The worker's side, taken when the first file is asked for.
    start: Option<IdentifyFn>,
    ask: Option<Sender<(String, u32)>>,
    answers: Option<Receiver<(String, u32, Option<PdbInfo>)>>,
    /// The pids with images of each file asked about and not answered yet.
    waiting: HashMap<Key, Vec<u32>>,
    /// Files asked about.
    pub asked: u64,
}

impl Identify {
    /// A worker that reads identities with `identify` (started when the first file is asked
    /// for).
    pub fn new(identify: IdentifyFn) -> Identify {
        Identify {
            start: Some(identify),
            ask: None,
            answers: None,
            waiting: HashMap::new(),
            asked: 0,
        }
    }

    /// Takes the answers that came into `state` and returns the pids whose images they name
    /// (to be identified and named again).
    pub fn take_answers(&mut self, state: &mut SystemState) -> Vec<u32> {
        let mut pids = Vec::new();
        let Some(rx) = self.answers.as_ref() else {
            return pids;
        };
        while let Ok((name, stamp, found)) = rx.try_recv() {
            state.remember_identity(&name, stamp, found);
            if let Some(p) = self.waiting.remove(&(name.to_ascii_lowercase(), stamp)) {
                pids.extend(p);
            }
        }
        pids
    }

    /// Identifies the images of `pids` with what is known, and asks the worker about the
    /// files not known yet.
    pub fn identify(&mut self, state: &mut SystemState, pids: &[u32]) {
        state.identify_images_of(pids, &mut |pid, name, stamp| {
            let key = (name.to_ascii_lowercase(), stamp);
            match self.waiting.get_mut(&key) {
                Some(w) => {
                    if !w.contains(&pid) {
                        w.push(pid);
                    }
                }
                None => {
                    if self.send(name, stamp) {
                        self.waiting.insert(key, vec![pid]);
                    } else {
                        // no worker: the file goes unidentified (remembered)
                        return Lookup::Known(None);
                    }
                }
            }
            Lookup::Pending
        });
    }

    /// Asks the worker (started now if it was not) about a file; false when there is no
    /// worker.
    fn send(&mut self, name: &str, stamp: u32) -> bool {
        if self.ask.is_none() {
            let Some(mut identify) = self.start.take() else {
                return false;
            };
            let (ask, asked) = std::sync::mpsc::channel::<(String, u32)>();
            let (answer, answers) = std::sync::mpsc::channel();
            let spawned = std::thread::Builder::new()
                .name("dtx-image-ids".into())
                .spawn(move || {
                    // ends when the source drops its sender
                    while let Ok((name, stamp)) = asked.recv() {
                        let found = identify(&name, stamp);
                        if answer.send((name, stamp, found)).is_err() {
                            break;
                        }
                    }
                });
            if spawned.is_err() {
                return false;
            }
            self.ask = Some(ask);
            self.answers = Some(answers);
        }
        self.asked += 1;
        self.ask
            .as_ref()
            .is_some_and(|a| a.send((name.to_string(), stamp)).is_ok())
    }

    /// Whether files asked about are still unanswered.
    pub fn pending(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Waits up to `limit` for the answers still due (the end of a run: END's output names
    /// frames with every identity it can have), taking them into `state`; the pids they name.
    pub fn wait_answers(
        &mut self,
        state: &mut SystemState,
        limit: std::time::Duration,
    ) -> Vec<u32> {
        let until = std::time::Instant::now() + limit;
        let mut pids = Vec::new();
        while self.pending() {
            let Some(rx) = self.answers.as_ref() else {
                break;
            };
            let left = until.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok((name, stamp, found)) => {
                    state.remember_identity(&name, stamp, found);
                    if let Some(p) = self.waiting.remove(&(name.to_ascii_lowercase(), stamp)) {
                        pids.extend(p);
                    }
                }
                Err(_) => break,
            }
        }
        pids
    }
}

/// What naming frames has cost a live source: whole builds, updates and the pids they built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NamesStats {
    /// Resolvers built from every process seen (one per source, when names are first needed).
    pub full_builds: u64,
    /// Updates of the resolver by the pids that changed.
    pub updates: u64,
    /// Pids built again by those updates, summed.
    pub pids_updated: u64,
    /// Image files asked about (their headers read by the worker).
    pub files_asked: u64,
}
