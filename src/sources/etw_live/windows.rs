//! The Windows half of live ETW, kept thin: [`Sessions`] turns a [`SessionPlan`] into ETW
//! sessions (StartTrace, EnableTraceEx2, ControlTrace) and reads them with
//! [`event_record_callback`] on one ProcessTrace thread per session. Decoding, the system state
//! and the stacks live in the platform-neutral source ([`EtwLiveSource`]); the names, error
//! words, buffer counts and log files the sessions use are the platform-neutral rules of
//! [`super::plan::session`].
//!
//! The kernel events come from a system logger session of dtx's own (`dtx-kernel-<pid>`,
//! EVENT_TRACE_SYSTEM_LOGGER_MODE, Windows 8 and later) rather than the one shared "NT Kernel
//! Logger", so dtx never takes over another tool's kernel session. Every session name carries
//! the owning process instance, its id and start time (`dtx-kernel-<pid>-<start>`): two dtx
//! runs never touch each other's sessions, and a session left behind by a dtx that died (killed,
//! or ended by a logoff, which no handler sees) is recognised by its gone owner, also when
//! another process, this one included, took its pid since ([`stop_stale_sessions`], at the
//! first session's start).
//!
//! The sampling interval is system-wide: the dtx runs on the machine share it through a ledger
//! ([`super::interval`]) kept in `%ProgramData%\dtx\interval\sampling-interval.txt` under the
//! named mutex `Global\dtx-sampling-interval`, both admin-only (a planted folder, junction or
//! mutex is refused, see [`with_ledger_at`]); the last holder gives it back, only when it is
//! still what dtx set.
//!
//! References followed (for facts; the code is dtx's own):
//! * Microsoft Learn: StartTrace, ControlTrace, EnableTraceEx2, EVENT_TRACE_PROPERTIES,
//!   QueryAllTraces, TraceSetInformation, TraceQueryInformation, TRACE_QUERY_INFO_CLASS,
//!   SetConsoleCtrlHandler / HandlerRoutine, AdjustTokenPrivileges, GetTokenInformation;
//! * PerfView's TraceEventSession (the sampling interval set and restored through
//!   TraceSetInformation with session handle 0, SeSystemProfilePrivilege enabled first);
//! * microsoft/krabsetw (stop by name with ControlTrace, CAPTURE_STATE after the session is
//!   opened for reading);
//! * samply's Windows backend (TokenElevation, AdjustTokenPrivileges and its
//!   ERROR_NOT_ALL_ASSIGNED check);
//! * Microsoft Learn's HandlerRoutine and SetConsoleCtrlHandler pages (handlers run last
//!   registered first on a new thread; CTRL_LOGOFF/CTRL_SHUTDOWN reach only services) and
//!   microsoft/terminal's doc/ConsoleCtrlEvent.md (a CTRL_CLOSE handler has
//!   SPI_GETHUNGAPPTIMEOUT, 5 s, before the process is ended);
//! * Process Hacker's etwmon.c (ProcessTrace's ERROR_WMI_INSTANCE_NOT_FOUND: the session was
//!   stopped from outside), QueryAllTraces for the sessions running.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use windows_sys::core::{BOOL, GUID};
use windows_sys::Win32::Foundation::{
    CloseHandle, GetLastError, ERROR_ACCESS_DENIED, ERROR_INSUFFICIENT_BUFFER, ERROR_MORE_DATA,
    ERROR_NOT_ALL_ASSIGNED, ERROR_SUCCESS, FILETIME, HANDLE, LUID, STILL_ACTIVE,
};
use windows_sys::Win32::System::Diagnostics::Etw as w;

use super::interval;
use super::plan::session::{self, LogFiles, LogKind};
use super::plan::{kernel_flag, LoggedOnly, SessionPlan};
use super::raw::RawEventRecord;
use super::{
    event_record_callback, open_source, CallbackContext, ControlStatus, EtwLiveSource, OpenControl,
    SchemaLookup, SessionControl,
};
use crate::etw::catalog::{self, ProviderCatalog, ProviderInfo};
use crate::etw::reader::logfile::{LogfileHeader, TimeBase};
use crate::etw::record::Guid;
use crate::providers::etw::EtwProbes;
use crate::sources::secure_dir;
use crate::sources::sink::Sink;

// ---------------------------------------------------------------------------------------------
// Opening a live source

/// A [`SessionControl`] factory for live runs: each call opens a fresh [`Sessions`] (logging to
/// `log_file` when given; without `process_all`, the high-frequency kernel events only go to a
/// file of their own) and gives the sessions' clock. The console opens its live sources with it.
pub fn open_control(log_file: Option<PathBuf>, process_all: bool) -> OpenControl {
    Arc::new(move || {
        let control: Box<dyn SessionControl> =
            Box::new(Sessions::new(log_file.clone(), process_all));
        Ok((control, time_base()))
    })
}

/// Starts the sessions the engine's enabled probes need and returns the source that feeds
/// their records to the engine (None when no probe needs ETW). With `log_file` (`-E new.etl`)
/// the records are also written to files (see [`LogFiles`]); without `process_all` (`-E`, not
/// `-gE`) the high-frequency kernel events are only written, to `<file>.hfreq.etl`. The notes
/// of the first plan are printed as warnings. `target` is the run's target process (`-p`,
/// `-c`): the providers enabled for stacks only are enabled for it alone.
pub fn open_for(
    sink: &dyn Sink,
    etw: &EtwProbes,
    log_file: Option<&Path>,
    process_all: bool,
    target: Option<u32>,
) -> Result<Option<EtwLiveSource>, String> {
    if SessionPlan::for_engine(sink, etw).is_empty() {
        return Ok(None);
    }
    let open = open_control(log_file.map(Path::to_path_buf), process_all);
    let (source, notes) = open_source(&open, etw.clone(), sink, target)?;
    for note in notes {
        crate::output::stderr::say("dtx", format_args!("warning: {note}"));
    }
    Ok(Some(source))
}

/// The session clock: QueryPerformanceCounter ticks (`Wnode.ClientContext` 1), with the wall
/// time now as the start.
pub fn time_base() -> TimeBase {
    let (mut qpc, mut freq) = (0i64, 0i64);
    let mut ft = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    // SAFETY: plain out-parameters
    unsafe {
        windows_sys::Win32::System::Performance::QueryPerformanceFrequency(&mut freq);
        windows_sys::Win32::System::Performance::QueryPerformanceCounter(&mut qpc);
        windows_sys::Win32::System::SystemInformation::GetSystemTimePreciseAsFileTime(&mut ft);
    }
    let filetime = ((ft.dwHighDateTime as i64) << 32) | ft.dwLowDateTime as i64;
    TimeBase::new(&LogfileHeader {
        clock_type: 1,
        perf_freq: freq,
        start_time: filetime,
        header_timestamp: qpc,
        ..LogfileHeader::default()
    })
}

// ---------------------------------------------------------------------------------------------
// The sessions of a run

/// The kernel session's kind (the middle of `dtx-<kind>-<pid>`).
const KERNEL: &str = "kernel";
/// The user session's kind.
const USER: &str = "user";
/// The kind of the file-only session of the high-frequency kernel events.
const HFREQ: &str = "hfreq";

/// The size cap of the high-frequency log file, in MB (`MaximumFileSize`: ETW stops writing
/// a sequential file at that size).
const HFREQ_FILE_MB: u32 = 4096;

/// The ETW sessions of one live run: a kernel session, a user session and (logging without
/// `-g`) a file-only session of the high-frequency kernel events, each started when a plan
/// first needs it, changed as plans change and stopped with the run (or when dropped).
pub struct Sessions {
    /// The log files, when the run logs (`-E new.etl`).
    log: Option<LogFiles>,
    process_all: bool,
    /// The callback's context (`EVENT_TRACE_LOGFILEW.Context`), as an address.
    context: usize,
    kernel: Option<KernelSession>,
    logged: Option<LoggedSession>,
    user: Option<UserSession>,
    /// The sampling interval this run asked for (100 ns units) and holds in the ledger (or
    /// was refused: another run holds another), while its plan samples.
    profile_set: Option<u32>,
    /// Provider names resolved to GUIDs so far (name-hash fallbacks included).
    resolved: HashMap<String, Guid>,
    /// (events, real-time buffers) ETW lost in the sessions already stopped.
    lost_before: (u64, u64),
}

/// The running kernel session and what it was started with.
struct KernelSession {
    session: Session,
    flags: u32,
    stack_events: Vec<(u8, u8)>,
}

/// The running file-only session of the high-frequency kernel events.
struct LoggedSession {
    session: Session,
    what: LoggedOnly,
}

/// The running user session and the providers enabled in it.
struct UserSession {
    session: Session,
    enabled: Vec<Enabled>,
}

/// A user provider as it is enabled in the user session.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Enabled {
    guid: Guid,
    name: String,
    keywords: u64,
    level: u8,
    stacks: bool,
    /// Enabled for this process only (an EVENT_FILTER_TYPE_PID filter).
    pid: Option<u32>,
}

impl Sessions {
    /// No session yet: the first [`SessionControl::apply`] starts them.
    pub fn new(log_file: Option<PathBuf>, process_all: bool) -> Sessions {
        Sessions {
            log: log_file.as_deref().map(LogFiles::new),
            process_all,
            context: 0,
            kernel: None,
            logged: None,
            user: None,
            profile_set: None,
            resolved: HashMap::new(),
            lost_before: (0, 0),
        }
    }

    /// Gives every user provider of `plan` named without a GUID its GUID: the system's
    /// registered providers (TDH), else the GUID an EventSource or TraceLogging provider of that
    /// name registers under (with a note).
    fn resolve(&mut self, plan: &mut SessionPlan, notes: &mut Vec<String>) -> Result<(), String> {
        let missing: Vec<String> = plan
            .user
            .iter()
            .filter(|u| u.guid.is_none() && !self.resolved.contains_key(&u.name))
            .map(|u| u.name.clone())
            .collect();
        if !missing.is_empty() {
            let known = registered_guids(&missing)?;
            for name in missing {
                let guid = match known.iter().find(|(n, _)| n.eq_ignore_ascii_case(&name)) {
                    Some((_, g)) => *g,
                    None => {
                        let g = crate::etw::provider_guid::event_source_guid(&name);
                        notes.push(format!(
                            "provider '{name}' is not registered; using the GUID its name \
                             hashes to (EventSource/TraceLogging): {g}"
                        ));
                        g
                    }
                };
                self.resolved.insert(name, guid);
            }
        }
        for u in plan.user.iter_mut().filter(|u| u.guid.is_none()) {
            u.guid = self.resolved.get(&u.name).copied();
        }
        Ok(())
    }

    /// The log file the next session of `kind` writes (None when the run does not log), with
    /// a note when it is not the file the run was asked for.
    fn log_file_for(&mut self, kind: LogKind, notes: &mut Vec<String>) -> Option<PathBuf> {
        let files = self.log.as_mut()?;
        let path = files.next(kind);
        if path != files.base() && kind != LogKind::HighFrequency {
            let which = if kind == LogKind::Kernel {
                "kernel"
            } else {
                "user"
            };
            notes.push(format!(
                "the {which} session's events are logged to {}",
                path.display()
            ));
        }
        Some(path)
    }

    /// Sets the sampling interval the plan asks for (remembering the system's, to restore),
    /// with SeSystemProfilePrivilege enabled first, and reads back what Windows took: the
    /// interval it samples at is said when it is not the one asked for. (Microsoft Learn:
    /// TraceSetInformation and TraceQueryInformation with TraceSampledProfileIntervalInfo and a
    /// TRACE_PROFILE_INTERVAL, a system-wide setting in 100 ns units; samply's Windows backend
    /// sets it before the session as xperf's `-SetProfInt`, PerfView's TraceEventSession sets
    /// it with session handle 0 and reads it back.)
    fn set_profile(&mut self, plan: &SessionPlan, notes: &mut Vec<String>) -> Result<(), String> {
        let Some((interval, _)) = plan.profile_interval_to_set() else {
            return Ok(());
        };
        if self.profile_set == Some(interval) {
            return Ok(());
        }
        enable_profile_privilege()?;
        if self.profile_set.is_some() {
            // another rate than this run held: give the old one up first
            release_profile_interval();
        }
        let asked = plan.profile_interval.unwrap_or(interval);
        let me = this_owner();
        let outcome = with_ledger(|l| {
            let current = query_profile_interval();
            // what to give back when the system's value cannot be read: the 1 ms default
            let before = current.or(Some(DEFAULT_PROFILE_INTERVAL));
            match l.claim(me, interval, before) {
                interval::Claim::Set(v) => {
                    let rc = set_profile_interval(v);
                    if rc != ERROR_SUCCESS {
                        l.withdraw(me, query_profile_interval().or(before));
                        return Err(rc);
                    }
                    let actual = query_profile_interval().unwrap_or(v);
                    l.took(actual);
                    *lock(&CLAIMED) = before.map(|o| (o, actual));
                    Ok((interval::Claim::Set(v), actual))
                }
                interval::Claim::Joined => Ok((
                    interval::Claim::Joined,
                    l.set.or(current).unwrap_or(interval),
                )),
                held @ interval::Claim::Held { interval: v, .. } => Ok((held, v)),
            }
        });
        match outcome {
            Err(why) => notes.push(format!(
                "dtx does not change the sampling interval: {why}; samples come at the \
                 system's interval"
            )),
            Ok(Err(rc)) => notes.push(format!(
                "the sampling interval could not be set (error {rc}); samples come at the \
                 system's interval"
            )),
            Ok(Ok((claim, actual))) => {
                self.profile_set = Some(interval);
                match interval::claim_note(claim, interval) {
                    // held by another run: that note says at which interval samples come
                    Some(note) => notes.push(note),
                    None => notes.extend(super::plan::profile_interval_note(asked, actual)),
                }
            }
        }
        Ok(())
    }

