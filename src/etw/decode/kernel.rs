//! The kernel (NT Kernel Logger) event layouts by group, opcode and version (FORMAT.md 4.9–4.10),
//! plus the KernelTraceControl classic events merged in by xperf/WPR/PerfView (4.11).

use super::layout::{f, fv, Field, Layout, Source};
use super::value::FieldType::{self, *};
use crate::etw::record::Guid;

const fn g(d1: u32, d2: u16, d3: u16, d4: [u8; 8]) -> Guid {
    Guid {
        data1: d1,
        data2: d2,
        data3: d3,
        data4: d4,
    }
}

/// Kernel groups: (group, class name, provider GUID).
pub const GROUPS: &[(u8, &str, Guid)] = &[
    (
        0x00,
        "EventTrace",
        g(
            0x68fdd900,
            0x4a3e,
            0x11d1,
            [0x84, 0xf4, 0x00, 0x00, 0xf8, 0x04, 0x64, 0xe3],
        ),
    ),
    (
        0x01,
        "DiskIo",
        g(
            0x3d6fa8d4,
            0xfe05,
            0x11d0,
            [0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c],
        ),
    ),
    (
        0x02,
        "PageFault",
        g(
            0x3d6fa8d3,
            0xfe05,
            0x11d0,
            [0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c],
        ),
    ),
    (
        0x03,
        "Process",
        g(
            0x3d6fa8d0,
            0xfe05,
            0x11d0,
            [0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c],
        ),
    ),
    (
        0x04,
        "FileIo",
        g(
            0x90cbdc39,
            0x4a3e,
            0x11d1,
            [0x84, 0xf4, 0x00, 0x00, 0xf8, 0x04, 0x64, 0xe3],
        ),
    ),
    (
        0x05,
        "Thread",
        g(
            0x3d6fa8d1,
            0xfe05,
            0x11d0,
            [0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c],
        ),
    ),
    (
        0x06,
        "TcpIp",
        g(
            0x9a280ac0,
            0xc8e0,
            0x11d1,
            [0x84, 0xe2, 0x00, 0xc0, 0x4f, 0xb9, 0x98, 0xa2],
        ),
    ),
    (
        0x08,
        "UdpIp",
        g(
            0xbf3a50c5,
            0xa9c9,
            0x4988,
            [0xa0, 0x05, 0x2d, 0xf0, 0xb7, 0xc8, 0x0f, 0x80],
        ),
    ),
    (
        0x09,
        "Registry",
        g(
            0xae53722e,
            0xc863,
            0x11d2,
            [0x86, 0x59, 0x00, 0xc0, 0x4f, 0xa3, 0x21, 0xa1],
        ),
    ),
    (
        0x0B,
        "SystemConfig",
        g(
            0x01853a65,
            0x418f,
            0x4f36,
            [0xae, 0xfc, 0xdc, 0x0f, 0x1d, 0x2f, 0xd2, 0x35],
        ),
    ),
    (
        0x0F,
        "PerfInfo",
        g(
            0xce1dbfb4,
            0x137e,
            0x4da6,
            [0x87, 0xb0, 0x3f, 0x59, 0xaa, 0x10, 0x2c, 0xbc],
        ),
    ),
    (
        0x14,
        "Image",
        g(
            0x2cb15d1d,
            0x5fc1,
            0x11d2,
            [0xab, 0xe1, 0x00, 0xa0, 0xc9, 0x11, 0xf5, 0x18],
        ),
    ),
    (
        0x18,
        "StackWalk",
        g(
            0xdef2fe46,
            0x7bd6,
            0x4b80,
            [0xbd, 0x94, 0xf5, 0x7f, 0xe2, 0x0d, 0x0c, 0xe3],
        ),
    ),
];

pub fn group_guid(group: u8) -> Option<Guid> {
    GROUPS
        .iter()
        .find(|(gr, _, _)| *gr == group)
        .map(|(_, _, g)| *g)
}

/// The class name of a kernel group.
pub fn group_name(group: u8) -> Option<&'static str> {
    GROUPS
        .iter()
        .find(|(gr, _, _)| *gr == group)
        .map(|(_, n, _)| *n)
}

const K_HEADER: u8 = 0x00;
const K_DISK: u8 = 0x01;
const K_PF: u8 = 0x02;
const K_PROC: u8 = 0x03;
const K_FILE: u8 = 0x04;
const K_THREAD: u8 = 0x05;
const K_TCP: u8 = 0x06;
const K_UDP: u8 = 0x08;
const K_REG: u8 = 0x09;
const K_CONFIG: u8 = 0x0B;
const K_PERF: u8 = 0x0F;
const K_IMAGE: u8 = 0x14;
const K_STACK: u8 = 0x18;

/// KernelTraceControl ImageID provider.
pub const IMAGE_ID: Guid = g(
    0xb3e675d7,
    0x2554,
    0x4f18,
    [0x83, 0x0b, 0x27, 0x62, 0x73, 0x25, 0x60, 0xde],
);
/// KernelTraceControl EventMetadata provider (TRACE_EVENT_INFO / EVENT_MAP_INFO).
pub const EVENT_METADATA: Guid = g(
    0xbbccf6c1,
    0x6cd1,
    0x48c4,
    [0x80, 0xff, 0x83, 0x94, 0x82, 0xe3, 0x76, 0x71],
);
/// KernelTraceControl SysConfig provider (build info, system paths, volume mapping).
pub const SYS_CONFIG: Guid = g(
    0x9b79ee91,
    0xb5fd,
    0x41c0,
    [0xa2, 0x43, 0x42, 0x48, 0xe2, 0x66, 0xe9, 0xd0],
);
/// KernelTraceControl WinSat provider.
pub const WINSAT: Guid = g(
    0xed54dff8,
    0xc409,
    0x4cf6,
    [0xbf, 0x83, 0x05, 0xe1, 0xe6, 0x1a, 0x09, 0xc4],
);

