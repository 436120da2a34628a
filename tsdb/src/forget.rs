//! Deleting whole series (`strata delete`): their points, their place in the series index, and
//! the UIDs no live series uses any more, so they leave queries, lookups and suggest alike.
//! A deleted series keeps its `i` row with a `gone` cell (`meta.rs` rule 5).

use roaring::RoaringBitmap;
use strata_engine::WriteBatch;

use crate::error::{Error, Result};
use crate::meta;
use crate::tsdb::Tsdb;
use crate::uid::Uid;
use crate::uid_kind::UidKind;
use crate::validate::MAX_MS_TIMESTAMP;

/// What [`Tsdb::purge_series`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurgeReport {
    /// Points deleted.
    pub points: u64,
    /// Series taken out of the index.
    pub series: u64,
    /// UIDs deleted because no live series uses them any more, as `(kind, name)`.
    pub uids: Vec<(UidKind, String)>,
}

impl Tsdb {
    /// Deletes every point of series `ids`, takes them out of the series index, then deletes
    /// the metric, tag key and tag value UIDs of theirs that no live series uses any more.
    /// Meant for an offline database: a write of one of these series that lands between the
    /// steps recreates it.
    pub fn purge_series(&self, ids: &RoaringBitmap) -> Result<PurgeReport> {
        let mut report = PurgeReport {
            points: self.delete(ids, 0, MAX_MS_TIMESTAMP)?,
            ..PurgeReport::default()
        };
        let mut used: Vec<(UidKind, Uid)> = Vec::new();
        {
            let index = self.index().read();
            for id in ids {
                if let Some(s) = index.series.get(id as usize) {
                    used.push((UidKind::Metric, s.tsuid.metric()));
                    for (k, v) in s.tsuid.tags() {
                        used.push((UidKind::Tagk, k));
                        used.push((UidKind::Tagv, v));
                    }
                }
            }
        }
        used.sort_unstable();
        used.dedup();
        report.series = self.forget_series(ids)?;
        if self.uids().is_shared() {
            // Other writers share these names (partitioned ingest): they stay.
            return Ok(report);
        }
        for (kind, uid) in used {
            if self.index().read().uses(kind, uid) > 0 {
                continue;
            }
            let Ok(name) = self.uid_name(kind, uid) else {
                continue;
            };
            self.delete_uid(kind, &name)?;
            report.uids.push((kind, name));
        }
        Ok(report)
    }

    /// Takes series `ids` out of the series index (their points stay; see
    /// [`Tsdb::purge_series`]). Returns how many were live.
    pub fn forget_series(&self, ids: &RoaringBitmap) -> Result<u64> {
        let store = self.store();
        let _writers = store.writes.lock();
        store.db.settle()?;
        let mut batch = WriteBatch::new();
        let mut live = Vec::new();
        {
            let index = self.index().read();
            for id in ids {
                if !index.is_live(id) {
                    continue;
                }
                let tsuid = &index.series[id as usize].tsuid;
                let id_bytes = id.to_be_bytes();
                batch.put(
                    &store.meta,
                    &meta::key(meta::SERIES_BY_ID_PREFIX, &id_bytes),
                    meta::SERIES_GONE_COLUMN,
                    b"",
                );
                batch.delete_row(
                    &store.meta,
                    &meta::key(meta::SERIES_BY_TSUID_PREFIX, tsuid.as_bytes()),
                );
                batch.delete_row(&store.meta, &meta::key(meta::LAST_PREFIX, &id_bytes));
                live.push(id);
            }
        }
        store.db.write(&batch)?;
        let mut index = self.index().write();
        for &id in &live {
            index.forget(id);
        }
        drop(index);
        self.forget_cached_series();
        Ok(live.len() as u64)
    }

    /// Deletes the UID of `name` both ways (`strata uid delete`), refused while a live series
    /// uses it. The UID is not handed out again.
    pub fn delete_uid(&self, kind: UidKind, name: &str) -> Result<Uid> {
        let store = self.store();
        let _writers = store.writes.lock();
        let uid = self.uid(kind, name)?;
        let users = self.index().read().uses(kind, uid);
        if users > 0 {
            return Err(Error::InvalidArgument(format!(
                "{} {name} is used by {users} series; delete them first",
                kind.as_str()
            )));
        }
        self.uids().delete(kind, name)?;
        self.forget_cached_series();
        Ok(uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::{Filter, FilterKind};
    use crate::point::PointRef;
    use crate::tsdb::TsdbOptions;

    fn write(db: &Tsdb, metric: &str, host: &str, ts: i64) -> Result<()> {
        let tags = [("host", host)];
        let p = PointRef {
            metric,
            tags: &tags,
            timestamp: ts,
            value: crate::value::Value::Int(1),
        };
        db.write(&[p]).into_iter().collect()
    }

    #[test]
    fn a_purged_series_leaves_index_lookup_and_suggest_and_survives_reopen() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        {
            let db = Tsdb::open(dir.path(), TsdbOptions::default())?;
            write(&db, "m", "a", 1_000)?;
            write(&db, "m", "b", 1_000)?;
            write(&db, "other", "a", 1_000)?;
            let b = db.find_series(
                "m",
                &[Filter::new(FilterKind::LiteralOr, "host", "b", true)?],
            )?;
            assert_eq!(db.series_count(), 3);
            let report = db.purge_series(&b)?;
            assert_eq!(report.points, 1);
            assert_eq!(report.series, 1);
            assert_eq!(db.series_count(), 2, "a deleted series is not counted");
            assert_eq!(report.uids, vec![(UidKind::Tagv, "b".to_string())]);
            assert!(db.suggest(UidKind::Tagv, "", 10) == ["a"]);
            assert_eq!(db.find_series("m", &[])?.len(), 1);
            // The same series written again is a new one.
            write(&db, "m", "b", 2_000)?;
            assert_eq!(db.find_series("m", &[])?.len(), 2);
            let all = db.find_series("m", &[])?;
            db.purge_series(&all)?;
            assert!(db.suggest(UidKind::Metric, "", 10) == ["other"]);
            db.sync()?;
        }
        let db = Tsdb::open(dir.path(), TsdbOptions::default())?;
        assert_eq!(db.series_count(), 1, "only `other` is left");
        assert!(db.find_series("m", &[]).is_err(), "the metric is gone");
        assert_eq!(db.metric_names()?, ["other"]);
        assert_eq!(db.find_series("other", &[])?.len(), 1);
        let report = crate::fsck::fsck(&db.store().db)?;
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        Ok(())
    }

    #[test]
    fn a_used_uid_is_not_deleted() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let db = Tsdb::open(dir.path(), TsdbOptions::default())?;
        write(&db, "m", "a", 1_000)?;
        assert!(matches!(
            db.delete_uid(UidKind::Metric, "m"),
            Err(Error::InvalidArgument(_))
        ));
        db.assign_uid(UidKind::Metric, "unused")?;
        db.delete_uid(UidKind::Metric, "unused")?;
        assert!(db.uid(UidKind::Metric, "unused").is_err());
        Ok(())
    }
}
