//! The D type system with CTF semantics: integers sized by the data model, pointers, arrays,
//! structs/unions with bitfields, enums, functions, typedef chains and D's `string`.
//!
//! Types live in one arena ([`TypeTable`]) and are named by [`TypeId`]. Names are looked up
//! through typedefs and tags; scoped names (``mod`name``) resolve by their unscoped part, since
//! dtx has one type container.

use std::collections::HashMap;

pub type TypeId = u32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataModel {
    Lp64,
    Ilp32,
}

impl DataModel {
    pub fn pointer_size(self) -> u64 {
        match self {
            DataModel::Lp64 => 8,
            DataModel::Ilp32 => 4,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub name: String,
    pub ty: TypeId,
    pub offset_bits: u64,
    /// Bit width for bitfields.
    pub bits: Option<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SouTag {
    Struct,
    Union,
    Enum,
}

impl SouTag {
    /// The keyword that introduces the tag.
    pub fn keyword(self) -> &'static str {
        match self {
            SouTag::Struct => "struct",
            SouTag::Union => "union",
            SouTag::Enum => "enum",
        }
    }
}

/// Names and tags of one scope of types.
#[derive(Clone, Debug, Default)]
struct Scope {
    names: HashMap<String, TypeId>,
    tags: HashMap<(SouTag, String), TypeId>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TypeKind {
    Void,
    Integer {
        name: String,
        size: u64,
        signed: bool,
        is_char: bool,
    },
    Float {
        name: String,
        size: u64,
    },
    Pointer(TypeId),
    Array {
        elem: TypeId,
        len: u64,
    },
    Function {
        ret: TypeId,
        params: Vec<TypeId>,
        varargs: bool,
    },
    Struct {
        name: Option<String>,
        members: Vec<Member>,
        size: u64,
        align: u64,
        complete: bool,
    },
    Union {
        name: Option<String>,
        members: Vec<Member>,
        size: u64,
        align: u64,
        complete: bool,
    },
    Enum {
        name: Option<String>,
        values: Vec<(String, i64)>,
        complete: bool,
    },
    Typedef {
        name: String,
        target: TypeId,
    },
    /// D's `string` type (a char array of `strsize` bytes by value).
    String,
    Const(TypeId),
    Volatile(TypeId),
    /// The type of `stack()`/`ustack()` results and other opaque D values.
    Opaque(&'static str),
}

#[derive(Clone, Debug)]
pub struct TypeTable {
    types: Vec<TypeKind>,
    names: HashMap<String, TypeId>,
    tags: HashMap<(SouTag, String), TypeId>,
    pointers: HashMap<TypeId, TypeId>,
    /// The type library's names and tags (`dscripts/lib`: Windows' `GUID`, `UNICODE_STRING`,
    /// `NTSTATUS`, ...), a scope below the program's own, as the kernel's types are below
    /// D's in dtrace (libdtrace searches the D container, then C, then the modules): a
    /// program that declares the same name or tag shadows them, and a scoped name
    /// (``nt`_GUID``) still finds the library's.
    library: Scope,
    /// The ids of the types `windows.d` declares: Windows' kernel types, which dtrace finds in
    /// a kernel module's CTF rather than in D's own containers (their stability is
    /// `Private/Private/Unknown`, `_dtrace_typattr`).
    kernel: std::ops::Range<TypeId>,
    /// Other types that stand for the kernel's (base.d's `struct thread`, for `kthread_t`).
    kernel_more: Vec<TypeId>,
    /// The types imported from the target's debug information (`lang::target_types`), by
    /// their key there (which PDB, and the record's index in it): each is added once, so
    /// that two names of one type are one type.
    pub imported: HashMap<u64, TypeId>,
    pub model: DataModel,
    pub void: TypeId,
    pub int: TypeId,
    pub uint: TypeId,
    pub long: TypeId,
    pub ulong: TypeId,
    pub longlong: TypeId,
    pub ulonglong: TypeId,
    pub char: TypeId,
    pub string: TypeId,
    pub int64: TypeId,
    pub uint64: TypeId,
    pub void_ptr: TypeId,
    pub char_ptr: TypeId,
    pub stack: TypeId,
    pub symaddr: TypeId,
    pub usymaddr: TypeId,
}

impl TypeTable {
    pub fn new(model: DataModel) -> Self {
        let mut t = TypeTable {
            types: Vec::new(),
            names: HashMap::new(),
            tags: HashMap::new(),
            pointers: HashMap::new(),
            library: Scope::default(),
            kernel: 0..0,
            kernel_more: Vec::new(),
            imported: HashMap::new(),
            model,
            void: 0,
            int: 0,
            uint: 0,
            long: 0,
            ulong: 0,
            longlong: 0,
            ulonglong: 0,
            char: 0,
            string: 0,
            int64: 0,
            uint64: 0,
            void_ptr: 0,
            char_ptr: 0,
            stack: 0,
            symaddr: 0,
            usymaddr: 0,
        };
        t.void = t.add_named("void", TypeKind::Void);
        let lsize = model.pointer_size();
        let ints: [(&str, u64, bool, bool); 13] = [
            ("char", 1, true, true),
            ("signed char", 1, true, true),
            ("unsigned char", 1, false, true),
            ("short", 2, true, false),
            ("unsigned short", 2, false, false),
            ("int", 4, true, false),
            ("unsigned int", 4, false, false),
            ("long", lsize, true, false),
            ("unsigned long", lsize, false, false),
            ("long long", 8, true, false),
            ("unsigned long long", 8, false, false),
            ("_Bool", 1, false, false),
            ("wchar_t", 2, false, false),
        ];
        for (name, size, signed, is_char) in ints {
            t.add_named(
                name,
                TypeKind::Integer {
                    name: name.to_string(),
                    size,
                    signed,
                    is_char,
                },
            );
        }
        for (alias, target) in [
            ("signed", "int"),
            ("unsigned", "unsigned int"),
            ("signed int", "int"),
            ("signed short", "short"),
            ("signed long", "long"),
            ("signed long long", "long long"),
            ("short int", "short"),
            ("long int", "long"),
            ("long long int", "long long"),
        ] {
            let id = t.names[target];
            t.names.insert(alias.to_string(), id);
        }
        for (name, size) in [("float", 4), ("double", 8), ("long double", 16)] {
            t.add_named(
                name,
                TypeKind::Float {
                    name: name.to_string(),
                    size,
                },
            );
        }
        t.char = t.names["char"];
        t.int = t.names["int"];
        t.uint = t.names["unsigned int"];
        t.long = t.names["long"];
        t.ulong = t.names["unsigned long"];
        t.longlong = t.names["long long"];
        t.ulonglong = t.names["unsigned long long"];
        t.string = t.add_named("string", TypeKind::String);
        t.void_ptr = t.pointer_to(t.void);
        t.char_ptr = t.pointer_to(t.char);
        t.stack = t.add(TypeKind::Opaque("stack"));
        t.symaddr = t.add(TypeKind::Opaque("_symaddr"));
        t.usymaddr = t.add(TypeKind::Opaque("_usymaddr"));
        // D's intrinsic typedefs
        let (ll, ull, l, ul) = (t.longlong, t.ulonglong, t.long, t.ulong);
        let (i, ui) = (t.int, t.uint);
        let (s, us) = (t.names["short"], t.names["unsigned short"]);
        let (sc, uc) = (t.names["signed char"], t.names["unsigned char"]);
        for (name, target) in [
            ("int8_t", sc),
            ("int16_t", s),
            ("int32_t", i),
            ("int64_t", ll),
            ("uint8_t", uc),
            ("uint16_t", us),
            ("uint32_t", ui),
            ("uint64_t", ull),
            ("intptr_t", l),
            ("uintptr_t", ul),
        ] {
            t.add_typedef(name, target);
        }
        t.int64 = t.names["int64_t"];
        t.uint64 = t.names["uint64_t"];
        t
    }

    pub fn add(&mut self, k: TypeKind) -> TypeId {
        self.types.push(k);
        (self.types.len() - 1) as TypeId
    }

    fn add_named(&mut self, name: &str, k: TypeKind) -> TypeId {
        let id = self.add(k);
        self.names.insert(name.to_string(), id);
        id
    }

    pub fn add_typedef(&mut self, name: &str, target: TypeId) -> TypeId {
        self.add_named(
            name,
            TypeKind::Typedef {
                name: name.to_string(),
                target,
            },
        )
    }

    pub fn kind(&self, id: TypeId) -> &TypeKind {
        &self.types[id as usize]
    }

    pub fn kind_mut(&mut self, id: TypeId) -> &mut TypeKind {
        &mut self.types[id as usize]
    }

    /// Looks a type up by name: base names, typedefs, and `struct x`/`union x`/`enum x`.
    pub fn lookup(&self, name: &str) -> Option<TypeId> {
        let name = name.trim();
        let name = match name.rfind('`') {
            Some(i) => {
                // `pidN`type` names the types of process N, a bare `pid`type` those of the
                // process the probe fires in (the Windows port's `(userland pid`T *)arg0`): a
                // malformed pid names nothing
                let scope = name[..i].rsplit('`').next().unwrap_or("");
                if let Some(n) = scope.strip_prefix("pid").filter(|n| !n.is_empty()) {
                    if n.parse::<u32>().map_or(true, |p| p == 0) {
                        return None;
                    }
                }
                return self.lookup_scoped(&name[i + 1..]);
            }
            None => name,
        };
        if let Some(rest) = name.strip_prefix("struct ") {
            return self.tag(SouTag::Struct, rest.trim());
        }
        if let Some(rest) = name.strip_prefix("union ") {
            return self.tag(SouTag::Union, rest.trim());
        }
        if let Some(rest) = name.strip_prefix("enum ") {
            return self.tag(SouTag::Enum, rest.trim());
        }
        self.names.get(name).copied()
    }

    /// A name after a module scope (``nt`X``, ``etw`X``): the library's declaration first
    /// (a program's own may shadow the bare name), then the program's; and, as Microsoft's
    /// scripts write kernel types, a bare tag (``nt`_GUID``, ``nt`_OBJECT_ATTRIBUTES``)
    /// names `struct X` (or `union X`) when no typedef `X` exists.
    fn lookup_scoped(&self, name: &str) -> Option<TypeId> {
        let name = name.trim();
        for (kw, tag) in [
            ("struct ", SouTag::Struct),
            ("union ", SouTag::Union),
            ("enum ", SouTag::Enum),
        ] {
            if let Some(rest) = name.strip_prefix(kw) {
                let key = (tag, rest.trim().to_string());
                return self
                    .library
                    .tags
                    .get(&key)
                    .or_else(|| self.tags.get(&key))
                    .copied();
            }
        }
        self.library
            .names
            .get(name)
            .or_else(|| self.names.get(name))
            .copied()
            .or_else(|| self.tag(SouTag::Struct, name))
            .or_else(|| self.tag(SouTag::Union, name))
    }

    /// Marks every name and tag declared since `before` was taken as the library's: a
    /// program's declarations shadow them (see the `library` field).
    pub fn seal_library(&mut self, before: &TypeTable) {
        for (n, id) in &self.names {
            if before.names.get(n) != Some(id) {
                self.library.names.insert(n.clone(), *id);
            }
        }
        for (k, id) in &self.tags {
            if before.tags.get(k) != Some(id) {
                self.library.tags.insert(k.clone(), *id);
            }
        }
    }

    /// The id the next type added gets.
    pub fn next_id(&self) -> TypeId {
        self.types.len() as TypeId
    }

    /// Marks the types added from `start` on as the kernel's (see the `kernel` field).
    pub fn mark_kernel_since(&mut self, start: TypeId) {
        self.kernel = start..self.next_id();
    }

    /// Marks one more type as the kernel's.
    pub fn mark_kernel(&mut self, id: TypeId) {
        self.kernel_more.push(id);
    }

    /// Whether `id` is one of the kernel's types (not a program's or D's own).
    pub fn is_kernel_type(&self, id: TypeId) -> bool {
        self.kernel.contains(&id) || self.kernel_more.contains(&id)
    }

    /// Whether `name` is still the library's typedef (no program declaration shadows it).
    pub fn is_library_name(&self, name: &str) -> bool {
        self.names
            .get(name)
            .is_some_and(|id| self.library.names.get(name) == Some(id))
    }

    /// Whether the tag is still the library's (no program declaration shadows it).
    pub fn is_library_tag(&self, tag: SouTag, name: &str) -> bool {
        let key = (tag, name.to_string());
        self.tags
            .get(&key)
            .is_some_and(|id| self.library.tags.get(&key) == Some(id))
    }

    /// The library's tags as the parser names them (`struct _GUID`): the ones a program may
    /// declare again.
    pub fn library_tag_names(&self) -> Vec<String> {
        self.library
            .tags
            .keys()
            .map(|(tag, name)| format!("{} {name}", tag.keyword()))
            .collect()
    }

    pub fn is_typedef_name(&self, name: &str) -> bool {
        self.names.contains_key(name)
    }

    pub fn type_names(&self) -> impl Iterator<Item = &String> {
        self.names.keys()
    }

    /// `struct x` / `union x` / `enum x` for every complete tagged type.
    pub fn defined_tags(&self) -> Vec<String> {
        self.tags
            .iter()
            .filter(|(_, id)| self.is_complete(**id))
            .map(|((tag, name), _)| format!("{} {name}", tag.keyword()))
            .collect()
    }

    pub fn tag(&self, tag: SouTag, name: &str) -> Option<TypeId> {
        self.tags.get(&(tag, name.to_string())).copied()
    }

    pub fn set_tag(&mut self, tag: SouTag, name: &str, id: TypeId) {
        self.tags.insert((tag, name.to_string()), id);
    }

    pub fn pointer_to(&mut self, t: TypeId) -> TypeId {
        if let Some(&p) = self.pointers.get(&t) {
            return p;
        }
        let p = self.add(TypeKind::Pointer(t));
        self.pointers.insert(t, p);
        p
    }

    pub fn array_of(&mut self, elem: TypeId, len: u64) -> TypeId {
        self.add(TypeKind::Array { elem, len })
    }

    /// Strips typedefs and qualifiers.
    pub fn resolve(&self, mut id: TypeId) -> TypeId {
        for _ in 0..64 {
            match self.kind(id) {
                TypeKind::Typedef { target, .. } => id = *target,
                TypeKind::Const(t) | TypeKind::Volatile(t) => id = *t,
                _ => return id,
            }
        }
        id
    }

    pub fn rkind(&self, id: TypeId) -> &TypeKind {
        self.kind(self.resolve(id))
    }

    pub fn is_const(&self, mut id: TypeId) -> bool {
        for _ in 0..64 {
            match self.kind(id) {
                TypeKind::Const(_) => return true,
                TypeKind::Typedef { target, .. } | TypeKind::Volatile(target) => id = *target,
                _ => return false,
            }
        }
        false
    }

    pub fn is_integer(&self, id: TypeId) -> bool {
        matches!(
            self.rkind(id),
            TypeKind::Integer { .. } | TypeKind::Enum { .. }
        )
    }

    pub fn is_float(&self, id: TypeId) -> bool {
        matches!(self.rkind(id), TypeKind::Float { .. })
    }

    pub fn is_arith(&self, id: TypeId) -> bool {
        self.is_integer(id) || self.is_float(id)
    }

    pub fn is_pointer(&self, id: TypeId) -> bool {
        matches!(self.rkind(id), TypeKind::Pointer(_))
    }

    pub fn is_scalar(&self, id: TypeId) -> bool {
        self.is_arith(id) || self.is_pointer(id)
    }

    pub fn is_string(&self, id: TypeId) -> bool {
        matches!(self.rkind(id), TypeKind::String)
    }

    pub fn is_void(&self, id: TypeId) -> bool {
        matches!(self.rkind(id), TypeKind::Void)
    }

    pub fn is_sou(&self, id: TypeId) -> bool {
        matches!(
            self.rkind(id),
            TypeKind::Struct { .. } | TypeKind::Union { .. }
        )
    }

    pub fn is_array(&self, id: TypeId) -> bool {
        matches!(self.rkind(id), TypeKind::Array { .. })
    }

    pub fn is_function(&self, id: TypeId) -> bool {
        matches!(self.rkind(id), TypeKind::Function { .. })
    }

    pub fn is_signed(&self, id: TypeId) -> bool {
        match self.rkind(id) {
            TypeKind::Integer { signed, .. } => *signed,
            TypeKind::Enum { .. } => true,
            _ => false,
        }
    }

    /// The pointed-to type of a pointer, or the element type of an array.
    pub fn referent(&self, id: TypeId) -> Option<TypeId> {
        match self.rkind(id) {
            TypeKind::Pointer(t) => Some(*t),
            TypeKind::Array { elem, .. } => Some(*elem),
            _ => None,
        }
    }

    pub fn is_char_like(&self, id: TypeId) -> bool {
        matches!(self.rkind(id), TypeKind::Integer { is_char: true, .. })
    }

    /// Whether a pointer/array refers to characters (so it can act as a string).
    pub fn is_char_ptr_or_array(&self, id: TypeId) -> bool {
        self.referent(id).is_some_and(|r| self.is_char_like(r))
    }

    pub fn size_of(&self, id: TypeId) -> u64 {
        match self.rkind(id) {
            TypeKind::Void => 0,
            TypeKind::Integer { size, .. } | TypeKind::Float { size, .. } => *size,
            TypeKind::Pointer(_) => self.model.pointer_size(),
            TypeKind::Array { elem, len } => self.size_of(*elem).saturating_mul(*len),
            TypeKind::Function { .. } => 0,
            TypeKind::Struct { size, .. } | TypeKind::Union { size, .. } => *size,
            TypeKind::Enum { .. } => 4,
            TypeKind::String => 256,
            TypeKind::Opaque(_) => 8,
            TypeKind::Typedef { .. } | TypeKind::Const(_) | TypeKind::Volatile(_) => 0,
        }
    }

    pub fn align_of(&self, id: TypeId) -> u64 {
        match self.rkind(id) {
            TypeKind::Array { elem, .. } => self.align_of(*elem),
            TypeKind::Struct { align, .. } | TypeKind::Union { align, .. } => (*align).max(1),
            TypeKind::String => 1,
            _ => self.size_of(id).clamp(1, 8),
        }
    }

    pub fn is_complete(&self, id: TypeId) -> bool {
        match self.rkind(id) {
            TypeKind::Struct { complete, .. }
            | TypeKind::Union { complete, .. }
            | TypeKind::Enum { complete, .. } => *complete,
            _ => true,
        }
    }

    pub fn members(&self, id: TypeId) -> Option<&[Member]> {
        match self.rkind(id) {
            TypeKind::Struct { members, .. } | TypeKind::Union { members, .. } => Some(members),
            _ => None,
        }
    }

    pub fn member(&self, id: TypeId, name: &str) -> Option<&Member> {
        self.members(id)?.iter().find(|m| m.name == name)
    }

    /// Lays out members (C rules: natural alignment, bitfields packed into their base unit).
    pub fn layout(&self, members: &mut [Member], union: bool) -> (u64, u64) {
        // The rule of CTF's struct builder, which D declarations go through: each member starts
        // at the end of the previous one (its bit width for integers), rounded up to a byte and
        // then to the member's alignment; a bit-field is an integer of just enough bytes for its
        // width (rounded up to a power of two, libctf's `clp2()` in `ctf_add_integer()`), aligned
        // to that size. The struct's size is the end of its last member (not the furthest end).
        let mut size: u64 = 0;
        let mut align: u64 = 1;
        let mut prev_end_bits: Option<u64> = None;
        for m in members.iter_mut() {
            let (msize, malign, mbits) = match m.bits {
                Some(w) => {
                    let bytes = (w as u64).div_ceil(8).max(1).next_power_of_two();
                    (bytes, bytes, w as u64)
                }
                None => {
                    let sz = self.size_of(m.ty);
                    let bits = match self.rkind(m.ty) {
                        TypeKind::Integer { size, .. } => size * 8,
                        _ => sz * 8,
                    };
                    (sz, self.align_of(m.ty), bits)
                }
            };
            align = align.max(malign);
            if union {
                m.offset_bits = 0;
                size = size.max(msize);
                continue;
            }
            let off = match prev_end_bits {
                None => 0,
                Some(end) => end.div_ceil(8).div_ceil(malign.max(1)) * malign.max(1),
            };
            m.offset_bits = off * 8;
            prev_end_bits = Some(off * 8 + mbits);
            // CTF takes the size from the last member's end (a wide bit-field before a narrow
            // last one can reach further)
            size = off + msize;
        }
        (size, align)
    }

    /// The type's name as dtrace prints it (`int`, `char *`, `struct foo`, `int [4]`).
    pub fn name(&self, id: TypeId) -> String {
        let (base, decl) = self.name_parts(id, String::new());
        if decl.is_empty() {
            base
        } else {
            format!("{base} {decl}")
        }
    }

    fn name_parts(&self, id: TypeId, inner: String) -> (String, String) {
        match self.kind(id) {
            TypeKind::Void => ("void".into(), inner),
            TypeKind::Integer { name, .. } | TypeKind::Float { name, .. } => (name.clone(), inner),
            TypeKind::Typedef { name, .. } => (name.clone(), inner),
            TypeKind::String => ("string".into(), inner),
            TypeKind::Opaque(n) => (n.to_string(), inner),
            TypeKind::Struct { name, .. } => (
                name.as_deref()
                    .map(|n| format!("struct {n}"))
                    .unwrap_or_else(|| "struct".into()),
                inner,
            ),
            TypeKind::Union { name, .. } => (
                name.as_deref()
                    .map(|n| format!("union {n}"))
                    .unwrap_or_else(|| "union".into()),
                inner,
            ),
            TypeKind::Enum { name, .. } => (
                name.as_deref()
                    .map(|n| format!("enum {n}"))
                    .unwrap_or_else(|| "enum".into()),
                inner,
            ),
            TypeKind::Const(t) => {
                let (b, d) = self.name_parts(*t, inner);
                if d.is_empty() || !matches!(self.kind(*t), TypeKind::Pointer(_)) {
                    (format!("const {b}"), d)
                } else {
                    (b, format!("{d} const"))
                }
            }
            TypeKind::Volatile(t) => {
                let (b, d) = self.name_parts(*t, inner);
                (format!("volatile {b}"), d)
            }
            TypeKind::Pointer(t) => {
                let inner = format!("*{inner}");
                match self.rkind(*t) {
                    TypeKind::Array { .. } | TypeKind::Function { .. }
                        if !matches!(self.kind(*t), TypeKind::Typedef { .. }) =>
                    {
                        self.name_parts(*t, format!("({inner})"))
                    }
                    _ => self.name_parts(*t, inner),
                }
            }
            TypeKind::Array { elem, len } => self.name_parts(*elem, format!("{inner}[{len}]")),
            TypeKind::Function {
                ret,
                params,
                varargs,
            } => {
                let mut ps: Vec<String> = params.iter().map(|p| self.name(*p)).collect();
                if *varargs {
                    ps.push("...".into());
                }
                // CTF names a function without listed parameters `()`
                self.name_parts(*ret, format!("{inner}({})", ps.join(", ")))
            }
        }
    }

    /// Integer rank for the usual arithmetic conversions.
    fn rank(&self, id: TypeId) -> (u64, bool) {
        match self.rkind(id) {
            TypeKind::Integer { size, signed, .. } => (*size, *signed),
            TypeKind::Enum { .. } => (4, true),
            _ => (8, false),
        }
    }

    /// The type of a binary arithmetic result, as libdtrace's `dt_type_promote` (dt_parser.c)
    /// computes it: no integer promotion (an enum counts as `int`); the operand of the higher
    /// rank wins, a rank being the width in bits plus one when unsigned. So `unsigned char`
    /// plus `unsigned char` is `unsigned char`, and `int` plus `unsigned int` is `unsigned int`.
    pub fn arith_result(&self, a: TypeId, b: TypeId) -> TypeId {
        let as_int = |t: TypeId| {
            if matches!(self.rkind(t), TypeKind::Enum { .. }) {
                self.int
            } else {
                t
            }
        };
        let (a, b) = (as_int(a), as_int(b));
        let rank = |t: TypeId| {
            let (size, signed) = self.rank(t);
            size * 8 + u64::from(!signed)
        };
        if rank(b) > rank(a) {
            b
        } else {
            a
        }
    }

    /// Integer promotion: types narrower than int become int.
    pub fn promote(&self, id: TypeId) -> TypeId {
        let (size, _) = self.rank(id);
        if size < 4 || matches!(self.rkind(id), TypeKind::Enum { .. }) {
            self.int
        } else {
            id
        }
    }

    /// Type compatibility as dtrace applies it for assignment and comparisons.
    pub fn compatible(&self, a: TypeId, b: TypeId) -> bool {
        let (ra, rb) = (self.resolve(a), self.resolve(b));
        if ra == rb {
            return true;
        }
        match (self.kind(ra), self.kind(rb)) {
            (TypeKind::Integer { .. } | TypeKind::Enum { .. }, TypeKind::Integer { .. })
            | (TypeKind::Integer { .. }, TypeKind::Enum { .. }) => true,
            (TypeKind::Float { .. }, TypeKind::Float { .. }) => true,
            (TypeKind::Pointer(x), TypeKind::Pointer(y)) => {
                self.is_void(*x) || self.is_void(*y) || self.compatible(*x, *y)
            }
            (TypeKind::Array { elem: x, .. }, TypeKind::Array { elem: y, .. }) => {
                self.compatible(*x, *y)
            }
            (TypeKind::String, TypeKind::String) => true,
            (
                TypeKind::Struct {
                    name: Some(x),
                    members: m1,
                    ..
                },
                TypeKind::Struct {
                    name: Some(y),
                    members: m2,
                    ..
                },
            )
            | (
                TypeKind::Union {
                    name: Some(x),
                    members: m1,
                    ..
                },
                TypeKind::Union {
                    name: Some(y),
                    members: m2,
                    ..
                },
            ) => x == y && m1.len() == m2.len(),
            (TypeKind::Enum { name: x, .. }, TypeKind::Enum { name: y, .. }) => x == y,
            (TypeKind::Function { .. }, TypeKind::Function { .. }) => true,
            (TypeKind::Opaque(x), TypeKind::Opaque(y)) => x == y,
            _ => false,
        }
    }

    /// Finds the first integer type among `candidates` (by name) that can hold `value`.
    pub fn int_type_for(
        &self,
        value: u64,
        unsigned_ok: bool,
        min_longs: u8,
        unsigned: bool,
    ) -> TypeId {
        let lsize = self.model.pointer_size();
        let order: [(TypeId, u64, bool, u8); 6] = [
            (self.int, 4, true, 0),
            (self.uint, 4, false, 0),
            (self.long, lsize, true, 1),
            (self.ulong, lsize, false, 1),
            (self.longlong, 8, true, 2),
            (self.ulonglong, 8, false, 2),
        ];
        for (id, size, signed, longs) in order {
            if longs < min_longs {
                continue;
            }
            if unsigned && signed {
                continue;
            }
            if !signed && !unsigned && !unsigned_ok {
                continue;
            }
            let max = if size >= 8 {
                if signed {
                    i64::MAX as u64
                } else {
                    u64::MAX
                }
            } else if signed {
                (1u64 << (size * 8 - 1)) - 1
            } else {
                (1u64 << (size * 8)) - 1
            };
            if value <= max {
                return id;
            }
        }
        self.ulonglong
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_data_model() {
        let t = TypeTable::new(DataModel::Lp64);
        assert_eq!(t.size_of(t.long), 8);
        assert_eq!(t.size_of(t.void_ptr), 8);
        let t = TypeTable::new(DataModel::Ilp32);
        assert_eq!(t.size_of(t.long), 4);
        assert_eq!(t.size_of(t.void_ptr), 4);
        assert_eq!(t.size_of(t.lookup("uint64_t").unwrap()), 8);
    }

    #[test]
    fn struct_layout_and_bitfields() {
        let mut t = TypeTable::new(DataModel::Lp64);
        let c = t.char;
        let i = t.int;
        let mut ms = vec![
            Member {
                name: "a".into(),
                ty: c,
                offset_bits: 0,
                bits: None,
            },
            Member {
                name: "b".into(),
                ty: i,
                offset_bits: 0,
                bits: None,
            },
            Member {
                name: "c".into(),
                ty: i,
                offset_bits: 0,
                bits: Some(3),
            },
            Member {
                name: "d".into(),
                ty: i,
                offset_bits: 0,
                bits: Some(30),
            },
        ];
        let (size, align) = t.layout(&mut ms, false);
        assert_eq!(ms[1].offset_bits, 32);
        assert_eq!(ms[2].offset_bits, 64);
        assert_eq!(ms[3].offset_bits, 96);
        assert_eq!((size, align), (16, 4));
        let p = t.pointer_to(c);
        assert_eq!(t.name(p), "char *");
        let a = t.array_of(i, 4);
        assert_eq!(t.name(a), "int [4]");
    }

    #[test]
    fn arithmetic_conversions() {
        let t = TypeTable::new(DataModel::Lp64);
        assert_eq!(t.arith_result(t.char, t.char), t.char);
        assert_eq!(t.arith_result(t.char, t.int), t.int);
        assert_eq!(t.arith_result(t.int, t.uint), t.uint);
        assert_eq!(t.arith_result(t.int, t.long), t.long);
        assert_eq!(t.int_type_for(5, true, 0, false), t.int);
        assert_eq!(t.int_type_for(0xffff_ffff, true, 0, false), t.uint);
        assert_eq!(t.int_type_for(0xffff_ffff, false, 0, false), t.long);
    }
}
