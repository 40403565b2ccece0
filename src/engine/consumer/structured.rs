//! The consumer's structured modes: each firing's records as one probe object of a JSON or XML
//! document (`-x oformat=json|xml`, shapes in [`crate::output::structured`]), and the folded
//! stacks of `-x oformat=folded` written when the run ends.

use std::io::Write;

use super::Consumer;
use crate::ir::{ActionKind, ValKind};
use crate::output::json::Json;
use crate::output::messages;
use crate::output::printf;
use crate::output::structured::{self as st, OFormat};
use crate::probes::ProbeInfo;
use crate::vm::{Datum, FireResult, Record, Vm};

/// A firing being assembled: its probe and what its records gave so far.
struct Open {
    cpu: u32,
    probe: u64,
    ts: u64,
    output: Vec<Json>,
}

impl Consumer {
    /// Whether the document is indented (`,pretty`).
    fn pretty(&self) -> bool {
        matches!(
            self.opts.oformat,
            OFormat::Json { pretty: true } | OFormat::Xml { pretty: true }
        )
    }

    /// A value as JSON text, indented when the format says so.
    fn json_text(&self, v: &Json) -> String {
        if self.pretty() {
            v.to_json_pretty()
        } else {
            v.to_json()
        }
    }

    /// Writes one object of the document's `probes` list, opening the document first.
    pub(super) fn emit_probe(&mut self, obj: &Json) {
        let pretty = self.pretty();
        let mut text = String::new();
        match self.opts.oformat {
            OFormat::Json { .. } => {
                text.push_str(if self.doc_items == 0 {
                    "{\"dtrace\":{\"probes\":[\n"
                } else {
                    ",\n"
                });
                text.push_str(&self.json_text(obj));
            }
            OFormat::Xml { .. } => {
                if self.doc_items == 0 {
                    text.push_str("<?xml version=\"1.0\"?>\n<dtrace>\n");
                }
                text.push_str(&obj.to_xml("probes", pretty));
                if !pretty {
                    text.push('\n');
                }
            }
            _ => return,
        }
        self.doc_items += 1;
        self.buf.extend_from_slice(text.as_bytes());
    }

    fn close_firing(
        &mut self,
        open: Option<Open>,
        probes: &crate::fasthash::FastMap<u64, ProbeInfo>,
    ) {
        let Some(o) = open else { return };
        let p = probes.get(&o.probe);
        let desc = [
            p.map_or("", |p| p.provider.as_str()),
            p.map_or("", |p| p.module.as_str()),
            p.map_or("", |p| p.function.as_str()),
            p.map_or("", |p| p.name.as_str()),
        ];
        let obj = st::probe_json(o.ts, i64::from(o.cpu), o.probe as i64, desc, o.output);
        self.emit_probe(&obj);
    }

    /// [`Consumer::consume`] for the structured and folded formats.
    pub(super) fn consume_structured(
        &mut self,
        vm: &mut Vm,
        res: &FireResult,
        probes: &crate::fasthash::FastMap<u64, ProbeInfo>,
    ) {
        let records = std::mem::take(&mut vm.records);
        let program = vm.program.clone();
        let actions = program.actions();
        let folded = self.opts.oformat == OFormat::Folded;
        let mut open: Option<Open> = None;
        for (epid, r) in &records {
            match r {
                Record::Fire { cpu, probe, ts } => {
                    let prev = open.take();
                    self.close_firing(prev, probes);
                    open = Some(Open {
                        cpu: *cpu,
                        probe: *probe,
                        ts: *ts,
                        output: Vec::new(),
                    });
                }
                Record::Data { action, values } if !folded => {
                    let Some(a) = actions.get(*action as usize) else {
                        continue;
                    };
                    let items = self.data_json(&a.kind, &a.arg_kinds, values);
                    if let Some(o) = open.as_mut() {
                        o.output.extend(items);
                    }
                }
                Record::Data { .. } => {}
                Record::Lib { action, values } => {
                    let Some(a) = actions.get(*action as usize) else {
                        continue;
                    };
                    match &a.kind {
                        ActionKind::Printa { format, aggs } if !folded => {
                            let items = self.printa_json(vm, format.as_ref(), aggs);
                            if let Some(o) = open.as_mut() {
                                o.output.extend(items);
                            }
                        }
                        // folded output is of the aggregations' final state
                        ActionKind::Printa { .. } => {}
                        _ => {
                            let probe = open.as_ref().and_then(|o| probes.get(&o.probe));
                            self.library_action(vm, a, values, *epid, probe)
                        }
                    }
                }
                Record::Exit(code) => self.exit_code = Some(*code),
            }
        }
        self.close_firing(open, probes);
        for e in &res.errors {
            self.errors += 1;
            let fp = super::fault_probe(e, probes);
            let msg = messages::fault_message(
                &fp,
                e.action as i32,
                0,
                e.fault.code() as u32,
                e.fault.addr(),
            );
            if self.opts.oformat.is_structured() {
                let obj = st::internal_json(
                    st::now_ns(),
                    "ERROR",
                    vec![
                        ("epid".into(), Json::UInt(u64::from(e.epid))),
                        ("probe-id".into(), Json::UInt(e.probe)),
                        ("action".into(), Json::UInt(u64::from(e.action))),
                        ("fault".into(), Json::UInt(e.fault.code())),
                        (
                            "address".into(),
                            Json::str(format!("0x{:x}", e.fault.addr())),
                        ),
                        ("msg".into(), Json::str(msg.clone())),
                    ],
                );
                self.emit_probe(&obj);
            }
            self.write_buf();
            let _ = self.out.flush();
            crate::output::stderr::write(&self.fault_stderr(&msg));
        }
        self.write_buf();
        vm.records = records;
        vm.records.clear();
    }

