//! D variable semantics seen from the command line: values stay 64-bit in variables and narrow
//! only from wider types; string variables remember NULL. (dtrace ends its output with a
//! newline when tracing stops.)

use crate::support::cli;

/// `dtx -q -n prog`, which must succeed: its stdout.
fn stdout_of(prog: &str) -> String {
    cli::dtx_ok(&["-q", "-n", prog])
}

#[test]
fn string_variables_hold_null() {
    let out = stdout_of(
        "string s; BEGIN { s = \"x\"; printf(\"%s|\", s != NULL ? s : \"null\"); \
         s = NULL; printf(\"%s|\", s != NULL ? s : \"null\"); \
         s = \"y\"; printf(\"%s\\n\", s); exit(0); }",
    );
    assert_eq!(out, "x|null|y\n\n");
}

#[test]
fn variables_keep_64_bits_unless_narrowed_from_a_wider_type() {
    // an int-typed expression keeps its 64-bit value in a variable (dtrace's registers)...
    let out = stdout_of(
        "BEGIN { this->v = (1 << 63) - 1; this->v >>= 60; printf(\"%d\\n\", (long)this->v); exit(0); }",
    );
    assert_eq!(out, "7\n\n");
    // ...but a wider value assigned to a narrower variable is narrowed
    let out = stdout_of(
        "uint16_t x; uint32_t y; BEGIN { x = 0xbeefcafe; y = x; printf(\"%x\\n\", y); exit(0); }",
    );
    assert_eq!(out, "cafe\n\n");
}
