//! What a type name means, for people browsing probes: the members of the struct an argument
//! type names (through pointers and typedefs), with the library's types (`fileinfo_t`,
//! `psinfo_t`, ...) known.

use super::check::Checker;
use super::options::DOptions;
use super::types::{DataModel, TypeKind, TypeTable};
use crate::probes::Catalog;

/// One member of a struct or union: its name, its type as D writes it, and its offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub ty: String,
    pub offset: u64,
}

/// The D type library, loaded once, for describing types.
pub struct TypeBook {
    checker: Checker<'static>,
}

static EMPTY: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();

impl TypeBook {
    /// The library's types in the LP64 data model; `None` if the library does not load.
    pub fn new() -> Option<TypeBook> {
        let catalog: &'static Catalog = EMPTY.get_or_init(|| Catalog::new(Vec::new()));
        let opts = DOptions::new();
        let lib = super::library::shared(DataModel::Lp64, &opts, catalog).ok()?;
        let mut checker = Checker::new(TypeTable::new(DataModel::Lp64), opts, catalog);
        lib.install(&mut checker);
        Some(TypeBook { checker })
    }

    /// The members of the struct or union `text` names, itself or through pointers; `None`
    /// when it names something else (an integer, `char *`) or nothing known.
    pub fn fields(&mut self, text: &str) -> Option<Vec<Field>> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        let mut id = self.checker.type_from_text(text);
        let types = &self.checker.types;
        // through pointers, at most a few
        for _ in 0..4 {
            match types.referent(id) {
                Some(r) if types.is_pointer(id) => id = r,
                _ => break,
            }
        }
        let id = types.resolve(id);
        if !matches!(
            types.kind(id),
            TypeKind::Struct { .. } | TypeKind::Union { .. }
        ) {
            return None;
        }
        let members = types.members(id)?;
        Some(
            members
                .iter()
                .map(|m| Field {
                    name: m.name.clone(),
                    ty: types.name(m.ty),
                    offset: m.offset_bits / 8,
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translated_types_show_their_members() {
        let mut book = TypeBook::new().unwrap();
        let f = book.fields("psinfo_t *").unwrap();
        let pid = f.iter().find(|m| m.name == "pr_pid").unwrap();
        assert_eq!(pid.ty, "pid_t");
        assert!(f
            .iter()
            .any(|m| m.name == "pr_psargs" && m.ty.starts_with("char")));
        let thread = book.fields("struct thread *").unwrap();
        assert_eq!(thread[0].name, "t_tid");
        assert_eq!(thread[0].offset, 0);
        assert!(book.fields("int").is_none());
        assert!(book.fields("char *").is_none());
        assert!(book.fields("no_such_type_t").is_none());
        assert!(book.fields("").is_none());
    }
}
