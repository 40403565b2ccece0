//! The D language front end: lexing, parsing, the C preprocessor, types, semantic checks.
//!
//! Passes, each a function from one representation to the next:
//! source text ─cpp (with `-C`)→ text ─lexer/parser→ [`ast::Program`] ─check→ typed program.

pub mod ast;
pub mod builtins;
pub mod check;
pub mod cpp;
pub mod describe;
pub mod diag;
pub mod kernel;
pub mod lexer;
pub mod library;
pub mod options;
pub mod parser;
pub mod pragma;
pub mod stability;
pub mod target_types;
pub mod token;
pub mod types;

use diag::{derr, DResult};
pub use lexer::MacroEnv;
pub use parser::SourceKind;

use crate::probes::ProbeCatalog;
use options::DOptions;
use types::{DataModel, TypeTable};

/// A program ready for code generation: its syntax tree and the checker's tables.
pub struct CompiledProgram {
    pub ast: ast::Program,
    pub pragmas: Vec<ast::Pragma>,
    /// The lowered program the runtime executes.
    pub ir: crate::ir::Program,
    /// Calls destructive actions (`system`, `raise`, `copyout`, ...): needs `-w` to run.
    pub destructive: bool,
    /// The stability attributes of each clause's statements, in the order of `ir.clauses`.
    pub stability: Vec<stability::ClauseAttrs>,
}

impl CompiledProgram {
    /// `-v`'s two minimums: of the probe descriptions' attributes and of the statements'.
    pub fn stability_report(
        &self,
        catalog: &dyn ProbeCatalog,
    ) -> (
        crate::probes::stability::Attr,
        crate::probes::stability::Attr,
    ) {
        let clauses: Vec<_> = self
            .stability
            .iter()
            .zip(&self.ir.clauses)
            .map(|(a, c)| (*a, c.probes.as_slice()))
            .collect();
        stability::program_attrs(&clauses, catalog)
    }
}

/// What to compile and how.
pub struct CompileInput<'a> {
    pub text: &'a str,
    pub kind: SourceKind,
    pub macros: MacroEnv,
    /// Run the C preprocessor first (`-C`), with these options.
    pub cpp: Option<cpp::CppOptions>,
    /// Name used for the preprocessor's line markers.
    pub file_name: &'a str,
    pub model: DataModel,
}

/// Stack for the compiler's recursive passes: deep (but legal) programs, such as a 100,000-term
/// `a + b + ...` chain, must not overflow the caller's stack.
const COMPILER_STACK: usize = 1 << 30;

/// Compiles one D program. Options set by `#pragma D option` are applied to `opts`.
pub fn compile(
    input: CompileInput<'_>,
    opts: &mut DOptions,
    catalog: &dyn ProbeCatalog,
) -> DResult<CompiledProgram> {
    compile_with_types(input, opts, catalog, None)
}

/// [`compile`], with the target's own types (its PDB) for ``pid`NAME`` and the `pid`
/// probes' `args[]`.
pub fn compile_with_types(
    input: CompileInput<'_>,
    opts: &mut DOptions,
    catalog: &dyn ProbeCatalog,
    target_types: Option<std::sync::Arc<dyn target_types::TargetTypes>>,
) -> DResult<CompiledProgram> {
    // The passes recurse over the tree; run them on a thread with a large stack.
    let catalog: &(dyn ProbeCatalog + Sync) = match as_sync(catalog) {
        Some(c) => c,
        None => return compile_here(input, opts, catalog, target_types),
    };
    std::thread::scope(|s| {
        let h = std::thread::Builder::new()
            .name("dtx-compile".into())
            .stack_size(COMPILER_STACK)
            .spawn_scoped(s, move || compile_here(input, opts, catalog, target_types));
        match h {
            Ok(h) => h
                .join()
                .unwrap_or_else(|_| Err(derr("D_UNKNOWN", 0, "internal compiler error"))),
            Err(_) => Err(derr("D_UNKNOWN", 0, "cannot start the compiler thread")),
        }
    })
}

/// The catalog as shareable with the compiler thread, when it is.
fn as_sync(c: &dyn ProbeCatalog) -> Option<&(dyn ProbeCatalog + Sync)> {
    c.as_sync()
}

