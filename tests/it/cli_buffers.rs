//! Buffer policies seen from the command line: `bufpolicy=fill` records until the principal
//! buffer is full (each `printf("%d\n", int)` firing takes 16 bytes: a 12-byte header and a
//! 4-byte int), then stops tracing with status 0 and still runs END from its reserve.

use crate::support::cli;
use cli::run;

#[test]
fn fill_policy_stops_when_the_buffer_is_full() {
    let prog = "int i; tick-1ms { printf(\"%d\\n\", i++); } tick-1ms /i > 1000/ { exit(1); }";
    let (code, out, err) = run(&[
        "-q",
        "-x",
        "bufpolicy=fill",
        "-x",
        "bufsize=128",
        "-n",
        prog,
    ]);
    assert_eq!(code, 0, "stderr: {err}");
    assert_eq!(out, "0\n1\n2\n3\n4\n5\n6\n7\n\n");
    // twice the buffer, twice the records
    let (code, out, _) = run(&[
        "-q",
        "-x",
        "bufpolicy=fill",
        "-x",
        "bufsize=256",
        "-n",
        prog,
    ]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().filter(|l| !l.is_empty()).count(), 16);
}

#[test]
fn fill_policy_keeps_room_for_end() {
    let prog = "int i; tick-1ms { printf(\"%d\\n\", i++); } END { printf(\"end %d\\n\", i); }";
    let (code, out, err) = run(&[
        "-q",
        "-x",
        "bufpolicy=fill",
        "-x",
        "bufsize=128",
        "-n",
        prog,
    ]);
    assert_eq!(code, 0, "stderr: {err}");
    // END's 16 bytes and its alignment of 4 are reserved (dtrace_state_prereserve()): six
    // firings of 16 bytes fit in the 108 left, then END records
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 7, "{out}");
    assert_eq!(lines[6], "end 6", "{out}");
}
