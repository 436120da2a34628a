//! The operator's storage settings end to end: settings fixed at creation, auto-create, and
//! block compression.

use std::path::Path;
use std::process::Command;

use serde_json::Value as Json;

use crate::harness::Server;

/// Total bytes of the files under `dir`.
fn dir_bytes(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            dir_bytes(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

#[test]
fn salt_buckets_and_uid_widths_are_fixed_when_the_directory_is_created() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Server::start_in(dir.path(), &["--salt-bucket-count", "8"])?;
    let (status, body) = server.http("GET", "/api/config", b"")?;
    assert_eq!(status, 200, "{body}");
    let config: Json = serde_json::from_str(&body)?;
    assert_eq!(config["tsd.storage.salt.buckets"], "8");
    assert!(server.stop()?.success());

    let refused = |args: &[&str]| -> anyhow::Result<String> {
        let out = Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(["serve", "--bind", "127.0.0.1", "--port", "0", "--data-dir"])
            .arg(dir.path())
            .args(args)
            .env("RUST_LOG", "warn")
            .output()?;
        assert!(!out.status.success(), "started with {args:?}");
        Ok(String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let err = refused(&["--salt-bucket-count", "20"])?;
    assert!(err.contains("fixed when the database is created"), "{err}");
    assert!(err.contains("has 8 buckets"), "{err}");
    let err = refused(&["--tagk-uid-width", "4"])?;
    assert!(err.contains("tagk_uid_width"), "{err}");

    // Unset, or the stored count, opens the directory.
    let server = Server::start_in(dir.path(), &[])?;
    let (_, body) = server.http("GET", "/api/config", b"")?;
    let config: Json = serde_json::from_str(&body)?;
    assert_eq!(config["tsd.storage.salt.buckets"], "8");
    assert!(server.stop()?.success());
    Ok(())
}

#[test]
fn with_auto_create_off_an_unknown_metric_is_refused_until_assigned() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Server::start_in(dir.path(), &["--auto-create-metrics=false"])?;
    let put = br#"{"metric":"new.metric","timestamp":1700000000,"value":1,"tags":{"host":"a"}}"#;
    let (status, body) = server.http("POST", "/api/put?details", put)?;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("Unknown metric"), "{body}");
    let (status, body) = server.http("GET", "/api/uid/assign?metric=new.metric", b"")?;
    assert_eq!(status, 200, "{body}");
    let (status, body) = server.http("POST", "/api/put?details", put)?;
    assert_eq!(status, 200, "{body}");
    let (_, body) = server.http("GET", "/api/config", b"")?;
    let config: Json = serde_json::from_str(&body)?;
    assert_eq!(config["tsd.core.auto_create_metrics"], "false");
    assert_eq!(config["tsd.core.auto_create_tagks"], "true");
    Ok(())
}

/// Writes the same series to a server started with `flags`, compacts, and returns the data
/// directory's size and one queried value.
fn stored_bytes(flags: &[&str]) -> anyhow::Result<(u64, Json)> {
    let dir = tempfile::tempdir()?;
    let server = Server::start_in(dir.path(), flags)?;
    let mut points = Vec::new();
    for host in 0..3000 {
        points.push(serde_json::json!({
            "metric": "disk.used", "timestamp": 1_700_000_000 + host % 60,
            "value": host * 7, "tags": {"host": format!("web-{host:05}"), "dc": "eu"}
        }));
    }
    let (status, body) = server.http("POST", "/api/put", &serde_json::to_vec(&points)?)?;
    assert_eq!(status, 204, "{body}");
    let (status, body) = server.http("POST", "/api/admin/compact", b"")?;
    assert_eq!(status, 200, "{body}");
    let (status, body) = server.http(
        "GET",
        "/api/query?start=1699999000&end=1700001000&m=sum:disk.used%7Bhost=web-00042%7D",
        b"",
    )?;
    assert_eq!(status, 200, "{body}");
    let answer: Json = serde_json::from_str(&body)?;
    assert!(server.stop()?.success());
    Ok((dir_bytes(dir.path())?, answer[0]["dps"].clone()))
}

#[test]
fn the_compression_setting_reaches_the_data_files() -> anyhow::Result<()> {
    let (plain, plain_dps) = stored_bytes(&["--compression", "none", "--bloom-filters=false"])?;
    let (zstd, zstd_dps) = stored_bytes(&["--compression", "zstd:19", "--block-size-kb", "16"])?;
    assert_eq!(plain_dps, serde_json::json!({"1700000042": 294}));
    assert_eq!(zstd_dps, plain_dps);
    assert!(
        zstd * 5 < plain * 4,
        "zstd files ({zstd} bytes) should be well under uncompressed ones ({plain} bytes)"
    );
    Ok(())
}

#[test]
fn modes_refuse_writes_or_queries_as_opentsdb_does() -> anyhow::Result<()> {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir()?;
    let put = br#"{"metric":"m","timestamp":1700000000,"value":1,"tags":{"host":"a"}}"#;
    let query = "/api/query?start=1699999000&end=1700001000&m=sum:m";

    let server = Server::start_in(dir.path(), &["--mode", "wo"])?;
    let (status, body) = server.http("POST", "/api/put", put)?;
    assert_eq!(status, 204, "{body}");
    let (status, body) = server.http("GET", query, b"")?;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("tsd.mode=wo"), "{body}");
    let (status, body) = server.http("GET", "/api/suggest?type=metrics&q=", b"")?;
    assert_eq!(status, 404, "{body}");
    let (status, body) = server.http("GET", "/api/version", b"")?;
    assert_eq!(status, 200, "{body}");
    assert!(server.stop()?.success());

    let server = Server::start_in(dir.path(), &["--mode", "ro"])?;
    let (status, body) = server.http("GET", query, b"")?;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""1700000000":1"#), "{body}");
    let (status, body) = server.http("POST", "/api/put", put)?;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("tsd.mode=ro"), "{body}");
    let (status, body) = server.http("GET", "/api/uid/assign?metric=other", b"")?;
    assert_eq!(status, 404, "{body}");
    let mut telnet = server.connect()?;
    telnet.write_all(b"put m 1700000060 2 host=a\nhelp\n")?;
    let mut lines = BufReader::new(telnet.try_clone()?).lines();
    assert_eq!(
        lines.next().transpose()?.as_deref(),
        Some("unknown command: put.  Try `help'.")
    );
    assert_eq!(
        lines.next().transpose()?.as_deref(),
        Some("available commands: stats dropcaches version exit help ")
    );
    let (_, body) = server.http("GET", query, b"")?;
    assert!(
        !body.contains("1700000060"),
        "the refused put was not stored: {body}"
    );
    let (_, body) = server.http("GET", "/api/config", b"")?;
    let config: Json = serde_json::from_str(&body)?;
    assert_eq!(config["tsd.mode"], "ro");
    Ok(())
}
