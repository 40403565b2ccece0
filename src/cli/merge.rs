//! `dtx --merge a.json b.json ...`: saved aggregation results (the `aggregations` list of
//! `-x oformat=json`, docs/output-formats.md) read back, added together as dtrace adds per-CPU
//! buffers, and printed as the end of a run prints them: dtrace's text, or JSON/XML again with
//! `-x oformat=...`. The reduce step of a map/reduce over many machines
//! (docs/many-traces.md).

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use crate::agg::{AggregationTable, SymbolResolver};
use crate::ir::value::Datum;
use crate::ir::{AggFunc, Aggregation};
use crate::lang::options::DOptions;
use crate::output::json::Json;

/// The options and files of `--merge`.
struct MergeArgs {
    opts: DOptions,
    output: Option<String>,
    files: Vec<String>,
}

/// `argv` after `--merge`: `-x opt[=value]` (oformat, aggsort...), `-o file`, `-q`, then files
/// (`-` for standard input).
fn parse_args(argv: &[String]) -> Result<MergeArgs, String> {
    let mut a = MergeArgs {
        opts: DOptions::new(),
        output: None,
        files: Vec::new(),
    };
    let mut it = argv.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-x" | "-o" => {
                let Some(v) = it.next() else {
                    return Err(format!("option {arg} requires an argument"));
                };
                if arg == "-o" {
                    a.output = Some(v.clone());
                    continue;
                }
                let (name, value) = match v.split_once('=') {
                    Some((n, val)) => (n, Some(val)),
                    None => (v.as_str(), None),
                };
                a.opts
                    .set(name, value)
                    .map_err(|_| format!("failed to set -x {v}: Invalid option or value"))?;
            }
            "-q" => {}
            other if other.starts_with('-') && other != "-" => {
                return Err(format!(
                    "--merge: unknown option '{other}' (it takes -x opt[=val], -o file, -q; --merge --help)"
                ))
            }
            _ => a.files.push(arg.clone()),
        }
    }
    if a.files.is_empty() {
        return Err("--merge needs saved results: dtx --merge a.json b.json ...".into());
    }
    Ok(a)
}

/// `dtx --merge --help`.
pub fn usage_text(prog: &str) -> String {
    format!(
        "Usage: {prog} --merge [-x opt[=val]] [-o output] [-q] file.json ...\n\n\
         \tMerges the aggregations of saved results (-x oformat=json runs) as one run\n\
         \twould have printed them: counts, sums, min/max, averages and quantizations\n\
         \tadd by key; a file named - is standard input.\n\n\
         \t-x  output options (oformat=json, aggsortkey, aggsortrev, ...)\n\
         \t-o  append the output to a file\n\
         \t-q  accepted (the merge prints only the aggregations)\n"
    )
}

/// Runs `dtx --merge ...` (`argv` after `--merge`); returns the exit status.
pub fn main(prog: &str, argv: &[String]) -> i32 {
    if argv.iter().any(|a| a == "--help" || a == "-h") {
        print!("{}", usage_text(prog));
        return 0;
    }
    match run(prog, argv) {
        Ok(()) => 0,
        Err(e) => {
            crate::output::stderr::say(prog, e);
            1
        }
    }
}

fn run(prog: &str, argv: &[String]) -> Result<(), String> {
    let args = parse_args(argv)?;
    let mut docs = Vec::new();
    for f in &args.files {
        let text = if f == "-" {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
                .map_err(|e| format!("failed to read standard input: {e}"))?;
            s
        } else {
            std::fs::read_to_string(f).map_err(|e| format!("failed to open {f}: {e}"))?
        };
        let doc = crate::output::json::parse(&text).map_err(|e| format!("{f}: {e}"))?;
        docs.push((f.as_str(), doc));
    }
    let merged = merge(&docs)?;
    let out: Box<dyn Write + Send> = match &args.output {
        Some(p) => Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| format!("failed to open output file '{p}': {e}"))?,
        ),
        None => Box::new(std::io::stdout()),
    };
    let copts =
        crate::engine::consumer::ConsumerOptions::from_options(&args.opts, prog, true, false);
    let mut consumer = crate::engine::consumer::Consumer::new(out, copts);
    consumer.set_symbols(Box::new(merged.names));
    let program = crate::ir::Program {
        aggregations: merged.defs,
        ..Default::default()
    };
    let mut vm = crate::vm::Vm::new(Arc::new(program), crate::vm::VmOptions::default());
    vm.aggs = merged.table;
    consumer.finish(&mut vm, &Default::default());
    Ok(())
}

