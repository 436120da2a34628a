//! The object-store backend ([`ObjectFs`]): SST files and numbered manifest versions in an
//! `object_store::ObjectStore` under a prefix, WAL segments in the local database directory,
//! and a bounded disk cache of SST files in front of the store.
//!
//! ## Layout
//!
//! ```text
//! <prefix>/sst/<16 hex>.sst          one object per SST file, written once
//! <prefix>/manifest/<20 digits>      manifest version n, created if absent (PutMode::Create)
//! ```
//!
//! The version format and the fencing protocol are in `engine/FORMAT.md`.
//!
//! ## Writes
//!
//! An SST is spooled to a file in the cache directory and uploaded by `finish` (one PUT up to
//! `multipart_threshold`, a multipart upload above), so `finish` returning Ok means the object
//! is in the bucket; the spooled file then becomes the cache entry, so the writer's cache is
//! warm. Files being spooled are outside the cache's bound (at most one per flush or
//! compaction running).
//!
//! ## Reads
//!
//! A read the disk cache cannot serve fetches the whole object into the cache. SST files are
//! bounded by the compaction target (64 MiB by default), the reader reads the footer, index,
//! filter and properties of a file as soon as it opens it, and scans go on to read most of its
//! data blocks, so one GET per file costs fewer requests (S3 bills per request) and round trips
//! than ranged GETs, and the memory block cache above serves the hot blocks. Only an object
//! larger than half the cache is read by ranges, uncached. Evicting a file unlinks it; a read
//! of it after that fetches it again. Readers open the cached file for each read, so an
//! evicted file's space is freed at once.
//!
//! ## Fencing
//!
//! A writer claims the next manifest version with a new epoch at open; every manifest store
//! creates the next version if absent. When that version exists and was written by another
//! epoch, this writer is fenced: the store fails with `Error::Fenced`, and every later write is
//! refused. A synced write is acknowledged only after [`FileSystem::confirm_writer`] found no
//! version after this writer's head, with a check that started after the write's WAL fsync:
//! once a newer writer has claimed its version, no synced write is acknowledged here. Checks
//! are shared: one HEAD serves every synced write waiting when it starts.
//!
//! The WAL is local: the file `EPOCH` beside it names the epoch that wrote it, and a writer
//! refuses to open on a WAL that holds records of an epoch another writer has succeeded.
//!
//! Object-store I/O runs on a small private tokio runtime; callers wait on a std channel, never
//! entering a runtime, so the engine may be called from a tokio worker thread.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::future::Future;
use std::io::{self, BufWriter, ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use parking_lot::Mutex;

use super::{AtomicWriteError, FileSystem, LocalFs, LogFile, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use crate::file_name::parse_sst_file_name;
use crate::manifest::Manifest;
use crate::options::ObjectStorage;
use crate::stats::ObjectStats;

/// Magic of a manifest version object.
const VERSION_MAGIC: &[u8; 4] = b"SMVR";
/// Format of a manifest version object.
const VERSION_FORMAT: u16 = 1;
/// Magic, format, reserved, version, epoch, manifest length.
const VERSION_HEADER_BYTES: usize = 4 + 2 + 2 + 8 + 8 + 4;
/// File ids of epoch `e` start at `e << EPOCH_FILE_SHIFT`, so that two writers of one prefix
/// (the fenced one still running) never name an SST alike.
pub(crate) const EPOCH_FILE_SHIFT: u32 = 40;
/// Parts of a multipart upload.
const PART_BYTES: usize = 8 << 20;
/// Files fetched at once when a database opens or a follower refreshes.
const PREFETCH_THREADS: usize = 8;
/// Attempts at claiming a version at open when other writers race for it.
const CLAIM_ATTEMPTS: usize = 8;

/// The local file naming the epoch that last wrote the WAL in the database directory.
pub(crate) const EPOCH_FILE: &str = "EPOCH";
/// Magic of [`EPOCH_FILE`].
const EPOCH_MAGIC: &[u8; 4] = b"SEPO";
/// Format of [`EPOCH_FILE`].
const EPOCH_FORMAT: u16 = 1;

/// Encodes [`EPOCH_FILE`]: magic, format u16, reserved u16, epoch u64, xxh3_64 of those.
fn encode_epoch(epoch: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(24);
    out.extend_from_slice(EPOCH_MAGIC);
    out.extend_from_slice(&EPOCH_FORMAT.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&epoch.to_be_bytes());
    let sum = xxhash_rust::xxh3::xxh3_64(&out);
    out.extend_from_slice(&sum.to_be_bytes());
    out
}

/// Decodes [`EPOCH_FILE`]; every failure is `Error::Corruption`.
fn decode_epoch(bytes: &[u8]) -> Result<u64> {
    let bad = |offset: u64, detail: &str| Error::corruption(EPOCH_FILE, offset, detail);
    if bytes.len() != 24 || &bytes[..4] != EPOCH_MAGIC {
        return Err(bad(0, "bad epoch file length or magic"));
    }
    let mut sum = [0u8; 8];
    sum.copy_from_slice(&bytes[16..]);
    if xxhash_rust::xxh3::xxh3_64(&bytes[..16]) != u64::from_be_bytes(sum) {
        return Err(bad(16, "epoch file checksum mismatch"));
    }
    if u16::from_be_bytes([bytes[4], bytes[5]]) != EPOCH_FORMAT || bytes[6] != 0 || bytes[7] != 0 {
        return Err(bad(4, "unsupported epoch file format"));
    }
    let mut epoch = [0u8; 8];
    epoch.copy_from_slice(&bytes[8..16]);
    Ok(u64::from_be_bytes(epoch))
}

/// Whether an [`ObjectFs`] writes (and fences) or follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Claims an epoch at open and writes manifest versions.
    Writer,
    /// Reads manifest versions only.
    Follower,
}

/// One manifest version object, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VersionRecord {
    /// Its number, as in its object name.
    pub(crate) version: u64,
    /// The epoch of the writer that created it.
    pub(crate) epoch: u64,
    /// The manifest.
    pub(crate) manifest: Manifest,
}

