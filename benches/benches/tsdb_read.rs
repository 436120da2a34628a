//! Read speed of the tsdb layer after row compaction, in points decoded per second: one
//! series-day (8,640 points at 10 s) and one metric x 200 series x 12 h (864,000 points).
//! Setting up also times `Tsdb::rowcompact_all` on one closed hour of the devops shape
//! (200 hosts x 20 metrics = 4,000 rows, 1.44 M points) and prints it.
//!
//! `cargo bench -p strata-benches --bench tsdb_read -- --warm-up-time 1 --measurement-time 3`

use std::sync::Arc;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_benches::DEFAULT_SEED;
use strata_benches::devops::{self, METRICS, START, STEP};
use strata_tsdb::{ManualClock, PointRef, Tsdb, TsdbOptions, Value};

const HOSTS: usize = 200;
/// Steps of 10 s in a day.
const DAY_STEPS: i64 = 24 * 3600 / STEP;
/// Points per write call, like an ingest batch.
const WRITE_CHUNK: usize = 20_000;

fn open(dir: &std::path::Path, clock: &Arc<ManualClock>) -> anyhow::Result<Tsdb> {
    Ok(Tsdb::open(
        dir,
        TsdbOptions {
            clock: clock.clone(),
            ..TsdbOptions::default()
        },
    )?)
}

fn write_all(db: &Tsdb, points: &[PointRef<'_, String>]) -> anyhow::Result<()> {
    for chunk in points.chunks(WRITE_CHUNK) {
        for r in db.write(chunk) {
            r?;
        }
    }
    Ok(())
}

/// Writes one closed hour of the full devops shape and times `rowcompact_all` on it.
fn time_rowcompact() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let clock = Arc::new(ManualClock::new(START as u64 * 1000));
    let db = open(dir.path(), &clock)?;
    let points = devops::points(HOSTS, 0, 3600 / STEP, DEFAULT_SEED);
    let refs: Vec<_> = points.iter().map(|p| p.as_ref()).collect();
    let t = Instant::now();
    write_all(&db, &refs)?;
    let write_s = t.elapsed().as_secs_f64();
    clock.set_ms((START as u64 + 3600 + 600) * 1000);
    let t = Instant::now();
    let stats = db.rowcompact_all()?;
    let secs = t.elapsed().as_secs_f64();
    eprintln!(
        "tsdb/rowcompact: {} rows, {} points written in {write_s:.2} s; rowcompact_all {:.3} s \
         ({:.0} rows/s, {:.2} M points/s): {stats:?}",
        stats.rows_compacted,
        points.len(),
        secs,
        stats.rows_compacted as f64 / secs,
        stats.block_points as f64 / secs / 1e6,
    );
    Ok(())
}

/// One metric (`cpu.user`) of 200 hosts over a day, row-compacted.
fn day_of_one_metric(dir: &std::path::Path) -> anyhow::Result<Tsdb> {
    let clock = Arc::new(ManualClock::new(START as u64 * 1000));
    let db = open(dir, &clock)?;
    let mut rng = StdRng::seed_from_u64(DEFAULT_SEED);
    let tags: Vec<_> = (0..HOSTS).map(devops::tags).collect();
    let mut tenths: Vec<i64> = (0..HOSTS).map(|_| rng.gen_range(0..=1000)).collect();
    let mut points = Vec::with_capacity(HOSTS * DAY_STEPS as usize);
    for step in 0..DAY_STEPS {
        for (h, t) in tenths.iter_mut().enumerate() {
            *t = (*t + rng.gen_range(-10..=10)).clamp(0, 1000);
            points.push((h, START + step * STEP, Value::Float(*t as f64 / 10.0)));
        }
    }
    let refs: Vec<PointRef<'_, String>> = points
        .iter()
        .map(|(h, ts, v)| PointRef {
            metric: METRICS[0],
            tags: &tags[*h],
            timestamp: *ts,
            value: *v,
        })
        .collect();
    write_all(&db, &refs)?;
    clock.set_ms((START as u64 + 25 * 3600) * 1000);
    let t = Instant::now();
    let stats = db.rowcompact_all()?;
    eprintln!(
        "tsdb/read setup: rowcompact_all of {} rows ({} points) in {:.3} s",
        stats.rows_compacted,
        stats.block_points,
        t.elapsed().as_secs_f64()
    );
    db.flush()?;
    db.compact_all()?;
    Ok(db)
}

fn bench_read(c: &mut Criterion) {
    eprintln!("tsdb/read: seed {DEFAULT_SEED:#x}");
    if let Err(e) = time_rowcompact() {
        panic!("rowcompact timing: {e}");
    }
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("tempdir: {e}"),
    };
    let db = match day_of_one_metric(dir.path()) {
        Ok(db) => db,
        Err(e) => panic!("setup: {e}"),
    };
    let all = match db.find_series(METRICS[0], &[]) {
        Ok(ids) => ids,
        Err(e) => panic!("find_series: {e}"),
    };
    assert_eq!(all.len(), HOSTS as u64);
    // The benches crate does not depend on roaring; build the one-id set from `all`'s type.
    let mut one = all.clone();
    one.clear();
    one.insert(all.min().unwrap_or(0));
    let start_ms = START * 1000;
    let day_end = start_ms + DAY_STEPS * STEP * 1000 - 1;
    let half_end = start_ms + 12 * 3_600_000 - 1;
    let cases = [
        ("series_day", &one, day_end, DAY_STEPS as u64),
        (
            "metric_200x12h",
            &all,
            half_end,
            HOSTS as u64 * 12 * 3600 / STEP as u64,
        ),
    ];
    let mut group = c.benchmark_group("tsdb/read");
    for (name, ids, end, expect) in cases {
        let got: usize = match db.read(&strata_tsdb::ReadRequest::ids(ids, start_ms, end)) {
            Ok(r) => r.iter().map(|s| s.points.len()).sum(),
            Err(e) => panic!("read: {e}"),
        };
        assert_eq!(got as u64, expect, "{name}");
        group.throughput(Throughput::Elements(expect));
        group.bench_function(BenchmarkId::new("read_series", name), |b| {
            b.iter(|| {
                db.read(&strata_tsdb::ReadRequest::ids(
                    black_box(ids),
                    start_ms,
                    end,
                ))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_read);
criterion_main!(benches);
