//! Group commit: concurrent writers share writes and fsyncs, and every acknowledged batch
//! survives a reopen.

use std::sync::Arc;
use std::time::Duration;

use strata_engine::{Db, SyncPolicy};

use crate::{TestResult, batch_present, options, tables, test_batch};

const THREADS: u64 = 8;
const PER_THREAD: u64 = 60;

fn run(sync: SyncPolicy, use_write_sync: bool) -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), options(sync, 16 << 10))?;
    let (a, b) = tables(&db)?;
    let db = Arc::new(db);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (db, a, b) = (Arc::clone(&db), a.clone(), b.clone());
            std::thread::spawn(move || -> strata_engine::Result<()> {
                for i in 0..PER_THREAD {
                    let batch = test_batch(&a, &b, t * 1000 + i, false);
                    if use_write_sync {
                        db.write_sync(&batch)?;
                    } else {
                        db.write(&batch)?;
                    }
                }
                Ok(())
            })
        })
        .collect();
    for h in handles {
        h.join().map_err(|_| "writer panicked")??;
    }
    let stats = db.stats();
    println!("{sync}: {stats:?}");
    assert_eq!(stats.batches_written, THREADS * PER_THREAD);
    assert!(stats.wal_bytes > 0);
    // Two table records plus the batches, each needing at most one fsync plus one per roll.
    assert!(stats.wal_syncs >= 1);
    assert!(stats.wal_syncs <= 2 + 2 * THREADS * PER_THREAD);
    // Simulate a crash: no close, just drop (the fsyncs already happened).
    drop(db);
    let db = Db::open(dir.path(), options(SyncPolicy::Always, 16 << 10))?;
    let (a, b) = tables(&db)?;
    for t in 0..THREADS {
        for i in 0..PER_THREAD {
            assert!(
                batch_present(&db, &a, &b, t * 1000 + i)?,
                "batch {t}/{i} lost"
            );
        }
    }
    Ok(())
}

#[test]
fn concurrent_writers_with_always() -> TestResult {
    run(SyncPolicy::Always, false)
}

#[test]
fn concurrent_writers_with_write_sync() -> TestResult {
    run(SyncPolicy::Interval(Duration::from_secs(3600)), true)
}

#[test]
fn interval_policy_fsyncs_in_the_background() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(
        dir.path(),
        options(SyncPolicy::Interval(Duration::from_millis(10)), 64 << 20),
    )?;
    let (a, b) = tables(&db)?;
    let before = db.stats().wal_syncs;
    db.write(&test_batch(&a, &b, 1, false))?;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while db.stats().wal_syncs == before {
        assert!(std::time::Instant::now() < deadline, "no background fsync");
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}
