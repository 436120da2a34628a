//! The Prometheus read path end to end: points written over telnet, read back through the
//! `/api/v1/*` endpoints the way Grafana's Prometheus data source asks (form POSTs with
//! `start`, `end` and `step` in seconds; the `1+1` health check; label and series browsing).

use std::io::{BufRead, BufReader, Write};

use serde_json::{Value as Json, json};

use crate::harness::Server;

/// 2024-01-01T00:00:00Z.
const T: i64 = 1_704_067_200;
const FORM: &str = "Content-Type: application/x-www-form-urlencoded\r\n";

/// A server holding 10 minutes of points from T, 10 s apart: counter `e2e.req` (+10 per
/// 10 s on host a, +20 on b), gauge `e2e.cpu` (host a 1.5, b 2.5, c 4; dc x for a and b),
/// and a histogram `e2e.lat_bucket` (le 0.1: 50, 0.2: 70, Inf: 100).
fn server() -> anyhow::Result<Server> {
    let server = Server::start()?;
    let mut conn = server.connect()?;
    let mut lines = String::new();
    for i in 0..=60i64 {
        let t = T + i * 10;
        lines.push_str(&format!("put e2e.req {t} {} host=a dc=x\n", i * 10));
        lines.push_str(&format!("put e2e.req {t} {} host=b dc=x\n", i * 20));
        lines.push_str(&format!("put e2e.cpu {t} 1.5 host=a dc=x\n"));
        lines.push_str(&format!("put e2e.cpu {t} 2.5 host=b dc=x\n"));
        lines.push_str(&format!("put e2e.cpu {t} 4 host=c\n"));
        for (le, n) in [("0.1", 50), ("0.2", 70), ("Inf", 100)] {
            lines.push_str(&format!("put e2e.lat_bucket {t} {n} le={le} job=j\n"));
        }
    }
    lines.push_str("version\n");
    conn.write_all(lines.as_bytes())?;
    // `version` is answered once every put before it is stored.
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    while !line.starts_with("net.opentsdb.tools ") {
        line.clear();
        anyhow::ensure!(reader.read_line(&mut line)? > 0, "connection closed");
        anyhow::ensure!(!line.starts_with("put:"), "put failed: {line}");
    }
    Ok(server)
}