const fn k(
    group: u8,
    class: &'static str,
    opcodes: &'static [(u8, &'static str)],
    lo: u8,
    hi: u8,
    fields: &'static [Field],
) -> Layout {
    Layout {
        source: Source::Kernel(group),
        class,
        opcodes,
        versions: lo..=hi,
        fields,
    }
}
const fn c(
    guid: Guid,
    class: &'static str,
    opcodes: &'static [(u8, &'static str)],
    lo: u8,
    hi: u8,
    fields: &'static [Field],
) -> Layout {
    Layout {
        source: Source::Classic(guid),
        class,
        opcodes,
        versions: lo..=hi,
        fields,
    }
}

const RAW: &[Field] = &[f("Data", Binary)];
const U32: FieldType = FieldType::U32;

const HEADER: &[Field] = &[
    f("BufferSize", U32),
    f("Version", U32),
    f("ProviderVersion", U32),
    f("NumberOfProcessors", U32),
    f("EndTime", U64),
    f("TimerResolution", U32),
    f("MaxFileSize", U32),
    f("LogFileMode", HexI32),
    f("BuffersWritten", U32),
    f("StartBuffers", U32),
    f("PointerSize", U32),
    f("EventsLost", U32),
    f("CPUSpeed", U32),
    f("LoggerName", Ptr),
    f("LogFileName", Ptr),
    f("TimeZoneInformation", Bytes(176)),
    f("BootTime", U64),
    f("PerfFreq", U64),
    f("StartTime", U64),
    f("ReservedFlags", HexI32),
    f("BuffersLost", U32),
    f("SessionNameString", Utf16Z),
    f("LogFileNameString", Utf16Z),
];
const HEADER_EXT: &[Field] = &[
    f("GroupMask1", HexI32),
    f("GroupMask2", HexI32),
    f("GroupMask3", HexI32),
    f("GroupMask4", HexI32),
    f("GroupMask5", HexI32),
    f("GroupMask6", HexI32),
    f("GroupMask7", HexI32),
    f("GroupMask8", HexI32),
    f("KernelEventVersion", HexI32),
];

// Process (v3 = Windows 7, v4 = Windows 8+, v5 adds trailing fields).
const PROCESS: &[Field] = &[
    f("UniqueProcessKey", Ptr),
    f("ProcessId", U32),
    f("ParentId", U32),
    f("SessionId", U32),
    f("ExitStatus", I32),
    f("DirectoryTableBase", Ptr),
    fv("Flags", U32, 4),
    f("UserSID", WmiSid),
    f("ImageFileName", AnsiZ),
    f("CommandLine", Utf16Z),
    fv("PackageFullName", Utf16Z, 4),
    fv("ApplicationId", Utf16Z, 4),
];
const PROCESS_CTR: &[Field] = &[
    f("ProcessId", U32),
    f("PageFaultCount", U32),
    f("HandleCount", U32),
    f("Reserved", U32),
    f("PeakVirtualSize", SizeT),
    f("PeakWorkingSetSize", SizeT),
    f("PeakPagefileUsage", SizeT),
    f("QuotaPeakPagedPoolUsage", SizeT),
    f("QuotaPeakNonPagedPoolUsage", SizeT),
    f("VirtualSize", SizeT),
    f("WorkingSetSize", SizeT),
    f("PagefileUsage", SizeT),
    f("QuotaPagedPoolUsage", SizeT),
    f("QuotaNonPagedPoolUsage", SizeT),
    f("PrivatePageCount", SizeT),
];
const PROCESS_TERMINATE: &[Field] = &[f("ProcessId", U32)];

const THREAD: &[Field] = &[
    f("ProcessId", U32),
    f("TThreadId", U32),
    f("StackBase", Ptr),
    f("StackLimit", Ptr),
    f("UserStackBase", Ptr),
    f("UserStackLimit", Ptr),
    f("Affinity", Ptr),
    f("Win32StartAddr", Ptr),
    f("TebBase", Ptr),
    f("SubProcessTag", U32),
    f("BasePriority", U8),
    f("PagePriority", U8),
    f("IoPriority", U8),
    f("ThreadFlags", U8),
    f("ThreadName", Utf16Z),
];
const THREAD_V2: &[Field] = &[
    f("ProcessId", U32),
    f("TThreadId", U32),
    f("StackBase", Ptr),
    f("StackLimit", Ptr),
    f("UserStackBase", Ptr),
    f("UserStackLimit", Ptr),
    f("StartAddr", Ptr),
    f("Win32StartAddr", Ptr),
    f("TebBase", Ptr),
    f("SubProcessTag", U32),
];
const CSWITCH: &[Field] = &[
    f("NewThreadId", U32),
    f("OldThreadId", U32),
    f("NewThreadPriority", I8),
    f("OldThreadPriority", I8),
    f("PreviousCState", U8),
    f("SpareByte", I8),
    f("OldThreadWaitReason", I8),
    f("OldThreadWaitMode", I8),
    f("OldThreadState", I8),
    f("OldThreadWaitIdealProcessor", I8),
    f("NewThreadWaitTime", U32),
    f("Reserved", U32),
];
const READY_THREAD: &[Field] = &[
    f("TThreadId", U32),
    f("AdjustReason", I8),
    f("AdjustIncrement", I8),
    f("Flag", I8),
    f("Reserved", I8),
];
const THREAD_SET_NAME: &[Field] = &[
    f("ProcessId", U32),
    f("TThreadId", U32),
    f("ThreadName", Utf16Z),
];
const KQUEUE: &[Field] = &[f("Entry", Ptr), f("Data", Binary)];

