//! Faults of a writer on a real S3 server (SeaweedFS, see `seaweed.rs`): `kill -9` while
//! flushes upload, and the bucket going away for a while.

use std::io::{BufReader, Write};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use crate::harness::Server;
use crate::s3::{gauge, put_and_flush, store_writer_with};
use crate::seaweed::{BUCKET, Seaweed};
use crate::telnet_put::barrier;

/// The seeds the kill test runs: fixed by default so CI runs the same cases;
/// `STRATA_TEST_SEED=<n>` replays seed `n`, `STRATA_TEST_SEED=random` runs a new one.
fn test_seeds(defaults: &[u64]) -> anyhow::Result<Vec<u64>> {
    match std::env::var("STRATA_TEST_SEED") {
        Err(_) => Ok(defaults.to_vec()),
        Ok(s) if s.trim() == "random" => Ok(vec![
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .subsec_nanos()
                .into(),
        ]),
        Ok(s) => Ok(vec![s.trim().parse().with_context(|| {
            format!("STRATA_TEST_SEED must be a number or `random`, not {s:?}")
        })?]),
    }
}

/// xorshift64*: enough to pick kill points from a seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// First second of every series the tests write.
const T0: i64 = 1_700_000_000;

/// The value of point `k` of an HTTP series: integers past 32 bits.
fn http_value(k: i64) -> f64 {
    (k * 1_000_000_007) as f64
}

/// The value of point `k` of a telnet series: floats with a fraction.
fn telnet_value(k: i64) -> f64 {
    k as f64 + 0.25
}

/// The points of `metric{host=host}` as (seconds, value).
fn series(server: &Server, metric: &str, host: &str) -> anyhow::Result<Vec<(i64, f64)>> {
    let found = server.query_raw(
        metric,
        &[("host", host)],
        (T0 - 1) * 1000,
        (T0 + 10_000_000) * 1000,
    )?;
    let mut out = Vec::new();
    for (_, points) in found {
        for (ms, v) in points {
            out.push((ms / 1000, v.as_f64().context("a number")?));
        }
    }
    Ok(out)
}

/// What one series must hold: its first `acked` points, maybe some after (sent, not
/// acknowledged, yet written before the kill), each with its exact value.
fn check_series(
    server: &Server,
    metric: &str,
    host: &str,
    acked: i64,
    value: fn(i64) -> f64,
) -> anyhow::Result<()> {
    let got = series(server, metric, host)?;
    anyhow::ensure!(
        got.len() as i64 >= acked,
        "{metric}{{host={host}}}: {} points, {acked} acknowledged",
        got.len()
    );
    for (k, (ts, v)) in got.iter().enumerate() {
        let k = k as i64;
        anyhow::ensure!(
            *ts == T0 + k && *v == value(k),
            "{metric}{{host={host}}} point {k}: ({ts}, {v}), want ({}, {})",
            T0 + k,
            value(k)
        );
    }
    Ok(())
}

/// Writes batches of `?sync` HTTP points (series `h<round>`) and telnet points acknowledged by
/// a reply (series `t<round>`) until the server dies; returns how many of each were
/// acknowledged.
fn write_until_killed(server: &Server, metric: &str, round: u64) -> anyhow::Result<(i64, i64)> {
    const BATCH: i64 = 2000;
    let (mut http, mut telnet) = (0i64, 0i64);
    let mut conn = server.connect()?;
    let mut reader = BufReader::new(conn.try_clone()?);
    loop {
        let points: Vec<serde_json::Value> = (http..http + BATCH)
            .map(|k| {
                serde_json::json!({"metric": metric, "timestamp": T0 + k,
                                   "value": k * 1_000_000_007, "tags": {"host": format!("h{round}")}})
            })
            .collect();
        let body = serde_json::Value::from(points).to_string();
        match server.http("POST", "/api/put?sync", body.as_bytes()) {
            Ok((204 | 200, _)) => http += BATCH,
            Ok((status, reply)) => anyhow::bail!("put: {status} {reply}"),
            Err(_) => return Ok((http, telnet)),
        }
        let mut lines = String::new();
        for k in telnet..telnet + BATCH {
            lines += &format!(
                "put {metric} {} {} host=t{round}\n",
                T0 + k,
                telnet_value(k)
            );
        }
        if conn.write_all(lines.as_bytes()).is_err() {
            return Ok((http, telnet));
        }
        match barrier(&mut conn, &mut reader) {
            Ok(errors) if errors.is_empty() => telnet += BATCH,
            Ok(errors) => anyhow::bail!("telnet put errors: {errors:?}"),
            Err(_) => return Ok((http, telnet)),
        }
    }
}

