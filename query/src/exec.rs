//! Query execution (§e.2): validate, resolve, read the scan window from the tsdb, then per series
//! downsample → rate, group, aggregate with interpolation, and compute `tags`/`aggregateTags`.
//!
//! A sub-query over many series-hours splits its series over the available cores: each thread
//! reads its share (`Tsdb::read_series`, its own snapshot) and runs the per-series stages on it;
//! grouping and aggregation then run on the calling thread. Downsampling streams over the points
//! read, with one scratch buffer per thread. The query timeout is checked between series and
//! stages.

use std::collections::BTreeSet;
use std::str::FromStr;

use chrono_tz::Tz;
use roaring::RoaringBitmap;
use strata_tsdb::{Annotation, Filter, FilterKind, Tsdb, Tsuid, Uid, UidKind};

use crate::aggregate::aggregate;
use crate::aggregator::Aggregator;
use crate::deadline::Deadline;
use crate::downsample::{
    DownsampleSpec, FillPolicy, Interval, downsample_all_folding, downsample_columns,
    downsample_into, edge_buckets, folds_by_columns, to_num,
};
use crate::error::{Error, Result};
use crate::groupby::{TagMap, group_series, group_tags};
use crate::model::{QueryLimits, SubQuery, TsQuery};
use crate::num::{Num, Point};
use crate::rate::rate;
use crate::time::parse_time_range;
use crate::window::scan_window;

/// One result object: a group of series of one sub-query, aggregated.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultGroup {
    /// Index of the sub-query in the request.
    pub query_index: usize,
    /// Metric name.
    pub metric: String,
    /// Tags shared by every series of the group.
    pub tags: TagMap,
    /// Tag keys whose values differ within the group, ordered by tag-key UID.
    pub aggregate_tags: Vec<String>,
    /// The group's TSUIDs in hex, sorted.
    pub tsuids: Vec<String>,
    /// Points in `[start, end]`, ascending, in ms.
    pub points: Vec<Point>,
    /// Whether NaN values are written as `null` (fill policy `null`) rather than `"NaN"`.
    pub nan_as_null: bool,
    /// Raw points read for the group's series.
    pub raw_points: usize,
    /// Annotations of the group's series starting in the query's range, in start order
    /// (unless `noAnnotations`).
    pub annotations: Vec<Annotation>,
    /// Global annotations starting in the query's range, when `globalAnnotations` is set.
    pub global_annotations: Vec<Annotation>,
}

/// A validated query: parsed times, zone and per-sub-query plans.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) start_ms: i64,
    pub(crate) end_ms: i64,
    tz: Tz,
    subs: Vec<SubPlan>,
}

#[derive(Debug)]
struct SubPlan {
    aggregator: Aggregator,
    downsample: Option<DownsampleSpec>,
    sub: SubQuery,
}

/// Maps a tsdb error to the query error carrying OpenTSDB's status.
pub(crate) fn tsdb_error(e: strata_tsdb::Error) -> Error {
    if matches!(e, strata_tsdb::Error::NoSuchName { .. }) {
        return Error::NoSuchName(e.to_string());
    }
    match e.kind() {
        strata_tsdb::ErrorKind::Client => Error::bad_request(e.to_string()),
        strata_tsdb::ErrorKind::NotFound => Error::NoSuchName(e.to_string()),
        strata_tsdb::ErrorKind::Server | strata_tsdb::ErrorKind::Unavailable => {
            Error::Storage(e.to_string())
        }
    }
}

impl From<strata_tsdb::Error> for Error {
    fn from(e: strata_tsdb::Error) -> Error {
        tsdb_error(e)
    }
}

/// Aggregator names are case-sensitive, as in OpenTSDB (`SUM` is unknown, §e.3).
fn find_aggregator(name: &str) -> Result<Aggregator> {
    if name.is_empty() {
        return Err(Error::bad_request("Missing the aggregation function"));
    }
    Aggregator::from_name(name)
        .map_err(|_| Error::bad_request(format!("No such aggregation function: {name}")))
}

