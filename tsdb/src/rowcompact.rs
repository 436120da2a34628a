//! The row compactor: folds a closed hour's raw cells into one block cell (`FORMAT.md`).
//!
//! Its work list is the `d` markers of table `meta` (`meta.rs`), written with every data write.
//! A pass walks the markers, takes the rows whose hour has closed
//! (`base_time + 3600 s + grace <= now`), and works through them in batches of
//! `BATCH_ROWS` rows:
//!
//! 1. reads the batch's rows through one snapshot, one range scan per run of rows that share
//!    salt, metric and hour (contiguous in both tables), not one lookup per row;
//! 2. merges each row's block (the empty column) with its raw cells, raw winning, and encodes
//!    the merged points as one block (`block.rs`), outside any lock;
//! 3. under the tsdb write lock, if any engine batch committed since the read (the read's
//!    snapshot is taken under the lock with the engine's batch count), re-reads the rows and
//!    markers the same way; then commits one engine batch for every row whose marker and cells
//!    are unchanged since step 1 (all of them when nothing committed): a delete of
//!    the row (exactly the cells read, since writers wait for this lock), the new block put after
//!    it, and the delete of the marker. A row that changed (a late write or a delete got there
//!    first) is left dirty for the next pass.
//!
//! A row with no raw cell only loses its marker. Passes are idempotent: a crash before a batch
//! commits leaves its rows and markers as they were, and a committed batch is whole.
//!
//! Why batches: compacting row by row pays a lookup before the lock, two more under it, a WAL
//! record and a lock round trip for every row; a batch pays the record and the round trip once,
//! and reads its rows through one snapshot. One row delete replaces what would be a tombstone
//! per folded raw cell, entries the engine would have to write and later compact away.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strata_engine::{Row, ScanOptions, Snapshot, Table, WriteBatch};

use crate::background::{Background, Stop};
use crate::block::encode_block;
use crate::cell::{RowParts, decode_row};
use crate::error::{Error, Result};
use crate::meta;
use crate::rowkey::{ROW_SPAN_SECS, ROWKEY_HEAD_LEN, RowKey, TIME_LEN};
use crate::tsdb::Tsdb;

/// How long the background compactor leaves a dirty closed row alone while a backfill goes on
/// (see `rowcompact_pass`): long enough for the bulk loads it is meant for, short enough that a
/// backfill that never stops still has its rows folded about once a minute.
const BACKFILL_DEFER_MS: u64 = 60_000;

/// Rows per pass of [`Tsdb::rowcompact_all`] and of the background compactor: small enough
/// that a pass does not hold up writers for long, large enough to amortize the marker scan.
const PASS_ROWS: usize = 1024;

/// Rows per engine batch: one batch, one WAL record and one short hold of the write lock per
/// this many rows, instead of one each per row. The rows are read by range scans that seek in
/// every data file once per batch, which dominates the read when a backfill left many files;
/// a larger batch pays that less often, but holds writers up longer when they wrote while it
/// was read (its rows are then read again under the lock).
const BATCH_ROWS: usize = 512;

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
    /// Raw cells and partial blocks folded into main blocks (and deleted).
    pub cells_folded: u64,
    /// Points in the blocks written.
    pub block_points: u64,
    /// Dirty markers the walk read, candidates or not.
    pub markers_walked: u64,
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
        self.markers_walked += o.markers_walked;
    }

    /// Rows whose marker the pass removed.
    fn progress(&self) -> u64 {
        self.rows_compacted + self.rows_clean
    }
}

/// Where the background walk of the dirty markers stands; see [`Tsdb::rowcompact`].
#[derive(Debug, Clone, Default)]
pub(crate) struct RowCompactCursor {
    /// The marker key to resume after; `None` to start from the first.
    next: Option<Vec<u8>>,
    /// Set when the last walk from the first marker to the end found no row to compact.
    idle: Option<Idle>,
}

