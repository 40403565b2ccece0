//! An event's bytes as D's memory: the payload at [`PAYLOAD_BASE`] (after a 4-byte header of
//! event id, version and pointer width) and the firing's native structure at [`NATIVE_BASE`];
//! with the decoded fields for `etwfield()` and `etwfield_str()`. What the trace source and the
//! live source hand the VM for an ETW firing.

use super::native::NATIVE_BASE;
use super::PAYLOAD_BASE;
use crate::etw::decode::DecodedEvent;
use crate::vm::{AddressSpace, Fault};

/// An event's payload as D sees it at `arg2`: 4 bytes of header (event id, version, 0/1 for
/// 32/64-bit) just before it.
pub struct PayloadMemory<'a> {
    pub id: u16,
    pub version: u8,
    pub wide: bool,
    pub payload: &'a [u8],
    /// The firing's native structure (translated arguments), at [`NATIVE_BASE`].
    pub native: &'a [u8],
}

impl AddressSpace for PayloadMemory<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        if let Some(off) = addr.checked_sub(NATIVE_BASE) {
            let off = off as usize;
            let end = off.checked_add(buf.len()).ok_or(Fault::BadAddr(addr))?;
            if off < self.native.len() || self.native.is_empty() {
                if end > self.native.len() {
                    return Err(Fault::BadAddr(addr));
                }
                buf.copy_from_slice(&self.native[off..end]);
                return Ok(());
            }
        }
        let start = PAYLOAD_BASE - 4;
        let off = addr.checked_sub(start).ok_or(Fault::BadAddr(addr))? as usize;
        let total = 4 + self.payload.len();
        let end = off.checked_add(buf.len()).ok_or(Fault::BadAddr(addr))?;
        if end > total {
            return Err(Fault::BadAddr(addr));
        }
        let head = [
            (self.id & 0xff) as u8,
            (self.id >> 8) as u8,
            self.version,
            self.wide as u8,
        ];
        for (i, b) in buf.iter_mut().enumerate() {
            let p = off + i;
            *b = if p < 4 { head[p] } else { self.payload[p - 4] };
        }
        Ok(())
    }
}

/// An event's payload plus its decoded fields: what `etwfield("Name")` and
/// `etwfield_str("Name")` read.
pub struct EventMemory<'a, 'd> {
    pub payload: &'a PayloadMemory<'a>,
    pub event: &'a DecodedEvent<'d>,
}

impl EventMemory<'_, '_> {
    fn field(&self, name: &[u8]) -> Option<crate::etw::decode::Value<'_>> {
        let name = std::str::from_utf8(name).ok()?;
        self.event.get(name)
    }
}

impl AddressSpace for EventMemory<'_, '_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.payload.read(addr, buf)
    }

    fn event_field(&self, name: &[u8]) -> Option<u64> {
        use crate::etw::decode::Value;
        match self.field(name)? {
            Value::F64(f) => Some(f as i64 as u64),
            v => v.as_u64(),
        }
    }

    fn event_field_str(&self, name: &[u8], out: &mut Vec<u8>) -> bool {
        let Some(v) = self.field(name) else {
            return false;
        };
        v.write_text(out);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_is_mapped_after_its_header() {
        let m = PayloadMemory {
            id: 0x1234,
            version: 2,
            wide: true,
            payload: &[9, 8, 7],
            native: &[],
        };
        let mut b = [0u8; 7];
        m.read(PAYLOAD_BASE - 4, &mut b).unwrap();
        assert_eq!(b, [0x34, 0x12, 2, 1, 9, 8, 7]);
        assert!(m.read(PAYLOAD_BASE + 2, &mut [0u8; 2]).is_err());
        assert!(m.read(0, &mut [0u8; 1]).is_err());
    }
}