    /// Gives up this run's hold on the sampling interval: the last holder gives the system
    /// its value back (see [`super::interval`]).
    fn restore_profile(&mut self) {
        if self.profile_set.take().is_some() {
            release_profile_interval();
        }
    }

    /// Brings the kernel session to the plan: started when needed, stopped when not, and
    /// restarted (stop, start, read) when its flags or stack walks changed.
    fn apply_kernel(&mut self, plan: &SessionPlan, notes: &mut Vec<String>) -> Result<(), String> {
        let want = plan
            .needs_kernel()
            .then(|| (plan.kernel_flags, plan.stack_events.clone()));
        let have = self
            .kernel
            .as_ref()
            .map(|k| (k.flags, k.stack_events.clone()));
        if want == have {
            return Ok(());
        }
        // one kernel session per dtx (its name is this process's): the old one stops before
        // the new one starts, as two at once would deliver each kernel event twice
        if let Some(mut old) = self.kernel.take() {
            self.stopped(&mut old.session);
        }
        let Some((flags, stack_events)) = want else {
            return Ok(());
        };
        match self.start_kernel(flags, &stack_events, notes) {
            Ok(()) => Ok(()),
            Err(e) => {
                // the new one did not start: the old one runs again, as it was, so that a
                // failed re-plan leaves the run as it was (SessionControl::apply)
                let Some((old_flags, old_events)) = have else {
                    return Err(e);
                };
                let mut again = Vec::new();
                match self.start_kernel(old_flags, &old_events, &mut again) {
                    Ok(()) => Err(format!(
                        "{e}; the kernel session was started again as it was before the change"
                    )),
                    Err(e2) => Err(format!(
                        "{e}; the kernel session could not be started again as it was: {e2}"
                    )),
                }
            }
        }
    }

    /// Starts the kernel session with `flags` and the stack walks of `stack_events`.
    fn start_kernel(
        &mut self,
        flags: u32,
        stack_events: &[(u8, u8)],
        notes: &mut Vec<String>,
    ) -> Result<(), String> {
        let file = self.log_file_for(LogKind::Kernel, notes);
        let spec = Spec::kernel(flags, file.as_deref());
        let session = start_live(&spec, stack_events, self.context, notes)?;
        self.kernel = Some(KernelSession {
            session,
            flags,
            stack_events: stack_events.to_vec(),
        });
        Ok(())
    }

    /// Brings the file-only high-frequency session to `logged` (started, restarted into a new
    /// file when it changed, or stopped).
    fn apply_logged(
        &mut self,
        logged: Option<LoggedOnly>,
        notes: &mut Vec<String>,
    ) -> Result<(), String> {
        if self.logged.as_ref().map(|l| &l.what) == logged.as_ref() {
            return Ok(());
        }
        if let Some(mut old) = self.logged.take() {
            self.stopped(&mut old.session);
        }
        let Some(what) = logged else {
            return Ok(());
        };
        let Some(file) = self.log_file_for(LogKind::HighFrequency, notes) else {
            return Ok(());
        };
        let spec = Spec::file_only(what.kernel_flags, &file);
        let session = start_session(&spec)?;
        if let Some(note) = set_stack_walks(session.handle, &what.stack_events) {
            notes.push(note);
        }
        notes.push(format!(
            "high-frequency kernel events (context switches, ready threads, DPCs, interrupts, \
             system calls) are only logged, to {} (at most {HFREQ_FILE_MB} MB: ETW stops writing \
             it there), not processed live; -gE processes them live",
            file.display()
        ));
        self.logged = Some(LoggedSession { session, what });
        Ok(())
    }

    /// Brings the user session to the plan's providers: started when first needed, each
    /// provider enabled, updated (keywords, level, stacks changed) or disabled, and stopped when
    /// none is left. Providers new to the session are asked for their state (CAPTURE_STATE),
    /// but for the .NET runtime's (it would make every .NET process work) and its rundown
    /// provider (whose keywords are the rundown).
    fn apply_user(&mut self, plan: &SessionPlan, notes: &mut Vec<String>) -> Result<(), String> {
        let want: Vec<Enabled> = plan
            .user
            .iter()
            .filter_map(|u| {
                Some(Enabled {
                    guid: u.guid?,
                    name: u.name.clone(),
                    keywords: u.keywords,
                    level: u.level,
                    stacks: u.stacks,
                    pid: plan.pid_filter(u),
                })
            })
            .collect();
        // the end rundown is enabled in the user session when the run ends: a plan whose
        // only probes are `dnet::rundown:*-dcend` starts it with no provider (issue 42, 4)
        if want.is_empty() && plan.end_rundown.is_none() {
            if let Some(mut old) = self.user.take() {
                self.stopped(&mut old.session);
            }
            return Ok(());
        }
        let started_now = self.user.is_none();
        if started_now {
            let file = self.log_file_for(LogKind::User, notes);
            let spec = Spec::user(file.as_deref());
            let session = start_live(&spec, &[], self.context, notes)?;
            self.user = Some(UserSession {
                session,
                enabled: Vec::new(),
            });
        }
        let Some(user) = self.user.as_mut() else {
            return Ok(());
        };
        let mut new = Vec::new();
        for e in &want {
            let at = user.enabled.iter().position(|x| x.guid == e.guid);
            if at.is_some_and(|i| user.enabled[i] == *e) {
                continue;
            }
            if let Err(rc) = enable_provider(user.session.handle, e) {
                let action = format!(
                    "enabling ETW provider '{}' in session {}",
                    e.name, user.session.name
                );
                let words = session::error_words(&action, &user.session.name, rc, elevated(rc));
                if started_now {
                    if let Some(mut u) = self.user.take() {
                        self.stopped(&mut u.session);
                    }
                }
                return Err(words);
            }
            match at {
                Some(i) => user.enabled[i] = e.clone(),
                None => {
                    user.enabled.push(e.clone());
                    new.push(e.clone());
                }
            }
        }
        let handle = user.session.handle;
        user.enabled.retain(|old| {
            let keep = want.iter().any(|e| e.guid == old.guid);
            if !keep {
                disable_provider(handle, old.guid);
            }
            keep
        });
        for e in &new {
            use crate::providers::etw::dnet::{RUNDOWN, RUNTIME};
            if e.guid != RUNTIME && e.guid != RUNDOWN {
                capture_state(handle, e);
            }
        }
        Ok(())
    }

    /// Stops `s`, counting what ETW lost in it.
    fn stopped(&mut self, s: &mut Session) {
        if let Some((events, buffers)) = s.stop() {
            self.lost_before.0 += events;
            self.lost_before.1 += buffers;
        }
    }
}

impl SessionControl for Sessions {
    /// Resolves the provider names, merges providers named twice (by name and by GUID), then
    /// brings the profile interval, the kernel session, the high-frequency log session and the
    /// user session to the plan, in that order (the kernel session fails most often: elevation,
    /// the system logger limit).
    fn apply(
        &mut self,
        plan: &SessionPlan,
        context: *mut std::ffi::c_void,
    ) -> Result<Vec<String>, String> {
        self.context = context as usize;
        let mut notes = Vec::new();
        let mut plan = plan.clone();
        self.resolve(&mut plan, &mut notes)?;
        plan.merge_by_guid();
        let logged = match (&self.log, self.process_all) {
            (Some(_), false) => plan.split_logged_only(),
            _ => None,
        };
        let profile = plan.kernel_flags & kernel_flag::PROFILE != 0;
        if profile {
            self.set_profile(&plan, &mut notes)?;
        }
        self.apply_kernel(&plan, &mut notes)?;
        if !profile {
            self.restore_profile();
        }
        self.apply_logged(logged, &mut notes)?;
        self.apply_user(&plan, &mut notes)?;
        Ok(notes)
    }

    /// Sends STOP to every session first, then waits for their readers together (one
    /// [`DRAIN_WAIT`] at most for all, not one per session), and gives up the interval.
    fn stop(&mut self) {
        let mut sessions: Vec<Session> = [
            self.user.take().map(|u| u.session),
            self.kernel.take().map(|k| k.session),
            self.logged.take().map(|l| l.session),
        ]
        .into_iter()
        .flatten()
        .collect();
        for s in &mut sessions {
            if let Some((events, buffers)) = s.signal_stop() {
                self.lost_before.0 += events;
                self.lost_before.1 += buffers;
            }
        }
        let until = Instant::now() + DRAIN_WAIT;
        for s in &mut sessions {
            s.close_reader(until);
        }
        self.restore_profile();
    }

    /// The running sessions by name, and what ETW lost in them and in those already stopped
    /// (ControlTrace QUERY: EventsLost, RealTimeBuffersLost).
    fn status(&mut self) -> ControlStatus {
        let mut st = ControlStatus {
            events_lost: self.lost_before.0,
            buffers_lost: self.lost_before.1,
            ..ControlStatus::default()
        };
        let running = [
            self.kernel.as_ref().map(|k| &k.session),
            self.user.as_ref().map(|u| &u.session),
            self.logged.as_ref().map(|l| &l.session),
        ];
        for s in running.into_iter().flatten() {
            st.sessions.push(s.name.clone());
            if let Some((events, buffers)) = control(&s.name, w::EVENT_TRACE_CONTROL_QUERY) {
                st.events_lost += events;
                st.buffers_lost += buffers;
            }
        }
        st
    }

    fn schema_lookup(&mut self) -> Option<SchemaLookup> {
        Some(Box::new(tdh_schema))
    }

    /// Enables the .NET rundown provider again in the user session, with the end-rundown
    /// keyword and without the start rundown's (`SessionPlan::end_rundown`): the runtimes'
    /// enable callback runs the end rundown at once (eventtrace.cpp), and its DCEnd records
    /// come through this session's reader as the source waits for them.
    fn end_rundown(&mut self, provider: &super::plan::UserProvider) -> Result<bool, String> {
        let Some(guid) = provider.guid else {
            return Ok(false);
        };
        // the plan starts the user session whenever it has an end rundown (`apply_user`):
        // none here is said, not taken for "no end rundown"
        let Some(user) = self.user.as_mut() else {
            return Err(format!(
                "no user session is running to enable '{}' in",
                provider.name
            ));
        };
        let e = Enabled {
            guid,
            name: provider.name.clone(),
            keywords: provider.keywords,
            level: provider.level,
            stacks: false,
            pid: None,
        };
        if let Err(rc) = enable_provider(user.session.handle, &e) {
            let action = format!(
                "enabling ETW provider '{}' in session {}",
                e.name, user.session.name
            );
            return Err(session::error_words(
                &action,
                &user.session.name,
                rc,
                elevated(rc),
            ));
        }
        match user.enabled.iter().position(|x| x.guid == guid) {
            Some(i) => user.enabled[i] = e,
            None => user.enabled.push(e),
        }
        Ok(true)
    }
}

impl Drop for Sessions {
    fn drop(&mut self) {
        SessionControl::stop(self);
    }
}

// ---------------------------------------------------------------------------------------------
// One session

/// A session this process started: its name, its control handle (StartTrace's), and its
/// reader when it is read live.
struct Session {
    name: String,
    handle: w::CONTROLTRACE_HANDLE,
    reader: Option<Reader>,
    stopped: bool,
}

impl Session {
    /// Stops the session (idempotent): its reader is told first, so that the end of
    /// ProcessTrace is not taken for a session someone else stopped; when this returns, no
    /// record of it reaches the callback. The final (events, real-time buffers) lost.
    fn stop(&mut self) -> Option<(u64, u64)> {
        let lost = self.signal_stop();
        self.close_reader(Instant::now() + DRAIN_WAIT);
        lost
    }

    /// The first half of [`Session::stop`]: the reader is told, the session stopped
    /// (ControlTrace STOP) and forgotten by the console handler; the final (events, buffers)
    /// lost. Its reader may still pass on what the stop flushed.
    fn signal_stop(&mut self) -> Option<(u64, u64)> {
        if self.stopped {
            return None;
        }
        self.stopped = true;
        if let Some(r) = &self.reader {
            r.stopping.store(true, Ordering::SeqCst);
        }
        let lost = control(&self.name, w::EVENT_TRACE_CONTROL_STOP);
        unregister(&self.name);
        lost
    }

