//! `/api/config` (Strata's effective settings, read-only, in OpenTSDB's key style) and
//! `/api/serializers` (OpenTSDB's `RpcManager`, `SerializerRpc`).

use std::collections::BTreeMap;

use serde_json::{Value as Json, json};
use strata_tsdb::format_retention;

use strata_engine::Compression;

use crate::config::Cors;
use crate::resp::{Resp, json_ok};
use crate::shared::Shared;
use crate::store::StoreConfig;

/// Every setting as `key → string`, sorted by key. OpenTSDB keys where one means the same
/// thing; `strata.*` keys for Strata's own. Values of keys containing `PASS` are masked, as
/// OpenTSDB does.
pub(crate) fn settings(shared: &Shared) -> BTreeMap<String, String> {
    let c = &shared.config;
    let t = shared.tsdb.options();
    let mut m = BTreeMap::new();
    let mut set = |k: &str, v: String| {
        m.insert(k.to_string(), v);
    };
    set("tsd.mode", c.mode.name().into());
    set("tsd.network.bind", c.bind.to_string());
    set("tsd.network.port", c.port.to_string());
    set("tsd.core.connections.limit", c.max_connections.to_string());
    let ms = |d: Option<std::time::Duration>| d.map_or(0, |d| d.as_millis()).to_string();
    set(
        "tsd.core.socket.timeout",
        c.telnet_idle_timeout.map_or(0, |d| d.as_secs()).to_string(),
    );
    set("strata.header_timeout_ms", ms(c.header_timeout));
    set(
        "tsd.query.limits.data_points.default",
        c.query_max_data_points.to_string(),
    );
    set("strata.query_max_series", c.query_max_series.to_string());
    set("strata.http_idle_timeout_ms", ms(c.http_idle_timeout));
    set("tsd.network.worker_threads", c.worker_threads.to_string());
    set("tsd.core.enable_api", "true".into());
    set(
        "tsd.core.auto_create_metrics",
        t.auto_create_metrics.to_string(),
    );
    set(
        "tsd.core.auto_create_tagks",
        t.auto_create_tagks.to_string(),
    );
    set(
        "tsd.core.auto_create_tagvs",
        t.auto_create_tagvs.to_string(),
    );
    set("tsd.core.meta.enable_tsuid_tracking", "true".into());
    set("tsd.core.meta.enable_realtime_ts", "true".into());
    set("tsd.core.preload_uid_cache", "true".into());
    set("tsd.storage.max_tags", t.max_tags.to_string());
    set(
        "tsd.storage.salt.buckets",
        shared.tsdb.salt_buckets().to_string(),
    );
    set("tsd.storage.salt.width", "1".into());
    set("tsd.storage.uid.width.metric", "3".into());
    set("tsd.storage.uid.width.tagk", "3".into());
    set("tsd.storage.uid.width.tagv", "3".into());
    set("tsd.storage.enable_compaction", "true".into());
    set(
        "tsd.http.request.cors_domains",
        match &c.cors {
            Cors::Off => String::new(),
            Cors::Any => "*".into(),
            Cors::Domains(d) => d.join(","),
        },
    );
    set("tsd.http.request.cors_headers", c.cors_headers.clone());
    set("strata.data_dir", c.data_dir.display().to_string());
    set("strata.fsync", c.fsync.clone());
    set(
        "strata.compression",
        match c.compression {
            Compression::None => "none".into(),
            Compression::Lz4 => "lz4".into(),
            Compression::Zstd(level) => format!("zstd:{level}"),
        },
    );
    set("strata.block_size_kb", c.block_size_kb.to_string());
    set("strata.bloom_filters", c.bloom_filters.to_string());
    set("strata.max_line_bytes", c.max_line_bytes.to_string());
    set("strata.max_body_bytes", c.max_body_bytes.to_string());
    set(
        "strata.rowcompact_grace_secs",
        t.rowcompact_grace.as_secs().to_string(),
    );
    // Authentication and TLS: whether they are on, and the files' paths (never their contents).
    set(
        "tsd.core.authentication.enable",
        c.auth_file.is_some().to_string(),
    );
    let path = |p: Option<&std::path::Path>| p.map(|p| p.display().to_string()).unwrap_or_default();
    set("strata.auth_file", path(c.auth_file.as_deref()));
    set(
        "strata.tls_cert",
        path(c.tls.as_ref().map(|t| t.cert.as_path())),
    );
    set(
        "strata.tls_key",
        path(c.tls.as_ref().map(|t| t.key.as_path())),
    );
    set("strata.tls_required", c.tls_required.to_string());
    store_settings(c.store.as_ref(), &mut set);
    let retention = shared.tsdb.retention();
    set("tsd.storage.retention", format_retention(retention.global));
    set(
        "tsd.storage.retention.rules",
        retention
            .rules
            .iter()
            .map(|r| format!("{}={}", r.metric, format_retention(r.keep)))
            .collect::<Vec<_>>()
            .join(","),
    );
    for (k, v) in m.iter_mut() {
        if k.to_ascii_uppercase().contains("PASS") {
            *v = "********".into();
        }
    }
    m
}

