//! Partitioned ingest against a real S3 server (SeaweedFS): two writers owning disjoint salt
//! buckets of one prefix share UIDs through the bucket, each refuses the other's points, and a
//! third writer whose buckets overlap theirs is refused at start.

use std::io::{BufRead, BufReader, Write};
use std::process::Command;

use anyhow::Context;

use crate::harness::Server;
use crate::seaweed::{BUCKET, Seaweed};

/// A writer of salt buckets `range` of `s3://strata/parts`, flushing every 200 ms.
fn part_writer(seaweed: &Seaweed, range: &str, dir: &std::path::Path) -> anyhow::Result<Server> {
    Server::start_with_env(
        dir,
        &[
            "--store",
            &format!("s3://{BUCKET}/parts"),
            "--s3-endpoint",
            &seaweed.endpoint,
            "--store-flush-interval-ms",
            "200",
            "--salt-buckets",
            range,
        ],
        &seaweed.aws_env(),
    )
}

/// `/api/uid/assign?query` for names new to `server`: their UIDs by kind.
fn uids_of(server: &Server, query: &str) -> anyhow::Result<serde_json::Value> {
    let (status, reply) = server.http("GET", &format!("/api/uid/assign?{query}"), b"")?;
    let v: serde_json::Value = serde_json::from_str(&reply)?;
    anyhow::ensure!(status == 200, "assign {query}: {status} {reply}");
    Ok(v)
}

/// Posts `points` with `details`; returns the reply, which is a 400 as some are refused.
fn put(server: &Server, points: &[serde_json::Value]) -> anyhow::Result<serde_json::Value> {
    let body = serde_json::Value::from(points.to_vec()).to_string();
    let (status, reply) = server.http("POST", "/api/put?details&sync", body.as_bytes())?;
    anyhow::ensure!(status == 400, "put: {status} {reply}");
    Ok(serde_json::from_str(&reply)?)
}

#[test]
fn two_writers_on_disjoint_salt_buckets_share_uids_and_refuse_other_buckets() -> anyhow::Result<()>
{
    let seaweed = Seaweed::start()?;
    let (da, db) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let a = part_writer(&seaweed, "0-9", da.path())?;
    let b = part_writer(&seaweed, "10-19", db.path())?;

    // Names new to both: assigned on b first, then a finds the same UIDs in the bucket.
    let query = "metric=parts.cpu,parts.mem&tagk=host,dc&tagv=web01,web02,eu";
    let on_b = uids_of(&b, query)?;
    let on_a = uids_of(&a, query)?;
    for (kind, name) in [
        ("metric", "parts.cpu"),
        ("metric", "parts.mem"),
        ("tagk", "host"),
        ("tagk", "dc"),
        ("tagv", "web01"),
        ("tagv", "eu"),
    ] {
        let uid = on_b[kind][name].as_str().context("no UID")?;
        assert_eq!(on_a[kind][name].as_str(), Some(uid), "{kind} {name}");
    }
    // Two different names never share a UID.
    assert_ne!(on_a["metric"]["parts.cpu"], on_a["metric"]["parts.mem"]);

    // Every point is sent to both writers: exactly one stores it.
    let points: Vec<serde_json::Value> = (0..40_i64)
        .map(|i| {
            serde_json::json!({"metric": "parts.cpu", "timestamp": 1_700_000_000 + i,
                               "value": i * 1_000_000_007,
                               "tags": {"host": format!("h{i}"), "dc": "eu"}})
        })
        .collect();
    let (ra, rb) = (put(&a, &points)?, put(&b, &points)?);
    let (ok_a, ok_b) = (
        ra["success"].as_u64().context("no success")?,
        rb["success"].as_u64().context("no success")?,
    );
    assert_eq!(ok_a + ok_b, 40, "{ra} {rb}");
    assert!(ok_a > 0 && ok_b > 0, "{ra} {rb}");
    assert_eq!(ra["failed"].as_u64(), Some(40 - ok_a), "{ra}");
    let error = ra["errors"][0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("salt bucket")
            && error.contains("owns salt buckets 0-9 of 20")
            && error.contains("metric=parts.cpu"),
        "{ra}"
    );

    // Each writer answers with exactly the points it stored.
    let mut stored = Vec::new();
    let mut on_a = Vec::new();
    for (w, server) in [&a, &b].into_iter().enumerate() {
        for (tags, dps) in server.query_raw("parts.cpu", &[], 0, 2_000_000_000_000)? {
            let host = tags["host"].as_str().context("no host")?.to_string();
            let i: i64 = host.trim_start_matches('h').parse()?;
            assert_eq!(
                dps,
                vec![(
                    (1_700_000_000 + i) * 1000,
                    serde_json::Value::from(i * 1_000_000_007)
                )],
                "{host}"
            );
            stored.push(i);
            if w == 0 {
                on_a.push(i);
            }
        }
    }
    stored.sort_unstable();
    assert_eq!(stored, (0..40).collect::<Vec<i64>>());

    // Telnet: a wrong-writer point gets an error line naming the salt and the range.
    let refused = (0..40)
        .find(|i| !on_a.contains(i))
        .context("no point refused by a")?;
    let mut conn = a.connect()?;
    writeln!(
        conn,
        "put parts.cpu 1700000100 1 host=h{refused} dc=eu\nversion"
    )?;
    let mut line = String::new();
    BufReader::new(conn).read_line(&mut line)?;
    assert!(
        line.starts_with("put: illegal argument: salt bucket") && line.contains("0-9"),
        "{line}"
    );

    // A third writer whose buckets overlap is refused at start, naming the owner.
    let dc = tempfile::tempdir()?;
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("serve")
        .arg("--data-dir")
        .arg(dc.path())
        .args(["--bind", "127.0.0.1", "--port", "0"])
        .args(["--store", &format!("s3://{BUCKET}/parts")])
        .args(["--s3-endpoint", &seaweed.endpoint])
        .args(["--salt-buckets", "5-12"])
        .envs(seaweed.aws_env())
        .env("RUST_LOG", "warn")
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("salt bucket 5") && stderr.contains("salts-000-009"),
        "{stderr}"
    );

    // A restart with the same range takes its own tree over, points and UIDs included.
    a.stop()?;
    let a = part_writer(&seaweed, "0-9", da.path())?;
    let fresh = uids_of(&a, "metric=parts.after")?;
    assert_eq!(
        uids_of(&b, "metric=parts.after")?["metric"]["parts.after"],
        fresh["metric"]["parts.after"]
    );
    assert_eq!(
        a.query_raw("parts.cpu", &[], 0, 2_000_000_000_000)?.len() as u64,
        ok_a
    );
    Ok(())
}
