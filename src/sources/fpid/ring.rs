//! dtx's side of the memory shared with the fpid agent (its layout is `agent/src/layout.rs`,
//! compiled into both crates): the file it lives in, the hook table, and the reader of the
//! ring. The ring's bytes are written by the target: every length is checked before use.

use std::sync::atomic::{AtomicU64, Ordering};

#[path = "../../../agent/src/layout.rs"]
#[allow(dead_code)]
pub mod layout;

use layout::{
    Header, Hook, Record, COMMITTED, HEADER_BYTES, KIND_ENTRY, KIND_RETURN, MAGIC, WIRE_HEAD_WORDS,
    WIRE_MIN_BYTES, WORD_LEN_MASK, WORD_RETURN, WORD_VALUES_SHIFT,
};

/// The shared memory of one traced process, mapped here. Shared by the fpid source and its
/// drain thread: every access to the mapping after it is made goes through atomics or
/// through `base` (the drain thread is the ring's one reader).
pub struct SharedRing {
    /// Kept for the mapping's life (it is reached through `base`).
    #[cfg(unix)]
    #[allow(dead_code)]
    map: memmap2::MmapMut,
    #[cfg(windows)]
    map: named::NamedMapping,
    /// The mapping's first byte, taken once from the writable map.
    base: *mut u8,
    len: usize,
    /// Windows: what takes the hooks out of the target when tracing ends (run once).
    #[cfg(windows)]
    pub on_disable: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

// SAFETY: the mapping lives as long as the value; what two threads of dtx touch in it is the
// header's atomics, the hook table's atomics, and the ring's bytes, which only the drain
// thread (the one reader) reads and zeroes.
unsafe impl Send for SharedRing {}
unsafe impl Sync for SharedRing {}

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
    /// How long (ms) a writer waits for room in a full ring before it drops (0: at once).
    pub wait_ms: u64,
}

/// Where the ring starts and its size, and the bytes of the whole mapping, for `config`.
fn sizes(config: &RingConfig) -> (usize, usize, usize) {
    let ring_size = config.ring_bytes.max(64 * 1024).next_power_of_two();
    let table = HEADER_BYTES + config.hooks * std::mem::size_of::<Hook>();
    let ring_offset = table.div_ceil(4096) * 4096;
    (ring_offset, ring_size, ring_offset + ring_size)
}

impl SharedRing {
    /// Fills the header of a new mapping and enables it.
    fn init(&mut self, config: &RingConfig) {
        let (ring_offset, ring_size, _) = sizes(config);
        let h = self.header_mut();
        h.magic = MAGIC;
        h.hooks = config.hooks as u64;
        h.ring_offset = ring_offset as u64;
        h.ring_size = ring_size as u64;
        h.stack_bytes = config.stack_bytes as u64;
        h.stack_args = config.stack_args as u64;
        h.wait_ns = config.wait_ms.saturating_mul(1_000_000);
        h.enabled.store(1, Ordering::Release);
    }

    /// Creates a mapping backed by the paging file without a name, and maps it: nothing but a
    /// handle reaches it, and dtx duplicates one into the target (DuplicateHandle), which works
    /// across users, logon sessions and integrity levels where a name in this session's
    /// `Local\` namespace with this user's default DACL does not (Microsoft Learn,
    /// CreateFileMappingW, "Kernel object namespaces", DuplicateHandle).
    #[cfg(windows)]
    pub fn create_unnamed(config: &RingConfig) -> Result<SharedRing, String> {
        Self::create_named("", config)
    }

    /// The mapping's handle in this process (what is duplicated into the target).
    #[cfg(windows)]
    pub fn section_handle(&self) -> usize {
        self.map.handle as usize
    }

    /// Creates a named file mapping backed by the paging file (`Local\...`, see Microsoft
    /// Learn, CreateFileMappingW) and maps it; an empty name makes an unnamed one.
    #[cfg(windows)]
    pub fn create_named(name: &str, config: &RingConfig) -> Result<SharedRing, String> {
        let (_, _, total) = sizes(config);
        let mut map = named::NamedMapping::create(name, total)?;
        let base = map.as_mut_ptr();
        let mut ring = SharedRing {
            map,
            base,
            len: total,
            on_disable: std::sync::Mutex::new(None),
        };
        ring.init(config);
        Ok(ring)
    }

