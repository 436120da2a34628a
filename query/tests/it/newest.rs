//! `all`-`last` downsampling takes a series' newest point from the series index when it lies
//! in the range, without a read: the answer must be the one a read gives.

use serde_json::Value as Json;
use strata_query::QueryLimits;

use crate::post_query;
use strata_tsdb::{PointRef, Tsdb, TsdbOptions, Value};

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// 2013-01-01T00:00:00Z in seconds.
const T: i64 = 1_356_998_400;
const NOW_MS: i64 = (T + 86_400) * 1000;
const START: i64 = T + 3600;
const END: i64 = T + 3 * 3600;

fn post(tsdb: &Tsdb, query: &str) -> Result<Vec<Json>, Box<dyn std::error::Error>> {
    let body =
        format!("{{\"start\":{START},\"end\":{END},\"msResolution\":true,\"queries\":[{query}]}}");
    let (status, out) = post_query(tsdb, &body, NOW_MS, &QueryLimits::default());
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&out));
    let v: Json = serde_json::from_slice(&out)?;
    Ok(v.as_array().cloned().unwrap_or_default())
}

fn write(tsdb: &Tsdb, host: &str, points: &[(i64, Value)]) -> TestResult {
    let tags = [("host", host)];
    let refs: Vec<PointRef<'_>> = points
        .iter()
        .map(|&(timestamp, value)| PointRef {
            metric: "m",
            tags: &tags,
            timestamp,
            value,
        })
        .collect();
    for r in tsdb.write(&refs) {
        r?;
    }
    Ok(())
}

/// Each series' last point in the range, as the raw points show it, at the range's start.
fn expected_lasts(raw: &[Json]) -> Vec<(String, Option<f64>)> {
    raw.iter()
        .map(|r| {
            let host = r["tags"]["host"].as_str().unwrap_or_default().to_owned();
            let dps = r["dps"].as_object().cloned().unwrap_or_default();
            let last = dps
                .iter()
                .filter_map(|(t, v)| Some((t.parse::<i64>().ok()?, v.clone())))
                .filter(|(t, _)| (START * 1000..=END * 1000).contains(t))
                .max_by_key(|(t, _)| *t)
                .and_then(|(_, v)| v.as_f64());
            (host, last)
        })
        .collect()
}

/// Each series' one point, checked to be at the range's start (a downsampled value is a
/// double).
fn lasts(results: &[Json]) -> Vec<(String, Option<f64>)> {
    results
        .iter()
        .map(|r| {
            let host = r["tags"]["host"].as_str().unwrap_or_default().to_owned();
            let dps = r["dps"].as_object().cloned().unwrap_or_default();
            assert!(dps.len() <= 1, "{r}");
            if let Some(t) = dps.keys().next() {
                assert_eq!(t, &(START * 1000).to_string(), "{r}");
            }
            (host, dps.values().next().and_then(Json::as_f64))
        })
        .collect()
}

#[test]
fn newest_points_answer_as_reads_do() -> TestResult {
    let dir = tempfile::tempdir()?;
    {
        let tsdb = Tsdb::open(dir.path(), TsdbOptions::default())?;
        // Newest point in the range: taken from the index.
        write(
            &tsdb,
            "in",
            &[
                (T + 10, Value::Int(1)),
                (START + 100, Value::Int(2)),
                (T + 7000, Value::Float(2.5)),
            ],
        )?;
        // Newest point after the range: read.
        write(
            &tsdb,
            "after",
            &[(START + 5, Value::Int(3)), (END + 60, Value::Int(4))],
        )?;
        // Newest point before the range, in its first hour's row: read, and empty.
        write(&tsdb, "before", &[(START - 3000, Value::Int(5))])?;
        // An older point written after the newest one.
        write(
            &tsdb,
            "late",
            &[(START + 900, Value::Int(6)), (START + 300, Value::Int(7))],
        )?;
    }
    // After a reopen the index knows the newest points only to the row: they are refined.
    let tsdb = Tsdb::open(dir.path(), TsdbOptions::default())?;
    write(&tsdb, "fresh", &[(START + 30, Value::Float(-1.25))])?;
    let raw = post(&tsdb, r#"{"aggregator":"none","metric":"m"}"#)?;
    let got = post(
        &tsdb,
        r#"{"aggregator":"none","metric":"m","downsample":"0all-last"}"#,
    )?;
    assert_eq!(lasts(&got), expected_lasts(&raw));
    let hosts: Vec<String> = lasts(&got).into_iter().map(|(h, _)| h).collect();
    assert_eq!(
        hosts.len(),
        4,
        "{hosts:?}: the series with no row in the window is left out"
    );
    let values: Vec<Option<f64>> = lasts(&got).into_iter().map(|(_, v)| v).collect();
    assert_eq!(values, [Some(2.5), Some(3.0), Some(6.0), Some(-1.25)]);
    // Aggregated across series, and grouped, the same way as a read.
    let sum = post(
        &tsdb,
        r#"{"aggregator":"sum","metric":"m","downsample":"0all-last"}"#,
    )?;
    let total: f64 = values.iter().flatten().sum();
    let got_sum = sum[0]["dps"][(START * 1000).to_string()].as_f64();
    assert_eq!(got_sum, Some(total), "{sum:?}");
    Ok(())
}
