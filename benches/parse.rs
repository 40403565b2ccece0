//! Front-end throughput on a ~4 MB D corpus generated here from varied, realistic clauses:
//! `lex+parse` (the parser alone) and `compile` (parse and semantic checks, with the type
//! library loaded), both reported in bytes per second.

use dtx::lang::parser::TypeNames;
use dtx::probes::Catalog;
use std::fmt::Write;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dtx::lang::options::DOptions;
use dtx::lang::parser::parse_program;
use dtx::lang::types::DataModel;
use dtx::lang::{compile, CompileInput, MacroEnv, SourceKind};

const TARGET_BYTES: usize = 4 << 20;

/// xorshift64*: the corpus is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const PROBES: &[&str] = &[
    "BEGIN",
    "END",
    "dtrace:::BEGIN",
    "profile-997",
    "profile-199hz",
    "tick-1s",
    "tick-10ms",
    "profile:::tick-5sec",
];
const KEYS: &[&str] = &[
    "execname",
    "pid",
    "tid",
    "cpu",
    "probefunc",
    "probename",
    "uid",
    "arg0",
    "curthread",
];
const AGGS: &[&str] = &[
    "count()",
    "sum(arg0)",
    "max(arg1)",
    "min(arg1)",
    "avg(arg2)",
];

/// One top-level item, numbered `i` so names stay unique.
fn item(rng: &mut Rng, i: usize, out: &mut String) {
    let probe = rng.pick(PROBES);
    let key = rng.pick(KEYS);
    let key2 = rng.pick(KEYS);
    let agg = rng.pick(AGGS);
    let n = rng.below(1000);
    let _ = match rng.below(10) {
        0 => write!(
            out,
            "/*\n * Clause {i}: count events by {key}.\n */\n\
             {probe}\n/{key} != 0 && arg0 > {n}/\n{{\n\
             \t@c{i}[{key}, {key2}] = {agg};\n\
             \t@q{i} = quantize(arg0 - {n});\n\
             \t@l{i}[{key}] = lquantize(arg1, 0, 1000, 10);\n}}\n\n"
        ),
        1 => write!(
            out,
            "{probe}\n{{\n\
             \tprintf(\"%s %d %-8s %5u %x\\n\", execname, pid, probefunc, {n}u, arg0 & 0xffff);\n\
             \t@p{i}[probename] = count();\n\tprinta(\"clause {i}: %s %@d\\n\", @p{i});\n\
             \ttrace(timestamp);\n}}\n\n"
        ),
        2 => write!(
            out,
            "struct rec{i} {{\n\tint id;\n\tlong when;\n\tchar name[32];\n\
             \tunsigned int flags : 4;\n\tstruct rec{i} *next;\n\tuint64_t counts[8];\n}};\n\n\
             typedef struct rec{i} rec{i}_t;\n\n"
        ),
        3 => write!(
            out,
            "inline int LIMIT{i} = {n} * 4 + (1 << 3);\n\
             inline string NAME{i} = \"clause{i}\";\n\
             inline uint64_t MASK{i} = 0x{n:x}ULL;\n\n"
        ),
        4 => write!(
            out,
            "struct src{i} {{ int a; long b; char *s; }};\n\
             struct dst{i} {{ int sum; long prod; string name; }};\n\
             translator struct dst{i} < struct src{i} *p > {{\n\
             \tsum = p->a + (int)p->b;\n\tprod = p->a * p->b;\n\tname = stringof(p->s);\n}};\n\n"
        ),
        5 => write!(
            out,
            "{probe}\n/self->t{i} == 0/\n{{\n\
             \tself->t{i} = timestamp;\n\tthis->d = (timestamp - self->t{i}) / 1000;\n\
             \t@h{i}[probefunc] = quantize(this->d);\n\
             \tself->t{i} = this->d > {n} ? 0 : self->t{i};\n}}\n\n"
        ),
        6 => write!(
            out,
            "// line comment before clause {i}\n{probe}\n{{\n\
             \tx{i} = strjoin(execname, lltostr(pid));\n\
             \tn{i} = strlen(x{i}) + {n} % 7 - (~{n} ^ 3) | 8;\n\
             \ta{i}[x{i}, n{i}] = (long)n{i} << 2;\n\
             \ttrace(a{i}[x{i}, n{i}]);\n}}\n\n"
        ),
        7 => write!(
            out,
            "enum e{i} {{ E{i}_A, E{i}_B = {n}, E{i}_C }};\n\
             int g{i}[int];\nself int s{i};\nthis long w{i};\n\n"
        ),
        8 => write!(
            out,
            "{probe},\n{}\n/(arg0 & 1) == 0 || !(pid > {n})/\n{{\n\
             \t@t{i}[probefunc] = {agg};\n\tprinta(\"%-16s %@12d\\n\", @t{i});\n\
             \ttrunc(@t{i}, 10);\n\tclear(@t{i});\n}}\n\n",
            rng.pick(PROBES)
        ),
        _ => write!(
            out,
            "#pragma D option quiet\n{probe}\n/++k{i} >= {n}/\n{{\n\
             \tstack();\n\tustack(10);\n\tprintf(\"%Y %s\\n\", walltimestamp, \"done\");\n\
             \tk{i} = 0;\n}}\n\n"
        ),
    };
}

