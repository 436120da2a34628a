//! The database handle: an LSM tree of memtables and SST files behind a write-ahead log.
//!
//! Writes are appended to the WAL (`wal.rs`) and applied, in log order, to the active
//! memtable, each batch with the next sequence number. A memtable that passes
//! `DbOptions::memtable_bytes` freezes: the WAL rolls to a new segment at that point, so the
//! frozen memtable covers exactly the segments before it. A background thread flushes frozen
//! memtables, oldest first, to level-0 SST files (one per table), records them with the WAL
//! position they cover in the manifest (`manifest.rs`), and then deletes the covered segments.
//! Writers stall while `DbOptions::max_frozen_memtables` frozen memtables wait, or while a
//! table's level 0 holds `DbOptions::l0_stall_files` files. After flushing, the same thread
//! runs the compactions the leveled planner (`compaction.rs`) asks for.
//!
//! At open the manifest's files are opened and only the WAL segments after the flushed
//! position are replayed, numbering batches on from the manifest's last sequence number.
//!
//! Reads merge the active memtable, the frozen ones and the files, newest first; a [`Snapshot`]
//! is a sequence number plus references to those memtables and files, so it stays consistent
//! while flushes and compactions replace them.
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
//!   bounds memory.
//! - If the WAL cannot start a new segment when the active memtable freezes, the memtable
//!   stays active; a write that finds it at twice its size freezes it first, and is refused
//!   with the error if that fails again.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Condvar, Mutex, RwLock};

use crate::batch::WriteBatch;
use crate::cache::BlockCache;
use crate::compaction::{self, FileSummary, Plan, PlanOptions};
use crate::error::{Error, Result};
use crate::file_name::{MANIFEST_NAME, parse_sst_file_name, sst_file_name};
use crate::fs::{AtomicWriteError, FileSystem, LocalFs};
use crate::key::{Entry, EntryKind, Found};
use crate::manifest::{FileMeta, Manifest};
use crate::memtable::Memtable;
use crate::options::{DbOptions, SyncPolicy, TableOptions};
use crate::read::{FileRows, RowStream, Rows, Source};
use crate::scan::{Cell, Row, RowIter, ScanOptions};
use crate::sst::{RowRange, SstBuilder, SstReader};
use crate::stats::{EngineStats, LevelStats};
use crate::table::Table;
use crate::wal::{self, DecodedEntry, Entry as WalEntry, Wal, decode_entry};

/// Where a flush hands its entries, one at a time.
type EntrySink<'a> = dyn FnMut(&Entry) -> Result<()> + 'a;

/// An open database. Cheap to clone; every clone shares the same state.
#[derive(Debug, Clone)]
pub struct Db {
    inner: Arc<Inner>,
}

/// A frozen memtable waiting to be flushed.
#[derive(Debug, Clone)]
struct Frozen {
    mem: Arc<Memtable>,
    /// The last WAL segment holding its records.
    last_segment: u64,
    /// The last sequence number it holds.
    last_seq: u64,
}

/// The live SST files: per table, per level; level 0 newest first.
#[derive(Debug, Clone, Default)]
struct Files {
    tables: BTreeMap<u32, Vec<Vec<Arc<SstReader>>>>,
}

impl Files {
    fn add(&mut self, table: u32, level: u8, reader: Arc<SstReader>) {
        let levels = self.tables.entry(table).or_default();
        let level = usize::from(level);
        if levels.len() <= level {
            levels.resize_with(level + 1, Vec::new);
        }
        levels[level].push(reader);
    }

    /// Sorts level 0 of every table newest (highest file id) first, and deeper levels by
    /// row range.
    fn sort(&mut self) {
        for levels in self.tables.values_mut() {
            for (i, level) in levels.iter_mut().enumerate() {
                if i == 0 {
                    level.sort_by_key(|r| std::cmp::Reverse(r.file_id()));
                } else {
                    level.sort_by(|a, b| a.properties().first_row.cmp(&b.properties().first_row));
                }
            }
        }
    }

