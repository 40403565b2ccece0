//! A target's own types from its PDB: the TPI stream (type records: structures, unions,
//! enumerations, pointers, modifiers, arrays, bit-fields, procedures and their argument lists),
//! the `S_UDT` symbols that give typedef names, and the IPI stream's `LF_FUNC_ID` records that
//! tie a function's name to its prototype. Read through the `pdb2` crate (its `TypeData` and
//! `IdData`; the record layouts are Microsoft's CodeView, microsoft-pdb's `cvinfo.h`), owned
//! here so that the file can be closed, and added into the compiler's type table as a program
//! names them (`lang::target_types::TargetTypes`).
//!
//! What the table gets keeps the PDB's layout: members at the offsets the PDB gives (MSVC's
//! and clang-cl's, not D's own rules), bit-fields at their byte offset plus bit position,
//! `long` of 4 bytes as Windows has it (a type of that name and size, not D's 8-byte `long`).

use crate::lang::target_types::TargetTypes;
use crate::lang::types::{Member, TypeId, TypeKind, TypeTable};
use pdb2::FallibleIterator;
use std::collections::HashMap;
use std::path::Path;

/// A base type of CodeView's primitive type indexes (below 0x1000), as D names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Base {
    Void,
    /// An integer: D's name, size, signedness, and whether it is a character type.
    Int(&'static str, u64, bool, bool),
    Float(&'static str, u64),
}

/// One type record, owned.
#[derive(Clone, Debug)]
enum Rec {
    /// A primitive type, or a pointer to one (CodeView's primitive indexes carry the pointer
    /// mode in the same index).
    Prim {
        base: Base,
        pointer: bool,
    },
    Pointer(u32),
    Modifier {
        ty: u32,
        constant: bool,
        volatile: bool,
    },
    /// An array: its element type and its size in bytes (the PDB's dimension).
    Array {
        elem: u32,
        bytes: u64,
    },
    Sou {
        union: bool,
        name: String,
        size: u64,
        fields: Option<u32>,
        forward: bool,
    },
    Enum {
        name: String,
        underlying: u32,
        fields: u32,
        forward: bool,
    },
    Bitfield {
        ty: u32,
        len: u8,
        pos: u8,
    },
    /// A field list: data members (name, type, byte offset), enumerators, and the list it
    /// continues in.
    Fields {
        members: Vec<(String, u32, u64)>,
        values: Vec<(String, i64)>,
        next: Option<u32>,
    },
    Proc {
        ret: Option<u32>,
        args: u32,
    },
    Args(Vec<u32>),
    Other,
}

/// The types of one PDB.
#[derive(Default)]
pub struct PdbTypes {
    recs: HashMap<u32, Rec>,
    /// Complete struct (0), union (1) and enum (2) definitions by tag.
    tags: HashMap<(u8, String), u32>,
    /// Typedef names (`S_UDT`) and what they name.
    typedefs: HashMap<String, u32>,
    /// Function names and their prototypes (`LF_PROCEDURE`).
    functions: HashMap<String, u32>,
    /// Which of a process's PDBs this is (`symbols::process_types`): the high half of the
    /// keys under which its types are remembered in `TypeTable::imported`, since two PDBs
    /// number their records alike.
    source: u64,
}

/// The deepest chain of types followed (a malformed PDB may loop).
const MAX_DEPTH: u32 = 64;

fn base_of(kind: pdb2::PrimitiveKind) -> Base {
    use pdb2::PrimitiveKind as K;
    match kind {
        K::NoType | K::Void => Base::Void,
        K::Char | K::RChar | K::I8 => Base::Int("char", 1, true, true),
        K::UChar | K::U8 | K::Char8 => Base::Int("unsigned char", 1, false, true),
        K::WChar | K::RChar16 => Base::Int("wchar_t", 2, false, false),
        K::RChar32 => Base::Int("unsigned int", 4, false, false),
        K::Short | K::I16 => Base::Int("short", 2, true, false),
        K::UShort | K::U16 => Base::Int("unsigned short", 2, false, false),
        // Windows' long is 4 bytes (LLP64)
        K::Long => Base::Int("long", 4, true, false),
        K::ULong => Base::Int("unsigned long", 4, false, false),
        K::I32 => Base::Int("int", 4, true, false),
        K::U32 => Base::Int("unsigned int", 4, false, false),
        K::Quad | K::I64 => Base::Int("long long", 8, true, false),
        K::UQuad | K::U64 => Base::Int("unsigned long long", 8, false, false),
        K::Bool8 => Base::Int("_Bool", 1, false, false),
        K::F32 | K::F32PP => Base::Float("float", 4),
        K::F64 => Base::Float("double", 8),
        K::F80 | K::F128 => Base::Float("long double", 16),
        K::HRESULT => Base::Int("int", 4, true, false),
        _ => Base::Int("int", 4, true, false),
    }
}

fn variant(v: &pdb2::Variant) -> i64 {
    use pdb2::Variant as V;
    match *v {
        V::U8(x) => i64::from(x),
        V::U16(x) => i64::from(x),
        V::U32(x) => i64::from(x),
        V::U64(x) => x as i64,
        V::I8(x) => i64::from(x),
        V::I16(x) => i64::from(x),
        V::I32(x) => i64::from(x),
        V::I64(x) => x,
    }
}

impl PdbTypes {
    /// These types as the `source`th PDB of a process (see [`PdbTypes::source`]).
    pub fn with_source(mut self, source: u64) -> PdbTypes {
        self.source = source;
        self
    }

    /// The key of the record at `index` (with its typedef bit) in `TypeTable::imported`.
    fn key(&self, index: u32) -> u64 {
        (self.source << 32) | u64::from(index)
    }

    /// Reads the types of the PDB at `path`.
    pub fn read(path: &Path) -> Result<PdbTypes, String> {
        let shown = path.display();
        let f = std::fs::File::open(path).map_err(|e| format!("{shown}: {e}"))?;
        super::msf::check(&f).map_err(|e| format!("{shown}: {e}"))?;
        let mut pdb = pdb2::PDB::open(f).map_err(|e| format!("{shown}: {e}"))?;
        let mut out = PdbTypes::default();
        out.read_tpi(&mut pdb)
            .map_err(|e| format!("{shown}: type information: {e}"))?;
        // typedef names and prototypes are extras: a PDB without them still has its tags
        let _ = out.read_udts(&mut pdb);
        let _ = out.read_function_ids(&mut pdb);
        Ok(out)
    }

    fn read_tpi<'s, S: pdb2::Source<'s> + Send + 's>(
        &mut self,
        pdb: &mut pdb2::PDB<'s, S>,
    ) -> pdb2::Result<()> {
        use pdb2::TypeData as T;
        let info = pdb.type_information()?;
        let mut finder = info.finder();
        let mut it = info.iter();
        let mut prims = Vec::new();
        while let Some(t) = it.next()? {
            finder.update(&it);
            let index = t.index().0;
            // a record pdb2 cannot parse is left out: what refers to it is skipped
            let Ok(data) = t.parse() else { continue };
            let rec = match data {
                T::Pointer(p) => Rec::Pointer(p.underlying_type.0),
                T::Modifier(m) => Rec::Modifier {
                    ty: m.underlying_type.0,
                    constant: m.constant,
                    volatile: m.volatile,
                },
                T::Array(a) => Rec::Array {
                    elem: a.element_type.0,
                    bytes: a.dimensions.last().copied().map_or(0, u64::from),
                },
                T::Class(c) => Rec::Sou {
                    union: false,
                    name: c.name.to_string().into_owned(),
                    size: c.size,
                    fields: c.fields.map(|f| f.0),
                    forward: c.properties.forward_reference(),
                },
                T::Union(u) => Rec::Sou {
                    union: true,
                    name: u.name.to_string().into_owned(),
                    size: u.size,
                    fields: Some(u.fields.0),
                    forward: u.properties.forward_reference(),
                },
                T::Enumeration(e) => Rec::Enum {
                    name: e.name.to_string().into_owned(),
                    underlying: e.underlying_type.0,
                    fields: e.fields.0,
                    forward: e.properties.forward_reference(),
                },
                T::Bitfield(b) => Rec::Bitfield {
                    ty: b.underlying_type.0,
                    len: b.length,
                    pos: b.position,
                },
                T::FieldList(l) => {
                    let mut members = Vec::new();
                    let mut values = Vec::new();
                    for f in &l.fields {
                        match f {
                            T::Member(m) => members.push((
                                m.name.to_string().into_owned(),
                                m.field_type.0,
                                m.offset,
                            )),
                            T::Enumerate(e) => {
                                values.push((e.name.to_string().into_owned(), variant(&e.value)))
                            }
                            _ => {}
                        }
                    }
                    Rec::Fields {
                        members,
                        values,
                        next: l.continuation.map(|c| c.0),
                    }
                }
                T::Procedure(p) => Rec::Proc {
                    ret: p.return_type.map(|r| r.0),
                    args: p.argument_list.0,
                },
                T::ArgumentList(a) => Rec::Args(a.arguments.iter().map(|i| i.0).collect()),
                _ => Rec::Other,
            };
            prims.extend(refs(&rec).into_iter().filter(|&i| i < 0x1000));
            match &rec {
                Rec::Sou {
                    union,
                    name,
                    forward: false,
                    ..
                } => {
                    self.tags
                        .entry((u8::from(*union), name.clone()))
                        .or_insert(index);
                }
                Rec::Enum {
                    name,
                    forward: false,
                    ..
                } => {
                    self.tags.entry((2, name.clone())).or_insert(index);
                }
                _ => {}
            }
            self.recs.insert(index, rec);
        }
        for i in prims {
            if self.recs.contains_key(&i) {
                continue;
            }
            if let Ok(T::Primitive(p)) = finder.find(pdb2::TypeIndex(i)).and_then(|t| t.parse()) {
                self.recs.insert(
                    i,
                    Rec::Prim {
                        base: base_of(p.kind),
                        pointer: p.indirection.is_some(),
                    },
                );
            }
        }
        Ok(())
    }

    /// Typedef names: the `S_UDT` symbols of the global stream and of every module.
    fn read_udts<'s, S: pdb2::Source<'s> + Send + 's>(
        &mut self,
        pdb: &mut pdb2::PDB<'s, S>,
    ) -> pdb2::Result<()> {
        let mut add = |s: pdb2::SymbolData<'_>| {
            if let pdb2::SymbolData::UserDefinedType(u) = s {
                self.typedefs
                    .entry(u.name.to_string().into_owned())
                    .or_insert(u.type_index.0);
            }
        };
        if let Ok(globals) = pdb.global_symbols() {
            let mut it = globals.iter();
            while let Ok(Some(s)) = it.next() {
                if let Ok(d) = s.parse() {
                    add(d);
                }
            }
        }
        let dbi = pdb.debug_information()?;
        let mut modules = dbi.modules()?;
        while let Some(m) = modules.next()? {
            let Ok(Some(info)) = pdb.module_info(&m) else {
                continue;
            };
            let Ok(mut syms) = info.symbols() else {
                continue;
            };
            while let Ok(Some(s)) = syms.next() {
                if let Ok(d) = s.parse() {
                    add(d);
                }
            }
        }
        Ok(())
    }

    /// Function prototypes by name: the IPI stream's `LF_FUNC_ID` records.
    fn read_function_ids<'s, S: pdb2::Source<'s> + Send + 's>(
        &mut self,
        pdb: &mut pdb2::PDB<'s, S>,
    ) -> pdb2::Result<()> {
        let ids = pdb.id_information()?;
        let mut it = ids.iter();
        while let Some(id) = it.next()? {
            if let Ok(pdb2::IdData::Function(f)) = id.parse() {
                self.functions
                    .entry(f.name.to_string().into_owned())
                    .or_insert(f.function_type.0);
            }
        }
        Ok(())
    }

    /// The index a name names: a typedef, then a tag (`struct X`, `union X`, `enum X`, or a
    /// bare tag).
    fn named(&self, name: &str) -> Option<u32> {
        let name = name.trim();
        for (kw, tag) in [("struct ", 0u8), ("union ", 1), ("enum ", 2)] {
            if let Some(rest) = name.strip_prefix(kw) {
                return self.tags.get(&(tag, rest.trim().to_string())).copied();
            }
        }
        self.typedefs
            .get(name)
            .or_else(|| (0..3).find_map(|t| self.tags.get(&(t, name.to_string()))))
            .copied()
    }

    /// Adds the type at `index` to `table` (memoized in `table.imported`).
    fn add(&self, index: u32, table: &mut TypeTable, depth: u32) -> TypeId {
        if let Some(&id) = table.imported.get(&self.key(index)) {
            return id;
        }
        if depth > MAX_DEPTH {
            return table.int;
        }
        let Some(rec) = self.recs.get(&index) else {
            return table.int;
        };
        let id = match rec {
            Rec::Prim { base, pointer } => {
                let b = match *base {
                    Base::Void => table.void,
                    Base::Int(name, size, signed, is_char) => table
                        .lookup(name)
                        .filter(|&t| table.size_of(t) == size)
                        .unwrap_or_else(|| {
                            table.add(TypeKind::Integer {
                                name: name.to_string(),
                                size,
                                signed,
                                is_char,
                            })
                        }),
                    Base::Float(name, size) => table.lookup(name).unwrap_or_else(|| {
                        table.add(TypeKind::Float {
                            name: name.to_string(),
                            size,
                        })
                    }),
                };
                if *pointer {
                    table.pointer_to(b)
                } else {
                    b
                }
            }
            Rec::Pointer(to) => {
                let t = self.add(*to, table, depth + 1);
                table.pointer_to(t)
            }
            Rec::Modifier {
                ty,
                constant,
                volatile,
            } => {
                let mut t = self.add(*ty, table, depth + 1);
                if *volatile {
                    t = table.add(TypeKind::Volatile(t));
                }
                if *constant {
                    t = table.add(TypeKind::Const(t));
                }
                t
            }
            Rec::Array { elem, bytes } => {
                let e = self.add(*elem, table, depth + 1);
                let size = table.size_of(e).max(1);
                table.array_of(e, bytes / size)
            }
            Rec::Sou {
                union,
                name,
                forward,
                ..
            } => {
                // a forward reference stands for the definition of that tag
                if let Some(&full) = forward
                    .then(|| self.tags.get(&(u8::from(*union), name.clone())))
                    .flatten()
                {
                    let id = self.add(full, table, depth + 1);
                    table.imported.insert(self.key(index), id);
                    return id;
                }
                return self.add_sou(index, rec, table, depth);
            }
            Rec::Enum {
                name,
                fields,
                forward,
                ..
            } => {
                if let Some(&full) = forward.then(|| self.tags.get(&(2, name.clone()))).flatten() {
                    let id = self.add(full, table, depth + 1);
                    table.imported.insert(self.key(index), id);
                    return id;
                }
                let mut values = Vec::new();
                self.field_lists(*fields, |_, v| values.extend(v.iter().cloned()));
                table.add(TypeKind::Enum {
                    name: Some(name.clone()),
                    values,
                    complete: !forward,
                })
            }
            Rec::Bitfield { ty, .. } => self.add(*ty, table, depth + 1),
            Rec::Proc { ret, args } => {
                let r = ret.map_or(table.void, |r| self.add(r, table, depth + 1));
                let params = self.params_of(*args, table, depth);
                table.add(TypeKind::Function {
                    ret: r,
                    params,
                    varargs: false,
                })
            }
            Rec::Fields { .. } | Rec::Args(_) | Rec::Other => table.int,
        };
        table.imported.insert(self.key(index), id);
        id
    }

    /// A structure or union: its shell first (a member may point back to it), then its
    /// members at the PDB's offsets.
    fn add_sou(&self, index: u32, rec: &Rec, table: &mut TypeTable, depth: u32) -> TypeId {
        let Rec::Sou {
            union,
            name,
            size,
            fields,
            forward,
        } = rec
        else {
            return table.int;
        };
        let name = (!name.is_empty() && !name.starts_with('<')).then(|| name.clone());
        let shell = if *union {
            TypeKind::Union {
                name: name.clone(),
                members: Vec::new(),
                size: *size,
                align: 1,
                complete: false,
            }
        } else {
            TypeKind::Struct {
                name: name.clone(),
                members: Vec::new(),
                size: *size,
                align: 1,
                complete: false,
            }
        };
        let id = table.add(shell);
        table.imported.insert(self.key(index), id);
        let mut raw = Vec::new();
        if let Some(f) = fields {
            self.field_lists(*f, |m, _| raw.extend(m.iter().cloned()));
        }
        let mut members = Vec::new();
        let mut align = 1;
        for (mname, ty, offset) in raw {
            let (bits, pos) = match self.recs.get(&ty) {
                Some(Rec::Bitfield { len, pos, .. }) => (Some(u32::from(*len)), u64::from(*pos)),
                _ => (None, 0),
            };
            let t = self.add(ty, table, depth + 1);
            align = align.max(table.align_of(t));
            members.push(Member {
                name: mname,
                ty: t,
                offset_bits: offset * 8 + pos,
                bits,
            });
        }
        let complete = !forward;
        match table.kind_mut(id) {
            TypeKind::Struct {
                members: m,
                align: a,
                complete: c,
                ..
            }
            | TypeKind::Union {
                members: m,
                align: a,
                complete: c,
                ..
            } => {
                *m = members;
                *a = align;
                *c = complete;
            }
            _ => {}
        }
        id
    }

    /// Calls `f` with the members and enumerators of the field list at `index` and of the
    /// lists it continues in.
    fn field_lists(
        &self,
        mut index: u32,
        mut f: impl FnMut(&[(String, u32, u64)], &[(String, i64)]),
    ) {
        for _ in 0..MAX_DEPTH * 16 {
            let Some(Rec::Fields {
                members,
                values,
                next,
            }) = self.recs.get(&index)
            else {
                return;
            };
            f(members, values);
            match next {
                Some(n) => index = *n,
                None => return,
            }
        }
    }

    fn params_of(&self, args: u32, table: &mut TypeTable, depth: u32) -> Vec<TypeId> {
        let Some(Rec::Args(list)) = self.recs.get(&args) else {
            return Vec::new();
        };
        let list = list.clone();
        list.into_iter()
            // a prototype `(void)` lists the void type
            .filter(|&a| {
                !matches!(
                    self.recs.get(&a),
                    Some(Rec::Prim {
                        base: Base::Void,
                        pointer: false
                    })
                )
            })
            .map(|a| self.add(a, table, depth + 1))
            .collect()
    }
}

