//! The small file interface every engine file goes through.
//!
//! SST files and manifests are written once and then only read by range, and the WAL only
//! appends and syncs. Keeping the interface this narrow lets the same engine keep its files on
//! S3-compatible object storage (DESIGN §9): a write-once file maps to a (multipart) PUT, a ranged
//! read to a ranged GET, and [`FileSystem::write_atomic`] to a create-if-absent PUT.
//!
//! The WAL's segments are the one exception to write-once: a [`LogFile`] is written at
//! explicit offsets by the commit leader while another thread may fsync it, and a failed append
//! is cut off again (`wal.rs`).
//!
//! Names are flat: one path component relative to the file system's root, no separators.
//!
//! Tests put a fault-injecting layer ([`fault`]) between the engine and the disk.

#![cfg_attr(
    not(test),
    allow(
        dead_code,
        reason = "MemFs and a few methods serve the tests, the fuzz entry point and object storage"
    )
)]

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::file_name::{MANIFEST_NAME, parse_sst_file_name};
use crate::manifest::Manifest;
use crate::stats::ObjectStats;

pub(crate) mod fault;
pub(crate) mod object;

/// A place that holds the engine's files.
pub(crate) trait FileSystem: Send + Sync + fmt::Debug {
    /// Creates a new file for appending. Fails if `name` already exists: files are write-once.
    fn create(&self, name: &str) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file for ranged reads.
    fn open(&self, name: &str) -> Result<Arc<dyn RandomAccessFile>>;
    /// The names of every file, in no particular order.
    fn list(&self) -> Result<Vec<String>>;
    /// Deletes a file. Deleting a file that does not exist is not an error.
    fn delete(&self, name: &str) -> Result<()>;
    /// Renames `from` to `to`, atomically replacing `to` if it exists.
    fn rename(&self, from: &str, to: &str) -> Result<()>;
    /// Makes creations, renames and deletions durable: the one of `name` (which only says
    /// why, for errors and tests) and every other before it.
    fn sync_dir(&self, name: &str) -> Result<()>;
    /// Creates `name` empty for [`LogFile`] writes, replacing a file of that name.
    fn create_log(&self, name: &str) -> Result<Arc<dyn LogFile>>;
    /// Opens the existing file `name` for [`LogFile`] writes.
    fn open_log(&self, name: &str) -> Result<Arc<dyn LogFile>>;

    /// Atomically replaces (or creates) `name` with `data`: write a temporary file, sync it,
    /// rename it over `name` and sync the directory. After a crash `name` holds either the old
    /// or the new contents, never a mix. On failure the error says whether `name` may hold the
    /// new contents (the rename was tried).
    fn write_atomic(&self, name: &str, data: &[u8]) -> Result<(), AtomicWriteError> {
        let tmp = format!("{name}.tmp");
        let before = |error| AtomicWriteError {
            error,
            maybe_replaced: false,
        };
        self.delete(&tmp).map_err(before)?;
        let mut file = self.create(&tmp).map_err(before)?;
        file.append(data).map_err(before)?;
        file.finish().map_err(before)?;
        let after = |error| AtomicWriteError {
            error,
            maybe_replaced: true,
        };
        if let Err(error) = self.rename(&tmp, name) {
            // A rename happens whole or not at all: the temporary file still there says not.
            let maybe_replaced = !self.list().is_ok_and(|names| names.contains(&tmp));
            return Err(AtomicWriteError {
                error,
                maybe_replaced,
            });
        }
        self.sync_dir(name).map_err(after)
    }

    /// Loads the manifest; `None` if there is none yet. The local scheme reads the single
    /// `MANIFEST` file; the object store reads (and a writer claims) the newest version.
    fn load_manifest(&self) -> Result<Option<Manifest>> {
        Manifest::load_file(self)
    }

    /// Makes `manifest` the current one, atomically; see [`FileSystem::write_atomic`] for the
    /// error. Over an object store a newer writer makes this fail with `Error::Fenced`.
    fn store_manifest(&self, manifest: &Manifest) -> Result<(), AtomicWriteError> {
        self.write_atomic(MANIFEST_NAME, &manifest.encode())
    }

