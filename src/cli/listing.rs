//! `dtx -l`: probe listings in dtrace's column layout, with `-v` stability attributes and
//! argument types.

use std::io::{self, Write};

use crate::lang::ast::{Item, ProbeSpec};
use crate::lang::CompiledProgram;
use crate::probes::stability::Attr;
use crate::probes::{ProbeCatalog, ProbeDesc, ProbeInfo};

pub fn header(out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "{:>5} {:>10} {:>17} {:>33} NAME",
        "ID", "PROVIDER", "MODULE", "FUNCTION"
    )
}

pub fn probe_line(out: &mut dyn Write, p: &ProbeInfo, verbose: bool) -> io::Result<()> {
    writeln!(
        out,
        "{:>5} {:>10} {:>17} {:>33} {}",
        p.id, p.provider, p.module, p.function, p.name
    )?;
    if verbose {
        let (desc, args) =
            crate::probes::stability::probe_attrs(&p.provider, &p.module, &p.function, &p.name);
        probe_info(out, desc, args, &p.arg_types)?;
    }
    Ok(())
}

/// dtrace's `print_probe_info`: a probe's (or description's) attributes, its arguments'
/// attributes and their types.
fn probe_info(out: &mut dyn Write, desc: Attr, args: Attr, types: &[String]) -> io::Result<()> {
    attributes(out, "Probe Description Attributes", desc)?;
    attributes(out, "Argument Attributes", args)?;
    writeln!(out, "\n\tArgument Types")?;
    if types.is_empty() {
        writeln!(out, "\t\tNone")?;
    }
    for (i, t) in types.iter().enumerate() {
        writeln!(out, "\t\targs[{i}]: {t}")?;
    }
    writeln!(out)
}

fn attributes(out: &mut dyn Write, title: &str, a: Attr) -> io::Result<()> {
    writeln!(out, "\n\t{title}")?;
    writeln!(out, "\t\tIdentifier Names: {}", a.name)?;
    writeln!(out, "\t\tData Semantics:   {}", a.data)?;
    writeln!(out, "\t\tDependency Class: {}", a.class)
}

/// `-v`'s stability report for one program, after its "matched" line (dtrace's `exec_prog`):
/// the weakest attributes of its probe descriptions and of its statements. `-e` (nothing
/// enabled) adds each description's probe information (`info_stmt`).
pub fn stability_report(
    out: &mut dyn Write,
    what: &str,
    label: &str,
    prog: &CompiledProgram,
    catalog: &dyn ProbeCatalog,
    enabled: bool,
) -> io::Result<()> {
    let (desc, stmt) = prog.stability_report(catalog);
    writeln!(out, "\nStability attributes for {what} {label}:")?;
    attributes(out, "Minimum Probe Description Attributes", desc)?;
    attributes(out, "Minimum Statement Attributes", stmt)?;
    if enabled {
        return writeln!(out);
    }
    for clause in &prog.ir.clauses {
        for d in &clause.probes {
            writeln!(
                out,
                "\n{}:{}:{}:{}",
                d.provider, d.module, d.function, d.name
            )?;
            // the description's attributes, and the arguments of the probe standing for it
            // (`dtrace_probe_info`): nothing when none does
            let matched = catalog.matching(d);
            if let Some((attr, pap)) = crate::probes::stability::description_info(d, &matched) {
                probe_info(out, attr, pap.args, &matched[0].arg_types)?;
            }
        }
    }
    Ok(())
}

pub fn all_probes(
    out: &mut dyn Write,
    catalog: &dyn ProbeCatalog,
    verbose: bool,
) -> io::Result<()> {
    for p in catalog.list() {
        probe_line(out, &p, verbose)?;
    }
    Ok(())
}

/// Lists the probes each clause of a compiled program matches, once each, in clause order.
pub fn program_probes(
    out: &mut dyn Write,
    prog: &CompiledProgram,
    catalog: &dyn ProbeCatalog,
    verbose: bool,
) -> io::Result<()> {
    let mut seen = std::collections::HashSet::new();
    for item in &prog.ast.items {
        let Item::Clause(c) = item else { continue };
        for spec in &c.probes {
            let desc = match spec {
                ProbeSpec::Name { text, .. } => ProbeDesc::parse(text).ok(),
                ProbeSpec::Id { id, .. } => catalog.by_id(*id),
            };
            let Some(desc) = desc else { continue };
            for p in catalog.matching(&desc) {
                if seen.insert(p.id) {
                    probe_line(out, &p, verbose)?;
                }
            }
        }
    }
    Ok(())
}
