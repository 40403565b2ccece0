//! `print()` of typed data, laid out as dtrace does it from CTF type
//! information:
//!
//! ```text
//! foo_t {
//!     int a = 0x1
//!     void *b = 0x2
//!     struct c = {
//!         uint64_t alpha = 0x3
//!     }
//!     char [3] d = [ '\004', '\0', '\0' ]
//! }
//! ```
//!
//! Integers print in hex (`%#x`, so zero is `0`), signed `char` as a quoted
//! character, enums by name, char arrays that hold a terminated printable
//! string as `"text"`.  A top-level scalar or array is followed by a
//! newline; a top-level struct/union ends at its closing brace without one
//! (dtrace's own quirk).
//!
//! The caller describes the type with [`PType`], already resolved (typedefs
//! replaced by what they name, but keeping the name to display).

use std::fmt::Write as _;

use super::memory::spaces;

pub use crate::ir::ptype::{Member, PType};

/// Looks up a function address: `(module, symbol)`.
pub type FuncResolver<'r> = &'r dyn Fn(u64) -> Option<(String, String)>;

/// Most array elements printed (guards against absurd lengths).
const MAX_ELEMS: u64 = 1 << 20;

/// Most nesting levels followed (guards against absurd types).
const MAX_DEPTH: usize = 64;

/// Most type nodes visited in one `print()` (bounds the output of nested
/// arrays).
const MAX_VISITS: u64 = 1 << 22;

struct Printer<'a, 'o> {
    data: &'a [u8],
    out: &'o mut Vec<u8>,
    resolve: Option<FuncResolver<'a>>,
    budget: u64,
}

/// dtrace's per-level print state: base byte offset into the data, the
/// current member depth and the array nesting.
#[derive(Clone, Copy)]
struct Level {
    base: u64,
    depth: usize,
    nest: usize,
}

impl Printer<'_, '_> {
    fn put(&mut self, s: &str) {
        self.out.extend_from_slice(s.as_bytes());
    }

    /// Reads `n` (<= 8) bytes little-endian at byte offset `off`; bytes
    /// outside the data read as zero.
    fn read(&self, off: u64, n: usize) -> u64 {
        let mut v = 0u64;
        for i in 0..n.min(8) {
            let b = off
                .checked_add(i as u64)
                .and_then(|o| usize::try_from(o).ok())
                .and_then(|o| self.data.get(o))
                .copied()
                .unwrap_or(0);
            v |= u64::from(b) << (8 * i);
        }
        v
    }

    fn indent(&mut self, lv: &Level) {
        spaces((lv.depth + lv.nest) * 4, self.out);
    }

    fn trailing_braces(&mut self, lv: &Level, depth: usize) {
        let mut d = lv.depth;
        while d > depth {
            spaces((d + lv.nest - 1) * 4, self.out);
            self.out.push(b'}');
            if d != depth + 1 {
                self.out.push(b'\n');
            }
            d -= 1;
        }
    }

    /// ctf_type_visit(): the member itself, then (for structs/unions) its
    /// members one level deeper.
    fn visit(
        &mut self,
        lv: &mut Level,
        name: &str,
        ty: &PType,
        bits: Option<u8>,
        off: u64,
        depth: usize,
    ) {
        if self.budget == 0 {
            return;
        }
        self.budget -= 1;
        self.member(lv, name, ty, bits, off, depth);
        if depth >= MAX_DEPTH {
            return;
        }
        if let PType::Struct { members, .. } | PType::Union { members, .. } = ty {
            for m in members {
                let moff = off.saturating_add(m.bit_offset);
                self.visit(lv, &m.name, &m.ty, m.bits, moff, depth + 1);
            }
        }
    }

