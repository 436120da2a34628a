//! The Prometheus HTTP API endpoints, without HTTP types: the server hands over the path
//! under `/api/v1/`, the method, the query string and body, and gets a status and a JSON body
//! in Prometheus' envelope. Parameters come from the query string and, on POST, from the
//! form-encoded body (the body's first), as Prometheus reads them.
//!
//! Errors use Prometheus' types and statuses: `bad_data` 400 (a bad parameter, a query that
//! is not PromQL or uses a part Strata does not evaluate), `execution` 422 (a query that
//! fails as it runs, or reads past a limit), `timeout` 503, `internal` 500.

use std::time::Duration;

use strata_tsdb::Tsdb;

use super::json;
use super::metadata::{label_names, label_values, parse_selectors, series};
use super::{DEFAULT_LOOKBACK_MS, PromQuery, promql_eval};
use crate::error::{Error, Result};
use crate::model::QueryLimits;
use crate::parse::parse_query_string;

/// The Prometheus API version Strata's answers follow, reported by `status/buildinfo` so that
/// Grafana enables what that version has (`match[]` on label endpoints, for one).
const PROMETHEUS_API_VERSION: &str = "2.53.0";

/// One request to the Prometheus HTTP API.
#[derive(Debug, Clone, Copy)]
pub struct PromRequest<'a> {
    /// The path after `/api/v1/`, as sent: `query_range`, `label/job/values`, ...
    pub path: &'a str,
    /// The HTTP method, upper case.
    pub method: &'a str,
    /// The query string, without `?`.
    pub query_string: &'a str,
    /// The body: form-encoded parameters on POST.
    pub body: &'a [u8],
    /// The time an instant query without `time` is evaluated at, ms.
    pub now_ms: i64,
}

/// An answer: HTTP status and JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromResponse {
    /// HTTP status.
    pub status: u16,
    /// The body, JSON.
    pub body: Vec<u8>,
}

/// Endpoints under `/api/v1/` that are Prometheus' and nobody else's.
const ENDPOINTS: [&str; 10] = [
    "query_range",
    "labels",
    "series",
    "metadata",
    "query_exemplars",
    "format_query",
    "status/buildinfo",
    "rules",
    "alerts",
    "status/flags",
];

/// Whether a request to `/api/v1/<path>` is a Prometheus API request. `query` is also
/// OpenTSDB's (`/api/v1/query` is its `/api/query`): it is Prometheus' when it carries a
/// `query` parameter in the query string or is a form-encoded POST, as Grafana sends it;
/// OpenTSDB's takes `m=`/`tsuid=` or a JSON body.
pub fn prometheus_claims(path: &str, query_string: &str, content_type: Option<&str>) -> bool {
    let path = path.trim_end_matches('/');
    if ENDPOINTS.contains(&path) || label_values_name(path).is_some() {
        return true;
    }
    if path != "query" {
        return false;
    }
    let form = content_type.is_some_and(|c| {
        c.trim_start()
            .to_ascii_lowercase()
            .starts_with("application/x-www-form-urlencoded")
    });
    form || parse_query_string(query_string)
        .iter()
        .any(|(k, _)| k == "query")
}

/// The label name of a `label/<name>/values` path.
fn label_values_name(path: &str) -> Option<&str> {
    path.strip_prefix("label/")?
        .strip_suffix("/values")
        .filter(|n| !n.is_empty() && !n.contains('/'))
}

/// The request's parameters: the POST body's, then the query string's.
struct Params(Vec<(String, String)>);

impl Params {
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }
}

fn invalid(param: &str, message: impl std::fmt::Display) -> Error {
    Error::bad_request(format!("invalid parameter \"{param}\": {message}"))
}

/// Answers a Prometheus API request.
pub fn handle_prometheus(tsdb: &Tsdb, req: &PromRequest<'_>, limits: &QueryLimits) -> PromResponse {
    match route(tsdb, req, limits) {
        Ok(data) => PromResponse {
            status: 200,
            body: data,
        },
        Err(e) => {
            let (error_type, status) = error_type(&e);
            if status >= 500 && status != 503 {
                tracing::error!(error = %e, "PromQL request failed");
            }
            PromResponse {
                status,
                body: json::error(error_type, &e.to_string()),
            }
        }
    }
}

