//! dtrace-compatible command-line parsing.
//!
//! The option letters, their arguments and the interleaving rules follow the dtrace command
//! (`cmd/dtrace/dtrace.c`, option string `3:6:aAb:Bc:CD:eE:f:FgGhHi:I:lL:m:n:o:p:P:qs:SU:vVwx:X:Z`):
//!
//! * POSIX `getopt`: flags may be bundled (`-qn BEGIN`, `-qs file`, `-lP syscall`); an option
//!   argument is either the rest of the word (`-xquiet`, `-32`) or the next word, even if that
//!   word starts with `-` (`-i -3`).  A lone `-` is an operand.
//! * dtrace restarts `getopt` after every operand, so options and operands may be interleaved
//!   (`-n BEGIN '{...}' -q` works; `{...}` is an operand).
//! * `--` stops one `getopt` run; as in dtrace, the word right after it is taken as an operand
//!   and option parsing then **resumes** (`-- -a -b`: `-a` is an operand, `-b` is an option).
//! * `-32`/`-64` are option `3`/`6` with argument `2`/`4`; anything else prints
//!   `illegal option -- 3x`.
//! * Errors found while scanning print `<prog>: illegal option -- k` or
//!   `<prog>: option requires an argument -- s`, then the usage text; exit status 2.
//! * Only one of `-A -G -h -l -V` may be given (counting repeats); otherwise
//!   `<prog>: only one of the [-AGhlV] options can be specified at a time`, status 2, no usage.
//! * No arguments at all: usage, status 2.
//!
//! Flags that dtrace implements through `dtrace_setopt()` (`-a -b -D -F -H -I -L -q -U -w -x
//! -X`) are also recorded in [`Args::setopts`], in command-line order, so the caller can apply
//! them to [`crate::lang::options::DOptions`] exactly as dtrace's second pass does and report
//! failures with [`crate::lang::options::cmdline_error_message`] (exit status 1).
//!
//! dtx additions: `-E file.etl` and `-g` (from the Windows port), `--tui`, `--theme NAME`
//! (or `--theme=NAME`), `--keys FILE`, `--baseline FILE`, `--check`, `--demo`, `--help`.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::PathBuf;

/// The getopt option string of dtrace (Windows port, with `E:` and `g`).
pub const DTRACE_OPTSTR: &str = "3:6:aAb:Bc:CD:eE:f:FgGhHi:I:lL:m:n:o:p:P:qs:SU:vVwx:X:Z";

/// The D API version string `-V` reports (`<prog>: Sun D 1.13`).
pub const D_VERSION_STRING: &str = "Sun D 1.13";

/// Exit status for success.
pub const EXIT_OK: i32 = 0;
/// Exit status for failures (including options that fail to apply).
pub const EXIT_ERROR: i32 = 1;
/// Exit status for usage errors.
pub const EXIT_USAGE: i32 = 2;

/// Which part of a probe description a `-P/-m/-f/-n/-i` argument names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeSpecKind {
    /// `-n [[[provider:]module:]function:]name`
    Name,
    /// `-P provider`
    Provider,
    /// `-m [provider:]module`
    Module,
    /// `-f [[provider:]module:]function`
    Function,
    /// `-i probe-id` (note: dtrace itself compiles `-i` text like `-n`)
    Id,
}

/// A program to compile, in command-line order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProgramSource {
    /// `-s file`
    Script(PathBuf),
    /// `-P/-m/-f/-n/-i text` (the text may carry a predicate and action).
    Probe(ProbeSpecKind, String),
}

impl ProgramSource {
    /// The program's text: a script file's, read (one that cannot be read is empty here and
    /// left to the compiler to report), or the probe text.
    pub fn text(&self) -> String {
        match self {
            ProgramSource::Script(path) => std::fs::read_to_string(path).unwrap_or_default(),
            ProgramSource::Probe(_, t) => t.clone(),
        }
    }
}

/// Data model requested by `-32` / `-64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataModel {
    /// `-32`
    Ilp32,
    /// `-64`
    Lp64,
}

/// One `dtrace_setopt()` call implied by the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetOpt {
    /// Option name (`bufsize`, `quiet`, `define`, or the `-x` name).
    pub name: String,
    /// Option value, if any (`-x name=value` is split at the first `=`).
    pub value: Option<String>,
    /// What dtrace echoes on failure: `-x name`, `-b 4z`, `-q`, `-D X=1`, ...
    pub origin: String,
}

