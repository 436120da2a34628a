//! Checkpoints: a consistent copy of an open database in another directory, made while
//! writes go on, and the restore of such a copy.
//!
//! A checkpoint is a database directory of its own: the SST files of one version and a
//! `MANIFEST` naming them, with no WAL. [`crate::Db::checkpoint`] makes it in four steps:
//!
//! 1. It flushes the memtables ([`crate::Db::flush`]), which first waits for every batch
//!    queued before the call. Every batch acknowledged before the checkpoint began is then in
//!    an SST file, and the manifest's `last_seq` covers it.
//! 2. It holds the compaction lock until the end, so no compaction deletes a live file while
//!    it is linked or copied (flushes go on: they only add files), and takes the manifest in
//!    place, the version it copies.
//! 3. It hard-links each SST file of that version into the target, or copies it when the
//!    link fails (another file system, `EXDEV`). A file the target already holds with the same
//!    size and footer is skipped: SST files are immutable and their ids are never reused, so
//!    that is the same file. Copies go to a temporary name, are fsynced, then renamed.
//! 4. It writes the `MANIFEST` (temporary file, fsync, rename, fsync of the directory), and
//!    only then deletes the target's SST files that manifest does not name.
//!
//! The copy holds the batches up to the manifest's `last_seq`: everything acknowledged before
//! step 1, and possibly some later batches, in whole batches only. Flushing instead of copying
//! WAL segments keeps the copy free of a WAL to replay and cut at one sequence number; the cost
//! is one small level-0 file per table per checkpoint, which compaction merges as usual.
//!
//! The target is a valid database after every step of a later checkpoint into it: its
//! manifest only ever names files that are fully written, and files are deleted only once the
//! manifest that dropped them is in place.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind as IoKind, Read, Write};
use std::path::Path;

use crate::db::Db;
use crate::error::{Error, Result};
use crate::file_name::{
    MANIFEST_NAME, parse_segment_file_name, parse_sst_file_name, sst_file_name,
};
use crate::manifest::{FileMeta, Manifest};

/// How many bytes a copy reads and writes at a time; large enough that the per-call cost is
/// lost in the disk's, small enough that progress moves smoothly.
const COPY_CHUNK_BYTES: usize = 1 << 20;
/// The SST footer's length: its last bytes hold a checksum over the block handles, so two
/// files of one name, one size and one footer are the same file.
const FOOTER_BYTES: u64 = 64;

/// What a checkpoint or a restore did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointReport {
    /// Every batch up to this sequence number is in the copy.
    pub seq: u64,
    /// SST files hard-linked into the target.
    pub files_linked: u64,
    /// SST files copied (the link failed, or the caller asked for copies).
    pub files_copied: u64,
    /// SST files the target already held.
    pub files_skipped: u64,
    /// Files removed from the target because the new manifest does not name them.
    pub files_removed: u64,
    /// Bytes of the linked files.
    pub bytes_linked: u64,
    /// Bytes copied.
    pub bytes_copied: u64,
    /// Bytes of the skipped files.
    pub bytes_skipped: u64,
}

impl CheckpointReport {
    /// The bytes of the SST files the copy holds.
    pub fn total_bytes(&self) -> u64 {
        self.bytes_linked + self.bytes_copied + self.bytes_skipped
    }
}

/// Told how far a checkpoint or restore got: `(bytes done, bytes in all)`. Called at the start
/// with no bytes done, and after each chunk of each file.
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64);

impl Db {
    /// Makes a consistent copy of the database in `target` (created if missing) while writes
    /// go on; see the module doc for what it holds. A later checkpoint into the same target
    /// copies only the files it lacks.
    pub fn checkpoint(&self, target: &Path, progress: Progress<'_>) -> Result<CheckpointReport> {
        if matches!(self.inner.opts.storage, crate::options::Storage::Object(_)) {
            // The SSTs are in the bucket, not in the directory the copy is made from.
            return Err(Error::InvalidArgument(
                "checkpoints copy a local database; on object storage copy the prefix".into(),
            ));
        }
        check_target(&self.inner.dir, target)?;
        self.flush()?;
        let inner = &self.inner;
        let _no_compaction = inner.compaction.lock();
        let manifest = inner.manifest.lock().clone();
        sync_files(&inner.dir, &manifest, target, true, progress)
    }
}