    /// The second half: the reader's last records until `until`, then it is closed.
    fn close_reader(&mut self, until: Instant) {
        if let Some(r) = self.reader.take() {
            r.close(until);
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How a session is started.
struct Spec<'a> {
    kind: &'static str,
    /// Kernel enable flags (a system logger), or 0 for a user session.
    kernel_flags: u32,
    log_file: Option<&'a Path>,
    real_time: bool,
    /// `MaximumFileSize` (MB) of the log file; 0 for none.
    max_file_mb: u32,
}

impl<'a> Spec<'a> {
    /// The kernel session: a system logger read live, logging to `log_file` too when given.
    fn kernel(flags: u32, log_file: Option<&'a Path>) -> Spec<'a> {
        Spec {
            kind: KERNEL,
            kernel_flags: flags,
            log_file,
            real_time: true,
            max_file_mb: 0,
        }
    }

    /// The user session: read live, logging to `log_file` too when given.
    fn user(log_file: Option<&'a Path>) -> Spec<'a> {
        Spec {
            kind: USER,
            kernel_flags: 0,
            log_file,
            real_time: true,
            max_file_mb: 0,
        }
    }

    /// A system logger that only writes `file` (capped at [`HFREQ_FILE_MB`]).
    fn file_only(flags: u32, file: &'a Path) -> Spec<'a> {
        Spec {
            kind: HFREQ,
            kernel_flags: flags,
            log_file: Some(file),
            real_time: false,
            max_file_mb: HFREQ_FILE_MB,
        }
    }
}

/// This process's name for a session of `kind`.
fn session_name(kind: &str) -> String {
    session::name(kind, this_owner())
}

/// This process instance: its id and start time.
pub fn this_owner() -> session::Owner {
    static ME: OnceLock<session::Owner> = OnceLock::new();
    *ME.get_or_init(|| {
        use windows_sys::Win32::System::Threading::GetCurrentProcess;
        session::Owner {
            pid: std::process::id(),
            // SAFETY: the pseudo handle of this process
            started: process_start(unsafe { GetCurrentProcess() }),
        }
    })
}

/// A process's creation time (FILETIME, 100 ns units), from GetProcessTimes.
fn process_start(h: HANDLE) -> Option<u64> {
    use windows_sys::Win32::System::Threading::GetProcessTimes;
    let zero = || FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero(), zero(), zero(), zero());
    // SAFETY: a process handle with query access and four FILETIME out-parameters
    let ok = unsafe { GetProcessTimes(h, &mut created, &mut exited, &mut kernel, &mut user) };
    let t = ((created.dwHighDateTime as u64) << 32) | created.dwLowDateTime as u64;
    (ok != 0 && t != 0).then_some(t)
}

/// Starts a session as `spec` says (stale dtx sessions are stopped once before the first).
/// The session is registered for the console handler.
fn start_session(spec: &Spec) -> Result<Session, String> {
    static STALE: Once = Once::new();
    STALE.call_once(|| {
        stop_stale_sessions();
    });
    let name = if spec.kind == CLR || spec.kind == CLR_RUNDOWN {
        // a dtx runs one of these per traced process, and may run two at once: each has a
        // name of its own (issue 42, 14)
        static SERIAL: AtomicU32 = AtomicU32::new(0);
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        session::numbered_name(spec.kind, serial, this_owner())
    } else {
        session_name(spec.kind)
    };
    if lock(&STARTED).contains(&name) {
        return Err(format!(
            "ETW session {name} already runs for another live source of this dtx"
        ));
    }
    let file = spec.log_file.map(log_file_units).transpose()?;
    let mut p = Properties::with_room(name.len(), file.as_deref());
    let props = p.props_mut();
    props.BufferSize = 256; // KB
    (props.MinimumBuffers, props.MaximumBuffers) = session::buffer_counts(processor_count());
    if spec.real_time {
        props.LogFileMode |= w::EVENT_TRACE_REAL_TIME_MODE;
        // flushed every second: live output stays live (a file-only session writes full
        // buffers only)
        props.FlushTimer = super::order::FLUSH_TIMER_S;
    }
    if file.is_some() {
        props.LogFileMode |= w::EVENT_TRACE_FILE_MODE_SEQUENTIAL;
        props.MaximumFileSize = spec.max_file_mb;
    }
    if spec.kernel_flags != 0 {
        props.LogFileMode |= w::EVENT_TRACE_SYSTEM_LOGGER_MODE;
        props.EnableFlags = spec.kernel_flags;
        // a system logger session is identified by a GUID of its own
        props.Wnode.Guid = win_guid(session_guid(&name));
    }
    let wide_name = wide(&name);
    let mut handle = w::CONTROLTRACE_HANDLE { Value: 0 };
    // SAFETY: a valid handle out-pointer, a NUL-terminated name and a properties buffer sized
    // for that name and the log file (Properties::with_room)
    let rc = unsafe { w::StartTraceW(&mut handle, wide_name.as_ptr(), p.as_mut_ptr()) };
    if rc != ERROR_SUCCESS {
        let action = format!("starting ETW session {name}");
        return Err(session::error_words(&action, &name, rc, elevated(rc)));
    }
    register(&name);
    Ok(Session {
        name,
        handle,
        reader: None,
        stopped: false,
    })
}

/// Starts a session, asks for the stack walks of `stack_events` (kernel sessions) and opens it
/// for reading through the callback with `context`; the session is stopped again when it cannot
/// be read.
fn start_live(
    spec: &Spec,
    stack_events: &[(u8, u8)],
    context: usize,
    notes: &mut Vec<String>,
) -> Result<Session, String> {
    let mut session = start_session(spec)?;
    if let Some(note) = set_stack_walks(session.handle, stack_events) {
        notes.push(note);
    }
    match Reader::open(&session.name, context) {
        Ok(reader) => session.reader = Some(reader),
        Err(e) => {
            session.stop();
            return Err(e);
        }
    }
    Ok(session)
}

/// Asks the kernel session `h` for stack walks of these (group, event type) records
/// (TraceSetInformation TraceStackTracingInfo: an array of at most 256 CLASSIC_EVENT_IDs, each
/// the event class GUID and type; a later call replaces the list); a note when it refused.
/// Samples are the PerfInfo class's type 46 (SampledProfile), what xperf's `-stackwalk
/// Profile` and samply's Windows backend ask for. Each walk comes as a StackWalk record (class
/// def2fe46-7bd6-4b80-bd94-f57fe20d0ce3, type 32) naming its event by timestamp and thread
/// (Microsoft Learn: TraceSetInformation, CLASSIC_EVENT_ID, StackWalk, StackWalk_Event).
fn set_stack_walks(h: w::CONTROLTRACE_HANDLE, events: &[(u8, u8)]) -> Option<String> {
    if events.is_empty() {
        return None;
    }
    let ids: Vec<w::CLASSIC_EVENT_ID> = events
        .iter()
        .take(256)
        .map(|(group, ty)| w::CLASSIC_EVENT_ID {
            EventGuid: win_guid(crate::etw::reader::headers::kernel_group_guid(*group)),
            Type: *ty,
            Reserved: [0; 7],
        })
        .collect();
    // SAFETY: ids is a valid array of CLASSIC_EVENT_ID of the length given
    let rc = unsafe {
        w::TraceSetInformation(
            h,
            w::TraceStackTracingInfo,
            ids.as_ptr().cast(),
            std::mem::size_of_val(ids.as_slice()) as u32,
        )
    };
    (rc != ERROR_SUCCESS).then(|| format!("kernel stack walking not enabled (error {rc})"))
}

/// ControlTrace on a session by name (STOP or QUERY): on success, the session's
/// (EventsLost, RealTimeBuffersLost).
fn control(name: &str, code: w::EVENT_TRACE_CONTROL) -> Option<(u64, u64)> {
    let mut p = Properties::for_control();
    let n = wide(name);
    // SAFETY: a properties buffer with room for the names ControlTrace writes back, and a
    // NUL-terminated name
    let rc = unsafe {
        w::ControlTraceW(
            w::CONTROLTRACE_HANDLE { Value: 0 },
            n.as_ptr(),
            p.as_mut_ptr(),
            code,
        )
    };
    let props = p.props_mut();
    (rc == ERROR_SUCCESS).then_some((props.EventsLost as u64, props.RealTimeBuffersLost as u64))
}

/// A fixed GUID per session name (system loggers need one of their own).
fn session_guid(name: &str) -> Guid {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    Guid {
        data1: 0x6474_7800,
        data2: (h >> 48) as u16,
        data3: ((h >> 32) as u16 & 0x0fff) | 0x4000,
        data4: (h as u32 as u64 | 0x8000_0000_0000_0000).to_be_bytes(),
    }
}

/// The processors a session's buffers are sized for: every processor group's.
fn processor_count() -> u32 {
    use windows_sys::Win32::System::Threading::{GetActiveProcessorCount, ALL_PROCESSOR_GROUPS};
    // SAFETY: no pointers; 0 on failure
    match unsafe { GetActiveProcessorCount(ALL_PROCESSOR_GROUPS) } {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        n => n,
    }
}

// ---------------------------------------------------------------------------------------------
// Reading a session

/// `INVALID_PROCESSTRACE_HANDLE` (64-bit).
const INVALID_TRACE: u64 = u64::MAX;
/// How long a stopped session's reader may take to pass on what the stop flushed before its
/// trace handle is closed.
const DRAIN_WAIT: Duration = Duration::from_secs(2);

/// A session opened for real-time reading, and the thread ProcessTrace delivers it on.
struct Reader {
    trace: u64,
    /// Set before dtx stops the session: an end of ProcessTrace dtx caused does not end the run.
    stopping: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Reader {
    /// Opens the session `name` for real-time reading through [`event_record_callback`] with
    /// `context`, and starts ProcessTrace on a thread of its own. When ProcessTrace returns and
    /// dtx did not stop the session (another program did, or it failed), the run ends with
    /// ProcessTrace's code ([`CallbackContext::end`]).
    fn open(name: &str, context: usize) -> Result<Reader, String> {
        Reader::open_with(name, context, callback, end_run)
    }

    /// [`Reader::open`] with another callback, and `end(context, code)` called when
    /// ProcessTrace returns and dtx did not stop the session.
    fn open_with(
        name: &str,
        context: usize,
        cb: unsafe extern "system" fn(*mut w::EVENT_RECORD),
        end: fn(usize, u32),
    ) -> Result<Reader, String> {
        let mut n = wide(name);
        // SAFETY: all-zero is a valid EVENT_TRACE_LOGFILEW
        let mut lf: w::EVENT_TRACE_LOGFILEW = unsafe { std::mem::zeroed() };
        lf.LoggerName = n.as_mut_ptr();
        lf.Anonymous1.ProcessTraceMode = w::PROCESS_TRACE_MODE_REAL_TIME
            | w::PROCESS_TRACE_MODE_EVENT_RECORD
            | w::PROCESS_TRACE_MODE_RAW_TIMESTAMP;
        lf.Anonymous2.EventRecordCallback = Some(cb);
        lf.Context = context as *mut std::ffi::c_void;
        // SAFETY: lf is filled as OpenTraceW requires; n outlives the call
        let h = unsafe { w::OpenTraceW(&mut lf) };
        if h.Value == INVALID_TRACE {
            // SAFETY: no arguments
            let rc = unsafe { GetLastError() };
            let action = format!("opening ETW session {name} for reading");
            return Err(session::error_words(&action, name, rc, elevated(rc)));
        }
        let trace = h.Value;
        let stopping = Arc::new(AtomicBool::new(false));
        let stop_seen = stopping.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("etw {name}"))
            .spawn(move || {
                let h = w::PROCESSTRACE_HANDLE { Value: trace };
                // SAFETY: a handle from OpenTraceW; the callback's context outlives this
                // thread (the source stops its control, which joins it, before dropping it)
                let rc = unsafe { w::ProcessTrace(&h, 1, std::ptr::null(), std::ptr::null()) };
                if !stop_seen.load(Ordering::SeqCst) {
                    end(context, rc);
                }
            });
        match spawned {
            Ok(thread) => Ok(Reader {
                trace,
                stopping,
                thread: Some(thread),
            }),
            Err(e) => {
                // SAFETY: the handle OpenTraceW gave, closed once
                unsafe { w::CloseTrace(w::PROCESSTRACE_HANDLE { Value: trace }) };
                Err(format!(
                    "cannot start the reader thread of ETW session {name}: {e}"
                ))
            }
        }
    }

    /// After the session was stopped: lets ProcessTrace pass on what the stop flushed (until
    /// `until`), closes the trace handle (which ends ProcessTrace) and joins the thread.
    fn close(mut self, until: Instant) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        while !thread.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        // SAFETY: the handle OpenTraceW gave, closed once (ERROR_CTX_CLOSE_PENDING while
        // ProcessTrace still runs: it returns after the current buffer)
        unsafe { w::CloseTrace(w::PROCESSTRACE_HANDLE { Value: self.trace }) };
        let _ = thread.join();
    }
}

/// The end of a live run's session that dtx did not stop: the run ends with ProcessTrace's code.
fn end_run(context: usize, rc: u32) {
    // SAFETY: the context of the reader's session (see Reader::open_with's thread)
    if let Some(cx) = unsafe { (context as *const CallbackContext).as_ref() } {
        cx.end(rc);
    }
}

/// The EventRecordCallback of every session: the records go to the platform-neutral callback.
unsafe extern "system" fn callback(rec: *mut w::EVENT_RECORD) {
    // the layouts are the same (checked by raw::tests::layouts_match_windows)
    event_record_callback(rec.cast::<RawEventRecord>());
}

// ---------------------------------------------------------------------------------------------
// Providers

/// Enables (or, when already enabled, updates: keywords, level, stack property) a provider in
/// the user session (EnableTraceEx2 ENABLE_PROVIDER); the error code when it fails.
fn enable_provider(h: w::CONTROLTRACE_HANDLE, e: &Enabled) -> Result<(), u32> {
    let g = win_guid(e.guid);
    let mut params = w::ENABLE_TRACE_PARAMETERS {
        Version: w::ENABLE_TRACE_PARAMETERS_VERSION_2,
        ..Default::default()
    };
    if e.stacks {
        params.EnableProperty |= w::EVENT_ENABLE_PROPERTY_STACK_TRACE;
    }
    // the target only (Microsoft Learn: EVENT_FILTER_DESCRIPTOR, EVENT_FILTER_TYPE_PID)
    let pids = [e.pid.unwrap_or(0)];
    let mut filter = w::EVENT_FILTER_DESCRIPTOR {
        Ptr: pids.as_ptr() as u64,
        Size: std::mem::size_of_val(&pids) as u32,
        Type: w::EVENT_FILTER_TYPE_PID,
    };
    if e.pid.is_some() {
        params.EnableFilterDesc = &mut filter;
        params.FilterDescCount = 1;
    }
    // SAFETY: a started session's handle, a valid GUID and parameters (a filter descriptor
    // pointing at `pids`, both alive for the call)
    let rc = unsafe {
        w::EnableTraceEx2(
            h,
            &g,
            w::EVENT_CONTROL_CODE_ENABLE_PROVIDER,
            e.level,
            e.keywords,
            0,
            0,
            &params,
        )
    };
    if rc == ERROR_SUCCESS {
        Ok(())
    } else {
        Err(rc)
    }
}

/// Disables a provider in the user session (errors ignored: the provider is not wanted).
fn disable_provider(h: w::CONTROLTRACE_HANDLE, guid: Guid) {
    let g = win_guid(guid);
    // SAFETY: a started session's handle and a valid GUID; no parameters
    unsafe {
        w::EnableTraceEx2(
            h,
            &g,
            w::EVENT_CONTROL_CODE_DISABLE_PROVIDER,
            0,
            0,
            0,
            0,
            std::ptr::null(),
        )
    };
}

/// Asks a provider to log what already exists (EnableTraceEx2 CAPTURE_STATE, after the
/// provider was enabled and the session opened for reading, as krabsetw orders it); providers
/// that do not support it ignore it.
fn capture_state(h: w::CONTROLTRACE_HANDLE, e: &Enabled) {
    let g = win_guid(e.guid);
    // SAFETY: a started session's handle and a valid GUID; no parameters
    unsafe {
        w::EnableTraceEx2(
            h,
            &g,
            w::EVENT_CONTROL_CODE_CAPTURE_STATE,
            e.level,
            e.keywords,
            0,
            0,
            std::ptr::null(),
        )
    };
}

// ---------------------------------------------------------------------------------------------
// The CLR's method events of one traced process

/// The kind of a CLR method session (`dtx-clr<n>-<pid>-<start>`, numbered: one per target).
const CLR: &str = "clr";

/// A real-time session of the CLR's method and module events of one process, for the `pid`
/// provider's managed probes (see [`super::clr`]): the runtime provider with its Loader, Jit,
/// NGen and CompilationDiagnostic keywords (MethodLoadVerbose, ModuleLoad, R2RGetEntryPoint)
/// and the rundown provider with its start-rundown keywords (MethodDCStartVerbose and
/// ModuleDCStart of the code there now), both at the verbose level and only in the target
/// (an EVENT_FILTER_TYPE_PID filter in ENABLE_TRACE_PARAMETERS, Windows 8.1 and later: Microsoft
/// Learn's ENABLE_TRACE_PARAMETERS and EVENT_FILTER_DESCRIPTOR). Records go to
/// [`super::clr::clr_record_callback`] with the [`super::clr::ClrContext`] given, which must
/// outlive the session (dropping or stopping it joins its reader). Stopped when dropped, and by
/// the console handler when the console goes away.
pub struct ClrMethodSession {
    session: Session,
    pid: u32,
}

impl ClrMethodSession {
    /// Starts the session for process `pid` and enables both providers in it.
    pub fn start(pid: u32, context: &super::clr::ClrContext) -> Result<ClrMethodSession, String> {
        ClrMethodSession::start_as(CLR, pid, context)
    }

    /// [`ClrMethodSession::start`] under the session kind `kind`.
    fn start_as(
        kind: &'static str,
        pid: u32,
        context: &super::clr::ClrContext,
    ) -> Result<ClrMethodSession, String> {
        use crate::providers::etw::dnet;
        let spec = Spec {
            kind,
            kernel_flags: 0,
            log_file: None,
            real_time: true,
            max_file_mb: 0,
        };
        let mut session = start_session(&spec)?;
        let context = context as *const super::clr::ClrContext as usize;
        match Reader::open_with(&session.name, context, clr_callback, |_, _| {}) {
            Ok(reader) => session.reader = Some(reader),
            Err(e) => {
                session.stop();
                return Err(e);
            }
        }
        for (guid, name, keywords) in [
            (
                dnet::RUNTIME,
                "Microsoft-Windows-DotNETRuntime",
                dnet::RUNTIME_METHOD_KEYWORDS,
            ),
            (
                dnet::RUNDOWN,
                "Microsoft-Windows-DotNETRuntimeRundown",
                dnet::RUNDOWN_START_KEYWORDS,
            ),
        ] {
            if let Err(rc) = enable_for_pid(session.handle, guid, keywords, pid) {
                let action = format!("enabling ETW provider '{name}' in session {}", session.name);
                let words = session::error_words(&action, &session.name, rc, elevated(rc));
                session.stop();
                return Err(words);
            }
        }
        Ok(ClrMethodSession { session, pid })
    }

    /// Stops the session (idempotent); when it returns, the callback has its last record.
    /// What ETW lost in it is said (issue 42, 10): the methods those events named are missing.
    pub fn stop(&mut self) {
        let lost = self.session.stop().unwrap_or((0, 0));
        if let Some(words) = super::clr::clr_loss_words("method events", self.pid, lost) {
            crate::output::stderr::say("dtx", format_args!("warning: {words}"));
        }
    }
}

/// The kind of the session of a synchronous CLR rundown (`dtx-clrrundown<n>-<pid>-<start>`,
/// numbered).
const CLR_RUNDOWN: &str = "clrrundown";

/// The methods with code in .NET process `pid` now: a session of its own enables the rundown
/// provider (Microsoft-Windows-DotNETRuntimeRundown) for that pid only with the Loader, Jit,
/// NGen and StartRundown keywords, on which the runtime's enable callback lists every method
/// with code (MethodDCStartVerbose: JIT-compiled and ready-to-run alike) and module
/// (ModuleDCStart), then writes DCStartComplete (Microsoft Learn's "CLR ETW Keywords and
/// Levels" and "Rundown events"; dotnet/runtime's eventtrace.cpp, `EtwCallbackCommon` and
/// `ETW::EnumerationLog::StartRundown`; PerfView TraceEvent's rundown handling waits for the
/// same event). dtx waits for that event at most [`super::clr::RUNDOWN_WAIT`], then stops the
/// session on every path (the event, an error, the time out, its reader ended by someone
/// else); a console handler of its own stops it on Ctrl-C, Ctrl-Break or a closed console
/// while this runs ([`RundownRunning`]). The process must not be held by a debugger: the
/// rundown runs on its threads.
pub fn clr_rundown(pid: u32) -> Result<Vec<crate::symbols::managed::ManagedMethod>, String> {
    use super::clr::ClrContext;
    use crate::providers::etw::dnet;
    let _interruptible = RundownRunning::enter();
    // the context outlives the session: `session` is stopped (its reader joined) before the
    // context goes, explicitly below and by its drop, which comes first (declared after)
    let context = Box::new(ClrContext::new(pid, time_base()));
    let spec = Spec {
        kind: CLR_RUNDOWN,
        kernel_flags: 0,
        log_file: None,
        real_time: true,
        max_file_mb: 0,
    };
    let mut session = start_session(&spec)?;
    let cx = &*context as *const ClrContext as usize;
    match Reader::open_with(&session.name, cx, clr_callback, |_, _| {}) {
        Ok(reader) => session.reader = Some(reader),
        Err(e) => {
            session.stop();
            return Err(e);
        }
    }
    if let Err(rc) = enable_for_pid(
        session.handle,
        dnet::RUNDOWN,
        dnet::RUNDOWN_START_KEYWORDS,
        pid,
    ) {
        let action = format!(
            "enabling ETW provider 'Microsoft-Windows-DotNETRuntimeRundown' in session {}",
            session.name
        );
        let words = session::error_words(&action, &session.name, rc, elevated(rc));
        session.stop();
        return Err(words);
    }
    let waited = wait_in(&session, &context);
    // what ETW lost in the session is said, as dtrace says its drops (issue 42, 10)
    let lost = session.stop().unwrap_or((0, 0));
    if let Some(loss) = super::clr::rundown_outcome(pid, waited, lost)? {
        crate::output::stderr::say("dtx", format_args!("warning: {loss}"));
    }
    Ok(context.take_ready(true))
}

/// Waits for the end of the rundown the session's start asked `context`'s process for, at most
/// [`super::clr::RUNDOWN_WAIT`]; its reader ends early only when someone else (a console
/// handler) stopped the session.
fn wait_in(
    session: &Session,
    context: &super::clr::ClrContext,
) -> Result<(), super::clr::RundownUnfinished> {
    let reader_gone = || {
        session
            .reader
            .as_ref()
            .and_then(|r| r.thread.as_ref())
            .is_none_or(|t| t.is_finished())
    };
    super::clr::wait_for_rundown(
        context,
        0,
        super::clr::RUNDOWN_WAIT,
        Duration::from_millis(20),
        &reader_gone,
    )
}

/// The methods with code in .NET process `pid` now, as [`clr_rundown`] lists them, from a
/// [`ClrMethodSession`] that is kept running after the rundown: the session a `-p` target's
/// debugger loop follows the runtime's compilations with (issue 42, finding 9). Started before
/// the grab, its start rundown is the only one: a method session started after the grab would
/// run a second rundown on the held process, every event of it a stop at the EtwEventWrite
/// breakpoints; and it follows the runtime from before the rundown, so a method compiled
/// between the rundown and the grab is in it too. While the rundown runs the session is of the
/// rundown's kind, so that the rundown's console handler treats it as one. `Err` when the
/// session cannot start; else the rundown's outcome (its methods, or why they cannot be
/// listed), the session and the context its reader fills (which must outlive it).
#[allow(clippy::type_complexity)]
pub fn clr_rundown_kept(
    pid: u32,
) -> Result<
    (
        Result<Vec<crate::symbols::managed::ManagedMethod>, String>,
        ClrMethodSession,
        Box<super::clr::ClrContext>,
    ),
    String,
> {
    let _interruptible = RundownRunning::enter();
    let context = Box::new(super::clr::ClrContext::new(pid, time_base()));
    let session = ClrMethodSession::start_as(CLR_RUNDOWN, pid, &context)?;
    let waited = wait_in(&session.session, &context);
    // the session runs on: what ETW lost in it so far (its stop says the rest)
    let lost = control(&session.session.name, w::EVENT_TRACE_CONTROL_QUERY).unwrap_or((0, 0));
    let methods = match super::clr::rundown_outcome(pid, waited, lost) {
        Ok(loss) => {
            if let Some(loss) = loss {
                crate::output::stderr::say("dtx", format_args!("warning: {loss}"));
            }
            Ok(context.take_ready(true))
        }
        Err(e) => Err(e),
    };
    Ok((methods, session, context))
}

/// Synchronous rundowns running now (see [`RundownRunning`]).
static RUNDOWNS_RUNNING: Mutex<usize> = Mutex::new(0);

/// One synchronous rundown running, for the life of the value: a console handler of its own
/// is registered meanwhile (the last registered runs first: HandlerRoutine) that stops this
/// process's sessions on Ctrl-C, Ctrl-Break and a closed console before the next handler
/// (in the end the default one, ExitProcess) ends dtx. A rundown runs while the programs are
/// compiled, before the run has its own handlers; it is removed after, so that the run's
/// handlers keep their order (`install_console_handler` after ctrlc's).
struct RundownRunning;

impl RundownRunning {
    fn enter() -> RundownRunning {
        use windows_sys::Win32::System::Console::SetConsoleCtrlHandler;
        let mut n = lock(&RUNDOWNS_RUNNING);
        if *n == 0 {
            // SAFETY: a handler that stays valid for the life of the process
            unsafe { SetConsoleCtrlHandler(Some(rundown_console_handler), 1) };
        }
        *n += 1;
        RundownRunning
    }
}

impl Drop for RundownRunning {
    fn drop(&mut self) {
        use windows_sys::Win32::System::Console::SetConsoleCtrlHandler;
        let mut n = lock(&RUNDOWNS_RUNNING);
        *n = n.saturating_sub(1);
        if *n == 0 {
            // SAFETY: removes the handler `enter` added
            unsafe { SetConsoleCtrlHandler(Some(rundown_console_handler), 0) };
        }
    }
}

/// The HandlerRoutine while a synchronous rundown runs: the sessions
/// [`session::stopped_on_console_event`] names are sent STOP (nothing waited for) and
/// forgotten: the rundowns' only, on a Ctrl-C or Ctrl-Break the run's own handler takes
/// (the run ends in order, and stops its sessions itself); every session when dtx is about
/// to end. The rundown's wait ends as its reader does. FALSE lets the next handler run.
unsafe extern "system" fn rundown_console_handler(ctrl: u32) -> BOOL {
    use windows_sys::Win32::System::Console::{CTRL_BREAK_EVENT, CTRL_C_EVENT};
    let _ = std::panic::catch_unwind(|| {
        let interrupt = matches!(ctrl, CTRL_C_EVENT | CTRL_BREAK_EVENT);
        let run_takes_interrupt =
            RUN_TAKES_INTERRUPT.load(Ordering::SeqCst) && !STOP_ON_INTERRUPT.load(Ordering::SeqCst);
        let mut started = lock(&STARTED);
        let names: Vec<String> = session::stopped_on_console_event(
            &started,
            interrupt,
            run_takes_interrupt,
            CLR_RUNDOWN,
        )
        .into_iter()
        .cloned()
        .collect();
        started.retain(|n| !names.contains(n));
        drop(started);
        for name in &names {
            control(name, w::EVENT_TRACE_CONTROL_STOP);
        }
    });
    0
}

/// The EventRecordCallback of a CLR method session.
unsafe extern "system" fn clr_callback(rec: *mut w::EVENT_RECORD) {
    // SAFETY: the layouts are the same (raw::tests::layouts_match_windows) and the context is
    // the session's ClrContext (ClrMethodSession::start)
    unsafe { super::clr::clr_record_callback(rec.cast::<RawEventRecord>()) };
}

/// Enables a provider at the verbose level with `keywords` in session `h`, for process `pid`
/// only (EnableTraceEx2 ENABLE_PROVIDER with one EVENT_FILTER_TYPE_PID filter descriptor).
fn enable_for_pid(
    h: w::CONTROLTRACE_HANDLE,
    guid: Guid,
    keywords: u64,
    pid: u32,
) -> Result<(), u32> {
    let g = win_guid(guid);
    let pids = [pid];
    let mut filter = w::EVENT_FILTER_DESCRIPTOR {
        Ptr: pids.as_ptr() as u64,
        Size: std::mem::size_of_val(&pids) as u32,
        Type: w::EVENT_FILTER_TYPE_PID,
    };
    let params = w::ENABLE_TRACE_PARAMETERS {
        Version: w::ENABLE_TRACE_PARAMETERS_VERSION_2,
        EnableFilterDesc: &mut filter,
        FilterDescCount: 1,
        ..Default::default()
    };
    // SAFETY: a started session's handle, a valid GUID, and parameters whose filter descriptor
    // points at `pids`, alive for the call
    let rc = unsafe {
        w::EnableTraceEx2(
            h,
            &g,
            w::EVENT_CONTROL_CODE_ENABLE_PROVIDER,
            5, // TRACE_LEVEL_VERBOSE: the *Verbose events carry the names
            keywords,
            0,
            0,
            &params,
        )
    };
    if rc == ERROR_SUCCESS {
        Ok(())
    } else {
        Err(rc)
    }
}

// ---------------------------------------------------------------------------------------------
// The process-global registry and the console handler

/// The sessions this process started and has not stopped (what the console handler stops when
/// the console goes away).
static STARTED: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// Whether Ctrl-C and Ctrl-Break end dtx here too (the console: no other handler takes them).
static STOP_ON_INTERRUPT: AtomicBool = AtomicBool::new(false);
/// Whether the run's own Ctrl-C handler is installed ([`install_console_handler`]): an
/// interrupt then ends the run in order rather than the process.
static RUN_TAKES_INTERRUPT: AtomicBool = AtomicBool::new(false);
/// (the system's interval before, the interval it took) when this run set the interval: what
/// the release falls back on when the ledger lost this run's hold.
static CLAIMED: Mutex<Option<(u32, u32)>> = Mutex::new(None);

/// A lock that a panic elsewhere does not poison for good.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Notes a session this process started.
fn register(name: &str) {
    lock(&STARTED).push(name.to_string());
}

/// Forgets a session this process stopped.
fn unregister(name: &str) {
    lock(&STARTED).retain(|n| n != name);
}

/// Installs (once) a console control handler that, when the console window is closed (its
/// close button, End task), stops every session this process started and gives up its hold on
/// the sampling interval before Windows ends the process. Ctrl-C and Ctrl-Break are left to
/// the next handler (the run's own, which ends it in order), unless
/// [`install_console_handler_for_console`] asked otherwise.
///
/// Call it after `ctrlc::set_handler`: handlers run last-registered first (HandlerRoutine),
/// and ctrlc's handler returns TRUE for every signal, which ends the process without calling
/// the others.
///
/// Logoff and shutdown never reach it: Windows ends interactive processes without a signal
/// (CTRL_LOGOFF_EVENT and CTRL_SHUTDOWN_EVENT reach only services), so the sessions such an
/// end leaves are stopped by the next dtx's first start ([`stop_stale_sessions`]).
pub fn install_console_handler() {
    // the run's Ctrl-C handler is installed before this one (see above): an interrupt
    // during a rundown from now on is the run's to end in order
    RUN_TAKES_INTERRUPT.store(true, Ordering::SeqCst);
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        use windows_sys::Win32::System::Console::SetConsoleCtrlHandler;
        // SAFETY: a handler that stays valid for the life of the process
        unsafe { SetConsoleCtrlHandler(Some(console_handler), 1) };
    });
}

/// The console's (TUI) handler: as [`install_console_handler`], and Ctrl-C or Ctrl-Break
/// (which the console's raw keyboard mode only leaves to GenerateConsoleCtrlEvent and the
/// Break key) stop the sessions before the default handler ends dtx. Call it before the
/// console starts; the console has no other handler.
pub fn install_console_handler_for_console() {
    STOP_ON_INTERRUPT.store(true, Ordering::SeqCst);
    install_console_handler();
}

/// The HandlerRoutine: runs on a thread Windows creates; returns FALSE so that the next
/// handler (in the end the default one, ExitProcess) runs. A console close gives it 5 s
/// (SPI_GETHUNGAPPTIMEOUT, microsoft/terminal's doc/ConsoleCtrlEvent.md): it sends STOP to
/// every session without waiting for their readers, and waits at most
/// [`LEDGER_WAIT_CLOSING`] for the interval's ledger.
unsafe extern "system" fn console_handler(ctrl: u32) -> BOOL {
    use windows_sys::Win32::System::Console::{
        CTRL_BREAK_EVENT, CTRL_CLOSE_EVENT, CTRL_C_EVENT, CTRL_LOGOFF_EVENT, CTRL_SHUTDOWN_EVENT,
    };
    let interrupt = matches!(ctrl, CTRL_C_EVENT | CTRL_BREAK_EVENT);
    // logoff and shutdown reach a service only; a dtx run as one is handled alike
    let closing = matches!(
        ctrl,
        CTRL_CLOSE_EVENT | CTRL_LOGOFF_EVENT | CTRL_SHUTDOWN_EVENT
    );
    if closing || (interrupt && STOP_ON_INTERRUPT.load(Ordering::SeqCst)) {
        let _ = std::panic::catch_unwind(stop_everything);
    }
    0
}

/// Stops every registered session by name (STOP sent to each, nothing waited for) and gives
/// up this process's hold on the sampling interval: what the console handler runs.
fn stop_everything() {
    let names = std::mem::take(&mut *lock(&STARTED));
    for name in &names {
        control(name, w::EVENT_TRACE_CONTROL_STOP);
    }
    release_interval(LEDGER_WAIT_CLOSING);
}

// ---------------------------------------------------------------------------------------------
// The sampling interval's ledger (see `super::interval`)

/// The named mutex every dtx takes to read and write the ledger (the Global namespace: every
/// logon session on the machine shares the one interval).
const LEDGER_MUTEX: &str = "Global\\dtx-sampling-interval";
/// How long a run waits for another's hold on the ledger (each holds it for a few file
/// operations and two calls).
const LEDGER_WAIT: Duration = Duration::from_secs(5);
/// The same from the console handler, which has 5 s in all.
const LEDGER_WAIT_CLOSING: Duration = Duration::from_secs(2);

/// The ledger's folder's security descriptor: owner Administrators, a protected DACL (nothing
/// inherited from ProgramData, where any user may make folders) giving SYSTEM and
/// Administrators full control, inherited by the ledger file (Microsoft Learn: Security
/// Descriptor String Format, Well-known SIDs).
pub const LEDGER_DIR_SDDL: &str = "O:BAD:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)";
/// The ledger mutex's: the same two, GENERIC_ALL, no one else (a standard user can neither
/// open it to hold it forever nor make it first under dtx's name unseen).
pub const LEDGER_MUTEX_SDDL: &str = "O:BAD:P(A;;GA;;;SY)(A;;GA;;;BA)";
/// The most of a ledger file read (a few lines per live run).
const LEDGER_MAX_BYTES: u64 = 64 * 1024;

/// The ledger's folder, `%ProgramData%\dtx\interval` (its file `sampling-interval.txt`),
/// with `%ProgramData%\dtx` checked as it is found: a parent a standard user made first (its
/// owner may always delete what is in it) or a junction there refuses the ledger.
fn ledger_dir() -> Result<PathBuf, String> {
    let base = std::env::var_os("ProgramData").unwrap_or_else(|| "C:\\ProgramData".into());
    let parent = Path::new(&base).join("dtx");
    if std::fs::symlink_metadata(&parent).is_err() {
        // made owned by Administrators, its DACL inherited from ProgramData's (no DACL given)
        let _ = secure_dir::make(&parent, "O:BA");
    }
    secure_dir::check(&parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    Ok(parent.join("interval"))
}

/// Runs `f` on the ledger with the machine's ledger mutex held (at most `wait` for it; without
/// it, when another dtx holds it longer, rather than not at all) and writes back what `f` left,
/// living holders only. Refused, `f` not run, when the ledger's folder or its mutex is not
/// dtx's (see [`with_ledger_at`]).
fn with_ledger_waiting<T>(
    wait: Duration,
    f: impl FnOnce(&mut interval::Ledger) -> T,
) -> Result<T, String> {
    with_ledger_at(&ledger_dir()?, LEDGER_MUTEX, wait, f)
}

/// Opens (or makes, admin-only) the ledger's mutex `name`: one that existed and is owned by
/// someone other than SYSTEM or Administrators, or that this dtx may not open, is refused.
fn ledger_mutex(name: &str) -> Result<HANDLE, String> {
    use windows_sys::Win32::Foundation::{
        GetLastError, SetLastError, ERROR_ACCESS_DENIED, ERROR_ALREADY_EXISTS,
    };
    use windows_sys::Win32::Security::Authorization::SE_KERNEL_OBJECT;
    use windows_sys::Win32::System::Threading::CreateMutexW;
    let wname = wide(name);
    secure_dir::with_sddl(LEDGER_MUTEX_SDDL, |sa| {
        // SAFETY: a NUL-terminated name and valid attributes; not initially owned
        let (h, err) = unsafe {
            SetLastError(0);
            let h = CreateMutexW(sa, 0, wname.as_ptr());
            (h, GetLastError())
        };
        if h.is_null() {
            return Err(if err == ERROR_ACCESS_DENIED {
                format!(
                    "the mutex {name} exists and this dtx may not open it (another user made \
                     it): refused"
                )
            } else {
                format!(
                    "cannot make the mutex {name}: {}",
                    std::io::Error::from_raw_os_error(err as i32)
                )
            });
        }
        if err == ERROR_ALREADY_EXISTS {
            // SAFETY: the mutex handle CreateMutexW gave (MUTEX_ALL_ACCESS: READ_CONTROL)
            let verdict = unsafe { secure_dir::owner_of(h, SE_KERNEL_OBJECT) }
                .and_then(|o| secure_dir::object_verdict(name, &o));
            if let Err(e) = verdict {
                // SAFETY: the handle CreateMutexW gave, closed once
                unsafe { CloseHandle(h) };
                return Err(e);
            }
        }
        Ok(h)
    })?
}

/// [`with_ledger_waiting`] on the ledger in the folder `dir` under the named mutex
/// `mutex_name`: the folder first ([`ledger_folder`]), then [`with_ledger_in`].
fn with_ledger_at<T>(
    dir: &Path,
    mutex_name: &str,
    wait: Duration,
    f: impl FnOnce(&mut interval::Ledger) -> T,
) -> Result<T, String> {
    ledger_folder(dir)?;
    with_ledger_in(dir, mutex_name, wait, f)
}

/// Makes the ledger's folder `dir` with [`LEDGER_DIR_SDDL`], or takes the one found, when it
/// is not a reparse point and SYSTEM or Administrators own it (one found is judged before dtx
/// puts its DACL on it, so that a planted one's owner is what is said).
fn ledger_folder(dir: &Path) -> Result<(), String> {
    let found = std::fs::symlink_metadata(dir).is_ok();
    (if found {
        secure_dir::check(dir)
    } else {
        Ok(())
    })
    .and_then(|_| secure_dir::make(dir, LEDGER_DIR_SDDL))
    .and_then(|_| secure_dir::check(dir))
    .map_err(|e| format!("the ledger's folder {}: {e}", dir.display()))
}

/// The ledger in the folder `dir` (already judged) under the mutex `mutex_name` (refused when
/// it is not dtx's, see [`ledger_mutex`]); the file is replaced whole
/// ([`secure_dir::replace`]).
fn with_ledger_in<T>(
    dir: &Path,
    mutex_name: &str,
    wait: Duration,
    f: impl FnOnce(&mut interval::Ledger) -> T,
) -> Result<T, String> {
    use std::io::{Read, Write};
    use windows_sys::Win32::Foundation::{WAIT_ABANDONED, WAIT_OBJECT_0};
    use windows_sys::Win32::System::Threading::{ReleaseMutex, WaitForSingleObject};
    let mutex = ledger_mutex(mutex_name)?;
    // SAFETY: a mutex handle CreateMutexW gave; an abandoned mutex (a dtx that died holding
    // it) is ours all the same
    let rc = unsafe { WaitForSingleObject(mutex, wait.as_millis() as u32) };
    let held = rc == WAIT_OBJECT_0 || rc == WAIT_ABANDONED;
    let path = dir.join("sampling-interval.txt");
    let mut text = String::new();
    if let Ok(file) = std::fs::File::open(&path) {
        let _ = file.take(LEDGER_MAX_BYTES).read_to_string(&mut text);
    }
    let mut ledger = interval::Ledger::parse(&text);
    ledger.prune(owner_alive);
    let out = f(&mut ledger);
    if ledger == interval::Ledger::default() {
        let _ = std::fs::remove_file(&path);
    } else {
        let _ = secure_dir::replace(&path, |w| w.write_all(ledger.render().as_bytes()));
    }
    if held {
        // SAFETY: the mutex this thread holds
        unsafe { ReleaseMutex(mutex) };
    }
    // SAFETY: the handle CreateMutexW gave, closed once
    unsafe { CloseHandle(mutex) };
    Ok(out)
}

/// [`with_ledger_waiting`] with a run's wait.
fn with_ledger<T>(f: impl FnOnce(&mut interval::Ledger) -> T) -> Result<T, String> {
    with_ledger_waiting(LEDGER_WAIT, f)
}

/// This process's end of its hold on the interval, waiting at most `wait` for the ledger:
/// the last holder gives the system its value back when it is still what dtx set; when
/// another program changed it, it is left and that is said.
fn release_interval(wait: Duration) {
    let me = this_owner();
    let claimed = lock(&CLAIMED).take();
    // this run set it, but the ledger lost its hold (the file could not be written, or was
    // removed) or is refused now: this run's own record decides, by the same rule
    let own = |current: Option<u32>| match (claimed, current) {
        (Some((_, set)), Some(now)) if now != set => {
            interval::Release::ChangedMeanwhile { now, set }
        }
        (Some((original, _)), _) => interval::Release::Restore(original),
        (None, _) => interval::Release::NotHeld,
    };
    let give_back = |r: interval::Release| {
        if let interval::Release::Restore(v) = r {
            set_profile_interval(v);
        }
        r
    };
    let ledger = with_ledger_waiting(wait, |l| {
        let current = query_profile_interval();
        let r = match l.release(me, current) {
            interval::Release::NotHeld => own(current),
            r => r,
        };
        give_back(r)
    });
    let release = match ledger {
        Ok(r) => r,
        Err(why) => {
            if claimed.is_some() {
                crate::output::stderr::say(
                    "dtx",
                    format_args!("warning: the sampling interval's ledger: {why}"),
                );
            }
            give_back(own(query_profile_interval()))
        }
    };
    if let Some(note) = interval::release_note(release) {
        crate::output::stderr::say("dtx", format_args!("warning: {note}"));
    }
}

/// [`release_interval`] at a run's end.
fn release_profile_interval() {
    release_interval(LEDGER_WAIT);
}

/// At the first start: gives the system back an interval that dtx runs now gone (a logoff, a
/// kill) left set. Whether it did.
/// Setting the interval needs SeSystemProfilePrivilege, enabled first (a run without
/// `profile-N` has not); the ledger's record goes only once the system took the original
/// back, so a sweep that cannot set it leaves it for the next dtx.
fn sweep_interval() -> bool {
    with_ledger(|l| {
        if !l.holders.is_empty() {
            return false;
        }
        let Some(v) = l.sweep(query_profile_interval()) else {
            return false;
        };
        if enable_profile_privilege().is_err() || set_profile_interval(v) != ERROR_SUCCESS {
            return false;
        }
        l.swept();
        true
    })
    .unwrap_or(false)
}

/// Whether the process instance `o` still runs.
fn owner_alive(o: session::Owner) -> bool {
    let me = this_owner();
    o == me || !session::is_stale(o, me, process_started)
}

// Sampling interval and privileges

/// TRACE_PROFILE_INTERVAL.Source of the timer-based profile source (ProfileTime).
const PROFILE_TIME: u32 = 0;
/// What the system samples at when its interval cannot be read: 1 ms, the default (what
/// PerfView's TraceEventSession.Stop sets back).
const DEFAULT_PROFILE_INTERVAL: u32 = 10_000;

/// The system's sampling interval (TraceQueryInformation TraceSampledProfileIntervalInfo; a
/// system-wide setting, so session handle 0, as PerfView and ferrisetw query it).
fn query_profile_interval() -> Option<u32> {
    // Wine 8 exports TraceQueryInformation as a stub that aborts the process when called
    // (its ETW controller is not implemented): there the interval is not known
    if under_wine() {
        return None;
    }
    let mut info = w::TRACE_PROFILE_INTERVAL {
        Source: PROFILE_TIME,
        Interval: 0,
    };
    let mut len = 0u32;
    // SAFETY: info is a TRACE_PROFILE_INTERVAL of the size given
    let rc = unsafe {
        w::TraceQueryInformation(
            w::CONTROLTRACE_HANDLE { Value: 0 },
            w::TraceSampledProfileIntervalInfo,
            (&mut info as *mut w::TRACE_PROFILE_INTERVAL).cast(),
            std::mem::size_of::<w::TRACE_PROFILE_INTERVAL>() as u32,
            &mut len,
        )
    };
    (rc == ERROR_SUCCESS && info.Interval != 0).then_some(info.Interval)
}

/// The system's sampling interval now (100 ns units), if it can be read (the Windows tests
/// compare it before, during and after runs).
pub fn sampling_interval() -> Option<u32> {
    query_profile_interval()
}

/// Sets the system's sampling interval (TraceSetInformation TraceSampledProfileIntervalInfo,
/// session handle 0, as PerfView sets it; needs SeSystemProfilePrivilege). The error code.
fn set_profile_interval(interval: u32) -> u32 {
    let info = w::TRACE_PROFILE_INTERVAL {
        Source: PROFILE_TIME,
        Interval: interval,
    };
    // SAFETY: info is a TRACE_PROFILE_INTERVAL of the size given
    unsafe {
        w::TraceSetInformation(
            w::CONTROLTRACE_HANDLE { Value: 0 },
            w::TraceSampledProfileIntervalInfo,
            (&info as *const w::TRACE_PROFILE_INTERVAL).cast(),
            std::mem::size_of::<w::TRACE_PROFILE_INTERVAL>() as u32,
        )
    }
}

/// This process's token, closed when dropped.
struct Token(HANDLE);

impl Token {
    /// The process token with `access`.
    fn open(access: u32) -> Option<Token> {
        use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};
        let mut h: HANDLE = std::ptr::null_mut();
        // SAFETY: the pseudo handle of this process; h receives a handle closed on drop
        let ok = unsafe { OpenProcessToken(GetCurrentProcess(), access, &mut h) };
        (ok != 0).then_some(Token(h))
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        // SAFETY: the handle OpenProcessToken gave, closed once
        unsafe { CloseHandle(self.0) };
    }
}

/// Whether the process token is elevated (GetTokenInformation TokenElevation); false when it
/// cannot be read.
pub fn is_elevated() -> bool {
    use windows_sys::Win32::Security::{
        GetTokenInformation, TokenElevation, TOKEN_ELEVATION, TOKEN_QUERY,
    };
    let Some(token) = Token::open(TOKEN_QUERY) else {
        return false;
    };
    let mut info = TOKEN_ELEVATION { TokenIsElevated: 0 };
    let mut len = 0u32;
    // SAFETY: info is a TOKEN_ELEVATION of the size given; the token is open
    let ok = unsafe {
        GetTokenInformation(
            token.0,
            TokenElevation,
            (&mut info as *mut TOKEN_ELEVATION).cast(),
            std::mem::size_of::<TOKEN_ELEVATION>() as u32,
            &mut len,
        )
    };
    ok != 0 && info.TokenIsElevated != 0
}

/// Where the process token stands: elevated, an administrator's limited token (UAC, a prompt
/// not elevated: TokenElevationType is TokenElevationTypeLimited), or neither (Microsoft
/// Learn: TOKEN_ELEVATION_TYPE; membership of Administrators shows in a limited token only as
/// the split, so the elevation type rather than CheckTokenMembership tells it).
fn standing() -> session::Standing {
    use windows_sys::Win32::Security::{
        GetTokenInformation, TokenElevationType, TokenElevationTypeLimited, TOKEN_ELEVATION_TYPE,
        TOKEN_QUERY,
    };
    if is_elevated() {
        return session::Standing::Elevated;
    }
    let Some(token) = Token::open(TOKEN_QUERY) else {
        return session::Standing::NotAdmin;
    };
    let mut kind: TOKEN_ELEVATION_TYPE = 0;
    let mut len = 0u32;
    // SAFETY: kind is a TOKEN_ELEVATION_TYPE of the size given; the token is open
    let ok = unsafe {
        GetTokenInformation(
            token.0,
            TokenElevationType,
            (&mut kind as *mut TOKEN_ELEVATION_TYPE).cast(),
            std::mem::size_of::<TOKEN_ELEVATION_TYPE>() as u32,
            &mut len,
        )
    };
    if ok != 0 && kind == TokenElevationTypeLimited {
        session::Standing::AdminNotElevated
    } else {
        session::Standing::NotAdmin
    }
}

/// The elevation to put an error code in words with: only access denied needs it.
fn elevated(rc: u32) -> bool {
    rc == ERROR_ACCESS_DENIED && is_elevated()
}

/// Enables SeSystemProfilePrivilege in the process token (the sampled profile needs it).
/// AdjustTokenPrivileges succeeds also when the token lacks the privilege: GetLastError then
/// says ERROR_NOT_ALL_ASSIGNED.
fn enable_profile_privilege() -> Result<(), String> {
    use windows_sys::Win32::Security::{
        AdjustTokenPrivileges, LookupPrivilegeValueW, LUID_AND_ATTRIBUTES, SE_PRIVILEGE_ENABLED,
        SE_SYSTEM_PROFILE_NAME, TOKEN_ADJUST_PRIVILEGES, TOKEN_PRIVILEGES, TOKEN_QUERY,
    };
    let denied = || session::profile_privilege_words(standing());
    let token = Token::open(TOKEN_ADJUST_PRIVILEGES | TOKEN_QUERY).ok_or_else(denied)?;
    let mut luid = LUID {
        LowPart: 0,
        HighPart: 0,
    };
    // SAFETY: a NUL-terminated privilege name and a LUID out-parameter
    if unsafe { LookupPrivilegeValueW(std::ptr::null(), SE_SYSTEM_PROFILE_NAME, &mut luid) } == 0 {
        return Err(denied());
    }
    let privileges = TOKEN_PRIVILEGES {
        PrivilegeCount: 1,
        Privileges: [LUID_AND_ATTRIBUTES {
            Luid: luid,
            Attributes: SE_PRIVILEGE_ENABLED,
        }],
    };
    // SAFETY: an open token with TOKEN_ADJUST_PRIVILEGES and one privilege to enable; no
    // previous state asked for
    let ok = unsafe {
        AdjustTokenPrivileges(
            token.0,
            0,
            &privileges,
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    // SAFETY: no arguments
    if ok == 0 || unsafe { GetLastError() } == ERROR_NOT_ALL_ASSIGNED {
        return Err(denied());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Stale sessions

/// Stops the dtx sessions whose dtx is gone: named `dtx-<kind>-<pid>-<start>` for a process
/// instance that no longer runs (no process of that id, or one started at another time, this
/// process included: a reused pid), the sessions a killed dtx or a logoff left behind; and
/// gives the system back a sampling interval such runs left set. Sessions of running dtx
/// processes, this one's, and every other session are left alone. Called once before the first
/// session starts. How many sessions were stopped.
pub fn stop_stale_sessions() -> usize {
    let me = this_owner();
    let stale: Vec<String> = all_session_names()
        .into_iter()
        .filter(|name| {
            session::owner(name).is_some_and(|o| session::is_stale(o, me, process_started))
        })
        .collect();
    // STOP is synchronous and these sessions have no reader here: no wait between them
    let stopped = stale
        .iter()
        .filter(|name| control(name, w::EVENT_TRACE_CONTROL_STOP).is_some())
        .count();
    sweep_interval();
    stopped
}

/// The names of the sessions running on the system (QueryAllTraces: at most 64, the number
/// its page allows to ask for).
fn all_session_names() -> Vec<String> {
    const MAX_SESSIONS: usize = 64;
    let mut props: Vec<Properties> = (0..MAX_SESSIONS)
        .map(|_| Properties::for_control())
        .collect();
    let mut ptrs: Vec<*mut w::EVENT_TRACE_PROPERTIES> =
        props.iter_mut().map(|p| p.as_mut_ptr()).collect();
    let mut count = 0u32;
    // SAFETY: MAX_SESSIONS pointers to properties buffers with room for the names
    let rc = unsafe { w::QueryAllTracesW(ptrs.as_mut_ptr(), MAX_SESSIONS as u32, &mut count) };
    if rc != ERROR_SUCCESS && rc != ERROR_MORE_DATA {
        return Vec::new();
    }
    props
        .iter_mut()
        .take((count as usize).min(MAX_SESSIONS))
        .map(|p| {
            let at = p.props_mut().LoggerNameOffset as usize;
            p.text_at(at)
        })
        .collect()
}

/// Whether a process of that id runs (OpenProcess, GetExitCodeProcess == STILL_ACTIVE) and,
/// when it does, its start time if it can be read (GetProcessTimes). A process dtx may not
/// open (access denied) runs, start time unknown.
fn process_started(pid: u32) -> Option<Option<u64>> {
    use windows_sys::Win32::Foundation::ERROR_INVALID_PARAMETER;
    use windows_sys::Win32::System::Threading::{
        GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
    };
    // SAFETY: no pointers; the handle is closed below
    let h = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if h.is_null() {
        // SAFETY: no arguments
        let gone = unsafe { GetLastError() } == ERROR_INVALID_PARAMETER;
        return (!gone).then_some(None);
    }
    let mut code = 0u32;
    // SAFETY: an open process handle and an out-parameter
    let ok = unsafe { GetExitCodeProcess(h, &mut code) };
    let started = process_start(h);
    // SAFETY: the handle OpenProcess gave, closed once
    unsafe { CloseHandle(h) };
    (ok == 0 || code == STILL_ACTIVE as u32).then_some(started)
}

// ---------------------------------------------------------------------------------------------
// EVENT_TRACE_PROPERTIES buffers

/// The longest session or log file name ETW takes, in UTF-16 units (EVENT_TRACE_PROPERTIES:
/// "limited to 1,024 characters").
const NAME_MAX: usize = 1024;

/// An EVENT_TRACE_PROPERTIES followed by room for a session name and a log file name, sized
/// for what it carries and 8-byte aligned (a `Vec<u64>`), zeroed as the structure's page asks.
struct Properties {
    buf: Vec<u64>,
}

impl Properties {
    /// Room for a session name of `name_units` UTF-16 units and the log file `file` (UTF-16,
    /// no NUL), which is copied in after the name.
    fn with_room(name_units: usize, file: Option<&[u16]>) -> Properties {
        let head = std::mem::size_of::<w::EVENT_TRACE_PROPERTIES>();
        let name_bytes = (name_units + 1) * 2;
        let file_bytes = file.map_or(0, |f| (f.len() + 1) * 2);
        let total = head + name_bytes + file_bytes;
        let mut p = Properties {
            buf: vec![0u64; total.div_ceil(8)],
        };
        if let Some(f) = file {
            let at = head + name_bytes;
            let bytes = p.bytes_mut();
            for (i, u) in f.iter().enumerate() {
                bytes[at + 2 * i..at + 2 * i + 2].copy_from_slice(&u.to_le_bytes());
            }
        }
        let size = p.buf.len() * 8;
        let props = p.props_mut();
        props.Wnode.BufferSize = size as u32;
        props.Wnode.Flags = w::WNODE_FLAG_TRACED_GUID;
        // QueryPerformanceCounter timestamps: the StackWalk records' EventTimeStamp agrees
        props.Wnode.ClientContext = 1;
        props.LoggerNameOffset = head as u32;
        if file.is_some() {
            props.LogFileNameOffset = (head + name_bytes) as u32;
        }
        p
    }

    /// For ControlTrace and QueryAllTraces, which write the names back: room for the longest.
    fn for_control() -> Properties {
        Properties::with_room(NAME_MAX, Some(&[0u16; NAME_MAX]))
    }

    /// The structure at the buffer's start.
    fn props_mut(&mut self) -> &mut w::EVENT_TRACE_PROPERTIES {
        // SAFETY: the buffer is 8-byte aligned, at least the structure's size (with_room), and
        // any bytes are a valid EVENT_TRACE_PROPERTIES (integers, a GUID, a handle value)
        unsafe { &mut *self.buf.as_mut_ptr().cast::<w::EVENT_TRACE_PROPERTIES>() }
    }

    /// The buffer as the functions take it.
    fn as_mut_ptr(&mut self) -> *mut w::EVENT_TRACE_PROPERTIES {
        self.buf.as_mut_ptr().cast()
    }

    /// The whole buffer as bytes.
    fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.buf.len() * 8;
        // SAFETY: the Vec's initialised u64s viewed as bytes
        unsafe { std::slice::from_raw_parts_mut(self.buf.as_mut_ptr().cast::<u8>(), len) }
    }

    /// The NUL-terminated UTF-16 text at byte offset `at` (what ETW wrote back).
    fn text_at(&mut self, at: usize) -> String {
        let units: Vec<u16> = self
            .bytes_mut()
            .get(at..)
            .unwrap_or(&[])
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .take_while(|u| *u != 0)
            .collect();
        String::from_utf16_lossy(&units)
    }
}

/// A log file path as ETW takes it: absolute, UTF-16 as the OS spells it (no lossy
/// conversion), at most [`NAME_MAX`] units; a longer path is an error, never cut.
fn log_file_units(path: &Path) -> Result<Vec<u16>, String> {
    use std::os::windows::ffi::OsStrExt;
    let full = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let units: Vec<u16> = full.as_os_str().encode_wide().collect();
    if units.contains(&0) {
        return Err(format!(
            "{}: a log file name cannot hold NUL",
            path.display()
        ));
    }
    if units.len() > NAME_MAX {
        return Err(format!(
            "{}: the log file path is {} characters long; ETW takes at most {NAME_MAX}",
            full.display(),
            units.len()
        ));
    }
    Ok(units)
}

/// `s` as a NUL-terminated UTF-16 string.
fn wide(s: &str) -> Vec<u16> {
    s.encode_utf16().chain(std::iter::once(0)).collect()
}

/// A GUID in windows-sys's form.
fn win_guid(g: Guid) -> GUID {
    GUID {
        data1: g.data1,
        data2: g.data2,
        data3: g.data3,
        data4: g.data4,
    }
}

// ---------------------------------------------------------------------------------------------
// Providers known to the system (TDH)

/// Whether dtx runs under Wine (its ntdll exports `wine_get_version`), where TDH and live
/// sessions are stubs.
fn under_wine() -> bool {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleA, GetProcAddress};
    // SAFETY: NUL-terminated names; ntdll is loaded in every process
    unsafe {
        let ntdll = GetModuleHandleA(c"ntdll.dll".as_ptr().cast());
        !ntdll.is_null() && GetProcAddress(ntdll, c"wine_get_version".as_ptr().cast()).is_some()
    }
}

/// TdhEnumerateProviders' PROVIDER_ENUMERATION_INFO, asked for again while the list grows
/// between the sizing call and the filling one (a few tries).
fn provider_enumeration() -> Result<Vec<u8>, String> {
    const TRIES: usize = 5;
    let mut buf: Vec<u64> = Vec::new();
    for _ in 0..TRIES {
        let mut size = (buf.len() * 8) as u32;
        let ptr = if buf.is_empty() {
            std::ptr::null_mut()
        } else {
            buf.as_mut_ptr().cast::<w::PROVIDER_ENUMERATION_INFO>()
        };
        // SAFETY: ptr is null (a sizing call) or holds `size` bytes, 8-byte aligned
        let rc = unsafe { w::TdhEnumerateProviders(ptr, &mut size) };
        match rc {
            ERROR_SUCCESS => {
                let len = (size as usize).min(buf.len() * 8);
                // SAFETY: the buffer's initialised u64s viewed as bytes, `len` of them
                let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), len) };
                return Ok(bytes.to_vec());
            }
            ERROR_INSUFFICIENT_BUFFER => buf = vec![0u64; (size as usize).div_ceil(8) + 1],
            rc => return Err(format!("cannot list the ETW providers: error {rc}")),
        }
    }
    Err("cannot list the ETW providers: the list kept growing while it was read".into())
}

