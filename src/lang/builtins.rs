//! Table of D's built-in identifiers and a parser for their prototypes.
//!
//! Every subroutine, action, aggregating function and built-in variable that
//! the D compiler knows without any declaration is listed in [`BUILTINS`],
//! sorted by name so that [`lookup`] can binary-search it.  Each entry carries
//! a libdtrace-style declaration string (`proto`), e.g. `"void *(size_t)"` for
//! a function or `"uint64_t"` for a variable.  [`parse_proto`] turns such a
//! string into a [`Proto`] whose types remain plain text, so this module does
//! not depend on any type system.
//!
//! # Prototype grammar
//!
//! * `ret(p1, p2, ...)` declares a function; `ret` alone declares a variable.
//! * A parameter `@` accepts an expression of any type.
//! * A parameter in square brackets, e.g. `[int]`, is optional: it may be
//!   absent, but if present it must match the enclosed type.  Once an optional
//!   parameter appears, every following parameter must be optional too.
//! * A trailing `...` accepts any number (zero or more) of further arguments
//!   of any type.  Only arguments before the `...` are type-checked.
//! * `()` declares a function of no arguments.
//!
//! Some return types are pseudo-types private to libdtrace: `stack` (the
//! result of `stack()`/`ustack()`/`jstack()`), `_symaddr` (kernel symbol
//! address, from `sym()`/`func()`/`mod()`) and `_usymaddr` (user symbol
//! address, from `usym()`/`ufunc()`/`umod()`/`uaddr()`).  The return type of
//! every aggregating function is the dynamic type: only usable on the right
//! of `@agg[...] = f(...)`.
//!
//! # Diagnostics
//!
//! The compiler's arity and argument-type diagnostics (`D_PROTO_LEN`,
//! `D_PROTO_ARG`) are reproduced byte-for-byte by [`proto_len_message`],
//! [`proto_arg_message`], [`check_call_arity`] and
//! [`proto_len_at_most_message`]; see their docs for the exact formats.
//!
//! # Sources
//!
//! Facts (names, ids, prototypes, versions) come from libdtrace's global
//! identifier table, the DIF/action/aggregation id definitions and the D
//! library scripts of the Windows port of DTrace (illumos-derived), with the
//! illumos-only entries that the port compiles out marked [`Origin::Illumos`].

use std::fmt;

// ---------------------------------------------------------------------------
// Identifier numbers
// ---------------------------------------------------------------------------

/// Subroutine numbers (`DIF_SUBR_*`), as used by the DIF `call` instruction.
pub mod subr {
    pub const RAND: u32 = 0;
    pub const MUTEX_OWNED: u32 = 1;
    pub const MUTEX_OWNER: u32 = 2;
    pub const MUTEX_TYPE_ADAPTIVE: u32 = 3;
    pub const MUTEX_TYPE_SPIN: u32 = 4;
    pub const RW_READ_HELD: u32 = 5;
    pub const RW_WRITE_HELD: u32 = 6;
    pub const RW_ISWRITER: u32 = 7;
    pub const COPYIN: u32 = 8;
    pub const COPYINSTR: u32 = 9;
    pub const SPECULATION: u32 = 10;
    pub const PROGENYOF: u32 = 11;
    pub const STRLEN: u32 = 12;
    pub const COPYOUT: u32 = 13;
    pub const COPYOUTSTR: u32 = 14;
    pub const ALLOCA: u32 = 15;
    pub const BCOPY: u32 = 16;
    pub const COPYINTO: u32 = 17;
    pub const MSGDSIZE: u32 = 18;
    pub const MSGSIZE: u32 = 19;
    pub const GETMAJOR: u32 = 20;
    pub const GETMINOR: u32 = 21;
    pub const DDI_PATHNAME: u32 = 22;
    pub const STRJOIN: u32 = 23;
    pub const LLTOSTR: u32 = 24;
    pub const BASENAME: u32 = 25;
    pub const DIRNAME: u32 = 26;
    pub const CLEANPATH: u32 = 27;
    pub const STRCHR: u32 = 28;
    pub const STRRCHR: u32 = 29;
    pub const STRSTR: u32 = 30;
    pub const STRTOK: u32 = 31;
    pub const SUBSTR: u32 = 32;
    pub const INDEX: u32 = 33;
    pub const RINDEX: u32 = 34;
    pub const HTONS: u32 = 35;
    pub const HTONL: u32 = 36;
    pub const HTONLL: u32 = 37;
    pub const NTOHS: u32 = 38;
    pub const NTOHL: u32 = 39;
    pub const NTOHLL: u32 = 40;
    pub const INET_NTOP: u32 = 41;
    pub const INET_NTOA: u32 = 42;
    pub const INET_NTOA6: u32 = 43;
    pub const TOUPPER: u32 = 44;
    pub const TOLOWER: u32 = 45;
    pub const GETF: u32 = 46;
    pub const JSON: u32 = 47;
    pub const STRTOLL: u32 = 48;
    /// Windows port: wide (UTF-16) string to D string.
    pub const WSTRINGOF: u32 = 49;
    /// Windows port: length of a wide string.
    pub const WSTRLEN: u32 = 50;
    /// Highest subroutine number of DTrace's (the actions' numbers follow it, as libdtrace's).
    pub const MAX: u32 = 50;
    /// dtx's own subroutines, numbered apart from every DTrace id.
    pub const DTX_BASE: u32 = 0x0a00;
    /// dtx: a decoded field of the firing's ETW event, by name, as a number.
    pub const ETWFIELD: u32 = DTX_BASE;
    /// dtx: a decoded field of the firing's ETW event, by name, as a string.
    pub const ETWFIELD_STR: u32 = DTX_BASE + 1;
}

