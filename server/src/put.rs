//! `POST /api/put`: parse the body, store the good points, answer in OpenTSDB's shapes.
//!
//! With `?sync` the reply waits until the WAL is fsynced. With `?sync&sync_timeout=<ms>` (ms > 0)
//! it waits at most that long: when the write has not finished by then the reply is a 400, as
//! in OpenTSDB, and the write carries on in the background (OpenTSDB's `PutDataPointRpc`).
//!
//! When storage refuses writes for now (a full disk, or a failed WAL until a restart) the
//! reply is a 503 with the error JSON, whatever the reply mode: the client should retry later.

use std::time::Duration;

use hyper::Request;
use hyper::body::Incoming;
use serde_json::json;
use strata_ingest::{
    BodyError, DatapointEcho, ParsedPut, PutFailure, PutPointError, PutResponse, ReplyMode,
    parse_put_body,
};
use strata_tsdb::{ErrorKind, Point, PointRef, Value};

use crate::metrics::rejection_reason;
use crate::resp::{Resp, flag, query_param, raw};
use crate::shared::Shared;
use crate::shared::write_in_place;

/// Handles one `/api/put` request.
pub(crate) async fn handle(req: Request<Incoming>, shared: &Shared) -> Resp {
    let query = req.uri().query().unwrap_or("").to_string();
    let mode = ReplyMode::from_flags(flag(&query, "summary"), flag(&query, "details"));
    let sync = flag(&query, "sync");
    // OpenTSDB ignores a zero or unparsable timeout (waits for as long as it takes).
    let sync_timeout = query_param(&query, "sync_timeout")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&ms| sync && ms > 0)
        .map(Duration::from_millis);
    let decoded = match crate::body::read_body(req, shared).await {
        Ok(body) => body,
        Err(resp) => return resp,
    };
    put_decoded(&decoded, shared, mode, sync, sync_timeout).await
}

/// Stores the points of a decoded `/api/put` body and answers.
async fn put_decoded(
    decoded: &[u8],
    shared: &Shared,
    mode: ReplyMode,
    sync: bool,
    sync_timeout: Option<Duration>,
) -> Resp {
    match sync_timeout {
        Some(timeout) => put_within(decoded, shared, mode, timeout).await,
        // A large body's parse and write keep a thread busy for milliseconds to seconds: the
        // worker's other connections go to another thread meanwhile, and large puts on several
        // connections run in parallel, even with one worker thread. So do puts while writes
        // stall: the names of a new series are written before its points, and wait as well.
        None if sync || decoded.len() >= OFFLOAD_PUT_BYTES || shared.tsdb.write_may_block() => {
            tokio::task::block_in_place(|| put_now(decoded, shared, mode, sync))
        }
        None => put_now(decoded, shared, mode, false),
    }
}

/// Bodies from this size are parsed and written off the async worker (see [`put_decoded`]):
/// about 600 points, a millisecond of work, against the 20 µs the handover costs.
const OFFLOAD_PUT_BYTES: usize = 64 << 10;

/// Parses `body` and counts what was received and rejected.
fn parse_counted<'a>(body: &'a [u8], shared: &Shared) -> Result<ParsedPut<'a>, BodyError> {
    let parsed = parse_put_body(body, &shared.parse)?;
    let counters = &shared.metrics.http;
    counters.received.inc_by(parsed.total() as u64);
    for f in parsed.failures() {
        counters.rejected(rejection_reason(f.error.rejection()));
    }
    Ok(parsed)
}

/// Stores the points of `body` and answers. A `sync` put waits for the fsync, so it is only
/// run off the async worker ([`put_decoded`] sees to that).
fn put_now(body: &[u8], shared: &Shared, mode: ReplyMode, sync: bool) -> Resp {
    let parsed = match parse_counted(body, shared) {
        Ok(p) => p,
        Err(e) => return raw(e.status(), e.to_json()),
    };
    let ingest_points: Vec<_> = parsed.points().collect();
    let points: Vec<PointRef<'_>> = ingest_points.iter().map(|p| p.to_tsdb()).collect();
    let tsdb = &shared.tsdb;
    // Off the worker already, `write_in_place`'s own handover just runs the write.
    let results = if sync {
        tsdb.write_sync(&points)
    } else {
        write_in_place(tsdb, || tsdb.write(&points))
    };
    let results = results.into_iter().map(|r| r.map_err(PutPointError::from));
    respond(shared, mode, &parsed, &points, results.collect())
}