impl VersionRecord {
    /// Encodes the object: header, the manifest's own encoding, xxh3_64 of everything before.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let body = self.manifest.encode();
        let mut out = Vec::with_capacity(VERSION_HEADER_BYTES + body.len() + 8);
        out.extend_from_slice(VERSION_MAGIC);
        out.extend_from_slice(&VERSION_FORMAT.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
        out.extend_from_slice(&self.version.to_be_bytes());
        out.extend_from_slice(&self.epoch.to_be_bytes());
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(&body);
        let sum = xxhash_rust::xxh3::xxh3_64(&out);
        out.extend_from_slice(&sum.to_be_bytes());
        out
    }

    /// Decodes the object `file`; every failure is `Error::Corruption`.
    pub(crate) fn decode(bytes: &[u8], file: &str) -> Result<VersionRecord> {
        let bad = |offset: usize, detail: &str| Error::corruption(file, offset as u64, detail);
        if bytes.len() < VERSION_HEADER_BYTES + 8 {
            return Err(bad(0, "manifest version is too short"));
        }
        if &bytes[..4] != VERSION_MAGIC {
            return Err(bad(0, "bad manifest version magic"));
        }
        let (data, sum) = bytes.split_at(bytes.len() - 8);
        let mut want = [0u8; 8];
        want.copy_from_slice(sum);
        if xxhash_rust::xxh3::xxh3_64(data) != u64::from_be_bytes(want) {
            return Err(bad(data.len(), "manifest version checksum mismatch"));
        }
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&data[at..at + 8]);
            u64::from_be_bytes(b)
        };
        if u16::from_be_bytes([data[4], data[5]]) != VERSION_FORMAT || data[6] != 0 || data[7] != 0
        {
            return Err(bad(4, "unsupported manifest version format"));
        }
        let (version, epoch) = (u64_at(8), u64_at(16));
        let len = u32::from_be_bytes([data[24], data[25], data[26], data[27]]) as usize;
        if len != data.len() - VERSION_HEADER_BYTES {
            return Err(bad(24, "manifest version length mismatch"));
        }
        let manifest = Manifest::decode(&data[VERSION_HEADER_BYTES..], file)?;
        Ok(VersionRecord {
            version,
            epoch,
            manifest,
        })
    }
}

/// Request counters.
#[derive(Debug, Default)]
struct Counters {
    gets: AtomicU64,
    puts: AtomicU64,
    heads: AtomicU64,
    lists: AtomicU64,
    deletes: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
}

fn bump(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// A private tokio runtime for callers that block: [`IoRuntime::run`] waits on a std channel,
/// never entering a runtime, so it may be called from a worker thread of another runtime. It
/// is shut down without waiting, as the engine may be dropped on such a thread, where a
/// blocking shutdown panics. The engine's object-store backend runs its requests on one; the
/// server's object-store helpers (UID leases, bucket claims) on others.
#[derive(Debug)]
pub struct IoRuntime(Option<tokio::runtime::Runtime>);

impl IoRuntime {
    /// A runtime of `threads` worker threads named `name`.
    pub fn start(name: &str, threads: usize) -> io::Result<IoRuntime> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name(name)
            .enable_all()
            .build()?;
        Ok(IoRuntime(Some(rt)))
    }

    /// Runs `fut` on the runtime and waits for it from this thread.
    pub fn run<T: Send + 'static>(
        &self,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> io::Result<T> {
        let rt = self
            .0
            .as_ref()
            .ok_or_else(|| io::Error::other("the I/O runtime is shut down"))?;
        let (tx, rx) = mpsc::sync_channel(1);
        rt.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv()
            .map_err(|_| io::Error::other("the I/O task ended without a result"))
    }
}

impl Drop for IoRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// The LRU index of the disk cache, over every database sharing it.
#[derive(Debug, Default)]
struct CacheIndex {
    /// Path → (bytes, last use, namespace).
    files: HashMap<PathBuf, (u64, u64, u64)>,
    /// Last use → path.
    lru: BTreeMap<u64, PathBuf>,
    used: u64,
    /// Bytes by namespace.
    used_by: HashMap<u64, u64>,
    tick: u64,
}

impl CacheIndex {
    fn add(&mut self, path: PathBuf, len: u64, ns: u64) {
        self.tick += 1;
        let tick = self.tick;
        if let Some((old_len, old_tick, old_ns)) = self.files.insert(path.clone(), (len, tick, ns))
        {
            self.forget(old_len, old_tick, old_ns);
        }
        self.lru.insert(tick, path);
        self.used += len;
        *self.used_by.entry(ns).or_default() += len;
    }

    fn drop_path(&mut self, path: &Path) {
        if let Some((len, tick, ns)) = self.files.remove(path) {
            self.forget(len, tick, ns);
        }
    }

    fn forget(&mut self, len: u64, tick: u64, ns: u64) {
        self.used -= len;
        self.lru.remove(&tick);
        if let Some(n) = self.used_by.get_mut(&ns) {
            *n -= len;
        }
    }
}

/// The bound and the index, which the databases of a [`SharedDiskCache`] share.
#[derive(Debug)]
struct DiskCore {
    capacity: u64,
    index: Mutex<CacheIndex>,
    /// The namespace the next database sharing the cache takes.
    next_ns: AtomicU64,
}

/// An SST disk cache bound for several databases of one process: a read replica over
/// partitioned writers opens one database per writer's tree, each caching in a directory of
/// its own, and each would otherwise keep `cache_bytes` of its own
/// (`ObjectStorage::shared_disk_cache`).
#[derive(Debug, Clone)]
pub struct SharedDiskCache(Arc<DiskCore>);

impl SharedDiskCache {
    /// A bound of `capacity_bytes` over every database opened with it.
    pub fn new(capacity_bytes: u64) -> SharedDiskCache {
        SharedDiskCache(Arc::new(DiskCore::new(capacity_bytes)))
    }
}

impl DiskCore {
    fn new(capacity: u64) -> DiskCore {
        DiskCore {
            capacity,
            index: Mutex::new(CacheIndex::default()),
            next_ns: AtomicU64::new(0),
        }
    }
}

