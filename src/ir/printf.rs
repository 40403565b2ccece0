//! The compile-time half of DTrace's `printf()` format engine: the parsed format
//! ([`parse`] splits a format string into literal text and `%` conversions, rejecting
//! malformed directives with `D_SYNTAX` errors) and the argument checks ([`check`] /
//! [`check_args`], the `D_PRINTF_*` errors). A parsed [`Format`] is part of the program's
//! IR (`printf`, `printa`, ...); rendering values with it is `crate::output::printf`.

// ---------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------

/// The D type of one printf argument as the compiler sees it (the compiler
/// maps its own types to this).
#[derive(Clone, Debug, PartialEq)]
pub enum ArgType {
    /// Integer (or enum) of `size` bytes.
    Int {
        size: u8,
        signed: bool,
        is_char: bool,
        is_enum: bool,
    },
    /// Floating point of `size` bytes (4 float, 8 double, 16 long double).
    Float {
        size: u8,
    },
    /// Pointer type.
    Pointer {
        pointee_is_char: bool,
        is_void: bool,
    },
    /// The D `string` type.
    String,
    /// Array type (arrays count as pointers for `%p`/`%a`).
    Array {
        elem_is_char: bool,
    },
    /// Array of `wchar_t` (dtx's is Windows' 16-bit one), accepted by `%ls` / `%ws`.
    WcharArray,
    /// Pointer to `wchar_t`, accepted by `%ls` / `%ws` as the Windows port's scripts use it
    /// (the compiler reads the wide string it points to, see `lower_action`).
    WcharPointer,
    Struct,
    Union,
    Function,
    Void,
    /// Result of `stack()` / `ustack()` / `jstack()`.
    Stack,
    /// Result of `sym()` / `func()` / `mod()` (`_symaddr`).
    Symbol,
    /// Result of `usym()` / `ufunc()` / `umod()` / `uaddr()` (`_usymaddr`).
    USymbol,
    /// An aggregation (`@a`) used as a value: a dynamic type.
    Aggregation,
}

impl ArgType {
    /// Plain signed/unsigned integer of `size` bytes.
    pub fn int(size: u8, signed: bool) -> ArgType {
        ArgType::Int {
            size,
            signed,
            is_char: false,
            is_enum: false,
        }
    }

    fn is_integer(&self) -> bool {
        matches!(self, ArgType::Int { .. })
    }

    /// dtrace's notion of "pointer": pointers and arrays, not strings.
    fn is_pointer(&self) -> bool {
        matches!(
            self,
            ArgType::Pointer { .. }
                | ArgType::Array { .. }
                | ArgType::WcharArray
                | ArgType::WcharPointer
        )
    }

    /// Size in bytes of a value of this type as stored in a record.
    pub fn size(&self) -> usize {
        match self {
            ArgType::Int { size, .. } | ArgType::Float { size } => *size as usize,
            _ => 8,
        }
    }

    /// Best-effort D type name (as `dt_node_type_name` would print it), used
    /// in diagnostics when the compiler does not supply the real name.
    pub fn default_name(&self) -> String {
        let s = match self {
            ArgType::Int { is_enum: true, .. } => "enum",
            ArgType::Int { size, signed, .. } => match (size, signed) {
                (1, true) => "char",
                (1, false) => "unsigned char",
                (2, true) => "short",
                (2, false) => "unsigned short",
                (4, true) => "int",
                (4, false) => "unsigned int",
                (_, true) => "int64_t",
                (_, false) => "uint64_t",
            },
            ArgType::Float { size: 4 } => "float",
            ArgType::Float { size: 8 } => "double",
            ArgType::Float { .. } => "long double",
            ArgType::Pointer {
                pointee_is_char: true,
                ..
            } => "char *",
            ArgType::Pointer { .. } => "void *",
            ArgType::String => "string",
            ArgType::Array { elem_is_char: true } => "char []",
            ArgType::Array { .. } => "int []",
            ArgType::WcharArray => "wchar_t []",
            ArgType::WcharPointer => "wchar_t *",
            ArgType::Struct => "struct",
            ArgType::Union => "union",
            ArgType::Function => "function",
            ArgType::Void => "void",
            ArgType::Stack => "stack",
            ArgType::Symbol => "_symaddr",
            ArgType::USymbol => "_usymaddr",
            ArgType::Aggregation => "aggregation",
        };
        s.to_string()
    }

