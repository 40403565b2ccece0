//! Streaming record iteration: in file order, or merged by timestamp across buffers.
//!
//! Buffers are per CPU and records inside one buffer never go back in time, so a k-way merge
//! over buffers gives global order. Buffers are activated in order of their first timestamp, and
//! only when the smallest active head is not older than that, so at any time only the buffers
//! whose time ranges overlap are held (about one per CPU). Uncompressed buffers are borrowed from
//! the file; compressed ones are decompressed into recycled vectors.

use std::cell::Cell;

use super::buffer::{BufferInfo, BUFFER_HEADER_SIZE};
use super::headers::{parse_record, parse_record_into, record_timestamp, Step, StepInto};
use super::{xpress, EtlError, EtlFile, IndexEntry};
use crate::etw::record::EventRecord;

/// One buffer being walked.
struct Cursor {
    /// Index of the buffer in the file's index.
    index: usize,
    /// File offset of the buffer.
    offset: u64,
    /// Decompressed buffer (header copied in front), or empty when the file bytes are used.
    owned: Vec<u8>,
    compressed: bool,
    pos: Cell<usize>,
    /// The timestamp of the record at `pos` once [`Events::head_ts`] has looked (`None`: not
    /// yet), so that a record's timestamp is read once however often the merge asks.
    head: Cell<Option<Option<i64>>>,
    end: usize,
    /// Bytes of the buffer missing from the file (truncated last buffer); reported at the end.
    truncated: Cell<Option<String>>,
    /// File offset and length of the buffer bytes (uncompressed buffers).
    range: (usize, usize),
    cpu: u16,
}

/// Iterates the records of an [`EtlFile`]. Records borrow from the iterator (decompressed
/// buffers are reused), so this is a lending iterator: use `while let Some(r) = it.next_event()`.
pub struct Events<'f> {
    file: &'f EtlFile,
    merged: bool,
    /// Index entries in activation order (first timestamp order when merged, else file order).
    order: Vec<u32>,
    next_pending: usize,
    slots: Vec<Option<Cursor>>,
    free_vecs: Vec<Vec<u8>>,
    /// (next timestamp, buffer index, slot) of every active cursor except `current`: a few
    /// (about one per CPU), so a scan for the smallest beats a heap.
    heap: Vec<(i64, usize, usize)>,
    current: Option<usize>,
    /// A slot whose record was handed out last and must be released on the next call.
    release: Option<usize>,
    /// While `current` is set: the earliest timestamp any other buffer can deliver.
    limit: i64,
    header_error_pending: bool,
    /// Step over kernel (system/compact/perfinfo) records without delivering them.
    skip_kernel: bool,
    /// The kernel events (by HookId) delivered even when `skip_kernel` is set.
    keep: Option<Box<HookSet>>,
    /// The latest raw timestamp of the kernel records stepped over (`i64::MIN`: none), kept
    /// when `track_skipped` is set.
    skipped_until: Cell<i64>,
    track_skipped: bool,
    /// The kernel events (by HookId) of the records stepped over, when asked for
    /// ([`Events::with_census`]).
    census: Option<Box<std::cell::RefCell<HookSet>>>,
    /// Whether the pages of the buffers behind this walk are given back
    /// ([`EtlFile::done_with`]); not for a look-ahead that another walk follows.
    release_pages: bool,
}

/// A set of kernel events by HookId (`group << 8 | opcode`): one bit each, 8 KB.
#[derive(Clone)]
pub struct HookSet(Box<[u64; 1024]>);

impl std::fmt::Debug for HookSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n: u32 = self.0.iter().map(|w| w.count_ones()).sum();
        write!(f, "HookSet({n} events)")
    }
}

impl Default for HookSet {
    fn default() -> Self {
        HookSet(Box::new([0; 1024]))
    }
}

impl HookSet {
    /// Adds the event `opcode` of kernel group `group`.
    pub fn insert(&mut self, group: u8, opcode: u8) {
        let hook = (group as usize) << 8 | opcode as usize;
        self.0[hook >> 6] |= 1 << (hook & 63);
    }

    /// Adds the kernel event with this HookId (`group << 8 | opcode`).
    pub fn insert_hook(&mut self, hook: u16) {
        self.0[hook as usize >> 6] |= 1 << (hook & 63);
    }

