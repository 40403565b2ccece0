//! Aggregation keys: the public [`KeyValue`], a compact byte encoding used for storage and a
//! borrowed view ([`KeyRef`]) decoded from it, and dtrace's key ordering.
//!
//! Keys are stored encoded back to back in one arena per aggregation so that a million integer
//! keys cost a few bytes each instead of a heap allocation each.

use std::cmp::Ordering;

/// One component of an aggregation key, as recorded when the aggregation was updated.
///
/// Integers are kept as the record of `size` bytes (1, 2, 4 or 8; anything else is treated as 8):
/// the value read back is truncated to that size and sign- or zero-extended by `signed`.
/// `sym()`/`mod()`/`usym()`/`umod()` keys should be normalised by the caller the way libdtrace
/// does when it snapshots (`Sym` to the function's start address, `Mod` to the module's base,
/// `Usym` to the function's start, `Umod` to the object's base) so that equal functions merge.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KeyValue {
    Int {
        value: i64,
        size: u8,
        signed: bool,
    },
    /// A string: the bytes up to (not including) the first NUL.
    Str(Vec<u8>),
    /// Any other by-reference value (a structure, an array), raw bytes.
    Bytes(Vec<u8>),
    /// `stack()` (kernel) or `ustack()`/`jstack()` (`user`, of process `pid`); frames as recorded,
    /// a zero frame ends the stack. `epoch` is the address-space epoch of the images that
    /// named the frames when the stack was recorded (`etw::state::epochs`; 0 where no image
    /// ever took another's place): the same frames under other images are another key.
    Stack {
        frames: Vec<u64>,
        user: bool,
        pid: u32,
        epoch: u32,
    },
    Sym(u64),
    Mod(u64),
    Usym {
        addr: u64,
        pid: u32,
    },
    Umod {
        addr: u64,
        pid: u32,
    },
    Uaddr {
        addr: u64,
        pid: u32,
    },
}

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
/// the same [`KeyValue::Int`]s: the VM builds one per update of an `@[pid]`-like aggregation
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
pub(crate) fn encode_small_ints(key: &[KeyValue]) -> Option<IntKey> {
    if key.len() > IntKey::MAX {
        return None;
    }
    let mut out = IntKey::new();
    for k in key {
        let KeyValue::Int {
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
pub(crate) fn encode(key: &[KeyValue], out: &mut Vec<u8>) {
    for k in key {
        match k {
            KeyValue::Int {
                value,
                size,
                signed,
            } => {
                let size = norm_size(*size);
                out.push(T_INT);
                out.push(size | if *signed { 0x80 } else { 0 });
                out.extend_from_slice(&value.to_le_bytes()[..size as usize]);
            }
            KeyValue::Str(s) => {
                let s = match s.iter().position(|&c| c == 0) {
                    Some(i) => &s[..i],
                    None => &s[..],
                };
                out.push(T_STR);
                put_varint(out, s.len());
                out.extend_from_slice(s);
            }
            KeyValue::Bytes(s) => {
                out.push(T_BYTES);
                put_varint(out, s.len());
                out.extend_from_slice(s);
            }
            KeyValue::Stack {
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
            KeyValue::Sym(a) | KeyValue::Mod(a) => {
                out.push(if matches!(k, KeyValue::Sym(_)) {
                    T_SYM
                } else {
                    T_MOD
                });
                out.extend_from_slice(&a.to_le_bytes());
            }
            KeyValue::Usym { addr, pid }
            | KeyValue::Umod { addr, pid }
            | KeyValue::Uaddr { addr, pid } => {
                out.push(match k {
                    KeyValue::Usym { .. } => T_USYM,
                    KeyValue::Umod { .. } => T_UMOD,
                    _ => T_UADDR,
                });
                out.extend_from_slice(&pid.to_le_bytes());
                out.extend_from_slice(&addr.to_le_bytes());
            }
        }
    }
}

/// A key component borrowed from its encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyRef<'a> {
    Int {
        value: i64,
        size: u8,
        signed: bool,
    },
    Str(&'a [u8]),
    Bytes(&'a [u8]),
    /// Frames as little-endian 8-byte words.
    Stack {
        frames: &'a [u8],
        user: bool,
        pid: u32,
        epoch: u32,
    },
    Sym(u64),
    Mod(u64),
    Usym {
        addr: u64,
        pid: u32,
    },
    Umod {
        addr: u64,
        pid: u32,
    },
    Uaddr {
        addr: u64,
        pid: u32,
    },
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
    fn next_ref(&mut self) -> Option<KeyRef<'a>> {
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
                KeyRef::Int {
                    value,
                    size,
                    signed,
                }
            }
            T_STR | T_BYTES => {
                let n = get_varint(b, pos)?;
                let s = get_bytes(b, pos, n)?;
                if tag == T_STR {
                    KeyRef::Str(s)
                } else {
                    KeyRef::Bytes(s)
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
                let frames = get_bytes(b, pos, n.checked_mul(8)?)?;
                KeyRef::Stack {
                    frames,
                    user,
                    pid,
                    epoch,
                }
            }
            T_SYM => KeyRef::Sym(get_u64(b, pos)?),
            T_MOD => KeyRef::Mod(get_u64(b, pos)?),
            T_USYM | T_UMOD | T_UADDR => {
                let pid = get_u32(b, pos)?;
                let addr = get_u64(b, pos)?;
                match tag {
                    T_USYM => KeyRef::Usym { addr, pid },
                    T_UMOD => KeyRef::Umod { addr, pid },
                    _ => KeyRef::Uaddr { addr, pid },
                }
            }
            _ => return None,
        })
    }
}

impl<'a> Iterator for KeyIter<'a> {
    type Item = KeyRef<'a>;
    fn next(&mut self) -> Option<KeyRef<'a>> {
        let r = self.next_ref();
        if r.is_none() {
            self.pos = self.b.len();
        }
        r
    }
}

/// Stack frames (little-endian words) as integers.
pub(crate) fn frames(raw: &[u8]) -> impl Iterator<Item = u64> + '_ {
    raw.chunks_exact(8).map(|c| {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        u64::from_le_bytes(a)
    })
}