/// The system's registered providers (name, GUID), from TDH.
pub fn system_providers() -> Result<Vec<(String, Guid)>, String> {
    if under_wine() {
        // Wine's tdh.dll has the entry points as stubs that raise on call
        return Err("the system's ETW provider list is not available under Wine".into());
    }
    let bytes = provider_enumeration()?;
    let count = bytes
        .get(0..4)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])) as usize;
    let mut out = Vec::with_capacity(count.min(1 << 16));
    for i in 0..count {
        // TRACE_PROVIDER_INFO: GUID, SchemaSource, ProviderNameOffset (24 bytes, from byte 8)
        let at = 8 + i * 24;
        let Some(entry) = bytes.get(at..at + 24) else {
            break;
        };
        let Some(guid) = Guid::from_le_bytes(&entry[..16]) else {
            continue;
        };
        let off = u32::from_le_bytes([entry[20], entry[21], entry[22], entry[23]]) as usize;
        let name: Vec<u16> = bytes
            .get(off..)
            .unwrap_or(&[])
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .take_while(|c| *c != 0)
            .collect();
        out.push((String::from_utf16_lossy(&name), guid));
    }
    Ok(out)
}

/// The (name, GUID) of the providers the system registers, enough to resolve `names`: the
/// cached catalog when it knows them all, else TDH's list.
fn registered_guids(names: &[String]) -> Result<Vec<(String, Guid)>, String> {
    if let Some(c) = catalog::load_cached(true) {
        if names.iter().all(|n| c.find(n).is_some()) {
            return Ok(c.providers.into_iter().map(|p| (p.name, p.guid)).collect());
        }
    }
    system_providers()
}

