//! Read replicas: a [`Tsdb`] over a read-only follower of an object-store prefix
//! ([`Tsdb::open_read_only`]), which [`Tsdb::refresh`] keeps up with the writer.
//!
//! A replica serves what the writer has flushed: the files of the newest manifest version. When
//! a refresh finds that the files of the UID or meta table changed, the UID maps and then the
//! series index are loaded again from the new files and swapped in; new data rows alone are
//! read as they are, with no load. A query sees the old or the new index, never a mix: names are
//! swapped before the index (a series the new index holds has its names), and the engine's
//! files before both (a series the old index holds still has its rows, or none, which reads as
//! no points). A UID renamed on the writer changes its name here with the next refresh.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use strata_engine::Db;

use crate::background::Background;
use crate::error::{Error, Result};
use crate::series_index::SeriesIndex;
use crate::tsdb::{DATA_TABLE, META_TABLE, Tsdb, TsdbOptions, UID_TABLE, engine_options};

/// The error of a replica opened on a prefix no writer has flushed a database to yet: the
/// engine's `NoSuchTable`, whose kind is `NotFound`, so a caller can wait for the writer.
pub(crate) fn no_database_yet() -> Error {
    Error::Engine(strata_engine::Error::NoSuchTable(
        "the object store holds no database yet: a writer creates it with its first flush".into(),
    ))
}

/// Whether `e` is [`Tsdb::open_read_only`]'s error for a prefix with no database yet.
pub fn is_no_database_yet(e: &Error) -> bool {
    matches!(e, Error::Engine(strata_engine::Error::NoSuchTable(_)))
}

/// The refresh state of a read replica.
#[derive(Debug, Default)]
pub(crate) struct Replica {
    /// Held by the one refresh running.
    refreshing: Mutex<()>,
    /// The engine took a new file set whose names and series are not loaded yet (the load
    /// failed): the next refresh loads them even if the manifest has not moved.
    stale: AtomicBool,
    refreshes: AtomicU64,
    changes: AtomicU64,
    loads: AtomicU64,
    errors: AtomicU64,
    last_ok_ms: AtomicU64,
    last_load_micros: AtomicU64,
}

/// A read replica's refresh counters ([`Tsdb::replica_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicaStats {
    /// Refreshes that read the manifest head without an error.
    pub refreshes: u64,
    /// Refreshes that found a new file set.
    pub changes: u64,
    /// Loads of the UID maps and the series index, done when the files of the tables they
    /// come from changed (new names, series, dirty markers or newest points): a flush of
    /// data rows alone needs none.
    pub loads: u64,
    /// Refreshes that failed; the replica went on serving what it had.
    pub errors: u64,
    /// When the last refresh succeeded, ms since the epoch by the tsdb's clock (the open
    /// counts as one).
    pub last_ok_ms: u64,
    /// How long loading the UID maps and the series index took the last time, µs.
    pub last_load_micros: u64,
}

impl Replica {
    /// Records a successful refresh (or the open) at `now_ms`.
    pub(crate) fn mark_ok(&self, now_ms: u64) {
        self.last_ok_ms.store(now_ms, Relaxed);
    }
}

impl Tsdb {
    /// Opens a read replica of the object-store prefix in `opts.db.storage`, which must be
    /// object storage: the writer's tables as of its newest manifest version, with their UIDs
    /// and series index. It creates nothing and writes nothing; every write returns the
    /// engine's read-only error, and it runs no row compaction or retention of its own (the
    /// writer's reach it through [`Tsdb::refresh`]). `dir` holds only local state (the engine
    /// takes no writes to log) and must not be a writer's directory.
    ///
    /// A prefix that no writer has flushed a database to yet is an error for which
    /// [`is_no_database_yet`] is true: the caller may wait and try again.
    pub fn open_read_only(dir: impl AsRef<Path>, opts: TsdbOptions) -> Result<Tsdb> {
        let db = Db::open_read_only(dir, engine_options(&opts))?;
        if [DATA_TABLE, UID_TABLE, META_TABLE]
            .iter()
            .any(|t| db.table(t).is_none())
        {
            return Err(no_database_yet());
        }
        let replica = Replica::default();
        replica.mark_ok(opts.clock.now_ms());
        Tsdb::on_db(db, opts, Some(replica))
    }

    /// On a read replica, the engine's read-only error; before anything is resolved, so that a
    /// refused write assigns no name even in memory.
    pub(crate) fn check_writable(&self) -> Result<()> {
        match self.replica() {
            None => Ok(()),
            Some(_) => Err(Error::Engine(strata_engine::Error::ReadOnly(
                "this is a read replica of an object store; send writes to its writer".into(),
            ))),
        }
    }

