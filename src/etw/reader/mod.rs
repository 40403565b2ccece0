//! A pure-Rust reader for `.etl` (Event Tracing for Windows log) files: FORMAT.md in
//! `shared/etl` describes the layout.
//!
//! An [`EtlFile`] owns the bytes of one file (memory-mapped, or read from a `.zip` member). Its
//! records come out as [`EventRecord`](crate::etw::record::EventRecord) views over those bytes,
//! either in global timestamp order ([`EtlFile::events`], a k-way merge over the per-CPU
//! buffers) or in file order. Compressed buffers are decompressed one at a time into reused
//! vectors, so memory stays flat. Damage (a truncated file, a corrupt buffer header, a record
//! running past its buffer, an unknown header type) is reported as an [`EtlError`] naming the
//! file and byte offset, and iteration goes on with the next buffer.
//!
//! ```no_run
//! use dtx::etw::reader::EtlFile;
//! let etl = EtlFile::open_path("trace.etl").unwrap();
//! let mut events = etl.events();
//! while let Some(r) = events.next_event() {
//!     match r {
//!         Ok(ev) => println!("{} {} {}", ev.time_ns, ev.provider, ev.opcode),
//!         Err(e) => eprintln!("{e}"),
//!     }
//! }
//! ```

pub mod archive;
pub mod buffer;
mod bytes;
pub mod headers;
pub mod logfile;
mod merge;
pub mod xpress;

use std::fmt;
use std::path::Path;

pub use archive::{is_demo, open_path, open_zip_member, split_member, zip_etl_members, DEMO};
pub use buffer::{BufferHeader, BufferInfo};
pub use headers::{blank_record, kernel_group_guid, kernel_group_name};
pub use logfile::{LogfileHeader, TimeBase};
pub use merge::{Events, HookSet};

use buffer::{BufferStep, BufferWalk, BUFFER_HEADER_SIZE};
use headers::{parse_record, record_timestamp, Step};

/// A problem in an `.etl` file: which file, where, and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtlError {
    pub file: String,
    /// Byte offset in the file (for records in compressed buffers: the buffer's offset).
    pub offset: u64,
    pub message: String,
}

impl fmt::Display for EtlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: offset {:#x}: {}",
            self.file, self.offset, self.message
        )
    }
}

impl std::error::Error for EtlError {}

enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

pub(crate) enum IndexEntry {
    Buffer(BufferInfo),
    Damage { offset: u64, message: String },
}

pub(crate) struct Indexed {
    pub(crate) entry: IndexEntry,
    /// First record timestamp (inherited from the previous buffer when unknown): merge order.
    pub(crate) sort_ts: i64,
}

/// One `.etl` file: its bytes, its logfile header and an index of its buffers.
pub struct EtlFile {
    name: String,
    bytes: Bytes,
    header: LogfileHeader,
    /// Why no logfile header could be read (reported as the first item of every iteration).
    header_error: Option<EtlError>,
    time: TimeBase,
    index: Vec<Indexed>,
}

impl fmt::Debug for EtlFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtlFile")
            .field("name", &self.name)
            .field("len", &self.bytes().len())
            .field("buffers", &self.index.len())
            .finish()
    }
}

impl EtlFile {
    /// Opens a plain `.etl` file (memory-mapped). For `.zip` archives use [`open_path`].
    pub fn open(path: impl AsRef<Path>) -> Result<EtlFile, EtlError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let io = |e: std::io::Error| EtlError {
            file: name.clone(),
            offset: 0,
            message: e.to_string(),
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let bytes = if len == 0 {
            Bytes::Owned(Vec::new())
        } else {
            // SAFETY: the map is read-only and lives as long as `EtlFile`; like every reader of
            // a mapped file we rely on nobody truncating the file while it is open.
            match unsafe { memmap2::Mmap::map(&file) } {
                Ok(m) => Bytes::Mapped(m),
                Err(_) => Bytes::Owned(std::fs::read(path).map_err(io)?),
            }
        };
        EtlFile::build(name, bytes)
    }

    /// Reads an `.etl` image from an open file (mapped when it can be), named `name`.
    pub(crate) fn from_file_named(name: String, file: &std::fs::File) -> Result<EtlFile, EtlError> {
        let io = |e: std::io::Error| EtlError {
            file: name.clone(),
            offset: 0,
            message: e.to_string(),
        };
        let len = file.metadata().map_err(io)?.len();
        let bytes = if len == 0 {
            Bytes::Owned(Vec::new())
        } else {
            // SAFETY: as in `open`: a read-only map that lives as long as `EtlFile`, of a
            // temporary file nobody else knows of
            Bytes::Mapped(unsafe { memmap2::Mmap::map(file) }.map_err(io)?)
        };
        EtlFile::build(name, bytes)
    }

    /// Opens an `.etl` file, a `.zip` holding exactly one, or `archive.zip:member.etl`.
    pub fn open_path(spec: &str) -> Result<EtlFile, EtlError> {
        archive::open_path(spec)
    }

