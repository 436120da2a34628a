//! HTTP: a thin router over hyper that speaks OpenTSDB's API conventions (path normalisation,
//! `/api/v1/…`, error JSON, CORS), plus `/metrics`, `/api/stats` and the graph page (`/`,
//! [`crate::ui`]).
//!
//! CORS follows OpenTSDB's `tsd.http.request.cors_domains` (OpenTSDB's `HttpQuery` and `RpcHandler`):
//! when it is off an `OPTIONS` request gets 405. When it is on, a request that carries an
//! allowed `Origin` gets the `Access-Control-Allow-*` headers (and a preflight `OPTIONS` gets
//! 200 with no body), a request from another origin gets 200 with the error body `CORS domain
//! not allowed`, and an `OPTIONS` without `Origin` gets 405.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    CONTENT_TYPE, HeaderValue, ORIGIN,
};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::body::too_large;
use crate::config::Cors;
use crate::resp::{Resp, error, json_ok, method_not_allowed, only, query_param, raw, text};
use crate::shared::Shared;
use crate::unwind::CatchUnwind;
use crate::version;

pub(crate) mod access;
mod read_deadline;

/// Serves HTTP/1.1 (with keep-alive) on one connection until the client closes it or the server
/// shuts down. Generic, so a plain connection's socket is used as it is.
pub(crate) async fn serve_connection<S>(stream: S, shared: Arc<Shared>) -> anyhow::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut shutdown = shared.shutdown.clone();
    let shared_config = shared.clone();
    let service = hyper::service::service_fn(move |req| {
        let shared = shared.clone();
        async move {
            let resp = match CatchUnwind::new(route(req, &shared)).await {
                Ok(resp) => resp,
                Err(panic) => {
                    shared
                        .metrics
                        .ingest_panics
                        .with_label_values(&[crate::metrics::HTTP])
                        .inc();
                    tracing::error!(panic, "an HTTP request panicked; answering 500");
                    error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "Internal error",
                        "the server hit a bug serving this request and logged it",
                    )
                }
            };
            Ok::<_, Infallible>(resp)
        }
    });
    let config = &shared_config.config;
    let timed_out = |phase| {
        shared_config
            .metrics
            .connections_timed_out
            .with_label_values(&[phase])
    };
    let limits = read_deadline::Limits {
        header: config.header_timeout,
        idle: config.http_idle_timeout,
        header_timeouts: timed_out(crate::metrics::phase::HTTP_HEADER),
        idle_timeouts: timed_out(crate::metrics::phase::HTTP_IDLE),
    };
    let limited = limits.header.is_some() || limits.idle.is_some();
    let (io, timer) = read_deadline::watch(stream, limits);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.keep_alive(true);
    if limited {
        // The timer decides the deadlines; hyper's own duration is not used.
        builder
            .timer(timer)
            .header_read_timeout(Duration::from_secs(1));
    } else {
        builder.header_read_timeout(None);
    }
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    tokio::select! {
        res = conn.as_mut() => res?,
        _ = shutdown.changed() => {
            conn.as_mut().graceful_shutdown();
            conn.await?;
        }
    }
    Ok(())
}