    /// What the compaction planner needs to know about `table`'s files.
    fn summaries(&self, table: u32) -> Vec<Vec<FileSummary>> {
        self.tables
            .get(&table)
            .map(|levels| {
                levels
                    .iter()
                    .map(|level| {
                        level
                            .iter()
                            .map(|r| FileSummary {
                                id: r.file_id(),
                                bytes: r.file_bytes(),
                                first_row: r.properties().first_row.clone(),
                                last_row: r.properties().last_row.clone(),
                            })
                            .collect()
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// What reads see.
#[derive(Debug)]
struct State {
    active: Arc<Memtable>,
    /// Oldest first.
    frozen: Vec<Frozen>,
    files: Arc<Files>,
}

#[derive(Debug, Default)]
struct Counters {
    flush_errors: AtomicU64,
    compaction_errors: AtomicU64,
    write_stalls: AtomicU64,
    write_stall_micros: AtomicU64,
    flushes: AtomicU64,
    flush_micros: AtomicU64,
    rows_folded: AtomicU64,
    folds_rejected: AtomicU64,
    compactions: AtomicU64,
    compaction_micros: AtomicU64,
    compaction_bytes_written: AtomicU64,
}

/// Wakes a background thread (flush, compaction or apply).
#[derive(Debug, Default)]
struct Signal {
    work: Mutex<bool>,
    cv: Condvar,
}

#[derive(Debug)]
struct Inner {
    opts: DbOptions,
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    cache: Arc<BlockCache>,
    state: RwLock<Arc<State>>,
    tables: RwLock<BTreeMap<String, Table>>,
    table_opts: RwLock<HashMap<u32, TableOptions>>,
    /// The TTL in milliseconds of each table opened with one, for snapshots.
    ttls: RwLock<Arc<HashMap<u32, u64>>>,
    wal: Arc<Wal>,
    /// The last sequence number handed out; only the WAL's commit leader changes it.
    last_seq: AtomicU64,
    /// Every batch up to this sequence number is in the memtables.
    visible_seq: AtomicU64,
    /// The persisted manifest. Flushes hold its lock while they write; compactions take it
    /// only to number their output files and to install their result, so a long compaction
    /// never holds up a flush (and with it the writers waiting for memtable room).
    manifest: Mutex<Manifest>,
    /// Serializes compactions: the background ones and [`Db::compact_all`].
    compaction: Mutex<()>,
    signal: Arc<Signal>,
    /// Wakes the compaction thread, after each flush.
    compact_signal: Arc<Signal>,
    /// Wakes the thread that writes and applies batches queued with no commit leader (see
    /// [`Db::write_queued`]). It also looks every 100 ms.
    applier: Arc<Signal>,
    /// Signalled after each flush, for stalled writers.
    flushed: (Mutex<()>, Condvar),
    /// SST files that no manifest in place names but that one which may be on disk does (its
    /// store failed after the rename), or that could not be deleted: deleted after the next
    /// manifest store.
    orphans: Mutex<Vec<u64>>,
    counters: Counters,
}

/// Directories open in this process: a second open of one waits for the first to be dropped
/// (its flush thread may still be finishing a flush).
/// How many times the fixed cost of its rows a memtable's entries may take before it freezes,
/// when that is more than `DbOptions::memtable_bytes` (see `Inner::freeze_at`).
const ENTRIES_PER_ROW_BYTE: u64 = 2;
/// The most a memtable grows past `DbOptions::memtable_bytes` for rows of few entries: with
/// the default 64 MiB, 512 MiB, what a million rows of a dozen entries take.
const MEMTABLE_GROWTH: u64 = 8;

static OPEN_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static OPEN_DIRS_CV: Condvar = Condvar::new();

fn claim_dir(dir: &Path) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut open = OPEN_DIRS.lock();
    while open.iter().any(|d| d == dir) {
        if OPEN_DIRS_CV.wait_until(&mut open, deadline).timed_out() {
            return Err(Error::InvalidArgument(format!(
                "database {} is already open",
                dir.display()
            )));
        }
    }
    open.push(dir.to_path_buf());
    Ok(())
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Batches still queued go to the WAL, to be replayed at the next open.
        self.wal
            .lead_queued(&mut |payloads| self.apply_group(payloads));
        let mut open = OPEN_DIRS.lock();
        open.retain(|d| d != &self.dir);
        OPEN_DIRS_CV.notify_all();
    }
}

impl Db {
    /// Opens (creating if needed) the database in `dir`.
    pub fn open(dir: impl AsRef<Path>, opts: DbOptions) -> Result<Db> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        let dir = dir
            .canonicalize()
            .map_err(|e| Error::io(format!("resolving {}", dir.display()), e))?;
        claim_dir(&dir)?;
        match Db::open_claimed(&dir, opts) {
            Ok(db) => Ok(db),
            Err(e) => {
                let mut open = OPEN_DIRS.lock();
                open.retain(|d| d != &dir);
                OPEN_DIRS_CV.notify_all();
                Err(e)
            }
        }
    }

    fn open_claimed(dir: &Path, opts: DbOptions) -> Result<Db> {
        let fs = opts.faults.wrap(Arc::new(LocalFs::new(dir)?));
        let manifest = Manifest::load(&*fs)?.unwrap_or(Manifest {
            next_file_id: 1,
            ..Manifest::default()
        });
        // Files a crash left behind: SSTs the manifest does not name, a half-written
        // manifest, and WAL segments it covers whose deletion did not finish.
        let live: Vec<u64> = manifest.files.iter().map(|f| f.id).collect();
        for name in fs.list()? {
            let orphan = match parse_sst_file_name(&name) {
                Some(id) => !live.contains(&id),
                None => name == format!("{MANIFEST_NAME}.tmp"),
            };
            if orphan {
                tracing::info!(file = %name, "deleting a file left by an interrupted flush");
                fs.delete(&name)?;
            }
        }
        wal::delete_segments_through(&*fs, manifest.flushed_segment)?;

        let cache = Arc::new(BlockCache::new(opts.block_cache_bytes));
        let mut files = Files::default();
        for f in &manifest.files {
            let reader =
                SstReader::open(fs.open(&sst_file_name(f.id))?, f.id, Some(cache.clone()))?;
            files.add(f.table, f.level, Arc::new(reader));
        }
        files.sort();

        let mut tables: BTreeMap<String, Table> = manifest
            .tables
            .iter()
            .map(|(id, name)| (name.clone(), Table::new(*id, name.as_str().into())))
            .collect();
        let mem = Memtable::new();
        let mut seq = manifest.last_seq;
        let now = opts.clock.now_ms();
        let mut replay = |payload: &[u8], file: &str, offset: u64| -> Result<()> {
            let bad = |detail: String| Error::corruption(file, offset, detail);
            match decode_entry(payload).map_err(bad)? {
                DecodedEntry::Table { id, name } => {
                    tables.insert(name.to_string(), Table::new(id, name.into()));
                }
                DecodedEntry::Batch(ops) => {
                    seq += 1;
                    mem.apply_all(&ops, seq, now);
                }
            }
            Ok(())
        };
        let wal = Arc::new(Wal::open_from(
            fs.clone(),
            opts.wal_segment_bytes,
            manifest.flushed_segment + 1,
            &mut replay,
        )?);
        if let SyncPolicy::Interval(every) = opts.sync {
            Wal::spawn_syncer(&wal, every)?;
        }
        let signal = Arc::new(Signal::default());
        let compact_signal = Arc::new(Signal::default());
        let applier = Arc::new(Signal::default());
        let inner = Arc::new(Inner {
            opts,
            dir: dir.to_path_buf(),
            fs,
            cache,
            state: RwLock::new(Arc::new(State {
                active: Arc::new(mem),
                frozen: Vec::new(),
                files: Arc::new(files),
            })),
            tables: RwLock::new(tables),
            table_opts: RwLock::new(HashMap::new()),
            ttls: RwLock::new(Arc::new(HashMap::new())),
            wal,
            last_seq: AtomicU64::new(seq),
            visible_seq: AtomicU64::new(seq),
            manifest: Mutex::new(manifest),
            compaction: Mutex::new(()),
            signal: signal.clone(),
            compact_signal: compact_signal.clone(),
            applier: applier.clone(),
            flushed: (Mutex::new(()), Condvar::new()),
            orphans: Mutex::new(Vec::new()),
            counters: Counters::default(),
        });
        spawn_worker(
            "strata-apply",
            "applying queued writes",
            Arc::downgrade(&inner),
            applier,
            |inner| {
                inner
                    .wal
                    .lead_queued(&mut |payloads| inner.apply_group(payloads));
                Ok(())
            },
        )?;
        spawn_flusher(Arc::downgrade(&inner), signal)?;
        spawn_compactor(Arc::downgrade(&inner), compact_signal)?;
        Ok(Db { inner })
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
        let id = tables.values().map(Table::id).max().unwrap_or(0) + 1;
        // A table's creation is always durable before the table is handed out. Its record
        // changes no cell, so the group's apply skips it; the table map is updated here.
        self.inner
            .commit(WalEntry::Table { id, name }, true, false)?;
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
    pub fn write_queued(&self, batch: &WriteBatch) -> Result<()> {
        self.write_inner(batch, self.inner.opts.sync == SyncPolicy::Always, true)
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

    fn write_inner(&self, batch: &WriteBatch, sync: bool, queue: bool) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        if self.inner.stall_if_needed() {
            self.inner.freeze_overgrown()?;
        }
        self.inner.commit(WalEntry::Batch(batch), sync, queue)
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
        self.settle()?;
        let inner = &self.inner;
        let mut manifest = inner.manifest.lock();
        let frozen = inner.wal.quiesce(|| inner.freeze());
        // Batches queued while the memtable froze wait for the apply thread.
        inner.wake_applier(true);
        frozen?;
        while inner.flush_oldest_locked(&mut manifest)? {}
        Ok(())
    }

    /// Compacts every level into the bottom one and waits for it: each table's files are
    /// merged into one file holding only the newest visible version of each cell, without
    /// tombstones.
    pub fn compact_all(&self) -> Result<()> {
        self.inner.compact_all()
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
            flushes: c.flushes.load(Ordering::Relaxed),
            flush_micros: c.flush_micros.load(Ordering::Relaxed),
            rows_folded: c.rows_folded.load(Ordering::Relaxed),
            folds_rejected: c.folds_rejected.load(Ordering::Relaxed),
            compactions: c.compactions.load(Ordering::Relaxed),
            compaction_micros: c.compaction_micros.load(Ordering::Relaxed),
            compaction_bytes_written: c.compaction_bytes_written.load(Ordering::Relaxed),
            cache_hits: cache.hits,
            cache_misses: cache.misses,
            cache_bytes: cache.used_bytes,
            wal_bytes: wal.bytes.load(Ordering::Relaxed),
            wal_syncs: wal.syncs.load(Ordering::Relaxed),
            wal_queue_bytes: inner.wal.queued_bytes(),
            batches_written: wal.batches.load(Ordering::Relaxed),
        }
    }

    /// Flushes and closes the database.
    pub fn close(self) -> Result<()> {
        self.sync_wal()
    }
}

/// Starts the thread that flushes frozen memtables while the database is open, waking the
/// compaction thread after each flush.
fn spawn_flusher(db: Weak<Inner>, signal: Arc<Signal>) -> Result<()> {
    spawn_worker("strata-flush", "memtable flush", db, signal, |inner| {
        let flushed = (|| {
            while inner.flush_oldest()? {
                inner.compact_signal.wake();
            }
            Ok(())
        })();
        if flushed.is_err() {
            inner.counters.flush_errors.fetch_add(1, Ordering::Relaxed);
        }
        flushed
    })
}

/// Starts the thread that runs due compactions while the database is open, apart from the
/// flush thread: a compaction of a large level takes seconds, and flushes must go on meanwhile.
fn spawn_compactor(db: Weak<Inner>, signal: Arc<Signal>) -> Result<()> {
    spawn_worker("strata-compact", "compaction", db, signal, |inner| {
        let compacted = inner.compact_due();
        if compacted.is_err() {
            inner
                .counters
                .compaction_errors
                .fetch_add(1, Ordering::Relaxed);
        }
        compacted
    })
}

/// The first wait before a failed background job runs again. Each failure in a row doubles
/// it, up to [`RETRY_MAX`]; a success resets it. A disk that was full is used again within
/// seconds of having space, and a lasting failure is retried (and logged) every 10 s rather
/// than in a tight loop.
const RETRY_FIRST: Duration = Duration::from_millis(100);
/// The longest wait between retries of a failing background job.
const RETRY_MAX: Duration = Duration::from_secs(10);

/// Starts thread `name`, which runs `work` whenever `signal` wakes it (and every 100 ms) until
/// the database is dropped. After a failure it logs it as `what` and waits before the next
/// run, from [`RETRY_FIRST`] doubling to [`RETRY_MAX`]. A failed flush or compaction leaves
/// the files and the manifest as they were, so running it again is safe.
fn spawn_worker(
    name: &str,
    what: &'static str,
    db: Weak<Inner>,
    signal: Arc<Signal>,
    work: impl Fn(&Inner) -> Result<()> + Send + 'static,
) -> Result<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let mut retry: Option<Duration> = None;
            loop {
                signal.wait();
                let Some(inner) = db.upgrade() else { break };
                let result = work(&inner);
                drop(inner);
                match result {
                    Ok(()) => retry = None,
                    Err(e) => {
                        let wait = retry.map_or(RETRY_FIRST, |w| (w * 2).min(RETRY_MAX));
                        retry = Some(wait);
                        tracing::error!(
                            error = %e,
                            retry_in_ms = wait.as_millis() as u64,
                            "{what} failed; retrying"
                        );
                        std::thread::sleep(wait);
                    }
                }
            }
        })
        .map_err(|e| Error::io(format!("spawning thread {name}"), e))?;
    Ok(())
}

