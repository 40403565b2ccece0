//! The D type library: the `.d` files of `dscripts/lib/` (compiled into the binary), checked
//! once before each program so that their typedefs, structs, inlines and translators are
//! visible to it.

use super::ast::Item;
use super::check::{Checker, InlineInfo, Translator};
use super::diag::{derr, DResult};
use super::options::DOptions;
use super::parser::{parse_program, SourceKind};
use super::types::{DataModel, TypeTable};
use super::MacroEnv;
use crate::probes::ProbeCatalog;
use std::collections::HashMap;

/// The library files, in load order.
pub const FILES: &[(&str, &str)] = &[
    ("base.d", include_str!("../../dscripts/lib/base.d")),
    ("unistd.d", include_str!("../../dscripts/lib/unistd.d")),
    ("regs.d", include_str!("../../dscripts/lib/regs.d")),
    ("psinfo.d", include_str!("../../dscripts/lib/psinfo.d")),
    ("io.d", include_str!("../../dscripts/lib/io.d")),
    ("net.d", include_str!("../../dscripts/lib/net.d")),
    ("registry.d", include_str!("../../dscripts/lib/registry.d")),
    ("etw.d", include_str!("../../dscripts/lib/etw.d")),
    ("dnet.d", include_str!("../../dscripts/lib/dnet.d")),
];

/// The checked library: its types and definitions, to install into a program's checker.
pub struct Library {
    pub types: TypeTable,
    translators: Vec<Translator>,
    inlines: HashMap<String, InlineInfo>,
    enum_consts: HashMap<String, (i64, u32)>,
}

pub fn load(model: DataModel, opts: &DOptions, catalog: &dyn ProbeCatalog) -> DResult<Library> {
    let mut checker = Checker::new(TypeTable::new(model), opts.clone(), catalog);
    for (name, text) in FILES {
        let names: crate::lang::parser::TypeNames = checker.types.type_names().cloned().collect();
        let (prog, _, _) = parse_program(text, SourceKind::File, MacroEnv::default(), names, None)
            .map_err(|d| derr(d.tag, d.line, format!("{name}: {}", d.message)))?;
        for item in &prog.items {
            if !matches!(item, Item::Clause(_)) {
                checker
                    .item(item)
                    .map_err(|d| derr(d.tag, d.line, format!("{name}: {}", d.message)))?;
            }
        }
    }
    Ok(Library {
        types: checker.types,
        translators: checker.translators,
        inlines: checker.inlines,
        enum_consts: checker.enum_consts,
    })
}

impl Library {
    pub fn install(self, checker: &mut Checker<'_>) {
        checker.types = self.types;
        checker.translators = self.translators;
        checker.inlines = self.inlines;
        checker.enum_consts = self.enum_consts;
    }
}
