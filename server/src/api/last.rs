//! `/api/query/last`: the latest point of each matching series, answered from the series
//! index's last points, which are persisted and survive restarts (OpenTSDB's `QueryRpc.handleLastDataPointQuery`; see `docs/compat.md` #12).
//!
//! A `metric{k=v}` sub-query matches every series of the metric that carries those exact
//! pairs (as OpenTSDB's meta-table path does); a `tsuids` sub-query names series directly.
//! With `backScan` > 0 only points from the current hour or the `backScan` hours before it
//! count, as OpenTSDB's row walk sees them.

use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use serde_json::{Value as Json, json};
use strata_tsdb::{Filter, FilterKind, SeriesInfo, Tsdb, Tsuid, UidKind, Value};

use super::request::{
    bad_json, json_bool, json_i64, now_ms, parse_get_or_post, parse_json_body, query_params,
};
use super::series_expr;
use crate::resp::{ApiError, Resp, error, flag, json_ok, query_param, tsdb_error};
use crate::shared::Shared;

/// One sub-query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sub {
    /// A metric and exact tag pairs.
    Series {
        metric: String,
        tags: Vec<(String, String)>,
    },
    /// TSUIDs in hex.
    Tsuids(Vec<String>),
}

/// A parsed `/api/query/last` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LastQuery {
    pub(crate) subs: Vec<Sub>,
    pub(crate) resolve: bool,
    pub(crate) back_scan: i64,
}

/// Handles GET and POST.
pub(crate) async fn handle(req: Request<Incoming>, shared: &Shared) -> Resp {
    let q = match parse_get_or_post(req, shared, parse_get, parse_post).await {
        Ok(q) => q,
        Err(resp) => return resp,
    };
    if q.subs.is_empty() {
        return error(StatusCode::BAD_REQUEST, "Missing sub queries", "");
    }
    let tsdb = shared.tsdb.clone();
    tokio::task::block_in_place(|| match run(&tsdb, &q, now_ms()) {
        Ok(v) => json_ok(&Json::Array(v)),
        Err(e) => tsdb_error(&e),
    })
}

/// Parses `timeseries=`, `tsuids=`, `resolve` and `back_scan=`.
pub(crate) fn parse_get(query: &str) -> Result<LastQuery, ApiError> {
    let mut subs = Vec::new();
    for ts in query_params(query, "timeseries") {
        let expr = series_expr::parse(&ts)
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "Unable to parse query", &e))?;
        let Some(metric) = expr.metric else {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "Missing metric in timeseries",
                &ts,
            ));
        };
        subs.push(Sub::Series {
            metric,
            tags: expr.tags,
        });
    }
    for list in query_params(query, "tsuids") {
        let tsuids: Vec<String> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        if !tsuids.is_empty() {
            subs.push(Sub::Tsuids(tsuids));
        }
    }
    let back_scan = match query_param(query, "back_scan") {
        None => 0,
        Some(b) => b.trim().parse::<i64>().map_err(|_| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "Unable to parse back_scan as a number",
                &b,
            )
        })?,
    };
    Ok(LastQuery {
        subs,
        resolve: flag(query, "resolve"),
        back_scan,
    })
}

/// Parses `{"queries":[{"metric":..,"tags":{..}}|{"tsuids":[..]}],"resolveNames":..,"backScan":..}`.
pub(crate) fn parse_post(body: &[u8]) -> Result<LastQuery, ApiError> {
    let v = parse_json_body(body)?;
    let Json::Object(o) = &v else {
        return Err(bad_json("the request must be a JSON object"));
    };
    let mut subs = Vec::new();
    match o.get("queries") {
        None | Some(Json::Null) => {}
        Some(Json::Array(queries)) => {
            for q in queries {
                let Json::Object(q) = q else {
                    return Err(bad_json("each query must be an object"));
                };
                if let Some(t) = q.get("tsuids").filter(|t| !t.is_null()) {
                    let Some(list) = t.as_array() else {
                        return Err(bad_json("'tsuids' must be an array of strings"));
                    };
                    let mut tsuids = Vec::with_capacity(list.len());
                    for t in list {
                        let Some(s) = t.as_str() else {
                            return Err(bad_json("'tsuids' must be an array of strings"));
                        };
                        tsuids.push(s.trim().to_string());
                    }
                    subs.push(Sub::Tsuids(tsuids));
                    continue;
                }
                let Some(metric) = q.get("metric").and_then(Json::as_str) else {
                    return Err(bad_json("each query needs a 'metric' or 'tsuids'"));
                };
                let mut tags = Vec::new();
                match q.get("tags") {
                    None | Some(Json::Null) => {}
                    Some(Json::Object(t)) => {
                        for (k, v) in t {
                            let Some(v) = v.as_str() else {
                                return Err(bad_json("tag values must be strings"));
                            };
                            tags.push((k.clone(), v.to_string()));
                        }
                    }
                    Some(Json::Array(a)) if a.is_empty() => {}
                    Some(_) => return Err(bad_json("'tags' must be an object")),
                }
                subs.push(Sub::Series {
                    metric: metric.trim().to_string(),
                    tags,
                });
            }
        }
        Some(_) => return Err(bad_json("'queries' must be an array")),
    }
    let resolve = match o.get("resolveNames") {
        None | Some(Json::Null) => false,
        Some(b) => json_bool(b).ok_or_else(|| bad_json("'resolveNames' must be a boolean"))?,
    };
    let back_scan = match o.get("backScan") {
        None | Some(Json::Null) => 0,
        Some(b) => json_i64(b).ok_or_else(|| bad_json("'backScan' must be a number"))?,
    };
    Ok(LastQuery {
        subs,
        resolve,
        back_scan,
    })
}