/// libdtrace action numbers (`DT_ACT_*`).  They start right after the last
/// subroutine number so that actions and subroutines never share an id.
pub mod act {
    pub const BASE: u32 = super::subr::MAX + 1;
    pub const PRINTF: u32 = BASE;
    pub const TRACE: u32 = BASE + 1;
    pub const TRACEMEM: u32 = BASE + 2;
    pub const STACK: u32 = BASE + 3;
    pub const STOP: u32 = BASE + 4;
    pub const BREAKPOINT: u32 = BASE + 5;
    pub const PANIC: u32 = BASE + 6;
    pub const SPECULATE: u32 = BASE + 7;
    pub const COMMIT: u32 = BASE + 8;
    pub const DISCARD: u32 = BASE + 9;
    pub const CHILL: u32 = BASE + 10;
    pub const EXIT: u32 = BASE + 11;
    pub const USTACK: u32 = BASE + 12;
    pub const PRINTA: u32 = BASE + 13;
    pub const RAISE: u32 = BASE + 14;
    pub const CLEAR: u32 = BASE + 15;
    pub const NORMALIZE: u32 = BASE + 16;
    pub const DENORMALIZE: u32 = BASE + 17;
    pub const TRUNC: u32 = BASE + 18;
    pub const SYSTEM: u32 = BASE + 19;
    pub const JSTACK: u32 = BASE + 20;
    pub const FTRUNCATE: u32 = BASE + 21;
    pub const FREOPEN: u32 = BASE + 22;
    /// Shared by `sym()` and `func()`.
    pub const SYM: u32 = BASE + 23;
    pub const MOD: u32 = BASE + 24;
    /// Shared by `usym()` and `ufunc()`.
    pub const USYM: u32 = BASE + 25;
    pub const UMOD: u32 = BASE + 26;
    pub const UADDR: u32 = BASE + 27;
    pub const SETOPT: u32 = BASE + 28;
    pub const PRINT: u32 = BASE + 29;
    /// `etw_trace()` of Microsoft's DTrace for Windows.
    pub const ETW_TRACE: u32 = BASE + 30;
    /// `lkd()` of Microsoft's DTrace for Windows: a live kernel memory dump.
    pub const LKD: u32 = BASE + 31;
}

/// Aggregating function numbers (`DTRACEAGG_*`).
pub mod agg {
    /// `DTRACEACT_AGGREGATION`: the action class of all aggregations.
    pub const BASE: u32 = 0x0700;
    pub const COUNT: u32 = BASE + 1;
    pub const MIN: u32 = BASE + 2;
    pub const MAX: u32 = BASE + 3;
    pub const AVG: u32 = BASE + 4;
    pub const SUM: u32 = BASE + 5;
    pub const STDDEV: u32 = BASE + 6;
    pub const QUANTIZE: u32 = BASE + 7;
    pub const LQUANTIZE: u32 = BASE + 8;
    pub const LLQUANTIZE: u32 = BASE + 9;
}

/// Built-in variable numbers (`DIF_VAR_*`).  Arrays live in `0x00..=0xff`,
/// scalars from `0x100`; user variables start at `ARRAY_UBASE`/`OTHER_UBASE`.
pub mod var {
    pub const ARRAY_UBASE: u32 = 0x0080;
    pub const OTHER_MIN: u32 = 0x0100;
    pub const OTHER_UBASE: u32 = 0x0500;

    pub const ARGS: u32 = 0x0000;
    /// Kernel registers; no D identifier refers to it.
    pub const REGS: u32 = 0x0001;
    pub const UREGS: u32 = 0x0002;
    pub const VMREGS: u32 = 0x0003;
    pub const CURTHREAD: u32 = 0x0100;
    pub const TIMESTAMP: u32 = 0x0101;
    pub const VTIMESTAMP: u32 = 0x0102;
    pub const IPL: u32 = 0x0103;
    pub const EPID: u32 = 0x0104;
    pub const ID: u32 = 0x0105;
    /// `arg0`; `argN` is `ARG0 + N` for N in 0..=9.
    pub const ARG0: u32 = 0x0106;
    pub const STACKDEPTH: u32 = 0x0110;
    pub const CALLER: u32 = 0x0111;
    pub const PROBEPROV: u32 = 0x0112;
    pub const PROBEMOD: u32 = 0x0113;
    pub const PROBEFUNC: u32 = 0x0114;
    pub const PROBENAME: u32 = 0x0115;
    pub const PID: u32 = 0x0116;
    pub const TID: u32 = 0x0117;
    pub const EXECNAME: u32 = 0x0118;
    pub const ZONENAME: u32 = 0x0119;
    pub const WALLTIMESTAMP: u32 = 0x011a;
    pub const USTACKDEPTH: u32 = 0x011b;
    pub const UCALLER: u32 = 0x011c;
    pub const PPID: u32 = 0x011d;
    pub const UID: u32 = 0x011e;
    pub const GID: u32 = 0x011f;
    pub const ERRNO: u32 = 0x0120;
    pub const EXECARGS: u32 = 0x0121;
    pub const THREADNAME: u32 = 0x0122;
    /// Windows port: ETW wall-clock timestamp of the event.
    pub const ETWWALLTIMESTAMP: u32 = 0x0130;
    /// Windows port: ETW timestamp of the event.
    pub const ETWTIMESTAMP: u32 = 0x0131;
    /// dtx: the trace a firing came from (`-E` file name, or `archive.zip:member.etl`).
    pub const TRACE: u32 = 0x0140;
    /// Current CPU (non-illumos builds).
    pub const CPU: u32 = 0x0200;
}

/// `id` of entries that have no kernel/library number of their own
/// (`self`, `this` and variables defined by D library inlines).
pub const NO_ID: u32 = u32::MAX;

// ---------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------

/// What sort of identifier a built-in is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuiltinKind {
    /// DIF subroutine, evaluated in probe context and usable in expressions.
    Subroutine,
    /// Action (`printf`, `exit`, ...): a statement, not an expression.
    Action,
    /// Aggregating function (`count`, `quantize`, ...).
    AggFunc,
    /// Built-in scalar variable.
    Scalar,
    /// Built-in array variable indexed by an integer constant
    /// (`args[]`, `uregs[]`, `vmregs[]`).
    Array,
    /// Scope pointer `self` (thread-local) or `this` (clause-local).
    Scope,
}

/// Where an identifier comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Present in the global identifier table of both illumos and the
    /// Windows port.
    Common,
    /// Only in the Windows port (`#if defined(windows)`).
    Windows,
    /// In illumos but compiled out of the Windows port (kernel mutex/rwlock
    /// and STREAMS helpers, `zonename`).
    Illumos,
    /// In FreeBSD/OpenDTrace's table only (`execargs`); the id exists in the
    /// port's headers.
    FreeBsd,
    /// A dtx extension with no counterpart in any DTrace (`etwfield`, `etwfield_str`).
    Dtx,
    /// Not a compiler built-in: an `inline` defined by the D library scripts
    /// (`psinfo.d`, `sched.d`, ...).  Those with pointer types are produced by
    /// a translator (`xlate <psinfo_t *>`), so their members are computed
    /// on access.
    DLibrary,
}

