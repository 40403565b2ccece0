//! The type of a `print()` argument as the printer needs it: resolved at compile time (typedefs
//! replaced by what they name, keeping the name to display) and carried in the IR's `print`
//! action. Printing data of such a type is `crate::output::print`.

/// A type as `print()` needs it.  Each variant carries the name dtrace
/// would display (`ctf_type_name`), e.g. `"int"`, `"foo_t"`,
/// `"struct foo"`, `"char [30]"`, `"void *"`, `"int (*)()"`.
#[derive(Clone, Debug, PartialEq)]
pub enum PType {
    /// Integer of `size` bytes that is not a signed 8-bit char.
    Int {
        name: String,
        size: u8,
        signed: bool,
    },
    /// Signed 8-bit `char` (printed as a character; arrays of it may be
    /// strings).
    Char { name: String },
    /// Floating point of `size` bytes.
    Float { name: String, size: u8 },
    /// Pointer of `size` bytes.  `to_function` pointers are shown as
    /// `module`symbol` when the resolver passed to [`print_value_with`]
    /// knows the address.
    Ptr {
        name: String,
        size: u8,
        to_function: bool,
    },
    Array {
        name: String,
        elem: Box<PType>,
        len: u64,
    },
    /// `size` is the total size in bytes (used for arrays of structs).
    Struct {
        name: String,
        size: u64,
        members: Vec<Member>,
    },
    Union {
        name: String,
        size: u64,
        members: Vec<Member>,
    },
    /// Enum of `size` bytes with its enumerators (first match wins).
    Enum {
        name: String,
        size: u8,
        values: Vec<(String, i64)>,
    },
    /// A forward declaration (incomplete struct/union).
    Forward { name: String },
}

/// One struct/union member.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub name: String,
    /// Offset from the start of the enclosing struct, in bits.
    pub bit_offset: u64,
    /// Width for a bit-field (the integer encoding's bit count), `None`
    /// for an ordinary member.
    pub bits: Option<u8>,
    pub ty: PType,
}

impl Member {
    pub fn new(name: &str, bit_offset: u64, ty: PType) -> Self {
        Member {
            name: name.to_string(),
            bit_offset,
            bits: None,
            ty,
        }
    }

    pub fn bitfield(name: &str, bit_offset: u64, bits: u8, ty: PType) -> Self {
        Member {
            name: name.to_string(),
            bit_offset,
            bits: Some(bits),
            ty,
        }
    }
}

impl PType {
    /// D's `string` type of `strsize` bytes (a `char` array named
    /// `string`).
    pub fn string(strsize: u64) -> PType {
        PType::Array {
            name: "string".to_string(),
            elem: Box::new(PType::Char {
                name: "char".to_string(),
            }),
            len: strsize,
        }
    }

    /// The displayed type name.
    pub fn name(&self) -> &str {
        match self {
            PType::Int { name, .. }
            | PType::Char { name }
            | PType::Float { name, .. }
            | PType::Ptr { name, .. }
            | PType::Array { name, .. }
            | PType::Struct { name, .. }
            | PType::Union { name, .. }
            | PType::Enum { name, .. }
            | PType::Forward { name } => name,
        }
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        match self {
            PType::Int { size, .. } | PType::Float { size, .. } | PType::Ptr { size, .. } => {
                u64::from(*size)
            }
            PType::Enum { size, .. } => u64::from(*size),
            PType::Char { .. } => 1,
            PType::Array { elem, len, .. } => elem.size().saturating_mul(*len),
            PType::Struct { size, .. } | PType::Union { size, .. } => *size,
            PType::Forward { .. } => 0,
        }
    }

    pub(crate) fn is_structlike(&self) -> bool {
        matches!(self, PType::Struct { .. } | PType::Union { .. })
    }

    pub(crate) fn is_integer(&self) -> bool {
        matches!(self, PType::Int { .. } | PType::Char { .. })
    }
}
