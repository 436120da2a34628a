//! Query execution (OpenTSDB docs: `user_guide/query (order of operations)`): validate, resolve,
//! read the scan window from the tsdb, then per series downsample → rate, group, aggregate with
//! interpolation, and compute `tags`/`aggregateTags`.
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
use strata_tsdb::{Annotation, Filter, Tsdb, UidKind};

use crate::aggregate::aggregate;
use crate::aggregator::Aggregator;
use crate::deadline::Deadline;
use crate::downsample::{DownsampleSpec, FillPolicy};
use crate::error::{Error, Result};
use crate::groupby::{TagMap, group_series, group_tags};
use crate::model::{QueryLimits, SubQuery, TsQuery};
use crate::num::Point;
use crate::time::parse_time_range;
use crate::window::scan_window;

mod resolve;
mod series;

use resolve::uid_key;
pub(crate) use resolve::{Resolved, resolve};
pub(crate) use series::read_parts;
use series::{Stage, read_and_process};

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
    /// The group's TSUIDs in hex, sorted, when the query shows them (`showTSUIDs`) or reads
    /// the series' annotations; empty otherwise, as a million series' hex strings are a
    /// hundred megabytes that nothing reads.
    pub tsuids: Vec<String>,
    /// How many series the group holds.
    pub series: usize,
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

/// Aggregator names are case-sensitive, as in OpenTSDB (`SUM` is unknown, OpenTSDB docs:
/// `user_guide/query/aggregators`).
fn find_aggregator(name: &str) -> Result<Aggregator> {
    if name.is_empty() {
        return Err(Error::bad_request("Missing the aggregation function"));
    }
    Aggregator::from_name(name)
        .map_err(|_| Error::bad_request(format!("No such aggregation function: {name}")))
}

/// Validates a query in OpenTSDB's order (OpenTSDB docs: `api_http/query`) and de-duplicates
/// identical sub-queries.
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
            (q.delete, *series_hours, wants_tsuids(tsdb, q)),
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

/// Whether a query's results need their series' TSUIDs: to show them, or to find the series'
/// annotations (see [`attach_annotations`]).
fn wants_tsuids(tsdb: &Tsdb, q: &TsQuery) -> bool {
    q.show_tsuids || (!q.delete && !q.no_annotations && tsdb.has_annotations())
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

#[allow(
    clippy::too_many_arguments,
    reason = "the pieces of one query's state, passed down one level"
)]
fn run_sub(
    tsdb: &Tsdb,
    plan: &Plan,
    sp: &SubPlan,
    (ids, filters): (&RoaringBitmap, &[Filter]),
    (delete, request_series_hours, want_tsuids): (bool, u64, bool),
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
                tsuids: if want_tsuids {
                    vec![s.tsuid.to_hex()]
                } else {
                    Vec::new()
                },
                series: 1,
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
    let tags: Vec<&[(String, String)]> = series.iter().map(|s| s.tags.as_slice()).collect();
    let groups: Vec<Vec<usize>> = {
        let mut keys: Vec<&str> = Vec::new();
        for f in filters.iter().filter(|f| f.group_by()) {
            if !keys.contains(&f.tagk()) {
                keys.push(f.tagk());
            }
        }
        // Group-by keys in tag-key UID order; groups by the bytes of their value UIDs.
        keys.sort_by_cached_key(|k| uid_key(tsdb, UidKind::Tagk, k));
        let mut groups = group_series(&tags, &keys);
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
        let gt = group_tags(members.iter().map(|i| tags[*i]));
        let mut aggregate_tags = gt.aggregate_tags;
        aggregate_tags.sort_by_cached_key(|k| uid_key(tsdb, UidKind::Tagk, k));
        let mut tsuids: Vec<String> = if want_tsuids {
            members.iter().map(|i| series[*i].tsuid.to_hex()).collect()
        } else {
            Vec::new()
        };
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
            series: members.len(),
            points,
            nan_as_null,
            raw_points: members.iter().map(|i| series[*i].raw_points).sum(),
            annotations: Vec::new(),
            global_annotations: Vec::new(),
        });
    }
    Ok(())
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