    /// The HookIds in the set, in order.
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        self.0.iter().enumerate().flat_map(|(w, &bits)| {
            (0..64u16)
                .filter(move |b| bits >> b & 1 == 1)
                .map(move |b| (w as u16) << 6 | b)
        })
    }

    /// Adds every event of `other`.
    pub fn union(&mut self, other: &HookSet) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a |= b;
        }
    }

    /// Adds every event of kernel group `group`.
    pub fn insert_group(&mut self, group: u8) {
        let at = (group as usize) << 2;
        self.0[at..at + 4].fill(u64::MAX);
    }

    /// Whether the set holds the kernel event with this HookId.
    #[inline(always)]
    pub fn contains(&self, hook: u16) -> bool {
        self.0[hook as usize >> 6] >> (hook & 63) & 1 == 1
    }
}

impl<'f> Events<'f> {
    pub(crate) fn new(file: &'f EtlFile, merged: bool) -> Events<'f> {
        let mut order: Vec<u32> = (0..file.index.len() as u32).collect();
        if merged {
            order.sort_by_key(|&i| (file.index[i as usize].sort_ts, i));
        }
        Events {
            file,
            merged,
            order,
            next_pending: 0,
            slots: Vec::new(),
            free_vecs: Vec::new(),
            heap: Vec::new(),
            current: None,
            release: None,
            limit: i64::MIN,
            header_error_pending: file.header_error.is_some(),
            skip_kernel: false,
            keep: None,
            skipped_until: Cell::new(i64::MIN),
            track_skipped: false,
            census: None,
            release_pages: true,
        }
    }

    /// Keeps the pages of the buffers this walk is done with: for a cursor that runs ahead of
    /// another walk over the same file (the stacks read a window ahead), so that the pages are
    /// given back once, behind the slower one, not faulted in again for it.
    pub fn keeping_pages(mut self) -> Self {
        self.release_pages = false;
        self
    }

    /// Leaves out the kernel (system/compact/perfinfo) records but those of these groups: the
    /// others are stepped over by their size, never built (a pass over the Process and Thread
    /// records alone). Damaged records are still reported.
    pub fn kernel_groups_only(mut self, groups: &[u8]) -> Self {
        let mut keep = HookSet::default();
        for &g in groups {
            keep.insert_group(g);
        }
        self.skip_kernel = true;
        self.keep = Some(Box::new(keep));
        self
    }

    /// Leaves out the kernel records but those of the events in `keep`: a walk for a program
    /// that reads a few kinds of kernel event steps over the others (their headers are read
    /// for their size and timestamp, nothing more).
    pub fn kernel_events_only(mut self, keep: HookSet) -> Self {
        self.skip_kernel = true;
        self.keep = Some(Box::new(keep));
        self.track_skipped = true;
        self
    }

    /// Notes which kernel events the records stepped over are (see [`Events::census`]).
    pub fn with_census(mut self) -> Self {
        self.census = Some(Default::default());
        self
    }

    /// The kernel events (by HookId) of the records stepped over so far, with
    /// [`Events::with_census`]: with those delivered, every kernel event the trace holds.
    pub fn census(&self) -> Option<HookSet> {
        self.census.as_ref().map(|c| c.borrow().clone())
    }

    /// The latest raw timestamp of the kernel records stepped over so far by a walk of
    /// [`Events::kernel_events_only`], if any was: with the records delivered, where the
    /// trace's time has got to.
    pub fn skipped_until(&self) -> Option<i64> {
        let t = self.skipped_until.get();
        (t != i64::MIN).then_some(t)
    }

    /// Whether the kernel record at `pos` is one [`Events::kernel_events_only`] keeps.
    #[inline]
    fn keeps(&self, b: &[u8], pos: usize) -> bool {
        self.keep
            .as_ref()
            .is_some_and(|k| super::bytes::u16_at(b, pos + 6).is_some_and(|hook| k.contains(hook)))
    }

    fn error(&self, offset: u64, message: String) -> EtlError {
        EtlError {
            file: self.file.name.clone(),
            offset,
            message,
        }
    }

    fn pending_ts(&self) -> Option<i64> {
        let &i = self.order.get(self.next_pending)?;
        Some(self.file.index[i as usize].sort_ts)
    }

    /// In one scan: the index in `heap` of the earliest waiting cursor, its timestamp, and the
    /// earliest timestamp of the others (`i64::MAX` when there are none).
    #[inline]
    fn heap_min_and_next(&self) -> Option<(usize, i64, i64)> {
        let mut best: Option<(usize, (i64, usize))> = None;
        let mut next = i64::MAX;
        for (i, &(ts, idx, _)) in self.heap.iter().enumerate() {
            match best {
                Some((_, b)) if (ts, idx) >= b => next = next.min(ts),
                _ => {
                    if let Some((_, (bts, _))) = best {
                        next = next.min(bts);
                    }
                    best = Some((i, (ts, idx)));
                }
            }
        }
        best.map(|(i, (ts, _))| (i, ts, next))
    }

    fn free_slot(&mut self, slot: usize) {
        if let Some(c) = self.slots.get_mut(slot).and_then(Option::take) {
            // the buffer is behind the walk: its pages of the mapped file can go
            if self.release_pages {
                self.file.done_with(c.range.0, c.range.1);
            }
            if c.owned.capacity() > 0 {
                self.free_vecs.push(c.owned);
            }
        }
    }

    /// Opens the buffer at `index`; Err for buffers that cannot be read at all.
    fn activate(&mut self, index: usize) -> Result<Option<usize>, EtlError> {
        let info: BufferInfo = match &self.file.index[index].entry {
            IndexEntry::Damage { offset, message } => {
                return Err(self.error(*offset, message.clone()))
            }
            IndexEntry::Buffer(b) => *b,
        };
        let file: &'f EtlFile = self.file;
        let data = file.bytes();
        let start = info.offset as usize;
        let raw = data
            .get(start..start + info.available as usize)
            .unwrap_or(&[]);
        let h = info.header;
        let filled = h.filled as usize;
        let mut cursor = Cursor {
            index,
            offset: info.offset,
            owned: Vec::new(),
            compressed: h.is_compressed(),
            pos: Cell::new(BUFFER_HEADER_SIZE),
            head: Cell::new(None),
            end: 0,
            truncated: Cell::new(None),
            range: (start, raw.len()),
            cpu: h.processor,
        };
        if h.is_compressed() {
            let mut out = self.free_vecs.pop().unwrap_or_default();
            let want = filled.saturating_sub(BUFFER_HEADER_SIZE);
            let input = raw.get(BUFFER_HEADER_SIZE..).unwrap_or(&[]);
            let mut body = std::mem::take(&mut out);
            let res = xpress::decompress_into(input, &mut body, want);
            out.clear();
            out.extend_from_slice(raw.get(..BUFFER_HEADER_SIZE).unwrap_or(&[]));
            out.extend_from_slice(&body);
            self.free_vecs.push(body);
            if let Err(e) = res {
                self.free_vecs.push(out);
                return Err(self.error(
                    info.offset,
                    format!("compressed buffer does not decompress: {e}"),
                ));
            }
            if out.len() < filled {
                let msg = format!(
                    "compressed buffer decompresses to {:#x} bytes, header says {:#x}{}",
                    out.len(),
                    filled,
                    if info.truncated() {
                        " (file truncated)"
                    } else {
                        ""
                    }
                );
                cursor.truncated.set(Some(msg));
            }
            cursor.end = out.len().min(filled);
            cursor.owned = out;
        } else {
            cursor.end = filled.min(raw.len());
            if info.truncated() && filled > raw.len() {
                cursor.truncated.set(Some(format!(
                    "buffer truncated: the file ends {:#x} bytes into a buffer of {:#x} ({:#x} filled)",
                    raw.len(),
                    h.buffer_size,
                    filled
                )));
            }
        }
        let slot = match self.slots.iter().position(Option::is_none) {
            Some(s) => s,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        self.slots[slot] = Some(cursor);
        Ok(Some(slot))
    }

    /// Timestamp of the next record of a cursor: None at its end; damaged records and a pending
    /// truncation report sort first.
    #[inline(always)]
    fn head_ts(&self, slot: usize) -> Option<i64> {
        let c = self.slots.get(slot)?.as_ref()?;
        if let Some(known) = c.head.get() {
            return known;
        }
        let head = self.look_ahead(c);
        c.head.set(Some(head));
        head
    }

    /// What [`Events::head_ts`] caches.
    fn look_ahead(&self, c: &Cursor) -> Option<i64> {
        self.look_ahead_in(c, bytes_of(self.file, c))
    }

    /// [`Events::look_ahead`] over the cursor's bytes `b`.
    #[inline(always)]
    fn look_ahead_in(&self, c: &Cursor, b: &[u8]) -> Option<i64> {
        let mut pos = c.pos.get();
        if self.skip_kernel {
            let mut last = None;
            while pos < c.end {
                match super::headers::skip_kernel_record(b, pos, c.end) {
                    Some(next) if !self.keeps(b, pos) => {
                        if let Some(c) = &self.census {
                            if let Some(hook) = super::bytes::u16_at(b, pos + 6) {
                                c.borrow_mut().insert_hook(hook);
                            }
                        }
                        last = Some(pos);
                        pos = next
                    }
                    _ => break,
                }
            }
            // a buffer's records never go back in time: its last one stepped over is its latest
            if let Some(ts) = last
                .filter(|_| self.track_skipped)
                .and_then(|at| record_timestamp(b, at))
            {
                if ts > self.skipped_until.get() {
                    self.skipped_until.set(ts);
                }
            }
            c.pos.set(pos);
        }
        if pos < c.end {
            if let Some(ts) = record_timestamp(b, pos) {
                return Some(ts);
            }
            if super::bytes::u32_at(b, pos) != Some(0xFFFF_FFFF) {
                // damage sorts first, to be reported
                return Some(i64::MIN);
            }
        }
        let t = c.truncated.take();
        let some = t.is_some();
        c.truncated.set(t);
        if some {
            Some(i64::MIN)
        } else {
            None
        }
    }

    fn park(&mut self, slot: usize) {
        match self.head_ts(slot) {
            Some(ts) => {
                let idx = self.slots[slot].as_ref().map(|c| c.index).unwrap_or(0);
                self.heap.push((ts, idx, slot));
            }
            None => self.free_slot(slot),
        }
    }

    /// The next record (or error), in the order chosen at creation.
    #[allow(clippy::should_implement_trait)]
    pub fn next_event(&mut self) -> Option<Result<EventRecord<'_>, EtlError>> {
        match self.next_slot()? {
            Ok(slot) => self.read_from(slot),
            Err(e) => Some(Err(e)),
        }
    }

    /// [`Events::next_event`] into `out`, a [`blank_record`] (of any CPU) the caller made for
    /// it: the record is built where the caller reads it, not moved out through each layer
    /// (a record is about 160 bytes; each move was a copy of them, four per record). `out` is
    /// left as it was at the end or an error.
    pub fn next_into<'s>(&'s mut self, out: &mut EventRecord<'s>) -> Option<Result<(), EtlError>> {
        match self.next_slot()? {
            Ok(slot) => self.read_into(slot, out),
            Err(e) => Some(Err(e)),
        }
    }

