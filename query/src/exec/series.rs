//! Reading a sub-query's series and running the per-series stages (downsample, rate) on them,
//! in parallel parts when the read is large.

use std::collections::BTreeSet;

use roaring::RoaringBitmap;
use strata_tsdb::{Tsdb, Tsuid};

use super::{Plan, SubPlan, tsdb_error};
use crate::aggregator::Aggregator;
use crate::deadline::Deadline;
use crate::downsample::{
    Interval, downsample_all_folding, downsample_columns, downsample_into, edge_buckets,
    folds_by_columns,
};
use crate::error::{Error, Result};
use crate::num::Point;
use crate::rate::rate;
use strata_tsdb::Value;

/// One series after the per-series stages (downsample, rate), with what the later stages need.
#[derive(Debug)]
pub(super) struct Processed {
    pub(super) id: u32,
    pub(super) tsuid: Tsuid,
    pub(super) metric: String,
    pub(super) tags: Vec<(String, String)>,
    /// Raw points read in the scan window.
    pub(super) raw_points: usize,
    pub(super) points: Vec<Point>,
}

/// What the per-series stages of one sub-query need.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stage<'a> {
    pub(super) tsdb: &'a Tsdb,
    pub(super) plan: &'a Plan,
    pub(super) sp: &'a SubPlan,
    pub(super) window: (i64, i64),
    pub(super) explicit_keys: Option<&'a BTreeSet<&'a str>>,
    pub(super) deadline: &'a Deadline,
    /// Most threads (0: one per core).
    pub(super) threads: usize,
    /// Series-hours the whole query reads (for the block cache; see `Tsdb::read_series_each_in`).
    pub(super) request_series_hours: u64,
}

/// Reads with fewer series than this stay on the calling thread. A thread costs tens of
/// microseconds; one series-hour (360 points at 10 s) takes a few to decode and downsample, so a
/// split pays off from a few dozen series-hours per thread.
pub(super) const PARALLEL_MIN_SERIES_HOURS: u64 = 64;

/// The cores this process may use, read once: on Linux, finding out opens three cgroup files,
/// which cost a small query more than its reading did.
pub(super) static CORES: std::sync::LazyLock<usize> = std::sync::LazyLock::new(|| {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
});

/// Runs the per-series stages of the series `ids`: from their newest points where those decide
/// (see [`process_newest_points`]), and from a read of the others. Series left out by
/// `explicitTags`, or with no point in the window, are dropped.
pub(super) fn read_and_process(stage: &Stage<'_>, ids: &RoaringBitmap) -> Result<Vec<Processed>> {
    if newest_point_decides(stage.sp) {
        let mut out = Vec::new();
        let rest = process_newest_points(stage, ids, &mut out)?;
        if !rest.is_empty() {
            out.extend(read_in_parts(stage, &rest)?);
        }
        return Ok(out);
    }
    read_in_parts(stage, ids)
}

/// Whether a series' part in the result is its newest point alone when that point lies in the
/// query's range: an `all` downsample to `last`, with no rate. (Grafana's "current value"
/// panels ask this.)
pub(super) fn newest_point_decides(sp: &SubPlan) -> bool {
    !sp.sub.rate
        && sp
            .downsample
            .is_some_and(|d| matches!(d.interval, Interval::All) && d.function == Aggregator::Last)
}

/// For a sub-query that [`newest_point_decides`]: each series whose newest point, which the
/// series index keeps, lies in the query's range is processed from that point alone, with no
/// read. The last point in the range is then the newest of all, which a read would find last
/// in the range. Returns the series left to read: those whose newest point is elsewhere.
pub(super) fn process_newest_points(
    stage: &Stage<'_>,
    ids: &RoaringBitmap,
    out: &mut Vec<Processed>,
) -> Result<RoaringBitmap> {
    let range = stage.plan.start_ms..=stage.plan.end_ms;
    let mut rest = ids.clone();
    let mut scratch = Vec::new();
    for id in ids {
        let Some(info) = stage.tsdb.series_info(id).map_err(tsdb_error)? else {
            continue;
        };
        let Some(newest) = info.last.filter(|(ts, _)| range.contains(ts)) else {
            continue;
        };
        let mut s = strata_tsdb::SeriesPoints {
            id,
            tsuid: info.tsuid,
            metric: info.metric,
            tags: info.tags,
            points: vec![newest],
        };
        out.extend(process_series(stage, &mut s, &mut scratch)?);
        rest.remove(id);
    }
    stage.deadline.check()?;
    Ok(rest)
}

