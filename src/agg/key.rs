//! Aggregation keys: a key is a tuple of [`Datum`]s, kept in a compact byte encoding and read
//! back as borrowed [`DatumRef`]s, and dtrace's key ordering.
//!
//! Keys are stored encoded back to back in one arena per aggregation so that a million integer
//! keys cost a few bytes each instead of a heap allocation each.

use std::cmp::Ordering;

use crate::ir::value::{Datum, DatumRef, Frames};

const T_INT: u8 = 0;
const T_STR: u8 = 1;
const T_BYTES: u8 = 2;
const T_STACK: u8 = 3;
const T_SYM: u8 = 4;
const T_MOD: u8 = 5;
const T_USYM: u8 = 6;
const T_UMOD: u8 = 7;
const T_UADDR: u8 = 8;

/// In a stack's `user` byte: an epoch follows the pid.
const STACK_EPOCH: u8 = 2;

fn norm_size(size: u8) -> u8 {
    match size {
        1 | 2 | 4 | 8 => size,
        _ => 8,
    }
}

fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn get_varint(b: &[u8], pos: &mut usize) -> Option<usize> {
    let mut n: usize = 0;
    let mut shift = 0u32;
    loop {
        let c = *b.get(*pos)?;
        *pos += 1;
        if shift >= usize::BITS {
            return None;
        }
        n |= ((c & 0x7f) as usize) << shift;
        if c & 0x80 == 0 {
            return Some(n);
        }
        shift += 7;
    }
}

fn get_bytes<'a>(b: &'a [u8], pos: &mut usize, n: usize) -> Option<&'a [u8]> {
    let end = pos.checked_add(n)?;
    let s = b.get(*pos..end)?;
    *pos = end;
    Some(s)
}

fn get_u64(b: &[u8], pos: &mut usize) -> Option<u64> {
    let s = get_bytes(b, pos, 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_le_bytes(a))
}

fn get_u32(b: &[u8], pos: &mut usize) -> Option<u32> {
    let s = get_bytes(b, pos, 4)?;
    let mut a = [0u8; 4];
    a.copy_from_slice(s);
    Some(u32::from_le_bytes(a))
}

/// Room for the encoding of up to four integer key components.
pub(crate) const SMALL_INT_KEY: usize = 40;

/// A key of at most [`IntKey::MAX`] integers, encoded on the stack as [`encode`] would encode
/// the same [`Datum::Int`]s: the VM builds one per update of an `@[pid]`-like aggregation
/// without touching the heap.
#[derive(Clone, Copy)]
pub struct IntKey {
    buf: [u8; SMALL_INT_KEY],
    len: usize,
}

impl Default for IntKey {
    fn default() -> Self {
        Self::new()
    }
}

impl IntKey {
    /// Components an `IntKey` holds.
    pub const MAX: usize = SMALL_INT_KEY / 10;

    pub fn new() -> Self {
        IntKey {
            buf: [0; SMALL_INT_KEY],
            len: 0,
        }
    }