    /// What one data record gives: FreeBSD's `{"message": ...}` and a `{"value": ...}` per
    /// argument for printf, `{"value": ...}` for trace, `stack-frames` for stacks, and so on.
    fn data_json(&self, kind: &ActionKind, kinds: &[ValKind], values: &[Datum]) -> Vec<Json> {
        let syms = &*self.symbols;
        let value = |v: &Datum, k: Option<&ValKind>| -> Json {
            match v {
                Datum::Int {
                    value,
                    size,
                    signed,
                } => st::int_json(*value, *size, *signed),
                Datum::Str(s) => Json::str(st::record_text(s)),
                Datum::Bytes(b) if matches!(k, Some(ValKind::String)) => {
                    Json::str(st::record_text(b))
                }
                Datum::Bytes(b) => Json::str(st::hex(b)),
                Datum::Stack {
                    frames,
                    user,
                    pid,
                    epoch,
                } => st::stack_json(frames, *user, *pid, *epoch, syms),
                // address keys, as an aggregation key's JSON names them
                _ => st::key_json(v, syms),
            }
        };
        let one = |name: &str, j: Json| Json::object([(name, j)]);
        let addr = |v: Option<&Datum>| match v {
            Some(Datum::Int { value, .. }) => *value as u64,
            _ => 0,
        };
        match kind {
            ActionKind::Printf(f) => {
                let mut text = Vec::new();
                let _ = printf::format_with(f, values, &printf::Context::default(), &mut text);
                let mut out = vec![one("message", Json::str(String::from_utf8_lossy(&text)))];
                out.extend(
                    values
                        .iter()
                        .enumerate()
                        .map(|(i, v)| one("value", value(v, kinds.get(i)))),
                );
                out
            }
            ActionKind::Stack { .. } | ActionKind::Ustack { .. } | ActionKind::Jstack { .. } => {
                values
                    .iter()
                    .filter_map(|v| match v {
                        Datum::Stack {
                            frames,
                            user,
                            pid,
                            epoch,
                        } => Some(st::stack_json(frames, *user, *pid, *epoch, syms)),
                        _ => None,
                    })
                    .collect()
            }
            ActionKind::Print(ty) => {
                let mut text = Vec::new();
                for v in values {
                    match v {
                        Datum::Int { value, size, .. } => crate::output::print::print_value(
                            ty,
                            &value.to_le_bytes()[..(*size).clamp(1, 8) as usize],
                            &mut text,
                        ),
                        Datum::Str(s) | Datum::Bytes(s) => {
                            crate::output::print::print_value(ty, s, &mut text)
                        }
                        _ => {}
                    }
                }
                vec![one("print", Json::str(String::from_utf8_lossy(&text)))]
            }
            ActionKind::Tracemem => values
                .iter()
                .map(|v| match v {
                    Datum::Bytes(b) | Datum::Str(b) => one("tracemem", Json::str(st::hex(b))),
                    other => one("tracemem", value(other, None)),
                })
                .collect(),
            ActionKind::Sym => vec![one(
                "sym",
                Json::str(syms.kernel_func(addr(values.first()))),
            )],
            ActionKind::Mod => vec![one("mod", Json::str(syms.kmod(addr(values.first()))))],
            ActionKind::Usym | ActionKind::Umod | ActionKind::Uaddr => {
                let pid = match values.get(1) {
                    Some(Datum::Int { value, .. }) => *value as u32,
                    _ => 0,
                };
                let a = addr(values.first());
                let (name, text) = match kind {
                    ActionKind::Usym => ("usym", syms.user_func(pid, a)),
                    ActionKind::Umod => ("umod", syms.umod(pid, a)),
                    _ => ("uaddr", syms.user(pid, a)),
                };
                vec![one(name, Json::str(text))]
            }
            _ => values
                .iter()
                .enumerate()
                .map(|(i, v)| one("value", value(v, kinds.get(i))))
                .collect(),
        }
    }

