//! Robustness of the `.etl` reader: deterministic mutations (byte flips in buffer headers and
//! records, bogus sizes, truncation, inserted and deleted chunks) of a synthetic trace and of the
//! small real traces must never panic, and every error must name the file and an offset inside
//! it. The synthetic trace also checks the layouts end to end, so this runs in a fresh clone
//! without `shared/`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use dtx::etw::reader::{open_zip_member, zip_etl_members, EtlFile};
use dtx::etw::record::{Guid, HeaderKind};

const BUF: usize = 0x1000;
const START_FILETIME: i64 = 133_000_000_000_000_000; // 2022-06
const PROVIDER: &str = "8e805eb3-6a8f-4a1e-90fa-a831d94e54a1";

fn buffer_header(out: &mut Vec<u8>, filled: usize, flags: u16, ty: u16, cpu: u8, ts: i64) {
    let start = out.len();
    out.resize(start + 0x48, 0);
    let h = &mut out[start..];
    h[0..4].copy_from_slice(&(BUF as u32).to_le_bytes());
    h[4..8].copy_from_slice(&(filled as u32).to_le_bytes());
    h[0x10..0x18].copy_from_slice(&ts.to_le_bytes());
    h[0x28] = cpu;
    h[0x30..0x34].copy_from_slice(&(filled as u32).to_le_bytes());
    h[0x34..0x36].copy_from_slice(&flags.to_le_bytes());
    h[0x36..0x38].copy_from_slice(&ty.to_le_bytes());
}

fn pad8(v: &mut Vec<u8>) {
    while !v.len().is_multiple_of(8) {
        v.push(0);
    }
}

fn logfile_header_record(ts: i64) -> Vec<u8> {
    let mut p = vec![0u8; 0x118];
    p[0..4].copy_from_slice(&(BUF as u32).to_le_bytes());
    p[4..8].copy_from_slice(&[10, 0, 1, 5]);
    p[8..12].copy_from_slice(&19041u32.to_le_bytes());
    p[0x0C..0x10].copy_from_slice(&2u32.to_le_bytes());
    p[0x24..0x28].copy_from_slice(&4u32.to_le_bytes());
    p[0x2C..0x30].copy_from_slice(&8u32.to_le_bytes());
    p[0x34..0x38].copy_from_slice(&3000u32.to_le_bytes());
    p[0x100..0x108].copy_from_slice(&10_000_000i64.to_le_bytes());
    p[0x108..0x110].copy_from_slice(&START_FILETIME.to_le_bytes());
    p[0x110..0x114].copy_from_slice(&1u32.to_le_bytes());
    for s in ["Synthetic Logger", "synthetic.etl"] {
        for u in s.encode_utf16().chain([0]) {
            p.extend_from_slice(&u.to_le_bytes());
        }
    }
    system_record(0x02, 0x0000, 4, 8, ts, &p)
}

fn system_record(ty: u8, hook: u16, tid: u32, pid: u32, ts: i64, payload: &[u8]) -> Vec<u8> {
    let size = 0x20 + payload.len();
    let mut r = Vec::new();
    r.extend_from_slice(&2u16.to_le_bytes());
    r.push(ty);
    r.push(0xC0);
    r.extend_from_slice(&(size as u16).to_le_bytes());
    r.extend_from_slice(&hook.to_le_bytes());
    r.extend_from_slice(&tid.to_le_bytes());
    r.extend_from_slice(&pid.to_le_bytes());
    r.extend_from_slice(&ts.to_le_bytes());
    r.extend_from_slice(&[0; 8]);
    r.extend_from_slice(payload);
    r
}

fn perfinfo_record(hook: u16, ts: i64, payload: &[u8]) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&2u16.to_le_bytes());
    r.push(0x11);
    r.push(0xC0);
    r.extend_from_slice(&((0x10 + payload.len()) as u16).to_le_bytes());
    r.extend_from_slice(&hook.to_le_bytes());
    r.extend_from_slice(&ts.to_le_bytes());
    r.extend_from_slice(payload);
    r
}

fn event_header_record(id: u16, ts: i64, ext: &[(u16, &[u8])], payload: &[u8]) -> Vec<u8> {
    let mut items = Vec::new();
    for (i, (ty, data)) in ext.iter().enumerate() {
        let size = (8 + data.len()).div_ceil(8) * 8;
        items.extend_from_slice(&(size as u16).to_le_bytes());
        items.extend_from_slice(&ty.to_le_bytes());
        items.extend_from_slice(&u16::from(i + 1 < ext.len()).to_le_bytes());
        items.extend_from_slice(&(data.len() as u16).to_le_bytes());
        items.extend_from_slice(data);
        pad8(&mut items);
    }
    let size = 0x50 + items.len() + payload.len();
    let mut r = Vec::new();
    r.extend_from_slice(&(size as u16).to_le_bytes());
    r.push(0x13);
    r.push(0xC0);
    r.extend_from_slice(&u16::from(!ext.is_empty()).to_le_bytes());
    r.extend_from_slice(&0u16.to_le_bytes());
    r.extend_from_slice(&77u32.to_le_bytes());
    r.extend_from_slice(&99u32.to_le_bytes());
    r.extend_from_slice(&ts.to_le_bytes());
    let g = Guid::parse(PROVIDER).unwrap();
    r.extend_from_slice(&g.data1.to_le_bytes());
    r.extend_from_slice(&g.data2.to_le_bytes());
    r.extend_from_slice(&g.data3.to_le_bytes());
    r.extend_from_slice(&g.data4);
    r.extend_from_slice(&id.to_le_bytes());
    r.extend_from_slice(&[1, 16, 4, 9]); // version, channel, level, opcode
    r.extend_from_slice(&7u16.to_le_bytes());
    r.extend_from_slice(&0x8000_0000_0000_0001u64.to_le_bytes());
    r.extend_from_slice(&[0; 8]);
    r.extend_from_slice(&[0x11; 16]);
    r.extend_from_slice(&items);
    r.extend_from_slice(payload);
    r
}