/// Validates a query in OpenTSDB's order (§c.3) and de-duplicates identical sub-queries.
pub(crate) fn plan(q: &TsQuery, now_ms: i64) -> Result<Plan> {
    let tz = match q.timezone.as_deref().filter(|t| !t.is_empty()) {
        Some(name) => Tz::from_str(name)
            .map_err(|_| Error::bad_request("The timezone specification could not be found"))?,
        None => Tz::UTC,
    };
    if q.start.is_empty() {
        return Err(Error::MissingStart);
    }
    let (start_ms, end_ms) = parse_time_range(&q.start, q.end.as_deref(), now_ms, tz)?;
    if q.queries.is_empty() {
        return Err(Error::bad_request("Missing queries"));
    }
    let mut subs: Vec<SubPlan> = Vec::new();
    for (index, sub) in q.queries.iter().enumerate() {
        let aggregator = find_aggregator(&sub.aggregator)?;
        if sub.metric.is_empty() && sub.tsuids.is_empty() {
            return Err(Error::bad_request(
                "Missing the metric or tsuids, provide at least one",
            ));
        }
        let downsample = match sub.downsample.as_deref() {
            Some(d) => Some(DownsampleSpec::parse(d, q.use_calendar)?),
            None => None,
        };
        if !sub.percentiles.is_empty() {
            return Err(Error::bad_request(
                "Histogram (percentiles) queries are not supported",
            ));
        }
        if subs.iter().any(|s| {
            s.sub
                == SubQuery {
                    index: s.sub.index,
                    ..sub.clone()
                }
        }) {
            continue;
        }
        let mut sub = sub.clone();
        sub.index = index;
        subs.push(SubPlan {
            aggregator,
            downsample,
            sub,
        });
    }
    Ok(Plan {
        start_ms,
        end_ms,
        tz,
        subs,
    })
}

/// Runs a query with no limits. See [`execute_with_limits`].
pub fn execute(tsdb: &Tsdb, q: &TsQuery, now_ms: i64) -> Result<Vec<ResultGroup>> {
    execute_with_limits(tsdb, q, now_ms, &QueryLimits::default())
}

/// Validates and runs a query: one [`ResultGroup`] per group of every sub-query, in sub-query
/// order. Unknown names are `Error::NoSuchName` (400); exceeding `limits` is
/// `Error::LimitExceeded` (413).
pub fn execute_with_limits(
    tsdb: &Tsdb,
    q: &TsQuery,
    now_ms: i64,
    limits: &QueryLimits,
) -> Result<Vec<ResultGroup>> {
    let resolved = resolve(tsdb, q, now_ms, limits)?;
    execute_resolved(tsdb, q, &resolved, limits)
}

/// A query planned, with the series of every sub-query resolved (as OpenTSDB resolves all
/// sub-queries before it scans): what the reads will cost is known before any of them runs.
#[derive(Debug)]
pub(crate) struct Resolved {
    plan: Plan,
    /// Per sub-query of `plan`: its series and filters; `None` when its TSUIDs name no
    /// stored series.
    subs: Vec<Option<(RoaringBitmap, Vec<Filter>)>>,
    /// Series-hours of the scan windows over all sub-queries.
    series_hours: u64,
    /// The work expected, in series-hours read: as `series_hours`, except that a sub-query
    /// answered from newest points (see [`newest_point_decides`]) counts an eighth of one per
    /// series.
    work_series_hours: u64,
    deadline: Deadline,
}

impl Resolved {
    /// Whether the query is cheap enough to run where it is, without handing the thread over
    /// (see [`crate::handle_query_request_offloaded`]): at most [`LIGHT_SERIES_HOURS`] of work.
    pub(crate) fn is_light(&self) -> bool {
        self.work_series_hours <= LIGHT_SERIES_HOURS
    }
}

/// Reads up to this many series-hours in all are light enough to run on an async worker
/// thread: with 10 s points, the peer benchmark's Q3 (one series over 25 hours, downsampled and
/// rated) takes about 80 µs in all. Denser series cost proportionally more: one of 1 kHz data
/// would hold the worker for about a second at this bound.
const LIGHT_SERIES_HOURS: u64 = 32;

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

/// Runs a [`resolve`]d query.
pub(crate) fn execute_resolved(
    tsdb: &Tsdb,
    q: &TsQuery,
    resolved: &Resolved,
    limits: &QueryLimits,
) -> Result<Vec<ResultGroup>> {
    let Resolved {
        plan,
        subs,
        series_hours,
        deadline,
        ..
    } = resolved;
    let mut out = Vec::new();
    let mut total_points = 0usize;
    for (sp, sub) in plan.subs.iter().zip(subs) {
        let Some((ids, filters)) = sub else {
            continue;
        };
        // The whole query's size decides whether its reads fill the block cache: the
        // sub-queries of a large query are read one by one, each perhaps small.
        run_sub(
            tsdb,
            plan,
            sp,
            (ids, filters),
            (q.delete, *series_hours),
            (limits, deadline),
            &mut total_points,
            &mut out,
        )?;
    }
    if !q.delete {
        attach_annotations(tsdb, q, plan, &mut out)?;
    }
    Ok(out)
}

