//! Self-monitoring and HTTP extras end to end: `/metrics`, `/api/stats`, telnet `stats`,
//! CORS, and `/api/put?sync_timeout`.

use std::io::{BufRead, BufReader, Read, Write};

use anyhow::Context;

use crate::harness::Server;

/// A response: status, raw header block (lower-cased names), body.
struct Reply {
    status: u16,
    headers: String,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// Sends one request with extra headers.
fn request(
    server: &Server,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> anyhow::Result<Reply> {
    let mut s = server.connect()?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8(raw)?;
    let (head, body) = text.split_once("\r\n\r\n").context("no header end")?;
    let status = head.split(' ').nth(1).context("no status")?.parse()?;
    Ok(Reply {
        status,
        headers: head.to_string(),
        body: body.to_string(),
    })
}

/// Sends telnet lines, then `version` as a barrier, and returns the reply lines before it.
pub(crate) fn telnet(server: &Server, lines: &str) -> anyhow::Result<Vec<String>> {
    let mut conn = server.connect()?;
    conn.write_all(lines.as_bytes())?;
    conn.write_all(b"version\n")?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut out = Vec::new();
    loop {
        let mut line = String::new();
        anyhow::ensure!(reader.read_line(&mut line)? > 0, "connection closed");
        if line.starts_with("net.opentsdb.tools ") {
            return Ok(out);
        }
        out.push(line);
    }
}

/// The value of the sample `name` (with its labels, exactly as printed) in a scrape.
pub(crate) fn sample(scrape: &str, name: &str) -> Option<f64> {
    scrape.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?.strip_prefix(' ')?;
        rest.trim().parse().ok()
    })
}

#[test]
fn metrics_count_points_by_protocol_and_reason() -> anyhow::Result<()> {
    let server = Server::start()?;
    let replies = telnet(
        &server,
        "put sys.a 1356998400 1 host=a\nput sys.a 1356998401 x host=a\nput sys.a 1356998402 3 host=a\n",
    )?;
    assert_eq!(replies.len(), 1, "{replies:?}");
    let put = request(
        &server,
        "POST",
        "/api/put",
        &[],
        br#"[{"metric":"sys.b","timestamp":1356998400,"value":1,"tags":{"host":"a"}},
             {"metric":"sys.b","timestamp":1356998400,"value":1,"tags":{}}]"#,
    )?;
    assert_eq!(put.status, 400);

    let m = request(&server, "GET", "/metrics", &[], b"")?;
    assert_eq!(m.status, 200);
    assert!(
        m.header("content-type")
            .is_some_and(|c| c.starts_with("text/plain")),
        "{}",
        m.headers
    );
    let s = &m.body;
    assert_eq!(
        sample(s, "strata_points_received_total{protocol=\"telnet\"}"),
        Some(3.0),
        "{s}"
    );
    assert_eq!(
        sample(s, "strata_points_stored_total{protocol=\"telnet\"}"),
        Some(2.0)
    );
    assert_eq!(
        sample(
            s,
            "strata_points_rejected_total{protocol=\"telnet\",reason=\"bad_value\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(s, "strata_points_received_total{protocol=\"http\"}"),
        Some(2.0)
    );
    assert_eq!(
        sample(s, "strata_points_stored_total{protocol=\"http\"}"),
        Some(1.0)
    );
    assert_eq!(
        sample(
            s,
            "strata_points_rejected_total{protocol=\"http\",reason=\"bad_tags\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            s,
            "strata_http_request_duration_seconds_count{endpoint=\"put\"}"
        ),
        Some(1.0)
    );
    // This scrape's own connection is open; the telnet one may still be closing.
    assert!(sample(s, "strata_connections_open").is_some_and(|v| v >= 1.0));
    assert_eq!(
        sample(s, "strata_connections_total{protocol=\"telnet\"}"),
        Some(1.0)
    );
    assert_eq!(sample(s, "strata_tsdb_series"), Some(2.0));
    assert_eq!(sample(s, "strata_tsdb_points_written"), Some(3.0));
    assert!(sample(s, "strata_engine_wal_bytes").is_some_and(|v| v > 0.0));
    assert!(s.contains("# TYPE strata_http_request_duration_seconds histogram"));
    // /metrics is GET only.
    assert_eq!(request(&server, "POST", "/metrics", &[], b"")?.status, 405);
    Ok(())
}

