//! The dtrace-compatible command line: options, compiling each program, `-l` listing, `-e`.

pub mod args;
pub mod diff;
mod enabling;
mod listing;
mod merge;
mod plan;
pub mod selfcheck;
mod symbols;
mod target;
mod traces;

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;

use crate::lang::cpp::CppOptions;
use crate::lang::options::{cmdline_error_message, DOptions};
use crate::lang::types::DataModel;
use crate::lang::{self, CompileInput, MacroEnv, SourceKind};
use crate::probes::Catalog;
use args::{Args, ProbeSpecKind, ProgramSource, EXIT_ERROR, EXIT_OK, EXIT_USAGE};

/// One program of the command line, ready to compile.
struct Program {
    /// `script x.d` or `probe specifier X` for messages.
    what: String,
    text: String,
    kind: SourceKind,
    file_name: String,
}

/// Bare `dtx` on a terminal opens the console (as `dtx --tui`); with no terminal (a pipe, a
/// script) it stays dtrace's usage message and exit status 2.
fn console_when_bare(argv: Vec<OsString>) -> Vec<OsString> {
    use std::io::IsTerminal;
    let terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    if argv.len() <= 1 && terminal {
        let argv0 = argv.into_iter().next().unwrap_or_else(|| "dtx".into());
        return vec![argv0, "--tui".into()];
    }
    argv
}

/// Writes `dtx: <msg>` to stderr.
fn fatal(prog: &str, msg: &str) {
    let _ = writeln!(std::io::stderr(), "{prog}: {msg}");
}