/// Answers a plaintext request when TLS is required with a 400 and closes the connection.
pub(crate) async fn refuse_plaintext(stream: TcpStream) -> anyhow::Result<()> {
    let service = hyper::service::service_fn(|_req| async {
        let mut resp = error(
            StatusCode::BAD_REQUEST,
            "TLS required",
            "this server takes only TLS connections: use https://",
        );
        resp.headers_mut()
            .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
        Ok::<_, Infallible>(resp)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.keep_alive(false).header_read_timeout(None);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    // A client that never finishes its header gets no answer.
    let _ = tokio::time::timeout(Duration::from_secs(10), conn).await;
    Ok(())
}

/// The endpoint a path names, after OpenTSDB's normalisation.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    /// `api/<endpoint>` with its sub-path, lower-cased, no trailing slash.
    Api(String),
    /// `/api/v<N>` with N > 1.
    ApiVersionTooHigh,
    /// `/api/v<not a number>`.
    ApiVersionBad(String),
    /// Anything else.
    Other(String),
}

fn parse_route(path: &str) -> Route {
    let mut segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    // InfluxDB 2's write endpoint, the one `/api/v2/…` path served.
    if segments.len() == 3
        && segments
            .iter()
            .zip(["api", "v2", "write"])
            .all(|(s, w)| s.eq_ignore_ascii_case(w))
    {
        return Route::Other(INFLUX_V2_WRITE.into());
    }
    match segments.first() {
        Some(first) if first.eq_ignore_ascii_case("api") => {}
        _ => return Route::Other(segments.join("/").to_ascii_lowercase()),
    }
    segments.remove(0);
    if let Some(v) = segments.first().and_then(|s| s.strip_prefix(['v', 'V'])) {
        match v.parse::<u32>() {
            Ok(1) => {
                segments.remove(0);
            }
            Ok(_) => return Route::ApiVersionTooHigh,
            // `/api/version` and friends start with `v` too; a digit after the `v` makes it a
            // version segment, and one that is not a number is a bad one (`/api/v1x`).
            Err(_) if v.starts_with(|c: char| c.is_ascii_digit()) => {
                return Route::ApiVersionBad(segments[0].to_string());
            }
            Err(_) => {}
        }
    }
    Route::Api(segments.join("/").to_ascii_lowercase())
}

/// The route of InfluxDB 2's `/api/v2/write`.
const INFLUX_V2_WRITE: &str = "api/v2/write";

async fn route(req: Request<Incoming>, shared: &Shared) -> Resp {
    let started = std::time::Instant::now();
    let route = parse_route(req.uri().path());
    let endpoint = match &route {
        Route::Api(ep) => ep.clone(),
        Route::Other(p) if p == "metrics" => p.clone(),
        Route::Other(p) if p == "write" => "influx/write".into(),
        Route::Other(p) if p == INFLUX_V2_WRITE => "influx/v2/write".into(),
        _ => "other".into(),
    };
    // `?jsonp=<fn>` wraps the JSON answer of an API call, errors included, as OpenTSDB does.
    let jsonp = match &route {
        Route::Api(_) => {
            query_param(req.uri().query().unwrap_or(""), "jsonp").filter(|f| is_js_callback_name(f))
        }
        _ => None,
    };
    let origin = req
        .headers()
        .get(ORIGIN)
        .and_then(|v| v.to_str().ok())
        .filter(|o| !o.is_empty())
        .map(str::to_owned);
    // A body declared over the limit is refused before a byte of it is read, and before a
    // `100 Continue` invites the client to send it.
    let declared = hyper::body::Body::size_hint(req.body()).lower();
    let resp = if declared > shared.config.max_body_bytes as u64 {
        too_large(shared.config.max_body_bytes)
    } else {
        match cors_check(&shared.config.cors, req.method(), origin.as_deref()) {
            CorsCheck::Serve => serve_authorized(route, req, shared).await,
            CorsCheck::ServeAllowed(origin) => with_cors_headers(
                serve_authorized(route, req, shared).await,
                &origin,
                &shared.config.cors_headers,
            ),
            CorsCheck::Preflight(origin) => {
                with_cors_headers(raw(200, Vec::new()), &origin, &shared.config.cors_headers)
            }
            CorsCheck::Reply(resp) => resp,
        }
    };
    let resp = match jsonp {
        Some(callback) => wrap_jsonp(resp, &callback).await,
        None => resp,
    };
    shared
        .metrics
        .observe_request(&endpoint, started.elapsed().as_secs_f64());
    resp
}

/// A callback name that can go into a script unquoted: JavaScript identifier characters and
/// dots (`ns.cb`). Anything else is ignored, so a request cannot inject script text.
fn is_js_callback_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b == b'.')
}

