//! The D virtual machine over random well-typed programs: the input's bytes choose a program
//! from a small typed grammar of D (integers, strings and pointers, loads and stores, scratch,
//! copies, string subroutines, aggregations, speculations), the options it runs under, and the
//! argument kinds of the probes it fires (zero, small, negative, huge, pointers into a mapped
//! buffer, at its end, unmapped, in the first page). The program is compiled, run over BEGIN,
//! a profile probe and END, and its records formatted. A compile error is fine; a panic is not.
#![no_main]

use std::sync::Arc;

use dtx::engine::clock::LiveClock;
use dtx::engine::consumer::{Consumer, ConsumerOptions};
use dtx::engine::standalone::{standalone_vm, standard_probe};
use dtx::engine::Engine;
use dtx::lang::options::DOptions;
use dtx::vm::{AddressSpace, Fault, FiringCtx};
use libfuzzer_sys::fuzz_target;

/// Where the probe's memory is mapped.
const BASE: u64 = 0x1_0000;

/// The probe's memory: the input's tail, read-only, at [`BASE`].
struct Mapped<'a>(&'a [u8]);

impl AddressSpace for Mapped<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let off = addr.checked_sub(BASE).ok_or(Fault::BadAddr(addr))? as usize;
        let end = off.checked_add(buf.len()).ok_or(Fault::BadAddr(addr))?;
        let src = self.0.get(off..end).ok_or(Fault::BadAddr(addr))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// The input's bytes as a stream of choices; past its end every choice is 0.
struct Choices<'a> {
    data: &'a [u8],
    at: usize,
}

impl Choices<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    fn pick(&mut self, n: usize) -> usize {
        self.byte() as usize % n.max(1)
    }

    fn pick_of<'s>(&mut self, items: &[&'s str]) -> &'s str {
        items[self.pick(items.len())]
    }

    fn exhausted(&self) -> bool {
        self.at >= self.data.len()
    }
}

const INT_LITS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "7",
    "8",
    "15",
    "16",
    "255",
    "256",
    "4095",
    "4096",
    "65535",
    "0x7fffffff",
    "0x80000000",
    "0xffffffff",
    "0x7fffffffffffffff",
    "0x8000000000000000",
    "0xffffffffffffffff",
    "-9223372036854775807",
    "'a'",
    "'\\0'",
];
const STR_LITS: &[&str] = &[
    "\"\"",
    "\"a\"",
    "\"abc\"",
    "\"hello world\"",
    "\"/usr/lib/libc.so.1\"",
    "\"a//b/../c/./\"",
    "\"::1\"",
    "\"1.2.3.4\"",
    "\",\"",
    "\" ,.;\"",
    "\"{\\\"a\\\":[1,{\\\"b\\\":2}]}\"",
    "\"a.0.b\"",
    "\"0x1f\"",
    "\"-42\"",
    "\"ABCdef\"",
    "\"0123456789abcdefghijklmnopqrstuvwxyz\"",
];
const INT_TYPES: &[&str] = &[
    "char", "uint8_t", "short", "uint16_t", "int", "uint32_t", "long", "uint64_t",
];

/// Builds one expression or statement at a time, bounded in depth.
struct Gen<'a, 'b> {
    c: &'b mut Choices<'a>,
}

