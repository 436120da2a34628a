//! Database and table options.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::cache::SharedBlockCache;
use crate::error::Error;
use crate::expiry::RowExpirer;
use crate::fold::FlushFolder;
use crate::fs::fault::Faults;
use crate::fs::object::SharedDiskCache;

/// When the write-ahead log is fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Fsync before a write is acknowledged (group commit shares one fsync among waiters).
    Always,
    /// Fsync in the background every interval, and sooner once 8 MiB are written since the
    /// last fsync; at most an interval's acknowledged data can be lost.
    Interval(Duration),
}

impl FromStr for SyncPolicy {
    type Err = Error;

    /// Parses `always` or `interval:<ms>`.
    fn from_str(s: &str) -> Result<Self, Error> {
        if s == "always" {
            return Ok(SyncPolicy::Always);
        }
        if let Some(ms) = s.strip_prefix("interval:") {
            let ms: u64 = ms.parse().map_err(|_| {
                Error::InvalidArgument(format!(
                    "bad fsync interval in {s:?}: expected interval:<ms>"
                ))
            })?;
            if ms == 0 {
                return Err(Error::InvalidArgument(
                    "fsync interval must be > 0 ms".into(),
                ));
            }
            return Ok(SyncPolicy::Interval(Duration::from_millis(ms)));
        }
        Err(Error::InvalidArgument(format!(
            "unknown fsync policy {s:?}: expected `always` or `interval:<ms>`"
        )))
    }
}

impl fmt::Display for SyncPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyncPolicy::Always => f.write_str("always"),
            SyncPolicy::Interval(d) => write!(f, "interval:{}", d.as_millis()),
        }
    }
}

/// A source of wall-clock time in milliseconds since the Unix epoch (used for TTL).
pub trait Clock: Send + Sync + fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// Options for a whole database.
#[derive(Debug, Clone)]
pub struct DbOptions {
    /// WAL fsync policy.
    pub sync: SyncPolicy,
    /// A memtable freezes once it holds about this many bytes.
    pub memtable_bytes: usize,
    /// Writes stall while this many frozen memtables wait to be flushed.
    pub max_frozen_memtables: usize,
    /// Number of L0 files that triggers an L0 → L1 compaction.
    pub l0_compaction_trigger: usize,
    /// Writes stall while L0 holds this many files.
    pub l0_stall_files: usize,
    /// Target size of L1; each deeper level is `level_size_ratio` times larger.
    pub level_base_bytes: u64,
    /// Size ratio between adjacent levels.
    pub level_size_ratio: u64,
    /// Compaction output files are cut at about this size.
    pub target_file_bytes: u64,
    /// Bytes of the block cache shared by every table.
    pub block_cache_bytes: usize,
    /// A block cache shared with other databases of the process, used instead of one of
    /// `block_cache_bytes` of its own; `None` (the default) gives the database its own.
    pub shared_block_cache: Option<SharedBlockCache>,
    /// A WAL segment is closed and a new one started past this size.
    pub wal_segment_bytes: u64,
    /// At most how many WAL segments, once a flush covers them, are kept to be written over
    /// by the segments after, rather than deleted: writing over a file's cached pages costs
    /// far less than filling new ones. A flush keeps as many as it covered, up to this, so
    /// a database whose memtables take one segment of log keeps one. They take up to this
    /// many times `wal_segment_bytes` of disk until
    /// [`Db::compact_all`](crate::Db::compact_all) deletes them.
    pub wal_recycle_segments: usize,
    /// Wall clock used for TTL decisions.
    pub clock: Arc<dyn Clock>,
    /// Faults to inject into file operations, for tests (the `testing` feature). The default
    /// injects nothing. They apply to the local backend only.
    pub faults: Faults,
    /// Where SST files and the manifest live: the local directory (the default) or an object
    /// store.
    pub storage: Storage,
}

/// Where a database keeps its SST files and manifest.
#[derive(Debug, Clone, Default)]
pub enum Storage {
    /// Everything in the database directory.
    #[default]
    Local,
    /// SSTs and versioned manifests in an object store under a prefix; the WAL stays in the
    /// database directory and a bounded disk cache of SSTs in [`ObjectStorage::cache_dir`].
    Object(ObjectStorage),
}

