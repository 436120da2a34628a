//! Parquet export of a query result (`GET /api/export?format=parquet`, `strata export`).
//!
//! ## Layout
//! One row per point of every result object of the query (the points of the JSON answer at full
//! millisecond resolution), in result order, then time order. Columns:
//! - `metric`: string, not null;
//! - one string column per tag key found in any result's `tags`, named by the key, sorted by
//!   name, null where the result lacks the key (aggregated keys are absent from `tags`);
//! - `timestamp`: `Timestamp(Millisecond, UTC)` (Parquet `TIMESTAMP(MILLIS, isAdjustedToUTC)`);
//! - `value`: double, every point (NaN kept as NaN);
//! - `value_int`: int64, nullable: the exact integer where the point is an integer (integers
//!   past 2^53 included), null where it is a double.
//!
//! A tag key equal to one of the fixed column names gets a `tag.` prefix. Snappy compression.

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use strata_tsdb::Tsdb;

use crate::endpoint::{QueryMethod, parse_request};
use crate::error::{Error, Result};
use crate::exec::{ResultGroup, execute_with_limits};
use crate::model::QueryLimits;
use strata_tsdb::Value;

/// What an export wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportSummary {
    /// Rows (points) written.
    pub rows: u64,
    /// Result objects (output series) exported.
    pub series: u64,
    /// Points written to the `value_int` column (integers).
    pub int_rows: u64,
}

/// The media type of a Parquet file.
pub const PARQUET_CONTENT_TYPE: &str = "application/vnd.apache.parquet";

const FIXED_COLUMNS: [&str; 4] = ["metric", "timestamp", "value", "value_int"];

fn encode_error(e: impl std::fmt::Display) -> Error {
    Error::Encode(e.to_string())
}

/// Runs a query given in any `/api/query` form (GET query string, POST/DELETE JSON body) and
/// writes its result to `writer` as a Parquet file (layout in the module docs). Query errors
/// are returned before anything is written; `Error::Encode` means the writer failed part-way.
pub fn export_parquet<W: Write + Send>(
    tsdb: &Tsdb,
    method: QueryMethod,
    query_string: &str,
    body: &[u8],
    now_ms: i64,
    limits: &QueryLimits,
    writer: W,
) -> Result<ExportSummary> {
    let q = parse_request(method, query_string, body)?;
    let results = execute_with_limits(tsdb, &q, now_ms, limits)?;
    write_parquet(&results, writer)
}

/// Writes query results as a Parquet file (layout in the module docs).
pub fn write_parquet<W: Write + Send>(results: &[ResultGroup], writer: W) -> Result<ExportSummary> {
    write_parquet_with_progress(results, writer, &mut |_| {})
}

