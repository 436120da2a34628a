//! `Tsdb::write` of pre-parsed points with the devops shape (200 hosts × 20 metrics, 6 tags,
//! time order, WAL `interval:100`), in batches like the server's telnet path makes; and the
//! series-day and metric × 200 series reads are in `tsdb_read`. `devops-200x20-retention` is
//! the same with a retention rule that no metric matches and a global retention that keeps
//! every point, so each point pays the retention check (the per-metric rule cache).
//!
//! `cargo bench -p strata-benches --bench tsdb_write -- --warm-up-time 1 --measurement-time 5`

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use strata_benches::{DEFAULT_SEED, devops};
use strata_tsdb::{Point, PointRef, Retention, RetentionRule, Tsdb, TsdbOptions};

/// The server's allocator (`src/main.rs`), so that the write path is measured as it runs there.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Points per `write` call: about what one 64 KiB telnet read carries.
const BATCH: usize = 600;
/// Timestamps per measured iteration: 200 × 20 × 6 = 24,000 points.
const STEPS: i64 = 6;

fn open(dir: &std::path::Path, retention: Retention) -> Tsdb {
    let mut opts = TsdbOptions::default();
    opts.db.sync = "interval:100".parse().expect("sync policy");
    opts.retention = retention;
    Tsdb::open(dir, opts).expect("open tsdb")
}

/// Keeps every point of the generator's time range, through a rule lookup per metric.
fn keep_all() -> Retention {
    Retention {
        global: Some(Duration::from_secs(100 * 365 * 86_400)),
        rules: vec![RetentionRule {
            metric: "nomatch.*".into(),
            keep: Some(Duration::from_secs(86_400)),
        }],
    }
}

fn write_all(db: &Tsdb, points: &[Point]) {
    let mut refs: Vec<PointRef<'_, String>> = Vec::with_capacity(BATCH);
    for chunk in points.chunks(BATCH) {
        refs.clear();
        refs.extend(chunk.iter().map(Point::as_ref));
        for r in db.write(&refs) {
            r.expect("write");
        }
    }
}

fn bench_write(c: &mut Criterion) {
    strata_benches::configure_allocator();
    let hosts = 200;
    let mut group = c.benchmark_group("tsdb/write");
    group.throughput(Throughput::Elements(
        (hosts * devops::METRICS.len()) as u64 * STEPS as u64,
    ));
    for (name, retention) in [
        ("devops-200x20", Retention::default()),
        ("devops-200x20-retention", keep_all()),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let dir = tempfile::tempdir().expect("tempdir");
                let db = open(dir.path(), retention.clone());
                // Register the series first so the measurement is the steady state.
                write_all(&db, &devops::points(hosts, 0, 1, DEFAULT_SEED));
                let mut total = Duration::ZERO;
                for i in 0..iters {
                    let points =
                        devops::points(hosts, 1 + i as i64 * STEPS, STEPS, DEFAULT_SEED + i);
                    let started = Instant::now();
                    write_all(&db, &points);
                    total += started.elapsed();
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_write);
criterion_main!(benches);
