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

#[test]
fn fpid_windows_attach_then_exit_leaves_target_running() {
    let Some(prog) = program() else { return };
    // 200 calls of hit(), 5 ms apart
    let mut child = Command::new(&prog)
        .args(["200", "5"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert_eq!(first.trim(), "ready");
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
