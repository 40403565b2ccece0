//! Variable storage: globals (fixed slots), dynamic variables (thread-locals and associative
//! arrays, bounded by `dynvarsize` with drops counted), and clause-locals.
//!
//! Dynamic variables live in one byte region with a free list per slot size, so a pointer to a
//! string held in one stays valid until the variable is freed, and the steady state of
//! `self->ts = timestamp; ... self->ts = 0;` allocates nothing.

use crate::fasthash::FastMap;

/// A dynamic variable's identity: the variable, the thread (for `self->`), and the key tuple
/// bytes (for associative arrays; empty otherwise).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DynKey {
    pub var: u32,
    pub tid: u64,
    pub tuple: Box<[u8]>,
}

impl std::hash::Hash for DynKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.var.hash(state);
        self.tid.hash(state);
        self.tuple[..].hash(state);
    }
}

/// Key of a thread-local scalar (no tuple): no allocation needed.
type TlsKey = (u32, u64);

#[derive(Clone)]
pub struct DynVars {
    /// Backing bytes of every dynamic variable.
    pub mem: Vec<u8>,
    /// The free slots and the bytes in use.
    space: Space,
    tls: FastMap<TlsKey, usize>,
    /// The thread-local last found or made, and its offset: a clause reads the `self->ts` it
    /// tests in its predicate again in its body, so most lookups are the one before
    /// (`NO_TLS` when there is none; kept equal to what `tls` holds for that key).
    last_tls: (TlsKey, usize),
    arrays: FastMap<DynKey, usize>,
    /// What each element's key was charged.
    key_charges: FastMap<usize, usize>,
}

/// The room of the dynamic variables: slots freed for reuse, and the bytes in use against the
/// limit (apart from the maps, so a map's entry can be made while its slot is taken).
#[derive(Clone)]
struct Space {
    /// Freed 8-byte slots (integers, the most common value), apart from the other sizes:
    /// freeing and taking one then needs no hash.
    free8: Vec<usize>,
    /// Freed slots of every other size, by size.
    free: FastMap<usize, Vec<usize>>,
    /// Bytes in use (values plus key overhead), against `limit`.
    used: usize,
    limit: usize,
    /// Allocations refused because the space was full.
    drops: u64,
}

impl Space {
    /// A zeroed slot of `size` bytes in `mem`, charged `charge` bytes; `None` (a drop,
    /// counted) when the limit would be passed.
    fn alloc(&mut self, mem: &mut Vec<u8>, size: usize, charge: usize) -> Option<usize> {
        if self.used + charge > self.limit {
            self.drops += 1;
            return None;
        }
        self.used += charge;
        let reused = if size == 8 {
            self.free8.pop()
        } else {
            self.free.get_mut(&size).and_then(|v| v.pop())
        };
        if let Some(off) = reused {
            mem[off..off + size].fill(0);
            return Some(off);
        }
        let off = mem.len();
        mem.resize(off + size.max(1), 0);
        Some(off)
    }

    fn release(&mut self, off: usize, size: usize, charge: usize) {
        self.used = self.used.saturating_sub(charge);
        if size == 8 {
            self.free8.push(off);
        } else {
            self.free.entry(size).or_default().push(off);
        }
    }
}

/// `DynVars::last_tls` when it holds nothing (no variable has this id).
const NO_TLS: (TlsKey, usize) = ((u32::MAX, 0), 0);

/// Bookkeeping cost charged per dynamic variable besides its value, as a fixed overhead.
const OVERHEAD: usize = 32;

impl DynVars {
    pub fn new(limit: usize) -> Self {
        DynVars {
            mem: Vec::new(),
            space: Space {
                free8: Vec::new(),
                free: FastMap::default(),
                used: 0,
                limit,
                drops: 0,
            },
            tls: FastMap::default(),
            last_tls: NO_TLS,
            arrays: FastMap::default(),
            key_charges: FastMap::default(),
        }
    }