/// The named keywords of one provider (TdhEnumerateProviderFieldInformation with
/// EventKeywordInformation); none for providers that define none or are not manifest-based.
pub fn provider_keywords(guid: Guid) -> Vec<(String, u64)> {
    let g = win_guid(guid);
    let bytes = tdh_buffer(|buf, size| {
        // SAFETY: buf is null (a sizing call) or holds `size` bytes, 8-byte aligned
        unsafe {
            w::TdhEnumerateProviderFieldInformation(
                &g,
                w::EventKeywordInformation,
                buf.cast::<w::PROVIDER_FIELD_INFOARRAY>(),
                size,
            )
        }
    });
    match bytes {
        Some(b) if b.len() >= 8 => catalog::parse_field_info_array(&b),
        _ => Vec::new(),
    }
}

/// Every registered provider with its keywords, from TDH.
pub fn enumerate_catalog() -> Result<ProviderCatalog, String> {
    let mut providers: Vec<ProviderInfo> = system_providers()?
        .into_iter()
        .map(|(name, guid)| {
            let mut p = ProviderInfo::new(&name, guid);
            for (k, m) in provider_keywords(guid) {
                p.add_keyword(&k, m);
            }
            p
        })
        .collect();
    providers.sort_by_key(|p| p.name.to_ascii_lowercase());
    Ok(ProviderCatalog { providers })
}