    /// Best-effort name of the type with typedefs resolved (LP64 model).
    fn default_base(&self) -> String {
        match self {
            ArgType::Int {
                size: 8,
                signed,
                is_enum: false,
                ..
            } => if *signed { "long" } else { "unsigned long" }.to_string(),
            _ => self.default_name(),
        }
    }
}

/// An argument type together with the names the compiler knows for it.
#[derive(Clone, Debug, PartialEq)]
pub struct ArgDesc {
    pub ty: ArgType,
    /// Name printed in diagnostics (e.g. `uint64_t`, `struct foo`, `userland int`).
    pub name: String,
    /// Name after resolving typedefs (e.g. `unsigned long` for `uint64_t`);
    /// `%hd`, `%ld`, `%lld`, `%lx`, `%lc`, `%P` … compare against it.
    pub base: String,
    /// Whether the typedef chain contains `int64_t` or `uint64_t`
    /// (which `%llx` / `%llX` also accept).
    pub int64_typedef: bool,
}

impl ArgDesc {
    /// Description with default names derived from `ty`.
    pub fn new(ty: ArgType) -> ArgDesc {
        let int64_typedef = matches!(
            ty,
            ArgType::Int {
                size: 8,
                is_enum: false,
                ..
            }
        );
        ArgDesc {
            name: ty.default_name(),
            base: ty.default_base(),
            int64_typedef,
            ty,
        }
    }

    /// Description with explicit names (no `int64_t` typedef in the chain
    /// unless `name` itself is `int64_t`/`uint64_t`).
    pub fn named(ty: ArgType, name: &str, base: &str) -> ArgDesc {
        ArgDesc {
            ty,
            name: name.to_string(),
            base: base.to_string(),
            int64_typedef: name == "int64_t" || name == "uint64_t",
        }
    }
}

impl From<ArgType> for ArgDesc {
    fn from(ty: ArgType) -> ArgDesc {
        ArgDesc::new(ty)
    }
}

/// An error from parsing, checking or formatting.  `tag` is the dtrace error
/// tag (`D_SYNTAX`, `D_PRINTF_*`, or `EDT_*` at run time); `message` is the
/// text without a trailing newline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatError {
    pub tag: &'static str,
    pub message: String,
}

impl FormatError {
    fn new(tag: &'static str, message: String) -> FormatError {
        FormatError { tag, message }
    }

    pub(crate) fn mismatch() -> FormatError {
        FormatError::new(
            "EDT_DMISMATCH",
            "Data record list does not match statement".to_string(),
        )
    }
}

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FormatError {}

/// Flags of one directive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    /// `#`
    pub alt: bool,
    /// `0` (cleared by a later `-`)
    pub zero: bool,
    /// `-` (cleared by a later `0`)
    pub left: bool,
    /// `+`
    pub plus: bool,
    /// ` `
    pub space: bool,
    /// `'`
    pub group: bool,
    /// `@`: use the aggregation result (printa only)
    pub agg: bool,
}

/// A width or precision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Count {
    #[default]
    None,
    Fixed(i32),
    /// `*`: taken from the argument list at run time.
    Star,
}

