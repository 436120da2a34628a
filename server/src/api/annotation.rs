//! `/api/annotation`, `/api/annotations` and `/api/annotation/bulk` (OpenTSDB's `AnnotationRpc`), over the
//! tsdb's annotation table.
//!
//! As OpenTSDB: GET reads one annotation (404 when missing); POST creates or merges (fields the
//! request leaves at their defaults keep their stored values), PUT creates or replaces; a write
//! that sets nothing answers 304; DELETE answers 204. `startTime` is required everywhere. The
//! bulk endpoint writes an array (all are checked before any is written) or deletes a time
//! range of global and/or per-series annotations. `GET /api/annotations` lists the global
//! annotations between `start_time` and `end_time`.

use std::collections::BTreeMap;
use std::sync::Mutex;

use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use serde_json::{Value as Json, json};
use strata_tsdb::{Annotation, Tsdb, Tsuid};

use super::request::{bad_json, json_bool, json_i64, now_ms, parse_json_body, parse_time_ms};
use crate::body::read_body;
use crate::resp::{
    ApiError, Resp, error, flag, json_ok, method_not_allowed, query_param, raw, tsdb_error,
};
use crate::shared::Shared;

/// Serializes read-modify-write cycles, so two concurrent merges cannot lose a field.
static WRITE_LOCK: Mutex<()> = Mutex::new(());

/// An annotation as a request gives it: `None` = not given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NoteReq {
    /// Upper-case hex, validated; `None` = global.
    pub(crate) tsuid: Option<String>,
    pub(crate) start_time: i64,
    pub(crate) end_time: Option<i64>,
    pub(crate) description: Option<String>,
    pub(crate) notes: Option<String>,
    pub(crate) custom: Option<BTreeMap<String, String>>,
}

impl NoteReq {
    /// Whether the request sets any field away from its default (OpenTSDB's change flags).
    fn has_changes(&self) -> bool {
        self.end_time.is_some_and(|t| t != 0)
            || self.description.as_deref().is_some_and(|d| !d.is_empty())
            || self.notes.as_deref().is_some_and(|n| !n.is_empty())
            || self.custom.is_some()
    }

    /// The annotation to store: merged over `stored` (POST) or replacing it (PUT).
    fn apply(&self, stored: Option<Annotation>, replace: bool) -> Annotation {
        let base = if replace {
            Annotation::default()
        } else {
            stored.unwrap_or_default()
        };
        let pick = |given: &Option<String>, old: String| match given {
            Some(s) if !s.is_empty() || replace => s.clone(),
            _ => old,
        };
        Annotation {
            tsuid: self.tsuid.clone(),
            start_time: self.start_time,
            end_time: match self.end_time {
                Some(t) if t != 0 || replace => t,
                _ => base.end_time,
            },
            description: pick(&self.description, base.description),
            notes: pick(&self.notes, base.notes),
            custom: self.custom.clone().unwrap_or(base.custom),
        }
    }
}

/// Handles every annotation route.
pub(crate) async fn handle(ep: &str, req: Request<Incoming>, shared: &Shared) -> Resp {
    let method = req.method().clone();
    let bulk = ep.ends_with("/bulk");
    let allowed: &[Method] = if bulk {
        &[Method::POST, Method::PUT, Method::DELETE]
    } else {
        &[Method::GET, Method::POST, Method::PUT, Method::DELETE]
    };
    if !allowed.contains(&method) {
        return method_not_allowed(&method);
    }
    let query = req.uri().query().unwrap_or("").to_string();
    let body = match read_body(req, shared).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    let has_body = !body.iter().all(u8::is_ascii_whitespace);
    let tsdb = shared.tsdb.clone();
    tokio::task::block_in_place(|| {
        if bulk {
            if method == Method::DELETE {
                bulk_delete(&tsdb, &query, has_body.then_some(&body[..]))
            } else {
                bulk_write(&tsdb, &body, method == Method::PUT)
            }
        } else if method == Method::GET && ep == "annotations" && !has_body {
            list_global(&tsdb, &query)
        } else {
            let note = if has_body {
                parse_note_json(&body)
            } else {
                parse_note_query(&query)
            };
            match note {
                Ok(note) => single(&tsdb, &method, &note),
                Err(e) => e.into(),
            }
        }
    })
}

