//! `--store` against a real S3 server (SeaweedFS, see `seaweed.rs`): the start-up probe of
//! conditional writes, a race of create-if-absent writes, and `strata serve --store` settings.

use std::process::{Command, Output};
use std::sync::Arc;

use anyhow::Context;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use strata_server::store::{Retries, StoreArgs, StoreConfig, build_store, open_store};

use crate::harness::Server;
use crate::seaweed::{BUCKET, Seaweed};

/// The store settings of `seaweed` under `prefix`, with its keys.
pub(crate) fn store_config(seaweed: &Seaweed, prefix: &str) -> anyhow::Result<StoreConfig> {
    let env = seaweed.aws_env();
    StoreConfig::resolve(
        &StoreArgs {
            store: Some(format!("s3://{BUCKET}/{prefix}")),
            s3_endpoint: Some(seaweed.endpoint.clone()),
            ..StoreArgs::default()
        },
        &|k| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_string())
        },
    )?
    .context("no store")
}

pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()?)
}

#[test]
fn seaweedfs_passes_the_conditional_write_probe() -> anyhow::Result<()> {
    let seaweed = Seaweed::start()?;
    eprintln!(
        "SeaweedFS answered with its bucket after {:?}",
        seaweed.startup
    );
    let config = store_config(&seaweed, "probe-test")?;
    let started = std::time::Instant::now();
    let (store, report) = runtime()?.block_on(open_store(&config))?;
    eprintln!("the probe took {:?}", started.elapsed());
    let key = report.key.as_deref().unwrap_or_default();
    assert!(key.starts_with("probe-test/_probe/"), "{report:?}");
    assert!(!report.left_behind, "{report:?}");
    let probes = ObjectPath::from("probe-test/_probe");
    let listed = runtime()?.block_on(store.list_with_delimiter(Some(&probes)))?;
    // SeaweedFS lists the emptied folder `probe-test/_probe` itself as an empty object.
    let left: Vec<_> = listed
        .objects
        .iter()
        .filter(|o| o.location != probes)
        .collect();
    assert!(left.is_empty(), "the probe object is deleted: {left:?}");
    Ok(())
}

#[test]
fn of_sixteen_racing_creates_on_seaweedfs_exactly_one_wins() -> anyhow::Result<()> {
    const WRITERS: usize = 16;
    const ROUNDS: usize = 3;
    let seaweed = Seaweed::start()?;
    let store = build_store(&store_config(&seaweed, "race")?, Retries::Patient)?;
    runtime()?.block_on(async {
        for round in 0..ROUNDS {
            let started = std::time::Instant::now();
            let key = ObjectPath::from(format!("race/manifest/{round:020}"));
            let barrier = Arc::new(tokio::sync::Barrier::new(WRITERS));
            let tasks: Vec<_> = (0..WRITERS)
                .map(|writer| {
                    let (store, key, barrier) = (Arc::clone(&store), key.clone(), barrier.clone());
                    tokio::spawn(async move {
                        barrier.wait().await;
                        let body = PutPayload::from(format!("writer {writer}"));
                        let put = store
                            .put_opts(&key, body, PutOptions::from(PutMode::Create))
                            .await;
                        (writer, put)
                    })
                })
                .collect();
            let mut winners = Vec::new();
            for task in tasks {
                let (writer, put) = task.await?;
                match put {
                    Ok(_) => winners.push(writer),
                    Err(object_store::Error::AlreadyExists { .. }) => {}
                    Err(e) => anyhow::bail!("writer {writer}, round {round}: {e}"),
                }
            }
            anyhow::ensure!(
                winners.len() == 1,
                "round {round}: writers {winners:?} all won\n{}",
                seaweed.log_tail()
            );
            // SeaweedFS queues conditional PUTs of one key, answering them a second apart.
            eprintln!(
                "round {round}: writer {} won; all answered after {:?}",
                winners[0],
                started.elapsed()
            );
            let kept = store.get(&key).await?.bytes().await?;
            assert_eq!(
                kept.as_ref(),
                format!("writer {}", winners[0]).as_bytes(),
                "round {round}: the object holds the winner's bytes"
            );
        }
        anyhow::Ok(())
    })
}