    /// The slot of the cursor whose record comes next, or an error to hand out first.
    #[inline(always)]
    fn next_slot(&mut self) -> Option<Result<usize, EtlError>> {
        if let Some(slot) = self.release.take() {
            self.free_slot(slot);
        }
        if self.header_error_pending {
            self.header_error_pending = false;
            if let Some(e) = self.file.header_error.clone() {
                return Some(Err(e));
            }
        }
        // Fast path: the current buffer's next record is still the earliest.
        if let Some(cur) = self.current {
            if let Some(ts) = self.head_ts(cur) {
                if !self.merged || ts <= self.limit {
                    return Some(Ok(cur));
                }
            }
        }
        let slot = loop {
            // Choose the cursor to read from.
            if let Some(cur) = self.current {
                match self.head_ts(cur) {
                    None => {
                        self.free_slot(cur);
                        self.current = None;
                    }
                    Some(ts) if !self.merged || ts <= self.limit => break cur,
                    Some(_) => {
                        self.current = None;
                        self.park(cur);
                    }
                }
                continue;
            }
            let best = self.heap_min_and_next();
            // Activate buffers that may hold the next record.
            if let Some(pts) = self.pending_ts() {
                let take = if self.merged {
                    best.is_none_or(|(_, h, _)| pts <= h)
                } else {
                    best.is_none()
                };
                if take {
                    let index = self.order[self.next_pending] as usize;
                    self.next_pending += 1;
                    match self.activate(index) {
                        Err(e) => return Some(Err(e)),
                        Ok(Some(slot)) => self.park(slot),
                        Ok(None) => {}
                    }
                    continue;
                }
            }
            let (i, _, others) = best?;
            let (_, _, slot) = self.heap.swap_remove(i);
            self.current = Some(slot);
            self.limit = others.min(self.pending_ts().unwrap_or(i64::MAX));
        };
        Some(Ok(slot))
    }