/// How a conversion renders its value (dtrace's print functions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrintKind {
    /// Sign-extend from the type size, print signed (`%i %c %hd %ld %lc`…).
    Sint,
    /// Zero-extend from the type size, print unsigned (`%u %o %x %p`…).
    Uint,
    /// `%d`: signed or unsigned according to the argument type.
    Dint,
    /// Floating point.
    Fp,
    /// `%a`: kernel symbol.
    Addr,
    /// `%A`: user symbol.
    UAddr,
    /// `%k`: stack.
    Stack,
    /// `%Y`
    Time,
    /// `%T`
    Time822,
    /// `%P`: port number.
    Port,
    /// `%I`: IP address string.
    InetAddr,
    /// `%s`
    Cstr,
    /// `%ls %ws`
    Wstr,
    /// `%S`: escaped string.
    Estr,
    /// `%C`: escaped character.
    Echr,
    /// `%%`
    Pct,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CheckKind {
    Kaddr,
    Uaddr,
    Addr,
    Stack,
    Time,
    Str,
    Wstr,
    Csi,
    Fp,
    Xint,
    Dint,
    Xshort,
    Xlong,
    Xlonglong,
    /// Exact type; the string is the resolved name of the prototype type.
    Type(&'static str),
}

pub(crate) struct ConvSpec {
    pub(crate) name: &'static str,
    /// C output conversion (without size prefix).
    pub(crate) ofmt: &'static str,
    /// Prototype description used in diagnostics.
    pub(crate) proto: &'static str,
    check: CheckKind,
    pub(crate) print: PrintKind,
}

const PROTO_XINT: &str = "char, short, int, long, or long long";
const PROTO_CSI: &str = "char, short, or int";
const PROTO_FP: &str = "float, double, or long double";
const PROTO_ADDR: &str = "pointer or integer";
pub(crate) const PROTO_UADDR: &str = "pointer or integer (with -p/-c) or _usymaddr (without -p/-c)";
const PROTO_CSTR: &str = "char [] or string (or use stringof)";
const PROTO_WSTR: &str = "wchar_t []";

macro_rules! conv {
    ($n:expr, $o:expr, $p:expr, $c:expr, $k:ident) => {
        ConvSpec {
            name: $n,
            ofmt: $o,
            proto: $p,
            check: $c,
            print: PrintKind::$k,
        }
    };
}

static CONVERSIONS: &[ConvSpec] = &[
    conv!("a", "s", PROTO_ADDR, CheckKind::Kaddr, Addr),
    conv!("A", "s", PROTO_UADDR, CheckKind::Uaddr, UAddr),
    conv!("c", "c", PROTO_CSI, CheckKind::Csi, Sint),
    conv!("C", "s", PROTO_CSI, CheckKind::Csi, Echr),
    conv!("d", "d", PROTO_XINT, CheckKind::Dint, Dint),
    conv!("e", "e", PROTO_FP, CheckKind::Fp, Fp),
    conv!("E", "E", PROTO_FP, CheckKind::Fp, Fp),
    conv!("f", "f", PROTO_FP, CheckKind::Fp, Fp),
    conv!("g", "g", PROTO_FP, CheckKind::Fp, Fp),
    conv!("G", "G", PROTO_FP, CheckKind::Fp, Fp),
    conv!("hd", "d", "short", CheckKind::Type("short"), Sint),
    conv!("hi", "i", "short", CheckKind::Type("short"), Sint),
    conv!(
        "ho",
        "o",
        "unsigned short",
        CheckKind::Type("unsigned short"),
        Uint
    ),
    conv!(
        "hu",
        "u",
        "unsigned short",
        CheckKind::Type("unsigned short"),
        Uint
    ),
    conv!("hx", "x", "short", CheckKind::Xshort, Uint),
    conv!("hX", "X", "short", CheckKind::Xshort, Uint),
    conv!("i", "i", PROTO_XINT, CheckKind::Xint, Sint),
    conv!("I", "s", PROTO_CSTR, CheckKind::Str, InetAddr),
    conv!("k", "s", "stack", CheckKind::Stack, Stack),
    conv!("lc", "lc", "int", CheckKind::Type("int"), Sint),
    conv!("ld", "d", "long", CheckKind::Type("long"), Sint),
    conv!("li", "i", "long", CheckKind::Type("long"), Sint),
    conv!(
        "lo",
        "o",
        "unsigned long",
        CheckKind::Type("unsigned long"),
        Uint
    ),
    conv!(
        "lu",
        "u",
        "unsigned long",
        CheckKind::Type("unsigned long"),
        Uint
    ),
    conv!("ls", "ls", PROTO_WSTR, CheckKind::Wstr, Wstr),
    conv!("lx", "x", "long", CheckKind::Xlong, Uint),
    conv!("lX", "X", "long", CheckKind::Xlong, Uint),
    conv!("lld", "d", "long long", CheckKind::Type("long long"), Sint),
    conv!("lli", "i", "long long", CheckKind::Type("long long"), Sint),
    conv!(
        "llo",
        "o",
        "unsigned long long",
        CheckKind::Type("unsigned long long"),
        Uint
    ),
    conv!(
        "llu",
        "u",
        "unsigned long long",
        CheckKind::Type("unsigned long long"),
        Uint
    ),
    conv!("llx", "x", "long long", CheckKind::Xlonglong, Uint),
    conv!("llX", "X", "long long", CheckKind::Xlonglong, Uint),
    conv!("Le", "e", "long double", CheckKind::Type("long double"), Fp),
    conv!("LE", "E", "long double", CheckKind::Type("long double"), Fp),
    conv!("Lf", "f", "long double", CheckKind::Type("long double"), Fp),
    conv!("Lg", "g", "long double", CheckKind::Type("long double"), Fp),
    conv!("LG", "G", "long double", CheckKind::Type("long double"), Fp),
    conv!("o", "o", PROTO_XINT, CheckKind::Xint, Uint),
    conv!("p", "x", PROTO_ADDR, CheckKind::Addr, Uint),
    conv!(
        "P",
        "s",
        "uint16_t",
        CheckKind::Type("unsigned short"),
        Port
    ),
    conv!("s", "s", PROTO_CSTR, CheckKind::Str, Cstr),
    conv!("S", "s", PROTO_CSTR, CheckKind::Str, Estr),
    conv!("T", "s", "int64_t", CheckKind::Time, Time822),
    conv!("u", "u", PROTO_XINT, CheckKind::Xint, Uint),
    conv!("wc", "wc", "int", CheckKind::Type("int"), Sint),
    conv!("ws", "ws", PROTO_WSTR, CheckKind::Wstr, Wstr),
    conv!("x", "x", PROTO_XINT, CheckKind::Xint, Uint),
    conv!("X", "X", PROTO_XINT, CheckKind::Xint, Uint),
    conv!("Y", "s", "int64_t", CheckKind::Time, Time),
    conv!("%", "%", "void", CheckKind::Type("void"), Pct),
];

/// One parsed `%` directive.
#[derive(Clone, Debug, PartialEq)]
pub struct Conversion {
    /// 1-based number of this directive in the format (`#N` in messages).
    pub index: usize,
    pub flags: Flags,
    pub width: Count,
    pub precision: Count,
    /// Conversion name including length modifiers: `d`, `lld`, `hx`, `%`, …
    pub name: String,
    /// The full source text of the directive, e.g. `%-08.3lld`.
    pub text: String,
    spec: usize,
}

impl Conversion {
    pub(crate) fn spec(&self) -> &'static ConvSpec {
        &CONVERSIONS[self.spec]
    }

    /// How this conversion renders its value.
    pub fn print_kind(&self) -> PrintKind {
        self.spec().print
    }

    /// The final conversion character (`d`, `x`, `s`, `%`, …).
    pub fn conv_char(&self) -> char {
        self.name.chars().last().unwrap_or('%')
    }

    /// Length modifier (`h`, `l`, `ll`, `L`, `w`) or "".
    pub fn length(&self) -> &str {
        let n = self.name.len();
        if n > 1 {
            &self.name[..n - 1]
        } else {
            ""
        }
    }

    /// Number of run-time records this conversion consumes from the
    /// argument list (dynamic width/precision plus the value).
    pub fn arg_count(&self) -> usize {
        if self.print_kind() == PrintKind::Pct {
            return 0;
        }
        usize::from(self.width == Count::Star)
            + usize::from(self.precision == Count::Star)
            + usize::from(!self.flags.agg)
    }
}

