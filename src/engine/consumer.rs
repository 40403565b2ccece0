//! The batch consumer: turns a firing's records into dtrace's text output, carries out the
//! library actions (`printa`, `clear`, `trunc`, ...) in record order, reports faults, and prints
//! the remaining aggregations at the end.

mod structured;

use std::io::Write;

use crate::agg::{Encoding, NoSymbols, SortOptions, SymbolResolver};
use crate::ir::{ActionKind, ValKind};
use crate::output::messages;
use crate::output::printa;
use crate::output::printf;
use crate::output::record as rec;
use crate::output::stack;
use crate::probes::ProbeInfo;
use crate::vm::{Datum, FireResult, Record, Vm};

/// How the consumer prints.
#[derive(Clone, Debug, Default)]
pub struct ConsumerOptions {
    pub quiet: bool,
    pub flowindent: bool,
    pub rawbytes: bool,
    pub sort: SortOptions,
    /// Program name for messages (`dtx`).
    pub prog: String,
    /// `-xdroptags`: drop messages carry their `[DTRACEDROP_*]` tag.
    pub droptags: bool,
    /// `-x oformat`: dtrace's text, a JSON or XML document, or folded stacks.
    pub oformat: crate::output::structured::OFormat,
    /// The options the run started with, which `setopt()` changes while it runs; and the
    /// command line's `-q` and `-F`, which no option can take back.
    pub options: crate::lang::options::DOptions,
    pub quiet_flag: bool,
    pub flow_flag: bool,
    /// `switchrate` in nanoseconds when the program set it (`-x`, a pragma or `setopt()`):
    /// the consumer then takes the records at that rate, as dtrace's consumer takes its
    /// buffers, and a `printa()` shows the aggregation as it is when its record is taken.
    /// Unset, each firing's records are taken at once.
    pub switch_ns: Option<u64>,
}

impl ConsumerOptions {
    /// The options a program's settings (`-x`, pragmas) give, with the command line's `-q`
    /// and `-F` flags.
    pub fn from_options(
        opts: &crate::lang::options::DOptions,
        prog: &str,
        quiet: bool,
        flow: bool,
    ) -> Self {
        let mut o = ConsumerOptions {
            prog: prog.to_string(),
            options: opts.clone(),
            quiet_flag: quiet,
            flow_flag: flow,
            ..ConsumerOptions::default()
        };
        o.refresh();
        o
    }

    /// Derives the printing settings from `options` (at the start, and after a `setopt()`).
    fn refresh(&mut self) {
        let opts = &self.options;
        self.sort = SortOptions {
            aggsortkey: opts.aggsortkey(),
            aggsortrev: opts.aggsortrev(),
            aggsortpos: opts.aggsortpos().map(|v| v as usize),
            aggsortkeypos: opts.aggsortkeypos().map(|v| v as usize),
            aggpack: opts.aggpack(),
            agghist: opts.agghist(),
            aggzoom: opts.aggzoom(),
            encoding: match opts.encoding() {
                Some("ascii") => Encoding::Ascii,
                Some("utf8") => Encoding::Utf8,
                _ => Encoding::Default,
            },
            strsize: opts.strsize() as usize,
            rawbytes: opts.rawbytes(),
            ..SortOptions::default()
        };
        self.quiet = opts.quiet() || self.quiet_flag;
        self.flowindent = opts.flowindent() || self.flow_flag;
        self.rawbytes = opts.rawbytes();
        self.droptags = opts.droptags();
        self.switch_ns = opts.is_set("switchrate").then(|| opts.switchrate());
        self.oformat = opts
            .str_value("oformat")
            .and_then(crate::output::structured::OFormat::parse)
            .unwrap_or_default();
    }

    /// `setopt(name[, value])` while tracing: dtrace's `dtrace_setopt()` on a running
    /// consumer, where only dynamic options may change. Returns dtrace's reason on refusal.
    pub fn setopt(&mut self, name: &str, value: Option<&str>) -> Result<(), &'static str> {
        use crate::lang::options::SetContext;
        self.options
            .set_in(SetContext::Active, name, value)
            .map_err(|e| e.message())?;
        self.refresh();
        Ok(())
    }
}

