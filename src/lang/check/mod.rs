//! Semantic checking: resolves declarations into types, types every expression and rejects what
//! DTrace rejects, with the same `D_*` tags and messages.
//!
//! One pass per concern: `decl` (types and declarations), `expr` (expressions), `call`
//! (subroutines and their prototypes), `actions` (actions and aggregating functions), `clause`
//! (probe clauses, statements and the speculation/commit rules).

mod actions;
mod call;
mod clause;
mod decl;
mod etw_trace;
mod expr;
mod lower;
mod regs;

use std::collections::HashMap;

use super::ast::{self, Item};
use super::diag::{derr, DResult};
use super::options::DOptions;
use super::types::{TypeId, TypeTable};
use crate::probes::ProbeCatalog;

pub use actions::ClauseCx;
pub use expr::Typed;

/// Where a D variable lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarScope {
    Global,
    Thread,
    Clause,
}

#[derive(Clone, Debug)]
pub struct VarInfo {
    pub ty: TypeId,
    /// Key types of an associative array.
    pub keys: Option<Vec<TypeId>>,
    pub scope: VarScope,
    /// Declared with a type (as opposed to created by its first assignment).
    pub declared: bool,
    pub id: u32,
}

#[derive(Clone, Debug)]
pub struct AggInfo {
    pub func: String,
    pub keys: Option<Vec<TypeId>>,
    pub id: u32,
    /// Parameters that must match across uses (lquantize/llquantize bounds).
    pub params: Vec<i64>,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub struct InlineInfo {
    pub ty: TypeId,
    /// Shared: every program's checker starts from a copy of the library's inlines.
    pub value: std::sync::Arc<ast::Expr>,
    /// Parameters of an inline associative array (`inline int f[int x] = x + 1;`).
    pub params: Option<Vec<(String, TypeId)>>,
    /// A name bound to a value of its type that is not known at compile time (translator input,
    /// inline parameter): never constant.
    pub opaque: bool,
}

#[derive(Clone, Debug)]
pub struct Translator {
    pub output: TypeId,
    pub input: TypeId,
    pub input_name: String,
    /// Shared: every program's checker starts from a copy of the library's translators.
    pub members: std::sync::Arc<[(String, ast::Expr)]>,
}

/// State of the checker across the whole program.
pub struct Checker<'a> {
    pub types: TypeTable,
    /// The options in force (refreshed as `#pragma D option` lines are read).
    pub opts: DOptions,
    pub catalog: &'a dyn ProbeCatalog,
    /// The target's own types (its PDB): what ``pid`NAME`` names, and `pid` probes'
    /// `args[]` from their functions' prototypes.
    pub target_types: Option<std::sync::Arc<dyn crate::lang::target_types::TargetTypes>>,
    pub globals: HashMap<String, VarInfo>,
    pub thread_vars: HashMap<String, VarInfo>,
    pub clause_vars: HashMap<String, VarInfo>,
    pub aggs: HashMap<String, AggInfo>,
    pub inlines: HashMap<String, InlineInfo>,
    /// Inlines of the D library that a program may declare again, its own replacing the
    /// library's: the errno and socket constants, which scripts written for systems whose
    /// library lacks them declare themselves (`inline int AF_INET6 = 28;`).
    pub soft_inlines: std::collections::HashSet<String>,
    pub translators: Vec<Translator>,
    pub enum_consts: HashMap<String, (i64, TypeId)>,
    /// Names the parser must treat as type names (typedefs of the library and program).
    next_var_id: u32,
    /// Set while cooking the clause's probe arguments (`args[]` types), if known.
    pub(crate) probe_args: Option<Vec<TypeId>>,
    /// The clause's first probe description, as dtrace names it in `args[]` errors.
    pub(crate) probe_args_desc: Option<String>,
    /// Every probe the clause enables takes no arguments (dtrace's BEGIN and END).
    pub(crate) probe_no_args: bool,
    /// Every probe the clause enables gives `args[]` no types here (Linux live, ETW events
    /// without a schema).
    pub(crate) probe_args_untyped: bool,
    /// A `pid` function whose prototype no PDB of the target gives, and the target's
    /// types: the refusal of `args[N]->x` says why its `args[]` have no types (asking the
    /// types what they lack reads every PDB, so only then).
    pub(crate) probe_args_pid: Option<(
        String,
        std::sync::Arc<dyn crate::lang::target_types::TargetTypes>,
    )>,
    /// The translated `args[N]` of the clause's probes: N → (native type, translated type).
    pub(crate) probe_xlate: HashMap<usize, (ast::TypeName, ast::TypeName)>,
    /// Types of prototype texts already parsed (`"const char *"` → id).
    pub(crate) text_types: HashMap<String, TypeId>,
    /// Inline expansion depth, for recursive inlines.
    pub(crate) inline_depth: u32,
    /// The program calls a destructive action (refused at enabling time without `-w`).
    pub uses_destructive: bool,
    /// The forward-declared tags a program named with a kernel scope (``struct nt`_EPROCESS``):
    /// `->` on them says why no definition is available ([`crate::lang::kernel`]).
    pub(crate) kernel_tags: std::collections::HashSet<TypeId>,
}