/// Where the identifier may be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restriction {
    /// Usable in any D expression (predicates, clause bodies, inlines).
    None,
    /// An action: only as a statement of a probe clause body; never inside a
    /// predicate or as an operand of an expression.
    ActionStatement,
    /// An aggregating function: only as the right-hand side of
    /// `@name[keys] = f(...)`.
    AggregationRhs,
    /// Only meaningful inside a probe clause whose description matches a
    /// single, stable set of probes (`args[]`): the element types come from
    /// the probe's argument signature.
    ProbeClause,
}

/// One built-in identifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Builtin {
    pub name: &'static str,
    pub kind: BuiltinKind,
    /// `DIF_SUBR_*`, `DT_ACT_*`, `DTRACEAGG_*` or `DIF_VAR_*` number, or
    /// [`NO_ID`].
    pub id: u32,
    /// libdtrace-style declaration: a function prototype such as
    /// `"string(const char *, int, [int])"` or a variable type such as
    /// `"uint64_t"`.  `args` uses `"@"`: its element types are per-probe.
    pub proto: &'static str,
    /// Needs destructive actions enabled (`dtrace -w`).
    pub destructive: bool,
    pub restricted: Restriction,
    pub origin: Origin,
    /// D API version that introduced the identifier (`#pragma D binding`).
    pub version: &'static str,
    /// The variable may be assigned (only `uregs[]`).
    pub writable: bool,
}

impl Builtin {
    /// Parses this entry's prototype.
    pub fn parsed_proto(&self) -> Result<Proto, String> {
        parse_proto(self.proto)
    }

    /// True for subroutines, actions and aggregating functions.
    pub fn is_callable(&self) -> bool {
        matches!(
            self.kind,
            BuiltinKind::Subroutine | BuiltinKind::Action | BuiltinKind::AggFunc
        )
    }

    const fn with_origin(mut self, origin: Origin) -> Self {
        self.origin = origin;
        self
    }

    const fn destructive(mut self) -> Self {
        self.destructive = true;
        self
    }

    const fn writable(mut self) -> Self {
        self.writable = true;
        self
    }
}

const fn entry(
    name: &'static str,
    kind: BuiltinKind,
    id: u32,
    proto: &'static str,
    version: &'static str,
    restricted: Restriction,
) -> Builtin {
    Builtin {
        name,
        kind,
        id,
        proto,
        destructive: false,
        restricted,
        origin: Origin::Common,
        version,
        writable: false,
    }
}

const fn sub(name: &'static str, id: u32, proto: &'static str, version: &'static str) -> Builtin {
    entry(
        name,
        BuiltinKind::Subroutine,
        id,
        proto,
        version,
        Restriction::None,
    )
}

const fn action(
    name: &'static str,
    id: u32,
    proto: &'static str,
    version: &'static str,
) -> Builtin {
    entry(
        name,
        BuiltinKind::Action,
        id,
        proto,
        version,
        Restriction::ActionStatement,
    )
}

const fn aggf(name: &'static str, id: u32, proto: &'static str, version: &'static str) -> Builtin {
    entry(
        name,
        BuiltinKind::AggFunc,
        id,
        proto,
        version,
        Restriction::AggregationRhs,
    )
}

const fn scalar(name: &'static str, id: u32, ty: &'static str, version: &'static str) -> Builtin {
    entry(
        name,
        BuiltinKind::Scalar,
        id,
        ty,
        version,
        Restriction::None,
    )
}

const fn array(name: &'static str, id: u32, ty: &'static str, version: &'static str) -> Builtin {
    entry(name, BuiltinKind::Array, id, ty, version, Restriction::None)
}

/// D library inline variable (see [`Origin::DLibrary`]).
const fn dlib(name: &'static str, id: u32, ty: &'static str) -> Builtin {
    scalar(name, id, ty, "1.0").with_origin(Origin::DLibrary)
}

