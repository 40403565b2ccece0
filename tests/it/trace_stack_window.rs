//! The stacks of a trace read a window ahead of the walk (`src/sources/etl/stacks.rs`) print
//! byte for byte as those read all before the run (`-x stackwindow=0`), over every shared
//! trace that has stacks; a stack logged later than the window is said, not lost silently; and
//! over a long trace the windowed walk's memory stays flat where the pass over the whole trace
//! grows with it. Skips, with a message, when `../shared` is absent.

use crate::support::etl;

use std::process::Command;

/// The traces with stacks: (folder in `../shared`, file).
const TRACES: &[(&str, &str)] = &[
    ("etl", "randomascii_slow_ppt_trace.etl.zip"),
    ("etl", "perfview_net.4.5.2.x64.etl.zip"),
    ("etl", "perfview_net.4.5.2.x86.etl.zip"),
    (
        "etl",
        "perfview_diaghub-dotnetcore3.1-win-x64-diagsession.zip",
    ),
    ("etl-win11", "filtrace_diskio.etl"),
    ("etl-win11", "filtrace_etw.etl"),
];

const PROFILE: &str = "profile-* { @[stack()] = count(); @u[ustack()] = count(); }";
const DOTNET: &str = "dnet:::* { @[ustack()] = count(); }";
const EVERY: &str = "diag:::events { @[stack()] = count(); @u[ustack()] = count(); }";

/// `dtx -q [-x stackwindow=W] -E trace -n prog`: (stdout, stderr), which must succeed.
fn run(trace: &str, prog: &str, window: Option<&str>) -> (String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dtx"));
    if let Some(w) = window {
        c.args(["-x", &format!("stackwindow={w}")]);
    }
    let out = c.args(["-q", "-E", trace, "-n", prog]).output().unwrap();
    assert!(
        out.status.success(),
        "{trace} {prog}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The lines of dtx's late-stack warning in `stderr`.
fn late_lines(stderr: &str) -> Vec<&str> {
    (stderr.lines())
        .filter(|l| l.contains("lacked a part of"))
        .collect()
}

#[test]
fn windowed_stacks_print_as_those_read_before_the_run() {
    let mut frames = 0;
    for &(dir, name) in TRACES {
        let Some(trace) = etl::shared(dir, name) else {
            return;
        };
        for prog in [PROFILE, DOTNET, EVERY] {
            let (before, before_err) = run(&trace, prog, Some("0"));
            let (windowed, err) = run(&trace, prog, None);
            // one stack (below), logged more than 8 s after its event: said, and a window
            // wide enough gives it back
            if name == "filtrace_diskio.etl" && prog == EVERY {
                assert_ne!(windowed, before);
                let late = late_lines(&err);
                assert_eq!(late.len(), 1, "{err}");
                assert!(
                    late[0].contains(
                        "2 firings lacked a part of their stack that the trace \
                                      logged more than 2s after the event"
                    ),
                    "{err}"
                );
                assert!(late[0].contains("-x stackwindow="), "{err}");
                let (wide, wide_err) = run(&trace, prog, Some("30s"));
                assert_eq!(wide, before, "{name}: {prog} with a 30 s window");
                assert!(late_lines(&wide_err).is_empty(), "{wide_err}");
                continue;
            }
            assert_eq!(windowed, before, "{name}: {prog}");
            // the traces of an archive run side by side: their lines come in any order
            let sorted = |s: &str| {
                let mut v: Vec<String> = s.lines().map(str::to_string).collect();
                v.sort();
                v
            };
            assert_eq!(sorted(&err), sorted(&before_err), "{name}: {prog}");
            assert!(late_lines(&err).is_empty(), "{err}");
            frames += windowed.lines().filter(|l| l.contains('+')).count();
        }
    }
    // the programs printed stacks, not empty aggregations
    assert!(frames > 100_000, "{frames} frames");
}

#[test]
fn a_tiny_window_says_what_it_lost_rather_than_lose_it_silently() {
    let Some(trace) = etl::shared("etl", "perfview_net.4.5.2.x64.etl.zip") else {
        return;
    };
    // the user halves of sampled stacks come when the thread returns to user mode: often more
    // than a microsecond after the sample
    let prog = "profile-997 { @[stackdepth > 0, ustackdepth > 0] = count(); }";
    let (before, _) = run(&trace, prog, Some("0"));
    let (tiny, err) = run(&trace, prog, Some("1us"));
    let late = late_lines(&err);
    assert_eq!(late.len(), 1, "{err}");
    assert!(late[0].contains("more than 1us after the event"), "{err}");
    // what it says matches what the output lacks: the samples with a user stack
    let with_user = |out: &str| -> u64 {
        (out.lines())
            .filter_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (w.len() == 3 && w[1] == "1").then(|| w[2].parse::<u64>().unwrap())
            })
            .sum()
    };
    let lost = with_user(&before) - with_user(&tiny);
    // "dtx: warning: N firings lacked ...; M stack parts came so long after ..."
    let number_before = |what: &str| -> u64 {
        let at = late[0]
            .find(what)
            .unwrap_or_else(|| panic!("{what}: {err}"));
        let n = late[0][..at].rsplit([' ', ';']).next().unwrap();
        n.parse().unwrap()
    };
    let said = number_before(" firings lacked");
    let unknown = number_before(" stack parts came so long after");
    assert!(lost > 0, "{before}\n{tiny}");
    // every stack lost is said: as a firing that lacked it, or as a part so late that
    // whether its event fired is no longer known
    assert!(
        said + unknown >= lost,
        "said {said} + {unknown}, lost {lost}: {err}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn over_a_long_trace_the_windowed_stacks_take_no_more_memory() {
    const TRACE: &str = "randomascii_slow_ppt_trace.etl.zip";
    const COPIES: usize = 9;
    let Some(bytes) = etl::trace_bytes(TRACE) else {
        return;
    };
    let prog = "profile-997 { @[stack()] = count(); @u[ustack()] = count(); @n = count(); }";
    let dir = tempfile::tempdir().unwrap();
    let (one, big) = (dir.path().join("one.etl"), dir.path().join("big.etl"));
    std::fs::write(&one, &bytes).unwrap();
    etl::write_repeated_trace(&bytes, COPIES, &big);
    let windowed = |t: &std::path::Path| etl::quiet_with_peak_rss(t.to_str().unwrap(), prog);
    let (out1, rss1) = windowed(&one);
    let (out9, rss9) = windowed(&big);
    let (out9_before, rss9_before) =
        etl::quiet_with_peak_rss_args(big.to_str().unwrap(), prog, &["-x", "stackwindow=0"]);
    eprintln!(
        "peak RSS: {rss1} KB over one copy; over {COPIES}: {rss9} KB windowed, \
         {rss9_before} KB with every stack read before"
    );
    // the same stacks, each counted once per copy
    assert_eq!(out9, out9_before);
    assert!(out1.lines().count() > 1000, "{out1}");
    assert_eq!(out9.lines().count(), out1.lines().count());
    assert!(rss9 < rss1 * 3 / 2, "{rss9} KB against {rss1} KB");
    assert!(rss9 * 2 < rss9_before, "{rss9} KB against {rss9_before} KB");
}
