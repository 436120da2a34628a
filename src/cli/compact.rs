//! `strata compact`: offline row compaction, memtable flush and full engine compaction, the
//! same work as `POST /api/admin/compact`.

use strata_server::compact_all;
use strata_server::{Config, StorageArgs};

/// `strata compact` flags.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct CompactArgs {
    #[command(flatten)]
    pub(crate) storage: StorageArgs,
}

/// Runs `strata compact`.
pub(crate) fn run(args: &CompactArgs) -> anyhow::Result<()> {
    let config = Config::resolve_storage(&args.storage)?;
    let (_lock, tsdb) = super::open::open_existing(&config)?;
    let spinner = super::progress::Bar::spinner("compacting");
    let report = compact_all(&tsdb)?;
    spinner.finish();
    tsdb.sync()?;
    println!("compacted {}: {report}", config.data_dir.display());
    Ok(())
}
