//! One port, two protocols.

use std::io::{BufRead, BufReader, Write};

use crate::harness::Server;

#[test]
fn telnet_and_http_share_one_port() -> anyhow::Result<()> {
    let server = Server::start()?;
    let mut conn = server.connect()?;
    conn.write_all(b"version\r\n")?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    // OpenTSDB's shape: `net.opentsdb.tools <version> built at revision <rev> (<status>)`.
    assert!(
        line.starts_with("net.opentsdb.tools 2.4.1-strata-"),
        "{line:?}"
    );
    assert!(line.contains(" built at revision "), "{line:?}");
    line.clear();
    reader.read_line(&mut line)?;
    assert!(line.starts_with("Built on "), "{line:?}");
    conn.write_all(b"bogus\n")?;
    line.clear();
    reader.read_line(&mut line)?;
    assert_eq!(line, "unknown command: bogus.  Try `help'.\n");

    let (status, body) = server.http("GET", "/api/version", b"")?;
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&body)?;
    for key in [
        "version",
        "short_revision",
        "full_revision",
        "timestamp",
        "repo_status",
        "user",
        "host",
        "repo",
        "branch",
    ] {
        assert!(v[key].is_string(), "{key} must be a JSON string in {body}");
    }
    let (status, body) = server.http("GET", "/api/nope", b"")?;
    assert_eq!(status, 404);
    assert_eq!(
        body,
        r#"{"error":{"code":404,"message":"Endpoint not found"}}"#
    );
    let (status, _) = server.http("GET", "/api/v2/version", b"")?;
    assert_eq!(status, 501);
    let (status, body) = server.http("DELETE", "/api/version", b"")?;
    assert_eq!(status, 405, "{body}");
    Ok(())
}

#[test]
fn an_empty_probe_connection_is_harmless_and_sigterm_exits_cleanly() -> anyhow::Result<()> {
    let server = Server::start()?;
    drop(server.connect()?);
    let (status, _) = server.http("GET", "/api/version", b"")?;
    assert_eq!(status, 200);
    let exit = server.stop()?;
    assert!(exit.success(), "{exit:?}");
    Ok(())
}

#[test]
fn an_overlong_telnet_line_gets_an_error() -> anyhow::Result<()> {
    let server = Server::start()?;
    let mut conn = server.connect()?;
    let mut long = vec![b'x'; 5000];
    long.push(b'\n');
    conn.write_all(&long)?;
    let mut line = String::new();
    BufReader::new(conn).read_line(&mut line)?;
    assert!(
        line.starts_with("error: line too long: longer than 1024 bytes"),
        "{line:?}"
    );
    Ok(())
}

#[test]
fn suggest_aggregators_and_filters_answer_like_opentsdb() -> anyhow::Result<()> {
    let server = Server::start()?;
    let mut conn = server.connect()?;
    conn.write_all(b"put sys.cpu.user 1356998400 1 host=web01\nput sys.cpu.sys 1356998400 1 host=web02\nput net.bytes 1356998400 1 iface=eth0\nversion\n")?;
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    assert!(line.starts_with("net.opentsdb.tools"), "{line:?}");

    let get = |path: &str| -> anyhow::Result<(u16, serde_json::Value)> {
        let (status, body) = server.http("GET", path, b"")?;
        Ok((status, serde_json::from_str(&body)?))
    };
    assert_eq!(
        get("/api/suggest?type=metrics&q=sys")?,
        (200, serde_json::json!(["sys.cpu.sys", "sys.cpu.user"]))
    );
    assert_eq!(
        get("/api/suggest?type=metrics&q=sys&max=1")?,
        (200, serde_json::json!(["sys.cpu.sys"]))
    );
    assert_eq!(
        get("/api/suggest?type=tagk")?,
        (200, serde_json::json!(["host", "iface"]))
    );
    assert_eq!(
        get("/api/suggest?type=tagv&q=web")?,
        (200, serde_json::json!(["web01", "web02"]))
    );
    let (status, body) = get("/api/suggest?type=metric")?;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["message"], "Invalid 'type' parameter:metric");
    let (status, body) = get("/api/suggest?q=sys")?;
    assert_eq!(status, 400);
    assert_eq!(
        body["error"]["message"],
        "Missing parameter <code>type</code>"
    );
    let (status, body) = get("/api/suggest?type=metrics&max=ten")?;
    assert_eq!(status, 400);
    assert_eq!(
        body["error"]["message"],
        "Unable to parse 'max' as a number"
    );
    let (status, body) = server.http(
        "POST",
        "/api/suggest",
        br#"{"type":"metrics","q":"net","max":"5"}"#,
    )?;
    assert_eq!((status, body.as_str()), (200, r#"["net.bytes"]"#));

    let (status, aggs) = get("/api/aggregators")?;
    assert_eq!(status, 200);
    let aggs = aggs.as_array().cloned().unwrap_or_default();
    for name in [
        "sum", "avg", "zimsum", "mimmax", "p99", "ep999r7", "none", "count",
    ] {
        assert!(
            aggs.iter().any(|a| a == name),
            "{name} missing from {aggs:?}"
        );
    }
    let (status, filters) = get("/api/config/filters")?;
    assert_eq!(status, 200);
    for name in [
        "literal_or",
        "iliteral_or",
        "not_literal_or",
        "not_iliteral_or",
        "wildcard",
        "iwildcard",
        "regexp",
        "not_key",
    ] {
        assert!(
            filters[name]["description"].is_string(),
            "{name} in {filters}"
        );
        assert!(filters[name]["examples"].is_string(), "{name} in {filters}");
    }
    Ok(())
}