impl Signal {
    /// Marks work as waiting and wakes the thread.
    fn wake(&self) {
        *self.work.lock() = true;
        self.cv.notify_one();
    }

    /// Waits until woken, or 100 ms at most (the thread also polls), and takes the work mark.
    fn wait(&self) {
        let mut work = self.work.lock();
        if !*work {
            self.cv.wait_for(&mut work, Duration::from_millis(100));
        }
        *work = false;
    }
}

impl Inner {
    /// Commits `entry` through the WAL (see `Wal::commit`), waking the apply thread when
    /// queued batches are left with no commit leader.
    fn commit(&self, entry: WalEntry<'_>, sync: bool, queue: bool) -> Result<()> {
        let stranded = self.wal.commit(entry, sync, queue, &mut |payloads| {
            self.apply_group(payloads)
        })?;
        self.wake_applier(stranded);
        Ok(())
    }

    /// Wakes the apply thread if `stranded`: queued batches wait with no commit leader.
    fn wake_applier(&self, stranded: bool) {
        if stranded {
            self.applier.wake();
        }
    }

    /// Applies a committed group of WAL payloads to the active memtable, in log order. Runs
    /// as the WAL's commit leader.
    fn apply_group(&self, payloads: &[&[u8]]) {
        let active = self.state.read().active.clone();
        let now = self.opts.clock.now_ms();
        let mut seq = self.last_seq.load(Ordering::Relaxed);
        for payload in payloads {
            match decode_entry(payload) {
                Ok(DecodedEntry::Batch(ops)) => {
                    seq += 1;
                    active.apply_all(&ops, seq, now);
                }
                Ok(DecodedEntry::Table { .. }) => {}
                // We encoded these bytes ourselves a moment ago.
                Err(e) => tracing::error!(error = %e, "undecodable WAL payload of our own"),
            }
        }
        self.last_seq.store(seq, Ordering::Relaxed);
        self.visible_seq.store(seq, Ordering::Release);
        if active.approximate_bytes() >= self.freeze_at(&active)
            && let Err(e) = self.freeze()
        {
            tracing::warn!(error = %e, "could not freeze the memtable; the next write tries again");
        }
    }

