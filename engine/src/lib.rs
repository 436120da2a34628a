//! strata-engine: an LSM storage engine with the HBase one-family data model.
//!
//! A [`Db`] holds named tables. A table holds rows sorted by rowkey bytes, and each row holds
//! cells (column qualifier → value) sorted by column bytes. There is one visible version per
//! cell. Writes go through atomic [`WriteBatch`]es that may span tables; reads see a consistent
//! [`Snapshot`].
//!
//! Failures are typed and never silent: a failed WAL fsync or write makes every later write
//! fail with [`Error::WalFailed`] until a restart, while reads go on; a full disk refuses the
//! writes it cannot log and holds flushes and compactions back until it has space (see the
//! `## Failures` sections of the `db` and `wal` modules). [`EngineStats`] shows both.
//!
//! SST files and the manifest live in the database directory, or with [`Storage::Object`] in
//! an object store (S3) under a prefix, with the WAL and a bounded disk cache local. There a
//! newer writer on the prefix fences the older one ([`Error::Fenced`]), and
//! [`Db::open_read_only`] opens a follower that [`Db::refresh`] keeps up with the writer.
//!
//! The engine knows nothing about time series.

mod batch;
mod block;
mod bloom;
mod cache;
mod checkpoint;
mod coding;
mod compact;
mod compaction;
mod db;
mod error;
mod expiry;
mod file_name;
mod flush;
mod fold;
mod follow;
mod fs;
pub mod hint;
mod inner;
mod key;
mod manifest;
mod memtable;
mod open;
mod options;
pub mod priority;
mod read;
mod scan;
mod snapshot;
mod sst;
mod state;
mod stats;
mod table;
#[cfg(feature = "testing")]
mod testing;
mod verify;
mod wal;
mod worker;
mod write;

pub use batch::WriteBatch;
pub use cache::SharedBlockCache;
pub use checkpoint::{CheckpointReport, Progress, restore_checkpoint};
pub use db::Db;
pub use error::{Error, ErrorKind, Result};
pub use expiry::{RowExpirer, RowExpiry};
pub use fold::{FlushFold, FlushFolder, FoldEntry, FoldKind, FoldOut};
pub use fs::fault::Faults;
#[cfg(any(test, feature = "testing"))]
pub use fs::fault::{Fault, FaultError, FaultFile, FaultOp};
pub use fs::object::{IoRuntime, SharedDiskCache};
pub use object_store;
pub use options::{
    Clock, Compression, DbOptions, FilterMode, ObjectStorage, Storage, SyncPolicy, SystemClock,
    TableOptions,
};
pub use scan::{Cell, Row, RowFilter, RowIter, ScanOptions};
pub use snapshot::Snapshot;
#[cfg(feature = "testing")]
pub use sst::{fuzz_fix_sst_checksums, fuzz_read_sst};
pub use stats::{EngineStats, LevelStats, ObjectStats};
pub use table::Table;
#[cfg(feature = "testing")]
pub use testing::{WalReplay, fuzz_fix_wal_checksums, fuzz_replay_wal};
pub use verify::{
    CheckView, Finding, Remedy, Repaired, Severity, SstFileInfo, VerifyCounts, VerifyReport,
    repair, verify, verify_object_store,
};
pub use write::WRITE_STALL_LIMIT;
