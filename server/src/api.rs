//! The OpenTSDB HTTP API: [`dispatch`] routes every `/api/<ep>`, the small endpoints
//! (`/api/suggest`, `/api/aggregators`, `/api/config/filters`, `/api/dropcaches`) live here,
//! and the larger ones in the submodules.

mod annotation;
mod config;
mod last;
mod lookup;
pub(crate) mod request;
mod series_expr;
mod uid;

use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use serde_json::{Value as Json, json};
use strata_tsdb::UidKind;

use crate::body::read_body;
use crate::resp::{Resp, error, json, json_ok, method_not_allowed, only, query_param, tsdb_error};
use crate::shared::Shared;
use crate::version;
use request::now_ms;

/// Dispatches `/api/<ep>` (normalised: lower case, no version prefix, no trailing slash).
pub(crate) async fn dispatch(ep: &str, req: Request<Incoming>, shared: &Shared) -> Resp {
    let method = req.method().clone();
    match ep {
        // The tests of the panic guard around every request (`crate::unwind`).
        #[cfg(test)]
        "test/panic" => panic!("a panic injected by a test"),
        "version" => only(&method, &[Method::GET, Method::POST], || {
            json(StatusCode::OK, &version::json())
        }),
        "put" if method == Method::POST => crate::put::handle(req, shared).await,
        // Prometheus remote write, at `/api/v1/write`.
        "write" if method == Method::POST => crate::write::remote_write(req, shared).await,
        "write" => method_not_allowed(&method),
        "suggest" if method == Method::POST => match read_body(req, shared).await {
            Ok(body) => suggest(shared, "", Some(&body)),
            Err(resp) => resp,
        },
        "suggest" => only(&method, &[Method::GET], || {
            suggest(shared, req.uri().query().unwrap_or(""), None)
        }),
        "query" if [Method::GET, Method::POST, Method::DELETE].contains(&method) => {
            query(req, shared).await
        }
        "query" => method_not_allowed(&method),
        "export" if [Method::GET, Method::POST].contains(&method) => export(req, shared).await,
        "export" => method_not_allowed(&method),
        "admin/compact" if method == Method::POST => admin_compact(shared),
        "admin/compact" => method_not_allowed(&method),
        "admin/backup" if method == Method::POST => admin_backup(req, shared).await,
        "admin/backup" => method_not_allowed(&method),
        "aggregators" => only(&method, &[Method::GET, Method::POST], aggregators),
        "config/filters" => only(&method, &[Method::GET, Method::POST], config_filters),
        // GET and DELETE, as OpenTSDB 2.4.1's code (its docs say GET and POST).
        "dropcaches" => only(&method, &[Method::GET, Method::DELETE], || {
            dropcaches(shared)
        }),
        "put" => method_not_allowed(&method),
        "search/lookup" if [Method::GET, Method::POST].contains(&method) => {
            lookup::handle(req, shared).await
        }
        "search/lookup" => method_not_allowed(&method),
        "query/last" if [Method::GET, Method::POST].contains(&method) => {
            last::handle(req, shared).await
        }
        "query/last" => method_not_allowed(&method),
        "annotation" | "annotations" | "annotation/bulk" | "annotations/bulk" => {
            annotation::handle(ep, req, shared).await
        }
        "uid/assign" => uid::assign(req, shared).await,
        "uid/uidmeta" => uid::uidmeta(req, shared),
        "uid/tsmeta" => uid::tsmeta(req, shared),
        "uid/rename" => uid::rename(req, shared).await,
        ep if ep.starts_with("uid/") || ep == "uid" => error(
            StatusCode::NOT_IMPLEMENTED,
            "Other UID endpoints have not been implemented yet",
            "",
        ),
        "config" => only(&method, &[Method::GET, Method::POST], || {
            config::config(shared)
        }),
        "serializers" => only(&method, &[Method::GET, Method::POST], config::serializers),
        _ => error(StatusCode::NOT_FOUND, "Endpoint not found", ""),
    }
}

/// Default `max` of `/api/suggest`, as OpenTSDB.
const SUGGEST_DEFAULT_MAX: usize = 25;