/// Prometheus' error type and status of an error.
fn error_type(e: &Error) -> (&'static str, u16) {
    match e {
        Error::Timeout { .. } => ("timeout", 503),
        Error::Storage(_) | Error::Encode(_) => ("internal", 500),
        Error::Execution(_) | Error::LimitExceeded(_) => ("execution", 422),
        _ => ("bad_data", 400),
    }
}

fn route(tsdb: &Tsdb, req: &PromRequest<'_>, limits: &QueryLimits) -> Result<Vec<u8>> {
    let method_not_allowed = || {
        Error::bad_request(format!(
            "method {} is not allowed on /api/v1/{}",
            req.method, req.path
        ))
    };
    if req.method != "GET" && req.method != "POST" {
        return Err(method_not_allowed());
    }
    let mut pairs = Vec::new();
    if req.method == "POST" {
        pairs.extend(parse_query_string(&String::from_utf8_lossy(req.body)));
    }
    pairs.extend(parse_query_string(req.query_string));
    let p = Params(pairs);
    let path = req.path.trim_end_matches('/');
    if let Some(name) = label_values_name(path) {
        let name = crate::parse::parse_query_string(&format!("n={name}"))
            .pop()
            .map(|(_, n)| unescape_label_path(&n))
            .unwrap_or_default();
        let selectors = parse_selectors(&p.all("match[]"))?;
        let values = label_values(tsdb, &name, &selectors)?;
        return Ok(json::success(&string_array(&values, limit(&p)?)));
    }
    match path {
        "query" => {
            let time_ms = match p.get("time") {
                Some(t) => parse_time(t).map_err(|e| invalid("time", e))?,
                None => req.now_ms,
            };
            let q = PromQuery {
                query: query_param(&p)?,
                start_ms: time_ms,
                end_ms: time_ms,
                step_ms: 1,
                lookback_ms: lookback(&p)?,
            };
            run(tsdb, &q, &p, limits)
        }
        "query_range" => {
            let start_ms =
                parse_time(p.get("start").unwrap_or_default()).map_err(|e| invalid("start", e))?;
            let end_ms =
                parse_time(p.get("end").unwrap_or_default()).map_err(|e| invalid("end", e))?;
            if end_ms < start_ms {
                return Err(invalid(
                    "end",
                    "end timestamp must not be before start time",
                ));
            }
            let step_ms = parse_duration(p.get("step").unwrap_or_default())
                .map_err(|e| invalid("step", e))?;
            if step_ms <= 0 {
                return Err(invalid(
                    "step",
                    "zero or negative query resolution step widths are not accepted. Try a positive integer",
                ));
            }
            let q = PromQuery {
                query: query_param(&p)?,
                start_ms,
                end_ms,
                step_ms,
                lookback_ms: lookback(&p)?,
            };
            run(tsdb, &q, &p, limits)
        }
        "labels" => {
            let selectors = parse_selectors(&p.all("match[]"))?;
            let names = label_names(tsdb, &selectors)?;
            Ok(json::success(&string_array(&names, limit(&p)?)))
        }
        "series" => {
            let matches = p.all("match[]");
            if matches.is_empty() {
                return Err(Error::bad_request("no match[] parameter provided"));
            }
            let selectors = parse_selectors(&matches)?;
            let mut all = series(tsdb, &selectors)?;
            if let Some(n) = limit(&p)? {
                all.truncate(n);
            }
            let mut out = vec![b'['];
            for (i, labels) in all.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                json::labels(&mut out, labels);
            }
            out.push(b']');
            Ok(json::success(&out))
        }
        "format_query" => {
            let query = query_param(&p)?;
            let ast = super::parse_ast(&query).map_err(|e| invalid("query", e))?;
            let mut out = Vec::new();
            json::string(&mut out, &ast.prettify());
            Ok(json::success(&out))
        }
        // Strata keeps no metric metadata (type, help, unit), exemplars, rules or alerts.
        "metadata" => Ok(json::success(b"{}")),
        "query_exemplars" => Ok(json::success(b"[]")),
        "rules" => Ok(json::success(b"{\"groups\":[]}")),
        "alerts" => Ok(json::success(b"{\"alerts\":[]}")),
        "status/flags" => Ok(json::success(b"{}")),
        "status/buildinfo" => {
            let mut out = Vec::new();
            out.extend_from_slice(b"{\"version\":");
            json::string(&mut out, PROMETHEUS_API_VERSION);
            out.extend_from_slice(b",\"revision\":");
            json::string(&mut out, concat!("strata-", env!("CARGO_PKG_VERSION")));
            out.extend_from_slice(
                b",\"branch\":\"\",\"buildUser\":\"\",\"buildDate\":\"\",\"goVersion\":\"\",\
                  \"application\":\"Strata\"}",
            );
            Ok(json::success(&out))
        }
        _ => Err(Error::bad_request(format!(
            "unknown Prometheus API endpoint /api/v1/{path}"
        ))),
    }
}