/// Parsed command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Args {
    /// `argv[0]` as given (D's `$0`).
    pub argv0: String,
    /// Programs from `-s/-P/-m/-f/-n/-i`, in command-line order.
    pub programs: Vec<ProgramSource>,
    /// `-l`: list probes.
    pub list: bool,
    /// `-v`: verbose (stability attributes, arguments).
    pub verbose: bool,
    /// `-q`: quiet.
    pub quiet: bool,
    /// `-e`: exit after compiling.
    pub compile_only: bool,
    /// `-S`: print D compiler intermediate code.
    pub disasm: bool,
    /// `-C`: run the preprocessor.
    pub cpp: bool,
    /// `-D name[=def]`, in order.
    pub defines: Vec<(String, Option<String>)>,
    /// `-U name`, in order.
    pub undefs: Vec<String>,
    /// `-I path`, in order.
    pub include_dirs: Vec<PathBuf>,
    /// `-L path`, in order.
    pub lib_dirs: Vec<PathBuf>,
    /// `-x name[=value]`, in order.
    pub xopts: Vec<(String, Option<String>)>,
    /// Every option-setting flag in order (see the module documentation).
    pub setopts: Vec<SetOpt>,
    /// `-b size` (last one).
    pub bufsize: Option<String>,
    /// `-o file` (last one).
    pub output: Option<PathBuf>,
    /// `-w`: permit destructive actions.
    pub destructive: bool,
    /// `-Z`: permit probe descriptions that match zero probes.
    pub zero_ok: bool,
    /// `-F`: coalesce trace output by function (flowindent).
    pub flow: bool,
    /// `-H`: print included files when preprocessing.
    pub cpphdrs: bool,
    /// `-X a|c|s|t`: ISO C conformance mode for the preprocessor (last one).
    pub stdc: Option<String>,
    /// `-E file`: trace this .etl file if it exists, else trace live and log to it. The first
    /// `-E` when several are given.
    pub etl: Option<PathBuf>,
    /// Every `-E`, in order: several files, globs and zip archives make a many-trace run
    /// (docs/many-traces.md).
    pub etl_files: Vec<PathBuf>,
    /// `-g`: enable all ETW probes in real time while logging to a file.
    pub etw_all: bool,
    /// `-g` together with `-E` (`-gE file`).
    pub etl_process_all: bool,
    /// `-c cmd`, in order (split each with [`split_command`]).
    pub command: Vec<String>,
    /// `-p pid`, in order, unvalidated (see [`parse_pid`]).
    pub pids: Vec<String>,
    /// Non-option arguments (D's `$1`, `$2`, ...), in order.
    pub operands: Vec<String>,
    /// `--tui`
    pub tui: bool,
    /// `--symbols`: the symbols report of a trace (`-E`) or a process (`-p`), not a run
    pub symbols: bool,
    /// `--theme NAME`
    pub theme: Option<String>,
    /// `--keys FILE`: the console's key bindings.
    pub keys: Option<String>,
    /// `--baseline FILE`: results the console compares with.
    pub baseline: Option<String>,
    /// `-32` / `-64` (last one).
    pub data_model: Option<DataModel>,
    /// `--help`
    pub help: bool,
    /// `--check`: the self-check of this machine (src/cli/selfcheck).
    pub check: bool,
    /// `--demo`: the console over the trace built into dtx (as `--tui -E demo`), its CPU
    /// dashboard running with a stack view beside the table.
    pub demo: bool,
    /// `-V`: print the D API version ([`version_text`]) and exit 0.
    pub version: bool,
    /// `-a`: claim anonymous tracing state.
    pub grab_anon: bool,
    /// `-A`: generate directives for anonymous tracing.
    pub anon: bool,
    /// `-B`: send output through the buffered-output handler.
    pub buffered: bool,
    /// `-G`: generate an ELF file with the embedded program.
    pub elf_link: bool,
    /// `-h`: generate a header file for static probes.
    pub header: bool,
    /// dtrace flags that are valid but that dtx does not implement (`-A -a -G -h`), in order
    /// of first appearance.  See [`Args::unsupported_error`].
    pub unsupported: Vec<char>,
}

/// A usage error: print `message` (if any) on its own line to stderr, then the usage text
/// if `show_usage`, and exit with status 2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageError {
    /// Message line, already prefixed with the program name (`dtx: illegal option -- k`).
    pub message: Option<String>,
    /// Whether dtrace prints the usage text after the message.
    pub show_usage: bool,
}

impl UsageError {
    /// The exit status dtrace uses for usage errors (2).
    pub fn exit_code(&self) -> i32 {
        EXIT_USAGE
    }

    fn with_usage(message: Option<String>) -> Self {
        UsageError {
            message,
            show_usage: true,
        }
    }

    fn bare(message: String) -> Self {
        UsageError {
            message: Some(message),
            show_usage: false,
        }
    }
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.message {
            Some(m) => f.write_str(m),
            None => f.write_str("usage error"),
        }
    }
}

impl std::error::Error for UsageError {}

impl Args {
    /// A usage error naming the first dtrace flag dtx does not implement, if any.
    pub fn unsupported_error(&self, prog: &str) -> Option<UsageError> {
        let c = *self.unsupported.first()?;
        let what = match c {
            'A' => "anonymous tracing",
            'a' => "claiming anonymous tracing state",
            'G' => "ELF file generation",
            'h' => "header file generation",
            _ => "this option",
        };
        Some(UsageError::bare(format!(
            "{}: -{} ({}) is not supported",
            prog, c, what
        )))
    }
}

/// `--version` output (without newline): `<prog> <version of the dtx package>`.
pub fn package_version_text(prog: &str) -> String {
    format!("{prog} {}", env!("CARGO_PKG_VERSION"))
}

/// `-V` output (without newline): `<prog>: Sun D 1.13`, the D API version dtx implements.
pub fn version_text(prog: &str) -> String {
    format!("{}: {}", prog, D_VERSION_STRING)
}