const IMAGE_V2: &[Field] = &[
    f("ImageBase", Ptr),
    f("ImageSize", Ptr),
    f("ProcessId", U32),
    f("ImageChecksum", U32),
    f("TimeDateStamp", U32),
    f("Reserved0", U32),
    f("DefaultBase", Ptr),
    f("Reserved1", U32),
    f("Reserved2", U32),
    f("Reserved3", U32),
    f("Reserved4", U32),
    f("FileName", Utf16Z),
];
const IMAGE_V3: &[Field] = &[
    f("ImageBase", Ptr),
    f("ImageSize", Ptr),
    f("ProcessId", U32),
    f("ImageChecksum", U32),
    f("TimeDateStamp", U32),
    f("SignatureLevel", U8),
    f("SignatureType", U8),
    f("Reserved0", U16),
    f("DefaultBase", Ptr),
    f("Reserved1", U32),
    f("Reserved2", U32),
    f("Reserved3", U32),
    f("Reserved4", U32),
    f("FileName", Utf16Z),
];
const IMAGE_BASE: &[Field] = &[f("ImageBase", Ptr)];

const DISK_IO: &[Field] = &[
    f("DiskNumber", U32),
    f("IrpFlags", HexI32),
    f("TransferSize", U32),
    f("Reserved", U32),
    f("ByteOffset", U64),
    f("FileObject", Ptr),
    f("Irp", Ptr),
    f("HighResResponseTime", U64),
    fv("IssuingThreadId", U32, 3),
];
const DISK_IO_INIT: &[Field] = &[f("Irp", Ptr), fv("IssuingThreadId", U32, 3)];
const DISK_IO_FLUSH: &[Field] = &[
    f("DiskNumber", U32),
    f("IrpFlags", HexI32),
    f("HighResResponseTime", U64),
    f("Irp", Ptr),
    fv("IssuingThreadId", U32, 3),
];

const FILE_NAME: &[Field] = &[f("FileObject", Ptr), f("FileName", Utf16Z)];
const FILE_CREATE_V2: &[Field] = &[
    f("IrpPtr", Ptr),
    f("TTID", Ptr),
    f("FileObject", Ptr),
    f("CreateOptions", HexI32),
    f("FileAttributes", HexI32),
    f("ShareAccess", HexI32),
    f("OpenPath", Utf16Z),
];
const FILE_CREATE_V3: &[Field] = &[
    f("IrpPtr", Ptr),
    f("FileObject", Ptr),
    f("TTID", U32),
    f("CreateOptions", HexI32),
    f("FileAttributes", HexI32),
    f("ShareAccess", HexI32),
    f("OpenPath", Utf16Z),
];
const FILE_RW_V2: &[Field] = &[
    f("Offset", U64),
    f("IrpPtr", Ptr),
    f("TTID", Ptr),
    f("FileObject", Ptr),
    f("FileKey", Ptr),
    f("IoSize", U32),
    f("IoFlags", HexI32),
];
const FILE_RW_V3: &[Field] = &[
    f("Offset", U64),
    f("IrpPtr", Ptr),
    f("FileObject", Ptr),
    f("FileKey", Ptr),
    f("TTID", U32),
    f("IoSize", U32),
    f("IoFlags", HexI32),
];
const FILE_SIMPLE_V2: &[Field] = &[
    f("IrpPtr", Ptr),
    f("TTID", Ptr),
    f("FileObject", Ptr),
    f("FileKey", Ptr),
];
const FILE_SIMPLE_V3: &[Field] = &[
    f("IrpPtr", Ptr),
    f("FileObject", Ptr),
    f("FileKey", Ptr),
    f("TTID", U32),
];
const FILE_INFO_V2: &[Field] = &[
    f("IrpPtr", Ptr),
    f("TTID", Ptr),
    f("FileObject", Ptr),
    f("FileKey", Ptr),
    f("ExtraInfo", Ptr),
    f("InfoClass", U32),
];
const FILE_INFO_V3: &[Field] = &[
    f("IrpPtr", Ptr),
    f("FileObject", Ptr),
    f("FileKey", Ptr),
    f("ExtraInfo", Ptr),
    f("TTID", U32),
    f("InfoClass", U32),
];
const FILE_DIR_V2: &[Field] = &[
    f("IrpPtr", Ptr),
    f("TTID", Ptr),
    f("FileObject", Ptr),
    f("FileKey", Ptr),
    f("Length", U32),
    f("InfoClass", U32),
    f("FileIndex", U32),
    f("FileName", Utf16Z),
];
const FILE_DIR_V3: &[Field] = &[
    f("IrpPtr", Ptr),
    f("FileObject", Ptr),
    f("FileKey", Ptr),
    f("TTID", U32),
    f("Length", U32),
    f("InfoClass", U32),
    f("FileIndex", U32),
    f("FileName", Utf16Z),
];
const FILE_OP_END: &[Field] = &[f("IrpPtr", Ptr), f("ExtraInfo", Ptr), f("NtStatus", HexI32)];

const REGISTRY: &[Field] = &[
    f("InitialTime", I64),
    f("Status", HexI32),
    f("Index", U32),
    f("KeyHandle", Ptr),
    f("KeyName", Utf16Z),
];

