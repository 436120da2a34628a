//! Finding the data rows of a read: per metric, either one batched get per wanted series (few
//! of the metric's series wanted) or a range scan of each salt bucket over the time range with
//! a row filter that keeps only the wanted series (many wanted). Both go through one engine
//! snapshot.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;
use roaring::RoaringBitmap;
use rustc_hash::{FxHashMap, FxHashSet};
use strata_engine::{Row, ScanOptions};

use crate::error::Result;
use crate::rowkey::{ROW_SPAN_SECS, ROWKEY_HEAD_LEN, RowKey, Tsuid, encode_rowkey, scan_range};
use crate::series_index::SeriesIndex;
use crate::trees::DataView;
use crate::uid::Uid;

/// Milliseconds one row covers.
pub(crate) const ROW_SPAN_MS: i64 = ROW_SPAN_SECS as i64 * 1000;

/// How a read fetches rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Let the planner choose.
    Auto,
    /// One get per series and hour.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "tests force it to compare the plans")
    )]
    Gets,
    /// One range scan per salt bucket.
    Scans,
}

/// What one stored row of an hour takes, about: 360 points at 10 s and 1.5 bytes a point, with
/// its key. Only used to tell large reads from small ones.
const EST_ROW_BYTES: u64 = 600;

/// The wanted series of one metric as `(id, tsuid, salt)`, and the metric's series count.
type MetricSeries = (Vec<(u32, Tsuid, u8)>, u64);

/// One row found by a read, with the series it belongs to.
pub(crate) struct FoundRow {
    pub(crate) id: u32,
    pub(crate) base_time: u32,
    pub(crate) row: Row,
}

/// What finding rows needs of a database besides its data ([`DataView`]): its index and its
/// block cache size.
#[derive(Debug)]
pub(crate) struct Fetcher<'a> {
    pub(crate) index: &'a RwLock<SeriesIndex>,
    pub(crate) buckets: u8,
    pub(crate) block_cache_bytes: u64,
}

