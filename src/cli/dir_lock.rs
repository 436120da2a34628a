//! An exclusive, process-wide lock on a data directory.
//!
//! The engine only keeps two `Db`s of one process off the same directory (and waits up to 30 s
//! for the first to close). Two processes, say `strata serve` and `strata import`, would both
//! replay and append to the same WAL. So every command that opens a data directory first takes
//! an advisory lock (`flock`) on `<data_dir>/strata.lock` and fails at once when another
//! process holds it. The operating system releases it when the process exits, even on
//! `kill -9`, so a stale lock file is harmless.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

use anyhow::{Context, bail};

/// The lock file's name inside the data directory. The engine ignores files it does not know.
pub(crate) const LOCK_FILE: &str = "strata.lock";

/// Holds the lock until dropped.
#[derive(Debug)]
pub(crate) struct DirLock {
    _file: File,
}

impl DirLock {
    /// Creates `dir` if needed and locks it, or fails at once if another process holds it.
    pub(crate) fn acquire(dir: &Path) -> anyhow::Result<DirLock> {
        DirLock::acquire_or(
            dir,
            "stop that process first, or send the data to the server over the network",
        )
    }

    /// [`DirLock::acquire`], with `hint` saying what to do instead when another process holds
    /// the lock.
    pub(crate) fn acquire_or(dir: &Path, hint: &str) -> anyhow::Result<DirLock> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the data directory {}", dir.display()))?;
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening the lock file {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(DirLock { _file: file }),
            Err(TryLockError::WouldBlock) => bail!(
                "the data directory {} is in use by another process (is `strata serve` \
                 running on it?); {hint}",
                dir.display()
            ),
            Err(TryLockError::Error(e)) => {
                Err(e).with_context(|| format!("locking {}", path.display()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_fails_fast_and_the_first_release_frees_it() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let first = DirLock::acquire(dir.path())?;
        assert!(dir.path().join(LOCK_FILE).exists());
        // `try_lock` never waits: were it to wait, this would hang here, as the lock is only
        // released below.
        let err = DirLock::acquire(dir.path())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("in use by another process"), "{err}");
        drop(first);
        DirLock::acquire(dir.path())?;
        Ok(())
    }
}
