//! The parsed form of an `/api/query` request (OpenTSDB docs: `api_http/query`), shared by the JSON
//! and query-string parsers.
//!
//! Fields keep the request's text where OpenTSDB validates late (times, aggregator, downsample), so
//! the parsers stay simple and `validate` reports OpenTSDB's messages in OpenTSDB's order.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::rate::RateOptions;

/// A whole query: the time range, output flags and the sub-queries.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TsQuery {
    /// Start time as sent (relative, absolute or epoch), required.
    pub start: String,
    /// End time as sent; `None` or empty means now.
    pub end: Option<String>,
    /// Time zone name for absolute dates and calendar downsampling (JSON only).
    pub timezone: Option<String>,
    /// Emit millisecond keys (`msResolution`, GET `ms`).
    pub ms_resolution: bool,
    /// Emit each group's TSUIDs (`showTSUIDs`).
    pub show_tsuids: bool,
    /// Echo each sub-query as `query` (`showQuery`).
    pub show_query: bool,
    /// Append a `statsSummary` element (`showSummary`).
    pub show_summary: bool,
    /// Add a `stats` object to each result (`showStats`).
    pub show_stats: bool,
    /// Skip the series annotations in results (`noAnnotations`).
    pub no_annotations: bool,
    /// Include the global annotations of the range in every result (`globalAnnotations`).
    pub global_annotations: bool,
    /// Delete the data read (`delete`, or the DELETE verb).
    pub delete: bool,
    /// Calendar-aligned downsampling for every sub-query (`useCalendar`).
    pub use_calendar: bool,
    /// Emit `dps` as `[[ts, v], ...]` (the `arrays` query-string flag).
    pub arrays: bool,
    /// The sub-queries, in request order.
    pub queries: Vec<SubQuery>,
}

/// One tag filter as sent (`{"type","tagk","filter","groupBy"}` or converted from tags syntax).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FilterSpec {
    /// Filter type name (`literal_or`, `wildcard`, ...).
    pub kind: String,
    /// Tag key.
    pub tagk: String,
    /// Filter expression.
    pub filter: String,
    /// Whether results are grouped by this key.
    pub group_by: bool,
}

/// One sub-query: a metric (or TSUIDs), an aggregator and optional downsample, rate and filters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SubQuery {
    /// Aggregator name as sent.
    pub aggregator: String,
    /// Metric name (empty when TSUIDs are given).
    pub metric: String,
    /// TSUIDs in hex; win over `metric` when both are given.
    pub tsuids: Vec<String>,
    /// Downsample specifier as sent.
    pub downsample: Option<String>,
    /// Whether to convert to per-second rates.
    pub rate: bool,
    /// Rate options.
    pub rate_options: RateOptions,
    /// Tag filters: explicit ones followed by the ones converted from `tags`.
    pub filters: Vec<FilterSpec>,
    /// The legacy `tags` map as sent (already converted into `filters`).
    pub tags: BTreeMap<String, String>,
    /// Only series whose tag keys are exactly the filtered keys.
    pub explicit_tags: bool,
    /// Histogram percentiles (histogram queries are not supported; a non-empty list is refused).
    pub percentiles: Vec<f64>,
    /// The sub-query's position in the request (echoed as `query.index`).
    pub index: usize,
}

/// Limits applied while executing a query. Zero means unlimited; the default allows everything but
/// deletes, and stops a query after [`DEFAULT_QUERY_TIMEOUT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryLimits {
    /// Most series one sub-query may read.
    pub max_series: usize,
    /// Most raw data points one query may read.
    pub max_data_points: usize,
    /// Whether `delete` is allowed (OpenTSDB's `tsd.http.query.allow_delete`).
    pub allow_delete: bool,
    /// Longest a query may run (OpenTSDB's `tsd.query.timeout`); `None` means no limit. Checked
    /// between stages and series, so a query may overrun it by one series' work.
    pub timeout: Option<Duration>,
    /// Most threads one sub-query reads and processes its series on; 0 means one per core.
    pub threads: usize,
}

/// The default [`QueryLimits::timeout`]: a minute, long past any interactive use, short enough
/// that a runaway query gives its thread back.
pub const DEFAULT_QUERY_TIMEOUT: Duration = Duration::from_secs(60);

/// The default [`QueryLimits::threads`]: one per core. Series are downsampled as they are
/// decoded, so a read split over the cores holds no more raw points than one thread's would, and
/// a large read finishes sooner. Small reads stay on one thread (`PARALLEL_MIN_SERIES_HOURS`).
pub const DEFAULT_QUERY_THREADS: usize = 0;

impl Default for QueryLimits {
    fn default() -> Self {
        QueryLimits {
            max_series: 0,
            max_data_points: 0,
            allow_delete: false,
            timeout: Some(DEFAULT_QUERY_TIMEOUT),
            threads: DEFAULT_QUERY_THREADS,
        }
    }
}

/// Converts one legacy tag value (JSON `tags`, URI braces) into a filter (OpenTSDB docs:
/// `user_guide/query/filters`): `*` is a grouping wildcard, a value with `*` a case-insensitive
/// wildcard, `type(expr)` that filter, anything else `literal_or`.
pub(crate) fn tag_to_filter(tagk: &str, value: &str, group_by: bool) -> FilterSpec {
    let (kind, filter) = if value == "*" {
        ("wildcard".to_owned(), "*".to_owned())
    } else if let Some(open) = value.find('(')
        && value.ends_with(')')
    {
        (
            value[..open].to_ascii_lowercase(),
            value[open + 1..value.len() - 1].to_owned(),
        )
    } else if value.contains('(') {
        // Unclosed: keep the whole text as the type so the error names it.
        (value.to_owned(), String::new())
    } else if value.contains('*') {
        ("iwildcard".to_owned(), value.to_owned())
    } else {
        ("literal_or".to_owned(), value.to_owned())
    };
    FilterSpec {
        kind,
        tagk: tagk.to_owned(),
        filter,
        group_by,
    }
}
