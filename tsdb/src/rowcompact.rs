//! The row compactor: folds a closed hour's raw cells into one block cell (DESIGN §4).
//!
//! Its work list is the `d` markers of table `meta` (`meta.rs`), written with every data write.
//! A pass walks the markers, takes the rows whose hour has closed
//! (`base_time + 3600 s + grace <= now`), and for each row:
//!
//! 1. reads the row and merges its block (the empty column) with its raw cells, raw winning;
//! 2. encodes the merged points as one block (`block.rs`), outside any lock;
//! 3. under the tsdb write lock, checks that neither the marker nor the row changed since step 1
//!    (a late write or a delete got there first: the row is left for the next pass), then
//!    commits one batch that puts the block, deletes exactly the raw cells it folded, and
//!    deletes the marker.
//!
//! A row with no raw cell only loses its marker. Passes are idempotent: a crash before the
//! batch commits leaves the row and its marker as they were.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use strata_engine::{Row, ScanOptions, WriteBatch};

use crate::block::encode_block;
use crate::cell::{decode_row, split_row};
use crate::error::{Error, Result};
use crate::meta;
use crate::rowkey::{ROW_SPAN_SECS, RowKey};
use crate::tsdb::Tsdb;

/// Rows per pass of [`Tsdb::rowcompact_all`] and of the background compactor: small enough
/// that a pass does not hold up writers for long, large enough to amortize the marker scan.
const PASS_ROWS: usize = 1024;

/// What a row-compaction pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowCompactStats {
    /// Dirty rows whose hour had closed and that the pass looked at.
    pub rows_examined: u64,
    /// Rows rewritten as one block.
    pub rows_compacted: u64,
    /// Rows with no raw cell to fold: only their dirty marker was removed.
    pub rows_clean: u64,
    /// Rows written or deleted while the pass worked on them; left dirty for a later pass.
    pub rows_raced: u64,
    /// Rows that could not be decoded (corrupt cells or block); left dirty and logged.
    pub rows_failed: u64,
    /// Raw cells folded into blocks (and deleted).
    pub cells_folded: u64,
    /// Points in the blocks written.
    pub block_points: u64,
}

impl RowCompactStats {
    fn add(&mut self, o: &RowCompactStats) {
        self.rows_examined += o.rows_examined;
        self.rows_compacted += o.rows_compacted;
        self.rows_clean += o.rows_clean;
        self.rows_raced += o.rows_raced;
        self.rows_failed += o.rows_failed;
        self.cells_folded += o.cells_folded;
        self.block_points += o.block_points;
    }

    /// Rows whose marker the pass removed.
    fn progress(&self) -> u64 {
        self.rows_compacted + self.rows_clean
    }
}

/// A closed dirty row found in the marker walk.
struct Candidate {
    marker_key: Bytes,
    marker: Option<Bytes>,
    base_time: u32,
}

impl Candidate {
    fn rowkey(&self) -> &[u8] {
        &self.marker_key[1..]
    }
}

/// How one row ended.
enum Outcome {
    Compacted { cells: u64, points: u64 },
    Clean,
    Raced,
}

impl Tsdb {
    /// Compacts at most `max_rows` dirty rows whose hour has closed, resuming the walk of the
    /// dirty markers where the previous call stopped (wrapping at the end). Per-row decode
    /// failures are logged and counted, and leave the row dirty; engine errors are returned.
    pub fn rowcompact(&self, max_rows: usize) -> Result<RowCompactStats> {
        let start = self.inner.rowcompact_cursor.lock().clone();
        let (stats, next) = self.rowcompact_pass(start.as_deref(), max_rows)?;
        *self.inner.rowcompact_cursor.lock() = next;
        Ok(stats)
    }

    /// Compacts every dirty row whose hour has closed, walking all markers, and again while
    /// rows raced with writers and the previous walk made progress. Returns the totals.
    pub fn rowcompact_all(&self) -> Result<RowCompactStats> {
        let mut total = RowCompactStats::default();
        loop {
            let mut round = RowCompactStats::default();
            let mut cursor: Option<Vec<u8>> = None;
            loop {
                let (s, next) = self.rowcompact_pass(cursor.as_deref(), PASS_ROWS)?;
                round.add(&s);
                match next {
                    Some(n) => cursor = Some(n),
                    None => break,
                }
            }
            total.add(&round);
            if round.rows_raced == 0 || round.progress() == 0 {
                return Ok(total);
            }
        }
    }

