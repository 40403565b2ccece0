//! EventSource providers in manifest mode send their manifest in band (event 0xFFFE, in
//! chunks): the decoder reads it, so that the provider's events decode by field name over a
//! trace (and live, where the same decoder sees the same records). Skips when `../shared/etl`
//! is absent.

use crate::support::etl;

use dtx::etw::decode::{SchemaSource, MANIFEST_EVENT_ID};
use dtx::etw::record::Guid;
use dtx::sources::etl::TraceSource;

#[test]
fn live_fix_an_eventsources_in_band_manifest_names_its_fields() {
    // tx_BondEtwSample.etl: one 0xFFFE event of provider 4f8f06bf-... (expected_counts.json)
    let Some(path) = etl::trace("tx_BondEtwSample.etl") else {
        return;
    };
    let provider = Guid::parse("4f8f06bf-8261-4099-ae5f-07c54bbcfab3").unwrap();
    let src = TraceSource::open(&path).unwrap();
    let mut decoder = dtx::etw::decode::Decoder::new();
    let (mut manifests, mut before, mut named, mut raw_after) = (0, 0, 0, 0);
    let mut names = std::collections::BTreeSet::new();
    let mut events = src.file.events();
    while let Some(r) = events.next_event() {
        let Ok(ev) = r else { continue };
        // what a source does with every record: observe, then decode
        decoder.observe(&ev);
        if ev.provider != provider {
            continue;
        }
        if ev.id == MANIFEST_EVENT_ID {
            manifests += 1;
            continue;
        }
        if manifests == 0 {
            before += 1;
            continue;
        }
        let d = decoder.decode(&ev);
        if d.source == SchemaSource::Manifest {
            named += 1;
            for f in d.fields() {
                names.insert(f.0.to_string());
            }
        } else {
            raw_after += 1;
        }
    }
    eprintln!(
        "{manifests} manifest event(s); {before} events before it, {named} decoded by it, \
         {raw_after} not; fields {names:?}"
    );
    assert_eq!(manifests, 1);
    assert!(
        named > 0,
        "no event of the provider decoded by its in-band manifest"
    );
    assert_eq!(raw_after, 0);
    assert!(!names.is_empty());
}
