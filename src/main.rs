//! The `strata` binary: command-line entry point and wiring.

mod cli;

use clap::{Parser, Subcommand};

/// mimalloc instead of the system allocator. With glibc's malloc the server's resident memory
/// after a bulk load was mostly freed memory the allocator kept in its per-thread arenas
/// (memtables, flush and compaction buffers are large, short-lived and freed on other threads
/// than the one that allocated them).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_e` (`include/mimalloc.h`, the version
/// libmimalloc-sys 0.1.49 builds); the Rust bindings name no constant for it.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
/// How long mimalloc keeps freed memory before returning it to the OS, in milliseconds
/// (mimalloc's default is 1000). Memtables, their row vectors and flush buffers are freed in
/// bulk every few seconds; kept for a second, that freed memory stays resident on top of the
/// live heap, several times its size at peak. Returned within a few milliseconds, though, the
/// memory of a query over thousands of series (its tag strings and per-series vectors, some
/// MiB) is gone before the next query of a dashboard, which then page faults all of it in
/// again: a fifth of such a query's CPU. A tenth of a second keeps that memory for the
/// queries that follow each other and still returns the memtables' long before the next.
const PURGE_DELAY_MS: std::ffi::c_long = 100;

/// Sets the allocator's options, and turns transparent huge pages off for the process; before
/// any thread is started.
///
/// mimalloc asks for huge pages on its arenas. A partly used 2 MiB page counts whole in RSS, and
/// each purge and refault zeroes 2 MiB, so huge pages raise peak RSS for no CPU gain.
/// `MIMALLOC_ALLOW_THP=0` would do the same, but mimalloc reads it when it first allocates,
/// before `main`; the process-wide switch applies to every later page fault, whatever mimalloc
/// asks of `madvise`.
#[allow(
    unsafe_code,
    reason = "mi_option_set and prctl are C functions; see the SAFETY notes"
)]
fn configure_allocator() {
    // SAFETY: `mi_option_set` stores an integer in mimalloc's option table; it may be called at
    // any time, and the option only changes when freed memory is purged, not what is live.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    // SAFETY: `PR_SET_THP_DISABLE` takes integer arguments and only sets a flag on this
    // process's memory map; it touches no memory of ours. Failure (an old kernel) is harmless:
    // huge pages stay allowed.
    let _ = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
}

/// Strata: an OpenTSDB-compatible time-series database.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the server: OpenTSDB telnet and HTTP on one port.
    // Boxed: the server's flags outweigh every other command's.
    Serve(Box<strata_server::ServeArgs>),
    /// Imports files in OpenTSDB's text import format (`metric timestamp value tag=v …` per
    /// line, plain or gzip) straight into the data directory; the server must not be running
    /// on it.
    Import(cli::import::ImportArgs),
    /// Prints data rows in readable form: rowkey, then each cell or compacted block.
    Scan(cli::scan::ScanArgs),
    /// Offline compaction: row-compacts every closed hour, flushes, and compacts the LSM fully.
    Compact(cli::compact::CompactArgs),
    /// Writes the points a query selects (`/api/query` GET or JSON form) as a Parquet file:
    /// one row per point, with metric, tag, timestamp and value columns.
    Export(cli::export::ExportArgs),
    /// Checks a data directory offline: every SST block, WAL record and the manifest, every
    /// data row, the UID table, the series index and the dirty-row markers. With --fix,
    /// repairs what it can, moving what cannot be read to lost+found/. Exits 0 when clean, 1
    /// when every problem was repaired, 4 when problems are left, 8 when it could not run.
    Fsck(cli::fsck::FsckArgs),
    /// Copies the data directory into a backup directory, consistently; a later backup into
    /// the same directory copies only new files. While `strata serve` runs on the data
    /// directory, use `POST /api/admin/backup` instead.
    Backup(cli::backup::BackupArgs),
    /// Restores a backup into a data directory, which must be empty unless --force, and
    /// checks the result as `strata fsck` does.
    Restore(cli::backup::RestoreArgs),
    /// OpenTSDB's `uid` tool: grep, assign, rename and delete UIDs.
    Uid(cli::uid::UidArgs),
    /// OpenTSDB's command-line query: `strata query 1h-ago sum sys.cpu.user host=web01`.
    /// Prints `metric timestamp value {tags}` per point, or `/api/query`'s JSON.
    Query(cli::query::QueryArgs),
    /// Deletes a metric or some of its series (`METRIC [tagk=tagv …]`): the points, the
    /// series index entries and the names no series uses any more.
    Delete(cli::delete::DeleteArgs),
}