    fn member(
        &mut self,
        lv: &mut Level,
        name: &str,
        ty: &PType,
        bits: Option<u8>,
        off: u64,
        depth: usize,
    ) {
        self.trailing_braces(lv, depth);
        if depth < lv.depth {
            self.out.push(b'\n');
        }
        lv.depth = depth;

        let arraymember = lv.nest != 0 && depth == 0;
        let brief = arraymember && !ty.is_structlike();

        if !brief {
            if arraymember {
                self.out.push(b'\n');
            }
            self.indent(lv);
            let tname = ty.name();
            self.put(tname);
            if !name.is_empty() {
                if !tname.ends_with('*') && !tname.ends_with(' ') {
                    self.out.push(b' ');
                }
                self.put(name);
                if ty.is_integer() {
                    let ebits = u64::from(enc_bits(ty, bits));
                    let size = ebits / 8;
                    if ebits % 8 != 0 || !off.is_multiple_of(8) || size > 8 || size != ty.size() {
                        let _ = write!(self.out_string(), " :{ebits}");
                    }
                }
                self.put(" =");
            }
            self.out.push(b' ');
        }

        self.value(lv, ty, bits, off);

        if !brief {
            self.out.push(b'\n');
        }
    }

    fn out_string(&mut self) -> OutWriter<'_> {
        OutWriter(self.out)
    }

    fn value(&mut self, lv: &Level, ty: &PType, bits: Option<u8>, off: u64) {
        let addr = lv.base.saturating_add(off / 8);
        match ty {
            PType::Int { .. } | PType::Char { .. } => self.int(lv, ty, bits, off),
            PType::Float { size, .. } => {
                let s = match size {
                    4 => c_exp(f64::from(f32::from_bits(self.read(addr, 4) as u32)), 7),
                    8 => c_exp(f64::from_bits(self.read(addr, 8)), 7),
                    _ => "<unknown encoding>".to_string(),
                };
                self.put(&s);
            }
            PType::Ptr {
                size, to_function, ..
            } => {
                if *to_function {
                    let pc = self.read(addr, 8);
                    if let Some((m, s)) = self.resolve.and_then(|r| r(pc)) {
                        self.put(&format!("{m}`{s}"));
                        return;
                    }
                }
                self.hex(addr, u64::from(*size));
            }
            PType::Array { elem, len, .. } => self.array(lv, elem, *len, addr),
            PType::Struct { .. } | PType::Union { .. } => self.out.push(b'{'),
            PType::Enum { size, values, .. } => {
                let v: i64 = match size {
                    1 => self.read(addr, 1) as i64,
                    2 => self.read(addr, 2) as i64,
                    4 => i64::from(self.read(addr, 4) as u32 as i32),
                    _ => {
                        self.put(&format!("<invalid enum size {size}>"));
                        return;
                    }
                };
                match values.iter().find(|(_, x)| *x == v) {
                    Some((n, _)) => self.put(n),
                    None => self.put(&v.to_string()),
                }
            }
            PType::Forward { .. } => self.put("<forward decl>"),
        }
    }

    /// `%#x` of an unsigned value of `size` bytes.
    fn hex(&mut self, addr: u64, size: u64) {
        match size {
            1 | 2 | 4 | 8 => {
                let v = self.read(addr, size as usize);
                self.put(&alt_hex(v));
            }
            _ => self.put(&format!("<invalid size {size}>")),
        }
    }

    fn int(&mut self, lv: &Level, ty: &PType, bits: Option<u8>, off: u64) {
        let addr = lv.base.saturating_add(off / 8);
        let ebits = u64::from(enc_bits(ty, bits));
        let size = ebits / 8;
        if size > 8 || ebits % 8 != 0 || (size & size.wrapping_sub(1)) != 0 {
            // A bit-field: copy the covering bytes, shift and mask.
            let nbytes = ebits.div_ceil(8) as usize;
            let mut v = self.read(addr, nbytes);
            if !off.is_multiple_of(8) {
                v >>= off % 8;
            }
            if ebits < 64 {
                v &= (1u64 << ebits) - 1;
            }
            self.put(&alt_hex(v));
            return;
        }
        if matches!(ty, PType::Char { .. }) && ebits == 8 {
            let c = self.read(addr, 1) as u8;
            if (0x20..=0x7e).contains(&c) {
                self.put(&format!("'{}'", c as char));
            } else if c == 0 {
                self.put("'\\0'");
            } else {
                // C passes the (signed) char promoted to int to %03o.
                let v = i32::from(c as i8) as u32;
                self.put(&format!("'\\{v:03o}'"));
            }
            return;
        }
        self.hex(addr, size);
    }

    fn array(&mut self, lv: &Level, elem: &PType, len: u64, addr: u64) {
        let eltsize = elem.size();
        let is_char = matches!(elem, PType::Char { .. });
        let mut isstring = false;
        if is_char && len > 0 {
            let mut i = 0u64;
            let mut last = 0u8;
            while i < len {
                last = self.read(addr.saturating_add(eltsize.saturating_mul(i)), 1) as u8;
                if !(0x20..=0x7e).contains(&last) || last == 0 {
                    break;
                }
                i += 1;
                if i > MAX_ELEMS {
                    break;
                }
            }
            isstring = i < len && last == 0;
        }

        let brackets = !isstring || lv.depth != 0;
        if brackets {
            self.put("[ ");
        }
        if isstring {
            self.out.push(b'"');
            let mut i = 0u64;
            while i < len {
                let c = self.read(addr.saturating_add(eltsize.saturating_mul(i)), 1) as u8;
                if c == 0 {
                    break;
                }
                self.out.push(c);
                i += 1;
            }
            self.out.push(b'"');
        } else {
            let n = self.elem_count(len, eltsize, addr);
            for i in 0..n {
                let mut el = Level {
                    base: addr.saturating_add(eltsize.saturating_mul(i)),
                    depth: 0,
                    nest: lv.nest + lv.depth + 1,
                };
                if el.nest <= MAX_DEPTH {
                    self.visit(&mut el, "", elem, None, 0, 0);
                }
                self.trailing_braces(&el, 0);
                if i + 1 != len {
                    self.put(", ");
                } else if elem.is_structlike() {
                    self.out.push(b'\n');
                }
            }
        }
        if brackets {
            if elem.is_structlike() {
                self.indent(lv);
            } else {
                self.out.push(b' ');
            }
            self.out.push(b']');
        }
    }

    /// How many elements to actually print: all of them, except that
    /// elements lying wholly outside the data are not printed for huge
    /// arrays (the output would be unbounded).
    fn elem_count(&self, len: u64, eltsize: u64, addr: u64) -> u64 {
        if len <= 4096 {
            return len;
        }
        let avail = (self.data.len() as u64).saturating_sub(addr);
        let fit = avail.checked_div(eltsize).unwrap_or(4096);
        len.min(fit.max(1)).min(MAX_ELEMS)
    }
}

