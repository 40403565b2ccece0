//! The local time zone of the machine dtx runs on, for `%Y` and `%T`: dtrace formats those
//! with `ctime_r`/`strftime`, in the local zone of the consumer (on Unix the `TZ` variable, else
//! `/etc/localtime`), not in UTC and not in the zone of the traced machine.

/// The offset east of UTC (seconds) and the zone's abbreviation at UTC second `secs`.
pub fn system_zone(secs: i64) -> (i64, String) {
    imp::zone(secs).unwrap_or((0, "UTC".to_string()))
}

#[cfg(unix)]
mod imp {
    use std::sync::Once;

    /// `localtime_r` after one `tzset`, as C's `ctime_r` reads the zone.
    pub(super) fn zone(secs: i64) -> Option<(i64, String)> {
        static TZSET: Once = Once::new();
        extern "C" {
            fn tzset();
        }
        // SAFETY: tzset only reads the environment and the zone files, once, before any
        // localtime_r of this process's formatting.
        TZSET.call_once(|| unsafe { tzset() });
        // time_t is 32 bits on some Unix targets
        #[allow(clippy::useless_conversion)]
        let t: libc::time_t = secs.try_into().ok()?;
        // SAFETY: a zeroed tm is a valid out-parameter; localtime_r writes it or returns null.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are to live locals.
        let r = unsafe { libc::localtime_r(&t, &mut tm) };
        if r.is_null() {
            return None;
        }
        let name = if tm.tm_zone.is_null() {
            String::new()
        } else {
            // SAFETY: tm_zone points at a NUL-terminated name the C library keeps alive.
            unsafe { std::ffi::CStr::from_ptr(tm.tm_zone) }
                .to_string_lossy()
                .into_owned()
        };
        #[allow(clippy::unnecessary_cast)]
        Some((tm.tm_gmtoff as i64, name))
    }
}

#[cfg(windows)]
mod imp {
    use windows_sys::Win32::Foundation::{FILETIME, SYSTEMTIME};
    use windows_sys::Win32::System::Time::{
        FileTimeToSystemTime, GetTimeZoneInformation, SystemTimeToFileTime,
        SystemTimeToTzSpecificLocalTime, TIME_ZONE_INFORMATION,
    };

    /// 100 ns intervals from 1601-01-01 to 1970-01-01.
    const EPOCH_DIFF: i64 = 116_444_736_000_000_000;

    /// The zone Windows is set to, with its daylight rule (`GetTimeZoneInformation` and
    /// `SystemTimeToTzSpecificLocalTime`, which Wine has too; the `...Ex` forms with each
    /// year's own rule are missing there). Windows names zones in words ("Pacific Daylight
    /// Time"); the abbreviation is the words' initials ("PDT"), as the C runtime has none.
    pub(super) fn zone(secs: i64) -> Option<(i64, String)> {
        let ticks = secs.checked_mul(10_000_000)?.checked_add(EPOCH_DIFF)?;
        if ticks < 0 {
            return None;
        }
        let ft = FILETIME {
            dwLowDateTime: ticks as u32,
            dwHighDateTime: (ticks >> 32) as u32,
        };
        // SAFETY: zeroed plain-data structures are valid out-parameters.
        let mut utc: SYSTEMTIME = unsafe { std::mem::zeroed() };
        let mut local: SYSTEMTIME = unsafe { std::mem::zeroed() };
        let mut tzi: TIME_ZONE_INFORMATION = unsafe { std::mem::zeroed() };
        let mut back: FILETIME = unsafe { std::mem::zeroed() };
        // SAFETY: every pointer is to a live local of the right type.
        unsafe {
            GetTimeZoneInformation(&mut tzi);
            if FileTimeToSystemTime(&ft, &mut utc) == 0
                || SystemTimeToTzSpecificLocalTime(&tzi, &utc, &mut local) == 0
                || SystemTimeToFileTime(&local, &mut back) == 0
            {
                return None;
            }
        }
        let local_ticks = (back.dwHighDateTime as i64) << 32 | back.dwLowDateTime as i64;
        let offset = (local_ticks - ticks) / 10_000_000;
        // daylight when the offset is not the standard one
        let standard = -(tzi.Bias as i64 + tzi.StandardBias as i64) * 60;
        let words = if offset == standard {
            &tzi.StandardName[..]
        } else {
            &tzi.DaylightName[..]
        };
        let end = words.iter().position(|&c| c == 0).unwrap_or(words.len());
        let name = String::from_utf16_lossy(&words[..end]);
        let initials: String = name
            .split_whitespace()
            .filter_map(|w| w.chars().next())
            .filter(|c| c.is_alphanumeric())
            .collect();
        let abbreviation = match (initials.is_empty(), offset) {
            (false, _) => initials.to_uppercase(),
            (true, 0) => "UTC".to_string(),
            // a zone without a name: its offset, as strftime's %z
            (true, o) => format!(
                "{}{:02}{:02}",
                if o < 0 { '-' } else { '+' },
                o.abs() / 3600,
                o.abs() % 3600 / 60
            ),
        };
        Some((offset, abbreviation))
    }
}

#[cfg(not(any(unix, windows)))]
mod imp {
    pub(super) fn zone(_secs: i64) -> Option<(i64, String)> {
        None
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// The zone follows `TZ` as C's does: checked in a child process, where setting the
    /// variable races no other test.
    #[test]
    fn the_zone_is_the_processes_local_one() {
        if std::env::var_os("DTX_LOCALTIME_CHILD").is_some() {
            // 2003-09-03 17:23:41 UTC is 10:23:41 PDT; 2003-01-01 is PST
            assert_eq!(system_zone(1_062_609_821), (-7 * 3600, "PDT".to_string()));
            assert_eq!(system_zone(1_041_379_200), (-8 * 3600, "PST".to_string()));
            return;
        }
        if !std::path::Path::new("/usr/share/zoneinfo/America/Los_Angeles").exists() {
            eprintln!("skipped: no zoneinfo for America/Los_Angeles");
            return;
        }
        let me = std::env::current_exe().unwrap();
        let out = std::process::Command::new(me)
            .args([
                "--exact",
                "output::localtime::tests::the_zone_is_the_processes_local_one",
            ])
            .env("DTX_LOCALTIME_CHILD", "1")
            .env("TZ", "America/Los_Angeles")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[cfg(all(test, windows))]
mod windows_tests {
    use super::*;

    /// The Windows zone answers for any time dtx prints (under Wine too): an offset Windows
    /// can have, whole minutes, and an abbreviation.
    #[test]
    fn the_windows_zone_answers() {
        for secs in [0, 1_062_609_821, 1_314_680_218, 0x7fff_ffff] {
            let (off, name) = imp::zone(secs).expect("the zone of a time after 1601");
            assert!(off.abs() <= 14 * 3600 && off % 60 == 0, "{off}");
            assert!(!name.is_empty());
        }
        assert_eq!(imp::zone(i64::MIN), None);
        assert_eq!(system_zone(i64::MIN), (0, "UTC".to_string()));
    }
}