/// `/api/suggest`: GET with `type`, `q`, `max`, or POST with the same fields in a JSON object
/// (values as strings or numbers).
pub(crate) fn suggest(shared: &Shared, query: &str, post_body: Option<&[u8]>) -> Resp {
    let (kind, q, max) = match post_body {
        Some(body) => {
            let v: Json = match serde_json::from_slice(body) {
                Ok(v) => v,
                Err(e) => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        "Unable to parse the given JSON",
                        &e.to_string(),
                    );
                }
            };
            let field = |name: &str| match &v[name] {
                Json::String(s) => Some(s.clone()),
                Json::Number(n) => Some(n.to_string()),
                _ => None,
            };
            let Some(kind) = field("type") else {
                return error(StatusCode::BAD_REQUEST, "Missing 'type' parameter", "");
            };
            (kind, field("q").unwrap_or_default(), field("max"))
        }
        None => {
            let Some(kind) = query_param(query, "type") else {
                return error(
                    StatusCode::BAD_REQUEST,
                    "Missing parameter <code>type</code>",
                    "",
                );
            };
            (
                kind,
                query_param(query, "q").unwrap_or_default(),
                query_param(query, "max"),
            )
        }
    };
    let kind = match kind.as_str() {
        "metrics" => UidKind::Metric,
        "tagk" => UidKind::Tagk,
        "tagv" => UidKind::Tagv,
        other => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("Invalid 'type' parameter:{other}"),
                "",
            );
        }
    };
    let max = match max {
        None => SUGGEST_DEFAULT_MAX,
        Some(m) => match m.trim().parse::<i64>() {
            Ok(n) if n > 0 => n as usize,
            Ok(_) => SUGGEST_DEFAULT_MAX,
            Err(_) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "Unable to parse 'max' as a number",
                    "",
                );
            }
        },
    };
    let mut names = shared.tsdb.suggest(kind, &q, max);
    if q.is_empty() {
        // OpenTSDB scans `[0x21, 0x7E)` for an empty prefix, so names starting with `~` or a
        // non-ASCII byte are never suggested for it. They sort last, so dropping them keeps the
        // rest of the answer the same as OpenTSDB's.
        names.retain(|n| {
            n.as_bytes()
                .first()
                .is_some_and(|b| (0x21..0x7e).contains(b))
        });
    }
    json_ok(&json!(names))
}

/// `/api/query`: GET (`m=`/`tsuid=`), POST (JSON) and DELETE.
pub(crate) async fn query(req: hyper::Request<hyper::body::Incoming>, shared: &Shared) -> Resp {
    let method = req.method().clone();
    let query = req.uri().query().unwrap_or("").to_string();
    let accept = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let granted = req.extensions().get::<crate::auth::Identity>().cloned();
    let body = match crate::body::read_body(req, shared).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    if let Some(refused) = crate::http::access::needs_admin_to_delete(
        granted.as_ref(),
        query_method(&method),
        &query,
        &body,
    ) {
        return refused;
    }
    let now_ms = now_ms();
    let tsdb = shared.tsdb.clone();
    let limits = query_limits(shared);
    let request = strata_query::QueryRequest {
        method: query_method(&method),
        query_string: &query,
        accept: accept.as_deref(),
        body: &body,
        now_ms,
    };
    let resp = strata_query::handle_query(&tsdb, &request, &limits, &|work| {
        crate::shared::run_heavy_query(work)
    });
    typed(resp.status, resp.content_type, resp.body)
}

fn query_method(method: &Method) -> strata_query::QueryMethod {
    match *method {
        Method::POST => strata_query::QueryMethod::Post,
        Method::DELETE => strata_query::QueryMethod::Delete,
        _ => strata_query::QueryMethod::Get,
    }
}

fn query_limits(shared: &Shared) -> strata_query::QueryLimits {
    strata_query::QueryLimits {
        max_series: shared.config.query_max_series,
        max_data_points: shared.config.query_max_data_points,
        timeout: shared.config.query_timeout,
        allow_delete: shared.config.allow_delete && shared.config.mode.writes(),
        ..strata_query::QueryLimits::default()
    }
}

/// A response with an explicit content type.
fn typed(status: u16, content_type: &'static str, body: Vec<u8>) -> Resp {
    let mut resp = crate::resp::raw(status, body);
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    resp
}

/// `GET|POST /api/export?format=parquet`: the points a query selects (same query forms as
/// `/api/query`) as a Parquet file, one row per point.
pub(crate) async fn export(req: Request<Incoming>, shared: &Shared) -> Resp {
    let method = req.method().clone();
    let query = req.uri().query().unwrap_or("").to_string();
    match query_param(&query, "format").as_deref() {
        None | Some("parquet") => {}
        Some(other) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("Unsupported export format: {other}"),
                "Supported: parquet",
            );
        }
    }
    let body = match read_body(req, shared).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    let tsdb = shared.tsdb.clone();
    let limits = query_limits(shared);
    let mut out = Vec::new();
    let result = tokio::task::block_in_place(|| {
        strata_query::export_parquet(
            &tsdb,
            query_method(&method),
            &query,
            &body,
            now_ms(),
            &limits,
            &mut out,
        )
    });
    match result {
        Ok(_) => typed(200, strata_query::PARQUET_CONTENT_TYPE, out),
        Err(e) => crate::resp::raw(e.status(), strata_query::error_body(&e)),
    }
}