/// All built-in identifiers, sorted by name (byte order, unique).
///
/// Variables whose types come from D library translators rather than from
/// the compiler: `curpsinfo` (`psinfo_t *`, translated from the current
/// process in `psinfo.d`), `curlwpsinfo` (`lwpsinfo_t *`, from the current
/// thread in `psinfo.d`) and `curcpu` (`cpuinfo_t *`, from the current thread
/// in `sched.d`); `cpu`, `chip`, `lgrp` and `pset` are inlines reading
/// `curcpu` members.  In the Windows port `curthread` is `struct thread *`
/// (illumos: `genunix\`kthread_t *`).
pub const BUILTINS: &[Builtin] = &[
    sub("alloca", subr::ALLOCA, "void *(size_t)", "1.0"),
    scalar("arg0", var::ARG0, "int64_t", "1.0"),
    scalar("arg1", var::ARG0 + 1, "int64_t", "1.0"),
    scalar("arg2", var::ARG0 + 2, "int64_t", "1.0"),
    scalar("arg3", var::ARG0 + 3, "int64_t", "1.0"),
    scalar("arg4", var::ARG0 + 4, "int64_t", "1.0"),
    scalar("arg5", var::ARG0 + 5, "int64_t", "1.0"),
    scalar("arg6", var::ARG0 + 6, "int64_t", "1.0"),
    scalar("arg7", var::ARG0 + 7, "int64_t", "1.0"),
    scalar("arg8", var::ARG0 + 8, "int64_t", "1.0"),
    scalar("arg9", var::ARG0 + 9, "int64_t", "1.0"),
    Builtin {
        restricted: Restriction::ProbeClause,
        ..array("args", var::ARGS, "@", "1.0")
    },
    aggf("avg", agg::AVG, "void(@)", "1.0"),
    sub("basename", subr::BASENAME, "string(const char *)", "1.0"),
    sub("bcopy", subr::BCOPY, "void(void *, void *, size_t)", "1.0"),
    action("breakpoint", act::BREAKPOINT, "void()", "1.0").destructive(),
    scalar("caller", var::CALLER, "uintptr_t", "1.0"),
    action("chill", act::CHILL, "void(int)", "1.0").destructive(),
    dlib("chip", NO_ID, "chipid_t"),
    sub("cleanpath", subr::CLEANPATH, "string(const char *)", "1.0"),
    action("clear", act::CLEAR, "void(...)", "1.0"),
    action("commit", act::COMMIT, "void(int)", "1.0"),
    sub("copyin", subr::COPYIN, "void *(uintptr_t, size_t)", "1.0"),
    sub(
        "copyinstr",
        subr::COPYINSTR,
        "string(uintptr_t, [size_t])",
        "1.0",
    ),
    sub(
        "copyinto",
        subr::COPYINTO,
        "void(uintptr_t, size_t, void *)",
        "1.0",
    ),
    sub(
        "copyout",
        subr::COPYOUT,
        "void(void *, uintptr_t, size_t)",
        "1.0",
    )
    .destructive(),
    sub(
        "copyoutstr",
        subr::COPYOUTSTR,
        "void(char *, uintptr_t, size_t)",
        "1.0",
    )
    .destructive(),
    aggf("count", agg::COUNT, "void()", "1.0"),
    // The port's sched.d defines `cpu` as `curcpu->cpu_id`; FreeBSD makes it
    // a compiler built-in numbered DIF_VAR_CPU, which a native implementation
    // can provide directly.
    dlib("cpu", var::CPU, "processorid_t"),
    dlib("curcpu", NO_ID, "cpuinfo_t *"),
    dlib("curlwpsinfo", NO_ID, "lwpsinfo_t *"),
    dlib("curpsinfo", NO_ID, "psinfo_t *"),
    scalar("curthread", var::CURTHREAD, "struct thread *", "1.0"),
    sub(
        "ddi_pathname",
        subr::DDI_PATHNAME,
        "string(void *, int64_t)",
        "1.0",
    ),
    action("denormalize", act::DENORMALIZE, "void(...)", "1.0"),
    sub("dirname", subr::DIRNAME, "string(const char *)", "1.0"),
    action("discard", act::DISCARD, "void(int)", "1.0"),
    scalar("epid", var::EPID, "uint_t", "1.0"),
    scalar("errno", var::ERRNO, "int", "1.0"),
    action("etw_trace", act::ETW_TRACE, "void(@, ...)", "1.0").with_origin(Origin::Windows),
    sub("etwfield", subr::ETWFIELD, "int64_t(const char *)", "1.0").with_origin(Origin::Dtx),
    sub(
        "etwfield_str",
        subr::ETWFIELD_STR,
        "string(const char *)",
        "1.0",
    )
    .with_origin(Origin::Dtx),
    scalar("etwtimestamp", var::ETWTIMESTAMP, "int64_t", "1.0").with_origin(Origin::Windows),
    scalar("etwwalltimestamp", var::ETWWALLTIMESTAMP, "int64_t", "1.0")
        .with_origin(Origin::Windows),
    scalar("execargs", var::EXECARGS, "string", "1.0").with_origin(Origin::FreeBsd),
    scalar("execname", var::EXECNAME, "string", "1.0"),
    action("exit", act::EXIT, "void(int)", "1.0"),
    action("freopen", act::FREOPEN, "void(@, ...)", "1.1").destructive(),
    action("ftruncate", act::FTRUNCATE, "void()", "1.0"),
    action("func", act::SYM, "_symaddr(uintptr_t)", "1.2"),
    sub("getf", subr::GETF, "file_t *(int)", "1.10"),
    sub(
        "getmajor",
        subr::GETMAJOR,
        "genunix`major_t(genunix`dev_t)",
        "1.0",
    ),
    sub(
        "getminor",
        subr::GETMINOR,
        "genunix`minor_t(genunix`dev_t)",
        "1.0",
    ),
    scalar("gid", var::GID, "gid_t", "1.0"),
    sub("htonl", subr::HTONL, "uint32_t(uint32_t)", "1.3"),
    sub("htonll", subr::HTONLL, "uint64_t(uint64_t)", "1.3"),
    sub("htons", subr::HTONS, "uint16_t(uint16_t)", "1.3"),
    scalar("id", var::ID, "uint_t", "1.0"),
    sub(
        "index",
        subr::INDEX,
        "int(const char *, const char *, [int])",
        "1.1",
    ),
    sub("inet_ntoa", subr::INET_NTOA, "string(ipaddr_t *)", "1.5"),
    sub(
        "inet_ntoa6",
        subr::INET_NTOA6,
        "string(in6_addr_t *)",
        "1.5",
    ),
    sub("inet_ntop", subr::INET_NTOP, "string(int, void *)", "1.5"),
    scalar("ipl", var::IPL, "uint_t", "1.0"),
    sub(
        "json",
        subr::JSON,
        "string(const char *, const char *)",
        "1.11",
    ),
    action("jstack", act::JSTACK, "stack(...)", "1.0"),
    dlib("lgrp", NO_ID, "lgrp_id_t"),
    // Microsoft's scripts call lkd(0) and lkd(1); the argument is accepted and every value
    // takes the same dump (output/live_dump.rs)
    action("lkd", act::LKD, "void([int])", "1.0")
        .with_origin(Origin::Windows)
        .destructive(),
    aggf(
        "llquantize",
        agg::LLQUANTIZE,
        "void(@, int32_t, int32_t, int32_t, int32_t, ...)",
        "1.7",
    ),
    sub("lltostr", subr::LLTOSTR, "string(int64_t, [int])", "1.0"),
    aggf(
        "lquantize",
        agg::LQUANTIZE,
        "void(@, int32_t, int32_t, ...)",
        "1.0",
    ),
    aggf("max", agg::MAX, "void(@)", "1.0"),
    aggf("min", agg::MIN, "void(@)", "1.0"),
    action("mod", act::MOD, "_symaddr(uintptr_t)", "1.2"),
    sub("msgdsize", subr::MSGDSIZE, "size_t(mblk_t *)", "1.0").with_origin(Origin::Illumos),
    sub("msgsize", subr::MSGSIZE, "size_t(mblk_t *)", "1.0").with_origin(Origin::Illumos),
    sub(
        "mutex_owned",
        subr::MUTEX_OWNED,
        "int(genunix`kmutex_t *)",
        "1.0",
    )
    .with_origin(Origin::Illumos),
    sub(
        "mutex_owner",
        subr::MUTEX_OWNER,
        "genunix`kthread_t *(genunix`kmutex_t *)",
        "1.0",
    )
    .with_origin(Origin::Illumos),
    sub(
        "mutex_type_adaptive",
        subr::MUTEX_TYPE_ADAPTIVE,
        "int(genunix`kmutex_t *)",
        "1.0",
    )
    .with_origin(Origin::Illumos),
    sub(
        "mutex_type_spin",
        subr::MUTEX_TYPE_SPIN,
        "int(genunix`kmutex_t *)",
        "1.0",
    )
    .with_origin(Origin::Illumos),
    action("normalize", act::NORMALIZE, "void(...)", "1.0"),
    sub("ntohl", subr::NTOHL, "uint32_t(uint32_t)", "1.3"),
    sub("ntohll", subr::NTOHLL, "uint64_t(uint64_t)", "1.3"),
    sub("ntohs", subr::NTOHS, "uint16_t(uint16_t)", "1.3"),
    action("panic", act::PANIC, "void()", "1.0").destructive(),
    scalar("pid", var::PID, "pid_t", "1.0"),
    scalar("ppid", var::PPID, "pid_t", "1.0"),
    action("print", act::PRINT, "void(@)", "1.9"),
    action("printa", act::PRINTA, "void(@, ...)", "1.0"),
    action("printf", act::PRINTF, "void(@, ...)", "1.0"),
    scalar("probefunc", var::PROBEFUNC, "string", "1.0"),
    scalar("probemod", var::PROBEMOD, "string", "1.0"),
    scalar("probename", var::PROBENAME, "string", "1.0"),
    scalar("probeprov", var::PROBEPROV, "string", "1.0"),
    sub("progenyof", subr::PROGENYOF, "int(pid_t)", "1.0"),
    dlib("pset", NO_ID, "psetid_t"),
    aggf("quantize", agg::QUANTIZE, "void(@, ...)", "1.0"),
    action("raise", act::RAISE, "void(int)", "1.0").destructive(),
    sub("rand", subr::RAND, "int()", "1.0"),
    sub(
        "rindex",
        subr::RINDEX,
        "int(const char *, const char *, [int])",
        "1.1",
    ),
    sub(
        "rw_iswriter",
        subr::RW_ISWRITER,
        "int(genunix`krwlock_t *)",
        "1.0",
    )
    .with_origin(Origin::Illumos),
    sub(
        "rw_read_held",
        subr::RW_READ_HELD,
        "int(genunix`krwlock_t *)",
        "1.0",
    )
    .with_origin(Origin::Illumos),
    sub(
        "rw_write_held",
        subr::RW_WRITE_HELD,
        "int(genunix`krwlock_t *)",
        "1.0",
    )
    .with_origin(Origin::Illumos),
    entry(
        "self",
        BuiltinKind::Scope,
        NO_ID,
        "void",
        "1.0",
        Restriction::None,
    ),
    action(
        "setopt",
        act::SETOPT,
        "void(const char *, [const char *])",
        "1.2",
    ),
    action("speculate", act::SPECULATE, "void(int)", "1.0"),
    sub("speculation", subr::SPECULATION, "int()", "1.0"),
    action("stack", act::STACK, "stack(...)", "1.0"),
    scalar("stackdepth", var::STACKDEPTH, "uint32_t", "1.0"),
    aggf("stddev", agg::STDDEV, "void(@)", "1.6"),
    action("stop", act::STOP, "void()", "1.0").destructive(),
    sub("strchr", subr::STRCHR, "string(const char *, char)", "1.1"),
    sub(
        "strjoin",
        subr::STRJOIN,
        "string(const char *, const char *)",
        "1.0",
    ),
    sub("strlen", subr::STRLEN, "size_t(const char *)", "1.0"),
    sub(
        "strrchr",
        subr::STRRCHR,
        "string(const char *, char)",
        "1.1",
    ),
    sub(
        "strstr",
        subr::STRSTR,
        "string(const char *, const char *)",
        "1.1",
    ),
    sub(
        "strtok",
        subr::STRTOK,
        "string(const char *, const char *)",
        "1.1",
    ),
    sub(
        "strtoll",
        subr::STRTOLL,
        "int64_t(const char *, [int])",
        "1.11",
    ),
    sub(
        "substr",
        subr::SUBSTR,
        "string(const char *, int, [int])",
        "1.1",
    ),
    aggf("sum", agg::SUM, "void(@)", "1.0"),
    action("sym", act::SYM, "_symaddr(uintptr_t)", "1.2"),
    action("system", act::SYSTEM, "void(@, ...)", "1.0").destructive(),
    entry(
        "this",
        BuiltinKind::Scope,
        NO_ID,
        "void",
        "1.0",
        Restriction::None,
    ),
    scalar("threadname", var::THREADNAME, "string", "1.13"),
    scalar("tid", var::TID, "id_t", "1.0"),
    scalar("timestamp", var::TIMESTAMP, "uint64_t", "1.0"),
    sub("tolower", subr::TOLOWER, "string(const char *)", "1.8"),
    sub("toupper", subr::TOUPPER, "string(const char *)", "1.8"),
    action("trace", act::TRACE, "void(@)", "1.0"),
    action("tracemem", act::TRACEMEM, "void(@, size_t, ...)", "1.0"),
    action("trunc", act::TRUNC, "void(...)", "1.0"),
    action("uaddr", act::UADDR, "_usymaddr(uintptr_t)", "1.2"),
    scalar("ucaller", var::UCALLER, "uint64_t", "1.2"),
    action("ufunc", act::USYM, "_usymaddr(uintptr_t)", "1.2"),
    scalar("uid", var::UID, "uid_t", "1.0"),
    action("umod", act::UMOD, "_usymaddr(uintptr_t)", "1.2"),
    array("uregs", var::UREGS, "uint64_t", "1.0").writable(),
    action("ustack", act::USTACK, "stack(...)", "1.0"),
    scalar("ustackdepth", var::USTACKDEPTH, "uint32_t", "1.2"),
    action("usym", act::USYM, "_usymaddr(uintptr_t)", "1.2"),
    array("vmregs", var::VMREGS, "uint64_t", "1.7"),
    scalar("vtimestamp", var::VTIMESTAMP, "uint64_t", "1.0"),
    scalar("walltimestamp", var::WALLTIMESTAMP, "int64_t", "1.0"),
    sub("wstringof", subr::WSTRINGOF, "string(wchar_t *)", "1.0").with_origin(Origin::Windows),
    sub("wstrlen", subr::WSTRLEN, "size_t(const wchar_t *)", "1.0").with_origin(Origin::Windows),
    scalar("zonename", var::ZONENAME, "string", "1.0").with_origin(Origin::Illumos),
];

