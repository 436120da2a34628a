//! The [`Tsdb`] handle: opening, the write path, UID and index accessors.
//!
//! A database holds three engine tables: `tsdb` (data rows, `rowkey.rs` + `cell.rs`), `uid`
//! (`uid.rs`) and `meta` (`meta.rs`).

use std::collections::hash_map::Entry;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use rustc_hash::FxHashMap;
use strata_engine::hint::prefetch;
use strata_engine::{
    Db, DbOptions, EngineStats, FlushFolder, RowExpirer, TableOptions, WriteBatch,
};

use crate::cell::{EncodedValue, encode_column, encode_value};
use crate::clock::{Clock, SystemClock};
use crate::error::{Error, PointError, Result};
use crate::fetch::Fetcher;
use crate::fold::RowFold;
use crate::meta;
use crate::point::PointRef;
use crate::policy::{BatchFloors, Policy};
use crate::replica::Replica;
use crate::retention::{Retention, format_retention};
use crate::rowcompact::RowCompactCursor;
use crate::rowkey::{
    ROW_SPAN_SECS, Tsuid, base_time_of, encode_rowkey_into, rowkey_pieces, salt_of,
};
use crate::series_cache::{CachedSeries, SeriesCache, raw_key};
use crate::series_index::SeriesIndex;
use crate::stats::{Stats, TsdbStats};
use crate::store::{Store, WriteState};
use crate::trees::Trees;
use crate::uid::{Uid, UidKind, UidTable};
use crate::uid_alloc::UidAllocator;
use crate::validate::{NameRules, check_finite, check_tag_set, timestamp_to_ms};
use crate::value::Value;

/// Bound of the write path's series cache.
const SERIES_CACHE_ENTRIES: usize = 1 << 21;

/// How [`Tsdb::commit`] hands its batch to the engine.
#[derive(Clone, Copy)]
enum Commit {
    /// Visible on return ([`Db::write`]).
    Wait,
    /// Visible and fsynced on return ([`Db::write_sync`]).
    Sync,
    /// Queued, visible shortly after ([`Db::write_queued`]).
    Queued,
    /// Queued for the caller's settle (or durable wait) to write
    /// ([`Db::write_queued_before_settle`]).
    BeforeSettle,
}

/// How far ahead of the point it checks [`Tsdb::write_series`] starts fetching a point's
/// series handle; its series is fetched half as far ahead and the series' TSUID a quarter.
const SERIES_AHEAD: usize = 16;

/// Prefetches what the points after the `k`th of a batch will first touch. Each is a chain of
/// three pointers (the caller's handle, the cached series, its TSUID); with a million series
/// each is a miss to memory, and fetched link by link over several points their misses
/// overlap instead of stalling every point three times.
fn fetch_series_ahead(points: &[SeriesPoint<'_>], k: usize) {
    if let Some(p) = points.get(k + SERIES_AHEAD) {
        prefetch(p.series);
    }
    if let Some(p) = points.get(k + SERIES_AHEAD / 2) {
        prefetch(Arc::as_ptr(&p.series.series));
    }
    if let Some(p) = points.get(k + SERIES_AHEAD / 4) {
        prefetch(p.series.series.tsuid.as_bytes().as_ptr());
    }
}

/// A series' newest point as a batch changes it.
#[derive(Debug)]
pub(crate) struct LastUpdate {
    pub(crate) point: (i64, Value),
    /// Write it to `meta`: it moved to another row.
    pub(crate) persist: bool,
    /// The newest point is in a row newer than any before it, so it is exact.
    pub(crate) new_row: bool,
}

/// Name of the data table.
pub(crate) const DATA_TABLE: &str = "tsdb";
/// Name of the UID table.
pub(crate) const UID_TABLE: &str = "uid";
/// Name of the meta table.
pub(crate) const META_TABLE: &str = "meta";

/// Options of a [`Tsdb`].
#[derive(Debug, Clone)]
pub struct TsdbOptions {
    /// Engine options. Its `clock` is replaced by [`TsdbOptions::clock`], so one clock drives
    /// the engine's TTL and the tsdb layer.
    pub db: DbOptions,
    /// Options of the data table (TTL = retention).
    pub data_table: TableOptions,
    /// Salt buckets, fixed when the database is created (20 if `None`). Opening an existing
    /// database with a different count is refused: every rowkey's salt depends on it.
    pub salt_buckets: Option<u8>,
    /// UID widths in bytes of metrics, tag keys and tag values (OpenTSDB's
    /// `tsd.storage.uid.width.*`), fixed when the database is created; `None` takes the stored
    /// width, or 3 on creation. Only 3 is supported; the widths are stored so a directory
    /// records what its rowkeys hold.
    pub uid_widths: [Option<u8>; 3],
    /// Most tags a point may carry (OpenTSDB's `tsd.storage.max_tags`).
    pub max_tags: usize,
    /// Characters allowed in names besides the standard set.
    pub name_rules: NameRules,
    /// Assign UIDs to unknown metric names on write. OpenTSDB defaults to false; Strata
    /// defaults to true, so tcollector and friends work with no set-up.
    pub auto_create_metrics: bool,
    /// Assign UIDs to unknown tag keys on write (default true, as OpenTSDB).
    pub auto_create_tagks: bool,
    /// Assign UIDs to unknown tag values on write (default true, as OpenTSDB).
    pub auto_create_tagvs: bool,
    /// The wall clock.
    pub clock: Arc<dyn Clock>,
    /// How long after its hour closes a row waits before the row compactor folds it: a row of
    /// hour `base_time` is compacted once `base_time + 3600 s + grace <= now` (default 10 min).
    pub rowcompact_grace: Duration,
    /// How long the background row compactor leaves a closed row alone after it was last
    /// dirtied (its marker's time), so that a backfill's rows are folded once, when full,
    /// rather than again with every few points; [`Tsdb::rowcompact_all`] ignores it (default 0;
    /// the server uses 5 s).
    pub rowcompact_settle: Duration,
    /// Fold each row's raw cells into one block when the engine flushes a memtable
    /// (`fold.rs`; default true). Off, every point reaches the engine's files as its own cell
    /// until the row compactor folds its hour.
    pub fold_on_flush: bool,
    /// How long points are kept, by data time and per metric (`retention.rs`; default
    /// forever).
    pub retention: Retention,
    /// Picks the UIDs of new names; `None` (the default) counts up in this database's own
    /// UID table. Writers that share names (partitioned ingest) share an allocator.
    pub uid_allocator: Option<Arc<dyn UidAllocator>>,
    /// The salt buckets this database accepts points for, `lo..=hi`; a point of a series in
    /// another bucket is refused ([`PointError::NotOwned`]). `None` (the default) accepts
    /// every bucket.
    pub owned_salts: Option<(u8, u8)>,
}

impl Default for TsdbOptions {
    fn default() -> Self {
        TsdbOptions {
            db: DbOptions::default(),
            data_table: TableOptions::default(),
            salt_buckets: None,
            uid_widths: [None; 3],
            max_tags: 8,
            name_rules: NameRules::default(),
            auto_create_metrics: true,
            auto_create_tagks: true,
            auto_create_tagvs: true,
            clock: Arc::new(SystemClock),
            // Late points usually arrive within minutes; folding a row sooner would only make
            // the next late point dirty it again.
            rowcompact_grace: Duration::from_secs(600),
            rowcompact_settle: Duration::ZERO,
            fold_on_flush: true,
            retention: Retention::default(),
            uid_allocator: None,
            owned_salts: None,
        }
    }
}

/// A series' metric name and its tags, in TSUID order.
pub type SeriesNames = (String, Vec<(String, String)>);

/// What the index knows about one series.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesInfo {
    /// Dense series id.
    pub id: u32,
    /// The TSUID.
    pub tsuid: Tsuid,
    /// Metric name.
    pub metric: String,
    /// Tags, in TSUID order (by tag-key UID).
    pub tags: Vec<(String, String)>,
    /// The latest point `(ts_ms, value)`.
    pub last: Option<(i64, Value)>,
}

