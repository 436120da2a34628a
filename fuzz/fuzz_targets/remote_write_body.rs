//! Prometheus remote write bodies on arbitrary bytes, as sent (snappy) and with a valid snappy
//! layer around them (so the protobuf decoder sees the bytes): `decompress_write_request`, then
//! `RemoteWriteBatch`. Nothing may panic; a body error maps to 400 or 413, and an answer to
//! 204 or 400.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_ingest::{RemoteWriteBatch, decompress_write_request};

fuzz_target!(|data: &[u8]| {
    let wrapped = snap::raw::Encoder::new()
        .compress_vec(data)
        .unwrap_or_default();
    for body in [data, &wrapped[..]] {
        let decoded = decompress_write_request(body, 1 << 20).and_then(|raw| {
            let mut batch = RemoteWriteBatch::decode(&raw)?;
            let ok: Vec<strata_tsdb::Result<()>> =
                (0..batch.mapped_points()?.len()).map(|_| Ok(())).collect();
            Ok(batch.reply(&ok).status)
        });
        match decoded {
            Ok(status) => assert!(matches!(status, 204 | 400)),
            Err(e) => assert!(matches!(e.status(), 400 | 413)),
        }
    }
});