    /// Starts a thread that runs [`Tsdb::rowcompact`] every `interval`, in passes of a few
    /// hundred rows, until the returned handle is dropped.
    pub fn spawn_rowcompactor(&self, interval: Duration) -> Result<RowCompactor> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let db = self.clone();
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("rowcompact".into())
            .spawn(move || run_background(&db, interval, &s))
            .map_err(|e| Error::InvalidArgument(format!("cannot start rowcompact thread: {e}")))?;
        Ok(RowCompactor {
            stop,
            thread: Some(thread),
        })
    }

    /// One walk of at most `max_rows` closed dirty rows, starting after `start_after` (a marker
    /// key). Returns the stats and the key to resume after, `None` when the walk reached the
    /// end of the markers.
    fn rowcompact_pass(
        &self,
        start_after: Option<&[u8]>,
        max_rows: usize,
    ) -> Result<(RowCompactStats, Option<Vec<u8>>)> {
        let inner = &*self.inner;
        let now_ms = inner.opts.clock.now_ms();
        let grace_ms = u64::try_from(inner.opts.rowcompact_grace.as_millis()).unwrap_or(u64::MAX);
        let mut opts = ScanOptions::prefix(&[meta::DIRTY_PREFIX]);
        if let Some(k) = start_after {
            let mut s = k.to_vec();
            s.push(0);
            opts.start = Some(s);
        }
        let mut candidates = Vec::new();
        let mut next = None;
        for row in inner.db.scan(&inner.meta, &opts)? {
            let row = row?;
            if candidates.len() >= max_rows {
                next = candidates.last().map(|c: &Candidate| c.marker_key.to_vec());
                break;
            }
            let rk = match RowKey::decode(&row.key[1..]) {
                Ok(rk) => rk,
                Err(e) => {
                    tracing::warn!(error = %e, "skipping a bad dirty marker");
                    continue;
                }
            };
            let closes_ms = (u64::from(rk.base_time) + u64::from(ROW_SPAN_SECS))
                .saturating_mul(1000)
                .saturating_add(grace_ms);
            if closes_ms > now_ms {
                continue;
            }
            let marker = row
                .cells
                .iter()
                .find(|c| c.column.as_ref() == meta::DIRTY_COLUMN)
                .map(|c| c.value.clone());
            candidates.push(Candidate {
                marker_key: row.key,
                marker,
                base_time: rk.base_time,
            });
        }
        let mut stats = RowCompactStats::default();
        for c in &candidates {
            stats.rows_examined += 1;
            match self.rowcompact_row(c) {
                Ok(Outcome::Compacted { cells, points }) => {
                    stats.rows_compacted += 1;
                    stats.cells_folded += cells;
                    stats.block_points += points;
                }
                Ok(Outcome::Clean) => stats.rows_clean += 1,
                Ok(Outcome::Raced) => stats.rows_raced += 1,
                Err(e @ (Error::Block(_) | Error::Corruption { .. })) => {
                    tracing::warn!(error = %e, "cannot compact a data row; left dirty");
                    stats.rows_failed += 1;
                }
                Err(e) => return Err(e),
            }
        }
        inner
            .stats
            .rowcompacted(stats.rows_compacted, stats.cells_folded, stats.rows_failed);
        Ok((stats, next))
    }

    fn rowcompact_row(&self, c: &Candidate) -> Result<Outcome> {
        let inner = &*self.inner;
        let key = c.rowkey();
        let row: Option<Row> = inner.db.get_row(&inner.data, key)?;
        let mut batch = WriteBatch::new();
        let mut outcome = Outcome::Clean;
        if let Some(row) = &row {
            let (_, raw) = split_row(&row.cells);
            if !raw.is_empty() {
                let points = decode_row(c.base_time, &row.cells)?;
                let mut block = Vec::new();
                encode_block(&points, &mut block)?;
                batch.put(&inner.data, key, b"", &block);
                for cell in raw {
                    batch.delete(&inner.data, key, &cell.column);
                }
                outcome = Outcome::Compacted {
                    cells: raw.len() as u64,
                    points: points.len() as u64,
                };
            }
        }
        batch.delete_row(&inner.meta, &c.marker_key);
        let _guard = inner.write_lock.lock();
        let marker = inner
            .db
            .get(&inner.meta, &c.marker_key, meta::DIRTY_COLUMN)?;
        if marker != c.marker || inner.db.get_row(&inner.data, key)? != row {
            return Ok(Outcome::Raced);
        }
        inner.db.write(&batch)?;
        Ok(outcome)
    }
}

