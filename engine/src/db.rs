//! The database handle: an LSM tree of memtables and SST files behind a write-ahead log.
//!
//! [`Db`] is the facade; the work is done by `open.rs` (recovery), `write.rs` (group commit,
//! apply, freeze, stalls), `flush.rs`, `compact.rs` and `snapshot.rs`, on the state in
//! `inner.rs` and `state.rs`, with the background threads of `worker.rs`. A background thread
//! flushes frozen memtables, oldest first, to level-0 SST files (one per table), records them
//! with the WAL position they cover in the manifest (`manifest.rs`), and then deletes the
//! covered segments. After each flush, a second thread runs the compactions the leveled
//! planner (`compaction.rs`) asks for.
//!
//! ## Failures
//!
//! - A write the WAL cannot take is refused with the error; a failed WAL fsync or write fails
//!   the WAL, and with it every write until a restart (`Error::WalFailed`, the `## Failures`
//!   rules of `wal.rs`; `EngineStats::write_failed`). Reads go on in both cases.
//! - A flush or compaction that fails (a full disk, an I/O error) changes nothing that a
//!   reader or the next open sees: its new SST files are deleted, and the manifest in place
//!   is the one before. When the manifest's store failed at or after its rename, so that the
//!   file on disk may name the new SSTs, those are kept until the next manifest store and
//!   deleted then. The frozen memtable (or the compaction's inputs) stays, and the background
//!   thread runs the work again after 100 ms, doubling the wait with each failure in a row up
//!   to 10 s (`EngineStats::flush_errors`, `compaction_errors`), so it resumes by itself
//!   once the disk has space. Meanwhile writers stall on the frozen memtables as usual, which
//!   bounds memory, and a write that stalled for `WRITE_STALL_LIMIT` with no flush finishing
//!   is refused (`Error::Backpressure`), so that clients hear of it.
//! - If the WAL cannot start a new segment when the active memtable freezes, the memtable
//!   stays active; a write that finds it at twice its size freezes it first, and is refused
//!   with the error if that fails again.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::inner::Inner;
use crate::key::EntryKind;
use crate::options::{DbOptions, SyncPolicy, TableOptions};
use crate::scan::{Row, RowIter, ScanOptions};
use crate::snapshot::{Snapshot, read_cell};
use crate::stats::{EngineStats, LevelStats};
use crate::table::Table;
use crate::wal::Entry as WalEntry;

/// A batch to commit: copied into the WAL, or its buffer taken by it.
enum Batch<'a> {
    Copied(&'a WriteBatch),
    Taken(&'a mut WriteBatch),
}

impl Batch<'_> {
    fn is_empty(&self) -> bool {
        match self {
            Batch::Copied(b) => b.is_empty(),
            Batch::Taken(b) => b.is_empty(),
        }
    }
}

/// An open database. Cheap to clone; every clone shares the same state.
#[derive(Debug, Clone)]
pub struct Db {
    pub(crate) inner: Arc<Inner>,
}

impl Db {
    /// Opens (creating if needed) the database in `dir`.
    pub fn open(dir: impl AsRef<std::path::Path>, opts: DbOptions) -> Result<Db> {
        crate::open::open(dir.as_ref(), opts, false).map(|inner| Db { inner })
    }

    /// Opens a read-only follower of the object-store prefix in `opts.storage` (which must be
    /// `Storage::Object`): it reads the newest manifest version, serves reads from its files,
    /// and takes no writes (`Error::ReadOnly`), flushes or compactions. `dir` holds its local
    /// state and must not be a writer's directory. [`Db::refresh`] follows the writer.
    pub fn open_read_only(dir: impl AsRef<std::path::Path>, opts: DbOptions) -> Result<Db> {
        crate::open::open(dir.as_ref(), opts, true).map(|inner| Db { inner })
    }

    /// A follower reads the newest manifest version and, if it is newer than its own, swaps in
    /// its files: new ones are opened (fetched through the disk cache), removed ones dropped.
    /// True if the file set changed. On a writer it does nothing.
    pub fn refresh(&self) -> Result<bool> {
        Ok(self.inner.refresh()?.is_some())
    }