pub fn main(argv: Vec<OsString>) -> i32 {
    let prog = "dtx";
    let argv = console_when_bare(argv);
    // `--version`: the program's own version from its Cargo metadata (`-V` stays dtrace's
    // D API version)
    if argv.len() == 2 && argv[1] == "--version" {
        println!("{}", args::package_version_text(prog));
        return EXIT_OK;
    }
    // `--merge a.json b.json ...`: the reduce step over saved aggregation results
    if argv.get(1).is_some_and(|a| a == "--merge") {
        let rest: Vec<String> = argv[2..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return merge::main(prog, &rest);
    }
    // `--diff before after`: what changed between two runs (saved results or traces)
    if argv.get(1).is_some_and(|a| a == "--diff") {
        let rest: Vec<String> = argv[2..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return diff::main(prog, &rest);
    }
    // `--mcp [-w]`: an MCP server on stdio for agents (src/serve/mcp)
    if argv.get(1).is_some_and(|a| a == "--mcp") {
        let rest: Vec<String> = argv[2..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return crate::serve::mcp::main(prog, &rest, diff::views_of, mcp_live_source);
    }
    // `--check-workload WHAT [N]`: the self-check's workload, run by the checked dtx as its -c
    // target (src/cli/selfcheck/workload.rs)
    if argv.get(1).is_some_and(|a| a == "--check-workload") {
        let rest: Vec<String> = argv[2..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return selfcheck::workload::main(&rest);
    }
    let args = match args::parse(&argv) {
        Ok(a) => a,
        Err(e) => {
            let mut err = std::io::stderr();
            if let Some(m) = &e.message {
                let _ = writeln!(err, "{m}");
            }
            if e.show_usage {
                let _ = write!(err, "{}", args::usage_text(prog));
            }
            return e.exit_code();
        }
    };
    if args.help {
        print!("{}", args::usage_text(prog));
        return EXIT_OK;
    }
    if args.version {
        println!("{}", args::version_text(prog));
        return EXIT_OK;
    }
    // `-x sympath=...`: the symbol path of this run, for every PDB store made from now on
    if let Some((_, Some(path))) = args.xopts.iter().rev().find(|(n, _)| n == "sympath") {
        crate::symbols::pdb::set_run_symbol_path(path);
    }
    if args.symbols {
        return match symbols::report(prog, &args) {
            Ok(code) => code,
            Err(msg) => {
                fatal(prog, &msg);
                EXIT_ERROR
            }
        };
    }
    if args.check {
        return self_check(prog, &args);
    }
    if let Some(e) = args.unsupported_error(prog) {
        if let Some(m) = &e.message {
            fatal(prog, m.trim_start_matches("dtx: "));
        }
        return EXIT_USAGE;
    }
    match run(prog, &args) {
        Ok(code) => code,
        Err(msg) => {
            fatal(prog, &msg);
            EXIT_ERROR
        }
    }
}

/// `dtx --check [-x oformat=json]`: nothing else may be asked with it.
fn self_check(prog: &str, args: &Args) -> i32 {
    if !args.programs.is_empty()
        || !args.etl_files.is_empty()
        || !args.command.is_empty()
        || !args.pids.is_empty()
        || args.list
        || args.tui
    {
        fatal(prog, "--check runs alone (with -x oformat=json at most)");
        return EXIT_USAGE;
    }
    if let Some(op) = args.operands.first() {
        fatal(
            prog,
            &format!(
                "--check takes no operand ('{op}'): it checks this machine, not a program or trace"
            ),
        );
        return EXIT_USAGE;
    }
    let opts = match options_from(prog, args) {
        Ok(o) => o,
        Err(m) => {
            fatal(prog, &m);
            return EXIT_ERROR;
        }
    };
    let json = opts
        .str_value("oformat")
        .is_some_and(|f| f.starts_with("json"));
    selfcheck::main(prog, json)
}

/// Applies the option-setting flags in command-line order.
fn options_from(prog: &str, args: &Args) -> Result<DOptions, String> {
    let mut opts = DOptions::new();
    for s in &args.setopts {
        if let Err(e) = opts.set(&s.name, s.value.as_deref()) {
            let m = cmdline_error_message(prog, &s.origin, &e);
            return Err(m.trim_start_matches(&format!("{prog}: ")).to_string());
        }
    }
    if args.zero_ok {
        let _ = opts.set("zdefs", None);
    }
    Ok(opts)
}

/// The text compiled for `-P/-m/-f/-n/-i`: the description completed to four fields.
fn probe_program_text(kind: ProbeSpecKind, text: &str) -> String {
    let split = text.find(['{', '/']).unwrap_or(text.len());
    let (desc, rest) = text.split_at(split);
    let desc = desc.trim_end();
    let fields = desc.matches(':').count() + 1;
    let desc = match kind {
        ProbeSpecKind::Provider if fields == 1 => format!("{desc}:::"),
        ProbeSpecKind::Module if fields == 1 => format!(":{desc}::"),
        ProbeSpecKind::Module if fields == 2 => format!("{desc}::"),
        ProbeSpecKind::Function if fields == 1 => format!("::{desc}:"),
        ProbeSpecKind::Function if fields == 2 => format!(":{desc}:"),
        ProbeSpecKind::Function if fields == 3 => format!("{desc}:"),
        _ => desc.to_string(),
    };
    format!("{desc}{rest}")
}

fn load_programs(args: &Args) -> Result<Vec<Program>, String> {
    let mut v = Vec::new();
    for p in &args.programs {
        match p {
            ProgramSource::Script(path) => {
                let shown = path.display().to_string();
                let bytes = if shown == "-" {
                    let mut b = Vec::new();
                    std::io::Read::read_to_end(&mut std::io::stdin(), &mut b)
                        .map_err(|e| format!("failed to read standard input: {e}"))?;
                    b
                } else {
                    std::fs::read(path)
                        .map_err(|e| format!("failed to open {shown}: {}", io_reason(&e)))?
                };
                let text = String::from_utf8(bytes)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
                v.push(Program {
                    what: format!("script {shown}"),
                    text,
                    kind: SourceKind::File,
                    file_name: shown,
                });
            }
            ProgramSource::Probe(kind, text) => v.push(Program {
                what: format!("probe specifier {text}"),
                text: probe_program_text(*kind, text),
                kind: SourceKind::String,
                file_name: "<command-line>".into(),
            }),
        }
    }
    Ok(v)
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "No such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "Permission denied".into(),
        _ => e.to_string(),
    }
}

fn cpp_options(args: &Args, model: DataModel) -> CppOptions {
    let mut predefined = vec![
        ("__SUNW_D".to_string(), "1".to_string()),
        ("__SUNW_D_VERSION".to_string(), "0x010d".to_string()),
        ("__dtx".to_string(), "1".to_string()),
    ];
    match model {
        DataModel::Lp64 => {
            for m in ["__amd64", "__amd64__", "__x86_64", "__x86_64__"] {
                predefined.push((m.into(), "1".into()));
            }
            predefined.push(("_LP64".into(), "1".into()));
            predefined.push(("__LP64__".into(), "1".into()));
            predefined.push(("__SUNW_D_64".into(), "1".into()));
        }
        DataModel::Ilp32 => {
            for m in ["__i386", "__i386__"] {
                predefined.push((m.into(), "1".into()));
            }
            predefined.push(("_ILP32".into(), "1".into()));
            predefined.push(("__ILP32__".into(), "1".into()));
        }
    }
    // dt_cc.c, dt_preproc: __STDC__ is 0 in the default mode (-Xa) and in -Xt, 1 in -Xc, and
    // not defined in -Xs; the last -X or -x stdc= wins
    let stdc = args
        .setopts
        .iter()
        .rev()
        .find(|o| o.name == "stdc")
        .and_then(|o| o.value.as_deref());
    match stdc {
        Some("c") => predefined.push(("__STDC__".into(), "1".into())),
        Some("s") => {}
        _ => predefined.push(("__STDC__".into(), "0".into())),
    }
    CppOptions {
        include_dirs: args.include_dirs.clone(),
        defines: args.defines.clone(),
        undefs: args.undefs.clone(),
        predefined,
    }
}

fn macro_env(args: &Args, script: Option<&str>, target: u64) -> MacroEnv {
    let mut margs = vec![script.unwrap_or(&args.argv0).to_string()];
    margs.extend(args.operands.iter().cloned());
    let me = std::process::id() as u64;
    MacroEnv {
        args: margs,
        defaultargs: false,
        vars: vec![
            ("pid".into(), me),
            ("ppid".into(), parent_pid()),
            ("target".into(), target),
            ("uid".into(), 0),
            ("gid".into(), 0),
            ("euid".into(), 0),
            ("egid".into(), 0),
            ("sid".into(), 0),
            ("pgid".into(), 0),
            ("projid".into(), 0),
            ("taskid".into(), 0),
        ],
    }
}

fn parent_pid() -> u64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 2..];
            rest.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// Plans the run the command line asks for ([`plan::plan`]), then carries the plan out.
fn run(prog: &str, args: &Args) -> Result<i32, String> {
    let opts = options_from(prog, args)?;
    // several traces (files, globs, zip members): each on its own engine, merged
    let expanded = match args.etl_files.len() {
        0 => Vec::new(),
        _ => traces::expand(&args.etl_files)?,
    };
    let stdout_terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let terminal = stdout_terminal && std::io::IsTerminal::is_terminal(&std::io::stdin());
    // printf's string values (a trace's text) reach a terminal escaped; into a pipe or a
    // file, and in structured formats (which escape for themselves), they are as dtrace's
    let text = opts.str_value("oformat").is_none_or(|f| f == "text");
    crate::output::shown::set_terminal_strings(text && stdout_terminal);
    let plan = plan::plan(args, expanded, terminal)?;
    run_plan(prog, args, opts, plan)
}

/// Carries out a [`plan::Plan`]: opens the traces (or the live sources), the console or the
/// target, compiles the programs and runs them.
fn run_plan(prog: &str, args: &Args, mut opts: DOptions, plan: plan::Plan) -> Result<i32, String> {
    use plan::{End, Mode, Output, Traces};
    // a recorded trace: its providers join the catalog
    let mut etw = crate::providers::etw::EtwProbes::new();
    let single = match &plan.traces {
        Traces::One(path) => Some(path.clone()),
        _ => None,
    };
    let many = if let Traces::Many(expanded) = plan.traces {
        let threads = crate::engine::many::pool_size(expanded.len());
        let (union, scanned) = crate::engine::many::scan_providers(&expanded, threads)?;
        etw = union;
        if let Some(c) = crate::etw::catalog::load_cached(false) {
            for p in &c.providers {
                etw.add_provider(p);
            }
        }
        Some(ManyRun {
            traces: expanded,
            scanned,
            etw: etw.clone(),
            threads,
        })
    } else {
        None
    };
    let trace = match &single {
        _ if many.is_some() => None,
        Some(path)
            if Path::new(path).exists()
                || path.to_string_lossy().contains(".zip:")
                || crate::etw::reader::is_demo(&path.to_string_lossy()) =>
        {
            let mut src = crate::sources::etl::TraceSource::open(&path.to_string_lossy())
                .map_err(|e| e.to_string())?;
            src.scan_providers(&mut etw);
            // the system's provider catalog, when one is cached (on Windows next to dtx.exe)
            if let Some(c) = crate::etw::catalog::load_cached(false) {
                for p in &c.providers {
                    etw.add_provider(p);
                }
            }
            // the walk for the run starts from fresh state
            src.decoder = crate::sources::etl::TraceSource::new_decoder();
            Some((src, etw.clone()))
        }
        #[cfg(not(windows))]
        Some(path) => {
            // what the user most likely meant is a recorded trace: say first that it is not
            // there, then why no live session is started instead
            return Err(format!(
                "{}: no such file; -E reads an existing .etl file here (live ETW tracing into a new file needs Windows)",
                path.display()
            ));
        }
        // Windows: -E with a file that does not exist traces live and logs to that file
        #[cfg(windows)]
        Some(_) => None,
        None => None,
    };
    let console = plan.mode == Mode::Console;
    // a recorded trace has no live process: `-c`'s output would never show and `$target`
    // would name a process that is not in the trace (docs/command-line.md)
    if trace.is_some() && !console && (!args.command.is_empty() || !args.pids.is_empty()) {
        let which = if args.command.is_empty() { "-p" } else { "-c" };
        return Err(format!(
            "{which} traces a live process, and -E {} replays a recording: give one or the other (in a replay, pick a process of the trace with a predicate such as /pid == 1234/)",
            single.as_ref().map(|p| p.display().to_string()).unwrap_or_default()
        ));
    }
    // what is said from here on shows in the console (a note of the live ETW setup below
    // written to the terminal would be hidden by the console's screen)
    let _held = console.then(crate::output::stderr::capture);
    // live ETW: the user providers resolved through the system's provider catalog (cached
    // next to the executable), every provider of it for -l
    #[cfg(windows)]
    let live_etw = if trace.is_none() && many.is_none() {
        let texts: Vec<String> = args
            .programs
            .iter()
            .map(args::ProgramSource::text)
            .collect();
        crate::sources::etw_live::windows::live_etw(
            &texts,
            args.etl.clone(),
            args.list || args.tui || args.programs.is_empty(),
        )?
    } else {
        crate::sources::etw_live::LiveEtw::default()
    };
    let mut catalog = if trace.is_some() || many.is_some() {
        crate::providers::etw_catalog(&etw)
    } else if cfg!(windows) {
        // live ETW: the kernel providers and the user providers the programs name
        #[cfg(windows)]
        let etw = live_etw.etw.clone();
        crate::providers::etw_catalog(&etw)
    } else {
        // live: on Linux this includes the perf-backed kernel providers
        crate::providers::live_catalog()
    };
    let pid_provider = crate::sources::debugger::pid_provider();
    if console {
        let source = match (&single, trace) {
            (Some(path), Some((_, etw))) => crate::engine::session::SessionSource::Trace {
                path: path.to_string_lossy().into_owned(),
                etw: std::sync::Arc::new(etw),
            },
            // Windows: live ETW, sessions planned for the console's program and re-planned
            // when it is replaced
            #[cfg(windows)]
            _ => crate::engine::session::SessionSource::Etw(crate::engine::session::EtwBackend {
                etw: std::sync::Arc::new(live_etw.etw.clone()),
                open: crate::sources::etw_live::windows::open_control(
                    args.etl.clone(),
                    args.etl_process_all,
                ),
            }),
            #[cfg(not(windows))]
            _ => crate::engine::session::SessionSource::Timers,
        };
        // the console's target is opened by its session, on the engine's thread
        let request = target::request(args)?;
        if request.is_some() {
            if matches!(source, crate::engine::session::SessionSource::Trace { .. }) {
                return Err("a trace replay (-E) cannot trace a process (-c/-p)".into());
            }
            catalog.add(Box::new(pid_provider.clone()));
            catalog.add(Box::new(pid_provider.fpid()));
        }
        let target = request.map(|request| crate::engine::session::SessionTarget {
            request,
            open: target::open_target,
            provider: pid_provider,
        });
        // the console has no Ctrl-C handler of its own: its handler stops the live sessions
        // and gives up the sampling interval on a console close, Ctrl-Break and Ctrl-C alike,
        // installed before any session starts
        #[cfg(windows)]
        crate::sources::etw_live::windows::install_console_handler_for_console();
        return run_console(args, source, catalog, target);
    }
    // fpid's ring options are checked before a target exists (a refusal leaves nothing
    // started); a `#pragma` setting them is checked again when the hooks go in
    #[cfg(any(target_os = "linux", windows))]
    crate::sources::fpid::RingOptions::from_options(&opts).check()?;
    // -x metrics with -c/-p: the exporter's session opens the target on its engine thread (the
    // thread the debugger answers), as the console's does, before the program is compiled
    let served_target = match opts.str_value("metrics") {
        Some(_) if plan.open_target && trace.is_none() && many.is_none() => target::request(args)?,
        _ => None,
    };
    // the target (-c/-p) exists before compiling: `$target` and its pid probes know it
    let target = if plan.open_target && served_target.is_none() {
        target::create(args)?
    } else {
        None
    };
    let mut target_pid = target.as_ref().map_or(0, |t| t.pid as u64);
    // the target's own types (its PDBs, the executable's then its DLLs'): pid`NAME, and pid
    // probes' args[] from prototypes
    let mut target_types = target
        .as_ref()
        .and_then(|t| t.maps())
        .map(|(maps, exe)| crate::symbols::process_types::for_process(&exe, &maps));
    catalog.add(Box::new(pid_provider.clone()));
    catalog.add(Box::new(pid_provider.fpid()));
    let catalog = std::sync::Arc::new(catalog);
    let mut served = None;
    if let (Some(request), Some(bind)) = (served_target, opts.str_value("metrics")) {
        #[cfg(windows)]
        let live = Some(live_etw.etw.clone());
        #[cfg(not(windows))]
        let live = None::<crate::providers::etw::EtwProbes>;
        let s = crate::serve::metrics::start(
            bind,
            live_session_source(args, live),
            catalog.clone(),
            Some(crate::engine::session::SessionTarget {
                request,
                open: target::open_target,
                provider: pid_provider.clone(),
            }),
        )?;
        target_pid = s.target as u64;
        // the served target is the session's: its types are read from its module list now
        target_types = pid_provider
            .process_maps(s.target)
            .ok()
            .map(|(maps, exe)| crate::symbols::process_types::for_process(&exe, &maps));
        served = Some(s);
    }
    let model = plan.model;
    let programs = load_programs(args)?;
    let mut out: Box<dyn Write + Send> = match &plan.output {
        Output::File(p) => Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| {
                    format!(
                        "failed to open output file '{}': {}",
                        p.display(),
                        io_reason(&e)
                    )
                })?,
        ),
        Output::Stdout => Box::new(std::io::stdout()),
    };
    let listing = plan.end == End::List;
    if listing {
        let _ = listing::header(&mut out);
    }
    let mut compiled = Vec::new();
    for p in &programs {
        let script = match p.kind {
            SourceKind::File => Some(p.file_name.as_str()),
            SourceKind::String => None,
        };
        let mut macros = macro_env(args, script, target_pid);
        macros.defaultargs = opts.defaultargs();
        let cpp = (args.cpp || opts.cpp()).then(|| cpp_options(args, model));
        let input = CompileInput {
            text: &p.text,
            kind: p.kind,
            macros,
            cpp,
            file_name: &p.file_name,
            model,
        };
        match lang::compile_with_types(input, &mut opts, &*catalog, target_types.clone()) {
            Ok(c) => {
                if args.disasm || opts.verbose() {
                    let _ = write!(std::io::stderr(), "{}", crate::ir::disasm::program(&c.ir));
                }
                if listing {
                    let _ = listing::program_probes(&mut out, &c, &*catalog, args.verbose);
                }
                compiled.push(c);
            }
            Err(d) => {
                let errtags = opts.errtags();
                let what = if p.kind == SourceKind::File {
                    format!("failed to compile {}", p.what)
                } else {
                    format!("invalid {}", p.what)
                };
                return Err(format!("{what}: {}", d.render(errtags)));
            }
        }
    }
    match plan.end {
        End::List => {
            if programs.is_empty() {
                let _ = listing::all_probes(&mut out, &*catalog, args.verbose);
            }
            let _ = out.flush();
            return Ok(EXIT_OK);
        }
        End::NoProbes => {
            let mut err = std::io::stderr();
            // dtrace's words; with -E alone, which opens the console on a terminal, what the
            // console would have needed too
            let why = if args.etl_files.is_empty() {
                ""
            } else {
                " (-E alone opens the console, which needs a terminal on standard input and output: give a program, -n or -s, to run in batch)"
            };
            let _ = writeln!(err, "{prog}: no probes specified{why}");
            return Ok(EXIT_USAGE);
        }
        End::CompileOnly => {
            if args.verbose {
                for (p, c) in programs.iter().zip(&compiled) {
                    let _ = out.write_all(&stability_report(p, c, &catalog, false));
                }
                let _ = out.flush();
            }
            return Ok(EXIT_OK);
        }
        End::Run => {}
    }
    if compiled.iter().any(|c| c.destructive) && !opts.destructive() {
        // dtrace enables the programs (and says what they matched) before its kernel refuses
        // them at DTRACEIOC_GO (dtrace_state_go: EACCES)
        if !args.quiet && !opts.quiet() {
            for (p, c) in programs.iter().zip(&compiled) {
                let n: usize =
                    c.ir.clauses
                        .iter()
                        .flat_map(|cl| &cl.probes)
                        .map(|d| crate::probes::ProbeCatalog::matching(&*catalog, d).len())
                        .sum();
                let line = crate::output::messages::matched(
                    program_source(p),
                    &program_label(p),
                    n as u64,
                );
                crate::output::stderr::write(&line.replacen("dtx", prog, 1));
                if args.verbose {
                    let _ = out.write_all(&stability_report(p, c, &catalog, true));
                }
            }
            let _ = out.flush();
        }
        return Err("could not enable tracing: Destructive actions not allowed".into());
    }
    {
        let irs: Vec<&crate::ir::Program> = compiled.iter().map(|c| &c.ir).collect();
        let names: Vec<String> = programs.iter().map(|p| p.file_name.clone()).collect();
        enabling::check(&opts, &irs, &names)?;
    }
    // lkd() live: the privilege the dump needs, before anything is traced
    let lkd = |c: &crate::lang::CompiledProgram| {
        c.ir.actions()
            .iter()
            .any(|a| matches!(a.kind, crate::ir::ActionKind::Lkd))
    };
    if trace.is_none() && many.is_none() && compiled.iter().any(lkd) {
        crate::output::live_dump::check_privilege()?;
    }
    // -x metrics=HOST:PORT: the exporter serves the program's aggregations (src/serve)
    if let Some(bind) = opts.str_value("metrics").map(str::to_string) {
        if target.is_some() {
            // only a pragma set it: the target was opened for a batch run, on this thread
            return Err("-x metrics with -c/-p: give -x metrics on the command line, not as a pragma, so that the exporter's session opens the process".into());
        }
        #[cfg(windows)]
        let live = (trace.is_none() && many.is_none()).then(|| live_etw.etw.clone());
        #[cfg(not(windows))]
        let live = None::<crate::providers::etw::EtwProbes>;
        return run_metrics(
            args,
            bind,
            opts,
            catalog,
            &programs,
            compiled,
            single,
            trace,
            many.is_some(),
            live,
            served,
        );
    }

    // live ETW only when no trace is replayed (one or many)
    #[cfg(windows)]
    let live_etw = (trace.is_none() && many.is_none()).then_some(live_etw);
    let pid_run = PidRun {
        target,
        provider: pid_provider,
        live_etw: None,
        many,
    };
    #[cfg(windows)]
    let pid_run = PidRun {
        live_etw,
        ..pid_run
    };
    run_programs(
        prog, args, &opts, &catalog, &programs, compiled, out, trace, pid_run,
    )
}

