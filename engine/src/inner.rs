//! The shared state of an open database, and what the write, flush and compaction paths
//! share: table options, and the lifecycle of SST files (finishing a new one, deleting one no
//! manifest names).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};

use crate::cache::BlockCache;
use crate::error::Result;
use crate::file_name::sst_file_name;
use crate::fs::FileSystem;
use crate::manifest::{FileMeta, Manifest};
use crate::options::{DbOptions, TableOptions};
use crate::sst::{SstBuilder, SstReader};
use crate::state::State;
use crate::table::Table;
use crate::wal::Wal;

/// The counters behind `EngineStats` that the write, flush and compaction paths keep.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) flush_errors: AtomicU64,
    pub(crate) compaction_errors: AtomicU64,
    pub(crate) write_stalls: AtomicU64,
    pub(crate) write_stall_micros: AtomicU64,
    /// Writes refused with `Error::Backpressure`.
    pub(crate) writes_refused: AtomicU64,
    pub(crate) flushes: AtomicU64,
    pub(crate) flush_micros: AtomicU64,
    pub(crate) rows_folded: AtomicU64,
    pub(crate) folds_rejected: AtomicU64,
    pub(crate) compactions: AtomicU64,
    pub(crate) compaction_micros: AtomicU64,
    pub(crate) compaction_bytes_written: AtomicU64,
    pub(crate) expired_files_dropped: AtomicU64,
    pub(crate) expired_bytes_dropped: AtomicU64,
    pub(crate) expired_rows_dropped: AtomicU64,
}

/// Wakes a background thread (flush, compaction, apply or the WAL syncer).
#[derive(Debug, Default)]
pub(crate) struct Signal {
    work: Mutex<bool>,
    cv: Condvar,
}

/// The state every handle of a database shares, and its background threads reach through
/// a weak reference.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) opts: DbOptions,
    /// A read-only follower of an object-store prefix (`Db::open_read_only`): no flushes,
    /// no compactions.
    pub(crate) follower: bool,
    pub(crate) dir: PathBuf,
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) cache: Arc<BlockCache>,
    pub(crate) state: RwLock<Arc<State>>,
    pub(crate) tables: RwLock<BTreeMap<String, Table>>,
    pub(crate) table_opts: RwLock<HashMap<u32, TableOptions>>,
    /// The TTL in milliseconds of each table opened with one, for snapshots.
    pub(crate) ttls: RwLock<Arc<HashMap<u32, u64>>>,
    pub(crate) wal: Arc<Wal>,
    /// The last sequence number handed out; only the WAL's commit leader changes it.
    pub(crate) last_seq: AtomicU64,
    /// Every batch up to this sequence number is in the memtables.
    pub(crate) visible_seq: AtomicU64,
    /// The persisted manifest. Flushes hold its lock while they write; compactions take it
    /// only to number their output files and to install their result, so a long compaction
    /// never holds up a flush (and with it the writers waiting for memtable room).
    pub(crate) manifest: Mutex<Manifest>,
    /// Serializes compactions: the background ones and [`crate::Db::compact_all`].
    pub(crate) compaction: Mutex<()>,
    /// Wakes the flush thread, when a memtable freezes.
    pub(crate) signal: Arc<Signal>,
    /// Wakes the compaction thread, after each flush.
    pub(crate) compact_signal: Arc<Signal>,
    /// Wakes the thread that writes and applies batches queued with no commit leader (see
    /// [`crate::Db::write_queued`]). It also looks every 100 ms.
    pub(crate) applier: Arc<Signal>,
    /// Signalled after each flush, for stalled writers.
    pub(crate) flushed: (Mutex<()>, Condvar),
    /// The error of the last flush if it failed; `None` once one succeeds.
    pub(crate) last_flush_error: Mutex<Option<String>>,
    /// SST files that no manifest in place names but that one which may be on disk does (its
    /// store failed after the rename), or that could not be deleted: deleted after the next
    /// manifest store.
    pub(crate) orphans: Mutex<Vec<u64>>,
    pub(crate) counters: Counters,
    /// The claim on `dir`. Last, so that it is released after every other field is dropped.
    pub(crate) _claim: crate::open::DirClaim,
}

impl Signal {
    /// Marks work as waiting and wakes the thread.
    pub(crate) fn wake(&self) {
        *self.work.lock() = true;
        self.cv.notify_one();
    }

    /// Waits until woken, or 100 ms at most (the thread also polls), and takes the work mark.
    pub(crate) fn wait(&self) {
        self.wait_for(Duration::from_millis(100));
    }

    /// Waits until woken, or `timeout` at most, and takes the work mark.
    pub(crate) fn wait_for(&self, timeout: Duration) {
        let mut work = self.work.lock();
        if !*work {
            self.cv.wait_for(&mut work, timeout);
        }
        *work = false;
    }
}

impl Inner {
    /// Sets the options of `table`, which `Db::open_table` passes each time it opens it.
    pub(crate) fn set_table_options(&self, table: u32, opts: TableOptions) {
        let mut ttls = self.ttls.write();
        let mut next = (**ttls).clone();
        match opts.ttl {
            Some(ttl) => next.insert(table, u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)),
            None => next.remove(&table),
        };
        *ttls = Arc::new(next);
        self.state
            .read()
            .active
            .set_rows_grow(table, opts.rows_grow);
        self.table_opts.write().insert(table, opts);
    }

    /// The options `table` was last opened with (the defaults if none).
    pub(crate) fn table_options(&self, table: u32) -> TableOptions {
        self.table_opts
            .read()
            .get(&table)
            .cloned()
            .unwrap_or_default()
    }

    /// Table ids and names, as the manifest records them.
    pub(crate) fn table_registry(&self) -> BTreeMap<u32, String> {
        self.tables
            .read()
            .values()
            .map(|t| (t.id, t.name.to_string()))
            .collect()
    }

    /// Deletes the SST files `ids`, which no manifest in place names. With `later`, or when a
    /// deletion fails, they are deleted after the next manifest store instead: a manifest whose
    /// store failed after its rename may name them.
    pub(crate) fn discard(&self, ids: impl Iterator<Item = u64>, later: bool) {
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
    pub(crate) fn delete_orphans(&self, manifest: &Manifest) {
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

    /// Finishes SST file `id` (`name`) and opens it for reading; on failure the file is
    /// discarded.
    pub(crate) fn finish_sst(
        &self,
        table: u32,
        level: u8,
        id: u64,
        name: &str,
        builder: SstBuilder,
    ) -> Result<(FileMeta, Arc<SstReader>)> {
        let result = (|| {
            let info = builder.finish()?;
            let mut reader = SstReader::open(self.fs.open(name)?, id, Some(self.cache.clone()))?;
            reader.set_next_expiry(info.next_expiry_ms);
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