struct OutWriter<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for OutWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Bits of an integer's encoding: the bit-field width if any, else the
/// natural size.
fn enc_bits(ty: &PType, bits: Option<u8>) -> u8 {
    match bits {
        Some(b) => b,
        None => match ty {
            PType::Char { .. } => 8,
            _ => (ty.size().min(255) as u8).saturating_mul(8),
        },
    }
}

/// C `%#llx`: `0` for zero, `0x...` otherwise.
fn alt_hex(v: u64) -> String {
    if v == 0 {
        "0".to_string()
    } else {
        format!("{v:#x}")
    }
}

/// C `%+.{prec}e`.
pub fn c_exp(v: f64, prec: usize) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan" } else { "+nan" }.to_string();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "+inf" }.to_string();
    }
    let s = format!("{v:+.prec$e}");
    match s.split_once('e') {
        Some((mant, exp)) => {
            let e: i32 = exp.parse().unwrap_or(0);
            let sign = if e < 0 { '-' } else { '+' };
            format!("{mant}e{sign}{:02}", e.unsigned_abs())
        }
        None => s,
    }
}

/// `print(x)`: appends what dtrace prints for a value of type `ty` whose
/// bytes are `bytes` (the record; missing bytes read as zero).
pub fn print_value(ty: &PType, bytes: &[u8], out: &mut Vec<u8>) {
    print_value_with(ty, bytes, None, out);
}