    /// Whether this is a read replica ([`Tsdb::open_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.replica().is_some()
    }

    /// A replica reads the newest manifest version; if the writer flushed or compacted since,
    /// it swaps in the new files, then loads the UID maps and the series index from them.
    /// True if anything changed. On a writer it does nothing. A failure (the store
    /// unreachable) leaves the replica serving what it had; the next call tries again.
    pub fn refresh(&self) -> Result<bool> {
        let Some(r) = self.replica() else {
            return Ok(false);
        };
        let _one = r.refreshing.lock();
        let result = self.refresh_locked(r);
        match &result {
            Ok(changed) => {
                r.refreshes.fetch_add(1, Relaxed);
                r.changes.fetch_add(u64::from(*changed), Relaxed);
                r.last_ok_ms.store(self.options().clock.now_ms(), Relaxed);
            }
            Err(_) => {
                r.errors.fetch_add(1, Relaxed);
            }
        }
        result
    }

    fn refresh_locked(&self, r: &Replica) -> Result<bool> {
        let moved = self.move_files(r)?;
        if !r.stale.load(Relaxed) {
            return Ok(moved);
        }
        self.load_names_and_index(r)?;
        Ok(true)
    }

    /// On a replica whose files the writer has deleted since (superseded for longer than the
    /// writer's delete delay, while the replica's refreshes failed or lagged): takes in the
    /// writer's newest files, as a refresh does, but leaves the names and the series index
    /// for the next refresh, so that series ids a read holds keep naming the same series.
    pub(crate) fn catch_up_files(&self) -> Result<bool> {
        let Some(r) = self.replica() else {
            return Ok(false);
        };
        let _one = r.refreshing.lock();
        self.move_files(r)
    }

    /// Swaps in the writer's newest files; marks the names and index stale when the UID or
    /// meta table moved, and every newest point a lower bound when anything did. True if
    /// the files moved.
    fn move_files(&self, r: &Replica) -> Result<bool> {
        let store = self.store();
        let moved = match &store.trees {
            None => match store.db.refresh_changes()? {
                Some(tables) => {
                    if tables.contains(self.uids().table()) || tables.contains(&store.meta) {
                        r.stale.store(true, Relaxed);
                    }
                    true
                }
                None => false,
            },
            Some(trees) => {
                let (moved, names_moved, result) = trees.refresh();
                if names_moved {
                    r.stale.store(true, Relaxed);
                }
                if let Err(e) = result {
                    // The trees that moved show their new rows already.
                    if moved {
                        self.forget_exact_lasts();
                    }
                    return Err(e);
                }
                moved
            }
        };
        if moved {
            self.forget_exact_lasts();
        }
        Ok(moved)
    }

    /// Loads the UID maps, then the series index, from the files now in place.
    fn load_names_and_index(&self, r: &Replica) -> Result<()> {
        let store = self.store();
        let started = Instant::now();
        // Names first: a series in the new index must find its names (see the module doc).
        let index = match &store.trees {
            None => {
                self.uids().reload()?;
                SeriesIndex::load(&store.db, &store.meta, self.salt_buckets())?
            }
            Some(trees) => trees.load(self.uids(), self.salt_buckets())?,
        };
        {
            // The order of `refine_last`, which updates newest points under both.
            let _writes = store.writes.lock();
            *self.index().write() = index;
        }
        self.forget_cached_series();
        r.stale.store(false, Relaxed);
        r.loads.fetch_add(1, Relaxed);
        r.last_load_micros
            .store(started.elapsed().as_micros() as u64, Relaxed);
        Ok(())
    }

    /// Makes every cached newest point a lower bound, read from its row again: new data rows
    /// are visible that may hold newer points.
    fn forget_exact_lasts(&self) {
        // The order of `refine_last`, which updates newest points under both.
        let _writes = self.store().writes.lock();
        self.index().write().forget_exact_lasts();
    }

    /// A read replica's refresh counters; `None` on a writer.
    pub fn replica_stats(&self) -> Option<ReplicaStats> {
        self.replica().map(|r| ReplicaStats {
            refreshes: r.refreshes.load(Relaxed),
            changes: r.changes.load(Relaxed),
            loads: r.loads.load(Relaxed),
            errors: r.errors.load(Relaxed),
            last_ok_ms: r.last_ok_ms.load(Relaxed),
            last_load_micros: r.last_load_micros.load(Relaxed),
        })
    }

    /// Starts a thread that refreshes this replica every `interval` until the handle is
    /// dropped. A failed refresh is logged (once per run of failures, then every minute) and
    /// tried again at the next tick.
    pub fn spawn_refresher(&self, interval: Duration) -> Result<Refresher> {
        let db = self.clone();
        let thread = Background::spawn("replica-refresh", move |stop| {
            let mut failing_since: Option<Instant> = None;
            let mut logged: Option<Instant> = None;
            while !stop.wait(interval) {
                match db.refresh() {
                    Ok(_) => {
                        if let Some(since) = failing_since.take() {
                            tracing::info!(
                                after_s = since.elapsed().as_secs(),
                                "replica refresh works again"
                            );
                        }
                        logged = None;
                    }
                    Err(e) => {
                        failing_since.get_or_insert_with(Instant::now);
                        if logged.is_none_or(|t| t.elapsed() >= LOG_EVERY) {
                            tracing::warn!(error = %e, "replica refresh failed; serving the last state");
                            logged = Some(Instant::now());
                        }
                    }
                }
            }
        })?;
        Ok(Refresher { _thread: thread })
    }
}

/// How often a refresh that keeps failing is logged.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// The refresh thread started by [`Tsdb::spawn_refresher`]; dropping it stops the thread
/// (after its current refresh) and waits for it.
#[derive(Debug)]
pub struct Refresher {
    _thread: Background,
}

#[cfg(test)]
mod tests;