/// Stores the points of `body` with an fsync, answering after at most `timeout`.
async fn put_within(body: &[u8], shared: &Shared, mode: ReplyMode, timeout: Duration) -> Resp {
    let parsed = match parse_counted(body, shared) {
        Ok(p) => p,
        Err(e) => return raw(e.status(), e.to_json()),
    };
    let ingest_points: Vec<_> = parsed.points().collect();
    let points: Vec<PointRef<'_>> = ingest_points.iter().map(|p| p.to_tsdb()).collect();
    let owned: Vec<Point> = points.iter().map(to_owned).collect();
    match write_sync_within(shared.tsdb.clone(), owned, timeout).await {
        Ok(results) => respond(shared, mode, &parsed, &points, results),
        Err(WriteTimedOut) => {
            shared.metrics.put_sync_timeouts.inc();
            timed_out(mode, parsed.failures(), points.len() as u64)
        }
    }
}

/// The answer to a put whose `points` were stored with `results`.
fn respond(
    shared: &Shared,
    mode: ReplyMode,
    parsed: &ParsedPut<'_>,
    points: &[PointRef<'_>],
    results: Vec<Result<(), PutPointError>>,
) -> Resp {
    let counters = &shared.metrics.http;
    let mut invalid: Vec<PutFailure> = parsed.failures().to_vec();
    let mut storage = Vec::new();
    let mut success = 0u64;
    let mut unavailable = None;
    for (i, (r, p)) in results.into_iter().zip(points).enumerate() {
        match r {
            Ok(()) => success += 1,
            Err(e) => {
                counters.rejected(rejection_reason(e.rejection()));
                let kind = e.kind();
                let failure = PutFailure {
                    index: i,
                    datapoint: echo(p),
                    error: e,
                };
                match kind {
                    ErrorKind::Server => storage.push(failure),
                    ErrorKind::Unavailable => {
                        unavailable.get_or_insert(failure.error.to_string());
                    }
                    ErrorKind::Client | ErrorKind::NotFound => invalid.push(failure),
                }
            }
        }
    }
    counters.stored.inc_by(success);
    if let Some(details) = unavailable {
        return crate::resp::error(
            hyper::StatusCode::SERVICE_UNAVAILABLE,
            "Storage is not accepting writes",
            &details,
        );
    }
    let resp = PutResponse::build(mode, success, &invalid, &storage);
    raw(resp.status, resp.body)
}

/// The write did not finish within `sync_timeout`.
#[derive(Debug)]
struct WriteTimedOut;

/// Writes `points` with an fsync on a blocking thread and waits for at most `timeout`. On
/// timeout the write is not cancelled: it finishes in the background, as OpenTSDB's queued
/// puts do.
async fn write_sync_within(
    tsdb: strata_tsdb::Tsdb,
    points: Vec<Point>,
    timeout: Duration,
) -> Result<Vec<Result<(), PutPointError>>, WriteTimedOut> {
    let n = points.len();
    run_within(timeout, n, move || {
        let refs: Vec<PointRef<'_, String>> = points.iter().map(Point::as_ref).collect();
        tsdb.write_sync(&refs)
            .into_iter()
            .map(|r| r.map_err(PutPointError::from))
            .collect()
    })
    .await
}

/// Runs `write`, the write of `n` points, on a blocking thread and waits for at most
/// `timeout`; see [`write_sync_within`].
async fn run_within(
    timeout: Duration,
    n: usize,
    write: impl FnOnce() -> Vec<Result<(), PutPointError>> + Send + 'static,
) -> Result<Vec<Result<(), PutPointError>>, WriteTimedOut> {
    let task = tokio::task::spawn_blocking(write);
    match tokio::time::timeout(timeout, task).await {
        Ok(Ok(results)) => Ok(results),
        // The write panicked: report every point as a storage failure.
        Ok(Err(join)) => Ok((0..n)
            .map(|_| Err(PutPointError::Internal(join.to_string())))
            .collect()),
        Err(_) => Err(WriteTimedOut),
    }
}

/// OpenTSDB's reply when `sync_timeout` expires: 400, with the counts object (plus
/// `"timeouts"`) when `summary` or `details` was asked for, else an error. Points that failed
/// parsing count as failed; every point sent to storage counts as timed out.
fn timed_out(mode: ReplyMode, failures: &[PutFailure], timeouts: u64) -> Resp {
    let failed = failures.len() as u64;
    match mode {
        ReplyMode::Plain => crate::resp::error(
            hyper::StatusCode::BAD_REQUEST,
            &format!(
                "The put call has timedout with 0 successful writes, {failed} failed writes \
                 and {timeouts} timed out writes."
            ),
            "Please see the TSD logs or append \"details\" to the put request",
        ),
        ReplyMode::Summary | ReplyMode::Details => {
            let mut body = json!({ "success": 0, "failed": failed, "timeouts": timeouts });
            if mode == ReplyMode::Details {
                body["errors"] = failures
                    .iter()
                    .map(|f| json!({ "datapoint": f.datapoint, "error": f.error.to_string() }))
                    .collect();
            }
            crate::resp::json(hyper::StatusCode::BAD_REQUEST, &body)
        }
    }
}

fn echo(p: &PointRef<'_>) -> DatapointEcho {
    DatapointEcho {
        metric: Some(p.metric.to_string()),
        timestamp: p.timestamp,
        value: Some(match p.value {
            Value::Int(i) => i.to_string(),
            Value::Float(f) => f.to_string(),
        }),
        tags: Some(
            p.tags
                .iter()
                .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                .collect(),
        ),
    }
}

fn to_owned(p: &PointRef<'_>) -> Point {
    Point {
        metric: p.metric.to_string(),
        tags: p
            .tags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        timestamp: p.timestamp,
        value: p.value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sync_timeout_answers_before_a_slow_write_finishes() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let tsdb = strata_tsdb::Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default())?;
        let point = |i: i64| Point {
            metric: "m".into(),
            tags: vec![("h".into(), "a".into())],
            timestamp: 1_356_998_400 + i,
            value: Value::Int(i),
        };
        // A generous timeout: the write finishes and every point is acknowledged.
        let results = write_sync_within(tsdb.clone(), vec![point(0)], Duration::from_secs(30))
            .await
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        assert_eq!(results.len(), 1);
        assert!(results[0].is_ok());
        // A write that cannot finish before the test lets it: the reply comes at the
        // timeout, and the write carries on and finishes afterwards.
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let (finished, done) = std::sync::mpsc::channel::<()>();
        let r = run_within(Duration::from_millis(1), 1, move || {
            let _ = wait.recv();
            let _ = finished.send(());
            vec![Ok(())]
        })
        .await;
        assert!(r.is_err(), "the reply waited for the write");
        release.send(())?;
        done.recv()?;
        // A write that panics: every point is a storage failure.
        let r = run_within(Duration::from_secs(30), 2, || panic!("a failed write"))
            .await
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        assert_eq!(r.len(), 2);
        assert!(
            r.iter()
                .all(|r| r.as_ref().is_err_and(|e| e.kind() == ErrorKind::Server))
        );
        Ok(())
    }

    /// A large body is parsed and stored off the async worker: with one worker thread, the
    /// worker's other tasks (queries, other connections) run meanwhile, instead of waiting for
    /// the whole put.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_large_put_leaves_the_worker_to_other_tasks() -> anyhow::Result<()> {
        const POINTS: usize = 100_000;
        let dir = tempfile::tempdir()?;
        let tsdb = strata_tsdb::Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default())?;
        let (shared, _keep) = crate::shared::Shared::for_test(tsdb)?;
        let body: Vec<serde_json::Value> = (0..POINTS)
            .map(|i| {
                json!({"metric": "m", "timestamp": 1_356_998_400 + i / 10, "value": i,
                       "tags": {"host": format!("h{}", i % 10)}})
            })
            .collect();
        let body = serde_json::to_vec(&body)?;
        assert!(body.len() >= OFFLOAD_PUT_BYTES);
        let (status, during) = crate::shared::turns_beside({
            let shared = shared.clone();
            async move {
                let resp = put_decoded(&body, &shared, ReplyMode::Plain, false, None).await;
                resp.status().as_u16()
            }
        })
        .await?;
        assert_eq!(status, 204);
        assert_eq!(shared.metrics.http.stored.get(), POINTS as u64);
        assert!(during > 0, "no other task ran while the put was stored");
        Ok(())
    }

    #[test]
    fn timeout_replies_match_opentsdb() -> anyhow::Result<()> {
        use http_body_util::BodyExt;
        let body = |r: Resp| -> anyhow::Result<(u16, serde_json::Value)> {
            let status = r.status().as_u16();
            let bytes = futures_block(r.into_body().collect())??.to_bytes();
            Ok((status, serde_json::from_slice(&bytes)?))
        };
        let (status, v) = body(timed_out(ReplyMode::Plain, &[], 3))?;
        assert_eq!(status, 400);
        assert_eq!(
            v["error"]["message"],
            "The put call has timedout with 0 successful writes, 0 failed writes and 3 timed \
             out writes."
        );
        let (status, v) = body(timed_out(ReplyMode::Summary, &[], 3))?;
        assert_eq!(status, 400);
        assert_eq!(v, json!({ "success": 0, "failed": 0, "timeouts": 3 }));
        Ok(())
    }

    /// Storage that refuses writes reaches both protocols: once the WAL failed, an HTTP put is
    /// a 503 with OpenTSDB's error JSON in every reply mode, a telnet put gets
    /// `put: storage error: …`, and `/metrics` and `/api/stats` show the state.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_wal_is_a_503_and_a_telnet_storage_error() -> anyhow::Result<()> {
        use http_body_util::BodyExt;
        use strata_engine::{DbOptions, Fault, FaultError, FaultFile, FaultOp, Faults};
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

        let dir = tempfile::tempdir()?;
        let faults = Faults::new();
        let opts = strata_tsdb::TsdbOptions {
            db: DbOptions {
                sync: strata_engine::SyncPolicy::Always,
                faults: faults.clone(),
                ..DbOptions::default()
            },
            ..strata_tsdb::TsdbOptions::default()
        };
        let tsdb = strata_tsdb::Tsdb::open(dir.path(), opts)?;
        let (shared, _keep) = crate::shared::Shared::for_test(tsdb)?;
        faults.arm(Fault::new(FaultOp::Sync, FaultError::Io).on(FaultFile::Wal));
        let body = serde_json::to_vec(&json!({"metric": "m", "timestamp": 1_356_998_400,
                                              "value": 1, "tags": {"host": "a"}}))?;
        for mode in [ReplyMode::Plain, ReplyMode::Details] {
            let resp = put_decoded(&body, &shared, mode, false, None).await;
            assert_eq!(resp.status().as_u16(), 503);
            let v: serde_json::Value =
                serde_json::from_slice(&resp.into_body().collect().await?.to_bytes())?;
            assert_eq!(v["error"]["code"], 503, "{v}");
            assert_eq!(v["error"]["message"], "Storage is not accepting writes");
            let details = v["error"]["details"].as_str().unwrap_or_default();
            assert!(details.contains("refused until a restart"), "{details}");
        }

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn({
            let shared = shared.clone();
            async move {
                let (stream, _) = listener.accept().await?;
                crate::telnet::serve_connection(stream, shared).await
            }
        });
        let mut client = tokio::net::TcpStream::connect(addr).await?;
        client
            .write_all(
                b"put m 1356998401 2 host=a
version
",
            )
            .await?;
        let mut lines = BufReader::new(client).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await??
            .unwrap_or_default();
        assert!(first.starts_with("put: storage error: "), "{first}");
        assert!(first.contains("refused until a restart"), "{first}");
        drop(lines);
        server.await??;

        let text = shared.metrics.render(&shared.tsdb);
        assert!(text.contains("\nstrata_engine_write_failed 1\n"), "{text}");
        let stats = crate::stats::lines_now(&shared);
        assert!(stats.contains("tsd.storage.write_failed "), "{stats}");
        assert!(
            stats
                .lines()
                .any(|l| l.starts_with("tsd.storage.write_failed ") && l.contains(" 1 ")),
            "{stats}"
        );
        Ok(())
    }

    /// Polls a future that never waits (a full body) to completion.
    fn futures_block<F: std::future::Future>(f: F) -> anyhow::Result<F::Output> {
        Ok(tokio::runtime::Builder::new_current_thread()
            .build()?
            .block_on(f))
    }
}
