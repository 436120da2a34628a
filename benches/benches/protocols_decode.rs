//! The collectors' protocols from body to points, storage left out: a Prometheus remote write
//! request of 2000 samples (snappy, protobuf, one sample per series, 7 labels) through
//! decompression, decoding, resolving and `series_points`; and an Influx line protocol body of
//! about 2000 points (one line per host and measurement) through `parse_known`, `resolve` and
//! `series_points`. Every series is known, as in a steady stream; the shapes are those of
//! `load_protocols` (`benches/protocols/`).
//!
//! `cargo bench -p strata-benches --bench protocols_decode -- --warm-up-time 1 --measurement-time 5`

use std::fmt::Write as _;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use strata_benches::devops::{METRICS, START};
use strata_ingest::{
    InfluxBatch, KnownLines, KnownSeries, Label, Precision, RemoteWriteBatch, Sample, TimeSeries,
    WriteRequest, decompress_write_request, encode_write_request,
};
use strata_tsdb::{Tsdb, TsdbOptions};

/// The server's allocator (`src/main.rs`), so that the allocations are measured as they cost
/// there.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Samples per remote write request (Prometheus' `max_samples_per_send`).
const BATCH: usize = 2000;

fn host_tags(h: usize) -> [(&'static str, String); 6] {
    [
        ("arch", "x86_64".into()),
        ("dc", format!("dc-{}", h % 4)),
        ("host", format!("host-{h:04}")),
        ("os", "linux".into()),
        ("rack", format!("r-{}", h % 50)),
        ("team", format!("t-{}", h % 10)),
    ]
}

fn value(h: usize, m: usize) -> f64 {
    ((h * 31 + m * 7) % 1000) as f64 / 10.0
}

/// One request: 100 hosts × 20 metrics at one timestamp.
fn remote_write_body() -> Vec<u8> {
    let mut req = WriteRequest::default();
    for h in 0..BATCH / METRICS.len() {
        for (m, metric) in METRICS.iter().enumerate() {
            let mut labels = vec![Label {
                name: Bytes::from_static(b"__name__"),
                value: Bytes::from(metric.replace('.', "_")),
            }];
            labels.extend(host_tags(h).into_iter().map(|(k, v)| Label {
                name: Bytes::from_static(k.as_bytes()),
                value: Bytes::from(v),
            }));
            req.timeseries.push(TimeSeries {
                labels,
                samples: vec![Sample {
                    value: value(h, m),
                    timestamp: START * 1000,
                }],
            });
        }
    }
    encode_write_request(&req)
}

/// One body: 100 hosts, a line per measurement, at one timestamp.
fn influx_body() -> Vec<u8> {
    let mut body = String::new();
    for h in 0..BATCH / METRICS.len() {
        let tags: String = host_tags(h)
            .iter()
            .map(|(k, v)| format!(",{k}={v}"))
            .collect();
        let mut last = "";
        for (m, metric) in METRICS.iter().enumerate() {
            let (measurement, field) = metric.split_once('.').unwrap_or((metric, "value"));
            if measurement != last {
                if !last.is_empty() {
                    let _ = writeln!(body, " {}", START * 1_000_000_000);
                }
                let _ = write!(body, "{measurement}{tags} {field}={:.1}", value(h, m));
                last = measurement;
            } else {
                let _ = write!(body, ",{field}={:.1}", value(h, m));
            }
        }
        let _ = writeln!(body, " {}", START * 1_000_000_000);
    }
    body.into_bytes()
}

fn remote_write_points(body: &[u8], tsdb: &Tsdb, known: &KnownSeries) -> usize {
    let raw = decompress_write_request(body, 64 << 20).expect("snappy");
    let mut batch = RemoteWriteBatch::decode(&raw).expect("decode");
    batch.resolve(tsdb, known).expect("resolve");
    batch.series_points().len()
}

fn influx_points(body: &[u8], tsdb: &Tsdb, known: &KnownLines) -> usize {
    let mut batch = InfluxBatch::parse_known(body, Precision::Nanoseconds, 0, tsdb, known);
    batch.resolve(tsdb, known);
    batch.series_points().len()
}

fn bench_decode(c: &mut Criterion) {
    strata_benches::configure_allocator();
    let dir = tempfile::tempdir().expect("tempdir");
    let tsdb = Tsdb::open(dir.path(), TsdbOptions::default()).expect("open tsdb");
    let mut group = c.benchmark_group("protocols/decode");
    group.throughput(Throughput::Elements(BATCH as u64));

    let rw = remote_write_body();
    let known = KnownSeries::new();
    assert_eq!(remote_write_points(&rw, &tsdb, &known), BATCH);
    group.bench_function("remote-write-2000", |b| {
        b.iter(|| remote_write_points(&rw, &tsdb, &known))
    });

    let lp = influx_body();
    let known = KnownLines::new();
    assert_eq!(influx_points(&lp, &tsdb, &known), BATCH);
    group.bench_function("influx-2000", |b| {
        b.iter(|| influx_points(&lp, &tsdb, &known))
    });
    group.finish();
}

criterion_group!(benches, bench_decode);
criterion_main!(benches);
