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

/// A JSON boolean given a string other than `true` or `false` is a 400, as with Jackson; it
/// was read as false.
#[test]
fn a_boolean_field_given_another_string_is_a_400() -> anyhow::Result<()> {
    let server = Server::start()?;
    let (status, body) = server.http(
        "POST",
        "/api/put",
        br#"{"metric":"e2e.bool","timestamp":1356998400,"value":1,"tags":{"host":"a"}}"#,
    )?;
    assert_eq!(status, 204, "{body}");
    let query = |rate: &str| {
        let body = format!(
            r#"{{"start":1356998000,"end":1356999000,"queries":[{{"metric":"e2e.bool","aggregator":"sum","rate":{rate}}}]}}"#
        );
        server.http("POST", "/api/query", body.as_bytes())
    };
    let (status, body) = query(r#""yes""#)?;
    assert_eq!(status, 400, "{body}");
    let v = json(&body)?;
    assert_eq!(v["error"]["message"], "Unable to parse the given JSON");
    let details = v["error"]["details"].as_str().unwrap_or_default();
    assert!(details.contains("'rate' must be a boolean"), "{body}");
    for accepted in ["false", r#""false""#, r#""true""#, "true"] {
        let (status, body) = query(accepted)?;
        assert_eq!(status, 200, "{accepted}: {body}");
    }
    Ok(())
}

fn cache_bytes(server: &Server) -> anyhow::Result<f64> {
    let (_, text) = server.http("GET", "/metrics", b"")?;
    crate::metrics::sample(&text, "strata_engine_cache_bytes")
        .ok_or_else(|| anyhow::anyhow!("no strata_engine_cache_bytes"))
}

/// `/api/dropcaches` answers GET and DELETE (POST is 405, as in OpenTSDB 2.4.1's code), and
/// telnet `dropcaches` too; each really empties the block cache, and the UID caches are read
/// again (names still resolve).
#[test]
fn dropcaches_empties_the_caches() -> anyhow::Result<()> {
    let server = Server::start()?;
    let mut put = String::from("[");
    for i in 0..500 {
        put.push_str(&format!(
            r#"{{"metric":"e2e.drop","timestamp":{},"value":{i},"tags":{{"host":"h{}"}}}},"#,
            1_356_998_400 + i,
            i % 5
        ));
    }
    put.pop();
    put.push(']');
    assert_eq!(server.http("POST", "/api/put", put.as_bytes())?.0, 204);
    // Into SST files, whose blocks a read caches.
    let (status, body) = server.http("POST", "/api/admin/compact", b"")?;
    assert_eq!(status, 200, "{body}");
    let query = "/api/query?start=1356998000&end=1357002000&m=sum:e2e.drop%7Bhost=*%7D";
    let fill = || -> anyhow::Result<()> {
        let (status, body) = server.http("GET", query, b"")?;
        anyhow::ensure!(status == 200, "{body}");
        anyhow::ensure!(json(&body)?.as_array().map(Vec::len) == Some(5), "{body}");
        Ok(())
    };
    let (status, body) = server.http("POST", "/api/dropcaches", b"")?;
    assert_eq!(status, 405, "{body}");
    for method in ["GET", "DELETE"] {
        fill()?;
        assert!(cache_bytes(&server)? > 0.0);
        let (status, body) = server.http(method, "/api/dropcaches", b"")?;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            json(&body)?,
            serde_json::json!({"status": "200", "message": "Caches dropped"})
        );
        assert_eq!(cache_bytes(&server)?, 0.0, "{method}");
    }
    fill()?;
    assert!(cache_bytes(&server)? > 0.0);
    let mut conn = server.connect()?;
    conn.write_all(b"dropcaches\n")?;
    let mut line = String::new();
    BufReader::new(conn.try_clone()?).read_line(&mut line)?;
    assert_eq!(line, "Caches dropped.\n");
    assert_eq!(cache_bytes(&server)?, 0.0);
    // Names resolve after the UID caches were read again, for reads and writes.
    fill()?;
    conn.write_all(b"put e2e.drop 1356999000 1 host=h0\nversion\n")?;
    let mut reader = BufReader::new(conn.try_clone()?);
    line.clear();
    reader.read_line(&mut line)?;
    assert!(line.starts_with("net.opentsdb"), "{line}");
    let (status, body) = server.http("GET", "/api/suggest?type=tagv&q=h", b"")?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        json(&body)?,
        serde_json::json!(["h0", "h1", "h2", "h3", "h4"])
    );
    Ok(())
}
