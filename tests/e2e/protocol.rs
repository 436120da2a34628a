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
    assert!(line.starts_with("net.opentsdb.tools "), "{line:?}");
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
