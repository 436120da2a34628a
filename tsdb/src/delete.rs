//! Explicit deletes of a time range of some series.

use roaring::RoaringBitmap;
use strata_engine::WriteBatch;

use crate::block::encode_block;
use crate::cell::decode_row;
use crate::error::{Error, Result};
use crate::fetch::Plan;
use crate::meta;
use crate::read::ReadRequest;
use crate::rowkey::ROW_SPAN_SECS;
use crate::tsdb::Tsdb;

impl Tsdb {
    /// Deletes the points of `ids` in `[start_ms, end_ms]` in one atomic batch. Returns the
    /// number of points deleted. Rows entirely inside the range are deleted whole.
    pub fn delete(&self, ids: &RoaringBitmap, start_ms: i64, end_ms: i64) -> Result<u64> {
        if end_ms < start_ms {
            return Err(Error::InvalidArgument(format!(
                "delete range end {end_ms} is before start {start_ms}"
            )));
        }
        let store = self.store();
        let mut guard = store.writes.lock();
        // Queued writes first: the delete must see every point written before it.
        store.db.settle()?;
        let view = store.data_view();
        let rows = self
            .fetcher()
            .fetch_rows(&view, ids, start_ms, end_ms, (Plan::Auto, 0))?;
        let mut batch = WriteBatch::new();
        let mut deleted = 0u64;
        for r in &rows {
            let row_start = i64::from(r.base_time) * 1000;
            let row_end = row_start + i64::from(ROW_SPAN_SECS) * 1000 - 1;
            if start_ms <= row_start && row_end <= end_ms {
                // A whole-row delete does not need the points, so it also clears a corrupt row.
                deleted += match decode_row(r.base_time, &r.row.cells) {
                    Ok(points) => points.len() as u64,
                    Err(e) => {
                        tracing::warn!(error = %e, "deleting an undecodable data row");
                        r.row.cells.len() as u64
                    }
                };
                batch.delete_row(&store.data, &r.row.key);
                batch.delete_row(&store.meta, &meta::key(meta::DIRTY_PREFIX, &r.row.key));
                continue;
            }
            // Part of a row: it is rewritten whole, as the row compactor does, behind a row
            // tombstone that hides every cell read here. Deleting cells one by one would miss
            // the points a flush folds into a partial block meanwhile (`fold.rs`); the
            // tombstone's sequence number is above any such block's. Writers wait for the
            // write lock held here, so nothing else lands in the row before the batch.
            let mut kept = decode_row(r.base_time, &r.row.cells)?;
            let in_range = |ts: i64| ts >= start_ms && ts <= end_ms;
            let before = kept.len();
            kept.retain(|p| !in_range(p.0));
            if kept.len() == before {
                continue;
            }
            deleted += (before - kept.len()) as u64;
            batch.delete_row(&store.data, &r.row.key);
            if !kept.is_empty() {
                let mut bytes = Vec::new();
                encode_block(&kept, &mut bytes)?;
                batch.put(&store.data, &r.row.key, b"", &bytes);
            }
        }
        // Series whose last point was deleted fall back to their latest earlier point.
        let affected: Vec<u32> = {
            let index = self.index().read();
            ids.iter()
                .filter(|id| {
                    index
                        .series
                        .get(*id as usize)
                        .and_then(|s| s.last)
                        .is_some_and(|(ts, _)| ts >= start_ms && ts <= end_ms)
                })
                .collect()
        };
        let mut new_lasts = Vec::with_capacity(affected.len());
        if !affected.is_empty() {
            let bm: RoaringBitmap = affected.iter().copied().collect();
            let before = if start_ms > 0 {
                self.read_planned(&ReadRequest::ids(&bm, 0, start_ms - 1), Plan::Scans)?
            } else {
                Vec::new()
            };
            for id in &affected {
                let last = before
                    .iter()
                    .find(|s| s.id == *id)
                    .and_then(|s| s.points.last().copied());
                let key = meta::key(meta::LAST_PREFIX, &id.to_be_bytes());
                match last {
                    Some((ts, v)) => batch.put(
                        &store.meta,
                        &key,
                        meta::LAST_COLUMN,
                        &meta::encode_last(ts, v),
                    ),
                    None => batch.delete_row(&store.meta, &key),
                }
                new_lasts.push((*id, last));
            }
        }
        // The batch removes the dirty markers of the rows it touches; the write path must not
        // assume its cached markers are still there.
        guard.markers_deleted();
        store.db.write(&batch)?;
        self.forget_cached_series();
        let mut index = self.index().write();
        for (id, last) in new_lasts {
            if let Some(s) = index.series.get_mut(id as usize) {
                s.last = last;
            }
        }
        Ok(deleted)
    }
}