/// One database's SST files on local disk, in `dir`: with the other databases of its core at
/// most `capacity` bytes, least recently used evicted first.
#[derive(Debug)]
struct DiskCache {
    dir: PathBuf,
    core: Arc<DiskCore>,
    ns: u64,
}

impl DiskCache {
    /// Indexes the SST files already in `dir`, deleting spooled and partial files: a cache of
    /// `capacity` bytes of its own, or a share of `shared`.
    fn open(dir: PathBuf, capacity: u64, shared: Option<&SharedDiskCache>) -> Result<DiskCache> {
        fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("creating cache directory {}", dir.display()), e))?;
        let core = match shared {
            Some(s) => s.0.clone(),
            None => Arc::new(DiskCore::new(capacity)),
        };
        let ns = core.next_ns.fetch_add(1, Ordering::Relaxed);
        let cache = DiskCache { dir, core, ns };
        let ctx = || format!("listing cache directory {}", cache.dir.display());
        let mut found = Vec::new();
        for entry in fs::read_dir(&cache.dir).map_err(|e| Error::io(ctx(), e))? {
            let entry = entry.map_err(|e| Error::io(ctx(), e))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let meta = entry.metadata().map_err(|e| Error::io(ctx(), e))?;
            if !meta.is_file() {
                continue;
            }
            if parse_sst_file_name(&name).is_some() {
                let used = meta.modified().unwrap_or(UNIX_EPOCH);
                found.push((used, name, meta.len()));
            } else if name.ends_with(".spool") || name.ends_with(".fetch") {
                let _ = fs::remove_file(entry.path());
            }
        }
        found.sort();
        for (_, name, len) in found {
            cache.insert(&name, len);
        }
        Ok(cache)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Reads `len` bytes at `offset` of `name` if the cache holds it.
    fn read(&self, name: &str, offset: u64, len: usize) -> Option<Bytes> {
        let path = self.path(name);
        {
            let mut index = self.core.index.lock();
            index.tick += 1;
            let tick = index.tick;
            let (_, used, _) = index.files.get_mut(&path)?;
            let old = std::mem::replace(used, tick);
            index.lru.remove(&old);
            index.lru.insert(tick, path.clone());
        }
        // Evicted meanwhile: the caller fetches it again.
        let file = File::open(&path).ok()?;
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, offset).ok()?;
        Some(Bytes::from(buf))
    }

    /// The size of `name` if cached.
    fn len_of(&self, name: &str) -> Option<u64> {
        let path = self.path(name);
        self.core.index.lock().files.get(&path).map(|f| f.0)
    }

    /// Records the file `name` (already at its path) and evicts down to the bound, the least
    /// recently used first, whichever database's it is.
    fn insert(&self, name: &str, len: u64) {
        let mut evicted = Vec::new();
        {
            let mut index = self.core.index.lock();
            index.add(self.path(name), len, self.ns);
            while index.used > self.core.capacity {
                let Some((_, victim)) = index.lru.pop_first() else {
                    break;
                };
                index.drop_path(&victim);
                evicted.push(victim);
            }
        }
        for victim in evicted {
            let _ = fs::remove_file(victim);
        }
    }

    /// Drops `name` from the cache.
    fn remove(&self, name: &str) {
        let path = self.path(name);
        self.core.index.lock().drop_path(&path);
        let _ = fs::remove_file(path);
    }

    /// Bytes of this database's files in the cache.
    fn used(&self) -> u64 {
        let index = self.core.index.lock();
        index.used_by.get(&self.ns).copied().unwrap_or(0)
    }
}

/// The manifest head this database wrote or read last.
#[derive(Debug, Default)]
struct Head {
    version: u64,
    epoch: u64,
    /// The last store's outcome is unknown: the next version may be this writer's.
    uncertain: bool,
}

/// What every handle of the backend shares.
#[derive(Debug)]
struct Shared {
    store: Arc<dyn ObjectStore>,
    /// The prefix without slashes at either end; may be empty.
    prefix: String,
    rt: IoRuntime,
    counters: Counters,
    cache: DiskCache,
    /// Sizes of the SSTs this process uploaded too large to cache, so opening one costs no
    /// request.
    sizes: Mutex<HashMap<String, u64>>,
}