/// Enumerates the catalog from TDH and rewrites the cache next to the executable (a cache that
/// cannot be written is not an error: the catalog is simply enumerated next time too).
fn fresh_catalog() -> Result<ProviderCatalog, String> {
    let c = enumerate_catalog()?;
    if let Some(path) = catalog::catalog_path() {
        let _ = c.save(&path);
    }
    Ok(c)
}

/// The system's provider catalog: the cache next to the executable when it is fresh and knows
/// every name in `needed`, else enumerated from TDH again and the cache rewritten.
pub fn provider_catalog(needed: &[&String]) -> Result<ProviderCatalog, String> {
    if let Some(c) = catalog::load_cached(true) {
        if needed.iter().all(|n| c.find(n).is_some()) {
            return Ok(c);
        }
    }
    fresh_catalog()
}

/// The catalog for the provider names `needed`, and those of them the system does not
/// register (EventSource and TraceLogging providers: enabled by the GUID their name hashes
/// to). A fresh cache that lacks only unregistered names is not enumerated again.
fn catalog_for(needed: &[&String]) -> Result<(ProviderCatalog, Vec<String>), String> {
    if let Some(c) = catalog::load_cached(true) {
        let missing: Vec<String> = needed
            .iter()
            .filter(|n| c.find(n).is_none())
            .map(|n| n.to_string())
            .collect();
        if missing.is_empty() {
            return Ok((c, missing));
        }
        let registered = system_providers()?;
        let unregistered = |n: &String| !registered.iter().any(|(r, _)| r.eq_ignore_ascii_case(n));
        if missing.iter().all(unregistered) {
            return Ok((c, missing));
        }
    }
    let c = fresh_catalog()?;
    let unknown = needed
        .iter()
        .filter(|n| c.find(n).is_none())
        .map(|n| n.to_string())
        .collect();
    Ok((c, unknown))
}