/// The program name dtrace uses in messages: the base name of `argv[0]`
/// (`/` and `\` separators, drive prefix and a Windows `.exe` removed); `dtx` when absent.
pub fn prog_name(argv0: &OsStr) -> String {
    let s = argv0.to_string_lossy();
    let s = s.rsplit(['/', '\\']).next().unwrap_or("");
    let s = match s.as_bytes() {
        [d, b':', ..] if d.is_ascii_alphabetic() => &s[2..],
        _ => s,
    };
    let s = match s.len().checked_sub(4) {
        Some(n) if n > 0 && s.is_char_boundary(n) && s[n..].eq_ignore_ascii_case(".exe") => &s[..n],
        _ => s,
    };
    if s.is_empty() {
        "dtx".to_string()
    } else {
        s.to_string()
    }
}

/// Splits a `-c` command like dtrace's `make_argv()`: on runs of space, tab, newline, CR,
/// VT and FF, with no quoting; an all-blank command yields itself as the only word. On
/// Windows, where programs live in `C:\Program Files`, a double-quoted word keeps its blanks,
/// by the rules every Windows program reads its command line with
/// ([`split_windows_command`]).
pub fn split_command(cmd: &str) -> Vec<String> {
    #[cfg(windows)]
    let words = split_windows_command(cmd);
    #[cfg(not(windows))]
    let words: Vec<String> = cmd
        .split([' ', '\t', '\n', '\r', '\x0b', '\x0c'])
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect();
    if words.is_empty() {
        vec![cmd.to_string()]
    } else {
        words
    }
}

/// Splits a command line as CommandLineToArgvW and the C runtime do (Microsoft Learn, "Parsing
/// C command-line arguments"): words end at blanks outside double quotes; `2n` backslashes
/// before a `"` are `n` backslashes and the quote opens or closes, `2n+1` are `n` and a
/// literal `"`; other backslashes are themselves; `""` inside quotes is a literal `"`.
pub fn split_windows_command(cmd: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quoted = false;
    let mut chars = cmd.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let mut n = 1;
                while chars.peek() == Some(&'\\') {
                    chars.next();
                    n += 1;
                }
                in_word = true;
                if chars.peek() == Some(&'"') {
                    word.extend(std::iter::repeat_n('\\', n / 2));
                    if n % 2 == 1 {
                        chars.next();
                        word.push('"');
                    }
                } else {
                    word.extend(std::iter::repeat_n('\\', n));
                }
            }
            '"' => {
                in_word = true;
                if quoted && chars.peek() == Some(&'"') {
                    chars.next();
                    word.push('"');
                } else {
                    quoted = !quoted;
                }
            }
            ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c' if !quoted => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// Validates a `-p` argument as dtrace does (`strtol` base 10, whole string, no overflow).
/// On failure returns dtrace's message text `invalid pid: <arg>`; dtrace prints it as
/// `<prog>: invalid pid: <arg>` and exits with status 1.
pub fn parse_pid(s: &str) -> Result<i64, String> {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("invalid pid: {}", s));
    }
    t.parse::<i64>().map_err(|_| format!("invalid pid: {}", s))
}

