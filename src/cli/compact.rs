//! `strata compact`: offline row compaction, memtable flush and full engine compaction, the
//! same work as `POST /api/admin/compact`.

use strata_server::compact_all_with_progress;
use strata_server::{Config, StorageArgs};

use super::progress::Bar;

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
    // Row compaction walks the dirty-row markers, whose number is not known up front: a
    // spinner with the rows so far. The LSM compaction knows its input bytes: a bar.
    let rows = Bar::spinner("row-compacting");
    let bytes = Bar::bytes("compacting");
    let report = compact_all_with_progress(
        &tsdb,
        &mut |s| {
            rows.set_message(&format!(
                "row-compacting: {} rows examined",
                s.rows_examined
            ))
        },
        &mut |done, total| {
            rows.finish();
            bytes.update(done, total)
        },
    )?;
    rows.finish();
    bytes.finish();
    tsdb.sync()?;
    println!("compacted {}: {report}", config.data_dir.display());
    Ok(())
}