/// `trace` as a variable: the name of the trace the firing came from (see
/// [`variable`]). Not in [`BUILTINS`], where `trace` is the action.
static TRACE_VARIABLE: Builtin =
    scalar("trace", var::TRACE, "string", "1.0").with_origin(Origin::Dtx);

/// A built-in variable that shares its name with a function, looked up where a name is read as
/// a variable (an identifier not called). Only `trace`: D's `trace()` action is a function, and
/// dtrace refuses it there (`trace( ) may not be used without calling it`), so a bare `trace`
/// means nothing in any D program that compiles and dtx gives it the trace's name
/// (docs/many-traces.md). A call `trace(x)` stays the action.
pub fn variable(name: &str) -> Option<&'static Builtin> {
    (name == "trace").then_some(&TRACE_VARIABLE)
}

/// Looks a built-in up by name (binary search over [`BUILTINS`]).
pub fn lookup(name: &str) -> Option<&'static Builtin> {
    BUILTINS
        .binary_search_by(|b| b.name.cmp(name))
        .ok()
        .and_then(|i| BUILTINS.get(i))
}

/// Macro variables, referenced as `$name` (values fixed when the program is
/// compiled).  `target` is the pid of the `-c`/`-p` process (0 if none);
/// the others are the credentials, process group/session and Solaris
/// project/task of the `dtrace` process itself.  Besides these, `$0` is the
/// script name and `$1`, `$2`, ... are the command-line arguments (`$$N`
/// forms quote them as strings).  There is no `$zonename` macro.
pub const MACRO_VARS: &[&str] = &[
    "egid", "euid", "gid", "pid", "pgid", "ppid", "projid", "sid", "taskid", "target", "uid",
];