/// `-x metrics=`: the program on a session, its aggregations served as metrics.
#[allow(clippy::too_many_arguments)]
fn run_metrics(
    args: &Args,
    bind: String,
    opts: DOptions,
    catalog: std::sync::Arc<Catalog>,
    programs: &[Program],
    mut compiled: Vec<lang::CompiledProgram>,
    single: Option<std::path::PathBuf>,
    trace: Option<(
        crate::sources::etl::TraceSource,
        crate::providers::etw::EtwProbes,
    )>,
    many: bool,
    live: Option<crate::providers::etw::EtwProbes>,
    served: Option<crate::serve::metrics::Served>,
) -> Result<i32, String> {
    use crate::engine::session::{ProgramSpec, SessionSource};
    if many {
        return Err("-x metrics serves one run: give -E one trace".into());
    }
    if compiled.len() != 1 {
        return Err(
            "-x metrics serves one program: give -s once, or -n clauses in one -s file".into(),
        );
    }
    let label = programs.first().map(program_label).unwrap_or_default();
    let Some(c) = compiled.pop() else {
        return Err("no program".into());
    };
    let served = match served {
        Some(s) => s,
        None => {
            let source = match (single, trace) {
                (Some(path), Some((_, etw))) => SessionSource::Trace {
                    path: path.to_string_lossy().into_owned(),
                    etw: std::sync::Arc::new(etw),
                },
                _ => live_session_source(args, live),
            };
            crate::serve::metrics::start(&bind, source, catalog, None)?
        }
    };
    let interrupted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = interrupted.clone();
    let _ = ctrlc::set_handler(move || flag.store(true, std::sync::atomic::Ordering::SeqCst));
    crate::serve::metrics::run(crate::serve::metrics::Options {
        served,
        program: ProgramSpec {
            label,
            program: std::sync::Arc::new(c.ir),
            options: opts,
        },
        interrupted,
    })
}

