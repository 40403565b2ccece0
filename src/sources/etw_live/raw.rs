//! The records a live ETW session delivers, platform-neutral: `repr(C)` mirrors of Windows'
//! `EVENT_RECORD`, `EVENT_HEADER` and `EVENT_HEADER_EXTENDED_DATA_ITEM` (same layout, checked
//! against windows-sys when built for Windows), an owned copy of one record taken inside the
//! ProcessTrace callback ([`LiveEvent`]), and the view of that copy as the shared
//! [`EventRecord`] every decoder works on.

use crate::etw::reader::logfile::TimeBase;
use crate::etw::record::{EventRecord, ExtendedItem, Guid, HeaderKind};

/// `EVENT_HEADER.Flags` bits.
pub mod flag {
    pub const EXTENDED_INFO: u16 = 0x0001;
    pub const HEADER_32_BIT: u16 = 0x0020;
    pub const HEADER_64_BIT: u16 = 0x0040;
    /// The event came from a classic (MOF / kernel) provider: the ProviderId is its class GUID
    /// and the opcode its event type.
    pub const CLASSIC_HEADER: u16 = 0x0100;
    pub const PROCESSOR_INDEX: u16 = 0x0200;
}

/// `GUID`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawGuid {
    pub data1: u32,
    pub data2: u16,
    pub data3: u16,
    pub data4: [u8; 8],
}

impl From<RawGuid> for Guid {
    fn from(g: RawGuid) -> Guid {
        Guid {
            data1: g.data1,
            data2: g.data2,
            data3: g.data3,
            data4: g.data4,
        }
    }
}

impl From<Guid> for RawGuid {
    fn from(g: Guid) -> RawGuid {
        RawGuid {
            data1: g.data1,
            data2: g.data2,
            data3: g.data3,
            data4: g.data4,
        }
    }
}

/// `EVENT_DESCRIPTOR`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RawEventDescriptor {
    pub id: u16,
    pub version: u8,
    pub channel: u8,
    pub level: u8,
    pub opcode: u8,
    pub task: u16,
    pub keyword: u64,
}

/// `EVENT_HEADER` (80 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RawEventHeader {
    pub size: u16,
    pub header_type: u16,
    pub flags: u16,
    pub event_property: u16,
    pub thread_id: u32,
    pub process_id: u32,
    /// Raw timestamp: the session's clock (QPC with PROCESS_TRACE_MODE_RAW_TIMESTAMP).
    pub time_stamp: i64,
    pub provider_id: RawGuid,
    pub descriptor: RawEventDescriptor,
    /// KernelTime/UserTime, or ProcessorTime for private sessions.
    pub processor_time: u64,
    pub activity_id: RawGuid,
}

/// `ETW_BUFFER_CONTEXT`: the processor (a byte, or a 16-bit index when the header says
/// PROCESSOR_INDEX) and the logger id.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RawBufferContext {
    pub processor_index: u16,
    pub logger_id: u16,
}

/// `EVENT_HEADER_EXTENDED_DATA_ITEM` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RawExtendedItem {
    pub reserved1: u16,
    pub ext_type: u16,
    /// Bit 0: Linkage; the rest reserved.
    pub linkage: u16,
    pub data_size: u16,
    pub data_ptr: u64,
}

/// `EVENT_RECORD` (112 bytes on 64-bit Windows).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RawEventRecord {
    pub header: RawEventHeader,
    pub buffer_context: RawBufferContext,
    pub extended_data_count: u16,
    pub user_data_length: u16,
    pub extended_data: *const RawExtendedItem,
    pub user_data: *const u8,
    /// `EVENT_TRACE_LOGFILEW.Context` of the consumer that opened the session.
    pub user_context: *mut std::ffi::c_void,
}

/// `EVENT_HEADER_EXT_TYPE_EVENT_SCHEMA_TL`: a TraceLogging event's own schema.
pub const EXT_SCHEMA_TL: u16 = 11;

