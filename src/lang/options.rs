//! The table of D options and their value parsing.
//!
//! Options are set with `-x name[=value]` on the command line (and through the shorthand flags
//! `-a -b -D -F -H -I -L -q -U -w -X`, see [`crate::cli::args`]) and with
//! `#pragma D option name[=value]` inside a D program.  Names, kinds and validation follow
//! libdtrace's `dt_options.c`; error messages follow libdtrace's error table (`dt_error.c`).
//!
//! # How dtrace reports a failure
//!
//! * Command line: dtrace splits the `-x` argument at the first `=`, calls `dtrace_setopt()` and
//!   on failure prints `dtrace: failed to set -x <name>: <message>` (only the *name* appears,
//!   the value is cut off at the `=`) and exits with status **1** (`dfatal()`, not the usage
//!   status 2).  The shorthand flags print the flag and its argument instead, e.g.
//!   `dtrace: failed to set -b 4z: Invalid value for specified option` or
//!   `dtrace: failed to set -q: ...`.  See [`cmdline_error_message`].
//! * `#pragma D option`: compilation fails with tag `D_PRAGMA_OPTSET` and the message
//!   `failed to set option '<name>': <message>` when no value was given, or
//!   `failed to set option '<name>' to '<value>': <message>` otherwise.
//!   See [`pragma_error_message`].  Options that feed the preprocessor or the environment of
//!   `-c` commands (`cpphdrs cpppath define incdir undef ldpath setenv unsetenv stdc`) fail there
//!   with "Option cannot be used from within a D program" ([`SetContext::Pragma`]).
//!
//! # Values
//!
//! * [`OptKind::Flag`]: no value allowed; `-x zdefs=1` is "Invalid value for specified option".
//! * [`OptKind::Bool`] (libdtrace's `dt_opt_runtime`; `quiet`, `flowindent`, `destructive`,
//!   `nspec`, `stackframes`, `aggsortkey`, ...): these are really integer options whose
//!   "unset" state means *off*.  No value stores 0, which counts as **set** — so `-x quiet`,
//!   `-x quiet=1` and even `-x quiet=0` all turn quiet mode on.  An empty value or one of
//!   `no disable disabled false off unset` (any case) unsets it; `yes enable enabled true on set`
//!   store 1; anything else must be a non-negative integer in C `strtoull` base-0 syntax
//!   (`0x10`, `010` = 8).  Negative numbers and overflow are rejected.
//! * [`OptKind::Size`]: integer in `strtoull` base-0 syntax with an optional single suffix
//!   `k m g t` (any case, powers of 1024).  No value stores 0.  `-40`, `1b`, `1.5k` are invalid.
//!   Zero is accepted here (`bufsize=0` fails later, when tracing starts).
//! * [`OptKind::Rate`]: a number followed by an optional suffix, matched case-insensitively
//!   against the *whole* rest of the string: `ns nsec us usec ms msec s sec m min h hour d day`
//!   or `hz` (frequency: value becomes 1e9/n ns; `0hz` stays 0).  **A bare number is
//!   nanoseconds**, not hertz.  No value stores 0.  Values are stored in nanoseconds.
//!
//! Deviation: where libdtrace lets `number * suffix` wrap around 2^64 (e.g. `16777216t`
//! becomes 0), we reject the value as invalid instead.

use std::collections::BTreeMap;
use std::fmt;

/// The words the `oformat` option accepts (libxo's style names, `,pretty` as libxo spells it);
/// `crate::output::structured::OFormat` is what each means.
pub const OFORMAT_WORDS: &[&str] = &["text", "json", "json,pretty", "xml", "xml,pretty", "folded"];

/// How an option's value is parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptKind {
    /// Compile-time flag; takes no value (a value is `BadValue`).
    Flag,
    /// Flag that ignores any value given (`droptags`, `lazyload`).
    FlagAnyValue,
    /// `dt_opt_runtime`: absent value = 0 (set), boolean words, or a non-negative integer.
    Bool,
    /// Byte size with optional `k/m/g/t` suffix; absent value = 0.
    Size,
    /// Byte size that must be given (`preallocate`).
    SizeRequired,
    /// Time interval / rate in nanoseconds; absent value = 0.
    Rate,
    /// C `atoi()` integer that must be `>= min`; value required.
    Int {
        /// Smallest accepted value.
        min: i64,
    },
    /// Arbitrary string (path, file name); value required.
    Str,
    /// One of a fixed set of words (case-sensitive); value required.
    Enum(&'static [&'static str]),
    /// One of a fixed set of words (case-insensitive); value required.
    EnumNoCase(&'static [&'static str]),
    /// Stability attribute `name[/data[/class]]` (`amin`).
    Attr,
    /// D language version `major[.minor[.micro]]` (`version`).
    Version,
    /// Preprocessor argument (`define` → `-D`, `undef` → `-U`, `incdir` → `-I`).
    CppArg(&'static str),
    /// `setenv` (`true`) / `unsetenv` (`false`) for processes created with `-c`.
    Env(bool),
    /// A string value that may be given many times, each kept (dtx's `metric*` options, one
    /// per aggregation: `@name:value`); value required.
    List,
}

/// One entry of the option table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionDef {
    /// Option name as written after `-x` or `#pragma D option`.
    pub name: &'static str,
    /// How the value is parsed.
    pub kind: OptKind,
    /// Run-time (consumer/kernel) option as opposed to a compile-time option.
    pub runtime: bool,
    /// Dynamic run-time option: may be changed while tracing is active (`setopt()`).
    pub dynamic: bool,
}

const fn ct(name: &'static str, kind: OptKind) -> OptionDef {
    OptionDef {
        name,
        kind,
        runtime: false,
        dynamic: false,
    }
}

const fn rt(name: &'static str, kind: OptKind) -> OptionDef {
    OptionDef {
        name,
        kind,
        runtime: true,
        dynamic: false,
    }
}

const fn drt(name: &'static str, kind: OptKind) -> OptionDef {
    OptionDef {
        name,
        kind,
        runtime: true,
        dynamic: true,
    }
}