/// The session source of a live exporter run: live ETW on Windows (its console handler
/// installed before any session starts), the live clock and perf events elsewhere.
#[cfg_attr(not(windows), allow(unused_variables))]
fn live_session_source(
    args: &Args,
    live: Option<crate::providers::etw::EtwProbes>,
) -> crate::engine::session::SessionSource {
    #[cfg(windows)]
    {
        crate::sources::etw_live::windows::install_console_handler_for_console();
        crate::engine::session::SessionSource::Etw(crate::engine::session::EtwBackend {
            etw: std::sync::Arc::new(live.unwrap_or_default()),
            open: crate::sources::etw_live::windows::open_control(
                args.etl.clone(),
                args.etl_process_all,
            ),
        })
    }
    #[cfg(not(windows))]
    crate::engine::session::SessionSource::Timers
}

/// Live tracing for the MCP server's programs `texts` (none: every probe, for
/// `list_probes`): on Windows live ETW, its user providers resolved as the command line
/// resolves them and its console handler installed before any session starts (so that a
/// closed console or Ctrl-C stops the sessions); elsewhere the live clock and perf events.
/// Whether the process may trace is the session's to find out: a refusal (ETW's access
/// denied without elevation, perf's `perf_event_paranoid`) comes back in the run's messages.
fn mcp_live_source(
    texts: &[String],
) -> Result<
    (
        crate::engine::session::SessionSource,
        std::sync::Arc<crate::probes::Catalog>,
    ),
    String,
