//! `/api/search/lookup`: the series matching a metric and/or tag pairs, served from the series
//! index (OpenTSDB's `SearchRpc`; see `docs/compat.md`).
//!
//! Matching, as OpenTSDB: the metric exactly; `k=v` needs that pair; `k=*` (or `k=`) needs the
//! key with any value; `*=v` (or `=v`) needs the value under any key. Different keys are ANDed,
//! values of one key ORed, a wildcard for a key overrides its literal values, and several
//! `*=v` are ORed. Results are in TSUID byte order, at most `limit` (default 25, 0 = all).

use std::collections::BTreeMap;
use std::time::Instant;

use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use serde_json::{Value as Json, json};
use strata_tsdb::{Filter, FilterKind, SeriesInfo, Tsdb, UidKind};

use super::request::{bad_json, json_bool, json_i64, parse_get_or_post, parse_json_body};
use super::series_expr::{self, is_any};
use crate::resp::{ApiError, Resp, error, json_ok, query_param, tsdb_error};
use crate::shared::Shared;

/// OpenTSDB's default lookup limit.
const DEFAULT_LIMIT: i64 = 25;

/// A parsed lookup request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lookup {
    pub(crate) metric: Option<String>,
    pub(crate) tags: Vec<(String, String)>,
    /// 0 or less = no limit.
    pub(crate) limit: i64,
}

/// Handles GET (`m=`, `limit=`) and POST (JSON) lookups.
pub(crate) async fn handle(req: Request<Incoming>, shared: &Shared) -> Resp {
    let lookup = match parse_get_or_post(req, shared, parse_get, parse_post).await {
        Ok(lookup) => lookup,
        Err(resp) => return resp,
    };
    let tsdb = shared.tsdb.clone();
    tokio::task::block_in_place(|| run(&tsdb, &lookup))
}

/// Parses `m=metric{k=v,...}` and `limit=`.
pub(crate) fn parse_get(query: &str) -> Result<Lookup, ApiError> {
    let Some(m) = query_param(query, "m") else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "Missing parameter <code>m</code>",
            "",
        ));
    };
    let expr = series_expr::parse(&m)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "Unable to parse query", &e))?;
    let limit = match query_param(query, "limit") {
        None => DEFAULT_LIMIT,
        Some(l) => l.trim().parse::<i32>().map(i64::from).map_err(|_| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "Unable to convert 'limit' to a valid number",
                "",
            )
        })?,
    };
    Ok(Lookup {
        metric: expr.metric,
        tags: expr.tags,
        limit,
    })
}

/// Parses `{"metric":..,"tags":[{"key":..,"value":..}],"limit":..,"useMeta":..}`.
pub(crate) fn parse_post(body: &[u8]) -> Result<Lookup, ApiError> {
    let v = parse_json_body(body)?;
    let Json::Object(o) = &v else {
        return Err(bad_json("the lookup must be a JSON object"));
    };
    let metric = match o.get("metric") {
        None | Some(Json::Null) => None,
        Some(Json::String(s)) => (!s.trim().is_empty() && s != "*").then(|| s.trim().to_string()),
        Some(_) => return Err(bad_json("'metric' must be a string")),
    };
    let mut tags = Vec::new();
    match o.get("tags") {
        None | Some(Json::Null) => {}
        Some(Json::Array(pairs)) => {
            for p in pairs {
                let side = |name: &str| match p.get(name) {
                    None | Some(Json::Null) => Ok(String::new()),
                    Some(Json::String(s)) => Ok(s.trim().to_string()),
                    Some(_) => Err(bad_json(&format!("tag '{name}' must be a string"))),
                };
                let (k, val) = (side("key")?, side("value")?);
                if k.is_empty() && val.is_empty() {
                    return Err(bad_json("a tag pair needs a key or a value"));
                }
                tags.push((k, val));
            }
        }
        Some(_) => return Err(bad_json("'tags' must be an array of {key, value}")),
    }
    let limit = match o.get("limit") {
        None | Some(Json::Null) => DEFAULT_LIMIT,
        Some(l) => json_i64(l).ok_or_else(|| bad_json("'limit' must be a number"))?,
    };
    if let Some(u) = o.get("useMeta")
        && !u.is_null()
        && json_bool(u).is_none()
    {
        return Err(bad_json("'useMeta' must be a boolean"));
    }
    Ok(Lookup {
        metric,
        tags,
        limit,
    })
}

