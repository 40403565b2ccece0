//! Every load, store and copy of a D program is bounds-checked: an access outside what the
//! program may touch (past the clause's scratch space, a `bcopy` larger than its allocated
//! destination, a string literal, an unmapped address) aborts the clause with dtrace's fault
//! kind and address, reported as an ERROR firing, and never panics dtx. As in dtrace, loads and
//! stores anywhere inside the scratch space are the clause's, allocated or not (illumos
//! `pointers/tst.ValidPointer2.d` stores past a 4-byte `alloca`).

use crate::support::begin;

use dtx::vm::memory::{decode, Region};
use dtx::vm::Fault;

/// Runs `body` as a BEGIN clause; returns its faults and the integers it traced.
fn run(body: &str) -> (Vec<Fault>, Vec<i64>) {
    begin::run_begin(&format!("BEGIN {{ {body} }}"))
}

/// Runs `body` as a BEGIN clause and returns the one fault it raised.
fn fault_of(body: &str) -> Fault {
    let (faults, _) = run(body);
    assert_eq!(faults.len(), 1, "{body}: {faults:?}");
    faults[0]
}

/// The size of the scratch space (`VmOptions::default().scratch`).
const SCRATCH: usize = 8 << 20;

/// The scratch offset a `BadAddr` fault names.
fn scratch_offset(f: Fault) -> usize {
    match f {
        Fault::BadAddr(a) => match decode(a) {
            Some((Region::Scratch, off)) => off,
            other => panic!("not a scratch address: {a:#x} {other:?}"),
        },
        other => panic!("not an invalid address: {other:?}"),
    }
}

#[test]
fn alloca_overrun_inside_scratch_reads_zero_without_fault() {
    // the case: it used to panic ("range start index 16 out of range")
    let (faults, ints) = run("s = (char *)alloca(15); trace(s[16]);");
    assert!(faults.is_empty(), "{faults:?}");
    assert_eq!(ints, vec![0]);
    // dtrace's tst.ValidPointer2.d: a store past the allocation, read back
    let (faults, ints) = run("x = (int *)alloca(4); y = x + 2; *y = 3; trace(*y);");
    assert!(faults.is_empty(), "{faults:?}");
    assert_eq!(ints, vec![3]);
    // a later alloca is zeroed, whatever was stored there before
    let (faults, ints) =
        run("s = (char *)alloca(1); s[8] = 7; t = (char *)alloca(1); trace(t[0]);");
    assert!(faults.is_empty(), "{faults:?}");
    assert_eq!(ints, vec![0]);
}

#[test]
fn load_past_the_scratch_space_faults_at_its_address() {
    let f = fault_of(&format!("s = (char *)alloca(15); trace(s[{SCRATCH}]);"));
    assert_eq!(scratch_offset(f), SCRATCH);
    assert_eq!(f.code(), 1, "DTRACEFLT_BADADDR");
    // the last byte is the clause's; a wide load that straddles the end is not
    let (faults, _) = run(&format!(
        "s = (char *)alloca(1); trace(s[{}]);",
        SCRATCH - 1
    ));
    assert!(faults.is_empty(), "{faults:?}");
    let f = fault_of(&format!(
        "s = (char *)alloca(1); trace(*(int *)(s + {}));",
        SCRATCH - 2
    ));
    assert_eq!(scratch_offset(f), SCRATCH - 2);
}

#[test]
fn store_past_the_scratch_space_faults_at_its_address() {
    let f = fault_of(&format!("s = (char *)alloca(4); s[{SCRATCH}] = 'b';"));
    assert_eq!(scratch_offset(f), SCRATCH);
    let f = fault_of(&format!(
        "p = (uint64_t *)((char *)alloca(4) + {}); *p = 1;",
        SCRATCH - 4
    ));
    assert_eq!(scratch_offset(f), SCRATCH - 4);
}

#[test]
fn negative_index_below_scratch_faults() {
    let f = fault_of("s = (char *)alloca(4); trace(s[-1]);");
    assert!(matches!(f, Fault::BadAddr(_)), "{f:?}");
}