pub(crate) fn form(query: &[(&str, &str)]) -> String {
    query
        .iter()
        .map(|(k, v)| {
            let enc: String = v
                .bytes()
                .map(|b| match b {
                    b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'_' | b'-' => {
                        (b as char).to_string()
                    }
                    b => format!("%{b:02X}"),
                })
                .collect();
            format!("{k}={enc}")
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// POSTs a form, as Grafana does.
fn post(server: &Server, path: &str, params: &[(&str, &str)]) -> anyhow::Result<(u16, Json)> {
    let (status, _, body) = server.http_bytes("POST", path, FORM, form(params).as_bytes())?;
    Ok((status, serde_json::from_slice(&body)?))
}

pub(crate) fn get(
    server: &Server,
    path: &str,
    params: &[(&str, &str)],
) -> anyhow::Result<(u16, Json)> {
    let (status, text) = server.http("GET", &format!("{path}?{}", form(params)), b"")?;
    Ok((status, serde_json::from_str(&text)?))
}

fn s(t: i64) -> String {
    t.to_string()
}

#[test]
fn grafana_set_up_health_check_and_build_info() -> anyhow::Result<()> {
    let server = server()?;
    // "Save & test": an instant `1+1` at time 4.
    let (status, v) = post(&server, "/api/v1/query", &[("query", "1+1"), ("time", "4")])?;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v,
        json!({"status":"success","data":{"resultType":"scalar","result":[4,"2"]}})
    );
    let (status, v) = get(&server, "/api/v1/status/buildinfo", &[])?;
    assert_eq!(status, 200);
    assert!(
        v["data"]["version"]
            .as_str()
            .is_some_and(|s| s.starts_with("2.")),
        "{v}"
    );
    assert_eq!(v["data"].get("features"), None);
    for (path, data) in [
        ("/api/v1/metadata", json!({})),
        ("/api/v1/rules", json!({"groups": []})),
    ] {
        let (status, v) = get(&server, path, &[])?;
        assert_eq!((status, &v["data"]), (200, &data), "{path}");
    }
    let (status, v) = post(
        &server,
        "/api/v1/query_exemplars",
        &[("query", "e2e.cpu"), ("start", "0"), ("end", "1")],
    )?;
    assert_eq!((status, v["data"].clone()), (200, json!([])));
    Ok(())
}

#[test]
fn range_queries_as_grafana_sends_them() -> anyhow::Result<()> {
    let server = server()?;
    let (start, end) = (s(T + 60), s(T + 600));
    let (status, v) = post(
        &server,
        "/api/v1/query_range",
        &[
            ("query", "sum by (dc) (rate(e2e.req[1m]))"),
            ("start", &start),
            ("end", &end),
            ("step", "60"),
        ],
    )?;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"]["resultType"], "matrix");
    let result = v["data"]["result"].as_array().cloned().unwrap_or_default();
    assert_eq!(result.len(), 1, "{v}");
    assert_eq!(result[0]["metric"], json!({"dc": "x"}));
    // 1/s + 2/s at every step from T+60 to T+600.
    let values = result[0]["values"].as_array().cloned().unwrap_or_default();
    assert_eq!(values.len(), 10);
    for (k, p) in values.iter().enumerate() {
        assert_eq!(p, &json!([T + 60 + 60 * k as i64, "3"]));
    }
    // A gauge, averaged over each step's minute, and an arithmetic result.
    let (_, v) = post(
        &server,
        "/api/v1/query_range",
        &[
            ("query", "avg_over_time(e2e.cpu{host=~\"a|c\"}[1m]) * 2"),
            ("start", &start),
            ("end", &s(T + 120)),
            ("step", "1m"),
        ],
    )?;
    let result = &v["data"]["result"];
    assert_eq!(result[0]["metric"], json!({"dc": "x", "host": "a"}), "{v}");
    assert_eq!(result[0]["values"][1], json!([T + 120, "3"]));
    assert_eq!(result[1]["metric"], json!({"host": "c"}));
    assert_eq!(result[1]["values"][0], json!([T + 60, "8"]));
    // Quantiles from stored buckets.
    let (_, v) = get(
        &server,
        "/api/v1/query",
        &[
            ("query", "histogram_quantile(0.6, e2e.lat_bucket)"),
            ("time", &s(T + 600)),
        ],
    )?;
    assert_eq!(v["data"]["result"][0]["metric"], json!({"job": "j"}));
    assert_eq!(
        v["data"]["result"][0]["value"][1], "0.15000000000000002",
        "{v}"
    );
    Ok(())
}

#[test]
fn instant_queries_and_the_metric_browser() -> anyhow::Result<()> {
    let server = server()?;
    let at = s(T + 600);
    let (status, v) = get(
        &server,
        "/api/v1/query",
        &[("query", "e2e.cpu{dc!=\"x\"}"), ("time", &at)],
    )?;
    assert_eq!(status, 200);
    assert_eq!(
        v["data"]["result"],
        json!([{"metric": {"__name__": "e2e.cpu", "host": "c"}, "value": [T + 600, "4"]}])
    );
    let (_, v) = get(
        &server,
        "/api/v1/query",
        &[("query", "topk(1, e2e.cpu)"), ("time", &at)],
    )?;
    assert_eq!(v["data"]["result"][0]["value"], json!([T + 600, "4"]));
    let (_, v) = get(&server, "/api/v1/labels", &[])?;
    assert_eq!(v["data"], json!(["__name__", "dc", "host", "job", "le"]));
    let (_, v) = get(&server, "/api/v1/label/__name__/values", &[])?;
    assert_eq!(v["data"], json!(["e2e.cpu", "e2e.lat_bucket", "e2e.req"]));
    let (_, v) = get(
        &server,
        "/api/v1/label/host/values",
        &[
            ("match[]", "e2e.cpu{dc=\"x\"}"),
            ("start", "0"),
            ("end", &at),
        ],
    )?;
    assert_eq!(v["data"], json!(["a", "b"]));
    let (_, v) = post(
        &server,
        "/api/v1/series",
        &[("match[]", "e2e.req{host=\"b\"}")],
    )?;
    assert_eq!(
        v["data"],
        json!([{"__name__": "e2e.req", "dc": "x", "host": "b"}])
    );
    Ok(())
}

#[test]
fn errors_come_in_prometheus_envelopes() -> anyhow::Result<()> {
    let server = server()?;
    let (status, v) = get(
        &server,
        "/api/v1/query",
        &[("query", "predict_linear(e2e.cpu[5m], 60)")],
    )?;
    assert_eq!(status, 400);
    assert_eq!(v["status"], "error");
    assert_eq!(v["errorType"], "bad_data");
    assert_eq!(
        v["error"],
        "invalid parameter \"query\": unsupported function \"predict_linear\""
    );
    let (status, v) = post(
        &server,
        "/api/v1/query_range",
        &[("query", "e2e.cpu"), ("start", "x")],
    )?;
    assert_eq!((status, v["errorType"].as_str()), (400, Some("bad_data")));
    let (status, v) = get(
        &server,
        "/api/v1/query",
        &[(
            "query",
            "rate({__name__=~\"e2e.req|e2e.cpu\", host=\"c\"}[1m]) + rate(e2e.req{host=\"a\"}[1m])",
        )],
    )?;
    // host c's rate and host a's do not match (dc differs): an empty, successful answer.
    assert_eq!((status, v["data"]["result"].clone()), (200, json!([])));
    Ok(())
}

#[test]
fn opentsdb_queries_keep_their_paths() -> anyhow::Result<()> {
    let server = server()?;
    // /api/v1/query is OpenTSDB's /api/query when it is not Prometheus-shaped.
    let body = format!(
        r#"{{"start":{T},"end":{},"queries":[{{"metric":"e2e.cpu","aggregator":"sum"}}]}}"#,
        T + 600
    );
    for path in ["/api/v1/query", "/api/query"] {
        let (status, text) = server.http("POST", path, body.as_bytes())?;
        assert_eq!(status, 200, "{path}: {text}");
        let v: Json = serde_json::from_str(&text)?;
        assert_eq!(v[0]["metric"], "e2e.cpu", "{path}");
    }
    let (status, text) = server.http(
        "GET",
        &format!("/api/v1/query?start={T}&end={}&m=sum:e2e.cpu", T + 600),
        b"",
    )?;
    assert_eq!(status, 200, "{text}");
    assert!(text.starts_with('['), "{text}");
    Ok(())
}
