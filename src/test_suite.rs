//! The illumos DTrace test suite, for the unit tests that compare dtx with its files. The suite
//! is not part of this repository (docs/dev/internals.md says where to get it): `DTX_SUITE`
//! names a copy's `tests/dtrace/tst` directory. Without it those comparisons are skipped, with a
//! line saying so; with it set to a directory that is not there, they fail.

use std::path::PathBuf;

/// `common/<sub>` of the suite named by `DTX_SUITE`, or `None` (said on stderr) when it is not
/// set.
pub(crate) fn common(sub: &str) -> Option<PathBuf> {
    let Some(root) = std::env::var_os("DTX_SUITE") else {
        eprintln!(
            "skipped: set DTX_SUITE to the suite's tests/dtrace/tst to compare with common/{sub}"
        );
        return None;
    };
    let dir = PathBuf::from(root).join("common").join(sub);
    assert!(
        dir.exists(),
        "DTX_SUITE is set, but {} is not there",
        dir.display()
    );
    Some(dir)
}