/// Copies the checkpoint in `from` into the database directory `to`, which should hold no
/// database (the caller checks; WAL segments and SST files the checkpoint does not name are
/// deleted). Files are copied, not linked, so the restored database shares no inode with the
/// backup. The checkpoint's manifest must decode and name only files of the recorded sizes.
pub fn restore_checkpoint(
    from: &Path,
    to: &Path,
    progress: Progress<'_>,
) -> Result<CheckpointReport> {
    let manifest = read_manifest(from)?;
    for f in &manifest.files {
        let path = from.join(sst_file_name(f.id));
        let len = fs::metadata(&path)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?
            .len();
        if len != f.bytes {
            return Err(Error::corruption(
                sst_file_name(f.id),
                len,
                format!("the manifest says {} bytes", f.bytes),
            ));
        }
    }
    fs::create_dir_all(to).map_err(|e| Error::io(format!("creating {}", to.display()), e))?;
    for name in list(to)? {
        if parse_segment_file_name(&name).is_some() {
            remove(&to.join(&name))?;
        }
    }
    sync_files(from, &manifest, to, false, progress)
}

/// Reads and decodes the manifest of the database directory `dir`.
fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join(MANIFEST_NAME);
    let bytes = fs::read(&path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    Manifest::decode(&bytes, MANIFEST_NAME)
}

/// Refuses a target that is the database itself, or that holds a WAL (a live database).
fn check_target(source: &Path, target: &Path) -> Result<()> {
    fs::create_dir_all(target)
        .map_err(|e| Error::io(format!("creating {}", target.display()), e))?;
    let resolved = target
        .canonicalize()
        .map_err(|e| Error::io(format!("resolving {}", target.display()), e))?;
    if resolved == source {
        return Err(Error::InvalidArgument(format!(
            "the backup target {} is the database directory itself",
            target.display()
        )));
    }
    if list(target)?
        .iter()
        .any(|n| parse_segment_file_name(n).is_some())
    {
        return Err(Error::InvalidArgument(format!(
            "{} holds write-ahead log segments: it is a database, not a backup",
            target.display()
        )));
    }
    Ok(())
}

/// Puts the files of `manifest` from `from` into `to`, then the manifest, then deletes the
/// SST files of `to` it does not name.
fn sync_files(
    from: &Path,
    manifest: &Manifest,
    to: &Path,
    link: bool,
    progress: Progress<'_>,
) -> Result<CheckpointReport> {
    let total: u64 = manifest.files.iter().map(|f| f.bytes).sum();
    let mut report = CheckpointReport {
        seq: manifest.last_seq,
        ..CheckpointReport::default()
    };
    let mut done = 0u64;
    progress(0, total);
    for f in &manifest.files {
        let name = sst_file_name(f.id);
        let (src, dst) = (from.join(&name), to.join(&name));
        if same_file(&src, &dst, f)? {
            report.files_skipped += 1;
            report.bytes_skipped += f.bytes;
            done += f.bytes;
            progress(done, total);
            continue;
        }
        remove(&dst)?;
        if link && fs::hard_link(&src, &dst).is_ok() {
            report.files_linked += 1;
            report.bytes_linked += f.bytes;
            done += f.bytes;
            progress(done, total);
            continue;
        }
        let base = done;
        let copied = copy_file(&src, &dst, &mut |n| progress(base + n, total))?;
        report.files_copied += 1;
        report.bytes_copied += copied;
        done += f.bytes;
    }
    write_manifest(to, manifest)?;
    let live: BTreeSet<u64> = manifest.files.iter().map(|f| f.id).collect();
    for name in list(to)? {
        let stale = match parse_sst_file_name(&name) {
            Some(id) => !live.contains(&id),
            None => name.ends_with(".tmp"),
        };
        if stale {
            remove(&to.join(&name))?;
            report.files_removed += 1;
        }
    }
    sync_dir(to)?;
    Ok(report)
}

