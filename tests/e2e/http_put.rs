//! HTTP `/api/put` end to end.

use strata_tsdb::{Tsdb, TsdbOptions, Value};

use crate::harness::Server;

fn points(dir: &std::path::Path, metric: &str) -> anyhow::Result<Vec<Vec<(i64, Value)>>> {
    let tsdb = Tsdb::open(dir, TsdbOptions::default())?;
    Ok(tsdb
        .read(&strata_tsdb::ReadRequest::metric(
            metric,
            &[],
            0,
            i64::MAX / 2,
        ))?
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

#[test]
fn points_written_over_telnet_and_http_come_back_from_api_query() -> anyhow::Result<()> {
    use std::io::{BufRead, BufReader, Write};
    let server = Server::start()?;
    let mut conn = server.connect()?;
    conn.write_all(b"put sys.cpu.user 1356998400 10 host=web01\nput sys.cpu.user 1356998400 20 host=web02\nversion\n")?;
    let mut line = String::new();
    BufReader::new(conn).read_line(&mut line)?;
    let (status, _) = server.http(
        "POST",
        "/api/put",
        br#"[{"metric":"sys.cpu.user","timestamp":1356998460,"value":30,"tags":{"host":"web01"}},
             {"metric":"sys.cpu.user","timestamp":1356998460,"value":40,"tags":{"host":"web02"}}]"#,
    )?;
    assert_eq!(status, 204);
    let body = br#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user"}]}"#;
    let (status, post) = server.http("POST", "/api/query/", body)?;
    assert_eq!(status, 200, "{post}");
    let v: serde_json::Value = serde_json::from_str(&post)?;
    assert_eq!(v[0]["metric"], "sys.cpu.user");
    assert_eq!(v[0]["aggregateTags"], serde_json::json!(["host"]));
    assert_eq!(
        v[0]["dps"],
        serde_json::json!({"1356998400": 30, "1356998460": 70})
    );
    let (status, get) = server.http(
        "GET",
        "/api/query?start=1356998400&end=1356998460&m=sum:sys.cpu.user",
        b"",
    )?;
    assert_eq!(status, 200);
    assert_eq!(get, post, "GET and POST forms must agree");
    let (status, err) = server.http(
        "GET",
        "/api/query?start=1356998400&m=sum:no.such.metric",
        b"",
    )?;
    assert_eq!(status, 400, "{err}");
    let v: serde_json::Value = serde_json::from_str(&err)?;
    assert_eq!(
        v["error"]["message"],
        "No such name for 'metrics': 'no.such.metric'"
    );
    Ok(())
}

#[test]
fn admin_compact_folds_closed_hours_and_queries_agree_before_and_after() -> anyhow::Result<()> {
    let server = Server::start()?;
    let mut body = String::from("[");
    for i in 0..720 {
        let ts = 1_356_998_400 + i * 10;
        body.push_str(&format!(
            r#"{{"metric":"m.c","timestamp":{ts},"value":{},"tags":{{"host":"h{}"}}}},"#,
            i % 97,
            i % 3
        ));
    }
    body.pop();
    body.push(']');
    assert_eq!(server.http("POST", "/api/put", body.as_bytes())?.0, 204);
    let q = br#"{"start":1356998400,"end":1357005600,"queries":[{"aggregator":"sum","metric":"m.c","downsample":"5m-avg"}]}"#;
    let (status, before) = server.http("POST", "/api/query", q)?;
    assert_eq!(status, 200, "{before}");
    let (status, report) = server.http("POST", "/api/admin/compact", b"")?;
    assert_eq!(status, 200, "{report}");
    let v: serde_json::Value = serde_json::from_str(&report)?;
    // 3 series × 2 closed hours.
    assert_eq!(v["rowsCompacted"], 6, "{report}");
    let (_, after) = server.http("POST", "/api/query", q)?;
    assert_eq!(before, after);
    Ok(())
}

#[test]
fn query_deletes_only_when_the_server_allows_it() -> anyhow::Result<()> {
    let put = br#"[{"metric":"del.me","timestamp":1356998400,"value":1,"tags":{"host":"a"}},
                   {"metric":"del.me","timestamp":1356998460,"value":2,"tags":{"host":"a"}}]"#;
    let query = "/api/query?start=1356998400&end=1356998460&m=sum:del.me";
    // Off by default: 400 with OpenTSDB's message, and nothing is deleted.
    let server = Server::start()?;
    assert_eq!(server.http("POST", "/api/put", put)?.0, 204);
    let (status, err) = server.http("DELETE", query, b"")?;
    assert_eq!(status, 400, "{err}");
    let v: serde_json::Value = serde_json::from_str(&err)?;
    assert_eq!(v["error"]["message"], "Bad request", "{err}");
    assert_eq!(
        v["error"]["details"],
        "Deleting data is not enabled (tsd.http.query.allow_delete=false)"
    );
    let (_, body) = server.http("GET", query, b"")?;
    let v: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(
        v[0]["dps"],
        serde_json::json!({"1356998400": 1, "1356998460": 2})
    );
    // `--allow-delete`: the query answers with what it matched, then it is gone.
    let dir = tempfile::tempdir()?;
    let server = Server::start_in(dir.path(), &["--allow-delete"])?;
    assert_eq!(server.http("POST", "/api/put", put)?.0, 204);
    let (status, body) = server.http("DELETE", query, b"")?;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(
        v[0]["dps"],
        serde_json::json!({"1356998400": 1, "1356998460": 2})
    );
    let (status, body) = server.http("GET", query, b"")?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, "[]", "deleted points must not come back");
    Ok(())
}
