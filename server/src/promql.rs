//! Routes the Prometheus HTTP API (`/api/v1/query`, `query_range`, `labels`, `series`, ...)
//! to strata-query's PromQL endpoints; see `strata_query::prometheus_claims` for which
//! requests are Prometheus' (`/api/v1/query` is OpenTSDB's `/api/query` too).

use hyper::body::Incoming;
use hyper::header::CONTENT_TYPE;
use hyper::{Method, Request};

use crate::body::read_body;
use crate::resp::{Resp, raw};
use crate::shared::Shared;

/// The Prometheus API's path prefix (case-sensitive, as in Prometheus).
const PREFIX: &str = "/api/v1/";

/// Whether `req` goes to the Prometheus API.
pub(crate) fn claims(req: &Request<Incoming>) -> bool {
    let Some(path) = req.uri().path().strip_prefix(PREFIX) else {
        return false;
    };
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    strata_query::prometheus_claims(path, req.uri().query().unwrap_or(""), content_type)
}

/// Answers a request that [`claims`] took. Evaluation runs off the async worker, since a
/// PromQL query over many series reads for a while.
pub(crate) async fn handle(req: Request<Incoming>, shared: &Shared) -> Resp {
    let path = req
        .uri()
        .path()
        .strip_prefix(PREFIX)
        .unwrap_or_default()
        .to_owned();
    let method = req.method().clone();
    let query = req.uri().query().unwrap_or("").to_owned();
    let body = if method == Method::POST {
        match read_body(req, shared).await {
            Ok(b) => b,
            Err(resp) => return resp,
        }
    } else {
        Vec::new()
    };
    let limits = strata_query::QueryLimits {
        timeout: shared.config.query_timeout,
        ..strata_query::QueryLimits::default()
    };
    let request = strata_query::PromRequest {
        path: &path,
        method: method.as_str(),
        query_string: &query,
        body: &body,
        now_ms: crate::api::request::now_ms(),
    };
    let resp = tokio::task::block_in_place(|| {
        strata_query::handle_prometheus(&shared.tsdb, &request, &limits)
    });
    raw(resp.status, resp.body)
}
