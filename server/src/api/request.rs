//! Reading API requests: JSON bodies, query-string values, OpenTSDB times and the loose JSON
//! types OpenTSDB's Jackson accepts.

use hyper::body::Incoming;
use hyper::{Method, Request};
use serde_json::Value as Json;

use crate::body::read_body;
use crate::resp::{ApiError, Resp, percent_decode};
use crate::shared::Shared;

/// Reads a request that comes either as a GET with a query string or as a POST with a JSON
/// body, and parses it with `get` or `post`. A POST with an empty body is read from its query
/// string.
pub(crate) async fn parse_get_or_post<T>(
    req: Request<Incoming>,
    shared: &Shared,
    get: fn(&str) -> Result<T, ApiError>,
    post: fn(&[u8]) -> Result<T, ApiError>,
) -> Result<T, Resp> {
    let method = req.method().clone();
    let query = req.uri().query().unwrap_or("").to_string();
    let body = read_body(req, shared).await?;
    let parsed = if method == Method::POST && !body.iter().all(u8::is_ascii_whitespace) {
        post(&body)
    } else {
        get(&query)
    };
    parsed.map_err(Resp::from)
}

/// Parses a JSON request body, answering OpenTSDB's 400s for an empty or malformed one.
pub(crate) fn parse_json_body(body: &[u8]) -> Result<Json, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("Missing request content", ""));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request("Unable to parse the given JSON", e.to_string()))
}

/// OpenTSDB's 400 for a JSON body of the wrong shape; `detail` says what is wrong.
pub(crate) fn bad_json(detail: &str) -> ApiError {
    ApiError::bad_request("Unable to parse the given JSON", detail)
}

/// Every value of `name` in a query string, percent-decoded, in order.
pub(crate) fn query_params(query: &str, name: &str) -> Vec<String> {
    query
        .split('&')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k == name).then(|| percent_decode(v))
        })
        .collect()
}

/// The wall clock in milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Parses an OpenTSDB time (`1h-ago`, seconds, milliseconds, `2013/01/01-00:00:00`) in UTC,
/// to milliseconds. `Ok(None)` for an empty string.
pub(crate) fn parse_time_ms(s: &str) -> Result<Option<i64>, String> {
    let Some(utc) = "UTC".parse().ok() else {
        return Err("the UTC time zone is unavailable".into());
    };
    strata_query::parse_time(s.trim(), now_ms(), utc).map_err(|e| e.to_string())
}

/// A JSON number or numeric string as an i64 (OpenTSDB's Jackson accepts both).
pub(crate) fn json_i64(v: &Json) -> Option<i64> {
    match v {
        Json::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Json::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A JSON boolean, or the strings `true`/`false`.
pub(crate) fn json_bool(v: &Json) -> Option<bool> {
    match v {
        Json::Bool(b) => Some(*b),
        Json::String(s) if s.eq_ignore_ascii_case("true") => Some(true),
        Json::String(s) if s.eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}
