//! Walks an `.etl` file in time order and decodes every record (schemas learnt on the way),
//! reading every decoded value, and prints records/s. A fixed amount of work for callgrind
//! (instruction counts do not depend on the load of the machine), next to `benches/etl_walk.rs`:
//!
//!     cargo build --release --example etl_decode
//!     target/release/examples/etl_decode FILE.etl [REPEATS] [walk|values|decode]
//!
//! `walk` reads the records only; `values` also reads every field's value (UTF-16 strings as
//! the views the decoder gives); `decode` also converts every string to UTF-8.
//!     valgrind --tool=callgrind target/release/examples/etl_decode FILE.etl 1

use std::time::Instant;

use dtx::etw::decode::{Decoder, Value};
use dtx::etw::reader::EtlFile;

/// Folds a value into a checksum so that every field is really read: numbers as numbers,
/// strings as text (with `convert`, UTF-16 converted to UTF-8 into a reused buffer, as
/// `etwfield_str` does; without, UTF-16 as the view the decoder gives).
fn touch(v: &Value<'_>, convert: bool, text: &mut Vec<u8>) -> u64 {
    match v {
        Value::Utf16(b) if !convert => b.len() as u64,
        Value::Str(_) | Value::Utf16(_) | Value::Mapped { .. } => {
            text.clear();
            v.write_text(text);
            text.len() as u64
        }
        Value::Array(items) => items.iter().map(|v| touch(v, convert, text)).sum(),
        Value::Struct(fields) => fields.iter().map(|(_, v)| touch(v, convert, text)).sum(),
        Value::Bytes(b) | Value::Sid(b) => b.len() as u64,
        Value::Ptrs(p) => p.len() as u64,
        v => v.as_u64().unwrap_or(1),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: etl_decode FILE.etl [REPEATS] [walk|values|decode]");
        std::process::exit(2);
    };
    let repeats: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let mode = args.get(3).map(String::as_str).unwrap_or("decode");
    let decode = mode != "walk";
    let etl = match EtlFile::open_path(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("etl_decode: {e}");
            std::process::exit(1);
        }
    };
    let t = Instant::now();
    let (mut n, mut named, mut sum) = (0u64, 0u64, 0u64);
    // "values": every value read, UTF-16 strings left as they lie (their length in bytes);
    // "decode": every UTF-16 string converted to UTF-8 as well
    let convert = mode != "values";
    let mut text = Vec::new();
    for _ in 0..repeats {
        let mut dec = Decoder::new();
        let mut it = etl.events();
        while let Some(r) = it.next_event() {
            let Ok(ev) = r else { continue };
            n += 1;
            if !decode {
                sum = sum.wrapping_add(ev.time_ns ^ ev.payload.len() as u64);
                continue;
            }
            dec.observe(&ev);
            let d = dec.decode(&ev);
            named += d.is_named() as u64;
            d.for_each_field(|name, v| {
                sum = sum.wrapping_add(name.len() as u64 + touch(v, convert, &mut text));
            });
        }
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "{} records ({} to named fields) in {:.3} s: {:.2} M records/s (checksum {sum:x})",
        n,
        named,
        s,
        n as f64 / s / 1e6
    );
}
