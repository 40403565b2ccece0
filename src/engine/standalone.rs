//! A VM for one D program over the standard probe catalog (BEGIN, END, ERROR, tick/profile),
//! with its clauses enabled and no event source: what benches, tests and embedders drive by
//! firing probes themselves.

use std::sync::Arc;

use crate::lang::options::DOptions;
use crate::lang::types::DataModel;
use crate::lang::{compile, CompileInput, MacroEnv, SourceKind};
use crate::probes::{ProbeCatalog, ProbeDesc, ProbeInfo};
use crate::vm::{Vm, VmOptions};

/// Compiles `src` (a D program text) and returns its VM with every matching probe enabled, and
/// those probes. A compile error comes back as dtrace's message.
pub fn standalone_vm(src: &str) -> Result<(Vm, Vec<ProbeInfo>), String> {
    let catalog = crate::providers::standard_catalog();
    let mut opts = DOptions::new();
    let c = compile(
        CompileInput {
            text: src,
            kind: SourceKind::File,
            macros: MacroEnv::default(),
            cpp: None,
            file_name: "standalone.d",
            model: DataModel::Lp64,
        },
        &mut opts,
        &catalog,
    )
    .map_err(|e| e.to_string())?;
    let program = Arc::new(c.ir);
    let mut vm = Vm::new(program.clone(), VmOptions::from_options(&opts));
    let mut probes = Vec::new();
    for (i, clause) in program.clauses.iter().enumerate() {
        for d in &clause.probes {
            for p in catalog.matching(d) {
                vm.enable(p.id, i);
                probes.push(p);
            }
        }
    }
    Ok((vm, probes))
}

/// An engine on the live clock running `src` over the standard catalog, its output discarded:
/// what tests of event sources pump.
pub fn standalone_engine(src: &str) -> Result<super::Engine, String> {
    let (vm, _) = standalone_vm(src)?;
    let consumer = super::consumer::Consumer::new(
        Box::new(std::io::sink()),
        super::consumer::ConsumerOptions::from_options(&DOptions::new(), "dtx", true, false),
    );
    Ok(super::Engine::new(
        vec![("standalone.d".into(), vm.program.clone())],
        VmOptions::default(),
        &crate::providers::standard_catalog(),
        Box::new(super::clock::LiveClock::new()),
        consumer,
    ))
}

/// The first probe of the standard catalog matching `desc` (`BEGIN`, `profile:::tick-1s`).
pub fn standard_probe(desc: &str) -> Option<ProbeInfo> {
    crate::providers::standard_catalog()
        .matching(&ProbeDesc::parse(desc).ok()?)
        .into_iter()
        .next()
}

/// The integer each data record of `vm` starts with, in order (what a test's `trace()`s of
/// integers recorded).
#[cfg(test)]
pub(crate) fn first_ints(vm: &Vm) -> Vec<i64> {
    use crate::vm::{Datum, Record};
    vm.records
        .iter()
        .filter_map(|(_, r)| match r {
            Record::Data { values, .. } => match values.first() {
                Some(Datum::Int { value, .. }) => Some(*value),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enables_the_clauses_probes() {
        let (vm, probes) = standalone_vm("BEGIN { x = 1; } END { x = 2; }").unwrap();
        assert_eq!(probes.len(), 2);
        assert!(probes.iter().all(|p| vm.is_enabled(p.id)));
        assert!(standalone_vm("BEGIN { x = ; }").is_err());
        assert!(standard_probe("BEGIN").is_some());
        assert!(standard_probe("nosuch:::probe").is_none());
    }
}