    /// Deletes, at open, the files a crash left behind that `manifest` does not name: SSTs
    /// and a half-written manifest.
    fn remove_orphans(&self, manifest: &Manifest) -> Result<()> {
        for name in self.list()? {
            let orphan = match parse_sst_file_name(&name) {
                Some(id) => !manifest.files.iter().any(|f| f.id == id),
                None => name == format!("{MANIFEST_NAME}.tmp"),
            };
            if orphan {
                tracing::info!(file = %name, "deleting a file left by an interrupted flush");
                self.delete(&name)?;
            }
        }
        Ok(())
    }

    /// Fails if this database may not write: a fenced writer or a read-only follower.
    fn check_writable(&self) -> Result<()> {
        Ok(())
    }

    /// Called before a synced write is acknowledged: fails if a newer writer has taken over
    /// (see `fs/object.rs`). Local storage has no other writer.
    fn confirm_writer(&self) -> Result<()> {
        Ok(())
    }

    /// Whether files live away from the WAL's disk (an object store), so that a synced write
    /// is durable there only once a flush has put it in a file the manifest names.
    fn sync_needs_flush(&self) -> bool {
        false
    }

    /// A follower's newest manifest, if it is newer than the one it last applied.
    fn refresh_manifest(&self) -> Result<Option<Manifest>> {
        Ok(None)
    }

    /// Tells a follower whether the manifest [`FileSystem::refresh_manifest`] last returned
    /// was applied; if not (a file could not be fetched), the next refresh returns it again.
    fn manifest_applied(&self, _applied: bool) {}

    /// Fetches files about to be opened, `(name, bytes)`, into a local cache ahead of time,
    /// several at once. Best effort: a failure shows when the file is opened.
    fn prefetch(&self, _files: &[(String, u64)]) {}

    /// Drops the local copy of a file a follower no longer needs.
    fn forget(&self, _name: &str) {}

    /// Object-store counters, on that backend.
    fn object_stats(&self) -> Option<ObjectStats> {
        None
    }
}

/// A failed [`FileSystem::write_atomic`].
#[derive(Debug)]
pub(crate) struct AtomicWriteError {
    /// What failed.
    pub(crate) error: Error,
    /// The file may hold the new contents, now or after a crash: the rename was tried (and a
    /// failed directory fsync leaves it undecided). When false it holds the old contents.
    pub(crate) maybe_replaced: bool,
}

impl From<AtomicWriteError> for Error {
    fn from(e: AtomicWriteError) -> Error {
        e.error
    }
}

/// A file being written. Appends only.
pub(crate) trait WritableFile: Send + fmt::Debug {
    /// Appends bytes at the end.
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Makes everything appended so far durable.
    fn sync(&mut self) -> Result<()>;
    /// Bytes appended so far.
    fn len(&self) -> u64;
    /// Syncs and closes the file. After this the file is immutable.
    fn finish(self: Box<Self>) -> Result<()>;
}

/// A WAL segment being appended to: written at explicit offsets by one writer at a time, while
/// any thread may sync it.
pub(crate) trait LogFile: Send + Sync + fmt::Debug {
    /// Writes all of `data` at `offset`. On failure a prefix of it may have been written.
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()>;
    /// Makes everything written so far durable (fdatasync).
    fn sync(&self) -> Result<()>;
    /// Cuts the file to `len` bytes.
    fn truncate(&self, len: u64) -> Result<()>;
}

/// A file opened for ranged reads.
pub(crate) trait RandomAccessFile: Send + Sync + fmt::Debug {
    /// The file's name, used in errors.
    fn name(&self) -> &str;
    /// The file's length in bytes.
    fn len(&self) -> u64;
    /// Reads exactly `len` bytes at `offset`. A range past the end of the file is
    /// [`Error::Corruption`]: the caller took the range from the file's own metadata.
    fn read_at(&self, offset: u64, len: usize) -> Result<Bytes>;
}