/// Literal text or a conversion.
#[derive(Clone, Debug, PartialEq)]
pub enum Piece {
    Text(String),
    Conv(Conversion),
}

/// A parsed format string.
#[derive(Clone, Debug, PartialEq)]
pub struct Format {
    pub pieces: Vec<Piece>,
    /// The format string as given (cut at the first NUL, as C would).
    pub source: String,
}

impl Format {
    /// The conversions, in order.
    pub fn conversions(&self) -> impl Iterator<Item = &Conversion> {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Conv(c) => Some(c),
            Piece::Text(_) => None,
        })
    }

    /// Number of run-time records the format consumes (excluding `%@`).
    pub fn arg_count(&self) -> usize {
        self.conversions().map(Conversion::arg_count).sum()
    }

    /// The positions, among the run-time arguments, of the values `%ls` / `%ws` print.
    pub fn wide_string_args(&self) -> Vec<usize> {
        let mut at = 0;
        let mut v = Vec::new();
        for c in self.conversions() {
            let n = c.arg_count();
            if c.print_kind() == PrintKind::Wstr && !c.flags.agg && n > 0 {
                v.push(at + n - 1);
            }
            at += n;
        }
        v
    }
}

// ---------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------

fn syntax(msg: String) -> FormatError {
    FormatError::new("D_SYNTAX", msg)
}

