//! Influx line protocol bodies on arbitrary bytes: `InfluxBatch::parse`, then the answers of
//! both APIs. Nothing may panic; every field must be a point or a refusal, every stored name a
//! valid OpenTSDB name, and every answer one of InfluxDB's statuses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_ingest::{InfluxApi, InfluxBatch, Precision};

fuzz_target!(|data: &[u8]| {
    let batch = InfluxBatch::parse(data, Precision::Nanoseconds, 1_700_000_000_000);
    let points = batch.points().points();
    assert_eq!(
        batch.received(),
        (points.len() + batch.refusals().count()) as u64
    );
    for p in &points {
        assert!(strata_tsdb::unescape_name(p.metric).is_some());
        for (k, v) in p.tags {
            assert!(strata_tsdb::unescape_name(k).is_some());
            assert!(strata_tsdb::unescape_name(v).is_some());
        }
    }
    let ok: Vec<strata_tsdb::Result<()>> = points.iter().map(|_| Ok(())).collect();
    for api in [InfluxApi::V1, InfluxApi::V2] {
        let results = if batch.rejects_all(api) {
            &[][..]
        } else {
            &ok[..]
        };
        assert!(matches!(batch.reply(api, results).status, 204 | 400 | 422));
    }
});
