//! Prometheus remote write end to end: requests encoded here, and a real Prometheus (Debian's
//! `prometheus` package) that scrapes Strata's `/metrics` and remote-writes to Strata.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value as Json;
use strata_ingest::{
    Label, STALE_NAN_BITS, Sample, TimeSeries, WriteRequest, encode_write_request,
};

use crate::harness::Server;

/// An hour boundary in the past, in milliseconds.
const T_MS: i64 = (1_700_000_000 - 1_700_000_000 % 3600) * 1000;

fn series(labels: &[(&str, &str)], samples: &[(f64, i64)]) -> TimeSeries {
    TimeSeries {
        labels: labels
            .iter()
            .map(|(n, v)| Label {
                name: n.to_string().into(),
                value: v.to_string().into(),
            })
            .collect(),
        samples: samples
            .iter()
            .map(|&(value, timestamp)| Sample { value, timestamp })
            .collect(),
    }
}

/// Posts a request as Prometheus does; returns (status, body).
fn send(server: &Server, body: &[u8]) -> anyhow::Result<(u16, String)> {
    let headers = "Content-Encoding: snappy\r\nContent-Type: application/x-protobuf\r\n\
                   X-Prometheus-Remote-Write-Version: 0.1.0\r\n";
    let (status, _, body) = server.http_bytes("POST", "/api/v1/write", headers, body)?;
    Ok((status, String::from_utf8(body)?))
}

/// The floats of the one series a query finds, as (timestamp ms, bits).
fn floats(server: &Server, metric: &str, tags: &[(&str, &str)]) -> anyhow::Result<Vec<(i64, u64)>> {
    let found = server.query_raw(metric, tags, 0, T_MS + 3_600_000)?;
    let [(_, points)] = found.as_slice() else {
        bail!("{metric} {tags:?}: expected one series, got {found:?}");
    };
    points
        .iter()
        .map(|(ts, v)| {
            anyhow::ensure!(v.is_f64(), "{metric}: {v} is not a float");
            Ok((*ts, v.as_f64().context("no number")?.to_bits()))
        })
        .collect()
}

#[test]
fn samples_arrive_exactly_with_mapped_names() -> anyhow::Result<()> {
    let server = Server::start()?;
    let stale = f64::from_bits(STALE_NAN_BITS);
    let req = WriteRequest {
        timeseries: vec![
            series(
                &[
                    ("__name__", "job:requests:rate5m"),
                    ("instance", "localhost:9090"),
                    ("job", "api"),
                ],
                &[
                    (0.1, T_MS + 1),
                    (2.0, T_MS + 15_000),
                    (-1e-300, T_MS + 30_000),
                ],
            ),
            series(
                &[
                    ("__name__", "up"),
                    ("instance", "localhost:9090"),
                    ("job", "api"),
                ],
                &[
                    (1.0, T_MS),
                    (stale, T_MS + 15_000),
                    (f64::NAN, T_MS + 20_000),
                ],
            ),
            series(
                &[
                    ("__name__", "http_request_duration_seconds_bucket"),
                    ("le", "+Inf"),
                ],
                &[(42.0, T_MS)],
            ),
        ],
    };
    let (status, body) = send(&server, &encode_write_request(&req))?;
    assert_eq!((status, body.as_str()), (204, ""));
    let instance = ("instance", "localhost__x3A_9090");
    assert_eq!(
        floats(
            &server,
            "job__x3A_requests__x3A_rate5m",
            &[instance, ("job", "api")]
        )?,
        vec![
            (T_MS + 1, 0.1f64.to_bits()),
            (T_MS + 15_000, 2.0f64.to_bits()),
            (T_MS + 30_000, (-1e-300f64).to_bits())
        ]
    );
    // The stale marker ended the series without being stored; the NaN is skipped.
    assert_eq!(
        floats(&server, "up", &[instance])?,
        vec![(T_MS, 1.0f64.to_bits())]
    );
    assert_eq!(
        floats(
            &server,
            "http_request_duration_seconds_bucket",
            &[("le", "__x2B_Inf")]
        )?,
        vec![(T_MS, 42.0f64.to_bits())]
    );
    Ok(())
}