/// Every D option: compile-time, then run-time, then dynamic run-time options.
pub const OPTIONS: &[OptionDef] = &[
    // Compile-time options.
    ct("aggpercpu", OptKind::Flag),
    ct("amin", OptKind::Attr),
    ct("argref", OptKind::Flag),
    ct("core", OptKind::Flag),
    ct("cpp", OptKind::Flag),
    ct("cpphdrs", OptKind::Flag),
    ct("cpppath", OptKind::Str),
    ct("ctypes", OptKind::Str),
    ct("defaultargs", OptKind::Flag),
    ct("dtypes", OptKind::Str),
    ct("debug", OptKind::Flag),
    ct("define", OptKind::CppArg("-D")),
    ct("droptags", OptKind::FlagAnyValue),
    ct("empty", OptKind::Flag),
    ct("encoding", OptKind::Enum(&["ascii", "utf8"])),
    ct("errtags", OptKind::Flag),
    ct(
        "evaltime",
        OptKind::Enum(&["exec", "preinit", "postinit", "main"]),
    ),
    ct("incdir", OptKind::CppArg("-I")),
    ct("iregs", OptKind::Int { min: 1 }),
    ct("kdefs", OptKind::Flag),
    ct("knodefs", OptKind::Flag),
    ct("late", OptKind::Enum(&["dynamic", "static"])),
    ct("lazyload", OptKind::FlagAnyValue),
    ct("ldpath", OptKind::Str),
    ct("libdir", OptKind::Str),
    ct(
        "linkmode",
        OptKind::Enum(&["kernel", "primary", "dynamic", "static"]),
    ),
    ct("linktype", OptKind::EnumNoCase(&["elf", "dof"])),
    ct("nolibs", OptKind::Flag),
    ct("pgmax", OptKind::Int { min: 0 }),
    ct("preallocate", OptKind::SizeRequired),
    ct("pspec", OptKind::Flag),
    ct("setenv", OptKind::Env(true)),
    ct("stdc", OptKind::Enum(&["a", "c", "s", "t"])),
    ct("strip", OptKind::Flag),
    ct("syslibdir", OptKind::Str),
    // dtx: the symbol path of the run, in place of _NT_SYMBOL_PATH (docs/symbols.md)
    ct("sympath", OptKind::Str),
    ct("tree", OptKind::Int { min: 1 }),
    ct("tregs", OptKind::Int { min: 1 }),
    ct("udefs", OptKind::Flag),
    ct("undef", OptKind::CppArg("-U")),
    ct("unodefs", OptKind::Flag),
    ct("unsetenv", OptKind::Env(false)),
    ct("verbose", OptKind::Flag),
    ct("version", OptKind::Version),
    ct("zdefs", OptKind::Flag),
    // Run-time options (not changeable while tracing is active).
    rt("aggsize", OptKind::Size),
    // dtx: whether clauses may run in the kernel as BPF programs on Linux (docs/live-linux.md)
    rt("bpf", OptKind::Enum(&["on", "off", "verbose"])),
    rt("bufsize", OptKind::Size),
    rt("bufpolicy", OptKind::Enum(&["ring", "fill", "switch"])),
    rt("bufresize", OptKind::Enum(&["auto", "manual"])),
    rt("cleanrate", OptKind::Rate),
    rt("cpu", OptKind::Bool),
    rt("destructive", OptKind::Bool),
    rt("dynvarsize", OptKind::Size),
    // dtx: the fpid ring of a traced process and how long a hit waits for room in it
    // (docs/fpid.md)
    rt("fpidbufsize", OptKind::Size),
    rt("fpidwait", OptKind::Int { min: 0 }),
    rt("grabanon", OptKind::Bool),
    rt("jstackframes", OptKind::Bool),
    rt("jstackstrsize", OptKind::Size),
    rt("nspec", OptKind::Bool),
    // FreeBSD's structured output (dtrace(1) STRUCTURED OUTPUT), and dtx's folded stacks
    rt("oformat", OptKind::Enum(OFORMAT_WORDS)),
    rt("pidmode", OptKind::Enum(&["auto", "ptrace", "uprobe"])),
    rt("specsize", OptKind::Size),
    // dtx: how far ahead of a trace's walk its stacks are read (0: all before the run)
    rt("stackwindow", OptKind::Rate),
    rt("stackframes", OptKind::Bool),
    rt("statusrate", OptKind::Rate),
    rt("strsize", OptKind::Size),
    rt("ustackframes", OptKind::Bool),
    rt("temporal", OptKind::Bool),
    // dtx: the Prometheus exporter (docs/metrics.md): where it serves, and how aggregations
    // become metrics
    rt("metrics", OptKind::Str),
    rt("metrichelp", OptKind::List),
    rt("metriclabels", OptKind::List),
    rt("metriclimit", OptKind::Int { min: 1 }),
    rt("metricstacks", OptKind::Flag),
    rt("metrictype", OptKind::List),
    rt("metricunit", OptKind::List),
    // Dynamic run-time options.
    drt("agghist", OptKind::Bool),
    drt("aggpack", OptKind::Bool),
    drt("aggrate", OptKind::Rate),
    drt("aggsortkey", OptKind::Bool),
    drt("aggsortkeypos", OptKind::Bool),
    drt("aggsortpos", OptKind::Bool),
    drt("aggsortrev", OptKind::Bool),
    drt("aggzoom", OptKind::Bool),
    drt("flowindent", OptKind::Bool),
    drt("quiet", OptKind::Bool),
    drt("rawbytes", OptKind::Bool),
    drt("stackindent", OptKind::Bool),
    drt("switchrate", OptKind::Rate),
];

/// Looks an option up by its exact (case-sensitive) name.
pub fn lookup(name: &str) -> Option<&'static OptionDef> {
    OPTIONS.iter().find(|d| d.name == name)
}

/// Why setting an option failed.  [`OptionError::message`] gives libdtrace's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionError {
    /// EDT_BADOPTNAME.
    Unknown,
    /// EDT_BADOPTVAL.
    BadValue,
    /// EDT_BADOPTCTX: option not allowed in `#pragma D option`.
    BadContext,
    /// EDT_ACTIVE: non-dynamic run-time option changed while tracing is active.
    Active,
    /// EOVERFLOW: `strsize` larger than 2^32-1.
    Overflow,
    /// EDT_VERSINVAL.
    VersionInvalid,
    /// EDT_VERSUNDEF.
    VersionUndefined,
    /// EDT_VERSREDUCED.
    VersionReduced,
}

impl OptionError {
    /// libdtrace's message for this error (`dtrace_errmsg()`).
    pub fn message(&self) -> &'static str {
        match self {
            OptionError::Unknown => "Invalid option name",
            OptionError::BadValue => "Invalid value for specified option",
            OptionError::BadContext => "Option cannot be used from within a D program",
            OptionError::Active => "Operation illegal when tracing is active",
            OptionError::Overflow => "Value too large for defined data type",
            OptionError::VersionInvalid => "Version is not properly formatted or is too large",
            OptionError::VersionUndefined => "Requested version is not supported by compiler",
            OptionError::VersionReduced => "Requested version conflicts with earlier setting",
        }
    }
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for OptionError {}

