//! The provider GUID that .NET `EventSource` and TraceLogging derive from a provider's name, so a
//! provider known only by name (`System.Net.Http`, `MyCompany-MyApp`) can be enabled by GUID.
//!
//! The derivation follows `EventSourceUtility.GenerateGuidFromName` and `EventSource.GetGuid` in
//! dotnet/runtime (System.Private.CoreLib, System/Diagnostics/Tracing): the name is upper-cased
//! (`ToUpperInvariant`), encoded as UTF-16 big-endian and hashed with SHA-1 after a fixed 16-byte
//! namespace; the first 16 bytes of the hash, with the version nibble set to 5 as in RFC 4122,
//! are the GUID in Windows' byte layout. Microsoft's TraceLogging documentation
//! (`TRACELOGGING_DEFINE_PROVIDER`, traceloggingprovider.h) recommends the same "ETW name-hashing
//! algorithm" for a TraceLogging provider's GUID, and its example provider `MyProvider` has the
//! GUID this gives.

use crate::etw::record::Guid;

/// The namespace that prefixes every name before hashing (the same 16 bytes in .NET and
/// TraceLogging).
const NAMESPACE: [u8; 16] = [
    0x48, 0x2C, 0x2D, 0xB2, 0xC3, 0x90, 0x47, 0xC8, 0x87, 0xF8, 0x1A, 0x15, 0xBF, 0xC1, 0x30, 0xFB,
];

/// The GUID that an `EventSource` or a TraceLogging provider named `name` registers under.
/// The name is compared without regard to case, as .NET does.
pub fn event_source_guid(name: &str) -> Guid {
    let mut sha = Sha1::new();
    sha.update(&NAMESPACE);
    let mut unit = [0u16; 2];
    for c in name.chars() {
        for u in upper_invariant(c).encode_utf16(&mut unit) {
            sha.update(&u.to_be_bytes());
        }
    }
    let hash = sha.finish();
    let mut b = [0u8; 16];
    b.copy_from_slice(&hash[..16]);
    b[7] = (b[7] & 0x0F) | 0x50;
    let mut data4 = [0u8; 8];
    data4.copy_from_slice(&b[8..16]);
    Guid {
        data1: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        data2: u16::from_le_bytes([b[4], b[5]]),
        data3: u16::from_le_bytes([b[6], b[7]]),
        data4,
    }
}

/// One character upper-cased the way .NET's `ToUpperInvariant` does: a one-to-one mapping, so a
/// character whose upper case is several characters (`ß` → `SS`) stays as it is.
fn upper_invariant(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_uppercase();
    }
    let mut up = c.to_uppercase();
    match (up.next(), up.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

/// SHA-1 (FIPS 180-4), enough for hashing provider names: not for anything secret.
pub struct Sha1 {
    /// The five words of the running hash.
    state: [u32; 5],
    /// Bytes of the block being filled.
    block: [u8; 64],
    /// How many bytes of `block` are filled.
    filled: usize,
    /// Total message length in bytes.
    len: u64,
}

impl Default for Sha1 {
    fn default() -> Self {
        Sha1::new()
    }
}

impl Sha1 {
    /// A hash of nothing yet.
    pub fn new() -> Sha1 {
        Sha1 {
            state: [
                0x6745_2301,
                0xEFCD_AB89,
                0x98BA_DCFE,
                0x1032_5476,
                0xC3D2_E1F0,
            ],
            block: [0; 64],
            filled: 0,
            len: 0,
        }
    }

    /// Adds bytes to the message.
    pub fn update(&mut self, mut data: &[u8]) {
        self.len = self.len.wrapping_add(data.len() as u64);
        while !data.is_empty() {
            let take = (64 - self.filled).min(data.len());
            self.block[self.filled..self.filled + take].copy_from_slice(&data[..take]);
            self.filled += take;
            data = &data[take..];
            if self.filled == 64 {
                let block = self.block;
                self.compress(&block);
                self.filled = 0;
            }
        }
    }

    /// Pads the message and gives the 20-byte digest.
    pub fn finish(mut self) -> [u8; 20] {
        let bits = self.len.wrapping_mul(8);
        self.update_padding(&[0x80]);
        while self.filled != 56 {
            self.update_padding(&[0]);
        }
        self.update_padding(&bits.to_be_bytes());
        let mut out = [0u8; 20];
        for (chunk, word) in out.chunks_exact_mut(4).zip(self.state) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
        out
    }

    /// Adds padding bytes, which do not count towards the message length.
    fn update_padding(&mut self, data: &[u8]) {
        let len = self.len;
        self.update(data);
        self.len = len;
    }

    /// Mixes one 64-byte block into the state.
    fn compress(&mut self, block: &[u8; 64]) {
        let mut w = [0u32; 80];
        for (i, chunk) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = self.state;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (s, v) in self.state.iter_mut().zip([a, b, c, d, e]) {
            *s = s.wrapping_add(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The digest of `data` in lower-case hex.
    fn sha1_hex(data: &[u8]) -> String {
        let mut s = Sha1::new();
        s.update(data);
        s.finish().iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn sha1_fips_vectors() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        // two blocks after padding
        assert_eq!(
            sha1_hex(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        );
        // a million 'a's, fed in uneven pieces
        let mut s = Sha1::new();
        let chunk = [b'a'; 997];
        let mut left = 1_000_000usize;
        while left > 0 {
            let n = left.min(chunk.len());
            s.update(&chunk[..n]);
            left -= n;
        }
        let hex: String = s.finish().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    }

    #[test]
    fn provider_guid_published_vectors() {
        // dotnet/runtime, System.Net.Http functional tests (TelemetryTest): the GUID of the
        // HttpTelemetry EventSource, which carries no explicit GUID
        let cases = [
            ("System.Net.Http", "d30b5633-7ef1-5485-b4e0-94979b102068"),
            // dotnet/runtime RuntimeEventSource declares this GUID next to its name
            ("System.Runtime", "49592c0f-5a05-516d-aa4b-a64e02026c89"),
            // PerfView and dotnet-monitor enable DiagnosticSource by this GUID
            (
                "Microsoft-Diagnostics-DiagnosticSource",
                "adb401e1-5296-51f8-c125-5fda75826144",
            ),
            // Microsoft's TRACELOGGING_DEFINE_PROVIDER example declares "MyProvider" with this
            ("MyProvider", "b3864c38-4273-58c5-545b-8b3608343471"),
            // the name-derived GUIDs of the networking EventSources, as PerfView lists them
            (
                "System.Net.NameResolution",
                "4b326142-bfb5-5ed3-8585-7714181d14b0",
            ),
            ("System.Net.Sockets", "d5b2e7d4-b6ec-50ae-7cde-af89427ad21f"),
            // what an EventListener sees for the runtime's native provider (its manifest GUID
            // differs: the name-derived one is what EventSource computes), as Datadog's runtime
            // metrics note it
            (
                "Microsoft-Windows-DotNETRuntime",
                "5e5bb766-bbfc-5662-0548-1d44fad9bb56",
            ),
        ];
        for (name, want) in cases {
            assert_eq!(event_source_guid(name).to_string(), want, "{name}");
        }
    }

    #[test]
    fn provider_guid_ignores_case() {
        assert_eq!(
            event_source_guid("system.net.http"),
            event_source_guid("System.Net.Http")
        );
        // version nibble 5 whatever the name, including none and non-ASCII ones
        for name in ["", "ß", "Провайдер", "\u{1F600}"] {
            assert_eq!(event_source_guid(name).data3 >> 12, 5, "{name}");
        }
        assert_eq!(event_source_guid("ä"), event_source_guid("Ä"));
    }
}