const TCP_SEND4: &[Field] = &[
    f("PID", U32),
    f("size", U32),
    f("daddr", IpV4),
    f("saddr", IpV4),
    f("dport", U16Be),
    f("sport", U16Be),
    f("startime", U32),
    f("endtime", U32),
    f("seqnum", U32),
    f("connid", Ptr),
];
const TCP_GROUP1_4: &[Field] = &[
    f("PID", U32),
    f("size", U32),
    f("daddr", IpV4),
    f("saddr", IpV4),
    f("dport", U16Be),
    f("sport", U16Be),
    f("seqnum", U32),
    f("connid", Ptr),
];
const TCP_CONNECT4: &[Field] = &[
    f("PID", U32),
    f("size", U32),
    f("daddr", IpV4),
    f("saddr", IpV4),
    f("dport", U16Be),
    f("sport", U16Be),
    f("mss", U16),
    f("sackopt", U16),
    f("tsopt", U16),
    f("wsopt", U16),
    f("rcvwin", U32),
    f("rcvwinscale", I16),
    f("sndwinscale", I16),
    f("seqnum", U32),
    f("connid", Ptr),
];
const IP_FAIL: &[Field] = &[f("Proto", U16), f("FailureCode", U16)];
const TCP_SEND6: &[Field] = &[
    f("PID", U32),
    f("size", U32),
    f("daddr", IpV6),
    f("saddr", IpV6),
    f("dport", U16Be),
    f("sport", U16Be),
    f("startime", U32),
    f("endtime", U32),
    f("seqnum", U32),
    f("connid", Ptr),
];
const TCP_GROUP1_6: &[Field] = &[
    f("PID", U32),
    f("size", U32),
    f("daddr", IpV6),
    f("saddr", IpV6),
    f("dport", U16Be),
    f("sport", U16Be),
    f("seqnum", U32),
    f("connid", Ptr),
];
const TCP_CONNECT6: &[Field] = &[
    f("PID", U32),
    f("size", U32),
    f("daddr", IpV6),
    f("saddr", IpV6),
    f("dport", U16Be),
    f("sport", U16Be),
    f("mss", U16),
    f("sackopt", U16),
    f("tsopt", U16),
    f("wsopt", U16),
    f("rcvwin", U32),
    f("rcvwinscale", I16),
    f("sndwinscale", I16),
    f("seqnum", U32),
    f("connid", Ptr),
];

const PAGE_FAULT: &[Field] = &[f("VirtualAddress", Ptr), f("ProgramCounter", Ptr)];
const VIRTUAL_ALLOC: &[Field] = &[
    f("BaseAddress", Ptr),
    f("RegionSize", Ptr),
    f("ProcessId", U32),
    f("Flags", HexI32),
];
const IMAGE_LOAD_BACKED: &[Field] = &[
    f("FileObject", Ptr),
    f("DeviceChar", U32),
    f("FileChar", U16),
    f("LoadFlags", U16),
];
const HARD_FAULT: &[Field] = &[
    f("InitialTime", I64),
    f("ReadOffset", U64),
    f("VirtualAddress", Ptr),
    f("FileObject", Ptr),
    f("TThreadId", U32),
    f("ByteCount", U32),
];

const SAMPLED_PROFILE: &[Field] = &[
    f("InstructionPointer", Ptr),
    f("ThreadId", U32),
    f("Count", U16),
    f("Flags", U8),
    f("Rank", U8),
];
const PMC_SAMPLE: &[Field] = &[
    f("InstructionPointer", Ptr),
    f("ThreadId", U32),
    f("ProfileSource", U16),
    f("Reserved", U16),
];
const SYSCALL_ENTER: &[Field] = &[f("SysCallAddress", Ptr)];
const SYSCALL_EXIT: &[Field] = &[f("SysCallNtStatus", HexI32)];
const ISR: &[Field] = &[
    f("InitialTime", I64),
    f("Routine", Ptr),
    f("ReturnValue", U8),
    f("Vector", U8),
    f("Reserved", U16),
];
const ISR_MSI: &[Field] = &[
    f("InitialTime", I64),
    f("Routine", Ptr),
    f("ReturnValue", U8),
    f("Vector", U8),
    f("Reserved", U16),
    f("MessageNumber", U32),
];
const DPC: &[Field] = &[f("InitialTime", I64), f("Routine", Ptr)];
const PROFILE_INTERVAL: &[Field] = &[
    f("SampleSource", U32),
    f("NewInterval", U32),
    f("OldInterval", U32),
    fv("SourceName", Utf16Z, 3),
];

const STACK: &[Field] = &[
    f("EventTimeStamp", U64),
    f("StackProcess", U32),
    f("StackThread", U32),
    f("Stack", Frames),
];
const STACK_KEY_DEF: &[Field] = &[f("StackKey", Ptr), f("Stack", Frames)];
const STACK_KEY_REF: &[Field] = &[
    f("EventTimeStamp", U64),
    f("StackProcess", U32),
    f("StackThread", U32),
    f("StackKey", Ptr),
];