fn corpus() -> String {
    let mut rng = Rng(0x0d7a_5eed_c0ff_ee11);
    let mut s = String::with_capacity(TARGET_BYTES + 4096);
    let mut i = 0;
    while s.len() < TARGET_BYTES {
        item(&mut rng, i, &mut s);
        i += 1;
    }
    s
}

fn type_names() -> TypeNames {
    ["uint64_t", "int64_t", "uint32_t", "string", "size_t"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

fn compile_corpus(text: &str, catalog: &Catalog) {
    let input = CompileInput {
        text,
        kind: SourceKind::File,
        macros: MacroEnv::default(),
        cpp: None,
        file_name: "corpus.d",
        model: DataModel::Lp64,
    };
    if let Err(d) = compile(input, &mut DOptions::new(), catalog) {
        panic!("corpus does not compile: {d}");
    }
}

fn bench(c: &mut Criterion) {
    let text = corpus();
    let catalog = dtx::providers::standard_catalog();
    // Check once, outside the timing, that the corpus is valid D.
    compile_corpus(&text, &catalog);
    let (program, _, _) = parse_program(
        &text,
        SourceKind::File,
        MacroEnv::default(),
        type_names(),
        None,
    )
    .unwrap_or_else(|d| panic!("corpus does not parse: {d}"));
    assert!(program.items.len() > 10_000);

    let mut g = c.benchmark_group("lex+parse");
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.sample_size(10);
    // The syntax tree is freed outside the measurement: freeing it is not lexing or parsing.
    g.bench_function("corpus-4MB", |b| {
        b.iter_with_large_drop(|| {
            parse_program(
                std::hint::black_box(&text),
                SourceKind::File,
                MacroEnv::default(),
                type_names(),
                None,
            )
        })
    });
    g.finish();

    // Whole-program checking is much slower than parsing (see the numbers); give it time.
    let mut g = c.benchmark_group("compile");
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(45));
    g.bench_function("corpus-4MB", |b| {
        b.iter(|| compile_corpus(std::hint::black_box(&text), &catalog))
    });
    g.finish();
}

/// The C preprocessor (`-C`) over a megabyte of clauses that use function-like macros, and
/// over plain text with no directives.
fn bench_cpp(c: &mut Criterion) {
    use dtx::lang::cpp::{preprocess, CppOptions};
    let mut src = String::from("#define VAL 5\n#define F(a) ((a) + VAL)\n");
    while src.len() < 1_000_000 {
        src.push_str(
            "syscall::read:entry /pid == $target/ { @[probefunc] = count(); x = F(VAL); }\n",
        );
    }
    let plain = "BEGIN { trace(1); }\n".repeat(50_000);
    let opts = CppOptions::default();
    let mut g = c.benchmark_group("cpp");
    g.sample_size(10);
    for (name, text) in [("macros-1MB", &src), ("plain-1MB", &plain)] {
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| preprocess(std::hint::black_box(text), "bench.d", &opts).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, bench, bench_cpp);
criterion_main!(benches);
