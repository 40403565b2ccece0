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
    ("windows.d", include_str!("../../dscripts/lib/windows.d")),
    ("dnet.d", include_str!("../../dscripts/lib/dnet.d")),
    ("errno.d", include_str!("../../dscripts/lib/errno.d")),
    ("socket.d", include_str!("../../dscripts/lib/socket.d")),
    ("socket.d (AF_INET6)", AF_INET6),
];

/// AF_INET6 of the system dtx runs on (socket.d says why it is not in the file).
const AF_INET6: &str = if cfg!(windows) {
    "inline int AF_INET6 = 23;\ninline int PF_INET6 = 23;\n"
} else {
    "inline int AF_INET6 = 10;\ninline int PF_INET6 = 10;\n"
};

/// The checked library: its types and definitions, to install into a program's checker.
pub struct Library {
    pub types: TypeTable,
    translators: Vec<Translator>,
    inlines: HashMap<String, InlineInfo>,
    /// The inlines a program may declare again (see `Checker::soft_inlines`).
    soft_inlines: std::collections::HashSet<String>,
    enum_consts: HashMap<String, (i64, u32)>,
}

pub fn load(model: DataModel, opts: &DOptions, catalog: &dyn ProbeCatalog) -> DResult<Library> {
    let base = TypeTable::new(model);
    let mut checker = Checker::new(base.clone(), opts.clone(), catalog);
    let mut soft = std::collections::HashSet::new();
    for (name, text) in FILES {
        let before: std::collections::HashSet<String> = checker.inlines.keys().cloned().collect();
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
        if name.starts_with("errno.d") || name.starts_with("socket.d") {
            soft.extend(
                checker
                    .inlines
                    .keys()
                    .filter(|k| !before.contains(*k))
                    .cloned(),
            );
        }
    }
    checker.types.seal_library(&base);
    Ok(Library {
        types: checker.types,
        translators: checker.translators,
        inlines: checker.inlines,
        soft_inlines: soft,
        enum_consts: checker.enum_consts,
    })
}

impl Library {
    pub fn install(self, checker: &mut Checker<'_>) {
        checker.types = self.types;
        checker.translators = self.translators;
        checker.inlines = self.inlines;
        checker.soft_inlines = self.soft_inlines;
        checker.enum_consts = self.enum_consts;
    }
}