/// `POST /api/admin/compact`: row-compacts every closed dirty row, flushes the memtables and
/// runs a full engine compaction, then answers with what it did. For tests, benchmarks and
/// operators; it returns only when everything is done.
pub(crate) fn admin_compact(shared: &Shared) -> Resp {
    let tsdb = shared.tsdb.clone();
    let result = tokio::task::block_in_place(|| crate::compact::compact_all(&tsdb));
    match result {
        Ok(report) => json_ok(&json!({
            "rowsExamined": report.rows.rows_examined,
            "rowsCompacted": report.rows.rows_compacted,
            "rowsFailed": report.rows.rows_failed,
            "cellsFolded": report.rows.cells_folded,
            "blockPoints": report.rows.block_points,
            "durationMs": report.duration_ms,
        })),
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Compaction failed",
            &e.to_string(),
        ),
    }
}

/// `POST /api/admin/backup` with `{"to": "/absolute/dir"}`: a consistent copy of the database
/// in that directory, made while writes go on (see `crate::backup`), answered with what was
/// linked, copied and skipped. It returns when the copy is complete.
pub(crate) async fn admin_backup(req: Request<Incoming>, shared: &Shared) -> Resp {
    let body = match read_body(req, shared).await {
        Ok(body) => body,
        Err(resp) => return resp,
    };
    let to = match serde_json::from_slice::<Json>(&body) {
        Ok(v) => match v.get("to") {
            Some(Json::String(to)) if !to.is_empty() => std::path::PathBuf::from(to),
            _ => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "Missing 'to'",
                    "the body must be a JSON object with the backup directory in 'to'",
                );
            }
        },
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "Unable to parse the given JSON",
                &e.to_string(),
            );
        }
    };
    let tsdb = shared.tsdb.clone();
    let data_dir = shared.config.data_dir.clone();
    let result = tokio::task::block_in_place(|| {
        crate::backup::backup(&tsdb, &data_dir, &to, &mut |_, _| {})
    });
    match result {
        Ok(report) => {
            tracing::info!(to = %to.display(), %report, "backup done");
            json_ok(&report.to_json())
        }
        Err(crate::backup::BackupError::Target(e)) => {
            error(StatusCode::BAD_REQUEST, "Bad backup target", &e)
        }
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Backup failed",
            &e.to_string(),
        ),
    }
}

/// `/api/aggregators`: the aggregator names.
pub(crate) fn aggregators() -> Resp {
    json_ok(&json!(strata_query::aggregator_names().collect::<Vec<_>>()))
}

/// `/api/config/filters`: each filter type with a description and examples.
pub(crate) fn config_filters() -> Resp {
    let filters = [
        (
            "literal_or",
            "Matches tag values exactly, case-sensitively; `|` separates alternatives.",
            "host=literal_or(web01|web02)",
        ),
        (
            "iliteral_or",
            "Like literal_or but ignores case.",
            "host=iliteral_or(WEB01|web02)",
        ),
        (
            "not_literal_or",
            "Matches tag values that are none of the listed ones, case-sensitively.",
            "host=not_literal_or(web01|web02)",
        ),
        (
            "not_iliteral_or",
            "Like not_literal_or but ignores case.",
            "host=not_iliteral_or(WEB01)",
        ),
        (
            "wildcard",
            "Matches tag values with `*` standing for any run of characters, case-sensitively. Without a leading or trailing `*` the match is anchored at that end.",
            "host=wildcard(web*), host=wildcard(*.example.com)",
        ),
        (
            "iwildcard",
            "Like wildcard but ignores case.",
            "host=iwildcard(WEB*)",
        ),
        (
            "regexp",
            "Matches tag values against a regular expression.",
            "host=regexp(web[0-9]+)",
        ),
        (
            "not_key",
            "Matches series that do not have the tag key at all.",
            "host=not_key()",
        ),
    ];
    let mut out = serde_json::Map::new();
    for (name, description, examples) in filters {
        out.insert(
            name.into(),
            json!({ "description": description, "examples": examples }),
        );
    }
    json_ok(&Json::Object(out))
}

/// `/api/dropcaches`: drops the UID caches (read again from storage), the write path's series
/// cache and the block cache ([`strata_tsdb::Tsdb::drop_caches`]).
pub(crate) fn dropcaches(shared: &Shared) -> Resp {
    match tokio::task::block_in_place(|| shared.tsdb.drop_caches()) {
        Ok(()) => json_ok(&json!({ "status": "200", "message": "Caches dropped" })),
        Err(e) => tsdb_error(&e),
    }
}