    /// Appends an integer component (as recorded at `size` bytes); false when full.
    #[inline]
    pub fn push(&mut self, value: i64, size: u8, signed: bool) -> bool {
        let n = self.len;
        if n + 10 > SMALL_INT_KEY {
            return false;
        }
        let size = norm_size(size);
        self.buf[n] = T_INT;
        self.buf[n + 1] = size | if signed { 0x80 } else { 0 };
        self.buf[n + 2..n + 10].copy_from_slice(&value.to_le_bytes());
        self.len = n + 2 + size as usize;
        true
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The encoding of a key made only of (at most four) integers, as [`encode`] would append it;
/// `None` for any other key.
#[inline]
pub(crate) fn encode_small_ints(key: &[Datum]) -> Option<IntKey> {
    if key.len() > IntKey::MAX {
        return None;
    }
    let mut out = IntKey::new();
    for k in key {
        let Datum::Int {
            value,
            size,
            signed,
        } = k
        else {
            return None;
        };
        out.push(*value, *size, *signed);
    }
    Some(out)
}

/// Append the encoding of a whole key tuple.
pub(crate) fn encode(key: &[Datum], out: &mut Vec<u8>) {
    for k in key {
        match k {
            Datum::Int {
                value,
                size,
                signed,
            } => {
                let size = norm_size(*size);
                out.push(T_INT);
                out.push(size | if *signed { 0x80 } else { 0 });
                out.extend_from_slice(&value.to_le_bytes()[..size as usize]);
            }
            Datum::Str(s) => {
                let s = match s.iter().position(|&c| c == 0) {
                    Some(i) => &s[..i],
                    None => &s[..],
                };
                out.push(T_STR);
                put_varint(out, s.len());
                out.extend_from_slice(s);
            }
            Datum::Bytes(s) => {
                out.push(T_BYTES);
                put_varint(out, s.len());
                out.extend_from_slice(s);
            }
            Datum::Stack {
                frames,
                user,
                pid,
                epoch,
            } => {
                // the epoch only when there is one: a key of epoch 0 is encoded as before
                out.push(T_STACK);
                out.push(u8::from(*user) | if *epoch != 0 { STACK_EPOCH } else { 0 });
                out.extend_from_slice(&pid.to_le_bytes());
                if *epoch != 0 {
                    out.extend_from_slice(&epoch.to_le_bytes());
                }
                put_varint(out, frames.len());
                for f in frames {
                    out.extend_from_slice(&f.to_le_bytes());
                }
            }
            Datum::Sym(a) | Datum::Mod(a) => {
                out.push(if matches!(k, Datum::Sym(_)) {
                    T_SYM
                } else {
                    T_MOD
                });
                out.extend_from_slice(&a.to_le_bytes());
            }
            Datum::Usym { addr, pid } | Datum::Umod { addr, pid } | Datum::Uaddr { addr, pid } => {
                out.push(match k {
                    Datum::Usym { .. } => T_USYM,
                    Datum::Umod { .. } => T_UMOD,
                    _ => T_UADDR,
                });
                out.extend_from_slice(&pid.to_le_bytes());
                out.extend_from_slice(&addr.to_le_bytes());
            }
        }
    }
}

/// Iterator over the components of an encoded key; stops at anything malformed.
pub(crate) struct KeyIter<'a> {
    b: &'a [u8],
    pos: usize,
}

pub(crate) fn iter(b: &[u8]) -> KeyIter<'_> {
    KeyIter { b, pos: 0 }
}

impl<'a> KeyIter<'a> {
    fn next_ref(&mut self) -> Option<DatumRef<'a>> {
        let b = self.b;
        let pos = &mut self.pos;
        let tag = *b.get(*pos)?;
        *pos += 1;
        Some(match tag {
            T_INT => {
                let meta = *b.get(*pos)?;
                *pos += 1;
                let size = norm_size(meta & 0x7f);
                let signed = meta & 0x80 != 0;
                let raw = get_bytes(b, pos, size as usize)?;
                let mut a = [0u8; 8];
                a[..raw.len()].copy_from_slice(raw);
                let u = u64::from_le_bytes(a);
                let value = if signed {
                    let shift = 64 - 8 * u32::from(size);
                    ((u << shift) as i64) >> shift
                } else {
                    u as i64
                };
                Datum::Int {
                    value,
                    size,
                    signed,
                }
            }
            T_STR | T_BYTES => {
                let n = get_varint(b, pos)?;
                let s = get_bytes(b, pos, n)?;
                if tag == T_STR {
                    Datum::Str(s)
                } else {
                    Datum::Bytes(s)
                }
            }
            T_STACK => {
                let flags = *b.get(*pos)?;
                *pos += 1;
                let user = flags & 1 != 0;
                let pid = get_u32(b, pos)?;
                let epoch = match flags & STACK_EPOCH {
                    0 => 0,
                    _ => get_u32(b, pos)?,
                };
                let n = get_varint(b, pos)?;
                let frames = Frames::Le(get_bytes(b, pos, n.checked_mul(8)?)?);
                Datum::Stack {
                    frames,
                    user,
                    pid,
                    epoch,
                }
            }
            T_SYM => Datum::Sym(get_u64(b, pos)?),
            T_MOD => Datum::Mod(get_u64(b, pos)?),
            T_USYM | T_UMOD | T_UADDR => {
                let pid = get_u32(b, pos)?;
                let addr = get_u64(b, pos)?;
                match tag {
                    T_USYM => Datum::Usym { addr, pid },
                    T_UMOD => Datum::Umod { addr, pid },
                    _ => Datum::Uaddr { addr, pid },
                }
            }
            _ => return None,
        })
    }
}

impl<'a> Iterator for KeyIter<'a> {
    type Item = DatumRef<'a>;
    fn next(&mut self) -> Option<DatumRef<'a>> {
        let r = self.next_ref();
        if r.is_none() {
            self.pos = self.b.len();
        }
        r
    }
}