/// Runs a lookup against the series index.
pub(crate) fn run(tsdb: &Tsdb, lookup: &Lookup) -> Resp {
    let started = Instant::now();
    if lookup.metric.is_none() && lookup.tags.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "Missing metric and tags. Please supply at least one value.",
            "",
        );
    }
    let series = match find(tsdb, lookup) {
        Ok(s) => s,
        Err(e) if e.kind() == strata_tsdb::ErrorKind::NotFound => {
            return error(
                StatusCode::NOT_FOUND,
                "Unable to resolve one or more UIDs",
                &e.to_string(),
            );
        }
        Err(e) => return tsdb_error(&e),
    };
    let results: Vec<Json> = series
        .iter()
        .map(|s| {
            let tags: serde_json::Map<String, Json> = s
                .tags
                .iter()
                .map(|(k, v)| (k.clone(), Json::String(v.clone())))
                .collect();
            json!({ "tsuid": s.tsuid.to_hex(), "metric": s.metric, "tags": tags })
        })
        .collect();
    let tags: Vec<Json> = lookup
        .tags
        .iter()
        .map(|(k, v)| json!({ "key": k, "value": v }))
        .collect();
    json_ok(&json!({
        "type": "LOOKUP",
        "metric": lookup.metric.as_deref().unwrap_or("*"),
        "tags": tags,
        "limit": lookup.limit,
        // Elapsed milliseconds as a float, as OpenTSDB reports them.
        "time": started.elapsed().as_secs_f64() * 1000.0,
        "results": results,
        "startIndex": 0,
        "totalResults": results.len(),
    }))
}

/// The matching series, in TSUID order, cut to the limit. Unknown names are `NoSuchName`.
pub(crate) fn find(tsdb: &Tsdb, lookup: &Lookup) -> strata_tsdb::Result<Vec<SeriesInfo>> {
    if let Some(m) = &lookup.metric {
        tsdb.uid(UidKind::Metric, m)?;
    }
    // Per key: None = any value, Some(values) = one of these.
    let mut by_key: BTreeMap<&str, Option<Vec<&str>>> = BTreeMap::new();
    let mut any_key_values: Vec<&str> = Vec::new();
    for (k, v) in &lookup.tags {
        if is_any(k) {
            if !is_any(v) {
                tsdb.uid(UidKind::Tagv, v)?;
                any_key_values.push(v);
            }
            continue;
        }
        tsdb.uid(UidKind::Tagk, k)?;
        let entry = by_key.entry(k).or_insert_with(|| Some(Vec::new()));
        if is_any(v) {
            *entry = None;
        } else {
            tsdb.uid(UidKind::Tagv, v)?;
            if let Some(values) = entry {
                values.push(v);
            }
        }
    }
    let mut filters = Vec::with_capacity(by_key.len());
    let mut any_value_keys = Vec::new();
    for (k, values) in &by_key {
        match values {
            None => any_value_keys.push(*k),
            Some(values) => filters.push(Filter::new(
                FilterKind::LiteralOr,
                k,
                &values.join("|"),
                false,
            )?),
        }
    }
    let find = |filters: &[Filter]| match &lookup.metric {
        Some(m) => tsdb.find_series(m, filters),
        None => tsdb.find_series_any_metric(filters),
    };
    let mut ids = find(&filters)?;
    // "Has key k": remove the series without it. A `not_key` filter is two bitmap operations,
    // where a `*` wildcard would visit every value of the key.
    for k in any_value_keys {
        ids -= find(&[Filter::new(FilterKind::NotKey, k, "", false)?])?;
    }
    // Sort by TSUID and cut at the limit before resolving names, so a wide match with a small
    // limit resolves only what it returns. A `*=v` condition needs the names, so it is checked
    // on the way and the cut waits until enough series passed it.
    let mut tsuids: Vec<(strata_tsdb::Tsuid, u32)> = ids
        .iter()
        .filter_map(|id| tsdb.series_tsuid(id).map(|t| (t, id)))
        .collect();
    tsuids.sort_unstable();
    let limit = if lookup.limit > 0 {
        lookup.limit as usize
    } else {
        usize::MAX
    };
    let mut out = Vec::new();
    for (_, id) in tsuids {
        if out.len() >= limit {
            break;
        }
        let Some(info) = tsdb.series_info(id)? else {
            continue;
        };
        if !any_key_values.is_empty()
            && !info
                .tags
                .iter()
                .any(|(_, v)| any_key_values.contains(&v.as_str()))
        {
            continue;
        }
        out.push(info);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_requests_parse() {
        let l = parse_get("limit=0&m=sys.cpu%7Bhost%3D%2A%7D").ok();
        assert_eq!(
            l,
            Some(Lookup {
                metric: Some("sys.cpu".into()),
                tags: vec![("host".into(), "*".into())],
                limit: 0
            })
        );
        assert_eq!(parse_get("m=x").ok().map(|l| l.limit), Some(25));
        assert!(parse_get("limit=1").is_err());
        assert!(parse_get("m=x&limit=ten").is_err());
        assert!(parse_get("m=x%7Bhost").is_err());
        let p = parse_post(
            br#"{"metric":"m","tags":[{"key":"host","value":"*"}],"limit":5,"useMeta":true}"#,
        )
        .ok();
        assert_eq!(
            p,
            Some(Lookup {
                metric: Some("m".into()),
                tags: vec![("host".into(), "*".into())],
                limit: 5
            })
        );
        assert!(parse_post(b"[]").is_err());
        assert!(parse_post(br#"{"tags":{}}"#).is_err());
        assert!(parse_post(br#"{"limit":"x"}"#).is_err());
    }
}