/// The `--store` settings; empty values without a store. The access key id is shown so an
/// operator can tell which identity the server uses; the secret and the token never are.
fn store_settings(store: Option<&StoreConfig>, set: &mut impl FnMut(&str, String)) {
    let ms = |d: std::time::Duration| d.as_millis().to_string();
    set(
        "strata.store",
        store.map(|s| s.location.to_string()).unwrap_or_default(),
    );
    set(
        "strata.s3_endpoint",
        store
            .and_then(|s| s.s3_endpoint.clone())
            .unwrap_or_default(),
    );
    set(
        "strata.s3_region",
        store.map(|s| s.s3_region.clone()).unwrap_or_default(),
    );
    set(
        "strata.s3_access_key_id",
        store
            .and_then(|s| s.credentials.as_ref())
            .map(|c| c.access_key_id.clone())
            .unwrap_or_default(),
    );
    set(
        "strata.read_only",
        store.is_some_and(|s| s.read_only).to_string(),
    );
    set(
        "strata.cache_disk_mb",
        store
            .map(|s| s.cache_disk_mb.to_string())
            .unwrap_or_default(),
    );
    set(
        "strata.store_flush_interval_ms",
        store.map(|s| ms(s.flush_interval)).unwrap_or_default(),
    );
    set(
        "strata.refresh_ms",
        store
            .filter(|s| s.read_only)
            .map(|s| ms(s.refresh))
            .unwrap_or_default(),
    );
}

/// `GET /api/config`.
pub(crate) fn config(shared: &Shared) -> Resp {
    let m: serde_json::Map<String, Json> = settings(shared)
        .into_iter()
        .map(|(k, v)| (k, Json::String(v)))
        .collect();
    json_ok(&Json::Object(m))
}

/// `GET /api/serializers`: the one JSON serializer, as OpenTSDB 2.3 lists it, with the
/// formatters and parsers of the endpoints Strata serves.
pub(crate) fn serializers() -> Resp {
    json_ok(&json!([{
        "serializer": "json",
        "formatters": [
            "formatSuggestV1", "formatSerializersV1", "formatAggregatorsV1",
            "formatVersionV1", "formatDropCachesV1", "formatPutV1", "formatUidAssignV1",
            "formatUidMetaV1", "formatTSMetaV1", "formatTSMetaListV1", "formatAnnotationV1",
            "formatAnnotationsV1", "formatAnnotationBulkDeleteV1", "formatQueryV1",
            "formatLastPointQueryV1", "formatConfigV1", "formatFilterConfigV1",
            "formatSearchResultsV1", "formatErrorV1", "formatNotFoundV1"
        ],
        "parsers": [
            "parsePutV1", "parseSuggestV1", "parseUidAssignV1", "parseUidRenameV1",
            "parseQueryV1", "parseLastPointQueryV1", "parseSearchQueryV1",
            "parseAnnotationV1", "parseAnnotationsV1", "parseAnnotationBulkDeleteV1"
        ],
        "class": "net.opentsdb.tsd.HttpJsonSerializer",
        "request_content_type": "application/json",
        "response_content_type": "application/json; charset=UTF-8",
    }]))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::store::{S3Credentials, StoreArgs, StoreConfig};

    fn shown(store: Option<&StoreConfig>) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        super::store_settings(store, &mut |k: &str, v: String| {
            m.insert(k.to_string(), v);
        });
        m
    }

    #[test]
    fn store_settings_are_shown_without_the_secret() -> anyhow::Result<()> {
        let none = shown(None);
        assert_eq!(none["strata.store"], "");
        assert_eq!(none["strata.read_only"], "false");
        let mut c = StoreConfig::resolve(
            &StoreArgs {
                store: Some("s3://strata/prod".into()),
                s3_endpoint: Some("http://127.0.0.1:8333".into()),
                read_only: Some(true),
                refresh_ms: Some(250),
                ..StoreArgs::default()
            },
            // Every variable reads "x": keys, and the region.
            &|_| Some("x".into()),
        )?
        .ok_or_else(|| anyhow::anyhow!("no store"))?;
        c.credentials = Some(S3Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "the-secret".into(),
            session_token: Some("the-token".into()),
        });
        let m = shown(Some(&c));
        assert_eq!(m["strata.store"], "s3://strata/prod");
        assert_eq!(m["strata.s3_endpoint"], "http://127.0.0.1:8333");
        assert_eq!(
            m["strata.s3_region"], "x",
            "AWS_REGION from the environment"
        );
        assert_eq!(m["strata.s3_access_key_id"], "AKIDEXAMPLE");
        assert_eq!(m["strata.read_only"], "true");
        assert_eq!(m["strata.refresh_ms"], "250");
        assert_eq!(m["strata.store_flush_interval_ms"], "10000");
        assert_eq!(m["strata.cache_disk_mb"], "4096");
        let all = format!("{m:?}");
        assert!(
            !all.contains("the-secret") && !all.contains("the-token"),
            "{all}"
        );
        Ok(())
    }
}