/// `callback(<body>)` for a JSON response with a body; other responses as they are.
async fn wrap_jsonp(resp: Resp, callback: &str) -> Resp {
    let is_json = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !is_json {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let body = match http_body_util::BodyExt::collect(body).await {
        Ok(collected) => collected.to_bytes(),
        // A `Full` body never fails.
        Err(never) => match never {},
    };
    if body.is_empty() {
        return Response::from_parts(parts, Full::new(body));
    }
    let mut out = Vec::with_capacity(callback.len() + body.len() + 2);
    out.extend_from_slice(callback.as_bytes());
    out.push(b'(');
    out.extend_from_slice(&body);
    out.push(b')');
    let mut resp = Response::from_parts(parts, Full::new(Bytes::from(out)));
    resp.headers_mut().remove(hyper::header::CONTENT_LENGTH);
    resp
}

/// What CORS says about a request.
#[derive(Debug)]
enum CorsCheck {
    /// Not a cross-origin request (or CORS is off): serve it as it is.
    Serve,
    /// An allowed origin: serve it and add the CORS headers.
    ServeAllowed(String),
    /// A preflight from an allowed origin: 200, no body, the CORS headers.
    Preflight(String),
    /// Refused: send this.
    Reply(Resp),
}

fn cors_check(cors: &Cors, method: &Method, origin: Option<&str>) -> CorsCheck {
    let preflight = method == Method::OPTIONS;
    if *cors == Cors::Off {
        return if preflight {
            CorsCheck::Reply(method_not_allowed(method))
        } else {
            CorsCheck::Serve
        };
    }
    match origin {
        None if preflight => CorsCheck::Reply(method_not_allowed(method)),
        None => CorsCheck::Serve,
        Some(o) if cors.allows(o) && preflight => CorsCheck::Preflight(o.to_owned()),
        Some(o) if cors.allows(o) => CorsCheck::ServeAllowed(o.to_owned()),
        // OpenTSDB answers 200 here (browsers block the response without the headers) and
        // says why in the body.
        Some(o) => CorsCheck::Reply(error(
            StatusCode::OK,
            "CORS domain not allowed",
            &format!("The domain [{o}] is not permitted access"),
        )),
    }
}

fn with_cors_headers(mut resp: Resp, origin: &str, allow_headers: &str) -> Resp {
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(origin) {
        h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, v);
    }
    h.insert(
        ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, PUT, DELETE"),
    );
    if let Ok(v) = HeaderValue::from_str(allow_headers) {
        h.insert(ACCESS_CONTROL_ALLOW_HEADERS, v);
    }
    resp
}

/// [`serve_route`] if the server's mode serves the request, and authentication is off or the
/// request's credentials carry the role it needs ([`access`]); the client's identity goes with the request, for the checks that need
/// its body.
async fn serve_authorized(route: Route, mut req: Request<Incoming>, shared: &Shared) -> Resp {
    let mode = shared.config.mode;
    if let Some(store) = shared.config.read_replica_of()
        && access::replica_refuses(&route, req.method())
    {
        return access::not_on_replica(store);
    }
    if !access::mode_allows(mode, &route, req.method()) {
        return access::not_in_mode(mode);
    }
    if let Some(auth) = &shared.auth {
        let role = access::required_role(&route, req.method());
        let header = req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .map(HeaderValue::as_bytes);
        match auth.current().check_header(header, role) {
            Ok(id) => {
                req.extensions_mut().insert(id);
            }
            Err(e) => {
                shared.metrics.count_auth_refusal(crate::metrics::HTTP, &e);
                return access::refused(&e);
            }
        }
    }
    serve_route(route, req, shared).await
}