fn single(tsdb: &Tsdb, method: &Method, note: &NoteReq) -> Resp {
    let tsuid = note.tsuid.as_deref();
    if *method == Method::GET {
        return match tsdb.get_annotation(tsuid, note.start_time) {
            Ok(Some(a)) => json_ok(&note_json(&a)),
            Ok(None) => error(
                StatusCode::NOT_FOUND,
                "Unable to locate annotation in storage",
                "",
            ),
            Err(e) => tsdb_error(&e),
        };
    }
    if *method == Method::DELETE {
        return match tsdb.delete_annotation(tsuid, note.start_time) {
            Ok(_) => raw(204, Vec::new()),
            Err(e) => tsdb_error(&e),
        };
    }
    if !note.has_changes() {
        return raw(304, Vec::new());
    }
    let _guard = WRITE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    match write(tsdb, note, *method == Method::PUT) {
        Ok(a) => json_ok(&note_json(&a)),
        Err(e) => tsdb_error(&e),
    }
}

/// Merges or replaces, stores and returns what is stored. Callers hold [`WRITE_LOCK`].
fn write(tsdb: &Tsdb, note: &NoteReq, replace: bool) -> strata_tsdb::Result<Annotation> {
    let stored = tsdb.get_annotation(note.tsuid.as_deref(), note.start_time)?;
    let a = note.apply(stored, replace);
    tsdb.put_annotation(&a)?;
    Ok(a)
}

fn bulk_write(tsdb: &Tsdb, body: &[u8], replace: bool) -> Resp {
    let v = match parse_json_body(body) {
        Ok(v) => v,
        Err(e) => return e.into(),
    };
    let Json::Array(items) = v else {
        return error(
            StatusCode::BAD_REQUEST,
            "Unable to parse the given JSON",
            "the body must be a JSON array of annotations",
        );
    };
    let mut notes = Vec::with_capacity(items.len());
    for item in &items {
        match note_from_json(item) {
            Ok(n) => notes.push(n),
            Err(e) => return e.into(),
        }
    }
    let _guard = WRITE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = Vec::with_capacity(notes.len());
    for note in notes.iter().filter(|n| n.has_changes()) {
        match write(tsdb, note, replace) {
            Ok(a) => out.push(note_json(&a)),
            Err(e) => return tsdb_error(&e),
        }
    }
    json_ok(&Json::Array(out))
}

