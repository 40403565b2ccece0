//! Compiler diagnostics: a `D_*` tag, the source line and the message, shaped the way libdtrace
//! shapes them (`[D_TAG] line N: text`, the tag only under `-xerrtags`).

use std::fmt;

/// One compile error. The message never ends with a newline; multi-line messages (printf
/// prototype mismatches) keep their inner newlines as dtrace prints them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The `D_*` error tag, e.g. `D_SYNTAX`.
    pub tag: &'static str,
    /// 1-based line in the original source (after `#line` markers); 0 when unknown, as for `-n`.
    pub line: u32,
    pub message: String,
}

impl Diagnostic {
    pub fn new(tag: &'static str, line: u32, message: impl Into<String>) -> Self {
        let mut message = message.into();
        while message.ends_with('\n') {
            message.pop();
        }
        Diagnostic { tag, line, message }
    }

    /// The text after `dtx: failed to compile script F: `. A library error (`EDT_*`, raised
    /// by libdtrace's code generator rather than by `xyerror()`) carries neither tag nor line.
    pub fn render(&self, errtags: bool) -> String {
        if self.tag.starts_with("EDT_") {
            return self.message.clone();
        }
        let mut s = String::new();
        if errtags {
            s.push('[');
            s.push_str(self.tag);
            s.push_str("] ");
        }
        if self.line > 0 {
            s.push_str(&format!("line {}: ", self.line));
        }
        s.push_str(&self.message);
        s
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(true))
    }
}

impl std::error::Error for Diagnostic {}

pub type DResult<T> = Result<T, Diagnostic>;

/// Shorthand used throughout the compiler: `Err(derr("D_SYNTAX", line, "..."))`.
pub fn derr(tag: &'static str, line: u32, message: impl Into<String>) -> Diagnostic {
    Diagnostic::new(tag, line, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_with_and_without_tags() {
        let d = derr("D_SYNTAX", 3, "syntax error near \"}\"\n");
        assert_eq!(d.render(true), "[D_SYNTAX] line 3: syntax error near \"}\"");
        assert_eq!(d.render(false), "line 3: syntax error near \"}\"");
        let d = derr("D_SYNTAX", 0, "x");
        assert_eq!(d.render(false), "x");
        let d = derr(
            "EDT_NOTUPREG",
            4,
            "Insufficient tuple registers to generate code",
        );
        assert_eq!(
            d.render(true),
            "Insufficient tuple registers to generate code"
        );
    }
}
