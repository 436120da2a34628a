//! Retention by data time, per metric, with a test clock: queries stop returning expired
//! points, old points are refused, the data directory shrinks, whole expired files go without
//! being rewritten, and lookups and suggestions drop series with no data left.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use strata_tsdb::{
    Error, ManualClock, PointError, PointRef, ReadRequest, Retention, RetentionRule, Tsdb,
    TsdbOptions, UidKind, Value,
};

use crate::TestResult;

const HOUR: i64 = 3_600_000;
/// 2013-01-01T00:00:00Z.
const HOUR0: i64 = 1_356_998_400_000;

fn hours(n: u64) -> Option<Duration> {
    Some(Duration::from_secs(n * 3600))
}

fn open(dir: &Path, clock: &Arc<ManualClock>, retention: Retention) -> strata_tsdb::Result<Tsdb> {
    Tsdb::open(
        dir,
        TsdbOptions {
            clock: clock.clone(),
            retention,
            ..TsdbOptions::default()
        },
    )
}

fn put(db: &Tsdb, metric: &str, host: &str, ts: i64) -> strata_tsdb::Result<()> {
    let tags = [("host", host)];
    let p = PointRef {
        metric,
        tags: &tags,
        timestamp: ts,
        value: Value::Int(ts / 1000),
    };
    db.write(&[p]).pop().unwrap_or(Ok(()))
}

fn points(db: &Tsdb, metric: &str) -> strata_tsdb::Result<Vec<i64>> {
    Ok(db
        .read(&ReadRequest::metric(metric, &[], 0, i64::MAX / 2))?
        .into_iter()
        .flat_map(|s| s.points.into_iter().map(|p| p.0))
        .collect())
}

/// Bytes of the files under `dir` but the WAL's: a flush keeps log files to write over (as
/// many as it freed), so their size says nothing of the data held.
fn dir_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_name().to_string_lossy().ends_with(".log") {
            continue;
        }
        let m = e.metadata()?;
        total += if m.is_dir() {
            dir_bytes(&e.path())?
        } else {
            m.len()
        };
    }
    Ok(total)
}

#[test]
fn a_metric_rule_beats_the_global_retention_for_reads_and_writes() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock = Arc::new(ManualClock::new(HOUR0 as u64));
    let retention = Retention {
        global: hours(48),
        rules: vec![
            RetentionRule {
                metric: "fast.*".into(),
                keep: hours(2),
            },
            RetentionRule {
                metric: "keep.?".into(),
                keep: None,
            },
        ],
    };
    let db = open(dir.path(), &clock, retention)?;
    for m in ["fast.a", "slow.b", "keep.c"] {
        put(&db, m, "h", HOUR0 - HOUR)?;
        put(&db, m, "h", HOUR0 - HOUR / 2)?;
    }
    assert_eq!(points(&db, "fast.a")?.len(), 2);
    clock.advance_ms(3 * HOUR as u64);
    // Now - 2 h is HOUR0 + 1 h: both of fast.a's points have expired, the others' have not.
    assert!(points(&db, "fast.a")?.is_empty());
    assert!(
        db.read(&ReadRequest::metric("fast.a", &[], 0, i64::MAX / 2))?
            .is_empty()
    );
    assert_eq!(points(&db, "slow.b")?.len(), 2);
    assert_eq!(points(&db, "keep.c")?.len(), 2);
    let fast = db.find_series("fast.a", &[])?;
    for id in &fast {
        assert_eq!(db.series_info(id)?.and_then(|s| s.last), None);
    }
    // A partly expired range: only the kept points.
    put(&db, "slow.b", "h", HOUR0 + 2 * HOUR)?;
    clock.advance_ms(46 * HOUR as u64);
    assert_eq!(points(&db, "slow.b")?, vec![HOUR0 + 2 * HOUR]);

    // Writes older than the retention are refused and counted; keep.c takes anything.
    let before = db.stats().rejected_expired;
    let now = HOUR0 + 49 * HOUR;
    match put(&db, "fast.a", "h", now - 3 * HOUR) {
        Err(Error::Point(PointError::Expired {
            metric, retention, ..
        })) => {
            assert_eq!(metric, "fast.a");
            assert_eq!(retention, "2h");
        }
        other => panic!("expected an expired point, got {other:?}"),
    }
    assert!(put(&db, "slow.b", "h", now - 49 * HOUR).is_err());
    put(&db, "slow.b", "h", now - 47 * HOUR)?;
    put(&db, "fast.a", "h", now - HOUR)?;
    put(&db, "keep.c", "h", 5_000_000_000)?;
    assert_eq!(db.stats().rejected_expired - before, 2);
    assert_eq!(points(&db, "fast.a")?, vec![now - HOUR]);
    assert_eq!(points(&db, "keep.c")?.first(), Some(&5_000_000_000));
    Ok(())
}