    /// [`Db::refresh`], telling which tables it changed: `None` when the file set did not
    /// move, else the tables that gained or lost a file (flushed or compacted; possibly
    /// none), so a caller that derives state from some tables reloads it only when theirs
    /// changed.
    pub fn refresh_changes(&self) -> Result<Option<Vec<Table>>> {
        let Some(ids) = self.inner.refresh()? else {
            return Ok(None);
        };
        let tables = self.inner.tables.read();
        Ok(Some(
            tables
                .values()
                .filter(|t| ids.contains(&t.id()))
                .cloned()
                .collect(),
        ))
    }

    /// Opens the table `name`, creating it with `opts` if it does not exist.
    pub fn open_table(&self, name: &str, opts: TableOptions) -> Result<Table> {
        if name.is_empty() || name.len() > 255 {
            return Err(Error::InvalidArgument(format!("bad table name {name:?}")));
        }
        let mut tables = self.inner.tables.write();
        if let Some(t) = tables.get(name) {
            self.inner.set_table_options(t.id, opts);
            return Ok(t.clone());
        }
        self.inner.fs.check_writable()?;
        let id = tables.values().map(Table::id).max().unwrap_or(0) + 1;
        // A table's creation is always durable before the table is handed out. Its record
        // changes no cell, so the group's apply skips it; the table map is updated here.
        self.inner
            .commit(WalEntry::Table { id, name }, true, false)
            .map(|stranded| self.inner.wake_applier(stranded))?;
        let t = Table::new(id, name.into());
        tables.insert(name.to_string(), t.clone());
        self.inner.set_table_options(id, opts);
        Ok(t)
    }

    /// The table `name`, if it exists.
    pub fn table(&self, name: &str) -> Option<Table> {
        self.inner.tables.read().get(name).cloned()
    }