fn finish_buffer(out: &mut Vec<u8>, records: &[Vec<u8>], flags: u16, ty: u16, cpu: u8) {
    let start = out.len();
    buffer_header(out, 0, flags, ty, cpu, 0);
    for r in records {
        out.extend_from_slice(r);
        pad8(out);
    }
    let filled = out.len() - start;
    assert!(filled <= BUF);
    out[start + 4..start + 8].copy_from_slice(&(filled as u32).to_le_bytes());
    out[start + 0x30..start + 0x34].copy_from_slice(&(filled as u32).to_le_bytes());
    out.resize(start + BUF, 0xFF);
}

/// Header buffer, then two buffers per CPU with interleaved timestamps: 1 + 4*20 records.
fn synthetic() -> Vec<u8> {
    let mut out = Vec::new();
    finish_buffer(&mut out, &[logfile_header_record(1_000)], 0x01, 4, 0);
    for round in 0..2i64 {
        for cpu in 0..2u8 {
            let mut recs = Vec::new();
            for i in 0..20i64 {
                let ts = 2_000 + round * 1_000 + i * 20 + cpu as i64 * 10;
                recs.push(match i % 3 {
                    0 => perfinfo_record(0x0F2E, ts, &[0xAB; 16]),
                    1 => system_record(0x02, 0x0324, 5, 6, ts, b"proc\0"),
                    _ => event_header_record(
                        i as u16,
                        ts,
                        &[(12, b"\x09\x00prov\0"), (1, &[0x22; 16])],
                        b"payload",
                    ),
                });
            }
            finish_buffer(&mut out, &recs, 0x20, 0, cpu);
        }
    }
    out
}

#[test]
fn synthetic_trace_decodes() {
    let etl = EtlFile::from_bytes_named("synthetic.etl", synthetic()).unwrap();
    let h = etl.header();
    assert_eq!(
        (
            h.buffer_size,
            h.os_build,
            h.nproc,
            h.pointer_size,
            h.cpu_mhz
        ),
        (BUF as u32, 19041, 2, 8, 3000)
    );
    assert_eq!(h.logger_name, "Synthetic Logger");
    assert_eq!(h.log_file_name, "synthetic.etl");
    assert_eq!(h.version_string(), "10.0.1.5");
    let mut it = etl.events();
    let mut n = 0;
    let mut last = i64::MIN;
    while let Some(r) = it.next_event() {
        let ev = r.unwrap();
        assert!(ev.raw_timestamp >= last);
        last = ev.raw_timestamp;
        assert_eq!(ev.time_ns, ((ev.raw_timestamp - 1_000) * 100) as u64);
        assert_eq!(
            ev.wall_ns as i64,
            (START_FILETIME - 116_444_736_000_000_000) * 100 + ev.time_ns as i64
        );
        match ev.kind {
            HeaderKind::PerfInfo => {
                assert_eq!(
                    (ev.kernel_group, ev.opcode, ev.payload.len()),
                    (Some(0x0F), 0x2E, 16)
                );
                assert_eq!(
                    ev.provider.to_string(),
                    "ce1dbfb4-137e-4da6-87b0-3f59aa102cbc"
                );
            }
            HeaderKind::System if ev.kernel_group == Some(3) => {
                assert_eq!(
                    (ev.opcode, ev.tid, ev.pid, ev.payload),
                    (0x24, 5, 6, &b"proc\0"[..])
                );
            }
            HeaderKind::EventHeader => {
                assert_eq!(ev.provider.to_string(), PROVIDER);
                assert_eq!(
                    (ev.version, ev.channel, ev.level, ev.opcode, ev.task),
                    (1, 16, 4, 9, 7)
                );
                assert_eq!(
                    (ev.tid, ev.pid, ev.keyword),
                    (77, 99, 0x8000_0000_0000_0001)
                );
                assert_eq!(ev.payload, b"payload");
                assert_eq!(ev.extended.len(), 2);
                let items: Vec<_> = ev.extended.iter().collect();
                assert_eq!(
                    (items[0].ext_type, items[0].data),
                    (12, &b"\x09\x00prov\0"[..])
                );
                assert_eq!(items[1].data, &[0x22; 16]);
            }
            _ => assert_eq!(ev.kernel_group, Some(0)),
        }
        if n > 0 {
            // Interleaved timestamps: the merged walk alternates CPUs.
            assert_eq!(
                ev.cpu as i64,
                (ev.raw_timestamp / 10) % 2,
                "ts {}",
                ev.raw_timestamp
            );
        }
        n += 1;
    }
    assert_eq!(n, 81);
}

