//! The `dtrace` provider: `BEGIN`, `END` and `ERROR` (the probes and ids are in
//! `crate::probes`, below the VM that fires them).

use super::{fields_match, Provider};
use crate::probes::{dtrace_probes, ProbeDesc, ProbeInfo};
pub use crate::probes::{BEGIN_ID, END_ID, ERROR_ID, ERROR_PROBE};

pub struct DtraceProvider;

impl Provider for DtraceProvider {
    fn name(&self) -> &str {
        "dtrace"
    }

    fn matching(&self, desc: &ProbeDesc) -> Vec<ProbeInfo> {
        self.list()
            .into_iter()
            .filter(|p| fields_match(desc, &p.module, &p.function, &p.name))
            .collect()
    }

    fn list(&self) -> Vec<ProbeInfo> {
        dtrace_probes()
    }
}