    /// The size at which `mem` freezes: `DbOptions::memtable_bytes`, or more when most of
    /// that would go to rows rather than entries. With many rows of few entries each (a
    /// million series, each written every few seconds), a flush at the base size would write
    /// every row with one or two entries, and every compaction after it would copy each row
    /// once per flush; so a memtable grows until its entries take [`ENTRIES_PER_ROW_BYTE`]
    /// times what its rows cost, up to [`MEMTABLE_GROWTH`] times the base size.
    fn freeze_at(&self, mem: &Memtable) -> u64 {
        let base = self.opts.memtable_bytes as u64;
        let wanted = mem.row_bytes().saturating_mul(ENTRIES_PER_ROW_BYTE + 1);
        wanted.clamp(base, base.saturating_mul(MEMTABLE_GROWTH))
    }

    /// Freezes the active memtable (if it holds anything) and rolls the WAL. Call only as
    /// the WAL's commit leader.
    fn freeze(&self) -> Result<()> {
        let active = self.state.read().active.clone();
        if active.is_empty() {
            return Ok(());
        }
        let segment = self.wal.roll_now()?;
        {
            let mut state = self.state.write();
            let mut frozen = state.frozen.clone();
            let next = Arc::new(Memtable::after(&active));
            frozen.push(Frozen {
                mem: active,
                last_segment: segment - 1,
                last_seq: self.last_seq.load(Ordering::Relaxed),
            });
            *state = Arc::new(State {
                active: next,
                frozen,
                files: state.files.clone(),
            });
        }
        *self.signal.work.lock() = true;
        self.signal.cv.notify_one();
        Ok(())
    }

    /// Freezes the active memtable, which grew to twice its size because the freeze in
    /// [`Inner::apply_group`] failed (the WAL could not start a segment, say on a full disk).
    /// A write is refused with the error while this fails, rather than let memory grow.
    fn freeze_overgrown(&self) -> Result<()> {
        let frozen = self.wal.quiesce(|| self.freeze());
        // Batches queued while this held the commit leadership wait for the apply thread.
        self.wake_applier(true);
        frozen
    }

    /// What a write must attend to first: whether it must wait (too many frozen memtables wait
    /// for a flush, or a table's level 0 holds too many files), and whether the active
    /// memtable grew to twice its size (see [`Inner::freeze_overgrown`]).
    fn pressure(&self) -> (bool, bool) {
        let state = self.state.read();
        let l0_limit = self
            .opts
            .l0_stall_files
            .max(self.opts.l0_compaction_trigger.max(2) + 1);
        // Frozen memtables are bounded in number, and in bytes when they grew past the base
        // size (see `freeze_at`): one of any size may wait, more only within what the base
        // size allows.
        let frozen_bytes: u64 = state.frozen.iter().map(|f| f.mem.approximate_bytes()).sum();
        let max_frozen = self.opts.max_frozen_memtables.max(1);
        let stall = state.frozen.len() >= max_frozen
            || (state.frozen.len() >= 2
                && frozen_bytes
                    >= (self.opts.memtable_bytes as u64).saturating_mul(max_frozen as u64))
            || state
                .files
                .tables
                .values()
                .any(|levels| levels.first().is_some_and(|l0| l0.len() >= l0_limit));
        let overgrown =
            state.active.approximate_bytes() >= self.freeze_at(&state.active).saturating_mul(2);
        (stall, overgrown)
    }

    /// True while writes must wait (see [`Inner::pressure`]).
    fn must_stall(&self) -> bool {
        self.pressure().0
    }

