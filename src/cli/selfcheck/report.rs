//! The self-check's report: a table (check, result, detail) and a one-line verdict for the
//! terminal, or one JSON document (`-x oformat=json`) to attach to a bug report.

use super::{Check, Outcome};
use crate::output::json::Json;

/// The exit status for these results: 0 when all passed, 1 when one failed, 3 when none
/// failed but some could not run.
pub fn exit_status(checks: &[Check]) -> i32 {
    if checks.iter().any(|c| c.result == Outcome::Fail) {
        1
    } else if checks.iter().any(|c| c.result == Outcome::Skip) {
        3
    } else {
        0
    }
}

/// The table: one row per check, the detail's lines after the first indented under it.
pub fn table(checks: &[Check]) -> String {
    let width = checks
        .iter()
        .map(|c| c.name.chars().count())
        .chain([5])
        .max()
        .unwrap_or(5);
    let mut s = format!("{:<width$}  {:<6}  {}\n", "CHECK", "RESULT", "DETAIL");
    for c in checks {
        let mut lines = c.detail.lines();
        let first = lines.next().unwrap_or("");
        s.push_str(&format!(
            "{:<width$}  {:<6}  {}\n",
            c.name,
            c.result.word(),
            first
        ));
        for l in lines {
            s.push_str(&format!("{:<width$}  {:<6}  {}\n", "", "", l));
        }
    }
    s
}

/// The one-line verdict.
pub fn verdict(prog: &str, checks: &[Check]) -> String {
    let count = |o: Outcome| checks.iter().filter(|c| c.result == o).count();
    let (pass, fail, skip) = (
        count(Outcome::Pass),
        count(Outcome::Fail),
        count(Outcome::Skip),
    );
    let names = |o: Outcome| {
        checks
            .iter()
            .filter(|c| c.result == o)
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match exit_status(checks) {
        0 => format!("{prog} --check: all {pass} checks passed"),
        1 => format!(
            "{prog} --check: FAILED: {fail} of {} checks failed ({}); {pass} passed, {skip} could not run",
            checks.len(),
            names(Outcome::Fail)
        ),
        _ => format!(
            "{prog} --check: INCOMPLETE: {pass} passed, none failed, {skip} could not run here ({})",
            names(Outcome::Skip)
        ),
    }
}

/// The JSON document: the program and its version, the platform, the verdict, the exit
/// status, and the `checks` list of `{name, result, detail}`.
pub fn json_document(prog: &str, checks: &[Check]) -> String {
    let list = checks
        .iter()
        .map(|c| {
            Json::object([
                ("name", Json::str(&c.name)),
                ("result", Json::str(c.result.word())),
                ("detail", Json::str(&c.detail)),
            ])
        })
        .collect();
    let doc = Json::object([
        ("program", Json::str(prog)),
        ("version", Json::str(env!("CARGO_PKG_VERSION"))),
        (
            "platform",
            Json::str(format!(
                "{}-{}",
                std::env::consts::OS,
                std::env::consts::ARCH
            )),
        ),
        ("verdict", Json::str(verdict(prog, checks))),
        ("status", Json::Int(exit_status(checks) as i64)),
        ("checks", Json::Array(list)),
    ]);
    let mut s = doc.to_json_pretty();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Check> {
        vec![
            Check::pass("tracefs", "/sys/kernel/tracing"),
            Check::skip("uprobes", "needs root\nsecond line"),
        ]
    }

    #[test]
    fn status_is_one_on_a_failure_three_on_a_skip_zero_else() {
        let mut c = sample();
        assert_eq!(exit_status(&c), 3);
        c[1].result = Outcome::Pass;
        assert_eq!(exit_status(&c), 0);
        c[0].result = Outcome::Fail;
        assert_eq!(exit_status(&c), 1);
        assert!(verdict("dtx", &c).contains("FAILED: 1 of 2 checks failed (tracefs)"));
    }

    #[test]
    fn the_table_indents_a_details_further_lines() {
        let t = table(&sample());
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "CHECK    RESULT  DETAIL");
        assert_eq!(lines[1], "tracefs  pass    /sys/kernel/tracing");
        assert_eq!(lines[2], "uprobes  skip    needs root");
        assert_eq!(lines[3], "                 second line");
    }

    #[test]
    fn the_json_document_lists_the_checks() {
        let doc = json_document("dtx", &sample());
        assert!(doc.contains("\"checks\": ["), "{doc}");
        assert!(doc.contains("\"result\": \"skip\""), "{doc}");
        assert!(
            doc.contains("\"detail\": \"needs root\\nsecond line\""),
            "{doc}"
        );
        assert!(doc.contains("\"status\": 3"), "{doc}");
    }
}