    /// Applies `batch` atomically. It is durable according to the database's sync policy.
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        self.write_inner(batch, self.inner.opts.sync == SyncPolicy::Always, false)
    }

    /// Applies `batch` atomically and fsyncs the WAL before returning, whatever the policy.
    /// Over an object store it also returns only once the batch is in the bucket: in a flushed
    /// file that a manifest version names. Synced writes that wait at once share one flush.
    pub fn write_sync(&self, batch: &WriteBatch) -> Result<()> {
        self.write_inner(batch, true, false)
    }

    /// Like [`Db::write`], but returns once the batch waits in the commit queue, unless the
    /// queue is long: the batch is written to the WAL and becomes visible shortly after, in
    /// the order of commits, applied by the commit leader of the moment or by the database's
    /// apply thread. Meanwhile the caller goes on, say to parse its next batch. Reads see it
    /// for sure only after [`Db::settle`] (or any later [`Db::write`] or [`Db::write_sync`],
    /// which wait for everything queued before them). Under the sync policy `always` this is
    /// [`Db::write`].
    ///
    /// An error is returned only for a batch refused when queued; a later WAL failure fails
    /// every later write instead.
    ///
    /// A batch of 64 KiB or more is not copied: the WAL keeps its buffer and gives it the
    /// buffer of one written before. Either way `batch` is left empty, whether or not the
    /// write succeeds.
    pub fn write_queued(&self, batch: &mut WriteBatch) -> Result<()> {
        let sync = self.inner.opts.sync == SyncPolicy::Always;
        let written = self.write_checked(Batch::Taken(batch), sync, true, true);
        batch.clear();
        written
    }

    /// [`Db::write_queued`] for a caller that calls [`Db::settle`] (or [`Db::wait_durable`])
    /// right after: the batches left with no commit leader are left to that call, which
    /// leads them itself, instead
    /// of waking the apply thread to lead them while the caller waits for it (a wake-up and
    /// two context switches per call, with a core idle meanwhile).
    pub fn write_queued_before_settle(&self, batch: &mut WriteBatch) -> Result<()> {
        let sync = self.inner.opts.sync == SyncPolicy::Always;
        let written = self.write_checked(Batch::Taken(batch), sync, true, false);
        batch.clear();
        written
    }

    /// Waits until every batch queued by [`Db::write_queued`] before the call is in the
    /// memtables, and fails if one it waited for failed (one that failed before the call
    /// failed the WAL, which refuses every write after it).
    pub fn settle(&self) -> Result<()> {
        let inner = &self.inner;
        let stranded = inner
            .wal
            .settle(&mut |payloads| inner.apply_group(payloads))?;
        inner.wake_applier(stranded);
        Ok(())
    }

    /// Waits until every batch queued by [`Db::write_queued`] before the call is in the WAL,
    /// durable as the sync policy says, though perhaps not yet in the memtables: the apply
    /// thread applies them. A read that starts after it returns sees them all the same, as
    /// reads first wait for whatever the WAL holds to be applied. So a committer can answer
    /// while its batch is applied. Fails if one it waited for failed.
    pub fn wait_durable(&self) -> Result<()> {
        let inner = &self.inner;
        let stranded = inner
            .wal
            .wait_written(&mut |payloads| inner.apply_group(payloads))?;
        inner.wake_applier(stranded);
        Ok(())
    }

    /// Waits until every batch in the WAL is applied, for a read to see what was acknowledged
    /// before it started (see [`Db::wait_durable`]).
    fn catch_up(&self) {
        let inner = &self.inner;
        inner.wal.catch_up(&|| inner.applier.wake());
    }

    fn write_inner(&self, batch: &WriteBatch, sync: bool, queue: bool) -> Result<()> {
        self.write_checked(Batch::Copied(batch), sync, queue, true)
    }

    /// Commits `batch`; `wake`: wake the apply thread for batches left with no leader.
    fn write_checked(&self, batch: Batch<'_>, sync: bool, queue: bool, wake: bool) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        self.inner.fs.check_writable()?;
        if self.inner.stall_if_needed()? {
            self.inner.freeze_overgrown()?;
        }
        let stranded = match batch {
            Batch::Copied(b) => self.inner.commit(WalEntry::Batch(b), sync, queue)?,
            Batch::Taken(b) => self.inner.commit_batch(b, sync, queue)?,
        };
        self.inner.wake_applier(stranded && wake);
        if sync {
            if self.inner.fs.sync_needs_flush() {
                // At least this batch's sequence number: it is applied by now.
                self.flush_through(self.inner.visible_seq.load(Ordering::Acquire))?;
            }
            // Over an object store: no synced write is acknowledged once a newer writer has
            // taken over the prefix.
            self.inner.fs.confirm_writer()?;
        }
        Ok(())
    }

    /// Flushes unless a flush since has already put every entry through `seq` in a file the
    /// manifest names. Callers that wait on the manifest's lock behind a flush find their
    /// batches flushed by it, which makes concurrent synced writes share flushes.
    fn flush_through(&self, seq: u64) -> Result<()> {
        let inner = &self.inner;
        let mut manifest = inner.manifest.lock();
        if manifest.last_seq >= seq {
            return Ok(());
        }
        // Older frozen memtables first: while they cannot be flushed (the store is out of
        // reach), freezing the active one as well would add a frozen memtable per call, and
        // writers would stall on their number long before memory runs short.
        while inner.flush_oldest_locked(&mut manifest)? {}
        let frozen = inner
            .wal
            .quiesce(&mut |payloads| inner.apply_group(payloads), || {
                inner.freeze()
            });
        // Batches queued while the memtable froze wait for the apply thread.
        inner.wake_applier(true);
        frozen?;
        while inner.flush_oldest_locked(&mut manifest)? {}
        Ok(())
    }

    /// Whether a [`Db::write`] now would wait: for an fsync (policy `always`), or for memtable
    /// flushes or level-0 compactions to catch up. A caller on an async runtime can run a write
    /// in place when not, and hand its thread over when so. It is a hint: a stall can start
    /// between this call and the write.
    pub fn write_may_block(&self) -> bool {
        self.inner.opts.sync == SyncPolicy::Always || self.inner.must_stall()
    }

    /// Fsyncs the WAL now, with every batch queued before the call.
    pub fn sync_wal(&self) -> Result<()> {
        self.settle()?;
        self.inner.wal.sync()
    }

    /// A consistent read view of the database as of now.
    pub fn snapshot(&self) -> Snapshot {
        self.catch_up();
        let state = self.inner.state.read();
        let seq = self.inner.visible_seq.load(Ordering::Acquire);
        let mut mems = vec![state.active.clone()];
        mems.extend(state.frozen.iter().rev().map(|f| f.mem.clone()));
        Snapshot {
            seq,
            mems,
            files: state.files.clone(),
            ttls: self.inner.ttls.read().clone(),
            now_ms: self.inner.opts.clock.now_ms(),
        }
    }

    /// Reads one cell.
    pub fn get(&self, table: &Table, row: &[u8], column: &[u8]) -> Result<Option<Bytes>> {
        // A snapshot without the allocations: the state is immutable once published, so
        // holding an `Arc` to it is as consistent as a `Snapshot`.
        self.catch_up();
        let (state, seq) = {
            let guard = self.inner.state.read();
            (
                guard.clone(),
                self.inner.visible_seq.load(Ordering::Acquire),
            )
        };
        let expired = self
            .inner
            .ttls
            .read()
            .get(&table.id)
            .map(|ttl| self.inner.opts.clock.now_ms().saturating_sub(*ttl));
        let frozen = state.frozen.iter().rev().map(|f| &f.mem);
        for m in std::iter::once(&state.active).chain(frozen) {
            if let Some(f) = m.get(table.id, row, column, seq) {
                let live = f.kind == EntryKind::Put && expired.is_none_or(|t| f.write_ms >= t);
                return Ok(live.then_some(f.value));
            }
        }
        read_cell(seq, &[], &state.files, expired, table.id, row, column)
    }

    /// Reads one row with all its cells; `None` if the row has no visible cell.
    pub fn get_row(&self, table: &Table, row: &[u8]) -> Result<Option<Row>> {
        self.snapshot().get_row(table, row)
    }

    /// Scans rows of `table`.
    pub fn scan(&self, table: &Table, opts: &ScanOptions) -> Result<RowIter> {
        self.snapshot().scan(table, opts)
    }

    /// Flushes the memtables to SST files and waits for it. Its error is that of its own
    /// flush: the background flusher waits meanwhile.
    pub fn flush(&self) -> Result<()> {
        self.inner.fs.check_writable()?;
        self.settle()?;
        self.flush_through(u64::MAX)
    }

    /// Compacts every level into the bottom one and waits for it: each table's files are
    /// merged into one file holding only the newest visible version of each cell, without
    /// tombstones. The WAL segments kept for reuse (`DbOptions::wal_recycle_segments`) are
    /// deleted too, so that the directory takes no more disk than its data needs.
    pub fn compact_all(&self) -> Result<()> {
        self.compact_all_with_progress(&mut |_, _| {})
    }

    /// [`Db::compact_all`], telling `progress` how far it got: `(bytes done, bytes in all)` of
    /// the input files.
    pub fn compact_all_with_progress(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<()> {
        self.inner.compact_all(progress)?;
        self.inner.wal.drop_recycled()
    }

    /// Reclaims the space of expired data now (tables with `TableOptions::expiry`): drops
    /// the files whose rows have all expired without reading them, and rewrites those holding
    /// some expired row. A caller runs it periodically, since without new writes no
    /// compaction would come to it.
    pub fn expire(&self) -> Result<()> {
        self.inner.expire_due()
    }

    /// Empties the block cache; later reads fill it again from the files.
    pub fn clear_block_cache(&self) {
        self.inner.cache.clear();
    }

    /// Current counters.
    pub fn stats(&self) -> EngineStats {
        let inner = &self.inner;
        let wal = inner.wal.stats();
        let state = inner.state.read().clone();
        let mut levels: Vec<LevelStats> = Vec::new();
        for table_levels in state.files.tables.values() {
            for (i, level) in table_levels.iter().enumerate() {
                if levels.len() <= i {
                    levels.resize_with(i + 1, LevelStats::default);
                }
                levels[i].files += level.len() as u64;
                levels[i].bytes += level.iter().map(|r| r.file_bytes()).sum::<u64>();
            }
        }
        let cache = inner.cache.stats();
        let c = &inner.counters;
        EngineStats {
            memtable_bytes: state.active.approximate_bytes()
                + state
                    .frozen
                    .iter()
                    .map(|f| f.mem.approximate_bytes())
                    .sum::<u64>(),
            frozen_memtables: state.frozen.len() as u64,
            levels,
            write_failed: inner.wal.has_failed(),
            wal_batches_refused: wal.refused.load(Ordering::Relaxed),
            flush_errors: c.flush_errors.load(Ordering::Relaxed),
            compaction_errors: c.compaction_errors.load(Ordering::Relaxed),
            write_stalls: c.write_stalls.load(Ordering::Relaxed),
            write_stall_micros: c.write_stall_micros.load(Ordering::Relaxed),
            flush_failing: inner.last_flush_error.lock().is_some(),
            writes_refused: c.writes_refused.load(Ordering::Relaxed),
            flushes: c.flushes.load(Ordering::Relaxed),
            flush_micros: c.flush_micros.load(Ordering::Relaxed),
            rows_folded: c.rows_folded.load(Ordering::Relaxed),
            folds_rejected: c.folds_rejected.load(Ordering::Relaxed),
            compactions: c.compactions.load(Ordering::Relaxed),
            expired_files_dropped: c.expired_files_dropped.load(Ordering::Relaxed),
            expired_bytes_dropped: c.expired_bytes_dropped.load(Ordering::Relaxed),
            expired_rows_dropped: c.expired_rows_dropped.load(Ordering::Relaxed),
            compaction_micros: c.compaction_micros.load(Ordering::Relaxed),
            compaction_bytes_written: c.compaction_bytes_written.load(Ordering::Relaxed),
            cache_hits: cache.hits,
            cache_misses: cache.misses,
            cache_bytes: cache.used_bytes,
            wal_bytes: wal.bytes.load(Ordering::Relaxed),
            wal_syncs: wal.syncs.load(Ordering::Relaxed),
            wal_queue_bytes: inner.wal.queued_bytes(),
            batches_written: wal.batches.load(Ordering::Relaxed),
            object: inner.fs.object_stats().unwrap_or_default(),
        }
    }

    /// Flushes and closes the database.
    pub fn close(self) -> Result<()> {
        self.sync_wal()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::file_name::sst_file_name;
    use crate::fs::LocalFs;

    #[test]
    fn write_may_block_when_a_write_would_wait() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let db = Db::open(dir.path(), DbOptions::default())?;
        assert!(
            !db.write_may_block(),
            "an idle database with the default policy"
        );
        drop(db);
        let always = DbOptions {
            sync: SyncPolicy::Always,
            ..DbOptions::default()
        };
        let db = Db::open(dir.path(), always)?;
        assert!(db.write_may_block(), "every write fsyncs under `always`");
        Ok(())
    }

    /// A WAL a background thread still holds when the database is dropped writes nothing
    /// once the directory is open again: its end record, written late at the length it knew,
    /// would cut off what the new open appended to the same recycled segment.
    #[test]
    fn a_wal_outliving_its_database_writes_nothing_after_a_reopen() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let db = Db::open(dir.path(), DbOptions::default())?;
        let t = db.open_table("t", TableOptions::default())?;
        for i in 0..3u32 {
            let mut b = WriteBatch::new();
            b.put(&t, b"r", b"c", &i.to_be_bytes());
            db.write(&b)?;
            // Each flush rolls the WAL; from the second on, into a recycled file.
            db.flush()?;
        }
        let held = Arc::clone(&db.inner.wal);
        drop(db);
        let db = Db::open(dir.path(), DbOptions::default())?;
        let t = db.open_table("t", TableOptions::default())?;
        let mut b = WriteBatch::new();
        b.put(&t, b"r", b"c", b"after");
        db.write(&b)?;
        db.sync_wal()?;
        drop(held);
        drop(db);
        let db = Db::open(dir.path(), DbOptions::default())?;
        let t = db.open_table("t", TableOptions::default())?;
        assert_eq!(db.get(&t, b"r", b"c")?.as_deref(), Some(&b"after"[..]));
        Ok(())
    }

    #[test]
    fn queued_writes_are_applied_by_the_apply_thread_in_order() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let db = Db::open(dir.path(), DbOptions::default())?;
        let t = db.open_table("t", TableOptions::default())?;
        for i in 0..100u32 {
            let mut b = WriteBatch::new();
            b.put(&t, b"r", b"c", &i.to_be_bytes());
            db.write_queued(&mut b)?;
        }
        // No settle and no later write: the apply thread alone makes the last one visible.
        let deadline = Instant::now() + Duration::from_secs(10);
        while db.get(&t, b"r", b"c")?.as_deref() != Some(&99u32.to_be_bytes()[..]) {
            assert!(
                Instant::now() < deadline,
                "queued writes were never applied"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // A plain write waits for the batches queued before it.
        let mut b = WriteBatch::new();
        b.put(&t, b"r", b"d", b"x");
        db.write_queued(&mut b)?;
        let mut b = WriteBatch::new();
        b.put(&t, b"s", b"c", b"y");
        db.write(&b)?;
        assert_eq!(db.get(&t, b"r", b"d")?.as_deref(), Some(&b"x"[..]));
        Ok(())
    }

    #[test]
    fn batch_survives_reopen() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        {
            let db = Db::open(dir.path(), DbOptions::default())?;
            let t = db.open_table("t", TableOptions::default())?;
            let mut b = WriteBatch::new();
            b.put(&t, b"r1", b"c1", b"v1");
            b.put(&t, b"r1", b"c2", b"v2");
            b.put(&t, b"r2", b"c1", b"v3");
            b.delete(&t, b"r1", b"c2");
            db.write(&b)?;
            db.close()?;
        }
        let db = Db::open(dir.path(), DbOptions::default())?;
        let t = db
            .table("t")
            .ok_or_else(|| Error::NoSuchTable("t".into()))?;
        assert_eq!(db.get(&t, b"r1", b"c1")?.as_deref(), Some(&b"v1"[..]));
        assert_eq!(db.get(&t, b"r1", b"c2")?, None);
        let rows: Vec<Row> = db
            .scan(
                &t,
                &ScanOptions {
                    reverse: true,
                    ..Default::default()
                },
            )?
            .collect::<Result<_>>()?;
        assert_eq!(
            rows.iter().map(|r| r.key.to_vec()).collect::<Vec<_>>(),
            vec![b"r2".to_vec(), b"r1".to_vec()]
        );
        Ok(())
    }

    #[test]
    fn flushed_and_compacted_data_survives_reopen_and_orphans_are_removed() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let opts = || DbOptions {
            wal_segment_bytes: 1024,
            ..DbOptions::default()
        };
        {
            let db = Db::open(dir.path(), opts())?;
            let t = db.open_table("t", TableOptions::default())?;
            for i in 0..50u32 {
                let mut b = WriteBatch::new();
                b.put(&t, &i.to_be_bytes(), b"c", b"old");
                db.write(&b)?;
            }
            db.flush()?;
            let mut b = WriteBatch::new();
            b.put(&t, &7u32.to_be_bytes(), b"c", b"new");
            b.delete_row(&t, &8u32.to_be_bytes());
            db.write(&b)?;
            db.flush()?;
            db.compact_all()?;
            let stats = db.stats();
            assert_eq!(stats.flushes, 2);
            assert_eq!(stats.levels.len(), 2);
            assert_eq!(stats.levels[0].files, 0);
            assert_eq!(stats.levels[1].files, 1);
            // Only the segment started by the last flush is left.
            let wal = crate::wal::recovery::list_segments(&LocalFs::new(dir.path())?)?;
            assert_eq!(wal.len(), 1, "{wal:?}");
            let mut b = WriteBatch::new();
            b.put(&t, &9u32.to_be_bytes(), b"c", b"unflushed");
            db.write(&b)?;
            db.close()?;
        }
        let orphan = dir.path().join(sst_file_name(999));
        std::fs::write(&orphan, b"half a file").map_err(|e| Error::io("orphan", e))?;
        let db = Db::open(dir.path(), opts())?;
        assert!(!orphan.exists());
        let t = db
            .table("t")
            .ok_or_else(|| Error::NoSuchTable("t".into()))?;
        let get = |i: u32| db.get(&t, &i.to_be_bytes(), b"c");
        assert_eq!(get(1)?.as_deref(), Some(&b"old"[..]));
        assert_eq!(get(7)?.as_deref(), Some(&b"new"[..]));
        assert_eq!(get(8)?, None);
        assert_eq!(get(9)?.as_deref(), Some(&b"unflushed"[..]));
        assert_eq!(db.scan(&t, &ScanOptions::default())?.count(), 49);
        Ok(())
    }

    /// Forward scans over one run of files build rows from the blocks in place (`FileRows`);
    /// they must agree with reverse scans (the merging path) and with point reads, across
    /// versions, cell deletes, row deletes, filters, snapshots and several files per level.
    #[test]
    fn scans_from_files_agree_with_the_merging_path() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let db = Db::open(
            dir.path(),
            DbOptions {
                target_file_bytes: 1024,
                ..DbOptions::default()
            },
        )?;
        let t = db.open_table(
            "t",
            TableOptions {
                block_bytes: 256,
                compression: crate::options::Compression::None,
                ..TableOptions::default()
            },
        )?;
        for round in 0..3u32 {
            let mut b = WriteBatch::new();
            for row in 0..60u32 {
                for col in 0..5u32 {
                    if (row + col + round) % 7 == 0 {
                        b.delete(&t, &row.to_be_bytes(), &col.to_be_bytes());
                    } else {
                        b.put(
                            &t,
                            &row.to_be_bytes(),
                            &col.to_be_bytes(),
                            &round.to_be_bytes(),
                        );
                    }
                }
                if round == 1 && row % 11 == 0 {
                    b.delete_row(&t, &row.to_be_bytes());
                }
            }
            db.write(&b)?;
            db.flush()?;
        }
        let old = db.snapshot();
        let mut b = WriteBatch::new();
        b.put(&t, &3u32.to_be_bytes(), b"new", b"v");
        db.write(&b)?;
        db.flush()?;
        db.compact_all()?;
        assert!(db.stats().levels.iter().map(|l| l.files).sum::<u64>() > 1);
        let options = [
            ScanOptions::default(),
            ScanOptions::range(&5u32.to_be_bytes(), &40u32.to_be_bytes()),
            ScanOptions {
                columns: Some(vec![1u32.to_be_bytes().to_vec()]),
                keys_only: true,
                ..ScanOptions::default()
            },
        ];
        for snap in [db.snapshot(), old] {
            for opts in &options {
                let fwd: Vec<Row> = snap.scan(&t, opts)?.collect::<Result<_>>()?;
                let rev_opts = ScanOptions {
                    reverse: true,
                    ..opts.clone()
                };
                let mut rev: Vec<Row> = snap.scan(&t, &rev_opts)?.collect::<Result<_>>()?;
                rev.reverse();
                assert_eq!(fwd, rev, "{opts:?}");
                assert!(!fwd.is_empty());
                for row in &fwd {
                    for c in &row.cells {
                        let v = snap.get(&t, &row.key, &c.column)?;
                        assert!(v.is_some());
                        if !opts.keys_only {
                            assert_eq!(v, Some(c.value.clone()));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    #[test]
    fn compact_all_reports_progress_up_to_its_input_bytes() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let db = Db::open(dir.path(), DbOptions::default())?;
        let t = db.open_table("t", TableOptions::default())?;
        for round in 0..3u32 {
            let mut b = WriteBatch::new();
            for row in 0..100u32 {
                b.put(&t, &row.to_be_bytes(), b"c", &round.to_be_bytes());
            }
            db.write(&b)?;
            db.flush()?;
        }
        let input: u64 = db.stats().levels.iter().map(|l| l.bytes).sum();
        let mut calls: Vec<(u64, u64)> = Vec::new();
        db.compact_all_with_progress(&mut |done, total| calls.push((done, total)))?;
        assert_eq!(calls.first(), Some(&(0, input)));
        assert_eq!(calls.last(), Some(&(input, input)));
        assert!(calls.windows(2).all(|w| w[0].0 <= w[1].0), "{calls:?}");
        Ok(())
    }

    #[derive(Debug, Default)]
    struct ManualClock(AtomicU64);

    impl crate::options::Clock for ManualClock {
        fn now_ms(&self) -> u64 {
            self.0.load(Ordering::Relaxed)
        }
    }

    #[test]
    fn ttl_hides_expired_cells_and_compaction_drops_them() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let clock = Arc::new(ManualClock(AtomicU64::new(1_000_000)));
        let db = Db::open(
            dir.path(),
            DbOptions {
                clock: clock.clone(),
                ..DbOptions::default()
            },
        )?;
        let t = db.open_table(
            "t",
            TableOptions {
                ttl: Some(Duration::from_secs(10)),
                ..TableOptions::default()
            },
        )?;
        let put = |row: &[u8], v: &[u8]| {
            let mut b = WriteBatch::new();
            b.put(&t, row, b"c", v);
            db.write(&b)
        };
        put(b"old", b"1")?;
        clock.0.fetch_add(6_000, Ordering::Relaxed);
        put(b"new", b"2")?;
        db.flush()?;
        assert_eq!(db.scan(&t, &ScanOptions::default())?.count(), 2);
        clock.0.fetch_add(6_000, Ordering::Relaxed);
        assert_eq!(db.get(&t, b"old", b"c")?, None);
        assert_eq!(db.get(&t, b"new", b"c")?.as_deref(), Some(&b"2"[..]));
        let rows: Vec<Row> = db
            .scan(&t, &ScanOptions::default())?
            .collect::<Result<_>>()?;
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].key.as_ref(), b"new");
        db.compact_all()?;
        // The expired cell is gone from the files, not just hidden.
        let snap = db.snapshot();
        let files = &snap.files.tables[&t.id];
        let entries: usize = files
            .iter()
            .flatten()
            .map(|r| r.properties().entry_count as usize)
            .sum();
        assert_eq!(entries, 1);
        Ok(())
    }
}