impl Shared {
    /// Runs `fut` on the private runtime and waits for it from this thread.
    fn run<T: Send + 'static>(
        &self,
        what: impl Fn() -> String,
        fut: impl Future<Output = object_store::Result<T>> + Send + 'static,
    ) -> Result<T> {
        self.run_raw(fut)
            .map_err(|e| Error::io(what(), e))?
            .map_err(|e| store_error(what(), e))
    }

    /// Runs `fut`, returning the object store's error as is.
    fn run_raw<T: Send + 'static>(
        &self,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> io::Result<T> {
        self.rt.run(fut)
    }

    fn key(&self, dir: &str, name: &str) -> ObjectPath {
        if self.prefix.is_empty() {
            ObjectPath::from(format!("{dir}/{name}"))
        } else {
            ObjectPath::from(format!("{}/{dir}/{name}", self.prefix))
        }
    }

    fn sst_key(&self, name: &str) -> ObjectPath {
        self.key("sst", name)
    }

    fn version_key(&self, version: u64) -> ObjectPath {
        self.key("manifest", &format!("{version:020}"))
    }

    fn dir_key(&self, dir: &str) -> ObjectPath {
        if self.prefix.is_empty() {
            ObjectPath::from(dir)
        } else {
            ObjectPath::from(format!("{}/{dir}", self.prefix))
        }
    }

    /// The objects directly in `dir`: (name, bytes, last modified).
    fn list(&self, dir: &str) -> Result<Vec<(String, u64, SystemTime)>> {
        let store = self.store.clone();
        let key = self.dir_key(dir);
        let what = format!("listing {key}");
        bump(&self.counters.lists, 1);
        let listed = self.run(|| what.clone(), async move {
            store.list_with_delimiter(Some(&key)).await
        })?;
        Ok(listed
            .objects
            .into_iter()
            .filter_map(|o| {
                let name = o.location.filename()?.to_owned();
                let ms = u64::try_from(o.last_modified.timestamp_millis()).unwrap_or(0);
                Some((name, o.size, UNIX_EPOCH + Duration::from_millis(ms)))
            })
            .collect())
    }

    /// GETs a whole object; `None` if it does not exist.
    fn get(&self, key: &ObjectPath) -> Result<Option<Bytes>> {
        let store = self.store.clone();
        let k = key.clone();
        bump(&self.counters.gets, 1);
        let got = self
            .run_raw(async move {
                match store.get(&k).await {
                    Ok(r) => r.bytes().await,
                    Err(e) => Err(e),
                }
            })
            .map_err(|e| Error::io(format!("reading {key}"), e))?;
        match got {
            Ok(bytes) => {
                bump(&self.counters.bytes_read, bytes.len() as u64);
                Ok(Some(bytes))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(store_error(format!("reading {key}"), e)),
        }
    }

    fn put(&self, key: &ObjectPath, data: Bytes, mode: PutMode) -> object_store::Result<()> {
        let store = self.store.clone();
        let k = key.clone();
        bump(&self.counters.puts, 1);
        bump(&self.counters.bytes_written, data.len() as u64);
        let opts = PutOptions::from(mode);
        self.run_raw(async move { store.put_opts(&k, PutPayload::from(data), opts).await })
            .map_err(|e| object_store::Error::Generic {
                store: "strata",
                source: Box::new(e),
            })?
            .map(|_| ())
    }

    fn delete(&self, key: &ObjectPath) -> Result<()> {
        let store = self.store.clone();
        let k = key.clone();
        bump(&self.counters.deletes, 1);
        match self.run_raw(async move { store.delete(&k).await }) {
            Ok(Ok(()) | Err(object_store::Error::NotFound { .. })) => Ok(()),
            Ok(Err(e)) => Err(store_error(format!("deleting {key}"), e)),
            Err(e) => Err(Error::io(format!("deleting {key}"), e)),
        }
    }

    /// Uploads the spooled file `path` as `key`.
    fn upload(
        &self,
        key: &ObjectPath,
        path: &std::path::Path,
        len: u64,
        threshold: u64,
    ) -> Result<()> {
        let what = || format!("uploading {key}");
        let file = File::open(path).map_err(|e| Error::io(what(), e))?;
        let read = |offset: u64, n: usize| -> Result<Bytes> {
            let mut buf = vec![0u8; n];
            file.read_exact_at(&mut buf, offset)
                .map_err(|e| Error::io(what(), e))?;
            Ok(Bytes::from(buf))
        };
        let size = usize::try_from(len).map_err(|_| Error::InvalidArgument(what()))?;
        if len <= threshold {
            return self
                .put(key, read(0, size)?, PutMode::Overwrite)
                .map_err(|e| store_error(what(), e));
        }
        let store = self.store.clone();
        let k = key.clone();
        bump(&self.counters.puts, 1);
        let mut upload = self.run(what, async move { store.put_multipart(&k).await })?;
        let parts = (|| {
            let mut offset = 0usize;
            while offset < size {
                let n = PART_BYTES.min(size - offset);
                let part = upload.put_part(PutPayload::from(read(offset as u64, n)?));
                bump(&self.counters.puts, 1);
                bump(&self.counters.bytes_written, n as u64);
                self.run(what, part)?;
                offset += n;
            }
            Ok(())
        })();
        bump(&self.counters.puts, 1);
        match parts {
            Ok(()) => self
                .run(what, async move { upload.complete().await })
                .map(|_| ()),
            Err(e) => {
                let _ = self.run_raw(async move { upload.abort().await });
                Err(e)
            }
        }
    }

    /// Fetches the whole SST `name` into the cache and returns its bytes.
    fn fetch(&self, name: &str) -> Result<Bytes> {
        let bytes = self.get(&self.sst_key(name))?.ok_or_else(|| {
            Error::io(
                format!("reading {name}"),
                io::Error::from(ErrorKind::NotFound),
            )
        })?;
        let len = bytes.len() as u64;
        if len <= self.cache.core.capacity / 2 {
            // Threads fetching one file at once each write their own copy.
            static FETCHES: AtomicU64 = AtomicU64::new(0);
            let n = FETCHES.fetch_add(1, Ordering::Relaxed);
            let tmp = self.cache.path(&format!("{name}.{n}.fetch"));
            let written =
                fs::write(&tmp, &bytes).and_then(|()| fs::rename(&tmp, self.cache.path(name)));
            match written {
                Ok(()) => self.cache.insert(name, len),
                Err(e) => {
                    // A cache that cannot take the file costs requests, not correctness.
                    tracing::warn!(error = %e, file = name, "could not cache an SST file");
                    let _ = fs::remove_file(&tmp);
                }
            }
        }
        Ok(bytes)
    }
}

/// Maps an object-store error to the engine's, keeping "not found" and "already exists".
/// The message carries the error's causes: the S3 client's own message for a failed request
/// stops at "error sending request", and the reason (a reset connection, say) is below it.
fn store_error(context: String, e: object_store::Error) -> Error {
    let kind = match &e {
        object_store::Error::NotFound { .. } => ErrorKind::NotFound,
        object_store::Error::AlreadyExists { .. } => ErrorKind::AlreadyExists,
        object_store::Error::PermissionDenied { .. } => ErrorKind::PermissionDenied,
        _ => ErrorKind::Other,
    };
    Error::io(context, io::Error::new(kind, with_causes(&e)))
}

/// `e`'s message followed by those of its causes that it does not already include.
fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

/// Shared checks of the manifest head before synced writes are acknowledged.
#[derive(Debug, Default)]
struct Confirms {
    /// Checks started so far.
    started: AtomicU64,
    /// The latest check (by start order) that passed; held while a check runs.
    passed: Mutex<u64>,
}