/// dtrace's usage text (program name substituted) plus dtx's extra options.
pub fn usage_text(prog: &str) -> String {
    const PREDACT: &str = "[[ predicate ] action ]";
    let mut s = String::new();
    s.push_str(&format!(
        "Usage: {prog} [-32|-64] [-aACeFGghHlqSvVwZ] [-b bufsz] [-c cmd] [-D name[=def]]\n\
         \t[-E etlfile] [-I path] [-L path] [-o output] [-p pid] [-s script] [-U name]\n\
         \t[-x opt[=val]] [-X a|c|s|t] [--tui] [--theme name] [--keys file] [--check]\n\
         \t[--baseline file] [--demo] [--symbols] [--version]\n\
         \t[--merge [-x opt] [-o output] file.json ...]\n\
         \t[--diff before after | --diff -E before -E after -s script] [--mcp [-w]]\n\n\
         \t[-P provider {PREDACT}]\n\
         \t[-m [ provider: ] module {PREDACT}]\n\
         \t[-f [[ provider: ] module: ] func {PREDACT}]\n\
         \t[-n [[[ provider: ] module: ] func: ] name {PREDACT}]\n\
         \t[-i probe-id {PREDACT}] [ args ... ]\n\n"
    ));
    s.push_str("\tpredicate -> '/' D-expression '/'\n");
    s.push_str("\t   action -> '{' D-statements '}'\n");
    s.push_str(
        "\n\
         \t-32 generate 32-bit D programs and ELF files\n\
         \t-64 generate 64-bit D programs and ELF files\n\n\
         \t-a  claim anonymous tracing state\n\
         \t-A  generate driver.conf(4) directives for anonymous tracing\n\
         \t-b  set trace buffer size\n\
         \t-c  run specified command and exit upon its completion\n\
         \t-C  run cpp(1) preprocessor on script files\n\
         \t-D  define symbol when invoking preprocessor\n\
         \t-e  exit after compiling request but prior to enabling probes\n\
         \t-E  trace the given .etl file if it exists, else enable probes\n\
         \t    in real time and log to it (-E demo: the trace built into dtx)\n\
         \t-f  enable or list probes matching the specified function name\n\
         \t-F  coalesce trace output by function\n\
         \t-g  enable all ETW probes in real time, while logging to file (with -E)\n\
         \t-G  generate an ELF file containing embedded dtrace program\n\
         \t-h  generate a header file with definitions for static probes\n\
         \t-H  print included files when invoking preprocessor\n\
         \t-i  enable or list probes matching the specified probe id\n\
         \t-I  add include directory to preprocessor search path\n\
         \t-l  list probes matching specified criteria\n\
         \t-L  add library directory to library search path\n\
         \t-m  enable or list probes matching the specified module name\n\
         \t-n  enable or list probes matching the specified probe name\n\
         \t-o  set output file\n\
         \t-p  grab specified process-ID and cache its symbol tables\n\
         \t-P  enable or list probes matching the specified provider name\n\
         \t-q  set quiet mode (only output explicitly traced data)\n\
         \t-s  enable or list probes according to the specified D script\n\
         \t-S  print D compiler intermediate code\n\
         \t-U  undefine symbol when invoking preprocessor\n\
         \t-v  set verbose mode (report stability attributes, arguments)\n\
         \t-V  report DTrace API version\n\
         \t-w  permit destructive actions\n\
         \t-x  enable or modify compiler and tracing options\n\
         \t-X  specify ISO C conformance settings for preprocessor\n\
         \t-Z  permit probe descriptions that match zero probes\n\
         \t--tui          show output in the interactive terminal UI\n\
         \t--theme name   console colour theme: dark, light, high-contrast or a .toml file\n\
         \t--keys file    console key bindings (a keys.toml)\n\
         \t--baseline f   the console shows each key's change against f (its b key's\n\
         \t               dtx-baseline.json, or a result saved with -x oformat=json)\n\
         \t--check        check that dtx can trace on this machine (run it first);\n\
         \t               -x oformat=json gives the report as one JSON document\n\
         \t--demo         the console over the trace built into dtx (-E demo):\n\
         \t               no file, no privilege, any OS\n\
         \t--symbols      instead of a run, each image of a trace (-E) or a process (-p):\n\
         \t               its PDB, its frames, and where the PDB came from or why not\n\
         \t--merge f ...  add the aggregations of saved -x oformat=json results, printed as\n\
         \t               one run would (first on the line; --merge --help)\n\
         \t--diff a b     what changed between two saved results (or two traces, -E a\n\
         \t               -E b with a program): every key before, after, change, ratio\n\
         \t--mcp          serve dtx to agents: the Model Context Protocol on stdio\n\
         \t               (-w: destructive programs allowed)\n\
         \t--version      print dtx's own version (-V is the D API version)\n\
         \t--help         print this text\n",
    );
    s
}

/// Whether `c` is an option letter and, if so, whether it takes an argument.
fn option_spec(c: char) -> Option<bool> {
    if c == ':' || !c.is_ascii() {
        return None;
    }
    let i = DTRACE_OPTSTR.find(c)?;
    Some(DTRACE_OPTSTR[i + 1..].starts_with(':'))
}

/// `arg` without its first `skip` characters, which must all be ASCII.
fn os_tail(arg: &OsStr, skip: usize) -> OsString {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::{OsStrExt, OsStringExt};
        let b = arg.as_bytes();
        OsString::from_vec(b.get(skip..).unwrap_or(&[]).to_vec())
    }
    #[cfg(windows)]
    {
        use std::os::windows::ffi::{OsStrExt, OsStringExt};
        let w: Vec<u16> = arg.encode_wide().skip(skip).collect();
        OsString::from_wide(&w)
    }
    #[cfg(not(any(unix, windows)))]
    {
        OsString::from(arg.to_string_lossy().chars().skip(skip).collect::<String>())
    }
}

fn lossy(s: &OsStr) -> String {
    s.to_string_lossy().into_owned()
}

fn split_eq(s: &str) -> (String, Option<String>) {
    match s.split_once('=') {
        Some((n, v)) => (n.to_string(), Some(v.to_string())),
        None => (s.to_string(), None),
    }
}