    /// Waits while [`Inner::must_stall`], unless the WAL failed (the write is refused then).
    /// Returns whether the active memtable is overgrown (see [`Inner::pressure`]).
    fn stall_if_needed(&self) -> bool {
        let (stall, overgrown) = self.pressure();
        if !stall {
            return overgrown;
        }
        let start = Instant::now();
        self.counters.write_stalls.fetch_add(1, Ordering::Relaxed);
        tracing::warn!("writes stalled: waiting for memtable flushes or level-0 compactions");
        let (mx, cv) = &self.flushed;
        let mut g = mx.lock();
        while self.must_stall() && !self.wal.has_failed() {
            cv.wait_for(&mut g, Duration::from_millis(10));
        }
        self.counters
            .write_stall_micros
            .fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
        self.pressure().1
    }

    fn set_table_options(&self, table: u32, opts: TableOptions) {
        let mut ttls = self.ttls.write();
        let mut next = (**ttls).clone();
        match opts.ttl {
            Some(ttl) => next.insert(table, u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)),
            None => next.remove(&table),
        };
        *ttls = Arc::new(next);
        self.table_opts.write().insert(table, opts);
    }

    fn table_options(&self, table: u32) -> TableOptions {
        self.table_opts
            .read()
            .get(&table)
            .cloned()
            .unwrap_or_default()
    }

    /// Writes the entries `feed` passes to its callback (ascending, unique keys) to the new
    /// SST file `id`. Returns `None` (and leaves no file) when there is no entry.
    fn write_sst(
        &self,
        table: u32,
        level: u8,
        id: u64,
        feed: &mut dyn FnMut(&mut EntrySink<'_>) -> Result<()>,
    ) -> Result<Option<(FileMeta, Arc<SstReader>)>> {
        let name = sst_file_name(id);
        let mut builder: Option<SstBuilder> = None;
        let result = (|| -> Result<Option<(FileMeta, Arc<SstReader>)>> {
            feed(&mut |entry| {
                let b = match &mut builder {
                    Some(b) => b,
                    None => builder.insert(SstBuilder::new(
                        self.fs.create(&name)?,
                        &name,
                        &self.table_options(table),
                        self.opts.clock.now_ms(),
                    )),
                };
                b.add(entry)
            })?;
            let Some(b) = builder.take() else {
                return Ok(None);
            };
            self.finish_sst(table, level, id, &name, b).map(Some)
        })();
        if result.is_err() {
            drop(builder);
            self.discard(std::iter::once(id), false);
        }
        result
    }

    fn table_registry(&self) -> BTreeMap<u32, String> {
        self.tables
            .read()
            .values()
            .map(|t| (t.id, t.name.to_string()))
            .collect()
    }

    /// Flushes the oldest frozen memtable; false if there was none.
    fn flush_oldest(&self) -> Result<bool> {
        self.flush_oldest_locked(&mut self.manifest.lock())
    }

    /// [`Inner::flush_oldest`], with the manifest's lock held.
    fn flush_oldest_locked(&self, manifest: &mut Manifest) -> Result<bool> {
        let Some(frozen) = self.state.read().frozen.first().cloned() else {
            return Ok(false);
        };
        let start = Instant::now();
        let mut written = Vec::new();
        let mut next = manifest.clone();
        let result = (|| -> Result<(), AtomicWriteError> {
            let before = |error| AtomicWriteError {
                error,
                maybe_replaced: false,
            };
            for table in frozen.mem.table_ids() {
                let id = next.next_file_id;
                next.next_file_id += 1;
                let mem = &frozen.mem;
                let fold = self.table_options(table).flush_fold;
                let (mut folded, mut rejected) = (0u64, 0u64);
                let file = self
                    .write_sst(table, 0, id, &mut |add| match &fold {
                        Some(fold) => {
                            mem.for_each_folded(table, &*fold.0, &mut folded, &mut rejected, add)
                        }
                        None => mem.for_each(table, add),
                    })
                    .map_err(before)?;
                self.counters
                    .rows_folded
                    .fetch_add(folded, Ordering::Relaxed);
                if rejected > 0 {
                    tracing::error!(table, rows = rejected, "flush fold output rejected");
                    self.counters
                        .folds_rejected
                        .fetch_add(rejected, Ordering::Relaxed);
                }
                if let Some(file) = file {
                    written.push(file);
                }
            }
            next.last_seq = next.last_seq.max(frozen.last_seq);
            next.flushed_segment = next.flushed_segment.max(frozen.last_segment);
            next.tables = self.table_registry();
            next.files.extend(written.iter().map(|(m, _)| m.clone()));
            next.store(&*self.fs)
        })();
        if let Err(e) = result {
            // File ids are never reused. The memtable stays frozen, to be flushed again.
            manifest.next_file_id = next.next_file_id;
            self.discard(written.iter().map(|(m, _)| m.id), e.maybe_replaced);
            return Err(e.error);
        }
        *manifest = next;
        self.delete_orphans(manifest);
        {
            let mut state = self.state.write();
            let mut files = (*state.files).clone();
            for (m, reader) in written {
                files.add(m.table, 0, reader);
            }
            files.sort();
            *state = Arc::new(State {
                active: state.active.clone(),
                frozen: state.frozen.iter().skip(1).cloned().collect(),
                files: Arc::new(files),
            });
        }
        self.counters.flushes.fetch_add(1, Ordering::Relaxed);
        self.counters
            .flush_micros
            .fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
        self.flushed.1.notify_all();
        self.wal.delete_segments_through(frozen.last_segment)?;
        Ok(true)
    }

    /// Runs the compactions the planner asks for, one at a time, until none is due.
    fn compact_due(&self) -> Result<()> {
        let o = PlanOptions {
            l0_trigger: self.opts.l0_compaction_trigger,
            base_bytes: self.opts.level_base_bytes,
            ratio: self.opts.level_size_ratio,
        };
        let _compacting = self.compaction.lock();
        loop {
            let files = self.state.read().files.clone();
            let due = files
                .tables
                .keys()
                .find_map(|&t| compaction::plan(&files.summaries(t), &o).map(|p| (t, p)));
            let Some((table, plan)) = due else {
                return Ok(());
            };
            self.compact(table, &plan)?;
        }
    }

    /// Merges every file of every table into one level (the deepest one in use, at least 1).
    fn compact_all(&self) -> Result<()> {
        let _compacting = self.compaction.lock();
        let files = self.state.read().files.clone();
        for (&table, levels) in &files.tables {
            let inputs: Vec<u64> = levels.iter().flatten().map(|r| r.file_id()).collect();
            if inputs.is_empty() {
                continue;
            }
            let deepest = levels.iter().rposition(|l| !l.is_empty()).unwrap_or(0);
            let plan = Plan {
                inputs,
                output_level: deepest.max(1),
                bottom: true,
            };
            self.compact(table, &plan)?;
        }
        Ok(())
    }

    /// Runs one compaction of `table`'s files and installs its outputs. The caller holds
    /// `compaction`, so the inputs stay as planned; flushes may add level-0 files meanwhile,
    /// which hold newer data than any input and are left alone.
    fn compact(&self, table: u32, plan: &Plan) -> Result<()> {
        let start = Instant::now();
        let files = self.state.read().files.clone();
        let inputs: Vec<Arc<SstReader>> = files
            .tables
            .get(&table)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|r| plan.inputs.contains(&r.file_id()))
            .cloned()
            .collect();
        let level = u8::try_from(plan.output_level)
            .map_err(|_| Error::InvalidArgument(format!("bad level {}", plan.output_level)))?;
        let mut outputs: Vec<(FileMeta, Arc<SstReader>)> = Vec::new();
        let result = self.write_compaction(table, level, &inputs, plan.bottom, &mut outputs);
        let mut manifest = self.manifest.lock();
        let installed = result
            .map_err(|error| AtomicWriteError {
                error,
                maybe_replaced: false,
            })
            .and_then(|()| {
                let mut next = manifest.clone();
                next.files.retain(|f| !plan.inputs.contains(&f.id));
                next.files.extend(outputs.iter().map(|(m, _)| m.clone()));
                next.store(&*self.fs)?;
                *manifest = next;
                Ok(())
            });
        if let Err(e) = installed {
            // The inputs stay live; the outputs go, now or once a later manifest is in place.
            drop(manifest);
            self.discard(outputs.iter().map(|(m, _)| m.id), e.maybe_replaced);
            return Err(e.error);
        }
        self.delete_orphans(&manifest);
        let written: u64 = outputs.iter().map(|(m, _)| m.bytes).sum();
        {
            let mut state = self.state.write();
            let mut files = (*state.files).clone();
            if let Some(levels) = files.tables.get_mut(&table) {
                for l in levels.iter_mut() {
                    l.retain(|r| !plan.inputs.contains(&r.file_id()));
                }
            }
            for (m, reader) in outputs {
                files.add(table, m.level, reader);
            }
            files.sort();
            *state = Arc::new(State {
                active: state.active.clone(),
                frozen: state.frozen.clone(),
                files: Arc::new(files),
            });
        }
        drop(manifest);
        self.discard(plan.inputs.iter().copied(), false);
        if let Some(&id) = plan.inputs.last() {
            self.fs.sync_dir(&sst_file_name(id))?;
        }
        let c = &self.counters;
        c.compactions.fetch_add(1, Ordering::Relaxed);
        self.flushed.1.notify_all();
        c.compaction_bytes_written
            .fetch_add(written, Ordering::Relaxed);
        c.compaction_micros
            .fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
        tracing::debug!(
            table,
            level,
            inputs = plan.inputs.len(),
            written,
            "compacted"
        );
        Ok(())
    }

    /// Merges `inputs` into new files of `level`, cut between rows at the target size.
    fn write_compaction(
        &self,
        table: u32,
        level: u8,
        inputs: &[Arc<SstReader>],
        bottom: bool,
        outputs: &mut Vec<(FileMeta, Arc<SstReader>)>,
    ) -> Result<()> {
        let sources: Vec<Source> = inputs
            .iter()
            .map(|r| Box::new(r.compaction_iter()) as Source)
            .collect();
        let mut rows = Rows::new(sources, false, u64::MAX);
        let opts = self.table_options(table);
        let expired = opts.ttl.map(|ttl| {
            self.opts
                .clock
                .now_ms()
                .saturating_sub(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
        });
        let mut open: Option<(u64, String, SstBuilder)> = None;
        let result = (|| -> Result<()> {
            while let Some(row) = rows.next_raw() {
                let (_, entries) = row?;
                let kept =
                    compaction::expire(compaction::compact_row(entries, bottom), expired, bottom);
                if kept.is_empty() {
                    continue;
                }
                let (_, _, b) = match &mut open {
                    Some(o) => o,
                    None => {
                        // Numbered under the manifest's lock, held only for this: file ids are
                        // never reused, and an unused one is harmless.
                        let id = {
                            let mut manifest = self.manifest.lock();
                            let id = manifest.next_file_id;
                            manifest.next_file_id += 1;
                            id
                        };
                        let name = sst_file_name(id);
                        let b = SstBuilder::new(
                            self.fs.create(&name)?,
                            &name,
                            &opts,
                            self.opts.clock.now_ms(),
                        );
                        open.insert((id, name, b))
                    }
                };
                for e in &kept {
                    b.add(e)?;
                }
                if b.estimated_len() >= self.opts.target_file_bytes
                    && let Some((id, name, b)) = open.take()
                {
                    outputs.push(self.finish_sst(table, level, id, &name, b)?);
                }
            }
            if let Some((id, name, b)) = open.take() {
                outputs.push(self.finish_sst(table, level, id, &name, b)?);
            }
            Ok(())
        })();
        if let Some((id, _, b)) = open.take() {
            drop(b);
            self.discard(std::iter::once(id), false);
        }
        result
    }

    /// Deletes the SST files `ids`, which no manifest in place names. With `later`, or when a
    /// deletion fails, they are deleted after the next manifest store instead: a manifest whose
    /// store failed after its rename may name them.
    fn discard(&self, ids: impl Iterator<Item = u64>, later: bool) {
        let mut orphans = self.orphans.lock();
        for id in ids {
            self.cache.evict_file(id);
            if later {
                orphans.push(id);
            } else if let Err(e) = self.fs.delete(&sst_file_name(id)) {
                tracing::warn!(error = %e, file = %sst_file_name(id), "could not delete an SST file");
                orphans.push(id);
            }
        }
    }

    /// Deletes the files [`Inner::discard`] put off, now that `manifest` (which names none of
    /// them) is in place.
    fn delete_orphans(&self, manifest: &Manifest) {
        let mut orphans = self.orphans.lock();
        orphans.retain(|&id| {
            if manifest.files.iter().any(|f| f.id == id) {
                return false;
            }
            match self.fs.delete(&sst_file_name(id)) {
                Ok(()) => false,
                Err(e) => {
                    tracing::warn!(error = %e, file = %sst_file_name(id), "could not delete an SST file");
                    true
                }
            }
        });
    }

    fn finish_sst(
        &self,
        table: u32,
        level: u8,
        id: u64,
        name: &str,
        builder: SstBuilder,
    ) -> Result<(FileMeta, Arc<SstReader>)> {
        let result = (|| {
            let info = builder.finish()?;
            let reader = SstReader::open(self.fs.open(name)?, id, Some(self.cache.clone()))?;
            Ok((
                FileMeta {
                    table,
                    level,
                    id,
                    bytes: info.file_bytes,
                },
                Arc::new(reader),
            ))
        })();
        if result.is_err() {
            self.discard(std::iter::once(id), false);
        }
        result
    }
}

