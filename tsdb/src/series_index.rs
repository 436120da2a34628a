//! The series index: dense u32 series ids, postings as roaring bitmaps, last points.
//!
//! Persisted in table `meta` (see `meta.rs`) and rebuilt from it on open; the in-memory state
//! after a rebuild equals the state before the restart.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap;

use roaring::{MultiOps, RoaringBitmap};
use strata_engine::{Db, ScanOptions, Table};

use crate::error::{Error, Result};
use crate::filter::{Filter, FilterKind};
use crate::meta;
use crate::rowkey::{Tsuid, salt_of};
use crate::uid::{Uid, UidKind, UidTable};
use crate::value::Value;

/// One series in the index.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SeriesEntry {
    pub(crate) tsuid: Tsuid,
    pub(crate) salt: u8,
    pub(crate) last: Option<(i64, Value)>,
    /// Whether `last` is known to be the newest point. After a restart it is the newest point
    /// as of the last time the series moved to a new row; the newest point is then in that
    /// same row, and `Tsdb::series_info` reads it from there.
    pub(crate) last_exact: bool,
}

/// Postings of one tag key.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TagPostings {
    /// Every series that has the key.
    pub(crate) all: RoaringBitmap,
    /// Series per value.
    pub(crate) by_value: BTreeMap<Uid, RoaringBitmap>,
}

/// The in-memory index.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SeriesIndex {
    pub(crate) series: Vec<SeriesEntry>,
    pub(crate) by_tsuid: FxHashMap<Tsuid, u32>,
    pub(crate) by_metric: BTreeMap<Uid, RoaringBitmap>,
    pub(crate) by_tag: BTreeMap<Uid, TagPostings>,
    /// Series whose data has all expired (`retire`): out of the postings until a new point.
    /// Not persisted; the expiry sweep finds them again after a restart.
    pub(crate) retired: RoaringBitmap,
    /// Names, per [`UidKind::index`], whose every series is retired: suggest leaves them out.
    pub(crate) retired_names: [BTreeSet<Uid>; 3],
}

/// Adds `id` to a posting list. `insert`, not roaring's `push`: `push` checks that `id` is the
/// largest yet by finding a bitmap container's largest value, which scans the container's
/// words back from its end; ids arrive in ascending order, so a dense posting list (a tag
/// key every series has) scanned about 512 empty words per series added.
fn add(postings: &mut RoaringBitmap, id: u32) {
    postings.insert(id);
}

impl SeriesIndex {
    /// Rebuilds the index from table `meta`.
    pub(crate) fn load(db: &Db, table: &Table, buckets: u8) -> Result<SeriesIndex> {
        let mut idx = SeriesIndex::default();
        let rows = db.scan(table, &ScanOptions::prefix(&[meta::SERIES_BY_ID_PREFIX]))?;
        for row in rows {
            let row = row?;
            let id = meta::decode_id_key(&row.key)?;
            if id as usize != idx.series.len() {
                return Err(Error::corruption(
                    "meta row",
                    &row.key,
                    format!("series id {id} where {} was expected", idx.series.len()),
                ));
            }
            let cell = row
                .cells
                .iter()
                .find(|c| c.column == meta::SERIES_TSUID_COLUMN)
                .ok_or_else(|| Error::corruption("meta row", &row.key, "no tsuid column"))?;
            let tsuid = Tsuid::from_bytes(&cell.value)?;
            let id = idx.insert(tsuid, buckets);
            if row
                .cells
                .iter()
                .any(|c| c.column == meta::SERIES_GONE_COLUMN)
            {
                idx.forget(id);
            }
        }
        let rows = db.scan(table, &ScanOptions::prefix(&[meta::LAST_PREFIX]))?;
        for row in rows {
            let row = row?;
            let id = meta::decode_id_key(&row.key)?;
            let Some(cell) = row.cells.iter().find(|c| c.column == meta::LAST_COLUMN) else {
                continue;
            };
            let last = meta::decode_last(&row.key, &cell.value)?;
            let entry = idx.series.get_mut(id as usize).ok_or_else(|| {
                Error::corruption("meta row", &row.key, "last point of an unknown series")
            })?;
            entry.last = Some(last);
            entry.last_exact = false;
        }
        Ok(idx)
    }