/// Rounds of writes to a writer on the bucket that flushes all the time (1 MiB memtables,
/// flushed every 100 ms besides), each ended by `kill -9` at a point the seed picks, then a
/// restart on the same data directory: every acknowledged point is back with its value, and
/// a writer on a fresh disk reads them all from the bucket.
#[test]
fn kill_9_while_flushes_upload_loses_no_acknowledged_point() -> anyhow::Result<()> {
    const ROUNDS: u64 = 3;
    let started = Instant::now();
    let seaweed = Seaweed::start()?;
    for seed in test_seeds(&[1, 2])? {
        println!("s3 kill test seed {seed} (STRATA_TEST_SEED={seed} replays it)");
        let mut rng = Rng::new(seed);
        let store = format!("s3://{BUCKET}/kill-{seed}");
        let metric = "s3.kill";
        let dir = tempfile::tempdir()?;
        let flags = ["--memtable-mb", "1", "--store-flush-interval-ms", "100"];
        let mut acked = Vec::new();
        for round in 0..ROUNDS {
            let server = store_writer_with(&seaweed, &store, dir.path(), &flags)?;
            let pid = server.pid().to_string();
            let delay = Duration::from_millis(300 + rng.below(1200));
            let killer = std::thread::spawn(move || {
                std::thread::sleep(delay);
                Command::new("kill").args(["-KILL", &pid]).status()
            });
            let counts = write_until_killed(&server, metric, round)?;
            killer
                .join()
                .map_err(|_| anyhow::anyhow!("killer panicked"))??;
            println!("round {round}: killed after {delay:?}, acknowledged {counts:?}");
            anyhow::ensure!(counts.0 > 0, "nothing was acknowledged before the kill");
            acked.push(counts);
            drop(server);
        }
        let check = |server: &Server| -> anyhow::Result<()> {
            for (round, &(http, telnet)) in acked.iter().enumerate() {
                check_series(server, metric, &format!("h{round}"), http, http_value)?;
                check_series(server, metric, &format!("t{round}"), telnet, telnet_value)?;
            }
            Ok(())
        };
        let server = store_writer_with(&seaweed, &store, dir.path(), &flags)?;
        check(&server)?;
        // The replayed WAL goes to the bucket with the next flushes.
        put_and_flush(&server, "s3.kill.done", 1)?;
        let fresh = tempfile::tempdir()?;
        let other = store_writer_with(&seaweed, &store, fresh.path(), &[])?;
        check(&other)?;
        anyhow::ensure!(gauge(&other, "strata_store_fenced")? == 0.0);
        // The bucket checks clean; objects of the flushes the kills cut short are warnings.
        let (code, out) = fsck_bucket(&seaweed, &format!("kill-{seed}"), &[])?;
        anyhow::ensure!(code == 0, "fsck: exit {code}: {out}");
    }
    println!("took {:?}", started.elapsed());
    Ok(())
}

