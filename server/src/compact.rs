//! Full compaction: what `strata compact` and `POST /api/admin/compact` run.

use std::time::Instant;

/// What a compaction did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// The row compactor's totals.
    pub rows: strata_tsdb::RowCompactStats,
    /// Wall time of the whole run, in milliseconds.
    pub duration_ms: u64,
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
pub fn compact_all(tsdb: &strata_tsdb::Tsdb) -> strata_tsdb::Result<CompactReport> {
    let started = Instant::now();
    let rows = tsdb.rowcompact_all()?;
    tsdb.flush()?;
    tsdb.compact_all()?;
    Ok(CompactReport {
        rows,
        duration_ms: started.elapsed().as_millis() as u64,
    })
}
