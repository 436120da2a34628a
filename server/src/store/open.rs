//! Builds the `object_store` client for a [`StoreConfig`], and opens it: build, then probe.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use object_store::aws::{AmazonS3Builder, S3ConditionalPut};
use object_store::local::LocalFileSystem;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};

use super::location::StoreLocation;
use super::probe::{ProbeReport, ProbeScope, probe};
use super::retry::RetryReads;
use super::settings::StoreConfig;

/// How hard a client retries failed requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retries {
    /// A few retries within 15 s, for the engine, which rides out a short outage. Longer
    /// outages are the engine's to ride out: a failed flush is tried again (every 10 s at
    /// most) with its memtable kept, so retrying one request for minutes (object_store's
    /// default) would only hold the flush, and `/metrics` would show no failing flush.
    Patient,
    /// One quick retry, for the start-up probe, so that a wrong endpoint is reported in
    /// seconds with its real cause.
    Quick,
}

/// The longest one request may take before it counts as failed; object_store's default.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest a TCP connection to the endpoint may take: a live endpoint, even across
/// regions, connects in well under a second.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest the whole probe may take: a handful of small requests.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// Builds the client for `config`. Nothing is sent yet.
pub fn build_store(config: &StoreConfig, retries: Retries) -> anyhow::Result<Arc<dyn ObjectStore>> {
    match &config.location {
        StoreLocation::File { dir } => {
            let store = LocalFileSystem::new_with_prefix(dir).with_context(|| {
                format!(
                    "bad `store` setting file://{}: the directory must exist",
                    dir.display()
                )
            })?;
            Ok(Arc::new(store))
        }
        StoreLocation::S3 { bucket, .. } => {
            let mut b = AmazonS3Builder::new()
                .with_bucket_name(bucket)
                .with_region(&config.s3_region)
                // Fencing needs create-if-absent: `If-None-Match: *` on PUT.
                .with_conditional_put(S3ConditionalPut::ETagMatch)
                .with_client_options(
                    ClientOptions::new()
                        .with_timeout(REQUEST_TIMEOUT)
                        .with_connect_timeout(CONNECT_TIMEOUT),
                )
                .with_retry(retry_config(retries));
            if let Some(endpoint) = &config.s3_endpoint {
                // S3-compatible servers address buckets by path; AWS by host name.
                b = b
                    .with_endpoint(endpoint)
                    .with_virtual_hosted_style_request(false)
                    .with_allow_http(endpoint.starts_with("http://"));
            }
            if let Some(c) = &config.credentials {
                b = b
                    .with_access_key_id(&c.access_key_id)
                    .with_secret_access_key(&c.secret_access_key);
                if let Some(t) = &c.session_token {
                    b = b.with_token(t);
                }
            }
            let store = b
                .build()
                .with_context(|| format!("cannot set up the S3 client for {}", config.location))?;
            Ok(Arc::new(RetryReads::new(Arc::new(store))))
        }
    }
}

fn retry_config(retries: Retries) -> RetryConfig {
    match retries {
        Retries::Patient => RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: 4,
            retry_timeout: Duration::from_secs(15),
        },
        Retries::Quick => RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: 1,
            retry_timeout: Duration::from_secs(10),
        },
    }
}

/// Builds the store, probes it with a quick-failing client (reachable; and for a writer,
/// create-if-absent is honoured), and returns the engine's client. Every failure names the store and the cause.
pub async fn open_store(
    config: &StoreConfig,
) -> anyhow::Result<(Arc<dyn ObjectStore>, ProbeReport)> {
    let probing = build_store(config, Retries::Quick)?;
    let scope = if config.read_only {
        ProbeScope::Reads
    } else {
        ProbeScope::Writes
    };
    let probed = probe(&*probing, config.location.prefix(), scope);
    let report = tokio::time::timeout(PROBE_TIMEOUT, probed)
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "the store {} did not answer the start-up probe within {} s",
                config.location,
                PROBE_TIMEOUT.as_secs()
            )
        })?
        .with_context(|| format!("the store {} failed the start-up probe", config.location))?;
    Ok((build_store(config, Retries::Patient)?, report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::settings::{StoreArgs, StoreConfig};

    fn file_config(url: &str) -> anyhow::Result<StoreConfig> {
        StoreConfig::resolve(
            &StoreArgs {
                store: Some(url.into()),
                ..StoreArgs::default()
            },
            &|_| None,
        )?
        .context("no store")
    }

    #[tokio::test]
    async fn a_file_store_opens_and_passes_the_probe() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let config = file_config(&format!("file://{}", dir.path().display()))?;
        let (_store, report) = open_store(&config).await?;
        let key = report.key.as_deref().unwrap_or_default();
        assert!(
            key.starts_with("_probe/") && !report.left_behind,
            "{report:?}"
        );
        let replica = StoreConfig {
            read_only: true,
            ..config.clone()
        };
        let (_store, report) = open_store(&replica).await?;
        assert_eq!(report.key, None, "a replica's probe writes nothing");
        let missing = file_config(&format!("file://{}/nope", dir.path().display()))?;
        let err = format!("{:#}", open_store(&missing).await.err().context("opened")?);
        assert!(
            err.contains("`store`") && err.contains("must exist"),
            "{err}"
        );
        Ok(())
    }

    #[tokio::test]
    async fn a_closed_port_fails_quickly_naming_the_bucket() -> anyhow::Result<()> {
        // A port nothing listens on: bound, then closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let config = StoreConfig::resolve(
            &StoreArgs {
                store: Some("s3://strata/p".into()),
                s3_endpoint: Some(format!("http://127.0.0.1:{port}")),
                ..StoreArgs::default()
            },
            &|k| match k {
                "AWS_ACCESS_KEY_ID" => Some("k".into()),
                "AWS_SECRET_ACCESS_KEY" => Some("s".into()),
                _ => None,
            },
        )?
        .context("no store")?;
        let started = std::time::Instant::now();
        let err = format!("{:#}", open_store(&config).await.err().context("opened")?);
        assert!(
            err.contains("s3://strata/p") && err.contains("cannot use the bucket"),
            "{err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{:?}",
            started.elapsed()
        );
        Ok(())
    }
}