fn bulk_delete(tsdb: &Tsdb, query: &str, body: Option<&[u8]>) -> Resp {
    let bad = |m: &str| error(StatusCode::BAD_REQUEST, m, "");
    let (start, end, tsuids, global) = match body {
        Some(body) => {
            let v = match parse_json_body(body) {
                Ok(v) => v,
                Err(e) => return e.into(),
            };
            let text = |name: &str| match v.get(name) {
                Some(Json::String(s)) => Some(s.clone()),
                Some(Json::Number(n)) => Some(n.to_string()),
                _ => None,
            };
            let tsuids = match v.get("tsuids") {
                None | Some(Json::Null) => Vec::new(),
                Some(Json::Array(a)) => {
                    let list: Option<Vec<String>> =
                        a.iter().map(|t| t.as_str().map(str::to_string)).collect();
                    match list {
                        Some(l) => l,
                        None => {
                            return error(
                                StatusCode::BAD_REQUEST,
                                "Unable to parse the given JSON",
                                "'tsuids' must be an array of strings",
                            );
                        }
                    }
                }
                Some(_) => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        "Unable to parse the given JSON",
                        "'tsuids' must be an array of strings",
                    );
                }
            };
            let global = v.get("global").and_then(json_bool).unwrap_or(false);
            (text("startTime"), text("endTime"), tsuids, global)
        }
        None => (
            query_param(query, "start_time"),
            query_param(query, "end_time"),
            query_param(query, "tsuids")
                .map(|l| l.split(',').map(|t| t.trim().to_string()).collect())
                .unwrap_or_default(),
            flag(query, "global"),
        ),
    };
    let Some(start) = start.filter(|s| !s.trim().is_empty()) else {
        return bad("Missing the start time value");
    };
    let tsuids: Vec<String> = tsuids.into_iter().filter(|t| !t.is_empty()).collect();
    if !global && tsuids.is_empty() {
        return bad("Missing the TSUIDs or global annotations flag");
    }
    let start_ms = match parse_time_ms(&start) {
        Ok(Some(t)) => t,
        Ok(None) => return bad("Missing the start time value"),
        Err(e) => return error(StatusCode::BAD_REQUEST, &e, ""),
    };
    let end_ms = match end.as_deref().map(parse_time_ms) {
        None | Some(Ok(None)) => now_ms(),
        Some(Ok(Some(t))) => t,
        Some(Err(e)) => return error(StatusCode::BAD_REQUEST, &e, ""),
    };
    let mut checked = Vec::with_capacity(tsuids.len());
    for t in &tsuids {
        match Tsuid::parse_hex(t) {
            Ok(ts) => checked.push(ts.to_hex()),
            Err(e) => return tsdb_error(&e),
        }
    }
    let _guard = WRITE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut total = 0usize;
    let scopes = global
        .then_some(None)
        .into_iter()
        .chain(checked.iter().map(|t| Some(t.as_str())));
    for scope in scopes {
        match tsdb.delete_annotations(scope, start_ms, end_ms) {
            Ok(n) => total += n,
            Err(e) => return tsdb_error(&e),
        }
    }
    json_ok(&json!({
        "tsuids": if tsuids.is_empty() { Json::Null } else { json!(tsuids) },
        "global": global,
        "startTime": start_ms,
        "endTime": end_ms,
        "totalDeleted": total,
    }))
}

fn list_global(tsdb: &Tsdb, query: &str) -> Resp {
    let start = match query_param(query, "start_time")
        .as_deref()
        .map(parse_time_ms)
    {
        Some(Ok(Some(t))) => t,
        Some(Err(e)) => return error(StatusCode::BAD_REQUEST, &e, ""),
        _ => return error(StatusCode::BAD_REQUEST, "Missing start time", ""),
    };
    let end = match query_param(query, "end_time").as_deref().map(parse_time_ms) {
        None | Some(Ok(None)) => now_ms(),
        Some(Ok(Some(t))) => t,
        Some(Err(e)) => return error(StatusCode::BAD_REQUEST, &e, ""),
    };
    match tsdb.annotations(None, start, end) {
        Ok(list) => json_ok(&Json::Array(list.iter().map(note_json).collect())),
        Err(e) => tsdb_error(&e),
    }
}

/// OpenTSDB's JSON for an annotation (`custom` only when set).
pub(crate) fn note_json(a: &Annotation) -> Json {
    strata_query::annotation_json(a)
}

fn missing_start() -> ApiError {
    ApiError::bad_request("Missing start time", "")
}

/// Checks a TSUID and returns it in upper-case hex (`None` for empty = global).
fn check_tsuid(t: Option<&str>) -> Result<Option<String>, ApiError> {
    match t.map(str::trim) {
        None | Some("") => Ok(None),
        Some(t) => Tsuid::parse_hex(t)
            .map(|ts| Some(ts.to_hex()))
            .map_err(|e| ApiError::from_tsdb(&e)),
    }
}

/// Parses an annotation from a JSON body.
pub(crate) fn parse_note_json(body: &[u8]) -> Result<NoteReq, ApiError> {
    note_from_json(&parse_json_body(body)?)
}