impl Gen<'_, '_> {
    fn int(&mut self, depth: u32) -> String {
        let n = if depth == 0 { 4 } else { 24 };
        match self.c.pick(n) {
            0 => self.c.pick_of(INT_LITS).into(),
            1 => format!("arg{}", self.c.pick(10)),
            2 => "x".into(),
            3 => self
                .c
                .pick_of(&["this->i", "self->i", "a[1]", "timestamp", "cpu", "pid"])
                .into(),
            4 => {
                let op = self.c.pick_of(&[
                    "+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "<", "==", "!=", "&&", "||",
                ]);
                format!("({} {op} {})", self.int(depth - 1), self.int(depth - 1))
            }
            5 => format!(
                "{}({})",
                self.c.pick_of(&["-", "~", "!"]),
                self.int(depth - 1)
            ),
            6 => format!("(({}){})", self.c.pick_of(INT_TYPES), self.int(depth - 1)),
            7 => format!("strlen({})", self.string(depth - 1)),
            8 => format!("strtoll({})", self.string(depth - 1)),
            9 => format!(
                "strtoll({}, {})",
                self.string(depth - 1),
                self.int(depth - 1)
            ),
            10 => format!(
                "{}({}, {})",
                self.c.pick_of(&["index", "rindex"]),
                self.string(depth - 1),
                self.string(depth - 1)
            ),
            11 => format!("*({} *){}", self.c.pick_of(INT_TYPES), self.ptr(depth - 1)),
            12 => format!("{}[{}]", self.ptr(depth - 1), self.int(depth - 1)),
            13 => format!("a[{}]", self.int(depth - 1)),
            14 => format!(
                "({} ? {} : {})",
                self.int(depth - 1),
                self.int(depth - 1),
                self.int(depth - 1)
            ),
            15 => format!(
                "{}({})",
                self.c
                    .pick_of(&["htons", "htonl", "htonll", "ntohs", "ntohl", "ntohll"]),
                self.int(depth - 1)
            ),
            16 => "rand()".into(),
            17 => format!("(long){}", self.ptr(depth - 1)),
            18 => format!("sizeof ({})", self.c.pick_of(INT_TYPES)),
            19 => format!("(unsigned long){}", self.int(depth - 1)),
            20 => format!("progenyof({})", self.int(depth - 1)),
            21 => format!("{} == {}", self.string(depth - 1), self.string(depth - 1)),
            22 => format!("{} < {}", self.string(depth - 1), self.string(depth - 1)),
            _ => format!("(char){}[{}]", self.string(depth - 1), self.int(depth - 1)),
        }
    }

    fn string(&mut self, depth: u32) -> String {
        let n = if depth == 0 { 3 } else { 28 };
        match self.c.pick(n) {
            0 => self.c.pick_of(STR_LITS).into(),
            1 => "s".into(),
            2 => self
                .c
                .pick_of(&["probefunc", "execname", "probename", "this->s"])
                .into(),
            3 => format!(
                "strjoin({}, {})",
                self.string(depth - 1),
                self.string(depth - 1)
            ),
            4 => format!(
                "substr({}, {})",
                self.string(depth - 1),
                self.int(depth - 1)
            ),
            5 => format!(
                "substr({}, {}, {})",
                self.string(depth - 1),
                self.int(depth - 1),
                self.int(depth - 1)
            ),
            6 => format!(
                "strtok({}, {})",
                self.string(depth - 1),
                self.string(depth - 1)
            ),
            7 => format!("strtok(NULL, {})", self.string(depth - 1)),
            8 => format!(
                "{}({})",
                self.c
                    .pick_of(&["dirname", "basename", "cleanpath", "toupper", "tolower"]),
                self.string(depth - 1)
            ),
            9 => format!(
                "{}({}, {})",
                self.c.pick_of(&["strchr", "strrchr"]),
                self.string(depth - 1),
                self.int(depth - 1)
            ),
            10 => format!(
                "strstr({}, {})",
                self.string(depth - 1),
                self.string(depth - 1)
            ),
            11 => format!("lltostr({})", self.int(depth - 1)),
            12 => format!("lltostr({}, {})", self.int(depth - 1), self.int(depth - 1)),
            13 => format!("inet_ntoa((ipaddr_t *){})", self.ptr(depth - 1)),
            14 => format!("inet_ntoa6((struct in6_addr *){})", self.ptr(depth - 1)),
            15 => format!(
                "inet_ntop({}, (void *){})",
                self.c.pick_of(&["AF_INET", "AF_INET6", "0", "-1"]),
                self.ptr(depth - 1)
            ),
            16 => format!(
                "json({}, {})",
                self.string(depth - 1),
                self.string(depth - 1)
            ),
            17 => format!("stringof({})", self.ptr(depth - 1)),
            18 => format!("copyinstr({})", self.int(depth - 1)),
            19 => format!(
                "copyinstr({}, {})",
                self.int(depth - 1),
                self.int(depth - 1)
            ),
            20 => format!("(string){}", self.ptr(depth - 1)),
            21 => format!(
                "({} ? {} : {})",
                self.int(depth - 1),
                self.string(depth - 1),
                self.string(depth - 1)
            ),
            22 => format!("stringof({})", self.int(depth - 1)),
            23 => format!(
                "strjoin(lltostr({}), {})",
                self.int(depth - 1),
                self.string(depth - 1)
            ),
            24 => format!("symname({})", self.int(depth - 1)),
            25 => format!("hs[{}]", self.string(depth - 1)),
            26 => format!(
                "ddi_pathname({}, {})",
                self.int(depth - 1),
                self.int(depth - 1)
            ),
            _ => format!("copyinstr((uintptr_t){})", self.ptr(depth - 1)),
        }
    }

