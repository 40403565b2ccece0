//! Control lines: `#pragma D option`, `#pragma D attributes|binding|depends_on`, `#pragma ident`,
//! `#error`, and the rejection of anything else, applied as the lexer reads them.

use super::diag::{derr, DResult};
use super::options::{pragma_error_message, DOptions};
use crate::probes::{ProbeCatalog, ProbeDesc};

/// Applies one control line (`words` excludes the `#`). Line markers are handled by the parser.
pub fn apply(
    words: &[String],
    line: u32,
    opts: &mut DOptions,
    catalog: &dyn ProbeCatalog,
) -> DResult<()> {
    let mut i = 0;
    let mut level = 0; // 0 after '#', 1 after '#pragma', 2 after '#pragma D'
    while i < words.len() {
        let w = words[i].as_str();
        if w.starts_with('"') {
            return Err(derr("D_PRAGCTL_INVAL", line, "invalid control directive"));
        }
        if level == 0 && w == "pragma" {
            level = 1;
            i += 1;
            continue;
        }
        if level == 1 && w == "D" {
            level = 2;
            i += 1;
            continue;
        }
        let rest = &words[i + 1..];
        match (w, level) {
            ("option", 2) => return option(rest, line, opts),
            ("attributes", 2) => {
                if rest.len() < 2 {
                    return Err(derr(
                        "D_PRAGMA_MALFORM",
                        line,
                        "malformed #pragma attributes <attributes> <ident>",
                    ));
                }
                if crate::probes::stability::Attr::parse(&rest[0]).is_none() {
                    return Err(derr(
                        "D_PRAGMA_INVAL",
                        line,
                        format!(
                            "invalid attributes specified by #pragma attributes: {}",
                            rest[0]
                        ),
                    ));
                }
                return Ok(());
            }
            ("binding", 2) => {
                if rest.len() != 2 {
                    return Err(derr(
                        "D_PRAGMA_MALFORM",
                        line,
                        "malformed #pragma binding <version> <ident>",
                    ));
                }
                return Ok(());
            }
            ("depends_on", 2) => return depends_on(rest, line, catalog),
            ("error", _) => {
                let text = rest.join(" ");
                return Err(derr("D_PRAGERR", line, format!("#error: {text}")));
            }
            ("ident", _) => return Ok(()),
            ("line", _) => return Ok(()),
            (_, 0) => {
                return Err(derr(
                    "D_PRAGCTL_INVAL",
                    line,
                    format!("invalid control directive: #{w}"),
                ))
            }
            (_, 1) => return Ok(()), // unknown pragmas are ignored, as C says
            _ => {
                return Err(derr(
                    "D_PRAGMA_INVAL",
                    line,
                    format!("invalid D pragma: {w}"),
                ))
            }
        }
    }
    Ok(())
}

/// The identifier a `#pragma D attributes|binding X name` names, if it names one (not the
/// `provider` form): it must be defined by the end of the program.
pub fn ident_target(words: &[String]) -> Option<&str> {
    match words {
        [p, d, kind, _, name]
            if p == "pragma" && d == "D" && (kind == "attributes" || kind == "binding") =>
        {
            Some(name.as_str())
        }
        _ => None,
    }
}

fn option(rest: &[String], line: u32, opts: &mut DOptions) -> DResult<()> {
    // dtx's `metrichelp=@name:text` takes the rest of the line: help text has spaces
    let joined;
    let rest = match rest.first() {
        Some(w) if w.starts_with("metrichelp=") && rest.len() > 1 => {
            joined = [rest.join(" ")];
            &joined[..]
        }
        _ => rest,
    };
    if rest.len() > 1 {
        return Err(derr(
            "D_PRAGMA_MALFORM",
            line,
            "malformed #pragma option <option>=<val>",
        ));
    }
    if rest.is_empty() {
        return Err(derr(
            "D_PRAGMA_MALFORM",
            line,
            "malformed #pragma option <option>=<val>",
        ));
    }
    for w in rest {
        let (name, value) = match w.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (w.as_str(), None),
        };
        if name.is_empty() {
            return Err(derr(
                "D_PRAGMA_MALFORM",
                line,
                "malformed #pragma option <option>=<val>",
            ));
        }
        if let Err(e) = opts.set_pragma(name, value) {
            return Err(derr(
                "D_PRAGMA_OPTSET",
                line,
                pragma_error_message(name, value, &e),
            ));
        }
    }
    Ok(())
}

fn depends_on(rest: &[String], line: u32, catalog: &dyn ProbeCatalog) -> DResult<()> {
    if rest.len() != 2 {
        return Err(derr(
            "D_PRAGMA_MALFORM",
            line,
            "malformed #pragma depends_on <class> <name>",
        ));
    }
    let (class, name) = (rest[0].as_str(), rest[1].as_str());
    match class {
        "provider" => {
            let d = ProbeDesc {
                provider: name.to_string(),
                ..ProbeDesc::default()
            };
            if catalog.matching(&d).is_empty() {
                return Err(derr(
                    "D_PRAGMA_DEPEND",
                    line,
                    format!("program requires provider {name}"),
                ));
            }
            Ok(())
        }
        "library" => Err(derr(
            "D_PRAGMA_DEPEND",
            line,
            "main program may not explicitly depend on a library",
        )),
        "module" => Ok(()),
        _ => Err(derr(
            "D_PRAGMA_INVAL",
            line,
            format!("invalid class {class} specified by #pragma depends_on"),
        )),
    }
}