/// xorshift64*: a fixed-seed PRNG so every failure reproduces.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, data: &[u8], buffer_size: usize) -> (Vec<u8>, String) {
    let mut d = data.to_vec();
    let len = d.len();
    let bufs = (len / buffer_size.max(1)).max(1);
    let what = rng.below(8);
    let desc = match what {
        0 => {
            let i = rng.below(len);
            d[i] ^= 1 << rng.below(8);
            format!("flip a bit at {i:#x}")
        }
        1 => {
            // Buffer header fields.
            let b = rng.below(bufs) * buffer_size + rng.below(0x48);
            if b < len {
                d[b] = rng.next() as u8;
            }
            format!("buffer header byte {b:#x}")
        }
        2 => {
            // Record sizes and markers near the start of a buffer.
            let b = rng.below(bufs) * buffer_size + 0x48 + rng.below(0x200);
            if b + 4 <= len {
                d[b..b + 2].copy_from_slice(&(rng.next() as u16).to_le_bytes());
            }
            format!("u16 at {b:#x}")
        }
        3 => {
            let cut = rng.below(len);
            d.truncate(cut);
            format!("truncate at {cut:#x}")
        }
        4 => {
            let at = rng.below(len);
            let n = 1 + rng.below(300);
            let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            d.splice(at..at, junk);
            format!("insert {n} bytes at {at:#x}")
        }
        5 => {
            let at = rng.below(len);
            let n = (1 + rng.below(5000)).min(len - at);
            d.drain(at..at + n);
            format!("delete {n} bytes at {at:#x}")
        }
        6 => {
            let at = rng.below(len);
            let n = (1 + rng.below(200)).min(len - at);
            let v = [0x00, 0xFF][rng.below(2)];
            d[at..at + n].fill(v);
            format!("fill {n} bytes at {at:#x} with {v:#x}")
        }
        _ => {
            for _ in 0..16 {
                let i = rng.below(len);
                d[i] = rng.next() as u8;
            }
            "16 random bytes".to_string()
        }
    };
    (d, desc)
}

/// Mutations per input; `ETL_MUTATIONS=100000` for a longer soak.
fn rounds(default: usize) -> usize {
    std::env::var("ETL_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn check_no_panic(name: &str, data: Vec<u8>, desc: &str) {
    let len = data.len() as u64;
    let res = catch_unwind(AssertUnwindSafe(|| {
        let Ok(etl) = EtlFile::from_bytes_named(name, data) else {
            return;
        };
        for b in etl.buffers() {
            if let Err(e) = b {
                assert!(e.offset <= len && e.file == name, "{e}");
            }
        }
        for merged in [true, false] {
            let mut it = if merged {
                etl.events()
            } else {
                etl.events_in_file_order()
            };
            while let Some(r) = it.next_event() {
                if let Err(e) = r {
                    assert!(e.offset <= len, "{e}");
                    assert!(
                        e.to_string().starts_with(&format!("{name}: offset 0x")),
                        "{e}"
                    );
                }
            }
        }
    }));
    assert!(res.is_ok(), "{name}: panicked after mutation: {desc}");
}

#[test]
fn mutated_synthetic_traces_never_panic() {
    let base = synthetic();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for i in 0..rounds(3000) {
        let (d, desc) = mutate(&mut rng, &base, BUF);
        check_no_panic("synthetic.etl", d, &format!("#{i}: {desc}"));
    }
}

fn small_real_traces() -> Vec<(String, Vec<u8>, usize)> {
    let Some(dir) = crate::support::etl::folder("etl", "") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for f in [
        "etlparser_AMSITrace.etl",
        "krabsetw_powershell.etl",
        "perfview_SelfDescribingSingleEvent.etl",
        "tx_HTTP_Server.etl",
    ] {
        let etl = EtlFile::open(dir.join(f)).unwrap();
        out.push((
            f.to_string(),
            etl.bytes().to_vec(),
            etl.header().buffer_size as usize,
        ));
    }
    for z in [
        "perfview_gcevents.etl.zip",
        "perfview_primitive-types.etl.zip",
    ] {
        let z = dir.join(z);
        let z = z.to_str().unwrap();
        for m in zip_etl_members(z).unwrap() {
            let etl = open_zip_member(z, &m).unwrap();
            out.push((m, etl.bytes().to_vec(), etl.header().buffer_size as usize));
        }
    }
    out
}

#[test]
fn mutated_real_traces_never_panic() {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    for (name, bytes, bs) in small_real_traces() {
        for i in 0..rounds(150) {
            let (d, desc) = mutate(&mut rng, &bytes, bs);
            check_no_panic(&name, d, &format!("#{i}: {desc}"));
        }
    }
}
