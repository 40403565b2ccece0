//! Compiling a script's text for the console: the D front end with the console's macros
//! (`$pid` is dtx's own, `$target` the session's target) and its one rule, no destructive
//! actions. The editor, the dashboards and the probe browser's clause templates all compile
//! through here.

use std::sync::Arc;

use crate::engine::session::ProgramSpec;
use crate::lang::diag::Diagnostic;
use crate::lang::options::DOptions;
use crate::lang::types::DataModel;
use crate::lang::{compile, CompileInput, MacroEnv, SourceKind};
use crate::probes::Catalog;

/// Compiles a script's text for the console.
pub fn compile_text(
    text: &str,
    file_name: &str,
    catalog: &Catalog,
) -> Result<ProgramSpec, Diagnostic> {
    compile_for(text, file_name, catalog, 0)
}

/// [`compile_text`] with `$target` set to the session's target process.
pub fn compile_for(
    text: &str,
    file_name: &str,
    catalog: &Catalog,
    target: u32,
) -> Result<ProgramSpec, Diagnostic> {
    let mut options = DOptions::new();
    let c = compile(
        CompileInput {
            text,
            kind: SourceKind::File,
            macros: MacroEnv {
                args: vec![file_name.to_string()],
                defaultargs: true,
                vars: vec![
                    ("pid".into(), std::process::id() as u64),
                    ("target".into(), target as u64),
                ],
            },
            cpp: None,
            file_name,
            model: DataModel::Lp64,
        },
        &mut options,
        catalog,
    )?;
    if c.destructive {
        return Err(Diagnostic::new(
            "D_ACT_DESTRUCT",
            0,
            "destructive actions are not allowed in the console",
        ));
    }
    Ok(ProgramSpec {
        label: file_name.to_string(),
        program: Arc::new(c.ir),
        options,
    })
}