/// Adds the annotations OpenTSDB returns with query results: each group's series annotations
/// (unless `noAnnotations`) and, with `globalAnnotations`, the global ones on every group.
fn attach_annotations(
    tsdb: &Tsdb,
    q: &TsQuery,
    plan: &Plan,
    out: &mut [ResultGroup],
) -> Result<()> {
    let global = if q.global_annotations {
        tsdb.annotations(None, plan.start_ms, plan.end_ms)
            .map_err(tsdb_error)?
    } else {
        Vec::new()
    };
    let per_series = !q.no_annotations && tsdb.has_annotations();
    for r in out.iter_mut() {
        if per_series {
            for tsuid in &r.tsuids {
                r.annotations.extend(
                    tsdb.annotations(Some(tsuid), plan.start_ms, plan.end_ms)
                        .map_err(tsdb_error)?,
                );
            }
            r.annotations.sort_by_key(|a| {
                (
                    strata_tsdb::annotation_time_ms(a.start_time),
                    a.tsuid.clone(),
                )
            });
        }
        r.global_annotations.clone_from(&global);
    }
    Ok(())
}

/// Builds the tsdb filters of a sub-query, checking that literal values exist (§c.3).
fn build_filters(tsdb: &Tsdb, sub: &SubQuery) -> Result<Vec<Filter>> {
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
fn tsuid_ids(tsdb: &Tsdb, sub: &SubQuery) -> Result<Option<RoaringBitmap>> {
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

fn tag_map(tags: &[(String, String)]) -> TagMap {
    tags.iter().cloned().collect()
}

/// A name's UID for ordering (UIDs order as their bytes); unknown names sort first.
fn uid_key(tsdb: &Tsdb, kind: UidKind, name: &str) -> Option<Uid> {
    tsdb.uid(kind, name).ok()
}

#[allow(
    clippy::too_many_arguments,
    reason = "the pieces of one query's state, passed down one level"
)]
fn run_sub(
    tsdb: &Tsdb,
    plan: &Plan,
    sp: &SubPlan,
    (ids, filters): (&RoaringBitmap, &[Filter]),
    (delete, request_series_hours): (bool, u64),
    (limits, deadline): (&QueryLimits, &Deadline),
    total_points: &mut usize,
    out: &mut Vec<ResultGroup>,
) -> Result<()> {
    deadline.check()?;
    let sub = &sp.sub;
    let (ws, we) = scan_window(
        plan.start_ms,
        plan.end_ms,
        sp.downsample.map(|d| d.interval),
    );
    let explicit_keys: Option<BTreeSet<&str>> = sub
        .explicit_tags
        .then(|| filters.iter().map(Filter::tagk).collect());
    let stage = Stage {
        tsdb,
        plan,
        sp,
        window: (ws, we),
        explicit_keys: explicit_keys.as_ref(),
        deadline,
        threads: limits.threads,
        request_series_hours,
    };
    let mut series = read_and_process(&stage, ids)?;
    deadline.check()?;
    if limits.max_series > 0 && series.len() > limits.max_series {
        return Err(too_many_series(series.len() as u64, limits.max_series));
    }
    for s in &series {
        *total_points = total_points.saturating_add(s.raw_points);
    }
    if limits.max_data_points > 0 && *total_points > limits.max_data_points {
        return Err(Error::LimitExceeded(format!(
            "Sorry, you have attempted to fetch more than our limit of {} data points. Please \
             try filtering using more tags or decrease your time range.",
            limits.max_data_points
        )));
    }
    if delete && !series.is_empty() {
        let mut set = ids.clone();
        set.clear();
        for s in &series {
            set.insert(s.id);
        }
        // OpenTSDB deletes every row the query scanned.
        tsdb.delete(&set, ws, we).map_err(tsdb_error)?;
    }
    // OpenTSDB orders `none` results (and members within a group) by TSUID bytes.
    series.sort_by(|a, b| a.tsuid.cmp(&b.tsuid));
    let nan_as_null = sp.downsample.is_some_and(|d| d.fill == FillPolicy::Null);
    let in_range = |(t, _): &Point| (plan.start_ms..=plan.end_ms).contains(t);
    if sp.aggregator == Aggregator::None {
        // One group per series: its tags are the series' own, and nothing is aggregated, so
        // the series' names move into the result as they are.
        for s in series {
            deadline.check()?;
            let mut points = s.points;
            points.retain(in_range);
            out.push(ResultGroup {
                query_index: sub.index,
                metric: s.metric,
                tags: s.tags.into_iter().collect(),
                aggregate_tags: Vec::new(),
                tsuids: vec![s.tsuid.to_hex()],
                points,
                nan_as_null,
                raw_points: s.raw_points,
                annotations: Vec::new(),
                global_annotations: Vec::new(),
            });
        }
        return Ok(());
    }
    let processed: Vec<Vec<Point>> = series
        .iter_mut()
        .map(|s| std::mem::take(&mut s.points))
        .collect();
    let tags: Vec<TagMap> = series.iter().map(|s| tag_map(&s.tags)).collect();
    let groups: Vec<Vec<usize>> = {
        let mut keys: Vec<&str> = Vec::new();
        for f in filters.iter().filter(|f| f.group_by()) {
            if !keys.contains(&f.tagk()) {
                keys.push(f.tagk());
            }
        }
        // Group-by keys in tag-key UID order; groups by the bytes of their value UIDs.
        keys.sort_by_cached_key(|k| uid_key(tsdb, UidKind::Tagk, k));
        let refs: Vec<&TagMap> = tags.iter().collect();
        let mut groups = group_series(&refs, &keys);
        groups.sort_by_cached_key(|g| {
            g.key
                .iter()
                .map(|v| uid_key(tsdb, UidKind::Tagv, v))
                .collect::<Vec<_>>()
        });
        groups.into_iter().map(|g| g.members).collect()
    };
    for members in groups {
        deadline.check()?;
        let refs: Vec<&[Point]> = members.iter().map(|i| processed[*i].as_slice()).collect();
        // OpenTSDB's integer path, which picks the `ep*` estimators: no downsample, no rate.
        let int_estimators = sp.downsample.is_none();
        let mut points = aggregate(&refs, sp.aggregator, sub.rate, int_estimators);
        points.retain(in_range);
        let gt = group_tags(members.iter().map(|i| &tags[*i]));
        let mut aggregate_tags = gt.aggregate_tags;
        aggregate_tags.sort_by_cached_key(|k| uid_key(tsdb, UidKind::Tagk, k));
        let mut tsuids: Vec<String> = members.iter().map(|i| series[*i].tsuid.to_hex()).collect();
        tsuids.sort();
        let metric = members
            .first()
            .map_or_else(|| sub.metric.clone(), |i| series[*i].metric.clone());
        out.push(ResultGroup {
            query_index: sub.index,
            metric,
            tags: gt.tags,
            aggregate_tags,
            tsuids,
            points,
            nan_as_null,
            raw_points: members.iter().map(|i| series[*i].raw_points).sum(),
            annotations: Vec::new(),
            global_annotations: Vec::new(),
        });
    }
    Ok(())
}

