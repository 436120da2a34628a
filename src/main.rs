//! The `strata` binary: command-line entry point and wiring.

mod api;
mod cli;
mod config;
mod http;
mod metrics;
mod put;
mod server;
mod stats;
mod telnet;
mod version;

use clap::{Parser, Subcommand};

/// mimalloc instead of the system allocator. With glibc's malloc the server's resident memory
/// after a bulk load was mostly freed memory the allocator kept in its per-thread arenas
/// (memtables, flush and compaction buffers are large, short-lived and freed on other threads
/// than the one that allocated them).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    Serve(config::ServeArgs),
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
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let default_level = match cli.command {
        Command::Serve(_) => "info",
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
            let config = config::Config::resolve(&args)?;
            let (lock, tsdb) = cli::open_locked(&config)?;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            let result = runtime.block_on(server::serve(config, tsdb));
            drop(runtime);
            drop(lock);
            result
        }
        Command::Import(args) => cli::import::run(&args),
        Command::Scan(args) => cli::scan::run(&args),
        Command::Compact(args) => cli::compact::run(&args),
        Command::Export(args) => cli::export::run(&args),
    }
}