    /// Creates the shared file at `path` (mode 0600, owned by `owner` when given) and maps it.
    #[cfg(unix)]
    pub fn create(
        path: &std::path::Path,
        config: &RingConfig,
        owner: Option<(u32, u32)>,
    ) -> Result<SharedRing, String> {
        use std::os::unix::fs::OpenOptionsExt;
        let (_, _, total) = sizes(config);
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
        let mut map = unsafe { memmap2::MmapMut::map_mut(&f) }
            .map_err(|e| format!("fpid: cannot map {}: {e}", path.display()))?;
        let base = map.as_mut_ptr();
        let mut ring = SharedRing {
            map,
            base,
            len: total,
        };
        ring.init(config);
        Ok(ring)
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping is at least HEADER_BYTES long and page aligned.
        unsafe { &*(self.base as *const Header) }
    }

    fn header_mut(&mut self) -> &mut Header {
        // SAFETY: as in header(); nothing else refers to it yet.
        unsafe { &mut *(self.base as *mut Header) }
    }

    /// Bytes of the ring.
    pub fn ring_size(&self) -> usize {
        self.header().ring_size as usize
    }

    /// The agent's entry stub, once it has mapped the file.
    pub fn entry_stub(&self) -> u64 {
        self.header().entry_stub.load(Ordering::Acquire)
    }

    /// Entry `index` of the hook table.
    fn hook(&self, index: usize) -> Option<&Hook> {
        if index as u64 >= self.header().hooks {
            return None;
        }
        let at = HEADER_BYTES + index * std::mem::size_of::<Hook>();
        // SAFETY: inside the hook table, which the mapping holds.
        Some(unsafe { &*(self.base.add(at) as *const Hook) })
    }

    /// Sets the probes a hook fires.
    pub fn set_hook(&self, index: usize, flags: u64) {
        if let Some(hook) = self.hook(index) {
            hook.flags.store(flags, Ordering::Release);
        }
    }

    /// Windows: names the function the agent is to hook for entry `index` (not tried yet).
    #[cfg(windows)]
    pub fn set_hook_addr(&mut self, index: usize, addr: u64) {
        if index as u64 >= self.header().hooks {
            return;
        }
        let at = HEADER_BYTES + index * std::mem::size_of::<Hook>();
        // SAFETY: inside the hook table; the agent has not seen the mapping yet.
        let hook = unsafe { &mut *(self.base.add(at) as *mut Hook) };
        hook.addr = addr;
        hook.status.store(layout::HOOK_PENDING, Ordering::Release);
    }

    /// Windows: what the agent answered for entry `index` (`HOOK_OK`, `HOOK_PENDING` or
    /// MinHook's status).
    #[cfg(windows)]
    pub fn hook_status(&self, index: usize) -> u64 {
        self.hook(index)
            .map_or(layout::HOOK_PENDING, |h| h.status.load(Ordering::Acquire))
    }

    /// Makes every hook inert (they pass straight to their trampolines); on Windows the agent
    /// also takes them out.
    pub fn disable(&self) {
        self.header().enabled.store(0, Ordering::Release);
        #[cfg(windows)]
        if let Some(f) = self.on_disable.lock().ok().and_then(|mut g| g.take()) {
            f();
        }
    }

    /// Hits lost to a full ring, and return hooks a full shadow stack refused.
    pub fn losses(&self) -> (u64, u64) {
        let h = self.header();
        (
            h.drops.load(Ordering::Relaxed),
            h.shadow_full.load(Ordering::Relaxed),
        )
    }

    /// Times a writer found the ring full and waited, and whether one gave up (the ring is
    /// stalled: writers drop at once until dtx frees room).
    pub fn waits(&self) -> (u64, bool) {
        let h = self.header();
        (
            h.waits.load(Ordering::Relaxed),
            h.stalled.load(Ordering::Relaxed) != 0,
        )
    }

    /// Tells waiting writers dtx is there (see `layout.rs`).
    pub fn beat(&self) {
        self.header().beat.fetch_add(1, Ordering::Relaxed);
    }

