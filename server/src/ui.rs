//! The built-in graph page: `GET /` and its assets under `/ui/`, embedded in the binary so the
//! page works offline and needs no build step. The page itself (`ui/index.html`, `ui/app.js`)
//! talks only to the HTTP API (`/api/query`, `/api/suggest`, `/api/search/lookup`,
//! `/api/aggregators`); see `docs/ui.md`.
//!
//! The page names its assets and the API with relative URLs (`ui/app.js`, `api/query`), so it
//! also works behind a reverse proxy that serves Strata under a path prefix.
//!
//! Caching: the page names each asset with `?v=<hash of all assets>`, so an asset asked for
//! with the current hash can be cached for good (`immutable`), while the page itself and an
//! asset asked for without it are revalidated each time (`no-cache` with an `ETag`), so a new
//! binary never mixes with old cached files.

use std::sync::OnceLock;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, HeaderMap, HeaderValue,
    IF_NONE_MATCH, X_CONTENT_TYPE_OPTIONS,
};
use hyper::{Method, Response, StatusCode};

use crate::resp::{Resp, method_not_allowed, query_param};

/// One embedded file.
#[derive(Debug)]
struct Asset {
    /// The path under `/ui/`, lower-case (the router lower-cases paths outside `/api`).
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const ASSETS: &[Asset] = &[
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("ui/app.js"),
    },
    Asset {
        name: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("ui/style.css"),
    },
    Asset {
        name: "uplot.iife.min.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("ui/vendor/uplot/uplot.iife.min.js"),
    },
    Asset {
        name: "uplot.min.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("ui/vendor/uplot/uplot.min.css"),
    },
];

/// The page, with `{{v}}` where the asset version goes.
const INDEX_TEMPLATE: &str = include_str!("ui/index.html");

/// Everything the page loads comes from this server: the policy makes the browser refuse any
/// other origin, so the page cannot grow a CDN dependency unnoticed. Inline scripts and styles
/// are refused too (uPlot styles its elements through the CSSOM, which the policy allows); the
/// `data:` image is the page's empty favicon, which spares the browser a request for one.
const POLICY: &str = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'";

/// An asset asked for with the current version never changes: a year is the customary
/// "forever" (RFC 9111 caches need a finite max-age).
const CACHE_FOREVER: &str = "public, max-age=31536000, immutable";
/// The page and unversioned asset URLs: cache, but ask the server (cheap with the ETag).
const CACHE_REVALIDATE: &str = "no-cache";

/// FNV-1a, 64 bits: a fixed, dependency-free hash for ETags and the asset version. Not for
/// anything adversarial; it only has to change when the embedded bytes do.
const fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    hash
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// The version the page puts on asset URLs: a hash over every asset.
fn assets_version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let hash = ASSETS.iter().fold(FNV_OFFSET, |h, a| {
            fnv1a(fnv1a(h, a.name.as_bytes()), a.body)
        });
        format!("{:012x}", hash >> 16)
    })
}

/// The page with the asset version filled in.
fn index_html() -> &'static str {
    static PAGE: OnceLock<String> = OnceLock::new();
    PAGE.get_or_init(|| INDEX_TEMPLATE.replace("{{v}}", assets_version()))
}

/// Answers a path outside `/api` (as the router normalised it: no leading or trailing slash,
/// lower case) when it is the page or one of its assets; `None` for any other path.
pub(crate) fn serve(path: &str, method: &Method, query: &str, headers: &HeaderMap) -> Option<Resp> {
    let (content_type, body, cache) = if path.is_empty() {
        let page = index_html();
        (
            "text/html; charset=utf-8",
            page.as_bytes(),
            CACHE_REVALIDATE,
        )
    } else {
        let name = path.strip_prefix("ui/")?;
        let asset = ASSETS.iter().find(|a| a.name == name)?;
        let current = query_param(query, "v").is_some_and(|v| v == assets_version());
        let cache = if current {
            CACHE_FOREVER
        } else {
            CACHE_REVALIDATE
        };
        (asset.content_type, asset.body, cache)
    };
    if *method != Method::GET && *method != Method::HEAD {
        return Some(method_not_allowed(method));
    }
    let etag = format!("\"{:016x}\"", fnv1a(FNV_OFFSET, body));
    let not_modified = headers
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| etag_matches(v, &etag));
    let mut resp = if not_modified {
        let mut r = Response::new(Full::new(Bytes::new()));
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        let mut r = Response::new(Full::new(Bytes::from_static(body)));
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        r
    };
    let h = resp.headers_mut();
    h.insert(CACHE_CONTROL, HeaderValue::from_static(cache));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(ETAG, v);
    }
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if path.is_empty() {
        h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    }
    Some(resp)
}