    /// Allocations refused because the space was full.
    pub fn drops(&self) -> u64 {
        self.space.drops
    }

    /// Counts `n` more refused allocations (those of another engine, folded in).
    pub fn add_drops(&mut self, n: u64) {
        self.space.drops += n;
    }

    fn alloc(&mut self, size: usize, charge: usize) -> Option<usize> {
        self.space.alloc(&mut self.mem, size, charge)
    }

    fn release(&mut self, off: usize, size: usize, charge: usize) {
        self.space.release(off, size, charge);
    }

    /// The offset of a thread-local's storage, creating it when `create`.
    #[inline]
    pub fn tls(&mut self, var: u32, tid: u64, size: usize, create: bool) -> Option<usize> {
        let (key, off) = self.last_tls;
        if key == (var, tid) {
            return Some(off);
        }
        self.tls_lookup(var, tid, size, create)
    }

    fn tls_lookup(&mut self, var: u32, tid: u64, size: usize, create: bool) -> Option<usize> {
        let off = if create {
            // one probe of the map whether the variable is there or is made
            match self.tls.entry((var, tid)) {
                std::collections::hash_map::Entry::Occupied(o) => *o.get(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    let off = self.space.alloc(&mut self.mem, size, size + OVERHEAD)?;
                    *v.insert(off)
                }
            }
        } else {
            *self.tls.get(&(var, tid))?
        };
        self.last_tls = ((var, tid), off);
        Some(off)
    }

    pub fn free_tls(&mut self, var: u32, tid: u64, size: usize) {
        if self.last_tls.0 == (var, tid) {
            self.last_tls = NO_TLS;
        }
        if let Some(off) = self.tls.remove(&(var, tid)) {
            self.release(off, size, size + OVERHEAD);
        }
    }

    /// The offset of an array element's storage, creating it when `create`. `key_charge` is what
    /// the key costs in the space (DTrace sizes string keys at `strsize`).
    pub fn element(
        &mut self,
        var: u32,
        tid: u64,
        tuple: &[u8],
        key_charge: usize,
        size: usize,
        create: bool,
    ) -> Option<usize> {
        let probe = DynKeyRef { var, tid, tuple };
        if let Some(&off) = self.lookup(&probe) {
            return Some(off);
        }
        if !create {
            return None;
        }
        let off = self.alloc(size, size + key_charge + OVERHEAD)?;
        self.key_charges.insert(off, key_charge);
        self.arrays.insert(
            DynKey {
                var,
                tid,
                tuple: tuple.into(),
            },
            off,
        );
        Some(off)
    }

    fn lookup(&self, k: &DynKeyRef<'_>) -> Option<&usize> {
        self.arrays.get(k as &dyn KeyView)
    }

    pub fn free_element(&mut self, var: u32, tid: u64, tuple: &[u8], size: usize) {
        let key = DynKey {
            var,
            tid,
            tuple: tuple.into(),
        };
        if let Some(off) = self.arrays.remove(&key) {
            let charge = self.key_charges.remove(&off).unwrap_or(tuple.len());
            self.release(off, size, size + charge + OVERHEAD);
        }
    }

    /// Frees every thread-local variable (`self->`, scalars and array elements alike): the
    /// threads of one trace of a many-trace run are not those of the next, even where their
    /// ids are the same. `size` gives a variable's value size, as it was allocated.
    pub fn clear_threads(&mut self, size: impl Fn(u32) -> usize) {
        self.last_tls = NO_TLS;
        for ((var, _), off) in std::mem::take(&mut self.tls) {
            let n = size(var);
            self.release(off, n, n + OVERHEAD);
        }
        let threads: Vec<DynKey> = self.arrays.keys().filter(|k| k.tid != 0).cloned().collect();
        for k in threads {
            if let Some(off) = self.arrays.remove(&k) {
                let charge = self.key_charges.remove(&off).unwrap_or(k.tuple.len());
                let n = size(k.var);
                self.release(off, n, n + charge + OVERHEAD);
            }
        }
    }