/// One series after the per-series stages (downsample, rate), with what the later stages need.
#[derive(Debug)]
struct Processed {
    id: u32,
    tsuid: Tsuid,
    metric: String,
    tags: Vec<(String, String)>,
    /// Raw points read in the scan window.
    raw_points: usize,
    points: Vec<Point>,
}

/// What the per-series stages of one sub-query need.
#[derive(Debug, Clone, Copy)]
struct Stage<'a> {
    tsdb: &'a Tsdb,
    plan: &'a Plan,
    sp: &'a SubPlan,
    window: (i64, i64),
    explicit_keys: Option<&'a BTreeSet<&'a str>>,
    deadline: &'a Deadline,
    /// Most threads (0: one per core).
    threads: usize,
    /// Series-hours the whole query reads (for the block cache; see `Tsdb::read_series_each_in`).
    request_series_hours: u64,
}

/// Reads with fewer series than this stay on the calling thread. A thread costs tens of
/// microseconds; one series-hour (360 points at 10 s) takes a few to decode and downsample, so a
/// split pays off from a few dozen series-hours per thread.
const PARALLEL_MIN_SERIES_HOURS: u64 = 64;

/// The cores this process may use, read once: on Linux, finding out opens three cgroup files,
/// which cost a small query more than its reading did.
static CORES: std::sync::LazyLock<usize> = std::sync::LazyLock::new(|| {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
});

