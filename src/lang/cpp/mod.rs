//! C preprocessor used by `dtx -C`.
//!
//! This is a self-contained, traditional-style C preprocessor modelled on the
//! way DTrace runs the system `cpp` over D scripts.  It supports object-like
//! and function-like macros (`#`, `##`, variadic `...`/`__VA_ARGS__`, GNU
//! named variadics and `, ## __VA_ARGS__`), `#include`, the whole family of
//! conditionals with full constant expressions, `#error`, `#warning`,
//! `#line`, null directives and `#pragma` pass-through.
//!
//! The output carries GNU-style line markers (`# <line> "<file>"`) at the
//! start of every file and whenever the current file changes (include enter
//! and leave, `#line`).  Within a file, removed lines (directives, skipped
//! conditional blocks, comment lines) are kept as empty lines so that line
//! numbers are preserved.
//!
//! Like the Solaris `cpp` that DTrace uses, a directive is only recognised
//! when `#` is the first character of the line; an indented `#define` is
//! ordinary text and reaches the D compiler unchanged (which then rejects it).

use std::fmt;
use std::path::{Path, PathBuf};

mod directives;
mod expand;
mod expr;
mod lex;
mod lines;
mod macros;
mod pp;
#[cfg(test)]
mod tests;

use pp::Pp;

/// Options for [`preprocess`].
#[derive(Debug, Clone, Default)]
pub struct CppOptions {
    /// `-I` directories, searched in order.
    pub include_dirs: Vec<PathBuf>,
    /// `-D name[=value]` in command-line order (`None` means `1`).
    pub defines: Vec<(String, Option<String>)>,
    /// `-U name`, applied after predefined macros and `-D`.
    pub undefs: Vec<String>,
    /// Macros predefined by the caller (e.g. `__SUNW_D`), applied first.
    pub predefined: Vec<(String, String)>,
}

/// A preprocessing error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CppError {
    pub file: String,
    pub line: u32,
    pub message: String,
}

impl fmt::Display for CppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

impl std::error::Error for CppError {}

/// Preprocess `source` (named `file_name` in markers and errors).
pub fn preprocess(source: &str, file_name: &str, opts: &CppOptions) -> Result<String, CppError> {
    let mut pp = Pp::new(opts);
    pp.init_macros()?;
    let dir = parent_dir(Path::new(file_name));
    let path = PathBuf::from(file_name);
    pp.cur_path = if path.is_file() { Some(path) } else { None };
    pp.process_file(source, file_name, dir, 0)?;
    Ok(pp.out)
}

const MAX_INCLUDE_DEPTH: usize = 200;
const MAX_MACRO_NEST: u32 = 200;
const MAX_EXPR_DEPTH: u32 = 256;
const MAX_EXPANSION_TOKENS: u64 = 1 << 21;
/// Extra expansion budget per byte of source text read.
const EXPANSION_TOKENS_PER_BYTE: u64 = 16;
const CMDLINE: &str = "<command-line>";

fn parent_dir(p: &Path) -> Option<PathBuf> {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => Some(d.to_path_buf()),
        _ => None,
    }
}
