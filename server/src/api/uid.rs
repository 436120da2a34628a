//! `/api/uid/assign`, `/api/uid/uidmeta` (GET), `/api/uid/tsmeta` (GET) and `/api/uid/rename`
//! (OpenTSDB's `UniqueIdRpc`).
//!
//! Strata keeps no user-editable UID or series metadata, so `uidmeta` and `tsmeta` answer
//! OpenTSDB's objects with empty descriptions, `created` 0, and for series the last point's
//! time as `lastReceived`.

use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use serde_json::{Value as Json, json};
use strata_tsdb::{Filter, FilterKind, SeriesInfo, Tsdb, Tsuid, Uid, UidKind};

use super::request::{bad_json, parse_json_body};
use super::series_expr;
use crate::body::read_body;
use crate::resp::{
    ApiError, Resp, error, json, json_ok, method_not_allowed, query_param, tsdb_error,
};
use crate::shared::Shared;

/// The request keys of the three kinds, in response order.
const KINDS: [(&str, UidKind); 3] = [
    ("metric", UidKind::Metric),
    ("tagk", UidKind::Tagk),
    ("tagv", UidKind::Tagv),
];

/// `/api/uid/assign`: GET `metric=a,b&tagk=..&tagv=..` or POST `{"metric":[..],..}`.
pub(crate) async fn assign(req: Request<Incoming>, shared: &Shared) -> Resp {
    let method = req.method().clone();
    if method != Method::GET && method != Method::POST {
        return method_not_allowed(&method);
    }
    let query = req.uri().query().unwrap_or("").to_string();
    let body = match read_body(req, shared).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    let source = if method == Method::POST {
        match parse_assign_json(&body) {
            Ok(s) => s,
            Err(e) => return e.into(),
        }
    } else {
        parse_assign_query(&query)
    };
    if source.iter().all(Option::is_none) {
        return error(StatusCode::BAD_REQUEST, "Missing values to assign UIDs", "");
    }
    let tsdb = shared.tsdb.clone();
    tokio::task::block_in_place(|| run_assign(&tsdb, &source))
}

/// Names per kind (in [`KINDS`] order); `None` when the kind was not given.
type AssignSource = [Option<Vec<String>>; 3];

fn parse_assign_query(query: &str) -> AssignSource {
    KINDS.map(|(key, _)| {
        query_param(query, key)
            .filter(|v| !v.is_empty())
            .map(|v| v.split(',').map(str::to_string).collect())
    })
}

fn parse_assign_json(body: &[u8]) -> Result<AssignSource, ApiError> {
    let v = parse_json_body(body)?;
    let Json::Object(o) = &v else {
        return Err(bad_json("the body must be a JSON object"));
    };
    let mut out: AssignSource = [None, None, None];
    for (slot, (key, _)) in out.iter_mut().zip(KINDS) {
        match o.get(key) {
            None | Some(Json::Null) => {}
            Some(Json::Array(a)) => {
                let names: Option<Vec<String>> =
                    a.iter().map(|n| n.as_str().map(str::to_string)).collect();
                let Some(names) = names else {
                    return Err(bad_json(&format!("'{key}' must be an array of strings")));
                };
                if !names.is_empty() {
                    *slot = Some(names);
                }
            }
            Some(_) => return Err(bad_json(&format!("'{key}' must be an array of strings"))),
        }
    }
    Ok(out)
}

fn run_assign(tsdb: &Tsdb, source: &AssignSource) -> Resp {
    let mut out = serde_json::Map::new();
    let mut failed = 0usize;
    for (names, (key, kind)) in source.iter().zip(KINDS) {
        let Some(names) = names else {
            continue;
        };
        let mut ok = serde_json::Map::new();
        let mut errors = serde_json::Map::new();
        for name in names {
            match tsdb.assign_uid(kind, name) {
                Ok(uid) => {
                    ok.insert(name.clone(), Json::String(uid.to_string()));
                }
                Err(e) => {
                    failed += 1;
                    errors.insert(name.clone(), Json::String(e.to_string()));
                }
            }
        }
        out.insert(key.to_string(), Json::Object(ok));
        if !errors.is_empty() {
            out.insert(format!("{key}_errors"), Json::Object(errors));
        }
    }
    let status = if failed == 0 {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    json(status, &Json::Object(out))
}

/// Parses a UID type name as OpenTSDB does (`metric`/`metrics`, `tagk`, `tagv`, any case).
fn parse_kind(s: &str) -> Option<UidKind> {
    match s.to_ascii_lowercase().as_str() {
        "metric" | "metrics" => Some(UidKind::Metric),
        "tagk" => Some(UidKind::Tagk),
        "tagv" => Some(UidKind::Tagv),
        _ => None,
    }
}

fn type_name(kind: UidKind) -> &'static str {
    match kind {
        UidKind::Metric => "METRIC",
        UidKind::Tagk => "TAGK",
        UidKind::Tagv => "TAGV",
    }
}

