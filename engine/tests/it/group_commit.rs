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
    all_present_after_reopen(dir.path())
}

/// Reopens the database in `dir` and checks that every writer's batches are there.
fn all_present_after_reopen(dir: &std::path::Path) -> TestResult {
    let db = Db::open(dir, options(SyncPolicy::Always, 16 << 10))?;
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

/// Writers that queue and wait only until their batch is in the WAL (`Db::wait_durable`), as
/// the server's HTTP writes do, race plain and queued writers across many memtable freezes:
/// a read right after each durable wait finds the batch, and every batch survives a reopen
/// without a close.
#[test]
fn durable_waits_are_read_at_once_across_freezes() -> TestResult {
    let dir = tempfile::tempdir()?;
    let opts = strata_engine::DbOptions {
        memtable_bytes: 256,
        ..options(SyncPolicy::Interval(Duration::from_secs(3600)), 16 << 10)
    };
    let db = Db::open(dir.path(), opts)?;
    let (a, b) = tables(&db)?;
    let db = Arc::new(db);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (db, a, b) = (Arc::clone(&db), a.clone(), b.clone());
            std::thread::spawn(move || -> Result<(), String> {
                let fail = |e: &dyn std::fmt::Display| e.to_string();
                for i in 0..PER_THREAD {
                    let id = t * 1000 + i;
                    let mut batch = test_batch(&a, &b, id, false);
                    match t % 3 {
                        0 => db.write(&batch).map_err(|e| fail(&e))?,
                        1 => db.write_queued(&mut batch).map_err(|e| fail(&e))?,
                        _ => {
                            db.write_queued_before_settle(&mut batch)
                                .map_err(|e| fail(&e))?;
                            db.wait_durable().map_err(|e| fail(&e))?;
                            let read = batch_present(&db, &a, &b, id).map_err(|e| fail(&e))?;
                            assert!(read, "batch {id} not read");
                        }
                    }
                }
                Ok(())
            })
        })
        .collect();
    for h in handles {
        h.join().map_err(|_| "writer panicked")??;
    }
    db.settle()?;
    let stats = db.stats();
    assert_eq!(stats.batches_written, THREADS * PER_THREAD);
    assert!(stats.flushes > 3, "memtables froze and flushed: {stats:?}");
    drop(db);
    all_present_after_reopen(dir.path())
}