// ---------------------------------------------------------------------------
// Prototype parsing
// ---------------------------------------------------------------------------

/// One declared parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtoParam {
    /// Type text, e.g. `"const char *"`, or `"@"` for any type.
    pub ty: String,
    /// Declared in square brackets: may be omitted.
    pub optional: bool,
}

impl ProtoParam {
    /// True when the parameter accepts an argument of any type (`@`).
    pub fn is_any(&self) -> bool {
        self.ty == "@"
    }
}

/// A parsed declaration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proto {
    /// Return type (functions) or the variable's type.
    pub ret: String,
    /// Declared parameters, excluding a trailing `...`.
    pub params: Vec<ProtoParam>,
    /// The parameter list ends with `...`.
    pub varargs: bool,
    /// The declaration has a parameter list (possibly empty).
    pub is_function: bool,
}

impl fmt::Display for Proto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.ret)?;
        if !self.is_function {
            return Ok(());
        }
        f.write_str("(")?;
        let mut first = true;
        for p in &self.params {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            if p.optional {
                write!(f, "[{}]", p.ty)?;
            } else {
                f.write_str(&p.ty)?;
            }
        }
        if self.varargs {
            if !first {
                f.write_str(", ")?;
            }
            f.write_str("...")?;
        }
        f.write_str(")")
    }
}

fn valid_type_text(t: &str) -> bool {
    !t.is_empty() && !t.contains(['(', ')', '[', ']', ','])
}

/// Parses a declaration string such as `"string(const char *, int, [int])"`,
/// `"void(@, ...)"` or `"uint64_t"`.  Whitespace around types is trimmed.
/// Errors (never panics) on malformed text: missing return type, unbalanced
/// parentheses or brackets, empty parameters, `...` not last, or a required
/// parameter after an optional one.
pub fn parse_proto(proto: &str) -> Result<Proto, String> {
    let text = proto.trim();
    if text.is_empty() {
        return Err("empty prototype".to_string());
    }
    let Some(open) = text.find('(') else {
        if text.contains([')', '[', ']', ',']) {
            return Err(format!("malformed type '{text}'"));
        }
        return Ok(Proto {
            ret: text.to_string(),
            params: Vec::new(),
            varargs: false,
            is_function: false,
        });
    };
    let ret = text[..open].trim();
    if !valid_type_text(ret) {
        return Err(format!("malformed return type in '{text}'"));
    }
    let rest = &text[open + 1..];
    let Some(inner) = rest.strip_suffix(')') else {
        return Err(format!("missing ')' at end of '{text}'"));
    };
    if inner.contains(['(', ')']) {
        return Err(format!("unbalanced parentheses in '{text}'"));
    }

    let mut params = Vec::new();
    let mut varargs = false;
    let mut first_optional: Option<usize> = None;
    if !inner.trim().is_empty() {
        for (i, raw) in inner.split(',').enumerate() {
            let p = raw.trim();
            if varargs {
                return Err(format!("arg#{} may not follow variable arg#{}", i + 1, i));
            }
            if p == "..." {
                varargs = true;
                continue;
            }
            let (ty, optional) = match p.strip_prefix('[') {
                Some(r) => match r.strip_suffix(']') {
                    Some(t) => (t.trim(), true),
                    None => return Err(format!("unterminated '[' in arg#{}", i + 1)),
                },
                None => (p, false),
            };
            if ty.is_empty() {
                return Err(format!("empty type for arg#{}", i + 1));
            }
            if ty != "@" && !valid_type_text(ty) {
                return Err(format!("malformed type '{ty}' for arg#{}", i + 1));
            }
            if optional {
                first_optional.get_or_insert(i);
            } else if let Some(o) = first_optional {
                return Err(format!(
                    "required arg#{} may not follow optional arg#{}",
                    i + 1,
                    o + 1
                ));
            }
            params.push(ProtoParam {
                ty: ty.to_string(),
                optional,
            });
        }
    }
    Ok(Proto {
        ret: ret.to_string(),
        params,
        varargs,
        is_function: true,
    })
}

/// Number of arguments a call accepts: (minimum, maximum or `None` when
/// unbounded).  A variable is `(0, Some(0))`.
pub fn arity(p: &Proto) -> (usize, Option<usize>) {
    let required = p.params.iter().filter(|q| !q.optional).count();
    let max = if p.varargs {
        None
    } else {
        Some(p.params.len())
    };
    (required, max)
}

// ---------------------------------------------------------------------------
// Diagnostics
// ---------------------------------------------------------------------------

/// `D_PROTO_LEN` text, exactly as libdtrace formats it (without the trailing
/// newline, which the error machinery strips):
///
/// `"{prefix}{name}{suffix} prototype mismatch: {argc} {arg|key}{' '|'s '}passed, {'at least '}{expected} expected"`
///
/// `suffix` is `"( )"` for calls and `"[ ]"` for arrays; `prefix` is `"@"`
/// for aggregations and empty otherwise; `is_key` selects "key" (arrays and
/// aggregations keyed by a tuple) instead of "arg".  Examples:
/// `"printf( ) prototype mismatch: 0 args passed, 1 expected"`,
/// `"substr( ) prototype mismatch: 1 arg passed, at least 2 expected"`,
/// `"uregs[ ] prototype mismatch: 2 args passed, 1 expected"`.
pub fn proto_len_message(
    prefix: &str,
    name: &str,
    suffix: &str,
    argc: usize,
    is_key: bool,
    at_least: bool,
    expected: usize,
) -> String {
    format!(
        "{prefix}{name}{suffix} prototype mismatch: {argc} {}{}passed, {}{expected} expected",
        if is_key { "key" } else { "arg" },
        if argc == 1 { " " } else { "s " },
        if at_least { "at least " } else { "" },
    )
}