/// Fails with [`Error::Corruption`] if `len` bytes at `offset` run past the end of the file
/// `name` of `file_len` bytes.
pub(crate) fn check_range(name: &str, file_len: u64, offset: u64, len: usize) -> Result<()> {
    let end = offset.checked_add(len as u64);
    if end.is_none_or(|end| end > file_len) {
        return Err(Error::corruption(
            name,
            offset,
            format!("read of {len} bytes runs past the end of the file ({file_len} bytes)"),
        ));
    }
    Ok(())
}

/// A [`FileSystem`] on a local directory.
#[derive(Debug, Clone)]
pub(crate) struct LocalFs {
    root: PathBuf,
}

impl LocalFs {
    /// A file system rooted at `root`, which is created if missing.
    pub(crate) fn new(root: impl Into<PathBuf>) -> Result<LocalFs> {
        let root = root.into();
        fs::create_dir_all(&root)
            .map_err(|e| Error::io(format!("creating directory {}", root.display()), e))?;
        Ok(LocalFs { root })
    }

    /// The directory this file system lives in.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, name: &str) -> Result<PathBuf> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(Error::InvalidArgument(format!("bad file name {name:?}")));
        }
        Ok(self.root.join(name))
    }
}

impl FileSystem for LocalFs {
    fn create(&self, name: &str) -> Result<Box<dyn WritableFile>> {
        let path = self.path(name)?;
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        Ok(Box::new(LocalWritable {
            name: name.to_owned(),
            out: BufWriter::with_capacity(64 << 10, file),
            len: 0,
        }))
    }

    fn open(&self, name: &str) -> Result<Arc<dyn RandomAccessFile>> {
        let path = self.path(name)?;
        let file =
            File::open(&path).map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(format!("reading metadata of {}", path.display()), e))?
            .len();
        Ok(Arc::new(LocalReadable {
            name: name.to_owned(),
            file,
            len,
        }))
    }

    fn list(&self) -> Result<Vec<String>> {
        let ctx = || format!("listing {}", self.root.display());
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.root).map_err(|e| Error::io(ctx(), e))? {
            let entry = entry.map_err(|e| Error::io(ctx(), e))?;
            if let Some(name) = entry.file_name().to_str() {
                names.push(name.to_owned());
            }
        }
        Ok(names)
    }

    fn delete(&self, name: &str) -> Result<()> {
        let path = self.path(name)?;
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(format!("deleting {}", path.display()), e)),
        }
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let (src, dst) = (self.path(from)?, self.path(to)?);
        fs::rename(&src, &dst).map_err(|e| {
            Error::io(
                format!("renaming {} to {}", src.display(), dst.display()),
                e,
            )
        })
    }

    fn sync_dir(&self, name: &str) -> Result<()> {
        let ctx = || format!("syncing directory {} for {name}", self.root.display());
        File::open(&self.root)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io(ctx(), e))
    }

    fn create_log(&self, name: &str) -> Result<Arc<dyn LogFile>> {
        let path = self.path(name)?;
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        Ok(Arc::new(LocalLog { path, file }))
    }

    fn open_log(&self, name: &str) -> Result<Arc<dyn LogFile>> {
        let path = self.path(name)?;
        let file = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        Ok(Arc::new(LocalLog { path, file }))
    }
}

#[derive(Debug)]
struct LocalLog {
    path: PathBuf,
    file: File,
}

impl LogFile for LocalLog {
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.file
            .write_all_at(data, offset)
            .map_err(|e| Error::io(format!("appending to {}", self.path.display()), e))
    }

    fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io(format!("fsyncing {}", self.path.display()), e))
    }

    fn truncate(&self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .map_err(|e| Error::io(format!("truncating {}", self.path.display()), e))
    }
}

#[derive(Debug)]
struct LocalWritable {
    name: String,
    out: BufWriter<File>,
    len: u64,
}

