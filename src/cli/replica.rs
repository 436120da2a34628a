//! `serve --store URL --read-only`: a read replica. It follows the writer's manifest in the
//! bucket, serves every query and refuses writes; `--data-dir` holds only its disk cache.

use std::time::{Duration, Instant};

use anyhow::Context;
use strata_server::Config;

use super::dir_lock::DirLock;

/// How often the wait for a writer's first flush is logged.
const WAITING_LOG_EVERY: Duration = Duration::from_secs(30);

/// Opens the replica, waiting for a writer's first flush if the prefix holds no database
/// yet, and serves until a signal stops it.
pub(crate) fn serve(config: Config) -> anyhow::Result<()> {
    let store = config
        .store
        .clone()
        .context("a read replica needs --store")?;
    let bucket = crate::open_bucket(&store)?;
    let storage = crate::object_storage(&store, bucket.clone(), &config.data_dir);
    // The replica's own directory: a writer elsewhere holds its own lock.
    let lock = DirLock::acquire(&config.data_dir)?;
    let trees = partitioned_trees(&config, &store, bucket)?;
    let opts = super::open::tsdb_options(&config, storage)?;
    let started = Instant::now();
    let mut logged: Option<Instant> = None;
    let tsdb = loop {
        let opened = match &trees {
            Some(source) => strata_tsdb::Tsdb::open_read_only_trees(
                &config.data_dir,
                opts.clone(),
                source.clone(),
            ),
            None => strata_tsdb::Tsdb::open_read_only(&config.data_dir, opts.clone()),
        };
        match opened {
            Ok(tsdb) => break tsdb,
            Err(e) if strata_tsdb::is_no_database_yet(&e) => {
                if logged.is_none_or(|t| t.elapsed() >= WAITING_LOG_EVERY) {
                    tracing::warn!(
                        store = %store.location,
                        "no database in the store yet: waiting for a writer's first flush"
                    );
                    logged = Some(Instant::now());
                }
                std::thread::sleep(store.refresh);
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("opening a read replica of {}", store.location));
            }
        }
    };
    tracing::info!(
        store = %store.location,
        data_dir = %config.data_dir.display(),
        series = tsdb.series_count(),
        partitioned = trees.is_some(),
        open_ms = started.elapsed().as_millis() as u64,
        refresh_ms = store.refresh.as_millis() as u64,
        "read replica open"
    );
    let result = crate::serve_until_stopped(config, tsdb);
    drop(lock);
    result
}

/// The trees of the prefix's partitioned writers when it has any (`<prefix>/salt/count`
/// exists): the replica then reads all of them, not the prefix as one tree.
fn partitioned_trees(
    config: &Config,
    store: &strata_server::store::StoreConfig,
    bucket: std::sync::Arc<dyn strata_engine::object_store::ObjectStore>,
) -> anyhow::Result<Option<std::sync::Arc<dyn strata_tsdb::TreeSource>>> {
    use strata_server::store::partition;
    let prefix = store.location.prefix();
    let owners = crate::block_on(partition::salt_owners(&*bucket, prefix))??;
    if owners.is_none() {
        return Ok(None);
    }
    Ok(Some(std::sync::Arc::new(partition::BucketTrees::new(
        bucket,
        prefix,
        config.data_dir.join("cache"),
        store.cache_disk_mb << 20,
    )?)))
}