#[test]
fn api_stats_and_telnet_stats_speak_opentsdb() -> anyhow::Result<()> {
    let server = Server::start()?;
    telnet(
        &server,
        "put sys.a 1356998400 1 host=a\nput sys.a 1 x host=a\n",
    )?;
    let r = request(&server, "GET", "/api/stats", &[], b"")?;
    assert_eq!(r.status, 200);
    let v: serde_json::Value = serde_json::from_str(&r.body)?;
    let stats = v.as_array().context("not an array")?;
    let find = |metric: &str, ty: &str| {
        stats
            .iter()
            .find(|s| s["metric"] == metric && s["tags"]["type"] == ty)
    };
    let added = find("tsd.datapoints.added", "all").context("no tsd.datapoints.added")?;
    assert_eq!(added["value"], "1");
    assert!(
        added["timestamp"]
            .as_u64()
            .is_some_and(|t| t > 1_600_000_000)
    );
    assert!(
        added["tags"]["host"]
            .as_str()
            .is_some_and(|h| !h.is_empty())
    );
    let put = find("tsd.rpc.received", "put").context("no tsd.rpc.received put")?;
    assert_eq!(put["value"], "2");
    let invalid = find("tsd.rpc.errors", "invalid_values").context("no rpc.errors")?;
    assert_eq!(invalid["value"], "1");
    assert!(find("tsd.connectionmgr.connections", "open").is_some());
    assert!(find("tsd.http.latency_95pct", "all").is_some());
    // Every record has the four fields, and values are strings.
    for s in stats {
        assert!(
            s["metric"].as_str().is_some_and(|m| m.starts_with("tsd.")),
            "{s}"
        );
        assert!(s["value"].is_string(), "{s}");
        assert!(s["tags"]["host"].is_string(), "{s}");
    }
    assert_eq!(
        request(&server, "DELETE", "/api/stats", &[], b"")?.status,
        405
    );

    // Telnet `stats`: the same records as lines.
    let lines = telnet(&server, "stats\n")?;
    // The same records (per-level lines come and go with flushes, so they are left out).
    let fixed_lines = lines
        .iter()
        .filter(|l| !l.starts_with("tsd.storage.level."))
        .count();
    let fixed_json = stats
        .iter()
        .filter(|s| {
            s["metric"]
                .as_str()
                .is_some_and(|m| !m.starts_with("tsd.storage.level."))
        })
        .count();
    assert_eq!(fixed_lines, fixed_json, "{lines:?}");
    let added = lines
        .iter()
        .find(|l| l.starts_with("tsd.datapoints.added "))
        .context("no datapoints line")?;
    let words: Vec<&str> = added.trim_end().split(' ').collect();
    assert_eq!(words.len(), 5, "{added}");
    assert!(words[1].parse::<u64>().is_ok());
    assert_eq!(words[2], "1");
    assert!(words[3].starts_with("host="));
    assert_eq!(words[4], "type=all");
    Ok(())
}

#[test]
fn cors_is_off_by_default_and_follows_the_configured_domains() -> anyhow::Result<()> {
    let server = Server::start()?;
    let r = request(
        &server,
        "OPTIONS",
        "/api/put",
        &[("Origin", "http://a.example")],
        b"",
    )?;
    assert_eq!(r.status, 405);
    let r = request(
        &server,
        "GET",
        "/api/version",
        &[("Origin", "http://a.example")],
        b"",
    )?;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), None);
    drop(server);

    let dir = tempfile::tempdir()?;
    let server = Server::start_in(
        dir.path(),
        &["--cors-domains", "http://a.example, http://b.example"],
    )?;
    // A preflight from an allowed origin: 200, no body, the headers.
    let r = request(
        &server,
        "OPTIONS",
        "/api/query",
        &[
            ("Origin", "http://A.example"),
            ("Access-Control-Request-Method", "POST"),
        ],
        b"",
    )?;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, "");
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("http://A.example")
    );
    assert_eq!(
        r.header("access-control-allow-methods"),
        Some("GET, POST, PUT, DELETE")
    );
    assert!(
        r.header("access-control-allow-headers")
            .is_some_and(|h| h.contains("Content-Type")),
        "{}",
        r.headers
    );
    // A real request from an allowed origin gets the headers on its normal reply.
    let r = request(
        &server,
        "GET",
        "/api/version",
        &[("Origin", "http://b.example")],
        b"",
    )?;
    assert_eq!(r.status, 200);
    assert!(r.body.contains("version"));
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("http://b.example")
    );
    // An error reply gets them too.
    let r = request(
        &server,
        "GET",
        "/api/nope",
        &[("Origin", "http://b.example")],
        b"",
    )?;
    assert_eq!(r.status, 404);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("http://b.example")
    );
    // Another origin: 200 with OpenTSDB's error body and no CORS headers.
    let r = request(
        &server,
        "GET",
        "/api/version",
        &[("Origin", "http://evil.example")],
        b"",
    )?;
    assert_eq!(r.status, 200);
    let v: serde_json::Value = serde_json::from_str(&r.body)?;
    assert_eq!(v["error"]["message"], "CORS domain not allowed");
    assert_eq!(r.header("access-control-allow-origin"), None);
    // No Origin: a plain request is served, a preflight is not allowed.
    assert_eq!(
        request(&server, "GET", "/api/version", &[], b"")?.status,
        200
    );
    assert_eq!(
        request(&server, "OPTIONS", "/api/version", &[], b"")?.status,
        405
    );
    Ok(())
}