#[test]
fn bad_requests_get_400_and_the_good_samples_are_kept() -> anyhow::Result<()> {
    let server = Server::start()?;
    let req = WriteRequest {
        timeseries: vec![
            series(&[("job", "nameless")], &[(1.0, T_MS)]),
            series(&[("__name__", "kept"), ("job", "a")], &[(7.0, T_MS)]),
            series(&[("__name__", "tagless")], &[(8.0, T_MS)]),
        ],
    };
    let (status, body) = send(&server, &encode_write_request(&req))?;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.starts_with("1 of 3 samples stored; refused:\n"),
        "{body}"
    );
    assert!(
        body.contains("{job=\"nameless\"}: 1 samples without a metric name"),
        "{body}"
    );
    assert!(body.contains("tagless{}: Need at least one tag"), "{body}");
    assert_eq!(
        floats(&server, "kept", &[])?,
        vec![(T_MS, 7.0f64.to_bits())]
    );
    // Not snappy, not protobuf: 400, not retried.
    let (status, body) = send(&server, b"definitely not snappy")?;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("snappy"), "{body}");
    // A snappy block (length 6, one literal of 6 bytes) around bytes that are no protobuf.
    let wrapped = [6, 5 << 2, 0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f];
    let (status, body) = send(&server, &wrapped)?;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("protobuf"), "{body}");
    // An empty request is fine.
    let empty = encode_write_request(&WriteRequest { timeseries: vec![] });
    assert_eq!(send(&server, &empty)?.0, 204);
    let (status, _) = server.http("GET", "/api/v1/write", b"")?;
    assert_eq!(status, 405);
    let (_, metrics) = server.http("GET", "/metrics", b"")?;
    for line in [
        "strata_points_stored_total{protocol=\"remote_write\"} 1",
        "strata_points_rejected_total{protocol=\"remote_write\",reason=\"bad_name\"} 1",
        "strata_points_rejected_total{protocol=\"remote_write\",reason=\"bad_tags\"} 1",
        "strata_points_rejected_total{protocol=\"remote_write\",reason=\"bad_syntax\"} 2",
    ] {
        assert!(metrics.contains(line), "no {line} in\n{metrics}");
    }
    Ok(())
}

/// A `prometheus` process, killed when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Prometheus binary: `STRATA_PROMETHEUS`, or Debian's `/usr/bin/prometheus`.
fn prometheus_binary() -> anyhow::Result<std::path::PathBuf> {
    let bin = std::env::var_os("STRATA_PROMETHEUS")
        .map_or_else(|| "/usr/bin/prometheus".into(), std::path::PathBuf::from);
    if !bin.exists() {
        bail!(
            "Prometheus is not installed at {}: install Debian's package \
             (apt-get install -y --no-install-recommends prometheus; .ci/run does) or set \
             STRATA_PROMETHEUS",
            bin.display()
        );
    }
    Ok(bin)
}

