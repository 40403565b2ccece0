//! WMI_BUFFER_HEADER (FORMAT.md 4.1) and the walk over the buffers of a file.

/// Size of the buffer header; records start right after it.
pub const BUFFER_HEADER_SIZE: usize = 0x48;

pub const FLAG_FLUSH_MARKER: u16 = 0x01;
pub const FLAG_EVENTS_LOST: u16 = 0x02;
pub const FLAG_BUFFER_LOST: u16 = 0x04;
pub const FLAG_PROC_INDEX: u16 = 0x20;
pub const FLAG_COMPRESSED: u16 = 0x40;

use super::bytes::{i64_at, u16_at, u32_at};

/// Largest buffer size we accept (ETW allows at most 16 MB buffers).
const MAX_BUFFER_SIZE: u32 = 64 << 20;

/// The decoded fields of one WMI_BUFFER_HEADER.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferHeader {
    /// Bytes of this buffer in the file (the compressed size for compressed buffers).
    pub buffer_size: u32,
    pub saved_offset: u32,
    pub current_offset: u32,
    pub timestamp: i64,
    pub sequence_number: i64,
    /// ProcessorNumber (u8), or the u16 ProcessorIndex when `FLAG_PROC_INDEX` is set.
    pub processor: u16,
    pub logger_id: u16,
    pub state: u32,
    /// Filled bytes, header included (uncompressed size for compressed buffers).
    pub filled: u32,
    pub flags: u16,
    pub buffer_type: u16,
}

impl BufferHeader {
    /// Reads the header at the start of `b` (no validation besides length).
    pub fn parse(b: &[u8]) -> Option<BufferHeader> {
        if b.len() < BUFFER_HEADER_SIZE {
            return None;
        }
        let flags = u16_at(b, 0x34)?;
        let processor = if flags & FLAG_PROC_INDEX != 0 {
            u16_at(b, 0x28)?
        } else {
            *b.get(0x28)? as u16
        };
        Some(BufferHeader {
            buffer_size: u32_at(b, 0x00)?,
            saved_offset: u32_at(b, 0x04)?,
            current_offset: u32_at(b, 0x08)?,
            timestamp: i64_at(b, 0x10)?,
            sequence_number: i64_at(b, 0x18)?,
            processor,
            logger_id: u16_at(b, 0x2A)?,
            state: u32_at(b, 0x2C)?,
            filled: u32_at(b, 0x30)?,
            flags,
            buffer_type: u16_at(b, 0x36)?,
        })
    }

    pub fn is_compressed(&self) -> bool {
        self.flags & FLAG_COMPRESSED != 0
    }

    /// Checks the fields that must hold for a real buffer; `max_filled` bounds the uncompressed
    /// size of compressed buffers (the session's buffer size).
    pub fn validate(&self, max_filled: u32) -> Result<(), String> {
        if self.buffer_size < BUFFER_HEADER_SIZE as u32 || self.buffer_size > MAX_BUFFER_SIZE {
            return Err(format!("implausible buffer size {:#x}", self.buffer_size));
        }
        if self.flags & 0xFF80 != 0 {
            return Err(format!("unknown buffer flags {:#x}", self.flags));
        }
        if self.buffer_type > 7 {
            return Err(format!("unknown buffer type {}", self.buffer_type));
        }
        if self.is_compressed() {
            if self.filled < BUFFER_HEADER_SIZE as u32
                || self.filled > max_filled.max(self.buffer_size).min(MAX_BUFFER_SIZE)
            {
                return Err(format!(
                    "compressed buffer fill {:#x} out of range (buffer size {:#x})",
                    self.filled, max_filled
                ));
            }
        } else if self.filled > self.buffer_size {
            return Err(format!(
                "buffer fill {:#x} exceeds buffer size {:#x}",
                self.filled, self.buffer_size
            ));
        }
        Ok(())
    }
}

/// Where one buffer sits in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferInfo {
    /// Byte offset of the buffer header in the file.
    pub offset: u64,
    pub header: BufferHeader,
    /// Bytes of the buffer present in the file (less than `buffer_size` when truncated).
    pub available: u32,
}

impl BufferInfo {
    pub fn truncated(&self) -> bool {
        self.available < self.header.buffer_size
    }
}

/// One step of the buffer walk: a buffer, or damage (with the offset where the walk resumed).
#[derive(Clone, Debug)]
pub enum BufferStep {
    Buffer(BufferInfo),
    Damage { offset: u64, message: String },
}

/// Walks the buffers of a file. After a damaged header it looks for the next plausible buffer
/// header (at the session buffer size first, then byte by byte) and reports the damage once.
pub struct BufferWalk<'a> {
    data: &'a [u8],
    pos: usize,
    /// The session buffer size (0 if unknown).
    session_buffer_size: u32,
}

impl<'a> BufferWalk<'a> {
    pub fn new(data: &'a [u8], session_buffer_size: u32) -> Self {
        BufferWalk {
            data,
            pos: 0,
            session_buffer_size,
        }
    }

