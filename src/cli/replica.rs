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
    let storage = crate::object_storage(&store, &config.data_dir)?;
    // The replica's own directory: a writer elsewhere holds its own lock.
    let lock = DirLock::acquire(&config.data_dir)?;
    let opts = super::open::tsdb_options(&config, storage)?;
    let started = Instant::now();
    let mut logged: Option<Instant> = None;
    let tsdb = loop {
        match strata_tsdb::Tsdb::open_read_only(&config.data_dir, opts.clone()) {
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
        open_ms = started.elapsed().as_millis() as u64,
        refresh_ms = store.refresh.as_millis() as u64,
        "read replica open"
    );
    let result = crate::serve_until_stopped(config, tsdb);
    drop(lock);
    result
}
