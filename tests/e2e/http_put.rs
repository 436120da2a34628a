//! HTTP `/api/put` end to end.

use strata_tsdb::{Tsdb, TsdbOptions, Value};

use crate::harness::Server;

fn points(dir: &std::path::Path, metric: &str) -> anyhow::Result<Vec<Vec<(i64, Value)>>> {
    let tsdb = Tsdb::open(dir, TsdbOptions::default())?;
    Ok(tsdb
        .read(metric, &[], 0, i64::MAX / 2)?
        .into_iter()
        .map(|s| s.points)
        .collect())
}

#[test]
fn good_points_are_stored_and_bad_ones_reported() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Server::start_in(dir.path(), &[])?;
    // A single object, a trailing slash and no content type: 204 and an empty body.
    let (status, body) = server.http(
        "POST",
        "/api/put/",
        br#"{"metric":"sys.mem","timestamp":1356998400,"value":"12.5","tags":{"host":"a"}}"#,
    )?;
    assert_eq!((status, body.as_str()), (204, ""));
    // A batch with one bad point and ?details: the good one is stored.
    let (status, body) = server.http(
        "POST",
        "/api/put?details",
        br#"[{"metric":"sys.mem","timestamp":1356998460,"value":13,"tags":{"host":"a"}},
             {"metric":"sys.mem","timestamp":1356998460,"value":NaN,"tags":{"host":"a"}},
             {"metric":"sys.mem","timestamp":1356998460,"value":1,"tags":{}}]"#,
    )?;
    assert_eq!(status, 400, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(v["success"], 1);
    assert_eq!(v["failed"], 2);
    assert_eq!(v["errors"].as_array().map(Vec::len), Some(2));
    // Bad JSON: OpenTSDB's error object.
    let (status, body) = server.http("POST", "/api/put", b"{not json")?;
    assert_eq!(status, 400);
    let v: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(v["error"]["code"], 400);
    assert!(v["error"]["message"].is_string());
    // GET is not allowed.
    let (status, _) = server.http("GET", "/api/put", b"")?;
    assert_eq!(status, 405);
    // ?sync waits for the fsync; then kill -9 and everything acknowledged is there.
    let (status, _) = server.http(
        "POST",
        "/api/put?sync",
        br#"{"metric":"sys.mem","timestamp":1356998520,"value":14,"tags":{"host":"a"}}"#,
    )?;
    assert_eq!(status, 204);
    drop(server);
    let got = points(dir.path(), "sys.mem")?;
    assert_eq!(
        got,
        vec![vec![
            (1_356_998_400_000, Value::Float(12.5)),
            (1_356_998_460_000, Value::Int(13)),
            (1_356_998_520_000, Value::Int(14)),
        ]]
    );
    Ok(())
}

#[test]
fn oversized_bodies_get_413() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Server::start_in(dir.path(), &["--max-body-bytes", "1000"])?;
    let body = vec![b' '; 5000];
    let (status, body) = server.http("POST", "/api/put", &body)?;
    assert_eq!(status, 413, "{body}");
    Ok(())
}
