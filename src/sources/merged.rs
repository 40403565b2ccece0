//! Several live sources as one: a traced process (`pid` probes) together with the kernel's
//! events (`syscall`, `sched`, ...) in one run. Each source is pumped in turn for a short
//! slice, so none waits on another for longer than [`SLICE_NS`]; the run ends when any source
//! ends (a `-c` target that exits ends the run, as in dtrace).

use crate::sources::sink::{EventSource, Sink, SourceState};

/// The longest one source is pumped while another may have events waiting.
pub const SLICE_NS: u64 = 5_000_000;

pub struct MergedSource {
    sources: Vec<Box<dyn EventSource>>,
}

impl MergedSource {
    pub fn new(sources: Vec<Box<dyn EventSource>>) -> Self {
        MergedSource { sources }
    }

    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    pub fn len(&self) -> usize {
        self.sources.len()
    }

    /// The one source itself when there is only one, else the merge; `None` when empty.
    pub fn simplify(mut self) -> Option<Box<dyn EventSource>> {
        match self.sources.len() {
            0 => None,
            1 => self.sources.pop(),
            _ => Some(Box::new(self)),
        }
    }
}

/// Pumps `sources` in turn, each for a slice of at most [`SLICE_NS`], until `deadline`; the
/// first that ends ends the whole.
pub fn pump_all(
    sources: &mut [&mut (dyn EventSource + 'static)],
    deadline: u64,
    sink: &mut dyn Sink,
) -> SourceState {
    if let [one] = sources {
        return one.pump(deadline, sink);
    }
    loop {
        for s in sources.iter_mut() {
            let slice = sink.now_ns().saturating_add(SLICE_NS).min(deadline);
            if let SourceState::Ended(status) = s.pump(slice, sink) {
                return SourceState::Ended(status);
            }
            if sink.done() {
                return SourceState::Running;
            }
        }
        if sink.now_ns() >= deadline {
            return SourceState::Running;
        }
    }
}

impl EventSource for MergedSource {
    fn pump(&mut self, deadline: u64, sink: &mut dyn Sink) -> SourceState {
        let mut all: Vec<&mut (dyn EventSource + 'static)> =
            self.sources.iter_mut().map(|b| &mut **b).collect();
        pump_all(&mut all, deadline, sink)
    }

    fn finish(&mut self, sink: &mut dyn Sink) {
        for s in self.sources.iter_mut() {
            s.finish(sink);
        }
    }

    fn stop(&mut self) {
        for s in self.sources.iter_mut() {
            s.stop();
        }
    }

    fn closing(&mut self, sink: &mut dyn Sink) {
        for s in self.sources.iter_mut() {
            s.closing(sink);
        }
    }

    fn name_frames(&mut self, sink: &mut dyn Sink) {
        for s in self.sources.iter_mut() {
            s.name_frames(sink);
        }
    }

    fn live_status(&mut self) -> Option<crate::sources::sink::LiveStatus> {
        let mut all: Option<crate::sources::sink::LiveStatus> = None;
        for s in self.sources.iter_mut() {
            if let Some(st) = s.live_status() {
                all.get_or_insert_with(Default::default).merge(st);
            }
        }
        all
    }
}

/// A source also held elsewhere: merged into a run while its owner keeps a handle to it (to
/// report what it counted after the run).
pub struct Shared<S>(pub std::rc::Rc<std::cell::RefCell<S>>);

impl<S: EventSource> EventSource for Shared<S> {
    fn pump(&mut self, deadline: u64, sink: &mut dyn Sink) -> SourceState {
        self.0.borrow_mut().pump(deadline, sink)
    }
    fn finish(&mut self, sink: &mut dyn Sink) {
        self.0.borrow_mut().finish(sink)
    }
    fn stop(&mut self) {
        self.0.borrow_mut().stop()
    }
    fn closing(&mut self, sink: &mut dyn Sink) {
        self.0.borrow_mut().closing(sink)
    }
    fn name_frames(&mut self, sink: &mut dyn Sink) {
        self.0.borrow_mut().name_frames(sink)
    }
    fn reprogram(&mut self, sink: &mut dyn Sink) -> Option<Result<Vec<String>, String>> {
        self.0.borrow_mut().reprogram(sink)
    }
    fn live_status(&mut self) -> Option<crate::sources::sink::LiveStatus> {
        self.0.borrow_mut().live_status()
    }
    fn symbols(&mut self) -> Option<Box<dyn crate::agg::SymbolResolver + Send>> {
        self.0.borrow_mut().symbols()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::sink::ClockSink;

    /// A source that records its pumps and ends after `ends_after` of them.
    struct Counting {
        pumps: std::rc::Rc<std::cell::Cell<u32>>,
        ends_after: Option<u32>,
        stopped: std::rc::Rc<std::cell::Cell<bool>>,
    }

    impl EventSource for Counting {
        fn pump(&mut self, deadline: u64, sink: &mut dyn Sink) -> SourceState {
            self.pumps.set(self.pumps.get() + 1);
            if Some(self.pumps.get()) == self.ends_after {
                return SourceState::Ended(Some(3));
            }
            // wait out the slice, as a source with nothing to deliver does
            while sink.now_ns() < deadline {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            SourceState::Running
        }
        fn stop(&mut self) {
            self.stopped.set(true);
        }
    }

    fn counting(ends_after: Option<u32>) -> (Counting, std::rc::Rc<std::cell::Cell<u32>>) {
        let pumps = std::rc::Rc::new(std::cell::Cell::new(0));
        (
            Counting {
                pumps: pumps.clone(),
                ends_after,
                stopped: Default::default(),
            },
            pumps,
        )
    }

    #[test]
    fn every_source_gets_turns_and_the_first_end_ends_the_run() {
        let mut sink = ClockSink::new();
        let (a, pa) = counting(None);
        let (b, pb) = counting(Some(4));
        let sa = a.stopped.clone();
        let mut m = MergedSource::new(vec![Box::new(a), Box::new(b)]);
        let far = sink.now_ns() + 10_000_000_000;
        assert_eq!(m.pump(far, &mut sink), SourceState::Ended(Some(3)));
        assert_eq!(pb.get(), 4);
        // a got its slice before each of b's pumps
        assert_eq!(pa.get(), 4);
        m.stop();
        assert!(sa.get());
    }

    #[test]
    fn a_pump_returns_at_its_deadline() {
        let mut sink = ClockSink::new();
        let (a, _) = counting(None);
        let (b, _) = counting(None);
        let mut m = MergedSource::new(vec![Box::new(a), Box::new(b)]);
        let start = sink.now_ns();
        assert_eq!(m.pump(start + 20_000_000, &mut sink), SourceState::Running);
        assert!(sink.now_ns() >= start + 20_000_000);
        assert!(m.simplify().is_some());
        assert!(MergedSource::new(Vec::new()).simplify().is_none());
    }
}
