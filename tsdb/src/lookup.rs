//! Lookups by name and by series id: the series of a metric and filters, the names of a
//! series, and the metrics and tags that have series.

use roaring::RoaringBitmap;

use crate::error::Result;
use crate::filter::Filter;
use crate::rowkey::Tsuid;
use crate::tsdb::{SeriesNames, Tsdb};
use crate::uid::Uid;
use crate::uid_kind::UidKind;

impl Tsdb {
    /// Series of `metric` that pass every filter (AND; `literal_or` filters on one key are
    /// unioned). An unknown metric or tag key is a `NoSuchName` error.
    pub fn find_series(&self, metric: &str, filters: &[Filter]) -> Result<RoaringBitmap> {
        let m = self.uids().lookup(UidKind::Metric, metric)?;
        self.index().read().find(m, filters, self.uids())
    }

    /// Series of any metric that pass every filter (`/api/search/lookup` without a metric).
    pub fn find_series_any_metric(&self, filters: &[Filter]) -> Result<RoaringBitmap> {
        let index = self.index().read();
        let mut out = RoaringBitmap::new();
        for m in index.by_metric.keys() {
            out |= index.find(*m, filters, self.uids())?;
        }
        Ok(out)
    }

    /// The TSUID of series `id`, without resolving names (cheaper than [`Tsdb::series_info`]).
    pub fn series_tsuid(&self, id: u32) -> Option<Tsuid> {
        self.index()
            .read()
            .series
            .get(id as usize)
            .map(|s| s.tsuid.clone())
    }

    /// The metric name and tags of series `id` from the index alone (no read, unlike
    /// [`Tsdb::series_info`]); `None` for an unknown id.
    pub fn series_names(&self, id: u32) -> Result<Option<SeriesNames>> {
        match self.series_tsuid(id) {
            Some(tsuid) => Ok(Some(self.names_of(&tsuid)?)),
            None => Ok(None),
        }
    }

    /// The names of the metrics that have a series, sorted.
    pub fn metric_names(&self) -> Result<Vec<String>> {
        let uids: Vec<Uid> = {
            let index = self.index().read();
            index
                .by_metric
                .iter()
                .filter(|(_, ids)| !ids.is_empty())
                .map(|(uid, _)| *uid)
                .collect()
        };
        self.sorted_names(UidKind::Metric, uids)
    }

    /// The tag keys that a series has, sorted.
    pub fn tag_keys(&self) -> Result<Vec<String>> {
        let uids: Vec<Uid> = {
            let index = self.index().read();
            index
                .by_tag
                .iter()
                .filter(|(_, p)| !p.all.is_empty())
                .map(|(uid, _)| *uid)
                .collect()
        };
        self.sorted_names(UidKind::Tagk, uids)
    }

    /// The values of tag key `tagk` that a series has, sorted; none for an unknown key.
    pub fn tag_values(&self, tagk: &str) -> Result<Vec<String>> {
        let Some(key) = self.uids().get(UidKind::Tagk, tagk) else {
            return Ok(Vec::new());
        };
        let uids: Vec<Uid> = {
            let index = self.index().read();
            index.by_tag.get(&key).map_or_else(Vec::new, |p| {
                p.by_value
                    .iter()
                    .filter(|(_, ids)| !ids.is_empty())
                    .map(|(uid, _)| *uid)
                    .collect()
            })
        };
        self.sorted_names(UidKind::Tagv, uids)
    }

    fn sorted_names(&self, kind: UidKind, uids: Vec<Uid>) -> Result<Vec<String>> {
        let mut names = uids
            .into_iter()
            .map(|u| Ok(self.uids().name(kind, u)?.to_string()))
            .collect::<Result<Vec<String>>>()?;
        names.sort_unstable();
        Ok(names)
    }

    /// The id of a series.
    pub fn series_id(&self, tsuid: &Tsuid) -> Option<u32> {
        self.index().read().id(tsuid)
    }
}