/// OpenTSDB's UIDMeta object.
fn uid_meta(kind: UidKind, uid: Uid, name: &str) -> Json {
    json!({
        "uid": uid.to_string(),
        "type": type_name(kind),
        "name": name,
        "description": "",
        "notes": "",
        "created": 0,
        "custom": null,
        "displayName": "",
    })
}

/// `GET /api/uid/uidmeta?uid=<hex>&type=<metric|tagk|tagv>`.
pub(crate) fn uidmeta(req: Request<Incoming>, shared: &Shared) -> Resp {
    if req.method() != Method::GET {
        return method_not_allowed(req.method());
    }
    let query = req.uri().query().unwrap_or("");
    let missing = |p: &str| {
        error(
            StatusCode::BAD_REQUEST,
            &format!("Missing parameter <code>{p}</code>"),
            "",
        )
    };
    let Some(uid_hex) = query_param(query, "uid") else {
        return missing("uid");
    };
    let Some(type_s) = query_param(query, "type") else {
        return missing("type");
    };
    let Some(kind) = parse_kind(&type_s) else {
        return error(
            StatusCode::BAD_REQUEST,
            &format!("Invalid type requested: {type_s}"),
            "",
        );
    };
    let Some(uid) = parse_uid(&uid_hex) else {
        return error(
            StatusCode::BAD_REQUEST,
            &format!("Invalid UID: {uid_hex}"),
            "a UID is 6 hex digits",
        );
    };
    match shared.tsdb.uid_name(kind, uid) {
        Ok(name) => json_ok(&uid_meta(kind, uid, &name)),
        Err(e) if e.kind() == strata_tsdb::ErrorKind::NotFound => error(
            StatusCode::NOT_FOUND,
            "Could not find the requested UID",
            &e.to_string(),
        ),
        Err(e) => tsdb_error(&e),
    }
}

fn parse_uid(s: &str) -> Option<Uid> {
    let s = s.trim();
    if s.len() != 6 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Uid::from_u32(u32::from_str_radix(s, 16).ok()?)
}

/// OpenTSDB's TSMeta object for a series.
fn ts_meta(tsdb: &Tsdb, s: &SeriesInfo) -> strata_tsdb::Result<Json> {
    let mut tags = Vec::with_capacity(2 * s.tags.len());
    for ((kuid, vuid), (k, v)) in s.tsuid.tags().zip(&s.tags) {
        tags.push(uid_meta(UidKind::Tagk, kuid, k));
        tags.push(uid_meta(UidKind::Tagv, vuid, v));
    }
    let metric_uid = tsdb.uid(UidKind::Metric, &s.metric)?;
    Ok(json!({
        "tsuid": s.tsuid.to_hex(),
        "metric": uid_meta(UidKind::Metric, metric_uid, &s.metric),
        "tags": tags,
        "description": "",
        "notes": "",
        "created": 0,
        "units": "",
        "retention": 0,
        "max": "NaN",
        "min": "NaN",
        "displayName": "",
        "dataType": "",
        "lastReceived": s.last.map_or(0, |(ts, _)| ts / 1000),
        "totalDatapoints": 0,
        "custom": null,
    }))
}

/// `GET /api/uid/tsmeta?tsuid=<hex>` (one object) or `?m=metric{k=v}` (a list).
pub(crate) fn tsmeta(req: Request<Incoming>, shared: &Shared) -> Resp {
    if req.method() != Method::GET {
        return method_not_allowed(req.method());
    }
    let query = req.uri().query().unwrap_or("").to_string();
    let tsdb = shared.tsdb.clone();
    tokio::task::block_in_place(|| tsmeta_run(&tsdb, &query))
}