> {
    #[cfg(windows)]
    {
        let live = crate::sources::etw_live::windows::live_etw(texts, None, texts.is_empty())?;
        let catalog = std::sync::Arc::new(crate::providers::etw_catalog(&live.etw));
        crate::sources::etw_live::windows::install_console_handler_for_console();
        Ok((
            crate::engine::session::SessionSource::Etw(crate::engine::session::EtwBackend {
                etw: std::sync::Arc::new(live.etw),
                open: crate::sources::etw_live::windows::open_control(None, false),
            }),
            catalog,
        ))
    }
    #[cfg(not(windows))]
    {
        let _ = texts;
        Ok((
            crate::engine::session::SessionSource::Timers,
            std::sync::Arc::new(crate::providers::live_catalog()),
        ))
    }
}

/// The target process and the pid provider of a run.
struct PidRun {
    target: Option<target::Target>,
    provider: crate::providers::pid::PidProvider,
    /// Windows: the ETW providers of a live run and the file to log to.
    #[cfg_attr(not(windows), allow(dead_code))]
    live_etw: Option<crate::sources::etw_live::LiveEtw>,
    /// Several traces, run each on its own engine and merged.
    many: Option<ManyRun>,
}

/// The traces of a many-trace run (`-E` given several files, a glob or a zip of several).
struct ManyRun {
    traces: Vec<String>,
    /// What the scan learnt of each trace.
    scanned: Vec<std::sync::Mutex<crate::engine::many::ScannedTrace>>,
    /// The union of their providers.
    etw: crate::providers::etw::EtwProbes,
    threads: usize,
}

