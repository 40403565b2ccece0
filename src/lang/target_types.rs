//! The target process's own types, as its debug information (a PDB's TPI stream) describes
//! them: what ``pid`NAME`` and ``userland pid`NAME`` name (the Windows port's
//! `(userland pid`_TEB *)`), and the prototypes that type a `pid` probe's `args[]` (the
//! parameters at `entry`, the return value's `args[1]` at `return`).
//!
//! The compiler owns this trait and its type table; `symbols` reads the debug information
//! and implements it (`symbols/pdb_types.rs`), adding what a program names, and what that
//! refers to, into the table as it is asked for.

use super::types::{TypeId, TypeTable};

/// The types of the target's debug information.
pub trait TargetTypes: Send + Sync {
    /// Whether a type of this name is there: a typedef, or a struct, union or enum tag, bare
    /// (`_POINT`) or with its keyword (`struct _POINT`).
    fn has(&self, name: &str) -> bool;

    /// Adds the type named `name` (and every type it refers to) to `table`, once per run
    /// (the table remembers what was imported): its id, or None when the target has no such
    /// type.
    fn import(&self, name: &str, table: &mut TypeTable) -> Option<TypeId>;

    /// The parameter types of the prototype of function `func` of module `module` (a `pid`
    /// probe's module: the image's file name), added to `table`, when the debug information
    /// has it.
    fn params(&self, module: &str, func: &str, table: &mut TypeTable) -> Option<Vec<TypeId>>;

    /// The return type of the prototype of function `func` of module `module`, added to
    /// `table`, when the debug information has it (None for a function that returns
    /// nothing).
    fn returns(&self, module: &str, func: &str, table: &mut TypeTable) -> Option<TypeId>;

    /// Why a type name that [`TargetTypes::has`] does not know is not there, for the
    /// compiler's refusal: which debug information was read, and what was not found.
    fn why_missing(&self) -> String {
        String::new()
    }
}

/// The reason a ``pid`NAME`` type is unknown, for `failed to resolve type X: Unknown type
/// name`: with no target there is no debug information to read; with one, what it has.
pub fn why_unknown(types: Option<&dyn TargetTypes>) -> String {
    match types {
        None => " (pid`NAME names a type of the target's PDBs, and this run has no target: \
                 give -c or -p)"
            .to_string(),
        Some(t) => match t.why_missing() {
            w if w.is_empty() => String::new(),
            w => format!(" ({w})"),
        },
    }
}

/// The type name after a `pid` scope (``pid`X``, ``pid1234`X``), the scope of the target's
/// types; None for any other name.
pub fn pid_scoped(name: &str) -> Option<&str> {
    let name = name.trim();
    let i = name.rfind('`')?;
    let scope = name[..i].rsplit('`').next().unwrap_or("");
    let n = scope.strip_prefix("pid")?;
    if !n.is_empty() && n.parse::<u32>().map_or(true, |p| p == 0) {
        return None;
    }
    let base = name[i + 1..].trim();
    (!base.is_empty()).then_some(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_scopes() {
        assert_eq!(pid_scoped("pid`_POINT"), Some("_POINT"));
        assert_eq!(pid_scoped("pid42`struct _POINT"), Some("struct _POINT"));
        assert_eq!(pid_scoped("pid0`_POINT"), None);
        assert_eq!(pid_scoped("pidx`_POINT"), None);
        assert_eq!(pid_scoped("nt`_EPROCESS"), None);
        assert_eq!(pid_scoped("_POINT"), None);
        assert_eq!(pid_scoped("pid`"), None);
    }
}
