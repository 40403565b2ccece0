//! The `fpid` provider on Windows, end to end: `tests/pid_windows/fpidwin.c` (built with mingw
//! by `scripts/pid-windows-fixtures.sh`, whose folder `DTX_PID_WIN_FIXTURES` names) traced by
//! `dtx -c` / `-p` with the agent DLL injected and hooking through MinHook. Run under Wine by
//! `scripts/windows-check.sh`; skipped with a message when the programs are not there.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::support::cli;
use cli::{dtx, text};

/// The test program, or None (after saying why).
fn program() -> Option<PathBuf> {
    let Some(dir) = std::env::var_os("DTX_PID_WIN_FIXTURES") else {
        eprintln!(
            "skipping fpid Windows tests: DTX_PID_WIN_FIXTURES is not set \
             (scripts/windows-check.sh builds the test programs and sets it)"
        );
        return None;
    };
    let p = PathBuf::from(dir).join("fpidwin.exe");
    if !p.is_file() {
        eprintln!("skipping fpid Windows tests: no {}", p.display());
        return None;
    }
    Some(p)
}

/// The sum the program prints for `n` calls of hit() (and wide()'s 36).
fn checksum(n: i64) -> i64 {
    (0..n).map(|i| i * 3 + 1).sum::<i64>() + 36
}