/// A walk that found nothing to compact: the next one can be skipped while no commit has
/// written a marker since, and until the earliest time a marker it passed over comes due.
/// With a million live series that is a million markers walked every tick for nothing, most
/// of every hour.
#[derive(Debug, Clone, Copy)]
struct Idle {
    /// [`crate::store::WriteState::markers_written`] when the walk started.
    markers_written: u64,
    /// When the first marker passed over may become a candidate; `None` when there was none.
    due_ms: Option<u64>,
}

/// Where a pass of the marker walk stopped.
struct PassEnd {
    /// The marker key to resume after; `None` when the walk reached the end of the markers.
    next: Option<Vec<u8>>,
    /// The earliest time a marker the pass passed over may become a candidate.
    due_ms: Option<u64>,
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

/// What compacting one row does, or did.
enum Outcome {
    /// Put `block` (of `points` points, folding `cells` raw cells) in place of the row.
    Compacted {
        block: Vec<u8>,
        cells: u64,
        points: u64,
    },
    /// Nothing to fold: only the marker goes.
    Clean,
}

/// A batch of rows read and encoded, waiting for its commit.
struct BatchRead {
    /// The rows as read, aligned with the batch's candidates.
    rows: Vec<Option<Row>>,
    /// What to write per row; `None` for a row that failed to decode.
    prepared: Vec<Option<Outcome>>,
    /// The engine's committed batch count when the rows were read.
    batches_before: u64,
}

impl Tsdb {
    /// Compacts at most `max_rows` dirty rows whose hour has closed, resuming the walk of the
    /// dirty markers where the previous call stopped (wrapping at the end). Per-row decode
    /// failures are logged and counted, and leave the row dirty; engine errors are returned.
    pub fn rowcompact(&self, max_rows: usize) -> Result<RowCompactStats> {
        let mut cursor = self.rowcompact_cursor().lock().clone();
        let settle = self.options().rowcompact_settle;
        // A walk from the start may be skipped if the last one found nothing to do: until a
        // commit writes a marker or a marker it saw comes due, this one would find nothing too.
        let written = match cursor.next {
            None => Some(self.markers_written()?),
            Some(_) => None,
        };
        if let (Some(w), Some(idle)) = (written, cursor.idle)
            && idle.markers_written == w
            && idle
                .due_ms
                .is_none_or(|t| self.options().clock.now_ms() < t)
        {
            return Ok(RowCompactStats::default());
        }
        let (stats, end) = self.rowcompact_pass(cursor.next.as_deref(), max_rows, settle)?;
        cursor.idle = match written {
            Some(markers_written) if end.next.is_none() && stats.rows_examined == 0 => Some(Idle {
                markers_written,
                due_ms: end.due_ms,
            }),
            _ => None,
        };
        cursor.next = end.next;
        *self.rowcompact_cursor().lock() = cursor;
        Ok(stats)
    }

    /// The count of commits that wrote dirty markers, once every commit counted in it can be
    /// read: a walk of the markers started after this sees all of them.
    fn markers_written(&self) -> Result<u64> {
        let store = self.store();
        let state = store.writes.lock();
        store.db.settle()?;
        Ok(state.markers_written)
    }

    /// Compacts every dirty row whose hour has closed, walking all markers, and again while
    /// rows raced with writers and the previous walk made progress. Returns the totals.
    pub fn rowcompact_all(&self) -> Result<RowCompactStats> {
        self.rowcompact_all_with_progress(&mut |_| {})
    }