/// The `D_PRAGMA_OPTSET` message for a failed `#pragma D option name[=value]`
/// (without trailing newline), as printed by libdtrace's `dt_pragma_option()`.
pub fn pragma_error_message(name: &str, value: Option<&str>, err: &OptionError) -> String {
    match value {
        None => format!("failed to set option '{}': {}", name, err.message()),
        Some(v) => format!(
            "failed to set option '{}' to '{}': {}",
            name,
            v,
            err.message()
        ),
    }
}

/// The line dtrace prints (without newline) when a command-line option fails to apply;
/// the process then exits with status 1.  `what` is what dtrace echoes: `-x <name>` for `-x`
/// (name only), `-b <arg>`, `-D <arg>`, `-I <arg>`, `-L <arg>`, `-U <arg>`, `-X <arg>`, or
/// `-a`, `-F`, `-H`, `-q`, `-w`.  Example: `dtx: failed to set -x quiet: Invalid value for
/// specified option`.
pub fn cmdline_error_message(prog: &str, what: &str, err: &OptionError) -> String {
    format!("{}: failed to set {}: {}", prog, what, err.message())
}

/// Where an option is being set; decides the context-dependent errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SetContext {
    /// `-x` and the shorthand flags, before tracing starts.
    #[default]
    CommandLine,
    /// `#pragma D option` while compiling (EDT_BADOPTCTX for preprocessor/env options).
    Pragma,
    /// While tracing is active (e.g. the `setopt()` action): only dynamic options may change.
    Active,
}

/// A stored option value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OptValue {
    /// A flag option that is on.
    Set,
    /// A numeric value: sizes in bytes, rates in nanoseconds, counts, booleans (`Bool` kind).
    Int(i64),
    /// A string or enumerated value.
    Str(String),
}

/// A `setenv`/`unsetenv` request for processes started with `-c`, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvOp {
    /// `setenv=NAME=VALUE` (the whole argument, as dtrace puts it into the environment).
    Set(String),
    /// `unsetenv=NAME`.
    Unset(String),
}

/// D language versions the compiler knows (`_dtrace_versions`).
const VERSIONS: &[(u32, u32, u32)] = &[
    (1, 0, 0),
    (1, 1, 0),
    (1, 2, 0),
    (1, 2, 1),
    (1, 2, 2),
    (1, 3, 0),
    (1, 4, 0),
    (1, 4, 1),
    (1, 5, 0),
    (1, 6, 0),
    (1, 6, 1),
    (1, 6, 2),
    (1, 6, 3),
    (1, 7, 0),
    (1, 7, 1),
    (1, 8, 0),
    (1, 8, 1),
    (1, 9, 0),
    (1, 9, 1),
    (1, 10, 0),
    (1, 11, 0),
    (1, 12, 0),
    (1, 12, 1),
    (1, 13, 0),
];

/// The latest D version (`DT_VERS_LATEST`).
pub const LATEST_VERSION: (u32, u32, u32) = (1, 13, 0);

/// Default `bufsize`/`aggsize` the dtrace command sets before processing options (4m).
pub const DEFAULT_BUFSIZE: u64 = 4 * 1024 * 1024;
/// Default `dynvarsize` (the kernel's `dtrace_dstate_defsize`, 1m).
pub const DEFAULT_DYNVARSIZE: u64 = 1024 * 1024;
/// Default `specsize` (32k).
pub const DEFAULT_SPECSIZE: u64 = 32 * 1024;
/// Default `strsize`.
pub const DEFAULT_STRSIZE: u64 = 256;
/// Default `nspec`.
pub const DEFAULT_NSPEC: u64 = 1;
/// Default `stackframes`.
pub const DEFAULT_STACKFRAMES: u64 = 20;
/// Default `ustackframes` (illumos; the Windows port's kernel uses 20).
pub const DEFAULT_USTACKFRAMES: u64 = 100;
/// Default `jstackframes`.
pub const DEFAULT_JSTACKFRAMES: u64 = 50;
/// Default `jstackstrsize`.
pub const DEFAULT_JSTACKSTRSIZE: u64 = 512;
/// Default `aggrate`, `switchrate` and `statusrate` (1 Hz, in nanoseconds).
pub const DEFAULT_RATE_NS: u64 = 1_000_000_000;
/// Default `cleanrate` (101 Hz, in nanoseconds).
pub const DEFAULT_CLEANRATE_NS: u64 = 9_900_990;

/// The set of D options in effect.  Unset options are absent; getters supply defaults.
#[derive(Clone, Debug)]
pub struct DOptions {
    values: BTreeMap<&'static str, OptValue>,
    cpp_args: Vec<String>,
    lib_dirs: Vec<String>,
    env: Vec<EnvOp>,
    /// The values of `List` options, in the order given.
    lists: BTreeMap<&'static str, Vec<String>>,
    vmax: (u32, u32, u32),
}

impl Default for DOptions {
    fn default() -> Self {
        DOptions {
            values: BTreeMap::new(),
            cpp_args: Vec::new(),
            lib_dirs: Vec::new(),
            env: Vec::new(),
            lists: BTreeMap::new(),
            vmax: LATEST_VERSION,
        }
    }
}

/// Options that may not be set by `#pragma D option` (EDT_BADOPTCTX).
/// `metrics`, the address the exporter binds, is the user's choice on the command line, never
/// a script's.
const NOT_IN_PRAGMA: &[&str] = &[
    "metrics", "cpphdrs", "cpppath", "define", "incdir", "undef", "ldpath", "setenv", "unsetenv",
    "stdc",
];

impl DOptions {
    /// Empty option set (everything at its default).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets an option from the command line (`-x name[=value]`).
    pub fn set(&mut self, name: &str, value: Option<&str>) -> Result<(), OptionError> {
        self.set_in(SetContext::CommandLine, name, value)
    }

    /// Sets an option from `#pragma D option name[=value]`.
    pub fn set_pragma(&mut self, name: &str, value: Option<&str>) -> Result<(), OptionError> {
        self.set_in(SetContext::Pragma, name, value)
    }

    /// Sets `-x`-style text `name[=value]`, splitting at the first `=` as dtrace does.
    pub fn set_assignment(&mut self, ctx: SetContext, text: &str) -> Result<(), OptionError> {
        match text.split_once('=') {
            Some((n, v)) => self.set_in(ctx, n, Some(v)),
            None => self.set_in(ctx, text, None),
        }
    }