    fn ptr(&mut self, depth: u32) -> String {
        let n = if depth == 0 { 3 } else { 10 };
        match self.c.pick(n) {
            0 => "p".into(),
            1 => format!("(char *)arg{}", self.c.pick(10)),
            2 => format!("(char *)alloca({})", self.c.pick_of(INT_LITS)),
            3 => format!("(char *)alloca({})", self.int(depth - 1)),
            4 => format!("(char *){}", self.int(depth - 1)),
            5 => format!(
                "(char *)copyin({}, {})",
                self.int(depth - 1),
                self.int(depth - 1)
            ),
            6 => format!("({} + {})", self.ptr(depth - 1), self.int(depth - 1)),
            7 => format!("({} - {})", self.ptr(depth - 1), self.int(depth - 1)),
            8 => "(char *)&x".into(),
            _ => format!("(char *){}", self.string(depth - 1)),
        }
    }

    fn statement(&mut self) -> String {
        let d = 3;
        match self.c.pick(30) {
            0 => format!("x = {};", self.int(d)),
            1 => format!("s = {};", self.string(d)),
            2 => format!("p = {};", self.ptr(d)),
            3 => format!("this->i = {};", self.int(d)),
            4 => format!("self->i = {};", self.int(d)),
            5 => format!("this->s = {};", self.string(d)),
            6 => format!("a[{}] = {};", self.int(d), self.int(d)),
            7 => format!("hs[{}] = {};", self.string(d), self.string(d)),
            8 => format!("{}[{}] = {};", self.ptr(d), self.int(d), self.int(d)),
            9 => format!(
                "*({} *){} = {};",
                self.c.pick_of(INT_TYPES),
                self.ptr(d),
                self.int(d)
            ),
            10 => format!("trace({});", self.int(d)),
            11 => format!("trace({});", self.string(d)),
            12 => format!(
                "printf(\"%d %s %x\\n\", {}, {}, {});",
                self.int(d),
                self.string(d),
                self.int(d)
            ),
            13 => format!(
                "tracemem({}, {});",
                self.ptr(d),
                self.c.pick_of(&["1", "4", "16", "64"])
            ),
            14 => format!("bcopy({}, {}, {});", self.ptr(d), self.ptr(d), self.int(d)),
            15 => format!(
                "copyinto({}, {}, {});",
                self.int(d),
                self.int(d),
                self.ptr(d)
            ),
            16 => format!("@c[{}] = count();", self.int(d)),
            17 => format!("@s[{}] = sum({});", self.string(d), self.int(d)),
            18 => format!("@q = quantize({});", self.int(d)),
            19 => format!("@l = lquantize({}, 0, 100, 10);", self.int(d)),
            20 => format!(
                "@m = {}({});",
                self.c.pick_of(&["min", "max", "avg", "stddev"]),
                self.int(d)
            ),
            21 => format!("print({});", self.int(d)),
            22 => format!(
                "printf(\"%s|%-8s|%.3s\\n\", {}, {}, {});",
                self.string(d),
                self.string(d),
                self.string(d)
            ),
            23 => format!("printa(@c);"),
            24 => format!("trace(({}){});", self.c.pick_of(INT_TYPES), self.int(d)),
            25 => format!(
                "printf(\"%c %u %o %p\\n\", {}, {}, {}, {});",
                self.int(d),
                self.int(d),
                self.int(d),
                self.int(d)
            ),
            26 => format!("self->i = 0; this->i = {};", self.int(d)),
            27 => format!("trunc(@c, {});", self.c.pick_of(&["0", "1", "5"])),
            28 => format!("@q = llquantize({}, 10, 0, 6, 20);", self.int(d)),
            _ => format!("@l = lquantize({}, -10, 10, 1);", self.int(d)),
        }
    }
}

