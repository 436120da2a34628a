//! Prometheus remote write bodies on arbitrary bytes, as sent (snappy) and with a valid snappy
//! layer around them (so the protobuf decoder sees the bytes): `decode_write_request`, then
//! `RemoteWriteBatch`. Nothing may panic; a body error maps to 400 or 413, and an answer to
//! 204 or 400.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_ingest::{RemoteWriteBatch, decode_write_request};

fuzz_target!(|data: &[u8]| {
    let wrapped = snap::raw::Encoder::new()
        .compress_vec(data)
        .unwrap_or_default();
    for body in [data, &wrapped[..]] {
        match decode_write_request(body, 1 << 20) {
            Ok(req) => {
                let batch = RemoteWriteBatch::new(&req);
                let ok: Vec<strata_tsdb::Result<()>> =
                    (0..batch.points().len()).map(|_| Ok(())).collect();
                assert!(matches!(batch.reply(&ok).status, 204 | 400));
            }
            Err(e) => assert!(matches!(e.status(), 400 | 413)),
        }
    }
});
