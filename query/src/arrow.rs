//! The `/api/query` result as an Arrow IPC stream (`Accept: application/vnd.apache.arrow.stream`
//! or `?format=arrow`).
//!
//! ## Layout
//! - One schema for the whole stream, three columns:
//!   `timestamp: Timestamp(Millisecond, "UTC")` (not null), `value: Float64` (nullable) and
//!   `value_int: Int64` (nullable).
//! - `value` holds every point as a double. `value_int` holds the exact integer where the point
//!   is an integer and is null where it is a double, so a reader that needs values exactly as
//!   written (integers past 2^53 included) takes `value_int` when it is set, `value` otherwise.
//! - One record batch per result object of the JSON answer, in the same order; a result without
//!   points is an empty batch, so batch `i` is always JSON element `i`.
//! - Schema metadata `strata.series`: a JSON array with one object per batch,
//!   `{"metric", "tags", "aggregateTags", "queryIndex"}` plus `"tsuids"` when `showTSUIDs` is set;
//!   `strata.version` is `1`.
//! - Points are the JSON answer's: without `msResolution` the last point of each second, stamped at
//!   the second's start (in ms). NaN stays NaN in `value`, except with fill policy `null`, where it
//!   is a null, as the JSON writes `null`.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{DataType, Field, Schema, TimeUnit};

use crate::error::{Error, Result};
use crate::exec::ResultGroup;
use crate::model::TsQuery;
use crate::output::keyed_points;
use strata_tsdb::Value;

/// The media type of an Arrow IPC stream.
pub const ARROW_STREAM_CONTENT_TYPE: &str = "application/vnd.apache.arrow.stream";

/// Schema metadata key of the per-batch series descriptions.
pub const ARROW_SERIES_METADATA: &str = "strata.series";

fn encode_error(e: impl std::fmt::Display) -> Error {
    Error::Encode(e.to_string())
}

fn series_metadata(q: &TsQuery, results: &[ResultGroup]) -> Result<String> {
    let series: Vec<serde_json::Value> = results
        .iter()
        .map(|r| {
            let mut o = serde_json::json!({
                "metric": r.metric,
                "tags": r.tags,
                "aggregateTags": r.aggregate_tags,
                "queryIndex": r.query_index,
            });
            if q.show_tsuids {
                o["tsuids"] = serde_json::json!(r.tsuids);
            }
            o
        })
        .collect();
    serde_json::to_string(&series).map_err(encode_error)
}

/// Writes `results` of query `q` as an Arrow IPC stream (layout in the module docs).
pub fn render_arrow(q: &TsQuery, results: &[ResultGroup]) -> Result<Vec<u8>> {
    let metadata: std::collections::HashMap<String, String> = [
        (
            ARROW_SERIES_METADATA.to_owned(),
            series_metadata(q, results)?,
        ),
        ("strata.version".to_owned(), "1".to_owned()),
    ]
    .into_iter()
    .collect();
    let schema = Arc::new(Schema::new_with_metadata(
        vec![
            Field::new(
                "timestamp",
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                false,
            ),
            Field::new("value", DataType::Float64, true),
            Field::new("value_int", DataType::Int64, true),
        ],
        metadata,
    ));
    let mut out = Vec::new();
    let mut writer = StreamWriter::try_new(&mut out, &schema).map_err(encode_error)?;
    for r in results {
        let points = keyed_points(&r.points, q.ms_resolution);
        let scale = if q.ms_resolution { 1 } else { 1000 };
        let ts: TimestampMillisecondArray = points
            .iter()
            .map(|(t, _)| t.saturating_mul(scale))
            .collect::<Vec<i64>>()
            .into();
        let values: Float64Array = points
            .iter()
            .map(|(_, v)| {
                let f = v.as_f64();
                (!(r.nan_as_null && f.is_nan())).then_some(f)
            })
            .collect();
        let ints: Int64Array = points
            .iter()
            .map(|(_, v)| match v {
                Value::Int(i) => Some(*i),
                Value::Float(_) => None,
            })
            .collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(ts.with_timezone("UTC")),
            Arc::new(values),
            Arc::new(ints),
        ];
        let batch = RecordBatch::try_new(schema.clone(), columns).map_err(encode_error)?;
        writer.write(&batch).map_err(encode_error)?;
    }
    writer.finish().map_err(encode_error)?;
    drop(writer);
    Ok(out)
}