pub struct Consumer {
    out: Box<dyn Write + Send>,
    opts: ConsumerOptions,
    header_done: bool,
    /// Set when an `exit()` record was consumed.
    pub exit_code: Option<i32>,
    buf: Vec<u8>,
    /// Faults reported, for the exit status.
    pub errors: u64,
    /// Names addresses in stacks and symbol keys (`0x...` until a source sets one: the pid
    /// provider's process symbols, the perf source's live symbols).
    pub symbols: Box<dyn SymbolResolver + Send>,
    /// `-F` indentation state.
    flow: crate::output::flow::FlowIndent,
    /// Objects written to a structured document so far (its opening is written with the first).
    doc_items: usize,
    /// Where `etw_trace()` events go.
    etw: crate::output::etw_writer::EtwWriter,
    /// Set once stderr has said why `etw_trace()` events are not written.
    etw_warned: bool,
    /// `lkd()`'s dumps: each call site's last, or why none is taken.
    dumps: crate::output::live_dump::LiveDumps,
    /// The file `freopen()` sent the output to; `None` while it goes to the consumer's own
    /// output.
    redirect: Option<std::fs::File>,
    /// Firings whose records wait for the next switch (see [`ConsumerOptions::switch_ns`]).
    pending: Vec<Pending>,
    /// When the consumer last took the records (the firing's timestamp).
    last_switch: Option<u64>,
    /// The trace whose firings this consumer takes, in a run over several traces: run-time
    /// faults name it (`dtx: a.etl: error on enabled probe ...`).
    trace_label: Option<String>,
}

/// One firing's records held until the consumer takes them.
struct Pending {
    /// The program that recorded them (its address: one consumer serves every program).
    program: usize,
    records: Vec<(u32, Record)>,
    result: FireResult,
}

/// The identity of the program a VM runs.
fn program_key(vm: &Vm) -> usize {
    std::sync::Arc::as_ptr(&vm.program) as usize
}

/// The probe a fault happened in, as the fault message names it.
fn fault_probe<'a>(
    e: &crate::vm::ErrorInfo,
    probes: &'a crate::fasthash::FastMap<u64, ProbeInfo>,
) -> messages::FaultProbe<'a> {
    let p = probes.get(&e.probe);
    messages::FaultProbe {
        epid: e.epid,
        id: e.probe as u32,
        provider: p.map(|p| p.provider.as_str()).unwrap_or(""),
        module: p.map(|p| p.module.as_str()).unwrap_or(""),
        func: p.map(|p| p.function.as_str()).unwrap_or(""),
        name: p.map(|p| p.name.as_str()).unwrap_or(""),
    }
}

/// The enabled probe a library action's complaint names: its EPID and probe description.
fn fault_probe_of(epid: u32, probe: Option<&ProbeInfo>) -> messages::FaultProbe<'_> {
    messages::FaultProbe {
        epid,
        id: probe.map(|p| p.id as u32).unwrap_or(0),
        provider: probe.map(|p| p.provider.as_str()).unwrap_or(""),
        module: probe.map(|p| p.module.as_str()).unwrap_or(""),
        func: probe.map(|p| p.function.as_str()).unwrap_or(""),
        name: probe.map(|p| p.name.as_str()).unwrap_or(""),
    }
}

/// An `etw_trace()` record's values as the event's level, keyword and field values.
pub(crate) fn etw_trace_args(
    values: &[Datum],
) -> (u8, u64, Vec<crate::etw::tlg_event::EtwValue<'_>>) {
    use crate::etw::tlg_event::EtwValue;
    let int = |d: Option<&Datum>| match d {
        Some(Datum::Int { value, .. }) => *value,
        _ => 0,
    };
    let fields = values
        .get(2..)
        .unwrap_or(&[])
        .iter()
        .map(|d| match d {
            Datum::Int { value, .. } => EtwValue::Int(*value),
            Datum::Str(s) | Datum::Bytes(s) => EtwValue::Str(s),
            // no stack or address key is an argument of etw_trace() (see check/etw_trace.rs)
            _ => EtwValue::Int(0),
        })
        .collect();
    (
        int(values.first()).clamp(0, 255) as u8,
        int(values.get(1)) as u64,
        fields,
    )
}