/// The ETW side of a live run: the user providers the programs name, resolved through the
/// provider catalog, and with `list_all` (`dtx -l`) every provider of the catalog. A name the
/// system does not register is kept by name: the session enables it by the GUID the name
/// hashes to (EventSource, TraceLogging) and says so.
pub fn live_etw(
    texts: &[String],
    log_file: Option<PathBuf>,
    list_all: bool,
) -> Result<super::LiveEtw, String> {
    let names = super::LiveEtw::provider_names(texts);
    let needed: Vec<&String> = names.iter().filter(|n| Guid::parse(n).is_none()).collect();
    let (catalog, unknown) = if !needed.is_empty() {
        let (c, unknown) = catalog_for(&needed)?;
        (Some(c), unknown)
    } else if list_all {
        // only for the listing: a system whose TDH cannot enumerate (Wine) lists without it
        (provider_catalog(&[]).ok(), Vec::new())
    } else {
        (None, Vec::new())
    };
    let known: Vec<String> = names
        .iter()
        .filter(|n| !unknown.contains(n))
        .cloned()
        .collect();
    let mut live = super::LiveEtw::with_catalog(&known, log_file, catalog.as_ref(), list_all)?;
    for name in &unknown {
        // before the run: a misspelled name would otherwise see nothing, silently
        crate::output::stderr::say(
            "dtx",
            format_args!(
                "{}",
                super::unregistered_provider_warning(name, catalog.as_ref())
            ),
        );
        live.etw.add_named(name);
    }
    // the running kernel's image, whose calls the `syscall` probes are named after
    let root = std::env::var_os("SystemRoot").unwrap_or_else(|| "C:\\Windows".into());
    let kernel = Path::new(&root).join("System32").join("ntoskrnl.exe");
    if let Some(note) = live.name_kernel_calls(texts, list_all, &kernel) {
        crate::output::stderr::say("dtx", format_args!("{note}"));
    }
    Ok(live)
}

