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
    #[cfg(unix)]
    map: memmap2::MmapMut,
    #[cfg(windows)]
    map: named::NamedMapping,
    /// Windows: what takes the hooks out of the target when tracing ends (run once).
    #[cfg(windows)]
    pub on_disable: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>,
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
        let map = named::NamedMapping::create(name, total)?;
        let mut ring = SharedRing {
            map,
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
        let map = unsafe { memmap2::MmapMut::map_mut(&f) }
            .map_err(|e| format!("fpid: cannot map {}: {e}", path.display()))?;
        let mut ring = SharedRing { map };
        ring.init(config);
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

    /// Entry `index` of the hook table.
    fn hook(&self, index: usize) -> Option<&Hook> {
        if index as u64 >= self.header().hooks {
            return None;
        }
        let at = HEADER_BYTES + index * std::mem::size_of::<Hook>();
        // SAFETY: inside the hook table, which the mapping holds.
        Some(unsafe { &*(self.map.as_ptr().add(at) as *const Hook) })
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
        let hook = unsafe { &mut *(self.map.as_mut_ptr().add(at) as *mut Hook) };
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
        let config = RingConfig {
            hooks: 3,
            ring_bytes: 64 * 1024,
            stack_bytes: 0,
            stack_args: false,
        };
        #[cfg(unix)]
        let dir = tempfile::tempdir().unwrap();
        #[cfg(unix)]
        let mut ring = SharedRing::create(&dir.path().join("ring"), &config, None).unwrap();
        #[cfg(windows)]
        let name = format!("Local\\dtx-fpid-test-{}", std::process::id());
        #[cfg(windows)]
        let mut ring = SharedRing::create_named(&name, &config).unwrap();
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