/// Reads one cell at `seq` from `mems` (newest first) and then `files`; cells written before
/// `expired_before` are expired.
fn read_cell(
    seq: u64,
    mems: &[Arc<Memtable>],
    files: &Files,
    expired_before: Option<u64>,
    table: u32,
    row: &[u8],
    column: &[u8],
) -> Result<Option<Bytes>> {
    let decide = |f: Found| {
        (f.kind == EntryKind::Put && expired_before.is_none_or(|t| f.write_ms >= t))
            .then_some(f.value)
    };
    for m in mems {
        if let Some(f) = m.get(table, row, column, seq) {
            return Ok(decide(f));
        }
    }
    if let Some(levels) = files.tables.get(&table) {
        for reader in levels.iter().flatten() {
            if let Some(f) = reader.lookup(row, column, seq)? {
                return Ok(decide(f));
            }
        }
    }
    Ok(None)
}

/// A consistent read view.
#[derive(Debug, Clone)]
pub struct Snapshot {
    seq: u64,
    /// The active memtable and the frozen ones, newest first.
    mems: Vec<Arc<Memtable>>,
    files: Arc<Files>,
    /// Tables' TTLs in milliseconds.
    ttls: Arc<HashMap<u32, u64>>,
    /// The time the snapshot was taken, for TTLs.
    now_ms: u64,
}