/// Saved results added together.
pub struct Merged {
    /// The aggregations, in the order they first appear.
    pub defs: Vec<Aggregation>,
    pub table: AggregationTable,
    /// The names the saved results gave stack frames and symbol keys.
    pub names: SavedNames,
}

/// The aggregation list of a saved document: `{"dtrace": {"aggregations": [...]}}`, or the
/// list itself (`jq '.dtrace.aggregations'`).
fn aggregation_list(doc: &Json) -> Option<&[Json]> {
    let list = match doc {
        Json::Array(_) => doc,
        _ => doc
            .get("dtrace")
            .and_then(|d| d.get("aggregations"))
            .or_else(|| doc.get("aggregations"))?,
    };
    match list {
        Json::Array(v) => Some(v),
        _ => None,
    }
}

/// The names (`@name`, `@_` for the anonymous one) of a saved document's aggregations, empty
/// ones too.
pub fn aggregation_names(doc: &Json) -> Vec<String> {
    aggregation_list(doc)
        .unwrap_or(&[])
        .iter()
        .filter_map(agg_name)
        .collect()
}

/// Adds the aggregations of the documents (named by file for errors) together.
pub fn merge(docs: &[(&str, Json)]) -> Result<Merged, String> {
    let mut defs: Vec<Aggregation> = Vec::new();
    let mut origin: Vec<&str> = Vec::new();
    for (file, doc) in docs {
        let list = aggregation_list(doc)
            .ok_or_else(|| format!("{file}: no aggregation list (the JSON of -x oformat=json)"))?;
        for a in list {
            let name =
                agg_name(a).ok_or_else(|| format!("{file}: an aggregation without a name"))?;
            let Some(func) = agg_func(a).map_err(|e| format!("{file}: @{name}: {e}"))? else {
                continue; // an empty aggregation has no function
            };
            match defs.iter().position(|d| d.name == name) {
                Some(i) if defs[i].func != func => {
                    return Err(format!(
                        "@{}: {} in {} but {} in {file}",
                        name.trim_start_matches('@'),
                        func_text(&defs[i].func),
                        origin[i],
                        func_text(&func)
                    ))
                }
                Some(_) => {}
                None => {
                    defs.push(Aggregation {
                        name: name.clone(),
                        func,
                        keys: Vec::new(),
                    });
                    origin.push(file);
                }
            }
        }
    }
    let mut table = AggregationTable::new(&defs);
    let mut names = SavedNames::default();
    for (file, doc) in docs {
        for a in aggregation_list(doc).unwrap_or(&[]) {
            let Some(name) = agg_name(a) else { continue };
            let Some(id) = defs.iter().position(|d| d.name == name) else {
                continue;
            };
            let id = id as u32;
            let rows = match a.get("aggregation-data") {
                Some(Json::Array(rows)) => rows,
                _ => continue,
            };
            for row in rows {
                let keys = match row.get("keys") {
                    Some(Json::Array(k)) => k,
                    _ => return Err(format!("{file}: @{name}: a row without keys")),
                };
                let key = keys
                    .iter()
                    .map(|k| key_value(k, &mut names))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("{file}: {name}: {e}"))?;
                let words = row_words(row, &defs[id as usize].func, table.stride(id))
                    .map_err(|e| format!("{file}: {name}: {e}"))?;
                table
                    .merge_words(id, &key, &words)
                    .map_err(|e| format!("{file}: {name}: {e}"))?;
            }
        }
    }
    Ok(Merged { defs, table, names })
}

/// The aggregation's name as the program wrote it (`@name`).
fn agg_name(a: &Json) -> Option<String> {
    match a.get("aggregation-name")? {
        Json::Str(s) => Some(format!("@{s}")),
        _ => None,
    }
}

fn int(v: Option<&Json>) -> Option<i64> {
    match v? {
        Json::Int(i) => Some(*i),
        Json::UInt(u) => Some(*u as i64),
        _ => None,
    }
}