/// A program of a few clauses over BEGIN, a profile probe, END and ERROR.
fn program(c: &mut Choices<'_>) -> String {
    let mut src = String::from(
        "int x; string s; char *p; int a[int]; string hs[string];\nthis int i; this string s; self int i;\n",
    );
    match c.pick(4) {
        0 => src.push_str("#pragma D option strsize=16\n"),
        1 => src.push_str("#pragma D option strsize=5\n"),
        2 => src.push_str("#pragma D option quiet\n"),
        _ => {}
    }
    let probes = ["BEGIN", "profile-997", "END", "ERROR", "profile-997"];
    for probe in probes {
        let mut g = Gen { c };
        let spec = g.c.pick(8) == 0 && probe != "ERROR";
        src.push_str(probe);
        if g.c.pick(4) == 0 {
            src.push_str(&format!("\n/{}/", g.int(2)));
        }
        src.push_str("\n{\n");
        if spec {
            src.push_str("\tthis->spec = speculation();\n\tspeculate(this->spec);\n");
        }
        let n = 1 + g.c.pick(6);
        for _ in 0..n {
            src.push('\t');
            src.push_str(&g.statement());
            src.push('\n');
        }
        src.push_str("}\n");
        if spec {
            src.push_str(&format!(
                "{probe}\n{{\n\t{}(this->spec);\n}}\n",
                if c.pick(2) == 0 { "commit" } else { "discard" }
            ));
        }
        if c.exhausted() {
            break;
        }
    }
    src
}

/// An argument of a given kind: the kinds a probe's arguments take.
fn argument(c: &mut Choices<'_>, mapped: usize) -> u64 {
    match c.pick(9) {
        0 => 0,
        1 => c.byte() as u64,
        2 => -(c.byte() as i64) as u64,
        3 => u64::MAX,
        4 => BASE + (c.pick(mapped.max(1)) as u64),
        5 => BASE + mapped as u64,
        6 => 0x7fff_0000_0000,
        7 => 4095,
        _ => i64::MIN as u64,
    }
}

/// dtx's own lines (the program's runtime errors: `dtx: error on enabled probe ...`) are formatted
/// as always and then dropped: written to stderr, thousands a second, they cost a system call each
/// and buried libFuzzer's own report.
static QUIET: std::sync::Once = std::sync::Once::new();

fuzz_target!(|data: &[u8]| {
    QUIET.call_once(|| {
        std::mem::forget(dtx::output::stderr::capture());
        std::mem::forget(dtx::output::stderr::route(Box::new(|line| {
            std::hint::black_box(line);
        })));
    });
    // the first half chooses the program, the second half is the probe's memory
    let (code, memory) = data.split_at(data.len() / 2);
    let mut c = Choices { data: code, at: 0 };
    let src = program(&mut c);
    let Ok((vm, _)) = standalone_vm(&src) else {
        return;
    };
    let consumer = Consumer::new(
        Box::new(std::io::sink()),
        ConsumerOptions::from_options(&DOptions::new(), "dtx", false, false),
    );
    let mut engine = Engine::new(
        vec![("fuzz.d".into(), Arc::clone(&vm.program))],
        vm.opts.clone(),
        &dtx::providers::standard_catalog(),
        Box::new(LiveClock::new()),
        consumer,
    );
    // driven as a trace is (profile-N fires from the samples given), starting at wall time 0
    engine.begin(Some(0));
    let Some(profile) = standard_probe("profile-997") else {
        return;
    };
    let mem = Mapped(memory);
    for round in 0..3u64 {
        let mut cx = FiringCtx::synthetic(&profile, round, round, b"fuzz");
        cx.memory = &mem;
        for a in cx.args.iter_mut() {
            *a = argument(&mut c, memory.len());
        }
        engine.fire(&cx);
    }
    engine.end();
});
