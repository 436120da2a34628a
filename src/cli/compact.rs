//! `strata compact`: offline row compaction, memtable flush and full engine compaction, the
//! same work as `POST /api/admin/compact`.

use std::time::Instant;

use crate::config::{Config, StorageArgs};

/// `strata compact` flags.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct CompactArgs {
    #[command(flatten)]
    pub(crate) storage: StorageArgs,
}

/// What a compaction did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CompactReport {
    /// The row compactor's totals.
    pub(crate) rows: strata_tsdb::RowCompactStats,
    /// Wall time of the whole run, in milliseconds.
    pub(crate) duration_ms: u64,
}

impl std::fmt::Display for CompactReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = &self.rows;
        write!(
            f,
            "rows examined {}, rows compacted {}, rows failed {}, cells folded {}, block points \
             {}, {} ms",
            r.rows_examined,
            r.rows_compacted,
            r.rows_failed,
            r.cells_folded,
            r.block_points,
            self.duration_ms
        )
    }
}

/// Row-compacts every closed dirty row, flushes the memtables and compacts the LSM fully.
pub(crate) fn compact_all(tsdb: &strata_tsdb::Tsdb) -> strata_tsdb::Result<CompactReport> {
    let started = Instant::now();
    let rows = tsdb.rowcompact_all()?;
    tsdb.flush()?;
    tsdb.engine().compact_all()?;
    Ok(CompactReport {
        rows,
        duration_ms: started.elapsed().as_millis() as u64,
    })
}

/// Runs `strata compact`.
pub(crate) fn run(args: &CompactArgs) -> anyhow::Result<()> {
    let config = Config::resolve_storage(&args.storage)?;
    let (_lock, tsdb) = super::open_existing(&config)?;
    let report = compact_all(&tsdb)?;
    tsdb.sync()?;
    println!("compacted {}: {report}", config.data_dir.display());
    Ok(())
}
