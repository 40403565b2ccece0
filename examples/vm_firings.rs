//! A fixed number of firings of one of the `benches/vm.rs` programs, for instruction counting:
//! `valgrind --tool=callgrind target/release/examples/vm_firings a 200000` counts the same
//! instructions on every run, which a shared machine's wall clock does not.
//!
//! Programs: `a` (`/arg0 > 10/ { @[arg1] = count(); }`), `b` (the `self->ts` / `quantize()`
//! pair, two firings per step), `c` (`printf` with three conversions through the consumer).

use dtx::engine::consumer::{Consumer, ConsumerOptions};
use dtx::engine::standalone::{standalone_vm, standard_probe};

fn main() {
    let mut argv = std::env::args().skip(1);
    let which = argv.next().unwrap_or_else(|| "a".into());
    let n: u64 = match argv.next().map(|s| s.parse()) {
        None => 200_000,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            eprintln!("dtx: usage: vm_firings a|b|c [FIRINGS]");
            std::process::exit(2);
        }
    };
    let begin = standard_probe("BEGIN").expect("standard probe");
    let end = standard_probe("END").expect("standard probe");
    let mut sink = 0u64;
    match which.as_str() {
        "a" => {
            let (mut vm, _) =
                standalone_vm("#pragma D option quiet\nBEGIN /arg0 > 10/ { @[arg1] = count(); }")
                    .expect("compiles");
            for i in 0..n {
                let mut cx = dtx::vm::FiringCtx::synthetic(&begin, i, i, b"bench");
                cx.args[0] = i % 32;
                cx.args[1] = i % 1024;
                let r = vm.fire(&cx);
                sink += r.errors.len() as u64;
                vm.records.clear();
            }
            sink += vm.aggs.entries(0) as u64;
        }
        "b" => {
            let (mut vm, _) = standalone_vm(
                "#pragma D option quiet\nBEGIN { self->ts = timestamp; }\n\
                 END /self->ts/ { @[probefunc] = quantize(timestamp - self->ts); self->ts = 0; }",
            )
            .expect("compiles");
            let mut t: u64 = 1000;
            for _ in 0..n / 2 {
                t += 1000;
                let mut cx = dtx::vm::FiringCtx::synthetic(&begin, t, t, b"bench");
                cx.tid = t % 8;
                vm.fire(&cx);
                let mut cx = dtx::vm::FiringCtx::synthetic(&end, t + 500 + (t % 7919), t, b"bench");
                cx.tid = t % 8;
                let r = vm.fire(&cx);
                sink += r.errors.len() as u64;
                vm.records.clear();
            }
            sink += vm.aggs.entries(0) as u64;
        }
        "c" => {
            let (mut vm, probes) =
                standalone_vm("BEGIN { printf(\"%d %s %x\\n\", arg0, probefunc, arg1); }")
                    .expect("compiles");
            let map = probes.into_iter().map(|p| (p.id, p)).collect();
            let mut consumer = Consumer::new(
                Box::new(std::io::sink()),
                ConsumerOptions {
                    quiet: true,
                    prog: "dtx".into(),
                    ..ConsumerOptions::default()
                },
            );
            for i in 1..=n {
                let mut cx = dtx::vm::FiringCtx::synthetic(&begin, i, i, b"bench");
                cx.args[0] = i;
                cx.args[1] = i * 7;
                let r = vm.fire(&cx);
                consumer.consume(&mut vm, &r, &map, 0);
            }
        }
        other => {
            eprintln!("dtx: vm_firings: unknown program '{other}' (a, b or c)");
            std::process::exit(2);
        }
    }
    println!("{which}: {n} firings ({sink})");
}
