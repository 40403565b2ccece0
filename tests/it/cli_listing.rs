//! `dtx -l` and `-lv`: dtrace's listing, byte for byte: the column header and probe line, then
//! (with `-v`) the probe description and argument stability attributes and the argument types.

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