/// Opens the console (`--tui`, or no program on a terminal) with the command line's program.
fn run_console(
    args: &Args,
    source: crate::engine::session::SessionSource,
    catalog: Catalog,
    target: Option<crate::engine::session::SessionTarget>,
) -> Result<i32, String> {
    let mut script = None;
    let mut text = Vec::new();
    for p in &args.programs {
        match p {
            ProgramSource::Script(path) if script.is_none() && text.is_empty() => {
                script = Some(path.clone())
            }
            ProgramSource::Script(path) => text
                .push(std::fs::read_to_string(path).map_err(|e| {
                    format!("failed to open {}: {}", path.display(), io_reason(&e))
                })?),
            ProgramSource::Probe(kind, t) => text.push(probe_program_text(*kind, t)),
        }
    }
    if script.is_some() && !text.is_empty() {
        return Err("the console runs one script; give -s once or -n clauses".into());
    }
    let run = script.is_some() || !text.is_empty();
    crate::tui::run(crate::tui::ConsoleOptions {
        source,
        catalog: std::sync::Arc::new(catalog),
        script,
        text: (!text.is_empty()).then(|| text.join("\n")),
        run,
        theme: args.theme.clone(),
        keys: args.keys.clone().map(std::path::PathBuf::from),
        refresh: std::time::Duration::from_millis(250),
        target,
        demo: args.demo && !run,
        baseline: match &args.baseline {
            Some(f) => Some(load_baseline(f)?),
            None => None,
        },
        metrics: args
            .xopts
            .iter()
            .rev()
            .find(|(n, _)| n == "metrics")
            .and_then(|(_, v)| v.clone()),
    })
}

