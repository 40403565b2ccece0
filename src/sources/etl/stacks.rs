//! The stacks of a recorded trace, read a window ahead of the walk rather than all before it.
//!
//! A stack's records come after the event they belong to: a StackWalk Stack record right after
//! its event on the same CPU (the user half when the thread returns to user mode), a .NET
//! runtime's ClrStackWalk after its event on the same thread. So the walk cannot take an
//! event's stack from the records it has read. Before, a pass over the whole trace kept every
//! stack in memory ([`collect_every_stack`]), which grows with the trace's length.
//!
//! Now a second cursor over the same file ([`StackWindow`]), in time order, runs a window of
//! trace time (`-x stackwindow`, [`DEFAULT_WINDOW_NS`] by default) ahead of the walk and feeds
//! the [`StackMatcher`]; the walk asks it for an event's stack as before, and the stacks of the
//! events behind the walk are dropped. What the window does not bound is read whole before the
//! run, in a pass that steps over the other kernel records ([`collect_keys_and_methods`]): the
//! stack key definitions (KeyDelete, KeyRundown: one per distinct stack, and often only in the
//! rundown at the trace's end) and the .NET methods that name JIT-compiled frames (one per
//! method).
//!
//! A part that comes more than the window after its event (a user stack logged when a blocked
//! thread returns to user mode) finds the event fired: the matcher counts the firings that
//! asked for such a stack, the window doubles (up to [`MAX_WINDOW_NS`]) so that the next ones
//! are not lost, and the walk says once, at the end, how many firings lacked a part of their
//! stack and how to widen the window ([`StackWindow::finish`]).
//!
//! The programs that fire for the stacks that belong to no event (`diag:::missed-stack`,
//! `missed-ustack`, `missed-dnet-stack`) need every record's time before the run: they keep the
//! pass over the whole trace (`TraceSource::collect_stacks_with(true)`), as does
//! `-x stackwindow=0`.
//!
//! The mapped file's pages are given back only behind the walk, the slower cursor: the
//! look-ahead keeps them ([`crate::etw::reader::Events::keeping_pages`]).

use crate::etw::decode::Decoder;
use crate::etw::reader::{EtlFile, Events, HookSet};
use crate::etw::record::EventRecord;
use crate::etw::state::StackMatcher;
use crate::providers::etw::dnet::{self, ManagedMethod};

/// How far ahead of the walk, in trace time, the stacks are read unless `-x stackwindow` says.
pub const DEFAULT_WINDOW_NS: u64 = 2_000_000_000;

/// How far a window that found late stacks may grow.
pub const MAX_WINDOW_NS: u64 = 60_000_000_000;

/// How many windows behind the walk it remembers which events asked for their stacks: a part
/// later than that is counted without knowing whether its event fired.
const ASKED_WINDOWS: u64 = 8;

/// The StackWalk events that define a stack key.
const KEY_DELETE: u8 = 35;
const KEY_RUNDOWN: u8 = 36;

/// Feeds one record of a pass in time order to the matcher: StackWalk records, STACK_TRACE
/// extended items, the .NET runtime's events (a ClrStackWalk gives its frames to the event
/// before it on its thread). With `methods`, the .NET methods' loads are collected too; with
/// `note_every`, every other record's time is noted (for the missed-stack tracker).
fn feed(
    m: &mut StackMatcher,
    decoder: &Decoder,
    ev: &EventRecord<'_>,
    methods: Option<&mut Vec<ManagedMethod>>,
    note_every: bool,
) {
    if ev.kernel_group == Some(crate::sources::etl::STACK_WALK) {
        let dec = decoder.decode(ev);
        m.observe(ev, Some(&dec));
        return;
    }
    if note_every {
        m.note_event(ev);
    }
    if dnet::is_dotnet(ev) {
        // the runtime logs an event's managed stack in a ClrStackWalk event after it
        match dnet::clr_stack(ev) {
            Some(frames) => m.stack_of_previous(ev, frames),
            None => {
                m.observe(ev, None);
                m.await_stack(ev);
                if let Some(methods) = methods {
                    note_method(decoder, ev, methods);
                }
            }
        }
    } else if !ev.extended.is_empty() {
        m.observe(ev, None);
    }
}