/// A [`FileSystem`] over an object store; see the module documentation.
#[derive(Debug)]
pub(crate) struct ObjectFs {
    shared: Arc<Shared>,
    local: LocalFs,
    role: Role,
    opts: ObjectStorage,
    /// Held while a manifest version is written.
    head: Mutex<Head>,
    /// Copies of the head's version and epoch, for stats and errors that must not wait for a
    /// manifest write in flight.
    seen_version: AtomicU64,
    seen_epoch: AtomicU64,
    fenced: AtomicBool,
    /// The epoch that fenced this writer.
    fenced_by: AtomicU64,
    confirms: Confirms,
    /// SSTs and manifest versions to delete once `delete_delay` has passed.
    pending: Mutex<VecDeque<(Instant, ObjectPath)>>,
}

impl ObjectFs {
    /// A backend for the database whose WAL is in `local`, as `role`.
    pub(crate) fn new(local: LocalFs, opts: ObjectStorage, role: Role) -> Result<ObjectFs> {
        let rt = IoRuntime::start("strata-object-io", 2)
            .map_err(|e| Error::io("starting the object-store runtime", e))?;
        let cache = DiskCache::open(
            opts.cache_dir.clone(),
            opts.cache_bytes,
            opts.shared_disk_cache.as_ref(),
        )?;
        let prefix = opts.prefix.trim_matches('/').to_owned();
        Ok(ObjectFs {
            shared: Arc::new(Shared {
                store: opts.store.clone(),
                prefix,
                rt,
                counters: Counters::default(),
                cache,
                sizes: Mutex::new(HashMap::new()),
            }),
            local,
            role,
            opts,
            head: Mutex::new(Head::default()),
            seen_version: AtomicU64::new(0),
            seen_epoch: AtomicU64::new(0),
            fenced: AtomicBool::new(false),
            fenced_by: AtomicU64::new(0),
            confirms: Confirms::default(),
            pending: Mutex::new(VecDeque::new()),
        })
    }

    fn fenced_error(&self) -> Error {
        Error::Fenced {
            prefix: self.shared.prefix.clone(),
            epoch: self.seen_epoch.load(Ordering::Relaxed),
            newer_epoch: self.fenced_by.load(Ordering::Relaxed),
        }
    }

    fn fence(&self, by: u64) -> Error {
        self.fenced_by.fetch_max(by, Ordering::Relaxed);
        if !self.fenced.swap(true, Ordering::Relaxed) {
            tracing::error!(
                prefix = %self.shared.prefix,
                epoch = self.seen_epoch.load(Ordering::Relaxed),
                newer_epoch = by,
                "a newer writer took over the prefix; refusing writes"
            );
        }
        self.fenced_error()
    }

    /// The manifest versions in the store: (version, last modified), ascending.
    pub(crate) fn versions(&self) -> Result<Vec<(u64, SystemTime)>> {
        let mut versions: Vec<(u64, SystemTime)> = self
            .shared
            .list("manifest")?
            .into_iter()
            .filter_map(|(name, _, modified)| {
                (name.len() == 20).then_some(())?;
                Some((name.parse().ok()?, modified))
            })
            .collect();
        versions.sort();
        Ok(versions)
    }

    /// Reads version `version`; `None` if it does not exist.
    pub(crate) fn read_version(&self, version: u64) -> Result<Option<VersionRecord>> {
        let key = self.shared.version_key(version);
        let Some(bytes) = self.shared.get(&key)? else {
            return Ok(None);
        };
        let record = VersionRecord::decode(&bytes, key.as_ref())?;
        if record.version != version {
            return Err(Error::corruption(
                key.as_ref(),
                8,
                format!("holds version {}", record.version),
            ));
        }
        Ok(Some(record))
    }

    /// The newest version; `None` on an empty prefix.
    fn read_head(&self) -> Result<Option<VersionRecord>> {
        // A version deleted between the list and the read was superseded: list again.
        for _ in 0..3 {
            let versions = self.versions()?;
            let Some(&(newest, _)) = versions.last() else {
                return Ok(None);
            };
            if let Some(record) = self.read_version(newest)? {
                return Ok(Some(record));
            }
        }
        Err(Error::io(
            "reading the newest manifest version",
            io::Error::from(ErrorKind::NotFound),
        ))
    }

    /// Fails if the local WAL holds records written under an epoch other than the head's
    /// (the newest version's), unless every version since that epoch's last one is a bare
    /// claim: a newer writer that wrote anything since took over the prefix, so those writes
    /// never reached the bucket, and the manifest's WAL position is the other writer's.
    /// Bare claims change neither (a writer that opened and wrote nothing, or this writer's
    /// own claim when it crashed before recording it here), so the WAL is still this
    /// writer's to replay.
    fn check_local_wal(&self, head: Option<&VersionRecord>) -> Result<()> {
        let root = self.local.root();
        let path = root.join(EPOCH_FILE);
        let wrote = match fs::read(&path) {
            Ok(bytes) => decode_epoch(&bytes)?,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
        };
        let head_epoch = head.map_or(0, |r| r.epoch);
        if wrote == head_epoch || self.only_claims_since(head, wrote)? {
            return Ok(());
        }
        for (_, name) in crate::wal::recovery::list_segments(&self.local)? {
            let seg = root.join(&name);
            let len = fs::metadata(&seg)
                .map_err(|e| Error::io(format!("reading metadata of {}", seg.display()), e))?
                .len();
            if len > crate::wal::segment::HEADER_BYTES as u64 {
                return Err(Error::InvalidArgument(format!(
                    "the write-ahead log in {} was written by epoch {wrote} of {}, but epoch \
                     {head_epoch} has written the prefix since: its unflushed writes were never \
                     in the bucket. Move its wal-*.log files away to open it as a writer",
                    root.display(),
                    self.shared.prefix
                )));
            }
        }
        Ok(())
    }

