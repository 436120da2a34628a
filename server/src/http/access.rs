//! Which role each HTTP request needs when authentication is on (`--auth-file`), and the
//! answers to requests without it.
//!
//! Reads need `read`; puts, remote write, the line protocol and annotation writes need
//! `write`; what deletes data or changes names, and the maintenance endpoints, need `admin`:
//! `/api/admin/*`, deletes (`DELETE /api/query`, or a query with `delete: true`, which
//! [`needs_admin_to_delete`] checks once the body is read), annotation deletes,
//! `/api/uid/assign`, `/api/uid/rename` and `/api/dropcaches`. `/metrics`, the graph page and
//! everything else need `read`. A CORS preflight (`OPTIONS`) carries no credentials, so it
//! is never asked for them; the request it precedes is.

use hyper::header::{HeaderValue, WWW_AUTHENTICATE};
use hyper::{Method, StatusCode};

use super::{INFLUX_V2_WRITE, Route};
use crate::auth::{AuthError, Identity, Role};
use crate::config::Mode;
use crate::resp::{Resp, error};
use crate::store::StoreLocation;

/// The role a request to `route` with `method` needs.
pub(super) fn required_role(route: &Route, method: &Method) -> Role {
    let endpoint = match route {
        Route::Api(ep) => ep.as_str(),
        Route::Other(p) if p == "write" || p == INFLUX_V2_WRITE => return Role::Write,
        _ => return Role::Read,
    };
    let writes = *method == Method::POST || *method == Method::PUT;
    match endpoint {
        "put" | "write" => Role::Write,
        "dropcaches" | "uid/assign" | "uid/rename" => Role::Admin,
        ep if ep == "admin" || ep.starts_with("admin/") => Role::Admin,
        "query" if *method == Method::DELETE => Role::Admin,
        "annotation" | "annotations" | "annotation/bulk" | "annotations/bulk" | "uid/uidmeta"
        | "uid/tsmeta"
            if *method == Method::DELETE =>
        {
            Role::Admin
        }
        "annotation" | "annotations" | "annotation/bulk" | "annotations/bulk" | "uid/uidmeta"
        | "uid/tsmeta"
            if writes =>
        {
            Role::Write
        }
        _ => Role::Read,
    }
}

/// Whether a server in `mode` serves a request to `route` with `method`, as OpenTSDB's
/// `tsd.mode` registers endpoints: `ro` has none that change data (puts, the write protocols,
/// annotation and meta writes, UID assignment and renames, deletes), `wo` none that read it
/// (queries, suggest, lookup, export, the PromQL API, the graph page). Both keep the server's
/// own: version, config, stats, `/metrics`, aggregators, serializers, `dropcaches` and
/// `/api/admin/*`.
pub(super) fn mode_allows(mode: Mode, route: &Route, method: &Method) -> bool {
    let endpoint = match route {
        Route::Api(ep) => ep.as_str(),
        Route::Other(p) => p.as_str(),
        Route::ApiVersionTooHigh | Route::ApiVersionBad(_) => return true,
    };
    let own = matches!(
        endpoint,
        "version"
            | "config"
            | "config/filters"
            | "stats"
            | "metrics"
            | "aggregators"
            | "serializers"
            | "dropcaches"
    ) || endpoint == "admin"
        || endpoint.starts_with("admin/");
    if own {
        return true;
    }
    match required_role(route, method) {
        Role::Read => mode.reads(),
        Role::Write | Role::Admin => mode.writes(),
    }
}

/// The answer to a request `mode` does not serve: a 404, as OpenTSDB answers for an endpoint
/// it did not register, naming the mode.
pub(super) fn not_in_mode(mode: Mode) -> Resp {
    let what = if mode.reads() { "writes" } else { "queries" };
    error(
        StatusCode::NOT_FOUND,
        "Endpoint not found",
        &format!(
            "this server runs with tsd.mode={} and does not serve {what}",
            mode.name()
        ),
    )
}