// ---------------------------------------------------------------------------------------------
// Event schemas (TDH)

/// Calls a TDH function that fills a caller-sized buffer: first for the size, then for the
/// data (8-byte aligned, as the structures want).
fn tdh_buffer(call: impl Fn(*mut u8, &mut u32) -> u32) -> Option<Vec<u8>> {
    let mut size = 0u32;
    let rc = call(std::ptr::null_mut(), &mut size);
    if rc != ERROR_INSUFFICIENT_BUFFER || size == 0 {
        return None;
    }
    let mut buf = vec![0u64; (size as usize).div_ceil(8)];
    if call(buf.as_mut_ptr().cast(), &mut size) != ERROR_SUCCESS {
        return None;
    }
    let len = (size as usize).min(buf.len() * 8);
    // SAFETY: buf holds at least `len` initialised bytes
    let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), len) };
    Some(bytes.to_vec())
}

/// The schema of a record's event from TDH (the system's registered manifests): its
/// TRACE_EVENT_INFO and the value maps its fields name. Called on ProcessTrace's thread,
/// inside the callback, once per (provider, event id, version).
fn tdh_schema(rec: &RawEventRecord) -> Option<super::EventSchema> {
    // RawEventRecord mirrors EVENT_RECORD field for field (checked by the raw module's tests)
    let ev = (rec as *const RawEventRecord).cast::<w::EVENT_RECORD>();
    let event_info = tdh_buffer(|buf, size| {
        // SAFETY: ev is the callback's valid record; buf/size describe a writable buffer
        unsafe { w::TdhGetEventInformation(ev, 0, std::ptr::null(), buf.cast(), size) }
    })?;
    let info = crate::etw::decode::tdh::parse_trace_event_info(&event_info)?;
    let provider = raw_guid_bytes(rec);
    let mut maps = Vec::new();
    let mut names: Vec<&String> = info
        .schema
        .props
        .iter()
        .filter_map(|p| p.map.as_ref())
        .collect();
    names.sort();
    names.dedup();
    for name in names {
        let wide = wide(name);
        let map = tdh_buffer(|buf, size| {
            // SAFETY: as above; wide is NUL-terminated
            unsafe { w::TdhGetEventMapInformation(ev, wide.as_ptr(), buf.cast(), size) }
        });
        if let Some(m) = map {
            let mut payload = provider.to_vec();
            payload.extend_from_slice(&m);
            maps.push(payload);
        }
    }
    Some(super::EventSchema { event_info, maps })
}

/// The record's provider GUID in its 16-byte on-disk form (as EventMapInfo records start).
fn raw_guid_bytes(rec: &RawEventRecord) -> [u8; 16] {
    let g = &rec.header.provider_id;
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&g.data1.to_le_bytes());
    b[4..6].copy_from_slice(&g.data2.to_le_bytes());
    b[6..8].copy_from_slice(&g.data3.to_le_bytes());
    b[8..16].copy_from_slice(&g.data4);
    b
}

// ---------------------------------------------------------------------------------------------
// What `dtx --check` reads of the system (src/cli/selfcheck/windows.rs)

/// The system's sampling interval now, in 100 ns units (TraceQueryInformation
/// TraceSampledProfileIntervalInfo), or None when it cannot be read.
pub fn system_profile_interval() -> Option<u32> {
    query_profile_interval()
}

/// The names of the ETW sessions running now, by the query `logman query -ets` makes
/// (QueryAllTracesW).
pub fn running_session_names() -> Vec<String> {
    all_session_names()
}

/// Whether this process's token is elevated.
pub fn process_elevated() -> bool {
    is_elevated()
}

/// Wine's version when dtx runs under Wine (ntdll's `wine_get_version`), else None.
pub fn wine_version() -> Option<String> {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleA, GetProcAddress};
    if !under_wine() {
        return None;
    }
    // SAFETY: NUL-terminated names; ntdll is loaded in every process
    let f = unsafe {
        let ntdll = GetModuleHandleA(c"ntdll.dll".as_ptr().cast());
        GetProcAddress(ntdll, c"wine_get_version".as_ptr().cast())
    };
    let Some(f) = f else {
        return Some("unknown".into());
    };
    // SAFETY: wine_get_version takes nothing and returns a NUL-terminated static string
    // (Wine's include/wine/debug.h); the pointer is transmuted to that signature
    let text = unsafe {
        let get: unsafe extern "C" fn() -> *const std::ffi::c_char = std::mem::transmute(f);
        let p = get();
        if p.is_null() {
            return Some("unknown".into());
        }
        std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
    };
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process instance and the liveness rule, with the system's own calls (they run
    /// under Wine too): this instance is alive, an earlier one under this pid is not, and the
    /// session names it makes name it.
    #[test]
    fn live_fix_this_instance_names_its_sessions() {
        let me = this_owner();
        assert_eq!(me.pid, std::process::id());
        let started = me
            .started
            .expect("GetProcessTimes gives this process's start");
        assert_eq!(process_started(me.pid), Some(Some(started)));
        assert!(owner_alive(me));
        let earlier = session::Owner {
            pid: me.pid,
            started: Some(started - 1),
        };
        assert!(!owner_alive(earlier));
        assert_eq!(session::owner(&session_name(KERNEL)), Some(me));
    }

    /// The ledger file under its named mutex: what one run writes the next reads, holders
    /// whose process is gone are dropped on reading, an emptied ledger removes its file, and
    /// a second thread waits for the first's hold.
    #[test]
    fn live_fix_ledger_file_under_its_mutex() {
        let dir = std::env::temp_dir().join(format!("dtx-ledger-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("sampling-interval.txt");
        let mutex = format!("Local\\dtx-ledger-test-{}", std::process::id());
        let wait = Duration::from_secs(5);
        let me = this_owner();
        let gone = session::Owner {
            pid: me.pid,
            started: me.started.map(|t| t - 1),
        };
        let claim = with_ledger_in(&dir, &mutex, wait, |l| {
            let c = l.claim(me, 2_000, Some(10_000));
            l.holders.push(gone);
            c
        })
        .expect("the ledger is dtx's");
        assert_eq!(claim, interval::Claim::Set(2_000));
        let text = std::fs::read_to_string(&path).expect("the ledger was written");
        assert!(text.contains("original 10000"), "{text}");
        // read again: the gone holder is dropped, this one stays
        let holders = with_ledger_in(&dir, &mutex, wait, |l| l.holders.clone()).expect("ledger");
        assert_eq!(holders, vec![me]);
        // a second thread waits while this one holds the mutex
        let order = Arc::new(Mutex::new(Vec::new()));
        let (p2, m2, o2) = (dir.clone(), mutex.clone(), order.clone());
        let other = with_ledger_in(&dir, &mutex, wait, |_| {
            let t = std::thread::spawn(move || {
                with_ledger_in(&p2, &m2, Duration::from_secs(5), |_| {
                    lock(&o2).push("second")
                })
            });
            std::thread::sleep(Duration::from_millis(200));
            lock(&order).push("first");
            t
        })
        .expect("ledger");
        let _ = other.join();
        assert_eq!(*lock(&order), vec!["first", "second"]);
        let released =
            with_ledger_in(&dir, &mutex, wait, |l| l.release(me, Some(2_000))).expect("ledger");
        assert_eq!(released, interval::Release::Restore(10_000));
        assert!(!path.exists(), "an emptied ledger leaves no file");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// This process's user, as an SID string (TokenUser).
    fn my_sid() -> String {
        use windows_sys::Win32::Security::Authorization::ConvertSidToStringSidW;
        use windows_sys::Win32::Security::{
            GetTokenInformation, TokenUser, TOKEN_QUERY, TOKEN_USER,
        };
        let token = Token::open(TOKEN_QUERY).expect("the process token");
        let mut buf = vec![0u64; 64];
        let mut len = 0u32;
        // SAFETY: a buffer of the size given, aligned for TOKEN_USER
        let ok = unsafe {
            GetTokenInformation(token.0, TokenUser, buf.as_mut_ptr().cast(), 512, &mut len)
        };
        assert_ne!(ok, 0, "TokenUser");
        // SAFETY: GetTokenInformation filled a TOKEN_USER at the buffer's start
        let sid = unsafe { (*buf.as_ptr().cast::<TOKEN_USER>()).User.Sid };
        let mut s: windows_sys::core::PWSTR = std::ptr::null_mut();
        // SAFETY: a valid SID; the string is left to the process's end (a test)
        assert_ne!(unsafe { ConvertSidToStringSidW(sid, &mut s) }, 0);
        // SAFETY: a NUL-terminated string the conversion gave
        let n = (0..).take_while(|&i| unsafe { *s.add(i) } != 0).count();
        // SAFETY: the n u16s counted above
        String::from_utf16_lossy(unsafe { std::slice::from_raw_parts(s, n) })
    }

    /// Finding 6 of issue 42: dtx's own ledger folder and mutex are owned by Administrators
    /// (the SDDL's `O:BA`, what the owner check accepts), and a mutex or a folder another user
    /// made first under dtx's name (owned by that user: the test's own SID stands for them)
    /// is refused, naming the owner, with the ledger untouched.
    #[test]
    fn win3_6_a_planted_ledger_mutex_or_folder_is_refused() {
        use windows_sys::Win32::Security::Authorization::SE_KERNEL_OBJECT;
        use windows_sys::Win32::System::Threading::CreateMutexW;
        let pid = std::process::id();
        let base = std::env::temp_dir().join(format!("dtx-ledger-planted-{pid}"));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).expect("temp");
        let wait = Duration::from_secs(1);
        // dtx's own
        let ours = base.join("ours");
        let name = format!("Local\\dtx-ledger-ours-{pid}");
        let h = ledger_mutex(&name).expect("a mutex of dtx's");
        assert_eq!(
            // SAFETY: the handle ledger_mutex gave
            unsafe { secure_dir::owner_of(h, SE_KERNEL_OBJECT) },
            Ok(secure_dir::Owner::Administrators)
        );
        // SAFETY: the handle ledger_mutex gave
        unsafe { CloseHandle(h) };
        if under_wine() {
            // Wine keeps no file owners (every file is the user's): the folder half that
            // accepts dtx's own runs on Windows only
            println!("skipped under Wine: dtx's own ledger folder accepted");
            std::fs::create_dir_all(&ours).expect("folder");
        } else {
            assert_eq!(ledger_folder(&ours), Ok(()));
            assert_eq!(secure_dir::check(&ours), Ok(()));
        }
        assert_eq!(with_ledger_in(&ours, &name, wait, |_| 7), Ok(7));
        // planted: a mutex and a folder owned by a user
        let user = my_sid();
        let planted = format!("Local\\dtx-ledger-planted-{pid}");
        let sddl = format!("O:{user}D:(A;;GA;;;WD)");
        let wname = wide(&planted);
        let h = secure_dir::with_sddl(&sddl, |sa| {
            // SAFETY: a NUL-terminated name and valid attributes
            unsafe { CreateMutexW(sa, 0, wname.as_ptr()) }
        })
        .expect("SDDL");
        assert!(!h.is_null(), "the planted mutex");
        let mut ran = false;
        let e = with_ledger_in(&ours, &planted, wait, |_| ran = true).expect_err("refused");
        assert!(e.contains(&planted) && e.contains(&user), "{e}");
        assert!(!ran);
        // SAFETY: the planted mutex's handle
        unsafe { CloseHandle(h) };
        let theirs = base.join("theirs");
        secure_dir::make(&theirs, &format!("O:{user}D:P(A;OICI;FA;;;WD)")).expect("planted");
        let e = with_ledger_at(&theirs, &name, wait, |_| ran = true).expect_err("refused");
        assert!(e.contains("theirs") && e.contains(&user), "{e}");
        assert!(!ran);
        let _ = std::fs::remove_dir_all(&base);
    }

    /// The ledger folder's and mutex's descriptors parse, as Windows reads them, and give
    /// SYSTEM and Administrators only, protected.
    #[test]
    fn win3_6_the_ledger_descriptors_are_admin_only() {
        for sddl in [LEDGER_DIR_SDDL, LEDGER_MUTEX_SDDL] {
            assert!(secure_dir::with_sddl(sddl, |_| ()).is_ok(), "{sddl}");
            let (owner, dacl) = sddl.split_once("D:").expect("a DACL");
            assert_eq!(owner, "O:BA");
            assert!(dacl.starts_with("P("), "protected: {sddl}");
            let trustees: Vec<&str> = dacl
                .split('(')
                .skip(1)
                .map(|ace| ace.trim_end_matches(')').rsplit(';').next().unwrap_or(""))
                .collect();
            assert_eq!(trustees, ["SY", "BA"], "{sddl}");
        }
    }
}