/// `If-None-Match`: `*` or a list of (possibly weak) entity tags, compared weakly (RFC 9110
/// §13.1.2).
fn etag_matches(header: &str, etag: &str) -> bool {
    header.split(',').map(str::trim).any(|candidate| {
        candidate == "*" || candidate.strip_prefix("W/").unwrap_or(candidate) == etag
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str, query: &str) -> Resp {
        serve(path, &Method::GET, query, &HeaderMap::new())
            .unwrap_or_else(|| panic!("{path} is not served"))
    }

    fn header<'a>(resp: &'a Resp, name: &str) -> &'a str {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    #[test]
    fn the_page_names_every_asset_with_the_current_version() {
        let page = index_html();
        assert!(!page.contains("{{v}}"));
        let v = assets_version();
        for asset in ASSETS {
            assert!(
                page.contains(&format!("\"ui/{}?v={v}\"", asset.name)),
                "the page does not load {}",
                asset.name
            );
            assert_eq!(asset.name, asset.name.to_ascii_lowercase());
        }
        assert!(page.contains(r#"id="chart""#));
    }

    /// Offline: nothing the page loads names another host.
    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        let page = index_html();
        for attr in ["src=\"", "href=\""] {
            for (at, _) in page.match_indices(attr) {
                let target = &page[at + attr.len()..];
                assert!(
                    target.starts_with("ui/") || target.starts_with("data:"),
                    "{}",
                    &target[..target.len().min(60)]
                );
            }
        }
        for name in ["app.js", "style.css"] {
            let asset = ASSETS.iter().find(|a| a.name == name).map(|a| a.body);
            let text = String::from_utf8_lossy(asset.unwrap_or_default());
            assert!(
                !text.contains("http://") && !text.contains("https://"),
                "{name}"
            );
        }
    }

    #[test]
    fn content_types_and_caching() {
        let page = get("", "");
        assert_eq!(page.status(), StatusCode::OK);
        assert_eq!(header(&page, "content-type"), "text/html; charset=utf-8");
        assert_eq!(header(&page, "cache-control"), "no-cache");
        assert!(header(&page, "content-security-policy").contains("default-src 'self'"));
        let js = get("ui/app.js", &format!("v={}", assets_version()));
        assert_eq!(
            header(&js, "content-type"),
            "text/javascript; charset=utf-8"
        );
        assert_eq!(header(&js, "cache-control"), CACHE_FOREVER);
        assert_eq!(header(&js, "x-content-type-options"), "nosniff");
        let css = get("ui/uplot.min.css", "v=old");
        assert_eq!(header(&css, "content-type"), "text/css; charset=utf-8");
        assert_eq!(header(&css, "cache-control"), "no-cache");
    }

    #[test]
    fn a_matching_etag_gets_304() {
        let etag = header(&get("ui/style.css", ""), "etag").to_owned();
        assert!(etag.starts_with('"') && etag.len() == 18, "{etag}");
        let mut headers = HeaderMap::new();
        let value = format!("\"x\", W/{etag}");
        headers.insert(IF_NONE_MATCH, HeaderValue::from_str(&value).unwrap());
        let resp = serve("ui/style.css", &Method::GET, "", &headers).unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(header(&resp, "etag"), etag);
        headers.insert(IF_NONE_MATCH, HeaderValue::from_static("\"other\""));
        let resp = serve("ui/style.css", &Method::GET, "", &headers).unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
    }

    #[test]
    fn other_paths_and_methods() {
        assert!(serve("ui/nope.js", &Method::GET, "", &HeaderMap::new()).is_none());
        assert!(serve("ui", &Method::GET, "", &HeaderMap::new()).is_none());
        assert!(serve("app.js", &Method::GET, "", &HeaderMap::new()).is_none());
        let post = serve("", &Method::POST, "", &HeaderMap::new()).unwrap();
        assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
        let head = serve("ui/app.js", &Method::HEAD, "", &HeaderMap::new()).unwrap();
        assert_eq!(head.status(), StatusCode::OK);
    }
}