/// Whether a read replica refuses a request: what mode `ro` does not serve, and the
/// maintenance endpoints that write (a compaction, a backup, which flushes first). Its data
/// changes only through the writer.
pub(super) fn replica_refuses(route: &Route, method: &Method) -> bool {
    !mode_allows(Mode::ReadOnly, route, method)
        || matches!(route, Route::Api(ep) if ep == "admin/compact" || ep == "admin/backup")
}

/// The answer to a write sent to a read replica of `store`: a 403 naming the replica.
pub(super) fn not_on_replica(store: &StoreLocation) -> Resp {
    error(
        StatusCode::FORBIDDEN,
        "Read-only replica",
        &format!(
            "this server is a read replica of {store}: it serves queries and refuses writes; \
             send writes to the writer of {store}"
        ),
    )
}

/// The answer to a refused request: OpenTSDB's error JSON with the status of `err`, and for
/// a 401 the schemes a client may answer with.
pub(super) fn refused(err: &AuthError) -> Resp {
    let status = match err.status() {
        403 => StatusCode::FORBIDDEN,
        _ => StatusCode::UNAUTHORIZED,
    };
    let message = if status == StatusCode::FORBIDDEN {
        "Forbidden"
    } else {
        "Unauthorized"
    };
    let mut resp = error(status, message, &err.to_string());
    if status == StatusCode::UNAUTHORIZED {
        let h = resp.headers_mut();
        h.append(
            WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"strata\""),
        );
        // Lets a browser on the graph page ask for a name and token.
        h.append(
            WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"strata\", charset=\"UTF-8\""),
        );
    }
    resp
}

