//! Entry points for the fuzz targets in `fuzz/` and their proptest stand-ins (feature
//! `testing`): the checks a parsed query passes before it reads anything.

use crate::error::Result;
use crate::model::TsQuery;

/// Validates a parsed query as `/api/query` does before reading storage, in OpenTSDB's order:
/// timezone, start and end times, aggregators, metric or TSUIDs, downsample specs.
pub fn validate_query(q: &TsQuery, now_ms: i64) -> Result<()> {
    crate::exec::plan(q, now_ms).map(drop)
}
