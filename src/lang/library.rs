//! The D type library: the `.d` files of `dscripts/lib/` (compiled into the binary), checked
//! once per process and data model (see [`shared`]) and installed before each program so that
//! their typedefs, structs, inlines and translators are visible to it.

use super::ast::Item;
use super::check::{Checker, InlineInfo, Translator};
use super::diag::{derr, DResult};
use super::options::DOptions;
use super::parser::{parse_program, SourceKind};
use super::types::{DataModel, TypeTable};
use super::MacroEnv;
use crate::probes::ProbeCatalog;
use std::collections::HashMap;
use std::sync::Mutex;

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
#[derive(Clone)]
pub struct Library {
    pub types: TypeTable,
    translators: Vec<Translator>,
    inlines: HashMap<String, InlineInfo>,
    /// The inlines a program may declare again (see `Checker::soft_inlines`).
    soft_inlines: std::collections::HashSet<String>,
    enum_consts: HashMap<String, (i64, u32)>,
}

/// The library for `model` under `opts`, checked once per process and copied out after: parsing
/// and checking its 1,300 lines is ~3 ms, the copy a small fraction of that, and a process that
/// compiles many programs (the console, `--check` over many scripts, the tests, the fuzz targets)
/// pays the parse once. The result depends only on the data model and the options (the library
/// holds declarations and no clause, so the probe catalog is never consulted); the options are
/// keyed by their whole value, so no option can make a stale copy come back.
pub fn shared(model: DataModel, opts: &DOptions, catalog: &dyn ProbeCatalog) -> DResult<Library> {
    type Cache = Vec<(DataModel, String, Library)>;
    /// A few option sets at most: a process compiles under one or two.
    const KEEP: usize = 4;
    static CACHE: Mutex<Cache> = Mutex::new(Vec::new());
    let key = format!("{opts:?}");
    if let Ok(cache) = CACHE.lock() {
        if let Some((_, _, lib)) = cache.iter().find(|(m, k, _)| *m == model && *k == key) {
            return Ok(lib.clone());
        }
    }
    let lib = load(model, opts, catalog)?;
    if let Ok(mut cache) = CACHE.lock() {
        if cache.len() >= KEEP {
            cache.remove(0);
        }
        cache.push((model, key, lib.clone()));
    }
    Ok(lib)
}

/// Parses and checks the library's files (see [`shared`] for the cached copy).
pub fn load(model: DataModel, opts: &DOptions, catalog: &dyn ProbeCatalog) -> DResult<Library> {
    let base = TypeTable::new(model);
    let mut checker = Checker::new(base.clone(), opts.clone(), catalog);
    let mut soft = std::collections::HashSet::new();
    for (name, text) in FILES {
        let first_type = checker.types.next_id();
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
        if *name == "base.d" {
            // curthread's `struct thread` stands for the kernel's `kthread_t`: translators
            // from it are a kernel module's (the illumos translators' `Private` inputs)
            if let Some(id) = checker.types.lookup("struct thread") {
                checker.types.mark_kernel(id);
            }
        }
        if *name == "windows.d" {
            checker.types.mark_kernel_since(first_type);
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