/// A plain `/api/put` of points `from..to` of `metric{host=a}`: (status, reply, seconds taken).
fn put_range(
    server: &Server,
    metric: &str,
    from: i64,
    to: i64,
) -> anyhow::Result<(u16, String, f64)> {
    let points: Vec<serde_json::Value> = (from..to)
        .map(|k| {
            serde_json::json!({"metric": metric, "timestamp": T0 + k,
                               "value": k * 1_000_000_007, "tags": {"host": "a"}})
        })
        .collect();
    let body = serde_json::Value::from(points).to_string();
    let started = Instant::now();
    // A put may wait out a whole stall and then some before its answer (the test bounds it
    // at the stall limit plus 10 s); the default 10 s read timeout would cut it short.
    let wait = strata_engine::WRITE_STALL_LIMIT + Duration::from_secs(20);
    let (status, reply) = server.http_within("POST", "/api/put", body.as_bytes(), wait)?;
    Ok((status, reply, started.elapsed().as_secs_f64()))
}

/// Sends one telnet `put` of a new series from a thread, which returns the lines answered
/// before the reply to a later `version`.
fn telnet_put_in_background(
    server: &Server,
) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<Vec<String>>>> {
    let mut conn = server.connect()?;
    conn.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    Ok(std::thread::spawn(move || {
        conn.write_all(format!("put s3.during.telnet {T0} 1 host=a\n").as_bytes())?;
        barrier(&mut conn, &mut reader)
    }))
}