#[test]
fn bcopy_checks_its_whole_destination_is_allocated() {
    // err.badbcopy1.d: nothing allocated
    let f = fault_of("p = alloca(0); bcopy(\"abcd\", p, 4);");
    assert!(matches!(f, Fault::BadAddr(_)), "{f:?}");
    // err.badbcopy6.d: a size of -1
    let f = fault_of("bcopy(\"bad news\", alloca(1), -1);");
    assert!(matches!(f, Fault::BadAddr(_)), "{f:?}");
    // one byte too many
    let f = fault_of("p = alloca(3); bcopy(\"abcd\", p, 4);");
    assert_eq!(scratch_offset(f), 0);
    // anywhere but scratch
    assert_eq!(
        fault_of("bcopy(\"abcd\", (char *)0x1000, 4);"),
        Fault::BadAddr(0x1000)
    );
    // within the allocation it copies
    let (faults, ints) = run("p = (char *)alloca(5); bcopy(\"abcd\", p, 5); trace(p[3]);");
    assert!(faults.is_empty(), "{faults:?}");
    assert_eq!(ints, vec![b'd' as i64]);
}

#[test]
fn copyinto_checks_its_destination_first() {
    // the destination is not storable: the fault names it, not the (unmapped) source
    assert_eq!(
        fault_of("copyinto(0x12345678, 8, (void *)0x1000);"),
        Fault::BadAddr(0x1000)
    );
    let f = fault_of(&format!(
        "copyinto(0x12345678, 8, (char *)alloca(1) + {});",
        SCRATCH - 4
    ));
    assert_eq!(scratch_offset(f), SCRATCH - 4);
    // a fitting destination, then the unmapped source faults
    let f = fault_of("p = alloca(8); copyinto(0x12345678, 8, p);");
    assert_eq!(f, Fault::BadAddr(0x12345678));
}

#[test]
fn copyin_and_alloca_beyond_scratch_are_out_of_scratch() {
    assert_eq!(
        fault_of("p = alloca(0xffffffffffffffff);"),
        Fault::NoScratch
    );
    assert_eq!(
        fault_of("p = alloca(10); p = alloca(-1);"),
        Fault::NoScratch
    );
    assert_eq!(
        fault_of(&format!("p = alloca({SCRATCH}); p = alloca(1);")),
        Fault::NoScratch
    );
    assert_eq!(fault_of("p = copyin(0x12345678, -1);"), Fault::NoScratch);
    assert_eq!(
        fault_of("p = copyin(0x12345678, 16);"),
        Fault::BadAddr(0x12345678)
    );
}

#[test]
fn tracemem_and_strings_past_scratch_fault() {
    let f = fault_of(&format!(
        "p = (char *)alloca(4) + {}; tracemem(p, 16);",
        SCRATCH - 8
    ));
    assert_eq!(scratch_offset(f), SCRATCH - 8);
    let f = fault_of(&format!(
        "s = (char *)alloca(4); trace(strlen(stringof(s + {SCRATCH})));"
    ));
    assert_eq!(scratch_offset(f), SCRATCH);
    let f = fault_of(&format!(
        "s = (char *)alloca(4); trace(substr(stringof(s + {SCRATCH}), 1));"
    ));
    assert_eq!(scratch_offset(f), SCRATCH);
    // inside the space, never written: the empty string
    let (faults, ints) = run("s = (char *)alloca(4); trace(strlen(stringof(s + 100)));");
    assert!(faults.is_empty(), "{faults:?}");
    assert_eq!(ints, vec![0]);
}

#[test]
fn loads_from_low_and_unmapped_addresses_fault() {
    assert_eq!(fault_of("trace(*(int *)0);"), Fault::BadAddr(0));
    assert_eq!(fault_of("trace(*(char *)4095);"), Fault::BadAddr(4095));
    assert_eq!(
        fault_of("trace(*(long *)0x7fff00001000);"),
        Fault::BadAddr(0x7fff00001000)
    );
    assert_eq!(
        fault_of("trace(stringof((char *)0x7fff00001000));"),
        Fault::BadAddr(0x7fff00001000)
    );
}

#[test]
fn a_store_into_an_absent_element_of_an_array_valued_associative_array_creates_it() {
    // dtrace allocates the element for the store; a temporary copy would lose it
    let (faults, ints) = begin::run_begin(
        "int a[int][4]; struct s { int x; int y; }; self struct s t; \
         BEGIN { a[1][0] = 5; a[1][2] = 7; trace(a[1][0]); trace(a[1][2]); \
         a[1][0]++; trace(a[1][0]); trace(a[2][3]); \
         self->t.y = 9; trace(self->t.y); trace(self->t.x); }",
    );
    assert!(faults.is_empty(), "{faults:?}");
    assert_eq!(ints, [5, 7, 6, 0, 9, 0]);
}