    /// Adds the live series of `other`, another tree's index, with new ids after this one's
    /// (ids are per tree). A series this index holds already keeps its entry: a bucket has
    /// one owner, so only a tree that outlived a change of owners can repeat one.
    pub(crate) fn append(&mut self, other: SeriesIndex, buckets: u8) {
        let SeriesIndex {
            series, by_tsuid, ..
        } = other;
        for (id, entry) in series.into_iter().enumerate() {
            let live = by_tsuid.get(&entry.tsuid) == Some(&(id as u32));
            if !live || self.by_tsuid.contains_key(&entry.tsuid) {
                continue;
            }
            let new = self.insert(entry.tsuid, buckets);
            if let Some(s) = self.series.get_mut(new as usize) {
                s.last = entry.last;
                s.last_exact = entry.last_exact;
            }
        }
    }

    /// Marks every newest point as a lower bound, to be read from its row again: new data
    /// rows arrived (a replica's refresh) that may hold newer points.
    pub(crate) fn forget_exact_lasts(&mut self) {
        for s in &mut self.series {
            s.last_exact = false;
        }
    }

    /// Number of series ids given out, deleted series' included.
    pub(crate) fn len(&self) -> usize {
        self.series.len()
    }

    /// Series not deleted: [`SeriesIndex::len`] also counts the ids deleted series keep.
    pub(crate) fn live_len(&self) -> usize {
        self.by_tsuid.len()
    }

    /// The id of a series.
    pub(crate) fn id(&self, tsuid: &Tsuid) -> Option<u32> {
        self.by_tsuid.get(tsuid).copied()
    }

    /// Adds a series with the next id (callers persist it first).
    pub(crate) fn insert(&mut self, tsuid: Tsuid, buckets: u8) -> u32 {
        let id = self.series.len() as u32;
        add(self.by_metric.entry(tsuid.metric()).or_default(), id);
        for (k, v) in tsuid.tags() {
            let p = self.by_tag.entry(k).or_default();
            add(&mut p.all, id);
            add(p.by_value.entry(v).or_default(), id);
        }
        let salt = salt_of(&tsuid, buckets);
        self.by_tsuid.insert(tsuid.clone(), id);
        self.series.push(SeriesEntry {
            tsuid,
            salt,
            last: None,
            last_exact: true,
        });
        id
    }

    /// Takes series `id` out of every posting list and the TSUID map, keeping its entry so
    /// ids stay dense (a deleted series; see `meta.rs` rule 5).
    pub(crate) fn forget(&mut self, id: u32) {
        let Some(entry) = self.series.get_mut(id as usize) else {
            return;
        };
        entry.last = None;
        let tsuid = entry.tsuid.clone();
        let metric = tsuid.metric();
        if let Some(bm) = self.by_metric.get_mut(&metric) {
            bm.remove(id);
            if bm.is_empty() {
                self.by_metric.remove(&metric);
            }
        }
        for (k, v) in tsuid.tags() {
            let Some(p) = self.by_tag.get_mut(&k) else {
                continue;
            };
            p.all.remove(id);
            if let Some(bm) = p.by_value.get_mut(&v) {
                bm.remove(id);
                if bm.is_empty() {
                    p.by_value.remove(&v);
                }
            }
            if p.all.is_empty() {
                self.by_tag.remove(&k);
            }
        }
        if self.by_tsuid.get(&tsuid) == Some(&id) {
            self.by_tsuid.remove(&tsuid);
        }
        // A deleted series is not revived by a new point: that point makes a new series.
        self.retired.remove(id);
    }