/// Parse a format string (escape sequences already decoded).
pub fn parse(fmt: &str) -> Result<Format, FormatError> {
    let source = match fmt.find('\0') {
        Some(i) => &fmt[..i],
        None => fmt,
    };
    let b = source.as_bytes();
    let mut pieces = Vec::new();
    let mut q = 0usize;
    let mut index = 0usize;

    while let Some(off) = b[q..].iter().position(|&c| c == b'%') {
        let start = q + off;
        index += 1;
        if start > q {
            pieces.push(Piece::Text(source[q..start].to_string()));
        }

        let mut flags = Flags::default();
        let mut width = Count::None;
        let mut precision = Count::None;
        let mut dot = false;
        let mut digits = 0u32;
        let mut name: Vec<u8> = Vec::new();
        let mut p = start;

        loop {
            p += 1;
            let c = b.get(p).copied().unwrap_or(0);
            match c {
                b'0'..=b'9' => {
                    if !dot && digits == 0 && c == b'0' {
                        flags.zero = true;
                        flags.left = false;
                        continue;
                    }
                    let mut n: i32 = 0;
                    while let Some(d) = b.get(p).copied().filter(u8::is_ascii_digit) {
                        n = n.saturating_mul(10).saturating_add(i32::from(d - b'0'));
                        p += 1;
                    }
                    p -= 1;
                    let slot = if dot { &mut precision } else { &mut width };
                    if *slot != Count::Star {
                        *slot = Count::Fixed(n);
                    }
                    digits += 1;
                }
                b'#' => flags.alt = true,
                b'*' => {
                    let slot = if dot { &mut precision } else { &mut width };
                    if *slot == Count::Star {
                        // dtrace always says "precision" here.
                        return Err(syntax(format!(
                            "format conversion #{index} has more than one '*' \
                             specified for the output precision"
                        )));
                    }
                    *slot = Count::Star;
                }
                b'+' => flags.plus = true,
                b'-' => {
                    flags.left = true;
                    flags.zero = false;
                }
                b'.' => {
                    if dot {
                        return Err(syntax(format!(
                            "format conversion #{index} has more than one '.' specified"
                        )));
                    }
                    dot = true;
                    digits = 0;
                }
                b'?' => {
                    if width != Count::Star {
                        width = Count::Fixed(16);
                    }
                }
                b'@' => flags.agg = true,
                b'\'' => flags.group = true,
                b' ' => flags.space = true,
                b'$' => {
                    return Err(syntax(format!(
                        "format conversion #{index} uses unsupported positional \
                         format (%n$)"
                    )));
                }
                b'%' if b[p - 1] != b'%' => {
                    return Err(syntax(format!(
                        "format conversion #{index} cannot be combined with other \
                         format flags: %%"
                    )));
                }
                0 => {
                    return Err(syntax(format!(
                        "format conversion #{index} name expected before end of \
                         format string"
                    )));
                }
                b'h' | b'l' | b'L' | b'w' => {
                    if name.len() < 6 {
                        name.push(c);
                    }
                }
                _ => {
                    name.push(c);
                    break;
                }
            }
        }

        let name_str = String::from_utf8_lossy(&name).into_owned();
        let spec = CONVERSIONS
            .iter()
            .position(|s| s.name.as_bytes() == name.as_slice())
            .ok_or_else(|| {
                syntax(format!(
                    "format conversion #{index} is undefined: %{name_str}"
                ))
            })?;
        // The conversion character is ASCII, so p + 1 is a char boundary.
        q = p + 1;
        pieces.push(Piece::Conv(Conversion {
            index,
            flags,
            width,
            precision,
            name: name_str,
            text: source[start..q].to_string(),
            spec,
        }));
    }

    if q < b.len() {
        pieces.push(Piece::Text(source[q..].to_string()));
    }
    Ok(Format {
        pieces,
        source: source.to_string(),
    })
}