    #[inline(always)]
    fn read_from(&mut self, slot: usize) -> Option<Result<EventRecord<'_>, EtlError>> {
        let file: &'f EtlFile = self.file;
        let c = self.slots.get(slot)?.as_ref()?;
        let pos = c.pos.get();
        let b = bytes_of(file, c);
        let step = parse_record(b, pos, c.end, c.cpu, &file.time);
        let (msg, at) = match step {
            Step::Record(r, next) => {
                prefetch(b, next + PREFETCH_AHEAD);
                c.pos.set(next);
                // the next record's timestamp, which the merge asks for next
                c.head.set(Some(self.look_ahead_in(c, b)));
                return Some(Ok(r));
            }
            // The end of a truncated buffer: report where the data stops.
            Step::End => (
                c.truncated
                    .take()
                    .unwrap_or_else(|| "unexpected end of buffer".to_string()),
                c.end,
            ),
            Step::Error(e) => match c.truncated.take() {
                Some(t) => (format!("{e} ({t})"), pos),
                None => (e, pos),
            },
        };
        let e = stop_at(file, c, msg, at);
        self.current = None;
        self.release = Some(slot);
        Some(Err(e))
    }

    /// [`Events::read_from`] into `out` (see [`Events::next_into`]).
    #[inline(always)]
    fn read_into<'s>(
        &'s mut self,
        slot: usize,
        out: &mut EventRecord<'s>,
    ) -> Option<Result<(), EtlError>> {
        let file: &'f EtlFile = self.file;
        let c = self.slots.get(slot)?.as_ref()?;
        let pos = c.pos.get();
        let b = bytes_of(file, c);
        out.cpu = c.cpu;
        let step = parse_record_into(b, pos, c.end, &file.time, out);
        let (msg, at) = match step {
            StepInto::Record(next) => {
                prefetch(b, next + PREFETCH_AHEAD);
                c.pos.set(next);
                // the next record's timestamp, which the merge asks for next
                c.head.set(Some(self.look_ahead_in(c, b)));
                return Some(Ok(()));
            }
            // The end of a truncated buffer: report where the data stops.
            StepInto::End => (
                c.truncated
                    .take()
                    .unwrap_or_else(|| "unexpected end of buffer".to_string()),
                c.end,
            ),
            StepInto::Error(e) => match c.truncated.take() {
                Some(t) => (format!("{e} ({t})"), pos),
                None => (e, pos),
            },
        };
        let e = stop_at(file, c, msg, at);
        self.current = None;
        self.release = Some(slot);
        Some(Err(e))
    }
}