    /// [`Tsdb::rowcompact_all`], telling `progress` the running totals after each pass.
    pub fn rowcompact_all_with_progress(
        &self,
        progress: &mut dyn FnMut(&RowCompactStats),
    ) -> Result<RowCompactStats> {
        let mut total = RowCompactStats::default();
        loop {
            let mut round = RowCompactStats::default();
            let mut cursor: Option<Vec<u8>> = None;
            loop {
                let (s, end) =
                    self.rowcompact_pass(cursor.as_deref(), PASS_ROWS, Duration::ZERO)?;
                round.add(&s);
                let mut so_far = total;
                so_far.add(&round);
                progress(&so_far);
                match end.next {
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
        let db = self.clone();
        let thread = Background::spawn("rowcompact", move |stop| {
            run_background(&db, interval, stop)
        })?;
        Ok(RowCompactor { _thread: thread })
    }

    /// One walk of at most `max_rows` closed dirty rows, starting after `start_after` (a marker
    /// key). Returns the stats and where the walk ended.
    fn rowcompact_pass(
        &self,
        start_after: Option<&[u8]>,
        max_rows: usize,
        settle: Duration,
    ) -> Result<(RowCompactStats, PassEnd)> {
        let store = self.store();
        let opts = self.options();
        let now_ms = opts.clock.now_ms();
        let grace_ms = u64::try_from(opts.rowcompact_grace.as_millis()).unwrap_or(u64::MAX);
        let settle_ms = u64::try_from(settle.as_millis()).unwrap_or(u64::MAX);
        let backfilling =
            settle_ms > 0 && self.last_closed_write_ms().saturating_add(settle_ms) > now_ms;
        let mut opts = ScanOptions::prefix(&[meta::DIRTY_PREFIX]);
        if let Some(k) = start_after {
            let mut s = k.to_vec();
            s.push(0);
            opts.start = Some(s);
        }
        let mut candidates = Vec::new();
        let mut next = None;
        // The earliest time a marker passed over below can become a candidate.
        let mut due_ms: Option<u64> = None;
        let mut due = |t: u64| due_ms = Some(due_ms.map_or(t, |d| d.min(t)));
        let backfill_ends_ms = self.last_closed_write_ms().saturating_add(settle_ms);
        let mut walked = 0;
        for row in store.db.scan(&store.meta, &opts)? {
            let row = row?;
            walked += 1;
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
                due(closes_ms);
                continue;
            }
            let marker = row
                .cells
                .iter()
                .find(|c| c.column.as_ref() == meta::DIRTY_COLUMN)
                .map(|c| c.value.clone());
            // A closed row that was dirtied moments ago is most likely still being filled (a
            // backfill writes an hour's points within a second or so): folding it now would
            // only mean folding it again, with its earlier block, when its last points land.
            let dirtied_ms = marker
                .as_deref()
                .and_then(|m| <[u8; 8]>::try_from(m).ok())
                .map_or(0, u64::from_be_bytes);
            if settle_ms > 0 && dirtied_ms.saturating_add(settle_ms) > now_ms {
                due(dirtied_ms.saturating_add(settle_ms));
                continue;
            }
            // A marker keeps the time its row was first dirtied, not the last write's, so
            // while a backfill goes on (writes to closed rows within `settle`) a row is left
            // to it for up to `BACKFILL_DEFER` instead: folding it now would fold it again and
            // again as its points keep coming.
            if backfilling && dirtied_ms.saturating_add(BACKFILL_DEFER_MS) > now_ms {
                due(dirtied_ms
                    .saturating_add(BACKFILL_DEFER_MS)
                    .min(backfill_ends_ms));
                continue;
            }
            candidates.push(Candidate {
                marker_key: row.key,
                marker,
                base_time: rk.base_time,
            });
        }
        let mut stats = RowCompactStats {
            markers_walked: walked,
            ..RowCompactStats::default()
        };
        for chunk in candidates.chunks(BATCH_ROWS) {
            self.rowcompact_batch(chunk, &mut stats)?;
        }
        self.counters()
            .rowcompacted(stats.rows_compacted, stats.cells_folded, stats.rows_failed);
        Ok((stats, PassEnd { next, due_ms }))
    }

    /// Compacts the rows of `chunk` (sorted by marker key) in one engine batch: reads them
    /// through one snapshot, encodes their blocks outside any lock, then commits under the write
    /// lock the rows that did not change meanwhile.
    fn rowcompact_batch(&self, chunk: &[Candidate], stats: &mut RowCompactStats) -> Result<()> {
        let read = self.rowcompact_read(chunk, stats)?;
        self.rowcompact_commit(chunk, read, stats)
    }

    /// Reads and encodes the rows of `chunk` (steps 1 and 2 of the module doc).
    fn rowcompact_read(
        &self,
        chunk: &[Candidate],
        stats: &mut RowCompactStats,
    ) -> Result<BatchRead> {
        let store = self.store();
        // Every change to the data and meta tables commits under the write lock, so a snapshot
        // taken under it (once the batches queued before are applied) together with the
        // engine's count of committed batches tells, later under the lock again, whether
        // anything at all was written in between.
        let (snap, batches_before) = {
            let _guard = store.writes.lock();
            store.db.settle()?;
            (store.db.snapshot(), store.db.stats().batches_written)
        };
        let rows = read_rows(&snap, &store.data, chunk, Candidate::rowkey)?;
        drop(snap);
        let mut prepared = Vec::with_capacity(chunk.len());
        for (c, row) in chunk.iter().zip(&rows) {
            stats.rows_examined += 1;
            match prepare_row(c, row.as_ref()) {
                Ok(p) => prepared.push(Some(p)),
                Err(e @ (Error::Block(_) | Error::Corruption { .. })) => {
                    tracing::warn!(error = %e, "cannot compact a data row; left dirty");
                    stats.rows_failed += 1;
                    prepared.push(None);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(BatchRead {
            rows,
            prepared,
            batches_before,
        })
    }

    /// Commits what [`Tsdb::rowcompact_read`] prepared for the rows that did not change since
    /// (step 3 of the module doc).
    fn rowcompact_commit(
        &self,
        chunk: &[Candidate],
        read: BatchRead,
        stats: &mut RowCompactStats,
    ) -> Result<()> {
        let store = self.store();
        let BatchRead {
            rows,
            prepared,
            batches_before,
        } = read;
        if prepared.iter().all(Option::is_none) {
            return Ok(());
        }
        let mut guard = store.writes.lock();
        store.db.settle()?;
        // Nothing committed since the read (the common case when ingest is quiet): the rows
        // and markers are as read. Otherwise re-read them and keep only the unchanged rows.
        let recheck = if store.db.stats().batches_written == batches_before {
            None
        } else {
            let snap = store.db.snapshot();
            Some((
                read_rows(&snap, &store.data, chunk, Candidate::rowkey)?,
                read_rows(&snap, &store.meta, chunk, |c| &c.marker_key)?,
            ))
        };
        let mut batch = WriteBatch::new();
        let mut done = RowCompactStats::default();
        for (i, c) in chunk.iter().enumerate() {
            let Some(p) = &prepared[i] else {
                continue;
            };
            if let Some((now_rows, markers)) = &recheck {
                let marker = markers[i].as_ref().and_then(|r| {
                    r.cells
                        .iter()
                        .find(|cell| cell.column.as_ref() == meta::DIRTY_COLUMN)
                        .map(|cell| cell.value.clone())
                });
                if marker != c.marker || now_rows[i] != rows[i] {
                    done.rows_raced += 1;
                    continue;
                }
            }
            let key = c.rowkey();
            match p {
                Outcome::Compacted {
                    block,
                    cells,
                    points,
                } => {
                    // The row is exactly what was read (checked just above, and writers wait
                    // for this lock), so one row delete removes exactly the folded raw cells;
                    // the block put after it in the same batch survives it.
                    batch.delete_row(&store.data, key);
                    batch.put(&store.data, key, b"", block);
                    done.rows_compacted += 1;
                    done.cells_folded += cells;
                    done.block_points += points;
                }
                Outcome::Clean => done.rows_clean += 1,
            }
            batch.delete_row(&store.meta, &c.marker_key);
        }
        guard.markers_deleted();
        store.db.write(&batch)?;
        drop(guard);
        stats.add(&done);
        Ok(())
    }
}

/// Decodes a row read for compaction and encodes its block, if it has raw cells to fold.
fn prepare_row(c: &Candidate, row: Option<&Row>) -> Result<Outcome> {
    let Some(row) = row else {
        return Ok(Outcome::Clean);
    };
    let parts = RowParts::split(&row.cells)?;
    if parts.raw.is_empty() && parts.partials.is_empty() {
        return Ok(Outcome::Clean);
    }
    let points = decode_row(c.base_time, &row.cells)?;
    let mut block = Vec::new();
    encode_block(&points, &mut block)?;
    Ok(Outcome::Compacted {
        block,
        cells: (parts.raw.len() + parts.partials.len()) as u64,
        points: points.len() as u64,
    })
}

/// Reads the rows `key(c)` of `chunk` (sorted by key) from `table`, aligned with `chunk`.
///
/// Candidates whose rowkeys share the 8-byte head (salt, metric, base time) form one
/// contiguous key range holding only rows of that head, in `meta` as in the data table, so
/// each such group is one range scan with a row filter instead of one lookup per row.
fn read_rows(
    snap: &Snapshot,
    table: &Table,
    chunk: &[Candidate],
    key: impl Fn(&Candidate) -> &[u8],
) -> Result<Vec<Option<Row>>> {
    let mut out: Vec<Option<Row>> = (0..chunk.len()).map(|_| None).collect();
    let mut i = 0;
    while i < chunk.len() {
        let n = 1 + chunk[i..]
            .windows(2)
            .take_while(|w| same_scan(&w[0], &w[1]))
            .count();
        let group = &chunk[i..i + n];
        if n == 1 {
            // Read once, to be rewritten (as below).
            out[i] = snap.get_row_with(table, key(&group[0]), true)?;
        } else {
            let mut stop = key(&group[n - 1]).to_vec();
            stop.push(0);
            let mut opts = ScanOptions::range(key(&group[0]), &stop);
            // The rows are read once, to be rewritten: their blocks would only push out the
            // ones queries use.
            opts.skip_cache_fill = true;
            let wanted: HashSet<Vec<u8>> = group.iter().map(|c| key(c).to_vec()).collect();
            opts.row_filter = Some(Arc::new(move |k: &[u8]| wanted.contains(k)));
            for row in snap.scan(table, &opts)? {
                let row = row?;
                if let Ok(j) = group.binary_search_by(|c| key(c).cmp(&row.key[..])) {
                    out[i + j] = Some(row);
                }
            }
        }
        i += n;
    }
    Ok(out)
}

/// Whether the rows of `a` and of `b`, next in key order, are read in one scan: both of one
/// metric in one salt bucket, and of the same hour or the next. Between them then lie only rows
/// of those hours, all of them dirty after a backfill (which dirties hour after hour of every
/// series), and a few when the compactor is behind live writes. A scan per hour read each
/// file's block again for the next hour's rows, mostly the same block.
fn same_scan(a: &Candidate, b: &Candidate) -> bool {
    const METRIC_END: usize = ROWKEY_HEAD_LEN - TIME_LEN;
    let (ka, kb) = (a.rowkey(), b.rowkey());
    ka.len() >= ROWKEY_HEAD_LEN
        && kb.len() >= ROWKEY_HEAD_LEN
        && ka[..METRIC_END] == kb[..METRIC_END]
        && (b.base_time == a.base_time
            || Some(b.base_time) == a.base_time.checked_add(ROW_SPAN_SECS))
}

/// The background compactor started by [`Tsdb::spawn_rowcompactor`]; dropping it stops the
/// thread (after its current pass) and waits for it.
#[derive(Debug)]
pub struct RowCompactor {
    _thread: Background,
}

/// Background rows per pass: a few batches, then a fresh look at the markers.
const BACKGROUND_PASS_ROWS: usize = 2048;

/// The wait after a background pass failed in the engine (a full disk, say), doubling with
/// each failure in a row up to [`RETRY_MAX`] and reset by a pass that works: a disk that has
/// space again is used within seconds, and a lasting failure is logged every 10 s, not in a
/// loop. A failed pass commits nothing, so running it again is safe.
const RETRY_FIRST: Duration = Duration::from_millis(100);
/// The longest wait between background passes that fail.
const RETRY_MAX: Duration = Duration::from_secs(10);

fn run_background(db: &Tsdb, interval: Duration, stop: &Stop) {
    let mut retry: Option<Duration> = None;
    loop {
        if stop.wait(retry.unwrap_or(interval)) {
            return;
        }
        loop {
            match db.rowcompact(BACKGROUND_PASS_ROWS) {
                Ok(s) => {
                    retry = None;
                    if (s.rows_examined as usize) < BACKGROUND_PASS_ROWS || s.progress() == 0 {
                        break;
                    }
                }
                Err(e) => {
                    let wait = retry.map_or(RETRY_FIRST, |w| (w * 2).min(RETRY_MAX));
                    retry = Some(wait);
                    db.counters().rowcompact_error();
                    tracing::warn!(
                        error = %e,
                        retry_in_ms = wait.as_millis() as u64,
                        "rowcompact pass failed; retrying"
                    );
                    break;
                }
            }
            if stop.is_stopped() {
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

    /// A database in a new directory (kept alive by the caller), with its clock at `HOUR0`.
    fn fresh() -> Result<(tempfile::TempDir, Arc<ManualClock>, Tsdb)> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let clock = Arc::new(ManualClock::new(HOUR0 as u64));
        let db = Tsdb::open(
            dir.path(),
            TsdbOptions {
                clock: clock.clone(),
                ..TsdbOptions::default()
            },
        )?;
        Ok((dir, clock, db))
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
        let (_dir, clock, db) = fresh()?;
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

    /// A walk that found nothing to do is not repeated until a marker is written or one it
    /// passed over comes due.
    #[test]
    fn an_idle_walk_is_not_repeated() -> Result<()> {
        let (_dir, clock, db) = fresh()?;
        write(&db, "a", HOUR0, 1)?;
        write(&db, "b", HOUR0, 1)?;
        let s = db.rowcompact(256)?;
        assert_eq!((s.markers_walked, s.rows_examined), (2, 0));
        clock.advance_ms(60_000);
        let s = db.rowcompact(256)?;
        assert_eq!(s.markers_walked, 0, "nothing changed: no walk");
        // A write to a row already marked writes no marker: still no walk.
        write(&db, "a", HOUR0 + 1000, 2)?;
        assert_eq!(db.rowcompact(256)?.markers_walked, 0);
        // A new row's marker is walked.
        write(&db, "c", HOUR0, 1)?;
        let s = db.rowcompact(256)?;
        assert_eq!((s.markers_walked, s.rows_examined), (3, 0));
        assert_eq!(db.rowcompact(256)?.markers_walked, 0);
        // The hour has closed but its grace runs: still nothing due.
        clock.advance_ms(3_600_000);
        assert_eq!(db.rowcompact(256)?.markers_walked, 0);
        // Once the grace has run out, the rows come due without any write.
        clock.advance_ms(600_000);
        let s = db.rowcompact(256)?;
        assert_eq!((s.markers_walked, s.rows_compacted), (3, 3));
        let s = db.rowcompact(256)?;
        assert_eq!(s.markers_walked, 0);
        Ok(())
    }

    /// The candidate of the only dirty row.
    fn only_candidate(db: &Tsdb) -> Result<Candidate> {
        let marker_key = meta::key(
            meta::DIRTY_PREFIX,
            &crate::rowkey::encode_rowkey(
                db.index().read().series[0].salt,
                &db.index().read().series[0].tsuid,
                (HOUR0 / 1000) as u32,
            ),
        );
        let marker = db
            .store()
            .db
            .get(&db.store().meta, &marker_key, meta::DIRTY_COLUMN)?;
        assert!(marker.is_some());
        Ok(Candidate {
            marker_key: Bytes::from(marker_key),
            marker,
            base_time: (HOUR0 / 1000) as u32,
        })
    }

    #[test]
    fn a_racing_write_leaves_the_row_dirty() -> Result<()> {
        let (_dir, clock, db) = fresh()?;
        write(&db, "a", HOUR0, 1)?;
        clock.advance_ms(5_000_000);
        // A late write at the same instant, with the clock standing still: its marker has the
        // same value as the one read, so only the row comparison catches the race.
        write(&db, "a", HOUR0, 1)?;
        let chunk = [only_candidate(&db)?];
        let mut stats = RowCompactStats::default();
        let read = db.rowcompact_read(&chunk, &mut stats)?;
        write(&db, "a", HOUR0, 2)?;
        db.rowcompact_commit(&chunk, read, &mut stats)?;
        assert_eq!((stats.rows_raced, stats.rows_compacted), (1, 0));
        let s = db.rowcompact_all()?;
        assert_eq!(s.rows_compacted, 1);
        let r = db.read(&crate::ReadRequest::metric("m", &[], HOUR0, HOUR0 + 10))?;
        assert_eq!(r[0].points, vec![(HOUR0, Value::Int(2))]);
        Ok(())
    }

    #[test]
    fn a_quiet_batch_commits_every_row() -> Result<()> {
        let (_dir, clock, db) = fresh()?;
        write(&db, "a", HOUR0, 1)?;
        write(&db, "a", HOUR0 + 5, 2)?;
        clock.advance_ms(5_000_000);
        let chunk = [only_candidate(&db)?];
        let mut stats = RowCompactStats::default();
        let read = db.rowcompact_read(&chunk, &mut stats)?;
        db.rowcompact_commit(&chunk, read, &mut stats)?;
        assert_eq!((stats.rows_compacted, stats.cells_folded), (1, 2));
        assert_eq!(db.rowcompact_all()?, RowCompactStats::default());
        let r = db.read(&crate::ReadRequest::metric("m", &[], HOUR0, HOUR0 + 10))?;
        assert_eq!(
            r[0].points,
            vec![(HOUR0, Value::Int(1)), (HOUR0 + 5, Value::Int(2))]
        );
        Ok(())
    }

    /// A row that a backfill keeps writing is not folded every time its marker settles (the
    /// marker keeps its first write's time), but once the backfill stops, or after
    /// `BACKFILL_DEFER_MS` if it never does.
    #[test]
    fn rows_of_a_running_backfill_wait_for_it() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let clock = Arc::new(ManualClock::new(HOUR0 as u64 + 5_000_000));
        let db = Tsdb::open(
            dir.path(),
            TsdbOptions {
                clock: clock.clone(),
                rowcompact_settle: Duration::from_secs(5),
                ..TsdbOptions::default()
            },
        )?;
        // Points of a closed hour, a second apart, for 20 s: a backfill.
        for i in 0..20 {
            write(&db, "a", HOUR0 + i * 1000, i)?;
            clock.advance_ms(1_000);
            let s = db.rowcompact(1024)?;
            assert_eq!(
                s.rows_compacted, 0,
                "folded while the backfill ran, at {i} s"
            );
        }
        // Quiet for the settle time: folded once.
        clock.advance_ms(5_000);
        assert_eq!(db.rowcompact(1024)?.rows_compacted, 1);
        // A backfill that never stops has its rows folded once the deferral runs out.
        let start = strata_engine::Clock::now_ms(&*clock);
        let mut folded_at = None;
        for i in 0..100 {
            write(&db, "b", HOUR0 + i * 1000, i)?;
            clock.advance_ms(1_000);
            if db.rowcompact(1024)?.rows_compacted > 0 {
                folded_at = Some(strata_engine::Clock::now_ms(&*clock) - start);
                break;
            }
        }
        assert!(
            folded_at.is_some_and(|t| (BACKFILL_DEFER_MS..=BACKFILL_DEFER_MS + 2_000).contains(&t)),
            "{folded_at:?}"
        );
        Ok(())
    }

    #[test]
    fn background_compactor_runs_and_stops() -> Result<()> {
        let (_dir, clock, db) = fresh()?;
        write(&db, "a", HOUR0, 1)?;
        clock.advance_ms(5_000_000);
        let handle = db.spawn_rowcompactor(Duration::from_millis(5))?;
        let mut left = 1;
        for _ in 0..400 {
            left = db
                .store()
                .db
                .scan(
                    &db.store().meta,
                    &ScanOptions::prefix(&[meta::DIRTY_PREFIX]),
                )?
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