/// Polls the gauge `name` until `want` holds, for at most `within`.
fn wait_gauge(
    server: &Server,
    name: &str,
    within: Duration,
    want: impl Fn(f64) -> bool,
) -> anyhow::Result<f64> {
    let deadline = Instant::now() + within;
    loop {
        let v = gauge(server, name)?;
        if want(v) {
            return Ok(v);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{name} is still {v} after {within:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The bucket goes away (SeaweedFS killed) under a writer with 1 MiB memtables: writes go on
/// into the WAL and memtables until they are full, then stall, and a write whose stall sees
/// no flush finish for `WRITE_STALL_LIMIT` is refused (HTTP 503 with OpenTSDB's error JSON,
/// telnet `put: storage error: writes held back ...`); reads of flushed (cached) and
/// unflushed points go on; `/metrics` shows the failing flushes. A read replica counts its
/// failed refreshes and answers from its disk cache. Once the bucket is back the flushes
/// resume by themselves, writes are taken again, a writer on a fresh disk finds every
/// acknowledged point in the bucket, the replica follows again, and `fsck` finds no damage.
#[test]
fn an_s3_outage_holds_writes_back_then_flushes_resume_losing_nothing() -> anyhow::Result<()> {
    const BATCH: i64 = 2000;
    let started = Instant::now();
    let mut seaweed = Seaweed::start()?;
    let store = format!("s3://{BUCKET}/outage");
    let dir = tempfile::tempdir()?;
    let flags = ["--memtable-mb", "1", "--store-flush-interval-ms", "200"];
    let server = store_writer_with(&seaweed, &store, dir.path(), &flags)?;
    let (status, reply, _) = put_range(&server, "s3.before", 0, 300)?;
    anyhow::ensure!(status == 204, "{status} {reply}");
    put_and_flush(&server, "s3.flushed", 1)?;
    // A read replica that has read the flushed points, so its disk cache holds their files.
    let replica_dir = tempfile::tempdir()?;
    let reader = crate::s3::replica(&seaweed, &store, replica_dir.path())?;
    crate::s3::eventually("the replica sees the flushed points", || {
        Ok(series(&reader, "s3.before", "a")?.len() == 300)
    })?;
    seaweed.kill();
    let outage = Instant::now();
    println!("the bucket went away {:?} into the test", started.elapsed());
    // Writes go on until the memtables are full, then are refused within a bounded stall. A
    // telnet client that sends meanwhile is told the same, on its line's reply.
    let mut acked = 0i64;
    let mut telnet = None;
    let refusal = loop {
        // Four full memtables wait: writes stall from here.
        if telnet.is_none() && gauge(&server, "strata_engine_frozen_memtables")? >= 4.0 {
            telnet = Some(telnet_put_in_background(&server)?);
        }
        let (status, reply, secs) = put_range(&server, "s3.during", acked, acked + BATCH)?;
        let limit = strata_engine::WRITE_STALL_LIMIT.as_secs_f64();
        anyhow::ensure!(secs < limit + 10.0, "a put took {secs} s");
        match status {
            204 => acked += BATCH,
            503 => break (reply, secs),
            _ => anyhow::bail!("put during the outage: {status} {reply}"),
        }
        anyhow::ensure!(
            outage.elapsed() < Duration::from_secs(60),
            "no backpressure after {acked} points in 60 s"
        );
    };
    println!(
        "outage: {acked} points taken, then a 503 after a {:.1} s stall, {:?} into it: {}",
        refusal.1,
        outage.elapsed(),
        refusal.0
    );
    anyhow::ensure!(acked >= BATCH, "writes stopped at once: {}", refusal.0);
    let error: serde_json::Value = serde_json::from_str(&refusal.0)?;
    anyhow::ensure!(error["error"]["code"] == 503, "{error}");
    let details = error["error"]["details"].as_str().unwrap_or_default();
    anyhow::ensure!(details.contains("writes held back"), "{error}");
    // Queries go on meanwhile.
    let query_started = Instant::now();
    check_series(&server, "s3.before", "a", 300, http_value)?;
    check_series(&server, "s3.during", "a", acked, http_value)?;
    println!(
        "queries during the outage took {:?}",
        query_started.elapsed()
    );
    anyhow::ensure!(query_started.elapsed() < Duration::from_secs(5));
    // The replica cannot follow the manifest, and says so, but answers from its cache.
    wait_gauge(
        &reader,
        "strata_store_replica_refresh_errors",
        Duration::from_secs(30),
        |v| v >= 1.0,
    )?;
    check_series(&reader, "s3.before", "a", 300, http_value)?;
    let telnet = match telnet {
        Some(t) => t,
        None => telnet_put_in_background(&server)?,
    };
    let lines = telnet
        .join()
        .map_err(|_| anyhow::anyhow!("telnet panicked"))??;
    anyhow::ensure!(
        lines.len() == 1 && lines[0].starts_with("put: storage error: writes held back"),
        "{lines:?}"
    );
    anyhow::ensure!(gauge(&server, "strata_engine_flush_errors")? >= 1.0);
    anyhow::ensure!(gauge(&server, "strata_engine_flush_failing")? == 1.0);
    anyhow::ensure!(gauge(&server, "strata_engine_writes_refused")? >= 2.0);
    // The bucket comes back: flushes resume by themselves and writes are taken again.
    seaweed.restart()?;
    let back = Instant::now();
    wait_gauge(
        &server,
        "strata_engine_flush_failing",
        Duration::from_secs(30),
        |v| v == 0.0,
    )?;
    wait_gauge(
        &server,
        "strata_engine_frozen_memtables",
        Duration::from_secs(30),
        |v| v == 0.0,
    )?;
    println!(
        "flushes caught up {:?} after the bucket came back",
        back.elapsed()
    );
    let (status, reply, _) = put_range(&server, "s3.during", acked, acked + BATCH)?;
    anyhow::ensure!(status == 204, "{status} {reply}");
    acked += BATCH;
    put_and_flush(&server, "s3.after", 10)?;
    println!(
        "writes taken again {:?} after the bucket came back",
        back.elapsed()
    );
    // Everything acknowledged is in the bucket.
    let fresh = tempfile::tempdir()?;
    let other = store_writer_with(&seaweed, &store, fresh.path(), &[])?;
    check_series(&other, "s3.before", "a", 300, http_value)?;
    check_series(&other, "s3.during", "a", acked, http_value)?;
    println!(
        "a fresh writer read them all {:?} after the bucket came back",
        back.elapsed()
    );
    // The replica follows again, and the bucket has no damage.
    crate::s3::eventually("the replica follows again", || {
        // An error until the replica knows the metric.
        Ok(series(&reader, "s3.after", "a").is_ok_and(|s| !s.is_empty()))
    })?;
    check_series(&reader, "s3.during", "a", acked, http_value)?;
    let (code, out) = fsck_bucket(&seaweed, "outage", &[])?;
    anyhow::ensure!(code == 0 && out.contains("clean"), "exit {code}: {out}");
    println!("took {:?}", started.elapsed());
    Ok(())
}

/// Runs `strata fsck --store s3://strata/<prefix>` against `seaweed`: (exit code, stdout).
pub(crate) fn fsck_bucket(
    seaweed: &Seaweed,
    prefix: &str,
    extra: &[&str],
) -> anyhow::Result<(i32, String)> {
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("fsck")
        .args(["--store", &format!("s3://{BUCKET}/{prefix}")])
        .args(["--s3-endpoint", &seaweed.endpoint])
        .args(extra)
        .envs(seaweed.aws_env())
        .output()?;
    let stdout = String::from_utf8(out.stdout)?;
    println!(
        "fsck {prefix}:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((
        out.status.code().unwrap_or(-1),
        stdout + &String::from_utf8_lossy(&out.stderr),
    ))
}

/// `strata fsck --store` on a bucket a writer is running on: clean, while the writer goes on
/// (no epoch is taken); an SST object overwritten with a flipped byte is a problem named by
/// its key (exit 4); a stray object is a warning only; `--fix` is refused.
#[test]
fn fsck_of_a_bucket_finds_a_corrupt_sst_object_by_name() -> anyhow::Result<()> {
    let seaweed = Seaweed::start()?;
    let store = format!("s3://{BUCKET}/fsck");
    let dir = tempfile::tempdir()?;
    let server = store_writer_with(
        &seaweed,
        &store,
        dir.path(),
        &["--store-flush-interval-ms", "200"],
    )?;
    put_and_flush(&server, "s3.fsck", 500)?;
    let epoch = gauge(&server, "strata_store_epoch")?;
    let (code, out) = fsck_bucket(&seaweed, "fsck", &[])?;
    anyhow::ensure!(code == 0, "exit {code}: {out}");
    anyhow::ensure!(
        out.contains("strata fsck s3://strata/fsck") && out.contains("clean"),
        "{out}"
    );
    anyhow::ensure!(
        out.contains("tables: ") && !out.contains("tables: 0 data rows"),
        "{out}"
    );
    // The writer was not fenced: it still takes synced writes.
    put_and_flush(&server, "s3.fsck.after", 5)?;
    anyhow::ensure!(gauge(&server, "strata_store_epoch")? == epoch);
    drop(server);
    // A stray object is a warning; a flipped byte in a live SST an error naming it.
    let bucket = strata_server::store::build_store(
        &crate::s3::store_config(&seaweed, "fsck")?,
        strata_server::store::Retries::Quick,
    )?;
    let rt = crate::s3::runtime()?;
    let listed = rt.block_on(bucket.list_with_delimiter(Some(&ObjectPath::from("fsck/sst"))))?;
    let victim = listed
        .objects
        .iter()
        .filter(|o| o.location.as_ref().ends_with(".sst"))
        .max_by_key(|o| o.size)
        .context("no SST object")?
        .location
        .clone();
    let mut bytes = rt
        .block_on(async { bucket.get(&victim).await?.bytes().await })?
        .to_vec();
    bytes[100] ^= 0x40;
    rt.block_on(bucket.put(&victim, PutPayload::from(bytes)))?;
    let stray = ObjectPath::from("fsck/sst/00000000000000ff.sst");
    rt.block_on(bucket.put(&stray, PutPayload::from_static(b"left by a crashed flush")))?;
    let (code, out) = fsck_bucket(&seaweed, "fsck", &[])?;
    anyhow::ensure!(code == 4, "exit {code}: {out}");
    anyhow::ensure!(
        out.lines()
            .any(|l| l.starts_with("error") && l.contains(victim.as_ref())),
        "{out}"
    );
    anyhow::ensure!(
        out.lines()
            .any(|l| l.starts_with("warning") && l.contains(stray.as_ref())),
        "{out}"
    );
    let (code, out) = fsck_bucket(&seaweed, "fsck", &["--fix", "--yes"])?;
    anyhow::ensure!(
        code == 8 && out.contains("--fix repairs data directories only"),
        "{out}"
    );
    Ok(())
}
