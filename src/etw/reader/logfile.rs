//! TRACE_LOGFILE_HEADER (FORMAT.md 4.8) and the conversion of raw timestamps.

use super::bytes::{i64_at, u32_at};
use crate::etw::record::EventRecord;

/// FILETIME of 1970-01-01 (100 ns units since 1601).
pub const UNIX_EPOCH_FILETIME: i64 = 116_444_736_000_000_000;

/// The session facts from the first record of the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogfileHeader {
    /// The session's buffer size in bytes.
    pub buffer_size: u32,
    /// Major, minor, sub-version, sub-minor version of the logger.
    pub version: [u8; 4],
    /// The OS build number (ProviderVersion).
    pub os_build: u32,
    pub nproc: u32,
    /// FILETIME when the session stopped (0 if unknown).
    pub end_time: i64,
    /// Timer resolution in 100 ns units.
    pub timer_resolution: u32,
    pub max_file_size: u32,
    pub log_file_mode: u32,
    pub buffers_written: u32,
    pub start_buffers: u32,
    /// Pointer size of the session (4 or 8); a record's own pointer size comes from its header.
    pub pointer_size: u32,
    pub events_lost: u32,
    pub cpu_mhz: u32,
    /// Time zone bias in minutes (UTC = local + bias).
    pub timezone_bias_minutes: i32,
    /// FILETIME of boot.
    pub boot_time: i64,
    /// Ticks per second of the session clock.
    pub perf_freq: i64,
    /// FILETIME of the start of the session.
    pub start_time: i64,
    /// 1 QPC, 2 system time (FILETIME), 3 CPU cycle counter.
    pub clock_type: u32,
    pub buffers_lost: u32,
    pub logger_name: String,
    pub log_file_name: String,
    /// Raw timestamp of the header record itself (the reference for `start_time`).
    pub header_timestamp: i64,
}

impl LogfileHeader {
    /// "major.minor.sub.subminor", e.g. "10.0.1.5".
    pub fn version_string(&self) -> String {
        let v = self.version;
        format!("{}.{}.{}.{}", v[0], v[1], v[2], v[3])
    }

    /// Whether buffers are LZ77 compressed (EVENT_TRACE_COMPRESSED_MODE).
    pub fn compressed(&self) -> bool {
        self.log_file_mode & 0x0400_0000 != 0
    }

    /// Start of the session in nanoseconds since the Unix epoch.
    pub fn start_unix_ns(&self) -> i64 {
        self.start_time
            .saturating_sub(UNIX_EPOCH_FILETIME)
            .saturating_mul(100)
    }

    /// Decodes the payload of the HookId-0 SYSTEM record; `pointer_size` comes from its header
    /// type (4 for SYSTEM32, 8 for SYSTEM64).
    pub fn parse(payload: &[u8], pointer_size: u8, header_timestamp: i64) -> Option<LogfileHeader> {
        let shift = if pointer_size == 4 { 8 } else { 0 };
        let fixed = 0x118 - shift;
        if payload.len() < fixed {
            return None;
        }
        let v = payload.get(4..8)?;
        let mut h = LogfileHeader {
            buffer_size: u32_at(payload, 0)?,
            version: [v[0], v[1], v[2], v[3]],
            os_build: u32_at(payload, 0x08)?,
            nproc: u32_at(payload, 0x0C)?,
            end_time: i64_at(payload, 0x10)?,
            timer_resolution: u32_at(payload, 0x18)?,
            max_file_size: u32_at(payload, 0x1C)?,
            log_file_mode: u32_at(payload, 0x20)?,
            buffers_written: u32_at(payload, 0x24)?,
            start_buffers: u32_at(payload, 0x28)?,
            pointer_size: u32_at(payload, 0x2C)?,
            events_lost: u32_at(payload, 0x30)?,
            cpu_mhz: u32_at(payload, 0x34)?,
            timezone_bias_minutes: u32_at(payload, 0x48 - shift)? as i32,
            boot_time: i64_at(payload, 0xF8 - shift)?,
            perf_freq: i64_at(payload, 0x100 - shift)?,
            start_time: i64_at(payload, 0x108 - shift)?,
            clock_type: u32_at(payload, 0x110 - shift)?,
            buffers_lost: u32_at(payload, 0x114 - shift)?,
            logger_name: String::new(),
            log_file_name: String::new(),
            header_timestamp,
        };
        let rest = payload.get(fixed..).unwrap_or(&[]);
        let (name, used) = utf16z(rest);
        h.logger_name = name;
        h.log_file_name = utf16z(rest.get(used..).unwrap_or(&[])).0;
        Some(h)
    }
}

/// A NUL-terminated UTF-16LE string and the bytes it used (terminator included).
fn utf16z(b: &[u8]) -> (String, usize) {
    let units: Vec<u16> = b
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .take_while(|&u| u != 0)
        .collect();
    let used = ((units.len() + 1) * 2).min(b.len());
    (
        char::decode_utf16(units)
            .map(|c| c.unwrap_or('\u{fffd}'))
            .collect(),
        used,
    )
}

/// Converts raw timestamps to nanoseconds since the trace start and since the Unix epoch.
#[derive(Clone, Copy, Debug)]
pub struct TimeBase {
    clock_type: u32,
    /// Raw timestamp corresponding to `start_time`.
    ts0: i64,
    freq: i64,
    /// Nanoseconds per tick when that is a whole number (0 otherwise).
    ns_per_tick: i64,
    /// `n / freq` as a multiplication: see [`Reciprocal`].
    recip: Reciprocal,
    start_unix_ns: i64,
    start_filetime: i64,
}

