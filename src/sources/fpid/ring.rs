//! dtx's side of the memory shared with the fpid agent (its layout is `agent/src/layout.rs`,
//! compiled into both crates): the file it lives in, the hook table, and the reader of the
//! ring. The ring's bytes are written by the target: every length is checked before use.

use std::sync::atomic::{AtomicU64, Ordering};

#[path = "../../../agent/src/layout.rs"]
#[allow(dead_code)]
pub mod layout;

use layout::{Header, Hook, Record, COMMITTED, HEADER_BYTES, MAGIC, RECORD_BYTES};

/// The shared memory of one traced process, mapped here.
pub struct SharedRing {
    map: memmap2::MmapMut,
}

/// One record read from the ring.
pub struct Hit<'a> {
    pub record: Record,
    /// The copy of the target's stack from `record.rsp` up.
    pub stack: &'a [u8],
}

/// What the ring is made with.
pub struct RingConfig {
    pub hooks: usize,
    /// Bytes of the ring (rounded up to a power of two).
    pub ring_bytes: usize,
    pub stack_bytes: usize,
    pub stack_args: bool,
}

impl SharedRing {
    /// Creates the shared file at `path` (mode 0600, owned by `owner` when given) and maps it.
    pub fn create(
        path: &std::path::Path,
        config: &RingConfig,
        owner: Option<(u32, u32)>,
    ) -> Result<SharedRing, String> {
        use std::os::unix::fs::OpenOptionsExt;
        let ring_size = config.ring_bytes.max(64 * 1024).next_power_of_two();
        let table = HEADER_BYTES + config.hooks * std::mem::size_of::<Hook>();
        let ring_offset = table.div_ceil(4096) * 4096;
        let total = ring_offset + ring_size;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| format!("fpid: cannot create {}: {e}", path.display()))?;
        if let Some((uid, gid)) = owner {
            // a target of another user (dtx runs as root) must open it too
            let _ = std::os::unix::fs::fchown(&f, Some(uid), Some(gid));
        }
        f.set_len(total as u64)
            .map_err(|e| format!("fpid: cannot size {}: {e}", path.display()))?;
        // SAFETY: a file this process just created; the target writes into it concurrently,
        // which is why every access below goes through atomics or volatile reads.
        let map = unsafe { memmap2::MmapMut::map_mut(&f) }
            .map_err(|e| format!("fpid: cannot map {}: {e}", path.display()))?;
        let mut ring = SharedRing { map };
        let h = ring.header_mut();
        h.magic = MAGIC;
        h.hooks = config.hooks as u64;
        h.ring_offset = ring_offset as u64;
        h.ring_size = ring_size as u64;
        h.stack_bytes = config.stack_bytes as u64;
        h.stack_args = config.stack_args as u64;
        h.enabled.store(1, Ordering::Release);
        Ok(ring)
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping is at least HEADER_BYTES long and page aligned.
        unsafe { &*(self.map.as_ptr() as *const Header) }
    }

    fn header_mut(&mut self) -> &mut Header {
        // SAFETY: as in header().
        unsafe { &mut *(self.map.as_mut_ptr() as *mut Header) }
    }

    /// The agent's entry stub, once it has mapped the file.
    pub fn entry_stub(&self) -> u64 {
        self.header().entry_stub.load(Ordering::Acquire)
    }

    /// Sets the probes a hook fires.
    pub fn set_hook(&self, index: usize, flags: u64) {
        if index as u64 >= self.header().hooks {
            return;
        }
        let at = HEADER_BYTES + index * std::mem::size_of::<Hook>();
        // SAFETY: inside the hook table, which the mapping holds.
        let hook = unsafe { &*(self.map.as_ptr().add(at) as *const Hook) };
        hook.flags.store(flags, Ordering::Release);
    }

    /// Makes every hook inert (they pass straight to their trampolines).
    pub fn disable(&self) {
        self.header().enabled.store(0, Ordering::Release);
    }

    /// Hits lost to a full ring, and return hooks a full shadow stack refused.
    pub fn losses(&self) -> (u64, u64) {
        let h = self.header();
        (
            h.drops.load(Ordering::Relaxed),
            h.shadow_full.load(Ordering::Relaxed),
        )
    }

    /// Reads every complete record into `buf` (records back to back, each its length in its
    /// first word) and frees their room. Stops at a record still being written, or at one
    /// whose length makes no sense (the ring then stays stuck: nothing past it is trusted).
    pub fn drain(&mut self, buf: &mut Vec<u8>) {
        let (offset, size) = {
            let h = self.header();
            (h.ring_offset as usize, h.ring_size as usize)
        };
        let mask = size - 1;
        let base = offset;
        let mut tail = self.header().tail.load(Ordering::Relaxed);
        loop {
            let at = base + (tail as usize & mask);
            // SAFETY: `at` is 8-aligned inside the ring.
            let first = unsafe { &*(self.map.as_ptr().add(at) as *const AtomicU64) };
            let word = first.load(Ordering::Acquire);
            if word & COMMITTED == 0 {
                break;
            }
            let len = (word & 0xffff_ffff) as usize;
            if len < RECORD_BYTES || len > size || !len.is_multiple_of(8) {
                break;
            }
            let start = tail as usize & mask;
            let first_part = len.min(size - start);
            buf.extend_from_slice(&self.map[base + start..base + start + first_part]);
            buf.extend_from_slice(&self.map[base..base + len - first_part]);
            self.map[base + start..base + start + first_part].fill(0);
            self.map[base..base + len - first_part].fill(0);
            tail = tail.wrapping_add(len as u64);
            self.header().tail.store(tail, Ordering::Release);
        }
    }
}

