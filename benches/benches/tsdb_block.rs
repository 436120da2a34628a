//! Encode and decode speed of the compacted-row block codec, per data shape and block size.
//!
//! `cargo bench -p strata-benches --bench tsdb_block -- --warm-up-time 1 --measurement-time 3`

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use strata_benches::{DEFAULT_SEED, Shape, series};
use strata_tsdb::{decode_block, decode_block_columns, encode_block};

fn bench_block(c: &mut Criterion) {
    let mut group = c.benchmark_group("tsdb/block");
    eprintln!("tsdb/block: seed {DEFAULT_SEED:#x}");
    for (n, interval_ms) in [(360usize, 10_000i64), (3600, 1000)] {
        for shape in Shape::ALL {
            let points = series(shape, n, interval_ms, DEFAULT_SEED);
            let mut bytes = Vec::new();
            if let Err(e) = encode_block(&points, &mut bytes) {
                panic!("encode {}: {e}", shape.name());
            }
            eprintln!(
                "tsdb/block {}/{n}: {} bytes, {:.3} bytes/point",
                shape.name(),
                bytes.len(),
                bytes.len() as f64 / n as f64
            );
            let id = format!("{}/{n}", shape.name());
            group.throughput(Throughput::Elements(n as u64));
            group.bench_function(BenchmarkId::new("encode", &id), |b| {
                let mut out = Vec::with_capacity(bytes.len() * 2);
                b.iter(|| {
                    out.clear();
                    encode_block(black_box(&points), &mut out)
                })
            });
            group.bench_function(BenchmarkId::new("decode", &id), |b| {
                let mut out = Vec::with_capacity(n);
                b.iter(|| {
                    out.clear();
                    decode_block(black_box(&bytes), &mut out)
                })
            });
            group.bench_function(BenchmarkId::new("decode_columns", &id), |b| {
                let (mut ts, mut vals) = (Vec::with_capacity(n), Vec::with_capacity(n));
                b.iter(|| {
                    ts.clear();
                    vals.clear();
                    decode_block_columns(black_box(&bytes), &mut ts, &mut vals)
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_block);
criterion_main!(benches);
