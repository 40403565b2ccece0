//! The scripts DTrace users arrive with, over the real traces: `profile-N` fires in the
//! sampled context (not in dtx), `walltimestamp` is trace time in BEGIN and END, probe names
//! the profile provider does not know are errors, and the samples are listed. Skips when
//! `../shared/etl` is absent.

use crate::support::cli;
use cli::{dtx_ok, run};

const PPT: &str = "randomascii_slow_ppt_trace.etl.zip";

/// The shared trace `name`, or None (with a note) when the shared traces are not here.
fn trace(name: &str) -> Option<String> {
    crate::support::etl::trace(name)
}

/// `dtx -q -E trace -n prog`, which must succeed: its output.
fn over(trace: &str, prog: &str) -> String {
    dtx_ok(&["-q", "-E", trace, "-n", prog])
}

/// The rows of a printed `@[key] = count()` aggregation: (key, count), in printed order.
fn rows(out: &str) -> Vec<(String, u64)> {
    out.lines()
        .filter_map(|l| {
            let l = l.trim();
            let (k, v) = l.rsplit_once(char::is_whitespace).unwrap_or(("", l));
            Some((k.trim().to_string(), v.parse().ok()?))
        })
        .collect()
}

#[test]
fn profile_n_fires_in_the_sampled_context_over_a_trace() {
    let Some(t) = trace(PPT) else { return };
    let out = over(&t, "profile-97 { @[execname] = count(); }");
    let r = rows(&out);
    assert!(!r.iter().any(|(k, _)| k.starts_with("dtx")), "{out}");
    // printed in increasing order: the busiest last
    let mut top: Vec<&str> = r.iter().rev().map(|(k, _)| k.as_str()).collect();
    top.truncate(2);
    assert_eq!(top, ["idle", "powerpnt.exe"], "{out}");
    // 97 a second on each of the 8 CPUs over the trace's ~17 s
    let total: u64 = r.iter().map(|(_, n)| n).sum();
    assert!((12_000..=14_000).contains(&total), "{total}");
    // per CPU: the same count on every CPU that sampled the whole trace
    let out = over(&t, "profile-97 { @[cpu] = count(); }");
    let per_cpu = rows(&out);
    assert_eq!(per_cpu.len(), 8, "{out}");
    assert!(
        per_cpu.iter().all(|(_, n)| (1_600..=1_700).contains(n)),
        "{out}"
    );
    // the PCs: kernel or user, never both; powerpnt.exe ran much in user mode
    let out = over(
        &t,
        "profile-97 /arg0 != 0 && arg1 != 0/ { @both = count(); }
         profile-97 /arg0 == 0 && arg1 == 0/ { @none = count(); }
         profile-97 /execname == \"powerpnt.exe\" && arg1 != 0/ { @user = count(); }
         END { printa(\"both %@d\\n\", @both); printa(\"none %@d\\n\", @none);
               printa(\"user %@d\\n\", @user); }",
    );
    assert!(!out.contains("both"), "{out}");
    assert!(!out.contains("none"), "{out}");
    let user: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("user "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    assert!(user > 100, "{out}");
}

#[test]
fn profile_n_takes_the_samples_stacks() {
    let Some(t) = trace(PPT) else { return };
    let out = over(
        &t,
        "profile-97 /execname == \"powerpnt.exe\"/ { @[ustack(2)] = count(); }",
    );
    assert!(out.contains(".dll+0x") || out.contains(".exe+0x"), "{out}");
}

#[test]
fn walltimestamp_is_trace_time_in_begin_and_end() {
    let Some(t) = trace(PPT) else { return };
    let out = over(
        &t,
        "BEGIN { printf(\"begin %d\\n\", walltimestamp); }
         sched:::on-cpu /!seen/ { seen = 1; printf(\"event %d\\n\", walltimestamp); }
         tick-1s { printf(\"tick %d\\n\", walltimestamp); exit(0); }
         END { printf(\"end %d\\n\", walltimestamp); }",
    );
    let value = |what: &str| -> u64 {
        out.lines()
            .find_map(|l| l.strip_prefix(what))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {what}: {out}"))
    };
    let (begin, event, tick, end) = (
        value("begin "),
        value("event "),
        value("tick "),
        value("end "),
    );
    // the trace started on 2011-08-29 (US time; 2011-08-30 04:56 UTC)
    let aug29 = 1_314_576_000_000_000_000u64;
    assert!(
        begin >= aug29 && begin < aug29 + 2 * 86_400_000_000_000,
        "{begin}"
    );
    assert!(begin <= event && event - begin < 1_000_000_000, "{out}");
    assert_eq!(tick, begin + 1_000_000_000);
    assert!(end >= tick && end - begin < 60_000_000_000, "{out}");
}

#[test]
fn sample_probes_are_listed_and_unknown_names_refused() {
    let Some(t) = trace(PPT) else { return };
    let out = dtx_ok(&["-l", "-E", &t]);
    assert!(
        out.lines()
            .any(|l| l.contains("profile") && l.ends_with("sample-1ms")),
        "{out}"
    );
    let (code, _, err) = run(&[
        "-q",
        "-E",
        &t,
        "-n",
        "profile:::sample-foo { @ = count(); }",
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("profile:::sample-foo does not match any probes"),
        "{err}"
    );
    // sample-N keeps the Windows port's meaning: every sample
    let out = over(&t, "profile:::sample-5ms { @ = count(); }");
    assert_eq!(rows(&out).first().map(|r| r.1), Some(136_370), "{out}");
}

/// `dtx -q` with these arguments, which must succeed: its output.
fn quiet(args: &[&str]) -> String {
    let mut a = vec!["-q"];
    a.extend_from_slice(args);
    dtx_ok(&a)
}

#[test]
fn a_chain_of_seven_assignments_compiles() {
    let out = quiet(&[
        "-n",
        "BEGIN { a = b = c = d = e = f = g = 3; printf(\"%d %d\\n\", a, g); exit(0); }",
    ]);
    assert_eq!(out.trim(), "3 3");
    // this-> and self-> variables are stored straight from the value too
    let out = quiet(&[
        "-n",
        "BEGIN { this->a = this->b = this->c = this->d = this->e = this->f = this->g = 4;
                 printf(\"%d\\n\", this->a + this->g); exit(0); }",
    ]);
    assert_eq!(out.trim(), "8");
}

#[test]
fn names_dtrace_libraries_do_not_declare_are_free_for_variables() {
    let out = quiet(&[
        "-n",
        "BEGIN { wchar = 1; uint8 = 2; printf(\"%d %d\\n\", wchar, uint8); exit(0); }",
    ]);
    assert_eq!(out.trim(), "1 2");
}

#[test]
fn pragma_defaultargs_is_as_the_option() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let script = dir.join("args.d");
    std::fs::write(
        &script,
        "#pragma D option defaultargs\nBEGIN { printf(\"%d [%s]\\n\", $1, $$2); exit(0); }\n",
    )
    .unwrap();
    let s = script.to_str().unwrap();
    assert_eq!(quiet(&["-s", s]).trim(), "0 []");
    assert_eq!(quiet(&["-s", s, "5", "x"]).trim(), "5 [x]");
}

#[test]
fn ws_prints_a_wchar_t_array() {
    let out = quiet(&[
        "-n",
        "BEGIN { this->w = (wchar_t *)alloca(8); this->w[0] = 'h'; this->w[1] = 0x00e9;
                 this->w[2] = 0; printf(\"[%ws]\\n\", *(wchar_t (*)[4])this->w); exit(0); }",
    ]);
    assert_eq!(out.trim(), "[hé]");
}

#[test]
fn userland_casts_to_the_process_types() {
    // the Windows port's `(userland pid`UNICODE_STRING *)arg0`
    let out = quiet(&[
        "-n",
        "BEGIN { this->s = (userland pid`UNICODE_STRING *)0;
                 printf(\"%d %d\\n\", sizeof(*this->s), offsetof(UNICODE_STRING, Buffer));
                 exit(0); }",
    ]);
    assert_eq!(out.trim(), "16 8");
}

#[test]
fn the_library_names_errno_values_and_socket_addresses() {
    let out = quiet(&[
        "-n",
        "BEGIN { printf(\"%d %d %d %d %d\\n\", EINTR, EACCES, ENOENT, ECONNREFUSED, AF_INET);
                 printf(\"%d %d %d\\n\", SOCK_STREAM, SOCK_DGRAM, IPPROTO_TCP);
                 printf(\"%d %d %d %d\\n\", sizeof(struct sockaddr), sizeof(struct sockaddr_in),
                        sizeof(struct sockaddr_in6), sizeof(struct sockaddr_storage));
                 printf(\"%d %d\\n\", offsetof(struct sockaddr_in, sin_addr),
                        offsetof(struct sockaddr_in6, sin6_addr));
                 exit(0); }",
    ]);
    assert_eq!(
        out.trim(),
        "4 13 2 111 2\n1 2 6\n16 16 28 128\n4 8",
        "{out}"
    );
    let af6 = quiet(&["-n", "BEGIN { printf(\"%d\\n\", AF_INET6); exit(0); }"]);
    assert_eq!(af6.trim(), if cfg!(windows) { "23" } else { "10" });
}

#[test]
fn a_script_may_declare_the_library_constants_itself() {
    // scripts written for a library without them declare them (the suite's tst.inet_ntop.d)
    let out = quiet(&[
        "-n",
        "inline int AF_INET6 = 28; inline int EINTR = 4;
         BEGIN { printf(\"%d %d %d\\n\", AF_INET6, EINTR, AF_INET); exit(0); }",
    ]);
    assert_eq!(out.trim(), "28 4 2");
    // a program's own inline is not redeclared twice
    let (code, _, err) = run(&[
        "-n",
        "inline int AF_INET6 = 28; inline int AF_INET6 = 26; BEGIN { exit(0); }",
    ]);
    assert!(
        code != 0 && err.contains("identifier redeclared: AF_INET6"),
        "{err}"
    );
}

#[test]
fn kernel_stack_keys_do_not_split_by_process() {
    let Some(t) = trace(PPT) else { return };
    // the trace's context switches have no stack walks: one (empty) kernel stack for all
    let out = over(&t, "sched:::on-cpu { @[stack()] = count(); }");
    assert_eq!(rows(&out), [(String::new(), 29_533)], "{out}");
}

#[test]
fn a_rate_faster_than_the_traces_sampling_fires_every_sample_and_says_so() {
    let Some(t) = trace(PPT) else { return };
    let (code, out, err) = run(&["-q", "-E", &t, "-n", "profile-1999 { @ = count(); }"]);
    assert_eq!(code, 0, "{err}");
    let n = rows(&out).first().map_or(0, |r| r.1);
    // every sample but the few that came within half an interval of the one before
    assert!((136_000..=136_370).contains(&n), "{out}");
    assert!(
        err.contains("profile:::profile-1999: the trace sampled each CPU every 1.000 ms"),
        "{err}"
    );
    let (code, _, err) = run(&["-q", "-E", &t, "-n", "profile-997 { @ = count(); }"]);
    assert!(code == 0 && err.is_empty(), "{err}");
}

/// `%Y` and `%T` print in the local zone of the machine dtx runs on, as dtrace's `ctime_r` and
/// `strftime` do: with `TZ` set to the Pacific zone the xperf trace (recorded 2011-08-30 04:56
/// UTC) starts on the evening of 2011-08-29, PDT; with `TZ=UTC0` at 04:56 the next day. (On
/// Windows the zone is the one Windows is set to, not `TZ`.)
#[cfg(unix)]
#[test]
fn walltimestamp_prints_in_the_local_zone() {
    let Some(t) = trace(PPT) else { return };
    if !std::path::Path::new("/usr/share/zoneinfo/America/Los_Angeles").exists() {
        eprintln!("skipped: no zoneinfo for America/Los_Angeles");
        return;
    }
    let prog = "BEGIN { printf(\"%Y|%T\\n\", walltimestamp, walltimestamp); exit(0); }";
    let run = |tz: &str| {
        let text = cli::Dtx::new(&["-q", "-E", &t, "-n", prog])
            .env("TZ", tz)
            .ok();
        text.lines().next().unwrap_or_default().to_string()
    };
    assert_eq!(
        run("America/Los_Angeles"),
        "2011 Aug 29 21:56:58|Mon, 29 Aug 2011 21:56:58 PDT"
    );
    assert_eq!(
        run("UTC0"),
        "2011 Aug 30 04:56:58|Tue, 30 Aug 2011 04:56:58 UTC"
    );
}