    /// Whether the versions from the last one of epoch `wrote` up to `head` are, after it,
    /// only claims: each the one before with nothing changed but the file id counter. False
    /// when a version on the way is gone or the walk is long.
    fn only_claims_since(&self, head: Option<&VersionRecord>, wrote: u64) -> Result<bool> {
        /// Claims in a row worth looking through: writers that start and stop without
        /// writing are few.
        const MAX_CLAIMS: usize = 8;
        let Some(mut later) = head.cloned() else {
            return Ok(false);
        };
        for _ in 0..MAX_CLAIMS {
            if later.epoch <= wrote || later.version <= 1 {
                return Ok(false);
            }
            let Some(earlier) = self.read_version(later.version - 1)? else {
                return Ok(false);
            };
            let bare = Manifest {
                next_file_id: earlier.manifest.next_file_id,
                ..later.manifest.clone()
            };
            if bare != earlier.manifest || earlier.epoch >= later.epoch {
                return Ok(false);
            }
            if earlier.epoch == wrote {
                return Ok(true);
            }
            later = earlier;
        }
        Ok(false)
    }

    /// Claims the next version with a new epoch (a writer's open).
    fn claim(&self) -> Result<Manifest> {
        for _ in 0..CLAIM_ATTEMPTS {
            let head = self.read_head()?;
            self.check_local_wal(head.as_ref())?;
            let (version, epoch, mut manifest) = match head {
                Some(r) => (r.version + 1, r.epoch + 1, r.manifest),
                None => (
                    1,
                    1,
                    Manifest {
                        next_file_id: 1,
                        ..Manifest::default()
                    },
                ),
            };
            manifest.next_file_id = manifest.next_file_id.max(epoch << EPOCH_FILE_SHIFT);
            let record = VersionRecord {
                version,
                epoch,
                manifest,
            };
            let key = self.shared.version_key(version);
            match self
                .shared
                .put(&key, Bytes::from(record.encode()), PutMode::Create)
            {
                Ok(()) => {
                    self.local.write_atomic(EPOCH_FILE, &encode_epoch(epoch))?;
                    *self.head.lock() = Head {
                        version,
                        epoch,
                        uncertain: false,
                    };
                    self.seen_version.store(version, Ordering::Relaxed);
                    self.seen_epoch.store(epoch, Ordering::Relaxed);
                    tracing::info!(prefix = %self.shared.prefix, version, epoch, "claimed the object-store prefix");
                    return Ok(record.manifest);
                }
                Err(object_store::Error::AlreadyExists { .. }) => continue,
                Err(object_store::Error::Precondition { .. }) => continue,
                Err(e) => return Err(store_error(format!("claiming {key}"), e)),
            }
        }
        Err(Error::io(
            format!("claiming a manifest version under {}", self.shared.prefix),
            io::Error::other("other writers kept claiming versions first"),
        ))
    }

    /// Deletes what `pending` holds past the delay.
    fn delete_due(&self) {
        let due: Vec<ObjectPath> = {
            let mut pending = self.pending.lock();
            let mut due = Vec::new();
            while pending
                .front()
                .is_some_and(|(at, _)| at.elapsed() >= self.opts.delete_delay)
            {
                if let Some((_, key)) = pending.pop_front() {
                    due.push(key);
                }
            }
            due
        };
        for key in due {
            if let Err(e) = self.shared.delete(&key) {
                tracing::warn!(error = %e, object = %key, "could not delete a superseded object");
            }
        }
    }

    fn delete_later(&self, key: ObjectPath) {
        self.pending.lock().push_back((Instant::now(), key));
    }

    /// At a writer's open: deletes SST objects no kept version names and that are older
    /// than the grace period, and versions superseded for longer than the delete delay
    /// beyond the newest kept.
    fn collect_garbage(&self) -> Result<()> {
        let now = SystemTime::now();
        let versions = self.versions()?;
        let keep_from = versions
            .len()
            .saturating_sub(self.opts.manifest_versions_kept.max(1));
        let mut live = std::collections::HashSet::new();
        for (i, &(version, _)) in versions.iter().enumerate() {
            if i < keep_from {
                // Superseded since its successor was written.
                let successor_age = versions
                    .get(i + 1)
                    .and_then(|(_, m)| now.duration_since(*m).ok())
                    .unwrap_or_default();
                if successor_age >= self.opts.delete_delay {
                    self.shared.delete(&self.shared.version_key(version))?;
                    continue;
                }
            }
            if let Some(record) = self.read_version(version)? {
                live.extend(record.manifest.files.iter().map(|f| f.id));
            }
        }
        for (name, _, modified) in self.shared.list("sst")? {
            let Some(id) = parse_sst_file_name(&name) else {
                continue;
            };
            let old = now
                .duration_since(modified)
                .is_ok_and(|age| age >= self.opts.orphan_grace);
            if !live.contains(&id) && old {
                tracing::info!(file = %name, "deleting an SST object no manifest version names");
                self.shared.delete(&self.shared.sst_key(&name))?;
                self.shared.cache.remove(&name);
            }
        }
        Ok(())
    }

    /// The object name of version `version` under the prefix, for messages.
    pub(crate) fn version_name(&self, version: u64) -> String {
        self.shared.version_key(version).to_string()
    }

    /// The SST objects in the store: (file name, bytes).
    pub(crate) fn sst_objects(&self) -> Result<Vec<(String, u64)>> {
        Ok(self
            .shared
            .list("sst")?
            .into_iter()
            .map(|(name, bytes, _)| (name, bytes))
            .collect())
    }

    /// The object name of the SST `name` under the prefix, for messages.
    pub(crate) fn sst_object_name(&self, name: &str) -> String {
        self.shared.sst_key(name).to_string()
    }

    /// Checks whether version `version` exists, and by whom: `None` if not.
    fn author_of(&self, version: u64) -> Result<Option<u64>> {
        Ok(self.read_version(version)?.map(|r| r.epoch))
    }
}

