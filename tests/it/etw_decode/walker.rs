//! A minimal, test-only .etl record walker (FORMAT.md 4.1–4.7): buffers (plain and LZ77
//! compressed), records of every structured header type, merged by timestamp. The real reader
//! lives in `dtx::etw::reader`; this exists only so the decoder tests can run on real files.

use dtx::etw::record::{EventRecord, ExtendedItem, Guid, HeaderKind};

pub struct Etl {
    buffers: Vec<(u16, Vec<u8>)>,
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn i64_at(b: &[u8], o: usize) -> i64 {
    i64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// MS-XCA plain LZ77.
fn lz77(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(out_len);
    let (mut i, mut flags, mut nflags, mut half) = (0usize, 0u32, 0u32, 0usize);
    loop {
        if nflags == 0 {
            if i + 4 > input.len() {
                break;
            }
            flags = u32_at(input, i);
            i += 4;
            nflags = 32;
        }
        nflags -= 1;
        if flags & (1 << nflags) == 0 {
            if i >= input.len() {
                break;
            }
            out.push(input[i]);
            i += 1;
        } else {
            if i + 2 > input.len() {
                break;
            }
            let m = u16_at(input, i) as usize;
            i += 2;
            let mut len = m % 8;
            let off = m / 8 + 1;
            if len == 7 {
                if half == 0 {
                    len = (*input.get(i)? % 16) as usize;
                    half = i;
                    i += 1;
                } else {
                    len = (input[half] / 16) as usize;
                    half = 0;
                }
                if len == 15 {
                    len = *input.get(i)? as usize;
                    i += 1;
                    if len == 255 {
                        len = u16_at(input, i) as usize;
                        i += 2;
                        if len == 0 {
                            len = u32_at(input, i) as usize;
                            i += 4;
                        }
                        len = len.checked_sub(22)?;
                    }
                    len += 15;
                }
                len += 7;
            }
            len += 3;
            let start = out.len().checked_sub(off)?;
            for k in 0..len {
                let b = out[start + k];
                out.push(b);
            }
        }
        if out.len() >= out_len {
            break;
        }
    }
    out.truncate(out_len);
    Some(out)
}

impl Etl {
    pub fn open(bytes: &[u8]) -> Etl {
        let mut buffers = Vec::new();
        let mut pos = 0usize;
        while pos + 0x48 <= bytes.len() {
            let b = &bytes[pos..];
            let size = u32_at(b, 0) as usize;
            let filled = u32_at(b, 0x30) as usize;
            let flag = u16_at(b, 0x34);
            let cpu = b[0x28] as u16;
            if size < 0x48 || pos + size > bytes.len() {
                break;
            }
            let data = if flag & 0x40 != 0 {
                let mut d = b[..0x48].to_vec();
                let body = lz77(&b[0x48..size], filled.saturating_sub(0x48)).unwrap_or_default();
                d.extend_from_slice(&body);
                d
            } else {
                b[..filled.min(size)].to_vec()
            };
            buffers.push((cpu, data));
            pos += size;
        }
        Etl { buffers }
    }

    pub fn events(&self) -> Vec<EventRecord<'_>> {
        let mut all = Vec::new();
        for (cpu, data) in &self.buffers {
            let mut off = 0x48usize;
            while off + 8 <= data.len() {
                let marker = u32_at(data, off);
                if marker == 0xFFFF_FFFF {
                    break;
                }
                let ht = data[off + 2];
                let is_sys = matches!(ht, 0x01..=0x04 | 0x10 | 0x11);
                let size = if is_sys {
                    u16_at(data, off + 4)
                } else {
                    u16_at(data, off)
                } as usize;
                if size < 8 || off + size > data.len() {
                    break;
                }
                if let Some(r) = record(&data[off..off + size], *cpu) {
                    all.push(r);
                }
                off += (size + 7) & !7;
            }
        }
        all.sort_by_key(|r| r.raw_timestamp);
        all
    }
}

fn blank<'a>(ht: u8, kind: HeaderKind, cpu: u16) -> EventRecord<'a> {
    let ptr = if matches!(ht, 0x01 | 0x03 | 0x0A | 0x0B | 0x10 | 0x12) {
        4
    } else {
        8
    };
    EventRecord {
        header_type: ht,
        kind,
        flags: 0,
        provider: Guid::default(),
        kernel_group: None,
        id: 0,
        version: 0,
        channel: 0,
        level: 0,
        opcode: 0,
        task: 0,
        keyword: 0,
        pid: u32::MAX,
        tid: u32::MAX,
        cpu,
        raw_timestamp: 0,
        time_ns: 0,
        wall_ns: 0,
        pointer_size: ptr,
        activity_id: Guid::default(),
        payload: &[],
        extended: Default::default(),
    }
}

fn record(r: &[u8], cpu: u16) -> Option<EventRecord<'_>> {
    let ht = r[2];
    match ht {
        0x01..=0x04 | 0x10 | 0x11 => {
            let kind = match ht {
                0x01 | 0x02 => HeaderKind::System,
                0x03 | 0x04 => HeaderKind::Compact,
                _ => HeaderKind::PerfInfo,
            };
            let mut e = blank(ht, kind, cpu);
            let hook = u16_at(r, 6);
            e.version = u16_at(r, 0) as u8;
            e.kernel_group = Some((hook >> 8) as u8);
            e.opcode = hook as u8;
            let pay = match kind {
                HeaderKind::System => {
                    e.tid = u32_at(r, 8);
                    e.pid = u32_at(r, 12);
                    e.raw_timestamp = i64_at(r, 0x10);
                    0x20
                }
                HeaderKind::Compact => {
                    e.tid = u32_at(r, 8);
                    e.pid = u32_at(r, 12);
                    e.raw_timestamp = i64_at(r, 0x10);
                    0x18
                }
                _ => {
                    e.raw_timestamp = i64_at(r, 8);
                    0x10
                }
            };
            e.payload = r.get(pay..)?;
            e.provider =
                dtx::etw::decode::kernel::group_guid((hook >> 8) as u8).unwrap_or_default();
            Some(e)
        }
        0x0A | 0x14 | 0x0B | 0x15 => {
            let inst = matches!(ht, 0x0B | 0x15);
            let mut e = blank(
                ht,
                if inst {
                    HeaderKind::Instance
                } else {
                    HeaderKind::Full
                },
                cpu,
            );
            e.opcode = r[4];
            e.level = r[5];
            e.version = u16_at(r, 6) as u8;
            e.tid = u32_at(r, 8);
            e.pid = u32_at(r, 12);
            e.raw_timestamp = i64_at(r, 0x10);
            e.provider = Guid::from_le_bytes(&r[0x18..])?;
            e.payload = r.get(if inst { 0x48 } else { 0x30 }..)?;
            Some(e)
        }
        0x12 | 0x13 => {
            let mut e = blank(ht, HeaderKind::EventHeader, cpu);
            e.flags = u16_at(r, 4);
            e.tid = u32_at(r, 8);
            e.pid = u32_at(r, 12);
            e.raw_timestamp = i64_at(r, 0x10);
            e.provider = Guid::from_le_bytes(&r[0x18..])?;
            e.id = u16_at(r, 0x28);
            e.version = r[0x2A];
            e.channel = r[0x2B];
            e.level = r[0x2C];
            e.opcode = r[0x2D];
            e.task = u16_at(r, 0x2E);
            e.keyword = u64_at(r, 0x30);
            e.activity_id = Guid::from_le_bytes(&r[0x40..])?;
            let mut off = 0x50;
            if e.flags & 1 != 0 {
                loop {
                    let h = r.get(off..off + 8)?;
                    let item = u16_at(h, 0) as usize;
                    let link = u16_at(h, 4);
                    let ds = u16_at(h, 6) as usize;
                    e.extended.push(ExtendedItem {
                        ext_type: u16_at(h, 2),
                        data: r.get(off + 8..off + 8 + ds)?,
                    });
                    off += item.max(8);
                    if link & 1 == 0 {
                        break;
                    }
                }
            }
            e.payload = r.get(off..)?;
            Some(e)
        }
        _ => None,
    }
}

/// Every .etl under the folder (recursively).
pub fn etl_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        let mut v: Vec<_> = rd.flatten().map(|e| e.path()).collect();
        v.sort();
        for p in v {
            if p.is_dir() {
                etl_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "etl") {
                out.push(p);
            }
        }
    }
}