/// An object store for a database's SSTs and manifest (see `engine/FORMAT.md` for the layout).
#[derive(Debug, Clone)]
pub struct ObjectStorage {
    /// The store, e.g. `object_store::aws::AmazonS3` or, in tests, `InMemory`. It must support
    /// create-if-absent writes (`PutMode::Create`).
    pub store: Arc<dyn object_store::ObjectStore>,
    /// The key prefix the database lives under (no leading or trailing `/` needed).
    pub prefix: String,
    /// The local directory of the SST disk cache.
    pub cache_dir: PathBuf,
    /// The disk cache's bound in bytes; least recently used files are evicted past it.
    pub cache_bytes: u64,
    /// An SST object no manifest version names is deleted at open only once it is this old,
    /// so that another writer's upload in flight is not.
    pub orphan_grace: Duration,
    /// The newest manifest versions always kept.
    pub manifest_versions_kept: usize,
    /// Older manifest versions, and SSTs a compaction replaced, are deleted once they have
    /// been superseded this long, so that read-only followers still on them can finish.
    pub delete_delay: Duration,
    /// SSTs up to this size are uploaded with one PUT, larger ones in multipart uploads.
    pub multipart_threshold: u64,
    /// A disk cache bound shared with other databases of the process, used instead of
    /// `cache_bytes`; the files stay in `cache_dir`. `None` (the default): a bound of its own.
    pub shared_disk_cache: Option<SharedDiskCache>,
}

impl ObjectStorage {
    /// Storage in `store` under `prefix`, with a disk cache of `cache_bytes` in `cache_dir`,
    /// and the default delays: 1 h of grace for orphans, 10 manifest versions kept, 60 s
    /// before superseded objects go, multipart above 16 MiB.
    pub fn new(
        store: Arc<dyn object_store::ObjectStore>,
        prefix: impl Into<String>,
        cache_dir: impl Into<PathBuf>,
        cache_bytes: u64,
    ) -> ObjectStorage {
        ObjectStorage {
            store,
            prefix: prefix.into(),
            cache_dir: cache_dir.into(),
            cache_bytes,
            orphan_grace: Duration::from_secs(3600),
            manifest_versions_kept: 10,
            delete_delay: Duration::from_secs(60),
            multipart_threshold: 16 << 20,
            shared_disk_cache: None,
        }
    }
}

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            sync: SyncPolicy::Interval(Duration::from_millis(100)),
            memtable_bytes: 64 << 20,
            max_frozen_memtables: 4,
            // Salted time-series keys put every flush's rows across the whole key space, so
            // each L0 → L1 compaction rewrites all of L1: waiting for 8 files rewrites it half
            // as often as waiting for 4, for a few more level-0 files that reads look at.
            l0_compaction_trigger: 8,
            l0_stall_files: 20,
            level_base_bytes: 256 << 20,
            level_size_ratio: 10,
            target_file_bytes: 64 << 20,
            block_cache_bytes: 256 << 20,
            shared_block_cache: None,
            wal_segment_bytes: 64 << 20,
            wal_recycle_segments: 16,
            clock: Arc::new(SystemClock),
            faults: Faults::default(),
            storage: Storage::Local,
        }
    }
}

/// Block compression of a table's SST files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// No compression.
    None,
    /// LZ4 (the default): fast, moderate ratio.
    Lz4,
    /// Zstandard at the given level.
    Zstd(i32),
}

/// Which bloom filter a table's SST files carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterMode {
    /// No filter.
    None,
    /// A filter over rowkeys (the default).
    Rows,
    /// Filters over rowkeys and over rowkey+column.
    RowsAndColumns,
}

/// Options for one table. They apply to files written after the table is opened with them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableOptions {
    /// Uncompressed size of a data block.
    pub block_bytes: usize,
    /// Block compression.
    pub compression: Compression,
    /// Bloom filter mode.
    pub filter: FilterMode,
    /// Cells older than this (by write time) are dropped by compaction and hidden from reads.
    pub ttl: Option<Duration>,
    /// Rewrites each row's entries as a flush writes them to level 0 (`fold.rs`).
    pub flush_fold: Option<FlushFolder>,
    /// Expires rows by their data time (`expiry.rs`): compaction drops expired rows, and
    /// whole files of them unread.
    pub expiry: Option<RowExpirer>,
    /// The table's rows gain entries over time, as a time series' row gains a point every few
    /// seconds. A memtable holding many such rows with few entries each grows past
    /// `DbOptions::memtable_bytes` to let them fill before a flush writes them; rows of a
    /// table without this (an index written once per key) do not count towards that growth.
    pub rows_grow: bool,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_bytes: 64 << 10,
            compression: Compression::Lz4,
            filter: FilterMode::Rows,
            ttl: None,
            flush_fold: None,
            expiry: None,
            rows_grow: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_policy_parses_and_prints() {
        assert_eq!(
            "always".parse::<SyncPolicy>().ok(),
            Some(SyncPolicy::Always)
        );
        let p: SyncPolicy = "interval:100".parse().expect("valid policy");
        assert_eq!(p, SyncPolicy::Interval(Duration::from_millis(100)));
        assert_eq!(p.to_string(), "interval:100");
        assert!("interval:".parse::<SyncPolicy>().is_err());
        assert!("interval:0".parse::<SyncPolicy>().is_err());
        assert!("sometimes".parse::<SyncPolicy>().is_err());
    }
}