/// The types of the PDB of the PE image at `image` (the PDB its debug directory names, with
/// the GUID and age it records) as the `source`th PDB of a process: found
/// on this machine only (beside the image, where it records, a store of the symbol path);
/// nothing is downloaded.
pub fn read_for_image(image: &Path, source: u64) -> Option<PdbTypes> {
    let data = std::fs::read(image).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let id = super::pdb::image_pdb_id(&file)?;
    let symbol_path = super::pdb::SymbolPath::from_env();
    let pdb = super::pdb::find_pdb(&id, Some(image), &symbol_path)?;
    PdbTypes::read(&pdb).ok().map(|t| t.with_source(source))
}

/// The type indexes a record refers to.
fn refs(r: &Rec) -> Vec<u32> {
    match r {
        Rec::Pointer(t) | Rec::Bitfield { ty: t, .. } => vec![*t],
        Rec::Modifier { ty, .. } => vec![*ty],
        Rec::Array { elem, .. } => vec![*elem],
        Rec::Enum { underlying, .. } => vec![*underlying],
        Rec::Fields { members, .. } => members.iter().map(|m| m.1).collect(),
        Rec::Proc { ret, .. } => ret.iter().copied().collect(),
        Rec::Args(a) => a.clone(),
        _ => Vec::new(),
    }
}