/// Adds the method a .NET MethodLoadVerbose event (ids 143, 144) describes.
fn note_method(decoder: &Decoder, ev: &EventRecord<'_>, methods: &mut Vec<ManagedMethod>) {
    if matches!(ev.id, 143 | 144) {
        let dec = decoder.decode(ev);
        methods.extend(dnet::managed_method(ev, &dec));
    }
}

/// Every stack of the trace, in one pass before the run: the matcher and the .NET methods.
/// With `missed`, also the stack records that belong to no event (which need every record's
/// time).
pub fn collect_every_stack(file: &EtlFile, missed: bool) -> (StackMatcher, Vec<ManagedMethod>) {
    let mut m = StackMatcher::new();
    if missed {
        m.track_missed();
    }
    let decoder = crate::sources::etl::TraceSource::new_decoder();
    let mut methods = Vec::new();
    let mut it = file.events();
    while let Some(r) = it.next_event() {
        let Ok(ev) = r else { continue };
        feed(&mut m, &decoder, &ev, Some(&mut methods), true);
    }
    m.resolve_missed();
    (m, methods)
}

/// What a windowed walk needs whole before the run, in one pass in time order that steps over
/// every kernel record but the key definitions: a matcher holding the stack key definitions
/// (bounded by the distinct stacks), and the .NET methods (bounded by the methods).
pub fn collect_keys_and_methods(file: &EtlFile) -> (StackMatcher, Vec<ManagedMethod>) {
    let mut m = StackMatcher::new();
    let decoder = crate::sources::etl::TraceSource::new_decoder();
    let mut methods = Vec::new();
    let mut keep = HookSet::default();
    keep.insert(crate::sources::etl::STACK_WALK, KEY_DELETE);
    keep.insert(crate::sources::etl::STACK_WALK, KEY_RUNDOWN);
    let mut it = file.events().kernel_events_only(keep);
    while let Some(r) = it.next_event() {
        let Ok(ev) = r else { continue };
        if ev.kernel_group == Some(crate::sources::etl::STACK_WALK) {
            m.observe(&ev, Some(&decoder.decode(&ev)));
        } else if dnet::is_dotnet(&ev) && dnet::clr_stack(&ev).is_none() {
            note_method(&decoder, &ev, &mut methods);
        }
    }
    m.open_window();
    (m, methods)
}

/// The look-ahead cursor of a windowed walk (see the module's notes).
pub struct StackWindow<'f> {
    events: Events<'f>,
    decoder: Decoder,
    /// How far ahead of the walk it reads, in ns of trace time.
    window_ns: u64,
    /// The window asked for (the window may have grown since).
    asked_ns: u64,
    /// Whether the look-ahead reached the end of the file.
    done: bool,
    /// The time (ns since the trace's start) of the last record read ahead.
    reached: u64,
    /// The walk's time when the matcher last dropped what is behind it.
    evicted_at: u64,
    /// (late firings) when the window last grew.
    late_seen: u64,
    /// The walk's (time, raw timestamp) at each drop, for the last windows: how far back in the
    /// raw clock the events that asked for stacks are remembered.
    marks: std::collections::VecDeque<(u64, i64)>,
}

