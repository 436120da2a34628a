//! `/api/put` bodies on arbitrary bytes: `decode_body` (plain, or gzip when the first byte is
//! odd) and then `parse_put_body`. Nothing may panic, a body error must map to 400 or 413, and
//! a parsed body's good points plus failures must add up to its total.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_ingest::{ParseConfig, decode_body, parse_put_body};

fuzz_target!(|data: &[u8]| {
    let (knob, body) = data.split_first().map_or((0, data), |(k, d)| (*k, d));
    let gzip = knob & 1 == 1;
    let decoded = match decode_body(body, gzip, 1 << 20) {
        Ok(d) => d,
        Err(e) => {
            assert!(matches!(e.status(), 400 | 413));
            return;
        }
    };
    match parse_put_body(&decoded, &ParseConfig::new()) {
        Ok(parsed) => {
            assert_eq!(
                parsed.good_count() + parsed.failures().len(),
                parsed.total()
            );
            assert_eq!(parsed.points().count(), parsed.good_count());
        }
        Err(e) => assert!(matches!(e.status(), 400 | 413)),
    }
});