impl FileSystem for ObjectFs {
    fn create(&self, name: &str) -> Result<Box<dyn WritableFile>> {
        if parse_sst_file_name(name).is_none() {
            return self.local.create(name);
        }
        self.check_writable()?;
        let spool = self.shared.cache.path(&format!("{name}.spool"));
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&spool)
            .map_err(|e| Error::io(format!("creating {}", spool.display()), e))?;
        Ok(Box::new(ObjectWritable {
            shared: self.shared.clone(),
            name: name.to_owned(),
            spool,
            out: Some(BufWriter::with_capacity(1 << 20, file)),
            len: 0,
            threshold: self.opts.multipart_threshold,
        }))
    }

    fn open(&self, name: &str) -> Result<Arc<dyn RandomAccessFile>> {
        if parse_sst_file_name(name).is_none() {
            return self.local.open(name);
        }
        let uploaded = self.shared.sizes.lock().get(name).copied();
        let len = match self.shared.cache.len_of(name).or(uploaded) {
            Some(len) => {
                bump(&self.shared.counters.hits, 1);
                len
            }
            None => {
                bump(&self.shared.counters.misses, 1);
                self.shared.fetch(name)?.len() as u64
            }
        };
        Ok(Arc::new(ObjectReadable {
            shared: self.shared.clone(),
            name: name.to_owned(),
            len,
        }))
    }

    fn list(&self) -> Result<Vec<String>> {
        let mut names = self.local.list()?;
        names.extend(self.shared.list("sst")?.into_iter().map(|(n, _, _)| n));
        Ok(names)
    }

    fn delete(&self, name: &str) -> Result<()> {
        if parse_sst_file_name(name).is_none() {
            return self.local.delete(name);
        }
        self.shared.cache.remove(name);
        self.shared.sizes.lock().remove(name);
        self.delete_later(self.shared.sst_key(name));
        Ok(())
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        if parse_sst_file_name(from).is_some() || parse_sst_file_name(to).is_some() {
            return Err(Error::InvalidArgument(format!(
                "SST objects are not renamed ({from} to {to})"
            )));
        }
        self.local.rename(from, to)
    }

    fn sync_dir(&self, name: &str) -> Result<()> {
        // SST objects are durable once uploaded; only the WAL's directory needs an fsync.
        if parse_sst_file_name(name).is_some() {
            return Ok(());
        }
        self.local.sync_dir(name)
    }

    fn create_log(&self, name: &str) -> Result<Arc<dyn LogFile>> {
        self.local.create_log(name)
    }

    fn open_log(&self, name: &str) -> Result<Arc<dyn LogFile>> {
        self.local.open_log(name)
    }

    fn write_atomic(&self, name: &str, _data: &[u8]) -> Result<(), AtomicWriteError> {
        Err(AtomicWriteError {
            error: Error::InvalidArgument(format!(
                "{name}: the object store keeps versioned manifests only"
            )),
            maybe_replaced: false,
        })
    }

    fn load_manifest(&self) -> Result<Option<Manifest>> {
        match self.role {
            Role::Writer => self.claim().map(Some),
            Role::Follower => {
                let head = self.read_head()?;
                let mut h = self.head.lock();
                Ok(head.map(|r| {
                    h.version = r.version;
                    self.seen_version.store(r.version, Ordering::Relaxed);
                    r.manifest
                }))
            }
        }
    }

    fn store_manifest(&self, manifest: &Manifest) -> Result<(), AtomicWriteError> {
        let before = |error| AtomicWriteError {
            error,
            maybe_replaced: false,
        };
        self.check_writable().map_err(before)?;
        let mut head = self.head.lock();
        let epoch = head.epoch;
        if head.uncertain {
            // The last store may have created the next version after all.
            match self.author_of(head.version + 1).map_err(before)? {
                Some(e) if e == epoch => {
                    head.version += 1;
                    self.seen_version.store(head.version, Ordering::Relaxed);
                }
                Some(e) => {
                    drop(head);
                    return Err(before(self.fence(e)));
                }
                None => {}
            }
            head.uncertain = false;
        }
        let version = head.version + 1;
        let record = VersionRecord {
            version,
            epoch,
            manifest: manifest.clone(),
        };
        let key = self.shared.version_key(version);
        match self
            .shared
            .put(&key, Bytes::from(record.encode()), PutMode::Create)
        {
            Ok(()) => {}
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => {
                // A retried request of ours may have created it; any other epoch fences.
                match self.author_of(version) {
                    Ok(Some(e)) if e == epoch => {}
                    Ok(Some(e)) => {
                        drop(head);
                        return Err(before(self.fence(e)));
                    }
                    Ok(None) | Err(_) => {
                        drop(head);
                        return Err(before(self.fence(epoch + 1)));
                    }
                }
            }
            Err(e) => {
                head.uncertain = true;
                return Err(AtomicWriteError {
                    error: store_error(format!("writing {key}"), e),
                    maybe_replaced: true,
                });
            }
        }
        head.version = version;
        self.seen_version.store(version, Ordering::Relaxed);
        drop(head);
        let kept = self.opts.manifest_versions_kept.max(1) as u64;
        if version > kept {
            self.delete_later(self.shared.version_key(version - kept));
        }
        self.delete_due();
        Ok(())
    }

    fn remove_orphans(&self, _manifest: &Manifest) -> Result<()> {
        if self.role == Role::Writer {
            self.collect_garbage()?;
        }
        Ok(())
    }

    fn check_writable(&self) -> Result<()> {
        if self.role == Role::Follower {
            return Err(Error::ReadOnly(format!(
                "a follower of {} takes no writes",
                self.shared.prefix
            )));
        }
        if self.fenced.load(Ordering::Relaxed) {
            return Err(self.fenced_error());
        }
        Ok(())
    }

    fn confirm_writer(&self) -> Result<()> {
        self.check_writable()?;
        // A check that starts after this call passes for it.
        let need = self.confirms.started.load(Ordering::Acquire) + 1;
        let mut passed = self.confirms.passed.lock();
        if *passed >= need {
            return Ok(());
        }
        let id = self.confirms.started.fetch_add(1, Ordering::AcqRel) + 1;
        // Not the head's lock: a manifest write in flight would hold it up.
        let mut version = self.seen_version.load(Ordering::Relaxed) + 1;
        let epoch = self.seen_epoch.load(Ordering::Relaxed);
        // Versions this writer's own flushes wrote meanwhile are passed over, up to the first
        // free number.
        loop {
            let store = self.shared.store.clone();
            let key = self.shared.version_key(version);
            bump(&self.shared.counters.heads, 1);
            let found = self
                .shared
                .run_raw(async move { store.head(&key).await })
                .map_err(|e| Error::io("checking the manifest head", e))?;
            match found {
                Err(object_store::Error::NotFound { .. }) => break,
                Ok(_) => match self.author_of(version)? {
                    Some(e) if e != epoch => return Err(self.fence(e)),
                    _ => version += 1,
                },
                Err(e) => return Err(store_error("checking the manifest head".into(), e)),
            }
        }
        *passed = id;
        self.check_writable()
    }

    fn refresh_manifest(&self) -> Result<Option<Manifest>> {
        let Some(record) = self.read_head()? else {
            return Ok(None);
        };
        let mut head = self.head.lock();
        if record.version <= head.version {
            return Ok(None);
        }
        head.version = record.version;
        Ok(Some(record.manifest))
    }

    fn manifest_applied(&self, applied: bool) {
        let mut head = self.head.lock();
        if applied {
            self.seen_version.store(head.version, Ordering::Relaxed);
        } else {
            // `seen_version` is the version applied last.
            head.version = self.seen_version.load(Ordering::Relaxed);
        }
    }

    fn prefetch(&self, files: &[(String, u64)]) {
        let cache = &self.shared.cache;
        let mut budget = cache.core.capacity;
        let wanted: Vec<&str> = files
            .iter()
            .filter(|(name, bytes)| {
                let fits = *bytes <= cache.core.capacity / 2 && *bytes <= budget;
                if fits {
                    budget -= bytes;
                }
                fits && cache.len_of(name).is_none()
            })
            .map(|(name, _)| name.as_str())
            .collect();
        let next = AtomicU64::new(0);
        // Each thread waits on one request at a time; the runtime runs them side by side.
        std::thread::scope(|s| {
            for _ in 0..PREFETCH_THREADS.min(wanted.len()) {
                s.spawn(|| {
                    while let Some(name) = usize::try_from(next.fetch_add(1, Ordering::Relaxed))
                        .ok()
                        .and_then(|i| wanted.get(i))
                    {
                        bump(&self.shared.counters.misses, 1);
                        if let Err(e) = self.shared.fetch(name) {
                            tracing::warn!(error = %e, file = name, "could not prefetch an SST");
                        }
                    }
                });
            }
        });
    }

    fn forget(&self, name: &str) {
        self.shared.cache.remove(name);
    }

    fn sync_needs_flush(&self) -> bool {
        true
    }

    fn object_stats(&self) -> Option<ObjectStats> {
        let c = &self.shared.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Some(ObjectStats {
            gets: load(&c.gets),
            puts: load(&c.puts),
            heads: load(&c.heads),
            lists: load(&c.lists),
            deletes: load(&c.deletes),
            bytes_read: load(&c.bytes_read),
            bytes_written: load(&c.bytes_written),
            disk_cache_hits: load(&c.hits),
            disk_cache_misses: load(&c.misses),
            disk_cache_bytes: self.shared.cache.used(),
            manifest_version: self.seen_version.load(Ordering::Relaxed),
            epoch: self.seen_epoch.load(Ordering::Relaxed),
            fenced: self.fenced.load(Ordering::Relaxed),
        })
    }
}

