//! Backups and restores: what `POST /api/admin/backup`, `strata backup` and `strata restore`
//! run. The engine's checkpoint copies the database (`strata_engine::Db::checkpoint`); this
//! adds the checks on the target and the data directory's other small files.

use std::path::Path;
use std::time::Instant;

use strata_engine::{CheckpointReport, Progress};

/// The lock file of a data directory (`strata serve` and the offline commands hold it). It is
/// never copied: a backup is not a running database.
pub const LOCK_FILE: &str = "strata.lock";

/// What a backup or a restore did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackupReport {
    /// The engine's part: SST files linked, copied, skipped and removed, and the sequence
    /// number the copy holds up to.
    pub engine: CheckpointReport,
    /// Other files of the data directory copied beside the engine's (settings kept there).
    pub extra_files: u64,
    /// Wall time of the whole run, in milliseconds.
    pub duration_ms: u64,
}

impl BackupReport {
    /// The summary `POST /api/admin/backup` answers with.
    pub fn to_json(&self) -> serde_json::Value {
        let e = &self.engine;
        serde_json::json!({
            "sequence": e.seq,
            "filesLinked": e.files_linked,
            "filesCopied": e.files_copied,
            "filesSkipped": e.files_skipped,
            "filesRemoved": e.files_removed,
            "bytesLinked": e.bytes_linked,
            "bytesCopied": e.bytes_copied,
            "bytesSkipped": e.bytes_skipped,
            "bytes": e.total_bytes(),
            "extraFiles": self.extra_files,
            "durationMs": self.duration_ms,
        })
    }
}

impl std::fmt::Display for BackupReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let e = &self.engine;
        write!(
            f,
            "sequence {}, {} files linked, {} copied, {} already there, {} removed; {} bytes \
             ({} copied); {} other files; {} ms",
            e.seq,
            e.files_linked,
            e.files_copied,
            e.files_skipped,
            e.files_removed,
            e.total_bytes(),
            e.bytes_copied,
            self.extra_files,
            self.duration_ms
        )
    }
}

/// Why a backup or restore failed: the caller's target, or the storage.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The target is unusable: relative, not writable, the data directory itself, a live
    /// database. HTTP 400.
    #[error("{0}")]
    Target(String),
    /// Copying failed. HTTP 500.
    #[error(transparent)]
    Storage(#[from] strata_tsdb::Error),
    /// Copying the data directory's other files failed. HTTP 500.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, and to which file.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Checks that `to` is an absolute path to a directory this process can write, creating it
/// if needed.
pub fn check_target(to: &Path) -> Result<(), BackupError> {
    if !to.is_absolute() {
        return Err(BackupError::Target(format!(
            "the backup target must be an absolute path, not {}",
            to.display()
        )));
    }
    let probe = to.join(".strata-backup-probe");
    std::fs::create_dir_all(to)
        .and_then(|()| std::fs::write(&probe, b""))
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| BackupError::Target(format!("cannot write to {}: {e}", to.display())))
}

/// Backs the open database up into `to` (see `Db::checkpoint`), with the data directory's
/// other files. `data_dir` is the directory `tsdb` was opened in.
pub fn backup(
    tsdb: &strata_tsdb::Tsdb,
    data_dir: &Path,
    to: &Path,
    progress: Progress<'_>,
) -> Result<BackupReport, BackupError> {
    let started = Instant::now();
    check_target(to)?;
    let engine = tsdb.checkpoint(to, progress).map_err(|e| match e.kind() {
        strata_tsdb::ErrorKind::Client => BackupError::Target(e.to_string()),
        _ => BackupError::Storage(e),
    })?;
    let extra_files = copy_extra_files(data_dir, to)?;
    Ok(BackupReport {
        engine,
        extra_files,
        duration_ms: started.elapsed().as_millis() as u64,
    })
}

/// Restores the backup in `from` into the data directory `to`, which the caller has locked
/// and checked to hold no database it wants kept.
pub fn restore(
    from: &Path,
    to: &Path,
    progress: Progress<'_>,
) -> Result<BackupReport, BackupError> {
    let started = Instant::now();
    if !from.join("MANIFEST").is_file() {
        return Err(BackupError::Target(format!(
            "{} is not a backup: it has no MANIFEST",
            from.display()
        )));
    }
    let engine = strata_engine::restore_checkpoint(from, to, progress)
        .map_err(|e| BackupError::Storage(e.into()))?;
    let extra_files = copy_extra_files(from, to)?;
    Ok(BackupReport {
        engine,
        extra_files,
        duration_ms: started.elapsed().as_millis() as u64,
    })
}

/// Whether the engine owns the file `name` of a data directory: the manifest, SST files,
/// WAL segments and their temporary files.
fn engine_file(name: &str) -> bool {
    name == "MANIFEST"
        || name.ends_with(".tmp")
        || name.ends_with(".sst")
        || (name.starts_with("wal-") && name.ends_with(".log"))
}

/// Copies the regular files at the top of `from` that neither the engine nor the lock owns.
fn copy_extra_files(from: &Path, to: &Path) -> Result<u64, BackupError> {
    let io = |what: &str, path: &Path, source: std::io::Error| BackupError::Io {
        context: format!("{what} {}", path.display()),
        source,
    };
    let mut copied = 0;
    for entry in std::fs::read_dir(from).map_err(|e| io("listing", from, e))? {
        let entry = entry.map_err(|e| io("listing", from, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if !is_file || name == LOCK_FILE || name.starts_with('.') || engine_file(name) {
            continue;
        }
        std::fs::copy(entry.path(), to.join(name)).map_err(|e| io("copying", &entry.path(), e))?;
        copied += 1;
    }
    Ok(copied)
}