/// A label name of a `label/<name>/values` path, with Prometheus' escaping of names that are
/// not legacy names undone: `U__` then `__` for `_` and `_<hex code point>_` for any other
/// character (`U__host_2e_name` is `host.name`). Anything else is the name as it is.
fn unescape_label_path(name: &str) -> String {
    let Some(rest) = name.strip_prefix("U__") else {
        return name.to_owned();
    };
    let mut out = String::with_capacity(rest.len());
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        if c != '_' {
            out.push(c);
            continue;
        }
        let mut hex = String::new();
        loop {
            match chars.next() {
                Some('_') => break,
                Some(h) if h.is_ascii_hexdigit() && hex.len() < 8 => hex.push(h),
                _ => return name.to_owned(),
            }
        }
        if hex.is_empty() {
            out.push('_');
            continue;
        }
        match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
            Some(ch) => out.push(ch),
            None => return name.to_owned(),
        }
    }
    out
}

fn run(tsdb: &Tsdb, q: &PromQuery, p: &Params, limits: &QueryLimits) -> Result<Vec<u8>> {
    let mut limits = *limits;
    if let Some(t) = p.get("timeout") {
        let ms = parse_duration(t).map_err(|e| invalid("timeout", e))?;
        let asked = Duration::from_millis(u64::try_from(ms.max(0)).unwrap_or(0));
        limits.timeout = Some(limits.timeout.map_or(asked, |c| c.min(asked)));
    }
    let value = promql_eval(tsdb, q, &limits).map_err(|e| match e {
        Error::BadRequest { message, details } => Error::BadRequest {
            message: format!("invalid parameter \"query\": {message}"),
            details,
        },
        Error::Unsupported(m) => Error::Unsupported(format!("invalid parameter \"query\": {m}")),
        other => other,
    })?;
    Ok(json::query_result(&value))
}

fn query_param(p: &Params) -> Result<String> {
    p.get("query")
        .map(str::to_owned)
        .ok_or_else(|| invalid("query", "no query given"))
}

fn lookback(p: &Params) -> Result<i64> {
    match p.get("lookback_delta") {
        Some(d) => parse_duration(d)
            .map_err(|e| Error::bad_request(format!("error parsing lookback delta duration: {e}"))),
        None => Ok(DEFAULT_LOOKBACK_MS),
    }
}

fn limit(p: &Params) -> Result<Option<usize>> {
    match p.get("limit") {
        None => Ok(None),
        Some(l) => match l.parse::<i64>() {
            Ok(n) if n > 0 => Ok(usize::try_from(n).ok()),
            Ok(_) => Ok(None),
            Err(_) => Err(invalid("limit", "limit must be a number")),
        },
    }
}

fn string_array(values: &[String], limit: Option<usize>) -> Vec<u8> {
    let mut out = vec![b'['];
    for (i, v) in values.iter().take(limit.unwrap_or(usize::MAX)).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json::string(&mut out, v);
    }
    out.push(b']');
    out
}

/// A time as Prometheus takes it: Unix seconds (fractions to the ms) or RFC 3339.
pub(crate) fn parse_time(s: &str) -> std::result::Result<i64, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>()
        && secs.is_finite()
    {
        let ms = (secs * 1000.0).round();
        if ms.abs() < 9.2e18 {
            return Ok(ms as i64);
        }
    }
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp_millis())
        .map_err(|_| format!("cannot parse {s:?} to a valid timestamp"))
}

