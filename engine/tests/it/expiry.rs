//! Expiry by data time (`TableOptions::expiry`): compaction drops expired rows, a file of only
//! expired rows goes without being rewritten, and `Db::expire` does both with no new writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use strata_engine::{
    Clock, Db, DbOptions, RowExpirer, RowExpiry, ScanOptions, Table, TableOptions, WriteBatch,
};

use crate::TestResult;

/// Rows are 8-byte big-endian data times in ms, kept for [`KEEP_MS`]; time 0 is kept forever.
#[derive(Debug)]
struct ByTime;

const KEEP_MS: u64 = 10_000;

impl RowExpiry for ByTime {
    fn row_time_ms(&self, row: &[u8]) -> Option<u64> {
        let t = u64::from_be_bytes(row.try_into().ok()?);
        (t != 0).then_some(t)
    }
    fn row_expires_ms(&self, row: &[u8]) -> Option<u64> {
        self.row_time_ms(row).map(|t| t + KEEP_MS)
    }
    fn all_expired_before(&self, now_ms: u64) -> Option<u64> {
        Some(now_ms.saturating_sub(KEEP_MS))
    }
    fn some_expired_before(&self, now_ms: u64) -> Option<u64> {
        Some(now_ms.saturating_sub(KEEP_MS))
    }
}

#[derive(Debug)]
struct TestClock(AtomicU64);

impl Clock for TestClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

fn open(dir: &std::path::Path, clock: Arc<TestClock>) -> TestResult<(Db, Table)> {
    let db = Db::open(
        dir,
        DbOptions {
            clock,
            ..DbOptions::default()
        },
    )?;
    let t = db.open_table(
        "t",
        TableOptions {
            expiry: Some(RowExpirer(Arc::new(ByTime))),
            ..TableOptions::default()
        },
    )?;
    Ok((db, t))
}

fn put_rows(db: &Db, t: &Table, times: impl Iterator<Item = u64>) -> TestResult {
    let mut b = WriteBatch::new();
    for time in times {
        b.put(t, &time.to_be_bytes(), b"c", &[7u8; 100]);
    }
    db.write(&b)?;
    db.flush()?;
    Ok(())
}

fn rows(db: &Db, t: &Table) -> TestResult<Vec<u64>> {
    let mut out = Vec::new();
    for row in db.scan(t, &ScanOptions::default())? {
        let key: [u8; 8] = row?.key.as_ref().try_into()?;
        out.push(u64::from_be_bytes(key));
    }
    Ok(out)
}

fn files(db: &Db) -> u64 {
    db.stats().levels.iter().map(|l| l.files).sum()
}

#[test]
fn a_file_of_expired_rows_is_dropped_unread() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock = Arc::new(TestClock(AtomicU64::new(99_000)));
    let (db, t) = open(dir.path(), clock.clone())?;
    put_rows(&db, &t, 90_000..90_050)?;
    let before = db.stats();
    assert_eq!(files(&db), 1);
    db.expire()?;
    // Not expired yet: 90 000 + 10 000 > 99 000.
    assert_eq!(rows(&db, &t)?.len(), 50);
    clock.0.store(100_050, Ordering::Relaxed);
    db.expire()?;
    let after = db.stats();
    assert_eq!(
        after.expired_files_dropped - before.expired_files_dropped,
        1
    );
    assert!(after.expired_bytes_dropped > 0);
    assert_eq!(
        after.compaction_bytes_written,
        before.compaction_bytes_written
    );
    assert_eq!(after.expired_rows_dropped, 0, "nothing was read");
    assert_eq!(files(&db), 0);
    assert!(rows(&db, &t)?.is_empty());
    Ok(())
}

#[test]
fn compaction_drops_expired_rows_and_keeps_the_rest() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock = Arc::new(TestClock(AtomicU64::new(100_000)));
    let (db, t) = open(dir.path(), clock.clone())?;
    put_rows(&db, &t, (80_000..80_010).chain([0]).chain(95_000..95_010))?;
    // Rows of 80 000.. expired at 90 000..; 95 000.. expire at 105 000..
    assert_eq!(rows(&db, &t)?.len(), 21);
    db.compact_all()?;
    assert_eq!(db.stats().expired_rows_dropped, 10);
    let mut want: Vec<u64> = vec![0];
    want.extend(95_000..95_010);
    assert_eq!(rows(&db, &t)?, want);
    // The rewritten file knows when its next row expires: no rewrite until then.
    let rewritten = db.stats().compactions;
    db.expire()?;
    assert_eq!(db.stats().compactions, rewritten);
    clock.0.store(105_010, Ordering::Relaxed);
    db.expire()?;
    assert_eq!(db.stats().expired_rows_dropped, 20);
    assert_eq!(rows(&db, &t)?, vec![0]);
    // Reopened (row times read from the file), the row kept forever stays.
    drop(db);
    let (db, t) = open(dir.path(), clock)?;
    db.expire()?;
    assert_eq!(rows(&db, &t)?, vec![0]);
    Ok(())
}