/// An open time-series database. Cheap to clone; clones share everything.
#[derive(Debug, Clone)]
pub struct Tsdb {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Store,
    uids: Arc<UidTable>,
    /// Retention resolved per metric; also the data table's expiry hook.
    policy: Arc<Policy>,
    index: RwLock<SeriesIndex>,
    /// Raw metric and tags → resolved series, for the write path.
    series_cache: SeriesCache,
    /// Where the next [`Tsdb::rowcompact`] pass resumes its walk of the dirty markers, and
    /// whether it may skip the walk.
    rowcompact_cursor: Mutex<RowCompactCursor>,
    /// When a write last went into a row whose hour had closed (ms): a backfill is going on
    /// while that is recent (see `rowcompact.rs`).
    last_closed_write_ms: AtomicU64,
    buckets: u8,
    opts: TsdbOptions,
    stats: Stats,
    /// Set on a read replica (`Tsdb::open_read_only`): its refresh state.
    replica: Option<Replica>,
}

/// A validated point, ready to commit. `R` is how it holds its series: an `Arc` from the series
/// cache, or a borrow of a caller's [`SeriesHandle`].
struct Prepared<R> {
    series: R,
    ts_ms: i64,
    value: Value,
    enc: EncodedValue,
}

/// A series resolved once, for writing many points to it without naming it again
/// ([`Tsdb::series_handle`], [`Tsdb::write_series`]).
///
/// A handle stays right until the names it was made from may resolve differently: a UID
/// rename or a delete changes [`Tsdb::series_epoch`], and a holder of handles drops them then.
#[derive(Debug, Clone)]
pub struct SeriesHandle {
    series: Arc<CachedSeries>,
    epoch: u64,
}

impl SeriesHandle {
    /// The [`Tsdb::series_epoch`] the handle was made in.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Starts fetching the series into the cache, for a caller about to clone many handles:
    /// with many series each clone is otherwise a miss to memory.
    pub fn prefetch(&self) {
        let series = Arc::as_ptr(&self.series);
        prefetch(series);
        // The reference counts, which a clone changes, sit just before the series.
        prefetch(
            series
                .cast::<u8>()
                .wrapping_sub(2 * std::mem::size_of::<usize>()),
        );
    }
}

/// A point of a series resolved beforehand (see [`SeriesHandle`]).
#[derive(Debug, Clone, Copy)]
pub struct SeriesPoint<'a> {
    /// The series.
    pub series: &'a SeriesHandle,
    /// Timestamp as sent: seconds when `<= 0xFFFFFFFF`, else milliseconds.
    pub timestamp: i64,
    /// The value.
    pub value: Value,
}

/// OpenTSDB's default salt bucket count: enough to spread one metric's writes, few enough that
/// a metric scan stays 20 short range scans.
const DEFAULT_SALT_BUCKETS: u8 = 20;
/// The only UID width this version reads and writes, in bytes.
const SUPPORTED_UID_WIDTH: u8 = crate::uid::UID_LEN as u8;

/// The stored salt bucket count, or on a new database `wanted` (default 20), stored. A
/// `wanted` count that differs from the stored one is an error, not ignored: the operator
/// asked for a layout the directory does not have.
fn fixed_salt_buckets(
    db: &Db,
    meta_t: &strata_engine::Table,
    wanted: Option<u8>,
    replica: bool,
) -> Result<u8> {
    match db.get(meta_t, meta::CONFIG_ROW, meta::SALT_BUCKETS_COLUMN)? {
        Some(v) => match v[..] {
            [b] if b > 0 => match wanted {
                Some(w) if w != b => Err(Error::InvalidArgument(format!(
                    "salt_buckets is fixed when the database is created: this data directory \
                     has {b} buckets, the setting asks for {w}; remove the setting or use a new \
                     data directory"
                ))),
                _ => Ok(b),
            },
            _ => Err(Error::corruption(
                "meta row",
                meta::CONFIG_ROW,
                "bad salt bucket count",
            )),
        },
        None if replica => Err(crate::replica::no_database_yet()),
        None => {
            let b = wanted.unwrap_or(DEFAULT_SALT_BUCKETS);
            if b == 0 || b == u8::MAX {
                return Err(Error::InvalidArgument(format!(
                    "salt_buckets must be in 1..=254, got {b}"
                )));
            }
            let mut batch = WriteBatch::new();
            batch.put(meta_t, meta::CONFIG_ROW, meta::SALT_BUCKETS_COLUMN, &[b]);
            db.write_sync(&batch)?;
            Ok(b)
        }
    }
}

/// Checks the wanted UID widths against the stored ones, storing them on a new database (or
/// one made before widths were stored, whose rowkeys are all 3-byte).
fn fixed_uid_widths(
    db: &Db,
    meta_t: &strata_engine::Table,
    wanted: [Option<u8>; 3],
    replica: bool,
) -> Result<()> {
    let names = ["metric", "tagk", "tagv"];
    let stored = match db.get(meta_t, meta::CONFIG_ROW, meta::UID_WIDTHS_COLUMN)? {
        Some(v) => match v[..] {
            [a, b, c] => Some([a, b, c]),
            _ => {
                return Err(Error::corruption(
                    "meta row",
                    meta::CONFIG_ROW,
                    "bad UID widths",
                ));
            }
        },
        None => None,
    };
    let have = stored.unwrap_or([SUPPORTED_UID_WIDTH; 3]);
    for ((name, want), got) in names.iter().zip(wanted).zip(have) {
        match want {
            Some(w) if stored.is_some() && w != got => {
                return Err(Error::InvalidArgument(format!(
                    "{name}_uid_width is fixed when the database is created: this data \
                     directory has {got}-byte {name} UIDs, the setting asks for {w}"
                )));
            }
            Some(w) if w != SUPPORTED_UID_WIDTH => {
                return Err(Error::InvalidArgument(format!(
                    "{name}_uid_width {w} is not supported: this version stores \
                     {SUPPORTED_UID_WIDTH}-byte UIDs"
                )));
            }
            _ => {}
        }
    }
    if have != [SUPPORTED_UID_WIDTH; 3] {
        return Err(Error::InvalidArgument(format!(
            "this data directory has UID widths {have:?}, and this version reads only \
             {SUPPORTED_UID_WIDTH}-byte UIDs"
        )));
    }
    // A replica takes the writer's word: a directory without stored widths has 3-byte UIDs.
    if stored.is_none() && !replica {
        let mut batch = WriteBatch::new();
        batch.put(meta_t, meta::CONFIG_ROW, meta::UID_WIDTHS_COLUMN, &have);
        db.write_sync(&batch)?;
    }
    Ok(())
}

impl Tsdb {
    /// Opens (creating if needed) the database in `dir`, and rebuilds the series index.
    pub fn open(dir: impl AsRef<Path>, opts: TsdbOptions) -> Result<Tsdb> {
        let db = Db::open(dir, engine_options(&opts))?;
        Tsdb::on_db(db, opts, None)
    }

    /// The tsdb over `db`: its tables, the fixed settings, the UID maps and the series index.
    /// A `replica` (over a read-only follower) creates and writes nothing.
    pub(crate) fn on_db(db: Db, opts: TsdbOptions, replica: Option<Replica>) -> Result<Tsdb> {
        Tsdb::on_db_trees(db, opts, replica, None)
    }

