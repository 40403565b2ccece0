//! `dtx -l` and `-lv`: dtrace's listing, byte for byte: the column header and probe line, then
//! (with `-v`) the probe description and argument stability attributes and the argument types;
//! and `-v`'s stability report of a program (dtrace's `exec_prog`).

use crate::support::cli;
use cli::dtx_ok;

#[test]
fn verbose_listing_of_begin_is_dtraces() {
    let want = "   ID   PROVIDER            MODULE                          FUNCTION NAME
    1     dtrace                                                     BEGIN

\tProbe Description Attributes
\t\tIdentifier Names: Stable
\t\tData Semantics:   Stable
\t\tDependency Class: Common

\tArgument Attributes
\t\tIdentifier Names: Stable
\t\tData Semantics:   Stable
\t\tDependency Class: Common

\tArgument Types
\t\tNone

";
    assert_eq!(dtx_ok(&["-lv", "-n", "BEGIN"]), want);
    assert_eq!(
        dtx_ok(&["-l", "-n", "BEGIN"]),
        want.lines()
            .take(2)
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );
}

/// One block of `-v`'s report, as dtrace's `exec_prog` prints it.
fn block(title: &str, attr: &str) -> String {
    let mut p = attr.split('/');
    format!(
        "\n\t{title}\n\t\tIdentifier Names: {}\n\t\tData Semantics:   {}\n\t\tDependency Class: {}\n",
        p.next().unwrap(),
        p.next().unwrap(),
        p.next().unwrap()
    )
}

/// The whole report of one enabled program: the two minimums and a blank line.
fn report(label: &str, desc: &str, stmt: &str) -> String {
    format!(
        "\nStability attributes for description {label}:\n{}{}\n",
        block("Minimum Probe Description Attributes", desc),
        block("Minimum Statement Attributes", stmt)
    )
}

#[test]
fn verbose_prints_the_stability_report_after_the_match() {
    // an unnamed provider makes the description Unstable (dt_probe_info's _dtrace_prvdesc);
    // D's own actions are Stable/Stable/Common (_dtrace_defattr)
    assert_eq!(
        dtx_ok(&["-q", "-v", "-n", "BEGIN { exit(0); }"]),
        // (dtx ends quiet output with a newline)
        report("BEGIN ", "Unstable/Unstable/Common", "Stable/Stable/Common") + "\n"
    );
    // a named provider gives its attributes; curthread's data is Private (dt_open.c)
    assert_eq!(
        dtx_ok(&[
            "-q",
            "-v",
            "-n",
            "dtrace:::BEGIN { trace(curthread != 0); exit(0); }"
        ]),
        report(
            "dtrace:::BEGIN ",
            "Stable/Stable/Common",
            "Stable/Private/Common"
        ) + "1\n"
    );
}

#[test]
fn statement_attributes_are_the_weakest_of_what_the_clause_reads() {
    let stmt = |clause: &str| -> String {
        let out = dtx_ok(&["-q", "-v", "-n", clause]);
        let i = out.find("Minimum Statement Attributes").unwrap();
        out[i..]
            .lines()
            .skip(1)
            .take(3)
            .collect::<Vec<_>>()
            .join("|")
    };
    // an Evolving subroutine (htons: DT_ATTR_EVOLCMN)
    assert_eq!(
        stmt("dtrace:::BEGIN { x = htons(1); exit(0); }"),
        "\t\tIdentifier Names: Evolving|\t\tData Semantics:   Evolving|\t\tDependency Class: Common"
    );
    // a kernel type is Private/Private/Unknown (_dtrace_typattr), a program's own is not
    assert_eq!(
        stmt("dtrace:::BEGIN { x = (nt`_GUID *)0; exit(0); }"),
        "\t\tIdentifier Names: Private|\t\tData Semantics:   Private|\t\tDependency Class: Unknown"
    );
    assert_eq!(
        stmt("dtrace:::BEGIN { x = (HANDLE)0; exit(0); }"),
        "\t\tIdentifier Names: Private|\t\tData Semantics:   Private|\t\tDependency Class: Unknown"
    );
    assert_eq!(
        stmt("dtrace:::BEGIN { x = (uint64_t)0; exit(0); }"),
        "\t\tIdentifier Names: Stable|\t\tData Semantics:   Stable|\t\tDependency Class: Common"
    );
    // probefunc takes the provider's function attributes (dt_setcontext)
    assert_eq!(
        stmt("dtrace:::BEGIN { trace(probefunc); exit(0); }"),
        "\t\tIdentifier Names: Private|\t\tData Semantics:   Private|\t\tDependency Class: Unknown"
    );
    // a clause with no action has D's default whatever its predicate reads
    assert_eq!(
        stmt("dtrace:::BEGIN /curthread/ {} dtrace:::BEGIN { exit(0); }"),
        "\t\tIdentifier Names: Stable|\t\tData Semantics:   Stable|\t\tDependency Class: Common"
    );
}

