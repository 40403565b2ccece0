//! Speculative tracing: `speculation()` hands out one of `nspec` buffers; `speculate(id)` sends
//! a clause's records to it; `commit(id)` releases them to the output, `discard(id)` drops them.

use super::record::Record;

#[derive(Default)]
pub struct Speculations {
    buffers: Vec<Buffer>,
    specsize: usize,
    /// `speculation()` found every buffer in use.
    pub unavail_drops: u64,
    /// `speculation()` found only buffers still being committed.
    pub busy_drops: u64,
    /// A record did not fit in its speculative buffer.
    pub drops: u64,
    /// Some buffer was committed or discarded during this firing.
    closing: bool,
}

#[derive(Default)]
struct Buffer {
    active: bool,
    records: Vec<(u32, Record)>,
    /// Bytes of the buffer the speculated ECBs keep (its offset).
    bytes: usize,
    /// Set by commit/discard: the buffer is freed at the end of the firing.
    closing: bool,
}

impl Speculations {
    pub fn new(nspec: usize, specsize: usize) -> Self {
        Speculations {
            buffers: (0..nspec).map(|_| Buffer::default()).collect(),
            specsize,
            unavail_drops: 0,
            busy_drops: 0,
            drops: 0,
            closing: false,
        }
    }

    /// `speculation()`: a free buffer's id (1-based), or 0.
    pub fn allocate(&mut self) -> u64 {
        let busy = self.buffers.iter().any(|b| b.closing);
        for (i, b) in self.buffers.iter_mut().enumerate() {
            if !b.active {
                b.active = true;
                b.records.clear();
                b.bytes = 0;
                b.closing = false;
                return i as u64 + 1;
            }
        }
        if busy {
            self.busy_drops += 1;
        } else {
            self.unavail_drops += 1;
        }
        0
    }

    #[cfg(test)]
    pub fn is_active(&self, id: u64) -> bool {
        id >= 1
            && self
                .buffers
                .get(id as usize - 1)
                .is_some_and(|b| b.active && !b.closing)
    }

    /// `speculate(id)` in a clause whose ECB needs `ecb.needed` bytes: reserves them in the
    /// buffer as `dtrace_buffer_reserve()` does (aligned, within `specsize` rounded down to 8
    /// bytes) and keeps `ecb.size` of them. `false` when the firing is dropped: no such buffer
    /// or one not active (not counted: dtrace's `dtrace_speculation_buffer()` gives none, and
    /// the illegal-operation flag it raises for an id past the last buffer is lost with the
    /// dropped firing), or no room (a speculative drop).
    pub fn reserve(&mut self, id: u64, ecb: super::ecb::EcbSize) -> bool {
        let limit = self.specsize & !7;
        let Some(b) = id
            .checked_sub(1)
            .and_then(|i| self.buffers.get_mut(i as usize))
        else {
            return false;
        };
        if !b.active || b.closing {
            return false;
        }
        let offs = b.bytes.next_multiple_of(ecb.align);
        if offs + ecb.needed > limit {
            self.drops += 1;
            return false;
        }
        b.bytes = offs + ecb.size;
        true
    }

    /// Appends a record of a clause that reserved its room with [`Speculations::reserve`].
    pub fn push(&mut self, id: u64, rec: (u32, Record)) {
        if let Some(b) = id
            .checked_sub(1)
            .and_then(|i| self.buffers.get_mut(i as usize))
        {
            if b.active && !b.closing {
                b.records.push(rec);
            }
        }
    }

    /// `commit(id)`: the records to output now.
    pub fn commit(&mut self, id: u64) -> Vec<(u32, Record)> {
        match id
            .checked_sub(1)
            .and_then(|i| self.buffers.get_mut(i as usize))
        {
            Some(b) if b.active => {
                b.closing = true;
                self.closing = true;
                std::mem::take(&mut b.records)
            }
            _ => Vec::new(),
        }
    }

    /// An id `commit()` and `discard()` refuse with an illegal operation: dtrace's
    /// `dtrace_speculation_commit()`/`_discard()` take it as a 32-bit `dtrace_specid_t` and
    /// raise `CPU_DTRACE_ILLOP` when it is past the last buffer (0 is quietly nothing).
    pub fn out_of_range(&self, id: u64) -> bool {
        (id as u32) as usize > self.buffers.len()
    }

    /// Where buffer `id` stands (records kept, bytes used), to undo a faulting clause's
    /// speculated records with [`Speculations::rollback`].
    pub fn mark(&self, id: u64) -> Option<(usize, usize)> {
        let b = self
            .buffers
            .get(usize::try_from(id.checked_sub(1)?).ok()?)?;
        Some((b.records.len(), b.bytes))
    }

    /// Drops what was speculated into buffer `id` since `mark`: a clause that faults keeps
    /// nothing (dtrace's `dtrace_probe()` does not advance the buffer's offset past it).
    pub fn rollback(&mut self, id: u64, mark: (usize, usize)) {
        let Some(b) = id
            .checked_sub(1)
            .and_then(|i| self.buffers.get_mut(i as usize))
        else {
            return;
        };
        if b.active && !b.closing {
            b.records.truncate(mark.0);
            b.bytes = mark.1;
        }
    }

    /// `discard(id)`.
    pub fn discard(&mut self, id: u64) {
        if let Some(b) = id
            .checked_sub(1)
            .and_then(|i| self.buffers.get_mut(i as usize))
        {
            if b.active {
                b.closing = true;
                self.closing = true;
                b.records.clear();
            }
        }
    }

    /// Frees the buffers committed or discarded during the firing.
    #[inline]
    pub fn end_firing(&mut self) {
        // asked at the end of every firing; a buffer closes only after commit() or discard()
        if self.closing {
            self.close_buffers();
        }
    }

    #[cold]
    fn close_buffers(&mut self) {
        self.closing = false;
        for b in &mut self.buffers {
            if b.closing {
                *b = Buffer::default();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocate_commit_and_drops() {
        let mut s = Speculations::new(1, 100);
        let id = s.allocate();
        assert_eq!(id, 1);
        assert_eq!(s.allocate(), 0);
        assert_eq!(s.unavail_drops, 1);
        let ecb = super::super::ecb::EcbSize {
            size: 60,
            needed: 60,
            align: 8,
        };
        assert!(s.reserve(id, ecb));
        s.push(id, (1, Record::Exit(0)));
        // 60 rounded up to 64, plus 60, is past 96 (100 rounded down to 8)
        assert!(!s.reserve(id, ecb));
        assert_eq!(s.drops, 1);
        // no such buffer: dropped, not counted
        assert!(!s.reserve(2, ecb));
        assert!(!s.reserve(u64::MAX, ecb));
        assert_eq!(s.drops, 1);
        assert_eq!(s.commit(id).len(), 1);
        assert!(!s.is_active(id));
        s.end_firing();
        assert_eq!(s.allocate(), 1);
    }
}