    /// Reads an `.etl` image held in memory (named `<memory>` in errors).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<EtlFile, EtlError> {
        EtlFile::from_bytes_named("<memory>", bytes)
    }

    /// Reads an `.etl` image held in memory; `name` is used in errors.
    pub fn from_bytes_named(name: impl Into<String>, bytes: Vec<u8>) -> Result<EtlFile, EtlError> {
        EtlFile::build(name.into(), Bytes::Owned(bytes))
    }

    fn build(name: String, bytes: Bytes) -> Result<EtlFile, EtlError> {
        let mut f = EtlFile {
            name,
            bytes,
            header: LogfileHeader::default(),
            header_error: None,
            time: TimeBase::default(),
            index: Vec::new(),
        };
        f.read_header()?;
        f.build_index();
        Ok(f)
    }

    fn err(&self, offset: u64, message: impl Into<String>) -> EtlError {
        EtlError {
            file: self.name.clone(),
            offset,
            message: message.into(),
        }
    }

    /// Finds the first good buffer and reads the TRACE_LOGFILE_HEADER from its first record.
    fn read_header(&mut self) -> Result<(), EtlError> {
        let data = self.bytes();
        if data.is_empty() {
            return Err(self.err(0, "not an ETL file: the file is empty"));
        }
        let mut first_damage = None;
        let mut found = None;
        for step in BufferWalk::new(data, 0) {
            match step {
                BufferStep::Damage { offset, message } => {
                    first_damage.get_or_insert((offset, message));
                }
                BufferStep::Buffer(b) => {
                    found = Some(b);
                    break;
                }
            }
        }
        let Some(first) = found else {
            let (off, msg) = first_damage.unwrap_or((0, "no buffer".into()));
            return Err(self.err(off, format!("not an ETL file: {msg}")));
        };
        let mut scratch = Vec::new();
        let buf = buffer_bytes(data, &first, &mut scratch, usize::MAX);
        let end = (first.header.filled as usize).min(buf.len());
        let header = match parse_record(buf, BUFFER_HEADER_SIZE, end, 0, &TimeBase::default()) {
            Step::Record(r, _) if r.kernel_group == Some(0) && r.opcode == 0 => {
                LogfileHeader::parse(r.payload, r.pointer_size, r.raw_timestamp)
                    .ok_or_else(|| "the TRACE_LOGFILE_HEADER record is too short".to_string())
            }
            Step::Record(..) => Err("the first record is not a TRACE_LOGFILE_HEADER".to_string()),
            Step::End => Err("the first buffer holds no records".to_string()),
            Step::Error(e) => Err(e),
        };
        let first_offset = first.offset;
        match header {
            Ok(h) => {
                self.time = TimeBase::new(&h);
                self.header = h;
            }
            Err(e) => {
                self.header_error = Some(self.err(
                    first_offset + BUFFER_HEADER_SIZE as u64,
                    format!("no logfile header ({e}); times are relative to an unknown start"),
                ));
            }
        }
        Ok(())
    }

    fn build_index(&mut self) {
        let data = self.bytes();
        let mut index = Vec::new();
        let mut scratch = Vec::new();
        let mut last_ts = i64::MIN;
        for step in BufferWalk::new(data, self.header.buffer_size) {
            let entry = match step {
                BufferStep::Damage { offset, message } => IndexEntry::Damage { offset, message },
                BufferStep::Buffer(b) => {
                    if b.header.filled as usize > BUFFER_HEADER_SIZE {
                        let buf = buffer_bytes(data, &b, &mut scratch, BUFFER_HEADER_SIZE + 0x20);
                        if let Some(ts) = record_timestamp(buf, BUFFER_HEADER_SIZE) {
                            last_ts = ts;
                        }
                    }
                    // a read maps whole folios of the page cache (a megabyte, often): the
                    // buffer's pages go again, or the index alone maps the whole file
                    self.done_with(b.offset as usize, b.available as usize);
                    IndexEntry::Buffer(b)
                }
            };
            index.push(Indexed {
                entry,
                sort_ts: last_ts,
            });
        }
        if let Some(message) = missing_buffers(&self.header, &index, data.len()) {
            index.push(Indexed {
                entry: IndexEntry::Damage {
                    offset: data.len() as u64,
                    message,
                },
                sort_ts: last_ts,
            });
        }
        self.index = index;
    }

    /// The file's name as given when opening (`archive.zip:member.etl` for zip members).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The TRACE_LOGFILE_HEADER (defaults when the file had none; see [`EtlFile::header_error`]).
    pub fn header(&self) -> &LogfileHeader {
        &self.header
    }

    /// Why the logfile header could not be read, if it could not.
    pub fn header_error(&self) -> Option<&EtlError> {
        self.header_error.as_ref()
    }

    /// The raw-timestamp converter of this file.
    pub fn time_base(&self) -> &TimeBase {
        &self.time
    }

    /// The raw bytes of the file.
    pub fn bytes(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }

    /// Tells the system that the walk is done with the file's bytes `[offset, offset + len)`:
    /// the pages of a mapped file that lie wholly inside are dropped from the process (they
    /// stay in the page cache, and a later read maps them again). So a walk over a trace of
    /// many gigabytes keeps only the buffers it is reading resident, not the whole file.
    pub(crate) fn done_with(&self, offset: usize, len: usize) {
        let Bytes::Mapped(m) = &self.bytes else {
            return;
        };
        // a smaller file stays mapped whole: the next pass over it then finds its pages in
        // place rather than faulting them in again
        if m.len() < RELEASE_PAGES_ABOVE {
            return;
        }
        const PAGE: usize = 4096;
        let start = offset.div_ceil(PAGE) * PAGE;
        let end = (offset + len).min(m.len()) / PAGE * PAGE;
        if end <= start {
            return;
        }
        #[cfg(unix)]
        {
            // SAFETY: the map is a read-only shared map of a file: after MADV_DONTNEED a read
            // of these pages maps the file's (unchanged) bytes again, so every slice into the
            // map stays valid and sees the same contents.
            let _ = unsafe {
                m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
            };
        }
        // VirtualUnlock on pages that are not locked takes them out of the process's working
        // set (Microsoft Learn, VirtualUnlock: "calling VirtualUnlock on a range of memory that
        // is not locked releases the pages from the process's working set"); it then fails with
        // ERROR_NOT_LOCKED, which is expected. The view's pages stay in the file's cache and
        // fault back in on a later read.
        #[cfg(windows)]
        {
            // SAFETY: the range lies inside the live map; nothing is written or unmapped.
            let _ = unsafe {
                windows_sys::Win32::System::Memory::VirtualUnlock(
                    m.as_ptr().add(start).cast(),
                    end - start,
                )
            };
        }
        #[cfg(not(any(unix, windows)))]
        let _ = (m, start, end);
    }

    /// The buffers in file order, with damage reported in place.
    pub fn buffers(&self) -> impl Iterator<Item = Result<BufferInfo, EtlError>> + '_ {
        self.index.iter().map(|i| match &i.entry {
            IndexEntry::Buffer(b) => Ok(*b),
            IndexEntry::Damage { offset, message } => Err(self.err(*offset, message.clone())),
        })
    }

    /// All records in global timestamp order (per-CPU buffers merged), streaming.
    pub fn events(&self) -> Events<'_> {
        Events::new(self, true)
    }

    /// All records in the order they sit in the file.
    pub fn events_in_file_order(&self) -> Events<'_> {
        Events::new(self, false)
    }
}