/// The aggregating function and its parameters; `None` for an empty aggregation.
fn agg_func(a: &Json) -> Result<Option<AggFunc>, String> {
    let Some(Json::Str(f)) = a.get("function") else {
        return Ok(None);
    };
    let p = a.get("parameters");
    let param = |n: &str| {
        int(p.and_then(|p| p.get(n))).ok_or_else(|| format!("{f}() without its parameter {n}"))
    };
    if let Some(simple) = AggFunc::parameterless(f) {
        return Ok(Some(simple));
    }
    Ok(Some(match f.as_str() {
        "lquantize" => AggFunc::Lquantize {
            base: param("base")? as i32,
            step: param("step")? as u16,
            levels: param("levels")? as u16,
        },
        "llquantize" => AggFunc::Llquantize {
            factor: param("factor")? as u16,
            low: param("low")? as u16,
            high: param("high")? as u16,
            nsteps: param("nsteps")? as u16,
        },
        other => return Err(format!("unknown aggregating function {other}")),
    }))
}

/// `count()`, `lquantize(0, 5, 2)`: a function as an error message names it.
fn func_text(f: &AggFunc) -> String {
    match f {
        AggFunc::Lquantize { base, step, levels } => {
            format!("lquantize(base {base}, step {step}, {levels} levels)")
        }
        AggFunc::Llquantize {
            factor,
            low,
            high,
            nsteps,
        } => format!("llquantize({factor}, {low}, {high}, {nsteps})"),
        other => format!("{}()", format!("{other:?}").to_ascii_lowercase()),
    }
}

/// A row's value as the function's data words (see `agg::funcs`): one word for count, sum,
/// min and max; count and sum for avg; count, sum and the 128-bit sum of squares for stddev;
/// every bucket (by its `index`) for the quantizations.
fn row_words(row: &Json, func: &AggFunc, stride: usize) -> Result<Vec<i64>, String> {
    let need = |v: Option<i64>, what: &str| v.ok_or_else(|| format!("a row without {what}"));
    let raw = row.get("raw");
    let mut words = vec![0i64; stride];
    match func {
        AggFunc::Count => words[0] = need(int(row.get("count")), "count")?,
        AggFunc::Sum => words[0] = need(int(row.get("sum")), "sum")?,
        AggFunc::Min => words[0] = need(int(row.get("min")), "min")?,
        AggFunc::Max => words[0] = need(int(row.get("max")), "max")?,
        AggFunc::Avg => {
            words[0] = need(int(raw.and_then(|r| r.get("count"))), "raw count")?;
            words[1] = need(int(raw.and_then(|r| r.get("sum"))), "raw sum")?;
        }
        AggFunc::Stddev => {
            words[0] = need(int(raw.and_then(|r| r.get("count"))), "raw count")?;
            words[1] = need(int(raw.and_then(|r| r.get("sum"))), "raw sum")?;
            let sq: u128 = match raw.and_then(|r| r.get("sum-of-squares")) {
                Some(Json::Str(s)) => s.parse().map_err(|_| "a bad sum-of-squares".to_string())?,
                _ => return Err("a row without raw sum-of-squares".into()),
            };
            words[2] = sq as u64 as i64;
            words[3] = (sq >> 64) as u64 as i64;
        }
        AggFunc::Quantize | AggFunc::Lquantize { .. } | AggFunc::Llquantize { .. } => {
            let Some(Json::Array(buckets)) = row.get("buckets") else {
                return Err("a row without buckets".into());
            };
            for b in buckets {
                let i = need(int(b.get("index")), "a bucket index")?;
                let n = need(int(b.get("count")), "a bucket count")?;
                let slot = usize::try_from(i)
                    .ok()
                    .and_then(|i| words.get_mut(i))
                    .ok_or_else(|| format!("bucket index {i} out of range"))?;
                *slot = n;
            }
        }
    }
    Ok(words)
}

fn address(v: Option<&Json>) -> Result<u64, String> {
    match v {
        Some(Json::Str(s)) => u64::from_str_radix(s.trim_start_matches("0x"), 16)
            .map_err(|_| format!("a bad address {s}")),
        _ => Err("a key without its address".into()),
    }
}