/// Runs `strata serve` with `args` and the SeaweedFS keys, expecting it to stop by itself.
fn serve_and_exit(data_dir: &std::path::Path, args: &[&str]) -> anyhow::Result<Output> {
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("serve")
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--bind", "127.0.0.1", "--port", "0"])
        .args(args)
        .env("AWS_ACCESS_KEY_ID", crate::seaweed::ACCESS_KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", crate::seaweed::SECRET_ACCESS_KEY)
        .env("RUST_LOG", "warn")
        .output()
        .context("running strata serve")?;
    eprintln!(
        "strata serve {args:?} stopped after {:?}",
        started.elapsed()
    );
    Ok(out)
}

/// The stderr of a run that failed (and printed no listening line).
fn failure(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "strata serve succeeded: {stderr}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("listening"),
        "strata serve listened: {stderr}"
    );
    stderr
}

/// A writer on `store` (flushing every 200 ms) with its data directory in `dir`.
fn store_writer(seaweed: &Seaweed, store: &str, dir: &std::path::Path) -> anyhow::Result<Server> {
    store_writer_with(seaweed, store, dir, &["--store-flush-interval-ms", "200"])
}

/// A writer on `store` with its data directory in `dir` and the flags `extra`.
pub(crate) fn store_writer_with(
    seaweed: &Seaweed,
    store: &str,
    dir: &std::path::Path,
    extra: &[&str],
) -> anyhow::Result<Server> {
    let mut args = vec!["--store", store, "--s3-endpoint", &seaweed.endpoint];
    args.extend_from_slice(extra);
    Server::start_with_env(dir, &args, &seaweed.aws_env())
}

/// The value of the gauge `name` (with its labels, if any) in `/metrics`.
pub(crate) fn gauge(server: &Server, name: &str) -> anyhow::Result<f64> {
    let (status, text) = server.http("GET", "/metrics", b"")?;
    anyhow::ensure!(status == 200, "/metrics: {status}");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .with_context(|| format!("no {name} in /metrics"))
}

/// Writes `n` points of `metric` with `sync`, which answers once they are in the bucket.
pub(crate) fn put_and_flush(server: &Server, metric: &str, n: i64) -> anyhow::Result<()> {
    put_host_and_flush(server, metric, "a", n)
}

/// [`put_and_flush`] of the series on `host`: point i is `(1700000000 + 10 i, i * 1000000007)`.
fn put_host_and_flush(server: &Server, metric: &str, host: &str, n: i64) -> anyhow::Result<()> {
    let points: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({"metric": metric, "timestamp": 1_700_000_000 + i * 10,
                               "value": i * 1_000_000_007, "tags": {"host": host}})
        })
        .collect();
    let body = serde_json::Value::from(points).to_string();
    let (status, reply) = server.http("POST", "/api/put?sync&details", body.as_bytes())?;
    anyhow::ensure!(status == 200, "put: {status} {reply}");
    anyhow::ensure!(
        gauge(server, "strata_engine_flushes")? >= 1.0,
        "the synced put flushed"
    );
    Ok(())
}

/// Every point of `metric` as `(seconds, value)`.
fn points_of(server: &Server, metric: &str) -> anyhow::Result<Vec<(i64, i64)>> {
    points_on(server, metric, "a")
}

/// Every point of `metric` on `host` as `(seconds, value)`.
fn points_on(server: &Server, metric: &str, host: &str) -> anyhow::Result<Vec<(i64, i64)>> {
    let series = server.query_raw(
        metric,
        &[("host", host)],
        1_699_999_000_000,
        1_800_000_000_000,
    )?;
    let mut out = Vec::new();
    for (_, points) in series {
        for (ms, v) in points {
            out.push((ms / 1000, v.as_i64().context("an integer")?));
        }
    }
    Ok(out)
}