    /// Whether series `id` is live: in the index and not deleted.
    pub(crate) fn is_live(&self, id: u32) -> bool {
        self.series
            .get(id as usize)
            .is_some_and(|s| self.by_tsuid.get(&s.tsuid) == Some(&id))
    }

    /// How many live series use `uid` as a `kind`, counting those retired for expired data:
    /// they keep their TSUID, and a new point brings them back.
    pub(crate) fn uses(&self, kind: UidKind, uid: Uid) -> u64 {
        let retired = self
            .retired
            .iter()
            .filter_map(|id| self.series.get(id as usize))
            .filter(|s| match kind {
                UidKind::Metric => s.tsuid.metric() == uid,
                UidKind::Tagk => s.tsuid.tags().any(|(k, _)| k == uid),
                UidKind::Tagv => s.tsuid.tags().any(|(_, v)| v == uid),
            })
            .count() as u64;
        retired
            + match kind {
                UidKind::Metric => self.by_metric.get(&uid).map_or(0, RoaringBitmap::len),
                UidKind::Tagk => self.by_tag.get(&uid).map_or(0, |p| p.all.len()),
                UidKind::Tagv => self
                    .by_tag
                    .values()
                    .filter_map(|p| p.by_value.get(&uid))
                    .map(RoaringBitmap::len)
                    .sum(),
            }
    }

    /// Takes the series `ids` out of the postings, for their data has expired: lookups and
    /// suggestions stop finding them (and names left with no series), but a series keeps its
    /// id, so a new point of it [`SeriesIndex::revive`]s it.
    pub(crate) fn retire(&mut self, ids: &RoaringBitmap) {
        let ids = ids - &self.retired;
        if ids.is_empty() {
            return;
        }
        let mut names: [BTreeSet<Uid>; 3] = Default::default();
        for id in &ids {
            let Some(s) = self.series.get(id as usize) else {
                continue;
            };
            let m = s.tsuid.metric();
            if let Some(p) = self.by_metric.get_mut(&m) {
                p.remove(id);
            }
            names[UidKind::Metric.index()].insert(m);
            for (k, v) in s.tsuid.tags() {
                if let Some(p) = self.by_tag.get_mut(&k) {
                    p.all.remove(id);
                    if let Some(b) = p.by_value.get_mut(&v) {
                        b.remove(id);
                    }
                }
                names[UidKind::Tagk.index()].insert(k);
                names[UidKind::Tagv.index()].insert(v);
            }
        }
        self.retired |= ids;
        let [metrics, tagks, tagvs] = names;
        let gone = |p: Option<&RoaringBitmap>| p.is_none_or(|p| p.is_empty());
        let out = &mut self.retired_names;
        out[UidKind::Metric.index()]
            .extend(metrics.into_iter().filter(|m| gone(self.by_metric.get(m))));
        out[UidKind::Tagk.index()].extend(
            tagks
                .into_iter()
                .filter(|k| gone(self.by_tag.get(k).map(|p| &p.all))),
        );
        out[UidKind::Tagv.index()].extend(
            tagvs
                .into_iter()
                .filter(|v| self.by_tag.values().all(|p| gone(p.by_value.get(v)))),
        );
    }

    /// Puts a retired series back in the postings (it has a new point).
    pub(crate) fn revive(&mut self, id: u32) {
        if !self.retired.remove(id) {
            return;
        }
        let Some(s) = self.series.get(id as usize) else {
            return;
        };
        let m = s.tsuid.metric();
        self.by_metric.entry(m).or_default().insert(id);
        self.retired_names[UidKind::Metric.index()].remove(&m);
        for (k, v) in s.tsuid.tags() {
            let p = self.by_tag.entry(k).or_default();
            p.all.insert(id);
            p.by_value.entry(v).or_default().insert(id);
            self.retired_names[UidKind::Tagk.index()].remove(&k);
            self.retired_names[UidKind::Tagv.index()].remove(&v);
        }
    }

