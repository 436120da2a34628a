//! Details of OpenTSDB's behaviour clients rely on: error `details`, Jackson's strict
//! booleans, `/api/dropcaches`.

use std::io::{BufRead, BufReader, Write};

use crate::harness::Server;

fn json(body: &str) -> anyhow::Result<serde_json::Value> {
    Ok(serde_json::from_str(body)?)
}

/// A name that does not resolve is a 400 whose details repeat the message, on every path
/// that resolves names.
#[test]
fn unknown_names_carry_details_as_opentsdb_does() -> anyhow::Result<()> {
    let server = Server::start()?;
    let (status, body) = server.http(
        "POST",
        "/api/put",
        br#"{"metric":"e2e.known","timestamp":1356998400,"value":1,"tags":{"host":"a"}}"#,
    )?;
    assert_eq!(status, 204, "{body}");
    let cases: [(&str, &str, &[u8], &str); 4] = [
        (
            "GET",
            "/api/query?start=1356998000&m=sum:x",
            b"",
            "No such name for 'metrics': 'x'",
        ),
        (
            "POST",
            "/api/query",
            br#"{"start":1356998000,"queries":[{"metric":"x","aggregator":"sum"}]}"#,
            "No such name for 'metrics': 'x'",
        ),
        (
            "GET",
            "/api/query?start=1356998000&m=sum:e2e.known%7Bhost=nope%7D",
            b"",
            "No such name for 'tagv': 'nope'",
        ),
        (
            "GET",
            "/api/query/last?timeseries=x%7Bhost=a%7D",
            b"",
            "No such name for 'metrics': 'x'",
        ),
    ];
    for (method, path, body, message) in cases {
        let (status, text) = server.http(method, path, body)?;
        assert_eq!(status, 400, "{path}: {text}");
        let want =
            serde_json::json!({"error": {"code": 400, "message": message, "details": message}});
        assert_eq!(json(&text)?, want, "{path}");
    }
    Ok(())
}