/// Runs the per-series stages of the series `ids`: from their newest points where those decide
/// (see [`process_newest_points`]), and from a read of the others. Series left out by
/// `explicitTags`, or with no point in the window, are dropped.
fn read_and_process(stage: &Stage<'_>, ids: &RoaringBitmap) -> Result<Vec<Processed>> {
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
fn newest_point_decides(sp: &SubPlan) -> bool {
    !sp.sub.rate
        && sp
            .downsample
            .is_some_and(|d| matches!(d.interval, Interval::All) && d.function == Aggregator::Last)
}

/// For a sub-query that [`newest_point_decides`]: each series whose newest point, which the
/// series index keeps, lies in the query's range is processed from that point alone, with no
/// read. The last point in the range is then the newest of all, which a read would find last
/// in the range. Returns the series left to read: those whose newest point is elsewhere.
fn process_newest_points(
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
fn read_in_parts(stage: &Stage<'_>, ids: &RoaringBitmap) -> Result<Vec<Processed>> {
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
    // The calling thread reads the first part while rayon's pool (one thread per core) reads
    // the others, so a two-way split wakes one pool thread, not two while the caller waits.
    // A panic in a part is that part's error, not the server's.
    let run = |part: &RoaringBitmap| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read_chunk(stage, part)))
            .unwrap_or_else(|_| Err(Error::Storage("a query worker panicked".to_owned())))
    };
    let mut results: Vec<Result<Vec<Processed>>> = parts.iter().map(|_| Ok(Vec::new())).collect();
    let (Some((first, rest)), Some((first_slot, rest_slots))) =
        (parts.split_first(), results.split_first_mut())
    else {
        return Ok(Vec::new());
    };
    rayon::in_place_scope(|scope| {
        for (part, slot) in rest.iter().zip(rest_slots) {
            scope.spawn(move |_| *slot = run(part));
        }
        *first_slot = run(first);
    });
    let mut out = Vec::new();
    for r in results {
        out.extend(r?);
    }
    Ok(out)
}

/// Reads `ids` and runs the per-series stages on this thread, checking the deadline between
/// series.
fn read_chunk(stage: &Stage<'_>, ids: &RoaringBitmap) -> Result<Vec<Processed>> {
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
fn reads_columns(sp: &SubPlan) -> bool {
    sp.downsample.as_ref().is_some_and(folds_by_columns)
}

/// Whether the per-series stages take a series with `tags`: one with points that
/// `explicitTags` does not leave out. Fails when the query's time is up.
fn takes(stage: &Stage<'_>, tags: &[(String, String)], empty: bool) -> Result<bool> {
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
fn process_columns(
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
fn rate_and_finish<P>(
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
fn process_series(
    stage: &Stage<'_>,
    s: &mut strata_tsdb::SeriesPoints,
    scratch: &mut Vec<Num>,
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
            let at = |(t, v): &(i64, strata_tsdb::Value)| (*t, to_num(*v));
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
        None => points.extend(s.points.iter().map(|(t, v)| (*t, to_num(*v)))),
    }
    let raw_points = s.points.len();
    Ok(Some(rate_and_finish(sp, s, raw_points, points)))
}

fn too_many_series(count: u64, limit: usize) -> Error {
    Error::LimitExceeded(format!(
        "Sorry, the query matched {count} time series, more than our limit of {limit}. Please \
         try filtering using more tags."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(aggregator: &str, metric: &str) -> SubQuery {
        SubQuery {
            aggregator: aggregator.to_owned(),
            metric: metric.to_owned(),
            ..SubQuery::default()
        }
    }

    fn query(subs: Vec<SubQuery>) -> TsQuery {
        TsQuery {
            start: "1h-ago".to_owned(),
            queries: subs,
            ..TsQuery::default()
        }
    }

    #[test]
    fn plan_dedups_identical_sub_queries() {
        let q = query(vec![sub("sum", "a"), sub("sum", "a"), sub("max", "a")]);
        let p = plan(&q, 10_000_000).unwrap();
        assert_eq!((p.start_ms, p.end_ms), (10_000_000 - 3_600_000, 10_000_000));
        let indexes: Vec<usize> = p.subs.iter().map(|s| s.sub.index).collect();
        assert_eq!(indexes, vec![0, 2]);
    }

    #[test]
    fn plan_validation_messages() {
        let msg = |q: TsQuery| plan(&q, 10_000_000).unwrap_err().to_string();
        assert_eq!(msg(query(vec![])), "Missing queries");
        assert_eq!(
            msg(query(vec![sub("", "a")])),
            "Missing the aggregation function"
        );
        assert_eq!(
            msg(query(vec![sub("nope", "a")])),
            "No such aggregation function: nope"
        );
        assert_eq!(
            msg(query(vec![sub("sum", "")])),
            "Missing the metric or tsuids, provide at least one"
        );
        let mut s = sub("sum", "a");
        s.downsample = Some("1m-".to_owned());
        assert_eq!(msg(query(vec![s])), "No such downsampling function: ");
        // Names are case-sensitive, as in OpenTSDB.
        assert_eq!(
            msg(query(vec![sub("SUM", "a")])),
            "No such aggregation function: SUM"
        );
        assert!(plan(&query(vec![sub("squareSum", "a")]), 10_000_000).is_ok());
    }
}