/// Whether a record carries its TraceLogging schema (so that TDH need not be asked).
pub fn has_tracelogging_schema(rec: &RawEventRecord) -> bool {
    if rec.extended_data.is_null() || rec.header.flags & flag::EXTENDED_INFO == 0 {
        return false;
    }
    // SAFETY: inside the callback ETW guarantees `extended_data_count` items at
    // `extended_data` (the same contract as `LiveEvent::copy_from`)
    let items =
        unsafe { std::slice::from_raw_parts(rec.extended_data, rec.extended_data_count as usize) };
    items.iter().any(|x| x.ext_type == EXT_SCHEMA_TL)
}

/// One record copied out of the session's buffers (the callback's `EVENT_RECORD` is only
/// valid during the callback): header, payload and extended items.
#[derive(Clone, Debug)]
pub struct LiveEvent {
    pub header: RawEventHeader,
    pub cpu: u16,
    pub payload: Vec<u8>,
    pub extended: Vec<(u16, Vec<u8>)>,
}

impl LiveEvent {
    /// Copies a record.
    ///
    /// # Safety
    /// `rec.user_data` must point at `user_data_length` bytes and `rec.extended_data` at
    /// `extended_data_count` items whose `data_ptr` point at `data_size` bytes (what ETW
    /// guarantees inside the EventRecordCallback), or be null with a zero count.
    pub unsafe fn copy_from(rec: &RawEventRecord) -> LiveEvent {
        let payload = if rec.user_data.is_null() || rec.user_data_length == 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(rec.user_data, rec.user_data_length as usize).to_vec()
        };
        let mut extended = Vec::new();
        if !rec.extended_data.is_null() && rec.header.flags & flag::EXTENDED_INFO != 0 {
            let items =
                std::slice::from_raw_parts(rec.extended_data, rec.extended_data_count as usize);
            for x in items {
                let data = if x.data_ptr == 0 || x.data_size == 0 {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(
                        x.data_ptr as usize as *const u8,
                        x.data_size as usize,
                    )
                    .to_vec()
                };
                extended.push((x.ext_type, data));
            }
        }
        let cpu = if rec.header.flags & flag::PROCESSOR_INDEX != 0 {
            rec.buffer_context.processor_index
        } else {
            rec.buffer_context.processor_index & 0xff
        };
        LiveEvent {
            header: rec.header,
            cpu,
            payload,
            extended,
        }
    }

    /// The record as every decoder sees it. Classic events of the kernel logger carry their
    /// kernel group's class GUID: they get the group back (`kernel_group`), as a file's system
    /// and perfinfo records have it; other classic events are MOF records; the rest are
    /// EVENT_HEADER records. Times come from `time` (the session's clock).
    pub fn record(&self, time: &TimeBase) -> EventRecord<'_> {
        let h = &self.header;
        let provider = Guid::from(h.provider_id);
        let classic = h.flags & flag::CLASSIC_HEADER != 0;
        let kernel_group = if classic {
            kernel_group_of(provider)
        } else {
            None
        };
        let kind = match (classic, kernel_group) {
            (false, _) => HeaderKind::EventHeader,
            // the compact perfinfo records (samples, interrupts, system calls) have no thread
            (true, Some(_)) if h.thread_id == u32::MAX && h.process_id == u32::MAX => {
                HeaderKind::PerfInfo
            }
            (true, Some(_)) => HeaderKind::System,
            (true, None) => HeaderKind::Full,
        };
        let pointer_size = if h.flags & flag::HEADER_32_BIT != 0 {
            4
        } else {
            8
        };
        let mut r = EventRecord {
            header_type: 0,
            kind,
            // as in a file, only EVENT_HEADER records keep their flags
            flags: if classic { 0 } else { h.flags },
            provider,
            kernel_group,
            id: if classic { 0 } else { h.descriptor.id },
            version: h.descriptor.version,
            channel: if classic { 0 } else { h.descriptor.channel },
            level: h.descriptor.level,
            opcode: h.descriptor.opcode,
            task: if classic { 0 } else { h.descriptor.task },
            keyword: if classic { 0 } else { h.descriptor.keyword },
            pid: h.process_id,
            tid: h.thread_id,
            cpu: self.cpu,
            raw_timestamp: 0,
            time_ns: 0,
            wall_ns: 0,
            pointer_size,
            activity_id: if classic {
                Guid::default()
            } else {
                h.activity_id.into()
            },
            payload: &self.payload,
            extended: self
                .extended
                .iter()
                .map(|(t, d)| ExtendedItem {
                    ext_type: *t,
                    data: d,
                })
                .collect(),
        };
        time.stamp(&mut r, h.time_stamp);
        r
    }

    /// The mirror of a record as a live session would deliver it, for replaying a recorded
    /// trace through the live path: kernel and MOF records get the classic header flag, the
    /// pointer-size flag is set from the record ([`RawRecordParts`] then builds the
    /// `EVENT_RECORD` over it).
    pub fn from_record(ev: &EventRecord<'_>) -> LiveEvent {
        let classic = ev.kind != HeaderKind::EventHeader;
        let mut flags = if classic {
            flag::CLASSIC_HEADER
        } else {
            ev.flags & !(flag::HEADER_32_BIT | flag::HEADER_64_BIT)
        };
        flags |= if ev.pointer_size == 4 {
            flag::HEADER_32_BIT
        } else {
            flag::HEADER_64_BIT
        };
        if !ev.extended.is_empty() {
            flags |= flag::EXTENDED_INFO;
        }
        if ev.cpu > 0xff {
            flags |= flag::PROCESSOR_INDEX;
        }
        LiveEvent {
            header: RawEventHeader {
                size: std::mem::size_of::<RawEventHeader>() as u16,
                header_type: 0,
                flags,
                event_property: 0,
                thread_id: ev.tid,
                process_id: ev.pid,
                time_stamp: ev.raw_timestamp,
                provider_id: ev.provider.into(),
                descriptor: RawEventDescriptor {
                    id: ev.id,
                    version: ev.version,
                    channel: ev.channel,
                    level: ev.level,
                    opcode: ev.opcode,
                    task: ev.task,
                    keyword: ev.keyword,
                },
                processor_time: 0,
                activity_id: ev.activity_id.into(),
            },
            cpu: ev.cpu,
            payload: ev.payload.to_vec(),
            extended: ev
                .extended
                .iter()
                .map(|x| (x.ext_type, x.data.to_vec()))
                .collect(),
        }
    }
}