/// Parses `args` (`args[0]` is `argv[0]`).
pub fn parse(args: &[OsString]) -> Result<Args, UsageError> {
    let prog = args
        .first()
        .map_or_else(|| "dtx".to_string(), |a| prog_name(a));
    let mut out = Args {
        argv0: args.first().map(|a| lossy(a)).unwrap_or_default(),
        ..Args::default()
    };
    if args.len() <= 1 {
        return Err(UsageError::with_usage(None));
    }
    let argc = args.len();
    let mut modes = 0usize;
    let mut optind = 1;
    while optind < argc {
        // One getopt run: options until an operand, `--` or the end.
        while optind < argc {
            let word = &args[optind];
            let text = word.to_string_lossy();
            if text == "--" {
                optind += 1;
                break;
            }
            if !text.starts_with('-') || text == "-" {
                break;
            }
            if let Some(long) = text.strip_prefix("--") {
                let (name, value) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (long, None),
                };
                match (name, value) {
                    ("help", None) => {
                        out.help = true;
                        return Ok(out);
                    }
                    ("tui", None) => out.tui = true,
                    ("symbols", None) => out.symbols = true,
                    ("check", None) => out.check = true,
                    ("demo", None) => out.demo = true,
                    ("theme", Some(v)) => out.theme = Some(v),
                    ("keys", Some(v)) => out.keys = Some(v),
                    ("baseline", Some(v)) => out.baseline = Some(v),
                    (opt @ ("theme" | "keys" | "baseline"), None) => {
                        optind += 1;
                        let v = match args.get(optind) {
                            Some(v) => lossy(v),
                            None => {
                                return Err(UsageError::with_usage(Some(format!(
                                    "{}: option requires an argument -- {}",
                                    prog, opt
                                ))))
                            }
                        };
                        match opt {
                            "theme" => out.theme = Some(v),
                            "keys" => out.keys = Some(v),
                            _ => out.baseline = Some(v),
                        }
                    }
                    _ => {
                        return Err(UsageError::with_usage(Some(format!(
                            "{}: illegal option -- {}",
                            prog, long
                        ))))
                    }
                }
                optind += 1;
                continue;
            }
            let chars: Vec<char> = text.chars().collect();
            let mut ci = 1;
            while ci < chars.len() {
                let c = chars[ci];
                let Some(takes_arg) = option_spec(c) else {
                    return Err(UsageError::with_usage(Some(format!(
                        "{}: illegal option -- {}",
                        prog, c
                    ))));
                };
                if !takes_arg {
                    flag(&mut out, &mut modes, c);
                    ci += 1;
                    continue;
                }
                let optarg: OsString = if ci + 1 < chars.len() {
                    os_tail(word, ci + 1)
                } else if optind + 1 < argc {
                    optind += 1;
                    args[optind].clone()
                } else {
                    return Err(UsageError::with_usage(Some(format!(
                        "{}: option requires an argument -- {}",
                        prog, c
                    ))));
                };
                with_arg(&mut out, &prog, c, optarg)?;
                break;
            }
            optind += 1;
        }
        if optind < argc {
            out.operands.push(lossy(&args[optind]));
        }
        optind += 1;
    }

    if modes > 1 {
        return Err(UsageError::bare(format!(
            "{}: only one of the [-AGhlV] options can be specified at a time",
            prog
        )));
    }
    if out.version {
        return Ok(out);
    }
    if out.demo {
        if !out.etl_files.is_empty() {
            return Err(UsageError::bare(format!(
                "{prog}: --demo opens the built-in trace; give -E or --demo, not both"
            )));
        }
        out.tui = true;
        let demo = PathBuf::from(crate::etw::reader::DEMO);
        out.etl = Some(demo.clone());
        out.etl_files.push(demo);
    }
    out.etl_process_all = out.etw_all && out.etl.is_some();
    if out.buffered && (out.anon || out.elf_link || out.list || out.header) {
        return Err(UsageError::bare(format!(
            "{}: -B not valid in combination with [-AGl] options",
            prog
        )));
    }
    if out.buffered && out.output.is_some() {
        return Err(UsageError::bare(format!(
            "{}: -B not valid in combination with -o option",
            prog
        )));
    }
    Ok(out)
}

fn setopt(out: &mut Args, name: &str, value: Option<String>, origin: String) {
    out.setopts.push(SetOpt {
        name: name.to_string(),
        value,
        origin,
    });
}

fn unsupported(out: &mut Args, c: char) {
    if !out.unsupported.contains(&c) {
        out.unsupported.push(c);
    }
}

fn flag(out: &mut Args, modes: &mut usize, c: char) {
    match c {
        'a' => {
            out.grab_anon = true;
            unsupported(out, 'a');
            setopt(out, "grabanon", None, "-a".into());
        }
        'A' => {
            out.anon = true;
            *modes += 1;
            unsupported(out, 'A');
        }
        'B' => out.buffered = true,
        'C' => out.cpp = true,
        'e' => out.compile_only = true,
        'F' => {
            out.flow = true;
            setopt(out, "flowindent", None, "-F".into());
        }
        'g' => out.etw_all = true,
        'G' => {
            out.elf_link = true;
            *modes += 1;
            unsupported(out, 'G');
        }
        'h' => {
            out.header = true;
            *modes += 1;
            unsupported(out, 'h');
        }
        'H' => {
            out.cpphdrs = true;
            setopt(out, "cpphdrs", None, "-H".into());
        }
        'l' => {
            out.list = true;
            *modes += 1;
        }
        'q' => {
            out.quiet = true;
            setopt(out, "quiet", None, "-q".into());
        }
        'S' => out.disasm = true,
        'v' => out.verbose = true,
        'V' => {
            out.version = true;
            *modes += 1;
        }
        'w' => {
            out.destructive = true;
            setopt(out, "destructive", None, "-w".into());
        }
        'Z' => out.zero_ok = true,
        _ => {}
    }
}