/// A 403 for a query that deletes when the client lacks `admin`: the verb and the query
/// string are checked by [`required_role`], the body's `delete` flag only here, after it is
/// read. `None` when the request may go on.
pub(crate) fn needs_admin_to_delete(
    granted: Option<&Identity>,
    method: strata_query::QueryMethod,
    query_string: &str,
    body: &[u8],
) -> Option<Resp> {
    let id = granted?;
    if id.roles.has(Role::Admin) {
        return None;
    }
    // Most queries say nothing of deleting: they are not parsed twice.
    let mentions = |hay: &[u8]| hay.windows(6).any(|w| w.eq_ignore_ascii_case(b"delete"));
    if !mentions(body) && !mentions(query_string.as_bytes()) {
        return None;
    }
    let deletes = strata_query::parse_request(method, query_string, body).is_ok_and(|q| q.delete);
    deletes.then(|| {
        refused(&AuthError::Forbidden {
            name: id.name.clone(),
            role: Role::Admin,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_refuses_what_mode_ro_does_and_the_writing_admin_endpoints() {
        let api = |ep: &str| Route::Api(ep.into());
        let (get, post) = (Method::GET, Method::POST);
        for (route, method) in [
            (api("put"), &post),
            (api("write"), &post),
            (Route::Other(INFLUX_V2_WRITE.into()), &post),
            (api("annotation"), &post),
            (api("uid/assign"), &get),
            (api("query"), &Method::DELETE),
            (api("admin/compact"), &post),
            (api("admin/backup"), &post),
        ] {
            assert!(replica_refuses(&route, method), "{route:?} {method}");
        }
        for (route, method) in [
            (api("query"), &post),
            (api("query/last"), &get),
            (api("suggest"), &get),
            (api("search/lookup"), &get),
            (api("dropcaches"), &get),
            (api("stats"), &get),
            (Route::Other("metrics".into()), &get),
            (Route::Other(String::new()), &get),
        ] {
            assert!(!replica_refuses(&route, method), "{route:?} {method}");
        }
    }

    #[test]
    fn modes_serve_what_opentsdb_registers_in_them() {
        let api = |ep: &str| Route::Api(ep.into());
        let other = |p: &str| Route::Other(p.into());
        let (get, post, delete) = (Method::GET, Method::POST, Method::DELETE);
        // (route, method, served in ro, served in wo)
        let cases = [
            (api("put"), &post, false, true),
            (api("write"), &post, false, true),
            (other("write"), &post, false, true),
            (other(INFLUX_V2_WRITE), &post, false, true),
            (api("annotation"), &post, false, true),
            (api("uid/assign"), &get, false, true),
            (api("uid/rename"), &post, false, true),
            (api("query"), &delete, false, true),
            (api("query"), &get, true, false),
            (api("query"), &post, true, false),
            (api("query/last"), &get, true, false),
            (api("suggest"), &get, true, false),
            (api("search/lookup"), &get, true, false),
            (api("export"), &get, true, false),
            (api("annotation"), &get, true, false),
            (other(""), &get, true, false),
            (api("version"), &get, true, true),
            (api("config"), &get, true, true),
            (api("stats"), &get, true, true),
            (other("metrics"), &get, true, true),
            (api("aggregators"), &get, true, true),
            (api("dropcaches"), &get, true, true),
            (api("admin/compact"), &post, true, true),
        ];
        for (route, method, ro, wo) in cases {
            assert_eq!(
                mode_allows(Mode::ReadOnly, &route, method),
                ro,
                "ro {route:?} {method}"
            );
            assert_eq!(
                mode_allows(Mode::WriteOnly, &route, method),
                wo,
                "wo {route:?} {method}"
            );
            assert!(
                mode_allows(Mode::ReadWrite, &route, method),
                "rw {route:?} {method}"
            );
        }
    }

    #[test]
    fn endpoints_need_the_roles_the_docs_list() {
        let api = |ep: &str| Route::Api(ep.into());
        let cases = [
            (api("query"), Method::POST, Role::Read),
            (api("query"), Method::GET, Role::Read),
            (api("query"), Method::DELETE, Role::Admin),
            (api("query/last"), Method::GET, Role::Read),
            (api("suggest"), Method::GET, Role::Read),
            (api("search/lookup"), Method::POST, Role::Read),
            (api("config"), Method::GET, Role::Read),
            (api("put"), Method::POST, Role::Write),
            (api("write"), Method::POST, Role::Write),
            (Route::Other("write".into()), Method::POST, Role::Write),
            (
                Route::Other(INFLUX_V2_WRITE.into()),
                Method::POST,
                Role::Write,
            ),
            (api("annotation"), Method::GET, Role::Read),
            (api("annotation"), Method::POST, Role::Write),
            (api("annotation/bulk"), Method::PUT, Role::Write),
            (api("annotation/bulk"), Method::DELETE, Role::Admin),
            (api("admin/compact"), Method::POST, Role::Admin),
            (api("admin/backup"), Method::POST, Role::Admin),
            (api("uid/assign"), Method::GET, Role::Admin),
            (api("uid/rename"), Method::POST, Role::Admin),
            (api("uid/uidmeta"), Method::GET, Role::Read),
            (api("dropcaches"), Method::GET, Role::Admin),
            (Route::Other("metrics".into()), Method::GET, Role::Read),
            (Route::Other(String::new()), Method::GET, Role::Read),
            (Route::ApiVersionTooHigh, Method::GET, Role::Read),
        ];
        for (route, method, role) in cases {
            assert_eq!(required_role(&route, &method), role, "{route:?} {method}");
        }
    }

    #[test]
    fn a_401_names_the_schemes_and_a_403_does_not() {
        let resp = refused(&AuthError::Missing);
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
        let schemes: Vec<_> = resp.headers().get_all(WWW_AUTHENTICATE).iter().collect();
        assert_eq!(schemes.len(), 2);
        let resp = refused(&AuthError::Forbidden {
            name: "a".into(),
            role: Role::Write,
        });
        assert_eq!(resp.status(), StatusCode::FORBIDDEN);
        assert!(resp.headers().get(WWW_AUTHENTICATE).is_none());
    }
}
