//! Query results in other formats: Arrow IPC from `/api/query`, Parquet from `/api/export`.

use crate::harness::Server;

const START: i64 = 1_700_000_000;

fn server_with_points() -> anyhow::Result<Server> {
    let server = Server::start()?;
    let body = (0..10)
        .map(|i| {
            format!(
                r#"{{"metric":"exp.m","timestamp":{},"value":{i},"tags":{{"host":"h{}"}}}}"#,
                START + i * 10,
                i % 2
            )
        })
        .collect::<Vec<_>>()
        .join(",");
    let (status, text) = server.http("POST", "/api/put?sync", format!("[{body}]").as_bytes())?;
    anyhow::ensure!(status == 204, "put: {status} {text}");
    Ok(server)
}

#[test]
fn arrow_is_chosen_by_the_accept_header_and_json_stays_the_default() -> anyhow::Result<()> {
    let server = server_with_points()?;
    let path = format!("/api/query?start={START}&end={}&m=sum:exp.m", START + 100);
    let (status, head, body) = server.http_bytes(
        "GET",
        &path,
        "Accept: application/vnd.apache.arrow.stream\r\n",
        b"",
    )?;
    assert_eq!(status, 200);
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/vnd.apache.arrow.stream"),
        "{head}"
    );
    // An IPC stream starts with a continuation marker and ends with an end-of-stream marker.
    assert_eq!(body.get(..4), Some(&[0xFF, 0xFF, 0xFF, 0xFF][..]));
    assert_eq!(
        body.get(body.len() - 8..),
        Some(&[0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0][..])
    );
    let (status, head, body) = server.http_bytes("GET", &path, "", b"")?;
    assert_eq!(status, 200);
    assert!(
        head.to_ascii_lowercase().contains("application/json"),
        "{head}"
    );
    assert!(body.starts_with(b"[{\"metric\":\"exp.m\""));
    Ok(())
}

#[test]
fn export_writes_parquet_and_rejects_bad_requests() -> anyhow::Result<()> {
    let server = server_with_points()?;
    let path = format!(
        "/api/export?format=parquet&start={START}&end={}&m=none:exp.m",
        START + 100
    );
    let (status, head, body) = server.http_bytes("GET", &path, "", b"")?;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/vnd.apache.parquet"),
        "{head}"
    );
    assert!(body.starts_with(b"PAR1") && body.ends_with(b"PAR1"));
    let (status, text) = server.http("GET", "/api/export?format=csv&m=sum:exp.m", b"")?;
    assert_eq!(status, 400);
    assert!(text.contains("Unsupported export format: csv"), "{text}");
    let (status, text) = server.http("GET", "/api/export?start=1h-ago&m=sum:no.such", b"")?;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("\"error\""), "{text}");
    let (status, _) = server.http("DELETE", &path, b"")?;
    assert_eq!(status, 405);
    Ok(())
}

#[test]
fn strata_export_writes_the_same_parquet_offline() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    {
        let server = Server::start_in(dir.path(), &[])?;
        let body =
            format!(r#"{{"metric":"exp.m","timestamp":{START},"value":1,"tags":{{"host":"a"}}}}"#);
        let (status, _) = server.http("POST", "/api/put?sync", body.as_bytes())?;
        assert_eq!(status, 204);
        server.stop()?;
    }
    let out = dir.path().join("out.parquet");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["export", "--data-dir"])
        .arg(dir.path())
        .args([
            "--query",
            &format!("start={START}&end={}&m=sum:exp.m", START + 10),
            "--out",
        ])
        .arg(&out)
        .output()?;
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let bytes = std::fs::read(&out)?;
    assert!(bytes.starts_with(b"PAR1") && bytes.ends_with(b"PAR1"));
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["export", "--data-dir"])
        .arg(dir.path())
        .args(["--query", "start=1h-ago&m=sum:no.such", "--out"])
        .arg(&out)
        .output()?;
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("no.such"));
    Ok(())
}