impl Consumer {
    pub fn new(out: Box<dyn Write + Send>, opts: ConsumerOptions) -> Self {
        Consumer {
            out,
            opts,
            header_done: false,
            exit_code: None,
            buf: Vec::new(),
            errors: 0,
            symbols: Box::new(NoSymbols),
            flow: crate::output::flow::FlowIndent::new(),
            doc_items: 0,
            etw: crate::output::etw_writer::EtwWriter::new(),
            etw_warned: false,
            dumps: crate::output::live_dump::LiveDumps::new(),
            redirect: None,
            pending: Vec::new(),
            last_switch: None,
            trace_label: None,
        }
    }

    /// Where output goes now: the file of the last `freopen()`, or the consumer's output.
    fn sink(&mut self) -> &mut dyn Write {
        match &mut self.redirect {
            Some(f) => f,
            None => &mut *self.out,
        }
    }

    /// Names the trace the next firings come from in fault messages (`None`: a run over one
    /// trace, or BEGIN and END of a run over several, where dtrace's words are kept).
    pub fn set_trace_label(&mut self, label: Option<&str>) {
        self.trace_label = label.map(str::to_string);
    }

    /// A fault's stderr line: dtrace's, with the trace's name after the program's in a run
    /// over several traces.
    fn fault_stderr(&self, msg: &str) -> String {
        match &self.trace_label {
            Some(t) => messages::error_line(&format!("{t}: {msg}")),
            None => messages::error_line(msg),
        }
    }

    /// Puts `out` where the consumer writes (after writing out what it holds) and returns
    /// what it wrote to before: the labelled output of one trace after another.
    pub fn swap_output(&mut self, out: Box<dyn Write + Send>) -> Box<dyn Write + Send> {
        self.write_buf();
        let _ = self.out.flush();
        std::mem::replace(&mut self.out, out)
    }

    /// Sets the resolver that names stack frames and `sym()`/`usym()` keys.
    pub fn set_symbols(&mut self, symbols: Box<dyn SymbolResolver + Send>) {
        self.symbols = symbols;
    }

    fn write_buf(&mut self) {
        if !self.buf.is_empty() {
            let buf = std::mem::take(&mut self.buf);
            let _ = self.sink().write_all(&buf);
            self.buf = buf;
            self.buf.clear();
        }
    }

    /// The program name used in messages.
    pub fn prog(&self) -> &str {
        &self.opts.prog
    }

    pub fn flush(&mut self) {
        self.write_buf();
        let _ = self.sink().flush();
    }

    /// Consumes the records of one firing of `vm`.
    /// Takes one firing's records (`now` is the firing's timestamp): at once, or, when the
    /// program set a `switchrate`, once that much time has passed since the last switch.
    #[inline]
    pub fn consume(
        &mut self,
        vm: &mut Vm,
        res: &FireResult,
        probes: &crate::fasthash::FastMap<u64, ProbeInfo>,
        now: u64,
    ) {
        // the commonest firing (`n++`, `@[k] = count()`) records nothing: taken without a call
        if self.opts.switch_ns.is_none()
            && self.pending.is_empty()
            && vm.records.is_empty()
            && res.errors.is_empty()
        {
            return;
        }
        self.consume_records(vm, res, probes, now)
    }

