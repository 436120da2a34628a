//! Hostile and slow clients: connections that send nothing or half a request, oversized
//! bodies, idle connections. None may lock other clients out or hang the server.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::harness::Server;

/// Reads from `s` until the peer closes it or `within` passes; returns what came and whether
/// the peer closed.
fn read_until_close(s: &mut TcpStream, within: Duration) -> anyhow::Result<(String, bool)> {
    let deadline = Instant::now() + within;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok((String::from_utf8_lossy(&out).into_owned(), false));
        }
        s.set_read_timeout(Some(left))?;
        match s.read(&mut buf) {
            Ok(0) => return Ok((String::from_utf8_lossy(&out).into_owned(), true)),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            // A reset is a close too.
            Err(_) => return Ok((String::from_utf8_lossy(&out).into_owned(), true)),
        }
    }
}

fn metric(server: &Server, name: &str) -> anyhow::Result<Option<f64>> {
    let (status, text) = server.http("GET", "/metrics", b"")?;
    anyhow::ensure!(status == 200, "{text}");
    Ok(crate::metrics::sample(&text, name))
}

/// With every slot of `--max-connections 32` held by sockets that send nothing or half a
/// header, a new client is still served within 20 s, over HTTP and over telnet; the silent
/// sockets are closed. This runs with the default timeouts.
#[test]
fn silent_and_half_sent_sockets_do_not_lock_new_clients_out() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Server::start_in(dir.path(), &["--max-connections", "32"])?;
    let mut hostile = Vec::new();
    for i in 0..32 {
        let mut s = TcpStream::connect(server.addr)?;
        match i % 4 {
            0 | 1 => {}
            2 => s.write_all(b"GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\n")?,
            _ => s.write_all(b"POST /api/put HT")?,
        }
        hostile.push(s);
    }
    let mut client = TcpStream::connect(server.addr)?;
    client.write_all(b"GET /api/version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
    let (reply, closed) = read_until_close(&mut client, Duration::from_secs(20))?;
    assert!(closed && reply.starts_with("HTTP/1.1 200"), "{reply:?}");
    let mut telnet = TcpStream::connect(server.addr)?;
    telnet.set_read_timeout(Some(Duration::from_secs(20)))?;
    telnet.write_all(b"version\n")?;
    let mut line = String::new();
    BufReader::new(telnet.try_clone()?).read_line(&mut line)?;
    assert!(line.starts_with("net.opentsdb"), "{line:?}");
    // The hostile sockets were closed by the server.
    for s in &mut hostile {
        let (_, closed) = read_until_close(s, Duration::from_secs(20))?;
        assert!(closed);
    }
    let timed_out = |phase: &str| {
        metric(
            &server,
            &format!("strata_connections_timed_out_total{{phase=\"{phase}\"}}"),
        )
    };
    assert_eq!(timed_out("first_byte")?, Some(16.0));
    assert_eq!(timed_out("http_header")?, Some(16.0));
    Ok(())
}

/// The header timeout runs from a request's first byte; the idle timeout, between requests,
/// is separate and longer. A body that stops gets a 408.
#[test]
fn http_header_idle_and_body_timeouts() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Server::start_in(
        dir.path(),
        &[
            "--header-timeout-ms",
            "300",
            "--http-idle-timeout-ms",
            "5000",
        ],
    )?;
    // Idle past the header timeout between two requests: still served.
    let mut s = TcpStream::connect(server.addr)?;
    let get = b"GET /api/version HTTP/1.1\r\nHost: x\r\n\r\n";
    s.write_all(get)?;
    let mut reader = BufReader::new(s.try_clone()?);
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let read_response = |reader: &mut BufReader<TcpStream>| -> anyhow::Result<String> {
        let mut status = String::new();
        reader.read_line(&mut status)?;
        let mut len = 0;
        loop {
            let mut h = String::new();
            reader.read_line(&mut h)?;
            if h == "\r\n" || h.is_empty() {
                break;
            }
            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse()?;
            }
        }
        let mut body = vec![0; len];
        reader.read_exact(&mut body)?;
        Ok(status)
    };
    assert!(read_response(&mut reader)?.starts_with("HTTP/1.1 200"));
    std::thread::sleep(Duration::from_millis(1000));
    s.write_all(get)?;
    assert!(read_response(&mut reader)?.starts_with("HTTP/1.1 200"));
    // Then idle past the idle timeout: closed.
    let (_, closed) = read_until_close(&mut s, Duration::from_secs(20))?;
    assert!(closed);
    // Half a header, then nothing: closed by the header timeout (the counts below tell which
    // timeout closed each connection).
    let mut s = TcpStream::connect(server.addr)?;
    s.write_all(b"GET /api/version HTTP/1.1\r\nHo")?;
    let (reply, closed) = read_until_close(&mut s, Duration::from_secs(20))?;
    assert!(closed && reply.is_empty(), "{reply:?}");
    // A body that stops half-way: 408.
    let mut s = TcpStream::connect(server.addr)?;
    s.write_all(b"POST /api/put HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n[{\"me")?;
    let (reply, closed) = read_until_close(&mut s, Duration::from_secs(20))?;
    assert!(closed && reply.starts_with("HTTP/1.1 408"), "{reply:?}");
    assert!(reply.contains("Request body timed out"), "{reply:?}");
    for (phase, n) in [("http_idle", 1.0), ("http_header", 1.0), ("http_body", 1.0)] {
        let name = format!("strata_connections_timed_out_total{{phase=\"{phase}\"}}");
        assert_eq!(metric(&server, &name)?, Some(n), "{phase}");
    }
    Ok(())
}