#[test]
fn fpid_windows_counts_args_and_return_values_exactly() {
    let Some(prog) = program() else { return };
    let direct = Command::new(&prog).output().unwrap();
    let direct = String::from_utf8_lossy(&direct.stdout).replace("\r\n", "\n");
    assert!(
        direct.contains(&format!("checksum {}\n", checksum(5000))),
        "{direct}"
    );
    let script = r#"
        fpid$target:a.out:hit:entry { @entries = count(); @argsum = sum(arg0); }
        fpid$target:a.out:hit:return { @returns = count(); @retsum = sum(arg1); }
        fpid$target:a.out:wide:entry { printf("wide %d %d %d %d %d %d %d %d\n", arg0, arg1, arg2, arg3, arg4, arg5, arg6, arg7); }
        fpid$target:a.out:wide:return { printf("wide returns %d in %s\n", arg1, probefunc); }
        END { printa("entries %@d\n", @entries); printa("returns %@d\n", @returns);
              printa("argsum %@d\n", @argsum); printa("retsum %@d\n", @retsum); }
    "#;
    let out = dtx(&["-q", "-n", script, "-c", prog.to_str().unwrap()]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    // the target finished unharmed: its own checksum, as untraced
    assert!(
        so.contains(&format!("checksum {}\n", checksum(5000))),
        "{so}{se}"
    );
    assert!(so.contains("entries 5000\n"), "{so}{se}");
    assert!(so.contains("returns 5000\n"), "{so}");
    assert!(
        so.contains(&format!("argsum {}\n", (0..5000i64).sum::<i64>())),
        "{so}"
    );
    assert!(
        so.contains(&format!("retsum {}\n", checksum(5000) - 36)),
        "{so}"
    );
    assert!(so.contains("wide 1 2 3 4 5 6 7 8\n"), "{so}");
    assert!(so.contains("wide returns 36 in wide\n"), "{so}");
    // not quiet: the end of the process is told as pid's is
    let out = dtx(&[
        "-n",
        "fpid$target:a.out:hit:entry {}",
        "-c",
        &format!("{} 3", prog.display()),
    ]);
    let (_, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(se.contains("matched 1 probe"), "{se}");
    assert!(se.contains("has exited"), "{se}");
}

/// A tight loop of 2,000,000 calls (what the Windows bench counted 582,542 of when a full
/// ring dropped at once) counted exactly with the default settings: the agent's hit waits
/// for room while dtx drains, whatever the machine's speed. A drop would be said on stderr.
#[test]
fn fpid_windows_counts_two_million_calls_exactly() {
    let Some(prog) = program() else { return };
    let n: i64 = 2_000_000;
    let out = dtx(&[
        "-q",
        "-n",
        "fpid$target:a.out:hit:entry { @n = count(); @s = sum(arg0); } \
         fpid$target:a.out:hit:return { @r = count(); } \
         END { printa(\"entries %@d\\n\", @n); printa(\"argsum %@d\\n\", @s); \
               printa(\"returns %@d\\n\", @r); }",
        "-c",
        &format!("{} {n}", prog.display()),
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    assert!(
        so.contains(&format!("checksum {}\n", checksum(n))),
        "{so}{se}"
    );
    assert!(so.contains(&format!("entries {n}\n")), "{so}{se}");
    assert!(so.contains(&format!("returns {n}\n")), "{so}{se}");
    assert!(
        so.contains(&format!("argsum {}\n", (0..n).sum::<i64>())),
        "{so}"
    );
    assert!(!se.contains("drops"), "{se}");
}

/// The function names of the frames of a `ustack()` (unnamed addresses left out).
fn frames(out: &str) -> Vec<String> {
    out.lines()
        .map(str::trim)
        .filter(|l| l.contains('`') && !l.contains("`0x"))
        .map(|l| l.split('+').next().unwrap_or(l).to_string())
        .collect()
}

#[test]
fn fpid_windows_ustack_names_functions_as_pid_does() {
    let Some(prog) = program() else { return };
    let run = |provider: &str| {
        let script = format!(
            "{provider}$target:a.out:leaf:entry /n++ == 0/ {{ ustack(); }} \
             {provider}$target:a.out:leaf:return /m++ == 0/ {{ printf(\"return\\n\"); ustack(); }}"
        );
        let out = dtx(&["-q", "-n", &script, "-c", &format!("{} 10", prog.display())]);
        let (so, se) = text(&out);
        assert!(out.status.success(), "{se}");
        assert!(so.contains("chain 21"), "{so}");
        let (entry, ret) = so.split_once("return\n").expect("both stacks");
        (frames(entry), frames(ret))
    };
    let (fe, fr) = run("fpid");
    let (pe, pr) = run("pid");
    assert!(fe.len() >= 4, "{fe:?}");
    assert_eq!(
        &fe[..4],
        [
            "fpidwin.exe`leaf",
            "fpidwin.exe`middle",
            "fpidwin.exe`outer",
            "fpidwin.exe`main"
        ],
        "{fe:?}"
    );
    assert_eq!(fe, pe);
    assert_eq!(fr, pr);
}

/// Starts the fixture with `args` and `env` and waits for its "ready" line: the running
/// child and the rest of its stdout.
fn spawn_ready(
    prog: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
) {
    let mut cmd = Command::new(prog);
    cmd.args(args).stdout(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert_eq!(first.trim(), "ready");
    (child, stdout)
}

#[test]
fn fpid_windows_attach_then_exit_leaves_target_running() {
    let Some(prog) = program() else { return };
    // 200 calls of hit(), 5 ms apart
    let (mut child, mut stdout) = spawn_ready(&prog, &["200", "5"], &[]);
    let pid = child.id().to_string();
    let out = dtx(&[
        "-q",
        "-n",
        "fpid$target:a.out:hit:entry { printf(\"hit %d\\n\", arg0); n++; } \
         fpid$target:a.out:hit:return /n == 3/ { printf(\"ret %d\\n\", arg1); exit(0); }",
        "-p",
        &pid,
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    let hits: Vec<i64> = so
        .lines()
        .filter_map(|l| l.strip_prefix("hit ")?.parse().ok())
        .collect();
    assert!(hits.len() >= 3, "{so}{se}");
    assert!(hits.windows(2).all(|w| w[1] == w[0] + 1), "{so}");
    assert!(so.contains(&format!("ret {}\n", hits[2] * 3 + 1)), "{so}");
    // the hooks are out now: the program finishes with its own checksum
    let st = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert_eq!(st.code(), Some(0));
    assert!(
        rest.replace("\r\n", "\n")
            .contains(&format!("checksum {}\n", checksum(200))),
        "{rest}"
    );
}

/// Issue 42, finding 16: the agent refused a TLS index past 63 (its slot is then in the TEB's
/// TlsExpansionSlots, which TlsSetValue allocates per thread), so a target that had taken 64
/// indexes could not be traced ("no thread-local slot is left"). A running program that took
/// 70 (`-p`: with `-c` the agent is in before the program's own TlsAlloc calls) is traced, its
/// hits counted in order, and finishes with its own checksum.
#[test]
fn win3_16_fpid_traces_a_target_whose_first_64_tls_slots_are_taken() {
    let Some(prog) = program() else { return };
    // 200 calls of hit(), 5 ms apart, after 70 TlsAlloc calls
    let (mut child, mut stdout) = spawn_ready(&prog, &["200", "5"], &[("FPIDWIN_TLS", "70")]);
    let pid = child.id().to_string();
    let out = dtx(&[
        "-q",
        "-n",
        "fpid$target:a.out:hit:entry { printf(\"hit %d\\n\", arg0); n++; } \
         fpid$target:a.out:hit:entry /n == 5/ { exit(0); }",
        "-p",
        &pid,
    ]);
    let (so, se) = text(&out);
    let st = child.wait().unwrap();
    assert!(out.status.success(), "{so}{se}");
    let hits: Vec<i64> = so
        .lines()
        .filter_map(|l| l.strip_prefix("hit ")?.parse().ok())
        .collect();
    assert!(hits.len() >= 5, "{so}{se}");
    assert!(hits.windows(2).all(|w| w[1] == w[0] + 1), "{so}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert_eq!(st.code(), Some(0));
    assert!(
        rest.replace("\r\n", "\n")
            .contains(&format!("checksum {}\n", checksum(200))),
        "{rest}"
    );
}

// ---------------------------------------------------------------------------------------------
// The third reading of the Windows code (issue 42, finding 3): the ring reaches the agent as a
// section handle duplicated into the target (the mapping has no name a target of another
// user, session or integrity level would have to open), and the agent is in a folder whose
// DACL lets any identity read and run it.

#[link(name = "advapi32")]
extern "system" {
    fn GetFileSecurityW(
        path: *const u16,
        info: u32,
        sd: *mut std::ffi::c_void,
        len: u32,
        needed: *mut u32,
    ) -> i32;
    fn ConvertSecurityDescriptorToStringSecurityDescriptorW(
        sd: *const std::ffi::c_void,
        revision: u32,
        info: u32,
        out: *mut *mut u16,
        len: *mut u32,
    ) -> i32;
}

/// The DACL of `path` as SDDL, or why not.
fn dacl_sddl(path: &std::path::Path) -> Result<String, String> {
    use std::os::windows::ffi::OsStrExt;
    const DACL: u32 = 4;
    let p: Vec<u16> = path.as_os_str().encode_wide().chain(Some(0)).collect();
    let mut buf = vec![0u8; 4096];
    let mut needed = 0u32;
    // SAFETY: a NUL-terminated path, a buffer of the size given, out pointers
    unsafe {
        if GetFileSecurityW(p.as_ptr(), DACL, buf.as_mut_ptr().cast(), 4096, &mut needed) == 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        let mut s: *mut u16 = std::ptr::null_mut();
        let mut len = 0u32;
        if ConvertSecurityDescriptorToStringSecurityDescriptorW(
            buf.as_ptr().cast(),
            1,
            DACL,
            &mut s,
            &mut len,
        ) == 0
        {
            return Err(std::io::Error::last_os_error().to_string());
        }
        let text = String::from_utf16_lossy(std::slice::from_raw_parts(s, len as usize));
        // the string is LocalAlloc'd; left for the process's end (one per test)
        Ok(text.trim_end_matches('\0').to_string())
    }
}

#[test]
fn win3_fpid_ring_is_a_duplicated_handle_and_the_agent_is_readable_by_anyone() {
    let Some(prog) = program() else { return };
    let out = dtx(&[
        "-q",
        "-n",
        "fpid$target:a.out:hit:entry { @n = count(); } END { printa(\"hits %@d\\n\", @n); }",
        "-c",
        &format!("{} 3", prog.display()),
    ]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{se}");
    // every hit came through the one mapping, which has no name: the agent reached it through
    // the handle dtx duplicated into the target
    assert!(so.contains("hits 3\n"), "{so}{se}");
    // the agent's folder: %ProgramData%\dtx\fpid for an elevated dtx (Wine's user is), else
    // %TEMP%\dtx-fpid
    let dirs = [
        std::env::var_os("ProgramData").map(|d| PathBuf::from(d).join("dtx").join("fpid")),
        Some(std::env::temp_dir().join("dtx-fpid")),
    ];
    let dir = dirs
        .into_iter()
        .flatten()
        .find(|d| {
            std::fs::read_dir(d).is_ok_and(|mut r| {
                r.any(|e| {
                    e.is_ok_and(|e| {
                        e.file_name()
                            .to_string_lossy()
                            .starts_with("dtx-fpid-agent-")
                    })
                })
            })
        })
        .expect("the agent is in neither of its folders");
    let sddl = dacl_sddl(&dir).unwrap();
    if !sddl.starts_with("D:P") && under_wine() {
        // Wine makes a file's DACL up from its Unix mode and keeps none that is set
        eprintln!(
            "skipping the DACL check of {}: Wine keeps no file DACLs ({sddl})",
            dir.display()
        );
        return;
    }
    // protected, read and execute for Everyone and for app packages, nothing inherited
    assert!(sddl.starts_with("D:P"), "{}: {sddl}", dir.display());
    for who in ["WD", "AC", "S-1-15-2-2"] {
        assert!(
            sddl.contains(&format!("(A;OICI;0x1200a9;;;{who})")),
            "{}: {sddl}",
            dir.display()
        );
    }
}

/// Whether this runs under Wine (its ntdll exports `wine_get_version`).
fn under_wine() -> bool {
    #[link(name = "kernel32")]
    extern "system" {
        fn GetModuleHandleW(name: *const u16) -> *mut std::ffi::c_void;
        fn GetProcAddress(m: *mut std::ffi::c_void, name: *const u8) -> *const std::ffi::c_void;
    }
    let ntdll: Vec<u16> = "ntdll.dll".encode_utf16().chain(Some(0)).collect();
    // SAFETY: NUL-terminated names; ntdll is loaded in every process
    unsafe {
        !GetProcAddress(
            GetModuleHandleW(ntdll.as_ptr()),
            c"wine_get_version".as_ptr().cast(),
        )
        .is_null()
    }
}
