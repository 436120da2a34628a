//! Retention end to end: `--retention` and `[[retention_rules]]` refuse old points on telnet
//! and HTTP, count them in `/metrics`, hide them from queries, and show in `/api/config`.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::harness::Server;
use crate::metrics::{sample, telnet};

#[test]
fn old_points_are_refused_counted_and_shown_in_the_config() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("strata.toml");
    std::fs::write(
        &config,
        "[[retention_rules]]\nmetric = \"sys.cpu.*\"\nduration = \"1h\"\n\n\
         [[retention_rules]]\nmetric = \"keep.?\"\nduration = \"none\"\n",
    )?;
    let data = dir.path().join("data");
    let config = config.to_string_lossy().into_owned();
    let server = Server::start_in(&data, &["--retention", "2d", "--config", &config])?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() as i64;
    let (h, d) = (3600, 86_400);

    // Telnet: an error line per refused point; the rule beats the global retention.
    let replies = telnet(
        &server,
        &format!(
            "put sys.cpu.user {} 1 host=a\nput sys.mem {} 1 host=a\nput sys.mem {} 2 host=a\n\
             put keep.x {} 3 host=a\nput sys.cpu.user {now} 4 host=a\n",
            now - 2 * h,
            now - 3 * d,
            now - d,
            now - 300 * d,
        ),
    )?;
    assert_eq!(replies.len(), 2, "{replies:?}");
    for r in &replies {
        assert!(r.contains("older than the retention"), "{r}");
    }
    assert!(replies[0].contains("metric=sys.cpu.user") && replies[0].contains("1h"));
    assert!(replies[1].contains("metric=sys.mem") && replies[1].contains("2d"));

    // HTTP: the refused point in `details`, the other stored.
    let body = format!(
        r#"[{{"metric":"sys.cpu.user","timestamp":{},"value":5,"tags":{{"host":"b"}}}},
            {{"metric":"sys.cpu.user","timestamp":{now},"value":6,"tags":{{"host":"b"}}}}]"#,
        now - 2 * h
    );
    let (status, reply) = server.http("POST", "/api/put?details", body.as_bytes())?;
    assert_eq!(status, 400, "{reply}");
    let v: serde_json::Value = serde_json::from_str(&reply)?;
    assert_eq!(
        (v["success"].as_u64(), v["failed"].as_u64()),
        (Some(1), Some(1))
    );
    let error = v["errors"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("older than the retention of 1h"), "{reply}");

    // Counted by protocol, with reason `expired`.
    let (status, scrape) = server.http("GET", "/metrics", b"")?;
    assert_eq!(status, 200);
    for (protocol, n) in [("telnet", 2.0), ("http", 1.0)] {
        let name =
            format!("strata_points_rejected_total{{protocol=\"{protocol}\",reason=\"expired\"}}");
        assert_eq!(sample(&scrape, &name), Some(n), "{name}");
    }
    assert_eq!(
        sample(&scrape, "strata_engine_expired_files_dropped"),
        Some(0.0)
    );

    // Queries return the kept points only.
    let (status, reply) = server.http("GET", "/api/query?start=400d-ago&m=sum:sys.mem", b"")?;
    assert_eq!(status, 200, "{reply}");
    let v: serde_json::Value = serde_json::from_str(&reply)?;
    let dps = v[0]["dps"].as_object().map(|m| m.len());
    assert_eq!(dps, Some(1), "{reply}");
    let (_, reply) = server.http("GET", "/api/query?start=400d-ago&m=sum:keep.x", b"")?;
    assert!(reply.contains(&(now - 300 * d).to_string()), "{reply}");

    // The settings, in OpenTSDB's key style.
    let (status, reply) = server.http("GET", "/api/config", b"")?;
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&reply)?;
    assert_eq!(v["tsd.storage.retention"], "2d");
    assert_eq!(v["tsd.storage.retention.rules"], "sys.cpu.*=1h,keep.?=none");
    server.stop()?;
    Ok(())
}

#[test]
fn a_bad_retention_is_refused_at_start() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "serve",
            "--bind",
            "127.0.0.1",
            "--port",
            "0",
            "--retention",
            "90x",
        ])
        .arg("--data-dir")
        .arg(dir.path())
        .output()?;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown unit"), "{err}");
    Ok(())
}
