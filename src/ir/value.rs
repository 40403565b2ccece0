//! One model of a recorded D value: what a recording action hands the consumer (the VM's
//! `Record`s), what an aggregation key is made of, and what `printf`, `printa`, `trace()` and
//! the JSON, XML and folded outputs read. As in bpftrace, where text and JSON output read one
//! value model, there is one set of variants here and one place that says how a D value is
//! kind-tagged.
//!
//! [`Datum`] owns its bytes and frames; [`DatumRef`] is the same enum borrowing them, from an
//! owned datum ([`Datum::as_view`]) or straight from an aggregation's key arena, where frames
//! are kept as little-endian words ([`Frames::Le`]). D has no floating-point values at run time,
//! so neither has the model.

/// One recorded D value. `B` holds bytes and `F` stack frames: [`Datum`] (the defaults) owns
/// them, [`DatumRef`] borrows them.
///
/// Integers are the record of `size` bytes (1, 2, 4 or 8; anything else is read as 8), signed
/// or not as the D type was. The address kinds (`sym()`, `mod()`, `usym()`, `umod()`,
/// `uaddr()`) are aggregation keys that the consumer names when it prints or merges them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Datum<B = Vec<u8>, F = Vec<u64>> {
    Int {
        value: i64,
        size: u8,
        signed: bool,
    },
    /// A string: its bytes up to (not including) the first NUL, or the record as stored.
    Str(B),
    /// Any other by-reference value (a struct, an array, a `tracemem` buffer), raw bytes.
    Bytes(B),
    /// `stack()` (kernel) or `ustack()`/`jstack()` (`user`, of process `pid`): frames innermost
    /// first, a zero frame ends the stack. `epoch` is the address-space epoch of the images
    /// that named the frames when the stack was recorded (`etw::state::epochs`; 0 where no
    /// image ever took another's place): the same frames under other images are another value.
    Stack {
        frames: F,
        user: bool,
        pid: u32,
        epoch: u32,
    },
    /// `sym()`/`func()`: a kernel address standing for its function.
    Sym(u64),
    /// `mod()`: a kernel address standing for its module.
    Mod(u64),
    /// `usym()`/`ufunc()`: a user address of `pid` standing for its function.
    Usym {
        addr: u64,
        pid: u32,
    },
    /// `umod()`: a user address of `pid` standing for its object.
    Umod {
        addr: u64,
        pid: u32,
    },
    /// `uaddr()`: a user address of `pid`.
    Uaddr {
        addr: u64,
        pid: u32,
    },
}

/// A [`Datum`] borrowing its bytes and frames.
pub type DatumRef<'a> = Datum<&'a [u8], Frames<'a>>;

impl<B, F> Datum<B, F> {
    /// An integer recorded at `size` bytes.
    pub const fn int(value: i64, size: u8, signed: bool) -> Self {
        Datum::Int {
            value,
            size,
            signed,
        }
    }
}

impl Datum {
    /// The same value, borrowed.
    pub fn as_view(&self) -> DatumRef<'_> {
        match self {
            Datum::Int {
                value,
                size,
                signed,
            } => Datum::int(*value, *size, *signed),
            Datum::Str(s) => Datum::Str(s),
            Datum::Bytes(b) => Datum::Bytes(b),
            Datum::Stack {
                frames,
                user,
                pid,
                epoch,
            } => Datum::Stack {
                frames: Frames::Words(frames),
                user: *user,
                pid: *pid,
                epoch: *epoch,
            },
            Datum::Sym(a) => Datum::Sym(*a),
            Datum::Mod(a) => Datum::Mod(*a),
            Datum::Usym { addr, pid } => Datum::Usym {
                addr: *addr,
                pid: *pid,
            },
            Datum::Umod { addr, pid } => Datum::Umod {
                addr: *addr,
                pid: *pid,
            },
            Datum::Uaddr { addr, pid } => Datum::Uaddr {
                addr: *addr,
                pid: *pid,
            },
        }
    }
}

