//! What `version` (telnet) and `/api/version` report.

/// The crate version.
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The two lines of the telnet `version` reply.
pub(crate) fn telnet_lines() -> String {
    format!(
        "net.opentsdb.tools 2.4.1-strata-{VERSION} built at revision unknown (MINT)\nBuilt on unknown by strata@localhost:strata\n"
    )
}

/// The `/api/version` object. Every field is a JSON string: Go clients decode it that way.
pub(crate) fn json() -> serde_json::Value {
    serde_json::json!({
        "version": format!("2.4.1-strata-{VERSION}"),
        "short_revision": "",
        "full_revision": "",
        "timestamp": "0",
        "repo_status": "MINT",
        "user": "strata",
        "host": "localhost",
        "repo": "strata",
        "branch": "main",
    })
}