/// What dtrace's key comparison reads of a key component.
trait Record {
    fn record_size(&self, strsize: usize) -> usize;
    fn record_bytes(&self, size: usize) -> Vec<u8>;
    fn as_uint(&self, size: usize) -> u64;
}

impl Record for DatumRef<'_> {
    /// Size of the data record dtrace would have used for this key component.
    fn record_size(&self, strsize: usize) -> usize {
        match self {
            Datum::Int { size, .. } => *size as usize,
            Datum::Str(_) => strsize,
            Datum::Bytes(b) => b.len(),
            Datum::Stack { frames, user, .. } => 8 * frames.len() + if *user { 8 } else { 0 },
            Datum::Sym(_) | Datum::Mod(_) => 8,
            Datum::Usym { .. } | Datum::Umod { .. } | Datum::Uaddr { .. } => 16,
        }
    }

    /// The record's bytes (for byte-wise comparison), `size` long.
    fn record_bytes(&self, size: usize) -> Vec<u8> {
        let mut v = match self {
            Datum::Int { value, .. } => value.to_le_bytes().to_vec(),
            Datum::Str(s) | Datum::Bytes(s) => s.to_vec(),
            Datum::Stack {
                frames, user, pid, ..
            } => {
                let mut v = Vec::with_capacity(8 * frames.len() + 8);
                if *user {
                    v.extend_from_slice(&u64::from(*pid).to_le_bytes());
                }
                frames.put_le(&mut v);
                v
            }
            Datum::Sym(a) | Datum::Mod(a) => a.to_le_bytes().to_vec(),
            Datum::Usym { addr, pid } | Datum::Umod { addr, pid } | Datum::Uaddr { addr, pid } => {
                let mut v = u64::from(*pid).to_le_bytes().to_vec();
                v.extend_from_slice(&addr.to_le_bytes());
                v
            }
        };
        v.resize(size, 0);
        v
    }

    /// The record read as an unsigned integer of `size` (1, 2, 4 or 8) bytes.
    fn as_uint(&self, size: usize) -> u64 {
        let mask = if size >= 8 {
            u64::MAX
        } else {
            (1u64 << (8 * size)) - 1
        };
        let v = match self {
            Datum::Int { value, .. } => *value as u64,
            Datum::Sym(a) | Datum::Mod(a) => *a,
            _ => {
                let b = self.record_bytes(8);
                let mut a = [0u8; 8];
                a.copy_from_slice(&b[..8]);
                u64::from_le_bytes(a)
            }
        };
        v & mask
    }
}

/// dtrace's comparison of one key component (`dt_aggregate_keycmp`): record sizes first, then
/// the records as unsigned integers (1, 2, 4, 8 bytes), (pid, address) pairs for user symbols,
/// or bytes.
pub(crate) fn cmp_component(a: &DatumRef, b: &DatumRef, strsize: usize) -> Ordering {
    let (sa, sb) = (a.record_size(strsize), b.record_size(strsize));
    if sa != sb {
        return sa.cmp(&sb);
    }
    match sa {
        1 | 2 | 4 | 8 => a.as_uint(sa).cmp(&b.as_uint(sa)),
        _ => {
            if let (
                Datum::Usym { addr, pid } | Datum::Umod { addr, pid } | Datum::Uaddr { addr, pid },
                Datum::Usym {
                    addr: addr2,
                    pid: pid2,
                }
                | Datum::Umod {
                    addr: addr2,
                    pid: pid2,
                }
                | Datum::Uaddr {
                    addr: addr2,
                    pid: pid2,
                },
            ) = (a, b)
            {
                return (*pid, *addr).cmp(&(*pid2, *addr2));
            }
            match (a, b) {
                // Zero padding to the same record size does not change a lexicographic order
                // of NUL-free strings.
                (Datum::Str(x), Datum::Str(y)) => x.cmp(y),
                // the same frames under other images: the older images first
                (Datum::Stack { epoch: x, .. }, Datum::Stack { epoch: y, .. }) => {
                    a.record_bytes(sa).cmp(&b.record_bytes(sb)).then(x.cmp(y))
                }
                _ => a.record_bytes(sa).cmp(&b.record_bytes(sb)),
            }
        }
    }
}

