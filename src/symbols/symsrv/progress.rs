//! Progress of downloads: once downloads have gone on for more than a moment, the files and
//! bytes so far, on one line of stderr rewritten in place, only when stderr is a terminal
//! (never into a file or a pipe); in the console, its status line shows the same text (see
//! [`crate::output::stderr::status`]).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long downloads go on before their progress is shown.
const MOMENT: Duration = Duration::from_millis(700);

#[derive(Default)]
struct Prog {
    active: usize,
    done: u64,
    bytes: u64,
    started: Option<Instant>,
    drawn: Option<Instant>,
}

static PROG: Mutex<Prog> = Mutex::new(Prog {
    active: 0,
    done: 0,
    bytes: 0,
    started: None,
    drawn: None,
});

fn prog() -> std::sync::MutexGuard<'static, Prog> {
    PROG.lock().unwrap_or_else(|e| e.into_inner())
}

/// One download going on, until the guard is dropped.
pub struct Shown(());

/// A download starts.
pub fn start() -> Shown {
    let mut p = prog();
    p.active += 1;
    p.started.get_or_insert_with(Instant::now);
    Shown(())
}

impl Drop for Shown {
    fn drop(&mut self) {
        let mut p = prog();
        p.active = p.active.saturating_sub(1);
        p.done += 1;
        if p.active == 0 {
            let shown = p.drawn.is_some();
            *p = Prog::default();
            drop(p);
            if shown {
                crate::output::stderr::status(None);
            }
        }
    }
}

/// `n` more bytes arrived.
pub fn received(n: u64) {
    let mut p = prog();
    p.bytes += n;
    let now = Instant::now();
    let due = p.started.is_some_and(|s| now.duration_since(s) >= MOMENT)
        && p.drawn
            .is_none_or(|d| now.duration_since(d) >= Duration::from_millis(100));
    if !due {
        return;
    }
    p.drawn = Some(now);
    let text = format!(
        "dtx: symbols: downloading {} file{} ({} done), {:.1} MB",
        p.active,
        if p.active == 1 { "" } else { "s" },
        p.done,
        p.bytes as f64 / 1e6
    );
    drop(p);
    crate::output::stderr::status(Some(&text));
}

/// Takes the progress line off the terminal before a line is said.
pub fn clear() {
    let mut p = prog();
    if p.drawn.take().is_some() {
        drop(p);
        crate::output::stderr::status(None);
    }
}