#[test]
fn a_writer_keeps_flushed_points_in_the_bucket_across_kill_9_and_a_new_disk() -> anyhow::Result<()>
{
    let seaweed = Seaweed::start()?;
    let store = format!("s3://{BUCKET}/writer");
    let first = tempfile::tempdir()?;
    let server = store_writer(&seaweed, &store, first.path())?;
    put_and_flush(&server, "s3.points", 300)?;
    assert!(gauge(&server, "strata_store_requests{kind=\"put\"}")? >= 2.0);
    assert_eq!(gauge(&server, "strata_store_fenced")?, 0.0);
    // kill -9, then a new machine: an empty data directory on the same prefix.
    drop(server);
    let second = tempfile::tempdir()?;
    let server = store_writer(&seaweed, &store, second.path())?;
    let want: Vec<(i64, i64)> = (0..300)
        .map(|i| (1_700_000_000 + i * 10, i * 1_000_000_007))
        .collect();
    assert_eq!(points_of(&server, "s3.points")?, want);
    assert!(gauge(&server, "strata_store_cache_misses")? >= 1.0);
    assert!(gauge(&server, "strata_store_epoch")? >= 2.0);
    Ok(())
}

#[test]
fn a_new_writer_fences_the_old_one() -> anyhow::Result<()> {
    let seaweed = Seaweed::start()?;
    let store = format!("s3://{BUCKET}/fence");
    let (a_dir, b_dir) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let a = store_writer(&seaweed, &store, a_dir.path())?;
    put_and_flush(&a, "s3.fence", 20)?;
    let b = store_writer(&seaweed, &store, b_dir.path())?;
    // The old writer acknowledges no synced write once the new one holds the prefix.
    let body = r#"{"metric":"s3.fence","timestamp":1700009999,"value":1,"tags":{"host":"a"}}"#;
    let (status, reply) = a.http("POST", "/api/put?sync", body.as_bytes())?;
    assert_eq!(status, 503, "{reply}");
    assert!(reply.contains("\"error\""), "{reply}");
    let mut fenced = 0.0;
    for _ in 0..100 {
        fenced = gauge(&a, "strata_store_fenced")?;
        if fenced == 1.0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(fenced, 1.0);
    // The new writer has what the old one flushed, and takes writes.
    assert_eq!(points_of(&b, "s3.fence")?.len(), 20);
    put_and_flush(&b, "s3.fence.b", 5)?;
    assert_eq!(points_of(&b, "s3.fence.b")?.len(), 5);
    Ok(())
}

/// The points [`put_host_and_flush`] writes.
fn written(n: i64) -> Vec<(i64, i64)> {
    (0..n)
        .map(|i| (1_700_000_000 + i * 10, i * 1_000_000_007))
        .collect()
}

/// A read replica of `store` with its data directory (only its disk cache) in `dir`,
/// refreshing every 200 ms: started as a script would start one.
pub(crate) fn replica(
    seaweed: &Seaweed,
    store: &str,
    dir: &std::path::Path,
) -> anyhow::Result<Server> {
    Server::start_with_env(
        dir,
        &[
            "--store",
            store,
            "--s3-endpoint",
            &seaweed.endpoint,
            "--read-only",
            "--refresh-ms",
            "200",
        ],
        &seaweed.aws_env(),
    )
}

/// Polls `check` on the replica until it holds, for up to 10 s; returns how long it took.
pub(crate) fn eventually(
    what: &str,
    mut check: impl FnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<std::time::Duration> {
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(10) {
        if check()? {
            return Ok(started.elapsed());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    anyhow::bail!("{what}: not within 10 s")
}

/// The JSON answer of a GET, which must be a 200.
pub(crate) fn get_json(server: &Server, path: &str) -> anyhow::Result<serde_json::Value> {
    let (status, reply) = server.http("GET", path, b"")?;
    anyhow::ensure!(status == 200, "{path}: {status} {reply}");
    Ok(serde_json::from_str(&reply)?)
}

/// What a replica answers that a query client sees: the points of both series, suggest and
/// lookup.
fn replica_answers(server: &Server) -> anyhow::Result<()> {
    assert_eq!(points_on(server, "s3.replica", "a")?, written(100));
    assert_eq!(points_on(server, "s3.replica", "b")?, written(7));
    assert_eq!(points_on(server, "s3.replica.new", "a")?, written(3));
    let metrics = get_json(server, "/api/suggest?type=metrics&q=s3.replica")?;
    assert_eq!(metrics, serde_json::json!(["s3.replica", "s3.replica.new"]));
    let hosts = get_json(server, "/api/suggest?type=tagv&q=")?;
    assert_eq!(hosts, serde_json::json!(["a", "b"]));
    let lookup = get_json(server, "/api/search/lookup?m=s3.replica%7Bhost=*%7D")?;
    assert_eq!(lookup["totalResults"], 2, "{lookup}");
    Ok(())
}

#[test]
fn a_read_replica_follows_the_writer_and_refuses_writes() -> anyhow::Result<()> {
    let seaweed = Seaweed::start()?;
    let store = format!("s3://{BUCKET}/replica");
    let (w_dir, r_dir) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let writer = store_writer(&seaweed, &store, w_dir.path())?;
    put_and_flush(&writer, "s3.replica", 100)?;
    let replica_server = replica(&seaweed, &store, r_dir.path())?;
    let r = &replica_server;
    assert_eq!(points_on(r, "s3.replica", "a")?, written(100));

    // A new series, a new tag value and a new metric, flushed by the writer.
    put_host_and_flush(&writer, "s3.replica", "b", 7)?;
    let points: Vec<serde_json::Value> = written(3)
        .into_iter()
        .map(|(t, v)| {
            serde_json::json!({"metric": "s3.replica.new", "timestamp": t, "value": v,
                               "tags": {"host": "a"}})
        })
        .collect();
    let body = serde_json::Value::from(points).to_string();
    let (status, reply) = writer.http("POST", "/api/put?sync", body.as_bytes())?;
    assert_eq!(status, 204, "{reply}");
    // The writer flushes within 200 ms, and the replica refreshes every 200 ms.
    // Until then the metric is unknown there: a 400.
    let took = eventually("the new series on the replica", || {
        Ok(points_on(r, "s3.replica.new", "a").is_ok_and(|p| p == written(3)))
    })?;
    eprintln!("acknowledged points were on the replica {took:?} after the put");
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    replica_answers(r)?;
    // A PromQL query and the graph page.
    let (status, reply) = r.http(
        "GET",
        "/api/v1/query?query=count(%7B__name__=%22s3.replica%22%7D)&time=1700000060",
        b"",
    )?;
    assert!(status == 200 && reply.contains("\"2\""), "{status} {reply}");
    assert_eq!(r.http("GET", "/", b"")?.0, 200);

    // Every way of writing is refused, naming the replica.
    let put = r#"{"metric":"s3.replica","timestamp":1700009999,"value":1,"tags":{"host":"a"}}"#;
    for (method, path, body) in [
        ("POST", "/api/put", put),
        ("POST", "/api/put?sync", put),
        ("POST", "/api/v1/write", ""),
        ("POST", "/write?db=x", "m,host=a v=1 1700000000000000000"),
        (
            "POST",
            "/api/annotation",
            r#"{"startTime":1700000000,"description":"d"}"#,
        ),
        ("GET", "/api/uid/assign?metric=s3.other", ""),
        (
            "POST",
            "/api/uid/rename",
            r#"{"metric":"s3.replica","name":"x"}"#,
        ),
        ("DELETE", "/api/query?start=1h-ago&m=sum:s3.replica", ""),
        ("POST", "/api/admin/compact", ""),
    ] {
        let (status, reply) = r.http(method, path, body.as_bytes())?;
        assert_eq!(status, 403, "{method} {path}: {reply}");
        assert!(
            reply.contains("read replica of s3://strata/replica"),
            "{method} {path}: {reply}"
        );
    }
    let mut telnet = r.connect()?;
    std::io::Write::write_all(&mut telnet, b"put s3.replica 1700009999 1 host=a\n")?;
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(&mut telnet), &mut line)?;
    assert!(
        line.starts_with("put: this server is a read replica of s3://strata/replica"),
        "{line}"
    );
    assert_eq!(points_on(&writer, "s3.replica", "a")?, written(100));
    assert_eq!(points_on(r, "s3.replica", "a")?, written(100));

    assert!(gauge(r, "strata_store_replica_refreshes")? >= 1.0);
    assert!(gauge(r, "strata_store_replica_changes")? >= 1.0);
    assert_eq!(gauge(r, "strata_store_replica_refresh_errors")?, 0.0);
    assert!(gauge(r, "strata_store_replica_refresh_age_seconds")? < 5.0);
    eventually("the replica on the writer's manifest version", || {
        Ok(gauge(r, "strata_store_replica_manifest_version")?
            == gauge(&writer, "strata_store_manifest_version")?)
    })?;
    assert_eq!(gauge(r, "strata_store_epoch")?, 0.0);
    assert_eq!(gauge(&writer, "strata_store_replica_refreshes")?, 0.0);
    assert_eq!(
        gauge(&writer, "strata_store_replica_manifest_version")?,
        0.0
    );

    // Restarted on an empty data directory: a cold cache, the same answers.
    assert!(
        replica_server.stop()?.success(),
        "the replica stops cleanly"
    );
    let cold_dir = tempfile::tempdir()?;
    let cold = replica(&seaweed, &store, cold_dir.path())?;
    replica_answers(&cold)?;
    assert!(gauge(&cold, "strata_store_cache_misses")? >= 1.0);
    let files: Vec<String> = std::fs::read_dir(cold_dir.path())?
        .map(|e| Ok(e?.file_name().to_string_lossy().into_owned()))
        .collect::<anyhow::Result<_>>()?;
    eprintln!("a replica's data directory holds {files:?}");
    Ok(())
}

/// Errors of `serve --store` that stop it before it serves.
#[test]
fn serve_with_a_store_that_cannot_be_used_stops_with_the_reason() -> anyhow::Result<()> {
    let seaweed = Seaweed::start()?;
    let dir = tempfile::tempdir()?;
    let store = format!("s3://{BUCKET}/serve");
    // A server that answers nothing on the endpoint: the bucket is named, and why.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let out = serve_and_exit(
        dir.path(),
        &[
            "--store",
            &store,
            "--s3-endpoint",
            &format!("http://127.0.0.1:{closed}"),
        ],
    )?;
    let err = failure(&out);
    assert!(
        err.contains("cannot use the bucket") && err.contains("s3://strata/serve"),
        "{err}"
    );
    // A bucket that does not exist.
    let out = serve_and_exit(
        dir.path(),
        &[
            "--store",
            "s3://no-such-bucket/x",
            "--s3-endpoint",
            &seaweed.endpoint,
        ],
    )?;
    let err = failure(&out);
    assert!(err.contains("cannot use the bucket"), "{err}");
    Ok(())
}

#[test]
fn bad_store_settings_stop_serve_with_the_setting_named() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let bucket_dir = tempfile::tempdir()?;
    let file_store = format!("file://{}", bucket_dir.path().display());
    for (args, want) in [
        (vec!["--store", "strata/x"], "`store`"),
        (
            vec![
                "--store",
                "s3://strata/x",
                "--s3-endpoint",
                "127.0.0.1:8333",
            ],
            "`s3_endpoint`",
        ),
        (
            vec!["--store", &file_store, "--store-flush-interval-ms", "0"],
            "store_flush_interval_ms must be",
        ),
        (vec!["--read-only"], "read_only needs store"),
        (
            vec!["--store", &file_store, "--read-only", "--mode", "rw"],
            "conflicts with mode = rw",
        ),
        (
            vec!["--store", &file_store, "--refresh-ms", "100"],
            "refresh_ms applies to read replicas",
        ),
        (vec!["--cache-disk-mb", "10"], "need store"),
    ] {
        let err = failure(&serve_and_exit(dir.path(), &args)?);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // A store setting from the environment, as STRATA_* variables give every flag.
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path())
        .env("STRATA_STORE", "s3://strata/x")
        .env("STRATA_S3_ENDPOINT", "ftp://127.0.0.1")
        .env("RUST_LOG", "warn")
        .output()?;
    let err = failure(&out);
    assert!(err.contains("`s3_endpoint`"), "{err}");
    Ok(())
}

/// The Python router of docs/operations-s3.md, run as written against a real server (both
/// "writers" are that server), finds for each series the salt bucket its row is stored in.
#[test]
fn the_docs_python_router_finds_the_salt_the_server_stores() -> anyhow::Result<()> {
    let python = crate::harness::e2e_venv()?.join("bin").join("python");
    let has_xxhash = Command::new(&python)
        .args(["-c", "import xxhash"])
        .output()
        .is_ok_and(|o| o.status.success());
    anyhow::ensure!(
        has_xxhash,
        "no xxhash in the e2e venv: run `{} -m pip install xxhash==4.1.0` (.ci/run does this)",
        python.display()
    );
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    let server = crate::harness::Server::start_in(&data, &[])?;
    let doc = include_str!("../../docs/operations-s3.md");
    let router = doc
        .split("```python\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .context("no Python block in the docs")?
        .replace("http://writer-a:4242", &format!("http://{}", server.addr))
        .replace("http://writer-b:4242", &format!("http://{}", server.addr));
    let script = router
        + r#"
out = []
for host in ["web01", "web02", "db1", "db2", "x"]:
    for cpu in ["0", "1"]:
        tags = {"host": host, "cpu": cpu}
        put = {"metric": "sys.cpu.user", "timestamp": 1700000000, "value": 1, "tags": tags}
        urllib.request.urlopen(urllib.request.Request(
            WRITERS[0][1] + "/api/put?sync", data=json.dumps(put).encode(), method="POST"))
        out.append("%s %s %d" % (host, cpu, salt("sys.cpu.user", tags)))
print("\n".join(sorted(out)))
"#;
    let out = Command::new(&python).arg("-c").arg(&script).output()?;
    anyhow::ensure!(
        out.status.success(),
        "the router failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let routed = String::from_utf8(out.stdout)?;
    server.stop()?;
    let scan = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["scan", "--data-dir"])
        .arg(&data)
        .output()?;
    // `row salt=13 metric=sys.cpu.user base=... tags={host=web01, cpu=0} cells=1`
    let mut stored: Vec<String> = String::from_utf8(scan.stdout)?
        .lines()
        .filter_map(|l| {
            let salt = l.strip_prefix("row salt=")?.split(' ').next()?;
            let tags = l.split("tags={").nth(1)?.split('}').next()?;
            let host = tags.split("host=").nth(1)?.split(',').next()?;
            let cpu = tags.split("cpu=").nth(1)?;
            Some(format!("{host} {cpu} {salt}"))
        })
        .collect();
    stored.sort();
    // The docs' own last line prints the writer of one series.
    let routed: Vec<&str> = routed
        .lines()
        .filter(|l| !l.starts_with("http://"))
        .collect();
    assert_eq!(routed, stored);
    assert_eq!(stored.len(), 10, "{stored:?}");
    Ok(())
}

/// The worked example of docs/operations-s3.md's routing section.
#[test]
fn the_routing_example_in_the_docs_gets_the_engines_salt() -> anyhow::Result<()> {
    let tsuid = strata_tsdb::Tsuid::from_bytes(&[0, 0, 1, 0, 0, 1, 0, 0, 1])?;
    assert_eq!(strata_tsdb::salt_of(&tsuid, 20), 10);
    let doc = include_str!("../../docs/operations-s3.md");
    assert!(
        doc.contains("its salt is xxh3_64(that) % 20 = 10"),
        "the docs changed"
    );
    Ok(())
}

#[test]
fn a_synced_put_is_in_the_bucket_before_its_answer() -> anyhow::Result<()> {
    let seaweed = Seaweed::start()?;
    let store = format!("s3://{BUCKET}/sync");
    let first = tempfile::tempdir()?;
    // No periodic flush comes during the test: only the synced put can put points in the
    // bucket.
    let server = Server::start_with_env(
        first.path(),
        &[
            "--store",
            &store,
            "--s3-endpoint",
            &seaweed.endpoint,
            "--store-flush-interval-ms",
            "3600000",
        ],
        &seaweed.aws_env(),
    )?;
    let points: Vec<serde_json::Value> = (0..50i64)
        .map(|i| {
            serde_json::json!({"metric": "s3.synced", "timestamp": 1_700_000_000 + i * 10,
                               "value": i * 1_000_000_007, "tags": {"host": "a"}})
        })
        .collect();
    let body = serde_json::Value::from(points).to_string();
    let (status, reply) = server.http("POST", "/api/put?sync&details", body.as_bytes())?;
    anyhow::ensure!(status == 200, "put: {status} {reply}");
    // kill -9 as soon as the answer is in, then a new machine with an empty data directory:
    // the WAL that held the points is gone with the old one.
    drop(server);
    let second = tempfile::tempdir()?;
    let server = store_writer(&seaweed, &store, second.path())?;
    let want: Vec<(i64, i64)> = (0..50)
        .map(|i| (1_700_000_000 + i * 10, i * 1_000_000_007))
        .collect();
    assert_eq!(points_of(&server, "s3.synced")?, want);
    Ok(())
}