    /// Reads complete records into `buf` (records back to back in the ring's form, each its
    /// length in its first word), up to about `max` bytes, and frees their room; answers the
    /// bytes read. Stops at a record still being written, or at one whose length makes no
    /// sense (the ring then stays stuck: nothing past it is trusted). Called by one thread at
    /// a time (the ring's one reader).
    pub fn drain(&self, buf: &mut Vec<u8>, max: usize) -> usize {
        let (offset, size) = {
            let h = self.header();
            (h.ring_offset as usize, h.ring_size as usize)
        };
        if offset.checked_add(size).is_none_or(|end| end > self.len) {
            return 0;
        }
        let mask = size - 1;
        let mut tail = self.header().tail.load(Ordering::Relaxed);
        let mut read = 0usize;
        while read < max {
            let start = tail as usize & mask;
            // SAFETY: `start` is 8-aligned inside the ring, which the mapping holds.
            let first = unsafe { &*(self.base.add(offset + start) as *const AtomicU64) };
            let word = first.load(Ordering::Acquire);
            if word & COMMITTED == 0 {
                break;
            }
            let len = (word & WORD_LEN_MASK) as usize;
            if len < WIRE_MIN_BYTES || len > size || !len.is_multiple_of(8) {
                break;
            }
            let first_part = len.min(size - start);
            // SAFETY: both parts lie inside the ring; the writer published them (the
            // Acquire load above) and writes no more there until `tail` passes them.
            unsafe {
                let ring = self.base.add(offset);
                buf.extend_from_slice(std::slice::from_raw_parts(ring.add(start), first_part));
                buf.extend_from_slice(std::slice::from_raw_parts(ring, len - first_part));
                std::ptr::write_bytes(ring.add(start), 0, first_part);
                std::ptr::write_bytes(ring, 0, len - first_part);
            }
            tail = tail.wrapping_add(len as u64);
            read += len;
            self.header().tail.store(tail, Ordering::Release);
        }
        if read > 0 {
            // room again: writers may wait for it once more
            self.header().stalled.store(0, Ordering::Relaxed);
        }
        read
    }
}

/// A named file mapping of the paging file, mapped read-write (Windows).
#[cfg(windows)]
mod named {
    use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, INVALID_HANDLE_VALUE};
    use windows_sys::Win32::System::Memory::{
        CreateFileMappingW, MapViewOfFile, UnmapViewOfFile, FILE_MAP_ALL_ACCESS,
        MEMORY_MAPPED_VIEW_ADDRESS, PAGE_READWRITE,
    };

    /// The mapping's handle and this process's view of it.
    pub struct NamedMapping {
        pub(super) handle: HANDLE,
        view: *mut u8,
        len: usize,
    }

    // SAFETY: the handle and the view are process-wide; access is through the ring's atomics.
    unsafe impl Send for NamedMapping {}

    impl NamedMapping {
        /// Creates the mapping `name` of `len` zeroed bytes (it must not exist yet).
        pub fn create(name: &str, len: usize) -> Result<NamedMapping, String> {
            let wide: Vec<u16> = name.encode_utf16().chain(Some(0)).collect();
            // SAFETY: a NUL-terminated name; the paging file backs it; default security
            // (the creator's user, which the target runs as).
            let handle = unsafe {
                CreateFileMappingW(
                    INVALID_HANDLE_VALUE,
                    std::ptr::null(),
                    PAGE_READWRITE,
                    (len as u64 >> 32) as u32,
                    len as u32,
                    if name.is_empty() {
                        std::ptr::null()
                    } else {
                        wide.as_ptr()
                    },
                )
            };
            let err = std::io::Error::last_os_error();
            if handle.is_null() {
                return Err(format!("fpid: cannot create the mapping {name}: {err}"));
            }
            if err.raw_os_error() == Some(183) {
                // ERROR_ALREADY_EXISTS: someone else's
                // SAFETY: our handle.
                unsafe { CloseHandle(handle) };
                return Err(format!("fpid: the mapping {name} exists already"));
            }
            // SAFETY: a mapping of `len` bytes, mapped whole.
            let view = unsafe { MapViewOfFile(handle, FILE_MAP_ALL_ACCESS, 0, 0, len) };
            if view.Value.is_null() {
                let err = std::io::Error::last_os_error();
                // SAFETY: our handle.
                unsafe { CloseHandle(handle) };
                return Err(format!("fpid: cannot map {name}: {err}"));
            }
            Ok(NamedMapping {
                handle,
                view: view.Value as *mut u8,
                len,
            })
        }
    }

    impl std::ops::Deref for NamedMapping {
        type Target = [u8];
        fn deref(&self) -> &[u8] {
            // SAFETY: the view is `len` bytes, mapped while self lives.
            unsafe { std::slice::from_raw_parts(self.view, self.len) }
        }
    }

    impl std::ops::DerefMut for NamedMapping {
        fn deref_mut(&mut self) -> &mut [u8] {
            // SAFETY: as in deref.
            unsafe { std::slice::from_raw_parts_mut(self.view, self.len) }
        }
    }

    impl Drop for NamedMapping {
        fn drop(&mut self) {
            // SAFETY: our view and handle, unmapped and closed once; the target's view keeps
            // the memory alive for it.
            unsafe {
                UnmapViewOfFile(MEMORY_MAPPED_VIEW_ADDRESS {
                    Value: self.view as *mut _,
                });
                CloseHandle(self.handle);
            }
        }
    }
}