/// An SST being spooled to the cache directory, uploaded by `finish`.
#[derive(Debug)]
struct ObjectWritable {
    shared: Arc<Shared>,
    name: String,
    spool: PathBuf,
    out: Option<BufWriter<File>>,
    len: u64,
    threshold: u64,
}

impl WritableFile for ObjectWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let out = self
            .out
            .as_mut()
            .ok_or_else(|| Error::InvalidArgument(format!("{} is finished", self.name)))?;
        out.write_all(data)
            .map_err(|e| Error::io(format!("spooling {}", self.name), e))?;
        self.len += data.len() as u64;
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        // Durability comes with the upload in `finish`.
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn finish(mut self: Box<Self>) -> Result<()> {
        let result = (|| {
            if let Some(mut out) = self.out.take() {
                out.flush()
                    .map_err(|e| Error::io(format!("spooling {}", self.name), e))?;
            }
            let key = self.shared.sst_key(&self.name);
            self.shared
                .upload(&key, &self.spool, self.len, self.threshold)?;
            let cache = &self.shared.cache;
            if self.len <= cache.core.capacity / 2 {
                fs::rename(&self.spool, cache.path(&self.name))
                    .map_err(|e| Error::io(format!("caching {}", self.name), e))?;
                cache.insert(&self.name, self.len);
            } else {
                self.shared.sizes.lock().insert(self.name.clone(), self.len);
            }
            Ok(())
        })();
        let _ = fs::remove_file(&self.spool);
        result
    }
}

impl Drop for ObjectWritable {
    fn drop(&mut self) {
        if self.out.is_some() {
            let _ = fs::remove_file(&self.spool);
        }
    }
}

/// An SST read through the disk cache.
#[derive(Debug)]
struct ObjectReadable {
    shared: Arc<Shared>,
    name: String,
    len: u64,
}

impl RandomAccessFile for ObjectReadable {
    fn name(&self) -> &str {
        &self.name
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
        super::check_range(&self.name, self.len, offset, len)?;
        let shared = &self.shared;
        if let Some(bytes) = shared.cache.read(&self.name, offset, len) {
            bump(&shared.counters.hits, 1);
            return Ok(bytes);
        }
        bump(&shared.counters.misses, 1);
        if self.len > shared.cache.core.capacity / 2 {
            let store = shared.store.clone();
            let key = shared.sst_key(&self.name);
            bump(&shared.counters.gets, 1);
            bump(&shared.counters.bytes_read, len as u64);
            let range = offset..offset + len as u64;
            return shared.run(
                || format!("reading {} at {offset}", self.name),
                async move { store.get_range(&key, range).await },
            );
        }
        let whole = shared.fetch(&self.name)?;
        if whole.len() as u64 != self.len {
            return Err(Error::corruption(
                &self.name,
                0,
                format!("object holds {} bytes, expected {}", whole.len(), self.len),
            ));
        }
        let start =
            usize::try_from(offset).map_err(|_| Error::InvalidArgument(self.name.clone()))?;
        Ok(whole.slice(start..start + len))
    }
}

#[cfg(test)]
mod tests;
