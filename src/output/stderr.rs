//! Where dtx's own lines go: errors on enabled probes, drops, notes and warnings of the sources.
//! They are written to stderr, as dtrace writes them, except while the console runs: writing to
//! the terminal under a full-screen interface would tear its screen and the line would be lost
//! at the next redraw. The console captures them ([`capture`]) and shows each in its output
//! pane ([`take`]); what it has not taken when it ends goes to stderr then. While a console
//! session runs a program, the lines go into the program's output stream instead ([`route`]),
//! each marked with [`MARK`], so that they sit among the program's lines in the order they were
//! said, as a terminal shows stderr among stdout.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::Mutex;

/// Lines held for the console at most; older ones are dropped (and counted).
const MAX_HELD: usize = 10_000;

#[derive(Default)]
struct Held {
    lines: VecDeque<String>,
    dropped: u64,
}

/// The lines held while capturing (`None` when not).
struct Sink(Mutex<Option<Held>>);

/// dtx's one sink.
static SINK: Sink = Sink(Mutex::new(None));

/// Where captured lines go instead of being held, while a console session runs a program.
type Route = Box<dyn FnMut(&str) + Send>;

static ROUTE: Mutex<Option<Route>> = Mutex::new(None);

/// The first character of a line dtx said, put into a console session's output stream.
pub const MARK: char = '\u{1}';

impl Sink {
    fn held(&self) -> std::sync::MutexGuard<'_, Option<Held>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Holds `text`'s lines when capturing (or hands them to `route`); else gives it back.
    fn hold<'t>(&self, text: &'t str, route: &Mutex<Option<Route>>) -> Option<&'t str> {
        let mut h = self.held();
        let Some(h) = h.as_mut() else {
            return Some(text);
        };
        if let Some(r) = route.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            for line in text.lines() {
                r(line);
            }
            return None;
        }
        for line in text.lines() {
            if h.lines.len() == MAX_HELD {
                h.lines.pop_front();
                h.dropped += 1;
            }
            h.lines.push_back(line.to_string());
        }
        None
    }

    fn capture(&'static self) -> Capture {
        self.held().get_or_insert_with(Held::default);
        Capture(self)
    }

    fn take(&self) -> (Vec<String>, u64) {
        match self.held().as_mut() {
            Some(h) => (h.lines.drain(..).collect(), std::mem::take(&mut h.dropped)),
            None => (Vec::new(), 0),
        }
    }

    /// Stops capturing: the lines not taken, and how many were dropped.
    fn release(&self) -> Option<Held> {
        self.held().take()
    }
}

/// Writes `text` (one or more lines, each ending in a newline; one is added where the last
/// does not) to stderr, or holds its lines for the console while it captures.
pub fn write(text: &str) {
    if text.is_empty() {
        return;
    }
    if let Some(text) = SINK.hold(text, &ROUTE) {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(text.as_bytes());
        if !text.ends_with('\n') {
            let _ = err.write_all(b"\n");
        }
    }
}

/// The status text of long work (symbol downloads), for the console's status line.
static STATUS: Mutex<Option<String>> = Mutex::new(None);

/// Shows `text` as the status of long work, or takes it away (`None`): while the console
/// captures, the console's status line shows it ([`status_text`]); else, only when stderr is a
/// terminal, it is one line rewritten in place (a file or a pipe never gets it).
pub fn status(text: Option<&str>) {
    *STATUS.lock().unwrap_or_else(|e| e.into_inner()) = text.map(str::to_string);
    if SINK.held().is_some() {
        return;
    }
    use std::io::IsTerminal;
    let mut err = std::io::stderr().lock();
    if !err.is_terminal() {
        return;
    }
    let _ = match text {
        Some(t) => write!(err, "\r{t}\x1b[K"),
        None => write!(err, "\r\x1b[K"),
    };
    let _ = err.flush();
}

/// The status of long work being done, if any (see [`status`]).
pub fn status_text() -> Option<String> {
    STATUS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Writes one line, `{prog}: {line}`, `prog` being the program's name (`dtx`).
pub fn say(prog: &str, line: impl std::fmt::Display) {
    write(&format!("{prog}: {line}\n"));
}

/// While the returned guard lives, lines are held for [`take`] instead of written. Dropping it
/// writes what was not taken to stderr (the console has given the terminal back by then).
#[must_use = "lines are captured only while the guard lives"]
pub fn capture() -> Capture {
    SINK.capture()
}

/// The lines held since the last call, oldest first, and how many were dropped because the
/// console did not take them in time.
pub fn take() -> (Vec<String>, u64) {
    SINK.take()
}

/// While the returned guard lives and the console captures, each line goes to `to` (a console
/// session puts it into its program's output stream) instead of being held.
#[must_use = "lines are routed only while the guard lives"]
pub fn route(to: Route) -> Routed {
    *ROUTE.lock().unwrap_or_else(|e| e.into_inner()) = Some(to);
    Routed(())
}

/// Routes dtx's lines; see [`route`].
pub struct Routed(());

impl Drop for Routed {
    fn drop(&mut self) {
        ROUTE.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// Holds dtx's lines for the console; see [`capture`].
pub struct Capture(&'static Sink);

impl Drop for Capture {
    fn drop(&mut self) {
        if let Some(h) = self.0.release() {
            let mut err = std::io::stderr().lock();
            if h.dropped > 0 {
                let _ = writeln!(err, "dtx: {} earlier messages were dropped", h.dropped);
            }
            for l in h.lines {
                let _ = writeln!(err, "{l}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_lines_are_held_in_order_and_bounded() {
        // a sink of the test's own: other tests write to dtx's
        let sink: &'static Sink = Box::leak(Box::new(Sink(Mutex::new(None))));
        let none = Mutex::new(None);
        assert_eq!(sink.hold("not capturing\n", &none), Some("not capturing\n"));
        let guard = sink.capture();
        assert_eq!(sink.hold("first\nsecond\n", &none), None);
        let _ = sink.hold("no newline", &none);
        let (lines, dropped) = sink.take();
        assert_eq!(lines, ["first", "second", "no newline"]);
        assert_eq!(dropped, 0);
        assert!(sink.take().0.is_empty());
        for i in 0..MAX_HELD + 3 {
            let _ = sink.hold(&format!("{i}\n"), &none);
        }
        let (lines, dropped) = sink.take();
        assert_eq!((lines.len(), dropped), (MAX_HELD, 3));
        assert_eq!(lines[0], "3");
        // routed: each line to the route, none held
        let routed = std::sync::Arc::new(Mutex::new(Vec::new()));
        let to = routed.clone();
        let route: Mutex<Option<Route>> = Mutex::new(Some(Box::new(move |l: &str| {
            to.lock().unwrap().push(l.to_string())
        })));
        assert_eq!(sink.hold("a\nb\n", &route), None);
        assert_eq!(*routed.lock().unwrap(), ["a", "b"]);
        assert!(sink.take().0.is_empty());
        let _ = sink.hold("left\n", &none);
        drop(guard);
        // the guard gave up what was not taken, and the sink holds nothing more
        assert!(sink.release().is_none());
        assert_eq!(sink.hold("after\n", &none), Some("after\n"));
        // not capturing, a route takes nothing: the line is written
        assert_eq!(sink.hold("after\n", &route), Some("after\n"));
    }
}