/// The records `drain` put in `buf`, in order, back in their full form.
pub fn hits(buf: &[u8]) -> impl Iterator<Item = Hit<'_>> {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let rest = buf.get(at..)?;
        let word = |i: usize| -> Option<u64> {
            Some(u64::from_le_bytes(
                rest.get(8 * i..8 * i + 8)?.try_into().ok()?,
            ))
        };
        let first = word(0)?;
        let len = (first & WORD_LEN_MASK) as usize;
        if len < WIRE_MIN_BYTES || len > rest.len() {
            return None;
        }
        let ret = first & WORD_RETURN != 0;
        let values = ((first >> WORD_VALUES_SHIFT) & 0xff) as usize;
        let mut record = Record {
            word: first,
            kind: if ret { KIND_RETURN } else { KIND_ENTRY },
            ..Record::default()
        };
        let ids = word(1)?;
        record.hook = ids as u32;
        record.tid = ids >> 32;
        record.time = word(2)?;
        record.rsp = word(3)?;
        record.rbp = word(4)?;
        let mut i = WIRE_HEAD_WORDS;
        if ret {
            record.pc = word(i)?;
            i += 1;
        }
        if values > record.args.len() || 8 * (i + values) > len {
            return None;
        }
        for k in 0..values {
            record.args[k] = word(i + k)?;
        }
        let stack = &rest[8 * (i + values)..len];
        record.stack_len = stack.len() as u64;
        at += len;
        Some(Hit { record, stack })
    })
}

/// The agent's writer, compiled here to test the reader against it.
#[cfg(test)]
#[path = "../../../agent/src/ring.rs"]
#[allow(dead_code)]
mod agent_ring;

