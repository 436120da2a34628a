//! The measured trial of the `pco` crate (pcodec) as the block value codec (issue #4): the same
//! series as `tsdb_block`, each row's timestamps and values compressed by pco as two columns
//! (its standalone format, default `ChunkConfig`), against Strata's block codec.
//!
//! Sizes are printed before the timings. Off by default, so CI never builds pco:
//! `cargo bench -p strata-benches --features pco-trial --bench tsdb_block_pco -- --warm-up-time 1 --measurement-time 3`

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use pco::ChunkConfig;
use pco::standalone::{simple_compress, simple_decompress};
use strata_benches::{DEFAULT_SEED, Shape, series};
use strata_tsdb::{Value, encode_block};

/// One row's columns as pco takes them: integers when every value is one, else floats.
enum Columns {
    Ints(Vec<i64>, Vec<i64>),
    Floats(Vec<i64>, Vec<f64>),
}

impl Columns {
    fn of(points: &[(i64, Value)]) -> Columns {
        let ts = points.iter().map(|p| p.0).collect();
        if points.iter().all(|p| matches!(p.1, Value::Int(_))) {
            Columns::Ints(
                ts,
                points
                    .iter()
                    .map(|p| match p.1 {
                        Value::Int(i) => i,
                        Value::Float(f) => f as i64,
                    })
                    .collect(),
            )
        } else {
            Columns::Floats(ts, points.iter().map(|p| p.1.as_f64()).collect())
        }
    }

    fn compress(&self) -> (Vec<u8>, Vec<u8>) {
        let c = ChunkConfig::default();
        let r = match self {
            Columns::Ints(t, v) => {
                simple_compress(t, &c).and_then(|t| Ok((t, simple_compress(v, &c)?)))
            }
            Columns::Floats(t, v) => {
                simple_compress(t, &c).and_then(|t| Ok((t, simple_compress(v, &c)?)))
            }
        };
        match r {
            Ok(pair) => pair,
            Err(e) => panic!("pco compress: {e}"),
        }
    }

    fn decompress(&self, (t, v): &(Vec<u8>, Vec<u8>)) -> usize {
        let n = match simple_decompress::<i64>(t) {
            Ok(ts) => ts.len(),
            Err(e) => panic!("pco decompress: {e}"),
        };
        let m = match self {
            Columns::Ints(..) => simple_decompress::<i64>(v).map(|v| v.len()),
            Columns::Floats(..) => simple_decompress::<f64>(v).map(|v| v.len()),
        };
        match m {
            Ok(m) => n + m,
            Err(e) => panic!("pco decompress: {e}"),
        }
    }
}

fn bench_pco(c: &mut Criterion) {
    let mut group = c.benchmark_group("tsdb/block_pco");
    eprintln!("tsdb/block_pco: seed {DEFAULT_SEED:#x}");
    for (n, interval_ms) in [(360usize, 10_000i64), (3600, 1000)] {
        for shape in Shape::ALL {
            let points = series(shape, n, interval_ms, DEFAULT_SEED);
            let mut strata = Vec::new();
            if let Err(e) = encode_block(&points, &mut strata) {
                panic!("encode {}: {e}", shape.name());
            }
            let columns = Columns::of(&points);
            let packed = columns.compress();
            let pco_len = packed.0.len() + packed.1.len();
            eprintln!(
                "tsdb/block_pco {}/{n}: strata {} B ({:.3} B/pt), pco {pco_len} B ({:.3} B/pt)",
                shape.name(),
                strata.len(),
                strata.len() as f64 / n as f64,
                pco_len as f64 / n as f64
            );
            let id = format!("{}/{n}", shape.name());
            group.throughput(Throughput::Elements(n as u64));
            group.bench_function(BenchmarkId::new("encode", &id), |b| {
                b.iter(|| black_box(&columns).compress())
            });
            group.bench_function(BenchmarkId::new("decode", &id), |b| {
                b.iter(|| columns.decompress(black_box(&packed)))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_pco);
criterion_main!(benches);
