//! The D language front end: lexing, parsing, the C preprocessor, types, semantic checks.
//!
//! Passes, each a function from one representation to the next:
//! source text ─cpp (with `-C`)→ text ─lexer/parser→ [`ast::Program`] ─check→ typed program.

pub mod ast;
pub mod builtins;
pub mod check;
pub mod cpp;
pub mod diag;
pub mod lexer;
pub mod library;
pub mod options;
pub mod parser;
pub mod pragma;
pub mod token;
pub mod types;

use std::collections::HashSet;

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

/// Compiles one D program. Options set by `#pragma D option` are applied to `opts`.
pub fn compile(
    input: CompileInput<'_>,
    opts: &mut DOptions,
    catalog: &dyn ProbeCatalog,
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
    let lib = library::load(input.model, opts, catalog)?;
    let type_names: HashSet<String> = lib.types.type_names().cloned().collect();
    let (program, pragmas, used) = {
        let opts_cell = std::cell::RefCell::new(&mut *opts);
        let hook = Box::new(|words: &[String], line: u32| {
            let mut o = opts_cell.borrow_mut();
            pragma::apply(words, line, &mut o, catalog)
        });
        parser::parse_program(text, input.kind, input.macros.clone(), type_names, Some(hook))?
    };
    // the last $n operand given must be referenced (DTrace checks only the last one)
    let argc = input.macros.args.len();
    if argc > 1 && !opts.argref() && !used.get(argc - 1).copied().unwrap_or(false) {
        let arg = input.macros.args[argc - 1].clone();
        return Err(derr(
            "D_MACRO_UNUSED",
            0,
            format!("extraneous argument '{arg}' (${} is not referenced)", argc - 1),
        ));
    }
    let mut checker = check::Checker::new(TypeTable::new(input.model), opts, catalog);
    lib.install(&mut checker);
    checker.program(&program)?;
    Ok(CompiledProgram {
        ast: program,
        pragmas,
    })
}
