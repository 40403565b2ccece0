//! The VM's steady state allocates nothing per firing: once an aggregation's keys and the
//! thread-local variables exist, programs (a) `/arg0 > 10/ { @[arg1] = count(); }` and (b) the
//! `self->ts` / `quantize()` pair fire without touching the heap. A counting global allocator
//! (this test binary's own) measures it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use dtx::engine::standalone::{standalone_vm, standard_probe};
use dtx::probes::ProbeInfo;
use dtx::vm::{FiringCtx, Vm};

fn build(src: &str) -> Vm {
    standalone_vm(src).expect("program compiles").0
}

fn probe(name: &str) -> ProbeInfo {
    standard_probe(name).expect("standard probe")
}

struct Counting;

thread_local! {
    /// Counting is on for this thread: allocations of the test harness's other threads (its
    /// output capture, the other test) do not count.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}
static ALLOCS: AtomicU64 = AtomicU64::new(0);

fn counting() -> bool {
    COUNTING.try_with(|c| c.get()).unwrap_or(false)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if counting() {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if counting() {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// This binary's tests run one at a time: the allocation counter is global.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Allocations made by `f`.
fn allocations(f: impl FnOnce()) -> u64 {
    ALLOCS.store(0, Ordering::SeqCst);
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCS.load(Ordering::SeqCst)
}

#[test]
fn predicate_and_count_allocate_nothing_per_firing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut vm = build("#pragma D option quiet\nBEGIN /arg0 > 10/ { @[arg1] = count(); }");
    let begin = probe("BEGIN");
    let fire = |vm: &mut Vm, i: u64| {
        let mut cx = FiringCtx::synthetic(&begin, i, i, b"test");
        cx.args[0] = i % 32;
        cx.args[1] = i % 1024;
        let r = vm.fire(&cx);
        vm.records.clear();
        r
    };
    // warm up: every key exists, every buffer has its capacity
    for i in 0..20_000 {
        fire(&mut vm, i);
    }
    let n = allocations(|| {
        for i in 20_000..120_000 {
            std::hint::black_box(fire(&mut vm, i));
        }
    });
    assert_eq!(n, 0, "{n} heap allocations over 100,000 firings of (a)");
}

#[test]
fn self_ts_and_quantize_allocate_nothing_per_firing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut vm = build(
        "#pragma D option quiet\nBEGIN { self->ts = timestamp; }\n\
         END /self->ts/ { @[probefunc] = quantize(timestamp - self->ts); self->ts = 0; }",
    );
    let (begin, end) = (probe("BEGIN"), probe("END"));
    let pair = |vm: &mut Vm, t: u64| {
        let mut cx = FiringCtx::synthetic(&begin, t, t, b"test");
        cx.tid = t % 8;
        vm.fire(&cx);
        let mut cx = FiringCtx::synthetic(&end, t + 500 + (t % 7919), t, b"test");
        cx.tid = t % 8;
        let r = vm.fire(&cx);
        vm.records.clear();
        r
    };
    for k in 0..20_000u64 {
        pair(&mut vm, 1000 + k * 1000);
    }
    let n = allocations(|| {
        for k in 20_000..70_000u64 {
            std::hint::black_box(pair(&mut vm, 1000 + k * 1000));
        }
    });
    assert_eq!(n, 0, "{n} heap allocations over 50,000 firing pairs of (b)");
}