    /// [`Tsdb::on_db`], reading the data of every tree of `trees` (whose first is `db`).
    pub(crate) fn on_db_trees(
        db: Db,
        opts: TsdbOptions,
        replica: Option<Replica>,
        trees: Option<Trees>,
    ) -> Result<Tsdb> {
        let mut data_opts = opts.data_table.clone();
        // Set even when nothing expires, so files record their rows' times and retention set
        // later can drop them whole.
        let policy = Arc::new(Policy::new(opts.retention.clone(), opts.clock.clone()));
        data_opts.expiry = Some(RowExpirer(policy.clone()));
        if opts.fold_on_flush {
            data_opts.flush_fold = Some(FlushFolder(Arc::new(RowFold)));
        }
        let data = db.open_table(DATA_TABLE, data_opts)?;
        // Names, series ids and markers are written once per key (or once per row and hour),
        // so their rows give the memtable no reason to grow.
        let index_opts = TableOptions {
            rows_grow: false,
            ..TableOptions::default()
        };
        let uid = db.open_table(UID_TABLE, index_opts.clone())?;
        let meta_t = db.open_table(META_TABLE, index_opts)?;
        let buckets = fixed_salt_buckets(&db, &meta_t, opts.salt_buckets, replica.is_some())?;
        fixed_uid_widths(&db, &meta_t, opts.uid_widths, replica.is_some())?;
        if let Some((lo, hi)) = opts.owned_salts
            && (lo > hi || hi >= buckets)
        {
            return Err(Error::InvalidArgument(format!(
                "owned salt buckets {lo}-{hi} are not a range within the {buckets} buckets \
                 0-{}",
                buckets - 1
            )));
        }
        let uids = Arc::new(UidTable::open_with_allocator(
            db.clone(),
            uid,
            opts.uid_allocator.clone(),
        )?);
        policy.set_uids(&uids);
        let mut index = SeriesIndex::load(&db, &meta_t, buckets)?;
        if let Some(trees) = &trees {
            index = trees.load(&uids, buckets)?;
        }
        tracing::info!(
            series = index.live_len(),
            metrics = uids.count(UidKind::Metric),
            tagks = uids.count(UidKind::Tagk),
            tagvs = uids.count(UidKind::Tagv),
            buckets,
            replica = replica.is_some(),
            "tsdb opened"
        );
        Ok(Tsdb {
            inner: Arc::new(Inner {
                store: Store {
                    db,
                    data,
                    meta: meta_t,
                    writes: Mutex::new(WriteState::default()),
                    trees,
                },
                uids,
                policy,
                index: RwLock::new(index),
                series_cache: SeriesCache::new(SERIES_CACHE_ENTRIES),
                rowcompact_cursor: Mutex::new(RowCompactCursor::default()),
                last_closed_write_ms: AtomicU64::new(0),
                buckets,
                opts,
                stats: Stats::default(),
                replica,
            }),
        })
    }