    /// The largest uncompressed size a compressed buffer may claim: the session's buffer size,
    /// itself a field of the file, so never above [`MAX_BUFFER_SIZE`] (a damaged log file header
    /// claiming 4 GB buffers made the reader reserve 4 GB per compressed buffer).
    fn max_filled(&self) -> u32 {
        if self.session_buffer_size == 0 {
            MAX_BUFFER_SIZE
        } else {
            self.session_buffer_size.min(MAX_BUFFER_SIZE)
        }
    }

    /// A buffer header at `pos` that passes validation and whose first record looks sane.
    fn plausible(&self, pos: usize) -> Option<BufferHeader> {
        let h = BufferHeader::parse(self.data.get(pos..)?)?;
        h.validate(self.max_filled()).ok()?;
        if h.filled < BUFFER_HEADER_SIZE as u32 {
            // Empty buffers exist but are not good resynchronisation points.
            return None;
        }
        if !h.is_compressed() {
            if self.session_buffer_size != 0 && h.buffer_size > self.session_buffer_size {
                return None;
            }
            if h.filled > BUFFER_HEADER_SIZE as u32 {
                let m = u32_at(self.data, pos + BUFFER_HEADER_SIZE)?;
                let ty = (m >> 16) as u8;
                if m >> 24 & 0x80 == 0 || !super::headers::known_header_type(ty) {
                    return None;
                }
            }
        }
        Some(h)
    }

    fn resync(&self, damaged: usize) -> Option<usize> {
        let step = self.session_buffer_size as usize;
        if step >= BUFFER_HEADER_SIZE {
            // Most buffers have the session's buffer size: try the slot right after this one.
            let p = damaged.checked_add(step)?;
            if self.plausible(p).is_some() {
                return Some(p);
            }
        }
        let end = self.data.len().saturating_sub(BUFFER_HEADER_SIZE - 1);
        (damaged + 1..end).find(|&p| self.quick_reject(p) && self.plausible(p).is_some())
    }

    /// Cheap test on the flag and type words before the full check.
    fn quick_reject(&self, p: usize) -> bool {
        matches!(
            (u16_at(self.data, p + 0x34), u16_at(self.data, p + 0x36)),
            (Some(f), Some(t)) if f & 0xFF80 == 0 && t <= 7
        )
    }
}

impl Iterator for BufferWalk<'_> {
    type Item = BufferStep;

    fn next(&mut self) -> Option<BufferStep> {
        let pos = self.pos;
        if pos >= self.data.len() {
            return None;
        }
        let rest = self.data.get(pos..)?;
        let problem = match BufferHeader::parse(rest) {
            None => format!(
                "truncated buffer header: {} bytes left, {} needed",
                rest.len(),
                BUFFER_HEADER_SIZE
            ),
            Some(h) => match h.validate(self.max_filled()) {
                Ok(()) => {
                    let available = (h.buffer_size as usize).min(rest.len()) as u32;
                    self.pos = pos + h.buffer_size as usize;
                    return Some(BufferStep::Buffer(BufferInfo {
                        offset: pos as u64,
                        header: h,
                        available,
                    }));
                }
                Err(e) => format!("corrupt buffer header: {e}"),
            },
        };
        match self.resync(pos) {
            Some(next) => {
                self.pos = next;
                Some(BufferStep::Damage {
                    offset: pos as u64,
                    message: format!(
                        "{problem}; skipped {:#x} bytes to the next buffer",
                        next - pos
                    ),
                })
            }
            None => {
                self.pos = self.data.len();
                Some(BufferStep::Damage {
                    offset: pos as u64,
                    message: problem,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compressed buffer's header: `buffer_size` bytes on disk, `filled` bytes once
    /// decompressed.
    fn compressed_header(buffer_size: u32, filled: u32) -> Vec<u8> {
        let mut h = vec![0u8; buffer_size as usize];
        h[0..4].copy_from_slice(&buffer_size.to_le_bytes());
        h[0x30..0x34].copy_from_slice(&filled.to_le_bytes());
        h[0x34..0x36].copy_from_slice(&FLAG_COMPRESSED.to_le_bytes());
        h
    }

    /// Found by the `etl_reader` fuzz target: a log file header claiming 4 GB session buffers
    /// let a compressed buffer claim 4 GB of output, which the reader reserved up front (an
    /// allocation failure aborts the process). The claim is bounded by the largest buffer size.
    #[test]
    fn compressed_fill_beyond_the_largest_buffer_is_damage() {
        let data = compressed_header(0x200, 0xFFFF_FFB7);
        let steps: Vec<_> = BufferWalk::new(&data, u32::MAX).collect();
        match steps.as_slice() {
            [BufferStep::Damage { offset: 0, message }] => {
                assert!(
                    message.contains("compressed buffer fill 0xffffffb7"),
                    "{message}"
                )
            }
            _ => panic!("expected one damaged buffer"),
        }
        // the largest plausible claim is still read
        let data = compressed_header(0x200, MAX_BUFFER_SIZE);
        let steps: Vec<_> = BufferWalk::new(&data, u32::MAX).collect();
        assert!(matches!(steps.as_slice(), [BufferStep::Buffer(_)]));
    }
}
