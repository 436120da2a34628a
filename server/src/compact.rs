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
    compact_all_with_progress(tsdb, &mut |_| {}, &mut |_, _| {})
}

/// [`compact_all`], telling `rows` the row compactor's running totals and `bytes` how far the
/// LSM compaction got, `(bytes done, bytes in all)`.
pub fn compact_all_with_progress(
    tsdb: &strata_tsdb::Tsdb,
    rows: &mut dyn FnMut(&strata_tsdb::RowCompactStats),
    bytes: &mut dyn FnMut(u64, u64),
) -> strata_tsdb::Result<CompactReport> {
    let started = Instant::now();
    let rows = tsdb.rowcompact_all_with_progress(rows)?;
    tsdb.flush()?;
    tsdb.compact_all_with_progress(bytes)?;
    Ok(CompactReport {
        rows,
        duration_ms: started.elapsed().as_millis() as u64,
    })
}