impl WritableFile for LocalWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.out
            .write_all(data)
            .map_err(|e| Error::io(format!("writing {}", self.name), e))?;
        self.len += data.len() as u64;
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.out
            .flush()
            .and_then(|()| self.out.get_ref().sync_data())
            .map_err(|e| Error::io(format!("syncing {}", self.name), e))
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn finish(mut self: Box<Self>) -> Result<()> {
        self.out
            .flush()
            .and_then(|()| self.out.get_ref().sync_all())
            .map_err(|e| Error::io(format!("finishing {}", self.name), e))
    }
}

#[derive(Debug)]
struct LocalReadable {
    name: String,
    file: File,
    len: u64,
}

impl RandomAccessFile for LocalReadable {
    fn name(&self) -> &str {
        &self.name
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
        check_range(&self.name, self.len, offset, len)?;
        let mut buf = vec![0u8; len];
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(|e| Error::io(format!("reading {} at {offset}", self.name), e))?;
        Ok(Bytes::from(buf))
    }
}

/// An in-memory [`FileSystem`] for tests and fuzz targets. A file's contents are visible as
/// soon as they are appended; [`FileSystem::open`] takes a snapshot of them.
#[derive(Debug, Clone, Default)]
pub(crate) struct MemFs {
    files: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
}

impl MemFs {
    /// An empty file system.
    pub(crate) fn new() -> MemFs {
        MemFs::default()
    }

    /// Replaces a file's contents (for tests that damage files).
    pub(crate) fn put(&self, name: &str, data: Vec<u8>) {
        self.files.lock().insert(name.to_owned(), data);
    }

    /// A copy of a file's contents.
    pub(crate) fn get(&self, name: &str) -> Option<Vec<u8>> {
        self.files.lock().get(name).cloned()
    }

    fn not_found(name: &str) -> Error {
        Error::io(
            format!("opening {name}"),
            io::Error::from(ErrorKind::NotFound),
        )
    }
}

impl FileSystem for MemFs {
    fn create(&self, name: &str) -> Result<Box<dyn WritableFile>> {
        let mut files = self.files.lock();
        if files.contains_key(name) {
            return Err(Error::io(
                format!("creating {name}"),
                io::Error::from(ErrorKind::AlreadyExists),
            ));
        }
        files.insert(name.to_owned(), Vec::new());
        Ok(Box::new(MemWritable {
            fs: self.clone(),
            name: name.to_owned(),
            len: 0,
        }))
    }

    fn open(&self, name: &str) -> Result<Arc<dyn RandomAccessFile>> {
        let data = self.get(name).ok_or_else(|| MemFs::not_found(name))?;
        Ok(Arc::new(MemReadable {
            name: name.to_owned(),
            data: Bytes::from(data),
        }))
    }

    fn list(&self) -> Result<Vec<String>> {
        Ok(self.files.lock().keys().cloned().collect())
    }

    fn delete(&self, name: &str) -> Result<()> {
        self.files.lock().remove(name);
        Ok(())
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let mut files = self.files.lock();
        let data = files.remove(from).ok_or_else(|| MemFs::not_found(from))?;
        files.insert(to.to_owned(), data);
        Ok(())
    }

    fn sync_dir(&self, _name: &str) -> Result<()> {
        Ok(())
    }

    fn create_log(&self, name: &str) -> Result<Arc<dyn LogFile>> {
        self.files.lock().insert(name.to_owned(), Vec::new());
        Ok(Arc::new(MemLog {
            fs: self.clone(),
            name: name.to_owned(),
        }))
    }

    fn open_log(&self, name: &str) -> Result<Arc<dyn LogFile>> {
        if !self.files.lock().contains_key(name) {
            return Err(MemFs::not_found(name));
        }
        Ok(Arc::new(MemLog {
            fs: self.clone(),
            name: name.to_owned(),
        }))
    }
}

#[derive(Debug)]
struct MemLog {
    fs: MemFs,
    name: String,
}