/// `--baseline FILE`: the console's `dtx-baseline.json`, or a result saved with `-x
/// oformat=json` (as `dtx --diff` reads it).
fn load_baseline(f: &str) -> Result<crate::tui::baseline::Baseline, String> {
    use crate::tui::baseline::Baseline;
    let text = std::fs::read_to_string(f)
        .map_err(|e| format!("--baseline: failed to open {f}: {}", io_reason(&e)))?;
    if let Some(b) = Baseline::from_json(&text).map_err(|e| format!("--baseline {f}: {e}"))? {
        return Ok(b);
    }
    let doc =
        crate::output::json::parse(text.trim()).map_err(|e| format!("--baseline {f}: {e}"))?;
    let views = diff::views_of(f, doc).map_err(|e| format!("--baseline {f}: {e}"))?;
    Ok(Baseline::of_views(f, &views))
}

/// `-v`'s stability report of one program (`enabled`: after its "matched" line; else `-e`'s,
/// with each description's probe information).
fn stability_report(
    p: &Program,
    c: &lang::CompiledProgram,
    catalog: &Catalog,
    enabled: bool,
) -> Vec<u8> {
    let what = program_source(p).word();
    let mut buf = Vec::new();
    let _ = listing::stability_report(&mut buf, what, &program_label(p), c, catalog, enabled);
    buf
}

/// What dtrace calls a program in its messages: a script (`-s`) or a description.
fn program_source(p: &Program) -> crate::output::messages::ProgramSource {
    match p.kind {
        SourceKind::File => crate::output::messages::ProgramSource::Script,
        SourceKind::String => crate::output::messages::ProgramSource::Description,
    }
}

/// The name dtrace gives a program in its messages: the script's file, or a description up to
/// its predicate or actions.
fn program_label(p: &Program) -> String {
    match p.kind {
        SourceKind::File => p.file_name.clone(),
        SourceKind::String => {
            let t = p.what.trim_start_matches("probe specifier ");
            t[..t.find(['{', '/', ';']).unwrap_or(t.len())].to_string()
        }
    }
}