/// EVENT_TRACE_FILE_MODE_CIRCULAR: the file keeps the last buffers only.
const FILE_MODE_CIRCULAR: u32 = 0x2;

/// When a sequential trace holds fewer buffers than its logfile header says were written
/// (a copy cut short at a buffer's end, where no record is cut and no other check sees it):
/// how much of it could be read.
fn missing_buffers(h: &LogfileHeader, index: &[Indexed], len: usize) -> Option<String> {
    let read = index
        .iter()
        .filter(|i| matches!(i.entry, IndexEntry::Buffer(_)))
        .count();
    let written = h.buffers_written as usize;
    if h.log_file_mode & FILE_MODE_CIRCULAR != 0 || written == 0 || read >= written {
        return None;
    }
    Some(format!(
        "file truncated: it holds {read} of the {written} buffers its header says were written \
         ({len} bytes read); the events of the rest are missing"
    ))
}

/// The size of a mapped trace from which a walk gives back the pages of the buffers it is
/// done with ([`EtlFile::done_with`]).
pub const RELEASE_PAGES_ABOVE: usize = 128 << 20;

/// The bytes of one buffer, header included: a slice of the file, or for compressed buffers the
/// header followed by the decompressed records (into `scratch`, at most `limit` bytes).
fn buffer_bytes<'a>(
    data: &'a [u8],
    b: &BufferInfo,
    scratch: &'a mut Vec<u8>,
    limit: usize,
) -> &'a [u8] {
    let start = b.offset as usize;
    let raw = data.get(start..start + b.available as usize).unwrap_or(&[]);
    if !b.header.is_compressed() {
        return raw;
    }
    let want = (b.header.filled as usize)
        .min(limit)
        .saturating_sub(BUFFER_HEADER_SIZE);
    let mut body = Vec::new();
    // A decompression error leaves what was produced so far, which is all a peek needs.
    let _ = xpress::decompress_into(
        raw.get(BUFFER_HEADER_SIZE..).unwrap_or(&[]),
        &mut body,
        want,
    );
    scratch.clear();
    scratch.extend_from_slice(raw.get(..BUFFER_HEADER_SIZE).unwrap_or(&[]));
    scratch.extend_from_slice(&body);
    scratch
}
