//! Static event layouts: one declaration per (event class, version range) names the fields and
//! their types. Offsets are computed from the pointer size; the decoder, the D types of `args[]`
//! and the `-lv` listing all come from the same table.

use std::ops::RangeInclusive;

use super::value::{read_value, FieldType, Value};
use crate::etw::record::Guid;

/// One field of a layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub ty: FieldType,
    /// The first event version that has this field (0: all).
    pub since: u8,
}

/// Shorthand for layout tables.
pub const fn f(name: &'static str, ty: FieldType) -> Field {
    Field { name, ty, since: 0 }
}

/// A field that appears from event version `since` on.
pub const fn fv(name: &'static str, ty: FieldType, since: u8) -> Field {
    Field { name, ty, since }
}

/// Where events of a layout come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// A kernel (system/perfinfo header) group: `HookId >> 8`.
    Kernel(u8),
    /// A classic provider GUID (EVENT_TRACE_HEADER records, e.g. KernelTraceControl).
    Classic(Guid),
}

/// One event class at a range of versions.
#[derive(Clone, Debug)]
pub struct Layout {
    pub source: Source,
    /// The provider/class name (e.g. "Thread").
    pub class: &'static str,
    /// (opcode, event name) pairs sharing this layout.
    pub opcodes: &'static [(u8, &'static str)],
    pub versions: RangeInclusive<u8>,
    pub fields: &'static [Field],
}

impl Layout {
    /// The event name for an opcode.
    pub fn event_name(&self, opcode: u8) -> Option<&'static str> {
        self.opcodes
            .iter()
            .find(|(o, _)| *o == opcode)
            .map(|(_, n)| *n)
    }

    /// Byte offset of each field for a pointer size; `None` once a variable-size field precedes.
    pub fn offsets(&self, ptr: u8, version: u8) -> Vec<(&'static str, Option<usize>)> {
        let mut at = Some(0usize);
        self.fields_at(version)
            .map(|fl| {
                let here = at;
                at = match (at, fl.ty.fixed_size(ptr)) {
                    (Some(a), Some(n)) => Some(a + n),
                    _ => None,
                };
                (fl.name, here)
            })
            .collect()
    }

    /// The fields an event of `version` has.
    pub fn fields_at(&self, version: u8) -> impl Iterator<Item = &'static Field> {
        self.fields.iter().filter(move |fl| fl.since <= version)
    }

    /// Walks the fields over a payload. Fields past the end of the payload are left out (older
    /// builds omit trailing fields); trailing bytes the layout does not name are ignored.
    pub fn decode<'a>(
        &self,
        payload: &'a [u8],
        ptr: u8,
        version: u8,
    ) -> (Vec<(&'static str, Value<'a>)>, bool) {
        let mut out = Vec::with_capacity(self.fields.len());
        let mut pos = 0usize;
        for fl in self.fields_at(version) {
            if pos >= payload.len() {
                return (out, false);
            }
            match read_value(fl.ty, payload, pos, ptr, None) {
                Some((v, next)) => {
                    out.push((fl.name, v));
                    pos = next;
                }
                None => return (out, false),
            }
        }
        (out, true)
    }
}

/// Finds the layout for a source/opcode/version in a table.
pub fn find(
    table: &'static [Layout],
    source: Source,
    opcode: u8,
    version: u8,
) -> Option<&'static Layout> {
    table.iter().find(|l| {
        l.source == source
            && l.versions.contains(&version)
            && l.opcodes.iter().any(|(o, _)| *o == opcode)
    })
}