fn compile_here(
    input: CompileInput<'_>,
    opts: &mut DOptions,
    catalog: &dyn ProbeCatalog,
    target_types: Option<std::sync::Arc<dyn target_types::TargetTypes>>,
) -> DResult<CompiledProgram> {
    let preprocessed;
    let text = match &input.cpp {
        Some(c) => {
            preprocessed = cpp::preprocess(input.text, input.file_name, c)
                .map_err(|e| derr("D_PREPROC", 0, format!("{e}")))?;
            preprocessed.as_str()
        }
        None => input.text,
    };
    let lib = library::shared(input.model, opts, catalog)?;
    let _ = &lib;
    let mut type_names: parser::TypeNames = lib.types.type_names().cloned().collect();
    type_names.extend(lib.types.defined_tags());
    let mut checker = check::Checker::new(TypeTable::new(input.model), opts.clone(), catalog);
    lib.install(&mut checker);
    checker.target_types = target_types;
    // Declarations are checked as they are parsed (a later syntax error does not hide an
    // earlier declaration error, as in DTrace); clauses are checked after the whole parse.
    let (program, pragmas, used, end_line) = {
        let opts_cell = std::cell::RefCell::new(&mut *opts);
        let hook = Box::new(|words: &[String], line: u32| {
            let mut o = opts_cell.borrow_mut();
            pragma::apply(words, line, &mut o, catalog)
        });
        let mut parser =
            parser::Parser::new(text, input.kind, input.macros.clone()).with_pragma_hook(hook);
        parser.type_names = type_names;
        parser.library_tags = checker.types.library_tag_names().into_iter().collect();
        let mut items = Vec::new();
        while let Some(item) = parser.next_item()? {
            if !matches!(item, ast::Item::Clause(_)) {
                checker.opts = (**opts_cell.borrow()).clone();
                checker.item(&item)?;
            }
            items.push(item);
        }
        let end_line = parser.end_line();
        let used = parser.args_used();
        let pragmas = parser.take_pragmas();
        (ast::Program { items }, pragmas, used, end_line)
    };
    checker.opts = opts.clone();
    // the last $n operand given must be referenced (DTrace checks only the last one)
    let argc = input.macros.args.len();
    if argc > 1 && !opts.argref() && !used.get(argc - 1).copied().unwrap_or(false) {
        let arg = input.macros.args[argc - 1].clone();
        return Err(derr(
            "D_MACRO_UNUSED",
            end_line,
            format!(
                "extraneous argument '{arg}' (${} is not referenced)",
                argc - 1
            ),
        ));
    }
    if program.items.is_empty() && !opts.empty() {
        return Err(derr(
            "D_EMPTY",
            end_line,
            "empty D program translation unit",
        ));
    }
    let program = checker.split_clauses(program);
    checker.clauses(&program)?;
    for p in &pragmas {
        if let Some(name) = pragma::ident_target(&p.words) {
            if !checker.is_defined(name) {
                return Err(derr(
                    "D_PRAGMA_UNUSED",
                    p.line,
                    format!("unused #pragma {}", p.words[2..].join(" ")),
                ));
            }
        }
    }
    let ir = checker.lower_program(&program)?;
    fpid_reads_no_memory(&ir)?;
    let idents =
        stability::program_idents(&program, &pragmas, &checker.types, &checker.translators);
    let stability = program
        .items
        .iter()
        .filter_map(|item| match item {
            ast::Item::Clause(c) => Some(stability::clause_attrs(
                c,
                &checker.types,
                &idents,
                &checker.translators,
            )),
            _ => None,
        })
        .collect();
    Ok(CompiledProgram {
        ir,
        ast: program,
        pragmas,
        destructive: checker.uses_destructive,
        stability,
    })
}

/// Refuses `copyin`, `copyinstr` and `copyinto` in clauses of `fpid` probes: their hits are
/// recorded inside the target and the clauses run later in dtx, with no way into the target's
/// memory. The `pid` provider stops the target at each hit and can read it.
fn fpid_reads_no_memory(ir: &crate::ir::Program) -> DResult<()> {
    for c in &ir.clauses {
        if !c.probes.iter().any(|d| d.provider.starts_with("fpid")) {
            continue;
        }
        let mut found = None;
        crate::ir::visit::visit_clause(
            c,
            &mut |n| {
                if let crate::ir::Node::Call { subr, name, .. } = n {
                    if found.is_none() && subr.copies_in() {
                        found = Some(*name);
                    }
                }
            },
            &mut |_| {},
        );
        if let Some(name) = found {
            return Err(derr(
                "D_FPID_COPYIN",
                c.line,
                format!(
                    "{name}() cannot read the target's memory in an fpid probe clause \
                     (fpid hooks record registers only): use the pid provider to read it"
                ),
            ));
        }
    }
    Ok(())
}