/// The background compactor started by [`Tsdb::spawn_rowcompactor`]; dropping it stops the
/// thread (after its current pass) and waits for it.
#[derive(Debug)]
pub struct RowCompactor {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for RowCompactor {
    fn drop(&mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::warn!("rowcompact thread panicked");
        }
    }
}

/// Background rows per pass: short passes keep the write lock free most of the time.
const BACKGROUND_PASS_ROWS: usize = 256;

fn run_background(db: &Tsdb, interval: Duration, stop: &(Mutex<bool>, Condvar)) {
    loop {
        {
            let mut stopped = stop.0.lock();
            if !*stopped {
                stop.1.wait_for(&mut stopped, interval);
            }
            if *stopped {
                return;
            }
        }
        loop {
            match db.rowcompact(BACKGROUND_PASS_ROWS) {
                Ok(s) if s.rows_examined as usize >= BACKGROUND_PASS_ROWS && s.progress() > 0 => {}
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "rowcompact pass failed");
                    break;
                }
            }
            if *stop.0.lock() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::ManualClock;
    use crate::point::PointRef;
    use crate::tsdb::TsdbOptions;
    use crate::value::Value;

    const HOUR0: i64 = 1_356_998_400_000;

    fn open(dir: &std::path::Path, clock: Arc<ManualClock>) -> Result<Tsdb> {
        Tsdb::open(
            dir,
            TsdbOptions {
                clock,
                ..TsdbOptions::default()
            },
        )
    }

    fn write(db: &Tsdb, host: &str, ts: i64, v: i64) -> Result<()> {
        let tags = [("host", host)];
        let p = PointRef {
            metric: "m",
            tags: &tags,
            timestamp: ts,
            value: Value::Int(v),
        };
        db.write(&[p]).into_iter().collect()
    }

    #[test]
    fn the_cursor_walks_all_rows_in_small_passes() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let clock = Arc::new(ManualClock::new(HOUR0 as u64));
        let db = open(dir.path(), clock.clone())?;
        for h in 0..10 {
            write(&db, &format!("h{h}"), HOUR0 + h, h)?;
        }
        clock.advance_ms(3_600_000 + 600_000);
        let mut done = 0;
        for _ in 0..20 {
            let s = db.rowcompact(3)?;
            assert!(s.rows_examined <= 3);
            done += s.rows_compacted;
        }
        assert_eq!(done, 10);
        assert_eq!(db.rowcompact_all()?, RowCompactStats::default());
        Ok(())
    }

    #[test]
    fn a_racing_write_leaves_the_row_dirty() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let clock = Arc::new(ManualClock::new(HOUR0 as u64));
        let db = open(dir.path(), clock.clone())?;
        write(&db, "a", HOUR0, 1)?;
        clock.advance_ms(5_000_000);
        let marker_key = meta::key(
            meta::DIRTY_PREFIX,
            &crate::rowkey::encode_rowkey(
                db.inner.index.read().series[0].salt,
                &db.inner.index.read().series[0].tsuid,
                (HOUR0 / 1000) as u32,
            ),
        );
        let marker = db
            .inner
            .db
            .get(&db.inner.meta, &marker_key, meta::DIRTY_COLUMN)?;
        let c = Candidate {
            marker_key: Bytes::from(marker_key),
            marker,
            base_time: (HOUR0 / 1000) as u32,
        };
        // Same write time, so only the row comparison catches it.
        write(&db, "a", HOUR0, 2)?;
        assert!(matches!(db.rowcompact_row(&c)?, Outcome::Raced));
        let s = db.rowcompact_all()?;
        assert_eq!(s.rows_compacted, 1);
        let r = db.read("m", &[], HOUR0, HOUR0 + 10)?;
        assert_eq!(r[0].points, vec![(HOUR0, Value::Int(2))]);
        Ok(())
    }

    #[test]
    fn background_compactor_runs_and_stops() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let clock = Arc::new(ManualClock::new(HOUR0 as u64));
        let db = open(dir.path(), clock.clone())?;
        write(&db, "a", HOUR0, 1)?;
        clock.advance_ms(5_000_000);
        let handle = db.spawn_rowcompactor(Duration::from_millis(5))?;
        let mut left = 1;
        for _ in 0..400 {
            left = db
                .inner
                .db
                .scan(&db.inner.meta, &ScanOptions::prefix(&[meta::DIRTY_PREFIX]))?
                .count();
            if left == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(handle);
        assert_eq!(left, 0);
        Ok(())
    }
}