/// Telnet connections may idle by default (tcollector writes every 15 s), whatever the HTTP
/// timeouts; with `--telnet-idle-timeout-ms` an idle one is closed, its puts stored.
#[test]
fn telnet_idles_by_default_and_times_out_when_asked() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Server::start_in(
        dir.path(),
        &[
            "--header-timeout-ms",
            "300",
            "--http-idle-timeout-ms",
            "300",
        ],
    )?;
    let mut s = server.connect()?;
    let mut reader = BufReader::new(s.try_clone()?);
    for _ in 0..2 {
        s.write_all(b"version\n")?;
        let mut line = String::new();
        reader.read_line(&mut line)?;
        assert!(line.starts_with("net.opentsdb"), "{line:?}");
        reader.read_line(&mut line)?;
        // Idle for several times every HTTP timeout.
        std::thread::sleep(Duration::from_millis(1500));
    }
    drop(server);

    let server = Server::start_in(dir.path(), &["--telnet-idle-timeout-ms", "500"])?;
    let mut s = server.connect()?;
    s.write_all(
        b"put e2e.idle 1356998400 1 host=a\nput e2e.idle 1356998410 2 host=a\nput e2e.idle 1356",
    )?;
    let (reply, closed) = read_until_close(&mut s, Duration::from_secs(20))?;
    assert!(closed && reply.is_empty(), "{reply:?}");
    let (status, body) = server.http(
        "GET",
        "/api/query?start=1356998000&end=1356999000&m=sum:e2e.idle",
        b"",
    )?;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(v[0]["dps"].as_object().map(|d| d.len()), Some(2), "{body}");
    let name = "strata_connections_timed_out_total{phase=\"telnet_idle\"}";
    assert_eq!(metric(&server, name)?, Some(1.0));
    Ok(())
}

/// A request that declares a body over the limit gets its 413 at once, without sending the
/// body, with or without `Expect: 100-continue`, and the connection closes.
#[test]
fn a_declared_oversized_body_gets_413_at_once() -> anyhow::Result<()> {
    let server = Server::start()?;
    let default_limit = 64u64 << 20;
    for (path, length) in [
        ("/api/put", 10_000_000_000),
        ("/api/query", default_limit + 1),
    ] {
        for expect in ["", "Expect: 100-continue\r\n"] {
            let mut s = TcpStream::connect(server.addr)?;
            let head = format!(
                "POST {path} HTTP/1.1\r\nHost: x\r\n{expect}Content-Length: {length}\r\n\r\n"
            );
            s.write_all(head.as_bytes())?;
            let (reply, closed) = read_until_close(&mut s, Duration::from_secs(10))?;
            assert!(closed, "{path} {expect:?}: not closed: {reply:?}");
            assert!(
                reply.starts_with("HTTP/1.1 413"),
                "{path} {expect:?}: {reply:?}"
            );
            assert!(!reply.contains("100 Continue"), "{reply:?}");
            assert!(reply.contains("max_body_bytes"), "{reply:?}");
        }
    }
    // At the limit, the body is read.
    let mut s = TcpStream::connect(server.addr)?;
    let head = format!(
        "POST /api/put HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: {default_limit}\r\n\r\n"
    );
    s.write_all(head.as_bytes())?;
    let mut continued = [0u8; 25];
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.read_exact(&mut continued)?;
    assert_eq!(&continued, b"HTTP/1.1 100 Continue\r\n\r\n");
    Ok(())
}

/// Query limits are on by default and settable; a query past one gets OpenTSDB's 413, whose
/// message gives the limit and whose details name the settings.
#[test]
fn query_limits_refuse_with_413_naming_the_limit() -> anyhow::Result<()> {
    let server = Server::start()?;
    let (status, body) = server.http("GET", "/api/config", b"")?;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(v["tsd.query.limits.data_points.default"], "100000000");
    assert_eq!(v["strata.query_max_series"], "500000");
    drop(server);

    let dir = tempfile::tempdir()?;
    let server = Server::start_in(
        dir.path(),
        &["--query-max-series", "3", "--query-max-data-points", "10"],
    )?;
    let mut put = String::from("[");
    for host in 0..4 {
        put.push_str(&format!(
            r#"{{"metric":"e2e.wide","timestamp":1356998400,"value":{host},"tags":{{"host":"h{host}"}}}},"#
        ));
    }
    for i in 0..11 {
        put.push_str(&format!(
            r#"{{"metric":"e2e.long","timestamp":{},"value":{i},"tags":{{"host":"a"}}}},"#,
            1_356_998_400 + i
        ));
    }
    put.pop();
    put.push(']');
    let (status, body) = server.http("POST", "/api/put", put.as_bytes())?;
    assert_eq!(status, 204, "{body}");
    let query = |m: &str| {
        server.http(
            "GET",
            &format!("/api/query?start=1356998000&end=1357000000&m={m}"),
            b"",
        )
    };
    let (status, body) = query("sum:e2e.wide")?;
    assert_eq!(status, 413, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body)?;
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("4 time series, more than our limit of 3"),
        "{body}"
    );
    let details = v["error"]["details"].as_str().unwrap_or_default();
    assert!(details.contains("query_max_series"), "{body}");
    let (status, body) = query("sum:e2e.wide%7Bhost=h1%7Ch2%7D")?;
    assert_eq!(status, 200, "{body}");
    let (status, body) = query("sum:e2e.long")?;
    assert_eq!(status, 413, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body)?;
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("more than our limit of 10 data points"),
        "{body}"
    );
    let details = v["error"]["details"].as_str().unwrap_or_default();
    assert!(details.contains("query_max_data_points"), "{body}");
    Ok(())
}