fn with_arg(out: &mut Args, prog: &str, c: char, optarg: OsString) -> Result<(), UsageError> {
    let text = lossy(&optarg);
    let probe = |kind| ProgramSource::Probe(kind, text.clone());
    match c {
        '3' | '6' => {
            let (want, model) = if c == '3' {
                ("2", DataModel::Ilp32)
            } else {
                ("4", DataModel::Lp64)
            };
            if text != want {
                return Err(UsageError::with_usage(Some(format!(
                    "{}: illegal option -- {}{}",
                    prog, c, text
                ))));
            }
            out.data_model = Some(model);
        }
        'b' => {
            out.bufsize = Some(text.clone());
            setopt(out, "bufsize", Some(text.clone()), format!("-b {}", text));
        }
        'c' => out.command.push(text),
        'D' => {
            out.defines.push(split_eq(&text));
            setopt(out, "define", Some(text.clone()), format!("-D {}", text));
        }
        'E' => {
            let path = PathBuf::from(optarg);
            out.etl.get_or_insert_with(|| path.clone());
            out.etl_files.push(path);
        }
        'f' => out.programs.push(probe(ProbeSpecKind::Function)),
        'i' => out.programs.push(probe(ProbeSpecKind::Id)),
        'm' => out.programs.push(probe(ProbeSpecKind::Module)),
        'n' => out.programs.push(probe(ProbeSpecKind::Name)),
        'P' => out.programs.push(probe(ProbeSpecKind::Provider)),
        'I' => {
            out.include_dirs.push(PathBuf::from(optarg));
            setopt(out, "incdir", Some(text.clone()), format!("-I {}", text));
        }
        'L' => {
            out.lib_dirs.push(PathBuf::from(optarg));
            setopt(out, "libdir", Some(text.clone()), format!("-L {}", text));
        }
        'o' => out.output = Some(PathBuf::from(optarg)),
        'p' => out.pids.push(text),
        's' => out
            .programs
            .push(ProgramSource::Script(PathBuf::from(optarg))),
        'U' => {
            out.undefs.push(text.clone());
            setopt(out, "undef", Some(text.clone()), format!("-U {}", text));
        }
        'x' => {
            let (name, value) = split_eq(&text);
            out.xopts.push((name.clone(), value.clone()));
            let origin = format!("-x {}", name);
            setopt(out, &name, value, origin);
        }
        'X' => {
            out.stdc = Some(text.clone());
            setopt(out, "stdc", Some(text.clone()), format!("-X {}", text));
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(v: &[&str]) -> Result<Args, UsageError> {
        let mut a: Vec<OsString> = vec![OsString::from("/usr/sbin/dtx")];
        a.extend(v.iter().map(OsString::from));
        parse(&a)
    }

    fn ok(v: &[&str]) -> Args {
        p(v).unwrap_or_else(|e| panic!("{v:?}: {e:?}"))
    }

    fn msg(v: &[&str]) -> String {
        p(v).unwrap_err().message.unwrap_or_default()
    }

    fn name(s: &str) -> ProgramSource {
        ProgramSource::Probe(ProbeSpecKind::Name, s.to_string())
    }

    #[test]
    fn no_args_is_usage() {
        let e = p(&[]).unwrap_err();
        assert_eq!(e.message, None);
        assert!(e.show_usage);
        assert_eq!(e.exit_code(), 2);
        assert!(parse(&[]).is_err());
    }

    #[test]
    fn bundled_flags() {
        let a = ok(&["-qn", "BEGIN"]);
        assert!(a.quiet);
        assert_eq!(a.programs, vec![name("BEGIN")]);
        let a = ok(&["-qs", "x.d", "a1", "a2"]);
        assert_eq!(a.programs, vec![ProgramSource::Script("x.d".into())]);
        assert_eq!(a.operands, ["a1", "a2"]);
        let a = ok(&["-qwZn", "BEGIN{exit(0)}"]);
        assert!(a.quiet && a.destructive && a.zero_ok);
        assert_eq!(a.programs, vec![name("BEGIN{exit(0)}")]);
        let a = ok(&["-CH", "-s", "f.d"]);
        assert!(a.cpp && a.cpphdrs);
        let a = ok(&["-lP", "syscall"]);
        assert!(a.list);
        assert_eq!(
            a.programs,
            vec![ProgramSource::Probe(
                ProbeSpecKind::Provider,
                "syscall".into()
            )]
        );
    }

    #[test]
    fn attached_and_separate_arguments() {
        let a = ok(&["-xquiet", "-x", "bufsize=4k", "-xswitchrate=10hz", "-b1m"]);
        assert_eq!(
            a.xopts,
            vec![
                ("quiet".to_string(), None),
                ("bufsize".to_string(), Some("4k".to_string())),
                ("switchrate".to_string(), Some("10hz".to_string())),
            ]
        );
        assert_eq!(a.bufsize.as_deref(), Some("1m"));
        assert_eq!(
            a.setopts
                .iter()
                .map(|s| s.origin.as_str())
                .collect::<Vec<_>>(),
            ["-x quiet", "-x bufsize", "-x switchrate", "-b 1m"]
        );
        // An option argument may start with '-'.
        let a = ok(&["-i", "-3"]);
        assert_eq!(
            a.programs,
            vec![ProgramSource::Probe(ProbeSpecKind::Id, "-3".into())]
        );
        let a = ok(&["-DVALUE=40", "-D", "X", "-UVALUE", "-I/tmp", "-L", "/lib"]);
        assert_eq!(
            a.defines,
            vec![("VALUE".into(), Some("40".into())), ("X".into(), None)]
        );
        assert_eq!(a.undefs, ["VALUE"]);
        assert_eq!(a.include_dirs, [PathBuf::from("/tmp")]);
        assert_eq!(a.lib_dirs, [PathBuf::from("/lib")]);
        let a = ok(&["-x", "setenv=A=B"]);
        assert_eq!(a.xopts, vec![("setenv".into(), Some("A=B".into()))]);
    }

    #[test]
    fn program_order_and_kinds() {
        let a = ok(&[
            "-n", "a", "-s", "b.d", "-P", "c", "-m", "d", "-f", "e", "-i", "1",
        ]);
        assert_eq!(
            a.programs,
            vec![
                name("a"),
                ProgramSource::Script("b.d".into()),
                ProgramSource::Probe(ProbeSpecKind::Provider, "c".into()),
                ProgramSource::Probe(ProbeSpecKind::Module, "d".into()),
                ProgramSource::Probe(ProbeSpecKind::Function, "e".into()),
                ProgramSource::Probe(ProbeSpecKind::Id, "1".into()),
            ]
        );
    }

    #[test]
    fn operands_interleaved() {
        let a = ok(&["-n", "BEGIN", "{printf(\"FOUND\");}", "-q", "x"]);
        assert!(a.quiet);
        assert_eq!(a.operands, ["{printf(\"FOUND\");}", "x"]);
        let a = ok(&["-i", "0", "-", "2"]);
        assert_eq!(a.operands, ["-", "2"]);
        let a = ok(&["-i", "12", "10", "-i", "23"]);
        assert_eq!(a.programs.len(), 2);
        assert_eq!(a.operands, ["10"]);
    }

    #[test]
    fn double_dash() {
        // `--` protects the following word only; parsing then resumes.
        let a = ok(&["-n", "BEGIN", "--", "-q", "x"]);
        assert!(!a.quiet);
        assert_eq!(a.operands, ["-q", "x"]);
        let a = ok(&["-s", "f.d", "--", "-1", "-q"]);
        assert_eq!(a.operands, ["-1"]);
        assert!(a.quiet);
        let a = ok(&["-s", "f.d", "--"]);
        assert!(a.operands.is_empty());
        let a = ok(&["--", "--"]);
        assert_eq!(a.operands, ["--"]);
    }

    #[test]
    fn shebang_style() {
        // `#!/usr/sbin/dtx -qs` run as `./t.d 1 foo`.
        let a = ok(&["-qs", "./t.d", "1", "foo"]);
        assert!(a.quiet);
        assert_eq!(a.programs, vec![ProgramSource::Script("./t.d".into())]);
        assert_eq!(a.operands, ["1", "foo"]);
        assert_eq!(a.argv0, "/usr/sbin/dtx");
    }

    #[test]
    fn errors() {
        assert_eq!(msg(&["-k"]), "dtx: illegal option -- k");
        assert_eq!(msg(&["-9"]), "dtx: illegal option -- 9");
        assert!(p(&["-9"]).unwrap_err().show_usage);
        assert_eq!(msg(&["-qk"]), "dtx: illegal option -- k");
        assert_eq!(msg(&["-n"]), "dtx: option requires an argument -- n");
        assert_eq!(msg(&["-q", "-s"]), "dtx: option requires an argument -- s");
        assert_eq!(msg(&["-?"]), "dtx: illegal option -- ?");
        assert_eq!(msg(&["-:"]), "dtx: illegal option -- :");
        assert_eq!(msg(&["-33"]), "dtx: illegal option -- 33");
        assert_eq!(msg(&["-6"]), "dtx: option requires an argument -- 6");
        assert_eq!(msg(&["--bogus"]), "dtx: illegal option -- bogus");
        let e = p(&["-l", "-V"]).unwrap_err();
        assert_eq!(
            e.message.as_deref(),
            Some("dtx: only one of the [-AGhlV] options can be specified at a time")
        );
        assert!(!e.show_usage);
        assert!(p(&["-ll"]).is_err());
        assert_eq!(
            msg(&["-B", "-l"]),
            "dtx: -B not valid in combination with [-AGl] options"
        );
        assert_eq!(
            msg(&["-B", "-o", "f", "-n", "BEGIN"]),
            "dtx: -B not valid in combination with -o option"
        );
        // Errors use the base name of argv[0], without the `.exe` Windows may give it.
        let e = parse(&["C:\\bin\\dtx.exe".into(), "-k".into()]).unwrap_err();
        assert_eq!(e.message.as_deref(), Some("dtx: illegal option -- k"));
    }

    #[test]
    fn data_model_and_misc() {
        assert_eq!(ok(&["-32", "-s", "x"]).data_model, Some(DataModel::Ilp32));
        assert_eq!(ok(&["-64"]).data_model, Some(DataModel::Lp64));
        assert_eq!(ok(&["-3", "2"]).data_model, Some(DataModel::Ilp32));
        let a = ok(&["-V"]);
        assert!(a.version);
        assert_eq!(version_text("dtx"), "dtx: Sun D 1.13");
        let a = ok(&["-b", "1t", "-b", "2t", "-e"]);
        assert!(a.compile_only);
        assert_eq!(a.bufsize.as_deref(), Some("2t"));
        let a = ok(&["-c", "ls -l", "-c", "date", "-p", "12", "-o", "out.txt"]);
        assert_eq!(a.command, ["ls -l", "date"]);
        assert_eq!(a.pids, ["12"]);
        assert_eq!(a.output, Some(PathBuf::from("out.txt")));
        let a = ok(&["-v", "-S", "-F", "-X", "s", "-Z"]);
        assert!(a.verbose && a.disasm && a.flow && a.zero_ok);
        assert_eq!(a.stdc.as_deref(), Some("s"));
    }

    #[test]
    fn etl_and_extras() {
        let a = ok(&["-gE", "trace.etl", "-n", "BEGIN"]);
        assert!(a.etw_all && a.etl_process_all);
        assert_eq!(a.etl, Some(PathBuf::from("trace.etl")));
        let a = ok(&["-E", "a.etl", "-E", "runs/*.etl", "-n", "BEGIN"]);
        assert_eq!(a.etl, Some(PathBuf::from("a.etl")));
        assert_eq!(
            a.etl_files,
            [PathBuf::from("a.etl"), PathBuf::from("runs/*.etl")]
        );
        let a = ok(&["-E", "trace.etl"]);
        assert!(!a.etl_process_all);
        let a = ok(&["-g"]);
        assert!(a.etw_all && !a.etl_process_all);
        let a = ok(&["--tui", "--theme", "dark", "-n", "BEGIN"]);
        assert!(a.tui);
        assert_eq!(a.theme.as_deref(), Some("dark"));
        assert_eq!(ok(&["--theme=light"]).theme.as_deref(), Some("light"));
        assert!(ok(&["--check", "-x", "oformat=json"]).check);
        assert!(!ok(&["-n", "BEGIN"]).check);
        // --demo: the console over the built-in trace, alone or with a program
        let a = ok(&["--demo"]);
        assert!(a.demo && a.tui);
        assert_eq!(a.etl_files, [PathBuf::from("demo")]);
        assert!(ok(&["--demo", "-n", "BEGIN"]).tui);
        assert!(msg(&["--demo", "-E", "x.etl"]).contains("not both"));
        assert!(ok(&["--help", "-k"]).help);
        assert_eq!(
            msg(&["--theme"]),
            "dtx: option requires an argument -- theme"
        );
    }

    #[test]
    fn unsupported_flags() {
        let a = ok(&["-h", "-s", "p.d"]);
        assert!(a.header);
        assert_eq!(a.unsupported, ['h']);
        let e = a.unsupported_error("dtx").unwrap();
        assert_eq!(
            e.message.as_deref(),
            Some("dtx: -h (header file generation) is not supported")
        );
        assert!(ok(&["-q"]).unsupported_error("dtx").is_none());
        let a = ok(&["-a", "-A"]);
        assert_eq!(a.unsupported, ['a', 'A']);
    }

    #[test]
    fn usage_and_helpers() {
        let u = usage_text("dtx");
        assert!(u.starts_with("Usage: dtx [-32|-64] "));
        assert!(!u.contains("dtrace ["));
        assert!(u.contains("\t-Z  permit probe descriptions that match zero probes\n"));
        assert!(u.contains("--theme"));
        assert_eq!(split_command("ls  -l\t/tmp"), ["ls", "-l", "/tmp"]);
        assert_eq!(split_command("  "), ["  "]);
        assert_eq!(parse_pid("123"), Ok(123));
        assert_eq!(parse_pid("12x"), Err("invalid pid: 12x".to_string()));
        assert!(parse_pid("").is_err());
        assert!(parse_pid("99999999999999999999999").is_err());
        assert_eq!(prog_name(OsStr::new("/a/b/dtx")), "dtx");
        assert_eq!(prog_name(OsStr::new("")), "dtx");
        assert_eq!(prog_name(OsStr::new("C:\\tools\\dtx.EXE")), "dtx");
        assert_eq!(prog_name(OsStr::new("Z:/w/dtrace.exe")), "dtrace");
        assert_eq!(prog_name(OsStr::new(".exe")), ".exe");
    }

    #[test]
    fn no_panic_on_odd_input() {
        let words = [
            "-", "--", "-é", "-xé=1", "é", "-\u{0}", "--=", "--theme=", "-32é", "-é2", "-x", "-s",
            "", "-qé",
        ];
        for a in words {
            for b in words {
                let _ = p(&[a, b]);
                let _ = p(&[a, b, a]);
            }
        }
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStringExt;
            let bad = OsString::from_vec(vec![b'-', b's', 0xff, b'x']);
            let a = parse(&["dtx".into(), bad]).unwrap();
            assert_eq!(a.programs.len(), 1);
            let bad = OsString::from_vec(vec![b'-', 0xff]);
            assert!(parse(&["dtx".into(), bad]).is_err());
        }
    }
}