/// Reads the series `ids` and runs the per-series stages, split into up to
/// `QueryLimits::threads` parts (at most one per core) that run in parallel, each reading and
/// processing its share of the ids in its own snapshot.
pub(super) fn read_in_parts(stage: &Stage<'_>, ids: &RoaringBitmap) -> Result<Vec<Processed>> {
    let (ws, we) = stage.window;
    let hours = u64::try_from((we - ws) / 3_600_000).unwrap_or(0).max(1);
    if ids.len().saturating_mul(hours) < PARALLEL_MIN_SERIES_HOURS {
        return read_chunk(stage, ids);
    }
    let cores = *CORES;
    let threads = match stage.threads {
        0 => cores,
        n => n.min(cores),
    }
    .min(usize::try_from(ids.len()).unwrap_or(usize::MAX));
    if threads < 2 {
        return read_chunk(stage, ids);
    }
    // Split by salt bucket, so that scans do not read each other's rows.
    let parts = stage.tsdb.split_for_read(ids, threads);
    read_parts(&parts, |part| read_chunk(stage, part))
}

/// Runs `read` on every part, in parallel, and concatenates the results in part order. The
/// calling thread reads the first part while rayon's pool (one thread per core) reads the
/// others, so a two-way split wakes one pool thread, not two while the caller waits. A panic in
/// a part is that part's error, not the server's.
pub(crate) fn read_parts<T: Send>(
    parts: &[RoaringBitmap],
    read: impl Fn(&RoaringBitmap) -> Result<Vec<T>> + Sync,
) -> Result<Vec<T>> {
    let run = |part: &RoaringBitmap| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(part)))
            .unwrap_or_else(|_| Err(Error::Storage("a query worker panicked".to_owned())))
    };
    let mut results: Vec<Result<Vec<T>>> = parts.iter().map(|_| Ok(Vec::new())).collect();
    if let (Some((first, rest)), Some((first_slot, rest_slots))) =
        (parts.split_first(), results.split_first_mut())
    {
        rayon::in_place_scope(|scope| {
            for (part, slot) in rest.iter().zip(rest_slots) {
                scope.spawn(|_| *slot = run(part));
            }
            *first_slot = run(first);
        });
    }
    let mut out = Vec::new();
    for r in results {
        out.extend(r?);
    }
    Ok(out)
}

/// Reads `ids` and runs the per-series stages on this thread, checking the deadline between
/// series.
pub(super) fn read_chunk(stage: &Stage<'_>, ids: &RoaringBitmap) -> Result<Vec<Processed>> {
    let (ws, we) = stage.window;
    let mut scratch = Vec::new();
    let mut out = Vec::new();
    // Each series is processed as soon as it is decoded, so only one series' raw points are in
    // memory at a time (a 24 h read of 200 series is 1.7 M points).
    let hours = stage.request_series_hours;
    if reads_columns(stage.sp) {
        stage.tsdb.read_columns_each(
            &strata_tsdb::ReadRequest::ids(ids, ws, we).in_request(hours),
            |s| {
                out.extend(process_columns(stage, s)?);
                Ok::<(), Error>(())
            },
        )?;
    } else {
        stage.tsdb.read_each(
            &strata_tsdb::ReadRequest::ids(ids, ws, we).in_request(hours),
            |s| {
                out.extend(process_series(stage, s, &mut scratch)?);
                Ok::<(), Error>(())
            },
        )?;
    }
    stage.deadline.check()?;
    Ok(out)
}