/// [`print_value`] with a resolver for function pointers.
pub fn print_value_with(
    ty: &PType,
    bytes: &[u8],
    resolve: Option<FuncResolver<'_>>,
    out: &mut Vec<u8>,
) {
    let mut p = Printer {
        data: bytes,
        out,
        resolve,
        budget: MAX_VISITS,
    };
    let mut lv = Level {
        base: 0,
        depth: 0,
        nest: 0,
    };
    p.visit(&mut lv, "", ty, None, 0, 0);
    p.trailing_braces(&lv, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(name: &str, size: u8) -> PType {
        PType::Int {
            name: name.into(),
            size,
            signed: true,
        }
    }
    fn ch() -> PType {
        PType::Char {
            name: "char".into(),
        }
    }
    fn arr(name: &str, elem: PType, len: u64) -> PType {
        PType::Array {
            name: name.into(),
            elem: Box::new(elem),
            len,
        }
    }
    fn pr(ty: &PType, bytes: &[u8]) -> String {
        let mut out = Vec::new();
        print_value(ty, bytes, &mut out);
        String::from_utf8(out).unwrap()
    }
    fn le32(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn primitive() {
        // print/tst.primitive.d.out (after its leading printf("\n"))
        let mut s = String::new();
        s += &pr(&ch(), b"a");
        s += &pr(&int("int", 4), &(-1i32).to_le_bytes());
        s += &pr(&int("unsigned int", 4), &23u32.to_le_bytes());
        s += &pr(&int("short", 2), &456u16.to_le_bytes());
        s += &pr(&int("unsigned short", 2), &789u16.to_le_bytes());
        s += &pr(&int("long", 8), &1234u64.to_le_bytes());
        s += &pr(&int("ulong_t", 8), &56789u64.to_le_bytes());
        let vp = PType::Ptr {
            name: "void *".into(),
            size: 8,
            to_function: false,
        };
        s += &pr(&vp, &0x1234u64.to_le_bytes());
        let mut hello = b"hello".to_vec();
        hello.resize(256, 0);
        s += &pr(&PType::string(256), &hello);
        assert_eq!(
            s,
            "char 'a'\nint 0xffffffff\nunsigned int 0x17\nshort 0x1c8\nunsigned short 0x315\n\
long 0x4d2\nulong_t 0xddd5\nvoid * 0x1234\nstring \"hello\"\n"
        );
    }

    #[test]
    fn enums() {
        // print/tst.enum.d.out
        let names = [
            "homer",
            "marge",
            "bart",
            "lisa",
            "maggie",
            "snowball_ii",
            "santas_little_helper",
        ];
        let e = PType::Enum {
            name: "enum simpson".into(),
            size: 4,
            values: names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.to_string(), i as i64))
                .collect(),
        };
        let s = pr(&e, &le32(&[2])) + &pr(&e, &le32(&[4])) + &pr(&e, &le32(&[5]));
        assert_eq!(
            s,
            "enum simpson bart\nenum simpson maggie\nenum simpson snowball_ii\n"
        );
        assert_eq!(pr(&e, &le32(&[99])), "enum simpson 99\n");
    }

    fn bar_t() -> PType {
        PType::Struct {
            name: "bar_t".into(),
            size: 4,
            members: vec![Member::new("alpha", 0, int("int", 4))],
        }
    }

    #[test]
    fn arrays() {
        // print/tst.array.d.out
        let mut f = le32(&[1, 2, 3]); // a: offset 0
        let mut b = b"ab".to_vec();
        b.resize(30, 0);
        f.extend_from_slice(&b); // b: offset 12
        f.extend_from_slice(&[0, 0]); // pad to 44
        f.extend_from_slice(&le32(&[5, 6])); // c: offset 44
        f.extend_from_slice(&[4, 0, 0, 0]); // d: offset 52, pad to 56
        let a_t = arr("int [3]", int("int", 4), 3);
        let b_t = arr("char [30]", ch(), 30);
        let c_t = arr("bar_t [2]", bar_t(), 2);
        let d_t = arr("char [3]", ch(), 3);
        let foo = PType::Struct {
            name: "foo_t".into(),
            size: 56,
            members: vec![
                Member::new("a", 0, a_t.clone()),
                Member::new("b", 96, b_t.clone()),
                Member::new("c", 44 * 8, c_t.clone()),
                Member::new("d", 52 * 8, d_t),
            ],
        };
        let mut s = pr(&a_t, &f[0..12]);
        s += &pr(&b_t, &f[12..42]);
        s += &pr(&c_t, &f[44..52]);
        s += &pr(&foo, &f);
        s += "\n"; // dtrace's final newline
        let want = "int [3] [ 0x1, 0x2, 0x3 ]
char [30] \"ab\"
bar_t [2] [ 
    bar_t {
        int alpha = 0x5
    }, 
    bar_t {
        int alpha = 0x6
    }
]
foo_t {
    int [3] a = [ 0x1, 0x2, 0x3 ]
    char [30] b = [ \"ab\" ]
    bar_t [2] c = [ 
        bar_t {
            int alpha = 0x5
        }, 
        bar_t {
            int alpha = 0x6
        }
    ]
    char [3] d = [ '\\004', '\\0', '\\0' ]
}
";
        assert_eq!(s, want);
    }

    #[test]
    fn structs() {
        // print/tst.struct.d.out
        let u64t = int("uint64_t", 8);
        let foo = PType::Struct {
            name: "foo_t".into(),
            size: 56,
            members: vec![
                Member::new("a", 0, int("int", 4)),
                Member::new(
                    "b",
                    64,
                    PType::Ptr {
                        name: "void *".into(),
                        size: 8,
                        to_function: false,
                    },
                ),
                Member::new(
                    "c",
                    128,
                    PType::Struct {
                        name: "struct ".into(),
                        size: 16,
                        members: vec![
                            Member::new("alpha", 0, u64t.clone()),
                            Member::new("beta", 64, u64t),
                        ],
                    },
                ),
                Member::new("d", 256, int("ushort_t", 2)),
                Member::new("e", 288, int("int", 4)),
                Member::new(
                    "f",
                    320,
                    PType::Ptr {
                        name: "forward_t *".into(),
                        size: 8,
                        to_function: false,
                    },
                ),
                Member::new(
                    "g",
                    384,
                    PType::Ptr {
                        name: "int (*)()".into(),
                        size: 8,
                        to_function: true,
                    },
                ),
            ],
        };
        let mut d = Vec::new();
        d.extend_from_slice(&1u64.to_le_bytes());
        d.extend_from_slice(&2u64.to_le_bytes());
        d.extend_from_slice(&3u64.to_le_bytes());
        d.extend_from_slice(&4u64.to_le_bytes());
        d.extend_from_slice(&5u32.to_le_bytes());
        d.extend_from_slice(&6u32.to_le_bytes());
        d.extend_from_slice(&7u64.to_le_bytes());
        d.extend_from_slice(&8u64.to_le_bytes());
        let s = pr(&foo, &d) + "\n";
        let want = "foo_t {
    int a = 0x1
    void *b = 0x2
    struct c = {
        uint64_t alpha = 0x3
        uint64_t beta = 0x4
    }
    ushort_t d = 0x5
    int e = 0x6
    forward_t *f = 0x7
    int (*)() g = 0x8
}
";
        assert_eq!(s, want);
    }

    #[test]
    fn bitfields() {
        // print/tst.bitfield.d.out: a:4=1, b:7=5, c:1=0, d:2=2
        let it = |n: &str, off, bits| {
            Member::bitfield(
                n,
                off,
                bits,
                PType::Int {
                    name: "int".into(),
                    size: 1,
                    signed: true,
                },
            )
        };
        let foo = PType::Struct {
            name: "foo_t".into(),
            size: 4,
            members: vec![it("a", 0, 4), it("b", 4, 7), it("c", 11, 1), it("d", 12, 2)],
        };
        let word: u32 = 1 | (5 << 4) | (2 << 12);
        let s = pr(&foo, &word.to_le_bytes()) + "\n";
        assert_eq!(
            s,
            "foo_t {\n    int a :4 = 0x1\n    int b :7 = 0x5\n    int c :1 = 0\n    int d :2 = 0x2\n}\n"
        );
    }

    #[test]
    fn xlate_nested() {
        // print/tst.xlate.d.out
        let ts = PType::Struct {
            name: "timespec_t".into(),
            size: 16,
            members: vec![
                Member::new("tv_sec", 0, int("time_t", 8)),
                Member::new("tv_nsec", 64, int("long", 8)),
            ],
        };
        let p = PType::Struct {
            name: "pancakes_t".into(),
            size: 8 + 256 + 16,
            members: vec![
                Member::new("i", 0, int("int", 4)),
                Member::new("s", 32, PType::string(256)),
                Member::new("t", (8 + 256) * 8, ts),
            ],
        };
        let mut d = vec![0u8; 280];
        d[0] = 20;
        d[4..4 + 15].copy_from_slice(b"I like pancakes");
        let s = pr(&p, &d) + "\n";
        assert_eq!(
            s,
            "pancakes_t {\n    int i = 0x14\n    string s = [ \"I like pancakes\" ]\n    timespec_t t = {\n        time_t tv_sec = 0\n        long tv_nsec = 0\n    }\n}\n"
        );
    }

    #[test]
    fn deep_nesting_closes_all() {
        let inner = PType::Struct {
            name: "struct in".into(),
            size: 4,
            members: vec![Member::new("x", 0, int("int", 4))],
        };
        let mid = PType::Struct {
            name: "struct mid".into(),
            size: 4,
            members: vec![Member::new("i", 0, inner)],
        };
        let s = pr(&mid, &[1, 0, 0, 0]);
        assert_eq!(
            s,
            "struct mid {\n    struct in i = {\n        int x = 0x1\n    }\n}"
        );
    }

    #[test]
    fn odd_inputs_do_not_panic() {
        let chars = [ch()];
        let _ = pr(
            &arr("char [5]", chars[0].clone(), 5),
            &[0xff, 0x80, 1, 0, 0],
        );
        assert_eq!(
            pr(&arr("char [2]", ch(), 2), &[0x80, 0]),
            "char [2] [ '\\37777777600', '\\0' ]\n"
        );
        let _ = pr(&arr("x", int("int", 4), u64::MAX), &[1, 2, 3]);
        let _ = pr(&arr("x", bar_t(), 1 << 40), &[]);
        let _ = pr(&arr("x", arr("y", ch(), 0), 1 << 30), &[]);
        let _ = pr(&int("__int128", 16), &[1; 16]);
        let _ = pr(&int("odd", 3), &[]);
        let bf = PType::Struct {
            name: "s".into(),
            size: 8,
            members: vec![Member::bitfield("w", u64::MAX, 64, int("long", 8))],
        };
        let _ = pr(&bf, &[]);
        let f = PType::Float {
            name: "double".into(),
            size: 8,
        };
        assert_eq!(pr(&f, &1.5f64.to_le_bytes()), "double +1.5000000e+00\n");
        assert_eq!(c_exp(-1.25e-10, 7), "-1.2500000e-10");
        assert_eq!(c_exp(0.0, 7), "+0.0000000e+00");
        assert_eq!(c_exp(1e300, 7), "+1.0000000e+300");
        assert_eq!(
            pr(
                &PType::Forward {
                    name: "struct f".into()
                },
                &[]
            ),
            "struct f <forward decl>\n"
        );
        let fp = PType::Ptr {
            name: "int (*)()".into(),
            size: 8,
            to_function: true,
        };
        let mut out = Vec::new();
        print_value_with(
            &fp,
            &0x10u64.to_le_bytes(),
            Some(&|_| Some(("genunix".into(), "f".into()))),
            &mut out,
        );
        assert_eq!(out, b"int (*)() genunix`f\n");
    }
}