    /// [`Consumer::consume`] of a firing that recorded something, or at a switch.
    fn consume_records(
        &mut self,
        vm: &mut Vm,
        res: &FireResult,
        probes: &crate::fasthash::FastMap<u64, ProbeInfo>,
        now: u64,
    ) {
        let Some(rate) = self.opts.switch_ns else {
            if !self.pending.is_empty() {
                self.take_pending(vm, probes);
            }
            return self.consume_now(vm, res, probes);
        };
        if !vm.records.is_empty() || !res.errors.is_empty() {
            self.pending.push(Pending {
                program: program_key(vm),
                records: std::mem::take(&mut vm.records),
                result: FireResult {
                    exit: res.exit,
                    errors: res.errors.clone(),
                },
            });
        }
        if self
            .last_switch
            .is_some_and(|t| now.saturating_sub(t) < rate)
        {
            return;
        }
        self.last_switch = Some(now);
        self.take_pending(vm, probes);
    }

    /// Consumes the held firings of `vm`'s program, in order.
    fn take_pending(&mut self, vm: &mut Vm, probes: &crate::fasthash::FastMap<u64, ProbeInfo>) {
        let key = program_key(vm);
        let (mine, others): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.program == key);
        self.pending = others;
        let spare = std::mem::take(&mut vm.records);
        for p in mine {
            vm.records = p.records;
            self.consume_now(vm, &p.result, probes);
        }
        vm.records = spare;
    }

    fn consume_now(
        &mut self,
        vm: &mut Vm,
        res: &FireResult,
        probes: &crate::fasthash::FastMap<u64, ProbeInfo>,
    ) {
        if vm.records.is_empty() && res.errors.is_empty() {
            // the common case of a live source: a clause that only aggregates
            return;
        }
        if self.opts.oformat != crate::output::structured::OFormat::Text {
            return self.consume_structured(vm, res, probes);
        }
        let records = std::mem::take(&mut vm.records);
        let program = vm.program.clone();
        let actions = program.actions();
        let mut open = false;
        // the probe of the clause whose records these are (for library errors)
        let mut cur_probe = 0u64;
        for (i, (epid, r)) in records.iter().enumerate() {
            if let Record::Fire { probe, .. } = r {
                cur_probe = *probe;
            }
            match r {
                Record::Fire { cpu, probe, .. } if self.opts.flowindent => {
                    // -F: `-> func` / `<- func` lines, printed in quiet mode too
                    if open {
                        rec::end_of_firing(self.opts.quiet, &mut self.buf);
                    }
                    if !self.header_done {
                        self.buf.extend_from_slice(rec::flow_header().as_bytes());
                        self.header_done = true;
                    }
                    let next = records[i + 1..].iter().find_map(|(e, r)| match r {
                        Record::Fire { probe, .. } => Some((*e, *probe as u32)),
                        _ => None,
                    });
                    let (provider, func, name) = probes
                        .get(probe)
                        .map(|p| (p.provider.as_str(), p.function.as_str(), p.name.as_str()))
                        .unwrap_or(("", "", ""));
                    let fp = crate::output::flow::FlowProbe {
                        epid: *epid,
                        probe_id: *probe as u32,
                        provider,
                        name,
                    };
                    let line = self.flow.firing(&fp, next);
                    crate::output::flow::flow_line(*cpu, &line, func, name, &mut self.buf);
                    open = true;
                }
                Record::Fire { cpu, probe, .. } => {
                    if open {
                        rec::end_of_firing(self.opts.quiet, &mut self.buf);
                    }
                    if !self.opts.quiet {
                        if !self.header_done {
                            self.buf.extend_from_slice(rec::probe_header().as_bytes());
                            self.header_done = true;
                        }
                        let (func, name) = probes
                            .get(probe)
                            .map(|p| (p.function.as_str(), p.name.as_str()))
                            .unwrap_or(("", ""));
                        rec::firing_prefix(*cpu, *probe, func, name, &mut self.buf);
                    }
                    open = true;
                }
                Record::Data { action, values } => {
                    let Some(a) = actions.get(*action as usize) else {
                        continue;
                    };
                    match &a.kind {
                        ActionKind::Printf(f) => {
                            let _ = printf::format_with(
                                f,
                                values,
                                &printf::Context::default(),
                                &mut self.buf,
                            );
                        }
                        ActionKind::Stack { .. }
                        | ActionKind::Ustack { .. }
                        | ActionKind::Jstack { .. } => {
                            for v in values {
                                if let Datum::Stack {
                                    frames,
                                    user,
                                    pid,
                                    epoch,
                                } = v
                                {
                                    let epoch = *epoch;
                                    let syms = &*self.symbols;
                                    if *user {
                                        // an empty user stack prints nothing at all
                                        if !frames.is_empty() {
                                            let pid = *pid;
                                            stack::stack_simple(
                                                frames,
                                                stack::DEFAULT_INDENT,
                                                &|pc| {
                                                    Some(
                                                        match syms.user_lookup_at(pid, epoch, pc) {
                                                            stack::Lookup::None => {
                                                                syms.user_at(pid, epoch, pc)
                                                            }
                                                            l => stack::frame_text(pc, &l, true),
                                                        },
                                                    )
                                                },
                                                &mut self.buf,
                                            );
                                        }
                                    } else {
                                        stack::stack_simple(
                                            frames,
                                            stack::DEFAULT_INDENT,
                                            &|pc| Some(syms.kernel_at(epoch, pc)),
                                            &mut self.buf,
                                        );
                                    }
                                }
                            }
                        }
                        ActionKind::Print(ty) => {
                            for v in values {
                                match v {
                                    Datum::Int { value, size, .. } => {
                                        crate::output::print::print_value(
                                            ty,
                                            &value.to_le_bytes()[..(*size).clamp(1, 8) as usize],
                                            &mut self.buf,
                                        )
                                    }
                                    Datum::Str(s) | Datum::Bytes(s) => {
                                        crate::output::print::print_value(ty, s, &mut self.buf)
                                    }
                                    _ => {}
                                }
                            }
                        }
                        ActionKind::Tracemem => {
                            for v in values {
                                if let Datum::Bytes(b) = v {
                                    crate::output::memory::hex_dump(b, &mut self.buf);
                                }
                            }
                        }
                        _ => {
                            let o = rec::TraceOpts {
                                quiet: self.opts.quiet,
                                rawbytes: self.opts.rawbytes,
                            };
                            for (v, k) in values.iter().zip(&a.arg_kinds) {
                                match (v, k) {
                                    (Datum::Str(s), ValKind::String) => {
                                        rec::trace_string(s, vm.opts.strsize, o, &mut self.buf)
                                    }
                                    _ => rec::trace_datum_opts(&v.as_view(), o, &mut self.buf),
                                }
                            }
                        }
                    }
                }
                Record::Lib { action, values } => {
                    let Some(a) = actions.get(*action as usize) else {
                        continue;
                    };
                    if let ActionKind::Setopt = a.kind {
                        self.setopt_record(values, *epid, probes.get(&cur_probe));
                        continue;
                    }
                    self.library_action(vm, a, values, *epid, probes.get(&cur_probe));
                }
                Record::Exit(code) => self.exit_code = Some(*code),
            }
        }
        if open {
            rec::end_of_firing(self.opts.quiet, &mut self.buf);
        }
        for e in &res.errors {
            self.errors += 1;
            let fp = fault_probe(e, probes);
            self.write_buf();
            let _ = self.sink().flush();
            let msg = messages::fault_message(
                &fp,
                e.action as i32,
                0,
                e.fault.code() as u32,
                e.fault.addr(),
            );
            crate::output::stderr::write(&self.fault_stderr(&msg));
        }
        self.write_buf();
        vm.records = records;
        vm.records.clear();
    }

    /// A `setopt()` record: the option changes for what the consumer prints from here on; a
    /// refused one is reported as dtrace's `dt_setopt()` does, as an error on the enabled
    /// probe, and tracing goes on.
    fn setopt_record(&mut self, values: &[Datum], epid: u32, probe: Option<&ProbeInfo>) {
        let text = |i: usize| match values.get(i) {
            Some(Datum::Str(s)) => Some(String::from_utf8_lossy(s).into_owned()),
            _ => None,
        };
        let Some(name) = text(0) else {
            return;
        };
        let value = text(1);
        if let Err(why) = self.opts.setopt(&name, value.as_deref()) {
            let fp = fault_probe_of(epid, probe);
            // dt_consume.c: an option set without a value is set to "1", and dt_setopt's
            // message ends in a newline of its own (a blank line follows it)
            let msg = format!(
                "couldn't set option \"{name}\" to \"{}\": {why}\n",
                value.as_deref().unwrap_or("1")
            );
            self.write_buf();
            let _ = self.sink().flush();
            let line = messages::library_fault_line(&fp, &msg);
            crate::output::stderr::write(&line);
        }
    }

    fn library_action(
        &mut self,
        vm: &mut Vm,
        action: &crate::ir::Action,
        values: &[Datum],
        epid: u32,
        probe: Option<&ProbeInfo>,
    ) {
        let kind = &action.kind;
        let int = |i: usize| match values.get(i) {
            Some(Datum::Int { value, .. }) => Some(*value),
            _ => None,
        };
        match kind {
            ActionKind::Printa { format, aggs } => match format {
                Some(f) => {
                    if let Err(e) = printa::print_formatted(
                        &vm.aggs,
                        f,
                        aggs,
                        &self.opts.sort,
                        &*self.symbols,
                        &mut self.buf,
                    ) {
                        self.write_buf();
                        crate::output::stderr::say(&self.opts.prog, &e.message);
                    }
                }
                None => printa::print_default_multi(
                    &vm.aggs,
                    aggs,
                    &self.opts.sort,
                    &*self.symbols,
                    &mut self.buf,
                ),
            },
            ActionKind::EtwTrace(def) => self.etw_trace(def, values),
            ActionKind::Lkd => self.lkd((program_key(vm), action.id)),
            ActionKind::Freopen(f) => self.freopen(f, values, epid, probe),
            ActionKind::Clear(a) => vm.aggs.clear(*a),
            ActionKind::Trunc(a) => vm.aggs.trunc(*a, int(0), &*self.symbols),
            ActionKind::Normalize(a) => vm.aggs.normalize(*a, int(0).unwrap_or(1)),
            ActionKind::Denormalize(a) => vm.aggs.denormalize(*a),
            ActionKind::System(f) => {
                let mut cmd = Vec::new();
                let _ = printf::format_with(f, values, &printf::Context::default(), &mut cmd);
                self.write_buf();
                let _ = self.sink().flush();
                let cmd = String::from_utf8_lossy(&cmd).into_owned();
                let _ = std::process::Command::new("/bin/sh")
                    .arg("-c")
                    .arg(cmd)
                    .status();
            }
            _ => {}
        }
    }

    /// `freopen(file)`: the output from here on is appended to `file`; `freopen("")` brings it
    /// back to the consumer's output. A file that cannot be opened is reported as dtrace's
    /// `dtrace_freopen()` reports it, an error on the enabled probe, and the output stays
    /// where it was.
    fn freopen(
        &mut self,
        f: &printf::Format,
        values: &[Datum],
        epid: u32,
        probe: Option<&ProbeInfo>,
    ) {
        self.write_buf();
        let _ = self.sink().flush();
        if f.source.is_empty() {
            self.redirect = None;
            return;
        }
        let mut name = Vec::new();
        let _ = printf::format_with(f, values, &printf::Context::default(), &mut name);
        let name = String::from_utf8_lossy(&name).into_owned();
        match std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&name)
        {
            Ok(file) => self.redirect = Some(file),
            Err(e) => {
                let fp = fault_probe_of(epid, probe);
                let why = crate::output::messages::strerror(&e);
                let msg = format!("couldn't freopen() \"{name}\": {why}");
                let line = messages::library_fault_line(&fp, &msg);
                crate::output::stderr::write(&line);
            }
        }
    }

    /// `etw_trace()`: builds the event from the recorded level, keyword and field values and
    /// writes it; why it could not be written is said once on stderr.
    fn etw_trace(&mut self, def: &crate::etw::tlg_event::EtwEventDef, values: &[Datum]) {
        use crate::output::etw_writer::EtwWriteError;
        let (level, keyword, fields) = etw_trace_args(values);
        let res = def
            .payload(&fields)
            .map_err(EtwWriteError::Failed)
            .and_then(|p| self.etw.write(def, level, keyword, &p));
        let why = match res {
            Ok(()) => return,
            Err(EtwWriteError::NoEtw) => {
                "this system has no ETW: its events are not written".to_string()
            }
            Err(EtwWriteError::Failed(m)) => m,
        };
        if !self.etw_warned {
            self.etw_warned = true;
            self.write_buf();
            let _ = self.sink().flush();
            crate::output::stderr::say(&self.opts.prog, format_args!("etw_trace(): {why}"));
        }
    }

    /// `lkd()`: a live kernel memory dump, its path said; where none can be taken, why, once
    /// (output/live_dump.rs).
    fn lkd(&mut self, site: (usize, u32)) {
        use crate::output::live_dump::Outcome;
        self.write_buf();
        let _ = self.sink().flush();
        let line = match self.dumps.fire(site, std::time::Instant::now()) {
            Outcome::Taken(path) => {
                format!(
                    "lkd(): live kernel memory dump written to {}",
                    path.display()
                )
            }
            Outcome::Unavailable(Some(why))
            | Outcome::Limited(Some(why))
            | Outcome::Failed(why) => why,
            Outcome::Unavailable(None) | Outcome::Limited(None) => return,
        };
        crate::output::stderr::say(&self.opts.prog, line);
    }

    /// The run is over a trace: `lkd()` takes no dump.
    pub fn over_trace(&mut self) {
        self.dumps.over_trace();
    }

    /// End of the run: dtrace's final newline, then every non-empty aggregation not yet printed
    /// (in the structured formats: the closing of the document, or the folded stacks), then
    /// the drops on stderr.
    pub fn finish(&mut self, vm: &mut Vm, probes: &crate::fasthash::FastMap<u64, ProbeInfo>) {
        self.take_pending(vm, probes);
        let drops = self.drop_messages(vm);
        match self.opts.oformat {
            crate::output::structured::OFormat::Text => {
                rec::final_newline(&mut self.buf);
                printa::print_unprinted(&vm.aggs, &self.opts.sort, &*self.symbols, &mut self.buf);
            }
            crate::output::structured::OFormat::Folded => self.finish_folded(vm),
            _ => self.finish_structured(vm, &drops),
        }
        self.write_buf();
        let _ = self.sink().flush();
        for (_, _, msg) in &drops {
            crate::output::stderr::write(msg);
        }
    }

    /// The drops of the run: kind, count and dtrace's message for each kind that dropped.
    fn drop_messages(&self, vm: &Vm) -> Vec<(messages::DropKind, u64, String)> {
        let mut out = Vec::new();
        let (spec, busy, unavail) = vm.spec_drops();
        for (kind, n) in [
            (messages::DropKind::Principal, vm.principal_drops),
            (messages::DropKind::Aggregation, vm.agg_drops),
        ] {
            if n > 0 {
                out.push((kind, n, messages::cpu_drops(kind, n, 0, self.opts.droptags)));
            }
        }
        let drops = [
            (messages::DropKind::Dynamic, vm.dynvar_drops()),
            (messages::DropKind::Spec, spec),
            (messages::DropKind::SpecBusy, busy),
            (messages::DropKind::SpecUnavail, unavail),
            (messages::DropKind::DblError, vm.double_errors),
        ];
        for (kind, n) in drops {
            if n > 0 {
                out.push((kind, n, messages::status_drops(kind, n, self.opts.droptags)));
            }
        }
        out
    }
}
