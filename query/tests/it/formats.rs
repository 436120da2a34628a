//! The other answer forms of `/api/query`: the Arrow IPC stream and the Parquet export must hold
//! the same points as the JSON answer; the timeout answers 408 with OpenTSDB's error JSON.

use std::collections::BTreeMap;
use std::time::Duration;

use arrow_array::{Array, Float64Array, Int64Array, StringArray, TimestampMillisecondArray};
use arrow_ipc::reader::StreamReader;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value as Json;
use strata_query::{
    ARROW_SERIES_METADATA, ARROW_STREAM_CONTENT_TYPE, JSON_CONTENT_TYPE, QueryLimits, QueryMethod,
    QueryRequest, export_parquet, handle_query, run_inline,
};
use strata_tsdb::{PointRef, Tsdb, TsdbOptions, Value};

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// 2013-01-01T00:00:00Z in seconds.
const T: i64 = 1_356_998_400;
const NOW_MS: i64 = (T + 86_400) * 1000;

/// Three series of `m` over two hours: web01/web02 in lga with integers, web03 in sjc with
/// floats (so a `none` query mixes both, and `sum` by dc gives two groups).
fn fixture() -> Result<(tempfile::TempDir, Tsdb), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let tsdb = Tsdb::open(dir.path(), TsdbOptions::default())?;
    let series: [(&str, &str, bool); 3] = [
        ("web01", "lga", true),
        ("web02", "lga", true),
        ("web03", "sjc", false),
    ];
    for (n, (host, dc, int)) in series.iter().enumerate() {
        let tags = [("host", *host), ("dc", *dc)];
        let points: Vec<PointRef<'_>> = (0..720i64)
            .map(|i| PointRef {
                metric: "m",
                tags: &tags,
                timestamp: (T + i * 10 + n as i64) * 1000 + i % 7,
                value: if *int {
                    Value::Int(i * 3 - n as i64)
                } else {
                    Value::Float(i as f64 / 4.0)
                },
            })
            .collect();
        for r in tsdb.write(&points) {
            r?;
        }
    }
    Ok((dir, tsdb))
}

fn body(query: &str, ms: bool) -> String {
    format!(
        "{{\"start\":{T},\"end\":{},\"msResolution\":{ms},\"queries\":[{query}]}}",
        T + 7200
    )
}

/// The JSON answer as (metric, tags, [(ts ms, value)]) per result.
type Series = (String, BTreeMap<String, String>, Vec<(i64, f64)>);

fn json_series(body: &[u8], ms: bool) -> Result<Vec<Series>, Box<dyn std::error::Error>> {
    let v: Json = serde_json::from_slice(body)?;
    let mut out = Vec::new();
    for r in v.as_array().ok_or("array")? {
        let tags: BTreeMap<String, String> = serde_json::from_value(r["tags"].clone())?;
        let mut points = Vec::new();
        for (k, v) in r["dps"].as_object().ok_or("dps")? {
            let t: i64 = k.parse()?;
            points.push((
                if ms { t } else { t * 1000 },
                v.as_f64().unwrap_or(f64::NAN),
            ));
        }
        points.sort_by_key(|p| p.0);
        out.push((
            r["metric"].as_str().ok_or("metric")?.to_owned(),
            tags,
            points,
        ));
    }
    Ok(out)
}

fn arrow_series(body: &[u8]) -> Result<Vec<Series>, Box<dyn std::error::Error>> {
    let reader = StreamReader::try_new(body, None)?;
    let meta = reader
        .schema()
        .metadata()
        .get(ARROW_SERIES_METADATA)
        .cloned()
        .ok_or("no series metadata")?;
    let described: Vec<Json> = serde_json::from_str(&meta)?;
    let mut out = Vec::new();
    for (batch, d) in reader.zip(described) {
        let batch = batch?;
        let ts = batch
            .column(0)
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .ok_or("timestamp column")?;
        let vs = batch
            .column(1)
            .as_any()
            .downcast_ref::<Float64Array>()
            .ok_or("value column")?;
        let points = ts.values().iter().copied().zip(vs.values().iter().copied());
        let tags: BTreeMap<String, String> = serde_json::from_value(d["tags"].clone())?;
        out.push((
            d["metric"].as_str().ok_or("metric")?.to_owned(),
            tags,
            points.collect(),
        ));
    }
    Ok(out)
}