fn tsmeta_run(tsdb: &Tsdb, query: &str) -> Resp {
    let not_found = |e: &strata_tsdb::Error| {
        error(
            StatusCode::NOT_FOUND,
            "Unable to find one of the UIDs",
            &e.to_string(),
        )
    };
    if let Some(hex) = query_param(query, "tsuid") {
        let tsuid = match Tsuid::parse_hex(hex.trim()) {
            Ok(t) => t,
            Err(e) => return tsdb_error(&e),
        };
        let info = tsdb
            .series_id(&tsuid)
            .map(|id| tsdb.series_info(id))
            .transpose();
        return match info {
            Ok(Some(Some(s))) => match ts_meta(tsdb, &s) {
                Ok(j) => json_ok(&j),
                Err(e) => tsdb_error(&e),
            },
            Ok(_) => error(
                StatusCode::NOT_FOUND,
                "Could not find Timeseries meta data",
                "",
            ),
            Err(e) => tsdb_error(&e),
        };
    }
    let Some(m) = query_param(query, "m") else {
        return error(
            StatusCode::BAD_REQUEST,
            "Missing parameter <code>m</code>",
            "",
        );
    };
    let expr = match series_expr::parse(&m) {
        Ok(e) => e,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e, ""),
    };
    let Some(metric) = expr.metric else {
        return error(StatusCode::BAD_REQUEST, "Missing metric", &m);
    };
    let result = (|| -> strata_tsdb::Result<Vec<Json>> {
        let mut filters = Vec::with_capacity(expr.tags.len());
        for (k, v) in &expr.tags {
            tsdb.uid(UidKind::Tagk, k)?;
            tsdb.uid(UidKind::Tagv, v)?;
            filters.push(Filter::new(FilterKind::LiteralOr, k, v, false)?);
        }
        let mut series = Vec::new();
        for id in tsdb.find_series(&metric, &filters)? {
            if let Some(s) = tsdb.series_info(id)? {
                series.push(s);
            }
        }
        series.sort_unstable_by(|a, b| a.tsuid.cmp(&b.tsuid));
        series.iter().map(|s| ts_meta(tsdb, s)).collect()
    })();
    match result {
        Ok(list) => json_ok(&Json::Array(list)),
        Err(e) if e.kind() == strata_tsdb::ErrorKind::NotFound => not_found(&e),
        Err(e) => tsdb_error(&e),
    }
}

/// `/api/uid/rename` (GET or POST): `{"metric":"old","name":"new"}` (or `tagk`/`tagv`).
pub(crate) async fn rename(req: Request<Incoming>, shared: &Shared) -> Resp {
    let method = req.method().clone();
    if method != Method::GET && method != Method::POST {
        return method_not_allowed(&method);
    }
    let query = req.uri().query().unwrap_or("").to_string();
    let body = match read_body(req, shared).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    let field = |name: &str| -> Result<Option<String>, ApiError> {
        if method == Method::POST && !body.iter().all(u8::is_ascii_whitespace) {
            let v = parse_json_body(&body)?;
            Ok(v.get(name).and_then(Json::as_str).map(str::to_string))
        } else {
            Ok(query_param(&query, name))
        }
    };
    let fail = |msg: &str| {
        json(
            StatusCode::BAD_REQUEST,
            &json!({ "result": "false", "error": msg }),
        )
    };
    let mut target = None;
    for (key, kind) in KINDS {
        match field(key) {
            Ok(Some(old)) => {
                target = Some((kind, old));
                break;
            }
            Ok(None) => {}
            Err(e) => return e.into(),
        }
    }
    let Some((kind, old)) = target else {
        return fail("Missing a type to rename: metric, tagk or tagv");
    };
    let new = match field("name") {
        Ok(Some(n)) => n,
        Ok(None) => return fail("Missing the new name"),
        Err(e) => return e.into(),
    };
    let tsdb = shared.tsdb.clone();
    match tokio::task::block_in_place(|| tsdb.rename_uid(kind, &old, &new)) {
        Ok(()) => json_ok(&json!({ "result": "true" })),
        Err(e) => fail(&e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assign_sources_parse() {
        let s = parse_assign_query("metric=a,b&tagv=x");
        assert_eq!(
            s,
            [
                Some(vec!["a".into(), "b".into()]),
                None,
                Some(vec!["x".into()])
            ]
        );
        assert_eq!(parse_assign_query("metric="), [None, None, None]);
        let j = parse_assign_json(br#"{"tagk":["host"],"metric":[]}"#).ok();
        assert_eq!(j, Some([None, Some(vec!["host".into()]), None]));
        assert!(parse_assign_json(br#"{"metric":"a"}"#).is_err());
        assert!(parse_assign_json(br#"{"metric":[1]}"#).is_err());
    }

    #[test]
    fn uids_and_kinds_parse() {
        assert_eq!(parse_uid("00002a").map(Uid::get), Some(42));
        assert_eq!(parse_uid("2A"), None);
        assert_eq!(parse_uid("000000"), None);
        assert_eq!(parse_kind("METRIC"), Some(UidKind::Metric));
        assert_eq!(parse_kind("x"), None);
    }
}