    /// Sets an option in the given context.  On error nothing changes.
    pub fn set_in(
        &mut self,
        ctx: SetContext,
        name: &str,
        value: Option<&str>,
    ) -> Result<(), OptionError> {
        let def = lookup(name).ok_or(OptionError::Unknown)?;
        if def.runtime && !def.dynamic && ctx == SetContext::Active {
            return Err(OptionError::Active);
        }
        let in_pragma = ctx == SetContext::Pragma;
        let ctx_check = || {
            if in_pragma && NOT_IN_PRAGMA.contains(&def.name) {
                Err(OptionError::BadContext)
            } else {
                Ok(())
            }
        };
        let key = def.name;
        match def.kind {
            OptKind::Flag => {
                if value.is_some() {
                    return Err(OptionError::BadValue);
                }
                ctx_check()?;
                match key {
                    "kdefs" => {
                        self.values.remove("knodefs");
                    }
                    "udefs" => {
                        self.values.remove("unodefs");
                    }
                    "cpphdrs" => {
                        self.cpp_args.push("-H".to_string());
                        self.values.insert(key, OptValue::Set);
                    }
                    _ => {
                        self.values.insert(key, OptValue::Set);
                    }
                }
            }
            OptKind::FlagAnyValue => {
                self.values.insert(key, OptValue::Set);
            }
            OptKind::Bool => match parse_runtime_value(value)? {
                Some(v) => {
                    self.values.insert(key, OptValue::Int(v));
                }
                None => {
                    self.values.remove(key);
                }
            },
            OptKind::Size | OptKind::SizeRequired => {
                if def.kind == OptKind::SizeRequired && value.is_none() {
                    return Err(OptionError::BadValue);
                }
                let v = match value {
                    Some(s) => parse_size(s)?,
                    None => 0,
                };
                if key == "strsize" && v > u64::from(u32::MAX) {
                    return Err(OptionError::Overflow);
                }
                self.values.insert(key, OptValue::Int(v as i64));
            }
            OptKind::Rate => {
                let v = match value {
                    Some(s) => parse_rate(s)?,
                    None => 0,
                };
                self.values.insert(key, OptValue::Int(v as i64));
            }
            OptKind::Int { min } => {
                let v = value.map(c_atoi).ok_or(OptionError::BadValue)?;
                if v < min {
                    return Err(OptionError::BadValue);
                }
                self.values.insert(key, OptValue::Int(v));
            }
            OptKind::Str => {
                let v = value.ok_or(OptionError::BadValue)?;
                ctx_check()?;
                if key == "libdir" {
                    self.lib_dirs.push(v.to_string());
                }
                self.values.insert(key, OptValue::Str(v.to_string()));
            }
            OptKind::Enum(words) | OptKind::EnumNoCase(words) => {
                let v = value.ok_or(OptionError::BadValue)?;
                ctx_check()?;
                let nocase = matches!(def.kind, OptKind::EnumNoCase(_));
                let w = words
                    .iter()
                    .find(|w| {
                        if nocase {
                            w.eq_ignore_ascii_case(v)
                        } else {
                            **w == v
                        }
                    })
                    .ok_or(OptionError::BadValue)?;
                self.values.insert(key, OptValue::Str((*w).to_string()));
            }
            OptKind::Attr => {
                let v = value.ok_or(OptionError::BadValue)?;
                let attr = parse_attr(v).ok_or(OptionError::BadValue)?;
                self.values.insert(key, OptValue::Str(attr));
            }
            OptKind::Version => {
                let v = value.ok_or(OptionError::BadValue)?;
                let ver = parse_version(v).ok_or(OptionError::VersionInvalid)?;
                if !VERSIONS.contains(&ver) {
                    return Err(OptionError::VersionUndefined);
                }
                if ver > self.vmax {
                    return Err(OptionError::VersionReduced);
                }
                self.vmax = ver;
                self.values.insert(key, OptValue::Str(version_string(ver)));
            }
            OptKind::CppArg(flag) => {
                let v = value.ok_or(OptionError::BadValue)?;
                ctx_check()?;
                self.cpp_args.push(format!("{}{}", flag, v));
                self.values.insert(key, OptValue::Str(v.to_string()));
            }
            OptKind::List => {
                let v = value.ok_or(OptionError::BadValue)?;
                ctx_check()?;
                self.lists.entry(key).or_default().push(v.to_string());
                self.values.insert(key, OptValue::Str(v.to_string()));
            }
            OptKind::Env(set) => {
                ctx_check()?;
                let v = value.ok_or(OptionError::BadValue)?;
                if !set && v.contains('=') {
                    return Err(OptionError::BadValue);
                }
                self.env.push(if set {
                    EnvOp::Set(v.to_string())
                } else {
                    EnvOp::Unset(v.to_string())
                });
            }
        }
        Ok(())
    }

    /// The stored value of an option, `None` when unset (or unknown).
    pub fn get(&self, name: &str) -> Option<&OptValue> {
        self.values.get(name)
    }

