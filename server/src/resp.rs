//! Building responses in OpenTSDB's shapes (JSON bodies, the error object) and reading query
//! strings: what every handler shares.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Response, StatusCode};

/// A finished response.
pub(crate) type Resp = Response<Full<Bytes>>;

/// `handler`'s response when `method` is one of `allowed`, else a 405.
pub(crate) fn only(method: &Method, allowed: &[Method], handler: impl FnOnce() -> Resp) -> Resp {
    if allowed.contains(method) {
        handler()
    } else {
        method_not_allowed(method)
    }
}

pub(crate) fn method_not_allowed(method: &Method) -> Resp {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        "Method not allowed",
        &format!("The HTTP method [{method}] is not permitted for this endpoint"),
    )
}

/// The first value of `name` in a query string, percent-decoded.
pub(crate) fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then(|| percent_decode(v))
    })
}

/// Decodes `%XX` escapes and `+` (a space in query strings); bad escapes stay as they are.
pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A 200 JSON response.
pub(crate) fn json_ok(value: &serde_json::Value) -> Resp {
    json(StatusCode::OK, value)
}

/// True when the query string carries `name` in any form: OpenTSDB's boolean flags are
/// presence flags (`?sync`, `?sync=true` and `?sync=false` all mean set).
pub(crate) fn flag(query: &str, name: &str) -> bool {
    query
        .split('&')
        .any(|kv| kv.split('=').next() == Some(name))
}

/// A JSON body that is already serialised (an empty body sends no content type).
pub(crate) fn raw(status: u16, body: Vec<u8>) -> Resp {
    let empty = body.is_empty();
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if !empty {
        resp.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=UTF-8"),
        );
    }
    resp
}

/// OpenTSDB's error body: `{"error":{"code":…,"message":…[,"details":…]}}`.
pub(crate) fn error(status: StatusCode, message: &str, details: &str) -> Resp {
    let mut err = serde_json::json!({ "code": status.as_u16(), "message": message });
    if !details.is_empty() {
        err["details"] = details.into();
    }
    json(status, &serde_json::json!({ "error": err }))
}

pub(crate) fn json(status: StatusCode, value: &serde_json::Value) -> Resp {
    let body = serde_json::to_vec(value).unwrap_or_default();
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=UTF-8"),
    );
    resp
}

pub(crate) fn text(status: StatusCode, body: String) -> Resp {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=UTF-8"),
    );
    resp
}

/// Maps a tsdb error to OpenTSDB's error JSON: client errors are 400, unknown names 400 too
/// (OpenTSDB's `No such name …` on reads), storage refusing writes for now 503, everything
/// else 500.
pub(crate) fn tsdb_error(e: &strata_tsdb::Error) -> Resp {
    ApiError::from_tsdb(e).into()
}

/// An OpenTSDB error answer not rendered yet: what request parsers return, so that the
/// handler renders it once (a finished response is too large to pass around in a `Result`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
    details: String,
}

impl ApiError {
    /// An error with `status`; empty `details` are left out of the body.
    pub(crate) fn new(
        status: StatusCode,
        message: impl Into<String>,
        details: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            details: details.into(),
        }
    }

    /// A 400.
    pub(crate) fn bad_request(message: impl Into<String>, details: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message, details)
    }

    /// The answer to a tsdb error, by its kind.
    pub(crate) fn from_tsdb(e: &strata_tsdb::Error) -> ApiError {
        let text = e.to_string();
        match e.kind() {
            strata_tsdb::ErrorKind::Client => ApiError::bad_request(text, ""),
            // OpenTSDB repeats a name-resolution error's message as its details.
            strata_tsdb::ErrorKind::NotFound => ApiError::bad_request(text.clone(), text),
            strata_tsdb::ErrorKind::Unavailable => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "Storage is not accepting writes",
                text,
            ),
            _ => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Unexpected exception",
                text,
            ),
        }
    }
}

impl From<ApiError> for Resp {
    fn from(e: ApiError) -> Resp {
        error(e.status, &e.message, &e.details)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_params_decode() {
        assert_eq!(
            query_param("type=metrics&q=sys%2Ec+x&max=5", "q").as_deref(),
            Some("sys.c x")
        );
        assert_eq!(query_param("a=1&b", "b").as_deref(), Some(""));
        assert_eq!(query_param("a=1", "b"), None);
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        assert!(flag("details&x=1", "details"));
        assert!(flag("details=false", "details"));
        assert!(!flag("detailsx", "details"));
    }
}