#[test]
fn expired_data_leaves_the_disk_and_the_index() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock = Arc::new(ManualClock::new(HOUR0 as u64));
    let retention = Retention {
        global: hours(24),
        rules: Vec::new(),
    };
    let db = open(dir.path(), &clock, retention.clone())?;
    // Ten hours of old.metric, a point a second, in one file.
    for h in 0..10 {
        let tags = [("host", "a")];
        let batch: Vec<PointRef<'_>> = (0..3600)
            .map(|s| PointRef {
                metric: "old.metric",
                tags: &tags,
                timestamp: HOUR0 - (10 - h) * HOUR + s * 1000,
                // Values that do not compress away.
                value: Value::Float((s as f64 * 0.7311).sin() * 1e6),
            })
            .collect();
        assert!(db.write(&batch).iter().all(|r| r.is_ok()));
    }
    put(&db, "live.metric", "b", HOUR0)?;
    db.flush()?;
    // The newer metric's point lands in a file of its own.
    clock.advance_ms(HOUR as u64);
    put(&db, "live.metric", "b", HOUR0 + HOUR)?;
    db.flush()?;
    let full = dir_bytes(dir.path())?;
    assert_eq!(db.expire()?, 0);
    assert_eq!(db.find_series("old.metric", &[])?.len(), 1);

    // A day later the first file's hours have all expired; live.metric's last point has not.
    clock.advance_ms(24 * HOUR as u64);
    let stats = db.engine_stats();
    assert_eq!(db.expire()?, 1);
    let after = db.engine_stats();
    let shrunk = dir_bytes(dir.path())?;
    assert!(shrunk * 4 < full, "{full} bytes before, {shrunk} after");
    assert_eq!(after.expired_files_dropped - stats.expired_files_dropped, 1);
    assert!(points(&db, "old.metric")?.is_empty());
    assert!(db.find_series("old.metric", &[])?.is_empty());
    assert!(db.suggest(UidKind::Metric, "old", 10).is_empty());
    assert!(db.suggest(UidKind::Tagv, "a", 10).is_empty());
    assert_eq!(db.suggest(UidKind::Tagk, "", 10), vec!["host"]);
    assert_eq!(db.metric_names()?, vec!["live.metric"]);
    assert_eq!(points(&db, "live.metric")?, vec![HOUR0 + HOUR]);

    // A new point brings the series back.
    put(&db, "old.metric", "a", HOUR0 + 25 * HOUR)?;
    assert_eq!(db.find_series("old.metric", &[])?.len(), 1);
    assert_eq!(db.suggest(UidKind::Metric, "old", 10), vec!["old.metric"]);
    assert_eq!(db.suggest(UidKind::Tagv, "a", 10), vec!["a"]);
    // After a restart the sweep finds what has expired again.
    drop(db);
    clock.advance_ms(25 * HOUR as u64);
    let db = open(dir.path(), &clock, retention)?;
    assert_eq!(db.expire()?, 2);
    assert!(db.suggest(UidKind::Metric, "", 10).is_empty());
    Ok(())
}

#[test]
fn a_renamed_metric_takes_the_rule_of_its_new_name() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock = Arc::new(ManualClock::new(HOUR0 as u64));
    let retention = Retention {
        global: None,
        rules: vec![RetentionRule {
            metric: "tmp.*".into(),
            keep: hours(1),
        }],
    };
    let db = open(dir.path(), &clock, retention)?;
    put(&db, "tmp.a", "h", HOUR0 - HOUR / 2)?;
    assert!(put(&db, "tmp.a", "h", HOUR0 - 2 * HOUR).is_err());
    db.rename_uid(UidKind::Metric, "tmp.a", "kept.a")?;
    put(&db, "kept.a", "h", HOUR0 - 2 * HOUR)?;
    clock.advance_ms(HOUR as u64);
    assert_eq!(points(&db, "kept.a")?.len(), 2);
    Ok(())
}