fn text(v: Option<&Json>) -> String {
    match v {
        Some(Json::Str(s)) => s.clone(),
        _ => String::new(),
    }
}

/// One key component of a saved row; the names of stacks and symbols go to `names`.
fn key_value(k: &Json, names: &mut SavedNames) -> Result<Datum, String> {
    let ty = text(k.get("type"));
    let pid = int(k.get("pid")).unwrap_or(0) as u32;
    Ok(match ty.as_str() {
        "int" | "uint" => Datum::Int {
            value: int(k.get("value")).ok_or("an integer key without its value")?,
            size: int(k.get("size")).unwrap_or(8).clamp(1, 8) as u8,
            signed: ty == "int",
        },
        "string" => Datum::Str(text(k.get("value")).into_bytes()),
        "bytes" => {
            let h = text(k.get("value"));
            let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
            let bytes = h
                .as_bytes()
                .chunks(2)
                .map(|p| match p {
                    [a, b] => Some(digit(*a)? << 4 | digit(*b)?),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .ok_or("a bytes key that is not hex")?;
            Datum::Bytes(bytes)
        }
        "stack" | "ustack" => {
            let user = ty == "ustack";
            let list = if user {
                "ustack-frames"
            } else {
                "stack-frames"
            };
            let Some(Json::Array(frames)) = k.get(list) else {
                return Err(format!("a {ty} key without {list}"));
            };
            let mut addrs = Vec::new();
            for f in frames {
                let a = address(f.get("address"))?;
                let sym = text(f.get("symbol"));
                let slot = if user { (Some(pid), a) } else { (None, a) };
                names.frames.entry(slot).or_insert(sym);
                addrs.push(a);
            }
            Datum::Stack {
                frames: addrs,
                user,
                pid,
                epoch: 0,
            }
        }
        "sym" | "mod" | "usym" | "umod" | "uaddr" => {
            let a = address(k.get("address"))?;
            let user = ty.starts_with('u');
            let slot = (user.then_some(pid), a);
            let v = text(k.get("value"));
            match ty.as_str() {
                "sym" | "usym" => names.funcs.entry(slot).or_insert(v),
                "mod" | "umod" => names.modules.entry(slot).or_insert(v),
                _ => names.frames.entry(slot).or_insert(v),
            };
            match ty.as_str() {
                "sym" => Datum::Sym(a),
                "mod" => Datum::Mod(a),
                "usym" => Datum::Usym { addr: a, pid },
                "umod" => Datum::Umod { addr: a, pid },
                _ => Datum::Uaddr { addr: a, pid },
            }
        }
        other => return Err(format!("a key of unknown type {other:?}")),
    })
}

/// The names saved results gave addresses (stack frames, `sym()`/`mod()` keys), by
/// (pid for user addresses, address); the first result that names an address wins.
#[derive(Default)]
pub struct SavedNames {
    frames: HashMap<(Option<u32>, u64), String>,
    funcs: HashMap<(Option<u32>, u64), String>,
    modules: HashMap<(Option<u32>, u64), String>,
}

impl SavedNames {
    fn name(map: &HashMap<(Option<u32>, u64), String>, pid: Option<u32>, addr: u64) -> String {
        map.get(&(pid, addr))
            .cloned()
            .unwrap_or_else(|| format!("0x{addr:x}"))
    }
}

impl SymbolResolver for SavedNames {
    fn kernel(&self, addr: u64) -> String {
        Self::name(&self.frames, None, addr)
    }
    fn user(&self, pid: u32, addr: u64) -> String {
        Self::name(&self.frames, Some(pid), addr)
    }
    fn kmod(&self, addr: u64) -> String {
        Self::name(&self.modules, None, addr)
    }
    fn umod(&self, pid: u32, addr: u64) -> String {
        Self::name(&self.modules, Some(pid), addr)
    }
    fn kernel_func(&self, addr: u64) -> String {
        Self::name(&self.funcs, None, addr)
    }
    fn user_func(&self, pid: u32, addr: u64) -> String {
        Self::name(&self.funcs, Some(pid), addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Json {
        crate::output::json::parse(text).unwrap()
    }

    #[test]
    fn rows_add_by_key_and_function() {
        let a = doc(r#"{"dtrace":{"probes":[],"aggregations":[
            {"aggregation-name":"c","function":"count","parameters":{},"aggregation-data":[
              {"keys":[{"type":"string","value":"x"},{"type":"int","size":4,"value":1}],"count":3}]},
            {"aggregation-name":"m","function":"min","parameters":{},"aggregation-data":[
              {"keys":[],"min":-4}]},
            {"aggregation-name":"q","function":"lquantize","parameters":{"base":0,"step":2,"levels":5},
             "aggregation-data":[{"keys":[],"buckets":[{"value":2,"count":1,"index":2}],"total":1}]},
            {"aggregation-name":"sd","function":"stddev","parameters":{},"aggregation-data":[
              {"keys":[],"stddev":0,"raw":{"count":1,"sum":4,"sum-of-squares":"16"}}]}]}}"#);
        let b = doc(
            r#"[{"aggregation-name":"c","function":"count","parameters":{},"aggregation-data":[
              {"keys":[{"type":"string","value":"x"},{"type":"int","size":4,"value":1}],"count":4},
              {"keys":[{"type":"string","value":"y"},{"type":"int","size":4,"value":1}],"count":1}]},
            {"aggregation-name":"m","function":"min","parameters":{},"aggregation-data":[
              {"keys":[],"min":7}]},
            {"aggregation-name":"q","function":"lquantize","parameters":{"base":0,"step":2,"levels":5},
             "aggregation-data":[{"keys":[],"buckets":[{"value":2,"count":2,"index":2},{"value":4,"count":5,"index":3}],"total":7}]},
            {"aggregation-name":"sd","function":"stddev","parameters":{},"aggregation-data":[
              {"keys":[],"stddev":0,"raw":{"count":1,"sum":8,"sum-of-squares":"64"}}]}]"#,
        );
        let m = merge(&[("a.json", a), ("b.json", b)]).unwrap();
        let c = m.table.snapshot(0);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].1, crate::agg::AggValue::Count(7));
        assert_eq!(c[1].1, crate::agg::AggValue::Count(1));
        assert_eq!(m.table.snapshot(1)[0].1, crate::agg::AggValue::Min(-4));
        match &m.table.snapshot(2)[0].1 {
            crate::agg::AggValue::Lquantize { buckets, .. } => {
                assert_eq!(&buckets[..4], &[0, 0, 3, 5])
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            m.table.snapshot(3)[0].1,
            crate::agg::AggValue::Stddev {
                count: 2,
                sum: 12,
                sum_sq: 80
            }
        );
    }

    #[test]
    fn a_function_that_differs_is_refused() {
        let a = doc(
            r#"[{"aggregation-name":"c","function":"count","parameters":{},"aggregation-data":[]}]"#,
        );
        let b = doc(
            r#"[{"aggregation-name":"c","function":"sum","parameters":{},"aggregation-data":[]}]"#,
        );
        let e = merge(&[("a.json", a), ("b.json", b)]).err().unwrap();
        assert!(e.contains("count() in a.json but sum() in b.json"), "{e}");
        assert!(merge(&[("x.json", doc("{}"))]).is_err());
        // keys that are not what they say are errors, not panics
        for key in [
            r#"{"type":"bytes","value":"éé"}"#,
            r#"{"type":"bytes","value":"abc"}"#,
            r#"{"type":"stack","stack-frames":[{"symbol":"x","address":"zz"}]}"#,
            r#"{"type":"what"}"#,
        ] {
            let text = format!(
                r#"[{{"aggregation-name":"c","function":"count","parameters":{{}},
                   "aggregation-data":[{{"keys":[{key}],"count":1}}]}}]"#
            );
            assert!(merge(&[("k.json", doc(&text))]).is_err(), "{key}");
        }
        let ok = doc(
            r#"[{"aggregation-name":"c","function":"count","parameters":{},
               "aggregation-data":[{"keys":[{"type":"bytes","value":"0aFf"}],"count":2}]}]"#,
        );
        let m = merge(&[("k.json", ok)]).unwrap();
        assert_eq!(m.table.snapshot(0)[0].0, [Datum::Bytes(vec![0x0a, 0xff])]);
    }
}
