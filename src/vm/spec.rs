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

    /// Appends a speculated record; counts a drop when it does not fit.
    pub fn push(&mut self, id: u64, rec: (u32, Record), size: usize) {
        let specsize = self.specsize;
        match id
            .checked_sub(1)
            .and_then(|i| self.buffers.get_mut(i as usize))
        {
            Some(b) if b.active && !b.closing && b.bytes + size <= specsize => {
                b.bytes += size;
                b.records.push(rec);
            }
            Some(b) if b.active && !b.closing => self.drops += 1,
            _ => {}
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
    pub fn end_firing(&mut self) {
        if !self.closing {
            return;
        }
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
        s.push(id, (1, Record::Exit(0)), 60);
        s.push(id, (1, Record::Exit(0)), 60);
        assert_eq!(s.drops, 1);
        assert_eq!(s.commit(id).len(), 1);
        assert!(!s.is_active(id));
        s.end_firing();
        assert_eq!(s.allocate(), 1);
    }
}