const CFG_CPU: &[Field] = &[
    f("MHz", U32),
    f("NumberOfProcessors", U32),
    f("MemSize", U32),
    f("PageSize", U32),
    f("AllocationGranularity", U32),
    f("ComputerName", Chars(256)),
    f("DomainName", Chars(134)),
    f("HyperThreadingFlag", Ptr),
    fv("HighestUserAddress", Ptr, 3),
    fv("ProcessorArchitecture", U16, 3),
    fv("ProcessorLevel", U16, 3),
    fv("ProcessorRevision", U16, 3),
    fv("PaeEnabled", U8, 3),
    fv("NxEnabled", U8, 3),
    fv("MemorySpeed", U32, 3),
];
const CFG_PHYDISK: &[Field] = &[
    f("DiskNumber", U32),
    f("BytesPerSector", U32),
    f("SectorsPerTrack", U32),
    f("TracksPerCylinder", U32),
    f("Cylinders", U64),
    f("SCSIPort", U32),
    f("SCSIPath", U32),
    f("SCSITarget", U32),
    f("SCSILun", U32),
    f("Manufacturer", Chars(256)),
    f("PartitionCount", U32),
    f("WriteCacheEnabled", U8),
    f("Pad", U8),
    f("BootDriveLetter", Chars(3)),
    f("Spare", Chars(2)),
];
const CFG_LOGDISK: &[Field] = &[
    f("StartOffset", U64),
    f("PartitionSize", U64),
    f("DiskNumber", U32),
    f("Size", U32),
    f("DriveType", U32),
    f("DriveLetterString", Chars(4)),
    f("Pad1", U32),
    f("PartitionNumber", U32),
    f("SectorsPerCluster", U32),
    f("BytesPerSector", U32),
    f("Pad2", U32),
    f("NumberOfFreeClusters", I64),
    f("TotalNumberOfClusters", I64),
    f("FileSystem", Chars(16)),
    f("VolumeExt", U32),
    f("Pad3", U32),
];
const CFG_NIC: &[Field] = &[
    f("PhysicalAddr", U64),
    f("PhysicalAddrLen", U32),
    f("Ipv4Index", U32),
    f("Ipv6Index", U32),
    f("NICDescription", Utf16Z),
    f("IpAddresses", Utf16Z),
    f("DnsServerAddresses", Utf16Z),
];
const CFG_VIDEO: &[Field] = &[
    f("MemorySize", U32),
    f("XResolution", U32),
    f("YResolution", U32),
    f("BitsPerPixel", U32),
    f("VRefresh", U32),
    f("ChipType", Chars(256)),
    f("DACType", Chars(256)),
    f("AdapterString", Chars(256)),
    f("BiosString", Chars(256)),
    f("DeviceID", Chars(256)),
    f("StateFlags", HexI32),
];
const CFG_SERVICES: &[Field] = &[
    f("ProcessId", U32),
    f("ServiceState", U32),
    f("SubProcessTag", U32),
    f("ServiceName", Utf16Z),
    f("DisplayName", Utf16Z),
    f("ProcessName", Utf16Z),
];
const CFG_POWER: &[Field] = &[
    f("S1", U8),
    f("S2", U8),
    f("S3", U8),
    f("S4", U8),
    f("S5", U8),
    f("Pad1", U8),
    f("Pad2", U8),
    f("Pad3", U8),
];
const CFG_NETWORK: &[Field] = &[
    f("TcbTablePartitions", U32),
    f("MaxHashTableSize", U32),
    f("MaxUserPort", U32),
    f("TcpTimedWaitDelay", U32),
];
const CFG_IRQ: &[Field] = &[
    f("IRQAffinity", U64),
    f("IRQGroup", U16),
    f("Reserved", U16),
    f("IRQNum", U32),
    f("DeviceDescriptionLen", U32),
    f("DeviceDescription", Utf16Z),
];
const CFG_PNP_V3: &[Field] = &[
    f("IDLength", U32),
    f("DescriptionLength", U32),
    f("FriendlyNameLength", U32),
    f("DeviceID", Utf16Z),
    f("DeviceDescription", Utf16Z),
    f("FriendlyName", Utf16Z),
];
const CFG_PNP_V4: &[Field] = &[
    f("ClassGuid", Guid),
    f("UpperFilterCount", U32),
    f("LowerFilterCount", U32),
    fv("DevStatus", HexI32, 5),
    fv("DevProblem", HexI32, 5),
    f("DeviceID", Utf16Z),
    f("DeviceDescription", Utf16Z),
    f("FriendlyName", Utf16Z),
    f("PdoName", Utf16Z),
    f("ServiceName", Utf16Z),
];
const CFG_IDE: &[Field] = &[
    f("TargetId", U32),
    f("DeviceType", U32),
    f("DeviceTimingMode", U32),
    f("LocationInformationLen", U32),
    f("LocationInformation", Utf16Z),
];
const CFG_DPI: &[Field] = &[f("MachineDPI", U32), f("UserDPI", U32)];
const CFG_CI: &[Field] = &[f("CodeIntegrityInfo", HexI32)];
const CFG_PLATFORM: &[Field] = &[
    f("SystemManufacturer", Utf16Z),
    f("SystemProductName", Utf16Z),
    f("BiosDate", Utf16Z),
    f("BiosVersion", Utf16Z),
];

const IMAGE_ID_INFO: &[Field] = &[
    f("ImageBase", Ptr),
    f("ImageSize", Ptr),
    f("ProcessId", U32),
    f("TimeDateStamp", U32),
    f("OriginalFileName", Utf16Z),
];
const DBGID_RSDS: &[Field] = &[
    f("ImageBase", Ptr),
    f("ProcessId", U32),
    f("GuidSig", Guid),
    f("Age", U32),
    f("PdbFileName", AnsiZ),
];
const DBG_PPDB: &[Field] = &[
    f("ImageBase", Ptr),
    f("ProcessId", U32),
    f("TimeDateStamp", U32),
    f("MajorVersion", U16),
    f("MinorVersion", U16),
    f("PdbFileName", AnsiZ),
];
const DBG_DETERM: &[Field] = &[f("ImageBase", Ptr), f("ProcessId", U32)];
const IMAGE_ID_NONE: &[Field] = &[f("ImageBase", Ptr), f("ProcessId", U32)];
const FILE_VERSION: &[Field] = &[
    f("ImageSize", U32),
    f("TimeDateStamp", U32),
    f("OrigFileName", Utf16Z),
    f("FileDescription", Utf16Z),
    f("FileVersion", Utf16Z),
    f("BinFileVersion", Utf16Z),
    f("VerLanguage", Utf16Z),
    f("ProductName", Utf16Z),
    f("CompanyName", Utf16Z),
    f("ProductVersion", Utf16Z),
    f("FileId", Utf16Z),
    f("ProgramId", Utf16Z),
];
const BUILD_INFO: &[Field] = &[
    f("InstallDate", FileTime),
    f("BuildLab", Utf16Z),
    f("ProductName", Utf16Z),
];
const SYSTEM_PATHS: &[Field] = &[
    f("SystemDirectory", Utf16Z),
    f("SystemWindowsDirectory", Utf16Z),
];
const VOLUME_MAPPING: &[Field] = &[f("NtPath", Utf16Z), f("DosPath", Utf16Z)];
const WINSAT_XML: &[Field] = &[f("Xml", Utf16Z)];