impl Snapshot {
    /// Cells of `table` written before this time are expired.
    fn expired_before(&self, table: &Table) -> Option<u64> {
        self.ttls
            .get(&table.id)
            .map(|ttl| self.now_ms.saturating_sub(*ttl))
    }

    /// Reads one cell.
    pub fn get(&self, table: &Table, row: &[u8], column: &[u8]) -> Result<Option<Bytes>> {
        read_cell(
            self.seq,
            &self.mems,
            &self.files,
            self.expired_before(table),
            table.id,
            row,
            column,
        )
    }

    /// Reads one row.
    pub fn get_row(&self, table: &Table, row: &[u8]) -> Result<Option<Row>> {
        self.get_row_with(table, row, false)
    }

    /// [`Snapshot::get_row`], leaving the block cache as it is if `skip_cache_fill` (see
    /// [`ScanOptions::skip_cache_fill`]).
    pub fn get_row_with(
        &self,
        table: &Table,
        row: &[u8],
        skip_cache_fill: bool,
    ) -> Result<Option<Row>> {
        let mut stop = row.to_vec();
        stop.push(0);
        let opts = ScanOptions {
            start: Some(row.to_vec()),
            stop: Some(stop),
            limit: Some(1),
            skip_cache_fill,
            ..ScanOptions::default()
        };
        self.scan(table, &opts)?.next().transpose()
    }