/// Starts Prometheus on 127.0.0.1, scraping `target` every second and remote-writing to it.
fn start_prometheus(target: SocketAddr) -> anyhow::Result<Prometheus> {
    let bin = prometheus_binary()?;
    let dir = tempfile::tempdir()?;
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
         scrape_configs:\n  - job_name: strata\n    static_configs:\n      - targets: ['{target}']\n\
         remote_write:\n  - url: http://{target}/api/v1/write\n    queue_config:\n      \
         batch_send_deadline: 1s\n      min_backoff: 100ms\n      max_backoff: 1s\n"
    );
    let config_path = dir.path().join("prometheus.yml");
    std::fs::write(&config_path, config)?;
    // A free port; Prometheus does not report the port it got for `:0`.
    let addr = TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let child = Command::new(bin)
        .arg(format!("--config.file={}", config_path.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={addr}"))
        .arg("--log.level=warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting prometheus")?;
    Ok(Prometheus {
        child,
        addr,
        _dir: dir,
    })
}

/// `GET path` on `addr`; returns the body of a 200 answer.
fn get(addr: SocketAddr, path: &str) -> anyhow::Result<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").context("no header end")?;
    anyhow::ensure!(head.starts_with("HTTP/1.1 200"), "GET {path}: {head}");
    Ok(body.to_string())
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The raw samples Prometheus holds for `selector` in the minute up to `at_ms` (now when
/// `None`): (ms, value bits).
fn prometheus_samples(
    p: &Prometheus,
    selector: &str,
    at_ms: Option<i64>,
) -> anyhow::Result<Vec<(i64, u64)>> {
    let mut path = format!(
        "/api/v1/query?query={}",
        url_encode(&format!("{selector}[1m]"))
    );
    if let Some(at) = at_ms {
        path.push_str(&format!("&time={}.{:03}", at / 1000, at % 1000));
    }
    let body = get(p.addr, &path)?;
    let v: Json = serde_json::from_str(&body)?;
    let result = v["data"]["result"].as_array().context("no result")?;
    let Some(series) = result.first() else {
        return Ok(Vec::new());
    };
    series["values"]
        .as_array()
        .context("no values")?
        .iter()
        .map(|pair| {
            let ts = pair[0].as_f64().context("no time")?;
            let value: f64 = pair[1].as_str().context("no value")?.parse()?;
            Ok(((ts * 1000.0).round() as i64, value.to_bits()))
        })
        .collect()
}

#[test]
fn a_real_prometheus_scrapes_and_remote_writes_exactly() -> anyhow::Result<()> {
    let server = Server::start()?;
    let prom = start_prometheus(server.addr)?;
    let instance = server.addr.to_string();
    let mapped_instance = strata_tsdb::escape_name(&instance).into_owned();
    // Three series of different kinds: a gauge Prometheus makes, a counter of Strata's own,
    // and a histogram bucket whose `le="+Inf"` needs mapping.
    let checks: [Check<'_>; 3] = [
        (
            "up",
            "up".into(),
            vec![("instance", &mapped_instance), ("job", "strata")],
        ),
        (
            "strata_http_request_duration_seconds_count{endpoint=\"metrics\"}",
            "strata_http_request_duration_seconds_count".into(),
            vec![("instance", &mapped_instance), ("endpoint", "metrics")],
        ),
        (
            "strata_http_request_duration_seconds_bucket{endpoint=\"write\",le=\"+Inf\"}",
            "strata_http_request_duration_seconds_bucket".into(),
            vec![
                ("instance", &mapped_instance),
                ("endpoint", "write"),
                ("le", "__x2B_Inf"),
            ],
        ),
    ];
    // Wait for a few scrapes, then compare a window that ends a few scrapes ago, so that it
    // no longer changes while remote write catches up.
    let deadline = Instant::now() + Duration::from_secs(50);
    let at_ms = loop {
        // Connection refused until Prometheus is up.
        let up = prometheus_samples(&prom, "up", None);
        if let Ok(up) = &up
            && up.len() >= 6
        {
            break up[up.len() - 3].0;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "Prometheus did not scrape Strata 6 times within 50 s: {up:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    loop {
        let Err(e) = compare(&server, &prom, &checks, at_ms) else {
            return Ok(());
        };
        anyhow::ensure!(
            Instant::now() < deadline,
            "Prometheus' samples did not all reach Strata within 50 s: {e:#}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A series to compare: the Prometheus selector, and the metric and tags Strata stores it as.
type Check<'a> = (&'a str, String, Vec<(&'a str, &'a str)>);

/// Checks that each series has at least three samples in Prometheus in the minute up to
/// `at_ms`, and that Strata holds exactly the same (timestamp, value) pairs there.
fn compare(
    server: &Server,
    prom: &Prometheus,
    checks: &[Check<'_>],
    at_ms: i64,
) -> anyhow::Result<()> {
    for (selector, metric, tags) in checks {
        let want = prometheus_samples(prom, selector, Some(at_ms))?;
        anyhow::ensure!(
            want.len() >= 3,
            "{selector}: Prometheus has {} samples",
            want.len()
        );
        let (first, last) = (want[0].0, want[want.len() - 1].0);
        let found = server.query_raw(metric, tags, first, last)?;
        let [(_, points)] = found.as_slice() else {
            bail!("{metric} {tags:?}: expected one series in Strata, got {found:?}");
        };
        let got: Vec<(i64, u64)> = points
            .iter()
            .map(|(ts, v)| (*ts, v.as_f64().map_or(0, f64::to_bits)))
            .collect();
        anyhow::ensure!(
            points.iter().all(|(_, v)| v.is_f64()),
            "{metric}: a value is not a float: {points:?}"
        );
        anyhow::ensure!(
            got == want,
            "{selector}: Prometheus {want:?}, Strata {got:?}"
        );
    }
    Ok(())
}

/// Names with characters OpenTSDB does not allow, written by remote write and by the line
/// protocol, come back through the PromQL endpoints exactly as they were written.
#[test]
fn odd_names_read_back_through_promql() -> anyhow::Result<()> {
    use crate::promql::get;
    let server = Server::start()?;
    let odd = [
        ("__name__", "job:http_requests:rate5m"),
        ("instance", "localhost:9090"),
        ("le", "+Inf"),
        ("path", "/a b,c=d|e"),
        ("x__xy", "caf\u{e9} \u{1f642}"),
        ("odd key", "plain"),
    ];
    let req = WriteRequest {
        timeseries: vec![
            series(&odd, &[(1.5, T_MS)]),
            series(
                &[
                    ("__name__", "job:http_requests:rate5m"),
                    ("instance", "other:1"),
                ],
                &[(2.5, T_MS)],
            ),
        ],
    };
    let (status, body) = send(&server, &encode_write_request(&req))?;
    anyhow::ensure!(status == 204, "remote write: {status} {body}");
    // The line protocol: measurement `disk io` and field `read ops`, tag `host=server 01`.
    let line = format!("disk\\ io,host=server\\ 01 read\\ ops=7i {}\n", T_MS / 1000);
    let (status, reply) = server.http("POST", "/write?db=x&precision=s", line.as_bytes())?;
    anyhow::ensure!(status == 204, "line protocol: {status} {reply}");

    let time = (T_MS / 1000 + 1).to_string();
    let want_labels: serde_json::Map<String, Json> = odd
        .iter()
        .map(|(k, v)| (k.to_string(), Json::from(*v)))
        .collect();
    let (status, j) = get(
        &server,
        "/api/v1/query",
        &[
            (
                "query",
                r#"job:http_requests:rate5m{instance="localhost:9090"}"#,
            ),
            ("time", &time),
        ],
    )?;
    assert_eq!(status, 200, "{j}");
    assert_eq!(j["data"]["result"].as_array().map(Vec::len), Some(1), "{j}");
    assert_eq!(
        j["data"]["result"][0]["metric"],
        Json::Object(want_labels.clone())
    );
    assert_eq!(j["data"]["result"][0]["value"][1], "1.5");
    // Every odd label matches as written, with `=` and with a regex.
    for (k, v) in &odd[1..] {
        for op in ["=", "=~"] {
            let value = if op == "=" {
                v.to_string()
            } else {
                regex_escape(v)
            };
            let value = value.replace('\\', "\\\\").replace('"', "\\\"");
            let query = format!(r#"{{"job:http_requests:rate5m", "{k}"{op}"{value}"}}"#);
            let (status, j) = get(
                &server,
                "/api/v1/query",
                &[("query", &query), ("time", &time)],
            )?;
            assert_eq!(status, 200, "{query}: {j}");
            assert_eq!(j["data"]["result"][0]["value"][1], "1.5", "{query}: {j}");
            assert_eq!(
                j["data"]["result"].as_array().map(Vec::len),
                Some(1),
                "{query}: {j}"
            );
        }
    }
    let (_, j) = get(
        &server,
        "/api/v1/query",
        &[
            ("query", r#"{"disk io.read ops", host="server 01"}"#),
            ("time", &time),
        ],
    )?;
    assert_eq!(
        j["data"]["result"][0]["metric"],
        serde_json::json!({"__name__": "disk io.read ops", "host": "server 01"}),
        "{j}"
    );
    assert_eq!(j["data"]["result"][0]["value"][1], "7");

    let (status, j) = get(
        &server,
        "/api/v1/series",
        &[("match[]", r#"{__name__=~"job:.*", instance=~"local.*"}"#)],
    )?;
    assert_eq!(status, 200, "{j}");
    assert_eq!(j["data"], Json::Array(vec![Json::Object(want_labels)]));

    let (_, j) = get(&server, "/api/v1/labels", &[])?;
    assert_eq!(
        j["data"],
        serde_json::json!([
            "__name__", "host", "instance", "le", "odd key", "path", "x__xy"
        ])
    );
    let (_, j) = get(&server, "/api/v1/label/__name__/values", &[])?;
    assert_eq!(
        j["data"],
        serde_json::json!(["disk io.read ops", "job:http_requests:rate5m"])
    );
    let (_, j) = get(&server, "/api/v1/label/instance/values", &[])?;
    assert_eq!(j["data"], serde_json::json!(["localhost:9090", "other:1"]));
    let (_, j) = get(&server, "/api/v1/label/path/values", &[])?;
    assert_eq!(j["data"], serde_json::json!(["/a b,c=d|e"]));
    let (_, j) = get(&server, "/api/v1/label/x__xy/values", &[])?;
    assert_eq!(j["data"], serde_json::json!(["caf\u{e9} \u{1f642}"]));
    // A label name that is not a legacy name goes in the path in Prometheus' `U__` escape.
    let (_, j) = get(
        &server,
        "/api/v1/label/U__odd_20_key/values",
        &[("match[]", "job:http_requests:rate5m")],
    )?;
    assert_eq!(j["data"], serde_json::json!(["plain"]));
    Ok(())
}

/// `s` as a regular expression that matches exactly `s`.
fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A remote-write or line-protocol request is answered once its points are in the WAL, while
/// the engine may still be applying them: a query sent right after each answer finds every
/// point answered, and so does a restart after `kill -9`.
#[test]
fn answered_writes_are_read_at_once_and_survive_kill_9() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Server::start_in(dir.path(), &[])?;
    let per_round = 50;
    let rounds = 20;
    let value = |n: i64| n as f64 + 0.25;
    for round in 0..rounds {
        let ns: Vec<i64> = (round * per_round..(round + 1) * per_round).collect();
        let samples: Vec<(f64, i64)> = ns.iter().map(|&n| (value(n), T_MS + n * 1000)).collect();
        let req = WriteRequest {
            timeseries: vec![series(&[("__name__", "acked_rw"), ("host", "h")], &samples)],
        };
        let (status, body) = send(&server, &encode_write_request(&req))?;
        assert_eq!((status, body.as_str()), (204, ""));
        let lines: String = ns
            .iter()
            .map(|&n| format!("acked,host=h lp={} {}\n", value(n), T_MS + n * 1000))
            .collect();
        let (status, body) = server.http("POST", "/write?db=x&precision=ms", lines.as_bytes())?;
        assert_eq!((status, body.as_str()), (204, ""));
        let want = ((round + 1) * per_round) as usize;
        assert_eq!(floats(&server, "acked_rw", &[("host", "h")])?.len(), want);
        assert_eq!(floats(&server, "acked.lp", &[("host", "h")])?.len(), want);
    }
    drop(server);
    let tsdb = strata_tsdb::Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default())?;
    for metric in ["acked_rw", "acked.lp"] {
        let found = tsdb.read(&strata_tsdb::ReadRequest::metric(
            metric,
            &[],
            0,
            i64::MAX / 2,
        ))?;
        let [series] = found.as_slice() else {
            bail!("{metric}: expected one series, got {}", found.len());
        };
        let want: Vec<(i64, strata_tsdb::Value)> = (0..rounds * per_round)
            .map(|n| (T_MS + n * 1000, strata_tsdb::Value::Float(value(n))))
            .collect();
        assert_eq!(series.points, want, "{metric}");
    }
    Ok(())
}