/// `D_PROTO_ARG` text, exactly as libdtrace formats it (trailing newline
/// stripped); `argno` is 1-based and the second label is right-aligned to
/// nine columns:
///
/// `"{prefix}{name}{suffix} argument #{argno} is incompatible with prototype:\n\tprototype: {proto_ty}\n\t argument: {arg_ty}"`
///
/// (with `key` in place of `argument` for keyed arrays/aggregations, the
/// second line then reading `"\t      key: ..."`).  For `args[]`/`uregs[]`
/// indexed by a non-constant, `proto_ty` is `"integer constant"`.
pub fn proto_arg_message(
    prefix: &str,
    name: &str,
    suffix: &str,
    is_key: bool,
    argno: usize,
    proto_ty: &str,
    arg_ty: &str,
) -> String {
    let what = if is_key { "key" } else { "argument" };
    format!(
        "{prefix}{name}{suffix} {what} #{argno} is incompatible with prototype:\n\
         \tprototype: {proto_ty}\n\t{what:>9}: {arg_ty}"
    )
}

/// `D_PROTO_LEN` for the increment argument of `quantize()`/`llquantize()`
/// when too many arguments follow it:
/// `"{name}( ) prototype mismatch: {argc} args passed, at most {max} expected"`.
pub fn proto_len_at_most_message(name: &str, argc: usize, max: usize) -> String {
    format!("{name}( ) prototype mismatch: {argc} args passed, at most {max} expected")
}

