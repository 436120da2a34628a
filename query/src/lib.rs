//! strata-query: the OpenTSDB query model, parsers, execution pipeline and query endpoints.
//!
//! The pure computational stages of the pipeline (§e of the spec), each a separate module over
//! in-memory series `&[(i64 /* ts ms */, Num)]`:
//! `time` (start/end parsing) → `downsample` → `rate` → `aggregate` (cross-series, with the
//! aggregator's interpolation), with `aggregator` defining the 35 aggregators and `groupby`
//! partitioning series and computing `tags`/`aggregateTags`; `window` gives the range to read.

mod aggregate;
mod aggregator;
mod downsample;
mod error;
mod groupby;
mod num;
mod rate;
mod time;
mod window;

pub use aggregate::aggregate;
pub use aggregator::{Aggregator, Estimator, Interpolation, aggregator_names};
pub use downsample::{CalendarUnit, DownsampleSpec, FillPolicy, Interval, downsample};
pub use error::{Error, ErrorKind, Result};
pub use groupby::{Group, GroupTags, TagMap, group_series, group_tags};
pub use num::{Num, Point};
pub use rate::{RateOptions, rate};
pub use time::{parse_duration, parse_time, parse_time_range};
pub use window::scan_window;
