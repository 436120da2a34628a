//! `POST /api/put`: parse the body, store the good points, answer in OpenTSDB's shapes.

use hyper::Request;
use hyper::body::Incoming;
use strata_ingest::{DatapointEcho, Num, PutFailure, PutResponse, ReplyMode, parse_put_body};
use strata_tsdb::{ErrorKind, PointRef, Value};

use crate::http::{Resp, Shared, flag, raw};

/// Handles one `/api/put` request.
pub(crate) async fn handle(req: Request<Incoming>, shared: &Shared) -> Resp {
    let query = req.uri().query().unwrap_or("").to_string();
    let mode = ReplyMode::from_flags(flag(&query, "summary"), flag(&query, "details"));
    let sync = flag(&query, "sync");
    let decoded = match crate::http::read_body(req, shared).await {
        Ok(body) => body,
        Err(resp) => return resp,
    };
    let parsed = match parse_put_body(&decoded, &shared.parse) {
        Ok(p) => p,
        Err(e) => return raw(e.status(), e.to_json()),
    };
    let ingest_points: Vec<_> = parsed.points().collect();
    let points: Vec<PointRef<'_>> = ingest_points.iter().map(to_tsdb).collect();
    let tsdb = shared.tsdb.clone();
    let results = tokio::task::block_in_place(|| {
        if sync {
            tsdb.write_sync(&points)
        } else {
            tsdb.write(&points)
        }
    });
    let mut invalid: Vec<PutFailure> = parsed.failures().to_vec();
    let mut storage = Vec::new();
    let mut success = 0u64;
    for (i, (r, p)) in results.into_iter().zip(&points).enumerate() {
        match r {
            Ok(()) => success += 1,
            Err(e) => {
                let failure = PutFailure {
                    index: i,
                    datapoint: echo(p),
                    error: e.to_string(),
                };
                if e.kind() == ErrorKind::Server {
                    storage.push(failure);
                } else {
                    invalid.push(failure);
                }
            }
        }
    }
    let resp = PutResponse::build(mode, success, &invalid, &storage);
    raw(resp.status, resp.body)
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

/// The storage layer's view of a parsed point; borrows everything.
pub(crate) fn to_tsdb<'a>(p: &'a strata_ingest::PointRef<'a>) -> PointRef<'a> {
    PointRef {
        metric: p.metric,
        tags: p.tags.as_slice(),
        timestamp: p.timestamp,
        value: match p.value {
            Num::Int(i) => Value::Int(i),
            Num::Float(f) => Value::Float(f),
        },
    }
}
