//! Partitioned ingest against a real S3 server (SeaweedFS): two writers owning disjoint salt
//! buckets of one prefix share UIDs through the bucket, each refuses the other's points, and a
//! third writer whose buckets overlap theirs is refused at start; a read replica on the
//! prefix answers over every writer's tree.

use std::io::{BufRead, BufReader, Write};
use std::process::Command;

use anyhow::Context;

use crate::harness::Server;
use crate::seaweed::{BUCKET, Seaweed};

/// A writer of salt buckets `range` of `s3://strata/parts`, flushing every 200 ms.
fn part_writer(seaweed: &Seaweed, range: &str, dir: &std::path::Path) -> anyhow::Result<Server> {
    part_writer_on(seaweed, "parts", range, dir)
}

/// [`part_writer`] on `s3://strata/<prefix>`.
fn part_writer_on(
    seaweed: &Seaweed,
    prefix: &str,
    range: &str,
    dir: &std::path::Path,
) -> anyhow::Result<Server> {
    Server::start_with_env(
        dir,
        &[
            "--store",
            &format!("s3://{BUCKET}/{prefix}"),
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

/// Point `(T + 10 k, value(i, k))` of host `h<i>` of `metric`, for hosts `0..20`.
fn host_points(metric: &str, k: i64, value: impl Fn(i64) -> i64) -> Vec<serde_json::Value> {
    (0..20_i64)
        .map(|i| {
            serde_json::json!({"metric": metric, "timestamp": 1_700_000_000 + 10 * k,
                               "value": value(i), "tags": {"host": format!("h{i}")}})
        })
        .collect()
}

/// The points of `m` (`sum:rd.cpu`, ...) as `(seconds, value)`.
fn aggregated(server: &Server, m: &str) -> anyhow::Result<Vec<Vec<(i64, i64)>>> {
    let reply = crate::s3::get_json(server, &format!("/api/query?start=1699999000&m={m}"))?;
    let mut out = Vec::new();
    for series in reply.as_array().context("not an array")? {
        let mut points = Vec::new();
        for (k, v) in series["dps"].as_object().context("no dps")? {
            points.push((k.parse::<i64>()?, v.as_i64().context("an integer")?));
        }
        points.sort_unstable();
        out.push(points);
    }
    Ok(out)
}

/// A host's number and its points as `(seconds, value)`.
type HostPoints = (i64, Vec<(i64, i64)>);

/// The points of every `rd.cpu` series by host number, as the `none` aggregator returns them.
fn per_host(server: &Server) -> anyhow::Result<Vec<HostPoints>> {
    let mut out = Vec::new();
    for (tags, dps) in server.query_raw("rd.cpu", &[], 0, 2_000_000_000_000)? {
        let host = tags["host"].as_str().context("no host")?;
        let i: i64 = host.trim_start_matches('h').parse()?;
        let mut points = Vec::new();
        for (ms, v) in dps {
            points.push((ms / 1000, v.as_i64().context("an integer")?));
        }
        out.push((i, points));
    }
    out.sort_unstable();
    Ok(out)
}

#[test]
fn a_read_replica_answers_over_every_writers_tree() -> anyhow::Result<()> {
    let seaweed = Seaweed::start()?;
    let (da, db, dr) = (
        tempfile::tempdir()?,
        tempfile::tempdir()?,
        tempfile::tempdir()?,
    );
    // Writer a first: the replica opens with a's tree only and finds b's when b starts.
    let a = part_writer_on(&seaweed, "readers", "0-9", da.path())?;
    let first = host_points("rd.cpu", 0, |i| i);
    let on_a = put(&a, &first)?["success"].as_u64().context("no success")?;
    assert!(on_a > 0 && on_a < 20, "{on_a} of 20 hosts are a's");
    let store = format!("s3://{BUCKET}/readers");
    let r = crate::s3::replica(&seaweed, &store, dr.path())?;
    assert_eq!(per_host(&r)?.len() as u64, on_a);

    let b = part_writer_on(&seaweed, "readers", "10-19", db.path())?;
    let on_b = put(&b, &first)?["success"].as_u64().context("no success")?;
    assert_eq!(on_a + on_b, 20);
    let second = host_points("rd.cpu", 1, |i| 100 * i);
    put(&a, &second)?;
    put(&b, &second)?;
    let want = |k: i64| -> Vec<HostPoints> {
        (0..20)
            .map(|i| {
                let all = [
                    (1_700_000_000, i),
                    (1_700_000_010, 100 * i),
                    (1_700_000_020, 7),
                ];
                (i, all[..k as usize].to_vec())
            })
            .collect()
    };
    // Both writers' points, b's tree found at a refresh.
    crate::s3::eventually("the replica reads both trees", || {
        Ok(per_host(&r)? == want(2))
    })?;
    assert_eq!(
        aggregated(&r, "sum:rd.cpu")?,
        vec![vec![(1_700_000_000, 190), (1_700_000_010, 19_000)]]
    );
    let hosts = crate::s3::get_json(&r, "/api/suggest?type=tagv&q=h&max=100")?;
    let mut want_hosts: Vec<String> = (0..20).map(|i| format!("h{i}")).collect();
    want_hosts.sort_unstable();
    assert_eq!(hosts, serde_json::json!(want_hosts));
    let lookup = crate::s3::get_json(&r, "/api/search/lookup?m=rd.cpu%7Bhost=*%7D&limit=100")?;
    assert_eq!(lookup["totalResults"], 20, "{lookup}");

    // New points and a new metric on either writer show after a refresh.
    let third = host_points("rd.cpu", 2, |_| 7);
    put(&a, &third)?;
    put(&b, &third)?;
    let new = host_points("rd.new", 0, |i| i);
    put(&a, &new)?;
    put(&b, &new)?;
    crate::s3::eventually("the replica reads the new points", || {
        Ok(per_host(&r)? == want(3))
    })?;
    assert_eq!(
        aggregated(&r, "sum:rd.cpu")?,
        vec![vec![
            (1_700_000_000, 190),
            (1_700_000_010, 19_000),
            (1_700_000_020, 140)
        ]]
    );
    crate::s3::eventually("the replica reads the new metric", || {
        Ok(aggregated(&r, "sum:rd.new")? == vec![vec![(1_700_000_000, 190)]])
    })?;
    let metrics = crate::s3::get_json(&r, "/api/suggest?type=metrics&q=rd.")?;
    assert_eq!(metrics, serde_json::json!(["rd.cpu", "rd.new"]));

    // Each writer keeps the annotations posted to it; the replica reads both.
    for (writer, start, text) in [(&a, 1_700_000_100, "on a"), (&b, 1_700_000_200, "on b")] {
        let body = serde_json::json!({"startTime": start, "description": text}).to_string();
        let (status, reply) = writer.http("POST", "/api/annotation", body.as_bytes())?;
        anyhow::ensure!(status == 200, "{status} {reply}");
    }
    for (start, text) in [(1_700_000_100, "on a"), (1_700_000_200, "on b")] {
        let path = format!("/api/annotation?start_time={start}");
        crate::s3::eventually("the replica reads the annotation", || {
            let (status, reply) = r.http("GET", &path, b"")?;
            Ok(status == 200 && reply.contains(text))
        })?;
    }

    // fsck of the prefix checks both writers' trees.
    drop((a, b, r));
    let (code, out) = crate::s3_faults::fsck_bucket(&seaweed, "readers", &[])?;
    anyhow::ensure!(code == 0, "exit {code}: {out}");
    anyhow::ensure!(
        out.contains("partitioned writers: 2 trees over 20 salt buckets (0 unclaimed)")
            && out.contains("tree readers/salts-000-009:")
            && out.contains("tree readers/salts-010-019:")
            && out.matches("clean").count() == 2,
        "{out}"
    );
    Ok(())
}