// ---------------------------------------------------------------------------
// Compile-time checking
// ---------------------------------------------------------------------------

/// Options of the compile-time check (dtrace's validation flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckOptions {
    /// Extra arguments are an error (`printf`-like actions; not `printa`).
    pub exact_len: bool,
    /// `%@` is allowed (printa).
    pub aggregation: bool,
    /// The aggregating function's result is signed (everything but count()).
    pub agg_signed: bool,
    /// A target process exists (`-p`/`-c`), so `%A` accepts plain integers.
    pub has_target: bool,
    /// Added to argument numbers in messages (1: the format is argument #1).
    pub arg_offset: usize,
}

impl CheckOptions {
    /// Defaults for the named action: `printa` checks aggregation keys with
    /// `%@` enabled; everything else checks exact argument lists.
    pub fn for_func(func: &str) -> CheckOptions {
        let printa = func == "printa";
        CheckOptions {
            exact_len: !printa,
            aggregation: printa,
            agg_signed: true,
            has_target: false,
            arg_offset: 1,
        }
    }
}

/// Compile-time check with default options for `func` and default type
/// names.  For `printa`, `args` are the aggregation key types.
pub fn check(fmt: &Format, func: &str, args: &[ArgType]) -> Result<(), FormatError> {
    let descs: Vec<ArgDesc> = args.iter().cloned().map(ArgDesc::new).collect();
    check_args(fmt, func, &descs, &CheckOptions::for_func(func))
}

fn type_check(kind: CheckKind, a: &ArgDesc, opts: &CheckOptions) -> bool {
    let t = &a.ty;
    match kind {
        CheckKind::Addr => t.is_pointer() || t.is_integer(),
        CheckKind::Kaddr => t.is_pointer() || t.is_integer() || *t == ArgType::Symbol,
        CheckKind::Uaddr => {
            *t == ArgType::USymbol || (opts.has_target && (t.is_pointer() || t.is_integer()))
        }
        CheckKind::Stack => *t == ArgType::Stack,
        CheckKind::Time => t.is_integer() && t.size() == 8,
        CheckKind::Str => matches!(t, ArgType::String | ArgType::Array { elem_is_char: true }),
        CheckKind::Wstr => matches!(t, ArgType::WcharArray | ArgType::WcharPointer),
        CheckKind::Csi => t.is_integer() && t.size() <= 4,
        CheckKind::Fp => matches!(t, ArgType::Float { .. }),
        CheckKind::Xint | CheckKind::Dint => t.is_integer(),
        CheckKind::Xshort => {
            t.is_integer() && matches!(a.base.as_str(), "short" | "signed short" | "unsigned short")
        }
        CheckKind::Xlong => {
            t.is_integer() && matches!(a.base.as_str(), "long" | "signed long" | "unsigned long")
        }
        CheckKind::Xlonglong => {
            t.is_integer()
                && (a.int64_typedef
                    || matches!(
                        a.base.as_str(),
                        "long long" | "signed long long" | "unsigned long long"
                    ))
        }
        CheckKind::Type(base) => {
            let kind_ok = if base == "long double" {
                matches!(t, ArgType::Float { .. })
            } else {
                t.is_integer()
            };
            kind_ok && a.base == base
        }
    }
}