    /// Reads the rows `rows` of `table`, as [`Snapshot::get_row_with`] reads each one, and
    /// hands each row found to `found` with its index in `rows`, in order.
    ///
    /// When `rows` ascend, a row that no memtable holds and that one file alone may hold (by
    /// the files' row ranges and row filters) is read through a cursor kept open in that file
    /// from the row before: the file's index is searched only from the cursor's block on, and
    /// a row in the same block as the one before reuses it. A series' hours in a metric's salt
    /// bucket lie a few KiB apart, so a long read of one series finds several rows per block.
    /// Any other row is read by [`Snapshot::get_row_with`].
    pub fn get_rows_with(
        &self,
        table: &Table,
        rows: &[impl AsRef<[u8]>],
        skip_cache_fill: bool,
        mut found: impl FnMut(usize, Row),
    ) -> Result<()> {
        let ascending = rows.windows(2).all(|w| w[0].as_ref() < w[1].as_ref());
        let levels = self.files.tables.get(&table.id).filter(|_| ascending);
        let expired = self.expired_before(table);
        // One cursor per file read so far (few: a batch usually stays in one file).
        let mut cursors: Vec<(Arc<SstReader>, FileRows)> = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let row = row.as_ref();
            let file = match levels {
                Some(levels) if !self.mems.iter().any(|m| m.has_row(table.id, row)) => {
                    single_file_for(levels, row)?
                }
                _ => Lone::Several,
            };
            let file = match file {
                Lone::None => continue,
                Lone::One(file) => file,
                Lone::Several => {
                    if let Some(r) = self.get_row_with(table, row, skip_cache_fill)? {
                        found(i, r);
                    }
                    continue;
                }
            };
            let mut stop = row.to_vec();
            stop.push(0);
            let range = RowRange {
                start: Some(Bytes::copy_from_slice(row)),
                end: Some(Bytes::from(stop)),
            };
            // The file's cursor moved on to this row, or a new one.
            let at = cursors.iter().position(|(f, _)| Arc::ptr_eq(f, file));
            let reused = match at {
                Some(at) => cursors[at].1.retarget(range.clone())?,
                None => false,
            };
            if !reused {
                let opts = ScanOptions {
                    skip_cache_fill,
                    ..ScanOptions::default()
                };
                let fresh = FileRows::new(vec![file.clone()], range, self.seq, expired, opts);
                match at {
                    Some(at) => cursors[at].1 = fresh,
                    None => cursors.push((file.clone(), fresh)),
                }
            }
            let at = at.unwrap_or(cursors.len().saturating_sub(1));
            let rows = cursors.get_mut(at).map(|c| &mut c.1);
            if let Some(r) = rows.and_then(|r| r.next()).transpose()? {
                found(i, r);
            }
        }
        Ok(())
    }

    /// Scans rows of `table`.
    pub fn scan(&self, table: &Table, opts: &ScanOptions) -> Result<RowIter> {
        let range = RowRange {
            start: opts.start.as_deref().map(Bytes::copy_from_slice),
            end: opts.stop.as_deref().map(Bytes::copy_from_slice),
        };
        let mut sources: Vec<Source> = Vec::new();
        // Runs of files read one after the other: each level-0 file alone, and the files of a
        // deeper level (disjoint row ranges, sorted) together.
        let mut runs: Vec<Vec<Arc<SstReader>>> = Vec::new();
        let empty = matches!((&range.start, &range.end), (Some(s), Some(e)) if s >= e);
        if !empty {
            for m in &self.mems {
                let mut entries = m.entries(table.id, &range);
                if entries.is_empty() {
                    continue;
                }
                if opts.reverse {
                    entries.reverse();
                }
                sources.push(Box::new(entries.into_iter().map(Ok)));
            }
            if let Some(levels) = self.files.tables.get(&table.id) {
                for (i, level) in levels.iter().enumerate() {
                    let files: Vec<Arc<SstReader>> = level
                        .iter()
                        .filter(|r| r.overlaps(&range))
                        .cloned()
                        .collect();
                    let disjoint = files
                        .windows(2)
                        .all(|w| w[0].properties().last_row < w[1].properties().first_row);
                    if i == 0 || !disjoint {
                        runs.extend(files.into_iter().map(|f| vec![f]));
                    } else if !files.is_empty() {
                        runs.push(files);
                    }
                }
            }
        }
        let expired = self.expired_before(table);
        if !opts.reverse && sources.is_empty() && runs.len() == 1 {
            // One run of files and nothing in memory: rows are built from the blocks in place.
            let files = runs.pop().unwrap_or_default();
            let rows = FileRows::new(files, range, self.seq, expired, opts.clone());
            let inner: Box<dyn Iterator<Item = Result<Row>> + Send> = match opts.limit {
                Some(l) => Box::new(rows.take(l)),
                None => Box::new(rows),
            };
            return Ok(RowIter { inner });
        }
        for files in runs {
            let (range, reverse, fill) = (range.clone(), opts.reverse, !opts.skip_cache_fill);
            let ordered: Box<dyn Iterator<Item = Arc<SstReader>> + Send> = if reverse {
                Box::new(files.into_iter().rev())
            } else {
                Box::new(files.into_iter())
            };
            sources.push(Box::new(
                ordered.flat_map(move |r| r.iter_filling(range.clone(), reverse, fill)),
            ));
        }
        let limit = opts.limit;
        let opts = opts.clone();
        if !opts.reverse {
            // Forward scans resolve each row as its entries stream in.
            let rows = RowStream::new(sources, self.seq, expired, opts);
            let inner: Box<dyn Iterator<Item = Result<Row>> + Send> = match limit {
                Some(l) => Box::new(rows.take(l)),
                None => Box::new(rows),
            };
            return Ok(RowIter { inner });
        }
        let rows = Rows::new(sources, opts.reverse, self.seq).filter_map(move |r| {
            let (key, cells) = match r {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            };
            if !opts.contains(&key) || opts.row_filter.as_ref().is_some_and(|f| !f(&key)) {
                return None;
            }
            let cells: Vec<Cell> = cells
                .into_iter()
                .filter(|c| {
                    expired.is_none_or(|t| c.write_ms >= t)
                        && opts
                            .columns
                            .as_ref()
                            .is_none_or(|cs| cs.iter().any(|x| x[..] == c.key.column[..]))
                })
                .map(|c| Cell {
                    column: c.key.column,
                    value: if opts.keys_only {
                        Bytes::new()
                    } else {
                        c.value
                    },
                })
                .collect();
            (!cells.is_empty()).then_some(Ok(Row { key, cells }))
        });
        let inner: Box<dyn Iterator<Item = Result<Row>> + Send> = match limit {
            Some(l) => Box::new(rows.take(l)),
            None => Box::new(rows),
        };
        Ok(RowIter { inner })
    }
}

/// Which files of a table may hold a row, for a batched get.
enum Lone<'a> {
    /// None: the row is not stored.
    None,
    /// Exactly this file.
    One(&'a Arc<SstReader>),
    /// More than one.
    Several,
}

/// The one file of `levels` that may hold `row`, by row range and row filter.
fn single_file_for<'a>(levels: &'a [Vec<Arc<SstReader>>], row: &[u8]) -> Result<Lone<'a>> {
    let mut lone = Lone::None;
    for file in levels.iter().flatten() {
        if file.may_contain_row(row)? {
            if matches!(lone, Lone::One(_)) {
                return Ok(Lone::Several);
            }
            lone = Lone::One(file);
        }
    }
    Ok(lone)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn queued_writes_are_applied_by_the_apply_thread_in_order() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let db = Db::open(dir.path(), DbOptions::default())?;
        let t = db.open_table("t", TableOptions::default())?;
        for i in 0..100u32 {
            let mut b = WriteBatch::new();
            b.put(&t, b"r", b"c", &i.to_be_bytes());
            db.write_queued(&b)?;
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
        db.write_queued(&b)?;
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
