//! The `strata` binary: command-line entry point and wiring.

mod api;
mod config;
mod http;
mod put;
mod server;
mod telnet;
mod version;

use clap::{Parser, Subcommand};

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
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Serve(args) => {
            let config = config::Config::resolve(&args)?;
            let tsdb = open_tsdb(&config)?;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            runtime.block_on(server::serve(config, tsdb))
        }
    }
}

/// Opens the storage, logging how long recovery took.
fn open_tsdb(config: &config::Config) -> anyhow::Result<strata_tsdb::Tsdb> {
    use anyhow::Context;
    let started = std::time::Instant::now();
    let mut opts = strata_tsdb::TsdbOptions::default();
    opts.db.sync = config.fsync.parse()?;
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
