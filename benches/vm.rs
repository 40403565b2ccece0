//! Firings per second through the VM (one core), for the three programs of the runtime issue:
//! (a) `/arg0 > 10/ { @[arg1] = count(); }`,
//! (b) `{ self->ts = timestamp; }` then `/self->ts/ { @[probefunc] = quantize(timestamp -
//!     self->ts); self->ts = 0; }`,
//! (c) a `printf` with three conversions, formatted by the consumer into a null sink.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dtx::engine::consumer::{Consumer, ConsumerOptions};
use dtx::engine::standalone::{standalone_vm, standard_probe};
use dtx::probes::ProbeInfo;
use dtx::vm::{FiringCtx, Vm};

fn build(src: &str) -> (Vm, Vec<ProbeInfo>) {
    standalone_vm(src).expect("bench program compiles")
}

fn probe(name: &str) -> ProbeInfo {
    standard_probe(name).expect("standard probe")
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("vm");
    g.throughput(Throughput::Elements(1));

    // (a) predicate + count() keyed by an integer
    let (mut vm, _) = build("#pragma D option quiet\nBEGIN /arg0 > 10/ { @[arg1] = count(); }");
    let begin = probe("BEGIN");
    let mut i: u64 = 0;
    g.bench_function("a_pred_count", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            let mut cx = FiringCtx::synthetic(&begin, i, i, b"bench");
            cx.args[0] = i % 32;
            cx.args[1] = i % 1024;
            let r = vm.fire(&cx);
            vm.records.clear();
            r
        })
    });

    // (b) thread-local timestamp and a quantize keyed by probefunc
    let (mut vm, _) = build(
        "#pragma D option quiet\nBEGIN { self->ts = timestamp; }\n\
         END /self->ts/ { @[probefunc] = quantize(timestamp - self->ts); self->ts = 0; }",
    );
    let end = probe("END");
    let mut t: u64 = 1000;
    g.throughput(Throughput::Elements(2));
    g.bench_function("b_tls_quantize_pair", |b| {
        b.iter(|| {
            t += 1000;
            let mut cx = FiringCtx::synthetic(&begin, t, t, b"bench");
            cx.tid = t % 8;
            vm.fire(&cx);
            let mut cx = FiringCtx::synthetic(&end, t + 500 + (t % 7919), t, b"bench");
            cx.tid = t % 8;
            let r = vm.fire(&cx);
            vm.records.clear();
            r
        })
    });

    // (c) printf with three conversions through the consumer to a null sink
    let (mut vm, probes) = build("BEGIN { printf(\"%d %s %x\\n\", arg0, probefunc, arg1); }");
    let map = probes.into_iter().map(|p| (p.id, p)).collect();
    let mut consumer = Consumer::new(
        Box::new(std::io::sink()),
        ConsumerOptions {
            quiet: true,
            prog: "dtx".into(),
            ..ConsumerOptions::default()
        },
    );
    let mut n: u64 = 0;
    g.throughput(Throughput::Elements(1));
    g.bench_function("c_printf_null_sink", |b| {
        b.iter(|| {
            n += 1;
            let mut cx = FiringCtx::synthetic(&begin, n, n, b"bench");
            cx.args[0] = n;
            cx.args[1] = n * 7;
            let r = vm.fire(&cx);
            consumer.consume(&mut vm, &r, &map, 0);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