/// An `EVENT_RECORD` built over a [`LiveEvent`]'s bytes, as ETW hands one to the callback:
/// `items` holds the extended items the record points at.
pub struct RawRecordParts {
    pub record: RawEventRecord,
    pub items: Vec<RawExtendedItem>,
}

impl RawRecordParts {
    /// Builds the record; `context` goes to `UserContext`. The record points into `ev` and
    /// into the returned value's `items` (call [`RawRecordParts::record`] after moving it).
    pub fn new(ev: &LiveEvent, context: *mut std::ffi::c_void) -> RawRecordParts {
        let items = ev
            .extended
            .iter()
            .enumerate()
            .map(|(i, (t, d))| RawExtendedItem {
                reserved1: 0,
                ext_type: *t,
                linkage: (i + 1 < ev.extended.len()) as u16,
                data_size: d.len() as u16,
                data_ptr: d.as_ptr() as usize as u64,
            })
            .collect();
        let mut cpu = ev.cpu;
        if ev.header.flags & flag::PROCESSOR_INDEX == 0 {
            cpu &= 0xff;
        }
        RawRecordParts {
            record: RawEventRecord {
                header: ev.header,
                buffer_context: RawBufferContext {
                    processor_index: cpu,
                    logger_id: 0,
                },
                extended_data_count: ev.extended.len() as u16,
                user_data_length: ev.payload.len() as u16,
                extended_data: std::ptr::null(),
                user_data: if ev.payload.is_empty() {
                    std::ptr::null()
                } else {
                    ev.payload.as_ptr()
                },
                user_context: context,
            },
            items,
        }
    }

    /// The record, pointing at this value's extended items.
    pub fn record(&mut self) -> RawEventRecord {
        let mut r = self.record;
        r.extended_data = if self.items.is_empty() {
            std::ptr::null()
        } else {
            self.items.as_ptr()
        };
        r
    }
}