impl TargetTypes for PdbTypes {
    fn has(&self, name: &str) -> bool {
        self.named(name).is_some()
    }

    fn import(&self, name: &str, table: &mut TypeTable) -> Option<TypeId> {
        let index = self.named(name)?;
        let t = self.add(index, table, 0);
        // a typedef's name is kept, as CTF keeps it (print() and errors name the typedef)
        let bare = name.trim();
        // (clang also records a tag as an S_UDT of its own name: that is the tag, not a
        // typedef)
        let tag_itself = matches!(self.recs.get(&index),
            Some(Rec::Sou { name, .. } | Rec::Enum { name, .. }) if name == bare);
        if self.typedefs.get(bare) == Some(&index)
            && !matches!(self.recs.get(&index), Some(Rec::Prim { .. }))
            && !tag_itself
            && !bare.contains(' ')
        {
            let key = self.key(index | 0x8000_0000);
            if let Some(&id) = table.imported.get(&key) {
                return Some(id);
            }
            let id = table.add(TypeKind::Typedef {
                name: bare.to_string(),
                target: t,
            });
            table.imported.insert(key, id);
            return Some(id);
        }
        Some(t)
    }

    fn params(&self, _module: &str, func: &str, table: &mut TypeTable) -> Option<Vec<TypeId>> {
        let &proto = self.functions.get(func)?;
        let Some(Rec::Proc { args, .. }) = self.recs.get(&proto) else {
            return None;
        };
        Some(self.params_of(*args, table, 0))
    }