impl<'f> StackWindow<'f> {
    /// A look-ahead over `file` for the windowed `matcher` (from
    /// [`collect_keys_and_methods`]), reading `window_ns` of trace time ahead of the walk;
    /// `None` when the matcher is not windowed (its stacks were all read before the run).
    pub fn start(
        file: &'f EtlFile,
        matcher: Option<&mut StackMatcher>,
        window_ns: u64,
    ) -> Option<StackWindow<'f>> {
        let m = matcher.filter(|m| m.is_windowed())?;
        // a walk starts at the file's start: what an earlier walk left goes
        m.open_window();
        let window_ns = window_ns.max(1);
        Some(StackWindow {
            // the walk releases the pages behind it; this cursor is ahead of it
            events: file
                .events()
                .kernel_groups_only(&[crate::sources::etl::STACK_WALK])
                .keeping_pages(),
            decoder: crate::sources::etl::TraceSource::new_decoder(),
            window_ns,
            asked_ns: window_ns,
            done: false,
            reached: 0,
            evicted_at: 0,
            late_seen: 0,
            marks: Default::default(),
        })
    }

    /// Before the walk fires the event `ev`: reads the stack records up to a window past it
    /// into the matcher, and drops the stacks of the events behind it.
    pub fn advance(&mut self, ev: &EventRecord<'_>, m: &mut StackMatcher) {
        m.walk_at(ev.raw_timestamp);
        let now = ev.time_ns;
        let until = now.saturating_add(self.window_ns);
        while !self.done && self.reached <= until {
            match self.events.next_event() {
                None => self.done = true,
                Some(Err(_)) => {} // the walk reports the file's damage
                Some(Ok(r)) => {
                    // the records come in time order: a record with a wild time stops the
                    // look-ahead for one step at most
                    self.reached = r.time_ns;
                    feed(m, &self.decoder, &r, None, false);
                }
            }
        }
        let (late, _) = m.late();
        if late > self.late_seen {
            // a stack came later than the window: the next ones of its kind may too
            self.late_seen = late;
            self.window_ns = (self.window_ns.saturating_mul(2)).min(MAX_WINDOW_NS);
        }
        // the matcher's entries go a quarter of a window at a time (a scan of what it holds)
        if now >= self.evicted_at.saturating_add(self.window_ns / 4) {
            self.evicted_at = now;
            // the raw clock's time of the walk some windows ago: the latest mark at or before
            let keep_asked = self.window_ns.saturating_mul(ASKED_WINDOWS);
            let before = now.saturating_sub(keep_asked);
            while self.marks.len() > 1 && self.marks[1].0 <= before {
                self.marks.pop_front();
            }
            let asked_before = match self.marks.front() {
                Some(&(ns, raw)) if ns <= before => raw,
                _ => i64::MIN,
            };
            self.marks.push_back((now, ev.raw_timestamp));
            m.forget_behind(asked_before);
        }
    }

    /// After the walk: what to tell the user when firings lacked a part of their stack that
    /// came more than the window after them.
    pub fn finish(self, m: Option<&StackMatcher>) -> Option<String> {
        let (late, unknown) = m.map_or((0, 0), StackMatcher::late);
        late_message(late, unknown, self.asked_ns, self.window_ns)
    }
}

/// The line said once at the end of a windowed walk whose firings lacked stack parts that came
/// later than the window; `None` when none did.
pub fn late_message(late: u64, unknown: u64, asked_ns: u64, window_ns: u64) -> Option<String> {
    if late == 0 && unknown == 0 {
        return None;
    }
    let mut s = String::new();
    if late > 0 {
        s.push_str(&format!(
            "{late} firing{} lacked a part of {} stack that the trace logged more than {} \
             after the event",
            if late == 1 { "" } else { "s" },
            if late == 1 { "its" } else { "their" },
            seconds(asked_ns)
        ));
    }
    if unknown > 0 {
        if !s.is_empty() {
            s.push_str("; ");
        }
        s.push_str(&format!(
            "{unknown} stack part{} came so long after {} event that whether it fired without \
             {} is not known",
            if unknown == 1 { "" } else { "s" },
            if unknown == 1 { "its" } else { "their" },
            if unknown == 1 { "it" } else { "them" },
        ));
    }
    if window_ns > asked_ns {
        s.push_str(&format!(
            " (the window grew to {} as they came)",
            seconds(window_ns)
        ));
    }
    s.push_str(&format!(
        "; -x stackwindow={} widens the window, -x stackwindow=0 reads every stack before the run",
        seconds(
            window_ns
                .saturating_mul(2)
                .min(MAX_WINDOW_NS)
                .max(window_ns)
        )
    ));
    Some(s)
}

/// `ns` as a time `-x stackwindow` takes (`2s`, `500ms`).
fn seconds(ns: u64) -> String {
    if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_late_stacks_are_said_with_the_way_to_widen_the_window() {
        assert_eq!(late_message(0, 0, 2_000_000_000, 2_000_000_000), None);
        let one = late_message(1, 0, 2_000_000_000, 4_000_000_000).unwrap();
        assert_eq!(
            one,
            "1 firing lacked a part of its stack that the trace logged more than 2s after \
             the event (the window grew to 4s as they came); -x stackwindow=8s widens the \
             window, -x stackwindow=0 reads every stack before the run"
        );
        let both = late_message(3, 2, 500_000_000, 500_000_000).unwrap();
        assert!(
            both.starts_with("3 firings lacked a part of their stack"),
            "{both}"
        );
        assert!(both.contains("2 stack parts came so long after"), "{both}");
        assert!(both.ends_with("-x stackwindow=1s widens the window, -x stackwindow=0 reads every stack before the run"), "{both}");
    }
}