impl TimeBase {
    pub fn new(h: &LogfileHeader) -> TimeBase {
        let freq = match h.clock_type {
            3 if h.cpu_mhz > 0 => h.cpu_mhz as i64 * 1_000_000,
            _ if h.perf_freq > 0 => h.perf_freq,
            _ => 10_000_000,
        };
        TimeBase {
            clock_type: h.clock_type,
            ts0: h.header_timestamp,
            freq,
            ns_per_tick: whole_ns_per_tick(freq),
            recip: Reciprocal::of(freq),
            start_unix_ns: h.start_unix_ns(),
            start_filetime: h.start_time,
        }
    }

    /// Nanoseconds since the trace start (may be negative for events logged before the header).
    #[inline]
    pub fn since_start_ns(&self, ts: i64) -> i64 {
        if self.clock_type == 2 {
            return ts.wrapping_sub(self.start_filetime).saturating_mul(100);
        }
        let d = ts.wrapping_sub(self.ts0);
        if self.ns_per_tick != 0 {
            return d.saturating_mul(self.ns_per_tick);
        }
        // one division while d·10⁹ fits in an i64 (up to 9.2·10⁹ ticks: an hour at 2.5 GHz,
        // days at the usual QPC rates); the same floor as the split below
        if (0..=i64::MAX / 1_000_000_000).contains(&d) && self.freq > 0 {
            return self.recip.div(d as u64 * 1_000_000_000) as i64;
        }
        let whole = d / self.freq;
        let frac = d % self.freq;
        let frac_ns = if self.freq < 9_000_000_000 {
            frac * 1_000_000_000 / self.freq
        } else {
            ((frac as i128 * 1_000_000_000) / self.freq as i128) as i64
        };
        whole.saturating_mul(1_000_000_000).saturating_add(frac_ns)
    }

    /// Fills `time_ns`, `wall_ns` and `raw_timestamp` (negative values clamp to 0).
    #[inline]
    pub fn stamp(&self, r: &mut EventRecord<'_>, ts: i64) {
        let ns = self.since_start_ns(ts);
        r.raw_timestamp = ts;
        r.time_ns = ns.max(0) as u64;
        r.wall_ns = self.start_unix_ns.saturating_add(ns).max(0) as u64;
    }
}

/// Floor division of any `n < 2⁶³` by a fixed divisor as a multiplication and a shift (a
/// division per record is the slowest instruction of the walk). With `L = ⌈log₂ d⌉` and
/// `m = ⌈2^(64+L) / d⌉`, `⌊n·m / 2^(64+L)⌋ = ⌊n / d⌋`: the error of `m`, `m·d − 2^(64+L)`, is
/// below `d ≤ 2^L`, so `n` times it stays below `2^(63+L)`, too little to reach the next
/// multiple; and `n·m < 2⁶³ · 2⁶⁵` fits a u128.
#[derive(Clone, Copy, Debug)]
struct Reciprocal {
    m: u128,
    shift: u32,
}

impl Reciprocal {
    fn of(d: i64) -> Reciprocal {
        let d = d.max(1) as u128;
        let l = 128 - (d - 1).leading_zeros();
        let shift = 64 + l;
        Reciprocal {
            m: (1u128 << shift).div_ceil(d),
            shift,
        }
    }

    #[inline(always)]
    fn div(self, n: u64) -> u64 {
        debug_assert!(n < 1 << 63);
        ((n as u128 * self.m) >> self.shift) as u64
    }
}

/// 10⁹ / freq when it is a whole number, else 0.
fn whole_ns_per_tick(freq: i64) -> i64 {
    if freq > 0 && freq <= 1_000_000_000 && 1_000_000_000 % freq == 0 {
        1_000_000_000 / freq
    } else {
        0
    }
}

impl Default for TimeBase {
    fn default() -> Self {
        TimeBase {
            clock_type: 1,
            ts0: 0,
            freq: 10_000_000,
            ns_per_tick: 100,
            recip: Reciprocal::of(10_000_000),
            start_unix_ns: 0,
            start_filetime: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Reciprocal;

    #[test]
    fn reciprocal_division_is_exact() {
        let divisors = [
            1i64,
            2,
            3,
            7,
            1 << 20,
            2_337_919,
            3_579_545,
            10_000_000,
            14_318_180,
            2_600_000_000,
            3_000_000_007,
            (1 << 40) + 1,
            i64::MAX,
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for d in divisors {
            let r = Reciprocal::of(d);
            let check = |n: u64| assert_eq!(r.div(n), n / d as u64, "{n} / {d}");
            // (d + 1 for d = i64::MAX is 2⁶³, outside div's domain: clamped)
            for n in [0, 1, d as u64 - 1, d as u64, d as u64 + 1, (1 << 63) - 1] {
                check(n.min((1 << 63) - 1));
            }
            // multiples and their neighbours, where an inexact reciprocal shows first
            for k in [1u64, 2, 1_000, 1 << 20, (1 << 62) / d as u64] {
                let n = k.saturating_mul(d as u64).min((1 << 63) - 1);
                check(n);
                check(n.saturating_sub(1));
            }
            for _ in 0..20_000 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                check(seed >> 1);
                check((seed >> 1) % (1 << 40));
            }
        }
    }
}
