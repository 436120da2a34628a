//! Opening the data directory: its lock, then the database, for `serve` and the offline
//! commands.

use anyhow::Context;
use strata_server::Config;

use super::dir_lock::DirLock;

/// How long the row compactor waits after a closed row was last dirtied before folding it
/// (`TsdbOptions::rowcompact_settle`).
const ROWCOMPACT_SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

/// Opens the database in `config.data_dir`, logging how long recovery took. The caller must
/// hold the directory's [`DirLock`].
pub(crate) fn open_tsdb(config: &Config) -> anyhow::Result<strata_tsdb::Tsdb> {
    open_tsdb_on(config, strata_engine::Storage::Local)
}

/// As [`open_tsdb`], with the SSTs and manifest in `storage`.
fn open_tsdb_on(
    config: &Config,
    storage: strata_engine::Storage,
) -> anyhow::Result<strata_tsdb::Tsdb> {
    open_tsdb_with(config, storage, |_| {})
}

/// As [`open_tsdb_on`], with `setup` changing the options last.
fn open_tsdb_with(
    config: &Config,
    storage: strata_engine::Storage,
    setup: impl FnOnce(&mut strata_tsdb::TsdbOptions),
) -> anyhow::Result<strata_tsdb::Tsdb> {
    let started = std::time::Instant::now();
    let mut opts = tsdb_options(config, storage)?;
    setup(&mut opts);
    let tsdb = strata_tsdb::Tsdb::open(&config.data_dir, opts)
        .with_context(|| format!("opening the database in {}", config.data_dir.display()))?;
    tracing::info!(
        data_dir = %config.data_dir.display(),
        series = tsdb.series_count(),
        recovery_ms = started.elapsed().as_millis() as u64,
        "database open"
    );
    Ok(tsdb)
}

/// The database options `config` sets, with the SSTs and manifest in `storage`.
pub(crate) fn tsdb_options(
    config: &Config,
    storage: strata_engine::Storage,
) -> anyhow::Result<strata_tsdb::TsdbOptions> {
    let mut opts = strata_tsdb::TsdbOptions::default();
    opts.db.storage = storage;
    opts.db.sync = config.fsync.parse()?;
    opts.db.memtable_bytes = usize::try_from(config.memtable_mb << 20)?;
    opts.db.block_cache_bytes = usize::try_from(config.cache_mb << 20)?;
    opts.rowcompact_settle = ROWCOMPACT_SETTLE;
    opts.data_table.compression = config.compression;
    opts.data_table.block_bytes = usize::try_from(config.block_size_kb << 10)?;
    opts.data_table.filter = if config.bloom_filters {
        strata_engine::FilterMode::Rows
    } else {
        strata_engine::FilterMode::None
    };
    opts.salt_buckets = config.salt_bucket_count;
    opts.uid_widths = config.uid_widths;
    opts.auto_create_metrics = config.auto_create_metrics;
    opts.auto_create_tagks = config.auto_create_tagks;
    opts.auto_create_tagvs = config.auto_create_tagvs;
    opts.retention = config.retention.clone();
    Ok(opts)
}

/// Like [`open_locked`], for commands that only make sense on an existing database (`scan`,
/// `compact`): a mistyped `--data-dir` is an error instead of a new empty database.
pub(crate) fn open_existing(config: &Config) -> anyhow::Result<(DirLock, strata_tsdb::Tsdb)> {
    anyhow::ensure!(
        config.data_dir.is_dir(),
        "no data directory at {}",
        config.data_dir.display()
    );
    open_locked(config)
}

/// Locks the data directory, then opens the database in it.
pub(crate) fn open_locked(config: &Config) -> anyhow::Result<(DirLock, strata_tsdb::Tsdb)> {
    open_locked_on(config, strata_engine::Storage::Local)
}

/// As [`open_locked`], with the SSTs and manifest in `storage`.
pub(crate) fn open_locked_on(
    config: &Config,
    storage: strata_engine::Storage,
) -> anyhow::Result<(DirLock, strata_tsdb::Tsdb)> {
    let lock = DirLock::acquire(&config.data_dir)?;
    let tsdb = open_tsdb_on(config, storage)?;
    Ok((lock, tsdb))
}

/// As [`open_locked_on`], for a writer of salt buckets `owned` (of `buckets`) that shares new
/// names' UIDs through `allocator` (`serve --salt-buckets`).
pub(crate) fn open_locked_partitioned(
    config: &Config,
    storage: strata_engine::Storage,
    allocator: std::sync::Arc<dyn strata_tsdb::UidAllocator>,
    owned: (u8, u8),
    buckets: u8,
) -> anyhow::Result<(DirLock, strata_tsdb::Tsdb)> {
    let lock = DirLock::acquire(&config.data_dir)?;
    let tsdb = open_tsdb_with(config, storage, |opts| {
        opts.uid_allocator = Some(allocator);
        opts.owned_salts = Some(owned);
        opts.salt_buckets = Some(buckets);
    })?;
    Ok((lock, tsdb))
}