impl KeyRef<'_> {
    pub(crate) fn to_value(self) -> KeyValue {
        match self {
            KeyRef::Int {
                value,
                size,
                signed,
            } => KeyValue::Int {
                value,
                size,
                signed,
            },
            KeyRef::Str(s) => KeyValue::Str(s.to_vec()),
            KeyRef::Bytes(s) => KeyValue::Bytes(s.to_vec()),
            KeyRef::Stack {
                frames: f,
                user,
                pid,
                epoch,
            } => KeyValue::Stack {
                frames: frames(f).collect(),
                user,
                pid,
                epoch,
            },
            KeyRef::Sym(a) => KeyValue::Sym(a),
            KeyRef::Mod(a) => KeyValue::Mod(a),
            KeyRef::Usym { addr, pid } => KeyValue::Usym { addr, pid },
            KeyRef::Umod { addr, pid } => KeyValue::Umod { addr, pid },
            KeyRef::Uaddr { addr, pid } => KeyValue::Uaddr { addr, pid },
        }
    }

    /// Size of the data record dtrace would have used for this key component.
    pub(crate) fn record_size(&self, strsize: usize) -> usize {
        match self {
            KeyRef::Int { size, .. } => *size as usize,
            KeyRef::Str(_) => strsize,
            KeyRef::Bytes(b) => b.len(),
            KeyRef::Stack { frames, user, .. } => frames.len() + if *user { 8 } else { 0 },
            KeyRef::Sym(_) | KeyRef::Mod(_) => 8,
            KeyRef::Usym { .. } | KeyRef::Umod { .. } | KeyRef::Uaddr { .. } => 16,
        }
    }

    /// The record's bytes (for byte-wise comparison), `size` long.
    fn record_bytes(&self, size: usize) -> Vec<u8> {
        let mut v = match self {
            KeyRef::Int { value, .. } => value.to_le_bytes().to_vec(),
            KeyRef::Str(s) | KeyRef::Bytes(s) => s.to_vec(),
            KeyRef::Stack {
                frames, user, pid, ..
            } => {
                let mut v = Vec::with_capacity(frames.len() + 8);
                if *user {
                    v.extend_from_slice(&u64::from(*pid).to_le_bytes());
                }
                v.extend_from_slice(frames);
                v
            }
            KeyRef::Sym(a) | KeyRef::Mod(a) => a.to_le_bytes().to_vec(),
            KeyRef::Usym { addr, pid }
            | KeyRef::Umod { addr, pid }
            | KeyRef::Uaddr { addr, pid } => {
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
            KeyRef::Int { value, .. } => *value as u64,
            KeyRef::Sym(a) | KeyRef::Mod(a) => *a,
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
pub(crate) fn cmp_component(a: &KeyRef, b: &KeyRef, strsize: usize) -> Ordering {
    let (sa, sb) = (a.record_size(strsize), b.record_size(strsize));
    if sa != sb {
        return sa.cmp(&sb);
    }
    match sa {
        1 | 2 | 4 | 8 => a.as_uint(sa).cmp(&b.as_uint(sa)),
        _ => {
            if let (
                KeyRef::Usym { addr, pid }
                | KeyRef::Umod { addr, pid }
                | KeyRef::Uaddr { addr, pid },
                KeyRef::Usym {
                    addr: addr2,
                    pid: pid2,
                }
                | KeyRef::Umod {
                    addr: addr2,
                    pid: pid2,
                }
                | KeyRef::Uaddr {
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
                (KeyRef::Str(x), KeyRef::Str(y)) => x.cmp(y),
                // the same frames under other images: the older images first
                (KeyRef::Stack { epoch: x, .. }, KeyRef::Stack { epoch: y, .. }) => {
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
    let ka: Vec<KeyRef> = iter(a).collect();
    let kb: Vec<KeyRef> = iter(b).collect();
    cmp_key_refs(&ka, &kb, keypos, strsize)
}

pub(crate) fn cmp_key_refs(
    ka: &[KeyRef],
    kb: &[KeyRef],
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
            KeyValue::Int {
                value: -2,
                size: 1,
                signed: true,
            },
            KeyValue::Int {
                value: -2,
                size: 2,
                signed: false,
            },
            KeyValue::Int {
                value: i64::MIN,
                size: 8,
                signed: true,
            },
            KeyValue::Str(b"abc\0junk".to_vec()),
            KeyValue::Bytes(vec![0, 1, 2]),
            KeyValue::Stack {
                frames: vec![1, 2, 0],
                user: true,
                pid: 7,
                epoch: 0,
            },
            KeyValue::Stack {
                frames: vec![1, 2],
                user: false,
                pid: 0,
                epoch: 3,
            },
            KeyValue::Sym(5),
            KeyValue::Mod(6),
            KeyValue::Usym { addr: 1, pid: 2 },
            KeyValue::Umod { addr: 3, pid: 4 },
            KeyValue::Uaddr { addr: 5, pid: 6 },
        ];
        let mut enc = Vec::new();
        encode(&key, &mut enc);
        let back: Vec<KeyValue> = iter(&enc).map(|r| r.to_value()).collect();
        assert_eq!(back.len(), key.len());
        assert_eq!(
            back[1],
            KeyValue::Int {
                value: 65534,
                size: 2,
                signed: false
            }
        );
        assert_eq!(back[3], KeyValue::Str(b"abc".to_vec()));
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
                &[KeyValue::Int {
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
        let int = |value: i64, size: u8, signed: bool| KeyValue::Int {
            value,
            size,
            signed,
        };
        let keys: Vec<Vec<KeyValue>> = vec![
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
        let mixed = vec![int(1, 8, true), KeyValue::Str(b"x".to_vec())];
        assert!(encode_small_ints(&mixed).is_none());
    }
}
