//! `strata backup` and `strata restore`: the offline forms of `POST /api/admin/backup`, and
//! the way back from a backup to a data directory.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail, ensure};
use strata_engine::DbOptions;
use strata_server::{Config, LOCK_FILE, StorageArgs};

use super::dir_lock::DirLock;
use super::fsck::Check;
use super::progress::Bar;

/// `strata backup` flags.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct BackupArgs {
    #[command(flatten)]
    pub(crate) storage: StorageArgs,
    /// The backup directory, created if missing. A later backup into it copies only the files
    /// it lacks and removes those the database no longer has.
    #[arg(long)]
    pub(crate) to: PathBuf,
}

/// `strata restore` flags.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RestoreArgs {
    /// The backup directory to restore.
    #[arg(long)]
    pub(crate) from: PathBuf,
    #[command(flatten)]
    pub(crate) storage: StorageArgs,
    /// Restore into a data directory that is not empty, replacing its database.
    #[arg(long)]
    pub(crate) force: bool,
}

/// Runs `strata backup`.
pub(crate) fn run_backup(args: &BackupArgs) -> anyhow::Result<()> {
    let config = Config::resolve_storage(&args.storage)?;
    let dir = &config.data_dir;
    ensure!(dir.is_dir(), "no data directory at {}", dir.display());
    let to = std::path::absolute(&args.to)
        .with_context(|| format!("resolving {}", args.to.display()))?;
    let hint = format!(
        "back it up through the server instead: curl -X POST \
         http://<host>:<port>/api/admin/backup -d '{{\"to\": \"{}\"}}'",
        to.display()
    );
    let _lock = DirLock::acquire_or(dir, &hint)?;
    let tsdb = super::open::open_tsdb(&config)?;
    let bar = Bar::bytes("backup");
    let report =
        strata_server::backup(&tsdb, dir, &to, &mut |done, total| bar.update(done, total))?;
    bar.finish();
    tsdb.sync()?;
    println!("backed up {} to {}: {report}", dir.display(), to.display());
    Ok(())
}

/// Runs `strata restore`: checks the backup, copies it into the data directory, then checks
/// the result as `strata fsck` does.
pub(crate) fn run_restore(args: &RestoreArgs) -> anyhow::Result<()> {
    let config = Config::resolve_storage(&args.storage)?;
    let dir = &config.data_dir;
    let from = &args.from;
    ensure!(from.is_dir(), "no backup at {}", from.display());
    let before = strata_engine::verify(from)
        .with_context(|| format!("checking the backup in {}", from.display()))?;
    if before.errors() > 0 {
        bail!(
            "the backup in {} is damaged ({} problems); nothing was restored",
            from.display(),
            before.errors()
        );
    }
    let _lock = DirLock::acquire(dir)?;
    let held = entries(dir)?;
    if !held.is_empty() && !args.force {
        bail!(
            "{} is not empty (it holds {}); restore into an empty directory, or pass --force to \
             replace the database in it",
            dir.display(),
            held.join(", ")
        );
    }
    let bar = Bar::bytes("restore");
    let report = strata_server::restore(from, dir, &mut |done, total| bar.update(done, total))?;
    bar.finish();
    let after = Check::run(dir, &DbOptions::default())
        .with_context(|| format!("checking the restored database in {}", dir.display()))?;
    if after.problems() > 0 {
        bail!(
            "the restored database in {} has {} problems; run `strata fsck --data-dir {}`",
            dir.display(),
            after.problems(),
            dir.display()
        );
    }
    println!(
        "restored {} into {}: {report}",
        from.display(),
        dir.display()
    );
    Ok(())
}

/// The names in `dir` other than the lock file, sorted.
fn entries(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let name = entry
            .with_context(|| format!("listing {}", dir.display()))?
            .file_name()
            .to_string_lossy()
            .into_owned();
        if name != LOCK_FILE {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}
