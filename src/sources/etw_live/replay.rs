//! A recorded trace played as a live session: every record of an `.etl` file rebuilt as the
//! `EVENT_RECORD` a real-time session hands over and passed, on a thread of its own, through
//! the very callback the Windows sessions register ([`super::event_record_callback`]). The
//! console's live path, the re-planning of sessions and the losses are exercised this way on
//! any OS (a live session cannot run here: Wine's OpenTrace is a stub).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::plan::SessionPlan;
use super::raw::LiveEvent;
use super::{pass_to_callback, CallbackContext, ControlStatus, SessionControl};
use crate::etw::reader::logfile::TimeBase;
use crate::sources::etl::TraceSource;

/// Plays one trace through the callback when the first plan that needs a session is applied;
/// the plans it was given are kept for inspection ([`ReplayControl::plans`]).
pub struct ReplayControl {
    path: PathBuf,
    /// Leave out the trace's EventMetadata records (a live session has none; the schemas then
    /// come from the context's schema lookup).
    without_metadata: bool,
    stop: Arc<AtomicBool>,
    /// Set by the player when it has passed every record on.
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    context: usize,
    plans: Arc<Mutex<Vec<SessionPlan>>>,
}

impl ReplayControl {
    /// A control for the trace at `path`, and the trace's clock (what the live source converts
    /// the records' timestamps with).
    pub fn open(path: &Path) -> Result<(ReplayControl, TimeBase), String> {
        let src = TraceSource::open(&path.to_string_lossy()).map_err(|e| e.to_string())?;
        let time = *src.file.time_base();
        Ok((
            ReplayControl {
                path: path.to_path_buf(),
                without_metadata: false,
                stop: Arc::new(AtomicBool::new(false)),
                done: Arc::new(AtomicBool::new(false)),
                thread: None,
                context: 0,
                plans: Arc::new(Mutex::new(Vec::new())),
            },
            time,
        ))
    }

    /// Leaves out the EventMetadata records, as a real session delivers none.
    pub fn without_metadata(mut self) -> ReplayControl {
        self.without_metadata = true;
        self
    }

    /// The plans applied so far (shared: readable after the control moved into a source).
    pub fn plans(&self) -> Arc<Mutex<Vec<SessionPlan>>> {
        self.plans.clone()
    }

    /// Whether every record has been passed on (shared, as [`ReplayControl::plans`]).
    pub fn done_flag(&self) -> Arc<AtomicBool> {
        self.done.clone()
    }

    fn context(&self) -> Option<&CallbackContext> {
        // SAFETY: the context of the source that owns this control (it outlives the control's
        // use: the source stops the control before dropping the context)
        unsafe { (self.context as *const CallbackContext).as_ref() }
    }
}

/// Passes every record of the trace at `path` through the callback with `context`, until the
/// end or `stop`.
fn play(path: &Path, context: usize, without_metadata: bool, stop: &AtomicBool) {
    let Ok(src) = TraceSource::open(&path.to_string_lossy()) else {
        return;
    };
    let metadata = crate::etw::decode::kernel::EVENT_METADATA;
    let mut events = src.file.events();
    while let Some(r) = events.next_event() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok(ev) = r else { continue };
        if without_metadata && ev.provider == metadata {
            continue;
        }
        // SAFETY: the context is the source's (see ReplayControl::context)
        unsafe {
            pass_to_callback(
                &LiveEvent::from_record(&ev),
                context as *mut std::ffi::c_void,
            )
        };
    }
}

impl SessionControl for ReplayControl {
    fn apply(
        &mut self,
        plan: &SessionPlan,
        context: *mut std::ffi::c_void,
    ) -> Result<Vec<String>, String> {
        if let Ok(mut p) = self.plans.lock() {
            p.push(plan.clone());
        }
        if self.thread.is_some() || plan.is_empty() {
            return Ok(Vec::new());
        }
        self.context = context as usize;
        if let Some(cx) = self.context() {
            cx.set_backpressure(true);
        }
        let (path, ctx, meta) = (self.path.clone(), self.context, self.without_metadata);
        let (stop, done) = (self.stop.clone(), self.done.clone());
        let t = std::thread::Builder::new()
            .name("etw replay".into())
            .spawn(move || {
                play(&path, ctx, meta, &stop);
                done.store(true, Ordering::SeqCst);
            })
            .map_err(|e| format!("cannot start the replay thread: {e}"))?;
        self.thread = Some(t);
        Ok(Vec::new())
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(cx) = self.context() {
            // a player waiting for room in the queue lets go
            cx.set_backpressure(false);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // stopped: the context is not ours to touch any more
        self.context = 0;
    }

    fn status(&mut self) -> ControlStatus {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        ControlStatus {
            sessions: if self.thread.is_some() {
                vec![format!("replay of {name}")]
            } else {
                Vec::new()
            },
            ..ControlStatus::default()
        }
    }
}

impl Drop for ReplayControl {
    fn drop(&mut self) {
        self.stop();
    }
}