/// Compare two encoded key tuples: number of components, then components starting at `keypos`
/// (wrapping around), as `dt_aggregate_keycmp` does with `aggsortkeypos`.
pub(crate) fn cmp_keys(a: &[u8], b: &[u8], keypos: usize, strsize: usize) -> Ordering {
    let (na, nb) = (iter(a).count(), iter(b).count());
    if na != nb {
        return na.cmp(&nb);
    }
    if keypos == 0 || keypos >= na {
        for (x, y) in iter(a).zip(iter(b)) {
            let o = cmp_component(&x, &y, strsize);
            if o != Ordering::Equal {
                return o;
            }
        }
        return Ordering::Equal;
    }
    let ka: Vec<DatumRef> = iter(a).collect();
    let kb: Vec<DatumRef> = iter(b).collect();
    cmp_key_refs(&ka, &kb, keypos, strsize)
}

pub(crate) fn cmp_key_refs(
    ka: &[DatumRef],
    kb: &[DatumRef],
    keypos: usize,
    strsize: usize,
) -> Ordering {
    if ka.len() != kb.len() {
        return ka.len().cmp(&kb.len());
    }
    let n = ka.len();
    let keypos = if keypos >= n { 0 } else { keypos };
    for i in 0..n {
        let j = (i + keypos) % n;
        let o = cmp_component(&ka[j], &kb[j], strsize);
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let key = vec![
            Datum::Int {
                value: -2,
                size: 1,
                signed: true,
            },
            Datum::Int {
                value: -2,
                size: 2,
                signed: false,
            },
            Datum::Int {
                value: i64::MIN,
                size: 8,
                signed: true,
            },
            Datum::Str(b"abc\0junk".to_vec()),
            Datum::Bytes(vec![0, 1, 2]),
            Datum::Stack {
                frames: vec![1, 2, 0],
                user: true,
                pid: 7,
                epoch: 0,
            },
            Datum::Stack {
                frames: vec![1, 2],
                user: false,
                pid: 0,
                epoch: 3,
            },
            Datum::Sym(5),
            Datum::Mod(6),
            Datum::Usym { addr: 1, pid: 2 },
            Datum::Umod { addr: 3, pid: 4 },
            Datum::Uaddr { addr: 5, pid: 6 },
        ];
        let mut enc = Vec::new();
        encode(&key, &mut enc);
        let back: Vec<Datum> = iter(&enc).map(|r| r.to_datum()).collect();
        assert_eq!(back.len(), key.len());
        assert_eq!(
            back[1],
            Datum::Int {
                value: 65534,
                size: 2,
                signed: false
            }
        );
        assert_eq!(back[3], Datum::Str(b"abc".to_vec()));
        assert_eq!(&back[4..], &key[4..]);
        // Garbage never panics.
        for i in 0..enc.len() {
            let _ = iter(&enc[..i]).count();
        }
        let _ = iter(&[0xff, 3, 3]).count();
        let _ = iter(&[
            T_STACK, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x7f,
        ])
        .count();
    }

    #[test]
    fn unsigned_order() {
        let enc = |v: i64, size: u8| {
            let mut e = Vec::new();
            encode(
                &[Datum::Int {
                    value: v,
                    size,
                    signed: true,
                }],
                &mut e,
            );
            e
        };
        assert_eq!(cmp_keys(&enc(-1, 4), &enc(2, 4), 0, 256), Ordering::Greater);
        assert_eq!(cmp_keys(&enc(5, 4), &enc(2, 8), 0, 256), Ordering::Less);
    }

    #[test]
    fn small_integer_keys_encode_as_the_general_encoder_does() {
        let int = |value: i64, size: u8, signed: bool| Datum::Int {
            value,
            size,
            signed,
        };
        let keys: Vec<Vec<Datum>> = vec![
            vec![],
            vec![int(-1, 8, true)],
            vec![int(0x1234_5678_9abc, 4, false)],
            vec![int(-3, 1, true), int(70_000, 2, false), int(9, 3, true)],
            vec![
                int(i64::MIN, 8, true),
                int(i64::MAX, 8, false),
                int(-7, 4, true),
                int(255, 1, false),
            ],
        ];
        for key in &keys {
            let small = encode_small_ints(key).expect("integer key");
            let mut general = Vec::new();
            encode(key, &mut general);
            assert_eq!(small.bytes(), &general[..], "{key:?}");
        }
        let mut full = IntKey::new();
        for _ in 0..IntKey::MAX {
            assert!(full.push(-1, 8, true));
        }
        assert!(!full.push(1, 1, false));
        let five = vec![int(1, 8, true); 5];
        assert!(encode_small_ints(&five).is_none());
        let mixed = vec![int(1, 8, true), Datum::Str(b"x".to_vec())];
        assert!(encode_small_ints(&mixed).is_none());
    }
}
