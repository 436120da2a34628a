//! strata-query: the OpenTSDB query model, parsers, execution pipeline and query endpoints.
//!
//! The pure computational stages of the pipeline (OpenTSDB docs: `user_guide/query`), each a
//! separate module over in-memory series `&[(i64 /* ts ms */, Value)]` (tsdb's `Value`):
//! `time` (start/end parsing) → `downsample` → `rate` → `aggregate` (cross-series, with the
//! aggregator's interpolation), with `aggregator` defining the 35 aggregators and `groupby`
//! partitioning series and computing `tags`/`aggregateTags`; `window` gives the range to read.
//!
//! `/api/query` end to end: `parse` (POST JSON, GET `m=`/`tsuid=`) builds a `model::TsQuery`,
//! `exec` validates it and runs the stages over data read from the tsdb, `output` writes OpenTSDB's
//! JSON, and `endpoint::handle_query` ties them together for the server (no HTTP types here).
//! `arrow` writes the same result as an Arrow IPC stream, `export` as a Parquet file, and
//! `deadline` enforces the query timeout.
//!
//! `promql` is the Prometheus read path: PromQL over the same tsdb, and the `/api/v1/query`,
//! `/api/v1/query_range`, label and series endpoints as typed functions.

mod aggregate;
mod aggregator;
mod arrow;
mod deadline;
mod downsample;
mod endpoint;
mod error;
mod exec;
mod export;
mod groupby;
mod model;
mod num;
mod output;
mod parse;
mod promql;
mod rate;
#[cfg(feature = "testing")]
mod testing;
mod time;
mod window;

pub use aggregate::aggregate;
pub use aggregator::{Aggregator, Estimator, Interpolation, aggregator_names};
pub use arrow::{ARROW_SERIES_METADATA, ARROW_STREAM_CONTENT_TYPE, render_arrow};
pub use downsample::{CalendarUnit, DownsampleSpec, FillPolicy, Interval, downsample};
pub use endpoint::{
    JSON_CONTENT_TYPE, QueryMethod, QueryRequest, QueryResponse, handle_query, parse_request,
    run_inline,
};
pub use error::{Error, ErrorKind, Result};
pub use exec::{ResultGroup, execute, execute_with_limits};
pub use export::{
    ExportSummary, PARQUET_CONTENT_TYPE, export_parquet, write_parquet, write_parquet_with_progress,
};
pub use groupby::{Group, GroupTags, SeriesTags, TagMap, group_series, group_tags};
pub use model::{
    DEFAULT_QUERY_THREADS, DEFAULT_QUERY_TIMEOUT, FilterSpec, QueryLimits, SubQuery, TsQuery,
};
pub use num::Point;
pub use output::{annotation_json, error_body, render};
pub use parse::{parse_get, parse_json, parse_m, parse_query_string, parse_tsuid_param};
pub use promql::{
    DEFAULT_LOOKBACK_MS, PromQuery, PromRequest, PromResponse, PromSample, PromSeries, PromValue,
    handle_prometheus, prometheus_claims, promql_eval,
};
pub use rate::{RateOptions, rate};
#[cfg(feature = "testing")]
pub use testing::validate_query;
pub use time::{parse_duration, parse_time, parse_time_range};
pub use window::scan_window;
