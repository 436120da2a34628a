//! Startup time: `Tsdb::open` of a database holding 1 M series (issue #3), which rebuilds the
//! UID maps and the series index from table `meta`.
//!
//! `cargo bench -p strata-benches --bench tsdb_open -- --warm-up-time 1 --measurement-time 20`
//!
//! The database is built once (1 M series × 1 point, 1,000 hosts × 1,000 metrics, 3 tags) under
//! `/tmp/strata-bench-open-1m` and reused by later runs; delete it to rebuild.
//! `STRATA_BENCH_OPEN_SERIES` changes the count (the directory name follows it).

use std::path::{Path, PathBuf};
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use strata_tsdb::{Point, PointRef, Tsdb, TsdbOptions, Value};

fn series_count() -> usize {
    std::env::var("STRATA_BENCH_OPEN_SERIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

fn build(dir: &Path, n: usize) {
    let done = dir.join("BUILT");
    if done.exists() {
        return;
    }
    let _ = std::fs::remove_dir_all(dir);
    let started = Instant::now();
    let db = Tsdb::open(dir, TsdbOptions::default()).expect("open");
    let metrics = 1000.min(n).max(1);
    let mut batch: Vec<Point> = Vec::with_capacity(10_000);
    for i in 0..n {
        let (m, h) = (i % metrics, i / metrics);
        batch.push(Point {
            metric: format!("bench.metric.{m:04}"),
            tags: vec![
                ("host".into(), format!("host-{h:05}")),
                ("dc".into(), format!("dc-{}", h % 8)),
                ("team".into(), format!("t-{}", h % 50)),
            ],
            timestamp: 1_767_225_600 + (i % 3600) as i64,
            value: Value::Int(i as i64),
        });
        if batch.len() == batch.capacity() || i + 1 == n {
            let refs: Vec<PointRef<'_, String>> = batch.iter().map(Point::as_ref).collect();
            for r in db.write(&refs) {
                r.expect("write");
            }
            batch.clear();
        }
    }
    db.flush().expect("flush");
    drop(db);
    std::fs::write(&done, b"").expect("marker");
    eprintln!(
        "tsdb/open: built {n} series in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

fn bench_open(c: &mut Criterion) {
    let n = series_count();
    let dir = PathBuf::from(format!("/tmp/strata-bench-open-{n}"));
    build(&dir, n);
    let mut group = c.benchmark_group("tsdb/open");
    group.sample_size(10);
    group.bench_function(format!("{n}-series"), |b| {
        b.iter(|| {
            let db = Tsdb::open(&dir, TsdbOptions::default()).expect("open");
            assert_eq!(db.series_count(), n);
            db
        })
    });
    group.finish();
}

criterion_group!(benches, bench_open);
criterion_main!(benches);