/// Whether `dst` is already the SST file `src`: same size as the manifest records, and the
/// same footer (which holds a checksum).
fn same_file(src: &Path, dst: &Path, f: &FileMeta) -> Result<bool> {
    match fs::metadata(dst) {
        Ok(m) if m.len() == f.bytes && f.bytes >= FOOTER_BYTES => {
            Ok(footer(src, f.bytes)? == footer(dst, f.bytes)?)
        }
        Ok(_) => Ok(false),
        Err(e) if e.kind() == IoKind::NotFound => Ok(false),
        Err(e) => Err(Error::io(format!("reading {}", dst.display()), e)),
    }
}

fn footer(path: &Path, len: u64) -> Result<[u8; FOOTER_BYTES as usize]> {
    use std::os::unix::fs::FileExt;
    let ctx = || format!("reading the footer of {}", path.display());
    let file = File::open(path).map_err(|e| Error::io(ctx(), e))?;
    let mut buf = [0u8; FOOTER_BYTES as usize];
    file.read_exact_at(&mut buf, len - FOOTER_BYTES)
        .map_err(|e| Error::io(ctx(), e))?;
    Ok(buf)
}

/// Copies `src` to `dst` through a temporary file that is fsynced and renamed; `progress`
/// gets the bytes copied so far. Returns the bytes copied.
fn copy_file(src: &Path, dst: &Path, progress: &mut dyn FnMut(u64)) -> Result<u64> {
    let tmp = dst.with_extension("sst.tmp");
    let mut input =
        File::open(src).map_err(|e| Error::io(format!("opening {}", src.display()), e))?;
    let wctx = || format!("writing {}", tmp.display());
    let mut out = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| Error::io(wctx(), e))?;
    let mut buf = vec![0u8; COPY_CHUNK_BYTES];
    let mut copied = 0u64;
    loop {
        let n = input
            .read(&mut buf)
            .map_err(|e| Error::io(format!("reading {}", src.display()), e))?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n]).map_err(|e| Error::io(wctx(), e))?;
        copied += n as u64;
        progress(copied);
    }
    out.sync_all().map_err(|e| Error::io(wctx(), e))?;
    drop(out);
    fs::rename(&tmp, dst).map_err(|e| Error::io(format!("renaming {}", tmp.display()), e))?;
    Ok(copied)
}

/// Writes `manifest` into `dir` the way the engine does: temporary file, fsync, rename,
/// fsync of the directory.
fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<()> {
    let tmp = dir.join(format!("{MANIFEST_NAME}.tmp"));
    let ctx = || format!("writing {}", tmp.display());
    let mut out = File::create(&tmp).map_err(|e| Error::io(ctx(), e))?;
    out.write_all(&manifest.encode())
        .and_then(|()| out.sync_all())
        .map_err(|e| Error::io(ctx(), e))?;
    drop(out);
    fs::rename(&tmp, dir.join(MANIFEST_NAME))
        .map_err(|e| Error::io(format!("renaming {}", tmp.display()), e))?;
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("syncing directory {}", dir.display()), e))
}

fn list(dir: &Path) -> Result<Vec<String>> {
    let ctx = || format!("listing {}", dir.display());
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| Error::io(ctx(), e))? {
        let entry = entry.map_err(|e| Error::io(ctx(), e))?;
        if let Some(name) = entry.file_name().to_str() {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}

fn remove(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == IoKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(format!("deleting {}", path.display()), e)),
    }
}

#[cfg(test)]
mod tests;