/// The series a sub-query names. Unknown names are errors (OpenTSDB's 400 `No such name`).
fn series_of(tsdb: &Tsdb, sub: &Sub) -> strata_tsdb::Result<Vec<SeriesInfo>> {
    let ids: Vec<u32> = match sub {
        Sub::Series { metric, tags } => {
            tsdb.uid(UidKind::Metric, metric)?;
            let mut filters = Vec::with_capacity(tags.len());
            for (k, v) in tags {
                tsdb.uid(UidKind::Tagk, k)?;
                tsdb.uid(UidKind::Tagv, v)?;
                filters.push(Filter::new(FilterKind::LiteralOr, k, v, false)?);
            }
            tsdb.find_series(metric, &filters)?.into_iter().collect()
        }
        Sub::Tsuids(list) => {
            let mut ids = Vec::with_capacity(list.len());
            for t in list {
                if let Some(id) = tsdb.series_id(&Tsuid::parse_hex(t)?) {
                    ids.push(id);
                }
            }
            ids
        }
    };
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(info) = tsdb.series_info(id)? {
            out.push(info);
        }
    }
    out.sort_unstable_by(|a, b| a.tsuid.cmp(&b.tsuid));
    out.dedup_by(|a, b| a.id == b.id);
    Ok(out)
}

/// Answers a request: one object per series that has a last point.
pub(crate) fn run(tsdb: &Tsdb, q: &LastQuery, now_ms: i64) -> strata_tsdb::Result<Vec<Json>> {
    let cutoff_ms = if q.back_scan > 0 {
        let hour_ms = 3_600_000i64;
        let this_hour = now_ms - now_ms.rem_euclid(hour_ms);
        this_hour.saturating_sub(q.back_scan.saturating_mul(hour_ms))
    } else {
        i64::MIN
    };
    let mut out = Vec::new();
    for sub in &q.subs {
        for s in series_of(tsdb, sub)? {
            let Some((ts, value)) = s.last else {
                continue;
            };
            if ts < cutoff_ms {
                continue;
            }
            let mut item = json!({
                "timestamp": ts,
                "value": value_string(value),
                "tsuid": s.tsuid.to_hex(),
            });
            if q.resolve {
                let tags: serde_json::Map<String, Json> = s
                    .tags
                    .iter()
                    .map(|(k, v)| (k.clone(), Json::String(v.clone())))
                    .collect();
                item["metric"] = Json::String(s.metric.clone());
                item["tags"] = Json::Object(tags);
            }
            out.push(item);
        }
    }
    Ok(out)
}

/// A value as OpenTSDB prints it in `/api/query/last`: integers plainly, floats as Java's
/// `Double.toString` (`42.0`, `42.5`, `1.0E10`).
pub(crate) fn value_string(v: Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Float(f) => java_double(f),
    }
}

fn java_double(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let a = f.abs();
    if a == 0.0 || (1e-3..1e7).contains(&a) {
        let s = format!("{f}");
        if s.contains('.') { s } else { format!("{s}.0") }
    } else {
        let s = format!("{f:e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let mantissa = if mantissa.contains('.') {
            mantissa.to_string()
        } else {
            format!("{mantissa}.0")
        };
        format!("{mantissa}E{exp}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_print_as_java_does() {
        assert_eq!(value_string(Value::Int(42)), "42");
        assert_eq!(value_string(Value::Float(42.5)), "42.5");
        assert_eq!(value_string(Value::Float(42.0)), "42.0");
        assert_eq!(value_string(Value::Float(-0.0)), "-0.0");
        assert_eq!(value_string(Value::Float(1e10)), "1.0E10");
        assert_eq!(value_string(Value::Float(1.5e-5)), "1.5E-5");
    }

    #[test]
    fn last_requests_parse() {
        let q = parse_get(
            "timeseries=m%7Bhost%3Da%7D&timeseries=n&tsuids=0001,0002&resolve&back_scan=24",
        )
        .ok();
        assert_eq!(
            q,
            Some(LastQuery {
                subs: vec![
                    Sub::Series {
                        metric: "m".into(),
                        tags: vec![("host".into(), "a".into())]
                    },
                    Sub::Series {
                        metric: "n".into(),
                        tags: vec![]
                    },
                    Sub::Tsuids(vec!["0001".into(), "0002".into()]),
                ],
                resolve: true,
                back_scan: 24
            })
        );
        assert!(parse_get("timeseries=%7Bhost%3Da%7D").is_err());
        assert!(parse_get("timeseries=m&back_scan=x").is_err());
        let p = parse_post(
            br#"{"queries":[{"metric":"m","tags":{"host":"a"}},{"tsuids":["AB"]}],"resolveNames":true,"backScan":2}"#,
        )
        .ok();
        assert_eq!(
            p.map(|p| (p.subs.len(), p.resolve, p.back_scan)),
            Some((2, true, 2))
        );
        assert!(parse_post(br#"{"queries":[{"tags":{}}]}"#).is_err());
        assert!(parse_post(br#"{"queries":{}}"#).is_err());
    }
}
