//! The completions of a trace's disk I/O, by IRP: what `io:::start` reads ahead for. ETW's
//! DiskIo ReadInit/WriteInit/FlushInit records (DiskIo_TypeGroup2) carry only the IRP and the
//! issuing thread; the size, offset, disk and file object of the request are in its completion
//! record (Read/Write, DiskIo_TypeGroup1; FlushBuffers, DiskIo_TypeGroup3), which names the
//! same IRP. A recorded trace is read ahead once (`TraceSource::collect_disk_completions`), so
//! that `io:::start` can give `b_bcount`, `b_blkno` and the file as DTrace's io provider does
//! at the start of the I/O. IRPs are reused: walking the records in time order, a start is
//! paired with the next completion of its kind on its IRP, before any other start on it.

use crate::etw::decode::DecodedEvent;
use crate::etw::record::EventRecord;
use crate::fasthash::FastMap;

/// What the completion record of one disk I/O says about the request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskCompletion {
    /// When the completion was logged (ns since the trace's start).
    pub time_ns: u64,
    pub transfer_size: u64,
    pub byte_offset: u64,
    pub disk_number: u64,
    pub irp_flags: u64,
    pub file_object: u64,
}

/// The completion of each start, found by walking the DiskIo records in time order.
#[derive(Default)]
pub struct DiskCompletions {
    /// The start in flight on each IRP: (its opcode, its time).
    pending: FastMap<u64, (u8, u64)>,
    /// (IRP, time of the start) → what its completion said.
    by_start: FastMap<(u64, u64), DiskCompletion>,
}

/// The DiskIo start opcodes (ReadInit, WriteInit, FlushInit) and the completion opcode of each
/// (Read, Write, FlushBuffers).
pub const START_COMPLETION: [(u8, u8); 3] = [(12, 10), (13, 11), (15, 14)];

/// Whether a DiskIo opcode is a start or a completion: the records the read-ahead pass notes.
pub fn is_start_or_completion(opcode: u8) -> bool {
    START_COMPLETION
        .iter()
        .any(|&(s, c)| s == opcode || c == opcode)
}

impl DiskCompletions {
    pub fn new() -> DiskCompletions {
        DiskCompletions::default()
    }

    /// Notes a decoded DiskIo record; they come in time order. A start is in flight on its IRP
    /// until a completion of its kind names that IRP; a completion of another kind, or a later
    /// start, ends it unmatched (the trace lost a record).
    pub fn note(&mut self, ev: &EventRecord<'_>, dec: &DecodedEvent<'_>) {
        let Some(irp) = dec.u64("Irp") else { return };
        let op = ev.opcode;
        if START_COMPLETION.iter().any(|&(s, _)| s == op) {
            self.pending.insert(irp, (op, ev.time_ns));
            return;
        }
        let Some(&(start, _)) = START_COMPLETION.iter().find(|&&(_, c)| c == op) else {
            return;
        };
        let Some((pending_op, at)) = self.pending.remove(&irp) else {
            return;
        };
        if pending_op != start {
            return;
        }
        let c = DiskCompletion {
            time_ns: ev.time_ns,
            transfer_size: dec.u64("TransferSize").unwrap_or(0),
            byte_offset: dec.u64("ByteOffset").unwrap_or(0),
            disk_number: dec.u64("DiskNumber").unwrap_or(0),
            irp_flags: dec.u64("IrpFlags").unwrap_or(0),
            file_object: dec.u64("FileObject").unwrap_or(0),
        };
        self.by_start.insert((irp, at), c);
    }

    /// The completion of the I/O that IRP `irp` started at `time_ns`.
    pub fn completion_of(&self, irp: u64, time_ns: u64) -> Option<&DiskCompletion> {
        self.by_start.get(&(irp, time_ns))
    }

    /// How many starts were matched with their completion.
    pub fn len(&self) -> usize {
        self.by_start.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_start.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etw::decode::Decoder;
    use crate::etw::record::{Guid, HeaderKind};

    /// A DiskIo record (version 2, 64-bit) at `time_ns`: a start carries the IRP alone, a
    /// completion (Read/Write) its size too.
    fn disk(opcode: u8, time_ns: u64, irp: u64, size: u32) -> (Vec<u8>, u8, u64) {
        let mut p = Vec::new();
        if matches!(opcode, 12 | 13 | 15) {
            p.extend_from_slice(&irp.to_le_bytes());
        } else {
            p.extend_from_slice(&0u32.to_le_bytes()); // DiskNumber
            p.extend_from_slice(&0u32.to_le_bytes()); // IrpFlags
            p.extend_from_slice(&size.to_le_bytes());
            p.extend_from_slice(&0u32.to_le_bytes());
            p.extend_from_slice(&4096u64.to_le_bytes()); // ByteOffset
            p.extend_from_slice(&0xf00du64.to_le_bytes()); // FileObject
            p.extend_from_slice(&irp.to_le_bytes());
            p.extend_from_slice(&0u64.to_le_bytes());
        }
        (p, opcode, time_ns)
    }

    fn note_all(records: &[(Vec<u8>, u8, u64)]) -> DiskCompletions {
        let decoder = Decoder::new();
        let mut d = DiskCompletions::new();
        for (payload, opcode, time_ns) in records {
            let ev = EventRecord {
                header_type: 0,
                kind: HeaderKind::System,
                flags: 0,
                provider: Guid::default(),
                kernel_group: Some(crate::providers::etw::group::DISK_IO),
                id: 0,
                version: 2,
                channel: 0,
                level: 0,
                opcode: *opcode,
                task: 0,
                keyword: 0,
                pid: 4,
                tid: 8,
                cpu: 0,
                raw_timestamp: *time_ns as i64,
                time_ns: *time_ns,
                wall_ns: *time_ns,
                pointer_size: 8,
                activity_id: Guid::default(),
                payload,
                extended: Default::default(),
            };
            d.note(&ev, &decoder.decode(&ev));
        }
        d
    }

    #[test]
    fn a_start_is_paired_with_the_next_completion_of_its_kind_on_its_irp() {
        let d = note_all(&[
            disk(12, 100, 7, 0),   // read start on IRP 7
            disk(13, 110, 9, 0),   // write start on IRP 9
            disk(10, 150, 7, 512), // read done: pairs with 100
            disk(11, 160, 9, 1024),
            disk(15, 200, 7, 0),  // flush start on IRP 7 (reused) ...
            disk(11, 250, 7, 64), // ... a write completion is not its
            disk(13, 300, 7, 0),
            disk(11, 350, 7, 4096),
        ]);
        let size = |irp, t| d.completion_of(irp, t).map(|c| c.transfer_size);
        assert_eq!(size(7, 100), Some(512));
        assert_eq!(size(9, 110), Some(1024));
        assert_eq!(size(7, 200), None);
        assert_eq!(size(7, 300), Some(4096));
        assert_eq!(d.completion_of(7, 100).map(|c| c.file_object), Some(0xf00d));
        assert_eq!(d.completion_of(7, 100).map(|c| c.byte_offset), Some(4096));
        assert_eq!(d.len(), 3);
    }
}