    /// Every element of an array variable.
    #[cfg(test)]
    pub fn elements(&self, var: u32) -> impl Iterator<Item = (&DynKey, usize)> {
        self.arrays
            .iter()
            .filter(move |(k, _)| k.var == var)
            .map(|(k, v)| (k, *v))
    }
}

struct DynKeyRef<'a> {
    var: u32,
    tid: u64,
    tuple: &'a [u8],
}

/// A borrowed view of a key, so the map can be searched without building an owned key.
trait KeyView {
    fn parts(&self) -> (u32, u64, &[u8]);
}

impl KeyView for DynKey {
    fn parts(&self) -> (u32, u64, &[u8]) {
        (self.var, self.tid, &self.tuple)
    }
}

impl KeyView for DynKeyRef<'_> {
    fn parts(&self) -> (u32, u64, &[u8]) {
        (self.var, self.tid, self.tuple)
    }
}

impl<'a> std::borrow::Borrow<dyn KeyView + 'a> for DynKey {
    fn borrow(&self) -> &(dyn KeyView + 'a) {
        self
    }
}

impl std::hash::Hash for dyn KeyView + '_ {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let (v, t, k) = self.parts();
        v.hash(state);
        t.hash(state);
        k.hash(state);
    }
}

impl PartialEq for dyn KeyView + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn KeyView + '_ {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clear_threads_frees_thread_locals_and_keeps_globals() {
        let mut d = DynVars::new(1 << 10);
        let t = d.tls(1, 100, 8, true).unwrap();
        d.mem[t] = 7;
        let g = d.element(2, 0, b"k", 1, 8, true).unwrap();
        d.mem[g] = 9;
        d.element(3, 100, b"k", 1, 8, true).unwrap();
        let used = d.space.used;
        d.clear_threads(|_| 8);
        assert_eq!(d.tls(1, 100, 8, false), None);
        assert_eq!(d.element(3, 100, b"k", 1, 8, false), None);
        assert_eq!(d.element(2, 0, b"k", 1, 8, false), Some(g));
        assert_eq!(d.mem[g], 9);
        assert!(d.space.used < used);
        // the space freed is used again, zeroed
        let again = d.tls(1, 100, 8, true).unwrap();
        assert_eq!(d.mem[again], 0);
    }

    #[test]
    fn thread_locals_reuse_freed_slots() {
        let mut d = DynVars::new(1 << 20);
        let a = d.tls(1, 100, 8, true).unwrap();
        d.free_tls(1, 100, 8);
        let b = d.tls(1, 200, 8, true).unwrap();
        assert_eq!(a, b);
        assert_eq!(d.tls(1, 100, 8, false), None);
    }

    #[test]
    fn space_is_bounded_and_drops_are_counted() {
        let mut d = DynVars::new(200);
        let mut made = 0;
        for t in 0..100 {
            if d.tls(1, t, 8, true).is_some() {
                made += 1;
            }
        }
        assert_eq!(made, 200 / (8 + OVERHEAD));
        assert_eq!(d.drops(), 100 - made as u64);
        let e = d.element(2, 0, b"key", 3, 8, true);
        assert!(e.is_none());
    }

    #[test]
    fn array_elements_by_tuple() {
        let mut d = DynVars::new(1 << 20);
        let a = d.element(3, 0, b"\x01\0\0\0\0\0\0\0", 8, 8, true).unwrap();
        let b = d.element(3, 0, b"\x02\0\0\0\0\0\0\0", 8, 8, true).unwrap();
        assert_ne!(a, b);
        assert_eq!(d.element(3, 0, b"\x01\0\0\0\0\0\0\0", 8, 8, false), Some(a));
        assert_eq!(d.elements(3).count(), 2);
        d.free_element(3, 0, b"\x01\0\0\0\0\0\0\0", 8);
        assert_eq!(d.elements(3).count(), 1);
    }
}