    /// True when the option is set at all (for `Bool` options this includes the value 0).
    pub fn is_set(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// Every value a `List` option was given, in order.
    pub fn list(&self, name: &str) -> &[String] {
        self.lists.get(name).map_or(&[], Vec::as_slice)
    }

    /// The integer value of a numeric option, if set.
    pub fn int(&self, name: &str) -> Option<i64> {
        match self.values.get(name) {
            Some(OptValue::Int(v)) => Some(*v),
            _ => None,
        }
    }

    /// The string value of a string/enumerated option, if set.
    pub fn str_value(&self, name: &str) -> Option<&str> {
        match self.values.get(name) {
            Some(OptValue::Str(s)) => Some(s),
            _ => None,
        }
    }

    fn uint_or(&self, name: &str, default: u64) -> u64 {
        self.int(name).map_or(default, |v| v.max(0) as u64)
    }

    /// Preprocessor arguments from `define`/`undef`/`incdir`/`cpphdrs`, in order
    /// (`-DNAME[=def]`, `-UNAME`, `-Ipath`, `-H`).
    pub fn cpp_args(&self) -> &[String] {
        &self.cpp_args
    }

    /// Library directories added with `libdir` (`-L`), in order.
    pub fn lib_dirs(&self) -> &[String] {
        &self.lib_dirs
    }

    /// `setenv`/`unsetenv` requests, in order.
    pub fn env_ops(&self) -> &[EnvOp] {
        &self.env
    }

    /// The D version in effect (`version` option; latest by default).
    pub fn version(&self) -> (u32, u32, u32) {
        self.vmax
    }

    /// `quiet` (`-q`).
    pub fn quiet(&self) -> bool {
        self.is_set("quiet")
    }
    /// `flowindent` (`-F`).
    pub fn flowindent(&self) -> bool {
        self.is_set("flowindent")
    }
    /// `destructive` (`-w`).
    pub fn destructive(&self) -> bool {
        self.is_set("destructive")
    }
    /// `grabanon` (`-a`).
    pub fn grabanon(&self) -> bool {
        self.is_set("grabanon")
    }
    /// `temporal`.
    pub fn temporal(&self) -> bool {
        self.is_set("temporal")
    }
    /// `aggsortkey`.
    pub fn aggsortkey(&self) -> bool {
        self.is_set("aggsortkey")
    }
    /// `aggsortrev`.
    pub fn aggsortrev(&self) -> bool {
        self.is_set("aggsortrev")
    }
    /// `aggsortpos`: aggregation (by position) to sort by.
    pub fn aggsortpos(&self) -> Option<u64> {
        self.int("aggsortpos").map(|v| v.max(0) as u64)
    }
    /// `aggsortkeypos`: key position to sort by.
    pub fn aggsortkeypos(&self) -> Option<u64> {
        self.int("aggsortkeypos").map(|v| v.max(0) as u64)
    }
    /// `aggpack`.
    pub fn aggpack(&self) -> bool {
        self.is_set("aggpack")
    }
    /// `agghist`.
    pub fn agghist(&self) -> bool {
        self.is_set("agghist")
    }
    /// `aggzoom`.
    pub fn aggzoom(&self) -> bool {
        self.is_set("aggzoom")
    }
    /// `aggpercpu`.
    pub fn aggpercpu(&self) -> bool {
        self.is_set("aggpercpu")
    }
    /// `rawbytes`.
    pub fn rawbytes(&self) -> bool {
        self.is_set("rawbytes")
    }
    /// `stackindent` (indent for stack output; set but no value = 0).
    pub fn stackindent(&self) -> Option<u64> {
        self.int("stackindent").map(|v| v.max(0) as u64)
    }
    /// `cpu`: only trace on this CPU.
    pub fn cpu(&self) -> Option<u64> {
        self.int("cpu").map(|v| v.max(0) as u64)
    }
    /// `errtags`: prefix compiler errors with their D_* tag.
    pub fn errtags(&self) -> bool {
        self.is_set("errtags")
    }
    /// `droptags`: prefix drop messages with their tag.
    pub fn droptags(&self) -> bool {
        self.is_set("droptags")
    }
    /// `defaultargs`: unreferenced `$n` macro arguments default to 0 / "".
    pub fn defaultargs(&self) -> bool {
        self.is_set("defaultargs")
    }
    /// `zdefs` (`-Z`): permit probe descriptions that match zero probes.
    pub fn zdefs(&self) -> bool {
        self.is_set("zdefs")
    }
    /// `cpp` (`-C`): run the preprocessor.
    pub fn cpp(&self) -> bool {
        self.is_set("cpp")
    }
    /// `cpphdrs` (`-H`).
    pub fn cpphdrs(&self) -> bool {
        self.is_set("cpphdrs")
    }
    /// `argref`: permit references to unused macro arguments.
    pub fn argref(&self) -> bool {
        self.is_set("argref")
    }
    /// `empty`: permit compiling an empty program.
    pub fn empty(&self) -> bool {
        self.is_set("empty")
    }
    /// `knodefs`: permit unresolved kernel symbols (cleared by `kdefs`).
    pub fn knodefs(&self) -> bool {
        self.is_set("knodefs")
    }
    /// `unodefs`: permit unresolved user symbols (cleared by `udefs`).
    pub fn unodefs(&self) -> bool {
        self.is_set("unodefs")
    }
    /// `nolibs`: do not load D libraries.
    pub fn nolibs(&self) -> bool {
        self.is_set("nolibs")
    }
    /// `pspec`: interpret ambiguous specifiers as probe names.
    pub fn pspec(&self) -> bool {
        self.is_set("pspec")
    }
    /// `verbose` (`-S`): print D compiler intermediate code.
    pub fn verbose(&self) -> bool {
        self.is_set("verbose")
    }
    /// `lazyload`.
    pub fn lazyload(&self) -> bool {
        self.is_set("lazyload")
    }
    /// `debug`.
    pub fn debug(&self) -> bool {
        self.is_set("debug")
    }
    /// `linkmode`: `kernel` (default), `primary`, `dynamic` or `static`.
    pub fn linkmode(&self) -> &str {
        self.str_value("linkmode").unwrap_or("kernel")
    }
    /// `bufpolicy`: `switch` (default), `fill` or `ring`.
    pub fn bufpolicy(&self) -> &str {
        self.str_value("bufpolicy").unwrap_or("switch")
    }
    /// `bufresize`: `auto` (default) or `manual`.
    pub fn bufresize(&self) -> &str {
        self.str_value("bufresize").unwrap_or("auto")
    }
    /// `encoding`: `ascii` or `utf8` if set.
    pub fn encoding(&self) -> Option<&str> {
        self.str_value("encoding")
    }
    /// `strsize` in bytes (default 256).
    pub fn strsize(&self) -> u64 {
        self.uint_or("strsize", DEFAULT_STRSIZE)
    }
    /// `bufsize` in bytes (default 4m, what the dtrace command sets).
    pub fn bufsize(&self) -> u64 {
        self.uint_or("bufsize", DEFAULT_BUFSIZE)
    }
    /// `aggsize` in bytes (default 4m).
    pub fn aggsize(&self) -> u64 {
        self.uint_or("aggsize", DEFAULT_BUFSIZE)
    }
    /// `dynvarsize` in bytes (default 1m).
    pub fn dynvarsize(&self) -> u64 {
        self.uint_or("dynvarsize", DEFAULT_DYNVARSIZE)
    }
    /// `specsize` in bytes (default 32k).
    pub fn specsize(&self) -> u64 {
        self.uint_or("specsize", DEFAULT_SPECSIZE)
    }
    /// `nspec` (default 1).
    pub fn nspec(&self) -> u64 {
        self.uint_or("nspec", DEFAULT_NSPEC)
    }
    /// `stackframes` (default 20).
    pub fn stackframes(&self) -> u64 {
        self.uint_or("stackframes", DEFAULT_STACKFRAMES)
    }
    /// `ustackframes` (default 100).
    pub fn ustackframes(&self) -> u64 {
        self.uint_or("ustackframes", DEFAULT_USTACKFRAMES)
    }
    /// `jstackframes` (default 50).
    pub fn jstackframes(&self) -> u64 {
        self.uint_or("jstackframes", DEFAULT_JSTACKFRAMES)
    }
    /// `jstackstrsize` (default 512).
    pub fn jstackstrsize(&self) -> u64 {
        self.uint_or("jstackstrsize", DEFAULT_JSTACKSTRSIZE)
    }
    /// `aggrate` in nanoseconds (default 1s).
    pub fn aggrate(&self) -> u64 {
        self.uint_or("aggrate", DEFAULT_RATE_NS)
    }
    /// `switchrate` in nanoseconds (default 1s).
    pub fn switchrate(&self) -> u64 {
        self.uint_or("switchrate", DEFAULT_RATE_NS)
    }
    /// `statusrate` in nanoseconds (default 1s; the kernel clamps it to at most 10s).
    pub fn statusrate(&self) -> u64 {
        self.uint_or("statusrate", DEFAULT_RATE_NS)
    }
    /// `cleanrate` in nanoseconds (default 101 Hz; the kernel clamps it to [200us, 60s]
    /// and turns 0 into 60s).
    pub fn cleanrate(&self) -> u64 {
        self.uint_or("cleanrate", DEFAULT_CLEANRATE_NS)
    }
}

/// Result of C `strtoull(s, &end, 0)`.
struct StrToULL {
    value: u64,
    /// Byte index of the first unparsed character (0 when nothing was converted).
    end: usize,
    /// `errno == ERANGE`.
    overflow: bool,
}

fn strtoull(s: &str) -> StrToULL {
    let b = s.as_bytes();
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    let mut i = 0;
    while matches!(at(i), b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let mut neg = false;
    if at(i) == b'+' || at(i) == b'-' {
        neg = at(i) == b'-';
        i += 1;
    }
    let base: u64 = if at(i) == b'0' && (at(i + 1) | 0x20) == b'x' && at(i + 2).is_ascii_hexdigit()
    {
        i += 2;
        16
    } else if at(i) == b'0' {
        8
    } else {
        10
    };
    let start = i;
    let mut value: u64 = 0;
    let mut overflow = false;
    while let Some(d) = (at(i) as char).to_digit(base as u32) {
        match value
            .checked_mul(base)
            .and_then(|v| v.checked_add(u64::from(d)))
        {
            Some(v) => value = v,
            None => overflow = true,
        }
        i += 1;
    }
    if i == start {
        return StrToULL {
            value: 0,
            end: 0,
            overflow: false,
        };
    }
    let value = if overflow {
        u64::MAX
    } else if neg {
        value.wrapping_neg()
    } else {
        value
    };
    StrToULL {
        value,
        end: i,
        overflow,
    }
}

/// C `atoi()`: optional whitespace and sign, then decimal digits; garbage after is ignored,
/// no digits gives 0.  Saturates instead of overflowing.
fn c_atoi(s: &str) -> i64 {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let mut v: i64 = 0;
    for c in t.bytes().take_while(u8::is_ascii_digit) {
        v = v.saturating_mul(10).saturating_add(i64::from(c - b'0'));
    }
    let v = if neg { -v } else { v };
    v.clamp(i64::from(i32::MIN), i64::from(i32::MAX))
}

/// Parses a `dt_opt_runtime` value: `None` input means "set to 0"; the result `None` means
/// "unset" (empty string or a negative boolean word).
pub fn parse_runtime_value(value: Option<&str>) -> Result<Option<i64>, OptionError> {
    const COUPLES: &[(&str, &str)] = &[
        ("yes", "no"),
        ("enable", "disable"),
        ("enabled", "disabled"),
        ("true", "false"),
        ("on", "off"),
        ("set", "unset"),
    ];
    let Some(arg) = value else {
        return Ok(Some(0));
    };
    if arg.is_empty() {
        return Ok(None);
    }
    for (pos, neg) in COUPLES {
        if pos.eq_ignore_ascii_case(arg) {
            return Ok(Some(1));
        }
        if neg.eq_ignore_ascii_case(arg) {
            return Ok(None);
        }
    }
    let r = strtoull(arg);
    let v = r.value as i64;
    if r.end != arg.len() || r.overflow || v < 0 {
        return Err(OptionError::BadValue);
    }
    Ok(Some(v))
}

/// Parses a size (`dt_optval_parse`): base-0 integer with an optional `k/m/g/t` suffix.
pub fn parse_size(arg: &str) -> Result<u64, OptionError> {
    let len = arg.len();
    let mul: u64 = match arg.as_bytes().last() {
        Some(b't' | b'T') => 1 << 40,
        Some(b'g' | b'G') => 1 << 30,
        Some(b'm' | b'M') => 1 << 20,
        Some(b'k' | b'K') => 1 << 10,
        _ => 1,
    };
    let r = strtoull(arg);
    let end_ok = if mul > 1 {
        r.end == len - 1
    } else {
        r.end == len
    };
    if !end_ok || r.overflow {
        return Err(OptionError::BadValue);
    }
    match r.value.checked_mul(mul) {
        Some(v) if (v as i64) >= 0 => Ok(v),
        _ => Err(OptionError::BadValue),
    }
}

/// Parses a rate or interval (`dt_opt_rate`) into nanoseconds.  A bare number is nanoseconds;
/// `hz` converts a frequency (`0hz` is 0).
pub fn parse_rate(arg: &str) -> Result<u64, OptionError> {
    const NS: u64 = 1;
    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;
    const SUFFIXES: &[(&str, u64)] = &[
        ("ns", NS),
        ("nsec", NS),
        ("us", US),
        ("usec", US),
        ("ms", MS),
        ("msec", MS),
        ("s", S),
        ("sec", S),
        ("m", S * 60),
        ("min", S * 60),
        ("h", S * 3600),
        ("hour", S * 3600),
        ("d", S * 86400),
        ("day", S * 86400),
        ("hz", 0),
    ];
    let r = strtoull(arg);
    let rest = &arg[r.end..];
    let mul = match SUFFIXES.iter().find(|(n, _)| n.eq_ignore_ascii_case(rest)) {
        Some((_, m)) => *m,
        None if rest.is_empty() => 1,
        None => return Err(OptionError::BadValue),
    };
    if (r.value as i64) < 0 {
        return Err(OptionError::BadValue);
    }
    if mul == 0 {
        return Ok(S.checked_div(r.value).unwrap_or(0));
    }
    match r.value.checked_mul(mul) {
        Some(v) if (v as i64) >= 0 => Ok(v),
        _ => Err(OptionError::BadValue),
    }
}

/// `dt_version_str2num`: up to three dot-separated decimal numbers (missing parts are 0),
/// limited to 255.4095.4095.
fn parse_version(s: &str) -> Option<(u32, u32, u32)> {
    let mut n = [0u32; 3];
    let mut i = 0;
    for c in s.chars() {
        if let Some(d) = c.to_digit(10) {
            n[i] = n[i].saturating_mul(10).saturating_add(d);
        } else if c == '.' && i < 2 {
            i += 1;
        } else {
            return None;
        }
    }
    if n[0] > 0xff || n[1] > 0xfff || n[2] > 0xfff {
        return None;
    }
    Some((n[0], n[1], n[2]))
}

fn version_string(v: (u32, u32, u32)) -> String {
    if v.2 == 0 {
        format!("{}.{}", v.0, v.1)
    } else {
        format!("{}.{}.{}", v.0, v.1, v.2)
    }
}

/// `dtrace_str2attr`: `name[/data[/class]]`, names matched case-insensitively; missing parts
/// default to the maximum (`Standard`/`Standard`/`Common`).  Returns the canonical text.
fn parse_attr(s: &str) -> Option<String> {
    const STABILITY: &[&str] = &[
        "Internal", "Private", "Obsolete", "External", "Unstable", "Evolving", "Stable", "Standard",
    ];
    const CLASS: &[&str] = &["Unknown", "CPU", "Platform", "Group", "ISA", "Common"];
    let mut out = ["Standard", "Standard", "Common"];
    let mut rest = s;
    for (i, slot) in out.iter_mut().enumerate() {
        if rest.is_empty() {
            break;
        }
        let (part, tail) = rest.split_once('/').unwrap_or((rest, ""));
        let table = if i < 2 { STABILITY } else { CLASS };
        *slot = *table.iter().find(|w| w.eq_ignore_ascii_case(part))?;
        rest = tail;
        if i == 2 && !rest.is_empty() {
            return None;
        }
    }
    Some(out.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        for (i, d) in OPTIONS.iter().enumerate() {
            assert!(
                OPTIONS[i + 1..].iter().all(|e| e.name != d.name),
                "duplicate {}",
                d.name
            );
            assert!(!d.dynamic || d.runtime);
        }
        assert!(lookup("quiet").unwrap().dynamic);
        assert!(lookup("bufsize").unwrap().runtime);
        assert!(!lookup("bufsize").unwrap().dynamic);
        assert!(!lookup("zdefs").unwrap().runtime);
        assert!(lookup("Quiet").is_none());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("10K"), Ok(10240));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("32m"), Ok(32 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert_eq!(parse_size("100t"), Ok(100 << 40));
        assert_eq!(parse_size("0x10"), Ok(16));
        assert_eq!(parse_size("010"), Ok(8));
        assert_eq!(parse_size("0x10k"), Ok(16 << 10));
        assert_eq!(parse_size("-0"), Ok(0));
        assert_eq!(parse_size(""), Ok(0));
        assert_eq!(parse_size("k"), Ok(0)); // strtoull converts nothing, suffix alone
        for bad in [
            "-40",
            "-72",
            "-1k",
            "1b",
            "1.5k",
            "12kb",
            "abc",
            "08",
            "1 k",
            "k1",
            "99999999999999999999",
            "9007199254740992k",
            "16777216t",
            "0xk",
        ] {
            assert_eq!(parse_size(bad), Err(OptionError::BadValue), "{bad}");
        }
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10ms"), Ok(10_000_000));
        assert_eq!(parse_rate("10MSEC"), Ok(10_000_000));
        assert_eq!(parse_rate("1nsec"), Ok(1));
        assert_eq!(parse_rate("5us"), Ok(5_000));
        assert_eq!(parse_rate("1sec"), Ok(1_000_000_000));
        assert_eq!(parse_rate("10s"), Ok(10_000_000_000));
        assert_eq!(parse_rate("2m"), Ok(120_000_000_000));
        assert_eq!(parse_rate("1h"), Ok(3_600_000_000_000));
        assert_eq!(parse_rate("1day"), Ok(86_400_000_000_000));
        assert_eq!(parse_rate("100hz"), Ok(10_000_000));
        assert_eq!(parse_rate("3000Hz"), Ok(333_333));
        assert_eq!(parse_rate("0hz"), Ok(0));
        assert_eq!(parse_rate("hz"), Ok(0));
        // A bare number is nanoseconds, not hertz.
        assert_eq!(parse_rate("1000"), Ok(1000));
        assert_eq!(parse_rate(""), Ok(0));
        for bad in [
            "-1ms",
            "10 ms",
            "10mss",
            "fast",
            "1.5s",
            "-5",
            "99999999999d",
        ] {
            assert_eq!(parse_rate(bad), Err(OptionError::BadValue), "{bad}");
        }
    }

    #[test]
    fn runtime_values() {
        assert_eq!(parse_runtime_value(None), Ok(Some(0)));
        assert_eq!(parse_runtime_value(Some("")), Ok(None));
        for w in ["yes", "YES", "SeT", "on", "enable", "enabled", "true"] {
            assert_eq!(parse_runtime_value(Some(w)), Ok(Some(1)), "{w}");
        }
        for w in ["no", "NO", "off", "disable", "disabled", "false", "UnSeT"] {
            assert_eq!(parse_runtime_value(Some(w)), Ok(None), "{w}");
        }
        assert_eq!(parse_runtime_value(Some("24")), Ok(Some(24)));
        assert_eq!(parse_runtime_value(Some("0x10")), Ok(Some(16)));
        for bad in [
            "please",
            "-72",
            "245566729809009887663",
            "1k",
            "18446744073709551615",
        ] {
            assert_eq!(
                parse_runtime_value(Some(bad)),
                Err(OptionError::BadValue),
                "{bad}"
            );
        }
    }

    #[test]
    fn set_and_get() {
        let mut o = DOptions::new();
        assert!(!o.quiet());
        assert_eq!(o.strsize(), 256);
        assert_eq!(o.nspec(), 1);
        assert_eq!(o.stackframes(), 20);
        assert_eq!(o.ustackframes(), 100);
        o.set("quiet", None).unwrap();
        assert!(o.quiet());
        assert_eq!(o.get("quiet"), Some(&OptValue::Int(0)));
        o.set("quiet", Some("no")).unwrap();
        assert!(!o.quiet());
        // `quiet=0` still means quiet: any stored value counts as set.
        o.set("quiet", Some("0")).unwrap();
        assert!(o.quiet());
        o.set("bufsize", Some("4k")).unwrap();
        assert_eq!(o.bufsize(), 4096);
        o.set("bufsize", Some("0")).unwrap();
        assert_eq!(o.bufsize(), 0);
        o.set("strsize", Some("16k")).unwrap();
        assert_eq!(o.strsize(), 16384);
        assert_eq!(o.set("strsize", Some("5g")), Err(OptionError::Overflow));
        assert_eq!(o.strsize(), 16384);
        o.set("switchrate", Some("100hz")).unwrap();
        assert_eq!(o.switchrate(), 10_000_000);
        o.set("aggsortkeypos", Some("1")).unwrap();
        assert_eq!(o.aggsortkeypos(), Some(1));
        o.set("nspec", Some("24")).unwrap();
        assert_eq!(o.nspec(), 24);
        assert_eq!(o.set("nspec", Some("-72")), Err(OptionError::BadValue));
        assert_eq!(o.nspec(), 24);
        assert_eq!(o.set("specsize", Some("-40")), Err(OptionError::BadValue));
        assert_eq!(o.set("specsize", Some("1b")), Err(OptionError::BadValue));
        assert_eq!(o.set("bogus", None), Err(OptionError::Unknown));
        assert_eq!(o.set("zdefs", Some("1")), Err(OptionError::BadValue));
        o.set("zdefs", None).unwrap();
        assert!(o.zdefs());
        o.set("unodefs", None).unwrap();
        assert!(o.unodefs());
        o.set("udefs", None).unwrap();
        assert!(!o.unodefs());
        o.set("droptags", Some("whatever")).unwrap();
        assert!(o.droptags());
        o.set("linkmode", Some("dynamic")).unwrap();
        assert_eq!(o.linkmode(), "dynamic");
        assert_eq!(
            o.set("linkmode", Some("Dynamic")),
            Err(OptionError::BadValue)
        );
        o.set("linktype", Some("ELF")).unwrap();
        assert_eq!(o.set("bufpolicy", None), Err(OptionError::BadValue));
        o.set("bufpolicy", Some("ring")).unwrap();
        assert_eq!(o.bufpolicy(), "ring");
        assert_eq!(o.set("iregs", Some("0")), Err(OptionError::BadValue));
        o.set("iregs", Some("9")).unwrap();
        assert_eq!(o.int("iregs"), Some(9));
        o.set("preallocate", Some("100t")).unwrap();
        assert_eq!(o.set("preallocate", None), Err(OptionError::BadValue));
        o.set("amin", Some("evolving/evolving/common")).unwrap();
        assert_eq!(o.str_value("amin"), Some("Evolving/Evolving/Common"));
        assert_eq!(o.set("amin", Some("Bogus")), Err(OptionError::BadValue));
        assert_eq!(o.set("amin", Some("a/b/c/d")), Err(OptionError::BadValue));
    }

    #[test]
    fn versions() {
        let mut o = DOptions::new();
        assert_eq!(o.set("version", None), Err(OptionError::BadValue));
        assert_eq!(
            o.set("version", Some("x")),
            Err(OptionError::VersionInvalid)
        );
        assert_eq!(
            o.set("version", Some("1.2.3.4")),
            Err(OptionError::VersionInvalid)
        );
        assert_eq!(
            o.set("version", Some("1.99")),
            Err(OptionError::VersionUndefined)
        );
        o.set("version", Some("1.5")).unwrap();
        assert_eq!(o.version(), (1, 5, 0));
        assert_eq!(
            o.set("version", Some("1.6")),
            Err(OptionError::VersionReduced)
        );
        o.set("version", Some("1.0")).unwrap();
        assert_eq!(o.str_value("version"), Some("1.0"));
    }

    #[test]
    fn contexts_and_lists() {
        let mut o = DOptions::new();
        o.set("define", Some("X=1")).unwrap();
        o.set("undef", Some("Y")).unwrap();
        o.set("incdir", Some("/inc")).unwrap();
        o.set("cpphdrs", None).unwrap();
        assert_eq!(o.cpp_args(), ["-DX=1", "-UY", "-I/inc", "-H"]);
        assert_eq!(o.set("define", None), Err(OptionError::BadValue));
        assert_eq!(o.set_pragma("define", None), Err(OptionError::BadValue));
        assert_eq!(
            o.set_pragma("define", Some("Z")),
            Err(OptionError::BadContext)
        );
        assert_eq!(
            o.set_pragma("setenv", Some("balloon=something_bad_happens")),
            Err(OptionError::BadContext)
        );
        assert_eq!(
            o.set_pragma("unsetenv", Some("rectalexambot")),
            Err(OptionError::BadContext)
        );
        o.set("setenv", Some("LD_NOLAZYLOAD=0")).unwrap();
        o.set("unsetenv", Some("FOO")).unwrap();
        assert_eq!(o.set("unsetenv", None), Err(OptionError::BadValue));
        assert_eq!(
            o.set("unsetenv", Some("ed=screven")),
            Err(OptionError::BadValue)
        );
        assert_eq!(
            o.env_ops(),
            [
                EnvOp::Set("LD_NOLAZYLOAD=0".into()),
                EnvOp::Unset("FOO".into())
            ]
        );
        assert_eq!(
            o.set_pragma("stdc", Some("a")),
            Err(OptionError::BadContext)
        );
        o.set_pragma("quiet", None).unwrap();
        o.set_pragma("bufsize", Some("1m")).unwrap();
        assert_eq!(
            o.set_in(SetContext::Active, "bufsize", Some("1m")),
            Err(OptionError::Active)
        );
        o.set_in(SetContext::Active, "switchrate", Some("1ms"))
            .unwrap();
        o.set_assignment(SetContext::CommandLine, "aggrate=1ms")
            .unwrap();
        assert_eq!(o.aggrate(), 1_000_000);
        o.set_assignment(SetContext::CommandLine, "setenv=A=B")
            .unwrap();
    }

    #[test]
    fn messages() {
        assert_eq!(
            pragma_error_message("quiet", Some("please"), &OptionError::BadValue),
            "failed to set option 'quiet' to 'please': Invalid value for specified option"
        );
        assert_eq!(
            pragma_error_message("frob", None, &OptionError::Unknown),
            "failed to set option 'frob': Invalid option name"
        );
        assert_eq!(
            cmdline_error_message("dtrace", "-x unsetenv", &OptionError::BadValue),
            "dtrace: failed to set -x unsetenv: Invalid value for specified option"
        );
    }

    #[test]
    fn no_panics_on_odd_input() {
        let inputs = [
            "", "-", "+", "0x", "0X", "\u{e9}", "1\u{e9}", "k\u{e9}", " ", "\t5", "0x1g", "--1",
            "1e3", "\u{0}", "é k",
        ];
        for s in inputs {
            let _ = parse_size(s);
            let _ = parse_rate(s);
            let _ = parse_runtime_value(Some(s));
            let _ = c_atoi(s);
            for d in OPTIONS {
                let mut o = DOptions::new();
                let _ = o.set(d.name, Some(s));
                let _ = o.set_pragma(d.name, Some(s));
            }
        }
    }
}