impl<'a> Checker<'a> {
    pub fn new(types: TypeTable, opts: DOptions, catalog: &'a dyn ProbeCatalog) -> Self {
        Checker {
            types,
            opts,
            catalog,
            target_types: None,
            globals: HashMap::new(),
            thread_vars: HashMap::new(),
            clause_vars: HashMap::new(),
            aggs: HashMap::new(),
            inlines: HashMap::new(),
            soft_inlines: Default::default(),
            translators: Vec::new(),
            enum_consts: HashMap::new(),
            next_var_id: 1,
            probe_args: None,
            probe_args_desc: None,
            probe_no_args: false,
            probe_args_untyped: false,
            probe_args_pid: None,
            probe_xlate: HashMap::new(),
            inline_depth: 0,
            text_types: HashMap::new(),
            uses_destructive: false,
            kernel_tags: Default::default(),
        }
    }

    /// A ``pid`NAME`` type of the target's debug information, imported into the table.
    pub(crate) fn target_type(&mut self, name: &str) -> Option<TypeId> {
        let base = crate::lang::target_types::pid_scoped(name)?;
        let t = self.target_types.clone()?;
        t.import(base, &mut self.types)
    }

    pub(crate) fn new_var_id(&mut self) -> u32 {
        self.next_var_id += 1;
        self.next_var_id
    }

    /// Checks one top-level item. Declarations take effect for the items after them.
    pub fn item(&mut self, item: &Item) -> DResult<()> {
        match item {
            Item::Decl(d) => self.declaration(d),
            Item::Inline(i) => self.inline_def(i),
            Item::Translator(t) => self.translator_def(t),
            Item::Provider(p) => self.provider_def(p),
            Item::Clause(c) => self.clause(c),
            Item::Pragma(_) => Ok(()),
        }
    }

    /// Checks the clauses of a program whose declarations were already checked.
    pub fn clauses(&mut self, p: &ast::Program) -> DResult<()> {
        for item in &p.items {
            if matches!(item, Item::Clause(_)) {
                self.item(item)?;
            }
        }
        Ok(())
    }

    /// Checks declarations first (they are processed as they are parsed in DTrace), then the
    /// clauses in order.
    pub fn program(&mut self, p: &ast::Program) -> DResult<()> {
        for item in &p.items {
            if !matches!(item, Item::Clause(_)) {
                self.item(item)?;
            }
        }
        for item in &p.items {
            if matches!(item, Item::Clause(_)) {
                self.item(item)?;
            }
        }
        Ok(())
    }

    /// A built-in identifier, if it exists in the D version in force (`-xversion`).
    pub fn builtin(&self, name: &str) -> Option<&'static crate::lang::builtins::Builtin> {
        let b = crate::lang::builtins::lookup(name)?;
        let mut parts = b.version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let v = (
            parts.next().unwrap_or(1),
            parts.next().unwrap_or(0),
            parts.next().unwrap_or(0),
        );
        (v <= self.opts.version()).then_some(b)
    }

    /// Whether a name is defined as a variable, inline, aggregation, type or built-in.
    pub fn is_defined(&self, name: &str) -> bool {
        self.globals.contains_key(name)
            || self.thread_vars.contains_key(name)
            || self.clause_vars.contains_key(name)
            || self.inlines.contains_key(name)
            || self.aggs.contains_key(name)
            || self.enum_consts.contains_key(name)
            || self.types.lookup(name).is_some()
            || self.builtin(name).is_some()
    }

    pub fn undefined(&self, name: &str, line: u32) -> super::diag::Diagnostic {
        if let Some(why) = crate::lang::builtins::microsoft_only(name) {
            return derr("D_IDENT_UNDEF", line, why);
        }
        derr(
            "D_IDENT_UNDEF",
            line,
            format!("failed to resolve {name}: Unknown variable name"),
        )
    }
}
