//! Reads of many series are split over threads: the answer must be the one the single-threaded
//! path gives, series by series.

use serde_json::Value as Json;
use strata_query::QueryLimits;

use crate::post_query;
use strata_tsdb::{PointRef, Tsdb, TsdbOptions, Value};

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// 2013-01-01T00:00:00Z in seconds.
const T: i64 = 1_356_998_400;
const NOW_MS: i64 = (T + 86_400) * 1000;
const HOSTS: usize = 40;

fn post(tsdb: &Tsdb, query: &str) -> Result<Json, Box<dyn std::error::Error>> {
    let body = format!(
        "{{\"start\":{T},\"end\":{},\"queries\":[{query}]}}",
        T + 3 * 3600
    );
    // Both paths: split over every core, and on one thread.
    let limits = |threads| QueryLimits {
        threads,
        ..QueryLimits::default()
    };
    let (status, out) = post_query(tsdb, &body, NOW_MS, &limits(0));
    let (_, one_thread) = post_query(tsdb, &body, NOW_MS, &limits(1));
    assert_eq!(out, one_thread);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&out));
    Ok(serde_json::from_slice(&out)?)
}

#[test]
fn split_reads_answer_like_single_series_reads() -> TestResult {
    let dir = tempfile::tempdir()?;
    let tsdb = Tsdb::open(dir.path(), TsdbOptions::default())?;
    // 40 hosts × 3 hours is 120 series-hours: the read is split.
    for h in 0..HOSTS {
        let host = format!("h{h:02}");
        let dc = ["a", "b", "c"][h % 3];
        let tags = [("host", host.as_str()), ("dc", dc)];
        let points: Vec<PointRef<'_>> = (0..3 * 360i64)
            .filter(|i| (i + h as i64) % 11 != 0)
            .map(|i| PointRef {
                metric: "m",
                tags: &tags,
                timestamp: T + i * 10 + (h as i64 % 10),
                value: if h % 2 == 0 {
                    Value::Int(i * h as i64)
                } else {
                    Value::Float(i as f64 / (h as f64 + 1.0))
                },
            })
            .collect();
        for r in tsdb.write(&points) {
            r?;
        }
    }
    let all = post(
        &tsdb,
        r#"{"aggregator":"none","metric":"m","downsample":"1m-avg"}"#,
    )?;
    let all = all.as_array().ok_or("array")?;
    assert_eq!(all.len(), HOSTS);
    // Every fifth host keeps the test quick in debug builds.
    for r in all.iter().step_by(5) {
        let host = r["tags"]["host"].as_str().ok_or("host")?;
        let one = post(
            &tsdb,
            &format!(
                r#"{{"aggregator":"none","metric":"m","downsample":"1m-avg","tags":{{"host":"{host}"}}}}"#
            ),
        )?;
        assert_eq!(&one[0], r, "{host}");
    }
    // Grouped aggregation over the split read equals the sum of the per-group members.
    let grouped = post(
        &tsdb,
        r#"{"aggregator":"sum","metric":"m","tags":{"dc":"*"},"rate":true}"#,
    )?;
    for g in grouped.as_array().ok_or("array")? {
        let dc = g["tags"]["dc"].as_str().ok_or("dc")?;
        let direct = post(
            &tsdb,
            &format!(r#"{{"aggregator":"sum","metric":"m","tags":{{"dc":"{dc}"}},"rate":true}}"#),
        )?;
        assert_eq!(&direct[0], g, "{dc}");
    }
    Ok(())
}