/// Compile-time check of `args` (or, for printa, the aggregation keys)
/// against `fmt`, with explicit type names and options.
pub fn check_args(
    fmt: &Format,
    func: &str,
    args: &[ArgDesc],
    opts: &CheckOptions,
) -> Result<(), FormatError> {
    if fmt.source.is_empty() && func != "freopen" {
        return Err(FormatError::new(
            "D_PRINTF_FMT_EMPTY",
            format!("{func}( ) format string is empty"),
        ));
    }
    let agg = ArgDesc::new(ArgType::int(8, opts.agg_signed));
    let mut j = 0usize; // arguments consumed
    let foff = opts.arg_offset;

    for c in fmt.conversions() {
        let spec = c.spec();
        if spec.print == PrintKind::Pct {
            continue;
        }
        let i = c.index;
        let mut dyns: Vec<&str> = Vec::new();
        if c.width == Count::Star {
            dyns.push("*");
        }
        if c.precision == Count::Star {
            dyns.push(".*");
        }
        for d in dyns {
            let Some(a) = args.get(j) else {
                return Err(FormatError::new(
                    "D_PRINTF_DYN_PROTO",
                    format!(
                        "{func}( ) prototype mismatch: conversion #{i} (%{}) is \
                         missing a corresponding \"{d}\" argument",
                        spec.name
                    ),
                ));
            };
            if !a.ty.is_integer() {
                return Err(FormatError::new(
                    "D_PRINTF_DYN_TYPE",
                    format!(
                        "{func}( ) argument #{} is incompatible with conversion \
                         #{i} prototype:\n\tconversion: % {d} {}\n\t prototype: \
                         int\n\t  argument: {}",
                        j + foff + 1,
                        spec.name,
                        a.name
                    ),
                ));
            }
            j += 1;
        }

        let (vname, vdesc) = if c.flags.agg {
            if !opts.aggregation {
                return Err(FormatError::new(
                    "D_PRINTF_AGG_CONV",
                    format!(
                        "%@ conversion requires an aggregation and is not for \
                         use with {func}( )"
                    ),
                ));
            }
            ("aggregating action".to_string(), &agg)
        } else if let Some(a) = args.get(j) {
            j += 1;
            (format!("argument #{}", j + foff), a)
        } else {
            return Err(FormatError::new(
                "D_PRINTF_ARG_PROTO",
                format!(
                    "{func}( ) prototype mismatch: conversion #{i} (%{}) is missing \
                     a corresponding value argument",
                    spec.name
                ),
            ));
        };

        if !type_check(spec.check, vdesc, opts) {
            return Err(FormatError::new(
                "D_PRINTF_ARG_TYPE",
                format!(
                    "{func}( ) {vname} is incompatible with conversion #{i} \
                     prototype:\n\tconversion: %{}\n\t prototype: {}\n\t  \
                     argument: {}",
                    spec.name, spec.proto, vdesc.name
                ),
            ));
        }
    }

    if opts.exact_len && j < args.len() {
        return Err(FormatError::new(
            "D_PRINTF_ARG_EXTRA",
            format!(
                "{func}( ) prototype mismatch: only {j} arguments required by this format string"
            ),
        ));
    }
    Ok(())
}