    fn returns(&self, _module: &str, func: &str, table: &mut TypeTable) -> Option<TypeId> {
        let &proto = self.functions.get(func)?;
        let Some(Rec::Proc { ret: Some(ret), .. }) = self.recs.get(&proto) else {
            return None;
        };
        let ret = *ret;
        let t = self.add(ret, table, 0);
        (!table.is_void(t)).then_some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::types::DataModel;

    /// The test program with the kinds of types a target's PDB has.
    const TYPES_PROGRAM: &str = include_str!("../../tests/pid_windows/shapes.c");

    #[test]
    fn the_tpi_reader_gives_the_programs_types() {
        let Some((_dir, _exe, pdb)) =
            crate::symbols::pdb::tests::clang_program("shapes", TYPES_PROGRAM)
        else {
            return;
        };
        let types = PdbTypes::read(&pdb).unwrap();
        let mut t = TypeTable::new(DataModel::Lp64);
        assert!(types.has("SHAPE") && types.has("struct _SHAPE") && types.has("_SHAPE"));
        assert!(!types.has("NO_SUCH_TYPE"));
        let shape = types.import("SHAPE", &mut t).unwrap();
        assert_eq!(t.name(shape), "SHAPE");
        let s = t.resolve(shape);
        assert_eq!(t.name(s), "struct _SHAPE");
        let members = t.members(s).unwrap().to_vec();
        let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            ["id", "count", "inner", "next", "num", "colour", "flag", "kind", "rest", "name"]
        );
        let m = |n: &str| members.iter().find(|m| m.name == n).unwrap().clone();
        // Windows' long is 4 bytes
        assert_eq!(t.size_of(m("count").ty), 4);
        assert_eq!(t.name(m("count").ty), "long");
        assert_eq!(m("inner").offset_bits, 64);
        // CodeView members name the struct, not the typedef
        assert_eq!(t.name(m("inner").ty), "struct _INNER");
        // the pointer to itself is the same struct
        let next = m("next").ty;
        assert_eq!(t.referent(next).map(|r| t.resolve(r)), Some(s));
        assert!(matches!(t.rkind(m("num").ty), TypeKind::Union { .. }));
        match t.rkind(m("colour").ty) {
            TypeKind::Enum { values, .. } => assert_eq!(
                values,
                &[
                    ("RED".to_string(), 1),
                    ("GREEN".to_string(), 2),
                    ("BLUE".to_string(), 40)
                ]
            ),
            other => panic!("{other:?}"),
        }
        // the bit-fields share one unsigned int: positions 0, 1 and 4
        let (flag, kind, rest) = (m("flag"), m("kind"), m("rest"));
        assert_eq!(
            (flag.bits, kind.bits, rest.bits),
            (Some(1), Some(3), Some(28))
        );
        assert_eq!(kind.offset_bits, flag.offset_bits + 1);
        assert_eq!(rest.offset_bits, flag.offset_bits + 4);
        assert!(matches!(
            t.rkind(m("name").ty),
            TypeKind::Array { len: 8, .. }
        ));
        assert_eq!(t.size_of(s), 48);
        // a second import is the same type
        assert_eq!(types.import("struct _SHAPE", &mut t), Some(s));
        // the prototype of area(SHAPE *, int)
        let params = types.params("", "area", &mut t).unwrap();
        assert_eq!(params.len(), 2);
        assert_eq!(t.referent(params[0]).map(|r| t.resolve(r)), Some(s));
        assert_eq!(t.name(params[1]), "int");
        // what they return: int, an enum, a pointer to the struct
        let r = types.returns("", "area", &mut t).unwrap();
        assert_eq!(t.name(r), "int");
        let r = types.returns("", "colour_of", &mut t).unwrap();
        assert!(matches!(t.rkind(r), TypeKind::Enum { .. }), "{}", t.name(r));
        let r = types.returns("", "self_of", &mut t).unwrap();
        assert_eq!(t.referent(r).map(|r| t.resolve(r)), Some(s));
        assert_eq!(types.returns("", "no_such_function", &mut t), None);
    }
}
