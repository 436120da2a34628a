//! The `/api/query` endpoint without HTTP types: the server passes the verb, the raw query string
//! and body, and the current time, and gets back a status code and a JSON body.

use strata_tsdb::Tsdb;

use crate::arrow::{ARROW_STREAM_CONTENT_TYPE, render_arrow, wants_arrow};
use crate::error::{Error, Result};
use crate::exec::{execute_resolved, resolve};
use crate::model::{QueryLimits, TsQuery};
use crate::output::{error_body, render};
use crate::parse::{parse_get, parse_json, parse_query_string};

/// The media type of the JSON answer and of every error body.
pub const JSON_CONTENT_TYPE: &str = "application/json; charset=UTF-8";

/// An `/api/query` answer: status, media type and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryResponse {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type` of `body`: [`JSON_CONTENT_TYPE`] or
    /// [`crate::ARROW_STREAM_CONTENT_TYPE`] (errors are always JSON).
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
}

/// The HTTP verb of an `/api/query` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryMethod {
    /// Query-string form (`m=`, `tsuid=`).
    Get,
    /// JSON body.
    Post,
    /// Like POST (JSON body, or the query string when the body is empty) and deletes the data
    /// read; refused unless [`QueryLimits::allow_delete`].
    Delete,
}

/// Parses a request into a [`TsQuery`]: the JSON body for POST (and for DELETE with a body),
/// the query string otherwise. The query-string flag `arrays` (any value) and
/// `method_override=delete` apply to both forms.
pub fn parse_request(method: QueryMethod, query_string: &str, body: &[u8]) -> Result<TsQuery> {
    let params = parse_query_string(query_string);
    let json = match method {
        QueryMethod::Get => false,
        QueryMethod::Post => true,
        QueryMethod::Delete => !body.iter().all(u8::is_ascii_whitespace),
    };
    let mut q = if json {
        parse_json(body)?
    } else {
        parse_get(&params)?
    };
    if method == QueryMethod::Delete {
        q.delete = true;
    }
    for (k, v) in &params {
        match k.as_str() {
            "arrays" => q.arrays = true,
            "method_override" if v.eq_ignore_ascii_case("delete") => q.delete = true,
            _ => {}
        }
    }
    Ok(q)
}

/// One `/api/query` request, as [`handle_query`] takes it.
#[derive(Debug, Clone, Copy)]
pub struct QueryRequest<'a> {
    /// The HTTP method.
    pub method: QueryMethod,
    /// The query string, without the `?`.
    pub query_string: &'a str,
    /// The `Accept` header.
    pub accept: Option<&'a str>,
    /// The request body.
    pub body: &'a [u8],
    /// The time relative times count back from, in ms.
    pub now_ms: i64,
}

impl<'a> QueryRequest<'a> {
    /// A request without an `Accept` header.
    pub fn new(method: QueryMethod, query_string: &'a str, body: &'a [u8], now_ms: i64) -> Self {
        QueryRequest {
            method,
            query_string,
            accept: None,
            body,
            now_ms,
        }
    }
}

/// The `offload` of [`handle_query`] for callers that have no thread to spare: runs the work
/// on the calling thread.
pub fn run_inline(work: &mut (dyn FnMut() + Send)) {
    work();
}

/// Answers `/api/query`: 200 with the result in JSON or, when `format=arrow` is in the query
/// string or the `Accept` header names [`crate::ARROW_STREAM_CONTENT_TYPE`], as an Arrow IPC
/// stream (see [`crate::render_arrow`]); otherwise OpenTSDB's JSON error body with the status of
/// the error's [`ErrorKind`](crate::ErrorKind) (400, 408, 413 or 500).
///
/// The work of a heavy query is handed to `offload`, which must run it to completion before it
/// returns. An async server passes `tokio::task::block_in_place`, so a heavy query does not
/// hold up the other connections of its worker thread; others pass [`run_inline`]. A light one
/// (a few series over a few hours, which most dashboard panels are) runs where it is: handing
/// the thread over costs more switches than such a query takes.
pub fn handle_query(
    tsdb: &Tsdb,
    request: &QueryRequest<'_>,
    limits: &QueryLimits,
    offload: &dyn Fn(&mut (dyn FnMut() + Send)),
) -> QueryResponse {
    let arrow = wants_arrow(&parse_query_string(request.query_string), request.accept);
    let result = parse_request(request.method, request.query_string, request.body).and_then(|q| {
        let run = |resolved: Result<_>| {
            let results = execute_resolved(tsdb, &q, &resolved?, limits)?;
            if arrow {
                render_arrow(&q, &results)
            } else {
                Ok(render(&q, &results))
            }
        };
        // Resolving the series is cheap and tells what the reads will cost. A delete writes,
        // so it is resolved and run after the handover.
        let mut resolved = None;
        if !q.delete {
            let r = resolve(tsdb, &q, request.now_ms, limits);
            if r.as_ref().map_or(true, |r| r.is_light()) {
                return run(r);
            }
            resolved = Some(r);
        }
        let mut out = None;
        offload(&mut || {
            let r = resolved
                .take()
                .unwrap_or_else(|| resolve(tsdb, &q, request.now_ms, limits));
            out = Some(run(r));
        });
        out.unwrap_or_else(|| Err(Error::Storage("the query did not run".to_owned())))
    });
    match result {
        Ok(body) => QueryResponse {
            status: 200,
            content_type: if arrow {
                ARROW_STREAM_CONTENT_TYPE
            } else {
                JSON_CONTENT_TYPE
            },
            body,
        },
        Err(e) => error_response(&e),
    }
}

fn error_response(e: &Error) -> QueryResponse {
    if e.status() >= 500 {
        tracing::error!(error = %e, "query failed");
    }
    QueryResponse {
        status: e.status(),
        content_type: JSON_CONTENT_TYPE,
        body: error_body(e),
    }
}