/// Whether a request asks for Arrow: `format=arrow` in the query string, or an `Accept` header
/// naming the Arrow stream type.
pub(crate) fn wants_arrow(params: &[(String, String)], accept: Option<&str>) -> bool {
    params
        .iter()
        .any(|(k, v)| k == "format" && v.eq_ignore_ascii_case("arrow"))
        || accept.is_some_and(|a| {
            a.split(',').any(|t| {
                t.split(';')
                    .next()
                    .is_some_and(|m| m.trim().eq_ignore_ascii_case(ARROW_STREAM_CONTENT_TYPE))
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;
    use arrow_ipc::reader::StreamReader;

    fn group(points: Vec<(i64, Value)>, nan_as_null: bool) -> ResultGroup {
        ResultGroup {
            query_index: 0,
            metric: "m".to_owned(),
            tags: [("host".to_owned(), "a".to_owned())].into_iter().collect(),
            aggregate_tags: vec!["dc".to_owned()],
            tsuids: vec!["000001".to_owned()],
            series: 1,
            points,
            nan_as_null,
            raw_points: 0,
            annotations: Vec::new(),
            global_annotations: Vec::new(),
        }
    }

    #[test]
    fn batches_match_points() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let q = TsQuery {
            ms_resolution: true,
            ..TsQuery::default()
        };
        let results = vec![
            group(
                vec![
                    (1_000, Value::Int(1)),
                    (1_500, Value::Float(2.5)),
                    (1_700, Value::Int(i64::MIN + 1)),
                ],
                false,
            ),
            group(vec![], false),
            group(vec![(2_000, Value::Float(f64::NAN))], true),
        ];
        let bytes = render_arrow(&q, &results)?;
        let reader = StreamReader::try_new(bytes.as_slice(), None)?;
        let meta = reader
            .schema()
            .metadata()
            .get(ARROW_SERIES_METADATA)
            .cloned();
        let series: serde_json::Value = serde_json::from_str(&meta.unwrap_or_default())?;
        assert_eq!(series[0]["tags"]["host"], "a");
        assert_eq!(series[0]["aggregateTags"][0], "dc");
        assert!(series[0].get("tsuids").is_none());
        let batches: Vec<RecordBatch> = reader.collect::<std::result::Result<_, _>>()?;
        assert_eq!(batches.len(), 3);
        assert_eq!(batches[1].num_rows(), 0);
        let ts = batches[0]
            .column(0)
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .ok_or("ts type")?;
        assert_eq!(ts.values(), &[1_000, 1_500, 1_700]);
        let v = batches[0]
            .column(1)
            .as_any()
            .downcast_ref::<Float64Array>()
            .ok_or("value type")?;
        assert_eq!(v.values(), &[1.0, 2.5, (i64::MIN + 1) as f64]);
        // Integers exactly, past 2^53 too; null for the double.
        let ints = batches[0]
            .column(2)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or("value_int type")?;
        assert_eq!(
            (0..3)
                .map(|i| ints.is_valid(i).then(|| ints.value(i)))
                .collect::<Vec<_>>(),
            [Some(1), None, Some(i64::MIN + 1)]
        );
        // fill policy null: NaN is a null
        assert!(batches[2].column(1).is_null(0));
        Ok(())
    }

    #[test]
    fn accept_and_format() {
        let p = |s: &str| crate::parse::parse_query_string(s);
        assert!(wants_arrow(&p("start=1&format=arrow"), None));
        assert!(!wants_arrow(&p("start=1&format=json"), None));
        assert!(wants_arrow(
            &[],
            Some("text/html, application/vnd.apache.arrow.stream;q=0.9")
        ));
        assert!(!wants_arrow(&[], Some("application/json")));
        assert!(!wants_arrow(&[], None));
    }
}