/// A duration as Prometheus takes it: seconds (fractions allowed) or `1h30m`-style units
/// (`ms`, `s`, `m`, `h`, `d`, `w`, `y`), in ms.
pub(crate) fn parse_duration(s: &str) -> std::result::Result<i64, String> {
    let s = s.trim();
    let bad = || format!("cannot parse {s:?} to a valid duration");
    if let Ok(secs) = s.parse::<f64>() {
        let ms = (secs * 1000.0).round();
        if !ms.is_finite() || ms.abs() >= 9.2e18 {
            return Err(format!(
                "cannot parse {s:?} to a valid duration. It overflows int64"
            ));
        }
        return Ok(ms as i64);
    }
    const UNITS: [(&str, i64); 7] = [
        ("y", 365 * 86_400_000),
        ("w", 7 * 86_400_000),
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
        ("ms", 1),
    ];
    let mut rest = s;
    let mut total: i64 = 0;
    let mut last_unit = 0usize;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad());
        }
        let n: i64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let Some(pos) = UNITS.iter().position(|(u, _)| *u == unit) else {
            return Err(bad());
        };
        // Units go from the largest to the smallest, each once.
        if pos < last_unit || (total > 0 && pos == last_unit) {
            return Err(bad());
        }
        last_unit = pos;
        total = n
            .checked_mul(UNITS[pos].1)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
        rest = &rest[unit_len..];
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_durations() {
        assert_eq!(parse_time("1435781451.781"), Ok(1_435_781_451_781));
        assert_eq!(parse_time("4"), Ok(4000));
        assert_eq!(
            parse_time("2015-07-01T20:10:51.781Z"),
            Ok(1_435_781_451_781)
        );
        assert_eq!(
            parse_time("2015-07-01T22:10:51+02:00"),
            Ok(1_435_781_451_000)
        );
        assert!(parse_time("yesterday").is_err());
        assert!(parse_time("").is_err());
        assert_eq!(parse_duration("15"), Ok(15_000));
        assert_eq!(parse_duration("0.5"), Ok(500));
        assert_eq!(parse_duration("1m"), Ok(60_000));
        assert_eq!(parse_duration("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration("2d"), Ok(172_800_000));
        assert_eq!(parse_duration("100ms"), Ok(100));
        assert_eq!(parse_duration("1m30s500ms"), Ok(90_500));
        for bad in ["", "m", "1x", "30m1h", "1m1m", "-1m"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn escaped_label_names() {
        assert_eq!(unescape_label_path("host"), "host");
        assert_eq!(unescape_label_path("U__host_2e_name"), "host.name");
        assert_eq!(unescape_label_path("U__a__b"), "a_b");
        assert_eq!(unescape_label_path("U__caf_e9_"), "café");
        // Not a valid escape: the name as sent.
        assert_eq!(unescape_label_path("U__a_zz_"), "U__a_zz_");
        assert_eq!(unescape_label_path("U__a_2e"), "U__a_2e");
    }

    #[test]
    fn claims_only_prometheus_requests() {
        let form = Some("application/x-www-form-urlencoded");
        assert!(prometheus_claims("query", "query=up&time=1", None));
        assert!(prometheus_claims("query", "", form));
        assert!(!prometheus_claims("query", "start=1h-ago&m=sum:x", None));
        assert!(!prometheus_claims("query", "", Some("application/json")));
        assert!(prometheus_claims("query_range", "", None));
        assert!(prometheus_claims("label/__name__/values", "", None));
        assert!(prometheus_claims("status/buildinfo", "", None));
        assert!(!prometheus_claims("label//values", "", None));
        assert!(!prometheus_claims("write", "", None));
        assert!(!prometheus_claims("put", "", form));
    }

    #[test]
    fn errors_map_to_prometheus_types() {
        assert_eq!(error_type(&Error::bad_request("x")), ("bad_data", 400));
        assert_eq!(
            error_type(&Error::Unsupported("x".into())),
            ("bad_data", 400)
        );
        assert_eq!(
            error_type(&Error::Execution("x".into())),
            ("execution", 422)
        );
        assert_eq!(
            error_type(&Error::Timeout {
                limit_ms: 1,
                elapsed_ms: 2
            }),
            ("timeout", 503)
        );
        assert_eq!(error_type(&Error::Storage("x".into())), ("internal", 500));
    }
}