#[cfg(test)]
mod tests {
    use super::agent_ring::{append, Waiter};
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    fn ring(bytes: usize, wait_ms: u64) -> (SharedRing, Option<tempfile::TempDir>) {
        let config = RingConfig {
            hooks: 3,
            ring_bytes: bytes,
            stack_bytes: 0,
            stack_args: false,
            wait_ms,
        };
        #[cfg(unix)]
        {
            let dir = tempfile::tempdir().unwrap();
            let ring = SharedRing::create(&dir.path().join("ring"), &config, None).unwrap();
            (ring, Some(dir))
        }
        #[cfg(windows)]
        {
            static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let name = format!(
                "Local\\dtx-fpid-test-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            );
            (SharedRing::create_named(&name, &config).unwrap(), None)
        }
    }

    unsafe fn now_ns() -> u64 {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }

    unsafe fn pause(_round: u32) {
        std::thread::sleep(Duration::from_micros(20));
    }

    const WAITER: Waiter = Waiter { now_ns, pause };

    /// Writes one record as the agent does; answers whether the ring took it.
    fn put(ring: &SharedRing, r: &Record, values: usize, stack: &[u8]) -> bool {
        let before = ring.losses().0;
        // SAFETY: the header of the ring it describes; `stack` is readable.
        unsafe {
            append(
                ring.header(),
                r,
                values,
                stack.as_ptr(),
                stack.len(),
                &WAITER,
            )
        };
        ring.losses().0 == before
    }

    #[test]
    fn records_wrap_and_a_full_ring_drops() {
        let (ring, _dir) = ring(64 * 1024, 0);
        let stack = [7u8; 1000];
        let mut got = Vec::new();
        let mut buf = Vec::new();
        // many laps of the ring, records straddling its end, entries and returns
        for i in 0..2000u64 {
            let r = Record {
                hook: (i % 3) as u32,
                kind: (i % 2) as u32,
                tid: i,
                time: 5 * i,
                pc: 9 * i,
                args: [i, i + 1, i + 2, i + 3, i + 4, i + 5, 0, 0, 0, 0],
                ..Record::default()
            };
            assert!(put(&ring, &r, if i % 2 == 1 { 2 } else { 6 }, &stack));
            if i % 7 == 6 {
                buf.clear();
                ring.drain(&mut buf, usize::MAX);
                got.extend(hits(&buf).map(|h| (h.record, h.stack.len(), h.stack[999])));
            }
        }
        buf.clear();
        ring.drain(&mut buf, usize::MAX);
        got.extend(hits(&buf).map(|h| (h.record, h.stack.len(), h.stack[999])));
        assert_eq!(got.len(), 2000);
        for (i, (r, len, last)) in got.iter().enumerate() {
            let i = i as u64;
            assert_eq!(
                (r.tid, r.hook, r.kind, r.time),
                (i, (i % 3) as u32, (i % 2) as u32, 5 * i)
            );
            assert_eq!((*len, *last, r.stack_len), (1000, 7, 1000));
            if i % 2 == 1 {
                assert_eq!(
                    (r.pc, r.args[0], r.args[1], r.args[2]),
                    (9 * i, i, i + 1, 0)
                );
            } else {
                assert_eq!((r.pc, r.args[5], r.args[6]), (0, i + 5, 0));
            }
        }
        // an entry without values or stack is five words
        assert!(put(&ring, &Record::default(), 0, &[]));
        buf.clear();
        assert_eq!(ring.drain(&mut buf, usize::MAX), WIRE_MIN_BYTES);
        // nobody drains, no wait: the ring fills, later hits are dropped and counted
        let mut n = 0;
        while put(&ring, &Record::default(), 6, &stack) {
            n += 1;
        }
        assert!((55..70).contains(&n), "{n} records fit");
        assert_eq!(ring.losses().0, 1);
        assert_eq!(ring.waits(), (0, false));
    }

    #[test]
    fn a_full_ring_waits_for_the_reader_and_loses_nothing() {
        let (ring, _dir) = ring(64 * 1024, 1000);
        let ring = Arc::new(ring);
        let n = 200_000u64;
        let writer = {
            let ring = ring.clone();
            std::thread::spawn(move || {
                for i in 0..n {
                    let r = Record {
                        tid: i,
                        ..Record::default()
                    };
                    put(&ring, &r, 6, &[]);
                }
            })
        };
        // a slow reader: small bites, with pauses
        let mut next = 0u64;
        let mut buf = Vec::new();
        let start = Instant::now();
        while next < n && start.elapsed() < Duration::from_secs(120) {
            buf.clear();
            if ring.drain(&mut buf, 4096) == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
            for h in hits(&buf) {
                assert_eq!(h.record.tid, next);
                next += 1;
            }
        }
        writer.join().unwrap();
        assert_eq!(next, n);
        assert_eq!(ring.losses().0, 0);
        let (waits, stalled) = ring.waits();
        assert!(waits > 0, "the writer outran the reader and waited");
        assert!(!stalled);
    }

    #[test]
    fn a_reader_gone_stalls_the_writer_once() {
        let (ring, _dir) = ring(64 * 1024, 50);
        let mut n = 0;
        let start = Instant::now();
        while put(&ring, &Record::default(), 6, &[]) {
            n += 1;
        }
        // the hit that found no room waited its bound, then dropped and stalled the ring
        assert!(start.elapsed() >= Duration::from_millis(50));
        assert_eq!(n, 64 * 1024 / 88);
        assert_eq!(ring.losses().0, 1);
        assert_eq!(ring.waits(), (1, true));
        // stalled: the next hits drop at once
        let start = Instant::now();
        for _ in 0..100 {
            assert!(!put(&ring, &Record::default(), 6, &[]));
        }
        assert!(start.elapsed() < Duration::from_millis(50));
        assert_eq!(ring.losses().0, 101);
        assert_eq!(ring.waits(), (1, true));
        // the reader back: room again, no longer stalled
        let mut buf = Vec::new();
        assert_eq!(ring.drain(&mut buf, usize::MAX), n * 88);
        assert_eq!(hits(&buf).count(), n);
        assert_eq!(ring.waits(), (1, false));
        assert!(put(&ring, &Record::default(), 6, &[]));
        // tracing ended while a writer waits: it stops waiting and counts no drop
        while put(&ring, &Record::default(), 6, &[]) {}
        buf.clear();
        ring.drain(&mut buf, 88);
        assert!(put(&ring, &Record::default(), 6, &[]));
        let mut ring = ring;
        ring.header_mut().wait_ns = 600_000_000_000;
        let ring = Arc::new(ring);
        let (drops, waits) = (ring.losses().0, ring.waits().0);
        let writer = {
            let ring = ring.clone();
            std::thread::spawn(move || put(&ring, &Record::default(), 6, &[]))
        };
        while ring.waits().0 == waits {
            std::thread::sleep(Duration::from_millis(1));
        }
        ring.disable();
        writer.join().unwrap();
        assert_eq!(ring.losses().0, drops);
    }
}
