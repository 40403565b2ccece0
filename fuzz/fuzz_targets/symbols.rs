//! What a symbol server and a trace give dtx's symbol client, over arbitrary bytes: the
//! symbol-path grammar, `file.ptr` text, the name and URL checks, a `.pd_` cabinet expanded
//! under a bound, and a PDB's MSF header and stream directory. Never a panic; a cabinet never
//! writes past its bound; a PDB that passes the MSF check is opened by pdb2 without a panic.
#![no_main]

use dtx::symbols::symsrv::{cab, grammar, guard, pointer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    std::hint::black_box(grammar::parse(&text));
    std::hint::black_box(pointer(&text));
    std::hint::black_box(guard::file_name_problem(&text));
    let seg = guard::segment(&text);
    assert!(seg.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)));
    assert!(!guard::shown(&text).chars().any(char::is_control));
    let _ = guard::may_follow("https://sym.example/s", &text);
    std::hint::black_box(guard::redact(&text));
    // a cabinet, bounded at 1 MiB
    let mut out = Vec::new();
    if let Ok(n) = cab::expand(std::io::Cursor::new(data), &mut out, 1 << 20) {
        assert!(n <= 1 << 20 && out.len() as u64 == n);
    }
    // a PDB: the MSF check, then pdb2 over what passes it
    let len = data.len() as u64;
    if dtx::symbols::msf::check_reader(&mut std::io::Cursor::new(data), len).is_ok() {
        if let Ok(mut pdb) = pdb2::PDB::open(std::io::Cursor::new(data)) {
            let _ = std::hint::black_box(pdb.pdb_information().map(|i| i.age));
        }
    }
});
