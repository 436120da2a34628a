//! The collectors' write endpoints: `POST /api/v1/write` (Prometheus remote write 1.0) and
//! `POST /write`, `POST /api/v2/write` (Influx line protocol). strata-ingest parses and
//! answers; this module reads the body, stores the points, and counts them.
//!
//! Both take `?sync` as `/api/put` does: the answer waits until the WAL is fsynced.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

use hyper::Request;
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use strata_ingest::{
    InfluxApi, InfluxBatch, InfluxReply, Precision, RemoteWriteBatch, decompress_write_request_into,
};
use strata_tsdb::SeriesPoint;

use crate::body::read_body;
use crate::metrics::{ProtocolCounters, reason, refusal_reason, rejection_reason};
use crate::resp::{Resp, flag, query_param, raw};
use crate::shared::Shared;

/// Write bodies from this size are parsed and stored off the async worker. The server runs a
/// worker per core by default, so a Prometheus request (2000 samples, about 35 KiB compressed)
/// or a line protocol body of a few thousand points, parsed and stored in place, holds up only
/// its own worker for about a millisecond while the others take its other connections. Handing
/// the worker's connections to another thread costs a wake-up and a context switch or two on
/// every body, more than a tenth of the work of such a body, so only bodies that take many
/// milliseconds (Telegraf's 1 MB ones and up) leave the worker.
const OFFLOAD_BYTES: usize = 1 << 20;

/// Handles `POST /api/v1/write`.
pub(crate) async fn remote_write(req: Request<Incoming>, shared: &Shared) -> Resp {
    let sync = flag(req.uri().query().unwrap_or(""), "sync");
    let body = match read_body(req, shared).await {
        Ok(body) => body,
        Err(resp) => return resp,
    };
    off_worker(sync || body.len() >= OFFLOAD_BYTES, || {
        remote_write_now(&body, shared, sync)
    })
}

thread_local! {
    /// The decompressed request of this thread's last remote write, kept for the next.
    static DECOMPRESSED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A thread keeps its decompression buffer up to this size; a larger one is freed after its
/// request, so a burst of large requests on many blocking threads does not stay in memory.
const KEPT_DECOMPRESSED_BYTES: usize = 4 << 20;

fn remote_write_now(body: &[u8], shared: &Shared, sync: bool) -> Resp {
    DECOMPRESSED.with_borrow_mut(|buf| {
        let resp = remote_write_decompressed(body, buf, shared, sync);
        if buf.capacity() > KEPT_DECOMPRESSED_BYTES {
            *buf = Vec::new();
        }
        resp
    })
}

fn remote_write_decompressed(body: &[u8], buf: &mut Vec<u8>, shared: &Shared, sync: bool) -> Resp {
    let c = &shared.metrics.remote_write;
    let raw = match decompress_write_request_into(body, shared.config.max_body_bytes, buf) {
        Ok(len) => &buf[..len],
        Err(e) => {
            c.rejected(reason::BAD_SYNTAX);
            return text(e.status(), format!("{e}\n"));
        }
    };
    let decoded = RemoteWriteBatch::decode(raw).and_then(|mut batch| {
        batch.resolve(&shared.tsdb, &shared.remote_write_series)?;
        Ok(batch)
    });
    let batch = match decoded {
        Ok(batch) => batch,
        Err(e) => {
            c.rejected(reason::BAD_SYNTAX);
            return text(e.status(), format!("{e}\n"));
        }
    };
    c.received.inc_by(batch.samples() - batch.stale_markers());
    shared
        .metrics
        .remote_write_stale
        .inc_by(batch.stale_markers());
    c.rejected_by(reason::BAD_VALUE, batch.not_finite());
    for kind in batch.refusals() {
        c.rejected(refusal_reason(kind));
    }
    for (e, samples) in batch.series_errors() {
        c.rejected_by(rejection_reason(e.rejection()), samples);
    }
    let results = match store_series(shared, c, &batch.series_points(), sync) {
        Ok(results) => results,
        Err(e) => return text(500, format!("storage failed, retry: {e}\n")),
    };
    let reply = batch.reply(&results);
    c.stored.inc_by(reply.stored);
    text(reply.status, reply.body)
}

/// Handles `POST /write` ([`InfluxApi::V1`]) and `POST /api/v2/write` ([`InfluxApi::V2`]).
/// `db`, `rp`, `org` and `bucket` are accepted and ignored: Strata has one database.
pub(crate) async fn influx(api: InfluxApi, req: Request<Incoming>, shared: &Shared) -> Resp {
    let query = req.uri().query().unwrap_or("").to_owned();
    let given = query_param(&query, "precision");
    let precision = match api {
        InfluxApi::V1 => Precision::from_v1(given.as_deref()),
        InfluxApi::V2 => Precision::from_v2(given.as_deref()),
    };
    let Some(precision) = precision else {
        return influx_reply(Precision::invalid_reply(api, &given.unwrap_or_default()));
    };
    let sync = flag(&query, "sync");
    // One "now" for every line without a timestamp, as InfluxDB does.
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let body = match read_body(req, shared).await {
        Ok(body) => body,
        Err(resp) => return resp,
    };
    off_worker(sync || body.len() >= OFFLOAD_BYTES, || {
        let c = &shared.metrics.influx;
        let (tsdb, known) = (&shared.tsdb, &shared.influx_series);
        let mut batch = InfluxBatch::parse_known(&body, precision, now_ms, tsdb, known);
        c.received.inc_by(batch.received());
        for kind in batch.refusals() {
            c.rejected(refusal_reason(kind));
        }
        let results = if batch.rejects_all(api) {
            c.rejected_by(reason::BAD_SYNTAX, batch.known_points() as u64);
            Vec::new()
        } else {
            batch.resolve(tsdb, known);
            for e in batch.resolve_errors() {
                c.rejected(rejection_reason(e.rejection()));
            }
            match store_series(shared, c, &batch.series_points(), sync) {
                Ok(results) => results,
                Err(e) => {
                    return influx_reply(InfluxReply::storage_failed(api, &e.to_string()));
                }
            }
        };
        let reply = batch.reply(api, &results);
        c.stored.inc_by(reply.stored);
        influx_reply(reply)
    })
}

/// Stores points of resolved series and counts the ones storage refused. They are durable in
/// the WAL (with `sync` fsynced) when it returns, and a read that starts after sees them; an
/// `Err` means none may be stored.
fn store_series(
    shared: &Shared,
    c: &ProtocolCounters,
    points: &[SeriesPoint<'_>],
    sync: bool,
) -> strata_tsdb::Result<Vec<strata_tsdb::Result<()>>> {
    let tsdb = &shared.tsdb;
    // The answer promises the points are durable, and that a read after it sees them.
    let results = crate::shared::write_in_place(tsdb, || tsdb.write_series_durable(points))?;
    for e in results.iter().filter_map(|r| r.as_ref().err()) {
        c.rejected(rejection_reason(e.rejection()));
    }
    if sync {
        tsdb.sync()?;
    }
    Ok(results)
}

/// Runs `work` in place, or, when `offload` (a large body, or a `sync` write that waits for an
/// fsync), with the worker's other connections handed to another thread.
fn off_worker<T>(offload: bool, work: impl FnOnce() -> T) -> T {
    if offload {
        tokio::task::block_in_place(work)
    } else {
        work()
    }
}

fn influx_reply(reply: InfluxReply) -> Resp {
    raw(reply.status, reply.body)
}

fn text(status: u16, body: String) -> Resp {
    let empty = body.is_empty();
    let mut resp = raw(status, body.into_bytes());
    if !empty {
        resp.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
    }
    resp
}
