//! Resolving a planned query: the series of every sub-query, found before any of them is read
//! so that what the reads will cost is known up front.

use roaring::RoaringBitmap;
use strata_tsdb::{Filter, FilterKind, Tsdb, Tsuid, Uid, UidKind};

use super::series::newest_point_decides;
use super::{Plan, plan, too_many_series, tsdb_error};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::model::{QueryLimits, SubQuery, TsQuery};
use crate::window::scan_window;

/// A query planned, with the series of every sub-query resolved (as OpenTSDB resolves all
/// sub-queries before it scans): what the reads will cost is known before any of them runs.
#[derive(Debug)]
pub(crate) struct Resolved {
    pub(super) plan: Plan,
    /// Per sub-query of `plan`: its series and filters; `None` when its TSUIDs name no
    /// stored series.
    pub(super) subs: Vec<Option<(RoaringBitmap, Vec<Filter>)>>,
    /// Series-hours of the scan windows over all sub-queries.
    pub(super) series_hours: u64,
    /// The work expected, in series-hours read: as `series_hours`, except that a sub-query
    /// answered from newest points (see [`newest_point_decides`]) counts an eighth of one per
    /// series.
    pub(super) work_series_hours: u64,
    pub(super) deadline: Deadline,
}

impl Resolved {
    /// Whether the query is cheap enough to run where it is, without handing the thread over
    /// (see [`crate::handle_query_request_offloaded`]): at most [`LIGHT_SERIES_HOURS`] of work.
    pub(crate) fn is_light(&self) -> bool {
        self.work_series_hours <= LIGHT_SERIES_HOURS
    }
}

/// Reads up to this many series-hours in all are light enough to run on an async worker
/// thread: at 10 s points that is about 11,500 points, less work than handing the query to
/// another thread. Denser series cost proportionally more, so 1 kHz data would hold the worker
/// much longer at this bound.
pub(super) const LIGHT_SERIES_HOURS: u64 = 32;

/// Plans `q` and resolves the series of each sub-query, checking the delete permission and
/// `limits.max_series`. The query's timeout starts here.
pub(crate) fn resolve(
    tsdb: &Tsdb,
    q: &TsQuery,
    now_ms: i64,
    limits: &QueryLimits,
) -> Result<Resolved> {
    let deadline = Deadline::start(limits.timeout);
    let plan = plan(q, now_ms)?;
    if q.delete && !limits.allow_delete {
        return Err(Error::BadRequest {
            message: "Bad request".to_owned(),
            details: Some(
                "Deleting data is not enabled (tsd.http.query.allow_delete=false)".to_owned(),
            ),
        });
    }
    let mut subs = Vec::with_capacity(plan.subs.len());
    let mut series_hours = 0u64;
    let mut work_series_hours = 0u64;
    for sp in &plan.subs {
        deadline.check()?;
        let sub = &sp.sub;
        let resolved = if sub.tsuids.is_empty() {
            tsdb.uid(UidKind::Metric, &sub.metric).map_err(tsdb_error)?;
            let filters = build_filters(tsdb, sub)?;
            let ids = tsdb
                .find_series(&sub.metric, &filters)
                .map_err(tsdb_error)?;
            if limits.max_series > 0 && ids.len() > limits.max_series as u64 {
                return Err(too_many_series(ids.len(), limits.max_series));
            }
            Some((ids, filters))
        } else {
            tsuid_ids(tsdb, sub)?.map(|ids| (ids, Vec::new()))
        };
        if let Some((ids, _)) = &resolved {
            let (ws, we) = scan_window(
                plan.start_ms,
                plan.end_ms,
                sp.downsample.map(|d| d.interval),
            );
            let hours = u64::try_from((we - ws) / 3_600_000).unwrap_or(0) + 1;
            let read = ids.len().saturating_mul(hours);
            series_hours = series_hours.saturating_add(read);
            // Names and a point, against a few microseconds per series-hour read.
            let work = if newest_point_decides(sp) {
                ids.len().div_ceil(8)
            } else {
                read
            };
            work_series_hours = work_series_hours.saturating_add(work);
        }
        subs.push(resolved);
    }
    Ok(Resolved {
        plan,
        subs,
        series_hours,
        work_series_hours,
        deadline,
    })
}

/// Builds the tsdb filters of a sub-query, checking that literal values exist (OpenTSDB docs:
/// `api_http/query`).
pub(super) fn build_filters(tsdb: &Tsdb, sub: &SubQuery) -> Result<Vec<Filter>> {
    let mut filters = Vec::with_capacity(sub.filters.len());
    for f in &sub.filters {
        let kind = FilterKind::parse(&f.kind).ok_or_else(|| {
            Error::bad_request(format!(
                "Could not find a tag value filter of the type: {}",
                f.kind
            ))
        })?;
        let filter = Filter::new(kind, &f.tagk, &f.filter, f.group_by).map_err(tsdb_error)?;
        if kind != FilterKind::NotKey {
            tsdb.uid(UidKind::Tagk, &f.tagk).map_err(tsdb_error)?;
        }
        if kind == FilterKind::LiteralOr {
            for v in f.filter.split('|').filter(|v| !v.is_empty()) {
                tsdb.uid(UidKind::Tagv, v).map_err(tsdb_error)?;
            }
        }
        filters.push(filter);
    }
    Ok(filters)
}

/// The series ids of a TSUID sub-query (all TSUIDs must share one metric); `None` when none of
/// them exists.
pub(super) fn tsuid_ids(tsdb: &Tsdb, sub: &SubQuery) -> Result<Option<RoaringBitmap>> {
    let mut metric_uid = None;
    let mut ids = Vec::new();
    for hex in &sub.tsuids {
        let tsuid = Tsuid::parse_hex(hex).map_err(tsdb_error)?;
        match metric_uid {
            None => metric_uid = Some((tsuid.metric(), hex.clone())),
            Some((m, ref first)) if m != tsuid.metric() => {
                return Err(Error::bad_request(format!(
                    "One or more TSUIDs did not share the same metric [{first}] [{hex}]"
                )));
            }
            Some(_) => {}
        }
        if let Some(id) = tsdb.series_id(&tsuid) {
            ids.push(id);
        }
    }
    let Some((m, _)) = metric_uid else {
        return Ok(None);
    };
    let metric = tsdb.uid_name(UidKind::Metric, m).map_err(tsdb_error)?;
    if ids.is_empty() {
        return Ok(None);
    }
    let mut set = tsdb.find_series(&metric, &[]).map_err(tsdb_error)?;
    set.clear();
    set.extend(ids);
    Ok(Some(set))
}

/// A name's UID for ordering (UIDs order as their bytes); unknown names sort first.
pub(super) fn uid_key(tsdb: &Tsdb, kind: UidKind, name: &str) -> Option<Uid> {
    tsdb.uid(kind, name).ok()
}
