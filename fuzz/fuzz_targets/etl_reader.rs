//! The `.etl` reader over arbitrary bytes: opening, the buffer walk, and both record walks must
//! never panic, and every error must name an offset inside the input.
#![no_main]

use dtx::etw::reader::EtlFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let len = data.len() as u64;
    let Ok(etl) = EtlFile::from_bytes(data.to_vec()) else {
        return;
    };
    for b in etl.buffers() {
        if let Err(e) = b {
            assert!(e.offset <= len);
        }
    }
    for merged in [false, true] {
        let mut it = if merged {
            etl.events()
        } else {
            etl.events_in_file_order()
        };
        while let Some(r) = it.next_event() {
            match r {
                Ok(ev) => {
                    std::hint::black_box((ev.payload.len(), ev.extended.len(), ev.time_ns));
                }
                Err(e) => assert!(e.offset <= len, "{e}"),
            }
        }
    }
});
