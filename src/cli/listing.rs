//! `dtx -l`: probe listings in dtrace's column layout, with `-v` stability attributes and
//! argument types.

use std::io::{self, Write};

use crate::lang::ast::{Item, ProbeSpec};
use crate::lang::CompiledProgram;
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
        for (title, a) in [
            ("Probe Description Attributes", desc),
            ("Argument Attributes", args),
        ] {
            writeln!(out, "\n\t{title}")?;
            writeln!(out, "\t\tIdentifier Names: {}", a.name)?;
            writeln!(out, "\t\tData Semantics:   {}", a.data)?;
            writeln!(out, "\t\tDependency Class: {}", a.class)?;
        }
        writeln!(out, "\n\tArgument Types")?;
        if p.arg_types.is_empty() {
            writeln!(out, "\t\tNone")?;
        }
        for (i, t) in p.arg_types.iter().enumerate() {
            writeln!(out, "\t\targs[{i}]: {t}")?;
        }
        writeln!(out)?;
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