    /// Writes points in one engine batch, durable per the engine's sync policy. Returns one
    /// result per point, in order; a point that fails validation does not stop the others.
    pub fn write<S: AsRef<str>>(&self, points: &[PointRef<'_, S>]) -> Vec<Result<()>> {
        self.write_inner(points, false)
    }

    /// As [`Tsdb::write`], and the WAL is fsynced before it returns.
    pub fn write_sync<S: AsRef<str>>(&self, points: &[PointRef<'_, S>]) -> Vec<Result<()>> {
        self.write_inner(points, true)
    }

    /// Validates a point's metric and tags as [`Tsdb::write`] does, creating UIDs as it would,
    /// and returns a handle to the series for [`Tsdb::write_series`].
    pub fn series_handle<S: AsRef<str>>(
        &self,
        metric: &str,
        tags: &[(S, S)],
    ) -> Result<SeriesHandle> {
        self.check_writable()?;
        // Read before resolving: a rename in between leaves the handle already stale.
        let epoch = self.series_epoch();
        let mut key = Vec::with_capacity(128);
        raw_key(metric, tags, &mut key);
        let cached = self.inner.series_cache.reader().get(&key);
        let series = match cached {
            Some(s) => s,
            None => {
                let tsuid = self.resolve_series(metric, tags)?;
                let salt = salt_of(&tsuid, self.inner.buckets);
                self.inner.series_cache.insert(&key, tsuid, salt)
            }
        };
        self.check_owned(series.salt, metric)?;
        Ok(SeriesHandle { series, epoch })
    }

    /// Changes whenever a [`SeriesHandle`] made before may no longer be right.
    pub fn series_epoch(&self) -> u64 {
        self.inner.series_cache.epoch()
    }

    /// As [`Tsdb::write`], for points of series resolved beforehand: no names to look up.
    ///
    /// Unlike [`Tsdb::write`], it does not wait for the engine to apply the batch: the points
    /// become visible shortly after it returns, in order with every other write, and
    /// [`Tsdb::settle`] waits for them. The caller meanwhile goes on with its next batch.
    pub fn write_series(&self, points: &[SeriesPoint<'_>]) -> Vec<Result<()>> {
        self.write_series_as(points, Commit::Queued)
    }

    /// [`Tsdb::write_series`], then [`Tsdb::settle`]: the points are visible when it returns
    /// `Ok`. Cheaper than the two calls, as this caller applies the batches left with no
    /// commit leader itself instead of waking the engine's apply thread for them. An `Err`
    /// means some points may not be visible (as from [`Tsdb::settle`]).
    pub fn write_series_visible(&self, points: &[SeriesPoint<'_>]) -> Result<Vec<Result<()>>> {
        let results = self.write_series_as(points, Commit::BeforeSettle);
        self.settle()?;
        Ok(results)
    }

    /// [`Tsdb::write_series`], then waits until the points are durable in the WAL, as the
    /// sync policy says: a read that starts after it returns `Ok` sees them, though the
    /// engine may still be applying them. Meanwhile the caller can answer and take its next
    /// batch. An `Err` means some points may not be stored.
    pub fn write_series_durable(&self, points: &[SeriesPoint<'_>]) -> Result<Vec<Result<()>>> {
        // Queued without waking the engine's apply thread: the wait below writes the batch
        // itself when no one else does.
        let results = self.write_series_as(points, Commit::BeforeSettle);
        if self.inner.replica.is_none() {
            self.inner.store.db.wait_durable()?;
        }
        Ok(results)
    }

    fn write_series_as(&self, points: &[SeriesPoint<'_>], how: Commit) -> Vec<Result<()>> {
        if self.inner.replica.is_some() {
            return points.iter().map(|_| self.check_writable()).collect();
        }
        let mut floors = BatchFloors::new(&self.inner.policy);
        let prepared = points.iter().enumerate().map(move |(k, p)| {
            fetch_series_ahead(points, k);
            let series = &*p.series.series;
            let check = |metric: &str, tags: &[(String, String)]| {
                let enc = prepare_value(p.value, p.timestamp, metric)?;
                let ts_ms = timestamp_to_ms(p.timestamp, metric, tags, || enc.describe())?;
                Ok::<_, Error>((enc, ts_ms))
            };
            // The names are looked up only for an error's message.
            let (enc, ts_ms) = match check("", &[]) {
                Ok(checked) => checked,
                Err(_) => {
                    let (metric, tags) = self.names_of(&series.tsuid)?;
                    check(&metric, &tags)?
                }
            };
            self.check_retention(&mut floors, &series.tsuid, ts_ms, p.timestamp, || {
                self.names_of(&series.tsuid).map(|(m, _)| m)
            })?;
            Ok(Prepared {
                series,
                ts_ms,
                value: p.value,
                enc,
            })
        });
        // Straight into the commit: collecting first would copy each point's `Result` (as large
        // as the error type) twice more, on the hottest path of ingest.
        self.commit(prepared, how)
    }

    fn write_inner<S: AsRef<str>>(
        &self,
        points: &[PointRef<'_, S>],
        sync: bool,
    ) -> Vec<Result<()>> {
        if self.inner.replica.is_some() {
            return points.iter().map(|_| self.check_writable()).collect();
        }
        let how = if sync { Commit::Sync } else { Commit::Wait };
        self.commit(self.prepare_all(points).into_iter(), how)
    }

    /// Writes prepared points in one engine batch; see [`Tsdb::write`].
    fn commit<R: std::ops::Deref<Target = CachedSeries>>(
        &self,
        prepared: impl ExactSizeIterator<Item = Result<Prepared<R>>>,
        how: Commit,
    ) -> Vec<Result<()>> {
        let inner = &*self.inner;
        let n = prepared.len();
        let now_ms = inner.opts.clock.now_ms();
        let grace_ms = inner.opts.rowcompact_grace.as_millis() as u64;
        // Each point's result, `Ok` until its commit says otherwise; the good points are kept
        // with their place, as the dirty markers noted below borrow their series. (Prepared
        // here, before the lock: the points of `write_series` are checked as they come.)
        let mut results: Vec<Result<()>> = Vec::with_capacity(n);
        let mut ready: Vec<(usize, Prepared<R>)> = Vec::with_capacity(n);
        for p in prepared {
            match p {
                Ok(p) => {
                    ready.push((results.len(), p));
                    results.push(Ok(()));
                }
                Err(e) => results.push(Err(e)),
            }
        }
        let mut state = inner.store.writes.lock();
        let epoch = state.marker_epoch;
        let (mut batch, mut lasts) = state.scratch.take(n);
        let mut new_series: Vec<Tsuid> = Vec::new();
        let mut new_ids: FxHashMap<Tsuid, u32> = FxHashMap::default();
        let mut marked: Vec<&CachedSeries> = Vec::new();
        // Only for dirty markers: the points' rowkeys go into the batch in pieces.
        let mut rowkey: Vec<u8> = Vec::new();
        let mut ok = 0u64;
        let mut closed_write = false;
        {
            let index = inner.index.read();
            for (k, (at, p)) in ready.iter().enumerate() {
                // The index entry is one more miss per point with many series.
                if let Some(id) = ready
                    .get(k + SERIES_AHEAD / 2)
                    .and_then(|(_, p)| p.series.id())
                    && let Some(entry) = index.series.get(id as usize)
                {
                    prefetch(entry);
                }
                let series: &CachedSeries = &p.series;
                let id = match series.id() {
                    Some(id) => id,
                    None => match index.id(&series.tsuid) {
                        Some(id) => {
                            series.set_id(id);
                            id
                        }
                        None => match new_ids.get(&series.tsuid) {
                            Some(&id) => id,
                            None => {
                                let next = index.len() as u64 + new_series.len() as u64;
                                let Ok(id) = u32::try_from(next) else {
                                    results[*at] = Err(Error::SeriesExhausted { count: next });
                                    continue;
                                };
                                new_ids.insert(series.tsuid.clone(), id);
                                new_series.push(series.tsuid.clone());
                                id
                            }
                        },
                    },
                };
                let base = base_time_of(p.ts_ms);
                let offset = (p.ts_ms - i64::from(base) * 1000) as u32;
                batch.put_pieces(
                    &inner.store.data,
                    &rowkey_pieces(&series.salt, &series.tsuid, &base.to_be_bytes()),
                    &encode_column(offset),
                    p.enc.as_bytes(),
                );
                // A row keeps its dirty marker until the row compactor folds it, which happens
                // only once the row's hour has closed, or a delete removes it. So while the hour
                // is open, one marker per series and row is enough; for a closed row the marker
                // is written again once markers may have been deleted (a new epoch).
                let open = (u64::from(base) + u64::from(ROW_SPAN_SECS)) * 1000 + grace_ms > now_ms;
                closed_write |= !open;
                let (marked_base, marked_epoch) = series.marked();
                if marked_base != base || !(open || marked_epoch == epoch) {
                    encode_rowkey_into(series.salt, &series.tsuid, base, &mut rowkey);
                    batch.put(
                        &inner.store.meta,
                        &meta::key(meta::DIRTY_PREFIX, &rowkey),
                        meta::DIRTY_COLUMN,
                        &now_ms.to_be_bytes(),
                    );
                    series.set_marked(base, epoch);
                    marked.push(series);
                }
                // One hash lookup per point: with a sample per series in a request (remote
                // write), every point adds an entry.
                let new_row_after = |current: Option<(i64, Value)>| {
                    current
                        .is_none_or(|(ts, _)| p.ts_ms >= ts)
                        .then(|| current.is_none_or(|(ts, _)| base_time_of(ts) != base))
                };
                match lasts.entry(id) {
                    Entry::Occupied(mut o) => {
                        let u = o.get_mut();
                        if let Some(new_row) = new_row_after(Some(u.point)) {
                            u.point = (p.ts_ms, p.value);
                            u.persist |= new_row;
                            u.new_row |= new_row;
                        }
                    }
                    Entry::Vacant(v) => {
                        let current = index.series.get(id as usize).and_then(|s| s.last);
                        if let Some(new_row) = new_row_after(current) {
                            v.insert(LastUpdate {
                                point: (p.ts_ms, p.value),
                                persist: new_row,
                                new_row,
                            });
                        }
                    }
                }
                ok += 1;
            }
        }
        if ok == 0 {
            state.scratch.give_back(batch, lasts);
            drop(state);
            self.count_rejections(&results);
            return results;
        }
        for tsuid in &new_series {
            let id = new_ids.get(tsuid).copied().unwrap_or(0);
            batch.put(
                &inner.store.meta,
                &meta::key(meta::SERIES_BY_TSUID_PREFIX, tsuid.as_bytes()),
                meta::SERIES_ID_COLUMN,
                &id.to_be_bytes(),
            );
            batch.put(
                &inner.store.meta,
                &meta::key(meta::SERIES_BY_ID_PREFIX, &id.to_be_bytes()),
                meta::SERIES_TSUID_COLUMN,
                tsuid.as_bytes(),
            );
        }
        // The newest point is persisted only when it moves to another row; after a restart the
        // newest point is then in the row of the persisted one (see `SeriesEntry::last_exact`).
        for (id, u) in &lasts {
            if u.persist {
                let (ts, v) = u.point;
                batch.put(
                    &inner.store.meta,
                    &meta::key(meta::LAST_PREFIX, &id.to_be_bytes()),
                    meta::LAST_COLUMN,
                    &meta::encode_last(ts, v),
                );
            }
        }
        if closed_write {
            inner
                .last_closed_write_ms
                .fetch_max(now_ms, Ordering::Relaxed);
        }
        let committed = match how {
            Commit::Wait => inner.store.db.write(&batch),
            Commit::Sync => inner.store.db.write_sync(&batch),
            Commit::Queued => inner.store.db.write_queued(&mut batch),
            Commit::BeforeSettle => inner.store.db.write_queued_before_settle(&mut batch),
        };
        match committed {
            Ok(()) => {
                let mut index = inner.index.write();
                for tsuid in new_series.iter() {
                    index.insert(tsuid.clone(), inner.buckets);
                }
                for (id, u) in lasts.drain() {
                    if let Some(s) = index.series.get_mut(id as usize) {
                        s.last = Some(u.point);
                        s.last_exact |= u.new_row;
                    }
                    if !index.retired.is_empty() {
                        index.revive(id);
                    }
                }
                drop(index);
                if !marked.is_empty() {
                    state.markers_written = state.markers_written.wrapping_add(1);
                }
                state.scratch.give_back(batch, lasts);
                drop(state);
                inner.stats.series_created(new_series.len() as u64);
                inner.stats.points_written(ok);
            }
            Err(e) => {
                // The markers noted above were not written after all.
                for series in &marked {
                    series.set_marked(0, 0);
                }
                state.scratch.give_back(batch, lasts);
                drop(state);
                tracing::warn!(error = %e, points = ok, "write batch failed");
                let e = Arc::new(e);
                for r in results.iter_mut().filter(|r| r.is_ok()) {
                    *r = Err(Error::WriteFailed(e.clone()));
                }
            }
        }
        self.count_rejections(&results);
        results
    }

    fn count_rejections(&self, results: &[Result<()>]) {
        for e in results.iter().filter_map(|r| r.as_ref().err()) {
            self.inner.stats.rejected(e);
        }
    }

    /// Validates and resolves every point, through the series cache.
    fn prepare_all<S: AsRef<str>>(
        &self,
        points: &[PointRef<'_, S>],
    ) -> Vec<Result<Prepared<Arc<CachedSeries>>>> {
        let mut key = Vec::with_capacity(128);
        // One read lock for the whole batch; released only to add a series.
        let mut cache = Some(self.inner.series_cache.reader());
        let mut floors = BatchFloors::new(&self.inner.policy);
        points
            .iter()
            .map(|p| {
                let enc = prepare_value(p.value, p.timestamp, p.metric)?;
                let ts_ms = timestamp_to_ms(p.timestamp, p.metric, p.tags, || enc.describe())?;
                raw_key(p.metric, p.tags, &mut key);
                let cached = cache
                    .get_or_insert_with(|| self.inner.series_cache.reader())
                    .get(&key);
                let series = match cached {
                    Some(s) => s,
                    None => {
                        cache = None;
                        let tsuid = self.resolve_series(p.metric, p.tags)?;
                        let salt = salt_of(&tsuid, self.inner.buckets);
                        self.inner.series_cache.insert(&key, tsuid, salt)
                    }
                };
                self.check_owned(series.salt, p.metric)?;
                self.check_retention(&mut floors, &series.tsuid, ts_ms, p.timestamp, || {
                    Ok(p.metric.to_string())
                })?;
                Ok(Prepared {
                    series,
                    ts_ms,
                    value: p.value,
                    enc,
                })
            })
            .collect()
    }

    /// Refuses a point of a series in salt bucket `salt` unless this database owns it.
    fn check_owned(&self, salt: u8, metric: &str) -> Result<()> {
        match self.inner.opts.owned_salts {
            Some((lo, hi)) if !(lo..=hi).contains(&salt) => Err(PointError::NotOwned {
                metric: metric.to_string(),
                salt,
                lo,
                hi,
                buckets: self.inner.buckets,
            }
            .into()),
            _ => Ok(()),
        }
    }

    /// Validates a point's names in OpenTSDB's order and resolves its UIDs.
    fn resolve_series<S: AsRef<str>>(&self, metric: &str, tags: &[(S, S)]) -> Result<Tsuid> {
        let o = &self.inner.opts;
        check_tag_set(metric, tags, o.max_tags)?;
        o.name_rules.check_metric(metric)?;
        for (k, v) in tags {
            o.name_rules.check_tag(k.as_ref(), v.as_ref())?;
        }
        let metric = self.resolve(UidKind::Metric, metric, o.auto_create_metrics)?;
        let mut pairs = Vec::with_capacity(tags.len());
        for (k, v) in tags {
            pairs.push((
                self.resolve(UidKind::Tagk, k.as_ref(), o.auto_create_tagks)?,
                self.resolve(UidKind::Tagv, v.as_ref(), o.auto_create_tagvs)?,
            ));
        }
        pairs.sort_unstable();
        pairs.dedup();
        Tsuid::new(metric, &mut pairs)
    }

    fn resolve(&self, kind: UidKind, name: &str, create: bool) -> Result<Uid> {
        if create {
            Ok(self.get_or_assign(kind, name)?.0)
        } else {
            self.inner.uids.lookup(kind, name)
        }
    }

    /// The UID of `name`, assigning (and counting) the next one if it has none.
    fn get_or_assign(&self, kind: UidKind, name: &str) -> Result<(Uid, bool)> {
        let got = self.inner.uids.get_or_assign(kind, name)?;
        if got.1 {
            self.inner.stats.uid_assigned(kind);
        }
        Ok(got)
    }

    /// The UID of a name.
    pub fn uid(&self, kind: UidKind, name: &str) -> Result<Uid> {
        self.inner.uids.lookup(kind, name)
    }

    /// The name of a UID.
    pub fn uid_name(&self, kind: UidKind, uid: Uid) -> Result<String> {
        Ok(self.inner.uids.name(kind, uid)?.to_string())
    }

    /// Assigns a UID to `name` after checking it (`/api/uid/assign`). Fails with
    /// [`Error::NameExists`] if it already has one.
    pub fn assign_uid(&self, kind: UidKind, name: &str) -> Result<Uid> {
        self.check_writable()?;
        let what = match kind {
            UidKind::Metric => "metric",
            UidKind::Tagk => "tagk",
            UidKind::Tagv => "tagv",
        };
        self.inner
            .opts
            .name_rules
            .check(name, || what.to_string())?;
        match self.get_or_assign(kind, name)? {
            (uid, true) => Ok(uid),
            (uid, false) => Err(Error::NameExists {
                kind,
                name: name.to_string(),
                uid: uid.to_string(),
            }),
        }
    }

    /// Renames a UID's name.
    pub fn rename_uid(&self, kind: UidKind, old: &str, new: &str) -> Result<()> {
        self.check_writable()?;
        self.inner
            .opts
            .name_rules
            .check(new, || kind.as_str().to_string())?;
        self.inner.uids.rename(kind, old, new)?;
        // A name may now resolve to another UID, and a metric to another retention rule.
        self.inner.series_cache.clear();
        self.inner.policy.forget();
        Ok(())
    }

    /// Drops the in-memory caches, as OpenTSDB's `dropcaches` does: the UID maps are read
    /// again from the UID table, the write path's series cache is emptied (handles made
    /// before become stale: [`Tsdb::series_epoch`] changes), and so is the engine's block
    /// cache. The series index is not a cache (it is the store's own record), and stays.
    pub fn drop_caches(&self) -> Result<()> {
        self.inner.uids.reload()?;
        self.inner.series_cache.clear();
        self.inner.store.db.clear_block_cache();
        Ok(())
    }

    /// Up to `max` names of `kind` starting with `prefix`, sorted (`/api/suggest`). Names
    /// whose every series has expired are left out (see [`Tsdb::expire`]).
    pub fn suggest(&self, kind: UidKind, prefix: &str, max: usize) -> Vec<String> {
        let index = self.inner.index.read();
        let retired = &index.retired_names[kind.index()];
        if retired.is_empty() {
            return self.inner.uids.suggest(kind, prefix, max);
        }
        let mut names = self.inner.uids.suggest(kind, prefix, usize::MAX);
        names.retain(|n| {
            self.inner
                .uids
                .get(kind, n)
                .is_none_or(|u| !retired.contains(&u))
        });
        names.truncate(max);
        names
    }

    /// The salt bucket count fixed at creation.
    pub fn salt_buckets(&self) -> u8 {
        self.inner.buckets
    }

    /// Number of series, not counting deleted ones (`strata delete`).
    pub fn series_count(&self) -> usize {
        self.inner.index.read().live_len()
    }

    /// The options the database was opened with.
    pub fn options(&self) -> &TsdbOptions {
        &self.inner.opts
    }

    pub(crate) fn names_of(&self, tsuid: &Tsuid) -> Result<(String, Vec<(String, String)>)> {
        self.inner.uids.series_names(tsuid.metric(), tsuid.tags())
    }

    /// Counters now.
    pub fn stats(&self) -> TsdbStats {
        let mut s = self.inner.stats.snapshot();
        s.series_count = self.series_count() as u64;
        s
    }

    /// Whether a [`Tsdb::write`] now would wait for the engine (an fsync or a write stall; see
    /// `Db::write_may_block`). Writes that assign new UIDs also fsync, which this does not
    /// foresee.
    pub fn write_may_block(&self) -> bool {
        self.inner.store.db.write_may_block()
    }

    /// Waits until the points of every [`Tsdb::write_series`] before the call are visible.
    pub fn settle(&self) -> Result<()> {
        Ok(self.inner.store.db.settle()?)
    }

    /// Fsyncs the engine's WAL.
    pub fn sync(&self) -> Result<()> {
        Ok(self.inner.store.db.sync_wal()?)
    }

    /// Flushes the engine's memtables.
    pub fn flush(&self) -> Result<()> {
        Ok(self.inner.store.db.flush()?)
    }

    /// Makes a consistent copy of the database in `target` while writes go on (engine
    /// checkpoint: every point acknowledged before the call is in it). The series index, UIDs
    /// and dirty-row markers are engine tables, so they are in the copy too.
    pub fn checkpoint(
        &self,
        target: &Path,
        progress: strata_engine::Progress<'_>,
    ) -> Result<strata_engine::CheckpointReport> {
        Ok(self.inner.store.db.checkpoint(target, progress)?)
    }

    /// Compacts every table of the engine fully (`strata compact`, benches).
    pub fn compact_all(&self) -> Result<()> {
        Ok(self.inner.store.db.compact_all()?)
    }

    /// [`Tsdb::compact_all`], telling `progress` `(bytes done, bytes in all)`.
    pub fn compact_all_with_progress(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<()> {
        Ok(self.inner.store.db.compact_all_with_progress(progress)?)
    }

    /// The engine's counters, for `/metrics` and `/api/stats`.
    pub fn engine_stats(&self) -> EngineStats {
        match &self.inner.store.trees {
            None => self.inner.store.db.stats(),
            Some(trees) => crate::trees::merged_stats(&trees.set.read()),
        }
    }

    /// Refuses a point of `tsuid` at `ts_ms` (sent as `timestamp`) older than its metric's
    /// retention; `metric` names the metric for the error.
    fn check_retention(
        &self,
        floors: &mut BatchFloors<'_>,
        tsuid: &Tsuid,
        ts_ms: i64,
        timestamp: i64,
        metric: impl FnOnce() -> Result<String>,
    ) -> Result<()> {
        let policy = &self.inner.policy;
        match floors.floor_ms(tsuid.metric()) {
            Some(floor) if ts_ms < floor => Err(PointError::Expired {
                metric: metric()?,
                timestamp,
                retention: format_retention(
                    policy
                        .keep_ms(tsuid.metric())
                        .map(std::time::Duration::from_millis),
                ),
            }
            .into()),
            _ => Ok(()),
        }
    }

    /// The retention policy, for the read path and the expiry sweep.
    pub(crate) fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// The retention the database was opened with.
    pub fn retention(&self) -> &Retention {
        self.inner.policy.retention()
    }

    /// The engine tables and the writers' lock, for the modules that add reads, deletes, row
    /// compaction and annotations to `Tsdb`.
    pub(crate) fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The series index.
    pub(crate) fn index(&self) -> &RwLock<SeriesIndex> {
        &self.inner.index
    }

    /// The UID maps.
    pub(crate) fn uids(&self) -> &UidTable {
        &self.inner.uids
    }

    /// The refresh state of a read replica; `None` on a writer.
    pub(crate) fn replica(&self) -> Option<&Replica> {
        self.inner.replica.as_ref()
    }

    /// The live counters.
    pub(crate) fn counters(&self) -> &Stats {
        &self.inner.stats
    }

    /// Where the row compactor resumes its walk of the dirty markers.
    pub(crate) fn rowcompact_cursor(&self) -> &Mutex<RowCompactCursor> {
        &self.inner.rowcompact_cursor
    }

    /// When a write last went into a row whose hour had closed (ms since the epoch).
    pub(crate) fn last_closed_write_ms(&self) -> u64 {
        self.inner.last_closed_write_ms.load(Ordering::Relaxed)
    }

    /// Forgets the write path's resolved series, after a change that may resolve a name to
    /// another series or remove the dirty markers it remembers.
    pub(crate) fn forget_cached_series(&self) {
        self.inner.series_cache.clear();
    }

    /// What a read needs of this database.
    pub(crate) fn fetcher(&self) -> Fetcher<'_> {
        Fetcher {
            index: &self.inner.index,
            buckets: self.inner.buckets,
            block_cache_bytes: self.inner.opts.db.block_cache_bytes as u64,
        }
    }
}

/// The engine options of `opts`, with the tsdb's clock.
pub(crate) fn engine_options(opts: &TsdbOptions) -> DbOptions {
    let mut db_opts = opts.db.clone();
    db_opts.clock = opts.clock.clone();
    db_opts
}

/// A point's value encoded for its cell, or OpenTSDB's error for a value it cannot store.
fn prepare_value(value: Value, timestamp: i64, metric: &str) -> Result<EncodedValue> {
    check_finite(value, metric, timestamp)?;
    Ok(encode_value(value))
}

#[cfg(test)]
pub(crate) mod tests {
    use strata_engine::ScanOptions;

    use super::*;
    use crate::rowkey::RowKey;

    /// Each writer of [`Tsdb::write_series_visible`] reads all its points back at once,
    /// though writers race for the commit and none wakes the apply thread.
    #[test]
    fn visible_series_writes_read_back_at_once() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let db = Tsdb::open(dir.path(), TsdbOptions::default())?;
        let hour = 1_356_998_400;
        std::thread::scope(|s| {
            let writers: Vec<_> = (0..4)
                .map(|w| {
                    let db = &db;
                    s.spawn(move || -> Result<()> {
                        let metric = format!("m{w}");
                        let h = db.series_handle(&metric, &[("host", "a")])?;
                        for round in 0..50i64 {
                            let points: Vec<SeriesPoint<'_>> = (0..20)
                                .map(|i| SeriesPoint {
                                    series: &h,
                                    timestamp: hour + round * 20 + i,
                                    value: Value::Int(round * 20 + i),
                                })
                                .collect();
                            for r in db.write_series_visible(&points)? {
                                r?;
                            }
                            let read =
                                db.read(&crate::ReadRequest::metric(&metric, &[], 0, i64::MAX))?;
                            let n = read.first().map_or(0, |r| r.points.len()) as i64;
                            assert_eq!(n, (round + 1) * 20, "writer {w}, round {round}");
                        }
                        Ok(())
                    })
                })
                .collect();
            writers
                .into_iter()
                .try_for_each(|t| t.join().expect("writer panicked"))
        })
    }

    /// Points written through a [`SeriesHandle`] read back as the same points written by
    /// name; a handle's errors name its series; a rename starts a new series epoch.
    #[test]
    fn series_handles_write_what_names_write() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let db = Tsdb::open(dir.path(), TsdbOptions::default())?;
        let hour = 1_356_998_400;
        let tags = [("host", "a"), ("dc", "x")];
        let by_name: Vec<PointRef<'_>> = (0..3)
            .map(|i| PointRef {
                metric: "m",
                tags: &tags,
                timestamp: hour + i,
                value: Value::Int(i),
            })
            .collect();
        for r in db.write(&by_name) {
            r?;
        }
        let h = db.series_handle("m", &tags)?;
        let h2 = db.series_handle("m2", &[("host", "a")])?;
        assert_eq!(h.epoch(), db.series_epoch());
        let by_handle = [
            SeriesPoint {
                series: &h,
                timestamp: (hour + 3) * 1000 + 500,
                value: Value::Float(1.5),
            },
            SeriesPoint {
                series: &h2,
                timestamp: hour,
                value: Value::Float(f64::NAN),
            },
            SeriesPoint {
                series: &h2,
                timestamp: hour + 7200,
                value: Value::Int(-4),
            },
            SeriesPoint {
                series: &h,
                timestamp: -1,
                value: Value::Int(0),
            },
        ];
        let results = db.write_series(&by_handle);
        assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
        let nan = results[1].as_ref().err().map(ToString::to_string);
        assert!(nan.is_some_and(|m| m.contains("m2")), "{:?}", results[1]);
        let neg = results[3].as_ref().err().map(ToString::to_string);
        assert!(
            neg.is_some_and(|m| m.contains("host=a") && m.contains("dc=x")),
            "{:?}",
            results[3]
        );
        // Queued: visible once settled.
        db.settle()?;
        let read = db.read(&crate::ReadRequest::metric("m", &[], 0, i64::MAX))?;
        assert_eq!(read.len(), 1);
        assert_eq!(
            read[0].points,
            vec![
                (hour * 1000, Value::Int(0)),
                (hour * 1000 + 1000, Value::Int(1)),
                (hour * 1000 + 2000, Value::Int(2)),
                (hour * 1000 + 3500, Value::Float(1.5)),
            ]
        );
        let read2 = db.read(&crate::ReadRequest::metric("m2", &[], 0, i64::MAX))?;
        assert_eq!(read2.len(), 1);
        assert_eq!(
            read2[0].points,
            vec![((hour + 7200) * 1000, Value::Int(-4))]
        );
        assert_eq!(
            db.series_info(1)?.and_then(|s| s.last),
            Some(((hour + 7200) * 1000, Value::Int(-4))),
            "the newest point is tracked as for writes by name"
        );
        // Invalid names are refused as a write refuses them, and create nothing.
        assert!(db.series_handle("m", &[] as &[(&str, &str)]).is_err());
        assert!(db.series_handle("bad metric", &[("k", "v")]).is_err());
        assert_eq!(db.series_count(), 2);
        db.rename_uid(UidKind::Tagv, "a", "b")?;
        assert_ne!(h.epoch(), db.series_epoch(), "a rename makes handles stale");
        Ok(())
    }

    /// Every UID a write or `assign_uid` assigns is counted once, per kind.
    #[test]
    fn assigned_uids_are_counted() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let db = Tsdb::open(dir.path(), TsdbOptions::default())?;
        let tags = [("host", "a")];
        for metric in ["sys.cpu", "sys.mem", "sys.cpu"] {
            let p = PointRef {
                metric,
                tags: &tags,
                timestamp: 1_356_998_400,
                value: Value::Int(1),
            };
            for r in db.write(&[p]) {
                r?;
            }
        }
        db.assign_uid(UidKind::Metric, "x")?;
        assert!(db.assign_uid(UidKind::Metric, "x").is_err());
        let s = db.stats();
        assert_eq!(s.uids_assigned_metrics, 3);
        assert_eq!((s.uids_assigned_tagk, s.uids_assigned_tagv), (1, 1));
        Ok(())
    }

    #[test]
    fn dirty_markers_are_written_with_the_points_and_survive_reopen() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let clock = Arc::new(crate::clock::ManualClock::new(42_000));
        let opts = TsdbOptions {
            clock: clock.clone(),
            ..TsdbOptions::default()
        };
        {
            let db = Tsdb::open(dir.path(), opts.clone())?;
            let tags = [("host", "a")];
            let points: Vec<PointRef<'_>> = [1_356_998_400, 1_356_998_401, 1_357_002_000]
                .into_iter()
                .map(|timestamp| PointRef {
                    metric: "m",
                    tags: &tags,
                    timestamp,
                    value: Value::Int(1),
                })
                .collect();
            for r in db.write_sync(&points) {
                r?;
            }
        }
        let db = Tsdb::open(dir.path(), opts)?;
        let inner = &db.inner;
        let mut hours = Vec::new();
        for row in inner.store.db.scan(
            &inner.store.meta,
            &ScanOptions::prefix(&[meta::DIRTY_PREFIX]),
        )? {
            let row = row?;
            let rk = RowKey::decode(&row.key[1..])?;
            assert_eq!(row.cells[0].value.as_ref(), &42_000u64.to_be_bytes());
            hours.push(rk.base_time);
        }
        assert_eq!(hours, vec![1_356_998_400, 1_357_002_000]);
        Ok(())
    }

    #[test]
    fn newest_point_is_exact_after_reopen_though_persisted_once_per_row() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let tags = [("host", "a")];
        let write = |db: &Tsdb, timestamp: i64, v: i64| -> Result<()> {
            let p = PointRef {
                metric: "m",
                tags: &tags,
                timestamp,
                value: Value::Int(v),
            };
            db.write_sync(&[p]).into_iter().collect()
        };
        let hour = 1_356_998_400;
        {
            let db = Tsdb::open(dir.path(), TsdbOptions::default())?;
            for (i, ts) in [hour, hour + 10, hour + 20, hour + 5]
                .into_iter()
                .enumerate()
            {
                write(&db, ts, i as i64)?;
            }
            // Only the first point of the row was persisted as the newest.
            let persisted = db
                .store()
                .db
                .scan(
                    &db.inner.store.meta,
                    &ScanOptions::prefix(&[meta::LAST_PREFIX]),
                )?
                .map(|r| r.map(|r| r.cells[0].value.clone()))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            assert_eq!(persisted.len(), 1);
            assert_eq!(
                db.series_info(0)?.and_then(|s| s.last),
                Some((hour * 1000 + 20_000, Value::Int(2)))
            );
        }
        let db = Tsdb::open(dir.path(), TsdbOptions::default())?;
        assert!(!db.inner.index.read().series[0].last_exact);
        // A late point in the same row must not pass for the newest.
        write(&db, hour + 15, 9)?;
        assert_eq!(
            db.series_info(0)?.and_then(|s| s.last),
            Some((hour * 1000 + 20_000, Value::Int(2)))
        );
        write(&db, hour + 20, 7)?;
        assert_eq!(
            db.series_info(0)?.and_then(|s| s.last),
            Some((hour * 1000 + 20_000, Value::Int(7))),
            "the later write wins at the same instant"
        );
        write(&db, hour + 3600, 8)?;
        assert_eq!(
            db.series_info(0)?.and_then(|s| s.last),
            Some(((hour + 3600) * 1000, Value::Int(8)))
        );
        Ok(())
    }

    #[test]
    fn one_dirty_marker_per_open_row_and_again_for_closed_rows() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let hour = 1_356_998_400u64;
        let clock = Arc::new(crate::clock::ManualClock::new(hour * 1000));
        let opts = TsdbOptions {
            clock: clock.clone(),
            ..TsdbOptions::default()
        };
        let db = Tsdb::open(dir.path(), opts)?;
        let tags = [("host", "a")];
        let write = |timestamp: u64| -> Result<()> {
            let p = PointRef {
                metric: "m",
                tags: &tags,
                timestamp: timestamp as i64,
                value: Value::Int(1),
            };
            db.write(&[p, p]).into_iter().collect()
        };
        let marker = || -> Result<Option<Vec<u8>>> {
            let mut rows = db.store().db.scan(
                &db.inner.store.meta,
                &ScanOptions::prefix(&[meta::DIRTY_PREFIX]),
            )?;
            Ok(rows.next().transpose()?.map(|r| r.cells[0].value.to_vec()))
        };
        write(hour)?;
        assert_eq!(marker()?, Some((hour * 1000).to_be_bytes().to_vec()));
        clock.set_ms((hour + 60) * 1000);
        write(hour + 30)?;
        assert_eq!(
            marker()?,
            Some((hour * 1000).to_be_bytes().to_vec()),
            "an open row is marked once"
        );
        // The compactor clears the marker of a closed row, so the next write re-marks it.
        clock.set_ms((hour + 3600 + 601) * 1000);
        let before = db.stats();
        db.rowcompact_all()?;
        assert!(db.stats().series_count == before.series_count);
        assert_eq!(marker()?, None);
        write(hour + 40)?;
        assert_eq!(
            marker()?,
            Some(((hour + 3600 + 601) * 1000).to_be_bytes().to_vec())
        );
        // Until markers may have been deleted again, later writes to the closed row need none.
        clock.set_ms((hour + 3600 + 700) * 1000);
        write(hour + 50)?;
        assert_eq!(
            marker()?,
            Some(((hour + 3600 + 601) * 1000).to_be_bytes().to_vec()),
            "a closed row is marked once per marker epoch"
        );
        db.rowcompact_all()?;
        assert_eq!(marker()?, None);
        write(hour + 55)?;
        assert_eq!(
            marker()?,
            Some(((hour + 3600 + 700) * 1000).to_be_bytes().to_vec()),
            "a compaction starts a new epoch"
        );
        // A compaction of other rows starts a new epoch too: re-marking is then harmless.
        db.rowcompact_all()?;
        write(hour + 56)?;
        assert!(marker()?.is_some());
        let points = db.read(&crate::ReadRequest::ids(
            &db.find_series("m", &[])?,
            0,
            i64::MAX,
        ))?;
        let ts: Vec<i64> = points[0].points.iter().map(|p| p.0).collect();
        let want: Vec<i64> = [0, 30, 40, 50, 55, 56]
            .iter()
            .map(|s| (hour as i64 + s) * 1000)
            .collect();
        assert_eq!(ts, want);
        Ok(())
    }

    /// A shared allocator that numbers names from 100 in the order it first sees them.
    #[derive(Debug, Default)]
    pub(crate) struct SharedNames(Mutex<FxHashMap<(UidKind, String), Uid>>);

    impl crate::UidAllocator for SharedNames {
        fn allocate(&self, kind: UidKind, name: &str, _local_max: u32) -> Result<Uid> {
            let mut m = self.0.lock();
            let n = 100 + m.len() as u32;
            let uid = *m
                .entry((kind, name.to_string()))
                .or_insert(Uid::from_u32(n).ok_or(Error::UidsExhausted { kind })?);
            Ok(uid)
        }
    }

    /// With a shared allocator, two databases give a name the allocator's UID; with owned salt
    /// buckets, points of other buckets are refused one by one, naming the bucket and range.
    #[test]
    fn shared_uids_and_owned_salt_buckets() -> Result<()> {
        let shared: Arc<dyn crate::UidAllocator> = Arc::new(SharedNames::default());
        let (d1, d2) = (
            tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?,
            tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?,
        );
        let opts = |owned| TsdbOptions {
            uid_allocator: Some(shared.clone()),
            owned_salts: Some(owned),
            salt_buckets: Some(4),
            ..TsdbOptions::default()
        };
        let a = Tsdb::open(d1.path(), opts((0, 1)))?;
        let b = Tsdb::open(d2.path(), opts((2, 3)))?;
        b.assign_uid(UidKind::Metric, "other")?;
        let hosts: Vec<String> = (0..16).map(|i| format!("h{i}")).collect();
        let tags: Vec<[(&str, &str); 1]> = hosts.iter().map(|h| [("host", h.as_str())]).collect();
        let points: Vec<PointRef<'_, &str>> = tags
            .iter()
            .map(|t| PointRef {
                metric: "m",
                tags: t,
                timestamp: 1_356_998_400,
                value: Value::Int(1),
            })
            .collect();
        let (ra, rb) = (a.write(&points), b.write(&points));
        for (i, (x, y)) in ra.iter().zip(&rb).enumerate() {
            assert!(
                x.is_ok() != y.is_ok(),
                "point {i} stored by exactly one: {x:?} {y:?}"
            );
            let refused = x
                .as_ref()
                .err()
                .or(y.as_ref().err())
                .map(ToString::to_string);
            let refused = refused.unwrap_or_default();
            assert!(
                refused.contains("salt bucket") && refused.contains("owns salt buckets"),
                "{refused}"
            );
        }
        assert!(ra.iter().any(Result::is_ok) && rb.iter().any(Result::is_ok));
        assert_eq!(a.uid(UidKind::Tagk, "host")?, b.uid(UidKind::Tagk, "host")?);
        assert_eq!(a.uid(UidKind::Tagv, "h3")?, b.uid(UidKind::Tagv, "h3")?);
        assert_eq!(a.uid(UidKind::Metric, "m")?, b.uid(UidKind::Metric, "m")?);
        assert_eq!(a.uid(UidKind::Metric, "m")?.get(), 101);
        let e = a
            .rename_uid(UidKind::Metric, "m", "n")
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("shared between writers")));
        let e = Tsdb::open(
            tempfile::tempdir()
                .map_err(|e| Error::InvalidArgument(e.to_string()))?
                .path(),
            opts((3, 4)),
        )
        .err()
        .map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("3-4")));
        Ok(())
    }

    #[test]
    fn a_write_after_a_delete_marks_the_row_again() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let hour = 1_356_998_400u64;
        let clock = Arc::new(crate::clock::ManualClock::new(hour * 1000));
        let opts = TsdbOptions {
            clock,
            ..TsdbOptions::default()
        };
        let db = Tsdb::open(dir.path(), opts)?;
        let tags = [("host", "a")];
        let write = |timestamp: u64| -> Result<()> {
            let p = PointRef {
                metric: "m",
                tags: &tags,
                timestamp: timestamp as i64,
                value: Value::Int(1),
            };
            db.write(&[p]).into_iter().collect()
        };
        let markers = || -> Result<usize> {
            Ok(db
                .store()
                .db
                .scan(
                    &db.inner.store.meta,
                    &ScanOptions::prefix(&[meta::DIRTY_PREFIX]),
                )?
                .count())
        };
        write(hour)?;
        assert_eq!(markers()?, 1);
        let ids = db.find_series("m", &[])?;
        db.delete(&ids, 0, i64::MAX / 2)?;
        assert_eq!(markers()?, 0, "the delete cleared the marker");
        write(hour + 1)?;
        assert_eq!(markers()?, 1, "the open row is marked again");
        Ok(())
    }

    #[test]
    fn bucket_count_is_fixed_at_creation() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let opts = |b| TsdbOptions {
            salt_buckets: b,
            ..TsdbOptions::default()
        };
        assert!(Tsdb::open(dir.path(), opts(Some(0))).is_err());
        drop(Tsdb::open(dir.path(), opts(Some(5)))?);
        assert_eq!(Tsdb::open(dir.path(), opts(None))?.salt_buckets(), 5);
        assert_eq!(Tsdb::open(dir.path(), opts(Some(5)))?.salt_buckets(), 5);
        let err = Tsdb::open(dir.path(), opts(Some(20)))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("fixed when the database is created"), "{err}");
        assert!(err.contains("has 5 buckets"), "{err}");
        Ok(())
    }

    #[test]
    fn uid_widths_are_stored_and_only_three_is_accepted() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let opts = |w: [Option<u8>; 3]| TsdbOptions {
            uid_widths: w,
            ..TsdbOptions::default()
        };
        let err = |w| {
            Tsdb::open(dir.path(), opts(w))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        let e = err([Some(4), None, None]);
        assert!(e.contains("metric_uid_width 4 is not supported"), "{e}");
        drop(Tsdb::open(dir.path(), opts([Some(3), None, Some(3)]))?);
        drop(Tsdb::open(dir.path(), opts([None; 3]))?);
        let e = err([None, None, Some(2)]);
        assert!(e.contains("tagv_uid_width is fixed"), "{e}");
        assert!(e.contains("3-byte tagv UIDs"), "{e}");
        Ok(())
    }
}
