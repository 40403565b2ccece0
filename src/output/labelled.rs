//! Output shared by the engines of a many-trace run (`-E a.etl -E b.etl`): each file's engine
//! writes through a [`LabelledWriter`] that puts the file's name before every line and hands
//! whole lines to the one output, so the lines of one file keep their order and never mix
//! with another's within a line.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// The run's one output (stdout or `-o` file), shared by every engine.
#[derive(Clone)]
pub struct SharedOutput(Arc<Mutex<Box<dyn Write + Send>>>);

impl SharedOutput {
    pub fn new(out: Box<dyn Write + Send>) -> Self {
        SharedOutput(Arc::new(Mutex::new(out)))
    }

    /// Writes `bytes` in one piece (no other engine's output comes in between).
    fn write_whole(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut out = self.0.lock().unwrap_or_else(|e| e.into_inner());
        out.write_all(bytes)
    }
}

impl Write for SharedOutput {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_whole(buf)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).flush()
    }
}

/// What the engine of one file writes: each line goes out as `label: line`.
pub struct LabelledWriter {
    label: Vec<u8>,
    out: SharedOutput,
    /// Written but not yet handed on: the lines since the last flush, and a line not ended yet.
    pending: Vec<u8>,
}

/// Hand whole lines on without waiting for a flush once this much is pending.
const PENDING_LIMIT: usize = 64 << 10;

impl LabelledWriter {
    /// Lines will read `label: ...`.
    pub fn new(label: &str, out: SharedOutput) -> Self {
        LabelledWriter {
            label: format!("{label}: ").into_bytes(),
            out,
            pending: Vec::new(),
        }
    }

    /// Hands on the complete lines pending (all of it with `partial`), each labelled.
    fn emit(&mut self, partial: bool) -> std::io::Result<()> {
        let end = if partial {
            self.pending.len()
        } else {
            match self.pending.iter().rposition(|&b| b == b'\n') {
                Some(i) => i + 1,
                None => return Ok(()),
            }
        };
        if end == 0 {
            return Ok(());
        }
        let mut text = Vec::with_capacity(end + end / 16);
        for line in self.pending[..end].split_inclusive(|&b| b == b'\n') {
            text.extend_from_slice(&self.label);
            text.extend_from_slice(line);
        }
        self.pending.drain(..end);
        self.out.write_whole(&text)
    }
}

impl Write for LabelledWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        if self.pending.len() >= PENDING_LIMIT {
            self.emit(false)?;
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.emit(false)?;
        self.out.flush()
    }
}

impl Drop for LabelledWriter {
    fn drop(&mut self) {
        // a last line without its newline still goes out, labelled, and ends there: the next
        // file's first line starts a line of its own
        if self.pending.last().is_some_and(|&b| b != b'\n') {
            self.pending.push(b'\n');
        }
        let _ = self.emit(true);
        let _ = self.out.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose bytes a test can read back.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_are_labelled_whole_and_in_order() {
        let sink = Sink::default();
        let out = SharedOutput::new(Box::new(sink.clone()));
        let mut a = LabelledWriter::new("a.etl", out.clone());
        let mut b = LabelledWriter::new("b.etl", out.clone());
        a.write_all(b"one\ntw").unwrap();
        b.write_all(b"x\n").unwrap();
        b.flush().unwrap();
        a.write_all(b"o\n\n").unwrap();
        a.flush().unwrap();
        a.write_all(b"tail").unwrap();
        drop(a);
        drop(b);
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text,
            "b.etl: x\na.etl: one\na.etl: two\na.etl: \na.etl: tail\n"
        );
    }
}