/// The kernel group (`HookId >> 8`) whose class GUID this is.
pub fn kernel_group_of(provider: Guid) -> Option<u8> {
    use crate::etw::reader::headers::{kernel_group_guid, SYSTEM_TRACE_CONTROL_GUID};
    static TABLE: std::sync::OnceLock<Vec<(Guid, u8)>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        (0..=255u8)
            .map(|g| (kernel_group_guid(g), g))
            .filter(|(guid, _)| *guid != SYSTEM_TRACE_CONTROL_GUID)
            .collect()
    });
    table.iter().find(|(g, _)| *g == provider).map(|(_, n)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_windows() {
        assert_eq!(size_of::<RawGuid>(), 16);
        assert_eq!(size_of::<RawEventDescriptor>(), 16);
        assert_eq!(size_of::<RawEventHeader>(), 80);
        assert_eq!(offset_of!(RawEventHeader, time_stamp), 16);
        assert_eq!(offset_of!(RawEventHeader, provider_id), 24);
        assert_eq!(offset_of!(RawEventHeader, descriptor), 40);
        assert_eq!(offset_of!(RawEventHeader, activity_id), 64);
        assert_eq!(size_of::<RawExtendedItem>(), 16);
        if size_of::<usize>() == 8 {
            assert_eq!(size_of::<RawEventRecord>(), 112);
            assert_eq!(offset_of!(RawEventRecord, extended_data), 88);
            assert_eq!(offset_of!(RawEventRecord, user_context), 104);
        }
        #[cfg(windows)]
        {
            use windows_sys::Win32::System::Diagnostics::Etw as w;
            assert_eq!(size_of::<w::EVENT_RECORD>(), size_of::<RawEventRecord>());
            assert_eq!(size_of::<w::EVENT_HEADER>(), size_of::<RawEventHeader>());
            assert_eq!(
                size_of::<w::EVENT_HEADER_EXTENDED_DATA_ITEM>(),
                size_of::<RawExtendedItem>()
            );
            assert_eq!(
                offset_of!(w::EVENT_RECORD, UserContext),
                offset_of!(RawEventRecord, user_context)
            );
            assert_eq!(
                offset_of!(w::EVENT_RECORD, UserData),
                offset_of!(RawEventRecord, user_data)
            );
        }
    }

    #[test]
    fn kernel_guids_give_their_group_back() {
        use crate::etw::reader::headers::kernel_group_guid;
        assert_eq!(kernel_group_of(kernel_group_guid(0x05)), Some(0x05));
        assert_eq!(kernel_group_of(kernel_group_guid(0x0F)), Some(0x0F));
        assert_eq!(kernel_group_of(Guid::default()), None);
    }

    #[test]
    fn a_raw_record_copies_and_views_like_the_original() {
        let payload = [1u8, 2, 3, 4, 5];
        let stack = [9u8; 24];
        let ev = EventRecord {
            header_type: 0,
            kind: HeaderKind::EventHeader,
            flags: flag::EXTENDED_INFO | flag::HEADER_64_BIT,
            provider: Guid::parse("1c95126e-7eea-49a9-a3fe-a378b03ddb4d").unwrap(),
            kernel_group: None,
            id: 3008,
            version: 1,
            channel: 16,
            level: 4,
            opcode: 0,
            task: 3008,
            keyword: 0x8000_0000_0000_0000,
            pid: 1234,
            tid: 5678,
            cpu: 3,
            raw_timestamp: 10_000_000,
            time_ns: 0,
            wall_ns: 0,
            pointer_size: 8,
            activity_id: Guid::default(),
            payload: &payload,
            extended: [ExtendedItem {
                ext_type: 6,
                data: &stack,
            }]
            .into_iter()
            .collect(),
        };
        let live = LiveEvent::from_record(&ev);
        let mut parts = RawRecordParts::new(&live, std::ptr::null_mut());
        let raw = parts.record();
        let copy = unsafe { LiveEvent::copy_from(&raw) };
        let tb = TimeBase::default();
        let back = copy.record(&tb);
        assert_eq!(back.provider, ev.provider);
        assert_eq!(
            (back.id, back.version, back.level, back.task),
            (3008, 1, 4, 3008)
        );
        assert_eq!((back.pid, back.tid, back.cpu), (1234, 5678, 3));
        assert_eq!(back.payload, &payload);
        assert_eq!(back.extended, ev.extended);
        assert_eq!(back.kind, HeaderKind::EventHeader);
        // 10^7 ticks of a 10 MHz clock from 0
        assert_eq!(back.time_ns, 1_000_000_000);
    }
}
