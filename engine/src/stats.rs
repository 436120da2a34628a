//! A snapshot of the engine's counters.

/// Files and bytes in one LSM level.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LevelStats {
    /// Number of SST files.
    pub files: u64,
    /// Total bytes of those files.
    pub bytes: u64,
}

/// Engine counters at one instant. Durations are in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Bytes held by the active and frozen memtables.
    pub memtable_bytes: u64,
    /// Frozen memtables waiting to be flushed.
    pub frozen_memtables: u64,
    /// Per-level file counts and sizes, L0 first.
    pub levels: Vec<LevelStats>,
    /// The write-ahead log failed (a write or fsync of it): every write is refused until a
    /// restart recovers from the files. Reads go on.
    pub write_failed: bool,
    /// Write batches refused because their WAL append failed with a full disk, without
    /// failing the WAL.
    pub wal_batches_refused: u64,
    /// Memtable flush attempts that failed (each is retried).
    pub flush_errors: u64,
    /// Whether the last flush attempt failed (the store under the flushes is failing).
    pub flush_failing: bool,
    /// Writes refused because they stalled with no flush finishing (`Error::Backpressure`).
    pub writes_refused: u64,
    /// Compaction attempts that failed (each is retried).
    pub compaction_errors: u64,
    /// Number of times a writer stalled.
    pub write_stalls: u64,
    /// Total time writers spent stalled.
    pub write_stall_micros: u64,
    /// Memtable flushes completed.
    pub flushes: u64,
    /// Total time spent flushing.
    pub flush_micros: u64,
    /// Rows a table's flush fold rewrote.
    pub rows_folded: u64,
    /// Rows whose fold output broke the contract and were flushed unfolded (a bug if non-zero).
    pub folds_rejected: u64,
    /// Compactions completed.
    pub compactions: u64,
    /// Total time spent compacting.
    pub compaction_micros: u64,
    /// Bytes written by compactions.
    pub compaction_bytes_written: u64,
    /// SST files dropped whole, unread, because all their rows had expired
    /// (`TableOptions::expiry`).
    pub expired_files_dropped: u64,
    /// Bytes of those files.
    pub expired_bytes_dropped: u64,
    /// Expired rows compactions left out of the files they wrote.
    pub expired_rows_dropped: u64,
    /// Block cache hits.
    pub cache_hits: u64,
    /// Block cache misses.
    pub cache_misses: u64,
    /// Bytes currently held by the block cache.
    pub cache_bytes: u64,
    /// Bytes appended to the WAL.
    pub wal_bytes: u64,
    /// WAL fsyncs.
    pub wal_syncs: u64,
    /// Bytes of queued batches not yet written to the WAL (see `Db::write_queued`).
    pub wal_queue_bytes: u64,
    /// Write batches committed.
    pub batches_written: u64,
    /// Object-store counters; zero on the local backend.
    pub object: ObjectStats,
}

/// Requests to the object store and the SST disk cache in front of it (`Storage::Object`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectStats {
    /// GET requests (whole objects and ranges).
    pub gets: u64,
    /// PUT requests: single uploads, multipart parts and their create/complete calls, and
    /// manifest versions.
    pub puts: u64,
    /// HEAD requests (checks of the manifest head before acknowledging synced writes).
    pub heads: u64,
    /// LIST requests.
    pub lists: u64,
    /// DELETE requests.
    pub deletes: u64,
    /// Bytes downloaded.
    pub bytes_read: u64,
    /// Bytes uploaded.
    pub bytes_written: u64,
    /// SST reads served by the disk cache.
    pub disk_cache_hits: u64,
    /// SST reads that went to the object store.
    pub disk_cache_misses: u64,
    /// Bytes of SST files in the disk cache.
    pub disk_cache_bytes: u64,
    /// The newest manifest version this database wrote or read.
    pub manifest_version: u64,
    /// This writer's epoch (0 for a follower).
    pub epoch: u64,
    /// A newer writer took over the prefix: writes are refused.
    pub fenced: bool,
}