    /// `printa()`: its formatted text as a `message` when it has a format, then each
    /// aggregation it names as an aggregation object in printa's order.
    fn printa_json(&mut self, vm: &Vm, format: Option<&printf::Format>, aggs: &[u32]) -> Vec<Json> {
        let mut out = Vec::new();
        if let Some(f) = format {
            let mut text = Vec::new();
            if let Err(e) = crate::output::printa::print_formatted(
                &vm.aggs,
                f,
                aggs,
                &self.opts.sort,
                &*self.symbols,
                &mut text,
            ) {
                crate::output::stderr::say(&self.opts.prog, &e.message);
            }
            out.push(Json::object([(
                "message",
                Json::str(String::from_utf8_lossy(&text)),
            )]));
        }
        for &a in aggs {
            vm.aggs.mark_printed(a);
            let rows = vm.aggs.sorted_snapshot(a, &self.opts.sort, &*self.symbols);
            out.push(st::aggregation_json(
                vm.aggs.name(a).unwrap_or(""),
                &rows,
                &*self.symbols,
            ));
        }
        out
    }

    /// The end of a structured document: the final state of every aggregation, each marked
    /// `printed` when a printa() showed it (dtx's addition: the run's aggregations, ready to be
    /// saved and merged), and the drops as FreeBSD's DROP pseudo-probes.
    pub(super) fn finish_structured(
        &mut self,
        vm: &Vm,
        drops: &[(messages::DropKind, u64, String)],
    ) {
        for (kind, n, msg) in drops {
            let obj = st::internal_json(
                st::now_ns(),
                "DROP",
                vec![
                    ("count".into(), Json::UInt(*n)),
                    ("total".into(), Json::UInt(*n)),
                    ("kind".into(), Json::UInt(kind.number())),
                    ("msg".into(), Json::str(msg.clone())),
                ],
            );
            self.emit_probe(&obj);
        }
        let mut aggs = Vec::new();
        for a in 0..vm.aggs.count() as u32 {
            if vm.aggs.is_empty(a) {
                continue;
            }
            let rows = vm.aggs.sorted_snapshot(a, &self.opts.sort, &*self.symbols);
            let mut j = st::aggregation_json(vm.aggs.name(a).unwrap_or(""), &rows, &*self.symbols);
            j.push_member("printed", Json::Bool(vm.aggs.is_printed(a)));
            aggs.push(j);
        }
        let pretty = self.pretty();
        let mut text = String::new();
        match self.opts.oformat {
            OFormat::Json { .. } => {
                text.push_str(if self.doc_items == 0 {
                    "{\"dtrace\":{\"probes\":[],\n\"aggregations\":"
                } else {
                    "\n],\n\"aggregations\":"
                });
                text.push_str(&self.json_text(&Json::Array(aggs)));
                text.push_str("}}\n");
            }
            OFormat::Xml { .. } => {
                if self.doc_items == 0 {
                    text.push_str("<?xml version=\"1.0\"?>\n<dtrace>\n");
                }
                for a in &aggs {
                    text.push_str(&a.to_xml("aggregations", pretty));
                    if !pretty {
                        text.push('\n');
                    }
                }
                text.push_str("</dtrace>\n");
            }
            _ => {}
        }
        self.buf.extend_from_slice(text.as_bytes());
    }

    /// `-x oformat=folded`: every aggregation with a stack key as folded stacks.
    pub(super) fn finish_folded(&mut self, vm: &Vm) {
        let views = crate::agg::snapshot::take(&vm.aggs, &*self.symbols);
        for v in &views {
            if v.has_stack_key() {
                crate::output::folded::write_folded(v, &mut self.buf);
            }
        }
    }
}