async fn serve_route(route: Route, req: Request<Incoming>, shared: &Shared) -> Resp {
    let method = req.method().clone();
    match route {
        Route::ApiVersionTooHigh => error(
            StatusCode::NOT_IMPLEMENTED,
            "Requested API version is greater than the max implemented",
            "",
        ),
        Route::ApiVersionBad(v) => error(StatusCode::BAD_REQUEST, "Invalid API version", &v),
        Route::Api(ep) if ep == "stats" => only(&method, &[Method::GET, Method::POST], || {
            json_ok(&crate::stats::json_now(shared))
        }),
        Route::Api(_) if crate::promql::claims(&req) => crate::promql::handle(req, shared).await,
        Route::Api(ep) => crate::api::dispatch(&ep, req, shared).await,
        Route::Other(p) if p == "version" => only(&method, &[Method::GET, Method::POST], || {
            text(StatusCode::OK, version::telnet_lines())
        }),
        Route::Other(p) if p == "metrics" => only(&method, &[Method::GET], || {
            let body = tokio::task::block_in_place(|| shared.metrics.render(&shared.tsdb));
            let mut resp = text(StatusCode::OK, body);
            resp.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static(crate::metrics::Metrics::content_type()),
            );
            resp
        }),
        Route::Other(p) if p == "write" || p == INFLUX_V2_WRITE => {
            let api = if p == "write" {
                strata_ingest::InfluxApi::V1
            } else {
                strata_ingest::InfluxApi::V2
            };
            if method == Method::POST {
                crate::write::influx(api, req, shared).await
            } else {
                method_not_allowed(&method)
            }
        }
        // The graph page at `/` and its assets under `/ui/`.
        Route::Other(p) => {
            crate::ui::serve(&p, &method, req.uri().query().unwrap_or(""), req.headers())
                .unwrap_or_else(|| error(StatusCode::NOT_FOUND, "Page not found", ""))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request that panics (a bug) is answered with a 500 and counted, and the connection
    /// serves the next request.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_that_panics_gets_a_500_and_the_connection_stays() -> anyhow::Result<()> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let dir = tempfile::tempdir()?;
        let tsdb = strata_tsdb::Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default())?;
        let (shared, _keep) = Shared::for_test(tsdb)?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn({
            let shared = shared.clone();
            async move {
                let (stream, _) = listener.accept().await?;
                serve_connection(stream, shared).await
            }
        });
        let mut client = TcpStream::connect(addr).await?;
        client
            .write_all(
                b"GET /api/test/panic HTTP/1.1\r\nHost: x\r\n\r\n\
                  GET /api/version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            )
            .await?;
        let mut raw = String::new();
        client.read_to_string(&mut raw).await?;
        server.await??;
        let first = raw.find("HTTP/1.1 500").unwrap_or(usize::MAX);
        let second = raw.find("HTTP/1.1 200").unwrap_or(0);
        assert!(first < second, "{raw}");
        assert!(raw.contains(r#""message":"Internal error""#), "{raw}");
        let panics = shared.metrics.ingest_panics.with_label_values(&["http"]);
        assert_eq!(panics.get(), 1);
        Ok(())
    }

    #[test]
    fn cors_follows_opentsdb() {
        let get = Method::GET;
        let options = Method::OPTIONS;
        let status = |c: CorsCheck| match c {
            CorsCheck::Reply(r) => r.status().as_u16(),
            CorsCheck::Serve => 1,
            CorsCheck::ServeAllowed(_) => 2,
            CorsCheck::Preflight(_) => 3,
        };
        // Off: plain requests pass, OPTIONS is not allowed.
        assert_eq!(status(cors_check(&Cors::Off, &get, Some("http://a"))), 1);
        assert_eq!(
            status(cors_check(&Cors::Off, &options, Some("http://a"))),
            405
        );
        let on = Cors::parse("http://a.com");
        assert_eq!(status(cors_check(&on, &get, None)), 1);
        assert_eq!(status(cors_check(&on, &get, Some("http://A.com"))), 2);
        assert_eq!(status(cors_check(&on, &options, Some("http://a.com"))), 3);
        assert_eq!(status(cors_check(&on, &options, None)), 405);
        assert_eq!(status(cors_check(&on, &get, Some("http://b.com"))), 200);
        assert_eq!(
            status(cors_check(&Cors::Any, &get, Some("http://b.com"))),
            2
        );
        let resp = with_cors_headers(raw(200, Vec::new()), "http://a.com", "X-A");
        assert_eq!(resp.headers()[ACCESS_CONTROL_ALLOW_ORIGIN], "http://a.com");
        assert_eq!(
            resp.headers()[ACCESS_CONTROL_ALLOW_METHODS],
            "GET, POST, PUT, DELETE"
        );
        assert_eq!(resp.headers()[ACCESS_CONTROL_ALLOW_HEADERS], "X-A");
    }

    #[test]
    fn routes_normalise_like_opentsdb() {
        assert_eq!(parse_route("/api/put/"), Route::Api("put".into()));
        assert_eq!(
            parse_route("/API/Query/Last"),
            Route::Api("query/last".into())
        );
        assert_eq!(parse_route("/api/v1/suggest"), Route::Api("suggest".into()));
        assert_eq!(parse_route("/api/version"), Route::Api("version".into()));
        assert_eq!(parse_route("/api/v2/query"), Route::ApiVersionTooHigh);
        // A digit after the `v` makes a version segment; one that is no number is a 400.
        assert_eq!(
            parse_route("/api/v1x/query"),
            Route::ApiVersionBad("v1x".into())
        );
        assert_eq!(parse_route("/api/vx/query"), Route::Api("vx/query".into()));
        assert_eq!(parse_route("/api"), Route::Api(String::new()));
        assert_eq!(parse_route("/version"), Route::Other("version".into()));
        // The collectors' write endpoints.
        assert_eq!(parse_route("/api/v1/write"), Route::Api("write".into()));
        assert_eq!(parse_route("/write"), Route::Other("write".into()));
        assert_eq!(
            parse_route("/api/v2/write/"),
            Route::Other(INFLUX_V2_WRITE.into())
        );
        assert_eq!(parse_route("/api/v2/query"), Route::ApiVersionTooHigh);
    }
}