fn main() -> anyhow::Result<()> {
    configure_allocator();
    let cli = Cli::parse();
    let default_level = match cli.command {
        Command::Serve(_) => "info",
        // fsck reports what the engine would log as it opens a damaged directory.
        Command::Fsck(_) => "error",
        // The offline tools print their own results; only problems are logged.
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Serve(args) => {
            let config = strata_server::Config::resolve(&args)?;
            if config.read_replica_of().is_some() {
                return cli::replica::serve(config);
            }
            let (lock, tsdb) = match &config.store {
                Some(store) if store.salt_range.is_some() => open_partitioned(&config, store)?,
                Some(store) => {
                    let storage = object_storage(store, open_bucket(store)?, &config.data_dir);
                    cli::open::open_locked_on(&config, storage)?
                }
                None => cli::open::open_locked_on(&config, strata_engine::Storage::Local)?,
            };
            let flusher = config
                .store
                .as_ref()
                .map(|store| cli::flusher::Flusher::spawn(tsdb.clone(), store.flush_interval))
                .transpose()?;
            let result = serve_until_stopped(config, tsdb);
            drop(flusher);
            drop(lock);
            result
        }
        Command::Import(args) => cli::import::run(&args),
        Command::Scan(args) => cli::scan::run(&args),
        Command::Compact(args) => cli::compact::run(&args),
        Command::Export(args) => cli::export::run(&args),
        Command::Fsck(args) => std::process::exit(cli::fsck::run(&args)),
        Command::Backup(args) => cli::backup::run_backup(&args),
        Command::Restore(args) => cli::backup::run_restore(&args),
        Command::Uid(args) => cli::uid::run(&args),
        Command::Query(args) => cli::query::run(&args),
        Command::Delete(args) => cli::delete::run(&args),
    }
}

/// Serves `tsdb` on the server's runtime until a signal stops it.
fn serve_until_stopped(
    config: strata_server::Config,
    tsdb: strata_tsdb::Tsdb,
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.worker_threads)
        .enable_all()
        .build()?;
    let result = runtime.block_on(strata_server::serve(config, tsdb));
    drop(runtime);
    result
}

/// Runs `fut` to completion on a runtime of its own, from a thread outside any runtime: for
/// the object-store calls of start-up and of the offline commands.
pub(crate) fn block_on<F: std::future::Future>(fut: F) -> anyhow::Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok(runtime.block_on(fut))
}

/// The bucket of `--store`, checked with the start-up probe (a replica's reads only).
pub(crate) fn open_bucket(
    store: &strata_server::store::StoreConfig,
) -> anyhow::Result<std::sync::Arc<dyn strata_engine::object_store::ObjectStore>> {
    Ok(block_on(strata_server::store::open_store(store))??.0)
}

/// `serve --store`: the SSTs and the manifest in `bucket`, with a disk cache in
/// `data_dir/cache`.
fn object_storage(
    store: &strata_server::store::StoreConfig,
    bucket: std::sync::Arc<dyn strata_engine::object_store::ObjectStore>,
    data_dir: &std::path::Path,
) -> strata_engine::Storage {
    strata_engine::Storage::Object(strata_engine::ObjectStorage::new(
        bucket,
        store.location.prefix(),
        data_dir.join("cache"),
        store.cache_disk_mb << 20,
    ))
}

/// `serve --store --salt-buckets LO-HI`: claims the salt buckets under the prefix, and opens
/// the database with its engine files in the range's own tree under the prefix, refusing
/// points of other buckets, and with new names' UIDs shared through the bucket.
fn open_partitioned(
    config: &strata_server::Config,
    store: &strata_server::store::StoreConfig,
) -> anyhow::Result<(cli::dir_lock::DirLock, strata_tsdb::Tsdb)> {
    use strata_server::store::partition;
    let range = store
        .salt_range
        .ok_or_else(|| anyhow::anyhow!("no salt_buckets setting"))?;
    let buckets = config
        .salt_bucket_count
        .unwrap_or(partition::DEFAULT_SALT_BUCKETS);
    let bucket = open_bucket(store)?;
    let prefix = store.location.prefix();
    block_on(partition::claim_salt_range(
        &*bucket, prefix, range, buckets,
    ))??;
    let tree = partition::tree_prefix(prefix, range);
    tracing::info!(store = %store.location, tree, salt_buckets = %range, "partitioned writer");
    let allocator = std::sync::Arc::new(partition::BucketUidAllocator::new(
        bucket.clone(),
        prefix,
        &range.tree(),
    )?);
    let storage = strata_engine::Storage::Object(strata_engine::ObjectStorage::new(
        bucket,
        tree,
        config.data_dir.join("cache"),
        store.cache_disk_mb << 20,
    ));
    cli::open::open_locked_partitioned(config, storage, allocator, (range.lo, range.hi), buckets)
}

#[cfg(test)]
mod tests {
    #[test]
    #[allow(
        unsafe_code,
        reason = "mi_option_get and prctl are C functions that only read a setting"
    )]
    fn the_purge_delay_is_set_and_huge_pages_are_off() {
        super::configure_allocator();
        // SAFETY: reads an integer from mimalloc's option table.
        let got = unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert_eq!(got, super::PURGE_DELAY_MS);
        // The index names the purge delay: in `mi_option_e` it comes just before
        // `use_numa_nodes`, which the bindings do name.
        assert_eq!(
            super::MI_OPTION_PURGE_DELAY,
            libmimalloc_sys::mi_option_use_numa_nodes - 1
        );
        // SAFETY: `PR_GET_THP_DISABLE` takes integer arguments and returns the flag.
        let disabled = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
        assert_eq!(
            disabled, 1,
            "transparent huge pages are off for the process"
        );
    }
}