#[test]
fn pragma_attributes_weaken_a_programs_own_identifier() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("attrs.d");
    std::fs::write(
        &script,
        "inline int lim = 3;\n#pragma D attributes Evolving/Unstable/ISA lim\n\
         dtrace:::BEGIN { trace(lim); exit(0); }\n",
    )
    .unwrap();
    let out = dtx_ok(&["-q", "-v", "-s", script.to_str().unwrap()]);
    let want = format!(
        "\nStability attributes for script {}:\n{}{}\n",
        script.display(),
        block(
            "Minimum Probe Description Attributes",
            "Stable/Stable/Common"
        ),
        block("Minimum Statement Attributes", "Evolving/Unstable/ISA")
    ) + "3\n";
    assert_eq!(out, want);
}

#[test]
fn compile_only_verbose_adds_each_descriptions_probe_information() {
    let out = dtx_ok(&["-e", "-v", "-n", "BEGIN, dtrace:::END { trace(1); }"]);
    let probe = |desc: &str, attr: &str| {
        format!(
            "\n{desc}\n{}{}\n\tArgument Types\n\t\tNone\n\n",
            block("Probe Description Attributes", attr),
            block("Argument Attributes", "Stable/Stable/Common")
        )
    };
    let want = format!(
        "\nStability attributes for description BEGIN, dtrace:::END :\n{}{}{}{}",
        block(
            "Minimum Probe Description Attributes",
            "Unstable/Unstable/Common"
        ),
        block("Minimum Statement Attributes", "Stable/Stable/Common"),
        probe(":::BEGIN", "Unstable/Unstable/Common"),
        probe("dtrace:::END", "Stable/Stable/Common"),
    );
    assert_eq!(out, want);
}

#[test]
fn an_inline_has_the_attributes_of_its_value_unless_a_pragma_sets_them() {
    // a translation of curthread is a kernel module's (Private/Private/Unknown); an inline
    // defined by it has those attributes, or the ones `#pragma D attributes` gives it
    let dir = tempfile::tempdir().unwrap();
    let run = |pragma: &str| {
        let script = dir.path().join("x.d");
        std::fs::write(
            &script,
            format!(
                "inline lwpsinfo_t *mine = xlate <lwpsinfo_t *> (curthread);\n{pragma}\n\
                 BEGIN {{ this->a = mine->pr_flag; exit(0); }}\n"
            ),
        )
        .unwrap();
        let out = dtx_ok(&["-q", "-v", "-s", script.to_str().unwrap()]);
        let i = out.find("Minimum Statement Attributes").unwrap();
        out[i..]
            .lines()
            .skip(1)
            .take(3)
            .collect::<Vec<_>>()
            .join("|")
    };
    let plain = run("");
    let set = run("#pragma D attributes Stable/Stable/Common mine");
    assert_eq!(
        plain,
        "\t\tIdentifier Names: Private|\t\tData Semantics:   Private|\t\tDependency Class: Unknown"
    );
    assert_eq!(
        set,
        "\t\tIdentifier Names: Stable|\t\tData Semantics:   Stable|\t\tDependency Class: Common"
    );
}