fn note_from_json(v: &Json) -> Result<NoteReq, ApiError> {
    let Json::Object(o) = v else {
        return Err(bad_json("an annotation must be a JSON object"));
    };
    let string = |name: &str| match o.get(name) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(bad_json(&format!("'{name}' must be a string"))),
    };
    let number = |name: &str| match o.get(name) {
        None | Some(Json::Null) => Ok(None),
        Some(n) => json_i64(n)
            .map(Some)
            .ok_or_else(|| bad_json(&format!("'{name}' must be a number"))),
    };
    let custom = match o.get("custom") {
        None | Some(Json::Null) => None,
        Some(Json::Object(m)) => {
            let mut c = BTreeMap::new();
            for (k, v) in m {
                let Some(v) = v.as_str() else {
                    return Err(bad_json("'custom' values must be strings"));
                };
                c.insert(k.clone(), v.to_string());
            }
            Some(c)
        }
        Some(_) => return Err(bad_json("'custom' must be an object")),
    };
    let start_time = number("startTime")?.unwrap_or(0);
    if start_time < 1 {
        return Err(missing_start());
    }
    Ok(NoteReq {
        tsuid: check_tsuid(string("tsuid")?.as_deref())?,
        start_time,
        end_time: number("endTime")?,
        description: string("description")?,
        notes: string("notes")?,
        custom,
    })
}

/// Parses an annotation from the query string (`tsuid`, `start_time`, `end_time`,
/// `description`, `notes`); times may be relative or absolute and are kept in seconds.
pub(crate) fn parse_note_query(query: &str) -> Result<NoteReq, ApiError> {
    let seconds = |name: &str| match query_param(query, name).as_deref().map(parse_time_ms) {
        None | Some(Ok(None)) => Ok(None),
        Some(Ok(Some(ms))) => Ok(Some(ms / 1000)),
        Some(Err(e)) => Err(ApiError::new(StatusCode::BAD_REQUEST, &e, "")),
    };
    let start_time = seconds("start_time")?.unwrap_or(0);
    if start_time < 1 {
        return Err(missing_start());
    }
    Ok(NoteReq {
        tsuid: check_tsuid(query_param(query, "tsuid").as_deref())?,
        start_time,
        end_time: seconds("end_time")?,
        description: query_param(query, "description"),
        notes: query_param(query, "notes"),
        custom: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn post_merges_and_put_replaces() {
        let stored = Annotation {
            tsuid: None,
            start_time: 10,
            end_time: 20,
            description: "old".into(),
            notes: "n".into(),
            custom: BTreeMap::from([("a".to_string(), "b".to_string())]),
        };
        let req = NoteReq {
            start_time: 10,
            description: Some("new".into()),
            ..NoteReq::default()
        };
        assert!(req.has_changes());
        let merged = req.apply(Some(stored.clone()), false);
        assert_eq!(
            (
                merged.description.as_str(),
                merged.end_time,
                merged.notes.as_str()
            ),
            ("new", 20, "n")
        );
        assert_eq!(merged.custom.len(), 1);
        let replaced = req.apply(Some(stored), true);
        assert_eq!(
            (
                replaced.description.as_str(),
                replaced.end_time,
                replaced.notes.as_str()
            ),
            ("new", 0, "")
        );
        assert!(replaced.custom.is_empty());
        let nothing = NoteReq {
            start_time: 10,
            description: Some(String::new()),
            end_time: Some(0),
            ..NoteReq::default()
        };
        assert!(!nothing.has_changes());
    }

    #[test]
    fn annotation_requests_parse() {
        let n = parse_note_json(
            br#"{"tsuid":"000001000001000001","startTime":1369141261,"description":"d","custom":{"k":"v"},"extra":1}"#,
        )
        .ok();
        assert_eq!(n.as_ref().map(|n| n.start_time), Some(1_369_141_261));
        assert_eq!(n.and_then(|n| n.tsuid), Some("000001000001000001".into()));
        assert!(parse_note_json(br#"{"description":"d"}"#).is_err());
        assert!(parse_note_json(br#"{"startTime":1,"tsuid":"XYZ"}"#).is_err());
        assert!(parse_note_json(br#"{"startTime":1,"custom":[1]}"#).is_err());
        assert!(parse_note_json(b"[1]").is_err());
        let q = parse_note_query("start_time=1369141261000&description=hi%20there").ok();
        assert_eq!(
            q.map(|q| (q.start_time, q.description)),
            Some((1_369_141_261, Some("hi there".into())))
        );
        assert!(parse_note_query("tsuid=0001").is_err());
    }
}
