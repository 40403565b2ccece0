//! The threads and processes a trace knows from its start: for each thread and process, the
//! earliest of its Process or Thread records (Start, End, DCStart, DCEnd, Defunct). One whose
//! earliest record is not its Start existed when the trace began, so every event of it, even
//! one before any record names it, belongs to the process that record says (WPA and PerfView
//! attribute such events the same way). [`crate::sources::etl::TraceSource`] gathers them in a
//! pass before the walk and preloads the system state with them.

use crate::etw::decode::Decoder;
use crate::etw::record::EventRecord;
use crate::etw::state::{Process, Thread};
use crate::fasthash::FastMap;
use crate::providers::etw::group;

/// The kernel groups whose records [`EarliestRecords::note`] reads.
pub const GROUPS: [u8; 2] = [group::PROCESS, group::THREAD];

/// The earliest record of each process and thread seen so far: (raw timestamp, whether it was
/// the Start, what it said).
#[derive(Default)]
pub struct EarliestRecords {
    processes: FastMap<u32, (i64, bool, Process)>,
    threads: FastMap<u32, (i64, bool, Thread)>,
}

impl EarliestRecords {
    /// Notes a record (in any order): Process and Thread start/end/rundown records count, the
    /// others are left alone.
    pub fn note(&mut self, ev: &EventRecord<'_>, decoder: &Decoder) {
        let at = ev.raw_timestamp;
        let start = ev.opcode == 1;
        match (ev.kernel_group, ev.opcode) {
            // Start, End, DCStart, DCEnd, Defunct
            (Some(group::PROCESS), 1..=4 | 39) => {
                let dec = decoder.decode(ev);
                if let Some(p) = crate::etw::state::process_of(ev, &dec) {
                    if self.processes.get(&p.pid).is_none_or(|e| at < e.0) {
                        self.processes.insert(p.pid, (at, start, p));
                    }
                }
            }
            (Some(group::THREAD), 1..=4) => {
                let dec = decoder.decode(ev);
                if let Some((tid, pid, name)) = crate::etw::state::thread_of(&dec) {
                    if self.threads.get(&tid).is_none_or(|e| at < e.0) {
                        let t = Thread {
                            tid,
                            pid,
                            name,
                            ..Thread::default()
                        };
                        self.threads.insert(tid, (at, start, t));
                    }
                }
            }
            _ => {}
        }
    }

    /// The processes and threads that existed at the trace's start, as the state should know
    /// them before its first record (not yet ended).
    pub fn at_start(self) -> (Vec<Process>, Vec<Thread>) {
        fn before_start<T>((_, started, x): (i64, bool, T)) -> Option<T> {
            (!started).then_some(x)
        }
        let processes = (self.processes.into_values().filter_map(before_start))
            .map(|p| Process {
                start_ns: None,
                end_ns: None,
                exit_status: None,
                ..p
            })
            .collect();
        let threads = (self.threads.into_values().filter_map(before_start))
            .map(|t| Thread {
                start_ns: None,
                end_ns: None,
                ..t
            })
            .collect();
        (processes, threads)
    }
}