    /// Series of `metric` that pass every filter. `literal_or` filters on one key are unioned
    /// (as OpenTSDB's scanner does); every other filter is intersected.
    pub(crate) fn find(
        &self,
        metric: Uid,
        filters: &[Filter],
        uids: &UidTable,
    ) -> Result<RoaringBitmap> {
        let Some(all) = self.by_metric.get(&metric) else {
            return Ok(RoaringBitmap::new());
        };
        let mut result = all.clone();
        let mut literal_unions: BTreeMap<Uid, RoaringBitmap> = BTreeMap::new();
        for f in filters {
            let Some(tagk) = uids.get(UidKind::Tagk, f.tagk()) else {
                if f.kind() == FilterKind::NotKey {
                    continue;
                }
                return Err(Error::NoSuchName {
                    kind: UidKind::Tagk,
                    name: f.tagk().to_string(),
                });
            };
            let empty = TagPostings::default();
            let postings = self.by_tag.get(&tagk).unwrap_or(&empty);
            if let Some(literals) = f.literals() {
                let u = literal_unions.entry(tagk).or_default();
                for l in literals {
                    if let Some(v) = uids.get(UidKind::Tagv, l)
                        && let Some(bm) = postings.by_value.get(&v)
                    {
                        *u |= bm;
                    }
                }
                continue;
            }
            if f.kind() == FilterKind::NotKey {
                result -= &postings.all;
            } else if f.matches_every_value() {
                result &= &postings.all;
            } else {
                let mut matched = Vec::new();
                for (v, bm) in &postings.by_value {
                    let name = uids.name(UidKind::Tagv, *v)?;
                    if f.matches_value(&name) {
                        matched.push(bm);
                    }
                }
                result &= matched.union();
            }
        }
        for u in literal_unions.into_values() {
            result &= u;
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uid(n: u32) -> Uid {
        Uid::from_u32(n).unwrap_or_else(|| unreachable!())
    }

    #[test]
    fn postings_follow_inserts() -> Result<()> {
        let mut idx = SeriesIndex::default();
        let a = idx.insert(Tsuid::new(uid(1), &mut [(uid(1), uid(1))])?, 20);
        let b = idx.insert(
            Tsuid::new(uid(1), &mut [(uid(1), uid(2)), (uid(2), uid(3))])?,
            20,
        );
        let c = idx.insert(Tsuid::new(uid(2), &mut [(uid(1), uid(1))])?, 20);
        assert_eq!((a, b, c), (0, 1, 2));
        assert_eq!(
            idx.by_metric[&uid(1)].iter().collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert_eq!(
            idx.by_tag[&uid(1)].all.iter().collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert_eq!(
            idx.by_tag[&uid(1)].by_value[&uid(1)]
                .iter()
                .collect::<Vec<_>>(),
            vec![0, 2]
        );
        assert_eq!(idx.id(&idx.series[1].tsuid.clone()), Some(1));
        Ok(())
    }

    /// A series retired for expired data still holds its names (`strata uid delete` must not
    /// take them away under it); a deleted one holds nothing and is not revived.
    #[test]
    fn retired_series_count_as_uses_and_deleted_ones_stay_gone() -> Result<()> {
        let mut idx = SeriesIndex::default();
        let a = idx.insert(Tsuid::new(uid(1), &mut [(uid(2), uid(3))])?, 20);
        idx.retire(&RoaringBitmap::from_iter([a]));
        assert!(!idx.by_metric.get(&uid(1)).is_some_and(|p| p.contains(a)));
        assert_eq!(idx.uses(UidKind::Metric, uid(1)), 1);
        assert_eq!(idx.uses(UidKind::Tagk, uid(2)), 1);
        assert_eq!(idx.uses(UidKind::Tagv, uid(3)), 1);
        idx.forget(a);
        assert_eq!(idx.uses(UidKind::Metric, uid(1)), 0);
        idx.revive(a);
        assert_eq!(
            idx.uses(UidKind::Metric, uid(1)),
            0,
            "a deleted series stays gone"
        );
        assert!(!idx.is_live(a));
        Ok(())
    }
}