impl DatumRef<'_> {
    /// The same value, owned.
    pub fn to_datum(self) -> Datum {
        match self {
            Datum::Int {
                value,
                size,
                signed,
            } => Datum::int(value, size, signed),
            Datum::Str(s) => Datum::Str(s.to_vec()),
            Datum::Bytes(b) => Datum::Bytes(b.to_vec()),
            Datum::Stack {
                frames,
                user,
                pid,
                epoch,
            } => Datum::Stack {
                frames: frames.iter().collect(),
                user,
                pid,
                epoch,
            },
            Datum::Sym(a) => Datum::Sym(a),
            Datum::Mod(a) => Datum::Mod(a),
            Datum::Usym { addr, pid } => Datum::Usym { addr, pid },
            Datum::Umod { addr, pid } => Datum::Umod { addr, pid },
            Datum::Uaddr { addr, pid } => Datum::Uaddr { addr, pid },
        }
    }
}

/// A value read as a [`DatumRef`]: an owned [`Datum`] (a record's values, formatted where
/// they lie), or a view already.
pub trait AsView {
    fn view(&self) -> DatumRef<'_>;
}

impl AsView for Datum {
    #[inline]
    fn view(&self) -> DatumRef<'_> {
        self.as_view()
    }
}

impl AsView for DatumRef<'_> {
    #[inline]
    fn view(&self) -> DatumRef<'_> {
        *self
    }
}

/// Borrowed stack frames: a recorded stack's words, or the little-endian words an aggregation
/// key keeps them as (its arena is not aligned for `u64`).
#[derive(Clone, Copy, Debug)]
pub enum Frames<'a> {
    Words(&'a [u64]),
    Le(&'a [u8]),
}

impl<'a> Frames<'a> {
    /// Number of frames (a trailing partial word of `Le` is not one).
    pub fn len(&self) -> usize {
        match self {
            Frames::Words(w) => w.len(),
            Frames::Le(b) => b.len() / 8,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The frames, innermost first.
    pub fn iter(&self) -> impl Iterator<Item = u64> + 'a {
        let (words, le): (&'a [u64], &'a [u8]) = match *self {
            Frames::Words(w) => (w, &[]),
            Frames::Le(b) => (&[], b),
        };
        words.iter().copied().chain(le.chunks_exact(8).map(|c| {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            u64::from_le_bytes(a)
        }))
    }

    /// Appends the frames as little-endian words.
    pub fn put_le(&self, out: &mut Vec<u8>) {
        match self {
            Frames::Words(w) => {
                for f in *w {
                    out.extend_from_slice(&f.to_le_bytes());
                }
            }
            Frames::Le(b) => out.extend_from_slice(&b[..b.len() / 8 * 8]),
        }
    }
}

impl PartialEq for Frames<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Frames<'_> {}

impl std::hash::Hash for Frames<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_usize(self.len());
        for f in self.iter() {
            state.write_u64(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_round_trip_and_frames_compare_by_value() {
        let all = vec![
            Datum::int(-2, 1, true),
            Datum::Str(b"abc".to_vec()),
            Datum::Bytes(vec![0, 1, 2]),
            Datum::Stack {
                frames: vec![1, 2, 0],
                user: true,
                pid: 7,
                epoch: 3,
            },
            Datum::Sym(5),
            Datum::Mod(6),
            Datum::Usym { addr: 1, pid: 2 },
            Datum::Umod { addr: 3, pid: 4 },
            Datum::Uaddr { addr: 5, pid: 6 },
        ];
        for d in &all {
            assert_eq!(&d.as_view().to_datum(), d);
        }
        let mut le = Vec::new();
        Frames::Words(&[1, 2, 0]).put_le(&mut le);
        assert_eq!(le.len(), 24);
        assert_eq!(Frames::Le(&le), Frames::Words(&[1, 2, 0]));
        assert_ne!(Frames::Le(&le[..16]), Frames::Words(&[1, 2, 0]));
        // a partial word is no frame
        assert_eq!(Frames::Le(&le[..20]).len(), 2);
        assert_eq!(Frames::Le(&le[..20]).iter().collect::<Vec<_>>(), [1, 2]);
    }
}