#[test]
fn arrow_stream_holds_the_json_result() -> TestResult {
    let (_dir, tsdb) = fixture()?;
    let limits = QueryLimits::default();
    let queries = [
        r#"{"aggregator":"none","metric":"m"}"#,
        r#"{"aggregator":"sum","metric":"m","downsample":"1m-avg","tags":{"dc":"*"}}"#,
        r#"{"aggregator":"max","metric":"m","rate":true}"#,
    ];
    for q in queries {
        for ms in [false, true] {
            let b = body(q, ms);
            let json = handle_query(
                &tsdb,
                &QueryRequest {
                    method: QueryMethod::Post,
                    query_string: "",
                    accept: None,
                    body: b.as_bytes(),
                    now_ms: NOW_MS,
                },
                &limits,
                &run_inline,
            );
            assert_eq!((json.status, json.content_type), (200, JSON_CONTENT_TYPE));
            let by_accept = handle_query(
                &tsdb,
                &QueryRequest {
                    method: QueryMethod::Post,
                    query_string: "",
                    accept: Some("application/vnd.apache.arrow.stream"),
                    body: b.as_bytes(),
                    now_ms: NOW_MS,
                },
                &limits,
                &run_inline,
            );
            let by_format = handle_query(
                &tsdb,
                &QueryRequest {
                    method: QueryMethod::Post,
                    query_string: "format=arrow",
                    accept: None,
                    body: b.as_bytes(),
                    now_ms: NOW_MS,
                },
                &limits,
                &run_inline,
            );
            assert_eq!(by_accept, by_format);
            assert_eq!(
                (by_accept.status, by_accept.content_type),
                (200, ARROW_STREAM_CONTENT_TYPE)
            );
            let want = json_series(&json.body, ms)?;
            assert!(!want.is_empty() && want.iter().all(|s| !s.2.is_empty()));
            assert_eq!(arrow_series(&by_accept.body)?, want, "{q} ms={ms}");
        }
    }
    // Errors stay JSON.
    let bad = handle_query(
        &tsdb,
        &QueryRequest {
            method: QueryMethod::Post,
            query_string: "format=arrow",
            accept: None,
            body: body(r#"{"aggregator":"nope","metric":"m"}"#, false).as_bytes(),
            now_ms: NOW_MS,
        },
        &limits,
        &run_inline,
    );
    assert_eq!((bad.status, bad.content_type), (400, JSON_CONTENT_TYPE));
    Ok(())
}

#[test]
fn parquet_export_holds_the_json_points() -> TestResult {
    let (dir, tsdb) = fixture()?;
    let limits = QueryLimits::default();
    for (q, ints) in [
        (
            r#"{"aggregator":"none","metric":"m","tags":{"dc":"lga"}}"#,
            true,
        ),
        (r#"{"aggregator":"none","metric":"m"}"#, false),
    ] {
        let b = body(q, true);
        let (status, json) =
            crate::answer(&tsdb, QueryMethod::Post, "", b.as_bytes(), NOW_MS, &limits);
        assert_eq!(status, 200);
        let want = json_series(&json, true)?;
        let path = dir.path().join("export.parquet");
        let file = std::fs::File::create(&path)?;
        let summary = export_parquet(
            &tsdb,
            QueryMethod::Post,
            "",
            b.as_bytes(),
            NOW_MS,
            &limits,
            file,
        )?;
        // The integer series' points are all in `value_int`.
        if ints {
            assert_eq!(summary.int_rows, summary.rows);
        }
        let mut int_rows = 0;
        let reader =
            ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path)?)?.build()?;
        let mut got: Vec<Series> = Vec::new();
        for batch in reader {
            let batch = batch?;
            let schema = batch.schema();
            let col = |name: &str| schema.index_of(name);
            let metric = batch
                .column(col("metric")?)
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or("metric")?;
            let host = batch
                .column(col("host")?)
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or("host")?;
            let dc = batch
                .column(col("dc")?)
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or("dc")?;
            let ts = batch
                .column(col("timestamp")?)
                .as_any()
                .downcast_ref::<TimestampMillisecondArray>()
                .ok_or("timestamp")?;
            let value = batch
                .column(col("value")?)
                .as_any()
                .downcast_ref::<Float64Array>()
                .ok_or("value")?;
            let value_int = batch
                .column(col("value_int")?)
                .as_any()
                .downcast_ref::<Int64Array>()
                .ok_or("value_int")?;
            for row in 0..batch.num_rows() {
                let tags: BTreeMap<String, String> = [("host", host), ("dc", dc)]
                    .into_iter()
                    .filter(|(_, a)| !a.is_null(row))
                    .map(|(k, a)| (k.to_owned(), a.value(row).to_owned()))
                    .collect();
                if value_int.is_valid(row) {
                    assert_eq!(value_int.value(row) as f64, value.value(row));
                    int_rows += 1;
                }
                let point = (ts.value(row), value.value(row));
                match got.last_mut() {
                    Some(s) if s.0 == metric.value(row) && s.1 == tags => s.2.push(point),
                    _ => got.push((metric.value(row).to_owned(), tags, vec![point])),
                }
            }
        }
        assert_eq!(
            summary.rows as usize,
            want.iter().map(|s| s.2.len()).sum::<usize>()
        );
        assert_eq!(int_rows, summary.int_rows);
        assert_eq!(got, want, "{q}");
    }
    Ok(())
}

#[test]
fn timeout_is_408_with_error_json() -> TestResult {
    let (_dir, tsdb) = fixture()?;
    let limits = QueryLimits {
        timeout: Some(Duration::ZERO),
        ..QueryLimits::default()
    };
    let b = body(r#"{"aggregator":"sum","metric":"m"}"#, false);
    let r = handle_query(
        &tsdb,
        &QueryRequest {
            method: QueryMethod::Post,
            query_string: "",
            accept: None,
            body: b.as_bytes(),
            now_ms: NOW_MS,
        },
        &limits,
        &run_inline,
    );
    assert_eq!((r.status, r.content_type), (408, JSON_CONTENT_TYPE));
    let v: Json = serde_json::from_slice(&r.body)?;
    assert_eq!(v["error"]["code"], 408);
    let msg = v["error"]["message"].as_str().ok_or("message")?;
    assert!(msg.contains("timed out"), "{msg}");
    // The same query with the default limits (60 s) answers.
    let r = handle_query(
        &tsdb,
        &QueryRequest {
            method: QueryMethod::Post,
            query_string: "",
            accept: None,
            body: b.as_bytes(),
            now_ms: NOW_MS,
        },
        &QueryLimits::default(),
        &run_inline,
    );
    assert_eq!(r.status, 200);
    // Export honours it too.
    let e = export_parquet(
        &tsdb,
        QueryMethod::Post,
        "",
        b.as_bytes(),
        NOW_MS,
        &limits,
        Vec::new(),
    );
    assert_eq!(e.map_err(|e| e.status()).err(), Some(408));
    Ok(())
}