impl LogFile for MemLog {
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        let mut files = self.fs.files.lock();
        let file = files
            .get_mut(&self.name)
            .ok_or_else(|| MemFs::not_found(&self.name))?;
        let start = usize::try_from(offset)
            .map_err(|_| Error::InvalidArgument(format!("offset {offset} out of range")))?;
        let end = start + data.len();
        if file.len() < end {
            file.resize(end, 0);
        }
        file[start..end].copy_from_slice(data);
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn truncate(&self, len: u64) -> Result<()> {
        let mut files = self.fs.files.lock();
        let file = files
            .get_mut(&self.name)
            .ok_or_else(|| MemFs::not_found(&self.name))?;
        file.truncate(usize::try_from(len).unwrap_or(usize::MAX));
        Ok(())
    }
}

#[derive(Debug)]
struct MemWritable {
    fs: MemFs,
    name: String,
    len: u64,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let mut files = self.fs.files.lock();
        let file = files
            .get_mut(&self.name)
            .ok_or_else(|| MemFs::not_found(&self.name))?;
        file.extend_from_slice(data);
        self.len += data.len() as u64;
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn finish(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

#[derive(Debug)]
struct MemReadable {
    name: String,
    data: Bytes,
}

impl RandomAccessFile for MemReadable {
    fn name(&self) -> &str {
        &self.name
    }

    fn len(&self) -> u64 {
        self.data.len() as u64
    }

    fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
        let range = usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(len)?))
            .filter(|r| r.end <= self.data.len());
        match range {
            Some(r) => Ok(self.data.slice(r)),
            None => Err(Error::corruption(
                &self.name,
                offset,
                format!(
                    "read of {len} bytes runs past the end of the file ({} bytes)",
                    self.data.len()
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_once_read_ranges_list_rename_delete() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let fs = LocalFs::new(dir.path())?;
        assert_eq!(fs.root(), dir.path());
        let mut f = fs.create("a.sst")?;
        f.append(b"hello ")?;
        f.append(b"world")?;
        f.sync()?;
        assert_eq!(f.len(), 11);
        f.finish()?;
        assert!(fs.create("a.sst").is_err(), "files are write-once");

        let r = fs.open("a.sst")?;
        assert_eq!(r.len(), 11);
        assert_eq!(&r.read_at(6, 5)?[..], b"world");
        assert_eq!(&r.read_at(11, 0)?[..], b"");
        match r.read_at(8, 4) {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!((file.as_str(), offset), ("a.sst", 8));
            }
            other => panic!("expected corruption, got {other:?}"),
        }
        assert!(r.read_at(u64::MAX, 2).is_err());

        fs.write_atomic("MANIFEST", b"v1")?;
        fs.write_atomic("MANIFEST", b"v2")?;
        assert_eq!(&fs.open("MANIFEST")?.read_at(0, 2)?[..], b"v2");

        fs.rename("a.sst", "b.sst")?;
        let mut names = fs.list()?;
        names.sort();
        assert_eq!(names, ["MANIFEST", "b.sst"]);
        fs.delete("b.sst")?;
        fs.delete("b.sst")?;
        assert_eq!(fs.list()?, ["MANIFEST"]);
        assert!(fs.create("../escape").is_err());
        Ok(())
    }

    #[test]
    fn mem_fs_behaves_like_local_fs() -> Result<()> {
        let fs = MemFs::new();
        let mut f = fs.create("a")?;
        f.append(b"hello")?;
        f.sync()?;
        assert_eq!(f.len(), 5);
        f.finish()?;
        assert!(fs.create("a").is_err());
        let r = fs.open("a")?;
        assert_eq!((r.name(), r.len()), ("a", 5));
        assert_eq!(&r.read_at(1, 3)?[..], b"ell");
        assert!(matches!(
            r.read_at(4, 2),
            Err(Error::Corruption { offset: 4, .. })
        ));
        assert!(r.read_at(u64::MAX, 1).is_err());
        fs.write_atomic("M", b"v1")?;
        fs.rename("a", "b")?;
        assert_eq!(fs.list()?, ["M", "b"]);
        fs.put("b", b"x".to_vec());
        assert_eq!(fs.get("b").as_deref(), Some(&b"x"[..]));
        fs.delete("b")?;
        assert!(fs.open("b").is_err());
        fs.sync_dir("M")
    }
}