/// Runs the compiled programs with the live clock until `exit()`, Ctrl-C, or forever.
#[allow(clippy::too_many_arguments)]
fn run_programs(
    prog: &str,
    args: &Args,
    opts: &DOptions,
    catalog: &Catalog,
    programs: &[Program],
    compiled: Vec<lang::CompiledProgram>,
    out: Box<dyn Write + Send>,
    trace: Option<(
        crate::sources::etl::TraceSource,
        crate::providers::etw::EtwProbes,
    )>,
    pid_run: PidRun,
) -> Result<i32, String> {
    use crate::engine::consumer::{Consumer, ConsumerOptions};
    use crate::output::messages;
    let copts = ConsumerOptions::from_options(opts, prog, args.quiet, args.flow);
    let quiet = copts.quiet;
    let shared = crate::output::labelled::SharedOutput::new(out);
    let consumer = Consumer::new(Box::new(shared.clone()), copts.clone());
    let compiled_uses_stacks = compiled.iter().any(|c| crate::engine::uses_stacks(&c.ir));
    let reports: Vec<Vec<u8>> = match args.verbose {
        true => programs
            .iter()
            .zip(&compiled)
            .map(|(p, c)| stability_report(p, c, catalog, true))
            .collect(),
        false => Vec::new(),
    };
    let mut runs = Vec::new();
    for (p, c) in programs.iter().zip(compiled) {
        let label = program_label(p);
        runs.push((label, std::sync::Arc::new(c.ir)));
    }
    let mut consumer = consumer;
    consumer.symbols = Box::new(crate::providers::pid::UserSymbols(pid_run.provider.clone()));
    let mut engine = crate::engine::Engine::new(
        runs,
        crate::vm::VmOptions::from_options(opts),
        catalog,
        Box::new(crate::engine::clock::LiveClock::new()),
        consumer,
    );
    #[cfg(target_os = "linux")]
    let mut perf = match (&trace, &pid_run.many) {
        (None, None) => open_perf(prog, &mut engine, opts, compiled_uses_stacks, args.verbose)?,
        _ => None,
    };
    // the interrupt handler comes before any session starts: Ctrl-C during start-up must
    // reach the run's normal end (sessions stopped), not the default handler's exit
    let flag = engine.interrupt_flag();
    // (one handler for the process: it also ends symbol downloads, their partial files removed)
    crate::symbols::symsrv::guard::on_ctrl_c(flag);
    // and a closed console window stops the sessions before Windows ends dtx (logoff and
    // shutdown end dtx with no signal: the next dtx stops what that leaves)
    #[cfg(windows)]
    crate::sources::etw_live::windows::install_console_handler();
    #[cfg(windows)]
    if trace.is_none() && pid_run.many.is_none() {
        engine.say_etw_limits();
    }
    #[cfg(windows)]
    let etw_live = match (&trace, &pid_run.live_etw) {
        (None, Some(live)) => crate::sources::etw_live::windows::open_for(
            &engine,
            &live.etw,
            live.log_file.as_deref(),
            args.etl_process_all,
            pid_run.target.as_ref().map(|t| t.pid),
        )?,
        _ => None,
    };
    for (i, (p, r)) in programs.iter().zip(&engine.runs).enumerate() {
        if !quiet {
            crate::output::stderr::write(
                &messages::matched(program_source(p), &r.label, r.matched as u64)
                    .replacen("dtx", prog, 1),
            );
        }
        if let Some(report) = reports.get(i) {
            let mut o = shared.clone();
            let _ = o.write_all(report).and_then(|_| o.flush());
        }
    }
    if opts.is_set("statusrate") {
        engine.statusrate = Some(opts.statusrate());
    }
    if let Some(many) = pid_run.many {
        let programs = engine
            .runs
            .iter()
            .map(|r| (r.label.clone(), r.vm.program.clone()))
            .collect();
        let run = crate::engine::many::ManyTraces {
            traces: &many.traces,
            programs,
            vm_opts: crate::vm::VmOptions::from_options(opts),
            catalog,
            etw: &many.etw,
            scanned: many.scanned,
            consumer: copts,
            out: shared,
            stacks: compiled_uses_stacks,
            stack_window: stack_window(opts),
            threads: many.threads,
        };
        return Ok(crate::engine::many::run(&mut engine, &run));
    }
    match trace {
        Some((mut src, etw)) => {
            if compiled_uses_stacks {
                src.set_stack_window(stack_window(opts));
                src.collect_stacks();
            }
            Ok(engine.run_trace(&mut src, &etw))
        }
        None => {
            let pid_source = target::source(
                pid_run.target,
                &pid_run.provider,
                &engine,
                quiet,
                compiled_uses_stacks,
            )?;
            // fpid hooks go in while the target is still stopped
            #[cfg(any(target_os = "linux", windows))]
            let (pid_source, fpid_source) = crate::sources::fpid::split(
                pid_source,
                &pid_run.provider,
                &engine,
                crate::sources::fpid::RingOptions::from_options(opts),
            )?;
            let pid_source = target::backend(pid_source, opts.str_value("pidmode"), &engine)?;
            // the target and the kernel's events, together when a program has both
            let mut sources: Vec<Box<dyn crate::engine::EventSource>> = Vec::new();
            if let Some(src) = pid_source {
                sources.push(src);
            }
            #[cfg(any(target_os = "linux", windows))]
            if let Some(src) = fpid_source {
                sources.push(Box::new(src));
            }
            #[cfg(target_os = "linux")]
            if let Some(src) = perf.take() {
                sources.push(Box::new(src));
            }
            // Windows: live ETW alone (its losses are reported after the run), or merged
            // Windows: live ETW, alone or merged with the target; what it lost (and why a
            // session ended early) is said after the run either way
            #[cfg(windows)]
            let mut etw_live = etw_live;
            #[cfg(windows)]
            if let Some(src) = etw_live.as_mut() {
                if sources.is_empty() {
                    let status = engine.run_live(src);
                    for line in src.report(prog) {
                        crate::output::stderr::write(&line);
                    }
                    return Ok(status);
                }
            }
            #[cfg(windows)]
            let etw_live = etw_live.map(|s| std::rc::Rc::new(std::cell::RefCell::new(s)));
            #[cfg(windows)]
            if let Some(src) = &etw_live {
                sources.push(Box::new(crate::sources::merged::Shared(src.clone())));
            }
            let status = match crate::sources::merged::MergedSource::new(sources).simplify() {
                Some(mut src) => engine.run_live(&mut *src),
                None => engine.run(),
            };
            #[cfg(windows)]
            if let Some(src) = etw_live {
                for line in src.borrow_mut().report(prog) {
                    crate::output::stderr::write(&line);
                }
            }
            Ok(status)
        }
    }
}

/// Opens the perf-events source when the programs enable live kernel probes (`syscall`,
/// `sched`, `proc`, `io`, `profile-N`); programs of `BEGIN`/`END`/`tick-N` alone stay on the
/// timer path. A program whose only live probes are `profile-N` falls back to the engine's
/// timer (with a warning) where perf events are unavailable.
#[cfg(target_os = "linux")]
fn open_perf(
    prog: &str,
    engine: &mut crate::engine::Engine,
    opts: &DOptions,
    stacks: bool,
    verbose: bool,
) -> Result<Option<crate::sources::perf::live::PerfSource>, String> {
    use crate::sources::perf::live::{open_for, PerfConfig};
    let config = PerfConfig::from_options(opts, stacks, verbose);
    match open_for(engine, &config) {
        Ok(opened) => Ok(opened.map(|(src, _)| src)),
        Err(e) => {
            let kernel_probes = engine
                .enabled_probes()
                .any(|p| crate::providers::linux::is_linux_probe(p.id));
            if kernel_probes {
                return Err(e);
            }
            fatal(
                prog,
                &format!("warning: {e}; profile-N fires on dtx's own timer"),
            );
            Ok(None)
        }
    }
}

/// `-x stackwindow`: how far ahead of a trace's walk its stacks are read, in ns (0: every stack
/// before the run; see `sources::etl::stacks`).
fn stack_window(opts: &DOptions) -> u64 {
    match opts.int("stackwindow") {
        Some(ns) => ns.max(0) as u64,
        None => crate::sources::etl::stacks::DEFAULT_WINDOW_NS,
    }
}