/// Every static layout: kernel groups and KernelTraceControl classic events.
pub static LAYOUTS: &[Layout] = &[
    k(K_HEADER, "EventTrace", &[(0, "Header")], 0, 255, HEADER),
    k(
        K_HEADER,
        "EventTrace",
        &[(5, "Extension"), (32, "EndExtension")],
        0,
        255,
        HEADER_EXT,
    ),
    k(K_HEADER, "EventTrace", &[(8, "RDComplete")], 0, 255, &[]),
    k(
        K_HEADER,
        "EventTrace",
        &[(80, "Info80"), (82, "Info82")],
        0,
        255,
        RAW,
    ),
    k(
        K_PROC,
        "Process",
        &[
            (1, "Start"),
            (2, "End"),
            (3, "DCStart"),
            (4, "DCEnd"),
            (39, "Defunct"),
        ],
        3,
        5,
        PROCESS,
    ),
    k(
        K_PROC,
        "Process",
        &[(32, "PerfCtr"), (33, "PerfCtrRundown")],
        2,
        2,
        PROCESS_CTR,
    ),
    k(
        K_PROC,
        "Process",
        &[(11, "Terminate")],
        2,
        2,
        PROCESS_TERMINATE,
    ),
    k(K_PROC, "Image", &[(10, "Load")], 2, 2, IMAGE_V2),
    k(K_PROC, "Image", &[(10, "Load")], 3, 3, IMAGE_V3),
    k(
        K_THREAD,
        "Thread",
        &[(1, "Start"), (2, "End"), (3, "DCStart"), (4, "DCEnd")],
        3,
        4,
        THREAD,
    ),
    k(
        K_THREAD,
        "Thread",
        &[(1, "Start"), (2, "End"), (3, "DCStart"), (4, "DCEnd")],
        2,
        2,
        THREAD_V2,
    ),
    // Windows 11 logs CSwitch version 5: the same fields, 4 more bytes after them
    k(K_THREAD, "Thread", &[(36, "CSwitch")], 2, 5, CSWITCH),
    k(
        K_THREAD,
        "Thread",
        &[(50, "ReadyThread")],
        2,
        4,
        READY_THREAD,
    ),
    k(
        K_THREAD,
        "Thread",
        &[(72, "SetName")],
        2,
        4,
        THREAD_SET_NAME,
    ),
    k(
        K_THREAD,
        "Thread",
        &[(62, "KQueueEnqueue"), (63, "KQueueDequeue")],
        2,
        4,
        KQUEUE,
    ),
    k(
        K_IMAGE,
        "Image",
        &[(10, "Load"), (2, "Unload"), (3, "DCStart"), (4, "DCEnd")],
        2,
        2,
        IMAGE_V2,
    ),
    k(
        K_IMAGE,
        "Image",
        &[(10, "Load"), (2, "Unload"), (3, "DCStart"), (4, "DCEnd")],
        3,
        4,
        IMAGE_V3,
    ),
    k(
        K_IMAGE,
        "Image",
        &[(33, "KernelBase"), (34, "HypercallPage")],
        2,
        4,
        IMAGE_BASE,
    ),
    k(
        K_DISK,
        "DiskIo",
        &[(10, "Read"), (11, "Write")],
        2,
        3,
        DISK_IO,
    ),
    k(
        K_DISK,
        "DiskIo",
        &[(12, "ReadInit"), (13, "WriteInit"), (15, "FlushInit")],
        2,
        3,
        DISK_IO_INIT,
    ),
    k(
        K_DISK,
        "DiskIo",
        &[(14, "FlushBuffers")],
        2,
        3,
        DISK_IO_FLUSH,
    ),
    k(
        K_FILE,
        "FileIo",
        &[
            (0, "Name"),
            (32, "FileCreate"),
            (35, "FileDelete"),
            (36, "FileRundown"),
        ],
        2,
        3,
        FILE_NAME,
    ),
    k(K_FILE, "FileIo", &[(64, "Create")], 2, 2, FILE_CREATE_V2),
    k(K_FILE, "FileIo", &[(64, "Create")], 3, 4, FILE_CREATE_V3),
    k(
        K_FILE,
        "FileIo",
        &[(67, "Read"), (68, "Write")],
        2,
        2,
        FILE_RW_V2,
    ),
    k(
        K_FILE,
        "FileIo",
        &[(67, "Read"), (68, "Write")],
        3,
        4,
        FILE_RW_V3,
    ),
    k(
        K_FILE,
        "FileIo",
        &[(65, "Cleanup"), (66, "Close"), (73, "Flush")],
        2,
        2,
        FILE_SIMPLE_V2,
    ),
    k(
        K_FILE,
        "FileIo",
        &[(65, "Cleanup"), (66, "Close"), (73, "Flush")],
        3,
        4,
        FILE_SIMPLE_V3,
    ),
    k(
        K_FILE,
        "FileIo",
        &[
            (69, "SetInfo"),
            (70, "Delete"),
            (71, "Rename"),
            (74, "QueryInfo"),
            (75, "FSControl"),
        ],
        2,
        2,
        FILE_INFO_V2,
    ),
    k(
        K_FILE,
        "FileIo",
        &[
            (69, "SetInfo"),
            (70, "Delete"),
            (71, "Rename"),
            (74, "QueryInfo"),
            (75, "FSControl"),
        ],
        3,
        4,
        FILE_INFO_V3,
    ),
    k(
        K_FILE,
        "FileIo",
        &[(72, "DirEnum"), (77, "DirNotify")],
        2,
        2,
        FILE_DIR_V2,
    ),
    k(
        K_FILE,
        "FileIo",
        &[(72, "DirEnum"), (77, "DirNotify")],
        3,
        4,
        FILE_DIR_V3,
    ),
    k(K_FILE, "FileIo", &[(76, "OperationEnd")], 2, 4, FILE_OP_END),
    k(
        K_REG,
        "Registry",
        &[
            (10, "Create"),
            (11, "Open"),
            (12, "Delete"),
            (13, "Query"),
            (14, "SetValue"),
            (15, "DeleteValue"),
            (16, "QueryValue"),
            (17, "EnumerateKey"),
            (18, "EnumerateValueKey"),
            (19, "QueryMultipleValue"),
            (20, "SetInformation"),
            (21, "Flush"),
            (22, "KCBCreate"),
            (23, "KCBDelete"),
            (24, "KCBRundownBegin"),
            (25, "KCBRundownEnd"),
            (26, "Virtualize"),
            (27, "Close"),
        ],
        2,
        2,
        REGISTRY,
    ),
    k(K_TCP, "TcpIp", &[(10, "Send")], 2, 2, TCP_SEND4),
    k(
        K_TCP,
        "TcpIp",
        &[
            (11, "Recv"),
            (13, "Disconnect"),
            (14, "Retransmit"),
            (16, "Reconnect"),
            (18, "TCPCopy"),
        ],
        2,
        2,
        TCP_GROUP1_4,
    ),
    k(
        K_TCP,
        "TcpIp",
        &[(12, "Connect"), (15, "Accept")],
        2,
        2,
        TCP_CONNECT4,
    ),
    k(K_TCP, "TcpIp", &[(17, "Fail")], 2, 2, IP_FAIL),
    k(K_TCP, "TcpIp", &[(26, "SendIPV6")], 2, 2, TCP_SEND6),
    k(
        K_TCP,
        "TcpIp",
        &[
            (27, "RecvIPV6"),
            (29, "DisconnectIPV6"),
            (30, "RetransmitIPV6"),
            (32, "ReconnectIPV6"),
            (34, "TCPCopyIPV6"),
        ],
        2,
        2,
        TCP_GROUP1_6,
    ),
    k(
        K_TCP,
        "TcpIp",
        &[(28, "ConnectIPV6"), (31, "AcceptIPV6")],
        2,
        2,
        TCP_CONNECT6,
    ),
    k(
        K_UDP,
        "UdpIp",
        &[(10, "Send"), (11, "Recv")],
        2,
        2,
        TCP_GROUP1_4,
    ),
    k(K_UDP, "UdpIp", &[(17, "Fail")], 2, 2, IP_FAIL),
    k(
        K_UDP,
        "UdpIp",
        &[(26, "SendIPV6"), (27, "RecvIPV6")],
        2,
        2,
        TCP_GROUP1_6,
    ),
    k(
        K_PF,
        "PageFault",
        &[
            (10, "TransitionFault"),
            (11, "DemandZeroFault"),
            (12, "CopyOnWrite"),
            (13, "GuardPageFault"),
            (14, "HardPageFault"),
            (15, "AccessViolation"),
        ],
        2,
        3,
        PAGE_FAULT,
    ),
    k(K_PF, "PageFault", &[(32, "HardFault")], 2, 3, HARD_FAULT),
    k(
        K_PF,
        "PageFault",
        &[(98, "VirtualAlloc"), (99, "VirtualFree")],
        2,
        3,
        VIRTUAL_ALLOC,
    ),
    k(
        K_PF,
        "PageFault",
        &[(105, "ImageLoadBacked")],
        2,
        3,
        IMAGE_LOAD_BACKED,
    ),
    k(
        K_PERF,
        "PerfInfo",
        &[(46, "SampledProfile")],
        2,
        3,
        SAMPLED_PROFILE,
    ),
    k(K_PERF, "PerfInfo", &[(47, "PMCSample")], 2, 3, PMC_SAMPLE),
    k(
        K_PERF,
        "PerfInfo",
        &[(51, "SysClEnter")],
        2,
        3,
        SYSCALL_ENTER,
    ),
    k(K_PERF, "PerfInfo", &[(52, "SysClExit")], 2, 3, SYSCALL_EXIT),
    k(K_PERF, "PerfInfo", &[(67, "ISR")], 2, 3, ISR),
    k(K_PERF, "PerfInfo", &[(50, "ISR-MSI")], 2, 3, ISR_MSI),
    k(
        K_PERF,
        "PerfInfo",
        &[(66, "ThreadedDPC"), (68, "DPC"), (69, "TimerDPC")],
        2,
        3,
        DPC,
    ),
    k(
        K_PERF,
        "PerfInfo",
        &[
            (72, "SetInterval"),
            (73, "CollectionStart"),
            (74, "CollectionEnd"),
        ],
        2,
        3,
        PROFILE_INTERVAL,
    ),
    k(K_PERF, "PerfInfo", &[(58, "DebuggerEnabled")], 2, 3, &[]),
    k(K_STACK, "StackWalk", &[(32, "Stack")], 2, 2, STACK),
    k(
        K_STACK,
        "StackWalk",
        &[(35, "KeyDelete"), (36, "KeyRundown")],
        2,
        2,
        STACK_KEY_DEF,
    ),
    k(
        K_STACK,
        "StackWalk",
        &[(37, "StackKeyKernel"), (38, "StackKeyUser")],
        2,
        2,
        STACK_KEY_REF,
    ),
    k(K_CONFIG, "SystemConfig", &[(10, "CPU")], 2, 3, CFG_CPU),
    k(
        K_CONFIG,
        "SystemConfig",
        &[(11, "PhyDisk")],
        2,
        2,
        CFG_PHYDISK,
    ),
    k(
        K_CONFIG,
        "SystemConfig",
        &[(12, "LogDisk")],
        2,
        2,
        CFG_LOGDISK,
    ),
    k(K_CONFIG, "SystemConfig", &[(13, "NIC")], 2, 2, CFG_NIC),
    k(K_CONFIG, "SystemConfig", &[(14, "Video")], 2, 2, CFG_VIDEO),
    k(
        K_CONFIG,
        "SystemConfig",
        &[(15, "Services")],
        3,
        3,
        CFG_SERVICES,
    ),
    k(K_CONFIG, "SystemConfig", &[(16, "Power")], 2, 2, CFG_POWER),
    k(
        K_CONFIG,
        "SystemConfig",
        &[(17, "Network")],
        2,
        2,
        CFG_NETWORK,
    ),
    k(K_CONFIG, "SystemConfig", &[(21, "IRQ")], 3, 3, CFG_IRQ),
    k(K_CONFIG, "SystemConfig", &[(22, "PnP")], 3, 3, CFG_PNP_V3),
    k(K_CONFIG, "SystemConfig", &[(22, "PnP")], 4, 5, CFG_PNP_V4),
    k(
        K_CONFIG,
        "SystemConfig",
        &[(23, "IDEChannel")],
        2,
        2,
        CFG_IDE,
    ),
    k(
        K_CONFIG,
        "SystemConfig",
        &[(25, "Platform")],
        2,
        2,
        CFG_PLATFORM,
    ),
    k(K_CONFIG, "SystemConfig", &[(28, "DPI")], 2, 2, CFG_DPI),
    k(
        K_CONFIG,
        "SystemConfig",
        &[(29, "CodeIntegrity")],
        2,
        2,
        CFG_CI,
    ),
    // Record kinds whose field layout is not published: delivered as one named blob.
    k(
        K_CONFIG,
        "SystemConfig",
        &[
            (18, "OpticalMedia"),
            (19, "Config19"),
            (20, "Config20"),
            (24, "NumaNode"),
            (26, "ProcessorGroup"),
            (27, "ProcessorNumber"),
            (30, "Config30"),
            (31, "Config31"),
            (32, "Config32"),
            (33, "Config33"),
            (34, "Config34"),
            (35, "Config35"),
            (36, "Config36"),
            (37, "Config37"),
        ],
        2,
        2,
        RAW,
    ),
    c(
        IMAGE_ID,
        "ImageID",
        &[(0, "ImageId")],
        0,
        255,
        IMAGE_ID_INFO,
    ),
    c(
        IMAGE_ID,
        "ImageID",
        &[(32, "None"), (34, "DbgID_34")],
        0,
        255,
        IMAGE_ID_NONE,
    ),
    c(
        IMAGE_ID,
        "ImageID",
        &[(36, "DbgID_RSDS"), (37, "DbgID_ILRSDS")],
        0,
        255,
        DBGID_RSDS,
    ),
    c(IMAGE_ID, "ImageID", &[(38, "DbgPPDB")], 0, 255, DBG_PPDB),
    c(
        IMAGE_ID,
        "ImageID",
        &[(40, "DbgDeterm")],
        0,
        255,
        DBG_DETERM,
    ),
    c(
        IMAGE_ID,
        "ImageID",
        &[(39, "ImageId39"), (41, "ImageId41")],
        0,
        255,
        RAW,
    ),
    c(
        IMAGE_ID,
        "ImageID",
        &[(64, "FileVersion")],
        0,
        255,
        FILE_VERSION,
    ),
    c(
        SYS_CONFIG,
        "SysConfig",
        &[(32, "BuildInfo")],
        0,
        255,
        BUILD_INFO,
    ),
    c(
        SYS_CONFIG,
        "SysConfig",
        &[(33, "SystemPaths")],
        0,
        255,
        SYSTEM_PATHS,
    ),
    c(
        SYS_CONFIG,
        "SysConfig",
        &[(35, "VolumeMapping")],
        0,
        255,
        VOLUME_MAPPING,
    ),
    c(
        SYS_CONFIG,
        "SysConfig",
        &[
            (34, "SysConfig34"),
            (36, "SysConfig36"),
            (37, "SysConfig37"),
        ],
        0,
        255,
        RAW,
    ),
    c(
        WINSAT,
        "WinSat",
        &[(33, "WinSPR"), (35, "Metrics"), (37, "SystemConfig")],
        0,
        255,
        WINSAT_XML,
    ),
];

/// The layout of a kernel or KernelTraceControl event.
pub fn layout_for(source: Source, opcode: u8, version: u8) -> Option<&'static Layout> {
    // an index by (source, opcode), built once: a linear search of LAYOUTS cost more than the
    // decoding itself
    type Index = crate::fasthash::FastMap<(Source, u8), Vec<&'static Layout>>;
    static INDEX: std::sync::OnceLock<Index> = std::sync::OnceLock::new();
    let index = INDEX.get_or_init(|| {
        let mut m = Index::default();
        for l in LAYOUTS {
            for (op, _) in l.opcodes {
                m.entry((l.source, *op)).or_default().push(l);
            }
        }
        m
    });
    index
        .get(&(source, opcode))?
        .iter()
        .find(|l| l.versions.contains(&version))
        .copied()
}