#[test]
fn put_sync_timeout_answers_400_when_the_write_is_slower() -> anyhow::Result<()> {
    let server = Server::start()?;
    let one = br#"{"metric":"sys.t","timestamp":1356998400,"value":1,"tags":{"host":"a"}}"#;
    // Plenty of time: a normal 204.
    let r = request(
        &server,
        "POST",
        "/api/put?sync&sync_timeout=60000",
        &[],
        one,
    )?;
    assert_eq!((r.status, r.body.as_str()), (204, ""));
    // sync_timeout without sync is ignored.
    let r = request(&server, "POST", "/api/put?sync_timeout=1", &[], one)?;
    assert_eq!(r.status, 204);
    // 100k points written and fsynced within 1 ms: on any machine this test runs on, the
    // answer comes at the timeout, a 400 that says so. A machine fast enough to finish first
    // gets the plain answer instead, which is right too; the count of timeouts follows what
    // happened. (That the answer does not wait for a slow write is tested with a write held
    // back on purpose, in server/src/put.rs.)
    let mut body = String::from("[");
    for i in 0..100_000 {
        if i > 0 {
            body.push(',');
        }
        body.push_str(&format!(
            r#"{{"metric":"sys.t","timestamp":{},"value":{i},"tags":{{"host":"h{}"}}}}"#,
            1_356_998_400 + i,
            i % 50
        ));
    }
    body.push(']');
    let mut timeouts = 0.0;
    for summary in [true, false] {
        let path = if summary {
            "/api/put?sync&sync_timeout=1&summary"
        } else {
            "/api/put?sync&sync_timeout=1"
        };
        let r = request(&server, "POST", path, &[], body.as_bytes())?;
        let v: serde_json::Value = serde_json::from_str(&r.body).unwrap_or_default();
        match (r.status, summary) {
            (400, true) => {
                timeouts += 1.0;
                assert_eq!(v["timeouts"], 100_000, "{v}");
                assert_eq!(v["success"], 0);
                assert_eq!(v["failed"], 0);
            }
            (400, false) => {
                timeouts += 1.0;
                assert!(
                    v["error"]["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("The put call has timedout with")),
                    "{v}"
                );
            }
            (200, true) => assert_eq!(v["success"], 100_000, "{v}"),
            (204, false) => {}
            (status, _) => panic!("{path}: {status} {}", r.body),
        }
    }
    let m = request(&server, "GET", "/metrics", &[], b"")?;
    assert_eq!(
        sample(&m.body, "strata_http_put_sync_timeouts_total"),
        Some(timeouts)
    );
    Ok(())
}

#[test]
fn query_answers_and_errors_are_json_with_a_utf8_charset() -> anyhow::Result<()> {
    let server = Server::start()?;
    for path in [
        "/api/query?start=1h-ago&m=sum:no.such.metric",
        "/api/version",
        "/api/aggregators",
    ] {
        let r = request(&server, "GET", path, &[], b"")?;
        let content_type = r
            .headers
            .lines()
            .find_map(|l| {
                l.strip_prefix("content-type: ")
                    .or_else(|| l.strip_prefix("Content-Type: "))
            })
            .unwrap_or_default()
            .to_string();
        assert_eq!(
            content_type, "application/json; charset=UTF-8",
            "{path}: {}",
            r.headers
        );
    }
    Ok(())
}