impl Fetcher<'_> {
    /// The data rows of `ids` whose hour meets `[start_ms, end_ms]`.
    pub(crate) fn fetch_rows(
        &self,
        view: &DataView,
        ids: &RoaringBitmap,
        start_ms: i64,
        end_ms: i64,
        (plan, request_series_hours): (Plan, u64),
    ) -> Result<Vec<FoundRow>> {
        if end_ms < start_ms || end_ms < 0 {
            return Ok(Vec::new());
        }
        let first = hour_of(start_ms.max(0));
        let last = hour_of(end_ms);
        let hours = u64::from((last - first) / ROW_SPAN_SECS) + 1;
        // A read (or request) of more than a quarter of the block cache would push out most of
        // what other reads use, and would not stay in it anyway: its blocks are not added.
        let series_hours = ids.len().saturating_mul(hours).max(request_series_hours);
        let skip_cache_fill =
            series_hours.saturating_mul(EST_ROW_BYTES) > self.block_cache_bytes / 4;
        // Group the wanted series by metric, and remember each metric's series count.
        let mut by_metric: BTreeMap<Uid, MetricSeries> = BTreeMap::new();
        {
            let index = self.index.read();
            for id in ids {
                let Some(s) = index.series.get(id as usize) else {
                    continue;
                };
                let m = s.tsuid.metric();
                let e = by_metric.entry(m).or_insert_with(|| {
                    (Vec::new(), index.by_metric.get(&m).map_or(0, |b| b.len()))
                });
                e.0.push((id, s.tsuid.clone(), s.salt));
            }
        }
        let mut found = Vec::new();
        for (metric, (series, total)) in by_metric {
            let wanted = series.len() as u64;
            // Gets cost one lookup per series-hour; scans read every series of the metric in the
            // range. Prefer gets when few of the metric's series are wanted and the get count
            // stays bounded.
            let use_gets = match plan {
                Plan::Gets => true,
                Plan::Scans => false,
                Plan::Auto => wanted * 4 <= total && wanted * hours <= 100_000,
            };
            if use_gets {
                let mut keys = Vec::new();
                let mut bases = Vec::new();
                for (id, tsuid, salt) in &series {
                    let Some((snap, data)) = view.of_salt(*salt) else {
                        continue;
                    };
                    // A series' hours ascend in its salt bucket: one batched get reads them
                    // in order, several to a block.
                    keys.clear();
                    bases.clear();
                    let mut base = first;
                    loop {
                        keys.push(encode_rowkey(*salt, tsuid, base));
                        bases.push(base);
                        match base.checked_add(ROW_SPAN_SECS) {
                            Some(b) if b <= last => base = b,
                            _ => break,
                        }
                    }
                    snap.get_rows_with(data, &keys, skip_cache_fill, |i, row| {
                        if let Some(&base_time) = bases.get(i) {
                            found.push(FoundRow {
                                id: *id,
                                base_time,
                                row,
                            });
                        }
                    })?;
                }
            } else {
                // The metric's series per salt bucket, wanted and all (the same when all are
                // wanted). A scan reads every row of the metric in its buckets anyway, so
                // counting them costs no more.
                let buckets = usize::from(self.buckets);
                let mut wanted_per_salt = vec![0u32; buckets];
                for (_, _, salt) in &series {
                    if let Some(n) = wanted_per_salt.get_mut(usize::from(*salt)) {
                        *n += 1;
                    }
                }
                let per_salt = if wanted == total {
                    wanted_per_salt.clone()
                } else {
                    let mut per_salt = vec![0u32; buckets];
                    let index = self.index.read();
                    for other in index.by_metric.get(&metric).into_iter().flatten() {
                        if let Some(o) = index.series.get(other as usize)
                            && let Some(n) = per_salt.get_mut(usize::from(o.salt))
                        {
                            *n += 1;
                        }
                    }
                    per_salt
                };
                let wanted_tags: FxHashSet<Box<[u8]>> = series
                    .iter()
                    .map(|(_, t, _)| t.tag_bytes().into())
                    .collect();
                let id_of: FxHashMap<&Tsuid, u32> =
                    series.iter().map(|(id, t, _)| (t, *id)).collect();
                let wanted_tags = Arc::new(wanted_tags);
                // Only the buckets that hold a wanted series are scanned, and a bucket whose
                // series are all wanted needs no row filter.
                for salt in 0..self.buckets {
                    let want = wanted_per_salt.get(usize::from(salt)).copied().unwrap_or(0);
                    if want == 0 {
                        continue;
                    }
                    let Some((snap, data)) = view.of_salt(salt) else {
                        continue;
                    };
                    let (start, stop) = scan_range(salt, metric, first, last);
                    let mut opts = ScanOptions::range(&start, &stop);
                    opts.skip_cache_fill = skip_cache_fill;
                    if per_salt.get(usize::from(salt)).is_none_or(|&n| want < n) {
                        let w = wanted_tags.clone();
                        opts.row_filter = Some(Arc::new(move |k: &[u8]| {
                            k.len() > ROWKEY_HEAD_LEN && w.contains(&k[ROWKEY_HEAD_LEN..])
                        }));
                    }
                    for row in snap.scan(data, &opts)? {
                        let row = row?;
                        let rk = RowKey::decode(&row.key)?;
                        let Some(&id) = id_of.get(&rk.tsuid) else {
                            tracing::warn!(tsuid = %rk.tsuid.to_hex(), "data row of an unindexed series");
                            continue;
                        };
                        found.push(FoundRow {
                            id,
                            base_time: rk.base_time,
                            row,
                        });
                    }
                }
            }
        }
        Ok(found)
    }
}

fn hour_of(ts_ms: i64) -> u32 {
    let s = (ts_ms / 1000).clamp(0, i64::from(u32::MAX)) as u32;
    s - s % ROW_SPAN_SECS
}