/// The records `drain` put in `buf`, in order.
pub fn hits(buf: &[u8]) -> impl Iterator<Item = Hit<'_>> {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let rest = buf.get(at..)?;
        if rest.len() < RECORD_BYTES {
            return None;
        }
        let len = (u64::from_le_bytes(rest[..8].try_into().ok()?) & 0xffff_ffff) as usize;
        if len < RECORD_BYTES || len > rest.len() {
            return None;
        }
        // SAFETY: RECORD_BYTES bytes are there; Record is plain integers.
        let record: Record = unsafe { std::ptr::read_unaligned(rest.as_ptr() as *const Record) };
        let stack_len = (record.stack_len as usize).min(len - RECORD_BYTES);
        let stack = &rest[RECORD_BYTES..RECORD_BYTES + stack_len];
        at += len;
        Some(Hit { record, stack })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes one record the way the agent does (reserve, body, then the first word).
    fn put(ring: &SharedRing, r: &Record, stack: &[u8]) -> bool {
        let h = ring.header();
        let len = (RECORD_BYTES + stack.len()) as u64;
        let head = h.head.load(Ordering::Relaxed);
        if head + len - h.tail.load(Ordering::Acquire) > h.ring_size {
            h.drops.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        h.head.store(head + len, Ordering::Relaxed);
        let mut bytes = vec![0u8; len as usize];
        // SAFETY: Record is plain integers.
        let raw =
            unsafe { std::slice::from_raw_parts(r as *const Record as *const u8, RECORD_BYTES) };
        bytes[..RECORD_BYTES].copy_from_slice(raw);
        bytes[RECORD_BYTES..].copy_from_slice(stack);
        let base = h.ring_offset as usize;
        let mask = h.ring_size as usize - 1;
        let p = ring.map.as_ptr() as *mut u8;
        for (i, b) in bytes.iter().enumerate().skip(8) {
            // SAFETY: inside the ring.
            unsafe { *p.add(base + ((head as usize + i) & mask)) = *b };
        }
        // SAFETY: 8-aligned inside the ring.
        let first = unsafe { &*(p.add(base + (head as usize & mask)) as *const AtomicU64) };
        first.store(len | COMMITTED, Ordering::Release);
        true
    }

    #[test]
    fn records_wrap_and_a_full_ring_drops() {
        let dir = tempfile::tempdir().unwrap();
        let config = RingConfig {
            hooks: 3,
            ring_bytes: 64 * 1024,
            stack_bytes: 0,
            stack_args: false,
        };
        let mut ring = SharedRing::create(&dir.path().join("ring"), &config, None).unwrap();
        let stack = [7u8; 1000];
        let mut got = Vec::new();
        let mut buf = Vec::new();
        // many laps of the ring, records straddling its end
        for i in 0..2000u64 {
            let r = Record {
                hook: (i % 3) as u32,
                tid: i,
                stack_len: 1000,
                ..Record::default()
            };
            assert!(put(&ring, &r, &stack));
            if i % 7 == 6 {
                buf.clear();
                ring.drain(&mut buf);
                got.extend(hits(&buf).map(|h| (h.record.tid, h.stack.len(), h.stack[999])));
            }
        }
        buf.clear();
        ring.drain(&mut buf);
        got.extend(hits(&buf).map(|h| (h.record.tid, h.stack.len(), h.stack[999])));
        assert_eq!(got.len(), 2000);
        assert!(got
            .iter()
            .enumerate()
            .all(|(i, g)| *g == (i as u64, 1000, 7)));
        // nobody drains: the ring fills, later hits are dropped and counted
        let mut n = 0;
        while put(&ring, &Record::default(), &stack) {
            n += 1;
        }
        assert!((50..70).contains(&n), "{n} records fit");
        assert_eq!(ring.losses().0, 1);
    }
}