/// Checks the number of arguments of a call to function `name` against its
/// prototype, returning libdtrace's `D_PROTO_LEN` message on mismatch.
///
/// Mirrors libdtrace's wording quirks: with `...` the expected count is the
/// number of declared parameters and "at least" is printed only when some of
/// them are optional; with optional parameters (no `...`) the message says
/// "at least {required}" even when too *many* arguments were passed.
pub fn check_call_arity(name: &str, p: &Proto, argc: usize) -> Result<(), String> {
    let (min, max) = arity(p);
    let has_optional = p.params.iter().any(|q| q.optional);
    let ok = argc >= min && max.is_none_or(|m| argc <= m);
    if ok {
        return Ok(());
    }
    let (at_least, expected) = if p.varargs {
        (
            has_optional,
            if has_optional { min } else { p.params.len() },
        )
    } else if has_optional {
        (true, min)
    } else {
        (false, p.params.len())
    };
    Err(proto_len_message(
        "", name, "( )", argc, false, at_least, expected,
    ))
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

/// The built-ins of Microsoft's DTrace for Windows that dtx does not have, with why: a
/// script that uses one is told so instead of "undefined". (`irql` is a variable; the others
/// are called.)
pub fn microsoft_only(name: &str) -> Option<&'static str> {
    Some(match name {
        "irql" => {
            "irql is Microsoft's DTrace variable for the processor's interrupt request level \
             when the probe fired: ETW records do not carry the IRQL, so dtx cannot give it"
        }
        "memref" => {
            "memref() is the DTrace (Microsoft's, FreeBSD's) subroutine that pairs an address \
             with a size for printm(): dtx has neither; tracemem(addr, size) prints the same \
             bytes"
        }
        "printm" => {
            "printm() is the DTrace (Microsoft's, FreeBSD's) action that prints the memory a \
             memref() names: dtx has neither; tracemem(addr, size) prints the same bytes"
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto_of(name: &str) -> Proto {
        parse_proto(lookup(name).expect(name).proto).expect(name)
    }

    #[test]
    fn table_sorted_and_unique() {
        for w in BUILTINS.windows(2) {
            assert!(w[0].name < w[1].name, "{} !< {}", w[0].name, w[1].name);
        }
    }

    #[test]
    fn every_proto_parses_and_matches_kind() {
        for b in BUILTINS {
            let p = parse_proto(b.proto).unwrap_or_else(|e| panic!("{}: {e}", b.name));
            assert_eq!(p.is_function, b.is_callable(), "{}", b.name);
            // Display round-trips the canonical text of the table.
            assert_eq!(p.to_string(), b.proto, "{}", b.name);
        }
    }

    #[test]
    fn lookup_every_entry() {
        for b in BUILTINS {
            let found = lookup(b.name).expect(b.name);
            assert_eq!(found.name, b.name);
            assert_eq!(found, b);
        }
        assert!(lookup("nosuchthing").is_none());
        assert!(lookup("").is_none());
        assert!(lookup("Printf").is_none());
        assert!(lookup("printf ").is_none());
    }

    #[test]
    fn arities() {
        assert_eq!(arity(&proto_of("substr")), (2, Some(3)));
        assert_eq!(arity(&proto_of("printf")), (1, None));
        assert_eq!(arity(&proto_of("alloca")), (1, Some(1)));
        assert_eq!(arity(&proto_of("count")), (0, Some(0)));
        assert_eq!(arity(&proto_of("clear")), (0, None));
        assert_eq!(arity(&proto_of("tracemem")), (2, None));
        assert_eq!(arity(&proto_of("lquantize")), (3, None));
        assert_eq!(arity(&proto_of("llquantize")), (5, None));
        assert_eq!(arity(&proto_of("copyinstr")), (1, Some(2)));
        assert_eq!(arity(&proto_of("setopt")), (1, Some(2)));
        assert_eq!(arity(&proto_of("rand")), (0, Some(0)));
        assert_eq!(arity(&proto_of("timestamp")), (0, Some(0)));
    }

    #[test]
    fn kinds_ids_and_types() {
        let b = lookup("printf").unwrap();
        assert_eq!(b.kind, BuiltinKind::Action);
        assert_eq!(b.id, act::BASE);
        assert_eq!(b.restricted, Restriction::ActionStatement);
        let b = lookup("quantize").unwrap();
        assert_eq!((b.kind, b.id), (BuiltinKind::AggFunc, 0x0707));
        let b = lookup("strtoll").unwrap();
        assert_eq!((b.kind, b.id), (BuiltinKind::Subroutine, 48));
        assert_eq!(lookup("arg9").unwrap().id, 0x010f);
        assert_eq!(lookup("args").unwrap().kind, BuiltinKind::Array);
        assert!(lookup("uregs").unwrap().writable);
        assert_eq!(lookup("curpsinfo").unwrap().proto, "psinfo_t *");
        assert_eq!(lookup("curpsinfo").unwrap().origin, Origin::DLibrary);
        assert_eq!(lookup("wstringof").unwrap().origin, Origin::Windows);
        assert_eq!(lookup("etwfield_str").unwrap().origin, Origin::Dtx);
        assert_eq!(lookup("zonename").unwrap().origin, Origin::Illumos);
        assert_eq!(lookup("self").unwrap().kind, BuiltinKind::Scope);
        assert_eq!(lookup("sym").unwrap().id, lookup("func").unwrap().id);
        assert_eq!(act::PRINT, 80);
        // Subroutine and action ids never overlap.
        for b in BUILTINS {
            match b.kind {
                BuiltinKind::Subroutine => assert!(
                    b.id <= subr::MAX || (b.origin == Origin::Dtx && b.id >= subr::DTX_BASE),
                    "{}",
                    b.name
                ),
                BuiltinKind::Action => assert!(b.id >= act::BASE && b.id < agg::BASE),
                BuiltinKind::AggFunc => assert!(b.id > agg::BASE && b.id <= agg::LLQUANTIZE),
                _ => {}
            }
        }
    }

    #[test]
    fn destructive_flags() {
        for name in [
            "system",
            "raise",
            "stop",
            "copyout",
            "copyoutstr",
            "chill",
            "breakpoint",
            "panic",
            "freopen",
            "lkd",
        ] {
            assert!(lookup(name).unwrap().destructive, "{name}");
        }
        for name in ["printf", "trace", "copyin", "exit", "ftruncate", "uregs"] {
            assert!(!lookup(name).unwrap().destructive, "{name}");
        }
        assert_eq!(BUILTINS.iter().filter(|b| b.destructive).count(), 10);
    }

    #[test]
    fn parse_details() {
        let p = parse_proto("string(const char *, int, [int])").unwrap();
        assert_eq!(p.ret, "string");
        assert_eq!(p.params.len(), 3);
        assert_eq!(p.params[0].ty, "const char *");
        assert!(!p.params[1].optional);
        assert!(p.params[2].optional && p.params[2].ty == "int");
        assert!(!p.varargs && p.is_function);

        let p = parse_proto("void(@, ...)").unwrap();
        assert!(p.varargs && p.params.len() == 1 && p.params[0].is_any());

        let p = parse_proto("  void *  (  size_t )  ").unwrap();
        assert_eq!(p.ret, "void *");
        assert_eq!(p.params[0].ty, "size_t");

        let p = parse_proto("genunix`kthread_t *").unwrap();
        assert!(!p.is_function && p.ret == "genunix`kthread_t *");

        let p = parse_proto("void( )").unwrap();
        assert!(p.params.is_empty() && !p.varargs);
    }

    #[test]
    fn parse_errors() {
        for bad in [
            "",
            "   ",
            "(int)",
            "void(",
            "void)",
            "void(int",
            "void(int))",
            "void((int))",
            "void(int,)",
            "void(,int)",
            "void(..., int)",
            "void(...,...)",
            "void([int], int)",
            "void([int)",
            "void([])",
            "void(int]",
            "a,b",
            "int[",
            "void(int)x",
        ] {
            assert!(parse_proto(bad).is_err(), "{bad:?} should fail");
        }
        let e = parse_proto("void([int], int)").unwrap_err();
        assert_eq!(e, "required arg#2 may not follow optional arg#1");
    }

    #[test]
    fn parse_never_panics() {
        let alphabet = [
            "(", ")", "[", "]", ",", "...", "@", " ", "int", "é", "*", "`", "\u{0}", ".",
        ];
        // Every string of up to four tokens.
        let mut stack: Vec<(String, usize)> = vec![(String::new(), 0)];
        while let Some((s, n)) = stack.pop() {
            if let Ok(p) = parse_proto(&s) {
                let _ = arity(&p);
                let _ = check_call_arity("f", &p, n);
                // Whatever parses must re-parse from its canonical form.
                assert_eq!(parse_proto(&p.to_string()), Ok(p.clone()), "{s:?}");
            }
            if n < 4 {
                for t in alphabet {
                    stack.push((format!("{s}{t}"), n + 1));
                }
            }
        }
    }

    #[test]
    fn messages() {
        let printf = proto_of("printf");
        assert_eq!(
            check_call_arity("printf", &printf, 0).unwrap_err(),
            "printf( ) prototype mismatch: 0 args passed, 1 expected"
        );
        assert!(check_call_arity("printf", &printf, 7).is_ok());
        let substr = proto_of("substr");
        assert!(check_call_arity("substr", &substr, 2).is_ok());
        assert!(check_call_arity("substr", &substr, 3).is_ok());
        assert_eq!(
            check_call_arity("substr", &substr, 1).unwrap_err(),
            "substr( ) prototype mismatch: 1 arg passed, at least 2 expected"
        );
        assert_eq!(
            check_call_arity("substr", &substr, 4).unwrap_err(),
            "substr( ) prototype mismatch: 4 args passed, at least 2 expected"
        );
        assert_eq!(
            check_call_arity("exit", &proto_of("exit"), 2).unwrap_err(),
            "exit( ) prototype mismatch: 2 args passed, 1 expected"
        );
        assert_eq!(
            proto_len_message("", "uregs", "[ ]", 2, false, false, 1),
            "uregs[ ] prototype mismatch: 2 args passed, 1 expected"
        );
        assert_eq!(
            proto_len_message("@", "a", "[ ]", 1, true, false, 2),
            "@a[ ] prototype mismatch: 1 key passed, 2 expected"
        );
        assert_eq!(
            proto_arg_message("", "strlen", "( )", false, 1, "const char *", "int"),
            "strlen( ) argument #1 is incompatible with prototype:\n\tprototype: const char *\n\t argument: int"
        );
        assert_eq!(
            proto_arg_message("@", "a", "[ ]", true, 2, "int", "string"),
            "@a[ ] key #2 is incompatible with prototype:\n\tprototype: int\n\t      key: string"
        );
        assert_eq!(
            proto_len_at_most_message("quantize", 3, 2),
            "quantize( ) prototype mismatch: 3 args passed, at most 2 expected"
        );
    }

    #[test]
    fn macro_vars() {
        assert!(MACRO_VARS.contains(&"target"));
        assert!(MACRO_VARS.contains(&"pid"));
        assert_eq!(MACRO_VARS.len(), 11);
    }
}