/// Whether a sub-query's series are read as columns: when its downsample folds by columns
/// (see [`downsample_columns`]), which skips building a `(time, value)` pair per point.
pub(super) fn reads_columns(sp: &SubPlan) -> bool {
    sp.downsample.as_ref().is_some_and(folds_by_columns)
}

/// Whether the per-series stages take a series with `tags`: one with points that
/// `explicitTags` does not leave out. Fails when the query's time is up.
pub(super) fn takes(stage: &Stage<'_>, tags: &[(String, String)], empty: bool) -> Result<bool> {
    let left_out = stage.explicit_keys.is_some_and(|keys| {
        !(tags.len() == keys.len() && tags.iter().all(|(k, _)| keys.contains(k.as_str())))
    });
    if left_out || empty {
        return Ok(false);
    }
    stage.deadline.check()?;
    Ok(true)
}

/// [`process_series`] for a series read as columns (see [`reads_columns`]).
pub(super) fn process_columns(
    stage: &Stage<'_>,
    s: &mut strata_tsdb::SeriesColumns,
) -> Result<Option<Processed>> {
    let (plan, sp) = (stage.plan, stage.sp);
    if !takes(stage, &s.tags, s.points.is_empty())? {
        return Ok(None);
    }
    let mut points = Vec::new();
    let Some(ds) = &sp.downsample else {
        return Err(Error::Storage(
            "a column read without a downsample".to_owned(),
        ));
    };
    // As in `process_series`: the buckets beside the range come along for the later stages.
    let range = (plan.start_ms, plan.end_ms);
    if !downsample_columns(&s.points, ds, range, plan.tz, &mut points)? {
        return Err(Error::Storage(
            "a column read of a downsample that does not fold by columns".to_owned(),
        ));
    }
    let raw_points = s.points.len();
    Ok(Some(rate_and_finish(sp, s, raw_points, points)))
}

/// The rate stage of one series' downsampled (or raw) `points`, if asked, and the series
/// as the later stages take it, with `raw_points` points read.
pub(super) fn rate_and_finish<P>(
    sp: &SubPlan,
    s: &mut strata_tsdb::Series<P>,
    raw_points: usize,
    mut points: Vec<Point>,
) -> Processed {
    if sp.sub.rate {
        points = rate(&points, &sp.sub.rate_options);
    }
    Processed {
        id: s.id,
        tsuid: s.tsuid.clone(),
        metric: std::mem::take(&mut s.metric),
        tags: std::mem::take(&mut s.tags),
        raw_points,
        points,
    }
}

/// The per-series stages (downsample, rate) of one series; `None` for a series the query
/// leaves out.
pub(super) fn process_series(
    stage: &Stage<'_>,
    s: &mut strata_tsdb::SeriesPoints,
    scratch: &mut Vec<Value>,
) -> Result<Option<Processed>> {
    let (plan, sp) = (stage.plan, stage.sp);
    if !takes(stage, &s.tags, s.points.is_empty())? {
        return Ok(None);
    }
    let mut points = Vec::new();
    match &sp.downsample {
        Some(ds) => {
            // The buckets beside the range feed rate and interpolation, as OpenTSDB's scan
            // window does; `run_sub` drops them after aggregation.
            let range = (plan.start_ms, plan.end_ms);
            let at = |p: &(i64, Value)| *p;
            let (before, after) = edge_buckets(&s.points, at, ds, range, plan.tz, scratch);
            points.extend(before);
            if !downsample_all_folding(&s.points, at, ds, range, &mut points) {
                downsample_into(
                    s.points.iter().map(at),
                    ds,
                    range,
                    plan.tz,
                    scratch,
                    &mut points,
                )?;
            }
            points.extend(after);
        }
        None => points.extend_from_slice(&s.points),
    }
    let raw_points = s.points.len();
    Ok(Some(rate_and_finish(sp, s, raw_points, points)))
}