/// As [`write_parquet`], calling `progress` with the points written so far after each series.
pub fn write_parquet_with_progress<W: Write + Send>(
    results: &[ResultGroup],
    writer: W,
    progress: &mut dyn FnMut(u64),
) -> Result<ExportSummary> {
    let keys: BTreeSet<&str> = results
        .iter()
        .flat_map(|r| r.tags.keys().map(String::as_str))
        .collect();
    let keys: Vec<&str> = keys.into_iter().collect();
    let mut fields = vec![Field::new("metric", DataType::Utf8, false)];
    for k in &keys {
        let name = if FIXED_COLUMNS.contains(k) {
            format!("tag.{k}")
        } else {
            (*k).to_owned()
        };
        fields.push(Field::new(name, DataType::Utf8, true));
    }
    fields.push(Field::new(
        "timestamp",
        DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
        false,
    ));
    fields.push(Field::new("value", DataType::Float64, false));
    fields.push(Field::new("value_int", DataType::Int64, true));
    let schema = Arc::new(Schema::new(fields));
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut w = ArrowWriter::try_new(writer, schema.clone(), Some(props)).map_err(encode_error)?;
    let mut summary = ExportSummary::default();
    for r in results {
        summary.series += 1;
        let n = r.points.len();
        if n == 0 {
            continue;
        }
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(keys.len() + 4);
        columns.push(Arc::new(StringArray::from_iter_values(
            std::iter::repeat_n(r.metric.as_str(), n),
        )));
        for k in &keys {
            let v = r.tags.get(*k).map(String::as_str);
            columns.push(Arc::new(std::iter::repeat_n(v, n).collect::<StringArray>()));
        }
        let ts: TimestampMillisecondArray = r
            .points
            .iter()
            .map(|(t, _)| *t)
            .collect::<Vec<i64>>()
            .into();
        columns.push(Arc::new(ts.with_timezone("UTC")));
        columns.push(Arc::new(
            r.points
                .iter()
                .map(|(_, v)| v.as_f64())
                .collect::<Float64Array>(),
        ));
        let ints: Int64Array = r
            .points
            .iter()
            .map(|(_, v)| match v {
                Value::Int(i) => Some(*i),
                Value::Float(_) => None,
            })
            .collect();
        summary.int_rows += (n - ints.null_count()) as u64;
        columns.push(Arc::new(ints));
        let batch = RecordBatch::try_new(schema.clone(), columns).map_err(encode_error)?;
        w.write(&batch).map_err(encode_error)?;
        summary.rows += n as u64;
        progress(summary.rows);
    }
    w.close().map_err(encode_error)?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::groupby::TagMap;
    use arrow_array::Array;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    fn group(metric: &str, tags: &[(&str, &str)], points: Vec<(i64, Value)>) -> ResultGroup {
        ResultGroup {
            query_index: 0,
            metric: metric.to_owned(),
            tags: tags
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<TagMap>(),
            aggregate_tags: vec![],
            tsuids: vec![],
            series: 1,
            points,
            nan_as_null: false,
            raw_points: 0,
            annotations: Vec::new(),
            global_annotations: Vec::new(),
        }
    }

    fn read(bytes: Vec<u8>) -> std::result::Result<Vec<RecordBatch>, Box<dyn std::error::Error>> {
        let reader =
            ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))?.build()?;
        Ok(reader.collect::<std::result::Result<Vec<_>, _>>()?)
    }

    #[test]
    fn columns_nulls_and_value_int() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let results = vec![
            group(
                "m",
                &[("host", "a"), ("value", "x")],
                vec![(1_000, Value::Int(1)), (2_000, Value::Int(-3))],
            ),
            group("m", &[("dc", "d1")], vec![(1_500, Value::Int(7))]),
        ];
        let mut out = Vec::new();
        let s = write_parquet(&results, &mut out)?;
        assert_eq!((s.rows, s.series, s.int_rows), (3, 2, 3));
        let batches = read(out)?;
        let schema = batches[0].schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            [
                "metric",
                "dc",
                "host",
                "tag.value",
                "timestamp",
                "value",
                "value_int"
            ]
        );
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        assert_eq!(rows, 3);
        let b = arrow_select_concat(&batches);
        let dc = b
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or("dc")?;
        assert!(dc.is_null(0) && dc.is_null(1) && dc.value(2) == "d1");
        let ts = b
            .column(4)
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .ok_or("ts")?;
        assert_eq!(ts.values(), &[1_000, 2_000, 1_500]);
        let ints = b
            .column(6)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or("int")?;
        assert_eq!(ints.values(), &[1, -3, 7]);
        Ok(())
    }

    #[test]
    fn value_int_is_null_for_doubles_and_exact_for_integers()
    -> std::result::Result<(), Box<dyn std::error::Error>> {
        let results = vec![group(
            "m",
            &[],
            vec![
                (1_000, Value::Int(9_007_199_254_740_993)),
                (2_000, Value::Float(2.5)),
                (3_000, Value::Int(i64::MIN)),
            ],
        )];
        let mut out = Vec::new();
        let s = write_parquet(&results, &mut out)?;
        assert_eq!(s.int_rows, 2);
        let batches = read(out)?;
        assert_eq!(batches[0].num_columns(), 4);
        let v = batches[0]
            .column(2)
            .as_any()
            .downcast_ref::<Float64Array>()
            .ok_or("value")?;
        assert_eq!(v.values(), &[9_007_199_254_740_992.0, 2.5, i64::MIN as f64]);
        let ints = batches[0]
            .column(3)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or("value_int")?;
        let got: Vec<Option<i64>> = (0..3)
            .map(|i| ints.is_valid(i).then(|| ints.value(i)))
            .collect();
        assert_eq!(got, [Some(9_007_199_254_740_993), None, Some(i64::MIN)]);
        Ok(())
    }

    /// The test data fits one row group, so the reader yields one batch.
    fn arrow_select_concat(batches: &[RecordBatch]) -> RecordBatch {
        assert_eq!(batches.len(), 1);
        batches[0].clone()
    }
}