/// Ends cursor `c` at a damaged record or a truncated buffer's end (`at`, an offset in the
/// buffer): the error to report.
#[cold]
fn stop_at(file: &EtlFile, c: &Cursor, msg: String, at: usize) -> EtlError {
    c.pos.set(c.end);
    c.head.set(None);
    let (offset, message) = if c.compressed {
        (
            c.offset,
            format!("at uncompressed offset {at:#x} of this buffer: {msg}"),
        )
    } else {
        (c.offset + at as u64, msg)
    };
    EtlError {
        file: file.name.clone(),
        offset,
        message,
    }
}

/// How far ahead of the record being read the walk asks for the buffer's bytes: the merge
/// hops between a few buffers, and the hardware prefetcher alone leaves the walk waiting on
/// memory at each record header.
const PREFETCH_AHEAD: usize = 384;

/// Asks the CPU to start loading the cache line at `at` (a hint: no effect on results).
#[inline(always)]
fn prefetch(b: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if at < b.len() {
        // SAFETY: the address is inside `b`; a prefetch reads nothing architecturally.
        unsafe {
            std::arch::x86_64::_mm_prefetch(
                b.as_ptr().add(at) as *const i8,
                std::arch::x86_64::_MM_HINT_T0,
            )
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (b, at);
}

fn bytes_of<'a>(file: &'a EtlFile, c: &'a Cursor) -> &'a [u8] {
    if c.compressed {
        &c.owned
    } else {
        file.bytes()
            .get(c.range.0..c.range.0 + c.range.1)
            .unwrap_or(&[])
    }
}
