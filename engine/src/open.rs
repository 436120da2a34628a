//! Opening a database: claiming its directory, recovering from the manifest and the WAL, and
//! starting its background threads.
//!
//! At open the manifest's files are opened and only the WAL segments after the flushed
//! position are replayed, numbering batches on from the manifest's last sequence number. Files
//! a crash left behind (SSTs no manifest names, a half-written manifest, covered segments) are
//! deleted first.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::file_name::sst_file_name;
use crate::fs::object::{ObjectFs, Role};
use crate::fs::{FileSystem, LocalFs};
use crate::inner::{Counters, Inner, Signal};
use crate::manifest::Manifest;
use crate::memtable::Memtable;
use crate::options::{DbOptions, Storage, SyncPolicy};
use crate::sst::SstReader;
use crate::state::{Files, State};
use crate::table::Table;
use crate::wal::{self, DecodedEntry, Wal, decode_entry};
use crate::worker;

/// Directories open in this process: a second open of one waits for the first to be dropped
/// (its flush thread may still be finishing a flush).
static OPEN_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static OPEN_DIRS_CV: Condvar = Condvar::new();

/// This process's claim on an open database's directory, released when dropped. It is the
/// last field of `Inner`, so every other part of a closed database (its WAL above all) is
/// done with the files before another open of the directory can begin.
#[derive(Debug)]
pub(crate) struct DirClaim(PathBuf);

impl Drop for DirClaim {
    fn drop(&mut self) {
        let mut open = OPEN_DIRS.lock();
        open.retain(|d| *d != self.0);
        OPEN_DIRS_CV.notify_all();
    }
}

fn claim_dir(dir: &Path) -> Result<DirClaim> {
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
    Ok(DirClaim(dir.to_path_buf()))
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Batches still queued go to the WAL, to be replayed at the next open.
        self.wal
            .lead_queued(&mut |payloads| self.apply_group(payloads));
        // Here, not in the WAL's own drop: a background thread may hold the WAL a while
        // longer, past the release of the directory (`_claim`, dropped after this).
        self.wal.close();
    }
}

/// Opens (creating if needed) the database in `dir`; a `follower` only reads (object
/// storage only).
pub(crate) fn open(dir: &Path, opts: DbOptions, follower: bool) -> Result<Arc<Inner>> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| Error::io(format!("resolving {}", dir.display()), e))?;
    let claim = claim_dir(&dir)?;
    open_claimed(&dir, opts, follower, claim)
}

fn open_claimed(
    dir: &Path,
    opts: DbOptions,
    follower: bool,
    claim: DirClaim,
) -> Result<Arc<Inner>> {
    let local = LocalFs::new(dir)?;
    // The WAL always stays in the local directory.
    let (fs, wal_fs): (Arc<dyn FileSystem>, Arc<dyn FileSystem>) = match &opts.storage {
        Storage::Local if follower => {
            return Err(Error::InvalidArgument(
                "a read-only follower needs object storage".into(),
            ));
        }
        Storage::Local => {
            let fs = opts.faults.wrap(Arc::new(local));
            (fs.clone(), fs)
        }
        Storage::Object(o) => {
            let role = if follower {
                Role::Follower
            } else {
                Role::Writer
            };
            let fs = ObjectFs::new(local.clone(), o.clone(), role)?;
            (Arc::new(fs), Arc::new(local))
        }
    };
    let manifest = Manifest::load(&*fs)?.unwrap_or(Manifest {
        next_file_id: 1,
        ..Manifest::default()
    });
    if !follower {
        // Files a crash left behind: SSTs no manifest names, a half-written manifest, and
        // WAL segments it covers whose deletion did not finish.
        fs.remove_orphans(&manifest)?;
        wal::delete_segments_through(&*wal_fs, manifest.flushed_segment)?;
    }

    let cache = Arc::new(match &opts.shared_block_cache {
        Some(shared) => BlockCache::sharing(shared),
        None => BlockCache::new(opts.block_cache_bytes),
    });
    let mut files = Files::default();
    let names: Vec<(String, u64)> = manifest
        .files
        .iter()
        .map(|f| (sst_file_name(f.id), f.bytes))
        .collect();
    fs.prefetch(&names);
    for f in &manifest.files {
        let reader = SstReader::open(fs.open(&sst_file_name(f.id))?, f.id, Some(cache.clone()))?;
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
        if follower {
            // A follower serves what the manifest names; it takes no writes to replay.
            return Ok(());
        }
        let bad = |detail: String| Error::corruption(file, offset, detail);
        match decode_entry(payload).map_err(bad)? {
            DecodedEntry::End => {}
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
    let mut wal = Wal::open_from(
        wal_fs,
        opts.wal_segment_bytes,
        manifest.flushed_segment + 1,
        &mut replay,
    )?;
    wal.set_recycle_limit(if follower {
        0
    } else {
        opts.wal_recycle_segments
    });
    let wal = Arc::new(wal);
    if let SyncPolicy::Interval(every) = opts.sync {
        Wal::spawn_syncer(&wal, every)?;
    }
    let inner = Arc::new(Inner {
        opts,
        follower,
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
        signal: Arc::new(Signal::default()),
        compact_signal: Arc::new(Signal::default()),
        applier: Arc::new(Signal::default()),
        flushed: (Mutex::new(()), Condvar::new()),
        last_flush_error: Mutex::new(None),
        orphans: Mutex::new(Vec::new()),
        counters: Counters::default(),
        _claim: claim,
    });
    worker::spawn_all(&inner)?;
    Ok(inner)
}
